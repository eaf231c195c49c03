// Package tlsconf builds the server TLS configuration of Grove's listeners
// from PEM files (a certificate, its key and optionally a client CA
// bundle) and keeps it current: Reload re-reads the files and, when they
// changed and parse, swaps the configuration every new handshake reads
// (GetConfigForClient), so certificates rotated on disk (cert-manager) are
// served without a restart and without touching open connections. TLS 1.2
// is the minimum version. ReadFile and LoadX509KeyPair read the PEM files
// of Grove's clients (Kafka, etcd, cluster peers, grove replay) within the
// same limit.
package tlsconf

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/groveml/grove/internal/capped"
)

// ClientAuth is how a listener asks for client certificates.
type ClientAuth string

// The client authentication modes of tls.client_auth.
const (
	// ClientAuthNone asks for no client certificate.
	ClientAuthNone ClientAuth = "none"
	// ClientAuthRequest asks for one and verifies it against the client
	// CA when given; callers without one are let through.
	ClientAuthRequest ClientAuth = "request"
	// ClientAuthRequire verifies a given certificate at the TLS layer as
	// Request does, and the servers refuse every route but the probes to
	// a caller without one (see RequireClientCert).
	ClientAuthRequire ClientAuth = "require"
)

// ParseClientAuth returns the mode named s, or an error listing the modes.
func ParseClientAuth(s string) (ClientAuth, error) {
	switch m := ClientAuth(s); m {
	case ClientAuthNone, ClientAuthRequest, ClientAuthRequire:
		return m, nil
	}
	return "", fmt.Errorf("%q is not none, request or require", s)
}

// Files names the PEM files of a server's TLS configuration.
type Files struct {
	// CertFile is the server certificate chain, KeyFile its private key.
	CertFile string
	KeyFile  string
	// ClientCAFile holds the CAs client certificates must chain to;
	// required unless ClientAuth is none.
	ClientCAFile string
	// ClientAuth is none (""), request or require.
	ClientAuth ClientAuth
}

// Reloader holds the current TLS configuration built from Files.
type Reloader struct {
	files Files
	mu    sync.Mutex // serializes Reload
	cur   atomic.Pointer[loaded]
}

// loaded is one configuration and the file contents it was built from.
type loaded struct {
	cert, key, ca []byte
	config        *tls.Config
}

// New reads and checks the files; the error names the file at fault.
func New(f Files) (*Reloader, error) {
	if f.ClientAuth == "" {
		f.ClientAuth = ClientAuthNone
	}
	if _, err := ParseClientAuth(string(f.ClientAuth)); err != nil {
		return nil, fmt.Errorf("client auth: %w", err)
	}
	if f.CertFile == "" || f.KeyFile == "" {
		return nil, errors.New("a certificate file and a key file are both required")
	}
	if f.ClientAuth != ClientAuthNone && f.ClientCAFile == "" {
		return nil, fmt.Errorf("client auth %s needs a client CA file", f.ClientAuth)
	}
	r := &Reloader{files: f}
	if _, err := r.Reload(); err != nil {
		return nil, err
	}
	return r, nil
}

// RequireClientCert reports whether the servers must refuse every route
// but the probes to a caller without a verified client certificate.
func (r *Reloader) RequireClientCert() bool { return r.files.ClientAuth == ClientAuthRequire }

// MaxFileBytes is the largest certificate, key or CA file read: a CA
// bundle of every public root is a few hundred KiB.
const MaxFileBytes = 4 << 20

// ReadFile reads the certificate, key or CA file at path whole, up to
// MaxFileBytes: a larger one is a *capped.TooLargeError naming path.
func ReadFile(path string) ([]byte, error) { return capped.ReadFile(path, MaxFileBytes, path) }

// LoadX509KeyPair is tls.LoadX509KeyPair with each file read by ReadFile.
func LoadX509KeyPair(certFile, keyFile string) (tls.Certificate, error) {
	cert, err := ReadFile(certFile)
	if err != nil {
		return tls.Certificate{}, err
	}
	key, err := ReadFile(keyFile)
	if err != nil {
		return tls.Certificate{}, err
	}
	return tls.X509KeyPair(cert, key)
}

// Reload re-reads the files. When their contents changed and they parse,
// new handshakes use them from now on and changed is true; when they do
// not parse (a rotation half written, say) the configuration in use is
// kept and the error says which file is at fault.
func (r *Reloader) Reload() (changed bool, err error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	read := func(what, path string) ([]byte, error) {
		if path == "" {
			return nil, nil
		}
		b, err := ReadFile(path)
		if err != nil {
			return nil, fmt.Errorf("reading the %s: %w", what, err)
		}
		return b, nil
	}
	cert, err := read("certificate", r.files.CertFile)
	if err != nil {
		return false, err
	}
	key, err := read("key", r.files.KeyFile)
	if err != nil {
		return false, err
	}
	ca, err := read("client CA file", r.files.ClientCAFile)
	if err != nil {
		return false, err
	}
	if old := r.cur.Load(); old != nil && bytes.Equal(old.cert, cert) && bytes.Equal(old.key, key) && bytes.Equal(old.ca, ca) {
		return false, nil
	}
	pair, err := tls.X509KeyPair(cert, key)
	if err != nil {
		return false, fmt.Errorf("certificate %s and key %s: %w", r.files.CertFile, r.files.KeyFile, err)
	}
	c := &tls.Config{MinVersion: tls.VersionTLS12, Certificates: []tls.Certificate{pair}}
	if r.files.ClientAuth != ClientAuthNone {
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(ca) {
			return false, fmt.Errorf("client CA file %s holds no PEM certificate", r.files.ClientCAFile)
		}
		c.ClientCAs = pool
		// require is enforced per route, so the probes stay open to callers
		// without a certificate; a certificate that is given is verified here.
		c.ClientAuth = tls.VerifyClientCertIfGiven
	}
	r.cur.Store(&loaded{cert: cert, key: key, ca: ca, config: c})
	return true, nil
}

// Current returns the certificate being served.
func (r *Reloader) Current() *tls.Certificate { return &r.cur.Load().config.Certificates[0] }

// ServerConfig returns the configuration to give a listener: each
// handshake takes the current configuration, offering nextProtos in ALPN
// (["h2", "http/1.1"] for HTTP, ["h2"] for gRPC).
func (r *Reloader) ServerConfig(nextProtos ...string) *tls.Config {
	protos := append([]string(nil), nextProtos...)
	return &tls.Config{
		MinVersion: tls.VersionTLS12,
		NextProtos: protos,
		GetConfigForClient: func(*tls.ClientHelloInfo) (*tls.Config, error) {
			c := r.cur.Load().config.Clone()
			c.NextProtos = protos
			return c, nil
		},
		GetCertificate: func(*tls.ClientHelloInfo) (*tls.Certificate, error) { return r.Current(), nil },
	}
}

// Watch calls Reload every interval until ctx is done, logging each
// rotation, and each failure once until it changes or clears (the
// configuration in use stays).
func (r *Reloader) Watch(ctx context.Context, interval time.Duration, log *slog.Logger) {
	t := time.NewTicker(interval)
	defer t.Stop()
	lastErr := ""
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		changed, err := r.Reload()
		switch {
		case err != nil:
			if err.Error() != lastErr {
				log.Warn("TLS files not reloaded; serving the previous ones", "err", err)
				lastErr = err.Error()
			}
			continue
		case changed:
			log.Info("TLS files reloaded", "cert_file", r.files.CertFile, "client_ca_file", r.files.ClientCAFile)
		}
		lastErr = ""
	}
}

// HasVerifiedClientCert reports whether a connection's state carries a
// client certificate verified against the client CA.
func HasVerifiedClientCert(st *tls.ConnectionState) bool {
	return st != nil && len(st.VerifiedChains) > 0
}
