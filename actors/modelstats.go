package actors

import (
	"sync/atomic"
	"time"

	"github.com/groveml/grove/servables"
)

// modelStats counts a content's user requests, for the OIP statistics
// extension (Triton's field names).
type modelStats struct {
	success, fail, queue, compute counterNs
	// inferences counts rows (first dimension of the first input);
	// executions counts successful forward calls of user requests (one for
	// a dynamic batch of many requests, as Triton counts them): the model
	// actors add to it, record does not.
	inferences, executions atomic.Int64
	lastMs                 atomic.Int64 // last inference, Unix ms
}

// counterNs is a count and a total duration.
type counterNs struct{ count, ns atomic.Int64 }

func (c *counterNs) add(d time.Duration) {
	c.count.Add(1)
	c.ns.Add(int64(d))
}

// record counts one answered request.
func (s *modelStats) record(inputs []servables.Tensor, err error, queued, compute, total time.Duration, now time.Time) {
	s.lastMs.Store(now.UnixMilli())
	if err != nil {
		s.fail.add(total)
		return
	}
	s.success.add(total)
	s.queue.add(queued)
	s.compute.add(compute)
	rows := int64(1)
	if len(inputs) > 0 && len(inputs[0].Shape) > 0 {
		rows = inputs[0].Shape[0]
	}
	s.inferences.Add(rows)
}

// ModelStats are a model's request statistics since its content loaded.
type ModelStats struct {
	// LastInference is when the last request was answered (zero: never).
	LastInference time.Time
	// Inferences counts rows served; Executions forward calls (a dynamic
	// batch of several requests is one).
	Inferences, Executions int64
	// Success, Fail: answered requests and their total time from enqueue
	// to answer; Queue: time waiting in the mailbox; Compute: forward time.
	Success, Fail, Queue, Compute Duration
}

// Duration is a count of events and their total duration.
type Duration struct {
	Count int64
	Total time.Duration
}

func (c *counterNs) load() Duration {
	return Duration{Count: c.count.Load(), Total: time.Duration(c.ns.Load())}
}

// ModelStats returns the statistics of the content serving path.
func (s *System) ModelStats(path string) (ModelStats, bool) {
	c := (*s.routes.Load())[path]
	if c == nil {
		return ModelStats{}, false
	}
	st := &c.stats
	out := ModelStats{Inferences: st.inferences.Load(), Executions: st.executions.Load(),
		Success: st.success.load(), Fail: st.fail.load(), Queue: st.queue.load(), Compute: st.compute.load()}
	if ms := st.lastMs.Load(); ms != 0 {
		out.LastInference = time.UnixMilli(ms)
	}
	return out, true
}
