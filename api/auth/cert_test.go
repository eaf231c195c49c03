package auth

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"fmt"
	"io"
	"math/big"
	"net"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/metadata"
	"google.golang.org/protobuf/types/known/emptypb"
)

// testCA is a certificate authority made for a test.
type testCA struct {
	cert *x509.Certificate
	key  *ecdsa.PrivateKey
}

func newCA(t *testing.T) testCA {
	t.Helper()
	key, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "test CA"}, IsCA: true, BasicConstraintsValid: true,
		KeyUsage: x509.KeyUsageCertSign, NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour)}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	cert, _ := x509.ParseCertificate(der)
	return testCA{cert, key}
}

// issue returns a leaf certificate for dnsName (none if "") and cn.
func (ca testCA) issue(t *testing.T, dnsName, cn string, usage x509.ExtKeyUsage) tls.Certificate {
	t.Helper()
	key, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(time.Now().UnixNano()), Subject: pkix.Name{CommonName: cn},
		ExtKeyUsage: []x509.ExtKeyUsage{usage}, NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour)}
	if dnsName != "" {
		tmpl.DNSNames = []string{dnsName}
	}
	if usage == x509.ExtKeyUsageServerAuth {
		tmpl.IPAddresses = []net.IP{net.IPv4(127, 0, 0, 1)}
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.cert, &key.PublicKey, ca.key)
	if err != nil {
		t.Fatal(err)
	}
	return tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key}
}

// TestClientCertificatesOverTLS checks that the certificate the TLS layer
// verified names the caller, over HTTP (r.TLS) and gRPC (the peer's
// AuthInfo), with a real handshake on 127.0.0.1.
func TestClientCertificatesOverTLS(t *testing.T) {
	ca := newCA(t)
	pool := x509.NewCertPool()
	pool.AddCert(ca.cert)
	serverTLS := &tls.Config{Certificates: []tls.Certificate{ca.issue(t, "", "server", x509.ExtKeyUsageServerAuth)},
		ClientCAs: pool, ClientAuth: tls.VerifyClientCertIfGiven, MinVersion: tls.VersionTLS12}
	a, err := New(Config{ClientRoles: map[string][]Role{"bidder.example": {RoleInfer}, "ops": {RoleRead, RoleManage}}})
	if err != nil {
		t.Fatal(err)
	}
	describe := func(id Identity, err error) string {
		if err != nil {
			return Reason(err)
		}
		return fmt.Sprintf("%s %s %v", id.Method, id.Name, id.Roles)
	}

	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.WriteString(w, describe(a.HTTP(r)))
	}))
	srv.TLS = serverTLS
	srv.StartTLS()
	defer srv.Close()

	gs := grpc.NewServer(grpc.Creds(credentials.NewTLS(serverTLS)))
	desc := grpc.ServiceDesc{ServiceName: "test.Who", HandlerType: (*any)(nil), Methods: []grpc.MethodDesc{{MethodName: "Am",
		Handler: func(_ any, ctx context.Context, dec func(any) error, _ grpc.UnaryServerInterceptor) (any, error) {
			_ = dec(new(emptypb.Empty))
			md, _ := metadata.FromIncomingContext(ctx)
			_ = grpc.SetTrailer(ctx, metadata.Pairs("who", describe(a.GRPC(ctx, md))))
			return new(emptypb.Empty), nil
		}}}}
	gs.RegisterService(&desc, struct{}{})
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go func() { _ = gs.Serve(ln) }()
	defer gs.Stop()

	for _, c := range []struct {
		name  string
		certs []tls.Certificate
		want  string
	}{
		{"dns SAN", []tls.Certificate{ca.issue(t, "bidder.example", "ignored", x509.ExtKeyUsageClientAuth)}, "certificate bidder.example [infer]"},
		{"subject CN", []tls.Certificate{ca.issue(t, "", "ops", x509.ExtKeyUsageClientAuth)}, "certificate ops [read manage]"},
		{"unmapped", []tls.Certificate{ca.issue(t, "", "stranger", x509.ExtKeyUsageClientAuth)}, "certificate stranger []"},
		{"none", nil, "no credentials: send Authorization: Bearer <token> or a client certificate"},
	} {
		clientTLS := &tls.Config{RootCAs: pool, Certificates: c.certs, MinVersion: tls.VersionTLS12}
		hc := &http.Client{Transport: &http.Transport{TLSClientConfig: clientTLS}}
		resp, err := hc.Get(srv.URL)
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if string(body) != c.want {
			t.Errorf("%s over HTTP: %q, want %q", c.name, body, c.want)
		}
		conn, err := grpc.NewClient(ln.Addr().String(), grpc.WithTransportCredentials(credentials.NewTLS(clientTLS)))
		if err != nil {
			t.Fatal(err)
		}
		var trailer metadata.MD
		if err := conn.Invoke(t.Context(), "/test.Who/Am", &emptypb.Empty{}, &emptypb.Empty{}, grpc.Trailer(&trailer)); err != nil {
			t.Fatalf("%s over gRPC: %v", c.name, err)
		}
		conn.Close()
		if got := trailer.Get("who"); len(got) != 1 || got[0] != c.want {
			t.Errorf("%s over gRPC: %q, want %q", c.name, got, c.want)
		}
	}
}
