package node

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/groveml/grove/cluster/forward"
	"github.com/groveml/grove/servables"
)

// views is a sequence of membership snapshots a test publishes, as
// watchMembers does.
type views struct {
	mu  sync.Mutex
	cur *readyView
}

func newViews(peers map[string][]forward.Peer) *views {
	return &views{cur: &readyView{peers: peers, changed: make(chan struct{})}}
}

func (v *views) current() *readyView {
	v.mu.Lock()
	defer v.mu.Unlock()
	return v.cur
}

func (v *views) publish(peers map[string][]forward.Peer) {
	v.mu.Lock()
	old := v.cur
	v.cur = &readyView{peers: peers, changed: make(chan struct{})}
	v.mu.Unlock()
	close(old.changed)
}

var (
	nodeD = forward.Peer{Name: "node-d", Addr: "127.0.0.1:4"}
	nodeA = forward.Peer{Name: "node-a", Addr: "127.0.0.1:1"}
	nodeB = forward.Peer{Name: "node-b", Addr: "127.0.0.1:2"}
)

// TestFollowMove checks that a forwarded request whose peers fail
// Unavailable is sent once more to the nodes a newer membership snapshot
// lists for its model (the model moved off a node that drained and left),
// that it waits for that snapshot at most MoveWait and never past its
// deadline, and that other failures are not retried.
func TestFollowMove(t *testing.T) {
	gone := servables.NewError(servables.Unavailable, "forwarded to node node-d: use of closed network connection")
	for _, tc := range []struct {
		name string
		// first answers the call to the first snapshot's peers.
		first error
		// after is how long after the first failure a snapshot listing
		// next for the model is published (never when negative).
		after    time.Duration
		next     []forward.Peer
		deadline time.Duration
		// wantCalls lists the peers of each call; wantErr a substring of
		// the error (none: the request is answered).
		wantCalls [][]forward.Peer
		wantErr   string
		wantTook  time.Duration
	}{
		{name: "answered at once", first: nil, after: -1, deadline: time.Second,
			wantCalls: [][]forward.Peer{{nodeD}}},
		{name: "the model's new node is already listed when the call fails", first: gone, after: 0, next: []forward.Peer{nodeA},
			deadline: time.Second, wantCalls: [][]forward.Peer{{nodeD}, {nodeA}}},
		{name: "the snapshot moving the model comes 40ms after the failure", first: gone, after: 40 * time.Millisecond,
			next: []forward.Peer{nodeD, nodeA, nodeB}, deadline: time.Second,
			wantCalls: [][]forward.Peer{{nodeD}, {nodeA, nodeB}}, wantTook: 40 * time.Millisecond},
		{name: "a snapshot listing only the failed node again is waited past", first: gone, after: 10 * time.Millisecond,
			next: []forward.Peer{nodeD}, deadline: time.Second,
			wantCalls: [][]forward.Peer{{nodeD}}, wantErr: "closed network connection", wantTook: 250 * time.Millisecond},
		{name: "no snapshot within MoveWait", first: gone, after: -1, deadline: time.Second,
			wantCalls: [][]forward.Peer{{nodeD}}, wantErr: "closed network connection", wantTook: 250 * time.Millisecond},
		{name: "no snapshot before the deadline", first: gone, after: -1, deadline: 30 * time.Millisecond,
			wantCalls: [][]forward.Peer{{nodeD}}, wantErr: "closed network connection", wantTook: 30 * time.Millisecond},
		{name: "the model's own failure is not retried", first: servables.NewError(servables.InvalidInput, "unknown input x"),
			after: 0, next: []forward.Peer{nodeA}, deadline: time.Second,
			wantCalls: [][]forward.Peer{{nodeD}}, wantErr: "unknown input x"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				v := newViews(map[string][]forward.Peer{"m/": {nodeD}})
				var calls [][]forward.Peer
				call := func(ctx context.Context, peers []forward.Peer) (forward.Answer, error) {
					calls = append(calls, peers)
					if len(calls) > 1 {
						return forward.Answer{}, nil
					}
					if tc.first != nil && tc.after >= 0 {
						go func() {
							time.Sleep(tc.after)
							v.publish(map[string][]forward.Peer{"m/": tc.next})
						}()
						synctest.Wait()
					}
					return forward.Answer{}, tc.first
				}
				ctx, cancel := context.WithTimeout(t.Context(), tc.deadline)
				defer cancel()
				start := time.Now()
				_, err := followMove(ctx, "m/", v.current(), v.current, 250*time.Millisecond, nil, call)
				took := time.Since(start)
				if got, want := fmt.Sprint(calls), fmt.Sprint(tc.wantCalls); got != want {
					t.Errorf("calls %s, want %s", got, want)
				}
				switch {
				case tc.wantErr == "" && err != nil:
					t.Errorf("error %v, want an answer", err)
				case tc.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tc.wantErr)):
					t.Errorf("error %v, want one containing %q", err, tc.wantErr)
				}
				if took != tc.wantTook {
					t.Errorf("took %v, want %v", took, tc.wantTook)
				}
			})
		})
	}
}

// TestFollowMoveBothFail checks that when the peers the newer snapshot
// lists fail too, the error names both failures, and keeps the kind of
// the last.
func TestFollowMoveBothFail(t *testing.T) {
	v := newViews(map[string][]forward.Peer{"m/": {nodeD}})
	first := servables.NewError(servables.Unavailable, "node-d gone")
	v.publish(map[string][]forward.Peer{"m/": {nodeA}})
	n := 0
	_, err := followMove(t.Context(), "m/", &readyView{peers: map[string][]forward.Peer{"m/": {nodeD}}, changed: make(chan struct{})},
		v.current, time.Second, nil, func(context.Context, []forward.Peer) (forward.Answer, error) {
			n++
			if n == 1 {
				return forward.Answer{}, first
			}
			return forward.Answer{}, servables.NewError(servables.Unavailable, "node-a gone")
		})
	if n != 2 || err == nil || !strings.Contains(err.Error(), "node-a gone; before it, ") || !strings.Contains(err.Error(), "node-d gone") {
		t.Fatalf("%d calls, error %v", n, err)
	}
	if servables.KindOf(err) != servables.Unavailable {
		t.Fatalf("kind %v, want Unavailable", servables.KindOf(err))
	}
}

// TestFollowMoveStopsWhenTheSessionEnds checks that a request whose peers
// failed Unavailable stops waiting for its model to move as soon as the
// node's session ends, and that once it has ended the request is sent to
// no other node, even one a newer snapshot lists: either way the first
// failure is returned (Forward then answers the session-lost error).
func TestFollowMoveStopsWhenTheSessionEnds(t *testing.T) {
	gone := servables.NewError(servables.Unavailable, "node node-d refused: certificate names no member")
	for _, tc := range []struct {
		name string
		// endAfter is how long after the first failure the session ends;
		// moved publishes a snapshot listing node-a at once.
		endAfter time.Duration
		moved    bool
		wantTook time.Duration
	}{
		{name: "the session ends 40ms into the wait", endAfter: 40 * time.Millisecond, wantTook: 40 * time.Millisecond},
		{name: "the session ended before the failure came, the model moved", moved: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				v := newViews(map[string][]forward.Peer{"m/": {nodeD}})
				lost := make(chan struct{})
				var calls [][]forward.Peer
				call := func(ctx context.Context, peers []forward.Peer) (forward.Answer, error) {
					calls = append(calls, peers)
					if tc.moved {
						v.publish(map[string][]forward.Peer{"m/": {nodeA}})
					}
					if tc.endAfter == 0 {
						close(lost)
					} else {
						time.AfterFunc(tc.endAfter, func() { close(lost) })
					}
					return forward.Answer{}, gone
				}
				start := time.Now()
				_, err := followMove(t.Context(), "m/", v.current(), v.current, time.Hour, lost, call)
				if took := time.Since(start); took != tc.wantTook {
					t.Errorf("took %v, want %v", took, tc.wantTook)
				}
				if got, want := fmt.Sprint(calls), fmt.Sprint([][]forward.Peer{{nodeD}}); got != want {
					t.Errorf("calls %s, want %s", got, want)
				}
				if err != gone {
					t.Errorf("error %v, want the first failure", err)
				}
			})
		})
	}
}

// TestFollowMoveAllocatesNothingWhenAnswered checks that following a move
// costs an answered request no allocation, the session's channel given.
func TestFollowMoveAllocatesNothingWhenAnswered(t *testing.T) {
	v := newViews(map[string][]forward.Peer{"m/": {nodeD}})
	lost := make(chan struct{})
	call := func(context.Context, []forward.Peer) (forward.Answer, error) { return forward.Answer{}, nil }
	ctx := t.Context()
	if n := testing.AllocsPerRun(100, func() {
		_, _ = followMove(ctx, "m/", v.cur, v.current, time.Hour, lost, call)
	}); n != 0 {
		t.Fatalf("%v allocations per answered request, want 0", n)
	}
}
