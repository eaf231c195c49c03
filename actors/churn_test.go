package actors

import (
	"io/fs"
	"path/filepath"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"
)

// churnFootprint is what a System holds that could grow with every
// in-place update: metric series, files under the cache directory, servables
// loaded and not closed, the contents its status lists, and the process ids
// the actor system has handed out (futures and unnamed actors take one each).
type churnFootprint struct {
	series, cacheEntries int
	open                 int64
	retiring, kept       int
	ids                  uint64
}

// actorNames returns the names in the actor system's process registry.
func (w *world) actorNames() []string {
	var names []string
	for _, m := range w.sys.as.ProcessRegistry.LocalPIDs.LocalPIDs {
		names = append(names, m.Keys()...)
	}
	return names
}

func (w *world) churnFootprint(cacheDir string) churnFootprint {
	w.t.Helper()
	var f churnFootprint
	fams, err := w.reg.Gather()
	if err != nil {
		w.t.Fatal(err)
	}
	for _, fam := range fams {
		f.series += len(fam.GetMetric())
	}
	err = filepath.WalkDir(cacheDir, func(p string, _ fs.DirEntry, err error) error {
		if err == nil && p != cacheDir {
			f.cacheEntries++
		}
		return err
	})
	if err != nil {
		w.t.Fatal(err)
	}
	f.open = w.rt.loaded.Load() - w.rt.closed.Load()
	f.ids = atomic.LoadUint64(&w.sys.as.ProcessRegistry.SequenceID)
	m := w.model("a/")
	f.retiring = m.Retiring
	if m.Kept != nil {
		f.kept = 1
	}
	return f
}

// A model updated in place many times under requests leaves nothing per
// update behind in Grove: after 5 updates and after 40 the System holds the
// same metric series, cache entries, open servables and contents (a
// per-checksum metric label, a cache directory or a servable not released
// would grow with the updates), has handed out no process id since, and
// its actors have used no name they had not used by then (the process
// registry keeps memory for every name it has seen: actorNames).
func TestInPlaceUpdatesLeaveNoPerUpdateStateBehind(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		cache := t.TempDir()
		v0 := version(0)
		w := newWorld(t, configJSON(entry("a/", checksumOf(t, "a/", v0), `"eviction_grace_period_in_ms": 200`)), map[string]faultySpec{"a/": v0},
			func(_ *world, o *Options) { o.CacheDir = cache })
		defer w.stop()
		synctest.Wait()
		update := func(n int) {
			sum := w.putModel("a/", version(float64(n)))
			w.setConfig(configJSON(entry("a/", sum, `"eviction_grace_period_in_ms": 200`)))
			for range 3 {
				if res := w.infer("a/", float32(n)); res.Err != nil {
					t.Fatalf("update %d: %v", n, res.Err)
				}
			}
			if got := w.model("a/").Checksum; got != sum {
				t.Fatalf("update %d: serving %s, want %s", n, got, sum)
			}
			time.Sleep(time.Second) // the grace period passes
			synctest.Wait()
		}
		names := map[string]bool{}
		seen := func() int {
			for _, n := range w.actorNames() {
				names[n] = true
			}
			return len(names)
		}
		for n := 1; n <= 5; n++ {
			update(n)
			seen()
		}
		before, named := w.churnFootprint(cache), len(names)
		for n := 6; n <= 40; n++ {
			update(n)
			seen()
		}
		if after := w.churnFootprint(cache); after != before {
			t.Errorf("after 5 updates %+v, after 40 %+v", before, after)
		}
		if len(names) != named {
			t.Errorf("actor names used: %d after 5 updates, %d after 40", named, len(names))
		}
		if before.open > 2 || before.retiring != 0 {
			t.Errorf("after 5 updates past their grace period: %+v", before)
		}
	})
}
