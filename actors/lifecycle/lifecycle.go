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
package lifecycle

import (
	"errors"
	"fmt"
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
	// the next config poll (a retry may be running).
	Failed
	// Evicting: removed from the config; served until its grace period ends.
	Evicting
	// Expiring: every contract servable using it is expired; still served
	// (a contract can fall back to it) until its grace period ends.
	Expiring
	// Expired: unloaded because every contract servable using it is
	// expired; loaded again when one stops being expired.
	Expired
)

var phaseNames = [...]string{Loading: "loading", Ready: "ready", Swapping: "swapping", Failed: "failed",
	Evicting: "evicting", Expiring: "expiring", Expired: "expired"}

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
	// Until is when an Evicting or Expiring path's grace period ends.
	Until time.Time
	// LastErr and ErrAt describe the last failed load, checksum or warm-up.
	LastErr string
	ErrAt   time.Time
	// blocked holds back a new job after a failure until the next config poll.
	blocked bool
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
)

var stepNames = [...]string{Fetch: "fetch", Load: "load", WarmUp: "warm-up", Swap: "swap", Retire: "retire",
	Release: "release", Discard: "discard", Forget: "forget", Notify: "notify"}

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
	// Content is the content of Retire and Release.
	Content int64
	// Meta is what Fetch, Load and WarmUp load.
	Meta modelconfig.Model
	// Registered makes Fetch read the registration's files.
	Registered bool
	// Err is Notify's outcome (nil: the model is ready), and why Discard
	// drops a job that failed (nil for one that is no longer wanted).
	Err error
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
// "retire m/ @1", "notify m/: <err>".
func (s Step) String() string {
	switch s.Kind {
	case Retire, Release:
		return fmt.Sprintf("%v %s @%d", s.Kind, s.Path, s.Content)
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
	// Fetched: a job's files are in the cache with checksum Checksum, or Err.
	Fetched struct {
		Path     string
		Job      int64
		Checksum string
		Err      error
	}
	// Loaded: a job's runtime load ended.
	Loaded struct {
		Path string
		Job  int64
		Err  error
	}
	// Warmed: a job's warm-up ended.
	Warmed struct {
		Path string
		Job  int64
		Err  error
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

// State is the planner's whole view. The zero value is ready to use.
type State struct {
	paths map[string]*Path
	// order is the config order of the listed paths, for status.
	order []string
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
}

// Path returns the record of path, or nil.
func (s *State) Path(path string) *Path { return s.paths[path] }

// Paths returns every known path: the listed ones in config order, then
// the others (registrations, paths evicting after their removal) by name.
func (s *State) Paths() []*Path {
	out := make([]*Path, 0, len(s.paths))
	for _, name := range s.order {
		if p := s.paths[name]; p != nil && !p.Registered {
			out = append(out, p)
		}
	}
	var reg []*Path
	for _, p := range s.paths {
		if p.Registered || !slices.Contains(s.order, p.Name) {
			reg = append(reg, p)
		}
	}
	slices.SortFunc(reg, func(a, b *Path) int { return strings.Compare(a.Name, b.Name) })
	return append(out, reg...)
}

// Retiring lists the contents awaiting release.
func (s *State) Retiring() []Retiree { return slices.Clone(s.retiring) }

// Settled reports whether a config has been applied and no path is
// loading for the first time or retrying: the end of the first reconcile.
func (s *State) Settled() bool {
	if !s.applied {
		return false
	}
	for _, p := range s.paths {
		if p.Job != nil && p.Active == nil {
			return false
		}
	}
	return true
}

// Apply records ev at now. It returns an error only for a registration
// event the state refuses (ErrManagedByConfig, ErrAlreadyRegistered,
// ErrNotRegistered); the state is then unchanged.
func (s *State) Apply(ev Event, now time.Time) error {
	if s.paths == nil {
		s.paths = map[string]*Path{}
	}
	switch ev := ev.(type) {
	case ConfigApplied:
		s.applyConfig(ev.Models, now)
	case ConfigRejected:
		// The config in force stays in force; failed loads wait for a
		// config that reads.
	case Registered:
		if p := s.paths[ev.Meta.Path]; p != nil {
			if p.Registered {
				return ErrAlreadyRegistered
			}
			return ErrManagedByConfig
		}
		s.paths[ev.Meta.Path] = &Path{Name: ev.Meta.Path, Phase: Loading, Desired: ev.Meta, Registered: true}
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
		s.pending = append(s.pending, Step{Kind: Notify, Path: p.Name, Err: ErrDeletedWhileLoading}, Step{Kind: Forget, Path: p.Name})
		delete(s.paths, p.Name)
	case Fetched:
		if p, ok := s.jobAt(ev.Path, ev.Job, Fetching); ok {
			switch {
			case ev.Err != nil:
				s.fail(p, ev.Err, now)
			case p.Job.Meta.Checksum != "" && p.Job.Meta.Checksum != ev.Checksum:
				s.fail(p, fmt.Errorf("loading model %s: model rejected due to incorrect checksum: expected %s, actual %s", p.Name, p.Job.Meta.Checksum, ev.Checksum), now)
			default:
				p.Job.Checksum = ev.Checksum
				s.advance(p, LoadingFiles, Load)
			}
		}
	case Loaded:
		if p, ok := s.jobAt(ev.Path, ev.Job, LoadingFiles); ok {
			if ev.Err != nil {
				s.fail(p, ev.Err, now)
			} else {
				s.advance(p, WarmingUp, WarmUp)
			}
		}
	case Warmed:
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

// dropJob discards p's running job, if any.
func (s *State) dropJob(p *Path) {
	if p.Job != nil {
		s.pending = append(s.pending, Step{Kind: Discard, Path: p.Name, Job: p.Job.ID})
		p.Job = nil
	}
}

// fail records a failed job; the previous content, if any, keeps serving.
func (s *State) fail(p *Path, err error, now time.Time) {
	s.pending = append(s.pending, Step{Kind: Discard, Path: p.Name, Job: p.Job.ID, Err: err})
	p.Job = nil
	p.LastErr, p.ErrAt = err.Error(), now
	p.blocked = true
	if p.Registered {
		// A registration is not retried: its files are not kept.
		s.pending = append(s.pending, Step{Kind: Notify, Path: p.Name, Err: err})
		if p.Active == nil {
			s.pending = append(s.pending, Step{Kind: Forget, Path: p.Name})
			delete(s.paths, p.Name)
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

// swap puts p's warmed-up job into service; the old content retires after its grace period.
func (s *State) swap(p *Path, now time.Time) {
	j := p.Job
	p.Job = nil
	old := p.Active
	p.Active = &Content{ID: j.ID, Checksum: j.Checksum, Meta: j.Meta, Registered: j.Registered}
	p.LastErr, p.ErrAt = "", time.Time{}
	s.pending = append(s.pending, Step{Kind: Swap, Path: p.Name, Job: j.ID})
	if old != nil {
		s.retireAt(p.Name, old.ID, now.Add(old.Meta.EvictionGracePeriod))
	}
	if p.Registered {
		s.pending = append(s.pending, Step{Kind: Notify, Path: p.Name})
	}
	if p.Phase == Loading || p.Phase == Swapping || p.Phase == Failed {
		p.Phase = Ready
	}
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
	s.order = s.order[:0]
	for _, m := range models {
		listed[m.Path] = true
		s.order = append(s.order, m.Path)
		p := s.paths[m.Path]
		switch {
		case p == nil:
			s.paths[m.Path] = &Path{Name: m.Path, Phase: Loading, Desired: m}
			continue
		case p.Registered:
			// The config wins over a registration: its content replaces
			// the registered one (which serves until then).
			s.pending = append(s.pending, Step{Kind: Notify, Path: p.Name, Err: ErrManagedByConfig})
			s.dropJob(p)
			p.Registered = false
			if p.Active == nil {
				p.Phase = Loading
			}
		case p.Phase == Evicting:
			// Listed again during its grace period: it stays.
			p.Phase, p.Until = Ready, time.Time{}
		}
		p.Desired = m
		p.blocked = false
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
			s.pending = append(s.pending, Step{Kind: Forget, Path: name})
			delete(s.paths, name)
			continue
		}
		p.Phase, p.Until = Evicting, now.Add(p.Active.Meta.EvictionGracePeriod)
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
	for _, name := range s.sortedPaths() {
		p := s.paths[name]
		switch p.Phase {
		case Evicting:
			if now.Before(p.Until) {
				later(p.Until)
				continue
			}
			s.retire(p, now)
			s.dropJob(p)
			s.pending = append(s.pending, Step{Kind: Forget, Path: name})
			delete(s.paths, name)
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
		if p.Job == nil && !p.blocked && s.needsLoad(p) {
			s.lastJob++
			p.Job = &Job{ID: s.lastJob, Meta: p.Desired, Stage: Fetching, Registered: p.Registered}
			s.pending = append(s.pending, Step{Kind: Fetch, Path: name, Job: p.Job.ID, Meta: p.Desired, Registered: p.Registered})
			if p.Active != nil {
				p.Phase = Swapping
			}
		}
	}
	kept := s.retiring[:0]
	for _, r := range s.retiring {
		if r.plan >= cur {
			kept = append(kept, r) // retired by this very plan
			continue
		}
		if now.Before(r.At) {
			later(r.At)
			kept = append(kept, r)
			continue
		}
		if inflight(r.Content) > 0 {
			kept = append(kept, r) // the supervisor hears when it drains
			continue
		}
		s.pending = append(s.pending, Step{Kind: Release, Path: r.Path, Content: r.Content})
	}
	clear(s.retiring[len(kept):])
	s.retiring = kept
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
	case expired && (p.Phase == Loading || p.Phase == Failed):
		s.dropJob(p)
		p.Phase = Expired
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

// sortedPaths lists the path names in a fixed order, so that plans are deterministic.
func (s *State) sortedPaths() []string {
	names := make([]string, 0, len(s.paths))
	for name := range s.paths {
		names = append(names, name)
	}
	slices.Sort(names)
	return names
}
