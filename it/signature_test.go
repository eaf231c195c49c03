package it

import (
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	graphpipe "github.com/oracle/graphpipe-go"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/groveml/grove/api/oip/oippb"
	"github.com/groveml/grove/api/sidecar/sidecarpb"
)

// The model signatures of issue 14 against the real binary: TorchScript
// inputs bound by the names of forward's arguments (B&A keeps them
// positional), signatures declared in the model config or learned from the
// warm-up in the OIP metadata, and a caller's shape or dtype mistake
// answered as the caller's (400 / INVALID_ARGUMENT).

// subModel is servables/torch/testdata/sub.pt: forward(a, b) = a - b.
func subModel(t *testing.T) []byte {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(repoRoot(), "servables", "torch", "testdata", "sub.pt"))
	if err != nil {
		t.Fatal(err)
	}
	return data
}

// subWarmUp is a B&A warm-up request for sub at path: two FLOAT [1, 2] tensors.
func subWarmUp(path string) string {
	return batchJSON(itemJSON(path, tensorJSON("FLOAT", []int64{1, 2}, []float64{0, 0}), tensorJSON("FLOAT", []int64{1, 2}, []float64{0, 0})))
}

// signatureBucket holds sub.pt four times: sub/ as it is, sub_warm/ with a
// warm-up, sub_decl/ with a declared signature, bad_decl/ with a
// declaration that does not fit; and pctr_v1/ without a warm-up.
func signatureBucket(t *testing.T) *dirBucket {
	b := newDirBucket(t)
	for _, p := range []string{"sub/", "sub_warm/", "sub_decl/", "bad_decl/"} {
		b.Put(t, p+"model.pt", subModel(t))
	}
	b.Put(t, "pctr_v1/model.pt", exampleModel(t, "pctr_v1"))
	warm, _ := json.Marshal(subWarmUp("sub_warm/"))
	ab := `"inputs": [{"name": "a", "datatype": "FP32", "shape": [-1, 2]}, {"name": "b", "datatype": "FP32", "shape": [-1, 2]}]`
	cfg := `{"model_metadata": [
	  {"model_path": "sub/"},
	  {"model_path": "sub_warm/", "warm_up_batch_request_json": ` + string(warm) + `},
	  {"model_path": "sub_decl/", ` + ab + `, "outputs": [{"name": "diff", "datatype": "FP32", "shape": [-1, 2]}]},
	  {"model_path": "bad_decl/", "inputs": [{"name": "a", "datatype": "FP32", "shape": [-1, 2]}, {"name": "c", "datatype": "FP32", "shape": [-1, 2]}]},
	  {"model_path": "pctr_v1/"}]}`
	b.Put(t, "model_config.json", []byte(cfg))
	return b
}

// oipTensor is one OIP REST tensor.
type oipTensor struct {
	Name     string    `json:"name"`
	Datatype string    `json:"datatype"`
	Shape    []int64   `json:"shape"`
	Data     []float64 `json:"data"`
}

// oipInfer posts an OIP REST request and decodes the outputs, or returns the error text.
func oipInfer(t *testing.T, g *grove, model string, inputs ...oipTensor) (int, []oipTensor, string) {
	t.Helper()
	body, _ := json.Marshal(map[string]any{"inputs": inputs})
	code, _, raw := oipPost(t, g, "/v2/models/"+model+"/infer", body, 0)
	var out struct {
		Outputs []oipTensor `json:"outputs"`
		Error   string      `json:"error"`
	}
	if err := json.Unmarshal(raw, &out); err != nil {
		t.Fatalf("decoding %s: %v", raw, err)
	}
	return code, out.Outputs, out.Error
}

// Budget: 10 s.
func TestTorchScriptInputsAreBoundByNameOverOIPAndByPositionOverBA(t *testing.T) {
	t.Parallel()
	g := startGrove(t, signatureBucket(t).URL(), nil)
	ctx := withTimeout(t, time.Minute)
	a := oipTensor{Name: "a", Datatype: "FP32", Shape: []int64{1, 2}, Data: []float64{10, 20}}
	b := oipTensor{Name: "b", Datatype: "FP32", Shape: []int64{1, 2}, Data: []float64{1, 2}}

	// OIP REST: b, a computes a - b.
	for _, order := range [][]oipTensor{{a, b}, {b, a}} {
		code, out, msg := oipInfer(t, g, "sub", order...)
		if code != 200 || len(out) != 1 || !slices.Equal(out[0].Data, []float64{9, 18}) {
			t.Errorf("REST %s, %s: HTTP %d %+v %s, want a - b = [9 18]", order[0].Name, order[1].Name, code, out, msg)
		}
	}
	bogus := b
	bogus.Name = "bogus"
	for _, c := range []struct {
		inputs []oipTensor
		want   string
	}{
		{[]oipTensor{a, bogus}, `unknown input "bogus"`},
		{[]oipTensor{a}, `missing input "b"`},
	} {
		code, _, msg := oipInfer(t, g, "sub", c.inputs...)
		if code != 400 || !strings.Contains(msg, c.want) || !strings.Contains(msg, "the model's inputs are: a, b") {
			t.Errorf("REST %+v: HTTP %d %q, want 400 saying %q and listing a, b", c.inputs, code, msg, c.want)
		}
	}

	// OIP gRPC: the same.
	oip := oippb.NewGRPCInferenceServiceClient(g.dial())
	grpcReq := func(names ...string) *oippb.ModelInferRequest {
		req := &oippb.ModelInferRequest{ModelName: "sub"}
		vals := map[string][]float64{"a": a.Data, "b": b.Data, "bogus": b.Data}
		for _, n := range names {
			req.Inputs = append(req.Inputs, &oippb.ModelInferRequest_InferInputTensor{Name: n, Datatype: "FP32", Shape: []int64{1, 2}})
			req.RawInputContents = append(req.RawInputContents, rawLE("FP32", vals[n]))
		}
		return req
	}
	resp, err := oip.ModelInfer(ctx, grpcReq("b", "a"))
	if err != nil || !slices.Equal(fromRawLE(t, "FP32", resp.RawOutputContents[0]), []float64{9, 18}) {
		t.Errorf("gRPC b, a: %v %v, want a - b", resp, err)
	}
	_, err = oip.ModelInfer(ctx, grpcReq("a", "bogus"))
	if s, _ := status.FromError(err); s.Code() != codes.InvalidArgument || !strings.Contains(s.Message(), `unknown input "bogus"; the model's inputs are: a, b`) {
		t.Errorf("gRPC a, bogus: %v, want INVALID_ARGUMENT naming bogus and listing a, b", err)
	}

	// B&A: positional, as the sidecar documents for PyTorch; names are ignored.
	body := batchJSON(itemJSON("sub/",
		`{"tensor_name":"b","data_type":"FLOAT","tensor_shape":[1,2],"tensor_content":["10","20"]}`,
		`{"tensor_name":"bogus","data_type":"FLOAT","tensor_shape":[1,2],"tensor_content":["1","2"]}`))
	code, ba, err := g.infer(body)
	if err != nil || code != 200 || len(ba.Response) != 1 || ba.Response[0].Error != nil || !slices.Equal(ba.Response[0].Tensors[0].TensorContent, []float64{9, 18}) {
		t.Errorf("B&A with tensors named b, bogus: HTTP %d %+v %v, want the first minus the second, [9 18]", code, ba, err)
	}
	sidecar := sidecarpb.NewInferenceServiceClient(g.dial())
	presp, err := sidecar.Predict(ctx, &sidecarpb.PredictRequest{InputData: &sidecarpb.PredictRequest_Input{Input: []byte(body)}})
	var viaSidecar baResponse
	if err != nil || json.Unmarshal(presp.GetOutput(), &viaSidecar) != nil || len(viaSidecar.Response) != 1 ||
		viaSidecar.Response[0].Error != nil || !slices.Equal(viaSidecar.Response[0].Tensors[0].TensorContent, []float64{9, 18}) {
		t.Errorf("sidecar Predict with tensors named b, bogus: %s %v, want [9 18]", presp.GetOutput(), err)
	}
}

// oipMetadata is GET /v2/models/{name}.
type oipMetadata struct {
	Inputs, Outputs []struct {
		Name     string  `json:"name"`
		Datatype string  `json:"datatype"`
		Shape    []int64 `json:"shape"`
	}
	Parameters map[string]string `json:"parameters"`
}

func (m oipMetadata) String() string {
	side := func(specs []struct {
		Name     string  `json:"name"`
		Datatype string  `json:"datatype"`
		Shape    []int64 `json:"shape"`
	}) string {
		var parts []string
		for _, s := range specs {
			parts = append(parts, fmt.Sprintf("%s %s %v", s.Name, s.Datatype, s.Shape))
		}
		return strings.Join(parts, ", ")
	}
	return side(m.Inputs) + " -> " + side(m.Outputs) + " (" + m.Parameters["signature"] + ")"
}

// Budget: 10 s.
func TestModelMetadataCarriesTheDeclaredOrLearnedSignature(t *testing.T) {
	t.Parallel()
	g := startGrove(t, signatureBucket(t).URL(), nil)
	ctx := withTimeout(t, time.Minute)
	for _, c := range []struct{ model, want string }{
		{"sub_warm", "a FP32 [-1 2], b FP32 [-1 2] -> output_0 FP32 [-1 2] (warm_up)"},
		{"sub_decl", "a FP32 [-1 2], b FP32 [-1 2] -> diff FP32 [-1 2] (declared)"},
		{"sub", "a  [], b  [] -> output_0  [] (runtime)"},
	} {
		code, raw := g.get("/v2/models/" + c.model)
		var m oipMetadata
		if code != 200 || json.Unmarshal(raw, &m) != nil || m.String() != c.want {
			t.Errorf("GET /v2/models/%s: HTTP %d %s\n got %s\nwant %s", c.model, code, raw, m, c.want)
		}
	}
	md, err := oippb.NewGRPCInferenceServiceClient(g.dial()).ModelMetadata(ctx, &oippb.ModelMetadataRequest{Name: "sub_warm"})
	if err != nil || len(md.Inputs) != 2 || md.Inputs[1].Name != "b" || md.Inputs[1].Datatype != "FP32" || !slices.Equal(md.Inputs[1].Shape, []int64{-1, 2}) ||
		md.Outputs[0].Datatype != "FP32" || !slices.Equal(md.Outputs[0].Shape, []int64{-1, 2}) {
		t.Errorf("gRPC ModelMetadata(sub_warm) = %v %v", md, err)
	}
	// A declared output name names the output.
	code, out, msg := oipInfer(t, g, "sub_decl",
		oipTensor{Name: "a", Datatype: "FP32", Shape: []int64{1, 2}, Data: []float64{1, 1}},
		oipTensor{Name: "b", Datatype: "FP32", Shape: []int64{1, 2}, Data: []float64{1, 2}})
	if code != 200 || len(out) != 1 || out[0].Name != "diff" || !slices.Equal(out[0].Data, []float64{0, -1}) {
		t.Errorf("sub_decl: HTTP %d %+v %s, want diff = [0 -1]", code, out, msg)
	}
	// A declaration that does not fit forward fails the load, saying why.
	state, _, lastErr := g.status().model("bad_decl/")
	if state != "failed" || !strings.Contains(lastErr, `declared input 1 is "c", the model's is "b"`) {
		t.Errorf("bad_decl/: %s %q", state, lastErr)
	}
}

// Budget: 10 s.
func TestCallerShapeAndDtypeMistakesOnTorchScriptAreInvalidArgument(t *testing.T) {
	t.Parallel()
	g := startGrove(t, signatureBucket(t).URL(), nil)
	ctx := withTimeout(t, time.Minute)
	b := oipTensor{Name: "b", Datatype: "FP32", Shape: []int64{1, 2}, Data: []float64{1, 2}}
	for _, c := range []struct {
		model  string
		inputs []oipTensor
		want   string
	}{
		// Checked against the learned signature before the forward.
		{"sub_warm", []oipTensor{{Name: "a", Datatype: "FP64", Shape: []int64{1, 2}, Data: []float64{1, 2}}, b},
			`input "a" is FP64, the model takes FP32 (a FP32 [-1 2])`},
		{"sub_warm", []oipTensor{{Name: "a", Datatype: "FP32", Shape: []int64{2}, Data: []float64{1, 2}}, b},
			`input "a" has shape [2] (rank 1), the model takes rank 2: [-1 2]`},
		{"sub_warm", []oipTensor{{Name: "a", Datatype: "FP32", Shape: []int64{1, 3}, Data: []float64{1, 2, 3}}, b},
			`input "a" has shape [1 3], the model takes [-1 2] (dimension 1 must be 2)`},
		// Against the declared one.
		{"sub_decl", []oipTensor{{Name: "a", Datatype: "INT64", Shape: []int64{1, 2}, Data: []float64{1, 2}}, b},
			`input "a" is INT64, the model takes FP32`},
		// No signature known: libtorch's refusal, classified as the caller's.
		{"pctr_v1", []oipTensor{{Name: "x", Datatype: "FP32", Shape: []int64{1, 3}, Data: []float64{1, 2, 3}}},
			"the model cannot run on the inputs sent (x FP32 [1 3]): RuntimeError: mat1 and mat2 shapes cannot be multiplied (1x3 and 64x256); the model's inputs are: x"},
		{"sub", []oipTensor{{Name: "a", Datatype: "FP32", Shape: []int64{1, 3}, Data: []float64{1, 2, 3}}, b},
			"the model cannot run on the inputs sent (a FP32 [1 3], b FP32 [1 2])"},
	} {
		code, _, msg := oipInfer(t, g, c.model, c.inputs...)
		if code != 400 || !strings.Contains(msg, c.want) {
			t.Errorf("REST %s %+v: HTTP %d %q, want 400 saying %q", c.model, c.inputs, code, msg, c.want)
		}
	}
	oip := oippb.NewGRPCInferenceServiceClient(g.dial())
	_, err := oip.ModelInfer(ctx, &oippb.ModelInferRequest{ModelName: "pctr_v1",
		Inputs:           []*oippb.ModelInferRequest_InferInputTensor{{Name: "x", Datatype: "FP64", Shape: []int64{1, 64}}},
		RawInputContents: [][]byte{rawLE("FP64", make([]float64, 64))}})
	if s, _ := status.FromError(err); s.Code() != codes.InvalidArgument || !strings.Contains(s.Message(), "x FP64 [1 64]") {
		t.Errorf("gRPC pctr_v1 with FP64: %v, want INVALID_ARGUMENT naming x FP64 [1 64]", err)
	}
	// B&A says the same in its own words, as the sidecar's error type for
	// inputs its model refuses (MODEL_EXECUTION).
	_, ba, err := g.infer(batchJSON(itemJSON("sub_warm/", tensorJSON("DOUBLE", []int64{1, 2}, []float64{1, 2}), tensorJSON("FLOAT", []int64{1, 2}, []float64{1, 2}))))
	if err != nil || len(ba.Response) != 1 || ba.Response[0].Error == nil || ba.Response[0].Error.ErrorType != "MODEL_EXECUTION" ||
		!strings.Contains(ba.Response[0].Error.Description, `input "a" is DOUBLE, the model takes FLOAT`) {
		t.Errorf("B&A sub_warm/ with a DOUBLE: %+v %v", ba, err)
	}
	// The server keeps serving.
	if code, out, msg := oipInfer(t, g, "sub_warm", oipTensor{Name: "a", Datatype: "FP32", Shape: []int64{1, 2}, Data: []float64{5, 5}}, b); code != 200 || !slices.Equal(out[0].Data, []float64{4, 3}) {
		t.Errorf("sub_warm after the mistakes: HTTP %d %+v %s", code, out, msg)
	}
}

// Budget: 10 s.
func TestGraphPipeBindsTorchScriptInputsByTheirInputNames(t *testing.T) {
	t.Parallel()
	b := newDirBucket(t)
	b.Put(t, "sub/model.pt", subModel(t))
	b.Put(t, "model_config.json", []byte(`{"model_metadata": [{"model_path": "sub/"}],
	 "contracts": [{"organization": "ads", "project": "sub", "contract_number": 1, "servables": [{"release_version": "v1", "model_path": "sub/"}]}]}`))
	g := startGrove(t, b.URL(), nil)
	url := g.url + "/ads/sub/1/gp"
	a, bb := [][]float32{{10, 20}}, [][]float32{{1, 2}}
	for _, c := range []struct {
		inputs []any
		names  []string
	}{
		{[]any{a, bb}, nil},                // by position
		{[]any{a, bb}, []string{"a", "b"}}, // by name, in forward's order
		{[]any{bb, a}, []string{"b", "a"}}, // by name, in the other order
	} {
		outs, err := graphpipe.MultiRemote(http.DefaultClient, url, c.inputs, c.names, nil)
		got, _ := func() ([][]float32, bool) {
			if len(outs) != 1 {
				return nil, false
			}
			v, ok := outs[0].([][]float32)
			return v, ok
		}()
		if err != nil || len(got) != 1 || !slices.Equal(got[0], []float32{9, 18}) {
			t.Errorf("input names %v: %#v %v, want a - b = [9 18]", c.names, outs, err)
		}
	}
	_, err := graphpipe.MultiRemote(http.DefaultClient, url, []any{a, bb}, []string{"a", "bogus"}, nil)
	if err == nil || !strings.Contains(err.Error(), `unknown input "bogus"; the model's inputs are: a, b`) {
		t.Errorf("input names a, bogus: %v, want an error naming bogus and listing a, b", err)
	}
}
