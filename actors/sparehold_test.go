package actors

import (
	"testing"
	"testing/synctest"
	"time"
)

// holdCounter counts the holds taken and released.
type holdCounter struct{ taken, released int }

func (c *holdCounter) hold() func() {
	c.taken++
	return func() { c.released++ }
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
		if c.taken != 1 || c.released != 0 {
			t.Errorf("after 10 loads half a linger apart: %d holds taken, %d released; want 1 and 0", c.taken, c.released)
		}
		time.Sleep(spareLinger/2 - time.Nanosecond)
		synctest.Wait()
		if c.released != 0 {
			t.Errorf("released just under a linger after the last load")
		}
		time.Sleep(time.Nanosecond)
		synctest.Wait()
		if c.taken != 1 || c.released != 1 {
			t.Errorf("a linger after the last load: %d holds taken, %d released; want 1 and 1", c.taken, c.released)
		}
		h.begin()
		h.end()
		time.Sleep(spareLinger)
		synctest.Wait()
		if c.taken != 2 || c.released != 2 {
			t.Errorf("a load after the linger: %d holds taken, %d released; want 2 and 2", c.taken, c.released)
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
		if c.released != 1 {
			t.Fatalf("closed during the linger: %d released, want 1", c.released)
		}
		time.Sleep(spareLinger)
		synctest.Wait()
		h.begin()
		h.end()
		h.close()
		if c.taken != 1 || c.released != 1 {
			t.Errorf("after close: %d holds taken, %d released; want 1 and 1", c.taken, c.released)
		}
	})
}
