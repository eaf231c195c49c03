// Package coord keeps Grove's cluster state in etcd: membership (each
// node's lease-bound record), the election of the one placement
// controller, and the placement table the controller writes.
//
// Keys, under Config.Prefix ("/grove/" by default):
//
//	members/<name>   a node's Member record (JSON), bound to its session's
//	                 lease: it disappears when the node stops (lease revoked)
//	                 or dies (lease expired, one TTL after its last keep-alive)
//	election/<lease> the election's candidates (concurrency.Election); the
//	                 oldest is the controller
//	placement        the Placement document, written only by the controller
//	                 in a transaction guarded by its election key
//
// Who owns what: etcd owns the state; a Node owns its session (lease,
// keep-alive) and its own record; a Leadership is the right to write the
// placement key, and only while its election key exists. Watches hand out
// immutable snapshots on channels that keep only the latest one.
package coord

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/groveml/grove/cluster/forward"
	"github.com/groveml/grove/cluster/placement"
	"github.com/groveml/grove/transport/tlsconf"
)

// DefaultPrefix is the key prefix of a cluster's state.
const DefaultPrefix = "/grove/"

// The key names under the prefix.
const (
	membersDir   = "members/"
	electionDir  = "election"
	placementKey = "placement"
)

// Config says how to reach etcd.
type Config struct {
	// Endpoints are etcd's client addresses, host:port or URLs.
	Endpoints []string
	// TLS, when set, connects over TLS with it (CA, client certificate).
	TLS *tls.Config
	// Prefix is the key prefix of the cluster's state (DefaultPrefix when
	// empty); clusters sharing an etcd need their own.
	Prefix string
	// DialTimeout bounds connecting to etcd (5 s when zero).
	DialTimeout time.Duration
	// Logger receives what goes wrong in the background (slog.Default when nil).
	Logger *slog.Logger
}

// Client is a connection to the cluster's state in etcd.
type Client struct {
	cli    *clientv3.Client
	prefix string
	log    *slog.Logger
}

// ErrNotLeader is returned for a placement write by a node that is not
// (or no longer) the controller.
var ErrNotLeader = errors.New("not the cluster controller")

// ErrSessionLost is returned when a node's lease has ended (expired or
// revoked): it is no longer a member and must join again.
var ErrSessionLost = errors.New("cluster session lost")

// Dial connects to etcd and checks it answers within the dial timeout.
func Dial(ctx context.Context, cfg Config) (*Client, error) {
	if len(cfg.Endpoints) == 0 {
		return nil, errors.New("coord: no etcd endpoint")
	}
	if cfg.Prefix == "" {
		cfg.Prefix = DefaultPrefix
	}
	if !strings.HasSuffix(cfg.Prefix, "/") {
		cfg.Prefix += "/"
	}
	if cfg.DialTimeout <= 0 {
		cfg.DialTimeout = 5 * time.Second
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	cli, err := clientv3.New(clientv3.Config{
		Endpoints:   cfg.Endpoints,
		TLS:         cfg.TLS,
		DialTimeout: cfg.DialTimeout,
		Logger:      zap.NewNop(),
		// Keep-alive pings find a dead connection while a watch is idle.
		DialKeepAliveTime:    10 * time.Second,
		DialKeepAliveTimeout: 5 * time.Second,
	})
	if err != nil {
		return nil, fmt.Errorf("coord: connecting to etcd %s: %w", strings.Join(cfg.Endpoints, ","), err)
	}
	// clientv3.New does not fail on an unreachable endpoint; a read does.
	rctx, cancel := context.WithTimeout(ctx, cfg.DialTimeout)
	defer cancel()
	if _, err := cli.Get(rctx, cfg.Prefix+placementKey); err != nil {
		cli.Close()
		return nil, fmt.Errorf("coord: reading from etcd %s: %w", strings.Join(cfg.Endpoints, ","), err)
	}
	return &Client{cli: cli, prefix: cfg.Prefix, log: cfg.Logger}, nil
}

// Close closes the connection. Nodes joined through it stop their
// keep-alives without revoking their leases: to others they are gone one
// TTL later, as after a crash (Node.Leave tells them at once).
func (c *Client) Close() error { return c.cli.Close() }

// Member is one node's record.
type Member struct {
	// Member is what placement reads: name, memory, draining, held models.
	placement.Member
	// Advertise is the host:port its peers reach it at.
	Advertise string `json:"advertise"`
	// Models describes each path it has ready (a model's, a version's, a
	// versioned entry's), for the other nodes to answer its metadata.
	Models map[string]forward.ModelInfo `json:"models,omitempty"`
}

// Members is a snapshot of the membership.
type Members struct {
	// Revision is the etcd revision it was read at.
	Revision int64
	// List holds the members, sorted by name.
	List []Member
}

// Names returns the members' names, sorted.
func (m Members) Names() []string {
	out := make([]string, len(m.List))
	for i, x := range m.List {
		out[i] = x.Name
	}
	return out
}

// Placement is the document stored under the placement key.
type Placement struct {
	// Plan is the table and the models short of nodes.
	placement.Plan
	// Controller is the name of the node that wrote it.
	Controller string `json:"controller"`
	// Term is the etcd revision at which the writer became the controller;
	// a later controller writes a larger one.
	Term int64 `json:"term"`
	// Revision is the etcd revision of the write (not stored: read).
	Revision int64 `json:"-"`
}

// Members reads the membership. A record that does not decode, names
// another node than its key, or fails placement.Member.Validate is left
// out and logged.
func (c *Client) Members(ctx context.Context) (Members, error) {
	resp, err := c.cli.Get(ctx, c.prefix+membersDir, clientv3.WithPrefix())
	if err != nil {
		return Members{}, fmt.Errorf("coord: reading members: %w", err)
	}
	out := Members{Revision: resp.Header.Revision}
	for _, kv := range resp.Kvs {
		var m Member
		err := json.Unmarshal(kv.Value, &m)
		switch {
		case err != nil:
		case m.Name != strings.TrimPrefix(string(kv.Key), c.prefix+membersDir):
			err = fmt.Errorf("the record names %q", m.Name)
		default:
			err = m.Validate()
		}
		if err != nil { // one bad record must not stop placement for all
			c.log.Warn("cluster member record ignored", "key", string(kv.Key), "err", err)
			continue
		}
		out.List = append(out.List, m)
	}
	slices.SortFunc(out.List, func(a, b Member) int { return strings.Compare(a.Name, b.Name) })
	return out, nil
}

// WatchMembers sends the membership now and after every change until ctx
// is done, then closes the channel. A slow reader misses intermediate
// snapshots, never the latest.
func (c *Client) WatchMembers(ctx context.Context) <-chan Members {
	return watch(ctx, c, c.prefix+membersDir, true, c.Members)
}

// Table reads the placement document; Revision 0 and an empty table when
// none was written yet.
func (c *Client) Table(ctx context.Context) (Placement, error) {
	resp, err := c.cli.Get(ctx, c.prefix+placementKey)
	if err != nil {
		return Placement{}, fmt.Errorf("coord: reading the placement table: %w", err)
	}
	p := Placement{Plan: placement.Plan{Table: placement.Table{}}}
	if len(resp.Kvs) == 0 {
		return p, nil
	}
	if err := json.Unmarshal(resp.Kvs[0].Value, &p); err != nil {
		return Placement{}, fmt.Errorf("coord: the placement table in etcd is not valid: %w", err)
	}
	if p.Table == nil {
		p.Table = placement.Table{}
	}
	p.Revision = resp.Kvs[0].ModRevision
	return p, nil
}

// WatchTable sends the placement document now and after every write until
// ctx is done, then closes the channel; a slow reader gets the latest.
func (c *Client) WatchTable(ctx context.Context) <-chan Placement {
	return watch(ctx, c, c.prefix+placementKey, false, c.Table)
}

// Leader returns the controller's name, "" when there is none.
func (c *Client) Leader(ctx context.Context) (string, error) {
	resp, err := c.cli.Get(ctx, c.prefix+electionDir+"/", clientv3.WithFirstCreate()...)
	if err != nil {
		return "", fmt.Errorf("coord: reading the controller: %w", err)
	}
	if len(resp.Kvs) == 0 {
		return "", nil
	}
	return string(resp.Kvs[0].Value), nil
}

// WatchLeader sends the controller's name ("" for none) now and whenever
// it changes, until ctx is done; then it closes the channel.
func (c *Client) WatchLeader(ctx context.Context) <-chan string {
	return watch(ctx, c, c.prefix+electionDir+"/", true, c.Leader)
}

// watch reads with read now and after every change of key (a prefix when
// prefix is set), sending what it reads to the returned channel, which
// keeps only the latest unread value; equal consecutive values are sent
// once. Read errors are logged and retried after a pause.
func watch[T any](ctx context.Context, c *Client, key string, prefix bool, read func(context.Context) (T, error)) <-chan T {
	out := make(chan T, 1)
	go func() {
		defer close(out)
		var last []byte
		send := func(v T) {
			b, _ := json.Marshal(v) // compares values; T is plain data
			if last != nil && string(b) == string(last) {
				return
			}
			last = b
			select { // keep only the latest
			case <-out:
			default:
			}
			out <- v
		}
		opts := []clientv3.OpOption{}
		if prefix {
			opts = append(opts, clientv3.WithPrefix())
		}
		for ctx.Err() == nil {
			wctx, cancel := context.WithCancel(clientv3.WithRequireLeader(ctx))
			wch := c.cli.Watch(wctx, key, opts...) // before the read: no change is missed
			v, err := read(ctx)
			if err != nil {
				cancel()
				if ctx.Err() == nil {
					c.log.Warn("cluster watch: read failed; retrying", "key", key, "err", err)
				}
				sleep(ctx, time.Second)
				continue
			}
			send(v)
			for resp := range wch {
				if resp.Err() != nil {
					break
				}
				if v, err = read(ctx); err != nil {
					break
				}
				send(v)
			}
			cancel()
		}
	}()
	return out
}

// sleep waits d or until ctx is done.
func sleep(ctx context.Context, d time.Duration) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
	case <-t.C:
	}
}

// TLSConfig returns the TLS configuration of an etcd client: the CAs of
// caFile (the system's when empty) and, when certFile and keyFile are
// given, the client certificate for etcd's --client-cert-auth. The error
// names the file at fault.
func TLSConfig(caFile, certFile, keyFile string) (*tls.Config, error) {
	c := &tls.Config{MinVersion: tls.VersionTLS12}
	if caFile != "" {
		pem, err := tlsconf.ReadFile(caFile)
		if err != nil {
			return nil, fmt.Errorf("coord: reading the etcd CA file: %w", err)
		}
		c.RootCAs = x509.NewCertPool()
		if !c.RootCAs.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("coord: the etcd CA file %s holds no PEM certificate", caFile)
		}
	}
	if (certFile == "") != (keyFile == "") {
		return nil, errors.New("coord: an etcd client certificate needs both its file and its key file")
	}
	if certFile != "" {
		pair, err := tlsconf.LoadX509KeyPair(certFile, keyFile)
		if err != nil {
			return nil, fmt.Errorf("coord: the etcd client certificate %s and key %s: %w", certFile, keyFile, err)
		}
		c.Certificates = []tls.Certificate{pair}
	}
	return c, nil
}
