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

// spare is how many WithSpareP calls are running and the GOMAXPROCS they
// found. GOMAXPROCS is the process's, so its count is too.
var spare struct {
	mu      sync.Mutex
	running int
	base    int
}

// WithSpareP runs f with GOMAXPROCS one above its setting, so that the
// goroutines serving requests keep every P while f sits in a long cgo
// call (a runtime loading a model), and returns when f does. Calls that
// overlap share the one spare P. The setting comes back when the last
// one returns, the runtime's default as its default (which follows the
// CPU limit: runtime.SetDefaultGOMAXPROCS), unless GOMAXPROCS was set
// meanwhile (the DeepRec processor's initialize), which then stays. Each
// change is a stop-the-world of a few microseconds.
//
// f's own Go code runs on the spare P as any goroutine would: f should
// be mostly cgo calls.
func WithSpareP(f func()) {
	spare.mu.Lock()
	if spare.running == 0 {
		spare.base = runtime.GOMAXPROCS(0)
		runtime.GOMAXPROCS(spare.base + 1)
	}
	spare.running++
	spare.mu.Unlock()
	defer func() {
		spare.mu.Lock()
		defer spare.mu.Unlock()
		if spare.running--; spare.running > 0 {
			return
		}
		if runtime.GOMAXPROCS(0) != spare.base+1 {
			return // set meanwhile by someone else, whose setting stays
		}
		// The default comes back as the default, following the CPU limit
		// (or the GOMAXPROCS environment variable) again; a value set by
		// runtime.GOMAXPROCS (the DeepRec processor's grove_gomaxprocs)
		// comes back as it was.
		runtime.SetDefaultGOMAXPROCS()
		if runtime.GOMAXPROCS(0) != spare.base {
			runtime.GOMAXPROCS(spare.base)
		}
	}()
	f()
}
