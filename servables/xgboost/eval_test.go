package xgboost

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"math/rand/v2"
	"runtime"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/groveml/grove/servables"
)

// plainMargins evaluates the JSON model data the plain way, straight from
// its arrays: row by row, tree by tree, one node at a time, a missing
// value taking default_left. It sums in float32 in the trees' order, as
// Margins does, so the two must agree to the bit.
func plainMargins(t *testing.T, data []byte, f *Forest, x []float32, rows int) []float32 {
	t.Helper()
	var m jsonModel
	if err := json.Unmarshal(quoteNonFinite(data), &m); err != nil {
		t.Fatal(err)
	}
	b := m.Learner.GradientBooster
	var weights []f32
	if b.Name == "dart" {
		weights, b = b.WeightDrop, b.GBTree
	}
	nf, ng := f.NumFeature, f.NumGroup
	out := make([]float32, rows*ng)
	for r := range rows {
		row := x[r*nf : (r+1)*nf]
		for g := range ng {
			out[r*ng+g] = f.BaseMargin
		}
		for i, tr := range b.Model.Trees {
			n := int64(0)
			for tr.LeftChildren[n] != -1 {
				v := row[tr.SplitIndices[n]]
				switch {
				case math.IsNaN(float64(v)) && bool(tr.DefaultLeft[n]):
					n = tr.LeftChildren[n]
				case math.IsNaN(float64(v)):
					n = tr.RightChildren[n]
				case tr.SplitType != nil && tr.SplitType[n] == 1:
					if inCategories(tr, n, v) {
						n = tr.RightChildren[n]
					} else {
						n = tr.LeftChildren[n]
					}
				case v < float32(tr.SplitConditions[n]):
					n = tr.LeftChildren[n]
				default:
					n = tr.RightChildren[n]
				}
			}
			leaf := float32(tr.SplitConditions[n])
			if weights != nil {
				leaf *= float32(weights[i])
			}
			out[r*ng+int(b.Model.TreeInfo[i])] += leaf
		}
	}
	return out
}

// inCategories reports whether v is one of the categories of tree tr's
// categorical split n, as XGBoost 1.7 tells: the category v truncates to,
// none when v is negative or 2^24 or more.
func inCategories(tr jsonTree, n int64, v float32) bool {
	if !(v >= 0 && v < 1<<24) {
		return false
	}
	for k, nd := range tr.CategoriesNodes {
		if nd == n {
			seg, size := tr.CategoriesSegment[k], tr.CategoriesSizes[k]
			return slices.Contains(tr.Categories[seg:seg+size], int64(v))
		}
	}
	return false
}

// newModel is NewModel, failing t on an error.
func newModel(t testing.TB, f *Forest, opts servables.LoadOptions) *Model {
	t.Helper()
	m, err := NewModel(f, opts)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// edgyInput is rows rows for f: normal values, one in ten missing, one in
// five exactly a threshold some split of that feature has (which goes
// right), one in ten a category's code (0 to 15, a few with a fraction),
// and a few infinities.
func edgyInput(f *Forest, rows int) []float32 {
	thresholds := make([][]float32, f.NumFeature)
	for _, n := range f.nodes {
		if feat := n.feature &^ missingRight; int(feat) < f.NumFeature {
			thresholds[feat] = append(thresholds[feat], n.threshold)
		}
	}
	rng := rand.New(rand.NewPCG(30, 2))
	x := make([]float32, rows*f.NumFeature)
	for i := range x {
		ths := thresholds[i%f.NumFeature]
		switch k := rng.IntN(100); {
		case k < 10:
			x[i] = float32(math.NaN())
		case k < 30 && len(ths) > 0:
			x[i] = ths[rng.IntN(len(ths))]
		case k == 30:
			x[i] = float32(math.Inf(1))
		case k == 31:
			x[i] = float32(math.Inf(-1))
		case k < 42: // a category's code
			x[i] = float32(rng.IntN(16))
		case k == 42: // a code's truncation
			x[i] = float32(rng.IntN(16)) + 0.7
		default:
			x[i] = float32(rng.NormFloat64())
		}
	}
	return x
}

// randomModel is an XGBoost JSON model (tiny.json's learner) of trees
// random in shape: each node a leaf or a split with a probability, down
// to depth 9 at most, so that trees evaluated together differ in depth,
// from one-leaf trees up; nodes numbered depth first (the flattening is
// breadth first); classes classes (multi:softprob) or one
// (reg:squarederror).
func randomModel(t *testing.T, seed uint64, trees, features, classes int) []byte {
	t.Helper()
	rng := rand.New(rand.NewPCG(seed, 3))
	var m map[string]any
	if err := json.Unmarshal(readTestdata(t, "tiny.json"), &m); err != nil {
		t.Fatal(err)
	}
	learner := m["learner"].(map[string]any)
	delete(learner, "feature_names")
	param := learner["learner_model_param"].(map[string]any)
	param["num_feature"] = fmt.Sprint(features)
	if classes > 1 {
		param["num_class"] = fmt.Sprint(classes)
		learner["objective"] = map[string]any{"name": "multi:softprob"}
	}
	model := learner["gradient_booster"].(map[string]any)["model"].(map[string]any)
	model["gbtree_model_param"].(map[string]any)["num_trees"] = fmt.Sprint(trees)
	info := make([]int, trees)
	list := make([]map[string]any, trees)
	for i := range list {
		info[i] = i % classes
		var left, right, split []int
		var cond []float64
		var dleft []int
		var grow func(depth int) int
		grow = func(depth int) int {
			id := len(left)
			left, right = append(left, -1), append(right, -1)
			split, dleft = append(split, rng.IntN(features)), append(dleft, rng.IntN(2))
			cond = append(cond, math.Round(rng.NormFloat64()*100)/100)
			if depth < 9 && rng.IntN(10) < 7-depth/2 {
				l := grow(depth + 1)
				r := grow(depth + 1)
				left[id], right[id] = l, r
			}
			return id
		}
		grow(0)
		list[i] = map[string]any{
			"left_children": left, "right_children": right, "split_indices": split,
			"split_conditions": cond, "default_left": dleft,
			"tree_param": map[string]any{"num_nodes": fmt.Sprint(len(left)), "size_leaf_vector": "0"},
		}
	}
	model["tree_info"] = info
	model["trees"] = list
	data, err := json.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	return data
}

// TestMarginsEqualAPlainWalkOfTheFile: the flattened trees, walked eight
// rows or eight trees at a time and as deep as each tree goes, give every
// row of every batch size exactly the margins of the plain walk of the
// file's arrays, on the benchmark model, on every objective's (several
// classes, dart's weights) and on random trees of uneven depth, for FP32
// and FP64 inputs; inputs equal to a threshold, infinite or missing
// included.
func TestMarginsEqualAPlainWalkOfTheFile(t *testing.T) {
	models := map[string][]byte{
		"random":         randomModel(t, 1, 50, 7, 1),
		"random classes": randomModel(t, 2, 61, 4, 3),
	}
	for _, name := range append([]string{"bench_100x6"}, cases...) {
		models[name] = readTestdata(t, name+".json")
	}
	for name, data := range models {
		f, err := Parse(data)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		const most = 300
		x := edgyInput(f, most)
		want := plainMargins(t, data, f, x, most)
		x64 := make([]float64, len(x))
		for i, v := range x {
			x64[i] = float64(v)
		}
		for _, rows := range []int{0, 1, 3, 7, 8, 9, 16, 17, 63, 64, 65, 130, most} {
			nf, ng := f.NumFeature, f.NumGroup
			got := make([]float32, rows*ng)
			if err := f.Margins(x[:rows*nf], rows, got); err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(got, want[:rows*ng]) {
				t.Fatalf("%s, %d rows: margins differ from the plain walk's\n got %v\nwant %v", name, rows, got, want[:rows*ng])
			}
			if err := f.Margins64(x64[:rows*nf], rows, got); err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(got, want[:rows*ng]) {
				t.Fatalf("%s, %d FP64 rows: margins differ from the plain walk's", name, rows)
			}
		}
	}
}

// TestTreeDepthIsTheLongestPath: a tree's depth is the most steps from
// its root to a leaf, on trees flattened from the tiny model (one split)
// and from a one-leaf tree.
func TestTreeDepthIsTheLongestPath(t *testing.T) {
	f, err := Parse(readTestdata(t, "tiny.json"))
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(f.depth, []int32{1}) {
		t.Errorf("tiny.json: depths %v, want [1]", f.depth)
	}
	leaf := []node{{threshold: 0.5, feature: 3, left: 7}}
	if d := treeDepth(leaf, 7); d != 0 {
		t.Errorf("a one-leaf tree: depth %d, want 0", d)
	}
	// Root 10 with children 11 and 12; 12 has children 13 and 14, 14 has
	// children 15 and 16: depth 3 along the right.
	uneven := []node{
		{left: 11}, {left: 11}, {left: 13},
		{left: 13}, {left: 15}, {left: 15}, {left: 16},
	}
	if d := treeDepth(uneven, 10); d != 3 {
		t.Errorf("an uneven tree: depth %d, want 3", d)
	}
}

// TestMarginsAllocateNothing: evaluating rows allocates nothing, FP32 or
// FP64, whatever the batch size, one class or several, numeric splits or
// categorical ones.
func TestMarginsAllocateNothing(t *testing.T) {
	if raceEnabled {
		t.Skip("-race makes sync.Pool drop items: allocation counts mean nothing")
	}
	for _, name := range []string{"bench_100x6", "multi_softprob", "cat_multi_softprob"} {
		f, err := Parse(readTestdata(t, name+".json"))
		if err != nil {
			t.Fatal(err)
		}
		marginsAllocateNothing(t, name, f)
	}
}

func marginsAllocateNothing(t *testing.T, name string, f *Forest) {
	for _, rows := range []int{1, 16, 256} {
		x := benchInput(rows, f.NumFeature)
		x64 := make([]float64, len(x))
		for i, v := range x {
			x64[i] = float64(v)
		}
		margins := make([]float32, rows*f.NumGroup)
		pred := make([]float32, rows*f.PredictionWidth())
		allocs := testing.AllocsPerRun(20, func() {
			_ = f.Margins(x, rows, margins)
			_ = f.Margins64(x64, rows, margins)
			_ = f.Transform(margins, rows, pred)
		})
		if allocs != 0 {
			t.Errorf("%s, %d rows: %v allocations per call, want 0", name, rows, allocs)
		}
	}
}

// predictN runs Predict on rows rows of x as an FP32 or FP64 tensor and
// returns its outputs.
func predictN(m *Model, x []float32, rows int, dt servables.DType) ([]servables.Tensor, error) {
	nf := m.Forest().NumFeature
	in, err := servables.NewTensor(InputName, dt, []int64{int64(rows), int64(nf)})
	if err != nil {
		return nil, err
	}
	for i, v := range x[:rows*nf] {
		if dt == servables.Float32 {
			in.Float32s()[i] = v
		} else {
			in.Float64s()[i] = float64(v)
		}
	}
	return m.Predict(context.Background(), []servables.Tensor{in})
}

// TestPredictAllocatesOnlyItsOutputs: a Predict call allocates what it
// returns (two tensors, their shapes and data, the slice holding them)
// and nothing else: as much for 1 row as for 256, FP32 or FP64, with a
// missing_value or without, on one thread or split over three.
func TestPredictAllocatesOnlyItsOutputs(t *testing.T) {
	if raceEnabled {
		t.Skip("-race makes sync.Pool drop items: allocation counts mean nothing")
	}
	f, err := Parse(readTestdata(t, "bench_100x6.json"))
	if err != nil {
		t.Fatal(err)
	}
	sentinel := -999.0
	for _, opts := range []servables.LoadOptions{
		{}, {IntraOpThreads: 3}, {MissingValue: &sentinel}, {MissingValue: &sentinel, IntraOpThreads: 3},
	} {
		m := newModel(t, f, opts)
		defer m.Close()
		for _, rows := range []int{1, 256} {
			for _, dt := range []servables.DType{servables.Float32, servables.Float64} {
				in, err := servables.NewTensor(InputName, dt, []int64{int64(rows), int64(f.NumFeature)})
				if err != nil {
					t.Fatal(err)
				}
				inputs := []servables.Tensor{in}
				allocs := testing.AllocsPerRun(20, func() {
					if _, err := m.Predict(context.Background(), inputs); err != nil {
						t.Fatal(err)
					}
				})
				if allocs > 5 {
					t.Errorf("threads %d, missing_value %v, %d rows of %v: %v allocations per call, want at most 5",
						opts.IntraOpThreads, opts.MissingValue != nil, rows, dt, allocs)
				}
			}
		}
	}
}

// TestIntraOpThreadsGiveTheSameOutputs: with intra_op_threads 2 and 4 a
// model answers every batch size exactly as with 1 (every request of two
// rows or more split, whatever parallelMinSteps says), for FP32 and FP64,
// with several requests at once sharing the helpers, on numeric and
// categorical splits and with a missing_value; after Close no helper is
// left running.
func TestIntraOpThreadsGiveTheSameOutputs(t *testing.T) {
	before := runtime.NumGoroutine()
	for _, name := range []string{"bench_100x6", "multi_softprob", "cat_multi_softprob", "missing_sentinel"} {
		f, err := Parse(readTestdata(t, name+".json"))
		if err != nil {
			t.Fatal(err)
		}
		const most = 300
		x := edgyInput(f, most)
		var opts servables.LoadOptions
		if name == "missing_sentinel" {
			_, e := loadCase(t, name)
			opts = e.loadOptions()
		}
		if opts.MissingValue != nil {
			for i := 0; i < len(x); i += 7 {
				x[i] = float32(*opts.MissingValue)
			}
		}
		one := newModel(t, f, opts)
		batches := []int{1, 2, 7, 8, 13, 16, 17, 40, 64, 65, 129, 256, most}
		want := map[string][]servables.Tensor{}
		for _, rows := range batches {
			for _, dt := range []servables.DType{servables.Float32, servables.Float64} {
				out, err := predictN(one, x, rows, dt)
				if err != nil {
					t.Fatal(err)
				}
				want[fmt.Sprint(rows, dt)] = out
			}
		}
		for _, threads := range []int{2, 4} {
			opts.IntraOpThreads = threads
			m := newModel(t, f, opts)
			if m.workers == nil {
				t.Fatalf("%s, %d threads: no helpers", name, threads)
			}
			m.workers.minRows = 2 // split every request of 2 rows or more
			var wg sync.WaitGroup
			for range 3 {
				wg.Add(1)
				go func() {
					defer wg.Done()
					for _, rows := range batches {
						for _, dt := range []servables.DType{servables.Float32, servables.Float64} {
							got, err := predictN(m, x, rows, dt)
							if err != nil {
								t.Error(err)
								return
							}
							for k, w := range want[fmt.Sprint(rows, dt)] {
								if !slices.Equal(got[k].Float32s(), w.Float32s()) {
									t.Errorf("%s, %d threads, %d rows of %v: %s differs from one thread's", name, threads, rows, dt, w.Name)
								}
							}
						}
					}
				}()
			}
			wg.Wait()
			m.Close()
		}
	}
	deadline := time.Now().Add(5 * time.Second)
	for runtime.NumGoroutine() > before && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	if n := runtime.NumGoroutine(); n > before {
		t.Errorf("%d goroutines after Close, %d before", n, before)
	}
}

// TestSplitRowsFinishWithoutHelpers: a split request whose helpers have
// stopped (the model closed under it) is computed whole by its own
// goroutine.
func TestSplitRowsFinishWithoutHelpers(t *testing.T) {
	f, err := Parse(readTestdata(t, "bench_100x6.json"))
	if err != nil {
		t.Fatal(err)
	}
	w := newWorkers(f, 3)
	w.close()
	const rows = 100
	x := edgyInput(f, rows)
	want := make([]float32, rows)
	if err := f.Margins(x, rows, want); err != nil {
		t.Fatal(err)
	}
	got := make([]float32, rows)
	if err := w.margins(x, nil, rows, got, missing{}); err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(got, want) {
		t.Errorf("margins without helpers differ from one thread's")
	}
	if err := w.margins(x[:10], nil, rows, got, missing{}); err == nil {
		t.Error("margins of 100 rows on 10 rows of input: no error")
	}
}
