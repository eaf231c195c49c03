package oip

import (
	"context"
	"fmt"
	"io"
	"net"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	grpcstatus "google.golang.org/grpc/status"
	"google.golang.org/grpc/test/bufconn"

	"github.com/groveml/grove/actors"
	"github.com/groveml/grove/api/oip/oippb"
	"github.com/groveml/grove/internal/grpctest"
	"github.com/groveml/grove/servables"
	"github.com/groveml/grove/transport/grpcserver"
	"github.com/groveml/grove/transport/httpserver"
)

// retryPolicy is a grpc-go service config that retries a failed
// ModelInfer once, on UNAVAILABLE and RESOURCE_EXHAUSTED, after a backoff
// of 100 s unless the server's pushback says otherwise.
const retryPolicy = `{"methodConfig": [{"name": [{"service": "inference.GRPCInferenceService"}],
  "retryPolicy": {"maxAttempts": 2, "initialBackoff": "100s", "maxBackoff": "100s", "backoffMultiplier": 1,
    "retryableStatusCodes": ["UNAVAILABLE", "RESOURCE_EXHAUSTED"]}}]}`

// retryingClient serves b's OIP gRPC service on a Grove gRPC server in
// process and returns a client with retryPolicy whose attempts are
// reported on the channel returned.
func retryingClient(t *testing.T, b Backend) (oippb.GRPCInferenceServiceClient, grpctest.Attempts) {
	t.Helper()
	g := grpcserver.New(grpcserver.Options{})
	Register(httpserver.New(httpserver.Options{}), g, b, "1.0", nil)
	ln := bufconn.Listen(1 << 20)
	go func() { _ = g.Serve(ln) }()
	t.Cleanup(g.Stop)
	seen := make(grpctest.Attempts, 4)
	conn, err := grpc.NewClient("passthrough:///bufnet", grpc.WithContextDialer(func(ctx context.Context, _ string) (net.Conn, error) {
		return ln.DialContext(ctx)
	}), grpc.WithTransportCredentials(insecure.NewCredentials()), grpc.WithDefaultServiceConfig(retryPolicy), grpc.WithStatsHandler(seen))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = conn.Close() })
	return oippb.NewGRPCInferenceServiceClient(conn), seen
}

// rejoining is the error of a node rejoining its cluster: Unavailable,
// with a RetryIn (as the cluster's session-lost error).
type rejoining struct{ in time.Duration }

func (rejoining) Error() string            { return "this node lost its cluster session; rejoining" }
func (rejoining) Unwrap() error            { return servables.ErrUnavailable }
func (e rejoining) RetryIn() time.Duration { return e.in }

func TestGRPCInferFailuresCarryRESTsRetryAfterAsRetryPushback(t *testing.T) {
	for _, c := range []struct {
		name     string
		f        *fake
		model    string
		outputs  []string // requested outputs
		code     codes.Code
		pushback []string // the grpc-retry-pushback-ms values; nil: none
	}{
		{name: "full queue", f: &fake{err: fmt.Errorf("%w: queue full", servables.ErrOverloaded)}, code: codes.ResourceExhausted, pushback: []string{"1000"}},
		{name: "model is loading", f: &fake{err: &actors.LoadingError{Path: "m/", RetryAfter: 2500 * time.Millisecond}}, code: codes.Unavailable, pushback: []string{"3000"}},
		{name: "node rejoining its cluster", f: &fake{err: rejoining{1200 * time.Millisecond}}, code: codes.Unavailable, pushback: []string{"2000"}},
		{name: "server stopping", f: &fake{callErr: actors.ErrStopped}, code: codes.Unavailable},
		{name: "unknown model", f: &fake{}, model: "nope", code: codes.NotFound},
		{name: "model not found", f: &fake{err: fmt.Errorf("%w: model m/", actors.ErrModelNotFound)}, code: codes.NotFound},
		{name: "output requested twice", f: &fake{}, outputs: []string{"y", "y"}, code: codes.InvalidArgument},
		{name: "invalid input", f: &fake{err: fmt.Errorf("%w: the model takes 2 inputs", servables.ErrInvalidInput)}, code: codes.InvalidArgument},
		{name: "deadline", f: &fake{err: fmt.Errorf("%w: 10ms", servables.ErrDeadlineExceeded)}, code: codes.DeadlineExceeded},
	} {
		t.Run(c.name, func(t *testing.T) {
			client, seen := retryingClient(t, c.f)
			model := c.model
			if model == "" {
				model = "m"
			}
			// The first attempt's end is read before the client retries
			// (after its pushback, or after 100 s without one); the call
			// is then canceled, so no test waits for a retry.
			ctx, cancel := context.WithCancel(t.Context())
			defer cancel()
			done := make(chan error, 1)
			req := &oippb.ModelInferRequest{ModelName: model, Inputs: fp32Input()}
			for _, o := range c.outputs {
				req.Outputs = append(req.Outputs, &oippb.ModelInferRequest_InferRequestedOutputTensor{Name: o})
			}
			go func() {
				_, err := client.ModelInfer(ctx, req)
				done <- err
			}()
			first := <-seen
			cancel()
			<-done
			if grpcstatus.Code(first.Err) != c.code {
				t.Errorf("first attempt: %v, want %v", first.Err, c.code)
			}
			if got := first.Trailer.Get("grpc-retry-pushback-ms"); fmt.Sprint(got) != fmt.Sprint(c.pushback) {
				t.Errorf("grpc-retry-pushback-ms %q, want %q", got, c.pushback)
			}
		})
	}
}

// overloadedOnce fails its first call with a full queue and answers the
// others as fake does.
type overloadedOnce struct {
	fake
	calls atomic.Int32
}

func (o *overloadedOnce) Infer(ctx context.Context, reqs []actors.Request) ([]actors.Result, error) {
	if o.calls.Add(1) == 1 {
		return []actors.Result{{ModelPath: reqs[0].ModelPath, Err: fmt.Errorf("%w: queue full", servables.ErrOverloaded)}}, nil
	}
	return o.fake.Infer(ctx, reqs)
}

func TestAGRPCClientWithARetryPolicyRetriesAFullQueueAfterItsPushback(t *testing.T) {
	b := &overloadedOnce{}
	client, seen := retryingClient(t, b)
	// The policy's own backoff is 100 s: a retry within the call's 20 s
	// is one that waited the server's pushback (1 s) instead.
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
	defer cancel()
	resp, err := client.ModelInfer(ctx, &oippb.ModelInferRequest{ModelName: "m", Inputs: fp32Input()})
	if err != nil || resp.GetModelName() != "m" {
		t.Fatalf("ModelInfer: %v %v, want the retry's answer", resp, err)
	}
	if n := b.calls.Load(); n != 2 {
		t.Errorf("%d calls reached the backend, want 2 (the full queue, then the retry)", n)
	}
	if first := <-seen; grpcstatus.Code(first.Err) != codes.ResourceExhausted || fmt.Sprint(first.Trailer.Get("grpc-retry-pushback-ms")) != "[1000]" {
		t.Errorf("first attempt: %v, trailer %v; want RESOURCE_EXHAUSTED with grpc-retry-pushback-ms 1000", first.Err, first.Trailer)
	}
}

func TestAStreamAnswersAFullQueueInItsMessagesWithNoRetryPushback(t *testing.T) {
	client, _ := retryingClient(t, &fake{err: fmt.Errorf("%w: queue full", servables.ErrOverloaded)})
	stream, err := client.ModelStreamInfer(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if err := stream.Send(&oippb.ModelInferRequest{ModelName: "m", Inputs: fp32Input()}); err != nil {
		t.Fatal(err)
	}
	if err := stream.CloseSend(); err != nil {
		t.Fatal(err)
	}
	if resp, err := stream.Recv(); err != nil || resp.GetErrorMessage() == "" {
		t.Fatalf("answer: %v %v, want the full queue's error message", resp, err)
	}
	if _, err := stream.Recv(); err != io.EOF {
		t.Fatalf("end of stream: %v, want EOF", err)
	}
	if got := stream.Trailer().Get("grpc-retry-pushback-ms"); got != nil {
		t.Errorf("grpc-retry-pushback-ms %q at the end of a stream that succeeded, want none", got)
	}
}
