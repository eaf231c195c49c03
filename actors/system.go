package actors

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sync/atomic"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/groveml/grove/conf"
	"github.com/groveml/grove/conf/bucket"
	"github.com/groveml/grove/servables"
)

// Options configure a System.
type Options struct {
	// Bucket holds the model config and the models; ModelConfigPath names the config object in it.
	Bucket          bucket.Bucket
	ModelConfigPath string
	// PollInterval is how often the model config is read.
	PollInterval time.Duration
	// CacheDir is where model files are copied before they are loaded; Grove owns it.
	CacheDir string
	// MaxModelBytes rejects larger models.
	MaxModelBytes int64
	// QueueSize bounds the requests waiting for one model; more fail with ErrOverloaded.
	QueueSize int
	// ShadowMicroBatchRows cuts shadow copies into micro-batches of at most
	// this many rows, so a user request waits for at most one; 0 never cuts.
	ShadowMicroBatchRows int
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
	// Predictions receives every answer returned to a caller; nil logs none.
	Predictions PredictionSink
	// Logger receives the actors' logs; nil means slog.Default().
	Logger *slog.Logger
	// Registerer receives the actors' metrics; nil means none are registered.
	Registerer prometheus.Registerer
}

// System is a running set of actors: the supervisor with its model actors,
// and the router.
type System struct {
	opts           Options
	log            *slog.Logger
	metrics        *Metrics
	as             *actor.ActorSystem
	supervisor     *actor.PID
	router         *actor.PID
	routes         atomic.Pointer[table]
	contracts      atomic.Pointer[contracts]
	status         atomic.Pointer[Status]
	state          *sharedState
	low            *lowPriority      // shadow forwards
	dispatcher     *workerDispatcher // runs the router's and models' mailboxes
	stopState      context.CancelFunc
	firstReconcile atomic.Bool
	stopping       atomic.Bool
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
	reg := opts.Registerer
	if reg == nil {
		reg = prometheus.NewRegistry()
	}
	s := &System{opts: opts, log: opts.Logger, metrics: NewMetrics(reg)}
	reg.MustRegister(newStateCollector(s))
	empty := table{}
	s.routes.Store(&empty)
	noContracts := contracts{}
	s.contracts.Store(&noContracts)
	s.status.Store(&Status{Models: []ModelStatus{}})
	workers, queue := opts.ShadowWorkers, opts.ShadowQueue
	if workers <= 0 {
		workers, queue = 1, 4
	}
	s.low = newLowPriority(workers, max(queue, 0), opts.Logger)
	s.dispatcher = newWorkerDispatcher(300, 30*time.Second)
	s.state = newSharedState(opts.Bucket, opts.ModelConfigPath, opts.Logger.With("component", "contract-state"))
	var stateCtx context.Context
	stateCtx, s.stopState = context.WithCancel(context.Background())
	go s.state.run(stateCtx)
	s.as = actor.NewActorSystem(actor.WithLoggerFactory(func(*actor.ActorSystem) *slog.Logger {
		return opts.Logger.With("component", "protoactor")
	}))
	var err error
	s.supervisor, err = s.as.Root.SpawnNamed(actor.PropsFromProducer(func() actor.Actor {
		return &supervisorActor{sys: s, log: opts.Logger.With("component", "supervisor"), entries: map[string]*entry{}}
	}, actor.WithSupervisor(restartAlways())), "supervisor")
	if err != nil {
		return nil, fmt.Errorf("spawning supervisor: %w", err)
	}
	s.router, err = s.as.Root.SpawnNamed(actor.PropsFromProducer(func() actor.Actor {
		return &routerActor{routes: &s.routes, queueLimit: opts.QueueSize, metrics: s.metrics,
			microBatchRows: opts.ShadowMicroBatchRows, sink: opts.Predictions}
	}, actor.WithMailbox(actor.UnboundedPriority()), actor.WithDispatcher(s.dispatcher)), "router")
	if err != nil {
		return nil, fmt.Errorf("spawning router: %w", err)
	}
	return s, nil
}

// Infer runs a batch of requests and returns one Result per Request, in
// order. Requests for different models run concurrently. Each answer is
// handed to the prediction sink before Infer returns; a batch abandoned by
// its caller (ctx done) was not served and is not logged.
func (s *System) Infer(ctx context.Context, reqs []Request) ([]Result, error) {
	if s.as.IsStopped() {
		return nil, ErrStopped
	}
	b := &batch{reqs: reqs, reply: make(chan []Result, 1)}
	s.as.Root.Send(s.router, b)
	select {
	case res := <-b.reply:
		if p := s.opts.Predictions; p != nil {
			for i := range res {
				p.LogPrediction(&reqs[i], &res[i], true)
			}
		}
		return res, nil
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// ModelPaths lists the paths that have a ready model, sorted.
func (s *System) ModelPaths() []string {
	routes := *s.routes.Load()
	paths := make([]string, 0, len(routes))
	for path := range routes {
		paths = append(paths, path)
	}
	slices.Sort(paths)
	return paths
}

// Status returns a snapshot of the config source and every configured model.
func (s *System) Status() Status {
	st := *s.status.Load()
	st.Ready = s.Ready()
	now := time.Now()
	st.Models = append([]ModelStatus(nil), st.Models...)
	for i := range st.Models {
		st.Models[i].finish(now)
	}
	return st
}

// Ready reports whether the first reconcile has finished and the system is not stopping.
func (s *System) Ready() bool { return s.firstReconcile.Load() && !s.stopping.Load() }

// Drain marks the system as stopping: Ready turns false, requests are still served.
func (s *System) Drain() { s.stopping.Store(true) }

// Stop stops polling, stops every model actor (closing its servable) and the
// actor system. Requests still running get ErrStopped.
func (s *System) Stop(ctx context.Context) error {
	s.stopping.Store(true)
	s.stopState()
	done := make(chan struct{})
	go func() {
		_ = s.as.Root.StopFuture(s.router).Wait()
		_ = s.as.Root.StopFuture(s.supervisor).Wait()
		close(done)
	}()
	select {
	case <-done:
	case <-ctx.Done():
		return fmt.Errorf("stopping actors: %w", ctx.Err())
	}
	s.as.Shutdown()
	s.low.stop()
	return nil
}

// fetchAndLoad copies a model from src into the cache, verifies its checksum and loads it.
func (s *System) fetchAndLoad(ctx context.Context, src bucket.Bucket, meta conf.ModelMetadata) (*bucket.LocalModel, string, servables.Servable, error) {
	local, err := bucket.Fetch(ctx, src, meta.Path, s.opts.CacheDir, s.opts.MaxModelBytes)
	if err != nil {
		return nil, "", nil, err
	}
	if meta.Checksum != "" && meta.Checksum != local.Checksum {
		_ = local.Remove()
		return nil, "", nil, fmt.Errorf("model rejected due to incorrect checksum: expected %s, actual %s", meta.Checksum, local.Checksum)
	}
	rt, err := s.opts.Runtimes.Find(local.Files)
	if err != nil {
		_ = local.Remove()
		return nil, "", nil, err
	}
	sv, err := s.loadLocal(ctx, rt.Name(), local, s.threads(meta))
	if err != nil {
		_ = local.Remove()
		return nil, "", nil, err
	}
	return local, rt.Name(), sv, nil
}

// threads is the intra-op thread count of a model: its own setting, or the server's.
func (s *System) threads(meta conf.ModelMetadata) int {
	if n := meta.Serving.IntraOpThreads; n > 0 {
		return n
	}
	return s.opts.IntraOpThreads
}

// loadLocal loads cached model files with the named runtime and threads
// intra-op threads.
func (s *System) loadLocal(ctx context.Context, runtime string, local *bucket.LocalModel, threads int) (servables.Servable, error) {
	for _, rt := range s.opts.Runtimes {
		if rt.Name() == runtime {
			return rt.Load(ctx, local.Dir, local.Files, servables.LoadOptions{IntraOpThreads: threads})
		}
	}
	return nil, fmt.Errorf("runtime %q is not in this build", runtime)
}

// warmUp runs the model's warm-up requests through its actor at warm-up
// priority, twice; any failure rejects the content.
func (s *System) warmUp(root *actor.RootContext, c *content, meta conf.ModelMetadata) error {
	if meta.WarmUpJSON == "" {
		return nil
	}
	if s.opts.ParseWarmUp == nil {
		return errors.New("this server cannot parse warm-up requests")
	}
	sets, err := s.opts.ParseWarmUp(meta.WarmUpJSON, meta.Path)
	if err != nil {
		return err
	}
	// Each request runs twice: TorchScript's profiling executor optimises a
	// graph only on its second run, and that run should not be a user's.
	for i, inputs := range append(sets, sets...) {
		i %= len(sets)
		if err := c.acquire(0); err != nil {
			return err
		}
		errc := make(chan error, 1)
		c.send(root.Send, &predict{inputs: inputs, priority: priorityWarmUp, enqueued: time.Now(),
			done: func(_ []servables.Tensor, err error, _, _ time.Duration) {
				c.inflight.Add(-1)
				errc <- err
			}})
		if err := <-errc; err != nil {
			return fmt.Errorf("warm-up request %d: %w", i, err)
		}
	}
	return nil
}
