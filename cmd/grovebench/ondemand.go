package main

// The ondemand scenario measures on-demand loading (docs/density.md) on a
// grove of its own: the example pCTR TorchScript model (pctr_v1/) and its
// ONNX export (pctr_onnx/) are served eagerly, so that both runtimes have
// started, beside copies of each under other names with "load":
// "on_demand" and a memory budget that holds about a dozen copies.
//
//   - cold start: the first request for each copy, one at a time (an
//     unloaded model: fetch, checksum, load, warm-up, then the answer;
//     once the budget is full, with an idle copy unloaded first), and the
//     next request for it (warm), by runtime;
//   - warm p50/p99 of pctr_v1/ (batch 1, c 4) alone, then while 4 other
//     clients request the copies round robin, each request a miss that
//     loads one (churn around it), and the loads per second that churn
//     sustains (grove_model_loads_total{reason="demand"}).

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// scenarioOnDemand is the ondemand scenario's name in --scenarios.
const scenarioOnDemand = "ondemand"

// The ondemand scenario's shape.
const (
	onDemandCopies = 24      // copies of each runtime's model
	onDemandBudget = 6 << 20 // about a dozen copies of 0.5 MB
	onDemandConc   = 4       // churn clients, and warm clients
)

// splitOnDemandSpec takes "ondemand" out of a --scenarios value.
func splitOnDemandSpec(spec string) (rest string, on bool) {
	var others []string
	for _, e := range strings.Split(spec, ",") {
		if strings.EqualFold(strings.TrimSpace(e), scenarioOnDemand) {
			on = true
			continue
		}
		others = append(others, e)
	}
	return strings.Join(others, ","), on
}

// coldStarts is the cold and warm latency of one runtime's copies.
type coldStarts struct {
	Runtime string        `json:"runtime"`
	N       int           `json:"n"`
	P50     time.Duration `json:"p50_ns"`
	P99     time.Duration `json:"p99_ns"`
	Max     time.Duration `json:"max_ns"`
	WarmP50 time.Duration `json:"warm_p50_ns"`
}

// onDemandReport is what the ondemand scenario measured.
type onDemandReport struct {
	Copies      int          `json:"copies_per_runtime"`
	BudgetBytes int64        `json:"budget_bytes"`
	Cold        []coldStarts `json:"cold_starts"`
	// WarmAlone and WarmChurn are pctr_v1/'s load without and with the
	// churn; Loads the demand loads during the churn, LoadsPerSec per
	// second of it, ChurnErrors its failed requests.
	WarmAlone   loadResult `json:"warm_alone"`
	WarmChurn   loadResult `json:"warm_churn"`
	Loads       int        `json:"loads"`
	LoadsPerSec float64    `json:"loads_per_sec"`
	ChurnErrors int        `json:"churn_errors"`
	Error       string     `json:"error,omitempty"`
}

// onDemandBody is a B&A request of one row for model path.
func onDemandBody(path string, row []float64) []byte {
	vals := make([]string, len(row))
	for i, v := range row {
		vals[i] = `"` + strconv.FormatFloat(v, 'g', -1, 64) + `"`
	}
	return fmt.Appendf(nil, `{"request":[{"model_path":%q,"tensors":[{"data_type":"FLOAT","tensor_shape":[1,%d],"tensor_content":[%s]}]}]}`,
		path, len(row), strings.Join(vals, ","))
}

// runOnDemand runs the ondemand scenario.
func runOnDemand(ctx context.Context, e lifecycleEnv) *onDemandReport {
	rep := &onDemandReport{Copies: onDemandCopies, BudgetBytes: onDemandBudget}
	fail := func(format string, a ...any) *onDemandReport {
		rep.Error = fmt.Sprintf(format, a...)
		return rep
	}
	bucket := filepath.Join(e.dir, "bucket-ondemand")
	type kind struct{ runtime, eager, file string }
	kinds := []kind{{"torchscript", modelPath, "model.pt"}, {"onnx", onnxPath, "model.onnx"}}
	entries := []map[string]string{{"model_path": modelPath}, {"model_path": onnxPath}}
	copies := map[string][]string{}
	for _, k := range kinds {
		data, err := os.ReadFile(filepath.Join(e.examples, k.eager, k.file))
		if err != nil {
			return fail("%v", err)
		}
		for i := range onDemandCopies + 1 {
			p := fmt.Sprintf("%s_%02d/", k.runtime, i)
			if i == onDemandCopies {
				p = k.eager
			}
			if err := writeFileAtomic(filepath.Join(bucket, p, k.file), data); err != nil {
				return fail("%v", err)
			}
			if i < onDemandCopies {
				copies[k.runtime] = append(copies[k.runtime], p)
				entries = append(entries, map[string]string{"model_path": p, "load": "on_demand"})
			}
		}
	}
	cfg, err := json.Marshal(map[string]any{"model_metadata": entries})
	if err != nil {
		return fail("%v", err)
	}
	if err := writeFileAtomic(filepath.Join(bucket, "model_config.json"), cfg); err != nil {
		return fail("%v", err)
	}
	args := append(slices.Clone(e.groveArgs), "--memory-budget-bytes", strconv.Itoa(onDemandBudget))
	g, ep, err := startGrove(ctx, "grove (ondemand)", e.bin, bucket, filepath.Join(e.dir, "cache-ondemand"), filepath.Join(e.dir, "grove-ondemand.log"), args, e.startTimeout)
	if g != nil {
		defer g.stop()
	}
	if err != nil {
		return fail("starting grove: %v", err)
	}
	client := &http.Client{Timeout: e.timeout}
	call := func(path string) (time.Duration, error) {
		start := time.Now()
		resp, err := client.Post(ep.url, "application/json", strings.NewReader(string(onDemandBody(path, e.rows[0]))))
		if err != nil {
			return 0, err
		}
		body, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		took := time.Since(start)
		if err != nil || resp.StatusCode != http.StatusOK || !strings.Contains(string(body), `"tensors"`) || strings.Contains(string(body), `"error_type"`) {
			return 0, fmt.Errorf("%s: HTTP %d %.200s %v", path, resp.StatusCode, body, err)
		}
		return took, nil
	}

	// Cold starts, one at a time, each followed by a warm request.
	e.logf("ondemand: cold starts of %d copies of each runtime's model (budget %s)", onDemandCopies, fmtBytes(onDemandBudget))
	for _, k := range kinds {
		cs := coldStarts{Runtime: k.runtime}
		var cold, warm []time.Duration
		for _, p := range copies[k.runtime] {
			c, err := call(p)
			if err != nil {
				return fail("cold start: %v", err)
			}
			w, err := call(p)
			if err != nil {
				return fail("warm request: %v", err)
			}
			cold, warm = append(cold, c), append(warm, w)
		}
		slices.Sort(cold)
		slices.Sort(warm)
		cs.N, cs.P50, cs.P99, cs.Max, cs.WarmP50 = len(cold), percentile(cold, 50), percentile(cold, 99), cold[len(cold)-1], percentile(warm, 50)
		rep.Cold = append(rep.Cold, cs)
		if ctx.Err() != nil {
			return rep
		}
	}

	// Warm pctr_v1/ alone, then with the churn around it.
	warm := loadSpec{url: ep.url, body: ep.body(e.rows[0], 1), okMarker: ep.okMarker, errMarker: ep.errMarker,
		batch: 1, conc: onDemandConc, warmup: e.warmup, duration: e.duration, timeout: e.timeout}
	e.logf("ondemand: warm %s alone (c %d, %v)", modelPath, onDemandConc, e.duration)
	rep.WarmAlone = runLoad(ctx, warm)
	rep.WarmAlone.Latencies = nil
	all := append(slices.Clone(copies["torchscript"]), copies["onnx"]...)
	before, err := fetchProm(ctx, client, ep.baseURL)
	if err != nil {
		return fail("metrics: %v", err)
	}
	e.logf("ondemand: warm %s with %d clients loading copies round robin", modelPath, onDemandConc)
	stop := make(chan struct{})
	var next, errs atomic.Int64
	var wg sync.WaitGroup
	start := time.Now()
	for range onDemandConc {
		wg.Go(func() {
			for {
				select {
				case <-stop:
					return
				default:
				}
				if _, err := call(all[int(next.Add(1))%len(all)]); err != nil {
					errs.Add(1)
				}
			}
		})
	}
	rep.WarmChurn = runLoad(ctx, warm)
	rep.WarmChurn.Latencies = nil
	close(stop)
	wg.Wait()
	el := time.Since(start)
	after, err := fetchProm(ctx, client, ep.baseURL)
	if err != nil {
		return fail("metrics: %v", err)
	}
	demand := map[string]string{"reason": "demand", "result": "ok"}
	rep.Loads = int(after.sum("grove_model_loads_total", demand) - before.sum("grove_model_loads_total", demand))
	rep.LoadsPerSec = float64(rep.Loads) / el.Seconds()
	rep.ChurnErrors = int(errs.Load())
	if rep.ChurnErrors > 0 || rep.WarmAlone.Errors > 0 || rep.WarmChurn.Errors > 0 {
		return fail("%d churn requests, %d warm requests alone and %d with churn failed (first: %s%s)", rep.ChurnErrors,
			rep.WarmAlone.Errors, rep.WarmChurn.Errors, rep.WarmAlone.FirstError, rep.WarmChurn.FirstError)
	}
	return rep
}

func (r *onDemandReport) writeMarkdown(w io.Writer) {
	if r == nil {
		return
	}
	fmt.Fprintf(w, "\nOn demand (%d copies of each runtime's pCTR model, load on_demand, budget %s; both runtimes started by eager models):\n\n",
		r.Copies, fmtBytes(r.BudgetBytes))
	for _, c := range r.Cold {
		fmt.Fprintf(w, "- Cold start, %s (request for an unloaded model → answer, one at a time, %d copies): p50 %s, p99 %s, max %s; the next request (warm) p50 %s\n",
			c.Runtime, c.N, fmtMs(c.P50), fmtMs(c.P99), fmtMs(c.Max), fmtMs(c.WarmP50))
	}
	if r.WarmAlone.Requests > 0 {
		fmt.Fprintf(w, "- Warm %s (batch 1, c %d): p50 %s, p99 %s alone; p50 %s, p99 %s with %d clients loading copies around it\n",
			modelPath, onDemandConc, fmtMs(r.WarmAlone.P50), fmtMs(r.WarmAlone.P99), fmtMs(r.WarmChurn.P50), fmtMs(r.WarmChurn.P99), onDemandConc)
		fmt.Fprintf(w, "- Loads per second (demand loads, one at a time under the budget, each unloading an idle copy): %.1f (%d loads)\n", r.LoadsPerSec, r.Loads)
	}
	if r.Error != "" {
		fmt.Fprintf(w, "- On-demand scenario FAILED: %s\n", r.Error)
	}
}

// fmtMs renders a duration in milliseconds.
func fmtMs(d time.Duration) string {
	return fmt.Sprintf("%.2f ms", float64(d)/float64(time.Millisecond))
}
