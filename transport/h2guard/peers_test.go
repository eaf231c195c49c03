package h2guard

import (
	"context"
	"net"
	"net/netip"
	"testing"
	"time"
)

func TestPeersRememberTripsByAddressAndForgetAPeerThatBehaves(t *testing.T) {
	var p peers
	a := netip.MustParseAddr("192.0.2.1")
	t0 := time.Unix(1000, 0)
	if n := p.trips(a, t0); n != 0 {
		t.Fatalf("trips of an unknown peer = %d, want 0", n)
	}
	for want := 1; want <= 3; want++ {
		if n := p.trip(a, t0.Add(time.Duration(want)*time.Second)); n != want {
			t.Fatalf("trip %d returned %d", want, n)
		}
	}
	last := t0.Add(3 * time.Second)
	if n := p.trips(a, last.Add(forgetAfter-time.Millisecond)); n != 3 {
		t.Errorf("trips just before forgetAfter = %d, want 3", n)
	}
	if n := p.trips(a, last.Add(forgetAfter)); n != 0 {
		t.Errorf("trips forgetAfter after the last trip = %d, want 0 (forgotten)", n)
	}
	if n := p.trip(a, last.Add(forgetAfter+time.Second)); n != 1 {
		t.Errorf("a forgotten peer's next trip counts %d, want 1", n)
	}
}

func TestPeersTableIsBoundedForgettingTheDueThenTheOldest(t *testing.T) {
	var p peers
	t0 := time.Unix(1000, 0)
	addr := func(i int) netip.Addr {
		return netip.AddrFrom4([4]byte{10, byte(i >> 16), byte(i >> 8), byte(i)})
	}
	for i := range maxPeers {
		p.trip(addr(i), t0.Add(time.Duration(i)*time.Millisecond))
	}
	p.trip(addr(maxPeers), t0.Add(time.Hour/1000))
	if n := p.len(); n != maxPeers {
		t.Fatalf("the table holds %d peers, want at most %d", n, maxPeers)
	}
	now := t0.Add(time.Second)
	if n := p.trips(addr(0), now); n != 0 {
		t.Errorf("the oldest peer is still remembered (%d trips), want it evicted", n)
	}
	if n := p.trips(addr(1), now); n != 1 {
		t.Errorf("the second oldest peer: %d trips, want 1", n)
	}
	// Once every entry is due, a new peer clears them all.
	p.trip(addr(maxPeers+1), t0.Add(forgetAfter+time.Hour))
	if n := p.len(); n != 1 {
		t.Errorf("after every peer fell due, the table holds %d, want 1", n)
	}
}

func TestHoldGrowsWithTripsUpToItsMost(t *testing.T) {
	for _, c := range []struct {
		trips int
		want  time.Duration
	}{{0, 0}, {1, 100 * time.Millisecond}, {2, 200 * time.Millisecond}, {4, 800 * time.Millisecond}, {5, 1600 * time.Millisecond}, {6, 2 * time.Second}, {100, 2 * time.Second}} {
		if got := holdFor(c.trips); got != c.want {
			t.Errorf("holdFor(%d) = %v, want %v", c.trips, got, c.want)
		}
	}
}

func TestBudgetShrinksWithTripsToNoLessThanItsLeast(t *testing.T) {
	for _, c := range []struct {
		trips       int
		burst, rate float64
	}{{0, 1024, 500}, {1, 512, 250}, {3, 128, 62.5}, {6, 16, 16}, {64, 16, 16}} {
		b := budgetFor(1024, 500, c.trips)
		if b.burst != c.burst || b.rate != c.rate {
			t.Errorf("budgetFor(1024, 500, %d) = burst %v rate %v, want %v %v", c.trips, b.burst, b.rate, c.burst, c.rate)
		}
	}
}

// TestHoldDelaysOnlyARememberedPeerAndEndsWithItsContext checks the hold
// against the Guard's clock and memory: an unknown peer is not held, a
// tripped one is held holdFor its trips (counted), unless its context
// ends first, and is forgotten forgetAfter after its last trip.
func TestHoldDelaysOnlyARememberedPeerAndEndsWithItsContext(t *testing.T) {
	now := time.Unix(1000, 0)
	g := New(Options{Now: func() time.Time { return now }})
	c := addrConn{remote: &net.TCPAddr{IP: net.ParseIP("192.0.2.7"), Port: 4242}}
	took := func(ctx context.Context) time.Duration {
		start := time.Now()
		g.hold(ctx, c)
		return time.Since(start)
	}
	if d := took(context.Background()); d > 50*time.Millisecond {
		t.Errorf("an unknown peer was held %v", d)
	}
	g.peers.trip(netip.MustParseAddr("192.0.2.7"), now)
	if d := took(context.Background()); d < holdBase {
		t.Errorf("a peer that tripped once was held %v, want at least %v", d, holdBase)
	}
	g.peers.trip(netip.MustParseAddr("192.0.2.7"), now)
	g.peers.trip(netip.MustParseAddr("192.0.2.7"), now)
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	if d := took(ctx); d >= holdFor(3) {
		t.Errorf("a hold whose context ended after 50ms took %v", d)
	}
	other := addrConn{remote: &net.TCPAddr{IP: net.ParseIP("192.0.2.7"), Port: 5555}}
	if b := g.wrap(other, other).(*conn).budget; b.burst != g.burst/8 {
		t.Errorf("a new connection from another port of the peer has burst %v, want %v", b.burst, g.burst/8)
	}
	if g.heldSinceLog != 2 {
		t.Errorf("held connections counted %d, want 2", g.heldSinceLog)
	}
	now = now.Add(forgetAfter)
	if d := took(context.Background()); d > 50*time.Millisecond {
		t.Errorf("a peer with no trip for %v was held %v, want forgotten", forgetAfter, d)
	}
}

// addrConn is a connection with only a remote address.
type addrConn struct {
	net.Conn
	remote net.Addr
}

func (c addrConn) RemoteAddr() net.Addr { return c.remote }
