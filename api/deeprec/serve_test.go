package deeprec

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"math"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	"github.com/groveml/grove/actors"
	"github.com/groveml/grove/api/deeprec/deeprecpb"
	"github.com/groveml/grove/api/forestflow"
	"github.com/groveml/grove/conf/bucket"
	"github.com/groveml/grove/servables"
	"github.com/groveml/grove/servables/onnx"
	"github.com/groveml/grove/servables/torch"
	"github.com/groveml/grove/transport/grpcserver"
	"github.com/groveml/grove/transport/httpserver"
)

// examples is the example bucket: the models and their expected outputs.
const examples = "../../examples/bucket"

// modelConfig serves the example models: pctr_v1/ and pcvr/ (TorchScript;
// pcvr/ with declared inputs), pctr_onnx/ (ONNX, pctr_v1's weights) and
// game_score/ (ONNX, string inputs), ver/ (a versioned entry: version 1
// is pctr_v1, version 2 pctr_v2), batched/ (pctr_onnx/ with a 50 ms
// batching delay), and a contract of game_score/ whose
// ForestFlow route shares the path shape of /api/predict/{model}.
const modelConfig = `{"model_metadata": [
 {"model_path": "pctr_v1/"},
 {"model_path": "pcvr/", "inputs": [{"name": "features", "datatype": "FP32", "shape": [-1, 8]}, {"name": "category", "datatype": "INT64", "shape": [-1, 1]}]},
 {"model_path": "pctr_onnx/"},
 {"model_path": "game_score/"},
 {"model_path": "ver/", "version_policy": {"latest": {"num_versions": 2}}},
 {"model_path": "batched/", "max_batch_rows": 64, "max_queue_delay_us": 50000}],
 "contracts": [{"organization": "games", "project": "arena", "contract_number": 1, "servables": [{"release_version": "v1", "model_path": "game_score/"}]}]}`

// system starts an actor system on the example models with the TorchScript
// and ONNX runtimes and waits until they are ready; it stops with the test.
// The prediction log goes to log, when given.
func system(t *testing.T, log ...actors.PredictionSink) *actors.System {
	t.Helper()
	objects := map[string][]byte{"model_config.json": []byte(modelConfig)}
	for name, f := range map[string]string{"pctr_v1/model.pt": "", "pcvr/model.pt": "", "pctr_onnx/model.onnx": "", "game_score/model.onnx": "",
		"ver/1/model.pt": "pctr_v1/model.pt", "ver/2/model.pt": "pctr_v2/model.pt", "batched/model.onnx": "pctr_onnx/model.onnx"} {
		if f == "" {
			f = name
		}
		b, err := os.ReadFile(filepath.Join(examples, f))
		if err != nil {
			t.Fatal(err)
		}
		objects[name] = b
	}
	sys, err := actors.Start(actors.Options{Bucket: bucket.NewMemory("deeprec", objects), ModelConfigPath: "model_config.json",
		PollInterval: time.Hour, CacheDir: t.TempDir(), MaxBatchRows: 64, IntraOpThreads: 1,
		Runtimes: servables.Registry{torch.Runtime{}, onnx.Runtime{}}, Logger: slog.New(slog.DiscardHandler), Predictions: sinkOf(log)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = sys.Stop(context.Background()) })
	want := []string{"batched/", "game_score/", "pctr_onnx/", "pctr_v1/", "pcvr/", "ver/", "ver/1/", "ver/2/"}
	for deadline := time.Now().Add(time.Minute); !slices.Equal(sys.ModelPaths(), want); time.Sleep(5 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("models not ready: %v", sys.ModelPaths())
		}
	}
	return sys
}

// server serves the protocol (and ForestFlow, whose patterns must not
// take /api/ paths) over sys on loopback: the HTTP base URL and a gRPC
// client.
func server(t *testing.T, sys *actors.System) (string, deeprecpb.ProcessorClient) {
	t.Helper()
	h := httpserver.New(httpserver.Options{Logger: slog.New(slog.DiscardHandler)})
	g := grpcserver.New(grpcserver.Options{})
	Register(h, g, sys)
	forestflow.Register(h, sys)
	hs := httptest.NewServer(h.Handler())
	t.Cleanup(hs.Close)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go func() { _ = g.Serve(ln) }()
	t.Cleanup(g.Stop)
	conn, err := grpc.NewClient(ln.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = conn.Close() })
	return hs.URL, deeprecpb.NewProcessorClient(conn)
}

// example is one model's entry of examples/bucket/expected.json.
type example struct {
	Inputs, Outputs []struct {
		Name     string    `json:"name"`
		Datatype string    `json:"datatype"`
		Shape    []int64   `json:"shape"`
		Data     []float64 `json:"data"`
	}
}

func expected(t *testing.T) map[string]example {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(examples, "expected.json"))
	if err != nil {
		t.Fatal(err)
	}
	var out map[string]example
	if err := json.Unmarshal(b, &out); err != nil {
		t.Fatal(err)
	}
	return out
}

// request is the PredictRequest of an example's inputs.
func request(t *testing.T, ex example) *deeprecpb.PredictRequest {
	t.Helper()
	req := &deeprecpb.PredictRequest{Inputs: map[string]*deeprecpb.ArrayProto{}}
	for _, in := range ex.Inputs {
		a := &deeprecpb.ArrayProto{ArrayShape: &deeprecpb.ArrayShape{Dim: in.Shape}}
		switch in.Datatype {
		case "FLOAT":
			a.Dtype = deeprecpb.ArrayDataType_DT_FLOAT
			for _, v := range in.Data {
				a.FloatVal = append(a.FloatVal, float32(v))
			}
		case "INT64":
			a.Dtype = deeprecpb.ArrayDataType_DT_INT64
			for _, v := range in.Data {
				a.Int64Val = append(a.Int64Val, int64(v))
			}
		default:
			t.Fatalf("input type %s", in.Datatype)
		}
		req.Inputs[in.Name] = a
	}
	return req
}

// checkOutputs compares resp with an example's outputs (to 1e-6), only
// those named by only when it is not empty.
func checkOutputs(t *testing.T, resp *deeprecpb.PredictResponse, ex example, only ...string) {
	t.Helper()
	want := 0
	for _, o := range ex.Outputs {
		if len(only) > 0 && !slices.Contains(only, o.Name) {
			continue
		}
		want++
		a := resp.GetOutputs()[o.Name]
		if a == nil {
			t.Errorf("no output %q in %v", o.Name, resp)
			continue
		}
		var got []float64
		switch o.Datatype {
		case "FLOAT":
			if a.GetDtype() != deeprecpb.ArrayDataType_DT_FLOAT {
				t.Errorf("output %q is %v", o.Name, a.GetDtype())
			}
			for _, v := range a.GetFloatVal() {
				got = append(got, float64(v))
			}
		case "DOUBLE":
			if a.GetDtype() != deeprecpb.ArrayDataType_DT_DOUBLE {
				t.Errorf("output %q is %v", o.Name, a.GetDtype())
			}
			got = a.GetDoubleVal()
		}
		if !slices.Equal(a.GetArrayShape().GetDim(), o.Shape) || len(got) != len(o.Data) {
			t.Errorf("output %q: shape %v, %d values; want %v, %d", o.Name, a.GetArrayShape().GetDim(), len(got), o.Shape, len(o.Data))
			continue
		}
		for i := range got {
			if math.Abs(got[i]-o.Data[i]) > 1e-6 {
				t.Errorf("output %q[%d] = %v, want %v", o.Name, i, got[i], o.Data[i])
			}
		}
	}
	if len(resp.GetOutputs()) != want {
		t.Errorf("%d outputs, want %d: %v", len(resp.GetOutputs()), want, resp)
	}
}

// post sends req to POST /api/predict/{model} and returns the status, the
// Content-Type and the body.
func post(t *testing.T, base, model string, body []byte, header http.Header) (int, string, []byte) {
	t.Helper()
	r, err := http.NewRequest("POST", base+PathPrefix+model, bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	r.Header.Set("Content-Type", ContentType)
	for k, v := range header {
		r.Header[k] = v
	}
	resp, err := http.DefaultClient.Do(r)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, resp.Header.Get("Content-Type"), b
}

func marshal(t *testing.T, m proto.Message) []byte {
	t.Helper()
	b, err := proto.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestPredictOverHTTPAndGRPC runs the example models' known inputs over
// both transports, TorchScript and ONNX, and checks their outputs.
func TestPredictOverHTTPAndGRPC(t *testing.T) {
	sys := system(t)
	base, client := server(t, sys)
	ex := expected(t)
	for _, c := range []struct {
		model   string // the model as the caller names it
		example string
		filter  []string
	}{
		{"pctr_v1", "pctr_v1", nil},
		{"pctr_v1/", "pctr_v1", nil},
		{"pctr_onnx", "pctr_v1", nil}, // pctr_v1's weights in ONNX
		{"pcvr", "pcvr", nil},
		{"pcvr/", "pcvr", []string{"output_1"}},
		{"pcvr", "pcvr", []string{"output_1:0", "output_0"}},
		{"pctr_onnx", "pctr_v1", []string{"output_0"}},
		{"ver", "pctr_v2", nil},   // the versioned entry: its newest version
		{"ver/1", "pctr_v1", nil}, // a version's own path
		{"ver/2/", "pctr_v2", nil},
	} {
		req := request(t, ex[c.example])
		req.OutputFilter = c.filter
		code, ct, body := post(t, base, c.model, marshal(t, req), nil)
		if code != http.StatusOK || ct != ContentType {
			t.Fatalf("%s over HTTP: %d %s %s", c.model, code, ct, body)
		}
		resp := &deeprecpb.PredictResponse{}
		if err := proto.Unmarshal(body, resp); err != nil {
			t.Fatal(err)
		}
		only := make([]string, len(c.filter))
		for i, f := range c.filter {
			only[i] = strings.TrimSuffix(f, ":0")
		}
		checkKeys(t, resp, c.filter)
		checkOutputs(t, byModelName(resp), ex[c.example], only...)

		gresp, err := client.Predict(t.Context(), &deeprecpb.ProcessorPredictRequest{ModelPath: c.model, Request: req})
		if err != nil {
			t.Fatalf("%s over gRPC: %v", c.model, err)
		}
		checkKeys(t, gresp, c.filter)
		checkOutputs(t, byModelName(gresp), ex[c.example], only...)
	}
}

// checkKeys checks that resp's outputs are keyed by the output_filter
// names as the request wrote them ("output_1:0" stays "output_1:0"), as
// DeepRec keys them; an empty filter asks for every output.
func checkKeys(t *testing.T, resp *deeprecpb.PredictResponse, filter []string) {
	t.Helper()
	if len(filter) == 0 {
		return
	}
	keys := slices.Sorted(maps.Keys(resp.GetOutputs()))
	if want := slices.Sorted(slices.Values(filter)); !slices.Equal(keys, want) {
		t.Errorf("outputs keyed %q, want the output_filter's names %q", keys, want)
	}
}

// byModelName is resp with its outputs keyed by the model's names (":0"
// dropped).
func byModelName(resp *deeprecpb.PredictResponse) *deeprecpb.PredictResponse {
	out := &deeprecpb.PredictResponse{Outputs: map[string]*deeprecpb.ArrayProto{}}
	for k, v := range resp.GetOutputs() {
		out.Outputs[strings.TrimSuffix(k, ":0")] = v
	}
	return out
}

// TestStringInputsOverHTTP scores game_score/ (ONNX, DT_STRING and
// DT_DOUBLE in, DT_DOUBLE and DT_STRING out) with the README's example.
func TestStringInputsOverHTTP(t *testing.T) {
	base, _ := server(t, system(t))
	req := &deeprecpb.PredictRequest{Inputs: map[string]*deeprecpb.ArrayProto{
		"String":  {Dtype: deeprecpb.ArrayDataType_DT_STRING, ArrayShape: &deeprecpb.ArrayShape{Dim: []int64{1, 2}}, StringVal: [][]byte{[]byte("elf7"), []byte("elf")}},
		"Float64": {Dtype: deeprecpb.ArrayDataType_DT_DOUBLE, ArrayShape: &deeprecpb.ArrayShape{Dim: []int64{1, 3}}, DoubleVal: []float64{50, 40, 30}},
	}}
	code, _, body := post(t, base, "game_score", marshal(t, req), nil)
	if code != http.StatusOK {
		t.Fatalf("%d %s", code, body)
	}
	resp := &deeprecpb.PredictResponse{}
	if err := proto.Unmarshal(body, resp); err != nil {
		t.Fatal(err)
	}
	score, side := resp.GetOutputs()["score"], resp.GetOutputs()["side"]
	if score.GetDtype() != deeprecpb.ArrayDataType_DT_DOUBLE || len(score.GetDoubleVal()) != 1 || math.Abs(score.GetDoubleVal()[0]-3.45) > 1e-9 ||
		side.GetDtype() != deeprecpb.ArrayDataType_DT_STRING || len(side.GetStringVal()) != 1 || string(side.GetStringVal()[0]) != "friend" {
		t.Errorf("answer %v", resp)
	}
}

// TestRefusals checks the caller's mistakes get a clear text error with
// the right HTTP status and gRPC code, before or after the model runs.
func TestRefusals(t *testing.T) {
	base, client := server(t, system(t))
	pctr := request(t, expected(t)["pctr_v1"])
	with := func(edit func(r *deeprecpb.PredictRequest)) []byte {
		r := proto.Clone(pctr).(*deeprecpb.PredictRequest)
		edit(r)
		return marshal(t, r)
	}
	for _, c := range []struct {
		name, model string
		body        []byte
		http        int
		grpc        codes.Code
		want        string
	}{
		{"unknown model", "nope", marshal(t, pctr), 404, codes.NotFound, "nope/"},
		{"not a proto", "pctr_v1", []byte{0xff, 0xff, 0xff}, 400, codes.InvalidArgument, "not a serialized tensorflow.eas.PredictRequest"},
		{"unknown input", "pctr_v1", with(func(r *deeprecpb.PredictRequest) { r.Inputs["y"] = r.Inputs["x"]; delete(r.Inputs, "x") }),
			400, codes.InvalidArgument, `unknown input "y"`},
		{"no inputs", "pctr_onnx", with(func(r *deeprecpb.PredictRequest) { r.Inputs = nil; r.SignatureName = "serving_default" }),
			400, codes.InvalidArgument, "the request has no inputs; the model's inputs are: x DT_FLOAT [-1 64]"},
		{"wrong type", "pctr_onnx", with(func(r *deeprecpb.PredictRequest) {
			r.Inputs["x"] = &deeprecpb.ArrayProto{Dtype: deeprecpb.ArrayDataType_DT_DOUBLE, ArrayShape: &deeprecpb.ArrayShape{Dim: []int64{1, 64}}, DoubleVal: make([]float64, 64)}
		}), 400, codes.InvalidArgument, "DT_DOUBLE"},
		{"unsupported type", "pctr_v1", with(func(r *deeprecpb.PredictRequest) {
			r.Inputs["x"] = &deeprecpb.ArrayProto{Dtype: deeprecpb.ArrayDataType_DT_COMPLEX64, ArrayShape: &deeprecpb.ArrayShape{Dim: []int64{1}}, FloatVal: []float32{1, 2}}
		}), 400, codes.InvalidArgument, `input "x": data type DT_COMPLEX64 is not supported`},
		{"short data", "pctr_v1", with(func(r *deeprecpb.PredictRequest) { r.Inputs["x"].FloatVal = r.Inputs["x"].FloatVal[:5] }),
			400, codes.InvalidArgument, `input "x": array_shape [2 64] holds 128 elements, float_val has 5`},
		{"unknown output, declared", "pctr_onnx", with(func(r *deeprecpb.PredictRequest) { r.OutputFilter = []string{"prob"} }),
			400, codes.InvalidArgument, `output_filter names "prob", which model pctr_onnx/ does not have; its outputs are: output_0 DT_FLOAT [-1 1]`},
		{"unknown output, after the forward", "pctr_v1", with(func(r *deeprecpb.PredictRequest) { r.OutputFilter = []string{"prob"} }),
			400, codes.InvalidArgument, `output_filter names "prob", which model pctr_v1/ does not have; its outputs are: output_0`},
		{"other signature", "pctr_v1", with(func(r *deeprecpb.PredictRequest) { r.SignatureName = "predict" }),
			400, codes.InvalidArgument, `signature_name "predict" is not served; model pctr_v1/ has the one signature "serving_default"`},
	} {
		t.Run(c.name, func(t *testing.T) {
			code, _, body := post(t, base, c.model, c.body, nil)
			if code != c.http || !strings.Contains(string(body), c.want) {
				t.Errorf("HTTP: %d %q, want %d and %q", code, body, c.http, c.want)
			}
			req := &deeprecpb.PredictRequest{}
			if proto.Unmarshal(c.body, req) != nil {
				return // gRPC cannot carry a body that is not a PredictRequest
			}
			_, err := client.Predict(t.Context(), &deeprecpb.ProcessorPredictRequest{ModelPath: c.model, Request: req})
			if st, _ := status.FromError(err); st.Code() != c.grpc || !strings.Contains(st.Message(), c.want) {
				t.Errorf("gRPC: %v, want %v and %q", err, c.grpc, c.want)
			}
		})
	}
	if code, _, body := post(t, base, "pctr_v1", marshal(t, pctr), http.Header{"Grove-Timeout": {"soon"}}); code != 400 || !strings.Contains(string(body), "Grove-Timeout") {
		t.Errorf("bad timeout: %d %s", code, body)
	}
	r, _ := http.NewRequest("POST", base+PathPrefix+"pctr_v1", strings.NewReader(`{"inputs":{}}`))
	r.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(r)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusUnsupportedMediaType || !strings.Contains(string(b), "serialized tensorflow.eas.PredictRequest") {
		t.Errorf("JSON body: %d %s", resp.StatusCode, b)
	}
}

// TestDeadline checks a deadline that passes while the request waits is
// answered 504 and DEADLINE_EXCEEDED.
func TestDeadline(t *testing.T) {
	sys := system(t)
	base, _ := server(t, sys)
	body := marshal(t, request(t, expected(t)["pctr_v1"]))
	if code, _, b := post(t, base, "pctr_v1", body, http.Header{"Grove-Timeout": {"1ns"}}); code != http.StatusGatewayTimeout {
		t.Errorf("HTTP: %d %s, want 504", code, b)
	}
	// gRPC: the call's deadline is the handler's context's (grpc-go sets
	// it from grpc-timeout). A client refuses to send a call whose
	// deadline has passed, so the handler is called here with one.
	ctx, cancel := context.WithDeadline(t.Context(), time.Now().Add(-time.Second))
	defer cancel()
	_, err := (&service{b: sys}).Predict(ctx, &deeprecpb.ProcessorPredictRequest{ModelPath: "pctr_v1", Request: request(t, expected(t)["pctr_v1"])})
	if status.Code(err) != codes.DeadlineExceeded {
		t.Errorf("gRPC: %v, want DEADLINE_EXCEEDED", err)
	}
}

// TestSignature checks GET /api/predict/{model} and a POST with an empty
// body answer the model's signature in DeepRec's JSON.
func TestSignature(t *testing.T) {
	base, _ := server(t, system(t))
	want := `{"signature_name": "serving_default","inputs": [{"name": "x","shape": [-1, 64],"type": "DT_FLOAT"}],` +
		`"outputs": [{"name": "output_0","shape": [-1, 1],"type": "DT_FLOAT"}]}`
	resp, err := http.Get(base + PathPrefix + "pctr_onnx")
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || string(b) != want || resp.Header.Get("Content-Type") != "application/json" {
		t.Errorf("GET: %d %s\nwant %s", resp.StatusCode, b, want)
	}
	if code, ct, b := post(t, base, "pctr_onnx/", nil, nil); code != 200 || string(b) != want || ct != "application/json" {
		t.Errorf("empty POST: %d %s %s", code, ct, b)
	}
	// pcvr/ declares its inputs; TorchScript records no outputs.
	wantPCVR := `{"signature_name": "serving_default","inputs": [{"name": "features","shape": [-1, 8],"type": "DT_FLOAT"},` +
		`{"name": "category","shape": [-1, 1],"type": "DT_INT64"}],"outputs": [`
	if code, _, b := post(t, base, "pcvr", nil, nil); code != 200 || !strings.HasPrefix(string(b), wantPCVR) || !json.Valid(b) {
		t.Errorf("pcvr: %d %s", code, b)
	}
	if code, _, b := post(t, base, "nope", nil, nil); code != 404 || !strings.Contains(string(b), `no model is served at "nope/"`) {
		t.Errorf("unknown model: %d %s", code, b)
	}
}

// TestForestFlowBesideAPI checks ForestFlow's score route, registered on
// the same server, still serves contracts while /api/predict/ paths of
// its shape go to this API.
func TestForestFlowBesideAPI(t *testing.T) {
	base, _ := server(t, system(t))
	doc := `{"schema":[{"type":"String","fields":["name","category"]},{"type":"Float64","fields":["hp","attack","defence"]}],` +
		`"datum":[{"tensors":[{"String":{"data":["elf7","elf"]}},{"Float64":{"data":[50,40,30]}}]}]}`
	resp, err := http.Post(base+"/games/arena/1/score", "application/json", strings.NewReader(doc))
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || !strings.Contains(string(b), "friend") {
		t.Errorf("ForestFlow: %d %s", resp.StatusCode, b)
	}
	// A model path of ForestFlow's shape: this API, which has no such model.
	if code, _, b := post(t, base, "games/arena/1/score", marshal(t, request(t, expected(t)["pctr_v1"])), nil); code != 404 ||
		!strings.Contains(string(b), "games/arena/1/score/") {
		t.Errorf("/api/predict/games/arena/1/score: %d %s", code, b)
	}
}

// TestConcurrentCallsBatch sends concurrent one-row requests over both
// transports to batched/, whose model actor batches them (fewer forward
// calls than rows), and checks each gets its own row's answer.
func TestConcurrentCallsBatch(t *testing.T) {
	sys := system(t)
	base, client := server(t, sys)
	ex := expected(t)["pctr_v1"]
	rows := make([]*deeprecpb.PredictRequest, 2)
	for i := range rows {
		x := ex.Inputs[0].Data[i*64 : (i+1)*64]
		a := &deeprecpb.ArrayProto{Dtype: deeprecpb.ArrayDataType_DT_FLOAT, ArrayShape: &deeprecpb.ArrayShape{Dim: []int64{1, 64}}}
		for _, v := range x {
			a.FloatVal = append(a.FloatVal, float32(v))
		}
		rows[i] = &deeprecpb.PredictRequest{Inputs: map[string]*deeprecpb.ArrayProto{"x": a}}
	}
	const workers, calls = 8, 4
	var wg sync.WaitGroup
	errs := make(chan string, workers)
	for w := range workers {
		wg.Go(func() {
			for k := range calls {
				i := (w + k) % 2
				var resp *deeprecpb.PredictResponse
				if w%2 == 0 {
					code, _, b := post(t, base, "batched", marshal(t, rows[i]), nil)
					resp = &deeprecpb.PredictResponse{}
					if code != 200 || proto.Unmarshal(b, resp) != nil {
						errs <- string(b)
						return
					}
				} else {
					var err error
					if resp, err = client.Predict(context.Background(), &deeprecpb.ProcessorPredictRequest{ModelPath: "batched", Request: rows[i]}); err != nil {
						errs <- err.Error()
						return
					}
				}
				got := resp.GetOutputs()["output_0"].GetFloatVal()
				if len(got) != 1 || math.Abs(float64(got[0])-ex.Outputs[0].Data[i]) > 1e-6 {
					errs <- "row answer " + resp.String()
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for e := range errs {
		t.Error(e)
	}
	st, _ := sys.ModelStats("batched/")
	if st.Inferences != workers*calls || st.Executions >= st.Inferences {
		t.Errorf("batched/ served %d rows in %d forward calls; want %d rows in fewer calls", st.Inferences, st.Executions, workers*calls)
	}
	t.Logf("%d rows in %d forward calls", st.Inferences, st.Executions)
}

func sinkOf(log []actors.PredictionSink) actors.PredictionSink {
	if len(log) == 0 {
		return nil
	}
	return log[0]
}

// logged keeps what reached the prediction log.
type logged struct {
	mu     sync.Mutex
	events []string
}

func (l *logged) LogPrediction(req *actors.Request, res *actors.Result, served bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.events = append(l.events, fmt.Sprintf("%s %s %s user=%s served=%v err=%v outputs=%d", req.API, req.ModelPath, req.RequestID,
		req.Configs["user_id"], served, res.Err, len(res.Outputs)))
}

// TestPredictionLog checks both transports' calls reach the prediction
// log with their API, request id and configs.
func TestPredictionLog(t *testing.T) {
	log := &logged{}
	base, client := server(t, system(t, log))
	req := request(t, expected(t)["pctr_v1"])
	if code, _, b := post(t, base, "pctr_onnx", marshal(t, req), http.Header{"X-Request-Id": {"r-http"}, "Grove-Config-User_id": {"42"}}); code != 200 {
		t.Fatalf("%d %s", code, b)
	}
	ctx := metadata.AppendToOutgoingContext(t.Context(), "x-request-id", "r-grpc")
	if _, err := client.Predict(ctx, &deeprecpb.ProcessorPredictRequest{ModelPath: "pctr_v1/", Request: req}); err != nil {
		t.Fatal(err)
	}
	log.mu.Lock()
	defer log.mu.Unlock()
	want := []string{"deeprec pctr_onnx/ r-http user=42 served=true err=<nil> outputs=1", "deeprec-grpc pctr_v1/ r-grpc user= served=true err=<nil> outputs=1"}
	if fmt.Sprint(log.events) != fmt.Sprint(want) {
		t.Errorf("logged %q\nwant   %q", log.events, want)
	}
}

// TestModelInfo checks what get_serving_model_info reports for a plain
// model, a versioned entry and one of its versions.
func TestModelInfo(t *testing.T) {
	sys := system(t)
	for _, c := range []struct{ model, path, version, sumOf string }{
		{"pctr_v1", "pctr_v1/", "", "pctr_v1/"},
		{"ver", "ver/2/", "2", "ver/2/"},
		{"ver/1/", "ver/1/", "1", "ver/1/"},
	} {
		info, err := ModelInfo(sys, c.model)
		if err != nil {
			t.Fatal(err)
		}
		_, sum, _ := sys.ModelMetadata(c.sumOf)
		if info.GetModelPath() != c.path || info.GetVersion() != c.version || info.GetChecksum() != sum || len(sum) != 64 {
			t.Errorf("ModelInfo(%s) = %v, want %s version %q checksum %s", c.model, info, c.path, c.version, sum)
		}
	}
	if _, err := ModelInfo(sys, "nope"); !errors.Is(err, servables.ErrNotFound) {
		t.Errorf("unknown model: %v", err)
	}
}

// TestProcess checks Process, what the processor library's process()
// calls: bytes in and out, the signature for an empty input under the
// caller's signature name, and errors of the caller's mistakes.
func TestProcess(t *testing.T) {
	sys := system(t)
	ex := expected(t)["pctr_v1"]
	call := Call{API: "deeprec-processor", Signature: "predict"}
	req := request(t, ex)
	req.SignatureName = "predict"
	prefix := []byte("kept")
	out, sig, err := Process(t.Context(), sys, "pctr_onnx", marshal(t, req), call, prefix)
	if err != nil || sig || string(out[:4]) != "kept" {
		t.Fatalf("Process: %v, signature %v, %q", err, sig, out)
	}
	resp := &deeprecpb.PredictResponse{}
	if err := proto.Unmarshal(out[4:], resp); err != nil {
		t.Fatal(err)
	}
	checkOutputs(t, resp, ex)

	out, sig, err = Process(t.Context(), sys, "pctr_onnx/", nil, call, nil)
	if err != nil || !sig || !strings.HasPrefix(string(out), `{"signature_name": "predict","inputs": [{"name": "x"`) {
		t.Errorf("empty input: %v %v %s", err, sig, out)
	}
	if _, _, err := Process(t.Context(), sys, "pctr_onnx", []byte{0x0a}, call, nil); !errors.Is(err, servables.ErrInvalidInput) {
		t.Errorf("truncated input: %v", err)
	}
	req.SignatureName = "serving_default"
	if _, _, err := Process(t.Context(), sys, "pctr_onnx", marshal(t, req), call, nil); !errors.Is(err, servables.ErrInvalidInput) ||
		!strings.Contains(err.Error(), `has the one signature "predict"`) {
		t.Errorf("other signature: %v", err)
	}
	if _, _, err := Process(t.Context(), sys, "nope", nil, call, nil); !errors.Is(err, servables.ErrNotFound) {
		t.Errorf("unknown model: %v", err)
	}
}
