package oip

import (
	"context"
	"fmt"
	"math"
	"time"

	"github.com/groveml/grove/api/oip/oippb"
)

// TimeoutParameter is the request parameter that bounds an inference
// request, in microseconds, as Triton's clients send it (tritonclient's
// infer(timeout=...)): {"parameters": {"timeout": 50000}} over REST, an
// int64_param (or uint64_param) over gRPC. 0 means none. Work still queued
// when it passes is dropped and the caller answered 504 /
// DEADLINE_EXCEEDED then. A gRPC call's own deadline applies as well; the
// earlier one wins.
const TimeoutParameter = "timeout"

// maxTimeoutMicros keeps a timeout within time.Duration.
const maxTimeoutMicros = math.MaxInt64 / int64(time.Microsecond)

// timeoutMicros checks a timeout parameter's value, in microseconds.
func timeoutMicros(us int64) (time.Duration, error) {
	if us < 0 || us > maxTimeoutMicros {
		return 0, timeoutRangeError(us)
	}
	return time.Duration(us) * time.Microsecond, nil
}

// timeoutRangeError names a timeout parameter's value out of range.
func timeoutRangeError[T int64 | uint64](v T) error {
	return fmt.Errorf("parameter %q: %d is not a timeout in microseconds (0 to %d)", TimeoutParameter, v, maxTimeoutMicros)
}

// restTimeout reads the timeout parameter of a REST request, 0 if none.
func restTimeout(ps Parameters) (time.Duration, error) {
	p, ok := ps.Get(TimeoutParameter)
	if !ok {
		return 0, nil
	}
	switch p.Kind {
	case ParamInt:
		return timeoutMicros(p.Int)
	case ParamUint: // above 2^63: past any clock
		return 0, timeoutRangeError(p.Uint)
	}
	return 0, fmt.Errorf("parameter %q must be an integer number of microseconds, got %s", TimeoutParameter, p.Kind.phrase())
}

// grpcTimeout reads the timeout parameter of a gRPC request, 0 if none.
func grpcTimeout(ps map[string]*oippb.InferParameter) (time.Duration, error) {
	p, ok := ps[TimeoutParameter]
	if !ok {
		return 0, nil
	}
	switch v := p.GetParameterChoice().(type) {
	case *oippb.InferParameter_Int64Param:
		return timeoutMicros(v.Int64Param)
	case *oippb.InferParameter_Uint64Param: // Triton's proto has both
		if v.Uint64Param > uint64(maxTimeoutMicros) {
			return 0, timeoutRangeError(v.Uint64Param)
		}
		return timeoutMicros(int64(v.Uint64Param))
	}
	return 0, fmt.Errorf("parameter %q must be an int64_param or uint64_param (microseconds)", TimeoutParameter)
}

// withTimeout bounds ctx by d (0: not at all); call cancel when done.
func withTimeout(ctx context.Context, d time.Duration) (context.Context, context.CancelFunc) {
	if d == 0 {
		return ctx, func() {}
	}
	return context.WithTimeout(ctx, d)
}
