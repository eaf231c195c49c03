package quality

import (
	"testing"
	"time"
)

// quantiles returns the q-quantiles of the latencies w holds at now, and
// how many it holds, as the engine reads them (Sum, then Quantiles).
func (w *LatencyWindow) quantiles(now time.Time, qs ...float64) ([]time.Duration, uint64) {
	var h Histogram
	n := w.Sum(now, &h)
	return h.Quantiles(n, qs...), n
}

// observe records latency d at now, as the engine does.
func (w *LatencyWindow) observe(d time.Duration, now time.Time) { w.Count(LatencyBucket(d), now) }

func TestLatencyWindowQuantilesWithinFivePercent(t *testing.T) {
	start := time.Unix(1000, 0)
	w := &LatencyWindow{start: start}
	// 1..1000 µs, once each: p50 ≈ 500 µs, p99 ≈ 990 µs.
	for i := 1; i <= 1000; i++ {
		w.observe(time.Duration(i)*time.Microsecond, start.Add(time.Second))
	}
	q, n := w.quantiles(start.Add(2*time.Second), 0.5, 0.99)
	if n != 1000 {
		t.Fatalf("count %d, want 1000", n)
	}
	for i, want := range []time.Duration{500 * time.Microsecond, 990 * time.Microsecond} {
		if r := float64(q[i]) / float64(want); r < 0.95 || r > 1.05 {
			t.Errorf("quantile %d = %v, want %v ± 5%%", i, q[i], want)
		}
	}
}

func TestLatencyWindowForgetsAfterTwoSpans(t *testing.T) {
	start := time.Unix(1000, 0)
	w := &LatencyWindow{start: start}
	w.observe(time.Second, start)
	if _, n := w.quantiles(start.Add(latencySpan+time.Second), 0.5); n != 1 {
		t.Errorf("one span later: %d observations, want 1 (the previous window counts)", n)
	}
	w.observe(time.Millisecond, start.Add(latencySpan+time.Second))
	q, n := w.quantiles(start.Add(2*latencySpan+time.Second), 0.99)
	if n != 1 || q[0] > 2*time.Millisecond {
		t.Errorf("two spans later: %d observations, p99 %v; want only the 1ms one", n, q[0])
	}
	if _, n := w.quantiles(start.Add(10*latencySpan), 0.5); n != 0 {
		t.Errorf("long idle: %d observations, want 0", n)
	}
}

func TestLatencyWindowClampsExtremes(t *testing.T) {
	w := &LatencyWindow{start: time.Unix(0, 0)}
	w.observe(0, time.Unix(0, 0))
	w.observe(time.Hour, time.Unix(0, 0))
	q, n := w.quantiles(time.Unix(0, 0), 0.5, 1)
	if n != 2 || q[0] > 2*time.Microsecond || q[1] < time.Minute {
		t.Errorf("quantiles of {0, 1h}: %v (n=%d)", q, n)
	}
}
