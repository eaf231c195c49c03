// Package lifecycle is the supervisor's planner: a pure state machine that
// turns the model config Grove is asked to serve (desired), what happened
// to the work it started (observed) and the time into the next steps:
// fetch, load, warm up, swap, retire, release, discard, forget, notify,
// and when to wake up next.
//
// It does no I/O, reads no clock and starts no goroutine: the supervisor
// actor feeds it events (Apply), asks for steps (Plan), executes them and
// feeds their results back as events. Everything it decides can therefore
// be tested as a table of (state, event, time) -> steps.
//
// Each model path has one explicit Phase. A path's content is identified
// by the id of the job that loaded it; a job runs the stages fetch (copy
// into the cache, checksum), verify (the planner compares checksums), load
// (the runtime) and warm up (the model actors run the warm-up requests),
// one at a time, each stage started by a step and ended by an event.
//
// With a keep time (State.KeepPreviousFor, or the entry's
// keep_previous_for_ms), the content an update replaced is not released:
// it stays loaded and warm, out of service, as the path's Kept content,
// until the keep time ends, the path is forgotten or a newer update
// replaces it. A desired entry that the kept content satisfies (the old
// checksum, serving options or signature put back) brings it back into
// service at once (Restore), with no fetch, load or warm-up.
//
// An on-demand entry (its load, or the server's LoadPolicy) is known at
// once but not loaded: its phase is Unloaded until a Demand event (a
// request waits for it) starts its load. With a memory budget (Budget),
// loads run one at a time, each counted at the memory it measured
// (Loaded.Bytes, at least its estimate) until its content is freed
// (Freed); a load that would
// pass the budget first unloads the least valuable idle on-demand
// contents (UnloadOrder), which go back to Unloaded. A failed on-demand
// load is retried, on the next demand, after a backoff that doubles with
// each failure in a row (RetryAt). With IdleUnloadAfter, an on-demand
// content that took no request for that long is unloaded too.
//
// A warm-up that timed out with a forward call still running (Warmed.Stuck)
// leaves its content loaded, and counted against the budget, until that
// call returns (Freed). While it runs, the path's retries do not load the
// same content with the same load settings again (Held): a model that
// hangs on every warm-up costs one stuck copy, not one more at each poll
// or backoff. A new checksum, warm-up request, serving options or
// signature loads.
package lifecycle

import (
	"cmp"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/groveml/grove/conf/modelconfig"
)

// Phase is where a model path is in its lifecycle.
type Phase uint8

// The phases of a model path.
const (
	// Loading: no content serves; the first one is being fetched, loaded or warmed up.
	Loading Phase = iota + 1
	// Ready: a content serves requests.
	Ready
	// Swapping: a content serves while a new one (new checksum or serving
	// options or declared signature, or a reload after a crash) loads beside it.
	Swapping
	// Failed: no content serves and the last load failed; it is retried at
	// the next config poll (a retry may be running), or once the stuck
	// warm-up of the same content and load settings returns (Held).
	Failed
	// Evicting: removed from the config; served until its grace period
	// ends, then, with a keep time, held loaded out of service (Kept)
	// until the longer of the two has passed since its removal.
	Evicting
	// Expiring: every contract servable using it is expired; still served
	// (a contract can fall back to it) until its grace period ends.
	Expiring
	// Expired: unloaded because every contract servable using it is
	// expired; loaded again when one stops being expired.
	Expired
	// Unloaded: an on-demand entry with no content: listed and routable,
	// loaded when a request for it arrives (Demand). It is where an
	// on-demand entry starts, and where the budget's unloading takes it
	// back to.
	Unloaded
)

var phaseNames = [...]string{Loading: "loading", Ready: "ready", Swapping: "swapping", Failed: "failed",
	Evicting: "evicting", Expiring: "expiring", Expired: "expired", Unloaded: "unloaded"}

// String returns the phase's name.
func (p Phase) String() string {
	if p > 0 && int(p) < len(phaseNames) {
		return phaseNames[p]
	}
	return fmt.Sprintf("phase(%d)", p)
}

// Stage is how far a job has come.
type Stage uint8

// The stages of a job, in order.
const (
	// Fetching: the files are being copied into the cache and checksummed.
	Fetching Stage = iota + 1
	// WaitingToLoad: fetched and verified, waiting for its turn to load
	// (with a memory budget, loads run one at a time, and each waits for
	// the room it needs).
	WaitingToLoad
	// Loading the verified files with their runtime.
	LoadingFiles
	// WarmingUp: the model actors run the warm-up requests.
	WarmingUp
)

// Content is a loaded content of a path: the job that loaded it, its
// checksum, and the metadata it was loaded with (whose grace period
// applies when it is replaced or removed).
type Content struct {
	ID       int64
	Checksum string
	Meta     modelconfig.Model
	// Registered is set for a content loaded from a registration's files.
	Registered bool
	// Broken is set when its model actor crashed and could not reload it.
	Broken bool
	// Bytes is the memory it is counted at: its load's measured growth
	// (Loaded.Bytes), at least its estimate (the last count of the same
	// content, else its files' size times State.MemoryFactor).
	Bytes int64
	// LoadedAt is when it went into service; LoadTime how long its job
	// took, from the fetch to the end of the warm-up, less its wait for
	// its turn to load under the budget (Job.Waited): what loading it
	// again costs.
	LoadedAt time.Time
	LoadTime time.Duration
	// servedIn is the plan in which it went into service: in that plan
	// the requests waiting for it have not reached it yet, so the budget
	// counts it as busy (planLoads).
	servedIn int64
}

// Kept is a path's previous content, loaded and warm but out of service,
// held so that going back to it needs no reload.
type Kept struct {
	Content
	// Since is when it left service (or its path left the config).
	Since time.Time
	// Until is when it is released: Since plus the longer of the keep
	// time in force for its path and its own grace period.
	Until time.Time
}

// Job is the one load running for a path.
type Job struct {
	ID    int64
	Meta  modelconfig.Model
	Stage Stage
	// Checksum is what the fetch computed (set once fetched).
	Checksum string
	// Registered is set for a job loading a registration's files.
	Registered bool
	// Reason is why it loads: ReasonDemand, ReasonEager or ReasonUpdate.
	Reason string
	// Started is when its fetch started; Size is its files' size (once
	// fetched), Bytes the memory it is counted at (once loaded).
	Started time.Time
	Size    int64
	Bytes   int64
	// Waited is how long it waited, fetched, for its turn to load under
	// the budget (a load slot, room); waitFrom is when that wait began.
	Waited   time.Duration
	waitFrom time.Time
}

// Why a job loads (Job.Reason, Step.Reason of a Fetch).
const (
	// ReasonDemand: a request waits for an on-demand model with no content.
	ReasonDemand = "demand"
	// ReasonEager: an eager model with no content (listed, or failed before).
	ReasonEager = "eager"
	// ReasonUpdate: a model's serving content is replaced (a new checksum,
	// serving options or signature, or a reload after a crash).
	ReasonUpdate = "update"
	// ReasonBudget is the Reason of a Retire that unloads an idle
	// on-demand content to make room under the memory budget.
	ReasonBudget = "budget"
	// ReasonIdle is the Reason of a Retire that unloads an on-demand
	// content that took no request for IdleUnloadAfter.
	ReasonIdle = "idle"
)

// Cost is what a path's last load took: the memory counted for content
// Checksum and the time from its fetch to the end of its warm-up; zero
// before its first load.
type Cost struct {
	Bytes    int64
	LoadTime time.Duration
	Checksum string
}

// Path is the planner's record of one model path.
type Path struct {
	Name  string
	Phase Phase
	// Desired is the config entry (or registration) in force for the path.
	Desired modelconfig.Model
	// Registered is set for a model loaded from files sent through the
	// registration API rather than listed in the config.
	Registered bool
	// Active is the serving content, nil if none.
	Active *Content
	// Job is the running load, nil if none.
	Job *Job
	// Kept is the previous content held loaded out of service, nil if none.
	Kept *Kept
	// KeptReleased is when the last kept content was released because its
	// keep time ended (zero if none was).
	KeptReleased time.Time
	// Until is when an Evicting or Expiring path's grace period ends.
	Until time.Time
	// LastErr and ErrAt describe the last failed load, checksum or warm-up.
	LastErr string
	ErrAt   time.Time
	// Demanded is set, for an on-demand path, while a request waits for
	// a load that has not started yet.
	Demanded bool
	// Failures counts an on-demand path's failed loads in a row; RetryAt
	// is when the next may start (zero: at once).
	Failures int
	RetryAt  time.Time
	// Cost is what its last load took, the estimate of its next.
	Cost Cost
	// blocked holds back a new job after a failure until the next config poll.
	blocked bool
	// fetchedSum is, for an entry without a checksum, what a fetch found
	// that a stuck warm-up holds back (Held), until the next config poll.
	fetchedSum string
	// left is when an Evicting path left the config.
	left time.Time
}

// Retiree is a content out of service, released once its grace period is
// over (At) and its in-flight requests are answered.
type Retiree struct {
	Path    string
	Content int64
	At      time.Time
	// plan is the Plan call that emitted its Retire step: it is released
	// by a later one, once that step was executed.
	plan int64
}

// StepKind says what a Step does.
type StepKind uint8

// The kinds of step.
const (
	// Fetch copies the files of Meta.Path into the cache and checksums
	// them (from the registration's files if Registered); ends with Fetched.
	Fetch StepKind = iota + 1
	// Load loads the fetched files with their runtime; ends with Loaded.
	Load
	// WarmUp starts the job's model actors and runs Meta's warm-up
	// requests through them; ends with Warmed.
	WarmUp
	// Swap puts the job's content into service on its path.
	Swap
	// Retire takes Content out of service: no new request reaches it.
	Retire
	// Release stops a retired Content's model actors (closing its
	// servable) and deletes its cached files.
	Release
	// Discard drops a job that will not serve: whatever it fetched,
	// loaded or started, now or when its running stage ends.
	Discard
	// Forget drops a path that has no content and no job left.
	Forget
	// Notify tells the callers waiting on a registration its outcome (Err).
	Notify
	// Restore puts the path's kept Content back into service: it was
	// retired (out of service) but not released, so it serves at once.
	Restore
)

var stepNames = [...]string{Fetch: "fetch", Load: "load", WarmUp: "warm-up", Swap: "swap", Retire: "retire",
	Release: "release", Discard: "discard", Forget: "forget", Notify: "notify", Restore: "restore"}

// String returns the step kind's name.
func (k StepKind) String() string {
	if k > 0 && int(k) < len(stepNames) {
		return stepNames[k]
	}
	return fmt.Sprintf("step(%d)", k)
}

// Step is one thing the supervisor must do.
type Step struct {
	Kind StepKind
	Path string
	// Job is the job of Fetch, Load, WarmUp, Swap and Discard.
	Job int64
	// Content is the content of Retire, Release and Restore.
	Content int64
	// Meta is what Fetch, Load and WarmUp load.
	Meta modelconfig.Model
	// Registered makes Fetch read the registration's files.
	Registered bool
	// Err is Notify's outcome (nil: the model is ready), and why Discard
	// drops a job that failed (nil for one that is no longer wanted).
	Err error
	// Reason is why a Fetch loads (Job.Reason), and, for a Retire that
	// unloads an on-demand content, why: ReasonBudget (to make room) or
	// ReasonIdle (empty otherwise).
	Reason string
	// OverBudget marks a Load that passes the memory budget: even with
	// every on-demand content unloaded there would be no room for it.
	OverBudget bool
}

// Retires reports whether p takes a content out of service, after which
// the caller must plan again at once (see State.Plan).
func (p Plan) Retires() bool {
	for _, st := range p.Steps {
		if st.Kind == Retire {
			return true
		}
	}
	return false
}

// String describes the step compactly, for logs and tests: "fetch m/ #2",
// "retire m/ @1", "retire m/ @1 (budget)", "notify m/: <err>".
func (s Step) String() string {
	switch s.Kind {
	case Retire, Release, Restore:
		if s.Reason != "" {
			return fmt.Sprintf("%v %s @%d (%s)", s.Kind, s.Path, s.Content, s.Reason)
		}
		return fmt.Sprintf("%v %s @%d", s.Kind, s.Path, s.Content)
	case Load:
		if s.OverBudget {
			return fmt.Sprintf("%v %s #%d (over budget)", s.Kind, s.Path, s.Job)
		}
	case Forget:
		return fmt.Sprintf("%v %s", s.Kind, s.Path)
	case Notify:
		if s.Err == nil {
			return fmt.Sprintf("%v %s: ok", s.Kind, s.Path)
		}
		return fmt.Sprintf("%v %s: %v", s.Kind, s.Path, s.Err)
	}
	return fmt.Sprintf("%v %s #%d", s.Kind, s.Path, s.Job)
}

// Plan is what the supervisor must do now, and when to plan again if
// nothing else happens first (zero: no time-driven change is pending).
type Plan struct {
	Steps []Step
	Wake  time.Time
}

// Errors of the registration events; the supervisor returns them to the caller.
var (
	// ErrManagedByConfig: the path is listed in the model config, which wins over registrations.
	ErrManagedByConfig = errors.New("the model path is managed by the model config")
	// ErrAlreadyRegistered: a model with that path is already registered.
	ErrAlreadyRegistered = errors.New("model path already exists")
	// ErrNotRegistered: no registered model has that path.
	ErrNotRegistered = errors.New("model path is not registered")
	// ErrDeletedWhileLoading: the registration was deleted before it was ready.
	ErrDeletedWhileLoading = errors.New("deleted while loading")
)

// Event is something the planner learns: a config, a registration, the
// end of a job's stage, the contracts' verdict.
type Event interface{ isEvent() }

type (
	// ConfigApplied: a model config was read and validated; Models is the
	// desired state from now on.
	ConfigApplied struct{ Models []modelconfig.Model }
	// ConfigRejected: a model config could not be read, parsed or
	// validated; the desired state stays what it was.
	ConfigRejected struct{ Err error }
	// Registered: a model was sent through the registration API.
	Registered struct{ Meta modelconfig.Model }
	// Unregistered: a registered model is deleted through the API.
	Unregistered struct{ Path string }
	// Fetched: a job's files are in the cache with checksum Checksum and
	// Size bytes, or Err.
	Fetched struct {
		Path     string
		Job      int64
		Checksum string
		Size     int64
		Err      error
	}
	// Loaded: a job's runtime load ended; Bytes is the growth of the
	// process's memory it measured (0: not measured, as when it was its
	// runtime's first load, whose growth is mostly the runtime's own
	// start-up: the base, not the model).
	Loaded struct {
		Path  string
		Job   int64
		Bytes int64
		Err   error
	}
	// Warmed: a job's warm-up ended. Stuck marks an Err that is the
	// warm-up's bound passing while a forward call of it still runs: its
	// content stays loaded until that call returns, which Freed reports.
	Warmed struct {
		Path  string
		Job   int64
		Err   error
		Stuck bool
	}
	// ContractsExpired: the paths every contract using them has expired,
	// now (replacing the previous set).
	ContractsExpired struct{ Paths map[string]bool }
	// ReloadFailed: a content's model actor crashed and could not reload
	// its servable from the cache; the path needs a fresh load.
	ReloadFailed struct {
		Path    string
		Content int64
		Err     error
	}
	// Demand: a request waits for on-demand path Path, which has no
	// content: load it (once its backoff, if any, is over).
	Demand struct{ Path string }
	// Freed: the memory of content (or job) Content is given back: its
	// servable is closed. It no longer counts against the budget, and a
	// stuck warm-up of it (Warmed.Stuck) has returned.
	Freed struct{ Content int64 }
)

func (ConfigApplied) isEvent()    {}
func (ConfigRejected) isEvent()   {}
func (Registered) isEvent()       {}
func (Unregistered) isEvent()     {}
func (Fetched) isEvent()          {}
func (Loaded) isEvent()           {}
func (Warmed) isEvent()           {}
func (ContractsExpired) isEvent() {}
func (ReloadFailed) isEvent()     {}
func (Demand) isEvent()           {}
func (Freed) isEvent()            {}

// State is the planner's whole view. The zero value is ready to use.
type State struct {
	// KeepPreviousFor is the server's keep time (keep_previous_for), for
	// the entries that do not set their own; 0: keep nothing.
	KeepPreviousFor time.Duration
	// LoadPolicy is the server's load_policy, for the entries without a
	// load of their own (empty: eager).
	LoadPolicy modelconfig.Load
	// Budget is the memory, in bytes, the loaded contents may take
	// (memory_budget_bytes); 0: unbounded, and loads run at once, side
	// by side, as ever.
	Budget int64
	// MemoryFactor estimates a content's memory as its files' size times
	// it until a load measures it (0: 2).
	MemoryFactor float64
	// LastUsed reports when a content last took a request (zero: never);
	// nil: never. The budget unloads the least recently used first.
	LastUsed func(content int64) time.Time
	// IdleUnloadAfter unloads an on-demand content that took no request
	// for that long (idle_unload_after), back to Unloaded; 0: never.
	IdleUnloadAfter time.Duration

	paths map[string]*Path
	// order is the config order of the listed paths, for status; listed
	// holds the same paths, to look them up.
	order  []string
	listed map[string]bool
	// pathList and sorted cache Paths and sortedPaths until a path is
	// added or removed, or the listed ones change (pathsChanged).
	pathList []*Path
	sorted   []*Path
	// expired is the contracts' last verdict.
	expired map[string]bool
	// retiring are contents out of service awaiting release.
	retiring []Retiree
	// applied is set once a config has been applied.
	applied bool
	lastJob int64
	// plans counts the Plan calls made; the one running is plans+1.
	plans int64
	// pending are the steps decided so far (by Apply, then by Plan), in
	// order; Plan hands them over.
	pending []Step
	// held is the memory counted for each loaded content or job, by id,
	// until it is Freed.
	held map[int64]int64
	// stuck are the stuck warm-ups (Warmed.Stuck) by job id, until Freed.
	stuck map[int64]StuckWarmUp
	// live is usage's set of the contents in use, kept between calls so
	// that each does not grow a new one.
	live map[int64]bool
}

// StuckWarmUp is a load whose warm-up timed out while a forward call of it
// still runs (Warmed.Stuck): its content stays loaded until the call
// returns (Freed), and the same content of its path is not loaded again
// with the same load settings meanwhile (State.Held).
type StuckWarmUp struct {
	Job      int64
	Path     string
	Checksum string
	// Since is when the warm-up timed out; Err is its failure.
	Since time.Time
	Err   error
	// meta is the entry its job loaded (sameLoad).
	meta modelconfig.Model
}

// StuckWarmUps lists the stuck warm-ups, oldest first.
func (s *State) StuckWarmUps() []StuckWarmUp {
	out := make([]StuckWarmUp, 0, len(s.stuck))
	for _, st := range s.stuck {
		out = append(out, st)
	}
	slices.SortFunc(out, func(a, b StuckWarmUp) int { return cmp.Compare(a.Job, b.Job) })
	return out
}

// stuckAs returns the oldest stuck warm-up of path's content checksum
// loaded as meta asks (sameLoad), nil if none.
func (s *State) stuckAs(path, checksum string, meta modelconfig.Model) *StuckWarmUp {
	var found *StuckWarmUp
	for _, st := range s.stuck {
		if st.Path == path && st.Checksum == checksum && sameLoad(st.meta, meta) && (found == nil || st.Job < found.Job) {
			found = &st
		}
	}
	return found
}

// sameLoad reports whether entries a and b load and warm up a content
// alike: the same warm-up request, serving options and signature. A stuck
// warm-up holds back only a load that would run it again, not one whose
// settings were changed to get past it.
func sameLoad(a, b modelconfig.Model) bool {
	return a.WarmUpJSON == b.WarmUpJSON && a.Serving == b.Serving && a.Signature.Equal(b.Signature)
}

// Held returns the stuck warm-up that holds p's next load back, nil if
// none: p has no load running and asks for the content (the checksum of
// its entry, or, without one, what its last fetch found since the last
// poll) whose warm-up is stuck, with the same load settings (sameLoad). A
// registration is never held: it is not retried.
func (s *State) Held(p *Path) *StuckWarmUp {
	if len(s.stuck) == 0 || p.Job != nil || p.Registered {
		return nil
	}
	sum := cmp.Or(p.Desired.Checksum, p.fetchedSum)
	if sum == "" {
		return nil
	}
	return s.stuckAs(p.Name, sum, p.Desired)
}

// holdBack keeps p from loading what st's stuck warm-up holds: p stays
// failed (or, with a content serving, keeps serving) with st's error, and
// a demand it had is answered by the supervisor with that error (Held).
func (s *State) holdBack(p *Path, st *StuckWarmUp) {
	p.Demanded = false
	p.LastErr, p.ErrAt = st.Err.Error(), st.Since
	switch {
	case p.Active != nil && p.Phase == Swapping:
		p.Phase = Ready
	case p.Active == nil && (p.Phase == Loading || p.Phase == Unloaded):
		p.Phase = Failed
	}
}

// Path returns the record of path, or nil.
func (s *State) Path(path string) *Path { return s.paths[path] }

// Paths returns every known path: the listed ones in config order, then
// the others (registrations, paths evicting after their removal) by name.
// The slice is shared until a path is added or removed: callers must not
// modify it.
func (s *State) Paths() []*Path {
	if s.pathList != nil {
		return s.pathList
	}
	out := make([]*Path, 0, len(s.paths))
	for _, name := range s.order {
		if p := s.paths[name]; p != nil && !p.Registered {
			out = append(out, p)
		}
	}
	var reg []*Path
	for _, p := range s.paths {
		if p.Registered || !s.listed[p.Name] {
			reg = append(reg, p)
		}
	}
	slices.SortFunc(reg, func(a, b *Path) int { return strings.Compare(a.Name, b.Name) })
	s.pathList = append(out, reg...)
	return s.pathList
}

// pathsChanged drops the cached Paths and sortedPaths: a path was added
// or removed, or the listed paths or a path's Registered changed.
func (s *State) pathsChanged() { s.pathList, s.sorted = nil, nil }

// Retiring lists the contents awaiting release.
func (s *State) Retiring() []Retiree { return slices.Clone(s.retiring) }

// Settled reports whether a config has been applied and no path is
// loading for the first time or retrying: the end of the first reconcile.
func (s *State) Settled() bool {
	if !s.applied {
		return false
	}
	for _, p := range s.paths {
		if p.Job != nil && p.Active == nil && !s.OnDemand(p) {
			return false
		}
	}
	return true
}

// OnDemand reports whether p is loaded on demand: a listed entry whose
// load (or the server's LoadPolicy) says on_demand. A registration never is.
func (s *State) OnDemand(p *Path) bool {
	return !p.Registered && p.Desired.OnDemand(s.LoadPolicy)
}

// Apply records ev at now. It returns an error only for a registration
// event the state refuses (ErrManagedByConfig, ErrAlreadyRegistered,
// ErrNotRegistered); the state is then unchanged.
func (s *State) Apply(ev Event, now time.Time) error {
	if s.paths == nil {
		s.paths = map[string]*Path{}
		s.pathsChanged()
	}
	switch ev := ev.(type) {
	case ConfigApplied:
		s.applyConfig(ev.Models, now)
	case ConfigRejected:
		// The config in force stays in force; failed loads wait for a
		// config that reads.
	case Registered:
		if p := s.paths[ev.Meta.Path]; p != nil {
			switch {
			case p.Registered:
				return ErrAlreadyRegistered
			case p.Phase != Evicting || p.Active != nil:
				return ErrManagedByConfig
			}
			// Removed from the config, past its grace period, its content
			// only kept (out of service): the path is free.
			s.dropKept(p)
		}
		s.paths[ev.Meta.Path] = &Path{Name: ev.Meta.Path, Phase: Loading, Desired: ev.Meta, Registered: true}
		s.pathsChanged()
	case Unregistered:
		p := s.paths[ev.Path]
		switch {
		case p == nil:
			return ErrNotRegistered
		case !p.Registered:
			return ErrManagedByConfig
		}
		s.dropJob(p)
		if p.Active != nil {
			s.retire(p, now)
		}
		s.dropKept(p)
		s.pending = append(s.pending, Step{Kind: Notify, Path: p.Name, Err: ErrDeletedWhileLoading}, Step{Kind: Forget, Path: p.Name})
		delete(s.paths, p.Name)
		s.pathsChanged()
	case Fetched:
		if p, ok := s.jobAt(ev.Path, ev.Job, Fetching); ok {
			switch {
			case ev.Err != nil:
				s.fail(p, ev.Err, now)
			case p.Job.Meta.Checksum != "" && p.Job.Meta.Checksum != ev.Checksum:
				s.fail(p, fmt.Errorf("loading model %s: model rejected due to incorrect checksum: expected %s, actual %s", p.Name, p.Job.Meta.Checksum, ev.Checksum), now)
			case s.stuckAs(p.Name, ev.Checksum, p.Job.Meta) != nil && !p.Registered:
				// What the bucket holds is the content a stuck warm-up
				// holds (an entry without a checksum learns it so): not
				// a failure, the load waits for that call (Held).
				st := s.stuckAs(p.Name, ev.Checksum, p.Job.Meta)
				s.pending = append(s.pending, Step{Kind: Discard, Path: p.Name, Job: p.Job.ID})
				p.Job, p.fetchedSum = nil, ev.Checksum
				s.holdBack(p, st)
			default:
				p.Job.Checksum, p.Job.Size = ev.Checksum, ev.Size
				if s.Budget > 0 {
					p.Job.Stage = WaitingToLoad // Plan starts its load in turn
					p.Job.waitFrom = now
					break
				}
				s.advance(p, LoadingFiles, Load)
			}
		}
	case Loaded:
		if p, ok := s.jobAt(ev.Path, ev.Job, LoadingFiles); ok {
			if ev.Err != nil {
				s.fail(p, ev.Err, now)
			} else {
				// A load that reuses memory an unload gave back grows
				// the process less than it takes: the estimate floors
				// what it measured.
				p.Job.Bytes = max(ev.Bytes, s.estimate(p, p.Job))
				s.hold(p.Job.ID, p.Job.Bytes)
				s.advance(p, WarmingUp, WarmUp)
			}
		}
	case Demand:
		// Kept while a job runs (one started before the path went on
		// demand, say): if that job is dropped, the demand loads anew.
		if p := s.paths[ev.Path]; p != nil && s.OnDemand(p) && p.Active == nil &&
			(p.Phase == Unloaded || p.Phase == Failed || p.Phase == Loading) {
			p.Demanded = true
		}
	case Freed:
		delete(s.held, ev.Content)
		delete(s.stuck, ev.Content)
	case Warmed:
		if ev.Stuck {
			s.stick(ev, now)
		}
		if p, ok := s.jobAt(ev.Path, ev.Job, WarmingUp); ok {
			if ev.Err != nil {
				s.fail(p, ev.Err, now)
			} else {
				s.swap(p, now)
			}
		}
	case ContractsExpired:
		s.expired = ev.Paths
	case ReloadFailed:
		p := s.paths[ev.Path]
		if p != nil && p.Kept != nil && p.Kept.ID == ev.Content {
			// A kept content that crashed (answering the requests it held
			// when it left service) and could not reload would answer
			// Unavailable if restored: release it, so that going back
			// loads afresh.
			s.dropKept(p)
			break
		}
		if p == nil || p.Active == nil || p.Active.ID != ev.Content {
			break
		}
		p.LastErr, p.ErrAt = fmt.Sprintf("model crashed and could not be reloaded from the cache: %v", ev.Err), now
		// Load the path afresh; the broken content answers Unavailable
		// until the new one swaps in.
		p.Active.Broken = true
		p.blocked = false
	}
	return nil
}

// stick records ev's stuck warm-up until Freed. Its checksum is its
// job's; for a job dropped before its warm-up timed out (the config moved
// on) it is unknown, and the stuck content then only counts (memory,
// status), holding no load back.
func (s *State) stick(ev Warmed, now time.Time) {
	st := StuckWarmUp{Job: ev.Job, Path: ev.Path, Since: now, Err: ev.Err}
	if p := s.paths[ev.Path]; p != nil && p.Job != nil && p.Job.ID == ev.Job {
		st.Checksum, st.meta = p.Job.Checksum, p.Job.Meta
	}
	if s.stuck == nil {
		s.stuck = map[int64]StuckWarmUp{}
	}
	s.stuck[ev.Job] = st
}

// advance moves p's job on to stage next, started by a step of kind.
func (s *State) advance(p *Path, next Stage, kind StepKind) {
	p.Job.Stage = next
	s.pending = append(s.pending, Step{Kind: kind, Path: p.Name, Job: p.Job.ID, Meta: p.Job.Meta})
}

// jobAt finds path's job id at stage; a result for a job that is gone
// (superseded, removed) gets a Discard.
func (s *State) jobAt(path string, job int64, stage Stage) (*Path, bool) {
	p := s.paths[path]
	if p == nil || p.Job == nil || p.Job.ID != job || p.Job.Stage != stage {
		s.pending = append(s.pending, Step{Kind: Discard, Path: path, Job: job})
		return nil, false
	}
	if stale(p.Desired, p.Job.Meta) {
		// The config changed while this stage ran: start over with what it asks now.
		s.dropJob(p)
		return nil, false
	}
	return p, true
}

// stale reports whether a job loading job no longer gives what desired asks for.
func stale(desired, job modelconfig.Model) bool {
	return (desired.Checksum != "" && desired.Checksum != job.Checksum) || desired.Serving != job.Serving ||
		!desired.Signature.Equal(job.Signature)
}

// satisfies reports whether content c is what desired asks for.
func satisfies(desired modelconfig.Model, c *Content) bool {
	return (desired.Checksum == "" || desired.Checksum == c.Checksum) && desired.Serving == c.Meta.Serving &&
		desired.Signature.Equal(c.Meta.Signature)
}

// dropJob discards p's running job, if any. A demand the job was
// loading for stays: the job that replaces it starts at once.
func (s *State) dropJob(p *Path) {
	if p.Job != nil {
		s.pending = append(s.pending, Step{Kind: Discard, Path: p.Name, Job: p.Job.ID})
		if p.Job.Reason == ReasonDemand && p.Active == nil && p.Phase == Loading {
			p.Demanded = true
		}
		p.Job = nil
	}
}

// fail records a failed job; the previous content, if any, keeps serving.
// An on-demand path with no content waits for its backoff (RetryAt)
// before a demand loads it again.
func (s *State) fail(p *Path, err error, now time.Time) {
	s.pending = append(s.pending, Step{Kind: Discard, Path: p.Name, Job: p.Job.ID, Err: err})
	p.Job = nil
	p.LastErr, p.ErrAt = err.Error(), now
	p.blocked = true
	if s.OnDemand(p) && p.Active == nil {
		p.Failures++
		p.RetryAt = now.Add(Backoff(p.Failures))
		p.Demanded = false
	}
	if p.Registered {
		// A registration is not retried: its files are not kept.
		s.pending = append(s.pending, Step{Kind: Notify, Path: p.Name, Err: err})
		if p.Active == nil {
			s.pending = append(s.pending, Step{Kind: Forget, Path: p.Name})
			delete(s.paths, p.Name)
			s.pathsChanged()
		}
		return
	}
	switch {
	case p.Active != nil && p.Phase == Swapping:
		p.Phase = Ready
	case p.Active == nil && (p.Phase == Loading || p.Phase == Failed):
		p.Phase = Failed
	}
}

// swap puts p's warmed-up job into service; the old content is kept (see
// putAside) or retires after its grace period.
func (s *State) swap(p *Path, now time.Time) {
	j := p.Job
	p.Job = nil
	old := p.Active
	p.Active = &Content{ID: j.ID, Checksum: j.Checksum, Meta: j.Meta, Registered: j.Registered, Bytes: j.Bytes,
		LoadedAt: now, LoadTime: now.Sub(j.Started) - j.Waited, servedIn: s.plans + 1}
	p.Cost = Cost{Bytes: j.Bytes, LoadTime: p.Active.LoadTime, Checksum: j.Checksum}
	p.LastErr, p.ErrAt = "", time.Time{}
	p.Failures, p.RetryAt, p.Demanded = 0, time.Time{}, false
	s.pending = append(s.pending, Step{Kind: Swap, Path: p.Name, Job: j.ID})
	if old != nil {
		s.putAside(p, old, now)
	}
	if p.Registered {
		s.pending = append(s.pending, Step{Kind: Notify, Path: p.Name})
	}
	if p.Phase == Loading || p.Phase == Swapping || p.Phase == Failed {
		p.Phase = Ready
	}
}

// KeepFor is the keep time in force for p: its entry's, else the
// server's; 0 for a registration, which keeps nothing.
func (s *State) KeepFor(p *Path) time.Duration {
	if p.Registered {
		return 0
	}
	if k := p.Desired.KeepPreviousFor; k != nil {
		return *k
	}
	return s.KeepPreviousFor
}

// keeps reports whether content c, taken out of p's service, may be kept:
// a keep time is in force, and c is a config entry's working content.
func (s *State) keeps(p *Path, c *Content) bool {
	return s.KeepFor(p) > 0 && !c.Broken && !c.Registered && !p.Registered
}

// keptUntil is when p's kept content k is released.
func (s *State) keptUntil(p *Path, k *Kept) time.Time {
	return k.Since.Add(max(s.KeepFor(p), k.Meta.EvictionGracePeriod))
}

// putAside takes old, p's content until now, out of service: with a keep
// time it becomes p's kept content (since since), releasing the one kept
// before; without, it retires after its grace period, as ever.
func (s *State) putAside(p *Path, old *Content, since time.Time) {
	if !s.keeps(p, old) {
		s.retireAt(p.Name, old.ID, since.Add(old.Meta.EvictionGracePeriod))
		return
	}
	s.pending = append(s.pending, Step{Kind: Retire, Path: p.Name, Content: old.ID})
	s.dropKept(p)
	p.Kept = &Kept{Content: *old, Since: since}
	p.Kept.Until = s.keptUntil(p, p.Kept)
}

// dropKept releases p's kept content, if any, once the grace period it
// was loaded with is over and its requests are answered; it is already
// out of service.
func (s *State) dropKept(p *Path) {
	if k := p.Kept; k != nil {
		s.retiring = append(s.retiring, Retiree{Path: p.Name, Content: k.ID, At: k.Since.Add(k.Meta.EvictionGracePeriod)})
		p.Kept = nil
	}
}

// restorable reports whether p's kept content is what p asks for while
// its active one (if any) is not: going back needs no load.
func (s *State) restorable(p *Path) bool {
	k := p.Kept
	return k != nil && (p.Active == nil || !satisfies(p.Desired, p.Active)) && !k.Broken &&
		k.Registered == p.Registered && satisfies(p.Desired, &k.Content)
}

// restore puts p's kept content back into service at once, discarding a
// load in progress; the content it replaces is put aside in turn.
func (s *State) restore(p *Path, now time.Time) {
	s.dropJob(p)
	k := p.Kept
	p.Kept = nil
	old := p.Active
	p.Active = &k.Content
	p.Active.servedIn = s.plans + 1
	p.Demanded = false // it serves the requests a discarded load was for
	p.LastErr, p.ErrAt = "", time.Time{}
	s.pending = append(s.pending, Step{Kind: Restore, Path: p.Name, Content: k.ID})
	if old != nil {
		s.putAside(p, old, now)
	}
	p.Phase = Ready
}

// planKept releases p's kept content once its keep time is over (Plan
// wakes up then).
func (s *State) planKept(p *Path, now time.Time) {
	k := p.Kept
	if k == nil {
		return
	}
	k.Until = s.keptUntil(p, k) // the keep time in force may have changed
	if !now.Before(k.Until) {
		p.KeptReleased = now
		s.dropKept(p)
	}
}

// planEviction plans p, an Evicting path: it is served until its grace
// period ends, then stays loaded out of service (kept) until the longer of
// its grace period and keep time ends, then is forgotten.
func (s *State) planEviction(p *Path, now time.Time, later func(time.Time)) {
	if now.Before(p.Until) {
		later(p.Until)
		return
	}
	s.dropJob(p)
	if a := p.Active; a != nil {
		p.Active = nil
		if s.keeps(p, a) && now.Before(p.left.Add(s.KeepFor(p))) {
			s.putAside(p, a, p.left)
			return
		}
		s.retireAt(p.Name, a.ID, now)
		s.dropKept(p)
	} else if p.Kept != nil {
		// Its content, kept since its grace period ended (planKept
		// releases it when its time is over).
		return
	}
	s.pending = append(s.pending, Step{Kind: Forget, Path: p.Name})
	delete(s.paths, p.Name)
	s.pathsChanged()
}

// retire takes p's active content out of service now.
func (s *State) retire(p *Path, now time.Time) {
	s.retireAt(p.Name, p.Active.ID, now)
	p.Active = nil
}

func (s *State) retireAt(path string, content int64, at time.Time) {
	s.pending = append(s.pending, Step{Kind: Retire, Path: path, Content: content})
	s.retiring = append(s.retiring, Retiree{Path: path, Content: content, At: at, plan: s.plans + 1})
}

// applyConfig makes models the desired state: new paths load, changed
// ones reload, failed ones are retried, missing ones are evicted.
func (s *State) applyConfig(models []modelconfig.Model, now time.Time) {
	s.applied = true
	listed := make(map[string]bool, len(models))
	s.order, s.listed = s.order[:0], listed
	s.pathsChanged()
	for _, m := range models {
		listed[m.Path] = true
		s.order = append(s.order, m.Path)
		p := s.paths[m.Path]
		switch {
		case p == nil:
			p = &Path{Name: m.Path, Phase: Loading, Desired: m}
			if s.OnDemand(p) {
				p.Phase = Unloaded
			}
			s.paths[m.Path] = p
			s.pathsChanged()
			continue
		case p.Registered:
			// The config wins over a registration: its content replaces
			// the registered one (which serves until then).
			s.pending = append(s.pending, Step{Kind: Notify, Path: p.Name, Err: ErrManagedByConfig})
			s.dropJob(p)
			p.Registered = false
			s.pathsChanged()
			if p.Active == nil {
				p.Phase = Loading
			}
		case p.Phase == Evicting:
			// Listed again during its grace period: it stays. Listed again
			// after it, while its content is kept: Plan restores it.
			p.Phase, p.Until, p.left = Ready, time.Time{}, time.Time{}
			if p.Active == nil {
				p.Phase = Loading
			}
		}
		p.Desired = m
		p.blocked, p.fetchedSum = false, "" // the bucket may hold other files now
		if p.Job != nil && stale(m, p.Job.Meta) {
			s.dropJob(p)
		}
	}
	for name, p := range s.paths {
		if listed[name] || p.Registered || p.Phase == Evicting {
			continue
		}
		s.dropJob(p)
		if p.Active == nil {
			s.dropKept(p)
			s.pending = append(s.pending, Step{Kind: Forget, Path: name})
			delete(s.paths, name)
			s.pathsChanged()
			continue
		}
		p.Phase, p.Until, p.left = Evicting, now.Add(p.Active.Meta.EvictionGracePeriod), now
	}
}

// Plan returns the steps to take now and when to plan again. inflight
// reports the requests a content holds (sent and not yet answered).
//
// The steps must be executed in order before the next call. A content is
// released only by a call after the one that retired it, so that its
// in-flight count is read after it stopped taking requests: a plan that
// holds a Retire step (Retires reports it) must be followed at once by
// another Plan.
func (s *State) Plan(now time.Time, inflight func(content int64) int64) Plan {
	cur := s.plans + 1
	defer func() { s.plans = cur }()
	// Everything decided, by Apply before and by this plan now, is in
	// s.pending, in the order it was decided.
	var wake time.Time
	later := func(t time.Time) {
		if t.After(now) && (wake.IsZero() || t.Before(wake)) {
			wake = t
		}
	}
	for _, p := range s.sortedPaths() {
		name := p.Name
		s.planKept(p, now)
		if p.Phase == Evicting {
			s.planEviction(p, now, later)
			continue
		}
		s.planExpiry(p, now, later)
		if p.Phase == Expiring || p.Phase == Expired {
			continue
		}
		if p.Phase == Swapping && p.Job == nil {
			// The update it was loading is gone (the config went back to
			// what serves); a new one, if needed, starts below.
			p.Phase = Ready
		}
		if s.restorable(p) {
			s.restore(p, now)
			continue
		}
		reason := ReasonEager
		switch {
		case p.Active != nil:
			reason = ReasonUpdate
		case s.OnDemand(p):
			// Loaded only when a request waits, once its backoff is over.
			reason = ReasonDemand
			if p.Job == nil && p.Phase == Loading {
				p.Phase = Unloaded
			}
			if p.Job != nil || !p.Demanded {
				continue
			}
			if now.Before(p.RetryAt) {
				later(p.RetryAt)
				continue
			}
			p.blocked = false
		}
		if st := s.Held(p); st != nil && s.needsLoad(p) {
			// Loaded again once the stuck call returns (Freed plans again).
			s.holdBack(p, st)
			continue
		}
		if p.Job == nil && !p.blocked && s.needsLoad(p) {
			s.lastJob++
			p.Job = &Job{ID: s.lastJob, Meta: p.Desired, Stage: Fetching, Registered: p.Registered, Reason: reason, Started: now}
			p.Demanded = false
			s.pending = append(s.pending, Step{Kind: Fetch, Path: name, Job: p.Job.ID, Meta: p.Desired, Registered: p.Registered, Reason: reason})
			switch {
			case p.Active != nil:
				p.Phase = Swapping
			case reason == ReasonDemand, p.Phase == Unloaded: // an unloaded path turned eager loads too
				p.Phase = Loading
			}
		}
	}
	if s.IdleUnloadAfter > 0 {
		s.planIdle(now, inflight, later)
	}
	if s.Budget > 0 {
		s.planLoads(now, inflight, later)
	}
	for _, p := range s.paths {
		if p.Kept != nil {
			later(p.Kept.Until)
		}
	}
	waiting := s.retiring[:0]
	for _, r := range s.retiring {
		if r.plan >= cur {
			waiting = append(waiting, r) // retired by this very plan
			continue
		}
		if now.Before(r.At) {
			later(r.At)
			waiting = append(waiting, r)
			continue
		}
		if inflight(r.Content) > 0 {
			waiting = append(waiting, r) // the supervisor hears when it drains
			continue
		}
		s.pending = append(s.pending, Step{Kind: Release, Path: r.Path, Content: r.Content})
	}
	clear(s.retiring[len(waiting):])
	s.retiring = waiting
	steps := s.pending
	s.pending = nil
	return Plan{Steps: steps, Wake: wake}
}

// needsLoad reports whether p's active content, if any, is not what p asks for.
func (s *State) needsLoad(p *Path) bool {
	c := p.Active
	return c == nil || c.Broken || c.Registered != p.Registered || !satisfies(p.Desired, c)
}

// planExpiry applies the contracts' verdict to p: an expired path is
// unloaded after its grace period, and loaded again once it is not.
func (s *State) planExpiry(p *Path, now time.Time, later func(time.Time)) {
	// Contracts name configured models only; a registration is never theirs.
	expired := s.expired[p.Name] && !p.Registered
	switch {
	case expired && (p.Phase == Ready || p.Phase == Swapping) && p.Active != nil:
		s.dropJob(p)
		p.Phase, p.Until = Expiring, now.Add(p.Active.Meta.EvictionGracePeriod)
	case expired && (p.Phase == Loading || p.Phase == Failed || p.Phase == Unloaded):
		s.dropJob(p)
		p.Phase, p.Demanded = Expired, false
	case !expired && p.Phase == Expiring:
		p.Phase, p.Until = Ready, time.Time{}
	case !expired && p.Phase == Expired:
		// A contract needs it again: load it now, even if its last load
		// failed before it expired.
		p.Phase, p.blocked = Loading, false
	}
	if p.Phase == Expiring {
		if now.Before(p.Until) {
			later(p.Until)
		} else {
			s.retire(p, now)
			p.Phase, p.Until = Expired, time.Time{}
		}
	}
}

// sortedPaths lists the paths by name, so that plans are deterministic.
// The slice is shared until a path is added or removed (a fresh one is
// made then, so that a loop over the old one is not disturbed).
func (s *State) sortedPaths() []*Path {
	if s.sorted != nil {
		return s.sorted
	}
	sorted := slices.Collect(maps.Values(s.paths))
	slices.SortFunc(sorted, func(a, b *Path) int { return strings.Compare(a.Name, b.Name) })
	s.sorted = sorted
	return sorted
}

// budgetRecheck is how soon a load waiting for on-demand contents that
// hold requests to go idle (so that they may be unloaded) looks again.
const budgetRecheck = 100 * time.Millisecond

// Backoff is how long an on-demand path waits, after failures failed
// loads in a row, before a demand loads it again: 1s, doubling, at most
// a minute.
func Backoff(failures int) time.Duration {
	if failures <= 0 {
		return 0
	}
	return min(time.Second<<min(failures-1, 6), time.Minute)
}

// hold counts bytes against the budget for content (or job) id until it is Freed.
func (s *State) hold(id, bytes int64) {
	if s.held == nil {
		s.held = map[int64]int64{}
	}
	s.held[id] = bytes
}

// estimate is the memory job j of p is counted at before it measures its
// own, and at least after: what p's last load of the same content was
// counted at, else its files' size times MemoryFactor.
func (s *State) estimate(p *Path, j *Job) int64 {
	if p.Cost.Bytes > 0 && p.Cost.Checksum == j.Checksum {
		return p.Cost.Bytes
	}
	f := s.MemoryFactor
	if f <= 0 {
		f = 2
	}
	return int64(float64(j.Size) * f)
}

// Used is the memory the loaded contents and loads are counted at, in
// bytes: what the budget holds.
func (s *State) Used() int64 {
	used, _, _ := s.usage(time.Time{})
	return used
}

// usage returns the memory counted (used) and, of it, what contents out
// of service and on their way to release hold (leaving): it is given back
// without unloading anything else; graced is the part of leaving held
// past now, until a grace period ends.
func (s *State) usage(now time.Time) (used, leaving, graced int64) {
	if s.live == nil {
		s.live = map[int64]bool{}
	}
	live := s.live
	clear(live)
	for _, p := range s.paths {
		if p.Active != nil {
			live[p.Active.ID] = true
		}
		if p.Kept != nil {
			live[p.Kept.ID] = true
		}
		if p.Job != nil {
			live[p.Job.ID] = true
		}
	}
	for id := range s.stuck {
		// Given back when its call returns, which may be never: a load
		// does not wait for it.
		live[id] = true
	}
	for id, b := range s.held {
		used += b
		if !live[id] {
			leaving += b
		}
	}
	for _, r := range s.retiring {
		if now.Before(r.At) && !live[r.Content] {
			graced += s.held[r.Content]
		}
	}
	return used, leaving, graced
}

// planLoads starts, under a memory budget, the load of the fetched job
// that waited longest: one load (and warm-up) at a time, so that each
// measures its own memory, and only once the budget has room for it. When it has not, the
// least valuable idle on-demand contents are unloaded (to Unloaded) and
// the load starts once they are freed; when only contents holding
// requests stand in the way, it waits for them to go idle; when not even
// unloading every on-demand content would make room, it loads over the
// budget (Step.OverBudget), once the idle on-demand contents are unloaded
// and freed.
func (s *State) planLoads(now time.Time, inflight func(int64) int64, later func(time.Time)) {
	var next *Path
	for _, p := range s.paths {
		switch j := p.Job; {
		case j == nil:
		case j.Stage == LoadingFiles || j.Stage == WarmingUp:
			return // one at a time, warm-up included: it allocates too
		case j.Stage == WaitingToLoad && (next == nil || j.ID < next.Job.ID):
			next = p
		}
	}
	if next == nil {
		return
	}
	need := s.estimate(next, next.Job)
	used, leaving, graced := s.usage(now)
	soon := leaving - graced // released now, not at the end of a grace period
	over := false
	switch {
	case used+need <= s.Budget:
	case used-soon+need <= s.Budget:
		return // the room is on its way: Freed plans again
	default:
		free := used - soon
		var victims []*Path
		var busy int64
		for _, p := range s.unloadable(next, now) {
			if free+need <= s.Budget {
				break
			}
			if inflight(p.Active.ID) > 0 || p.Active.servedIn > s.plans {
				// Busy, or in service since this plan: the requests
				// waiting for it have not reached it yet.
				busy += p.Active.Bytes
				continue
			}
			victims = append(victims, p)
			free -= p.Active.Bytes
		}
		switch {
		case free+need <= s.Budget:
			for _, p := range victims {
				s.unload(p, now, ReasonBudget)
			}
			return // loads once they are freed
		case free-busy+need <= s.Budget:
			later(now.Add(budgetRecheck)) // room once the busy ones go idle
			return
		case used-leaving+need <= s.Budget:
			return // room once grace periods end (Plan wakes then)
		case len(victims) > 0 || soon > 0:
			// Past the budget whatever is unloaded: the idle ones go all
			// the same, and it loads once they are freed, so that it
			// passes the budget by no more than it must.
			for _, p := range victims {
				s.unload(p, now, ReasonBudget)
			}
			return
		}
		over = true
	}
	next.Job.Stage = LoadingFiles
	next.Job.Waited += max(now.Sub(next.Job.waitFrom), 0)
	s.pending = append(s.pending, Step{Kind: Load, Path: next.Name, Job: next.Job.ID, Meta: next.Job.Meta, OverBudget: over})
}

// unload takes p's idle on-demand content out of service, for reason
// (ReasonBudget, ReasonIdle): p is Unloaded again, its content released
// at once.
func (s *State) unload(p *Path, now time.Time, reason string) {
	id := p.Active.ID
	s.pending = append(s.pending, Step{Kind: Retire, Path: p.Name, Content: id, Reason: reason})
	s.retiring = append(s.retiring, Retiree{Path: p.Name, Content: id, At: now, plan: s.plans + 1})
	p.Active, p.Phase = nil, Unloaded
}

// planIdle unloads the on-demand contents that took no request (nor
// went into service) for IdleUnloadAfter and hold none now, and asks to
// plan again when the next one would be idle that long.
func (s *State) planIdle(now time.Time, inflight func(int64) int64, later func(time.Time)) {
	for _, p := range s.unloadable(nil, now) {
		at := s.lastUse(p.Active).Add(s.IdleUnloadAfter)
		switch {
		case now.Before(at):
			later(at)
		case inflight(p.Active.ID) > 0:
			later(now.Add(s.IdleUnloadAfter)) // busy: idle no sooner than that
		default:
			s.unload(p, now, ReasonIdle)
		}
	}
}

// lastUse is when c last took a request, or went into service if later.
func (s *State) lastUse(c *Content) time.Time {
	last := c.LoadedAt
	if s.LastUsed != nil {
		if t := s.LastUsed(c.ID); t.After(last) {
			last = t
		}
	}
	return last
}

// UnloadOrder lists the on-demand paths the budget may unload, least
// valuable first: the order it unloads the idle ones in.
func (s *State) UnloadOrder(now time.Time) []string {
	ps := s.unloadable(nil, now)
	out := make([]string, len(ps))
	for i, p := range ps {
		out[i] = p.Name
	}
	return out
}

// unloadable lists the paths, other than except, whose content the
// budget may unload (on-demand, serving, no load running, working),
// least valuable first: a content's value is what reloading it would
// cost (its load time plus a nanosecond a byte, for its files' reading
// and its memory) divided by the time since it last took a request (or
// went into service), so the least recently used go first unless they
// are dearer to bring back.
func (s *State) unloadable(except *Path, now time.Time) []*Path {
	type ranked struct {
		p     *Path
		value float64
	}
	var rs []ranked
	for _, p := range s.paths {
		if p == except || !s.OnDemand(p) || p.Phase != Ready || p.Job != nil || p.Active == nil || p.Active.Broken {
			continue
		}
		c := p.Active
		age := max(now.Sub(s.lastUse(c)), time.Millisecond)
		cost := max(c.LoadTime, time.Millisecond) + time.Duration(c.Bytes)
		rs = append(rs, ranked{p, float64(cost) / float64(age)})
	}
	slices.SortFunc(rs, func(a, b ranked) int {
		if c := cmp.Compare(a.value, b.value); c != 0 {
			return c
		}
		return strings.Compare(a.p.Name, b.p.Name)
	})
	out := make([]*Path, len(rs))
	for i, r := range rs {
		out[i] = r.p
	}
	return out
}
