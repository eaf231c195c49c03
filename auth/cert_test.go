package auth

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/metadata"
	"google.golang.org/protobuf/types/known/emptypb"

	"github.com/groveml/grove/internal/certtest"
)

// client signs a client certificate for dnsName (no SAN if "") and cn.
func client(t *testing.T, ca *certtest.CA, dnsName, cn string) tls.Certificate {
	t.Helper()
	tmpl := &x509.Certificate{Subject: pkix.Name{CommonName: cn}, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour)}
	if dnsName != "" {
		tmpl.DNSNames = []string{dnsName}
	}
	return ca.Sign(t, tmpl).TLS(t)
}

// TestClientCertificatesOverTLS checks that the certificate the TLS layer
// verified names the caller, over HTTP (r.TLS) and gRPC (the peer's
// AuthInfo), with a real handshake on 127.0.0.1.
func TestClientCertificatesOverTLS(t *testing.T) {
	ca := certtest.NewCA(t, "test CA")
	pool := ca.Pool()
	serverTLS := &tls.Config{Certificates: []tls.Certificate{ca.Server(t, "server").TLS(t)},
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
		{"dns SAN", []tls.Certificate{client(t, ca, "bidder.example", "ignored")}, "certificate bidder.example [infer]"},
		{"subject CN", []tls.Certificate{client(t, ca, "", "ops")}, "certificate ops [read manage]"},
		{"unmapped", []tls.Certificate{client(t, ca, "", "stranger")}, "certificate stranger []"},
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
