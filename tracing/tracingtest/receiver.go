// Package tracingtest is an OTLP trace receiver for tests: a real gRPC
// TraceService (go.opentelemetry.io/proto/otlp) or an HTTP endpoint
// decoding the OTLP protobuf, on 127.0.0.1, keeping the spans it receives
// for the test to check. The receiver owns its span list (under its mutex).
package tracingtest

import (
	"bytes"
	"compress/gzip"
	"context"
	"encoding/hex"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	collectorpb "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	commonpb "go.opentelemetry.io/proto/otlp/common/v1"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"
	"google.golang.org/grpc"
	"google.golang.org/protobuf/proto"
)

// Span is one received span, its ids in hex.
type Span struct {
	TraceID, SpanID, ParentID string
	Name                      string
	Kind                      tracepb.Span_SpanKind
	// Attrs are the span's attributes, each value as text.
	Attrs map[string]string
	// Error is set when the span's status is an error.
	Error      bool
	Start, End time.Time
	// Service is the service.name of the span's resource.
	Service string
}

// Receiver keeps the spans exported to it.
type Receiver struct {
	collectorpb.UnimplementedTraceServiceServer
	// Endpoint is what OTEL_EXPORTER_OTLP_ENDPOINT names it by.
	Endpoint string
	mu       sync.Mutex
	spans    []Span
	changed  chan struct{}
}

func newReceiver() *Receiver { return &Receiver{changed: make(chan struct{})} }

// GRPC starts a receiver serving OTLP/gRPC; the test's cleanup stops it.
func GRPC(t testing.TB) *Receiver {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	r := newReceiver()
	gs := grpc.NewServer()
	collectorpb.RegisterTraceServiceServer(gs, r)
	go func() { _ = gs.Serve(ln) }()
	t.Cleanup(gs.Stop)
	r.Endpoint = "http://" + ln.Addr().String()
	return r
}

// HTTP starts a receiver serving OTLP/HTTP with protobuf bodies (POST
// /v1/traces, gzip or not); the test's cleanup stops it.
func HTTP(t testing.TB) *Receiver {
	t.Helper()
	r := newReceiver()
	srv := httptest.NewServer(http.HandlerFunc(r.serveHTTP))
	t.Cleanup(srv.Close)
	r.Endpoint = srv.URL
	return r
}

// Export keeps the spans of an OTLP/gRPC export.
func (r *Receiver) Export(_ context.Context, req *collectorpb.ExportTraceServiceRequest) (*collectorpb.ExportTraceServiceResponse, error) {
	r.add(req)
	return &collectorpb.ExportTraceServiceResponse{}, nil
}

func (r *Receiver) serveHTTP(w http.ResponseWriter, req *http.Request) {
	if req.Method != http.MethodPost || req.URL.Path != "/v1/traces" {
		http.Error(w, fmt.Sprintf("%s %s: OTLP traces are POSTed to /v1/traces", req.Method, req.URL.Path), http.StatusNotFound)
		return
	}
	if ct := req.Header.Get("Content-Type"); ct != "application/x-protobuf" {
		http.Error(w, "Content-Type "+ct+": want application/x-protobuf", http.StatusUnsupportedMediaType)
		return
	}
	var body io.Reader = req.Body
	if req.Header.Get("Content-Encoding") == "gzip" {
		zr, err := gzip.NewReader(req.Body)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		body = zr
	}
	data, err := io.ReadAll(body)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	var m collectorpb.ExportTraceServiceRequest
	if err := proto.Unmarshal(data, &m); err != nil {
		http.Error(w, "decoding ExportTraceServiceRequest: "+err.Error(), http.StatusBadRequest)
		return
	}
	r.add(&m)
	out, _ := proto.Marshal(&collectorpb.ExportTraceServiceResponse{})
	w.Header().Set("Content-Type", "application/x-protobuf")
	_, _ = io.Copy(w, bytes.NewReader(out))
}

func (r *Receiver) add(req *collectorpb.ExportTraceServiceRequest) {
	var got []Span
	for _, rs := range req.GetResourceSpans() {
		service := attrs(rs.GetResource().GetAttributes())["service.name"]
		for _, ss := range rs.GetScopeSpans() {
			for _, s := range ss.GetSpans() {
				got = append(got, Span{TraceID: hex.EncodeToString(s.GetTraceId()), SpanID: hex.EncodeToString(s.GetSpanId()),
					ParentID: hex.EncodeToString(s.GetParentSpanId()), Name: s.GetName(), Kind: s.GetKind(),
					Attrs: attrs(s.GetAttributes()), Error: s.GetStatus().GetCode() == tracepb.Status_STATUS_CODE_ERROR,
					Start: time.Unix(0, int64(s.GetStartTimeUnixNano())), End: time.Unix(0, int64(s.GetEndTimeUnixNano())),
					Service: service})
			}
		}
	}
	r.mu.Lock()
	r.spans = append(r.spans, got...)
	close(r.changed)
	r.changed = make(chan struct{})
	r.mu.Unlock()
}

// attrs are OTLP attributes with their values as text.
func attrs(kvs []*commonpb.KeyValue) map[string]string {
	m := make(map[string]string, len(kvs))
	for _, kv := range kvs {
		v := kv.GetValue()
		switch x := v.GetValue().(type) {
		case *commonpb.AnyValue_StringValue:
			m[kv.GetKey()] = x.StringValue
		case *commonpb.AnyValue_IntValue:
			m[kv.GetKey()] = fmt.Sprint(x.IntValue)
		case *commonpb.AnyValue_BoolValue:
			m[kv.GetKey()] = fmt.Sprint(x.BoolValue)
		case *commonpb.AnyValue_DoubleValue:
			m[kv.GetKey()] = fmt.Sprint(x.DoubleValue)
		default:
			m[kv.GetKey()] = v.String()
		}
	}
	return m
}

// Spans returns the spans received so far.
func (r *Receiver) Spans() []Span {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]Span(nil), r.spans...)
}

// Wait waits until done holds for the spans received, up to timeout, and
// returns them; it fails the test if it never does.
func (r *Receiver) Wait(t testing.TB, timeout time.Duration, done func([]Span) bool) []Span {
	t.Helper()
	deadline := time.NewTimer(timeout)
	defer deadline.Stop()
	for {
		r.mu.Lock()
		spans, changed := append([]Span(nil), r.spans...), r.changed
		r.mu.Unlock()
		if done(spans) {
			return spans
		}
		select {
		case <-changed:
		case <-deadline.C:
			t.Fatalf("spans received within %v do not satisfy the test:\n%s", timeout, Tree(spans))
			return nil
		}
	}
}

// Trace returns the spans of one trace.
func Trace(spans []Span, traceID string) []Span {
	return filter(spans, func(s Span) bool { return s.TraceID == traceID })
}

// Named returns the spans called name.
func Named(spans []Span, name string) []Span {
	return filter(spans, func(s Span) bool { return s.Name == name })
}

func filter(spans []Span, keep func(Span) bool) []Span {
	var out []Span
	for _, s := range spans {
		if keep(s) {
			out = append(out, s)
		}
	}
	return out
}

// Tree renders spans as indented trees (by parent), for failure messages.
func Tree(spans []Span) string {
	byID := map[string]bool{}
	for _, s := range spans {
		byID[s.SpanID] = true
	}
	var b strings.Builder
	var walk func(s Span, depth int)
	walk = func(s Span, depth int) {
		fmt.Fprintf(&b, "%s%s [%s trace %s span %s parent %s] %v\n", strings.Repeat("  ", depth), s.Name, s.Service, s.TraceID, s.SpanID, s.ParentID, s.Attrs)
		for _, c := range spans {
			if c.ParentID == s.SpanID {
				walk(c, depth+1)
			}
		}
	}
	for _, s := range spans {
		if !byID[s.ParentID] {
			walk(s, 0)
		}
	}
	return b.String()
}
