package auth

import (
	"fmt"
	"sync"
	"sync/atomic"
)

// InFlight is one request counted among its caller's requests in flight
// (Authenticator.Begin) until End is called. The zero InFlight counts
// nothing, and its End does nothing.
type InFlight struct{ c *inflightCount }

// End ends the request: it no longer counts against its caller's limit.
// Call it once.
func (f InFlight) End() {
	if f.c != nil {
		f.c.n.Add(-1)
	}
}

// inflightCount is the number of an identity's requests in flight; -1
// once retired (removed from its map by a sweep), which no request counts
// on any more.
type inflightCount struct{ n atomic.Int64 }

// maxInflightTracked is how many identities are tracked before those with
// no request in flight (which a new count would equal) are forgotten.
const maxInflightTracked = 1 << 16

// inflight counts each identity's requests in flight and holds each to
// max. Counting is an atomic add on the identity's counter, found in a
// sync.Map without a lock: only an identity's first request (or its first
// after a sweep forgot it) stores a counter.
type inflight struct {
	max     int64
	counts  sync.Map // idKey → *inflightCount
	tracked atomic.Int64
}

// begin counts a request of k in flight, or returns false when k has
// max already.
func (f *inflight) begin(k idKey) (InFlight, bool) {
	for {
		v, ok := f.counts.Load(k)
		if !ok {
			if f.tracked.Load() >= maxInflightTracked {
				f.sweep()
			}
			var loaded bool
			if v, loaded = f.counts.LoadOrStore(k, new(inflightCount)); !loaded {
				f.tracked.Add(1)
			}
		}
		c := v.(*inflightCount)
		for {
			n := c.n.Load()
			if n < 0 {
				break // retired by a sweep: count on a new one
			}
			if n >= f.max {
				return InFlight{}, false
			}
			if c.n.CompareAndSwap(n, n+1) {
				return InFlight{c}, true
			}
		}
		if f.counts.CompareAndDelete(k, c) { // the sweep may not have yet
			f.tracked.Add(-1)
		}
	}
}

// sweep forgets the identities with no request in flight: each counter
// at 0 is retired (so that a request that found it counts on a new one)
// and removed.
func (f *inflight) sweep() {
	f.counts.Range(func(k, v any) bool {
		c := v.(*inflightCount)
		if c.n.CompareAndSwap(0, -1) && f.counts.CompareAndDelete(k, c) {
			f.tracked.Add(-1)
		}
		return true
	})
}

// TooManyInFlightError is Begin's error for a request of Caller, who
// has Max requests in flight already; its message, for the caller, names
// the limit.
type TooManyInFlightError struct {
	Caller Identity
	Max    int64
}

func (e *TooManyInFlightError) Error() string {
	return fmt.Sprintf("%q has %d requests in flight, its limit (auth.max_inflight_per_identity)", e.Caller.Qualified(), e.Max)
}

// Begin counts a request of id among its requests in flight until the
// returned InFlight's End, unless id already has Config.MaxInFlight in
// flight: then it counts nothing and returns a *TooManyInFlightError.
// Without a MaxInFlight it counts nothing.
func (a *Authenticator) Begin(id Identity) (InFlight, error) {
	if a.inflight == nil {
		return InFlight{}, nil
	}
	f, ok := a.inflight.begin(keyOf(id))
	if !ok {
		return InFlight{}, &TooManyInFlightError{Caller: id, Max: a.inflight.max}
	}
	return f, nil
}
