package tlsconf_test

import (
	"context"
	"crypto/tls"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/groveml/grove/internal/certtest"
	"github.com/groveml/grove/transport/tlsconf"
)

// handshake dials a TLS listener served with cfg, with the client config
// cc, and returns the client's error and the server's connection state.
func handshake(t *testing.T, cfg *tls.Config, cc *tls.Config) (error, tls.ConnectionState) {
	t.Helper()
	ln, err := tls.Listen("tcp", "127.0.0.1:0", cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	states := make(chan tls.ConnectionState, 1)
	go func() {
		c, err := ln.Accept()
		if err != nil {
			states <- tls.ConnectionState{}
			return
		}
		defer c.Close()
		tc := c.(*tls.Conn)
		_ = tc.Handshake()
		states <- tc.ConnectionState()
		_, _ = tc.Write([]byte("x"))
	}()
	conn, err := tls.Dial("tcp", ln.Addr().String(), cc)
	if err == nil {
		// TLS 1.3 reports a refused client certificate on the first read.
		_, err = conn.Read(make([]byte, 1))
		conn.Close()
	}
	return err, <-states
}

func TestParseClientAuth(t *testing.T) {
	for _, s := range []string{"none", "request", "require"} {
		if m, err := tlsconf.ParseClientAuth(s); err != nil || string(m) != s {
			t.Errorf("ParseClientAuth(%q) = %q, %v", s, m, err)
		}
	}
	if _, err := tlsconf.ParseClientAuth("optional"); err == nil || !strings.Contains(err.Error(), "none, request or require") {
		t.Errorf("ParseClientAuth(optional) = %v", err)
	}
}

func TestNewErrors(t *testing.T) {
	dir := t.TempDir()
	ca := certtest.NewCA(t, "ca")
	cert, key := ca.Server(t, "grove").Write(t, dir, "server")
	other, _ := certtest.NewCA(t, "other").Server(t, "x").Write(t, dir, "other")
	notPEM := filepath.Join(dir, "junk.pem")
	certtest.WriteFile(t, notPEM, []byte("not a certificate"))
	for _, tc := range []struct {
		name string
		f    tlsconf.Files
		want string
	}{
		{"no key", tlsconf.Files{CertFile: cert}, "key file"},
		{"missing cert", tlsconf.Files{CertFile: filepath.Join(dir, "nope"), KeyFile: key}, "reading the certificate"},
		{"mismatched key", tlsconf.Files{CertFile: other, KeyFile: key}, "private key does not match"},
		{"require without CA", tlsconf.Files{CertFile: cert, KeyFile: key, ClientAuth: tlsconf.ClientAuthRequire}, "needs a client CA file"},
		{"CA not PEM", tlsconf.Files{CertFile: cert, KeyFile: key, ClientCAFile: notPEM, ClientAuth: tlsconf.ClientAuthRequest}, "holds no PEM certificate"},
		{"bad mode", tlsconf.Files{CertFile: cert, KeyFile: key, ClientAuth: "always"}, "not none, request or require"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := tlsconf.New(tc.f)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("New = %v, want an error containing %q", err, tc.want)
			}
		})
	}
}

// withClientCA returns a Reloader of a server certificate from ca, with
// ca as the client CA file in dir, in mode.
func withClientCA(t *testing.T, dir string, ca *certtest.CA, mode tlsconf.ClientAuth) *tlsconf.Reloader {
	t.Helper()
	cert, key := ca.Server(t, "grove").Write(t, dir, "server")
	r, err := tlsconf.New(tlsconf.Files{CertFile: cert, KeyFile: key, ClientCAFile: ca.WriteCA(t, dir), ClientAuth: mode})
	if err != nil {
		t.Fatal(err)
	}
	return r
}

func TestClientCertificates(t *testing.T) {
	ca, otherCA := certtest.NewCA(t, "ca"), certtest.NewCA(t, "other")
	r := withClientCA(t, t.TempDir(), ca, tlsconf.ClientAuthRequire)
	if !r.RequireClientCert() {
		t.Fatal("RequireClientCert is false for require")
	}
	now := time.Now()
	good := ca.Client(t, "bidder", now.Add(-time.Hour), now.Add(time.Hour)).TLS(t)
	foreign := otherCA.Client(t, "bidder", now.Add(-time.Hour), now.Add(time.Hour)).TLS(t)
	expired := ca.Client(t, "bidder", now.Add(-2*time.Hour), now.Add(-time.Hour)).TLS(t)
	for _, tc := range []struct {
		name     string
		certs    []tls.Certificate
		ok       bool
		verified bool
	}{
		{"none", nil, true, false}, // refused per route, not at the TLS layer
		{"signed by the client CA", []tls.Certificate{good}, true, true},
		{"signed by another CA", []tls.Certificate{foreign}, false, false},
		{"expired", []tls.Certificate{expired}, false, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cc := &tls.Config{RootCAs: ca.Pool(), ServerName: "localhost", NextProtos: []string{"h2"},
				// sends the certificate even when its CA is not one the server names
				GetClientCertificate: func(*tls.CertificateRequestInfo) (*tls.Certificate, error) {
					if len(tc.certs) == 0 {
						return &tls.Certificate{}, nil
					}
					return &tc.certs[0], nil
				}}
			err, st := handshake(t, r.ServerConfig("h2"), cc)
			if (err == nil) != tc.ok {
				t.Fatalf("handshake error %v, want ok=%v", err, tc.ok)
			}
			if got := tlsconf.HasVerifiedClientCert(&st); got != tc.verified {
				t.Fatalf("HasVerifiedClientCert = %v, want %v", got, tc.verified)
			}
			if tc.ok && st.NegotiatedProtocol != "h2" {
				t.Fatalf("negotiated %q, want h2", st.NegotiatedProtocol)
			}
		})
	}
}

func TestMinVersion(t *testing.T) {
	ca := certtest.NewCA(t, "ca")
	r, _ := serverOnly(t, t.TempDir(), ca, "grove")
	err, _ := handshake(t, r.ServerConfig(), &tls.Config{RootCAs: ca.Pool(), ServerName: "localhost", MinVersion: tls.VersionTLS11, MaxVersion: tls.VersionTLS11})
	if err == nil {
		t.Fatal("a TLS 1.1 handshake succeeded")
	}
}

// serverOnly returns a Reloader of a server certificate named cn from ca,
// written to dir, and the certificate's path.
func serverOnly(t *testing.T, dir string, ca *certtest.CA, cn string) (*tlsconf.Reloader, string) {
	t.Helper()
	cert, key := ca.Server(t, cn).Write(t, dir, "server")
	r, err := tlsconf.New(tlsconf.Files{CertFile: cert, KeyFile: key})
	if err != nil {
		t.Fatal(err)
	}
	return r, cert
}

func TestReloadRotatesWithoutDroppingConnections(t *testing.T) {
	dir := t.TempDir()
	ca := certtest.NewCA(t, "ca")
	r, cert := serverOnly(t, dir, ca, "first")
	ln, err := tls.Listen("tcp", "127.0.0.1:0", r.ServerConfig())
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func(c net.Conn) { // echo until the client closes
				defer c.Close()
				b := make([]byte, 1)
				for {
					if _, err := c.Read(b); err != nil {
						return
					}
					if _, err := c.Write(b); err != nil {
						return
					}
				}
			}(c)
		}
	}()
	dial := func() *tls.Conn {
		c, err := tls.Dial("tcp", ln.Addr().String(), &tls.Config{RootCAs: ca.Pool(), ServerName: "localhost"})
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	echo := func(c *tls.Conn) error {
		if _, err := c.Write([]byte("a")); err != nil {
			return err
		}
		_, err := c.Read(make([]byte, 1))
		return err
	}
	old := dial()
	defer old.Close()
	if cn := old.ConnectionState().PeerCertificates[0].Subject.CommonName; cn != "first" {
		t.Fatalf("served %q, want first", cn)
	}
	if changed, err := r.Reload(); changed || err != nil {
		t.Fatalf("Reload of unchanged files = %v, %v", changed, err)
	}

	// A half-written rotation keeps the certificate in use.
	certtest.WriteFile(t, cert, []byte("-----BEGIN CERTIFICATE-----\ntruncated"))
	if changed, err := r.Reload(); changed || err == nil {
		t.Fatalf("Reload of a broken certificate = %v, %v; want an error", changed, err)
	}
	ca.Server(t, "second").Write(t, dir, "server")
	if changed, err := r.Reload(); !changed || err != nil {
		t.Fatalf("Reload of a rotated certificate = %v, %v", changed, err)
	}
	fresh := dial()
	defer fresh.Close()
	if cn := fresh.ConnectionState().PeerCertificates[0].Subject.CommonName; cn != "second" {
		t.Fatalf("after rotation served %q, want second", cn)
	}
	if err := echo(old); err != nil {
		t.Fatalf("the connection opened before the rotation broke: %v", err)
	}
}

func TestReloadRotatesTheClientCA(t *testing.T) {
	dir := t.TempDir()
	oldCA, newCA := certtest.NewCA(t, "old"), certtest.NewCA(t, "new")
	r := withClientCA(t, dir, oldCA, tlsconf.ClientAuthRequest)
	now := time.Now()
	fromNew := newCA.Client(t, "bidder", now.Add(-time.Hour), now.Add(time.Hour)).TLS(t)
	fromOld := oldCA.Client(t, "bidder", now.Add(-time.Hour), now.Add(time.Hour)).TLS(t)
	try := func(c tls.Certificate) error {
		err, _ := handshake(t, r.ServerConfig(), &tls.Config{RootCAs: oldCA.Pool(), ServerName: "localhost",
			GetClientCertificate: func(*tls.CertificateRequestInfo) (*tls.Certificate, error) { return &c, nil }})
		return err
	}
	if try(fromOld) != nil || try(fromNew) == nil {
		t.Fatal("before the rotation: want the old CA's client accepted and the new one's refused")
	}
	newCA.WriteCA(t, dir)
	if changed, err := r.Reload(); !changed || err != nil {
		t.Fatalf("Reload of a rotated client CA = %v, %v", changed, err)
	}
	if try(fromNew) != nil || try(fromOld) == nil {
		t.Fatal("after the rotation: want the new CA's client accepted and the old one's refused")
	}
}

func TestWatchReloadsAndLogsEachFailureOnce(t *testing.T) {
	dir := t.TempDir()
	ca := certtest.NewCA(t, "ca")
	r, cert := serverOnly(t, dir, ca, "first")
	logs := &counts{n: map[string]int{}}
	const failed, reloaded = "TLS files not reloaded; serving the previous ones", "TLS files reloaded"
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan struct{})
	go func() { r.Watch(ctx, time.Millisecond, slog.New(logs)); close(done) }()
	defer func() { cancel(); <-done }()
	waitFor := func(what string, cond func() bool) {
		t.Helper()
		for deadline := time.Now().Add(5 * time.Second); !cond(); {
			if time.Now().After(deadline) {
				t.Fatalf("timed out waiting for %s; logs: %v", what, logs.n)
			}
			time.Sleep(time.Millisecond)
		}
	}
	certtest.WriteFile(t, cert, []byte("broken"))
	waitFor("the failure to be logged", func() bool { return logs.of(failed) > 0 })
	time.Sleep(20 * time.Millisecond) // about 20 more failed reloads
	if n := logs.of(failed); n != 1 {
		t.Errorf("the same failure was logged %d times, want once", n)
	}
	ca.Server(t, "second").Write(t, dir, "server")
	waitFor("the rotation", func() bool { return r.Current().Leaf != nil && r.Current().Leaf.Subject.CommonName == "second" })
	waitFor("the rotation to be logged", func() bool { return logs.of(reloaded) == 1 })
}

// counts is a slog handler counting the records by message.
type counts struct {
	mu sync.Mutex
	n  map[string]int
}

func (c *counts) Enabled(context.Context, slog.Level) bool { return true }
func (c *counts) WithAttrs([]slog.Attr) slog.Handler       { return c }
func (c *counts) WithGroup(string) slog.Handler            { return c }

func (c *counts) Handle(_ context.Context, r slog.Record) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.n[r.Message]++
	return nil
}

func (c *counts) of(msg string) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.n[msg]
}

func TestFilesLargerThanTheLimitAreRefused(t *testing.T) {
	const limit = 4 << 20
	dir := t.TempDir()
	ca := certtest.NewCA(t, "ca")
	cert, key := ca.Server(t, "first").Write(t, dir, "server")
	pem, err := os.ReadFile(cert)
	if err != nil {
		t.Fatal(err)
	}
	// Text after the PEM block fills the file to the size wanted: the
	// certificate stays valid.
	fill := func(size int) []byte { return append(pem[:len(pem):len(pem)], strings.Repeat("x", size-len(pem))...) }
	certtest.WriteFile(t, cert, fill(limit))
	r, err := tlsconf.New(tlsconf.Files{CertFile: cert, KeyFile: key})
	if err != nil {
		t.Fatalf("a certificate file of exactly the limit: %v", err)
	}
	certtest.WriteFile(t, cert, fill(limit+1))
	want := "reading the certificate: " + cert + " is larger than its limit of 4 MiB"
	if changed, err := r.Reload(); changed || err == nil || err.Error() != want {
		t.Errorf("Reload of a certificate file over the limit = %v, %v; want %q", changed, err, want)
	}
	if r.Current().Leaf == nil || r.Current().Leaf.Subject.CommonName != "first" {
		t.Error("a certificate file over the limit replaced the one served")
	}
	if _, err := tlsconf.New(tlsconf.Files{CertFile: cert, KeyFile: key}); err == nil || err.Error() != want {
		t.Errorf("New with a certificate file over the limit: got %v, want %q", err, want)
	}
}
