package rest

import (
	"errors"
	"fmt"
	"net/http"
	"strings"

	"github.com/groveml/grove/actors"
	"github.com/groveml/grove/api/graphpipe"
	"github.com/groveml/grove/api/oip"
	"github.com/groveml/grove/servables"
)

// graphPipe serves POST /{org}/{project}/{n}/gp: GraphPipe Infer and
// Metadata requests through a contract, shadowed like the BASIC API.
// Inputs are positional model inputs. Outputs come back in model order, or
// those named in the request's output_names in that order. The request's
// config is read as ForestFlow reads it, "k:v,k2:v2" pairs, which become the
// call's configs (the sticky key and the prediction log's key features);
// Grove-Config-* headers win. A Metadata request describes the model of the
// release that takes most of the contract's traffic now.
// Failures answer with an HTTP error status and a text body, which is what
// GraphPipe's Go client reports as an error (it ignores errors inside a 200
// InferResponse).
func (s *Server) graphPipe(sc Scorer) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		_, id, ok := contractOf(w, r)
		if !ok {
			return
		}
		bp := s.bufs.Get().(*[]byte)
		defer s.bufs.Put(bp)
		body, code, err := s.body(r, bp)
		if err != nil {
			http.Error(w, err.Error(), code)
			return
		}
		req, err := graphpipe.ParseRequest(body)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		if req.Kind == graphpipe.KindMetadata {
			m, code, err := s.graphPipeMetadata(id)
			if err != nil {
				http.Error(w, err.Error(), code)
				return
			}
			w.Header().Set("Content-Type", "application/octet-stream")
			_, _ = w.Write(graphpipe.AppendMetadataResponse(nil, m))
			return
		}
		res, _, err := sc.Score(r.Context(), id, "", actors.Request{API: "graphpipe", Inputs: req.Inputs,
			RequestID: requestID(w, r), Configs: withHeaderConfigs(graphPipeConfigs(req.Config), r.Header)})
		switch {
		case errors.Is(err, actors.ErrUnknownContract):
			http.Error(w, err.Error(), http.StatusNotFound)
			return
		case errors.Is(err, actors.ErrNoActiveServable):
			http.Error(w, err.Error(), http.StatusUnprocessableEntity)
			return
		case err != nil:
			http.Error(w, err.Error(), http.StatusServiceUnavailable)
			return
		case errors.Is(res.Err, actors.ErrOverloaded):
			w.Header().Set("Retry-After", "1")
			http.Error(w, res.Err.Error(), http.StatusTooManyRequests)
			return
		case errors.Is(res.Err, servables.ErrInvalidInput):
			http.Error(w, res.Err.Error(), http.StatusBadRequest)
			return
		case res.Err != nil:
			http.Error(w, res.Err.Error(), http.StatusInternalServerError)
			return
		}
		outputs, err := selectGraphPipeOutputs(res.Outputs, req.OutputNames)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		w.Header().Set("Content-Type", "application/octet-stream")
		rp := s.bufs.Get().(*[]byte)
		defer s.bufs.Put(rp)
		*rp = graphpipe.AppendInferResponse((*rp)[:0], outputs)
		_, _ = w.Write(*rp)
		*rp = (*rp)[:0]
	}
}

// graphPipeConfigs reads a GraphPipe config string as ForestFlow does:
// comma-separated "key:value" pairs; keys are lowercased like Grove-Config-*
// header names, and pieces without a colon are ignored.
func graphPipeConfigs(config string) map[string]string {
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

// selectGraphPipeOutputs returns the outputs named in names, in that
// order, or all of them when names is empty; an unknown name is an error
// listing the model's outputs (the OIP outputs filter's rule).
func selectGraphPipeOutputs(outputs []servables.Tensor, names []string) ([]servables.Tensor, error) {
	if len(names) == 0 {
		return outputs, nil
	}
	requested := make([]oip.RequestedOutput, len(names))
	for i, n := range names {
		requested[i].Name = n
	}
	return oip.SelectOutputs("", outputs, requested)
}

// graphPipeMetadata describes contract id's model for a GraphPipe Metadata
// request: the release with the largest traffic share now (the first valid
// one on a tie), its model's inputs and outputs as its runtime reports them
// (-1 for a dimension of any size, no dimensions where the runtime records
// none, as TorchScript does). It fails with an HTTP status when the
// contract is unknown or no release is serving.
func (s *Server) graphPipeMetadata(id string) (graphpipe.Metadata, int, error) {
	ci, ok1 := s.b.(ContractInspector)
	m, ok2 := s.b.(Manager)
	if !ok1 || !ok2 {
		return graphpipe.Metadata{}, http.StatusNotImplemented, errors.New("this server keeps no contracts")
	}
	st, err := ci.ContractStats(id)
	if err != nil {
		return graphpipe.Metadata{}, http.StatusNotFound, err
	}
	best := -1
	for i, sv := range st {
		if sv.Ready && sv.TrafficShare > 0 && (best < 0 || sv.TrafficShare > st[best].TrafficShare) {
			best = i
		}
	}
	if best < 0 {
		return graphpipe.Metadata{}, http.StatusUnprocessableEntity, fmt.Errorf("%w in contract %s", actors.ErrNoActiveServable, id)
	}
	sv := st[best]
	info, err := m.Servable(id, sv.Release)
	if err != nil {
		return graphpipe.Metadata{}, http.StatusNotFound, err
	}
	io := func(specs []servables.TensorSpec) []graphpipe.IO {
		out := make([]graphpipe.IO, len(specs))
		for i, t := range specs {
			out[i] = graphpipe.IO{Name: t.Name, Type: t.DType, Shape: t.Shape}
		}
		return out
	}
	return graphpipe.Metadata{
		Name: id, Version: sv.Release, Server: "grove",
		Description: fmt.Sprintf("Grove contract %s: release %s, model %s (%s, checksum %s)", id, sv.Release, sv.ModelPath, info.Metadata.Runtime, info.Checksum),
		Inputs:      io(info.Metadata.Inputs), Outputs: io(info.Metadata.Outputs),
	}, http.StatusOK, nil
}
