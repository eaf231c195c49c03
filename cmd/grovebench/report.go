package main

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"runtime"
	"strings"
	"time"
)

// report collects everything one grovebench run measured.
type report struct {
	Start    time.Time `json:"start"`
	Duration string    `json:"duration"`
	Warmup   string    `json:"warmup"`
	Host     host      `json:"host"`
	// BLAS is the BLAS library the plain grove's TorchScript models ran on
	// (nil when no plain grove ran).
	BLAS    *blasReport   `json:"blas,omitempty"`
	Results []result      `json:"results"`
	Forward forwardResult `json:"forward"`
	// ForwardDeep is the deep ranking model's in-process forward time.
	ForwardDeep forwardResult  `json:"forward_deep"`
	Overhead    []overheadLine `json:"overhead,omitempty"`
	// ActorLayer compares grove with the direct server (codec and
	// servable with no actors) at each shape both ran.
	ActorLayer []actorLayerLine `json:"actor_layer,omitempty"`
	// Batching is grove's req/s over grove-nobatch's at batchingShape (0
	// when either did not run).
	Batching float64 `json:"batching_ratio,omitempty"`
	// BatchingDeep is the same ratio on the deep ranking model (grove-deep
	// over grove-deep-nobatch).
	BatchingDeep float64 `json:"batching_ratio_deep,omitempty"`
	// TLS compares each grove-tls row with plain grove's at its shape.
	TLS []tlsRatio `json:"tls,omitempty"`
	// Forwarding compares grove-fwd with grove-local (nil when they did not run).
	Forwarding *forwardCost `json:"forwarding,omitempty"`
	// ForwardAB is the interleaved measurement of the forwarding target
	// (nil when it did not run).
	ForwardAB *forwardAB `json:"forward_ab,omitempty"`
	// PredLog is the grove+log instance's prediction log (nil when it did not run).
	PredLog *predLogReport `json:"prediction_log,omitempty"`
	// Shadow is the shadow scenario (nil when it did not run).
	Shadow *shadowReport `json:"shadow,omitempty"`
	// Swap and Memory are the lifecycle scenarios (nil when not run).
	Swap   *swapReport   `json:"swap,omitempty"`
	Memory *memoryReport `json:"memory,omitempty"`
	// Overload is the overload scenario (nil when not run).
	Overload *overloadReport `json:"overload,omitempty"`
	// Churn is the churn scenario (nil when not run).
	Churn *churnReport `json:"churn,omitempty"`
	// OnDemand is the ondemand scenario (nil when not run).
	OnDemand *onDemandReport `json:"ondemand,omitempty"`
	// EvalAB is grove+eval against grove+log, interleaved (nil when not run).
	EvalAB *evalAB `json:"evaluate_ab,omitempty"`
	// CPUAB is issue 32's targets measured interleaved (nil when not run).
	CPUAB *cpuAB `json:"cpu_ab,omitempty"`
	// Evaluate is the evaluate scenario (nil when not run).
	Evaluate *evalReport `json:"evaluate,omitempty"`
	Notes    []string    `json:"notes,omitempty"`
}

// host describes the machine and the load generator.
type host struct {
	CPUs       int    `json:"cpus"`
	GOMAXPROCS int    `json:"gomaxprocs"`
	GOOS       string `json:"goos"`
	GOARCH     string `json:"goarch"`
	GoVersion  string `json:"go_version"`
	// LoadAvg is /proc/loadavg's 1-minute figure at the start (empty where
	// there is none): a busy machine makes every figure noisier.
	LoadAvg string `json:"load_avg,omitempty"`
}

func hostInfo() host {
	h := host{CPUs: runtime.NumCPU(), GOMAXPROCS: runtime.GOMAXPROCS(0), GOOS: runtime.GOOS,
		GOARCH: runtime.GOARCH, GoVersion: runtime.Version()}
	if b, err := os.ReadFile("/proc/loadavg"); err == nil {
		if f := strings.Fields(string(b)); len(f) > 0 {
			h.LoadAvg = f[0]
		}
	}
	return h
}

// result is one scenario's row.
type result struct {
	scenario
	API string `json:"api"`
	URL string `json:"url"`
	loadResult
	// VsBaseline is this row's req/s over the baseline's at the same batch
	// and concurrency (0 when there is no baseline row).
	VsBaseline float64 `json:"vs_baseline_req_per_sec,omitempty"`
	// CPU is what the server's process and grovebench (the load
	// generator) used during the measured window; zero when unknown.
	CPU cpuUse `json:"cpu"`
}

// overheadLine is a server's p50 at batch 1, concurrency 1 minus the in-process forward time.
type overheadLine struct {
	Server   string        `json:"server"`
	P50      time.Duration `json:"p50_ns"`
	Forward  time.Duration `json:"forward_ns"`
	Overhead time.Duration `json:"overhead_ns"`
	// Floor is the transport floor's p50 over the same protocol (0: not
	// measured); AboveFloor is Overhead less Floor: what grove itself adds.
	Floor      time.Duration `json:"floor_ns,omitempty"`
	AboveFloor time.Duration `json:"above_floor_ns,omitempty"`
	Batch      int           `json:"batch"`
	Conc       int           `json:"concurrency"`
	ReqPerSec  float64       `json:"req_per_sec"`
}

func (r *report) note(format string, a ...any) { r.Notes = append(r.Notes, fmt.Sprintf(format, a...)) }

// actorLayerLine is grove against the direct server at one shape.
type actorLayerLine struct {
	Batch, Conc int
	// Ratio is grove's req/s over the direct server's; the p50s are each's.
	Ratio                 float64
	GroveP50, DirectP50   time.Duration
	GroveRate, DirectRate float64
}

// add records one scenario's result.
func (r *report) add(s scenario, ep *endpoint, res loadResult) {
	r.Results = append(r.Results, result{scenario: s, API: ep.api, URL: ep.url, loadResult: res})
	if res.Errors > 0 {
		r.note("%s batch %d conc %d: %d failed requests; first: %s", s.Server, s.Batch, s.Conc, res.Errors, res.FirstError)
	}
}

// finish computes the ratios to the baseline, the prediction log ratios
// and the overhead lines.
func (r *report) finish() {
	base, plain := map[[2]int]float64{}, map[[2]int]float64{}
	for _, x := range r.Results {
		switch x.Server {
		case serverBaseline:
			base[[2]int{x.Batch, x.Conc}] = x.ReqPerSec
		case serverGrove:
			plain[[2]int{x.Batch, x.Conc}] = x.ReqPerSec
		}
	}
	if r.PredLog != nil {
		r.PredLog.Ratios = nil
		for _, x := range r.Results {
			if x.Server != serverGroveLog {
				continue
			}
			q := predLogRatio{Batch: x.Batch, Conc: x.Conc, Full: x.ReqPerSec, None: plain[[2]int{x.Batch, x.Conc}]}
			if q.None > 0 {
				q.Ratio = q.Full / q.None
			}
			r.PredLog.Ratios = append(r.PredLog.Ratios, q)
		}
	}
	r.TLS = r.tlsRatios()
	r.Forwarding = r.forwardCost()
	r.Batching, r.BatchingDeep = r.ratio(serverGrove, serverGroveNoBatch), r.ratio(serverGroveDeep, serverGroveDeepNoBatch)
	r.ActorLayer = nil
	for _, d := range r.Results {
		if d.Server != serverDirect {
			continue
		}
		if g := r.find(serverGrove, d.Batch, d.Conc); g != nil && d.ReqPerSec > 0 {
			r.ActorLayer = append(r.ActorLayer, actorLayerLine{Batch: d.Batch, Conc: d.Conc, Ratio: g.ReqPerSec / d.ReqPerSec,
				GroveP50: g.P50, DirectP50: d.P50, GroveRate: g.ReqPerSec, DirectRate: d.ReqPerSec})
		}
	}
	for i := range r.Results {
		x := &r.Results[i]
		if b := base[[2]int{x.Batch, x.Conc}]; b > 0 {
			x.VsBaseline = x.ReqPerSec / b
		}
	}
	fwd, ok := r.Forward.NsPerOp[1]
	if !ok {
		return
	}
	floor := map[string]time.Duration{}
	for _, x := range r.Results {
		if x.Batch == 1 && x.Conc == 1 && (x.Server == serverFloor || x.Server == serverFloorGRPC) {
			floor[x.Server] = x.P50
		}
	}
	for _, x := range r.Results {
		if x.Batch != 1 || x.Conc != 1 || x.P50 == 0 || x.Server == serverFloor || x.Server == serverFloorGRPC || x.Server == serverFloorFwd ||
			x.Server == serverGroveONNX { // the forward time is TorchScript's
			continue
		}
		f := time.Duration(fwd)
		o := overheadLine{Server: x.Server, P50: x.P50, Forward: f, Overhead: x.P50 - f, Batch: 1, Conc: 1, ReqPerSec: x.ReqPerSec}
		if fl := floor[floorOf(x.Server)]; fl > 0 {
			o.Floor, o.AboveFloor = fl, o.Overhead-fl
		}
		r.Overhead = append(r.Overhead, o)
	}
}

// ratio is server on's req/s over server off's at batchingShape (0 if
// either did not run).
func (r *report) ratio(on, off string) float64 {
	a, b := 0.0, 0.0
	for _, x := range r.Results {
		if fmt.Sprintf("b%dc%d", x.Batch, x.Conc) != batchingShape {
			continue
		}
		switch x.Server {
		case on:
			a = x.ReqPerSec
		case off:
			b = x.ReqPerSec
		}
	}
	if a > 0 && b > 0 {
		return a / b
	}
	return 0
}

// overheadTarget is issue 6's bound on grove's batch-1, concurrency-1 p50
// minus the in-process forward p50, per protocol.
var overheadTarget = map[string]time.Duration{serverGrove: 150 * time.Microsecond, serverGroveGRPC: 100 * time.Microsecond}

// floorOf is the transport floor of a server's protocol.
func floorOf(server string) string {
	if server == serverGroveGRPC {
		return serverFloorGRPC
	}
	return serverFloor
}

// groveErrors is the number of failed grove requests over all scenarios,
// grove+log's included.
func (r *report) groveErrors() int {
	n := 0
	for _, x := range r.Results {
		if x.Server != serverBaseline && x.Server != serverFloor && x.Server != serverFloorGRPC && x.Server != serverFloorFwd && x.Server != serverDirect {
			n += x.Errors
		}
	}
	return n
}

// writeMarkdown prints the comparison table and the lines under it.
func (r *report) writeMarkdown(w io.Writer) {
	load := ""
	if r.Host.LoadAvg != "" {
		load = ", load average " + r.Host.LoadAvg + " at start"
	}
	fmt.Fprintf(w, "grovebench %s: closed loop, %s measured after %s warm-up per scenario; %d CPUs%s; load generator on the same machine (GOMAXPROCS %d)\n\n",
		r.Start.Format("2006-01-02 15:04"), r.Duration, r.Warmup, r.Host.CPUs, load, r.Host.GOMAXPROCS)
	if r.BLAS != nil {
		fmt.Fprintf(w, "%s\n\n", r.BLAS.line())
	}
	fmt.Fprintln(w, "| server | API | batch | conc | req/s | rows/s | p50 | p99 | errors | vs baseline req/s | server CPU | load gen CPU |")
	fmt.Fprintln(w, "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
	for _, x := range r.Results {
		vs := "n/a"
		switch {
		case x.Server == serverBaseline:
			vs = "1.00x"
		case x.VsBaseline > 0:
			vs = fmt.Sprintf("%.2fx", x.VsBaseline)
		}
		p50, p99 := "n/a", "n/a"
		if len(x.Latencies) > 0 {
			p50, p99 = fmtDur(x.P50), fmtDur(x.P99)
		}
		srvCPU, genCPU := "n/a", "n/a"
		if x.CPU.Grove > 0 || x.CPU.Bench > 0 {
			srvCPU, genCPU = fmt.Sprintf("%.2f", x.CPU.Grove), fmt.Sprintf("%.2f", x.CPU.Bench)
		}
		fmt.Fprintf(w, "| %s | %s | %d | %d | %s | %s | %s | %s | %d | %s | %s | %s |\n",
			serverLabel(x.Server), x.API, x.Batch, x.Conc, fmtRate(x.ReqPerSec), fmtRate(x.RowsPerSec),
			p50, p99, x.Errors, vs, srvCPU, genCPU)
	}
	fmt.Fprintln(w)
	fmt.Fprintln(w, "- CPU columns: cores kept busy during the measured window by the server's process and by grovebench (the load generator), from /proc; the machine has 2")
	for _, f := range []struct {
		bench string
		res   forwardResult
	}{{forwardBench, r.Forward}, {deepForwardBench, r.ForwardDeep}} {
		var parts []string
		for _, b := range []int{1, 64} {
			if ns, ok := f.res.NsPerOp[b]; ok {
				parts = append(parts, fmt.Sprintf("batch %d: %s (%s rows/s)", b, fmtDur(time.Duration(ns)), fmtRate(float64(b)*1e9/ns)))
			}
		}
		if len(parts) > 0 {
			fmt.Fprintf(w, "- In-process forward (%s, mean ns/op, one op = one forward): %s\n", f.bench, strings.Join(parts, "; "))
		}
		if f.res.AfterIdleNs > 0 {
			fmt.Fprintf(w, "- The same batch-1 forward after its thread slept, as between requests at conc 1 (%s, p50): %s\n",
				idleForwardBench, fmtDur(time.Duration(f.res.AfterIdleNs)))
		}
		if f.res.Error != "" {
			fmt.Fprintf(w, "- In-process forward (%s): not measured: %s\n", f.bench, f.res.Error)
		}
	}
	r.writeThroughputTargets(w)
	for _, x := range r.Results {
		if x.Batch == 1 && x.Conc == 1 && (x.Server == serverFloor || x.Server == serverFloorGRPC) {
			fmt.Fprintf(w, "- Transport floor at batch 1, conc 1 (%s: %s, same load generator): p50 %s, p99 %s\n",
				x.Server, x.API, fmtDur(x.P50), fmtDur(x.P99))
		}
	}
	for _, o := range r.Overhead {
		fmt.Fprintf(w, "- Overhead at batch 1, conc 1 (%s p50 minus forward): %s - %s = %s", o.Server, fmtDur(o.P50), fmtDur(o.Forward), fmtDur(o.Overhead))
		if t, ok := overheadTarget[o.Server]; ok {
			verdict := "met"
			if o.Overhead > t {
				verdict = "MISSED"
			}
			fmt.Fprintf(w, " (target ≤ %s): %s", fmtDur(t), verdict)
		}
		if o.Floor > 0 {
			fmt.Fprintf(w, "; above the transport floor (%s p50): %s - %s = %s", floorOf(o.Server), fmtDur(o.Overhead), fmtDur(o.Floor), fmtDur(o.AboveFloor))
		}
		fmt.Fprintln(w)
	}
	for _, a := range r.ActorLayer {
		fmt.Fprintf(w, "- The actor layer at batch %d, conc %d: grove ÷ direct (the same B&A codec and servable called from the HTTP handler, no actors) = %.2fx the req/s (%s vs %s), p50 %s vs %s (%+.1f µs)\n",
			a.Batch, a.Conc, a.Ratio, fmtRate(a.GroveRate), fmtRate(a.DirectRate), fmtDur(a.GroveP50), fmtDur(a.DirectP50),
			float64(a.GroveP50-a.DirectP50)/float64(time.Microsecond))
	}
	for _, b := range []struct {
		model string
		ratio float64
	}{{modelPath, r.Batching}, {deepPath, r.BatchingDeep}} {
		if b.ratio > 0 {
			fmt.Fprintf(w, "- Dynamic batching at %s on %s: grove %.2fx the req/s of grove-nobatch (--max-batch-rows 1) (target ≥ %.0fx): %s\n",
				batchingShape, b.model, b.ratio, batchingTarget, verdict(b.ratio >= batchingTarget))
		}
	}
	for _, q := range r.TLS {
		fmt.Fprintf(w, "- TLS + token vs plaintext at batch %d, conc %d: grove TLS+token %.2fx the req/s of plain grove (%s vs %s), p50 %s vs %s (%+.1f µs), p99 %s vs %s\n",
			q.Batch, q.Conc, q.Ratio, fmtRate(q.TLSRate), fmtRate(q.PlainRate), fmtDur(q.TLSP50), fmtDur(q.PlainP50),
			float64(q.TLSP50-q.PlainP50)/float64(time.Microsecond), fmtDur(q.TLSP99), fmtDur(q.PlainP99))
	}
	if r.Forwarding != nil {
		for _, l := range r.Forwarding.lines() {
			fmt.Fprintf(w, "- %s\n", l)
		}
	}
	if r.ForwardAB != nil {
		for _, l := range r.ForwardAB.lines() {
			fmt.Fprintf(w, "- %s\n", l)
		}
	}
	if r.EvalAB != nil {
		for _, l := range r.EvalAB.lines() {
			fmt.Fprintf(w, "- %s\n", l)
		}
	}
	if len(r.Overhead) == 0 {
		fmt.Fprintln(w, "- Overhead at batch 1, conc 1: n/a (needs the b1c1 scenario and the batch-1 forward time)")
	}
	for _, n := range r.Notes {
		fmt.Fprintf(w, "- Note: %s\n", n)
	}
	r.PredLog.writeMarkdown(w)
	r.CPUAB.writeMarkdown(w)
	r.Shadow.writeMarkdown(w)
	r.Swap.writeMarkdown(w)
	r.Memory.writeMarkdown(w)
	r.Overload.writeMarkdown(w)
	r.Churn.writeMarkdown(w)
	r.OnDemand.writeMarkdown(w)
	r.Evaluate.writeMarkdown(w)
}

// writeMarkdown prints the prediction log's counts and, last, the FULL vs
// NONE ratios; nothing when grove+log did not run.
func (p *predLogReport) writeMarkdown(w io.Writer) {
	if p == nil {
		return
	}
	args := strings.Join(p.Args, " ")
	switch {
	case p.Stats != nil:
		st := p.Stats
		drained := "; buffer empty " + fmtDur(p.Drain) + " after the last request"
		if p.Error != "" {
			drained = ""
		}
		fmt.Fprintf(w, "- Prediction log of %s (%s; %s encoding, topic %s): delivered %d, dropped %d, failed %d, buffered %d, "+
			"for %d inference requests sent to it (check request, warm-ups and measured windows)%s; "+
			"an embedded broker runs inside grove+log's process, so its work counts against grove+log's figures\n",
			serverLabel(serverGroveLog), args, st.Encoding, st.Topic, st.Delivered, st.Dropped, st.Failed, st.Buffered,
			p.Sent, drained)
		if st.Dropped > 0 || st.Failed > 0 || st.Delivered < uint64(p.Sent) {
			fmt.Fprintf(w, "- Prediction log WARNING: not every request's event was delivered (%d of %d; dropped %d, failed %d)",
				st.Delivered, p.Sent, st.Dropped, st.Failed)
			if st.LastError != "" {
				fmt.Fprintf(w, "; last error: %s", st.LastError)
			}
			fmt.Fprintln(w)
		}
		if p.Error != "" {
			fmt.Fprintf(w, "- Prediction log: %s\n", p.Error)
		}
	default:
		fmt.Fprintf(w, "- Prediction log of %s (%s): counts not read: %s\n", serverLabel(serverGroveLog), args, p.Error)
	}
	for _, q := range p.Ratios {
		target := ""
		if q.Batch == 1 && q.Conc == 32 {
			target = fmt.Sprintf(" (overview; the target ≥ %.2fx is judged on the interleaved rows)", predLogTarget)
		}
		if q.None > 0 {
			fmt.Fprintf(w, "- Prediction log FULL vs NONE at batch %d, c %d: %.2fx req/s%s\n", q.Batch, q.Conc, q.Ratio, target)
		} else {
			fmt.Fprintf(w, "- Prediction log FULL vs NONE at batch %d, c %d: n/a (needs the grove/b%dc%d row)%s\n",
				q.Batch, q.Conc, q.Batch, q.Conc, target)
		}
	}
}

// writeJSON writes the whole report, every latency included.
func (r *report) writeJSON(path string) error {
	b, err := json.MarshalIndent(r, "", " ")
	if err != nil {
		return err
	}
	return os.WriteFile(path, append(b, '\n'), 0o644)
}

// fmtDur renders a latency with about three significant digits.
func fmtDur(d time.Duration) string {
	neg := ""
	if d < 0 {
		neg, d = "-", -d
	}
	us := float64(d) / 1e3
	switch {
	case d == 0:
		return "0"
	case us < 10:
		return fmt.Sprintf("%s%.2f µs", neg, us)
	case us < 100:
		return fmt.Sprintf("%s%.1f µs", neg, us)
	case us < 1000:
		return fmt.Sprintf("%s%.0f µs", neg, us)
	case us < 10000:
		return fmt.Sprintf("%s%.2f ms", neg, us/1e3)
	case us < 100000:
		return fmt.Sprintf("%s%.1f ms", neg, us/1e3)
	default:
		return fmt.Sprintf("%s%.0f ms", neg, us/1e3)
	}
}

// fmtRate renders a per-second rate.
func fmtRate(v float64) string {
	switch {
	case v >= 100:
		return fmt.Sprintf("%.0f", v)
	case v >= 10:
		return fmt.Sprintf("%.1f", v)
	default:
		return fmt.Sprintf("%.2f", v)
	}
}

// find is the result of server at batch rows and concurrency conc (nil if
// it did not run).
func (r *report) find(server string, batch, conc int) *result {
	for i := range r.Results {
		if x := &r.Results[i]; x.Server == server && x.Batch == batch && x.Conc == conc {
			return x
		}
	}
	return nil
}

// verdict is "met" or "MISSED".
func verdict(met bool) string {
	if met {
		return "met"
	}
	return "MISSED"
}

// writeThroughputTargets prints issue 6's throughput targets: REST at
// b1c32 (10x the baseline, p99 ≤ 10 ms) and b64c8 (10x), and gRPC
// ModelInfer with raw contents at batch 64 (40 % of the in-process forward
// rows/s, both with one intra-op thread). A target whose rows did not run
// is left out.
func (r *report) writeThroughputTargets(w io.Writer) {
	if g, b := r.find(serverGrove, 1, 32), r.find(serverBaseline, 1, 32); g != nil && b != nil && g.VsBaseline > 0 {
		fmt.Fprintf(w, "- Target b1c32: grove %.2fx the baseline's req/s, p99 %s (target ≥ 10x, p99 ≤ 10 ms): %s\n",
			g.VsBaseline, fmtDur(g.P99), verdict(g.VsBaseline >= 10 && g.P99 <= 10*time.Millisecond && g.Errors == 0))
	}
	if g, b := r.find(serverGrove, 64, 8), r.find(serverBaseline, 64, 8); g != nil && b != nil && g.VsBaseline > 0 {
		fmt.Fprintf(w, "- Target b64c8: grove %.2fx the baseline's req/s (target ≥ 10x): %s\n",
			g.VsBaseline, verdict(g.VsBaseline >= 10 && g.Errors == 0))
	}
	ns, ok := r.Forward.NsPerOp[64]
	for _, c := range []int{8, 1} {
		g := r.find(serverGroveGRPC, 64, c)
		if g == nil || !ok || ns <= 0 {
			continue
		}
		inProc := 64 * 1e9 / ns
		share := g.RowsPerSec / inProc
		fmt.Fprintf(w, "- Target gRPC ModelInfer (raw_input_contents) at batch 64, conc %d: %s rows/s = %.0f%% of the in-process forward's %s rows/s (target ≥ 40%%): %s\n",
			c, fmtRate(g.RowsPerSec), 100*share, fmtRate(inProc), verdict(share >= 0.4 && g.Errors == 0))
		break
	}
}
