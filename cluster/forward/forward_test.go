package forward

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/groveml/grove/auth"
	"github.com/groveml/grove/cluster/forward/forwardpb"
	"github.com/groveml/grove/internal/certtest"
	"github.com/groveml/grove/servables"
)

// sumRequest is a request for compute: FLOAT [2,3] 1..6 and BYTES ["ab", "Cd"].
func sumRequest(t testing.TB) Request {
	t.Helper()
	s, err := servables.NewStringTensor("s", []int64{2}, []string{"ab", "Cd"})
	if err != nil {
		t.Fatal(err)
	}
	return Request{ModelPath: "sum/", Priority: User, RequestID: "req-1",
		Inputs: []servables.Tensor{f32(t, "x", []int64{2, 3}, 1, 2, 3, 4, 5, 6), s}}
}

// checkSums checks compute's answer to sumRequest.
func checkSums(t testing.TB, a Answer, node string) {
	t.Helper()
	if a.Node != node || a.Checksum != "sum-sum/" {
		t.Fatalf("answered by %q with checksum %q, want %q and sum-sum/", a.Node, a.Checksum, node)
	}
	if len(a.Outputs) != 2 {
		t.Fatalf("%d outputs, want 2", len(a.Outputs))
	}
	sum := a.Outputs[0]
	if sum.Name != "x_sum" || sum.DType != servables.Float32 || !reflect.DeepEqual(sum.Shape, []int64{2, 1}) || !reflect.DeepEqual(sum.Float32s(), []float32{6, 15}) {
		t.Fatalf("sum output %s %v %v %v, want x_sum FLOAT [2 1] [6 15]", sum.Name, sum.DType, sum.Shape, sum.Float32s())
	}
	up, err := a.Outputs[1].Strings()
	if err != nil || a.Outputs[1].Name != "s_upper" || !reflect.DeepEqual(up, []string{"AB", "CD"}) {
		t.Fatalf("upper output %s %v (%v), want s_upper [AB CD]", a.Outputs[1].Name, up, err)
	}
}

func TestForwardRoundTrip(t *testing.T) {
	p := newPKI(t)
	b := p.start(t, "b", compute, "a", "b")
	c := p.client(t, "a", ClientOptions{})
	req := sumRequest(t)
	req.Priority, req.Positional, req.API, req.Contract, req.Release = Shadow, true, "ba", "org/p/1", "v2"
	req.Configs = map[string]string{"user": "u1"}
	req.Caller = auth.Identity{Name: "alice", Roles: []auth.Role{auth.RoleInfer}, Method: "jwt"}
	a, err := c.Forward(testCtx(t), []Peer{b.peer}, req)
	if err != nil {
		t.Fatal(err)
	}
	checkSums(t, a, "b")

	n := b.node
	n.mu.Lock()
	defer n.mu.Unlock()
	got := n.last
	if got.Peer != "a" {
		t.Errorf("peer %q, want a (its certificate's name)", got.Peer)
	}
	if got.RequestID != "req-1" || got.Priority != Shadow || !got.Positional || got.API != "ba" || got.Contract != "org/p/1" ||
		got.Release != "v2" || !reflect.DeepEqual(got.Configs, req.Configs) || got.ModelPath != "sum/" {
		t.Errorf("request arrived as %+v", got.Request)
	}
	if !reflect.DeepEqual(got.Caller, req.Caller) || !n.hasID || !reflect.DeepEqual(n.identity, req.Caller) {
		t.Errorf("caller %+v, context identity %+v (%v), want %+v", got.Caller, n.identity, n.hasID, req.Caller)
	}
	if !n.forwarded {
		t.Error("the Local's context does not say Forwarded")
	}
}

// TestConnectionPool checks that connections are made once per peer and
// used in turn, and that Retain and Close close them.
func TestConnectionPool(t *testing.T) {
	p := newPKI(t)
	b := p.start(t, "b", compute)
	d := p.start(t, "d", compute)
	c := p.client(t, "a", ClientOptions{ConnsPerPeer: 3})
	if got := c.Peers(); len(got) != 0 {
		t.Fatalf("connections before any request: %v", got)
	}
	for range 9 {
		for _, s := range []*started{b, d} {
			a, err := c.Forward(testCtx(t), []Peer{s.peer}, sumRequest(t))
			if err != nil {
				t.Fatal(err)
			}
			checkSums(t, a, s.peer.Name)
		}
	}
	for _, s := range []*started{b, d} {
		s.node.mu.Lock()
		if n := len(s.node.remotes); n != 3 {
			t.Errorf("node %s saw %d client connections, want 3 (ConnsPerPeer)", s.peer.Name, n)
		}
		s.node.mu.Unlock()
	}
	if got, want := c.Peers(), sorted(b.peer.Addr, d.peer.Addr); !reflect.DeepEqual(got, want) {
		t.Fatalf("pooled %v, want %v", got, want)
	}
	c.Retain([]string{d.peer.Addr})
	if got := c.Peers(); !reflect.DeepEqual(got, []string{d.peer.Addr}) {
		t.Fatalf("after Retain: %v", got)
	}
	// b is dialled again when asked for.
	if _, err := c.Forward(testCtx(t), []Peer{b.peer}, sumRequest(t)); err != nil {
		t.Fatal(err)
	}
	c.Close()
	_, err := c.Forward(testCtx(t), []Peer{b.peer}, sumRequest(t))
	if servables.KindOf(err) != servables.Unavailable || !strings.Contains(err.Error(), "closed") {
		t.Fatalf("after Close: %v (%v)", err, servables.KindOf(err))
	}
}

func sorted(a, b string) []string {
	if a > b {
		a, b = b, a
	}
	return []string{a, b}
}

func TestDeadline(t *testing.T) {
	p := newPKI(t)
	b := p.start(t, "b", compute)
	c := p.client(t, "a", ClientOptions{Timeout: 700 * time.Millisecond})

	t.Run("propagated", func(t *testing.T) {
		want := time.Now().Add(3 * time.Second)
		ctx, cancel := context.WithDeadline(context.Background(), want)
		defer cancel()
		sent := time.Now()
		if _, err := c.Forward(ctx, []Peer{b.peer}, sumRequest(t)); err != nil {
			t.Fatal(err)
		}
		took := time.Since(sent)
		b.node.mu.Lock()
		got := b.node.deadline
		b.node.mu.Unlock()
		// The server adds the timeout the call carries to its own clock:
		// its deadline is the caller's plus the time the call took to
		// arrive, less than the whole call took.
		if d := got.Sub(want); d < -time.Millisecond || d > took+time.Millisecond {
			t.Fatalf("the server's deadline is %v after the caller's, want within [-1ms, %v] (the call took %v)", d, took+time.Millisecond, took)
		}
	})
	t.Run("default timeout", func(t *testing.T) {
		start := time.Now()
		if _, err := c.Forward(context.Background(), []Peer{b.peer}, sumRequest(t)); err != nil {
			t.Fatal(err)
		}
		b.node.mu.Lock()
		got := b.node.deadline
		b.node.mu.Unlock()
		if d := got.Sub(start); d < 650*time.Millisecond || d > 2*time.Second {
			t.Fatalf("the server's deadline is %v after the call, want ClientOptions.Timeout (700ms)", d)
		}
	})
	t.Run("expires on the server", func(t *testing.T) {
		slow := p.start(t, "slow", func(ctx context.Context, _ ForwardedRequest) (Answer, error) {
			<-ctx.Done()
			return Answer{}, ctx.Err()
		})
		ctx, cancel := context.WithTimeout(context.Background(), 150*time.Millisecond)
		defer cancel()
		start := time.Now()
		_, err := c.Forward(ctx, []Peer{slow.peer}, sumRequest(t))
		if k := servables.KindOf(err); k != servables.DeadlineExceeded {
			t.Fatalf("error %v of kind %v, want deadline_exceeded", err, k)
		}
		if el := time.Since(start); el > 2*time.Second {
			t.Fatalf("took %v", el)
		}
		// The server's context ends: by its own timer (DeadlineExceeded) or
		// by the caller's reset of the stream at its deadline (Canceled),
		// whichever comes first.
		waitFor(t, func() bool {
			slow.node.mu.Lock()
			defer slow.node.mu.Unlock()
			return slow.node.ctxErr != nil
		}, "the server's context to end")
	})
	t.Run("expired before the call", func(t *testing.T) {
		before := b.node.calls.Load()
		ctx, cancel := context.WithDeadline(context.Background(), time.Now().Add(-time.Millisecond))
		defer cancel()
		_, err := c.Forward(ctx, []Peer{b.peer}, sumRequest(t))
		if k := servables.KindOf(err); k != servables.DeadlineExceeded {
			t.Fatalf("error %v of kind %v, want deadline_exceeded", err, k)
		}
		if n := b.node.calls.Load() - before; n != 0 {
			t.Fatalf("the server ran %d expired requests", n)
		}
	})
}

// A shadow copy's start-by reaches the serving node's Local on either
// transport (a Client's framed call, a tool's gRPC call), as the time the
// forwarding node gave, late by at most the call's transit; a request
// without one arrives without one.
func TestStartByCrossesBothTransports(t *testing.T) {
	p := newPKI(t)
	b := p.start(t, "b", compute, "a", "b")
	c := p.client(t, "a", ClientOptions{})
	cc, err := grpc.NewClient(b.peer.Addr, grpc.WithTransportCredentials(credentials.NewTLS(p.clientTLS(t, "a"))))
	if err != nil {
		t.Fatal(err)
	}
	defer cc.Close()
	transports := map[string]func(ctx context.Context, req Request) error{
		"framed": func(ctx context.Context, req Request) error {
			_, err := c.Forward(ctx, []Peer{b.peer}, req)
			return err
		},
		"gRPC": func(ctx context.Context, req Request) error {
			_, err := forwardpb.NewForwardClient(cc).Predict(ctx, encodeRequest(&req))
			return err
		},
	}
	for name, call := range transports {
		for _, ahead := range []time.Duration{0, 3 * time.Second} {
			req := sumRequest(t)
			req.Priority = Shadow
			if ahead > 0 {
				req.StartBy = time.Now().Add(ahead)
			}
			sent := time.Now()
			if err := call(testCtx(t), req); err != nil {
				t.Fatalf("%s: %v", name, err)
			}
			took := time.Since(sent)
			b.node.mu.Lock()
			got := b.node.last.StartBy
			b.node.mu.Unlock()
			if ahead == 0 {
				if !got.IsZero() {
					t.Errorf("%s: a request without a start-by arrived with %v", name, got)
				}
				continue
			}
			if d := got.Sub(req.StartBy); d < -time.Millisecond || d > took+time.Millisecond {
				t.Errorf("%s: the serving node's start-by is %v after the sender's, want within [-1ms, %v] (the call took %v)", name, d, took+time.Millisecond, took)
			}
		}
	}
}

// waitFor polls cond for up to 5 s.
func waitFor(t testing.TB, cond func() bool, what string) {
	t.Helper()
	for end := time.Now().Add(5 * time.Second); time.Now().Before(end); time.Sleep(5 * time.Millisecond) {
		if cond() {
			return
		}
	}
	t.Fatalf("timed out waiting for %s", what)
}

func TestRetryOnce(t *testing.T) {
	p := newPKI(t)
	notFound := func(_ context.Context, req ForwardedRequest) (Answer, error) {
		return Answer{}, fmt.Errorf("no model %s: %w", req.ModelPath, servables.ErrNotFound)
	}
	for _, tc := range []struct {
		name   string
		fns    [3]func(context.Context, ForwardedRequest) (Answer, error)
		draws  []int // first pick among 3, then among the 2 others
		calls  [3]int64
		answer string // node that answers, "" for a failure
		kind   servables.Kind
	}{
		{"first answers", [3]func(context.Context, ForwardedRequest) (Answer, error){compute, compute, compute}, []int{0, 0}, [3]int64{1, 0, 0}, "n0", 0},
		{"second answers", [3]func(context.Context, ForwardedRequest) (Answer, error){unavailable, unavailable, compute}, []int{0, 0, 1, 0}, [3]int64{1, 0, 1}, "n2", 0},
		{"two unavailable, no third try", [3]func(context.Context, ForwardedRequest) (Answer, error){unavailable, unavailable, compute}, []int{0, 0, 0, 0}, [3]int64{1, 1, 0}, "", servables.Unavailable},
		{"not found is not retried", [3]func(context.Context, ForwardedRequest) (Answer, error){notFound, compute, compute}, []int{0, 0}, [3]int64{1, 0, 0}, "", servables.NotFound},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var peers []Peer
			var nodes []*node
			for i, fn := range tc.fns {
				s := p.start(t, fmt.Sprintf("n%d", i), fn)
				peers, nodes = append(peers, s.peer), append(nodes, s.node)
			}
			c := p.client(t, "a", ClientOptions{Rand: draws(t, tc.draws...)})
			a, err := c.Forward(testCtx(t), peers, sumRequest(t))
			for i, n := range nodes {
				if got := n.calls.Load(); got != tc.calls[i] {
					t.Errorf("node n%d ran %d requests, want %d", i, got, tc.calls[i])
				}
			}
			if tc.answer != "" {
				if err != nil {
					t.Fatal(err)
				}
				checkSums(t, a, tc.answer)
				return
			}
			if k := servables.KindOf(err); k != tc.kind {
				t.Fatalf("error %v of kind %v, want %v", err, k, tc.kind)
			}
			if tc.kind == servables.Unavailable && (!strings.Contains(err.Error(), "node n0") || !strings.Contains(err.Error(), "node n1")) {
				t.Fatalf("error %q does not name both tries", err)
			}
		})
	}
}

func TestNoSecondHop(t *testing.T) {
	p := newPKI(t)
	c := p.start(t, "c", compute)
	var hopErr atomic.Pointer[error]
	onward := p.client(t, "b", ClientOptions{})
	b := p.start(t, "b", func(ctx context.Context, req ForwardedRequest) (Answer, error) {
		a, err := onward.Forward(ctx, []Peer{c.peer}, req.Request) // what a node must not do
		hopErr.Store(&err)
		return a, err
	})
	a := p.client(t, "a", ClientOptions{})
	_, err := a.Forward(testCtx(t), []Peer{b.peer}, sumRequest(t))
	if k := servables.KindOf(err); k != servables.Unavailable || !strings.Contains(err.Error(), "one hop") {
		t.Fatalf("error %v of kind %v, want unavailable saying one hop", err, k)
	}
	if e := hopErr.Load(); e == nil || !errors.Is(*e, ErrSecondHop) {
		t.Fatalf("the onward Forward returned %v, want ErrSecondHop", e)
	}
	if n := c.node.calls.Load(); n != 0 {
		t.Fatalf("node c ran %d requests after a second hop", n)
	}
	if remote(t, err).Node != "b" {
		t.Fatalf("failure from node %q, want b", remote(t, err).Node)
	}

	// A peer that sends a hop count other than 1 is refused before the Local runs.
	cc, err := grpc.NewClient(c.peer.Addr, grpc.WithTransportCredentials(credentials.NewTLS(p.clientTLS(t, "a"))))
	if err != nil {
		t.Fatal(err)
	}
	defer cc.Close()
	m := encodeRequest(&Request{ModelPath: "sum/", Priority: User})
	for _, hops := range []uint32{0, 2} {
		m.Hops = hops
		var tr metadata.MD
		_, err := forwardpb.NewForwardClient(cc).Predict(testCtx(t), m, grpc.Trailer(&tr))
		if status.Code(err) != codes.Unavailable || !strings.Contains(err.Error(), fmt.Sprintf("hop count %d", hops)) {
			t.Fatalf("hops %d: %v", hops, err)
		}
		if got := tr.Get(trailerKind); len(got) != 1 || got[0] != "unavailable" {
			t.Fatalf("hops %d: trailer kind %v", hops, got)
		}
	}
	if n := c.node.calls.Load(); n != 0 {
		t.Fatalf("node c ran %d requests with a bad hop count", n)
	}
}

func TestPeerAuthentication(t *testing.T) {
	p := newPKI(t)
	b := p.start(t, "b", compute, "a", "b")
	req := sumRequest(t)
	req.Caller = auth.Identity{Name: "alice", Roles: []auth.Role{auth.RoleInfer}, Method: "token"}

	t.Run("member", func(t *testing.T) {
		a, err := p.client(t, "a", ClientOptions{}).Forward(testCtx(t), []Peer{b.peer}, req)
		if err != nil {
			t.Fatal(err)
		}
		checkSums(t, a, "b")
		b.node.mu.Lock()
		defer b.node.mu.Unlock()
		if b.node.last.Peer != "a" || !reflect.DeepEqual(b.node.identity, req.Caller) {
			t.Fatalf("peer %q identity %+v", b.node.last.Peer, b.node.identity)
		}
	})

	refused := func(t *testing.T, tlsc *tls.Config, code codes.Code) {
		t.Helper()
		before := b.node.calls.Load()
		c := NewClient(ClientOptions{TLS: tlsc})
		defer c.Close()
		_, err := c.Forward(testCtx(t), []Peer{b.peer}, req)
		if err == nil {
			t.Fatal("served")
		}
		if re := remote(t, err); re.Code != code {
			t.Fatalf("error %v: code %v, want %v", err, re.Code, code)
		}
		if n := b.node.calls.Load() - before; n != 0 {
			t.Fatalf("the Local ran %d requests of a refused peer", n)
		}
	}
	t.Run("non-member of the CA", func(t *testing.T) {
		refused(t, p.clientTLS(t, "mallory"), codes.PermissionDenied)
	})
	t.Run("no client certificate", func(t *testing.T) {
		cfg, err := ClientTLS(p.caFile, nil)
		if err != nil {
			t.Fatal(err)
		}
		refused(t, cfg, codes.Unauthenticated)
	})
	t.Run("certificate of another CA", func(t *testing.T) {
		other := certtest.NewCA(t, "other CA")
		leaf := (&pki{ca: other}).nodeCert(t, "a").TLS(t)
		cfg, err := ClientTLS(p.caFile, func() *tls.Certificate { return &leaf })
		if err != nil {
			t.Fatal(err)
		}
		before := b.node.calls.Load()
		c := NewClient(ClientOptions{TLS: cfg})
		defer c.Close()
		_, err = c.Forward(testCtx(t), []Peer{b.peer}, req)
		if err == nil {
			t.Fatal("served")
		}
		if n := b.node.calls.Load() - before; n != 0 {
			t.Fatalf("the Local ran %d requests", n)
		}
		t.Logf("refused: %v", err)
	})
	t.Run("plaintext to an mTLS node", func(t *testing.T) {
		before := b.node.calls.Load()
		c := NewClient(ClientOptions{})
		defer c.Close()
		_, err := c.Forward(testCtx(t), []Peer{b.peer}, req)
		if err == nil {
			t.Fatal("served")
		}
		if n := b.node.calls.Load() - before; n != 0 {
			t.Fatalf("the Local ran %d requests", n)
		}
	})
	t.Run("probe without certificate", func(t *testing.T) {
		cfg, err := ClientTLS(p.caFile, nil)
		if err != nil {
			t.Fatal(err)
		}
		cc, err := grpc.NewClient(b.peer.Addr, grpc.WithTransportCredentials(credentials.NewTLS(cfg)))
		if err != nil {
			t.Fatal(err)
		}
		defer cc.Close()
		res, err := healthpb.NewHealthClient(cc).Check(testCtx(t), &healthpb.HealthCheckRequest{})
		if err != nil || res.GetStatus() != healthpb.HealthCheckResponse_SERVING {
			t.Fatalf("health %v, %v", res, err)
		}
	})
	t.Run("unauthenticated peers allowed", func(t *testing.T) {
		open := start(t, "open", compute, ServerOptions{AllowUnauthenticatedPeers: true})
		c := NewClient(ClientOptions{})
		defer c.Close()
		_, err := c.Forward(testCtx(t), []Peer{open.peer}, req)
		if re := remote(t, err); re.Code != codes.PermissionDenied || servables.KindOf(err) != servables.Execution ||
			!strings.Contains(err.Error(), "believed only from a member") {
			t.Fatalf("an identity from an unauthenticated peer: %v (%v)", err, re.Code)
		}
		if n := open.node.calls.Load(); n != 0 {
			t.Fatalf("the Local ran %d requests", n)
		}
		anon := req
		anon.Caller = auth.Identity{Method: "none"}
		a, err := c.Forward(testCtx(t), []Peer{open.peer}, anon)
		if err != nil {
			t.Fatal(err)
		}
		checkSums(t, a, "open")
		open.node.mu.Lock()
		defer open.node.mu.Unlock()
		if open.node.last.Peer != "" || open.node.identity.Method != "none" {
			t.Fatalf("peer %q identity %+v", open.node.last.Peer, open.node.identity)
		}
	})
}

// TestErrorKinds checks that every kind a peer's model fails with arrives
// as the same kind, wrapping the same sentinel, with its message and the
// peer's name.
func TestErrorKinds(t *testing.T) {
	p := newPKI(t)
	b := p.start(t, "b", func(_ context.Context, req ForwardedRequest) (Answer, error) {
		k, ok := parseKind(req.Configs["kind"])
		if !ok {
			return Answer{}, errors.New("test sent no kind")
		}
		return Answer{}, fmt.Errorf("model %s says %s: %w", req.ModelPath, k, sentinel(k))
	})
	c := p.client(t, "a", ClientOptions{})
	for _, k := range allKinds() {
		req := sumRequest(t)
		req.Configs = map[string]string{"kind": k.String()}
		_, err := c.Forward(testCtx(t), []Peer{b.peer}, req)
		if got := servables.KindOf(err); got != k || !errors.Is(err, sentinel(k)) {
			t.Errorf("kind %v arrived as %v: %v", k, got, err)
			continue
		}
		re := remote(t, err)
		if re.Node != "b" || re.Code != Code(k) || !strings.Contains(re.Message, "model sum/ says "+k.String()) {
			t.Errorf("kind %v: %+v", k, re)
		}
	}
}

// TestPeerKilled stops a peer: before a request, while it holds one, and
// under load; every request is answered by the other.
func TestPeerKilled(t *testing.T) {
	p := newPKI(t)

	t.Run("stopped before the request", func(t *testing.T) {
		b := p.start(t, "b", compute)
		d := p.start(t, "d", compute)
		c := p.client(t, "a", ClientOptions{Rand: draws(t, 0, 0)}) // b first
		b.srv.Stop()
		a, err := c.Forward(testCtx(t), []Peer{b.peer, d.peer}, sumRequest(t))
		if err != nil {
			t.Fatal(err)
		}
		checkSums(t, a, "d")
	})

	// b holds the request until its context ends; then its connection is
	// cut, by b stopping or by the caller's Retain when b leaves.
	for _, cut := range []struct {
		name string
		do   func(b *started, c *Client, d Peer)
	}{
		{"stopped holding the request", func(b *started, _ *Client, _ Peer) { b.srv.Stop() }},
		{"connection closed by Retain holding the request", func(_ *started, c *Client, d Peer) { c.Retain([]string{d.Addr}) }},
	} {
		t.Run(cut.name, func(t *testing.T) {
			entered := make(chan struct{})
			b := p.start(t, "b", func(ctx context.Context, _ ForwardedRequest) (Answer, error) {
				close(entered)
				<-ctx.Done()
				return Answer{}, ctx.Err()
			})
			d := p.start(t, "d", compute)
			c := p.client(t, "a", ClientOptions{Rand: draws(t, 0, 0)}) // b first
			res := forwardAsync(testCtx(t), c, []Peer{b.peer, d.peer}, sumRequest(t))
			select {
			case <-entered:
			case <-time.After(5 * time.Second):
				t.Fatal("the request never reached b")
			}
			cut.do(b, c, d.peer)
			r := <-res
			if r.err != nil {
				t.Fatal(r.err)
			}
			checkSums(t, r.a, "d")
		})
	}

	// Four callers forward without pause to b and d; b is stopped while it
	// holds requests and every request must still be answered. Progress is
	// counted in requests served, never in requests sent: on a busy machine
	// the thread writing b's first request can stall for milliseconds
	// while d serves dozens (b's in-flight count then rightly keeps the
	// picker on d), so stopping b at a caller's 25th request did not mean
	// b had served any. b answers warm requests, then holds every later
	// one (a node killed mid-request); it is stopped once it holds one and
	// d has answered warm, after which each caller sends after more.
	t.Run("under load", func(t *testing.T) {
		const workers, warm, after = 4, 10, 25
		ctx := testCtx(t)
		var bServed atomic.Int64
		bHolds, holdOnce := make(chan struct{}), sync.Once{}
		b := p.start(t, "b", func(ctx context.Context, req ForwardedRequest) (Answer, error) {
			if bServed.Add(1) <= warm {
				return compute(ctx, req)
			}
			holdOnce.Do(func() { close(bHolds) })
			<-ctx.Done()
			return Answer{}, ctx.Err()
		})
		var dServed atomic.Int64
		dWarm := make(chan struct{})
		d := p.start(t, "d", func(ctx context.Context, req ForwardedRequest) (Answer, error) {
			if dServed.Add(1) == warm {
				close(dWarm)
			}
			return compute(ctx, req)
		})
		c := p.client(t, "a", ClientOptions{})
		peers := []Peer{b.peer, d.peer}
		stopped := make(chan struct{})
		go func() {
			for _, ch := range []chan struct{}{bHolds, dWarm} {
				select {
				case <-ch:
				case <-ctx.Done():
					return
				}
			}
			b.srv.Stop()
			close(stopped)
		}()
		var served, failed atomic.Int64
		var wg sync.WaitGroup
		for w := range workers {
			wg.Go(func() {
				for i, left := 0, after; left > 0; i++ {
					select {
					case <-stopped:
						left--
					case <-ctx.Done():
						t.Errorf("worker %d: b not stopped after %d requests: b served %d, d %d", w, i, bServed.Load(), dServed.Load())
						return
					default:
					}
					a, err := c.Forward(ctx, peers, sumRequest(t))
					if err != nil {
						failed.Add(1)
						t.Errorf("request %d/%d: %v", w, i, err)
						continue
					}
					if a.Node != "b" && a.Node != "d" {
						t.Errorf("request %d/%d answered by %q", w, i, a.Node)
					}
					checkSums(t, a, a.Node)
					served.Add(1)
				}
			})
		}
		wg.Wait()
		if failed.Load() != 0 {
			t.Fatalf("served %d, failed %d", served.Load(), failed.Load())
		}
		// b answered warm and held at least one more, which d answered.
		if n := bServed.Load(); n <= warm {
			t.Fatalf("b ran %d requests, want more than %d", n, warm)
		}
		if n := dServed.Load(); n < warm+workers*after {
			t.Fatalf("d ran %d requests, want at least %d", n, warm+workers*after)
		}
		t.Logf("served %d: b answered %d and held %d, d answered %d", served.Load(), warm, bServed.Load()-warm, dServed.Load())
	})
}

// TestCallCutByStopIsRetriedElsewhere: Stop cancels the calls in flight
// before it closes their connections, and a Local answers a canceled
// context with its error as soon as it sees it. A call so answered while
// its connection is still open must reach the calling node as Unavailable
// (the node stopped, not the caller), so that it is tried on another
// replica, never as Canceled (499 / CANCELED to a client that canceled
// nothing). The test takes the first step of Stop (cancelling the calls)
// and waits for the answer, which is the window Stop leaves before it
// closes the connections.
func TestCallCutByStopIsRetriedElsewhere(t *testing.T) {
	p := newPKI(t)
	for _, async := range []bool{false, true} {
		t.Run(fmt.Sprintf("async=%v", async), func(t *testing.T) {
			entered := make(chan struct{})
			hold := func(ctx context.Context, _ ForwardedRequest) (Answer, error) {
				close(entered)
				<-ctx.Done()
				return Answer{}, ctx.Err()
			}
			var b *started
			if async {
				n := &node{name: "b", fn: hold}
				srv, err := NewServer(&asyncNode{node: n}, ServerOptions{Node: "b", TLS: p.serverTLS(t, "b")})
				if err != nil {
					t.Fatal(err)
				}
				b = serveLoopback(t, n, srv, srv.Serve, srv.Stop)
			} else {
				b = p.start(t, "b", hold)
			}
			d := p.start(t, "d", compute)
			c := p.client(t, "a", ClientOptions{Rand: draws(t, 0, 0)}) // b first
			res := forwardAsync(testCtx(t), c, []Peer{b.peer, d.peer}, sumRequest(t))
			select {
			case <-entered:
			case <-time.After(5 * time.Second):
				t.Fatal("the request never reached b")
			}
			b.srv.cancel() // Stop's first step: the calls in flight are cancelled
			r := <-res
			if r.err != nil {
				t.Fatalf("a call b's Stop cut was not tried on d: %v (kind %v)", r.err, servables.KindOf(r.err))
			}
			checkSums(t, r.a, "d")
		})
	}
}

func TestForwardRefuses(t *testing.T) {
	c := NewClient(ClientOptions{})
	defer c.Close()
	ctx := testCtx(t)
	for _, tc := range []struct {
		name  string
		peers []Peer
		req   Request
		kind  servables.Kind
		want  string
	}{
		{"no peer", nil, Request{ModelPath: "m/", Priority: User}, servables.Unavailable, "no node has model m/ ready"},
		{"no model path", []Peer{{"b", "127.0.0.1:1"}}, Request{Priority: User}, servables.Execution, "no model path"},
		{"no priority", []Peer{{"b", "127.0.0.1:1"}}, Request{ModelPath: "m/"}, servables.Execution, "priority"},
		{"bad address", []Peer{{"b", "no-port"}}, Request{ModelPath: "m/", Priority: User}, servables.Unavailable, `peer address "no-port"`},
	} {
		_, err := c.Forward(ctx, tc.peers, tc.req)
		if k := servables.KindOf(err); k != tc.kind || err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v (%v), want %v containing %q", tc.name, err, k, tc.kind, tc.want)
		}
	}
	// Nothing listens: connection refused, Unavailable.
	_, err := c.Forward(ctx, []Peer{{"gone", "127.0.0.1:1"}}, Request{ModelPath: "m/", Priority: User})
	if k := servables.KindOf(err); k != servables.Unavailable {
		t.Errorf("a peer that is down: %v (%v)", err, k)
	}
}

func TestNewServerRefuses(t *testing.T) {
	p := newPKI(t)
	noCA := p.ca.Server(t, "b").TLS(t)
	for _, tc := range []struct {
		name  string
		local Local
		opts  ServerOptions
		want  string
	}{
		{"no local", nil, ServerOptions{Node: "b", AllowUnauthenticatedPeers: true}, "no Local"},
		{"no name", LocalFunc(compute), ServerOptions{AllowUnauthenticatedPeers: true}, "name is empty"},
		{"plaintext", LocalFunc(compute), ServerOptions{Node: "b"}, "without TLS peers cannot be authenticated"},
		{"TLS without client CA", LocalFunc(compute), ServerOptions{Node: "b", TLS: &tls.Config{Certificates: []tls.Certificate{noCA}}}, "verifies no client certificate"},
	} {
		if _, err := NewServer(tc.local, tc.opts); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want %q", tc.name, err, tc.want)
		}
	}
	if _, err := NewServer(LocalFunc(compute), ServerOptions{Node: "b", TLS: p.serverTLS(t, "b")}); err != nil {
		t.Fatalf("mTLS configuration refused: %v", err)
	}
}

func TestClientTLSRefuses(t *testing.T) {
	dir := t.TempDir()
	if _, err := ClientTLS(dir+"/missing.pem", nil); err == nil || !strings.Contains(err.Error(), "reading the cluster CA file") {
		t.Errorf("missing file: %v", err)
	}
	certtest.WriteFile(t, dir+"/empty.pem", []byte("not a certificate"))
	if _, err := ClientTLS(dir+"/empty.pem", nil); err == nil || !strings.Contains(err.Error(), "holds no PEM certificate") {
		t.Errorf("no PEM: %v", err)
	}
}

// TestPlaintextNodes forwards between nodes without TLS, as a development
// cluster without authentication does.
func TestPlaintextNodes(t *testing.T) {
	b := start(t, "b", compute, ServerOptions{AllowUnauthenticatedPeers: true})
	c := NewClient(ClientOptions{})
	defer c.Close()
	a, err := c.Forward(testCtx(t), []Peer{b.peer}, sumRequest(t))
	if err != nil {
		t.Fatal(err)
	}
	checkSums(t, a, "b")
}

// TestAnswerLargerThanRequestLimit: the request limit (a node's
// max_body_bytes) bounds what a Client sends, not the answers it gets: a
// model's 2 MiB answer comes back to a Client that sends at most 64 KiB,
// as it would from a model on the node itself; a request over the limit,
// the sender's or the receiver's, is InvalidInput (not Overloaded, which
// clients retry).
func TestAnswerLargerThanRequestLimit(t *testing.T) {
	big := func(_ context.Context, req ForwardedRequest) (Answer, error) {
		out, err := servables.NewTensor("y", servables.Float32, []int64{512, 1024})
		if err != nil {
			return Answer{}, err
		}
		return Answer{Checksum: "big", Outputs: []servables.Tensor{out}}, nil
	}
	s := start(t, "b", big, ServerOptions{AllowUnauthenticatedPeers: true})
	c := NewClient(ClientOptions{MaxRequestBytes: 64 << 10})
	defer c.Close()
	a, err := c.Forward(testCtx(t), []Peer{s.peer}, sumRequest(t))
	if err != nil {
		t.Fatalf("a 2 MiB answer to a Client whose requests are bounded at 64 KiB: %v", err)
	}
	if len(a.Outputs) != 1 || len(a.Outputs[0].Data) != 2<<20 {
		t.Fatalf("answer: %+v", a.Outputs)
	}
	req := sumRequest(t)
	req.Inputs = []servables.Tensor{f32(t, "x", []int64{1, 32 << 10}, make([]float32, 32<<10)...)}
	if _, err := c.Forward(testCtx(t), []Peer{s.peer}, req); servables.KindOf(err) != servables.InvalidInput {
		t.Fatalf("a 128 KiB request from a Client bounded at 64 KiB: %v (kind %v), want InvalidInput", err, servables.KindOf(err))
	}
	// The serving node's own limit refuses it alike.
	small := start(t, "d", big, ServerOptions{AllowUnauthenticatedPeers: true, MaxMessageBytes: 64 << 10})
	c2 := NewClient(ClientOptions{})
	defer c2.Close()
	if _, err := c2.Forward(testCtx(t), []Peer{small.peer}, req); servables.KindOf(err) != servables.InvalidInput {
		t.Fatalf("a 128 KiB request to a node that takes 64 KiB: %v (kind %v), want InvalidInput", err, servables.KindOf(err))
	}
}

// loadingErr is a Local's answer for a model that is loading, with an
// estimate of when a retry finds it loaded (as actors.LoadingError).
type loadingErr struct{ in time.Duration }

func (e loadingErr) Error() string          { return "model w/ is loading" }
func (e loadingErr) Unwrap() error          { return servables.ErrUnavailable }
func (e loadingErr) RetryIn() time.Duration { return e.in }

// A node's "model is loading" answer carries its estimate of when a retry
// finds the model loaded to the calling node: in the Failure on the
// framed transport, in a trailer on the gRPC service. An answer without
// one carries none.
func TestALoadingAnswerCarriesItsRetryAfterToTheCallingNode(t *testing.T) {
	p := newPKI(t)
	b := p.start(t, "b", func(context.Context, ForwardedRequest) (Answer, error) {
		return Answer{}, fmt.Errorf("wrapped: %w", loadingErr{in: 3500 * time.Millisecond})
	}, "a", "b")
	a := p.client(t, "a", ClientOptions{})
	_, err := a.Forward(testCtx(t), []Peer{b.peer}, sumRequest(t))
	if re := remote(t, err); re.Kind != servables.Unavailable || re.RetryAfter != 3500*time.Millisecond || re.RetryIn() != re.RetryAfter {
		t.Fatalf("framed: %+v, want unavailable with RetryAfter 3.5s", re)
	}
	c := p.start(t, "c", unavailable, "a", "c")
	_, err = a.Forward(testCtx(t), []Peer{c.peer}, sumRequest(t))
	if re := remote(t, err); re.Kind != servables.Unavailable || re.RetryAfter != 0 {
		t.Fatalf("framed, an answer with no estimate: %+v, want RetryAfter 0", re)
	}

	cc, err := grpc.NewClient(b.peer.Addr, grpc.WithTransportCredentials(credentials.NewTLS(p.clientTLS(t, "a"))))
	if err != nil {
		t.Fatal(err)
	}
	defer cc.Close()
	var tr metadata.MD
	req := sumRequest(t)
	_, err = forwardpb.NewForwardClient(cc).Predict(testCtx(t), encodeRequest(&req), grpc.Trailer(&tr))
	if status.Code(err) != codes.Unavailable {
		t.Fatalf("gRPC: %v", err)
	}
	if got := tr.Get(trailerRetryAfter); len(got) != 1 || got[0] != "3500" {
		t.Fatalf("gRPC trailer %s: %v, want 3500", trailerRetryAfter, got)
	}
}
