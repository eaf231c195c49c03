package h2guard

import (
	"context"
	"net"
	"net/netip"
	"sync"
	"time"
)

// The memory of the peers whose connections a Guard closed: at most
// maxPeers addresses, each forgotten forgetAfter after its last trip.
const (
	maxPeers    = 4096
	forgetAfter = 30 * time.Second
)

// The hold of a remembered peer's new connection: holdBase after its
// first trip, doubling with each trip after it, at most holdMax.
const (
	holdBase = 100 * time.Millisecond
	holdMax  = 2 * time.Second
)

// minBudget is the least burst, and the least rate a second, of a
// remembered peer's new connection.
const minBudget = 16

// peers remembers the peers (IP addresses, whatever their port) whose
// connections a Guard closed for rapid reset, and how many times each
// tripped, recently; safe for concurrent use.
type peers struct {
	mu sync.Mutex
	m  map[netip.Addr]peer
}

// peer is a remembered peer.
type peer struct {
	trips int       // connections closed since the peer was last forgotten
	last  time.Time // the last of them
}

// trip records a close of a's connection at now, and returns how many
// times a tripped recently, this one included. A full table first
// forgets the peers due, then, if it must, the one whose last trip is
// the oldest.
func (p *peers) trip(a netip.Addr, now time.Time) int {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.m == nil {
		p.m = make(map[netip.Addr]peer)
	}
	e, ok := p.m[a]
	if ok && now.Sub(e.last) >= forgetAfter {
		e = peer{}
	}
	if !ok && len(p.m) >= maxPeers {
		p.evict(now)
	}
	e.trips++
	e.last = now
	p.m[a] = e
	return e.trips
}

// evict makes room for a peer (mu held).
func (p *peers) evict(now time.Time) {
	var oldest netip.Addr
	var oldestAt time.Time
	for a, e := range p.m {
		if now.Sub(e.last) >= forgetAfter {
			delete(p.m, a)
			continue
		}
		if oldestAt.IsZero() || e.last.Before(oldestAt) {
			oldest, oldestAt = a, e.last
		}
	}
	if len(p.m) >= maxPeers {
		delete(p.m, oldest)
	}
}

// trips returns how many times a tripped recently, 0 when it is not
// remembered (any more).
func (p *peers) trips(a netip.Addr, now time.Time) int {
	p.mu.Lock()
	defer p.mu.Unlock()
	e, ok := p.m[a]
	if !ok {
		return 0
	}
	if now.Sub(e.last) >= forgetAfter {
		delete(p.m, a)
		return 0
	}
	return e.trips
}

// len is how many peers the table holds, forgotten ones not yet removed
// among them.
func (p *peers) len() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.m)
}

// peerAddr is the IP address of c's peer; ok is false when it has none
// (a pipe).
func peerAddr(c net.Conn) (netip.Addr, bool) {
	ra := c.RemoteAddr()
	if ra == nil {
		return netip.Addr{}, false
	}
	if ta, ok := ra.(*net.TCPAddr); ok {
		a := ta.AddrPort().Addr().Unmap()
		return a, a.IsValid()
	}
	ap, err := netip.ParseAddrPort(ra.String())
	if err != nil {
		return netip.Addr{}, false
	}
	return ap.Addr().Unmap(), true
}

// holdFor is how long a new connection of a peer that tripped trips
// times recently is held: 0 when it did not.
func holdFor(trips int) time.Duration {
	if trips <= 0 {
		return 0
	}
	if trips > 8 {
		return holdMax
	}
	return min(holdBase<<(trips-1), holdMax)
}

// budgetFor is the budget of a new connection of a peer that tripped
// trips times recently: burst and rate halved for each trip, at least
// minBudget.
func budgetFor(burst, rate float64, trips int) budget {
	if trips <= 0 {
		return budget{burst: burst, rate: rate}
	}
	div := float64(uint64(1) << min(trips, 32))
	return budget{burst: max(minBudget, burst/div), rate: max(minBudget, rate/div)}
}

// prematureMinFor is the premature resets a connection of a peer that
// tripped the guard trips times may send before they are weighed:
// PrematureMin halved for each trip, at least minBudget.
func prematureMinFor(trips int) int64 {
	return int64(max(minBudget, PrematureMin>>min(trips, 32)))
}

// hold waits before any work is done for c, a new connection, if its
// peer tripped recently: holdFor its trips, or until ctx is done (its
// handshake's deadline or the server's close). It counts and reports a
// held connection.
func (g *Guard) hold(ctx context.Context, c net.Conn) {
	a, ok := peerAddr(c)
	if !ok {
		return
	}
	d := holdFor(g.peers.trips(a, g.now()))
	if d <= 0 {
		return
	}
	if g.held != nil {
		g.held.Inc()
	}
	g.mu.Lock()
	g.heldSinceLog++
	g.mu.Unlock()
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
	case <-ctx.Done():
	}
}
