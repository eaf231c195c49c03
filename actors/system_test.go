package actors

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"os"
	"slices"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/groveml/grove/conf/modelconfig"
	"github.com/groveml/grove/servables"
)

// The lifecycle scenarios the integration tests run against the real
// binary, here in process: a whole System over an in-memory bucket, on a
// fake clock (see harness_test.go).

func TestSystemLoadsConfiguredModelsWarmsThemUpAndServes(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		sumA := checksumOf(t, "a/", version(1))
		w := newWorld(t, configJSON(entry("a/", sumA, `"warm_up_batch_request_json": "[[1],[2]]"`), entry("b.faulty", "", "")),
			map[string]faultySpec{"a/": version(1), "b.faulty": version(2)})
		defer w.stop()
		synctest.Wait()
		if !w.sys.Ready() {
			t.Fatalf("not ready after the first reconcile: %+v", w.sys.Status())
		}
		if got := strings.Join(w.sys.ModelPaths(), ","); got != "a/,b.faulty" {
			t.Fatalf("ModelPaths = %s", got)
		}
		if res := w.infer("a/", 3); res.Err != nil || res.Outputs[0].Float32s()[0] != 3 || res.Checksum != sumA {
			t.Fatalf("a/ answered %+v", res)
		}
		res := w.infer("nope/", 1)
		if !errors.Is(res.Err, ErrModelNotFound) || servables.KindOf(res.Err) != servables.NotFound {
			t.Fatalf("unknown path: %v", res.Err)
		}
		m := w.model("a/")
		if m.State != StateReady || m.Checksum != sumA || m.Runtime != "faulty" || m.Replicas != 1 || m.Served != 1 || m.LoadedAt == nil {
			t.Fatalf("status of a/: %+v", m)
		}
		if meta, sum, ok := w.sys.ModelMetadata("a/"); !ok || sum != sumA || meta.Runtime != "faulty" {
			t.Fatalf("ModelMetadata = %+v %s %v", meta, sum, ok)
		}
		if st, ok := w.sys.ModelStats("a/"); !ok || st.Inferences != 1 {
			t.Fatalf("ModelStats = %+v %v", st, ok)
		}
		if n := w.metric("grove_model_loads_total", map[string]string{"model": "a/", "result": "ok"}); n != 1 {
			t.Errorf("loads ok = %v", n)
		}
		if n := w.metric("grove_model_state", map[string]string{"model": "a/", "state": "ready"}); n != 1 {
			t.Errorf("grove_model_state{ready} = %v", n)
		}
		if n := w.metric("grove_ready", nil); n != 1 {
			t.Errorf("grove_ready = %v", n)
		}
	})
}

// TestSystemLoadsAModelWithItsEntrysLoadOptions: a model entry's
// intra_op_threads and missing_value reach the runtime's Load; an entry
// without them gets the server's threads and no missing value; every Load
// gets the checksum of the content it loads and the server's
// max_model_bytes.
func TestSystemLoadsAModelWithItsEntrysLoadOptions(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		w := newWorld(t, configJSON(entry("a/", "", `"intra_op_threads": 3, "missing_value": -999`), entry("b/", "", "")),
			map[string]faultySpec{"a/": version(1), "b/": version(2)}, func(_ *world, o *Options) { o.IntraOpThreads = 2 })
		defer w.stop()
		synctest.Wait()
		sums := map[string]string{w.model("a/").Checksum: "a/", w.model("b/").Checksum: "b/"}
		w.rt.mu.Lock()
		defer w.rt.mu.Unlock()
		var got []string
		for _, o := range w.rt.opts {
			missing := "none"
			if o.MissingValue != nil {
				missing = fmt.Sprint(*o.MissingValue)
			}
			got = append(got, fmt.Sprintf("%s: threads %d, missing %s, max bytes %d", sums[o.Checksum], o.IntraOpThreads, missing, o.MaxModelBytes))
		}
		slices.Sort(got)
		if want := []string{"a/: threads 3, missing -999, max bytes 1048576", "b/: threads 2, missing none, max bytes 1048576"}; !slices.Equal(got, want) {
			t.Errorf("load options %q, want %q", got, want)
		}
	})
}

func TestSystemLoadsAModelListedLater(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		w := newWorld(t, configJSON(entry("a/", "", "")), map[string]faultySpec{"a/": version(1), "b/": version(2)})
		defer w.stop()
		synctest.Wait()
		if _, _, ok := w.sys.ModelMetadata("b/"); ok {
			t.Fatal("b/ served before it is listed")
		}
		w.setConfig(configJSON(entry("a/", "", ""), entry("b/", "", "")))
		if res := w.infer("b/", 5); res.Err != nil {
			t.Fatalf("b/ after it was listed: %v", res.Err)
		}
	})
}

func TestSystemServesARemovedModelForItsGracePeriodAndReleasesItOnceItsRequestsAreAnswered(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		slow := faultySpec{DelayMs: 3000}
		w := newWorld(t, configJSON(entry("a/", "", `"eviction_grace_period_in_ms": 5000`)), map[string]faultySpec{"a/": slow})
		defer w.stop()
		synctest.Wait()
		local := (*w.sys.routes.Load())["a/"].local
		w.setConfig(configJSON())
		m := w.model("a/")
		if m.State != StateEvicting || m.GraceRemainingMs == nil || *m.GraceRemainingMs != 5000 {
			t.Fatalf("after removal: %+v", m)
		}
		time.Sleep(3 * time.Second) // 2 s of grace left
		// Two requests of 3 s each: one runs past the grace period, the
		// other waits in the mailbox behind it until then.
		answered := make(chan Result, 2)
		for range 2 {
			go func() { answered <- w.infer("a/", 1) }()
		}
		time.Sleep(2500 * time.Millisecond)
		synctest.Wait()
		if res := w.infer("a/", 1); !errors.Is(res.Err, ErrModelNotFound) {
			t.Fatalf("after the grace period: %v", res.Err)
		}
		if w.rt.closed.Load() != 0 {
			t.Fatal("released while requests were still running on it")
		}
		for range 2 {
			if res := <-answered; res.Err != nil {
				t.Fatalf("a request in flight at the end of the grace period failed: %v", res.Err)
			}
		}
		synctest.Wait()
		if w.rt.closed.Load() != 1 {
			t.Fatalf("closed %d servables once the last request was answered, want 1", w.rt.closed.Load())
		}
		if _, err := os.Stat(local.Dir); !os.IsNotExist(err) {
			t.Fatalf("cached files of the evicted model are still there: %v", err)
		}
		if len(w.sys.Status().Models) != 0 {
			t.Fatalf("status still lists %+v", w.sys.Status().Models)
		}
	})
}

func TestSystemUpdatesInPlaceUnderLoadWithoutFailingARequest(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		v1 := faultySpec{DelayMs: 10, ErrorOn: f64(-1)}
		w := newWorld(t, configJSON(entry("a/", checksumOf(t, "a/", v1), `"eviction_grace_period_in_ms": 2000`)), map[string]faultySpec{"a/": v1})
		defer w.stop()
		synctest.Wait()
		stop := make(chan struct{})
		var wg sync.WaitGroup
		var mu sync.Mutex
		failed, served := 0, 0
		for range 4 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for {
					select {
					case <-stop:
						return
					default:
					}
					res := w.infer("a/", 2)
					mu.Lock()
					served++
					if res.Err != nil {
						failed++
					}
					mu.Unlock()
				}
			}()
		}
		time.Sleep(500 * time.Millisecond)
		v2 := faultySpec{DelayMs: 10, ErrorOn: f64(-2)}
		sum2 := w.putModel("a/", v2)
		w.b.set("model_config.json", []byte(configJSON(entry("a/", sum2, ""))))
		time.Sleep(poll)
		for w.model("a/").Checksum != sum2 {
			time.Sleep(10 * time.Millisecond)
		}
		if m := w.model("a/"); m.Retiring != 1 {
			t.Errorf("old content not held for its grace period: %+v", m)
		}
		time.Sleep(3 * time.Second)
		close(stop)
		wg.Wait()
		synctest.Wait()
		if failed != 0 || served < 100 {
			t.Fatalf("%d of %d requests failed during the update", failed, served)
		}
		if m := w.model("a/"); m.Retiring != 0 || w.rt.closed.Load() != 1 {
			t.Fatalf("old content not released after its grace period: %+v, closed %d", m, w.rt.closed.Load())
		}
	})
}

func TestSystemKeepsTheOldContentWhenTheUpdateHasTheWrongChecksum(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		sum1 := checksumOf(t, "a/", version(1))
		w := newWorld(t, configJSON(entry("a/", sum1, "")), map[string]faultySpec{"a/": version(1)})
		defer w.stop()
		synctest.Wait()
		sum2 := checksumOf(t, "a/", version(2))
		sum3 := w.putModel("a/", version(3)) // the bucket holds another content than the config says
		w.setConfig(configJSON(entry("a/", sum2, "")))
		m := w.model("a/")
		if m.State != StateReady || m.Checksum != sum1 || m.ConfiguredChecksum != sum2 ||
			!strings.Contains(m.LastError, "incorrect checksum: expected "+sum2+", actual "+sum3) {
			t.Fatalf("status after a bad update: %+v", m)
		}
		if res := w.infer("a/", 4); res.Err != nil || res.Checksum != sum1 {
			t.Fatalf("old content not serving: %+v", res)
		}
		if n := w.metric("grove_model_loads_total", map[string]string{"model": "a/", "result": "failed"}); n != 1 {
			t.Errorf("failed loads = %v", n)
		}
	})
}

func TestSystemRetriesAFailedLoadOnLaterPollsAndKeepsReportingItFailed(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		w := newWorld(t, configJSON(entry("a/", "", "")), map[string]faultySpec{"a/": {FailLoad: true}})
		defer w.stop()
		synctest.Wait()
		if !w.sys.Ready() {
			t.Fatal("a failed model keeps the server from being ready")
		}
		if m := w.model("a/"); m.State != StateFailed || !strings.Contains(m.LastError, "asked to fail loading") {
			t.Fatalf("status: %+v", m)
		}
		w.settle()
		if n := w.metric("grove_model_loads_total", map[string]string{"model": "a/", "result": "failed"}); n != 2 {
			t.Fatalf("failed loads after one more poll = %v, want 2 (retried once per poll)", n)
		}
		w.putModel("a/", version(1))
		w.settle()
		if m := w.model("a/"); m.State != StateReady || m.LastError != "" {
			t.Fatalf("after the model was fixed: %+v", m)
		}
	})
}

func TestARuntimeThatPanicsLoadingAModelFailsThatLoadAndTheServerServesOn(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		w := newWorld(t, configJSON(entry("a/", "", ""), entry("b/", "", "")), map[string]faultySpec{"a/": {PanicLoad: true}, "b/": version(1)})
		defer w.stop()
		synctest.Wait()
		if m := w.model("a/"); m.State != StateFailed || !strings.Contains(m.LastError, "the faulty runtime panicked loading the model") {
			t.Fatalf("a/ after its load panicked: %+v", m)
		}
		if !strings.Contains(w.log.String(), "faulty model asked to panic while loading") {
			t.Error("the panic is not logged")
		}
		w.wantPanics("load", 1)
		if res := w.infer("b/", 1); res.Err != nil {
			t.Fatalf("b/ does not serve beside a load that panicked: %v", res.Err)
		}
		w.putModel("a/", version(2))
		w.settle()
		if m := w.model("a/"); m.State != StateReady || m.LastError != "" {
			t.Fatalf("a/ after its file was fixed: %+v", m)
		}
	})
}

func TestSystemRejectsContentWhoseWarmUpFails(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		bad := faultySpec{ErrorOn: f64(7)}
		w := newWorld(t, configJSON(entry("a/", "", `"warm_up_batch_request_json": "[[1],[7]]"`)), map[string]faultySpec{"a/": bad})
		defer w.stop()
		synctest.Wait()
		if m := w.model("a/"); m.State != StateFailed || !strings.Contains(m.LastError, "warming up model a/: warm-up request 1") {
			t.Fatalf("status: %+v", m)
		}
		if w.rt.loaded.Load() != 1 || w.rt.closed.Load() != 1 {
			t.Fatalf("the rejected content was not closed: loaded %d, closed %d", w.rt.loaded.Load(), w.rt.closed.Load())
		}
	})
}

func TestSystemKeepsThePreviousConfigWhenTheNewOneIsBroken(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		w := newWorld(t, configJSON(entry("a/", "", "")), map[string]faultySpec{"a/": version(1)})
		defer w.stop()
		synctest.Wait()
		w.setConfig(`{"model_metadata": [`)
		st := w.sys.Status()
		if !strings.Contains(st.Config.LastError, "invalid JSON") || st.Config.LastSuccess == nil {
			t.Fatalf("config status: %+v", st.Config)
		}
		if res := w.infer("a/", 1); res.Err != nil {
			t.Fatalf("the model of the previous config is not served: %v", res.Err)
		}
		w.b.mu.Lock()
		w.b.failReads["model_config.json"] = errors.New("bucket unreachable")
		w.b.mu.Unlock()
		w.settle()
		if got := w.metric("grove_config_polls_total", map[string]string{"result": "invalid"}); got != 1 {
			t.Errorf("invalid polls = %v", got)
		}
		if got := w.metric("grove_config_polls_total", map[string]string{"result": "fetch_error"}); got != 1 {
			t.Errorf("fetch_error polls = %v", got)
		}
		if got := w.metric("grove_config_errors_total", nil); got != 2 {
			t.Errorf("config errors = %v", got)
		}
		if res := w.infer("a/", 1); res.Err != nil {
			t.Fatalf("unreadable config unloaded the model: %v", res.Err)
		}
	})
}

func TestSystemRestartsOnlyTheModelThatPanicked(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		w := newWorld(t, configJSON(entry("a/", "", ""), entry("b/", "", "")),
			map[string]faultySpec{"a/": {PanicOn: f64(13)}, "b/": version(1)})
		defer w.stop()
		synctest.Wait()
		res := w.infer("a/", 13)
		if servables.KindOf(res.Err) != servables.Crashed {
			t.Fatalf("panicking request got %v", res.Err)
		}
		synctest.Wait()
		if res := w.infer("a/", 1); res.Err != nil {
			t.Fatalf("a/ after its restart: %v", res.Err)
		}
		if res := w.infer("b/", 1); res.Err != nil {
			t.Fatalf("b/ was affected: %v", res.Err)
		}
		if m := w.model("a/"); m.Crashes != 1 {
			t.Errorf("crashes = %d", m.Crashes)
		}
		if n := w.metric("grove_model_crashes_total", map[string]string{"model": "a/"}); n != 1 {
			t.Errorf("crash metric = %v", n)
		}
	})
}

func TestSystemLoadsACrashedModelAfreshWhenItsCacheIsGone(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		w := newWorld(t, configJSON(entry("a/", "", "")), map[string]faultySpec{"a/": {PanicOn: f64(13)}})
		defer w.stop()
		synctest.Wait()
		first := (*w.sys.routes.Load())["a/"]
		if err := os.RemoveAll(first.local.Dir); err != nil {
			t.Fatal(err)
		}
		_ = w.infer("a/", 13) // crashes; the restart cannot reload from the cache
		synctest.Wait()
		second := (*w.sys.routes.Load())["a/"]
		if second == nil || second == first {
			t.Fatalf("no fresh content after a failed reload: %+v", w.model("a/"))
		}
		if res := w.infer("a/", 1); res.Err != nil {
			t.Fatalf("fresh content: %v", res.Err)
		}
		if m := w.model("a/"); m.State != StateReady || m.LastError != "" {
			t.Fatalf("status: %+v", m)
		}
	})
}

func TestSystemReloadsAModelWhoseServingOptionsChange(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		w := newWorld(t, configJSON(entry("a/", "", "")), map[string]faultySpec{"a/": version(1)})
		defer w.stop()
		synctest.Wait()
		w.setConfig(configJSON(entry("a/", "", `"replicas": 3, "max_batch_rows": 1`)))
		if m := w.model("a/"); m.Replicas != 3 || m.Updating {
			t.Fatalf("after the change: %+v", m)
		}
		if res := w.infer("a/", 1); res.Err != nil {
			t.Fatal(res.Err)
		}
		w.setConfig(configJSON(entry("a/", "", `"replicas": 3, "max_batch_rows": 1, "warm_up_batch_request_json": "[[1]]"`)))
		if w.rt.loaded.Load() != 2 {
			t.Fatalf("a warm-up change alone reloaded the model (%d loads)", w.rt.loaded.Load())
		}
	})
}

func TestSystemStopWaitsForARunningLoadAndClosesWhatItBrings(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		gate := make(chan struct{})
		w := newWorld(t, configJSON(entry("a/", "", "")), map[string]faultySpec{"a/": version(1)},
			func(w *world, _ *Options) { w.rt.gate = gate })
		synctest.Wait() // the load is blocked in the runtime
		stopped := make(chan struct{})
		go func() { w.stop(); close(stopped) }()
		synctest.Wait()
		select {
		case <-stopped:
			t.Fatal("Stop returned while a load was running")
		default:
		}
		close(gate)
		<-stopped
		if w.rt.loaded.Load() != 1 {
			t.Fatalf("loaded %d", w.rt.loaded.Load())
		}
		if _, err := w.sys.Infer(context.Background(), nil); !errors.Is(err, ErrStopped) {
			t.Fatalf("Infer after Stop: %v", err)
		}
	})
}

func TestAStopThatRunsOutOfTimeLetsCallersGoAndFinishesLater(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		gate := make(chan struct{})
		w := newWorld(t, configJSON(entry("a/", "", "")), map[string]faultySpec{"a/": version(1)},
			func(w *world, _ *Options) { w.rt.gate = gate })
		synctest.Wait() // the load is stuck in the runtime
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		if err := w.sys.Stop(ctx); !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("Stop = %v, want its context's deadline", err)
		}
		if _, err := w.sys.Infer(context.Background(), []Request{{ModelPath: "a/", Inputs: scalar(t, 1)}}); !errors.Is(err, ErrStopped) {
			t.Fatalf("Infer after a Stop out of time: %v", err)
		}
		if _, err := w.sys.ContractStats("x/y/1"); !errors.Is(err, ErrStopped) {
			t.Fatalf("a router query after a Stop out of time: %v", err)
		}
		close(gate)     // the stuck load ends...
		synctest.Wait() // ...and the shutdown completes: the bubble checks no goroutine is left
		if l, c := w.rt.loaded.Load(), w.rt.closed.Load(); l != 1 || c != 1 {
			t.Fatalf("loaded %d, closed %d", l, c)
		}
	})
}

// TestSystemRefusesOutcomesOnAModelWhoseDirectCallsAreNotAllLogged polls a
// config whose model b/ learns from outcomes: with direct calls logged at
// the default (NONE) or SAMPLE it is refused like any invalid config (the
// error, the invalid poll, the previous config still served); at FULL it
// is applied.
func TestSystemRefusesOutcomesOnAModelWhoseDirectCallsAreNotAllLogged(t *testing.T) {
	withOutcomes := configJSON(entry("a/", "", ""), entry("b/", "", `"outcomes": {"label": "click", "window": "30m"}`))
	loaded := func(w *world, path string) bool {
		for _, m := range w.sys.Status().Models {
			if m.Path == path {
				return true
			}
		}
		return false
	}
	for _, level := range []string{"", modelconfig.LogLevelSample} {
		t.Run("level="+cmp.Or(level, "default"), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				w := newWorld(t, configJSON(entry("a/", "", "")), map[string]faultySpec{"a/": version(1), "b/": version(1)},
					func(_ *world, o *Options) { o.DirectLogLevel = level })
				defer w.stop()
				synctest.Wait()
				w.setConfig(withOutcomes)
				st := w.sys.Status()
				want := "model_metadata[1].outcomes: model b/: outcomes are joined to logged predictions, and direct calls are logged at " + cmp.Or(level, modelconfig.LogLevelNone)
				if !strings.Contains(st.Config.LastError, want) || st.Config.LastSuccess == nil {
					t.Fatalf("config status %+v, want the error %q", st.Config, want)
				}
				if got := w.metric("grove_config_polls_total", map[string]string{"result": "invalid"}); got < 1 {
					t.Errorf("invalid polls = %v, want the refusal counted as invalid", got)
				}
				if loaded(w, "b/") {
					t.Errorf("b/ of the refused config was loaded")
				}
				if res := w.infer("a/", 1); res.Err != nil {
					t.Fatalf("the model of the previous config is not served: %v", res.Err)
				}
			})
		})
	}
	t.Run("level=FULL", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			w := newWorld(t, withOutcomes, map[string]faultySpec{"a/": version(1), "b/": version(1)},
				func(_ *world, o *Options) { o.DirectLogLevel = modelconfig.LogLevelFull })
			defer w.stop()
			synctest.Wait()
			if st := w.sys.Status(); st.Config.LastError != "" {
				t.Fatalf("config refused at FULL: %s", st.Config.LastError)
			}
			if res := w.infer("b/", 1); res.Err != nil {
				t.Fatalf("b/ not served at FULL: %v", res.Err)
			}
		})
	})
}
