package actors

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"runtime/debug"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/prometheus/client_golang/prometheus"
	"go.opentelemetry.io/otel/trace"

	"github.com/groveml/grove/conf/bucket"
	"github.com/groveml/grove/conf/modelconfig"
	"github.com/groveml/grove/internal/lowprio"
	"github.com/groveml/grove/internal/redact"
	"github.com/groveml/grove/routing/quality"
	"github.com/groveml/grove/servables"
	"github.com/groveml/grove/tracing"
)

// Options configure a System.
type Options struct {
	// Bucket holds the model config and the models; ModelConfigPath names the config object in it.
	Bucket          bucket.Bucket
	ModelConfigPath string
	// PollInterval is how often the model config is read.
	PollInterval time.Duration
	// KeepPreviousFor is how long a model's previous content stays loaded
	// and warm after an in-place update (and a removed model at least),
	// for the entries without keep_previous_for_ms; 0: off.
	KeepPreviousFor time.Duration
	// LoadPolicy is when a model entry without a load of its own is
	// loaded (load_policy): modelconfig.LoadEager (the default when
	// empty) or LoadOnDemand (docs/density.md).
	LoadPolicy modelconfig.Load
	// MemoryBudget bounds, in bytes, what a single server keeps loaded
	// (memory_budget_bytes): loads run one at a time and idle on-demand
	// models are unloaded to make room. 0: unbounded. A cluster node
	// (ClusterNode) leaves it to the cluster's placement.
	MemoryBudget int64
	// IdleUnloadAfter unloads an on-demand model that took no request
	// for that long (idle_unload_after), back to unloaded; 0: never. A
	// cluster node (ClusterNode) leaves it to the cluster's placement.
	IdleUnloadAfter time.Duration
	// DiskCacheBytes is the disk space, in bytes, kept for the files of
	// on-demand models unloaded for the budget or idleness
	// (disk_cache_bytes): the next load of the same content (an entry
	// with a checksum) verifies them on disk instead of fetching them
	// again. 0: none, the files are deleted at the unload.
	DiskCacheBytes int64
	// MemoryFactor estimates a model's memory as its files' size times
	// it until its load measures it (0: 2).
	MemoryFactor float64
	// CacheDir is where model files are copied before they are loaded; Grove owns it.
	CacheDir string
	// MaxModelBytes rejects larger models.
	MaxModelBytes int64
	// QueueSize bounds the requests waiting for one model; more fail with
	// ErrOverloaded. A quarter of it bounds a model's shadow work waiting
	// here, and the shadow copies in flight to a challenger on another
	// node; more are dropped. 0 or less: no bound.
	QueueSize int
	// ShadowMicroBatchRows cuts shadow copies into micro-batches of at most
	// this many rows, so a user request waits for at most one; 0 never cuts.
	ShadowMicroBatchRows int
	// ShadowTimeout is how long a shadow copy may wait to run, on this
	// node or on the cluster node it is forwarded to; it is dropped after
	// (default 1s).
	ShadowTimeout time.Duration
	// MaxTimeout clamps the deadline a caller gives (the context Infer
	// gets): a later one is brought forward to MaxTimeout from the call.
	// A model's default_timeout_ms is not clamped. 0: no clamp.
	MaxTimeout time.Duration
	// CompareTolerance is the largest difference between a shadow's value
	// and the caller's answer's that counts as within tolerance (default
	// quality.DefaultCompareTolerance); CompareWindow is how many
	// executions the last-N comparison window holds (default
	// quality.DefaultCompareWindow).
	CompareTolerance float64
	CompareWindow    int
	// ShadowWorkers threads at nice 19 run shadow forward calls for all
	// models (default 1); ShadowQueue micro-batches may wait for them
	// (default 4 when ShadowWorkers is 0; give both or neither). Shadow work
	// that finds the queue full is dropped and counted.
	ShadowWorkers, ShadowQueue int
	// MaxBatchRows bounds a dynamic batch: user requests queued for a model
	// together run as one forward call of at most this many rows; 1 or
	// less turns batching off.
	MaxBatchRows int
	// IntraOpThreads is the per-model forward thread count passed to the runtime.
	IntraOpThreads int
	// Runtimes are the model runtimes this build has.
	Runtimes servables.Registry
	// ParseWarmUp turns a model's warm_up_batch_request_json into the input
	// sets to run before the model takes traffic.
	ParseWarmUp func(json, modelPath string) ([][]servables.Tensor, error)
	// WarmUpTimeout bounds a model's warm-up (warmup_timeout; default
	// 1m): one that runs longer fails its load (System.warmUp).
	WarmUpTimeout time.Duration
	// WarmUp, when set, gives the warm-up of a model whose config entry
	// has no warm_up_batch_request_json, from the entry and the signature
	// it loaded with (package processor: DeepRec's warm-up file, or a
	// request of ones); a zero WarmUp runs none.
	WarmUp func(meta modelconfig.Model, sig servables.Metadata) (WarmUp, error)
	// Predictions receives every answer returned to a caller; nil logs none.
	Predictions PredictionSink
	// DirectLogLevel is the server's prediction_log.default_level, the
	// log level of direct model calls (modelconfig.LogLevelNone, the
	// default when empty, LogLevelFull or LogLevelSample): a model config
	// with a model entry that has outcomes is refused unless it is FULL
	// (modelconfig.Config.ValidateOutcomeLogging).
	DirectLogLevel string
	// ClusterNode starts the system with an empty share: it loads no
	// model of the config until SetShare gives it its share of the
	// cluster's placement table.
	ClusterNode bool
	// Remote, on a cluster node, forwards a request for a model not
	// ready here to a node that has it (cluster.go); nil: a single server.
	Remote Remote
	// Outcomes gives the outcome figures the evaluator published for the
	// contracts' releases (the release gates' and validity rules' input,
	// the stats' outcomes object); nil: none.
	Outcomes OutcomeSource
	// Logger receives the actors' logs; nil means slog.Default().
	Logger *slog.Logger
	// residentBytes reads the process's resident memory for a load's
	// measure (nil: residentBytes, /proc/self/statm); tests replace it.
	residentBytes func() int64
	// Registerer receives the actors' metrics; nil means none are registered.
	Registerer prometheus.Registerer
}

// System is a running set of actors: the supervisor with its model actors,
// and the router. actors/doc.go says who owns each piece of its state.
type System struct {
	opts Options
	// paths are the server's paths that errors shown to callers leave
	// out (serverPaths); the log keeps them.
	paths redact.Paths
	// loads tells a model load whether it ran alone (loadMeter).
	loads loadMeter
	// calls counts the calls runUnlogged serves: a request runs on its
	// caller's goroutine only when its call is the only one (serveAlone).
	calls   atomic.Int64
	log     *slog.Logger
	metrics *Metrics
	// ways takes the items of the calls that skip the router to their
	// model actor or another node, as the router does its own.
	ways       ways
	as         *actor.ActorSystem
	supervisor *actor.PID
	router     *actor.PID
	// routes and status are published by the supervisor, read by anyone;
	// so is demand, the on-demand paths with no content (demand.go).
	routes atomic.Pointer[table]
	demand atomic.Pointer[demandTable]
	status atomic.Pointer[Status]
	// statusStale is set by the supervisor when an event changed what the
	// status shows, and cleared once it has published a snapshot since:
	// a snapshot is built when read (freshStatus), not at every event,
	// which with thousands of models cost more than the event itself.
	statusStale atomic.Bool
	// supervisorDone is closed when the supervisor has stopped, after its
	// last snapshot.
	supervisorDone chan struct{}
	// applied is the config in force, published by the supervisor.
	applied atomic.Pointer[appliedConfig]
	state   *sharedState
	low     *lowPriority // shadow forwards
	// lowerWarned is set once a load could not run at its lower priority.
	lowerWarned atomic.Bool
	// peerAPIs bounds the api label of requests forwarded here.
	peerAPIs peerAPIs
	// dispatcher runs the router's and models' mailboxes.
	dispatcher *workerDispatcher
	// disk keeps unloaded on-demand models' files (nil: none); the
	// supervisor owns it.
	disk *diskCache
	// bg tracks every goroutine the system starts outside the actors
	// (config polls, fetches, loads, warm-ups, releases, the state
	// writer); ctx is canceled by Stop, which then waits for them.
	bg     sync.WaitGroup
	ctx    context.Context
	cancel context.CancelFunc
	// stopped is closed once the actors are stopped: calls to them fail
	// instead of waiting for an answer that will not come.
	stopped  chan struct{}
	stopOnce sync.Once
	// stoppedCtx is done when stopped is closed: answers that no
	// goroutine waits for (PredictAsync) end with it.
	stoppedCtx  context.Context
	stopStopped context.CancelFunc
	settled     atomic.Bool
	draining    atomic.Bool
	closing     atomic.Bool
}

// Start starts the actors. The first config poll runs at once; Ready reports
// when its models have loaded (or failed to).
func Start(opts Options) (*System, error) {
	if opts.Bucket == nil {
		return nil, errors.New("actors: no bucket")
	}
	if opts.PollInterval <= 0 {
		return nil, errors.New("actors: poll interval must be positive")
	}
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	if opts.ShadowTimeout <= 0 {
		opts.ShadowTimeout = time.Second
	}
	if opts.WarmUpTimeout <= 0 {
		opts.WarmUpTimeout = time.Minute
	}
	if opts.CompareTolerance <= 0 {
		opts.CompareTolerance = quality.DefaultCompareTolerance
	}
	if opts.residentBytes == nil {
		opts.residentBytes = residentBytes
	}
	if opts.CompareWindow <= 0 {
		opts.CompareWindow = quality.DefaultCompareWindow
	}
	reg := opts.Registerer
	if reg == nil {
		reg = prometheus.NewRegistry()
	}
	s := &System{opts: opts, paths: serverPaths(opts), log: opts.Logger, metrics: NewMetrics(reg), stopped: make(chan struct{}),
		supervisorDone: make(chan struct{})}
	s.ways = ways{routes: &s.routes, queueLimit: opts.QueueSize, metrics: s.metrics, log: opts.Logger, remote: opts.Remote, demand: &s.demand,
		ask: func(path string) { s.as.Root.Send(s.as.NewLocalPID(supervisorName), demandLoad{path: path}) }}
	s.stoppedCtx, s.stopStopped = context.WithCancel(context.Background())
	s.ctx, s.cancel = context.WithCancel(context.Background())
	reg.MustRegister(newStateCollector(s), newCompareCollector(s))
	empty := table{}
	s.routes.Store(&empty)
	s.demand.Store(&demandTable{})
	s.status.Store(&Status{Models: []ModelStatus{}})
	s.applied.Store(&appliedConfig{changed: make(chan struct{})})
	workers, queue := opts.ShadowWorkers, opts.ShadowQueue
	if workers <= 0 {
		workers, queue = 1, 4
	}
	shadowCPU := s.metrics.lowCPU.WithLabelValues("shadow")
	s.low = newLowPriority(workers, max(queue, 0), opts.Logger, func(d time.Duration) { shadowCPU.Add(d.Seconds()) })
	s.dispatcher = newWorkerDispatcher(300, 30*time.Second)
	s.disk = newDiskCache(opts.DiskCacheBytes)
	s.state = newSharedState(opts.Bucket, opts.ModelConfigPath, opts.Logger.With("component", "contract-state"))
	s.background(s.state.run)
	s.as = actor.NewActorSystem(actor.WithLoggerFactory(func(*actor.ActorSystem) *slog.Logger {
		return opts.Logger.With("component", "protoactor")
	}))
	var err error
	// Neither the router nor the supervisor is ever restarted (panics.go).
	guardian := actor.WithGuardian(&resumeOnPanic{log: opts.Logger, metrics: s.metrics})
	s.router, err = s.as.Root.SpawnNamed(actor.PropsFromProducer(func() actor.Actor {
		return newRouter(s)
	}, actor.WithMailbox(actor.UnboundedPriority()), actor.WithDispatcher(s.dispatcher), guardian), "router")
	if err != nil {
		s.shutdown()
		return nil, fmt.Errorf("spawning router: %w", err)
	}
	s.supervisor, err = s.as.Root.SpawnNamed(actor.PropsFromProducer(func() actor.Actor {
		return newSupervisor(s)
	}, actor.WithSupervisor(restartAlways()), guardian), supervisorName)
	if err != nil {
		s.shutdown()
		return nil, fmt.Errorf("spawning supervisor: %w", err)
	}
	return s, nil
}

// serverPaths are the server's own paths, which the errors the System
// shows its callers (the status document, registrations, the management
// API's writes) leave out: the model cache (shown as <cache_dir>) and
// the directory of a file bucket (its URL shown as "the bucket", its
// files by their object names). The log keeps them (package redact).
func serverPaths(opts Options) redact.Paths {
	var p redact.Paths
	if d := bucket.LocalDir(opts.Bucket); d != "" {
		p = p.With("file://"+filepath.ToSlash(d), "the bucket").With(d, "")
	}
	if d := opts.CacheDir; d != "" {
		p = p.With(d, "<cache_dir>")
		if abs, err := filepath.Abs(d); err == nil && abs != d {
			p = p.With(abs, "<cache_dir>")
		}
	}
	return p
}

// modelPaths are the server's paths (serverPaths) and local's directory,
// shown as the model's path in the bucket: a runtime's error about
// /var/cache/grove/models/pctr-12/model.onnx names ads/pctr/model.onnx.
func (s *System) modelPaths(local *bucket.LocalModel) redact.Paths {
	if local == nil {
		return s.paths
	}
	return s.paths.With(local.Dir, strings.TrimSuffix(local.Prefix(), "/"))
}

// supervisorName is the supervisor's actor name; the router finds it by it.
const supervisorName = "supervisor"

// background runs job on a goroutine that Stop waits for; job must
// return soon after ctx is done.
func (s *System) background(job func(ctx context.Context)) {
	s.bg.Add(1)
	go func() {
		defer s.bg.Done()
		job(s.ctx)
	}()
}

// Infer runs a batch of requests and returns one Result per Request, in
// order. Requests for different models run concurrently. Each answer is
// handed to the prediction sink before Infer returns; a batch abandoned by
// its caller (ctx done) was not served and is not logged. A deadline of
// ctx further off than Options.MaxTimeout is brought forward to it.
func (s *System) Infer(ctx context.Context, reqs []Request) ([]Result, error) {
	ctx, cancel := s.clampDeadline(ctx)
	defer cancel()
	return s.run(newBatch(ctx, reqs))
}

// clampDeadline brings a deadline of ctx further off than
// Options.MaxTimeout forward to it; call cancel when the call is
// answered. Infer and Score, where the callers' requests enter, clamp;
// a forwarded request (Predict) carries the deadline the first node
// clamped.
func (s *System) clampDeadline(ctx context.Context) (context.Context, context.CancelFunc) {
	if m := s.opts.MaxTimeout; m > 0 {
		if dl, ok := ctx.Deadline(); ok && time.Until(dl) > m {
			return context.WithTimeout(ctx, m)
		}
	}
	return ctx, func() {}
}

// run sends b to the router and waits for its answers, then logs them.
// When the caller's deadline passes first, the items not yet answered are
// answered with ErrDeadlineExceeded (and their work is dropped when a
// model actor reaches it); when the caller goes away, nothing is returned
// or logged.
func (s *System) run(b *batch) ([]Result, error) {
	res, err := s.runUnlogged(b)
	if err != nil {
		return nil, err
	}
	if p := s.opts.Predictions; p != nil && (b.score == nil || b.score.routed.Load()) {
		ctx, span := tracing.Start(b.ctx, tracing.SpanLog)
		tp := tracing.TraceParent(trace.SpanContextFromContext(ctx))
		for i := range res {
			if tp != "" {
				b.reqs[i].TraceParent = tp
			}
			p.LogPrediction(&b.reqs[i], &res[i], true)
		}
		if span.IsRecording() {
			span.SetAttributes(tracing.AttrEvents.Int(len(res)))
		}
		span.End()
	}
	return res, nil
}

// runUnlogged is run without the prediction log.
func (s *System) runUnlogged(b *batch) ([]Result, error) {
	if s.closing.Load() {
		return nil, ErrStopped
	}
	s.calls.Add(1)
	defer s.calls.Add(-1)
	switch {
	case s.forwardsAlone(b):
		return s.forwardAlone(b)
	case s.servesAlone(b):
		if s.serveAlone(b) == elsewhere {
			return s.forwardAlone(b) // its model is on another node
		}
	default:
		s.as.Root.Send(s.router, b)
	}
	select {
	case <-b.reply: // answered already (it ran inline): ctx's Done channel is not made
	default:
		if err := s.await(b); err != nil {
			return nil, err
		}
	}
	if b.err != nil {
		return nil, b.err
	}
	return b.results, nil
}

// await waits for b's answer: until b.reply, or its caller's context
// ends (an error when it went away; past its deadline, b's unanswered
// requests are answered DeadlineExceeded, and await then waits for the
// answer that makes), or the engine stops (ErrStopped).
func (s *System) await(b *batch) error {
	select {
	case <-b.reply:
	case <-b.ctx.Done():
		if !pastDeadline(b.ctx, time.Now()) {
			return b.ctx.Err()
		}
		b.expireUnanswered(fmt.Errorf("%w: no answer within the request's deadline", servables.ErrDeadlineExceeded), &s.ways)
		select {
		case <-b.reply:
		case <-s.stopped:
			return ErrStopped
		}
	case <-s.stopped:
		return ErrStopped
	}
	return nil
}

// serveAlone takes b's one request to its model actor from the caller's
// goroutine (servesAlone), where it runs when the actor is idle and its
// deadline allows (b.inline, content.runsInline), and it is the only call
// the engine serves (System.calls): with others in flight, a model actor
// on the dispatcher gathers the requests that arrive during the hand-off
// into one forward call, where an inline run would leave them to a run of
// their own after it. A caller running its request cannot return before
// it ends: a request another node forwarded here (b.local) never runs
// there, so that its transport's cancellation answers it at once
// (Predict). A panic on the way (a bug in what the router would have
// run) is recovered as the router recovers it: the request is answered
// with the internal error, counted as the router's
// (grove_actor_panics_total{actor="router"}), and its queue place given
// back (sendPredict).
func (s *System) serveAlone(b *batch) (w way) {
	defer func() {
		if v := recover(); v != nil {
			b.failPanicked(recoverPanic(s.log, s.metrics, "router", messageType(b), v), s.metrics)
			w = failedHere
		}
	}()
	b.inline = !b.local && s.calls.Load() == 1
	return s.ways.toModel(s.as.Root.Send, b, 0, nil)
}

// ModelPaths lists the paths that have a ready model, sorted: a versioned
// entry's path among them once one of its versions serves (NewestVersion),
// and the on-demand models not loaded (a request loads them); on a
// cluster node, those ready on other nodes too (Options.Remote).
func (s *System) ModelPaths() []string {
	routes := *s.routes.Load()
	demand := *s.demand.Load()
	paths := make([]string, 0, len(routes)+len(demand))
	for path := range routes {
		paths = append(paths, path)
	}
	for path := range demand {
		paths = append(paths, path)
	}
	if s.opts.Remote != nil {
		for _, p := range s.opts.Remote.Paths() {
			if routes[p] == nil {
				paths = append(paths, p)
			}
		}
	}
	slices.Sort(paths)
	return slices.Compact(paths)
}

// NewestVersion reports, for the path of a versioned entry ("pcvr/"),
// the path of the version it serves now ("pcvr/3/", see VersionedStatus),
// or, on a cluster node, the one another node serves when it is not
// here; ok is false for any other path.
func (s *System) NewestVersion(parent string) (path string, ok bool) {
	c := (*s.routes.Load())[parent]
	if c == nil {
		if info, ok := s.remoteModel(parent); ok && info.Newest != "" {
			return info.Newest, true
		}
		return "", false
	}
	if c.path == parent {
		return "", false
	}
	return c.path, true
}

// Status returns a snapshot of the config source and every configured model.
func (s *System) Status() Status {
	st := *s.freshStatus()
	st.Ready = s.Ready()
	now := time.Now()
	st.Models = append([]ModelStatus(nil), st.Models...)
	for i := range st.Models {
		st.Models[i].finish(now)
	}
	return st
}

// freshStatus returns the status snapshot, having the supervisor publish
// a new one first when an event changed the status since the last. The
// supervisor does all its slow work in the background, so it answers at
// once; once it has stopped, or if it has not answered within
// statusQueryWait (it should not happen), the last snapshot it published
// is returned.
func (s *System) freshStatus() *Status {
	if s.statusStale.Load() {
		q := statusQuery{done: make(chan struct{})}
		s.as.Root.Send(s.supervisor, q)
		t := time.NewTimer(statusQueryWait)
		select {
		case <-q.done:
		case <-s.supervisorDone:
		case <-s.stopped:
		case <-t.C:
			s.log.Warn("status: the supervisor did not answer; returning the last snapshot", "waited", statusQueryWait)
		}
		t.Stop()
	}
	return s.status.Load()
}

// statusQueryWait bounds how long a read of the status waits for the
// supervisor's snapshot (freshStatus).
const statusQueryWait = 5 * time.Second

// Ready reports whether the first reconcile has finished and the system is not draining.
func (s *System) Ready() bool { return s.settled.Load() && !s.draining.Load() }

// Drain marks the system as stopping: Ready turns false, requests are still served.
func (s *System) Drain() { s.draining.Store(true) }

// Stop stops polling and every background job, stops every model actor
// (closing its servable and deleting its cached files) and the actor
// system, and returns once no goroutine of the system is left. A load
// that ends during Stop is closed, not served. Requests still running get
// ErrStopped. If ctx ends first, Stop returns its error at once and lets
// every caller waiting on the actors go; the shutdown then completes on
// its own when what still runs (a forward call, a load that cannot be
// interrupted) ends.
func (s *System) Stop(ctx context.Context) error {
	if !s.closing.CompareAndSwap(false, true) {
		return errors.New("actors: already stopped")
	}
	s.draining.Store(true)
	s.cancel()
	done := make(chan struct{})
	go func() {
		defer close(done)
		// The supervisor takes no step from now on and discards what the
		// running jobs bring; once they all have, it is stopped with its
		// model actors.
		q := quiesce{done: make(chan struct{})}
		s.as.Root.Send(s.supervisor, q)
		<-q.done
		s.bg.Wait()
		flushed := quiesce{done: make(chan struct{})}
		s.as.Root.Send(s.supervisor, flushed)
		<-flushed.done
		_ = s.as.Root.StopFuture(s.supervisor).Wait()
		_ = s.as.Root.StopFuture(s.router).Wait()
		s.shutdown() // waits for the releases the stop started, too
	}()
	select {
	case <-done:
		return nil
	case <-ctx.Done():
		s.markStopped()
		return fmt.Errorf("stopping actors: %w (the shutdown completes when the work still running ends)", ctx.Err())
	}
}

// markStopped makes every call still waiting for the actors fail.
func (s *System) markStopped() {
	s.stopOnce.Do(func() {
		close(s.stopped)
		s.stopStopped()
	})
}

// shutdown stops the actor system and the goroutines outside it. The
// background jobs end before the low-priority workers stop: a forward
// goroutine's answer hands the shadow copies that wait for it to them.
func (s *System) shutdown() {
	s.cancel()
	s.markStopped()
	s.as.Shutdown()
	s.bg.Wait()
	s.low.stop()
	s.dispatcher.stop()
}

// loadOptions are the runtime's load options of a model: its intra-op
// thread count (its own setting, or the server's), its missing_value and
// the server's MaxModelBytes.
func (s *System) loadOptions(meta modelconfig.Model) servables.LoadOptions {
	opts := servables.LoadOptions{IntraOpThreads: s.opts.IntraOpThreads, MaxModelBytes: s.opts.MaxModelBytes}
	if n := meta.Serving.IntraOpThreads; n > 0 {
		opts.IntraOpThreads = n
	}
	if meta.Serving.HasMissingValue {
		opts.MissingValue = new(meta.Serving.MissingValue)
	}
	return opts
}

// lowered runs f at the lower CPU priority of loads (lowprio.Nice), so
// that a load yields the cores to the requests served meanwhile, and
// counts its thread's CPU time in grove_low_priority_cpu_seconds_total
// (work="load"), a panic's included. If the priority cannot be set, f
// runs at normal priority and the first such failure is logged.
func (s *System) lowered(f func()) {
	measured := func() {
		start := lowprio.ThreadCPU()
		defer func() { s.metrics.lowCPU.WithLabelValues("load").Add((lowprio.ThreadCPU() - start).Seconds()) }()
		f()
	}
	if err := lowprio.Run(lowprio.Nice, measured); err != nil && s.lowerWarned.CompareAndSwap(false, true) {
		s.opts.Logger.Warn("model loads run at normal CPU priority: could not lower their thread's", "err", err)
	}
}

// load loads cached model files with the runtime that accepts them and
// the model's load options, as the supervisor does first and a restarted
// model actor again, at a lower CPU priority (lowered; at normal priority
// for a runtime that starts the model's own threads: servables.ThreadStarter),
// and gives it its signature: the runtime's, with the
// declared one applied (a declaration that does not fit the model fails
// the load). It returns the runtime's name. Whatever stops it once the
// runtime has loaded the model, an error or a panic (a bug: in the
// servable's metadata or the declaration's code), closes the servable it
// does not return.
func (s *System) load(ctx context.Context, local *bucket.LocalModel, opts servables.LoadOptions, declared modelconfig.Signature) (name string, signed *servables.Signed, err error) {
	rt, err := s.opts.Runtimes.Find(os.DirFS(local.Dir), local.Files)
	if err != nil {
		return "", nil, err
	}
	opts.Checksum = local.Checksum
	var sv servables.Servable
	load := func() {
		// A runtime's Go code that panics on a model file (a bug, in
		// Grove's parsers or a runtime's binding) fails this load, not
		// the process; it counts as a load's panic.
		defer func() {
			if v := recover(); v != nil {
				s.metrics.panics.WithLabelValues("load").Inc()
				s.opts.Logger.Error("internal error: the runtime panicked loading a model; the load fails", "runtime", rt.Name(), "dir", local.Dir,
					"panic", fmt.Sprint(v), "stack", string(debug.Stack()))
				sv, err = nil, fmt.Errorf("the %s runtime panicked loading the model (an internal error; the stack is logged): %v", rt.Name(), v)
			}
		}()
		sv, err = rt.Load(ctx, local.Dir, local.Files, opts)
	}
	if ts, ok := rt.(servables.ThreadStarter); ok && ts.StartsThreads(opts) {
		load()
	} else {
		s.lowered(load)
	}
	if err != nil {
		return "", nil, err
	}
	defer func() {
		if signed == nil {
			_ = sv.Close()
		}
	}()
	meta, err := declare(sv.Metadata(), declared)
	if err != nil {
		return "", nil, err
	}
	return rt.Name(), servables.WithSignature(sv, meta), nil
}

// WarmUp is a model's warm-up: input sets run before its content serves.
type WarmUp struct {
	// Sets are the requests' inputs, bound by name (or by position where
	// Positional and the runtime's convention say so: content.bind).
	Sets       [][]servables.Tensor
	Positional bool
	// Runs is how many times each set runs; PerReplica runs them that
	// many times on every replica rather than on the least busy ones.
	Runs       int
	PerReplica bool
}

// warmUpOf is the warm-up of model meta: its warm_up_batch_request_json
// (B&A requests, bound by position where the runtime's convention is,
// each run once: a graph's first run does the runtime's one-time work,
// TorchScript's optimization of the graph and ONNX Runtime's buffers,
// and that run should not be a user's), else what Options.WarmUp gives,
// else none.
func (s *System) warmUpOf(c *content, meta modelconfig.Model) (WarmUp, error) {
	if meta.WarmUpJSON == "" {
		if s.opts.WarmUp == nil {
			return WarmUp{}, nil
		}
		return s.opts.WarmUp(meta, c.metadata())
	}
	if s.opts.ParseWarmUp == nil {
		return WarmUp{}, errors.New("this server cannot parse warm-up requests")
	}
	// A version's warm-up requests name its entry's path, as written in the config.
	sets, err := s.opts.ParseWarmUp(meta.WarmUpJSON, meta.EntryPath())
	if err != nil {
		return WarmUp{}, err
	}
	return WarmUp{Sets: sets, Positional: true, Runs: 1}, nil
}

// warmUp runs the model's warm-up (warmUpOf) through its actors at
// warm-up priority; any failure rejects the content. It gives up when ctx
// is done or after Options.WarmUpTimeout, with an error naming the model
// and the bound. A model whose signature is still incomplete afterwards (a
// TorchScript model with neither a declaration nor a warm-up) is logged:
// its metadata names its tensors without datatypes or shapes.
//
// Giving up frees the supervisor and the callers waiting for the load,
// not the forward call, which a runtime blocked in C cannot be made to
// leave: its model actor stays in it. The content is never closed under
// it: the failed job's release stops the content's model actors, and a
// model actor handles its stop, closing its share of the servable
// (modelActor.close), only once the message it is running returns; the
// content's files are deleted and its memory freed after all of them
// have stopped (supervisorActor.ended). The error of a warm-up that
// timed out so is a *warmUpTimeout: the planner loads the same content
// again only once that call has returned (lifecycle.StuckWarmUp), a
// record the supervisor keeps, a panic of its own included (panics.go).
func (s *System) warmUp(ctx context.Context, c *content, meta modelconfig.Model) (err error) {
	bound := s.opts.WarmUpTimeout
	ctx, cancel := context.WithTimeoutCause(ctx, bound, &warmUpTimeout{path: meta.Path, bound: bound})
	defer cancel()
	defer func() {
		if err != nil && errors.Is(ctx.Err(), context.DeadlineExceeded) {
			s.opts.Logger.Warn("model warm-up timed out; a forward call still running keeps its content loaded, and the same content from loading again, until it returns",
				"model", meta.Path, "warmup_timeout", bound)
		}
		if m := c.metadata(); err == nil && !m.Known() {
			s.opts.Logger.Warn("model signature incomplete: its metadata has no datatypes or shapes; declare inputs and outputs in the model config, or give it a warm_up_batch_request_json (docs/signatures.md)",
				"model", meta.Path, "runtime", m.Runtime)
		}
	}()
	// A panic in the warm-up's own code (a bug: in Grove's parsers of its
	// requests, in Options.WarmUp) fails this load, not the process; the
	// failed job releases its content. A forward call that panics is its
	// model actor's (restarted), answered ErrModelCrashed.
	defer func() {
		if v := recover(); v != nil {
			err = recoverJob(s.log, s.metrics, "warm_up", "warm-up of model "+meta.Path, v)
		}
	}()
	w, err := s.warmUpOf(c, meta)
	if err != nil || len(w.Sets) == 0 {
		return err
	}
	sent := make([][]servables.Tensor, len(w.Sets))
	outs := make([][]servables.Tensor, len(w.Sets))
	for i := range w.Sets {
		sent[i] = c.bind(w.Sets[i], w.Positional, false)
	}
	replicas := 1
	if w.PerReplica {
		replicas = len(c.pids)
	}
	for run := range max(w.Runs, 1) {
		for r := range replicas {
			for i, inputs := range sent {
				p := &predict{inputs: inputs, priority: priorityWarmUp, enqueued: time.Now()}
				if w.PerReplica {
					p.replica = r + 1
				}
				if outs[i], err = s.warmUpOne(ctx, c, p); err != nil {
					return fmt.Errorf("warm-up request %d (run %d, replica %d): %w", i, run+1, r+1, err)
				}
			}
		}
	}
	return c.learn(sent, outs)
}

// warmUpTimeout is the failure of a warm-up still running after its bound
// (Options.WarmUpTimeout): a forward call of it may run on.
type warmUpTimeout struct {
	path  string
	bound time.Duration
}

// Error names the model and the bound.
func (e *warmUpTimeout) Error() string {
	return fmt.Sprintf("warm-up of %q did not finish within %v", e.path, e.bound)
}

// warmUpOne sends one warm-up request p to c's actors and waits for its
// answer, or for ctx to end (its cause is the error: the warm-up's bound,
// or the system stopping). A late answer goes nowhere.
func (s *System) warmUpOne(ctx context.Context, c *content, p *predict) ([]servables.Tensor, error) {
	if err := c.acquire(0, false); err != nil {
		return nil, err
	}
	type answer struct {
		out []servables.Tensor
		err error
	}
	done := make(chan answer, 1)
	p.done = func(out []servables.Tensor, err error, _, _ time.Duration) {
		c.leave(1)
		done <- answer{out, err}
	}
	c.send(s.as.Root.Send, p, false)
	select {
	case a := <-done:
		return a.out, a.err
	case <-ctx.Done():
		return nil, context.Cause(ctx)
	}
}
