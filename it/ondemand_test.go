package it

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/groveml/grove/internal/modelcopy"
)

// demandEntry is a model config entry with the on-demand keys.
type demandEntry struct {
	Path      string `json:"model_path"`
	Load      string `json:"load,omitempty"`
	WarmUp    string `json:"warm_up_batch_request_json,omitempty"`
	TimeoutMs int    `json:"default_timeout_ms,omitempty"`
}

// demandStatus is /v1/status's on-demand part.
type demandStatus struct {
	Models []struct {
		Path       string `json:"model_path"`
		State      string `json:"state"`
		OnDemand   bool   `json:"on_demand"`
		LastLoadMs int64  `json:"last_load_ms"`
	} `json:"models"`
	Memory *struct {
		BudgetBytes       int64            `json:"budget_bytes"`
		UsedBytes         int64            `json:"used_bytes"`
		LoadPolicy        string           `json:"load_policy"`
		Loaded            int              `json:"loaded"`
		Unloaded          int              `json:"unloaded"`
		UnloadOrder       []string         `json:"unload_order"`
		RuntimeStartBytes map[string]int64 `json:"runtime_start_bytes"`
	} `json:"memory"`
}

func (g *grove) demandStatus() demandStatus {
	g.t.Helper()
	_, b := g.get("/v1/status")
	var st demandStatus
	if err := json.Unmarshal(b, &st); err != nil {
		g.t.Fatalf("decoding status %q: %v", b, err)
	}
	return st
}

// states counts the models of st by state.
func (st demandStatus) states() map[string]int {
	n := map[string]int{}
	for _, m := range st.Models {
		n[m.State]++
	}
	return n
}

// metricSum sums every series of a metric whose labels include all of
// labels ("" for all).
func (g *grove) metricSum(name, labels string) float64 {
	g.t.Helper()
	_, body := g.get("/metrics")
	re := regexp.MustCompile(`(?m)^` + regexp.QuoteMeta(name) + `(\{[^}]*\})? (\S+)$`)
	var sum float64
	for _, m := range re.FindAllSubmatch(body, -1) {
		ok := true
		for l := range strings.SplitSeq(labels, ",") {
			if l != "" && !strings.Contains(string(m[1]), l) {
				ok = false
			}
		}
		if !ok {
			continue
		}
		v, err := strconv.ParseFloat(string(m[2]), 64)
		if err != nil {
			g.t.Fatalf("%s: %v", name, err)
		}
		sum += v
	}
	return sum
}

// memory describes where grove's memory is: its RSS, the Go heap in use,
// the C heap in use and free (glibc's), and the size of its /metrics.
func (g *grove) memory(pid int) string {
	g.t.Helper()
	_, body := g.get("/metrics")
	return fmt.Sprintf("RSS %d MiB, Go heap in use %.0f MiB, C heap in use %.0f MiB and free %.0f MiB, /metrics %d kB",
		procBytes(g.t, pid, "VmRSS")>>20, g.metricSum("go_memstats_heap_inuse_bytes", "")/(1<<20),
		g.metricSum("grove_c_heap_inuse_bytes", "")/(1<<20), g.metricSum("grove_c_heap_free_bytes", "")/(1<<20), len(body)>>10)
}

// demandBucket writes n copies of the example pCTR TorchScript model
// (t00/, t01/, ...) and n of its ONNX export (o00/, ...), each a content
// of its own (distinctCopy) and "load": "on_demand", and returns their
// paths, alternating runtimes, and the entries.
func demandBucket(t *testing.T, b *dirBucket, n int) ([]string, []demandEntry) {
	t.Helper()
	const load = "on_demand"
	var paths []string
	var entries []demandEntry
	for _, kind := range []struct{ prefix, file string }{{"t", "pctr_v1/model.pt"}, {"o", "pctr_onnx/model.onnx"}} {
		data, err := os.ReadFile(filepath.Join(repoRoot(), "examples", "bucket", kind.file))
		if err != nil {
			t.Fatal(err)
		}
		for i := range n {
			p := fmt.Sprintf("%s%02d/", kind.prefix, i)
			b.Put(t, p+filepath.Base(kind.file), distinctCopy(t, kind.file, data, i))
			entries = append(entries, demandEntry{Path: p, Load: load})
		}
	}
	for i := range n {
		paths = append(paths, entries[i].Path, entries[n+i].Path)
	}
	return paths, entries
}

// distinctCopy is copy i of the example model file (its name tells a
// TorchScript archive from an ONNX model) data, made a model of its own
// (modelcopy.Distinct): the same weights, but its own content and
// checksum, as a fleet's models are.
func distinctCopy(t *testing.T, file string, data []byte, i int) []byte {
	t.Helper()
	out, err := modelcopy.Distinct(file, data, i)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// pctrItem is a B&A item for a pCTR copy at path: one row of 64 floats.
func pctrItem(path string) string {
	row := make([]float64, 64)
	for i := range row {
		row[i] = float64(i%7) / 7
	}
	return itemJSON(path, tensorJSON("FLOAT", []int64{1, 64}, row))
}

// inferOne sends one B&A item and reports why it failed ("" when it did not).
func (g *grove) inferOne(item string) string {
	code, resp, err := g.infer(batchJSON(item))
	switch {
	case err != nil:
		return err.Error()
	case code != http.StatusOK || len(resp.Response) != 1:
		return fmt.Sprintf("HTTP %d, %d items", code, len(resp.Response))
	case resp.Response[0].Error != nil:
		return fmt.Sprintf("%s: %s", resp.Response[0].ModelPath, resp.Response[0].Error.Description)
	case len(resp.Response[0].Tensors) == 0:
		return "no tensors"
	}
	return ""
}

// rssPeak samples pid's VmRSS every 20 ms until stop is called, which
// returns the largest seen.
func rssPeak(t *testing.T, pid int) (stop func() int64) {
	var peak atomic.Int64
	peak.Store(procBytes(t, pid, "VmRSS"))
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() {
		tick := time.NewTicker(20 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-done:
				return
			case <-tick.C:
			}
			data, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
			if err != nil {
				continue
			}
			if _, v, ok := strings.Cut(string(data), "VmRSS:"); ok {
				kb, _ := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.SplitN(v, "\n", 2)[0], "kB")), 10, 64)
				if b := kb << 10; b > peak.Load() {
					peak.Store(b)
				}
			}
		}
	})
	return func() int64 {
		close(done)
		wg.Wait()
		return max(peak.Load(), procBytes(t, pid, "VmRSS"))
	}
}

// A bucket of 120 on-demand models (60 copies each of the example pCTR
// TorchScript model and of its ONNX export, each about 0.5 MB loaded) on
// one grove with a memory budget that holds about six: every model is
// listed unloaded at start; a request for each, in a shuffled order from
// 4 clients, then 600 requests drawn from a Zipf distribution (s = 1.1)
// over them, one at a time (so that the simulation replays the order Grove
// saw), all succeed (each miss loads its model, the
// budget unloading idle ones to make room), and the Zipf trace's hit
// ratio is within 8 points of an offline simulation of Grove's unload
// policy over the same trace (the Proof, scaled down to fit make
// test: 120 models, a budget for about 7; 5 points at full scale); /v1/status and the metrics
// show the demand loads, the budget's unloads, most models unloaded again
// and the memory counted within the budget; the process's RSS stays
// within (budget + base) + 10 %, the base measured as the issue defines
// it: the RSS after one load and unload of each runtime (less what the
// models loaded then are counted at). A request whose deadline is shorter
// than its model's load (a faulty model whose warm-up takes a second)
// gets 503 "model is loading" with Retry-After, and the next request
// without a short deadline gets the answer.
//
// Against eager loading (the same bucket without "load": "on_demand")
// it fails: every model is loaded at start, none unloaded.
//
// With GROVE_IT_DENSITY=full it runs at the scale instead (not in
// make test; about three minutes): 1,000 models (500 of each runtime), a
// budget for about 100 and 30,000 Zipf requests.
//
// It runs alone (no t.Parallel): it measures RSS. Budget: 14 s.
func TestOnDemandModelsLoadOnRequestAndTheMemoryBudgetHoldsRSS(t *testing.T) {
	// hitTolerance is how far the hit ratio may be from the simulation's.
	// Scaled down, the budget holds about 7 models, and the simulation keeps
	// as many as Grove held at the end while Grove keeps what fits in bytes
	// (the copies' measured memory differs): one model more or less kept
	// moves the ratio by several points.
	copies, budget, zipfRequests, hitTolerance := 60, int64(3<<20), 600, 0.08
	if os.Getenv("GROVE_IT_DENSITY") == "full" {
		copies, budget, zipfRequests, hitTolerance = 500, 45<<20, 30_000, 0.05
	}
	b := newDirBucket(t)
	paths, entries := demandBucket(t, b, copies)
	b.Put(t, "slow/model.faulty", []byte(`{"delay_ms": 1000}`))
	slowWarm := batchJSON(itemJSON("slow/", tensorJSON("INT32", []int64{1}, []float64{1})))
	entries = append(entries, demandEntry{Path: "slow/", Load: "on_demand", WarmUp: slowWarm})
	data, err := json.Marshal(map[string]any{"model_metadata": entries})
	if err != nil {
		t.Fatal(err)
	}
	b.Put(t, "model_config.json", data)
	g := startOn(t, b, "--memory-budget-bytes", strconv.FormatInt(budget, 10))
	pid := g.cmd.Process.Pid

	st := g.demandStatus()
	if n := st.states()["unloaded"]; n != len(entries) {
		t.Fatalf("%d models unloaded at start, want all %d: %v", n, len(entries), st.states())
	}
	if st.Memory == nil || st.Memory.BudgetBytes != budget {
		t.Fatalf("status memory %+v, want budget_bytes %d", st.Memory, budget)
	}

	// The base, as the issue defines it: the RSS after one load and
	// unload of each runtime. t00/ and o00/ load, then the next copies in
	// turn until the budget has unloaded both; what the models loaded
	// then are counted at is taken off.
	unloaded := func(p string) bool {
		for _, m := range g.demandStatus().Models {
			if m.Path == p {
				return m.State == "unloaded"
			}
		}
		return false
	}
	for i, p := range paths {
		if i > 2 && unloaded(paths[0]) && unloaded(paths[1]) {
			break
		}
		if why := g.inferOne(pctrItem(p)); why != "" {
			t.Fatalf("request for %s: %s", p, why)
		}
	}
	time.Sleep(500 * time.Millisecond)
	base := procBytes(t, pid, "VmRSS") - g.demandStatus().Memory.UsedBytes
	bound := (int64(budget) + base) * 11 / 10
	t.Logf("base RSS %d MiB (after one load and unload of each runtime; runtime start-up %v); bound %d MiB; %s", base>>20, g.demandStatus().Memory.RuntimeStartBytes, bound>>20, g.memory(pid))

	peak := rssPeak(t, pid)
	// Every model once, in a shuffled order, from 4 clients.
	order := slices.Clone(paths)
	rng := rand.New(rand.NewPCG(1, 2))
	rng.Shuffle(len(order), func(i, j int) { order[i], order[j] = order[j], order[i] })
	start := time.Now()
	failures, _ := g.runTrace(order, 4)
	t.Logf("%d requests, each model once, in %v; %s", len(order), time.Since(start).Round(time.Millisecond), g.memory(pid))
	// Then a Zipf-distributed trace (s = 1.1), one request at a time: its
	// hit ratio against an offline simulation of Grove's policy over it.
	st = g.demandStatus()
	cached := map[string]bool{}
	for _, m := range st.Models {
		cached[m.Path] = m.State == "ready"
	}
	zipf := newZipf(rand.New(rand.NewPCG(3, 4)), 1.1, len(paths))
	rank := rng.Perm(len(paths)) // the hot models mix both runtimes
	trace := make([]string, zipfRequests)
	for i := range trace {
		trace[i] = paths[rank[zipf()]]
	}
	hits0, misses0 := g.metricSum("grove_model_demand_hits_total", ""), g.metricSum("grove_model_demand_misses_total", "")
	start = time.Now()
	zfail, at := g.runTrace(trace, 1)
	failures = append(failures, zfail...)
	hits, misses := g.metricSum("grove_model_demand_hits_total", "")-hits0, g.metricSum("grove_model_demand_misses_total", "")-misses0
	most := peak()
	t.Logf("%d Zipf requests in %v; peak RSS %d MiB (+%d MiB over the base); %s", len(trace), time.Since(start).Round(time.Millisecond), most>>20, (most-base)>>20, g.memory(pid))
	st = g.demandStatus()
	cost := map[string]time.Duration{}
	for _, m := range st.Models {
		cost[m.Path] = time.Duration(m.LastLoadMs) * time.Millisecond
	}
	got := hits / (hits + misses)
	want := simulateHitRatio(trace, at, cached, st.Memory.Loaded, cost)
	t.Logf("Zipf trace: hit ratio %.3f (%v hits, %v misses); offline simulation of Grove's policy (%d models kept): %.3f", got, hits, misses, st.Memory.Loaded, want)
	if math.Abs(got-want) > hitTolerance {
		t.Errorf("hit ratio %.3f, the offline simulation of Grove's policy over the same trace %.3f: more than %.0f points apart", got, want, 100*hitTolerance)
	}
	if len(failures) > 0 {
		t.Errorf("%d of %d requests failed; first: %s", len(failures), len(order)+len(trace), failures[0])
	}
	if most > bound {
		t.Errorf("peak RSS %d MiB, over (budget %d MiB + base %d MiB) + 10 %% = %d MiB", most>>20, budget>>20, base>>20, bound>>20)
	}

	st = g.demandStatus()
	states := st.states()
	t.Logf("states %v; memory %+v", states, st.Memory)
	if states["unloaded"] < len(paths)-int(budget/(400<<10)) {
		t.Errorf("%d models unloaded after the requests, want at least %d (the budget holds at most %d copies counted at 400 kB or more)",
			states["unloaded"], len(paths)-int(budget/(400<<10)), int(budget/(400<<10)))
	}
	if st.Memory == nil || st.Memory.UsedBytes > budget || len(st.Memory.UnloadOrder) == 0 || st.Memory.Loaded+st.Memory.Unloaded != len(entries) {
		t.Errorf("status memory %+v, want used_bytes within the budget %d, an unload order, %d on-demand models", st.Memory, budget, len(entries))
	}
	loads := g.metricSum("grove_model_loads_total", `reason="demand",result="ok"`)
	unloads := g.metricSum("grove_model_unloads_total", `reason="budget"`)
	allMisses := g.metricSum("grove_model_demand_misses_total", "")
	t.Logf("demand loads %v, budget unloads %v, demand misses %v", loads, unloads, allMisses)
	// The collector ran during so many loads: its stop-the-world pauses
	// are counted on /metrics, as operators read them.
	if n := g.metricSum("go_sched_pauses_total_gc_seconds_count", ""); n == 0 {
		t.Error("/metrics counts no stop-the-world pause of the collector (go_sched_pauses_total_gc_seconds_count) after the loads")
	}
	if loads < float64(len(paths)) || unloads < float64(len(paths)-int(budget/(400<<10))) || allMisses < float64(len(paths)) {
		t.Errorf("demand loads %v, budget unloads %v, misses %v: want at least %d loads and misses (every model loaded) and %d unloads",
			loads, unloads, allMisses, len(paths), len(paths)-int(budget/(400<<10)))
	}

	// A deadline shorter than the load: 503 "model is loading", with Retry-After.
	ctx := withTimeout(t, 30*time.Second)
	oip := `{"parameters": {"timeout": 200000}, "inputs": [{"name": "x", "datatype": "INT32", "shape": [1], "data": [1]}]}`
	code, hdr, body := postWithHeader(t, ctx, g.url+"/v2/models/slow/infer", oip, nil)
	if ra, err := strconv.Atoi(hdr.Get("Retry-After")); code != http.StatusServiceUnavailable || !strings.Contains(body, "model slow/ is loading") || err != nil || ra < 1 {
		t.Errorf("OIP REST with a 200 ms deadline while slow/ loads: HTTP %d, Retry-After %q, %s; want 503 \"model slow/ is loading\" with Retry-After", code, hdr.Get("Retry-After"), body)
	}
	if why := g.inferOne(itemJSON("slow/", tensorJSON("INT32", []int64{1}, []float64{1}))); why != "" {
		t.Errorf("slow/ without a short deadline: %s", why)
	}
}

// newZipf returns a function that draws ranks in [0, n) from r with P(k)
// proportional to 1/(k+1)^s.
func newZipf(r *rand.Rand, s float64, n int) func() int {
	cdf := make([]float64, n)
	var total float64
	for k := range n {
		total += math.Pow(float64(k+1), -s)
		cdf[k] = total
	}
	return func() int {
		k, _ := slices.BinarySearch(cdf, r.Float64()*total)
		return min(k, n-1)
	}
}

// runTrace sends one B&A request for each path of trace, in order, from
// clients clients, and returns why those that failed did, and when each
// was sent (since the first).
func (g *grove) runTrace(trace []string, clients int) (failures []string, at []time.Duration) {
	at = make([]time.Duration, len(trace))
	var next atomic.Int64
	var mu sync.Mutex
	var wg sync.WaitGroup
	start := time.Now()
	for range clients {
		wg.Go(func() {
			for {
				i := int(next.Add(1)) - 1
				if i >= len(trace) {
					return
				}
				at[i] = time.Since(start)
				if why := g.inferOne(pctrItem(trace[i])); why != "" {
					mu.Lock()
					failures = append(failures, fmt.Sprintf("%s: %s", trace[i], why))
					mu.Unlock()
				}
			}
		})
	}
	wg.Wait()
	return failures, at
}

// simulateHitRatio replays trace (request i sent at at[i]) through
// Grove's unload policy offline: keep models loaded, those in cached to
// begin with (used at 0); a request for one not kept loads it, unloading
// first, when keep are kept, the least valuable: the one whose reload
// cost (its load time plus a nanosecond per byte, 400 kB each) divided
// by the time since its last request is least. It returns the share of
// requests that found their model kept.
func simulateHitRatio(trace []string, at []time.Duration, cached map[string]bool, keep int, cost map[string]time.Duration) float64 {
	last := map[string]time.Duration{}
	for p, ok := range cached {
		if ok {
			last[p] = 0
		}
	}
	hits := 0
	for i, p := range trace {
		now := at[i]
		if _, ok := last[p]; ok {
			hits++
			last[p] = now
			continue
		}
		for len(last) >= keep {
			victim, least := "", math.Inf(1)
			for q, used := range last {
				c := max(cost[q], time.Millisecond) + 400<<10
				v := float64(c) / float64(max(now-used, time.Millisecond))
				if v < least || (v == least && q < victim) {
					victim, least = q, v
				}
			}
			delete(last, victim)
		}
		last[p] = now
	}
	return float64(hits) / float64(len(trace))
}

// postWithHeader posts body to url and returns the status, the response's
// header and its body.
func postWithHeader(t *testing.T, ctx context.Context, url, body string, header http.Header) (int, http.Header, string) {
	t.Helper()
	req, err := http.NewRequestWithContext(ctx, "POST", url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	for k, v := range header {
		req.Header[k] = v
	}
	resp, err := client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, resp.Header, string(b)
}
