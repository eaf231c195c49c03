package actors

import (
	"context"
	"log/slog"
	"math"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/groveml/grove/routing/quality"
	"github.com/groveml/grove/servables"
)

// shadowLog keeps the shadow executions the prediction sink is handed and
// the request ids of the served ones.
type shadowLog struct {
	mu     sync.Mutex
	shadow []shadowEvent
	served []string
}

type shadowEvent struct {
	path, requestID string
	res             Result
}

func (s *shadowLog) LogPrediction(req *Request, res *Result, served bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if served {
		s.served = append(s.served, req.RequestID)
		return
	}
	s.shadow = append(s.shadow, shadowEvent{path: req.ModelPath, requestID: req.RequestID, res: *res})
}

func (s *shadowLog) events() ([]shadowEvent, []string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]shadowEvent(nil), s.shadow...), append([]string(nil), s.served...)
}

// compareConfig is a contract whose champion v1 (a/) answers user requests
// while two shadow challengers get copies: v2 (b/) adds 0.2 to every
// value and takes three times the champion's forward time; v3 (c/) gives
// the same answers at once, before the champion's (so its comparisons wait
// for the champion's answer).
const compareConfig = `{"model_metadata": [{"model_path": "a/"}, {"model_path": "b/"}, {"model_path": "c/"}],
 "contracts": [{"organization": "ads", "project": "pctr", "contract_number": 1,
   "servables": [
     {"release_version": "v1", "model_path": "a/"},
     {"release_version": "v2", "model_path": "b/", "validity": [{"never_valid": {}}], "shadow": {}},
     {"release_version": "v3", "model_path": "c/", "validity": [{"never_valid": {}}], "shadow": {}}]}]}`

func compareModels() map[string]faultySpec {
	return map[string]faultySpec{
		"a/": {ErrorOn: f64(-1001), DelayMs: 2},
		"b/": {ErrorOn: f64(-1002), DelayMs: 6, Add: 0.2},
		"c/": {ErrorOn: f64(-1003)},
	}
}

func TestShadowAnswersAreComparedWithTheAnswerTheCallerGot(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		sink := &shadowLog{}
		w := newWorld(t, compareConfig, compareModels(), func(_ *world, o *Options) { o.Predictions = sink; o.CompareWindow = 5 })
		defer w.stop()
		synctest.Wait()
		score := func(id string, vals ...float32) Result {
			t.Helper()
			res, rv, err := w.sys.Score(context.Background(), "ads/pctr/1", "", Request{API: "test", RequestID: id, Inputs: column(t, vals...)})
			if err != nil || rv != "v1" {
				t.Fatalf("score: %v, answered by %q", err, rv)
			}
			time.Sleep(20 * time.Millisecond) // the shadow copies run and are compared
			synctest.Wait()
			return res
		}
		for range 8 {
			if res := score("req-1", 0.1, 0.45, 0.55, 0.9); res.Err != nil {
				t.Fatal(res.Err)
			}
		}
		score("", 0.3) // no request id: the router gives it one
		if res := score("req-champion-fails", -1001); res.Err == nil {
			t.Fatal("the champion answered its error value")
		}
		score("req-c-fails", -1003)

		st, err := w.sys.ContractStats("ads/pctr/1")
		if err != nil {
			t.Fatal(err)
		}
		byRelease := map[string]ServableStats{}
		for _, s := range st {
			byRelease[s.Release] = s
		}
		if byRelease["v1"].Comparison != nil {
			t.Errorf("the champion has a comparison: %+v", byRelease["v1"].Comparison)
		}
		// v2: 10 compared executions (8 + 1 + the one c/ failed), the
		// champion's failure apart; every value 0.2 off.
		b := byRelease["v2"].Comparison
		if b == nil {
			t.Fatal("no comparison for the shadow v2")
		}
		s := b.SinceStart
		if s.Executions != 10 || s.Errors != 0 || s.ChampionFailed != 1 || s.Mismatches != 0 || len(s.Outputs) != 1 {
			t.Fatalf("v2 since start: %+v", s)
		}
		// float32 values near 1000 (the failing ones) add 0.2 to within 1e-4.
		if math.Abs(s.MeanAbsDiff-0.2) > 1e-4 || math.Abs(s.MaxAbsDiff-0.2) > 1e-4 || s.WithinTolerance != 0 {
			t.Errorf("v2 diffs: mean %v max %v within %v, want 0.2, 0.2, 0", s.MeanAbsDiff, s.MaxAbsDiff, s.WithinTolerance)
		}
		// Agreement: of 8×4 + 2 rows, 0.45 → 0.65 and 0.3 → 0.5 cross 0.5.
		if want := float64(8*3+1) / float64(8*4+2); s.Agreement == nil || math.Abs(*s.Agreement-want) > 1e-9 {
			t.Errorf("v2 agreement %v, want %v", s.Agreement, want)
		}
		if math.Abs(s.P50Ratio-3) > 0.3 || math.Abs(s.P99Ratio-3) > 0.3 {
			t.Errorf("v2 latency ratios %v %v, want 3", s.P50Ratio, s.P99Ratio)
		}
		if b.N != 5 || b.LastN.Executions+b.LastN.ChampionFailed != 5 || b.LastN.ChampionFailed != 1 || b.Last5m.Executions != 10 || b.Tolerance != quality.DefaultCompareTolerance {
			t.Errorf("v2 windows: n %d, last N %d, last 5m %d, tolerance %v", b.N, b.LastN.Executions, b.Last5m.Executions, b.Tolerance)
		}
		// v3: the same answers, compared after waiting for the champion's;
		// its own failure counts against it.
		c := byRelease["v3"].Comparison.SinceStart
		if c.Executions != 10 || c.Errors != 1 || c.ChampionFailed != 1 || c.MeanAbsDiff != 0 || c.MaxAbsDiff != 0 ||
			c.WithinTolerance != 1 || *c.Agreement != 1 || math.Abs(c.ErrorRate-0.1) > 1e-9 {
			t.Errorf("v3 since start: %+v", c)
		}

		// /metrics says the same.
		for _, m := range []struct {
			name   string
			labels map[string]string
			want   float64
		}{
			{"grove_shadow_compare_executions", map[string]string{"contract": "ads/pctr/1", "release": "v2", "window": "since_start"}, 10},
			{"grove_shadow_compare_executions", map[string]string{"release": "v2", "window": "last_n"}, 4},
			{"grove_shadow_compare_champion_failed", map[string]string{"release": "v2", "window": "last_5m"}, 1},
			{"grove_shadow_compare_errors", map[string]string{"release": "v3", "window": "since_start"}, 1},
			{"grove_shadow_compare_mean_abs_diff", map[string]string{"release": "v2", "output": "", "window": "since_start"}, 0.2},
			{"grove_shadow_compare_max_abs_diff", map[string]string{"release": "v3", "window": "last_5m"}, 0},
			{"grove_shadow_compare_within_tolerance_ratio", map[string]string{"release": "v3", "window": "since_start"}, 1},
			{"grove_shadow_compare_agreement_ratio", map[string]string{"release": "v2", "window": "since_start"}, *s.Agreement},
			{"grove_shadow_compare_latency_ratio", map[string]string{"release": "v2", "window": "since_start", "quantile": "0.99"}, s.P99Ratio},
		} {
			if got := w.metric(m.name, m.labels); math.Abs(got-m.want) > 1e-4 {
				t.Errorf("%s%v = %v, want %v", m.name, m.labels, got, m.want)
			}
		}

		// The routing policy's Comparison, for promote_when.
		var gate map[string]float64
		if err := w.sys.askRouter(context.Background(), func(r *routerActor) {
			cs, routes, now := r.contracts["ads/pctr/1"], *r.routes.Load(), time.Now()
			g2, g3 := cs.comparison("v2", localContent(routes["b/"]), now), cs.comparison("v3", localContent(routes["c/"]), now)
			gate = map[string]float64{"v2 executions": float64(g2.Executions), "v2 diff": g2.MeanAbsDiff, "v2 p99": g2.P99Ratio,
				"v3 errors": float64(g3.Errors), "v3 diff": g3.MeanAbsDiff, "v1": cs.comparison("v1", localContent(routes["a/"]), now).MeanAbsDiff}
		}); err != nil {
			t.Fatal(err)
		}
		if gate["v2 executions"] != 10 || math.Abs(gate["v2 diff"]-0.2) > 1e-4 || math.Abs(gate["v2 p99"]-3) > 0.3 ||
			gate["v3 errors"] != 1 || gate["v3 diff"] != 0 || gate["v1"] != 0 {
			t.Errorf("routing comparison %v", gate)
		}

		// The prediction log: each shadow event names the answer it was
		// compared with and carries the figures.
		shadows, served := sink.events()
		if len(shadows) != 22 || len(served) != 11 {
			t.Fatalf("%d shadow and %d served events, want 22 and 11", len(shadows), len(served))
		}
		for _, ev := range shadows {
			cmp := ev.res.Comparison
			if cmp == nil {
				t.Fatalf("shadow event of %s for %s not compared", ev.path, ev.requestID)
			}
			if cmp.RequestID == "" || cmp.RequestID != ev.requestID || cmp.Release != "v1" {
				t.Errorf("shadow event of %s names request %q (release %q), its request is %q", ev.path, cmp.RequestID, cmp.Release, ev.requestID)
			}
			switch {
			case ev.requestID == "req-champion-fails":
				if !cmp.ChampionFailed || len(cmp.Outputs) != 0 {
					t.Errorf("champion failure: %+v", cmp)
				}
			case ev.path == "c/" && ev.requestID == "req-c-fails":
				if ev.res.Err == nil || len(cmp.Outputs) != 0 {
					t.Errorf("shadow failure: %+v", cmp)
				}
			case ev.path == "b/":
				if len(cmp.Outputs) != 1 || math.Abs(cmp.Outputs[0].MaxAbsDiff-0.2) > 1e-4 || cmp.ChampionCompute != 2*time.Millisecond {
					t.Errorf("b/ comparison %+v", cmp)
				}
			}
		}
		if generated := served[8]; len(generated) != 32 {
			t.Errorf("the request sent without an id was logged as %q, want a generated one", generated)
		}
	})
}

// A caller whose deadline passes before the champion answers got no
// outputs: the shadow copies have nothing to compare with.
func TestAShadowOfARequestAnsweredByItsDeadlineIsNotCompared(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		sink := &shadowLog{}
		w := newWorld(t, compareConfig, compareModels(), func(_ *world, o *Options) { o.Predictions = sink })
		defer w.stop()
		synctest.Wait()
		ctx, cancel := context.WithTimeout(context.Background(), time.Millisecond)
		defer cancel()
		res, _, err := w.sys.Score(ctx, "ads/pctr/1", "", Request{API: "test", RequestID: "late", Inputs: column(t, 0.5)})
		if err != nil || servables.KindOf(res.Err) != servables.DeadlineExceeded {
			t.Fatalf("got %v %v, want the deadline's answer", err, res.Err)
		}
		time.Sleep(10 * time.Millisecond)
		synctest.Wait()
		st, err := w.sys.ContractStats("ads/pctr/1")
		if err != nil {
			t.Fatal(err)
		}
		for _, s := range st[1:] {
			if c := s.Comparison.SinceStart; c.Executions != 0 || c.ChampionFailed != 1 {
				t.Errorf("%s: %+v, want nothing compared and the champion's failure counted", s.Release, c)
			}
		}
	})
}

// A shadow copy that finished before the champion answered is compared by
// a job on the low-priority workers; when their queue is full, it is
// logged without a comparison and counted, never compared on the
// champion's goroutine.
func TestAShadowWaitingForTheChampionIsComparedOnTheLowPriorityWorkers(t *testing.T) {
	for _, tc := range []struct {
		name     string
		workers  int
		compared bool
	}{{"a worker free", 1, true}, {"the queue full", 0, false}} {
		t.Run(tc.name, func(t *testing.T) {
			low := newLowPriority(tc.workers, tc.workers, slog.New(slog.DiscardHandler), nil) // no worker: no queue either
			defer low.stop()
			m := NewMetrics(prometheus.NewRegistry())
			sink := &recordingSink{done: make(chan struct{}, 1)}
			w := newCompareWindows(10)
			c := &content{id: 1, path: "b/"}
			ans := &championAnswer{requestID: "r1", release: "v1", low: low}
			sc := &shadowCopy{req: Request{RequestID: "r1"}, on: localContent(c), outs: make([][]servables.Tensor, 1), pending: 1, sink: sink, metrics: m,
				ans: ans, windows: w, tol: 0.01, start: time.Now()}
			sc.finish(0, column(t, 0.5, 0.7), nil, 0, time.Millisecond)
			select {
			case <-sink.done:
				t.Fatal("logged before the champion answered")
			default:
			}
			ans.answer(column(t, 0.5, 0.2), false, time.Millisecond)
			<-sink.done
			sink.mu.Lock()
			logged := sink.logged[0]
			sink.mu.Unlock()
			if got := w.comparison(1, time.Now()).Executions; (got == 1) != tc.compared || (logged.Comparison != nil) != tc.compared {
				t.Fatalf("compared %d times, logged comparison %+v; want compared %v", got, logged.Comparison, tc.compared)
			}
			if tc.compared && math.Abs(logged.Comparison.Outputs[0].MaxAbsDiff-0.5) > 1e-6 {
				t.Errorf("comparison %+v, want a largest difference of 0.5", logged.Comparison.Outputs[0])
			}
			if shed := testutil.ToFloat64(m.compareShed.WithLabelValues("b/")); (shed == 1) == tc.compared {
				t.Errorf("shed count %v", shed)
			}
		})
	}
}

// A shadow copy cut into micro-batches whose outputs Grove cannot join (a
// scalar output) is not compared: that is Grove's limit, not an error of
// the challenger, and must not count against it in promote_when's error
// rate.
func TestAShadowWhoseMicroBatchesCannotBeJoinedIsNotCompared(t *testing.T) {
	m := NewMetrics(prometheus.NewRegistry())
	sink := &recordingSink{done: make(chan struct{}, 1)}
	w := newCompareWindows(10)
	ans := &championAnswer{requestID: "r1", release: "v1"}
	ans.answer(column(t, 0.5, 0.7), false, time.Millisecond)
	sc := &shadowCopy{req: Request{RequestID: "r1"}, on: localContent(&content{id: 1, path: "b/"}), outs: make([][]servables.Tensor, 2), pending: 2, sink: sink, metrics: m,
		ans: ans, windows: w, tol: 0.01, start: time.Now()}
	scalar := func(v float32) []servables.Tensor {
		x, err := servables.NewTensor("x", servables.Float32, nil)
		if err != nil {
			t.Fatal(err)
		}
		x.Float32s()[0] = v
		return []servables.Tensor{x}
	}
	sc.finish(0, scalar(0.5), nil, 0, time.Millisecond)
	sc.finish(1, scalar(0.7), nil, 0, time.Millisecond)
	<-sink.done
	if c := w.comparison(1, time.Now()); c.Executions != 0 || c.Errors != 0 {
		t.Errorf("comparison %+v, want the unjoinable copy left out", c)
	}
	sink.mu.Lock()
	defer sink.mu.Unlock()
	if res := sink.logged[0]; res.Err == nil || res.Comparison != nil {
		t.Errorf("logged %+v, want the join error and no comparison", res)
	}
}
