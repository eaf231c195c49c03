package node_test

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	clientv3 "go.etcd.io/etcd/client/v3"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"
	"google.golang.org/grpc/metadata"

	"github.com/groveml/grove/actors"
	"github.com/groveml/grove/actors/node"
	"github.com/groveml/grove/auth"
	"github.com/groveml/grove/cluster/coord"
	"github.com/groveml/grove/cluster/etcdtest"
	"github.com/groveml/grove/cluster/forward"
	"github.com/groveml/grove/conf/bucket/file"
	"github.com/groveml/grove/internal/certtest"
	"github.com/groveml/grove/servables"
	"github.com/groveml/grove/servables/faulty"
	"github.com/groveml/grove/tracing"
	"github.com/groveml/grove/transport/tlsconf"
)

// The cluster in one process: three actors.Systems, each with its node
// agent on a real etcd and its forward server on loopback, over one file
// bucket of faulty models (each adds its own number to its input, so an
// answer says which model gave it, and fails on 100 + that number).

// models are the test's models and what each adds.
var models = map[string]float64{"a/": 1, "b/": 2, "c/": 3}

// testNode is one node: its actors, agent and forward server.
type testNode struct {
	name   string
	sys    *actors.System
	agent  *node.Agent
	fs     *forward.Server
	fc     *forward.Client
	cli    *coord.Client
	cancel context.CancelFunc
	done   chan error
	reg    *prometheus.Registry
	// view is the agent whose membership n's forward server checks its
	// peers against: n's own, unless a test stands in a view that lags.
	view   atomic.Pointer[node.Agent]
	logged atomic.Int64 // predictions its sink received (served)
	shadow atomic.Int64 // shadow executions its sink received
	// seen records the requests its forward server received.
	mu   sync.Mutex
	seen []seenRequest
	// compared holds the comparisons of the shadow executions its sink
	// received.
	compared []*actors.ShadowComparison
	// shadowParents are the traceparents of the shadow executions its
	// sink received.
	shadowParents []string
}

type seenRequest struct {
	req         forward.ForwardedRequest
	deadline    time.Time
	hasDeadline bool
	// traceparent is the call's traceparent metadata, if any.
	traceparent string
}

func (n *testNode) LogPrediction(req *actors.Request, res *actors.Result, served bool) {
	if served {
		n.logged.Add(1)
		return
	}
	n.mu.Lock()
	if res.Comparison != nil {
		n.compared = append(n.compared, res.Comparison)
	}
	n.shadowParents = append(n.shadowParents, req.TraceParent)
	n.mu.Unlock()
	n.shadow.Add(1)
}

// newBucket writes the models into a file bucket with an empty config,
// and returns its URL and the function that writes the test's config
// (contracts: the config's contracts section, "" for none).
func newBucket(t *testing.T, contracts string) (string, func()) {
	t.Helper()
	dir := t.TempDir()
	var entries []string
	for path, add := range models {
		if err := os.MkdirAll(filepath.Join(dir, path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, path, "model.faulty"), fmt.Appendf(nil, `{"add": %v, "error_on": %v}`, add, 100+add), 0o644); err != nil {
			t.Fatal(err)
		}
		entries = append(entries, fmt.Sprintf(`{"model_path": %q, "eviction_grace_period_in_ms": 500}`, path))
	}
	slices.Sort(entries)
	write := func(cfg string) {
		if err := os.WriteFile(filepath.Join(dir, "model_config.json"), []byte(cfg), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write(`{"model_metadata": []}`)
	return "file://" + dir, func() { write(`{"model_metadata": [` + strings.Join(entries, ",") + `]` + contracts + `}`) }
}

// configureWhenJoined writes the config once every node sees them all
// as members, so that the first placement spreads the models.
func configureWhenJoined(t *testing.T, nodes []*testNode, configure func()) {
	t.Helper()
	eventually(t, "every node a member", func() error {
		for _, n := range nodes {
			if got := len(n.agent.Status().Members); got != len(nodes) {
				return fmt.Errorf("%s sees %d members", n.name, got)
			}
		}
		return nil
	})
	configure()
}

// startNode starts node name of the cluster on etcd at etcdAddr, its
// peers in plaintext, or with mTLS when p is not nil.
func startNode(t *testing.T, etcdAddr, bucketURL, name string, p *pki) *testNode {
	t.Helper()
	return startNodeWith(t, etcdAddr, bucketURL, name, p, nil)
}

// startNodeBudget is startNode with a memory budget of budget bytes.
func startNodeBudget(t *testing.T, etcdAddr, bucketURL, name string, p *pki, budget int64) *testNode {
	t.Helper()
	return startNodeWith(t, etcdAddr, bucketURL, name, p, func(c *node.Config) { c.BudgetBytes = budget })
}

// startNodeWith is startNode with its agent's Config changed by set.
func startNodeWith(t *testing.T, etcdAddr, bucketURL, name string, p *pki, set func(*node.Config)) *testNode {
	t.Helper()
	log := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn})).With("test_node", name)
	b, err := file.Open(bucketURL)
	if err != nil {
		t.Fatal(err)
	}
	cli, err := coord.Dial(context.Background(), coord.Config{Endpoints: []string{etcdAddr}, Prefix: "/t/", Logger: log})
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	n := &testNode{name: name, cli: cli, done: make(chan error, 1), reg: prometheus.NewRegistry()}
	var clientTLS, serverTLS *tls.Config
	if p != nil {
		clientTLS, serverTLS = p.tls(t, name)
	}
	n.fc = forward.NewClient(forward.ClientOptions{Logger: log, TLS: clientTLS})
	cfg := node.Config{Client: cli, Name: name, Advertise: ln.Addr().String(), BudgetBytes: 1 << 30,
		LeaseTTL: 2 * time.Second, MemoryFactor: 2, Bucket: b, Forward: n.fc, UpdateEvery: 50 * time.Millisecond,
		Retry: 100 * time.Millisecond, Logger: log, Registerer: n.reg}
	if set != nil {
		set(&cfg)
	}
	n.agent, err = node.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	n.view.Store(n.agent)
	n.sys, err = actors.Start(actors.Options{Bucket: b, ModelConfigPath: "model_config.json", PollInterval: 200 * time.Millisecond,
		CacheDir: t.TempDir(), MaxModelBytes: 1 << 20, QueueSize: 64, Runtimes: servables.Registry{faulty.Runtime{}},
		Predictions: n, Logger: log, ClusterNode: true, Remote: n.agent, Registerer: n.reg})
	if err != nil {
		t.Fatal(err)
	}
	n.fs, err = forward.NewServer(forward.LocalFunc(func(ctx context.Context, req forward.ForwardedRequest) (forward.Answer, error) {
		d, ok := ctx.Deadline()
		var tp string
		if md, ok := metadata.FromIncomingContext(ctx); ok && len(md.Get(tracing.HeaderName)) > 0 {
			tp = md.Get(tracing.HeaderName)[0] // over gRPC
		} else {
			tp = tracing.TraceParent(trace.SpanContextFromContext(ctx)) // over the framed transport
		}
		n.mu.Lock()
		n.seen = append(n.seen, seenRequest{req: req, deadline: d, hasDeadline: ok, traceparent: tp})
		n.mu.Unlock()
		return n.sys.Predict(ctx, req)
	}), forward.ServerOptions{
		Node:          name,
		Members:       func(name string) bool { return n.view.Load().IsMember(name) },
		ConfirmMember: func(ctx context.Context, name string) (bool, error) { return n.view.Load().ConfirmMember(ctx, name) },
		TLS:           serverTLS, AllowUnauthenticatedPeers: p == nil, Logger: log,
	})
	if err != nil {
		t.Fatal(err)
	}
	go func() { _ = n.fs.Serve(ln) }()
	ctx, cancel := context.WithCancel(context.Background())
	n.cancel = cancel
	go func() { n.done <- n.agent.Run(ctx, n.sys) }()
	t.Cleanup(n.stop)
	return n
}

// stop stops the agent (leaving), the forward server and the actors.
func (n *testNode) stop() {
	if n.cancel == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_ = n.agent.Leave(ctx)
	n.cancel()
	<-n.done
	n.cancel = nil
	n.fs.Stop()
	n.fc.Close()
	_ = n.sys.Stop(ctx)
	_ = n.cli.Close()
}

// infer asks n for path with input v.
func (n *testNode) infer(ctx context.Context, path string, v float32) actors.Result {
	x, err := servables.NewTensor("x", servables.Float32, []int64{1})
	if err != nil {
		panic(err)
	}
	x.Float32s()[0] = v
	res, err := n.sys.Infer(ctx, []actors.Request{{API: "test", ModelPath: path, Inputs: []servables.Tensor{x}, RequestID: "req-" + path}})
	if err != nil {
		return actors.Result{Err: err}
	}
	return res[0]
}

// check reports whether res is path's answer to input v.
func check(res actors.Result, path string, v float32) error {
	if res.Err != nil {
		return res.Err
	}
	if len(res.Outputs) != 1 || res.Outputs[0].Float32s()[0] != v+float32(models[path]) {
		return fmt.Errorf("%s answered %v, want %v", path, res.Outputs, v+float32(models[path]))
	}
	return nil
}

// held lists the configured models n has loaded (any state).
func held(n *testNode) []string {
	var out []string
	for _, m := range n.sys.Status().Models {
		out = append(out, m.Path)
	}
	slices.Sort(out)
	return out
}

// eventually retries f every 50 ms until it returns nil or 30 s pass.
func eventually(t *testing.T, what string, f func() error) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		err := f()
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: %v", what, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// everyModelEverywhere checks that every live node answers every model.
func everyModelEverywhere(nodes []*testNode) error {
	for _, n := range nodes {
		for path := range models {
			if err := check(n.infer(context.Background(), path, 10), path, 10); err != nil {
				return fmt.Errorf("node %s, model %s: %w", n.name, path, err)
			}
		}
	}
	return nil
}

func TestClusterInProcess(t *testing.T) {
	srv := etcdtest.Start(t)
	bucketURL, configure := newBucket(t, "")
	nodes := []*testNode{startNode(t, srv.Addr, bucketURL, "n1", nil), startNode(t, srv.Addr, bucketURL, "n2", nil), startNode(t, srv.Addr, bucketURL, "n3", nil)}

	// Every node answers every model, each loading only its share.
	configureWhenJoined(t, nodes, configure)
	eventually(t, "every model answered by every node", func() error { return everyModelEverywhere(nodes) })
	table := nodes[0].agent.Status().Placement
	total := 0
	for _, n := range nodes {
		share := table.ModelsOn(n.name)
		if got := held(n); !slices.Equal(got, share) {
			t.Errorf("node %s holds %v, its share is %v (table %v)", n.name, got, share, table)
		}
		total += len(share)
	}
	if total != len(models) {
		t.Errorf("the table places %d copies of %d models (nodes: 1 each): %v", total, len(models), table)
	}
	if st := nodes[1].agent.Status(); len(st.Members) != 3 || st.Controller == "" || st.Term == 0 {
		t.Errorf("cluster status: %+v", st)
	}

	// A forwarded request: logged once, by the node called; it carries
	// the deadline and request id and arrives at user priority.
	var caller, server *testNode
	var path string
	for _, n := range nodes {
		for p := range models {
			if !slices.Contains(held(n), p) {
				caller, path = n, p
			}
		}
	}
	for _, n := range nodes {
		if slices.Contains(held(n), path) {
			server = n
		}
	}
	loggedC, loggedS := caller.logged.Load(), server.logged.Load()
	server.mu.Lock()
	server.seen = nil
	server.mu.Unlock()
	ctx, cancel := context.WithTimeout(auth.NewContext(context.Background(), auth.Identity{Method: "none"}), 5*time.Second)
	want, _ := ctx.Deadline()
	if err := check(caller.infer(ctx, path, 5), path, 5); err != nil {
		t.Fatalf("forwarded from %s to %s: %v", caller.name, server.name, err)
	}
	cancel()
	if d := caller.logged.Load() - loggedC; d != 1 {
		t.Errorf("the node called logged %d predictions, want 1", d)
	}
	if d := server.logged.Load() - loggedS; d != 0 {
		t.Errorf("the serving node logged %d forwarded predictions, want 0", d)
	}
	server.mu.Lock()
	seen := slices.Clone(server.seen)
	server.mu.Unlock()
	if len(seen) != 1 {
		t.Fatalf("the serving node received %d forwarded requests, want 1", len(seen))
	}
	s := seen[0]
	if s.req.RequestID != "req-"+path || s.req.Priority != forward.User || s.req.ModelPath != path || s.req.Peer != "" {
		t.Errorf("forwarded request: %+v", s.req)
	}
	// gRPC carries the time left, which the serving side turns back into
	// a deadline: equal give or take the encoding's rounding.
	if d := s.deadline.Sub(want); !s.hasDeadline || d > 10*time.Millisecond || d < -time.Second {
		t.Errorf("forwarded deadline %v (set %v), caller's %v", s.deadline, s.hasDeadline, want)
	}

	// The metrics.
	controllers := 0.0
	for _, n := range nodes {
		if got := metric(t, n.reg, "grove_cluster_members", nil); got != 3 {
			t.Errorf("%s: grove_cluster_members %v, want 3", n.name, got)
		}
		controllers += metric(t, n.reg, "grove_cluster_is_controller", nil)
		if got := metric(t, n.reg, "grove_cluster_memory_free_bytes", nil); !(got > 0 && got <= 1<<30) {
			t.Errorf("%s: grove_cluster_memory_free_bytes %v", n.name, got)
		}
	}
	if controllers != 1 {
		t.Errorf("%v nodes say they are the controller, want 1", controllers)
	}
	if got := metric(t, caller.reg, "grove_cluster_forwarded_total", map[string]string{"model": path, "result": "ok"}); got < 1 {
		t.Errorf("%s: grove_cluster_forwarded_total{model=%q,result=ok} %v", caller.name, path, got)
	}

	// The forwarding node forwards on the caller's goroutine (no router):
	// a request whose deadline has passed is answered DeadlineExceeded in
	// its result, one whose caller went away fails with the caller's
	// context error, as a request served here would.
	past, cancelPast := context.WithDeadline(context.Background(), time.Now().Add(-time.Millisecond))
	defer cancelPast()
	if res, err := caller.sys.Infer(past, []actors.Request{{API: "test", ModelPath: path, Inputs: []servables.Tensor{mustScalar(5)}}}); err != nil ||
		len(res) != 1 || servables.KindOf(res[0].Err) != servables.DeadlineExceeded {
		t.Errorf("a forwarded request past its deadline: %v, %+v; want its result DeadlineExceeded", err, res)
	}
	callerGone, cancelGone := context.WithCancel(context.Background())
	cancelGone()
	if r := caller.infer(callerGone, path, 5); !errors.Is(r.Err, context.Canceled) {
		t.Errorf("a forwarded request whose caller went away: %v, want %v", r.Err, context.Canceled)
	}

	// Never forwarded again: the serving side answers a model it does not
	// hold Unavailable rather than forwarding it, though a peer has it.
	_, err := caller.sys.Predict(context.Background(), forward.ForwardedRequest{Request: forward.Request{ModelPath: path, Inputs: []servables.Tensor{mustScalar(1)},
		Priority: forward.User, Caller: auth.Identity{Method: "none"}}})
	if servables.KindOf(err) != servables.Unavailable {
		t.Errorf("a forwarded request for a model not held here: %v, want Unavailable (never a second hop)", err)
	}

	// A node's agent stops: its models are placed on the others and
	// answered again by every node left.
	gone := server
	gone.stop()
	var left []*testNode
	for _, n := range nodes {
		if n != gone {
			left = append(left, n)
		}
	}
	eventually(t, "every model answered after "+gone.name+" left", func() error {
		if tab := left[0].agent.Status().Placement; slices.Contains(tab[path], gone.name) {
			return fmt.Errorf("%s still placed on %s: %v", path, gone.name, tab)
		}
		return everyModelEverywhere(left)
	})
}

func mustScalar(v float32) servables.Tensor {
	x, err := servables.NewTensor("x", servables.Float32, []int64{1})
	if err != nil {
		panic(err)
	}
	x.Float32s()[0] = v
	return x
}

// pki is a cluster CA with node certificates, as Grove reads them from files.
type pki struct {
	ca     *certtest.CA
	dir    string
	caFile string
}

func newPKI(t *testing.T) *pki {
	p := &pki{ca: certtest.NewCA(t, "grove cluster CA"), dir: t.TempDir()}
	p.caFile = p.ca.WriteCA(t, p.dir)
	return p
}

// tls returns node name's dialing and listening configurations: a
// certificate for 127.0.0.1 named name, for server and client auth.
func (p *pki) tls(t *testing.T, name string) (client, server *tls.Config) {
	t.Helper()
	leaf := p.ca.Sign(t, &x509.Certificate{Subject: pkix.Name{CommonName: name}, DNSNames: []string{name},
		IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1)}, NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour),
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth}})
	cert, key := leaf.Write(t, p.dir, name)
	r, err := tlsconf.New(tlsconf.Files{CertFile: cert, KeyFile: key, ClientCAFile: p.caFile, ClientAuth: tlsconf.ClientAuthRequire})
	if err != nil {
		t.Fatal(err)
	}
	client, err = forward.ClientTLS(p.caFile, r.Current)
	if err != nil {
		t.Fatal(err)
	}
	return client, r.ServerConfig("h2")
}

// shadowContract is the config's contracts section of a contract whose
// champion is a/ and whose shadow challenger is b/.
const shadowContract = `, "contracts": [{"organization": "ads", "project": "pctr", "contract_number": 1, "servables": [
		{"release_version": "v1", "model_path": "a/"},
		{"release_version": "v2", "model_path": "b/", "validity": [{"never_valid": {}}], "shadow": {}}]}]`

// startShadowPair starts two nodes (peers with mTLS when p is not nil)
// with shadowContract, once every model answers on both, and returns the
// one that holds a/ and not b/, and the one that holds b/ and not a/.
func startShadowPair(t *testing.T, p *pki) (champ, chall *testNode) {
	t.Helper()
	srv := etcdtest.Start(t)
	bucketURL, configure := newBucket(t, shadowContract)
	nodes := []*testNode{startNode(t, srv.Addr, bucketURL, "n1", p), startNode(t, srv.Addr, bucketURL, "n2", p)}
	configureWhenJoined(t, nodes, configure)
	eventually(t, "every model answered by every node", func() error { return everyModelEverywhere(nodes) })
	for _, n := range nodes {
		if h := held(n); slices.Contains(h, "a/") && !slices.Contains(h, "b/") {
			champ = n
		}
		if h := held(n); slices.Contains(h, "b/") && !slices.Contains(h, "a/") {
			chall = n
		}
	}
	if champ == nil || chall == nil {
		t.Fatalf("a/ and b/ not on different nodes: %v", nodes[0].agent.Status().Placement)
	}
	return champ, chall
}

// TestClusterForwardingMTLS: between nodes with mTLS, a forwarded request
// carries the caller's identity and arrives from the calling node, and a
// contract's shadow copy to a challenger placed on another node goes at
// shadow priority and is logged by the node the caller called.
func TestClusterForwardingMTLS(t *testing.T) {
	caller, server := startShadowPair(t, newPKI(t))
	reset := func() {
		server.mu.Lock()
		server.seen = nil
		server.mu.Unlock()
	}
	seen := func() []seenRequest {
		server.mu.Lock()
		defer server.mu.Unlock()
		return slices.Clone(server.seen)
	}
	alice := auth.Identity{Name: "alice", Roles: []auth.Role{auth.RoleInfer}, Method: "token"}
	ctx := auth.NewContext(context.Background(), alice)

	reset()
	if err := check(caller.infer(ctx, "b/", 7), "b/", 7); err != nil {
		t.Fatal(err)
	}
	got := seen()
	if len(got) != 1 || got[0].req.Priority != forward.User || got[0].req.Peer != caller.name ||
		got[0].req.Caller.Name != "alice" || got[0].req.Caller.Method != "token" || !slices.Equal(got[0].req.Caller.Roles, alice.Roles) {
		t.Fatalf("forwarded user request: %+v", got)
	}

	reset()
	shadows := caller.shadow.Load()
	res, rv, err := caller.sys.Score(ctx, "ads/pctr/1", "", actors.Request{API: "test", RequestID: "s1", Inputs: []servables.Tensor{mustScalar(4)}})
	if err != nil || rv != "v1" {
		t.Fatalf("score: %v, release %q", err, rv)
	}
	if err := check(res, "a/", 4); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the shadow copy forwarded and logged", func() error {
		if caller.shadow.Load() == shadows {
			return errors.New("no shadow execution logged by the calling node")
		}
		return nil
	})
	got = seen()
	if len(got) != 1 || got[0].req.Priority != forward.Shadow || got[0].req.ModelPath != "b/" || got[0].req.RequestID != "s1" ||
		got[0].req.Release != "v2" || got[0].req.Caller.Name != "alice" {
		t.Fatalf("forwarded shadow copy: %+v", got)
	}
	if server.shadow.Load() != 0 {
		t.Errorf("the serving node logged %d shadow executions, want 0 (the calling node logs them)", server.shadow.Load())
	}
}

// TestShadowCopyOnAnotherNodeContinuesTheTrace: a traced request whose
// contract shadows it on a challenger placed on another node gets a
// "shadow" span under the caller's; the forward to that node carries the
// shadow span's traceparent, and so does the shadow execution's log event
// on the calling node.
func TestShadowCopyOnAnotherNodeContinuesTheTrace(t *testing.T) {
	caller, server := startShadowPair(t, nil)
	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
	defer func() { _ = tp.Shutdown(context.Background()) }()
	ctx, span := tp.Tracer("test").Start(context.Background(), "server")
	server.mu.Lock()
	server.seen = nil
	server.mu.Unlock()
	shadows := caller.shadow.Load()
	if _, _, err := caller.sys.Score(ctx, "ads/pctr/1", "", actors.Request{API: "test", RequestID: "t1", Inputs: []servables.Tensor{mustScalar(4)}}); err != nil {
		t.Fatal(err)
	}
	span.End()
	eventually(t, "the shadow copy forwarded and logged", func() error {
		if caller.shadow.Load() == shadows {
			return errors.New("no shadow execution logged by the calling node")
		}
		return nil
	})
	var shadow sdktrace.ReadOnlySpan
	for _, s := range rec.Ended() {
		if s.Name() == tracing.SpanShadow {
			shadow = s
		}
	}
	if shadow == nil || shadow.Parent().SpanID() != span.SpanContext().SpanID() {
		var ended []string
		for _, s := range rec.Ended() {
			ended = append(ended, fmt.Sprintf("%s %s (parent %s)", s.Name(), s.SpanContext().SpanID(), s.Parent().SpanID()))
		}
		t.Fatalf("no shadow span under the caller's %s; ended: %s", span.SpanContext().SpanID(), strings.Join(ended, ", "))
	}
	want := tracing.TraceParent(shadow.SpanContext())
	server.mu.Lock()
	seen := slices.Clone(server.seen)
	server.mu.Unlock()
	if len(seen) != 1 || seen[0].req.Priority != forward.Shadow || seen[0].traceparent != want {
		t.Errorf("forwarded shadow copy %+v, want one at shadow priority with traceparent %s", seen, want)
	}
	caller.mu.Lock()
	parents := slices.Clone(caller.shadowParents)
	caller.mu.Unlock()
	if len(parents) == 0 || parents[len(parents)-1] != want {
		t.Errorf("shadow events' traceparents %q, want the last %s", parents, want)
	}
}

// startDrainPair starts etcd and two plaintext nodes with the test's
// models, once every model answers on both, and returns etcd, the node
// to drain and the other.
func startDrainPair(t *testing.T) (srv *etcdtest.Server, drained, other *testNode) {
	t.Helper()
	srv = etcdtest.Start(t)
	bucketURL, configure := newBucket(t, "")
	nodes := []*testNode{startNode(t, srv.Addr, bucketURL, "n1", nil), startNode(t, srv.Addr, bucketURL, "n2", nil)}
	configureWhenJoined(t, nodes, configure)
	eventually(t, "every model answered by every node", func() error { return everyModelEverywhere(nodes) })
	return srv, nodes[0], nodes[1]
}

// TestClusterDrain: a draining node's models are placed on the other node
// and Drain returns once they are ready there; the node kept serving
// meanwhile, and after it left the other node answers every model alone.
func TestClusterDrain(t *testing.T) {
	_, drained, other := startDrainPair(t)
	nodes := []*testNode{drained, other}
	if len(held(drained)) == 0 {
		t.Fatalf("%s holds nothing to drain: %v", drained.name, other.agent.Status().Placement)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := drained.agent.Drain(ctx); err != nil {
		t.Fatalf("drain: %v", err)
	}
	for path := range models {
		if !slices.Contains(held(other), path) {
			t.Errorf("after the drain %s does not hold %s: %v", other.name, path, held(other))
		}
	}
	st := other.agent.Status()
	for _, m := range st.Members {
		if m.Name == drained.name && !m.Draining {
			t.Errorf("%s's record does not say draining: %+v", drained.name, m)
		}
	}
	if sec := drained.agent.StatusSection(); !sec.Draining {
		t.Errorf("status section of the draining node: %+v", sec)
	}
	if err := everyModelEverywhere(nodes); err != nil {
		t.Errorf("while draining: %v", err)
	}
	drained.stop()
	if err := everyModelEverywhere([]*testNode{other}); err != nil {
		t.Errorf("after %s left: %v", drained.name, err)
	}
}

// TestClusterDrainEtcdGone: a draining node that lost its membership
// (etcd unreachable for a lease TTL) stops waiting for a handover nobody
// can see, instead of spending the whole drain timeout that the rest of
// the shutdown (servers, prediction log flush) shares.
func TestClusterDrainEtcdGone(t *testing.T) {
	srv, drained, other := startDrainPair(t)
	only := slices.DeleteFunc(held(drained), func(p string) bool { return slices.Contains(held(other), p) })
	if len(only) == 0 {
		t.Fatalf("%s holds nothing that %s does not: %v, %v", drained.name, other.name, held(drained), held(other))
	}
	srv.Freeze(t)
	const timeout = 40 * time.Second
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	start := time.Now()
	err := drained.agent.Drain(ctx)
	took := time.Since(start)
	if err != nil || took > timeout/2 {
		t.Fatalf("drain with etcd unreachable: %v after %v, want nil within the lease TTL (2s) and the keep-alive's give-up, not the drain timeout (%v); %s alone held %v",
			err, took.Round(time.Millisecond), timeout, drained.name, only)
	}
	t.Logf("drain with etcd frozen returned after %v", took.Round(time.Millisecond))
	srv.Stop() // the nodes' cleanup then fails fast instead of waiting on a frozen etcd
}

// TestClusterDrainNowhereElse: a draining node whose models fit on no
// other node does not wait for its drain timeout: Drain returns once the
// controller has placed them again and found no room, and /v1/cluster
// reports them unplaceable.
func TestClusterDrainNowhereElse(t *testing.T) {
	srv := etcdtest.Start(t)
	bucketURL, configure := newBucket(t, "")
	// n2's budget holds no model (each needs its file size × 2 bytes).
	nodes := []*testNode{startNode(t, srv.Addr, bucketURL, "n1", nil), startNodeBudget(t, srv.Addr, bucketURL, "n2", nil, 1)}
	configureWhenJoined(t, nodes, configure)
	eventually(t, "every model answered by every node", func() error { return everyModelEverywhere(nodes) })
	drained := nodes[0]
	if got := held(drained); len(got) != len(models) {
		t.Fatalf("n1 holds %v, want every model", got)
	}
	const timeout = 30 * time.Second
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	start := time.Now()
	if err := drained.agent.Drain(ctx); err != nil {
		t.Fatalf("drain: %v (after %v)", err, time.Since(start))
	}
	took := time.Since(start)
	t.Logf("drain with nowhere to hand over to returned after %v (timeout %v)", took.Round(time.Millisecond), timeout)
	if took > timeout/3 {
		t.Errorf("drain took %v: it waited for most of its timeout", took)
	}
	st := drained.agent.Status()
	var unplaceable []string
	for _, s := range st.Unplaceable {
		unplaceable = append(unplaceable, s.Path)
		if !strings.Contains(s.Reason, "1 draining") || !strings.Contains(s.Reason, "1 lack memory") {
			t.Errorf("%s's reason %q does not say a member drains and one lacks memory", s.Path, s.Reason)
		}
	}
	slices.Sort(unplaceable)
	if want := []string{"a/", "b/", "c/"}; !slices.Equal(unplaceable, want) {
		t.Errorf("unplaceable %v, want %v", unplaceable, want)
	}
	if err := everyModelEverywhere(nodes); err != nil {
		t.Errorf("after the drain, before leaving: %v", err)
	}
	// GET /v1/cluster names the unplaceable models by model_path, as every
	// Grove document does.
	rec := httptest.NewRecorder()
	node.Handler(drained.agent)(rec, httptest.NewRequest(http.MethodGet, "/v1/cluster", nil))
	var doc struct {
		Unplaceable []map[string]any `json:"unplaceable"`
	}
	if err := json.Unmarshal(rec.Body.Bytes(), &doc); err != nil {
		t.Fatal(err)
	}
	for _, u := range doc.Unplaceable {
		if _, ok := u["path"]; ok || u["model_path"] == nil {
			t.Errorf("/v1/cluster unplaceable entry %v: want model_path, not path", u)
		}
	}
	if len(doc.Unplaceable) != len(models) {
		t.Errorf("/v1/cluster lists %d unplaceable models, want %d: %s", len(doc.Unplaceable), len(models), rec.Body)
	}
}

// TestClusterFreeBytesMachine: a node whose machine has less memory
// available than its budget reports the smaller figure as free, and the
// controller places nothing on a node whose machine has none left.
func TestClusterFreeBytesMachine(t *testing.T) {
	srv := etcdtest.Start(t)
	bucketURL, configure := newBucket(t, "")
	full := startNodeWith(t, srv.Addr, bucketURL, "full", nil, func(c *node.Config) { c.Available = func() int64 { return 0 } })
	roomy := startNodeWith(t, srv.Addr, bucketURL, "roomy", nil, func(c *node.Config) { c.Available = func() int64 { return 64 << 20 } })
	nodes := []*testNode{full, roomy}
	configureWhenJoined(t, nodes, configure)
	eventually(t, "every model answered by every node", func() error { return everyModelEverywhere(nodes) })
	if got := held(full); len(got) > 0 {
		t.Errorf("the node whose machine has no memory left holds %v", got)
	}
	for _, m := range roomy.agent.Status().Members {
		want := int64(0)
		if m.Name == "roomy" {
			want = 64 << 20 // below its budget of 1 GiB
		}
		if m.FreeBytes != want {
			t.Errorf("%s's record says %d bytes free, want %d", m.Name, m.FreeBytes, want)
		}
	}
	if got := metric(t, full.reg, "grove_cluster_memory_free_bytes", nil); got != 0 {
		t.Errorf("grove_cluster_memory_free_bytes on the full node = %v, want 0", got)
	}
	if got := metric(t, roomy.reg, "grove_cluster_memory_free_bytes", nil); got != 64<<20 {
		t.Errorf("grove_cluster_memory_free_bytes on the roomy node = %v, want %d", got, 64<<20)
	}
}

// metric returns the value of the gauge or counter name with labels in
// reg (a histogram's sample count), or 0.
func metric(t *testing.T, reg *prometheus.Registry, name string, labels map[string]string) float64 {
	t.Helper()
	fams, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range fams {
		if f.GetName() != name {
			continue
		}
	next:
		for _, m := range f.GetMetric() {
			for _, lp := range m.GetLabel() {
				if want, ok := labels[lp.GetName()]; ok && want != lp.GetValue() {
					continue next
				}
			}
			if c := m.GetCounter(); c != nil {
				return c.GetValue()
			}
			if h := m.GetHistogram(); h != nil {
				return float64(h.GetSampleCount())
			}
			return m.GetGauge().GetValue()
		}
	}
	return 0
}

// TestClusterStatusOff: a single server answers GET /v1/cluster 404,
// saying the cluster is off.
func TestClusterStatusOff(t *testing.T) {
	w := httptest.NewRecorder()
	node.Handler(nil)(w, httptest.NewRequest("GET", "/v1/cluster", nil))
	if w.Code != http.StatusNotFound || !strings.Contains(w.Body.String(), "cluster mode is off") {
		t.Errorf("GET /v1/cluster on a single server: %d %s", w.Code, w.Body)
	}
}

// TestClusterRejoin: nodes whose leases ended (revoked behind their
// backs, as when etcd lost them) join again and answer every model.
func TestClusterRejoin(t *testing.T) {
	srv := etcdtest.Start(t)
	bucketURL, configure := newBucket(t, "")
	nodes := []*testNode{startNode(t, srv.Addr, bucketURL, "n1", nil), startNode(t, srv.Addr, bucketURL, "n2", nil)}
	configureWhenJoined(t, nodes, configure)
	eventually(t, "every model answered by every node", func() error { return everyModelEverywhere(nodes) })

	cli, err := clientv3.New(clientv3.Config{Endpoints: []string{srv.Addr}, DialTimeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer cli.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	leases, err := cli.Leases(ctx)
	if err != nil {
		t.Fatal(err)
	}
	before := map[clientv3.LeaseID]bool{}
	for _, l := range leases.Leases {
		before[l.ID] = true
		if _, err := cli.Revoke(ctx, l.ID); err != nil {
			t.Fatal(err)
		}
	}
	if len(before) < 2 {
		t.Fatalf("%d leases, want one per node at least", len(before))
	}
	eventually(t, "both nodes members again on new leases", func() error {
		now, err := cli.Leases(ctx)
		if err != nil {
			return err
		}
		fresh := 0
		for _, l := range now.Leases {
			if !before[l.ID] {
				fresh++
			}
		}
		if fresh < 2 {
			return fmt.Errorf("%d new leases", fresh)
		}
		for _, n := range nodes {
			if got := len(n.agent.Status().Members); got != 2 {
				return fmt.Errorf("%s sees %d members", n.name, got)
			}
		}
		return everyModelEverywhere(nodes)
	})
}

// TestClusterPlacesAReleaseWaitingOnItsOnDemandModel: a contract's v2,
// whose model is on demand and which is valid 300 ms after its model
// loads, gets no call before then, so no call would have the controller
// place it. The router wants it placed (Agent.Want), a node loads it, and
// the contract's calls go to v2 once it is valid.
func TestClusterPlacesAReleaseWaitingOnItsOnDemandModel(t *testing.T) {
	srv := etcdtest.Start(t)
	bucketURL, _ := newBucket(t, "")
	dir := strings.TrimPrefix(bucketURL, "file://")
	if err := os.MkdirAll(filepath.Join(dir, "w"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "w", "model.faulty"), []byte(`{"add": 7}`), 0o644); err != nil {
		t.Fatal(err)
	}
	nodes := []*testNode{startNode(t, srv.Addr, bucketURL, "n1", nil), startNode(t, srv.Addr, bucketURL, "n2", nil)}
	configureWhenJoined(t, nodes, func() {
		cfg := `{"model_metadata": [{"model_path": "a/"}, {"model_path": "w/", "load": "on_demand"}],
 "contracts": [{"organization": "ads", "project": "pctr", "contract_number": 1, "servables": [
   {"release_version": "v1", "model_path": "a/"},
   {"release_version": "v2", "model_path": "w/", "validity": [{"valid_after_ms": {"ms": 300}}]}]}]}`
		if err := os.WriteFile(filepath.Join(dir, "model_config.json"), []byte(cfg), 0o644); err != nil {
			t.Fatal(err)
		}
	})
	eventually(t, "the contract's calls answered by v2", func() error {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		res, rv, err := nodes[0].sys.Score(ctx, "ads/pctr/1", "", actors.Request{API: "test", Inputs: []servables.Tensor{mustScalar(4)}})
		switch {
		case err != nil:
			return err
		case res.Err != nil:
			return res.Err
		case rv != "v2":
			return fmt.Errorf("answered by %s", rv)
		}
		return nil
	})
}
