package deeprec

import (
	"context"
	"fmt"
	"net"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"
	"google.golang.org/grpc/test/bufconn"

	"github.com/groveml/grove/actors"
	"github.com/groveml/grove/api/deeprec/deeprecpb"
	"github.com/groveml/grove/internal/grpctest"
	"github.com/groveml/grove/servables"
	"github.com/groveml/grove/transport/grpcserver"
	"github.com/groveml/grove/transport/httpserver"
)

// failing is a Backend that fails every request with err, or the whole
// call with callErr.
type failing struct{ err, callErr error }

func (f failing) Infer(_ context.Context, reqs []actors.Request) ([]actors.Result, error) {
	if f.callErr != nil {
		return nil, f.callErr
	}
	return []actors.Result{{ModelPath: reqs[0].ModelPath, Err: f.err}}, nil
}
func (failing) ModelMetadata(string) (servables.Metadata, string, bool) {
	return servables.Metadata{}, "", false
}

func TestGRPCPredictFailuresCarryRESTsRetryAfterAsRetryPushback(t *testing.T) {
	for _, c := range []struct {
		name     string
		f        failing
		path     string // the model path; "m" if empty, "-" for none
		code     codes.Code
		pushback []string // the grpc-retry-pushback-ms values; nil: none
	}{
		{name: "full queue", f: failing{err: fmt.Errorf("%w: queue full", servables.ErrOverloaded)}, code: codes.ResourceExhausted, pushback: []string{"1000"}},
		{name: "model is loading", f: failing{err: &actors.LoadingError{Path: "m/", RetryAfter: 2500 * time.Millisecond}}, code: codes.Unavailable, pushback: []string{"3000"}},
		{name: "server stopping", f: failing{callErr: actors.ErrStopped}, code: codes.Unavailable, pushback: []string{"1000"}},
		{name: "no model path", path: "-", code: codes.NotFound},
		{name: "model not found", f: failing{err: fmt.Errorf("%w: model m/", actors.ErrModelNotFound)}, code: codes.NotFound},
		{name: "invalid input", f: failing{err: fmt.Errorf("%w: the model takes 2 inputs", servables.ErrInvalidInput)}, code: codes.InvalidArgument},
		{name: "model failed", f: failing{err: fmt.Errorf("%w: shapes cannot be multiplied", servables.ErrCrashed)}, code: codes.Internal},
	} {
		t.Run(c.name, func(t *testing.T) {
			g := grpcserver.New(grpcserver.Options{})
			Register(httpserver.New(httpserver.Options{}), g, c.f)
			ln := bufconn.Listen(1 << 20)
			go func() { _ = g.Serve(ln) }()
			t.Cleanup(g.Stop)
			seen := make(grpctest.Attempts, 4)
			conn, err := grpc.NewClient("passthrough:///bufnet", grpc.WithContextDialer(func(ctx context.Context, _ string) (net.Conn, error) {
				return ln.DialContext(ctx)
			}), grpc.WithTransportCredentials(insecure.NewCredentials()), grpc.WithStatsHandler(seen),
				grpc.WithDefaultServiceConfig(`{"methodConfig": [{"name": [{"service": "grove.deeprec.v1.Processor"}],
  "retryPolicy": {"maxAttempts": 2, "initialBackoff": "100s", "maxBackoff": "100s", "backoffMultiplier": 1,
    "retryableStatusCodes": ["UNAVAILABLE", "RESOURCE_EXHAUSTED"]}}]}`))
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = conn.Close() })
			path := c.path
			switch path {
			case "":
				path = "m"
			case "-":
				path = ""
			}
			req := &deeprecpb.ProcessorPredictRequest{ModelPath: path, Request: &deeprecpb.PredictRequest{Inputs: map[string]*deeprecpb.ArrayProto{
				"x": {Dtype: deeprecpb.ArrayDataType_DT_FLOAT, ArrayShape: &deeprecpb.ArrayShape{Dim: []int64{1}}, FloatVal: []float32{1}}}}}
			// The first attempt's end is read before the client retries
			// (after its pushback, or after 100 s without one); the call
			// is then canceled, so no test waits for a retry.
			ctx, cancel := context.WithCancel(t.Context())
			defer cancel()
			done := make(chan error, 1)
			go func() {
				_, err := deeprecpb.NewProcessorClient(conn).Predict(ctx, req)
				done <- err
			}()
			first := <-seen
			cancel()
			<-done
			if status.Code(first.Err) != c.code {
				t.Errorf("first attempt: %v, want %v", first.Err, c.code)
			}
			if got := first.Trailer.Get("grpc-retry-pushback-ms"); fmt.Sprint(got) != fmt.Sprint(c.pushback) {
				t.Errorf("grpc-retry-pushback-ms %q, want %q", got, c.pushback)
			}
		})
	}
}
