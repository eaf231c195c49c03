package it

import (
	"context"
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"image/png"
	"math"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/groveml/grove/cluster/etcdtest"
)

// consoleConfig is a model config with a contract whose second release
// phases in over 20 s (so its share chart moves while the test watches),
// and one whose second release is a shadow of the first (so it has a
// champion-challenger comparison) that learns clicks; with extra, it also
// lists pcvr/, loaded on demand.
func consoleConfig(extra bool) string {
	models := `{"model_path": "pctr_v1/"}, {"model_path": "pctr_v2/"}`
	if extra {
		models += `, {"model_path": "pcvr/", "load": "on_demand"}`
	}
	return `{"model_metadata": [` + models + `],
 "contracts": [{"organization": "ads", "project": "pctr", "contract_number": 1, "router": "latest",
   "servables": [
     {"release_version": "v1", "model_path": "pctr_v1/", "validity": [{"immediately_valid": {}}]},
     {"release_version": "v2", "model_path": "pctr_v2/", "validity": [{"immediately_valid": {}}], "phase_in": {"linear_over_secs": {"secs": 20}}}]},
   {"organization": "ads", "project": "pctr", "contract_number": 2, "outcomes": {"label": "click", "window": "1m"},
   "servables": [
     {"release_version": "v1", "model_path": "pctr_v1/", "validity": [{"immediately_valid": {}}], "logging": {"log_level": "FULL"}},
     {"release_version": "v2", "model_path": "pctr_v2/", "validity": [{"never_valid": {}}], "shadow": {"sample_rate": 1.0},
      "logging": {"log_level": "FULL"}}]}]}`
}

// TestConsoleInChromium drives the web console in headless Chromium
// (ui/test/console.mjs, playwright-core from ui's lockfile) against the
// real binary with authentication on: the page loads without a console
// error, takes the token once, lists a model added to the bucket within a
// poll (an on-demand one: shown unloaded, the memory budget's line
// counting it), draws a contract's share chart and another's champion-challenger
// comparison, the prediction log's deliveries to a real (embedded)
// broker, a management write in the audit trail, the outcomes panel of
// the clicks learnt (evaluations of a synthetic stream, produced to the
// evaluations topic as the evaluator writes them: a reliability diagram
// and figures over time per release), and the config error once the
// config is broken; its screenshot is not blank.
// Run by `make test-ui`, which installs the browser and the npm packages;
// GROVE_UI_SCREENSHOT=file.png keeps the screenshot.
//
// Budget: 60 s.
func TestConsoleInChromium(t *testing.T) {
	t.Parallel()
	checkBrowser(t)
	exp := loadExpected(t)
	b := newDirBucket(t)
	for _, m := range []string{"pctr_v1", "pctr_v2", "pcvr"} {
		b.Put(t, m+"/model.pt", exampleModel(t, m))
	}
	b.Put(t, "model_config.json", []byte(consoleConfig(false)))
	next := filepath.Join(t.TempDir(), "next.json")
	if err := os.WriteFile(next, []byte(consoleConfig(true)), 0o644); err != nil {
		t.Fatal(err)
	}
	tokens := filepath.Join(t.TempDir(), "tokens.yaml")
	writeTokens(t, tokens)
	emb := startBroker(t, "127.0.0.1:0")
	g := startGrove(t, b.URL(), nil, append(writeServerConfig(t, kafkaConfig(emb.Addr(), "json", "")), "--auth-tokens-file", tokens,
		"--memory-budget-bytes", "1073741824")...)
	// The evaluator's results for ads/pctr/2, in two writes ten minutes
	// apart by its clock, read one after the other: two history samples.
	writes, _ := adEvaluations(t, "ads/pctr/2", 2, 3000, time.Now().Add(-2*time.Hour))
	for i, w := range writes {
		produceEvaluations(t, emb.Addr(), w)
		g.waitFor("the evaluations in the stats", 10*time.Second, func() bool {
			code, body, _ := g.authCall(http.MethodGet, "/ads/pctr/2/stats", tokenOf["read"])
			var doc []struct {
				Grove struct {
					Outcomes *struct {
						History []json.RawMessage `json:"history"`
					} `json:"outcomes"`
				} `json:"Grove"`
			}
			if code != http.StatusOK || json.Unmarshal([]byte(body), &doc) != nil || len(doc) == 0 || doc[0].Grove.Outcomes == nil {
				return false
			}
			return len(doc[0].Grove.Outcomes.History) == i+1
		})
	}

	// Traffic through the contract while the page watches, so the
	// sparklines and shares have figures to draw.
	ctx, stop := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		score := scoreBody(t, exp)
		in := exp["pctr_v1"].Inputs[0]
		infer := batchJSON(itemJSON("pctr_v1/", tensorJSON("FLOAT", in.Shape, in.Data)))
		for i := 0; ctx.Err() == nil; i++ {
			path, body := fmt.Sprintf("/ads/pctr/%d/score", 1+i%2), score
			if i%3 == 2 {
				path, body = "/v1/inference", infer // a direct call: logged (FULL)
			}
			req, _ := http.NewRequestWithContext(ctx, http.MethodPost, g.url+path, strings.NewReader(body))
			req.Header.Set("Authorization", "Bearer "+tokenOf["infer"])
			if resp, err := client.Do(req); err == nil {
				resp.Body.Close()
			}
			select {
			case <-ctx.Done():
			case <-time.After(20 * time.Millisecond):
			}
		}
	}()
	defer func() { stop(); wg.Wait() }()

	// A management write for the audit trail: a rollback with nothing to
	// go back to fails, and is recorded as a failure.
	if code, body, _ := g.authCall(http.MethodPost, "/v1/rollback", tokenOf["manage"]); code == http.StatusOK {
		t.Fatalf("rollback with no previous content: %d %s", code, body)
	}

	runConsoleScript(t, g.url, "GROVE_TOKEN="+tokenOf["read"],
		"GROVE_CONFIG="+filepath.Join(strings.TrimPrefix(b.URL(), "file://"), "model_config.json"), "GROVE_NEW_CONFIG="+next,
		"GROVE_NEW_MODEL=pcvr/", "GROVE_UNLOADED_MODEL=pcvr/", "GROVE_CONTRACT=ads/pctr/1", "GROVE_COMPARED=ads/pctr/2 v2", "GROVE_PREDICTION_LOG=1",
		"GROVE_OUTCOMES=ads/pctr/2 v1 v2",
		"GROVE_BREAK_CONFIG=1", "GROVE_AUDIT_ROUTE=POST /v1/rollback")
}

// TestConsoleInChromiumShowsClusterPlacement drives the console of a
// one-node cluster (Debian's etcd) with authentication on: with a token
// holding read and manage the cluster section shows the node, the
// placement of its model and the members; with a read-only token it shows
// the placement and never asks for the members (GET /v1/cluster needs
// manage), so the browser logs no refusal.
//
// Budget: 60 s.
func TestConsoleInChromiumShowsClusterPlacement(t *testing.T) {
	t.Parallel()
	checkBrowser(t)
	b := newDirBucket(t)
	b.Put(t, "pctr_v1/model.pt", exampleModel(t, "pctr_v1"))
	b.Put(t, "model_config.json", []byte(`{"model_metadata": [{"model_path": "pctr_v1/"}]}`))
	const reader, operator = "console-reader-token", "console-operator-token"
	var toks strings.Builder
	toks.WriteString("tokens:\n")
	for tok, roles := range map[string]string{reader: "read", operator: "read, manage"} {
		fmt.Fprintf(&toks, "  - {name: %s, sha256: %x, roles: [%s]}\n", strings.TrimSuffix(tok, "-token"), sha256.Sum256([]byte(tok)), roles)
	}
	tokens := filepath.Join(t.TempDir(), "tokens.yaml")
	if err := os.WriteFile(tokens, []byte(toks.String()), 0o600); err != nil {
		t.Fatal(err)
	}
	g := startOn(t, b, "--cluster-etcd-endpoints", etcdtest.Start(t).Addr, "--cluster-node-name", "node-u",
		"--cluster-advertise", freeAddr(t), "--cluster-lease-ttl", "2s", "--memory-budget-bytes", "4000000000", "--insecure-no-auth",
		"--auth-tokens-file", tokens)
	g.waitFor("pctr_v1/ placed and ready on node-u", 30*time.Second, func() bool {
		code, body, _ := g.authCall(http.MethodGet, "/v1/cluster", operator)
		var d clusterDoc
		return code == http.StatusOK && json.Unmarshal([]byte(body), &d) == nil &&
			d.settled([]clusterModel{{path: "pctr_v1/", nodes: 1}}, []string{"node-u"}) == nil
	})
	runConsoleScript(t, g.url, "GROVE_TOKEN="+operator, "GROVE_CLUSTER_NODE=node-u", "GROVE_CLUSTER_MODEL=pctr_v1/")
	runConsoleScript(t, g.url, "GROVE_TOKEN="+reader, "GROVE_CLUSTER_NODE=node-u", "GROVE_CLUSTER_MODEL=pctr_v1/", "GROVE_CLUSTER_MEMBERS=0")
}

// checkBrowser fails t unless the console's browser test can run: the npm
// packages (make ui-deps) and Debian's Chromium (make deps).
func checkBrowser(t *testing.T) {
	t.Helper()
	if _, err := os.Stat(filepath.Join(repoRoot(), "ui", "node_modules", "playwright-core")); err != nil {
		t.Fatalf("ui/node_modules has no playwright-core: run `make test-ui` (or `make ui-deps`) first: %v", err)
	}
	if _, err := os.Stat(chromium); err != nil {
		t.Fatalf("no Chromium at %s: run `make deps` (Debian's chromium package): %v", chromium, err)
	}
}

// chromium is Debian's browser, which the console's tests drive.
const chromium = "/usr/bin/chromium"

// runConsoleScript runs ui/test/console.mjs against the server at url with
// env (its settings), within 90 s, and checks its screenshot is not blank.
func runConsoleScript(t *testing.T, url string, env ...string) {
	t.Helper()
	root := repoRoot()
	shot := filepath.Join(t.TempDir(), "console.png")
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, "node", filepath.Join(root, "ui", "test", "console.mjs"))
	cmd.Dir = filepath.Join(root, "ui")
	cmd.Env = append(append(os.Environ(), "GROVE_URL="+url, "GROVE_SCREENSHOT="+shot, "CHROMIUM="+chromium), env...)
	start := time.Now()
	out, err := cmd.CombinedOutput()
	t.Logf("console.mjs (%v):\n%s", time.Since(start).Round(time.Millisecond), out)
	if err != nil {
		t.Fatalf("the browser test failed: %v", err)
	}
	if keep := os.Getenv("GROVE_UI_SCREENSHOT"); keep != "" {
		if data, err := os.ReadFile(shot); err == nil {
			_ = os.WriteFile(keep, data, 0o644)
		}
	}
	dev, colors := pixelSpread(t, shot)
	t.Logf("screenshot: luminance standard deviation %.1f, %d distinct colours", dev, colors)
	if dev < 10 || colors < 50 {
		t.Errorf("the screenshot looks blank: luminance standard deviation %.1f, %d distinct colours", dev, colors)
	}
}

// pixelSpread returns the standard deviation of the luminance of a PNG's
// pixels (0 for one colour) and how many distinct colours it has.
func pixelSpread(t *testing.T, path string) (float64, int) {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	img, err := png.Decode(f)
	if err != nil {
		t.Fatalf("decoding the screenshot: %v", err)
	}
	var sum, sq, n float64
	colors := map[[3]uint32]bool{}
	bounds := img.Bounds()
	if bounds.Dx() < 800 || bounds.Dy() < 600 {
		t.Errorf("screenshot is %v, want at least 800x600", bounds.Size())
	}
	for y := bounds.Min.Y; y < bounds.Max.Y; y++ {
		for x := bounds.Min.X; x < bounds.Max.X; x++ {
			r, g, b, _ := img.At(x, y).RGBA()
			l := (0.299*float64(r) + 0.587*float64(g) + 0.114*float64(b)) / 257
			sum, sq, n = sum+l, sq+l*l, n+1
			if len(colors) < 10000 {
				colors[[3]uint32{r >> 8, g >> 8, b >> 8}] = true
			}
		}
	}
	mean := sum / n
	return math.Sqrt(max(sq/n-mean*mean, 0)), len(colors)
}

// TestConsoleOnTheAdminListener checks that with --admin-http the console
// (page and document) moves to the admin listener with the routes it
// reads, and that its document carries live figures computed from the
// requests served.
//
// Budget: 10 s.
func TestConsoleOnTheAdminListener(t *testing.T) {
	t.Parallel()
	exp := loadExpected(t)
	b := newDirBucket(t)
	for _, m := range []string{"pctr_v1", "pctr_v2"} {
		b.Put(t, m+"/model.pt", exampleModel(t, m))
	}
	b.Put(t, "model_config.json", []byte(consoleConfig(false)))
	admin := freeAddr(t)
	g := startGrove(t, b.URL(), nil, "--admin-http", admin)
	adminURL := "http://" + admin
	for _, c := range []struct {
		url  string
		want int
	}{
		{g.url + "/ui/", http.StatusNotFound}, {g.url + "/v1/console", http.StatusNotFound},
		{adminURL + "/ui/", http.StatusOK}, {adminURL + "/ui/app.js", http.StatusOK}, {adminURL + "/v1/console", http.StatusOK},
		{adminURL + "/v1/audit", http.StatusOK},
	} {
		resp, err := client.Get(c.url)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != c.want {
			t.Errorf("GET %s: %d, want %d", c.url, resp.StatusCode, c.want)
		}
	}
	body := scoreBody(t, exp)
	for range 40 {
		resp, err := client.Post(g.url+"/ads/pctr/1/score", "application/json", strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("score: HTTP %d", resp.StatusCode)
		}
	}
	type point struct {
		Requests float64  `json:"requests"`
		P50Ms    *float64 `json:"p50_ms"`
		P99Ms    *float64 `json:"p99_ms"`
	}
	var doc struct {
		Contracts []struct {
			ID        string `json:"id"`
			Servables []struct {
				Release string  `json:"release_version"`
				Share   float64 `json:"traffic_share"`
			} `json:"servables"`
		} `json:"contracts"`
		ModelSeries    map[string][]point `json:"model_series"`
		ContractSeries map[string][]struct {
			Releases map[string]struct {
				Share float64 `json:"share"`
			} `json:"releases"`
		} `json:"contract_series"`
	}
	var served float64
	g.waitFor("the console's history to count the requests", 10*time.Second, func() bool {
		resp, err := client.Get(adminURL + "/v1/console")
		if err != nil {
			return false
		}
		defer resp.Body.Close()
		if err := json.NewDecoder(resp.Body).Decode(&doc); err != nil {
			t.Fatalf("decoding /v1/console: %v", err)
		}
		served = 0
		for _, path := range []string{"pctr_v1/", "pctr_v2/"} {
			for _, p := range doc.ModelSeries[path] {
				served += p.Requests
				if p.Requests > 0 && (p.P50Ms == nil || p.P99Ms == nil || *p.P50Ms <= 0 || *p.P99Ms < *p.P50Ms) {
					t.Fatalf("%s: a point with requests but latency p50 %v p99 %v", path, p.P50Ms, p.P99Ms)
				}
			}
		}
		return served >= 40
	})
	// Each interval's requests, summed, are the requests served.
	if served != 40 {
		t.Errorf("the histories count %v requests, want 40", served)
	}
	if len(doc.Contracts) != 2 || doc.Contracts[0].ID != "ads/pctr/1" || len(doc.Contracts[0].Servables) != 2 || doc.Contracts[1].ID != "ads/pctr/2" {
		t.Fatalf("contracts %+v, want ads/pctr/1 and 2 with two servables each", doc.Contracts)
	}
	hist := doc.ContractSeries["ads/pctr/1"]
	if len(hist) == 0 {
		t.Fatal("no share history for ads/pctr/1")
	}
	last := hist[len(hist)-1].Releases
	if sum := last["v1"].Share + last["v2"].Share; math.Abs(sum-1) > 1e-9 {
		t.Errorf("the shares of the last sample add up to %v: %+v", sum, last)
	}
}
