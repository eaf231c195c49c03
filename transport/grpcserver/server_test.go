package grpcserver

import (
	"context"
	"net"
	"sync/atomic"
	"testing"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/grpc/test/bufconn"
)

// dial serves s on an in-memory listener and returns a client connection.
func dial(t *testing.T, s *Server) *grpc.ClientConn {
	t.Helper()
	ln := bufconn.Listen(1 << 20)
	go func() { _ = s.Serve(ln) }()
	t.Cleanup(s.Stop)
	conn, err := grpc.NewClient("passthrough:///bufconn", grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithContextDialer(func(ctx context.Context, _ string) (net.Conn, error) { return ln.DialContext(ctx) }))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = conn.Close() })
	return conn
}

func TestHealthCheckFollowsReadinessAtTheTimeOfTheCall(t *testing.T) {
	var ready atomic.Bool
	s := New(Options{Ready: ready.Load})
	c := healthpb.NewHealthClient(dial(t, s))
	check := func(service string) (healthpb.HealthCheckResponse_ServingStatus, error) {
		resp, err := c.Check(t.Context(), &healthpb.HealthCheckRequest{Service: service})
		return resp.GetStatus(), err
	}
	if st, err := check(""); err != nil || st != healthpb.HealthCheckResponse_NOT_SERVING {
		t.Errorf("before ready: %v %v, want NOT_SERVING", st, err)
	}
	ready.Store(true)
	if st, err := check(""); err != nil || st != healthpb.HealthCheckResponse_SERVING {
		t.Errorf("ready: %v %v, want SERVING", st, err)
	}
	if _, err := check("no.such.Service"); status.Code(err) != codes.NotFound {
		t.Errorf("unknown service: %v, want NOT_FOUND", err)
	}
	s.Drain()
	if st, err := check(""); err != nil || st != healthpb.HealthCheckResponse_NOT_SERVING {
		t.Errorf("drained: %v %v, want NOT_SERVING", st, err)
	}
}

func TestRequestIDComesFromMetadataOrIsNew(t *testing.T) {
	ctx := metadata.NewIncomingContext(t.Context(), metadata.Pairs("x-request-id", "abc"))
	if id := RequestID(ctx); id != "abc" {
		t.Errorf("given abc: %q", id)
	}
	for _, md := range []metadata.MD{nil, metadata.Pairs("x-request-id", ""), metadata.Pairs("x-request-id", string(make([]byte, 129)))} {
		ctx := t.Context()
		if md != nil {
			ctx = metadata.NewIncomingContext(ctx, md)
		}
		if id := RequestID(ctx); len(id) != 32 {
			t.Errorf("metadata %v: id %q, want 32 new hex digits", md, id)
		}
	}
}
