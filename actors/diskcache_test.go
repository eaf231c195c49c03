package actors

import (
	"os"
	"path/filepath"
	"slices"
	"testing"
	"testing/synctest"

	"github.com/groveml/grove/conf/bucket"
)

func local(path, sum string, size int64) *bucket.LocalModel {
	return &bucket.LocalModel{Path: path, Checksum: sum, Size: size, Dir: "/cache/" + path + sum}
}

func dirs(ms []*bucket.LocalModel) []string {
	var out []string
	for _, m := range ms {
		out = append(out, m.Dir)
	}
	return out
}

func TestTheDiskCacheKeepsTheMostRecentlyUnloadedContentsWithinItsBytes(t *testing.T) {
	if newDiskCache(0) != nil {
		t.Fatal("a cache of 0 bytes must be none")
	}
	d := newDiskCache(100)
	a, b, c := local("a/", "1", 40), local("b/", "2", 40), local("c/", "3", 40)
	if drop := d.put(a); len(drop) != 0 {
		t.Fatalf("put a dropped %v", dirs(drop))
	}
	if drop := d.put(b); len(drop) != 0 {
		t.Fatalf("put b dropped %v", dirs(drop))
	}
	if drop := d.put(c); !slices.Equal(dirs(drop), []string{a.Dir}) || d.used != 80 {
		t.Fatalf("put c dropped %v (used %d), want a, the least recently kept", dirs(drop), d.used)
	}
	if got := d.take("a/", "1"); got != nil {
		t.Fatal("a was dropped, yet taken")
	}
	if got := d.take("b/", "9"); got != nil {
		t.Fatal("took b/ for another checksum")
	}
	if got := d.take("b/", "2"); got != b || d.used != 40 {
		t.Fatalf("take b = %v, used %d", got, d.used)
	}
	if d.take("b/", "2") != nil {
		t.Fatal("b taken twice")
	}
	big := local("big/", "4", 101)
	if drop := d.put(big); !slices.Equal(dirs(drop), []string{big.Dir}) || d.used != 40 {
		t.Fatalf("put of a content larger than the cache dropped %v (used %d), want itself alone", dirs(drop), d.used)
	}
	again := local("c/", "3", 40)
	again.Dir = "/cache/c-again"
	if drop := d.put(again); !slices.Equal(dirs(drop), []string{c.Dir}) || d.used != 40 {
		t.Fatalf("a second copy of c's content dropped %v (used %d), want the first copy", dirs(drop), d.used)
	}
	if all := d.all(); !slices.Equal(dirs(all), []string{again.Dir}) || d.used != 0 {
		t.Fatalf("all = %v, used %d", dirs(all), d.used)
	}
}

// TestAnOnDemandModelUnloadedForTheBudgetLoadsAgainFromTheDiskCache: with
// disk_cache_bytes, the files of an on-demand model unloaded for the
// budget stay on disk; its next load verifies them there and opens
// nothing in the bucket, answers as before, and files changed on disk
// meanwhile are fetched again. An entry without a checksum is always
// fetched; Stop deletes what the cache holds.
func TestAnOnDemandModelUnloadedForTheBudgetLoadsAgainFromTheDiskCache(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		size := int64(len(mustSpec(t, version(1))))
		var cacheDir string
		sumA, sumB := checksumOf(t, "a/", version(1)), checksumOf(t, "b/", version(2))
		w := newWorld(t, configJSON(entry("a/", sumA, onDemandLoad), entry("b/", sumB, onDemandLoad), entry("c/", "", onDemandLoad)),
			map[string]faultySpec{"a/": version(1), "b/": version(2), "c/": version(3)}, unmeasured,
			func(_ *world, o *Options) {
				o.MemoryBudget, o.MemoryFactor, o.DiskCacheBytes = size+size/2, 1, 10*size
				cacheDir = o.CacheDir
			})
		synctest.Wait()
		for _, p := range []string{"a/", "b/", "a/", "c/", "b/"} {
			if res := w.infer(p, 2); res.Err != nil {
				t.Fatalf("%s: %v", p, res.Err)
			}
			synctest.Wait()
		}
		// a/ and b/ loaded twice, the second time from the disk; c/ has no
		// checksum to be found by.
		for obj, want := range map[string]int{"a/model.faulty": 1, "b/model.faulty": 1, "c/model.faulty": 1} {
			if n := w.b.opened(obj); n != want {
				t.Errorf("%s opened %d times, want %d", obj, n, want)
			}
		}
		if n := w.metric("grove_model_disk_cache_hits_total", nil); n != 2 {
			t.Errorf("disk cache hits = %v, want 2", n)
		}
		if n := w.metric("grove_model_disk_cache_bytes", nil); n != float64(size) {
			t.Errorf("disk cache bytes = %v, want a/'s %d (c/'s files are not kept: no checksum finds them)", n, size)
		}

		// a/'s kept files changed on disk: fetched again.
		kept, err := filepath.Glob(filepath.Join(cacheDir, "a-*", "model.faulty"))
		if err != nil || len(kept) != 1 {
			t.Fatalf("a/'s kept files: %v %v", kept, err)
		}
		if err := os.WriteFile(kept[0], []byte(`{"garbage": true}`), 0o644); err != nil {
			t.Fatal(err)
		}
		if res := w.infer("a/", 2); res.Err != nil {
			t.Fatalf("a/ after its kept files changed: %v", res.Err)
		}
		synctest.Wait()
		if n := w.b.opened("a/model.faulty"); n != 2 {
			t.Errorf("a/model.faulty opened %d times after its kept copy changed, want 2", n)
		}
		if n := w.metric("grove_model_disk_cache_invalid_total", nil); n != 1 {
			t.Errorf("disk cache invalid = %v, want 1", n)
		}
		if _, err := os.Stat(kept[0]); !os.IsNotExist(err) {
			t.Errorf("the changed copy is still on disk: %v", err)
		}

		w.stop()
		left, _ := filepath.Glob(filepath.Join(cacheDir, "*", "model.faulty"))
		if len(left) != 0 {
			t.Errorf("model files left after Stop: %v", left)
		}
	})
}
