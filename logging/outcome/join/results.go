package join

import (
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/groveml/grove/routing/quality"
)

// Snapshot is what a Joiner has computed, for publishing: the watermark,
// the counters, and each series' windows.
type Snapshot struct {
	// Watermark is the partition's watermark; MaxEventTime the largest
	// event time seen; Lag how far the watermark is behind the clock (the
	// now of the last call).
	Watermark, MaxEventTime time.Time
	Lag                     time.Duration
	Counters                Counters
	// Series are the series scored so far, by contract, release, served
	// before shadow.
	Series []SeriesSnapshot
}

// SeriesSnapshot is one series' state: Stats its figures (since_valid,
// last_1h up to MaxEventTime, vs_champion for a shadow of a binary rule),
// and its accumulators in their binary form (quality's MarshalBinary), to
// be merged with the other partitions'.
type SeriesSnapshot struct {
	Key   SeriesKey
	Stats *quality.OutcomeStats
	// Binary or Numeric is the series' OutcomeWindows as its rule's kind
	// says; Paired those of its pairs with the champion (a shadow of a
	// binary rule), else nil.
	Binary, Numeric, Paired []byte
}

// Counters returns the counters.
func (j *Joiner) Counters() Counters { return j.counters }

// Snapshot returns what the Joiner has computed so far.
func (j *Joiner) Snapshot() (*Snapshot, error) { return j.snapshot(true) }

// SnapshotForms is Snapshot without its series' figures (their Stats
// nil): the binary forms alone, all that a writer of the evaluations
// topic needs, at a fraction of the cost (the figures sort and merge the
// accumulators' histograms).
func (j *Joiner) SnapshotForms() (*Snapshot, error) { return j.snapshot(false) }

// snapshot is Snapshot, with the series' Stats when stats.
func (j *Joiner) snapshot(stats bool) (*Snapshot, error) {
	s := &Snapshot{Watermark: j.Watermark(), Counters: j.counters}
	if j.seen {
		s.MaxEventTime = time.Unix(0, j.maxEvent).UTC()
		s.Lag = time.Duration(j.now - j.watermark)
	}
	for _, k := range j.seriesKeys() {
		sr := j.series[k]
		ss := SeriesSnapshot{Key: k}
		var err error
		if sr.numeric != nil {
			if stats {
				ss.Stats = sr.numeric.OutcomeStats(s.MaxEventTime)
			}
			ss.Numeric, err = sr.numeric.MarshalBinary()
		} else {
			if stats {
				ss.Stats = sr.binary.OutcomeStats(s.MaxEventTime)
			}
			ss.Binary, err = sr.binary.MarshalBinary()
		}
		if err == nil && sr.paired != nil {
			if stats {
				ss.Stats.VsChampion = sr.paired.SinceValid().Delta(quality.DefaultConfidence).VsChampion()
			}
			ss.Paired, err = sr.paired.MarshalBinary()
		}
		if err != nil {
			return nil, fmt.Errorf("join: series %v: %w", k, err)
		}
		s.Series = append(s.Series, ss)
	}
	return s, nil
}

// CompareSeriesKeys orders series keys by contract, then release, served
// before shadow: the order of Snapshot's series.
func CompareSeriesKeys(a, b SeriesKey) int {
	if c := strings.Compare(a.Contract, b.Contract); c != 0 {
		return c
	}
	if c := strings.Compare(a.Release, b.Release); c != 0 {
		return c
	}
	switch {
	case a.Shadow == b.Shadow:
		return 0
	case b.Shadow:
		return -1
	}
	return 1
}

// seriesKeys are the series' keys in order.
func (j *Joiner) seriesKeys() []SeriesKey {
	keys := make([]SeriesKey, 0, len(j.series))
	for k := range j.series {
		keys = append(keys, k)
	}
	slices.SortFunc(keys, CompareSeriesKeys)
	return keys
}

// checkpointVersion is the version of Checkpoint's form.
const checkpointVersion = 1

// Checkpoint encodes the Joiner's state but for its store's contents
// (the watermark, the counters and the series' accumulators), for its
// owner to keep with the offsets it consumed up to, after making the
// store's writes durable (PebbleStore.Sync): Restore over the same store
// then continues as if nothing had happened.
func (j *Joiner) Checkpoint() ([]byte, error) {
	s, err := j.SnapshotForms()
	if err != nil {
		return nil, err
	}
	return j.CheckpointOf(s), nil
}

// CheckpointOf is Checkpoint from s, a Snapshot (or SnapshotForms) taken
// of the Joiner since it last took or scored anything or moved its
// watermark: the accumulators are s's binary forms, not encoded again.
func (j *Joiner) CheckpointOf(s *Snapshot) []byte {
	e := enc{checkpointVersion}.b(j.seen).i(j.maxEvent).i(j.lastArrival).i(j.watermark).i(j.now)
	c := &j.counters
	for _, v := range []uint64{c.Predictions, c.Scored, c.Joined, c.Dropped, c.Outcomes, c.Late, c.Unmatched,
		c.DuplicateOutcomes, c.DuplicatePredictions, c.LatePredictions, c.Unconfigured, c.Invalid} {
		e = e.u(v)
	}
	e = e.u(uint64(len(s.Series)))
	for _, ss := range s.Series {
		k := ss.Key
		numeric, paired := ss.Numeric != nil, ss.Paired != nil
		e = e.s(k.Contract).s(k.Release).b(k.Shadow).b(numeric).b(paired)
		if numeric {
			e = e.y(ss.Numeric)
		} else {
			e = e.y(ss.Binary)
		}
		if paired {
			e = e.y(ss.Paired)
		}
	}
	return e
}

// Restore sets the Joiner's state to what Checkpoint encoded, or returns
// an error and leaves it as it was. Call it on a new Joiner over the
// store the checkpoint was taken with.
func (j *Joiner) Restore(data []byte) error {
	d := newDec(data)
	if len(d.B) < 1 || d.B[0] != checkpointVersion {
		return corrupt("unknown checkpoint version")
	}
	d.B = d.B[1:]
	seen, maxEvent, lastArrival, watermark, now := d.Bool(), d.I(), d.I(), d.I(), d.I()
	var c Counters
	for _, p := range []*uint64{&c.Predictions, &c.Scored, &c.Joined, &c.Dropped, &c.Outcomes, &c.Late, &c.Unmatched,
		&c.DuplicateOutcomes, &c.DuplicatePredictions, &c.LatePredictions, &c.Unconfigured, &c.Invalid} {
		*p = d.U()
	}
	n := d.Count(5)
	all := make(map[SeriesKey]*series, n)
	for range n {
		if d.Err != nil {
			break
		}
		k := SeriesKey{Contract: d.S(), Release: d.S(), Shadow: d.Bool()}
		numeric, paired := d.Bool(), d.Bool()
		sr := &series{}
		var err error
		if numeric {
			sr.numeric = &quality.OutcomeWindows[quality.Numeric, *quality.Numeric]{}
			err = sr.numeric.UnmarshalBinary([]byte(d.S()))
		} else {
			sr.binary = &quality.OutcomeWindows[quality.Binary, *quality.Binary]{}
			err = sr.binary.UnmarshalBinary([]byte(d.S()))
		}
		if err == nil && paired {
			sr.paired = &quality.OutcomeWindows[quality.Paired, *quality.Paired]{}
			err = sr.paired.UnmarshalBinary([]byte(d.S()))
		}
		if err != nil {
			return fmt.Errorf("join: checkpoint, series %v: %w", k, err)
		}
		if _, dup := all[k]; dup {
			d.Fail("a series twice")
		}
		all[k] = sr
	}
	if err := d.end(); err != nil {
		return fmt.Errorf("join: checkpoint: %w", err)
	}
	j.seen, j.maxEvent, j.lastArrival, j.watermark, j.now = seen, maxEvent, lastArrival, watermark, now
	j.counters, j.series = c, all
	return nil
}
