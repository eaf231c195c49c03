package it

import (
	"encoding/json"
	"fmt"
	"io"
	"io/fs"
	"math"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	graphpipe "github.com/oracle/graphpipe-go"

	"github.com/groveml/grove/api/deeprec/deeprecpb"
	"github.com/groveml/grove/api/oip/oippb"
	"github.com/groveml/grove/api/sidecar/sidecarpb"
)

// xgbExample is one model's entry of examples/bucket/expected_xgboost.json
// (examples/models/make_xgboost_model.py): a fixed input, null where a
// value is missing, and python3-xgboost's Booster.predict on it, plain
// (prediction) and with output_margin=True (margin).
type xgbExample struct {
	FeatureNames []string     `json:"feature_names"`
	Input        [][]*float64 `json:"input"`
	Prediction   []float64    `json:"prediction"`
	Margin       []float64    `json:"margin"`
}

// loadXGBExamples reads expected_xgboost.json: pcvr_xgb (served by the
// example config) and pcvr_xgb_v2, its second version, with the same input.
func loadXGBExamples(t *testing.T) (v1, v2 xgbExample) {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(repoRoot(), "examples", "bucket", "expected_xgboost.json"))
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]xgbExample
	if err := json.Unmarshal(data, &m); err != nil {
		t.Fatal(err)
	}
	v1, v2 = m["pcvr_xgb"], m["pcvr_xgb_v2"]
	for name, e := range map[string]xgbExample{"pcvr_xgb": v1, "pcvr_xgb_v2": v2} {
		if len(e.Input) == 0 || len(e.Prediction) != len(e.Input) || len(e.Margin) != len(e.Input) || len(e.FeatureNames) == 0 {
			t.Fatalf("expected_xgboost.json: %s has %d rows, %d predictions, %d margins, %d features",
				name, len(e.Input), len(e.Prediction), len(e.Margin), len(e.FeatureNames))
		}
		for i, row := range e.Input {
			if len(row) != len(e.FeatureNames) {
				t.Fatalf("expected_xgboost.json: %s row %d has %d values for %d features", name, i, len(row), len(e.FeatureNames))
			}
		}
	}
	if fmt.Sprint(v1.values()) != fmt.Sprint(v2.values()) { // NaN != NaN: compare the text
		t.Fatal("expected_xgboost.json: pcvr_xgb and pcvr_xgb_v2 have different inputs; the load sends one")
	}
	return v1, v2
}

// values is the input row after row, NaN where a value is missing.
func (e xgbExample) values() []float64 {
	var out []float64
	for _, row := range e.Input {
		for _, v := range row {
			if v == nil {
				out = append(out, math.NaN())
			} else {
				out = append(out, *v)
			}
		}
	}
	return out
}

// shape is the input's shape, [rows, features].
func (e xgbExample) shape() []int64 { return []int64{int64(len(e.Input)), int64(len(e.FeatureNames))} }

// xgbMismatch is "" when got equals want within the tolerance,
// 1e-6·max(1, |want|) for each value, else what differs.
func xgbMismatch(got, want []float64) string {
	if len(got) != len(want) {
		return fmt.Sprintf("%d values, want %d", len(got), len(want))
	}
	for i := range got {
		if math.Abs(got[i]-want[i]) > 1e-6*max(1, math.Abs(want[i])) || math.IsNaN(got[i]) {
			return fmt.Sprintf("[%d] = %v, want %v (±1e-6·max(1,|want|))", i, got[i], want[i])
		}
	}
	return ""
}

// checkXGB fails the test unless the prediction and margin got over
// protocol are e's.
func checkXGB(t *testing.T, protocol string, e xgbExample, prediction, margin []float64) {
	t.Helper()
	if m := xgbMismatch(prediction, e.Prediction); m != "" {
		t.Errorf("%s: prediction %s", protocol, m)
	}
	if m := xgbMismatch(margin, e.Margin); m != "" {
		t.Errorf("%s: margin %s", protocol, m)
	}
}

// jsonFloats renders vals as a JSON array, NaN written as nan.
func jsonFloats(vals []float64, nan string) string {
	parts := make([]string, len(vals))
	for i, v := range vals {
		if math.IsNaN(v) {
			parts[i] = nan
		} else {
			parts[i] = strconv.FormatFloat(v, 'g', -1, 64)
		}
	}
	return "[" + strings.Join(parts, ",") + "]"
}

// xgbBA is e's input as a B&A item for path (NaN as "NaN").
func xgbBA(e xgbExample, path string) string {
	return itemJSON(path, tensorJSON("FLOAT", e.shape(), e.values()))
}

// baOutputs returns item i's tensors by name, or the item's error.
func baOutputs(resp baResponse, i int) (map[string][]float64, error) {
	if i >= len(resp.Response) {
		return nil, fmt.Errorf("%d items in the answer, no item %d", len(resp.Response), i)
	}
	item := resp.Response[i]
	if item.Error != nil {
		return nil, fmt.Errorf("%s: %s", item.Error.ErrorType, item.Error.Description)
	}
	out := map[string][]float64{}
	for _, tn := range item.Tensors {
		out[tn.TensorName] = tn.TensorContent
	}
	return out, nil
}

// copyExampleBucket puts every file of examples/bucket, its model config
// among them, into b: the bucket `make run` serves.
func copyExampleBucket(t *testing.T, b *dirBucket) {
	t.Helper()
	root := filepath.Join(repoRoot(), "examples", "bucket")
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		data, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(root, p)
		if err != nil {
			return err
		}
		b.Put(t, filepath.ToSlash(rel), data)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// TestXGBoostExampleModelAnswersLikePythonOnEveryProtocol serves the
// example bucket with its own model config, as `make run` does, and asks
// its XGBoost model pcvr_xgb/ (binary:logistic, 50 trees over 20 named
// features) for the committed input, 8 rows of which 3 have missing
// values, over B&A (REST and the sidecar's gRPC Predict), OIP REST (JSON
// with NaN literals), OIP gRPC (raw FP32 and typed FP64 contents),
// ForestFlow's score API and GraphPipe (graphpipe-go) through the example
// contract ads/pcvr/1, and DeepRec's processor gRPC: every
// answer's prediction and margin equal python3-xgboost's within
// 1e-6·max(1,|x|), with the outputs' names and shapes the runtime
// declares, which the OIP metadata describes.
//
// Budget: 5 s.
func TestXGBoostExampleModelAnswersLikePythonOnEveryProtocol(t *testing.T) {
	t.Parallel()
	exp, _ := loadXGBExamples(t)
	b := newDirBucket(t)
	copyExampleBucket(t, b)
	g := startGrove(t, b.URL(), nil)
	g.waitModels("pcvr_xgb/")
	ctx := withTimeout(t, time.Minute)
	rows := int64(len(exp.Input))
	ready := false
	for _, m := range g.status().Models {
		ready = ready || m.Path == "pcvr_xgb/" && m.State == "ready" && m.Runtime == "xgboost" && m.LastError == ""
	}
	if !ready {
		t.Errorf("/v1/status has no ready pcvr_xgb/ on the xgboost runtime: %+v", g.status().Models)
	}

	// B&A over REST, and the same batch over the sidecar's gRPC Predict.
	body := batchJSON(xgbBA(exp, "pcvr_xgb/"))
	code, resp, err := g.infer(body)
	if err != nil || code != http.StatusOK {
		t.Fatalf("B&A: HTTP %d %v", code, err)
	}
	pr, err := sidecarpb.NewInferenceServiceClient(g.dial()).Predict(ctx, &sidecarpb.PredictRequest{InputData: &sidecarpb.PredictRequest_Input{Input: []byte(body)}})
	if err != nil {
		t.Fatalf("sidecar Predict: %v", err)
	}
	var viaPredict baResponse
	if err := json.Unmarshal(pr.GetOutput(), &viaPredict); err != nil {
		t.Fatalf("sidecar Predict: %s: %v", pr.GetOutput(), err)
	}
	for protocol, r := range map[string]baResponse{"B&A REST": resp, "B&A gRPC (sidecar Predict)": viaPredict} {
		out, err := baOutputs(r, 0)
		if err != nil {
			t.Fatalf("%s: %v", protocol, err)
		}
		checkXGB(t, protocol, exp, out["prediction"], out["margin"])
		for _, tn := range r.Response[0].Tensors {
			if tn.DataType != "FLOAT" || !slices.Equal(tn.TensorShape, []int64{rows}) {
				t.Errorf("%s: output %q is %s %v, want FLOAT [%d]", protocol, tn.TensorName, tn.DataType, tn.TensorShape, rows)
			}
		}
	}

	// OIP REST: JSON, NaN written as the NaN literal.
	code, _, raw := oipPost(t, g, "/v2/models/pcvr_xgb/infer", []byte(fmt.Sprintf(
		`{"inputs": [{"name": "input", "shape": %s, "datatype": "FP32", "data": %s}]}`, shapeJSON(exp.shape()), jsonFloats(exp.values(), "NaN"))), 0)
	var rest struct {
		Outputs []struct {
			Name     string    `json:"name"`
			Datatype string    `json:"datatype"`
			Shape    []int64   `json:"shape"`
			Data     []float64 `json:"data"`
		} `json:"outputs"`
	}
	if code != http.StatusOK || json.Unmarshal(raw, &rest) != nil || len(rest.Outputs) != 2 {
		t.Fatalf("OIP REST: HTTP %d %s", code, raw)
	}
	for _, o := range rest.Outputs {
		if o.Datatype != "FP32" || !slices.Equal(o.Shape, []int64{rows}) {
			t.Errorf("OIP REST: output %q is %s %v, want FP32 [%d]", o.Name, o.Datatype, o.Shape, rows)
		}
	}
	if rest.Outputs[0].Name != "prediction" || rest.Outputs[1].Name != "margin" {
		t.Errorf("OIP REST: outputs %q, %q; want prediction, margin", rest.Outputs[0].Name, rest.Outputs[1].Name)
	}
	checkXGB(t, "OIP REST", exp, rest.Outputs[0].Data, rest.Outputs[1].Data)

	// OIP REST metadata: the feature names among its parameters.
	mr, err := client.Get(g.url + "/v2/models/pcvr_xgb")
	if err != nil {
		t.Fatal(err)
	}
	var restMeta struct {
		Parameters map[string]string `json:"parameters"`
	}
	raw, _ = io.ReadAll(mr.Body)
	mr.Body.Close()
	names, _ := json.Marshal(exp.FeatureNames)
	if json.Unmarshal(raw, &restMeta) != nil || restMeta.Parameters["feature_names"] != string(names) ||
		restMeta.Parameters["objective"] != "binary:logistic" || restMeta.Parameters["signature"] != "runtime" {
		t.Errorf("OIP REST metadata %s: want parameters with signature runtime, objective binary:logistic and feature_names %s", raw, names)
	}

	// OIP gRPC: the metadata, then raw FP32 and typed FP64 inputs.
	c := oippb.NewGRPCInferenceServiceClient(g.dial())
	md, err := c.ModelMetadata(ctx, &oippb.ModelMetadataRequest{Name: "pcvr_xgb"})
	if err != nil || md.GetPlatform() != "xgboost" || len(md.GetInputs()) != 1 || md.Inputs[0].GetName() != "input" ||
		md.Inputs[0].GetDatatype() != "FP32" || !slices.Equal(md.Inputs[0].GetShape(), []int64{-1, int64(len(exp.FeatureNames))}) ||
		len(md.GetOutputs()) != 2 || md.Outputs[0].GetName() != "prediction" || md.Outputs[1].GetName() != "margin" ||
		md.Outputs[0].GetDatatype() != "FP32" || !slices.Equal(md.Outputs[0].GetShape(), []int64{-1}) {
		t.Errorf("ModelMetadata(pcvr_xgb) = %v, %v; want platform xgboost, input FP32 [-1 20], outputs prediction and margin FP32 [-1]", md, err)
	}
	f64 := exp.values()
	for dtype, in := range map[string]*oippb.ModelInferRequest{
		"FP32": {ModelName: "pcvr_xgb", Inputs: []*oippb.ModelInferRequest_InferInputTensor{{Name: "input", Datatype: "FP32", Shape: exp.shape()}},
			RawInputContents: [][]byte{rawLE("FP32", f64)}},
		"FP64": {ModelName: "pcvr_xgb", Inputs: []*oippb.ModelInferRequest_InferInputTensor{{Name: "input", Datatype: "FP64", Shape: exp.shape(),
			Contents: &oippb.InferTensorContents{Fp64Contents: f64}}}},
	} {
		r, err := c.ModelInfer(ctx, in)
		if err != nil {
			t.Errorf("OIP gRPC ModelInfer with %s input: %v", dtype, err)
			continue
		}
		got := map[string][]float64{}
		for i, o := range r.GetOutputs() {
			if o.GetDatatype() != "FP32" || !slices.Equal(o.GetShape(), []int64{rows}) {
				t.Errorf("OIP gRPC (%s input): output %q is %s %v, want FP32 [%d]", dtype, o.GetName(), o.GetDatatype(), o.GetShape(), rows)
			}
			if i < len(r.GetRawOutputContents()) {
				got[o.GetName()] = fromRawLE(t, "FP32", r.RawOutputContents[i])
			} else {
				for _, v := range o.GetContents().GetFp32Contents() {
					got[o.GetName()] = append(got[o.GetName()], float64(v))
				}
			}
		}
		checkXGB(t, "OIP gRPC ("+dtype+" input)", exp, got["prediction"], got["margin"])
	}

	// ForestFlow's score API through the example contract: one Float32
	// schema entry whose fields are the model's feature names, NaN quoted.
	fields, _ := json.Marshal(exp.FeatureNames)
	var datums []string
	n := len(exp.FeatureNames)
	for r := range len(exp.Input) {
		datums = append(datums, `{"tensors":[{"Float32":{"data":`+jsonFloats(exp.values()[r*n:(r+1)*n], `"NaN"`)+`}}]}`)
	}
	ff, err := client.Post(g.url+"/ads/pcvr/1/score", "application/json", strings.NewReader(
		`{"schema":[{"type":"Float32","fields":`+string(fields)+`}],"datum":[`+strings.Join(datums, ",")+`],"configs":{"user_id":"u1"}}`))
	if err != nil {
		t.Fatal(err)
	}
	raw, _ = io.ReadAll(ff.Body)
	ff.Body.Close()
	var p ffPrediction
	if ff.StatusCode != http.StatusOK || json.Unmarshal(raw, &p) != nil || len(p.Prediction.Datum) != len(exp.Input) {
		t.Fatalf("ForestFlow score: HTTP %d %s", ff.StatusCode, raw)
	}
	if got := fmt.Sprint(p.Prediction.Schema); got != "[{Float32 [prediction]} {Float32 [margin]}]" {
		t.Errorf("ForestFlow score: schema %s, want prediction and margin, Float32", got)
	}
	var pred, margin []float64
	for _, d := range p.Prediction.Datum {
		if len(d.Tensors) != 2 || len(d.Tensors[0]["Float32"].Data) != 1 || len(d.Tensors[1]["Float32"].Data) != 1 {
			t.Fatalf("ForestFlow score: datum %+v, want one Float32 prediction and one margin", d)
		}
		pred, margin = append(pred, d.Tensors[0]["Float32"].Data[0]), append(margin, d.Tensors[1]["Float32"].Data[0])
	}
	checkXGB(t, "ForestFlow score", exp, pred, margin)

	// GraphPipe through the same contract: the model's one input, a
	// float32 matrix of rows.
	gpRows := make([][]float32, len(exp.Input))
	for r := range gpRows {
		for _, v := range exp.values()[r*n : (r+1)*n] {
			gpRows[r] = append(gpRows[r], float32(v))
		}
	}
	outs, err := graphpipe.MultiRemote(http.DefaultClient, g.url+"/ads/pcvr/1/gp", []interface{}{gpRows},
		[]string{"input"}, []string{"prediction", "margin"})
	if err != nil || len(outs) != 2 {
		t.Fatalf("GraphPipe: %v %v", outs, err)
	}
	var gp [2][]float64
	for i, o := range outs {
		v, ok := o.([]float32) // shape [rows], as OIP's
		if !ok || len(v) != len(exp.Input) {
			t.Fatalf("GraphPipe output %d: %#v, want %d float32 values", i, o, len(exp.Input))
		}
		for _, x := range v {
			gp[i] = append(gp[i], float64(x))
		}
	}
	checkXGB(t, "GraphPipe", exp, gp[0], gp[1])

	// DeepRec's processor protocol over gRPC, by the model's path.
	in := &deeprecpb.ArrayProto{Dtype: deeprecpb.ArrayDataType_DT_FLOAT, ArrayShape: &deeprecpb.ArrayShape{Dim: exp.shape()}}
	for _, v := range exp.values() {
		in.FloatVal = append(in.FloatVal, float32(v))
	}
	dr, err := deeprecpb.NewProcessorClient(g.dial()).Predict(ctx, &deeprecpb.ProcessorPredictRequest{ModelPath: "pcvr_xgb",
		Request: &deeprecpb.PredictRequest{Inputs: map[string]*deeprecpb.ArrayProto{"input": in}}})
	if err != nil {
		t.Fatalf("DeepRec Predict: %v", err)
	}
	var drOut [2][]float64
	for i, name := range []string{"prediction", "margin"} {
		o := dr.GetOutputs()[name]
		if o.GetDtype() != deeprecpb.ArrayDataType_DT_FLOAT {
			t.Errorf("DeepRec output %q is %v, want DT_FLOAT", name, o.GetDtype())
		}
		for _, v := range o.GetFloatVal() {
			drOut[i] = append(drOut[i], float64(v))
		}
	}
	checkXGB(t, "DeepRec gRPC", exp, drOut[0], drOut[1])
}

// xgbLoad sends the example input to pcvr_xgb/ over B&A from its workers
// until finish, and sorts the answers: v1's (pcvr_xgb's outputs), v2's
// (pcvr_xgb_v2's) or failures (anything else, an error or another
// value). back counts the answers of v1 a worker got after one of v2: the
// switch went back.
type xgbLoad struct {
	v1, v2, failed, back atomic.Int64
	firstFailure         atomic.Value // string
	workers
}

func startXGBLoad(g *grove, v1, v2 xgbExample, n int) *xgbLoad {
	l := &xgbLoad{}
	body := batchJSON(xgbBA(v1, "pcvr_xgb/"))
	sawV2 := make([]bool, n) // each worker's own element
	is := func(out map[string][]float64, e xgbExample) bool {
		return xgbMismatch(out["prediction"], e.Prediction) == "" && xgbMismatch(out["margin"], e.Margin) == ""
	}
	l.start(n, func(w, _ int) {
		code, resp, err := g.infer(body)
		out, itemErr := baOutputs(resp, 0)
		switch {
		case err == nil && code == http.StatusOK && itemErr == nil && is(out, v1):
			l.v1.Add(1)
			if sawV2[w] {
				l.back.Add(1)
			}
		case err == nil && code == http.StatusOK && itemErr == nil && is(out, v2):
			l.v2.Add(1)
			sawV2[w] = true
		default:
			l.failed.Add(1)
			l.firstFailure.CompareAndSwap(nil, fmt.Sprintf("HTTP %d, %v, item: %v %v", code, err, out, itemErr))
		}
	})
	return l
}

// xgbEntry is pcvr_xgb/'s model config entry serving content: its
// checksum, a 500 ms grace period and the example's input as warm-up.
func xgbEntry(e xgbExample, content []byte) modelEntry {
	return modelEntry{Path: "pcvr_xgb/", Checksum: checksumOf(content), GraceMs: 500, WarmUp: batchJSON(xgbBA(e, "pcvr_xgb/"))}
}

// exampleXGBModel reads the example bucket's model.json of name.
func exampleXGBModel(t *testing.T, name string) []byte {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(repoRoot(), "examples", "bucket", name, "model.json"))
	if err != nil {
		t.Fatal(err)
	}
	return data
}

// TestXGBoostFilesWrittenOverUnderLoadBadOnesRefusedAGoodOneTakesOver
// serves pcvr_xgb/ from the example's model.json and, while 4 clients
// send the example input over B&A without a pause, writes other files
// over it, each with its checksum in the config. First the bad ones: the
// file cut in half, a gblinear model and a binary:hinge model (valid
// XGBoost files of it/testdata/xgboost that the runtime refuses); after
// each, /v1/status shows the error naming what is wrong while the model
// stays ready on the previous checksum and keeps answering its values.
// Then pcvr_xgb_v2's model.json: it loads and warms up beside the old
// content and takes over, no client gets the old model's answer after
// the new one's, and the status ends on its checksum with no error. Not
// one request fails, and every answer is one of the two models' values as
// python3-xgboost computed them.
//
// Budget: 15 s.
func TestXGBoostFilesWrittenOverUnderLoadBadOnesRefusedAGoodOneTakesOver(t *testing.T) {
	t.Parallel()
	e1, e2 := loadXGBExamples(t)
	v1, v2 := exampleXGBModel(t, "pcvr_xgb"), exampleXGBModel(t, "pcvr_xgb_v2")
	refused := func(name string) []byte {
		data, err := os.ReadFile(filepath.Join(repoRoot(), "it", "testdata", "xgboost", name))
		if err != nil {
			t.Fatal(err)
		}
		return data
	}
	b := newDirBucket(t)
	b.Put(t, "pcvr_xgb/model.json", v1)
	putConfig(t, b, xgbEntry(e1, v1))
	g := startGrove(t, b.URL(), nil)

	l := startXGBLoad(g, e1, e2, 4)
	defer l.finish()
	g.waitFor("the first model to answer", 10*time.Second, func() bool { return l.v1.Load() >= 20 || l.failed.Load() > 0 })
	for _, bad := range []struct {
		what string
		data []byte
		says string // what /v1/status's last_error must contain
	}{
		{"the model file cut in half", v1[:len(v1)/2], "invalid XGBoost model"},
		{"a gblinear model", refused("gblinear.json"), "gblinear"},
		{"a binary:hinge model", refused("hinge.json"), `objective "binary:hinge"`},
	} {
		b.Put(t, "pcvr_xgb/model.json", bad.data)
		putConfig(t, b, xgbEntry(e1, bad.data))
		g.waitFor("the error of "+bad.what+" in /v1/status", 10*time.Second, func() bool {
			_, _, lastErr := g.status().model("pcvr_xgb/")
			return strings.Contains(lastErr, bad.says)
		})
		state, sum, lastErr := g.status().model("pcvr_xgb/")
		if state != "ready" || sum != checksumOf(v1) {
			t.Errorf("after %s: pcvr_xgb/ is %q on checksum %s, want ready on the previous %s", bad.what, state, sum, checksumOf(v1))
		}
		t.Logf("%s: last_error %q", bad.what, lastErr)
		n := l.v1.Load()
		g.waitFor("the previous content to answer after "+bad.what, 10*time.Second, func() bool { return l.v1.Load() >= n+20 || l.failed.Load() > 0 })
	}
	if n, v2s := l.failed.Load(), l.v2.Load(); n != 0 || v2s != 0 {
		t.Fatalf("%d requests failed and %d were answered by another model while the bad files were refused; first failure: %v", n, v2s, l.firstFailure.Load())
	}
	refusedV1 := l.v1.Load()

	b.Put(t, "pcvr_xgb/model.json", v2)
	putConfig(t, b, xgbEntry(e1, v2))
	g.waitFor("the new model to answer", 10*time.Second, func() bool { return l.v2.Load() >= 50 || l.failed.Load() > 0 })
	time.Sleep(time.Second) // past the old content's grace period, still under load
	l.finish()
	if n := l.failed.Load(); n != 0 {
		t.Fatalf("%d of %d requests failed; first: %v", n, n+l.v1.Load()+l.v2.Load(), l.firstFailure.Load())
	}
	if n := l.back.Load(); n != 0 {
		t.Errorf("%d answers of the old model came to a client after the new model had answered it", n)
	}
	t.Logf("%d requests: %d answered by the first model while the bad files were refused, %d more during the update, %d by the new model; none failed",
		l.v1.Load()+l.v2.Load(), refusedV1, l.v1.Load()-refusedV1, l.v2.Load())
	if state, sum, lastErr := g.status().model("pcvr_xgb/"); state != "ready" || sum != checksumOf(v2) || lastErr != "" {
		t.Errorf("after the update: pcvr_xgb/ is %q on %s with last_error %q, want ready on the new checksum %s with none", state, sum, lastErr, checksumOf(v2))
	}
}
