package httpserver

import (
	"bufio"
	"crypto/tls"
	"crypto/x509"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/groveml/grove/auth"
)

func TestAdminAPIsMoveToTheAdminHandler(t *testing.T) {
	reg := prometheus.NewRegistry()
	s := New(Options{AdminAPIs: []string{"manage", "/ui"}, Registerer: reg, Gatherer: reg, Pprof: true, Status: func() any { return 1 }})
	ok := func(w http.ResponseWriter, _ *http.Request) { _, _ = io.WriteString(w, "ok") }
	s.Handle("POST /{org}/{project}/{n}/score", auth.RoleInfer, "forestflow", ok)
	s.Handle("PUT /{org}/{project}/{n}", auth.RoleManage, "manage", ok)
	s.Handle("POST /servable", auth.RoleManage, "manage", ok)
	s.Mount("/ui", Always(auth.Open), http.HandlerFunc(ok))
	s.Mount("/v2", v2Role, http.HandlerFunc(ok))
	main, admin := s.Handler(), s.AdminHandler()
	for _, tc := range []struct {
		method, path string
		main, admin  int
	}{
		{"POST", "/o/p/1/score", 200, 404},
		{"PUT", "/o/p/1", 404, 200},
		{"POST", "/servable", 404, 200},
		{"GET", "/metrics", 404, 200},
		{"GET", "/debug/pprof/", 404, 200},
		{"GET", "/v1/status", 200, 404},
		{"GET", "/healthz", 200, 200},
		{"GET", "/readyz", 200, 200},
		{"GET", "/ui/", 404, 200},
		{"GET", "/ui/app.js", 404, 200},
		{"GET", "/v2/models", 200, 404},
	} {
		if code, _ := serve(t, main, tc.method, tc.path, ""); code != tc.main {
			t.Errorf("scoring port: %s %s = %d, want %d", tc.method, tc.path, code, tc.main)
		}
		if code, _ := serve(t, admin, tc.method, tc.path, ""); code != tc.admin {
			t.Errorf("admin port: %s %s = %d, want %d", tc.method, tc.path, code, tc.admin)
		}
	}
	if New(Options{}).AdminHandler() != nil {
		t.Error("AdminHandler without AdminAPIs is not nil")
	}
}

func TestIsProbe(t *testing.T) {
	for _, tc := range []struct {
		method, path string
		want         bool
	}{
		{"GET", "/healthz", true},
		{"GET", "/readyz", true},
		{"HEAD", "/readyz", true},
		{"GET", "/v2/health/live", true},
		{"GET", "/v2/health/ready", true},
		{"GET", "/v2/models/m/ready", true},
		{"GET", "/v2/models/m/versions/2/ready", true},
		{"GET", "/v2/models//ready", false},
		{"POST", "/v2/models/m/ready", false},
		{"GET", "/v2/models/m", false},
		{"GET", "/v2", false},
		{"GET", "/metrics", false},
		{"POST", "/v1/inference", false},
	} {
		if got := IsProbe(tc.method, tc.path); got != tc.want {
			t.Errorf("IsProbe(%s %s) = %v, want %v", tc.method, tc.path, got, tc.want)
		}
	}
}

func TestStreamDuration(t *testing.T) {
	for path, want := range map[string]time.Duration{
		"/debug/pprof/profile":              30 * time.Second,
		"/debug/pprof/profile?seconds=5":    5 * time.Second,
		"/debug/pprof/trace":                time.Second,
		"/debug/pprof/trace?seconds=0.5":    500 * time.Millisecond,
		"/debug/pprof/heap?seconds=3":       3 * time.Second,
		"/debug/pprof/heap":                 0,
		"/debug/pprof/profile?seconds=-1":   30 * time.Second,
		"/debug/pprof/profile?seconds=junk": 30 * time.Second,
		"/v1/inference?seconds=100":         0,
	} {
		if got := streamDuration(httptest.NewRequest("GET", path, nil)); got != want {
			t.Errorf("streamDuration(%s) = %v, want %v", path, got, want)
		}
	}
}

func TestRequireClientCertAllowsOnlyProbesWithoutOne(t *testing.T) {
	s := New(Options{RequireClientCert: true})
	s.Handle("POST /v1/inference", auth.RoleInfer, "inference", func(w http.ResponseWriter, _ *http.Request) { _, _ = io.WriteString(w, "scored") })
	h := s.Handler()
	if code, _ := serve(t, h, "GET", "/healthz", ""); code != 200 {
		t.Errorf("probe without a certificate: %d, want 200", code)
	}
	code, body := serve(t, h, "POST", "/v1/inference", "")
	if code != 401 || !strings.Contains(body, "client certificate") {
		t.Errorf("scoring without a certificate: %d %q, want 401 naming the certificate", code, body)
	}
	req := httptest.NewRequest("POST", "/v1/inference", nil)
	req.TLS = &tls.ConnectionState{VerifiedChains: [][]*x509.Certificate{{{}}}}
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	if rec.Code != 200 {
		t.Errorf("scoring with a verified certificate: %d, want 200", rec.Code)
	}
}

// TestWriteDeadlineIsPerHandler checks that a handler's answer is cut at
// its write deadline while a pprof profile asking for longer is not.
func TestWriteDeadlineIsPerHandler(t *testing.T) {
	s := New(Options{WriteTimeout: 100 * time.Millisecond})
	slow := func(w http.ResponseWriter, _ *http.Request) {
		time.Sleep(300 * time.Millisecond) // past the write deadline
		_, _ = io.WriteString(w, strings.Repeat("x", 1<<20))
	}
	s.Handle("GET /slow", auth.RoleRead, "slow", slow)
	s.Mount("/debug/pprof", Always(auth.RoleAdmin), http.HandlerFunc(slow)) // stands in for a profile of 1 s
	srv := httptest.NewServer(s.Handler())
	defer srv.Close()
	get := func(path string) error {
		resp, err := http.Get(srv.URL + path)
		if err != nil {
			return err
		}
		defer resp.Body.Close()
		_, err = io.ReadAll(resp.Body)
		return err
	}
	if err := get("/slow"); err == nil {
		t.Error("an answer written past the write deadline arrived whole")
	}
	if err := get("/debug/pprof/profile?seconds=1"); err != nil {
		t.Errorf("a profile within its seconds was cut: %v", err)
	}
}

func TestNewHTTPServerLimits(t *testing.T) {
	s := New(Options{ReadHeaderTimeout: 100 * time.Millisecond, IdleTimeout: time.Second, MaxHeaderBytes: 4096})
	srv := s.NewHTTPServer(s.Handler(), nil)
	if srv.ReadHeaderTimeout != 100*time.Millisecond || srv.IdleTimeout != time.Second || srv.MaxHeaderBytes != 4096 || srv.WriteTimeout != 0 {
		t.Fatalf("server limits %v %v %d %v", srv.ReadHeaderTimeout, srv.IdleTimeout, srv.MaxHeaderBytes, srv.WriteTimeout)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go func() { _ = srv.Serve(ln) }()
	defer srv.Close()
	// A slowloris client sends part of the headers and waits.
	c, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if _, err := io.WriteString(c, "GET /healthz HTTP/1.1\r\nHost: x\r\n"); err != nil {
		t.Fatal(err)
	}
	_ = c.SetReadDeadline(time.Now().Add(5 * time.Second))
	if _, err := bufio.NewReader(c).ReadString('\n'); err == nil || strings.Contains(err.Error(), "timeout") {
		t.Fatalf("the slow connection was not closed by the server: %v", err)
	}
}
