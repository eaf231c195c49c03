package forward

import (
	"context"
	"errors"
	"slices"
	"sync"
	"testing"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/status"

	"github.com/groveml/grove/cluster/forward/forwardpb"
	"github.com/groveml/grove/servables"
)

// membership is a server's member check whose view lists only the
// server itself, as a peer's does before its watch delivers a node that
// just joined, and whose confirmation answers as the test says.
type membership struct {
	mu        sync.Mutex
	confirmed map[string]bool // what a fresh read of the membership says
	err       error           // the fresh read's error, if any
	asked     []string        // the names ConfirmMember was asked about
}

func (m *membership) isMember(name string) bool { return name == "b" }

func (m *membership) confirm(_ context.Context, name string) (bool, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.asked = append(m.asked, name)
	return m.confirmed[name], m.err
}

func (m *membership) set(confirmed map[string]bool, err error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.confirmed, m.err, m.asked = confirmed, err, nil
}

func (m *membership) askedAbout() []string {
	m.mu.Lock()
	defer m.mu.Unlock()
	return slices.Clone(m.asked)
}

// TestAPeerTheViewDoesNotListYetIsConfirmedBeforeItIsRefused: a call
// from a peer whose certificate names no member the server's view lists
// is served when a fresh read of the membership lists it (a node that
// has just joined), refused PERMISSION_DENIED when the read does not (its
// request never reaches the Local), and refused UNAVAILABLE when the
// membership cannot be read, so that its node tries another replica
// rather than failing its user's request; over the framed transport and
// over gRPC alike.
func TestAPeerTheViewDoesNotListYetIsConfirmedBeforeItIsRefused(t *testing.T) {
	p := newPKI(t)
	m := &membership{}
	b := start(t, "b", compute, ServerOptions{TLS: p.serverTLS(t, "b"), Members: m.isMember, ConfirmMember: m.confirm})
	a := p.client(t, "a", ClientOptions{})
	cc, err := grpc.NewClient(b.peer.Addr, grpc.WithTransportCredentials(credentials.NewTLS(p.clientTLS(t, "a"))))
	if err != nil {
		t.Fatal(err)
	}
	defer cc.Close()
	overGRPC := func() error {
		_, err := forwardpb.NewForwardClient(cc).Predict(testCtx(t), encodeRequest(&Request{ModelPath: "sum/", Priority: User}))
		return err
	}
	req := sumRequest(t)

	m.set(map[string]bool{"a": true, "b": true}, nil)
	ans, err := a.Forward(testCtx(t), []Peer{b.peer}, req)
	if err != nil {
		t.Fatalf("a peer a fresh read lists: %v", err)
	}
	checkSums(t, ans, "b")
	if err := overGRPC(); err != nil {
		t.Fatalf("a peer a fresh read lists, over gRPC: %v", err)
	}
	if got := m.askedAbout(); !slices.Equal(got, []string{"a", "a"}) {
		t.Errorf("ConfirmMember asked about %v, want a (framed), a (gRPC)", got)
	}

	m.set(map[string]bool{"b": true}, nil)
	before := b.node.calls.Load()
	_, err = a.Forward(testCtx(t), []Peer{b.peer}, req)
	if re := remote(t, err); re.Code != codes.PermissionDenied {
		t.Errorf("a peer a fresh read does not list: %v (code %v), want PERMISSION_DENIED", err, re.Code)
	}
	if err := overGRPC(); status.Code(err) != codes.PermissionDenied {
		t.Errorf("a peer a fresh read does not list, over gRPC: %v, want PERMISSION_DENIED", err)
	}

	m.set(nil, errors.New("etcd unreachable"))
	_, err = a.Forward(testCtx(t), []Peer{b.peer}, req)
	if re := remote(t, err); re.Code != codes.Unavailable || servables.KindOf(err) != servables.Unavailable {
		t.Errorf("a peer whose membership cannot be read: %v (code %v, kind %v), want UNAVAILABLE", err, re.Code, servables.KindOf(err))
	}
	if err := overGRPC(); status.Code(err) != codes.Unavailable {
		t.Errorf("a peer whose membership cannot be read, over gRPC: %v, want UNAVAILABLE", err)
	}
	if n := b.node.calls.Load() - before; n != 0 {
		t.Errorf("the Local ran %d requests of peers not confirmed", n)
	}

	// A member the view lists is admitted without a read.
	m.set(nil, errors.New("not to be asked"))
	c := NewClient(ClientOptions{TLS: p.clientTLS(t, "b")})
	defer c.Close()
	if _, err := c.Forward(testCtx(t), []Peer{b.peer}, req); err != nil {
		t.Fatalf("a member the view lists: %v", err)
	}
	if got := m.askedAbout(); len(got) != 0 {
		t.Errorf("ConfirmMember asked about %v for a member the view lists", got)
	}
}

// TestAPeerRefusedAsNoMemberIsTriedElsewhere: a peer that finds this
// node in no membership it reads (this node's lease ended and it has not
// joined again; a peer whose view lags) refuses it PERMISSION_DENIED of
// kind Unavailable: the request goes to another replica, and when none
// serves it the failure is Unavailable (503 for the user), not Execution
// (500). The refused request never reaches the Local.
func TestAPeerRefusedAsNoMemberIsTriedElsewhere(t *testing.T) {
	p := newPKI(t)
	b := p.start(t, "b", compute, "b", "d")
	d := p.start(t, "d", compute)                              // its view still lists every certificate
	c := p.client(t, "a", ClientOptions{Rand: draws(t, 0, 0)}) // b first
	ans, err := c.Forward(testCtx(t), []Peer{b.peer, d.peer}, sumRequest(t))
	if err != nil {
		t.Fatalf("refused by b, tried on d: %v", err)
	}
	checkSums(t, ans, "d")

	_, err = c.Forward(testCtx(t), []Peer{b.peer}, sumRequest(t))
	if re := remote(t, err); re.Code != codes.PermissionDenied || servables.KindOf(err) != servables.Unavailable {
		t.Fatalf("refused as no member: %v (code %v, kind %v), want PERMISSION_DENIED of kind Unavailable", err, re.Code, servables.KindOf(err))
	}
	if n := b.node.calls.Load(); n != 0 {
		t.Fatalf("b's Local ran %d requests of a node that is no member", n)
	}
}
