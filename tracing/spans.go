package tracing

import (
	"context"
	"encoding/hex"
	"net/http"
	"strings"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/propagation"
	semconv "go.opentelemetry.io/otel/semconv/v1.43.0"
	"go.opentelemetry.io/otel/trace"
	"google.golang.org/grpc"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
)

// ScopeName is the instrumentation scope of Grove's spans.
const ScopeName = "github.com/groveml/grove"

// HeaderName is the W3C trace context header (and gRPC metadata key, and
// Kafka record header) Grove reads and writes.
const HeaderName = "traceparent"

// The attributes of Grove's own spans (docs/tracing.md lists them).
const (
	AttrAPI          = attribute.Key("grove.api")
	AttrRequestID    = attribute.Key("grove.request_id")
	AttrModelPath    = attribute.Key("grove.model.path")
	AttrModelVersion = attribute.Key("grove.model.version")
	AttrChecksum     = attribute.Key("grove.model.checksum")
	AttrBatchRows    = attribute.Key("grove.batch.rows")
	AttrRequestRows  = attribute.Key("grove.request.rows")
	AttrOutcome      = attribute.Key("grove.outcome")
	AttrNode         = attribute.Key("grove.cluster.node")
	AttrEvents       = attribute.Key("grove.log.events")
	AttrRelease      = attribute.Key("grove.contract.release")
)

// maxRequestID is the longest caller's request id a server span records:
// the longest the servers take (a longer one is replaced by an id of
// Grove's), so that a caller cannot attach an attribute of any size.
const maxRequestID = 128

// The names of Grove's child spans.
const (
	SpanDecode  = "decode"
	SpanQueue   = "queue"
	SpanBatch   = "batch"
	SpanForward = "forward"
	SpanEncode  = "encode"
	SpanLog     = "log"
	// SpanShadow is a shadow execution: a copy of the request run on
	// another model after the caller's answer, whose queue and batch
	// spans (or the forward to the node serving it) are its children.
	SpanShadow = "shadow"
)

// traceContext reads and writes the traceparent and tracestate headers.
var traceContext propagation.TraceContext

// serverKind are the start options of a server span, made once per
// server so that starting one allocates no option slice.
func serverKind() []trace.SpanStartOption {
	return []trace.SpanStartOption{trace.WithSpanKind(trace.SpanKindServer)}
}

// Recording reports whether ctx carries a span that Start and Record make
// children of: one that records, or one made here that has ended in a
// sampled trace.
func Recording(ctx context.Context) bool { return parents(trace.SpanFromContext(ctx)) }

// parents reports whether span takes children: it records, or it was
// started in this process in a sampled trace and has ended (work a request
// set off, a shadow copy, may begin after the request's answer ended its
// span). A remote span context (a caller's traceparent while tracing is
// off here) takes none.
func parents(span trace.Span) bool {
	if span.IsRecording() {
		return true
	}
	sc := span.SpanContext()
	return sc.IsSampled() && !sc.IsRemote()
}

// Start starts the child span name of the span in ctx (Recording), with
// its tracer provider; when ctx carries none it returns ctx and a span that
// does nothing, without allocating. End it with End.
func Start(ctx context.Context, name string) (context.Context, trace.Span) {
	parent := trace.SpanFromContext(ctx)
	if !parents(parent) {
		// A span of no trace (never the parent, which the caller's End
		// must not end); an interface holding an empty struct: free.
		return ctx, trace.SpanFromContext(context.Background())
	}
	return parent.TracerProvider().Tracer(ScopeName).Start(ctx, name)
}

// Record records a span name, child of the span in ctx (Recording), that
// ran from start to end, with attrs; it does nothing when ctx carries no
// such span. It is for work timed elsewhere (a model actor's queue
// and forward call), recorded once it is over.
func Record(ctx context.Context, name string, start, end time.Time, err error, attrs ...attribute.KeyValue) {
	parent := trace.SpanFromContext(ctx)
	if !parents(parent) {
		return
	}
	_, span := parent.TracerProvider().Tracer(ScopeName).Start(ctx, name, trace.WithTimestamp(start), trace.WithAttributes(attrs...))
	if err != nil {
		span.SetStatus(codes.Error, err.Error())
	}
	span.End(trace.WithTimestamp(end))
}

// End ends span, marked as failed with err unless err is nil.
func End(span trace.Span, err error) {
	if !span.IsRecording() {
		return
	}
	if err != nil {
		span.SetStatus(codes.Error, err.Error())
	}
	span.End()
}

// TraceParent is sc as a W3C traceparent value
// ("00-<trace id>-<span id>-<flags>"), "" when sc is not valid.
func TraceParent(sc trace.SpanContext) string {
	if !sc.IsValid() {
		return ""
	}
	var b [55]byte
	tid, sid := sc.TraceID(), sc.SpanID()
	copy(b[:], "00-")
	hex.Encode(b[3:35], tid[:])
	b[35] = '-'
	hex.Encode(b[36:52], sid[:])
	b[52] = '-'
	hex.Encode(b[53:55], []byte{byte(sc.TraceFlags())})
	return string(b[:])
}

// HTTPServer makes the server span of each HTTP request of one API.
type HTTPServer struct {
	tracer trace.Tracer
	api    attribute.KeyValue
	server []trace.SpanStartOption // made once: no allocation per request
	roots  float64                 // share of new traces started (rootShare)
}

// NewHTTPServer returns the server spans of api's routes made by tp; nil
// when tp is nil, which the caller takes to mean no tracing.
func NewHTTPServer(tp trace.TracerProvider, api string) *HTTPServer {
	if tp == nil {
		return nil
	}
	return &HTTPServer{tracer: tp.Tracer(ScopeName), api: AttrAPI.String(api), server: serverKind(), roots: rootShare(tp)}
}

// Start starts r's server span, the child of the caller's traceparent if
// it sent one, and returns r with it in its context. End it with
// EndHTTP.
func (h *HTTPServer) Start(r *http.Request) (*http.Request, trace.Span) {
	ctx := r.Context()
	parent := len(r.Header["Traceparent"]) > 0 // canonical key: no allocation without one
	if parent {
		ctx, parent = extract(ctx, propagation.HeaderCarrier(r.Header))
	}
	if !parent && leaveOut(h.roots) {
		return r, trace.SpanFromContext(context.Background()) // a span that does nothing
	}
	// The route's pattern names the span ("POST /v1/inference"): as it
	// is when it has a method, which costs nothing per request.
	name, route := r.Pattern, r.Pattern
	if i := strings.IndexByte(route, ' '); i >= 0 {
		route = route[i+1:]
	} else if route != "" {
		name = r.Method + " " + route
	} else {
		name = r.Method + " " + h.api.Value.AsString()
	}
	ctx, span := h.tracer.Start(ctx, name, h.server...)
	if span.IsRecording() {
		span.SetAttributes(h.api, semconv.HTTPRequestMethodKey.String(r.Method), semconv.URLPath(r.URL.Path))
		if route != "" {
			span.SetAttributes(semconv.HTTPRoute(route))
		}
		if id := r.Header.Get("X-Request-Id"); id != "" && len(id) <= maxRequestID {
			span.SetAttributes(AttrRequestID.String(id))
		}
	}
	return r.WithContext(ctx), span
}

// EndHTTP ends an HTTP server span with the status code of the answer
// (5xx marks it failed).
func EndHTTP(span trace.Span, code int) {
	if !span.IsRecording() {
		return
	}
	span.SetAttributes(semconv.HTTPResponseStatusCode(code))
	if code >= 500 {
		span.SetStatus(codes.Error, http.StatusText(code))
	}
	span.End()
}

// extract returns ctx with the caller's trace context in carrier, and
// whether there was a valid one: a malformed traceparent is ignored, as
// the W3C Trace Context says, and the request is then a new trace, drawn
// as one that came without (the SDK samples every new trace it is asked
// for: rootsDrawn).
func extract(ctx context.Context, carrier propagation.TextMapCarrier) (context.Context, bool) {
	ctx = traceContext.Extract(ctx, carrier)
	sc := trace.SpanContextFromContext(ctx)
	return ctx, sc.IsValid() && sc.IsRemote()
}

// mdCarrier reads the trace context from incoming gRPC metadata.
type mdCarrier metadata.MD

func (c mdCarrier) Get(key string) string {
	if v := metadata.MD(c).Get(key); len(v) > 0 {
		return v[0]
	}
	return ""
}
func (c mdCarrier) Set(key, value string) { metadata.MD(c).Set(key, value) }
func (c mdCarrier) Keys() []string {
	keys := make([]string, 0, len(c))
	for k := range c {
		keys = append(keys, k)
	}
	return keys
}

// grpcStart starts the server span of a gRPC call, the child of the
// caller's traceparent metadata if it sent one.
func grpcStart(ctx context.Context, t trace.Tracer, server []trace.SpanStartOption, roots float64, method string) (context.Context, trace.Span) {
	md, _ := metadata.FromIncomingContext(ctx)
	var carrier propagation.TextMapCarrier
	if len(md[HeaderName]) > 0 {
		carrier = mdCarrier(md)
	}
	var requestID string
	if v := md.Get("x-request-id"); len(v) > 0 {
		requestID = v[0]
	}
	return rpcStart(ctx, t, server, roots, method, carrier, requestID)
}

// rpcStart starts the server span of an RPC named method
// ("/package.Service/Method"), the child of the trace context in carrier
// (nil when the caller sent none), or a new trace if the draw of roots
// takes it.
func rpcStart(ctx context.Context, t trace.Tracer, server []trace.SpanStartOption, roots float64, method string, carrier propagation.TextMapCarrier, requestID string) (context.Context, trace.Span) {
	parent := false
	if carrier != nil {
		ctx, parent = extract(ctx, carrier)
	}
	if !parent && leaveOut(roots) {
		return ctx, trace.SpanFromContext(context.Background()) // a span that does nothing
	}
	ctx, span := t.Start(ctx, strings.TrimPrefix(method, "/"), server...)
	if span.IsRecording() {
		service, m, _ := strings.Cut(strings.TrimPrefix(method, "/"), "/")
		span.SetAttributes(semconv.RPCSystemNameGRPC, semconv.RPCMethod(service+"/"+m))
		if requestID != "" && len(requestID) <= maxRequestID {
			span.SetAttributes(AttrRequestID.String(requestID))
		}
	}
	return ctx, span
}

// Outgoing returns the traceparent and tracestate of the span ctx
// carries, for a call that continues the trace on another node (the
// cluster's framed forwarding); both empty when ctx carries no valid
// span context.
func Outgoing(ctx context.Context) (traceparent, tracestate string) {
	sc := trace.SpanContextFromContext(ctx)
	if !sc.IsValid() {
		return "", ""
	}
	return TraceParent(sc), sc.TraceState().String()
}

// CallServer makes the server spans of calls that arrive on a transport
// of Grove's own (the cluster's framed forwarding), named and attributed
// as the same method's spans over gRPC. A nil *CallServer traces nothing.
type CallServer struct {
	t      trace.Tracer
	server []trace.SpanStartOption
	roots  float64
}

// NewCallServer returns the CallServer of tp; nil when tp is nil.
func NewCallServer(tp trace.TracerProvider) *CallServer {
	if tp == nil {
		return nil
	}
	return &CallServer{t: tp.Tracer(ScopeName), server: serverKind(), roots: rootShare(tp)}
}

// Start starts the server span of a call of method that came with the
// caller's traceparent and tracestate (empty: none) and request id. A nil
// CallServer starts no span but still puts the caller's trace context in
// ctx, as gRPC's metadata is there whether traced or not.
func (s *CallServer) Start(ctx context.Context, method, traceparent, tracestate, requestID string) (context.Context, trace.Span) {
	var carrier propagation.TextMapCarrier
	if traceparent != "" {
		carrier = propagation.MapCarrier{HeaderName: traceparent, "tracestate": tracestate}
	}
	if s == nil {
		if carrier != nil {
			ctx = traceContext.Extract(ctx, carrier)
		}
		return ctx, trace.SpanFromContext(context.Background())
	}
	return rpcStart(ctx, s.t, s.server, s.roots, method, carrier, requestID)
}

// EndCall ends a span of CallServer.Start with the call's outcome as a
// gRPC status (codes.OK and no message for a success).
func EndCall(span trace.Span, st *status.Status) {
	if !span.IsRecording() {
		return
	}
	span.SetAttributes(semconv.RPCResponseStatusCode(st.Code().String()))
	if st.Code() != 0 {
		span.SetStatus(codes.Error, st.Message())
	}
	span.End()
}

// grpcEnd ends a gRPC server span with the call's status code.
func grpcEnd(span trace.Span, err error) {
	st, _ := status.FromError(err)
	EndCall(span, st)
}

// UnaryServer is the interceptor that makes the server span of each
// unary call with tp; nil when tp is nil.
func UnaryServer(tp trace.TracerProvider) grpc.UnaryServerInterceptor {
	if tp == nil {
		return nil
	}
	t, server, roots := tp.Tracer(ScopeName), serverKind(), rootShare(tp)
	return func(ctx context.Context, req any, info *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
		ctx, span := grpcStart(ctx, t, server, roots, info.FullMethod)
		resp, err := handler(ctx, req)
		grpcEnd(span, err)
		return resp, err
	}
}

// StreamServer is the interceptor that makes the server span of each
// streaming call (the whole stream) with tp; nil when tp is nil.
func StreamServer(tp trace.TracerProvider) grpc.StreamServerInterceptor {
	if tp == nil {
		return nil
	}
	t, server, roots := tp.Tracer(ScopeName), serverKind(), rootShare(tp)
	return func(srv any, ss grpc.ServerStream, info *grpc.StreamServerInfo, handler grpc.StreamHandler) error {
		ctx, span := grpcStart(ss.Context(), t, server, roots, info.FullMethod)
		err := handler(srv, tracedStream{ss, ctx})
		grpcEnd(span, err)
		return err
	}
}

// tracedStream is a server stream whose context carries its span.
type tracedStream struct {
	grpc.ServerStream
	ctx context.Context
}

func (s tracedStream) Context() context.Context { return s.ctx }
