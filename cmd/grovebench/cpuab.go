package main

// Issue 32's targets, measured interleaved (--cpu-ab-rounds; interleave.go
// says why). After the scenarios, while their servers still run, three
// groups of rows, each interleaved within itself for the same rounds:
//
//   - b1c32: grove, grove-nethttp, grove+log, grove-tls and the net/http
//     floor over REST at concurrency 32: grove's req/s over the floor's
//     (target ≥ restFloorTarget), and the CPU per request of each, from
//     their processes' /proc times (grove's at most cpuFloorFactor times
//     the floor's plus the model's own forward time per row, the batch-64
//     in-process forward over 64); the same two for grove-nethttp, as
//     comparisons with no target (the targets are the default build's);
//     and issue 32's "no regression elsewhere": grove-tls's (TLS and a
//     bearer token) and grove+log's (prediction log FULL) req/s over
//     grove's (targets ≥ tlsTarget and ≥ predLogTarget), with the CPU
//     per request of each beside them;
//   - b1c1: grove, grove-nethttp, direct, grove-grpc, floor and floor-grpc
//     at concurrency 1: grove's req/s over direct's (target ≥
//     c1DirectTarget: what the actor layer costs), and the p50 each
//     protocol adds over its floor plus the batch-1 forward (target: gRPC's
//     at most REST's); grove-nethttp's REST overhead the same way, beside
//     grove's (no target);
//   - b1c64: grove-deep, grove-deep-nobatch, grove (pctr) and
//     grove-nobatch at concurrency 64: dynamic batching's gain on
//     rank_deep (target ≥ batchingTarget) and on pctr (no target: the
//     transport bounds it), with the forward calls per request and rows
//     per forward call grove ran (its OIP statistics: /metrics has no
//     counter of forward calls).
//
// A group runs the rows whose servers run (--scenarios); a target whose
// rows did not run is reported n/a. The overload target has its own A/B
// on the overload scenario's grove (overload.go).

import (
	"context"
	"fmt"
	"io"
	"strings"
	"time"
)

const (
	// cpuABWindow is a row's measured window in a round of the b1c32 and
	// b1c64 groups, cpuABC1Window in the b1c1 group's (each after a
	// warm-up of a quarter of it).
	cpuABWindow   = time.Second
	cpuABC1Window = 400 * time.Millisecond
	// restFloorTarget is grove's b1c32 req/s over the floor's.
	restFloorTarget = 0.70
	// cpuFloorFactor bounds grove's CPU per request at b1c32: at most this
	// times the floor's, plus the model's forward time per row.
	cpuFloorFactor = 1.5
	// c1DirectTarget is grove's b1c1 req/s over the direct server's.
	c1DirectTarget = 0.95
	// batchingTarget is dynamic batching's gain at batchingShape on the
	// model whose forward costs more than its request (rank_deep).
	batchingTarget = 3.0
	// tlsTarget is grove-tls's b1c32 req/s over plain grove's (issue 32:
	// no regression from TLS and the bearer token); predLogTarget
	// (predlog.go) is grove+log's.
	tlsTarget = 0.90
)

// abRowDef is one row of the A/B: a server at batch 1 and concurrency conc.
type abRowDef struct {
	server string
	conc   int
}

// cpuABGroup is a set of rows interleaved with each other.
type cpuABGroup struct {
	name   string
	window time.Duration
	rows   []abRowDef
}

// cpuABGroups are the A/B's groups, run one after the other.
var cpuABGroups = []cpuABGroup{
	{"b1c32", cpuABWindow, []abRowDef{{serverGrove, 32}, {serverGroveNetHTTP, 32}, {serverGroveLog, 32}, {serverGroveTLS, 32}, {serverFloor, 32}}},
	{"b1c1", cpuABC1Window, []abRowDef{{serverGrove, 1}, {serverGroveNetHTTP, 1}, {serverDirect, 1}, {serverGroveGRPC, 1}, {serverFloor, 1}, {serverFloorGRPC, 1}}},
	{"b1c64", cpuABWindow, []abRowDef{{serverGroveDeep, 64}, {serverGroveDeepNoBatch, 64}, {serverGrove, 64}, {serverGroveNoBatch, 64}}},
}

// countedModel is the OIP model name whose statistics count a server's
// forward calls ("" for the servers that are not grove).
func countedModel(server string) string {
	switch server {
	case serverGrove, serverGroveNetHTTP, serverGroveGRPC, serverGroveNoBatch:
		return grpcModel
	case serverGroveDeep, serverGroveDeepNoBatch:
		return strings.TrimSuffix(deepPath, "/")
	}
	return ""
}

// abRow is one row of the A/B, its windows pooled.
type abRow struct {
	Server string        `json:"server"`
	API    string        `json:"api"`
	Batch  int           `json:"batch"`
	Conc   int           `json:"concurrency"`
	Window time.Duration `json:"window_ns"`
	abPool
	P50 time.Duration `json:"p50_ns"`
	P99 time.Duration `json:"p99_ns"`
	// Model names the model whose OIP statistics gave Counts, what grove
	// ran over the row's runs (nil for the servers that are not grove).
	Model  string       `json:"model,omitempty"`
	Counts *modelCounts `json:"counts,omitempty"`
}

// cpuAB is issue 32's targets measured interleaved.
type cpuAB struct {
	Rounds int      `json:"rounds"`
	Rows   []*abRow `json:"rows"`
	// The targets (nil: their rows did not run).
	REST     *abRatio     `json:"rest_b1c32,omitempty"`
	CPU      *cpuTarget   `json:"cpu_b1c32,omitempty"`
	C1       *abRatio     `json:"direct_b1c1,omitempty"`
	Overhead *c1Overheads `json:"overhead_b1c1,omitempty"`
	// RESTNetHTTP, CPUNetHTTP and OverheadNetHTTP are grove-nethttp's,
	// comparisons with no target: its b1c32 req/s over the floor's, its
	// CPU per request there, and its REST overhead at b1c1 beside grove's.
	RESTNetHTTP     *abRatio          `json:"rest_nethttp_b1c32,omitempty"`
	CPUNetHTTP      *cpuTarget        `json:"cpu_nethttp_b1c32,omitempty"`
	OverheadNetHTTP *netHTTPOverheads `json:"overhead_nethttp_b1c1,omitempty"`
	Deep            *abRatio          `json:"batching_rank_deep,omitempty"`
	PCTR            *abRatio          `json:"batching_pctr,omitempty"`
	// PCTRCounts is what grove ran for the pctr row at batchingShape.
	PCTRCounts *modelCounts `json:"pctr_counts,omitempty"`
	// TLS and PredLog are grove-tls's and grove+log's b1c32 req/s over
	// plain grove's, issue 32's "no regression elsewhere" targets.
	TLS     *costRatio `json:"tls_b1c32,omitempty"`
	PredLog *costRatio `json:"prediction_log_b1c32,omitempty"`
	Error   string     `json:"error,omitempty"`
}

// abRatio is row A's req/s over row B's.
type abRatio struct {
	A, B         string
	ARate, BRate float64
	Ratio        float64
	// Target is the least Ratio that meets it (0: reported, not judged).
	Target float64
}

// costRatio is a variant of grove against plain grove (abRatio), with
// the CPU per request of each (0: unknown).
type costRatio struct {
	abRatio
	ACPU, BCPU time.Duration
}

// cpuTarget is the CPU per request at b1c32 of Server (grove or
// grove-nethttp; the Grove fields are its figures) against the floor's,
// and for grove its target.
type cpuTarget struct {
	Server                string
	GroveCores, GroveRate float64
	FloorCores, FloorRate float64
	// Grove and Floor are each's CPU per request; Forward the model's own
	// forward time per row (from a forward of ForwardBatch rows; 0: not
	// measured); Target is cpuFloorFactor × Floor + Forward.
	Grove, Floor, Forward time.Duration
	ForwardBatch          int
	Target                time.Duration
	// NoTarget says the figures are reported, not judged (grove-nethttp's):
	// Forward, ForwardBatch and Target are then 0.
	NoTarget bool
}

// c1Overheads compares what grove adds over its transport floor at
// concurrency 1, per protocol: each p50 less the floor's p50 and the
// batch-1 forward.
type c1Overheads struct {
	RESTP50, FloorP50, GRPCP50, FloorGRPCP50 time.Duration
	// Forward is the batch-1 in-process forward (0: not measured).
	Forward    time.Duration
	REST, GRPC time.Duration
}

// netHTTPOverheads is grove-nethttp's REST overhead at concurrency 1
// beside grove's (no target): each p50 less the floor's p50 and the
// batch-1 forward.
type netHTTPOverheads struct {
	NetHTTPP50, FloorP50 time.Duration
	// Forward is the batch-1 in-process forward (0: not measured).
	Forward time.Duration
	NetHTTP time.Duration
	// GroveP50 and Grove are grove's (0: its row did not run).
	GroveP50, Grove time.Duration
}

// runCPUAB runs the groups of cpuABGroups on targets, o.cpuABRounds
// rounds each; nil when no group has two rows to run.
func runCPUAB(ctx context.Context, targets map[string]*endpoint, row []float64, o options, logf func(string, ...any)) *cpuAB {
	ab := &cpuAB{Rounds: o.cpuABRounds}
	for _, g := range cpuABGroups {
		var rows []*abRow
		var eps []*endpoint
		for _, d := range g.rows {
			if ep := targets[d.server]; ep != nil {
				rows = append(rows, &abRow{Server: d.server, API: ep.api, Batch: 1, Conc: d.conc, Window: g.window, Model: countedModel(d.server)})
				eps = append(eps, ep)
			}
		}
		if len(rows) < 2 {
			continue
		}
		names := make([]string, len(rows))
		for i, r := range rows {
			names[i] = r.Server
		}
		logf("CPU A/B %s: %d rounds of %v on each of %s", g.name, o.cpuABRounds, g.window, strings.Join(names, ", "))
		err := interleave(ctx, o.cpuABRounds, len(rows), func(i int) error {
			r, ep := rows[i], eps[i]
			// grove+log's events of the window are delivered before the
			// next row's window, as between scenarios, so that delivering
			// them does not fall on another row.
			var logged uint64
			if r.Server == serverGroveLog {
				st, err := fetchPredLog(ctx, ep.baseURL)
				if err != nil {
					return fmt.Errorf("%s: %w", r.Server, err)
				}
				logged = st.accounted()
			}
			var before modelCounts
			if r.Model != "" {
				var err error
				if before, err = fetchModelCounts(ctx, ep.baseURL, r.Model); err != nil {
					return fmt.Errorf("%s: %w", r.Server, err)
				}
			}
			res, cpu := measureWindow(ctx, scenarioSpec(ep, row, r.Batch, r.Conc, g.window/4, g.window, o), ep.pid)
			if ctx.Err() != nil {
				return ctx.Err()
			}
			r.add(res, cpu, g.window)
			if r.Server == serverGroveLog {
				if _, _, err := waitDrained(ctx, ep.baseURL, int(logged)+res.Sent); err != nil {
					return fmt.Errorf("%s's prediction log: %w", r.Server, err)
				}
			}
			if r.Model == "" {
				return nil
			}
			after, err := fetchModelCounts(ctx, ep.baseURL, r.Model)
			if err != nil {
				return fmt.Errorf("%s: %w", r.Server, err)
			}
			if r.Counts == nil {
				r.Counts = &modelCounts{}
			}
			r.Counts.add(after.minus(before))
			return nil
		})
		ab.Rows = append(ab.Rows, rows...)
		if err != nil {
			if ctx.Err() == nil {
				ab.Error = err.Error()
			}
			return ab
		}
	}
	if len(ab.Rows) == 0 {
		return nil
	}
	for _, r := range ab.Rows {
		r.P50, r.P99 = r.percentile(50), r.percentile(99)
	}
	return ab
}

// find is the row of server at concurrency conc (nil: it did not run).
func (ab *cpuAB) find(server string, conc int) *abRow {
	for _, r := range ab.Rows {
		if r.Server == server && r.Conc == conc {
			return r
		}
	}
	return nil
}

// judge computes the targets from the pooled rows and pctr's in-process
// forward times (fwd).
func (ab *cpuAB) judge(fwd forwardResult) {
	ratio := func(a, b *abRow, target float64) *abRatio {
		if a == nil || b == nil || b.rate() == 0 {
			return nil
		}
		return &abRatio{A: a.Server, B: b.Server, ARate: a.rate(), BRate: b.rate(), Ratio: a.rate() / b.rate(), Target: target}
	}
	// cpu is the CPU per request of row g against the floor's f, and
	// its target when judged (nil: either did not run or has no CPU
	// figure).
	cpu := func(g, f *abRow, judged bool) *cpuTarget {
		if g == nil || f == nil || g.cpuPerRequest() <= 0 || f.cpuPerRequest() <= 0 {
			return nil
		}
		c := &cpuTarget{Server: g.Server, GroveCores: g.cores(), GroveRate: g.rate(), FloorCores: f.cores(), FloorRate: f.rate(),
			Grove: g.cpuPerRequest(), Floor: f.cpuPerRequest(), NoTarget: !judged}
		if !judged {
			return c
		}
		// At b1c32 grove batches: the model's own cost of a row is its
		// batched forward's; the batch-1 forward stands in without it.
		for _, b := range []int{64, 1} {
			if ns, ok := fwd.NsPerOp[b]; ok && ns > 0 {
				c.Forward, c.ForwardBatch = time.Duration(ns/float64(b)), b
				break
			}
		}
		c.Target = time.Duration(cpuFloorFactor*float64(c.Floor)) + c.Forward
		return c
	}
	// Issue 32's targets are judged on grove, the default build;
	// grove-nethttp's figures are reported beside them (ratio target 0).
	g32, n32, f32 := ab.find(serverGrove, 32), ab.find(serverGroveNetHTTP, 32), ab.find(serverFloor, 32)
	ab.REST, ab.RESTNetHTTP = ratio(g32, f32, restFloorTarget), ratio(n32, f32, 0)
	ab.CPU, ab.CPUNetHTTP = cpu(g32, f32, true), cpu(n32, f32, false)
	ab.C1 = ratio(ab.find(serverGrove, 1), ab.find(serverDirect, 1), c1DirectTarget)
	ab.Overhead = nil
	if r, f, g, fg := ab.find(serverGrove, 1), ab.find(serverFloor, 1), ab.find(serverGroveGRPC, 1), ab.find(serverFloorGRPC, 1); r != nil && f != nil && g != nil && fg != nil {
		o := &c1Overheads{RESTP50: r.P50, FloorP50: f.P50, GRPCP50: g.P50, FloorGRPCP50: fg.P50, Forward: time.Duration(fwd.NsPerOp[1])}
		o.REST, o.GRPC = o.RESTP50-o.FloorP50-o.Forward, o.GRPCP50-o.FloorGRPCP50-o.Forward
		ab.Overhead = o
	}
	ab.OverheadNetHTTP = nil
	if n, f := ab.find(serverGroveNetHTTP, 1), ab.find(serverFloor, 1); n != nil && f != nil {
		o := &netHTTPOverheads{NetHTTPP50: n.P50, FloorP50: f.P50, Forward: time.Duration(fwd.NsPerOp[1])}
		o.NetHTTP = o.NetHTTPP50 - o.FloorP50 - o.Forward
		if g := ab.find(serverGrove, 1); g != nil {
			o.GroveP50, o.Grove = g.P50, g.P50-o.FloorP50-o.Forward
		}
		ab.OverheadNetHTTP = o
	}
	ab.Deep = ratio(ab.find(serverGroveDeep, 64), ab.find(serverGroveDeepNoBatch, 64), batchingTarget)
	ab.PCTR = ratio(ab.find(serverGrove, 64), ab.find(serverGroveNoBatch, 64), 0)
	ab.PCTRCounts = nil
	if r := ab.find(serverGrove, 64); r != nil {
		ab.PCTRCounts = r.Counts
	}
	cost := func(a, b *abRow, target float64) *costRatio {
		q := ratio(a, b, target)
		if q == nil {
			return nil
		}
		return &costRatio{abRatio: *q, ACPU: a.cpuPerRequest(), BCPU: b.cpuPerRequest()}
	}
	ab.TLS = cost(ab.find(serverGroveTLS, 32), g32, tlsTarget)
	ab.PredLog = cost(ab.find(serverGroveLog, 32), g32, predLogTarget)
}

// lines are the A/B's lines: one per target, with its verdict, and one
// per comparison of grove-nethttp's, with none ("(no target)"); n/a when
// its rows did not run. The "no regression" lines of grove-tls and
// grove+log come last.
func (ab *cpuAB) lines() []string {
	if ab.Error != "" {
		return []string{"Hot-path targets (issue 32), interleaved: FAILED: " + ab.Error}
	}
	// rest and cpu are the b1c32 lines of server (grove, judged, or
	// grove-nethttp, not).
	rest := func(server string, q *abRatio) string {
		if q == nil {
			return fmt.Sprintf("REST at batch 1, conc 32, interleaved: n/a (needs the %s and floor servers)", server)
		}
		s := fmt.Sprintf("REST at batch 1, conc 32, interleaved: %s %s req/s ÷ floor %s req/s = %.2fx", server, fmtRate(q.ARate), fmtRate(q.BRate), q.Ratio)
		if q.Target == 0 {
			return s + " (no target)"
		}
		return s + fmt.Sprintf(" (target ≥ %.2fx): %s", q.Target, verdict(q.Ratio >= q.Target))
	}
	cpu := func(server string, c *cpuTarget) string {
		if c == nil {
			return fmt.Sprintf("CPU per request at batch 1, conc 32, interleaved: n/a (needs the %s and floor servers and their CPU from /proc)", server)
		}
		s := fmt.Sprintf("CPU per request at batch 1, conc 32, interleaved: %s %.2f cores ÷ %s req/s = %s; floor %.2f cores ÷ %s req/s = %s",
			server, c.GroveCores, fmtRate(c.GroveRate), fmtDur(c.Grove), c.FloorCores, fmtRate(c.FloorRate), fmtDur(c.Floor))
		if c.NoTarget {
			s += " (no target)"
		} else if c.ForwardBatch > 0 {
			s += fmt.Sprintf(", × %.1f + the model's forward per row %s (%s batch %d ÷ %d) = %s (target: %s ≤ that): %s",
				cpuFloorFactor, fmtDur(c.Forward), forwardBench, c.ForwardBatch, c.ForwardBatch, fmtDur(c.Target), server, verdict(c.Grove <= c.Target))
		} else {
			s += fmt.Sprintf(" (target: %s ≤ %.1f × floor + the model's forward per row): n/a (needs %s)", server, cpuFloorFactor, forwardBench)
		}
		return s
	}
	out := []string{rest(serverGrove, ab.REST), rest(serverGroveNetHTTP, ab.RESTNetHTTP), cpu(serverGrove, ab.CPU), cpu(serverGroveNetHTTP, ab.CPUNetHTTP)}
	if q := ab.C1; q != nil {
		g, d := ab.find(serverGrove, 1), ab.find(serverDirect, 1)
		out = append(out, fmt.Sprintf("Concurrency 1, interleaved: grove %s req/s ÷ direct %s req/s = %.2fx, p50 %s vs %s (target ≥ %.2fx): %s",
			fmtRate(q.ARate), fmtRate(q.BRate), q.Ratio, fmtDur(g.P50), fmtDur(d.P50), q.Target, verdict(q.Ratio >= q.Target)))
	} else {
		out = append(out, "Concurrency 1, interleaved: grove ÷ direct n/a (needs the grove and direct servers)")
	}
	if o := ab.Overhead; o != nil {
		fwd := fmtDur(o.Forward)
		if o.Forward == 0 {
			fwd = "0 (" + forwardBench + " not measured)"
		}
		out = append(out, fmt.Sprintf("Overhead at concurrency 1, interleaved: grove-grpc p50 %s - (floor-grpc p50 %s + forward %s) = %s; grove REST p50 %s - (floor p50 %s + forward) = %s (target: gRPC's ≤ REST's): %s",
			fmtDur(o.GRPCP50), fmtDur(o.FloorGRPCP50), fwd, fmtDur(o.GRPC), fmtDur(o.RESTP50), fmtDur(o.FloorP50), fmtDur(o.REST), verdict(o.GRPC <= o.REST)))
	} else {
		out = append(out, "Overhead at concurrency 1, interleaved: n/a (needs the grove, grove-grpc, floor and floor-grpc servers)")
	}
	if o := ab.OverheadNetHTTP; o != nil {
		fwd := fmtDur(o.Forward)
		if o.Forward == 0 {
			fwd = "0 (" + forwardBench + " not measured)"
		}
		s := fmt.Sprintf("Overhead at concurrency 1, interleaved: grove-nethttp REST p50 %s - (floor p50 %s + forward %s) = %s; ",
			fmtDur(o.NetHTTPP50), fmtDur(o.FloorP50), fwd, fmtDur(o.NetHTTP))
		if o.GroveP50 > 0 {
			s += fmt.Sprintf("grove REST p50 %s - (floor p50 + forward) = %s (no target)", fmtDur(o.GroveP50), fmtDur(o.Grove))
		} else {
			s += "grove REST n/a (needs the grove server) (no target)"
		}
		out = append(out, s)
	} else {
		out = append(out, "Overhead at concurrency 1, interleaved: grove-nethttp REST n/a (needs the grove-nethttp and floor servers)")
	}
	if q := ab.Deep; q != nil {
		out = append(out, fmt.Sprintf("Dynamic batching at %s on %s, interleaved: grove-deep %s req/s ÷ grove-deep-nobatch %s req/s = %.2fx (target ≥ %.0fx): %s",
			batchingShape, deepPath, fmtRate(q.ARate), fmtRate(q.BRate), q.Ratio, q.Target, verdict(q.Ratio >= q.Target)))
	} else {
		out = append(out, fmt.Sprintf("Dynamic batching at %s on %s, interleaved: n/a (needs the grove-deep and grove-deep-nobatch servers)", batchingShape, deepPath))
	}
	s := fmt.Sprintf("Dynamic batching at %s on %s, interleaved: ", batchingShape, modelPath)
	if q := ab.PCTR; q != nil {
		s += fmt.Sprintf("grove %s req/s ÷ grove-nobatch %s req/s = %.2fx (no target: the transport bounds it)", fmtRate(q.ARate), fmtRate(q.BRate), q.Ratio)
	} else {
		s += "grove ÷ grove-nobatch n/a (needs the grove-nobatch server)"
	}
	if c := ab.PCTRCounts; c != nil && c.Requests > 0 && c.Forwards > 0 {
		s += fmt.Sprintf("; grove ran %.3f forward calls per request and %.2f rows per forward call (%d requests, %d forward calls, %d rows: OIP statistics of %s)",
			c.forwardsPerRequest(), c.rowsPerForward(), c.Requests, c.Forwards, c.Rows, grpcModel)
	}
	out = append(out, s)
	// cost is the line of a variant of grove (server) against plain grove.
	cost := func(what, server string, q *costRatio) string {
		s := what + " at batch 1, conc 32, interleaved: "
		if q == nil {
			return s + fmt.Sprintf("n/a (needs the %s and %s servers)", server, serverGrove)
		}
		perReq := func(d time.Duration) string {
			if d <= 0 {
				return "n/a"
			}
			return fmtDur(d)
		}
		return s + fmt.Sprintf("%s %s req/s ÷ %s %s req/s = %.2fx, CPU per request %s vs %s (target ≥ %.2fx): %s",
			q.A, fmtRate(q.ARate), q.B, fmtRate(q.BRate), q.Ratio, perReq(q.ACPU), perReq(q.BCPU), q.Target, verdict(q.Ratio >= q.Target))
	}
	return append(out, cost("TLS + token vs plain", serverGroveTLS, ab.TLS), cost("Prediction log FULL vs NONE", serverGroveLog, ab.PredLog))
}

// writeMarkdown prints the A/B's rows and its lines; nothing when it did
// not run.
func (ab *cpuAB) writeMarkdown(w io.Writer) {
	if ab == nil {
		return
	}
	fmt.Fprintf(w, "\nHot-path targets (issue 32), interleaved (%d rounds; each round a window of every row of a group in turn, the order rotating; "+
		"windows of %v at conc 1, %v otherwise, after a quarter of that as warm-up; latencies, requests and CPU pooled per row):\n\n",
		ab.Rounds, cpuABC1Window, cpuABWindow)
	if len(ab.Rows) > 0 {
		fmt.Fprintln(w, "| server | API | batch | conc | req/s | p50 | p99 | server CPU | CPU per request | load gen CPU | other CPU | forward calls per request | rows per forward call | requests | errors |")
		fmt.Fprintln(w, "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
		for _, r := range ab.Rows {
			srv, per, gen, other := "n/a", "n/a", "n/a", "n/a"
			if r.ServerCPU > 0 || r.BenchCPU > 0 {
				srv, gen, other = fmt.Sprintf("%.2f", r.cores()), fmt.Sprintf("%.2f", r.benchCores()), fmt.Sprintf("%.2f", r.otherCores())
			}
			if d := r.cpuPerRequest(); d > 0 {
				per = fmtDur(d)
			}
			fpr, rpf := "", ""
			if c := r.Counts; c != nil && c.Requests > 0 && c.Forwards > 0 {
				fpr, rpf = fmt.Sprintf("%.3f", c.forwardsPerRequest()), fmt.Sprintf("%.2f", c.rowsPerForward())
			}
			fmt.Fprintf(w, "| %s | %s | %d | %d | %s | %s | %s | %s | %s | %s | %s | %s | %s | %d | %d |\n",
				serverLabel(r.Server), r.API, r.Batch, r.Conc, fmtRate(r.rate()), fmtDur(r.P50), fmtDur(r.P99), srv, per, gen, other, fpr, rpf, r.Requests, r.Errors)
		}
		fmt.Fprintln(w)
	}
	for _, l := range ab.lines() {
		fmt.Fprintf(w, "- %s\n", l)
	}
}
