// Package manage is ForestFlow's contract management API over the model
// config in the bucket: creating and updating contracts and servables,
// their policies, logging settings and performance metrics, and reading
// them back (Register), with the one table from a kind of failure to an
// HTTP status (statusOf; statusOfError adds the failures of no kind). Its documents are read by package forestflow and
// applied by modelconfig's edits. Beside it, POST /v1/rollback puts a
// model's kept previous content back into service (rollback.go).
package manage

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"

	"github.com/groveml/grove/actors"
	"github.com/groveml/grove/api/forestflow"
	"github.com/groveml/grove/auth"
	"github.com/groveml/grove/conf/bucket"
	"github.com/groveml/grove/conf/modelconfig"
	"github.com/groveml/grove/logging/audit"
	"github.com/groveml/grove/servables"
	"github.com/groveml/grove/transport/httpserver"
)

// Backend is what the management API needs: edits of the model config in
// the bucket, the shared contract state, and the config in force;
// *actors.System is one.
type Backend interface {
	EditConfig(ctx context.Context, edit func(*modelconfig.Config) error) (*modelconfig.Config, error)
	DeleteServable(ctx context.Context, id, rv string) error
	SetMetrics(ctx context.Context, id, rv string, u modelconfig.MetricsUpdate) (map[string]float64, error)
	Contract(id string) (modelconfig.Contract, error)
	Servable(id, rv string) (actors.ServableInfo, error)
	Rollback(ctx context.Context, path string) (actors.Rolled, error)
}

// Register serves the management API over b on h. Every write edits the
// model config object in the bucket (see actors.System.EditConfig), which
// stays the single source of truth: replicas apply it at their next poll,
// this one before answering. Answers use ForestFlow's envelopes
// ({"ServableCreatedSuccessfully": {...}}, its error cases and statuses).
// Every write, refused or not, is recorded with rec (see audit.Begin):
// its caller, route, change and answer; nil records nothing. Refusals
// (no or bad credentials, a missing role, over its limit) answer
// ForestFlow's error body (forestflow.WriteRefusal), but POST
// /v1/rollback's, which are {"error": …} like its other answers; its
// routes' API (Handle's api argument) is RollbackAPI, the others' "manage".
// The writes (and the metrics feed) need role manage, the reads read.
func Register(h *httpserver.Server, b Backend, rec audit.Recorder) {
	a := &api{h: h, b: b}
	h.SetErrorWriter("manage", forestflow.WriteRefusal)
	read := func(pattern string, f http.HandlerFunc) { h.Handle(pattern, auth.RoleRead, "manage", f) }
	write := func(pattern string, f http.HandlerFunc) {
		h.Handle(pattern, auth.RoleManage, "manage", recorded(rec, pattern, f))
	}
	write("POST /servable", a.createServable)
	write("POST /contract/{org}/{project}/{n}", a.putContract(true))
	write("PUT /{org}/{project}/{n}", a.putContract(false))
	for _, p := range []string{"policy", "policy-settings"} {
		write("PUT /{org}/{project}/{n}/{rv}/"+p, a.updateServable("policy"))
	}
	for _, p := range []string{"logging", "logging-settings"} {
		write("PUT /{org}/{project}/{n}/{rv}/"+p, a.updateServable("logging"))
	}
	write("DELETE /{org}/{project}/{n}/{rv}", a.deleteServable)
	write("POST /{org}/{project}/{n}/{rv}/metrics", a.setMetrics)
	// Grove's own JSON route, under an API of its own for its error
	// format (and the admin listener's list), recorded as a management write.
	h.SetErrorWriter(RollbackAPI, httpserver.JSONError)
	h.Handle("POST /v1/rollback", auth.RoleManage, RollbackAPI, recorded(rec, "POST /v1/rollback", a.rollback))
	for _, p := range []string{"releases", "list"} {
		read("GET /{org}/{project}/{n}/"+p, a.releases)
	}
	for _, p := range []string{"c-settings", "contract-settings"} {
		read("GET /{org}/{project}/{n}/"+p, a.contractSettings)
	}
	for _, p := range []string{"s-settings", "servable-settings"} {
		read("GET /{org}/{project}/{n}/"+p, a.servableSettings(false))
	}
	read("GET /{org}/{project}/{n}/{rv}/settings", a.servableSettings(true))
	read("GET /{org}/{project}/{n}/metadata", a.metadata(false))
	read("GET /{org}/{project}/{n}/{rv}/metadata", a.metadata(true))
}

type api struct {
	h *httpserver.Server
	b Backend
}

// recorded is f, a write served on route, with its audit record: the
// caller, the contract or release its path names, the change the backend
// notes, and the answer's status with the error fail noted (or the
// status's text when the request was refused before, as a body too large).
func recorded(rec audit.Recorder, route string, f http.HandlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		op := audit.HTTPOp(r, "manage", route)
		var parts []string
		for _, k := range []string{"org", "project", "n", "rv"} {
			if v := r.PathValue(k); v != "" {
				parts = append(parts, v)
			}
		}
		op.Target = strings.Join(parts, "/")
		ctx, rw := audit.Begin(r.Context(), rec, op)
		sw := &httpserver.StatusRecorder{ResponseWriter: w, Code: http.StatusOK}
		f(sw, r.WithContext(ctx))
		var err error
		if sw.Code >= http.StatusBadRequest {
			err = errors.New(http.StatusText(sw.Code))
		}
		rw.Finish(ctx, strconv.Itoa(sw.Code), err)
	}
}

// kindOf classifies a management error. The sentinels of the model
// config's edits, its *modelconfig.Error (which the documents forestflow
// reads return too) and the bucket's conditional writes carry no
// servables.Kind yet, so they are classified here; any other error by
// servables.KindOf.
func kindOf(err error) servables.Kind {
	var ce *modelconfig.Error
	switch {
	case errors.Is(err, modelconfig.ErrContractNotFound), errors.Is(err, modelconfig.ErrServableNotFound):
		return servables.NotFound
	case errors.Is(err, modelconfig.ErrContractExists), errors.Is(err, modelconfig.ErrContractSettingsGiven), errors.As(err, &ce):
		return servables.InvalidInput
	case errors.Is(err, modelconfig.ErrServableExists), errors.Is(err, bucket.ErrConflict):
		return servables.Conflict
	}
	return servables.KindOf(err)
}

// statusOf is the management API's one table from a kind of failure to an
// HTTP status, for the failures ForestFlow has no error case for (see
// fail). A write that lost its race with another replica's is 503 (with
// Retry-After): it is retried from a fresh read, and only fails when it
// kept losing. A read-only bucket is 403, a caller gone 499 (for the
// metrics: nobody reads it).
func statusOf(k servables.Kind) int {
	switch k {
	case servables.OK:
		return http.StatusOK
	case servables.NotFound:
		return http.StatusNotFound
	case servables.InvalidInput:
		return http.StatusUnprocessableEntity
	case servables.Overloaded:
		return http.StatusTooManyRequests
	case servables.DeadlineExceeded:
		return http.StatusGatewayTimeout
	case servables.Canceled:
		return httpserver.StatusClientClosedRequest
	case servables.Unavailable, servables.Conflict:
		return http.StatusServiceUnavailable
	case servables.ReadOnly:
		return http.StatusForbidden
	}
	return http.StatusInternalServerError // OutputUnsupported, Crashed, Execution
}

// statusOfError is the HTTP status of a management failure err of kind k
// (kindOf): statusOf(k), but 413 for a write that would make the model
// config or the contract state larger than its limit
// (modelconfig.MaxConfigBytes, MaxStateBytes: a
// *bucket.ContentTooLargeError, whose message names the limit): nothing was written, and the caller's change
// is what does not fit, as a body over max_body_bytes.
func statusOfError(err error, k servables.Kind) int {
	var tooLarge *bucket.ContentTooLargeError
	if errors.As(err, &tooLarge) {
		return http.StatusRequestEntityTooLarge
	}
	return statusOf(k)
}

// fail answers a management call that failed with err. The failures
// ForestFlow has an error case for answer that case with its status: an
// unknown contract or release (404), a servable that exists (409), and a
// document or an edit that is not valid (422), whose case is invalid
// (ContractValidationError or CreateServableRequestInvalidError). Any
// other answers its text with statusOfError's status; a server fault is
// logged.
func (a *api) fail(w http.ResponseWriter, r *http.Request, err error, fqrv forestflow.FQRV, invalid forestflow.ErrorCase) {
	audit.FromContext(r.Context()).Fail(err)
	k := kindOf(err)
	var ce *modelconfig.Error
	switch {
	case errors.Is(err, modelconfig.ErrServableExists):
		forestflow.WriteError(w, 0, forestflow.ErrorResponse{Case: forestflow.ServableAlreadyExistsError, FQRV: fqrv})
	case k == servables.NotFound && (errors.Is(err, modelconfig.ErrServableNotFound) || errors.Is(err, actors.ErrUnknownRelease)):
		forestflow.WriteError(w, 0, forestflow.ErrorResponse{Case: forestflow.UnknownServable, FQRV: fqrv})
	case k == servables.NotFound:
		forestflow.WriteError(w, 0, forestflow.ErrorResponse{Case: forestflow.UnknownContract, Contract: fqrv.Contract})
	case k == servables.InvalidInput:
		msg := err.Error()
		if errors.As(err, &ce) {
			msg = ce.Error()
		}
		forestflow.WriteError(w, 0, forestflow.ErrorResponse{Case: invalid, Contract: fqrv.Contract, FQRV: fqrv, Message: msg})
	default:
		code := statusOfError(err, k)
		if k == servables.Conflict {
			w.Header().Set("Retry-After", "1")
		}
		if code == http.StatusInternalServerError {
			a.h.Logger().Error("management call failed", "err", err)
		}
		http.Error(w, err.Error(), code)
	}
}

// createServable serves POST /servable: a forestflow.ServeRequest adds a release
// (and its model, and its contract, as needed).
func (a *api) createServable(w http.ResponseWriter, r *http.Request) {
	body, ok := a.h.Body(w, r, new([]byte))
	if !ok {
		return
	}
	req, err := forestflow.ParseServeRequest(body)
	if err != nil {
		a.fail(w, r, fmt.Errorf("serve request: %w", err), forestflow.FQRV{}, forestflow.CreateServableRequestInvalidError)
		return
	}
	fqrv := forestflow.FQRV{Contract: forestflow.ConfContract(req.Contract), ReleaseVersion: req.Servable.ReleaseVersion}
	audit.FromContext(r.Context()).Target(req.Contract.ID() + "/" + req.Servable.ReleaseVersion)
	if _, err := a.b.EditConfig(r.Context(), func(c *modelconfig.Config) error {
		return c.AddServable(req.Contract, req.Servable, req.Model, req.ContractSettings)
	}); err != nil {
		invalid := forestflow.CreateServableRequestInvalidError
		if errors.Is(err, modelconfig.ErrContractSettingsGiven) {
			invalid = forestflow.ContractValidationError
		}
		a.fail(w, r, err, fqrv, invalid)
		return
	}
	httpserver.WriteJSON(w, http.StatusOK, forestflow.Envelope("ServableCreatedSuccessfully", map[string]any{"fqrv": forestflow.FQRVJSON(fqrv)}))
}

// putContract serves contract settings: POST /contract/{org}/{project}/{n}
// (create) creates the contract, PUT /{org}/{project}/{n} replaces its
// settings. The POST shares its path shape with the score and GraphPipe
// endpoints, which win (see httpserver.Server.Handle).
func (a *api) putContract(create bool) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		ct, id, ok := forestflow.ContractOf(w, r)
		if !ok {
			return
		}
		body, ok := a.h.Body(w, r, new([]byte))
		if !ok {
			return
		}
		cs, err := forestflow.ParseContractSettings(body)
		if err == nil {
			_, err = a.b.EditConfig(r.Context(), func(c *modelconfig.Config) error {
				if create {
					return c.CreateContract(ct.Organization, ct.Project, int(ct.ContractNumber), cs)
				}
				return c.UpdateContract(id, cs)
			})
		}
		if err != nil {
			a.fail(w, r, err, forestflow.FQRV{Contract: ct}, forestflow.ContractValidationError)
			return
		}
		answer := "ContractUpdatedSuccessfully"
		if create {
			answer = "ContractCreatedSuccessfully"
		}
		httpserver.WriteJSON(w, http.StatusOK, forestflow.Envelope(answer, map[string]any{"contract": forestflow.ContractJSON(ct)}))
	}
}

// updateServable serves PUT /{org}/{project}/{n}/{rv}/policy and .../logging.
func (a *api) updateServable(what string) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		ct, id, ok := forestflow.ContractOf(w, r)
		if !ok {
			return
		}
		rv := r.PathValue("rv")
		fqrv := forestflow.FQRV{Contract: ct, ReleaseVersion: rv}
		body, ok := a.h.Body(w, r, new([]byte))
		if !ok {
			return
		}
		var edit func(*modelconfig.Config) error
		var err error
		if what == "policy" {
			var p modelconfig.Policy
			if p, err = forestflow.ParsePolicy(body); err == nil {
				edit = func(c *modelconfig.Config) error { return c.SetPolicy(id, rv, p) }
			}
		} else {
			var l modelconfig.ServableLogging
			if l, err = forestflow.ParseLogging(body); err == nil {
				edit = func(c *modelconfig.Config) error { return c.SetLogging(id, rv, l) }
			}
		}
		if err == nil {
			_, err = a.b.EditConfig(r.Context(), edit)
		}
		if err != nil {
			a.fail(w, r, err, fqrv, forestflow.ContractValidationError)
			return
		}
		httpserver.WriteJSON(w, http.StatusOK, forestflow.Envelope("ServableUpdatedSuccessfully", map[string]any{"fqrv": forestflow.FQRVJSON(fqrv)}))
	}
}

// deleteServable serves DELETE /{org}/{project}/{n}/{rv}.
func (a *api) deleteServable(w http.ResponseWriter, r *http.Request) {
	ct, id, ok := forestflow.ContractOf(w, r)
	if !ok {
		return
	}
	fqrv := forestflow.FQRV{Contract: ct, ReleaseVersion: r.PathValue("rv")}
	if err := a.b.DeleteServable(r.Context(), id, fqrv.ReleaseVersion); err != nil {
		a.fail(w, r, err, fqrv, forestflow.ContractValidationError)
		return
	}
	httpserver.WriteJSON(w, http.StatusOK, forestflow.Envelope("ServablesDeletedSuccessfully", map[string]any{"fqrv": []any{forestflow.FQRVJSON(fqrv)}}))
}

// setMetrics serves POST /{org}/{project}/{n}/{rv}/metrics: performance
// metrics such as {"auc": 0.71} (null deletes one) for min_metric and
// keep_top_ranked, kept in the bucket beside the config.
func (a *api) setMetrics(w http.ResponseWriter, r *http.Request) {
	ct, id, ok := forestflow.ContractOf(w, r)
	if !ok {
		return
	}
	fqrv := forestflow.FQRV{Contract: ct, ReleaseVersion: r.PathValue("rv")}
	body, ok := a.h.Body(w, r, new([]byte))
	if !ok {
		return
	}
	u, err := forestflow.ParseMetrics(body)
	var all map[string]float64
	if err == nil {
		all, err = a.b.SetMetrics(r.Context(), id, fqrv.ReleaseVersion, u)
	}
	if err != nil {
		a.fail(w, r, err, fqrv, forestflow.ContractValidationError)
		return
	}
	if all == nil {
		all = map[string]float64{}
	}
	httpserver.WriteJSON(w, http.StatusOK, forestflow.Envelope("ServableMetricsUpdated", map[string]any{"fqrv": forestflow.FQRVJSON(fqrv), "metrics": all}))
}

// contractIn reads the path's contract and looks it up, answering errors itself.
func (a *api) contractIn(w http.ResponseWriter, r *http.Request) (forestflow.Contract, modelconfig.Contract, bool) {
	ct, id, ok := forestflow.ContractOf(w, r)
	if !ok {
		return ct, modelconfig.Contract{}, false
	}
	k, err := a.b.Contract(id)
	if err != nil {
		a.fail(w, r, err, forestflow.FQRV{Contract: ct}, forestflow.ContractValidationError)
		return ct, k, false
	}
	return ct, k, true
}

// releases serves GET /{org}/{project}/{n}/releases: [{"FQRV": {...}}, ...].
func (a *api) releases(w http.ResponseWriter, r *http.Request) {
	ct, k, ok := a.contractIn(w, r)
	if !ok {
		return
	}
	out := []any{}
	for _, sv := range k.Servables {
		out = append(out, forestflow.Envelope("FQRV", forestflow.FQRVJSON(forestflow.FQRV{Contract: ct, ReleaseVersion: sv.ReleaseVersion})))
	}
	httpserver.WriteJSON(w, http.StatusOK, out)
}

// contractSettings serves GET /{org}/{project}/{n}/c-settings, in the
// shape PUT /{org}/{project}/{n} takes.
func (a *api) contractSettings(w http.ResponseWriter, r *http.Request) {
	if _, k, ok := a.contractIn(w, r); ok {
		httpserver.WriteJSON(w, http.StatusOK, forestflow.Envelope("ContractSettings", k.Settings()))
	}
}

// servableSettings serves GET /{org}/{project}/{n}/s-settings (every
// release) and /{org}/{project}/{n}/{rv}/settings (one): each release's
// model path, policy and logging, in the shapes the PUTs take.
func (a *api) servableSettings(one bool) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		ct, k, ok := a.contractIn(w, r)
		if !ok {
			return
		}
		out := []any{}
		for _, sv := range k.Servables {
			if one && sv.ReleaseVersion != r.PathValue("rv") {
				continue
			}
			out = append(out, forestflow.Envelope("ServableSettings", map[string]any{
				"fqrv": forestflow.FQRVJSON(forestflow.FQRV{Contract: ct, ReleaseVersion: sv.ReleaseVersion}), "modelPath": sv.ModelPath,
				"policySettings": sv.Policy(), "loggingSettings": sv.Logging,
			}))
		}
		a.writeReleases(w, r, ct, out, one)
	}
}

// metadata serves GET /{org}/{project}/{n}/metadata (every release) and
// /{org}/{project}/{n}/{rv}/metadata (one): ForestFlow's BasicMetaData,
// with the inputs and outputs the model's runtime reports.
func (a *api) metadata(one bool) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		ct, k, ok := a.contractIn(w, r)
		if !ok {
			return
		}
		id := k.ID()
		out := []any{}
		for _, sv := range k.Servables {
			if one && sv.ReleaseVersion != r.PathValue("rv") {
				continue
			}
			info, err := a.b.Servable(id, sv.ReleaseVersion)
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
			out = append(out, forestflow.Envelope("BasicMetaData", map[string]any{
				"fqrv": forestflow.FQRVJSON(forestflow.FQRV{Contract: ct, ReleaseVersion: sv.ReleaseVersion}),
				"name": sv.ModelPath, "server": "Grove", "description": desc,
				"inputs": io(info.Metadata.Inputs), "outputs": io(info.Metadata.Outputs),
			}))
		}
		a.writeReleases(w, r, ct, out, one)
	}
}

// writeReleases answers with every release's document in out, or with
// the one release the path names (one), or with UnknownServable when the
// contract has no such release.
func (a *api) writeReleases(w http.ResponseWriter, r *http.Request, ct forestflow.Contract, out []any, one bool) {
	switch {
	case !one:
		httpserver.WriteJSON(w, http.StatusOK, out)
	case len(out) == 0:
		a.fail(w, r, modelconfig.ErrServableNotFound, forestflow.FQRV{Contract: ct, ReleaseVersion: r.PathValue("rv")}, "")
	default:
		httpserver.WriteJSON(w, http.StatusOK, out[0])
	}
}
