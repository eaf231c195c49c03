package node

import (
	"context"
	"errors"
	"log/slog"
	"net"
	"testing"
	"time"

	"github.com/groveml/grove/cluster/coord"
	"github.com/groveml/grove/cluster/etcdtest"
	"github.com/groveml/grove/cluster/forward"
	"github.com/groveml/grove/cluster/placement"
	"github.com/groveml/grove/servables"
)

// forwardingAgent is an agent running as n1 (Run: it joins a throwaway
// etcd, and joins again when its session ends) whose config is empty,
// with the eager model m/ ready on one peer, n2, a member whose forward
// server runs each call with local. MoveWait is an hour: only the
// session's end can end a request waiting for m/ to move. It returns once
// n1 sees m/ ready on n2.
func forwardingAgent(t *testing.T, local forward.LocalFunc) *Agent {
	t.Helper()
	discard := slog.New(slog.DiscardHandler)
	srv := etcdtest.Start(t)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	dial := func() *coord.Client {
		cli, err := coord.Dial(ctx, coord.Config{Endpoints: []string{srv.Addr}, Prefix: "/t/", Logger: discard})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = cli.Close() })
		return cli
	}

	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	fs, err := forward.NewServer(local, forward.ServerOptions{Node: "n2", AllowUnauthenticatedPeers: true, Logger: discard})
	if err != nil {
		t.Fatal(err)
	}
	go func() { _ = fs.Serve(ln) }()
	t.Cleanup(fs.Stop)
	n2 := coord.Member{Member: placement.Member{Name: "n2", BudgetBytes: 1 << 30,
		Held: []placement.Held{{Path: "m/", Content: "c1", Bytes: 1, State: placement.Ready}}}, Advertise: ln.Addr().String()}
	if _, err := dial().Join(ctx, n2, time.Minute); err != nil {
		t.Fatal(err)
	}

	a, _, _ := startAgent(t, srv, func(c *Config) { c.LeaseTTL, c.Retry, c.MoveWait = 2*time.Second, 3*time.Second, time.Hour }, nil)
	for v := a.ready.Load(); len(v.peers["m/"]) == 0; v = a.ready.Load() {
		select {
		case <-v.changed:
		case <-ctx.Done():
			t.Fatal("n1 does not see m/ ready on n2 within 20 s")
		}
	}
	return a
}

// answer is what a.Forward returned.
type answer struct {
	ans forward.Answer
	err error
}

// forwardAsync forwards a request for m/ with input v through a, and
// returns where its answer comes.
func forwardAsync(ctx context.Context, t *testing.T, a *Agent, v float32) <-chan answer {
	got := make(chan answer, 1)
	req := forward.Request{ModelPath: "m/", Inputs: []servables.Tensor{scalar(t, v)}, Priority: forward.User}
	go func() {
		ans, err := a.Forward(ctx, req)
		got <- answer{ans, err}
	}()
	return got
}

// loseSession ends a's session behind its back, as etcd unreachable for
// a lease TTL would (its lease revoked), and returns once it has ended.
func loseSession(ctx context.Context, t *testing.T, a *Agent) *coord.Node {
	t.Helper()
	n := a.node.Load()
	if err := n.Leave(ctx); err != nil {
		t.Fatal(err)
	}
	select {
	case <-n.Done():
	case <-ctx.Done():
		t.Fatal("the session whose lease was revoked has not ended")
	}
	return n
}

// awaitJoinedAgain returns once a has joined again after its session old
// was lost: Run has done all it does when a session ends.
func awaitJoinedAgain(ctx context.Context, t *testing.T, a *Agent, old *coord.Node) {
	t.Helper()
	// The new session's first member snapshot, published after the node
	// is stored, replaces the view loaded before the node is checked.
	for v := a.ready.Load(); a.node.Load() == old; v = a.ready.Load() {
		select {
		case <-v.changed:
		case <-ctx.Done():
			t.Fatal("n1 has not joined again after its session was lost")
		}
	}
}

// checkSessionLost fails the test unless r is the answer of a request
// the node's lost session ended at once: Unavailable, the session-lost
// error (not the node's leaving) and its retry-after.
func checkSessionLost(t *testing.T, a *Agent, got <-chan answer, what string) {
	t.Helper()
	select {
	case r := <-got:
		sl, ok := errors.AsType[*sessionLostError](r.err)
		if !ok || sl.left || servables.KindOf(r.err) != servables.Unavailable || sl.RetryIn() != a.cfg.Retry {
			t.Fatalf("%s answered %+v %v; want Unavailable, the session-lost error, retry after %v", what, r.ans, r.err, a.cfg.Retry)
		}
	case <-time.After(10 * time.Second):
		t.Fatalf("%s is still unanswered 10 s after the session ended (its deadline is a minute away, MoveWait an hour)", what)
	}
}

// A request for an eager model that is already forwarding when the
// node's cluster session ends (etcd unreachable for a lease TTL: here its
// lease revoked behind the agent's back) keeps a call its peer is
// answering: the peer accepted it, and this node's session says nothing
// about the peer, so the request gets the peer's answer, and the call is
// not cancelled there. What would otherwise be refused or wait is
// answered at once as a new request would be (Unavailable, the
// session-lost error and its retry-after): the request its peer refuses
// Unavailable once the session has ended, and the request that waits for
// its model to move (MoveWait an hour) after its peer failed it.
func TestARequestForwardingWhenTheSessionIsLost(t *testing.T) {
	t.Run("its call in flight on its peer gets the peer's answer", func(t *testing.T) {
		arrived, release, cancelled := make(chan struct{}, 1), make(chan struct{}), make(chan struct{})
		a := forwardingAgent(t, func(ctx context.Context, _ forward.ForwardedRequest) (forward.Answer, error) {
			arrived <- struct{}{}
			select {
			case <-release:
				return forward.Answer{Outputs: []servables.Tensor{scalar(t, 8)}}, nil
			case <-ctx.Done():
				close(cancelled)
				return forward.Answer{}, ctx.Err()
			}
		})
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		got := forwardAsync(ctx, t, a, 1)
		<-arrived
		awaitJoinedAgain(ctx, t, a, loseSession(ctx, t, a))
		select {
		case r := <-got:
			t.Fatalf("the request in flight when the session ended answered %+v %v before its peer did", r.ans, r.err)
		case <-cancelled:
			t.Fatal("the call in flight on n2 when n1's session ended was cancelled there")
		default:
		}
		close(release)
		wantPeersAnswer(t, got, "the request in flight when the session ended")
	})

	t.Run("the request its peer refuses once the session ended fails at once", func(t *testing.T) {
		arrived, refuse := make(chan struct{}, 1), make(chan struct{})
		a := forwardingAgent(t, func(context.Context, forward.ForwardedRequest) (forward.Answer, error) {
			arrived <- struct{}{}
			<-refuse
			return forward.Answer{}, servables.NewError(servables.Unavailable, "model m/ is not ready on n2")
		})
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		got := forwardAsync(ctx, t, a, 1)
		<-arrived
		loseSession(ctx, t, a)
		close(refuse)
		checkSessionLost(t, a, got, "the request its peer refused once the session ended")
	})

	t.Run("the request waiting for its model to move fails at once", func(t *testing.T) {
		failed := make(chan struct{}, 1)
		a := forwardingAgent(t, func(context.Context, forward.ForwardedRequest) (forward.Answer, error) {
			defer func() { failed <- struct{}{} }()
			return forward.Answer{}, servables.NewError(servables.Unavailable, "model m/ is not ready on n2")
		})
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		got := forwardAsync(ctx, t, a, 1)
		<-failed
		loseSession(ctx, t, a)
		checkSessionLost(t, a, got, "the request waiting for its model to move when the session ended")
	})
}

// A call in flight on a peer when the node leaves the cluster (shutting
// down, after its drain) is not given up: the peer's answer, which comes
// after, is the request's.
func TestACallInFlightWhenTheNodeLeavesIsAnswered(t *testing.T) {
	arrived, release := make(chan struct{}, 1), make(chan struct{})
	a := forwardingAgent(t, func(ctx context.Context, _ forward.ForwardedRequest) (forward.Answer, error) {
		arrived <- struct{}{}
		select {
		case <-release:
			return forward.Answer{Outputs: []servables.Tensor{scalar(t, 8)}}, nil
		case <-ctx.Done():
			return forward.Answer{}, ctx.Err()
		}
	})
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	got := forwardAsync(ctx, t, a, 1)
	<-arrived
	if err := a.Leave(ctx); err != nil {
		t.Fatal(err)
	}
	select {
	case r := <-got:
		t.Fatalf("the request in flight answered %+v %v before its peer did", r.ans, r.err)
	default:
	}
	close(release)
	wantPeersAnswer(t, got, "the request in flight when the node left")
}

// wantPeersAnswer checks that what, forwarding through got, is answered
// with its peer's answer, 8, within 10 s of the peer's answer.
func wantPeersAnswer(t *testing.T, got <-chan answer, what string) {
	t.Helper()
	select {
	case r := <-got:
		if r.err != nil || len(r.ans.Outputs) != 1 || r.ans.Outputs[0].Float32s()[0] != 8 {
			t.Fatalf("%s answered %+v %v; want its peer's answer 8", what, r.ans, r.err)
		}
	case <-time.After(10 * time.Second):
		t.Fatalf("%s is unanswered 10 s after its peer answered", what)
	}
}

// scalar is the one-element float32 tensor x holding v.
func scalar(t *testing.T, v float32) servables.Tensor {
	t.Helper()
	x, err := servables.NewTensor("x", servables.Float32, []int64{1})
	if err != nil {
		t.Fatal(err)
	}
	x.Float32s()[0] = v
	return x
}
