package actors

import (
	"log/slog"
	"runtime"
	"sync"
	"time"

	"github.com/groveml/grove/internal/lowprio"
)

// lowPriority runs shadow forward calls on their own OS threads at the
// lowest CPU scheduling priority (nice 19), off the model actors.
//
// The priority mailbox puts user requests ahead of queued shadow work, but
// once a shadow forward runs it competes for the same cores as the user
// requests' HTTP handling, decoding and forwards. On a small machine that
// contention, not the queue, is what raises user latency. Running shadow
// forwards on niced threads lets the kernel give the user path the CPU
// whenever it wants it, and a model actor hands shadow work off instead of
// running it, so a user request never waits behind a shadow micro-batch.
// Shadow work that finds every worker busy and the small queue full is
// dropped (counted), as the shadow semantics allow.
//
// Each job recovers its own panics (modelActor.handOff, shadowCopy.compare
// and shadowCopy.log), so that a bug costs that job alone and the worker
// goes on: only the job knows what a panic leaves to undo.
//
// wg counts the workers and the jobs spilled beside them; stop waits for
// both. Nothing may submit or spill once stop has begun: System.shutdown
// stops the low-priority workers only after everything that hands them
// work (model actors, forward goroutines) has ended.
type lowPriority struct {
	jobs chan func()
	wg   sync.WaitGroup
}

// newLowPriority starts workers niced threads with room for queue waiting
// jobs. spent, if not nil, gets the CPU time of each job the workers run
// (lowprio.ThreadCPU: the worker's thread is its own).
func newLowPriority(workers, queue int, log *slog.Logger, spent func(time.Duration)) *lowPriority {
	lp := &lowPriority{jobs: make(chan func(), queue)}
	for i := range workers {
		lp.wg.Add(1)
		go func() {
			defer lp.wg.Done()
			// The thread stays locked: it is niced, and other goroutines must
			// not run on it. It exits with the goroutine.
			runtime.LockOSThread()
			if err := niceThread(); err != nil && i == 0 {
				log.Warn("shadow work runs at normal CPU priority: could not nice its thread", "err", err)
			}
			for job := range lp.jobs {
				if spent == nil {
					job()
					continue
				}
				start := lowprio.ThreadCPU()
				job()
				spent(lowprio.ThreadCPU() - start)
			}
		}()
	}
	return lp
}

// trySubmit queues job, or reports false when the queue is full.
func (lp *lowPriority) trySubmit(job func()) bool {
	select {
	case lp.jobs <- job:
		return true
	default:
		return false
	}
}

// spill runs job on a goroutine of its own, at normal priority, for work
// that must not be dropped nor run on the caller's goroutine when the
// queue is full (a shadow execution's log event); stop waits for it.
func (lp *lowPriority) spill(job func()) {
	lp.wg.Add(1)
	go func() {
		defer lp.wg.Done()
		job()
	}()
}

// stop lets the queued and spilled jobs finish and ends the workers.
func (lp *lowPriority) stop() {
	close(lp.jobs)
	lp.wg.Wait()
}
