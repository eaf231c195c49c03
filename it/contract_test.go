package it

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	flatbuffers "github.com/google/flatbuffers/go"
	graphpipe "github.com/oracle/graphpipe-go"
	gpfb "github.com/oracle/graphpipe-go/graphpipefb"
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

// Budget: 10 s.
func TestContractServesChampionWhileShadowChallengerIsCounted(t *testing.T) {
	t.Parallel()
	exp := loadExpected(t)
	b := newDirBucket(t)
	b.Put(t, "pctr_v1/model.pt", exampleModel(t, "pctr_v1"))
	b.Put(t, "pctr_v2/model.pt", exampleModel(t, "pctr_v2"))
	b.Put(t, "model_config.json", []byte(`{"model_metadata": [{"model_path": "pctr_v1/"}, {"model_path": "pctr_v2/"}],
 "contracts": [{"organization": "ads", "project": "pctr", "contract_number": 1, "router": "fair",
   "servables": [
     {"release_version": "v1", "model_path": "pctr_v1/", "validity": [{"immediately_valid": {}}]},
     {"release_version": "v2", "model_path": "pctr_v2/", "validity": [{"never_valid": {}}], "shadow": {"sample_rate": 1.0}}]}]}`))
	g := startGrove(t, b.URL(), nil, "--shadow-timeout", "2m")

	body := scoreBody(t, exp)
	for i := range 20 {
		resp, err := client.Post(g.url+"/ads/pctr/1/score", "application/json", strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		raw, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		var p ffPrediction
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
		g.waitFor(fmt.Sprintf("shadow execution %d on the challenger", i+1), 30*time.Second, func() bool {
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
	// Stats: the champion has all the traffic share, the challenger none but
	// 20 shadow executions; ForestFlow's ServableMetrics say the same.
	st := g.stats("ads/pctr/1")
	if v1, v2 := st["v1"], st["v2"]; !v1.Valid || v1.TrafficShare != 1 || v1.PhaseInPct != 100 || v1.Served != 20 ||
		v2.Valid || v2.TrafficShare != 0 || v2.ShadowExecutions != 20 {
		t.Errorf("stats %+v", st)
	}
	if _, list := g.get("/contracts/list"); !strings.Contains(string(list), `"Contracts": {`) ||
		!strings.Contains(string(list), `"contractNumber": 1`) || !strings.Contains(string(list), `"organization": "ads"`) {
		t.Errorf("/contracts/list = %s", list)
	}
	if code, raw := g.get("/ads/pctr/9/stats"); code != http.StatusNotFound || !strings.Contains(string(raw), `"UnknownContract"`) {
		t.Errorf("stats of an unknown contract: HTTP %d %s", code, raw)
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

// Budget: 10 s.
func TestGraphPipeClientScoresThroughTheContract(t *testing.T) {
	t.Parallel()
	exp := loadExpected(t)
	b := newDirBucket(t)
	b.Put(t, "pctr_v1/model.pt", exampleModel(t, "pctr_v1"))
	b.Put(t, "pctr_v2/model.pt", exampleModel(t, "pctr_v2"))
	onnxModel, err := os.ReadFile(filepath.Join(repoRoot(), "examples", "bucket", "pctr_onnx", "model.onnx"))
	if err != nil {
		t.Fatal(err)
	}
	b.Put(t, "pctr_onnx/model.onnx", onnxModel)
	b.Put(t, "model_config.json", []byte(`{"model_metadata": [{"model_path": "pctr_v1/"}, {"model_path": "pctr_v2/"}, {"model_path": "pctr_onnx/"}],
 "contracts": [{"organization": "ads", "project": "pctr", "contract_number": 1,
   "servables": [
     {"release_version": "v1", "model_path": "pctr_v1/"},
     {"release_version": "v2", "model_path": "pctr_v2/", "validity": [{"never_valid": {}}], "shadow": {}}]},
  {"organization": "ads", "project": "pctr", "contract_number": 2,
   "servables": [{"release_version": "onnx1", "model_path": "pctr_onnx/"}]}]}`))
	g := startGrove(t, b.URL(), nil, "--shadow-timeout", "2m")

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

	// graphpipe.Remote, the client's one-input one-output call, with and
	// without naming the output; the ONNX contract by its input's name.
	for _, c := range []struct{ contract, input, output string }{{"1", "", ""}, {"1", "", "output_0"}, {"2", "x", "output_0"}} {
		out, err := graphpipe.Remote(http.DefaultClient, g.url+"/ads/pctr/"+c.contract+"/gp", rows, c.input, c.output)
		if err != nil {
			t.Fatalf("Remote %+v: %v", c, err)
		}
		got, ok := out.([][]float32)
		if !ok || len(got) != 2 {
			t.Fatalf("Remote %+v: %#v", c, out)
		}
		checkClose(t, "Remote output", []float64{float64(got[0][0]), float64(got[1][0])}, exp["pctr_v1"].Outputs[0].Data, 1e-5)
	}
	// ForestFlow's score API on the ONNX contract: its Float32 schema
	// entry reaches the model's input "x" by position.
	if v := g.scoreOnce("ads/pctr/2", scoreBody(t, exp), nil); v != "onnx1" {
		t.Errorf("ForestFlow score on the ONNX contract answered by %q", v)
	}
	// An unknown output name is an error naming the model's outputs.
	_, err = graphpipe.MultiRemote(http.DefaultClient, g.url+"/ads/pctr/1/gp", []interface{}{rows}, nil, []string{"nope"})
	if err == nil || !strings.Contains(err.Error(), "output_0") {
		t.Errorf("unknown output name: %v", err)
	}

	// Metadata describes the serving release's model: TorchScript records
	// input names but no types or shapes (GraphPipe's Null type, no dims),
	// ONNX Runtime records all three, with -1 for the batch.
	for _, c := range []struct{ contract, version, runtime, inputs, outputs string }{
		{"1", "v1", "torchscript", "x Null []", "output_0 Null []"}, {"2", "onnx1", "onnx", "x Float32 [-1 64]", "output_0 Float32 [-1 1]"}} {
		md := graphPipeMetadata(t, g.url+"/ads/pctr/"+c.contract+"/gp")
		if string(md.Version()) != c.version || !strings.Contains(string(md.Description()), c.runtime) || string(md.Name()) != "ads/pctr/"+c.contract {
			t.Errorf("metadata of contract %s: name %q version %q description %q", c.contract, md.Name(), md.Version(), md.Description())
		}
		if got := graphPipeIOs(md.InputsLength(), md.Inputs); got != c.inputs {
			t.Errorf("metadata of contract %s: inputs %q, want %q", c.contract, got, c.inputs)
		}
		if got := graphPipeIOs(md.OutputsLength(), md.Outputs); got != c.outputs {
			t.Errorf("metadata of contract %s: outputs %q, want %q", c.contract, got, c.outputs)
		}
	}
}

// graphPipeMetadata sends a GraphPipe MetadataRequest, built with the
// client library's flatbuffer code, and decodes the MetadataResponse.
func graphPipeMetadata(t *testing.T, url string) *gpfb.MetadataResponse {
	t.Helper()
	b := flatbuffers.NewBuilder(64)
	gpfb.MetadataRequestStart(b)
	mr := gpfb.MetadataRequestEnd(b)
	gpfb.RequestStart(b)
	gpfb.RequestAddReqType(b, gpfb.ReqMetadataRequest)
	gpfb.RequestAddReq(b, mr)
	resp, err := client.Post(url, "application/octet-stream", bytes.NewReader(graphpipe.Serialize(b, gpfb.RequestEnd(b))))
	if err != nil {
		t.Fatal(err)
	}
	raw, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("metadata: HTTP %d %s", resp.StatusCode, raw)
	}
	return gpfb.GetRootAsMetadataResponse(raw, 0)
}

// graphPipeIOs renders a MetadataResponse's inputs or outputs as
// "name TYPE [shape]", joined by "; ".
func graphPipeIOs(n int, at func(*gpfb.IOMetadata, int) bool) string {
	var parts []string
	for i := range n {
		var io gpfb.IOMetadata
		at(&io, i)
		shape := make([]int64, io.ShapeLength())
		for j := range shape {
			shape[j] = io.Shape(j)
		}
		parts = append(parts, fmt.Sprintf("%s %s %v", io.Name(), gpfb.EnumNamesType[int(io.Type())], shape))
	}
	return strings.Join(parts, "; ")
}

// TestStickyKeyKeepsEachUserOnOneRelease splits a contract 50/50 between
// two releases with sticky_key user_id: every request of one user goes to
// the same release, by the JSON configs or by a Grove-Config-User_Id header,
// and the users as a whole reach both releases.
//
// Budget: 10 s.
func TestStickyKeyKeepsEachUserOnOneRelease(t *testing.T) {
	t.Parallel()
	exp := loadExpected(t)
	b := newDirBucket(t)
	putModels(t, b)
	b.Put(t, "model_config.json", []byte(`{"model_metadata": [{"model_path": "pctr_v1/"}, {"model_path": "pctr_v2/"}],
 "contracts": [{"organization": "ads", "project": "pctr", "contract_number": 1, "router": "fair", "sticky_key": "user_id",
   "servables": [{"release_version": "v1", "model_path": "pctr_v1/"}, {"release_version": "v2", "model_path": "pctr_v2/"}]}]}`))
	g := startGrove(t, b.URL(), nil)
	g.waitFor("both releases ready", 30*time.Second, func() bool {
		st := g.stats("ads/pctr/1")
		return st["v1"].Ready && st["v2"].Ready
	})
	body := scoreBody(t, exp)
	score := func(user string, header bool) string {
		if header {
			return g.scoreOnce("ads/pctr/1", strings.Replace(body, `"configs":{"user_id":"u1"}`, `"configs":{}`, 1),
				http.Header{"Grove-Config-User_id": {user}})
		}
		return g.scoreOnce("ads/pctr/1", strings.Replace(body, `"user_id":"u1"`, `"user_id":"`+user+`"`, 1), nil)
	}
	reached := map[string]int{}
	for u := range 16 {
		user := fmt.Sprintf("user-%d", u)
		first := score(user, false)
		for i := range 6 {
			if got := score(user, i%2 == 1); got != first {
				t.Fatalf("%s went to %s, then to %s (request %d)", user, first, got, i+2)
			}
		}
		reached[first]++
	}
	if reached["v1"] == 0 || reached["v2"] == 0 {
		t.Errorf("16 users at a 50/50 split all went to one release: %v", reached)
	}
}

// ffPrediction is the part of a ForestFlow score answer the tests read:
// the release that answered, the outputs' schema and each datum's output
// values by type.
type ffPrediction struct {
	Prediction struct {
		FQRV struct {
			ReleaseVersion string `json:"releaseVersion"`
		} `json:"fqrv"`
		Schema []struct {
			Type   string   `json:"type"`
			Fields []string `json:"fields"`
		} `json:"schema"`
		Datum []struct {
			Tensors []map[string]struct {
				Data []float64 `json:"data"`
			} `json:"tensors"`
		} `json:"datum"`
	} `json:"Prediction"`
}
