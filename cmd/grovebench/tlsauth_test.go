package main

import (
	"context"
	"crypto/sha256"
	"crypto/tls"
	"encoding/hex"
	"net/http"
	"net/http/httptest"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/groveml/grove/auth"
)

// TestTLSAuthSetup checks grove-tls's setup, not its timing: the files
// grove serve is given, a tokens file grove's parser accepts with the
// token's hash, and a raw load client that speaks TLS to a server with
// that certificate, trusts nothing else, and sends the token.
func TestTLSAuthSetup(t *testing.T) {
	dir := t.TempDir()
	sec, err := writeTLSAuth(dir)
	if err != nil {
		t.Fatal(err)
	}
	args := sec.args()
	for _, flag := range []string{"--tls-cert", "--tls-key", "--auth-tokens-file"} {
		i := slices.Index(args, flag)
		if i < 0 || i+1 >= len(args) {
			t.Fatalf("args %v: no %s", args, flag)
		}
		if _, err := os.Stat(args[i+1]); err != nil {
			t.Errorf("%s %s: %v", flag, args[i+1], err)
		}
	}
	data, err := os.ReadFile(sec.tokensFile)
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(data), sec.token) {
		t.Error("the tokens file holds the token itself, want only its sha256")
	}
	if _, err := auth.ParseTokens(data); err != nil {
		t.Fatalf("grove's parser refuses the tokens file: %v\n%s", err, data)
	}
	sum := sha256.Sum256([]byte(sec.token))
	if !strings.Contains(string(data), hex.EncodeToString(sum[:])) {
		t.Errorf("tokens file %s has no sha256 of the token", data)
	}

	cert, err := tls.LoadX509KeyPair(sec.certFile, sec.keyFile)
	if err != nil {
		t.Fatal(err)
	}
	var gotAuth []string
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		gotAuth = append(gotAuth, r.Header.Get("Authorization"))
		w.Write([]byte(`{"tensors":[]}`))
	}))
	srv.TLS = &tls.Config{Certificates: []tls.Certificate{cert}}
	srv.StartTLS()
	defer srv.Close()
	if !strings.HasPrefix(srv.URL, "https://127.0.0.1:") {
		t.Fatalf("test server at %s", srv.URL)
	}

	c, err := newRawClient(srv.URL+"/v1/inference", []byte("{}"), "application/json", 5*time.Second, sec.header())
	if err != nil {
		t.Fatal(err)
	}
	c.tlsConf = sec.clientTLS
	status, body, err := c.do(context.Background())
	c.close()
	if err != nil || status != http.StatusOK || string(body) != `{"tensors":[]}` {
		t.Fatalf("raw TLS client: %d %q %v", status, body, err)
	}
	if len(gotAuth) != 1 || gotAuth[0] != "Bearer "+sec.token {
		t.Errorf("server got Authorization %q, want the bearer token", gotAuth)
	}
	// The same client with the system roots refuses the certificate.
	c2, err := newRawClient(srv.URL+"/", []byte("{}"), "application/json", 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := c2.do(context.Background()); err == nil || !strings.Contains(err.Error(), "TLS handshake") {
		t.Errorf("raw client without grove-tls's root: %v, want a TLS handshake error", err)
	}
	c2.close()
	// The readiness and check clients trust it too.
	resp, err := sec.httpClient().Get(srv.URL + "/readyz")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
}

// TestTLSRatios checks that grove-tls rows are compared with plain grove's at their shape.
func TestTLSRatios(t *testing.T) {
	r := &report{Results: []result{
		{scenario: scenario{serverGrove, 1, 32}, loadResult: loadResult{ReqPerSec: 1000, P50: time.Millisecond}},
		{scenario: scenario{serverGroveTLS, 1, 32}, loadResult: loadResult{ReqPerSec: 900, P50: 1100 * time.Microsecond}},
		{scenario: scenario{serverGroveTLS, 1, 8}, loadResult: loadResult{ReqPerSec: 500}},
	}}
	r.finish()
	if len(r.TLS) != 1 || r.TLS[0].Conc != 32 || r.TLS[0].Ratio != 0.9 {
		t.Fatalf("TLS ratios %+v, want one at b1c32 of 0.9", r.TLS)
	}
	var b strings.Builder
	r.writeMarkdown(&b)
	if !strings.Contains(b.String(), "TLS + token vs plaintext at batch 1, conc 32: grove TLS+token 0.90x") {
		t.Errorf("markdown has no TLS line:\n%s", b.String())
	}
}
