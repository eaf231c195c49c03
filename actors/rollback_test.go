package actors

import (
	"context"
	"errors"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/groveml/grove/conf/modelconfig"
)

// Instant rollback in process: with keep_previous_for, the content an
// update replaced stays loaded, and going back to it (by the config or by
// Rollback) serves it at once with no load.

func keep(d time.Duration) func(*world, *Options) {
	return func(_ *world, o *Options) { o.KeepPreviousFor = d }
}

// bucketConfig parses the model config in the bucket.
func (w *world) bucketConfig() *modelconfig.Config {
	w.t.Helper()
	cfg, err := modelconfig.Parse(w.b.get("model_config.json"))
	if err != nil {
		w.t.Fatal(err)
	}
	return cfg
}

// kept returns path's kept content, failing the test if it has none.
func (w *world) kept(path string) *KeptStatus {
	w.t.Helper()
	k := w.model(path).Kept
	if k == nil {
		w.t.Fatalf("%s keeps nothing: %+v", path, w.model(path))
	}
	return k
}

func TestSystemKeepsThePreviousContentAndGoesBackToItWithNoLoad(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		sumA := checksumOf(t, "a/", version(1))
		w := newWorld(t, configJSON(entry("a/", sumA, "")), map[string]faultySpec{"a/": version(1)}, keep(10*time.Minute))
		defer w.stop()
		synctest.Wait()
		// The update: the bucket now holds version 2 only, so a load of
		// version 1 would fail its checksum.
		sumB := w.putModel("a/", version(2))
		w.setConfig(configJSON(entry("a/", sumB, "")))
		updatedAt := time.Now()
		if res := w.infer("a/", 1); res.Err != nil || res.Checksum != sumB {
			t.Fatalf("after the update: %+v", res)
		}
		k := w.kept("a/")
		if k.Checksum != sumA || k.SizeBytes <= 0 || k.Replicas != 1 || !k.Until.Equal(k.Since.Add(10*time.Minute)) {
			t.Fatalf("kept %+v", k)
		}
		if m := w.model("a/"); m.KeepPreviousForMs != 600_000 || m.Retiring != 0 {
			t.Fatalf("status %+v", m)
		}
		if n := w.metric("grove_model_kept_bytes", map[string]string{"model": "a/"}); n != float64(k.SizeBytes) {
			t.Errorf("grove_model_kept_bytes = %v, want %d", n, k.SizeBytes)
		}
		if c := w.rt.closed.Load(); c != 0 {
			t.Fatalf("%d servables closed: the previous content was released", c)
		}
		loads := w.rt.loaded.Load()

		// Back by the config: the old checksum put back.
		w.setConfig(configJSON(entry("a/", sumA, "")))
		if res := w.infer("a/", 2); res.Err != nil || res.Checksum != sumA {
			t.Fatalf("after going back: %+v (status %+v)", res, w.model("a/"))
		}
		if n := w.rt.loaded.Load(); n != loads {
			t.Fatalf("going back loaded %d servables", n-loads)
		}
		if k := w.kept("a/"); k.Checksum != sumB {
			t.Fatalf("after going back, kept %+v, want the update's content", k)
		}
		if m := w.model("a/"); m.Checksum != sumA || m.LastError != "" || m.State != StateReady {
			t.Fatalf("status after going back: %+v", m)
		}
		if n := w.metric("grove_model_restores_total", map[string]string{"model": "a/"}); n != 1 {
			t.Errorf("grove_model_restores_total = %v", n)
		}

		// The keep time ends: the kept content is released.
		time.Sleep(time.Until(updatedAt.Add(poll + 10*time.Minute)))
		synctest.Wait()
		if m := w.model("a/"); m.Kept != nil || w.rt.closed.Load() != 1 {
			t.Fatalf("after the keep time: kept %+v, %d closed", m.Kept, w.rt.closed.Load())
		}
		if n := w.metric("grove_model_kept_bytes", map[string]string{"model": "a/"}); n != 0 {
			t.Errorf("grove_model_kept_bytes = %v after release", n)
		}
		if res := w.infer("a/", 3); res.Err != nil || res.Checksum != sumA {
			t.Fatalf("after the kept content was released: %+v", res)
		}
	})
}

func TestSystemRollbackWritesTheConfigBackAndServesTheKeptContent(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		sumA := checksumOf(t, "a/", version(1))
		w := newWorld(t, configJSON(entry("a/", sumA, `"replicas": 2`), entry("b/", "", `"keep_previous_for_ms": 0`)),
			map[string]faultySpec{"a/": version(1), "b/": version(3)}, keep(time.Minute))
		defer w.stop()
		synctest.Wait()
		ctx := context.Background()
		if _, err := w.sys.Rollback(ctx, "a/"); !errors.Is(err, ErrNothingKept) || !strings.Contains(err.Error(), "not been updated in place") {
			t.Fatalf("rollback before any update: %v", err)
		}
		if _, err := w.sys.Rollback(ctx, "b/"); !errors.Is(err, ErrNothingKept) || !strings.Contains(err.Error(), "keeping is off") {
			t.Fatalf("rollback of a model that keeps nothing: %v", err)
		}
		if _, err := w.sys.Rollback(ctx, "nope/"); !errors.Is(err, ErrModelNotFound) {
			t.Fatalf("rollback of an unknown path: %v", err)
		}
		// An update of the checksum and of the serving options.
		sumB := w.putModel("a/", version(2))
		w.setConfig(configJSON(entry("a/", sumB, `"replicas": 1`), entry("b/", "", `"keep_previous_for_ms": 0`)))
		loads := w.rt.loaded.Load()

		got, err := w.sys.Rollback(ctx, "a/")
		if err != nil {
			t.Fatal(err)
		}
		if got.ModelPath != "a/" || got.Checksum != sumA || got.From != sumB {
			t.Fatalf("Rollback = %+v", got)
		}
		// Answered with no poll interval passing: the kept content serves.
		if res := w.infer("a/", 1); res.Err != nil || res.Checksum != sumA {
			t.Fatalf("after Rollback: %+v", res)
		}
		if n := w.rt.loaded.Load(); n != loads {
			t.Fatalf("Rollback loaded %d servables", n-loads)
		}
		if m := w.model("a/"); m.Replicas != 2 || m.Kept == nil || m.Kept.Checksum != sumB {
			t.Fatalf("status after Rollback: %+v", m)
		}
		cfg, err := modelconfig.Parse(w.b.get("model_config.json"))
		if err != nil {
			t.Fatal(err)
		}
		if e := cfg.Models[0]; e.Checksum != sumA || e.Serving.Replicas != 2 || cfg.Models[1].KeepPreviousFor == nil {
			t.Fatalf("config written: %+v", cfg.Models)
		}
		// Later polls keep it there.
		w.settle()
		if res := w.infer("a/", 2); res.Checksum != sumA || w.rt.loaded.Load() != loads {
			t.Fatalf("after a poll: %+v, %d loads", res, w.rt.loaded.Load()-loads)
		}
		// Once the keep time is over, there is nothing to go back to.
		time.Sleep(time.Minute)
		synctest.Wait()
		if _, err := w.sys.Rollback(ctx, "a/"); !errors.Is(err, ErrNothingKept) || !strings.Contains(err.Error(), "was released at") {
			t.Fatalf("rollback after the keep time: %v", err)
		}
	})
}

func TestSystemKeepsARemovedModelLoadedAndBringsItBackWithNoLoad(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		sumA := checksumOf(t, "a/", version(1))
		w := newWorld(t, configJSON(entry("a/", sumA, `"eviction_grace_period_in_ms": 2000`)), map[string]faultySpec{"a/": version(1)}, keep(time.Minute))
		defer w.stop()
		synctest.Wait()
		w.setConfig(configJSON())
		time.Sleep(3 * time.Second) // past the grace period
		synctest.Wait()
		if res := w.infer("a/", 1); !errors.Is(res.Err, ErrModelNotFound) {
			t.Fatalf("a removed model after its grace period: %+v", res)
		}
		if k := w.kept("a/"); k.Checksum != sumA || w.rt.closed.Load() != 0 {
			t.Fatalf("kept %+v, %d closed", k, w.rt.closed.Load())
		}
		if _, err := w.sys.Rollback(context.Background(), "a/"); !errors.Is(err, ErrNotAnEntry) {
			t.Fatalf("Rollback of a removed model: %v", err)
		}
		w.setConfig(configJSON(entry("a/", sumA, `"eviction_grace_period_in_ms": 2000`)))
		if res := w.infer("a/", 1); res.Err != nil || res.Checksum != sumA || w.rt.loaded.Load() != 1 {
			t.Fatalf("listed again: %+v, %d loads", res, w.rt.loaded.Load())
		}
		w.setConfig(configJSON())
		time.Sleep(time.Minute + time.Second)
		synctest.Wait()
		if len(w.sys.Status().Models) != 0 || w.rt.closed.Load() != 1 {
			t.Fatalf("after the keep time: %+v, %d closed", w.sys.Status().Models, w.rt.closed.Load())
		}
	})
}

func TestSystemRestoresAKeptContentWhileItsLastRequestRuns(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		slow := faultySpec{DelayMs: 3000, ErrorOn: f64(-1)}
		sumA := checksumOf(t, "a/", slow)
		w := newWorld(t, configJSON(entry("a/", sumA, "")), map[string]faultySpec{"a/": slow}, keep(time.Minute))
		defer w.stop()
		synctest.Wait()
		answered := make(chan Result, 1)
		go func() { answered <- w.infer("a/", 1) }() // runs on A for 3 s
		sumB := w.putModel("a/", version(2))
		w.setConfig(configJSON(entry("a/", sumB, ""))) // B swaps in; A is kept, its request still running
		if res := w.infer("a/", 2); res.Checksum != sumB {
			t.Fatalf("after the update: %+v", res)
		}
		w.setConfig(configJSON(entry("a/", sumA, ""))) // back to A before its request ends
		if res := <-answered; res.Err != nil || res.Checksum != sumA {
			t.Fatalf("the request running on A across the update and the rollback: %+v", res)
		}
		if res := w.infer("a/", 3); res.Err != nil || res.Checksum != sumA {
			t.Fatalf("after going back: %+v", res)
		}
		if w.rt.closed.Load() != 0 || w.rt.loaded.Load() != 2 {
			t.Fatalf("%d loaded, %d closed", w.rt.loaded.Load(), w.rt.closed.Load())
		}
		// B's keep time ends: released; A keeps serving.
		time.Sleep(time.Minute)
		synctest.Wait()
		if w.rt.closed.Load() != 1 || w.model("a/").Kept != nil {
			t.Fatalf("after B's keep time: %d closed, kept %+v", w.rt.closed.Load(), w.model("a/").Kept)
		}
		if res := w.infer("a/", 4); res.Err != nil || res.Checksum != sumA {
			t.Fatalf("after B was released: %+v", res)
		}
	})
}

func TestRollbackOfAVersionedEntryPinsItsPolicyToTheNewestOlderLoadedVersion(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		w := newWorld(t, versioned(`{"latest": {"num_versions": 1}}`), map[string]faultySpec{"v/1/": version(1)}, keep(10*time.Minute))
		defer w.stop()
		synctest.Wait()
		ctx := context.Background()
		sum1 := checksumOf(t, "v/1/", version(1))
		if _, err := w.sys.Rollback(ctx, "v/"); !errors.Is(err, ErrNothingKept) || !strings.Contains(err.Error(), "no version older than 1") {
			t.Fatalf("rollback with one version: %v", err)
		}
		// Version 2 appears and takes over; version 1 leaves the policy
		// (latest 1), serves its grace period (5 s), then stays kept.
		sum2 := w.putModel("v/2/", version(2))
		time.Sleep(poll)
		synctest.Wait()
		if got := w.answeredBy("v/"); got != sum2 {
			t.Fatalf("v/ answered from %s, want version 2", got)
		}
		time.Sleep(6 * time.Second)
		synctest.Wait()
		if res := w.infer("v/1/", 1); !errors.Is(res.Err, ErrModelNotFound) {
			t.Fatalf("v/1/ after its grace period: %v", res.Err)
		}
		if k := w.kept("v/1/"); k.Checksum != sum1 {
			t.Fatalf("v/1/ kept %+v", k)
		}
		loads := w.rt.loaded.Load()

		// Named by the version rolled back from.
		got, err := w.sys.Rollback(ctx, "v/2/")
		if err != nil {
			t.Fatal(err)
		}
		if got.ModelPath != "v/" || got.Version != 1 || got.FromVersion != 2 || got.Checksum != sum1 || got.From != sum2 {
			t.Fatalf("Rollback = %+v", got)
		}
		if got := w.answeredBy("v/"); got != sum1 {
			t.Fatalf("v/ answered from %s after the rollback, want version 1", got)
		}
		if n := w.rt.loaded.Load(); n != loads {
			t.Fatalf("the rollback loaded %d servables", n-loads)
		}
		cfg := w.bucketConfig()
		if p := cfg.Models[0].VersionPolicy; p == nil || p.Kind != modelconfig.VersionsSpecific || len(p.Versions) != 1 || p.Versions[0] != 1 {
			t.Fatalf("policy written back: %+v", p)
		}
		// Later polls keep it there, and a newer version is not picked up.
		w.putModel("v/3/", version(3))
		time.Sleep(2 * poll)
		synctest.Wait()
		if got := w.answeredBy("v/"); got != sum1 {
			t.Fatalf("v/ answered from %s after later polls, want version 1", got)
		}
		if v := w.versionedStatus("v/"); v.ServingVersion != 1 {
			t.Fatalf("versioned status %+v", v)
		}
	})
}

func TestRollbackOfAVersionedEntryIgnoresAKeptVersionGoneFromTheBucket(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		w := newWorld(t, versioned(`{"latest": {"num_versions": 1}}`), map[string]faultySpec{"v/1/": version(1)}, keep(10*time.Minute))
		defer w.stop()
		synctest.Wait()
		ctx := context.Background()
		sum2 := w.putModel("v/2/", version(2))
		time.Sleep(poll + 6*time.Second) // v/1/ leaves the policy once version 2 is ready, serves its grace period, then is kept
		synctest.Wait()
		w.kept("v/1/")
		// Version 1's files are deleted from the bucket: pinning the policy
		// to it would list a version that is not there, and the entry
		// would serve nothing once version 2's grace period ended.
		w.b.remove("v/1/model.faulty")
		w.settle()
		if _, err := w.sys.Rollback(ctx, "v/"); !errors.Is(err, ErrNothingKept) || !strings.Contains(err.Error(), "no version older than 2") {
			t.Fatalf("rollback to a version gone from the bucket: %v", err)
		}
		cfg := w.bucketConfig()
		if p := cfg.Models[0].VersionPolicy; p.Kind != modelconfig.VersionsLatest {
			t.Fatalf("policy written although nothing could be rolled back to: %+v", p)
		}
		time.Sleep(6 * time.Second)
		synctest.Wait()
		if got := w.answeredBy("v/"); got != sum2 {
			t.Fatalf("v/ answered from %s, want version 2", got)
		}
	})
}

func TestRollbackOfARegisteredModelSaysItIsNotAConfigEntry(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		w := newWorld(t, configJSON(entry("a/", "", "")), map[string]faultySpec{"a/": version(1)}, keep(10*time.Minute))
		defer w.stop()
		synctest.Wait()
		ctx := context.Background()
		name, data := modelFile(t, "r/", version(9))
		if err := w.sys.RegisterModel(ctx, "r/", map[string][]byte{name: data}, ""); err != nil {
			t.Fatal(err)
		}
		if _, err := w.sys.Rollback(ctx, "r/"); !errors.Is(err, ErrNotAnEntry) || !strings.Contains(err.Error(), "registered model") {
			t.Fatalf("rollback of a registered model: %v", err)
		}
		// and its status does not claim a keep time it never has.
		if m := w.model("r/"); m.KeepPreviousForMs != 0 {
			t.Fatalf("status of r/: keep_previous_for_ms %d", m.KeepPreviousForMs)
		}
		if m := w.model("a/"); m.KeepPreviousForMs != (10 * time.Minute).Milliseconds() {
			t.Fatalf("status of a/: keep_previous_for_ms %d", m.KeepPreviousForMs)
		}
	})
}

func TestRollbackOfAnEntryMadeVersionedRollsItsVersionsBack(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		// v/ is one model, then becomes a versioned entry: its old content
		// is kept under v/, but a rollback of v/ is the versioned entry's.
		w := newWorld(t, configJSON(entry("v/", "", "")), map[string]faultySpec{"v/1/": version(1)}, keep(10*time.Minute))
		defer w.stop()
		synctest.Wait()
		ctx := context.Background()
		sum2 := w.putModel("v/2/", version(2))
		w.setConfig(versioned(`{"latest": {"num_versions": 2}}`))
		time.Sleep(6 * time.Second)
		synctest.Wait()
		if got := w.answeredBy("v/"); got != sum2 {
			t.Fatalf("v/ answered from %s, want version 2", got)
		}
		w.kept("v/")
		got, err := w.sys.Rollback(ctx, "v/")
		if err != nil {
			t.Fatal(err)
		}
		if got.Version != 1 || got.FromVersion != 2 {
			t.Fatalf("Rollback = %+v", got)
		}
		if p := w.bucketConfig().Models[0].VersionPolicy; p.Kind != modelconfig.VersionsSpecific {
			t.Fatalf("policy written back: %+v", p)
		}
	})
}
