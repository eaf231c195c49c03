package ba

import (
	"context"
	"fmt"
	"net/http"
	"slices"

	"github.com/groveml/grove/actors"
	"github.com/groveml/grove/servables"
	"github.com/groveml/grove/tracing"
)

// Inferer runs requests; *actors.System is one.
type Inferer interface {
	Infer(ctx context.Context, reqs []actors.Request) ([]actors.Result, error)
}

// Call is one batch request.
type Call struct {
	// Parse are the server's settings for parsing the request.
	Parse ParseOptions
	// API labels the requests in metrics and the prediction log ("ba", "ba-grpc").
	API string
	// RequestID identifies the request in the prediction log.
	RequestID string
	// Configs, if not nil, adjusts the request's configs (for example with
	// HTTP headers) before the items run.
	Configs func(map[string]string) map[string]string
}

// Run parses body as a B&A batch request (with c.Parse), runs it (see
// Infer) and appends the B&A batch response to dst, with the HTTP status it
// takes. A body that cannot be parsed at all gets a batch error and 400.
// When the batch could not run (Infer's error, returned), dst holds a batch
// error.
func Run(ctx context.Context, b Backend, dst, body []byte, c Call) ([]byte, int, error) {
	_, span := tracing.Start(ctx, tracing.SpanDecode)
	req, perr := c.Parse.ParseRequest(body)
	if perr != nil {
		tracing.End(span, perr)
		return AppendBatchError(dst, perr, ""), http.StatusBadRequest, nil
	}
	span.End()
	configs := req.Configs
	if c.Configs != nil {
		configs = c.Configs(configs)
	}
	results, code, err := Infer(ctx, b, req.Items, configs, c)
	if err != nil {
		return AppendBatchError(dst, &Error{Type: Unknown, Description: err.Error()}, ""), code, err
	}
	_, span = tracing.Start(ctx, tracing.SpanEncode)
	dst = AppendResponse(dst, results)
	span.End()
	return dst, code, nil
}

// Infer runs the items that parsed concurrently and returns one Result per
// item, in order; an item that did not parse keeps its error, and one that
// failed to run carries its B&A error (ItemError). An item's answer follows
// the sidecar's order of checks: its parse error (Err); else, for a model
// that is not served, MODEL_NOT_FOUND; else its InputErr; else what the
// model's run gives. The status is that of
// the batch response: 200, or the first other one an item's failure gives
// (429 for a full model queue). Infer fails, with the status of its error's
// kind, only when the batch cannot run because the server is stopping (503)
// or the caller went away; any other failure of the whole batch (a deadline
// that passed) fails each item.
func Infer(ctx context.Context, b Backend, items []Item, configs map[string]string, c Call) ([]Result, int, error) {
	results := make([]Result, len(items))
	reqs := make([]actors.Request, 0, len(items))
	idx := make([]int, 0, len(items))
	var served []string // the served paths, looked up for the first InputErr
	looked := false
	for i, it := range items {
		if it.Err != nil {
			results[i] = Result{ModelPath: it.ModelPath, Err: it.Err}
			continue
		}
		if it.InputErr != nil {
			if !looked {
				served, looked = b.ModelPaths(), true
			}
			results[i] = Result{ModelPath: it.ModelPath, Err: it.InputErr}
			if !slices.Contains(served, it.ModelPath) {
				results[i].Err, _ = ItemError(it.ModelPath, fmt.Errorf("%w: %s", actors.ErrModelNotFound, it.ModelPath))
			}
			continue
		}
		// B&A binds PyTorch inputs by position, as the inference sidecar does.
		reqs = append(reqs, actors.Request{API: c.API, ModelPath: it.ModelPath, Inputs: it.Inputs, RequestID: c.RequestID, Item: i, Configs: configs, Positional: true})
		idx = append(idx, i)
	}
	out, err := b.Infer(ctx, reqs)
	if err != nil {
		if k := servables.KindOf(err); k == servables.Unavailable || k == servables.Canceled {
			return nil, statusOf(k).batch, err
		}
		out = make([]actors.Result, len(reqs))
		for j, r := range reqs {
			out[j] = actors.Result{ModelPath: r.ModelPath, Err: err}
		}
	}
	code := http.StatusOK
	for j, res := range out {
		r := Result{ModelPath: res.ModelPath, Outputs: res.Outputs}
		if res.UnnamedOutputs {
			r.Outputs = unnamed(res.Outputs)
		}
		if res.Err != nil {
			var st int
			if r.Err, st = ItemError(res.ModelPath, res.Err); code == http.StatusOK && st == http.StatusTooManyRequests {
				code = st
			}
		}
		results[idx[j]] = r
	}
	return results, code, nil
}

// unnamed returns outputs without their names (sharing their data): the
// names of a model whose outputs have none of their own are placeholders,
// and the sidecar's answers for such (PyTorch) outputs carry no
// tensor_name.
func unnamed(outputs []servables.Tensor) []servables.Tensor {
	out := make([]servables.Tensor, len(outputs))
	for i, t := range outputs {
		t.Name = ""
		out[i] = t
	}
	return out
}
