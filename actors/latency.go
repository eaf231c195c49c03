package actors

import (
	"math"
	"sync"
	"time"
)

// Latency buckets: bucket i holds latencies in [1.05^i, 1.05^(i+1)) µs, so
// a quantile is exact to within 5 %; the last bucket holds everything over
// about 100 s.
const (
	latencyBuckets = 380
	latencyGrowth  = 1.05
	// latencySpan is how long one window collects; quantiles cover the
	// current window and the one before, so the last one to two minutes.
	latencySpan = time.Minute
)

// latencyWindow estimates quantiles of recent request latencies in
// constant memory, for the per-servable p50 and p99 of the stats API.
type latencyWindow struct {
	mu        sync.Mutex
	start     time.Time // when cur began
	cur, prev [latencyBuckets]uint32
}

func latencyBucket(d time.Duration) int {
	us := float64(d) / float64(time.Microsecond)
	if us < 1 {
		return 0
	}
	return min(int(math.Log(us)/math.Log(latencyGrowth)), latencyBuckets-1)
}

// rotate starts a new window if the current one is over.
func (w *latencyWindow) rotate(now time.Time) {
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

// observe records one latency at now.
func (w *latencyWindow) observe(d time.Duration, now time.Time) {
	b := latencyBucket(d)
	w.mu.Lock()
	w.rotate(now)
	w.cur[b]++
	w.mu.Unlock()
}

// quantiles returns the q-quantiles (0 < q ≤ 1, ascending) of the
// latencies of the last one to two minutes at now, and how many there were;
// each is the geometric middle of its bucket.
func (w *latencyWindow) quantiles(now time.Time, qs ...float64) ([]time.Duration, uint64) {
	w.mu.Lock()
	w.rotate(now)
	var counts [latencyBuckets]uint64
	var n uint64
	for i := range counts {
		counts[i] = uint64(w.cur[i]) + uint64(w.prev[i])
		n += counts[i]
	}
	w.mu.Unlock()
	return bucketQuantiles(&counts, n, qs...), n
}

// bucketQuantiles returns the q-quantiles (0 < q ≤ 1, ascending) of n
// latencies counted in latency buckets; each is the geometric middle of
// its bucket, and all are 0 when n is 0.
func bucketQuantiles(counts *[latencyBuckets]uint64, n uint64, qs ...float64) []time.Duration {
	out := make([]time.Duration, len(qs))
	if n == 0 {
		return out
	}
	var seen uint64
	j := 0
	for i := 0; i < latencyBuckets && j < len(qs); i++ {
		seen += counts[i]
		for j < len(qs) && float64(seen) >= qs[j]*float64(n) && counts[i] > 0 {
			mid := math.Pow(latencyGrowth, float64(i)+0.5)
			out[j] = time.Duration(mid * float64(time.Microsecond))
			j++
		}
	}
	return out
}
