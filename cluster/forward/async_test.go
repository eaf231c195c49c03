package forward

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/groveml/grove/servables"
)

// asyncNode is a node whose Local is also an AsyncLocal: PredictAsync
// runs the node's function on a goroutine of its own (or, with inline, on
// the caller's) and counts its calls.
type asyncNode struct {
	*node
	inline bool
	async  atomic.Int64
}

func (n *asyncNode) PredictAsync(ctx context.Context, req ForwardedRequest, done func(Answer, error)) {
	n.async.Add(1)
	if n.inline {
		done(n.node.Predict(ctx, req))
		return
	}
	go func() { done(n.node.Predict(ctx, req)) }()
}

// TestAsyncLocal: on the framed transport a Local that is an AsyncLocal
// gets every call through PredictAsync, whether done runs on another
// goroutine or inside PredictAsync; answers, failures and concurrent
// calls on one connection come back to their own callers.
func TestAsyncLocal(t *testing.T) {
	for _, inline := range []bool{false, true} {
		n := &asyncNode{node: &node{name: "b", fn: compute}, inline: inline}
		srv, err := NewServer(n, ServerOptions{Node: "b", AllowUnauthenticatedPeers: true})
		if err != nil {
			t.Fatal(err)
		}
		s := serveOn(t, srv)
		c := NewClient(ClientOptions{})
		t.Cleanup(c.Close)
		var wg sync.WaitGroup
		for i := range 16 {
			wg.Go(func() {
				req := sumRequest(t)
				if i%4 == 3 {
					req.Inputs = []servables.Tensor{f32(t, "x", []int64{2}, 1, 2)} // not [rows, cols]: compute refuses it
					if _, err := c.Forward(testCtx(t), []Peer{s}, req); servables.KindOf(err) != servables.InvalidInput {
						t.Errorf("inline=%v: a refused request: %v, want InvalidInput", inline, err)
					}
					return
				}
				a, err := c.Forward(testCtx(t), []Peer{s}, req)
				if err != nil {
					t.Errorf("inline=%v: %v", inline, err)
					return
				}
				checkSums(t, a, "b")
			})
		}
		wg.Wait()
		if got := n.async.Load(); got != 16 {
			t.Errorf("inline=%v: PredictAsync ran %d of 16 calls", inline, got)
		}
	}
}

// serveOn serves srv, a node named "b", on 127.0.0.1 at a free port
// until the test ends.
func serveOn(t *testing.T, srv *Server) Peer {
	t.Helper()
	return serveLoopback(t, &node{name: "b"}, srv, srv.Serve, srv.Stop).peer
}

// TestLeadHandsOverReading: on one framed connection, the call that
// reads (the first one) hands the reading on when it leaves, so the calls
// still waiting get their answers: when it was canceled (it returns at
// once, and its late answer is dropped) and when its own answer came
// first; a call made after them all reads for itself again.
func TestLeadHandsOverReading(t *testing.T) {
	gates := map[string]chan struct{}{"first": make(chan struct{}), "second": make(chan struct{}), "third": make(chan struct{})}
	arrived := make(chan string, 8)
	s := start(t, "b", func(ctx context.Context, req ForwardedRequest) (Answer, error) {
		arrived <- req.RequestID
		if g := gates[req.RequestID]; g != nil {
			select {
			case <-g:
			case <-ctx.Done():
			}
		}
		return compute(ctx, req)
	}, ServerOptions{AllowUnauthenticatedPeers: true})
	c := NewClient(ClientOptions{})
	t.Cleanup(c.Close)
	forward := func(ctx context.Context, id string) chan error {
		errc := make(chan error, 1)
		go func() {
			req := sumRequest(t)
			req.RequestID = id
			a, err := c.Forward(ctx, []Peer{s.peer}, req)
			if err == nil && (len(a.Outputs) != 2 || a.Outputs[0].Float32s()[0] != 6 || a.Node != "b") {
				err = fmt.Errorf("answer %+v", a.Outputs)
			}
			errc <- err
		}()
		return errc
	}
	wait := func(what string, errc chan error) error {
		t.Helper()
		select {
		case err := <-errc:
			return err
		case <-testCtx(t).Done():
			t.Fatalf("%s: no answer", what)
		}
		return nil
	}

	// The lead is canceled while a second call waits.
	ctx1, cancel1 := context.WithCancel(testCtx(t))
	first := forward(ctx1, "first")
	if id := <-arrived; id != "first" {
		t.Fatalf("arrived %s", id)
	}
	second := forward(testCtx(t), "second")
	if id := <-arrived; id != "second" {
		t.Fatalf("arrived %s", id)
	}
	cancel1()
	if err := wait("the canceled lead", first); servables.KindOf(err) != servables.Canceled {
		t.Fatalf("the canceled lead: %v, want Canceled", err)
	}
	close(gates["second"])
	if err := wait("the call waiting behind the canceled lead", second); err != nil {
		t.Fatal(err)
	}
	close(gates["first"])

	// The lead's own answer comes first while a third call waits.
	third := forward(testCtx(t), "third")
	if id := <-arrived; id != "third" {
		t.Fatalf("arrived %s", id)
	}
	fourth := forward(testCtx(t), "fourth") // no gate: answered at once, by the lead if third leads
	if id := <-arrived; id != "fourth" {
		t.Fatalf("arrived %s", id)
	}
	if err := wait("fourth", fourth); err != nil {
		t.Fatal(err)
	}
	close(gates["third"])
	if err := wait("third", third); err != nil {
		t.Fatal(err)
	}
	if err := wait("a call after them all", forward(testCtx(t), "fifth")); err != nil {
		t.Fatal(err)
	}
	if got := len(c.Peers()); got != 1 {
		t.Fatalf("%d peers", got)
	}
}

// asyncFunc makes a function an AsyncLocal whose done runs on a goroutine
// of its own, as the model actor's does.
type asyncFunc struct{ LocalFunc }

func (f asyncFunc) PredictAsync(ctx context.Context, req ForwardedRequest, done func(Answer, error)) {
	go func() { done(f.LocalFunc(ctx, req)) }()
}

// TestGracefulStopIdleClient: a node that stops gracefully does not wait
// long for a peer whose connection is idle: that peer reads nothing until
// its next call (so it does not see the goaway and close), and the server
// ends the connection goawayQuiet after its last call, not at some longer
// grace (a drained node's exit waited a second per such peer).
func TestGracefulStopIdleClient(t *testing.T) {
	s := start(t, "b", compute, ServerOptions{AllowUnauthenticatedPeers: true})
	c := NewClient(ClientOptions{})
	t.Cleanup(c.Close)
	if _, err := c.Forward(testCtx(t), []Peer{s.peer}, sumRequest(t)); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	s.srv.GracefulStop()
	if took := time.Since(start); took > 5*goawayQuiet {
		t.Fatalf("GracefulStop took %v with one idle framed connection, want about %v", took, goawayQuiet)
	}
	if _, err := c.Forward(testCtx(t), []Peer{s.peer}, sumRequest(t)); servables.KindOf(err) != servables.Unavailable {
		t.Fatalf("a call to the stopped node: %v, want Unavailable", err)
	}
}

// TestStopEndsAGracefulStop: Stop called while GracefulStop waits for a
// call that does not end (as cmd/grove does at its stop deadline) ends
// both: the call's context is canceled and its caller gets an error.
func TestStopEndsAGracefulStop(t *testing.T) {
	held := make(chan struct{})
	s := start(t, "b", func(ctx context.Context, req ForwardedRequest) (Answer, error) {
		close(held)
		<-ctx.Done()
		return Answer{}, ctx.Err()
	}, ServerOptions{AllowUnauthenticatedPeers: true})
	c := NewClient(ClientOptions{})
	t.Cleanup(c.Close)
	errc := make(chan error, 1)
	go func() {
		_, err := c.Forward(testCtx(t), []Peer{s.peer}, sumRequest(t))
		errc <- err
	}()
	<-held
	graceful := make(chan struct{})
	go func() {
		s.srv.GracefulStop()
		close(graceful)
	}()
	select {
	case <-graceful:
		t.Fatal("GracefulStop returned with a call in flight")
	case <-time.After(50 * time.Millisecond): // GracefulStop is waiting (not a synchronisation: a check that it does)
	}
	s.srv.Stop()
	ctx := testCtx(t)
	select {
	case <-graceful:
	case <-ctx.Done():
		t.Fatal("GracefulStop did not return after Stop")
	}
	select {
	case err := <-errc:
		if err == nil {
			t.Fatal("the call cut by Stop succeeded")
		}
	case <-ctx.Done():
		t.Fatal("the call cut by Stop did not end")
	}
}
