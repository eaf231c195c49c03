package ba

import (
	"net/http"

	"github.com/groveml/grove/auth"
	"github.com/groveml/grove/transport/httpserver"
)

// Backend is what the B&A API needs: batch inference and the ready model
// paths; *actors.System is one.
type Backend interface {
	Inferer
	ModelPaths() []string
}

// Register serves the B&A API on h: POST /v1/inference (a batch request
// in, parsed with opts, a batch response out) and GET /v1/models (the ready
// model paths, as the sidecar's getModelPaths), needing roles infer and
// read. Both answer refusals with WriteRefusal.
func Register(h *httpserver.Server, b Backend, opts ParseOptions) {
	a := &api{h: h, b: b, opts: opts, contentType: []string{"application/json"}}
	h.Handle("POST /v1/inference", auth.RoleInfer, "inference", a.inference)
	h.Handle("GET /v1/models", auth.RoleRead, "models", a.models)
	h.SetErrorWriter("inference", WriteRefusal)
	h.SetErrorWriter("models", WriteRefusal)
}

// WriteRefusal is the B&A API's httpserver.ErrorWriter: a refused call
// (no or bad credentials, a missing role, over its limit) answers code
// with a batch that failed as a whole,
// {"response":[{"error":{"error_type":"UNKNOWN","description":msg}}]}
// (AppendBatchError): the sidecar's error types have none for a refusal,
// and UNKNOWN is its error of no known kind.
func WriteRefusal(w http.ResponseWriter, _ *http.Request, code int, msg string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	_, _ = w.Write(AppendBatchError(nil, &Error{Type: Unknown, Description: msg}, ""))
}

type api struct {
	h    *httpserver.Server
	b    Backend
	opts ParseOptions
	// contentType is the answers' Content-Type header value, shared by
	// every answer (net/http copies the header when it writes it).
	contentType []string
}

func (a *api) models(w http.ResponseWriter, _ *http.Request) {
	w.Header().Set("Content-Type", "application/json")
	_, _ = w.Write(AppendModelPaths(nil, a.b.ModelPaths()))
}

func (a *api) inference(w http.ResponseWriter, r *http.Request) {
	bp := a.h.Buffer()
	defer a.h.Release(bp)
	rp := a.h.Buffer()
	defer a.h.Release(rp)
	body, code, err := a.h.ReadBody(r, bp)
	ctx, cancel, terr := httpserver.WithTimeout(r)
	if err == nil && terr != nil {
		err, code = terr, http.StatusBadRequest
	}
	var out []byte
	if err != nil {
		out = AppendBatchError((*rp)[:0], inputError(err.Error()), "")
	} else {
		defer cancel()
		call := Call{API: "ba", Parse: a.opts, RequestID: httpserver.RequestID(w, r)}
		if httpserver.HasHeaderConfigs(r.Header) {
			call.Configs = func(c map[string]string) map[string]string { return httpserver.HeaderConfigs(c, r.Header) }
		}
		out, code, _ = Run(ctx, a.b, (*rp)[:0], body, call)
	}
	if code == http.StatusTooManyRequests {
		w.Header().Set("Retry-After", "1")
	}
	w.Header()["Content-Type"] = a.contentType
	w.WriteHeader(code)
	_, _ = w.Write(out)
	*rp = out[:0]
}
