package httpserver

import (
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/groveml/grove/auth"
)

func serve(t *testing.T, h http.Handler, method, path, body string) (int, string) {
	t.Helper()
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest(method, path, strings.NewReader(body)))
	b, _ := io.ReadAll(rec.Result().Body)
	return rec.Code, string(b)
}

func TestReadinessFollowsTheReadyFunction(t *testing.T) {
	for _, ready := range []bool{false, true} {
		h := New(Options{Ready: func() bool { return ready }}).Handler()
		if code, _ := serve(t, h, "GET", "/readyz", ""); code != map[bool]int{false: 503, true: 200}[ready] {
			t.Errorf("ready=%v: /readyz %d", ready, code)
		}
	}
	if code, body := serve(t, New(Options{}).Handler(), "GET", "/healthz", ""); code != 200 || body != "ok\n" {
		t.Errorf("/healthz: %d %q", code, body)
	}
}

func TestStatusServesTheDocumentAsIndentedJSON(t *testing.T) {
	h := New(Options{Status: func() any { return map[string]int{"models": 2} }}).Handler()
	if code, body := serve(t, h, "GET", "/v1/status", ""); code != 200 || body != "{\n  \"models\": 2\n}\n" {
		t.Errorf("/v1/status: %d %q", code, body)
	}
	if code, _ := serve(t, New(Options{}).Handler(), "GET", "/v1/status", ""); code != 404 {
		t.Errorf("/v1/status without a document: %d, want 404", code)
	}
}

func TestPprofIsServedOnlyWhenEnabled(t *testing.T) {
	for _, on := range []bool{false, true} {
		s := New(Options{Pprof: on})
		s.Handle("GET /{org}/{project}/{n}", auth.RoleRead, "x", func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusTeapot) })
		code, _ := serve(t, s.Handler(), "GET", "/debug/pprof/", "")
		if got := code == http.StatusOK; got != on {
			t.Errorf("pprof %v: GET /debug/pprof/ answered %d", on, code)
		}
		// /debug/ is reserved: its paths never reach a route whose first
		// segment is a wildcard, served or not.
		want := map[bool]int{false: http.StatusNotFound, true: http.StatusOK}[on]
		if code, _ := serve(t, s.Handler(), "GET", "/debug/pprof/cmdline", ""); code != want {
			t.Errorf("pprof %v: GET /debug/pprof/cmdline answered %d, want %d", on, code, want)
		}
	}
}

func TestMountServesItsPrefixAndEverythingBelowBeforeRoutes(t *testing.T) {
	s := New(Options{})
	s.Mount("/v2", v2Role, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { _, _ = io.WriteString(w, "oip "+r.URL.Path) }))
	s.Handle("GET /{org}/{project}", auth.RoleRead, "x", func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.WriteString(w, "route "+r.PathValue("org"))
	})
	h := s.Handler()
	for path, want := range map[string]string{
		"/v2":          "oip /v2",
		"/v2/models/m": "oip /v2/models/m",
		"/v2/x":        "oip /v2/x",
		"/v2x/y":       "route v2x",
	} {
		if _, body := serve(t, h, "GET", path, ""); body != want {
			t.Errorf("GET %s: %q, want %q", path, body, want)
		}
	}
}

// routeBody names the route that answered and the wildcards it saw.
func routeBody(name string, wildcards ...string) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		out := name
		for _, n := range wildcards {
			out += " " + n + "=" + r.PathValue(n)
		}
		_, _ = io.WriteString(w, out)
	}
}

func TestOverlappingRoutesPreferTheLiteralNearestTheEnd(t *testing.T) {
	s := New(Options{})
	s.Handle("POST /contract/{org}/{project}/{n}", auth.RoleManage, "manage", routeBody("create", "org", "project", "n"))
	s.Handle("POST /{org}/{project}/{n}/score", auth.RoleInfer, "forestflow", routeBody("score", "org", "project", "n"))
	s.Handle("POST /{org}/{project}/{n}/gp", auth.RoleInfer, "graphpipe", routeBody("gp", "org", "project", "n"))
	s.Handle("POST /servable", auth.RoleManage, "manage", routeBody("servable"))
	s.Handle("GET /{org}/{project}/{n}/stats", auth.RoleRead, "contracts", routeBody("stats", "n"))
	h := s.Handler()
	for _, c := range []struct {
		method, path string
		code         int
		body         string
	}{
		{"POST", "/ads/pctr/1/score", 200, "score org=ads project=pctr n=1"},
		{"POST", "/ads/pctr/1/gp", 200, "gp org=ads project=pctr n=1"},
		{"POST", "/contract/ads/pctr/1", 200, "create org=ads project=pctr n=1"},
		{"POST", "/contract/ads/pctr/score", 200, "score org=contract project=ads n=pctr"},
		{"POST", "/contract/ads/pctr/gp", 200, "gp org=contract project=ads n=pctr"},
		{"POST", "/servable", 200, "servable"},
		{"POST", "/ads/pctr/1/other", 404, "404 page not found\n"},
		{"GET", "/ads/pctr/1/stats", 200, "stats n=1"},
		{"GET", "/ads/pctr/1/score", 405, "Method Not Allowed\n"},
		{"POST", "/a%2Fb/p/1/score", 200, "score org=a/b project=p n=1"},
	} {
		if code, body := serve(t, h, c.method, c.path, ""); code != c.code || body != c.body {
			t.Errorf("%s %s: %d %q, want %d %q", c.method, c.path, code, body, c.code, c.body)
		}
	}
}

func TestGroupedRoutesKeepTheLiteralsTheyShare(t *testing.T) {
	s := New(Options{})
	s.Handle("PUT /m/{a}/x", auth.RoleInfer, "t", routeBody("ax", "a"))
	s.Handle("PUT /m/y/{b}", auth.RoleInfer, "t", routeBody("yb", "b"))
	s.Handle("PUT /{c}/y/z", auth.RoleInfer, "t", routeBody("cz", "c"))
	h := s.Handler()
	for path, want := range map[string]string{
		"/m/y/x": "ax a=y", // x, the last segment, is a literal only in /m/{a}/x
		"/m/y/z": "cz c=m",
		"/m/q/x": "ax a=q",
		"/m/y/q": "yb b=q",
		"/n/y/z": "cz c=n",
	} {
		if _, body := serve(t, h, "PUT", path, ""); body != want {
			t.Errorf("PUT %s: %q, want %q", path, body, want)
		}
	}
	if code, _ := serve(t, h, "PUT", "/n/q/x", ""); code != 404 {
		t.Errorf("PUT /n/q/x: %d, want 404", code)
	}
}

func TestRoutesOfTheSameShapePanic(t *testing.T) {
	s := New(Options{})
	s.Handle("POST /{a}/x", auth.RoleInfer, "t", routeBody("one"))
	s.Handle("POST /{b}/x", auth.RoleInfer, "t", routeBody("two"))
	s.Handle("POST /y/{c}", auth.RoleInfer, "t", routeBody("three")) // overlaps both, so they are grouped
	defer func() {
		if r := recover(); r == nil || !strings.Contains(r.(string), `"POST /{a}/x" and "POST /{b}/x"`) {
			t.Errorf("recovered %v, want a panic naming both routes", r)
		}
	}()
	s.Handler()
}

func TestInstrumentCountsRequestsByAPIAndCode(t *testing.T) {
	reg := prometheus.NewRegistry()
	s := New(Options{Registerer: reg})
	s.Handle("GET /a", auth.RoleRead, "alpha", func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusTooManyRequests) })
	s.Handle("GET /b", auth.RoleRead, "beta", routeBody("b"))
	h := s.Handler()
	serve(t, h, "GET", "/a", "")
	serve(t, h, "GET", "/a", "")
	serve(t, h, "GET", "/b", "")
	want := `
# HELP grove_http_requests_total HTTP requests by API and status code.
# TYPE grove_http_requests_total counter
grove_http_requests_total{api="alpha",code="429"} 2
grove_http_requests_total{api="beta",code="200"} 1
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want), "grove_http_requests_total"); err != nil {
		t.Error(err)
	}
}

func TestReadBodyRefusesBodiesOverTheLimitWith413(t *testing.T) {
	s := New(Options{MaxBodyBytes: 8})
	buf := s.Buffer()
	defer s.Release(buf)
	body, code, err := s.ReadBody(httptest.NewRequest("POST", "/", strings.NewReader("12345678")), buf)
	if err != nil || code != 200 || string(body) != "12345678" {
		t.Errorf("8 bytes: %q %d %v", body, code, err)
	}
	_, code, err = s.ReadBody(httptest.NewRequest("POST", "/", strings.NewReader("123456789")), buf)
	if code != http.StatusRequestEntityTooLarge || err == nil || !strings.Contains(err.Error(), "exceeds the limit of 8 bytes") {
		t.Errorf("9 bytes: %d %v, want 413 naming the limit", code, err)
	}
	_, code, err = s.ReadBody(httptest.NewRequest("POST", "/", io.MultiReader(strings.NewReader("1"), failingReader{})), buf)
	if code != http.StatusBadRequest || err == nil || !strings.Contains(err.Error(), "reading request body") {
		t.Errorf("broken body: %d %v, want 400", code, err)
	}
}

func TestBodyAnswersWhatReadBodyRefuses(t *testing.T) {
	s := New(Options{MaxBodyBytes: 4})
	rec := httptest.NewRecorder()
	if body, ok := s.Body(rec, httptest.NewRequest("POST", "/", strings.NewReader("1234")), new([]byte)); !ok || string(body) != "1234" || rec.Body.Len() != 0 {
		t.Errorf("4 bytes: %q %v, answered %q", body, ok, rec.Body)
	}
	if _, ok := s.Body(rec, httptest.NewRequest("POST", "/", strings.NewReader("12345")), new([]byte)); ok ||
		rec.Code != http.StatusRequestEntityTooLarge || !strings.Contains(rec.Body.String(), "exceeds the limit of 4 bytes") {
		t.Errorf("5 bytes: %v, answered %d %q", ok, rec.Code, rec.Body)
	}
}

type failingReader struct{}

func (failingReader) Read([]byte) (int, error) { return 0, io.ErrUnexpectedEOF }

func TestHeaderConfigsOverrideBodyConfigsAndAreLowercased(t *testing.T) {
	h := http.Header{}
	h.Set("Grove-Config-User_id", "42")
	h.Set("Grove-Config-", "ignored")
	h.Set("X-Other", "ignored")
	got := HeaderConfigs(map[string]string{"user_id": "body", "site": "x"}, h)
	if len(got) != 2 || got["user_id"] != "42" || got["site"] != "x" {
		t.Errorf("configs %v", got)
	}
	if got := HeaderConfigs(nil, http.Header{"X-Other": {"1"}}); got != nil {
		t.Errorf("no config headers: %v, want nil", got)
	}
}

func TestHasHeaderConfigsSaysWhetherHeaderConfigsWouldAddAny(t *testing.T) {
	for _, h := range []http.Header{
		{},
		{"X-Other": {"1"}},
		{"Grove-Config-": {"1"}},
		{"Grove-Config-Site": {}},
		{"Grove-Config-Site": {"x"}},
		{"grove-config-site": {"x"}},
		{"X-Other": {"1"}, "Grove-Config-User_id": {"42"}},
	} {
		want := len(HeaderConfigs(nil, h)) > 0
		if got := HasHeaderConfigs(h); got != want {
			t.Errorf("HasHeaderConfigs(%v) = %v, HeaderConfigs adds configs: %v", h, got, want)
		}
	}
}

func TestRequestIDIsTheCallersOrANewOneAndIsEchoed(t *testing.T) {
	rec := httptest.NewRecorder()
	r := httptest.NewRequest("GET", "/", nil)
	r.Header.Set("X-Request-Id", "abc")
	if id := RequestID(rec, r); id != "abc" || rec.Header().Get("X-Request-Id") != "abc" {
		t.Errorf("given id: %q, echoed %q", id, rec.Header().Get("X-Request-Id"))
	}
	for _, given := range []string{"", strings.Repeat("x", 129)} {
		rec = httptest.NewRecorder()
		r = httptest.NewRequest("GET", "/", nil)
		r.Header.Set("X-Request-Id", given)
		if id := RequestID(rec, r); len(id) != 32 || rec.Header().Get("X-Request-Id") != id {
			t.Errorf("given %q: new id %q, echoed %q", given, id, rec.Header().Get("X-Request-Id"))
		}
	}
}

// TestReservedSegmentsAreRoutedBeforeForestFlow checks that a path under
// a reserved first segment (/api/, /ui/, /v1/, /v2/, /debug/) is served
// by the routes registered under it, or not found, and never by a route
// whose first segment is a wildcard; that such routes register beside
// ForestFlow's patterns, which net/http alone refuses (POST
// /api/predict/{model...} and POST /{org}/{project}/{n}/score both match
// /api/predict/a/1/score); and that every other path still reaches them.
func TestReservedSegmentsAreRoutedBeforeForestFlow(t *testing.T) {
	s := New(Options{})
	answer := func(name string) http.HandlerFunc {
		return func(w http.ResponseWriter, r *http.Request) {
			_, _ = io.WriteString(w, name+" "+r.PathValue("org")+r.PathValue("model"))
		}
	}
	s.Handle("POST /{org}/{project}/{n}/score", auth.RoleInfer, "forestflow", answer("score"))
	s.Handle("PUT /{org}/{project}/{n}", auth.RoleManage, "manage", answer("put"))
	s.Handle("POST /api/predict/{model...}", auth.RoleInfer, "deeprec", answer("deeprec"))
	s.Handle("POST /v1/inference", auth.RoleInfer, "inference", answer("ba"))
	h := s.Handler()
	for _, c := range []struct{ method, path, want string }{
		{"POST", "/api/predict/a/1/score", "deeprec a/1/score"},
		{"POST", "/api/predict/pctr_v1", "deeprec pctr_v1"},
		{"POST", "/api/predict/pctr_v1/", "deeprec pctr_v1/"},
		{"POST", "/v1/inference", "ba "},
		{"POST", "/games/arena/1/score", "score games"},
		{"POST", "/apix/p/1/score", "score apix"},
		{"POST", "/v10/p/1/score", "score v10"},
		{"PUT", "/games/arena/1", "put games"},
		{"POST", "/api/other/1/score", "404"},
		{"POST", "/v1/p/1/score", "404"},
		{"POST", "/v2/p/1/score", "404"},
		{"POST", "/ui/p/1/score", "404"},
		{"POST", "/debug/p/1/score", "404"},
		{"PUT", "/api/p/1", "404"},
	} {
		code, body := serve(t, h, c.method, c.path, "")
		got := body
		if code == http.StatusNotFound {
			got = "404"
		}
		if got != c.want {
			t.Errorf("%s %s: %d %q, want %q", c.method, c.path, code, body, c.want)
		}
	}
}
