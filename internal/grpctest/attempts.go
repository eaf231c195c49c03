// Package grpctest holds gRPC test helpers shared by the protocols' tests.
package grpctest

import (
	"context"

	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/stats"
)

// Attempt is how one attempt of a client call ended.
type Attempt struct {
	Trailer metadata.MD
	Err     error
}

// Attempts is a client stats handler (grpc.WithStatsHandler) that reports
// how each attempt of a call ends, before the client decides whether to
// retry it.
type Attempts chan Attempt

// HandleRPC reports the end of each client attempt.
func (a Attempts) HandleRPC(_ context.Context, s stats.RPCStats) {
	if e, ok := s.(*stats.End); ok && e.IsClient() {
		a <- Attempt{e.Trailer, e.Error}
	}
}

// TagRPC returns ctx.
func (Attempts) TagRPC(ctx context.Context, _ *stats.RPCTagInfo) context.Context { return ctx }

// TagConn returns ctx.
func (Attempts) TagConn(ctx context.Context, _ *stats.ConnTagInfo) context.Context { return ctx }

// HandleConn does nothing.
func (Attempts) HandleConn(context.Context, stats.ConnStats) {}
