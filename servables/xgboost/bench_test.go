package xgboost

import (
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/groveml/grove/servables"
)

// benchRows is how many distinct rows the benchmarks cycle through: each
// call gets the next rows, so that the CPU's branch predictor cannot learn
// one input's paths through the trees (with one row repeated, batch 1
// measures about four times faster than it serves varied requests).
const benchRows = 4096

// benchInput is rows rows of nf features, normal values with one in ten
// missing, the same on every run.
func benchInput(rows, nf int) []float32 {
	rng := rand.New(rand.NewPCG(30, 1))
	x := make([]float32, rows*nf)
	for i := range x {
		if rng.IntN(10) == 0 {
			x[i] = float32(math.NaN())
		} else {
			x[i] = float32(rng.NormFloat64())
		}
	}
	return x
}

func benchForest(b *testing.B) *Forest {
	f, err := Parse(readTestdata(b, "bench_100x6.json"))
	if err != nil {
		b.Fatal(err)
	}
	return f
}

// BenchmarkPredict: one Predict call of the servable (outputs allocated,
// as a request gets them) on testdata/bench_100x6.json
// (make_bench_models.py: binary:logistic, 100 trees of depth 6 over 100
// features), on one thread, at batch 1, 16 and 256, each call on rows it
// has not had just before.
func BenchmarkPredict(b *testing.B) {
	benchPredict(b, newModel(b, benchForest(b), servables.LoadOptions{}), []int{1, 16, 256})
}

// BenchmarkPredictIntraOpThreads: BenchmarkPredict with intra_op_threads
// 1 and 2, at the batch sizes around the point where splitting the rows
// starts to pay (parallelMinSteps).
func BenchmarkPredictIntraOpThreads(b *testing.B) {
	f := benchForest(b)
	for _, threads := range []int{1, 2} {
		b.Run(fmt.Sprintf("threads=%d", threads), func(b *testing.B) {
			m := newModel(b, f, servables.LoadOptions{IntraOpThreads: threads})
			defer m.Close()
			benchPredict(b, m, []int{4, 8, 16, 32, 64, 256})
		})
	}
}

func benchPredict(b *testing.B, m *Model, batches []int) {
	f := m.Forest()
	x := benchInput(benchRows, f.NumFeature)
	for _, rows := range batches {
		b.Run(fmt.Sprintf("batch=%d", rows), func(b *testing.B) {
			var calls [][]servables.Tensor
			for r := 0; r+rows <= benchRows; r += rows {
				in, err := servables.NewTensor(InputName, servables.Float32, []int64{int64(rows), int64(f.NumFeature)})
				if err != nil {
					b.Fatal(err)
				}
				copy(in.Float32s(), x[r*f.NumFeature:])
				calls = append(calls, []servables.Tensor{in})
			}
			ctx := context.Background()
			b.ReportAllocs()
			k := 0
			for b.Loop() {
				if _, err := m.Predict(ctx, calls[k]); err != nil {
					b.Fatal(err)
				}
				k = (k + 1) % len(calls)
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/float64(rows), "ns/row")
		})
	}
}

// BenchmarkMargins: the trees alone (Forest.Margins into a buffer reused
// across calls), same model, batches and rows as BenchmarkPredict.
func BenchmarkMargins(b *testing.B) {
	f := benchForest(b)
	x := benchInput(benchRows, f.NumFeature)
	for _, rows := range []int{1, 16, 256} {
		b.Run(fmt.Sprintf("batch=%d", rows), func(b *testing.B) {
			out := make([]float32, rows*f.NumGroup)
			n := benchRows / rows
			b.ReportAllocs()
			k := 0
			for b.Loop() {
				in := x[k*rows*f.NumFeature : (k+1)*rows*f.NumFeature]
				if err := f.Margins(in, rows, out); err != nil {
					b.Fatal(err)
				}
				k = (k + 1) % n
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/float64(rows), "ns/row")
		})
	}
}
