package it

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/groveml/grove/api/oip/oippb"
	"github.com/groveml/grove/api/sidecar/sidecarpb"
)

// oipBucket holds pctr_v1/ and two versions of pcvr (pcvr/2/, pcvr/3/).
func oipBucket(t *testing.T) *dirBucket {
	b := newDirBucket(t)
	b.Put(t, "pctr_v1/model.pt", exampleModel(t, "pctr_v1"))
	b.Put(t, "pcvr/2/model.pt", exampleModel(t, "pcvr"))
	b.Put(t, "pcvr/3/model.pt", exampleModel(t, "pcvr"))
	putConfig(t, b, modelEntry{Path: "pctr_v1/"}, modelEntry{Path: "pcvr/2/"}, modelEntry{Path: "pcvr/3/"})
	return b
}

// rawLE encodes values as little-endian raw contents of the datatype.
func rawLE(datatype string, vals []float64) []byte {
	var out []byte
	for _, v := range vals {
		switch datatype {
		case "FP32":
			out = binary.LittleEndian.AppendUint32(out, math.Float32bits(float32(v)))
		case "FP64":
			out = binary.LittleEndian.AppendUint64(out, math.Float64bits(v))
		case "INT64":
			out = binary.LittleEndian.AppendUint64(out, uint64(int64(v)))
		}
	}
	return out
}

// fromRawLE decodes little-endian raw contents.
func fromRawLE(t *testing.T, datatype string, raw []byte) []float64 {
	var out []float64
	switch datatype {
	case "FP32":
		for i := 0; i+4 <= len(raw); i += 4 {
			out = append(out, float64(math.Float32frombits(binary.LittleEndian.Uint32(raw[i:]))))
		}
	case "FP64":
		for i := 0; i+8 <= len(raw); i += 8 {
			out = append(out, math.Float64frombits(binary.LittleEndian.Uint64(raw[i:])))
		}
	default:
		t.Fatalf("datatype %s", datatype)
	}
	return out
}

// TestOIPGRPCServesModelsByNameAndVersion checks the OIP gRPC service with
// the generated client: health, metadata, version resolution, ModelInfer
// with raw and typed contents matching Python, output filtering, errors,
// and grpcurl through reflection.
//
// Budget: 10 s.
func TestOIPGRPCServesModelsByNameAndVersion(t *testing.T) {
	t.Parallel()
	exp := loadExpected(t)
	g := startGrove(t, oipBucket(t).URL(), nil)
	c := oippb.NewGRPCInferenceServiceClient(g.dial())
	ctx := withTimeout(t, time.Minute)

	if r, err := c.ServerLive(ctx, &oippb.ServerLiveRequest{}); err != nil || !r.Live {
		t.Fatalf("ServerLive: %v %v", r, err)
	}
	if r, err := c.ServerReady(ctx, &oippb.ServerReadyRequest{}); err != nil || !r.Ready {
		t.Fatalf("ServerReady: %v %v", r, err)
	}
	if r, err := c.ServerMetadata(ctx, &oippb.ServerMetadataRequest{}); err != nil || r.Name != "grove" || strings.Join(r.Extensions, ",") != "binary_tensor_data,model_configuration,statistics" {
		t.Fatalf("ServerMetadata: %v %v", r, err)
	}
	md, err := c.ModelMetadata(ctx, &oippb.ModelMetadataRequest{Name: "pcvr"})
	if err != nil {
		t.Fatal(err)
	}
	if md.Name != "pcvr" || !slices.Equal(md.Versions, []string{"3", "2"}) || md.Platform != "pytorch_libtorch" || len(md.Inputs) != 2 {
		t.Errorf("ModelMetadata(pcvr) = %v", md)
	}
	for _, c2 := range []struct {
		name, version string
		ready         bool
	}{{"pcvr", "", true}, {"pcvr", "2", true}, {"pcvr", "4", false}, {"pctr_v1", "1", true}, {"nope", "", false}} {
		r, err := c.ModelReady(ctx, &oippb.ModelReadyRequest{Name: c2.name, Version: c2.version})
		if err != nil || r.Ready != c2.ready {
			t.Errorf("ModelReady(%s, %q) = %v, %v; want %v", c2.name, c2.version, r, err, c2.ready)
		}
	}

	// pcvr with raw contents, no version: the highest (3) answers.
	in := exp["pcvr"].Inputs
	req := &oippb.ModelInferRequest{ModelName: "pcvr", Id: "req-1",
		Inputs: []*oippb.ModelInferRequest_InferInputTensor{
			{Name: "features", Datatype: "FP32", Shape: in[0].Shape},
			{Name: "category", Datatype: "INT64", Shape: in[1].Shape}},
		RawInputContents: [][]byte{rawLE("FP32", in[0].Data), rawLE("INT64", in[1].Data)}}
	resp, err := c.ModelInfer(ctx, req)
	if err != nil {
		t.Fatal(err)
	}
	if resp.ModelVersion != "3" || resp.Id != "req-1" || len(resp.Outputs) != 2 || len(resp.RawOutputContents) != 2 {
		t.Fatalf("ModelInfer(pcvr): %v", resp)
	}
	for i, o := range resp.Outputs {
		want := exp["pcvr"].Outputs[i]
		if !slices.Equal(o.Shape, want.Shape) {
			t.Errorf("output %s shape %v, want %v", o.Name, o.Shape, want.Shape)
		}
		checkClose(t, "pcvr "+o.Name, fromRawLE(t, o.Datatype, resp.RawOutputContents[i]), want.Data, 1e-5)
	}
	// Only the requested output, at version 2.
	req.ModelVersion = "2"
	req.Outputs = []*oippb.ModelInferRequest_InferRequestedOutputTensor{{Name: "output_1"}}
	resp, err = c.ModelInfer(ctx, req)
	if err != nil || resp.ModelVersion != "2" || len(resp.Outputs) != 1 || resp.Outputs[0].Name != "output_1" || resp.Outputs[0].Datatype != "FP64" {
		t.Fatalf("filtered ModelInfer: %v %v", resp, err)
	}

	// pctr_v1 with typed fp32_contents.
	x := exp["pctr_v1"].Inputs[0]
	vals := make([]float32, len(x.Data))
	for i, v := range x.Data {
		vals[i] = float32(v)
	}
	resp, err = c.ModelInfer(ctx, &oippb.ModelInferRequest{ModelName: "pctr_v1", Inputs: []*oippb.ModelInferRequest_InferInputTensor{
		{Name: "x", Datatype: "FP32", Shape: x.Shape, Contents: &oippb.InferTensorContents{Fp32Contents: vals}}}})
	if err != nil {
		t.Fatal(err)
	}
	checkClose(t, "pctr_v1 typed", fromRawLE(t, "FP32", resp.RawOutputContents[0]), exp["pctr_v1"].Outputs[0].Data, 1e-5)

	for _, bad := range []struct {
		req  *oippb.ModelInferRequest
		code codes.Code
		has  string
	}{
		{&oippb.ModelInferRequest{ModelName: "nope"}, codes.NotFound, "unknown model: 'nope'"},
		{&oippb.ModelInferRequest{ModelName: "pcvr", ModelVersion: "9"}, codes.NotFound, "version 9"},
		{&oippb.ModelInferRequest{ModelName: "pctr_v1", Inputs: []*oippb.ModelInferRequest_InferInputTensor{{Name: "x", Datatype: "BYTES", Shape: []int64{1}}}}, codes.InvalidArgument, "0 values in bytes_contents, expected 1"},
		{&oippb.ModelInferRequest{ModelName: "pctr_v1", Inputs: []*oippb.ModelInferRequest_InferInputTensor{{Name: "x", Datatype: "FP32", Shape: []int64{1, 64}}},
			RawInputContents: [][]byte{make([]byte, 12)}}, codes.InvalidArgument, "12 bytes"},
		{&oippb.ModelInferRequest{ModelName: "pctr_v1", Inputs: []*oippb.ModelInferRequest_InferInputTensor{{Name: "x", Datatype: "FP32", Shape: []int64{1, 3}}},
			RawInputContents: [][]byte{make([]byte, 12)}}, codes.InvalidArgument, "cannot be multiplied"}, // the caller's mistake, found by libtorch (no signature known)
		{&oippb.ModelInferRequest{ModelName: "pctr_v1", Inputs: []*oippb.ModelInferRequest_InferInputTensor{{Name: "x", Datatype: "FP32", Shape: []int64{1, 64}}},
			RawInputContents: [][]byte{make([]byte, 256)}, Outputs: []*oippb.ModelInferRequest_InferRequestedOutputTensor{{Name: "y"}}}, codes.InvalidArgument, "output_0"},
	} {
		_, err := c.ModelInfer(ctx, bad.req)
		if status.Code(err) != bad.code || !strings.Contains(status.Convert(err).Message(), bad.has) {
			t.Errorf("ModelInfer(%v): %v, want %v with %q", bad.req, err, bad.code, bad.has)
		}
	}

	// grpcurl, schema from reflection.
	out, err := exec.CommandContext(ctx, grpcurl(t), "-plaintext", "-d", `{"name": "pcvr"}`, g.grpc, "inference.GRPCInferenceService/ModelMetadata").CombinedOutput()
	if err != nil || !strings.Contains(string(out), `"pytorch_libtorch"`) {
		t.Errorf("grpcurl ModelMetadata: %v\n%s", err, out)
	}
}

// TestONNXModelAnswersLikeTorchScriptOnEveryProtocol serves the same pCTR
// weights as TorchScript (pctr_v1/) and ONNX (pctr_onnx/): over B&A REST
// (inputs by tensor_name for ONNX), the sidecar's Predict, OIP REST and OIP gRPC, both
// answer Python's expected outputs to 1e-5.
//
// Budget: 10 s.
func TestONNXModelAnswersLikeTorchScriptOnEveryProtocol(t *testing.T) {
	t.Parallel()
	exp := loadExpected(t)
	b := newDirBucket(t)
	b.Put(t, "pctr_v1/model.pt", exampleModel(t, "pctr_v1"))
	onnxModel, err := os.ReadFile(filepath.Join(repoRoot(), "examples", "bucket", "pctr_onnx", "model.onnx"))
	if err != nil {
		t.Fatal(err)
	}
	b.Put(t, "pctr_onnx/model.onnx", onnxModel)
	putConfig(t, b, modelEntry{Path: "pctr_v1/"}, modelEntry{Path: "pctr_onnx/"})
	g := startGrove(t, b.URL(), nil)
	ctx := withTimeout(t, time.Minute)
	x := exp["pctr_v1"].Inputs[0]
	named := strings.Replace(tensorJSON(x.DataType, x.Shape, x.Data), `{`, `{"tensor_name":"x",`, 1)

	// B&A REST, one batch for both runtimes; ONNX also positionally.
	_, resp, err := g.infer(batchJSON(requestFor(exp, "pctr_v1", "pctr_v1/"), itemJSON("pctr_onnx/", named), requestFor(exp, "pctr_v1", "pctr_onnx/"),
		itemJSON("pctr_onnx/", strings.Replace(named, `"x"`, `"y"`, 1))))
	if err != nil {
		t.Fatal(err)
	}
	for i := range 3 {
		checkOutputs(t, exp, "pctr_v1", resp, i)
	}
	if e := resp.Response[3].Error; e == nil || e.ErrorType != "MODEL_EXECUTION" || !strings.Contains(e.Description, "x FLOAT [-1 64]") {
		t.Errorf("unknown input name: %+v", e)
	}

	// The sidecar's Predict, the same batch: the same JSON as REST.
	body := batchJSON(requestFor(exp, "pctr_v1", "pctr_v1/"), itemJSON("pctr_onnx/", named))
	pr, err := sidecarpb.NewInferenceServiceClient(g.dial()).Predict(ctx, &sidecarpb.PredictRequest{InputData: &sidecarpb.PredictRequest_Input{Input: []byte(body)}})
	if err != nil {
		t.Fatal(err)
	}
	var viaPredict baResponse
	if err := json.Unmarshal(pr.GetOutput(), &viaPredict); err != nil || len(viaPredict.Response) != 2 {
		t.Fatalf("Predict: %s %v", pr.GetOutput(), err)
	}
	for i := range 2 {
		checkOutputs(t, exp, "pctr_v1", viaPredict, i)
	}

	// OIP REST, JSON by input name.
	xs, _ := json.Marshal(x.Data)
	code, _, raw := oipPost(t, g, "/v2/models/pctr_onnx/infer", []byte(fmt.Sprintf(
		`{"inputs": [{"name": "x", "shape": %s, "datatype": "FP32", "data": %s}]}`, shapeJSON(x.Shape), xs)), 0)
	var rr struct {
		Outputs []struct {
			Data []float64 `json:"data"`
		} `json:"outputs"`
	}
	if code != 200 || json.Unmarshal(raw, &rr) != nil || len(rr.Outputs) != 1 {
		t.Fatalf("OIP REST infer of pctr_onnx: HTTP %d %s", code, raw)
	}
	checkClose(t, "pctr_onnx over OIP REST", rr.Outputs[0].Data, exp["pctr_v1"].Outputs[0].Data, 1e-5)

	// OIP gRPC.
	c := oippb.NewGRPCInferenceServiceClient(g.dial())
	md, err := c.ModelMetadata(ctx, &oippb.ModelMetadataRequest{Name: "pctr_onnx"})
	if err != nil || md.Platform != "onnxruntime_onnx" || len(md.Inputs) != 1 || md.Inputs[0].Name != "x" ||
		md.Inputs[0].Datatype != "FP32" || !slices.Equal(md.Inputs[0].Shape, []int64{-1, 64}) {
		t.Errorf("ModelMetadata(pctr_onnx) = %v, %v", md, err)
	}
	for _, name := range []string{"pctr_v1", "pctr_onnx"} {
		r, err := c.ModelInfer(ctx, &oippb.ModelInferRequest{ModelName: name,
			Inputs:           []*oippb.ModelInferRequest_InferInputTensor{{Name: "x", Datatype: "FP32", Shape: x.Shape}},
			RawInputContents: [][]byte{rawLE("FP32", x.Data)}})
		if err != nil {
			t.Fatalf("ModelInfer(%s): %v", name, err)
		}
		checkClose(t, name+" over OIP gRPC", fromRawLE(t, "FP32", r.RawOutputContents[0]), exp["pctr_v1"].Outputs[0].Data, 1e-5)
	}
}

// shapeJSON renders a shape as a JSON array.
func shapeJSON(shape []int64) string {
	b, _ := json.Marshal(shape)
	return string(b)
}

// oipPost posts an OIP request and returns the status, headers and body.
func oipPost(t *testing.T, g *grove, path string, body []byte, headerLen int) (int, http.Header, []byte) {
	t.Helper()
	req, err := http.NewRequest("POST", g.url+path, bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	if headerLen > 0 {
		req.Header.Set("Inference-Header-Content-Length", strconv.Itoa(headerLen))
	}
	resp, err := client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, resp.Header, raw
}

// TestOIPRESTAnswersLikeEveryOtherProtocol sends pcvr's expected input over
// OIP REST as nested JSON, flat JSON and Triton's binary tensor extension,
// over OIP gRPC and over B&A REST: every answer matches Python, and the
// binary REST and gRPC raw outputs are byte for byte the same.
//
// Budget: 10 s.
func TestOIPRESTAnswersLikeEveryOtherProtocol(t *testing.T) {
	t.Parallel()
	exp := loadExpected(t)
	g := startGrove(t, oipBucket(t).URL(), nil)
	ctx := withTimeout(t, time.Minute)
	in, want := exp["pcvr"].Inputs, exp["pcvr"].Outputs

	if _, meta := g.get("/v2"); !strings.Contains(string(meta), `"extensions":["binary_tensor_data","model_configuration","statistics"]`) {
		t.Errorf("server metadata %s", meta)
	}
	type oipResponse struct {
		ModelName    string `json:"model_name"`
		ModelVersion string `json:"model_version"`
		ID           string `json:"id"`
		Outputs      []struct {
			Name       string             `json:"name"`
			Datatype   string             `json:"datatype"`
			Shape      []int64            `json:"shape"`
			Data       []float64          `json:"data"`
			Parameters map[string]float64 `json:"parameters"`
		} `json:"outputs"`
	}
	nested := func(vals []float64, cols int) string {
		var rows []string
		for r := 0; r*cols < len(vals); r++ {
			b, _ := json.Marshal(vals[r*cols : (r+1)*cols])
			rows = append(rows, string(b))
		}
		return "[" + strings.Join(rows, ",") + "]"
	}
	flat := func(vals []float64) string { b, _ := json.Marshal(vals); return string(b) }
	for _, form := range []string{"nested", "flat"} {
		f0, f1 := nested(in[0].Data, 8), nested(in[1].Data, 1)
		if form == "flat" {
			f0, f1 = flat(in[0].Data), flat(in[1].Data)
		}
		body := fmt.Sprintf(`{"id": "r-%s", "inputs": [{"name": "features", "shape": [3, 8], "datatype": "FP32", "data": %s},
			{"name": "category", "shape": [3, 1], "datatype": "INT64", "data": %s}]}`, form, f0, f1)
		code, _, raw := oipPost(t, g, "/v2/models/pcvr/versions/2/infer", []byte(body), 0)
		var r oipResponse
		if code != 200 || json.Unmarshal(raw, &r) != nil {
			t.Fatalf("%s JSON infer: HTTP %d %s", form, code, raw)
		}
		if r.ModelName != "pcvr" || r.ModelVersion != "2" || r.ID != "r-"+form || len(r.Outputs) != 2 {
			t.Fatalf("%s JSON infer: %s", form, raw)
		}
		for i, o := range r.Outputs {
			checkClose(t, form+" "+o.Name, o.Data, want[i].Data, 1e-5)
		}
	}

	// Binary extension: inputs and outputs as raw little-endian bytes.
	f, c := rawLE("FP32", in[0].Data), rawLE("INT64", in[1].Data)
	header := fmt.Sprintf(`{"inputs": [{"name": "features", "shape": [3, 8], "datatype": "FP32", "parameters": {"binary_data_size": %d}},
		{"name": "category", "shape": [3, 1], "datatype": "INT64", "parameters": {"binary_data_size": %d}}],
		"parameters": {"binary_data_output": true}}`, len(f), len(c))
	body := append(append([]byte(header), f...), c...)
	code, h, raw := oipPost(t, g, "/v2/models/pcvr/infer", body, len(header))
	if code != 200 {
		t.Fatalf("binary infer: HTTP %d %s", code, raw)
	}
	hlen, err := strconv.Atoi(h.Get("Inference-Header-Content-Length"))
	if err != nil || hlen > len(raw) {
		t.Fatalf("binary infer: header length %q for %d bytes", h.Get("Inference-Header-Content-Length"), len(raw))
	}
	var r oipResponse
	if err := json.Unmarshal(raw[:hlen], &r); err != nil || len(r.Outputs) != 2 || r.ModelVersion != "3" {
		t.Fatalf("binary infer header %s: %v", raw[:hlen], err)
	}
	tail := raw[hlen:]
	var binOut [][]byte
	for i, o := range r.Outputs {
		n := int(o.Parameters["binary_data_size"])
		if n == 0 || n > len(tail) {
			t.Fatalf("output %s: binary_data_size %d with %d bytes left", o.Name, n, len(tail))
		}
		binOut = append(binOut, tail[:n])
		checkClose(t, "binary "+o.Name, fromRawLE(t, o.Datatype, tail[:n]), want[i].Data, 1e-5)
		tail = tail[n:]
	}

	// The same request over OIP gRPC gives the same bytes.
	gr, err := oippb.NewGRPCInferenceServiceClient(g.dial()).ModelInfer(ctx, &oippb.ModelInferRequest{ModelName: "pcvr",
		Inputs: []*oippb.ModelInferRequest_InferInputTensor{
			{Name: "features", Datatype: "FP32", Shape: in[0].Shape}, {Name: "category", Datatype: "INT64", Shape: in[1].Shape}},
		RawInputContents: [][]byte{f, c}})
	if err != nil {
		t.Fatal(err)
	}
	for i := range binOut {
		if !bytes.Equal(gr.RawOutputContents[i], binOut[i]) {
			t.Errorf("output %d: gRPC and REST binary differ", i)
		}
	}
	// And over B&A REST.
	_, ba, err := g.infer(batchJSON(requestFor(exp, "pcvr", "pcvr/3/")))
	if err != nil {
		t.Fatal(err)
	}
	checkOutputs(t, exp, "pcvr", ba, 0)

	// Errors, statistics and the repository index.
	for _, c := range []struct {
		path, body string
		code       int
		has        string
	}{
		{"/v2/models/nope/infer", `{"inputs": []}`, 404, "unknown model: 'nope'"},
		{"/v2/models/pcvr/versions/7/infer", `{"inputs": []}`, 404, "version 7"},
		{"/v2/models/pcvr/infer", `{"inputs": [{"name": "features", "shape": [1], "datatype": "UINT16", "data": [1]}]}`, 400, "UINT16"},
		{"/v2/models/pcvr/infer", `{"inputs": [{"name": "features", "shape": [2], "datatype": "FP32", "data": [1]}]}`, 400, "features"},
		{"/v2/models/pcvr/infer", `not json`, 400, ""},
	} {
		code, _, raw := oipPost(t, g, c.path, []byte(c.body), 0)
		if code != c.code || !strings.Contains(string(raw), c.has) || !strings.HasPrefix(string(raw), `{"error":`) {
			t.Errorf("POST %s %s: HTTP %d %s; want %d with %q", c.path, c.body, code, raw, c.code, c.has)
		}
	}
	var stats struct {
		ModelStats []struct {
			Name           string `json:"name"`
			Version        string `json:"version"`
			InferenceCount int64  `json:"inference_count"`
			ExecutionCount int64  `json:"execution_count"`
		} `json:"model_stats"`
	}
	_, raw = g.get("/v2/models/pcvr/versions/3/stats")
	if err := json.Unmarshal(raw, &stats); err != nil || len(stats.ModelStats) != 1 || stats.ModelStats[0].Version != "3" ||
		stats.ModelStats[0].ExecutionCount != 3 || stats.ModelStats[0].InferenceCount != 9 {
		t.Errorf("pcvr/3 stats: %s", raw)
	}
	code, _, raw = oipPost(t, g, "/v2/repository/index", []byte(`{"ready": true}`), 0)
	if code != 200 || strings.Count(string(raw), `"READY"`) != 3 {
		t.Errorf("repository index: HTTP %d %s", code, raw)
	}
	if code, _ := g.get("/v2/models/nope/ready"); code != 503 {
		t.Errorf("ready of an unknown model: HTTP %d", code)
	}

	// Health, model metadata and readiness, with and without a version.
	for _, c := range []struct {
		path string
		code int
		body string
	}{
		{"/v2/health/live", 200, `{"live":true}`},
		{"/v2/health/ready", 200, `{"ready":true}`},
		{"/v2/models/pcvr", 200, `{"name":"pcvr","versions":["3","2"],"platform":"pytorch_libtorch","inputs":[{"name":"features"`},
		{"/v2/models/pcvr/versions/2", 200, `{"name":"pcvr","versions":["3","2"],"platform":"pytorch_libtorch","inputs":[{"name":"features"`},
		{"/v2/models/pcvr/versions/9", 404, `{"error":"Request for unknown model: 'pcvr' version 9 is not found"}`},
		{"/v2/models/pcvr/ready", 200, `{"name":"pcvr","ready":true}`},
		{"/v2/models/pcvr/versions/2/ready", 200, `{"name":"pcvr","ready":true}`},
		{"/v2/models/pcvr/versions/9/ready", 503, `{"name":"pcvr","ready":false}`},
		{"/v2/nope", 404, `{"error":"no such endpoint: GET /v2/nope"}`},
	} {
		if code, raw := g.get(c.path); code != c.code || !strings.HasPrefix(string(raw), c.body) {
			t.Errorf("GET %s: HTTP %d %s, want %d starting %s", c.path, code, raw, c.code, c.body)
		}
	}
	// The outputs filter: only the named output comes back.
	filtered := fmt.Sprintf(`{"inputs": [{"name": "features", "shape": [3, 8], "datatype": "FP32", "data": %s},
		{"name": "category", "shape": [3, 1], "datatype": "INT64", "data": %s}], "outputs": [{"name": "output_1"}]}`, flat(in[0].Data), flat(in[1].Data))
	code, _, raw = oipPost(t, g, "/v2/models/pcvr/infer", []byte(filtered), 0)
	var fr oipResponse
	if code != 200 || json.Unmarshal(raw, &fr) != nil || len(fr.Outputs) != 1 || fr.Outputs[0].Name != "output_1" {
		t.Fatalf("outputs filter: HTTP %d %s", code, raw)
	}
	checkClose(t, "filtered output_1", fr.Outputs[0].Data, want[1].Data, 1e-5)
}

// TestOIPServesBoolAndUint8 runs the servables' bool/uint8 test models
// (f(mask bool [N,4], x uint8 [N,4]) = (mask AND x > 3, x + 1)) in both
// runtimes over OIP REST (JSON and binary) and gRPC, and checks that the
// B&A API refuses both types with a clear error.
//
// Budget: 10 s.
func TestOIPServesBoolAndUint8(t *testing.T) {
	t.Parallel()
	b := newDirBucket(t)
	for path, file := range map[string]string{
		"mask_onnx/model.onnx": filepath.Join("servables", "onnx", "testdata", "mask.onnx"),
		"mask_pt/model.pt":     filepath.Join("servables", "torch", "testdata", "mask.pt"),
		"bool_pt/model.pt":     filepath.Join("servables", "torch", "testdata", "bool.pt"),
	} {
		data, err := os.ReadFile(filepath.Join(repoRoot(), file))
		if err != nil {
			t.Fatal(err)
		}
		b.Put(t, path, data)
	}
	putConfig(t, b, modelEntry{Path: "mask_onnx/"}, modelEntry{Path: "mask_pt/"}, modelEntry{Path: "bool_pt/"})
	g := startGrove(t, b.URL(), nil)
	ctx := withTimeout(t, time.Minute)

	const want = `"outputs":[{"name":"%s","datatype":"BOOL","shape":[2,4],"data":[false,true,false,true,false,false,true,true]},` +
		`{"name":"%s","datatype":"UINT8","shape":[2,4],"data":[1,5,10,255,8,4,201,6]}]}`
	body := `{"inputs":[{"name":"mask","shape":[2,4],"datatype":"BOOL","data":[[true,true,false,true],[false,true,true,true]]},` +
		`{"name":"x","shape":[2,4],"datatype":"UINT8","data":[0,4,9,254,7,3,200,5]}]}`
	for model, names := range map[string][2]string{"mask_onnx": {"masked", "next"}, "mask_pt": {"output_0", "output_1"}} {
		code, _, raw := oipPost(t, g, "/v2/models/"+model+"/infer", []byte(body), 0)
		if w := fmt.Sprintf(want, names[0], names[1]); code != 200 || !strings.HasSuffix(string(raw), w) {
			t.Errorf("%s: HTTP %d %s\nwant …%s", model, code, raw, w)
		}
		// Binary in and out.
		header := `{"inputs":[{"name":"mask","shape":[1,4],"datatype":"BOOL","parameters":{"binary_data_size":4}},` +
			`{"name":"x","shape":[1,4],"datatype":"UINT8","parameters":{"binary_data_size":4}}],"parameters":{"binary_data_output":true}}`
		code, h, raw := oipPost(t, g, "/v2/models/"+model+"/infer", append([]byte(header), 1, 1, 0, 1, 0, 4, 9, 255), len(header))
		n, _ := strconv.Atoi(h.Get("Inference-Header-Content-Length"))
		if code != 200 || n <= 0 || n > len(raw) || !bytes.Equal(raw[n:], []byte{0, 1, 0, 1, 1, 5, 10, 0}) {
			t.Errorf("%s binary: HTTP %d %q", model, code, raw)
		}
		// A BOOL byte other than 0 or 1 is refused.
		code, _, raw = oipPost(t, g, "/v2/models/"+model+"/infer", append([]byte(header), 1, 2, 0, 1, 0, 4, 9, 255), len(header))
		if code != 400 || !strings.Contains(string(raw), `binary data byte 1 is 2; BOOL data must be bytes 0 (false) or 1 (true)`) {
			t.Errorf("%s bad bool byte: HTTP %d %s", model, code, raw)
		}
	}
	for _, tc := range []struct{ body, says string }{
		{`{"inputs":[{"name":"mask","shape":[1],"datatype":"BOOL","data":[1]}]}`, `input \"mask\": data[0] is a number; BOOL data must be true or false`},
		{`{"inputs":[{"name":"x","shape":[1],"datatype":"UINT8","data":[256]}]}`, `input \"x\": data[0] = 256 is out of range for UINT8 (0 to 255)`},
		{`{"inputs":[{"name":"x","shape":[1],"datatype":"UINT16","data":[1]}]}`, `datatype \"UINT16\" is not supported by Grove; supported datatypes: FP32, FP64, INT8, INT16, INT32, INT64, BOOL, UINT8, FP16, BF16, BYTES`},
	} {
		if code, _, raw := oipPost(t, g, "/v2/models/mask_onnx/infer", []byte(tc.body), 0); code != 400 || !strings.Contains(string(raw), tc.says) {
			t.Errorf("%s: HTTP %d %s, want 400 saying %s", tc.body, code, raw, tc.says)
		}
	}

	// OIP gRPC: metadata from the ONNX model, typed and raw contents.
	c := oippb.NewGRPCInferenceServiceClient(g.dial())
	md, err := c.ModelMetadata(ctx, &oippb.ModelMetadataRequest{Name: "mask_onnx"})
	if err != nil || len(md.Inputs) != 2 || md.Inputs[0].Datatype != "BOOL" || md.Inputs[1].Datatype != "UINT8" ||
		len(md.Outputs) != 2 || md.Outputs[0].Datatype != "BOOL" || md.Outputs[1].Datatype != "UINT8" {
		t.Errorf("ModelMetadata(mask_onnx) = %v, %v", md, err)
	}
	typed := []*oippb.ModelInferRequest_InferInputTensor{
		{Name: "mask", Datatype: "BOOL", Shape: []int64{1, 4}, Contents: &oippb.InferTensorContents{BoolContents: []bool{true, true, false, true}}},
		{Name: "x", Datatype: "UINT8", Shape: []int64{1, 4}, Contents: &oippb.InferTensorContents{UintContents: []uint32{0, 4, 9, 255}}},
	}
	for _, model := range []string{"mask_onnx", "mask_pt"} {
		r, err := c.ModelInfer(ctx, &oippb.ModelInferRequest{ModelName: model, Inputs: typed})
		if err != nil || len(r.Outputs) != 2 || r.Outputs[0].Datatype != "BOOL" || r.Outputs[1].Datatype != "UINT8" ||
			!bytes.Equal(r.RawOutputContents[0], []byte{0, 1, 0, 1}) || !bytes.Equal(r.RawOutputContents[1], []byte{1, 5, 10, 0}) {
			t.Errorf("ModelInfer(%s) = %v, %v", model, r, err)
		}
	}
	_, err = c.ModelInfer(ctx, &oippb.ModelInferRequest{ModelName: "mask_onnx", Inputs: []*oippb.ModelInferRequest_InferInputTensor{
		{Name: "x", Datatype: "UINT8", Shape: []int64{1}, Contents: &oippb.InferTensorContents{UintContents: []uint32{300}}}}})
	if status.Code(err) != codes.InvalidArgument || !strings.Contains(err.Error(), "value 300 at 0 is out of range for UINT8") {
		t.Errorf("UINT8 300 over gRPC: %v", err)
	}

	// The B&A API has neither type: a BOOL input is an INPUT_PARSING error,
	// a BOOL output an OUTPUT_PARSING one.
	_, resp, err := g.infer(batchJSON(
		itemJSON("mask_onnx/", tensorJSON("BOOL", []int64{1}, []float64{1})),
		itemJSON("bool_pt/", tensorJSON("FLOAT", []int64{2}, []float64{1, -1}))))
	if err != nil || len(resp.Response) != 2 {
		t.Fatalf("B&A: %+v, %v", resp, err)
	}
	if e := resp.Response[0].Error; e == nil || e.ErrorType != "INPUT_PARSING" || !strings.Contains(e.Description, "Unsupported 'data_type' field BOOL") {
		t.Errorf("B&A BOOL input: %+v", e)
	}
	if e := resp.Response[1].Error; e == nil || e.ErrorType != "OUTPUT_PARSING" || !strings.Contains(e.Description, "output type BOOL is not supported by the B&A API") {
		t.Errorf("B&A BOOL output: %+v", e)
	}
}
