package node_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http/httptest"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/protobuf/proto"

	"github.com/groveml/grove/actors"
	"github.com/groveml/grove/api/oip"
	"github.com/groveml/grove/api/oip/oippb"
	"github.com/groveml/grove/cluster/etcdtest"
	"github.com/groveml/grove/cluster/placement"
	"github.com/groveml/grove/servables"
	"github.com/groveml/grove/transport/grpcserver"
	"github.com/groveml/grove/transport/httpserver"
)

// Models ready only on another node answer like local ones: their OIP
// metadata, configuration, readiness and repository index; a contract's
// shadow copy on another node is compared with the caller's answer where
// the caller called; and a forwarded request counts in the per-model
// metrics of the node that ran it only.

// oipNode is a node's OIP front ends: REST in process, gRPC on loopback.
type oipNode struct {
	n    *testNode
	rest *httpserver.Server
	grpc oippb.GRPCInferenceServiceClient
}

// serveOIP serves the OIP APIs over n's actors.
func serveOIP(t *testing.T, n *testNode) *oipNode {
	t.Helper()
	h := httpserver.New(httpserver.Options{})
	gs := grpcserver.New(grpcserver.Options{})
	oip.Register(h, gs, n.sys, "test", nil)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go func() { _ = gs.Serve(ln) }()
	t.Cleanup(gs.Stop)
	cc, err := grpc.NewClient(ln.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cc.Close() })
	return &oipNode{n: n, rest: h, grpc: oippb.NewGRPCInferenceServiceClient(cc)}
}

// get answers a REST request: its status and body.
func (o *oipNode) get(method, path, body string) (int, string) {
	rec := httptest.NewRecorder()
	o.rest.Handler().ServeHTTP(rec, httptest.NewRequest(method, path, strings.NewReader(body)))
	b, _ := io.ReadAll(rec.Result().Body)
	return rec.Code, string(b)
}

// newVersionedBucket writes a/ and b/ (faulty models adding 1 and 2) and
// a versioned entry v/ with versions 1 and 2 (adding 11 and 12) into a
// file bucket, and returns its URL and the function that writes the
// config listing them.
func newVersionedBucket(t *testing.T) (string, func()) {
	t.Helper()
	dir := t.TempDir()
	for path, add := range map[string]float64{"a/": 1, "b/": 2, "v/1/": 11, "v/2/": 12} {
		if err := os.MkdirAll(filepath.Join(dir, path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, path, "model.faulty"), fmt.Appendf(nil, `{"add": %v}`, add), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write := func(cfg string) {
		if err := os.WriteFile(filepath.Join(dir, "model_config.json"), []byte(cfg), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write(`{"model_metadata": []}`)
	return "file://" + dir, func() {
		write(`{"model_metadata": [{"model_path": "a/", "replicas": 2}, {"model_path": "b/", "max_batch_rows": 8, "max_queue_delay_us": 300},
			{"model_path": "v/", "version_policy": {"specific": {"versions": [1, 2]}}}]}`)
	}
}

// TestClusterRemoteModelMetadata: every node answers the OIP metadata,
// readiness, configuration and repository index of every model, over
// REST and gRPC, as the node that holds it does, for a model, a versioned
// entry and each of its versions.
func TestClusterRemoteModelMetadata(t *testing.T) {
	srv := etcdtest.Start(t)
	bucketURL, configure := newVersionedBucket(t)
	nodes := []*testNode{startNode(t, srv.Addr, bucketURL, "n1", nil), startNode(t, srv.Addr, bucketURL, "n2", nil)}
	configureWhenJoined(t, nodes, configure)
	entries := map[string][]string{"a/": {"a/"}, "b/": {"b/"}, "v/": {"v/1/", "v/2/"}}
	eventually(t, "every model ready on one node and known to the other", func() error {
		for _, n := range nodes {
			if got, want := n.sys.ModelPaths(), []string{"a/", "b/", "v/", "v/1/", "v/2/"}; !slices.Equal(got, want) {
				return fmt.Errorf("%s serves %v, want %v", n.name, got, want)
			}
		}
		return nil
	})
	holder := func(entry string) *testNode {
		for _, n := range nodes {
			if slices.Contains(held(n), entries[entry][0]) {
				return n
			}
		}
		t.Fatalf("no node holds %s", entry)
		return nil
	}
	fronts := []*oipNode{serveOIP(t, nodes[0]), serveOIP(t, nodes[1])}
	ctx := context.Background()
	for _, entry := range []string{"a/", "b/", "v/"} {
		h := holder(entry)
		var other *testNode
		for _, n := range nodes {
			if n != h {
				other = n
			}
		}
		if slices.Contains(held(other), entries[entry][0]) {
			t.Fatalf("%s is on both nodes: %v", entry, held(other))
		}
		name := strings.TrimSuffix(entry, "/")
		rest := []string{"/v2/models/" + name, "/v2/models/" + name + "/ready", "/v2/models/" + name + "/config"}
		reqs := []proto.Message{&oippb.ModelMetadataRequest{Name: name}, &oippb.ModelReadyRequest{Name: name}, &oippb.ModelConfigRequest{Name: name}}
		if entry == "v/" {
			for _, v := range []string{"1", "2"} {
				rest = append(rest, "/v2/models/v/versions/"+v, "/v2/models/v/versions/"+v+"/ready", "/v2/models/v/versions/"+v+"/config")
				reqs = append(reqs, &oippb.ModelMetadataRequest{Name: name, Version: v}, &oippb.ModelReadyRequest{Name: name, Version: v},
					&oippb.ModelConfigRequest{Name: name, Version: v})
			}
		}
		for _, path := range rest {
			var answers []string
			for _, f := range fronts {
				code, body := f.get("GET", path, "")
				if code != 200 {
					t.Errorf("GET %s on %s (holds %v): %d %s", path, f.n.name, held(f.n), code, body)
				}
				answers = append(answers, body)
			}
			if answers[0] != answers[1] {
				t.Errorf("GET %s: %s answers %s, %s answers %s", path, nodes[0].name, answers[0], nodes[1].name, answers[1])
			}
		}
		for _, req := range reqs {
			var answers []proto.Message
			for _, f := range fronts {
				var resp proto.Message
				var err error
				switch r := req.(type) {
				case *oippb.ModelMetadataRequest:
					resp, err = f.grpc.ModelMetadata(ctx, r)
				case *oippb.ModelReadyRequest:
					var rr *oippb.ModelReadyResponse
					if rr, err = f.grpc.ModelReady(ctx, r); err == nil && !rr.GetReady() {
						err = errors.New("not ready")
					}
					resp = rr
				case *oippb.ModelConfigRequest:
					resp, err = f.grpc.ModelConfig(ctx, r)
				}
				if err != nil {
					t.Errorf("gRPC %T %v on %s (holds %v): %v", req, req, f.n.name, held(f.n), err)
				}
				answers = append(answers, resp)
			}
			if !proto.Equal(answers[0], answers[1]) {
				t.Errorf("gRPC %T %v: %s answers %v, %s answers %v", req, req, nodes[0].name, answers[0], nodes[1].name, answers[1])
			}
		}
	}
	// What the answers say is the holder's own model: a/'s replicas, b/'s
	// serving, v's version policy and versions.
	for _, f := range fronts {
		cfg, err := f.grpc.ModelConfig(ctx, &oippb.ModelConfigRequest{Name: "a"})
		if err != nil || len(cfg.GetConfig().GetInstanceGroup()) != 1 || cfg.GetConfig().GetInstanceGroup()[0].GetCount() != 2 || cfg.GetConfig().GetPlatform() == "" {
			t.Errorf("config of a/ on %s: %v %v", f.n.name, cfg, err)
		}
		vcfg, err := f.grpc.ModelConfig(ctx, &oippb.ModelConfigRequest{Name: "v", Version: "1"})
		if err != nil || !slices.Equal(vcfg.GetConfig().GetVersionPolicy().GetSpecific().GetVersions(), []int64{1, 2}) {
			t.Errorf("config of v on %s: version policy %v %v", f.n.name, vcfg.GetConfig().GetVersionPolicy(), err)
		}
		meta, err := f.grpc.ModelMetadata(ctx, &oippb.ModelMetadataRequest{Name: "v"})
		if err != nil || !slices.Equal(meta.GetVersions(), []string{"2", "1"}) || len(meta.GetInputs()) != 1 || meta.GetInputs()[0].GetName() != "x" {
			t.Errorf("metadata of v on %s: %v %v", f.n.name, meta, err)
		}
		wantMeta, wantSum, _ := holder("b/").sys.ModelMetadata("b/")
		if m, sum, ok := f.n.sys.ModelMetadata("b/"); !ok || m.Runtime != "faulty" || sum != wantSum || sum == "" || !reflect.DeepEqual(m, wantMeta) {
			t.Errorf("metadata of b/ on %s: %+v %q %v, want the holder's %+v %q", f.n.name, m, sum, ok, wantMeta, wantSum)
		}
		want, _ := holder("b/").sys.ModelServing("b/")
		if sv, ok := f.n.sys.ModelServing("b/"); !ok || sv != want {
			t.Errorf("serving of b/ on %s: %+v %v, want the holder's %+v", f.n.name, sv, ok, want)
		}
		if p, ok := f.n.sys.NewestVersion("v/"); !ok || p != "v/2/" {
			t.Errorf("newest version of v/ on %s: %q %v", f.n.name, p, ok)
		}
	}
	// /v1/cluster shows each member's descriptions.
	for _, m := range nodes[0].agent.Status().Members {
		for _, h := range m.Models {
			if h.State != placement.Ready {
				continue
			}
			if info, ok := m.ModelInfo[h.Path]; !ok || info.Runtime != "faulty" || info.Checksum == "" {
				t.Errorf("member %s: no description of %s: %+v", m.Name, h.Path, m.ModelInfo)
			}
		}
	}
	// The repository index lists the same models, READY, on both nodes.
	var indexes [][]string
	for _, f := range fronts {
		resp, err := f.grpc.RepositoryIndex(ctx, &oippb.RepositoryIndexRequest{Ready: true})
		if err != nil {
			t.Fatal(err)
		}
		var listed []string
		for _, m := range resp.GetModels() {
			listed = append(listed, m.GetName()+"@"+m.GetVersion()+"="+m.GetState())
		}
		slices.Sort(listed)
		indexes = append(indexes, listed)
		code, body := f.get("POST", "/v2/repository/index", `{"ready": true}`)
		if code != 200 || strings.Count(body, `"READY"`) != 4 {
			t.Errorf("REST index on %s: %d %s", f.n.name, code, body)
		}
	}
	if want := []string{"a@1=READY", "b@1=READY", "v@1=READY", "v@2=READY"}; !slices.Equal(indexes[0], want) || !slices.Equal(indexes[1], want) {
		t.Errorf("repository indexes %v, want %v on both nodes", indexes, want)
	}
}

// TestClusterRemoteShadowCompared: a contract's shadow challenger on
// another node is compared with the champion's answer on the node the
// caller called, as a local one is (log event, windows, stats), and a
// challenger local to a node whose champion is remote too.
func TestClusterRemoteShadowCompared(t *testing.T) {
	champ, chall := startShadowPair(t, nil)
	nodes := []*testNode{champ, chall}
	for _, caller := range []*testNode{champ, chall} {
		t.Run("called "+map[bool]string{true: "champion's node", false: "challenger's node"}[caller == champ], func(t *testing.T) {
			compared := func() []*actors.ShadowComparison {
				caller.mu.Lock()
				defer caller.mu.Unlock()
				return slices.Clone(caller.compared)
			}
			before := len(compared())
			id := "cmp-" + caller.name
			res, rv, err := caller.sys.Score(context.Background(), "ads/pctr/1", "", actors.Request{API: "test", RequestID: id, Inputs: []servables.Tensor{mustScalar(4)}})
			if err != nil || rv != "v1" {
				t.Fatalf("score: %v, release %q", err, rv)
			}
			if err := check(res, "a/", 4); err != nil {
				t.Fatal(err)
			}
			eventually(t, "the shadow execution compared and logged", func() error {
				if len(compared()) == before {
					return errors.New("no compared shadow execution logged")
				}
				return nil
			})
			c := compared()[before]
			// a/ adds 1 and b/ adds 2: one value, 1 apart.
			if c.RequestID != id || c.Release != "v1" || c.ChampionFailed || len(c.Outputs) != 1 || c.Outputs[0].MaxAbsDiff != 1 || c.Outputs[0].Elements != 1 {
				t.Fatalf("comparison %+v", c)
			}
			stats, err := caller.sys.ContractStats("ads/pctr/1")
			if err != nil {
				t.Fatal(err)
			}
			for _, st := range stats {
				if st.Release != "v2" {
					continue
				}
				if st.Comparison == nil || st.Comparison.SinceStart.Executions != 1 || st.Comparison.SinceStart.Errors != 0 || st.LoadedAt == nil {
					t.Fatalf("challenger's stats on %s: %+v %+v", caller.name, st, st.Comparison)
				}
			}
			if metric(t, caller.reg, "grove_shadow_compare_executions", map[string]string{"release": "v2", "window": "since_start"}) != 1 {
				t.Errorf("grove_shadow_compare_executions on %s is not 1", caller.name)
			}
		})
	}
	for _, n := range nodes {
		n.mu.Lock()
		if len(n.compared) != 1 {
			t.Errorf("%s logged %d compared shadow executions, want 1 (its own caller's)", n.name, len(n.compared))
		}
		n.mu.Unlock()
	}

	// A copy the challenger fails (b/ fails on 102; a/ answers it) counts
	// as its error, in the same windows.
	if _, _, err := champ.sys.Score(context.Background(), "ads/pctr/1", "", actors.Request{API: "test", RequestID: "fails", Inputs: []servables.Tensor{mustScalar(102)}}); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the failed shadow execution compared", func() error {
		champ.mu.Lock()
		defer champ.mu.Unlock()
		if len(champ.compared) != 2 {
			return fmt.Errorf("%d compared", len(champ.compared))
		}
		if c := champ.compared[1]; c.RequestID != "fails" || c.ChampionFailed || len(c.Outputs) != 0 {
			return fmt.Errorf("comparison of a failed copy: %+v", c)
		}
		return nil
	})
	// A copy that reaches no node (the challenger's node stops serving its
	// peers; its record still says ready) says nothing of the challenger:
	// logged, not compared.
	chall.fs.Stop()
	shadows := champ.shadow.Load()
	if _, _, err := champ.sys.Score(context.Background(), "ads/pctr/1", "", actors.Request{API: "test", RequestID: "gone", Inputs: []servables.Tensor{mustScalar(4)}}); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the unanswered shadow copy logged", func() error {
		if champ.shadow.Load() == shadows {
			return errors.New("not logged")
		}
		return nil
	})
	champ.mu.Lock()
	n := len(champ.compared)
	champ.mu.Unlock()
	stats, err := champ.sys.ContractStats("ads/pctr/1")
	if err != nil {
		t.Fatal(err)
	}
	for _, st := range stats {
		if st.Release == "v2" && (n != 2 || st.Comparison == nil || st.Comparison.SinceStart.Executions != 2 || st.Comparison.SinceStart.Errors != 1) {
			t.Errorf("after a copy no node answered: %d compared, stats %+v", n, st.Comparison)
		}
	}
}

// TestClusterForwardedCountedOnce: a request forwarded to another node
// counts in the per-model metrics of the serving node only (user requests
// under the caller's API, shadow copies under API-shadow), in the
// forwarding node's grove_cluster_forwarded_total and
// grove_cluster_forward_duration_seconds, and in the prediction log of
// the node called only.
func TestClusterForwardedCountedOnce(t *testing.T) {
	caller, server := startShadowPair(t, nil)
	type figures struct{ requests, latency, requestsHere, latencyHere, shadows, forwarded, forwardTime, forwardShadow, logged, logShadow, served float64 }
	read := func() figures {
		return figures{
			requests:      metric(t, server.reg, "grove_model_requests_total", map[string]string{"api": "count", "model": "b/", "outcome": "ok"}),
			latency:       metric(t, server.reg, "grove_model_request_duration_seconds", map[string]string{"api": "count", "model": "b/"}),
			shadows:       metric(t, server.reg, "grove_model_requests_total", map[string]string{"api": "count-shadow", "model": "b/", "outcome": "ok"}),
			requestsHere:  metric(t, caller.reg, "grove_model_requests_total", map[string]string{"model": "b/"}),
			latencyHere:   metric(t, caller.reg, "grove_model_request_duration_seconds", map[string]string{"model": "b/"}),
			forwarded:     metric(t, caller.reg, "grove_cluster_forwarded_total", map[string]string{"model": "b/", "result": "ok"}),
			forwardTime:   metric(t, caller.reg, "grove_cluster_forward_duration_seconds", map[string]string{"api": "count"}),
			forwardShadow: metric(t, caller.reg, "grove_cluster_forward_duration_seconds", map[string]string{"api": "count-shadow"}),
			logged:        float64(caller.logged.Load()),
			logShadow:     float64(caller.shadow.Load()),
			served:        float64(server.logged.Load() + server.shadow.Load()),
		}
	}
	before := read()
	x := mustScalar(3)
	res, err := caller.sys.Infer(context.Background(), []actors.Request{{API: "count", ModelPath: "b/", Inputs: []servables.Tensor{x}, RequestID: "c1"}})
	if err != nil || check(res[0], "b/", 3) != nil {
		t.Fatalf("forwarded request: %v %+v", err, res)
	}
	if _, _, err := caller.sys.Score(context.Background(), "ads/pctr/1", "", actors.Request{API: "count", RequestID: "c2", Inputs: []servables.Tensor{x}}); err != nil {
		t.Fatal(err)
	}
	want := before
	want.requests++
	want.latency++
	want.shadows++
	want.forwarded += 2 // the request and the shadow copy
	want.forwardTime++
	want.forwardShadow++
	want.logged += 2 // the forwarded request and the contract's (served by a/ here)
	want.logShadow++
	eventually(t, "the figures after a forwarded request and a forwarded shadow copy", func() error {
		if got := read(); got != want {
			return fmt.Errorf("got %+v\nwant %+v", got, want)
		}
		return nil
	})
}

// TestClusterForwardedPastDeadlineCountedOnce: items of a batch forwarded
// to another node whose answer comes after the caller's deadline are
// answered DeadlineExceeded and counted in the forwarding node's
// grove_cluster_forwarded_total, not also in its grove_model_requests_total
// (the serving node counts them there), as a single forwarded request is.
func TestClusterForwardedPastDeadlineCountedOnce(t *testing.T) {
	srv := etcdtest.Start(t)
	dir := t.TempDir()
	if err := os.MkdirAll(filepath.Join(dir, "slow"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "slow", "model.faulty"), []byte(`{"delay_ms": 400}`), 0o644); err != nil {
		t.Fatal(err)
	}
	writeConfig := func(cfg string) {
		if err := os.WriteFile(filepath.Join(dir, "model_config.json"), []byte(cfg), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	writeConfig(`{"model_metadata": []}`)
	nodes := []*testNode{startNode(t, srv.Addr, "file://"+dir, "n1", nil), startNode(t, srv.Addr, "file://"+dir, "n2", nil)}
	configureWhenJoined(t, nodes, func() { writeConfig(`{"model_metadata": [{"model_path": "slow/"}]}`) })
	var caller *testNode
	eventually(t, "slow/ ready on one node and seen by the other", func() error {
		for i, n := range nodes {
			if other := nodes[1-i]; slices.Contains(held(other), "slow/") && !slices.Contains(held(n), "slow/") && n.agent.Serves("slow/") {
				caller = n
				return nil
			}
		}
		return fmt.Errorf("not yet: n1 holds %v and sees it served: %t; n2 holds %v and sees it served: %t",
			held(nodes[0]), nodes[0].agent.Serves("slow/"), held(nodes[1]), nodes[1].agent.Serves("slow/"))
	})
	sum := func(reg *prometheus.Registry, name string) float64 {
		fams, err := reg.Gather()
		if err != nil {
			t.Fatal(err)
		}
		var n float64
		for _, f := range fams {
			if f.GetName() != name {
				continue
			}
			for _, m := range f.GetMetric() {
				for _, lp := range m.GetLabel() {
					if lp.GetName() == "model" && lp.GetValue() == "slow/" {
						n += m.GetCounter().GetValue()
					}
				}
			}
		}
		return n
	}
	x := mustScalar(1)
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	res, err := caller.sys.Infer(ctx, []actors.Request{{API: "late", ModelPath: "slow/", Inputs: []servables.Tensor{x}, RequestID: "l1"},
		{API: "late", ModelPath: "slow/", Inputs: []servables.Tensor{x}, RequestID: "l2"}})
	if err != nil {
		t.Fatal(err)
	}
	for i, r := range res {
		if servables.KindOf(r.Err) != servables.DeadlineExceeded {
			t.Fatalf("item %d: %v, want DeadlineExceeded", i, r.Err)
		}
	}
	eventually(t, "both forwarded items counted in the hop's metric", func() error {
		if n := sum(caller.reg, "grove_cluster_forwarded_total"); n != 2 {
			return fmt.Errorf("grove_cluster_forwarded_total for slow/: %v, want 2", n)
		}
		return nil
	})
	if n := sum(caller.reg, "grove_model_requests_total"); n != 0 {
		t.Errorf("the forwarding node counted %v forwarded items in grove_model_requests_total, want 0 (the serving node counts them)", n)
	}
}
