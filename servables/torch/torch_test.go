package torch

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync"
	"testing"
	"testing/fstest"
	"time"

	"github.com/groveml/grove/internal/mallocarena"
	"github.com/groveml/grove/servables"
)

const bucket = "../../examples/bucket"

func load(t testing.TB, file string, opts servables.LoadOptions) *Model {
	t.Helper()
	s, err := Runtime{}.Load(context.Background(), filepath.Dir(file), []string{filepath.Base(file)}, opts)
	if err != nil {
		t.Fatalf("Load(%s): %v", file, err)
	}
	t.Cleanup(func() { s.Close() })
	return s.(*Model)
}

func testdata(name string) string { return filepath.Join("testdata", name+".pt") }

func tensor(t testing.TB, dt servables.DType, shape []int64, values ...float64) servables.Tensor {
	t.Helper()
	x, err := servables.NewTensor("", dt, shape)
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
		case servables.Int64:
			x.Int64s()[i] = int64(v)
		case servables.Bool:
			x.Bools()[i] = v != 0
		case servables.Uint8:
			x.Uint8s()[i] = uint8(v)
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

func float32s(n int, f func(i int) float64) []float64 {
	out := make([]float64, n)
	for i := range out {
		out[i] = float64(float32(f(i)))
	}
	return out
}

func TestRuntimeIsNamedTorchscript(t *testing.T) {
	if got := (Runtime{}).Name(); got != "torchscript" {
		t.Errorf("Name() = %q", got)
	}
}

func TestAcceptsExactlyOneTorchScriptFile(t *testing.T) {
	for _, c := range []struct {
		files []string
		want  bool
	}{
		{[]string{"model.pt"}, true},
		{[]string{"model.pth", "README.md", "config.json"}, true},
		{[]string{"sub/net.torchscript"}, true},
		{[]string{"MODEL.PT"}, true},
		{[]string{"a.pt", "b.pt"}, false},
		{[]string{"saved_model.pb", "variables/variables.index"}, false},
		{[]string{"model.onnx"}, false},
		{[]string{"README.md"}, false},
		{nil, false},
	} {
		if got := (Runtime{}).Accepts(fstest.MapFS{}, c.files); got != c.want {
			t.Errorf("Accepts(%q) = %v, want %v", c.files, got, c.want)
		}
	}
}

func TestLoadRejectsFilesWithoutOneModel(t *testing.T) {
	_, err := Runtime{}.Load(context.Background(), "testdata", []string{"double.pt", "add.pt"}, servables.LoadOptions{})
	if !errors.Is(err, servables.ErrUnsupportedRuntime) {
		t.Errorf("Load of two .pt files: %v, want ErrUnsupportedRuntime", err)
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
	x := tensor(t, dt, e.Shape, e.Data...)
	x.Name = e.Name
	return x
}

func TestExampleModelsMatchExpectedJSON(t *testing.T) {
	for name, want := range readExpected(t) {
		t.Run(name, func(t *testing.T) {
			m := load(t, filepath.Join(bucket, name, "model.pt"), servables.LoadOptions{})
			var inputs []servables.Tensor
			for _, in := range want.Inputs {
				inputs = append(inputs, in.tensor(t))
			}
			got, err := m.Predict(context.Background(), inputs)
			if err != nil {
				t.Fatal(err)
			}
			if len(got) != len(want.Outputs) {
				t.Fatalf("%d outputs, want %d", len(got), len(want.Outputs))
			}
			for i, w := range want.Outputs {
				g := got[i]
				if g.Name != w.Name || g.DType.String() != w.DataType || fmt.Sprint(g.Shape) != fmt.Sprint(w.Shape) {
					t.Errorf("output %d is %s %v %v, want %s %s %v", i, g.Name, g.DType, g.Shape, w.Name, w.DataType, w.Shape)
					continue
				}
				for j, v := range values(g) {
					if math.Abs(v-w.Data[j]) > 1e-5 {
						t.Errorf("output %d[%d] = %v, want %v", i, j, v, w.Data[j])
					}
				}
			}
		})
	}
}

func TestBenchmarkModelIsFrozen(t *testing.T) {
	if m := load(t, filepath.Join(bucket, "pctr_v1", "model.pt"), servables.LoadOptions{}); !m.Frozen() {
		t.Error("pctr_v1 was not frozen")
	}
}

func TestMetadataListsForwardArgumentsAndTupleOutputs(t *testing.T) {
	m := load(t, filepath.Join(bucket, "pcvr", "model.pt"), servables.LoadOptions{})
	b, _ := json.Marshal(m.Metadata())
	want := `{"runtime":"torchscript","inputs":[{"name":"features","datatype":"UNKNOWN","shape":null},{"name":"category","datatype":"UNKNOWN","shape":null}],` +
		`"outputs":[{"name":"output_0","datatype":"UNKNOWN","shape":null},{"name":"output_1","datatype":"UNKNOWN","shape":null}],"signature":"runtime"}`
	if string(b) != want {
		t.Errorf("Metadata = %s\nwant       %s", b, want)
	}
	list := load(t, testdata("list"), servables.LoadOptions{})
	if md := list.Metadata(); len(md.Inputs) != 1 || md.Inputs[0].Name != "x" || len(md.Outputs) != 0 {
		t.Errorf("list model Metadata = %+v, want input x and no known outputs", md)
	}
	opt := load(t, testdata("optional"), servables.LoadOptions{})
	if md := opt.Metadata(); len(md.Inputs) != 2 || md.Inputs[0].Optional || !md.Inputs[1].Optional || !md.ByPosition {
		t.Errorf("optional model Metadata = %+v, want x required, y optional, ByPosition", md)
	}
}

// named returns x with name n.
func named(n string, x servables.Tensor) servables.Tensor {
	x.Name = n
	return x
}

func TestNamedInputsBindToForwardArgumentsByName(t *testing.T) {
	sub := load(t, testdata("sub"), servables.LoadOptions{}) // forward(a, b) = a - b
	a := tensor(t, servables.Float32, []int64{2}, 10, 20)
	b := tensor(t, servables.Float32, []int64{2}, 1, 2)
	for _, c := range []struct {
		name   string
		inputs []servables.Tensor
	}{
		{"in forward's order", []servables.Tensor{named("a", a), named("b", b)}},
		{"in the other order", []servables.Tensor{named("b", b), named("a", a)}},
		{"unnamed, by position", []servables.Tensor{a, b}},
	} {
		out, err := sub.Predict(context.Background(), c.inputs)
		if err != nil || fmt.Sprint(values(out[0])) != "[9 18]" {
			t.Errorf("%s: %v %v, want a - b = [9 18]", c.name, out, err)
		}
	}
}

func TestInputsAlreadyInForwardsOrderAreBoundWithoutAllocating(t *testing.T) {
	sub := load(t, testdata("sub"), servables.LoadOptions{})
	a := tensor(t, servables.Float32, []int64{2}, 10, 20)
	b := tensor(t, servables.Float32, []int64{2}, 1, 2)
	for name, inputs := range map[string][]servables.Tensor{
		"named in order": {named("a", a), named("b", b)},
		"unnamed":        {a, b},
	} {
		var err error
		if n := testing.AllocsPerRun(100, func() { _, err = sub.bind(inputs) }); n != 0 || err != nil {
			t.Errorf("%s: %v allocations, %v; want none", name, n, err)
		}
	}
	if got, err := sub.bind([]servables.Tensor{named("b", b), named("a", a)}); err != nil || got[0].Name != "a" || got[1].Name != "b" {
		t.Errorf("named out of order: %v %v, want a, b", got, err)
	}
}

func TestBadInputNamesAreInvalidInputListingTheModelsInputs(t *testing.T) {
	sub := load(t, testdata("sub"), servables.LoadOptions{})
	x := tensor(t, servables.Float32, []int64{2}, 1, 2)
	for _, c := range []struct {
		inputs []servables.Tensor
		want   string
	}{
		{[]servables.Tensor{named("a", x), named("bogus", x)}, `unknown input "bogus"`},
		{[]servables.Tensor{named("a", x), named("a", x)}, `input "a" is given twice`},
		{[]servables.Tensor{named("a", x)}, `missing input "b"`},
		{[]servables.Tensor{named("a", x), x}, "input 1 has no name while others have one"},
		{[]servables.Tensor{x, x, x}, "got 3 unnamed input tensors, the model takes 2"},
	} {
		_, err := sub.Predict(context.Background(), c.inputs)
		if !errors.Is(err, servables.ErrInvalidInput) || !strings.Contains(err.Error(), c.want) ||
			!strings.Contains(err.Error(), "the model's inputs are: a, b") {
			t.Errorf("%v: %v, want ErrInvalidInput with %q and the model's inputs", servables.Sent(c.inputs), err, c.want)
		}
	}
	opt := load(t, testdata("optional"), servables.LoadOptions{}) // forward(x, y=None)
	out, err := opt.Predict(context.Background(), []servables.Tensor{named("x", x)})
	if err != nil || fmt.Sprint(values(out[0])) != "[101 102]" {
		t.Errorf("optional with x alone by name: %v %v, want y's default", out, err)
	}
	out, err = opt.Predict(context.Background(), []servables.Tensor{named("y", x), named("x", x)})
	if err != nil || fmt.Sprint(values(out[0])) != "[2 4]" {
		t.Errorf("optional with y, x by name: %v %v", out, err)
	}
	if _, err := opt.Predict(context.Background(), []servables.Tensor{named("y", x)}); !errors.Is(err, servables.ErrInvalidInput) || !strings.Contains(err.Error(), `missing input "x"`) {
		t.Errorf("optional with y alone: %v, want x missing", err)
	}
}

func TestEveryDTypeRoundTrips(t *testing.T) {
	m := load(t, testdata("double"), servables.LoadOptions{})
	for _, dt := range []servables.DType{servables.Float32, servables.Float64, servables.Int8, servables.Int16, servables.Int32, servables.Int64} {
		in := tensor(t, dt, []int64{2, 3}, -3, -1, 0, 1, 2, 60)
		out, err := m.Predict(context.Background(), []servables.Tensor{in})
		if err != nil {
			t.Errorf("%v: %v", dt, err)
			continue
		}
		if len(out) != 1 || out[0].DType != dt || fmt.Sprint(out[0].Shape) != "[2 3]" {
			t.Errorf("%v: got %d outputs, first %v %v", dt, len(out), out[0].DType, out[0].Shape)
			continue
		}
		if got := fmt.Sprint(values(out[0])); got != "[-6 -2 0 2 4 120]" {
			t.Errorf("%v: x*2 = %s", dt, got)
		}
	}
}

func TestBoolAndUint8BothWays(t *testing.T) {
	// mask.pt: (mask bool [N, 4], x uint8 [N, 4]) -> (mask & (x > 3), x + 1).
	m := load(t, testdata("mask"), servables.LoadOptions{})
	mask := tensor(t, servables.Bool, []int64{2, 4}, 1, 1, 0, 1, 0, 1, 1, 1)
	x := tensor(t, servables.Uint8, []int64{2, 4}, 0, 4, 9, 255, 7, 3, 200, 5)
	out, err := m.Predict(context.Background(), []servables.Tensor{mask, x})
	if err != nil {
		t.Fatal(err)
	}
	if len(out) != 2 {
		t.Fatalf("%d outputs", len(out))
	}
	if out[0].DType != servables.Bool || fmt.Sprint(out[0].Shape) != "[2 4]" || fmt.Sprint(out[0].Bools()) != "[false true false true false false true true]" {
		t.Errorf("output 0 = %v %v %v", out[0].DType, out[0].Shape, out[0].Bools())
	}
	if out[1].DType != servables.Uint8 || fmt.Sprint(out[1].Shape) != "[2 4]" || fmt.Sprint(out[1].Uint8s()) != "[1 5 10 0 8 4 201 6]" {
		t.Errorf("output 1 = %v %v %v (255+1 wraps to 0)", out[1].DType, out[1].Shape, out[1].Uint8s())
	}
	// A comparison's bool output comes back as Bool.
	b := load(t, testdata("bool"), servables.LoadOptions{})
	out, err = b.Predict(context.Background(), []servables.Tensor{tensor(t, servables.Float32, []int64{3}, 1, -1, 0)})
	if err != nil {
		t.Fatal(err)
	}
	if out[0].DType != servables.Bool || fmt.Sprint(out[0].Data) != "[1 0 0]" {
		t.Errorf("x > 0 = %v %v", out[0].DType, out[0].Data)
	}
}

func TestScalarInputAndOutput(t *testing.T) {
	m := load(t, testdata("double"), servables.LoadOptions{})
	out, err := m.Predict(context.Background(), []servables.Tensor{tensor(t, servables.Float64, []int64{}, 1.25)})
	if err != nil {
		t.Fatal(err)
	}
	if len(out[0].Shape) != 0 || out[0].Float64s()[0] != 2.5 {
		t.Errorf("scalar x*2 = %v %v", out[0].Shape, values(out[0]))
	}
}

func TestOutputsDoNotAliasInputs(t *testing.T) {
	m := load(t, testdata("list"), servables.LoadOptions{}) // returns [x, x*3]: the first is x itself
	in := tensor(t, servables.Float32, []int64{3}, 1, 2, 3)
	out, err := m.Predict(context.Background(), []servables.Tensor{in})
	if err != nil {
		t.Fatal(err)
	}
	in.Float32s()[0] = 42
	if got := fmt.Sprint(values(out[0]), values(out[1])); got != "[1 2 3] [3 6 9]" {
		t.Errorf("outputs = %s", got)
	}
}

func TestTupleOutputsComeInOrderAndContiguous(t *testing.T) {
	m := load(t, testdata("pair"), servables.LoadOptions{}) // (x*2, x.t())
	in := tensor(t, servables.Int32, []int64{2, 3}, 1, 2, 3, 4, 5, 6)
	out, err := m.Predict(context.Background(), []servables.Tensor{in})
	if err != nil {
		t.Fatal(err)
	}
	if len(out) != 2 {
		t.Fatalf("%d outputs", len(out))
	}
	if out[0].Name != "output_0" || fmt.Sprint(out[0].Shape, values(out[0])) != "[2 3] [2 4 6 8 10 12]" {
		t.Errorf("output 0 = %s %v %v", out[0].Name, out[0].Shape, values(out[0]))
	}
	if out[1].Name != "output_1" || fmt.Sprint(out[1].Shape, values(out[1])) != "[3 2] [1 4 2 5 3 6]" {
		t.Errorf("output 1 (transposed) = %s %v %v", out[1].Name, out[1].Shape, values(out[1]))
	}
}

func TestUnsupportedOutputsWrapErrOutput(t *testing.T) {
	for _, c := range []struct{ model, mention string }{
		{"dict", "Dict[str, Tensor]"},
		{"str", "str"},
		{"nested", "element 1 of the output Tuple[Tensor, Tuple[Tensor, Tensor]] is Tuple[Tensor, Tensor]"},
		{"half", "dtype Half"},
		{"empty", "dimension 0 is 0"},
	} {
		m := load(t, testdata(c.model), servables.LoadOptions{})
		_, err := m.Predict(context.Background(), []servables.Tensor{tensor(t, servables.Float32, []int64{2}, 1, -1)})
		if !errors.Is(err, servables.ErrOutput) || !strings.Contains(err.Error(), c.mention) {
			t.Errorf("%s: error %v, want ErrOutput mentioning %q", c.model, err, c.mention)
		}
	}
}

func TestCorruptFileFailsToLoad(t *testing.T) {
	_, err := Runtime{}.Load(context.Background(), "testdata", []string{"corrupt.pt"}, servables.LoadOptions{})
	if err == nil || !strings.Contains(err.Error(), "corrupt.pt") || !strings.Contains(err.Error(), "zip archive") {
		t.Errorf("Load(corrupt.pt) error = %v, want one naming the file and torch's reason", err)
	}
	if err != nil && strings.Contains(err.Error(), "Exception raised from") {
		t.Errorf("error carries libtorch's C++ backtrace: %v", err)
	}
}

// TestLoadRefusesMissingValue: missing_value is an XGBoost setting; a
// TorchScript model given one fails to load, saying so.
func TestLoadRefusesMissingValue(t *testing.T) {
	_, err := Runtime{}.Load(context.Background(), "testdata", []string{"add.pt"}, servables.LoadOptions{MissingValue: new(-999.0)})
	if err == nil || !strings.Contains(err.Error(), "missing_value is -999") {
		t.Errorf("Load with missing_value -999: %v, want an error naming missing_value", err)
	}
}

func TestMissingFileFailsToLoad(t *testing.T) {
	_, err := Runtime{}.Load(context.Background(), "testdata", []string{"absent.pt"}, servables.LoadOptions{})
	if err == nil || !strings.Contains(err.Error(), "absent.pt") {
		t.Errorf("Load(absent.pt) error = %v", err)
	}
}

func TestWrongNumberOfInputsIsInvalidInput(t *testing.T) {
	add := load(t, testdata("add"), servables.LoadOptions{})
	x := tensor(t, servables.Float32, []int64{2}, 1, 2)
	for _, inputs := range [][]servables.Tensor{nil, {x}, {x, x, x}} {
		_, err := add.Predict(context.Background(), inputs)
		if !errors.Is(err, servables.ErrInvalidInput) || !strings.Contains(err.Error(), "the model takes 2") || !strings.Contains(err.Error(), "inputs are: x, y") {
			t.Errorf("add with %d inputs: %v, want ErrInvalidInput", len(inputs), err)
		}
	}
	opt := load(t, testdata("optional"), servables.LoadOptions{}) // forward(x, y=None)
	for n, want := range map[int]string{1: "[101 102]", 2: "[2 4]"} {
		out, err := opt.Predict(context.Background(), []servables.Tensor{x, x}[:n])
		if err != nil || fmt.Sprint(values(out[0])) != want {
			t.Errorf("optional with %d inputs: %v %v, want %s", n, out, err, want)
		}
	}
	if _, err := opt.Predict(context.Background(), []servables.Tensor{x, x, x}); !errors.Is(err, servables.ErrInvalidInput) {
		t.Errorf("optional with 3 inputs: %v, want ErrInvalidInput", err)
	}
}

func TestMalformedTensorIsInvalidInput(t *testing.T) {
	m := load(t, testdata("double"), servables.LoadOptions{})
	bad := servables.Tensor{Name: "x", DType: servables.Float32, Shape: []int64{4}, Data: make([]byte, 12)}
	if _, err := m.Predict(context.Background(), []servables.Tensor{bad}); !errors.Is(err, servables.ErrInvalidInput) {
		t.Errorf("12 bytes for 4 floats: %v, want ErrInvalidInput", err)
	}
}

func TestShapeAndDTypeMismatchesFoundByLibtorchAreInvalidInput(t *testing.T) {
	add := load(t, testdata("add"), servables.LoadOptions{})
	linear := load(t, testdata("linear"), servables.LoadOptions{}) // torch.mm(x, w[4, 2])
	pctr := load(t, filepath.Join(bucket, "pctr_v1", "model.pt"), servables.LoadOptions{})
	for _, c := range []struct {
		name   string
		m      *Model
		inputs []servables.Tensor
		want   []string
	}{
		{"add [2]+[3]", add, []servables.Tensor{tensor(t, servables.Float32, []int64{2}, 1, 2), tensor(t, servables.Float32, []int64{3}, 1, 2, 3)},
			[]string{"must match the size", "inputs sent (x FLOAT [2], y FLOAT [3])"}},
		{"linear on [1 3]", linear, []servables.Tensor{named("x", tensor(t, servables.Float32, []int64{1, 3}, 1, 2, 3))},
			[]string{"mat1 and mat2 shapes cannot be multiplied", "x FLOAT [1 3]"}},
		{"linear on doubles", linear, []servables.Tensor{tensor(t, servables.Float64, []int64{1, 4}, 1, 2, 3, 4)},
			[]string{"x DOUBLE [1 4]"}},
		{"pctr on [1 3]", pctr, []servables.Tensor{tensor(t, servables.Float32, []int64{1, 3}, 1, 2, 3)}, []string{"x FLOAT [1 3]"}},
	} {
		_, err := c.m.Predict(context.Background(), c.inputs)
		var ie *servables.DTypeError
		if !errors.As(err, &ie) || servables.KindOf(err) != servables.InvalidInput {
			t.Errorf("%s: %v, want a DTypeError wrapping ErrInvalidInput", c.name, err)
			continue
		}
		for _, w := range c.want {
			if !strings.Contains(err.Error(), w) {
				t.Errorf("%s: %q does not say %q", c.name, err, w)
			}
		}
		if oip := ie.Render(servables.OIPName); strings.Contains(oip, "FLOAT") || strings.Contains(oip, "DOUBLE") {
			t.Errorf("%s: in OIP's vocabulary the message still says FLOAT or DOUBLE: %s", c.name, oip)
		}
	}
}

func TestExceptionInModelIsAnExecutionError(t *testing.T) {
	m := load(t, testdata("raise"), servables.LoadOptions{})
	_, err := m.Predict(context.Background(), []servables.Tensor{tensor(t, servables.Float32, []int64{1}, -1)})
	if !errors.Is(err, servables.ErrExecution) || !strings.Contains(err.Error(), "grove test: negative sum") {
		t.Errorf("raise: %v", err)
	}
	if _, err := m.Predict(context.Background(), []servables.Tensor{tensor(t, servables.Float32, []int64{1}, 1)}); err != nil {
		t.Errorf("the model still answers after an exception: %v", err)
	}
}

func TestPredictAfterCloseFails(t *testing.T) {
	m := load(t, testdata("double"), servables.LoadOptions{})
	if err := m.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := m.Predict(context.Background(), []servables.Tensor{tensor(t, servables.Float32, []int64{1}, 1)}); err == nil || !strings.Contains(err.Error(), "closed") {
		t.Errorf("Predict after Close: %v", err)
	}
	if err := m.Close(); err != nil {
		t.Errorf("second Close: %v", err)
	}
}

func TestPredictHonoursCancelledContext(t *testing.T) {
	m := load(t, testdata("double"), servables.LoadOptions{})
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := m.Predict(ctx, []servables.Tensor{tensor(t, servables.Float32, []int64{1}, 1)}); !errors.Is(err, context.Canceled) {
		t.Errorf("Predict with a cancelled context: %v", err)
	}
}

func TestConcurrentPredictsGiveCorrectAnswers(t *testing.T) {
	m := load(t, filepath.Join(bucket, "pctr_v1", "model.pt"), servables.LoadOptions{})
	const workers, rounds = 8, 40
	inputs := make([]servables.Tensor, workers)
	want := make([][]float64, workers)
	for w := range inputs {
		batch := 1 + w*3
		inputs[w] = tensor(t, servables.Float32, []int64{int64(batch), 64},
			float32s(batch*64, func(i int) float64 { return math.Sin(float64(i*(w+1)) / 17) })...)
		out, err := m.Predict(context.Background(), inputs[w:w+1])
		if err != nil {
			t.Fatal(err)
		}
		want[w] = values(out[0])
	}
	var wg sync.WaitGroup
	errs := make(chan error, workers)
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range rounds {
				out, err := m.Predict(context.Background(), inputs[w:w+1])
				if err != nil {
					errs <- err
					return
				}
				if got := values(out[0]); fmt.Sprint(got) != fmt.Sprint(want[w]) {
					errs <- fmt.Errorf("worker %d: got %v, want %v", w, got, want[w])
					return
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

func TestCloseWaitsForRunningPredicts(t *testing.T) {
	m := load(t, testdata("heavy"), servables.LoadOptions{})
	x := tensor(t, servables.Float32, []int64{1 << 18}, float32s(1<<18, func(i int) float64 { return float64(i%100) / 50 })...)
	var wg sync.WaitGroup
	for range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range 5 {
				if _, err := m.Predict(context.Background(), []servables.Tensor{x}); err != nil && !strings.Contains(err.Error(), "closed") {
					t.Error(err)
				}
			}
		}()
	}
	time.Sleep(5 * time.Millisecond)
	m.Close()
	wg.Wait()
}

// threadCount is the number of OS threads of this process.
func threadCount(t testing.TB) int {
	entries, err := os.ReadDir("/proc/self/task")
	if err != nil {
		t.Skip("no /proc/self/task")
	}
	return len(entries)
}

func TestIntraOpThreadsSpreadOneCallOverThreads(t *testing.T) {
	x := tensor(t, servables.Float32, []int64{1 << 18}, float32s(1<<18, func(i int) float64 { return float64(i%1000) / 500 })...)
	var results [2][]float64
	var times [2]time.Duration
	for i, threads := range []int{1, 2} {
		m := load(t, testdata("heavy"), servables.LoadOptions{IntraOpThreads: threads})
		before := threadCount(t)
		start := time.Now()
		for range 3 {
			out, err := m.Predict(context.Background(), []servables.Tensor{x})
			if err != nil {
				t.Fatal(err)
			}
			results[i] = values(out[0])
		}
		times[i] = time.Since(start) / 3
		t.Logf("IntraOpThreads=%d: %v per call, OS threads %d -> %d", threads, times[i], before, threadCount(t))
	}
	if fmt.Sprint(results[0]) != fmt.Sprint(results[1]) {
		t.Error("results differ between 1 and 2 intra-op threads")
	}
}

func benchmarkPredict(b *testing.B, m *Model, inputs []servables.Tensor) {
	ctx := context.Background()
	for range 20 { // past the first run's optimization and cold caches
		if _, err := m.Predict(ctx, inputs); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportAllocs()
	b.ResetTimer()
	for range b.N {
		if _, err := m.Predict(ctx, inputs); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkForwardPCTR is the in-process forward time of the benchmark model
// (one intra-op thread), including Grove's copies in and out.
func BenchmarkForwardPCTR(b *testing.B) {
	m := load(b, filepath.Join(bucket, "pctr_v1", "model.pt"), servables.LoadOptions{IntraOpThreads: 1})
	for _, batch := range []int{1, 64} {
		b.Run(fmt.Sprintf("batch=%d", batch), func(b *testing.B) {
			x := tensor(b, servables.Float32, []int64{int64(batch), 64},
				float32s(batch*64, func(i int) float64 { return math.Sin(float64(i)) })...)
			benchmarkPredict(b, m, []servables.Tensor{x})
		})
	}
}

// BenchmarkLoadPCTR is what loading the benchmark model costs before it
// serves as fast as it will: per iteration a load, its first forward call
// (which optimizes the graph), its second, and the close; first-ns and
// second-ns are the two forward calls' times.
func BenchmarkLoadPCTR(b *testing.B) {
	file := filepath.Join(bucket, "pctr_v1", "model.pt")
	x := tensor(b, servables.Float32, []int64{1, 64}, float32s(64, func(i int) float64 { return math.Sin(float64(i)) })...)
	ctx := context.Background()
	var first, second time.Duration
	for range b.N {
		s, err := Runtime{}.Load(ctx, filepath.Dir(file), []string{filepath.Base(file)}, servables.LoadOptions{IntraOpThreads: 1})
		if err != nil {
			b.Fatal(err)
		}
		for i := range 2 {
			start := time.Now()
			if _, err := s.Predict(ctx, []servables.Tensor{x}); err != nil {
				b.Fatal(err)
			}
			if i == 0 {
				first += time.Since(start)
			} else {
				second += time.Since(start)
			}
		}
		if err := s.Close(); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(first.Nanoseconds())/float64(b.N), "first-ns")
	b.ReportMetric(float64(second.Nanoseconds())/float64(b.N), "second-ns")
}

// BenchmarkForwardPCTRAfterIdle times the batch-1 forward of
// BenchmarkForwardPCTR when, as at concurrency 1 in a server, the calling
// thread sleeps between calls (time.Sleep(100µs); idle-ns/sleep is how
// long the sleeps took). Its p50-ns/forward, against BenchmarkForwardPCTR's
// back-to-back ns/op, is what cold caches and a core woken from idle add to
// the forward itself.
func BenchmarkForwardPCTRAfterIdle(b *testing.B) {
	m := load(b, filepath.Join(bucket, "pctr_v1", "model.pt"), servables.LoadOptions{IntraOpThreads: 1})
	x := tensor(b, servables.Float32, []int64{1, 64}, float32s(64, func(i int) float64 { return math.Sin(float64(i)) })...)
	ctx := context.Background()
	inputs := []servables.Tensor{x}
	for range 3 {
		if _, err := m.Predict(ctx, inputs); err != nil {
			b.Fatal(err)
		}
	}
	times := make([]time.Duration, 0, b.N)
	var idle time.Duration
	for b.Loop() {
		t0 := time.Now()
		time.Sleep(100 * time.Microsecond)
		idle += time.Since(t0)
		t0 = time.Now()
		if _, err := m.Predict(ctx, inputs); err != nil {
			b.Fatal(err)
		}
		times = append(times, time.Since(t0))
	}
	slices.Sort(times)
	b.ReportMetric(float64(times[len(times)/2].Nanoseconds()), "p50-ns/forward")
	b.ReportMetric(float64(idle.Nanoseconds())/float64(len(times)), "idle-ns/sleep")
}

// BenchmarkForwardRankDeep times the dynamic-batching benchmark model of
// examples/bench (a deep MLP whose forward is dominated by per-call work):
// one batch-64 forward costs a few batch-1 forwards, not 64.
func BenchmarkForwardRankDeep(b *testing.B) {
	m := load(b, filepath.Join("..", "..", "examples", "bench", "rank_deep", "model.pt"), servables.LoadOptions{IntraOpThreads: 1})
	for _, batch := range []int{1, 64} {
		b.Run(fmt.Sprintf("batch=%d", batch), func(b *testing.B) {
			x := tensor(b, servables.Float32, []int64{int64(batch), 64},
				float32s(batch*64, func(i int) float64 { return math.Sin(float64(i)) })...)
			benchmarkPredict(b, m, []servables.Tensor{x})
		})
	}
}

// BenchmarkIntraOpThreads shows what IntraOpThreads does to one large
// elementwise forward call.
func BenchmarkIntraOpThreads(b *testing.B) {
	x := tensor(b, servables.Float32, []int64{1 << 20}, float32s(1<<20, func(i int) float64 { return float64(i%1000) / 500 })...)
	for _, threads := range []int{1, 2} {
		b.Run(fmt.Sprintf("threads=%d", threads), func(b *testing.B) {
			benchmarkPredict(b, load(b, testdata("heavy"), servables.LoadOptions{IntraOpThreads: threads}), []servables.Tensor{x})
		})
	}
}

func TestIntraOpThreadsIsPerCallNotProcessWide(t *testing.T) {
	const workers, rounds = 8, 200
	var wg sync.WaitGroup
	errs := make(chan error, workers)
	for w := range workers {
		want := 1 + w%2
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range rounds {
				if got := ompTeamSize(want); got != want {
					errs <- fmt.Errorf("asked for %d threads, the OpenMP team had %d", want, got)
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	if got := ompTeamSize(0); got != 1 {
		t.Errorf("IntraOpThreads 0 gave a team of %d, want 1", got)
	}
}

func TestLibtorchRefusalsOfTheInputsAreTheCallersAndOtherFailuresTheModels(t *testing.T) {
	m := load(t, testdata("sub"), servables.LoadOptions{})
	sent := []servables.Tensor{named("a", tensor(t, servables.Float32, []int64{1, 2}, 1, 2)), named("b", tensor(t, servables.Float64, []int64{1}, 1))}
	// Messages of libtorch 1.13 for inputs that do not fit common layers.
	for _, msg := range []string{
		"mat1 and mat2 shapes cannot be multiplied (1x3 and 64x256)",
		"mat1 and mat2 must have the same dtype",
		"expected scalar type Double but found Float",
		"Given groups=1, weight of size [2, 3, 3, 3], expected input[1, 2, 5, 5] to have 3 channels, but got 2 channels instead",
		"Input type (double) and bias type (float) should be the same",
		"Expected tensor for argument #1 'indices' to have one of the following scalar types: Long, Int; but got torch.FloatTensor instead",
		"index out of range in self",
		"Sizes of tensors must match except in dimension 1. Expected size 1 but got size 2 for tensor number 1 in the list.",
		"shape '[-1, 8]' is invalid for input of size 9",
		"input.size(-1) must be equal to input_size. Expected 8, got 4",
		"Found dtype Double but expected Float",
		"where expected condition to be a boolean tensor, but got a tensor with dtype Float",
		"tensors used as indices must be long, byte or bool tensors",
		"batch1 must be a 3D tensor",
		"running_mean should contain 3 elements not 4",
		"The size of tensor a (3) must match the size of tensor b (4) at non-singleton dimension 1",
	} {
		err := m.runError("RuntimeError: "+msg, sent)
		if servables.KindOf(err) != servables.InvalidInput || !strings.Contains(err.Error(), "inputs sent (a FLOAT [1 2], b DOUBLE [1]): RuntimeError: "+msg) {
			t.Errorf("%q: %v, want the caller's error naming the inputs sent", msg, err)
		}
	}
	for _, msg := range []string{"builtins.ValueError: grove test: negative sum", "RuntimeError: out of memory", "The following operation failed in the TorchScript interpreter"} {
		if err := m.runError(msg, sent); servables.KindOf(err) != servables.Execution {
			t.Errorf("%q: %v, want an execution error", msg, err)
		}
	}
}

func TestLoadsAnExtensionlessTorchScriptFileByContent(t *testing.T) {
	dir := t.TempDir()
	b, err := os.ReadFile(testdata("add"))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "simple_model"), b, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "notes"), []byte("not a model"), 0o644); err != nil {
		t.Fatal(err)
	}
	files := []string{"notes", "simple_model"}
	if !(Runtime{}).Accepts(os.DirFS(dir), files) {
		t.Fatal("Accepts refused an extension-less TorchScript file")
	}
	m, err := Runtime{}.Load(context.Background(), dir, files, servables.LoadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	x, _ := servables.NewTensor("x", servables.Float32, []int64{1})
	x.Float32s()[0] = 2
	y := x
	y.Name = "y"
	out, err := m.Predict(context.Background(), []servables.Tensor{x, y})
	if err != nil || out[0].Float32s()[0] != 4 {
		t.Errorf("Predict: %v %v", out, err)
	}
}

// Load, predict, close cycles leave glibc's count of C heap bytes in use
// (mallinfo2) where it was after a warm-up, within 1 KiB a cycle: a pCTR
// module left open holds its weights (tens of KiB) and its graphs. The
// cycles run on one OS thread, warmed up like the heap: libtorch allocates
// some state once per thread that first calls it, which a cycle landing on
// a thread new to the process would count as its own.
func TestLoadCloseCyclesLeaveTheCHeapFlat(t *testing.T) {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	file := filepath.Join(bucket, "pctr_v1", "model.pt")
	x := tensor(t, servables.Float32, []int64{1, 64}, float32s(64, func(i int) float64 { return float64(i) / 64 })...)
	cycle := func() {
		m := load(t, file, servables.LoadOptions{})
		if _, err := m.Predict(context.Background(), []servables.Tensor{x}); err != nil {
			t.Fatal(err)
		}
		if err := m.Close(); err != nil {
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
