package grpcserver

import (
	"context"
	"strings"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/peer"
	"google.golang.org/grpc/status"
	"google.golang.org/grpc/tap"
	"google.golang.org/protobuf/proto"

	"github.com/groveml/grove/transport/tlsconf"
)

// probeMethods need no credentials: kubelet and load balancers call them.
var probeMethods = map[string]bool{
	"/inference.GRPCInferenceService/ServerLive":  true,
	"/inference.GRPCInferenceService/ServerReady": true,
	"/inference.GRPCInferenceService/ModelReady":  true,
}

// IsProbe reports whether the method ("/package.Service/Method") is a
// probe, which needs no credentials: gRPC health and the OIP server live,
// server ready and model ready.
func IsProbe(fullMethod string) bool {
	return probeMethods[fullMethod] || strings.HasPrefix(fullMethod, "/grpc.health.v1.Health/")
}

// inTap returns the handle that refuses, before the message is read, a
// caller without a verified client certificate (if requireCert) and then
// runs next; nil if there is nothing to do.
func inTap(requireCert bool, next tap.ServerInHandle) tap.ServerInHandle {
	if !requireCert {
		return next
	}
	return func(ctx context.Context, info *tap.Info) (context.Context, error) {
		if !IsProbe(info.FullMethodName) && !hasVerifiedClientCert(ctx) {
			return nil, status.Error(codes.Unauthenticated, "a client certificate signed by the client CA is required (tls.client_auth is require)")
		}
		if next != nil {
			return next(ctx, info)
		}
		return ctx, nil
	}
}

// tapElsewhere refuses a call of a method elsewhere names (full name to
// message) with UNIMPLEMENTED and its message, before the request message
// is read: a method another listener serves (Options.ServedElsewhere).
func tapElsewhere(elsewhere map[string]string) tap.ServerInHandle {
	return func(ctx context.Context, info *tap.Info) (context.Context, error) {
		if msg, ok := elsewhere[info.FullMethodName]; ok {
			return nil, status.Error(codes.Unimplemented, msg)
		}
		return ctx, nil
	}
}

// chainTaps runs first, then next (if any) with the context first returns.
func chainTaps(first, next tap.ServerInHandle) tap.ServerInHandle {
	if next == nil {
		return first
	}
	return func(ctx context.Context, info *tap.Info) (context.Context, error) {
		ctx, err := first(ctx, info)
		if err != nil {
			return nil, err
		}
		return next(ctx, info)
	}
}

// hasVerifiedClientCert reports whether the call's connection carries a
// client certificate verified against the client CA.
func hasVerifiedClientCert(ctx context.Context) bool {
	p, ok := peer.FromContext(ctx)
	if !ok {
		return false
	}
	ti, ok := p.AuthInfo.(credentials.TLSInfo)
	return ok && tlsconf.HasVerifiedClientCert(&ti.State)
}

// limits holds the received-message limit of each method: gRPC reads up
// to recvMax (the largest limit), and the interceptors refuse a message
// over its own method's smaller limit with RESOURCE_EXHAUSTED before the
// handler sees it.
type limits struct {
	def, recvMax int
	method       map[string]int
}

func newLimits(def int, method map[string]int) *limits {
	l := &limits{def: def, recvMax: def, method: method}
	for _, n := range method {
		l.recvMax = max(l.recvMax, n)
	}
	return l
}

// check refuses m if it is larger than fullMethod's limit.
func (l *limits) check(fullMethod string, m any) error {
	lim, ok := l.method[fullMethod]
	if !ok {
		lim = l.def
	}
	if lim >= l.recvMax { // gRPC itself enforces recvMax
		return nil
	}
	pm, ok := m.(proto.Message)
	if !ok {
		return nil
	}
	if n := proto.Size(pm); n > lim {
		return status.Errorf(codes.ResourceExhausted, "received message of %d bytes exceeds the limit of %d bytes for %s", n, lim, fullMethod)
	}
	return nil
}

func (l *limits) unary(ctx context.Context, req any, info *grpc.UnaryServerInfo, h grpc.UnaryHandler) (any, error) {
	if err := l.check(info.FullMethod, req); err != nil {
		return nil, err
	}
	return h(ctx, req)
}

func (l *limits) stream(srv any, ss grpc.ServerStream, info *grpc.StreamServerInfo, h grpc.StreamHandler) error {
	return h(srv, &limitedStream{ServerStream: ss, l: l, method: info.FullMethod})
}

// limitedStream checks each received message against its method's limit.
type limitedStream struct {
	grpc.ServerStream
	l      *limits
	method string
}

func (s *limitedStream) RecvMsg(m any) error {
	if err := s.ServerStream.RecvMsg(m); err != nil {
		return err
	}
	return s.l.check(s.method, m)
}
