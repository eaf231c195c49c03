package actors

import (
	"context"
	"sync"
	"testing"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/groveml/grove/tracing"
)

// traceSink keeps the traceparent of each request the router logs.
type traceSink struct {
	mu     sync.Mutex
	parent []string
	done   chan struct{}
}

func (s *traceSink) LogPrediction(req *Request, _ *Result, _ bool) {
	s.mu.Lock()
	s.parent = append(s.parent, req.TraceParent)
	s.mu.Unlock()
	s.done <- struct{}{}
}

// shadowOnce sends one 7-row request for m/, shadowed on s/ in
// micro-batches of 3 rows, with ctx, and returns the traceparent its
// shadow execution's log event carries.
func shadowOnce(t *testing.T, ctx context.Context) string {
	t.Helper()
	sink := &traceSink{done: make(chan struct{}, 4)}
	as, router, _ := startShadowed(t, 3, sink)
	b := newBatch(ctx, []Request{{ModelPath: "m/", Inputs: column(t, 1, 2, 3, 4, 5, 6, 7),
		Shadows: []ShadowTarget{{ModelPath: "s/", Release: "v2"}}}})
	as.Root.Send(router, b)
	<-b.reply
	<-sink.done
	sink.mu.Lock()
	defer sink.mu.Unlock()
	if len(sink.parent) != 1 {
		t.Fatalf("%d events logged, want the shadow execution's", len(sink.parent))
	}
	return sink.parent[0]
}

// TestShadowExecutionIsTraced: a shadow copy of a traced request gets a
// "shadow" span, child of the caller's, with the queue and batch spans of
// its micro-batches under it, and its prediction event carries the
// shadow span's traceparent.
func TestShadowExecutionIsTraced(t *testing.T) {
	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
	defer func() { _ = tp.Shutdown(context.Background()) }()
	ctx, server := tp.Tracer("test").Start(context.Background(), "server")
	got := shadowOnce(t, ctx)
	server.End()

	var shadow sdktrace.ReadOnlySpan
	children := map[string]int{}
	for _, s := range rec.Ended() {
		if s.Name() == tracing.SpanShadow {
			shadow = s
		}
	}
	if shadow == nil {
		t.Fatalf("no %q span among %d", tracing.SpanShadow, len(rec.Ended()))
	}
	if shadow.Parent().SpanID() != server.SpanContext().SpanID() || shadow.SpanContext().TraceID() != server.SpanContext().TraceID() {
		t.Errorf("the shadow span is not a child of the caller's span")
	}
	attrs := map[string]string{}
	for _, kv := range shadow.Attributes() {
		attrs[string(kv.Key)] = kv.Value.Emit()
	}
	for k, v := range map[string]string{"grove.model.path": "s/", "grove.contract.release": "v2", "grove.outcome": "ok"} {
		if attrs[k] != v {
			t.Errorf("shadow span %s = %q, want %q (%v)", k, attrs[k], v, attrs)
		}
	}
	for _, s := range rec.Ended() {
		if s.Parent().SpanID() == shadow.SpanContext().SpanID() {
			children[s.Name()]++
		}
	}
	if children[tracing.SpanQueue] != 3 || children[tracing.SpanBatch] != 3 {
		t.Errorf("children of the shadow span %v, want 3 queue and 3 batch spans (one per micro-batch)", children)
	}
	if want := tracing.TraceParent(shadow.SpanContext()); got != want {
		t.Errorf("shadow event traceparent %q, want the shadow span's %q", got, want)
	}
}

// TestShadowEventOfAnUnsampledTraceCarriesTheCallersTraceparent: a
// request whose trace is not sampled here makes no span, and its shadow
// execution's event carries the caller's traceparent, as its served
// answer's does.
func TestShadowEventOfAnUnsampledTraceCarriesTheCallersTraceparent(t *testing.T) {
	sc := trace.NewSpanContext(trace.SpanContextConfig{TraceID: trace.TraceID{1, 2, 3}, SpanID: trace.SpanID{4, 5, 6}, Remote: true})
	got := shadowOnce(t, trace.ContextWithSpanContext(context.Background(), sc))
	if want := "00-01020300000000000000000000000000-0405060000000000-00"; got != want {
		t.Errorf("shadow event traceparent %q, want the caller's %q", got, want)
	}
	if got := shadowOnce(t, context.Background()); got != "" {
		t.Errorf("untraced request: shadow event traceparent %q, want none", got)
	}
}
