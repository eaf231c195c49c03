package actors

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/groveml/grove/servables"
)

// BenchmarkDemandLoad measures what Grove's own code spends on a demand
// load, with the faulty runtime (whose load costs next to nothing) in place
// of a real one: models on-demand models under a budget that holds a
// quarter of them, each iteration a request for the next one round robin,
// so each request is a miss that fetches, checks, loads and answers the
// model and unloads the least recently used one to make room.
func BenchmarkDemandLoad(b *testing.B) {
	for _, models := range []int{48, 1000} {
		b.Run(fmt.Sprintf("models=%d", models), func(b *testing.B) {
			bk := newMemBucket()
			var entries []string
			var size int
			for i := range models {
				data, err := json.Marshal(version(float64(i)))
				if err != nil {
					b.Fatal(err)
				}
				p := fmt.Sprintf("m%04d/", i)
				bk.set(p+"model.faulty", data)
				size = max(size, len(data))
				entries = append(entries, fmt.Sprintf(`{"model_path": %q, "load": "on_demand"}`, p))
			}
			bk.set("model_config.json", []byte(`{"model_metadata": [`+strings.Join(entries, ",")+`]}`))
			x, err := servables.NewTensor("x", servables.Float32, []int64{1, 1})
			if err != nil {
				b.Fatal(err)
			}
			rt := &countingRuntime{}
			sys := startReady(b, Options{Bucket: bk, ModelConfigPath: "model_config.json", PollInterval: time.Hour, CacheDir: b.TempDir(),
				MaxModelBytes: 1 << 20, QueueSize: 1024, Runtimes: servables.Registry{rt},
				MemoryBudget: int64(size * models / 4), MemoryFactor: 1, residentBytes: func() int64 { return 0 }})
			ctx := context.Background()
			i := 0
			request := func() {
				res, err := sys.Infer(ctx, []Request{{API: "bench", ModelPath: fmt.Sprintf("m%04d/", i%models), Inputs: []servables.Tensor{x}}})
				if err != nil || res[0].Err != nil {
					b.Fatal(err, res[0].Err)
				}
				i++
			}
			// Fill the budget first, so that every timed load unloads one.
			for range models/4 + 1 {
				request()
			}
			closed, first := rt.closed.Load(), i
			b.ReportAllocs()
			for b.Loop() {
				request()
			}
			if n, unloads := i-first, rt.closed.Load()-closed; unloads < int64(n/2) {
				b.Fatalf("%d loads unloaded %d models: the budget did not make room for each", n, unloads)
			}
		})
	}
}
