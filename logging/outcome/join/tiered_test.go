package join

import (
	"bytes"
	"fmt"
	"maps"
	"math/rand/v2"
	"slices"
	"testing"
)

// tierings are the tiered stores the tests run over: memory spilling to
// pebble, and to a MemStore standing in for a disk (whose due times and
// order are exact), each with room for a few dozen entries in memory.
func tierings(t *testing.T) map[string]*TieredStore {
	t.Helper()
	p, err := OpenPebble(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Close() })
	return map[string]*TieredStore{"pebble": NewTieredStore(1000, p), "memory": newTiered(1000, NewMemStore())}
}

// contents is every entry of s, by key (each of the keys churn writes):
// its due time and value.
func contents(t *testing.T, s *TieredStore) map[string]string {
	t.Helper()
	out := map[string]string{}
	for i := range 100 {
		k := []byte(fmt.Sprintf("k%02d", i))
		due, v, ok, err := s.mem.entry(k)
		if !ok && err == nil {
			due, v, ok, err = s.disk.entry(k)
		}
		if err != nil {
			t.Fatal(err)
		}
		if ok {
			out[string(k)] = fmt.Sprintf("%d:%s", due, v)
		}
	}
	return out
}

// churn writes n random entries of 100 keys into s: puts, due times
// moved, deletions.
func churn(t *testing.T, rng *rand.Rand, s *TieredStore, n int) {
	t.Helper()
	for range n {
		k := []byte(fmt.Sprintf("k%02d", rng.IntN(100)))
		var err error
		if rng.IntN(4) == 0 {
			err = s.Delete(k)
		} else {
			err = s.Put(k, rng.Int64N(50), bytes.Repeat([]byte{byte('a' + rng.IntN(26))}, rng.IntN(40)))
		}
		if err != nil {
			t.Fatal(err)
		}
	}
}

// TestChangesAndScanRebuildTheStore: what the evaluator writes to its
// changelog rebuilds a tiered store. From any point, an empty copy that
// is given every commit's changes (Changes) and, from a scan begun at
// that point, a chunk of its entries per commit (Scan) is equal to the
// store once the scan is done, whatever was written meanwhile, in memory
// or on disk.
func TestChangesAndScanRebuildTheStore(t *testing.T) {
	for name, s := range tierings(t) {
		t.Run(name, func(t *testing.T) {
			rng := rand.New(rand.NewPCG(3, 4))
			s.TrackChanges()
			churn(t, rng, s, 300)
			if err := s.Changes(func(string, int64, []byte, bool) error { return nil }); err != nil {
				t.Fatal(err)
			}
			if !s.spilled {
				t.Fatal("the store never spilled to disk")
			}
			copyOf := NewMemStore()
			apply := func(key string, due int64, value []byte, deleted bool) error {
				if deleted {
					return copyOf.Delete([]byte(key))
				}
				return copyOf.Put([]byte(key), due, value)
			}
			scan := s.Scan()
			for commit, done := 0, false; !done; commit++ {
				churn(t, rng, s, 20)
				if err := s.Changes(apply); err != nil {
					t.Fatal(err)
				}
				var err error
				done, err = scan.Next(200, func(key string, due int64, value []byte) error { return apply(key, due, value, false) })
				if err != nil {
					t.Fatal(err)
				}
				if commit > 1000 {
					t.Fatal("the scan never ends")
				}
			}
			want := contents(t, s)
			got := map[string]string{}
			for k, e := range copyOf.entries {
				got[k] = fmt.Sprintf("%d:%s", e.due, e.value)
			}
			if !maps.Equal(got, want) {
				t.Errorf("the copy has %d entries, the store %d; differing keys: %v", len(got), len(want), differing(got, want))
			}
		})
	}
}

// differing are the keys whose values differ between a and b.
func differing(a, b map[string]string) []string {
	var out []string
	for k := range a {
		if a[k] != b[k] {
			out = append(out, k)
		}
	}
	for k := range b {
		if _, ok := a[k]; !ok {
			out = append(out, k)
		}
	}
	slices.Sort(out)
	return out
}

// TestChangesReportEachKeyAsItIsNow: a key written several times, moved
// from memory to disk, or deleted is reported with its entry at the
// time of Changes, and not at all once reported and left alone.
func TestChangesReportEachKeyAsItIsNow(t *testing.T) {
	for name, s := range tierings(t) {
		t.Run(name, func(t *testing.T) {
			s.TrackChanges()
			must := func(err error) {
				t.Helper()
				if err != nil {
					t.Fatal(err)
				}
			}
			big := bytes.Repeat([]byte("x"), 600)
			must(s.Put([]byte("a"), 1, []byte("1")))
			must(s.Put([]byte("a"), 2, []byte("2")))
			must(s.Put([]byte("b"), 1, big)) // memory: 600 of 1000 bytes
			must(s.Put([]byte("c"), 1, big)) // no room left: disk
			must(s.Put([]byte("d"), 1, nil))
			must(s.Delete([]byte("d")))
			must(s.Delete([]byte("b")))
			must(s.Put([]byte("b"), 3, []byte("3"))) // deleted, then put again
			got := map[string]string{}
			must(s.Changes(func(key string, due int64, value []byte, deleted bool) error {
				v := fmt.Sprintf("%d:%s", due, value)
				if deleted {
					v = "deleted"
				}
				if prev, ok := got[key]; ok && prev != v {
					t.Errorf("%s reported as %s and as %s", key, prev, v)
				}
				got[key] = v
				return nil
			}))
			want := map[string]string{"a": "2:2", "b": "3:3", "c": "1:" + string(big), "d": "deleted"}
			if !maps.Equal(got, want) {
				t.Errorf("changes %v, want %v", got, want)
			}
			must(s.Changes(func(key string, _ int64, _ []byte, _ bool) error {
				t.Errorf("%s reported again, unchanged", key)
				return nil
			}))
			must(s.Delete([]byte("c")))
			must(s.Changes(func(key string, _ int64, _ []byte, deleted bool) error {
				if key != "c" || !deleted {
					t.Errorf("after deleting c from disk: %s deleted=%v", key, deleted)
				}
				return nil
			}))
		})
	}
}
