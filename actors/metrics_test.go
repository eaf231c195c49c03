package actors

import (
	"context"
	"testing"
	"testing/synctest"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// Each request counts once in grove_model_requests_total and
// grove_model_request_duration_seconds under its own API, model and
// outcome, however many APIs and models share the series resolved for
// successes (content.observe).
func TestRequestsCountUnderTheirAPIModelAndOutcome(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		w := newWorld(t, configJSON(entry("a/", "", ""), entry("b/", "", "")),
			map[string]faultySpec{"a/": {ErrorOn: f64(7)}, "b/": version(1)})
		defer w.stop()
		synctest.Wait()
		for _, c := range []struct {
			api, path string
			v         float32
		}{{"x", "a/", 1}, {"x", "a/", 2}, {"y", "a/", 3}, {"x", "b/", 4}, {"x", "a/", 7}, {"y", "b/", 5}, {"y", "b/", 6}, {"y", "b/", 7}} {
			if _, err := w.sys.Infer(context.Background(), []Request{{API: c.api, ModelPath: c.path, Inputs: scalar(t, c.v)}}); err != nil {
				t.Fatal(err)
			}
		}
		for _, want := range []struct {
			api, model, outcome string
			n                   float64
		}{{"x", "a/", "ok", 2}, {"y", "a/", "ok", 1}, {"x", "a/", "execution_error", 1}, {"x", "b/", "ok", 1}, {"y", "b/", "ok", 3}} {
			labels := map[string]string{"api": want.api, "model": want.model, "outcome": want.outcome}
			if n := w.metric("grove_model_requests_total", labels); n != want.n {
				t.Errorf("grove_model_requests_total%v = %v, want %v", labels, n, want.n)
			}
		}
		fams, err := w.reg.Gather()
		if err != nil {
			t.Fatal(err)
		}
		got := map[string]uint64{}
		for _, f := range fams {
			if f.GetName() != "grove_model_request_duration_seconds" {
				continue
			}
			for _, m := range f.GetMetric() {
				key := ""
				for _, lp := range m.GetLabel() {
					key += lp.GetName() + "=" + lp.GetValue() + " "
				}
				got[key] = m.GetHistogram().GetSampleCount()
			}
		}
		for key, n := range map[string]uint64{"api=x model=a/ ": 3, "api=y model=a/ ": 1, "api=x model=b/ ": 1, "api=y model=b/ ": 3} {
			if got[key] != n {
				t.Errorf("grove_model_request_duration_seconds{%s} counted %d requests, want %d (all: %v)", key, got[key], n, got)
			}
		}
	})
}

// BenchmarkObserveSuccess is what counting one successful request costs
// in grove_model_requests_total and grove_model_request_duration_seconds:
// looked up by labels (Metrics.observe, as errors still are), or in the
// series the content resolved for the API (content.observe).
func BenchmarkObserveSuccess(b *testing.B) {
	m := NewMetrics(prometheus.NewRegistry())
	c := &content{path: "pctr_v1/"}
	b.Run("by-labels", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			m.observe("ba", c.path, nil, time.Millisecond)
		}
	})
	b.Run("resolved", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			c.observe(m, "ba", nil, time.Millisecond)
		}
	})
}
