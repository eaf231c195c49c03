// Package tracing is Grove's OpenTelemetry tracing: the tracer provider
// built from the standard OTEL_* environment variables (New), the server
// spans every HTTP route and gRPC method gets (HTTP, UnaryServer,
// StreamServer), with the caller's W3C traceparent continued, the child
// spans the protocols and actors add at well-defined points (Start), and
// the traceparent handed on to other nodes (Outgoing) and to the
// prediction log (TraceParent).
//
// # Who owns what
//
// The tracer provider is made by cmd/grove, which passes it to the HTTP
// and gRPC servers and shuts it down (flushing the spans it holds) at
// exit; it is never a global. A request's spans travel in its
// context.Context: a child span is made by the tracer provider of the
// span in the context (trace.Span.TracerProvider), so the packages below
// the servers need no tracer of their own. With tracing off there is no
// provider, no span is ever recording, and every function here returns at
// its first check, without allocating.
package tracing
