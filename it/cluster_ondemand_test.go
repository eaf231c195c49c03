package it

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
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

	"github.com/groveml/grove/cluster/etcdtest"
)

// The on-demand cluster run's sizes: the memory factor that estimates a
// copy's need (file size × demandMemoryFactor, close to the half megabyte
// a copy's load measures), and the deadlines its requests carry.
const (
	demandMemoryFactor = 3
	demandIdleAfter    = 3 * time.Second
	// demandLongDeadline is longer than the lease TTL plus a load: a
	// request with it is answered even when its model's only copy dies.
	demandLongDeadline = 20 * time.Second
	// demandShortDeadline is shorter than the lease TTL: a request with it
	// may get "model is loading" when its model is loaded nowhere ready.
	demandShortDeadline = 500 * time.Millisecond
	// hotPath is the three-node test's saturated model: hotClients callers
	// at once, each call hotDelay long.
	hotPath, hotClients, hotDelay = "hot/", 8, 20 * time.Millisecond
)

// clusterDemandEntry is a model config entry of the on-demand cluster run.
type clusterDemandEntry struct {
	Path     string `json:"model_path"`
	Load     string `json:"load"`
	Nodes    int    `json:"nodes"`
	MinNodes int    `json:"min_nodes"`
}

// demandResult is one request of the on-demand cluster run.
type demandResult struct {
	path, node string
	short      bool
	code       int
	body       string
	err        error
	at         time.Time
}

// failed reports whether r is a failure: anything but an answer, except
// that a request with a short deadline may get "model is loading".
func (r demandResult) failed() bool {
	if r.err != nil {
		return true
	}
	if r.code != http.StatusOK {
		return true
	}
	var resp baResponse
	if err := json.Unmarshal([]byte(r.body), &resp); err != nil || len(resp.Response) != 1 {
		return true
	}
	if e := resp.Response[0].Error; e != nil {
		return !r.short || !r.loading()
	}
	return len(resp.Response[0].Tensors) == 0
}

// diedUnder reports whether r is a request with the short deadline that
// another node forwarded to victim, which still held its model ready
// when it was killed at killed, and whose deadline ended there within a
// lease TTL of the kill: until victim's lease ends the others take it for
// a member with the model ready (docs/cluster.md), so that request's
// deadline is shorter than the failover, as the exception allows.
func (r demandResult) diedUnder(victim string, killed time.Time) bool {
	return r.short && r.at.After(killed.Add(-demandShortDeadline)) && r.at.Before(killed.Add(clusterLeaseTTL)) &&
		strings.Contains(r.body, "DEADLINE_EXCEEDED") && strings.Contains(r.body, "forwarded to node "+victim+" ")
}

// loading reports whether r is the answer "model is loading": a B&A
// item's error saying so, of the kind Unavailable (MODEL_EXECUTION; the
// batch answers 200), as on one node, not DEADLINE_EXCEEDED.
func (r demandResult) loading() bool {
	var resp baResponse
	if json.Unmarshal([]byte(r.body), &resp) != nil || len(resp.Response) != 1 || resp.Response[0].Error == nil {
		return false
	}
	e := resp.Response[0].Error
	return e.ErrorType == "MODEL_EXECUTION" && loadingRE.MatchString(e.Description) && strings.Contains(e.Description, "model "+r.path+" is loading")
}

// loadingRE matches the end of a "model is loading" answer.
var loadingRE = regexp.MustCompile(`: model \S+ is loading; retry after \d+ s$`)

func (r demandResult) String() string {
	b := r.body
	if len(b) > 500 {
		b = b[:500]
	}
	return fmt.Sprintf("%s via %s (short deadline %v) at %s: %d %s %v", r.path, r.node, r.short, r.at.Format("15:04:05.000"), r.code, b, r.err)
}

// demandRequest sends one B&A item for path to g with deadline in
// Grove-Timeout.
func demandRequest(ctx context.Context, g *grove, name, path string, deadline time.Duration) demandResult {
	r := demandResult{path: path, node: name, short: deadline < clusterLeaseTTL, at: time.Now()}
	req, err := http.NewRequestWithContext(ctx, "POST", g.url+"/v1/inference", strings.NewReader(batchJSON(pctrItem(path))))
	if err != nil {
		r.err = err
		return r
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Grove-Timeout", deadline.String())
	resp, err := client.Do(req)
	if err != nil {
		r.err = err
		return r
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	r.code, r.body, r.err = resp.StatusCode, string(b), err
	return r
}

// Issue 31's three-node proof, scaled to fit make test: 60 on-demand
// models (30 copies each of the example pCTR TorchScript model and of its
// ONNX export; "nodes": 3, "min_nodes": 0) on three nodes, each with a
// memory budget for about 12 of them and idle_unload_after 3 s. Six
// clients send a Zipf-distributed mix (s = 1.1) through all three nodes in
// turn, one request per model at a time (a client waits while another has
// its model in flight), nine in ten with a deadline longer than the lease
// TTL plus a load, one in ten with 500 ms. Mid-run the node (not the
// controller) holding the most models is SIGKILLed (the clients stop
// sending through it first), and the run goes on through the two others,
// each model it alone held requested at once with the long deadline. Every
// request is answered, except that one with the short deadline may get
// "model is loading" (Unavailable, in the B&A item: its model was loaded
// nowhere, or its only copy died, and placement and a load take longer); every model the killed node alone held is answered
// again; and the placement table, sampled throughout from a live node,
// never places a model on more than one node (one request in flight at a
// time never saturates a copy), while the three nodes together hold more
// models than one budget would. Last, eight callers at once of hot/ (a
// model whose calls take 20 ms, so that they queue) through the two
// survivors: a saturated copy gets another, up to one on each live node,
// and once the callers stop the copies go back to one, then none, after
// idle_unload_after.
//
// With GROVE_IT_DENSITY=full it runs at the scale instead (not in
// make test; about two and a half minutes): 300 models, a budget for
// about 60 per node, 90 s of the mix before the kill.
//
// It times nothing but the requests' deadlines: it runs beside the other
// tests. Budget: 45 s.
func TestClusterOnDemandPlacesByDemandAndSurvivesSIGKILL(t *testing.T) {
	t.Parallel()
	// demandCopies copies of each example pCTR model (TorchScript and
	// ONNX), a budget per node for about demandPerNode of them by their
	// estimate; the mix runs for mixBefore before the kill and goes on
	// for the lease TTL plus mixAfter after it.
	demandCopies, demandPerNode, mixBefore, mixAfter := 30, 12, 8*time.Second, 6*time.Second
	if os.Getenv("GROVE_IT_DENSITY") == "full" {
		demandCopies, demandPerNode, mixBefore, mixAfter = 150, 60, 90*time.Second, 30*time.Second
	}
	b := newDirBucket(t)
	var paths []string
	var entries []clusterDemandEntry
	var fileBytes int64
	for _, kind := range []struct{ prefix, file string }{{"t", "pctr_v1/model.pt"}, {"o", "pctr_onnx/model.onnx"}} {
		data, err := os.ReadFile(filepath.Join(repoRoot(), "examples", "bucket", kind.file))
		if err != nil {
			t.Fatal(err)
		}
		fileBytes = max(fileBytes, int64(len(data)))
		for i := range demandCopies {
			p := fmt.Sprintf("%s%02d/", kind.prefix, i)
			b.Put(t, p+filepath.Base(kind.file), distinctCopy(t, kind.file, data, i))
			entries = append(entries, clusterDemandEntry{Path: p, Load: "on_demand", Nodes: 3, MinNodes: 0})
			paths = append(paths, p)
		}
	}
	// hot/ is the model the last phase saturates: each call takes
	// hotDelay, so that requests queue on a copy.
	b.Put(t, hotPath+"model.faulty", []byte(fmt.Sprintf(`{"delay_ms": %d}`, hotDelay.Milliseconds())))
	entries = append(entries, clusterDemandEntry{Path: hotPath, Load: "on_demand", Nodes: 3, MinNodes: 0})
	cfg, err := json.Marshal(map[string]any{"model_metadata": entries})
	if err != nil {
		t.Fatal(err)
	}
	b.Put(t, "model_config.json", cfg)
	budget := int64(demandPerNode) * demandMemoryFactor * fileBytes
	c := &testCluster{t: t, etcd: etcdtest.Start(t), bucket: b, budget: budget,
		extra: []string{"--cluster-memory-factor", strconv.Itoa(demandMemoryFactor), "--idle-unload-after", demandIdleAfter.String()},
		nodes: map[string]*grove{}, gone: map[string]*grove{}}
	for _, n := range []string{"node-c", "node-b", "node-a"} {
		c.startNode(n)
	}
	doc := c.waitSettled(nil, 30*time.Second)
	if len(doc.Placement) != 0 {
		t.Fatalf("on-demand models placed before any request: %v", doc.Placement)
	}
	t.Logf("3 nodes, budget %d bytes each (%d copies at %d bytes × %d), controller %s, nothing placed", budget, demandPerNode, fileBytes, demandMemoryFactor, doc.Controller)

	// The nodes the clients send through, in turn; a node is taken out
	// (and its requests in flight waited for) before it is killed.
	var nodesMu sync.RWMutex
	names := c.live()
	groves := map[string]*grove{}
	for _, n := range names {
		groves[n] = c.nodes[n]
	}
	// One request per model at a time.
	busy := map[string]*sync.Mutex{}
	for _, p := range paths {
		busy[p] = &sync.Mutex{}
	}
	var (
		resMu   sync.Mutex
		results []demandResult
	)
	record := func(r demandResult) {
		resMu.Lock()
		results = append(results, r)
		resMu.Unlock()
	}

	// The table, sampled from a live node until the run ends: at most one
	// node per model, and the most models placed at once.
	var (
		tableMu    sync.Mutex
		overPlaced []string
		mostPlaced int
		samples    int
	)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var wg sync.WaitGroup
	wg.Go(func() {
		for ctx.Err() == nil {
			nodesMu.RLock()
			g := groves[names[0]]
			nodesMu.RUnlock()
			d, err := g.cluster()
			if err == nil {
				tableMu.Lock()
				samples++
				mostPlaced = max(mostPlaced, len(d.Placement))
				for p, on := range d.Placement {
					if len(on) > 1 && len(overPlaced) < 5 {
						overPlaced = append(overPlaced, fmt.Sprintf("%s on %q at %s", p, on, time.Now().Format("15:04:05.000")))
					}
				}
				tableMu.Unlock()
			}
			time.Sleep(100 * time.Millisecond)
		}
	})

	rank := rand.New(rand.NewPCG(5, 6)).Perm(len(paths)) // the hot models mix both runtimes
	var sent atomic.Int64
	for w := range 6 {
		wg.Go(func() {
			rng := rand.New(rand.NewPCG(7, uint64(w)))
			zipf := newZipf(rng, 1.1, len(paths))
			for ctx.Err() == nil {
				p := paths[rank[zipf()]]
				deadline := demandLongDeadline
				if rng.IntN(10) == 0 {
					deadline = demandShortDeadline
				}
				busy[p].Lock()
				nodesMu.RLock()
				name := names[int(sent.Add(1))%len(names)]
				r := demandRequest(context.Background(), groves[name], name, p, deadline)
				nodesMu.RUnlock()
				busy[p].Unlock()
				record(r)
			}
		})
	}

	time.Sleep(mixBefore) // the mix runs on three nodes
	doc, err = c.nodes[names[0]].cluster()
	if err != nil {
		t.Fatal(err)
	}
	victim := ""
	for _, n := range names {
		if n != doc.Controller && (victim == "" || len(doc.modelsOn(n)) > len(doc.modelsOn(victim))) {
			victim = n
		}
	}
	nodesMu.Lock()
	names = slices.DeleteFunc(slices.Clone(names), func(n string) bool { return n == victim })
	orphans := doc.modelsOn(victim)
	killed := c.kill(victim)
	nodesMu.Unlock()
	resMu.Lock()
	before := len(results)
	resMu.Unlock()
	t.Logf("after %v of the mix (%d requests): table %v; SIGKILLed %s, which held %q", mixBefore, before, doc.Placement, victim, orphans)
	if len(orphans) == 0 {
		t.Errorf("%s held no model when killed: the mix did not spread over the nodes (%v)", victim, doc.Placement)
	}
	// Each model the victim alone held, asked for at once through the
	// survivors with the long deadline: a cold reload on another node.
	for i, p := range orphans {
		wg.Go(func() {
			busy[p].Lock()
			defer busy[p].Unlock()
			name := names[i%len(names)]
			r := demandRequest(context.Background(), groves[name], name, p, demandLongDeadline)
			record(r)
			if r.failed() {
				t.Errorf("%s, held only by %s, through %s after the kill: %v", p, victim, name, r)
			}
		})
	}
	time.Sleep(clusterLeaseTTL + mixAfter) // the mix goes on through two nodes
	cancel()
	wg.Wait()
	t.Logf("run ended %v after the kill", time.Since(killed).Round(time.Millisecond))

	var failures []demandResult
	loading, ok, dying := 0, 0, 0
	for _, r := range results {
		switch {
		case r.failed() && r.diedUnder(victim, killed):
			dying++
		case r.failed():
			failures = append(failures, r)
		case r.loading():
			loading++
		default:
			ok++
		}
	}
	tableMu.Lock()
	t.Logf("%d requests: %d answered, %d with the short deadline got \"model is loading\", %d with the short deadline forwarded to %s as it died, %d failed; table sampled %d times, at most %d models placed at once",
		len(results), ok, loading, dying, victim, len(failures), samples, mostPlaced)
	if len(failures) > 0 {
		t.Errorf("%d requests failed; the first: %v", len(failures), failures[:min(len(failures), 5)])
	}
	if len(overPlaced) > 0 {
		t.Errorf("models placed on more nodes than their demand (one request at a time) needs: %q", overPlaced)
	}
	if mostPlaced <= demandPerNode {
		t.Errorf("at most %d models placed at once: the cluster held no more than one node's budget (%d)", mostPlaced, demandPerNode)
	}

	// A model whose copy is saturated gets another, up to the live nodes
	// (its nodes is 3, two are left), and back to one, then none, once
	// idle: hotClients callers at once, each call hotDelay long, through
	// both survivors.
	hotCtx, hotStop := context.WithCancel(context.Background())
	var hotWG sync.WaitGroup
	var hotFailed atomic.Int64
	for i := range hotClients {
		hotWG.Go(func() {
			name := names[i%len(names)]
			for hotCtx.Err() == nil {
				if r := demandRequest(context.Background(), groves[name], name, hotPath, demandLongDeadline); r.failed() {
					hotFailed.Add(1)
					t.Errorf("hot model: %v", r)
				}
			}
		})
	}
	copiesOf := func() int {
		d, err := c.nodes[names[0]].cluster()
		if err != nil {
			return -1
		}
		return len(d.Placement[hotPath])
	}
	most := 0
	for end := time.Now().Add(20 * time.Second); time.Now().Before(end) && most < len(names); {
		most = max(most, copiesOf())
		time.Sleep(100 * time.Millisecond)
	}
	hotStop()
	hotWG.Wait()
	if most != len(names) {
		t.Errorf("hot model, %d callers of %v calls: at most %d copies, want one on each of the %d live nodes", hotClients, hotDelay, most, len(names))
	}
	idleFrom := time.Now()
	left := copiesOf()
	for time.Since(idleFrom) < 3*demandIdleAfter+10*time.Second && left != 0 {
		time.Sleep(100 * time.Millisecond)
		if n := copiesOf(); n >= 0 {
			if n > left && left >= 0 {
				t.Errorf("hot model idle: copies went from %d back up to %d", left, n)
			}
			left = n
		}
	}
	t.Logf("hot model: %d copies under %d callers; none placed %v after they stopped (idle_unload_after %v)", most, hotClients, time.Since(idleFrom).Round(100*time.Millisecond), demandIdleAfter)
	if left != 0 {
		t.Errorf("hot model idle for %v: still %d copies, want none", time.Since(idleFrom).Round(time.Second), left)
	}
	tableMu.Unlock()
	final, err := c.nodes[names[0]].cluster()
	if err != nil {
		t.Fatal(err)
	}
	for p, on := range final.Placement {
		if len(on) > 1 || (len(on) == 1 && on[0] == victim) {
			t.Errorf("at the end, %s placed on %q (members %q)", p, on, final.memberNames())
		}
	}
	t.Logf("at the end: table %v; %s", final.Placement, final.memory())
}
