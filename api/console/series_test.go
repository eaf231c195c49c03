package console

import (
	"math"
	"slices"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
)

func TestQuantile(t *testing.T) {
	inf := math.Inf(1)
	bounds := []float64{0.001, 0.01, 0.1, inf}
	for _, tc := range []struct {
		name   string
		q      float64
		bounds []float64
		cum    []uint64
		want   float64
		ok     bool
	}{
		{"empty", 0.5, bounds, []uint64{0, 0, 0, 0}, 0, false},
		{"no buckets", 0.5, nil, nil, 0, false},
		{"mismatched", 0.5, bounds, []uint64{1, 2}, 0, false},
		// 10 in the first bucket: the median is half way through it.
		{"first bucket", 0.5, bounds, []uint64{10, 10, 10, 10}, 0.0005, true},
		// 10 in (0.001, 0.01]: rank 5 of 10 is half way: 0.0055.
		{"second bucket", 0.5, bounds, []uint64{0, 10, 10, 10}, 0.0055, true},
		// rank 9.9 of 10, 9 below 0.01, 1 in (0.01, 0.1]: 0.01 + 0.09*0.9.
		{"p99 in a sparse bucket", 0.99, bounds, []uint64{0, 9, 10, 10}, 0.01 + 0.09*0.9, true},
		// Past the last finite bound: that bound.
		{"in +Inf", 0.99, bounds, []uint64{0, 0, 1, 10}, 0.1, true},
		{"only +Inf", 0.5, []float64{inf}, []uint64{3}, 0, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, ok := quantile(tc.q, tc.bounds, tc.cum)
			if ok != tc.ok || math.Abs(got-tc.want) > 1e-12 {
				t.Errorf("quantile(%v) = %v, %v; want %v, %v", tc.q, got, ok, tc.want, tc.ok)
			}
		})
	}
}

// actorMetrics are the actors' metrics the console reads, with their real
// names and labels, on a registry of their own.
type actorMetrics struct {
	reg                *prometheus.Registry
	requests           *prometheus.CounterVec
	latency            *prometheus.HistogramVec
	queue, inflight    *prometheus.GaugeVec
	unrelatedFamilyOne prometheus.Counter
}

func newActorMetrics() *actorMetrics {
	m := &actorMetrics{reg: prometheus.NewRegistry(),
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{Name: requestsMetric}, []string{"api", "model", "outcome"}),
		latency: prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: latencyMetric,
			Buckets: []float64{.001, .01, .1}}, []string{"api", "model"}),
		queue:              prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: queueMetric}, []string{"model"}),
		inflight:           prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: inflightMetric}, []string{"model"}),
		unrelatedFamilyOne: prometheus.NewCounter(prometheus.CounterOpts{Name: "grove_unrelated_total"}),
	}
	m.reg.MustRegister(m.requests, m.latency, m.queue, m.inflight, m.unrelatedFamilyOne)
	return m
}

// serve counts n requests of model answered in d seconds under api.
func (m *actorMetrics) serve(api, model string, n int, d float64) {
	for range n {
		m.requests.WithLabelValues(api, model, "ok").Inc()
		m.latency.WithLabelValues(api, model).Observe(d)
	}
}

func (m *actorMetrics) snapshot(t *testing.T) snapshot {
	t.Helper()
	fams, err := m.reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	return snapshotOf(fams)
}

func TestSnapshotSumsEachModelOverAPIsAndOutcomes(t *testing.T) {
	m := newActorMetrics()
	m.serve("ba", "a/", 3, 0.0005)
	m.serve("forestflow", "a/", 2, 0.05)
	m.requests.WithLabelValues("ba", "a/", "input_error").Add(4)
	m.requests.WithLabelValues("ba", "", "not_found").Add(7) // unknown paths: no model
	m.queue.WithLabelValues("a/").Set(5)
	m.inflight.WithLabelValues("a/").Set(2)
	m.unrelatedFamilyOne.Inc()
	s := m.snapshot(t)
	if len(s) != 1 {
		t.Fatalf("models %v, want only a/", slices.Collect(func(yield func(string) bool) {
			for k := range s {
				if !yield(k) {
					return
				}
			}
		}))
	}
	a := s["a/"]
	if a.requests != 9 || a.queue != 5 || a.inflight != 2 {
		t.Errorf("a/ = %+v, want 9 requests, queue 5, inflight 2", a)
	}
	if want := []uint64{3, 3, 5, 5}; !slices.Equal(a.buckets, want) || len(a.bounds) != 4 || !math.IsInf(a.bounds[3], 1) {
		t.Errorf("buckets %v over %v, want %v", a.buckets, a.bounds, want)
	}
}

func TestPointBetween(t *testing.T) {
	m := newActorMetrics()
	m.serve("ba", "a/", 10, 0.0005)
	first := m.snapshot(t)["a/"]

	// A model first seen counts from zero.
	p := pointBetween(nil, first, 2, 1000)
	if p.T != 1000 || p.Requests != 10 || p.RPS != 5 || p.P50Ms == nil || math.Abs(*p.P50Ms-0.5) > 1e-9 {
		t.Errorf("first point %+v (p50 %v)", p, deref(p.P50Ms))
	}

	// Only the interval's requests count: 10 more, all slow.
	m.serve("ba", "a/", 10, 0.05)
	m.queue.WithLabelValues("a/").Set(3)
	second := m.snapshot(t)["a/"]
	p = pointBetween(first, second, 1, 2000)
	if p.Requests != 10 || p.RPS != 10 || p.Queue != 3 {
		t.Errorf("second point %+v", p)
	}
	if p.P50Ms == nil || *p.P50Ms <= 10 || p.P99Ms == nil || *p.P99Ms > 100 || *p.P99Ms < *p.P50Ms {
		t.Errorf("second point's latency p50 %v p99 %v, want both in (10, 100] ms", deref(p.P50Ms), deref(p.P99Ms))
	}

	// No request: no latency, not zero latency.
	p = pointBetween(second, second, 1, 3000)
	if p.Requests != 0 || p.RPS != 0 || p.P50Ms != nil || p.P99Ms != nil {
		t.Errorf("idle point %+v", p)
	}

	// Counters that went down (series made again) count from zero.
	fresh := newActorMetrics()
	fresh.serve("ba", "a/", 4, 0.0005)
	p = pointBetween(second, fresh.snapshot(t)["a/"], 1, 4000)
	if p.Requests != 4 || p.P50Ms == nil || *p.P50Ms > 1 {
		t.Errorf("point after a reset %+v (p50 %v)", p, deref(p.P50Ms))
	}
}

func deref(p *float64) any {
	if p == nil {
		return nil
	}
	return *p
}

func TestRingKeepsTheLastN(t *testing.T) {
	r := newRing[int](3)
	if got := r.values(); len(got) != 0 {
		t.Errorf("empty ring: %v", got)
	}
	for i, want := range [][]int{{1}, {1, 2}, {1, 2, 3}, {2, 3, 4}, {3, 4, 5}, {4, 5, 6}, {5, 6, 7}} {
		r.add(i + 1)
		if got := r.values(); !slices.Equal(got, want) {
			t.Errorf("after adding %d: %v, want %v", i+1, got, want)
		}
	}
	v := r.values()
	v[0] = 99
	if r.values()[0] == 99 {
		t.Error("values shares the ring's memory")
	}
}
