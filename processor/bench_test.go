package processor

import (
	"context"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"

	"github.com/groveml/grove/api/deeprec/deeprecpb"
	"github.com/groveml/grove/servables"
	"github.com/groveml/grove/servables/torch"
)

// BenchmarkProcessPCTR times Processor.Process (what the C process call
// runs after copying its input) on the benchmark model of make bench
// (examples/bucket/pctr_v1, one intra-op thread) against the in-process
// forward of the same model, at batch 1 and 64. The two alternate call by
// call, so both see the same machine load; p50-ns/process and
// p50-ns/forward are their medians and overhead-ns/p50 the difference:
// decoding the PredictRequest, the router and model actor, encoding the
// PredictResponse.
func BenchmarkProcessPCTR(b *testing.B) {
	model, err := os.ReadFile(filepath.Join("..", "examples", "bucket", "pctr_v1", "model.pt"))
	if err != nil {
		b.Fatal(err)
	}
	dir := filepath.Join(b.TempDir(), "pctr")
	if err := os.MkdirAll(filepath.Join(dir, "1"), 0o755); err != nil {
		b.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "1", "model.pt"), model, 0o644); err != nil {
		b.Fatal(err)
	}
	p, err := New(context.Background(), "", fmt.Appendf(nil, `{"checkpoint_dir": %q, "intra_op_parallelism_threads": 1}`, dir),
		Options{CacheDir: b.TempDir()})
	if err != nil {
		b.Fatal(err)
	}
	defer p.Close(context.Background())
	sv, err := torch.Runtime{}.Load(context.Background(), filepath.Join(dir, "1"), []string{"model.pt"}, servables.LoadOptions{IntraOpThreads: 1})
	if err != nil {
		b.Fatal(err)
	}
	defer sv.Close()
	for _, batch := range []int{1, 64} {
		b.Run(fmt.Sprintf("batch=%d", batch), func(b *testing.B) {
			vals := make([]float32, batch*64)
			for i := range vals {
				vals[i] = float32(math.Sin(float64(i)))
			}
			req, err := proto.Marshal(&deeprecpb.PredictRequest{Inputs: map[string]*deeprecpb.ArrayProto{"x": {
				Dtype: deeprecpb.ArrayDataType_DT_FLOAT, ArrayShape: &deeprecpb.ArrayShape{Dim: []int64{int64(batch), 64}}, FloatVal: vals}}})
			if err != nil {
				b.Fatal(err)
			}
			x, err := servables.NewTensor("x", servables.Float32, []int64{int64(batch), 64})
			if err != nil {
				b.Fatal(err)
			}
			copy(x.Float32s(), vals)
			ctx := context.Background()
			run := func() (process, forward time.Duration) {
				t0 := time.Now()
				if out, st := p.Process(ctx, 1, req); st != StatusOK {
					b.Fatalf("process: %d %s", st, out)
				}
				t1 := time.Now()
				if _, err := sv.Predict(ctx, []servables.Tensor{x}); err != nil {
					b.Fatal(err)
				}
				return t1.Sub(t0), time.Since(t1)
			}
			for range 20 {
				run()
			}
			var procs, fwds []time.Duration
			for b.Loop() {
				pr, fw := run()
				procs, fwds = append(procs, pr), append(fwds, fw)
			}
			slices.Sort(procs)
			slices.Sort(fwds)
			pp, fp := procs[len(procs)/2], fwds[len(fwds)/2]
			b.ReportMetric(float64(pp.Nanoseconds()), "p50-ns/process")
			b.ReportMetric(float64(fp.Nanoseconds()), "p50-ns/forward")
			b.ReportMetric(float64((pp - fp).Nanoseconds()), "overhead-ns/p50")
		})
	}
}
