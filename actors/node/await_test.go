package node

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"testing"
	"time"

	"google.golang.org/grpc/codes"

	"github.com/groveml/grove/actors"
	"github.com/groveml/grove/cluster/coord"
	"github.com/groveml/grove/cluster/forward"
	"github.com/groveml/grove/cluster/placement"
	"github.com/groveml/grove/servables"
)

// A request whose deadline ends while it waits for its on-demand model's
// placement or load is answered "model is loading": placed nowhere yet,
// turned away by a node not yet holding it, or sent to the node placed to
// load it, whose answer the deadline cut short. A ready copy's answer
// past the deadline, and a model's own failure, stay what they are.
func TestAwaitExpiredSaysLoadingWhileTheModelIsPlacedOrLoaded(t *testing.T) {
	cut := &forward.RemoteError{Node: "b", Kind: servables.DeadlineExceeded, Code: codes.DeadlineExceeded, Message: "context deadline exceeded"}
	notYet := &forward.RemoteError{Node: "b", Kind: servables.Unavailable, Code: codes.Unavailable, Message: "model w/ is loading; retry after 1 s"}
	bad := &forward.RemoteError{Node: "b", Kind: servables.InvalidInput, Code: codes.InvalidArgument, Message: "bad input"}
	for _, c := range []struct {
		name    string
		err     error
		toReady bool
		loading bool
	}{
		{"placed nowhere yet", nil, false, true},
		{"turned away by a node not holding it yet", notYet, false, true},
		{"cut short on the node placed to load it", cut, false, true},
		{"cut short on a node that had it ready", cut, true, false},
		{"a model's own failure", bad, false, false},
	} {
		got := awaitExpired("w/", c.err, nil, c.toReady)
		var le *actors.LoadingError
		if isLoading := errors.As(got, &le); isLoading != c.loading {
			t.Errorf("%s: %v, want \"model is loading\" %v", c.name, got, c.loading)
		}
		if !c.loading && got != c.err {
			t.Errorf("%s: %v, want the error itself %v", c.name, got, c.err)
		}
	}
}

// The "model is loading" answer's retry-after is the estimate of the node
// loading the model: from the last answer, else from the one before (the
// deadline often ends the wait on a call that never reached a node), and
// 1 s when no node gave one.
func TestAwaitExpiredRetryAfterIsTheLoadingNodesEstimate(t *testing.T) {
	hinted := &forward.RemoteError{Node: "b", Kind: servables.Unavailable, Code: codes.Unavailable, Message: "model w/ is loading; retry after 4 s", RetryAfter: 3200 * time.Millisecond}
	noHint := &forward.RemoteError{Node: "b", Kind: servables.Unavailable, Code: codes.Unavailable, Message: "model w/ is loading"}
	cut := &forward.RemoteError{Node: "b", Kind: servables.DeadlineExceeded, Code: codes.DeadlineExceeded, Message: "context deadline exceeded"}
	for _, c := range []struct {
		name      string
		err, last error
		want      time.Duration
	}{
		{"the last answer's estimate", hinted, nil, 3200 * time.Millisecond},
		{"cut short after an answer with an estimate", cut, hinted, 3200 * time.Millisecond},
		{"placed nowhere yet", nil, nil, time.Second},
		{"no estimate given", noHint, cut, time.Second},
	} {
		var le *actors.LoadingError
		if got := awaitExpired("w/", c.err, c.last, false); !errors.As(got, &le) || le.RetryAfter != c.want {
			t.Errorf("%s: %v, want loading, retry after %v", c.name, got, c.want)
		}
	}
}

// A call to the node placed to load an on-demand model that comes back
// DeadlineExceeded (the request's deadline, which the call carries, ended
// there a moment before it ends here) is answered "model is loading" at
// once, as the same wait ended by the deadline here is: which node sees
// the deadline first must not decide the caller's answer. The loading
// node here answers so at once, long before the deadline.
func TestACallCutShortOnTheLoadingNodeSaysLoadingWhicheverNodeSeesTheDeadlineFirst(t *testing.T) {
	discard := slog.New(slog.DiscardHandler)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	fs, err := forward.NewServer(forward.LocalFunc(func(context.Context, forward.ForwardedRequest) (forward.Answer, error) {
		return forward.Answer{}, fmt.Errorf("%w: no answer within the request's deadline", servables.ErrDeadlineExceeded)
	}), forward.ServerOptions{Node: "n2", AllowUnauthenticatedPeers: true, Logger: discard})
	if err != nil {
		t.Fatal(err)
	}
	go func() { _ = fs.Serve(ln) }()
	t.Cleanup(fs.Stop)
	fc := forward.NewClient(forward.ClientOptions{Logger: discard})
	t.Cleanup(fc.Close)

	a := bareAgent()
	a.cfg.Forward, a.cfg.AwaitPoll = fc, time.Hour
	a.onDemand.Store(&onDemandSet{paths: map[string]bool{"w/": true}})
	a.members.Store(&coord.Members{List: []coord.Member{{Member: placement.Member{Name: "n2"}, Advertise: ln.Addr().String()}}})
	a.table.Store(&coord.Placement{Plan: placement.Plan{Table: placement.Table{"w/": {"n2"}}}})
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	_, err = a.Forward(ctx, forward.Request{ModelPath: "w/", Priority: forward.User})
	if le, ok := errors.AsType[*actors.LoadingError](err); !ok || le.Path != "w/" {
		t.Fatalf("answer %v, want \"model is loading\" for w/", err)
	}
	if ctx.Err() != nil {
		t.Fatal("answered only at the deadline here")
	}
}
