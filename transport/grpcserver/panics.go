package grpcserver

import (
	"context"
	"fmt"
	"log/slog"
	"runtime/debug"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// recoverPanics answers a call whose handler panicked (a bug in Grove)
// INTERNAL and logs the panic with its stack, as net/http does for a REST
// handler, rather than letting it end the process and every call it
// serves. It is the outermost interceptor, so it also covers the others.
type recoverPanics struct{ log *slog.Logger }

func (r recoverPanics) unary(ctx context.Context, req any, info *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (resp any, err error) {
	defer func() {
		if v := recover(); v != nil {
			resp, err = nil, r.failed(info.FullMethod, v)
		}
	}()
	return handler(ctx, req)
}

func (r recoverPanics) stream(srv any, ss grpc.ServerStream, info *grpc.StreamServerInfo, handler grpc.StreamHandler) (err error) {
	defer func() {
		if v := recover(); v != nil {
			err = r.failed(info.FullMethod, v)
		}
	}()
	return handler(srv, ss)
}

// failed logs the panic v of a call of method and returns its status.
func (r recoverPanics) failed(method string, v any) error {
	r.log.Error("internal error: a gRPC handler panicked; the call fails INTERNAL and the server goes on",
		"method", method, "panic", fmt.Sprint(v), "stack", string(debug.Stack()))
	return status.Error(codes.Internal, "internal error")
}
