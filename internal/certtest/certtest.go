// Package certtest makes CAs and certificates with crypto/x509 for the
// tests of Grove's TLS listeners and clients; nothing in it is for
// production use.
package certtest

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// CA is a certificate authority that signs leaf certificates.
type CA struct {
	Cert *x509.Certificate
	key  *ecdsa.PrivateKey
	// PEM is the CA certificate in PEM.
	PEM []byte
}

// Leaf is a signed certificate and its key, in PEM.
type Leaf struct {
	CertPEM, KeyPEM []byte
}

// NewCA returns a self-signed CA named cn, valid from an hour ago for a day.
func NewCA(t testing.TB, cn string) *CA {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber:          serial(t),
		Subject:               pkix.Name{CommonName: cn},
		NotBefore:             time.Now().Add(-time.Hour),
		NotAfter:              time.Now().Add(24 * time.Hour),
		IsCA:                  true,
		BasicConstraintsValid: true,
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	return &CA{Cert: cert, key: key, PEM: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})}
}

// Server signs a server certificate for 127.0.0.1, ::1 and localhost,
// named cn, valid from an hour ago for a day.
func (ca *CA) Server(t testing.TB, cn string) Leaf {
	t.Helper()
	return ca.Sign(t, &x509.Certificate{
		Subject:     pkix.Name{CommonName: cn},
		DNSNames:    []string{"localhost"},
		IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1), net.IPv6loopback},
		NotBefore:   time.Now().Add(-time.Hour),
		NotAfter:    time.Now().Add(24 * time.Hour),
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	})
}

// Client signs a client certificate named name (subject CN and DNS SAN)
// valid from notBefore to notAfter.
func (ca *CA) Client(t testing.TB, name string, notBefore, notAfter time.Time) Leaf {
	t.Helper()
	return ca.Sign(t, &x509.Certificate{
		Subject:     pkix.Name{CommonName: name},
		DNSNames:    []string{name},
		NotBefore:   notBefore,
		NotAfter:    notAfter,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
	})
}

// Sign signs a leaf certificate made from tmpl (its serial number and key
// usage are set here), for tests that need names or dates Server and
// Client do not give.
func (ca *CA) Sign(t testing.TB, tmpl *x509.Certificate) Leaf {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl.SerialNumber = serial(t)
	tmpl.KeyUsage = x509.KeyUsageDigitalSignature
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.Cert, &key.PublicKey, ca.key)
	if err != nil {
		t.Fatal(err)
	}
	kder, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	return Leaf{
		CertPEM: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}),
		KeyPEM:  pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kder}),
	}
}

// TLS returns the leaf as a tls.Certificate.
func (l Leaf) TLS(t testing.TB) tls.Certificate {
	t.Helper()
	c, err := tls.X509KeyPair(l.CertPEM, l.KeyPEM)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// Write writes the leaf's certificate and key to dir/name.crt and
// dir/name.key (replacing them) and returns their paths.
func (l Leaf) Write(t testing.TB, dir, name string) (certFile, keyFile string) {
	t.Helper()
	certFile, keyFile = filepath.Join(dir, name+".crt"), filepath.Join(dir, name+".key")
	WriteFile(t, certFile, l.CertPEM)
	WriteFile(t, keyFile, l.KeyPEM)
	return certFile, keyFile
}

// WriteFile writes data to path atomically (a rename), as cert-manager does.
func WriteFile(t testing.TB, path string, data []byte) {
	t.Helper()
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, data, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, path); err != nil {
		t.Fatal(err)
	}
}

// WriteCA writes the CA certificate to dir/ca.pem and returns its path.
func (ca *CA) WriteCA(t testing.TB, dir string) string {
	t.Helper()
	path := filepath.Join(dir, "ca.pem")
	WriteFile(t, path, ca.PEM)
	return path
}

// Pool returns a pool holding the CA.
func (ca *CA) Pool() *x509.CertPool {
	p := x509.NewCertPool()
	p.AddCert(ca.Cert)
	return p
}

func serial(t testing.TB) *big.Int {
	t.Helper()
	n, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 120))
	if err != nil {
		t.Fatal(err)
	}
	return n
}
