package actors

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"reflect"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"go.opentelemetry.io/otel/trace"

	"github.com/groveml/grove/actors/lifecycle"
	"github.com/groveml/grove/auth"
	"github.com/groveml/grove/cluster/forward"
	"github.com/groveml/grove/conf/modelconfig"
	"github.com/groveml/grove/servables"
	"github.com/groveml/grove/tracing"
)

// A System in a cluster (docs/cluster.md): the node agent (actors/node)
// tells it its share of the models (SetShare), which the supervisor
// applies as a filter on the config in force; the router forwards a
// request for a model not ready here to a node that has it (Options.Remote);
// and Predict serves the requests other nodes forward here, locally only.

// Remote is the rest of a cluster as the router sees it: which models
// other nodes have ready, and the forwarding of a request to one of them.
// Its methods run off the router's goroutine, except Serves, which must be
// cheap and never block.
type Remote interface {
	// Serves reports whether another node has path ready.
	Serves(path string) bool
	// Paths lists the paths other nodes have ready (ModelPaths adds
	// them: the front ends take a request for any of them).
	Paths() []string
	// Forward runs req on another node that has its model ready and
	// returns the answer; it returns when ctx is done.
	Forward(ctx context.Context, req forward.Request) (forward.Answer, error)
	// Model describes path as a node that has it ready published it
	// (metadata, serving, the version a versioned entry serves); false
	// when no other node has it ready. It must be cheap and never block.
	Model(path string) (forward.ModelInfo, bool)
	// Awaits reports whether path is an on-demand model of the cluster
	// that no node has ready and the placement table does not place on
	// this node: Forward then has the controller place it, waits for it
	// within the request's deadline and forwards the request to the node
	// that loads it. It must be cheap and never block.
	Awaits(path string) bool
	// Want has the controller place path, an on-demand model that no
	// node has ready, though no request asks for it: a contract's
	// release whose validity waits on its model's load is never picked
	// until then. It reports false when path is not awaited (Awaits) and
	// nothing was asked. It must be cheap and never block.
	Want(path string) bool
}

// ModelInfo describes the model this node serves at path (a version's
// path, or a versioned entry's, whose Newest it names), for the node's
// member record; false when it serves none there. Other nodes' models
// are not described.
func (s *System) ModelInfo(path string) (forward.ModelInfo, bool) {
	c := (*s.routes.Load())[path]
	if c == nil {
		return forward.ModelInfo{}, false
	}
	meta := c.metadata()
	info := forward.ModelInfo{Checksum: c.checksum, LoadedAt: c.loadedAt.UTC(), Runtime: meta.Runtime, Inputs: meta.Inputs, Outputs: meta.Outputs,
		Signature: meta.Signature, Parameters: meta.Parameters, ByPosition: meta.ByPosition, UnnamedOutputs: meta.UnnamedOutputs, OutputsDeclared: meta.OutputsDeclared,
		Replicas: c.serving.Replicas, MaxBatchRows: c.serving.MaxBatchRows, MaxQueueDelay: c.serving.MaxQueueDelay}
	if c.path != path {
		info.Newest = c.path
	}
	return info, true
}

// LoadPolicy is the server's load_policy: when a model entry without a
// load of its own is loaded (modelconfig.Model.OnDemand's default).
func (s *System) LoadPolicy() modelconfig.Load { return s.opts.LoadPolicy }

// remoteModel describes path as another node serves it, for a path not
// served here.
func (s *System) remoteModel(path string) (forward.ModelInfo, bool) {
	if s.opts.Remote == nil {
		return forward.ModelInfo{}, false
	}
	return s.opts.Remote.Model(path)
}

// setShare gives the supervisor this node's share of a cluster's models.
type setShare struct{ paths map[string]bool }

// SetShare makes the system load only the models of the config whose
// entry path is in paths (a version's entry counts for each of its
// versions) and unload, after their grace period, the others: this
// node's share of a cluster's placement table. nil, the default, is
// every model (a single server). Registered models are not filtered.
func (s *System) SetShare(paths []string) {
	var m map[string]bool
	if paths != nil {
		m = make(map[string]bool, len(paths))
		for _, p := range paths {
			m[p] = true
		}
	}
	s.as.Root.Send(s.supervisor, setShare{paths: m})
}

// shared returns the models of the share (all of them without one).
func (s *supervisorActor) shared(models []modelconfig.Model) []modelconfig.Model {
	if s.share == nil {
		return models
	}
	out := make([]modelconfig.Model, 0, len(models))
	for _, m := range models {
		if s.share[m.EntryPath()] {
			out = append(out, m)
		}
	}
	return out
}

// setShare applies a new share to the config in force (the first config
// applied takes it when none is yet).
func (s *supervisorActor) setShare(ctx actor.Context, m setShare) {
	s.share = m.paths
	if s.configured == nil {
		return
	}
	models := s.shared(s.configured)
	shared, configured := pathSet(models), pathSet(s.configured)
	for _, p := range s.plan.Paths() {
		if p.Phase != lifecycle.Evicting && !p.Registered && p.Active != nil && !shared[p.Name] && configured[p.Name] {
			s.log.Info("model placed on other cluster nodes; unloading after grace period", "model", p.Name, "grace", p.Active.Meta.EvictionGracePeriod)
		}
	}
	s.apply(ctx, lifecycle.ConfigApplied{Models: models})
	s.loadPlaced(ctx)
}

// loadPlaced, on a cluster node, loads the on-demand models of its share
// that have no content: the controller placed them here because their
// demand asks for a copy (or their min_nodes keeps one), so they load at
// once rather than on the first request that reaches this node. A
// single server loads them on demand only.
func (s *supervisorActor) loadPlaced(ctx actor.Context) {
	if !s.sys.opts.ClusterNode || s.share == nil {
		return
	}
	for _, p := range s.plan.Paths() {
		if s.plan.OnDemand(p) && p.Active == nil && p.Job == nil && p.Phase == lifecycle.Unloaded {
			s.apply(ctx, lifecycle.Demand{Path: p.Name})
		}
	}
}

// appliedConfig is the model config in force and a channel closed when
// another replaces it.
type appliedConfig struct {
	cfg     *modelconfig.Config
	changed chan struct{}
}

// publishConfig publishes cfg as the config in force (supervisor only).
// A config equal to the one in force changes nothing.
func (s *System) publishConfig(cfg *modelconfig.Config) {
	old := s.applied.Load()
	if old.cfg != nil && reflect.DeepEqual(old.cfg, cfg) {
		return
	}
	s.applied.Store(&appliedConfig{cfg: cfg, changed: make(chan struct{})})
	close(old.changed)
}

// AppliedConfig returns the model config last applied (nil before the
// first) and a channel closed when another config is applied.
func (s *System) AppliedConfig() (*modelconfig.Config, <-chan struct{}) {
	a := s.applied.Load()
	return a.cfg, a.changed
}

// Predict serves a request another node forwarded here, on this node's
// own ready model only (forward.Local): never forwarded again, not
// logged (the node the caller called logs it), at shadow priority when it
// is a shadow copy, with the caller's identity the forward server put in
// ctx. A model not ready here fails Unavailable, so that the forwarding
// node tries another replica.
func (s *System) Predict(ctx context.Context, req forward.ForwardedRequest) (forward.Answer, error) {
	res, err := s.runUnlogged(forwardedBatch(ctx, req, s.peerAPIs.label(req.API)))
	if err != nil {
		return forward.Answer{}, err
	}
	return forwardedAnswer(req, res[0])
}

// PredictAsync is Predict for a caller that does not wait
// (forward.AsyncLocal, the framed transport's reader): done gets the
// answer once, on the goroutine that has it (the model actor's, or the
// one that ends the request at its deadline, its cancellation or the
// actors' stop), which saves the serving node two goroutine hand-offs per
// forwarded request. A panic in done, or in Grove's code that makes its
// answer, costs that answer alone (answerForwarded, recoverForwarded).
func (s *System) PredictAsync(ctx context.Context, req forward.ForwardedRequest, done func(forward.Answer, error)) {
	if s.closing.Load() {
		s.answerForwarded(req.ModelPath, done, forward.Answer{}, ErrStopped)
		return
	}
	b := forwardedBatch(ctx, req, s.peerAPIs.label(req.API)) // served alone (servesAlone): no router
	// done runs once, as Predict returns once: with the batch's results
	// (its model's answer, or its expiry at the deadline, counted as
	// runUnlogged counts it), or with the caller's cancellation or the
	// actors' stop, which leave the request to its model unclaimed, as
	// runUnlogged does, so that the model counts what it does with it.
	var replied atomic.Bool
	var mu sync.Mutex // the ends below are set before either can be used
	var ends [2]func() bool
	reply := func(a forward.Answer, err error) {
		if !replied.CompareAndSwap(false, true) {
			return
		}
		mu.Lock()
		for _, stop := range ends {
			stop()
		}
		mu.Unlock()
		s.answerForwarded(req.ModelPath, done, a, err)
	}
	// onReply runs on the goroutine that ends the batch: the model actor's,
	// or a timer's (default_timeout_ms, an on-demand load's wait).
	b.onReply = func(res []Result) {
		defer s.recoverForwarded(req.ModelPath, reply)
		reply(forwardedAnswer(req, res[0]))
	}
	mu.Lock()
	ends[0] = context.AfterFunc(ctx, func() {
		defer s.recoverForwarded(req.ModelPath, reply)
		if pastDeadline(ctx, time.Now()) {
			b.expireUnanswered(fmt.Errorf("%w: no answer within the request's deadline", servables.ErrDeadlineExceeded), &s.ways)
			return
		}
		reply(forward.Answer{}, ctx.Err())
	})
	ends[1] = context.AfterFunc(s.stoppedCtx, func() { reply(forward.Answer{}, ErrStopped) })
	mu.Unlock()
	s.ways.toModel(s.as.Root.Send, b, 0, nil)
}

// answerForwarded calls done, PredictAsync's caller's, with the answer
// to a forwarded request for path: a and err. done runs on whichever
// goroutine has the answer (a model actor's, a timer's, a context's
// callback), none of which recovers a panic: a panic in it (a bug, in
// the transport's answer) is logged with its stack and counted
// (recoverJob, actor="forward_reply"), and the request is left with
// whatever done sent: done is called once, never again.
func (s *System) answerForwarded(path string, done func(forward.Answer, error), a forward.Answer, err error) {
	defer func() {
		if v := recover(); v != nil {
			_ = recoverJob(s.log, s.metrics, "forward_reply", "answer to a request for model "+path+" that another node forwarded here", v)
		}
	}()
	done(a, err)
}

// recoverForwarded, deferred by PredictAsync's callbacks, recovers a
// panic in Grove's code that makes the answer to a forwarded request for
// path before done is called (recoverJob, actor="forward_reply"), and
// answers the request with the internal error by reply, unless it was
// answered.
func (s *System) recoverForwarded(path string, reply func(forward.Answer, error)) {
	if v := recover(); v != nil {
		reply(forward.Answer{}, recoverJob(s.log, s.metrics, "forward_reply", "answer to a request for model "+path+" that another node forwarded here", v))
	}
}

// forwardedBatch is the one-request batch of a forwarded request, whose
// API labels this node's metrics as api (peerAPIs.label).
func forwardedBatch(ctx context.Context, req forward.ForwardedRequest, api string) *batch {
	if req.Priority == forward.Shadow {
		api += "-shadow" // as this node counts its own shadow copies
	}
	b := newBatch(ctx, []Request{{API: api, ModelPath: req.ModelPath, Inputs: req.Inputs, RequestID: req.RequestID,
		Contract: req.Contract, Release: req.Release, Configs: req.Configs, Positional: req.Positional, TypeNamed: req.TypeNamed}})
	b.local, b.shadow = true, req.Priority == forward.Shadow
	if b.shadow {
		b.startBy = req.StartBy
	}
	return b
}

// forwardedAnswer is the answer to forwarded request req whose result is
// r.
func forwardedAnswer(req forward.ForwardedRequest, r Result) (forward.Answer, error) {
	if r.Err != nil {
		if errors.Is(r.Err, ErrModelNotFound) {
			return forward.Answer{}, servables.NewError(servables.Unavailable, fmt.Sprintf("model %s is not ready on this node", req.ModelPath))
		}
		return forward.Answer{}, r.Err
	}
	return forward.Answer{Checksum: r.Checksum, Outputs: r.Outputs, UnnamedOutputs: r.UnnamedOutputs, Queued: r.Queued, Compute: r.Compute}, nil
}

// servesAlone reports whether b is a call the caller's goroutine takes
// to its model actor itself (toModel) instead of the router: one request,
// routed through no contract, with no shadow copies. The router would
// only pass it on; skipping its mailbox saves a goroutine hand-off, and
// a caller's own request may run on its goroutine (System.serveAlone). A
// request toModel leaves alone (its model is not here and another node
// has it) is forwarded on the caller's goroutine (forwardAlone); one
// another node forwarded here (b.local) never is: toModel answers it.
func (s *System) servesAlone(b *batch) bool {
	return len(b.reqs) == 1 && b.score == nil && len(b.reqs[0].Shadows) == 0
}

// forwardRequest is req as handed to another node, at priority p.
func forwardRequest(ctx context.Context, req *Request, path string, p forward.Priority) forward.Request {
	id, ok := auth.FromContext(ctx)
	if !ok {
		id = auth.Identity{Method: "none"}
	}
	return forward.Request{ModelPath: path, Inputs: req.Inputs, Positional: req.Positional, TypeNamed: req.TypeNamed, RequestID: req.RequestID,
		Priority: p, Caller: id, API: req.API, Configs: req.Configs, Contract: req.Contract, Release: req.Release}
}

// mayForward reports whether a request for path that is not ready here
// goes to another node: a cluster node that has it ready, or, for an
// on-demand model ready nowhere and not placed here, the node the
// controller places it on (Remote.Awaits), unless the batch was
// forwarded here (one hop) or must be served here.
func (w *ways) mayForward(b *batch, path string) bool {
	return w.remote != nil && !b.local && !forward.Forwarded(b.ctx) && (w.remote.Serves(path) || w.remote.Awaits(path))
}

// toNode forwards item i of b to another node that has its model ready
// and waits for the answer, on the calling goroutine: the router's
// forward calls it on a goroutine of its own, forwardAlone on its
// caller's. The call carries the caller's deadline and identity, ends
// when the caller goes away or stop is done (Stop), and is traced under
// a forward span when the caller's trace records.
func (w *ways) toNode(stop context.Context, b *batch, i int) (forward.Answer, error) {
	req := &b.reqs[i]
	fr := forwardRequest(b.ctx, req, req.ModelPath, forward.User)
	ctx, cancel := context.WithCancel(b.ctx)
	defer cancel()
	defer context.AfterFunc(stop, cancel)()
	ctx, span := tracing.Start(ctx, tracing.SpanForward)
	a, err := w.remote.Forward(ctx, fr)
	if span.IsRecording() {
		traceForward(span, fr.ModelPath, a, err)
	}
	return a, err
}

// forward answers item i of b from another node (toNode); ans, if not
// nil, gets the answer for the shadow copies to compare with. The request
// counts in this node's grove_cluster_forwarded_total and
// grove_cluster_forward_duration_seconds, not in its per-model metrics:
// the serving node counts it there.
func (r *routerActor) forward(b *batch, i int, ans *championAnswer) {
	start := time.Now()
	// The router never waits: the call runs on a goroutine of its own
	// (forwardItem).
	r.background(func(sctx context.Context) { r.forwardItem(sctx, b, i, ans, start) })
}

// forwardItem forwards item i of b, sent at start, to another node and
// waits for the answer, on a goroutine of its own (forward), until stop
// is done. The answer is the item's, like a model actor's, only if
// nobody claimed it meanwhile (its caller expires it at its deadline:
// runUnlogged). The call counts in the hop's metrics whoever waits. A
// panic in it (a bug, in the cluster's client or in Grove) fails this
// item alone (recoverJob): counted as a failed forward, answered with the
// internal error at once unless it was answered already, and ans told the
// caller got no outputs.
func (r *routerActor) forwardItem(stop context.Context, b *batch, i int, ans *championAnswer, start time.Time) {
	req := &b.reqs[i]
	var counted, claimed, done bool
	defer func() {
		if v := recover(); v != nil {
			err := recoverJob(r.log, r.metrics, "forward", "forward of a request for model "+req.ModelPath, v)
			if !counted {
				r.metrics.countForward(req.ModelPath, req.API, err, start)
			}
			if done {
				return
			}
			if claimed || b.claim(i) {
				setForwarded(&b.results[i], req, &forward.Answer{}, err)
				ans.answer(nil, true, 0)
				b.finish()
				return
			}
			ans.answer(nil, true, 0)
		}
	}()
	a, err := r.toNode(stop, b, i)
	r.metrics.countForward(req.ModelPath, req.API, err, start)
	counted = true
	if claimed = b.claim(i); claimed {
		setForwarded(&b.results[i], req, &a, err)
		ans.answer(a.Outputs, err != nil, a.Compute)
		done = true // finish, once, whatever it does
		b.finish()
	} else {
		done = true
		ans.answer(nil, true, 0)
	}
}

// countForward counts a request for path that api handed to another node
// at start and its outcome err, in the forwarding node's metrics (the
// serving node counts it in the per-model ones).
func (m *Metrics) countForward(path, api string, err error, start time.Time) {
	m.forwarded.WithLabelValues(path, forwardResult(err)).Inc()
	m.forwardTime.WithLabelValues(api).Observe(time.Since(start).Seconds())
}

// setForwarded writes the answer another node gave to req into res.
func setForwarded(res *Result, req *Request, a *forward.Answer, err error) {
	res.ModelPath, res.ContentPath, res.Checksum, res.Outputs, res.Err = req.ModelPath, req.ModelPath, a.Checksum, a.Outputs, err
	res.UnnamedOutputs, res.Queued, res.Compute = a.UnnamedOutputs, a.Queued, a.Compute
}

// forwardsAlone reports whether b is a call the caller's goroutine
// forwards itself (forwardAlone) instead of the router: one request,
// routed through no contract and with no shadow copies, for a model not
// ready here that another node has ready, on a node that may forward it.
// The router would do nothing with it but hand it to a goroutine that
// forwards it; skipping the router's mailbox and that goroutine saves two
// goroutine hand-offs on the forwarding node, and the reply channel a
// third (docs/cluster.md, "Troubleshooting").
func (s *System) forwardsAlone(b *batch) bool {
	if s.opts.Remote == nil || len(b.reqs) != 1 || b.score != nil || b.local || len(b.reqs[0].Shadows) > 0 || forward.Forwarded(b.ctx) {
		return false
	}
	path := b.reqs[0].ModelPath
	return (*s.routes.Load())[path] == nil && (s.opts.Remote.Serves(path) || s.opts.Remote.Awaits(path))
}

// forwardAlone forwards b's one request to another node on the caller's
// goroutine (toNode), as the router's forward would: the same result,
// metrics and deadline; Stop cancels it.
func (s *System) forwardAlone(b *batch) ([]Result, error) {
	req := &b.reqs[0]
	start := time.Now()
	a, err := s.ways.toNode(s.ctx, b, 0)
	// Unlike the router's forward, the caller's goroutine has the answer
	// itself: no other goroutine sees b, so the item is not claimed, and
	// what runUnlogged does for a batch it waits for is done here. An
	// answer past the caller's deadline is DeadlineExceeded, but for one
	// that says when to retry (RetryAfter: "model is loading", the remote
	// having waited within the deadline for an on-demand model's placement
	// or load, or this node's lost cluster session), which stays that
	// answer, 503 / UNAVAILABLE with Retry-After, as on one node; a caller
	// gone returns its context's error, and Stop ErrStopped, at once,
	// neither counted in the hop's metrics (the router's forward
	// goroutine, which cannot tell whether anyone still waits, counts
	// them).
	if err != nil {
		switch {
		case s.ctx.Err() != nil:
			return nil, ErrStopped
		case b.ctx.Err() != nil && !pastDeadline(b.ctx, time.Now()):
			return nil, b.ctx.Err()
		case b.ctx.Err() != nil:
			if _, loading := RetryAfter(err); !loading {
				err = fmt.Errorf("%w: no answer within the request's deadline (%v)", servables.ErrDeadlineExceeded, err)
			}
		}
	}
	s.metrics.countForward(req.ModelPath, req.API, err, start)
	setForwarded(&b.results[0], req, &a, err)
	return b.results, nil
}

// shadowRunAllowance is how long a shadow copy sent to another node may
// run once it started: its call ends at its start-by (start plus
// shadow_timeout) plus this. A local copy that started runs to its end;
// a remote one needs a bound all the same, so that the goroutine waiting
// for its answer, and the serving node's call, always end. It is the time
// a forwarded request without a deadline gets (forward.DefaultTimeout),
// far beyond the run of any model a contract shadows in line with its
// users' traffic; a copy cut by it counts as a forward error and is not
// compared.
const shadowRunAllowance = forward.DefaultTimeout

// shadowRemote sends a shadow copy of req to another node that has
// target ready, at shadow priority; its answer is compared with the
// caller's (ans, when the contract compares the target) here, as a local
// copy's is, and logged (served=false). The serving node counts it in its
// per-model metrics (api suffixed -shadow) and this node in
// grove_cluster_forwarded_total and grove_cluster_forward_duration_seconds.
//
// shadow_timeout bounds it as it bounds a local copy: the copy carries a
// start-by (its start plus shadow_timeout), past which the serving node
// drops it unrun, and once started it runs within shadowRunAllowance.
// During a rolling upgrade, a serving node of an older version ignores
// the start-by and holds the copy to the call's deadline (and to its
// model's default_timeout_ms when shorter): it may start a copy up to
// shadowRunAllowance late instead of dropping it, and that copy is
// compared. A copy a node of an older version forwards here carries no
// start-by and is held to its call's deadline, as it was
// (forwardedBatch).
//
// The copies of one challenger in flight to other nodes take at most the
// room its shadow work would get in its mailbox here (shadowRoom of the
// queue limit): a copy that finds none is not forwarded but dropped and
// counted as overloaded, as a local copy is, so that a serving node slow
// to answer, or never answering, holds no more goroutines and inputs here.
func (r *routerActor) shadowRemote(b *batch, req *Request, target ShadowTarget, ans *championAnswer) {
	rs := r.remoteShadowsOf(target.ModelPath)
	if !rs.enter(r.queueLimit) {
		r.metrics.shadowDropped.WithLabelValues(target.ModelPath, "overloaded").Inc()
		rs.drop(r.describedContent(target.ModelPath))
		return
	}
	// A panic (a bug) before the copy's goroutine takes the place gives it
	// back: else the challenger's copies would be dropped for good once
	// enough such places were kept.
	started := false
	defer func() {
		if !started {
			rs.leave()
		}
	}()
	fr := forwardRequest(b.ctx, req, target.ModelPath, forward.Shadow)
	fr.Release = target.Release
	sc := &shadowCopy{req: shadowRequest(req, target), sink: r.sink, metrics: r.metrics, logger: r.log, start: time.Now()}
	fr.StartBy = sc.start.Add(r.shadowTimeout)
	sc.traceShadow(b.ctx, target.ModelPath)
	if target.windows != nil && ans != nil {
		sc.ans, sc.windows, sc.tol = ans, target.windows, r.tolerance
	}
	started = true // from here on, the copy's goroutine gives the place back
	r.background(func(sctx context.Context) { r.sendShadow(sctx, rs, fr, sc) })
}

// sendShadow forwards shadow copy sc, as fr, to another node and ends it
// with the answer, on a goroutine of its own (shadowRemote), within
// shadowRunAllowance of its start-by, or until stop is done; it gives
// back its place among the challenger's copies in flight (rs). A panic
// in it (a bug, in the cluster's client or in Grove's code; the
// comparison and the log recover their own) fails this copy alone
// (recoverJob): one that had not ended is counted as a failed forward
// and ends as a copy no node took (logged with the internal error, not
// compared).
func (r *routerActor) sendShadow(stop context.Context, rs *remoteShadows, fr forward.Request, sc *shadowCopy) {
	defer rs.leave()
	path, api := fr.ModelPath, sc.req.API+"-shadow"
	var counted, ended bool
	defer func() {
		if v := recover(); v != nil {
			err := recoverJob(r.log, r.metrics, "forward", "shadow copy of a request for model "+path+" sent to another node", v)
			if !counted {
				r.metrics.countForward(path, api, err, sc.start)
			}
			if !ended {
				sc.ended(Result{ModelPath: path, ContentPath: path, Checksum: sc.on.checksum, Err: err}, false)
			}
		}
	}()
	ctx, cancel := context.WithDeadline(stop, fr.StartBy.Add(shadowRunAllowance))
	defer cancel()
	// The serving node continues the shadow span's trace.
	ctx = trace.ContextWithSpanContext(ctx, trace.SpanContextFromContext(sc.ctx))
	a, err := r.remote.Forward(ctx, fr)
	r.metrics.countForward(path, api, err, sc.start)
	counted = true
	sc.on = remoteContent(r.remote, path, a.Checksum)
	// A copy no node took (Unavailable: gone, not ready) or the serving
	// node shed (Overloaded) says nothing of the challenger, as a local
	// copy dropped unrun: logged, not compared.
	k := servables.KindOf(err)
	ended = true // once, whatever it does
	sc.ended(Result{ModelPath: path, ContentPath: path, Checksum: sc.on.checksum, Outputs: a.Outputs,
		UnnamedOutputs: a.UnnamedOutputs, Err: err, Queued: a.Queued, Compute: a.Compute}, k != servables.Unavailable && k != servables.Overloaded)
}

// remoteShadowsOf returns the counters of the shadow copies of path sent
// to other nodes, made on first use; only the router calls it.
func (r *routerActor) remoteShadowsOf(path string) *remoteShadows {
	rs := r.remoteShadow[path]
	if rs == nil {
		rs = &remoteShadows{}
		r.remoteShadow[path] = rs
	}
	return rs
}

// describedContent is the key (remoteContentID) of the content the
// cluster's records describe for path, which another node serves; 0 when
// they describe none. The comparison windows and the stats key a remote
// challenger's figures on it (servedBy): an answer from another content
// is a straggler's (remoteContent).
func (r *routerActor) describedContent(path string) int64 {
	if on, ok := r.servedBy(nil, path); ok {
		return on.id
	}
	return 0
}

// forgetRemoteShadows drops the counters of the challenger paths no
// contract shadows any more (a servable with a shadow setting), once no
// copy of theirs is in flight, so that challengers rotated over months
// leave nothing behind. Those with copies still in flight keep counting
// them against the bound (a challenger added again meanwhile shares it),
// but their dropped count starts again from zero, as a local challenger's
// does when its content is replaced; they go once the copies have ended.
// Only the router calls it (setContracts, its ticks).
func (r *routerActor) forgetRemoteShadows() {
	if len(r.remoteShadow) == 0 {
		return
	}
	shadowed := map[string]bool{}
	for _, st := range r.contracts {
		for _, sv := range st.cfg.Servables {
			if sv.Shadow != nil {
				shadowed[sv.ModelPath] = true
			}
		}
	}
	for path, rs := range r.remoteShadow {
		switch {
		case shadowed[path]:
		case rs.inflight.Load() == 0: // only the router enters: it stays 0
			delete(r.remoteShadow, path)
		default:
			rs.dropped = 0
		}
	}
}

// remoteContent is the content of another node that answered for path
// with checksum (for a failed copy, which carries none, the content the
// record describes): its load time is the one the node's record gives,
// when the record names that content.
func remoteContent(remote Remote, path, checksum string) shadowContent {
	info, ok := remote.Model(path)
	if checksum == "" && ok {
		checksum = info.Checksum // a failure carries none: the content the record names
	}
	on := shadowContent{path: path, checksum: checksum, id: remoteContentID(checksum)}
	switch {
	case ok && info.Checksum == checksum:
		on.loadedAt = info.LoadedAt
	case ok:
		on.stale = true // not the content the cluster describes for path: a straggler
	}
	return on
}

// forwardResult is the result label of grove_cluster_forwarded_total:
// the outcome of grove_model_requests_total.
func forwardResult(err error) string { return outcomeOf(err) }

// residentBytes is the process's resident memory (Linux's
// /proc/self/statm), 0 where it cannot be read.
func residentBytes() int64 {
	data, err := os.ReadFile("/proc/self/statm")
	if err != nil {
		return 0
	}
	f := bytes.Fields(data)
	if len(f) < 2 {
		return 0
	}
	pages, err := strconv.ParseInt(string(f[1]), 10, 64)
	if err != nil {
		return 0
	}
	return pages * int64(os.Getpagesize())
}

// loadMeter tells a model load whether another one ran beside it, which
// makes the growth of the process's resident memory over it not its own.
// The supervisor's load goroutines call it; its state is atomic.
type loadMeter struct {
	running, started atomic.Int64
}

// loadTicket is what start gives a load, for done.
type loadTicket struct {
	alone bool
	seq   int64
}

// start records a load starting.
func (m *loadMeter) start() loadTicket {
	return loadTicket{alone: m.running.Add(1) == 1, seq: m.started.Add(1)}
}

// done records the load of t ending and reports whether it ran alone: no
// other load was running when it started and none started since.
func (m *loadMeter) done(t loadTicket) bool {
	alone := t.alone && m.started.Load() == t.seq
	m.running.Add(-1)
	return alone
}
