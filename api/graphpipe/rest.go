package graphpipe

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"

	"github.com/groveml/grove/actors"
	"github.com/groveml/grove/api/forestflow"
	"github.com/groveml/grove/api/oip"
	"github.com/groveml/grove/auth"
	"github.com/groveml/grove/servables"
	"github.com/groveml/grove/tracing"
	"github.com/groveml/grove/transport/httpserver"
)

// Backend is what GraphPipe needs: contract routing, and for a Metadata
// request the contract's servables and their models; *actors.System is
// one.
type Backend interface {
	Score(ctx context.Context, contract, release string, req actors.Request) (actors.Result, string, error)
	ContractStats(id string) ([]actors.ServableStats, error)
	Servable(id, rv string) (actors.ServableInfo, error)
}

// Register serves GraphPipe over b on h: POST /{org}/{project}/{n}/gp,
// needing role infer.
// Its refusals (no or bad credentials, a missing role, over its limit)
// are plain text with their status (httpserver.TextError), GraphPipe's
// error format over HTTP: its reference server (graphpipe-go) answers a
// failed request with http.Error, and its clients report the body of a
// non-200 answer as the error's text (the errors of an InferResponse ride
// in a 200, and graphpipe-go ignores them), as fail answers too.
func Register(h *httpserver.Server, b Backend) {
	a := &api{h: h, b: b}
	h.Handle("POST /{org}/{project}/{n}/gp", auth.RoleInfer, "graphpipe", a.serve)
	h.SetErrorWriter("graphpipe", httpserver.TextError)
}

type api struct {
	h *httpserver.Server
	b Backend
}

// statusOf is GraphPipe's HTTP status for a failure: ForestFlow's table
// (forestflow.StatusOf), as GraphPipe is served through ForestFlow's
// contracts, and 422 for a contract with no active servable, as ForestFlow
// answers it.
func statusOf(err error) int {
	if errors.Is(err, actors.ErrNoActiveServable) {
		return http.StatusUnprocessableEntity
	}
	return forestflow.StatusOf(servables.KindOf(err))
}

// fail answers err with its status and its text, which is what GraphPipe's
// Go client reports as an error (it ignores errors inside a 200
// InferResponse). A full queue and a model that is loading say when to
// retry (Retry-After).
func fail(w http.ResponseWriter, err error) {
	if servables.KindOf(err) == servables.Overloaded {
		w.Header().Set("Retry-After", "1")
	}
	if s, ok := actors.RetryAfter(err); ok {
		w.Header().Set("Retry-After", strconv.Itoa(s))
	}
	http.Error(w, err.Error(), statusOf(err))
}

// serve serves POST /{org}/{project}/{n}/gp: GraphPipe Infer and Metadata
// requests through a contract, shadowed like the BASIC API. Inputs are
// bound to the model's inputs by the request's input_names when it gives
// them, else by position. Outputs come back in model order, or those named
// in the request's output_names in that order. The request's config is
// read as ForestFlow reads it, "k:v,k2:v2" pairs, which become the call's
// configs (the sticky key and the prediction log's key features);
// Grove-Config-* headers win. A Metadata request describes the model of the
// release that takes most of the contract's traffic now.
func (a *api) serve(w http.ResponseWriter, r *http.Request) {
	_, id, ok := forestflow.ContractOf(w, r)
	if !ok {
		return
	}
	bp := a.h.Buffer()
	defer a.h.Release(bp)
	body, ok := a.h.Body(w, r, bp)
	if !ok {
		return
	}
	_, span := tracing.Start(r.Context(), tracing.SpanDecode)
	req, err := ParseRequest(body)
	tracing.End(span, err)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	if req.Kind == KindMetadata {
		m, err := a.metadata(id)
		if err != nil {
			fail(w, err)
			return
		}
		w.Header().Set("Content-Type", "application/octet-stream")
		_, _ = w.Write(AppendMetadataResponse(nil, m))
		return
	}
	ctx, cancel, ok := httpserver.TimeoutContext(w, r)
	if !ok {
		return
	}
	defer cancel()
	res, _, err := a.b.Score(ctx, id, "", actors.Request{API: "graphpipe", Inputs: req.Inputs,
		RequestID: httpserver.RequestID(w, r), Configs: httpserver.HeaderConfigs(configs(req.Config), r.Header)})
	if err == nil {
		err = res.Err
	}
	if err != nil {
		fail(w, err)
		return
	}
	outputs, err := selectOutputs(res.Outputs, req.OutputNames)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	// An output GraphPipe cannot carry is the server's failure, answered
	// as fail answers the others: graphpipe-go's client ignores the errors
	// of a 200 InferResponse, so the caller would see no outputs and no
	// error.
	if err := checkOutputs(outputs); err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "application/octet-stream")
	rp := a.h.Buffer()
	defer a.h.Release(rp)
	_, span = tracing.Start(r.Context(), tracing.SpanEncode)
	*rp = AppendInferResponse((*rp)[:0], outputs)
	span.End()
	_, _ = w.Write(*rp)
	*rp = (*rp)[:0]
}

// configs reads a GraphPipe config string as ForestFlow does:
// comma-separated "key:value" pairs; keys are lowercased like Grove-Config-*
// header names, and pieces without a colon are ignored.
func configs(config string) map[string]string {
	if config == "" {
		return nil
	}
	var out map[string]string
	for _, kv := range strings.Split(config, ",") {
		k, v, ok := strings.Cut(kv, ":")
		k = strings.ToLower(strings.TrimSpace(k))
		if !ok || k == "" {
			continue
		}
		if out == nil {
			out = make(map[string]string, 4)
		}
		out[k] = strings.TrimSpace(v)
	}
	return out
}

// selectOutputs returns the outputs named in names, in that order, or all
// of them when names is empty; an unknown name is an error listing the
// model's outputs (the OIP outputs filter's rule).
func selectOutputs(outputs []servables.Tensor, names []string) ([]servables.Tensor, error) {
	if len(names) == 0 {
		return outputs, nil
	}
	requested := make([]oip.RequestedOutput, len(names))
	for i, n := range names {
		requested[i].Name = n
	}
	return oip.SelectOutputs("", outputs, requested)
}

// metadata describes contract id's model for a GraphPipe Metadata request:
// the release with the largest traffic share now (the first valid one on a
// tie), its model's inputs and outputs as its runtime reports them (-1 for
// a dimension of any size, no dimensions where the runtime records none,
// as TorchScript does). It fails when the contract is unknown (NotFound) or
// no release is serving (actors.ErrNoActiveServable).
func (a *api) metadata(id string) (Metadata, error) {
	st, err := a.b.ContractStats(id)
	if err != nil {
		return Metadata{}, err
	}
	best := -1
	for i, sv := range st {
		if sv.Ready && sv.TrafficShare > 0 && (best < 0 || sv.TrafficShare > st[best].TrafficShare) {
			best = i
		}
	}
	if best < 0 {
		return Metadata{}, fmt.Errorf("%w in contract %s", actors.ErrNoActiveServable, id)
	}
	sv := st[best]
	info, err := a.b.Servable(id, sv.Release)
	if err != nil {
		return Metadata{}, err
	}
	io := func(specs []servables.TensorSpec) []IO {
		out := make([]IO, len(specs))
		for i, t := range specs {
			out[i] = IO{Name: t.Name, Type: t.DType, Shape: t.Shape}
		}
		return out
	}
	return Metadata{
		Name: id, Version: sv.Release, Server: "grove",
		Description: fmt.Sprintf("Grove contract %s: release %s, model %s (%s, checksum %s)", id, sv.Release, sv.ModelPath, info.Metadata.Runtime, info.Checksum),
		Inputs:      io(info.Metadata.Inputs), Outputs: io(info.Metadata.Outputs),
	}, nil
}
