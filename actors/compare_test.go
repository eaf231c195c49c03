package actors

import (
	"math"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/groveml/grove/routing"
	"github.com/groveml/grove/servables"
)

// f32 is a float32 tensor named name of shape holding vals.
func f32(t *testing.T, name string, shape []int64, vals ...float32) servables.Tensor {
	t.Helper()
	x, err := servables.NewTensor(name, servables.Float32, shape)
	if err != nil {
		t.Fatal(err)
	}
	if copy(x.Float32s(), vals) != len(vals) || len(vals) != x.Len() {
		t.Fatalf("%d values for shape %v", len(vals), shape)
	}
	return x
}

func strs(t *testing.T, name string, shape []int64, vals ...string) servables.Tensor {
	t.Helper()
	x, err := servables.NewStringTensor(name, shape, vals)
	if err != nil {
		t.Fatal(err)
	}
	return x
}

func TestDiffOutputs(t *testing.T) {
	const tol = 0.01
	scores := []float32{0.1, 0.45, 0.55, 0.9}
	shifted := []float32{0.3, 0.65, 0.75, 1.1} // +0.2: rows 2 (0.45 → 0.65) crosses 0.5
	for _, tc := range []struct {
		name             string
		champion, shadow func(t *testing.T) []servables.Tensor
		want             []OutputDiff
		mean             []float64
	}{
		{
			name: "identical",
			champion: func(t *testing.T) []servables.Tensor {
				return []servables.Tensor{f32(t, "p", []int64{4, 1}, scores...)}
			},
			shadow: func(t *testing.T) []servables.Tensor {
				return []servables.Tensor{f32(t, "p", []int64{4, 1}, scores...)}
			},
			want: []OutputDiff{{Name: "p", Rows: 4, Elements: 4, Within: 4, Score: true, Agree: 4}},
			mean: []float64{0},
		},
		{
			name: "shifted by 0.2",
			champion: func(t *testing.T) []servables.Tensor {
				return []servables.Tensor{f32(t, "p", []int64{4, 1}, scores...)}
			},
			shadow: func(t *testing.T) []servables.Tensor {
				return []servables.Tensor{f32(t, "p", []int64{4, 1}, shifted...)}
			},
			want: []OutputDiff{{Name: "p", Rows: 4, Elements: 4, Within: 0, Score: true, Agree: 3, MaxAbsDiff: 0.2}},
			mean: []float64{0.2},
		},
		{
			name: "one row of two values off: not within, no agreement figure",
			champion: func(t *testing.T) []servables.Tensor {
				return []servables.Tensor{f32(t, "v", []int64{2, 2}, 1, 2, 3, 4)}
			},
			shadow: func(t *testing.T) []servables.Tensor {
				return []servables.Tensor{f32(t, "v", []int64{2, 2}, 1, 2.005, 3, 4.5)}
			},
			want: []OutputDiff{{Name: "v", Rows: 2, Elements: 4, Within: 1, MaxAbsDiff: 0.5}},
			mean: []float64{0.505 / 4},
		},
		{
			name: "matched by name, not position",
			champion: func(t *testing.T) []servables.Tensor {
				return []servables.Tensor{f32(t, "a", []int64{1}, 1), f32(t, "b", []int64{1}, 5)}
			},
			shadow: func(t *testing.T) []servables.Tensor {
				return []servables.Tensor{f32(t, "b", []int64{1}, 5), f32(t, "a", []int64{1}, 1)}
			},
			want: []OutputDiff{{Name: "a", Rows: 1, Elements: 1, Within: 1, Score: true, Agree: 1}, {Name: "b", Rows: 1, Elements: 1, Within: 1, Score: true, Agree: 1}},
			mean: []float64{0, 0},
		},
		{
			name: "unnamed outputs matched by position",
			champion: func(t *testing.T) []servables.Tensor {
				return []servables.Tensor{f32(t, "", []int64{1}, 0.25)}
			},
			shadow: func(t *testing.T) []servables.Tensor {
				return []servables.Tensor{f32(t, "output_0", []int64{1}, 0.75)}
			},
			want: []OutputDiff{{Name: "output_0", Rows: 1, Elements: 1, Score: true, MaxAbsDiff: 0.5}},
			mean: []float64{0.5},
		},
		{
			name:     "shape mismatch",
			champion: func(t *testing.T) []servables.Tensor { return []servables.Tensor{f32(t, "p", []int64{2, 1}, 1, 2)} },
			shadow:   func(t *testing.T) []servables.Tensor { return []servables.Tensor{f32(t, "p", []int64{1, 2}, 1, 2)} },
			want:     []OutputDiff{{Name: "p", Mismatch: "shape [1 2], the champion's [2 1]"}},
			mean:     []float64{0},
		},
		{
			name:     "datatype mismatch",
			champion: func(t *testing.T) []servables.Tensor { return []servables.Tensor{f32(t, "p", []int64{1}, 1)} },
			shadow: func(t *testing.T) []servables.Tensor {
				x, _ := servables.NewTensor("p", servables.Float64, []int64{1})
				return []servables.Tensor{x}
			},
			want: []OutputDiff{{Name: "p", Mismatch: "datatype DOUBLE, the champion's FLOAT"}},
			mean: []float64{0},
		},
		{
			name: "output count mismatch: an unnamed match by position, the extra output counted",
			champion: func(t *testing.T) []servables.Tensor {
				return []servables.Tensor{f32(t, "a", []int64{1}, 1), f32(t, "b", []int64{1}, 1)}
			},
			shadow: func(t *testing.T) []servables.Tensor {
				return []servables.Tensor{f32(t, "a", []int64{1}, 1), f32(t, "c", []int64{1}, 1), f32(t, "d", []int64{1}, 1)}
			},
			want: []OutputDiff{{Name: "a", Rows: 1, Elements: 1, Within: 1, Score: true, Agree: 1}, {Name: "b", Rows: 1, Elements: 1, Within: 1, Score: true, Agree: 1},
				{Name: "d", Mismatch: "the champion has no such output"}},
			mean: []float64{0, 0, 0},
		},
		{
			name:     "NaN on one side: not within, left out of the mean",
			champion: func(t *testing.T) []servables.Tensor { return []servables.Tensor{f32(t, "p", []int64{2}, 1, 0.5)} },
			shadow: func(t *testing.T) []servables.Tensor {
				return []servables.Tensor{f32(t, "p", []int64{2}, float32(math.NaN()), 0.75)}
			},
			want: []OutputDiff{{Name: "p", Rows: 2, Elements: 2, NonFinite: 1, Score: true, Agree: 1, MaxAbsDiff: 0.25}},
			mean: []float64{0.25},
		},
		{
			name: "BYTES: equality only",
			champion: func(t *testing.T) []servables.Tensor {
				return []servables.Tensor{strs(t, "s", []int64{3}, "a", "b", "c")}
			},
			shadow: func(t *testing.T) []servables.Tensor {
				return []servables.Tensor{strs(t, "s", []int64{3}, "a", "x", "c")}
			},
			want: []OutputDiff{{Name: "s", Bytes: true, Rows: 3, Elements: 3, Equal: 2}},
			mean: []float64{0},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := diffOutputs(tc.champion(t), tc.shadow(t), tol)
			if len(got) != len(tc.want) {
				t.Fatalf("got %d diffs %+v, want %d", len(got), got, len(tc.want))
			}
			for i, w := range tc.want {
				g := got[i]
				if math.Abs(g.MaxAbsDiff-w.MaxAbsDiff) > 1e-6 {
					t.Errorf("output %d max %v, want %v", i, g.MaxAbsDiff, w.MaxAbsDiff)
				}
				if math.Abs(g.MeanAbsDiff()-tc.mean[i]) > 1e-6 {
					t.Errorf("output %d mean %v, want %v", i, g.MeanAbsDiff(), tc.mean[i])
				}
				g.MaxAbsDiff, g.SumAbsDiff, w.MaxAbsDiff, w.SumAbsDiff = 0, 0, 0, 0
				if g != w {
					t.Errorf("output %d\n got %+v\nwant %+v", i, g, w)
				}
			}
		})
	}
}

// exec is a compared execution of one single-score output named "p" whose
// values all differ by diff, with the given forward times.
func exec(rows int, diff float64, shadow, champion time.Duration) compared {
	d := OutputDiff{Name: "p", Rows: rows, Elements: rows, SumAbsDiff: diff * float64(rows), MaxAbsDiff: diff, Score: true, Agree: rows}
	if diff <= DefaultCompareTolerance {
		d.Within = rows
	}
	return compared{outputs: []OutputDiff{d}, shadow: shadow, champion: champion}
}

func TestCompareWindowsLastNEvictsTheOldest(t *testing.T) {
	w := newCompareWindows(3)
	now := time.Unix(10000, 0)
	for i, diff := range []float64{1, 0.5, 0.2, 0.2, 0.2} {
		w.record(7, now, true, exec(2, diff, time.Millisecond, time.Millisecond), now.Add(time.Duration(i)*time.Second))
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

func TestCompareWindowsRecentForgetsAfterFiveMinutes(t *testing.T) {
	w := newCompareWindows(100)
	t0 := time.Unix(30000, 0) // a slot boundary
	w.record(1, t0, true, exec(1, 0.3, 2*time.Millisecond, time.Millisecond), t0)
	w.record(1, t0, true, exec(1, 0.1, 2*time.Millisecond, time.Millisecond), t0.Add(4*time.Minute))
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
	w.record(1, t0, true, exec(1, 0.05, time.Millisecond, time.Millisecond), t0.Add(compareSlots*compareSlotSpan))
	if r := at(compareSlots * compareSlotSpan); r.Executions != 2 || math.Abs(r.MaxAbsDiff-0.1) > 1e-9 {
		t.Fatalf("after a slot cycle: %+v", r)
	}
}

func TestCompareWindowsResetOnANewContent(t *testing.T) {
	w := newCompareWindows(10)
	t0 := time.Unix(50000, 0)
	w.record(1, t0, true, exec(1, 0.4, time.Millisecond, time.Millisecond), t0)
	if got := w.comparison(1, t0); got.Executions != 1 || math.Abs(got.MeanAbsDiff-0.4) > 1e-9 {
		t.Fatalf("content 1: %+v", got)
	}
	if got := w.comparison(2, t0); got.Executions != 0 {
		t.Fatalf("content 2 before its first comparison: %+v, want zero", got)
	}
	t1 := t0.Add(time.Minute)
	w.record(2, t1, true, exec(1, 0, time.Millisecond, time.Millisecond), t1)
	// A straggler of the replaced content does not start them afresh again.
	w.record(1, t0, false, exec(1, 0.4, time.Millisecond, time.Millisecond), t1)
	st := w.stats(2, t1, 0.01, t1)
	if st.SinceStart.Executions != 1 || st.LastN.Executions != 1 || st.Last5m.Executions != 1 || st.SinceStart.MaxAbsDiff != 0 {
		t.Fatalf("after a new content: %+v", st)
	}
	if st.Since == nil || !st.Since.Equal(t1) {
		t.Errorf("since %v, want the new content's load time %v", st.Since, t1)
	}
}

func TestCompareWindowsErrorsLatencyAndGate(t *testing.T) {
	w := newCompareWindows(100)
	t0 := time.Unix(90000, 0)
	for i := range 100 {
		e := exec(1, 0.002, 3*time.Millisecond, time.Millisecond)
		switch {
		case i%10 == 0:
			e = compared{shadowFailed: true}
		case i%25 == 1:
			e = compared{championFailed: true}
		}
		w.record(3, t0, true, e, t0.Add(time.Duration(i)*time.Second))
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
	g := w.comparison(3, now)
	if g.Executions != 96 || g.Errors != 10 || math.Abs(g.MeanAbsDiff-0.002) > 1e-9 || math.Abs(g.P99Ratio-3) > 0.3 {
		t.Fatalf("gate comparison %+v", g)
	}
	// The p99 ratio is cached for a second, then worked out again: 6
	// minutes later the recent window is empty and the ratio unknown.
	w.record(3, t0, true, exec(1, 0.002, 30*time.Millisecond, time.Millisecond), now.Add(100*time.Millisecond))
	if got := w.comparison(3, now.Add(500*time.Millisecond)); got.P99Ratio != g.P99Ratio || got.Executions != 97 {
		t.Errorf("within a second: %+v, want the cached p99 ratio %v and the fresh count 97", got, g.P99Ratio)
	}
	if got := w.comparison(3, now.Add(6*time.Minute)); got.P99Ratio != 0 || got.Executions != 97 {
		t.Errorf("6 minutes later: %+v, want since-start figures and no p99 ratio", got)
	}
	// An output that could not be compared fails any bound.
	w.record(3, t0, true, compared{outputs: []OutputDiff{{Name: "p", Mismatch: "shape"}}}, now.Add(7*time.Minute))
	if got := w.comparison(3, now.Add(8*time.Minute)); got.MeanAbsDiff != math.MaxFloat64 {
		t.Errorf("after a mismatch the gate's mean diff is %v, want the largest float64", got.MeanAbsDiff)
	}
	if st := w.stats(3, t0, 0.01, now.Add(8*time.Minute)); st.SinceStart.Mismatches != 1 || !strings.Contains(st.SinceStart.Outputs[0].LastMismatch, "shape") {
		t.Errorf("mismatch not counted: %+v", st.SinceStart)
	}
}

func TestDiffOutputsMissingOutput(t *testing.T) {
	champion := []servables.Tensor{f32(t, "a", []int64{1}, 1), f32(t, "b", []int64{1}, 1)}
	got := diffOutputs(champion, []servables.Tensor{f32(t, "b", []int64{1}, 1)}, 0.01)
	if len(got) != 2 || got[0].Name != "a" || got[0].Mismatch != "the challenger has no such output" || got[1].Mismatch != "" {
		t.Fatalf("got %+v, want a missing and b compared", got)
	}
}

// A BYTES output has no absolute difference: the gate counts its share of
// unequal rows, so a challenger whose labels differ is not promoted on its
// numeric outputs alone.
func TestCompareWindowsGateCountsUnequalBytesRows(t *testing.T) {
	w := newCompareWindows(10)
	t0 := time.Unix(70000, 0)
	champion := []servables.Tensor{f32(t, "score", []int64{4, 1}, 0.1, 0.2, 0.3, 0.4), strs(t, "side", []int64{4, 1}, "friend", "foe", "foe", "friend")}
	shadow := []servables.Tensor{f32(t, "score", []int64{4, 1}, 0.1, 0.2, 0.3, 0.4), strs(t, "side", []int64{4, 1}, "foe", "friend", "foe", "friend")}
	w.record(1, t0, true, compared{shadow: time.Millisecond, champion: time.Millisecond, outputs: diffOutputs(champion, shadow, 0.01)}, t0)
	if got := w.comparison(1, t0); math.Abs(got.MeanAbsDiff-0.5) > 1e-9 {
		t.Errorf("gate mean diff %v, want 0.5: half the BYTES rows differ", got.MeanAbsDiff)
	}
	// Equal labels and equal numbers: no difference.
	w.record(2, t0, true, compared{shadow: time.Millisecond, champion: time.Millisecond, outputs: diffOutputs(champion, champion, 0.01)}, t0)
	if got := w.comparison(2, t0); got.MeanAbsDiff != 0 {
		t.Errorf("gate mean diff %v of equal answers, want 0", got.MeanAbsDiff)
	}
}

// The router reads the gate's comparison on every user request: it must
// not wait while a reader of the windows (the stats, a scrape) holds them
// to scan the last-N ring, which takes 70 ms at the largest
// shadow_compare_window.
func TestCompareWindowsGateDoesNotWaitForAScan(t *testing.T) {
	w := newCompareWindows(10)
	t0 := time.Unix(80000, 0)
	w.record(1, t0, true, exec(1, 0.25, 2*time.Millisecond, time.Millisecond), t0)
	first := w.comparison(1, t0)
	w.record(1, t0, true, exec(1, 0.25, 2*time.Millisecond, time.Millisecond), t0)
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

// The last-N ring keeps at most maxCompareOutputs outputs of an
// execution, as the windows' totals do: a model with very many outputs
// does not make it N times that big.
func TestCompareWindowsRingKeepsBoundedOutputs(t *testing.T) {
	w := newCompareWindows(10)
	t0 := time.Unix(60000, 0)
	e := compared{shadow: time.Millisecond, champion: time.Millisecond}
	for i := range 1000 {
		e.outputs = append(e.outputs, OutputDiff{Name: "o" + strconv.Itoa(i), Rows: 1, Elements: 1, Within: 1})
	}
	w.record(1, t0, true, e, t0)
	if n := cap(w.ring[0].outputs); n > maxCompareOutputs {
		t.Errorf("the ring holds %d outputs of one execution, want at most %d", n, maxCompareOutputs)
	}
	if st := w.stats(1, t0, 0.01, t0); len(st.SinceStart.Outputs) != maxCompareOutputs || len(st.LastN.Outputs) != maxCompareOutputs {
		t.Errorf("outputs in the windows: %d since start, %d last N; want %d", len(st.SinceStart.Outputs), len(st.LastN.Outputs), maxCompareOutputs)
	}
}
