package it

import (
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"
)

// servableStats is one servable of GET /{org}/{project}/{n}/stats.
type servableStats struct {
	Release          string             `json:"release_version"`
	Ready            bool               `json:"ready"`
	Valid            bool               `json:"valid"`
	Expired          bool               `json:"expired"`
	Reason           string             `json:"reason"`
	Created          *time.Time         `json:"created"`
	ValidSince       *time.Time         `json:"valid_since"`
	PhaseInPct       float64            `json:"phase_in_pct"`
	TrafficShare     float64            `json:"traffic_share"`
	Served           int64              `json:"served"`
	ShadowExecutions int64              `json:"shadow_executions"`
	Metrics          map[string]float64 `json:"metrics"`
	Latency          struct {
		Count uint64  `json:"count"`
		P50Ms float64 `json:"p50_ms"`
		P99Ms float64 `json:"p99_ms"`
	} `json:"latency"`
}

// forestflowMetrics is ForestFlow's ServableMetrics, as /stats gives it.
type forestflowMetrics struct {
	FQRV struct {
		ReleaseVersion string `json:"releaseVersion"`
	} `json:"fqrv"`
	ScoreCount         int64              `json:"scoreCount"`
	ShadeCount         int64              `json:"shadeCount"`
	CreatedAtMS        *int64             `json:"createdAtMS"`
	BecameValidAtMS    *int64             `json:"becameValidAtMS"`
	CurrentPhaseInPct  int32              `json:"currentPhaseInPct"`
	PerformanceMetrics map[string]float64 `json:"performanceMetrics"`
}

// stats reads a contract's stats, by release.
func (g *grove) stats(contract string) map[string]servableStats {
	g.t.Helper()
	code, raw := g.get("/" + contract + "/stats")
	var doc []struct {
		ServableMetrics forestflowMetrics `json:"ServableMetrics"`
		Grove           servableStats     `json:"Grove"`
	}
	if code != http.StatusOK || json.Unmarshal(raw, &doc) != nil {
		g.t.Fatalf("stats of %s: HTTP %d %s", contract, code, raw)
	}
	out := map[string]servableStats{}
	for _, s := range doc {
		// ForestFlow's view and Grove's agree.
		if m := s.ServableMetrics; m.FQRV.ReleaseVersion != s.Grove.Release || m.ShadeCount != s.Grove.ShadowExecutions ||
			m.CurrentPhaseInPct != int32(s.Grove.PhaseInPct) || (s.Grove.ValidSince == nil) != (m.BecameValidAtMS == nil) {
			g.t.Errorf("stats of %s: ServableMetrics %+v disagree with Grove's %+v", contract, m, s.Grove)
		}
		out[s.Grove.Release] = s.Grove
	}
	return out
}

// call sends a management request and returns the status and body.
func (g *grove) call(method, path, body string) (int, string) {
	g.t.Helper()
	req, err := http.NewRequest(method, g.url+path, strings.NewReader(body))
	if err != nil {
		g.t.Fatal(err)
	}
	resp, err := client.Do(req)
	if err != nil {
		g.t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(raw)
}

// must sends a management request that has to succeed.
func (g *grove) must(method, path, body string) string {
	g.t.Helper()
	code, raw := g.call(method, path, body)
	if code != http.StatusOK {
		g.t.Fatalf("%s %s: HTTP %d %s", method, path, code, raw)
	}
	return raw
}

// scoreReleases scores n requests through contract and counts the
// releases that answered.
func (g *grove) scoreReleases(contract, body string, n int) map[string]int {
	g.t.Helper()
	counts := map[string]int{}
	for range n {
		counts[g.scoreOnce(contract, body, nil)]++
	}
	return counts
}

// scoreOnce scores one request through contract, with extra headers, and
// returns the release that answered.
func (g *grove) scoreOnce(contract, body string, header http.Header) string {
	g.t.Helper()
	req, err := http.NewRequest("POST", g.url+"/"+contract+"/score", strings.NewReader(body))
	if err != nil {
		g.t.Fatal(err)
	}
	maps.Copy(req.Header, header)
	resp, err := client.Do(req)
	if err != nil {
		g.t.Fatal(err)
	}
	raw, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	var p struct {
		Prediction struct {
			FQRV struct {
				ReleaseVersion string `json:"releaseVersion"`
			} `json:"fqrv"`
		} `json:"Prediction"`
	}
	if resp.StatusCode != http.StatusOK || json.Unmarshal(raw, &p) != nil {
		g.t.Fatalf("score %s: HTTP %d %s", contract, resp.StatusCode, raw)
	}
	return p.Prediction.FQRV.ReleaseVersion
}

// scoreEachShadowed scores n requests through contract one at a time and,
// after each, waits until release shadowRelease has counted that request's
// shadow execution. Shadow work that finds the shadow worker busy is shed by
// design; waiting keeps its queue empty, so every copy runs and the count is
// exact however slowly the niced shadow thread is scheduled.
func (g *grove) scoreEachShadowed(contract, body, shadowRelease string, n int) map[string]int {
	g.t.Helper()
	counts := map[string]int{}
	base := g.stats(contract)[shadowRelease].ShadowExecutions
	for i := range n {
		for rv, c := range g.scoreReleases(contract, body, 1) {
			counts[rv] += c
		}
		want := base + int64(i) + 1
		g.waitFor(fmt.Sprintf("shadow execution %d on %s", want, shadowRelease), 30*time.Second, func() bool {
			return g.stats(contract)[shadowRelease].ShadowExecutions >= want
		})
	}
	return counts
}

// contractConfig is a model config with pctr_v1/ and pctr_v2/ (released
// after graceMs) and contract ads/pctr/1 holding the given servables.
func contractConfig(graceMs int, extra string, servables ...string) []byte {
	return []byte(fmt.Sprintf(`{"model_metadata": [{"model_path": "pctr_v1/", "eviction_grace_period_in_ms": %d},
  {"model_path": "pctr_v2/", "eviction_grace_period_in_ms": %d}],
 "contracts": [{"organization": "ads", "project": "pctr", "contract_number": 1 %s, "servables": [%s]}]}`,
		graceMs, graceMs, extra, strings.Join(servables, ",")))
}

func putModels(t *testing.T, b testBucket) {
	t.Helper()
	b.Put(t, "pctr_v1/model.pt", exampleModel(t, "pctr_v1"))
	b.Put(t, "pctr_v2/model.pt", exampleModel(t, "pctr_v2"))
}

// TestPromotionByConfigEditPhasesInLinearlyThenExpiresTheOldRelease adds a
// challenger to a serving contract by editing the config in the bucket: its
// traffic share rises linearly (the answers follow the stats' share), it
// takes all traffic at the end of the ramp, and keep_latest 1 expires the
// old release, whose model is unloaded after its grace period.
//
// Budget: 20 s.
func TestPromotionByConfigEditPhasesInLinearlyThenExpiresTheOldRelease(t *testing.T) {
	t.Parallel()
	exp := loadExpected(t)
	b := newDirBucket(t)
	putModels(t, b)
	v1 := `{"release_version": "v1", "model_path": "pctr_v1/"}`
	settings := `, "router": "latest", "expiration": {"keep_latest": 1}`
	b.Put(t, "model_config.json", contractConfig(1000, settings, v1))
	g := startGrove(t, b.URL(), nil, "--shadow-timeout", "2m")
	body := scoreBody(t, exp)
	if got := g.scoreReleases("ads/pctr/1", body, 20); got["v1"] != 20 {
		t.Fatalf("before the challenger: answers %v, want all from v1", got)
	}

	const rampSecs = 8
	b.Put(t, "model_config.json", contractConfig(1000, settings, v1,
		fmt.Sprintf(`{"release_version": "v2", "model_path": "pctr_v2/", "phase_in": {"linear_over_secs": {"secs": %d}}}`, rampSecs)))
	g.waitFor("v2 to be valid", 15*time.Second, func() bool { return g.stats("ads/pctr/1")["v2"].Valid })

	// Three windows along the ramp: the share v2 answers lies between
	// the stats' share before and after the window, and rises.
	var last float64
	for i, at := range []time.Duration{1500 * time.Millisecond, 4 * time.Second, 6500 * time.Millisecond} {
		since := time.Since(*g.stats("ads/pctr/1")["v2"].ValidSince)
		time.Sleep(at - since)
		before := g.stats("ads/pctr/1")["v2"].TrafficShare
		got := g.scoreReleases("ads/pctr/1", body, 300)
		after := g.stats("ads/pctr/1")["v2"].TrafficShare
		share := float64(got["v2"]) / 300
		t.Logf("window %d: stats share %.3f..%.3f, answered by v2 %.3f (%v)", i, before, after, share, got)
		if share < before-0.05 || share > after+0.05 {
			t.Errorf("window %d: v2 answered %.3f of requests, stats share went %.3f..%.3f", i, share, before, after)
		}
		if share <= last {
			t.Errorf("window %d: v2's share %.3f did not rise from %.3f", i, share, last)
		}
		last = share
	}

	g.waitFor("v1 to expire", 15*time.Second, func() bool { return g.stats("ads/pctr/1")["v1"].Expired })
	if got := g.scoreReleases("ads/pctr/1", body, 50); got["v2"] != 50 {
		t.Errorf("after the ramp: answers %v, want all from v2", got)
	}
	st := g.stats("ads/pctr/1")
	if v2 := st["v2"]; v2.PhaseInPct != 100 || v2.TrafficShare != 1 || v2.Latency.Count == 0 || v2.Latency.P99Ms <= 0 || v2.Latency.P50Ms > v2.Latency.P99Ms {
		t.Errorf("v2 stats after the ramp: %+v", v2)
	}
	if v1 := st["v1"]; !strings.Contains(v1.Reason, "keep_latest 1") || v1.TrafficShare != 0 || v1.Created == nil {
		t.Errorf("v1 stats after the ramp: %+v", v1)
	}
	g.waitFor("pctr_v1/ to be unloaded", 10*time.Second, func() bool {
		state, _, _ := g.status().model("pctr_v1/")
		return state == "expired"
	})
	if state, _, _ := g.status().model("pctr_v2/"); state != "ready" {
		t.Errorf("pctr_v2/ is %s, want ready", state)
	}
}

// TestPromotionByManagementAPIAndMetricsFeed builds a contract through the
// ForestFlow management API, promotes a shadow challenger with a policy
// PUT gated on a metric, feeds the metric, and checks the settings reads.
//
// Budget: 10 s.
func TestPromotionByManagementAPIAndMetricsFeed(t *testing.T) {
	t.Parallel()
	onDir(t, func(t *testing.T, b testBucket) {
		exp := loadExpected(t)
		putModels(t, b)
		b.Put(t, "model_config.json", []byte(`{"model_metadata": []}`))
		g := startOn(t, b)
		body := scoreBody(t, exp)

		g.must("POST", "/contract/ads/pctr/1", `{"expirationPolicy": {"KeepLatest": {"servablesToKeep": 2}}, "router": {"LatestPhaseInPctBasedRouter": {}}}`)
		if code, raw := g.call("POST", "/contract/ads/pctr/1", `{}`); code != http.StatusUnprocessableEntity || !strings.Contains(raw, "ContractValidationError") {
			t.Errorf("creating the contract twice: HTTP %d %s", code, raw)
		}
		serve := func(rv, path, policy string) (int, string) {
			return g.call("POST", "/servable", fmt.Sprintf(`{"path": %q, "eviction_grace_period_in_ms": 500,
  "fqrv": {"contract": {"organization": "ads", "project": "pctr", "contract_number": 1}, "release_version": %q},
  "servableSettings": {"policySettings": %s, "loggingSettings": {"logLevel": "NONE"}}}`, path, rv, policy))
		}
		if code, raw := serve("v1", "pctr_v1/", `{"validityPolicy": [{"ImmediatelyValid": {}}], "phaseInPolicy": {"ImmediatePhaseIn": {}}}`); code != http.StatusOK {
			t.Fatalf("serving v1: HTTP %d %s", code, raw)
		}
		if code, raw := serve("v2", "pctr_v2/", `{"validity": [{"never_valid": {}}], "shadow": {"sample_rate": 1}}`); code != http.StatusOK {
			t.Fatalf("serving v2: HTTP %d %s", code, raw)
		}
		if code, raw := serve("v2", "pctr_v2/", `{}`); code != http.StatusConflict || !strings.Contains(raw, "ServableAlreadyExistsError") {
			t.Errorf("serving v2 twice: HTTP %d %s", code, raw)
		}
		g.waitFor("both releases loaded", 30*time.Second, func() bool {
			st := g.stats("ads/pctr/1")
			return st["v1"].Ready && st["v2"].Ready
		})
		if got := g.scoreEachShadowed("ads/pctr/1", body, "v2", 10); got["v1"] != 10 {
			t.Fatalf("with a shadow challenger: answers %v, want all from v1", got)
		}
		if n := g.stats("ads/pctr/1")["v2"].ShadowExecutions; n != 10 {
			t.Errorf("shadow executions = %d, want 10", n)
		}

		// Promote v2, gated on its AUC.
		g.must("PUT", "/ads/pctr/1/v2/policy", `{"validity": [{"min_metric": {"metric": "auc", "threshold": 0.7}}]}`)
		if got := g.scoreReleases("ads/pctr/1", body, 10); got["v1"] != 10 {
			t.Fatalf("v2 without its metric: answers %v, want all from v1", got)
		}
		if st := g.stats("ads/pctr/1")["v2"]; st.Valid || !strings.Contains(st.Reason, "auc") {
			t.Errorf("v2 without its metric: %+v", st)
		}
		g.must("POST", "/ads/pctr/1/v2/metrics", `{"auc": 0.69}`)
		if got := g.scoreReleases("ads/pctr/1", body, 10); got["v1"] != 10 {
			t.Fatalf("v2 under its threshold: answers %v, want all from v1", got)
		}
		raw := g.must("POST", "/ads/pctr/1/v2/metrics", `{"auc": 0.74, "logloss": 0.3}`)
		if !strings.Contains(raw, `"auc": 0.74`) || !strings.Contains(raw, `"logloss": 0.3`) {
			t.Errorf("metrics answer: %s", raw)
		}
		if got := g.scoreReleases("ads/pctr/1", body, 10); got["v2"] != 10 {
			t.Fatalf("v2 over its threshold: answers %v, want all from v2", got)
		}
		if st := g.stats("ads/pctr/1")["v2"]; st.Metrics["auc"] != 0.74 || st.TrafficShare != 1 {
			t.Errorf("v2 stats: %+v", st)
		}

		// The reads show what was written, in the shapes the writes take.
		if raw := g.must("GET", "/ads/pctr/1/c-settings", ""); !strings.Contains(raw, `"router": "latest"`) || !strings.Contains(raw, `"keep_latest": 2`) {
			t.Errorf("c-settings: %s", raw)
		}
		if raw := g.must("GET", "/ads/pctr/1/v2/settings", ""); !strings.Contains(raw, `"min_metric"`) || !strings.Contains(raw, `"pctr_v2/"`) {
			t.Errorf("v2 settings: %s", raw)
		}
		if raw := g.must("GET", "/ads/pctr/1/releases", ""); strings.Count(raw, `"releaseVersion"`) != 2 {
			t.Errorf("releases: %s", raw)
		}
		if raw := g.must("GET", "/ads/pctr/1/metadata", ""); strings.Count(raw, `"BasicMetaData"`) != 2 || !strings.Contains(raw, "torchscript") {
			t.Errorf("metadata: %s", raw)
		}
		g.must("PUT", "/ads/pctr/1/v1/logging", `{"logLevel": "FULL", "keyFeatures": ["user_id"]}`)
		if raw := g.must("GET", "/ads/pctr/1/v1/settings", ""); !strings.Contains(raw, `"FULL"`) {
			t.Errorf("v1 settings after the logging PUT: %s", raw)
		}
		for _, c := range []struct {
			method, path, body string
			code               int
			has                string
		}{
			{"PUT", "/ads/pctr/1/v9/policy", `{}`, http.StatusNotFound, "UnknownServable"},
			{"PUT", "/ads/pctr/7", `{}`, http.StatusNotFound, "UnknownContract"},
			{"PUT", "/ads/pctr/1/v2/policy", `{"validity": [{"sometimes_valid": {}}]}`, http.StatusUnprocessableEntity, "unknown validity rule"},
			{"PUT", "/ads/pctr/1", `{"router": "random"}`, http.StatusUnprocessableEntity, "router"},
			{"POST", "/ads/pctr/1/v2/metrics", `{"auc": "high"}`, http.StatusUnprocessableEntity, "metrics"},
			{"POST", "/servable", `{"path": "s3://models/x"}`, http.StatusUnprocessableEntity, "URL"},
		} {
			if code, raw := g.call(c.method, c.path, c.body); code != c.code || !strings.Contains(raw, c.has) {
				t.Errorf("%s %s %s: HTTP %d %s, want %d with %q", c.method, c.path, c.body, code, raw, c.code, c.has)
			}
		}

		// Deleting the champion leaves v2; its model leaves the config.
		g.must("DELETE", "/ads/pctr/1/v1", "")
		if raw := g.must("GET", "/ads/pctr/1/releases", ""); strings.Contains(raw, `"v1"`) {
			t.Errorf("releases after deleting v1: %s", raw)
		}
		g.waitFor("pctr_v1/ evicted", 10*time.Second, func() bool {
			state, _, _ := g.status().model("pctr_v1/")
			return state == ""
		})
	})
}

// TestConcurrentManagementWritesFromTwoReplicasAllLand has two grove
// processes on one bucket create eight contracts at once, four each: every
// write lands, and both replicas end up serving all eight.
//
// Budget: 60 s.
func TestConcurrentManagementWritesFromTwoReplicasAllLand(t *testing.T) {
	t.Parallel()
	eachBucket(t, func(t *testing.T, b testBucket) {
		putModels(t, b)
		b.Put(t, "model_config.json", []byte(`{"model_metadata": []}`))
		replicas := []*grove{startOn(t, b), startOn(t, b)}
		var wg sync.WaitGroup
		errs := make(chan string, 8)
		for n := 1; n <= 8; n++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				g := replicas[n%2]
				code, raw := g.call("POST", "/servable", fmt.Sprintf(`{"path": "pctr_v1/",
  "fqrv": {"contract": {"organization": "ads", "project": "pctr", "contract_number": %d}, "release_version": "v1"},
  "servableSettings": {"policySettings": {}}}`, n))
				if code != http.StatusOK {
					errs <- fmt.Sprintf("contract %d: HTTP %d %s", n, code, raw)
				}
			}()
		}
		wg.Wait()
		close(errs)
		for e := range errs {
			t.Error(e)
		}
		for i, g := range replicas {
			g.waitFor(fmt.Sprintf("replica %d to list 8 contracts", i), 10*time.Second, func() bool {
				_, raw := g.get("/contracts/list")
				return strings.Count(string(raw), `"contractNumber"`) == 8
			})
		}
		if _, raw := replicas[0].get("/contracts/list"); t.Failed() {
			t.Logf("contracts: %s", raw)
		}
	})
}

// TestValidSinceIsSharedAcrossRestarts restarts grove in the middle of a
// linear phase-in: the ramp continues where it was, because the valid-since
// stamp is kept in the bucket, not in the process.
//
// Budget: 20 s.
func TestValidSinceIsSharedAcrossRestarts(t *testing.T) {
	t.Parallel()
	b := newDirBucket(t)
	putModels(t, b)
	b.Put(t, "model_config.json", contractConfig(0, "", `{"release_version": "v1", "model_path": "pctr_v1/"}`,
		`{"release_version": "v2", "model_path": "pctr_v2/", "phase_in": {"linear_over_secs": {"secs": 60}}}`))
	g := startGrove(t, b.URL(), nil)
	g.waitFor("v2 to be valid", 15*time.Second, func() bool { return g.stats("ads/pctr/1")["v2"].Valid })
	first := *g.stats("ads/pctr/1")["v2"].ValidSince
	time.Sleep(3 * time.Second) // the stamp is written within a second
	if err := g.stop(); err != nil {
		t.Fatalf("stopping grove: %v", err)
	}

	g = startGrove(t, b.URL(), nil)
	g.waitFor("v2 to be valid again", 15*time.Second, func() bool { return g.stats("ads/pctr/1")["v2"].Valid })
	v2 := g.stats("ads/pctr/1")["v2"]
	if !v2.ValidSince.Equal(first) {
		t.Errorf("valid_since after the restart is %v, want %v", v2.ValidSince, first)
	}
	if min := 100 * time.Since(first).Seconds() / 60; v2.PhaseInPct < min-1 {
		t.Errorf("phase-in after the restart is %.1f%%, want at least %.1f%% (the ramp restarted)", v2.PhaseInPct, min)
	}
}
