package actors

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"sync/atomic"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/groveml/grove/conf/modelconfig"
	"github.com/groveml/grove/servables"
	"github.com/groveml/grove/tracing"
)

// table maps each served model path to the content answering it. It is
// replaced, never changed, by the supervisor. A versioned entry's path
// ("pcvr/") maps to the content of the version it serves ("pcvr/3/"): the
// one entry whose content's path is not its key.
type table map[string]*content

// batch is one call of System.Infer (or System.Score) on its way through
// the router.
type batch struct {
	reqs    []Request
	results []Result
	// state[i] holds item i's itemClaimed, set by whoever answers it (its
	// model, its deadline, or a whole-call failure; the others leave it
	// alone), and itemForwarded, set by the router when it hands the
	// item to another node before anyone claimed it.
	state   []atomic.Uint32
	pending atomic.Int64
	// reply is sent once every item has its answer in results.
	reply chan struct{}
	// oneResult and oneState are results and state of a call of one
	// request, allocated with the batch.
	oneResult [1]Result
	oneState  [1]atomic.Uint32
	// ctx is the caller's context; every item's predict carries it.
	ctx context.Context
	// score, if set, makes the router route the single request through a
	// contract first (System.Score).
	score *scoreCall
	// err fails the whole call (an unknown contract, no active servable).
	err error
	// local: serve on this node's models only, never forward (a request
	// another node forwarded, System.Predict); shadow: at shadow priority
	// (a forwarded shadow copy).
	local, shadow bool
	// inline: the caller's goroutine takes the batch's one item to its
	// model actor itself and waits for it, so the item may run there
	// (content.post, servesAlone).
	inline bool
	// startBy, if not zero, is when a forwarded shadow copy must have
	// started (forward.Request.StartBy): its model actor drops it unrun
	// past it, and ctx's deadline bounds its run only.
	startBy time.Time
	// onReply, if set, gets the results in place of reply, on the
	// goroutine that finishes the batch (System.PredictAsync).
	onReply func([]Result)
}

// scoreCall is what System.Score asks of the router. The router writes
// the picked servable into the batch's request and counters, then sets
// routed; nobody else reads them unless routed is set (the call may have
// ended at its deadline before the router got to it).
type scoreCall struct {
	contract, release string
	counters          *releaseCounters
	routed            atomic.Bool
}

// GetPriority puts batches ahead of anything else the router may receive.
func (*batch) GetPriority() int8 { return priorityUser }

// newBatch makes the batch of a call: every item unanswered, each
// result naming its model path.
func newBatch(ctx context.Context, reqs []Request) *batch {
	b := &batch{reqs: reqs, reply: make(chan struct{}, 1), ctx: ctx}
	if len(reqs) == 1 {
		b.results, b.state = b.oneResult[:], b.oneState[:]
	} else {
		b.results, b.state = make([]Result, len(reqs)), make([]atomic.Uint32, len(reqs))
	}
	now := time.Now()
	for i := range reqs {
		b.results[i].ModelPath = reqs[i].ModelPath
		if reqs[i].Received.IsZero() {
			reqs[i].Received = now
		}
	}
	b.pending.Store(int64(len(reqs)))
	return b
}

// The bits of a batch item's state.
const (
	itemClaimed uint32 = 1 << iota
	itemForwarded
	// itemParked: the item waits for its on-demand model's load
	// (demand.go); its deadline answers it "model is loading".
	itemParked
)

// park records that item i waits for its model's load, unless it was
// answered already (false).
func (b *batch) park(i int) bool {
	for {
		s := b.state[i].Load()
		if s&itemClaimed != 0 {
			return false
		}
		if b.state[i].CompareAndSwap(s, s|itemParked) {
			return true
		}
	}
}

// unpark records that item i no longer waits for a load (its model
// serves, or its load failed), unless it was answered already (false).
func (b *batch) unpark(i int) bool {
	for {
		s := b.state[i].Load()
		if s&itemClaimed != 0 {
			return false
		}
		if b.state[i].CompareAndSwap(s, s&^itemParked) {
			return true
		}
	}
}

// expireParked answers item i with d's "model is loading" if it still
// waits for its model's load (its model's default_timeout_ms, or a
// forwarded shadow copy's start-by, ended first). It runs on the
// deadline's timer, whose goroutine recovers nothing: a panic in it (a
// bug) answers the item with the internal error instead, logged and
// counted (recoverJob, actor="load_wait"). The item leaves d's parked
// requests when the load ends, as any that expired.
func (b *batch) expireParked(i int, d *demandSlot, w *ways) {
	claimed := false
	defer func() {
		if v := recover(); v != nil {
			b.failItem(i, claimed, recoverJob(w.log, w.metrics, "load_wait", "expiry of a request waiting for the load of model "+d.path, v))
		}
	}()
	err := d.loadingError(time.Now())
	if prev, ok := b.claimState(i); ok {
		claimed = true
		if prev&itemParked == 0 {
			// Unparked meanwhile: claimed by mistake; it cannot be given
			// back, so it is answered as the deadline it is.
			bound := "the model's default_timeout_ms"
			if !b.startBy.IsZero() {
				bound = "the shadow copy's start-by"
			}
			err = fmt.Errorf("%w: no answer within %s", servables.ErrDeadlineExceeded, bound)
		}
		w.metrics.observe(b.reqs[i].API, b.reqs[i].ModelPath, err, 0)
		b.results[i].Err, claimed = err, false
		b.finish()
	}
}

// failItem answers item i with err, the internal error of a panic a
// timer recovered while answering it, unless it was answered: claimed
// says the timer had claimed the item and not yet finished it.
func (b *batch) failItem(i int, claimed bool, err error) {
	if claimed || b.claim(i) {
		b.results[i].Err = err
		b.finish()
	}
}

// claim reports whether the caller is the one to answer item i.
func (b *batch) claim(i int) bool {
	_, ok := b.claimState(i)
	return ok
}

// claimState is claim, also returning the item's state before the claim.
func (b *batch) claimState(i int) (prev uint32, ok bool) {
	for {
		s := b.state[i].Load()
		if s&itemClaimed != 0 {
			return s, false
		}
		if b.state[i].CompareAndSwap(s, s|itemClaimed) {
			return s, true
		}
	}
}

// markForwarded records that item i goes to another node, unless it was
// answered already (false: then it must not be forwarded).
func (b *batch) markForwarded(i int) bool {
	for {
		s := b.state[i].Load()
		if s&itemClaimed != 0 {
			return false
		}
		if b.state[i].CompareAndSwap(s, s|itemForwarded) {
			return true
		}
	}
}

// finish records one answer and replies once every item has one.
func (b *batch) finish() {
	if b.pending.Add(-1) == 0 {
		if b.onReply != nil {
			b.onReply(b.results)
			return
		}
		b.reply <- struct{}{}
	}
}

// fail answers a single-request call (System.Score) with err for the
// whole call, unless its item was answered already.
func (b *batch) fail(err error) {
	if b.claim(0) {
		b.err = err
		b.results[0].Err = err
		b.finish()
	}
}

// expireUnanswered answers every item not answered yet with err, or,
// for one waiting for its on-demand model's load (parked here, or handed
// to another node while no node has the model ready: Remote.Awaits), with
// w's "model is loading" (LoadingError). It reads no field the router may be writing
// (a Score call's routing): the result is the caller's once claimed, and
// API and ModelPath are never changed after the item is parked. An item
// handed to another node is not counted in the per-model metrics: the
// serving node counts it, and this node in the hop's metrics.
func (b *batch) expireUnanswered(err error, w *ways) {
	now := time.Now()
	for i := range b.reqs {
		if prev, ok := b.claimState(i); ok {
			e := err
			if prev&itemParked != 0 || (prev&itemForwarded != 0 && w.remote != nil && w.remote.Awaits(b.reqs[i].ModelPath)) {
				e = w.loadingError(b.reqs[i].ModelPath, now)
			}
			b.results[i].Err = e
			if prev&itemForwarded == 0 { // a forwarded item counts where it runs, and in the hop's metrics
				w.metrics.observe(b.reqs[i].API, b.results[i].ModelPath, e, 0)
			}
			b.finish()
		}
	}
}

// loadingError is the answer of a request for path whose deadline ends
// at now while path loads.
func (w *ways) loadingError(path string, now time.Time) error {
	if d := w.demandFor(path); d != nil {
		return d.loadingError(now)
	}
	return &LoadingError{Path: path, RetryAfter: time.Second}
}

// Messages to the router besides batches.
type (
	// setContracts gives the router the contracts of a config just
	// applied. It goes ahead of batches (priorityConfig): a call sent
	// once the config is applied finds its contracts even if its batch
	// reached the mailbox first.
	setContracts struct {
		cfg []modelconfig.Contract
		at  time.Time
	}
	// routerQuery runs fn on the router's goroutine (reads of the
	// contract state it owns); done is closed after, err set before when
	// fn panicked.
	routerQuery struct {
		fn   func(r *routerActor)
		done chan struct{}
		err  error
	}
	// routerTick re-evaluates the contracts' expiration.
	routerTick struct{}
)

// GetPriority puts a config's contracts ahead of user requests.
func (*setContracts) GetPriority() int8 { return priorityConfig }

// GetPriority puts queries after user requests.
func (*routerQuery) GetPriority() int8 { return priorityWarmUp }

// expiryInterval is how often the router re-evaluates contract
// expiration while contracts are configured: validity rules depend on
// time, traffic and metrics.
const expiryInterval = 100 * time.Millisecond

// routerActor fans batches out to model actors and gathers the answers in
// request order; it never waits: model actors complete the batch. It owns
// the contracts: their configuration as in force, what was observed of
// them (valid-since stamps, pick sequences) and the routing decisions, and
// tells the supervisor which model paths the contracts have expired.
type routerActor struct {
	// ways takes a batch's items to model actors here and to other
	// nodes (remote: nil on a single server), as the System's callers
	// that skip the router do.
	ways
	// microBatchRows cuts shadow copies into micro-batches; 0 never cuts.
	microBatchRows int
	// sink receives shadow answers; user answers are logged by System.run.
	sink PredictionSink
	// shadowTimeout bounds how long a shadow copy may wait to run.
	shadowTimeout time.Duration
	// low runs comparisons of shadow copies that finished before the
	// champion answered; tolerance and compareWindow are the comparison
	// settings (Options.CompareTolerance, CompareWindow).
	low           *lowPriority
	tolerance     float64
	compareWindow int
	// state is the shared contract state; supervisor, if set, hears
	// contractsExpired.
	state      *sharedState
	supervisor *actor.PID
	contracts  contracts
	expired    map[string]bool
	// background runs the forward calls (System.background).
	background func(job func(ctx context.Context))
	// remoteShadow counts the shadow copies sent to other nodes, by
	// challenger path (shadowRemote): the map and the dropped counts are
	// the router's, the in-flight counts atomics their forward goroutines
	// give places back to; a path no contract shadows goes once its
	// copies have ended (forgetRemoteShadows).
	remoteShadow map[string]*remoteShadows
	// outcomes gives the releases' outcome figures; nil: none.
	outcomes OutcomeSource
	tick     *time.Timer
	log      *slog.Logger
}

func newRouter(s *System) *routerActor {
	return &routerActor{ways: s.ways,
		microBatchRows: s.opts.ShadowMicroBatchRows, sink: s.opts.Predictions, state: s.state, shadowTimeout: s.opts.ShadowTimeout,
		low: s.low, tolerance: s.opts.CompareTolerance, compareWindow: s.opts.CompareWindow,
		supervisor: s.as.NewLocalPID(supervisorName), contracts: contracts{}, log: s.log,
		background: s.background, outcomes: s.opts.Outcomes, remoteShadow: map[string]*remoteShadows{}}
}

// Receive dispatches each batch, and keeps the contracts. A panic while
// it does costs that message alone (panics.go): it is recovered here, and
// panicked answers the message's caller.
func (r *routerActor) Receive(ctx actor.Context) {
	msg := ctx.Message()
	defer func() {
		if v := recover(); v != nil {
			r.panicked(msg, recoverPanic(r.log, r.metrics, "router", messageType(msg), v))
		}
	}()
	switch m := msg.(type) {
	case *batch:
		if m.score != nil && !r.route(ctx, m) {
			return
		}
		r.dispatch(ctx, m)
	case *setContracts:
		r.setContracts(m.cfg, m.at)
		r.forgetRemoteShadows()
		r.evaluateExpiry(ctx, m.at)
	case routerTick:
		r.tick = nil
		r.forgetRemoteShadows()
		r.evaluateExpiry(ctx, time.Now())
	case *routerQuery:
		m.fn(r)
		close(m.done)
	case *actor.Stopping:
		if r.tick != nil {
			r.tick.Stop()
		}
	}
}

// panicked answers the caller of msg, whose handling panicked with err
// (Receive): a Score call fails with err, a batch's items not answered
// yet are answered with it (a later answer from their model is dropped,
// as after their deadline), a query returns it. A config's contracts
// whose setting panicked are set again by the next poll's, which also
// evaluates their expiry again.
func (r *routerActor) panicked(msg any, err error) {
	switch m := msg.(type) {
	case *batch:
		m.failPanicked(err, r.metrics)
	case *routerQuery:
		m.err = err
		close(m.done)
	}
}

// failPanicked answers b with err, the internal error of a panic while it
// was being dispatched: a contract's call as a whole, else each item not
// answered yet, counted in m where it was to run.
func (b *batch) failPanicked(err error, m *Metrics) {
	if b.score != nil {
		b.fail(err)
		return
	}
	for i := range b.reqs {
		if prev, ok := b.claimState(i); ok {
			b.results[i].Err = err
			if prev&itemForwarded == 0 { // a forwarded item counts where it runs
				m.observe(b.reqs[i].API, b.reqs[i].ModelPath, err, 0)
			}
			b.finish()
		}
	}
}

// dispatch takes each item of b to its model actor here, or to another
// node (toModel, forward), and sends its shadow copies.
func (r *routerActor) dispatch(ctx actor.Context, b *batch) {
	if len(b.reqs) == 0 {
		b.reply <- struct{}{}
		return
	}
	for i := range b.reqs {
		if b.state[i].Load()&itemClaimed != 0 {
			continue // answered already: its deadline passed before it got here
		}
		req := &b.reqs[i]
		// The answer the caller gets, for the shadow copies to compare with.
		var ans *championAnswer
		if len(req.Shadows) > 0 {
			ans = &championAnswer{requestID: req.RequestID, release: req.Release, low: r.low}
		}
		switch r.toModel(ctx.Send, b, i, ans) {
		case failedHere:
			continue
		case parkedHere:
			// Its shadow copies go now; the caller's answer waits.
		case elsewhere:
			if !b.markForwarded(i) {
				continue // answered meanwhile: its deadline passed
			}
			r.forward(b, i, ans)
		}
		for _, sh := range req.Shadows {
			r.shadow(ctx, b, req, sh, ans)
		}
	}
}

// ways is what takes an item of a batch on its way: to the model actor
// serving its path here (toModel) or to another node (toNode). The router
// and the System's callers that skip it (servesAlone, forwardsAlone) take
// their items through the same two functions; any goroutine may call them.
type ways struct {
	routes     *atomic.Pointer[table]
	queueLimit int
	metrics    *Metrics
	// log gets the panics of the timers that answer an item (recoverJob).
	log *slog.Logger
	// remote forwards to other cluster nodes (nil: a single server).
	remote Remote
	// demand is the demand table (demand.go), published by the
	// supervisor; ask asks it for the load of an on-demand path.
	demand *atomic.Pointer[demandTable]
	ask    func(path string)
}

// way is where toModel took an item.
type way uint8

const (
	// sentHere: to its model actor on this node.
	sentHere way = iota
	// elsewhere: left alone; its model is not ready here and another
	// node has it (mayForward): the caller forwards it (toNode).
	elsewhere
	// failedHere: answered with the reason it cannot be served (or
	// answered already).
	failedHere
	// parkedHere: waiting for its on-demand model's load (demand.go),
	// which takes it to its model actor or answers it.
	parkedHere
)

// toModel takes item i of b to the model actor serving its path on this
// node: it reserves a place in the model's queue (acquire: the queue
// limit) and sends the item with send (sendPredict: its deadlines, its
// metrics; ans, if not nil, gets the answer for the shadow copies). When
// the model is not ready here and another node has it, it leaves the item
// alone (elsewhere). Otherwise, when it cannot send the item, it answers
// it with the reason, counted in the per-model metrics, except a request
// another node forwarded here (b.local) for a model not here: that did
// not execute here, and the forwarding node counts it (and tries another
// replica).
func (w *ways) toModel(send func(*actor.PID, any), b *batch, i int, ans *championAnswer) way {
	return w.take(send, b, i, ans, time.Time{})
}

// take is toModel; parkedAt is when the item parked for its on-demand
// model's load (resume), zero if it did not: its model's
// default_timeout_ms runs from then, and only a request that did not
// wait counts as a demand hit.
func (w *ways) take(send func(*actor.PID, any), b *batch, i int, ans *championAnswer, parkedAt time.Time) way {
	req := &b.reqs[i]
	var c *content
	var err error
	var notHere, again bool
	for range 3 {
		c, err = acquire(w.routes, w.queueLimit, req.ModelPath, b.shadow)
		if err == nil {
			if c.onDemand && parkedAt.IsZero() {
				w.metrics.demandHits.Inc()
			}
			sendPredict(send, w, b, i, c, ans, parkedAt)
			return sentHere
		}
		notHere = c == nil && errors.Is(err, ErrModelNotFound)
		if notHere && w.mayForward(b, req.ModelPath) {
			return elsewhere
		}
		d := w.demandFor(req.ModelPath)
		if notHere && d == nil && !again {
			// A load may have just ended: its slot leaves the demand
			// table only after its content is in the routing table
			// (publishDemand), which was read before; read it again.
			again = true
			continue
		}
		if !notHere || d == nil {
			break
		}
		r, ask := d.park(b, i, ans, w, time.Now(), parkedAt)
		if ask {
			w.ask(d.path) // a versioned entry's path: its version's
		}
		switch r {
		case parked:
			return parkedHere
		case answered:
			return failedHere
		}
		// lookAgain: its content serves now.
	}
	if b.claim(i) {
		res := &b.results[i]
		res.ModelPath, res.Err = req.ModelPath, err
		if !notHere || !b.local {
			w.metrics.observe(req.API, req.ModelPath, err, 0)
		}
		b.finish()
	}
	return failedHere
}

// sendPredict sends item i of b to c, whose queue place toModel acquired,
// with send (the router's context, or the root context of a caller that
// skips the router), and has its model actor answer it: at the caller's
// deadline or the model's default_timeout_ms, and at shadow priority for
// a forwarded shadow copy; ans, if not nil, gets the answer for the
// shadow copies to compare with. The default_timeout_ms of a request
// that waited for its model's load runs from since, when it began to
// wait (zero: from now). A forwarded shadow copy with a start-by
// (b.startBy) is held to it as this node's own copies are held to
// shadow_timeout: dropped unrun past it, not bound by default_timeout_ms
// once it runs. Until the item is handed to c, a panic (a bug) gives its
// place back: else c would never drain. A panic in the default_timeout_ms
// timer's code answers the item with the internal error (its goroutine
// recovers nothing: it would end the process), logged and counted
// (recoverJob, actor="default_timeout"); its run gives the place back.
func sendPredict(send func(*actor.PID, any), w *ways, b *batch, i int, c *content, ans *championAnswer, since time.Time) {
	m := w.metrics
	req := &b.reqs[i]
	res := &b.results[i]
	// Not the timer: captured here, it would be allocated for every
	// request; left running, it finds the item answered (claimed).
	sent := false
	defer func() {
		if !sent {
			c.giveBack(1, b.shadow)
		}
	}()
	callerDeadline, hasDeadline := b.ctx.Deadline()
	enqueued := time.Now()
	if c.onDemand && !b.shadow {
		c.lastUsed.Store(enqueued.UnixNano()) // a shadow copy keeps no model loaded
	}
	p := &predict{inputs: c.bind(req.Inputs, req.Positional, req.TypeNamed), priority: priorityUser, enqueued: enqueued, ctx: b.ctx, replica: req.Replica}
	if b.shadow {
		p.priority = priorityShadow
	}
	if hasDeadline {
		p.deadline = callerDeadline
	}
	if !b.startBy.IsZero() && (!hasDeadline || b.startBy.Before(callerDeadline)) {
		p.deadline = b.startBy
	}
	// A request that brings no deadline (or a later one) gets its
	// model's default_timeout_ms, and its answer at that time.
	if since.IsZero() {
		since = enqueued
	}
	var timer *time.Timer
	if def := c.deadlineSettings().def; def > 0 && b.startBy.IsZero() && (!hasDeadline || since.Add(def).Before(callerDeadline)) {
		p.deadline = since.Add(def)
		path, api := c.path, req.API
		timer = time.AfterFunc(p.deadline.Sub(enqueued), func() {
			claimed := false
			defer func() {
				if v := recover(); v != nil {
					b.failItem(i, claimed, recoverJob(w.log, w.metrics, "default_timeout", "default_timeout_ms expiry of a request for model "+path, v))
				}
			}()
			if claimed = b.claim(i); claimed {
				err := fmt.Errorf("%w: no answer from model %s within its default_timeout_ms (%v)", servables.ErrDeadlineExceeded, path, def)
				w.metrics.observe(api, path, err, def)
				res.Err, claimed = err, false
				b.finish()
			}
		})
	}
	p.done = func(out []servables.Tensor, err error, queued, compute time.Duration) {
		if timer != nil {
			timer.Stop()
		}
		c.leave(1)
		if k := servables.KindOf(err); k != servables.DeadlineExceeded && k != servables.Canceled {
			c.served.Add(1) // dropped unrun, it was not served
		}
		now := time.Now()
		if tracing.Recording(b.ctx) {
			traceModel(b.ctx, c, req, enqueued, queued, compute, p.rows, err)
		}
		if !b.shadow { // the model's user statistics
			c.stats.record(req.Inputs, err, queued, compute, now.Sub(enqueued), now)
		}
		if b.claim(i) {
			res.ModelPath, res.Checksum, res.Outputs, res.Err, res.Queued, res.Compute = req.ModelPath, c.checksum, out, err, queued, compute
			res.ContentPath = c.path
			res.UnnamedOutputs = c.metadata().UnnamedOutputs
			c.observe(m, req.API, err, now.Sub(enqueued))
			if !p.deadline.IsZero() && now.After(p.deadline) && !b.shadow && err == nil {
				// Answered after its deadline: a run on its caller's
				// goroutine (content.runsInline) that took longer than
				// its model's recent calls, or an answer that beat the
				// caller's expiry by a hair.
				m.late.WithLabelValues(c.path).Inc()
			}
			ans.answer(out, err != nil, compute)
			b.finish()
		} else {
			ans.answer(nil, true, 0) // the caller got its deadline, not these outputs
			if k := servables.KindOf(err); !b.shadow && k != servables.DeadlineExceeded && k != servables.Canceled {
				m.late.WithLabelValues(c.path).Inc() // it ran (dropped unrun, it counts as expired)
			}
		}
	}
	sent = true // from here on, p's answer gives the place back
	c.send(send, p, b.inline && c.runsInline(p.deadline, enqueued))
}

// acquire finds the content serving path in the routing table in routes
// and reserves a place in its queue, of at most limit requests (a shadow
// copy's among the shadow work, the limit counting both). A content
// retired between the table lookup and the reservation is looked up
// again: the table then already names its successor, or nothing.
func acquire(routes *atomic.Pointer[table], limit int, path string, shadow bool) (*content, error) {
	for range 3 {
		c := (*routes.Load())[path]
		if c == nil {
			break
		}
		err := c.acquire(limit, shadow)
		if errors.Is(err, errRetired) {
			continue
		}
		return c, err
	}
	return nil, fmt.Errorf("%w: Requested model '%s' has not been registered", ErrModelNotFound, path)
}

// evaluateExpiry works out which model paths the contracts have expired
// at now, tells the supervisor when that changes, and comes back after
// expiryInterval while there are contracts (or counters of remote shadow
// copies left to forget: forgetRemoteShadows).
func (r *routerActor) evaluateExpiry(ctx actor.Context, now time.Time) {
	expired := r.expiredPaths(now)
	if !maps.Equal(expired, r.expired) {
		r.expired = expired
		if r.supervisor != nil {
			ctx.Send(r.supervisor, contractsExpired{paths: maps.Clone(expired)})
		}
	}
	if (len(r.contracts) > 0 || len(r.remoteShadow) > 0) && r.tick == nil {
		self, root := ctx.Self(), ctx.ActorSystem().Root
		r.tick = time.AfterFunc(expiryInterval, func() { root.Send(self, routerTick{}) })
	}
}

// askRouter runs fn on the router's goroutine and waits for it; it fails
// when fn panics (errInternal), when ctx is done first or when the system
// has stopped.
func (s *System) askRouter(ctx context.Context, fn func(r *routerActor)) error {
	if s.closing.Load() {
		return ErrStopped
	}
	q := &routerQuery{fn: fn, done: make(chan struct{})}
	s.as.Root.Send(s.router, q)
	select {
	case <-q.done:
		return q.err
	case <-ctx.Done():
		return ctx.Err()
	case <-s.stopped:
		return ErrStopped
	}
}
