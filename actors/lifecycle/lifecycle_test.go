package lifecycle

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/groveml/grove/conf/modelconfig"
)

// The planner's rules as tables. Each case is a script of ticks: at a
// time (since t0), an event (or none: just plan), then the steps the plan
// must hold, in order, and optionally the phases and the wake-up time.

var t0 = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

const (
	sumA = "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"
	sumB = "bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb"
	sumX = "9999999999999999999999999999999999999999999999999999999999999999"
)

type tick struct {
	at    time.Duration
	ev    Event
	steps string // the plan's steps, joined by "; "
	// phases, if set, is "path=phase ..." for every known path, in Paths
	// order, or "none" for no path at all.
	phases string
	// wake, if set, is when the plan asks to run again (since t0); -1: never.
	wake time.Duration
	// err is what Apply must return.
	err error
	// lastErr, if set, must be a substring of the path's LastErr ("path: text").
	lastErr string
	// inflight sets the requests contents hold from this tick on.
	inflight map[int64]int64
	// used sets when contents last took a request (since t0).
	used map[int64]time.Duration
}

func model(path, sum string, graceMs int) modelconfig.Model {
	return modelconfig.Model{Path: path, Checksum: sum, EvictionGracePeriod: time.Duration(graceMs) * time.Millisecond}
}

func cfg(ms ...modelconfig.Model) ConfigApplied { return ConfigApplied{Models: ms} }

// kept is model with keep_previous_for_ms set to keepMs.
func kept(path, sum string, graceMs, keepMs int) modelconfig.Model {
	m := model(path, sum, graceMs)
	m.KeepPreviousFor = new(time.Duration(keepMs) * time.Millisecond)
	return m
}

// loadOK is the ticks that take job of path from fetch to swap, starting after the fetch step.
func loadOK(at time.Duration, path string, job int64, sum, swapSteps string) []tick {
	return []tick{
		{at: at, ev: Fetched{Path: path, Job: job, Checksum: sum}, steps: fmt.Sprintf("load %s #%d", path, job)},
		{at: at, ev: Loaded{Path: path, Job: job}, steps: fmt.Sprintf("warm-up %s #%d", path, job)},
		{at: at, ev: Warmed{Path: path, Job: job}, steps: swapSteps},
	}
}

func script(parts ...any) []tick {
	var out []tick
	for _, p := range parts {
		switch p := p.(type) {
		case tick:
			out = append(out, p)
		case []tick:
			out = append(out, p...)
		}
	}
	return out
}

func run(t *testing.T, ticks []tick) *State {
	t.Helper()
	return runWith(t, 0, ticks)
}

// runWith runs ticks with the server's keep time set to keep.
func runWith(t *testing.T, keep time.Duration, ticks []tick) *State {
	t.Helper()
	return runState(t, &State{KeepPreviousFor: keep}, ticks)
}

// runState runs ticks on s; the contents' last requests are the ticks'
// used (LastUsed).
func runState(t *testing.T, s *State, ticks []tick) *State {
	t.Helper()
	inflight := map[int64]int64{}
	used := map[int64]time.Time{}
	s.LastUsed = func(c int64) time.Time { return used[c] }
	for i, tk := range ticks {
		now := t0.Add(tk.at)
		for k, v := range tk.inflight {
			inflight[k] = v
		}
		for k, v := range tk.used {
			used[k] = t0.Add(v)
		}
		if tk.ev != nil {
			if err := s.Apply(tk.ev, now); !errors.Is(err, tk.err) {
				t.Fatalf("tick %d (%T): Apply error %v, want %v", i, tk.ev, err, tk.err)
			}
		}
		// As the supervisor does: a plan that retires a content is
		// followed at once by another, which may release it.
		var got []string
		var p Plan
		for again := true; again; again = p.Retires() {
			p = s.Plan(now, func(c int64) int64 { return inflight[c] })
			for _, st := range p.Steps {
				got = append(got, st.String())
			}
		}
		if g := strings.Join(got, "; "); g != tk.steps {
			t.Fatalf("tick %d (%T at %v): steps\n got  %q\n want %q", i, tk.ev, tk.at, g, tk.steps)
		}
		if tk.phases != "" {
			var ph []string
			for _, p := range s.Paths() {
				ph = append(ph, p.Name+"="+p.Phase.String())
			}
			g := strings.Join(ph, " ")
			if g == "" {
				g = "none"
			}
			if g != tk.phases {
				t.Fatalf("tick %d: phases %q, want %q", i, g, tk.phases)
			}
		}
		switch {
		case tk.wake == -1 && !p.Wake.IsZero():
			t.Fatalf("tick %d: wake at %v, want none", i, p.Wake.Sub(t0))
		case tk.wake > 0 && !p.Wake.Equal(t0.Add(tk.wake)):
			t.Fatalf("tick %d: wake %v, want %v", i, p.Wake.Sub(t0), tk.wake)
		}
		if tk.lastErr != "" {
			path, want, _ := strings.Cut(tk.lastErr, ": ")
			p := s.Path(path)
			if p == nil || !strings.Contains(p.LastErr, want) {
				t.Fatalf("tick %d: %s last error %+v, want it to contain %q", i, path, p, want)
			}
		}
	}
	return s
}

func TestPlannerLifecycleRules(t *testing.T) {
	sec := time.Second
	for _, tc := range []struct {
		name  string
		ticks []tick
	}{
		{"a new entry is fetched, verified, loaded, warmed up, then routed", script(
			tick{ev: cfg(model("m/", sumA, 0)), steps: "fetch m/ #1", phases: "m/=loading"},
			loadOK(0, "m/", 1, sumA, "swap m/ #1"),
			tick{phases: "m/=ready", wake: -1},
		)},
		{"an entry without checksum loads whatever the bucket holds", script(
			tick{ev: cfg(model("m", "", 0)), steps: "fetch m #1"},
			loadOK(0, "m", 1, sumX, "swap m #1"),
			tick{phases: "m=ready"},
		)},
		{"a removed entry without grace period is unloaded at once", script(
			tick{ev: cfg(model("m/", sumA, 0)), steps: "fetch m/ #1"},
			loadOK(0, "m/", 1, sumA, "swap m/ #1"),
			tick{at: sec, ev: cfg(), steps: "retire m/ @1; forget m/; release m/ @1", phases: "none"},
		)},
		{"a removed entry serves for its grace period, then is released once its requests are answered", script(
			tick{ev: cfg(model("m/", sumA, 60_000)), steps: "fetch m/ #1"},
			loadOK(0, "m/", 1, sumA, "swap m/ #1"),
			tick{at: sec, ev: cfg(), steps: "", phases: "m/=evicting", wake: 61 * sec},
			tick{at: 30 * sec, steps: "", phases: "m/=evicting", wake: 61 * sec},
			tick{at: 61 * sec, inflight: map[int64]int64{1: 2}, steps: "retire m/ @1; forget m/", phases: "none", wake: -1},
			tick{at: 62 * sec, steps: ""},
			tick{at: 63 * sec, inflight: map[int64]int64{1: 0}, steps: "release m/ @1"},
		)},
		{"an in-place update loads beside the old content and swaps without a gap", script(
			tick{ev: cfg(model("m/", sumA, 5_000)), steps: "fetch m/ #1"},
			loadOK(0, "m/", 1, sumA, "swap m/ #1"),
			tick{at: sec, ev: cfg(model("m/", sumB, 0)), steps: "fetch m/ #2", phases: "m/=swapping"},
			loadOK(2*sec, "m/", 2, sumB, "swap m/ #2; retire m/ @1"),
			tick{at: 2 * sec, phases: "m/=ready", wake: 7 * sec},
			tick{at: 7 * sec, steps: "release m/ @1"},
		)},
		{"a checksum mismatch on update keeps the old content serving", script(
			tick{ev: cfg(model("m/", sumA, 0)), steps: "fetch m/ #1"},
			loadOK(0, "m/", 1, sumA, "swap m/ #1"),
			tick{at: sec, ev: cfg(model("m/", sumB, 0)), steps: "fetch m/ #2"},
			tick{at: sec, ev: Fetched{Path: "m/", Job: 2, Checksum: sumX}, steps: "discard m/ #2", phases: "m/=ready",
				lastErr: "m/: incorrect checksum: expected " + sumB + ", actual " + sumX},
		)},
		{"a checksum mismatch on first load leaves the path failed", script(
			tick{ev: cfg(model("m/", sumA, 0)), steps: "fetch m/ #1"},
			tick{ev: Fetched{Path: "m/", Job: 1, Checksum: sumX}, steps: "discard m/ #1", phases: "m/=failed"},
		)},
		{"a failing warm-up rejects the content and keeps the old one", script(
			tick{ev: cfg(model("m/", sumA, 0)), steps: "fetch m/ #1"},
			loadOK(0, "m/", 1, sumA, "swap m/ #1"),
			tick{at: sec, ev: cfg(model("m/", sumB, 0)), steps: "fetch m/ #2"},
			tick{at: sec, ev: Fetched{Path: "m/", Job: 2, Checksum: sumB}, steps: "load m/ #2"},
			tick{at: sec, ev: Loaded{Path: "m/", Job: 2}, steps: "warm-up m/ #2"},
			tick{at: sec, ev: Warmed{Path: "m/", Job: 2, Err: errors.New("warm-up request 0: bad shape")}, steps: "discard m/ #2",
				phases: "m/=ready", lastErr: "m/: bad shape"},
		)},
		{"a failing load on first load leaves the path failed", script(
			tick{ev: cfg(model("m/", sumA, 0)), steps: "fetch m/ #1"},
			tick{ev: Fetched{Path: "m/", Job: 1, Checksum: sumA}, steps: "load m/ #1"},
			tick{ev: Loaded{Path: "m/", Job: 1, Err: errors.New("not a TorchScript archive")}, steps: "discard m/ #1", phases: "m/=failed"},
		)},
		{"metadata changed with an unchanged checksum is ignored, and the loaded grace period applies", script(
			tick{ev: cfg(model("m/", sumA, 10_000)), steps: "fetch m/ #1"},
			loadOK(0, "m/", 1, sumA, "swap m/ #1"),
			tick{at: sec, ev: cfg(modelconfig.Model{Path: "m/", Checksum: sumA, WarmUpJSON: `{"request":[]}`, EvictionGracePeriod: time.Hour}), steps: "", phases: "m/=ready"},
			tick{at: 2 * sec, ev: cfg(), steps: "", wake: 12 * sec},
		)},
		{"an entry without checksum is not reloaded when the bucket changes", script(
			tick{ev: cfg(model("m/", "", 0)), steps: "fetch m/ #1"},
			loadOK(0, "m/", 1, sumA, "swap m/ #1"),
			tick{at: sec, ev: cfg(model("m/", "", 0)), steps: ""},
		)},
		{"changed serving options reload the model like an update", script(
			tick{ev: cfg(model("m/", sumA, 0)), steps: "fetch m/ #1"},
			loadOK(0, "m/", 1, sumA, "swap m/ #1"),
			tick{at: sec, ev: cfg(modelconfig.Model{Path: "m/", Checksum: sumA, Serving: modelconfig.ServingOptions{Replicas: 2}}), steps: "fetch m/ #2", phases: "m/=swapping"},
			loadOK(sec, "m/", 2, sumA, "swap m/ #2; retire m/ @1; release m/ @1"),
		)},
		{"a changed declared signature reloads the model like an update", script(
			tick{ev: cfg(model("m/", sumA, 0)), steps: "fetch m/ #1"},
			loadOK(0, "m/", 1, sumA, "swap m/ #1"),
			tick{at: sec, ev: cfg(modelconfig.Model{Path: "m/", Checksum: sumA, Signature: modelconfig.Signature{
				Inputs: []modelconfig.TensorSignature{{Name: "x", Datatype: "FP32", Shape: []int64{-1, 4}}}}}), steps: "fetch m/ #2", phases: "m/=swapping"},
			loadOK(sec, "m/", 2, sumA, "swap m/ #2; retire m/ @1; release m/ @1"),
		)},
		{"an entry listed again during its grace period stays, and is not evicted", script(
			tick{ev: cfg(model("m/", sumA, 60_000)), steps: "fetch m/ #1"},
			loadOK(0, "m/", 1, sumA, "swap m/ #1"),
			tick{at: sec, ev: cfg(), steps: "", phases: "m/=evicting"},
			tick{at: 2 * sec, ev: cfg(model("m/", sumA, 60_000)), steps: "", phases: "m/=ready", wake: -1},
			tick{at: 61 * sec, steps: "", phases: "m/=ready"},
		)},
		{"an entry listed again with a new checksum during its grace period updates in place", script(
			tick{ev: cfg(model("m/", sumA, 60_000)), steps: "fetch m/ #1"},
			loadOK(0, "m/", 1, sumA, "swap m/ #1"),
			tick{at: sec, ev: cfg(), steps: ""},
			tick{at: 2 * sec, ev: cfg(model("m/", sumB, 0)), steps: "fetch m/ #2", phases: "m/=swapping"},
		)},
		{"repeated failures are retried on later polls, not before", script(
			tick{ev: cfg(model("m/", sumA, 0)), steps: "fetch m/ #1"},
			tick{ev: Fetched{Path: "m/", Job: 1, Err: errors.New("bucket unreachable")}, steps: "discard m/ #1", phases: "m/=failed"},
			tick{at: sec, steps: "", phases: "m/=failed"},
			tick{at: 5 * sec, ev: cfg(model("m/", sumA, 0)), steps: "fetch m/ #2", phases: "m/=failed"},
			tick{at: 5 * sec, ev: Fetched{Path: "m/", Job: 2, Err: errors.New("bucket unreachable")}, steps: "discard m/ #2"},
			tick{at: 10 * sec, ev: cfg(model("m/", sumA, 0)), steps: "fetch m/ #3"},
			loadOK(10*sec, "m/", 3, sumA, "swap m/ #3"),
			tick{at: 10 * sec, phases: "m/=ready"},
		)},
		{"a model over the size limit fails with the fetch's reason", script(
			tick{ev: cfg(model("big/", sumA, 0)), steps: "fetch big/ #1"},
			tick{ev: Fetched{Path: "big/", Job: 1, Err: errors.New("model big/ is 3 GiB, over max_model_bytes (2 GiB)")}, steps: "discard big/ #1",
				phases: "big/=failed", lastErr: "big/: over max_model_bytes"},
		)},
		{"a broken config keeps the previous one in force", script(
			tick{ev: cfg(model("m/", sumA, 0)), steps: "fetch m/ #1"},
			loadOK(0, "m/", 1, sumA, "swap m/ #1"),
			tick{at: sec, ev: ConfigRejected{Err: errors.New("invalid JSON at line 3")}, steps: "", phases: "m/=ready", wake: -1},
		)},
		{"a config change during a load restarts the load with the new checksum", script(
			tick{ev: cfg(model("m/", sumA, 0)), steps: "fetch m/ #1"},
			tick{ev: cfg(model("m/", sumB, 0)), steps: "discard m/ #1; fetch m/ #2"},
			tick{ev: Fetched{Path: "m/", Job: 1, Checksum: sumA}, steps: "discard m/ #1"},
			loadOK(0, "m/", 2, sumB, "swap m/ #2"),
		)},
		{"an entry removed while it loads is forgotten and its load discarded", script(
			tick{ev: cfg(model("m/", sumA, 0)), steps: "fetch m/ #1"},
			tick{ev: cfg(), steps: "discard m/ #1; forget m/", phases: "none"},
			tick{ev: Fetched{Path: "m/", Job: 1, Checksum: sumA}, steps: "discard m/ #1"},
		)},
		{"an update removed from the config stops loading and the old content is evicted", script(
			tick{ev: cfg(model("m/", sumA, 0)), steps: "fetch m/ #1"},
			loadOK(0, "m/", 1, sumA, "swap m/ #1"),
			tick{ev: cfg(model("m/", sumB, 0)), steps: "fetch m/ #2"},
			tick{ev: cfg(), steps: "discard m/ #2; retire m/ @1; forget m/; release m/ @1"},
		)},
		{"a crashed model that cannot reload from the cache is loaded afresh beside it", script(
			tick{ev: cfg(model("m/", sumA, 0)), steps: "fetch m/ #1"},
			loadOK(0, "m/", 1, sumA, "swap m/ #1"),
			tick{at: sec, ev: ReloadFailed{Path: "m/", Content: 1, Err: errors.New("cache file gone")}, steps: "fetch m/ #2", phases: "m/=swapping", lastErr: "m/: could not be reloaded"},
			loadOK(sec, "m/", 2, sumA, "swap m/ #2; retire m/ @1; release m/ @1"),
		)},
		{"a crash report for replaced content changes nothing", script(
			tick{ev: cfg(model("m/", sumA, 0)), steps: "fetch m/ #1"},
			loadOK(0, "m/", 1, sumA, "swap m/ #1"),
			tick{ev: ReloadFailed{Path: "m/", Content: 7, Err: errors.New("x")}, steps: ""},
		)},
		{"contracts that expire a model unload it after its grace period and load it again when they stop", script(
			tick{ev: cfg(model("m/", sumA, 2_000)), steps: "fetch m/ #1"},
			loadOK(0, "m/", 1, sumA, "swap m/ #1"),
			tick{at: sec, ev: ContractsExpired{Paths: map[string]bool{"m/": true}}, steps: "", phases: "m/=expiring", wake: 3 * sec},
			tick{at: 3 * sec, steps: "retire m/ @1; release m/ @1", phases: "m/=expired", wake: -1},
			tick{at: 4 * sec, ev: ContractsExpired{}, steps: "fetch m/ #2", phases: "m/=loading"},
			loadOK(4*sec, "m/", 2, sumA, "swap m/ #2"),
		)},
		{"an expiring model that a contract needs again stays loaded", script(
			tick{ev: cfg(model("m/", sumA, 2_000)), steps: "fetch m/ #1"},
			loadOK(0, "m/", 1, sumA, "swap m/ #1"),
			tick{at: sec, ev: ContractsExpired{Paths: map[string]bool{"m/": true}}, steps: "", phases: "m/=expiring"},
			tick{at: 2 * sec, ev: ContractsExpired{}, steps: "", phases: "m/=ready", wake: -1},
		)},
		{"an update the config takes back before it loads leaves the path ready", script(
			tick{ev: cfg(model("m/", sumA, 0)), steps: "fetch m/ #1"},
			loadOK(0, "m/", 1, sumA, "swap m/ #1"),
			tick{at: sec, ev: cfg(model("m/", sumB, 0)), steps: "fetch m/ #2", phases: "m/=swapping"},
			tick{at: sec, ev: cfg(model("m/", sumA, 0)), steps: "discard m/ #2", phases: "m/=ready"},
			tick{at: sec, ev: Fetched{Path: "m/", Job: 2, Checksum: sumB}, steps: "discard m/ #2", phases: "m/=ready"},
		)},
		{"a failed model that contracts expire and then need again loads at once", script(
			tick{ev: cfg(model("m/", sumA, 0)), steps: "fetch m/ #1"},
			tick{ev: Fetched{Path: "m/", Job: 1, Err: errors.New("bucket unreachable")}, steps: "discard m/ #1", phases: "m/=failed"},
			tick{at: sec, ev: ContractsExpired{Paths: map[string]bool{"m/": true}}, steps: "", phases: "m/=expired"},
			tick{at: 2 * sec, ev: ContractsExpired{}, steps: "fetch m/ #2", phases: "m/=loading"},
		)},
		{"contracts never expire a registration", script(
			tick{ev: Registered{Meta: model("r/", "", 0)}, steps: "fetch r/ #1"},
			loadOK(0, "r/", 1, sumA, "swap r/ #1; notify r/: ok"),
			tick{at: sec, ev: ContractsExpired{Paths: map[string]bool{"r/": true}}, steps: "", phases: "r/=ready", wake: -1},
		)},
		{"a registration loads from its files, notifies its caller, and is never evicted by the config", script(
			tick{ev: cfg(), steps: ""},
			tick{ev: Registered{Meta: model("r/", "", 0)}, steps: "fetch r/ #1", phases: "r/=loading"},
			loadOK(0, "r/", 1, sumA, "swap r/ #1; notify r/: ok"),
			tick{at: sec, ev: cfg(model("m/", sumA, 0)), steps: "fetch m/ #2", phases: "m/=loading r/=ready"},
		)},
		{"a failed registration is reported and forgotten, not retried", script(
			tick{ev: Registered{Meta: model("r/", "", 0)}, steps: "fetch r/ #1"},
			tick{ev: Fetched{Path: "r/", Job: 1, Checksum: sumA}, steps: "load r/ #1"},
			tick{ev: Loaded{Path: "r/", Job: 1, Err: errors.New("no runtime")}, steps: "discard r/ #1; notify r/: no runtime; forget r/", phases: "none"},
		)},
		{"registering a configured or registered path is refused", script(
			tick{ev: cfg(model("m/", sumA, 0)), steps: "fetch m/ #1"},
			tick{ev: Registered{Meta: model("m/", "", 0)}, err: ErrManagedByConfig, steps: ""},
			tick{ev: Registered{Meta: model("r/", "", 0)}, steps: "fetch r/ #2"},
			tick{ev: Registered{Meta: model("r/", "", 0)}, err: ErrAlreadyRegistered, steps: ""},
			tick{ev: Unregistered{Path: "m/"}, err: ErrManagedByConfig, steps: ""},
			tick{ev: Unregistered{Path: "x/"}, err: ErrNotRegistered, steps: ""},
		)},
		{"the config wins over a registration of the same path", script(
			tick{ev: Registered{Meta: model("m/", "", 0)}, steps: "fetch m/ #1"},
			loadOK(0, "m/", 1, sumB, "swap m/ #1; notify m/: ok"),
			tick{at: sec, ev: cfg(model("m/", "", 0)), steps: "notify m/: " + ErrManagedByConfig.Error() + "; fetch m/ #2", phases: "m/=swapping"},
			loadOK(sec, "m/", 2, sumA, "swap m/ #2; retire m/ @1; release m/ @1"),
		)},
		{"deleting a registration retires it at once", script(
			tick{ev: Registered{Meta: model("r/", "", 0)}, steps: "fetch r/ #1"},
			loadOK(0, "r/", 1, sumA, "swap r/ #1; notify r/: ok"),
			tick{ev: Unregistered{Path: "r/"}, inflight: map[int64]int64{1: 1}, steps: "retire r/ @1; notify r/: deleted while loading; forget r/", phases: "none"},
			tick{inflight: map[int64]int64{1: 0}, steps: "release r/ @1"},
		)},
		{"deleting a registration that is still loading tells its caller", script(
			tick{ev: Registered{Meta: model("r/", "", 0)}, steps: "fetch r/ #1"},
			tick{ev: Unregistered{Path: "r/"}, steps: "discard r/ #1; notify r/: deleted while loading; forget r/"},
		)},
	} {
		t.Run(tc.name, func(t *testing.T) { run(t, tc.ticks) })
	}
}

func TestPlannerSettlesOnceFirstLoadsEnd(t *testing.T) {
	var s State
	never := func(int64) int64 { return 0 }
	if s.Settled() {
		t.Fatal("settled before any config")
	}
	_ = s.Apply(cfg(model("a/", "", 0), model("b/", "", 0)), t0)
	s.Plan(t0, never)
	if s.Settled() {
		t.Fatal("settled while both models load")
	}
	_ = s.Apply(Fetched{Path: "a/", Job: 1, Err: errors.New("x")}, t0)
	s.Plan(t0, never)
	for _, ev := range []Event{Fetched{Path: "b/", Job: 2, Checksum: sumA}, Loaded{Path: "b/", Job: 2}} {
		_ = s.Apply(ev, t0)
		s.Plan(t0, never)
	}
	if s.Settled() {
		t.Fatal("settled while b/ warms up")
	}
	_ = s.Apply(Warmed{Path: "b/", Job: 2}, t0)
	s.Plan(t0, never)
	if !s.Settled() {
		t.Fatal("not settled once a/ failed and b/ is ready")
	}
}

func TestPhaseAndStepNames(t *testing.T) {
	for p := Loading; p <= Expired; p++ {
		if strings.HasPrefix(p.String(), "phase(") {
			t.Errorf("phase %d has no name", p)
		}
	}
	if Phase(0).String() != "phase(0)" || StepKind(0).String() != "step(0)" {
		t.Error("zero values are named")
	}
	for k := Fetch; k <= Restore; k++ {
		if strings.HasPrefix(k.String(), "step(") {
			t.Errorf("step %d has no name", k)
		}
	}
}

// The keep rules: with a keep time, the content an update replaced stays
// loaded out of service (retired, not released) and going back to it is a
// Restore step, with no fetch. tick.kept, checked through keptOf, names
// the kept content and its release time.
func TestPlannerKeepsThePreviousContentAndRestoresIt(t *testing.T) {
	sec, min := time.Second, time.Minute
	for _, tc := range []struct {
		name  string
		keep  time.Duration // the server's keep_previous_for
		ticks []tick
		// kept is checked after the last tick: "path=@id until" or "path=none".
		kept string
	}{
		{"an update keeps the previous content loaded until its keep time ends, then releases it", 10 * min, script(
			tick{ev: cfg(model("m/", sumA, 5_000)), steps: "fetch m/ #1"},
			loadOK(0, "m/", 1, sumA, "swap m/ #1"),
			tick{at: sec, ev: cfg(model("m/", sumB, 0)), steps: "fetch m/ #2", phases: "m/=swapping"},
			loadOK(2*sec, "m/", 2, sumB, "swap m/ #2; retire m/ @1"),
			tick{at: 2 * sec, phases: "m/=ready", wake: 2*sec + 10*min},
			tick{at: 7 * sec, steps: "", wake: 2*sec + 10*min},
			tick{at: 2*sec + 10*min, steps: "release m/ @1", wake: -1},
		), "m/=none"},
		{"going back to the old checksum restores the kept content with no fetch, and keeps the one it replaces", 10 * min, script(
			tick{ev: cfg(model("m/", sumA, 0)), steps: "fetch m/ #1"},
			loadOK(0, "m/", 1, sumA, "swap m/ #1"),
			tick{at: sec, ev: cfg(model("m/", sumB, 0)), steps: "fetch m/ #2"},
			loadOK(sec, "m/", 2, sumB, "swap m/ #2; retire m/ @1"),
			tick{at: min, ev: cfg(model("m/", sumA, 0)), steps: "restore m/ @1; retire m/ @2", phases: "m/=ready", wake: 11 * min},
			tick{at: 2 * min, ev: cfg(model("m/", sumB, 0)), steps: "restore m/ @2; retire m/ @1", phases: "m/=ready", wake: 12 * min},
		), "m/=@1 " + (12 * min).String()},
		{"going back to the old serving options restores the kept content", 10 * min, script(
			tick{ev: cfg(model("m/", "", 0)), steps: "fetch m/ #1"},
			loadOK(0, "m/", 1, sumA, "swap m/ #1"),
			tick{at: sec, ev: cfg(modelconfig.Model{Path: "m/", Serving: modelconfig.ServingOptions{Replicas: 2}}), steps: "fetch m/ #2"},
			loadOK(sec, "m/", 2, sumA, "swap m/ #2; retire m/ @1"),
			tick{at: 2 * sec, ev: cfg(model("m/", "", 0)), steps: "restore m/ @1; retire m/ @2"},
		), "m/=@2 " + (2*sec + 10*min).String()},
		{"a kept content whose time ends is released only once its requests are answered", min, script(
			tick{ev: cfg(model("m/", sumA, 0)), steps: "fetch m/ #1"},
			loadOK(0, "m/", 1, sumA, "swap m/ #1"),
			tick{ev: cfg(model("m/", sumB, 0)), steps: "fetch m/ #2"},
			loadOK(0, "m/", 2, sumB, "swap m/ #2; retire m/ @1"),
			tick{at: min, inflight: map[int64]int64{1: 1}, steps: "", wake: -1},
			tick{at: min + sec, inflight: map[int64]int64{1: 0}, steps: "release m/ @1"},
		), "m/=none"},
		{"a second update releases the content kept before and keeps the one it replaces", 10 * min, script(
			tick{ev: cfg(model("m/", sumA, 0)), steps: "fetch m/ #1"},
			loadOK(0, "m/", 1, sumA, "swap m/ #1"),
			tick{at: sec, ev: cfg(model("m/", sumB, 0)), steps: "fetch m/ #2"},
			loadOK(sec, "m/", 2, sumB, "swap m/ #2; retire m/ @1"),
			tick{at: 2 * sec, ev: cfg(model("m/", sumX, 0)), steps: "fetch m/ #3"},
			loadOK(2*sec, "m/", 3, sumX, "swap m/ #3; retire m/ @2; release m/ @1"),
		), "m/=@2 " + (2*sec + 10*min).String()},
		{"a content kept from before waits for its grace period to be released when replaced", 10 * min, script(
			tick{ev: cfg(model("m/", sumA, 60_000)), steps: "fetch m/ #1"},
			loadOK(0, "m/", 1, sumA, "swap m/ #1"),
			tick{at: sec, ev: cfg(model("m/", sumB, 0)), steps: "fetch m/ #2"},
			loadOK(sec, "m/", 2, sumB, "swap m/ #2; retire m/ @1"),
			tick{at: 2 * sec, ev: cfg(model("m/", sumX, 0)), steps: "fetch m/ #3"},
			loadOK(2*sec, "m/", 3, sumX, "swap m/ #3; retire m/ @2"),
			tick{at: 2 * sec, steps: "", wake: 61 * sec},
			tick{at: 61 * sec, steps: "release m/ @1"},
		), "m/=@2 " + (2*sec + 10*min).String()},
		{"a rollback while a newer update loads discards that load and restores at once", 10 * min, script(
			tick{ev: cfg(model("m/", sumA, 0)), steps: "fetch m/ #1"},
			loadOK(0, "m/", 1, sumA, "swap m/ #1"),
			tick{at: sec, ev: cfg(model("m/", sumB, 0)), steps: "fetch m/ #2"},
			loadOK(sec, "m/", 2, sumB, "swap m/ #2; retire m/ @1"),
			tick{at: 2 * sec, ev: cfg(model("m/", sumX, 0)), steps: "fetch m/ #3", phases: "m/=swapping"},
			tick{at: 3 * sec, ev: Fetched{Path: "m/", Job: 3, Checksum: sumX}, steps: "load m/ #3"},
			tick{at: 4 * sec, ev: cfg(model("m/", sumA, 0)), steps: "discard m/ #3; restore m/ @1; retire m/ @2", phases: "m/=ready"},
			tick{at: 5 * sec, ev: Loaded{Path: "m/", Job: 3}, steps: "discard m/ #3", phases: "m/=ready"},
		), "m/=@2 " + (4*sec + 10*min).String()},
		{"the entry's keep_previous_for_ms overrides the server's, and 0 turns keeping off", 10 * min, script(
			tick{ev: cfg(kept("m/", sumA, 0, 0), kept("n/", sumA, 0, 30_000)), steps: "fetch m/ #1; fetch n/ #2"},
			loadOK(0, "m/", 1, sumA, "swap m/ #1"),
			loadOK(0, "n/", 2, sumA, "swap n/ #2"),
			tick{at: sec, ev: cfg(kept("m/", sumB, 0, 0), kept("n/", sumB, 0, 30_000)), steps: "fetch m/ #3; fetch n/ #4"},
			loadOK(sec, "m/", 3, sumB, "swap m/ #3; retire m/ @1; release m/ @1"),
			loadOK(sec, "n/", 4, sumB, "swap n/ #4; retire n/ @2"),
			tick{at: 2 * sec, ev: cfg(kept("m/", sumA, 0, 0), kept("n/", sumA, 0, 30_000)), steps: "fetch m/ #5; restore n/ @2; retire n/ @4"},
		), "n/=@4 " + (32 * sec).String()},
		{"changing the keep time applies to the content kept, without a reload", 0, script(
			tick{ev: cfg(kept("m/", sumA, 0, 60_000)), steps: "fetch m/ #1"},
			loadOK(0, "m/", 1, sumA, "swap m/ #1"),
			tick{ev: cfg(kept("m/", sumB, 0, 60_000)), steps: "fetch m/ #2"},
			loadOK(0, "m/", 2, sumB, "swap m/ #2; retire m/ @1"),
			tick{at: sec, ev: cfg(kept("m/", sumB, 0, 120_000)), steps: "", wake: 2 * min},
			tick{at: 2 * sec, ev: cfg(model("m/", sumB, 0)), steps: "release m/ @1", wake: -1},
		), "m/=none"},
		{"a crash reload does not keep the broken content", 10 * min, script(
			tick{ev: cfg(model("m/", sumA, 0)), steps: "fetch m/ #1"},
			loadOK(0, "m/", 1, sumA, "swap m/ #1"),
			tick{at: sec, ev: ReloadFailed{Path: "m/", Content: 1, Err: errors.New("cache file gone")}, steps: "fetch m/ #2"},
			loadOK(sec, "m/", 2, sumA, "swap m/ #2; retire m/ @1; release m/ @1"),
		), "m/=none"},
		{"a kept content that crashed and could not reload is released, not restored: going back loads afresh", 10 * min, script(
			tick{ev: cfg(model("m/", sumA, 0)), steps: "fetch m/ #1"},
			loadOK(0, "m/", 1, sumA, "swap m/ #1"),
			tick{at: sec, ev: cfg(model("m/", sumB, 0)), steps: "fetch m/ #2"},
			loadOK(sec, "m/", 2, sumB, "swap m/ #2; retire m/ @1"),
			tick{at: 2 * sec, inflight: map[int64]int64{1: 1}, ev: ReloadFailed{Path: "m/", Content: 1, Err: errors.New("cache file gone")}, steps: "", wake: -1},
			tick{at: 3 * sec, ev: cfg(model("m/", sumA, 0)), steps: "fetch m/ #3", phases: "m/=swapping"},
			tick{at: 4 * sec, inflight: map[int64]int64{1: 0}, steps: "release m/ @1"},
		), "m/=none"},
		{"a removed model kept out of service gives its path up to a registration", 10 * min, script(
			tick{ev: cfg(model("m/", sumA, 0)), steps: "fetch m/ #1"},
			loadOK(0, "m/", 1, sumA, "swap m/ #1"),
			tick{at: sec, ev: cfg(), steps: "retire m/ @1", phases: "m/=evicting"},
			tick{at: 2 * sec, ev: Registered{Meta: model("m/", "", 0)}, steps: "fetch m/ #2; release m/ @1", phases: "m/=loading"},
		), "m/=none"},
		{"a removed model is served for its grace period and stays loaded for the longer of it and the keep time", 10 * min, script(
			tick{ev: cfg(model("m/", sumA, 60_000)), steps: "fetch m/ #1"},
			loadOK(0, "m/", 1, sumA, "swap m/ #1"),
			tick{at: sec, ev: cfg(), steps: "", phases: "m/=evicting", wake: 61 * sec},
			tick{at: 61 * sec, steps: "retire m/ @1", phases: "m/=evicting", wake: sec + 10*min},
			tick{at: 2 * min, ev: cfg(model("m/", sumA, 60_000)), steps: "restore m/ @1", phases: "m/=ready", wake: -1},
		), "m/=none"},
		{"a removed model kept after its grace period is forgotten when the keep time ends", 10 * min, script(
			tick{ev: cfg(model("m/", sumA, 0)), steps: "fetch m/ #1"},
			loadOK(0, "m/", 1, sumA, "swap m/ #1"),
			tick{at: sec, ev: cfg(), steps: "retire m/ @1", phases: "m/=evicting", wake: sec + 10*min},
			tick{at: sec + 10*min, steps: "forget m/; release m/ @1", phases: "none", wake: -1},
		), ""},
		{"a removed model whose grace period is longer than the keep time is forgotten at its end", 10 * min, script(
			tick{ev: cfg(model("m/", sumA, 20*60_000)), steps: "fetch m/ #1"},
			loadOK(0, "m/", 1, sumA, "swap m/ #1"),
			tick{at: sec, ev: cfg(), steps: "", phases: "m/=evicting", wake: sec + 20*min},
			tick{at: sec + 20*min, steps: "retire m/ @1; forget m/; release m/ @1", phases: "none", wake: -1},
		), ""},
		{"a removed model listed again with a new checksum after its grace period loads it, keeping the old one", 10 * min, script(
			tick{ev: cfg(model("m/", sumA, 0)), steps: "fetch m/ #1"},
			loadOK(0, "m/", 1, sumA, "swap m/ #1"),
			tick{at: sec, ev: cfg(), steps: "retire m/ @1"},
			tick{at: 2 * sec, ev: cfg(model("m/", sumB, 0)), steps: "fetch m/ #2", phases: "m/=loading"},
			loadOK(2*sec, "m/", 2, sumB, "swap m/ #2"),
			tick{at: 3 * sec, ev: cfg(model("m/", sumA, 0)), steps: "restore m/ @1; retire m/ @2"},
		), "m/=@2 " + (3*sec + 10*min).String()},
		{"a path removed with content kept from an update releases it when forgotten", 10 * min, script(
			tick{ev: cfg(kept("m/", sumA, 0, 60_000)), steps: "fetch m/ #1"},
			loadOK(0, "m/", 1, sumA, "swap m/ #1"),
			tick{ev: cfg(kept("m/", sumB, 0, 60_000)), steps: "fetch m/ #2"},
			loadOK(0, "m/", 2, sumB, "swap m/ #2; retire m/ @1"),
			tick{at: 30 * sec, ev: cfg(), steps: "retire m/ @2; release m/ @1", wake: 90 * sec},
			tick{at: 90 * sec, steps: "forget m/; release m/ @2", phases: "none"},
		), ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := runWith(t, tc.keep, tc.ticks)
			if tc.kept == "" {
				return
			}
			path, want, _ := strings.Cut(tc.kept, "=")
			if got := keptOf(s, path); got != want {
				t.Fatalf("kept %s, want %s", got, want)
			}
		})
	}
}

// keptOf describes path's kept content: "@id until" (since t0), or "none".
func keptOf(s *State, path string) string {
	p := s.Path(path)
	if p == nil || p.Kept == nil {
		return "none"
	}
	return fmt.Sprintf("@%d %v", p.Kept.ID, p.Kept.Until.Sub(t0))
}

func TestPlannerWithoutKeepTimeKeepsNothing(t *testing.T) {
	// The server's keep time off: an update and going back load afresh.
	s := run(t, script(
		tick{ev: cfg(model("m/", sumA, 0)), steps: "fetch m/ #1"},
		loadOK(0, "m/", 1, sumA, "swap m/ #1"),
		tick{ev: cfg(model("m/", sumB, 0)), steps: "fetch m/ #2"},
		loadOK(0, "m/", 2, sumB, "swap m/ #2; retire m/ @1; release m/ @1"),
		tick{ev: cfg(model("m/", sumA, 0)), steps: "fetch m/ #3"},
	))
	if k := keptOf(s, "m/"); k != "none" {
		t.Fatalf("kept %s", k)
	}
}
