package actors

import (
	"sync"
	"time"

	"github.com/groveml/grove/internal/lowprio"
)

// spareLinger is how long a System keeps Go's spare P after its last
// load or warm-up ends.
const spareLinger = time.Second

// spareHold holds Go's spare P (lowprio.HoldSpareP) for a System's loads
// and warm-ups, from the start of one until spareLinger after the last
// ends. Each lends the spare P itself (lowprio.WithSpareP), and each
// change of GOMAXPROCS stops the world, which on a busy node waits up to
// milliseconds for every running goroutine to stop: under a churn of
// demand loads, lending it load by load stopped every request served
// meanwhile twice a load (and twice a warm-up). Held across a burst, it
// changes twice a burst. The timer is the System's own.
//
// hold takes the hold (nil: lowprio.HoldSpareP, the process's spare P).
type spareHold struct {
	hold    func() (release func())
	mu      sync.Mutex
	running int         // loads and warm-ups under way
	release func()      // the hold, while held
	timer   *time.Timer // its release, pending after the last one ended
	closed  bool
}

// begin starts a load or warm-up: it holds the spare P, unless the System
// has stopped.
func (h *spareHold) begin() {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.timer != nil {
		h.timer.Stop()
		h.timer = nil
	}
	if h.release == nil && !h.closed {
		hold := h.hold
		if hold == nil {
			hold = lowprio.HoldSpareP
		}
		h.release = hold()
	}
	h.running++
}

// end ends a load or warm-up; after the last, the hold is released
// spareLinger later unless another begins first.
func (h *spareHold) end() {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.running--; h.running > 0 || h.release == nil {
		return
	}
	var t *time.Timer
	t = time.AfterFunc(spareLinger, func() {
		h.mu.Lock()
		defer h.mu.Unlock()
		if h.timer == t { // not stopped by a begin since
			h.timer = nil
			h.release()
			h.release = nil
		}
	})
	h.timer = t
}

// close releases the hold at once, for good: the System has stopped.
func (h *spareHold) close() {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.closed = true
	if h.timer != nil {
		h.timer.Stop()
		h.timer = nil
	}
	if h.release != nil {
		h.release()
		h.release = nil
	}
}
