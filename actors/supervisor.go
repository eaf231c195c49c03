package actors

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"sync/atomic"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/groveml/grove/conf"
	"github.com/groveml/grove/conf/bucket"
	"github.com/groveml/grove/servables"
)

// Messages the supervisor sends itself.
type (
	pollTick struct{}
	// reloadRequest asks for a config poll that starts after it; done is
	// closed once that poll's result is applied.
	reloadRequest struct{ done chan struct{} }
	houseTick     struct{}
	configResult  struct {
		cfg *conf.ModelConfig
		err error
		at  time.Time
		// state is the contract state read with the config, nil if it
		// could not be read (stateErr says why).
		state    *conf.ContractState
		stateErr error
		// stateMark is the shared state's write mark taken before the read.
		stateMark int64
	}
	loadResult struct {
		path  string
		job   int
		meta  conf.ModelMetadata
		local *bucket.LocalModel
		rt    string
		s     servables.Servable
		err   error
	}
	warmResult struct {
		path string
		job  int
		meta conf.ModelMetadata
		c    *content
		err  error
	}
)

// entry is the supervisor's record of one configured model path.
type entry struct {
	meta   conf.ModelMetadata // as in the config in force
	active *content
	// activeMeta is the metadata the active content was loaded with; its
	// grace period applies when that content is replaced or evicted.
	activeMeta conf.ModelMetadata
	// job is the id of the running load, 0 when none runs.
	job     int
	removed bool
	evictAt time.Time
	// expired is set while every contract servable using the path is
	// expired; its content is unloaded at expireAt.
	expired  bool
	expireAt time.Time
	// source, if not nil, holds the files of a model registered through
	// the API (RegisterModel) rather than listed in the config; waiters
	// get the outcome of its load.
	source  bucket.Bucket
	waiters []chan error
	lastErr string
	errAt   time.Time
}

// retiree is a content that gets no new traffic and is released once its
// grace period is over and its in-flight requests are answered.
type retiree struct {
	c         *content
	releaseAt time.Time
}

// supervisorActor polls the model config, reconciles the served models with
// it and supervises the model actors.
type supervisorActor struct {
	sys      *System
	log      *slog.Logger
	entries  map[string]*entry
	order    []string // config order, for status
	retiring []retiree
	jobs     int
	fetching bool
	// waitNext are reloads waiting for a poll to start; waitCur those
	// waiting for the running poll's result.
	waitNext, waitCur []chan struct{}
	applied           bool // a config has been applied at least once
	cfgStat           ConfigStatus
	stop              context.CancelFunc
	ctx               context.Context
}

func (s *supervisorActor) Receive(ctx actor.Context) {
	switch m := ctx.Message().(type) {
	case *actor.Started:
		s.start(ctx)
	case *actor.Stopping:
		s.stop()
	case pollTick:
		s.poll(ctx)
	case reloadRequest:
		s.waitNext = append(s.waitNext, m.done)
		s.poll(ctx)
	case registerRequest:
		s.register(ctx, m)
	case unregisterRequest:
		m.reply <- s.unregister(ctx, m.path)
	case configResult:
		s.fetching = false
		s.applyConfig(ctx, m)
		for _, done := range s.waitCur {
			close(done)
		}
		s.waitCur = nil
		if len(s.waitNext) > 0 {
			s.poll(ctx)
		}
	case loadResult:
		s.loaded(ctx, m)
	case warmResult:
		s.warmed(ctx, m)
	case houseTick:
		s.housekeep(ctx)
	}
	s.publishStatus()
}

func (s *supervisorActor) start(ctx actor.Context) {
	s.ctx, s.stop = context.WithCancel(context.Background())
	self, root := ctx.Self(), ctx.ActorSystem().Root
	go func() {
		poll := time.NewTicker(s.sys.opts.PollInterval)
		house := time.NewTicker(100 * time.Millisecond)
		defer poll.Stop()
		defer house.Stop()
		root.Send(self, pollTick{})
		for {
			select {
			case <-s.ctx.Done():
				return
			case <-poll.C:
				root.Send(self, pollTick{})
			case <-house.C:
				root.Send(self, houseTick{})
			}
		}
	}()
}

// poll reads the model config in the background; the result comes back as a configResult.
func (s *supervisorActor) poll(ctx actor.Context) {
	if s.fetching {
		return
	}
	s.fetching = true
	s.waitCur, s.waitNext = s.waitNext, nil
	self, root := ctx.Self(), ctx.ActorSystem().Root
	o := s.sys.opts
	go func() {
		rctx, cancel := context.WithTimeout(s.ctx, max(o.PollInterval, 10*time.Second))
		defer cancel()
		data, _, err := o.Bucket.ReadObject(rctx, o.ModelConfigPath)
		var cfg *conf.ModelConfig
		if err != nil {
			err = fmt.Errorf("reading model config %s from %s: %w", o.ModelConfigPath, o.Bucket, err)
		} else if cfg, err = conf.ParseModelConfig(data); err != nil {
			err = fmt.Errorf("model config %s: %w", o.ModelConfigPath, err)
		}
		r := configResult{cfg: cfg, err: err, at: time.Now()}
		if err == nil && len(cfg.Contracts) > 0 {
			r.stateMark = s.sys.state.readMark()
			r.state, r.stateErr = s.sys.state.read(rctx)
		}
		root.Send(self, r)
	}()
}

func (s *supervisorActor) applyConfig(ctx actor.Context, r configResult) {
	s.cfgStat.LastPoll = timePtr(r.at)
	if r.err != nil {
		s.cfgStat.LastError, s.cfgStat.LastErrorAt = r.err.Error(), timePtr(r.at)
		s.sys.metrics.configErrors.Inc()
		result := "fetch_error"
		if r.cfg == nil && !errors.Is(r.err, bucket.ErrNotExist) && isParseError(r.err) {
			result = "invalid"
		}
		s.sys.metrics.configPolls.WithLabelValues(result).Inc()
		s.log.Error("model config rejected; the previous config stays in force", "err", r.err)
		return
	}
	s.sys.metrics.configPolls.WithLabelValues("ok").Inc()
	s.sys.metrics.reconciles.Inc()
	s.cfgStat.LastSuccess = timePtr(r.at)
	s.cfgStat.LastError, s.cfgStat.LastErrorAt = "", nil
	s.cfgStat.Models = len(r.cfg.Models)
	if r.stateErr != nil {
		s.log.Warn("contract state not read; the last one read stays in use", "err", r.stateErr)
	} else if r.state != nil && !s.sys.state.publishRead(r.state, r.stateMark) {
		s.log.Debug("contract state read is older than one this replica wrote since; keeping the newer one")
	}
	s.sys.setContracts(r.cfg.Contracts, r.at)
	s.reconcile(ctx, r.cfg, r.at)
	s.applied = true
}

// isParseError tells a config that was read but rejected from one that could not be read.
func isParseError(err error) bool {
	var pe *conf.ConfigError
	return errors.As(err, &pe)
}

// reconcile brings the entries in line with cfg: new paths and changed
// checksums start a load, failed loads are retried, paths no longer listed
// start their eviction grace period.
func (s *supervisorActor) reconcile(ctx actor.Context, cfg *conf.ModelConfig, now time.Time) {
	listed := make(map[string]bool, len(cfg.Models))
	s.order = s.order[:0]
	for _, m := range cfg.Models {
		listed[m.Path] = true
		s.order = append(s.order, m.Path)
		e := s.entries[m.Path]
		if e == nil {
			e = &entry{}
			s.entries[m.Path] = e
		}
		if e.source != nil {
			// The config wins over a registration: load the bucket's content.
			s.log.Info("registered model is now in the config; the config's content replaces it", "model", m.Path)
			e.source = nil
			e.notify(fmt.Errorf("model %s: %w", m.Path, ErrManagedByConfig))
			e.meta = m
			s.startLoad(ctx, m.Path, e)
			continue
		}
		if e.removed {
			s.log.Info("model listed again; eviction cancelled", "model", m.Path)
			e.removed, e.evictAt = false, time.Time{}
		}
		e.meta = m
		switch {
		case e.job != 0:
			// A load is running; its result is checked against e.meta when it arrives.
		case e.active != nil && (m.Checksum == "" || m.Checksum == e.active.checksum) && m.Serving == e.activeMeta.Serving:
			// Serving what the config asks for, as it asks. (New serving
			// options load the model again: load, warm up, swap.)
		case e.expired && e.active == nil:
			// Unloaded because its contracts expired it.
		default:
			s.startLoad(ctx, m.Path, e)
		}
	}
	for path, e := range s.entries {
		if listed[path] || e.removed || e.source != nil {
			continue
		}
		if e.active == nil {
			// Nothing serves: forget it now (a running load's result is discarded).
			delete(s.entries, path)
			continue
		}
		e.removed = true
		e.evictAt = now.Add(e.activeMeta.EvictionGracePeriod)
		s.log.Info("model removed from config; evicting after grace period", "model", path, "grace", e.activeMeta.EvictionGracePeriod)
	}
	s.housekeep(ctx)
}

// startLoad fetches, verifies and loads the content e.meta asks for, in the background.
func (s *supervisorActor) startLoad(ctx actor.Context, path string, e *entry) {
	s.jobs++
	e.job = s.jobs
	job, meta, src := s.jobs, e.meta, e.source
	if src == nil {
		src = s.sys.opts.Bucket
	}
	self, root := ctx.Self(), ctx.ActorSystem().Root
	s.log.Info("loading model", "model", path, "checksum", meta.Checksum, "from", src.String())
	go func() {
		r := loadResult{path: path, job: job, meta: meta}
		r.local, r.rt, r.s, r.err = s.sys.fetchAndLoad(s.ctx, src, meta)
		if r.err != nil {
			r.err = fmt.Errorf("loading model %s: %w", path, r.err)
		}
		root.Send(self, r)
	}()
}

// loaded spawns the model actor for freshly loaded content and warms it up.
func (s *supervisorActor) loaded(ctx actor.Context, r loadResult) {
	e := s.entries[r.path]
	if r.err != nil {
		s.failed(r.path, r.job, r.err)
		return
	}
	if e == nil || e.job != r.job {
		// The path was removed while it loaded.
		closeQuietly(r.s, r.local, s.log)
		return
	}
	c := &content{path: r.path, checksum: r.local.Checksum, runtime: r.rt, local: r.local, meta: r.s.Metadata()}
	rt, local := r.rt, r.local
	threads := s.sys.threads(r.meta)
	reload := func(ctx context.Context) (servables.Servable, error) {
		return s.sys.loadLocal(ctx, rt, local, threads)
	}
	opts := r.meta.Serving
	bo := batchOptions{maxRows: s.sys.opts.MaxBatchRows, delay: opts.MaxQueueDelay}
	if opts.MaxBatchRows > 0 {
		bo.maxRows = opts.MaxBatchRows
	}
	replicas := max(opts.Replicas, 1)
	shared := share(r.s, replicas)
	c.busy = make([]atomic.Int64, replicas)
	for i := range replicas {
		pid, err := ctx.SpawnNamed(modelProps(c, shared, reload, s.log, s.sys.metrics, bo, s.sys.low, s.sys.dispatcher), fmt.Sprintf("model-%d-%d", r.job, i))
		if err != nil {
			for _, p := range c.pids {
				ctx.Stop(p) // each closes its share of the servable
			}
			for range replicas - i {
				_ = shared.Close()
			}
			closeQuietly(nil, r.local, s.log)
			s.failed(r.path, r.job, fmt.Errorf("spawning model actor: %w", err))
			return
		}
		c.pids = append(c.pids, pid)
	}
	self, root := ctx.Self(), ctx.ActorSystem().Root
	go func() {
		err := s.sys.warmUp(root, c, r.meta)
		if err != nil {
			err = fmt.Errorf("warming up model %s: %w", r.path, err)
		}
		root.Send(self, warmResult{path: r.path, job: r.job, meta: r.meta, c: c, err: err})
	}()
}

// warmed puts warmed-up content into service, replacing the old content of its path.
func (s *supervisorActor) warmed(ctx actor.Context, r warmResult) {
	e := s.entries[r.path]
	now := time.Now()
	if r.err != nil {
		s.retire(r.c, now)
		s.failed(r.path, r.job, r.err)
		return
	}
	if e == nil || e.job != r.job {
		s.retire(r.c, now)
		return
	}
	e.job = 0
	defer e.notify(nil)
	if (e.meta.Checksum != "" && e.meta.Checksum != r.c.checksum) || e.meta.Serving != r.meta.Serving {
		// The config changed to another checksum or other serving options
		// while this content loaded.
		s.retire(r.c, now)
		s.startLoad(ctx, r.path, e)
		return
	}
	r.c.loadedAt = now
	old, oldGrace := e.active, e.activeMeta.EvictionGracePeriod
	e.active, e.activeMeta = r.c, r.meta
	e.lastErr, e.errAt = "", time.Time{}
	s.publishRoutes()
	s.sys.metrics.loads.WithLabelValues(r.path, "ok").Inc()
	if old != nil {
		s.log.Info("model updated in place", "model", r.path, "old_checksum", old.checksum, "checksum", r.c.checksum, "old_released_after", oldGrace)
		s.retire(old, now.Add(oldGrace))
	} else {
		s.log.Info("model ready", "model", r.path, "checksum", r.c.checksum, "runtime", r.c.runtime)
	}
}

// failed records a failed load; the previous content, if any, keeps serving.
func (s *supervisorActor) failed(path string, job int, err error) {
	s.sys.metrics.loads.WithLabelValues(path, "failed").Inc()
	e := s.entries[path]
	if e == nil || e.job != job {
		s.log.Warn("discarded load of a removed model failed", "model", path, "err", err)
		return
	}
	e.job = 0
	e.lastErr, e.errAt = err.Error(), time.Now()
	if e.source != nil {
		// A registration is not retried: its files are not kept.
		e.notify(err)
		if e.active == nil {
			delete(s.entries, path)
		}
		return
	}
	if e.active != nil {
		s.log.Error("model update failed; the previous content keeps serving", "model", path, "serving_checksum", e.active.checksum, "err", err)
	} else {
		s.log.Error("model load failed; retrying on the next poll", "model", path, "err", err)
	}
}

// retire takes c out of service: no new requests reach it, and it is released
// at releaseAt or once its in-flight requests are answered, whichever is later.
func (s *supervisorActor) retire(c *content, releaseAt time.Time) {
	c.retired.Store(true)
	s.retiring = append(s.retiring, retiree{c: c, releaseAt: releaseAt})
}

// housekeep ends grace periods and releases retired contents.
func (s *supervisorActor) housekeep(ctx actor.Context) {
	now := time.Now()
	changed := false
	for path, e := range s.entries {
		if e.removed && !now.Before(e.evictAt) {
			delete(s.entries, path)
			if e.active != nil {
				// Marked retired below, once the table without it is published.
				s.retiring = append(s.retiring, retiree{c: e.active, releaseAt: now})
				changed = true
			}
			s.log.Info("model evicted", "model", path)
		}
	}
	if s.expire(ctx, now) {
		changed = true
	}
	if changed {
		s.publishRoutes()
		for i := range s.retiring {
			s.retiring[i].c.retired.Store(true)
		}
	}
	kept := s.retiring[:0]
	for _, r := range s.retiring {
		if now.Before(r.releaseAt) || r.c.inflight.Load() > 0 {
			kept = append(kept, r)
			continue
		}
		s.release(ctx, r.c)
	}
	clear(s.retiring[len(kept):])
	s.retiring = kept
}

// expire unloads the models every contract using them has expired, once
// their grace period is over, and loads them again when a contract stops
// expiring them (a rollback). It reports whether it took content out of
// service; the caller publishes the routes and marks the content retired.
func (s *supervisorActor) expire(ctx actor.Context, now time.Time) bool {
	expired := s.sys.expiredPaths(now)
	changed := false
	for path, e := range s.entries {
		if e.removed {
			continue
		}
		switch {
		case expired[path] && !e.expired:
			grace := e.meta.EvictionGracePeriod
			if e.active != nil {
				grace = e.activeMeta.EvictionGracePeriod
			}
			e.expired, e.expireAt = true, now.Add(grace)
			s.log.Info("model expired by its contracts; unloading after grace period", "model", path, "grace", grace)
		case !expired[path] && e.expired:
			e.expired = false
			s.log.Info("model no longer expired", "model", path, "loaded", e.active != nil)
			if e.active == nil && e.job == 0 {
				s.startLoad(ctx, path, e)
			}
		}
		if e.expired && e.active != nil && !now.Before(e.expireAt) {
			s.retiring = append(s.retiring, retiree{c: e.active, releaseAt: now})
			e.active = nil
			changed = true
			s.log.Info("expired model unloaded", "model", path)
		}
	}
	return changed
}

// release stops c's model actor (which closes the servable) and deletes its cached files.
func (s *supervisorActor) release(ctx actor.Context, c *content) {
	s.log.Debug("releasing model content", "model", c.path, "checksum", c.checksum)
	if len(c.pids) == 0 {
		closeQuietly(nil, c.local, s.log)
		return
	}
	futures := make([]*actor.Future, len(c.pids))
	for i, p := range c.pids {
		futures[i] = ctx.StopFuture(p)
	}
	go func() {
		for _, f := range futures {
			_ = f.Wait()
		}
		closeQuietly(nil, c.local, s.log)
	}()
}

func closeQuietly(sv servables.Servable, local *bucket.LocalModel, log *slog.Logger) {
	if sv != nil {
		if err := sv.Close(); err != nil {
			log.Warn("closing model", "err", err)
		}
	}
	if local != nil {
		if err := local.Remove(); err != nil {
			log.Warn("removing cached model files", "dir", local.Dir, "err", err)
		}
	}
}

// publishRoutes publishes the routing table: every entry with active content.
func (s *supervisorActor) publishRoutes() {
	t := make(table, len(s.entries))
	for path, e := range s.entries {
		if e.active != nil {
			t[path] = e.active
		}
	}
	s.sys.routes.Store(&t)
}

// publishStatus publishes a status snapshot for the API.
func (s *supervisorActor) publishStatus() {
	st := &Status{Config: s.cfgStat}
	st.Config.Source = s.sys.opts.Bucket.String() + "/" + s.sys.opts.ModelConfigPath
	st.Config.PollInterval = s.sys.opts.PollInterval.String()
	seen := make(map[string]bool, len(s.entries))
	add := func(path string, e *entry) {
		m := ModelStatus{Path: path, Registered: e.source != nil, ConfiguredChecksum: e.meta.Checksum, LastError: e.lastErr, LastErrorAt: timePtr(e.errAt), Updating: e.job != 0 && e.active != nil}
		switch {
		case e.removed:
			m.State, m.evictAt = StateEvicting, e.evictAt
		case e.expired && e.active != nil:
			m.State, m.evictAt = StateExpiring, e.expireAt
		case e.expired:
			m.State = StateExpired
		case e.active != nil:
			m.State = StateReady
		case e.job != 0 && e.lastErr == "":
			m.State = StateLoading
		default:
			m.State = StateFailed
		}
		if c := e.active; c != nil {
			m.active, m.Checksum, m.Runtime, m.LoadedAt, m.SizeBytes = c, c.checksum, c.runtime, timePtr(c.loadedAt), c.local.Size
			m.Replicas = len(c.pids)
		}
		for _, r := range s.retiring {
			if r.c.path == path {
				m.Retiring++
			}
		}
		st.Models = append(st.Models, m)
	}
	for _, path := range s.order {
		if e := s.entries[path]; e != nil && !seen[path] {
			seen[path] = true
			add(path, e)
		}
	}
	for path, e := range s.entries {
		if !seen[path] {
			add(path, e)
		}
	}
	pending := false
	for _, e := range s.entries {
		pending = pending || e.job != 0
	}
	if s.applied && !pending {
		s.sys.firstReconcile.Store(true)
	}
	s.sys.status.Store(st)
}

// restartAlways is the supervisor's strategy: a crashed model actor is
// restarted, however often it crashes.
func restartAlways() actor.SupervisorStrategy {
	return actor.NewOneForOneStrategy(math.MaxInt32, time.Second, func(any) actor.Directive {
		return actor.RestartDirective
	})
}
