package it

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/codes"

	"github.com/groveml/grove/cluster/etcdtest"
	"github.com/groveml/grove/cluster/forward"
	"github.com/groveml/grove/internal/certtest"
	"github.com/groveml/grove/servables"
)

// nodeLeaf signs a cluster node's certificate: its name as the first DNS
// SAN, localhost and 127.0.0.1 for its address, server and client auth.
func nodeLeaf(t *testing.T, ca *certtest.CA, name string) certtest.Leaf {
	return ca.Sign(t, &x509.Certificate{Subject: pkix.Name{CommonName: name}, DNSNames: []string{name, "localhost"},
		IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1)}, NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour),
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth}})
}

// startMTLSNode runs grove node name over TLS, its peers on mTLS with
// certificates of ca, and waits until it answers /readyz over HTTPS.
func startMTLSNode(t *testing.T, b *dirBucket, etcdAddr string, ca *certtest.CA, caFile, name string, hc *http.Client) *grove {
	t.Helper()
	dir := t.TempDir()
	cert, key := nodeLeaf(t, ca, name).Write(t, dir, name)
	addr, grpcAddr := freeAddr(t), freeAddr(t)
	g := runTLSGrove(t, name, addr, grpcAddr, []string{"serve", "--bucket", b.URL(), "--http", addr, "--grpc", grpcAddr, "--poll-interval", "1s",
		"--cache-dir", t.TempDir(), "--tls-cert", cert, "--tls-key", key, "--tls-client-ca", caFile, "--tls-client-auth", "request",
		"--cluster-etcd-endpoints", etcdAddr, "--cluster-node-name", name, "--cluster-advertise", freeAddr(t),
		"--cluster-lease-ttl", clusterLeaseTTL.String(), "--memory-budget-bytes", strconv.Itoa(1 << 30),
		"--drain-timeout", clusterDrainTimeout.String()})
	g.waitFor(name+" ready over TLS", 60*time.Second, func() bool {
		code, _, _ := getWith(hc, g.url+"/readyz")
		return code == http.StatusOK
	})
	return g
}

// clusterOver is GET /v1/cluster with the client hc.
func clusterOver(hc *http.Client, g *grove) (clusterDoc, error) {
	var d clusterDoc
	code, body, err := getWith(hc, g.url+"/v1/cluster")
	if err != nil || code != http.StatusOK {
		return d, fmt.Errorf("GET /v1/cluster: %d %q %v", code, body, err)
	}
	return d, json.Unmarshal([]byte(body), &d)
}

// TestClusterPeerMTLS: real grove nodes whose peers use mTLS with
// certificates made here forward requests to each other, and the
// cluster port refuses a caller without a client certificate, with one
// of another CA, and with one of the cluster's CA that names no member.
func TestClusterPeerMTLS(t *testing.T) {
	exp := loadExpected(t)
	ca := certtest.NewCA(t, "grove cluster CA")
	caDir := t.TempDir()
	caFile := ca.WriteCA(t, caDir)
	hc := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: ca.Pool(), ServerName: "localhost"}}}
	etcd := etcdtest.Start(t)
	b := newDirBucket(t)
	putClusterModels(t, b, nil)
	nodes := map[string]*grove{}
	for _, name := range []string{"tls-a", "tls-b"} {
		nodes[name] = startMTLSNode(t, b, etcd.Addr, ca, caFile, name, hc)
	}
	model := clusterModel{"r1/", "pctr_v1/model.pt", "pctr_v1", true, 1}
	var doc clusterDoc
	nodes["tls-a"].waitFor("both members", 30*time.Second, func() bool {
		d, err := clusterOver(hc, nodes["tls-a"])
		return err == nil && len(d.Members) == 2 && d.Controller != ""
	})
	putClusterModels(t, b, []clusterModel{model})
	nodes["tls-a"].waitFor(model.path+" placed and ready", 60*time.Second, func() bool {
		d, err := clusterOver(hc, nodes["tls-a"])
		if err != nil || d.settled([]clusterModel{model}, []string{"tls-a", "tls-b"}) != nil {
			return false
		}
		doc = d
		return true
	})
	holder := doc.Placement[model.path][0]
	caller := "tls-a"
	if holder == caller {
		caller = "tls-b"
	}
	var holderAddr string
	for _, m := range doc.Members {
		if m.Name == holder {
			holderAddr = m.Advertise
		}
	}

	// The node without the model answers it, forwarding over mTLS.
	resp, err := hc.Post(nodes[caller].url+"/v1/inference", "application/json", strings.NewReader(batchJSON(requestFor(exp, model.input, model.path))))
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	var ba baResponse
	if err := json.Unmarshal(body, &ba); err != nil || resp.StatusCode != http.StatusOK || len(ba.Response) != 1 {
		t.Fatalf("%s, %s held by %s: %d %q %v", caller, model.path, holder, resp.StatusCode, body, err)
	}
	checkOutputs(t, exp, model.input, ba, 0)
	t.Logf("%s answered %s, held by %s, over mTLS between the nodes", caller, model.path, holder)

	// Callers of the holder's cluster port.
	in, err := servables.NewTensor("x", servables.Float32, exp[model.input].Inputs[0].Shape)
	if err != nil {
		t.Fatal(err)
	}
	for i, v := range exp[model.input].Inputs[0].Data {
		in.Float32s()[i] = float32(v)
	}
	call := func(cert *certtest.Leaf, roots string) (forward.Answer, error) {
		var get func() *tls.Certificate
		if cert != nil {
			c := cert.TLS(t)
			get = func() *tls.Certificate { return &c }
		}
		tc, err := forward.ClientTLS(roots, get)
		if err != nil {
			t.Fatal(err)
		}
		fc := forward.NewClient(forward.ClientOptions{TLS: tc})
		defer fc.Close()
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		return fc.Forward(ctx, []forward.Peer{{Name: holder, Addr: holderAddr}},
			forward.Request{ModelPath: model.path, Inputs: []servables.Tensor{in}, RequestID: "mtls-it", Priority: forward.User, API: "test"})
	}
	member := nodeLeaf(t, ca, caller)
	if a, err := call(&member, caFile); err != nil || len(a.Outputs) == 0 {
		t.Fatalf("a member's certificate (%s): %+v %v", caller, a, err)
	} else if got, want := a.Outputs[0].Float32s()[0], exp[model.input].Outputs[0].Data[0]; float64(got)-want > 1e-5 || want-float64(got) > 1e-5 {
		t.Errorf("forwarded with a member's certificate: %v, want %v", got, want)
	}
	stranger := nodeLeaf(t, ca, "intruder")
	other := certtest.NewCA(t, "another CA")
	forged := nodeLeaf(t, other, caller)
	for _, c := range []struct {
		name string
		cert *certtest.Leaf
		want []codes.Code
	}{
		{"no client certificate", nil, []codes.Code{codes.Unauthenticated, codes.Unavailable}},
		{"a certificate of another CA naming a member", &forged, []codes.Code{codes.Unauthenticated, codes.Unavailable}},
		{"a certificate of the cluster's CA naming no member", &stranger, []codes.Code{codes.PermissionDenied}},
	} {
		a, err := call(c.cert, caFile)
		var re *forward.RemoteError
		switch {
		case err == nil:
			t.Errorf("%s: served %+v", c.name, a)
		case !errors.As(err, &re):
			t.Errorf("%s: %v, want the peer's refusal", c.name, err)
		case !containsCode(c.want, re.Code):
			t.Errorf("%s: %v (code %v), want one of %v", c.name, err, re.Code, c.want)
		default:
			t.Logf("%s: refused, %v: %s", c.name, re.Code, re.Message)
		}
	}
}

func containsCode(cs []codes.Code, c codes.Code) bool {
	for _, x := range cs {
		if x == c {
			return true
		}
	}
	return false
}
