package quality

import (
	"math"
	"slices"
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
	// slotSpan and slots make the recent window: the slots of the last 5
	// to 5.5 minutes, in 30-second steps.
	slotSpan = 30 * time.Second
	slots    = 11
	recent   = 5 * time.Minute
	// maxOutputs bounds the outputs a window keeps figures of; more are
	// left out (a model has a fixed set of outputs; this only bounds
	// memory against one that names them anew on every call).
	maxOutputs = 64
)

// Execution is one shadow execution compared with the answer the caller
// got for the same request.
type Execution struct {
	// ShadowFailed: the shadow execution failed; ChampionFailed: the
	// caller got no answer from the champion, so there was nothing to
	// compare (counted apart, not against the challenger).
	ShadowFailed, ChampionFailed bool
	// Shadow and Champion are their forward (compute) times, known when
	// both answered.
	Shadow, Champion time.Duration
	// Outputs compare the two answers' outputs (DiffOutputs), when both
	// answered.
	Outputs []OutputDiff
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
func (t *totals) add(e *Execution) {
	if e.ChampionFailed {
		t.championFailed++
		return
	}
	t.executions++
	if e.ShadowFailed {
		t.errors++
		return
	}
	t.shadowLat[LatencyBucket(e.Shadow)]++
	t.championLat[LatencyBucket(e.Champion)]++
	t.latencies++
	for _, d := range e.Outputs {
		i := slices.IndexFunc(t.outputs, func(o outputTotals) bool { return o.name == d.Name })
		if i < 0 {
			if len(t.outputs) >= maxOutputs {
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
			if len(t.outputs) < maxOutputs {
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
	widen := func(h *[latencyBuckets]uint32) *Histogram {
		var w Histogram
		for i, v := range h {
			w[i] = uint64(v)
		}
		return &w
	}
	s := widen(&t.shadowLat).Quantiles(t.latencies, 0.5, 0.99)
	c := widen(&t.championLat).Quantiles(t.latencies, 0.5, 0.99)
	return float64(s[0]) / float64(c[0]), float64(s[1]) / float64(c[1])
}

// slot is one 30-second step of the recent window.
type slot struct {
	start time.Time
	totals
}

// Windows keep a shadow servable's compared executions of one model
// content: since it was loaded, the last N of them, the last 5 minutes.
// Not safe for concurrent use.
type Windows struct {
	// content is the id of the model content the figures are of; an
	// execution of another content (a new one was loaded) starts afresh.
	content int64
	total   totals
	// ring holds the last executions, at most limit; next is where the
	// next one goes once it is full.
	ring  []Execution
	limit int
	next  int
	slots [slots]slot
}

// NewWindows keeps the last n executions in its last-N window
// (DefaultCompareWindow when n is not positive).
func NewWindows(n int) *Windows {
	if n <= 0 {
		n = DefaultCompareWindow
	}
	return &Windows{limit: n}
}

// Content is the id of the model content the windows are of (0: none
// yet).
func (w *Windows) Content() int64 { return w.content }

// Record adds e, an execution of content id, at now, and reports whether
// it did. An execution of another content than the windows' starts them
// afresh if that content is still served (current), and is left out if
// not (a straggler of a content already replaced).
func (w *Windows) Record(id int64, current bool, e Execution, now time.Time) bool {
	if id != w.content {
		if !current {
			return false
		}
		w.reset(id)
	}
	w.total.add(&e)
	if len(e.Outputs) > maxOutputs {
		// The windows keep at most that many outputs' figures; the ring
		// keeps no more of an execution (a copy: the log event has them all).
		kept := make([]OutputDiff, maxOutputs)
		copy(kept, e.Outputs)
		e.Outputs = kept
	}
	if len(w.ring) < w.limit {
		w.ring = append(w.ring, e)
	} else {
		w.ring[w.next] = e
	}
	w.next = (w.next + 1) % w.limit
	start := now.Truncate(slotSpan)
	s := &w.slots[int(start.Unix()/int64(slotSpan/time.Second))%slots]
	if !s.start.Equal(start) {
		*s = slot{start: start}
	}
	s.add(&e)
	return true
}

// reset forgets everything: the windows are of content id from now on.
func (w *Windows) reset(id int64) {
	clear(w.ring)
	w.content, w.total, w.ring, w.next = id, totals{}, w.ring[:0], 0
	w.slots = [slots]slot{}
}

// Gate is what the routing policy's promote_when rule reads of the
// executions since the content was loaded: their count, errors and mean
// absolute difference (gateDiff). The p99 ratio, the costly part, is
// left at 0: RecentP99Ratio works it out.
func (w *Windows) Gate() routing.Comparison {
	return routing.Comparison{Executions: w.total.executions, Errors: w.total.errors, MeanAbsDiff: gateDiff(&w.total)}
}

// RecentP99Ratio is the shadow's p99 forward time over the champion's on
// the same requests over the last 5 minutes (to within a slot) at now; 0
// when none was measured.
func (w *Windows) RecentP99Ratio(now time.Time) float64 {
	_, p99 := w.recent(now).latencyRatios()
	return p99
}

// Snapshot is the three windows' totals at one time, for Stats.
type Snapshot struct {
	since, lastN, recent *totals
	n                    int
}

// Snapshot returns the three windows' totals at now, all empty when they
// are not of content id (it has not been compared yet), and the size of
// the last-N window. The last-N totals are a scan of up to N executions;
// the snapshot shares no memory with the windows.
func (w *Windows) Snapshot(id int64, now time.Time) *Snapshot {
	if id != w.content {
		return &Snapshot{since: new(totals), lastN: new(totals), recent: new(totals), n: w.limit}
	}
	since, lastN := new(totals), new(totals)
	*since = w.total
	since.outputs = slices.Clone(w.total.outputs)
	for i := range w.ring {
		lastN.add(&w.ring[i])
	}
	return &Snapshot{since: since, lastN: lastN, recent: w.recent(now), n: w.limit}
}

// recent adds up the slots of the last 5 minutes (to within a slot) at now.
func (w *Windows) recent(now time.Time) *totals {
	t := new(totals)
	from := now.Truncate(slotSpan).Add(-recent)
	for i := range w.slots {
		if s := &w.slots[i]; !s.start.IsZero() && !s.start.Before(from) && !s.start.After(now) {
			t.merge(&s.totals)
		}
	}
	return t
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
