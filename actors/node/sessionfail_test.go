package node

import (
	"context"
	"errors"
	"log/slog"
	"os"
	"path/filepath"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/groveml/grove/actors"
	"github.com/groveml/grove/cluster"
	"github.com/groveml/grove/cluster/coord"
	"github.com/groveml/grove/cluster/etcdtest"
	"github.com/groveml/grove/cluster/forward"
	"github.com/groveml/grove/conf/bucket/file"
	"github.com/groveml/grove/servables"
	"github.com/groveml/grove/servables/faulty"
)

// runAgent runs an agent as n1 (its config empty, its lease an hour, its
// Retry 10 ms) on a throwaway etcd at srv, its sessions' controllers made
// by newController.
func runAgent(t *testing.T, srv *etcdtest.Server, newController func(cluster.ControllerConfig) (*cluster.Controller, error)) *Agent {
	t.Helper()
	a, _, _ := startAgent(t, srv, nil, func(a *Agent) { a.newController = newController })
	return a
}

// etcdClient is a client of the etcd server srv, closed after the test.
func etcdClient(t *testing.T, srv *etcdtest.Server) *clientv3.Client {
	t.Helper()
	cli, err := clientv3.New(clientv3.Config{Endpoints: []string{srv.Addr}, DialTimeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cli.Close() })
	return cli
}

// startAgent runs an agent as n1 (its config empty, its lease an hour,
// its Retry 10 ms, as cfg, if not nil, changes them) on a throwaway etcd
// at srv, once set, if not nil, has changed it (its test hooks), and
// returns it with a channel closed when its Run has returned and the
// function that cancels Run's context. The test's cleanup makes it leave
// and stops it.
func startAgent(t *testing.T, srv *etcdtest.Server, cfg func(*Config), set func(*Agent)) (*Agent, <-chan struct{}, context.CancelFunc) {
	t.Helper()
	discard := slog.New(slog.DiscardHandler)
	cli, err := coord.Dial(context.Background(), coord.Config{Endpoints: []string{srv.Addr}, Prefix: "/t/", Logger: discard})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cli.Close() })
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "model_config.json"), []byte(`{"model_metadata": []}`), 0o644); err != nil {
		t.Fatal(err)
	}
	b, err := file.Open("file://" + dir)
	if err != nil {
		t.Fatal(err)
	}
	fc := forward.NewClient(forward.ClientOptions{Logger: discard})
	t.Cleanup(fc.Close)
	c := Config{Client: cli, Name: "n1", Advertise: "127.0.0.1:1", BudgetBytes: 1 << 30, LeaseTTL: time.Hour, MemoryFactor: 2,
		Bucket: b, Forward: fc, Retry: 10 * time.Millisecond, Logger: discard}
	if cfg != nil {
		cfg(&c)
	}
	a, err := New(c)
	if err != nil {
		t.Fatal(err)
	}
	if set != nil {
		set(a)
	}
	sys, err := actors.Start(actors.Options{Bucket: b, ModelConfigPath: "model_config.json", PollInterval: time.Hour,
		CacheDir: t.TempDir(), MaxModelBytes: 1 << 20, QueueSize: 8, Runtimes: servables.Registry{faulty.Runtime{}}, ClusterNode: true, Remote: a, Logger: discard})
	if err != nil {
		t.Fatal(err)
	}
	rctx, stop := context.WithCancel(context.Background())
	ran := make(chan struct{})
	go func() {
		defer close(ran)
		_ = a.Run(rctx, sys)
	}()
	t.Cleanup(func() {
		lctx, lcancel := context.WithTimeout(context.Background(), 5*time.Second)
		_ = a.Leave(lctx)
		lcancel()
		stop()
		<-ran
		_ = sys.Stop(context.Background())
	})
	return a, ran, stop
}

// A session that fails after its join (here: its controller cannot be
// made) ends its lease before Run tries again, so the next join finds the
// node's name free at once: the next join does not wait for the failed
// session's lease, which its session would keep alive for good (its TTL
// an hour here, the test's bound 20 s).
func TestAFailedSessionFreesTheNodesNameForTheNextJoin(t *testing.T) {
	srv := etcdtest.Start(t)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	// Only Run's goroutine calls newController, one session after another.
	var calls int
	failed := make(chan *coord.Node, 1)
	joinedAgain := make(chan struct{})
	runAgent(t, srv, func(c cluster.ControllerConfig) (*cluster.Controller, error) {
		calls++
		switch calls {
		case 1:
			failed <- c.Node
			return nil, errors.New("injected: no controller for this session")
		case 2:
			close(joinedAgain)
		}
		return cluster.NewController(c)
	})

	var first *coord.Node
	select {
	case first = <-failed:
	case <-ctx.Done():
		t.Fatal("the agent did not join within 20 s")
	}
	select {
	case <-joinedAgain:
	case <-ctx.Done():
		t.Fatal("the agent did not join again within 20 s of its failed session: the failed session's lease (an hour) still holds the node's name")
	}
	if !closed(first.Done()) {
		t.Error("the failed session's lease is still kept alive")
	}
}

// A session whose record is gone behind its back (deleted by hand) fails
// at its next write with its lease alive; the agent joins again, and the
// old lease is revoked, not kept alive for good beside the new one.
func TestASessionWhoseRecordWasDeletedLeavesNoLeaseBehind(t *testing.T) {
	srv := etcdtest.Start(t)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	a := runAgent(t, srv, cluster.NewController)
	cli := etcdClient(t, srv)
	awaitJoinedAgain(ctx, t, a, nil) // joined
	first := a.node.Load()
	if _, err := cli.Delete(ctx, "/t/members/n1"); err != nil {
		t.Fatal(err)
	}
	a.draining.Store(true) // a change to write
	a.writeRecordNow()
	awaitJoinedAgain(ctx, t, a, first)
	select {
	case <-first.Done():
	case <-ctx.Done():
		t.Fatal("the session whose record was deleted is still kept alive 20 s after the agent joined again")
	}
	leases, err := cli.Leases(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(leases.Leases) != 1 {
		t.Errorf("etcd holds %d leases, want 1 (the new session's)", len(leases.Leases))
	}
}

// Leave once the session has ended (its lease revoked: by endSession, or
// behind the agent's back as here) has no lease to revoke: it succeeds,
// rather than fail with etcd's "lease not found" for the shutdown to log,
// and Run joins no more.
func TestLeaveOnceTheSessionEndedSucceeds(t *testing.T) {
	a, n := joinedAgent(t)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := n.Leave(ctx); err != nil {
		t.Fatal(err)
	}
	if err := a.Leave(ctx); err != nil {
		t.Fatalf("Leave once the session ended: %v, want nil", err)
	}
	if !a.left.Load() {
		t.Error("Leave once the session ended did not mark the agent left: Run would join again")
	}
}
