package lifecycle

import (
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/groveml/grove/conf/modelconfig"
)

// stuckTicks is the ticks that take job of path, fetched with checksum
// sum, through its load to a warm-up that times out with a forward call
// still running (Warmed.Stuck).
func stuckTicks(at time.Duration, path string, job int64, sum, phases string) []tick {
	return []tick{
		{at: at, ev: Fetched{Path: path, Job: job, Checksum: sum, Size: 10}, steps: fmt.Sprintf("load %s #%d", path, job)},
		{at: at, ev: Loaded{Path: path, Job: job, Bytes: 30}, steps: fmt.Sprintf("warm-up %s #%d", path, job)},
		{at: at, ev: Warmed{Path: path, Job: job, Err: errWarmUpTimeout, Stuck: true}, steps: fmt.Sprintf("discard %s #%d", path, job), phases: phases},
	}
}

var errWarmUpTimeout = errors.New(`warm-up of "m/" did not finish within 1m0s`)

// The planner does not load a path's content again while a warm-up of the
// same content (same path and checksum) is stuck: polls and demands hold
// it back, the path staying failed with the warm-up's error, until the
// stuck call returns (Freed), after which the usual retry rules apply. A
// new checksum loads; a registration is never held.
func TestPlannerHoldsBackTheContentOfAStuckWarmUp(t *testing.T) {
	sec := time.Second
	for _, tc := range []struct {
		name  string
		state State
		ticks []tick
		// stuck is how many stuck warm-ups are left at the end.
		stuck int
	}{
		{name: "polls do not load the stuck content again; its return does", ticks: script(
			tick{ev: cfg(model("m/", sumA, 0)), steps: "fetch m/ #1"},
			stuckTicks(0, "m/", 1, sumA, "m/=failed"),
			tick{at: sec, ev: cfg(model("m/", sumA, 0)), steps: "", phases: "m/=failed", lastErr: "m/: did not finish within", wake: -1},
			tick{at: 2 * sec, ev: cfg(model("m/", sumA, 0)), steps: "", phases: "m/=failed"},
			tick{at: 3 * sec, ev: Freed{Content: 1}, steps: "fetch m/ #2", phases: "m/=failed"}, // a retry running
			loadOK(3*sec, "m/", 2, sumA, "swap m/ #2"),
			tick{at: 3 * sec, phases: "m/=ready"},
		)},
		{name: "a stuck call that returns before the next poll leaves the retry to that poll", ticks: script(
			tick{ev: cfg(model("m/", sumA, 0)), steps: "fetch m/ #1"},
			stuckTicks(0, "m/", 1, sumA, "m/=failed"),
			tick{at: sec / 2, ev: Freed{Content: 1}, steps: "", phases: "m/=failed"},
			tick{at: sec, ev: cfg(model("m/", sumA, 0)), steps: "fetch m/ #2"},
		)},
		{name: "without a checksum in the config, a poll fetches to learn the content, and loads only another one", ticks: script(
			tick{ev: cfg(model("m/", "", 0)), steps: "fetch m/ #1"},
			stuckTicks(0, "m/", 1, sumA, "m/=failed"),
			tick{at: sec, ev: cfg(model("m/", "", 0)), steps: "fetch m/ #2", phases: "m/=failed"},
			tick{at: sec, ev: Fetched{Path: "m/", Job: 2, Checksum: sumA}, steps: "discard m/ #2", phases: "m/=failed", lastErr: "m/: did not finish within"},
			tick{at: sec, steps: ""},
			tick{at: 2 * sec, ev: cfg(model("m/", "", 0)), steps: "fetch m/ #3"},
			tick{at: 2 * sec, ev: Fetched{Path: "m/", Job: 3, Checksum: sumB}, steps: "load m/ #3"},
		), stuck: 1},
		{name: "without a checksum in the config, the stuck call's return loads at once what the last fetch found", ticks: script(
			tick{ev: cfg(model("m/", "", 0)), steps: "fetch m/ #1"},
			stuckTicks(0, "m/", 1, sumA, "m/=failed"),
			tick{at: sec, ev: cfg(model("m/", "", 0)), steps: "fetch m/ #2"},
			tick{at: sec, ev: Fetched{Path: "m/", Job: 2, Checksum: sumA}, steps: "discard m/ #2"},
			tick{at: sec, ev: Freed{Content: 1}, steps: "fetch m/ #3"},
		)},
		{name: "a new checksum in the config loads while the old one is stuck", ticks: script(
			tick{ev: cfg(model("m/", sumA, 0)), steps: "fetch m/ #1"},
			stuckTicks(0, "m/", 1, sumA, "m/=failed"),
			tick{at: sec, ev: cfg(model("m/", sumB, 0)), steps: "fetch m/ #2"},
			loadOK(sec, "m/", 2, sumB, "swap m/ #2"),
			// Going back to the stuck content is held back: sumB serves on.
			tick{at: 2 * sec, ev: cfg(model("m/", sumA, 0)), steps: "", phases: "m/=ready"},
		), stuck: 1},
		{name: "an update whose warm-up is stuck is not retried, the old content serving, until the call returns", ticks: script(
			tick{ev: cfg(model("m/", sumA, 0)), steps: "fetch m/ #1"},
			loadOK(0, "m/", 1, sumA, "swap m/ #1"),
			tick{at: sec, ev: cfg(model("m/", sumB, 0)), steps: "fetch m/ #2", phases: "m/=swapping"},
			stuckTicks(sec, "m/", 2, sumB, "m/=ready"),
			tick{at: 2 * sec, ev: cfg(model("m/", sumB, 0)), steps: "", phases: "m/=ready"},
			tick{at: 3 * sec, ev: Freed{Content: 2}, steps: "fetch m/ #3", phases: "m/=swapping"},
		)},
		{name: "an on-demand path's demands past the backoff load nothing while its content is stuck", ticks: script(
			tick{ev: cfg(onDemandSum("a/", sumA)), steps: ""},
			tick{ev: Demand{Path: "a/"}, steps: "fetch a/ #1"},
			stuckTicks(0, "a/", 1, sumA, "a/=failed"),
			tick{at: 5 * sec, ev: Demand{Path: "a/"}, steps: "", phases: "a/=failed", lastErr: "a/: did not finish within"},
			tick{at: 5 * sec, ev: cfg(onDemandSum("a/", sumA)), steps: ""},
			// The demand was answered with the error (Held): the return loads nothing by itself.
			tick{at: 6 * sec, ev: Freed{Content: 1}, steps: ""},
			tick{at: 6 * sec, ev: Demand{Path: "a/"}, steps: "fetch a/ #2", phases: "a/=loading"},
		)},
		{name: "a path listed again while its content is stuck is held back, failed with the warm-up's error", ticks: script(
			tick{ev: cfg(model("m/", sumA, 0)), steps: "fetch m/ #1"},
			stuckTicks(0, "m/", 1, sumA, "m/=failed"),
			tick{at: sec, ev: cfg(), steps: "forget m/", phases: "none"},
			tick{at: 2 * sec, ev: cfg(model("m/", sumA, 0)), steps: "", phases: "m/=failed", lastErr: "m/: did not finish within"},
			tick{at: 3 * sec, ev: Freed{Content: 1}, steps: "fetch m/ #2"},
		)},
		{name: "a registration is not held back: it is not retried but sent again", ticks: script(
			tick{ev: Registered{Meta: model("r/", sumA, 0)}, steps: "fetch r/ #1"},
			tick{ev: Fetched{Path: "r/", Job: 1, Checksum: sumA}, steps: "load r/ #1"},
			tick{ev: Loaded{Path: "r/", Job: 1}, steps: "warm-up r/ #1"},
			tick{ev: Warmed{Path: "r/", Job: 1, Err: errWarmUpTimeout, Stuck: true}, steps: "discard r/ #1; notify r/: " + errWarmUpTimeout.Error() + "; forget r/"},
			tick{at: sec, ev: Registered{Meta: model("r/", sumA, 0)}, steps: "fetch r/ #2"},
			tick{at: sec, ev: Fetched{Path: "r/", Job: 2, Checksum: sumA}, steps: "load r/ #2"},
		), stuck: 1},
		{name: "with a budget, the stuck content's memory counts until it returns, but a new checksum does not wait for it",
			state: State{Budget: 40}, ticks: script(
				tick{ev: cfg(model("m/", sumA, 0)), steps: "fetch m/ #1"},
				stuckTicks(0, "m/", 1, sumA, "m/=failed"),
				tick{at: sec, ev: cfg(model("m/", sumB, 0)), steps: "fetch m/ #2"},
				// 30 held by the stuck content, 20 more (10 bytes of files, times 2) pass 40.
				tick{at: sec, ev: Fetched{Path: "m/", Job: 2, Checksum: sumB, Size: 10}, steps: "load m/ #2 (over budget)"},
			), stuck: 1},
		{name: "a load dropped before its warm-up timed out counts until its call returns, and holds nothing back",
			state: State{Budget: 40}, ticks: script(
				tick{ev: cfg(model("m/", sumA, 0)), steps: "fetch m/ #1"},
				tick{ev: Fetched{Path: "m/", Job: 1, Checksum: sumA, Size: 10}, steps: "load m/ #1"},
				tick{ev: Loaded{Path: "m/", Job: 1, Bytes: 30}, steps: "warm-up m/ #1"},
				tick{at: sec, ev: cfg(model("m/", sumB, 0)), steps: "discard m/ #1; fetch m/ #2"},
				tick{at: 2 * sec, ev: Warmed{Path: "m/", Job: 1, Err: errWarmUpTimeout, Stuck: true}, steps: "discard m/ #1"},
				tick{at: 2 * sec, ev: Fetched{Path: "m/", Job: 2, Checksum: sumB, Size: 10}, steps: "load m/ #2 (over budget)"},
				tick{at: 2 * sec, ev: Loaded{Path: "m/", Job: 2, Bytes: 10}, steps: "warm-up m/ #2"},
				tick{at: 2 * sec, ev: Warmed{Path: "m/", Job: 2}, steps: "swap m/ #2"},
				tick{at: 3 * sec, ev: cfg(model("m/", sumA, 0)), steps: "fetch m/ #3"},
			), stuck: 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := runState(t, &tc.state, tc.ticks)
			if got := len(s.StuckWarmUps()); got != tc.stuck {
				t.Fatalf("%d stuck warm-ups at the end, want %d: %+v", got, tc.stuck, s.StuckWarmUps())
			}
		})
	}
}

// A stuck warm-up holds back only a load that would run it again: the
// same checksum loaded with the same settings. An entry whose warm-up
// request, serving options or signature changed (what a user changes to
// get past a warm-up that hangs) loads at once, with a checksum in the
// config or learnt by a fetch.
func TestPlannerLoadsTheStuckContentWithOtherLoadSettings(t *testing.T) {
	sec := time.Second
	with := func(sum string, edit func(*modelconfig.Model)) modelconfig.Model {
		m := model("m/", sum, 0)
		edit(&m)
		return m
	}
	for _, tc := range []struct {
		name string
		edit func(*modelconfig.Model)
	}{
		{"another warm-up request", func(m *modelconfig.Model) { m.WarmUpJSON = `{"request": []}` }},
		{"other serving options", func(m *modelconfig.Model) { m.Serving.IntraOpThreads = 2 }},
		{"another declared signature", func(m *modelconfig.Model) {
			m.Signature = modelconfig.Signature{Inputs: []modelconfig.TensorSignature{{Name: "x", Datatype: "FP32", Shape: []int64{-1}}}}
		}},
	} {
		t.Run(tc.name+", checksum in the config", func(t *testing.T) {
			s := runState(t, &State{}, script(
				tick{ev: cfg(model("m/", sumA, 0)), steps: "fetch m/ #1"},
				stuckTicks(0, "m/", 1, sumA, "m/=failed"),
				tick{at: sec, ev: cfg(with(sumA, tc.edit)), steps: "fetch m/ #2", phases: "m/=failed"},
				loadOK(sec, "m/", 2, sumA, "swap m/ #2"),
				// Going back to the settings that hung is held back.
				tick{at: 2 * sec, ev: cfg(model("m/", sumA, 0)), steps: "", phases: "m/=ready"},
			))
			if n := len(s.StuckWarmUps()); n != 1 {
				t.Fatalf("%d stuck warm-ups, want 1", n)
			}
		})
		t.Run(tc.name+", checksum learnt by a fetch", func(t *testing.T) {
			runState(t, &State{}, script(
				tick{ev: cfg(model("m/", "", 0)), steps: "fetch m/ #1"},
				stuckTicks(0, "m/", 1, sumA, "m/=failed"),
				tick{at: sec, ev: cfg(with("", tc.edit)), steps: "fetch m/ #2"},
				tick{at: sec, ev: Fetched{Path: "m/", Job: 2, Checksum: sumA}, steps: "load m/ #2"},
			))
		})
	}
}

// The memory of a stuck warm-up's content counts against the budget until
// its call returns (Freed).
func TestPlannerCountsAStuckWarmUpUntilItReturns(t *testing.T) {
	s := runState(t, &State{Budget: 1000}, script(
		tick{ev: cfg(model("m/", sumA, 0)), steps: "fetch m/ #1"},
		stuckTicks(0, "m/", 1, sumA, "m/=failed"),
	))
	if u := s.Used(); u != 30 {
		t.Fatalf("used %d with the stuck content, want 30", u)
	}
	st := s.StuckWarmUps()
	if len(st) != 1 || st[0].Job != 1 || st[0].Path != "m/" || st[0].Checksum != sumA || !errors.Is(st[0].Err, errWarmUpTimeout) {
		t.Fatalf("stuck warm-ups %+v", st)
	}
	if err := s.Apply(Freed{Content: 1}, t0); err != nil {
		t.Fatal(err)
	}
	if u, n := s.Used(), len(s.StuckWarmUps()); u != 0 || n != 0 {
		t.Fatalf("after Freed: used %d, %d stuck; want 0 and 0", u, n)
	}
}
