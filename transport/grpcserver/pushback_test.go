package grpcserver

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/emptypb"

	"github.com/groveml/grove/auth"
)

func TestSetRetryPushbackSetsTheTrailerInMilliseconds(t *testing.T) {
	s := New(Options{})
	// The handler fails with the pushback the "wait" metadata gives.
	s.Register(&grpc.ServiceDesc{ServiceName: "test.Pushback", HandlerType: (*any)(nil), Methods: []grpc.MethodDesc{{MethodName: "Fail",
		Handler: func(_ any, ctx context.Context, dec func(any) error, _ grpc.UnaryServerInterceptor) (any, error) {
			if err := dec(new(emptypb.Empty)); err != nil {
				return nil, err
			}
			md, _ := metadata.FromIncomingContext(ctx)
			wait, err := time.ParseDuration(md.Get("wait")[0])
			if err != nil {
				return nil, status.Error(codes.InvalidArgument, err.Error())
			}
			SetRetryPushback(ctx, wait)
			return nil, status.Error(codes.Unavailable, "model m/ is loading")
		}}}}, struct{}{}, map[string]auth.Role{"Fail": auth.RoleInfer})
	conn := dial(t, s)
	for _, c := range []struct {
		wait time.Duration
		want []string
	}{
		{time.Second, []string{"1000"}},
		{3 * time.Second, []string{"3000"}},
		{1500 * time.Microsecond, []string{"1"}},
		{0, []string{"0"}},
		{-time.Second, nil},
	} {
		var tr metadata.MD
		ctx := metadata.AppendToOutgoingContext(t.Context(), "wait", c.wait.String())
		err := conn.Invoke(ctx, "/test.Pushback/Fail", new(emptypb.Empty), new(emptypb.Empty), grpc.Trailer(&tr))
		if status.Code(err) != codes.Unavailable || fmt.Sprint(tr.Get(RetryPushbackKey)) != fmt.Sprint(c.want) {
			t.Errorf("pushback of %v: %v, trailer %v; want UNAVAILABLE with %s %q", c.wait, err, tr, RetryPushbackKey, c.want)
		}
	}
}

func TestSetRetryPushbackOutsideAServerCallSetsNothing(t *testing.T) {
	SetRetryPushback(t.Context(), time.Second) // no server call: no panic, no effect
}

func TestACallOverTheInFlightLimitCarriesARetryPushbackOfOneSecond(t *testing.T) {
	path := filepath.Join(t.TempDir(), "tokens.yaml")
	h := sha256.Sum256([]byte("t-infer"))
	if err := os.WriteFile(path, []byte("tokens:\n  - {name: bidder, sha256: "+hex.EncodeToString(h[:])+", roles: [infer]}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	a, err := auth.New(auth.Config{TokensFile: path, MaxInFlight: 1, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	s := New(Options{Auth: a})
	entered, release := make(chan struct{}), make(chan struct{})
	s.Register(&grpc.ServiceDesc{ServiceName: "test.Held", HandlerType: (*any)(nil),
		Methods: []grpc.MethodDesc{{MethodName: "Hold",
			Handler: func(srv any, ctx context.Context, dec func(any) error, intercept grpc.UnaryServerInterceptor) (any, error) {
				in := new(emptypb.Empty)
				if err := dec(in); err != nil {
					return nil, err
				}
				return intercept(ctx, in, &grpc.UnaryServerInfo{Server: srv, FullMethod: "/test.Held/Hold"}, func(context.Context, any) (any, error) {
					close(entered)
					<-release
					return new(emptypb.Empty), nil
				})
			}}},
		Streams: []grpc.StreamDesc{{StreamName: "Stream", ClientStreams: true, ServerStreams: true,
			Handler: func(any, grpc.ServerStream) error { return nil }}}},
		struct{}{}, map[string]auth.Role{"Hold": auth.RoleInfer, "Stream": auth.RoleInfer})
	conn := dial(t, s)
	ctx := metadata.AppendToOutgoingContext(t.Context(), "authorization", "Bearer t-infer")
	held := make(chan error, 1)
	go func() { held <- conn.Invoke(ctx, "/test.Held/Hold", new(emptypb.Empty), new(emptypb.Empty)) }()
	<-entered

	var tr metadata.MD
	err = conn.Invoke(ctx, "/test.Held/Hold", new(emptypb.Empty), new(emptypb.Empty), grpc.Trailer(&tr))
	if status.Code(err) != codes.ResourceExhausted || fmt.Sprint(tr.Get(RetryPushbackKey)) != "[1000]" {
		t.Errorf("unary call over the limit: %v, trailer %v; want RESOURCE_EXHAUSTED with %s 1000", err, tr, RetryPushbackKey)
	}
	st, err := conn.NewStream(ctx, &grpc.StreamDesc{ClientStreams: true, ServerStreams: true}, "/test.Held/Stream")
	if err != nil {
		t.Fatal(err)
	}
	if err := st.RecvMsg(new(emptypb.Empty)); status.Code(err) != codes.ResourceExhausted || fmt.Sprint(st.Trailer().Get(RetryPushbackKey)) != "[1000]" {
		t.Errorf("stream over the limit: %v, trailer %v; want RESOURCE_EXHAUSTED with %s 1000", err, st.Trailer(), RetryPushbackKey)
	}
	close(release)
	if err := <-held; err != nil {
		t.Errorf("the call within the limit: %v", err)
	}
}
