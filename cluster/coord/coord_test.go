package coord

import (
	"context"
	"crypto/tls"
	"errors"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/groveml/grove/cluster/etcdtest"
	"github.com/groveml/grove/cluster/placement"
	"github.com/groveml/grove/internal/certtest"
	"github.com/groveml/grove/transport/tlsconf"
)

// ttl is the lease TTL of the tests' nodes.
const ttl = 2 * time.Second

// dial connects to srv under prefix, closing the client when the test ends.
func dial(t *testing.T, srv *etcdtest.Server, prefix string) *Client {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c, err := Dial(ctx, Config{Endpoints: []string{srv.Addr}, Prefix: prefix, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// join makes a member named name with a budget of budget bytes.
func join(t *testing.T, c *Client, name string, budget int64) *Node {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	n, err := c.Join(ctx, Member{Member: placement.Member{Name: name, BudgetBytes: budget, FreeBytes: budget}, Advertise: "127.0.0.1:7946"}, ttl)
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// await reads ch until ok accepts a value, failing the test after within.
func await[T any](t *testing.T, ch <-chan T, within time.Duration, what string, ok func(T) bool) T {
	t.Helper()
	deadline := time.After(within)
	var last T
	for {
		select {
		case v, open := <-ch:
			if !open {
				t.Fatalf("%s: the watch closed", what)
			}
			if ok(v) {
				return v
			}
			last = v
		case <-deadline:
			t.Fatalf("%s: not within %v; last seen %+v", what, within, last)
		}
	}
}

func names(want ...string) func(Members) bool {
	return func(m Members) bool { return slices.Equal(m.Names(), want) }
}

func TestMembership(t *testing.T) {
	srv := etcdtest.Start(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	watcher := dial(t, srv, "/m/")
	members := watcher.WatchMembers(ctx)
	await(t, members, 5*time.Second, "the empty membership", names())

	c1, c2 := dial(t, srv, "/m/"), dial(t, srv, "/m/")
	n1 := join(t, c1, "n1", 8<<30)
	join(t, c2, "n2", 4<<30)
	got := await(t, members, 5*time.Second, "two members", names("n1", "n2"))
	if m := got.List[0]; m.BudgetBytes != 8<<30 || m.Advertise != "127.0.0.1:7946" {
		t.Errorf("record %+v", m)
	}

	// An update is seen.
	upd := Member{Member: placement.Member{Name: "n1", BudgetBytes: 8 << 30, FreeBytes: 5 << 30,
		Held: []placement.Held{{Path: "m/", Content: "c1", Bytes: 3 << 30, State: placement.Ready}}}, Advertise: "127.0.0.1:7946"}
	if err := n1.Update(ctx, upd); err != nil {
		t.Fatal(err)
	}
	await(t, members, 5*time.Second, "the update", func(m Members) bool {
		return len(m.List) == 2 && len(m.List[0].Held) == 1 && m.List[0].FreeBytes == 5<<30
	})
	if err := n1.Update(ctx, Member{Member: placement.Member{Name: "other"}}); err == nil {
		t.Error("a record renamed by Update was accepted")
	}

	// n2's process dies: no keep-alive, its lease expires within a TTL
	// (etcd looks for expired leases every 500 ms).
	c2.Close()
	start := time.Now()
	await(t, members, ttl+2*time.Second, "n2 gone after its lease expired", names("n1"))
	t.Logf("a dead member's record disappeared %v after its process died, without revoking (TTL %v)", time.Since(start).Round(time.Millisecond), ttl)

	// n1 leaves: gone at once.
	start = time.Now()
	if err := n1.Leave(ctx); err != nil {
		t.Fatal(err)
	}
	await(t, members, time.Second, "n1 gone after Leave", names())
	t.Logf("a member that left disappeared after %v", time.Since(start).Round(time.Millisecond))
	select {
	case <-n1.Done():
	case <-time.After(time.Second):
		t.Error("Done is not closed after Leave")
	}
	if err := n1.Update(ctx, upd); !errors.Is(err, ErrSessionLost) {
		t.Errorf("Update after Leave: %v, want ErrSessionLost", err)
	}
}

func TestMembersSkipsBadRecords(t *testing.T) {
	t.Parallel()
	srv := etcdtest.Start(t)
	ctx := context.Background()
	c := dial(t, srv, "/b/")
	join(t, c, "good", 1)
	for key, val := range map[string]string{
		"/b/members/junk":     "{",
		"/b/members/renamed":  `{"name": "other"}`,
		"/b/members/negative": `{"name": "negative", "budget_bytes": -1}`,
	} {
		if _, err := c.cli.Put(ctx, key, val); err != nil {
			t.Fatal(err)
		}
	}
	m, err := c.Members(ctx)
	if err != nil || !slices.Equal(m.Names(), []string{"good"}) {
		t.Errorf("members %v, %v; want only the good record", m.Names(), err)
	}
}

func TestJoinWaitsOutAPreviousProcess(t *testing.T) {
	t.Parallel()
	srv := etcdtest.Start(t)
	old := dial(t, srv, "/j/")
	join(t, old, "n1", 1)
	c := dial(t, srv, "/j/")

	short, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	if _, err := c.Join(short, Member{Member: placement.Member{Name: "n1"}}, ttl); err == nil || !strings.Contains(err.Error(), `node name "n1" is in use by another live member`) {
		t.Fatalf("joining under a live name: %v", err)
	}

	old.Close() // killed: its lease runs out
	start := time.Now()
	ctx, cancel2 := context.WithTimeout(context.Background(), ttl+3*time.Second)
	defer cancel2()
	n, err := c.Join(ctx, Member{Member: placement.Member{Name: "n1", BudgetBytes: 2}}, ttl)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("a restarted node joined under its name %v after the old process died", time.Since(start).Round(time.Millisecond))
	m, err := c.Members(ctx)
	if err != nil || len(m.List) != 1 || m.List[0].BudgetBytes != 2 {
		t.Fatalf("members %+v, %v", m, err)
	}
	if err := n.Leave(ctx); err != nil {
		t.Fatal(err)
	}

	for _, bad := range []string{"", "a/b", "é", strings.Repeat("x", 254)} {
		if _, err := c.Join(ctx, Member{Member: placement.Member{Name: bad}}, ttl); err == nil {
			t.Errorf("name %q accepted", bad)
		}
	}
	if _, err := c.Join(ctx, Member{Member: placement.Member{Name: "n2"}}, 0); err == nil {
		t.Error("TTL 0 accepted")
	}
}

// campaign runs n's campaign in the background; the result arrives on the channel.
func campaign(ctx context.Context, n *Node) <-chan *Leadership {
	out := make(chan *Leadership, 1)
	go func() {
		l, err := n.Campaign(ctx)
		if err != nil {
			close(out)
			return
		}
		out <- l
	}()
	return out
}

func TestElectionFailover(t *testing.T) {
	srv := etcdtest.Start(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	obs := dial(t, srv, "/e/")
	leaders := obs.WatchLeader(ctx)
	await(t, leaders, 5*time.Second, "no controller", func(s string) bool { return s == "" })

	ca := dial(t, srv, "/e/")
	a, b, c := join(t, ca, "a", 1), join(t, dial(t, srv, "/e/"), "b", 1), join(t, dial(t, srv, "/e/"), "c", 1)
	la, err := a.Campaign(ctx)
	if err != nil {
		t.Fatal(err)
	}
	await(t, leaders, 5*time.Second, "a the controller", func(s string) bool { return s == "a" })
	if got, _ := obs.Leader(ctx); got != "a" {
		t.Errorf("Leader() = %q", got)
	}
	chB, chC := campaign(ctx, b), campaign(ctx, c)
	time.Sleep(100 * time.Millisecond)
	select {
	case <-chB:
		t.Fatal("b won while a leads")
	case <-chC:
		t.Fatal("c won while a leads")
	default:
	}

	// a's process dies: b or c takes over within one TTL of a's last
	// keep-alive (plus etcd's 500 ms expiry check).
	ca.Close()
	start := time.Now()
	var next *Leadership
	var rest <-chan *Leadership
	select {
	case next = <-chB:
		rest = chC
	case next = <-chC:
		rest = chB
	case <-time.After(ttl + 2*time.Second):
		t.Fatal("no new controller within TTL + 2s after the controller died")
	}
	if next == nil {
		t.Fatal("the campaign failed")
	}
	failover := time.Since(start)
	t.Logf("controller failover after the controller's process died: %v (TTL %v)", failover.Round(time.Millisecond), ttl)
	if failover > ttl+time.Second {
		t.Errorf("failover took %v, more than one TTL (%v) + 1s", failover, ttl)
	}
	select {
	case <-la.Done():
	case <-time.After(time.Second):
		t.Error("the dead controller's Leadership is not Done")
	}
	if _, err := la.WriteTable(ctx, Placement{}); err == nil {
		t.Error("the dead controller could still write the table")
	}

	// The new controller resigns (a drain): the last candidate takes over at once.
	start = time.Now()
	if err := next.Resign(ctx); err != nil {
		t.Fatal(err)
	}
	select {
	case last := <-rest:
		if last == nil {
			t.Fatal("the last campaign failed")
		}
		t.Logf("controller handover after a resignation: %v", time.Since(start).Round(time.Millisecond))
	case <-time.After(time.Second):
		t.Fatal("no controller within 1s of a resignation")
	}
	select {
	case <-next.Done():
	case <-time.After(time.Second):
		t.Error("a resigned Leadership is not Done")
	}
}

func TestTableWritesAreFenced(t *testing.T) {
	t.Parallel()
	srv := etcdtest.Start(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	reader := dial(t, srv, "/t/")
	tables := reader.WatchTable(ctx)
	if p := await(t, tables, 5*time.Second, "no table", func(p Placement) bool { return true }); p.Revision != 0 || len(p.Table) != 0 {
		t.Fatalf("before any write: %+v", p)
	}

	a, b := join(t, dial(t, srv, "/t/"), "a", 1), join(t, dial(t, srv, "/t/"), "b", 1)
	la, err := a.Campaign(ctx)
	if err != nil {
		t.Fatal(err)
	}
	plan := placement.Plan{Table: placement.Table{"m/": {"a", "b"}},
		Unplaceable: []placement.Shortfall{{Path: "big/", Want: 1, Min: 1, NeedBytes: 9, Reason: "needs 9 B"}}}
	rev, err := la.WriteTable(ctx, Placement{Plan: plan})
	if err != nil {
		t.Fatal(err)
	}
	got := await(t, tables, 5*time.Second, "the table", func(p Placement) bool { return p.Revision == rev })
	if !got.Table.Equal(plan.Table) || got.Controller != "a" || got.Term != la.Term() || len(got.Unplaceable) != 1 {
		t.Errorf("read %+v", got)
	}

	// a resigns and b leads: a's writes are refused, b's go through.
	if err := la.Resign(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := la.WriteTable(ctx, Placement{Plan: placement.Plan{Table: placement.Table{"x/": {"a"}}}}); !errors.Is(err, ErrNotLeader) {
		t.Fatalf("a write after resigning: %v, want ErrNotLeader", err)
	}
	lb, err := b.Campaign(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if lb.Term() <= la.Term() {
		t.Errorf("term %d after %d", lb.Term(), la.Term())
	}
	if _, err := la.WriteTable(ctx, Placement{Plan: placement.Plan{Table: placement.Table{"x/": {"a"}}}}); !errors.Is(err, ErrNotLeader) {
		t.Fatalf("the old controller's write under a new one: %v, want ErrNotLeader", err)
	}
	rev, err = lb.WriteTable(ctx, Placement{Plan: placement.Plan{Table: placement.Table{"m/": {"b"}}}})
	if err != nil {
		t.Fatal(err)
	}
	got = await(t, tables, 5*time.Second, "b's table", func(p Placement) bool { return p.Revision == rev })
	if got.Controller != "b" || !got.Table.Equal(placement.Table{"m/": {"b"}}) {
		t.Errorf("read %+v", got)
	}
	if p, err := reader.Table(ctx); err != nil || p.Revision != rev {
		t.Errorf("Table() = %+v, %v", p, err)
	}

	// The controller's node leaves: its leadership ends at once.
	if err := b.Leave(ctx); err != nil {
		t.Fatal(err)
	}
	select {
	case <-lb.Done():
	case <-time.After(time.Second):
		t.Error("the leadership of a node that left is not Done")
	}
	if _, err := lb.WriteTable(ctx, Placement{}); !errors.Is(err, ErrNotLeader) {
		t.Errorf("a write after leaving: %v", err)
	}
}

func TestCampaignEndsWithTheSession(t *testing.T) {
	srv := etcdtest.Start(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	a := join(t, dial(t, srv, "/s/"), "a", 1)
	if _, err := a.Campaign(ctx); err != nil {
		t.Fatal(err)
	}
	cb := dial(t, srv, "/s/")
	b := join(t, cb, "b", 1)
	ch := campaign(ctx, b)
	if err := b.Leave(ctx); err != nil {
		t.Fatal(err)
	}
	select {
	case l, ok := <-ch:
		if ok || l != nil {
			t.Fatal("a campaign won after its session ended")
		}
	case <-time.After(2 * time.Second):
		t.Fatal("a campaign went on after its session ended")
	}
}

func TestCampaignReturnsWhenCancelledWithEtcdUnresponsive(t *testing.T) {
	srv := etcdtest.Start(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	ca := dial(t, srv, "/g/")
	a := join(t, ca, "a", 1)
	if _, err := a.Campaign(ctx); err != nil {
		t.Fatal(err)
	}
	b := join(t, dial(t, srv, "/g/"), "b", 1)
	bctx, bcancel := context.WithCancel(ctx)
	ch := make(chan error, 1)
	go func() {
		_, err := b.Campaign(bctx)
		ch <- err
	}()
	// b's campaign has put its key and waits for a's to go.
	wctx, wcancel := context.WithTimeout(ctx, 10*time.Second)
	defer wcancel()
	for {
		r, err := ca.cli.Get(wctx, "/g/"+electionDir, clientv3.WithPrefix(), clientv3.WithCountOnly())
		if err != nil {
			t.Fatal(err)
		}
		if r.Count == 2 {
			break
		}
	}
	srv.Freeze(t) // etcd stops answering, connections open
	bcancel()
	select {
	case err := <-ch:
		if !errors.Is(err, context.Canceled) {
			t.Fatalf("campaign ended with %v, want context.Canceled", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("a cancelled campaign did not return with etcd unresponsive (a node shutting down would hang)")
	}
}

func TestDialTLS(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	ca := certtest.NewCA(t, "etcd CA")
	certFile, keyFile := ca.Server(t, "etcd").Write(t, dir, "server")
	srv := etcdtest.Start(t, etcdtest.WithTLS(etcdtest.TLSFiles{CertFile: certFile, KeyFile: keyFile, ClientCAFile: ca.WriteCA(t, dir)}))
	clientCert, clientKey := ca.Client(t, "grove-node", time.Now().Add(-time.Hour), time.Now().Add(time.Hour)).Write(t, dir, "client")
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	log := slog.New(slog.DiscardHandler)

	tc, err := TLSConfig(filepath.Join(dir, "ca.pem"), clientCert, clientKey)
	if err != nil {
		t.Fatal(err)
	}
	c, err := Dial(ctx, Config{Endpoints: []string{srv.Addr}, TLS: tc, Logger: log})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	n, err := c.Join(ctx, Member{Member: placement.Member{Name: "n1"}}, ttl)
	if err != nil {
		t.Fatal(err)
	}
	if err := n.Leave(ctx); err != nil {
		t.Fatal(err)
	}

	// Without a client certificate etcd refuses the connection.
	if c, err := Dial(ctx, Config{Endpoints: []string{srv.Addr}, TLS: &tls.Config{RootCAs: ca.Pool(), MinVersion: tls.VersionTLS12}, DialTimeout: time.Second, Logger: log}); err == nil {
		c.Close()
		t.Error("connected without a client certificate")
	}
}

func TestTLSConfigNamesTheFileAtFault(t *testing.T) {
	dir := t.TempDir()
	ca := certtest.NewCA(t, "etcd CA")
	caFile := ca.WriteCA(t, dir)
	cert, key := ca.Client(t, "n", time.Now().Add(-time.Hour), time.Now().Add(time.Hour)).Write(t, dir, "client")
	notPEM := filepath.Join(dir, "junk.pem")
	certtest.WriteFile(t, notPEM, []byte("junk"))
	for _, tc := range []struct{ ca, cert, key, want string }{
		{filepath.Join(dir, "missing.pem"), "", "", "reading the etcd CA file"},
		{notPEM, "", "", "the etcd CA file " + notPEM + " holds no PEM certificate"},
		{caFile, cert, "", "needs both its file and its key file"},
		{caFile, cert, notPEM, "the etcd client certificate " + cert},
	} {
		if _, err := TLSConfig(tc.ca, tc.cert, tc.key); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("TLSConfig(%q, %q, %q): %v, want %q", tc.ca, tc.cert, tc.key, err, tc.want)
		}
	}
	c, err := TLSConfig("", cert, key)
	if err != nil || c.RootCAs != nil || len(c.Certificates) != 1 {
		t.Errorf("system roots with a client certificate: %+v, %v", c, err)
	}
}

// The etcd CA, client certificate and key files are read within the
// limit of Grove's other PEM files (tlsconf.MaxFileBytes): a larger one is
// an error naming it and the limit, not read whole.
func TestTLSConfigRefusesFilesLargerThanTheLimit(t *testing.T) {
	dir := t.TempDir()
	ca := certtest.NewCA(t, "etcd CA")
	caFile := ca.WriteCA(t, dir)
	cert, key := ca.Client(t, "n", time.Now().Add(-time.Hour), time.Now().Add(time.Hour)).Write(t, dir, "client")
	// Text after the PEM blocks fills a file to the size wanted.
	fill := func(path string, size int) string {
		t.Helper()
		pem, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		big := filepath.Join(dir, "big-"+filepath.Base(path))
		certtest.WriteFile(t, big, append(pem, strings.Repeat("x", size-len(pem))...))
		return big
	}
	if _, err := TLSConfig(fill(caFile, tlsconf.MaxFileBytes), fill(cert, tlsconf.MaxFileBytes), key); err != nil {
		t.Fatalf("files of exactly the limit: %v", err)
	}
	bigCA, bigCert := fill(caFile, tlsconf.MaxFileBytes+1), fill(cert, tlsconf.MaxFileBytes+1)
	for _, tc := range []struct{ ca, cert, key, want string }{
		{bigCA, "", "", bigCA + " is larger than its limit of 4 MiB"},
		{caFile, bigCert, key, bigCert + " is larger than its limit of 4 MiB"},
	} {
		if _, err := TLSConfig(tc.ca, tc.cert, tc.key); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("TLSConfig(%q, %q, %q): %v, want %q", tc.ca, tc.cert, tc.key, err, tc.want)
		}
	}
}

func TestDialFailsClearly(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	if _, err := Dial(ctx, Config{}); err == nil || !strings.Contains(err.Error(), "no etcd endpoint") {
		t.Errorf("no endpoints: %v", err)
	}
	srv := etcdtest.Start(t)
	srv.Stop() // a port nothing listens on
	start := time.Now()
	_, err := Dial(ctx, Config{Endpoints: []string{srv.Addr}, DialTimeout: 500 * time.Millisecond, Logger: slog.New(slog.DiscardHandler)})
	if err == nil || !strings.Contains(err.Error(), srv.Addr) {
		t.Errorf("unreachable etcd: %v", err)
	}
	if d := time.Since(start); d > 3*time.Second {
		t.Errorf("failing took %v with a 500ms dial timeout", d)
	}
}

// TestJoinHonoursItsContext: with etcd gone, Join returns when its
// context ends instead of waiting for the lease grant for ever (a
// stopping node's agent would never stop).
func TestJoinHonoursItsContext(t *testing.T) {
	t.Parallel()
	srv := etcdtest.Start(t)
	c, err := Dial(context.Background(), Config{Endpoints: []string{srv.Addr}, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	srv.Stop()
	ctx, cancel := context.WithTimeout(context.Background(), 500*time.Millisecond)
	defer cancel()
	start := time.Now()
	_, err = c.Join(ctx, Member{Member: placement.Member{Name: "n1", BudgetBytes: 1, FreeBytes: 1}, Advertise: "127.0.0.1:1"}, 2*time.Second)
	if err == nil {
		t.Fatal("Join succeeded with etcd stopped")
	}
	if d := time.Since(start); d > 3*time.Second {
		t.Errorf("Join returned after %v, its context ended after 500ms", d)
	}
}

// lostGrant grants a lease, then ends the caller's context and, when the
// context it was given is the caller's, answers with that context's error:
// etcd made the lease, and the answer was lost with the cancelled join.
type lostGrant struct {
	clientv3.Lease
	cancel context.CancelFunc
}

func (l lostGrant) Grant(ctx context.Context, ttl int64) (*clientv3.LeaseGrantResponse, error) {
	resp, err := l.Lease.Grant(context.WithoutCancel(ctx), ttl)
	l.cancel()
	if ctx.Err() != nil {
		return nil, ctx.Err()
	}
	return resp, err
}

func TestAJoinCancelledWhileEtcdGrantsItsLeaseLeavesNoLease(t *testing.T) {
	srv := etcdtest.Start(t)
	c := dial(t, srv, "/g/")
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	c.cli.Lease = lostGrant{Lease: c.cli.Lease, cancel: cancel}
	_, err := c.Join(ctx, Member{Member: placement.Member{Name: "n1", BudgetBytes: 1, FreeBytes: 1}, Advertise: "127.0.0.1:1"}, time.Hour)
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("Join = %v, want an error wrapping context.Canceled", err)
	}
	check := dial(t, srv, "/g/")
	deadline := time.Now().Add(5 * time.Second) // the lease's TTL is an hour: only a revoke ends it
	for {
		lctx, lcancel := context.WithTimeout(context.Background(), 5*time.Second)
		leases, err := check.cli.Leases(lctx)
		lcancel()
		if err != nil {
			t.Fatal(err)
		}
		if len(leases.Leases) == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("etcd still holds %d lease(s) 5 s after the cancelled join: the join's grant was not revoked", len(leases.Leases))
		}
		time.Sleep(10 * time.Millisecond)
	}
}
