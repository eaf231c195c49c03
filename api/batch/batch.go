// Package batch runs B&A batch inference requests through the actors: the
// one implementation behind POST /v1/inference and the B&A inference
// sidecar's gRPC Predict.
package batch

import (
	"context"
	"errors"
	"fmt"
	"net/http"

	"github.com/groveml/grove/actors"
	"github.com/groveml/grove/api/ba"
)

// Inferer runs requests; *actors.System is one.
type Inferer interface {
	Infer(ctx context.Context, reqs []actors.Request) ([]actors.Result, error)
}

// Call is one batch request.
type Call struct {
	// API labels the requests in metrics and the prediction log ("ba", "ba-grpc").
	API string
	// RequestID identifies the request in the prediction log.
	RequestID string
	// Configs, if not nil, adjusts the request's configs (for example with
	// HTTP headers) before the items run.
	Configs func(map[string]string) map[string]string
}

// Run parses body as a B&A batch request, runs its items concurrently and
// appends the B&A batch response to dst. Items that fail to parse or run
// carry their own error and the others still answer. The status is what
// HTTP answers: 200; 400 for a request that cannot be parsed at all (dst
// then holds a batch error); 429 when an item found its model's queue full;
// 503 when the server is stopping.
func Run(ctx context.Context, inf Inferer, dst, body []byte, c Call) ([]byte, int) {
	req, perr := ba.ParseRequest(body)
	if perr != nil {
		return ba.AppendBatchError(dst, perr, ""), http.StatusBadRequest
	}
	configs := req.Configs
	if c.Configs != nil {
		configs = c.Configs(configs)
	}
	results := make([]ba.Result, len(req.Items))
	reqs := make([]actors.Request, 0, len(req.Items))
	idx := make([]int, 0, len(req.Items))
	for i, it := range req.Items {
		if it.Err != nil {
			results[i] = ba.Result{ModelPath: it.ModelPath, Err: it.Err}
			continue
		}
		reqs = append(reqs, actors.Request{API: c.API, ModelPath: it.ModelPath, Inputs: it.Inputs, RequestID: c.RequestID, Configs: configs})
		idx = append(idx, i)
	}
	out, err := inf.Infer(ctx, reqs)
	if err != nil {
		return ba.AppendBatchError(dst, &ba.Error{Type: ba.Unknown, Description: err.Error()}, ""), http.StatusServiceUnavailable
	}
	code := http.StatusOK
	for j, res := range out {
		results[idx[j]] = Result(res)
		if errors.Is(res.Err, actors.ErrOverloaded) {
			code = http.StatusTooManyRequests
		}
	}
	return ba.AppendResponse(dst, results), code
}

// Result maps an actor result to its B&A item, with the B&A error type and
// description for a failure.
func Result(r actors.Result) ba.Result {
	out := ba.Result{ModelPath: r.ModelPath, Outputs: r.Outputs}
	if r.Err == nil {
		return out
	}
	out.Err = &ba.Error{Type: ba.ErrorType(actors.ErrorType(r.Err)), Description: r.Err.Error()}
	switch {
	case out.Err.Type == ba.ModelNotFound:
		out.Err.Description = fmt.Sprintf("Requested model '%s' has not been registered", r.ModelPath)
	case out.Err.Type == ba.ModelExecution && !errors.Is(r.Err, actors.ErrOverloaded):
		out.Err.Description = fmt.Sprintf("Model Execution Error. Message: Model %s encounters an exception during evaluation: %v", r.ModelPath, r.Err)
	}
	return out
}
