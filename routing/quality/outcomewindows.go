package quality

import (
	"time"
)

// minuteCount and minuteSpan make the last-hour window: 60 buckets of one
// minute of event time each.
const (
	minuteCount = 60
	minuteSpan  = time.Minute
)

// Accumulator is what OutcomeWindows keep: Binary, Numeric or Paired,
// whose zero value is empty and which merge.
type Accumulator[T any] interface {
	*T
	Merge(*T)
}

// minuteBucket holds the predictions of one minute of event time, which
// starts at start (Unix minutes), once used.
type minuteBucket[T any] struct {
	used  bool
	start int64
	acc   T
}

// OutcomeWindows keep one servable's scored predictions over two windows
// of event time (the time the prediction was served): since_valid, a
// running total since a time (its release became valid), and last_1h, in
// minute buckets that the event times themselves rotate (no clock). Not
// safe for concurrent use.
type OutcomeWindows[T any, P Accumulator[T]] struct {
	since   time.Time
	total   T
	minutes [minuteCount]minuteBucket[T]
}

// NewOutcomeWindows returns empty windows whose since_valid total starts
// at since.
func NewOutcomeWindows[T any, P Accumulator[T]](since time.Time) *OutcomeWindows[T, P] {
	return &OutcomeWindows[T, P]{since: since}
}

// Since is when the since_valid total starts.
func (w *OutcomeWindows[T, P]) Since() time.Time { return w.since }

// At returns the accumulators a prediction served at eventTime is added
// to: the since_valid total and its minute's bucket. Both are nil when it
// was served before Since (it belongs to no window), the bucket alone
// when its minute is no longer in the buckets (a newer minute has taken
// its place). A newer minute takes the place of the one an hour older.
func (w *OutcomeWindows[T, P]) At(eventTime time.Time) (since, minute P) {
	if eventTime.Before(w.since) {
		return nil, nil
	}
	start := minuteOf(eventTime)
	b := &w.minutes[bucketOf(start)]
	switch {
	case b.used && b.start == start:
	case !b.used || b.start < start:
		var zero T
		b.used, b.start, b.acc = true, start, zero
	default:
		return &w.total, nil
	}
	return &w.total, &b.acc
}

// SinceValid returns the since_valid total (the windows' own: merge it
// into another to keep it apart).
func (w *OutcomeWindows[T, P]) SinceValid() P { return &w.total }

// LastHour adds up the minute buckets of the hour up to now (event time:
// the minute of now and the 59 before it) into a new accumulator.
func (w *OutcomeWindows[T, P]) LastHour(now time.Time) P {
	out := P(new(T))
	last := minuteOf(now)
	for i := range w.minutes {
		if b := &w.minutes[i]; b.used && b.start <= last && b.start > last-minuteCount {
			out.Merge(&b.acc)
		}
	}
	return out
}

// Merge adds o, the windows of other predictions since the same time
// (another partition's), into w: the since_valid totals add up, and each
// minute keeps the newer of the two buckets in its place, both when they
// are of the same minute.
func (w *OutcomeWindows[T, P]) Merge(o *OutcomeWindows[T, P]) {
	P(&w.total).Merge(&o.total)
	for i := range w.minutes {
		b, ob := &w.minutes[i], &o.minutes[i]
		switch {
		case !ob.used || (b.used && ob.start < b.start):
		case b.used && ob.start == b.start:
			P(&b.acc).Merge(&ob.acc)
		default:
			var zero T
			b.used, b.start, b.acc = true, ob.start, zero
			P(&b.acc).Merge(&ob.acc)
		}
	}
}

// minuteOf is the minute of t, in Unix minutes (floored).
func minuteOf(t time.Time) int64 {
	s := t.Unix()
	m := s / 60
	if s%60 < 0 {
		m--
	}
	return m
}

// bucketOf is the bucket of minute m.
func bucketOf(m int64) int {
	i := int(m % minuteCount)
	if i < 0 {
		i += minuteCount
	}
	return i
}
