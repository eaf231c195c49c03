package actors

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/groveml/grove/cluster/forward"
	"github.com/groveml/grove/servables"
)

// On-demand models in process (demand.go), on the fake clock.

const onDemandLoad = `"load": "on_demand"`

// oneModelBudgetWorld is a world of two on-demand models, a/ and b/,
// whose memory budget holds one of them (their memory unmeasured: each
// counted at its file's size).
func oneModelBudgetWorld(t *testing.T) *world {
	t.Helper()
	size := int64(len(mustSpec(t, version(1))))
	return newWorld(t, configJSON(entry("a/", "", onDemandLoad), entry("b/", "", onDemandLoad)),
		map[string]faultySpec{"a/": version(1), "b/": version(2)},
		unmeasured, func(_ *world, o *Options) { o.MemoryBudget, o.MemoryFactor = size+size/2, 1 })
}

// unmeasured makes every load's memory unmeasured, so that the budget
// counts each model at its files' size times the memory factor.
func unmeasured(_ *world, o *Options) { o.residentBytes = func() int64 { return 0 } }

func TestOnDemandModelIsListedUnloadedAndLoadsOnItsFirstRequest(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		w := newWorld(t, configJSON(entry("a/", "", onDemandLoad), entry("e/", "", "")),
			map[string]faultySpec{"a/": version(1), "e/": version(2)})
		defer w.stop()
		synctest.Wait()
		if !w.sys.Ready() {
			t.Fatal("not ready: an unloaded on-demand model must not hold readiness back")
		}
		if got := strings.Join(w.sys.ModelPaths(), ","); got != "a/,e/" {
			t.Fatalf("ModelPaths = %s, want a/ listed while unloaded", got)
		}
		if m := w.model("a/"); m.State != StateUnloaded || !m.OnDemand {
			t.Fatalf("a/ before a request: %+v", m)
		}
		if n := w.rt.loaded.Load(); n != 1 {
			t.Fatalf("%d models loaded before a request, want only the eager one", n)
		}
		if res := w.infer("a/", 3); res.Err != nil || res.Outputs[0].Float32s()[0] != 3 {
			t.Fatalf("first request for a/: %+v", res)
		}
		if m := w.model("a/"); m.State != StateReady {
			t.Fatalf("a/ after its first request: %+v", m)
		}
		if res := w.infer("a/", 4); res.Err != nil {
			t.Fatal(res.Err)
		}
		for labels, want := range map[[3]string]float64{{"a/", "ok", "demand"}: 1, {"e/", "ok", "eager"}: 1} {
			if n := w.metric("grove_model_loads_total", map[string]string{"model": labels[0], "result": labels[1], "reason": labels[2]}); n != want {
				t.Errorf("loads %v = %v, want %v", labels, n, want)
			}
		}
		if h, m := w.metric("grove_model_demand_hits_total", nil), w.metric("grove_model_demand_misses_total", nil); h != 1 || m != 1 {
			t.Errorf("demand hits %v, misses %v; want 1 and 1", h, m)
		}
		mem := w.sys.Status().Memory
		if mem == nil || mem.Loaded != 1 || mem.Unloaded != 0 || !slices.Equal(mem.UnloadOrder, []string{"a/"}) {
			t.Errorf("memory status %+v", mem)
		}
	})
}

func TestConcurrentRequestsForAnUnloadedModelShareOneLoad(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		w := newWorld(t, configJSON(entry("a/", "", onDemandLoad)), map[string]faultySpec{"a/": version(1)})
		defer w.stop()
		synctest.Wait()
		w.rt.gate = make(chan struct{})
		var wg sync.WaitGroup
		errs := make([]error, 8)
		for i := range errs {
			wg.Go(func() { errs[i] = w.infer("a/", float32(i)).Err })
		}
		synctest.Wait() // all parked, the one load held at the gate
		if m := w.model("a/"); m.State != StateLoading {
			t.Errorf("a/ while its load runs: %s", m.State)
		}
		close(w.rt.gate)
		wg.Wait()
		for i, err := range errs {
			if err != nil {
				t.Errorf("request %d: %v", i, err)
			}
		}
		if n := w.rt.loaded.Load(); n != 1 {
			t.Errorf("%d loads, want 1 shared by every request", n)
		}
	})
}

func TestARequestWhoseDeadlineEndsWhileItsModelLoadsGetsModelIsLoadingNotAHang(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		w := newWorld(t, configJSON(entry("a/", "", onDemandLoad)), map[string]faultySpec{"a/": version(1)})
		defer w.stop()
		synctest.Wait()
		w.rt.gate = make(chan struct{})
		ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
		defer cancel()
		res, err := w.sys.Infer(ctx, []Request{{API: "test", ModelPath: "a/", Inputs: scalar(t, 1)}})
		if err != nil {
			t.Fatal(err)
		}
		var le *LoadingError
		if !errors.As(res[0].Err, &le) || servables.KindOf(res[0].Err) != servables.Unavailable || !strings.Contains(res[0].Err.Error(), "model a/ is loading") {
			t.Fatalf("got %v, want Unavailable \"model a/ is loading\"", res[0].Err)
		}
		if s, ok := RetryAfter(res[0].Err); !ok || s < 1 {
			t.Errorf("RetryAfter = %d, %v", s, ok)
		}
		if _, ok := RetryAfter(ErrModelNotFound); ok {
			t.Error("RetryAfter of another error reports one")
		}
		close(w.rt.gate)
		synctest.Wait()
		if res := w.infer("a/", 2); res.Err != nil {
			t.Fatalf("after the load: %v", res.Err)
		}
	})
}

// TestAnOnDemandModelsDefaultTimeoutEndsAWaitForItsLoad: a request with
// no deadline of its own waits at most the model's default_timeout_ms.
func TestAnOnDemandModelsDefaultTimeoutEndsAWaitForItsLoad(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		w := newWorld(t, configJSON(entry("a/", "", onDemandLoad+`, "default_timeout_ms": 300`)), map[string]faultySpec{"a/": version(1)})
		defer w.stop()
		synctest.Wait()
		w.rt.gate = make(chan struct{})
		start := time.Now()
		res := w.infer("a/", 1)
		if _, ok := RetryAfter(res.Err); !ok || time.Since(start) != 300*time.Millisecond {
			t.Fatalf("after %v: %v, want \"model is loading\" at 300ms", time.Since(start), res.Err)
		}
		close(w.rt.gate)
		// The load ends before the system stops: its result sent to a
		// stopped supervisor would start a dead-letter goroutine that
		// outlives the bubble.
		synctest.Wait()
	})
}

// A shadow copy another node forwarded for an on-demand model loading
// here waits for the load only until its start-by, not to the end of its
// call's deadline (which leaves room for its run), nor to the model's
// default_timeout_ms: it is then answered "model is loading", unrun.
func TestAForwardedShadowCopyWaitsForItsModelsLoadUntilItsStartBy(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		w := newWorld(t, configJSON(entry("a/", "", onDemandLoad+`, "default_timeout_ms": 5000`)), map[string]faultySpec{"a/": version(1)})
		defer w.stop()
		synctest.Wait()
		w.rt.gate = make(chan struct{})
		ctx, cancel := context.WithTimeout(context.Background(), 31*time.Second)
		defer cancel()
		start := time.Now()
		_, err := w.sys.Predict(ctx, forward.ForwardedRequest{Request: forward.Request{ModelPath: "a/", Inputs: scalar(t, 1), RequestID: "r",
			Priority: forward.Shadow, API: "test", StartBy: start.Add(time.Second)}, Peer: "n2"})
		waited := time.Since(start)
		close(w.rt.gate)
		synctest.Wait()
		if _, ok := RetryAfter(err); !ok || waited != time.Second {
			t.Errorf("after %v: %v, want \"model is loading\" at its start-by (1s)", waited, err)
		}
		if n := w.rt.calls.Load(); n != 0 {
			t.Errorf("the model ran %d requests after its load, want none: the copy was answered", n)
		}
	})
}

func TestAFailingOnDemandLoadAnswersItsCallersWithTheErrorAndIsRetriedAfterABackoff(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		w := newWorld(t, configJSON(entry("a/", "", onDemandLoad)), map[string]faultySpec{"a/": {FailLoad: true}})
		defer w.stop()
		synctest.Wait()
		res := w.infer("a/", 1)
		if servables.KindOf(res.Err) != servables.Unavailable || !strings.Contains(res.Err.Error(), "could not be loaded") || !strings.Contains(res.Err.Error(), "asked to fail loading") {
			t.Fatalf("first request: %v, want Unavailable with the load error", res.Err)
		}
		// Within the backoff: the same answer at once, no new load.
		w.putModel("a/", version(1))
		if res := w.infer("a/", 1); res.Err == nil || !strings.Contains(res.Err.Error(), "asked to fail loading") {
			t.Fatalf("within the backoff: %v", res.Err)
		}
		if n := w.metric("grove_model_loads_total", map[string]string{"model": "a/", "result": "failed", "reason": "demand"}); n != 1 {
			t.Fatalf("failed loads %v, want 1", n)
		}
		if m := w.model("a/"); m.State != StateFailed || m.RetryAt == nil {
			t.Fatalf("a/ after its failure: %+v\n%s", m, w.log)
		}
		time.Sleep(time.Second)
		if res := w.infer("a/", 5); res.Err != nil || res.Outputs[0].Float32s()[0] != 5 {
			t.Fatalf("after the backoff: %+v", res)
		}
	})
}

func TestTheMemoryBudgetUnloadsTheLeastRecentlyUsedIdleOnDemandModel(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		size := int64(len(mustSpec(t, version(1))))
		w := newWorld(t, configJSON(entry("e/", "", ""), entry("a/", "", onDemandLoad), entry("b/", "", onDemandLoad), entry("c/", "", onDemandLoad)),
			map[string]faultySpec{"e/": version(0), "a/": version(1), "b/": version(2), "c/": version(3)},
			unmeasured, func(_ *world, o *Options) { o.MemoryBudget, o.MemoryFactor = 3*size+size/2, 1 })
		defer w.stop()
		synctest.Wait()
		for _, p := range []string{"a/", "b/"} {
			if res := w.infer(p, 1); res.Err != nil {
				t.Fatal(res.Err)
			}
			time.Sleep(time.Second)
		}
		if res := w.infer("a/", 1); res.Err != nil { // b/ is now the least recently used
			t.Fatal(res.Err)
		}
		time.Sleep(time.Second)
		if res := w.infer("c/", 1); res.Err != nil {
			t.Fatal(res.Err)
		}
		synctest.Wait()
		for p, want := range map[string]State{"e/": StateReady, "a/": StateReady, "b/": StateUnloaded, "c/": StateReady} {
			if got := w.model(p).State; got != want {
				t.Errorf("%s: %s, want %s", p, got, want)
			}
		}
		if n := w.metric("grove_model_unloads_total", map[string]string{"model": "b/", "reason": "budget"}); n != 1 {
			t.Errorf("budget unloads of b/ = %v, want 1", n)
		}
		mem := w.sys.Status().Memory
		if mem == nil || mem.BudgetBytes != 3*size+size/2 || mem.UsedBytes != 3*size || mem.Loaded != 2 || mem.Unloaded != 1 ||
			!slices.Equal(mem.UnloadOrder, []string{"a/", "c/"}) {
			t.Errorf("memory status %+v (size %d)", mem, size)
		}
		if n := w.metric("grove_memory_used_bytes", nil); n != float64(3*size) {
			t.Errorf("grove_memory_used_bytes = %v", n)
		}
		// b/ comes back on demand; a/ (used before c/) makes room.
		if res := w.infer("b/", 2); res.Err != nil {
			t.Fatal(res.Err)
		}
		synctest.Wait()
		if a, b := w.model("a/").State, w.model("b/").State; a != StateUnloaded || b != StateReady {
			t.Errorf("after b/ again: a/ %s, b/ %s", a, b)
		}
		if l, c := w.rt.loaded.Load(), w.rt.closed.Load(); l-c != 3 {
			t.Errorf("%d servables open, want 3 (e/ and two on-demand models)", l-c)
		}
	})
}

func mustSpec(t *testing.T, spec faultySpec) []byte {
	t.Helper()
	_, data := modelFile(t, "x/", spec)
	return data
}

// TestARuntimesFirstLoadCountsItsGrowthAsTheRuntimesStartUpNotTheModels:
// the first load of a runtime grows the process by the runtime's own
// start-up too, which stays after the model is unloaded: that model is
// counted at its estimate, the growth shown as the runtime's start-up;
// the runtime's next load is counted at what it measured.
func TestARuntimesFirstLoadCountsItsGrowthAsTheRuntimesStartUpNotTheModels(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var rss atomic.Int64
		rss.Store(1 << 20)
		size := int64(len(mustSpec(t, version(1))))
		w := newWorld(t, configJSON(entry("a/", "", onDemandLoad), entry("b/", "", onDemandLoad)),
			map[string]faultySpec{"a/": version(1), "b/": version(2)},
			func(_ *world, o *Options) { o.residentBytes, o.MemoryBudget, o.MemoryFactor = rss.Load, 1<<30, 1 })
		defer w.stop()
		synctest.Wait()
		load := func(path string, grows int64) {
			w.rt.gate = make(chan struct{})
			done := make(chan error)
			go func() { done <- w.infer(path, 1).Err }()
			synctest.Wait() // the load measured the memory before it and waits at the gate
			rss.Add(grows)
			close(w.rt.gate)
			if err := <-done; err != nil {
				t.Fatal(err)
			}
		}
		load("a/", 50_000)
		load("b/", 3*size)
		synctest.Wait()
		mem := w.sys.Status().Memory
		if mem == nil || mem.RuntimeStartBytes["faulty"] != 50_000 {
			t.Fatalf("memory status %+v, want the faulty runtime's start-up at 50000 bytes", mem)
		}
		if mem.UsedBytes != size+3*size {
			t.Errorf("used %d bytes, want %d: a/ at its estimate (%d bytes of files), b/ at its measured %d", mem.UsedBytes, 4*size, size, 3*size)
		}
	})
}

func TestAnOnDemandModelIdleForIdleUnloadAfterIsUnloadedAndLoadsAgainOnItsNextRequest(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		w := newWorld(t, configJSON(entry("a/", "", onDemandLoad), entry("e/", "", "")), map[string]faultySpec{"a/": version(1), "e/": version(2)},
			func(_ *world, o *Options) { o.IdleUnloadAfter = 10 * time.Second })
		defer w.stop()
		synctest.Wait()
		if res := w.infer("a/", 1); res.Err != nil {
			t.Fatal(res.Err)
		}
		time.Sleep(6 * time.Second)
		if res := w.infer("a/", 2); res.Err != nil {
			t.Fatal(res.Err)
		}
		time.Sleep(9 * time.Second)
		synctest.Wait()
		if st := w.model("a/").State; st != StateReady {
			t.Fatalf("a/ 9s after its last request: %s, want ready", st)
		}
		time.Sleep(2 * time.Second)
		synctest.Wait()
		if a, e := w.model("a/").State, w.model("e/").State; a != StateUnloaded || e != StateReady {
			t.Fatalf("11s after a/'s last request: a/ %s, e/ %s; want unloaded, and the eager e/ ready", a, e)
		}
		if n := w.metric("grove_model_unloads_total", map[string]string{"model": "a/", "reason": "idle"}); n != 1 {
			t.Errorf("idle unloads of a/ = %v, want 1", n)
		}
		if l, c := w.rt.loaded.Load(), w.rt.closed.Load(); l-c != 1 {
			t.Errorf("%d servables open, want 1 (e/)", l-c)
		}
		if res := w.infer("a/", 3); res.Err != nil || res.Outputs[0].Float32s()[0] != 3 {
			t.Fatalf("a/ after its idle unload: %+v", res)
		}
		if n := w.metric("grove_model_loads_total", map[string]string{"model": "a/", "result": "ok", "reason": "demand"}); n != 2 {
			t.Errorf("demand loads of a/ = %v, want 2", n)
		}
	})
}

// TestTheStatusReadRightAfterAnAnswerShowsTheLoadThatServedIt: the status
// is built when read, after the event being handled; a read that comes
// as soon as an on-demand load's request is answered (before the
// supervisor is done with the event that loaded it) shows the model
// loaded, and the one the budget unloaded for it unloaded.
func TestTheStatusReadRightAfterAnAnswerShowsTheLoadThatServedIt(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		w := oneModelBudgetWorld(t)
		defer w.stop()
		synctest.Wait()
		for i := range 40 {
			p, other := "a/", "b/"
			if i%2 == 1 {
				p, other = other, p
			}
			if res := w.infer(p, 1); res.Err != nil {
				t.Fatal(res.Err)
			}
			if got := w.model(p).State; got != StateReady {
				t.Fatalf("request %d: %s just answered shows %s, want ready", i, p, got)
			}
			if i > 0 {
				if got := w.model(other).State; got != StateUnloaded {
					t.Fatalf("request %d: %s unloaded for %s shows %s", i, other, p, got)
				}
			}
		}
	})
}

// TestStatusAfterStopIsTheLastOneAndDoesNotWait: once the supervisor has
// stopped, a read of the status returns the last snapshot at once.
func TestStatusAfterStopIsTheLastOneAndDoesNotWait(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		w := newWorld(t, configJSON(entry("a/", "", onDemandLoad)), map[string]faultySpec{"a/": version(1)})
		synctest.Wait()
		if res := w.infer("a/", 1); res.Err != nil {
			t.Fatal(res.Err)
		}
		w.stop()
		if got := w.model("a/").State; got != StateReady {
			t.Fatalf("a/ after the stop shows %s, want the last state it had: ready", got)
		}
	})
}

// TestAContractsPickLoadsItsUnloadedOnDemandRelease: a release whose
// model is on demand and not loaded counts as valid, so the contract picks
// it, and that pick loads it.
func TestAContractsPickLoadsItsUnloadedOnDemandRelease(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		cfg := `{"model_metadata": [{"model_path": "a/", "load": "on_demand"}],
 "contracts": [{"organization": "ads", "project": "pctr", "contract_number": 1,
   "servables": [{"release_version": "v1", "model_path": "a/"}]}]}`
		w := newWorld(t, cfg, map[string]faultySpec{"a/": version(1)})
		defer w.stop()
		synctest.Wait()
		if got := w.model("a/").State; got != StateUnloaded {
			t.Fatalf("a/ before a call: %s", got)
		}
		res, rv, err := w.sys.Score(context.Background(), "ads/pctr/1", "", Request{API: "test", Inputs: scalar(t, 3)})
		if err != nil || res.Err != nil || rv != "v1" {
			t.Fatalf("contract call: release %q, %v, %v", rv, err, res.Err)
		}
		if got := w.model("a/").State; got != StateReady {
			t.Fatalf("a/ after the contract picked it: %s", got)
		}
	})
}

// TestAnOnDemandReleaseWaitingForItsLoadIsLoadedByItsContract: a release
// kept from traffic until its model has been loaded for valid_after_ms
// would never be picked, so no request would load it; its contract has it
// loaded, and it becomes valid valid_after_ms later. The models of
// releases that could not become valid are not loaded: never_valid, and
// min_served_events with no shadow setting.
func TestAnOnDemandReleaseWaitingForItsLoadIsLoadedByItsContract(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		cfg := `{"model_metadata": [{"model_path": "a/"}, {"model_path": "b/", "load": "on_demand"}, {"model_path": "c/", "load": "on_demand"},
   {"model_path": "d/", "load": "on_demand"}],
 "contracts": [{"organization": "ads", "project": "pctr", "contract_number": 1,
   "servables": [
     {"release_version": "v1", "model_path": "a/"},
     {"release_version": "v2", "model_path": "b/", "validity": [{"valid_after_ms": {"ms": 2000}}], "shadow": {}},
     {"release_version": "v3", "model_path": "c/", "validity": [{"never_valid": {}}]},
     {"release_version": "v4", "model_path": "d/", "validity": [{"min_served_events": {"count": 10}}]}]}]}`
		w := newWorld(t, cfg, map[string]faultySpec{"a/": version(1), "b/": version(2), "c/": version(3), "d/": version(4)})
		defer w.stop()
		synctest.Wait()
		if _, _, err := w.sys.Score(context.Background(), "ads/pctr/1", "", Request{API: "test", Inputs: scalar(t, 3)}); err != nil {
			t.Fatal(err)
		}
		synctest.Wait()
		if got := w.model("b/").State; got != StateReady {
			t.Fatalf("b/ (v2, valid_after_ms) after the contract's first call: %s, want loaded", got)
		}
		if got := w.model("c/").State; got != StateUnloaded {
			t.Fatalf("c/ (v3, never_valid): %s, want left unloaded", got)
		}
		if got := w.model("d/").State; got != StateUnloaded {
			t.Fatalf("d/ (v4, min_served_events with no shadow setting: no shadow execution would ever count): %s, want left unloaded", got)
		}
		time.Sleep(2500 * time.Millisecond)
		if _, _, err := w.sys.Score(context.Background(), "ads/pctr/1", "", Request{API: "test", Inputs: scalar(t, 3)}); err != nil {
			t.Fatal(err)
		}
		plan, err := w.sys.ContractPlan("ads/pctr/1")
		if err != nil {
			t.Fatal(err)
		}
		if s := plan.Servables[1]; !s.Valid {
			t.Fatalf("v2 %.1f s after its model loaded: not valid (%s)", 2.5, s.Reason)
		}
	})
}

// TestAReleaseWhoseModelIsUnloadedBeforeItIsValidIsReloadedAtMostOnceAMinute:
// a release whose valid_after_ms is longer than its model stays loaded
// (idle_unload_after) cannot become valid; its contract asks for the load
// again only a minute after the last time, not at every evaluation.
func TestAReleaseWhoseModelIsUnloadedBeforeItIsValidIsReloadedAtMostOnceAMinute(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		cfg := `{"model_metadata": [{"model_path": "a/"}, {"model_path": "b/", "load": "on_demand"}],
 "contracts": [{"organization": "ads", "project": "pctr", "contract_number": 1,
   "servables": [
     {"release_version": "v1", "model_path": "a/"},
     {"release_version": "v2", "model_path": "b/", "validity": [{"valid_after_ms": {"ms": 10000}}]}]}]}`
		w := newWorld(t, cfg, map[string]faultySpec{"a/": version(1), "b/": version(2)},
			func(_ *world, o *Options) { o.IdleUnloadAfter = 2 * time.Second })
		defer w.stop()
		synctest.Wait()
		call := func() {
			t.Helper()
			if _, _, err := w.sys.Score(context.Background(), "ads/pctr/1", "", Request{API: "test", Inputs: scalar(t, 3)}); err != nil {
				t.Fatal(err)
			}
			synctest.Wait()
		}
		loads := func() float64 {
			return w.metric("grove_model_loads_total", map[string]string{"model": "b/", "result": "ok", "reason": "demand"})
		}
		call()
		if n := loads(); n != 1 {
			t.Fatalf("b/ loaded %v times after the first call, want 1", n)
		}
		for range 20 { // 40 s of calls: b/ goes idle and is unloaded
			time.Sleep(2 * time.Second)
			call()
		}
		if n := loads(); n != 1 {
			t.Fatalf("b/ loaded %v times within a minute of the first ask, want 1", n)
		}
		if got := w.model("b/").State; got != StateUnloaded {
			t.Fatalf("b/ after 40 s of calls with idle_unload_after 2 s: %s, want unloaded", got)
		}
		time.Sleep(25 * time.Second)
		call()
		if n := loads(); n != 2 {
			t.Fatalf("b/ loaded %v times a minute after the first ask, want 2", n)
		}
	})
}

// retryIn is an error that says when to retry, as a cluster node whose
// session is lost says when it may have joined again.
type retryIn time.Duration

func (r retryIn) Error() string          { return "rejoining" }
func (r retryIn) RetryIn() time.Duration { return time.Duration(r) }

// RetryAfter reads a loading answer's estimate, from this node
// (LoadingError) or from the node loading the model (a forwarded answer
// that carries one), or another error's RetryIn, in whole seconds, at
// least 1; a forwarded failure without one, or any other error, has none.
func TestRetryAfterReadsTheEstimateOfTheNodeLoadingTheModel(t *testing.T) {
	for _, c := range []struct {
		name string
		err  error
		want int
		ok   bool
	}{
		{"loading here", &LoadingError{Path: "a/", RetryAfter: 2100 * time.Millisecond}, 3, true},
		{"loading here, no estimate", fmt.Errorf("call: %w", &LoadingError{Path: "a/"}), 1, true},
		{"loading on another node", fmt.Errorf("call: %w", &forward.RemoteError{Kind: servables.Unavailable, RetryAfter: 4 * time.Second}), 4, true},
		{"another node, no estimate", &forward.RemoteError{Kind: servables.Unavailable}, 0, false},
		{"says when to retry", fmt.Errorf("forward: %w", retryIn(1500*time.Millisecond)), 2, true},
		{"says no time to retry", retryIn(0), 0, false},
		{"not loading", ErrModelNotFound, 0, false},
	} {
		if s, ok := RetryAfter(c.err); s != c.want || ok != c.ok {
			t.Errorf("%s: RetryAfter = %d, %v; want %d, %v", c.name, s, ok, c.want, c.ok)
		}
	}
}

// Under a budget that holds one model, a request for a/ and then one for
// b/: b/ waits for room while a/ loads. When a/ goes into service, the
// budget must not take it out in the same step to make room for b/,
// before a/'s waiting request reached it: a/ answers, is unloaded for
// b/ once idle, and loads again for a later request. (Unloaded in the
// same step, a/ kept its slot asked for, so its request waited to its
// deadline and no later request ever loaded it again.)
func TestAModelLoadedOnDemandAnswersItsWaitingRequestsBeforeTheBudgetUnloadsIt(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		w := oneModelBudgetWorld(t)
		defer w.stop()
		synctest.Wait()
		w.rt.gate = make(chan struct{})
		call := func(path string) error {
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			res, err := w.sys.Infer(ctx, []Request{{API: "test", ModelPath: path, Inputs: scalar(t, 1)}})
			if err != nil {
				return err
			}
			return res[0].Err
		}
		a, b := make(chan error, 1), make(chan error, 1)
		go func() { a <- call("a/") }()
		synctest.Wait() // a/ loading, held at the gate
		go func() { b <- call("b/") }()
		synctest.Wait() // b/ fetched, waiting for room
		close(w.rt.gate)
		if err := <-a; err != nil {
			t.Fatalf("a/'s waiting request: %v", err)
		}
		if err := <-b; err != nil {
			t.Fatalf("b/'s waiting request: %v", err)
		}
		time.Sleep(time.Minute)
		if err := call("a/"); err != nil {
			t.Fatalf("a later request for a/: %v", err)
		}
		if n := w.metric("grove_model_loads_total", map[string]string{"model": "a/", "result": "ok"}); n != 2 {
			t.Fatalf("a/ loaded %v times, want 2 (once more after the budget unloaded it for b/)", n)
		}
	})
}

// A request that read an on-demand path's slot just before the config
// took the path off demand (removed here) finds the slot gone when it
// parks, and looks the tables up again, rather than parking where
// nothing would ever answer it.
func TestARequestOnTheSlotOfAPathNoLongerOnDemandLooksAgain(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		w := newWorld(t, configJSON(entry("a/", "", onDemandLoad), entry("e/", "", "")),
			map[string]faultySpec{"a/": version(1), "e/": version(2)})
		defer w.stop()
		synctest.Wait()
		d := w.sys.ways.demandFor("a/") // what a request read
		if d == nil {
			t.Fatal("a/ has no demand slot")
		}
		w.setConfig(configJSON(entry("e/", "", "")))
		if w.sys.ways.demandFor("a/") != nil {
			t.Fatal("a/'s slot is still published after a/ left the config")
		}
		b := newBatch(context.Background(), []Request{{API: "test", ModelPath: "a/", Inputs: scalar(t, 1)}})
		if r, ask := d.park(b, 0, nil, &w.sys.ways, time.Now(), time.Time{}); r != lookAgain || ask {
			t.Fatalf("park on the dropped slot: %v, ask %v; want lookAgain", r, ask)
		}
		if way := w.sys.ways.toModel(w.sys.as.Root.Send, b, 0, nil); way != failedHere || !errors.Is(b.results[0].Err, ErrModelNotFound) {
			t.Fatalf("looked up again: way %v, %v; want not found", way, b.results[0].Err)
		}
	})
}

// An on-demand versioned entry's own path is routable while its versions
// are unloaded: listed, and a request for it loads the version it serves
// (its highest) and is answered by it, as a request for the version is.
func TestAnOnDemandVersionedEntrysPathLoadsItsVersion(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		w := newWorld(t, versioned(`{"all": {}}`, onDemandLoad),
			map[string]faultySpec{"v/1/": version(1), "v/2/": version(2)})
		defer w.stop()
		synctest.Wait()
		if paths := w.sys.ModelPaths(); !slices.Contains(paths, "v/") {
			t.Fatalf("ModelPaths %v: want v/ listed while its versions are unloaded", paths)
		}
		if res := w.infer("v/", 1); res.Err != nil || res.ContentPath != "v/2/" {
			t.Fatalf("request for v/: %+v, want v/2/'s answer", res)
		}
		if st := w.model("v/1/").State; st != StateUnloaded {
			t.Fatalf("v/1/ is %s: a request for v/ loads only the version it serves", st)
		}
	})
}

// servesRemote is a cluster where another node has every model ready.
type servesRemote struct{ awaitingRemote }

func (servesRemote) Serves(string) bool { return true }

// A request resumed after its load was waited for is always answered:
// when its path left this node meanwhile and another node has it, it is
// told to retry (not left unanswered), and when it fails here (its
// model's queue full), the shadow copies waiting for its answer get it
// too.
func TestAResumedRequestIsAnsweredAndSoAreItsShadowCopies(t *testing.T) {
	var demand atomic.Pointer[demandTable]
	demand.Store(&demandTable{})
	ways := func(t table, remote Remote) *ways {
		var routes atomic.Pointer[table]
		routes.Store(&t)
		return &ways{routes: &routes, queueLimit: 1, metrics: NewMetrics(prometheus.NewRegistry()), remote: remote, demand: &demand, ask: func(string) {}}
	}
	parked := func() *batch {
		b := newBatch(context.Background(), []Request{{API: "test", ModelPath: "od/", Inputs: scalar(t, 1)}})
		if !b.park(0) {
			t.Fatal("not parked")
		}
		return b
	}

	// With it, one another node forwarded here, which is never forwarded
	// again: its answer is its own (not found here), not the first's.
	b, served := parked(), parked()
	served.local = true
	ways(table{}, servesRemote{}).resume(func(*actor.PID, any) { t.Error("sent to a model actor here") },
		[]parkedItem{{b: b, i: 0}, {b: served, i: 0}}, nil)
	select {
	case <-b.reply:
		if servables.KindOf(b.results[0].Err) != servables.Unavailable {
			t.Errorf("moved to another node: %v, want Unavailable", b.results[0].Err)
		}
	default:
		t.Error("a request whose model moved to another node while it waited is not answered")
	}
	select {
	case <-served.reply:
		if !errors.Is(served.results[0].Err, ErrModelNotFound) {
			t.Errorf("a request forwarded here, resumed after the first: %v, want not found", served.results[0].Err)
		}
	default:
		t.Error("a request forwarded here is not answered")
	}

	full := &content{path: "od/", busy: make([]atomic.Int64, 1)}
	full.queued.Store(1)
	b = parked()
	ans := &championAnswer{} // what its shadow copies wait on
	ways(table{"od/": full}, nil).resume(func(*actor.PID, any) {}, []parkedItem{{b: b, i: 0, ans: ans}}, nil)
	<-b.reply
	if !errors.Is(b.results[0].Err, ErrOverloaded) || !ans.done {
		t.Errorf("resumed onto a full queue: %v, shadow copies answered %v; want overloaded, and the shadows told", b.results[0].Err, ans.done)
	}
}

// A request with no deadline of its own has its on-demand model's
// default_timeout_ms from its arrival: the time it waited for the load
// counts, so a request resumed after the load is answered by then, not a
// whole default_timeout_ms after the load ended.
func TestAWaitForALoadCountsAgainstTheModelsDefaultTimeout(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		w := newWorld(t, configJSON(entry("a/", "", onDemandLoad+`, "default_timeout_ms": 300`)), map[string]faultySpec{"a/": {DelayMs: 250}})
		defer w.stop()
		synctest.Wait()
		w.rt.gate = make(chan struct{})
		go func() {
			time.Sleep(200 * time.Millisecond)
			close(w.rt.gate)
		}()
		start := time.Now()
		res := w.infer("a/", 1)
		if took := time.Since(start); took > 300*time.Millisecond {
			t.Fatalf("answered after %v (%v), past its default_timeout_ms of 300ms", took, res.Err)
		}
		if servables.KindOf(res.Err) != servables.DeadlineExceeded {
			t.Fatalf("got %v, want its deadline", res.Err)
		}
		synctest.Wait()
	})
}

// A new version of an on-demand versioned entry whose serving version
// stays loaded (busy) replaces it: the entry's path moves to it, as it
// does for an eager entry, rather than serving the old version for ever.
func TestANewVersionOfALoadedOnDemandVersionedEntryReplacesIt(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		w := newWorld(t, versioned(`{"latest": {"num_versions": 1}}`, onDemandLoad), map[string]faultySpec{"v/1/": version(1)})
		defer w.stop()
		synctest.Wait()
		if res := w.infer("v/", 1); res.Err != nil || res.ContentPath != "v/1/" {
			t.Fatalf("request for v/: %+v", res)
		}
		w.putModel("v/2/", version(2))
		for range 30 {
			w.settle()
			if res := w.infer("v/", 1); res.Err != nil {
				t.Fatal(res.Err)
			} else if res.ContentPath == "v/2/" {
				return
			}
		}
		t.Fatalf("v/ still served by %s 30 polls after v/2/ appeared (v/2/ %s)", w.infer("v/", 1).ContentPath, w.model("v/2/").State)
	})
}

// The newest version of an on-demand versioned entry is loaded by a poll
// once, when it appears. Unloaded afterwards (taking no request for
// idle_unload_after, or to make room under the memory budget for the old
// version, which callers name directly), it is not loaded again by the
// next polls, which would unload and load it over and over: like any
// on-demand model, a request loads it, one for the entry's path too.
func TestTheNewestVersionUnloadedAfterItsFirstLoadLoadsAgainOnlyOnDemand(t *testing.T) {
	size := int64(len(mustSpec(t, version(1))))
	for name, tweak := range map[string]func(*world, *Options){
		"idle":   func(_ *world, o *Options) { o.IdleUnloadAfter = 3 * time.Second },
		"budget": func(w *world, o *Options) { unmeasured(w, o); o.MemoryBudget, o.MemoryFactor = size+size/2, 1 },
	} {
		t.Run(name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				w := newWorld(t, versioned(`{"latest": {"num_versions": 2}}`, onDemandLoad), map[string]faultySpec{"v/1/": version(1)}, tweak)
				defer w.stop()
				synctest.Wait()
				loads := func(path string) float64 {
					return w.metric("grove_model_loads_total", map[string]string{"model": path, "result": "ok"})
				}
				w.putModel("v/2/", version(2))
				for i := range 20 {
					if res := w.infer("v/1/", 1); res.Err != nil || res.ContentPath != "v/1/" {
						t.Fatalf("request %d for v/1/: %+v", i, res)
					}
					w.settle()
				}
				if n := loads("v/2/"); n != 1 {
					t.Fatalf("v/2/ loaded %v times in 20 polls while callers named v/1/, want once: when it appeared", n)
				}
				if st := w.model("v/2/").State; st != StateUnloaded {
					t.Fatalf("v/2/ is %s after 20 polls of calls for v/1/, want unloaded", st)
				}
				if vs := w.versionedStatus("v/"); vs.ServingVersion != 0 {
					t.Fatalf("v/ shown serving version %d while a request for it waits for v/2/'s load", vs.ServingVersion)
				}
				if res := w.infer("v/", 1); res.Err != nil || res.ContentPath != "v/2/" {
					t.Fatalf("request for v/ while v/1/ is loaded and v/2/ not: %+v, want v/2/ loaded for it", res)
				}
				if n := loads("v/2/"); n != 2 {
					t.Fatalf("v/2/ loaded %v times after a request for v/, want 2", n)
				}
			})
		})
	}
}

// When the newest version of an on-demand versioned entry fails to load
// again for a request for the entry's path, the path goes back to the
// lower version loaded until a load of the newest succeeds, rather than
// answering the failure while a version could serve.
func TestANewestVersionFailingToLoadAgainLeavesTheEntrysPathToTheLowerVersion(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		w := newWorld(t, versioned(`{"latest": {"num_versions": 2}}`, onDemandLoad), map[string]faultySpec{"v/1/": version(1)},
			func(_ *world, o *Options) { o.IdleUnloadAfter = 3 * time.Second })
		defer w.stop()
		synctest.Wait()
		w.putModel("v/2/", version(2))
		for range 6 { // v/2/ loads at the first poll, and goes idle
			if res := w.infer("v/1/", 1); res.Err != nil {
				t.Fatal(res.Err)
			}
			w.settle()
		}
		if st := w.model("v/2/").State; st != StateUnloaded {
			t.Fatalf("v/2/ is %s, want unloaded after idle_unload_after", st)
		}
		w.putModel("v/2/", faultySpec{FailLoad: true})
		if res := w.infer("v/", 1); res.Err == nil {
			t.Fatalf("request for v/ that loads the failing v/2/: %+v, want its load's failure", res)
		}
		synctest.Wait()
		if res := w.infer("v/", 1); res.Err != nil || res.ContentPath != "v/1/" {
			t.Fatalf("request for v/ after v/2/ failed to load: %+v, want v/1/'s answer", res)
		}
		w.putModel("v/2/", version(2))
		for range 30 {
			w.settle()
			if res := w.infer("v/", 1); res.Err == nil && res.ContentPath == "v/2/" {
				return
			}
		}
		t.Fatalf("v/ still served by %s 30 polls after v/2/ was fixed (v/2/ %s)", w.infer("v/", 1).ContentPath, w.model("v/2/").State)
	})
}

// A request parked again when it is resumed (its path's content went
// away before it reached it) keeps its arrival: its model's
// default_timeout_ms still runs from when it first parked, not from when
// it parked again.
func TestARequestParkedAgainKeepsItsArrivalForTheDefaultTimeout(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		d := &demandSlot{path: "od/", timeout: 300 * time.Millisecond}
		var demand atomic.Pointer[demandTable]
		demand.Store(&demandTable{"od/": d})
		var routes atomic.Pointer[table]
		routes.Store(&table{})
		w := &ways{routes: &routes, queueLimit: 1, metrics: NewMetrics(prometheus.NewRegistry()), demand: &demand, ask: func(string) {}}
		b := newBatch(context.Background(), []Request{{API: "test", ModelPath: "od/", Inputs: scalar(t, 1)}})
		arrived := time.Now()
		if r, _ := d.park(b, 0, nil, w, arrived, time.Time{}); r != parked {
			t.Fatalf("park: %v", r)
		}
		time.Sleep(200 * time.Millisecond)
		// The load ended, but its content left before the request reached it.
		w.resume(func(*actor.PID, any) { t.Error("sent to a model actor") }, d.take(false, false), nil)
		select {
		case <-b.reply:
			t.Fatalf("answered before its deadline: %v", b.results[0].Err)
		default:
		}
		<-b.reply
		if took := time.Since(arrived); took > 300*time.Millisecond {
			t.Fatalf("answered %v after it arrived (%v), past its default_timeout_ms of 300ms", took, b.results[0].Err)
		}
	})
}
