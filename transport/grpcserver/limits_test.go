package grpcserver

import (
	"crypto/tls"
	"net"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/status"

	"github.com/groveml/grove/internal/certtest"
	"github.com/groveml/grove/transport/tlsconf"
)

func TestIsProbe(t *testing.T) {
	for m, want := range map[string]bool{
		"/grpc.health.v1.Health/Check":                                                      true,
		"/grpc.health.v1.Health/Watch":                                                      true,
		"/inference.GRPCInferenceService/ServerLive":                                        true,
		"/inference.GRPCInferenceService/ServerReady":                                       true,
		"/inference.GRPCInferenceService/ModelReady":                                        true,
		"/inference.GRPCInferenceService/ModelInfer":                                        false,
		"/inference.GRPCInferenceService/ModelMetadata":                                     false,
		"/privacy_sandbox.bidding_auction_servers.inference.InferenceService/RegisterModel": false,
	} {
		if got := IsProbe(m); got != want {
			t.Errorf("IsProbe(%s) = %v, want %v", m, got, want)
		}
	}
}

func TestMethodMessageLimit(t *testing.T) {
	s := New(Options{MaxMessageBytes: 1 << 20, MethodMaxMessageBytes: map[string]int{"/grpc.health.v1.Health/Check": 8}})
	c := healthpb.NewHealthClient(dial(t, s))
	if _, err := c.Check(t.Context(), &healthpb.HealthCheckRequest{Service: "a-service-name-past-8-bytes"}); status.Code(err) != codes.ResourceExhausted {
		t.Errorf("a message over the method's limit: %v, want RESOURCE_EXHAUSTED", err)
	}
	if _, err := c.Check(t.Context(), &healthpb.HealthCheckRequest{}); err != nil {
		t.Errorf("a message within the method's limit: %v", err)
	}
	// A method above the default limit raises what gRPC reads.
	if l := newLimits(10, map[string]int{"/a/B": 100}); l.recvMax != 100 || l.check("/a/C", &healthpb.HealthCheckRequest{Service: "eleven char"}) == nil {
		t.Errorf("limits %+v: the default limit is not enforced below the raised one", l)
	}
}

func TestRequireClientCertBeforeTheMessage(t *testing.T) {
	dir := t.TempDir()
	ca := certtest.NewCA(t, "ca")
	certFile, keyFile := ca.Server(t, "grove").Write(t, dir, "server")
	caFile := ca.WriteCA(t, dir)
	r, err := tlsconf.New(tlsconf.Files{CertFile: certFile, KeyFile: keyFile, ClientCAFile: caFile, ClientAuth: tlsconf.ClientAuthRequire})
	if err != nil {
		t.Fatal(err)
	}
	s := New(Options{TLS: r.ServerConfig("h2"), RequireClientCert: true})
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go func() { _ = s.Serve(ln) }()
	t.Cleanup(s.Stop)
	conn := func(certs ...tls.Certificate) *grpc.ClientConn {
		c, err := grpc.NewClient(ln.Addr().String(), grpc.WithTransportCredentials(credentials.NewTLS(
			&tls.Config{RootCAs: ca.Pool(), ServerName: "localhost", Certificates: certs})))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = c.Close() })
		return c
	}
	now := time.Now()
	anon, mtls := conn(), conn(ca.Client(t, "bidder", now.Add(-time.Hour), now.Add(time.Hour)).TLS(t))
	if _, err := healthpb.NewHealthClient(anon).Check(t.Context(), &healthpb.HealthCheckRequest{}); err != nil {
		t.Errorf("health without a certificate: %v", err)
	}
	call := func(c *grpc.ClientConn) error {
		return c.Invoke(t.Context(), "/grove.test.Service/Method", &healthpb.HealthCheckRequest{}, &healthpb.HealthCheckResponse{})
	}
	if err := call(anon); status.Code(err) != codes.Unauthenticated {
		t.Errorf("a method without a certificate: %v, want UNAUTHENTICATED", err)
	}
	if err := call(mtls); status.Code(err) != codes.Unimplemented {
		t.Errorf("a method with a certificate: %v, want UNIMPLEMENTED (it passed the check)", err)
	}
}
