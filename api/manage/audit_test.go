package manage

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/groveml/grove/auth"
	"github.com/groveml/grove/logging/audit"
	"github.com/groveml/grove/transport/httpserver"
)

// entries is a Recorder that keeps what it is given.
type entries struct {
	mu sync.Mutex
	l  []audit.Entry
}

func (e *entries) Record(_ context.Context, en audit.Entry) {
	e.mu.Lock()
	e.l = append(e.l, en)
	e.mu.Unlock()
}

func TestEveryWriteIsRecordedWithItsCallerRouteAndAnswer(t *testing.T) {
	m := &memManager{metrics: map[string]map[string]float64{}}
	got := &entries{}
	h := httpserver.New(httpserver.Options{MaxBodyBytes: 1 << 10})
	Register(h, m, got)
	mux := h.Handler()
	// As the authentication layer does: the caller's identity in the context.
	s := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if name := r.Header.Get("X-Test-Caller"); name != "" {
			r = r.WithContext(auth.NewContext(r.Context(), auth.Identity{Name: name, Method: "token"}))
		}
		mux.ServeHTTP(w, r)
	})
	serveReq := `{"path": "m/", "fqrv": {"contract": {"organization": "ads", "project": "p", "contract_number": 1}, "release_version": "v1"}}`
	for _, c := range []struct {
		method, path, body, caller string
		route, target, status      string
		errHas                     string
	}{
		{"POST", "/contract/ads/p/1", `{}`, "release-bot", "POST /contract/{org}/{project}/{n}", "ads/p/1", "200", ""},
		{"POST", "/servable", serveReq, "", "POST /servable", "ads/p/1/v1", "200", ""},
		{"POST", "/servable", serveReq, "release-bot", "POST /servable", "ads/p/1/v1", "409", "servable"},
		{"POST", "/v1/rollback", `{"model_path": "m/"}`, "release-bot", "POST /v1/rollback", "m/", "409", "nothing kept"},
		{"POST", "/v1/rollback", `{"model_path": 1}`, "", "POST /v1/rollback", "", "400", "model_path"},
		{"PUT", "/ads/p/1/v1/policy-settings", `{"validity": [{"sometimes": {}}]}`, "", "PUT /{org}/{project}/{n}/{rv}/policy-settings", "ads/p/1/v1", "422", "sometimes"},
		{"PUT", "/ads/p/1/v1/logging", `{"logLevel": "FULL"}`, "", "PUT /{org}/{project}/{n}/{rv}/logging", "ads/p/1/v1", "200", ""},
		{"PUT", "/ads/p/1", `{"router": "latest"}`, "", "PUT /{org}/{project}/{n}", "ads/p/1", "200", ""},
		{"PUT", "/ads/p/1", strings.Repeat(" ", 2<<10), "", "PUT /{org}/{project}/{n}", "ads/p/1", "413", "Request Entity Too Large"},
		{"POST", "/ads/p/1/v1/metrics", `{"auc": 0.7}`, "", "POST /{org}/{project}/{n}/{rv}/metrics", "ads/p/1/v1", "200", ""},
		{"DELETE", "/ads/p/1/v1", ``, "release-bot", "DELETE /{org}/{project}/{n}/{rv}", "ads/p/1/v1", "200", ""},
	} {
		n := len(got.l)
		req, _ := http.NewRequest(c.method, c.path, strings.NewReader(c.body))
		if c.caller != "" {
			req.Header.Set("X-Test-Caller", c.caller)
		}
		s.ServeHTTP(httptest.NewRecorder(), req)
		if len(got.l) != n+1 {
			t.Fatalf("%s %s: %d entries, want one more than %d", c.method, c.path, len(got.l), n)
		}
		e := got.l[n]
		who := c.caller
		if who == "" {
			who = audit.Anonymous
		}
		if e.Who != who || e.API != "manage" || e.Route != c.route || e.Path != c.path || e.Target != c.target || e.Status != c.status ||
			(c.errHas == "") != (e.Result == audit.ResultOK) || !strings.Contains(e.Error, c.errHas) {
			t.Errorf("%s %s: entry %+v", c.method, c.path, e)
		}
	}
	// Reads are not recorded.
	n := len(got.l)
	req, _ := http.NewRequest("GET", "/ads/p/1/releases", nil)
	s.ServeHTTP(httptest.NewRecorder(), req)
	if len(got.l) != n {
		t.Errorf("a read was recorded: %+v", got.l[n:])
	}
}
