package actors

import (
	"testing"

	"github.com/groveml/grove/routing/quality"
	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
)

// A model's output names become label values: one that is not UTF-8 must
// not fail the scrape (MustNewConstMetric panics on it, and the registry
// turns that into an error that fails all of /metrics), nor may two names
// repaired alike make the same series twice.
func TestCompareMetricsOutputNamesThatAreNotUTF8(t *testing.T) {
	c := newCompareCollector(nil)
	ptr := func(v float64) *float64 { return &v }
	w := &quality.CompareWindow{Executions: 3, Outputs: []quality.OutputComparison{
		{Name: "p\xff", Compared: 3, WithinTolerance: ptr(1.0), Agreement: ptr(1.0)},
		{Name: "p\xfe", Compared: 3, WithinTolerance: ptr(0.5)},
		{Name: "q", Compared: 3, WithinTolerance: ptr(1.0)},
	}}
	ch := make(chan prometheus.Metric, 100)
	func() {
		defer func() {
			if r := recover(); r != nil {
				t.Fatalf("collecting panicked: %v", r)
			}
		}()
		c.collectWindow(ch, "ads/pctr/1", "v2", "last_n", w)
	}()
	close(ch)
	seen := map[string]bool{}
	for m := range ch {
		var pb dto.Metric
		if err := m.Write(&pb); err != nil {
			t.Fatal(err)
		}
		key := m.Desc().String()
		for _, l := range pb.GetLabel() {
			key += "," + l.GetName() + "=" + l.GetValue()
		}
		if seen[key] {
			t.Errorf("series %s collected twice", key)
		}
		seen[key] = true
	}
	if len(seen) != 3+5+4 { // the window's 3; p's 5 (the first of the two named alike); q's 4
		t.Errorf("%d series, want 12: %v", len(seen), seen)
	}
}
