package quality

import (
	"math"
	"testing"

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
			got := DiffOutputs(tc.champion(t), tc.shadow(t), tol)
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

func TestDiffOutputsMissingOutput(t *testing.T) {
	champion := []servables.Tensor{f32(t, "a", []int64{1}, 1), f32(t, "b", []int64{1}, 1)}
	got := DiffOutputs(champion, []servables.Tensor{f32(t, "b", []int64{1}, 1)}, 0.01)
	if len(got) != 2 || got[0].Name != "a" || got[0].Mismatch != "the challenger has no such output" || got[1].Mismatch != "" {
		t.Fatalf("got %+v, want a missing and b compared", got)
	}
}

// A score that is NaN on one side is on neither side of 0.5: its row does
// not agree with the other's, whichever side that is on.
func TestANaNScoreNeverAgreesWithANumber(t *testing.T) {
	nan := float32(math.NaN())
	champion := []servables.Tensor{f32(t, "p", []int64{4}, 0.1, 0.9, nan, nan)}
	shadow := []servables.Tensor{f32(t, "p", []int64{4}, nan, nan, 0.1, nan)}
	got := DiffOutputs(champion, shadow, 0.01)
	if len(got) != 1 || !got[0].Score || got[0].Agree != 1 {
		t.Fatalf("got %+v, want 1 row agreeing (NaN and NaN, the same answer), none of a NaN and a number", got)
	}
}

// INT64 values beyond 2^53 (ids, nanosecond times) that differ differ by
// as much in the comparison: they are not rounded to the same float64 and
// counted equal.
func TestLargeInt64ValuesThatDifferAreNotCountedEqual(t *testing.T) {
	i64 := func(vals ...int64) []servables.Tensor {
		x, err := servables.NewTensor("id", servables.Int64, []int64{int64(len(vals)), 1})
		if err != nil {
			t.Fatal(err)
		}
		copy(x.Int64s(), vals)
		return []servables.Tensor{x}
	}
	const big = 1 << 53
	got := DiffOutputs(i64(big+1, math.MaxInt64, 5), i64(big, math.MinInt64, 5), 0.01)
	if len(got) != 1 || got[0].Within != 1 || got[0].MaxAbsDiff != math.Exp2(64) || got[0].NonFinite != 0 {
		t.Fatalf("got %+v, want 1 row within, the largest difference 2^64 and none left out", got)
	}
	if want := (1 + math.Exp2(64)) / 3; got[0].MeanAbsDiff() != want {
		t.Errorf("mean %v, want %v", got[0].MeanAbsDiff(), want)
	}
}
