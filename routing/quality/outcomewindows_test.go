package quality

import (
	"testing"
	"time"
)

func TestOutcomeWindowsLastHourRotatesByEventTime(t *testing.T) {
	t0 := time.Unix(1_800_000_000, 0).Truncate(time.Minute)
	w := NewOutcomeWindows[Binary](t0)
	add := func(at time.Time, p float64, pos bool) {
		s, m := w.At(at)
		if s != nil {
			s.Add(p, pos)
		}
		if m != nil {
			m.Add(p, pos)
		}
	}
	add(t0.Add(-time.Second), 0.5, true) // before since: no window
	add(t0, 0.2, false)
	add(t0.Add(30*time.Minute), 0.4, true)
	add(t0.Add(59*time.Minute+59*time.Second), 0.6, true)
	if got := w.SinceValid().Count(); got != 3 {
		t.Fatalf("since_valid %d, want 3 (the one before since left out)", got)
	}
	if got := w.LastHour(t0.Add(59 * time.Minute)).Count(); got != 3 {
		t.Fatalf("last hour at 59 min: %d, want 3", got)
	}
	if got := w.LastHour(t0.Add(60 * time.Minute)).Count(); got != 2 {
		t.Fatalf("last hour at 60 min: %d, want 2 (minute 0 is out)", got)
	}
	// Minute 60 takes minute 0's bucket; a late prediction of minute 0
	// then counts only in since_valid.
	add(t0.Add(60*time.Minute), 0.1, false)
	add(t0.Add(10*time.Second), 0.3, false)
	if s, m := w.At(t0.Add(10 * time.Second)); s == nil || m != nil {
		t.Fatalf("a prediction an hour older than its bucket: since %v minute %v", s, m)
	}
	if got := w.SinceValid().Count(); got != 5 {
		t.Fatalf("since_valid %d, want 5", got)
	}
	if got := w.LastHour(t0.Add(60 * time.Minute)).Count(); got != 3 {
		t.Fatalf("last hour %d, want 3", got)
	}
	if got := w.LastHour(t0.Add(3 * time.Hour)).Count(); got != 0 {
		t.Fatalf("last hour two hours on: %d, want 0", got)
	}
}

func TestOutcomeWindowsMergeAddsPartitions(t *testing.T) {
	t0 := time.Unix(1_800_000_000, 0)
	a, b, whole := NewOutcomeWindows[Numeric](t0), NewOutcomeWindows[Numeric](t0), NewOutcomeWindows[Numeric](t0)
	for i := range 200 {
		at := t0.Add(time.Duration(i) * 37 * time.Second)
		w := a
		if i%3 == 0 {
			w = b
		}
		for _, x := range []*OutcomeWindows[Numeric, *Numeric]{w, whole} {
			s, m := x.At(at)
			s.Add(float64(i), 1)
			if m != nil {
				m.Add(float64(i), 1)
			}
		}
	}
	a.Merge(b)
	now := t0.Add(200 * 37 * time.Second)
	if a.SinceValid().Count() != 200 || !close(a.SinceValid().MAE(), whole.SinceValid().MAE(), 1e-12) {
		t.Fatalf("since_valid %d", a.SinceValid().Count())
	}
	if got, want := a.LastHour(now), whole.LastHour(now); got.Count() != want.Count() || !close(got.Bias(), want.Bias(), 1e-12) {
		t.Fatalf("last hour %d, want %d", got.Count(), want.Count())
	}
}

// BenchmarkOutcomeWindowsAdd is the cost of scoring one binary prediction
// into both windows, its event time a minute on every 100k predictions.
func BenchmarkOutcomeWindowsAdd(b *testing.B) {
	t0 := time.Unix(1_800_000_000, 0)
	w := NewOutcomeWindows[Binary](t0)
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		p := 0.01 + float64(i%4093)/4093*0.02
		s, m := w.At(t0.Add(time.Duration(i/100000) * time.Minute))
		s.Add(p, i%50 == 0)
		if m != nil {
			m.Add(p, i%50 == 0)
		}
	}
}
