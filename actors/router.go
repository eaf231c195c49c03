package actors

import (
	"errors"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/groveml/grove/servables"
)

// table maps each served model path to the content answering it. It is
// replaced, never changed, by the supervisor.
type table map[string]*content

// batch is one call of System.Infer on its way through the router.
type batch struct {
	reqs    []Request
	results []Result
	pending atomic.Int64
	reply   chan []Result
}

// GetPriority puts batches ahead of anything else the router may receive.
func (*batch) GetPriority() int8 { return priorityUser }

// finish records one answer and replies once every item has one.
func (b *batch) finish() {
	if b.pending.Add(-1) == 0 {
		b.reply <- b.results
	}
}

// routerActor fans batches out to model actors and gathers the answers in
// request order. It never waits: model actors complete the batch.
type routerActor struct {
	routes     *atomic.Pointer[table]
	queueLimit int
	metrics    *Metrics
	// microBatchRows cuts shadow copies into micro-batches; 0 never cuts.
	microBatchRows int
	// sink receives shadow answers; user answers are logged by System.Infer.
	sink PredictionSink
}

// Receive dispatches each batch.
func (r *routerActor) Receive(ctx actor.Context) {
	if b, ok := ctx.Message().(*batch); ok {
		r.dispatch(ctx, b)
	}
}

func (r *routerActor) dispatch(ctx actor.Context, b *batch) {
	b.results = make([]Result, len(b.reqs))
	if len(b.reqs) == 0 {
		b.reply <- b.results
		return
	}
	b.pending.Store(int64(len(b.reqs)))
	for i := range b.reqs {
		req := &b.reqs[i]
		res := &b.results[i]
		res.ModelPath = req.ModelPath
		c, err := r.acquire(req.ModelPath)
		if err != nil {
			res.Err = err
			r.metrics.observe(req.API, req.ModelPath, err, 0)
			b.finish()
			continue
		}
		res.Checksum = c.checksum
		enqueued := time.Now()
		c.send(ctx.Send, &predict{
			inputs:   req.Inputs,
			priority: priorityUser,
			enqueued: enqueued,
			done: func(out []servables.Tensor, err error, queued, compute time.Duration) {
				res.Outputs, res.Err, res.Queued, res.Compute = out, err, queued, compute
				c.inflight.Add(-1)
				c.served.Add(1)
				now := time.Now()
				c.stats.record(req.Inputs, err, queued, compute, now.Sub(enqueued), now)
				r.metrics.observe(req.API, c.path, err, now.Sub(enqueued))
				b.finish()
			},
		})
		for _, sh := range req.Shadows {
			r.shadow(ctx, req, sh)
		}
	}
}

// acquire finds the content serving path and reserves a place in its queue.
// A content retired between the table lookup and the reservation is looked up
// again: the table then already names its successor, or nothing.
func (r *routerActor) acquire(path string) (*content, error) {
	for range 3 {
		c := (*r.routes.Load())[path]
		if c == nil {
			break
		}
		err := c.acquire(r.queueLimit)
		if errors.Is(err, errRetired) {
			continue
		}
		return c, err
	}
	return nil, fmt.Errorf("%w: Requested model '%s' has not been registered", ErrModelNotFound, path)
}
