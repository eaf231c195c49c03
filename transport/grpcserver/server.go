// Package grpcserver is the protocol-free part of Grove's gRPC API: the
// server and its options, the standard health service (following the
// server's readiness), server reflection (so grpcurl works without .proto
// files), the request id, the hardening every call gets (limits.go: TLS,
// required client certificates checked before a message is read, a
// keepalive enforcement policy, idle connections closed, dead peers found
// by pings, a handshake deadline, concurrent streams, the received
// message limit gRPC enforces while it reads and decompresses, and
// per-method limits below it; and h2guard's, which closes a connection
// whose client resets streams without pause), the gzip and deflate
// message encodings every service accepts (compress.go), and the trailer
// that tells a client when to retry a failed call (pushback.go). Protocol
// packages register their services on it with Register, declaring the
// role each method needs (auth.go); the server declares those of health
// and reflection.
//
// One server has one received-message limit, so a method whose messages
// are larger than the rest (a B&A RegisterModel carries whole models) is
// served on a second Server, on a listener of its own: Split registers a
// protocol's services on both, and Options.ServedElsewhere makes the
// first refuse those methods, before their message is read, naming where
// they are served.
package grpcserver

import (
	"cmp"
	"context"
	"crypto/tls"
	"fmt"
	"log/slog"
	"net"
	"runtime"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"go.opentelemetry.io/otel/trace"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/keepalive"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/reflection"
	reflectionv1 "google.golang.org/grpc/reflection/grpc_reflection_v1"
	reflectionv1alpha "google.golang.org/grpc/reflection/grpc_reflection_v1alpha"
	"google.golang.org/grpc/tap"

	"github.com/groveml/grove/auth"
	"github.com/groveml/grove/internal/reqid"
	"github.com/groveml/grove/tracing"
	"github.com/groveml/grove/transport/h2guard"
)

// Options configure the gRPC server.
type Options struct {
	// MaxMessageBytes bounds the received messages of methods without
	// their own limit in MethodMaxMessageBytes; 0 means 2 GiB, the B&A
	// sidecar's limit. Sent messages are bounded by 2 GiB.
	MaxMessageBytes int
	// MethodMaxMessageBytes bounds the received messages of the methods it
	// names ("/package.Service/Method"), above or below MaxMessageBytes
	// (a B&A RegisterModel carries whole models).
	MethodMaxMessageBytes map[string]int
	// TLS serves TLS with this config (see tlsconf); nil serves plaintext.
	TLS *tls.Config
	// Creds, when set, secures connections in place of TLS: for a
	// listener whose connections arrive already handshaken (the cluster's
	// peer port, which chooses a protocol by ALPN before gRPC sees them).
	Creds credentials.TransportCredentials
	// RequireClientCert refuses every method but the probes (IsProbe) with
	// UNAUTHENTICATED to a caller without a client certificate verified by
	// TLS, before the request message is read.
	RequireClientCert bool
	// InTapHandle, if set, runs on every call before its message is read,
	// after the client certificate check.
	InTapHandle tap.ServerInHandle
	// MaxConcurrentStreams bounds the concurrent calls of one connection;
	// 0 means gRPC's default (no limit).
	MaxConcurrentStreams uint32
	// KeepaliveMinTime is the shortest interval between client pings the
	// server tolerates (a faster client is sent GOAWAY); 0 means gRPC's
	// default, 5 minutes.
	KeepaliveMinTime time.Duration
	// MaxConnectionIdle closes, with GOAWAY, a connection that has had no
	// call in flight for this long, counted from its last call or, for a
	// connection that never made one (it sent the HTTP/2 preface and
	// nothing else), from its handshake; 0 means never.
	MaxConnectionIdle time.Duration
	// KeepaliveTime is how long a connection may stay silent before the
	// server pings it, and KeepaliveTimeout how long the server then waits
	// for the answer before it closes the connection (a dead peer); 0
	// means gRPC's defaults, 2 hours and 20 seconds.
	KeepaliveTime, KeepaliveTimeout time.Duration
	// HandshakeTimeout bounds a new connection's TLS handshake and the
	// client's HTTP/2 preface and settings, after which it is closed; 0
	// means gRPC's default, 120 seconds.
	HandshakeTimeout time.Duration
	// ServedElsewhere names methods ("/package.Service/Method") that are
	// registered on this server but served on another listener: each is
	// refused with UNIMPLEMENTED and the message given, after the caller's
	// credentials and role are checked and before the request message is
	// read (so a message over this server's limit is refused the same
	// way). Serve fails if one is not registered.
	ServedElsewhere map[string]string
	// Ready reports whether the server takes traffic (health SERVING); nil
	// means always.
	Ready func() bool
	// Auth authenticates the callers of every method whose role (declared
	// with Register) is not auth.Open, before their first message is read
	// (a tap handle), and applies their limits: the request rate there,
	// the calls in flight around the handler; nil serves every method
	// without authentication.
	Auth Authenticator
	// TracerProvider, when set, gives every call a server span continuing
	// the caller's traceparent metadata (package tracing); nil traces
	// nothing.
	TracerProvider trace.TracerProvider
	// RapidReset configures the guard every connection gets, which closes
	// one whose client resets streams faster than its budget (h2guard);
	// the zero value guards with h2guard's defaults, logs to
	// slog.Default() and counts nothing. Its Listener "" means "grpc".
	RapidReset h2guard.Options
	// Logger logs the panics of handlers, which fail their call INTERNAL
	// (nil: slog.Default()).
	Logger *slog.Logger
}

// Server is a gRPC server with the health and reflection services.
type Server struct {
	*grpc.Server
	health  *health.Server
	ready   func() bool
	drained atomic.Bool
	ctx     context.Context
	stop    context.CancelFunc
	watch   sync.Once
	auth    bool
	roles   map[string]auth.Role // by full method name (Register), written before Serve
	// elsewhere is Options.ServedElsewhere.
	elsewhere map[string]string
	// userTimeout is the keepalive timeout, which Serve sets as
	// TCP_USER_TIMEOUT on wrapped connections (userTimeoutListener).
	userTimeout time.Duration
}

// New returns a server with the health (open) and reflection (role read)
// services; register the protocols' services (Register), then Serve it and
// stop it with Drain and GracefulStop (or Stop).
func New(opts Options) *Server {
	if opts.MaxMessageBytes <= 0 {
		opts.MaxMessageBytes = 2<<30 - 1
	}
	if opts.Ready == nil {
		opts.Ready = func() bool { return true }
	}
	lim := newLimits(opts.MaxMessageBytes, opts.MethodMaxMessageBytes)
	rec := recoverPanics{log: cmp.Or(opts.Logger, slog.Default())}
	sopts := []grpc.ServerOption{grpc.MaxRecvMsgSize(lim.recvMax), grpc.MaxSendMsgSize(2<<30 - 1),
		grpc.NumStreamWorkers(uint32(runtime.GOMAXPROCS(0))),
		grpc.ChainUnaryInterceptor(rec.unary, lim.unary), grpc.ChainStreamInterceptor(rec.stream, lim.stream),
		grpc.KeepaliveEnforcementPolicy(keepalive.EnforcementPolicy{MinTime: opts.KeepaliveMinTime, PermitWithoutStream: true}),
		grpc.KeepaliveParams(keepalive.ServerParameters{MaxConnectionIdle: opts.MaxConnectionIdle,
			Time: opts.KeepaliveTime, Timeout: opts.KeepaliveTimeout})}
	if opts.HandshakeTimeout > 0 {
		sopts = append(sopts, grpc.ConnectionTimeout(opts.HandshakeTimeout))
	}
	if opts.TracerProvider != nil {
		sopts = append(sopts, grpc.ChainUnaryInterceptor(tracing.UnaryServer(opts.TracerProvider)),
			grpc.ChainStreamInterceptor(tracing.StreamServer(opts.TracerProvider)))
	}
	if opts.MaxConcurrentStreams > 0 {
		sopts = append(sopts, grpc.MaxConcurrentStreams(opts.MaxConcurrentStreams))
	}
	creds := opts.Creds
	if creds == nil && opts.TLS != nil {
		creds = credentials.NewTLS(opts.TLS)
	}
	if opts.RapidReset.Listener == "" {
		opts.RapidReset.Listener = "grpc"
	}
	sopts = append(sopts, grpc.Creds(h2guard.New(opts.RapidReset).Creds(creds)))
	roles := map[string]auth.Role{}
	next := opts.InTapHandle
	if len(opts.ServedElsewhere) > 0 {
		next = chainTaps(tapElsewhere(opts.ServedElsewhere), next)
	}
	if opts.Auth != nil {
		next = chainTaps(tapAuth(opts.Auth, roles), next)
		inflight := countInFlight{opts.Auth}
		sopts = append(sopts, grpc.ChainUnaryInterceptor(inflight.unary),
			grpc.ChainStreamInterceptor(inflight.stream, streamAuth(opts.Auth, roles)))
	}
	if th := inTap(opts.RequireClientCert, next); th != nil {
		sopts = append(sopts, grpc.InTapHandle(th))
	}
	gs := grpc.NewServer(sopts...)
	s := &Server{Server: gs, health: health.NewServer(), ready: opts.Ready, auth: opts.Auth != nil, roles: roles,
		elsewhere: opts.ServedElsewhere, userTimeout: opts.KeepaliveTimeout}
	if s.userTimeout <= 0 {
		s.userTimeout = defaultKeepaliveTimeout
	}
	s.ctx, s.stop = context.WithCancel(context.Background())
	// The probes are open; reflection describes every service (v1 and
	// v1alpha, which reflection.Register registers), as metadata is read.
	s.Register(&healthpb.Health_ServiceDesc, liveHealth{s.health, s},
		map[string]auth.Role{"Check": auth.Open, "Watch": auth.Open, "List": auth.Open})
	reflection.Register(gs)
	s.declare(&reflectionv1.ServerReflection_ServiceDesc, map[string]auth.Role{"ServerReflectionInfo": auth.RoleRead})
	s.declare(&reflectionv1alpha.ServerReflection_ServiceDesc, map[string]auth.Role{"ServerReflectionInfo": auth.RoleRead})
	return s
}

// Serve serves ln until the server stops, keeping the health status of
// every registered service in step with Options.Ready meanwhile. ln may
// wrap its connections (a connection limit, another guard): the TCP
// settings gRPC makes only on a bare TCP connection are made on the one
// they wrap.
// With Options.Auth, a registered method without a role (CheckRoles) is
// an error, so that no method goes unprotected; so is a method of
// Options.ServedElsewhere that is not registered (a misspelt name would
// leave the method served here).
func (s *Server) Serve(ln net.Listener) error {
	if s.auth {
		if err := s.CheckRoles(); err != nil {
			return err
		}
	}
	registered := Methods(s)
	for m := range s.elsewhere {
		if !slices.Contains(registered, m) {
			return fmt.Errorf("gRPC method %s is served elsewhere (Options.ServedElsewhere) but not registered here", m)
		}
	}
	s.watch.Do(func() { go s.watchReady() })
	return s.Server.Serve(userTimeoutListener{Listener: ln, timeout: s.userTimeout})
}

// watchReady keeps the health status ("" and each service) in step with
// Options.Ready until the server is drained or stopped, for Watch callers.
func (s *Server) watchReady() {
	t := time.NewTicker(100 * time.Millisecond)
	defer t.Stop()
	last := healthpb.HealthCheckResponse_UNKNOWN
	for {
		st := healthpb.HealthCheckResponse_NOT_SERVING
		if s.ready() {
			st = healthpb.HealthCheckResponse_SERVING
		}
		if st != last {
			for name := range s.GetServiceInfo() {
				s.health.SetServingStatus(name, st)
			}
			s.health.SetServingStatus("", st)
			last = st
		}
		select {
		case <-s.ctx.Done():
			return
		case <-t.C:
		}
	}
}

// liveHealth answers Check from Options.Ready at the time of the call
// (NOT_FOUND for unknown services, NOT_SERVING once drained); Watch
// streams the status watchReady keeps.
type liveHealth struct {
	*health.Server
	s *Server
}

func (h liveHealth) Check(ctx context.Context, req *healthpb.HealthCheckRequest) (*healthpb.HealthCheckResponse, error) {
	if _, err := h.Server.Check(ctx, req); err != nil {
		return nil, err
	}
	if h.s.drained.Load() || !h.s.ready() {
		return &healthpb.HealthCheckResponse{Status: healthpb.HealthCheckResponse_NOT_SERVING}, nil
	}
	return &healthpb.HealthCheckResponse{Status: healthpb.HealthCheckResponse_SERVING}, nil
}

// Drain marks every service NOT_SERVING, before a graceful stop.
func (s *Server) Drain() {
	s.drained.Store(true)
	s.stop()
	s.health.Shutdown()
}

// GracefulStop stops the server once the calls in flight have finished.
func (s *Server) GracefulStop() {
	s.stop()
	s.Server.GracefulStop()
}

// Stop stops the server at once, failing the calls in flight.
func (s *Server) Stop() {
	s.stop()
	s.Server.Stop()
}

// RequestID is the call's x-request-id metadata (up to 128 bytes), or a
// new random id.
func RequestID(ctx context.Context) string {
	// ValueFromIncomingContext looks the key up without copying the
	// call's metadata, as FromIncomingContext does.
	if v := metadata.ValueFromIncomingContext(ctx, "x-request-id"); len(v) > 0 && v[0] != "" && len(v[0]) <= 128 {
		return v[0]
	}
	return reqid.New()
}
