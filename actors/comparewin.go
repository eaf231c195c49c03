package actors

import (
	"math"
	"slices"
	"sync"
	"time"

	"github.com/groveml/grove/routing"
)

// Comparison windows: what a shadow servable's compared executions add up
// to, since its content was loaded, over its last N executions and over
// the last 5 minutes, in bounded memory: running sums and latency
// histograms, and for the last N a ring of the N executions' figures.

const (
	// DefaultCompareWindow is the size of the last-N window when the
	// server config sets none.
	DefaultCompareWindow = 1000
	// compareSlotSpan and compareSlots make the recent window: the slots of
	// the last 5 to 5.5 minutes, in 30-second steps.
	compareSlotSpan = 30 * time.Second
	compareSlots    = 11
	compareRecent   = 5 * time.Minute
	// maxCompareOutputs bounds the outputs a window keeps figures of; more
	// are left out (a model has a fixed set of outputs; this only bounds
	// memory against one that names them anew on every call).
	maxCompareOutputs = 64
	// gateRefresh is how long the routing policy's Comparison (its
	// 5-minute p99 ratio is the costly part) is reused before it is worked
	// out again.
	gateRefresh = time.Second
)

// compared is one shadow execution compared with the answer the caller
// got for the same request.
type compared struct {
	// shadowFailed: the shadow execution failed; championFailed: the
	// caller got no answer from the champion, so there was nothing to
	// compare (counted apart, not against the challenger).
	shadowFailed, championFailed bool
	// shadow and champion are their forward (compute) times, known when
	// both answered.
	shadow, champion time.Duration
	outputs          []OutputDiff
}

// outputTotals add up the diffs of one output.
type outputTotals struct {
	name                   string
	compared, mismatches   int64
	elements, nonFinite    int64
	sumAbsDiff, maxAbsDiff float64
	rows, within           int64
	scoreRows, agree       int64
	bytesRows, equal       int64
	lastMismatch           string
}

// totals add up compared executions.
type totals struct {
	executions, errors, championFailed int64
	outputs                            []outputTotals
	shadowLat, championLat             [latencyBuckets]uint32
	latencies                          uint64
}

// add counts e into t.
func (t *totals) add(e *compared) {
	if e.championFailed {
		t.championFailed++
		return
	}
	t.executions++
	if e.shadowFailed {
		t.errors++
		return
	}
	t.shadowLat[latencyBucket(e.shadow)]++
	t.championLat[latencyBucket(e.champion)]++
	t.latencies++
	for _, d := range e.outputs {
		i := slices.IndexFunc(t.outputs, func(o outputTotals) bool { return o.name == d.Name })
		if i < 0 {
			if len(t.outputs) >= maxCompareOutputs {
				continue
			}
			t.outputs = append(t.outputs, outputTotals{name: d.Name})
			i = len(t.outputs) - 1
		}
		o := &t.outputs[i]
		o.compared++
		if d.Mismatch != "" {
			o.mismatches++
			o.lastMismatch = d.Mismatch
			continue
		}
		if d.Bytes {
			o.bytesRows += int64(d.Rows)
			o.equal += int64(d.Equal)
			continue
		}
		o.elements += int64(d.Elements)
		o.nonFinite += int64(d.NonFinite)
		o.sumAbsDiff += d.SumAbsDiff
		o.maxAbsDiff = max(o.maxAbsDiff, d.MaxAbsDiff)
		o.rows += int64(d.Rows)
		o.within += int64(d.Within)
		if d.Score {
			o.scoreRows += int64(d.Rows)
			o.agree += int64(d.Agree)
		}
	}
}

// merge adds u into t.
func (t *totals) merge(u *totals) {
	t.executions += u.executions
	t.errors += u.errors
	t.championFailed += u.championFailed
	t.latencies += u.latencies
	for i := range t.shadowLat {
		t.shadowLat[i] += u.shadowLat[i]
		t.championLat[i] += u.championLat[i]
	}
	for _, uo := range u.outputs {
		i := slices.IndexFunc(t.outputs, func(o outputTotals) bool { return o.name == uo.name })
		if i < 0 {
			if len(t.outputs) < maxCompareOutputs {
				t.outputs = append(t.outputs, uo)
			}
			continue
		}
		o := &t.outputs[i]
		o.compared += uo.compared
		o.mismatches += uo.mismatches
		o.elements += uo.elements
		o.nonFinite += uo.nonFinite
		o.sumAbsDiff += uo.sumAbsDiff
		o.maxAbsDiff = max(o.maxAbsDiff, uo.maxAbsDiff)
		o.rows += uo.rows
		o.within += uo.within
		o.scoreRows += uo.scoreRows
		o.agree += uo.agree
		o.bytesRows += uo.bytesRows
		o.equal += uo.equal
		if uo.lastMismatch != "" {
			o.lastMismatch = uo.lastMismatch
		}
	}
}

// latencyRatios are the shadow's p50 and p99 forward times over the
// champion's on the same requests; 0 when none was measured.
func (t *totals) latencyRatios() (p50, p99 float64) {
	if t.latencies == 0 {
		return 0, 0
	}
	widen := func(h *[latencyBuckets]uint32) *[latencyBuckets]uint64 {
		var w [latencyBuckets]uint64
		for i, v := range h {
			w[i] = uint64(v)
		}
		return &w
	}
	s := bucketQuantiles(widen(&t.shadowLat), t.latencies, 0.5, 0.99)
	c := bucketQuantiles(widen(&t.championLat), t.latencies, 0.5, 0.99)
	return float64(s[0]) / float64(c[0]), float64(s[1]) / float64(c[1])
}

// compareSlot is one 30-second step of the recent window.
type compareSlot struct {
	start time.Time
	totals
}

// compareWindows keep a shadow servable's compared executions. The
// goroutines finishing shadow copies write them; the stats and the
// metrics collector read them; mu guards them. The router reads only the
// routing policy's Comparison, published apart under gmu: the windows'
// readers hold mu while they scan the last-N ring (up to
// shadow_compare_window executions), which the router, on every user
// request's path, must never wait for.
type compareWindows struct {
	mu sync.Mutex
	// content is the id of the model content the figures are of; an
	// execution of another content (a new one was loaded) starts afresh.
	content int64
	since   time.Time
	total   totals
	// ring holds the last executions, at most limit; next is where the
	// next one goes once it is full.
	ring  []compared
	limit int
	next  int
	slots [compareSlots]compareSlot
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
	if n <= 0 {
		n = DefaultCompareWindow
	}
	return &compareWindows{limit: n}
}

// record adds e, an execution of content id loaded at loadedAt, at now.
// An execution of another content than the windows' starts them afresh
// if that content is still served (current), and is left out if not (a
// straggler of a content already replaced).
func (w *compareWindows) record(id int64, loadedAt time.Time, current bool, e compared, now time.Time) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if id != w.content {
		if !current {
			return
		}
		w.reset(id, loadedAt)
	}
	w.total.add(&e)
	if len(e.outputs) > maxCompareOutputs {
		// The windows keep at most that many outputs' figures; the ring
		// keeps no more of an execution (a copy: the log event has them all).
		kept := make([]OutputDiff, maxCompareOutputs)
		copy(kept, e.outputs)
		e.outputs = kept
	}
	if len(w.ring) < w.limit {
		w.ring = append(w.ring, e)
	} else {
		w.ring[w.next] = e
	}
	w.next = (w.next + 1) % w.limit
	start := now.Truncate(compareSlotSpan)
	s := &w.slots[int(start.Unix()/int64(compareSlotSpan/time.Second))%compareSlots]
	if !s.start.Equal(start) {
		*s = compareSlot{start: start}
	}
	s.add(&e)
	w.gmu.Lock()
	w.gate.Executions, w.gate.Errors, w.gate.MeanAbsDiff = w.total.executions, w.total.errors, gateDiff(&w.total)
	w.gmu.Unlock()
}

// reset forgets everything: the windows are of content id from now on.
func (w *compareWindows) reset(id int64, loadedAt time.Time) {
	clear(w.ring)
	w.content, w.since, w.total, w.ring, w.next = id, loadedAt, totals{}, w.ring[:0], 0
	w.slots = [compareSlots]compareSlot{}
	w.gmu.Lock()
	w.gate, w.gateContent, w.p99At = routing.Comparison{}, id, time.Time{}
	w.gmu.Unlock()
}

// windows returns the three windows' totals at now, all empty when they
// are not of content id (it has not been compared yet), and the size of
// the last-N window.
func (w *compareWindows) windows(id int64, now time.Time) (since, lastN, recent *totals, n int) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if id != w.content {
		return new(totals), new(totals), new(totals), w.limit
	}
	since, lastN = new(totals), new(totals)
	*since = w.total
	since.outputs = slices.Clone(w.total.outputs)
	for i := range w.ring {
		lastN.add(&w.ring[i])
	}
	return since, lastN, w.recent(now), w.limit
}

// recent adds up the slots of the last 5 minutes (to within a slot) at now.
func (w *compareWindows) recent(now time.Time) *totals {
	t := new(totals)
	from := now.Truncate(compareSlotSpan).Add(-compareRecent)
	for i := range w.slots {
		if s := &w.slots[i]; !s.start.IsZero() && !s.start.Before(from) && !s.start.After(now) {
			t.merge(&s.totals)
		}
	}
	return t
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
		if id == w.content {
			_, w.gate.P99Ratio = w.recent(now).latencyRatios()
			w.p99At = now
		}
		w.mu.Unlock()
	}
	return w.gate
}

// gateDiff is the largest mean absolute difference over t's outputs; a
// BYTES output, which has no absolute difference, counts each row that is
// not equal as a difference of 1 (its share of unequal rows), so that a
// challenger whose labels differ is not promoted on its numbers alone. An
// output that could not be compared (a mismatch, a value not finite on
// one side only) makes it the largest float64, which no bound admits.
func gateDiff(t *totals) float64 {
	worst := 0.0
	for i := range t.outputs {
		o := &t.outputs[i]
		if o.mismatches > 0 || o.nonFinite > 0 {
			return math.MaxFloat64
		}
		worst = max(worst, finite(meanOf(o.sumAbsDiff, o.elements-o.nonFinite)))
		if o.bytesRows > 0 {
			worst = max(worst, 1-shareOf(o.equal, o.bytesRows))
		}
	}
	return worst
}

// meanOf is sum/n, 0 when n is 0.
func meanOf(sum float64, n int64) float64 {
	if n <= 0 {
		return 0
	}
	return sum / float64(n)
}

// shareOf is k/n, 0 when n is 0.
func shareOf(k, n int64) float64 { return meanOf(float64(k), n) }

// finite is v, or the largest float64 of its sign when v is not finite
// (a sum that overflowed), so that JSON can carry it.
func finite(v float64) float64 {
	switch {
	case math.IsInf(v, 1), math.IsNaN(v):
		return math.MaxFloat64
	case math.IsInf(v, -1):
		return -math.MaxFloat64
	}
	return v
}
