package join

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"slices"
	"time"

	"github.com/groveml/grove/conf/modelconfig"
	"github.com/groveml/grove/grovepb"
	"github.com/groveml/grove/routing/quality"
)

// Rule is what one contract, or one model entry's direct calls, learns
// from outcomes: the contract's (or the model entry's) outcomes object.
type Rule struct {
	// Contract is the contract, "org/project/n"; empty for a model entry.
	Contract string
	// ModelPath is the model entry's path ("pctr_v1/"), for its direct
	// calls; empty for a contract.
	ModelPath string
	Outcomes  modelconfig.Outcomes
}

// Options configure a Joiner.
type Options struct {
	// Rules are the outcomes objects of the config: one per contract and
	// per model entry that has one. Predictions of others are counted
	// (Counters.Unconfigured) and left out.
	Rules []Rule
	// Store keeps the pending predictions and outcomes (NewMemStore,
	// OpenPebble); the Joiner owns its contents.
	Store Store
	// ValidSince returns when a contract's release became valid, the start
	// of its since_valid window; nil, or ok false: the window counts every
	// prediction scored (its Since is the zero time), but for a release
	// that was valid, whose window keeps its last start.
	ValidSince func(contract, release string) (since time.Time, ok bool)
}

// Prediction is one event of the prediction log, as its consumer reads
// it.
type Prediction struct {
	// Event is the decoded event.
	Event *grovepb.PredictionEvent
	// Key is the event's record key (nil when it has none): what an
	// outcome's key names.
	Key []byte
}

// SeriesKey names one series of scored predictions: a contract's release,
// served or in shadow, or a model's direct calls.
type SeriesKey struct {
	// Contract is "org/project/n"; empty for a model's direct calls.
	Contract string
	// Release is the release version; for direct calls the model path.
	Release string
	// Shadow is true for shadow executions, false for served ones.
	Shadow bool
}

// Counters count what the Joiner took and what became of it.
type Counters struct {
	// Predictions are the predictions (rows of events) taken and kept for
	// their window; Scored those scored at its close, Joined those of them
	// that had an outcome in their window, Dropped those without one and
	// missing: ignore, not scored.
	Predictions, Scored, Joined, Dropped uint64
	// Outcomes are the outcomes taken (duplicates and late ones aside).
	Outcomes uint64
	// Late are outcomes that came after the window they fell in had
	// closed, or after the window of the predictions they matched; not
	// used.
	Late uint64
	// Unmatched are outcomes that no prediction used by the time the
	// watermark passed their own time by the longest window.
	Unmatched uint64
	// DuplicateOutcomes and DuplicatePredictions are copies (same
	// outcome_id, same event_id) taken once only. A copy of an event whose
	// rows came too late (LatePredictions) is counted late again.
	DuplicateOutcomes, DuplicatePredictions uint64
	// LatePredictions are predictions whose window had closed already when
	// they came; not scored.
	LatePredictions uint64
	// Unconfigured are events of a contract or model with no outcomes
	// object; Invalid events or rows with no value to score (an error, no
	// such output, a row of more than two values, a type not numeric).
	Unconfigured, Invalid uint64
}

// series are the accumulators of one SeriesKey: Binary or Numeric as its
// rule says, and for a shadow release of a binary rule its pairs with the
// champion's predictions of the same rows.
type series struct {
	binary  *quality.OutcomeWindows[quality.Binary, *quality.Binary]
	numeric *quality.OutcomeWindows[quality.Numeric, *quality.Numeric]
	paired  *quality.OutcomeWindows[quality.Paired, *quality.Paired]
}

// Joiner joins the predictions and outcomes of one partition (package doc).
// Not safe for concurrent use.
type Joiner struct {
	store Store
	// viewer is store when it can lend its values without a copy.
	viewer     viewer
	validSince func(contract, release string) (time.Time, bool)
	byContract map[string]*modelconfig.Outcomes
	byModel    map[string]*modelconfig.Outcomes
	// maxWindow and lateness are the longest window and lateness of the
	// rules: how long outcomes and tombstones are kept, and the
	// partition's lateness.
	maxWindow, lateness int64
	// labelWindow is the longest window of the rules of each label.
	labelWindow map[string]int64

	// seen is false until the first event; maxEvent is the largest event
	// time seen, lastArrival the clock time of the last event, watermark
	// the watermark (never decreasing), all Unix nanoseconds.
	seen                             bool
	maxEvent, lastArrival, watermark int64
	now                              int64
	// bounded: the owner bounds the watermark by frontier (Bound), the
	// time up to which every outcome has reached the Joiner
	// (math.MinInt64: none known yet).
	bounded  bool
	frontier int64

	counters Counters
	series   map[SeriesKey]*series

	// names keeps the names of the values read once; buf is the binary
	// form of the value being written, gk, xk and dk the key of a group,
	// of a record key's index entry and of an outcome_id being read or
	// written, sk that of the entry sweep handles (the store copies what
	// it keeps).
	names          names
	buf            []byte
	gk, xk, dk, sk []byte
	// group and index are the values getGroup and getKeyIndex read, from
	// their copies gval and xval; due the keys sweep handles.
	group      group
	index      keyIndex
	gval, xval []byte
	due        []dueRef
	// other is a second group, read from its copy oval while group is in
	// use; ok and mk are a record key's own join key and index key, own an
	// index entry that ok stands for (indexKey).
	other  group
	oval   []byte
	ok, mk []byte
	own    [1]keyRef
	// eventID and values are the event_id and values of the prediction
	// being taken, labelNames the names of the outcome's labels.
	eventID    []byte
	values     []float64
	labelNames []string
	// indexAll: no own key stands for its index entry, every join key is
	// in its record key's index (tests: the index as it was).
	indexAll bool
}

// New returns a Joiner over opts.Store, empty but for what the store
// holds (Restore sets the rest).
func New(opts Options) (*Joiner, error) {
	if opts.Store == nil {
		return nil, errors.New("join: no store")
	}
	if len(opts.Rules) == 0 {
		return nil, errors.New("join: no rules: nothing learns from outcomes")
	}
	j := &Joiner{store: opts.Store, validSince: opts.ValidSince, byContract: map[string]*modelconfig.Outcomes{}, labelWindow: map[string]int64{},
		byModel: map[string]*modelconfig.Outcomes{}, series: map[SeriesKey]*series{}, watermark: math.MinInt64}
	j.viewer, _ = opts.Store.(viewer)
	for i := range opts.Rules {
		r := &opts.Rules[i]
		o := r.Outcomes
		switch {
		case (r.Contract == "") == (r.ModelPath == ""):
			return nil, fmt.Errorf("join: rule %d: give one of contract and model_path", i)
		case o.Label == "":
			return nil, fmt.Errorf("join: rule %d: no label", i)
		case o.Window <= 0:
			return nil, fmt.Errorf("join: rule %d: window %v is not positive", i, o.Window)
		case o.Lateness < 0:
			return nil, fmt.Errorf("join: rule %d: lateness %v is negative", i, o.Lateness)
		}
		if r.Contract != "" {
			j.byContract[r.Contract] = &o
		} else {
			j.byModel[r.ModelPath] = &o
		}
		j.maxWindow = max(j.maxWindow, int64(o.Window))
		j.labelWindow[o.Label] = max(j.labelWindow[o.Label], int64(o.Window))
		j.lateness = max(j.lateness, int64(o.Lateness))
	}
	return j, nil
}

// rule is the outcomes object of a prediction of contract (or, for a
// direct call, of model path).
func (j *Joiner) rule(contract, modelPath string) *modelconfig.Outcomes {
	if contract != "" {
		return j.byContract[contract]
	}
	return j.byModel[modelPath]
}

// Watermark is the partition's watermark (the zero time before any
// event).
func (j *Joiner) Watermark() time.Time {
	if !j.seen {
		return time.Time{}
	}
	return time.Unix(0, j.watermark).UTC()
}

// advance moves the watermark for an event at eventTime (0 and event
// false: none) taken at clock time now (an event time ahead of now
// counts as now), and scores the windows it closes.
func (j *Joiner) advance(now time.Time, eventTime int64, event bool) error {
	n := now.UnixNano()
	j.now = n
	if !j.seen && !event {
		return nil
	}
	if j.seen {
		j.watermark = max(j.watermark, j.bound(j.idleWatermark(n)))
	}
	if event {
		// An event time ahead of the clock counts as the clock's: a
		// caller's clock running ahead cannot close windows early.
		eventTime = min(eventTime, n)
		if !j.seen || eventTime > j.maxEvent {
			j.maxEvent = eventTime
		}
		j.seen = true
		j.lastArrival = n
		j.watermark = max(j.watermark, j.bound(j.maxEvent-j.lateness))
	}
	return j.sweep()
}

// bound is watermark w held back by the frontier, if the owner gave one.
func (j *Joiner) bound(w int64) int64 {
	switch {
	case !j.bounded:
		return w
	case j.frontier == math.MinInt64:
		return math.MinInt64
	}
	return min(w, j.frontier-j.lateness)
}

// Bound tells the Joiner that every outcome whose time (as its producer
// stamped it) is at most frontier has been given to it (the zero time:
// none known yet), so that the watermark stays at most frontier less the
// lateness: an owner that reads outcomes later than predictions (through
// a repartition topic, or catching up on a backlog) counts no outcome late
// for being read later. A Joiner never bound has no such limit (one
// stream taken in time order needs none). It scores the windows that a
// later frontier lets close; the frontier never moves back.
func (j *Joiner) Bound(frontier time.Time) error {
	f := int64(math.MinInt64)
	if !frontier.IsZero() {
		f = frontier.UnixNano()
	}
	if j.bounded && f <= j.frontier {
		return nil
	}
	j.bounded, j.frontier = true, f
	if !j.seen {
		return nil
	}
	j.watermark = max(j.watermark, j.bound(j.maxEvent-j.lateness))
	return j.sweep()
}

// idleWatermark is the watermark at clock time now: the largest event
// time less the lateness, plus the time the partition has been idle
// beyond the lateness.
func (j *Joiner) idleWatermark(now int64) int64 {
	w := j.maxEvent - j.lateness
	if idle := now - j.lastArrival; idle > j.lateness {
		w += idle - j.lateness
	}
	return w
}

// Advance moves the watermark with the clock (a partition idle for the
// lateness advances as time passes) and scores the windows it closes.
func (j *Joiner) Advance(now time.Time) error { return j.advance(now, 0, false) }

// sweepBatch is how many due keys one pass of sweep takes.
const sweepBatch = 256

// sweep handles every entry due at the watermark.
func (j *Joiner) sweep() error {
	for {
		var n int
		if j.viewer != nil {
			keys, err := j.viewer.dueKeys(j.watermark, sweepBatch, j.due[:0])
			if err != nil {
				return err
			}
			j.due = keys
			for _, k := range keys {
				// Its entry is found without the store's map.
				j.viewer.focus(k.e)
				j.sk = append(j.sk[:0], k.key...)
				if err := j.handleDue(j.sk); err != nil {
					return err
				}
			}
			clear(keys)
			n = len(keys)
		} else {
			keys, err := j.store.Due(j.watermark, sweepBatch)
			if err != nil {
				return err
			}
			for _, k := range keys {
				if err := j.handleDue(k); err != nil {
					return err
				}
			}
			n = len(keys)
		}
		if n < sweepBatch {
			return nil
		}
	}
}

// Key prefixes of the store's entries.
const (
	prefixGroup   = 'g' // join key → group
	prefixKey     = 'k' // record key → keyIndex
	prefixOutcome = 'd' // outcome_id seen
)

// handleDue handles entry k, due at the watermark.
func (j *Joiner) handleDue(k []byte) error {
	if len(k) == 0 {
		return corrupt("an empty key is due")
	}
	switch k[0] {
	case prefixGroup:
		g, ok, err := j.getGroup(k)
		if err != nil || !ok {
			return err
		}
		return j.putGroup(k, j.closeGroup(g))
	case prefixKey:
		x, ok, err := j.getKeyIndex(k)
		if err != nil || !ok {
			return err
		}
		x.refs = slices.DeleteFunc(x.refs, func(r keyRef) bool { return r.end+j.maxWindow <= j.watermark })
		x.pending = j.expire(x.pending, never)
		return j.putKeyIndex(k, x)
	default:
		return j.store.Delete(k)
	}
}

// expire drops the outcomes whose time the watermark has passed by the
// longest window, counting those never used as unmatched, or as late when
// their time is after lateAfter (the end of the row's scored windows,
// none still open: kept while a longer rule's prediction of the row
// might still come, horizon, they came after every window of the row).
// One between two windows of its row (its request id logged again, or
// the served prediction moving the open window past it) is unmatched.
func (j *Joiner) expire(outs []out, lateAfter int64) []out {
	return slices.DeleteFunc(outs, func(o out) bool {
		if o.t+j.maxWindow > j.watermark {
			return false
		}
		switch {
		case o.used:
		case o.t > lateAfter:
			j.counters.Outcomes--
			j.counters.Late++
		default:
			j.counters.Unmatched++
		}
		return true
	})
}

// horizon is the last time an outcome of a row whose windows span
// [start, end] (open, or all closed) can fall in a window of the row:
// end, or, while a prediction of a rule with a longer window may still
// come for the row (a conversion model's beside a click model's), start
// plus the longest window. With one rule (or one window length) it is
// end.
func (j *Joiner) horizon(start, end int64) int64 { return max(end, start+j.maxWindow) }

// mayCome reports whether a prediction that would take outcome o may
// still come for a row whose windows, all closed, span [start, end]: one
// of a rule with one of o's labels (its contract's, if o names one) and
// a window reaching past end.
func (j *Joiner) mayCome(start, end int64, o *out) bool {
	if o.contract != "" {
		r := j.byContract[o.contract]
		return r != nil && o.has(r.Label) && start+int64(r.Window) > end
	}
	for _, l := range o.labels {
		if start+j.labelWindow[l.name] > end {
			return true
		}
	}
	return false
}

// closeGroup scores g's predictions when the watermark has reached the
// end of their window, and expires its outcomes.
func (j *Joiner) closeGroup(g *group) *group {
	if len(g.preds) > 0 && g.due() <= j.watermark {
		j.score(g)
		for i := range g.preds {
			p := &g.preds[i]
			if p.end > j.watermark {
				continue
			}
			if g.closedEnd == 0 {
				g.closedStart, g.closedEnd = p.start, p.end
			} else {
				g.closedStart, g.closedEnd = min(g.closedStart, p.start), max(g.closedEnd, p.end)
			}
			if id := p.eventID; len(id) > 0 && !slices.ContainsFunc(g.closedEvents, func(e []byte) bool { return bytes.Equal(e, id) }) {
				g.closedEvents = append(g.closedEvents, id)
			}
		}
		g.preds = slices.DeleteFunc(g.preds, func(p pred) bool { return p.end <= j.watermark })
		g.span()
	}
	// An outcome expiring now is before every window still open (each
	// ends after the outcome's time plus the longest window): only with
	// none open is it after every window of the row, and late.
	lateAfter := int64(never)
	if g.closedEnd != 0 && len(g.preds) == 0 {
		lateAfter = g.closedEnd
	}
	g.outs = j.expire(g.outs, lateAfter)
	return g
}

// sameRule reports whether p and q are predictions of one rule, which
// share a window and a champion: of one contract, or direct calls of one
// model entry (no contract, one model path).
func (p *pred) sameRule(q *pred) bool {
	return p.contract == q.contract && (p.contract != "" || p.modelPath == q.modelPath)
}

// takes reports whether outcome o is p's: in p's window, and not
// narrowed to another model path or contract.
func (p *pred) takes(o *out) bool {
	return o.t >= p.start && o.t <= p.end && (o.modelPath == "" || o.modelPath == p.modelPath) &&
		(o.contract == "" || o.contract == p.contract)
}

// has reports whether o has a label named name.
func (o *out) has(name string) bool {
	return slices.ContainsFunc(o.labels, func(l label) bool { return l.name == name })
}

// holds reports whether an open prediction of g takes outcome o (takes)
// and o has that prediction's rule's label.
func (j *Joiner) holds(g *group, o *out) bool {
	for i := range g.preds {
		p := &g.preds[i]
		if !p.takes(o) {
			continue
		}
		if r := j.rule(p.contract, p.modelPath); r != nil && o.has(r.Label) {
			return true
		}
	}
	return false
}

// due is the end of g's first open window to close (never: none open).
func (g *group) due() int64 {
	due := int64(never)
	for i := range g.preds {
		due = min(due, g.preds[i].end)
	}
	return due
}

// span sets g's start and end to span its open windows; with none open
// they stay.
func (g *group) span() {
	if len(g.preds) == 0 {
		return
	}
	g.start, g.end = g.preds[0].start, g.preds[0].end
	for i := range g.preds {
		g.start, g.end = min(g.start, g.preds[i].start), max(g.end, g.preds[i].end)
	}
}

// outcome is what a prediction's window holds: whether an outcome of its
// label came, and for binary whether one was positive, for numeric the
// sum of their values.
type outcome struct {
	found, positive bool
	sum             float64
}

// labelOf returns the window's outcome of pred p under rule r, and marks
// the outcomes it used.
func labelOf(g *group, p *pred, r *modelconfig.Outcomes) outcome {
	var res outcome
	for i := range g.outs {
		o := &g.outs[i]
		if !p.takes(o) {
			continue
		}
		for _, l := range o.labels {
			if l.name == r.Label {
				res.found = true
				res.positive = res.positive || l.value > 0
				res.sum += l.value
				o.used = true
			}
		}
	}
	return res
}

// score scores g's predictions whose window has closed (end at or
// before the watermark), each shadow paired with its contract's champion,
// the served prediction of that contract.
func (j *Joiner) score(g *group) {
	// champ is the champion of the contract last looked up, its outcome
	// and, once made (champMade), its point: a contract's shadows share
	// them.
	var (
		champ      *pred
		champOut   outcome
		champPoint quality.BinaryPoint
		champMade  bool
	)
	champion := func(q *pred) *pred {
		if champ != nil && champ.sameRule(q) {
			return champ
		}
		champ, champOut, champMade = nil, outcome{}, false
		for i := range g.preds {
			if p := &g.preds[i]; p.served && p.sameRule(q) {
				champ = p
				break
			}
		}
		if champ != nil {
			if r := j.rule(champ.contract, champ.modelPath); r != nil {
				champOut = labelOf(g, champ, r)
			}
		}
		return champ
	}
	for i := range g.preds {
		p := &g.preds[i]
		if p.end > j.watermark {
			continue
		}
		r := j.rule(p.contract, p.modelPath)
		if r == nil {
			j.counters.Unconfigured++
			continue
		}
		res := labelOf(g, p, r)
		if !res.found && r.Missing == modelconfig.OutcomeMissingIgnore {
			j.counters.Dropped++
			continue
		}
		j.counters.Scored++
		if res.found {
			j.counters.Joined++
		}
		key := SeriesKey{Contract: p.contract, Release: p.release, Shadow: !p.served}
		if p.contract == "" {
			key.Release = p.modelPath
		}
		s := j.seriesOf(key, r.Kind)
		at := time.Unix(0, p.ts)
		if r.Kind == modelconfig.OutcomeNumeric {
			a, b := s.numeric.At(at)
			for _, acc := range []*quality.Numeric{a, b} {
				if acc != nil {
					acc.Add(p.value, res.sum)
				}
			}
			continue
		}
		// The logarithms of a prediction are taken once, for all its
		// windows and pairs.
		pt := quality.NewBinaryPoint(p.value, res.positive)
		a, b := s.binary.At(at)
		for _, acc := range []*quality.Binary{a, b} {
			if acc != nil {
				acc.AddPoint(pt)
			}
		}
		// A shadow is paired with its contract's champion when both were
		// scored on the same outcome (narrowing could tell them apart).
		if p.served {
			continue
		}
		if c := champion(p); c != nil && champOut == res {
			if s.paired == nil {
				s.paired = quality.NewOutcomeWindows[quality.Paired](s.binary.Since())
			}
			if !champMade {
				champPoint, champMade = quality.NewBinaryPoint(c.value, res.positive), true
			}
			a, b := s.paired.At(at)
			for _, acc := range []*quality.Paired{a, b} {
				if acc != nil {
					acc.AddPoints(champPoint, pt)
				}
			}
		}
	}
}

// seriesOf returns key's series, made for kind, starting (again) at the
// release's valid_since when it is known and has changed. While it is not
// known (the release not valid, or no longer valid), a series keeps its
// start: a release no longer valid counts from its last valid_since until
// it becomes valid again, so a series' start only ever moves forward, as
// the servers' merge of the partitions takes it to (evaluations.merge). A
// shadow series counts every shadow prediction of its release (not valid
// while in shadow: its window runs from its load), so its release's
// promotion does not empty the figures that promoted it.
func (j *Joiner) seriesOf(key SeriesKey, kind modelconfig.OutcomeKind) *series {
	s := j.series[key]
	var since time.Time
	if j.validSince != nil && key.Contract != "" && !key.Shadow {
		if t, ok := j.validSince(key.Contract, key.Release); ok {
			since = t
		} else if s != nil {
			since = s.since()
		}
	}
	if s != nil && s.since().Equal(since) && (kind == modelconfig.OutcomeNumeric) == (s.numeric != nil) {
		return s
	}
	s = &series{}
	if kind == modelconfig.OutcomeNumeric {
		s.numeric = quality.NewOutcomeWindows[quality.Numeric](since)
	} else {
		s.binary = quality.NewOutcomeWindows[quality.Binary](since)
	}
	j.series[key] = s
	return s
}

// since is when s's since_valid window starts.
func (s *series) since() time.Time {
	if s.numeric != nil {
		return s.numeric.Since()
	}
	return s.binary.Since()
}

// AddPrediction takes one prediction event, taken at clock time now: each
// row of its scored output is a prediction, kept until its window closes.
// An error is the store's; a bad event is counted, not an error.
func (j *Joiner) AddPrediction(now time.Time, p Prediction) error {
	ev := p.Event
	ts, from, ok := eventTimes(ev)
	if !ok {
		j.counters.Invalid++
		return nil
	}
	if err := j.advance(now, ts, true); err != nil {
		return err
	}
	r := j.rule(ev.GetContract(), ev.GetModelPath())
	if r == nil {
		j.counters.Unconfigured++
		return nil
	}
	values, ok := outputValues(j.values[:0], ev, r.Output)
	j.values = values
	if !ok {
		j.counters.Invalid++
		return nil
	}
	// A copy of an event (the log is at least once) is in the group of its
	// first valid row, open or scored.
	firstRow := max(slices.IndexFunc(values, func(v float64) bool { return !math.IsNaN(v) }), 0)
	j.gk = joinKey(j.gk[:0], ev, int64(firstRow))
	first, _, err := j.getGroup(j.gk)
	if err != nil {
		return err
	}
	if id := ev.GetEventId(); id != "" && first.hasEvent(id) {
		j.counters.DuplicatePredictions++
		return nil
	}
	j.eventID = append(j.eventID[:0], ev.GetEventId()...)
	eventID := j.eventID
	for row, v := range values {
		if math.IsNaN(v) {
			j.counters.Invalid++
			continue
		}
		var g *group
		if row == firstRow {
			g = first
		}
		pr := pred{eventID: eventID, contract: ev.GetContract(), release: ev.GetReleaseVersion(),
			modelPath: ev.GetModelPath(), served: ev.GetServed(), ts: ts, value: v}
		j.gk = joinKey(j.gk[:0], ev, int64(row))
		if err := j.addRow(j.gk, g, pr, p.Key, from, int64(r.Window)); err != nil {
			return err
		}
	}
	return nil
}

// eventTimes returns prediction event ev's timestamp (when it ran, the
// time its figures are counted at) and its event time (where its window
// starts): its request_timestamp, which its request's served and shadow
// events share, or, in an event without one (logged by an older Grove),
// its timestamp. It is false for an event without a valid timestamp, or
// with an invalid request_timestamp.
func eventTimes(ev *grovepb.PredictionEvent) (ts, from int64, ok bool) {
	t := ev.GetTimestamp()
	if t == nil || t.CheckValid() != nil {
		return 0, 0, false
	}
	ts = t.AsTime().UnixNano()
	rt := ev.GetRequestTimestamp()
	if rt == nil {
		return ts, ts, true
	}
	if rt.CheckValid() != nil {
		return 0, 0, false
	}
	return ts, rt.AsTime().UnixNano(), true
}

// joinKey appends to k the store key of row row of ev, the event's item
// of its request: its request id, or its event id when it has none (only
// a key outcome can then reach it).
func joinKey(k []byte, ev *grovepb.PredictionEvent, row int64) []byte {
	k = append(k, prefixGroup)
	if ev.GetRequestId() != "" {
		k = append(k, ev.GetRequestId()...)
	} else {
		k = append(append(k, 1), ev.GetEventId()...)
	}
	k = append(k, 0)
	k = binary.AppendUvarint(k, uint64(ev.GetItem()))
	return binary.AppendUvarint(k, uint64(row))
}

// requestKey appends to k the join key an outcome's request_id, item and
// row name.
func requestKey(k []byte, o *grovepb.Outcome) []byte {
	k = append(append(k, prefixGroup), o.GetRequestId()...)
	k = append(k, 0)
	k = binary.AppendUvarint(k, uint64(o.GetItem()))
	return binary.AppendUvarint(k, uint64(o.GetRow()))
}

// addRow keeps prediction pr of join key k, logged under record key rk
// (none when empty), whose own window would start at from and is window
// long; g is k's group when the caller has read it, else nil.
func (j *Joiner) addRow(k []byte, g *group, pr pred, rk []byte, from, window int64) error {
	if g == nil {
		var err error
		if g, _, err = j.getGroup(k); err != nil {
			return err
		}
	}
	// A contract's predictions of the row share a window: its served
	// prediction's; without one yet, its earliest prediction's. Two
	// contracts scoring one request id (a click model and a conversion
	// model on one impression) each keep their own, and so do two model
	// entries' direct calls (sameRule).
	known, hasServed := false, false
	var start, end int64
	for i := range g.preds {
		if p := &g.preds[i]; p.sameRule(&pr) {
			known, hasServed = true, hasServed || p.served
			start, end = p.start, p.end
		}
	}
	if !known || (pr.served && !hasServed) || (!hasServed && from < start) {
		start, end = from, from+window
	}
	if end <= j.watermark {
		j.counters.LatePredictions++
		return nil
	}
	for i := range g.preds {
		if p := &g.preds[i]; p.sameRule(&pr) {
			p.start, p.end = start, end
		}
	}
	pr.start, pr.end = start, end
	g.preds = append(g.preds, pr)
	g.span()
	j.counters.Predictions++
	// Outcomes that came before the window was known and fall after
	// every window the row can have (horizon) are late, as they would
	// have been coming after it (outcomeOf): so the counts do not depend
	// on which of the two was read first.
	g.outs = slices.DeleteFunc(g.outs, func(o out) bool {
		if o.used || o.t <= j.horizon(g.start, g.end) {
			return false
		}
		j.counters.Outcomes--
		j.counters.Late++
		return true
	})
	if len(rk) > 0 {
		if err := j.indexKey(rk, k, g); err != nil {
			return err
		}
	}
	return j.putGroup(k, g)
}

// indexKey records that join key k (group g, which the caller then
// writes) was logged under record key rk, and hands it the outcomes
// waiting under rk that fall in its window.
//
// The join key of rk's own request (ownKey: the record key is the
// request_id, as with prediction_log.key_by request_id, of item 0 and row
// 0) stands for its own entry in rk's index while it is rk's only one:
// its group holds the window the entry would (keyed), and the index has
// an entry only for outcomes waiting under rk. So a single-row request
// (item 0, row 0 only) logged under its own id writes no index entry; one
// with several rows or items still does, for its other join keys. The
// first other join key logged under rk puts the own key's entry in the
// index first (it came first), as the index would have held it (ownRef).
func (j *Joiner) indexKey(rk, k []byte, g *group) error {
	j.xk = append(append(j.xk[:0], prefixKey), rk...)
	xk := j.xk
	x, _, err := j.getKeyIndex(xk)
	if err != nil {
		return err
	}
	// The entry is written back only when it changes (another row of the
	// same join key, the served prediction after its shadow, mostly leave
	// it as it is).
	changed := false
	own := isOwnKey(k, rk)
	if len(x.refs) == 0 && own && !j.indexAll {
		g.keyed, g.keyedStart, g.keyedEnd = true, g.start, g.end
	} else {
		if own {
			g.keyed = false
		}
		if len(x.refs) == 0 {
			r, ok, err := j.ownRef(rk)
			if err != nil {
				return err
			}
			if ok {
				x.refs = append(x.refs, r)
				changed = true
			}
		}
		if i := slices.IndexFunc(x.refs, func(r keyRef) bool { return bytes.Equal(r.joinKey, k) }); i < 0 {
			x.refs = append(x.refs, keyRef{joinKey: k, start: g.start, end: g.end})
			changed = true
		} else if x.refs[i].start != g.start || x.refs[i].end != g.end {
			x.refs[i].start, x.refs[i].end = g.start, g.end
			changed = true
		}
		if changed {
			slices.SortStableFunc(x.refs, func(a, b keyRef) int { return compareInt(a.start, b.start) })
		}
	}
	x.pending = slices.DeleteFunc(x.pending, func(o out) bool {
		if o.t < g.start || o.t > g.end {
			return false
		}
		g.outs = append(g.outs, o)
		changed = true
		return true
	})
	if !changed {
		return nil
	}
	return j.putKeyIndex(xk, x)
}

// isOwnKey reports whether join key k is record key rk's own (ownKey):
// rk's request_id, item 0, row 0.
func isOwnKey(k, rk []byte) bool {
	return len(k) == len(rk)+4 && k[0] == prefixGroup && bytes.Equal(k[1:1+len(rk)], rk) && string(k[1+len(rk):]) == "\x00\x00\x00"
}

// ownKey appends to k the join key of record key rk's own request (item
// 0, row 0).
func ownKey(k, rk []byte) []byte {
	return append(append(append(k, prefixGroup), rk...), 0, 0, 0)
}

// ownRef returns the entry of rk's index that rk's own join key stands for
// (indexKey), if it does and its window has not expired (an index entry's
// refs are dropped when the watermark passes their end by the longest
// window), and makes the own key's group stand for it no more: the caller
// puts the entry in the index.
func (j *Joiner) ownRef(rk []byte) (keyRef, bool, error) {
	j.ok = ownKey(j.ok[:0], rk)
	g := &j.other
	found, err := j.readGroup(j.ok, g, &j.oval)
	if err != nil || !found || !g.keyed || g.keyedEnd+j.maxWindow <= j.watermark {
		return keyRef{}, false, err
	}
	r := keyRef{joinKey: bytes.Clone(j.ok), start: g.keyedStart, end: g.keyedEnd}
	g.keyed = false
	return r, true, j.putGroup(j.ok, g)
}

// compareInt compares a and b.
func compareInt(a, b int64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// AddOutcome takes one outcome, valid (outcome.Validate: its event_time
// set), taken at clock time now. An error is the store's or an invalid
// outcome's.
func (j *Joiner) AddOutcome(now time.Time, o *grovepb.Outcome) error {
	if o == nil || o.GetOutcomeId() == "" || (o.GetRequestId() == "") == (o.GetKey() == "") ||
		o.GetEventTime() == nil || o.GetEventTime().CheckValid() != nil {
		return errors.New("join: an outcome needs outcome_id, one of request_id and key, and event_time (outcome.Validate)")
	}
	t := o.GetEventTime().AsTime().UnixNano()
	if err := j.advance(now, t, true); err != nil {
		return err
	}
	j.dk = append(append(j.dk[:0], prefixOutcome), o.GetOutcomeId()...)
	dk := j.dk
	_, dup, err := j.get(dk)
	if err != nil {
		return err
	}
	if dup {
		j.counters.DuplicateOutcomes++
		return nil
	}
	if err := j.store.Put(dk, t+j.maxWindow, nil); err != nil {
		return err
	}
	oc := out{id: []byte(o.GetOutcomeId()), modelPath: o.GetModelPath(), contract: o.GetContract(), t: t}
	names := j.labelNames[:0]
	for name := range o.GetLabels() {
		names = append(names, name)
	}
	slices.Sort(names)
	for _, name := range names {
		oc.labels = append(oc.labels, label{name: name, value: o.GetLabels()[name]})
	}
	clear(names)
	j.labelNames = names[:0]
	if t+j.maxWindow <= j.watermark {
		// Every window it could fall in has closed.
		j.counters.Late++
		return nil
	}
	j.counters.Outcomes++
	if o.GetRequestId() != "" {
		j.gk = requestKey(j.gk[:0], o)
		return j.outcomeOf(j.gk, oc)
	}
	return j.keyOutcome(o.GetKey(), oc)
}

// outcomeOf gives outcome oc to join key k.
func (j *Joiner) outcomeOf(k []byte, oc out) error {
	g, _, err := j.getGroup(k)
	if err != nil {
		return err
	}
	switch {
	case g.closedEnd != 0 && len(g.preds) == 0 && oc.t >= g.closedStart &&
		(oc.t <= g.closedEnd && !j.mayCome(g.closedStart, g.closedEnd, &oc) || oc.t > j.horizon(g.closedStart, g.closedEnd)),
		len(g.preds) > 0 && oc.t > j.horizon(g.start, g.end):
		// After the close of the window it falls in, or after every
		// window the row can have. One after the row's closed windows
		// waits while a longer rule's prediction of the row may still
		// come (horizon; with one rule, or one window length, none can:
		// the closed windows reach that far); so does one in a closed
		// window while a longer rule of one of its labels may (mayCome:
		// a conversion in a closed click window, before the conversion
		// model's prediction).
		j.counters.Outcomes--
		j.counters.Late++
		return nil
	}
	g.outs = append(g.outs, oc)
	return j.putGroup(k, g)
}

// keyOutcome gives outcome oc, which names record key rk, to the newest
// prediction logged under rk whose window holds it, or keeps it under rk
// until one comes.
func (j *Joiner) keyOutcome(rk string, oc out) error {
	j.xk = append(append(j.xk[:0], prefixKey), rk...)
	xk := j.xk
	x, _, err := j.getKeyIndex(xk)
	if err != nil {
		return err
	}
	refs := x.refs
	if len(refs) == 0 {
		// rk's own join key may stand for the index's only entry.
		j.ok = ownKey(j.ok[:0], []byte(rk))
		g, found, err := j.getGroup(j.ok)
		if err != nil {
			return err
		}
		if found && g.keyed && g.keyedEnd+j.maxWindow > j.watermark {
			j.own[0] = keyRef{joinKey: j.ok, start: g.keyedStart, end: g.keyedEnd}
			refs = j.own[:]
		}
	}
	for i := len(refs) - 1; i >= 0; i-- {
		r := refs[i]
		if oc.t < r.start || oc.t > r.end {
			continue
		}
		j.gk = append(j.gk[:0], r.joinKey...)
		g, _, err := j.getGroup(j.gk)
		if err != nil {
			return err
		}
		if !j.holds(g, &oc) {
			continue
		}
		return j.outcomeOf(j.gk, oc)
	}
	for _, r := range refs {
		// Late only in a window that closed, and that no longer rule of
		// one of its labels may still hold (mayCome, as in outcomeOf);
		// one past every closed window waits for the prediction it may
		// belong to.
		if r.end <= j.watermark && oc.t >= r.start && oc.t <= r.end && !j.mayCome(r.start, r.end, &oc) {
			j.counters.Outcomes--
			j.counters.Late++
			return nil
		}
	}
	x.pending = append(x.pending, oc)
	return j.putKeyIndex(xk, x)
}

// viewer is a Store that lends its values and keys (MemStore,
// TieredStore): view is Get without the copy, the value valid until the
// next write; dueKeys is Due appending the keys to out as strings, with
// their entries in memory, and focus makes such an entry the one the next
// lookup of its key finds without the store's map.
type viewer interface {
	view(key []byte) ([]byte, bool, error)
	dueKeys(t int64, limit int, out []dueRef) ([]dueRef, error)
	focus(e *memEntry)
}

// get reads key's value, valid until the next write.
func (j *Joiner) get(key []byte) ([]byte, bool, error) {
	if j.viewer != nil {
		return j.viewer.view(key)
	}
	return j.store.Get(key)
}

// getGroup reads join key k's group (empty when there is none) into the
// Joiner's own, which the next getGroup reuses, from a copy of its value
// (which the group's ids are bytes of) that the next getGroup reuses too.
func (j *Joiner) getGroup(k []byte) (*group, bool, error) {
	found, err := j.readGroup(k, &j.group, &j.gval)
	if err != nil {
		return nil, false, err
	}
	return &j.group, found, nil
}

// readGroup reads join key k's group into g (empty when there is none)
// from a copy of its value in *val, which g's ids are bytes of.
func (j *Joiner) readGroup(k []byte, g *group, val *[]byte) (bool, error) {
	v, ok, err := j.get(k)
	if err != nil || !ok {
		g.reset()
		return false, err
	}
	*val = append((*val)[:0], v...)
	if err := g.unmarshal(*val, &j.names); err != nil {
		return false, fmt.Errorf("join key %q: %w", k[1:], err)
	}
	return true, nil
}

// putGroup stores g under k, due when its window ends, its first outcome
// expires, or (nothing else left) the longest window after its closed
// windows, when an outcome in them or a copy of their events would be
// late anyway; or deletes it when nothing is left.
func (j *Joiner) putGroup(k []byte, g *group) error {
	due := g.due()
	for _, o := range g.outs {
		due = min(due, o.t+j.maxWindow)
	}
	if due == never && g.closedEnd != 0 && g.closedEnd+j.maxWindow > j.watermark {
		due = g.closedEnd + j.maxWindow
	}
	if due == never {
		if g.keyed && g.keyedEnd+j.maxWindow > j.watermark {
			// The index entry it stands for outlives it.
			if err := j.indexOwn(k, g); err != nil {
				return err
			}
		}
		return j.store.Delete(k)
	}
	j.buf = g.appendTo(j.buf[:0])
	return j.store.Put(k, due, j.buf)
}

// indexOwn puts the entry that group g of own key k stands for (indexKey)
// in the index of its record key, before the group goes.
func (j *Joiner) indexOwn(k []byte, g *group) error {
	j.mk = append(append(j.mk[:0], prefixKey), k[1:len(k)-3]...)
	v, _, err := j.get(j.mk)
	if err != nil {
		return err
	}
	var x keyIndex
	if len(v) > 0 {
		if err := x.unmarshal(bytes.Clone(v), &j.names); err != nil {
			return fmt.Errorf("record key %q: %w", j.mk[1:], err)
		}
	}
	x.refs = append(x.refs, keyRef{joinKey: bytes.Clone(k), start: g.keyedStart, end: g.keyedEnd})
	slices.SortStableFunc(x.refs, func(a, b keyRef) int { return compareInt(a.start, b.start) })
	return j.putKeyIndex(j.mk, &x)
}

// getKeyIndex reads the index entry xk (empty when there is none) into
// the Joiner's own, which the next getKeyIndex reuses, from a copy of its
// value that the next getKeyIndex reuses too.
func (j *Joiner) getKeyIndex(xk []byte) (*keyIndex, bool, error) {
	x := &j.index
	v, ok, err := j.get(xk)
	if err != nil || !ok {
		x.reset()
		return x, false, err
	}
	j.xval = append(j.xval[:0], v...)
	if err := x.unmarshal(j.xval, &j.names); err != nil {
		return nil, false, fmt.Errorf("record key %q: %w", xk[1:], err)
	}
	return x, true, nil
}

// putKeyIndex stores x under xk, due when its first ref or pending
// outcome expires; or deletes it when empty.
func (j *Joiner) putKeyIndex(xk []byte, x *keyIndex) error {
	due := int64(never)
	for _, r := range x.refs {
		due = min(due, r.end+j.maxWindow)
	}
	for _, o := range x.pending {
		due = min(due, o.t+j.maxWindow)
	}
	if due == never {
		return j.store.Delete(xk)
	}
	j.buf = x.appendTo(j.buf[:0])
	return j.store.Put(xk, due, j.buf)
}
