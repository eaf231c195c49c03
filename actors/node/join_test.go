package node_test

import (
	"context"
	"errors"
	"net/http"
	"testing"
	"time"

	"google.golang.org/grpc/codes"

	"github.com/groveml/grove/actors/node"
	"github.com/groveml/grove/auth"
	"github.com/groveml/grove/cluster/coord"
	"github.com/groveml/grove/cluster/etcdtest"
	"github.com/groveml/grove/cluster/forward"
	"github.com/groveml/grove/conf/bucket/file"
	"github.com/groveml/grove/servables"
)

// laggingView is an agent on the cluster's etcd (under prefix) that
// never runs: its membership view is the one a node has before its watch
// delivers any record, as a peer's view is before its watch delivers a
// node that just joined.
func laggingView(t *testing.T, etcdAddr, prefix, bucketURL string) *node.Agent {
	t.Helper()
	b, err := file.Open(bucketURL)
	if err != nil {
		t.Fatal(err)
	}
	cli, err := coord.Dial(context.Background(), coord.Config{Endpoints: []string{etcdAddr}, Prefix: prefix})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cli.Close() })
	fc := forward.NewClient(forward.ClientOptions{})
	t.Cleanup(fc.Close)
	a, err := node.New(node.Config{Client: cli, Name: "lagging-view", Advertise: "127.0.0.1:1", BudgetBytes: 1, LeaseTTL: 2 * time.Second, MemoryFactor: 2, Bucket: b, Forward: fc})
	if err != nil {
		t.Fatal(err)
	}
	return a
}

// TestClusterAJoiningNodesForwardIsServedBeforeItsPeersWatchListsIt: a
// node that has just joined takes a user's request for a model ready on
// a peer and forwards it; the peer's membership view does not list the
// new node yet (its watch has not delivered the record). The user gets
// the model's answer, not a 500: the peer confirms the membership from
// etcd before refusing. A certificate of the cluster's CA that names no
// member is still refused, and its request never reaches the model.
func TestClusterAJoiningNodesForwardIsServedBeforeItsPeersWatchListsIt(t *testing.T) {
	p := newPKI(t)
	srv := etcdtest.Start(t)
	bucketURL, configure := newBucket(t, "")
	n1 := startNode(t, srv.Addr, bucketURL, "n1", p)
	configureWhenJoined(t, []*testNode{n1}, configure)
	eventually(t, "every model answered by n1", func() error { return everyModelEverywhere([]*testNode{n1}) })

	lagging := laggingView(t, srv.Addr, "/t/", bucketURL)
	n1.view.Store(lagging)
	n2 := startNode(t, srv.Addr, bucketURL, "n2", p)
	eventually(t, "n2 sees a/ ready on n1", func() error {
		if !n2.agent.Serves("a/") {
			return errors.New("not yet")
		}
		return nil
	})
	if h := held(n2); len(h) != 0 {
		t.Fatalf("n2 holds %v: the request would not be forwarded", h)
	}

	code, body := serveOIP(t, n2).get("POST", "/v2/models/a/infer", `{"inputs":[{"name":"x","datatype":"FP32","shape":[1],"data":[5]}]}`)
	if code != http.StatusOK {
		t.Fatalf("a user's request to the node that just joined, for a model on its peer: HTTP %d %s", code, body)
	}
	n1.mu.Lock()
	seen := len(n1.seen)
	n1.mu.Unlock()
	if seen != 1 {
		t.Fatalf("n1 received %d forwarded requests, want 1", seen)
	}
	if !lagging.IsMember("n2") {
		t.Error("the view does not believe the membership it read: every call of n2 would read it again")
	}

	var addr string
	for _, m := range n1.agent.Status().Members {
		if m.Name == "n1" {
			addr = m.Advertise
		}
	}
	strangerTLS, _ := p.tls(t, "mallory")
	stranger := forward.NewClient(forward.ClientOptions{TLS: strangerTLS})
	defer stranger.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_, err := stranger.Forward(ctx, []forward.Peer{{Name: "n1", Addr: addr}}, forward.Request{ModelPath: "a/", Inputs: []servables.Tensor{mustScalar(1)},
		Priority: forward.User, Caller: auth.Identity{Method: "none"}})
	if re, ok := errors.AsType[*forward.RemoteError](err); !ok || re.Code != codes.PermissionDenied {
		t.Fatalf("a certificate naming no member: %v, want PERMISSION_DENIED", err)
	}
	n1.mu.Lock()
	seen = len(n1.seen)
	n1.mu.Unlock()
	if seen != 1 {
		t.Fatalf("n1's model received %d forwarded requests, want 1 (the stranger's refused)", seen)
	}
}

// TestClusterAForwardRefusedAsNoMemberAnswersTheUser503: a node whose
// peer finds it in no read of the membership (its lease ended and it has
// not joined again yet: here, the peer reads another cluster's records)
// is refused, and its user gets 503, which says to try again, not 500.
func TestClusterAForwardRefusedAsNoMemberAnswersTheUser503(t *testing.T) {
	p := newPKI(t)
	srv := etcdtest.Start(t)
	bucketURL, configure := newBucket(t, "")
	n1 := startNode(t, srv.Addr, bucketURL, "n1", p)
	configureWhenJoined(t, []*testNode{n1}, configure)
	eventually(t, "every model answered by n1", func() error { return everyModelEverywhere([]*testNode{n1}) })

	n1.view.Store(laggingView(t, srv.Addr, "/elsewhere/", bucketURL))
	n2 := startNode(t, srv.Addr, bucketURL, "n2", p)
	eventually(t, "n2 sees a/ ready on n1", func() error {
		if !n2.agent.Serves("a/") {
			return errors.New("not yet")
		}
		return nil
	})
	code, body := serveOIP(t, n2).get("POST", "/v2/models/a/infer", `{"inputs":[{"name":"x","datatype":"FP32","shape":[1],"data":[5]}]}`)
	if code != http.StatusServiceUnavailable {
		t.Fatalf("a user's request forwarded by a node its peer finds no member of: HTTP %d %s, want 503", code, body)
	}
	n1.mu.Lock()
	defer n1.mu.Unlock()
	if len(n1.seen) != 0 {
		t.Fatalf("n1's model received %d requests of a node that is no member", len(n1.seen))
	}
}
