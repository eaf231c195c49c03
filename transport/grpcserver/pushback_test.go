package grpcserver

import (
	"context"
	"fmt"
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
