package main

import (
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/groveml/grove/internal/certtest"
)

// TestCheckNodeCertificate: a cluster node whose certificate its peers
// would refuse (named otherwise than the node, or without client auth)
// does not start, and the error says what to change.
func TestCheckNodeCertificate(t *testing.T) {
	ca := certtest.NewCA(t, "cluster CA")
	leaf := func(cn string, dns []string, usages ...x509.ExtKeyUsage) *tls.Certificate {
		c := ca.Sign(t, &x509.Certificate{Subject: pkix.Name{CommonName: cn}, DNSNames: dns,
			NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour), ExtKeyUsage: usages}).TLS(t)
		return &c
	}
	both := []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth}
	for _, tc := range []struct {
		name string
		cert *tls.Certificate
		node string
		want string // in the error; "" for none
	}{
		{"first DNS SAN is the node", leaf("x", []string{"n1", "localhost"}, both...), "n1", ""},
		{"CN when no SAN", leaf("n1", nil, both...), "n1", ""},
		{"no extended key usage: any", leaf("n1", []string{"n1"}), "n1", ""},
		{"another first DNS SAN", leaf("n1", []string{"localhost", "n1"}, both...), "n1", `names "localhost"`},
		{"host name default differs", leaf("grove-0", []string{"grove-0"}, both...), "build-host", `set cluster.node_name (--cluster-node-name) to "grove-0"`},
		{"server auth only", leaf("n1", []string{"n1"}, x509.ExtKeyUsageServerAuth), "n1", "client auth"},
		{"no certificate", nil, "n1", "tls.cert_file"},
	} {
		err := checkNodeCertificate(tc.cert, tc.node)
		switch {
		case tc.want == "" && err != nil:
			t.Errorf("%s: %v", tc.name, err)
		case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
			t.Errorf("%s: error %v, want one saying %q", tc.name, err, tc.want)
		}
	}
}

// TestPeerListenerOfALoopbackAdvertiseStaysOnLoopback: a node advertising
// a loopback address, localhost included (conf.IsLoopback's), listens for
// its peers on loopback only, not on every interface.
func TestPeerListenerOfALoopbackAdvertiseStaysOnLoopback(t *testing.T) {
	for _, advertise := range []string{"127.0.0.1:0", "localhost:0", "[::1]:0"} {
		ln, err := net.Listen("tcp", listenAddr(advertise))
		if err != nil {
			if strings.HasPrefix(advertise, "[::1]") {
				continue // no IPv6 loopback here
			}
			t.Fatalf("%s: %v", advertise, err)
		}
		addr := ln.Addr().(*net.TCPAddr)
		ln.Close()
		if !addr.IP.IsLoopback() {
			t.Errorf("advertise %s: peers' listener on %s, want a loopback address", advertise, addr)
		}
	}
	if got := listenAddr("grove-0.grove-peers.grove.svc.cluster.local:7443"); got != ":7443" {
		t.Errorf("a pod's DNS name: listening on %q, want every interface (:7443)", got)
	}
}
