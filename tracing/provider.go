package tracing

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"net/url"
	"strconv"
	"strings"

	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracegrpc"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	semconv "go.opentelemetry.io/otel/semconv/v1.43.0"
	"go.opentelemetry.io/otel/trace"
)

// Config is the tracing configuration the OTEL_* environment variables
// give (FromEnv).
type Config struct {
	// Endpoint is the OTLP traces endpoint as a URL: for grpc the
	// collector's scheme://host:port, for http/protobuf the full URL
	// traces are posted to (/v1/traces appended to
	// OTEL_EXPORTER_OTLP_ENDPOINT's path). Empty means tracing is off.
	Endpoint string
	// Protocol is "grpc" or "http/protobuf".
	Protocol string
	// Sampler is the SDK's sampler (OTEL_TRACES_SAMPLER and _ARG) for spans
	// with a parent; a new trace that passed the Roots draw is sampled.
	Sampler sdktrace.Sampler
	// Roots is the share of new traces (requests that bring no
	// traceparent) that are started: the server entry points draw it
	// before they touch the SDK, so a request left out costs a random
	// number, not a span (1 for the always_on samplers, 0 for always_off,
	// the ratio for the traceidratio ones).
	Roots float64
	// SamplerName is Sampler as the environment named it, for logs.
	SamplerName string
}

// Enabled reports whether the configuration turns tracing on.
func (c Config) Enabled() bool { return c.Endpoint != "" }

// FromEnv reads the configuration from getenv (os.Getenv): tracing is on
// when OTEL_EXPORTER_OTLP_TRACES_ENDPOINT or OTEL_EXPORTER_OTLP_ENDPOINT
// is set, unless OTEL_SDK_DISABLED is true or OTEL_TRACES_EXPORTER is
// "none". OTEL_EXPORTER_OTLP_TRACES_PROTOCOL, else
// OTEL_EXPORTER_OTLP_PROTOCOL, picks grpc or http/protobuf (the
// default, as the OpenTelemetry specification says); OTEL_TRACES_SAMPLER
// and OTEL_TRACES_SAMPLER_ARG pick the sampler (default
// parentbased_always_on); OTEL_PROPAGATORS, if set, must name
// tracecontext, the one propagator Grove has. A value it cannot use is an
// error naming the variable.
func FromEnv(getenv func(string) string) (Config, error) {
	var c Config
	if v := strings.TrimSpace(getenv("OTEL_SDK_DISABLED")); v != "" {
		off, err := strconv.ParseBool(v)
		if err != nil {
			return c, fmt.Errorf("OTEL_SDK_DISABLED=%q: want true or false", v)
		}
		if off {
			return c, nil
		}
	}
	switch v := strings.TrimSpace(getenv("OTEL_TRACES_EXPORTER")); v {
	case "", "otlp":
	case "none":
		return c, nil
	default:
		return c, fmt.Errorf("OTEL_TRACES_EXPORTER=%q: Grove exports traces with otlp (or none)", v)
	}
	proto, pvar := getenv("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL"), "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL"
	if proto == "" {
		proto, pvar = getenv("OTEL_EXPORTER_OTLP_PROTOCOL"), "OTEL_EXPORTER_OTLP_PROTOCOL"
	}
	switch proto = strings.TrimSpace(proto); proto {
	case "":
		c.Protocol = "http/protobuf"
	case "grpc", "http/protobuf":
		c.Protocol = proto
	default:
		return c, fmt.Errorf("%s=%q: want grpc or http/protobuf", pvar, proto)
	}
	endpoint, evar := strings.TrimSpace(getenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT")), "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"
	signal := endpoint != ""
	if !signal {
		endpoint, evar = strings.TrimSpace(getenv("OTEL_EXPORTER_OTLP_ENDPOINT")), "OTEL_EXPORTER_OTLP_ENDPOINT"
	}
	if endpoint == "" {
		return Config{}, nil
	}
	u, err := url.Parse(endpoint)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return c, fmt.Errorf("%s=%q: want a URL such as http://collector:4318", evar, endpoint)
	}
	if c.Protocol == "http/protobuf" && !signal {
		// The spec: the generic endpoint is a base URL the signal's path
		// is appended to; the traces endpoint is used as it is.
		u.Path = strings.TrimSuffix(u.Path, "/") + "/v1/traces"
	}
	c.Endpoint = u.String()
	if err := propagatorsFromEnv(getenv("OTEL_PROPAGATORS")); err != nil {
		return c, err
	}
	c.Sampler, c.Roots, c.SamplerName, err = samplerFromEnv(getenv)
	if err != nil {
		return c, err
	}
	return c, nil
}

// propagatorsFromEnv checks OTEL_PROPAGATORS (v) against what Grove does:
// it reads and writes the W3C trace context (traceparent and tracestate)
// only, so the list must name tracecontext; baggage, in the
// specification's default "tracecontext,baggage", is accepted and not
// carried. Another propagator (b3, jaeger, xray, ...) or "none" would
// otherwise be ignored without a word: it is an error naming the
// variable. Unset or empty is the default.
func propagatorsFromEnv(v string) error {
	if strings.TrimSpace(v) == "" {
		return nil
	}
	trace := false
	for p := range strings.SplitSeq(v, ",") {
		switch p = strings.ToLower(strings.TrimSpace(p)); p {
		case "tracecontext":
			trace = true
		case "baggage":
		default:
			return fmt.Errorf("OTEL_PROPAGATORS=%q: Grove propagates the W3C trace context only (tracecontext, with baggage accepted and not carried), not %q", v, p)
		}
	}
	if !trace {
		return fmt.Errorf("OTEL_PROPAGATORS=%q: Grove propagates the W3C trace context: the list must name tracecontext", v)
	}
	return nil
}

// samplerFromEnv is the sampling OTEL_TRACES_SAMPLER and
// OTEL_TRACES_SAMPLER_ARG name, as the OpenTelemetry SDK's environment
// support defines them (the SDK would read them itself, but silently
// falls back to its default on a value it cannot use), split in two: the
// share of new traces started (Config.Roots), and the SDK sampler of
// spans with a parent (a new trace reaching the SDK was drawn already).
// A traceidratio sampler draws new traces at random rather than by their
// trace id, which samples the same share.
func samplerFromEnv(getenv func(string) string) (sdktrace.Sampler, float64, string, error) {
	name := strings.ToLower(strings.TrimSpace(getenv("OTEL_TRACES_SAMPLER")))
	arg := strings.TrimSpace(getenv("OTEL_TRACES_SAMPLER_ARG"))
	ratio := func() (float64, string, error) {
		r := 1.0
		if arg != "" {
			var err error
			r, err = strconv.ParseFloat(arg, 64)
			if err != nil || r < 0 || r > 1 {
				return 0, "", fmt.Errorf("OTEL_TRACES_SAMPLER_ARG=%q: want a ratio from 0 to 1 for %s", arg, name)
			}
		}
		return r, name + "=" + strconv.FormatFloat(r, 'g', -1, 64), nil
	}
	parentBased := sdktrace.ParentBased(sdktrace.AlwaysSample())
	switch name {
	case "", "parentbased_always_on":
		return rootsDrawn{parentBased}, 1, "parentbased_always_on", nil
	case "always_on":
		return rootsDrawn{sdktrace.AlwaysSample()}, 1, name, nil
	case "always_off":
		return rootsDrawn{sdktrace.NeverSample()}, 0, name, nil
	case "parentbased_always_off":
		return rootsDrawn{parentBased}, 0, name, nil
	case "traceidratio":
		r, desc, err := ratio()
		return rootsDrawn{sdktrace.TraceIDRatioBased(r)}, r, desc, err
	case "parentbased_traceidratio":
		r, desc, err := ratio()
		return rootsDrawn{parentBased}, r, desc, err
	}
	return nil, 0, "", fmt.Errorf("OTEL_TRACES_SAMPLER=%q: want always_on, always_off, traceidratio, parentbased_always_on, parentbased_always_off or parentbased_traceidratio", name)
}

// rootsDrawn samples every new trace (its entry point drew Config.Roots
// already) and leaves spans with a parent to parented.
type rootsDrawn struct{ parented sdktrace.Sampler }

func (s rootsDrawn) ShouldSample(p sdktrace.SamplingParameters) sdktrace.SamplingResult {
	if trace.SpanContextFromContext(p.ParentContext).IsValid() {
		return s.parented.ShouldSample(p)
	}
	return sdktrace.SamplingResult{Decision: sdktrace.RecordAndSample}
}

func (s rootsDrawn) Description() string { return "RootsDrawn{" + s.parented.Description() + "}" }

// Provider is the tracer provider New builds: the SDK's, with the share of
// new traces its server spans start (Config.Roots).
type Provider struct {
	*sdktrace.TracerProvider
	roots float64
}

// rootShare is the share of new traces tp's server spans start: Roots for
// a Provider, all for any other provider (whose sampler decides alone).
func rootShare(tp trace.TracerProvider) float64 {
	if p, ok := tp.(*Provider); ok {
		return p.roots
	}
	return 1
}

// leaveOut draws whether a new trace is left out, for a share roots of
// them started (math/rand/v2: no lock, no allocation).
func leaveOut(roots float64) bool { return roots < 1 && rand.Float64() >= roots }

// New returns a tracer provider exporting to c's endpoint in batches, with
// the resource OTEL_SERVICE_NAME and OTEL_RESOURCE_ATTRIBUTES describe
// (service.name "grove" and service.version version by default); nil
// when c is not Enabled. The exporter itself reads the other
// OTEL_EXPORTER_OTLP_* variables (headers, timeout, compression,
// certificates) and the batch processor the OTEL_BSP_* ones. Shut the
// provider down at exit: that flushes the spans it still holds.
func New(ctx context.Context, c Config, version string) (*Provider, error) {
	if !c.Enabled() {
		return nil, nil
	}
	if c.Sampler == nil {
		return nil, errors.New("tracing: no sampler (make the Config with FromEnv)")
	}
	var exp sdktrace.SpanExporter
	var err error
	switch c.Protocol {
	case "grpc":
		exp, err = otlptracegrpc.New(ctx, otlptracegrpc.WithEndpointURL(c.Endpoint))
	case "http/protobuf":
		exp, err = otlptracehttp.New(ctx, otlptracehttp.WithEndpointURL(c.Endpoint))
	default:
		return nil, fmt.Errorf("tracing: protocol %q: want grpc or http/protobuf", c.Protocol)
	}
	if err != nil {
		return nil, fmt.Errorf("tracing: OTLP exporter: %w", err)
	}
	res, err := resource.New(ctx, resource.WithAttributes(semconv.ServiceName("grove"), semconv.ServiceVersion(version)),
		resource.WithFromEnv(), resource.WithTelemetrySDK(), resource.WithHost(), resource.WithProcessPID())
	if err != nil {
		return nil, fmt.Errorf("tracing: resource: %w", err)
	}
	sdk := sdktrace.NewTracerProvider(sdktrace.WithBatcher(exp), sdktrace.WithSampler(c.Sampler), sdktrace.WithResource(res))
	return &Provider{TracerProvider: sdk, roots: c.Roots}, nil
}
