package actors

import (
	"io/fs"
	"path/filepath"
	"testing"
	"testing/synctest"
	"time"
)

// churnFootprint is what a System holds that could grow with every
// in-place update: metric series, files under the cache directory, servables
// loaded and not closed, and the contents its status lists.
type churnFootprint struct {
	series, cacheEntries int
	open                 int64
	retiring, kept       int
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
// would grow with the updates).
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
		for n := 1; n <= 5; n++ {
			update(n)
		}
		before := w.churnFootprint(cache)
		for n := 6; n <= 40; n++ {
			update(n)
		}
		if after := w.churnFootprint(cache); after != before {
			t.Errorf("after 5 updates %+v, after 40 %+v", before, after)
		}
		if before.open > 2 || before.retiring != 0 {
			t.Errorf("after 5 updates past their grace period: %+v", before)
		}
	})
}
