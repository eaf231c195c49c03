package actors

import (
	"sync"
	"sync/atomic"
	"time"
)

// workerDispatcher runs actor mailboxes on reused goroutines.
//
// protoactor's default dispatcher starts a new goroutine each time an idle
// mailbox gets a message. On Grove's hot path that is two or three new
// goroutines per request (router, model), and each grows its stack again
// for the forward call and the routing code: measured in
// BenchmarkServeInference, stack copying alone was 9% of the CPU. This
// dispatcher hands the mailbox to an idle worker goroutine when there is
// one, else starts one; a worker exits after idle without work. There is
// no bound on workers, so a mailbox never waits for another to finish (a
// model actor may hold its goroutine for a long forward call).
type workerDispatcher struct {
	work       chan func()
	quit       chan struct{}
	stopped    atomic.Bool
	throughput int
	idle       time.Duration
	wg         sync.WaitGroup
	started    atomic.Int64 // workers started so far
}

// newWorkerDispatcher returns a dispatcher processing at most throughput
// messages per mailbox run, whose workers exit after idle without work.
func newWorkerDispatcher(throughput int, idle time.Duration) *workerDispatcher {
	return &workerDispatcher{work: make(chan func()), quit: make(chan struct{}), throughput: throughput, idle: idle}
}

// Schedule runs fn on an idle worker, or on a new one. After stop it runs
// fn on the caller's goroutine: the actors are gone, and no worker may be
// left behind.
func (d *workerDispatcher) Schedule(fn func()) {
	if d.stopped.Load() {
		fn()
		return
	}
	select {
	case d.work <- fn:
	default:
		d.wg.Add(1)
		d.started.Add(1)
		go d.worker(fn)
	}
}

// Throughput is the most messages a mailbox processes before yielding.
func (d *workerDispatcher) Throughput() int { return d.throughput }

func (d *workerDispatcher) worker(fn func()) {
	defer d.wg.Done()
	fn()
	t := time.NewTimer(d.idle)
	defer t.Stop()
	for {
		select {
		case fn := <-d.work:
			fn()
			t.Reset(d.idle)
		case <-t.C:
			return
		case <-d.quit:
			return
		}
	}
}

// stop ends the idle workers and waits for the busy ones to finish.
func (d *workerDispatcher) stop() {
	if d.stopped.CompareAndSwap(false, true) {
		close(d.quit)
	}
	d.wg.Wait()
}
