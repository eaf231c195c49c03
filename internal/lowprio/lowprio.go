// Package lowprio runs work at a lower CPU scheduling priority than the
// rest of the process: on an OS thread of its own whose nice value is
// raised (Linux), so that while it competes for the cores with the
// threads serving requests the kernel gives it the smaller share.
//
// Each Run locks a fresh goroutine to its OS thread, raises that thread's
// nice value, runs the function and ends the goroutine still locked, which
// ends the thread: an unprivileged process cannot lower a nice value
// again, and no other goroutine ever runs on the thread. Go's main thread
// is never lowered (Go would park it for good rather than end it): a Run
// goroutine that starts there hands the work to another goroutine, which
// cannot land on the main thread while the first holds it. Go starts the threads it
// needs later from a thread of normal priority (a thread locked by
// LockOSThread hands thread creation to Go's template thread), so goroutines
// never inherit the priority.
//
// Threads that C or C++ code starts from the lowered thread do inherit it:
// a runtime that starts, during the work, threads that run requests later
// (ONNX Runtime's per-session intra-op pool) must not have that work run
// here. OpenMP's pool is per calling thread, so the pool that a forward
// call on the lowered thread starts serves that thread only, and ends
// with it.
//
// While the function runs Go code, its thread holds one of Go's Ps; when
// the kernel gives the core to a thread of higher priority, that P waits
// with it (as does a stop-the-world, until the thread reaches a safe
// point). In a cgo call, which is most of a model load, the thread keeps
// its P until Go's system monitor hands it to a goroutine waiting to run.
// The work meant to run here is the cgo part, with little Go code around
// it. (Lending Go one more P while loads ran, so that the serving
// goroutines kept all of theirs, was measured and dropped: with three Ps
// on two cores between a load's cgo calls, warm requests on a 2-core node
// churning 10 loads a second slowed by a quarter at the median.)
package lowprio

import "errors"

// Nice is the nice value Grove's loads run at: 5 gives the thread a
// third of the CPU share of a thread at 0 when both are runnable on one
// core (the kernel's weights 335 and 1024), so that serving goes first
// while a load still progresses on busy cores. (At 10, a tenth, loads
// per second fell by a third to a half on a busy 2-core machine with no
// better warm latency around them. SCHED_IDLE, which yields the core to
// any waking thread at once, did no better for the warm requests at the
// same rate of loads, and doubled a cold start's latency on a busy node;
// it would also leave a P with a thread the kernel may not run for long.)
const Nice = 5

// ErrUnsupported is returned by Run on a system where a thread's
// priority cannot be set; the function still ran, at normal priority.
var ErrUnsupported = errors.New("lowprio: thread priorities are not supported on this system")

// Run runs f on an OS thread of its own at nice value nice (or at the
// process's own nice value, if that is higher), and returns when f does. A
// panic in f is raised again in the caller. The error, if any, says that
// the priority could not be set: f ran all the same, at normal priority.
func Run(nice int, f func()) error {
	done := make(chan result, 1)
	var r result
	go runLowered(nice, f, done)
	r = <-done
	if !r.ok {
		panic(r.panic)
	}
	return r.err
}

// result is how a Run's work ended.
type result struct {
	err   error
	panic any
	ok    bool
}

// runLowered locks the calling goroutine to its thread for good, lowers
// the thread, runs f and sends how it ended to done; the thread ends with
// the goroutine. On Go's main thread it runs itself again on another
// goroutine, waits for it and unlocks the main thread.
func runLowered(nice int, f func(), done chan<- result) {
	lockThread()
	if onMainThread() {
		inner := make(chan result, 1)
		go runLowered(nice, f, inner)
		r := <-inner
		unlockThread()
		done <- r
		return
	}
	var r result
	r.err = Lower(nice)
	defer func() {
		if !r.ok {
			r.panic = recover()
		}
		done <- r
	}()
	f()
	r.ok = true
}
