package main

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"
)

// The cluster scenarios: a 2-node Grove cluster on loopback, on Debian's
// etcd (the etcd binary on PATH; make deps installs etcd-server). Node
// "local" has the memory for every model of the bucket and holds them all;
// node "fwd" has a 1-byte budget, holds nothing, and forwards every
// request to "local" over the Forward service (plaintext peers: both
// nodes run with --insecure-no-auth on loopback). serverGroveLocal's rows
// load "local" directly, serverGroveFwd's load "fwd": the same request
// through one more hop. Their difference at b1c1 is the p50 a forwarded
// request adds, judged against the grpc-go fixed-answer floor's p50
// (floor-grpc at b1c1) of the same run plus 50 µs (issue 17).
const (
	serverGroveLocal = "grove-local"
	serverGroveFwd   = "grove-fwd"
)

// clusterShapes are grove-local's and grove-fwd's default scenarios.
var clusterShapes = []string{"b1c1", "b1c32"}

// forwardTargetSlack is what a forwarded request may add over the gRPC
// floor's p50 at b1c1.
const forwardTargetSlack = 50 * time.Microsecond

// clusterLeaseTTL is the nodes' --cluster-lease-ttl.
const clusterLeaseTTL = "2s"

// startEtcd starts a single-member etcd on free loopback ports with its
// data in dir and waits until it serves clients; it returns the child and
// its client address. The child, if not nil, must be stopped by the caller.
func startEtcd(ctx context.Context, dir string, timeout time.Duration) (*child, string, error) {
	bin, err := exec.LookPath("etcd")
	if err != nil {
		return nil, "", fmt.Errorf("the etcd binary is not on PATH (%v): make deps installs Debian's etcd-server", err)
	}
	client, err := freeAddr()
	if err != nil {
		return nil, "", err
	}
	peer, err := freeAddr()
	if err != nil {
		return nil, "", err
	}
	args := []string{"--name", "grovebench", "--data-dir", filepath.Join(dir, "etcd-data"),
		"--listen-client-urls", "http://" + client, "--advertise-client-urls", "http://" + client,
		"--listen-peer-urls", "http://" + peer, "--initial-advertise-peer-urls", "http://" + peer,
		"--initial-cluster", "grovebench=http://" + peer, "--initial-cluster-state", "new",
		"--heartbeat-interval", "20", "--election-timeout", "200", "--logger", "zap", "--log-outputs", "stderr"}
	logPath := filepath.Join(dir, "etcd.log")
	c, err := startChild("etcd", exec.Command(bin, args...), logPath)
	if err != nil {
		return nil, "", err
	}
	deadline := time.Now().Add(timeout)
	for {
		// etcd logs "serving client traffic ..." once it serves clients.
		if b, _ := os.ReadFile(logPath); strings.Contains(string(b), "serving client traffic") {
			return c, client, nil
		}
		switch {
		case c.exited():
			return c, "", fmt.Errorf("etcd exited (%v) before serving; log tail:\n%s", c.err, c.logTail(20))
		case ctx.Err() != nil:
			return c, "", ctx.Err()
		case time.Now().After(deadline):
			return c, "", fmt.Errorf("etcd not serving after %v; log tail:\n%s", timeout, c.logTail(20))
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// clusterNodeArgs are the grove serve arguments of a cluster node.
func clusterNodeArgs(etcd, name string, budget int64) ([]string, error) {
	advertise, err := freeAddr()
	if err != nil {
		return nil, err
	}
	return []string{"--cluster-etcd-endpoints", etcd, "--cluster-node-name", name, "--cluster-advertise", advertise,
		"--cluster-lease-ttl", clusterLeaseTTL, "--memory-budget-bytes", fmt.Sprint(budget), "--insecure-no-auth",
		// A draining node waits, up to the drain timeout, for its models to
		// be ready on another node; "local"'s never will be ("fwd" has no
		// room, and stops first), so the wait is kept under stopGrace.
		"--drain-timeout", "5s"}, nil
}

// startCluster starts etcd and the nodes "local" (every model) and "fwd"
// (none) on bucket, and waits until "fwd" answers the check request, by
// forwarding it. It returns the children to stop (even on error) and the
// two nodes' endpoints.
func startCluster(ctx context.Context, bin, bucket, dir string, groveArgs []string, rows [][]float64, want []float64,
	timeout, reqTimeout time.Duration, logf func(string, ...any)) (children []*child, local, fwd *endpoint, err error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, nil, nil, err
	}
	e, etcdAddr, err := startEtcd(ctx, dir, timeout)
	if e != nil {
		children = append(children, e)
	}
	if err != nil {
		return children, nil, nil, err
	}
	logf("etcd ready at %s", etcdAddr)
	for _, n := range []struct {
		name, server string
		budget       int64
		ep           **endpoint
	}{
		{"local", serverGroveLocal, 1 << 30, &local},
		{"fwd", serverGroveFwd, 1, &fwd},
	} {
		args, err := clusterNodeArgs(etcdAddr, n.name, n.budget)
		if err != nil {
			return children, nil, nil, err
		}
		g, ep, err := startGrove(ctx, n.server, bin, bucket, filepath.Join(dir, "cache-"+n.name), filepath.Join(dir, n.server+".log"),
			append(append([]string{}, groveArgs...), args...), timeout)
		if g != nil {
			children = append(children, g)
		}
		if err != nil {
			return children, nil, nil, fmt.Errorf("node %s: %w", n.name, err)
		}
		*n.ep = ep
	}
	local.api = "POST /v1/inference (cluster node holding the model)"
	fwd.api = "POST /v1/inference (cluster node forwarding to grove-local)"
	// "fwd" is ready at once (it has nothing to load); it answers once the
	// placement table lists the model ready on "local".
	deadline := time.Now().Add(timeout)
	for _, ep := range []*endpoint{local, fwd} {
		for {
			err := checkAnswer(ctx, ep, rows, want, reqTimeout)
			if err == nil {
				break
			}
			if ctx.Err() != nil || time.Now().After(deadline) {
				return children, nil, nil, fmt.Errorf("%s did not answer the check request within %v: %w", ep.server, timeout, err)
			}
			time.Sleep(100 * time.Millisecond)
		}
	}
	return children, local, fwd, nil
}

// forwardCost compares grove-fwd with grove-local.
type forwardCost struct {
	// AddedP50 is grove-fwd's p50 less grove-local's at b1c1: what the hop
	// adds; Target is floor-grpc's p50 at b1c1 plus forwardTargetSlack (0:
	// no floor row).
	AddedP50           time.Duration `json:"added_p50_ns"`
	LocalP50, FwdP50   time.Duration
	FloorGRPCP50       time.Duration `json:"floor_grpc_p50_ns,omitempty"`
	Target             time.Duration `json:"target_ns,omitempty"`
	C32Ratio           float64       `json:"b1c32_ratio,omitempty"`
	LocalRate, FwdRate float64
	// FloorHop is floor-fwd's p50 less floor's (HTTP) at b1c1: what one
	// hop through a bare grpc-go proxy process adds (0: not measured);
	// FloorC32Ratio is floor-fwd's req/s over floor's at b1c32.
	FloorHop      time.Duration `json:"floor_hop_p50_ns,omitempty"`
	FloorC32Ratio float64       `json:"floor_b1c32_ratio,omitempty"`
}

// forwardCost is nil unless grove-fwd and grove-local both ran at b1c1.
func (r *report) forwardCost() *forwardCost {
	l, f := r.find(serverGroveLocal, 1, 1), r.find(serverGroveFwd, 1, 1)
	if l == nil || f == nil {
		return nil
	}
	c := &forwardCost{AddedP50: f.P50 - l.P50, LocalP50: l.P50, FwdP50: f.P50}
	if g := r.find(serverFloorGRPC, 1, 1); g != nil {
		c.FloorGRPCP50, c.Target = g.P50, g.P50+forwardTargetSlack
	}
	if l, f := r.find(serverGroveLocal, 1, 32), r.find(serverGroveFwd, 1, 32); l != nil && f != nil && l.ReqPerSec > 0 {
		c.C32Ratio, c.LocalRate, c.FwdRate = f.ReqPerSec/l.ReqPerSec, l.ReqPerSec, f.ReqPerSec
	}
	if h, p := r.find(serverFloor, 1, 1), r.find(serverFloorFwd, 1, 1); h != nil && p != nil {
		c.FloorHop = p.P50 - h.P50
	}
	if h, p := r.find(serverFloor, 1, 32), r.find(serverFloorFwd, 1, 32); h != nil && p != nil && h.ReqPerSec > 0 {
		c.FloorC32Ratio = p.ReqPerSec / h.ReqPerSec
	}
	return c
}

// lines are the forwarding lines of the report.
func (c *forwardCost) lines() []string {
	s := fmt.Sprintf("Forwarding at batch 1, conc 1: p50 %s through a node that forwards vs %s on the node holding the model: %+.1f µs",
		fmtDur(c.FwdP50), fmtDur(c.LocalP50), float64(c.AddedP50)/float64(time.Microsecond))
	if c.Target > 0 {
		verdict := "within"
		if c.AddedP50 > c.Target {
			verdict = "ABOVE"
		}
		s += fmt.Sprintf(" (target: at most the grpc-go floor's p50 %s + 50 µs = %s: %s)", fmtDur(c.FloorGRPCP50), fmtDur(c.Target), verdict)
	}
	out := []string{s}
	if c.FloorHop != 0 {
		out = append(out, fmt.Sprintf("Forwarding floor at batch 1, conc 1: one hop through a bare grpc-go proxy process (floor-fwd) adds %+.1f µs to the HTTP floor's p50",
			float64(c.FloorHop)/float64(time.Microsecond)))
	}
	if c.FloorC32Ratio > 0 {
		out = append(out, fmt.Sprintf("Forwarding floor at batch 1, conc 32: floor-fwd passes on %.2fx the HTTP floor's req/s", c.FloorC32Ratio))
	}
	if c.C32Ratio > 0 {
		out = append(out, fmt.Sprintf("Forwarding at batch 1, conc 32: %s req/s through the forwarding node vs %s on the node holding the model (%.2fx)",
			fmtRate(c.FwdRate), fmtRate(c.LocalRate), c.C32Ratio))
	}
	return out
}

// forwardABWindow is the measured window of each target in a round of the
// forwarding A/B (after a warm-up of a quarter of it).
const forwardABWindow = 400 * time.Millisecond

// forwardAB is the forwarding target measured interleaved: the three p50s
// the target compares (grove-local and grove-fwd over HTTP, floor-grpc)
// at batch 1, concurrency 1, in rounds of a short window on each in turn,
// the order rotating each round, with the latencies of every round pooled
// per target. The scenarios run one after the other for seconds each, and
// the machine's background load moves a single scenario's p50 by 20 µs
// from one to the next; interleaving gives all three the same load.
type forwardAB struct {
	Rounds       int           `json:"rounds"`
	Window       time.Duration `json:"window_ns"`
	LocalP50     time.Duration `json:"local_p50_ns"`
	FwdP50       time.Duration `json:"fwd_p50_ns"`
	FloorGRPCP50 time.Duration `json:"floor_grpc_p50_ns"`
	AddedP50     time.Duration `json:"added_p50_ns"`
	Target       time.Duration `json:"target_ns"`
	// Samples are the requests pooled per target, Errors the failed ones
	// (local, fwd, floor-grpc).
	Samples [3]int `json:"samples"`
	Errors  [3]int `json:"errors"`
}

// runForwardAB measures forwardAB on targets with o.forwardABRounds
// rounds.
func runForwardAB(ctx context.Context, targets map[string]*endpoint, row []float64, o options) *forwardAB {
	servers := [3]string{serverGroveLocal, serverGroveFwd, serverFloorGRPC}
	var pools [3]abPool
	ab := &forwardAB{Rounds: o.forwardABRounds, Window: forwardABWindow}
	err := interleave(ctx, o.forwardABRounds, len(servers), func(i int) error {
		res := runLoad(ctx, scenarioSpec(targets[servers[i]], row, 1, 1, forwardABWindow/4, forwardABWindow, o))
		pools[i].add(res, cpuUse{}, forwardABWindow)
		return nil
	})
	if err != nil {
		return ab
	}
	for i := range pools {
		ab.Samples[i], ab.Errors[i] = len(pools[i].Latencies), pools[i].Errors
	}
	ab.LocalP50, ab.FwdP50, ab.FloorGRPCP50 = pools[0].percentile(50), pools[1].percentile(50), pools[2].percentile(50)
	ab.AddedP50, ab.Target = ab.FwdP50-ab.LocalP50, ab.FloorGRPCP50+forwardTargetSlack
	return ab
}

// lines are the forwarding A/B's lines of the report.
func (ab *forwardAB) lines() []string {
	verdict := "within"
	if ab.AddedP50 > ab.Target {
		verdict = "ABOVE"
	}
	return []string{fmt.Sprintf("Forwarding at batch 1, conc 1, interleaved (%d rounds of %v on each): p50 %s through a node that forwards vs %s on the node holding the model: %+.1f µs (target: at most the grpc-go floor's p50 %s + 50 µs = %s: %s; %d/%d/%d requests, %d/%d/%d errors)",
		ab.Rounds, ab.Window, fmtDur(ab.FwdP50), fmtDur(ab.LocalP50), float64(ab.AddedP50)/float64(time.Microsecond),
		fmtDur(ab.FloorGRPCP50), fmtDur(ab.Target), verdict, ab.Samples[0], ab.Samples[1], ab.Samples[2], ab.Errors[0], ab.Errors[1], ab.Errors[2])}
}
