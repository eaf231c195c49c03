package main

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/hex"
	"encoding/pem"
	"fmt"
	"math/big"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"time"
)

// serverGroveTLS is a grove instance that serves TLS on both listeners and
// needs a bearer token (--tls-cert, --tls-key, --auth-tokens-file); its
// rows are compared with plain grove's (plaintext, no authentication) at
// the same shape: what transport security and the auth check cost.
const serverGroveTLS = "grove-tls"

// tlsShapes are grove-tls's default scenarios.
var tlsShapes = []string{"b1c32"}

// tlsTokenName is the name of grovebench's token in grove-tls's tokens file.
const tlsTokenName = "grovebench"

// tlsAuth is what grove-tls is started with and what its clients need:
// a server certificate for 127.0.0.1 made in process (self-signed, and the
// clients' only root), its key, a tokens file holding the sha256 of a
// random token with the roles infer and read, and that token.
type tlsAuth struct {
	certFile, keyFile, tokensFile string
	token                         string
	// clientTLS trusts only the certificate and speaks HTTP/1.1 (the raw
	// load client's protocol).
	clientTLS *tls.Config
}

// writeTLSAuth makes grove-tls's certificate, key and tokens file in dir.
func writeTLSAuth(dir string) (*tlsAuth, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, err
	}
	serial, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 62))
	if err != nil {
		return nil, err
	}
	now := time.Now()
	tmpl := &x509.Certificate{
		SerialNumber:          serial,
		Subject:               pkix.Name{CommonName: "grovebench grove-tls"},
		NotBefore:             now.Add(-time.Hour),
		NotAfter:              now.Add(24 * time.Hour),
		KeyUsage:              x509.KeyUsageDigitalSignature | x509.KeyUsageCertSign,
		ExtKeyUsage:           []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		BasicConstraintsValid: true,
		IsCA:                  true,
		IPAddresses:           []net.IP{net.IPv4(127, 0, 0, 1)},
		DNSNames:              []string{"localhost"},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return nil, fmt.Errorf("making grove-tls's certificate: %w", err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, err
	}
	keyDER, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		return nil, err
	}
	raw := make([]byte, 32)
	if _, err := rand.Read(raw); err != nil {
		return nil, err
	}
	a := &tlsAuth{certFile: filepath.Join(dir, "grove-tls-cert.pem"), keyFile: filepath.Join(dir, "grove-tls-key.pem"),
		tokensFile: filepath.Join(dir, "grove-tls-tokens.yaml"), token: hex.EncodeToString(raw)}
	sum := sha256.Sum256([]byte(a.token))
	tokens := fmt.Sprintf("tokens:\n  - name: %s\n    sha256: %s\n    roles: [infer, read]\n", tlsTokenName, hex.EncodeToString(sum[:]))
	for _, f := range []struct {
		path string
		data []byte
	}{
		{a.certFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})},
		{a.keyFile, pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: keyDER})},
		{a.tokensFile, []byte(tokens)},
	} {
		if err := os.WriteFile(f.path, f.data, 0o600); err != nil {
			return nil, err
		}
	}
	roots := x509.NewCertPool()
	roots.AddCert(cert)
	a.clientTLS = &tls.Config{RootCAs: roots, MinVersion: tls.VersionTLS12, NextProtos: []string{"http/1.1"}}
	return a, nil
}

// args are the grove serve arguments that turn on TLS and the tokens file.
func (a *tlsAuth) args() []string {
	return []string{"--tls-cert", a.certFile, "--tls-key", a.keyFile, "--auth-tokens-file", a.tokensFile}
}

// header is the request header line carrying the token.
func (a *tlsAuth) header() string { return "Authorization: Bearer " + a.token }

// httpClient is an HTTP client for grove-tls (readiness and check requests).
func (a *tlsAuth) httpClient() *http.Client {
	return &http.Client{Timeout: 2 * time.Second, Transport: &http.Transport{TLSClientConfig: a.clientTLS.Clone()}}
}

// tlsRatio is grove-tls's row against plain grove's at one shape.
type tlsRatio struct {
	Batch int `json:"batch"`
	Conc  int `json:"concurrency"`
	// Ratio is grove-tls's req/s over plain grove's; the p50s and p99s are each's.
	Ratio              float64 `json:"ratio"`
	TLSRate, PlainRate float64
	TLSP50, PlainP50   time.Duration
	TLSP99, PlainP99   time.Duration
}

// tlsRatios compares every grove-tls row with plain grove's at its shape.
func (r *report) tlsRatios() []tlsRatio {
	var out []tlsRatio
	for _, x := range r.Results {
		if x.Server != serverGroveTLS {
			continue
		}
		if g := r.find(serverGrove, x.Batch, x.Conc); g != nil && g.ReqPerSec > 0 {
			out = append(out, tlsRatio{Batch: x.Batch, Conc: x.Conc, Ratio: x.ReqPerSec / g.ReqPerSec, TLSRate: x.ReqPerSec, PlainRate: g.ReqPerSec,
				TLSP50: x.P50, PlainP50: g.P50, TLSP99: x.P99, PlainP99: g.P99})
		}
	}
	return out
}
