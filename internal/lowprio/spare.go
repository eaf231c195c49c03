package lowprio

import (
	"os"
	"runtime"
	"strconv"
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

// spareP is the WithSpareP calls running and the holds not yet released
// on rt's setting: how many, the GOMAXPROCS they set (lent), and the
// setting to put back after them:
// set, given by SetGOMAXPROCS (0: none given), else the GOMAXPROCS
// environment variable's, else the runtime's default.
type spareP struct {
	rt      procs
	mu      sync.Mutex
	running int
	lent    int
	set     int
}

// spare is the process's: GOMAXPROCS is the process's, so its count is too.
var spare = &spareP{rt: goRuntime{}}

// WithSpareP runs f with GOMAXPROCS one above its setting, so that the
// goroutines serving requests keep every P while f sits in a long cgo
// call (a runtime loading a model), and returns when f does. Calls that
// overlap share the one spare P. The setting comes back when the last
// one returns (or the last HoldSpareP is released): the value
// SetGOMAXPROCS gave, else the GOMAXPROCS environment variable's, else
// the runtime's default, which then follows the CPU limit again
// (runtime.SetDefaultGOMAXPROCS), one that changed while f ran included.
// A GOMAXPROCS set meanwhile by runtime.GOMAXPROCS stays; one set before
// by runtime.GOMAXPROCS does not (SetGOMAXPROCS sets one that does). Each
// change is a stop-the-world, which waits for every running goroutine to
// stop: on a busy node, for a thread the kernel has descheduled, up to
// milliseconds.
//
// f's own Go code runs on the spare P as any goroutine would: f should
// be mostly cgo calls.
func WithSpareP(f func()) { spare.with(f) }

// SetGOMAXPROCS sets the process's GOMAXPROCS to n, as runtime.GOMAXPROCS
// does, and keeps it across WithSpareP and HoldSpareP: set while a spare
// P is lent, it is n+1 until the last WithSpareP returns and the last
// hold is released, then n. An n below 1 sets nothing.
func SetGOMAXPROCS(n int) { spare.setProcs(n) }

// HoldSpareP lends Go the spare P of WithSpareP until release is called
// (the first call releases it, later ones do nothing): a caller that runs
// loads in bursts holds it across a burst, and from the first load to
// the last GOMAXPROCS then changes twice, not twice a load. Holds and
// WithSpareP calls share the one spare P.
func HoldSpareP() (release func()) { return spare.hold() }

func (s *spareP) with(f func()) {
	s.acquire()
	defer s.release()
	f()
}

func (s *spareP) hold() func() {
	s.acquire()
	var once sync.Once
	return func() { once.Do(s.release) }
}

// acquire starts one WithSpareP or hold; the first lends the spare P.
func (s *spareP) acquire() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.running == 0 {
		s.lent = s.rt.GOMAXPROCS(0) + 1
		s.rt.GOMAXPROCS(s.lent)
	}
	s.running++
}

// release ends one WithSpareP or hold; the last puts the setting back.
func (s *spareP) release() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.running--; s.running > 0 {
		return
	}
	if s.rt.GOMAXPROCS(0) != s.lent {
		return // set meanwhile by runtime.GOMAXPROCS, whose setting stays
	}
	if n := s.setting(); n > 0 {
		s.rt.GOMAXPROCS(n)
		return
	}
	s.rt.SetDefault()
}

// setting is the GOMAXPROCS given by SetGOMAXPROCS or else by the
// environment variable (which SetDefault ignores); 0 for the default.
func (s *spareP) setting() int {
	if s.set > 0 {
		return s.set
	}
	if n, err := strconv.Atoi(os.Getenv("GOMAXPROCS")); err == nil && n > 0 {
		return n
	}
	return 0
}

func (s *spareP) setProcs(n int) {
	if n < 1 {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.set = n
	if s.running > 0 {
		s.lent = n + 1
		s.rt.GOMAXPROCS(s.lent)
		return
	}
	s.rt.GOMAXPROCS(n)
}
