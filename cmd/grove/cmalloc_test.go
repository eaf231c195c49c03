package main

import (
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/groveml/grove/internal/mallocarena"
)

// The collector serves glibc's count of the C heap, one series each: in
// use (above zero: the C libraries linked in allocate as they start),
// free, and the mapped share of in use, no larger than it.
func TestCHeapCollectorServesTheCHeapInUseFreeAndMapped(t *testing.T) {
	if _, ok := mallocarena.ReadStats(); !ok {
		t.Skip("no glibc heap accounting on this platform")
	}
	reg := prometheus.NewRegistry()
	reg.MustRegister(newCHeapCollector())
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]float64{}
	for _, mf := range mfs {
		if len(mf.GetMetric()) != 1 {
			t.Fatalf("%s: %d series, want 1", mf.GetName(), len(mf.GetMetric()))
		}
		got[mf.GetName()] = mf.GetMetric()[0].GetGauge().GetValue()
	}
	for _, name := range []string{"grove_c_heap_inuse_bytes", "grove_c_heap_free_bytes", "grove_c_heap_mmapped_bytes"} {
		if _, ok := got[name]; !ok {
			t.Errorf("%s not served (got %v)", name, got)
		}
	}
	if inuse := got["grove_c_heap_inuse_bytes"]; inuse <= 0 || got["grove_c_heap_mmapped_bytes"] > inuse {
		t.Errorf("in use %v, mapped %v: want in use > 0 and mapped within it", inuse, got["grove_c_heap_mmapped_bytes"])
	}
}

// The C heap is trimmed only when malloc holds more than the threshold
// free, and only where glibc's accounting is there.
func TestTrimWhenFreeTrimsOnlyAboveTheThreshold(t *testing.T) {
	for _, tc := range []struct {
		name     string
		free     uint64
		ok       bool
		released bool
		want     bool
	}{
		{"above, released", 17 << 20, true, true, true},
		{"above, nothing to release", 17 << 20, true, false, false},
		{"at the threshold", 16 << 20, true, true, false},
		{"below", 1 << 20, true, true, false},
		{"no glibc", 1 << 30, false, true, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			called := false
			read := func() (mallocarena.Stats, bool) { return mallocarena.Stats{Free: tc.free}, tc.ok }
			trim := func() bool { called = true; return tc.released }
			if got := trimWhenFree(read, trim, 16<<20); got != tc.want {
				t.Errorf("trimWhenFree = %v, want %v", got, tc.want)
			}
			if wantCall := tc.ok && tc.free > 16<<20; called != wantCall {
				t.Errorf("trim called %v, want %v", called, wantCall)
			}
		})
	}
}
