// Package rpc serves Grove's gRPC services on one listener: the B&A
// inference sidecar's InferenceService, the Open Inference Protocol's
// GRPCInferenceService, the standard health service and server reflection
// (so grpcurl works without .proto files).
package rpc

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"log/slog"
	"runtime"
	"sync/atomic"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/reflection"

	"github.com/groveml/grove/api/batch"
	"github.com/groveml/grove/api/oippb"
	"github.com/groveml/grove/api/sidecarpb"
)

// Backend is what the gRPC services need from the actors.
type Backend interface {
	batch.Inferer
	Registry
	Models
	// Ready reports whether the server takes traffic (health SERVING).
	Ready() bool
}

// Options configure the gRPC server.
type Options struct {
	// MaxMessageBytes bounds received messages (a RegisterModel carries
	// whole models); 0 means 2 GiB, the B&A sidecar's limit.
	MaxMessageBytes int
	// Logger receives errors; nil means slog.Default().
	Logger *slog.Logger
	// Version is the server version OIP ServerMetadata reports.
	Version string
}

// Server is the gRPC server with Grove's services registered.
type Server struct {
	*grpc.Server
	health  *health.Server
	b       Backend
	drained atomic.Bool
	stop    context.CancelFunc
}

// New returns a gRPC server over b; Serve it on a listener, and Stop it
// with GracefulStop or Stop.
func New(b Backend, opts Options) *Server {
	if opts.MaxMessageBytes <= 0 {
		opts.MaxMessageBytes = 2<<30 - 1
	}
	gs := grpc.NewServer(grpc.MaxRecvMsgSize(opts.MaxMessageBytes), grpc.MaxSendMsgSize(opts.MaxMessageBytes),
		grpc.NumStreamWorkers(uint32(runtime.GOMAXPROCS(0))))
	s := &Server{Server: gs, health: health.NewServer(), b: b}
	sidecarpb.RegisterInferenceServiceServer(gs, &sidecar{inf: b, reg: b})
	oippb.RegisterGRPCInferenceServiceServer(gs, &oipServer{b: b, version: opts.Version})
	healthpb.RegisterHealthServer(gs, liveHealth{s.health, s})
	reflection.Register(gs)
	var ctx context.Context
	ctx, s.stop = context.WithCancel(context.Background())
	go s.watchReady(ctx)
	return s
}

// watchReady keeps the health status ("" and each service) in step with
// b.Ready until ctx is done.
func (s *Server) watchReady(ctx context.Context) {
	t := time.NewTicker(100 * time.Millisecond)
	defer t.Stop()
	last := healthpb.HealthCheckResponse_UNKNOWN
	for {
		st := healthpb.HealthCheckResponse_NOT_SERVING
		if s.b.Ready() {
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
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// liveHealth answers Check from Backend.Ready at the time of the call
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
	if h.s.drained.Load() || !h.s.b.Ready() {
		return &healthpb.HealthCheckResponse{Status: healthpb.HealthCheckResponse_NOT_SERVING}, nil
	}
	return &healthpb.HealthCheckResponse{Status: healthpb.HealthCheckResponse_SERVING}, nil
}

// Drain marks every service NOT_SERVING (before a graceful stop).
func (s *Server) Drain() {
	s.drained.Store(true)
	s.stop()
	s.health.Shutdown()
}

// requestID is the call's x-request-id metadata, or a random id.
func requestID(ctx context.Context) string {
	if md, ok := metadata.FromIncomingContext(ctx); ok {
		if v := md.Get("x-request-id"); len(v) > 0 && v[0] != "" && len(v[0]) <= 128 {
			return v[0]
		}
	}
	var b [16]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}
