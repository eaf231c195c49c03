package actors

import (
	"context"
	"time"

	"go.opentelemetry.io/otel/trace"

	"github.com/groveml/grove/cluster/forward"
	"github.com/groveml/grove/tracing"
)

// traceModel records the spans of one request a model actor answered, as
// children of the caller's span in ctx (only when it records): "queue",
// from when the router sent it to when its forward call started, and
// "batch", the forward call, with the rows of the whole call (rows; 0 when
// the request ran alone) and of the request.
func traceModel(ctx context.Context, c *content, req *Request, enqueued time.Time, queued, compute time.Duration, rows int, err error) {
	own := batchRows(req.Inputs)
	if rows == 0 {
		rows = own
	}
	path, version := tracing.AttrModelPath.String(req.ModelPath), tracing.AttrModelVersion.String(c.path)
	start := enqueued.Add(queued)
	if compute == 0 && err != nil { // it never ran: dropped, or the model was gone
		tracing.Record(ctx, tracing.SpanQueue, enqueued, start, err, path, version, tracing.AttrOutcome.String(outcomeOf(err)))
		return
	}
	tracing.Record(ctx, tracing.SpanQueue, enqueued, start, nil, path, version)
	tracing.Record(ctx, tracing.SpanBatch, start, start.Add(compute), err, path, version,
		tracing.AttrChecksum.String(c.checksum), tracing.AttrBatchRows.Int(rows), tracing.AttrRequestRows.Int(own),
		tracing.AttrOutcome.String(outcomeOf(err)))
}

// traceForward ends the span of a request forwarded to another node with
// its answer.
func traceForward(span trace.Span, path string, a forward.Answer, err error) {
	span.SetAttributes(tracing.AttrModelPath.String(path), tracing.AttrNode.String(a.Node),
		tracing.AttrChecksum.String(a.Checksum), tracing.AttrOutcome.String(outcomeOf(err)))
	tracing.End(span, err)
}
