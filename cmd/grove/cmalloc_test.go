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
