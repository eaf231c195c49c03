package node_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/groveml/grove/auth"
	"github.com/groveml/grove/cluster/etcdtest"
	"github.com/groveml/grove/cluster/forward"
	"github.com/groveml/grove/servables"
)

// seenBy is how many forwarded requests n's forward server received.
func seenBy(n *testNode) int {
	n.mu.Lock()
	defer n.mu.Unlock()
	return len(n.seen)
}

// TestClusterANodeWhoseSessionIsLostForwardsNothingUntilItRejoins: a
// node whose lease ended (revoked behind its back, as when etcd was
// unreachable for a TTL) and that cannot join again yet (a live lease
// holds its name) answers a request for a model ready only on its peer
// at once 503 with a Retry-After, saying it lost its cluster session,
// without sending it to the peer (which would refuse it as no member's);
// a model it holds still serves here. Once it has joined again, it
// forwards again.
func TestClusterANodeWhoseSessionIsLostForwardsNothingUntilItRejoins(t *testing.T) {
	srv := etcdtest.Start(t)
	bucketURL, configure := newBucket(t, "")
	n1, n2 := startNode(t, srv.Addr, bucketURL, "n1", nil), startNode(t, srv.Addr, bucketURL, "n2", nil)
	configureWhenJoined(t, []*testNode{n1, n2}, configure)
	eventually(t, "every model answered by every node", func() error { return everyModelEverywhere([]*testNode{n1, n2}) })
	var far, near string // ready only on n1; held by n2
	for path := range models {
		switch on1, on2 := slices.Contains(held(n1), path), slices.Contains(held(n2), path); {
		case on1 && !on2:
			far = path
		case on2:
			near = path
		}
	}
	if far == "" || near == "" {
		t.Fatalf("n1 holds %v, n2 %v: want a model on n1 only and one on n2", held(n1), held(n2))
	}

	cli, err := clientv3.New(clientv3.Config{Endpoints: []string{srv.Addr}, DialTimeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer cli.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	// n2's record moves to a lease of the test's, which keeps its name
	// taken (its Join waits for it), then n2's own lease is revoked.
	key := "/t/members/n2"
	rec, err := cli.Get(ctx, key)
	if err != nil || len(rec.Kvs) != 1 {
		t.Fatalf("reading n2's record: %v %v", rec, err)
	}
	hold, err := cli.Grant(ctx, 60)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := cli.Put(ctx, key, string(rec.Kvs[0].Value), clientv3.WithLease(hold.ID)); err != nil {
		t.Fatal(err)
	}
	if _, err := cli.Revoke(ctx, clientv3.LeaseID(rec.Kvs[0].Lease)); err != nil {
		t.Fatal(err)
	}
	eventually(t, "n2 knows its session is lost", func() error {
		if !n2.agent.SessionLost() {
			return errors.New("not yet")
		}
		return nil
	})

	front := serveOIP(t, n2)
	before := seenBy(n1)
	rec2 := httptest.NewRecorder()
	front.rest.Handler().ServeHTTP(rec2, httptest.NewRequest("POST", "/v2/models/"+strings.TrimSuffix(far, "/")+"/infer",
		strings.NewReader(`{"inputs":[{"name":"x","datatype":"FP32","shape":[1],"data":[5]}]}`)))
	body, _ := io.ReadAll(rec2.Result().Body)
	if rec2.Code != http.StatusServiceUnavailable || rec2.Header().Get("Retry-After") != "1" || !strings.Contains(string(body), "lost its cluster session") {
		t.Fatalf("a request for %s (ready only on n1) to n2, whose session is lost: HTTP %d, Retry-After %q, %s; want 503, Retry-After 1, saying the session is lost",
			far, rec2.Code, rec2.Header().Get("Retry-After"), body)
	}
	if n := seenBy(n1) - before; n != 0 {
		t.Fatalf("n1 received %d requests n2 forwarded while its session was lost", n)
	}
	if err := check(n2.infer(ctx, near, 10), near, 10); err != nil {
		t.Fatalf("n2's own model %s while its session is lost: %v", near, err)
	}

	if _, err := cli.Revoke(ctx, hold.ID); err != nil {
		t.Fatal(err)
	}
	eventually(t, "n2 joined again", func() error {
		if n2.agent.SessionLost() {
			return errors.New("not yet")
		}
		return nil
	})
	if err := check(n2.infer(ctx, far, 10), far, 10); err != nil {
		t.Fatalf("a request for %s to n2 once it joined again: %v", far, err)
	}
	if n := seenBy(n1) - before; n != 1 {
		t.Fatalf("n1 received %d requests n2 forwarded once it joined again, want 1", n)
	}
}

// TestClusterANodeThatLeftSaysSoWhenAskedToForward: once a node has left
// (shutting down: its lease revoked, so its session has ended and it will
// not join again), a request it would forward fails 503 saying it left
// the cluster, not that it lost its session and is rejoining.
func TestClusterANodeThatLeftSaysSoWhenAskedToForward(t *testing.T) {
	srv := etcdtest.Start(t)
	bucketURL, configure := newBucket(t, "")
	n1, n2 := startNode(t, srv.Addr, bucketURL, "n1", nil), startNode(t, srv.Addr, bucketURL, "n2", nil)
	configureWhenJoined(t, []*testNode{n1, n2}, configure)
	eventually(t, "every model answered by every node", func() error { return everyModelEverywhere([]*testNode{n1, n2}) })
	var far string // ready only on n1
	for path := range models {
		if slices.Contains(held(n1), path) && !slices.Contains(held(n2), path) {
			far = path
		}
	}
	if far == "" {
		t.Fatalf("n1 holds %v, n2 %v: want a model on n1 only", held(n1), held(n2))
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := n2.agent.Leave(ctx); err != nil {
		t.Fatal(err)
	}
	eventually(t, "n2's session ended", func() error {
		if !n2.agent.SessionLost() {
			return errors.New("not yet")
		}
		return nil
	})
	_, err := n2.agent.Forward(ctx, forward.Request{ModelPath: far, Caller: auth.Identity{Method: "none"}})
	if servables.KindOf(err) != servables.Unavailable || !strings.Contains(fmt.Sprint(err), "left the cluster") || strings.Contains(fmt.Sprint(err), "rejoining") {
		t.Fatalf("n2 asked to forward %s after it left: %v; want Unavailable, saying it left the cluster", far, err)
	}
}
