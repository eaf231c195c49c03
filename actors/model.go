package actors

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"runtime/debug"
	"sync"
	"sync/atomic"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/groveml/grove/conf/bucket"
	"github.com/groveml/grove/servables"
)

// content is one loaded version of a model path: its files in the local
// cache, its servable (owned by its model actor) and its counters.
type content struct {
	// id is the id of the load job that made it (lifecycle.Content.ID);
	// name the number in its model actors' names (actorNames).
	id       int64
	name     int
	path     string
	checksum string
	runtime  string
	// meta is the model's signature (declared, or the runtime's, completed
	// by what its warm-up taught: signature.go); signed is the servable its
	// replicas share, which checks requests against it.
	meta     atomic.Pointer[servables.Metadata]
	signed   *servables.Signed
	serving  ModelServing // how its model actors run
	local    *bucket.LocalModel
	loadedAt time.Time
	// rss is the memory its load took (residentBytes' growth), 0 if unknown.
	rss int64
	// onDemand is set for an on-demand model's content: its requests
	// count as demand hits.
	onDemand bool
	// lastUsed is when it last took a user request (UnixNano; 0: never),
	// for the memory budget's unload order.
	lastUsed atomic.Int64
	// pids are the model actors (replicas) sharing the loaded weights;
	// busy[i] counts the requests sent to pids[i] and not yet answered.
	pids []*actor.PID
	busy []atomic.Int64
	// mailboxes[i] is pids[i]'s mailbox, for a caller that runs its own
	// request there when the actor is idle (post).
	mailboxes []*modelMailbox

	// queued counts predict messages sent and not yet taken from the mailbox;
	// inflight counts those sent and not yet answered.
	queued, inflight atomic.Int64
	// retired is set once the content gets no new traffic; it is released
	// when inflight drops to zero, which drained reports (nil: nobody listens).
	retired  atomic.Bool
	drained  func(id int64)
	crashes  atomic.Int64
	served   atomic.Int64
	shadowed atomic.Int64
	// shadowDropped counts shadow copies for this content not run (overloaded or busy).
	shadowDropped atomic.Int64
	// shadowQueued counts shadow micro-batches in the mailboxes, apart from
	// queued (user and warm-up requests), so that shadow work never takes
	// a user request's place under the queue limit.
	shadowQueued atomic.Int64
	stats        modelStats // user requests, for the OIP statistics
	// timeouts are the model's deadline settings (nil: none), serviceNs
	// its recent forward time per call and slowNs its slowest recent call
	// (deadline.go).
	timeouts          atomic.Pointer[timeouts]
	serviceNs, slowNs atomic.Int64
	// okSeries are the metric series of its successful requests, by API,
	// resolved on their first success (content.observe): a map replaced,
	// never changed.
	okSeries atomic.Pointer[map[string]okSeries]
}

// acquire reserves a place for one request, or reports why there is none.
// The request's answer gives it back (leave, and its model actor the
// queue place); one not sent gives it back with giveBack.
func (c *content) acquire(queueLimit int, shadow bool) error { return c.reserve(1, queueLimit, shadow) }

// giveBack gives back n places reserve reserved for requests that will
// not be sent (a panic before they were): their queue places and their
// in-flight count, so that c drains.
func (c *content) giveBack(n int64, shadow bool) {
	if shadow {
		c.shadowQueued.Add(-n)
	} else {
		c.queued.Add(-n)
	}
	c.leave(n)
}

// reserve reserves places for n requests at once, or none: errRetired
// when c no longer serves, ErrOverloaded when its queue is full. A shadow
// request takes its place among the shadow work, which the model actor
// gives back as such, within the shadow work's share of the limit
// (1/shadowQueueShare, counting the user requests queued too); a limit of
// 0 or less is none.
func (c *content) reserve(n int64, queueLimit int, shadow bool) error {
	c.inflight.Add(n)
	if c.retired.Load() {
		c.leave(n)
		return errRetired
	}
	q, limit := &c.queued, int64(queueLimit)
	if shadow {
		q, limit = &c.shadowQueued, shadowRoom(queueLimit)
	}
	queued := q.Add(n)
	if shadow {
		queued += c.queued.Load()
	}
	if queueLimit > 0 && queued > limit {
		q.Add(-n)
		c.leave(n)
		return fmt.Errorf("%w: model %s has %d requests queued (limit %d); retry later", ErrOverloaded, c.path, queued-n, limit)
	}
	return nil
}

var errRetired = fmt.Errorf("content retired")

// leave ends n requests' hold on c (taken with acquire or inflight.Add);
// the last one out of a retired content tells the supervisor, which may
// then release it.
func (c *content) leave(n int64) {
	if c.inflight.Add(-n) == 0 && c.retired.Load() && c.drained != nil {
		c.drained(c.id)
	}
}

// send hands p to the replica it asks for (predict.replica), else to the
// least busy replica, by send (a context's Send).
func (c *content) send(send func(*actor.PID, any), p *predict, inline bool) {
	if len(c.pids) == 1 {
		c.post(send, 0, p, inline)
		return
	}
	best := 0
	if p.replica > 0 {
		best = (p.replica - 1) % len(c.pids)
	} else {
		for i := 1; i < len(c.busy); i++ {
			if c.busy[i].Load() < c.busy[best].Load() {
				best = i
			}
		}
	}
	busy := &c.busy[best]
	busy.Add(1)
	done := p.done
	p.done = func(out []servables.Tensor, err error, queued, compute time.Duration) {
		busy.Add(-1)
		done(out, err, queued, compute)
	}
	c.post(send, best, p, inline)
}

// post sends p to replica i with send, or, when inline, posts it to the
// replica's mailbox to run on the calling goroutine if the actor is idle
// (modelMailbox.postInline).
func (c *content) post(send func(*actor.PID, any), i int, p *predict, inline bool) {
	if inline && i < len(c.mailboxes) && c.mailboxes[i] != nil {
		c.mailboxes[i].postInline(p)
		return
	}
	send(c.pids[i], p)
}

// sharedServable lets the replicas of a model run on one loaded servable:
// the last replica to close it closes the servable.
type sharedServable struct {
	servables.Servable
	refs atomic.Int32
}

// share wraps s for n replicas (n > 1); one replica gets s itself.
func share(s servables.Servable, n int) servables.Servable {
	if n <= 1 {
		return s
	}
	sh := &sharedServable{Servable: s}
	sh.refs.Store(int32(n))
	return sh
}

// Close closes the servable when the last replica lets go of it.
func (s *sharedServable) Close() error {
	if s.refs.Add(-1) == 0 {
		return s.Servable.Close()
	}
	return nil
}

// batchOptions are a model actor's dynamic batching settings.
type batchOptions struct {
	// maxRows bounds a batch; 1 or less: off.
	maxRows int
	// delay is how long a lone user request waits for others; 0: none.
	delay time.Duration
	// yield lets the goroutines waiting for a processor run, if any, and
	// reports whether there were (batching.go); nil: yieldToWaiting.
	yield func() bool
}

// modelActor owns one servable and runs predict messages one at a time.
type modelActor struct {
	c    *content
	s    servables.Servable
	load func(ctx context.Context) (servables.Servable, error)
	log  *slog.Logger
	m    *Metrics
	// loadErr is set when a restart could not reload the model.
	loadErr error
	// maxBatchRows bounds a dynamic batch (batching.go); 1 or less: off.
	// batchDelay is max_queue_delay: how long a flush may wait for more.
	maxBatchRows int
	batchDelay   time.Duration
	// pending are user requests, pendingRows rows in all, waiting for the
	// flush the actor sent itself; flushGen tells that flush from stale ones.
	pending  []*predict
	batchBuf []*predict // reused for each batch
	takenBuf []bool     // reused for each batch
	// openTurn gives the next pick under backlog to a request without a deadline.
	openTurn    bool
	pendingRows int
	flushQueued bool
	flushGen    uint64
	// yield lets goroutines waiting for a processor run before a request
	// that would run alone (batchOptions.yield).
	yield func() bool
	// yieldMisses counts the yields in a row that no request joined,
	// yieldSkips the calls since that passed yieldMissLimit
	// (yieldForJoiners); flushYields the yields of the flush queued now
	// (yieldBeforeFlush).
	yieldMisses, yieldSkips int
	flushYields             int
	// flushTimer sends the last flush that waits for batchDelay; flushes
	// counts those timers not yet stopped nor run, which close waits for:
	// no flush is sent once the actor has stopped.
	flushTimer *time.Timer
	flushes    sync.WaitGroup
	// carry holds the pending requests from a crash to the restarted
	// incarnation (shared by the incarnations of one replica).
	carry *[]*predict
	// low, if not nil, runs shadow forwards off the actor at low CPU
	// priority; shadowJobs counts those still using the servable.
	low        *lowPriority
	shadowJobs sync.WaitGroup
	// lowered, if not nil, runs the warm-up's forward calls at the lower
	// CPU priority of loads (System.lowered).
	lowered func(func())
}

// modelProps makes the props of a model actor. The first incarnation gets the
// servable loaded by the supervisor; a restarted one reloads it from the
// local cache with load (modelActor.reload: a reload that fails or panics
// leaves the actor answering Unavailable until a fresh load replaces it).
// lowered, if not nil, runs warm-up forward calls at the lower priority
// of loads.
func modelProps(c *content, s servables.Servable, load func(ctx context.Context) (servables.Servable, error), log *slog.Logger, m *Metrics, bo batchOptions, low *lowPriority, lowered func(func()), d actor.Dispatcher, mailbox **modelMailbox) *actor.Props {
	first := true
	carry := &[]*predict{} // the pending requests a crashed incarnation hands to the next
	opts := []actor.PropsOption{actor.WithMailbox(newModelMailbox(mailbox))}
	if d != nil {
		opts = append(opts, actor.WithDispatcher(d))
	}
	if bo.maxRows <= 1 {
		bo.delay = 0 // batching off: nothing to wait for
	}
	return actor.PropsFromProducer(func() actor.Actor {
		yield := bo.yield
		if yield == nil {
			yield = yieldToWaiting()
		}
		a := &modelActor{c: c, load: load, log: log, m: m, maxBatchRows: bo.maxRows, batchDelay: bo.delay, yield: yield, low: low, lowered: lowered, carry: carry}
		if first {
			a.s, first = s, false
		}
		return a
	}, opts...)
}

// Receive handles lifecycle and predict messages.
func (a *modelActor) Receive(ctx actor.Context) {
	switch m := ctx.Message().(type) {
	case *predict:
		if m.priority == priorityUser {
			// Counted in the queue until it runs or expires (batching.go).
			if a.dropIfExpired(m, time.Now()) {
				a.c.queued.Add(-1)
				return
			}
			a.receiveUser(ctx, m)
			return
		}
		if m.priority == priorityShadow {
			a.c.shadowQueued.Add(-1)
		} else {
			a.c.queued.Add(-1)
		}
		if a.dropIfExpired(m, time.Now()) {
			return
		}
		if m.priority == priorityShadow && a.low != nil && a.s != nil {
			a.handOff(m)
			return
		}
		a.predict(m)
	case flush:
		if m.owner != a || m.gen != a.flushGen {
			return // stale: its requests already ran
		}
		a.runPending(ctx)
	case *actor.Started:
		if pending := *a.carry; len(pending) > 0 {
			// Requests that waited behind a crash run on this incarnation.
			*a.carry = nil
			a.pending = pending
			for _, m := range pending {
				a.pendingRows += batchRows(m.inputs)
			}
			a.flushQueued = true
			ctx.Send(ctx.Self(), flush{owner: a, gen: a.flushGen})
		}
		if a.s == nil {
			start := time.Now()
			s, err := a.reload()
			if err != nil {
				a.loadErr = err
				a.log.Error("model reload after crash failed; loading it afresh", "model", a.c.path, "err", err)
				if p := ctx.Parent(); p != nil {
					ctx.Send(p, reloadFailed{path: a.c.path, content: a.c.id, err: err})
				}
				return
			}
			a.s = s
			a.log.Info("model reloaded after crash", "model", a.c.path, "took", time.Since(start))
		}
	case *actor.Restarting:
		*a.carry, a.pending = a.pending, nil
		a.close()
	case *actor.Stopped:
		a.failPending(fmt.Errorf("%w: model %s stopped", ErrStopped, a.c.path))
		a.close()
	}
}

// reload loads the servable again for an incarnation restarted after a
// crash (load). A panic in it (a bug: in the declared signature's code,
// the runtime's metadata) fails the reload as an error does, logged and
// counted (recoverJob, actor="reload"): the actor answers its requests
// with it and the supervisor loads the model afresh. Let through, it
// would crash the actor's start, which the supervisor restarts at once
// (restartAlways): the reload would panic again, in a loop without end.
func (a *modelActor) reload() (s servables.Servable, err error) {
	defer func() {
		if v := recover(); v != nil {
			s, err = nil, recoverJob(a.log, a.m, "reload", "reload of model "+a.c.path, v)
		}
	}()
	return a.load(context.Background())
}

func (a *modelActor) close() {
	if a.flushTimer != nil && a.flushTimer.Stop() {
		a.flushes.Done()
	}
	a.flushes.Wait()
	a.shadowJobs.Wait() // shadow forwards still running on the servable
	if a.s != nil {
		if err := a.s.Close(); err != nil {
			a.log.Warn("closing model", "model", a.c.path, "err", err)
		}
		a.s = nil
	}
}

// errShadowShed answers shadow work that found the low-priority workers busy.
var errShadowShed = errors.New("shadow work shed: the low-priority workers are busy")

// handOff runs a shadow request on the low-priority workers, or sheds it.
func (a *modelActor) handOff(m *predict) {
	s := a.s
	a.shadowJobs.Add(1)
	ok := a.low.trySubmit(func() {
		defer a.shadowJobs.Done()
		start := time.Now()
		if a.dropIfExpired(m, start) {
			return
		}
		queued := start.Sub(m.enqueued)
		answered := false // a panic in done itself must not answer twice
		defer func() {
			if r := recover(); r != nil {
				a.log.Error("model panicked on shadow work", "model", a.c.path, "panic", r, "stack", string(debug.Stack()))
				if !answered {
					m.done(nil, fmt.Errorf("%w: model %s panicked: %v", ErrModelCrashed, a.c.path, r), queued, time.Since(start))
				}
			}
		}()
		out, err := s.Predict(predictContext(m), m.inputs)
		answered = true
		m.done(out, err, queued, time.Since(start))
	})
	if !ok {
		a.shadowJobs.Done()
		m.done(nil, errShadowShed, time.Since(m.enqueued), 0)
	}
}

// predictLowered runs the warm-up m at the loads' priority (a.lowered):
// part of a load, it yields the cores to the requests of the models
// serving meanwhile, as the runtime's load did. (In a function of its own
// so that the results of a user request's call, in predict, are not
// captured by the closure and stay off the heap.)
func (a *modelActor) predictLowered(m *predict) (out []servables.Tensor, err error) {
	a.lowered(func() { out, err = a.s.Predict(predictContext(m), m.inputs) })
	return out, err
}

// predict runs one forward call. A panic inside the servable fails this
// request and is re-raised so that the supervisor restarts the actor.
func (a *modelActor) predict(m *predict) {
	start := time.Now()
	queued := start.Sub(m.enqueued)
	if a.s == nil {
		err := a.loadErr
		if err == nil {
			err = fmt.Errorf("model is not loaded")
		}
		m.done(nil, fmt.Errorf("%w: model %s could not be reloaded after a crash: %v", servables.ErrUnavailable, a.c.path, err), queued, 0)
		return
	}
	answered := false
	defer func() {
		if answered {
			return
		}
		r := recover()
		a.c.crashes.Add(1)
		a.m.crashes.WithLabelValues(a.c.path).Inc()
		a.log.Error("model panicked; restarting its actor", "model", a.c.path, "panic", r, "stack", string(debug.Stack()))
		m.done(nil, fmt.Errorf("%w: model %s panicked: %v", ErrModelCrashed, a.c.path, r), queued, time.Since(start))
		panic(r)
	}()
	var out []servables.Tensor
	var err error
	if m.priority == priorityWarmUp && a.lowered != nil {
		out, err = a.predictLowered(m)
	} else {
		out, err = a.s.Predict(predictContext(m), m.inputs)
	}
	answered = true
	compute := time.Since(start)
	if m.priority == priorityUser {
		a.c.observeService(compute)
		if err == nil {
			a.c.stats.executions.Add(1)
		}
	}
	m.done(out, err, queued, compute)
}
