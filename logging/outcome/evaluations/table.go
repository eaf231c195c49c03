package evaluations

import (
	"bytes"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/groveml/grove/grovepb"
	"github.com/groveml/grove/logging/outcome/join"
	"github.com/groveml/grove/routing"
	"github.com/groveml/grove/routing/quality"
)

// HistorySpan and HistoryStep shape a series' history: one sample of its
// since_valid figures per minute of the evaluator's clock (the records'
// evaluated_at), over the last hour.
const (
	HistorySpan = time.Hour
	HistoryStep = time.Minute
)

// ErrBadRecord is wrapped by every error of Apply: a record of the
// evaluations topic that Grove cannot read (a key of no known form, a
// value that is not an Evaluation, or whose fields disagree with its key
// or hold a corrupt state).
var ErrBadRecord = errors.New("evaluations: unreadable record")

// Windows are a series' accumulators by kind.
type (
	binaryWindows  = quality.OutcomeWindows[quality.Binary, *quality.Binary]
	numericWindows = quality.OutcomeWindows[quality.Numeric, *quality.Numeric]
	pairedWindows  = quality.OutcomeWindows[quality.Paired, *quality.Paired]
)

// Totals are the counters of every partition's join added up (the
// "partition" records), and the largest lag among them.
type Totals struct {
	// Partitions counts the partitions with a counters record.
	Partitions int
	// Counters are their counters added up.
	Counters join.Counters
	// Lag is the largest of their lags: how far a watermark was behind the
	// evaluator's clock when its record was written.
	Lag time.Duration
}

// SeriesFigures are one series' since_valid figures, for the metrics.
type SeriesFigures struct {
	Key        join.SeriesKey
	SinceValid quality.OutcomeFigures
}

// Table keeps the newest record of each key of the evaluations topic and
// merges each series' partitions into its figures: the contract stats'
// outcomes object (quality.OutcomeStats) and the outcome rules' input
// (routing.OutcomeStats).
//
// One goroutine writes it (the follower: Apply each record it reads, then
// Publish); any number read it. Apply only keeps a record; Publish merges
// the series whose records changed and publishes the figures, which the
// readers (Outcomes, Series, Totals, Collect) load with one atomic read:
// they never wait for the writer, nor merge anything. Apply and Publish
// also hold a lock, so that a second writer is safe, only slower.
type Table struct {
	// rejected counts the records Apply refused.
	rejected atomic.Uint64
	view     atomic.Pointer[view]

	mu         sync.Mutex
	series     map[join.SeriesKey]map[int32]*seriesRecord
	partitions map[int32]*partitionRecord
	// merged are the series' windows merged at the last Publish; dirty
	// the series whose records changed since.
	merged map[join.SeriesKey]*mergedSeries
	dirty  map[join.SeriesKey]bool
	// totalsDirty is set when a partition record changed.
	totalsDirty bool
	history     map[join.SeriesKey][]quality.OutcomeSample
}

// seriesRecord is one partition's record of a series, decoded.
type seriesRecord struct {
	binary                *binaryWindows
	numeric               *numericWindows
	paired                *pairedWindows
	maxEvent, evaluatedAt time.Time
}

// partitionRecord is one partition's counters record, decoded.
type partitionRecord struct {
	counters join.Counters
	lag      time.Duration
	maxEvent time.Time
}

// mergedSeries are a series' windows, its partitions merged.
type mergedSeries struct {
	binary  *binaryWindows
	numeric *numericWindows
	paired  *pairedWindows
	// maxEvent is the newest max_event_time of its records, evaluatedAt
	// the newest evaluated_at.
	maxEvent, evaluatedAt time.Time
}

// view is what the readers see: each series' figures, the totals.
type view struct {
	series map[join.SeriesKey]*seriesView
	totals Totals
	keys   []join.SeriesKey // sorted
}

// seriesView are one series' figures as published.
type seriesView struct {
	stats *quality.OutcomeStats
	rule  *routing.OutcomeStats
	// welch compares a served series of a binary rule with each other
	// served series of its contract, by the other's release.
	welch map[string]*quality.VsChampion
}

// NewTable returns an empty Table.
func NewTable() *Table {
	t := &Table{series: map[join.SeriesKey]map[int32]*seriesRecord{}, partitions: map[int32]*partitionRecord{},
		merged: map[join.SeriesKey]*mergedSeries{}, dirty: map[join.SeriesKey]bool{},
		history: map[join.SeriesKey][]quality.OutcomeSample{}}
	t.view.Store(&view{series: map[join.SeriesKey]*seriesView{}})
	return t
}

// recordKey is a parsed record key: a series' (series true) or a
// partition's counters.
type recordKey struct {
	series    bool
	key       join.SeriesKey
	partition int32
}

// String is the key as SeriesKey or PartitionKey writes it, printable.
func (k recordKey) String() string {
	if k.series {
		return strconv.Quote(string(SeriesKey(k.key, k.partition)))
	}
	return strconv.Quote(string(PartitionKey(k.partition)))
}

// parseKey reads a record key, which must be exactly what SeriesKey or
// PartitionKey writes (a partition number in its one decimal form), so
// that one series' partition has one key.
func parseKey(b []byte) (recordKey, error) {
	parts := bytes.Split(b, []byte{0})
	var k recordKey
	var num []byte
	switch {
	case len(parts) == 5 && string(parts[0]) == "series":
		side := string(parts[3])
		if side != "served" && side != "shadow" {
			return k, fmt.Errorf("%w: key %q: side %q is neither served nor shadow", ErrBadRecord, b, side)
		}
		if len(parts[2]) == 0 {
			return k, fmt.Errorf("%w: key %q: no release", ErrBadRecord, b)
		}
		k.series, k.key = true, join.SeriesKey{Contract: string(parts[1]), Release: string(parts[2]), Shadow: side == "shadow"}
		num = parts[4]
	case len(parts) == 2 && string(parts[0]) == "partition":
		num = parts[1]
	default:
		return k, fmt.Errorf("%w: key %q is neither a series' nor a partition's", ErrBadRecord, b)
	}
	p, err := strconv.ParseInt(string(num), 10, 32)
	if err != nil || p < 0 || strconv.FormatInt(p, 10) != string(num) {
		return k, fmt.Errorf("%w: key %q: partition %q is not a number from 0 to 2^31-1", ErrBadRecord, b, num)
	}
	k.partition = int32(p)
	return k, nil
}

// timeOf reads an optional timestamp: zero when absent.
func timeOf(ts *timestamppb.Timestamp, what string) (time.Time, error) {
	if ts == nil {
		return time.Time{}, nil
	}
	if err := ts.CheckValid(); err != nil {
		return time.Time{}, fmt.Errorf("%s: %w", what, err)
	}
	return ts.AsTime(), nil
}

// Apply takes the record key, value read from the evaluations topic: a
// value replaces the key's last one, a nil value (a tombstone) deletes
// it. A record Grove cannot read is an error wrapping ErrBadRecord that
// names its key, and is left out: the key keeps its last value. The
// figures readers see change at the next Publish.
func (t *Table) Apply(key, value []byte) error {
	err := t.apply(key, value)
	if err != nil {
		t.rejected.Add(1)
	}
	return err
}

// apply is Apply but for the count.
func (t *Table) apply(key, value []byte) error {
	k, err := parseKey(key)
	if err != nil {
		return err
	}
	if value == nil {
		t.mu.Lock()
		defer t.mu.Unlock()
		if k.series {
			if parts := t.series[k.key]; parts != nil && parts[k.partition] != nil {
				delete(parts, k.partition)
				if len(parts) == 0 {
					delete(t.series, k.key)
				}
				t.dirty[k.key] = true
			}
		} else if t.partitions[k.partition] != nil {
			delete(t.partitions, k.partition)
			t.totalsDirty = true
		}
		return nil
	}
	var ev grovepb.Evaluation
	if err := proto.Unmarshal(value, &ev); err != nil {
		return fmt.Errorf("%w: key %v: not a grove.v1.Evaluation: %w", ErrBadRecord, k, err)
	}
	if ev.GetPartition() != k.partition {
		return fmt.Errorf("%w: key %v: the value is of partition %d", ErrBadRecord, k, ev.GetPartition())
	}
	maxEvent, err := timeOf(ev.GetMaxEventTime(), "max_event_time")
	if err == nil {
		_, err = timeOf(ev.GetWatermark(), "watermark")
	}
	var evaluatedAt time.Time
	if err == nil {
		evaluatedAt, err = timeOf(ev.GetEvaluatedAt(), "evaluated_at")
	}
	if err != nil {
		return fmt.Errorf("%w: key %v: %w", ErrBadRecord, k, err)
	}
	if !k.series {
		c := ev.GetCounters()
		switch {
		case c == nil:
			return fmt.Errorf("%w: key %v: a partition's record without counters", ErrBadRecord, k)
		case ev.GetContract() != "" || ev.GetRelease() != "" || ev.GetShadow() || len(ev.GetBinary())+len(ev.GetNumeric())+len(ev.GetPaired()) > 0:
			return fmt.Errorf("%w: key %v: a partition's record with a series' fields", ErrBadRecord, k)
		case c.GetLagNanos() < 0:
			return fmt.Errorf("%w: key %v: negative lag %d", ErrBadRecord, k, c.GetLagNanos())
		}
		r := &partitionRecord{maxEvent: maxEvent, lag: time.Duration(c.GetLagNanos()), counters: join.Counters{
			Predictions: c.GetPredictions(), Scored: c.GetScored(), Joined: c.GetJoined(), Dropped: c.GetDropped(),
			Outcomes: c.GetOutcomes(), Late: c.GetLate(), Unmatched: c.GetUnmatched(), DuplicateOutcomes: c.GetDuplicateOutcomes(),
			DuplicatePredictions: c.GetDuplicatePredictions(), LatePredictions: c.GetLatePredictions(),
			Unconfigured: c.GetUnconfigured(), Invalid: c.GetInvalid()}}
		t.mu.Lock()
		defer t.mu.Unlock()
		t.partitions[k.partition] = r
		t.totalsDirty = true
		return nil
	}
	r, err := decodeSeries(&ev, k)
	if err != nil {
		return err
	}
	r.maxEvent, r.evaluatedAt = maxEvent, evaluatedAt
	t.mu.Lock()
	defer t.mu.Unlock()
	parts := t.series[k.key]
	if parts == nil {
		parts = map[int32]*seriesRecord{}
		t.series[k.key] = parts
	}
	parts[k.partition] = r
	t.dirty[k.key] = true
	return nil
}

// decodeSeries reads the windows of a series' record keyed k.
func decodeSeries(ev *grovepb.Evaluation, k recordKey) (*seriesRecord, error) {
	if ev.GetContract() != k.key.Contract || ev.GetRelease() != k.key.Release || ev.GetShadow() != k.key.Shadow {
		return nil, fmt.Errorf("%w: key %v: the value is of series %q %q shadow %v", ErrBadRecord, k, ev.GetContract(), ev.GetRelease(), ev.GetShadow())
	}
	if ev.GetCounters() != nil {
		return nil, fmt.Errorf("%w: key %v: a series' record with counters", ErrBadRecord, k)
	}
	r := &seriesRecord{}
	var err error
	switch b, n := ev.GetBinary(), ev.GetNumeric(); {
	case len(b) > 0 && len(n) == 0:
		r.binary = &binaryWindows{}
		err = r.binary.UnmarshalBinary(b)
	case len(n) > 0 && len(b) == 0:
		if len(ev.GetPaired()) > 0 {
			return nil, fmt.Errorf("%w: key %v: paired windows of a numeric series", ErrBadRecord, k)
		}
		r.numeric = &numericWindows{}
		err = r.numeric.UnmarshalBinary(n)
	default:
		return nil, fmt.Errorf("%w: key %v: %d bytes of binary and %d of numeric windows, want exactly one of them", ErrBadRecord, k, len(b), len(n))
	}
	if err == nil && len(ev.GetPaired()) > 0 {
		r.paired = &pairedWindows{}
		err = r.paired.UnmarshalBinary(ev.GetPaired())
	}
	if err != nil {
		return nil, fmt.Errorf("%w: key %v: %w", ErrBadRecord, k, err)
	}
	return r, nil
}

// reset forgets every record, as a tombstone of each key would: the next
// Publish shows none of them.
func (t *Table) reset() {
	t.mu.Lock()
	defer t.mu.Unlock()
	for k := range t.series {
		t.dirty[k] = true
	}
	clear(t.series)
	if len(t.partitions) > 0 {
		clear(t.partitions)
		t.totalsDirty = true
	}
}

// Rejected counts the records Apply refused.
func (t *Table) Rejected() uint64 { return t.rejected.Load() }

// Publish merges the partitions of each series whose records changed
// since the last Publish, samples their history, and publishes the
// figures to the readers. The history holds what was published: records
// applied between two Publishes give one sample (a reader catching up on
// the topic at once starts with one).
func (t *Table) Publish() {
	t.mu.Lock()
	defer t.mu.Unlock()
	old := t.view.Load()
	if len(t.dirty) == 0 && !t.totalsDirty {
		return
	}
	v := &view{series: make(map[join.SeriesKey]*seriesView, len(t.series)), totals: old.totals}
	if t.totalsDirty {
		v.totals = t.totals()
		t.totalsDirty = false
	}
	// A changed served series of a binary rule changes the comparisons of
	// every served series of its contract.
	contracts := map[string]bool{}
	for k := range t.dirty {
		if parts := t.series[k]; parts == nil {
			delete(t.merged, k)
			delete(t.history, k)
		} else {
			t.merged[k] = merge(parts)
		}
		if !k.Shadow {
			contracts[k.Contract] = true
		}
	}
	for k, m := range t.merged {
		if sv := old.series[k]; sv != nil && !t.dirty[k] {
			v.series[k] = sv
			continue
		}
		sv := &seriesView{}
		sv.stats, sv.rule = t.figures(k, m)
		v.series[k] = sv
	}
	for c := range contracts {
		t.compare(c, v)
	}
	clear(t.dirty)
	v.keys = slices.SortedFunc(func(yield func(join.SeriesKey) bool) {
		for k := range v.series {
			if !yield(k) {
				return
			}
		}
	}, join.CompareSeriesKeys)
	t.view.Store(v)
}

// totals adds up the partitions' counters.
func (t *Table) totals() Totals {
	var s Totals
	for _, p := range t.partitions {
		s.Partitions++
		c, o := &s.Counters, &p.counters
		c.Predictions += o.Predictions
		c.Scored += o.Scored
		c.Joined += o.Joined
		c.Dropped += o.Dropped
		c.Outcomes += o.Outcomes
		c.Late += o.Late
		c.Unmatched += o.Unmatched
		c.DuplicateOutcomes += o.DuplicateOutcomes
		c.DuplicatePredictions += o.DuplicatePredictions
		c.LatePredictions += o.LatePredictions
		c.Unconfigured += o.Unconfigured
		c.Invalid += o.Invalid
		s.Lag = max(s.Lag, p.lag)
	}
	return s
}

// merge merges the partitions' windows of one series, in partition order
// (so that the sums are the same whatever order the records came in). Its
// kind is that of its newest record (by evaluated_at): partitions of the
// other kind, written before its rule changed kind, are left out.
//
// Only windows that start at the same time add up: when a release's
// valid_since moves (a new release of its contract), each partition
// starts the series over at the new one only when it next scores a
// prediction of the release, and until then its windows still count
// predictions from before it. So the merge takes the newest since among
// the partitions of its kind and leaves out those still on an older one,
// until they start over. A partition's since only moves forward: a
// release no longer valid keeps counting from its last valid_since
// (join.Joiner), so the newest since is the current one.
func merge(parts map[int32]*seriesRecord) *mergedSeries {
	ps := slices.Sorted(func(yield func(int32) bool) {
		for p := range parts {
			if !yield(p) {
				return
			}
		}
	})
	var newest *seriesRecord
	m := &mergedSeries{}
	for _, p := range ps {
		r := parts[p]
		if newest == nil || r.evaluatedAt.After(newest.evaluatedAt) {
			newest = r
		}
		if r.maxEvent.After(m.maxEvent) {
			m.maxEvent = r.maxEvent
		}
	}
	m.evaluatedAt = newest.evaluatedAt
	numeric := newest.numeric != nil
	var since time.Time
	for _, p := range ps {
		if s, ok := parts[p].since(numeric); ok && s.After(since) {
			since = s
		}
	}
	for _, p := range ps {
		r := parts[p]
		if s, ok := r.since(numeric); !ok || !s.Equal(since) {
			continue
		}
		switch {
		case numeric && r.numeric != nil:
			if m.numeric == nil {
				m.numeric = quality.NewOutcomeWindows[quality.Numeric](r.numeric.Since())
			}
			m.numeric.Merge(r.numeric)
		case !numeric && r.binary != nil:
			if m.binary == nil {
				m.binary = quality.NewOutcomeWindows[quality.Binary](r.binary.Since())
			}
			m.binary.Merge(r.binary)
			if r.paired != nil {
				if m.paired == nil {
					m.paired = quality.NewOutcomeWindows[quality.Paired](r.paired.Since())
				}
				m.paired.Merge(r.paired)
			}
		}
	}
	return m
}

// since is when r's since_valid window starts, for the windows of the
// kind numeric says; false when r has none of that kind.
func (r *seriesRecord) since(numeric bool) (time.Time, bool) {
	switch {
	case numeric && r.numeric != nil:
		return r.numeric.Since(), true
	case !numeric && r.binary != nil:
		return r.binary.Since(), true
	}
	return time.Time{}, false
}

// figures describes merged series k: its stats (last_1h up to its newest
// max_event_time, vs_champion from its pairs for a shadow), with a sample
// added to its history, and the rules' input (binary rules only).
func (t *Table) figures(k join.SeriesKey, m *mergedSeries) (*quality.OutcomeStats, *routing.OutcomeStats) {
	var st *quality.OutcomeStats
	var rule *routing.OutcomeStats
	if m.numeric != nil {
		st = m.numeric.OutcomeStats(m.maxEvent)
	} else {
		st = m.binary.OutcomeStats(m.maxEvent)
		b := m.binary.SinceValid()
		rule = &routing.OutcomeStats{Scored: int64(b.Count()), AUC: b.AUC(), LogLoss: b.LogLoss(), Brier: b.Brier(),
			ECE: b.ECE(), Calibration: b.Calibration()}
		if m.paired != nil {
			d := m.paired.SinceValid().Delta(quality.DefaultConfidence)
			st.VsChampion = d.VsChampion()
			rule.VsChampion = routing.Paired{N: int64(d.N), LogLossDelta: d.LogLoss, LogLossDeltaSE: d.StdErr, AUCDelta: d.AUC}
		}
	}
	if !m.evaluatedAt.IsZero() {
		st.History = t.sample(k, st.SinceValid.Sample(m.evaluatedAt))
	} else {
		st.History = slices.Clone(t.history[k])
	}
	return st, rule
}

// sample adds s to k's history, in place of a sample of the same minute,
// drops the samples more than HistorySpan older, and returns a copy for
// publishing. A sample older than the newest kept (a record of a
// partition lagging behind) only replaces one of its minute.
func (t *Table) sample(k join.SeriesKey, s quality.OutcomeSample) []quality.OutcomeSample {
	h := t.history[k]
	step := s.T.Truncate(HistoryStep)
	switch i, found := slices.BinarySearchFunc(h, step, func(e quality.OutcomeSample, at time.Time) int {
		return e.T.Truncate(HistoryStep).Compare(at)
	}); {
	case found:
		h[i] = s
	case i == len(h):
		h = append(h, s)
	}
	newest := h[len(h)-1].T
	cut := 0
	for cut < len(h) && !h[cut].T.After(newest.Add(-HistorySpan)) {
		cut++
	}
	h = slices.Delete(h, 0, cut)
	t.history[k] = h
	return slices.Clone(h)
}

// compare sets, in v, the Welch comparisons of every pair of served
// series of a binary rule of contract c.
func (t *Table) compare(c string, v *view) {
	var served []join.SeriesKey
	for k, m := range t.merged {
		if k.Contract == c && !k.Shadow && m.binary != nil {
			served = append(served, k)
		}
	}
	slices.SortFunc(served, join.CompareSeriesKeys)
	for _, k := range served {
		old := v.series[k]
		sv := &seriesView{stats: old.stats, rule: old.rule, welch: map[string]*quality.VsChampion{}}
		for _, champ := range served {
			if champ != k {
				sv.welch[champ.Release] = quality.Welch(t.merged[champ].binary.SinceValid(), t.merged[k].binary.SinceValid(),
					quality.DefaultConfidence).VsChampion()
			}
		}
		v.series[k] = sv
	}
}

// Outcomes returns the figures of the series of contract's release
// (served, or shadow): the rules' input (nil for a numeric rule) and the
// stats' outcomes object, both nil when the table has no record of it.
// For a served series, champion names the contract's champion release:
// vs_champion is then the Welch comparison with its served series (none
// when champion is release itself, empty, or has no figures); a shadow
// series is compared with the champion on the same requests, whatever
// champion says. Both are shared with other readers: do not modify them.
func (t *Table) Outcomes(contract, release string, shadow bool, champion string) (*routing.OutcomeStats, *quality.OutcomeStats) {
	sv := t.view.Load().series[join.SeriesKey{Contract: contract, Release: release, Shadow: shadow}]
	if sv == nil {
		return nil, nil
	}
	st := sv.stats
	if vs := sv.welch[champion]; !shadow && vs != nil && champion != release {
		c := *st
		c.VsChampion = vs
		st = &c
	}
	return sv.rule, st
}

// Series lists every series' since_valid figures, by contract, release,
// served before shadow.
func (t *Table) Series() []SeriesFigures {
	v := t.view.Load()
	out := make([]SeriesFigures, 0, len(v.keys))
	for _, k := range v.keys {
		out = append(out, SeriesFigures{Key: k, SinceValid: v.series[k].stats.SinceValid})
	}
	return out
}

// Totals returns the partitions' counters added up, as published.
func (t *Table) Totals() Totals { return t.view.Load().totals }
