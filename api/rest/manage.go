package rest

import (
	"context"
	"errors"
	"fmt"
	"net/http"

	"github.com/groveml/grove/actors"
	"github.com/groveml/grove/api/forestflow"
	"github.com/groveml/grove/conf"
	"github.com/groveml/grove/conf/bucket"
	"github.com/groveml/grove/servables"
)

// Manager is what the contract management API needs: edits of the model
// config in the bucket, the shared contract state, and the config in force.
type Manager interface {
	EditConfig(ctx context.Context, edit func(*conf.ModelConfig) error) (*conf.ModelConfig, error)
	DeleteServable(ctx context.Context, id, rv string) error
	SetMetrics(ctx context.Context, id, rv string, u conf.MetricsUpdate) (map[string]float64, error)
	Contract(id string) (conf.Contract, error)
	Servable(id, rv string) (actors.ServableInfo, error)
}

// manageRoutes registers the management API. Every write edits the model
// config object in the bucket (see actors.System.EditConfig), which stays
// the single source of truth: replicas apply it at their next poll, this
// one before answering. Answers use ForestFlow's envelopes
// ({"ServableCreatedSuccessfully": {...}}, its error cases and statuses).
func (s *Server) manageRoutes(mux *http.ServeMux, m Manager) {
	h := func(f http.HandlerFunc) http.HandlerFunc { return s.instrument("manage", f) }
	mux.HandleFunc("POST /servable", h(s.createServable(m)))
	mux.HandleFunc("PUT /{org}/{project}/{n}", h(s.updateContract(m)))
	for _, p := range []string{"policy", "policy-settings"} {
		mux.HandleFunc("PUT /{org}/{project}/{n}/{rv}/"+p, h(s.updateServable(m, "policy")))
	}
	for _, p := range []string{"logging", "logging-settings"} {
		mux.HandleFunc("PUT /{org}/{project}/{n}/{rv}/"+p, h(s.updateServable(m, "logging")))
	}
	mux.HandleFunc("DELETE /{org}/{project}/{n}/{rv}", h(s.deleteServable(m)))
	mux.HandleFunc("POST /{org}/{project}/{n}/{rv}/metrics", h(s.setMetrics(m)))
	for _, p := range []string{"releases", "list"} {
		mux.HandleFunc("GET /{org}/{project}/{n}/"+p, h(s.releases(m)))
	}
	for _, p := range []string{"c-settings", "contract-settings"} {
		mux.HandleFunc("GET /{org}/{project}/{n}/"+p, h(s.contractSettings(m)))
	}
	for _, p := range []string{"s-settings", "servable-settings"} {
		mux.HandleFunc("GET /{org}/{project}/{n}/"+p, h(s.servableSettings(m, false)))
	}
	mux.HandleFunc("GET /{org}/{project}/{n}/{rv}/settings", h(s.servableSettings(m, true)))
	mux.HandleFunc("GET /{org}/{project}/{n}/metadata", h(s.metadata(m, false)))
	mux.HandleFunc("GET /{org}/{project}/{n}/{rv}/metadata", h(s.metadata(m, true)))
}

// contractJSON is a contract in ForestFlow's JSON.
func contractJSON(c forestflow.Contract) map[string]any {
	return map[string]any{"organization": c.Organization, "project": c.Project, "contractNumber": c.ContractNumber}
}

// fqrvJSON is an FQRV in ForestFlow's JSON.
func fqrvJSON(f forestflow.FQRV) map[string]any {
	return map[string]any{"contract": contractJSON(f.Contract), "releaseVersion": f.ReleaseVersion}
}

// envelope is ForestFlow's reply shape: {"<Case>": body}.
func envelope(name string, body any) map[string]any { return map[string]any{name: body} }

// manageError answers a failed management call: the edit's and the
// validation's errors in ForestFlow's error cases; invalid is the case for
// an invalid document (ContractValidationError or
// CreateServableRequestInvalidError).
func (s *Server) manageError(w http.ResponseWriter, err error, fqrv forestflow.FQRV, invalid forestflow.ErrorCase) {
	var ce *conf.ConfigError
	switch {
	case errors.Is(err, conf.ErrServableExists):
		s.forestflowError(w, forestflow.ErrorResponse{Case: forestflow.ServableAlreadyExistsError, FQRV: fqrv})
	case errors.Is(err, conf.ErrContractNotFound), errors.Is(err, actors.ErrUnknownContract):
		s.forestflowError(w, forestflow.ErrorResponse{Case: forestflow.UnknownContract, Contract: fqrv.Contract})
	case errors.Is(err, conf.ErrServableNotFound), errors.Is(err, actors.ErrUnknownRelease):
		s.forestflowError(w, forestflow.ErrorResponse{Case: forestflow.UnknownServable, FQRV: fqrv})
	case errors.Is(err, conf.ErrContractExists), errors.Is(err, conf.ErrContractSettingsGiven), errors.As(err, &ce):
		msg := err.Error()
		if ce != nil {
			msg = ce.Error()
		}
		s.forestflowError(w, forestflow.ErrorResponse{Case: invalid, Contract: fqrv.Contract, FQRV: fqrv, Message: msg})
	case errors.Is(err, bucket.ErrConflict):
		w.Header().Set("Retry-After", "1")
		http.Error(w, err.Error(), http.StatusServiceUnavailable)
	case errors.Is(err, actors.ErrReadOnly):
		http.Error(w, err.Error(), http.StatusForbidden)
	default:
		s.log.Error("management call failed", "err", err)
		http.Error(w, err.Error(), http.StatusInternalServerError)
	}
}

// readDocument reads a management request body, answering 413/400 itself.
func (s *Server) readDocument(w http.ResponseWriter, r *http.Request) ([]byte, bool) {
	var buf []byte
	body, code, err := s.body(r, &buf)
	if err != nil {
		http.Error(w, err.Error(), code)
		return nil, false
	}
	return body, true
}

// createServable serves POST /servable: a conf.ServeRequest adds a release
// (and its model, and its contract, as needed).
func (s *Server) createServable(m Manager) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		body, ok := s.readDocument(w, r)
		if !ok {
			return
		}
		req, err := conf.ParseServeRequest(body)
		if err != nil {
			s.manageError(w, fmt.Errorf("serve request: %w", err), forestflow.FQRV{}, forestflow.CreateServableRequestInvalidError)
			return
		}
		fqrv := forestflow.FQRV{Contract: forestflowContract(req.Contract), ReleaseVersion: req.Servable.ReleaseVersion}
		if _, err := m.EditConfig(r.Context(), func(c *conf.ModelConfig) error { return c.AddServable(req) }); err != nil {
			invalid := forestflow.CreateServableRequestInvalidError
			if errors.Is(err, conf.ErrContractSettingsGiven) {
				invalid = forestflow.ContractValidationError
			}
			s.manageError(w, err, fqrv, invalid)
			return
		}
		writeJSON(w, http.StatusOK, envelope("ServableCreatedSuccessfully", map[string]any{"fqrv": fqrvJSON(fqrv)}))
	}
}

// createContract serves POST /contract/{org}/{project}/{n} with contract
// settings. It shares its path shape with the score and GraphPipe
// endpoints (see dispatchPost).
func (s *Server) createContract(m Manager) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		ct, _, ok := contractOf(w, r)
		if !ok {
			return
		}
		body, ok := s.readDocument(w, r)
		if !ok {
			return
		}
		fqrv := forestflow.FQRV{Contract: ct}
		cs, err := conf.ParseContractSettings(body)
		if err == nil {
			_, err = m.EditConfig(r.Context(), func(c *conf.ModelConfig) error {
				return c.CreateContract(ct.Organization, ct.Project, int(ct.ContractNumber), cs)
			})
		}
		if err != nil {
			s.manageError(w, err, fqrv, forestflow.ContractValidationError)
			return
		}
		writeJSON(w, http.StatusOK, envelope("ContractCreatedSuccessfully", map[string]any{"contract": contractJSON(ct)}))
	}
}

// updateContract serves PUT /{org}/{project}/{n}: new contract settings.
func (s *Server) updateContract(m Manager) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		ct, id, ok := contractOf(w, r)
		if !ok {
			return
		}
		body, ok := s.readDocument(w, r)
		if !ok {
			return
		}
		cs, err := conf.ParseContractSettings(body)
		if err == nil {
			_, err = m.EditConfig(r.Context(), func(c *conf.ModelConfig) error { return c.UpdateContract(id, cs) })
		}
		if err != nil {
			s.manageError(w, err, forestflow.FQRV{Contract: ct}, forestflow.ContractValidationError)
			return
		}
		writeJSON(w, http.StatusOK, envelope("ContractUpdatedSuccessfully", map[string]any{"contract": contractJSON(ct)}))
	}
}

// updateServable serves PUT /{org}/{project}/{n}/{rv}/policy and .../logging.
func (s *Server) updateServable(m Manager, what string) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		ct, id, ok := contractOf(w, r)
		if !ok {
			return
		}
		rv := r.PathValue("rv")
		fqrv := forestflow.FQRV{Contract: ct, ReleaseVersion: rv}
		body, ok := s.readDocument(w, r)
		if !ok {
			return
		}
		var edit func(*conf.ModelConfig) error
		var err error
		if what == "policy" {
			var p conf.Policy
			if p, err = conf.ParsePolicy(body); err == nil {
				edit = func(c *conf.ModelConfig) error { return c.SetPolicy(id, rv, p) }
			}
		} else {
			var l conf.ServableLogging
			if l, err = conf.ParseLogging(body); err == nil {
				edit = func(c *conf.ModelConfig) error { return c.SetLogging(id, rv, l) }
			}
		}
		if err == nil {
			_, err = m.EditConfig(r.Context(), edit)
		}
		if err != nil {
			s.manageError(w, err, fqrv, forestflow.ContractValidationError)
			return
		}
		writeJSON(w, http.StatusOK, envelope("ServableUpdatedSuccessfully", map[string]any{"fqrv": fqrvJSON(fqrv)}))
	}
}

// deleteServable serves DELETE /{org}/{project}/{n}/{rv}.
func (s *Server) deleteServable(m Manager) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		ct, id, ok := contractOf(w, r)
		if !ok {
			return
		}
		fqrv := forestflow.FQRV{Contract: ct, ReleaseVersion: r.PathValue("rv")}
		if err := m.DeleteServable(r.Context(), id, fqrv.ReleaseVersion); err != nil {
			s.manageError(w, err, fqrv, forestflow.ContractValidationError)
			return
		}
		writeJSON(w, http.StatusOK, envelope("ServablesDeletedSuccessfully", map[string]any{"fqrv": []any{fqrvJSON(fqrv)}}))
	}
}

// setMetrics serves POST /{org}/{project}/{n}/{rv}/metrics: performance
// metrics such as {"auc": 0.71} (null deletes one) for min_metric and
// keep_top_ranked, kept in the bucket beside the config.
func (s *Server) setMetrics(m Manager) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		ct, id, ok := contractOf(w, r)
		if !ok {
			return
		}
		fqrv := forestflow.FQRV{Contract: ct, ReleaseVersion: r.PathValue("rv")}
		body, ok := s.readDocument(w, r)
		if !ok {
			return
		}
		u, err := conf.ParseMetrics(body)
		var all map[string]float64
		if err == nil {
			all, err = m.SetMetrics(r.Context(), id, fqrv.ReleaseVersion, u)
		}
		if err != nil {
			s.manageError(w, err, fqrv, forestflow.ContractValidationError)
			return
		}
		if all == nil {
			all = map[string]float64{}
		}
		writeJSON(w, http.StatusOK, envelope("ServableMetricsUpdated", map[string]any{"fqrv": fqrvJSON(fqrv), "metrics": all}))
	}
}

// contractIn reads the path's contract and looks it up, answering errors itself.
func (s *Server) contractIn(w http.ResponseWriter, r *http.Request, m Manager) (forestflow.Contract, conf.Contract, bool) {
	ct, id, ok := contractOf(w, r)
	if !ok {
		return ct, conf.Contract{}, false
	}
	k, err := m.Contract(id)
	if err != nil {
		s.manageError(w, err, forestflow.FQRV{Contract: ct}, forestflow.ContractValidationError)
		return ct, k, false
	}
	return ct, k, true
}

// releases serves GET /{org}/{project}/{n}/releases: [{"FQRV": {...}}, ...].
func (s *Server) releases(m Manager) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		ct, k, ok := s.contractIn(w, r, m)
		if !ok {
			return
		}
		out := []any{}
		for _, sv := range k.Servables {
			out = append(out, envelope("FQRV", fqrvJSON(forestflow.FQRV{Contract: ct, ReleaseVersion: sv.ReleaseVersion})))
		}
		writeJSON(w, http.StatusOK, out)
	}
}

// contractSettings serves GET /{org}/{project}/{n}/c-settings, in the
// shape PUT /{org}/{project}/{n} takes.
func (s *Server) contractSettings(m Manager) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if _, k, ok := s.contractIn(w, r, m); ok {
			writeJSON(w, http.StatusOK, envelope("ContractSettings", k.Settings()))
		}
	}
}

// servableSettings serves GET /{org}/{project}/{n}/s-settings (every
// release) and /{org}/{project}/{n}/{rv}/settings (one): each release's
// model path, policy and logging, in the shapes the PUTs take.
func (s *Server) servableSettings(m Manager, one bool) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		ct, k, ok := s.contractIn(w, r, m)
		if !ok {
			return
		}
		out := []any{}
		for _, sv := range k.Servables {
			if one && sv.ReleaseVersion != r.PathValue("rv") {
				continue
			}
			out = append(out, envelope("ServableSettings", map[string]any{
				"fqrv": fqrvJSON(forestflow.FQRV{Contract: ct, ReleaseVersion: sv.ReleaseVersion}), "modelPath": sv.ModelPath,
				"policySettings": sv.Policy(), "loggingSettings": sv.Logging,
			}))
		}
		if !one {
			writeJSON(w, http.StatusOK, out)
			return
		}
		if len(out) == 0 {
			s.manageError(w, conf.ErrServableNotFound, forestflow.FQRV{Contract: ct, ReleaseVersion: r.PathValue("rv")}, "")
			return
		}
		writeJSON(w, http.StatusOK, out[0])
	}
}

// metadata serves GET /{org}/{project}/{n}/metadata (every release) and
// /{org}/{project}/{n}/{rv}/metadata (one): ForestFlow's BasicMetaData,
// with the inputs and outputs the model's runtime reports.
func (s *Server) metadata(m Manager, one bool) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		ct, k, ok := s.contractIn(w, r, m)
		if !ok {
			return
		}
		id := k.ID()
		out := []any{}
		for _, sv := range k.Servables {
			if one && sv.ReleaseVersion != r.PathValue("rv") {
				continue
			}
			info, err := m.Servable(id, sv.ReleaseVersion)
			if err != nil {
				continue // removed meanwhile
			}
			desc := "model " + sv.ModelPath + ": not loaded"
			if info.Ready {
				desc = fmt.Sprintf("model %s: %s, checksum %s", sv.ModelPath, info.Metadata.Runtime, info.Checksum)
			}
			io := func(specs []servables.TensorSpec) []any {
				l := []any{}
				for _, t := range specs {
					shape := t.Shape
					if shape == nil {
						shape = []int64{} // unknown
					}
					l = append(l, map[string]any{"name": t.Name, "type": t.DType.String(), "shape": shape})
				}
				return l
			}
			out = append(out, envelope("BasicMetaData", map[string]any{
				"fqrv": fqrvJSON(forestflow.FQRV{Contract: ct, ReleaseVersion: sv.ReleaseVersion}),
				"name": sv.ModelPath, "server": "Grove", "description": desc,
				"inputs": io(info.Metadata.Inputs), "outputs": io(info.Metadata.Outputs),
			}))
		}
		if !one {
			writeJSON(w, http.StatusOK, out)
			return
		}
		if len(out) == 0 {
			s.manageError(w, conf.ErrServableNotFound, forestflow.FQRV{Contract: ct, ReleaseVersion: r.PathValue("rv")}, "")
			return
		}
		writeJSON(w, http.StatusOK, out[0])
	}
}

// dispatchPost serves POST /{a}/{b}/{c}/{d}: creating a contract
// (/contract/{org}/{project}/{n}) shares its path shape with scoring
// (/{org}/{project}/{n}/score) and GraphPipe (/{org}/{project}/{n}/gp), and
// net/http refuses overlapping patterns. score and gp win, so an
// organization named "contract" can still be scored.
func dispatchPost(score, gp, create http.HandlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		a, b, c, d := r.PathValue("a"), r.PathValue("b"), r.PathValue("c"), r.PathValue("d")
		var h http.HandlerFunc
		switch {
		case d == "score" && score != nil:
			h = score
			r.SetPathValue("org", a)
			r.SetPathValue("project", b)
			r.SetPathValue("n", c)
		case d == "gp" && gp != nil:
			h = gp
			r.SetPathValue("org", a)
			r.SetPathValue("project", b)
			r.SetPathValue("n", c)
		case a == "contract" && create != nil:
			h = create
			r.SetPathValue("org", b)
			r.SetPathValue("project", c)
			r.SetPathValue("n", d)
		default:
			http.NotFound(w, r)
			return
		}
		h(w, r)
	}
}
