package it

import (
	"bufio"
	"context"
	"crypto/tls"
	"errors"
	"io"
	"net"
	"net/http"
	"os/exec"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/status"

	"github.com/groveml/grove/api/sidecar/sidecarpb"
	"github.com/groveml/grove/internal/certtest"
)

// tlsSetup is a CA, Grove's server certificate files and the client CA file.
type tlsSetup struct {
	dir               string
	ca                *certtest.CA
	cert, key, caFile string
}

func newTLSSetup(t *testing.T) *tlsSetup {
	t.Helper()
	s := &tlsSetup{dir: t.TempDir(), ca: certtest.NewCA(t, "grove test CA")}
	s.cert, s.key = s.ca.Server(t, "grove-1").Write(t, s.dir, "server")
	s.caFile = s.ca.WriteCA(t, s.dir)
	return s
}

// client returns an HTTPS client trusting the CA, presenting certs (sent
// whatever CA the server names, to test refusals).
func (s *tlsSetup) client(certs ...tls.Certificate) *http.Client {
	return &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{TLSClientConfig: s.tlsConfig(certs...)}}
}

// h2Client is client, offering HTTP/2 too.
func (s *tlsSetup) h2Client(certs ...tls.Certificate) *http.Client {
	return &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{TLSClientConfig: s.tlsConfig(certs...), ForceAttemptHTTP2: true}}
}

func (s *tlsSetup) tlsConfig(certs ...tls.Certificate) *tls.Config {
	return &tls.Config{RootCAs: s.ca.Pool(), ServerName: "localhost",
		GetClientCertificate: func(*tls.CertificateRequestInfo) (*tls.Certificate, error) {
			if len(certs) == 0 {
				return &tls.Certificate{}, nil
			}
			return &certs[0], nil
		}}
}

// startTLSGrove runs grove serve over TLS on an empty model config with
// the given extra flags, and waits until it answers /readyz over HTTPS.
func startTLSGrove(t *testing.T, s *tlsSetup, args ...string) *grove {
	t.Helper()
	b := newDirBucket(t)
	putConfig(t, b)
	addr, grpcAddr := freeAddr(t), freeAddr(t)
	g := runTLSGrove(t, "grove", addr, grpcAddr, append([]string{"serve", "--bucket", b.URL(), "--http", addr, "--grpc", grpcAddr,
		"--poll-interval", "1s", "--cache-dir", t.TempDir(), "--tls-cert", s.cert, "--tls-key", s.key}, args...))
	c := s.client()
	g.waitFor("grove to be ready over TLS", 60*time.Second, func() bool {
		code, _, _ := getWith(c, g.url+"/readyz")
		return code == http.StatusOK
	})
	return g
}

// runTLSGrove starts grove with args, serving HTTPS on addr and gRPC on
// grpcAddr; it is stopped, and its logs (named name) shown on failure,
// when the test ends.
func runTLSGrove(t *testing.T, name, addr, grpcAddr string, args []string) *grove {
	t.Helper()
	cmd := exec.Command(groveBin, args...)
	logs := &syncBuffer{}
	cmd.Stdout, cmd.Stderr = logs, logs
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	g := &grove{t: t, cmd: cmd, url: "https://" + addr, grpc: grpcAddr, logs: logs, done: make(chan error, 1)}
	go func() { g.done <- cmd.Wait() }()
	t.Cleanup(func() {
		g.stop()
		if t.Failed() {
			t.Logf("%s logs:\n%s", name, logs.String())
		}
	})
	return g
}

func getWith(c *http.Client, url string) (int, string, error) {
	resp, err := c.Get(url)
	if err != nil {
		return 0, "", err
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b), nil
}

// dialTLS returns a gRPC connection to g over TLS with the client config.
func dialTLS(t *testing.T, g *grove, tc *tls.Config) *grpc.ClientConn {
	t.Helper()
	conn, err := grpc.NewClient(g.grpc, grpc.WithTransportCredentials(credentials.NewTLS(tc)))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	return conn
}

// Budget: 10 s.
func TestTLSOnlyPlaintextRefused(t *testing.T) {
	t.Parallel()
	s := newTLSSetup(t)
	g := startTLSGrove(t, s)
	if code, _, err := getWith(s.client(), g.url+"/v1/models"); err != nil || code != 200 {
		t.Fatalf("HTTPS /v1/models: %d %v", code, err)
	}
	// The default engine over TLS is h1, which hands the connections that
	// choose HTTP/2 to net/http's HTTP/2 server.
	if addrs, _ := servingAddrs(g.logs.String()); addrs["http_engine"] != "h1" {
		t.Errorf("grove serving line names http_engine=%q over TLS, want h1", addrs["http_engine"])
	}
	if resp, err := s.h2Client().Get(g.url + "/v1/models"); err != nil || resp.StatusCode != 200 || resp.ProtoMajor != 2 {
		t.Errorf("HTTP/2 over TLS: %v %v", resp, err)
	} else {
		resp.Body.Close()
	}
	plain := "http://" + strings.TrimPrefix(g.url, "https://")
	if code, body, err := getWith(client, plain+"/v1/models"); err == nil && code == 200 {
		t.Fatalf("plaintext HTTP was served: %d %q", code, body)
	}
	ctx := withTimeout(t, 10*time.Second)
	conn, err := grpc.NewClient(g.grpc, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if _, err := healthpb.NewHealthClient(conn).Check(ctx, &healthpb.HealthCheckRequest{}); err == nil {
		t.Fatal("plaintext gRPC was served")
	}
	if _, err := healthpb.NewHealthClient(dialTLS(t, g, s.tlsConfig())).Check(ctx, &healthpb.HealthCheckRequest{}); err != nil {
		t.Fatalf("gRPC over TLS: %v", err)
	}
	old := &tls.Config{RootCAs: s.ca.Pool(), ServerName: "localhost", MaxVersion: tls.VersionTLS11}
	if _, _, err := getWith(&http.Client{Transport: &http.Transport{TLSClientConfig: old}}, g.url+"/readyz"); err == nil {
		t.Fatal("a TLS 1.1 client was served")
	}
}

// Budget: 10 s.
func TestTLSClientCertificateRequired(t *testing.T) {
	t.Parallel()
	s := newTLSSetup(t)
	g := startTLSGrove(t, s, "--tls-client-ca", s.caFile, "--tls-client-auth", "require")
	now := time.Now()
	good := s.ca.Client(t, "bidder-eu", now.Add(-time.Hour), now.Add(time.Hour)).TLS(t)
	foreign := certtest.NewCA(t, "another CA").Client(t, "bidder-eu", now.Add(-time.Hour), now.Add(time.Hour)).TLS(t)
	expired := s.ca.Client(t, "bidder-eu", now.Add(-3*time.Hour), now.Add(-time.Hour)).TLS(t)

	if code, _, err := getWith(s.client(), g.url+"/healthz"); err != nil || code != 200 {
		t.Errorf("probe without a certificate: %d %v, want 200", code, err)
	}
	if code, body, err := getWith(s.client(), g.url+"/v1/models"); err != nil || code != 401 || !strings.Contains(body, "client certificate") {
		t.Errorf("route without a certificate: %d %q %v, want 401", code, body, err)
	}
	for proto, c := range map[string]*http.Client{"HTTP/1.1": s.client(good), "HTTP/2": s.h2Client(good)} {
		if code, _, err := getWith(c, g.url+"/v1/models"); err != nil || code != 200 {
			t.Errorf("route with a certificate from the client CA over %s: %d %v, want 200", proto, code, err)
		}
	}
	if code, _, err := getWith(s.h2Client(), g.url+"/v1/models"); err != nil || code != 401 {
		t.Errorf("route without a certificate over HTTP/2: %d %v, want 401", code, err)
	}
	for name, cert := range map[string]tls.Certificate{"from another CA": foreign, "expired": expired} {
		if code, _, err := getWith(s.client(cert), g.url+"/healthz"); err == nil {
			t.Errorf("a client certificate %s was accepted: %d", name, code)
		}
	}

	ctx := withTimeout(t, 10*time.Second)
	predict := func(conn *grpc.ClientConn) error {
		_, err := sidecarpb.NewInferenceServiceClient(conn).Predict(ctx, &sidecarpb.PredictRequest{})
		return err
	}
	anon := dialTLS(t, g, s.tlsConfig())
	if _, err := healthpb.NewHealthClient(anon).Check(ctx, &healthpb.HealthCheckRequest{}); err != nil {
		t.Errorf("gRPC health without a certificate: %v", err)
	}
	if err := predict(anon); status.Code(err) != codes.Unauthenticated {
		t.Errorf("gRPC Predict without a certificate: %v, want UNAUTHENTICATED", err)
	}
	if err := predict(dialTLS(t, g, s.tlsConfig(good))); status.Code(err) == codes.Unauthenticated || status.Code(err) == codes.Unavailable {
		t.Errorf("gRPC Predict with a certificate: %v, want past the certificate check", err)
	}
	if err := predict(dialTLS(t, g, s.tlsConfig(expired))); status.Code(err) != codes.Unavailable {
		t.Errorf("gRPC with an expired certificate: %v, want the connection refused (UNAVAILABLE)", err)
	}
}

// Budget: 15 s.
func TestTLSRotatedServerCertificateServedWithoutRestart(t *testing.T) {
	t.Parallel()
	s := newTLSSetup(t)
	g := startTLSGrove(t, s, "--tls-reload-interval", "100ms")
	addr := strings.TrimPrefix(g.url, "https://")
	served := func() string {
		c, err := tls.Dial("tcp", addr, s.tlsConfig())
		if err != nil {
			t.Fatalf("handshake: %v", err)
		}
		defer c.Close()
		return c.ConnectionState().PeerCertificates[0].Subject.CommonName
	}
	if cn := served(); cn != "grove-1" {
		t.Fatalf("served %q, want grove-1", cn)
	}
	// A connection opened before the rotation keeps working after it.
	c := s.client()
	if code, _, err := getWith(c, g.url+"/healthz"); err != nil || code != 200 {
		t.Fatalf("healthz: %d %v", code, err)
	}
	s.ca.Server(t, "grove-2").Write(t, s.dir, "server")
	g.waitFor("the rotated certificate to be served", 10*time.Second, func() bool { return served() == "grove-2" })
	if code, _, err := getWith(c, g.url+"/healthz"); err != nil || code != 200 {
		t.Fatalf("healthz on the connection opened before the rotation: %d %v", code, err)
	}
	// The reloader logs after it swapped the certificate in, so the line
	// may reach the log a moment after the new certificate is served.
	g.waitFor("the rotation to be logged", 5*time.Second, func() bool { return strings.Contains(g.logs.String(), "TLS files reloaded") })
}

// It runs alone (no t.Parallel): it times when the server closes a slow connection. Budget: 10 s.
func TestHTTPSlowlorisConnectionClosed(t *testing.T) {
	b := newDirBucket(t)
	putConfig(t, b)
	g := startGrove(t, b.URL(), nil, "--http-read-header-timeout", "300ms")
	c, err := net.Dial("tcp", strings.TrimPrefix(g.url, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	start := time.Now()
	if _, err := io.WriteString(c, "GET /healthz HTTP/1.1\r\nHost: grove\r\nX-Slow: "); err != nil {
		t.Fatal(err)
	}
	_ = c.SetReadDeadline(time.Now().Add(10 * time.Second))
	_, err = bufio.NewReader(c).ReadString('\n')
	var ne net.Error
	if err == nil || errors.As(err, &ne) && ne.Timeout() {
		t.Fatalf("the slow connection was not closed: %v", err)
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Fatalf("closed after %v, want about 300ms", d)
	}
}

// Budget: 10 s.
func TestGRPCOversizedMessageRefused(t *testing.T) {
	t.Parallel()
	b := newDirBucket(t)
	putConfig(t, b)
	g := startGrove(t, b.URL(), nil, "--max-body-bytes", "4096", "--max-model-bytes", "65536")
	client := sidecarpb.NewInferenceServiceClient(g.dial())
	ctx := withTimeout(t, 10*time.Second)
	big := make([]byte, 8192)
	_, err := client.Predict(ctx, &sidecarpb.PredictRequest{InputData: &sidecarpb.PredictRequest_Input{Input: big}})
	if status.Code(err) != codes.ResourceExhausted {
		t.Errorf("Predict of 8 KiB over --max-body-bytes 4096: %v, want RESOURCE_EXHAUSTED", err)
	}
	// RegisterModel has --max-model-bytes: 8 KiB passes the size check
	// (and fails later, not being a model), 128 KiB does not.
	reg := func(n int) error {
		_, err := client.RegisterModel(ctx, &sidecarpb.RegisterModelRequest{
			ModelSpec:  &sidecarpb.ModelSpec{ModelPath: "m/"},
			ModelFiles: map[string][]byte{"m/model.pt": make([]byte, n)}})
		return err
	}
	if err := reg(8192); status.Code(err) == codes.ResourceExhausted {
		t.Errorf("RegisterModel of 8 KiB under --max-model-bytes: %v", err)
	}
	if err := reg(128 << 10); status.Code(err) != codes.ResourceExhausted {
		t.Errorf("RegisterModel of 128 KiB over --max-model-bytes: %v, want RESOURCE_EXHAUSTED", err)
	}
}

// Budget: 20 s.
func TestNonLoopbackWithoutAuthRefusesToStart(t *testing.T) {
	t.Parallel()
	b := newDirBucket(t)
	putConfig(t, b)
	// The check runs on the parsed config, before anything binds: on every
	// interface, and on this machine's own non-loopback address if it has one.
	addrs := []string{"0.0.0.0:0", ":0"}
	if ip := localNonLoopback(); ip != nil {
		addrs = append(addrs, net.JoinHostPort(ip.String(), "0"))
	}
	for _, addr := range addrs {
		out, err := exec.Command(groveBin, "serve", "--bucket", b.URL(), "--http", addr, "--grpc", "off", "--cache-dir", t.TempDir()).CombinedOutput()
		var ee *exec.ExitError
		if !errors.As(err, &ee) || ee.ExitCode() != 2 {
			t.Fatalf("--http %s: exit %v, want 2\n%s", addr, err, out)
		}
		for _, want := range []string{"is not a loopback address and no authentication is configured", "auth.tokens_file", "--insecure-no-auth"} {
			if !strings.Contains(string(out), want) {
				t.Errorf("--http %s: the message lacks %q:\n%s", addr, want, out)
			}
		}
	}
	// --insecure-no-auth starts, with a warning.
	// The warning is its own component's, logged as it starts, which may
	// be just after "grove serving".
	g := startGrove(t, b.URL(), nil, "--insecure-no-auth")
	g.waitFor("the warning of --insecure-no-auth", 10*time.Second, func() bool {
		return strings.Contains(g.logs.String(), "WITHOUT AUTHENTICATION")
	})
}

// localNonLoopback returns an address of this machine that is not
// loopback, or nil.
func localNonLoopback() net.IP {
	addrs, err := net.InterfaceAddrs()
	if err != nil {
		return nil
	}
	for _, a := range addrs {
		if n, ok := a.(*net.IPNet); ok && !n.IP.IsLoopback() && n.IP.To4() != nil {
			return n.IP
		}
	}
	return nil
}

// Budget: 10 s.
func TestAdminHTTPServesManagementMetricsAndPprof(t *testing.T) {
	t.Parallel()
	b := newDirBucket(t)
	putConfig(t, b)
	admin := freeAddr(t)
	g := startGrove(t, b.URL(), nil, "--admin-http", admin, "--pprof", "--http-write-timeout", "1s")
	adminURL := "http://" + admin
	// routed reports whether a route serves method url: net/http's mux
	// answers 405, or 404 with its own body, to what no route serves (a
	// management 404 for an unknown contract is the route's answer).
	routed := func(method, url string) (bool, int) {
		req, _ := http.NewRequestWithContext(context.Background(), method, url, strings.NewReader("{}"))
		resp, err := client.Do(req)
		if err != nil {
			t.Fatalf("%s %s: %v", method, url, err)
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		return resp.StatusCode != http.StatusMethodNotAllowed && string(body) != "404 page not found\n", resp.StatusCode
	}
	send := func(method, url string) int { _, code := routed(method, url); return code }
	for _, r := range []struct{ method, path string }{
		{"GET", "/metrics"}, {"GET", "/debug/pprof/"}, {"GET", "/debug/pprof/cmdline"},
		{"PUT", "/org/project/1"}, {"POST", "/servable"}, {"DELETE", "/org/project/1/2"},
		{"GET", "/v1/audit"}, {"POST", "/v1/rollback"},
	} {
		if ok, code := routed(r.method, g.url+r.path); ok {
			t.Errorf("scoring port: %s %s = %d, want it not served", r.method, r.path, code)
		}
		if ok, code := routed(r.method, adminURL+r.path); !ok {
			t.Errorf("admin port: %s %s = %d, want it served", r.method, r.path, code)
		}
	}
	if code := send("GET", g.url+"/v1/models"); code != 200 {
		t.Errorf("scoring port /v1/models = %d", code)
	}
	if code := send("GET", adminURL+"/readyz"); code != 200 {
		t.Errorf("admin port /readyz = %d", code)
	}
	// A CPU profile streams longer than --http-write-timeout: its write
	// deadline is its seconds on top, so it arrives whole.
	start := time.Now()
	code, body, err := getWith(client, adminURL+"/debug/pprof/profile?seconds=2")
	if err != nil || code != 200 || len(body) < 2 || body[0] != 0x1f || body[1] != 0x8b {
		t.Errorf("a 2 s profile with a 1 s write timeout: %d, %d bytes, %v; want a whole gzip profile", code, len(body), err)
	}
	if d := time.Since(start); d < 2*time.Second {
		t.Errorf("the profile took %v, want its 2 s", d)
	}
}
