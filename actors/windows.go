package actors

import (
	"sync"
	"time"

	"github.com/groveml/grove/routing"
	"github.com/groveml/grove/routing/quality"
)

// The comparison and latency windows (package quality adds them up)
// behind the locks that say who waits for whom (doc.go's table): the
// goroutines that answer requests write them, the router, the stats and
// the metrics collector read them.

// gateRefresh is how long the routing policy's Comparison (its 5-minute
// p99 ratio is the costly part) is reused before it is worked out again.
const gateRefresh = time.Second

// compareWindows keep a shadow servable's compared executions. The
// goroutines finishing shadow copies write them; the stats and the
// metrics collector read them; mu guards them. The router reads only the
// routing policy's Comparison, published apart under gmu: the windows'
// readers hold mu while they scan the last-N ring (up to
// shadow_compare_window executions), which the router, on every user
// request's path, must never wait for.
type compareWindows struct {
	mu sync.Mutex
	w  *quality.Windows
	// gmu guards the routing policy's Comparison of content gateContent
	// (taken after mu, never before it): record publishes its counts and
	// mean difference, comparison works its 5-minute p99 ratio out at p99At.
	gmu         sync.Mutex
	gate        routing.Comparison
	gateContent int64
	p99At       time.Time
}

// newCompareWindows keeps the last n executions in its last-N window.
func newCompareWindows(n int) *compareWindows {
	return &compareWindows{w: quality.NewWindows(n)}
}

// record adds e, an execution of content id, at now (quality.Windows.
// Record: a content still served (current) starts the windows afresh, a
// straggler of one replaced is left out), and publishes the gate's counts.
func (w *compareWindows) record(id int64, current bool, e quality.Execution, now time.Time) {
	w.mu.Lock()
	defer w.mu.Unlock()
	prev := w.w.Content()
	if !w.w.Record(id, current, e, now) {
		return
	}
	g := w.w.Gate()
	w.gmu.Lock()
	if id != prev {
		w.gate, w.gateContent, w.p99At = routing.Comparison{}, id, time.Time{}
	}
	w.gate.Executions, w.gate.Errors, w.gate.MeanAbsDiff = g.Executions, g.Errors, g.MeanAbsDiff
	w.gmu.Unlock()
}

// stats describes the windows of content id (loaded at loadedAt) at now:
// all empty when it has not been compared yet. The scan of the last-N
// window holds mu; the figures are worked out after.
func (w *compareWindows) stats(id int64, loadedAt time.Time, tol float64, now time.Time) *quality.ComparisonStats {
	w.mu.Lock()
	snap := w.w.Snapshot(id, now)
	w.mu.Unlock()
	return snap.Stats(loadedAt, tol)
}

// comparison is what the routing policy's promote_when rule reads: the
// executions, errors and mean absolute difference since content id was
// loaded, the p99 ratio over the last 5 minutes (worked out at most once
// per gateRefresh: the router asks on every request). It is zero when
// content id has not been compared.
//
// It never waits for mu: when a reader of the windows holds it, the p99
// ratio worked out before is kept until the next call finds mu free.
func (w *compareWindows) comparison(id int64, now time.Time) routing.Comparison {
	w.gmu.Lock()
	defer w.gmu.Unlock()
	if id != w.gateContent {
		return routing.Comparison{}
	}
	if age := now.Sub(w.p99At); (w.p99At.IsZero() || age >= gateRefresh || age < 0) && w.mu.TryLock() {
		if id == w.w.Content() {
			w.gate.P99Ratio = w.w.RecentP99Ratio(now)
			w.p99At = now
		}
		w.mu.Unlock()
	}
	return w.gate
}

// latencyWindow estimates quantiles of recent request latencies in
// constant memory (quality.LatencyWindow), for the per-servable p50 and
// p99 of the stats API and the release gates; mu guards it.
type latencyWindow struct {
	mu sync.Mutex
	w  quality.LatencyWindow
}

// newLatencyWindow returns a latency window whose first span starts at
// start.
func newLatencyWindow(start time.Time) latencyWindow {
	return latencyWindow{w: quality.NewLatencyWindow(start)}
}

// observe records one latency at now.
func (l *latencyWindow) observe(d time.Duration, now time.Time) {
	b := quality.LatencyBucket(d)
	l.mu.Lock()
	l.w.Count(b, now)
	l.mu.Unlock()
}

// quantiles returns the q-quantiles (0 < q ≤ 1, ascending) of the
// latencies of the last one to two minutes at now, and how many there
// were; each is the geometric middle of its bucket.
func (l *latencyWindow) quantiles(now time.Time, qs ...float64) ([]time.Duration, uint64) {
	var h quality.Histogram
	l.mu.Lock()
	n := l.w.Sum(now, &h)
	l.mu.Unlock()
	return h.Quantiles(n, qs...), n
}
