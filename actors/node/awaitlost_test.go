package node

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/groveml/grove/actors"
	"github.com/groveml/grove/cluster/coord"
	"github.com/groveml/grove/cluster/etcdtest"
	"github.com/groveml/grove/cluster/forward"
	"github.com/groveml/grove/cluster/placement"
	"github.com/groveml/grove/conf/bucket/file"
	"github.com/groveml/grove/servables"
	"github.com/groveml/grove/servables/faulty"
)

// joinedAgent is bareAgent, with the on-demand model w/, joined as n1 to
// a throwaway etcd: its requests wait for w/ in that session. Only an
// event wakes a waiting request (AwaitPoll is an hour).
func joinedAgent(t *testing.T) (*Agent, *coord.Node) {
	t.Helper()
	srv := etcdtest.Start(t)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	cli, err := coord.Dial(ctx, coord.Config{Endpoints: []string{srv.Addr}, Prefix: "/t/"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cli.Close() })
	n, err := cli.Join(ctx, coord.Member{Member: placement.Member{Name: "n1", BudgetBytes: 1 << 30}, Advertise: "127.0.0.1:1"}, 2*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	a := bareAgent()
	a.cfg.Retry, a.cfg.AwaitPoll = 3*time.Second, time.Hour
	a.onDemand.Store(&onDemandSet{paths: map[string]bool{"w/": true}})
	a.node.Store(n)
	return a, n
}

// waitingFor is how many requests a counts waiting for path's placement.
func waitingFor(a *Agent, path string) int {
	a.waiting.mu.Lock()
	defer a.waiting.mu.Unlock()
	return a.waiting.by[path]
}

// A request waiting for its on-demand model's placement when the node's
// cluster session ends fails at once as a new request would: Unavailable,
// with the session-lost error and its retry-after (saying the node left
// when it left), not "model is loading" at the end of its deadline, since
// the node can forward it nowhere and no controller places for it. It no
// longer counts as waiting.
func TestARequestWaitingForAPlacementFailsWhenTheSessionEnds(t *testing.T) {
	for _, c := range []struct {
		name string
		end  func(context.Context, *Agent, *coord.Node) error
		left bool
	}{
		// The lease ends behind the agent's back, as when etcd was
		// unreachable for a TTL.
		{"session lost", func(ctx context.Context, _ *Agent, n *coord.Node) error { return n.Leave(ctx) }, false},
		{"node left", func(ctx context.Context, a *Agent, _ *coord.Node) error { return a.Leave(ctx) }, true},
	} {
		t.Run(c.name, func(t *testing.T) {
			a, n := joinedAgent(t)
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			got := make(chan error, 1)
			go func() {
				_, err := a.Forward(ctx, forward.Request{ModelPath: "w/"})
				got <- err
			}()
			<-a.wake // the request marked itself waiting: it is in awaitPlaced
			if err := c.end(ctx, a, n); err != nil {
				t.Fatal(err)
			}
			select {
			case err := <-got:
				sl, ok := errors.AsType[*sessionLostError](err)
				if !ok || sl.left != c.left || servables.KindOf(err) != servables.Unavailable || sl.RetryIn() != a.cfg.Retry {
					t.Fatalf("the waiting request answered %v; want Unavailable, the session-lost error (left %v), retry after %v", err, c.left, a.cfg.Retry)
				}
			case <-time.After(10 * time.Second):
				t.Fatal("the request still waits 10 s after the session ended (its deadline is a minute away)")
			}
			if n := waitingFor(a, "w/"); n != 0 {
				t.Errorf("%d requests still counted waiting for w/", n)
			}
		})
	}
}

// A request waiting for its on-demand model's load on this node, which
// the table places it on, is not failed when the session ends: the node
// keeps serving what it holds and finishes the load it was given, and the
// request is answered once the model is ready.
func TestARequestWaitingForALoadHereOutlivesTheSession(t *testing.T) {
	a, n := joinedAgent(t)
	a.cfg.AwaitPoll = 10 * time.Millisecond // the load's end wakes no one: the request tries again
	dir := t.TempDir()
	for name, data := range map[string]string{
		"model_config.json": `{"model_metadata": [{"model_path": "w/", "load": "on_demand"}]}`,
		"w/model.faulty":    `{"add": 7}`,
	} {
		if err := os.MkdirAll(filepath.Dir(filepath.Join(dir, name)), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, name), []byte(data), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	b, err := file.Open("file://" + dir)
	if err != nil {
		t.Fatal(err)
	}
	sys, err := actors.Start(actors.Options{Bucket: b, ModelConfigPath: "model_config.json", PollInterval: time.Hour,
		CacheDir: t.TempDir(), MaxModelBytes: 1 << 20, QueueSize: 8, Runtimes: servables.Registry{faulty.Runtime{}}, ClusterNode: true, Remote: a})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = sys.Stop(context.Background()) })
	a.sys.Store(sys)
	a.table.Store(&coord.Placement{Plan: placement.Plan{Table: placement.Table{"w/": {"n1"}}}})

	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	x, err := servables.NewTensor("x", servables.Float32, []int64{1})
	if err != nil {
		t.Fatal(err)
	}
	x.Float32s()[0] = 5
	type answer struct {
		ans forward.Answer
		err error
	}
	got := make(chan answer, 1)
	go func() {
		ans, err := a.Forward(ctx, forward.Request{ModelPath: "w/", Inputs: []servables.Tensor{x}})
		got <- answer{ans, err}
	}()
	<-a.wake // the request waits for w/, placed here
	if err := n.Leave(ctx); err != nil {
		t.Fatal(err)
	}
	sys.SetShare([]string{"w/"}) // the share the table gave, which the node loads
	select {
	case r := <-got:
		if r.err != nil || len(r.ans.Outputs) != 1 || r.ans.Outputs[0].Float32s()[0] != 12 {
			t.Fatalf("the request waiting for w/'s load here, its session ended: %+v %v; want w/'s answer 12", r.ans, r.err)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("the request waiting for w/'s load here is not answered 20 s after the session ended")
	}
}
