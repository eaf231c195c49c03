package servables

import "context"

// outputsKey is the context key of the requested outputs.
type outputsKey struct{}

// WithOutputs returns ctx carrying the names of the outputs a caller
// asked for. A runtime that can (ONNX) converts and returns only those, so
// an output it cannot convert fails only the calls that ask for it; others
// return every output, and the protocol picks. A batch of several
// requests runs without the names (every output); if an output fails it,
// each request runs again on its own, with its names.
func WithOutputs(ctx context.Context, names []string) context.Context {
	return context.WithValue(ctx, outputsKey{}, names)
}

// OutputsFrom returns the output names WithOutputs put in ctx; ok is false
// when ctx has none (every output is wanted).
func OutputsFrom(ctx context.Context) (names []string, ok bool) {
	names, ok = ctx.Value(outputsKey{}).([]string)
	return names, ok
}
