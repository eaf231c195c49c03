package coord

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"sync"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/client/v3/concurrency"
)

// Node is this process's membership: a session (a lease kept alive in
// the background) and the member record bound to it.
type Node struct {
	c    *Client
	sess *concurrency.Session
	name string
	key  string

	mu   sync.Mutex // serializes Update
	last []byte     // the record last written
}

// Join makes self a member with a lease of ttl (rounded up to whole
// seconds; etcd may grant more than it is asked for below its minimum):
// the record lives as long as the lease, which the node keeps alive until
// Leave or until it cannot reach etcd for ttl. A record of the same
// name held by another live lease (the previous process of a node that
// was killed and restarted) is waited out, up to ctx.
func (c *Client) Join(ctx context.Context, self Member, ttl time.Duration) (*Node, error) {
	if err := validName(self.Name); err != nil {
		return nil, err
	}
	secs := int(math.Ceil(ttl.Seconds()))
	if secs < 1 {
		return nil, fmt.Errorf("coord: lease TTL %v is under 1s", ttl)
	}
	// The lease is granted within ctx (NewSession's own grant would wait
	// for an unreachable etcd whatever ctx says); the session keeps it alive.
	lease, err := c.grant(ctx, secs)
	if err != nil {
		return nil, fmt.Errorf("coord: granting the lease: %w", err)
	}
	sess, err := concurrency.NewSession(c.cli, concurrency.WithTTL(secs), concurrency.WithLease(lease))
	if err != nil {
		return nil, fmt.Errorf("coord: starting a session: %w", err)
	}
	n := &Node{c: c, sess: sess, name: self.Name, key: c.prefix + membersDir + self.Name}
	abandon := func() { // a failed join revokes its lease
		if err := sess.Close(); err != nil {
			c.log.Warn("revoking the lease of a failed join; it ends with its TTL", "lease", fmt.Sprintf("%x", int64(sess.Lease())), "err", err)
		}
	}
	data, err := json.Marshal(self)
	if err != nil {
		abandon()
		return nil, err
	}
	for {
		resp, err := c.cli.Txn(ctx).
			If(clientv3.Compare(clientv3.CreateRevision(n.key), "=", 0)).
			Then(clientv3.OpPut(n.key, string(data), clientv3.WithLease(sess.Lease()))).
			Commit()
		if err != nil {
			abandon()
			return nil, fmt.Errorf("coord: writing the member record %s: %w", n.key, err)
		}
		if resp.Succeeded {
			n.last = data
			return n, nil
		}
		c.log.Info("cluster node name in use by a live lease; waiting for it to end", "name", self.Name)
		if err := waitDeleted(ctx, c.cli, n.key, resp.Header.Revision); err != nil {
			abandon()
			return nil, fmt.Errorf("coord: node name %q is in use by another live member: %w", self.Name, err)
		}
	}
}

// grant grants a lease of secs seconds, returning when etcd answers or
// when ctx is done, whichever comes first. A grant still in flight when
// ctx ends (etcd may make it even so, and its answer would be lost with
// the caller's context) goes on in the background, bounded by the TTL,
// and the lease it makes is revoked there: a join cancelled by Leave
// leaves no lease behind.
func (c *Client) grant(ctx context.Context, secs int) (clientv3.LeaseID, error) {
	type granted struct {
		id  clientv3.LeaseID
		err error
	}
	ttl := time.Duration(secs) * time.Second
	done := make(chan granted, 1)
	go func() {
		gctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), ttl)
		defer cancel()
		resp, err := c.cli.Grant(gctx, int64(secs))
		if err != nil {
			done <- granted{err: err}
			return
		}
		done <- granted{id: resp.ID}
	}()
	select {
	case g := <-done:
		return g.id, g.err
	case <-ctx.Done():
		go func() {
			if g := <-done; g.err == nil {
				rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), ttl)
				defer cancel()
				if _, err := c.cli.Revoke(rctx, g.id); err != nil {
					c.log.Warn("revoking the lease of a cancelled join; it ends with its TTL", "lease", fmt.Sprintf("%x", int64(g.id)), "err", err)
				}
			}
		}()
		return 0, ctx.Err()
	}
}

// waitDeleted waits until key is deleted after revision rev.
func waitDeleted(ctx context.Context, cli *clientv3.Client, key string, rev int64) error {
	wctx, cancel := context.WithCancel(clientv3.WithRequireLeader(ctx))
	defer cancel()
	for resp := range cli.Watch(wctx, key, clientv3.WithRev(rev+1), clientv3.WithFilterPut()) {
		if err := resp.Err(); err != nil {
			return err
		}
		if len(resp.Events) > 0 {
			return nil
		}
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	return errors.New("watch ended")
}

// Name returns the node's name.
func (n *Node) Name() string { return n.name }

// Done is closed when the node's lease has ended: revoked by Leave, or
// expired after etcd went unreachable for a TTL. The node is then no
// member, and no controller; join again to come back.
func (n *Node) Done() <-chan struct{} { return n.sess.Done() }

// Update replaces the node's record (same name) if it changed. It fails
// with ErrSessionLost when the lease has ended.
func (n *Node) Update(ctx context.Context, self Member) error {
	if self.Name != n.name {
		return fmt.Errorf("coord: the record of node %q cannot be renamed %q", n.name, self.Name)
	}
	data, err := json.Marshal(self)
	if err != nil {
		return err
	}
	select {
	case <-n.sess.Done():
		return ErrSessionLost
	default:
	}
	n.mu.Lock()
	defer n.mu.Unlock()
	if string(data) == string(n.last) {
		return nil
	}
	resp, err := n.c.cli.Txn(ctx).
		If(clientv3.Compare(clientv3.LeaseValue(n.key), "=", n.sess.Lease())).
		Then(clientv3.OpPut(n.key, string(data), clientv3.WithLease(n.sess.Lease()))).
		Commit()
	if err != nil {
		return fmt.Errorf("coord: updating the member record: %w", err)
	}
	if !resp.Succeeded {
		return ErrSessionLost
	}
	n.last = data
	return nil
}

// Leave revokes the lease: the record and a candidacy or leadership
// vanish at once for every watcher.
func (n *Node) Leave(ctx context.Context) error {
	n.sess.Orphan() // stop the keep-alive; the revoke below ends the lease
	if _, err := n.c.cli.Revoke(ctx, n.sess.Lease()); err != nil {
		return fmt.Errorf("coord: revoking the lease: %w", err)
	}
	return nil
}

// Campaign blocks until this node is the controller, or ctx is done, or
// the session ends. The Leadership it returns lasts until Resign, Leave,
// or the session's end.
func (n *Node) Campaign(ctx context.Context) (*Leadership, error) {
	cctx, cancel := context.WithCancel(ctx)
	defer cancel()
	go func() { // a session lost while waiting ends the campaign
		select {
		case <-n.sess.Done():
			cancel()
		case <-cctx.Done():
		}
	}()
	e := concurrency.NewElection(n.sess, n.c.prefix+electionDir)
	if err := campaignOrQuit(cctx, e, n.name); err != nil {
		select {
		case <-n.sess.Done():
			return nil, ErrSessionLost
		default:
		}
		return nil, fmt.Errorf("coord: campaigning: %w", err)
	}
	lctx, lcancel := context.WithCancel(context.Background())
	l := &Leadership{n: n, e: e, key: e.Key(), term: e.Rev(), cancel: lcancel, done: make(chan struct{})}
	go l.watch(lctx)
	return l, nil
}

// campaignOrQuit runs e.Campaign but returns as soon as ctx is done. A cancelled
// etcd Campaign cleans up with the client's own context (Resign(client.Ctx())
// in concurrency.Election), which blocks while etcd is unreachable; the
// goroutine left behind ends when the client is closed, the caller does
// not wait for it (a node shutting down with etcd gone would never exit).
func campaignOrQuit(ctx context.Context, e *concurrency.Election, val string) error {
	done := make(chan error, 1)
	go func() { done <- e.Campaign(ctx, val) }()
	select {
	case err := <-done:
		return err
	case <-ctx.Done():
		select {
		case err := <-done:
			return err
		default:
			return ctx.Err()
		}
	}
}

// Leadership is the controller's right to write the placement table.
type Leadership struct {
	n      *Node
	e      *concurrency.Election
	key    string
	term   int64
	cancel context.CancelFunc
	done   chan struct{}
}

// Term returns the etcd revision at which this node became the
// controller.
func (l *Leadership) Term() int64 { return l.term }

// Done is closed when the leadership ends: resigned, the lease ended, or
// the election key gone.
func (l *Leadership) Done() <-chan struct{} { return l.done }

// watch closes done when the leadership ends.
func (l *Leadership) watch(ctx context.Context) {
	defer close(l.done)
	for ctx.Err() == nil && l.held(ctx) {
		sleep(ctx, 100*time.Millisecond) // a broken watch is not retried in a busy loop
	}
}

// held watches the election key until it is deleted or the session ends
// (false), or the watch breaks (true: look again). A key it cannot
// confirm is taken as lost: the transaction guard keeps a stale
// controller from writing anyway.
func (l *Leadership) held(ctx context.Context) bool {
	cli := l.n.c.cli
	wctx, cancel := context.WithCancel(clientv3.WithRequireLeader(ctx))
	defer cancel()
	wch := cli.Watch(wctx, l.key, clientv3.WithFilterPut())
	gctx, gcancel := context.WithTimeout(ctx, 5*time.Second)
	resp, err := cli.Get(gctx, l.key)
	gcancel()
	if err != nil || len(resp.Kvs) == 0 || resp.Kvs[0].CreateRevision != l.term {
		return false
	}
	for {
		select {
		case <-l.n.sess.Done():
			return false
		case w, ok := <-wch:
			if !ok || w.Err() != nil {
				return true
			}
			if len(w.Events) > 0 {
				return false
			}
		}
	}
}

// Resign gives the leadership up; another candidate takes it.
func (l *Leadership) Resign(ctx context.Context) error {
	defer l.cancel()
	if err := l.e.Resign(ctx); err != nil {
		return fmt.Errorf("coord: resigning: %w", err)
	}
	return nil
}

// WriteTable stores plan as the placement table, in a transaction that
// succeeds only while this node's election key is the one it won with;
// otherwise it returns ErrNotLeader. It returns the write's revision.
func (l *Leadership) WriteTable(ctx context.Context, plan Placement) (int64, error) {
	plan.Controller, plan.Term = l.n.name, l.term
	data, err := json.Marshal(plan)
	if err != nil {
		return 0, err
	}
	resp, err := l.n.c.cli.Txn(ctx).
		If(clientv3.Compare(clientv3.CreateRevision(l.key), "=", l.term)).
		Then(clientv3.OpPut(l.n.c.prefix+placementKey, string(data))).
		Commit()
	if err != nil {
		return 0, fmt.Errorf("coord: writing the placement table: %w", err)
	}
	if !resp.Succeeded {
		return 0, ErrNotLeader
	}
	return resp.Header.Revision, nil
}

// validName checks a node name is usable in a key: 1 to 253 of ASCII
// letters, digits, '.', '_' and '-'.
func validName(s string) error {
	if s == "" || len(s) > 253 {
		return fmt.Errorf("coord: node name %q must be 1 to 253 characters", s)
	}
	for _, r := range s {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '.' || r == '_' || r == '-') {
			return fmt.Errorf("coord: node name %q has %q; names use ASCII letters, digits, '.', '_' and '-'", s, r)
		}
	}
	return nil
}
