package actors

import (
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"go.opentelemetry.io/otel/trace"

	"github.com/groveml/grove/routing/quality"
	"github.com/groveml/grove/servables"
	"github.com/groveml/grove/tracing"
)

// Shadow executions: a copy of a user request runs on another model at the
// lowest mailbox priority; its answer is never returned, only handed to the
// prediction sink (served=false). A copy with more rows than the
// micro-batch size is cut into micro-batches along the first dimension, so a
// user request arriving meanwhile waits for at most one micro-batch (each
// micro-batch is its own mailbox message, and user messages overtake queued
// ones). Shadow work is dropped, and counted, rather than queued when the
// model already has 1/shadowQueueShare of its queue limit waiting (user and
// shadow work together). Queued shadow work never counts against the user
// requests' own limit: it cannot turn a user request into a 429.

// shadowQueueShare is the share of a model's queue limit that shadow
// micro-batches may occupy; beyond it new shadow copies are dropped. It
// also bounds the shadow copies of one challenger in flight to other
// cluster nodes (remoteShadows).
const shadowQueueShare = 4

// shadowRoom is how much shadow work one model may hold under a queue
// limit of queueLimit (0 or less: no limit, and shadowRoom is unused):
// its queue limit's share, at least 1.
func shadowRoom(queueLimit int) int64 { return int64(max(queueLimit/shadowQueueShare, 1)) }

// remoteShadows counts the shadow copies of one challenger path that this
// node sends to other cluster nodes: inflight, those whose forward call
// has not ended (each holds a goroutine and the request's inputs), and
// dropped, those not sent because inflight was at its bound while the
// content the cluster describes for the path was content
// (remoteContentID of its checksum; 0: none described). The router makes
// them, enters and drops; a copy's forward goroutine leaves. dropped and
// content are the router's alone.
type remoteShadows struct {
	inflight atomic.Int64
	dropped  int64
	content  int64
}

// enter takes a place for one copy in flight, within the room a local
// challenger's shadow work gets under queueLimit (shadowRoom; 0 or less:
// no limit), or reports false: the caller then drops the copy. Call
// leave when the copy's call has ended and its answer was handed on
// (compared and logged, or left to the champion's answer to compare with).
func (rs *remoteShadows) enter(queueLimit int) bool {
	if n := rs.inflight.Add(1); queueLimit > 0 && n > shadowRoom(queueLimit) {
		rs.inflight.Add(-1)
		return false
	}
	return true
}

// drop counts a copy dropped while content served the path: the count
// starts again from zero when content is not the one it counted for, as a
// local challenger's does when its content is replaced.
func (rs *remoteShadows) drop(content int64) {
	if content != rs.content {
		rs.content, rs.dropped = content, 0
	}
	rs.dropped++
}

// droppedOf is the count of copies dropped while content served the path.
func (rs *remoteShadows) droppedOf(content int64) int64 {
	if content != rs.content {
		return 0
	}
	return rs.dropped
}

// leave gives back the place of a copy whose call has ended.
func (rs *remoteShadows) leave() { rs.inflight.Add(-1) }

// shadowCopy gathers the micro-batches of one shadow execution.
type shadowCopy struct {
	req Request
	// on is the content that ran it.
	on      shadowContent
	mu      sync.Mutex
	outs    [][]servables.Tensor
	err     error
	queued  time.Duration
	compute time.Duration
	pending int
	sink    PredictionSink
	metrics *Metrics
	logger  *slog.Logger
	start   time.Time
	// ans, if not nil, is the answer the caller got, to compare with;
	// windows keep the comparisons, tol is their tolerance. res is the
	// joined answer, owned by whoever compares and logs it.
	ans     *championAnswer
	windows *compareWindows
	tol     float64
	res     Result
	// span is the execution's "shadow" span, a child of the caller's
	// (one that does nothing when the caller's trace does not record);
	// ctx carries it, for the spans of the micro-batches and the
	// forward to another node.
	span trace.Span
	ctx  context.Context
}

// traceShadow starts sc's span, a child of the caller's span in ctx, and
// gives sc.req the traceparent its log event carries: the shadow span's,
// or, when the caller's trace does not record here (sampled out), the
// caller's own, as System.Infer does for the served answer.
func (sc *shadowCopy) traceShadow(ctx context.Context, version string) {
	sc.ctx, sc.span = tracing.Start(ctx, tracing.SpanShadow)
	if sc.span.IsRecording() {
		sc.span.SetAttributes(tracing.AttrModelPath.String(sc.req.ModelPath), tracing.AttrModelVersion.String(version),
			tracing.AttrRelease.String(sc.req.Release))
	}
	sc.req.TraceParent = tracing.TraceParent(trace.SpanContextFromContext(sc.ctx))
}

// endTrace ends sc's span with the execution's outcome.
func (sc *shadowCopy) endTrace(err error) {
	if sc.span == nil || !sc.span.IsRecording() {
		return
	}
	sc.span.SetAttributes(tracing.AttrChecksum.String(sc.on.checksum), tracing.AttrOutcome.String(outcomeOf(err)))
	tracing.End(sc.span, err)
}

// shadowContent is the content a shadow copy ran on: a content of this
// node (local), or one of another cluster node, known by the checksum it
// answered with and, from the node's record, its load time.
type shadowContent struct {
	path, checksum string
	// id keys the comparison windows: the content id of a local
	// content, remoteContentID of a remote one's checksum.
	id       int64
	loadedAt time.Time
	local    *content
	// stale is set for a remote content that is not the one the
	// cluster's records describe for the path (Remote.Model): another
	// node's old content answering late during a swap.
	stale bool
}

// current reports whether the content still serves its path: a local one
// until it retires, a remote one when it is the content the cluster
// describes (or none is described).
func (sc *shadowContent) current() bool {
	if sc.local == nil {
		return !sc.stale
	}
	return !sc.local.retired.Load()
}

// localContent is the shadowContent of c.
func localContent(c *content) shadowContent {
	return shadowContent{path: c.path, checksum: c.checksum, id: c.id, loadedAt: c.loadedAt, local: c}
}

// remoteContentID is the comparison windows' key of the content of
// another node with checksum: negative, so never a local content's id
// (lifecycle ids count up from 1), and the same on every node.
func remoteContentID(checksum string) int64 {
	h := fnv.New64a()
	h.Write([]byte(checksum))
	return -int64(h.Sum64()>>1) - 1
}

// championAnswer is the answer the caller got for a request that has
// shadow copies, which they compare theirs with. The champion's done
// callback only stores it (no copy, no computation); a shadow copy that
// finished first waits in waiting and is compared by a job on the
// low-priority workers (low: the router always sets it), never on the
// champion's goroutine. The outputs are the very tensors the caller got:
// the runtimes allocate them afresh for every call and nothing writes
// them afterwards (nor pools them), so reading them here is safe for as
// long as this holds them.
type championAnswer struct {
	requestID, release string
	low                *lowPriority
	mu                 sync.Mutex
	done               bool
	// failed: the caller got an error, or no answer in time; there is
	// then nothing to compare.
	failed  bool
	out     []servables.Tensor
	compute time.Duration
	waiting []*shadowCopy
}

// answer hands over what the caller got: out, or failed, and the forward
// time; the shadow copies waiting for it are compared on the
// low-priority workers, or, when their queue is full, logged uncompared
// (and counted) on a goroutine the workers own (spill), which Stop waits
// for: the champion's goroutine never builds a log event. It is safe on
// a nil championAnswer.
func (a *championAnswer) answer(out []servables.Tensor, failed bool, compute time.Duration) {
	if a == nil {
		return
	}
	a.mu.Lock()
	a.done, a.out, a.failed, a.compute = true, out, failed, compute
	waiting := a.waiting
	a.waiting = nil
	a.mu.Unlock()
	for _, sc := range waiting {
		if !a.low.trySubmit(sc.compareAndLog) {
			sc.metrics.compareShed.WithLabelValues(sc.on.path).Inc()
			a.low.spill(sc.log)
		}
	}
}

// await reports whether the champion has answered; if not, sc waits for it.
func (a *championAnswer) await(sc *shadowCopy) bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	if !a.done {
		a.waiting = append(a.waiting, sc)
	}
	return a.done
}

// shadow sends a copy of req to the content serving path, if it has room;
// its answer is compared with ans (nil: with nothing).
func (r *routerActor) shadow(ctx actor.Context, b *batch, req *Request, target ShadowTarget, ans *championAnswer) {
	path := target.ModelPath
	c := (*r.routes.Load())[path]
	if c == nil && r.mayForward(b, path) {
		r.shadowRemote(b, req, target, ans)
		return
	}
	if c == nil {
		r.metrics.shadowDropped.WithLabelValues(path, "not_found").Inc()
		return
	}
	chunks := splitRows(req.Inputs, r.microBatchRows)
	// Reserve every micro-batch up front, or none.
	n := int64(len(chunks))
	switch err := c.reserve(n, r.queueLimit, true); {
	case errors.Is(err, errRetired):
		r.metrics.shadowDropped.WithLabelValues(path, "not_found").Inc()
		return
	case err != nil:
		r.metrics.shadowDropped.WithLabelValues(path, "overloaded").Inc()
		c.shadowDropped.Add(1)
		return
	}
	// A panic (a bug) before every micro-batch is sent gives back the
	// places of those not sent: else c would never drain.
	sent := int64(0)
	defer func() {
		if sent < n {
			c.giveBack(n-sent, true)
		}
	}()
	sc := &shadowCopy{req: shadowRequest(req, target),
		on: localContent(c), outs: make([][]servables.Tensor, len(chunks)), pending: len(chunks), sink: r.sink, metrics: r.metrics, logger: r.log, start: time.Now()}
	sc.traceShadow(b.ctx, c.path)
	if target.windows != nil && ans != nil {
		sc.ans, sc.windows, sc.tol = ans, target.windows, r.tolerance
	}
	var deadline time.Time // none without a shadow timeout
	if r.shadowTimeout > 0 {
		deadline = sc.start.Add(r.shadowTimeout)
	}
	for i, in := range chunks {
		p := &predict{inputs: c.bind(in, req.Positional, req.TypeNamed), priority: priorityShadow, enqueued: sc.start, deadline: deadline,
			done: func(out []servables.Tensor, err error, queued, compute time.Duration) {
				c.leave(1)
				if tracing.Recording(sc.ctx) {
					traceModel(sc.ctx, c, &Request{ModelPath: path, Inputs: in}, sc.start, queued, compute, 0, err)
				}
				sc.finish(i, out, err, queued, compute)
			}}
		sent++ // from here on, p's answer gives its place back
		c.send(ctx.Send, p, false)
	}
}

// shadowRequest is the request a shadow copy of req on target logs: the
// caller's request (its id, item, configs, contract and time, which the
// outcome join reads) on the target's model and release.
func shadowRequest(req *Request, target ShadowTarget) Request {
	return Request{API: req.API, ModelPath: target.ModelPath, Inputs: req.Inputs, RequestID: req.RequestID, Item: req.Item,
		Configs: req.Configs, Contract: req.Contract, Release: target.Release, Logging: target.Logging, Received: req.Received}
}

// finish records one micro-batch; the last one joins the outputs, compares
// them with the caller's answer (or leaves that to the champion's answer
// if it has not come yet) and logs the execution.
func (sc *shadowCopy) finish(i int, out []servables.Tensor, err error, queued, compute time.Duration) {
	sc.mu.Lock()
	sc.outs[i] = out
	if err != nil && sc.err == nil {
		sc.err = err
	}
	sc.queued = max(sc.queued, queued)
	sc.compute += compute
	sc.pending--
	last := sc.pending == 0
	sc.mu.Unlock()
	if !last {
		return
	}
	if errors.Is(sc.err, errShadowShed) {
		sc.metrics.shadowDropped.WithLabelValues(sc.on.path, "busy").Inc()
		sc.on.local.shadowDropped.Add(1)
		sc.endTrace(sc.err)
		return
	}
	res := Result{ModelPath: sc.on.path, Checksum: sc.on.checksum, Err: sc.err, Queued: sc.queued, Compute: sc.compute}
	joined := true
	if res.Err == nil {
		res.Outputs, res.Err = concatRows(sc.outs)
		joined = res.Err == nil
	}
	if res.Err == nil {
		// Only answered executions count (min_served_events, stats): a
		// challenger that fails every time must not become valid.
		sc.on.local.shadowed.Add(1)
	}
	sc.metrics.observe(sc.req.API+"-shadow", sc.on.path, res.Err, time.Since(sc.start))
	sc.ended(res, joined)
}

// ended compares the execution's result with the caller's answer (or
// leaves that to the champion's answer if it has not come yet) and logs
// it. joined is false when the result says nothing of the model (its
// micro-batches could not be joined, a remote copy was not run): it is
// then logged only.
func (sc *shadowCopy) ended(res Result, joined bool) {
	sc.endTrace(res.Err)
	sc.res = res
	// A copy dropped unrun (past shadow_timeout) says nothing of the
	// challenger, nor does one whose micro-batches Grove could not join.
	ready := true
	if k := servables.KindOf(res.Err); sc.ans != nil && joined && k != servables.DeadlineExceeded && k != servables.Canceled {
		// From here on sc.res belongs to whoever compares it.
		if ready = sc.ans.await(sc); ready {
			sc.compare()
		}
	}
	if ready {
		sc.log()
	}
}

// compare compares the execution with the champion's answer, which has
// come, records it in the windows and attaches it to the log event. It
// runs on a low-priority worker, or on whichever goroutine ended the
// copy, with nothing above it to recover a panic: a panic in it (a bug in
// Grove's comparison) drops this comparison alone, logged with its stack
// and counted (recoverJob, actor="shadow_compare"; and as a comparison
// shed), and the execution is logged uncompared.
func (sc *shadowCopy) compare() {
	defer func() {
		if v := recover(); v != nil {
			sc.metrics.compareShed.WithLabelValues(sc.on.path).Inc()
			_ = recoverJob(sc.logger, sc.metrics, "shadow_compare", "comparison of a shadow copy on model "+sc.on.path+" with the caller's answer", v)
		}
	}()
	a := sc.ans
	e := quality.Execution{ChampionFailed: a.failed, ShadowFailed: sc.res.Err != nil}
	cmp := &ShadowComparison{RequestID: a.requestID, Release: a.release, Tolerance: sc.tol, ChampionFailed: a.failed}
	if !a.failed && sc.res.Err == nil {
		e.Outputs = quality.DiffOutputs(a.out, sc.res.Outputs, sc.tol)
		e.Shadow, e.Champion = sc.res.Compute, a.compute
		cmp.ChampionCompute, cmp.Outputs = a.compute, e.Outputs
	}
	sc.windows.record(sc.on.id, sc.on.current(), e, time.Now())
	sc.res.Comparison = cmp
}

// compareAndLog compares and logs an execution that waited for the champion.
func (sc *shadowCopy) compareAndLog() {
	sc.compare()
	sc.log()
}

// log hands the execution to the prediction sink. It runs on a
// low-priority worker, on the goroutine a full queue spills it to, or on
// whichever goroutine ended the copy, with nothing above it to recover a
// panic: a panic in the sink (a bug in Grove's logging) drops this entry
// alone, logged with its stack and counted (recoverJob,
// actor="shadow_log").
func (sc *shadowCopy) log() {
	if sc.sink == nil {
		return
	}
	defer func() {
		if v := recover(); v != nil {
			_ = recoverJob(sc.logger, sc.metrics, "shadow_log", "prediction log entry of a shadow copy on model "+sc.req.ModelPath, v)
		}
	}()
	sc.sink.LogPrediction(&sc.req, &sc.res, false)
}

// splitRows cuts inputs into micro-batches of at most rows rows along the
// first dimension. Inputs that do not share a first dimension, or a rows of
// 0, give one piece. The pieces share memory with inputs.
func splitRows(inputs []servables.Tensor, rows int) [][]servables.Tensor {
	n := batchRows(inputs)
	if rows <= 0 || n <= rows {
		return [][]servables.Tensor{inputs}
	}
	var counts []int
	for lo := 0; lo < n; lo += rows {
		counts = append(counts, min(rows, n-lo))
	}
	pieces, _ := cutRows(inputs, counts) // the counts add up to n
	return pieces
}

// cutRows cuts tensors that share a first dimension into pieces of counts
// rows each, in order; the counts must add up to that dimension. The
// pieces share memory with the tensors.
func cutRows(ts []servables.Tensor, counts []int) ([][]servables.Tensor, error) {
	n := batchRows(ts)
	total := 0
	for _, c := range counts {
		total += c
	}
	if n == 0 || total != n {
		return nil, fmt.Errorf("cannot cut %d rows into %v", n, counts)
	}
	pieces := make([][]servables.Tensor, len(counts))
	for i := range pieces {
		pieces[i] = make([]servables.Tensor, len(ts))
	}
	for j, t := range ts {
		if len(t.Data)%n != 0 && t.DType != servables.Bytes {
			return nil, fmt.Errorf("tensor %d: %d bytes do not divide into %d rows", j, len(t.Data), n)
		}
		rowBytes := len(t.Data) / n
		at := func(row int) int { return row * rowBytes }
		if t.DType == servables.Bytes { // rows of BYTES differ in length
			offs, err := t.RowOffsets(n)
			if err != nil {
				return nil, fmt.Errorf("tensor %d: %w", j, err)
			}
			at = func(row int) int { return offs[row] }
		}
		lo := 0
		for i, c := range counts {
			hi := lo + c
			shape := append([]int64{int64(c)}, t.Shape[1:]...)
			pieces[i][j] = servables.Tensor{Name: t.Name, DType: t.DType, Shape: shape, Data: t.Data[at(lo):at(hi):at(hi)]}
			lo = hi
		}
	}
	return pieces, nil
}

// batchRows is the first dimension all inputs share, or 0 when they do not.
func batchRows(inputs []servables.Tensor) int {
	if len(inputs) == 0 {
		return 0
	}
	n := -1
	for _, t := range inputs {
		if len(t.Shape) == 0 {
			return 0
		}
		if n >= 0 && int(t.Shape[0]) != n {
			return 0
		}
		n = int(t.Shape[0])
	}
	return n
}

// concatRows joins the outputs of micro-batches along the first dimension.
func concatRows(pieces [][]servables.Tensor) ([]servables.Tensor, error) {
	if len(pieces) == 1 {
		return pieces[0], nil
	}
	first := pieces[0]
	out := make([]servables.Tensor, len(first))
	for j, t := range first {
		if len(t.Shape) == 0 {
			return nil, fmt.Errorf("output %d is a scalar; micro-batch outputs cannot be joined", j)
		}
		rows := int64(0)
		for _, p := range pieces {
			if len(p) != len(first) || p[j].DType != t.DType || len(p[j].Shape) != len(t.Shape) {
				return nil, fmt.Errorf("output %d differs between micro-batches", j)
			}
			rows += p[j].Shape[0]
		}
		joined, err := servables.NewTensor(t.Name, t.DType, append([]int64{rows}, t.Shape[1:]...))
		if err != nil {
			return nil, err
		}
		if t.DType == servables.Bytes { // elements of any length: concatenated as they are
			joined.Data = joined.Data[:0]
			for _, p := range pieces {
				joined.Data = append(joined.Data, p[j].Data...)
			}
			if err := joined.Validate(); err != nil {
				return nil, fmt.Errorf("output %d: micro-batch outputs do not fill %v: %w", j, joined.Shape, err)
			}
			out[j] = joined
			continue
		}
		off := 0
		for _, p := range pieces {
			off += copy(joined.Data[off:], p[j].Data)
		}
		if off != len(joined.Data) {
			return nil, fmt.Errorf("output %d: micro-batch outputs do not fill %v", j, joined.Shape)
		}
		out[j] = joined
	}
	return out, nil
}
