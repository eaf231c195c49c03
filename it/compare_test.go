package it

import (
	"encoding/json"
	"fmt"
	"io"
	"math"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/groveml/grove/logging"
	"github.com/groveml/grove/logging/kafkatest"
)

// compareModel reads a model of it/testdata/compare (make_models.py).
func compareModel(t *testing.T, name string) []byte {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(repoRoot(), "it", "testdata", "compare", name))
	if err != nil {
		t.Fatal(err)
	}
	return data
}

// compareWindow is the part of a comparison window the test reads.
type compareWindow struct {
	Executions      int64    `json:"executions"`
	Errors          int64    `json:"errors"`
	ChampionFailed  int64    `json:"champion_failed"`
	P50Ratio        float64  `json:"p50_ratio"`
	P99Ratio        float64  `json:"p99_ratio"`
	MeanAbsDiff     float64  `json:"mean_abs_diff"`
	MaxAbsDiff      float64  `json:"max_abs_diff"`
	WithinTolerance float64  `json:"within_tolerance"`
	Agreement       *float64 `json:"agreement"`
	Mismatches      int64    `json:"mismatches"`
	Outputs         []struct {
		Name string `json:"name"`
		Rows int64  `json:"rows"`
	} `json:"outputs"`
}

// comparisonDoc is a servable's comparison in the stats.
type comparisonDoc struct {
	Tolerance  float64       `json:"tolerance"`
	N          int           `json:"n"`
	SinceStart compareWindow `json:"since_start"`
	LastN      compareWindow `json:"last_n"`
	Last5m     compareWindow `json:"last_5m"`
}

// comparisons reads the comparison of each servable of a contract from
// its stats (nil for servables without one).
func (g *grove) comparisons(contract string) map[string]*comparisonDoc {
	g.t.Helper()
	code, raw := g.get("/" + contract + "/stats")
	var doc []struct {
		Grove struct {
			Release    string         `json:"release_version"`
			Comparison *comparisonDoc `json:"comparison"`
		}
	}
	if code != http.StatusOK || json.Unmarshal(raw, &doc) != nil {
		g.t.Fatalf("stats of %s: HTTP %d %s", contract, code, raw)
	}
	out := map[string]*comparisonDoc{}
	for _, s := range doc {
		out[s.Grove.Release] = s.Grove.Comparison
	}
	return out
}

// A contract with a champion and two shadow challengers, one answering as
// the champion does and one whose answers are shifted by 0.2, scored
// through ForestFlow's API: the stats show each challenger's difference,
// /metrics too, and the prediction log's shadow events name the user
// request each was compared with.
//
// Budget: 10 s.
func TestShadowChallengersAreComparedWithTheChampion(t *testing.T) {
	t.Parallel()
	emb := startBroker(t, "127.0.0.1:0")
	b := newDirBucket(t)
	b.Put(t, "champion/model.pt", compareModel(t, "score.pt"))
	b.Put(t, "same/model.pt", compareModel(t, "score.pt"))
	b.Put(t, "shifted/model.pt", compareModel(t, "score_shifted.pt"))
	b.Put(t, "model_config.json", []byte(`{"model_metadata": [{"model_path": "champion/"}, {"model_path": "same/"}, {"model_path": "shifted/"}],
 "contracts": [{"organization": "ads", "project": "cmp", "contract_number": 1,
   "servables": [
     {"release_version": "v1", "model_path": "champion/", "logging": {"log_level": "FULL"}},
     {"release_version": "v2", "model_path": "same/", "validity": [{"never_valid": {}}], "shadow": {"sample_rate": 1.0}, "logging": {"log_level": "FULL"}},
     {"release_version": "v3", "model_path": "shifted/", "validity": [{"never_valid": {}}], "shadow": {"sample_rate": 1.0}, "logging": {"log_level": "FULL"}}]}]}`))
	cfg := kafkaConfig(emb.Addr(), "proto", "shadow_compare_tolerance: 0.05\nshadow_compare_window: 100\nshadow_queue: 64\nshadow_timeout: 2m\n")
	g := startGrove(t, b.URL(), nil, writeServerConfig(t, cfg)...)

	const n = 20
	for i := range n {
		// Two rows of four features; the row sums straddle 0 so that the
		// champion's scores lie on both sides of 0.5.
		x := float64(i-n/2) / 10
		body := fmt.Sprintf(`{"schema":[{"type":"Float32","fields":["a","b","c","d"]}],"datum":[`+
			`{"tensors":[{"Float32":{"data":[%v,0.1,-0.2,0.05]}}]},{"tensors":[{"Float32":{"data":[%v,-0.3,0.2,0]}}]}]}`, x, -2*x)
		req, err := http.NewRequest(http.MethodPost, g.url+"/ads/cmp/1/score", strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("X-Request-Id", "cmp-"+strconv.Itoa(i))
		resp, err := client.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		raw, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK || !strings.Contains(string(raw), `"releaseVersion":"v1"`) {
			t.Fatalf("score %d: HTTP %d %s", i, resp.StatusCode, raw)
		}
		// One request at a time through the shadow worker: a copy that
		// finds it busy is shed by design, and the counts below are exact.
		// The worker runs at nice 19: on a machine busy with other tests
		// its copy may wait seconds for a core (once over 10 s), longer
		// than the default shadow_timeout (1 s) after which a copy is
		// dropped for good, hence shadow_timeout: 2m.
		g.waitFor(fmt.Sprintf("comparison %d", i+1), 30*time.Second, func() bool {
			c := g.comparisons("ads/cmp/1")
			return c["v2"] != nil && c["v3"] != nil && c["v2"].SinceStart.Executions == int64(i+1) && c["v3"].SinceStart.Executions == int64(i+1)
		})
	}

	c := g.comparisons("ads/cmp/1")
	if c["v1"] != nil {
		t.Errorf("the champion has a comparison: %+v", c["v1"])
	}
	same, shifted := c["v2"], c["v3"]
	if same.Tolerance != 0.05 || same.N != 100 {
		t.Errorf("tolerance %v, n %d: want the grove.yaml settings 0.05 and 100", same.Tolerance, same.N)
	}
	for name, w := range map[string]compareWindow{"since start": same.SinceStart, "last n": same.LastN, "last 5m": same.Last5m} {
		if w.Executions != n || w.Errors != 0 || w.ChampionFailed != 0 || w.Mismatches != 0 || w.MeanAbsDiff != 0 || w.MaxAbsDiff != 0 ||
			w.WithinTolerance != 1 || w.Agreement == nil || *w.Agreement != 1 || len(w.Outputs) != 1 || w.Outputs[0].Rows != 2*n || w.P50Ratio <= 0 {
			t.Errorf("the same model, %s: %+v", name, w)
		}
	}
	s := shifted.SinceStart
	if s.Executions != n || s.Errors != 0 || s.Mismatches != 0 || math.Abs(s.MeanAbsDiff-0.2) > 1e-6 || math.Abs(s.MaxAbsDiff-0.2) > 1e-6 ||
		s.WithinTolerance != 0 || s.Agreement == nil || *s.Agreement >= 1 || *s.Agreement <= 0 || s.P99Ratio <= 0 {
		t.Errorf("the shifted model: %+v", s)
	}

	_, metrics := g.get("/metrics")
	re := regexp.MustCompile(`grove_shadow_compare_mean_abs_diff\{contract="ads/cmp/1",output="[^"]*",release="v3",window="since_start"\} (\S+)`)
	if m := re.FindSubmatch(metrics); m == nil {
		t.Errorf("/metrics has no mean difference of v3:\n%s", metrics)
	} else if v, _ := strconv.ParseFloat(string(m[1]), 64); math.Abs(v-0.2) > 1e-6 {
		t.Errorf("/metrics: v3's mean difference %v, want 0.2", v)
	}
	if !strings.Contains(string(metrics), `grove_shadow_compare_executions{contract="ads/cmp/1",release="v2",window="last_n"} 20`) {
		t.Errorf("/metrics has no execution count of v2")
	}

	// The prediction log: 20 served events and 40 shadow events, each
	// naming the request whose answer it was compared with.
	recs := kafkatest.ReadUntil(t, emb.Addr(), logTopic, 30*time.Second, func(r []*kgo.Record) bool { return len(r) >= 3*n })
	shadows := 0
	for _, r := range recs {
		ev, err := logging.Decode(r.Value, r.Headers)
		if err != nil {
			t.Fatal(err)
		}
		if ev.GetServed() {
			if ev.GetComparison() != nil || ev.GetComparedRequestId() != "" {
				t.Errorf("served event carries a comparison: %v", ev)
			}
			continue
		}
		shadows++
		cmp := ev.GetComparison()
		if !strings.HasPrefix(ev.GetRequestId(), "cmp-") || ev.GetComparedRequestId() != ev.GetRequestId() ||
			ev.GetComparedReleaseVersion() != "v1" || cmp.GetChampionFailed() || len(cmp.GetOutputs()) != 1 || cmp.GetTolerance() != 0.05 {
			t.Errorf("shadow event %v", ev)
			continue
		}
		want := map[string]float64{"same/": 0, "shifted/": 0.2}[ev.GetModelPath()]
		if o := cmp.GetOutputs()[0]; math.Abs(o.GetMeanAbsDiff()-want) > 1e-6 || o.GetRows() != 2 || !o.GetScore() {
			t.Errorf("shadow event of %s for %s: output %v, want a mean difference of %v", ev.GetModelPath(), ev.GetRequestId(), o, want)
		}
	}
	if shadows != 2*n {
		t.Errorf("%d shadow events, want %d", shadows, 2*n)
	}
	// grove logs tail prints the new fields.
	out, _ := runGrove(t, 0, "logs", "tail", "--from-beginning", "--model", "shifted/", "--brokers", emb.Addr(), "--topic", logTopic)
	if got := len(regexp.MustCompile(`"compared_request_id":\s*"cmp-\d+"`).FindAllString(out, -1)); got != n {
		t.Errorf("grove logs tail --model shifted/:\n%s", out)
	}
}
