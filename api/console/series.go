package console

import (
	"math"
	"sort"

	dto "github.com/prometheus/client_model/go"
)

// The metrics a model's live figures are computed from (actors.Metrics).
const (
	requestsMetric = "grove_model_requests_total"
	latencyMetric  = "grove_model_request_duration_seconds"
	queueMetric    = "grove_model_queue_depth"
	inflightMetric = "grove_model_inflight"
)

// modelCounts is one model's cumulative figures at one gather: requests,
// the latency histogram's cumulative bucket counts (by upper bound, +Inf
// last), and the gauges.
type modelCounts struct {
	requests        float64
	bounds          []float64
	buckets         []uint64
	queue, inflight float64
}

// snapshot is every model's figures at one gather, by model path.
type snapshot map[string]*modelCounts

// snapshotOf sums the families' per-model series over their other labels
// (api, outcome): the live figures are the model's, whatever the API.
// Series without a model label, or with an empty one (requests for
// unknown paths), are left out.
func snapshotOf(families []*dto.MetricFamily) snapshot {
	s := snapshot{}
	get := func(m *dto.Metric) *modelCounts {
		for _, l := range m.GetLabel() {
			if l.GetName() == "model" && l.GetValue() != "" {
				c := s[l.GetValue()]
				if c == nil {
					c = &modelCounts{}
					s[l.GetValue()] = c
				}
				return c
			}
		}
		return nil
	}
	for _, f := range families {
		for _, m := range f.GetMetric() {
			switch f.GetName() {
			case requestsMetric:
				if c := get(m); c != nil {
					c.requests += m.GetCounter().GetValue()
				}
			case queueMetric:
				if c := get(m); c != nil {
					c.queue += m.GetGauge().GetValue()
				}
			case inflightMetric:
				if c := get(m); c != nil {
					c.inflight += m.GetGauge().GetValue()
				}
			case latencyMetric:
				if c := get(m); c != nil {
					c.addHistogram(m.GetHistogram())
				}
			}
		}
	}
	return s
}

// addHistogram adds h's cumulative buckets (and its +Inf count) to c's.
func (c *modelCounts) addHistogram(h *dto.Histogram) {
	if h == nil {
		return
	}
	bs := h.GetBucket()
	if c.bounds == nil {
		c.bounds = make([]float64, 0, len(bs)+1)
		for _, b := range bs {
			c.bounds = append(c.bounds, b.GetUpperBound())
		}
		if len(c.bounds) == 0 || !math.IsInf(c.bounds[len(c.bounds)-1], 1) {
			c.bounds = append(c.bounds, math.Inf(1))
		}
		c.buckets = make([]uint64, len(c.bounds))
	}
	for _, b := range bs {
		if i := sort.SearchFloat64s(c.bounds, b.GetUpperBound()); i < len(c.bounds) && c.bounds[i] == b.GetUpperBound() {
			c.buckets[i] += b.GetCumulativeCount()
		}
	}
	if last := len(c.bounds) - 1; len(bs) == 0 || !math.IsInf(bs[len(bs)-1].GetUpperBound(), 1) {
		c.buckets[last] += h.GetSampleCount()
	}
}

// ModelPoint is a model's live figures over one sampling interval.
type ModelPoint struct {
	// T is the interval's end, Unix milliseconds.
	T int64 `json:"t"`
	// Requests is the number of requests answered in the interval, and
	// RPS that per second.
	Requests float64 `json:"requests"`
	RPS      float64 `json:"rps"`
	// P50Ms and P99Ms are the median and 99th-percentile latency of the
	// requests answered in the interval, interpolated within the latency
	// histogram's buckets; nil when none was answered.
	P50Ms *float64 `json:"p50_ms"`
	P99Ms *float64 `json:"p99_ms"`
	// Queue and Inflight are the model's queue depth and requests in
	// flight at T.
	Queue    float64 `json:"queue"`
	Inflight float64 `json:"inflight"`
}

// pointBetween is the figures of the interval of seconds from prev to cur,
// ending at t (Unix ms); prev nil (a model first seen) counts from zero. A
// counter that went down (a series deleted and made again) counts from
// zero too.
func pointBetween(prev, cur *modelCounts, seconds float64, t int64) ModelPoint {
	p := ModelPoint{T: t, Queue: cur.queue, Inflight: cur.inflight}
	var prevReq float64
	var prevBuckets []uint64
	if prev != nil {
		prevReq = prev.requests
		if len(prev.buckets) == len(cur.buckets) {
			prevBuckets = prev.buckets
		}
	}
	switch d := cur.requests - prevReq; {
	case d >= 0:
		p.Requests = d
	default:
		p.Requests = cur.requests
	}
	if seconds > 0 {
		p.RPS = p.Requests / seconds
	}
	delta := make([]uint64, len(cur.buckets))
	reset := false
	for i, n := range cur.buckets {
		if prevBuckets != nil {
			if n < prevBuckets[i] {
				reset = true
				break
			}
			n -= prevBuckets[i]
		}
		delta[i] = n
	}
	if reset {
		copy(delta, cur.buckets)
	}
	if q, ok := quantile(0.5, cur.bounds, delta); ok {
		v := q * 1000
		p.P50Ms = &v
	}
	if q, ok := quantile(0.99, cur.bounds, delta); ok {
		v := q * 1000
		p.P99Ms = &v
	}
	return p
}

// quantile is the q-quantile of the observations counted in cumulative
// buckets with the given upper bounds (the last +Inf), interpolated
// linearly within the bucket it falls in, as Prometheus's
// histogram_quantile does: a quantile in the +Inf bucket is the largest
// finite bound, and the first bucket starts at 0. ok is false when the
// buckets hold no observation.
func quantile(q float64, bounds []float64, cumulative []uint64) (v float64, ok bool) {
	if len(bounds) == 0 || len(bounds) != len(cumulative) {
		return 0, false
	}
	total := cumulative[len(cumulative)-1]
	if total == 0 {
		return 0, false
	}
	rank := q * float64(total)
	i := sort.Search(len(cumulative), func(i int) bool { return float64(cumulative[i]) >= rank })
	if i >= len(bounds) {
		i = len(bounds) - 1
	}
	if math.IsInf(bounds[i], 1) {
		if i == 0 {
			return 0, true
		}
		return bounds[i-1], true
	}
	lower, below := 0.0, uint64(0)
	if i > 0 {
		lower, below = bounds[i-1], cumulative[i-1]
	}
	in := cumulative[i] - below
	if in == 0 {
		return bounds[i], true
	}
	return lower + (bounds[i]-lower)*(rank-float64(below))/float64(in), true
}

// ring keeps the last n values appended.
type ring[T any] struct {
	buf  []T
	next int
	full bool
}

func newRing[T any](n int) *ring[T] { return &ring[T]{buf: make([]T, n)} }

func (r *ring[T]) add(v T) {
	r.buf[r.next] = v
	r.next++
	if r.next == len(r.buf) {
		r.next, r.full = 0, true
	}
}

// values returns the values kept, oldest first, in a new slice.
func (r *ring[T]) values() []T {
	if !r.full {
		return append([]T(nil), r.buf[:r.next]...)
	}
	return append(append(make([]T, 0, len(r.buf)), r.buf[r.next:]...), r.buf[:r.next]...)
}
