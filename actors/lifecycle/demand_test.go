package lifecycle

import (
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/groveml/grove/conf/modelconfig"
)

// onDemand is model with load on_demand.
func onDemand(path string) modelconfig.Model {
	m := model(path, "", 0)
	m.Load = modelconfig.LoadOnDemand
	return m
}

// loadMeasured is the ticks that take job of path from fetch (size bytes
// of files) to swap, its load measuring bytes; loadStep is the steps the
// fetch brings (the load, or none while it waits for room).
func loadMeasured(at time.Duration, path string, job, size, bytes int64, loadStep, swapSteps string) []tick {
	return []tick{
		{at: at, ev: Fetched{Path: path, Job: job, Size: size}, steps: loadStep},
		{at: at, ev: Loaded{Path: path, Job: job, Bytes: bytes}, steps: fmt.Sprintf("warm-up %s #%d", path, job)},
		{at: at, ev: Warmed{Path: path, Job: job}, steps: swapSteps},
	}
}

func TestPlannerOnDemandRules(t *testing.T) {
	sec := time.Second
	loadErr := errors.New("corrupt file")
	for _, tc := range []struct {
		name   string
		state  State
		ticks  []tick
		settle bool // Settled after the last tick
	}{
		{name: "an on-demand entry is known at once, unloaded, and not fetched until a demand", ticks: script(
			tick{ev: cfg(onDemand("a/"), model("e/", "", 0)), steps: "fetch e/ #1", phases: "a/=unloaded e/=loading"},
			loadOK(0, "e/", 1, "", "swap e/ #1"),
			tick{at: sec, phases: "a/=unloaded e/=ready", wake: -1},
			tick{at: 2 * sec, ev: Demand{Path: "a/"}, steps: "fetch a/ #2", phases: "a/=loading e/=ready"},
			loadOK(3*sec, "a/", 2, "", "swap a/ #2"),
			tick{at: 3 * sec, phases: "a/=ready e/=ready"},
		), settle: true},
		{name: "demands while a load runs share it", ticks: script(
			tick{ev: cfg(onDemand("a/")), steps: "", phases: "a/=unloaded"},
			tick{ev: Demand{Path: "a/"}, steps: "fetch a/ #1"},
			tick{ev: Demand{Path: "a/"}, steps: ""},
			tick{ev: Fetched{Path: "a/", Job: 1}, steps: "load a/ #1"},
			tick{ev: Demand{Path: "a/"}, steps: ""},
			tick{ev: Loaded{Path: "a/", Job: 1}, steps: "warm-up a/ #1"},
			tick{ev: Warmed{Path: "a/", Job: 1}, steps: "swap a/ #1", phases: "a/=ready"},
			tick{ev: Demand{Path: "a/"}, steps: ""},
		)},
		{name: "the server's load_policy applies to entries without a load of their own", state: State{LoadPolicy: modelconfig.LoadOnDemand}, ticks: script(
			tick{ev: cfg(model("a/", "", 0), func() modelconfig.Model { m := model("e/", "", 0); m.Load = modelconfig.LoadEager; return m }()),
				steps: "fetch e/ #1", phases: "a/=unloaded e/=loading"},
		)},
		{name: "an unloaded on-demand path turned eager is loading while it loads, and ready once it serves", ticks: script(
			tick{ev: cfg(onDemand("a/")), steps: "", phases: "a/=unloaded"},
			tick{ev: cfg(model("a/", "", 0)), steps: "fetch a/ #1", phases: "a/=loading"},
			loadOK(0, "a/", 1, "", "swap a/ #1"),
			tick{phases: "a/=ready"},
		)},
		{name: "a demand made while a load started eager runs is not lost when that load is dropped", ticks: script(
			tick{ev: cfg(model("a/", sumA, 0)), steps: "fetch a/ #1"},
			tick{ev: cfg(onDemandSum("a/", sumA)), steps: "", phases: "a/=loading"},
			tick{ev: Demand{Path: "a/"}, steps: ""}, // the running load will answer it
			tick{ev: cfg(onDemandSum("a/", sumB)), steps: "discard a/ #1; fetch a/ #2"},
		)},
		{name: "a demand for an eager, evicting or unknown path loads nothing", ticks: script(
			tick{ev: cfg(model("e/", "", 0)), steps: "fetch e/ #1"},
			tick{ev: Demand{Path: "e/"}, steps: ""},
			tick{ev: Demand{Path: "x/"}, steps: ""},
		)},
		{name: "a failed load is retried on demand after a backoff that doubles", ticks: script(
			tick{ev: cfg(onDemand("a/")), steps: ""},
			tick{ev: Demand{Path: "a/"}, steps: "fetch a/ #1"},
			tick{ev: Fetched{Path: "a/", Job: 1, Err: loadErr}, steps: "discard a/ #1", phases: "a/=failed", lastErr: "a/: corrupt file"},
			tick{at: sec / 2, ev: Demand{Path: "a/"}, steps: "", wake: sec},
			tick{at: sec, steps: "fetch a/ #2", phases: "a/=loading"},
			tick{at: sec, ev: Fetched{Path: "a/", Job: 2, Err: loadErr}, steps: "discard a/ #2", phases: "a/=failed"},
			tick{at: 2 * sec, ev: Demand{Path: "a/"}, steps: "", wake: 3 * sec},
			// A config poll does not cut the backoff short.
			tick{at: 2 * sec, ev: cfg(onDemand("a/")), steps: "", wake: 3 * sec},
			tick{at: 3 * sec, steps: "fetch a/ #3"},
			loadOK(3*sec, "a/", 3, "", "swap a/ #3"),
			tick{at: 3 * sec, phases: "a/=ready"},
		)},
		{name: "with a budget, loads and warm-ups run one at a time", state: State{Budget: 1000}, ticks: script(
			tick{ev: cfg(onDemand("a/"), onDemand("b/")), steps: ""},
			tick{ev: Demand{Path: "a/"}, steps: "fetch a/ #1"},
			tick{ev: Demand{Path: "b/"}, steps: "fetch b/ #2"},
			tick{ev: Fetched{Path: "b/", Job: 2, Size: 10}, steps: "load b/ #2"},
			tick{ev: Fetched{Path: "a/", Job: 1, Size: 10}, steps: ""},
			tick{ev: Loaded{Path: "b/", Job: 2, Bytes: 30}, steps: "warm-up b/ #2"},
			tick{ev: Warmed{Path: "b/", Job: 2}, steps: "swap b/ #2; load a/ #1"},
		)},
		{name: "a model that goes into service while another waits for room is not unloaded for it before its waiting requests reach it",
			state: State{Budget: 40}, ticks: script(
				tick{ev: cfg(onDemand("a/"), onDemand("b/")), steps: ""},
				tick{ev: Demand{Path: "a/"}, steps: "fetch a/ #1"},
				tick{ev: Fetched{Path: "a/", Job: 1, Size: 10}, steps: "load a/ #1"},
				tick{ev: Demand{Path: "b/"}, steps: "fetch b/ #2"},
				tick{ev: Fetched{Path: "b/", Job: 2, Size: 10}, steps: ""},
				tick{ev: Loaded{Path: "a/", Job: 1, Bytes: 30}, steps: "warm-up a/ #1"},
				// a/ holds no request yet: they reach it once the swap is done.
				tick{ev: Warmed{Path: "a/", Job: 1}, steps: "swap a/ #1", phases: "a/=ready b/=loading", wake: budgetRecheck},
				tick{at: budgetRecheck, inflight: map[int64]int64{1: 0}, steps: "retire a/ @1 (budget); release a/ @1", phases: "a/=unloaded b/=loading"},
			)},
		{name: "a load does not wait out another content's grace period when an idle on-demand model can be unloaded now",
			state: State{Budget: 100}, ticks: script(
				tick{ev: cfg(model("e/", sumA, 600_000), onDemand("a/"), onDemand("b/")), steps: "fetch e/ #1"},
				tick{ev: Fetched{Path: "e/", Job: 1, Size: 10, Checksum: sumA}, steps: "load e/ #1"},
				tick{ev: Loaded{Path: "e/", Job: 1, Bytes: 30}, steps: "warm-up e/ #1"},
				tick{ev: Warmed{Path: "e/", Job: 1}, steps: "swap e/ #1"},
				tick{ev: Demand{Path: "a/"}, steps: "fetch a/ #2"},
				loadMeasured(0, "a/", 2, 10, 30, "load a/ #2", "swap a/ #2"),
				tick{ev: cfg(model("e/", sumB, 600_000), onDemand("a/"), onDemand("b/")), steps: "fetch e/ #3"},
				tick{ev: Fetched{Path: "e/", Job: 3, Size: 10, Checksum: sumB}, steps: "load e/ #3"},
				tick{ev: Loaded{Path: "e/", Job: 3, Bytes: 30}, steps: "warm-up e/ #3"},
				tick{ev: Warmed{Path: "e/", Job: 3}, steps: "swap e/ #3; retire e/ @1"},
				// 90 used (e/ #1 in its 10-minute grace period, a/, e/ #3); b/ needs 20.
				tick{at: time.Minute, ev: Demand{Path: "b/"}, steps: "fetch b/ #4"},
				tick{at: time.Minute, ev: Fetched{Path: "b/", Job: 4, Size: 10}, steps: "retire a/ @2 (budget); release a/ @2"},
				tick{at: time.Minute, ev: Freed{Content: 2}, steps: "load b/ #4"},
			)},
		{name: "a load that passes the budget unloads the least recently used idle on-demand model first, and starts once it is freed",
			state: State{Budget: 100}, ticks: script(
				tick{ev: cfg(onDemand("a/"), onDemand("b/"), onDemand("c/")), steps: ""},
				tick{ev: Demand{Path: "a/"}, steps: "fetch a/ #1"},
				loadMeasured(0, "a/", 1, 10, 40, "load a/ #1", "swap a/ #1"),
				tick{ev: Demand{Path: "b/"}, steps: "fetch b/ #2"},
				loadMeasured(0, "b/", 2, 10, 40, "load b/ #2", "swap b/ #2"),
				tick{at: 10 * sec, ev: Demand{Path: "c/"}, steps: "fetch c/ #3", used: map[int64]time.Duration{1: 5 * sec, 2: 8 * sec}},
				// 80 used + 30 (15 bytes of files, times 2) is more than 100.
				tick{at: 10 * sec, ev: Fetched{Path: "c/", Job: 3, Size: 15}, steps: "retire a/ @1 (budget); release a/ @1", phases: "a/=unloaded b/=ready c/=loading"},
				tick{at: 10 * sec, steps: ""},
				tick{at: 11 * sec, ev: Freed{Content: 1}, steps: "load c/ #3"},
			)},
		{name: "unloading by budget picks idle on-demand contents by value, never eager or busy ones, and waits for them to be freed",
			state: State{Budget: 100}, ticks: script(
				tick{ev: cfg(onDemand("a/"), onDemand("b/"), onDemand("c/"), model("e/", "", 0)), steps: "fetch e/ #1"},
				loadMeasured(0, "e/", 1, 10, 30, "load e/ #1", "swap e/ #1"),
				tick{ev: Demand{Path: "a/"}, steps: "fetch a/ #2"},
				loadMeasured(0, "a/", 2, 10, 30, "load a/ #2", "swap a/ #2"),
				tick{ev: Demand{Path: "b/"}, steps: "fetch b/ #3"},
				loadMeasured(0, "b/", 3, 10, 30, "load b/ #3", "swap b/ #3"),
				// e/ (eager) was used longest ago, a/ next, but a/ holds a request: b/ goes.
				tick{at: 10 * sec, ev: Demand{Path: "c/"}, steps: "fetch c/ #4", used: map[int64]time.Duration{1: sec, 2: 2 * sec, 3: 3 * sec}, inflight: map[int64]int64{2: 1}},
				tick{at: 10 * sec, ev: Fetched{Path: "c/", Job: 4, Size: 10}, steps: "retire b/ @3 (budget); release b/ @3", phases: "a/=ready b/=unloaded c/=loading e/=ready"},
				tick{at: 10 * sec, steps: ""},
				tick{at: 10 * sec, ev: Freed{Content: 3}, steps: "load c/ #4"},
			)},
		{name: "a costly reload keeps a model loaded over a cheaper one used since", state: State{Budget: 60}, ticks: script(
			tick{ev: cfg(onDemand("a/"), onDemand("b/"), onDemand("c/")), steps: ""},
			tick{ev: Demand{Path: "a/"}, steps: "fetch a/ #1"},
			// a/ takes 10s to load, b/ 1s.
			loadMeasured(10*sec, "a/", 1, 10, 20, "load a/ #1", "swap a/ #1"),
			tick{at: 20 * sec, ev: Demand{Path: "b/"}, steps: "fetch b/ #2"},
			loadMeasured(21*sec, "b/", 2, 10, 20, "load b/ #2", "swap b/ #2"),
			// a/ last used 10s ago (value 10s/10s), b/ 5s ago (1s/5s): b/ goes.
			tick{at: 30 * sec, ev: Demand{Path: "c/"}, steps: "fetch c/ #3", used: map[int64]time.Duration{1: 20 * sec, 2: 25 * sec}},
			tick{at: 30 * sec, ev: Fetched{Path: "c/", Job: 3, Size: 20}, steps: "retire b/ @2 (budget); release b/ @2"},
		)},
		{name: "when only models holding requests stand in the way, the load waits for them to go idle", state: State{Budget: 50}, ticks: script(
			tick{ev: cfg(onDemand("a/"), onDemand("b/")), steps: ""},
			tick{ev: Demand{Path: "a/"}, steps: "fetch a/ #1"},
			loadMeasured(0, "a/", 1, 10, 40, "load a/ #1", "swap a/ #1"),
			tick{ev: Demand{Path: "b/"}, steps: "fetch b/ #2", inflight: map[int64]int64{1: 2}},
			tick{at: sec, ev: Fetched{Path: "b/", Job: 2, Size: 10}, steps: "", wake: sec + budgetRecheck},
			tick{at: sec + budgetRecheck, steps: "", wake: sec + 2*budgetRecheck},
			tick{at: sec + 2*budgetRecheck, inflight: map[int64]int64{1: 0}, steps: "retire a/ @1 (budget); release a/ @1", phases: "a/=unloaded b/=loading"},
			tick{at: 2 * sec, ev: Freed{Content: 1}, steps: "load b/ #2"},
		)},
		{name: "a model that fits under no budget loads over it rather than never", state: State{Budget: 50}, ticks: script(
			tick{ev: cfg(onDemand("a/"), model("e/", "", 0)), steps: "fetch e/ #1"},
			loadMeasured(0, "e/", 1, 10, 40, "load e/ #1", "swap e/ #1"),
			tick{ev: Demand{Path: "a/"}, steps: "fetch a/ #2"},
			tick{ev: Fetched{Path: "a/", Job: 2, Size: 10}, steps: "load a/ #2 (over budget)"},
		)},
		{name: "a model unloaded by the budget is unloaded, not evicting, and a demand loads it again", state: State{Budget: 50}, ticks: script(
			tick{ev: cfg(onDemand("a/"), onDemand("b/")), steps: ""},
			tick{ev: Demand{Path: "a/"}, steps: "fetch a/ #1"},
			loadMeasured(0, "a/", 1, 10, 30, "load a/ #1", "swap a/ #1"),
			tick{at: sec, ev: Demand{Path: "b/"}, steps: "fetch b/ #2"},
			tick{at: sec, ev: Fetched{Path: "b/", Job: 2, Size: 15}, steps: "retire a/ @1 (budget); release a/ @1", phases: "a/=unloaded b/=loading"},
			tick{at: sec, ev: Freed{Content: 1}, steps: "load b/ #2"},
			tick{at: sec, ev: Loaded{Path: "b/", Job: 2, Bytes: 30}, steps: "warm-up b/ #2"},
			tick{at: sec, ev: Warmed{Path: "b/", Job: 2}, steps: "swap b/ #2"},
			// a/'s measured 30 bytes, not its files' 20, is what it needs now.
			tick{at: 2 * sec, ev: Demand{Path: "a/"}, steps: "fetch a/ #3"},
			tick{at: 2 * sec, ev: Fetched{Path: "a/", Job: 3, Size: 10}, steps: "retire b/ @2 (budget); release b/ @2", phases: "a/=loading b/=unloaded"},
		)},
		{name: "an on-demand content that took no request for idle_unload_after is unloaded, unless it holds one; eager ones never",
			state: State{IdleUnloadAfter: 10 * sec}, ticks: script(
				tick{ev: cfg(onDemand("a/"), model("e/", "", 0)), steps: "fetch e/ #1"},
				loadOK(0, "e/", 1, "", "swap e/ #1"),
				tick{ev: Demand{Path: "a/"}, steps: "fetch a/ #2"},
				loadOK(0, "a/", 2, "", "swap a/ #2"),
				tick{at: sec, steps: "", wake: 10 * sec},
				// Used at 4s: idle from 14s.
				tick{at: 10 * sec, used: map[int64]time.Duration{2: 4 * sec}, steps: "", wake: 14 * sec},
				// Holding a request at 14s: looked at again 10s later.
				tick{at: 14 * sec, inflight: map[int64]int64{2: 1}, steps: "", wake: 24 * sec},
				tick{at: 24 * sec, inflight: map[int64]int64{2: 0}, steps: "retire a/ @2 (idle); release a/ @2", phases: "a/=unloaded e/=ready", wake: -1},
				tick{at: 25 * sec, ev: Demand{Path: "a/"}, steps: "fetch a/ #3", phases: "a/=loading e/=ready"},
			)},
		{name: "unloading by budget never picks a kept previous content, though it was used longest ago",
			state: State{Budget: 100}, ticks: script(
				tick{ev: cfg(onDemandKept("a/", sumA), onDemand("b/"), onDemand("c/")), steps: ""},
				tick{ev: Demand{Path: "a/"}, steps: "fetch a/ #1"},
				tick{ev: Fetched{Path: "a/", Job: 1, Size: 10, Checksum: sumA}, steps: "load a/ #1"},
				tick{ev: Loaded{Path: "a/", Job: 1, Bytes: 30}, steps: "warm-up a/ #1"},
				tick{ev: Warmed{Path: "a/", Job: 1}, steps: "swap a/ #1"},
				// An update of a/ keeps #1 loaded out of service.
				tick{at: sec, ev: cfg(onDemandKept("a/", sumB), onDemand("b/"), onDemand("c/")), steps: "fetch a/ #2"},
				tick{at: sec, ev: Fetched{Path: "a/", Job: 2, Size: 10, Checksum: sumB}, steps: "load a/ #2"},
				tick{at: sec, ev: Loaded{Path: "a/", Job: 2, Bytes: 30}, steps: "warm-up a/ #2"},
				tick{at: sec, ev: Warmed{Path: "a/", Job: 2}, steps: "swap a/ #2; retire a/ @1"},
				tick{at: 2 * sec, ev: Demand{Path: "b/"}, steps: "fetch b/ #3"},
				loadMeasured(2*sec, "b/", 3, 10, 30, "load b/ #3", "swap b/ #3"),
				// 90 used: c/ needs room. #1 (kept) was used at 0, b/ at
				// 3s, a/ #2 at 9s: b/ goes, the kept content stays.
				tick{at: 10 * sec, ev: Demand{Path: "c/"}, steps: "fetch c/ #4", used: map[int64]time.Duration{1: 0, 2: 9 * sec, 3: 3 * sec}},
				tick{at: 10 * sec, ev: Fetched{Path: "c/", Job: 4, Size: 10}, steps: "retire b/ @3 (budget); release b/ @3"},
			)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			st := tc.state
			s := runState(t, &st, tc.ticks)
			if tc.settle && !s.Settled() {
				t.Error("not settled: an on-demand path must not hold the first reconcile back")
			}
		})
	}
}

// TestPlannerUsedAndUnloadOrder: the memory counted is each loaded
// content's until it is freed, and the unload order ranks the loaded
// on-demand paths by value.
func TestPlannerUsedAndUnloadOrder(t *testing.T) {
	sec := time.Second
	st := State{Budget: 1000}
	s := runState(t, &st, script(
		tick{ev: cfg(onDemand("a/"), onDemand("b/"), model("e/", "", 0)), steps: "fetch e/ #1"},
		loadMeasured(0, "e/", 1, 10, 100, "load e/ #1", "swap e/ #1"),
		tick{ev: Demand{Path: "a/"}, steps: "fetch a/ #2"},
		loadMeasured(0, "a/", 2, 10, 0, "load a/ #2", "swap a/ #2"), // unmeasured: 10 bytes times 2
		tick{ev: Demand{Path: "b/"}, steps: "fetch b/ #3"},
		loadMeasured(0, "b/", 3, 10, 30, "load b/ #3", "swap b/ #3"),
		tick{at: 10 * sec, used: map[int64]time.Duration{2: 9 * sec, 3: 2 * sec}},
	))
	if got := s.Used(); got != 150 {
		t.Errorf("used %d, want 150 (100 + 20 + 30)", got)
	}
	if got := s.UnloadOrder(t0.Add(10 * sec)); len(got) != 2 || got[0] != "b/" || got[1] != "a/" {
		t.Errorf("unload order %q, want [b/ a/] (b/ used longest ago; e/ is eager)", got)
	}
	_ = s.Apply(Freed{Content: 3}, t0.Add(10*sec))
	if got := s.Used(); got != 120 {
		t.Errorf("used %d after b/'s content is freed, want 120", got)
	}
}

func TestBackoffDoublesFromASecondToAMinute(t *testing.T) {
	for n, want := range map[int]time.Duration{0: 0, 1: time.Second, 2: 2 * time.Second, 3: 4 * time.Second, 6: 32 * time.Second, 7: time.Minute, 100: time.Minute} {
		if got := Backoff(n); got != want {
			t.Errorf("Backoff(%d) = %v, want %v", n, got, want)
		}
	}
}

// TestPlannerCountsALoadAtLeastItsEstimate: a load that measures less
// than its estimate (it reused memory an unload gave back, or it was not
// measured) is counted at the estimate: the same content's last count,
// else its files' size times the memory factor.
func TestPlannerCountsALoadAtLeastItsEstimate(t *testing.T) {
	sec := time.Second
	st := State{Budget: 150}
	s := runState(t, &st, script(
		tick{ev: cfg(onDemand("a/"), onDemand("b/")), steps: ""},
		tick{ev: Demand{Path: "a/"}, steps: "fetch a/ #1"},
		tick{ev: Fetched{Path: "a/", Job: 1, Checksum: "s1", Size: 10}, steps: "load a/ #1"},
		tick{ev: Loaded{Path: "a/", Job: 1, Bytes: 100}, steps: "warm-up a/ #1"},
		tick{ev: Warmed{Path: "a/", Job: 1}, steps: "swap a/ #1"},
		// b/'s 50 bytes of files are counted 100 until measured: a/ goes.
		tick{at: sec, ev: Demand{Path: "b/"}, steps: "fetch b/ #2"},
		tick{at: sec, ev: Fetched{Path: "b/", Job: 2, Checksum: "s2", Size: 50}, steps: "retire a/ @1 (budget); release a/ @1"},
		tick{at: sec, ev: Freed{Content: 1}, steps: "load b/ #2"},
		// b/'s load reuses a/'s memory: it grows the process by 5 bytes.
		tick{at: sec, ev: Loaded{Path: "b/", Job: 2, Bytes: 5}, steps: "warm-up b/ #2"},
		tick{at: sec, ev: Warmed{Path: "b/", Job: 2}, steps: "swap b/ #2"},
		// a/ back: its last count (100) is what it needs, not its files' 20.
		tick{at: 2 * sec, ev: Demand{Path: "a/"}, steps: "fetch a/ #3"},
		tick{at: 2 * sec, ev: Fetched{Path: "a/", Job: 3, Checksum: "s1", Size: 10}, steps: "retire b/ @2 (budget); release b/ @2"},
		tick{at: 2 * sec, ev: Freed{Content: 2}, steps: "load a/ #3"},
		tick{at: 2 * sec, ev: Loaded{Path: "a/", Job: 3, Bytes: 1}, steps: "warm-up a/ #3"},
		tick{at: 2 * sec, ev: Warmed{Path: "a/", Job: 3}, steps: "swap a/ #3"},
	))
	if got := s.Used(); got != 100 {
		t.Errorf("used %d after a/'s reload measured 1 byte, want 100 (its last count)", got)
	}
	if got := s.Path("b/").Cost.Bytes; got != 100 {
		t.Errorf("b/ was counted %d after measuring 5 bytes, want 100 (50 bytes of files times 2)", got)
	}
	// A new content of a/ is not the one its last count measured.
	a := s.Path("a/")
	if got := s.estimate(a, &Job{Checksum: "s3", Size: 7}); got != 14 {
		t.Errorf("a new checksum's estimate is %d, want 14 (its 7 bytes of files times 2)", got)
	}
}

// onDemandSum is an on-demand entry with checksum sum.
func onDemandSum(path, sum string) modelconfig.Model {
	m := onDemand(path)
	m.Checksum = sum
	return m
}

// A content restored from the kept one (the config back to it) while a
// load for a demand runs serves that demand: once it is unloaded again,
// nothing loads the path until a new request asks.
func TestARestoredContentEndsTheDemandItsDiscardedLoadWasFor(t *testing.T) {
	sec := time.Second
	s := runState(t, &State{Budget: 1000}, script(
		tick{ev: cfg(onDemandKept("a/", sumA)), steps: ""},
		tick{ev: Demand{Path: "a/"}, steps: "fetch a/ #1"},
		loadOK(0, "a/", 1, sumA, "swap a/ #1"),
		tick{at: sec, ev: cfg(onDemandKept("a/", sumB)), steps: "fetch a/ #2"},
		loadOK(sec, "a/", 2, sumB, "swap a/ #2; retire a/ @1"),
	))
	a := s.Path("a/")
	never := func(int64) int64 { return 0 }
	now := t0.Add(2 * sec)
	s.unload(a, now, ReasonIdle)
	s.Plan(now, never)
	if err := s.Apply(Demand{Path: "a/"}, now); err != nil {
		t.Fatal(err)
	}
	if p := s.Plan(now, never); !slices.ContainsFunc(p.Steps, func(st Step) bool { return st.Kind == Fetch }) {
		t.Fatalf("the demand loads nothing: %v", p.Steps)
	}
	if err := s.Apply(cfg(onDemandKept("a/", sumA)), now); err != nil {
		t.Fatal(err)
	}
	if p := s.Plan(now, never); a.Active == nil || a.Active.Checksum != sumA {
		t.Fatalf("back to sumA: %v, active %+v; want the kept content restored", p.Steps, a.Active)
	}
	s.unload(a, now.Add(sec), ReasonIdle)
	for range 2 {
		if p := s.Plan(now.Add(sec), never); slices.ContainsFunc(p.Steps, func(st Step) bool { return st.Kind == Fetch }) {
			t.Fatalf("a/ loads again with no request waiting: %v", p.Steps)
		}
	}
}

// onDemandKept is an on-demand entry with checksum sum whose previous
// content is kept loaded for 10 minutes after an update.
func onDemandKept(path, sum string) modelconfig.Model {
	m := kept(path, sum, 0, 600_000)
	m.Load = modelconfig.LoadOnDemand
	return m
}

// TestPlannerLoadTimeLeavesOutTheWaitForATurnToLoad: a content's load
// time, the reload cost the budget weighs and the status shows, runs from
// its fetch to the end of its warm-up less the time it waited, fetched,
// for room under the budget: that wait is not what loading it costs.
func TestPlannerLoadTimeLeavesOutTheWaitForATurnToLoad(t *testing.T) {
	sec := time.Second
	st := State{Budget: 100}
	s := runState(t, &st, script(
		tick{ev: cfg(onDemand("a/"), onDemand("b/")), steps: ""},
		tick{ev: Demand{Path: "a/"}, steps: "fetch a/ #1"},
		loadMeasured(0, "a/", 1, 10, 90, "load a/ #1", "swap a/ #1"),
		tick{at: sec, ev: Demand{Path: "b/"}, steps: "fetch b/ #2", used: map[int64]time.Duration{1: 0}},
		// Fetched at 2 s; room only once a/ is freed, at 7 s.
		tick{at: 2 * sec, ev: Fetched{Path: "b/", Job: 2, Size: 10}, steps: "retire a/ @1 (budget); release a/ @1"},
		tick{at: 7 * sec, ev: Freed{Content: 1}, steps: "load b/ #2"},
		tick{at: 8 * sec, ev: Loaded{Path: "b/", Job: 2, Bytes: 30}, steps: "warm-up b/ #2"},
		tick{at: 9 * sec, ev: Warmed{Path: "b/", Job: 2}, steps: "swap b/ #2"},
	))
	// From its fetch at 1 s to its swap at 9 s, less the 5 s it waited.
	if got := s.Path("b/").Cost.LoadTime; got != 3*sec {
		t.Errorf("b/'s load time %v, want 3s (8s from fetch to swap, less 5s waiting for room)", got)
	}
}

// A model that passes the budget on its own loads over it, but not over
// the idle on-demand models too: they are unloaded first, so that the
// budget is passed by that model alone.
func TestAModelOverTheBudgetOnItsOwnLoadsOnlyOnceTheIdleOnesAreUnloaded(t *testing.T) {
	sec := time.Second
	st := State{Budget: 50}
	runState(t, &st, script(
		tick{ev: cfg(onDemand("a/"), onDemand("b/")), steps: ""},
		tick{ev: Demand{Path: "a/"}, steps: "fetch a/ #1"},
		// a/ was estimated at 20, and measures 60: more than the budget.
		loadMeasured(0, "a/", 1, 10, 60, "load a/ #1", "swap a/ #1"),
		tick{at: sec, ev: Demand{Path: "b/"}, steps: "fetch b/ #2"},
		tick{at: sec, ev: Fetched{Path: "b/", Job: 2, Size: 10}, steps: "retire a/ @1 (budget); release a/ @1"},
		tick{at: sec, ev: Freed{Content: 1}, steps: "load b/ #2"},
		tick{at: sec, ev: Loaded{Path: "b/", Job: 2, Bytes: 20}, steps: "warm-up b/ #2"},
		tick{at: sec, ev: Warmed{Path: "b/", Job: 2}, steps: "swap b/ #2"},
		// a/ again: 60 passes the budget whatever is unloaded; idle b/ goes.
		tick{at: 2 * sec, ev: Demand{Path: "a/"}, steps: "fetch a/ #3"},
		tick{at: 2 * sec, ev: Fetched{Path: "a/", Job: 3, Size: 10}, steps: "retire b/ @2 (budget); release b/ @2", phases: "a/=loading b/=unloaded"},
		tick{at: 2 * sec, ev: Freed{Content: 2}, steps: "load a/ #3 (over budget)"},
	))
}
