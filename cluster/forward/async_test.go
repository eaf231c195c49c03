package forward

import (
	"context"
	"net"
	"sync"
	"sync/atomic"
	"testing"

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

// serveOn serves srv on 127.0.0.1 at a free port until the test ends.
func serveOn(t *testing.T, srv *Server) Peer {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = srv.Serve(ln)
	}()
	t.Cleanup(func() {
		srv.Stop()
		<-done
	})
	return Peer{Name: "b", Addr: ln.Addr().String()}
}
