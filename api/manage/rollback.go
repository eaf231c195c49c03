package manage

import (
	"errors"
	"fmt"
	"net/http"

	"github.com/groveml/grove/actors"
	"github.com/groveml/grove/internal/jsondoc"
	"github.com/groveml/grove/logging/audit"
	"github.com/groveml/grove/transport/httpserver"
)

// RollbackAPI is the API name POST /v1/rollback is served under (for its
// metrics, its refusals' format and httpserver.Options.AdminAPIs).
const RollbackAPI = "rollback"

// rollbackRequest is POST /v1/rollback's body: {"model_path": "m/"}.
type rollbackRequest struct {
	ModelPath string
}

// rollbackFields are the fields of a rollback request.
func rollbackFields() []jsondoc.Field[rollbackRequest] {
	return []jsondoc.Field[rollbackRequest]{
		{Name: "model_path", Decode: func(d *jsondoc.Decoder, path string, r *rollbackRequest) error {
			return d.String(path, &r.ModelPath)
		}},
	}
}

// parseRollback reads a rollback request; its errors name the field.
func parseRollback(body []byte) (string, error) {
	var req rollbackRequest
	if err := jsondoc.Decode(body, "the body", rollbackFields(), &req); err != nil {
		return "", fmt.Errorf("rollback request: %w", err)
	}
	if req.ModelPath == "" {
		return "", errors.New("rollback request: model_path is required")
	}
	return req.ModelPath, nil
}

// rollback serves POST /v1/rollback: {"model_path": "m/"} puts the model's
// previous content, kept loaded since an in-place update
// (keep_previous_for), back into service, by writing it back into the
// model config (actors.System.Rollback), and answers once it serves:
// {"model_path", "checksum" (serving now), "rolled_back_from", "switch_ms"},
// plus "version" and "rolled_back_from_version" for a versioned entry
// (named by its path or by the path of the version rolled back from),
// whose version_policy is pinned to the versions below the one rolled
// back from (actors.System.Rollback).
// A malformed body is 400, an unknown path 404, nothing kept (or a path
// the config has no entry of) 409; the other failures answer as the other
// management writes (statusOfError: a read-only bucket 403).
func (a *api) rollback(w http.ResponseWriter, r *http.Request) {
	body, ok := a.h.Body(w, r, new([]byte))
	if !ok {
		return
	}
	rec := audit.FromContext(r.Context())
	path, err := parseRollback(body)
	if err != nil {
		rec.Fail(err)
		httpserver.JSONError(w, r, http.StatusBadRequest, err.Error())
		return
	}
	rec.Target(path)
	got, err := a.b.Rollback(r.Context(), path)
	if err != nil {
		rec.Fail(err)
		code := statusOfError(err, kindOf(err))
		switch {
		case errors.Is(err, actors.ErrNothingKept), errors.Is(err, actors.ErrNotAnEntry):
			code = http.StatusConflict
		case code == http.StatusServiceUnavailable:
			w.Header().Set("Retry-After", "1")
		case code == http.StatusInternalServerError:
			a.h.Logger().Error("rollback failed", "model", path, "err", err)
		}
		httpserver.JSONError(w, r, code, fmt.Sprintf("rollback of %s: %v", path, err))
		return
	}
	out := map[string]any{"model_path": got.ModelPath, "checksum": got.Checksum,
		"rolled_back_from": got.From, "switch_ms": float64(got.Took.Microseconds()) / 1000}
	if got.Version != 0 {
		out["version"], out["rolled_back_from_version"] = got.Version, got.FromVersion
	}
	httpserver.WriteJSON(w, http.StatusOK, out)
}
