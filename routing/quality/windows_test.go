package quality

import (
	"math"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/groveml/grove/servables"
)

// exec is a compared execution of one single-score output named "p" whose
// values all differ by diff, with the given forward times.
func exec(rows int, diff float64, shadow, champion time.Duration) Execution {
	d := OutputDiff{Name: "p", Rows: rows, Elements: rows, SumAbsDiff: diff * float64(rows), MaxAbsDiff: diff, Score: true, Agree: rows}
	if diff <= DefaultCompareTolerance {
		d.Within = rows
	}
	return Execution{Outputs: []OutputDiff{d}, Shadow: shadow, Champion: champion}
}

// stats describes the windows of content id, loaded at loadedAt, at now,
// as the engine's stats do (Snapshot, then Stats).
func (w *Windows) stats(id int64, loadedAt time.Time, tol float64, now time.Time) *ComparisonStats {
	return w.Snapshot(id, now).Stats(loadedAt, tol)
}

func TestWindowsLastNEvictsTheOldest(t *testing.T) {
	w := NewWindows(3)
	now := time.Unix(10000, 0)
	for i, diff := range []float64{1, 0.5, 0.2, 0.2, 0.2} {
		w.Record(7, true, exec(2, diff, time.Millisecond, time.Millisecond), now.Add(time.Duration(i)*time.Second))
	}
	st := w.stats(7, now, DefaultCompareTolerance, now.Add(5*time.Second))
	if st.N != 3 || st.LastN.Executions != 3 || st.SinceStart.Executions != 5 {
		t.Fatalf("last N %d executions of %d, since start %d", st.LastN.Executions, st.N, st.SinceStart.Executions)
	}
	if got := st.LastN.MaxAbsDiff; math.Abs(got-0.2) > 1e-9 {
		t.Errorf("last 3 max diff %v, want 0.2 (the 1 and 0.5 evicted)", got)
	}
	if got := st.SinceStart.MaxAbsDiff; got != 1 {
		t.Errorf("since start max diff %v, want 1", got)
	}
	if got, want := st.SinceStart.MeanAbsDiff, (1+0.5+0.2*3)/5; math.Abs(got-want) > 1e-9 {
		t.Errorf("since start mean %v, want %v", got, want)
	}
	if st.LastN.Outputs[0].Rows != 6 || *st.LastN.Outputs[0].Agreement != 1 {
		t.Errorf("last N output %+v", st.LastN.Outputs[0])
	}
}

func TestWindowsRecentForgetsAfterFiveMinutes(t *testing.T) {
	w := NewWindows(100)
	t0 := time.Unix(30000, 0) // a slot boundary
	w.Record(1, true, exec(1, 0.3, 2*time.Millisecond, time.Millisecond), t0)
	w.Record(1, true, exec(1, 0.1, 2*time.Millisecond, time.Millisecond), t0.Add(4*time.Minute))
	at := func(d time.Duration) CompareWindow { return w.stats(1, t0, 0.01, t0.Add(d)).Last5m }
	if r := at(4 * time.Minute); r.Executions != 2 || math.Abs(r.MaxAbsDiff-0.3) > 1e-9 {
		t.Fatalf("at 4 min: %+v, want both executions", r)
	}
	if r := at(5*time.Minute + 40*time.Second); r.Executions != 1 || math.Abs(r.MaxAbsDiff-0.1) > 1e-9 {
		t.Fatalf("at 5 min 40 s: %d executions, max %v; want only the later one", r.Executions, r.MaxAbsDiff)
	}
	if r := at(10 * time.Minute); r.Executions != 0 {
		t.Fatalf("at 10 min: %d executions, want none", r.Executions)
	}
	// Since start and last N keep them.
	if st := w.stats(1, t0, 0.01, t0.Add(10*time.Minute)); st.SinceStart.Executions != 2 || st.LastN.Executions != 2 {
		t.Fatalf("since start %d, last N %d", st.SinceStart.Executions, st.LastN.Executions)
	}
	// A slot reused a cycle later starts empty: the first execution's slot
	// now holds the new one, beside the 4-minute one.
	w.Record(1, true, exec(1, 0.05, time.Millisecond, time.Millisecond), t0.Add(slots*slotSpan))
	if r := at(slots * slotSpan); r.Executions != 2 || math.Abs(r.MaxAbsDiff-0.1) > 1e-9 {
		t.Fatalf("after a slot cycle: %+v", r)
	}
}

func TestWindowsResetOnANewContent(t *testing.T) {
	w := NewWindows(10)
	t0 := time.Unix(50000, 0)
	w.Record(1, true, exec(1, 0.4, time.Millisecond, time.Millisecond), t0)
	if got := w.Gate(); w.Content() != 1 || got.Executions != 1 || math.Abs(got.MeanAbsDiff-0.4) > 1e-9 {
		t.Fatalf("content %d: %+v", w.Content(), got)
	}
	if st := w.stats(2, t0, 0.01, t0); st.SinceStart.Executions != 0 || st.LastN.Executions != 0 || st.Last5m.Executions != 0 {
		t.Fatalf("content 2 before its first comparison: %+v, want nothing", st)
	}
	t1 := t0.Add(time.Minute)
	if !w.Record(2, true, exec(1, 0, time.Millisecond, time.Millisecond), t1) {
		t.Fatal("an execution of a new content still served was left out")
	}
	// A straggler of the replaced content does not start them afresh again.
	if w.Record(1, false, exec(1, 0.4, time.Millisecond, time.Millisecond), t1) {
		t.Fatal("a straggler of the replaced content was recorded")
	}
	if got := w.Gate(); w.Content() != 2 || got.Executions != 1 || got.MeanAbsDiff != 0 {
		t.Fatalf("content %d after the straggler: %+v, want content 2's one execution", w.Content(), got)
	}
	st := w.stats(2, t1, 0.01, t1)
	if st.SinceStart.Executions != 1 || st.LastN.Executions != 1 || st.Last5m.Executions != 1 || st.SinceStart.MaxAbsDiff != 0 {
		t.Fatalf("after a new content: %+v", st)
	}
	if st.Since == nil || !st.Since.Equal(t1) {
		t.Errorf("since %v, want the new content's load time %v", st.Since, t1)
	}
}

func TestWindowsErrorsLatencyAndGate(t *testing.T) {
	w := NewWindows(100)
	t0 := time.Unix(90000, 0)
	for i := range 100 {
		e := exec(1, 0.002, 3*time.Millisecond, time.Millisecond)
		switch {
		case i%10 == 0:
			e = Execution{ShadowFailed: true}
		case i%25 == 1:
			e = Execution{ChampionFailed: true}
		}
		w.Record(3, true, e, t0.Add(time.Duration(i)*time.Second))
	}
	now := t0.Add(100 * time.Second)
	st := w.stats(3, t0, 0.01, now)
	s := st.SinceStart
	if s.Executions != 96 || s.Errors != 10 || s.ChampionFailed != 4 || math.Abs(s.ErrorRate-10.0/96) > 1e-9 {
		t.Fatalf("executions %d errors %d champion failed %d rate %v", s.Executions, s.Errors, s.ChampionFailed, s.ErrorRate)
	}
	if math.Abs(s.P50Ratio-3) > 0.3 || math.Abs(s.P99Ratio-3) > 0.3 {
		t.Errorf("latency ratios %v %v, want 3 (within the histogram's 5 %%)", s.P50Ratio, s.P99Ratio)
	}
	if s.WithinTolerance != 1 || *s.Agreement != 1 {
		t.Errorf("within %v agreement %v", s.WithinTolerance, *s.Agreement)
	}
	g := w.Gate()
	if g.Executions != 96 || g.Errors != 10 || math.Abs(g.MeanAbsDiff-0.002) > 1e-9 || g.P99Ratio != 0 {
		t.Fatalf("gate comparison %+v, want the since-start figures and no p99 ratio (RecentP99Ratio's)", g)
	}
	if r := w.RecentP99Ratio(now); math.Abs(r-3) > 0.3 {
		t.Fatalf("recent p99 ratio %v, want 3", r)
	}
	// 6 minutes later the recent window is empty and the ratio unknown.
	if r := w.RecentP99Ratio(now.Add(6 * time.Minute)); r != 0 {
		t.Errorf("6 minutes later: p99 ratio %v, want 0", r)
	}
	// An output that could not be compared fails any bound.
	w.Record(3, true, Execution{Outputs: []OutputDiff{{Name: "p", Mismatch: "shape"}}}, now.Add(7*time.Minute))
	if got := w.Gate(); got.MeanAbsDiff != math.MaxFloat64 {
		t.Errorf("after a mismatch the gate's mean diff is %v, want the largest float64", got.MeanAbsDiff)
	}
	if st := w.stats(3, t0, 0.01, now.Add(8*time.Minute)); st.SinceStart.Mismatches != 1 || !strings.Contains(st.SinceStart.Outputs[0].LastMismatch, "shape") {
		t.Errorf("mismatch not counted: %+v", st.SinceStart)
	}
}

// A BYTES output has no absolute difference: the gate counts its share of
// unequal rows, so a challenger whose labels differ is not promoted on its
// numeric outputs alone.
func TestWindowsGateCountsUnequalBytesRows(t *testing.T) {
	w := NewWindows(10)
	t0 := time.Unix(70000, 0)
	champion := []servables.Tensor{f32(t, "score", []int64{4, 1}, 0.1, 0.2, 0.3, 0.4), strs(t, "side", []int64{4, 1}, "friend", "foe", "foe", "friend")}
	shadow := []servables.Tensor{f32(t, "score", []int64{4, 1}, 0.1, 0.2, 0.3, 0.4), strs(t, "side", []int64{4, 1}, "foe", "friend", "foe", "friend")}
	w.Record(1, true, Execution{Shadow: time.Millisecond, Champion: time.Millisecond, Outputs: DiffOutputs(champion, shadow, 0.01)}, t0)
	if got := w.Gate(); math.Abs(got.MeanAbsDiff-0.5) > 1e-9 {
		t.Errorf("gate mean diff %v, want 0.5: half the BYTES rows differ", got.MeanAbsDiff)
	}
	// Equal labels and equal numbers: no difference.
	w.Record(2, true, Execution{Shadow: time.Millisecond, Champion: time.Millisecond, Outputs: DiffOutputs(champion, champion, 0.01)}, t0)
	if got := w.Gate(); got.MeanAbsDiff != 0 {
		t.Errorf("gate mean diff %v of equal answers, want 0", got.MeanAbsDiff)
	}
}

// The last-N ring keeps at most maxOutputs outputs of an
// execution, as the windows' totals do: a model with very many outputs
// does not make it N times that big.
func TestWindowsRingKeepsBoundedOutputs(t *testing.T) {
	w := NewWindows(10)
	t0 := time.Unix(60000, 0)
	e := Execution{Shadow: time.Millisecond, Champion: time.Millisecond}
	for i := range 1000 {
		e.Outputs = append(e.Outputs, OutputDiff{Name: "o" + strconv.Itoa(i), Rows: 1, Elements: 1, Within: 1})
	}
	w.Record(1, true, e, t0)
	if n := cap(w.ring[0].Outputs); n > maxOutputs {
		t.Errorf("the ring holds %d outputs of one execution, want at most %d", n, maxOutputs)
	}
	if st := w.stats(1, t0, 0.01, t0); len(st.SinceStart.Outputs) != maxOutputs || len(st.LastN.Outputs) != maxOutputs {
		t.Errorf("outputs in the windows: %d since start, %d last N; want %d", len(st.SinceStart.Outputs), len(st.LastN.Outputs), maxOutputs)
	}
}
