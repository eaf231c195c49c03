package node

import (
	"context"
	"errors"
	"slices"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/groveml/grove/cluster/coord"
	"github.com/groveml/grove/cluster/etcdtest"
)

// A join that completes after Leave (called while Run was joining: the
// node's first join, or its join again after its session was lost) does
// not make the node a member again behind Leave's back: its lease is
// revoked at once, so that etcd holds no lease and no record of the node
// (its lease is an hour here: nothing ends by itself within the test),
// and Run returns. Leave returns without waiting for the join. The lease
// is revoked too when Run's context is cancelled right after Leave, as
// the shutdown does.
func TestAJoinCompletedAfterLeaveLeavesNoSessionBehind(t *testing.T) {
	for _, c := range []struct {
		name      string
		rejoin    bool
		cancelRun bool
	}{
		{"first join", false, false},
		{"join again after a lost session", true, false},
		{"first join, Run's context cancelled after Leave", false, true},
	} {
		t.Run(c.name, func(t *testing.T) {
			srv := etcdtest.Start(t)
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			defer cancel()
			cli := etcdClient(t, srv)
			held := make(chan struct{}, 1) // the held join has returned from etcd
			release := make(chan struct{})
			a, ran, stopRun := startAgent(t, srv, nil, func(a *Agent) {
				join := a.join
				calls := 0 // only Run's goroutine joins
				a.join = func(jctx context.Context, self coord.Member, ttl time.Duration) (*coord.Node, error) {
					calls++
					n, err := join(jctx, self, ttl)
					if c.rejoin && calls == 1 {
						return n, err
					}
					held <- struct{}{}
					select {
					case <-release:
					case <-jctx.Done():
					}
					return n, err
				}
			})
			if c.rejoin {
				awaitJoinedAgain(ctx, t, a, nil) // joined
				loseSession(ctx, t, a)
			}
			select {
			case <-held:
			case <-ctx.Done():
				t.Fatal("the agent did not join within 20 s")
			}
			if got, err := cli.Get(ctx, "/t/members/n1"); err != nil || got.Count != 1 {
				t.Fatalf("the held join wrote no record: %v %v", got, err)
			}

			leaveWithin(ctx, t, a, 10*time.Second)
			if c.cancelRun {
				stopRun()
			}
			close(release) // the join completes after Leave

			select {
			case <-ran:
			case <-time.After(10 * time.Second):
				t.Error("Run has not returned within 10 s of a join completed after Leave")
			}
			leases, err := cli.Leases(ctx)
			if err != nil {
				t.Fatal(err)
			}
			if len(leases.Leases) != 0 {
				t.Errorf("etcd holds %d leases after the node left, want 0: the join completed after Leave kept its lease", len(leases.Leases))
			}
			got, err := cli.Get(ctx, "/t/members/n1")
			if err != nil {
				t.Fatal(err)
			}
			if got.Count != 0 {
				t.Errorf("etcd holds the node's record after it left: %s", got.Kvs[0].Value)
			}
		})
	}
}

// Run returns within a few seconds of Leave, without waiting for its
// context: Leave cancels a join in flight (here one waiting for the
// node's name, which another live lease holds, for an hour) and wakes
// Run's wait before it joins again (here after a failed join, Retry an
// hour). Leave returns at once, and etcd holds no lease and no record of
// the node afterwards: the cancelled join revoked the lease it granted.
func TestRunEndsPromptlyOnLeave(t *testing.T) {
	for _, c := range []struct {
		name      string
		nameHeld  bool // another live lease holds the node's name
		joinFails bool // the first join fails, then Run waits Retry
	}{
		{"a join waiting for the node's name", true, false},
		{"the wait before joining again", false, true},
	} {
		t.Run(c.name, func(t *testing.T) {
			srv := etcdtest.Start(t)
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			defer cancel()
			cli := etcdClient(t, srv)
			var holder clientv3.LeaseID
			if c.nameHeld {
				l, err := cli.Grant(ctx, 3600)
				if err != nil {
					t.Fatal(err)
				}
				holder = l.ID
				if _, err := cli.Put(ctx, "/t/members/n1", `{"name":"n1"}`, clientv3.WithLease(holder)); err != nil {
					t.Fatal(err)
				}
			}
			joining := make(chan struct{}, 1) // Run's join has been called, or has failed
			a, ran, _ := startAgent(t, srv, nil, func(a *Agent) {
				a.cfg.Retry = time.Hour
				join := a.join
				a.join = func(jctx context.Context, self coord.Member, ttl time.Duration) (*coord.Node, error) {
					if c.joinFails {
						defer func() { joining <- struct{}{} }()
						return nil, errors.New("etcd refused the join (test)")
					}
					joining <- struct{}{}
					return join(jctx, self, ttl)
				}
			})
			select {
			case <-joining:
			case <-ctx.Done():
				t.Fatal("Run has not joined within 20 s")
			}
			if c.nameHeld {
				// The join has granted its lease: it waits for the name.
				for {
					l, err := cli.Leases(ctx)
					if err != nil {
						t.Fatal(err)
					}
					if len(l.Leases) == 2 {
						break
					}
					select {
					case <-ctx.Done():
						t.Fatal("the join granted no lease within 20 s")
					case <-time.After(10 * time.Millisecond):
					}
				}
			}

			leaveWithin(ctx, t, a, 5*time.Second)
			select {
			case <-ran:
			case <-time.After(5 * time.Second):
				t.Fatal("Run has not returned within 5 s of Leave")
			}

			// A grant that Leave cancelled in flight is revoked in the
			// background once etcd answers it; the node's lease TTL is
			// an hour, so only a revoke ends it within the wait.
			for wait := time.Now().Add(5 * time.Second); ; {
				leases, err := cli.Leases(ctx)
				if err != nil {
					t.Fatal(err)
				}
				kept := slices.DeleteFunc(leases.Leases, func(l clientv3.LeaseStatus) bool { return l.ID == holder })
				if len(kept) == 0 {
					break
				}
				if time.Now().After(wait) {
					t.Fatalf("etcd holds lease %x 5 s after the node left: the cancelled join kept it", kept[0].ID)
				}
				time.Sleep(10 * time.Millisecond)
			}
			got, err := cli.Get(ctx, "/t/members/n1")
			if err != nil {
				t.Fatal(err)
			}
			switch {
			case c.nameHeld && (got.Count != 1 || clientv3.LeaseID(got.Kvs[0].Lease) != holder):
				t.Errorf("the record of n1 is %v, want the one the other lease holds", got.Kvs)
			case !c.nameHeld && got.Count != 0:
				t.Errorf("etcd holds the node's record after it left: %s", got.Kvs[0].Value)
			}
		})
	}
}

// leaveWithin makes a leave and fails the test unless Leave returns nil
// within d: it must not wait for a join in flight.
func leaveWithin(ctx context.Context, t *testing.T, a *Agent, d time.Duration) {
	t.Helper()
	left := make(chan error, 1)
	go func() {
		lctx, lcancel := context.WithTimeout(ctx, 5*time.Second)
		defer lcancel()
		left <- a.Leave(lctx)
	}()
	select {
	case err := <-left:
		if err != nil {
			t.Fatalf("Leave: %v", err)
		}
	case <-time.After(d):
		t.Fatalf("Leave has not returned within %v: it waits for the join in flight", d)
	}
}
