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
	"maps"
	"net"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc/codes"

	"github.com/groveml/grove/api/oip/oippb"
	"github.com/groveml/grove/cluster/etcdtest"
	"github.com/groveml/grove/cluster/forward"
	"github.com/groveml/grove/internal/certtest"
	"github.com/groveml/grove/routing"
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
// certificates made here forward requests to each other, a request of
// several MiB among them with small ones beside it, and the cluster port
// refuses a caller without a client certificate, with one of another CA,
// and with one of the cluster's CA that names no member.
//
// Budget: 30 s.
func TestClusterPeerMTLS(t *testing.T) {
	t.Parallel()
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
	// Placed and ready as both nodes see it: the caller routes by its own
	// copy of the table.
	nodes["tls-a"].waitFor(model.path+" placed and ready on both nodes' tables", 60*time.Second, func() bool {
		var docs []clusterDoc
		for _, name := range []string{"tls-a", "tls-b"} {
			d, err := clusterOver(hc, nodes[name])
			if err != nil || d.settled([]clusterModel{model}, []string{"tls-a", "tls-b"}) != nil {
				return false
			}
			docs = append(docs, d)
		}
		if !maps.EqualFunc(docs[0].Placement, docs[1].Placement, slices.Equal) {
			return false
		}
		doc = docs[0]
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

	t.Run("a request of several MiB forwarded beside small ones", func(t *testing.T) {
		forwardLarge(t, exp, model, nodes[caller], hc, &tls.Config{RootCAs: ca.Pool(), ServerName: "localhost"})
	})

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

// forwardLarge sends caller, which does not hold model, a request of
// 6 MiB over OIP gRPC (raw contents: expected.json's input rows 12,288
// times over, 24,576 rows) while small B&A requests for the same model go
// to it over HTTP (hc) back to back: the large one must come back whole
// and right, row by row, and every small one right, some of them made and
// answered while the large one was on its way (they share the peer
// connection it travels on, in chunks).
func forwardLarge(t *testing.T, exp map[string]expectedModel, model clusterModel, caller *grove, hc *http.Client, tc *tls.Config) {
	x, y := exp[model.input].Inputs[0], exp[model.input].Outputs[0]
	const copies = 12288
	var data []float64
	for range copies {
		data = append(data, x.Data...)
	}
	rows := x.Shape[0] * copies
	req := &oippb.ModelInferRequest{ModelName: routing.NameModel(model.path).Name, Id: "large",
		Inputs:           []*oippb.ModelInferRequest_InferInputTensor{{Name: x.Name, Datatype: "FP32", Shape: []int64{rows, x.Shape[1]}}},
		RawInputContents: [][]byte{rawLE("FP32", data)}}
	if n := len(req.RawInputContents[0]); n < 6<<20 {
		t.Fatalf("a request of %d bytes of tensor data, want 6 MiB", n)
	}
	infer := oippb.NewGRPCInferenceServiceClient(dialTLS(t, caller, tc))

	type answered struct{ start, end time.Time }
	var (
		mu     sync.Mutex
		small  []answered
		failed []string
	)
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for range 2 {
		wg.Go(func() {
			for {
				select {
				case <-stop:
					return
				default:
				}
				start := time.Now()
				resp, err := hc.Post(caller.url+"/v1/inference", "application/json", strings.NewReader(batchJSON(requestFor(exp, model.input, model.path))))
				var ba baResponse
				if err == nil {
					body, _ := io.ReadAll(resp.Body)
					resp.Body.Close()
					if err = json.Unmarshal(body, &ba); err == nil && (resp.StatusCode != http.StatusOK || !matches(exp, model.input, ba, 0)) {
						err = fmt.Errorf("status %d: %s", resp.StatusCode, body)
					}
				}
				mu.Lock()
				if err != nil {
					failed = append(failed, err.Error())
				} else {
					small = append(small, answered{start, time.Now()})
				}
				mu.Unlock()
			}
		})
	}
	time.Sleep(100 * time.Millisecond) // the small ones run before the large one
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	start := time.Now()
	resp, err := infer.ModelInfer(ctx, req)
	end := time.Now()
	time.Sleep(100 * time.Millisecond) // and after it
	close(stop)
	wg.Wait()
	if err != nil {
		t.Fatalf("the 6 MiB request: %v", err)
	}
	if len(resp.GetRawOutputContents()) != 1 {
		t.Fatalf("the 6 MiB request's answer: %d raw outputs, want 1", len(resp.GetRawOutputContents()))
	}
	got := fromRawLE(t, "FP32", resp.GetRawOutputContents()[0])
	if int64(len(got)) != rows {
		t.Fatalf("the 6 MiB request's answer has %d rows, want %d", len(got), rows)
	}
	for i, v := range got {
		if want := y.Data[i%len(y.Data)]; v-want > 1e-5 || want-v > 1e-5 {
			t.Fatalf("row %d of the 6 MiB request's answer is %v, want %v", i, v, want)
		}
	}
	mu.Lock()
	defer mu.Unlock()
	if len(failed) > 0 {
		t.Fatalf("%d small requests failed beside the large one, first: %s", len(failed), failed[0])
	}
	during := 0
	for _, a := range small {
		if a.start.After(start) && a.end.Before(end) {
			during++
		}
	}
	t.Logf("the 6 MiB request (%d rows) answered right in %v; %d small requests answered right, %d of them made and answered meanwhile",
		rows, end.Sub(start).Round(time.Millisecond), len(small), during)
	if during == 0 {
		t.Fatal("no small request was made and answered while the large one was on its way")
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
