package actors

import (
	"context"
	"encoding/json"
	"log/slog"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/groveml/grove/cluster/forward"
	"github.com/groveml/grove/servables"
)

// The ways one request reaches a model, measured in process at
// concurrency 1 (the b1c1 shape, which is latency-sensitive): a request
// through the router to a model here; a request another node forwarded
// here, served without the router (Predict, PredictAsync); and a request
// for a model ready only on another node, forwarded by its caller's
// goroutine (one request) or by the router (a batch of two). The other
// node is instantRemote, which answers at once: the figures are the
// engine's own cost, not a network's.

// instantRemote is another node that has "r/" ready and answers every
// forwarded request at once with the same answer.
type instantRemote struct{ answer forward.Answer }

func (instantRemote) Serves(path string) bool { return path == "r/" }
func (instantRemote) Paths() []string         { return []string{"r/"} }
func (instantRemote) Awaits(string) bool      { return false }
func (instantRemote) Want(string) bool        { return false }
func (r instantRemote) Forward(ctx context.Context, _ forward.Request) (forward.Answer, error) {
	return r.answer, ctx.Err()
}
func (instantRemote) Model(path string) (forward.ModelInfo, bool) {
	return forward.ModelInfo{Checksum: "remote"}, path == "r/"
}

// hopSystem starts a System serving "a/" (the echoing faulty model) with
// instantRemote as the rest of its cluster, and waits for it to be ready.
func hopSystem(b *testing.B) (*System, []servables.Tensor) {
	b.Helper()
	bk := newMemBucket()
	data, err := json.Marshal(faultySpec{})
	if err != nil {
		b.Fatal(err)
	}
	bk.set("a/model.faulty", data)
	bk.set("model_config.json", []byte(`{"model_metadata": [{"model_path": "a/"}]}`))
	x, err := servables.NewTensor("x", servables.Float32, []int64{1, 64})
	if err != nil {
		b.Fatal(err)
	}
	for i := range x.Float32s() {
		x.Float32s()[i] = float32(i) / 64
	}
	in := []servables.Tensor{x}
	sys := startReady(b, Options{Bucket: bk, ModelConfigPath: "model_config.json", PollInterval: time.Hour, CacheDir: b.TempDir(),
		MaxModelBytes: 1 << 20, QueueSize: 1024, Runtimes: servables.Registry{&countingRuntime{}},
		Remote: instantRemote{answer: forward.Answer{Checksum: "remote", Outputs: in}}})
	return sys, in
}

// startReady starts a System with o, quiet (a discarding logger, a
// registry of its own), stopped when the test ends, and waits up to a
// minute of real time for it to be ready.
func startReady(t testing.TB, o Options) *System {
	t.Helper()
	o.Logger, o.Registerer = slog.New(slog.DiscardHandler), prometheus.NewRegistry()
	sys, err := Start(o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = sys.Stop(context.Background()) })
	for deadline := time.Now().Add(time.Minute); !sys.Ready(); time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("not ready")
		}
	}
	return sys
}

// BenchmarkRequestHop measures one request, or one batch, on each way to
// a model: here through the router (local), served here for another node
// (served: Predict; served-async: PredictAsync), forwarded to another
// node by the caller's goroutine (forwarded) or by the router
// (forwarded-batch2: two requests, one forward call each).
func BenchmarkRequestHop(b *testing.B) {
	sys, in := hopSystem(b)
	ctx := context.Background()
	infer := func(b *testing.B, reqs []Request) {
		res, err := sys.Infer(ctx, reqs)
		if err != nil {
			b.Fatal(err)
		}
		for _, r := range res {
			if r.Err != nil || len(r.Outputs) != 1 {
				b.Fatalf("%+v", r)
			}
		}
	}
	served := forward.ForwardedRequest{Request: forward.Request{ModelPath: "a/", Inputs: in, RequestID: "r", Priority: forward.User, API: "bench"}, Peer: "n2"}
	b.Run("local", func(b *testing.B) {
		reqs := []Request{{API: "bench", ModelPath: "a/", Inputs: in}}
		b.ReportAllocs()
		for b.Loop() {
			infer(b, reqs)
		}
	})
	b.Run("served", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if a, err := sys.Predict(ctx, served); err != nil || len(a.Outputs) != 1 {
				b.Fatal(a, err)
			}
		}
	})
	b.Run("served-async", func(b *testing.B) {
		type outcome struct {
			a   forward.Answer
			err error
		}
		got := make(chan outcome, 1)
		done := func(a forward.Answer, err error) { got <- outcome{a, err} }
		b.ReportAllocs()
		for b.Loop() {
			sys.PredictAsync(ctx, served, done)
			if o := <-got; o.err != nil || len(o.a.Outputs) != 1 {
				b.Fatal(o.a, o.err)
			}
		}
	})
	b.Run("forwarded", func(b *testing.B) {
		reqs := []Request{{API: "bench", ModelPath: "r/", Inputs: in}}
		b.ReportAllocs()
		for b.Loop() {
			infer(b, reqs)
		}
	})
	b.Run("forwarded-batch2", func(b *testing.B) {
		reqs := []Request{{API: "bench", ModelPath: "r/", Inputs: in}, {API: "bench", ModelPath: "r/", Inputs: in}}
		b.ReportAllocs()
		for b.Loop() {
			infer(b, reqs)
		}
	})
}
