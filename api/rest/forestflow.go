package rest

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"strconv"

	"github.com/groveml/grove/actors"
	"github.com/groveml/grove/api/forestflow"
	"github.com/groveml/grove/conf"
)

// Scorer is what the ForestFlow score API needs: contract routing.
type Scorer interface {
	Score(ctx context.Context, contract, release string, req actors.Request) (actors.Result, string, error)
}

// score serves POST /{org}/{project}/{n}/score and
// /{org}/{project}/{n}/{rv}/score: a ForestFlow InferenceRequest in, a
// Prediction naming the release that answered out. Each schema entry is one
// input tensor [rows, len(fields)], in schema order; output i becomes schema
// entry i of the Prediction, and datum r holds row r of every output.
func (s *Server) score(sc Scorer) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		ct, id, ok := contractOf(w, r)
		if !ok {
			return
		}
		release := r.PathValue("rv")
		fqrv := forestflow.FQRV{Contract: ct, ReleaseVersion: release}

		bp := s.bufs.Get().(*[]byte)
		defer s.bufs.Put(bp)
		body, code, err := s.body(r, bp)
		if err != nil {
			http.Error(w, err.Error(), code)
			return
		}
		req, err := forestflow.ParseInferenceRequest(body)
		if err != nil {
			code := http.StatusBadRequest
			var re *forestflow.RequestError
			if errors.As(err, &re) {
				code = re.Status()
			}
			http.Error(w, err.Error(), code)
			return
		}
		configs := withHeaderConfigs(req.Configs, r.Header)
		res, picked, err := sc.Score(r.Context(), id, release, actors.Request{API: "forestflow", Inputs: req.Inputs, RequestID: requestID(w, r), Configs: configs})
		switch {
		case errors.Is(err, actors.ErrUnknownContract):
			s.forestflowError(w, forestflow.ErrorResponse{Case: forestflow.UnknownContract, Contract: ct})
			return
		case errors.Is(err, actors.ErrUnknownRelease):
			s.forestflowError(w, forestflow.ErrorResponse{Case: forestflow.UnknownServable, FQRV: fqrv})
			return
		case errors.Is(err, actors.ErrNoActiveServable):
			s.forestflowError(w, forestflow.ErrorResponse{Case: forestflow.NoActiveServablesForContract, Contract: ct})
			return
		case err != nil:
			http.Error(w, err.Error(), http.StatusServiceUnavailable)
			return
		}
		fqrv.ReleaseVersion = picked
		if res.Err == nil {
			res.Err = forestflow.CheckOutputs(req.Rows, res.Outputs)
		}
		if res.Err != nil {
			code := 0
			if errors.Is(res.Err, actors.ErrOverloaded) {
				code = http.StatusTooManyRequests
				w.Header().Set("Retry-After", "1")
			}
			s.forestflowErrorCode(w, code, forestflow.ErrorResponse{Case: forestflow.UnknownServableError, FQRV: fqrv, Message: res.Err.Error()})
			return
		}
		rp := s.bufs.Get().(*[]byte)
		defer s.bufs.Put(rp)
		out, err := forestflow.AppendPrediction((*rp)[:0], fqrv, res.Outputs)
		if err != nil {
			s.forestflowError(w, forestflow.ErrorResponse{Case: forestflow.UnknownServableError, FQRV: fqrv, Message: err.Error()})
			return
		}
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write(out)
		*rp = out[:0]
	}
}

// contractOf reads the contract of a /{org}/{project}/{n}/... path and its
// id "org/project/n"; it answers 404 and reports false when n is not a
// positive 32-bit integer.
func contractOf(w http.ResponseWriter, r *http.Request) (forestflow.Contract, string, bool) {
	n, err := strconv.ParseInt(r.PathValue("n"), 10, 32)
	if err != nil || n < 1 {
		http.Error(w, "contract number must be a positive integer", http.StatusNotFound)
		return forestflow.Contract{}, "", false
	}
	ct := forestflow.Contract{Organization: r.PathValue("org"), Project: r.PathValue("project"), ContractNumber: int32(n)}
	return ct, ct.Organization + "/" + ct.Project + "/" + strconv.FormatInt(n, 10), true
}

func (s *Server) forestflowError(w http.ResponseWriter, e forestflow.ErrorResponse) {
	s.forestflowErrorCode(w, 0, e)
}

// forestflowErrorCode writes e with code, or with its case's status when code is 0.
func (s *Server) forestflowErrorCode(w http.ResponseWriter, code int, e forestflow.ErrorResponse) {
	if code == 0 {
		code = e.Case.Status()
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	_, _ = w.Write(forestflow.AppendErrorResponse(nil, e))
}

// ContractInspector is what the contract read APIs need.
type ContractInspector interface {
	Contracts() []conf.Contract
	ContractStats(id string) ([]actors.ServableStats, error)
}

// contractList serves GET /contracts/list in ForestFlow's shape:
// {"Contracts":{"contracts":[{"organization":…,"project":…,"contractNumber":…}]}}.
func (s *Server) contractList(ci ContractInspector) http.HandlerFunc {
	return func(w http.ResponseWriter, _ *http.Request) {
		list := []any{}
		for _, k := range ci.Contracts() {
			list = append(list, contractJSON(forestflowContract(k)))
		}
		writeJSON(w, http.StatusOK, envelope("Contracts", map[string]any{"contracts": list}))
	}
}

// forestflowContract is a configured contract as ForestFlow names it.
func forestflowContract(k conf.Contract) forestflow.Contract {
	return forestflow.Contract{Organization: k.Organization, Project: k.Project, ContractNumber: int32(k.Number)}
}

// contractStats serves GET /{org}/{project}/{n}/stats: ForestFlow's
// [{"ServableMetrics": {...}}, ...], one per servable, each element also
// carrying Grove's fuller view under "Grove" (readiness, validity and its
// reason, traffic share, shadow drops, latency quantiles).
func (s *Server) contractStats(ci ContractInspector) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		ct, id, ok := contractOf(w, r)
		if !ok {
			return
		}
		st, err := ci.ContractStats(id)
		if err != nil {
			s.forestflowError(w, forestflow.ErrorResponse{Case: forestflow.UnknownContract, Contract: ct})
			return
		}
		out := make([]any, 0, len(st))
		for _, sv := range st {
			out = append(out, map[string]any{
				"ServableMetrics": servableMetricsJSON(forestflow.FQRV{Contract: ct, ReleaseVersion: sv.Release}, sv),
				"Grove":           sv,
			})
		}
		writeJSON(w, http.StatusOK, out)
	}
}

// servableMetricsJSON is ForestFlow's ServableMetrics message in its JSON:
// scoreCount (user requests), shadeCount (shadow executions), createdAtMS,
// becameValidAtMS (absent while never valid), currentPhaseInPct (whole
// percent) and performanceMetrics (from the metrics API).
func servableMetricsJSON(fqrv forestflow.FQRV, sv actors.ServableStats) map[string]any {
	m := map[string]any{
		"fqrv":               fqrvJSON(fqrv),
		"scoreCount":         sv.Served,
		"shadeCount":         sv.ShadowExecutions,
		"currentPhaseInPct":  int32(sv.PhaseInPct),
		"performanceMetrics": map[string]float64{},
	}
	if sv.Metrics != nil {
		m["performanceMetrics"] = sv.Metrics
	}
	if sv.Created != nil {
		m["createdAtMS"] = sv.Created.UnixMilli()
	}
	if sv.ValidSince != nil {
		m["becameValidAtMS"] = sv.ValidSince.UnixMilli()
	}
	return m
}

func writeJSON(w http.ResponseWriter, code int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	_ = enc.Encode(v)
}
