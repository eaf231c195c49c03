package main

// The overload scenario measures what request deadlines are for: "on
// rank_deep with batching off, open-loop arrivals at 2x the measured
// closed-loop capacity with a 50 ms deadline: goodput (answers within
// their deadline per second) at least 90 % of that capacity, and p99 of
// the successful answers at most the deadline; beside it the same load
// with deadlines off, to show the collapse it avoids".
//
// On a grove of its own serving rank_deep/ with max_batch_rows 1 (one
// forward per request, so capacity is the model actor's pace), it
//
//  1. measures the capacity: a closed loop of overloadClosedConc clients,
//     back to back, for the usual warm-up and window;
//  2. offers twice that rate open-loop (overloadConns paced clients, each
//     latency counted from the request's scheduled start, so a client
//     that falls behind reports it) with "Grove-Timeout: 50ms" on every
//     request;
//  3. offers the same load with no deadline;
//  4. with --cpu-ab-rounds, measures the target again interleaved
//     (overloadAB): rounds of the closed loop, the open loop at 2x and
//     the same capped at overloadCappedFactor, each with the deadline.
//
// Goodput counts the successful answers whose latency, seen by the
// client, is within the deadline. Expired work (grove_requests_expired_total)
// and refusals of a full queue (HTTP 429) are read from grove's metrics.

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"time"
)

const (
	// scenarioOverload names the scenario in --scenarios.
	scenarioOverload = "overload"
	// overloadDeadline is the deadline every request brings.
	overloadDeadline = 50 * time.Millisecond
	// overloadFactor is the offered load over the measured capacity.
	overloadFactor = 2.0
	// overloadClosedConc is the closed loop that measures the capacity.
	overloadClosedConc = 16
	// overloadConns bounds the open-loop requests in flight: enough that
	// the generator never waits for an answer at 2x capacity, even when
	// grove queues a full model_queue_size of them.
	overloadConns = 1536
	// Targets: goodput over capacity, and the successful answers' p99 at
	// most the deadline.
	overloadGoodputTarget = 0.9
	// overloadABWindow is a run's measured window in a round of the
	// overload A/B, after overloadABWarmup (an open loop's is longer when
	// its clients' pacing interval is).
	overloadABWindow = 2 * time.Second
	overloadABWarmup = 500 * time.Millisecond
	// overloadCappedFactor is the offered load, over the capacity, of the
	// A/B's capped open loop: the same run with the load generator doing
	// less work on the CPUs it shares with grove.
	overloadCappedFactor = 1.5
)

// overloadRun is one open-loop run.
type overloadRun struct {
	Deadline bool       `json:"deadline"`
	Load     loadResult `json:"load"`
	// Goodput is the successful answers within the deadline per second of
	// the window; Ratio is Goodput over the measured capacity.
	Goodput float64 `json:"goodput"`
	Ratio   float64 `json:"goodput_ratio"`
	// What grove counted during the run.
	groveCounts
	// CPU is what grove, grovebench and the rest kept busy in the window.
	CPU cpuUse `json:"cpu"`
	// Forward is the mean forward call over the run (grove's OIP
	// statistics, compute_infer), Busy the share of the run's wall time the
	// model spent in forward calls.
	Forward time.Duration `json:"forward_ns"`
	Busy    float64       `json:"model_busy"`
}

// overloadReport is what the overload scenario measured.
type overloadReport struct {
	Capacity     loadResult    `json:"capacity"`
	CapacityCPU  cpuUse        `json:"capacity_cpu"`
	CapacityFwd  time.Duration `json:"capacity_forward_ns"`
	CapacityBusy float64       `json:"capacity_model_busy"`
	Offered      float64       `json:"offered_req_per_sec"`
	WithDeadline overloadRun   `json:"with_deadline"`
	NoDeadline   overloadRun   `json:"without_deadline"`
	Met          bool          `json:"met_target"`
	// AB is the target measured interleaved (nil: --cpu-ab-rounds 0).
	AB    *overloadAB `json:"ab,omitempty"`
	Error string      `json:"error,omitempty"`
}

// overloadAB is the overload target measured interleaved: rounds of the
// closed loop that measures the capacity, the open loop at
// overloadFactor times the capacity and the same at
// overloadCappedFactor, each with the deadline, in turn, the order
// rotating, each run's windows pooled. An open loop offers its factor
// times the capacity pooled so far (the first round starts with the
// closed loop), so the offered load follows the machine's drift.
// Goodput over capacity then compares runs under the same background
// load, and the capped run shows how much of the shortfall the load
// generator's own work on the shared CPUs causes.
type overloadAB struct {
	Rounds int           `json:"rounds"`
	Window time.Duration `json:"window_ns"`
	// Capacity is the closed loop's windows pooled.
	Capacity    abPool        `json:"capacity"`
	CapacityP50 time.Duration `json:"capacity_p50_ns"`
	CapacityP99 time.Duration `json:"capacity_p99_ns"`
	// Runs are the open loops at overloadFactor and overloadCappedFactor.
	Runs []overloadABRun `json:"runs"`
	// Met says whether the run at overloadFactor met the target.
	Met   bool   `json:"met_target"`
	Error string `json:"error,omitempty"`
}

// overloadABRun is one open-loop run of the A/B, its windows pooled.
type overloadABRun struct {
	Factor float64 `json:"factor"`
	// Offered is the mean of the rates its windows offered.
	Offered float64 `json:"offered_req_per_sec"`
	abPool
	// Good counts the successful answers within the deadline (of the
	// requests started inside the windows); Goodput is them per second,
	// Ratio Goodput over the pooled capacity.
	Good    int           `json:"good"`
	Goodput float64       `json:"goodput"`
	Ratio   float64       `json:"goodput_ratio"`
	P50     time.Duration `json:"p50_ns"`
	P99     time.Duration `json:"p99_ns"`
	// What grove counted over the runs' windows (warm-ups and drains
	// included).
	groveCounts
}

// groveCounts are the failed requests grove counted: work dropped unrun
// (any reason), work that ran past its deadline (answered at it), and
// requests refused with 429.
type groveCounts struct {
	Expired float64 `json:"expired"`
	Late    float64 `json:"late"`
	Refused float64 `json:"refused"`
}

// addBetween adds what grove counted between its snapshots before and
// after.
func (g *groveCounts) addBetween(before, after promSnapshot) {
	d := func(name string, labels map[string]string) float64 {
		return after.sum(name, labels) - before.sum(name, labels)
	}
	g.Expired += d("grove_requests_expired_total", nil)
	g.Late += d("grove_requests_late_total", nil)
	g.Refused += d("grove_http_requests_total", map[string]string{"code": "429"})
}

// other is how many of the errors a load generator saw grove did not
// count (never below 0).
func (g *groveCounts) other(errors int) int {
	return max(errors-int(g.Expired)-int(g.Late)-int(g.Refused), 0)
}

// runOverloadAB runs overloadAB on the grove at base (process pid) with
// load as the request.
func runOverloadAB(ctx context.Context, e lifecycleEnv, base string, pid int, load loadSpec) *overloadAB {
	ab := &overloadAB{Rounds: e.abRounds, Window: overloadABWindow, Runs: []overloadABRun{{Factor: overloadFactor}, {Factor: overloadCappedFactor}}}
	load.warmup, load.duration = overloadABWarmup, overloadABWindow
	client := &http.Client{Timeout: 5 * time.Second}
	e.logf("overload A/B: %d rounds of %v on each of the closed loop (c %d) and the open loops at %.1fx and %.1fx its capacity, deadline %v",
		e.abRounds, overloadABWindow, overloadClosedConc, overloadFactor, overloadCappedFactor, overloadDeadline)
	err := interleave(ctx, e.abRounds, 1+len(ab.Runs), func(i int) error {
		spec := load
		if i == 0 {
			spec.conc = overloadClosedConc
			res, cpu := measureWindow(ctx, spec, pid)
			ab.Capacity.add(res, cpu, overloadABWindow)
			if res.Errors > 0 {
				return fmt.Errorf("closed loop: %d errors (%s)", res.Errors, res.FirstError)
			}
			return nil
		}
		run := &ab.Runs[i-1]
		capacity := ab.Capacity.rate()
		if capacity == 0 {
			return errors.New("no capacity measured before the open loop")
		}
		offered := run.Factor * capacity
		run.Offered = (run.Offered*float64(run.Windows) + offered) / float64(run.Windows+1)
		spec.conc, spec.rate, spec.headers = overloadConns, offered, []string{"Grove-Timeout: " + overloadDeadline.String()}
		// Each paced client dials with its first request, within the first
		// pacing interval: let those fall in the warm-up.
		spec.warmup = max(spec.warmup, time.Duration(1.25*float64(overloadConns)/offered*1e9))
		before, err := fetchProm(ctx, client, base)
		if err != nil {
			return fmt.Errorf("reading /metrics: %w", err)
		}
		res, cpu := measureWindow(ctx, spec, pid)
		if ctx.Err() != nil {
			return ctx.Err()
		}
		run.add(res, cpu, overloadABWindow)
		run.Good += countWithin(res.Latencies, overloadDeadline)
		// Let what is still queued drain before the metrics and the next run.
		after, err := waitIdle(ctx, client, base, time.Minute)
		if err != nil {
			return err
		}
		run.addBetween(before, after)
		return nil
	})
	if err != nil {
		if ctx.Err() == nil {
			ab.Error = err.Error()
		}
		return ab
	}
	ab.judge()
	return ab
}

// judge computes the pooled figures and the verdict from the windows.
func (ab *overloadAB) judge() {
	ab.CapacityP50, ab.CapacityP99 = ab.Capacity.percentile(50), ab.Capacity.percentile(99)
	capacity := ab.Capacity.rate()
	for i := range ab.Runs {
		r := &ab.Runs[i]
		r.Goodput = perSec(float64(r.Good), r.Secs)
		if capacity > 0 {
			r.Ratio = r.Goodput / capacity
		}
		r.P50, r.P99 = r.percentile(50), r.percentile(99)
	}
	ab.Met = len(ab.Runs) > 0 && ab.Runs[0].Secs > 0 && ab.Runs[0].Ratio >= overloadGoodputTarget && ab.Runs[0].P99 <= overloadDeadline
}

// countWithin is the number of latencies at most d.
func countWithin(lats []time.Duration, d time.Duration) int {
	n := 0
	for _, l := range lats {
		if l <= d {
			n++
		}
	}
	return n
}

// writeMarkdown prints the A/B's table and verdict.
func (ab *overloadAB) writeMarkdown(w io.Writer) {
	if ab == nil {
		return
	}
	if ab.Error != "" {
		fmt.Fprintf(w, "- Overload, interleaved: FAILED: %s\n", ab.Error)
		return
	}
	fmt.Fprintf(w, "\nOverload, interleaved (%d rounds of %v after %v warm-up, or an open loop's pacing interval if longer, on each run in turn, the order rotating, windows pooled; "+
		"each open-loop window offers its factor times the closed loop's capacity pooled so far; deadline %v on the open loops):\n\n",
		ab.Rounds, ab.Window, overloadABWarmup, overloadDeadline)
	fmt.Fprintln(w, "| run | offered req/s | answered ok/s | goodput (≤ deadline)/s | goodput / capacity | p50 ok | p99 ok | expired | ran late | 429 | other failures | CPU grove | CPU grovebench | CPU other |")
	fmt.Fprintln(w, "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
	c := &ab.Capacity
	fmt.Fprintf(w, "| capacity (closed loop, c %d) | | %s | | 1.00 | %s | %s | | | | %d | %.2f | %.2f | %.2f |\n",
		overloadClosedConc, fmtRate(c.rate()), fmtDur(ab.CapacityP50), fmtDur(ab.CapacityP99), c.Errors, c.cores(), c.benchCores(), c.otherCores())
	for i := range ab.Runs {
		r := &ab.Runs[i]
		name := fmt.Sprintf("%.1fx, Grove-Timeout %v", r.Factor, overloadDeadline)
		if i > 0 {
			name += " (load generator capped)"
		}
		fmt.Fprintf(w, "| %s | %s | %s | %s | %.2f | %s | %s | %.0f | %.0f | %.0f | %d | %.2f | %.2f | %.2f |\n", name, fmtRate(r.Offered), fmtRate(r.rate()),
			fmtRate(r.Goodput), r.Ratio, fmtDur(r.P50), fmtDur(r.P99), r.Expired, r.Late, r.Refused, r.other(r.Errors),
			r.cores(), r.benchCores(), r.otherCores())
	}
	fmt.Fprintln(w)
	if len(ab.Runs) == 0 {
		return
	}
	r := &ab.Runs[0]
	s := fmt.Sprintf("- Overload, interleaved: at %.1fx the capacity with a %v deadline, goodput %s/s = %.2f of the interleaved capacity %s/s (target ≥ %.2f) and p99 of the successful answers %s (target ≤ %v): %s; the load generator kept %.2f cores busy, grove %.2f",
		r.Factor, overloadDeadline, fmtRate(r.Goodput), r.Ratio, fmtRate(c.rate()), overloadGoodputTarget, fmtDur(r.P99), overloadDeadline, verdict(ab.Met),
		r.benchCores(), r.cores())
	for _, q := range ab.Runs[1:] {
		s += fmt.Sprintf("; with the load generator capped at %.1fx: goodput %.2f of the capacity, p99 %s, load generator %.2f cores, grove %.2f",
			q.Factor, q.Ratio, fmtDur(q.P99), q.benchCores(), q.cores())
	}
	fmt.Fprintln(w, s)
	if len(r.Failures) > 0 {
		fmt.Fprintf(w, "- Failed requests of the %.1fx run, as the load generator saw them: %s\n", r.Factor, fmtCounts(r.Failures))
	}
}

// runOverload runs the overload scenario.
func runOverload(ctx context.Context, e lifecycleEnv) *overloadReport {
	rep := &overloadReport{}
	fail := func(format string, a ...any) *overloadReport {
		rep.Error = fmt.Sprintf(format, a...)
		return rep
	}
	bucket := filepath.Join(e.dir, "bucket-overload")
	model, err := os.ReadFile(filepath.Join(e.root, "examples", "bench", deepPath, "model.pt"))
	if err != nil {
		return fail("%v", err)
	}
	if err := writeFileAtomic(filepath.Join(bucket, deepPath, "model.pt"), model); err != nil {
		return fail("writing the overload bucket: %v", err)
	}
	config := `{"model_metadata": [{"model_path": "` + deepPath + `", "max_batch_rows": 1}]}`
	if err := writeFileAtomic(filepath.Join(bucket, "model_config.json"), []byte(config)); err != nil {
		return fail("writing the overload bucket: %v", err)
	}
	g, gep, err := startGrove(ctx, "grove (overload)", e.bin, bucket, filepath.Join(e.dir, "cache-overload"),
		filepath.Join(e.dir, "grove-overload.log"), e.groveArgs, e.startTimeout)
	if g != nil {
		defer g.stop()
	}
	if err != nil {
		return fail("starting grove: %v", err)
	}
	ep, err := deepEndpoint(ctx, "grove (overload)", gep.baseURL, e.root, e.timeout)
	if err != nil {
		return fail("%v", err)
	}
	rows, _, err := loadExpectedModel(filepath.Join(e.root, "examples", "bench", "expected.json"), "rank_deep")
	if err != nil {
		return fail("%v", err)
	}
	base := loadSpec{url: ep.url, body: ep.body(rows[0], 1), okMarker: ep.okMarker, errMarker: ep.errMarker,
		batch: 1, warmup: e.warmup, duration: e.duration, timeout: e.timeout}

	closed := base
	closed.conc = overloadClosedConc
	e.logf("overload: capacity, %s closed loop c %d, %v + %v", deepPath, closed.conc, e.warmup, e.duration)
	cpuc := make(chan cpuUse, 1)
	go func() { cpuc <- measureCPU(ctx, gep.pid, time.Now().Add(e.warmup), e.duration) }()
	c0, t0 := computeStats(ctx, gep.baseURL)
	rep.Capacity = runLoad(ctx, closed)
	rep.CapacityCPU = <-cpuc
	rep.CapacityFwd, rep.CapacityBusy = forwardSince(ctx, gep.baseURL, c0, t0)
	rep.Capacity.Latencies = nil
	if rep.Capacity.Errors > 0 || rep.Capacity.ReqPerSec == 0 {
		return fail("capacity run: %d errors (%s)", rep.Capacity.Errors, rep.Capacity.FirstError)
	}
	rep.Offered = overloadFactor * rep.Capacity.ReqPerSec
	client := &http.Client{Timeout: 5 * time.Second}
	for _, deadline := range []bool{true, false} {
		run, spec, what := &rep.NoDeadline, base, "none"
		spec.conc, spec.rate = overloadConns, rep.Offered
		if deadline {
			run, what = &rep.WithDeadline, overloadDeadline.String()
			spec.headers = []string{"Grove-Timeout: " + what}
		}
		run.Deadline = deadline
		e.logf("overload: %.0f req/s open loop (%.0fx capacity), deadline %s", rep.Offered, overloadFactor, what)
		before, err := fetchProm(ctx, client, gep.baseURL)
		if err != nil {
			return fail("reading /metrics: %v", err)
		}
		go func() { cpuc <- measureCPU(ctx, gep.pid, time.Now().Add(e.warmup), e.duration) }()
		c0, t0 := computeStats(ctx, gep.baseURL)
		run.Load = runLoad(ctx, spec)
		run.CPU = <-cpuc
		run.Forward, run.Busy = forwardSince(ctx, gep.baseURL, c0, t0)
		// Let what is still queued drain before the metrics and the next run.
		after, err := waitIdle(ctx, client, gep.baseURL, time.Minute)
		if err != nil {
			return fail("%v", err)
		}
		run.addBetween(before, after)
		good := countWithin(run.Load.Latencies, overloadDeadline)
		run.Goodput = float64(good) / e.duration.Seconds()
		run.Ratio = run.Goodput / rep.Capacity.ReqPerSec
		run.Load.Latencies = nil
	}
	rep.Met = rep.WithDeadline.Ratio >= overloadGoodputTarget && rep.WithDeadline.Load.P99 <= overloadDeadline
	if e.abRounds > 0 {
		rep.AB = runOverloadAB(ctx, e, gep.baseURL, gep.pid, base)
	}
	return rep
}

func (r *overloadReport) writeMarkdown(w io.Writer) {
	if r == nil {
		return
	}
	fmt.Fprintf(w, "\nOverload (%s, batching off, POST /v1/inference, batch 1; open loop at %.0fx the closed-loop capacity, latency from each request's scheduled start):\n\n",
		deepPath, overloadFactor)
	fmt.Fprintln(w, "| run | offered req/s | answered ok/s | goodput (≤ deadline)/s | goodput / capacity | p50 ok | p99 ok | expired | ran late | 429 | other failures | CPU grove | CPU grovebench | mean forward | model busy |")
	fmt.Fprintln(w, "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
	c := r.Capacity
	fmt.Fprintf(w, "| capacity (closed loop, c %d) | | %s | | 1.00 | %s | %s | | | | %d | %.2f | %.2f | %s | %.0f %% |\n", overloadClosedConc, fmtRate(c.ReqPerSec), fmtDur(c.P50), fmtDur(c.P99), c.Errors,
		r.CapacityCPU.Grove, r.CapacityCPU.Bench, fmtDur(r.CapacityFwd), 100*r.CapacityBusy)
	for _, run := range []overloadRun{r.WithDeadline, r.NoDeadline} {
		name := "no deadline"
		if run.Deadline {
			name = "Grove-Timeout " + overloadDeadline.String()
		}
		fmt.Fprintf(w, "| %s | %s | %s | %s | %.2f | %s | %s | %.0f | %.0f | %.0f | %d | %.2f | %.2f | %s | %.0f %% |\n", name, fmtRate(r.Offered), fmtRate(run.Load.ReqPerSec),
			fmtRate(run.Goodput), run.Ratio, fmtDur(run.Load.P50), fmtDur(run.Load.P99), run.Expired, run.Late, run.Refused, run.other(run.Load.Errors), run.CPU.Grove, run.CPU.Bench,
			fmtDur(run.Forward), 100*run.Busy)
	}
	if f := r.WithDeadline.Load.Failures; len(f) > 0 {
		fmt.Fprintf(w, "\n- Failed requests of the Grove-Timeout run, as the load generator saw them: %s\n", fmtCounts(f))
	}
	fmt.Fprintf(w, "\n- Overload: with a %v deadline, goodput %s/s = %.2f of the capacity %s/s (target ≥ %.2f) and p99 of the successful answers %s (target ≤ %v): %s\n",
		overloadDeadline, fmtRate(r.WithDeadline.Goodput), r.WithDeadline.Ratio, fmtRate(r.Capacity.ReqPerSec), overloadGoodputTarget,
		fmtDur(r.WithDeadline.Load.P99), overloadDeadline, verdict(r.Met))
	fmt.Fprintf(w, "- Overload: without deadlines, goodput %s/s = %.2f of the capacity, p99 of the successful answers %s\n",
		fmtRate(r.NoDeadline.Goodput), r.NoDeadline.Ratio, fmtDur(r.NoDeadline.Load.P99))
	if r.Error != "" {
		fmt.Fprintf(w, "- Overload scenario FAILED: %s\n", r.Error)
	}
	r.AB.writeMarkdown(w)
}

// computeStats reads rank_deep's forward calls so far (count and total
// time) from grove's OIP statistics, and when (zero when they cannot be
// read).
func computeStats(ctx context.Context, base string) (stat computeStat, at time.Time) {
	at = time.Now()
	c, _ := fetchModelCounts(ctx, base, strings.TrimSuffix(deepPath, "/"))
	return c.Compute, at
}

// modelCounts are what a model's OIP statistics counted: requests
// answered (inference_stats.success), forward calls of user requests
// (execution_count: a dynamic batch of several requests is one), rows
// (inference_count) and the requests' forward time (compute_infer: each
// request of a batch counts the batch's forward).
type modelCounts struct {
	Requests int64       `json:"requests"`
	Forwards int64       `json:"forward_calls"`
	Rows     int64       `json:"rows"`
	Compute  computeStat `json:"compute_infer"`
}

// fetchModelCounts reads model's OIP statistics from grove at base.
func fetchModelCounts(ctx context.Context, base, model string) (modelCounts, error) {
	var c modelCounts
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, base+"/v2/models/"+model+"/stats", nil)
	if err != nil {
		return c, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return c, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(resp.Body)
		return c, fmt.Errorf("GET /v2/models/%s/stats: HTTP %d: %s", model, resp.StatusCode, clip(b, 200))
	}
	var doc struct {
		ModelStats []struct {
			InferenceCount int64 `json:"inference_count"`
			ExecutionCount int64 `json:"execution_count"`
			InferenceStats struct {
				Success      computeStat `json:"success"`
				ComputeInfer computeStat `json:"compute_infer"`
			} `json:"inference_stats"`
		} `json:"model_stats"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&doc); err != nil {
		return c, fmt.Errorf("GET /v2/models/%s/stats: %w", model, err)
	}
	if len(doc.ModelStats) != 1 {
		return c, fmt.Errorf("GET /v2/models/%s/stats: %d model_stats entries, want 1", model, len(doc.ModelStats))
	}
	m := doc.ModelStats[0]
	c = modelCounts{Requests: m.InferenceStats.Success.Count, Forwards: m.ExecutionCount, Rows: m.InferenceCount, Compute: m.InferenceStats.ComputeInfer}
	return c, nil
}

// minus is c less b, counter by counter.
func (c modelCounts) minus(b modelCounts) modelCounts {
	return modelCounts{Requests: c.Requests - b.Requests, Forwards: c.Forwards - b.Forwards, Rows: c.Rows - b.Rows,
		Compute: computeStat{Count: c.Compute.Count - b.Compute.Count, Ns: c.Compute.Ns - b.Compute.Ns}}
}

// add adds d to c, counter by counter.
func (c *modelCounts) add(d modelCounts) {
	c.Requests, c.Forwards, c.Rows = c.Requests+d.Requests, c.Forwards+d.Forwards, c.Rows+d.Rows
	c.Compute.Count, c.Compute.Ns = c.Compute.Count+d.Compute.Count, c.Compute.Ns+d.Compute.Ns
}

// forwardsPerRequest is the forward calls per answered request (0: none).
func (c modelCounts) forwardsPerRequest() float64 {
	if c.Requests <= 0 {
		return 0
	}
	return float64(c.Forwards) / float64(c.Requests)
}

// rowsPerForward is the rows per forward call (0: none).
func (c modelCounts) rowsPerForward() float64 {
	if c.Forwards <= 0 {
		return 0
	}
	return float64(c.Rows) / float64(c.Forwards)
}

// computeStat is a count and a total time in ns, as OIP statistics give them.
type computeStat struct {
	Count int64 `json:"count"`
	Ns    int64 `json:"ns"`
}

// forwardSince returns the mean forward call since before (read at t0)
// and the share of the wall time spent in forward calls.
func forwardSince(ctx context.Context, base string, before computeStat, t0 time.Time) (time.Duration, float64) {
	after, t1 := computeStats(ctx, base)
	n, ns := after.Count-before.Count, after.Ns-before.Ns
	if n <= 0 || !t1.After(t0) {
		return 0, 0
	}
	return time.Duration(ns / n), float64(ns) / float64(t1.Sub(t0))
}

// waitIdle polls grove's metrics until no request is in flight, and returns them.
func waitIdle(ctx context.Context, client *http.Client, base string, timeout time.Duration) (promSnapshot, error) {
	start := time.Now()
	for {
		p, err := fetchProm(ctx, client, base)
		if err == nil && p.sum("grove_model_inflight", nil) == 0 {
			return p, nil
		}
		if time.Since(start) > timeout || ctx.Err() != nil {
			return nil, fmt.Errorf("requests still in flight after %v (%v)", timeout, err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}
