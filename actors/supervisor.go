package actors

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"runtime/debug"
	"slices"
	"sync/atomic"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/groveml/grove/actors/lifecycle"
	"github.com/groveml/grove/conf/bucket"
	"github.com/groveml/grove/conf/modelconfig"
	"github.com/groveml/grove/internal/capped"
	"github.com/groveml/grove/servables"
)

// Messages to the supervisor. Each background job ends with exactly one
// result message; the planner decides what follows.
type (
	pollTick struct{}
	// reloadRequest asks for a config poll that starts after it; done
	// (buffered) gets nil once that poll's result is applied, or the
	// error of a panic in the poll or while its result was applied (the
	// next poll applies the config again).
	reloadRequest struct{ done chan error }
	configResult  struct {
		cfg *modelconfig.Config
		err error
		at  time.Time
		// state is the contract state read with the config, nil if it
		// could not be read (stateErr says why).
		state    *modelconfig.ContractState
		stateErr error
		// stateMark is the shared state's write mark taken before the read.
		stateMark int64
		// listings are the versioned entries' directories, by entry path.
		listings map[string]versionListing
	}
	fetchResult struct {
		path  string
		job   int64
		local *bucket.LocalModel
		err   error
	}
	loadResult struct {
		path    string
		job     int64
		runtime string
		sv      *servables.Signed
		err     error
		// rss is the growth of the process's resident memory over the
		// load (cluster.go), 0 when not measured.
		rss int64
	}
	warmResult struct {
		path string
		job  int64
		err  error
		// stuck: err is the warm-up's bound passing (warmUpTimeout); a
		// forward call of it may still run.
		stuck bool
	}
	// wakeTick is the planner's wake-up time arriving; gen tells it from
	// a timer that was replaced.
	wakeTick struct{ gen uint64 }
	// drainedContent: a retired content's last in-flight request is answered.
	drainedContent struct{ id int64 }
	// reloadFailed: a model actor restarted after a crash and could not
	// reload its servable from the cache.
	reloadFailed struct {
		path    string
		content int64
		err     error
	}
	// contractsExpired is the router's verdict: the paths every contract using them has expired.
	contractsExpired struct{ paths map[string]bool }
	// quiesce makes the supervisor take no step from now on and discard
	// what running jobs bring; done is closed once it has (System.Stop).
	quiesce struct{ done chan struct{} }
	// statusQuery asks for a fresh status snapshot (System.freshStatus);
	// done is closed once it is published.
	statusQuery struct{ done chan struct{} }
	// freedContent: the model actors of content (or job) id have all
	// terminated, or its servable was closed unspawned: its memory no
	// longer counts against the budget.
	freedContent struct{ id int64 }
)

// loadJob is what a running load has produced so far. The planner knows
// a job by its id; the supervisor keeps its artifacts.
type loadJob struct {
	path string
	meta modelconfig.Model
	// running is set while a background stage (fetch, load, warm-up) runs.
	running bool
	// discarded: drop the artifacts when the running stage ends.
	discarded bool
	local     *bucket.LocalModel
	runtime   string
	sv        *servables.Signed
	// rss is the memory the load took (loadResult.rss).
	rss int64
	// c is the content once spawn gave it the servable (warm-up), its
	// model actors spawned or not: dropping the job releases it.
	c *content
	// reason is why it loads (lifecycle.Job.Reason); started when its
	// fetch started.
	reason  string
	started time.Time
}

// supervisorActor polls the model config, feeds what happens to the
// lifecycle planner and executes the planner's steps: it fetches, loads
// and warms up model content in the background, spawns and stops the
// model actors (it is their parent, so a crashed model actor is restarted
// by restartAlways) and publishes the routing table and the status.
type supervisorActor struct {
	sys  *System
	log  *slog.Logger
	plan lifecycle.State
	// jobs are the running loads by job id; contents the loaded contents
	// (serving or retiring) by id. A content's id is its job's.
	jobs     map[int64]*loadJob
	contents map[int64]*content
	// sources are the files of registered models, by path; waiters the
	// callers waiting for a registration's outcome.
	sources map[string]bucket.Bucket
	waiters map[string][]chan error
	cfgStat ConfigStatus
	// fetching is set while a config poll runs; waitNext are reloads
	// waiting for a poll to start, waitCur those waiting for the running
	// poll's result.
	fetching          bool
	waitNext, waitCur []chan error
	wake              *time.Timer
	wakeAt            time.Time
	wakeGen           uint64
	// quiet is set by quiesce and on stopping.
	quiet bool
	// leftovers are files of contents whose model actors terminated
	// while the supervisor was quiet; they are deleted when it stops.
	leftovers []*bucket.LocalModel
	// names numbers the model actors' names; stopping are the model actors
	// stopped and not terminated yet, by process id.
	names    actorNames
	stopping map[string]*stoppingContent
	// versioned are the versioned entries of the config in force, in
	// config order, with the versions last found under each.
	versioned []versionsKnown
	// configured are the models of the config in force, versions
	// expanded, before the share filter; share is this node's share of a
	// cluster's models by entry path (nil: every model, a single server).
	configured []modelconfig.Model
	share      map[string]bool
	// slots are the on-demand paths' demand slots (demand.go), by path;
	// those with no content serving are published in System.demand.
	slots map[string]*demandSlot
	// keep holds the contents unloaded while their paths are still
	// listed, whose files go to the disk cache (keepFiles).
	keep map[int64]bool
	// demandScratch is publishDemand's list of the demandable paths'
	// slots, reused from one event to the next.
	demandScratch []*demandSlot
	// routesScratch is publishRoutes' table, reused from one event to
	// the next; a copy of it is published when it differs from the
	// table out.
	routesScratch table
	// opened are the demand and routing tables openDemand last went over.
	opened struct {
		demand *demandTable
		routes *table
	}
	// self is the supervisor's process id.
	self *actor.PID
	// failed are the answers to requests whose on-demand load failed,
	// given once the status shows the failure (execute).
	failed []func()
	// runtimeStart is the memory growth of each runtime's first load in
	// this process (by runtime name): mostly the runtime's own start-up,
	// part of the process's base rather than of that model.
	runtimeStart map[string]int64
	// holding is set while a demand slot answers a held load's error (holdDemand).
	holding bool
}

func newSupervisor(s *System) *supervisorActor {
	var share map[string]bool
	if s.opts.ClusterNode {
		share = map[string]bool{} // none until SetShare gives it
	}
	sup := &supervisorActor{share: share, sys: s, log: s.log.With("component", "supervisor"),
		plan: lifecycle.State{KeepPreviousFor: s.opts.KeepPreviousFor, LoadPolicy: s.opts.LoadPolicy, MemoryFactor: s.opts.MemoryFactor},
		jobs: map[int64]*loadJob{}, contents: map[int64]*content{}, stopping: map[string]*stoppingContent{}, sources: map[string]bucket.Bucket{}, waiters: map[string][]chan error{},
		slots: map[string]*demandSlot{}, runtimeStart: map[string]int64{}, keep: map[int64]bool{}}
	if !s.opts.ClusterNode {
		// In a cluster, the controller places by them instead.
		sup.plan.Budget, sup.plan.IdleUnloadAfter = s.opts.MemoryBudget, s.opts.IdleUnloadAfter
	}
	sup.plan.LastUsed = func(id int64) time.Time {
		if c := sup.contents[id]; c != nil {
			if ns := c.lastUsed.Load(); ns != 0 {
				return time.Unix(0, ns)
			}
		}
		return time.Time{}
	}
	return sup
}

// Receive handles one message; every state change ends with a new plan.
// A panic while it does costs that message alone (panics.go): it is
// recovered here, and panicked answers the message's caller.
func (s *supervisorActor) Receive(ctx actor.Context) {
	msg := ctx.Message()
	defer func() {
		if v := recover(); v != nil {
			s.panicked(msg, recoverPanic(s.log, s.sys.metrics, "supervisor", messageType(msg), v))
		}
	}()
	switch m := msg.(type) {
	case *actor.Started:
		s.self = ctx.Self()
		s.start(ctx)
	case *actor.Stopping:
		s.quiet = true
		s.stopWake()
	case *actor.Stopped:
		s.stopped()
	case *actor.Terminated:
		s.terminated(m.Who)
	case pollTick:
		s.poll(ctx)
	case reloadRequest:
		s.waitNext = append(s.waitNext, m.done)
		s.poll(ctx)
	case configResult:
		s.fetching = false
		s.applyConfig(ctx, m)
		s.pollDone(m.panicked())
		if len(s.waitNext) > 0 {
			s.poll(ctx)
		}
	case registerRequest:
		s.register(ctx, m)
	case unregisterRequest:
		s.unregister(ctx, m)
	case fetchResult:
		var sum string
		var size int64
		if m.local != nil {
			sum, size = m.local.Checksum, m.local.Size
		}
		s.stageEnded(ctx, m.job, loadJob{local: m.local}, lifecycle.Fetched{Path: m.path, Job: m.job, Checksum: sum, Size: size, Err: m.err})
	case loadResult:
		s.stageEnded(ctx, m.job, loadJob{runtime: m.runtime, sv: m.sv, rss: m.rss}, lifecycle.Loaded{Path: m.path, Job: m.job, Bytes: s.modelBytes(m), Err: m.err})
	case warmResult:
		s.stageEnded(ctx, m.job, loadJob{}, lifecycle.Warmed{Path: m.path, Job: m.job, Err: m.err, Stuck: m.stuck})
	case wakeTick:
		if m.gen == s.wakeGen {
			s.wakeAt = time.Time{}
			s.apply(ctx, nil)
		}
	case drainedContent:
		s.apply(ctx, nil)
	case reloadFailed:
		s.apply(ctx, lifecycle.ReloadFailed{Path: m.path, Content: m.content, Err: m.err})
	case contractsExpired:
		s.apply(ctx, lifecycle.ContractsExpired{Paths: m.paths})
	case demandLoad:
		s.apply(ctx, lifecycle.Demand{Path: m.path})
	case freedContent:
		s.logStuckReturned(m.id)
		s.apply(ctx, lifecycle.Freed{Content: m.id})
	case setShare:
		s.setShare(ctx, m)
	case statusQuery:
		defer close(m.done) // whatever happens: its caller waits for it
		s.refreshStatus()
	case quiesce:
		defer close(m.done) // whatever happens: Stop waits for it
		s.quiet = true
		s.stopWake()
		for id, j := range s.jobs {
			j.discarded = true
			if !j.running {
				s.drop(ctx, id, j)
			}
		}
	}
}

// panicked is the error of a poll that panicked (readConfig), nil for
// any other result, a config that could not be read included: the
// reloads waiting for the poll get it (pollDone).
func (r configResult) panicked() error {
	if errors.Is(r.err, errInternal) {
		return r.err
	}
	return nil
}

// pollDone answers the reloads waiting for the config poll whose result
// was just applied: err is nil, or the panic that cut the poll or its
// application short.
func (s *supervisorActor) pollDone(err error) {
	for _, done := range s.waitCur {
		done <- err
	}
	s.waitCur = nil
}

// panicked answers the caller of msg, whose handling panicked with err
// (Receive), and makes good what the handler may have left undone that
// nothing else would: a caller waits for no answer that will not come,
// no request waits for a load nobody started, and the planner waits for
// no message that came once and was lost (a stage's result: its job ends
// failed; a content's end: it is forgotten). What else the handler
// left undone, the next event does: each applies the planner's plan
// again, publishing the routing and demand tables and the status anew,
// and a config poll (every poll interval) applies the whole config again.
// A step of a plan that panics is recovered apart (take).
func (s *supervisorActor) panicked(msg any, err error) {
	switch m := msg.(type) {
	case configResult:
		s.cfgStat.LastError, s.cfgStat.LastErrorAt = s.sys.paths.Error(fmt.Errorf("applying model config %s: %w", s.sys.opts.ModelConfigPath, err)).Error(), timePtr(m.at)
		s.pollDone(err)
	case registerRequest:
		if slices.Contains(s.waiters[m.path], m.waiting) {
			return // the planner has it: its outcome answers (register)
		}
		select {
		case m.waiting <- fmt.Errorf("registering model %s: %w", m.path, err):
		default: // answered already
		}
	case unregisterRequest:
		select {
		case m.reply <- fmt.Errorf("deleting model %s: %w", m.path, err):
		default:
		}
	case demandLoad:
		// Unless the planner started the load, the requests parked on the
		// path would wait for it until their deadline, and later ones
		// would not ask again (demandSlot.asked): they are answered now,
		// and the next one asks anew.
		if p := s.plan.Path(m.path); p == nil || p.Job == nil {
			if d := s.slots[m.path]; d != nil {
				e := fmt.Errorf("model %s could not be loaded: %w", m.path, err)
				s.sys.ways.resume(s.sys.as.Root.Send, d.fail(e, time.Time{}), e) // sends nothing: answers with e
			}
		}
	case fetchResult:
		if s.resultLost(m.path, m.job, lifecycle.Fetching, m.err) {
			s.sys.as.Root.Send(s.self, fetchResult{path: m.path, job: m.job, local: m.local, err: s.lostResult(m.path, m.err, err)})
		}
	case loadResult:
		if s.resultLost(m.path, m.job, lifecycle.LoadingFiles, m.err) {
			s.sys.as.Root.Send(s.self, loadResult{path: m.path, job: m.job, runtime: m.runtime, sv: m.sv, rss: m.rss, err: s.lostResult(m.path, m.err, err)})
		}
	case warmResult:
		if s.resultLost(m.path, m.job, lifecycle.WarmingUp, m.err) {
			s.sys.as.Root.Send(s.self, warmResult{path: m.path, job: m.job, stuck: m.stuck, err: s.lostResult(m.path, m.err, err)})
		}
	case freedContent:
		// Sent once: lost, the planner would count the content's memory,
		// and hold back the loads of a stuck warm-up's content, for good.
		// Freed only forgets it; the next event plans with that.
		_ = s.plan.Apply(lifecycle.Freed{Content: m.id}, time.Now())
	}
}

// resultLost reports whether the planner still waits for the result of
// job's stage (at stage) whose handling panicked: it never heard it, and
// no other will come. A result that is already a panic's (stepPanicked,
// or one sent again here) is not sent again: that would loop.
func (s *supervisorActor) resultLost(path string, job int64, stage lifecycle.Stage, result error) bool {
	if errors.Is(result, errInternal) {
		return false
	}
	p := s.plan.Path(path)
	return p != nil && p.Job != nil && p.Job.ID == job && p.Job.Stage == stage
}

// lostResult is the error of the result of a stage of path's job sent
// again after its handling panicked with err: the stage's own failure,
// if it failed, else err. Either way the job ends failed, with what the
// stage made freed, and the model is retried as after any failed stage.
func (s *supervisorActor) lostResult(path string, result, err error) error {
	if result != nil {
		return fmt.Errorf("%w; then %w", result, err)
	}
	return s.sys.paths.Error(fmt.Errorf("loading model %s: %w", path, err))
}

// start begins polling: the first poll at once, then every poll interval.
func (s *supervisorActor) start(ctx actor.Context) {
	self, root := ctx.Self(), ctx.ActorSystem().Root
	s.sys.background(func(bctx context.Context) {
		poll := time.NewTicker(s.sys.opts.PollInterval)
		defer poll.Stop()
		root.Send(self, pollTick{})
		for {
			select {
			case <-bctx.Done():
				return
			case <-poll.C:
				root.Send(self, pollTick{})
			}
		}
	})
}

// stageEnded takes what a background stage of job id produced (its cached
// files, or its runtime and servable, in got) and tells the planner ev; a
// job that is gone or discarded frees it instead.
func (s *supervisorActor) stageEnded(ctx actor.Context, id int64, got loadJob, ev lifecycle.Event) {
	j := s.jobs[id]
	if j == nil {
		s.closeQuietly(got.sv, got.local)
		return
	}
	j.running = false
	if got.local != nil {
		j.local = got.local
	}
	if got.sv != nil {
		j.runtime, j.sv, j.rss = got.runtime, got.sv, got.rss
	}
	if j.discarded || s.quiet {
		s.drop(ctx, id, j)
		if w, ok := ev.(lifecycle.Warmed); ok && w.Stuck && !s.quiet {
			// Its content stays until the call returns: the budget counts it.
			s.apply(ctx, ev)
		}
		return
	}
	s.apply(ctx, ev)
}

// apply records ev (nil: none, just plan again) and executes the plan.
func (s *supervisorActor) apply(ctx actor.Context, ev lifecycle.Event) error {
	now := time.Now()
	var err error
	if ev != nil {
		err = s.plan.Apply(ev, now)
	}
	if !s.quiet {
		s.execute(ctx, now)
	}
	return err
}

// execute takes the planner's steps until it has nothing more to do now,
// publishes the routing table if it changed, marks the status for a new
// snapshot at its next read, and sets the wake-up timer.
func (s *supervisorActor) execute(ctx actor.Context, now time.Time) {
	inflight := func(id int64) int64 {
		if c := s.contents[id]; c != nil {
			return c.inflight.Load()
		}
		return 0
	}
	// A status read from now on waits for this event's end: a caller
	// answered by a step below (a parked request taken to its model) sees
	// the status after it.
	s.sys.statusStale.Store(true)
	// Callers waiting on a registration hear its outcome after the status
	// shows it; those and the requests whose on-demand load failed hear
	// it even if a panic cuts this short.
	var notify []lifecycle.Step
	defer func() { s.answerHeld(notify) }()
	for {
		p := s.plan.Plan(now, inflight)
		var retired []*content
		for _, st := range p.Steps {
			if st.Kind == lifecycle.Notify {
				notify = append(notify, st)
			} else if c := s.take(ctx, st, now); c != nil {
				retired = append(retired, c)
			}
		}
		// Published without the retired contents before they are marked
		// retired, so that a request never finds a retired content in the
		// table it reads. Swaps and retirements change the table, and so
		// do phase changes alone: a version leaving its policy no longer
		// serves its entry's path. The demand slots of the paths losing
		// their content take requests before the table goes out; those of
		// the paths gaining one leave the demand table, and take their
		// requests to it, only after.
		s.publishDemand(now, true)
		s.publishRoutes()
		s.publishDemand(now, false)
		s.openDemand(ctx)
		for _, c := range retired {
			c.retired.Store(true)
			s.log.Debug("model content retired", "model", c.path, "checksum", c.checksum)
		}
		if !p.Retires() {
			s.setWake(ctx, p.Wake, now)
			break
		}
	}
	s.holdDemand(ctx)
	s.applyTimeouts()
	s.settle()
}

// answerHeld gives the answers execute held until the status showed what
// they answer: the requests whose on-demand load failed (s.failed), and
// the registrations of notify.
func (s *supervisorActor) answerHeld(notify []lifecycle.Step) {
	failed := s.failed
	s.failed = nil
	for _, f := range failed {
		f()
	}
	for _, st := range notify {
		for _, w := range s.waiters[st.Path] {
			w <- registrationError(st.Path, st.Err)
		}
		delete(s.waiters, st.Path)
	}
}

// take executes the planner's step st (other than Notify, which execute
// keeps) and returns the content a Retire takes out of service. A panic
// in it is recovered here, and costs that step alone: the plan's other
// steps are taken (stepPanicked).
func (s *supervisorActor) take(ctx actor.Context, st lifecycle.Step, now time.Time) (retired *content) {
	defer func() {
		if v := recover(); v != nil {
			s.stepPanicked(ctx, st, recoverPanic(s.log, s.sys.metrics, "supervisor", fmt.Sprintf("%s step of model %s", st.Kind, st.Path), v))
		}
	}()
	switch st.Kind {
	case lifecycle.Fetch:
		s.fetch(ctx, st)
	case lifecycle.Load:
		s.load(ctx, st)
	case lifecycle.WarmUp:
		s.warmUp(ctx, st)
	case lifecycle.Swap:
		s.swap(st, now)
	case lifecycle.Restore:
		s.restore(st)
	case lifecycle.Retire:
		retired = s.contents[st.Content]
		switch st.Reason {
		case lifecycle.ReasonBudget:
			s.keepFiles(st.Path, st.Content)
			s.sys.metrics.unloads.WithLabelValues(st.Path, st.Reason).Inc()
			s.log.Info("model unloaded to make room under the memory budget", "model", st.Path, "budget_bytes", s.plan.Budget, "used_bytes", s.plan.Used())
		case lifecycle.ReasonIdle:
			s.keepFiles(st.Path, st.Content)
			s.sys.metrics.unloads.WithLabelValues(st.Path, st.Reason).Inc()
			s.log.Info("model unloaded after taking no request for idle_unload_after", "model", st.Path, "idle_unload_after", s.plan.IdleUnloadAfter)
		}
	case lifecycle.Release:
		if c := s.contents[st.Content]; c != nil {
			delete(s.contents, st.Content)
			s.release(ctx, c)
		}
	case lifecycle.Discard:
		s.discard(ctx, st)
	case lifecycle.Forget:
		delete(s.sources, st.Path)
		s.log.Info("model forgotten", "model", st.Path)
	}
	return retired
}

// stepPanicked makes good what step st left undone when it panicked with
// err, where the planner would not converge otherwise. A job's stage
// step (fetch, load, warm-up) starts its background stage last, so that
// stage did not start and would never end: the job ends here, failed
// with err, as a stage that fails does (the model is retried at the next
// poll, or, on demand, at a request after its backoff, and the requests
// waiting for its load get the error). A swap that did not put its
// content in the supervisor's hands has the planner load the path afresh,
// as after a model actor that could not reload. The other steps leave at
// worst a content or files unfreed until the server stops.
func (s *supervisorActor) stepPanicked(ctx actor.Context, st lifecycle.Step, err error) {
	self := ctx.Self()
	switch st.Kind {
	case lifecycle.Fetch, lifecycle.Load, lifecycle.WarmUp:
		j := s.jobs[st.Job]
		if j == nil {
			j = &loadJob{path: st.Path, meta: st.Meta, reason: st.Reason, started: time.Now()}
			s.jobs[st.Job] = j
		}
		j.running = true // until the result sent below
		err = s.sys.paths.Error(fmt.Errorf("loading model %s: %w", st.Path, err))
		switch st.Kind {
		case lifecycle.Fetch:
			ctx.Send(self, fetchResult{path: st.Path, job: st.Job, err: err})
		case lifecycle.Load:
			ctx.Send(self, loadResult{path: st.Path, job: st.Job, err: err})
		default:
			ctx.Send(self, warmResult{path: st.Path, job: st.Job, err: err})
		}
	case lifecycle.Swap:
		if s.contents[st.Job] == nil {
			ctx.Send(self, reloadFailed{path: st.Path, content: st.Job, err: err})
		}
	}
}

// applyTimeouts gives each serving content the deadline settings its
// config entry asks for now: they change in place, without a reload.
func (s *supervisorActor) applyTimeouts() {
	for _, p := range s.plan.Paths() {
		if p.Active != nil {
			if c := s.contents[p.Active.ID]; c != nil {
				c.setTimeouts(p.Desired.DefaultTimeout, p.Desired.QueueTimeout)
			}
		}
	}
}

// setWake makes a wakeTick arrive at t (zero: never).
func (s *supervisorActor) setWake(ctx actor.Context, t, now time.Time) {
	if t.Equal(s.wakeAt) {
		return
	}
	s.stopWake()
	if t.IsZero() {
		return
	}
	s.wakeAt = t
	gen, self, root := s.wakeGen, ctx.Self(), ctx.ActorSystem().Root
	s.wake = time.AfterFunc(t.Sub(now), func() { root.Send(self, wakeTick{gen: gen}) })
}

func (s *supervisorActor) stopWake() {
	if s.wake != nil {
		s.wake.Stop()
		s.wake = nil
	}
	s.wakeAt = time.Time{}
	s.wakeGen++
}

// fetch copies a job's files into the cache and checksums them, in the background.
func (s *supervisorActor) fetch(ctx actor.Context, st lifecycle.Step) {
	src := s.sys.opts.Bucket
	if st.Registered {
		src = s.sources[st.Path]
	}
	s.jobs[st.Job] = &loadJob{path: st.Path, meta: st.Meta, running: true, reason: st.Reason, started: time.Now()}
	if d := s.slots[st.Path]; d != nil && st.Reason == lifecycle.ReasonDemand {
		d.loading(time.Now())
	}
	var cached *bucket.LocalModel
	started := false
	defer func() {
		if cached != nil && !started {
			// Out of the disk cache, and the stage that would take them
			// did not start: this step panicked (stepPanicked).
			s.closeQuietly(nil, cached)
		}
	}()
	if d := s.sys.disk; d != nil && !st.Registered && st.Meta.Checksum != "" {
		if cached = d.take(st.Meta.Path, st.Meta.Checksum); cached != nil {
			s.sys.metrics.diskCacheBytes.Set(float64(d.used))
		}
	}
	from := src.String()
	if cached != nil {
		from = "disk cache " + cached.Dir
	}
	s.log.Info("loading model", "model", st.Path, "checksum", st.Meta.Checksum, "from", from, "job", st.Job)
	self, root := ctx.Self(), ctx.ActorSystem().Root
	started = true
	s.sys.background(func(bctx context.Context) {
		r := fetchResult{path: st.Path, job: st.Job}
		r.local, r.err = s.fetchFiles(bctx, st, src, cached)
		root.Send(self, r)
	})
}

// fetchFiles gives the files of st's model in the cache: cached (taken
// from the disk cache, nil if none) if they still have their checksum,
// else those it fetches from src; on an error it leaves none. A panic in
// it (a bug in the bucket client or in Grove) fails this fetch alone
// (recoverJob): cached is deleted, and bucket.Fetch deletes what it had
// written.
func (s *supervisorActor) fetchFiles(ctx context.Context, st lifecycle.Step, src bucket.Bucket, cached *bucket.LocalModel) (local *bucket.LocalModel, err error) {
	// drop deletes cached, once.
	drop := func() {
		gone := cached
		cached = nil
		s.closeQuietly(nil, gone)
	}
	defer func() {
		if v := recover(); v != nil {
			_, removeErr := s.closeModel(nil, cached) // first: the log may panic again
			local, err = nil, s.sys.paths.Error(fmt.Errorf("loading model %s: %w", st.Path, recoverJob(s.log, s.sys.metrics, "fetch", "fetch of model "+st.Path, v)))
			logClose(s.log, cached, nil, removeErr)
		}
	}()
	if cached != nil {
		// Kept when it was unloaded (diskCache): its files are used
		// again if they still have their checksum.
		err := cached.Verify(ctx)
		if ctx.Err() != nil { // stopping: not a change on disk
			drop()
			return nil, ctx.Err()
		}
		if err == nil {
			s.sys.metrics.diskCacheHits.Inc()
			return cached, nil
		}
		s.sys.metrics.diskCacheInvalid.Inc()
		s.log.Warn("cached model files changed on disk; fetching them again", "model", st.Path, "err", err)
		drop()
	}
	var opts []bucket.FetchOption
	if st.Meta.VersionOf != "" {
		opts = append(opts, bucket.WithChecksumFile()) // a version may declare its checksum
	}
	o := s.sys.opts
	if local, err = bucket.Fetch(ctx, src, st.Meta.Path, o.CacheDir, o.MaxModelBytes, opts...); err != nil {
		return nil, s.sys.paths.Error(fmt.Errorf("loading model %s: %w", st.Path, err))
	}
	return local, nil
}

// load loads a fetched job's files with their runtime, in the background.
func (s *supervisorActor) load(ctx actor.Context, st lifecycle.Step) {
	j := s.jobs[st.Job]
	j.running = true
	if st.OverBudget {
		s.log.Warn("loading a model over the memory budget: not even unloading every idle on-demand model makes room for it", "model", st.Path,
			"budget_bytes", s.plan.Budget, "used_bytes", s.plan.Used())
	}
	local, opts := j.local, s.sys.loadOptions(st.Meta)
	self, root := ctx.Self(), ctx.ActorSystem().Root
	s.sys.background(func(bctx context.Context) { root.Send(self, s.loadFiles(bctx, st, local, opts)) })
}

// loadFiles loads local, st's fetched files, with their runtime
// (System.load) and measures the memory the load took. It runs on the
// load's goroutine. A panic in it outside the runtime's own load (which
// System.load recovers), in Grove's code around it (the declared
// signature, the memory measure), fails this load alone (recoverJob):
// the servable it loaded is closed, no memory counts for it, and the
// model is retried as after any failed load.
func (s *supervisorActor) loadFiles(ctx context.Context, st lifecycle.Step, local *bucket.LocalModel, opts servables.LoadOptions) (r loadResult) {
	r = loadResult{path: st.Path, job: st.Job}
	lt := s.sys.loads.start()
	measured := false
	defer func() {
		if !measured {
			s.sys.loads.done(lt) // else every later load would seem to overlap one
		}
		if v := recover(); v != nil {
			closeErr, _ := s.closeModel(r.sv, nil) // first: the log may panic again
			err := recoverJob(s.log, s.sys.metrics, "load", "load of model "+st.Path, v)
			r = loadResult{path: st.Path, job: st.Job, err: s.sys.paths.Error(fmt.Errorf("loading model %s: %w", st.Path, err))}
			logClose(s.log, nil, closeErr, nil)
		}
	}()
	before := s.sys.opts.residentBytes()
	r.runtime, r.sv, r.err = s.sys.load(ctx, local, opts, st.Meta.Signature)
	after := s.sys.opts.residentBytes()
	// Only a load that ran alone measures its own memory; one that
	// overlapped another is left unmeasured (placement then takes the
	// file size times the memory factor) rather than counted twice.
	measured = true
	if alone := s.sys.loads.done(lt); before > 0 && r.err == nil && alone {
		r.rss = max(after-before, 0)
	}
	if r.err != nil {
		r.err = s.sys.modelPaths(local).Error(fmt.Errorf("loading model %s: %w", st.Path, r.err))
	}
	return r
}

// modelBytes is the memory load r measured for its model: none (the
// planner counts its estimate) when it was its runtime's first load in
// this process, whose growth is mostly the runtime's start-up (its code,
// its environment, its thread pools): part of the base, which stays
// after the model is unloaded. That growth is kept in runtimeStart.
func (s *supervisorActor) modelBytes(r loadResult) int64 {
	if r.err != nil || r.runtime == "" {
		return r.rss
	}
	if _, ok := s.runtimeStart[r.runtime]; ok {
		return r.rss
	}
	s.runtimeStart[r.runtime] = r.rss
	s.log.Info("first load of a runtime: its memory growth counts as the runtime's start-up, not the model's", "runtime", r.runtime, "model", r.path, "bytes", r.rss)
	return 0
}

// warmUp spawns a loaded job's model actors and runs its warm-up
// requests through them, in the background.
func (s *supervisorActor) warmUp(ctx actor.Context, st lifecycle.Step) {
	j := s.jobs[st.Job]
	j.running = true
	self, root := ctx.Self(), ctx.ActorSystem().Root
	c, err := s.spawn(ctx, st.Job, j)
	if err != nil {
		ctx.Send(self, warmResult{path: st.Path, job: st.Job, err: s.sys.modelPaths(j.local).Error(fmt.Errorf("warming up model %s: %w", st.Path, err))})
		return
	}
	s.sys.background(func(bctx context.Context) { root.Send(self, s.warmUpContent(bctx, st, c)) })
}

// warmUpContent runs the warm-up of c, st's content (System.warmUp), on
// the warm-up's goroutine, and gives its result. A panic in it (a bug in
// Grove's code, in the warm-up's or in what makes its result) fails this
// load alone (recoverJob): the failed job releases its content, as after
// any failed warm-up.
func (s *supervisorActor) warmUpContent(ctx context.Context, st lifecycle.Step, c *content) (r warmResult) {
	r = warmResult{path: st.Path, job: st.Job}
	defer func() {
		if v := recover(); v != nil {
			err := recoverJob(s.log, s.sys.metrics, "warm_up", "warm-up of model "+st.Path, v)
			r.err = s.sys.paths.Error(fmt.Errorf("warming up model %s: %w", st.Path, err)) // r.stuck stays: a forward call may still run
		}
	}()
	err := s.sys.warmUp(ctx, c, st.Meta)
	_, r.stuck = errors.AsType[*warmUpTimeout](err)
	if err != nil {
		r.err = s.sys.modelPaths(c.local).Error(fmt.Errorf("warming up model %s: %w", st.Path, err))
	}
	return r
}

// logStuckReturned logs the end of a stuck warm-up (lifecycle.StuckWarmUp)
// when content id, its job's, is freed: the forward call returned.
func (s *supervisorActor) logStuckReturned(id int64) {
	for _, st := range s.plan.StuckWarmUps() {
		if st.Job == id {
			s.log.Info("the forward call of a timed-out warm-up returned; its content is closed, and the model may load it again",
				"model", st.Path, "checksum", st.Checksum, "stuck_for", time.Since(st.Since))
		}
	}
}

// spawn starts the model actors (replicas) of a loaded job; they share
// its servable. The job's content (j.c) takes the servable before the
// first actor is spawned: whatever stops spawn then, an error or a panic,
// leaves nothing half-spawned that dropping the job does not free. The
// shares of the replicas not spawned are closed here; the replicas
// spawned close theirs as they stop (drop releases the content), the
// last one closing the servable.
func (s *supervisorActor) spawn(ctx actor.Context, id int64, j *loadJob) (*content, error) {
	c := &content{id: id, path: j.path, checksum: j.local.Checksum, runtime: j.runtime, local: j.local, signed: j.sv, rss: j.rss,
		onDemand: j.reason == lifecycle.ReasonDemand || s.onDemand(j.path)}
	c.meta.Store(new(j.sv.Metadata()))
	self, root := ctx.Self(), ctx.ActorSystem().Root
	c.drained = func(id int64) { root.Send(self, drainedContent{id: id}) }
	local, loadOpts, declared := j.local, s.sys.loadOptions(j.meta), j.meta.Signature
	// A restarted model actor reloads its servable so; whatever stops it
	// once System.load returned one, a panic (modelActor.reload recovers
	// it), closes that servable.
	reload := func(ctx context.Context) (servables.Servable, error) {
		_, sv, err := s.sys.load(ctx, local, loadOpts, declared)
		if err != nil {
			return nil, s.sys.modelPaths(local).Error(err)
		}
		returned := false
		defer func() {
			if !returned {
				_ = sv.Close()
			}
		}()
		sv.SetMetadata(c.metadata()) // what the warm-up taught
		returned = true
		return sv, nil
	}
	opts := j.meta.Serving
	bo := batchOptions{maxRows: s.sys.opts.MaxBatchRows, delay: opts.MaxQueueDelay}
	if opts.MaxBatchRows > 0 {
		bo.maxRows = opts.MaxBatchRows
	}
	replicas := max(opts.Replicas, 1)
	c.serving = ModelServing{Replicas: replicas, MaxBatchRows: max(bo.maxRows, 1)}
	if bo.maxRows > 1 {
		c.serving.MaxQueueDelay = bo.delay
	}
	c.busy = make([]atomic.Int64, replicas)
	c.name = s.names.take()
	shared := share(j.sv, replicas)
	j.c, j.sv = c, nil // the content owns the servable now: dropping the job releases it
	defer func() {
		for range replicas - len(c.pids) {
			_ = shared.Close()
		}
	}()
	for i := range replicas {
		var mb *modelMailbox
		pid, err := ctx.SpawnNamed(modelProps(c, shared, reload, s.log, s.sys.metrics, bo, s.sys.low, s.sys.lowered, s.sys.dispatcher, &mb), fmt.Sprintf("model-%d-%d", c.name, i))
		if err != nil {
			return nil, fmt.Errorf("spawning model actor: %w", err)
		}
		c.pids, c.mailboxes = append(c.pids, pid), append(c.mailboxes, mb)
		s.log.Debug("model actor spawned", "model", c.path, "checksum", c.checksum, "replica", i, "actor", pid.Id)
	}
	return c, nil
}

// swap puts a warmed-up job's content into service.
func (s *supervisorActor) swap(st lifecycle.Step, now time.Time) {
	j := s.jobs[st.Job]
	delete(s.jobs, st.Job)
	c := j.c
	c.loadedAt = now
	s.contents[st.Job] = c // first: what follows may fail (stepPanicked)
	if p := s.plan.Path(st.Path); p != nil {
		// Before the table that routes to it is published.
		c.setTimeouts(p.Desired.DefaultTimeout, p.Desired.QueueTimeout)
	}
	s.sys.metrics.loads.WithLabelValues(st.Path, "ok", j.reason).Inc()
	if j.reason == lifecycle.ReasonDemand {
		s.sys.metrics.coldStart.Observe(now.Sub(j.started).Seconds())
	}
	if old := (*s.sys.routes.Load())[st.Path]; old != nil {
		s.log.Info("model updated in place", "model", st.Path, "old_checksum", old.checksum, "checksum", c.checksum)
		return
	}
	s.log.Info("model ready", "model", st.Path, "checksum", c.checksum, "runtime", c.runtime, "replicas", len(c.pids))
}

// restore puts a kept content back into service: it takes requests again
// before the table that routes to it is published.
func (s *supervisorActor) restore(st lifecycle.Step) {
	c := s.contents[st.Content]
	if c == nil {
		return
	}
	c.retired.Store(false) // first: what follows may fail (stepPanicked)
	if p := s.plan.Path(st.Path); p != nil {
		c.setTimeouts(p.Desired.DefaultTimeout, p.Desired.QueueTimeout)
	}
	s.sys.metrics.restores.WithLabelValues(st.Path).Inc()
	from := ""
	if old := (*s.sys.routes.Load())[st.Path]; old != nil {
		from = old.checksum
	}
	s.log.Info("model rolled back to its kept content, with no reload", "model", st.Path, "checksum", c.checksum, "from_checksum", from)
}

// discard drops a job that will not serve, now or when its running
// stage ends, and reports a failed one. What it changes comes first, the
// report last: a panic in the report (stepPanicked) costs the report only.
func (s *supervisorActor) discard(ctx actor.Context, st lifecycle.Step) {
	j := s.jobs[st.Job]
	reason := lifecycle.ReasonEager
	if j != nil {
		reason = j.reason
	}
	switch {
	case j == nil:
	case j.running:
		j.discarded = true // dropped when its stage ends
	default:
		s.drop(ctx, st.Job, j)
	}
	if st.Err == nil {
		return
	}
	p := s.plan.Path(st.Path)
	onDemand := p != nil && p.Active == nil && s.plan.OnDemand(p)
	if onDemand {
		s.failDemand(ctx, p, st.Err)
	}
	s.sys.metrics.loads.WithLabelValues(st.Path, "failed", reason).Inc()
	switch {
	case p != nil && p.Active != nil:
		s.log.Error("model update failed; the previous content keeps serving", "model", st.Path, "serving_checksum", p.Active.Checksum, "err", st.Err)
	case onDemand:
		s.log.Error("on-demand model load failed; the next request after the backoff retries it", "model", st.Path, "retry_at", p.RetryAt, "err", st.Err)
	default:
		s.log.Error("model load failed; retrying on the next poll", "model", st.Path, "err", st.Err)
	}
}

// drop frees what job id produced: its model actors (which close the
// servable), or the servable, and its cached files. What fails is logged
// last: a panic in the log (a bug) costs the log only, not the memory's
// release (freedContent), and one in the servable's Close the close only
// (closeModel).
func (s *supervisorActor) drop(ctx actor.Context, id int64, j *loadJob) {
	delete(s.jobs, id)
	switch {
	case j.c != nil:
		s.release(ctx, j.c)
	default:
		closeErr, removeErr := s.closeModel(j.sv, j.local)
		ctx.Send(ctx.Self(), freedContent{id: id})
		logClose(s.log, j.local, closeErr, removeErr)
	}
}

// release stops c's model actors (which close the servable); its cached
// files are deleted once they have all terminated.
func (s *supervisorActor) release(ctx actor.Context, c *content) {
	s.stopActors(ctx, c, c.local)
	s.log.Debug("releasing model content", "model", c.path, "checksum", c.checksum) // last: a panic in it costs it alone
}

// stoppingContent is a content whose model actors were stopped: how many
// have not terminated yet, and the cached files to delete once none is
// left (nil: none).
type stoppingContent struct {
	id    int64
	name  int
	left  int
	local *bucket.LocalModel
	// keep: local goes to the disk cache, not away (keepFiles).
	keep bool
}

// stopActors stops c's model actors; once they have all terminated, its
// name's number is free again and local (if not nil) is deleted. A
// stopped actor's Terminated comes to its parent, the supervisor, so no
// future is needed (each would take a process id of its own).
func (s *supervisorActor) stopActors(ctx actor.Context, c *content, local *bucket.LocalModel) {
	st := &stoppingContent{id: c.id, name: c.name, left: len(c.pids), local: local, keep: s.keep[c.id]}
	delete(s.keep, c.id)
	if st.left == 0 {
		s.ended(st)
		return
	}
	for _, p := range c.pids {
		s.stopping[p.Id] = st
		ctx.Stop(p)
	}
}

// terminated counts the end of a stopped model actor.
func (s *supervisorActor) terminated(pid *actor.PID) {
	st := s.stopping[pid.Id]
	if st == nil {
		return
	}
	delete(s.stopping, pid.Id)
	if st.left--; st.left == 0 {
		s.ended(st)
	}
}

// ended runs once all of st's model actors have terminated: it frees
// st's name and deletes its files (in the background: removeFiles, or
// when the supervisor stops if it is quiet by then).
func (s *supervisorActor) ended(st *stoppingContent) {
	s.names.put(st.name)
	if !s.quiet {
		s.sys.as.Root.Send(s.self, freedContent{id: st.id})
	}
	switch local := st.local; {
	case local == nil:
	case s.quiet:
		s.leftovers = append(s.leftovers, local)
	case st.keep && s.sys.disk != nil:
		drop := s.sys.disk.put(local)
		s.sys.metrics.diskCacheBytes.Set(float64(s.sys.disk.used))
		if len(drop) > 0 {
			s.sys.background(func(context.Context) { s.removeFiles(drop) })
		}
	default:
		s.sys.background(func(context.Context) { s.removeFiles([]*bucket.LocalModel{local}) })
	}
}

// removeFiles deletes the cached files of locals, on a goroutine of its
// own (ended): all of them first, then it logs what failed. A panic in
// it (a bug, in a log) is recovered (recoverJob): it ends the process
// no more than it leaves files on disk.
func (s *supervisorActor) removeFiles(locals []*bucket.LocalModel) {
	defer func() {
		if v := recover(); v != nil {
			_ = recoverJob(s.log, s.sys.metrics, "release", "removal of cached model files", v)
		}
	}()
	var failed []closeFailure
	for _, l := range locals {
		if _, removeErr := s.closeModel(nil, l); removeErr != nil {
			failed = append(failed, closeFailure{local: l, removeErr: removeErr})
		}
	}
	for _, f := range failed {
		logClose(s.log, f.local, nil, f.removeErr)
	}
}

// keepFiles has the files of content id, unloaded while path is still
// listed, go to the disk cache when its model actors are gone, if path's
// entry names that content by its checksum: a load finds them by it.
func (s *supervisorActor) keepFiles(path string, id int64) {
	if s.sys.disk == nil {
		return
	}
	c, p := s.contents[id], s.plan.Path(path)
	if c != nil && p != nil && p.Desired.Checksum != "" && p.Desired.Checksum == c.checksum {
		s.keep[id] = true
	}
}

// stopped runs once the supervisor and its model actors have stopped
// (each closed its servable): it publishes the last status snapshot, and
// deletes every cached file still held, even if the snapshot panics.
func (s *supervisorActor) stopped() {
	defer close(s.sys.supervisorDone)
	defer s.freeAll()
	s.refreshStatus()
}

// freeAll deletes every cached file still held and answers the
// registrations still waiting, as the supervisor stops. It closes and
// removes everything first and logs what failed last: a panic in a log
// (a bug) leaves nothing open or on disk, nor does a servable whose Close
// panics (closeModel).
func (s *supervisorActor) freeAll() {
	var failed []closeFailure
	free := func(sv *servables.Signed, local *bucket.LocalModel) {
		if closeErr, removeErr := s.closeModel(sv, local); closeErr != nil || removeErr != nil {
			failed = append(failed, closeFailure{local: local, closeErr: closeErr, removeErr: removeErr})
		}
	}
	for id, j := range s.jobs {
		free(j.sv, j.local)
		delete(s.jobs, id)
	}
	for id, c := range s.contents {
		free(nil, c.local)
		delete(s.contents, id)
	}
	for _, l := range s.leftovers {
		free(nil, l)
	}
	if s.sys.disk != nil {
		for _, m := range s.sys.disk.all() {
			free(nil, m)
		}
	}
	s.leftovers = nil
	for path, ws := range s.waiters {
		for _, w := range ws {
			w <- fmt.Errorf("model %s: %w", path, ErrStopped)
		}
	}
	clear(s.waiters)
	for _, f := range failed {
		logClose(s.log, f.local, f.closeErr, f.removeErr)
	}
}

// closeFailure is what closeModel returned for local, to log (logClose).
type closeFailure struct {
	local               *bucket.LocalModel
	closeErr, removeErr error
}

// poll reads the model config in the background (readConfig); the
// result comes back as a configResult.
func (s *supervisorActor) poll(ctx actor.Context) {
	if s.fetching || s.quiet {
		return
	}
	s.fetching = true
	s.waitCur, s.waitNext = s.waitNext, nil
	self, root := ctx.Self(), ctx.ActorSystem().Root
	s.sys.background(func(bctx context.Context) { root.Send(self, s.readConfig(bctx)) })
}

// readConfig reads the model config, with what applying it needs: the
// versioned entries' listings and the contract state. It runs on the
// poll's goroutine. A panic in it (a bug in the bucket client or in
// Grove) fails this poll alone (recoverJob), as a config that could not
// be read: the config in force stays, and the next poll runs as usual.
func (s *supervisorActor) readConfig(ctx context.Context) (r configResult) {
	o := s.sys.opts
	defer func() {
		if v := recover(); v != nil {
			err := recoverJob(s.log, s.sys.metrics, "config_poll", "config poll", v)
			r = configResult{err: s.sys.paths.Error(fmt.Errorf("reading model config %s: %w", o.ModelConfigPath, err)), at: time.Now()}
		}
	}()
	rctx, cancel := context.WithTimeout(ctx, max(o.PollInterval, 10*time.Second))
	defer cancel()
	data, _, err := o.Bucket.ReadObject(rctx, o.ModelConfigPath, modelconfig.MaxConfigBytes)
	var cfg *modelconfig.Config
	if err != nil {
		err = fmt.Errorf("reading model config %s from %s: %w", o.ModelConfigPath, o.Bucket, err)
	} else if cfg, err = modelconfig.Parse(data); err != nil {
		err = fmt.Errorf("model config %s: %w", o.ModelConfigPath, err)
	} else if err = cfg.ValidateOutcomeLogging(cmp.Or(o.DirectLogLevel, modelconfig.LogLevelNone)); err != nil {
		cfg, err = nil, fmt.Errorf("model config %s: %w", o.ModelConfigPath, err)
	}
	r = configResult{cfg: cfg, err: s.sys.paths.Error(err), at: time.Now()}
	if err == nil {
		r.listings = listVersions(rctx, o.Bucket, cfg)
	}
	if err == nil && len(cfg.Contracts) > 0 {
		r.stateMark = s.sys.state.readMark()
		r.state, r.stateErr = s.sys.state.read(rctx)
	}
	return r
}

// applyConfig applies a poll's result: a valid config becomes the
// desired state and its contracts go to the router; an invalid one is
// reported and the previous config stays in force.
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
		s.apply(ctx, lifecycle.ConfigRejected{Err: r.err})
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
	s.configured = s.expandVersions(r.cfg, r.listings, r.at)
	// The router has the contracts before anyone can see the config.
	ctx.Send(s.sys.router, &setContracts{cfg: r.cfg.Contracts, at: r.at})
	models := s.shared(s.configured)
	inConfig := pathSet(models)
	for _, p := range s.plan.Paths() {
		if p.Phase != lifecycle.Evicting && !p.Registered && !inConfig[p.Name] && p.Active != nil {
			s.log.Info("model removed from config; evicting after grace period", "model", p.Name, "grace", p.Active.Meta.EvictionGracePeriod)
		}
	}
	for _, v := range s.versioned {
		// The config wins over a registration of a versioned entry's
		// path, as over one of a path it lists: the entry's path serves
		// its versions.
		if p := s.plan.Path(v.entry.Path); p != nil && p.Registered {
			s.log.Info("registered model replaced by the config's versioned entry", "model", p.Name)
			_ = s.plan.Apply(lifecycle.Unregistered{Path: p.Name}, r.at)
		}
	}
	s.apply(ctx, lifecycle.ConfigApplied{Models: models})
	s.loadNewVersions(ctx)
	s.loadPlaced(ctx)
	// Last: a caller that sees the config finds its contracts, routes and
	// on-demand models.
	s.sys.publishConfig(r.cfg)
	s.settle()
}

// versionedPath reports whether path is a versioned entry's of the config in force.
func (s *supervisorActor) versionedPath(path string) bool {
	for _, v := range s.versioned {
		if v.entry.Path == path {
			return true
		}
	}
	return false
}

// pathSet returns the set of the models' paths.
func pathSet(models []modelconfig.Model) map[string]bool {
	set := make(map[string]bool, len(models))
	for _, m := range models {
		set[m.Path] = true
	}
	return set
}

// isParseError tells a config that was read but rejected, or refused for
// its size, from one that could not be read.
func isParseError(err error) bool {
	var pe *modelconfig.Error
	var tooLarge *capped.TooLargeError
	return errors.As(err, &pe) || errors.As(err, &tooLarge)
}

// closeQuietly closes sv and removes local's files (either may be nil),
// and logs what failed: last, so that a panic in the log leaves nothing
// open.
func (s *supervisorActor) closeQuietly(sv *servables.Signed, local *bucket.LocalModel) {
	closeErr, removeErr := s.closeModel(sv, local)
	logClose(s.log, local, closeErr, removeErr)
}

// closeModel closes sv and removes local's files (either may be nil), and
// returns what failed, for logClose. A panic in sv's Close (a bug, in a
// runtime's binding or in Grove) fails that close alone: it is counted
// in grove_actor_panics_total{actor="close"} and returned as closeErr, a
// *closePanic that logClose logs with its stack, and local's files are
// removed all the same.
func (s *supervisorActor) closeModel(sv *servables.Signed, local *bucket.LocalModel) (closeErr, removeErr error) {
	if sv != nil {
		closeErr = s.closeServable(sv)
	}
	if local != nil {
		removeErr = local.Remove()
	}
	return closeErr, removeErr
}

// closeServable closes sv; a panic in its Close is counted and returned
// as a *closePanic (closeModel).
func (s *supervisorActor) closeServable(sv *servables.Signed) (err error) {
	defer func() {
		if v := recover(); v != nil {
			s.sys.metrics.panics.WithLabelValues("close").Inc()
			err = &closePanic{v: v, stack: debug.Stack()}
		}
	}()
	return sv.Close()
}

// closePanic is the failure of a servable's Close that panicked (a bug):
// the panic and its stack, logged by logClose.
type closePanic struct {
	v     any
	stack []byte
}

// Error names the panic.
func (e *closePanic) Error() string {
	return fmt.Sprintf("%v: closing the model panicked: %v", errInternal, e.v)
}

// logClose logs the failures closeModel returned: a close that panicked
// at error level, with its stack.
func logClose(log *slog.Logger, local *bucket.LocalModel, closeErr, removeErr error) {
	if p, ok := closeErr.(*closePanic); ok {
		log.Error("internal error: closing a model panicked; its files are removed all the same and the server goes on",
			"actor", "close", "panic", fmt.Sprint(p.v), "stack", string(p.stack))
	} else if closeErr != nil {
		log.Warn("closing model", "err", closeErr)
	}
	if removeErr != nil {
		log.Warn("removing cached model files", "dir", local.Dir, "err", removeErr)
	}
}

// publishRoutes publishes the routing table, if it changed: every path's
// serving content, and each versioned entry's path its chosen version's
// (servingVersions), unless a path of its own is so named and serving
// (a leaving one serves only until a version is ready), or its newest
// version loads on demand for it (reloadVersions: its demand slot takes
// the path).
func (s *supervisorActor) publishRoutes() {
	t := s.routesScratch
	if t == nil {
		t = make(table, len(s.contents))
		s.routesScratch = t
	}
	clear(t)
	paths := s.plan.Paths()
	var leaving map[string]bool
	for _, p := range paths {
		if p.Active != nil {
			if c := s.contents[p.Active.ID]; c != nil {
				t[p.Name] = c
			}
			if p.Phase == lifecycle.Evicting {
				if leaving == nil {
					leaving = map[string]bool{}
				}
				leaving[p.Name] = true
			}
		}
	}
	// A versioned entry's path is its own model's while that serves; a
	// model leaving the config (in its grace period) serves it only
	// until a version is ready, so that a path turned into a versioned
	// entry has no gap and moves to its first version at once.
	reload := s.reloadVersions(paths)
	for parent, p := range servingVersions(paths) {
		if c := t[p.Name]; c != nil && reload[parent] == nil && (t[parent] == nil || leaving[parent] && readyVersion(p)) {
			t[parent] = c
		}
	}
	if !maps.Equal(t, *s.sys.routes.Load()) {
		out := maps.Clone(t)
		s.sys.routes.Store(&out)
	}
}

// phaseStates maps each phase to the state the status API shows.
var phaseStates = map[lifecycle.Phase]State{
	lifecycle.Loading:  StateLoading,
	lifecycle.Ready:    StateReady,
	lifecycle.Swapping: StateReady,
	lifecycle.Failed:   StateFailed,
	lifecycle.Evicting: StateEvicting,
	lifecycle.Expiring: StateExpiring,
	lifecycle.Expired:  StateExpired,
	lifecycle.Unloaded: StateUnloaded,
}

// settle turns Ready true once the planner has settled on a config
// published (AppliedConfig).
func (s *supervisorActor) settle() {
	if !s.sys.settled.Load() && s.plan.Settled() && s.sys.applied.Load().cfg != nil {
		s.sys.settled.Store(true)
	}
}

// refreshStatus publishes a status snapshot if an event changed the status
// since the last one.
func (s *supervisorActor) refreshStatus() {
	if s.sys.statusStale.Load() {
		s.publishStatus()
		s.sys.statusStale.Store(false)
	}
}

// publishStatus publishes a status snapshot for the API.
func (s *supervisorActor) publishStatus() {
	paths := s.plan.Paths()
	st := &Status{Config: s.cfgStat, Models: make([]ModelStatus, 0, len(paths))}
	st.Config.Source = s.sys.opts.Bucket.String() + "/" + s.sys.opts.ModelConfigPath
	st.Config.PollInterval = s.sys.opts.PollInterval.String()
	retiring, stuck := s.plan.Retiring(), s.plan.StuckWarmUps()
	now := time.Now()
	for _, p := range paths {
		m := ModelStatus{Path: p.Name, State: phaseStates[p.Phase], Registered: p.Registered, ConfiguredChecksum: p.Desired.Checksum,
			LastError: p.LastErr, LastErrorAt: timePtr(p.ErrAt), Updating: p.Phase == lifecycle.Swapping,
			VersionOf: p.Desired.VersionOf, Version: p.Desired.Version}
		if p.Phase == lifecycle.Evicting || p.Phase == lifecycle.Expiring {
			m.evictAt = p.Until
		}
		if p.Active != nil {
			if c := s.contents[p.Active.ID]; c != nil {
				m.active, m.Checksum, m.Runtime, m.LoadedAt, m.SizeBytes = c, c.checksum, c.runtime, timePtr(c.loadedAt), c.local.Size
				m.MemoryBytes = c.rss
				m.Replicas = len(c.pids)
			}
		}
		for _, r := range retiring {
			if r.Path == p.Name {
				m.Retiring++
			}
		}
		for _, w := range stuck {
			if w.Path == p.Name {
				m.StuckWarmUps++
			}
		}
		if s.plan.OnDemand(p) {
			m.OnDemand, m.LastLoadMs = true, p.Cost.LoadTime.Milliseconds()
			if p.Active == nil && p.RetryAt.After(now) {
				m.RetryAt = timePtr(p.RetryAt)
			}
			if st.Memory == nil {
				st.Memory = &MemoryStatus{}
			}
			if p.Active != nil {
				st.Memory.Loaded++
			} else {
				st.Memory.Unloaded++
			}
		}
		m.KeepPreviousForMs = s.plan.KeepFor(p).Milliseconds()
		m.keptReleased = p.KeptReleased
		if k := p.Kept; k != nil {
			if c := s.contents[k.ID]; c != nil {
				m.Kept = &KeptStatus{Checksum: c.checksum, Runtime: c.runtime, SizeBytes: c.local.Size, MemoryBytes: c.rss, Replicas: len(c.pids),
					Since: k.Since, Until: k.Until}
				m.keptID, m.keptMeta = k.ID, k.Meta
			}
		}
		st.Models = append(st.Models, m)
	}
	st.Versioned = s.versionedStatus()
	if st.Memory != nil || s.plan.Budget > 0 {
		if st.Memory == nil {
			st.Memory = &MemoryStatus{}
		}
		st.Memory.BudgetBytes, st.Memory.UsedBytes = s.plan.Budget, s.plan.Used()
		st.Memory.LoadPolicy = string(cmp.Or(s.plan.LoadPolicy, modelconfig.LoadEager))
		st.Memory.UnloadOrder = s.plan.UnloadOrder(now)
		st.Memory.RuntimeStartBytes = maps.Clone(s.runtimeStart)
	}
	s.sys.status.Store(st)
}

// restartAlways is the supervisor's strategy: a crashed model actor is
// restarted, however often it crashes. It keeps no count of the crashes
// (the content does): protoactor's one-for-one strategy would add the
// time of each to the actor's restart statistics, which live as long as
// the actor, and scan them all at the next.
func restartAlways() actor.SupervisorStrategy { return alwaysRestart{} }

// alwaysRestart is restartAlways' strategy.
type alwaysRestart struct{}

// HandleFailure restarts the crashed child, and publishes the event as
// protoactor's strategies do.
func (alwaysRestart) HandleFailure(as *actor.ActorSystem, sup actor.Supervisor, child *actor.PID, _ *actor.RestartStatistics, reason, _ any) {
	as.EventStream.Publish(&actor.SupervisorEvent{Child: child, Reason: reason, Directive: actor.RestartDirective})
	sup.RestartChildren(child)
}
