package actors

import (
	"context"
	"encoding/json"
	"log/slog"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/groveml/grove/servables"
)

// BenchmarkScoreShadowedContract measures a user request through a
// contract whose champion answers and whose challenger gets a shadow copy
// of every request (compared with the champion's answer, since issue 16):
// the caller's latency and allocations, which shadow work must not raise.
func BenchmarkScoreShadowedContract(b *testing.B) {
	bk := newMemBucket()
	for path, n := range map[string]float64{"a/": 1, "b/": 2} {
		data, err := json.Marshal(version(n))
		if err != nil {
			b.Fatal(err)
		}
		bk.set(path+"model.faulty", data)
	}
	bk.set("model_config.json", []byte(`{"model_metadata": [{"model_path": "a/"}, {"model_path": "b/"}],
 "contracts": [{"organization": "ads", "project": "pctr", "contract_number": 1,
   "servables": [
     {"release_version": "v1", "model_path": "a/"},
     {"release_version": "v2", "model_path": "b/", "validity": [{"never_valid": {}}], "shadow": {}}]}]}`))
	sys, err := Start(Options{Bucket: bk, ModelConfigPath: "model_config.json", PollInterval: time.Hour, CacheDir: b.TempDir(),
		MaxModelBytes: 1 << 20, QueueSize: 1024, Runtimes: servables.Registry{&countingRuntime{}},
		Logger: slog.New(slog.DiscardHandler), Registerer: prometheus.NewRegistry()})
	if err != nil {
		b.Fatal(err)
	}
	defer func() { _ = sys.Stop(context.Background()) }()
	for deadline := time.Now().Add(time.Minute); !sys.Ready(); time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			b.Fatal("not ready")
		}
	}
	x, err := servables.NewTensor("x", servables.Float32, []int64{8, 4})
	if err != nil {
		b.Fatal(err)
	}
	for i := range x.Float32s() {
		x.Float32s()[i] = float32(i) / 32
	}
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		res, _, err := sys.Score(ctx, "ads/pctr/1", "", Request{API: "bench", RequestID: "r", Inputs: []servables.Tensor{x}})
		if err != nil || res.Err != nil {
			b.Fatal(err, res.Err)
		}
	}
}
