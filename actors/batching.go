package actors

import (
	"fmt"
	"runtime/debug"
	"slices"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/groveml/grove/servables"
)

// Dynamic batching. User requests that are waiting in a model's mailbox
// together are run as one forward call: when a user request arrives, the
// actor keeps it and sends itself a flush at a priority just below user
// requests, so every user request already queued is received before the
// flush runs them. Nothing waits for more requests to come: an idle model
// runs a lone request at once, and batches form only under load, exactly
// when they pay. Shadow and warm-up requests are not batched (shadow work
// is already cut into micro-batches, which bound a user request's wait).
//
// A per-model max_queue_delay_us lets a lone request wait that long for
// company: the flush is then sent by a timer, and a batch that reaches
// max_batch_rows runs at once without waiting for it.
//
// Requests batch together when their inputs agree in count, types and
// every dimension but the first, which they share across their inputs (the
// rows). A batch holds at most maxBatchRows rows. Its outputs are split back
// by rows; if the batch fails, or its outputs do not have the batch's rows
// first, each request runs again on its own, so a bad request fails alone.

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

// collect keeps a user request for the next flush and makes sure a flush
// comes: at once (after the queued user requests) without a delay, after
// the delay with one, and right now when the rows fill a batch.
func (a *modelActor) collect(ctx actor.Context, m *predict) {
	a.pending = append(a.pending, m)
	a.pendingRows += batchRows(m.inputs)
	if a.batchDelay > 0 && a.pendingRows >= a.maxBatchRows {
		a.runPending()
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
	time.AfterFunc(a.batchDelay, func() { root.Send(self, f) })
}

// runPending runs the collected user requests in batches, in arrival order
// as far as batching allows. The requests not yet run stay in a.pending, so
// that a panic (which restarts the actor) can fail them.
func (a *modelActor) runPending() {
	a.flushQueued = false
	a.flushGen++
	a.pendingRows = 0
	buf := a.pending // reused for the next collection
	// Requests that expired while they waited for company are left out.
	now := time.Now()
	live := a.pending[:0]
	for _, m := range a.pending {
		if !a.dropIfExpired(m, now) {
			live = append(live, m)
		}
	}
	clear(a.pending[len(live):])
	a.pending = live
	for len(a.pending) > 0 {
		first := a.pending[0]
		rows := batchRows(first.inputs)
		if rows == 0 || a.maxBatchRows <= 1 || rows >= a.maxBatchRows {
			a.pending = a.pending[1:]
			a.predict(first)
			continue
		}
		batch := append(a.batchBuf[:0], first)
		// Keep the rest in place: rest[k] is written only after pending[k+1] was read.
		rest := a.pending[:0]
		for _, it := range a.pending[1:] {
			r := batchRows(it.inputs)
			if r > 0 && rows+r <= a.maxBatchRows && compatible(first.inputs, it.inputs) {
				batch = append(batch, it)
				rows += r
			} else {
				rest = append(rest, it)
			}
		}
		a.batchBuf = batch
		a.pending = rest
		a.runBatch(batch, rows)
	}
	clear(buf)
	clear(a.batchBuf[:cap(a.batchBuf)])
	a.pending = buf[:0]
}

// failPending answers the requests still waiting for a flush with err.
func (a *modelActor) failPending(err error) {
	for _, m := range a.pending {
		m.done(nil, err, time.Since(m.enqueued), 0)
	}
	a.pending = nil
}

// runBatch runs requests holding rows rows in all as one forward call.
func (a *modelActor) runBatch(batch []*predict, rows int) {
	if len(batch) == 1 {
		a.predict(batch[0])
		return
	}
	if a.s == nil {
		for _, m := range batch {
			a.predict(m) // answers the reload error
		}
		return
	}
	pieces := make([][]servables.Tensor, len(batch))
	counts := make([]int, len(batch))
	for i, m := range batch {
		pieces[i], counts[i] = m.inputs, batchRows(m.inputs)
	}
	inputs, err := concatRows(pieces)
	if err != nil {
		for _, m := range batch {
			a.predict(m)
		}
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
		a.log.Error("model panicked in a batch; restarting its actor", "model", a.c.path, "requests", len(batch), "panic", r, "stack", string(debug.Stack()))
		for _, m := range batch {
			m.done(nil, fmt.Errorf("%w: model %s panicked: %v", ErrModelCrashed, a.c.path, r), start.Sub(m.enqueued), time.Since(start))
		}
		panic(r)
	}()
	ctx, release := joinContexts(batch)
	out, err := a.s.Predict(ctx, inputs)
	release()
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
		// Isolate the failure: each request on its own.
		for _, m := range batch {
			a.predict(m)
		}
		return
	}
	a.m.batched.Add(float64(len(batch)))
	for i, m := range batch {
		m.done(parts[i], nil, start.Sub(m.enqueued), compute)
	}
}
