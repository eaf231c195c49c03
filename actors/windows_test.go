package actors

import (
	"math"
	"testing"
	"time"

	"github.com/groveml/grove/routing"
	"github.com/groveml/grove/routing/quality"
)

// compareExec is a compared execution of one single-score output whose
// values all differ by diff, with the given forward times.
func compareExec(diff float64, shadow, champion time.Duration) quality.Execution {
	d := quality.OutputDiff{Name: "p", Rows: 1, Elements: 1, SumAbsDiff: diff, MaxAbsDiff: diff, Score: true, Agree: 1}
	return quality.Execution{Outputs: []quality.OutputDiff{d}, Shadow: shadow, Champion: champion}
}

// The gate's comparison is of the content the windows are of: zero for
// another content until it is first compared, then that content's alone;
// a straggler of the replaced content changes nothing.
func TestCompareWindowsGateFollowsTheContent(t *testing.T) {
	w := newCompareWindows(10)
	t0 := time.Unix(50000, 0)
	w.record(1, true, compareExec(0.4, time.Millisecond, time.Millisecond), t0)
	if got := w.comparison(1, t0); got.Executions != 1 || math.Abs(got.MeanAbsDiff-0.4) > 1e-9 || got.P99Ratio == 0 {
		t.Fatalf("content 1: %+v", got)
	}
	if got := w.comparison(2, t0); got != (routing.Comparison{}) {
		t.Fatalf("content 2 before its first comparison: %+v, want zero", got)
	}
	w.record(2, true, compareExec(0, time.Millisecond, time.Millisecond), t0)
	w.record(1, false, compareExec(0.4, time.Millisecond, time.Millisecond), t0)
	if got := w.comparison(2, t0); got.Executions != 1 || got.MeanAbsDiff != 0 {
		t.Fatalf("content 2: %+v, want its one execution", got)
	}
	if got := w.comparison(1, t0); got != (routing.Comparison{}) {
		t.Fatalf("content 1 once replaced: %+v, want zero", got)
	}
}

// The router asks for the gate's comparison on every request: its counts
// are fresh, its p99 ratio (a merge of the recent window's slots) is
// reused for a second, then worked out again.
func TestCompareWindowsGateReusesTheP99RatioForASecond(t *testing.T) {
	w := newCompareWindows(100)
	t0 := time.Unix(90000, 0)
	for i := range 10 {
		w.record(3, true, compareExec(0.002, 3*time.Millisecond, time.Millisecond), t0.Add(time.Duration(i)*time.Second))
	}
	now := t0.Add(10 * time.Second)
	g := w.comparison(3, now)
	if g.Executions != 10 || math.Abs(g.P99Ratio-3) > 0.3 {
		t.Fatalf("gate comparison %+v, want 10 executions and a p99 ratio of 3", g)
	}
	w.record(3, true, compareExec(0.002, 30*time.Millisecond, time.Millisecond), now.Add(100*time.Millisecond))
	if got := w.comparison(3, now.Add(500*time.Millisecond)); got.P99Ratio != g.P99Ratio || got.Executions != 11 {
		t.Errorf("within a second: %+v, want the p99 ratio %v worked out before and the fresh count 11", got, g.P99Ratio)
	}
	if got := w.comparison(3, now.Add(6*time.Minute)); got.P99Ratio != 0 || got.Executions != 11 {
		t.Errorf("6 minutes later: %+v, want since-start figures and no p99 ratio", got)
	}
}

// The router reads the gate's comparison on every user request: it must
// not wait while a reader of the windows (the stats, a scrape) holds them
// to scan the last-N ring, which takes 70 ms at the largest
// shadow_compare_window.
func TestCompareWindowsGateDoesNotWaitForAScan(t *testing.T) {
	w := newCompareWindows(10)
	t0 := time.Unix(80000, 0)
	w.record(1, true, compareExec(0.25, 2*time.Millisecond, time.Millisecond), t0)
	first := w.comparison(1, t0)
	w.record(1, true, compareExec(0.25, 2*time.Millisecond, time.Millisecond), t0)
	w.mu.Lock() // a scan under way
	got := make(chan routing.Comparison, 1)
	go func() { got <- w.comparison(1, t0.Add(2*gateRefresh)) }()
	select {
	case c := <-got:
		if c.Executions != 2 || math.Abs(c.MeanAbsDiff-0.25) > 1e-9 || c.P99Ratio != first.P99Ratio || c.P99Ratio == 0 {
			t.Errorf("during a scan: %+v, want the fresh counts and the p99 ratio worked out before (%v)", c, first.P99Ratio)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the gate's comparison waited for the windows' scan")
	}
	w.mu.Unlock()
}
