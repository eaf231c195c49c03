package audit

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"net/http/httptest"
	"testing"
	"time"

	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/peer"

	"github.com/groveml/grove/auth"
	"github.com/groveml/grove/internal/certtest"
)

// TestBeginNamesTheVerifiedClientCertificateWithoutIdentity checks that a
// write over a connection whose client certificate was verified (tls.client_auth
// require, no auth section: no identity in the context) is recorded under
// the certificate's name, not as anonymous; an identity still wins.
func TestBeginNamesTheVerifiedClientCertificateWithoutIdentity(t *testing.T) {
	ca := certtest.NewCA(t, "audit CA")
	pair := ca.Client(t, "release-bot", time.Now().Add(-time.Hour), time.Now().Add(time.Hour)).TLS(t)
	leaf, err := x509.ParseCertificate(pair.Certificate[0])
	if err != nil {
		t.Fatal(err)
	}
	verified := tls.ConnectionState{PeerCertificates: []*x509.Certificate{leaf}, VerifiedChains: [][]*x509.Certificate{{leaf, ca.Cert}}}
	unverified := tls.ConnectionState{PeerCertificates: []*x509.Certificate{leaf}}

	r := httptest.NewRequest("POST", "https://grove/servable", nil)
	r.TLS = &verified
	grpcCtx := peer.NewContext(context.Background(), &peer.Peer{AuthInfo: credentials.TLSInfo{State: verified}})
	r2 := httptest.NewRequest("POST", "https://grove/servable", nil)
	r2.TLS = &unverified
	tokenCtx := auth.NewContext(context.Background(), auth.Identity{Name: "ops", Method: "token"})

	for _, c := range []struct {
		name           string
		ctx            context.Context
		op             Op
		wantWho, wantM string
	}{
		{"http verified certificate", context.Background(), HTTPOp(r, "manage", "POST /servable"), "release-bot", "certificate"},
		{"grpc verified certificate", grpcCtx, GRPCOp(grpcCtx, "sidecar", "m/"), "release-bot", "certificate"},
		{"unverified certificate", context.Background(), HTTPOp(r2, "manage", "POST /servable"), Anonymous, "none"},
		{"identity wins", tokenCtx, HTTPOp(r, "manage", "POST /servable"), "ops", "token"},
	} {
		t.Run(c.name, func(t *testing.T) {
			var got Entry
			ctx, w := Begin(c.ctx, recorderFunc(func(e Entry) { got = e }), c.op)
			w.Finish(ctx, "200", nil)
			if got.Who != c.wantWho || got.Auth != c.wantM {
				t.Errorf("who %q auth %q, want %q %q", got.Who, got.Auth, c.wantWho, c.wantM)
			}
		})
	}
}
