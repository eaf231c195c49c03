package rest

import (
	"errors"
	"net/http"

	"github.com/groveml/grove/actors"
	"github.com/groveml/grove/api/graphpipe"
)

// graphPipe serves POST /{org}/{project}/{n}/gp: GraphPipe Infer and
// Metadata requests through a contract, shadowed like the BASIC API.
// Inputs are positional model inputs; outputs come back in model order.
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
		w.Header().Set("Content-Type", "application/octet-stream")
		if req.Kind == graphpipe.KindMetadata {
			_, _ = w.Write(graphpipe.AppendMetadataResponse(nil, graphpipe.Metadata{
				Name: id, Server: "grove", Description: "Grove contract " + id + " (TorchScript records no input or output types)",
			}))
			return
		}
		res, _, err := sc.Score(r.Context(), id, "", actors.Request{API: "graphpipe", Inputs: req.Inputs,
			RequestID: requestID(w, r), Configs: withHeaderConfigs(nil, r.Header)})
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
		case res.Err != nil:
			http.Error(w, res.Err.Error(), http.StatusInternalServerError)
			return
		}
		rp := s.bufs.Get().(*[]byte)
		defer s.bufs.Put(rp)
		*rp = graphpipe.AppendInferResponse((*rp)[:0], res.Outputs)
		_, _ = w.Write(*rp)
		*rp = (*rp)[:0]
	}
}
