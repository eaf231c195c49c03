package actors

import (
	"fmt"
	"runtime"
	"runtime/debug"
	"runtime/metrics"
	"slices"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/groveml/grove/servables"
)

// Scheduling of user requests: dynamic batching and newest-first under
// backlog.
//
// A user request that arrives at an idle model (nothing else queued or
// waiting) runs at once, after at most one yield (below). Otherwise the
// actor keeps it in its pending list and sends itself a flush at a
// priority just below user requests, so every user request already queued
// is received before the flush runs. Each flush runs one forward call,
// then sends the next flush if requests are left: between two forward
// calls the actor takes in what arrived, and picks again.
//
// Which request runs next: the oldest, unless the queue is backed up (the
// oldest waiting request that has a deadline has waited longer than a
// quarter of its time budget); then the newest request that has a
// deadline runs first. Under sustained overload a queue in arrival order
// serves every request just before its deadline, too late once it has
// travelled back; newest first serves fresh requests in time while the
// oldest ones expire unrun (deadline.go) instead of being served late. This
// is Facebook's "adaptive LIFO". Requests without a deadline keep arrival
// order among themselves, and under backlog get every other turn: nothing
// would bound how long newest-first could starve them.
//
// Dynamic batching: the request picked runs together with other pending
// user requests whose inputs agree in count, types, names and every
// dimension but the first (the rows), picked in the same order, up to
// maxBatchRows rows. Shadow and warm-up requests are not batched (shadow
// work is already cut into micro-batches, which bound a user request's
// wait). No timer waits for more requests to come unless the model's
// max_queue_delay_us lets a lone request wait that long for company: the
// flush is then sent by a timer, and a batch that reaches max_batch_rows
// runs at once. A batch's outputs are split back by rows; if the batch
// fails, or its outputs do not have the batch's rows first, each request
// runs again on its own, so a bad request fails alone.
//
// Batches still grow with the load. A request that would run alone on an
// idle model first lets the goroutines waiting for a processor run, if
// there are any (runtime.Gosched), and takes in the user requests that
// reached the model's queue meanwhile: they run as one batch. A flush does
// the same before its forward call, again after each yield that brought
// requests, up to flushYieldLimit times, while the batch could take more
// rows. With a core idle no goroutine waits, and the requests run at once.
// On saturated cores the waiting goroutines are mostly the API handlers
// decoding the next requests, so the forward call's fixed cost is paid
// once for many requests exactly when the CPU limits the server. A model
// with replicas does not yield (its newcomers go to an idle replica), nor
// one with max_queue_delay_us (its timer waits for company), nor, but for
// one yield in yieldProbeEvery, a model whose last yieldMissLimit yields
// brought nobody (callers that send one request at a time).
//
// Pending requests count in the model's queue (content.queued) until they
// run or expire, so model_queue_size bounds them.

// priorityFlush places a flush after every queued user request.
const priorityFlush int8 = priorityUser - 1

// flush asks the model actor to run the user requests it has collected.
// owner and gen identify the collection it was sent for: a flush that
// arrives after its requests ran (a timer's, or one sent before a restart)
// is ignored.
type flush struct {
	owner *modelActor
	gen   uint64
}

// GetPriority places the message in the priority mailbox.
func (flush) GetPriority() int8 { return priorityFlush }

// compatible reports whether two requests' inputs can be concatenated by rows.
func compatible(a, b []servables.Tensor) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i].DType != b[i].DType || a[i].Name != b[i].Name || !slices.Equal(a[i].Shape[1:], b[i].Shape[1:]) {
			return false
		}
	}
	return true
}

// receiveUser takes a user request from the mailbox: it runs at once when
// the model is idle and nothing joins it while the actor yields
// (yieldForCompany), else it waits for a flush.
func (a *modelActor) receiveUser(ctx actor.Context, m *predict) {
	if len(a.pending) == 0 && a.batchDelay <= 0 && a.c.queued.Load() == 1 {
		yielded, joined := a.yieldForCompany(m)
		if !joined {
			dropped := yielded && a.dropIfExpired(m, time.Now()) // the yield took its time
			a.c.queued.Add(-1)
			if !dropped {
				a.predict(m)
			}
			return
		}
	}
	a.pending = append(a.pending, m)
	a.pendingRows += batchRows(m.inputs)
	if a.batchDelay > 0 && a.pendingRows >= a.maxBatchRows { // a delay implies batching (modelProps)
		a.runPending(ctx)
		return
	}
	if a.flushQueued {
		return
	}
	a.flushQueued = true
	f := flush{owner: a, gen: a.flushGen}
	if a.batchDelay <= 0 {
		ctx.Send(ctx.Self(), f)
		return
	}
	root, self := ctx.ActorSystem().Root, ctx.Self()
	a.flushes.Add(1)
	a.flushTimer = time.AfterFunc(a.batchDelay, func() {
		defer a.flushes.Done()
		root.Send(self, f)
	})
}

// yieldForCompany is called when m would run alone on an idle model: if
// a batch could take more rows and goroutines are waiting for a
// processor, it lets them run first (yielded) and reports whether user
// requests reached the model's queue meanwhile (joined). A model with
// replicas does not yield: its newcomers go to an idle replica; nor, but
// for a probe now and then, does one whose recent yields brought nobody
// (yieldMissLimit).
func (a *modelActor) yieldForCompany(m *predict) (yielded, joined bool) {
	if len(a.c.busy) > 1 || m.alone {
		return false, false
	}
	if rows := batchRows(m.inputs); rows == 0 || rows >= a.maxBatchRows {
		return false, false
	}
	return a.yieldForJoiners()
}

// yieldForJoiners lets the goroutines waiting for a processor run, if
// there are any (yielded), and reports whether user requests reached the
// model's queue meanwhile (joined), unless the model's recent yields
// brought nobody (yieldMissLimit): then only one call in yieldProbeEvery
// yields.
func (a *modelActor) yieldForJoiners() (yielded, joined bool) {
	if a.yieldMisses >= yieldMissLimit {
		a.yieldSkips++
		if a.yieldSkips%yieldProbeEvery != 0 {
			return false, false
		}
	}
	before := a.c.queued.Load()
	if !a.yield() {
		return false, false
	}
	joined = a.c.queued.Load() > before
	if joined {
		a.yieldMisses, a.yieldSkips = 0, 0
	} else {
		a.yieldMisses++
	}
	return true, joined
}

// yieldBeforeFlush is called by a flush before it picks its batch: if the
// batch could take more rows, the model has no replicas and no
// max_queue_delay_us, and this flush has yielded fewer than
// flushYieldLimit times, it yields (yieldForJoiners) and reports whether
// requests joined. They are in the mailbox ahead of the flush the caller
// then sends itself, so they are taken in before it runs.
func (a *modelActor) yieldBeforeFlush() bool {
	if a.flushYields >= flushYieldLimit || len(a.c.busy) > 1 || a.batchDelay > 0 ||
		a.pendingRows == 0 || a.pendingRows >= a.maxBatchRows {
		return false
	}
	if _, joined := a.yieldForJoiners(); !joined {
		return false
	}
	a.flushYields++
	return true
}

// A model actor whose last yieldMissLimit yields in a row brought no
// request (its callers send one at a time, as at concurrency 1, where the
// goroutine waiting for a processor is net/http's background read, not a
// handler with the next request) yields only for one lone request in
// yieldProbeEvery, until a yield brings one again: at concurrency 1 a
// yield delayed each answer by the wait to be scheduled again (3.5 µs a
// request in a runtime trace) for nothing.
const (
	yieldMissLimit  = 8
	yieldProbeEvery = 16
)

// flushYieldLimit bounds the yields of one flush: each that brings
// requests delays the forward call by a turn of the waiting goroutines.
// On pctr at concurrency 32 on two cores the yields stop on their own (a
// yield brings nobody): a limit of 4 or of 16 gave the same nine rows per
// call.
const flushYieldLimit = 8

// runPending runs one forward call of pending requests (see the top of
// this file for which), and sends the next flush if requests are left.
// Expired requests are dropped as they are met: from the front of the
// list (the oldest), and any request picked to run; the others are
// answered at their deadline by their caller's timer, and dropped when
// they reach the front or are picked. So a flush costs the same however
// many requests wait.
func (a *modelActor) runPending(ctx actor.Context) {
	if a.yieldBeforeFlush() {
		ctx.Send(ctx.Self(), flush{owner: a, gen: a.flushGen})
		return
	}
	a.flushYields = 0
	a.flushQueued = false
	a.flushGen++
	now := time.Now()
	if a.flushGen%sweepEvery == 0 {
		a.sweep(now)
	}
	for len(a.pending) > 0 && a.dropIfExpired(a.pending[0], now) {
		a.remove(0)
	}
	for len(a.pending) > 0 {
		i := a.pick(now)
		if a.dropIfExpired(a.pending[i], now) {
			a.remove(i)
			continue
		}
		batch, rows := a.takeBatch(i, now)
		a.runBatch(batch, rows)
		break
	}
	if len(a.pending) > 0 && !a.flushQueued {
		a.flushQueued = true
		ctx.Send(ctx.Self(), flush{owner: a, gen: a.flushGen})
	}
}

// sweepEvery is how often (in flushes) runPending drops every expired
// request, not only those at the front: a request that stays (a long
// budget, none at all) must not keep the dead ones behind it counted in
// the model's queue.
const sweepEvery = 64

// sweep drops every expired pending request.
func (a *modelActor) sweep(now time.Time) {
	for i := 0; i < len(a.pending); {
		if a.dropIfExpired(a.pending[i], now) {
			a.remove(i)
			continue
		}
		i++
	}
}

// remove takes a.pending[i] out of the list and of the model's queue.
func (a *modelActor) remove(i int) {
	a.pendingRows -= batchRows(a.pending[i].inputs)
	a.c.queued.Add(-1)
	a.pending = slices.Delete(a.pending, i, i+1)
}

// backlogged reports whether the queue is backed up: its oldest request
// that has a deadline has waited longer than a quarter of its time budget.
func (a *modelActor) backlogged(now time.Time) bool {
	for _, m := range a.pending {
		if !m.deadline.IsZero() {
			return now.Sub(m.enqueued) > m.deadline.Sub(m.enqueued)/4
		}
	}
	return false
}

// pick returns the index of the request to run next: the oldest, or under
// backlog the newest that has a deadline. Under backlog, requests without
// a deadline still get every other turn (the oldest of them), so they are
// not starved while deadline traffic keeps coming.
func (a *modelActor) pick(now time.Time) int {
	if !a.backlogged(now) {
		return 0
	}
	newest, oldestOpen := -1, -1
	for i := len(a.pending) - 1; i >= 0; i-- {
		if a.pending[i].deadline.IsZero() {
			oldestOpen = i
		} else if newest < 0 {
			newest = i
		}
	}
	switch {
	case newest < 0:
		return 0
	case oldestOpen >= 0 && a.openTurn:
		a.openTurn = false
		return oldestOpen
	}
	a.openTurn = oldestOpen >= 0
	return newest
}

// takeBatch takes the requests of the next forward call out of a.pending:
// a.pending[first], and with batching on, compatible others in the order
// requests are picked, up to maxBatchRows rows.
func (a *modelActor) takeBatch(first int, now time.Time) ([]*predict, int) {
	lead := a.pending[first]
	rows := batchRows(lead.inputs)
	batch := append(a.batchBuf[:0], lead)
	if rows > 0 && a.maxBatchRows > 1 && rows < a.maxBatchRows && !lead.alone {
		taken := slices.Grow(a.takenBuf[:0], len(a.pending))[:len(a.pending)]
		clear(taken)
		taken[first] = true
		add := func(i int) {
			it := a.pending[i]
			r := batchRows(it.inputs)
			if taken[i] || r == 0 || rows+r > a.maxBatchRows || it.alone || !compatible(lead.inputs, it.inputs) {
				return
			}
			if reason, _ := a.expiry(it, now); reason != "" {
				return // dropped when it reaches the front or is picked
			}
			batch = append(batch, it)
			rows += r
			taken[i] = true
		}
		if a.backlogged(now) {
			for i := len(a.pending) - 1; i >= 0; i-- {
				if !a.pending[i].deadline.IsZero() {
					add(i)
				}
			}
		}
		for i := range a.pending {
			add(i)
		}
		kept := a.pending[:0]
		for i, m := range a.pending {
			if !taken[i] {
				kept = append(kept, m)
			}
		}
		clear(a.pending[len(kept):])
		a.pending = kept
		a.takenBuf = taken
	} else {
		a.pending = slices.Delete(a.pending, first, first+1)
	}
	a.c.queued.Add(-int64(len(batch)))
	a.pendingRows -= rows
	a.batchBuf = batch
	return batch, rows
}

// failPending answers the requests still waiting for a flush with err.
func (a *modelActor) failPending(err error) {
	for _, m := range a.pending {
		a.c.queued.Add(-1)
		m.done(nil, err, time.Since(m.enqueued), 0)
	}
	a.pending = nil
	a.pendingRows = 0
}

// runAlone runs each request of batch in a forward call of its own. The
// requests not yet run wait at the front of a.pending meanwhile, so that a
// panic on one of them (which restarts the actor) hands the others to the
// next incarnation instead of losing them.
func (a *modelActor) runAlone(batch []*predict) {
	n := len(batch)
	a.pending = append(slices.Clone(batch), a.pending...)
	a.c.queued.Add(int64(n))
	for _, m := range batch {
		a.pendingRows += batchRows(m.inputs)
	}
	for range n {
		m := a.pending[0]
		a.remove(0)
		if a.dropIfExpired(m, time.Now()) {
			continue // its caller is gone, or its answer could not reach it in time
		}
		a.predict(m)
	}
}

// runBatch runs requests holding rows rows in all as one forward call.
func (a *modelActor) runBatch(batch []*predict, rows int) {
	defer clear(batch)
	if len(batch) == 1 {
		a.predict(batch[0])
		return
	}
	if a.s == nil {
		a.runAlone(batch) // answers the reload error
		return
	}
	pieces := make([][]servables.Tensor, len(batch))
	counts := make([]int, len(batch))
	for i, m := range batch {
		pieces[i], counts[i] = m.inputs, batchRows(m.inputs)
	}
	inputs, err := concatRows(pieces)
	if err != nil {
		a.runAlone(batch)
		return
	}
	start := time.Now()
	answered := false
	defer func() {
		if answered {
			return
		}
		r := recover()
		a.c.crashes.Add(1)
		a.m.crashes.WithLabelValues(a.c.path).Inc()
		a.log.Error("model panicked in a batch; restarting its actor, which runs the batch's requests one by one", "model", a.c.path,
			"requests", len(batch), "panic", r, "stack", string(debug.Stack()))
		// Which request panicked is not known: each runs alone on the
		// next incarnation (handed over with the pending ones), so that
		// only that one fails.
		again := slices.Clone(batch)
		for _, m := range again {
			m.alone = true
		}
		a.pending = append(again, a.pending...)
		a.pendingRows += rows
		a.c.queued.Add(int64(len(again)))
		panic(r)
	}()
	ctx := joinContexts(batch)
	if j, ok := ctx.(*joinedContext); ok {
		defer j.release()
	}
	out, err := a.s.Predict(ctx, inputs)
	answered = true
	compute := time.Since(start)
	a.c.observeService(compute)
	var parts [][]servables.Tensor
	if err == nil && batchRows(out) != rows {
		err = fmt.Errorf("outputs do not have the batch's %d rows first", rows)
	}
	if err == nil {
		parts, err = cutRows(out, counts)
	}
	if err != nil {
		a.runAlone(batch) // isolates the failure
		return
	}
	a.m.batched.Add(float64(len(batch)))
	a.c.stats.executions.Add(1)
	for i, m := range batch {
		m.rows = rows
		m.done(parts[i], nil, start.Sub(m.enqueued), compute)
	}
}

// yieldToWaiting returns a yield for one model actor: if Go counts
// goroutines waiting for a processor, it lets them run (runtime.Gosched)
// and reports true. The count is read under the runtime's metrics
// semaphore and scheduler lock, walking the Ps: about 80 ns on two cores,
// longer while a Prometheus scrape reads the runtime's metrics. A Gosched
// with nothing waiting would instead wake an idle thread to look for work.
func yieldToWaiting() func() bool {
	runnable := []metrics.Sample{{Name: "/sched/goroutines/runnable:goroutines"}}
	return func() bool {
		metrics.Read(runnable)
		if v := runnable[0].Value; v.Kind() != metrics.KindUint64 || v.Uint64() == 0 {
			return false
		}
		runtime.Gosched()
		return true
	}
}
