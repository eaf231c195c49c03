package actors

import (
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"
)

// holdCounter counts the holds taken and released (a release runs on the
// linger's timer).
type holdCounter struct{ taken, released atomic.Int64 }

func (c *holdCounter) hold() func() {
	c.taken.Add(1)
	return func() { c.released.Add(1) }
}

// Loads less than spareLinger apart share one hold of the spare P: it is
// taken at the first and released spareLinger after the last, so
// GOMAXPROCS changes twice for the burst, not twice a load.
func TestABurstOfLoadsHoldsTheSparePOnceUntilALingerAfterTheLast(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var c holdCounter
		h := &spareHold{hold: c.hold}
		for range 10 {
			h.begin()
			h.begin() // a warm-up beside it
			h.end()
			h.end()
			time.Sleep(spareLinger / 2)
		}
		if c.taken.Load() != 1 || c.released.Load() != 0 {
			t.Errorf("after 10 loads half a linger apart: %d holds taken, %d released; want 1 and 0", c.taken.Load(), c.released.Load())
		}
		time.Sleep(spareLinger/2 - time.Nanosecond)
		synctest.Wait()
		if c.released.Load() != 0 {
			t.Errorf("released just under a linger after the last load")
		}
		time.Sleep(time.Nanosecond)
		synctest.Wait()
		if c.taken.Load() != 1 || c.released.Load() != 1 {
			t.Errorf("a linger after the last load: %d holds taken, %d released; want 1 and 1", c.taken.Load(), c.released.Load())
		}
		h.begin()
		h.end()
		time.Sleep(spareLinger)
		synctest.Wait()
		if c.taken.Load() != 2 || c.released.Load() != 2 {
			t.Errorf("a load after the linger: %d holds taken, %d released; want 2 and 2", c.taken.Load(), c.released.Load())
		}
	})
}

// A stopped System gives the spare P back at once, the linger's timer
// with it, and a load after that (none should come) holds nothing.
func TestAStoppedSystemGivesTheSparePBackAtOnce(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var c holdCounter
		h := &spareHold{hold: c.hold}
		h.begin()
		h.end()
		h.close()
		if c.released.Load() != 1 {
			t.Fatalf("closed during the linger: %d released, want 1", c.released.Load())
		}
		time.Sleep(spareLinger)
		synctest.Wait()
		h.begin()
		h.end()
		h.close()
		if c.taken.Load() != 1 || c.released.Load() != 1 {
			t.Errorf("after close: %d holds taken, %d released; want 1 and 1", c.taken.Load(), c.released.Load())
		}
	})
}
