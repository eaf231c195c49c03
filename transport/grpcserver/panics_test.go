package grpcserver

import (
	"bytes"
	"context"
	"log/slog"
	"strings"
	"testing"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/emptypb"

	"github.com/groveml/grove/auth"
)

func TestAHandlerThatPanicsFailsItsCallInternalAndTheServerServesOn(t *testing.T) {
	var logged bytes.Buffer
	s := New(Options{Logger: slog.New(slog.NewTextHandler(&logged, nil))})
	// As generated code does: the unary handler runs through the interceptor.
	s.Register(&grpc.ServiceDesc{ServiceName: "test.Panics", HandlerType: (*any)(nil),
		Methods: []grpc.MethodDesc{{MethodName: "Unary",
			Handler: func(srv any, ctx context.Context, dec func(any) error, in grpc.UnaryServerInterceptor) (any, error) {
				req := new(emptypb.Empty)
				if err := dec(req); err != nil {
					return nil, err
				}
				h := func(context.Context, any) (any, error) { panic("unary boom") }
				if in == nil {
					return h(ctx, req)
				}
				return in(ctx, req, &grpc.UnaryServerInfo{Server: srv, FullMethod: "/test.Panics/Unary"}, h)
			}}},
		Streams: []grpc.StreamDesc{{StreamName: "Stream", ServerStreams: true, ClientStreams: true,
			Handler: func(any, grpc.ServerStream) error { panic("stream boom") }}},
	}, struct{}{}, map[string]auth.Role{"Unary": auth.RoleInfer, "Stream": auth.RoleInfer})
	conn := dial(t, s)

	err := conn.Invoke(t.Context(), "/test.Panics/Unary", new(emptypb.Empty), new(emptypb.Empty))
	if status.Code(err) != codes.Internal {
		t.Errorf("unary call whose handler panics: %v, want INTERNAL", err)
	}
	st, err := conn.NewStream(t.Context(), &grpc.StreamDesc{ServerStreams: true, ClientStreams: true}, "/test.Panics/Stream")
	if err != nil {
		t.Fatal(err)
	}
	if err := st.RecvMsg(new(emptypb.Empty)); status.Code(err) != codes.Internal {
		t.Errorf("stream whose handler panics: %v, want INTERNAL", err)
	}
	hc, err := grpc_health_v1.NewHealthClient(conn).Check(t.Context(), &grpc_health_v1.HealthCheckRequest{})
	if err != nil || hc.GetStatus() != grpc_health_v1.HealthCheckResponse_SERVING {
		t.Errorf("health check after the panics: %v, %v; want SERVING", hc, err)
	}
	for _, want := range []string{"unary boom", "stream boom", "method=/test.Panics/Unary", "method=/test.Panics/Stream", "stack="} {
		if !strings.Contains(logged.String(), want) {
			t.Errorf("the log does not hold %q:\n%s", want, logged.String())
		}
	}
}
