package it

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"
)

// banditModelConfig: three releases of the same model behind router
// thompson, rewarded by clicks; v2's validity and the bandit's
// update_every are given.
func banditModelConfig(v2Validity, updateEvery string) []byte {
	return []byte(`{"model_metadata": [{"model_path": "a/"}, {"model_path": "b/"}, {"model_path": "c/"}],
 "contracts": [{"organization": "ads", "project": "bandit", "contract_number": 1, "router": "thompson",
   "bandit": {"reward": "click", "update_every": "` + updateEvery + `", "half_life": "1h"},
   "outcomes": {"label": "click", "window": "1s", "lateness": "2s"},
   "servables": [
     {"release_version": "v1", "model_path": "a/", "logging": {"log_level": "FULL"}},
     {"release_version": "v2", "model_path": "b/", "logging": {"log_level": "FULL"}, "validity": [` + v2Validity + `]},
     {"release_version": "v3", "model_path": "c/", "logging": {"log_level": "FULL"}}]}]}`)
}

// banditStats is the part of a servable's stats the test reads.
type banditStats struct {
	Grove struct {
		Release      string  `json:"release_version"`
		TrafficShare float64 `json:"traffic_share"`
		Bandit       *struct {
			Mean        *float64 `json:"reward_mean"`
			N           float64  `json:"n"`
			ChosenShare float64  `json:"chosen_share"`
		} `json:"bandit"`
	} `json:"Grove"`
}

func (g *grove) banditStats(contract string) map[string]banditStats {
	g.t.Helper()
	code, raw := g.get("/" + contract + "/stats")
	var doc []banditStats
	if code != http.StatusOK || json.Unmarshal(raw, &doc) != nil {
		g.t.Fatalf("stats of %s: HTTP %d %s", contract, code, raw)
	}
	out := map[string]banditStats{}
	for _, s := range doc {
		out[s.Grove.Release] = s
	}
	return out
}

// TestThompsonRouterSendsTrafficToTheReleaseThatEarnsClicks drives the
// real binary (grove serve --evaluate) with a contract of three releases
// behind router thompson: each answer's release is clicked at its own
// true rate (v2 30 %, the others 5 %) through POST /v1/outcomes. The
// evaluator joins the clicks, the router follows them: v2 ends with the
// largest share, chosen by the bandit, and its posterior mean is the
// highest; made invalid, v2 gets no traffic as soon as the config is
// applied. Budget: 15 s.
func TestThompsonRouterSendsTrafficToTheReleaseThatEarnsClicks(t *testing.T) {
	t.Parallel()
	c, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(2, logTopic, outcomeTopic), kfake.AllowAutoTopicCreation(),
		kfake.DefaultNumPartitions(2), kfake.ListenFn(loopbackListen))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	b := newDirBucket(t)
	model, err := os.ReadFile(filepath.Join(repoRoot(), "it", "testdata", "outcomes", "truth.pt"))
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range []string{"a", "b", "c"} {
		b.Put(t, m+"/model.pt", model)
	}
	b.Put(t, "model_config.json", banditModelConfig(`{"immediately_valid": {}}`, "1s"))
	yaml := fmt.Sprintf("kafka:\n  brokers: [%q]\n  topic: %s\n  linger: 1ms\nprediction_log:\n  key_by: request_id\noutcomes:\n  commit_interval: 100ms\n",
		c.ListenAddrs()[0], logTopic)
	g := startGrove(t, b.URL(), nil, append(writeServerConfig(t, yaml), "--evaluate")...)
	const contract = "ads/bandit/1"

	rate := map[string]float64{"v1": 0.05, "v2": 0.30, "v3": 0.05}
	rng := rand.New(rand.NewPCG(29, 1))
	served := map[string]int{}
	var clicks []map[string]any
	post := func() {
		if len(clicks) == 0 {
			return
		}
		body, _ := json.Marshal(clicks)
		resp, err := client.Post(g.url+"/v1/outcomes", "application/json", bytes.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		raw, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK || !strings.Contains(string(raw), fmt.Sprintf(`"accepted":%d`, len(clicks))) {
			t.Fatalf("POST /v1/outcomes: HTTP %d %s", resp.StatusCode, raw)
		}
		clicks = clicks[:0]
	}
	deadline := time.Now().Add(9 * time.Second)
	for i := 0; time.Now().Before(deadline); i++ {
		req := fmt.Sprintf("bandit-%d", i)
		r, err := http.NewRequest(http.MethodPost, g.url+"/"+contract+"/score",
			strings.NewReader(`{"schema":[{"type":"Float32","fields":["x0","x1"]}],"datum":[{"tensors":[{"Float32":{"data":[0.1,1]}}]}]}`))
		if err != nil {
			t.Fatal(err)
		}
		r.Header.Set("X-Request-Id", req)
		resp, err := client.Do(r)
		if err != nil {
			t.Fatal(err)
		}
		var p struct {
			Prediction struct {
				FQRV struct {
					ReleaseVersion string `json:"releaseVersion"`
				} `json:"fqrv"`
			} `json:"prediction"`
		}
		err = json.NewDecoder(resp.Body).Decode(&p)
		resp.Body.Close()
		rv := p.Prediction.FQRV.ReleaseVersion
		if err != nil || resp.StatusCode != http.StatusOK || rate[rv] == 0 {
			t.Fatalf("score %d: HTTP %d, release %q, %v", i, resp.StatusCode, rv, err)
		}
		served[rv]++
		if rng.Float64() < rate[rv] {
			clicks = append(clicks, map[string]any{"outcome_id": req, "request_id": req, "labels": map[string]float64{"click": 1}})
		}
		if i%20 == 19 {
			post()
		}
		time.Sleep(3 * time.Millisecond)
	}
	post()

	// The bandit's choice, once the last windows are scored (lateness 2 s).
	var st map[string]banditStats
	g.waitFor("v2 with the largest share", 15*time.Second, func() bool {
		st = g.banditStats(contract)
		v1, v2, v3 := st["v1"].Grove, st["v2"].Grove, st["v3"].Grove
		return v2.Bandit != nil && v2.TrafficShare > v1.TrafficShare && v2.TrafficShare > v3.TrafficShare && v2.TrafficShare > 0.5
	})
	v1, v2, v3 := st["v1"].Grove.Bandit, st["v2"].Grove.Bandit, st["v3"].Grove.Bandit
	if v1 == nil || v3 == nil || v2.Mean == nil || v1.Mean == nil || v3.Mean == nil || *v2.Mean <= *v1.Mean || *v2.Mean <= *v3.Mean || v2.N == 0 {
		t.Errorf("posteriors v1 %+v v2 %+v v3 %+v: want v2's mean reward the highest", v1, v2, v3)
	}
	if _, metrics := g.get("/metrics"); !strings.Contains(string(metrics), `grove_router_share{contract="ads/bandit/1",release="v2"}`) {
		t.Error("/metrics has no grove_router_share of v2")
	}
	t.Logf("served %v; shares v1 %.3f v2 %.3f v3 %.3f; reward means v1 %.3f v2 %.3f v3 %.3f", served,
		st["v1"].Grove.TrafficShare, st["v2"].Grove.TrafficShare, st["v3"].Grove.TrafficShare, *v1.Mean, *v2.Mean, *v3.Mean)

	// The gates stay in charge: v2 made invalid gets nothing at once. The
	// same config puts the bandit's next update an hour away, so the share
	// falling within the wait below is the gates', not an update's.
	b.Put(t, "model_config.json", banditModelConfig(`{"never_valid": {}}`, "1h"))
	g.waitFor("v2 invalid and without traffic", 10*time.Second, func() bool {
		st = g.banditStats(contract)
		return st["v2"].Grove.TrafficShare == 0 && st["v1"].Grove.TrafficShare+st["v3"].Grove.TrafficShare > 0.999
	})
}
