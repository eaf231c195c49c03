package actors

import (
	"context"
	"log/slog"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/groveml/grove/conf/modelconfig"
	"github.com/groveml/grove/servables"
)

// rollbackConfig is a contract whose v1 (a/) serves and whose v2 (b/)
// becomes valid a second after loading, phases in over a minute under
// the latest router, and is rolled back if over 1 % of its first 20
// requests fail.
const rollbackConfig = `{"model_metadata": [{"model_path": "a/"}, {"model_path": "b/"}],
 "contracts": [{"organization": "ads", "project": "pctr", "contract_number": 1, "router": "latest",
   "servables": [
     {"release_version": "v1", "model_path": "a/"},
     {"release_version": "v2", "model_path": "b/", "validity": [{"valid_after_ms": {"ms": 1000}}],
      "phase_in": {"linear_over_secs": {"secs": 60}}, "rollback_when": {"min_requests": 20, "max_error_rate": 0.01}}]}]}`

// failingOn7 is a model that fails every request holding 7.
var failingOn7 = faultySpec{ErrorOn: f64(7)}

// scoreN sends n requests holding v through the contract and counts the
// releases that answered; the answers of v2 must be errors if v2Fails.
func scoreN(t *testing.T, sys *System, n int, v float32, v2Fails bool) map[string]int {
	t.Helper()
	got := map[string]int{}
	for range n {
		res, rv, err := sys.Score(context.Background(), "ads/pctr/1", "", Request{API: "test", Inputs: scalar(t, v)})
		if err != nil {
			t.Fatal(err)
		}
		if (res.Err != nil) != (rv == "v2" && v2Fails) {
			t.Fatalf("%s answered %v", rv, res.Err)
		}
		got[rv]++
	}
	return got
}

// sharedRecord reads release rv of ads/pctr/1 from the contract state object.
func sharedRecord(t *testing.T, b *memBucket, rv string) modelconfig.ServableRecord {
	t.Helper()
	st, err := modelconfig.ParseContractState(b.get(modelconfig.StatePath("model_config.json")))
	if err != nil {
		t.Fatal(err)
	}
	return st.Record("ads/pctr/1", rv)
}

// logCapture is a System's log at debug level, which the test reads
// while it runs (String).
type logCapture struct {
	logBuffer
}

// option makes the System log to c.
func (c *logCapture) option() func(*world, *Options) {
	return func(_ *world, o *Options) {
		o.Logger = slog.New(slog.NewTextHandler(&c.logBuffer, &slog.HandlerOptions{Level: slog.LevelDebug}))
	}
}

// updateB puts spec at b/, names its checksum in cfg (an in-place
// update) and waits until b/ serves it.
func (w *world) updateB(cfg string, spec faultySpec) {
	w.t.Helper()
	sum := w.putModel("b/", spec)
	w.setConfig(strings.Replace(cfg, `{"model_path": "b/"}`, `{"model_path": "b/", "checksum": "`+sum+`"}`, 1))
	for w.model("b/").Checksum != sum {
		time.Sleep(10 * time.Millisecond)
	}
}

// v2Stats returns the stats of v2.
func v2Stats(t *testing.T, sys *System) ServableStats {
	t.Helper()
	stats, err := sys.ContractStats("ads/pctr/1")
	if err != nil || len(stats) != 2 {
		t.Fatalf("stats: %v %+v", err, stats)
	}
	return stats[1]
}

func TestAPhasedInReleaseWhoseErrorsCrossTheBoundIsRolledBack(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		logs := &logCapture{}
		w := newWorld(t, rollbackConfig, map[string]faultySpec{"a/": version(1), "b/": failingOn7}, logs.option())
		defer w.stop()
		time.Sleep(30 * time.Second) // v2 valid and halfway through its ramp
		synctest.Wait()
		if st := v2Stats(t, w.sys); !st.Valid || st.TrafficShare < 0.4 || st.Gate == nil || st.Gate.State != "watching" {
			t.Fatalf("v2 before the requests: %+v %+v", st, st.Gate)
		}

		// Every request v2 gets fails; it is rolled back at the evaluation
		// after its 20th, and from then on v1 answers everything.
		got := scoreN(t, w.sys, 200, 7, true)
		if got["v2"] != 20 || got["v1"] != 180 {
			t.Fatalf("answers by release: %v; want v2 to get exactly its 20 judged requests", got)
		}
		const reason = "rollback_when: error rate 1 (20 of 20 requests) above max_error_rate 0.01"
		st := v2Stats(t, w.sys)
		if st.Valid || st.TrafficShare != 0 || st.ValidSince != nil || st.Gate == nil || st.Gate.State != "rolled_back" ||
			st.Gate.RollbackReason != reason || st.Gate.RolledBackAt == nil || !strings.HasPrefix(st.Reason, "rolled back at ") {
			t.Fatalf("v2 after the rollback: %+v %+v", st, st.Gate)
		}
		if n := testutil.ToFloat64(w.sys.metrics.decisions.WithLabelValues("ads/pctr/1", "v2", "rolled_back")); n != 1 {
			t.Errorf("grove_release_decisions_total{rolled_back} = %v, want 1", n)
		}
		if log := logs.String(); !strings.Contains(log, `msg="release rolled back" contract=ads/pctr/1 release=v2 model=b/`) || !strings.Contains(log, reason) {
			t.Errorf("no rollback in the log:\n%s", log)
		}

		// The shared state records it, with the content it judged.
		time.Sleep(2 * time.Second)
		synctest.Wait()
		rec := sharedRecord(t, w.b, "v2")
		if f := rec.RolledBack; f.Reason != reason || f.Checksum != checksumOf(t, "b/", failingOn7) || !f.At.Equal(*st.Gate.RolledBackAt) || !rec.ValidSince.IsZero() {
			t.Fatalf("shared record of v2: %+v", rec)
		}

		// Another replica (or this one restarted) reads the rollback and
		// keeps v2 out, though its own counters have seen nothing wrong.
		other := newWorld(t, rollbackConfig, nil, func(_ *world, o *Options) { o.Bucket = w.b })
		time.Sleep(30 * time.Second)
		synctest.Wait()
		if got := scoreN(t, other.sys, 100, 1, false); got["v1"] != 100 {
			t.Errorf("the other replica routed %v", got)
		}
		if st := v2Stats(t, other.sys); st.Valid || st.Gate == nil || st.Gate.State != "rolled_back" || st.Gate.RollbackReason != reason {
			t.Errorf("v2 on the other replica: %+v %+v", st, st.Gate)
		}
		other.stop()

		// New content for b/ (an in-place update: the config names its
		// checksum) clears the rollback: v2 is valid again a second after it
		// loads and ramps up from 0 %.
		w.updateB(rollbackConfig, version(3))
		time.Sleep(30 * time.Second)
		synctest.Wait()
		st = v2Stats(t, w.sys)
		if !st.Valid || st.TrafficShare < 0.4 || st.TrafficShare > 0.55 || st.Gate == nil || st.Gate.State != "watching" {
			t.Fatalf("v2 with new content: %+v %+v", st, st.Gate)
		}
		if got := scoreN(t, w.sys, 100, 7, false); got["v2"] < 40 {
			t.Errorf("v2 with new content got %v", got)
		}
		if rec := sharedRecord(t, w.b, "v2"); !rec.RolledBack.IsZero() || rec.ValidSince.IsZero() {
			t.Errorf("shared record of v2 with new content: %+v", rec)
		}
		if !strings.Contains(logs.String(), "release rollback cleared") {
			t.Error("the clearing is not logged")
		}
	})
}

func TestLiveCountsOnlyTheServablesFaults(t *testing.T) {
	deadline, cancel := context.WithDeadline(context.Background(), time.Now().Add(time.Hour))
	defer cancel()
	for _, tc := range []struct {
		name  string
		ctx   context.Context
		err   error
		fault bool
	}{
		{"execution", context.Background(), servables.ErrExecution, true},
		{"crash", context.Background(), servables.ErrCrashed, true},
		{"overload", context.Background(), servables.ErrOverloaded, true},
		{"unavailable", context.Background(), servables.ErrUnavailable, true},
		{"the model's deadline", context.Background(), servables.ErrDeadlineExceeded, true},
		{"the caller's deadline", deadline, servables.ErrDeadlineExceeded, false},
		{"the caller's input", context.Background(), servables.ErrInvalidInput, false},
		{"the caller went away", context.Background(), context.Canceled, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			now := time.Now()
			rc := newReleaseCounters(now)
			rc.record(tc.ctx, tc.err, now, now)
			rc.record(tc.ctx, nil, now, now.Add(time.Millisecond))
			l := rc.live.Load()
			wantReqs, wantErrs := int64(1), int64(0)
			if tc.fault {
				wantReqs, wantErrs = 2, 1
			}
			if l.requests.Load() != wantReqs || l.errors.Load() != wantErrs || rc.served.Load() != 1 {
				t.Errorf("requests %d errors %d served %d; want %d %d 1", l.requests.Load(), l.errors.Load(), rc.served.Load(), wantReqs, wantErrs)
			}
			// A new stamp starts new counters.
			if l2 := rc.liveSince(now); l2 == l || l2.requests.Load() != 0 {
				t.Errorf("the counters were not reset for a new stamp")
			}
		})
	}
}

// promoteConfig is a contract whose v1 (a/) serves and whose v2 (b/), a
// shadow, is promoted by promote_when after 10 agreeing shadow executions
// and then phases in over a minute.
const promoteConfig = `{"model_metadata": [{"model_path": "a/"}, {"model_path": "b/"}],
 "contracts": [{"organization": "ads", "project": "pctr", "contract_number": 1, "router": "latest",
   "servables": [
     {"release_version": "v1", "model_path": "a/"},
     {"release_version": "v2", "model_path": "b/", "shadow": {},
      "validity": [{"promote_when": {"min_shadow_executions": 10, "max_mean_abs_diff": 0.01, "max_error_rate": 0}}],
      "phase_in": {"linear_over_secs": {"secs": 60}}}]}]}`

func TestPromoteWhenPromotesOnlyAnAgreeingShadow(t *testing.T) {
	for _, tc := range []struct {
		name     string
		b        faultySpec
		promoted bool
	}{
		{"agreeing", version(2), true},
		{"shifted by 0.2", faultySpec{ErrorOn: f64(-1002), Add: 0.2}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				logs := &logCapture{}
				w := newWorld(t, promoteConfig, map[string]faultySpec{"a/": version(1), "b/": tc.b}, logs.option())
				defer w.stop()
				synctest.Wait()
				for i := range 12 {
					res, rv, err := w.sys.Score(context.Background(), "ads/pctr/1", "", Request{API: "test", Inputs: scalar(t, float32(i))})
					if err != nil || res.Err != nil || rv != "v1" {
						t.Fatalf("request %d: %v %v, answered by %q", i, err, res.Err, rv)
					}
					time.Sleep(20 * time.Millisecond) // the shadow copy runs and is compared
					synctest.Wait()
				}
				st := v2Stats(t, w.sys)
				n := testutil.ToFloat64(w.sys.metrics.decisions.WithLabelValues("ads/pctr/1", "v2", "promoted"))
				if !tc.promoted {
					if st.Valid || st.Gate == nil || st.Gate.State != "waiting" || st.Gate.Detail != "promote_when: mean_abs_diff 0.2 above 0.01" || n != 0 {
						t.Fatalf("the shifted challenger: %+v %+v, %v promotions", st, st.Gate, n)
					}
					return
				}
				if !st.Valid || st.Gate == nil || st.Gate.State != "promoted" || st.Gate.PromotedAt == nil || !st.Gate.PromotedAt.Equal(*st.ValidSince) || n != 1 {
					t.Fatalf("the agreeing challenger: %+v %+v, %v promotions", st, st.Gate, n)
				}
				if !strings.Contains(logs.String(), `msg="release promoted" contract=ads/pctr/1 release=v2 model=b/ reason="promote_when: 10 shadow executions (min 10), mean_abs_diff 0 ≤ 0.01, error rate 0 ≤ 0"`) {
					t.Errorf("no promotion in the log:\n%s", logs.String())
				}
				time.Sleep(2 * time.Second) // the shared-state writer
				synctest.Wait()
				if rec := sharedRecord(t, w.b, "v2"); !rec.Promoted.Equal(*st.Gate.PromotedAt) || !rec.ValidSince.Equal(*st.ValidSince) {
					t.Errorf("shared record: %+v", rec)
				}
				// Its phase-in has started: half a minute on, it takes half the traffic.
				time.Sleep(28 * time.Second)
				synctest.Wait()
				if got := scoreN(t, w.sys, 100, 1, false); got["v2"] < 40 || got["v2"] > 60 {
					t.Errorf("half-way through the ramp: %v", got)
				}
			})
		})
	}
}

// slowConfig is rollbackConfig judging v2 on its p99 over 5 requests.
var slowConfig = strings.Replace(rollbackConfig, `"rollback_when": {"min_requests": 20, "max_error_rate": 0.01}`, `"rollback_when": {"min_requests": 5, "max_p99_ms": 20}`, 1)

// rollBackASlowRelease starts slowConfig with a v2 answering in 30 ms,
// halfway up its ramp, and sends 100 requests: v2 must get exactly its 5
// judged ones and be rolled back. The caller stops the world.
func rollBackASlowRelease(t *testing.T) *world {
	t.Helper()
	w := newWorld(t, slowConfig, map[string]faultySpec{"a/": version(1), "b/": {ErrorOn: f64(-1002), DelayMs: 30}})
	time.Sleep(30 * time.Second)
	synctest.Wait()
	if got := scoreN(t, w.sys, 100, 1, false); got["v2"] != 5 {
		t.Fatalf("answers by release: %v; want v2 to get exactly its 5 judged requests", got)
	}
	return w
}

func TestAPhasedInReleaseTooSlowIsRolledBack(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		w := rollBackASlowRelease(t)
		defer w.stop()
		// The window's p99 is the geometric middle of the 5 % bucket holding 30 ms.
		if st := v2Stats(t, w.sys); st.Valid || st.Gate == nil || st.Gate.State != "rolled_back" ||
			!strings.HasPrefix(st.Gate.RollbackReason, "rollback_when: p99 3") || !strings.HasSuffix(st.Gate.RollbackReason, "ms above max_p99_ms 20") {
			t.Fatalf("v2: %+v %+v", st, st.Gate)
		}
	})
}

// Deleting a rollback from the shared state by hand clears it on every
// replica, the one that decided it too (docs/rollout-gates.md): the
// deciding replica's own memory of it lasts only until the shared state
// has it.
func TestARollbackDeletedFromTheSharedStateIsClearedOnTheReplicaThatDecidedIt(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		w := newWorld(t, rollbackConfig, map[string]faultySpec{"a/": version(1), "b/": failingOn7})
		defer w.stop()
		time.Sleep(30 * time.Second)
		synctest.Wait()
		if got := scoreN(t, w.sys, 100, 7, true); got["v2"] != 20 {
			t.Fatalf("answers by release: %v", got)
		}
		time.Sleep(2 * time.Second) // the shared-state writer
		synctest.Wait()
		name := modelconfig.StatePath("model_config.json")
		st, err := modelconfig.ParseContractState(w.b.get(name))
		if err != nil || st.Record("ads/pctr/1", "v2").RolledBack.IsZero() {
			t.Fatalf("shared state before the edit: %v %+v", err, st)
		}
		st.Edit("ads/pctr/1", "v2", func(r *modelconfig.ServableRecord) { r.RolledBack = modelconfig.Failure{} })
		data, err := st.MarshalJSON()
		if err != nil {
			t.Fatal(err)
		}
		w.b.set(name, data)
		w.settle()
		time.Sleep(30 * time.Second) // valid again, half-way up its new ramp
		synctest.Wait()
		if st := v2Stats(t, w.sys); !st.Valid || st.Gate == nil || st.Gate.State != "watching" {
			t.Fatalf("v2 after its rollback was deleted from the shared state: %+v %+v", st, st.Gate)
		}
		if got := scoreN(t, w.sys, 100, 1, false); got["v2"] < 30 {
			t.Errorf("v2 got %v", got)
		}
	})
}

// max_p99_ms judges the release's answers since it became valid: new
// content that clears a p99 rollback is not judged on the slow answers of
// the content rolled back, still in the stats' 1-2 minute window.
func TestANewContentIsNotJudgedOnTheLatencyOfTheContentRolledBack(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		w := rollBackASlowRelease(t)
		defer w.stop()
		// Fast content for b/, 10 seconds later: valid again, it ramps up.
		time.Sleep(10 * time.Second)
		w.updateB(slowConfig, version(3))
		time.Sleep(30 * time.Second)
		synctest.Wait()
		if got := scoreN(t, w.sys, 100, 1, false); got["v2"] < 30 {
			t.Errorf("v2 with fast content got %v", got)
		}
		if st := v2Stats(t, w.sys); !st.Valid || st.Gate == nil || st.Gate.State != "watching" {
			t.Fatalf("v2 with fast content: %+v %+v", st, st.Gate)
		}
	})
}

// A rollback undoes the promotion recorded before it: the stats'
// promoted_at of a release promoted again (new content) is then the new
// promotion's, not the one rolled back.
func TestARollbackUndoesTheRecordedPromotion(t *testing.T) {
	s := newSharedState(newMemBucket(), "model_config.json", slog.New(slog.DiscardHandler))
	st := &modelconfig.ContractState{Contracts: map[string]map[string]modelconfig.ServableRecord{}}
	t0 := time.Unix(1000, 0).UTC()
	s.setPromoted("ads/pctr/1", "v2", t0)
	s.pending["promoted ads/pctr/1 v2"](st)
	f := modelconfig.Failure{At: t0.Add(time.Minute), Reason: "rollback_when: error rate", Checksum: "9f2c"}
	s.setRolledBack("ads/pctr/1", "v2", f)
	s.pending["rolled back ads/pctr/1 v2"](st)
	if r := st.Record("ads/pctr/1", "v2"); !r.Promoted.IsZero() || r.RolledBack != f {
		t.Fatalf("record after the rollback: %+v", r)
	}
}

// The contract stats read the comparison windows off the router: a scan
// of the last-N window (70 ms at the largest shadow_compare_window) must
// not hold up the router, which every user request goes through.
func TestContractStatsReadTheComparisonOffTheRouter(t *testing.T) {
	w := newWorld(t, promoteConfig, map[string]faultySpec{"a/": version(1), "b/": version(2)})
	defer w.stop()
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		if st, err := w.sys.ContractStats("ads/pctr/1"); err == nil && st[1].Ready && st[1].Comparison != nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("v2 not ready")
		}
	}
	var cw *compareWindows
	if err := w.sys.askRouter(context.Background(), func(r *routerActor) { cw = r.contracts["ads/pctr/1"].releases["v2"].compare }); err != nil || cw == nil {
		t.Fatalf("no windows: %v", err)
	}
	cw.mu.Lock() // a scan under way (a scrape, another stats call)
	stats := make(chan error, 1)
	go func() {
		_, err := w.sys.ContractStats("ads/pctr/1")
		stats <- err
	}()
	time.Sleep(200 * time.Millisecond) // the stats query reaches the router first
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	err := w.sys.askRouter(ctx, func(*routerActor) {})
	cw.mu.Unlock()
	if err != nil {
		t.Fatalf("the router waited for the comparison windows: %v", err)
	}
	if err := <-stats; err != nil {
		t.Fatal(err)
	}
}

// TestABanditsReleaseTooSlowIsRolledBackWithoutARamp: under a bandit
// router a release's phase-in is immediate, and rollback_when's max_p99_ms
// judges it for as long as it serves: its latency window is measured then
// too, and once it has its 5 judged answers, at 30 ms against a bound of
// 20, it is rolled back.
func TestABanditsReleaseTooSlowIsRolledBackWithoutARamp(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		cfg := banditGateConfig(`{"min_requests": 5, "max_p99_ms": 20}`)
		w := newWorld(t, cfg, map[string]faultySpec{"a/": version(1), "b/": {ErrorOn: f64(-1002), DelayMs: 30}})
		defer w.stop()
		synctest.Wait()
		if got := scoreN(t, w.sys, 100, 1, false); got["v2"] != 5 {
			t.Fatalf("answers by release: %v; want v2 to get exactly its 5 judged requests", got)
		}
		if st := v2Stats(t, w.sys); st.Valid || st.Gate == nil || st.Gate.State != "rolled_back" ||
			!strings.HasPrefix(st.Gate.RollbackReason, "rollback_when: p99 3") || !strings.HasSuffix(st.Gate.RollbackReason, "ms above max_p99_ms 20") {
			t.Fatalf("v2: %+v %+v", st, st.Gate)
		}
	})
}

// TestABanditsReleaseThatTurnsBadIsJudgedOnItsRecentRequests: under a
// bandit router rollback_when watches a release as long as it serves, on
// the requests of its last one to two banditLiveWindow: after 2,000 clean
// answers, a tenth of its requests failing against max_error_rate 0.05
// rolls it back within a few hundred requests, where its whole life's
// rate would not cross the bound for another 2,000.
func TestABanditsReleaseThatTurnsBadIsJudgedOnItsRecentRequests(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		cfg := banditGateConfig(`{"min_requests": 100, "max_error_rate": 0.05}`)
		w := newWorld(t, cfg, map[string]faultySpec{"a/": version(1), "b/": failingOn7})
		defer w.stop()
		synctest.Wait()
		call := func(v float32) string { return scoreRelease(t, w.sys, v) }
		for clean := 0; clean < 2000; {
			if call(1) == "v2" {
				clean++
			}
		}
		for range 2 { // two windows on: the clean answers are no longer judged
			time.Sleep(banditLiveWindow + time.Minute)
			call(1)
		}
		failing := 0
		for i := 0; v2Stats(t, w.sys).Valid; i++ {
			if i == 1000 {
				t.Fatalf("v2 still valid after 1,000 requests with a tenth of its own failing (%d)", failing)
			}
			v := float32(1)
			if i%10 == 0 {
				v = 7
			}
			if call(v) == "v2" && v == 7 {
				failing++
			}
		}
		if st := v2Stats(t, w.sys); st.Gate == nil || st.Gate.State != "rolled_back" || !strings.Contains(st.Gate.RollbackReason, "above max_error_rate 0.05") {
			t.Fatalf("v2: %+v %+v", st, st.Gate)
		}
	})
}

// TestABanditsReleaseIsJudgedOnItsPreviousWindowToo: the window judged is
// the current set of counts and the one before: 60 failed requests before
// a rotation and 40 after make the 100 of min_requests, and roll the
// release back; the contract stats show the same counts as the gate.
func TestABanditsReleaseIsJudgedOnItsPreviousWindowToo(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		cfg := banditGateConfig(`{"min_requests": 100, "max_error_rate": 0.05}`)
		w := newWorld(t, cfg, map[string]faultySpec{"a/": version(1), "b/": failingOn7})
		defer w.stop()
		synctest.Wait()
		failV2 := func(n int) {
			t.Helper()
			for got, calls := 0, 0; got < n; calls++ {
				if calls == 100*n {
					t.Fatalf("v2 got %d of %d requests in %d calls", got, n, calls)
				}
				if scoreRelease(t, w.sys, 7) == "v2" {
					got++
				}
			}
		}
		failV2(60)
		time.Sleep(banditLiveWindow + time.Minute)
		failV2(39) // the first of these rotates the counts
		if st := v2Stats(t, w.sys); !st.Valid || st.Live.Requests != 99 || st.Live.Errors != 99 {
			t.Fatalf("v2 after 99 failed requests over two windows: valid %v, live %+v; want valid (under min_requests), 99 judged", st.Valid, st.Live)
		}
		failV2(1)
		if st := v2Stats(t, w.sys); st.Valid || st.Gate == nil || st.Gate.State != "rolled_back" ||
			!strings.Contains(st.Gate.RollbackReason, "error rate 1 (100 of 100 requests)") {
			t.Fatalf("v2 after 100: %+v %+v", st, st.Gate)
		}
	})
}

// banditGateConfig is a contract of two releases behind router thompson,
// learning clicks, v2 with the rollback_when given.
func banditGateConfig(rollbackWhen string) string {
	return `{"model_metadata": [{"model_path": "a/"}, {"model_path": "b/"}],
 "contracts": [{"organization": "ads", "project": "pctr", "contract_number": 1, "router": "thompson",
   "bandit": {"reward": "click"}, "outcomes": {"label": "click", "window": "30m"},
   "servables": [
     {"release_version": "v1", "model_path": "a/", "logging": {"log_level": "FULL"}},
     {"release_version": "v2", "model_path": "b/", "logging": {"log_level": "FULL"}, "rollback_when": ` + rollbackWhen + `}]}]}`
}

// scoreRelease sends one request holding v through contract ads/pctr/1
// and returns the release that answered it (answer or error).
func scoreRelease(t *testing.T, sys *System, v float32) string {
	t.Helper()
	_, rv, err := sys.Score(context.Background(), "ads/pctr/1", "", Request{API: "test", Inputs: scalar(t, v)})
	if err != nil {
		t.Fatal(err)
	}
	return rv
}
