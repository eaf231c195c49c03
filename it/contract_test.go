package it

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	graphpipe "github.com/oracle/graphpipe-go"
)

// scoreBody is a ForestFlow InferenceRequest with expected.json's pctr input (2 rows of 64 Float32).
func scoreBody(t *testing.T, exp map[string]expectedModel) string {
	t.Helper()
	in := exp["pctr_v1"].Inputs[0]
	fields := make([]string, 64)
	for i := range fields {
		fields[i] = `"f` + strings.Repeat("x", i%3) + string(rune('a'+i%26)) + `"`
	}
	var datums []string
	for r := 0; r < 2; r++ {
		vals, _ := json.Marshal(in.Data[r*64 : (r+1)*64])
		datums = append(datums, `{"tensors":[{"Float32":{"data":`+string(vals)+`}}]}`)
	}
	return `{"schema":[{"type":"Float32","fields":[` + strings.Join(fields, ",") + `]}],"datum":[` + strings.Join(datums, ",") + `],"configs":{"user_id":"u1"}}`
}

func TestContractServesChampionWhileShadowChallengerIsCounted(t *testing.T) {
	exp := loadExpected(t)
	b := newDirBucket(t)
	b.Put(t, "pctr_v1/model.pt", exampleModel(t, "pctr_v1"))
	b.Put(t, "pctr_v2/model.pt", exampleModel(t, "pctr_v2"))
	b.Put(t, "model_config.json", []byte(`{"model_metadata": [{"model_path": "pctr_v1/"}, {"model_path": "pctr_v2/"}],
 "contracts": [{"organization": "ads", "project": "pctr", "contract_number": 1, "router": "fair",
   "servables": [
     {"release_version": "v1", "model_path": "pctr_v1/", "validity": [{"immediately_valid": {}}]},
     {"release_version": "v2", "model_path": "pctr_v2/", "validity": [{"never_valid": {}}], "shadow": {"sample_rate": 1.0}}]}]}`))
	g := startGrove(t, b.URL(), nil)

	type prediction struct {
		Prediction struct {
			FQRV struct {
				ReleaseVersion string `json:"releaseVersion"`
			} `json:"fqrv"`
			Datum []struct {
				Tensors []map[string]struct {
					Data []float64 `json:"data"`
				} `json:"tensors"`
			} `json:"datum"`
		} `json:"Prediction"`
	}
	body := scoreBody(t, exp)
	for i := range 20 {
		resp, err := client.Post(g.url+"/ads/pctr/1/score", "application/json", strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		raw, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		var p prediction
		if resp.StatusCode != http.StatusOK || json.Unmarshal(raw, &p) != nil {
			t.Fatalf("score: HTTP %d %s", resp.StatusCode, raw)
		}
		if p.Prediction.FQRV.ReleaseVersion != "v1" || len(p.Prediction.Datum) != 2 {
			t.Fatalf("answered by %q with %d datums, want the champion v1 with 2: %s", p.Prediction.FQRV.ReleaseVersion, len(p.Prediction.Datum), raw)
		}
		got := []float64{p.Prediction.Datum[0].Tensors[0]["Float32"].Data[0], p.Prediction.Datum[1].Tensors[0]["Float32"].Data[0]}
		checkClose(t, "champion output", got, exp["pctr_v1"].Outputs[0].Data, 1e-5)
		// Wait for this request's shadow copy before the next request: a copy
		// that finds the shadow worker busy is shed by design, and an empty
		// queue makes the count below exact however busy the machine is.
		g.waitFor(fmt.Sprintf("shadow execution %d on the challenger", i+1), 10*time.Second, func() bool {
			return g.stats("ads/pctr/1")["v2"].ShadowExecutions >= int64(i+1)
		})
	}
	// The challenger ran a shadow copy of every request (sample rate 1).
	g.waitFor("20 shadow executions on the challenger", 10*time.Second, func() bool {
		_, m := g.get("/metrics")
		return strings.Contains(string(m), `grove_model_requests_total{api="forestflow-shadow",model="pctr_v2/",outcome="ok"} 20`)
	})
	// Scoring the challenger directly answers with its own outputs.
	resp, err := client.Post(g.url+"/ads/pctr/1/v2/score", "application/json", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	raw, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || !strings.Contains(string(raw), `"releaseVersion":"v2"`) {
		t.Fatalf("direct release score: HTTP %d %s", resp.StatusCode, raw)
	}
	// Stats: the champion has all the traffic share, the challenger none but 20 shadow executions.
	_, raw = g.get("/ads/pctr/1/stats")
	var stats struct {
		Servables []struct {
			Release          string  `json:"release_version"`
			Valid            bool    `json:"valid"`
			PhaseInPct       float64 `json:"phase_in_pct"`
			TrafficShare     float64 `json:"traffic_share"`
			Served           int64   `json:"served"`
			ShadowExecutions int64   `json:"shadow_executions"`
		} `json:"servables"`
	}
	if err := json.Unmarshal(raw, &stats); err != nil || len(stats.Servables) != 2 {
		t.Fatalf("stats %s: %v", raw, err)
	}
	if v1, v2 := stats.Servables[0], stats.Servables[1]; !v1.Valid || v1.TrafficShare != 1 || v1.PhaseInPct != 100 || v1.Served < 20 ||
		v2.Valid || v2.TrafficShare != 0 || v2.ShadowExecutions != 20 {
		t.Errorf("stats %s", raw)
	}
	if _, list := g.get("/contracts/list"); !strings.Contains(string(list), `"ads/pctr/1"`) {
		t.Errorf("/contracts/list = %s", list)
	}
	for path, want := range map[string]int{"/ads/pctr/9/score": 404, "/ads/pctr/1/v9/score": 404} {
		resp, err := client.Post(g.url+path, "application/json", strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != want {
			t.Errorf("%s: HTTP %d, want %d", path, resp.StatusCode, want)
		}
	}
}

func TestGraphPipeClientScoresThroughTheContract(t *testing.T) {
	exp := loadExpected(t)
	b := newDirBucket(t)
	b.Put(t, "pctr_v1/model.pt", exampleModel(t, "pctr_v1"))
	b.Put(t, "pctr_v2/model.pt", exampleModel(t, "pctr_v2"))
	b.Put(t, "model_config.json", []byte(`{"model_metadata": [{"model_path": "pctr_v1/"}, {"model_path": "pctr_v2/"}],
 "contracts": [{"organization": "ads", "project": "pctr", "contract_number": 1,
   "servables": [
     {"release_version": "v1", "model_path": "pctr_v1/"},
     {"release_version": "v2", "model_path": "pctr_v2/", "validity": [{"never_valid": {}}], "shadow": {}}]}]}`))
	g := startGrove(t, b.URL(), nil)

	in := exp["pctr_v1"].Inputs[0]
	rows := make([][]float32, 2)
	for r := range rows {
		for _, v := range in.Data[r*64 : (r+1)*64] {
			rows[r] = append(rows[r], float32(v))
		}
	}
	outs, err := graphpipe.MultiRemote(http.DefaultClient, g.url+"/ads/pctr/1/gp", []interface{}{rows}, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	got, ok := outs[0].([][]float32)
	if len(outs) != 1 || !ok || len(got) != 2 {
		t.Fatalf("GraphPipe outputs %#v", outs)
	}
	checkClose(t, "GraphPipe output", []float64{float64(got[0][0]), float64(got[1][0])}, exp["pctr_v1"].Outputs[0].Data, 1e-5)
	g.waitFor("the shadow execution of the GraphPipe request", 10*time.Second, func() bool {
		_, m := g.get("/metrics")
		return strings.Contains(string(m), `grove_model_requests_total{api="graphpipe-shadow",model="pctr_v2/",outcome="ok"} 1`)
	})
	if _, err := graphpipe.MultiRemote(http.DefaultClient, g.url+"/ads/pctr/7/gp", []interface{}{rows}, nil, nil); err == nil {
		t.Error("an unknown contract answered without an error")
	}
}
