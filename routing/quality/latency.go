package quality

import (
	"math"
	"time"
)

// Latency buckets: bucket i holds latencies in [1.05^i, 1.05^(i+1)) µs, so
// a quantile is exact to within 5 %; the last bucket holds everything over
// about 100 s.
const (
	latencyBuckets = 380
	latencyGrowth  = 1.05
	// latencySpan is how long one latency window collects; quantiles
	// cover the current window and the one before, so the last one to two
	// minutes.
	latencySpan = time.Minute
)

// LatencyBucket is the bucket of the latency histograms that holds d.
func LatencyBucket(d time.Duration) int {
	us := float64(d) / float64(time.Microsecond)
	if us < 1 {
		return 0
	}
	return min(int(math.Log(us)/math.Log(latencyGrowth)), latencyBuckets-1)
}

// Histogram counts latencies by bucket (LatencyBucket).
type Histogram [latencyBuckets]uint64

// Quantiles returns the q-quantiles (0 < q ≤ 1, ascending) of the n
// latencies h counts; each is the geometric middle of its bucket, and all
// are 0 when n is 0.
func (h *Histogram) Quantiles(n uint64, qs ...float64) []time.Duration {
	out := make([]time.Duration, len(qs))
	if n == 0 {
		return out
	}
	var seen uint64
	j := 0
	for i := 0; i < latencyBuckets && j < len(qs); i++ {
		seen += h[i]
		for j < len(qs) && float64(seen) >= qs[j]*float64(n) && h[i] > 0 {
			mid := math.Pow(latencyGrowth, float64(i)+0.5)
			out[j] = time.Duration(mid * float64(time.Microsecond))
			j++
		}
	}
	return out
}

// LatencyWindow counts recent request latencies in constant memory, for
// their quantiles over the last one to two minutes: two windows of
// latencySpan each, the current one and the one before. Not safe for
// concurrent use.
type LatencyWindow struct {
	start     time.Time // when cur began
	cur, prev [latencyBuckets]uint32
}

// NewLatencyWindow returns a window whose current span starts at start.
func NewLatencyWindow(start time.Time) LatencyWindow {
	return LatencyWindow{start: start}
}

// rotate starts a new window if the current one is over.
func (w *LatencyWindow) rotate(now time.Time) {
	switch age := now.Sub(w.start); {
	case age < latencySpan:
	case age < 2*latencySpan:
		w.prev, w.cur = w.cur, [latencyBuckets]uint32{}
		w.start = w.start.Add(latencySpan)
	default:
		w.prev, w.cur = [latencyBuckets]uint32{}, [latencyBuckets]uint32{}
		w.start = now
	}
}

// Count records one latency, in bucket (LatencyBucket), at now.
func (w *LatencyWindow) Count(bucket int, now time.Time) {
	w.rotate(now)
	w.cur[bucket]++
}

// Sum adds the latencies of the last one to two minutes at now into h
// and returns how many there were.
func (w *LatencyWindow) Sum(now time.Time, h *Histogram) uint64 {
	w.rotate(now)
	var n uint64
	for i := range h {
		h[i] += uint64(w.cur[i]) + uint64(w.prev[i])
		n += uint64(w.cur[i]) + uint64(w.prev[i])
	}
	return n
}
