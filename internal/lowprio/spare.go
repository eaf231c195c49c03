package lowprio

import (
	"runtime"
	"sync"
)

// A goroutine in a cgo call keeps its P (one of GOMAXPROCS's slots for
// running Go code) until Go's system monitor takes it back, and on a busy
// server that monitor, having had nothing to take for a while, looks only
// every 10 ms. A model load is mostly one long cgo call or a few: without
// a spare P, each took one of a 2-core node's two Ps from the goroutines
// serving requests for as long as it ran, however low the load's thread's
// priority, and their requests queued behind it.

// procs is the process's GOMAXPROCS setting.
type procs interface {
	// GOMAXPROCS sets it to n (n < 1: leaves it) and returns the one before.
	GOMAXPROCS(n int) int
	// SetDefault puts back the runtime's default, which follows the CPU limit.
	SetDefault()
}

// goRuntime is Go's own setting.
type goRuntime struct{}

func (goRuntime) GOMAXPROCS(n int) int { return runtime.GOMAXPROCS(n) }
func (goRuntime) SetDefault()          { runtime.SetDefaultGOMAXPROCS() }

// spareP is the WithSpareP calls running on rt's setting: how many,
// the GOMAXPROCS they found (base) and the one they set (lent).
type spareP struct {
	rt      procs
	mu      sync.Mutex
	running int
	base    int
	lent    int
}

// spare is the process's: GOMAXPROCS is the process's, so its count is too.
var spare = &spareP{rt: goRuntime{}}

// WithSpareP runs f with GOMAXPROCS one above its setting, so that the
// goroutines serving requests keep every P while f sits in a long cgo
// call (a runtime loading a model), and returns when f does. Calls that
// overlap share the one spare P. The setting comes back when the last
// one returns, the runtime's default as its default (which follows the
// CPU limit: runtime.SetDefaultGOMAXPROCS), unless GOMAXPROCS was set
// meanwhile (the DeepRec processor's initialize: SetGOMAXPROCS), which
// then stays. Each change is a stop-the-world of a few microseconds.
//
// f's own Go code runs on the spare P as any goroutine would: f should
// be mostly cgo calls.
func WithSpareP(f func()) { spare.with(f) }

// SetGOMAXPROCS sets the process's GOMAXPROCS to n, as runtime.GOMAXPROCS
// does, and keeps it across WithSpareP: set while a spare P is lent, it
// is n+1 until the last WithSpareP returns, then n. An n below 1 sets
// nothing.
func SetGOMAXPROCS(n int) { spare.setProcs(n) }

func (s *spareP) with(f func()) {
	s.mu.Lock()
	if s.running == 0 {
		s.base = s.rt.GOMAXPROCS(0)
		s.lent = s.base + 1
		s.rt.GOMAXPROCS(s.lent)
	}
	s.running++
	s.mu.Unlock()
	defer s.release()
	f()
}

// release ends one WithSpareP; the last puts the setting back.
func (s *spareP) release() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.running--; s.running > 0 {
		return
	}
	if s.rt.GOMAXPROCS(0) != s.lent {
		return // set meanwhile by runtime.GOMAXPROCS, whose setting stays
	}
	// The default comes back as the default, following the CPU limit
	// again; a value set by runtime.GOMAXPROCS or the GOMAXPROCS
	// environment variable (which SetDefault ignores) comes back as it was.
	s.rt.SetDefault()
	if s.rt.GOMAXPROCS(0) != s.base {
		s.rt.GOMAXPROCS(s.base)
	}
}

func (s *spareP) setProcs(n int) {
	if n < 1 {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.running > 0 {
		s.base, s.lent = n, n+1
		s.rt.GOMAXPROCS(s.lent)
		return
	}
	s.rt.GOMAXPROCS(n)
}
