package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/groveml/grove/actors"
	"github.com/groveml/grove/api/ba"
	"github.com/groveml/grove/api/httpserver"
	"github.com/groveml/grove/conf/bucket/file"
)

// BenchmarkServeInference measures one whole POST /v1/inference through
// the HTTP handler, the router and model actors and libtorch (pctr_v1,
// batch 1 and 64), without the network: its allocs/op are the
// allocations per request of Grove's hot path.
func BenchmarkServeInference(b *testing.B) {
	dir := b.TempDir()
	model, err := os.ReadFile("../../examples/bucket/pctr_v1/model.pt")
	if err != nil {
		b.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Join(dir, "pctr_v1"), 0o755); err != nil {
		b.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "pctr_v1", "model.pt"), model, 0o644); err != nil {
		b.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "model_config.json"), []byte(`{"model_metadata":[{"model_path":"pctr_v1/"}]}`), 0o644); err != nil {
		b.Fatal(err)
	}
	bk, err := file.Open("file://" + dir)
	if err != nil {
		b.Fatal(err)
	}
	reg := prometheus.NewRegistry()
	log := slog.New(slog.DiscardHandler)
	sys, err := actors.Start(actors.Options{Bucket: bk, ModelConfigPath: "model_config.json", PollInterval: time.Hour,
		CacheDir: b.TempDir(), MaxBatchRows: 64, IntraOpThreads: 1, Runtimes: runtimes(""), ParseWarmUp: ba.ParseOptions{}.ParseWarmUp,
		Logger: log, Registerer: reg})
	if err != nil {
		b.Fatal(err)
	}
	defer sys.Stop(context.Background())
	for deadline := time.Now().Add(time.Minute); !sys.Ready() || len(sys.Status().Models) == 0 || sys.Status().Models[0].State != actors.StateReady; {
		if time.Now().After(deadline) {
			b.Fatalf("model not ready: %+v", sys.Status())
		}
		time.Sleep(10 * time.Millisecond)
	}
	api := httpserver.New(httpserver.Options{Logger: log, Registerer: reg})
	ba.Register(api, sys, ba.ParseOptions{})
	h := api.Handler()
	for _, rows := range []int{1, 64} {
		vals := make([]string, rows*64)
		for i := range vals {
			vals[i] = fmt.Sprintf(`"%g"`, float32(i%64)/64-0.5)
		}
		body := []byte(`{"request":[{"model_path":"pctr_v1/","tensors":[{"data_type":"FLOAT","tensor_shape":[` +
			fmt.Sprint(rows) + `,64],"tensor_content":[` + strings.Join(vals, ",") + `]}]}]}`)
		b.Run(fmt.Sprintf("batch=%d", rows), func(b *testing.B) {
			w := httptest.NewRecorder()
			serve := func() {
				w.Body.Reset()
				req := httptest.NewRequest(http.MethodPost, "/v1/inference", bytes.NewReader(body))
				h.ServeHTTP(w, req)
				if w.Code != http.StatusOK {
					b.Fatalf("HTTP %d: %s", w.Code, w.Body)
				}
			}
			for range 3 {
				serve() // TorchScript optimises on the second run
			}
			var resp struct {
				Response []struct {
					Tensors []json.RawMessage `json:"tensors"`
				} `json:"response"`
			}
			if err := json.Unmarshal(w.Body.Bytes(), &resp); err != nil || len(resp.Response) != 1 || len(resp.Response[0].Tensors) == 0 {
				b.Fatalf("answer %s: %v", w.Body, err)
			}
			b.SetBytes(int64(len(body)))
			b.ReportAllocs()
			b.ResetTimer()
			for b.Loop() {
				serve()
			}
		})
	}
}
