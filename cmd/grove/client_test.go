package main

import (
	"crypto/tls"
	"io"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/groveml/grove/internal/certtest"
)

func TestServerClientTLSAndToken(t *testing.T) {
	dir := t.TempDir()
	ca := certtest.NewCA(t, "ca")
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if len(r.TLS.VerifiedChains) == 0 {
			http.Error(w, "no client certificate", http.StatusUnauthorized)
			return
		}
		_, _ = io.WriteString(w, r.Header.Get("Authorization"))
	}))
	srv.TLS = &tls.Config{Certificates: []tls.Certificate{ca.Server(t, "grove").TLS(t)}, ClientCAs: ca.Pool(), ClientAuth: tls.VerifyClientCertIfGiven}
	srv.StartTLS()
	defer srv.Close()
	caFile := ca.WriteCA(t, dir)
	now := time.Now()
	cert, key := ca.Client(t, "replay", now.Add(-time.Hour), now.Add(time.Hour)).Write(t, dir, "client")

	get := func(c serverClient) (string, error) {
		hc, err := c.httpClient(5 * time.Second)
		if err != nil {
			return "", err
		}
		req, _ := http.NewRequest("GET", srv.URL, nil)
		c.authorize(req)
		resp, err := hc.Do(req)
		if err != nil {
			return "", err
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.Status + " " + string(b), nil
	}
	if got, err := get(serverClient{token: "s3cret", ca: caFile, cert: cert, key: key}); err != nil || got != "200 OK Bearer s3cret" {
		t.Errorf("with --ca, --cert, --key, --token: %q, %v", got, err)
	}
	t.Setenv(tokenEnv, "from-env")
	if got, err := get(serverClient{ca: caFile, cert: cert, key: key}); err != nil || got != "200 OK Bearer from-env" {
		t.Errorf("token from $%s: %q, %v", tokenEnv, got, err)
	}
	if _, err := get(serverClient{}); err == nil || !strings.Contains(err.Error(), "certificate") {
		t.Errorf("without --ca: %v, want a certificate error", err)
	}
	for _, tc := range []struct {
		c    serverClient
		want string
	}{
		{serverClient{cert: cert}, "--cert and --key go together"},
		{serverClient{ca: filepath.Join(dir, "missing.pem")}, "--ca:"},
		{serverClient{ca: key}, "holds no PEM certificate"},
		{serverClient{cert: caFile, key: key}, "--cert and --key:"},
	} {
		if _, err := tc.c.httpClient(time.Second); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%+v: %v, want an error containing %q", tc.c, err, tc.want)
		}
	}
}

func TestServerClientDoesNotFollowARedirectToAnotherSchemeOrPort(t *testing.T) {
	var leaked atomic.Value
	plain := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		leaked.Store(r.Header.Get("Authorization"))
	}))
	defer plain.Close()
	ca := certtest.NewCA(t, "ca")
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/here":
			http.Redirect(w, r, "/there", http.StatusFound)
		case "/there":
			_, _ = io.WriteString(w, r.Header.Get("Authorization"))
		default:
			http.Redirect(w, r, plain.URL+"/v1/models", http.StatusFound)
		}
	}))
	srv.TLS = &tls.Config{Certificates: []tls.Certificate{ca.Server(t, "grove").TLS(t)}}
	srv.StartTLS()
	defer srv.Close()
	c := serverClient{token: "s3cret", ca: ca.WriteCA(t, t.TempDir())}
	hc, err := c.httpClient(5 * time.Second)
	if err != nil {
		t.Fatal(err)
	}
	req, _ := http.NewRequest("GET", srv.URL+"/v1/models", nil)
	c.authorize(req)
	if resp, err := hc.Do(req); err == nil || !strings.Contains(err.Error(), "not followed") {
		if err == nil {
			resp.Body.Close()
		}
		t.Errorf("redirect from https to http: %v, want it not followed", err)
	}
	if v, _ := leaked.Load().(string); v != "" {
		t.Errorf("the plain-HTTP server got Authorization %q", v)
	}
	req, _ = http.NewRequest("GET", srv.URL+"/here", nil)
	c.authorize(req)
	resp, err := hc.Do(req)
	if err != nil {
		t.Fatalf("redirect on the same origin: %v", err)
	}
	defer resp.Body.Close()
	if b, _ := io.ReadAll(resp.Body); string(b) != "Bearer s3cret" {
		t.Errorf("redirect on the same origin: answer %q, want the token kept", b)
	}
}
