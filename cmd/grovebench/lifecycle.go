package main

// The lifecycle scenarios measure two targets that are about a server that
// runs for long and changes under load, each on a grove of its own:
//
//   - swap: "a hot swap of the pctr model under concurrency-32 load: zero
//     failed requests, p99 during the swap at most 3x the steady p99". A
//     batch-1 closed loop at c 32 runs a steady window, then a swap window
//     during which the model file under pctr_v1/ is replaced (v1 and v2 of
//     the example models, alternately) and the config's checksum changed
//     every few seconds; each swap is confirmed when /v1/status serves the
//     new checksum.
//   - memory: "no RSS growth over 1 million requests after warm-up (within
//     5 %)" and "RSS per extra loaded model at most 2x its file size plus
//     5 MB". grove serves pctr_v1/ and pctr_onnx/ (both runtimes started);
//     its VmRSS is read after a warm-up, during and after the requests;
//     then copies of the TorchScript model, then of the ONNX one, are added
//     to the config and the RSS they add is divided by their number.

import (
	"bufio"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// The names of the lifecycle scenarios in --scenarios.
const (
	scenarioSwap   = "swap"
	scenarioMemory = "memory"
)

// Targets of the lifecycle scenarios.
const (
	swapTarget        = 3.0  // swap-window p99 over steady p99
	rssGrowthTarget   = 0.05 // RSS growth over the requests
	perModelSlackByte = 5 << 20
)

// splitLifecycleSpec takes "swap", "memory", "overload" and "churn" out of
// a --scenarios value.
func splitLifecycleSpec(spec string) (rest string, swap, memory, overload, churn bool) {
	var others []string
	for _, e := range strings.Split(spec, ",") {
		switch strings.ToLower(strings.TrimSpace(e)) {
		case scenarioSwap:
			swap = true
		case scenarioMemory:
			memory = true
		case scenarioOverload:
			overload = true
		case scenarioChurn:
			churn = true
		default:
			others = append(others, e)
		}
	}
	return strings.Join(others, ","), swap, memory, overload, churn
}

// lifecycleEnv is what the lifecycle scenarios need from the rest of grovebench.
type lifecycleEnv struct {
	// root is the repository; examples its example bucket.
	root, bin, examples, dir string
	groveArgs                []string
	rows                     [][]float64
	want                     []float64
	warmup, duration         time.Duration
	timeout                  time.Duration
	startTimeout             time.Duration
	logf                     func(format string, a ...any)
	// memory scenario
	memRequests, memWarmup int64
	memCopies              int
	// abRounds is the rounds of the overload scenario's interleaved A/B
	// (--cpu-ab-rounds; 0: not run).
	abRounds int
	// onDemandRounds is the rounds of the ondemand scenario's interleaved
	// A/Bs (--ondemand-ab-rounds; 0: not run).
	onDemandRounds int
}

// modelChecksum is grove's checksum of a one-file model: the SHA-256 of
// the file's SHA-256 hex string.
func modelChecksum(file []byte) string {
	s := sha256.Sum256(file)
	h := hex.EncodeToString(s[:])
	c := sha256.Sum256([]byte(h))
	return hex.EncodeToString(c[:])
}

// writeFileAtomic writes data to path through a rename, as a careful
// uploader does, so grove never reads half a file.
func writeFileAtomic(path string, data []byte) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	tmp := path + ".upload"
	if err := os.WriteFile(tmp, data, 0o644); err != nil {
		return err
	}
	return os.Rename(tmp, path)
}

// configEntry is one model_metadata entry the scenarios write.
type configEntry struct {
	Path     string `json:"model_path"`
	Checksum string `json:"checksum,omitempty"`
	WarmUp   string `json:"warm_up_batch_request_json,omitempty"`
	GraceMs  int    `json:"eviction_grace_period_in_ms,omitempty"`
}

func writeConfig(dir string, entries ...configEntry) error {
	data, err := json.Marshal(map[string]any{"model_metadata": entries})
	if err != nil {
		return err
	}
	return writeFileAtomic(filepath.Join(dir, "model_config.json"), data)
}

// statusModel is a model's entry in GET /v1/status.
type statusModel struct {
	Path     string `json:"model_path"`
	State    string `json:"state"`
	Checksum string `json:"checksum"`
}

func fetchStatus(ctx context.Context, client *http.Client, base string) ([]statusModel, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, base+"/v1/status", nil)
	if err != nil {
		return nil, err
	}
	resp, err := client.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return nil, err
	}
	var st struct {
		Models []statusModel `json:"models"`
	}
	if err := json.Unmarshal(body, &st); err != nil {
		return nil, fmt.Errorf("GET /v1/status: %v: %s", err, clip(body, 200))
	}
	return st.Models, nil
}

// waitStatus polls /v1/status until ok holds, for at most timeout.
func waitStatus(ctx context.Context, client *http.Client, base string, timeout time.Duration, what string, ok func([]statusModel) bool) (time.Duration, error) {
	start := time.Now()
	for {
		ms, err := fetchStatus(ctx, client, base)
		if err == nil && ok(ms) {
			return time.Since(start), nil
		}
		if time.Since(start) > timeout || ctx.Err() != nil {
			if err == nil {
				err = fmt.Errorf("status %+v", ms)
			}
			return time.Since(start), fmt.Errorf("%s not reached after %v: %v", what, timeout, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// swapReport is what the swap scenario measured.
type swapReport struct {
	Batch  int        `json:"batch"`
	Conc   int        `json:"concurrency"`
	Steady loadResult `json:"steady"`
	Swap   loadResult `json:"swap"`
	// Swaps is the number of new contents that took over during the swap
	// window; SwapTimes how long each took from the config write to
	// /v1/status serving it.
	Swaps     int             `json:"swaps"`
	SwapTimes []time.Duration `json:"swap_times_ns"`
	Ratio     float64         `json:"p99_ratio"`
	Met       bool            `json:"met_target"`
	Error     string          `json:"error,omitempty"`
}

// runSwap runs the swap scenario.
func runSwap(ctx context.Context, e lifecycleEnv) *swapReport {
	rep := &swapReport{Batch: 1, Conc: 32}
	fail := func(format string, a ...any) *swapReport {
		rep.Error = fmt.Sprintf(format, a...)
		return rep
	}
	models := [2][]byte{}
	for i, name := range []string{"pctr_v1", "pctr_v2"} {
		b, err := os.ReadFile(filepath.Join(e.examples, name, "model.pt"))
		if err != nil {
			return fail("%v", err)
		}
		models[i] = b
	}
	bucket := filepath.Join(e.dir, "bucket-swap")
	entry := configEntry{Path: modelPath, WarmUp: string(groveBody(e.rows[:1])), GraceMs: 500}
	put := func(i int) error {
		if err := writeFileAtomic(filepath.Join(bucket, modelPath, "model.pt"), models[i]); err != nil {
			return err
		}
		entry.Checksum = modelChecksum(models[i])
		return writeConfig(bucket, entry)
	}
	if err := put(0); err != nil {
		return fail("writing the swap bucket: %v", err)
	}
	g, ep, err := startGrove(ctx, "grove (swap)", e.bin, bucket, filepath.Join(e.dir, "cache-swap"), filepath.Join(e.dir, "grove-swap.log"), e.groveArgs, e.startTimeout)
	if g != nil {
		defer g.stop()
	}
	if err != nil {
		return fail("starting grove: %v", err)
	}
	if err := checkAnswer(ctx, ep, e.rows, e.want, e.timeout); err != nil {
		return fail("check request: %v", err)
	}
	// Both outputs are fine during the swap: the load checks the answer's shape only.
	spec := loadSpec{url: ep.url, body: ep.body(e.rows[0], 1), okMarker: ep.okMarker, errMarker: ep.errMarker,
		batch: 1, conc: 32, warmup: e.warmup, duration: e.duration, timeout: e.timeout}
	e.logf("swap: steady window, batch 1, c 32, %v + %v", e.warmup, e.duration)
	rep.Steady = runLoad(ctx, spec)

	client := &http.Client{Timeout: 5 * time.Second}
	window := max(2*e.duration, 10*time.Second)
	every := window / 4
	spec.warmup, spec.duration = 0, window
	e.logf("swap: swap window %v, a new model content every %v", window, every)
	done := make(chan loadResult, 1)
	go func() { done <- runLoad(ctx, spec) }()
	start := time.Now()
	for i := 1; time.Since(start)+every <= window && ctx.Err() == nil; i++ {
		sleepUntil(ctx, start.Add(time.Duration(i)*every-every/2))
		want := modelChecksum(models[i%2])
		if err := put(i % 2); err != nil {
			rep.Error = fmt.Sprintf("swap %d: %v", i, err)
			break
		}
		took, err := waitStatus(ctx, client, ep.baseURL, 30*time.Second, "the new checksum served", func(ms []statusModel) bool {
			for _, m := range ms {
				if m.Path == modelPath && m.State == "ready" && m.Checksum == want {
					return true
				}
			}
			return false
		})
		if err != nil {
			rep.Error = fmt.Sprintf("swap %d: %v", i, err)
			break
		}
		rep.Swaps++
		rep.SwapTimes = append(rep.SwapTimes, took)
	}
	rep.Swap = <-done
	rep.Steady.Latencies, rep.Swap.Latencies = nil, nil
	if rep.Steady.P99 > 0 && rep.Swap.P99 > 0 {
		rep.Ratio = float64(rep.Swap.P99) / float64(rep.Steady.P99)
	}
	rep.Met = rep.Error == "" && rep.Swaps > 0 && rep.Steady.Errors == 0 && rep.Swap.Errors == 0 && rep.Ratio > 0 && rep.Ratio <= swapTarget
	return rep
}

func (r *swapReport) writeMarkdown(w io.Writer) {
	if r == nil {
		return
	}
	fmt.Fprintf(w, "\nHot swap of %s under load (POST /v1/inference, batch %d, c %d, closed loop; the model file and the config's checksum replaced, v1 and v2 alternately):\n\n", modelPath, r.Batch, r.Conc)
	fmt.Fprintln(w, "| window | req/s | p50 | p99 | max | failed | swaps |")
	fmt.Fprintln(w, "|---|---:|---:|---:|---:|---:|---:|")
	fmt.Fprintf(w, "| steady | %s | %s | %s | %s | %d | 0 |\n", fmtRate(r.Steady.ReqPerSec), fmtDur(r.Steady.P50), fmtDur(r.Steady.P99), fmtDur(r.Steady.Max), r.Steady.Errors)
	fmt.Fprintf(w, "| swapping | %s | %s | %s | %s | %d | %d |\n\n", fmtRate(r.Swap.ReqPerSec), fmtDur(r.Swap.P50), fmtDur(r.Swap.P99), fmtDur(r.Swap.Max), r.Swap.Errors, r.Swaps)
	var took []string
	for _, d := range r.SwapTimes {
		took = append(took, fmtDur(d))
	}
	verdict := "met"
	if !r.Met {
		verdict = "MISSED"
	}
	fmt.Fprintf(w, "- Hot swap: %d swaps (config write to new content serving: %s), %d failed requests, p99 %s during the swaps = %.2fx the steady %s (target: 0 failed, ≤ %.0fx): %s\n",
		r.Swaps, strings.Join(took, ", "), r.Steady.Errors+r.Swap.Errors, fmtDur(r.Swap.P99), r.Ratio, fmtDur(r.Steady.P99), swapTarget, verdict)
	if r.Swap.FirstError != "" {
		fmt.Fprintf(w, "- Hot swap: first failure: %s\n", r.Swap.FirstError)
	}
	if r.Error != "" {
		fmt.Fprintf(w, "- Hot swap scenario FAILED: %s\n", r.Error)
	}
}

// readRSS returns a process's resident set size (VmRSS) in bytes.
func readRSS(pid int) (int64, error) {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, err
	}
	return parseRSS(data)
}

// parseRSS finds VmRSS in /proc/PID/status text.
func parseRSS(status []byte) (int64, error) {
	sc := bufio.NewScanner(bytes.NewReader(status))
	for sc.Scan() {
		rest, ok := strings.CutPrefix(sc.Text(), "VmRSS:")
		if !ok {
			continue
		}
		f := strings.Fields(rest)
		if len(f) != 2 || f[1] != "kB" {
			return 0, fmt.Errorf("unexpected VmRSS line %q", sc.Text())
		}
		kb, err := strconv.ParseInt(f[0], 10, 64)
		if err != nil {
			return 0, fmt.Errorf("VmRSS %q: %v", f[0], err)
		}
		return kb << 10, nil
	}
	return 0, fmt.Errorf("no VmRSS line")
}

// memoryReport is what the memory scenario measured.
type memoryReport struct {
	Requests int64 `json:"requests"`
	Warmup   int64 `json:"warmup_requests"`
	// RSS after the warm-up, after the requests and the largest seen
	// (sampled every second), in bytes.
	RSSWarm, RSSEnd, RSSMax int64      `json:"-"`
	Growth                  float64    `json:"growth"`
	GrowthMet               bool       `json:"growth_met_target"`
	Load                    loadResult `json:"load"`
	PerModel                []perModel `json:"per_model"`
	Error                   string     `json:"error,omitempty"`
}

// perModel is the RSS a kind of model adds per loaded copy.
type perModel struct {
	Runtime   string `json:"runtime"`
	Copies    int    `json:"copies"`
	FileBytes int64  `json:"file_bytes"`
	Before    int64  `json:"rss_before"`
	After     int64  `json:"rss_after"`
	PerCopy   int64  `json:"rss_per_copy"`
	Limit     int64  `json:"limit"`
	Met       bool   `json:"met_target"`
}

// runMemory runs the memory scenario.
func runMemory(ctx context.Context, e lifecycleEnv) *memoryReport {
	rep := &memoryReport{Requests: e.memRequests, Warmup: e.memWarmup}
	fail := func(format string, a ...any) *memoryReport {
		rep.Error = fmt.Sprintf(format, a...)
		return rep
	}
	bucket := filepath.Join(e.dir, "bucket-memory")
	files := map[string][]byte{}
	for _, f := range []string{modelPath + "model.pt", onnxPath + "model.onnx"} {
		b, err := os.ReadFile(filepath.Join(e.examples, f))
		if err != nil {
			return fail("%v", err)
		}
		files[f] = b
	}
	for f, b := range files {
		if err := writeFileAtomic(filepath.Join(bucket, f), b); err != nil {
			return fail("%v", err)
		}
	}
	// Both runtimes are in use from the start, so that what the copies add
	// is per model, not the runtime's one-off start-up (libonnxruntime's
	// code and environment come with the first ONNX model).
	entries := []configEntry{{Path: modelPath}, {Path: onnxPath}}
	if err := writeConfig(bucket, entries...); err != nil {
		return fail("%v", err)
	}
	g, ep, err := startGrove(ctx, "grove (memory)", e.bin, bucket, filepath.Join(e.dir, "cache-memory"), filepath.Join(e.dir, "grove-memory.log"), e.groveArgs, e.startTimeout)
	if g != nil {
		defer g.stop()
	}
	if err != nil {
		return fail("starting grove: %v", err)
	}
	pid := g.cmd.Process.Pid
	spec := loadSpec{url: ep.url, body: ep.body(e.rows[0], 1), okMarker: ep.okMarker, errMarker: ep.errMarker,
		batch: 1, conc: 32, duration: time.Hour, timeout: e.timeout}
	e.logf("memory: %d warm-up requests", e.memWarmup)
	spec.requests = e.memWarmup
	if r := runLoad(ctx, spec); r.Errors > 0 {
		return fail("warm-up: %d failed requests; first: %s", r.Errors, r.FirstError)
	}
	time.Sleep(time.Second)
	if rep.RSSWarm, err = readRSS(pid); err != nil {
		return fail("reading RSS: %v", err)
	}
	e.logf("memory: RSS %s after warm-up; %d requests", fmtBytes(rep.RSSWarm), e.memRequests)
	stop := make(chan struct{})
	sampled := make(chan int64, 1)
	go func() {
		most := rep.RSSWarm
		t := time.NewTicker(time.Second)
		defer t.Stop()
		for {
			select {
			case <-stop:
				sampled <- most
				return
			case <-t.C:
				if v, err := readRSS(pid); err == nil {
					most = max(most, v)
				}
			}
		}
	}()
	spec.requests = e.memRequests
	start := time.Now()
	rep.Load = runLoad(ctx, spec)
	el := time.Since(start)
	close(stop)
	rep.RSSMax = <-sampled
	rep.Load.Latencies = nil
	rep.Load.ReqPerSec = float64(rep.Load.Sent) / el.Seconds()
	time.Sleep(time.Second)
	if rep.RSSEnd, err = readRSS(pid); err != nil {
		return fail("reading RSS: %v", err)
	}
	rep.RSSMax = max(rep.RSSMax, rep.RSSEnd)
	rep.Growth = float64(rep.RSSEnd-rep.RSSWarm) / float64(rep.RSSWarm)
	rep.GrowthMet = rep.Load.Errors == 0 && int64(rep.Load.Sent) >= e.memRequests && rep.Growth <= rssGrowthTarget
	e.logf("memory: RSS %s after %d requests (%.1f%%), max %s", fmtBytes(rep.RSSEnd), rep.Load.Sent, 100*rep.Growth, fmtBytes(rep.RSSMax))
	if ctx.Err() != nil {
		return rep
	}

	// Extra models: copies of each kind, added to the config at once.
	client := &http.Client{Timeout: 5 * time.Second}
	for _, kind := range []struct{ runtime, file string }{{"torchscript", modelPath + "model.pt"}, {"onnx", onnxPath + "model.onnx"}} {
		pm := perModel{Runtime: kind.runtime, Copies: e.memCopies, FileBytes: int64(len(files[kind.file]))}
		pm.Limit = 2*pm.FileBytes + perModelSlackByte
		for i := range e.memCopies {
			p := fmt.Sprintf("%s_copy_%d/", kind.runtime, i)
			if err := writeFileAtomic(filepath.Join(bucket, p, filepath.Base(kind.file)), files[kind.file]); err != nil {
				return fail("%v", err)
			}
		}
		time.Sleep(time.Second)
		if pm.Before, err = readRSS(pid); err != nil {
			return fail("reading RSS: %v", err)
		}
		for i := range e.memCopies {
			entries = append(entries, configEntry{Path: fmt.Sprintf("%s_copy_%d/", kind.runtime, i)})
		}
		if err := writeConfig(bucket, entries...); err != nil {
			return fail("%v", err)
		}
		want := len(entries)
		if _, err := waitStatus(ctx, client, ep.baseURL, 2*time.Minute, fmt.Sprintf("%d ready models", want), func(ms []statusModel) bool {
			n := 0
			for _, m := range ms {
				if m.State == "ready" {
					n++
				}
			}
			return n == want
		}); err != nil {
			return fail("%s copies: %v", kind.runtime, err)
		}
		time.Sleep(2 * time.Second)
		if pm.After, err = readRSS(pid); err != nil {
			return fail("reading RSS: %v", err)
		}
		pm.PerCopy = (pm.After - pm.Before) / int64(pm.Copies)
		pm.Met = pm.PerCopy <= pm.Limit
		e.logf("memory: %d %s copies added %s each (file %s, limit %s)", pm.Copies, pm.Runtime, fmtBytes(pm.PerCopy), fmtBytes(pm.FileBytes), fmtBytes(pm.Limit))
		rep.PerModel = append(rep.PerModel, pm)
	}
	return rep
}

// fmtBytes renders a byte count in MiB.
func fmtBytes(n int64) string { return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20)) }

func (r *memoryReport) writeMarkdown(w io.Writer) {
	if r == nil {
		return
	}
	verdict := func(ok bool) string {
		if ok {
			return "met"
		}
		return "MISSED"
	}
	fmt.Fprintf(w, "\nMemory (grove's VmRSS; POST /v1/inference batch 1, c 32):\n\n")
	if r.RSSWarm > 0 && r.RSSEnd > 0 {
		fmt.Fprintf(w, "- RSS over %d requests after %d warm-up requests: %s → %s (%+.1f%%), max %s; %d failed, %s req/s (target: growth ≤ %.0f%%): %s\n",
			r.Load.Sent, r.Warmup, fmtBytes(r.RSSWarm), fmtBytes(r.RSSEnd), 100*r.Growth, fmtBytes(r.RSSMax), r.Load.Errors, fmtRate(r.Load.ReqPerSec),
			100*rssGrowthTarget, verdict(r.GrowthMet))
	}
	for _, pm := range r.PerModel {
		fmt.Fprintf(w, "- RSS per extra %s model: %d copies of a %s file took RSS %s → %s, %s each (target ≤ 2x file + 5 MiB = %s): %s\n",
			pm.Runtime, pm.Copies, fmtBytes(pm.FileBytes), fmtBytes(pm.Before), fmtBytes(pm.After), fmtBytes(pm.PerCopy), fmtBytes(pm.Limit), verdict(pm.Met))
	}
	if r.Error != "" {
		fmt.Fprintf(w, "- Memory scenario FAILED: %s\n", r.Error)
	}
}
