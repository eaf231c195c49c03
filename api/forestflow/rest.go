package forestflow

import (
	"context"
	"errors"
	"net/http"
	"strconv"

	"github.com/groveml/grove/actors"
	"github.com/groveml/grove/auth"
	"github.com/groveml/grove/conf/modelconfig"
	"github.com/groveml/grove/servables"
	"github.com/groveml/grove/tracing"
	"github.com/groveml/grove/transport/httpserver"
)

// Backend is what the score and contract read APIs need: contract routing,
// the configured contracts and their servables' statistics; *actors.System
// is one.
type Backend interface {
	Score(ctx context.Context, contract, release string, req actors.Request) (actors.Result, string, error)
	Contracts() ([]modelconfig.Contract, error)
	ContractStats(id string) ([]actors.ServableStats, error)
}

// Register serves the ForestFlow APIs over b on h: the score endpoints
// (routed through the contract, or to one release), the contract list and
// each contract's statistics; scoring needs role infer, the reads read.
// They answer refusals with WriteRefusal.
func Register(h *httpserver.Server, b Backend) {
	a := &api{h: h, b: b}
	h.Handle("POST /{org}/{project}/{n}/score", auth.RoleInfer, "forestflow", a.score)
	h.Handle("POST /{org}/{project}/{n}/{rv}/score", auth.RoleInfer, "forestflow", a.score)
	h.Handle("GET /contracts/list", auth.RoleRead, "contracts", a.contractList)
	h.Handle("GET /{org}/{project}/{n}/stats", auth.RoleRead, "contracts", a.contractStats)
	h.SetErrorWriter("forestflow", WriteRefusal)
	h.SetErrorWriter("contracts", WriteRefusal)
}

// WriteRefusal is the httpserver.ErrorWriter of ForestFlow's routes (the
// score, contract read and management APIs): a refused call (no or bad
// credentials, a missing role, over its limit) answers code with
// ForestFlow's ErrorResponse body. ForestFlow has no case for a refusal;
// it is UnknownServableError, its one case that carries a message, which
// every ForestFlow client reads: {"UnknownServableError":{"fqrv":…,
// "errorMessage":msg}}, with the contract and release the path names
// (empty, contract number 0, where it names none).
func WriteRefusal(w http.ResponseWriter, r *http.Request, code int, msg string) {
	n, _ := strconv.ParseInt(r.PathValue("n"), 10, 32)
	fqrv := FQRV{Contract: Contract{Organization: r.PathValue("org"), Project: r.PathValue("project"), ContractNumber: int32(max(n, 0))},
		ReleaseVersion: r.PathValue("rv")}
	WriteError(w, code, ErrorResponse{Case: UnknownServableError, FQRV: fqrv, Message: msg})
}

type api struct {
	h *httpserver.Server
	b Backend
}

// StatusOf is ForestFlow's one table from a kind of failure to an HTTP
// status. A full model queue is 429 (with Retry-After), a model that is
// loading 503 (with Retry-After: when it should be loaded), a caller gone 499
// (for the metrics: nobody reads it). The failures ForestFlow has an error
// case for answer with the case's own status (see fail).
func StatusOf(k servables.Kind) int {
	switch k {
	case servables.OK:
		return http.StatusOK
	case servables.NotFound:
		return http.StatusNotFound
	case servables.InvalidInput:
		return http.StatusBadRequest
	case servables.Overloaded:
		return http.StatusTooManyRequests
	case servables.DeadlineExceeded:
		return http.StatusGatewayTimeout
	case servables.Canceled:
		return httpserver.StatusClientClosedRequest
	case servables.Unavailable:
		return http.StatusServiceUnavailable
	case servables.Conflict:
		return http.StatusConflict
	case servables.ReadOnly:
		return http.StatusForbidden
	}
	return http.StatusInternalServerError // OutputUnsupported, Crashed, Execution
}

// fail answers a score of release fqrv that failed with err. A failure
// ForestFlow has an error case for answers that case with its status: an
// unknown contract or release (404), no active servable (422). A failure
// of the model that answered is UnknownServableError; any other (the
// server stopping) plain text. Their status is StatusOf's.
func fail(w http.ResponseWriter, err error, fqrv FQRV, answered bool) {
	switch {
	case errors.Is(err, actors.ErrUnknownContract):
		WriteError(w, 0, ErrorResponse{Case: UnknownContract, Contract: fqrv.Contract})
		return
	case errors.Is(err, actors.ErrUnknownRelease):
		WriteError(w, 0, ErrorResponse{Case: UnknownServable, FQRV: fqrv})
		return
	case errors.Is(err, actors.ErrNoActiveServable):
		WriteError(w, 0, ErrorResponse{Case: NoActiveServablesForContract, Contract: fqrv.Contract})
		return
	}
	k := servables.KindOf(err)
	if k == servables.Overloaded {
		w.Header().Set("Retry-After", "1")
	}
	if s, ok := actors.RetryAfter(err); ok {
		w.Header().Set("Retry-After", strconv.Itoa(s))
	}
	if !answered {
		http.Error(w, err.Error(), StatusOf(k))
		return
	}
	WriteError(w, StatusOf(k), ErrorResponse{Case: UnknownServableError, FQRV: fqrv, Message: err.Error()})
}

// score serves POST /{org}/{project}/{n}/score and
// /{org}/{project}/{n}/{rv}/score: an InferenceRequest in, a Prediction
// naming the release that answered out. Each schema entry is one input
// tensor [rows, len(fields)], in schema order; output i becomes schema
// entry i of the Prediction, and datum r holds row r of every output.
func (a *api) score(w http.ResponseWriter, r *http.Request) {
	ct, id, ok := ContractOf(w, r)
	if !ok {
		return
	}
	release := r.PathValue("rv")
	fqrv := FQRV{Contract: ct, ReleaseVersion: release}
	bp := a.h.Buffer()
	defer a.h.Release(bp)
	body, ok := a.h.Body(w, r, bp)
	if !ok {
		return
	}
	_, span := tracing.Start(r.Context(), tracing.SpanDecode)
	req, err := ParseInferenceRequest(body)
	tracing.End(span, err)
	if err != nil {
		code := http.StatusBadRequest
		var re *RequestError
		if errors.As(err, &re) {
			code = re.Status()
		}
		http.Error(w, err.Error(), code)
		return
	}
	ctx, cancel, ok := httpserver.TimeoutContext(w, r)
	if !ok {
		return
	}
	defer cancel()
	configs := httpserver.HeaderConfigs(req.Configs, r.Header)
	// Schema entries are positional model inputs: their tensors are named
	// by type, not after the model's inputs.
	res, picked, err := a.b.Score(ctx, id, release, actors.Request{API: "forestflow", Inputs: req.Inputs,
		RequestID: httpserver.RequestID(w, r), Configs: configs, Positional: true, TypeNamed: true})
	if err != nil {
		fail(w, err, fqrv, false)
		return
	}
	fqrv.ReleaseVersion = picked
	if res.Err == nil {
		res.Err = CheckOutputs(req.Rows, res.Outputs)
	}
	if res.Err != nil {
		fail(w, res.Err, fqrv, true)
		return
	}
	rp := a.h.Buffer()
	defer a.h.Release(rp)
	_, span = tracing.Start(r.Context(), tracing.SpanEncode)
	out, err := AppendPrediction((*rp)[:0], fqrv, res.Outputs)
	tracing.End(span, err)
	if err != nil {
		fail(w, err, fqrv, true)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	_, _ = w.Write(out)
	*rp = out[:0]
}

// ContractOf reads the contract of a /{org}/{project}/{n}/... path and its
// id "org/project/n"; it answers 404 and reports false when n is not a
// positive 32-bit integer.
func ContractOf(w http.ResponseWriter, r *http.Request) (Contract, string, bool) {
	n, err := strconv.ParseInt(r.PathValue("n"), 10, 32)
	if err != nil || n < 1 {
		http.Error(w, "contract number must be a positive integer", http.StatusNotFound)
		return Contract{}, "", false
	}
	ct := Contract{Organization: r.PathValue("org"), Project: r.PathValue("project"), ContractNumber: int32(n)}
	return ct, ct.Organization + "/" + ct.Project + "/" + strconv.FormatInt(n, 10), true
}

// WriteError answers with e's body and code, or its case's status when
// code is 0.
func WriteError(w http.ResponseWriter, code int, e ErrorResponse) {
	if code == 0 {
		code = e.Case.Status()
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	_, _ = w.Write(AppendErrorResponse(nil, e))
}

// ConfContract is a configured contract as ForestFlow names it.
func ConfContract(k modelconfig.Contract) Contract {
	return Contract{Organization: k.Organization, Project: k.Project, ContractNumber: int32(k.Number)}
}

// ContractJSON is a contract in ForestFlow's JSON, for encoding/json.
func ContractJSON(c Contract) map[string]any {
	return map[string]any{"organization": c.Organization, "project": c.Project, "contractNumber": c.ContractNumber}
}

// FQRVJSON is an FQRV in ForestFlow's JSON, for encoding/json.
func FQRVJSON(f FQRV) map[string]any {
	return map[string]any{"contract": ContractJSON(f.Contract), "releaseVersion": f.ReleaseVersion}
}

// Envelope is ForestFlow's reply shape: {"<Case>": body}.
func Envelope(name string, body any) map[string]any { return map[string]any{name: body} }

// contractList serves GET /contracts/list in ForestFlow's shape:
// {"Contracts":{"contracts":[{"organization":…,"project":…,"contractNumber":…}]}}.
// A list that cannot be read (an internal error, the server stopping)
// answers StatusOf its kind (503), never a partial list.
func (a *api) contractList(w http.ResponseWriter, _ *http.Request) {
	contracts, err := a.b.Contracts()
	if err != nil {
		fail(w, err, FQRV{}, false)
		return
	}
	list := []any{}
	for _, k := range contracts {
		list = append(list, ContractJSON(ConfContract(k)))
	}
	httpserver.WriteJSON(w, http.StatusOK, Envelope("Contracts", map[string]any{"contracts": list}))
}

// contractStats serves GET /{org}/{project}/{n}/stats: ForestFlow's
// [{"ServableMetrics": {...}}, ...], one per servable, each element also
// carrying Grove's fuller view under "Grove" (readiness, validity and its
// reason, traffic share, shadow drops, latency quantiles, the outcome
// figures the evaluator published).
func (a *api) contractStats(w http.ResponseWriter, r *http.Request) {
	ct, id, ok := ContractOf(w, r)
	if !ok {
		return
	}
	st, err := a.b.ContractStats(id)
	if err != nil {
		fail(w, err, FQRV{Contract: ct}, false) // an unknown contract: UnknownContract (404)
		return
	}
	out := make([]any, 0, len(st))
	for _, sv := range st {
		out = append(out, map[string]any{
			"ServableMetrics": servableMetricsJSON(FQRV{Contract: ct, ReleaseVersion: sv.Release}, sv),
			"Grove":           sv,
		})
	}
	httpserver.WriteJSON(w, http.StatusOK, out)
}

// servableMetricsJSON is ForestFlow's ServableMetrics message in its JSON:
// scoreCount (user requests), shadeCount (shadow executions), createdAtMS,
// becameValidAtMS (absent while never valid), currentPhaseInPct (whole
// percent) and performanceMetrics (from the metrics API).
func servableMetricsJSON(fqrv FQRV, sv actors.ServableStats) map[string]any {
	m := map[string]any{
		"fqrv":               FQRVJSON(fqrv),
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
