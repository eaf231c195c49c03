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
//  3. offers the same load with no deadline.
//
// Goodput counts the successful answers whose latency, seen by the
// client, is within the deadline. Expired work (grove_requests_expired_total)
// and refusals of a full queue (HTTP 429) are read from grove's metrics.

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
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
)

// overloadRun is one open-loop run.
type overloadRun struct {
	Deadline bool       `json:"deadline"`
	Load     loadResult `json:"load"`
	// Goodput is the successful answers within the deadline per second of
	// the window; Ratio is Goodput over the measured capacity.
	Goodput float64 `json:"goodput"`
	Ratio   float64 `json:"goodput_ratio"`
	// Expired and Refused are what grove counted during the run: work
	// dropped unrun (any reason) and requests refused with 429.
	Expired float64 `json:"expired"`
	Refused float64 `json:"refused"`
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
	Error        string        `json:"error,omitempty"`
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
		run.Expired = after.sum("grove_requests_expired_total", nil) - before.sum("grove_requests_expired_total", nil)
		refused := map[string]string{"code": "429"}
		run.Refused = after.sum("grove_http_requests_total", refused) - before.sum("grove_http_requests_total", refused)
		good := 0
		for _, l := range run.Load.Latencies {
			if l <= overloadDeadline {
				good++
			}
		}
		run.Goodput = float64(good) / e.duration.Seconds()
		run.Ratio = run.Goodput / rep.Capacity.ReqPerSec
		run.Load.Latencies = nil
	}
	rep.Met = rep.WithDeadline.Ratio >= overloadGoodputTarget && rep.WithDeadline.Load.P99 <= overloadDeadline
	return rep
}

func (r *overloadReport) writeMarkdown(w io.Writer) {
	if r == nil {
		return
	}
	fmt.Fprintf(w, "\nOverload (%s, batching off, POST /v1/inference, batch 1; open loop at %.0fx the closed-loop capacity, latency from each request's scheduled start):\n\n",
		deepPath, overloadFactor)
	fmt.Fprintln(w, "| run | offered req/s | answered ok/s | goodput (≤ deadline)/s | goodput / capacity | p50 ok | p99 ok | expired | 429 | other failures | CPU grove | CPU grovebench | mean forward | model busy |")
	fmt.Fprintln(w, "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
	c := r.Capacity
	fmt.Fprintf(w, "| capacity (closed loop, c %d) | | %s | | 1.00 | %s | %s | | | %d | %.2f | %.2f | %s | %.0f %% |\n", overloadClosedConc, fmtRate(c.ReqPerSec), fmtDur(c.P50), fmtDur(c.P99), c.Errors,
		r.CapacityCPU.Grove, r.CapacityCPU.Bench, fmtDur(r.CapacityFwd), 100*r.CapacityBusy)
	for _, run := range []overloadRun{r.WithDeadline, r.NoDeadline} {
		name := "no deadline"
		if run.Deadline {
			name = "Grove-Timeout " + overloadDeadline.String()
		}
		other := run.Load.Errors - int(run.Expired) - int(run.Refused)
		fmt.Fprintf(w, "| %s | %s | %s | %s | %.2f | %s | %s | %.0f | %.0f | %d | %.2f | %.2f | %s | %.0f %% |\n", name, fmtRate(r.Offered), fmtRate(run.Load.ReqPerSec),
			fmtRate(run.Goodput), run.Ratio, fmtDur(run.Load.P50), fmtDur(run.Load.P99), run.Expired, run.Refused, max(other, 0), run.CPU.Grove, run.CPU.Bench,
			fmtDur(run.Forward), 100*run.Busy)
	}
	fmt.Fprintf(w, "\n- Overload: with a %v deadline, goodput %s/s = %.2f of the capacity %s/s (target ≥ %.2f) and p99 of the successful answers %s (target ≤ %v): %s\n",
		overloadDeadline, fmtRate(r.WithDeadline.Goodput), r.WithDeadline.Ratio, fmtRate(r.Capacity.ReqPerSec), overloadGoodputTarget,
		fmtDur(r.WithDeadline.Load.P99), overloadDeadline, verdict(r.Met))
	fmt.Fprintf(w, "- Overload: without deadlines, goodput %s/s = %.2f of the capacity, p99 of the successful answers %s\n",
		fmtRate(r.NoDeadline.Goodput), r.NoDeadline.Ratio, fmtDur(r.NoDeadline.Load.P99))
	if r.Error != "" {
		fmt.Fprintf(w, "- Overload scenario FAILED: %s\n", r.Error)
	}
}

// computeStats reads rank_deep's forward calls so far (count and total
// time) from grove's OIP statistics, and when.
func computeStats(ctx context.Context, base string) (stat computeStat, at time.Time) {
	at = time.Now()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, base+"/v2/models/rank_deep/stats", nil)
	if err != nil {
		return stat, at
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return stat, at
	}
	defer resp.Body.Close()
	var doc struct {
		ModelStats []struct {
			InferenceStats struct {
				ComputeInfer computeStat `json:"compute_infer"`
			} `json:"inference_stats"`
		} `json:"model_stats"`
	}
	if json.NewDecoder(resp.Body).Decode(&doc) == nil && len(doc.ModelStats) == 1 {
		stat = doc.ModelStats[0].InferenceStats.ComputeInfer
	}
	return stat, at
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
