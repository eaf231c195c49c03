package join

import (
	"cmp"
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
)

func TestDueHeapPopsByDueTimeThenKey(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	var h dueHeap
	var want []dueItem
	for i := range 5000 {
		// Few distinct due times: most items tie on it and go by key.
		it := dueItem{due: int64(r.IntN(50)), e: &memEntry{key: fmt.Sprintf("k%05d", r.IntN(100000))}}
		it.e.due = it.due
		h.push(it)
		want = append(want, it)
		if i%7 == 0 {
			// Pops between the pushes, as the sweep does.
			slices.SortFunc(want, compareDueItems)
			if got := h.pop(); got != want[0] {
				t.Fatalf("pop %d: due %d key %s, want due %d key %s", i, got.due, got.e.key, want[0].due, want[0].e.key)
			}
			want = want[1:]
		}
	}
	slices.SortFunc(want, compareDueItems)
	for i, w := range want {
		if got := h.pop(); got.due != w.due || got.e.key != w.e.key {
			t.Fatalf("pop %d of the rest: due %d key %s, want due %d key %s", i, got.due, got.e.key, w.due, w.e.key)
		}
	}
	if len(h) != 0 {
		t.Fatalf("%d items left", len(h))
	}
}

// compareDueItems orders items as the heap does.
func compareDueItems(a, b dueItem) int {
	if c := cmp.Compare(a.due, b.due); c != 0 {
		return c
	}
	return cmp.Compare(a.e.key, b.e.key)
}

// BenchmarkDueHeap pushes and pops items in a heap of 400,000, about the
// evaluate scenario's per evaluator, their due times a window after
// times in arrival order with some noise.
func BenchmarkDueHeap(b *testing.B) {
	const n = 400_000
	r := rand.New(rand.NewPCG(3, 4))
	items := make([]dueItem, n)
	for i := range items {
		items[i] = dueItem{due: int64(i)*1000 + int64(r.IntN(50_000)), e: &memEntry{key: fmt.Sprintf("g%032x", r.Uint64())}}
	}
	var h dueHeap
	for _, it := range items {
		h.push(it)
	}
	next := int64(n) * 1000
	for b.Loop() {
		h.pop()
		h.push(dueItem{due: next + int64(r.IntN(50_000)), e: items[int(next/1000)%n].e})
		next += 1000
	}
}

func TestMemStoreFindsAKeyPutAfterItWasFoundMissing(t *testing.T) {
	m := NewMemStore()
	k, other := []byte("gk"), []byte("go")
	for round := range 3 {
		if _, ok, _ := m.view(k); ok {
			t.Fatalf("round %d: a key not put is found", round)
		}
		if err := m.Put(k, 10, []byte{byte(round)}); err != nil {
			t.Fatal(err)
		}
		// Another key missing and put in between.
		if _, ok, _ := m.view(other); ok {
			t.Fatalf("round %d: %s found before it is put", round, other)
		}
		if err := m.Put(other, 20, []byte("x")); err != nil {
			t.Fatal(err)
		}
		if v, ok, _ := m.view(k); !ok || len(v) != 1 || v[0] != byte(round) {
			t.Fatalf("round %d: the key put after it was missing: %v %v", round, v, ok)
		}
		for _, key := range [][]byte{k, other} {
			if err := m.Delete(key); err != nil || m.Has(key) {
				t.Fatalf("round %d: %s still there after Delete (%v)", round, key, err)
			}
		}
	}
}
