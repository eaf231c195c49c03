package xgboost

import (
	"context"
	"errors"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"testing/fstest"

	"github.com/groveml/grove/servables"
)

// TestAcceptsXGBoostModelsByContent: a file is taken for its content
// (a learner as XGBoost writes it, in JSON, UBJSON or the legacy format),
// whatever its name; other JSON files are not, nor two models.
func TestAcceptsXGBoostModelsByContent(t *testing.T) {
	model := readTestdata(t, "squarederror.json")
	fsys := fstest.MapFS{
		"model.json":        {Data: model},
		"noext":             {Data: model},
		"model.ubj":         {Data: readTestdata(t, "squarederror.ubj")},
		"config.json":       {Data: []byte(`{"inputs":[{"name":"x"}]}`)},
		"expected.json":     {Data: readTestdata(t, "squarederror.expected.json")},
		"README.md":         {Data: []byte("# a model")},
		"sub/other.model":   {Data: readTestdata(t, "refused_legacy.model")},
		"model.onnx.readme": {Data: []byte("learner")},
	}
	for _, c := range []struct {
		files []string
		want  bool
	}{
		{[]string{"model.json", "config.json", "README.md"}, true},
		{[]string{"noext"}, true},
		{[]string{"model.ubj"}, true},
		{[]string{"sub/other.model"}, true},
		{[]string{"config.json", "expected.json", "README.md", "model.onnx.readme"}, false},
		{[]string{"model.json", "noext"}, false},
		{[]string{"missing.json"}, false},
		{nil, false},
	} {
		if got := (Runtime{}).Accepts(fsys, c.files); got != c.want {
			t.Errorf("Accepts(%v) = %v, want %v", c.files, got, c.want)
		}
	}
}

// modelDir puts testdata/name in a temporary model directory as file.
func modelDir(t *testing.T, name, file string) string {
	t.Helper()
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, file), readTestdata(t, name), 0o644); err != nil {
		t.Fatal(err)
	}
	return dir
}

func load(t *testing.T, name string) servables.Servable {
	t.Helper()
	return loadWith(t, name+".json", servables.LoadOptions{})
}

// loadWith loads testdata/file through the runtime, as an extension-less
// file named model (the runtime tells the format by content).
func loadWith(t *testing.T, file string, opts servables.LoadOptions) servables.Servable {
	t.Helper()
	sv, err := Runtime{}.Load(context.Background(), modelDir(t, file, "model"), []string{"model"}, opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { sv.Close() })
	return sv
}

// inputTensor makes the expected file's input matrix an FP32 or FP64 tensor.
func inputTensor(t *testing.T, e expected, dt servables.DType, name string) servables.Tensor {
	t.Helper()
	x, rows := e.matrix()
	in, err := servables.NewTensor(name, dt, []int64{int64(rows), int64(len(x) / rows)})
	if err != nil {
		t.Fatal(err)
	}
	for i, v := range x {
		if dt == servables.Float32 {
			in.Float32s()[i] = v
		} else {
			in.Float64s()[i] = float64(v)
		}
	}
	return in
}

// TestServablePredictsAsPythonXGBoost: the loaded servable answers
// prediction and margin, shaped as python3-xgboost shapes them, with its
// values, for FP32 and FP64 inputs, named or not.
func TestServablePredictsAsPythonXGBoost(t *testing.T) {
	for _, name := range []string{"multi_softprob", "binary_logistic", "multi_softmax"} {
		_, e := loadCase(t, name)
		sv := load(t, name)
		for _, dt := range []servables.DType{servables.Float32, servables.Float64} {
			for _, inName := range []string{"", InputName} {
				out, err := sv.Predict(context.Background(), []servables.Tensor{inputTensor(t, e, dt, inName)})
				if err != nil {
					t.Fatalf("%s %v: %v", name, dt, err)
				}
				if len(out) != 2 || out[0].Name != PredictionName || out[1].Name != MarginName {
					t.Fatalf("%s: outputs %v", name, servables.Sent(out))
				}
				for k, want := range []struct {
					shape  []int
					values []float64
				}{{e.PredictionShape, e.Prediction}, {e.MarginShape, e.Margin}} {
					if len(out[k].Shape) != len(want.shape) {
						t.Errorf("%s: %s shape %v, python3-xgboost's %v", name, out[k].Name, out[k].Shape, want.shape)
					}
					for d := range min(len(out[k].Shape), len(want.shape)) {
						if out[k].Shape[d] != int64(want.shape[d]) {
							t.Errorf("%s: %s shape %v, python3-xgboost's %v", name, out[k].Name, out[k].Shape, want.shape)
						}
					}
					compare(t, name+" "+out[k].Name, out[k].Float32s(), want.values)
				}
			}
		}
	}
}

// TestMetadataListsSignatureAndFeatureNames: the metadata has the input,
// both outputs and the file's parameters, feature names among them.
func TestMetadataListsSignatureAndFeatureNames(t *testing.T) {
	meta := load(t, "multi_softprob").Metadata()
	specs := func(s []servables.TensorSpec) string {
		parts := make([]string, len(s))
		for i, x := range s {
			parts[i] = x.FormatDTypes(servables.OIPName)
		}
		return strings.Join(parts, ", ")
	}
	if got, want := specs(meta.Inputs), "input FP32 [-1 5]"; got != want {
		t.Errorf("inputs %s, want %s", got, want)
	}
	if got, want := specs(meta.Outputs), "prediction FP32 [-1 3], margin FP32 [-1 3]"; got != want {
		t.Errorf("outputs %s, want %s", got, want)
	}
	p := meta.Parameters
	for k, want := range map[string]string{
		"objective":       "multi:softprob",
		"booster":         "gbtree",
		"num_trees":       "18",
		"num_class":       "3",
		"num_feature":     "5",
		"feature_names":   `["age","bid","ctr_7d","slot","hour"]`,
		"xgboost_version": "1.7.4",
	} {
		if p[k] != want {
			t.Errorf("parameter %s = %q, want %q", k, p[k], want)
		}
	}
	if meta.Runtime != RuntimeName || meta.Signature != servables.SignatureRuntime {
		t.Errorf("runtime %q, signature %q", meta.Runtime, meta.Signature)
	}
}

// TestLoadRefusesUnsupportedFilesSayingWhat: a file the runtime takes but
// cannot serve fails the load with an error naming what and the file.
func TestLoadRefusesUnsupportedFilesSayingWhat(t *testing.T) {
	for _, c := range []struct{ file, says string }{
		{"refused_legacy.model", "legacy binary"},
		{"refused_gblinear.json", "gblinear"},
		{"refused_gblinear.ubj", "gblinear"},
	} {
		dir := modelDir(t, c.file, "model")
		_, err := Runtime{}.Load(context.Background(), dir, []string{"model"}, servables.LoadOptions{})
		if !errors.Is(err, ErrUnsupported) || !strings.Contains(err.Error(), c.says) || !strings.Contains(err.Error(), dir) {
			t.Errorf("%s: %v; want an unsupported-model error naming %q and the file", c.file, err, c.says)
		}
	}
}

// TestPredictRefusesInputsThatDoNotFit: the wrong count, name, datatype,
// rank or width is an InvalidInput error listing the model's input.
func TestPredictRefusesInputsThatDoNotFit(t *testing.T) {
	sv := load(t, "squarederror")
	_, e := loadCase(t, "squarederror")
	good := inputTensor(t, e, servables.Float32, "")
	ints, _ := servables.NewTensor("", servables.Int32, []int64{2, 5})
	narrow, _ := servables.NewTensor("", servables.Float32, []int64{2, 4})
	flat, _ := servables.NewTensor("", servables.Float32, []int64{10})
	short := good
	short.Data = short.Data[:len(short.Data)-4]
	named := good
	named.Name = "x"
	for _, c := range []struct {
		name   string
		inputs []servables.Tensor
		says   string
	}{
		{"none", nil, "got 0 input tensors"},
		{"two", []servables.Tensor{good, good}, "got 2 input tensors"},
		{"unknown name", []servables.Tensor{named}, `unknown input "x"`},
		{"INT32", []servables.Tensor{ints}, "is INT32"},
		{"4 features", []servables.Tensor{narrow}, "shape [2 4]"},
		{"rank 1", []servables.Tensor{flat}, "shape [10]"},
		{"short data", []servables.Tensor{short}, "bytes"},
	} {
		_, err := sv.Predict(context.Background(), c.inputs)
		if servables.KindOf(err) != servables.InvalidInput || !strings.Contains(err.Error(), c.says) || !strings.Contains(err.Error(), "input FLOAT [-1 5]") {
			t.Errorf("%s: %v; want an invalid-input error saying %q and listing the input", c.name, err, c.says)
		}
	}
}

// TestPredictAfterCloseOrCancelFails: a closed model and a done context
// do not run.
func TestPredictAfterCloseOrCancelFails(t *testing.T) {
	sv := load(t, "squarederror")
	_, e := loadCase(t, "squarederror")
	in := []servables.Tensor{inputTensor(t, e, servables.Float32, "")}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := sv.Predict(ctx, in); !errors.Is(err, context.Canceled) {
		t.Errorf("Predict on a canceled context: %v", err)
	}
	sv.Close()
	if _, err := sv.Predict(context.Background(), in); servables.KindOf(err) != servables.Unavailable {
		t.Errorf("Predict after Close: %v", err)
	}
}

// TestMissingValuesTakeTheDefaultDirection: a row of NaN gets the same
// margin as python3-xgboost gives it (the first row of every case is all
// missing) — and not the margin of a row of zeros.
func TestMissingValuesTakeTheDefaultDirection(t *testing.T) {
	f, e := loadCase(t, "binary_logistic")
	nan, zeros := make([]float32, f.NumFeature), make([]float32, f.NumFeature)
	for i := range nan {
		nan[i] = float32(math.NaN())
	}
	m := make([]float32, 2)
	if err := f.Margins(append(nan, zeros...), 2, m); err != nil {
		t.Fatal(err)
	}
	if !near(m[0], e.Margin[0]) || m[0] == m[1] {
		t.Errorf("all missing: margin %v (zeros: %v), python3-xgboost says %v", m[0], m[1], e.Margin[0])
	}
}

// TestServableReadsUBJSONFiles: a model.ubj loads through the runtime and
// answers as python3-xgboost does, categorical splits included.
func TestServableReadsUBJSONFiles(t *testing.T) {
	for _, name := range []string{"binary_logistic", "cat_multi_softprob"} {
		_, e := loadCase(t, name)
		sv := loadWith(t, name+".ubj", servables.LoadOptions{})
		out, err := sv.Predict(context.Background(), []servables.Tensor{inputTensor(t, e, servables.Float32, "")})
		if err != nil {
			t.Fatal(err)
		}
		compare(t, name+" prediction", out[0].Float32s(), e.Prediction)
		compare(t, name+" margin", out[1].Float32s(), e.Margin)
	}
}

// TestMissingValueIsMissingAsNaNIs: a model trained with DMatrix(missing=
// -999) and loaded with missing_value -999 answers as python3-xgboost
// does, for FP32 and FP64 inputs (-999 and NaN both missing); loaded
// without it, it answers otherwise. The caller's input is left as it was.
func TestMissingValueIsMissingAsNaNIs(t *testing.T) {
	_, e := loadCase(t, "missing_sentinel")
	if e.MissingValue == nil || *e.MissingValue != -999 {
		t.Fatalf("missing_sentinel.expected.json has missing_value %v, want -999", e.MissingValue)
	}
	sv := loadWith(t, "missing_sentinel.json", e.loadOptions())
	for _, dt := range []servables.DType{servables.Float32, servables.Float64} {
		in := inputTensor(t, e, dt, "")
		before := slices.Clone(in.Data)
		out, err := sv.Predict(context.Background(), []servables.Tensor{in})
		if err != nil {
			t.Fatal(err)
		}
		compare(t, dt.String()+" prediction", out[0].Float32s(), e.Prediction)
		if !slices.Equal(in.Data, before) {
			t.Errorf("%v: Predict changed its input", dt)
		}
	}
	if got := sv.Metadata().Parameters["missing_value"]; got != "-999" {
		t.Errorf("parameter missing_value = %q, want -999", got)
	}
	plain := loadWith(t, "missing_sentinel.json", servables.LoadOptions{})
	out, err := plain.Predict(context.Background(), []servables.Tensor{inputTensor(t, e, servables.Float32, "")})
	if err != nil {
		t.Fatal(err)
	}
	differ := 0
	for i, v := range out[0].Float32s() {
		if !near(v, e.Prediction[i]) {
			differ++
		}
	}
	if differ == 0 {
		t.Error("without missing_value, -999 taken as a value: the same predictions")
	}
	if _, ok := plain.Metadata().Parameters["missing_value"]; ok {
		t.Error("parameter missing_value without one given")
	}
}

// TestLoadRefusesNonFiniteMissingValue: a missing value has to be a
// finite float32.
func TestLoadRefusesNonFiniteMissingValue(t *testing.T) {
	for _, v := range []float64{math.NaN(), math.Inf(1), math.Inf(-1), 1e300} {
		dir := modelDir(t, "squarederror.json", "model.json")
		_, err := Runtime{}.Load(context.Background(), dir, []string{"model.json"}, servables.LoadOptions{MissingValue: &v})
		if err == nil || !strings.Contains(err.Error(), "missing_value") {
			t.Errorf("missing_value %v: %v, want an error naming it", v, err)
		}
	}
}

// TestMetadataListsFeatureTypes: a categorical model's metadata lists its
// feature types beside its names.
func TestMetadataListsFeatureTypes(t *testing.T) {
	p := load(t, "cat_binary_logistic").Metadata().Parameters
	if got, want := p["feature_types"], `["q","c","q","c","q"]`; got != want {
		t.Errorf("feature_types = %s, want %s", got, want)
	}
	if got, want := p["feature_names"], `["bid","domain","ctr_7d","device","hour"]`; got != want {
		t.Errorf("feature_names = %s, want %s", got, want)
	}
	if _, ok := load(t, "squarederror").Metadata().Parameters["feature_types"]; ok {
		t.Error("feature_types for a model whose file has none")
	}
}
