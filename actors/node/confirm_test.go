package node

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/groveml/grove/cluster/coord"
)

// gatedReads is a membership read that blocks until the test releases
// it; read k (from 1) answers Revision k.
type gatedReads struct {
	n      atomic.Int64
	begun  chan time.Time // when each read began
	finish chan struct{}  // one send lets one read answer
}

func newGatedReads() *gatedReads {
	return &gatedReads{begun: make(chan time.Time, 100), finish: make(chan struct{})}
}

func (g *gatedReads) read(ctx context.Context) (coord.Members, error) {
	k := g.n.Add(1)
	g.begun <- time.Now()
	select {
	case <-g.finish:
		return coord.Members{Revision: k}, nil
	case <-ctx.Done():
		return coord.Members{}, ctx.Err()
	}
}

// asked is the revision of the membership fresh gave a caller, or its error.
type asked struct {
	rev int64
	err error
}

func ask(ctx context.Context, r *rereader, out chan<- asked) {
	m, err := r.fresh(ctx)
	out <- asked{m.Revision, err}
}

// TestAConfirmationNeverTakesAReadBegunBeforeItWasAsked: a peer's call
// that arrives while a read of the membership is under way waits for the
// next read, which alone is sure to see a record written before the call
// was sent; that next read is shared by every call that waited for it,
// and begins no sooner than the gap after the one before.
func TestAConfirmationNeverTakesAReadBegunBeforeItWasAsked(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		g := newGatedReads()
		r := &rereader{read: g.read, gap: 100 * time.Millisecond, timeout: time.Second}
		ctx := t.Context()
		first := make(chan asked, 1)
		go ask(ctx, r, first)
		began1 := <-g.begun

		later := make(chan asked, 20)
		for range 20 {
			go ask(ctx, r, later)
		}
		synctest.Wait()
		if n := g.n.Load(); n != 1 {
			t.Fatalf("%d reads in flight, want 1", n)
		}
		g.finish <- struct{}{}
		if a := <-first; a.err != nil || a.rev != 1 {
			t.Fatalf("the first caller got %+v, want revision 1", a)
		}
		began2 := <-g.begun
		if d := began2.Sub(began1); d < r.gap {
			t.Errorf("the second read began %v after the first, want at least %v", d, r.gap)
		}
		synctest.Wait()
		if len(later) != 0 {
			t.Fatalf("%d callers that asked during the first read got its answer", len(later))
		}
		g.finish <- struct{}{}
		for range 20 {
			if a := <-later; a.err != nil || a.rev != 2 {
				t.Fatalf("a caller that asked during the first read got %+v, want revision 2", a)
			}
		}
		if n := g.n.Load(); n != 2 {
			t.Errorf("%d reads for 21 callers, want 2", n)
		}
	})
}

// TestAPeerCallingAgainAndAgainIsConfirmedAtTheGapsPace: callers one
// after another, as a peer that is no member calling in a loop, make one
// read per gap, not one per call.
func TestAPeerCallingAgainAndAgainIsConfirmedAtTheGapsPace(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var reads atomic.Int64
		r := &rereader{read: func(context.Context) (coord.Members, error) {
			return coord.Members{Revision: reads.Add(1)}, nil
		}, gap: 100 * time.Millisecond, timeout: time.Second}
		start := time.Now()
		for time.Since(start) < time.Second {
			if _, err := r.fresh(t.Context()); err != nil {
				t.Fatal(err)
			}
		}
		if n := reads.Load(); n > 11 {
			t.Errorf("%d reads in 1s, want at most 11 (one per 100ms)", n)
		}
	})
}

// TestAConfirmationEndsWithItsContext: a caller whose context ends while
// it waits gets the context's error at once; the read it began goes on,
// for the others who wait for it.
func TestAConfirmationEndsWithItsContext(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		g := newGatedReads()
		r := &rereader{read: g.read, gap: 100 * time.Millisecond, timeout: time.Second}
		ctx, cancel := context.WithCancel(t.Context())
		out := make(chan asked, 1)
		go ask(ctx, r, out)
		<-g.begun
		cancel()
		if a := <-out; !errors.Is(a.err, context.Canceled) {
			t.Fatalf("the canceled caller got %+v", a)
		}
		g.finish <- struct{}{}
		r.mu.Lock()
		read := r.cur
		r.mu.Unlock()
		if m, err := read.wait(t.Context()); err != nil || m.Revision != 1 {
			t.Fatalf("the read the canceled caller began: %+v, %v; want revision 1", m, err)
		}
	})
}

// TestAReadThatHangsEndsAtItsTimeout: a read etcd does not answer ends at
// the rereader's timeout, though its caller would wait longer, and the
// caller gets its error.
func TestAReadThatHangsEndsAtItsTimeout(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := &rereader{read: func(ctx context.Context) (coord.Members, error) {
			<-ctx.Done()
			return coord.Members{}, ctx.Err()
		}, gap: 100 * time.Millisecond, timeout: 2 * time.Second}
		start := time.Now()
		if _, err := r.fresh(t.Context()); !errors.Is(err, context.DeadlineExceeded) {
			t.Errorf("fresh: %v, want the read's deadline", err)
		}
		if d := time.Since(start); d != 2*time.Second {
			t.Errorf("the caller waited %v, want the read's 2s timeout", d)
		}
	})
}
