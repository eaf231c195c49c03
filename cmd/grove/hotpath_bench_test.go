package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/groveml/grove/api/ba"
	"github.com/groveml/grove/transport/httpserver"
)

// BenchmarkServeInference measures one whole POST /v1/inference through
// the HTTP handler, the router and model actors and libtorch (pctr_v1,
// batch 1 and 64), without the network: its allocs/op are the
// allocations per request of Grove's hot path.
func BenchmarkServeInference(b *testing.B) {
	sys := startPCTR(b, nil)
	log := slog.New(slog.DiscardHandler)
	reg := prometheus.NewRegistry()
	api := httpserver.New(httpserver.Options{Logger: log, Registerer: reg})
	ba.Register(api, sys, ba.ParseOptions{})
	h := api.Handler()
	for _, rows := range []int{1, 64} {
		body := pctrBody(rows)
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
