package main

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"slices"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.opentelemetry.io/otel/trace"

	"github.com/groveml/grove/actors"
	clusternode "github.com/groveml/grove/actors/node"
	"github.com/groveml/grove/auth"
	"github.com/groveml/grove/cluster/coord"
	"github.com/groveml/grove/cluster/forward"
	"github.com/groveml/grove/conf"
	"github.com/groveml/grove/conf/bucket"
	"github.com/groveml/grove/transport/h2guard"
	"github.com/groveml/grove/transport/tlsconf"
)

// startClusterNode dials etcd and makes the node's agent (docs/cluster.md),
// whose forward client presents the server's certificate to its peers and
// verifies theirs against tls.client_ca_file; without TLS it dials them in
// plaintext (insecure_no_auth). The etcd client is closed last but one
// (before the bucket), after the agent has left.
func startClusterNode(ctx context.Context, cfg conf.Server, b bucket.Bucket, tlsFiles *tlsconf.Reloader, g *group,
	reg prometheus.Registerer, log *slog.Logger) (*clusternode.Agent, error) {
	c := cfg.Cluster
	var etcdTLS *tls.Config
	if c.EtcdTLS {
		var err error
		if etcdTLS, err = coord.TLSConfig(c.EtcdCAFile, c.EtcdCertFile, c.EtcdKeyFile); err != nil {
			return nil, fmt.Errorf("cluster etcd TLS: %w", err)
		}
	}
	if tlsFiles != nil && cfg.TLS.ClientCAFile != "" {
		if err := checkNodeCertificate(tlsFiles.Current(), c.NodeName); err != nil {
			return nil, fmt.Errorf("cluster: %w", err)
		}
	}
	dctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	cli, err := coord.Dial(dctx, coord.Config{Endpoints: c.EtcdEndpoints, TLS: etcdTLS, Prefix: c.EtcdPrefix,
		Logger: log.With("component", "cluster")})
	if err != nil {
		return nil, fmt.Errorf("cluster: connecting to etcd %v: %w", c.EtcdEndpoints, err)
	}
	var peerTLS *tls.Config
	if tlsFiles != nil && cfg.TLS.ClientCAFile != "" {
		if peerTLS, err = forward.ClientTLS(cfg.TLS.ClientCAFile, tlsFiles.Current); err != nil {
			_ = cli.Close()
			return nil, fmt.Errorf("cluster: peers' TLS: %w", err)
		}
	}
	fc := forward.NewClient(forward.ClientOptions{TLS: peerTLS, MaxRequestBytes: grpcLimit(cfg.MaxBodyBytes),
		Logger: log.With("component", "cluster-forward")})
	g.add("etcd", component{name: "etcd", interrupt: func(context.Context) {
		fc.Close()
		if err := cli.Close(); err != nil {
			log.Warn("closing the etcd client", "err", err)
		}
	}})
	return clusternode.New(clusternode.Config{Client: cli, Name: c.NodeName, Advertise: c.Advertise,
		BudgetBytes: cfg.MemoryBudgetBytes, LeaseTTL: c.LeaseTTL, MemoryFactor: c.MemoryFactor, IdleUnloadAfter: cfg.IdleUnloadAfter, Bucket: b, Forward: fc,
		Logger: log, Registerer: reg})
}

// checkNodeCertificate says what keeps the peers from admitting a node
// presenting cert as nodeName: the peers' forward servers admit a client
// certificate whose name (auth.CertificateName: first DNS SAN, else URI
// SAN, else CN) is a member's node name, and TLS needs it to allow client
// authentication. Without the check every request the node forwards would
// fail PERMISSION_DENIED or in the handshake, long after start.
func checkNodeCertificate(cert *tls.Certificate, nodeName string) error {
	if cert == nil || len(cert.Certificate) == 0 {
		return errors.New("no server certificate to present to the peers (tls.cert_file)")
	}
	leaf := cert.Leaf
	if leaf == nil {
		var err error
		if leaf, err = x509.ParseCertificate(cert.Certificate[0]); err != nil {
			return fmt.Errorf("tls.cert_file: %w", err)
		}
	}
	if name := auth.CertificateName(leaf); name != nodeName {
		return fmt.Errorf("tls.cert_file names %q (its first DNS SAN, else URI SAN, else CN), but cluster.node_name is %q: "+
			"peers admit a node by its certificate's name, so they would refuse every request this node forwards; "+
			"give the certificate the node name as its first DNS SAN, or set cluster.node_name (--cluster-node-name) to %q", name, nodeName, name)
	}
	if len(leaf.ExtKeyUsage) > 0 && !slices.Contains(leaf.ExtKeyUsage, x509.ExtKeyUsageClientAuth) && !slices.Contains(leaf.ExtKeyUsage, x509.ExtKeyUsageAny) {
		return errors.New("tls.cert_file lacks the client auth extended key usage: the node presents it to its peers as a client certificate, which they would refuse; issue it with both server auth and client auth")
	}
	return nil
}

// serveCluster adds the forward server on cluster.advertise (mTLS with
// the server's certificate and tls.client_ca_file, peers must be members;
// plaintext only with insecure_no_auth; its rapid-reset guard counted in
// reg) and the agent, which on shutdown
// marks the node draining, waits for its models to be ready elsewhere
// (within drain_timeout) and leaves, before the servers stop.
func serveCluster(cfg conf.Server, node *clusternode.Agent, sys *actors.System, tlsFiles *tlsconf.Reloader, g *group, reg prometheus.Registerer, log *slog.Logger, tp trace.TracerProvider) error {
	opts := forward.ServerOptions{Node: node.Name(), Members: node.IsMember, ConfirmMember: node.ConfirmMember, MaxMessageBytes: grpcLimit(cfg.MaxBodyBytes),
		Logger: log.With("component", "cluster-forward"), TracerProvider: tp, RapidReset: h2guard.Options{Registerer: reg}}
	switch {
	case tlsFiles != nil && cfg.TLS.ClientCAFile != "":
		peers, err := tlsconf.New(tlsconf.Files{CertFile: cfg.TLS.CertFile, KeyFile: cfg.TLS.KeyFile,
			ClientCAFile: cfg.TLS.ClientCAFile, ClientAuth: tlsconf.ClientAuthRequire})
		if err != nil {
			return fmt.Errorf("cluster: peers' TLS: %w", err)
		}
		g.add("tls reload", watchTLS(peers, cfg.TLS.ReloadInterval, log))
		opts.TLS = peers.ServerConfig("h2")
	case cfg.InsecureNoAuth:
		opts.AllowUnauthenticatedPeers = true
		log.Warn("cluster peers served WITHOUT AUTHENTICATION on cluster.advertise (insecure_no_auth): anyone who reaches the port can run models; configure tls.cert_file, tls.key_file and tls.client_ca_file for mTLS between nodes",
			"advertise", cfg.Cluster.Advertise)
	default:
		return fmt.Errorf("cluster: peers cannot be authenticated: configure tls.cert_file, tls.key_file and tls.client_ca_file (mTLS between nodes), or give insecure_no_auth")
	}
	fs, err := forward.NewServer(sys, opts)
	if err != nil {
		return err
	}
	ln, err := net.Listen("tcp", listenAddr(cfg.Cluster.Advertise))
	if err != nil {
		return fmt.Errorf("cluster: listening for peers on %s: %w", cfg.Cluster.Advertise, err)
	}
	g.add("cluster forward", component{name: "cluster forward",
		execute: func() error {
			if err := fs.Serve(ln); err != nil {
				return fmt.Errorf("cluster forward server: %w", err)
			}
			return nil
		},
		interrupt: func(ctx context.Context) {
			// Calls in flight are answered, within the group's stop deadline.
			stopped := make(chan struct{})
			go func() {
				fs.GracefulStop()
				close(stopped)
			}()
			select {
			case <-stopped:
			case <-ctx.Done():
				log.Warn("cluster forward server: calls still in flight at the stop deadline; closing their connections")
				fs.Stop()
				<-stopped
			}
		},
	})
	runCtx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	g.add("cluster", component{name: "cluster",
		execute: func() error {
			defer close(done)
			return node.Run(runCtx, sys)
		},
		interrupt: func(ctx context.Context) {
			if err := node.Drain(ctx); err != nil {
				log.Warn("cluster drain ended before every model was ready elsewhere", "err", err)
			}
			lctx, lcancel := context.WithTimeout(context.Background(), 2*time.Second)
			if err := node.Leave(lctx); err != nil {
				log.Warn("leaving the cluster", "err", err)
			}
			lcancel()
			cancel()
			select { // a join waiting for an unreachable etcd ends with runCtx
			case <-done:
			case <-time.After(2 * time.Second):
				log.Warn("the cluster agent did not stop within 2s of leaving")
			}
		},
	})
	log.Info("cluster node", "name", node.Name(), "advertise", cfg.Cluster.Advertise, "etcd", cfg.Cluster.EtcdEndpoints,
		"budget_bytes", cfg.MemoryBudgetBytes, "peer_tls", opts.TLS != nil)
	return nil
}

// listenAddr is the address to listen on for an advertised host:port: the
// same port on every interface, since the advertised host may be a name
// (a Kubernetes pod's) that the listener cannot bind; a loopback address,
// localhost included (conf.IsLoopback), stays on loopback.
func listenAddr(advertise string) string {
	_, port, err := net.SplitHostPort(advertise)
	if err != nil || conf.IsLoopback(advertise) {
		return advertise
	}
	return net.JoinHostPort("", port)
}

// toMap is a status document as its JSON members, so that sections can be
// added beside them.
func toMap(v any) (map[string]json.RawMessage, error) {
	data, err := json.Marshal(v)
	if err != nil {
		return nil, err
	}
	var m map[string]json.RawMessage
	return m, json.Unmarshal(data, &m)
}
