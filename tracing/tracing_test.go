package tracing_test

import (
	"context"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"go.opentelemetry.io/otel/propagation"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/metadata"

	"github.com/groveml/grove/tracing"
	"github.com/groveml/grove/tracing/tracingtest"
)

func env(m map[string]string) func(string) string { return func(k string) string { return m[k] } }

func TestFromEnv(t *testing.T) {
	for _, tc := range []struct {
		name     string
		env      map[string]string
		endpoint string // "" : off
		protocol string
		sampler  string
		err      string
	}{
		{name: "nothing set: off", env: nil},
		{name: "generic endpoint, default protocol http/protobuf appends /v1/traces",
			env: map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://c:4318"}, endpoint: "http://c:4318/v1/traces", protocol: "http/protobuf", sampler: "parentbased_always_on"},
		{name: "generic endpoint with a path",
			env: map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "https://c/otlp/"}, endpoint: "https://c/otlp/v1/traces", protocol: "http/protobuf", sampler: "parentbased_always_on"},
		{name: "traces endpoint is used as it is and wins",
			env: map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://a:4318", "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": "http://b:9/x"}, endpoint: "http://b:9/x", protocol: "http/protobuf", sampler: "parentbased_always_on"},
		{name: "grpc keeps the endpoint",
			env: map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://c:4317", "OTEL_EXPORTER_OTLP_PROTOCOL": "grpc"}, endpoint: "http://c:4317", protocol: "grpc", sampler: "parentbased_always_on"},
		{name: "traces protocol wins",
			env: map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://c:4317", "OTEL_EXPORTER_OTLP_PROTOCOL": "http/protobuf", "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL": "grpc"}, endpoint: "http://c:4317", protocol: "grpc", sampler: "parentbased_always_on"},
		{name: "1% parent-based sampling",
			env: map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://c:4318", "OTEL_TRACES_SAMPLER": "parentbased_traceidratio", "OTEL_TRACES_SAMPLER_ARG": "0.01"}, endpoint: "http://c:4318/v1/traces", protocol: "http/protobuf", sampler: "parentbased_traceidratio=0.01"},
		{name: "ratio without argument is 1",
			env: map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://c:4318", "OTEL_TRACES_SAMPLER": "traceidratio"}, endpoint: "http://c:4318/v1/traces", protocol: "http/protobuf", sampler: "traceidratio=1"},
		{name: "always_off", env: map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://c:4318", "OTEL_TRACES_SAMPLER": "always_off"}, endpoint: "http://c:4318/v1/traces", protocol: "http/protobuf", sampler: "always_off"},
		{name: "SDK disabled", env: map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://c:4318", "OTEL_SDK_DISABLED": "true"}},
		{name: "exporter none", env: map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://c:4318", "OTEL_TRACES_EXPORTER": "none"}},
		{name: "bad sampler", env: map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://c:4318", "OTEL_TRACES_SAMPLER": "jaeger_remote"}, err: "OTEL_TRACES_SAMPLER"},
		{name: "bad ratio", env: map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://c:4318", "OTEL_TRACES_SAMPLER": "traceidratio", "OTEL_TRACES_SAMPLER_ARG": "2"}, err: "OTEL_TRACES_SAMPLER_ARG"},
		{name: "bad protocol", env: map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://c:4318", "OTEL_EXPORTER_OTLP_PROTOCOL": "http/json"}, err: "OTEL_EXPORTER_OTLP_PROTOCOL"},
		{name: "bad endpoint", env: map[string]string{"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": "c:4318"}, err: "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"},
		{name: "bad exporter", env: map[string]string{"OTEL_TRACES_EXPORTER": "zipkin"}, err: "OTEL_TRACES_EXPORTER"},
		{name: "propagators default", env: map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://c:4318", "OTEL_PROPAGATORS": "tracecontext,baggage"}, endpoint: "http://c:4318/v1/traces", protocol: "http/protobuf", sampler: "parentbased_always_on"},
		{name: "propagators tracecontext", env: map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://c:4318", "OTEL_PROPAGATORS": " TraceContext "}, endpoint: "http://c:4318/v1/traces", protocol: "http/protobuf", sampler: "parentbased_always_on"},
		{name: "propagators b3", env: map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://c:4318", "OTEL_PROPAGATORS": "tracecontext,b3"}, err: "OTEL_PROPAGATORS"},
		{name: "propagators baggage only", env: map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://c:4318", "OTEL_PROPAGATORS": "baggage"}, err: "OTEL_PROPAGATORS"},
		{name: "propagators none", env: map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://c:4318", "OTEL_PROPAGATORS": "none"}, err: "OTEL_PROPAGATORS"},
		{name: "bad disabled", env: map[string]string{"OTEL_SDK_DISABLED": "yes please"}, err: "OTEL_SDK_DISABLED"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, err := tracing.FromEnv(env(tc.env))
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("error %v, want one naming %s", err, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if c.Endpoint != tc.endpoint || c.Enabled() != (tc.endpoint != "") {
				t.Fatalf("endpoint %q (enabled %v), want %q", c.Endpoint, c.Enabled(), tc.endpoint)
			}
			if tc.endpoint != "" && (c.Protocol != tc.protocol || c.SamplerName != tc.sampler || c.Sampler == nil) {
				t.Fatalf("protocol %q sampler %q, want %q %q", c.Protocol, c.SamplerName, tc.protocol, tc.sampler)
			}
			tp, err := tracing.New(context.Background(), c, "test")
			if err != nil || (tp == nil) != !c.Enabled() {
				t.Fatalf("New: %v, %v", tp, err)
			}
		})
	}
}

func TestTraceParentIsW3C(t *testing.T) {
	tid, _ := trace.TraceIDFromHex("4bf92f3577b34da6a3ce929d0e0e4736")
	sid, _ := trace.SpanIDFromHex("00f067aa0ba902b7")
	for _, flags := range []trace.TraceFlags{0, trace.FlagsSampled} {
		sc := trace.NewSpanContext(trace.SpanContextConfig{TraceID: tid, SpanID: sid, TraceFlags: flags})
		h := http.Header{}
		propagation.TraceContext{}.Inject(trace.ContextWithSpanContext(context.Background(), sc), propagation.HeaderCarrier(h))
		if got := tracing.TraceParent(sc); got != h.Get("traceparent") {
			t.Errorf("TraceParent %q, the SDK's propagator writes %q", got, h.Get("traceparent"))
		}
	}
	if got := tracing.TraceParent(trace.SpanContext{}); got != "" {
		t.Errorf("invalid span context gives %q", got)
	}
}

// TestOffCostsNoAllocation checks the path every request takes with
// tracing off: no provider, nothing recorded, nothing allocated.
func TestOffCostsNoAllocation(t *testing.T) {
	if tracing.NewHTTPServer(nil, "ba") != nil || tracing.UnaryServer(nil) != nil || tracing.StreamServer(nil) != nil {
		t.Fatal("a nil provider must give no server spans")
	}
	ctx := context.Background()
	allocs := testing.AllocsPerRun(1000, func() {
		c, span := tracing.Start(ctx, tracing.SpanDecode)
		tracing.End(span, nil)
		if tracing.Recording(c) {
			t.Fatal("recording")
		}
		tracing.Record(c, tracing.SpanQueue, time.Time{}, time.Time{}, nil)
		_, _ = tracing.Outgoing(c)
		_ = tracing.TraceParent(trace.SpanContextFromContext(c))
	})
	if allocs != 0 {
		t.Fatalf("%v allocations per request with tracing off", allocs)
	}
	// A caller's sampled traceparent, read while tracing is off here,
	// takes no spans either (Outgoing passes it on).
	caller := trace.NewSpanContext(trace.SpanContextConfig{TraceID: trace.TraceID{1}, SpanID: trace.SpanID{2},
		TraceFlags: trace.FlagsSampled, Remote: true})
	ctx = trace.ContextWithRemoteSpanContext(ctx, caller)
	allocs = testing.AllocsPerRun(1000, func() {
		c, span := tracing.Start(ctx, tracing.SpanDecode)
		tracing.End(span, nil)
		if tracing.Recording(c) {
			t.Fatal("recording under a caller's span context")
		}
		tracing.Record(c, tracing.SpanQueue, time.Time{}, time.Time{}, nil)
	})
	if allocs != 0 {
		t.Fatalf("%v allocations per span under a caller's span context with tracing off", allocs)
	}
}

// Work a request set off that starts after the request's span ended (a
// shadow copy the router sends once the answer is out) is still recorded
// as that span's child, and so is work timed elsewhere under it.
func TestASpanStartedAfterItsParentEndedIsItsChild(t *testing.T) {
	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
	defer func() { _ = tp.Shutdown(context.Background()) }()
	ctx, parent := tp.Tracer("test").Start(context.Background(), "request")
	parent.End()
	if !tracing.Recording(ctx) {
		t.Fatal("Recording is false under an ended span of a sampled trace")
	}
	cctx, child := tracing.Start(ctx, tracing.SpanShadow)
	tracing.Record(cctx, tracing.SpanQueue, time.Now(), time.Now(), nil)
	tracing.End(child, nil)
	got := map[string]trace.SpanID{}
	for _, s := range rec.Ended() {
		got[s.Name()] = s.Parent().SpanID()
	}
	if got[tracing.SpanShadow] != parent.SpanContext().SpanID() {
		t.Errorf("shadow span's parent %v, want the ended request span %v (ended spans: %v)", got[tracing.SpanShadow], parent.SpanContext().SpanID(), got)
	}
	if got[tracing.SpanQueue] != child.SpanContext().SpanID() {
		t.Errorf("queue span's parent %v, want the shadow span %v", got[tracing.SpanQueue], child.SpanContext().SpanID())
	}
}

const callerTrace, callerSpan = "4bf92f3577b34da6a3ce929d0e0e4736", "00f067aa0ba902b7"

// provider exports to a receiver of protocol p.
func provider(t testing.TB, p string, extra map[string]string) (*tracing.Provider, *tracingtest.Receiver) {
	t.Helper()
	var r *tracingtest.Receiver
	if p == "grpc" {
		r = tracingtest.GRPC(t)
	} else {
		r = tracingtest.HTTP(t)
	}
	m := map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": r.Endpoint, "OTEL_EXPORTER_OTLP_PROTOCOL": p}
	for k, v := range extra {
		m[k] = v
	}
	c, err := tracing.FromEnv(env(m))
	if err != nil {
		t.Fatal(err)
	}
	tp, err := tracing.New(context.Background(), c, "test")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = tp.Shutdown(context.Background()) })
	return tp, r
}

func TestHTTPServerSpanContinuesTheCallersTrace(t *testing.T) {
	for _, p := range []string{"grpc", "http/protobuf"} {
		t.Run(p, func(t *testing.T) {
			tp, r := provider(t, p, nil)
			hs := tracing.NewHTTPServer(tp, "ba")
			mux := http.NewServeMux()
			mux.HandleFunc("POST /v1/inference", func(w http.ResponseWriter, r *http.Request) {
				r, span := hs.Start(r)
				_, d := tracing.Start(r.Context(), tracing.SpanDecode)
				d.End()
				w.WriteHeader(http.StatusTeapot)
				tracing.EndHTTP(span, http.StatusTeapot)
			})
			req := httptest.NewRequest("POST", "/v1/inference", nil)
			req.Header.Set("traceparent", "00-"+callerTrace+"-"+callerSpan+"-01")
			req.Header.Set("X-Request-Id", "rid-1")
			mux.ServeHTTP(httptest.NewRecorder(), req)
			if err := tp.ForceFlush(context.Background()); err != nil {
				t.Fatal(err)
			}
			spans := r.Wait(t, 10*time.Second, func(s []tracingtest.Span) bool { return len(s) == 2 })
			srv, dec := tracingtest.Named(spans, "POST /v1/inference"), tracingtest.Named(spans, "decode")
			if len(srv) != 1 || len(dec) != 1 {
				t.Fatalf("spans:\n%s", tracingtest.Tree(spans))
			}
			s := srv[0]
			if s.TraceID != callerTrace || s.ParentID != callerSpan || s.Kind != tracepb.Span_SPAN_KIND_SERVER || s.Service != "grove" {
				t.Errorf("server span does not continue the caller's trace:\n%s", tracingtest.Tree(spans))
			}
			if s.Attrs["http.route"] != "/v1/inference" || s.Attrs["http.response.status_code"] != "418" || s.Attrs["grove.api"] != "ba" ||
				s.Attrs["grove.request_id"] != "rid-1" || s.Attrs["http.request.method"] != "POST" {
				t.Errorf("server span attributes %v", s.Attrs)
			}
			if dec[0].ParentID != s.SpanID || dec[0].TraceID != callerTrace {
				t.Errorf("decode is not the server span's child:\n%s", tracingtest.Tree(spans))
			}
		})
	}
}

func TestGRPCServerSpanContinuesTheCallersTrace(t *testing.T) {
	tp, r := provider(t, "grpc", nil)
	gs := grpc.NewServer(grpc.ChainUnaryInterceptor(tracing.UnaryServer(tp)))
	healthpb.RegisterHealthServer(gs, health.NewServer())
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go func() { _ = gs.Serve(ln) }()
	defer gs.Stop()
	cc, err := grpc.NewClient(ln.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer cc.Close()
	ctx := metadata.AppendToOutgoingContext(context.Background(), "traceparent", "00-"+callerTrace+"-"+callerSpan+"-01")
	if _, err := healthpb.NewHealthClient(cc).Check(ctx, &healthpb.HealthCheckRequest{Service: "nope"}); err == nil {
		t.Fatal("unknown service answered")
	}
	if err := tp.ForceFlush(context.Background()); err != nil {
		t.Fatal(err)
	}
	spans := r.Wait(t, 10*time.Second, func(s []tracingtest.Span) bool { return len(s) == 1 })
	s := spans[0]
	if s.Name != "grpc.health.v1.Health/Check" || s.TraceID != callerTrace || s.ParentID != callerSpan || s.Kind != tracepb.Span_SPAN_KIND_SERVER ||
		s.Attrs["rpc.response.status_code"] != "NotFound" || !s.Error || s.Attrs["rpc.method"] != "grpc.health.v1.Health/Check" {
		t.Fatalf("span:\n%s", tracingtest.Tree(spans))
	}
}

// TestUnsampledCallerIsNotRecorded checks the parent-based sampler: a
// caller that did not sample its trace gets no spans here, and its
// traceparent still goes on (not sampled) to the next node.
func TestUnsampledCallerIsNotRecorded(t *testing.T) {
	tp, r := provider(t, "http/protobuf", nil)
	hs := tracing.NewHTTPServer(tp, "ba")
	var out string
	mux := http.NewServeMux()
	mux.HandleFunc("POST /x", func(w http.ResponseWriter, r *http.Request) {
		r, span := hs.Start(r)
		if tracing.Recording(r.Context()) {
			t.Error("recording a trace the caller did not sample")
		}
		out, _ = tracing.Outgoing(r.Context())
		tracing.EndHTTP(span, 200)
	})
	req := httptest.NewRequest("POST", "/x", nil)
	req.Header.Set("traceparent", "00-"+callerTrace+"-"+callerSpan+"-00")
	mux.ServeHTTP(httptest.NewRecorder(), req)
	if !strings.HasPrefix(out, "00-"+callerTrace+"-") || !strings.HasSuffix(out, "-00") {
		t.Errorf("traceparent handed on %q", out)
	}
	if err := tp.ForceFlush(context.Background()); err != nil {
		t.Fatal(err)
	}
	if n := len(r.Spans()); n != 0 {
		t.Errorf("%d spans exported", n)
	}
}

// BenchmarkServerSpan is the tracing work of one HTTP request that is not
// sampled (a 1 % ratio's usual case: a root span the sampler drops), next
// to the same request with tracing off, to set against a request's whole
// cost (cmd/grove's BenchmarkTracingOverhead).
func BenchmarkServerSpan(b *testing.B) {
	tp, _ := provider(b, "http/protobuf", map[string]string{"OTEL_TRACES_SAMPLER": "parentbased_traceidratio", "OTEL_TRACES_SAMPLER_ARG": "0"})
	mux := http.NewServeMux()
	var hs *tracing.HTTPServer
	mux.HandleFunc("POST /v1/inference", func(w http.ResponseWriter, r *http.Request) {
		if hs != nil {
			var span trace.Span
			r, span = hs.Start(r)
			defer tracing.EndHTTP(span, 200)
		}
		_, d := tracing.Start(r.Context(), tracing.SpanDecode)
		d.End()
	})
	req := httptest.NewRequest("POST", "/v1/inference", nil)
	w := httptest.NewRecorder()
	for _, m := range []struct {
		name string
		hs   *tracing.HTTPServer
	}{{"off", nil}, {"unsampled", tracing.NewHTTPServer(tp, "ba")}} {
		b.Run(m.name, func(b *testing.B) {
			hs = m.hs
			b.ReportAllocs()
			for b.Loop() {
				mux.ServeHTTP(w, req)
			}
		})
	}
}

// FuzzTraceContext sends any traceparent and tracestate a caller may: the
// server span either continues a valid one (same trace id, the caller's
// span as parent, its sampling kept) or starts a trace of its own, never
// panics, and hands on a well-formed traceparent.
func FuzzTraceContext(f *testing.F) {
	f.Add("00-"+callerTrace+"-"+callerSpan+"-01", "")
	f.Add("00-"+callerTrace+"-"+callerSpan+"-00", "vendor=x,other=y")
	f.Add("ff-"+callerTrace+"-"+callerSpan+"-01", "")
	f.Add("00-00000000000000000000000000000000-"+callerSpan+"-01", "=")
	f.Add("01-"+callerTrace+"-"+callerSpan+"-09-extra", "a=b")
	f.Add("garbage", "")
	tp := sdktrace.NewTracerProvider(sdktrace.WithSampler(sdktrace.ParentBased(sdktrace.NeverSample())))
	hs := tracing.NewHTTPServer(tp, "ba")
	f.Fuzz(func(t *testing.T, parent, state string) {
		req := httptest.NewRequest("POST", "/x", nil)
		req.Header.Set("traceparent", parent)
		if state != "" {
			req.Header.Set("tracestate", state)
		}
		r, span := hs.Start(req)
		defer tracing.EndHTTP(span, 200)
		sc := trace.SpanContextFromContext(r.Context())
		caller := trace.SpanContextFromContext(propagation.TraceContext{}.Extract(context.Background(), propagation.HeaderCarrier(req.Header)))
		if caller.IsValid() && (sc.TraceID() != caller.TraceID() || sc.IsSampled() != caller.IsSampled()) {
			t.Fatalf("caller %v: span %v", caller, sc)
		}
		if span.IsRecording() != (caller.IsValid() && caller.IsSampled()) {
			t.Fatalf("recording %v for caller %v", span.IsRecording(), caller)
		}
		tp := tracing.TraceParent(sc)
		if sc.IsValid() != (tp != "") || (tp != "" && len(tp) != 55) {
			t.Fatalf("traceparent %q of %v", tp, sc)
		}
	})
}

// TestNewTracesDrawnBeforeTheSDK checks the share of new traces
// (requests without a traceparent) that start, drawn at the server's
// entry before the SDK is asked: a request left out keeps its own request
// and context and allocates nothing; a caller's sampled trace is
// continued whatever the share; and a share of one half starts about
// half of them.
func TestNewTracesDrawnBeforeTheSDK(t *testing.T) {
	ratio := func(r string) *tracing.Provider {
		tp, _ := provider(t, "http/protobuf", map[string]string{"OTEL_TRACES_SAMPLER": "parentbased_traceidratio", "OTEL_TRACES_SAMPLER_ARG": r})
		return tp
	}
	none := tracing.NewHTTPServer(ratio("0"), "ba")
	req := httptest.NewRequest("POST", "/v1/inference", nil)
	r, span := none.Start(req)
	if r != req || span.IsRecording() || trace.SpanContextFromContext(r.Context()).IsValid() {
		t.Fatalf("a new trace left out: request copied %v, recording %v, span context %v", r != req, span.IsRecording(), trace.SpanContextFromContext(r.Context()))
	}
	if n := testing.AllocsPerRun(100, func() {
		_, span := none.Start(req)
		tracing.EndHTTP(span, 200)
	}); n != 0 {
		t.Errorf("a new trace left out allocates %v times", n)
	}
	called := httptest.NewRequest("POST", "/v1/inference", nil)
	called.Header.Set("traceparent", "00-"+callerTrace+"-"+callerSpan+"-01")
	r, span = none.Start(called)
	if !span.IsRecording() || trace.SpanContextFromContext(r.Context()).TraceID().String() != callerTrace {
		t.Errorf("a caller's sampled trace at share 0: recording %v, context %v", span.IsRecording(), trace.SpanContextFromContext(r.Context()))
	}
	tracing.EndHTTP(span, 200)

	half := tracing.NewHTTPServer(ratio("0.5"), "ba")
	started := 0
	const n = 2000
	for range n {
		_, span := half.Start(req)
		if span.IsRecording() {
			started++
		}
		tracing.EndHTTP(span, 200)
	}
	if started < n*4/10 || started > n*6/10 {
		t.Errorf("share 0.5 started %d of %d new traces", started, n)
	}

	// gRPC: the same draw, a caller's trace continued.
	var recorded []bool
	inter := tracing.UnaryServer(ratio("0"))
	handler := func(ctx context.Context, _ any) (any, error) {
		recorded = append(recorded, trace.SpanFromContext(ctx).IsRecording())
		return nil, nil
	}
	info := &grpc.UnaryServerInfo{FullMethod: "/grpc.health.v1.Health/Check"}
	_, _ = inter(context.Background(), nil, info, handler)
	_, _ = inter(metadata.NewIncomingContext(context.Background(), metadata.Pairs("traceparent", "00-"+callerTrace+"-"+callerSpan+"-01")), nil, info, handler)
	if len(recorded) != 2 || recorded[0] || !recorded[1] {
		t.Errorf("gRPC at share 0: recorded %v, want a new trace left out and the caller's continued", recorded)
	}
}

// TestMalformedTraceParentIsDrawnAsANewTrace checks that a traceparent
// that does not parse (W3C: ignored, as if none were sent) starts a new
// trace only if the share of new traces draws it, over HTTP, gRPC and the
// cluster's framed calls: at share 0 nothing records.
func TestMalformedTraceParentIsDrawnAsANewTrace(t *testing.T) {
	tp, _ := provider(t, "http/protobuf", map[string]string{"OTEL_TRACES_SAMPLER": "parentbased_traceidratio", "OTEL_TRACES_SAMPLER_ARG": "0"})
	for _, bad := range []string{"garbage", "", "00-00000000000000000000000000000000-" + callerSpan + "-01", "00-" + callerTrace + "-0000000000000000-01"} {
		req := httptest.NewRequest("POST", "/v1/inference", nil)
		req.Header["Traceparent"] = []string{bad}
		r, span := tracing.NewHTTPServer(tp, "ba").Start(req)
		if span.IsRecording() || trace.SpanContextFromContext(r.Context()).IsValid() {
			t.Errorf("HTTP traceparent %q at share 0: recording %v, span context %v", bad, span.IsRecording(), trace.SpanContextFromContext(r.Context()))
		}
		tracing.EndHTTP(span, 200)

		var recorded bool
		handler := func(ctx context.Context, _ any) (any, error) {
			recorded = trace.SpanFromContext(ctx).IsRecording()
			return nil, nil
		}
		ctx := metadata.NewIncomingContext(context.Background(), metadata.Pairs("traceparent", bad))
		_, _ = tracing.UnaryServer(tp)(ctx, nil, &grpc.UnaryServerInfo{FullMethod: "/grpc.health.v1.Health/Check"}, handler)
		if recorded {
			t.Errorf("gRPC traceparent %q at share 0: recorded", bad)
		}

		if bad == "" {
			continue // no traceparent at all for a framed call
		}
		_, span = tracing.NewCallServer(tp).Start(context.Background(), "/grove.cluster.v1.Forward/Predict", bad, "", "")
		if span.IsRecording() {
			t.Errorf("framed call traceparent %q at share 0: recorded", bad)
		}
		tracing.EndCall(span, nil)
	}
}

// TestRequestIDAttributeIsBounded checks that the caller's request id is
// recorded on the server span only as far as Grove takes it (up to 128
// bytes; a longer one is replaced by an id of Grove's): a caller cannot
// put an attribute of any size it likes on every span it sends.
func TestRequestIDAttributeIsBounded(t *testing.T) {
	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
	long, ok := strings.Repeat("x", 64<<10), strings.Repeat("y", 128)
	for _, id := range []string{long, ok} {
		req := httptest.NewRequest("POST", "/v1/inference", nil)
		req.Header.Set("X-Request-Id", id)
		_, span := tracing.NewHTTPServer(tp, "ba").Start(req)
		tracing.EndHTTP(span, 200)
		ctx := metadata.NewIncomingContext(context.Background(), metadata.Pairs("x-request-id", id))
		_, _ = tracing.UnaryServer(tp)(ctx, nil, &grpc.UnaryServerInfo{FullMethod: "/grpc.health.v1.Health/Check"},
			func(context.Context, any) (any, error) { return nil, nil })
	}
	spans := rec.Ended()
	if len(spans) != 4 {
		t.Fatalf("%d spans", len(spans))
	}
	for i, s := range spans {
		var got string
		for _, a := range s.Attributes() {
			if a.Key == tracing.AttrRequestID {
				got = a.Value.AsString()
			}
		}
		if want := map[bool]string{true: "", false: ok}[i < 2]; got != want {
			t.Errorf("span %s (%d): grove.request_id of %d bytes, want %d", s.Name(), i, len(got), len(want))
		}
	}
}
