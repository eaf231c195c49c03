package onnx

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"strconv"
	"strings"
	"sync"
	"testing"
	"testing/fstest"

	ort "github.com/yalue/onnxruntime_go"

	"github.com/groveml/grove/internal/mallocarena"
	"github.com/groveml/grove/servables"
	"github.com/groveml/grove/servables/torch"
)

const bucket = "../../examples/bucket"

var (
	pctrONNX  = filepath.Join(bucket, "pctr_onnx", "model.onnx")
	pctrTorch = filepath.Join(bucket, "pctr_v1", "model.pt")
)

// xSpec is how error messages describe pctr_onnx's input.
const xSpec = "x FLOAT [-1 64]"

func load(t testing.TB, file string, opts servables.LoadOptions) *Model {
	t.Helper()
	s, err := Runtime{}.Load(context.Background(), filepath.Dir(file), []string{filepath.Base(file)}, opts)
	if err != nil {
		t.Fatalf("Load(%s): %v", file, err)
	}
	t.Cleanup(func() { s.Close() })
	return s.(*Model)
}

func testdata(name string) string { return filepath.Join("testdata", name+".onnx") }

func tensor(t testing.TB, name string, dt servables.DType, shape []int64, values ...float64) servables.Tensor {
	t.Helper()
	x, err := servables.NewTensor(name, dt, shape)
	if err != nil {
		t.Fatal(err)
	}
	if len(values) != x.Len() {
		t.Fatalf("%d values for shape %v", len(values), shape)
	}
	for i, v := range values {
		switch dt {
		case servables.Float32:
			x.Float32s()[i] = float32(v)
		case servables.Float64:
			x.Float64s()[i] = v
		case servables.Int8:
			x.Int8s()[i] = int8(v)
		case servables.Int16:
			x.Int16s()[i] = int16(v)
		case servables.Int32:
			x.Int32s()[i] = int32(v)
		case servables.Bool:
			x.Bools()[i] = v != 0
		case servables.Uint8:
			x.Uint8s()[i] = uint8(v)
		case servables.Int64:
			x.Int64s()[i] = int64(v)
		}
	}
	return x
}

func values(x servables.Tensor) []float64 {
	out := make([]float64, x.Len())
	for i := range out {
		out[i] = x.Float64At(i)
	}
	return out
}

// rows returns a float32 [batch, 64] tensor named name with varied values.
func rows(t testing.TB, name string, batch int) servables.Tensor {
	v := make([]float64, batch*64)
	for i := range v {
		v[i] = math.Sin(float64(i)*0.37) * 1.5
	}
	return tensor(t, name, servables.Float32, []int64{int64(batch), 64}, v...)
}

func predict(t testing.TB, m servables.Servable, inputs ...servables.Tensor) []servables.Tensor {
	t.Helper()
	out, err := m.Predict(context.Background(), inputs)
	if err != nil {
		t.Fatalf("Predict: %v", err)
	}
	return out
}

func closeTo(t testing.TB, what string, got, want []float64, tol float64) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("%s: %d values, want %d", what, len(got), len(want))
	}
	bad := 0
	for i := range got {
		if math.Abs(got[i]-want[i]) > tol {
			if bad++; bad <= 5 {
				t.Errorf("%s[%d] = %v, want %v (±%g)", what, i, got[i], want[i], tol)
			}
		}
	}
}

// expected.json, as written by examples/models/make_models.py.
type expectedTensor struct {
	Name     string    `json:"name"`
	DataType string    `json:"datatype"`
	Shape    []int64   `json:"shape"`
	Data     []float64 `json:"data"`
}

type expectedModel struct {
	Inputs  []expectedTensor `json:"inputs"`
	Outputs []expectedTensor `json:"outputs"`
}

func readExpected(t testing.TB) map[string]expectedModel {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(bucket, "expected.json"))
	if err != nil {
		t.Fatal(err)
	}
	var e map[string]expectedModel
	if err := json.Unmarshal(b, &e); err != nil {
		t.Fatal(err)
	}
	return e
}

func (e expectedTensor) tensor(t testing.TB) servables.Tensor {
	dt, ok := servables.ParseDType(e.DataType)
	if !ok {
		t.Fatalf("dtype %q", e.DataType)
	}
	return tensor(t, e.Name, dt, e.Shape, e.Data...)
}

func TestRuntimeIsNamedOnnx(t *testing.T) {
	if got := (Runtime{}).Name(); got != "onnx" {
		t.Errorf("Name() = %q", got)
	}
}

func TestAcceptsExactlyOneONNXFile(t *testing.T) {
	for _, c := range []struct {
		files []string
		want  bool
	}{
		{[]string{"model.onnx"}, true},
		{[]string{"model.onnx", "model.onnx.data", "README.md"}, true},
		{[]string{"sub/net.ONNX"}, true},
		{[]string{"a.onnx", "b.onnx"}, false},
		{[]string{"model.pt"}, false},
		{[]string{"saved_model.pb"}, false},
		{nil, false},
	} {
		if got := (Runtime{}).Accepts(fstest.MapFS{}, c.files); got != c.want {
			t.Errorf("Accepts(%q) = %v, want %v", c.files, got, c.want)
		}
	}
	_, err := Runtime{}.Load(context.Background(), "testdata", []string{"mixed.onnx", "scalar.onnx"}, servables.LoadOptions{})
	if !errors.Is(err, servables.ErrUnsupportedRuntime) {
		t.Errorf("Load of two .onnx files: %v, want ErrUnsupportedRuntime", err)
	}
}

// The registry of cmd/grove: .pt models go to TorchScript, .onnx ones here.
func TestRegistryRoutesONNXModelsHere(t *testing.T) {
	reg := servables.Registry{torch.Runtime{}, Runtime{}}
	for files, want := range map[string]string{"model.onnx": "onnx", "model.pt": "torchscript"} {
		rt, err := reg.Find(fstest.MapFS{}, []string{files})
		if err != nil || rt.Name() != want {
			t.Errorf("Find(%s) = %v, %v; want %s", files, rt, err, want)
		}
	}
}

func TestPCTRMatchesExpectedJSON(t *testing.T) {
	// pctr_onnx is pctr_v1's module exported to ONNX (make_models.py): its
	// expected outputs are pctr_v1's.
	want := readExpected(t)["pctr_v1"]
	if len(want.Inputs) != 1 || len(want.Outputs) != 1 {
		t.Fatalf("expected.json pctr_v1 entry: %+v", want)
	}
	m := load(t, pctrONNX, servables.LoadOptions{})
	got := predict(t, m, want.Inputs[0].tensor(t))
	if len(got) != 1 {
		t.Fatalf("%d outputs", len(got))
	}
	w := want.Outputs[0]
	if g := got[0]; g.Name != w.Name || g.DType.String() != w.DataType || fmt.Sprint(g.Shape) != fmt.Sprint(w.Shape) {
		t.Fatalf("output is %s %v %v, want %s %s %v", g.Name, g.DType, g.Shape, w.Name, w.DataType, w.Shape)
	}
	closeTo(t, "output_0", values(got[0]), w.Data, 1e-5)
}

func TestPCTRMatchesTorchScript(t *testing.T) {
	onnxModel := load(t, pctrONNX, servables.LoadOptions{})
	ts, err := torch.Runtime{}.Load(context.Background(), filepath.Dir(pctrTorch), []string{"model.pt"}, servables.LoadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer ts.Close()
	for _, batch := range []int{1, 64} {
		t.Run(fmt.Sprintf("batch=%d", batch), func(t *testing.T) {
			x := rows(t, "x", batch)
			got := predict(t, onnxModel, x)
			want := predict(t, ts, x)
			if len(got) != 1 || got[0].DType != servables.Float32 || fmt.Sprint(got[0].Shape) != fmt.Sprintf("[%d 1]", batch) {
				t.Fatalf("got %d outputs, first %v %v", len(got), got[0].DType, got[0].Shape)
			}
			closeTo(t, "ONNX vs TorchScript", values(got[0]), values(want[0]), 1e-5)
		})
	}
}

func TestMetadata(t *testing.T) {
	for name, want := range map[string]string{
		pctrONNX: `{"runtime":"onnx","inputs":[{"name":"x","datatype":"FLOAT","shape":[-1,64]}],"outputs":[{"name":"output_0","datatype":"FLOAT","shape":[-1,1]}]}`,
		testdata("mixed"): `{"runtime":"onnx","inputs":[{"name":"ids","datatype":"INT64","shape":[-1,2]},{"name":"w","datatype":"FLOAT","shape":[-1,1]}],` +
			`"outputs":[{"name":"weighted","datatype":"FLOAT","shape":[-1,2]},{"name":"total","datatype":"DOUBLE","shape":[-1]}]}`,
		testdata("scalar"): `{"runtime":"onnx","inputs":[{"name":"x","datatype":"FLOAT","shape":[-1]},{"name":"s","datatype":"FLOAT","shape":[]}],` +
			`"outputs":[{"name":"y","datatype":"FLOAT","shape":[-1]}]}`,
		testdata("torch_half_out"): `{"runtime":"onnx","inputs":[{"name":"x","datatype":"FLOAT","shape":[-1,4]}],` +
			`"outputs":[{"name":"positive","datatype":"BOOL","shape":[-1,4]},{"name":"half","datatype":"FLOAT16","shape":[-1,4]}]}`,
		testdata("torch_half_in"): `{"runtime":"onnx","inputs":[{"name":"h","datatype":"FLOAT16","shape":[-1,4]},{"name":"x","datatype":"FLOAT","shape":[-1,4]}],` +
			`"outputs":[{"name":"scaled","datatype":"FLOAT","shape":[-1,4]}]}`,
		testdata("bfloat"): `{"runtime":"onnx","inputs":[{"name":"b","datatype":"BFLOAT16","shape":[-1,2]},{"name":"x","datatype":"FLOAT","shape":[-1,2]}],` +
			`"outputs":[{"name":"same","datatype":"BFLOAT16","shape":[-1,2]},{"name":"wide","datatype":"FLOAT","shape":[-1,2]},{"name":"narrow","datatype":"BFLOAT16","shape":[-1,2]}]}`,
		testdata("uint16_in"): `{"runtime":"onnx","inputs":[{"name":"u","datatype":"UNKNOWN","shape":[-1,4]},{"name":"x","datatype":"FLOAT","shape":[-1,4]}],` +
			`"outputs":[{"name":"y","datatype":"FLOAT","shape":[-1,4]}]}`,
		testdata("mask"): `{"runtime":"onnx","inputs":[{"name":"mask","datatype":"BOOL","shape":[-1,4]},{"name":"x","datatype":"UINT8","shape":[-1,4]}],` +
			`"outputs":[{"name":"masked","datatype":"BOOL","shape":[-1,4]},{"name":"next","datatype":"UINT8","shape":[-1,4]}]}`,
	} {
		b, err := json.Marshal(load(t, name, servables.LoadOptions{}).Metadata())
		if err != nil {
			t.Fatal(err)
		}
		want = strings.TrimSuffix(want, "}") + `,"signature":"runtime"}` // read from the model
		if string(b) != want {
			t.Errorf("%s: Metadata = %s\nwant %s", name, b, want)
		}
	}
}

func TestInputsMatchByNameInAnyOrderOrByPositionWhenUnnamed(t *testing.T) {
	m := load(t, testdata("mixed"), servables.LoadOptions{})
	ids := tensor(t, "ids", servables.Int64, []int64{3, 2}, 1, 2, 3, 4, -5, 6)
	w := tensor(t, "w", servables.Float32, []int64{3, 1}, 0.5, 2, -1)
	check := func(what string, out []servables.Tensor) {
		t.Helper()
		if len(out) != 2 || out[0].Name != "weighted" || out[1].Name != "total" {
			t.Fatalf("%s: outputs %v", what, out)
		}
		if out[0].DType != servables.Float32 || fmt.Sprint(out[0].Shape) != "[3 2]" || out[1].DType != servables.Float64 || fmt.Sprint(out[1].Shape) != "[3]" {
			t.Errorf("%s: outputs %v %v and %v %v", what, out[0].DType, out[0].Shape, out[1].DType, out[1].Shape)
		}
		closeTo(t, what+" weighted", values(out[0]), []float64{0.5, 1, 6, 8, 5, -6}, 0)
		closeTo(t, what+" total", values(out[1]), []float64{1.5, 14, -1}, 0)
	}
	check("in model order", predict(t, m, ids, w))
	check("reversed", predict(t, m, w, ids))
	ids.Name, w.Name = "", ""
	check("unnamed, positional", predict(t, m, ids, w))
}

func TestInvalidInputsNameTheExpectedInputs(t *testing.T) {
	pctr := load(t, pctrONNX, servables.LoadOptions{})
	mixed := load(t, testdata("mixed"), servables.LoadOptions{})
	scalar := load(t, testdata("scalar"), servables.LoadOptions{})
	unsupported := load(t, testdata("uint16_in"), servables.LoadOptions{})
	mask := load(t, testdata("mask"), servables.LoadOptions{})
	mixedSpecs := []string{"ids INT64 [-1 2]", "w FLOAT [-1 1]"}
	ids := tensor(t, "ids", servables.Int64, []int64{1, 2}, 1, 2)
	w := tensor(t, "w", servables.Float32, []int64{1, 1}, 1)
	f32 := func(name string, shape ...int64) servables.Tensor {
		n, _ := servables.NumElements(shape)
		return tensor(t, name, servables.Float32, shape, make([]float64, n)...)
	}
	short := rows(t, "x", 2)
	short.Data = short.Data[:len(short.Data)-4]
	for _, c := range []struct {
		name   string
		m      *Model
		inputs []servables.Tensor
		says   []string
	}{
		{"missing input", mixed, []servables.Tensor{ids}, append([]string{`missing input "w"`}, mixedSpecs...)},
		{"no input", pctr, nil, []string{`missing input "x"`, xSpec}},
		{"unknown name", pctr, []servables.Tensor{rows(t, "features", 1)}, []string{`unknown input "features"`, xSpec}},
		{"unknown extra name", mixed, []servables.Tensor{ids, w, f32("bias", 1, 1)}, append([]string{`unknown input "bias"`}, mixedSpecs...)},
		{"name given twice", mixed, []servables.Tensor{ids, w, ids}, append([]string{`input "ids" is given twice`}, mixedSpecs...)},
		{"named and unnamed", mixed, []servables.Tensor{ids, f32("", 1, 1)}, append([]string{"input 1 has no name"}, mixedSpecs...)},
		{"too many unnamed", pctr, []servables.Tensor{rows(t, "", 1), rows(t, "", 1)}, []string{"got 2 unnamed input tensors, the model takes 1", xSpec}},
		{"wrong dtype", pctr, []servables.Tensor{tensor(t, "x", servables.Float64, []int64{1, 64}, make([]float64, 64)...)}, []string{`input "x" is DOUBLE, the model takes FLOAT`, xSpec}},
		{"wrong dtype, positional", mixed, []servables.Tensor{f32("", 1, 2), f32("", 1, 1)}, append([]string{`input "ids" is FLOAT, the model takes INT64`}, mixedSpecs...)},
		{"wrong trailing dim", pctr, []servables.Tensor{f32("x", 2, 63)}, []string{`input "x" has shape [2 63], the model takes [-1 64] (dimension 1 must be 64)`, xSpec}},
		{"rank 1", pctr, []servables.Tensor{f32("x", 64)}, []string{`input "x" has shape [64] (rank 1), the model takes rank 2 [-1 64]`, xSpec}},
		{"rank 3", pctr, []servables.Tensor{f32("x", 1, 1, 64)}, []string{"(rank 3), the model takes rank 2", xSpec}},
		{"data does not fill the shape", pctr, []servables.Tensor{short}, []string{`input 0 ("x")`, "do not fill shape [2 64]", xSpec}},
		{"too few unnamed", scalar, []servables.Tensor{f32("", 3)}, []string{"got 1 unnamed input tensors, the model takes 2", "x FLOAT [-1], s FLOAT []"}},
		{"input of a type Grove cannot send", unsupported, []servables.Tensor{f32("u", 1, 4), f32("x", 1, 4)}, []string{`input "u" is u UINT16 [-1 4] in the model, a type Grove cannot send`, "x FLOAT [-1 4]"}},
		{"wrong dtype, bool", mask, []servables.Tensor{tensor(t, "mask", servables.Uint8, []int64{1, 4}, 1, 0, 1, 0), tensor(t, "x", servables.Uint8, []int64{1, 4}, 1, 2, 3, 4)}, []string{`input "mask" is UINT8, the model takes BOOL`, "mask BOOL [-1 4], x UINT8 [-1 4]"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, err := c.m.Predict(context.Background(), c.inputs)
			if !errors.Is(err, servables.ErrInvalidInput) {
				t.Fatalf("Predict: %v, want ErrInvalidInput", err)
			}
			for _, s := range c.says {
				if !strings.Contains(err.Error(), s) {
					t.Errorf("error %q does not say %q", err, s)
				}
			}
		})
	}
	// The model still answers after all that.
	closeTo(t, "pctr after bad calls", values(predict(t, pctr, rows(t, "x", 1))[0]), values(predict(t, pctr, rows(t, "", 1))[0]), 0)
}

// ONNX Runtime's own input checks (for inputs whose shape the model does not
// record, which Predict leaves to it) are the caller's fault too.
func TestONNXRuntimeInputErrorsAreInvalidInput(t *testing.T) {
	m := load(t, testdata("scalar"), servables.LoadOptions{})
	for msg, invalid := range map[string]bool{
		"Error running network: [ONNXRuntimeError] : 2 : INVALID_ARGUMENT : Invalid rank for input: s Got: 1 Expected: 0 Please fix either the inputs/outputs or the model.": true,
		"Error running network: [ONNXRuntimeError] : 2 : INVALID_ARGUMENT : Got invalid dimensions for input: x for the following indices":                                   true,
		"Error running network: [ONNXRuntimeError] : 2 : INVALID_ARGUMENT : Unexpected input data type. Actual: (tensor(double)) , expected: (tensor(float))":                true,
		"Error running network: [ONNXRuntimeError] : 6 : RUNTIME_EXCEPTION : Non-zero status code returned while running MatMul node.":                                       false,
	} {
		err := m.runError(errors.New(msg))
		if errors.Is(err, servables.ErrInvalidInput) != invalid || !strings.Contains(err.Error(), msg) {
			t.Errorf("runError(%q) = %v, invalid input %v", msg, err, invalid)
		}
		if invalid && !strings.Contains(err.Error(), "x FLOAT [-1], s FLOAT []") {
			t.Errorf("runError(%q) = %v does not list the inputs", msg, err)
		}
		if !invalid && (!errors.Is(err, servables.ErrExecution) || servables.KindOf(err) != servables.Execution) {
			t.Errorf("runError(%q) = %v", msg, err)
		}
	}
}

func TestBoolAndUint8BothWays(t *testing.T) {
	// mask.onnx: (mask bool [batch, 4], x uint8 [batch, 4]) -> (masked = mask AND (x > 3), next = x + 1).
	m := load(t, testdata("mask"), servables.LoadOptions{})
	out := predict(t, m,
		tensor(t, "x", servables.Uint8, []int64{2, 4}, 0, 4, 9, 254, 7, 3, 200, 5),
		tensor(t, "mask", servables.Bool, []int64{2, 4}, 1, 1, 0, 1, 0, 1, 1, 1))
	if len(out) != 2 || out[0].Name != "masked" || out[1].Name != "next" {
		t.Fatalf("outputs %+v", out)
	}
	if out[0].DType != servables.Bool || fmt.Sprint(out[0].Shape) != "[2 4]" || fmt.Sprint(out[0].Bools()) != "[false true false true false false true true]" {
		t.Errorf("masked = %v %v %v", out[0].DType, out[0].Shape, out[0].Bools())
	}
	if out[1].DType != servables.Uint8 || fmt.Sprint(out[1].Shape) != "[2 4]" || fmt.Sprint(out[1].Uint8s()) != "[1 5 10 255 8 4 201 6]" {
		t.Errorf("next = %v %v %v", out[1].DType, out[1].Shape, out[1].Uint8s())
	}
}

func TestScalarInput(t *testing.T) {
	m := load(t, testdata("scalar"), servables.LoadOptions{})
	out := predict(t, m, tensor(t, "s", servables.Float32, []int64{}, 2.5), tensor(t, "x", servables.Float32, []int64{3}, 1, -2, 4))
	if len(out) != 1 || out[0].Name != "y" || fmt.Sprint(out[0].Shape) != "[3]" {
		t.Fatalf("outputs %+v", out)
	}
	closeTo(t, "y", values(out[0]), []float64{2.5, -5, 10}, 0)
}

func TestUnalignedInputIsCopied(t *testing.T) {
	m := load(t, pctrONNX, servables.LoadOptions{})
	x := rows(t, "x", 3)
	buf := make([]byte, len(x.Data)+1)
	copy(buf[1:], x.Data)
	odd := servables.Tensor{Name: "x", DType: servables.Float32, Shape: x.Shape, Data: buf[1:]}
	closeTo(t, "unaligned", values(predict(t, m, odd)[0]), values(predict(t, m, x)[0]), 0)
}

func TestOutputsGroveCannotReturnAreErrOutput(t *testing.T) {
	m := load(t, testdata("uint16_out"), servables.LoadOptions{})
	x := tensor(t, "x", servables.Float32, []int64{1, 4}, -1, 0, 1, 2)
	_, err := m.Predict(context.Background(), []servables.Tensor{x})
	// Refused before the model runs, from the declared output types.
	if !errors.Is(err, servables.ErrOutput) || !strings.Contains(err.Error(), `output "w" is a tensor of UINT16; Grove returns tensors of FLOAT, DOUBLE, INT8, INT16, INT32, INT64, BOOL, UINT8, FLOAT16, BFLOAT16`) {
		t.Errorf("Predict: %v, want ErrOutput naming output w and UINT16", err)
	}
	// An output whose type only shows when the model runs is checked then.
	_, err = toTensor("wide", mustUint16Tensor(t))
	if !errors.Is(err, servables.ErrOutput) || !strings.Contains(err.Error(), `output "wide" is a tensor of UINT16`) {
		t.Errorf("toTensor(uint16): %v, want ErrOutput naming output wide and UINT16", err)
	}
	// Bool outputs convert.
	b, err := toTensor("positive", mustBoolTensor(t))
	if err != nil || b.DType != servables.Bool || fmt.Sprint(b.Shape, b.Data) != "[1 2] [1 0]" {
		t.Errorf("toTensor(bool) = %+v, %v", b, err)
	}
}

func TestOnlyTheRequestedOutputsAreConverted(t *testing.T) {
	m := load(t, testdata("uint16_out"), servables.LoadOptions{})
	x := tensor(t, "x", servables.Float32, []int64{1, 4}, -1, 0, 1, 2)
	out, err := m.Predict(servables.WithOutputs(context.Background(), []string{"y"}), []servables.Tensor{x})
	if err != nil || len(out) != 1 || out[0].Name != "y" {
		t.Fatalf("asking for y only: %v %+v", err, out)
	}
	closeTo(t, "y", values(out[0]), []float64{-1, 0, 1, 2}, 0)
	if _, err := m.Predict(servables.WithOutputs(context.Background(), []string{"w", "y"}), []servables.Tensor{x}); !errors.Is(err, servables.ErrOutput) {
		t.Errorf("asking for w: %v, want ErrOutput", err)
	}
	mixed := load(t, testdata("mixed"), servables.LoadOptions{})
	out, err = mixed.Predict(servables.WithOutputs(context.Background(), []string{"total"}), []servables.Tensor{
		tensor(t, "ids", servables.Int64, []int64{1, 2}, 1, 2), tensor(t, "w", servables.Float32, []int64{1, 1}, 2)})
	if err != nil || len(out) != 1 || out[0].Name != "total" || values(out[0])[0] != 6 {
		t.Errorf("mixed, total only: %v %+v", err, out)
	}
}

// halves makes a Float16 or BFloat16 tensor of values (exact in the type).
func halves(t testing.TB, name string, dt servables.DType, shape []int64, vals ...float64) servables.Tensor {
	t.Helper()
	x, err := servables.NewTensor(name, dt, shape)
	if err != nil {
		t.Fatal(err)
	}
	round := servables.Float16Bits
	if dt == servables.BFloat16 {
		round = servables.BFloat16Bits
	}
	for i, v := range vals {
		x.Uint16s()[i], _ = round(v)
	}
	return x
}

func TestFloat16AndBFloat16BothWays(t *testing.T) {
	for _, c := range []struct {
		model, in string
		dt        servables.DType
		width     int64
		vals      []float64
		// narrow is x = vals + a bit, rounded by ONNX Runtime's Cast.
		x, narrow []float64
	}{
		{"half", "h", servables.Float16, 4, []float64{1, -2.5, 65504, 0.0999755859375, 0, 1e-7, 3, 5.960464477539063e-08},
			[]float64{1.0004, 70000, 1e-8, 0.1, 2049, -3, 0.33333334, 1.5}, []float64{1, math.Inf(1), 0, 0.0999755859375, 2048, -3, 0.333251953125, 1.5}},
		{"bfloat", "b", servables.BFloat16, 2, []float64{1, -2.5, 3.3895313892515355e38, 0.10009765625},
			[]float64{1.00390625, 257, 0.1, -1e39}, []float64{1, 256, 0.10009765625, math.Inf(-1)}},
	} {
		t.Run(c.model, func(t *testing.T) {
			m := load(t, testdata(c.model), servables.LoadOptions{})
			rows := int64(len(c.vals)) / c.width
			out := predict(t, m, halves(t, c.in, c.dt, []int64{rows, c.width}, c.vals...),
				tensor(t, "x", servables.Float32, []int64{rows, c.width}, c.x...))
			if len(out) != 3 || out[0].Name != "same" || out[1].Name != "wide" || out[2].Name != "narrow" {
				t.Fatalf("outputs %+v", out)
			}
			for _, o := range []servables.Tensor{out[0], out[2]} {
				if o.DType != c.dt || fmt.Sprint(o.Shape) != fmt.Sprint([]int64{rows, c.width}) {
					t.Errorf("%s: %v %v", o.Name, o.DType, o.Shape)
				}
			}
			want := make([]float64, len(c.vals))
			for i, v := range c.vals {
				want[i] = halves(t, "", c.dt, []int64{1}, v).HalfAt(0)
			}
			closeTo(t, "same", values(out[0]), want, 0)
			closeTo(t, "wide", values(out[1]), want, 0)
			closeTo(t, "narrow", values(out[2]), c.narrow, 0)
		})
	}
}

func TestConcurrentPredict(t *testing.T) {
	m := load(t, pctrONNX, servables.LoadOptions{})
	batches := []int{1, 7, 64}
	want := map[int][]float64{}
	for _, b := range batches {
		want[b] = values(predict(t, m, rows(t, "x", b))[0])
	}
	const workers, rounds = 8, 100
	var wg sync.WaitGroup
	errs := make(chan error, workers)
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for r := range rounds {
				b := batches[(w+r)%len(batches)]
				out, err := m.Predict(context.Background(), []servables.Tensor{rows(t, "x", b)})
				if err != nil {
					errs <- err
					return
				}
				got := values(out[0])
				for i := range got {
					if math.Abs(got[i]-want[b][i]) > 1e-6 {
						errs <- fmt.Errorf("worker %d round %d batch %d: [%d] = %v, want %v", w, r, b, i, got[i], want[b][i])
						return
					}
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
}

func TestPredictAfterCloseFails(t *testing.T) {
	m := load(t, pctrONNX, servables.LoadOptions{})
	if err := m.Close(); err != nil {
		t.Fatal(err)
	}
	if err := m.Close(); err != nil {
		t.Errorf("second Close: %v", err)
	}
	if _, err := m.Predict(context.Background(), []servables.Tensor{rows(t, "x", 1)}); err == nil || !strings.Contains(err.Error(), "closed") {
		t.Errorf("Predict after Close: %v", err)
	}
}

// rss is the process's resident set size in bytes.
func rss(t *testing.T) int64 {
	t.Helper()
	runtime.GC()
	debug.FreeOSMemory()
	b, err := os.ReadFile("/proc/self/statm")
	if err != nil {
		t.Skip("no /proc/self/statm")
	}
	f := strings.Fields(string(b))
	pages, err := strconv.ParseInt(f[1], 10, 64)
	if err != nil {
		t.Fatal(err)
	}
	return pages * int64(os.Getpagesize())
}

// Sessions are freed by Close: 200 load, predict, close cycles leave the RSS
// about where it was after the first 20 (about 1 MiB more, measured here). A
// pCTR session left open costs about 0.45 MiB, so 180 leaked ones (about 80
// MiB) would be far over the 20 MiB allowed.
func TestLoadCloseCyclesDoNotLeak(t *testing.T) {
	n := 0
	cycle := func() {
		n++
		s, err := Runtime{}.Load(context.Background(), filepath.Dir(pctrONNX), []string{"model.onnx"}, servables.LoadOptions{IntraOpThreads: 1 + n%2})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := s.Predict(context.Background(), []servables.Tensor{rows(t, "x", 64)}); err != nil {
			t.Fatal(err)
		}
		if err := s.Close(); err != nil {
			t.Fatal(err)
		}
	}
	for range 20 {
		cycle()
	}
	before := rss(t)
	for range 180 {
		cycle()
	}
	after := rss(t)
	t.Logf("RSS after 20 cycles %.1f MiB, after 200 %.1f MiB", float64(before)/(1<<20), float64(after)/(1<<20))
	if grew := after - before; grew > 20<<20 {
		t.Errorf("RSS grew by %.1f MiB over 180 load/close cycles", float64(grew)/(1<<20))
	}
}

func TestCorruptModelFailsToLoad(t *testing.T) {
	good, err := os.ReadFile(pctrONNX)
	if err != nil {
		t.Fatal(err)
	}
	for name, content := range map[string][]byte{
		"garbage":   []byte("this is not a protobuf \x00\xff\xfe at all"),
		"truncated": good[:len(good)/3],
		"empty":     {},
	} {
		t.Run(name, func(t *testing.T) {
			dir := t.TempDir()
			if err := os.WriteFile(filepath.Join(dir, "model.onnx"), content, 0o644); err != nil {
				t.Fatal(err)
			}
			s, err := Runtime{}.Load(context.Background(), dir, []string{"model.onnx"}, servables.LoadOptions{})
			if err == nil {
				s.Close()
				t.Fatal("Load succeeded")
			}
			if !strings.Contains(err.Error(), filepath.Join(dir, "model.onnx")) || !strings.Contains(err.Error(), "onnx: loading") {
				t.Errorf("error %q does not name the file", err)
			}
			t.Log(err)
		})
	}
	_, err = Runtime{}.Load(context.Background(), t.TempDir(), []string{"model.onnx"}, servables.LoadOptions{})
	if !errors.Is(err, os.ErrNotExist) {
		t.Errorf("Load of a missing file: %v", err)
	}
}

func TestIntraOpThreads(t *testing.T) {
	x := rows(t, "x", 256)
	var outs [][]float64
	for _, n := range []int{0, 1, 2} {
		m := load(t, pctrONNX, servables.LoadOptions{IntraOpThreads: n})
		if want := max(n, 1); m.Threads() != want {
			t.Errorf("IntraOpThreads %d: Threads() = %d, want %d", n, m.Threads(), want)
		}
		outs = append(outs, values(predict(t, m, x)[0]))
	}
	closeTo(t, "threads 1 vs 0", outs[1], outs[0], 0)
	closeTo(t, "threads 2 vs 1", outs[2], outs[1], 1e-6)
	if _, err := (Runtime{}).Load(context.Background(), filepath.Dir(pctrONNX), []string{"model.onnx"}, servables.LoadOptions{IntraOpThreads: -1}); err == nil {
		t.Error("IntraOpThreads -1 loaded")
	}
}

// TestLoadRefusesMissingValue: missing_value is an XGBoost setting; an
// ONNX model given one fails to load, saying so.
func TestLoadRefusesMissingValue(t *testing.T) {
	_, err := Runtime{}.Load(context.Background(), filepath.Dir(pctrONNX), []string{"model.onnx"}, servables.LoadOptions{MissingValue: new(-999.0)})
	if err == nil || !strings.Contains(err.Error(), "missing_value is -999") {
		t.Errorf("Load with missing_value -999: %v, want an error naming missing_value", err)
	}
}

// threads is the number of OS threads of the process.
func threads(t *testing.T) int {
	entries, err := os.ReadDir("/proc/self/task")
	if err != nil {
		t.Skip("no /proc/self/task")
	}
	return len(entries)
}

// A session with IntraOpThreads n owns n-1 pool threads, from Load to Close.
func TestIntraOpThreadsMakeAPoolPerSession(t *testing.T) {
	load(t, pctrONNX, servables.LoadOptions{}) // the library and environment
	const sessions, n = 4, 3
	before := threads(t)
	var models []servables.Servable
	for range sessions {
		s, err := Runtime{}.Load(context.Background(), filepath.Dir(pctrONNX), []string{"model.onnx"}, servables.LoadOptions{IntraOpThreads: n})
		if err != nil {
			t.Fatal(err)
		}
		models = append(models, s)
	}
	loaded := threads(t)
	for _, s := range models {
		s.Close()
	}
	closed := threads(t)
	t.Logf("OS threads: %d before, %d with %d sessions of %d threads, %d after Close", before, loaded, sessions, n, closed)
	if loaded-before < sessions*(n-1) {
		t.Errorf("%d sessions of %d intra-op threads added %d OS threads, want at least %d", sessions, n, loaded-before, sessions*(n-1))
	}
	if loaded-closed < sessions*(n-1) {
		t.Errorf("Close ended %d OS threads, want %d", loaded-closed, sessions*(n-1))
	}
}

func TestLibraryPathErrors(t *testing.T) {
	load(t, pctrONNX, servables.LoadOptions{}) // the library is loaded from the default path
	path, version := Library()
	if path == "" || !strings.HasPrefix(version, "1.24.") {
		t.Fatalf("Library() = %q, %q", path, version)
	}

	missing := filepath.Join(t.TempDir(), "nope", "libonnxruntime.so.1")
	_, err := Runtime{LibraryPath: missing}.Load(context.Background(), filepath.Dir(pctrONNX), []string{"model.onnx"}, servables.LoadOptions{})
	if !errors.Is(err, ErrLibrary) || !strings.Contains(err.Error(), missing) || !strings.Contains(err.Error(), "make deps") {
		t.Errorf("missing library: %v, want ErrLibrary naming %s and make deps", err, missing)
	}

	// Another Runtime value naming the same file through a symlink shares the library.
	link := filepath.Join(t.TempDir(), "libonnxruntime.so.1")
	if err := os.Symlink(path, link); err != nil {
		t.Fatal(err)
	}
	s, err := Runtime{LibraryPath: link}.Load(context.Background(), filepath.Dir(pctrONNX), []string{"model.onnx"}, servables.LoadOptions{})
	if err != nil {
		t.Fatalf("same library through a symlink: %v", err)
	}
	s.Close()

	// A different file cannot be loaded beside it.
	other := filepath.Join(t.TempDir(), "libonnxruntime.so.1")
	if err := os.WriteFile(other, []byte("not a library"), 0o644); err != nil {
		t.Fatal(err)
	}
	_, err = Runtime{LibraryPath: other}.Load(context.Background(), filepath.Dir(pctrONNX), []string{"model.onnx"}, servables.LoadOptions{})
	if !errors.Is(err, ErrLibrary) || !strings.Contains(err.Error(), "already loaded") {
		t.Errorf("second library: %v, want ErrLibrary saying one is already loaded", err)
	}
}

// In a fresh process (the library not loaded yet): a missing or broken
// library fails the ONNX load with a clear error, TorchScript models still
// load and answer, and once the library is there the next ONNX load works.
func TestMissingLibraryInAFreshProcess(t *testing.T) {
	if os.Getenv("GROVE_ONNX_TEST_CHILD") == "1" {
		t.Skip("in the child")
	}
	cmd := exec.Command(os.Args[0], "-test.run=^TestFreshProcessChild$", "-test.v", "-test.count=1")
	cmd.Env = append(os.Environ(), "GROVE_ONNX_TEST_CHILD=1", LibraryEnv+"="+filepath.Join(t.TempDir(), "missing", "libonnxruntime.so.1"))
	out, err := cmd.CombinedOutput()
	t.Logf("child:\n%s", out)
	if err != nil || !strings.Contains(string(out), "--- PASS: TestFreshProcessChild") {
		t.Fatalf("child failed: %v", err)
	}
}

func TestFreshProcessChild(t *testing.T) {
	if os.Getenv("GROVE_ONNX_TEST_CHILD") != "1" {
		t.Skip("run by TestMissingLibraryInAFreshProcess")
	}
	missing := os.Getenv(LibraryEnv)
	reg := servables.Registry{torch.Runtime{}, Runtime{}}
	loadWith := func(file string) (servables.Servable, error) {
		files := []string{filepath.Base(file)}
		rt, err := reg.Find(os.DirFS(filepath.Dir(file)), files)
		if err != nil {
			t.Fatal(err)
		}
		return rt.Load(context.Background(), filepath.Dir(file), files, servables.LoadOptions{})
	}

	_, err := loadWith(pctrONNX)
	if !errors.Is(err, ErrLibrary) || !strings.Contains(err.Error(), missing) || !strings.Contains(err.Error(), "make deps") {
		t.Fatalf("ONNX load without the library: %v, want ErrLibrary naming %s and make deps", err, missing)
	}
	t.Log(err)

	broken := filepath.Join(t.TempDir(), "libonnxruntime.so.1")
	if err := os.WriteFile(broken, []byte("not a library"), 0o644); err != nil {
		t.Fatal(err)
	}
	_, err = Runtime{LibraryPath: broken}.Load(context.Background(), filepath.Dir(pctrONNX), []string{"model.onnx"}, servables.LoadOptions{})
	if !errors.Is(err, ErrLibrary) || !strings.Contains(err.Error(), broken) || !strings.Contains(err.Error(), "make deps") {
		t.Fatalf("ONNX load with a broken library: %v", err)
	}
	t.Log(err)

	ts, err := loadWith(pctrTorch)
	if err != nil {
		t.Fatalf("TorchScript without the ONNX library: %v", err)
	}
	defer ts.Close()
	want := predict(t, ts, rows(t, "x", 2))

	os.Unsetenv(LibraryEnv) // the library appears where the default path finds it
	m, err := loadWith(pctrONNX)
	if err != nil {
		t.Fatalf("ONNX load once the library is there: %v", err)
	}
	defer m.Close()
	closeTo(t, "ONNX vs TorchScript", values(predict(t, m, rows(t, "x", 2))[0]), values(want[0]), 1e-5)
}

func benchmarkPredict(b *testing.B, m servables.Servable, inputs []servables.Tensor) {
	ctx := context.Background()
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		if _, err := m.Predict(ctx, inputs); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkPredictBatch1 is the in-process time of one pCTR call (one
// intra-op thread), including Grove's checks and copies.
func BenchmarkPredictBatch1(b *testing.B) {
	benchmarkPredict(b, load(b, pctrONNX, servables.LoadOptions{IntraOpThreads: 1}), []servables.Tensor{rows(b, "x", 1)})
}

// BenchmarkPredictBatch64 is BenchmarkPredictBatch1 with 64 rows.
func BenchmarkPredictBatch64(b *testing.B) {
	benchmarkPredict(b, load(b, pctrONNX, servables.LoadOptions{IntraOpThreads: 1}), []servables.Tensor{rows(b, "x", 64)})
}

// BenchmarkIntraOpThreads shows what IntraOpThreads does to pCTR batches.
func BenchmarkIntraOpThreads(b *testing.B) {
	for _, batch := range []int{64, 1024} {
		x := rows(b, "x", batch)
		for _, n := range []int{1, 2} {
			b.Run(fmt.Sprintf("batch=%d/threads=%d", batch, n), func(b *testing.B) {
				benchmarkPredict(b, load(b, pctrONNX, servables.LoadOptions{IntraOpThreads: n}), []servables.Tensor{x})
			})
		}
	}
}

func mustUint16Tensor(t *testing.T) ort.Value {
	t.Helper()
	v, err := ort.NewTensor(ort.NewShape(2), []uint16{1, 2})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { v.Destroy() })
	return v
}

func mustBoolTensor(t *testing.T) ort.Value {
	t.Helper()
	v, err := ort.NewTensor(ort.NewShape(1, 2), []bool{true, false})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { v.Destroy() })
	return v
}

func TestDeclaredSignatureMustAgreeWithWhatONNXRuntimeReports(t *testing.T) {
	meta := load(t, pctrONNX, servables.LoadOptions{}).Metadata() // x FLOAT [-1 64] -> output_0 FLOAT [-1 1]
	f32 := func(name string, shape ...int64) []servables.TensorSpec {
		return []servables.TensorSpec{{Name: name, DType: servables.Float32, Shape: shape}}
	}
	if got, err := servables.Declare(meta, f32("x", -1, 64), f32("output_0", -1, 1)); err != nil || got.Signature != servables.SignatureDeclared {
		t.Errorf("the model's own signature, declared: %+v %v", got, err)
	}
	for _, c := range []struct {
		name            string
		inputs, outputs []servables.TensorSpec
		want            string
	}{
		{"another input name", f32("features", -1, 64), nil, `declared input 0 is "features", the model's is "x"`},
		{"another width", f32("x", -1, 32), nil, `declared input "x" has shape [-1 32], the model's is [-1 64] (dimension 1)`},
		{"another dtype", []servables.TensorSpec{{Name: "x", DType: servables.Float64, Shape: []int64{-1, 64}}}, nil, `declared input "x" is DOUBLE, the model's is FLOAT`},
		{"another output name", nil, f32("score", -1, 1), `declared output 0 is "score", the model's is "output_0"`},
	} {
		if _, err := servables.Declare(meta, c.inputs, c.outputs); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v, want %q", c.name, err, c.want)
		}
	}
}

func TestLoadsAnExtensionlessONNXFileByContent(t *testing.T) {
	dir := t.TempDir()
	b, err := os.ReadFile(pctrONNX)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "pctr"), b, 0o644); err != nil {
		t.Fatal(err)
	}
	if !(Runtime{}).Accepts(os.DirFS(dir), []string{"pctr"}) {
		t.Fatal("Accepts refused an extension-less ONNX file")
	}
	m := load(t, filepath.Join(dir, "pctr"), servables.LoadOptions{})
	if got := len(m.Metadata().Inputs); got == 0 {
		t.Errorf("metadata %+v", m.Metadata())
	}
}

// Load, predict, close cycles leave glibc's count of C heap bytes in use
// (mallinfo2) where it was after a warm-up, within 1 KiB a cycle: a
// session left open holds about 0.45 MiB. What a cycle does keep is
// onnxruntime_go's: v1.27.0's createCSessionFromFile never frees the C
// copy of the model's path, and a Load makes two sessions from the file
// (the one that reads the input and output names, and the model's), so
// each load keeps two strings of the path's length (docs/performance.md,
// "Churn").
func TestLoadCloseCyclesLeaveTheCHeapFlat(t *testing.T) {
	cycle := func() {
		s, err := Runtime{}.Load(context.Background(), filepath.Dir(pctrONNX), []string{"model.onnx"}, servables.LoadOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := s.Predict(context.Background(), []servables.Tensor{rows(t, "x", 1)}); err != nil {
			t.Fatal(err)
		}
		if err := s.Close(); err != nil {
			t.Fatal(err)
		}
	}
	for range 30 {
		cycle()
	}
	before, ok := mallocarena.ReadStats()
	if !ok {
		t.Skip("no glibc heap accounting on this platform")
	}
	const cycles = 100
	for range cycles {
		cycle()
	}
	after, _ := mallocarena.ReadStats()
	perCycle := (float64(after.InUse) - float64(before.InUse)) / cycles
	t.Logf("C heap in use %d -> %d bytes over %d cycles: %+.0f bytes a cycle", before.InUse, after.InUse, cycles, perCycle)
	if perCycle > 1<<10 {
		t.Errorf("C heap in use grew by %.0f bytes per load/close cycle, want at most 1 KiB", perCycle)
	}
}
