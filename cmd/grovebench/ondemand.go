package main

// The ondemand scenario measures on-demand loading (docs/density.md) on a
// grove of its own: the example pCTR TorchScript model (pctr_v1/) and its
// ONNX export (pctr_onnx/) are served eagerly, so that both runtimes have
// started, beside copies of each under other names, each a model of its
// own (modelcopy.Distinct: its own checksum), with "load": "on_demand"
// and a memory budget that holds about a dozen copies.
//
//   - cold start: the first request for each copy, one at a time (an
//     unloaded model: fetch, checksum, load, warm-up, then the answer;
//     once the budget is full, with an idle copy unloaded first), and the
//     next request for it (warm), by runtime;
//   - warm p50/p99 of pctr_v1/ (batch 1, c 4) alone, then while 4 other
//     clients request the copies round robin, each request a miss that
//     loads one (churn around it), and the loads per second that churn
//     sustains (grove_model_loads_total{reason="demand"}); then again
//     with the churn paced at half that rate (a node not saturated by
//     loads);
//   - the same two loads at half the rate pctr_v1/ served alone, paced
//     (open loop, latency from each request's scheduled start), alone
//     and with the churn paced as above: a node with headroom, where the
//     closed loop above measures a saturated one, whose warm requests
//     must lose whatever CPU the loads take;
//   - the CPU one demand load costs the server: the churn paced as above
//     with nothing else running, the server's CPU seconds over its loads;
//   - a verdict on each: warm p50 with churn within 10 % of alone and
//     p99 within 25 % (onDemandP50Slack, onDemandP99Slack), judged on an
//     interleaved A/B of the two (--ondemand-ab-rounds: short windows of
//     the warm load alone and with the churn in turn, latencies pooled),
//     because the sequential rows above run seconds apart and the
//     background load of a shared machine moves a row's p50 by more than
//     the bound from one to the next.

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/groveml/grove/internal/lowprio"
	"github.com/groveml/grove/internal/modelcopy"
)

// scenarioOnDemand is the ondemand scenario's name in --scenarios.
const scenarioOnDemand = "ondemand"

// The ondemand scenario's shape.
const (
	onDemandCopies = 24      // copies of each runtime's model
	onDemandBudget = 6 << 20 // about a dozen copies of 0.5 MB
	onDemandConc   = 4       // churn clients, and warm clients
	// onDemandFleetRate is the demand loads per second of the verdict
	// at a fleet node's churn: ten misses a second, about a tenth of what
	// one node sustains on the 2-core development machine.
	onDemandFleetRate = 10.0
)

// onDemandABWindow is a row's measured window in a round of the ondemand
// A/Bs, after onDemandABWarmup (in which the churn's clients start).
const (
	onDemandABWindow = 1500 * time.Millisecond
	onDemandABWarmup = 300 * time.Millisecond
)

// The verdict's bounds on warm latency with churn around it, as a ratio to
// alone: the p50 reflects steady contention, which the loads' lower
// priority should keep out of the warm model's way; the p99 also catches
// what priority cannot (a load's Go work holding a P, a garbage
// collection, the churn's own HTTP work). Both are judged on the
// interleaved A/Bs, whose rows saw the same background load.
const (
	onDemandP50Slack = 1.10
	onDemandP99Slack = 1.25
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
	// second of it, ChurnErrors the failed requests of both churns.
	WarmAlone   loadResult `json:"warm_alone"`
	WarmChurn   loadResult `json:"warm_churn"`
	Loads       int        `json:"loads"`
	LoadsPerSec float64    `json:"loads_per_sec"`
	ChurnErrors int        `json:"churn_errors"`
	// WarmPaced is pctr_v1/'s load while the churn is paced at
	// PacedRate, half of LoadsPerSec; PacedLoadsPerSec is what it ran at.
	WarmPaced        loadResult `json:"warm_paced"`
	PacedRate        float64    `json:"paced_rate"`
	PacedLoadsPerSec float64    `json:"paced_loads_per_sec"`
	// HalfRate is half of WarmAlone's requests per second; HalfAlone and
	// HalfPaced are pctr_v1/'s load paced at it, alone and with the churn
	// paced at PacedRate (HalfLoadsPerSec the loads it ran at).
	HalfRate        float64    `json:"half_rate"`
	HalfAlone       loadResult `json:"half_alone"`
	HalfPaced       loadResult `json:"half_paced"`
	HalfLoadsPerSec float64    `json:"half_loads_per_sec"`
	// CPUPerLoad is the server's CPU seconds per demand load while the
	// churn ran paced with no other load (AloneLoads loads).
	CPUPerLoad float64 `json:"cpu_per_load_s"`
	AloneLoads int     `json:"alone_loads"`
	// LowCPUPerLoad is the part of CPUPerLoad that ran on Grove's lowered
	// threads (grove_low_priority_cpu_seconds_total{work="load"}: the
	// runtime's load and the warm-up).
	LowCPUPerLoad float64 `json:"low_cpu_per_load_s"`
	// AB holds the interleaved A/Bs the verdicts are judged on, one for
	// each comparison above (none with --ondemand-ab-rounds 0).
	AB    []onDemandAB `json:"ab,omitempty"`
	Error string       `json:"error,omitempty"`
}

// onDemandAB is one interleaved A/B of the ondemand scenario: Rounds
// rounds of the warm load alone and with the churn around it
// (ChurnRate requests a second, 0 for as fast as answered), each row a
// window of onDemandABWindow a round, pooled; LoadsPerSec is the demand
// loads per second over the churn's windows.
type onDemandAB struct {
	What        string  `json:"what"`
	Rounds      int     `json:"rounds"`
	ChurnRate   float64 `json:"churn_rate"`
	Alone       abPool  `json:"alone"`
	Churn       abPool  `json:"churn"`
	LoadsPerSec float64 `json:"loads_per_sec"`
	// AloneP50 and the rest are the pooled percentiles (the pools' latencies
	// are not in the JSON).
	AloneP50 time.Duration `json:"alone_p50_ns"`
	AloneP99 time.Duration `json:"alone_p99_ns"`
	ChurnP50 time.Duration `json:"churn_p50_ns"`
	ChurnP99 time.Duration `json:"churn_p99_ns"`
	// Control is the warm load in a third row of each round, beside the
	// CPU burner spinning ControlCores (the churn's server CPU: its loads
	// per second times CPUPerLoad) at the loads' nice value instead of
	// the churn; none when CPUPerLoad was not measured.
	ControlCores float64       `json:"control_cores,omitempty"`
	Control      *abPool       `json:"control,omitempty"`
	ControlP50   time.Duration `json:"control_p50_ns,omitempty"`
	ControlP99   time.Duration `json:"control_p99_ns,omitempty"`
	// Pauses are the server's stop-the-world pauses over the churn's
	// windows, PausedSecs their windows' seconds; AlonePauses and
	// AlonePausedSecs the same over the windows alone.
	Pauses          pauseCount `json:"pauses"`
	PausedSecs      float64    `json:"paused_secs"`
	AlonePauses     pauseCount `json:"alone_pauses"`
	AlonePausedSecs float64    `json:"alone_paused_secs"`
	// PausesExported is whether the server exports the pause metrics (a
	// grove before them does not: no line then).
	PausesExported bool `json:"pauses_exported"`
}

// churnVerdict compares warm latency with churn to alone, given the p50s
// and p99s of both: the ratios of the p50s and p99s, and whether both are
// within their bounds (never, when either side measured nothing).
func churnVerdict(aloneP50, aloneP99, churnP50, churnP99 time.Duration) (p50, p99 float64, ok bool) {
	if aloneP50 <= 0 || aloneP99 <= 0 || churnP50 <= 0 || churnP99 <= 0 {
		return 0, 0, false
	}
	p50, p99 = float64(churnP50)/float64(aloneP50), float64(churnP99)/float64(aloneP99)
	return p50, p99, p50 <= onDemandP50Slack && p99 <= onDemandP99Slack
}

// churnRun is one run of the ondemand scenario's churn: the warm load
// measured meanwhile (if any), the demand loads the server counted, the
// run's seconds and the server's CPU seconds over them, and the server's
// stop-the-world pauses over them (Go's go_sched_pauses_total_*: the
// collector's, and the others, such as a change of GOMAXPROCS): how many,
// and their seconds.
type churnRun struct {
	warm      loadResult
	loads     int
	secs, cpu float64
	lowCPU    float64 // the part of cpu on lowered threads, loading
	pauses    pauseCount
}

// pauseCount is a count of stop-the-world pauses of each kind and their
// seconds.
type pauseCount struct {
	GC        float64 `json:"gc"`
	GCSecs    float64 `json:"gc_secs"`
	Other     float64 `json:"other"`
	OtherSecs float64 `json:"other_secs"`
}

// pausesBetween is the pauses counted from snapshot before to after.
func pausesBetween(before, after promSnapshot) pauseCount {
	d := func(name string) float64 { return after.sum(name, nil) - before.sum(name, nil) }
	return pauseCount{GC: d("go_sched_pauses_total_gc_seconds_count"), GCSecs: d("go_sched_pauses_total_gc_seconds_sum"),
		Other: d("go_sched_pauses_total_other_seconds_count"), OtherSecs: d("go_sched_pauses_total_other_seconds_sum")}
}

// hasPauses reports whether snapshot p has Go's pause histograms.
func hasPauses(p promSnapshot) bool {
	for _, s := range p {
		if s.Name == "go_sched_pauses_total_gc_seconds_count" {
			return true
		}
	}
	return false
}

// add adds q's pauses to p's.
func (p *pauseCount) add(q pauseCount) {
	p.GC, p.GCSecs, p.Other, p.OtherSecs = p.GC+q.GC, p.GCSecs+q.GCSecs, p.Other+q.Other, p.OtherSecs+q.OtherSecs
}

// loadsPerSec is the run's demand loads per second.
func (r churnRun) loadsPerSec() float64 { return perSec(float64(r.loads), r.secs) }

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
			content := data
			if i < onDemandCopies {
				// Each copy a model of its own (its own checksum), as a
				// fleet's are: nothing kept by content is shared.
				if content, err = modelcopy.Distinct(k.file, data, i); err != nil {
					return fail("%v", err)
				}
			}
			if err := writeFileAtomic(filepath.Join(bucket, p, k.file), content); err != nil {
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
	var next, errs atomic.Int64
	// churn runs the warm load (none: nil, the churn alone for the
	// scenario's duration) while onDemandConc clients request the copies
	// round robin, every request a miss, at most rate requests per second
	// (0: as fast as they are answered).
	churn := func(warm *loadSpec, rate float64) (churnRun, error) {
		before, err := fetchProm(ctx, client, ep.baseURL)
		if err != nil {
			return churnRun{}, fmt.Errorf("metrics: %w", err)
		}
		stop := make(chan struct{})
		var tokens chan struct{}
		var wg sync.WaitGroup
		if rate > 0 {
			tokens = make(chan struct{})
			wg.Go(func() {
				t := time.NewTicker(time.Duration(float64(time.Second) / rate))
				defer t.Stop()
				for {
					select {
					case <-stop:
						return
					case <-t.C:
						select {
						case tokens <- struct{}{}: // a client is free
						default: // every client still waits: the tick is lost
						}
					}
				}
			})
		}
		start := time.Now()
		for range onDemandConc {
			wg.Go(func() {
				for {
					if tokens != nil {
						select {
						case <-stop:
							return
						case <-tokens:
						}
					}
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
		var run churnRun
		if warm != nil {
			run.warm = runLoad(ctx, *warm)
		} else {
			select {
			case <-ctx.Done():
			case <-time.After(e.duration):
			}
		}
		close(stop)
		wg.Wait()
		run.secs = time.Since(start).Seconds()
		after, err := fetchProm(ctx, client, ep.baseURL)
		if err != nil {
			return run, fmt.Errorf("metrics: %w", err)
		}
		demand := map[string]string{"reason": "demand", "result": "ok"}
		run.loads = int(after.sum("grove_model_loads_total", demand) - before.sum("grove_model_loads_total", demand))
		run.cpu = after.sum("process_cpu_seconds_total", nil) - before.sum("process_cpu_seconds_total", nil)
		loadWork := map[string]string{"work": "load"}
		run.lowCPU = after.sum("grove_low_priority_cpu_seconds_total", loadWork) - before.sum("grove_low_priority_cpu_seconds_total", loadWork)
		run.pauses = pausesBetween(before, after)
		return run, nil
	}
	e.logf("ondemand: warm %s with %d clients loading copies round robin", modelPath, onDemandConc)
	run, err := churn(&warm, 0)
	if err != nil {
		return fail("%v", err)
	}
	rep.WarmChurn, rep.Loads, rep.LoadsPerSec = run.warm, run.loads, run.loadsPerSec()
	rep.WarmChurn.Latencies = nil
	rep.PacedRate = rep.LoadsPerSec / 2
	// half is the warm load paced at half the rate it reached alone.
	half := warm
	rep.HalfRate = rep.WarmAlone.ReqPerSec / 2
	half.rate = rep.HalfRate
	e.logf("ondemand: warm %s with the copies loaded at %.1f/s (half the rate sustained)", modelPath, rep.PacedRate)
	if rep.PacedRate > 0 {
		if run, err = churn(&warm, rep.PacedRate); err != nil {
			return fail("%v", err)
		}
		rep.WarmPaced, rep.PacedLoadsPerSec = run.warm, run.loadsPerSec()
		rep.WarmPaced.Latencies = nil
		e.logf("ondemand: warm %s paced at %.0f requests/s (half its rate alone), alone and with the copies loaded at %.1f/s", modelPath, half.rate, rep.PacedRate)
		rep.HalfAlone = runLoad(ctx, half)
		rep.HalfAlone.Latencies = nil
		if run, err = churn(&half, rep.PacedRate); err != nil {
			return fail("%v", err)
		}
		rep.HalfPaced, rep.HalfLoadsPerSec = run.warm, run.loadsPerSec()
		rep.HalfPaced.Latencies = nil
		e.logf("ondemand: the copies loaded at %.1f/s with nothing else running, for the CPU of a load", rep.PacedRate)
		if run, err = churn(nil, rep.PacedRate); err != nil {
			return fail("%v", err)
		}
		if run.loads > 0 {
			rep.CPUPerLoad, rep.AloneLoads = run.cpu/float64(run.loads), run.loads
			rep.LowCPUPerLoad = run.lowCPU / float64(run.loads)
		}
	}

	// The verdicts' A/Bs: each comparison above again, its two rows in
	// short windows in turn.
	if e.onDemandRounds > 0 {
		type abDef struct {
			what string
			spec loadSpec
			rate float64
		}
		defs := []abDef{{"closed loop, loads as fast as the node sustains", warm, 0}}
		if rep.PacedRate > 0 {
			defs = append(defs, abDef{"closed loop, loads at half that rate", warm, rep.PacedRate},
				abDef{"warm requests at half the node's rate, loads at half theirs", half, rep.PacedRate})
		}
		defs = append(defs, abDef{fmt.Sprintf("closed loop, loads at %g/s (a fleet node's churn)", onDemandFleetRate), warm, onDemandFleetRate})
		for _, d := range defs {
			e.logf("ondemand: A/B, %s: %d rounds of %v alone and with the churn", d.what, e.onDemandRounds, onDemandABWindow)
			ab := onDemandAB{What: d.what, Rounds: e.onDemandRounds, ChurnRate: d.rate}
			spec := d.spec
			spec.warmup, spec.duration = onDemandABWarmup, onDemandABWindow
			rows := 2
			if cores := cmp.Or(d.rate, rep.LoadsPerSec) * rep.CPUPerLoad; cores >= minBurnerCores {
				ab.ControlCores = min(cores, float64(runtime.NumCPU()))
				ab.Control = &abPool{}
				rows = 3
			}
			var churned churnRun // the churn's windows, summed
			err := interleave(ctx, e.onDemandRounds, rows, func(row int) error {
				switch row {
				case 0:
					before, err := fetchProm(ctx, client, ep.baseURL)
					if err != nil {
						return fmt.Errorf("metrics: %w", err)
					}
					start := time.Now()
					ab.Alone.add(runLoad(ctx, spec), cpuUse{}, spec.duration)
					secs := time.Since(start).Seconds()
					after, err := fetchProm(ctx, client, ep.baseURL)
					if err != nil {
						return fmt.Errorf("metrics: %w", err)
					}
					ab.AlonePauses.add(pausesBetween(before, after))
					ab.AlonePausedSecs += secs
					ab.PausesExported = hasPauses(after)
					return nil
				case 2:
					b, err := startBurner(ctx, ab.ControlCores, filepath.Join(e.dir, fmt.Sprintf("burner-%d.log", len(rep.AB))))
					if err != nil {
						return err
					}
					res := runLoad(ctx, spec)
					if b.exited() { // a control without its burner is none
						return fmt.Errorf("the CPU burner ended during its window: %s", b.logTail(5))
					}
					if err := b.stop(); err != nil {
						return fmt.Errorf("CPU burner: %w", err)
					}
					ab.Control.add(res, cpuUse{}, spec.duration)
					return nil
				}
				run, err := churn(&spec, d.rate)
				if err != nil {
					return err
				}
				ab.Churn.add(run.warm, cpuUse{}, spec.duration)
				churned.loads += run.loads
				churned.secs += run.secs
				ab.Pauses.add(run.pauses)
				ab.PausedSecs += run.secs
				return nil
			})
			if err != nil {
				return fail("ondemand A/B: %v", err)
			}
			ab.LoadsPerSec = churned.loadsPerSec()
			ab.AloneP50, ab.AloneP99 = ab.Alone.percentile(50), ab.Alone.percentile(99)
			ab.ChurnP50, ab.ChurnP99 = ab.Churn.percentile(50), ab.Churn.percentile(99)
			if ab.Control != nil {
				ab.ControlP50, ab.ControlP99 = ab.Control.percentile(50), ab.Control.percentile(99)
			}
			if ab.Alone.Errors > 0 || ab.Churn.Errors > 0 || ab.Control != nil && ab.Control.Errors > 0 {
				controlErrors, controlFirst := 0, ""
				if ab.Control != nil {
					controlErrors, controlFirst = ab.Control.Errors, ab.Control.FirstError
				}
				return fail("ondemand A/B (%s): %d warm requests alone, %d with churn and %d beside the CPU burner failed (first: %s%s%s)",
					d.what, ab.Alone.Errors, ab.Churn.Errors, controlErrors, ab.Alone.FirstError, ab.Churn.FirstError, controlFirst)
			}
			rep.AB = append(rep.AB, ab)
		}
	}
	rep.ChurnErrors = int(errs.Load())
	if rep.ChurnErrors > 0 || rep.WarmAlone.Errors > 0 || rep.WarmChurn.Errors > 0 || rep.WarmPaced.Errors > 0 || rep.HalfAlone.Errors > 0 || rep.HalfPaced.Errors > 0 {
		return fail("%d churn requests, %d warm requests alone, %d with churn, %d with paced churn and %d+%d paced failed (first: %s%s%s%s%s)", rep.ChurnErrors,
			rep.WarmAlone.Errors, rep.WarmChurn.Errors, rep.WarmPaced.Errors, rep.HalfAlone.Errors, rep.HalfPaced.Errors,
			rep.WarmAlone.FirstError, rep.WarmChurn.FirstError, rep.WarmPaced.FirstError, rep.HalfAlone.FirstError, rep.HalfPaced.FirstError)
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
		if r.WarmPaced.Requests > 0 {
			fmt.Fprintf(w, "- Warm %s with the churn paced at %.1f requests/s (half the loads per second): p50 %s, p99 %s (%.1f loads/s)\n",
				modelPath, r.PacedRate, fmtMs(r.WarmPaced.P50), fmtMs(r.WarmPaced.P99), r.PacedLoadsPerSec)
		}
		if r.HalfAlone.Requests > 0 {
			fmt.Fprintf(w, "- Warm %s paced at %.0f requests/s (half its rate alone; latency from each request's scheduled start): p50 %s, p99 %s alone; p50 %s, p99 %s with the churn paced at %.1f requests/s (%.1f loads/s)\n",
				modelPath, r.HalfRate, fmtMs(r.HalfAlone.P50), fmtMs(r.HalfAlone.P99), fmtMs(r.HalfPaced.P50), fmtMs(r.HalfPaced.P99), r.PacedRate, r.HalfLoadsPerSec)
		}
		if r.AloneLoads > 0 {
			fmt.Fprintf(w, "- CPU per demand load (the churn paced at %.1f requests/s with nothing else running; fetch, checksum, load, warm-up, the idle copy's unload, the answer): %.1f ms of the server's CPU (%d loads), %.1f ms of it on the lowered threads (the runtime's load and the warm-up, at nice %d); the rest at normal priority, the Go runtime's own threads included: at %.1f loads/s, %.2f of a core\n",
				r.PacedRate, r.CPUPerLoad*1000, r.AloneLoads, r.LowCPUPerLoad*1000, lowprio.Nice, r.PacedRate, r.CPUPerLoad*r.PacedRate)
		}
		for _, ab := range r.AB {
			p50, p99, ok := churnVerdict(ab.AloneP50, ab.AloneP99, ab.ChurnP50, ab.ChurnP99)
			v := "MET"
			if !ok {
				v = "NOT MET"
			}
			fmt.Fprintf(w, "- Verdict, warm p50/p99 unchanged by churn (%s; interleaved, %d rounds of %v each, %d and %d requests pooled; bound: p50 x%.2f, p99 x%.2f of alone): "+
				"p50 %s → %s (x%.2f), p99 %s → %s (x%.2f), %.1f loads/s: %s\n",
				ab.What, ab.Rounds, onDemandABWindow, len(ab.Alone.Latencies), len(ab.Churn.Latencies), onDemandP50Slack, onDemandP99Slack,
				fmtMs(ab.AloneP50), fmtMs(ab.ChurnP50), p50, fmtMs(ab.AloneP99), fmtMs(ab.ChurnP99), p99, ab.LoadsPerSec, v)
			if ab.Control != nil && ab.ControlP50 > 0 && ab.AloneP50 > 0 {
				fmt.Fprintf(w, "  - Control: the same warm requests beside a CPU burner at nice %d instead of the churn (a process with none of Grove's code, spinning %.2f of a core, the churn's CPU, in %v periods; %d requests pooled): "+
					"p50 %s (x%.2f), p99 %s (x%.2f) of alone. What this machine's scheduler gives any low-priority work of the churn's size; Grove's own part of the verdict's ratio is the rest.\n",
					lowprio.Nice, ab.ControlCores, burnPeriod, len(ab.Control.Latencies),
					fmtMs(ab.ControlP50), float64(ab.ControlP50)/float64(ab.AloneP50), fmtMs(ab.ControlP99), float64(ab.ControlP99)/float64(ab.AloneP99))
			}
			if ab.PausedSecs > 0 && ab.AlonePausedSecs > 0 && ab.PausesExported {
				fmt.Fprintf(w, "  - Stop-the-world pauses, each stopping every request in flight, per second (the milliseconds a lower bound: Go's sum counts each pause at its bucket's lower bound): %s alone, %s with the churn.\n",
					fmtPauses(ab.AlonePauses, ab.AlonePausedSecs), fmtPauses(ab.Pauses, ab.PausedSecs))
			}
		}
	}
	if r.Error != "" {
		fmt.Fprintf(w, "- On-demand scenario FAILED: %s\n", r.Error)
	}
}

// fmtPauses renders pauses p over secs seconds per second: how many and
// their milliseconds, the collector's and the others' (such as a change
// of GOMAXPROCS).
func fmtPauses(p pauseCount, secs float64) string {
	return fmt.Sprintf("%.1f pauses, ≥ %.2f ms (the collector's %.1f, ≥ %.2f ms; others %.1f, ≥ %.2f ms)",
		(p.GC+p.Other)/secs, (p.GCSecs+p.OtherSecs)*1000/secs, p.GC/secs, p.GCSecs*1000/secs, p.Other/secs, p.OtherSecs*1000/secs)
}

// fmtMs renders a duration in milliseconds.
func fmtMs(d time.Duration) string {
	return fmt.Sprintf("%.2f ms", float64(d)/float64(time.Millisecond))
}
