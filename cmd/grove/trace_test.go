package main

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.opentelemetry.io/otel/trace"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"

	"github.com/groveml/grove/actors"
	"github.com/groveml/grove/api/ba"
	"github.com/groveml/grove/conf"
	"github.com/groveml/grove/conf/bucket/file"
	"github.com/groveml/grove/logging"
	"github.com/groveml/grove/logging/kafkatest"
	"github.com/groveml/grove/servables/runtimes"
	"github.com/groveml/grove/tracing"
	"github.com/groveml/grove/tracing/tracingtest"
	"github.com/groveml/grove/transport/httpserver"
)

// startPCTR starts the actors serving examples' pctr_v1 (libtorch) from a
// file bucket, with pred as the prediction sink, and waits until it is
// ready.
func startPCTR(tb testing.TB, pred actors.PredictionSink) *actors.System {
	tb.Helper()
	return startPCTRWith(tb, pred, `{"model_path":"pctr_v1/"}`)
}

// startPCTRWith is startPCTR with entry as pctr_v1's model config entry.
func startPCTRWith(tb testing.TB, pred actors.PredictionSink, entry string) *actors.System {
	tb.Helper()
	dir := tb.TempDir()
	model, err := os.ReadFile("../../examples/bucket/pctr_v1/model.pt")
	if err != nil {
		tb.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Join(dir, "pctr_v1"), 0o755); err != nil {
		tb.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "pctr_v1", "model.pt"), model, 0o644); err != nil {
		tb.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "model_config.json"), []byte(`{"model_metadata":[`+entry+`]}`), 0o644); err != nil {
		tb.Fatal(err)
	}
	bk, err := file.Open("file://" + dir)
	if err != nil {
		tb.Fatal(err)
	}
	sys, err := actors.Start(actors.Options{Bucket: bk, ModelConfigPath: "model_config.json", PollInterval: time.Hour,
		CacheDir: tb.TempDir(), MaxBatchRows: 64, IntraOpThreads: 1, Runtimes: runtimesOf(runtimes.Libraries{}), ParseWarmUp: ba.ParseOptions{}.ParseWarmUp,
		Logger: slog.New(slog.DiscardHandler), Registerer: prometheus.NewRegistry(), Predictions: pred})
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { _ = sys.Stop(context.Background()) })
	for deadline := time.Now().Add(time.Minute); !sys.Ready() || len(sys.Status().Models) == 0 || sys.Status().Models[0].State != actors.StateReady; {
		if time.Now().After(deadline) {
			tb.Fatalf("model not ready: %+v", sys.Status())
		}
		time.Sleep(10 * time.Millisecond)
	}
	return sys
}

// pctrBody is a B&A request of rows rows for pctr_v1.
func pctrBody(rows int) []byte {
	vals := make([]string, rows*64)
	for i := range vals {
		vals[i] = fmt.Sprintf(`"%g"`, float32(i%64)/64-0.5)
	}
	return []byte(`{"request":[{"model_path":"pctr_v1/","tensors":[{"data_type":"FLOAT","tensor_shape":[` +
		fmt.Sprint(rows) + `,64],"tensor_content":[` + strings.Join(vals, ",") + `]}]}]}`)
}

// tracerFromEnv is the provider the OTEL_* variables in m give.
func tracerFromEnv(tb testing.TB, m map[string]string) trace.TracerProvider {
	tb.Helper()
	c, err := tracing.FromEnv(func(k string) string { return m[k] })
	if err != nil {
		tb.Fatal(err)
	}
	tp, err := tracing.New(context.Background(), c, "test")
	if err != nil || tp == nil {
		tb.Fatalf("tracer provider %v: %v", tp, err)
	}
	tb.Cleanup(func() { _ = tp.Shutdown(context.Background()) })
	return tp
}

// TestTraceOfOneRequest follows one B&A request through the HTTP handler,
// the router, a libtorch model and the prediction log on a Kafka broker:
// its spans reach an OTLP receiver as one tree continuing the caller's
// trace, and its prediction event carries the log span's traceparent.
func TestTraceOfOneRequest(t *testing.T) {
	emb, err := logging.StartEmbedded("127.0.0.1:0", "grove.predictions")
	if err != nil {
		t.Fatal(err)
	}
	defer emb.Close()
	kc := conf.DefaultServer().Kafka
	kc.Brokers, kc.Linger = []string{emb.Addr()}, time.Millisecond
	producer, err := logging.New(kc, logging.WithLogger(slog.New(slog.DiscardHandler)))
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = producer.Close(context.Background()) }()
	sys := startPCTR(t, &actors.PredictionLog{Producer: producer, Direct: logging.Policy{Level: logging.LevelFull}})

	rcv := tracingtest.GRPC(t)
	tp := tracerFromEnv(t, map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": rcv.Endpoint, "OTEL_EXPORTER_OTLP_PROTOCOL": "grpc"})
	api := httpserver.New(httpserver.Options{Logger: slog.New(slog.DiscardHandler), TracerProvider: tp})
	ba.Register(api, sys, ba.ParseOptions{})
	h := api.Handler()

	const caller, callerSpan = "0af7651916cd43dd8448eb211c80319c", "b7ad6b7169203331"
	req := httptest.NewRequest(http.MethodPost, "/v1/inference", bytes.NewReader(pctrBody(3)))
	req.Header.Set("traceparent", "00-"+caller+"-"+callerSpan+"-01")
	w := httptest.NewRecorder()
	h.ServeHTTP(w, req)
	if w.Code != http.StatusOK {
		t.Fatalf("HTTP %d: %s", w.Code, w.Body)
	}
	if err := tp.(interface{ ForceFlush(context.Context) error }).ForceFlush(context.Background()); err != nil {
		t.Fatal(err)
	}
	want := []string{"POST /v1/inference", tracing.SpanDecode, tracing.SpanQueue, tracing.SpanBatch, tracing.SpanEncode, tracing.SpanLog}
	spans := rcv.Wait(t, 10*time.Second, func(s []tracingtest.Span) bool { return len(s) >= len(want) })
	spans = tracingtest.Trace(spans, caller)
	if len(spans) != len(want) {
		t.Fatalf("want spans %v in the caller's trace, got:\n%s", want, tracingtest.Tree(spans))
	}
	one := func(name string) tracingtest.Span {
		s := tracingtest.Named(spans, name)
		if len(s) != 1 {
			t.Fatalf("%d spans %q:\n%s", len(s), name, tracingtest.Tree(spans))
		}
		return s[0]
	}
	srv := one("POST /v1/inference")
	if srv.ParentID != callerSpan || srv.Kind != tracepb.Span_SPAN_KIND_SERVER || srv.Attrs["grove.api"] != "inference" || srv.Attrs["http.response.status_code"] != "200" {
		t.Errorf("server span %+v", srv)
	}
	for _, name := range want[1:] {
		if s := one(name); s.ParentID != srv.SpanID || s.Start.Before(srv.Start) || s.End.After(srv.End) {
			t.Errorf("%s is not a child of the server span within it:\n%s", name, tracingtest.Tree(spans))
		}
	}
	q, b := one(tracing.SpanQueue), one(tracing.SpanBatch)
	if !q.End.Equal(b.Start) || !one(tracing.SpanDecode).End.Before(q.Start.Add(time.Millisecond)) || b.End.After(one(tracing.SpanEncode).Start) {
		t.Errorf("decode, queue, batch, encode are not in order:\n%s", tracingtest.Tree(spans))
	}
	for k, v := range map[string]string{"grove.model.path": "pctr_v1/", "grove.model.version": "pctr_v1/", "grove.batch.rows": "3",
		"grove.request.rows": "3", "grove.outcome": "ok"} {
		if b.Attrs[k] != v {
			t.Errorf("batch span %s = %q, want %q (%v)", k, b.Attrs[k], v, b.Attrs)
		}
	}
	if b.Attrs["grove.model.checksum"] == "" || q.Attrs["grove.model.path"] != "pctr_v1/" {
		t.Errorf("attributes: queue %v batch %v", q.Attrs, b.Attrs)
	}

	// The prediction event carries the log span's traceparent.
	recs := kafkatest.ReadExactly(t, emb.Addr(), "grove.predictions", 1, 10*time.Second)
	wantTP := "00-" + caller + "-" + one(tracing.SpanLog).SpanID + "-01"
	var got []string
	for _, h := range recs[0].Headers {
		if h.Key == logging.TraceHeader {
			got = append(got, string(h.Value))
		}
	}
	if len(got) != 1 || got[0] != wantTP {
		t.Errorf("event traceparent headers %q, want [%s]", got, wantTP)
	}
}

// TestTraceOfBatchedRequests sends three traced requests of 1, 2 and 3
// rows at once to a model that waits up to 200 ms to batch them: each
// request's batch span has its own rows and the rows of the forward call
// that ran it, and the requests that ran together share that call's
// times and its rows, the sum of theirs.
func TestTraceOfBatchedRequests(t *testing.T) {
	sys := startPCTRWith(t, nil, `{"model_path":"pctr_v1/","max_batch_rows":64,"max_queue_delay_us":200000}`)
	rcv := tracingtest.GRPC(t)
	tp := tracerFromEnv(t, map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": rcv.Endpoint, "OTEL_EXPORTER_OTLP_PROTOCOL": "grpc"})
	api := httpserver.New(httpserver.Options{Logger: slog.New(slog.DiscardHandler), TracerProvider: tp})
	ba.Register(api, sys, ba.ParseOptions{})
	h := api.Handler()
	var wg sync.WaitGroup
	for rows := 1; rows <= 3; rows++ {
		wg.Go(func() {
			req := httptest.NewRequest(http.MethodPost, "/v1/inference", bytes.NewReader(pctrBody(rows)))
			req.Header.Set("traceparent", fmt.Sprintf("00-%032x-00f067aa0ba902b7-01", rows))
			w := httptest.NewRecorder()
			h.ServeHTTP(w, req)
			if w.Code != http.StatusOK {
				t.Errorf("HTTP %d: %s", w.Code, w.Body)
			}
		})
	}
	wg.Wait()
	if err := tp.(interface{ ForceFlush(context.Context) error }).ForceFlush(context.Background()); err != nil {
		t.Fatal(err)
	}
	spans := rcv.Wait(t, 10*time.Second, func(s []tracingtest.Span) bool { return len(tracingtest.Named(s, tracing.SpanBatch)) == 3 })
	// The requests of one forward call have its start time (to within the
	// wall clock's slewing between their arrivals: nanoseconds; another
	// call starts after this one's forward time), and its rows, the sum
	// of theirs.
	var batches []tracingtest.Span
	batched := false
	for rows := 1; rows <= 3; rows++ {
		tr := tracingtest.Trace(spans, fmt.Sprintf("%032x", rows))
		b := tracingtest.Named(tr, tracing.SpanBatch)
		if len(b) != 1 || b[0].Attrs["grove.request.rows"] != fmt.Sprint(rows) {
			t.Fatalf("request of %d rows:\n%s", rows, tracingtest.Tree(tr))
		}
		batches = append(batches, b[0])
		batched = batched || b[0].Attrs["grove.batch.rows"] != fmt.Sprint(rows)
	}
	for _, s := range batches {
		sum := 0
		for _, o := range batches {
			if d := o.Start.Sub(s.Start); d > -5*time.Microsecond && d < 5*time.Microsecond {
				n, _ := strconv.Atoi(o.Attrs["grove.request.rows"])
				sum += n
			}
		}
		if s.Attrs["grove.batch.rows"] != fmt.Sprint(sum) {
			t.Errorf("batch span of a call of %d rows says %s:\n%s", sum, s.Attrs["grove.batch.rows"], tracingtest.Tree(spans))
		}
	}
	if !batched {
		t.Errorf("no request ran in a batch with another within 200 ms:\n%s", tracingtest.Tree(spans))
	}
}

// TestTracingOffKeepsEventsUntraced checks that without a tracer provider
// a request's prediction event has no traceparent header, even when the
// caller sent one.
func TestTracingOffKeepsEventsUntraced(t *testing.T) {
	var seen atomic.Int64
	sys := startPCTR(t, sinkFunc(func(req *actors.Request, _ *actors.Result, _ bool) {
		if req.TraceParent != "" {
			t.Errorf("request %s carries trace %s with tracing off", req.RequestID, req.TraceParent)
		}
		seen.Add(1)
	}))
	api := httpserver.New(httpserver.Options{Logger: slog.New(slog.DiscardHandler)})
	ba.Register(api, sys, ba.ParseOptions{})
	req := httptest.NewRequest(http.MethodPost, "/v1/inference", bytes.NewReader(pctrBody(1)))
	req.Header.Set("traceparent", "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01")
	w := httptest.NewRecorder()
	api.Handler().ServeHTTP(w, req)
	if w.Code != http.StatusOK || seen.Load() != 1 {
		t.Fatalf("HTTP %d, %d events: %s", w.Code, seen.Load(), w.Body)
	}
}

type sinkFunc func(req *actors.Request, res *actors.Result, served bool)

func (f sinkFunc) LogPrediction(req *actors.Request, res *actors.Result, served bool) {
	f(req, res, served)
}

// BenchmarkTracingOverhead measures B&A requests of one row from 32
// concurrent callers (b1c32) through the HTTP handler, the router and
// libtorch, with tracing off and at 1 % sampling
// (parentbased_traceidratio, exported over OTLP/HTTP to an endpoint in
// this process that reads and drops the data, as a collector on another
// host would cost this one nothing more), alternating the two in rounds
// (round=N/mode) so that a shared machine's noise falls on each alike;
// then once with every request sampled. Besides ns/op (wall time) it
// reports cpu-ns/op, the process's CPU time per request (getrusage),
// which other processes' load disturbs less.
func BenchmarkTracingOverhead(b *testing.B) {
	sys := startPCTR(b, nil)
	body := pctrBody(1)
	sink := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
	}))
	b.Cleanup(sink.Close) // after the providers shut down (cleanups run last first)
	handler := func(ratio string) http.Handler {
		opts := httpserver.Options{Logger: slog.New(slog.DiscardHandler)}
		if ratio != "" {
			opts.TracerProvider = tracerFromEnv(b, map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": sink.URL,
				"OTEL_TRACES_SAMPLER": "parentbased_traceidratio", "OTEL_TRACES_SAMPLER_ARG": ratio})
		}
		api := httpserver.New(opts)
		ba.Register(api, sys, ba.ParseOptions{})
		return api.Handler()
	}
	run := func(name string, h http.Handler) {
		b.Run(name, func(b *testing.B) {
			b.ReportAllocs()
			b.SetParallelism(16) // 32 callers on 2 cores
			cpu0 := cpuTime(b)
			b.RunParallel(func(pb *testing.PB) {
				w := httptest.NewRecorder()
				for pb.Next() {
					w.Body.Reset()
					h.ServeHTTP(w, httptest.NewRequest(http.MethodPost, "/v1/inference", bytes.NewReader(body)))
					if w.Code != http.StatusOK {
						b.Errorf("HTTP %d: %s", w.Code, w.Body)
						return
					}
				}
			})
			b.ReportMetric(float64(cpuTime(b)-cpu0)/float64(b.N), "cpu-ns/op")
		})
	}
	off, one := handler(""), handler("0.01")
	for round := range rounds {
		run(fmt.Sprintf("round=%d/off", round+1), off)
		run(fmt.Sprintf("round=%d/sampled=1%%", round+1), one)
	}
	run("sampled=100%", handler("1"))
}

// rounds is how many times BenchmarkTracingOverhead alternates its modes.
const rounds = 12

// cpuTime is the CPU time this process has used, user and system, in ns.
func cpuTime(tb testing.TB) int64 {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		tb.Fatal(err)
	}
	return ru.Utime.Nano() + ru.Stime.Nano()
}
