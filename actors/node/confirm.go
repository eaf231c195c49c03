package node

import (
	"context"
	"sync"
	"time"

	"github.com/groveml/grove/cluster/coord"
)

// confirmGap is the least time between two reads of the membership that
// confirm peers the view does not list: a peer that is no member, calling
// again and again, makes this node read etcd at most this often.
const confirmGap = 100 * time.Millisecond

// confirmTimeout bounds one such read.
const confirmTimeout = 2 * time.Second

// rereader reads the membership afresh for callers that need a read begun
// after they asked: one read at a time, each begun at least gap after the
// one before, its result shared by every caller waiting for it.
type rereader struct {
	read    func(context.Context) (coord.Members, error)
	gap     time.Duration
	timeout time.Duration

	mu  sync.Mutex
	cur *reading // the read last begun, nil before the first
}

// reading is one read of the membership; m and err are set when done is
// closed.
type reading struct {
	begun time.Time
	done  chan struct{}
	m     coord.Members
	err   error
}

// fresh returns the membership as read by a read begun after fresh was
// called (etcd's reads are linearizable: it lists every member whose
// record was written before then), or ctx's error when ctx ends first.
func (r *rereader) fresh(ctx context.Context) (coord.Members, error) {
	r.mu.Lock()
	stale := r.cur // begun before this call: it may not see what the caller saw
	r.mu.Unlock()
	for {
		r.mu.Lock()
		cur := r.cur
		if cur != stale {
			r.mu.Unlock()
			return cur.wait(ctx)
		}
		var wait <-chan struct{}
		var pause time.Duration
		if cur != nil {
			select {
			case <-cur.done:
				pause = r.gap - time.Since(cur.begun)
			default:
				wait = cur.done
			}
		}
		if wait == nil && pause <= 0 {
			next := &reading{begun: time.Now(), done: make(chan struct{})}
			r.cur = next
			r.mu.Unlock()
			go r.run(next)
			return next.wait(ctx)
		}
		r.mu.Unlock()
		if wait == nil {
			t := time.NewTimer(pause)
			select {
			case <-ctx.Done():
				t.Stop()
				return coord.Members{}, ctx.Err()
			case <-t.C:
			}
			continue
		}
		select {
		case <-ctx.Done():
			return coord.Members{}, ctx.Err()
		case <-wait:
		}
	}
}

// run reads the membership into g, bounded by r.timeout rather than by
// the context of any one caller, since all those waiting share it.
func (r *rereader) run(g *reading) {
	ctx, cancel := context.WithTimeout(context.Background(), r.timeout)
	defer cancel()
	g.m, g.err = r.read(ctx)
	close(g.done)
}

// wait returns g's result once it is read, or ctx's error when ctx ends
// first.
func (g *reading) wait(ctx context.Context) (coord.Members, error) {
	select {
	case <-ctx.Done():
		return coord.Members{}, ctx.Err()
	case <-g.done:
		return g.m, g.err
	}
}
