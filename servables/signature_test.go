package servables_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/groveml/grove/servables"
	"github.com/groveml/grove/servables/faulty"
)

func tensor(t *testing.T, name string, dt servables.DType, shape ...int64) servables.Tensor {
	t.Helper()
	x, err := servables.NewTensor(name, dt, shape)
	if err != nil {
		t.Fatal(err)
	}
	return x
}

var subSig = []servables.TensorSpec{
	{Name: "a", DType: servables.Float32, Shape: []int64{-1, 4}},
	{Name: "b", DType: servables.Float32, Shape: []int64{-1, 4}},
	{Name: "mask", Optional: true},
}

func TestBindMatchesByNameOrByPosition(t *testing.T) {
	a := tensor(t, "a", servables.Float32, 1, 4)
	b := tensor(t, "b", servables.Float32, 1, 4)
	m := tensor(t, "mask", servables.Bool, 1, 4)
	anon := func(x servables.Tensor) servables.Tensor { x.Name = ""; return x }
	for _, c := range []struct {
		name   string
		inputs []servables.Tensor
		want   string // the indexes, or a part of the error
	}{
		{"named in order", []servables.Tensor{a, b}, "[0 1 -1]"},
		{"named out of order", []servables.Tensor{b, a}, "[1 0 -1]"},
		{"named with the optional one", []servables.Tensor{m, b, a}, "[2 1 0]"},
		{"unnamed", []servables.Tensor{anon(a), anon(b)}, "[0 1 -1]"},
		{"unnamed with the optional one", []servables.Tensor{anon(a), anon(b), anon(m)}, "[0 1 2]"},
		{"unknown name", []servables.Tensor{a, tensor(t, "bogus", servables.Float32, 1, 4)}, `unknown input "bogus"`},
		{"twice", []servables.Tensor{a, a}, `input "a" is given twice`},
		{"missing", []servables.Tensor{b}, `missing input "a"`},
		{"mixed", []servables.Tensor{a, anon(b)}, "input 1 has no name while others have one"},
		{"too few unnamed", []servables.Tensor{anon(a)}, "got 1 unnamed input tensors, the model takes 2 to 3"},
		{"too many unnamed", []servables.Tensor{anon(a), anon(a), anon(a), anon(a)}, "got 4 unnamed input tensors"},
	} {
		idx, err := servables.Bind(subSig, c.inputs)
		got := fmt.Sprint(idx)
		if err != nil {
			got = err.Error()
			if !errors.Is(err, servables.ErrInvalidInput) || !strings.Contains(got, "the model's inputs are: a FLOAT [-1 4], b FLOAT [-1 4], mask (optional)") {
				t.Errorf("%s: %v does not wrap ErrInvalidInput or list the inputs", c.name, err)
			}
		}
		if !strings.Contains(got, c.want) {
			t.Errorf("%s: got %s, want %s", c.name, got, c.want)
		}
	}
}

func TestCheckInputsNamesTheTensorWhatWasSentAndWhatTheModelTakes(t *testing.T) {
	meta := servables.Metadata{Inputs: subSig}
	for _, c := range []struct {
		name          string
		inputs        []servables.Tensor
		want, wantOIP string
	}{
		{"ok, any rows", []servables.Tensor{tensor(t, "a", servables.Float32, 7, 4), tensor(t, "b", servables.Float32, 1, 4)}, "", ""},
		{"dtype", []servables.Tensor{tensor(t, "a", servables.Float64, 1, 4), tensor(t, "b", servables.Float32, 1, 4)},
			`input "a" is DOUBLE, the model takes FLOAT (a FLOAT [-1 4])`, `input "a" is FP64, the model takes FP32 (a FP32 [-1 4])`},
		{"rank", []servables.Tensor{tensor(t, "a", servables.Float32, 4), tensor(t, "b", servables.Float32, 1, 4)},
			`input "a" has shape [4] (rank 1), the model takes rank 2: [-1 4]`, ""},
		{"fixed dimension", []servables.Tensor{tensor(t, "a", servables.Float32, 1, 4), tensor(t, "b", servables.Float32, 1, 3)},
			`input "b" has shape [1 3], the model takes [-1 4] (dimension 1 must be 4)`, ""},
	} {
		err := servables.CheckInputs(meta, c.inputs)
		if c.want == "" {
			if err != nil {
				t.Errorf("%s: %v", c.name, err)
			}
			continue
		}
		if servables.KindOf(err) != servables.InvalidInput || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v, want InvalidInput saying %s", c.name, err, c.want)
		}
		wrapped := fmt.Errorf("model m: %w", err)
		oip := servables.RenderDTypes(wrapped, servables.OIPName)
		if !strings.HasPrefix(oip, "model m: invalid input: ") || (c.wantOIP != "" && !strings.Contains(oip, c.wantOIP)) {
			t.Errorf("%s: in OIP's words %q, want %q", c.name, oip, c.wantOIP)
		}
	}
}

// TestCheckInputsTakesTheSpecsOtherDatatype: an input whose spec has
// AlsoTakes passes with either datatype, a third is refused naming both,
// and a declaration of the input keeps the runtime's AlsoTakes.
func TestCheckInputsTakesTheSpecsOtherDatatype(t *testing.T) {
	spec := servables.TensorSpec{Name: "input", DType: servables.Float32, AlsoTakes: servables.Float64, Shape: []int64{-1, 3}}
	meta := servables.Metadata{Inputs: []servables.TensorSpec{spec}}
	for _, dt := range []servables.DType{servables.Float32, servables.Float64} {
		if err := servables.CheckInputs(meta, []servables.Tensor{tensor(t, "input", dt, 2, 3)}); err != nil {
			t.Errorf("%v input: %v", dt, err)
		}
	}
	err := servables.CheckInputs(meta, []servables.Tensor{tensor(t, "input", servables.Int64, 2, 3)})
	if oip := servables.RenderDTypes(err, servables.OIPName); servables.KindOf(err) != servables.InvalidInput ||
		!strings.Contains(oip, `input "input" is INT64, the model takes FP32 or FP64 (input FP32 [-1 3])`) {
		t.Errorf("INT64 input: %v (in OIP's words %q)", err, oip)
	}
	declared, err := servables.Declare(meta, []servables.TensorSpec{{Name: "input", DType: servables.Float32, Shape: []int64{-1, 3}}}, nil)
	if err != nil || declared.Inputs[0].AlsoTakes != servables.Float64 {
		t.Errorf("Declare: %+v, %v; want the input to keep AlsoTakes FP64", declared.Inputs, err)
	}
	if err := servables.CheckInputs(servables.Metadata{Inputs: subSig[:1]}, []servables.Tensor{tensor(t, "a", servables.Float64, 1, 4)}); err == nil {
		t.Error("a spec without AlsoTakes took FP64 for FP32")
	}
}

func TestDeclareChecksTheDeclarationAgainstTheModel(t *testing.T) {
	torch := servables.Metadata{Runtime: "torchscript", ByPosition: true, Signature: servables.SignatureRuntime,
		Inputs: []servables.TensorSpec{{Name: "a"}, {Name: "b"}, {Name: "mask", Optional: true}}, Outputs: []servables.TensorSpec{{Name: "output_0"}}}
	onnx := servables.Metadata{Runtime: "onnx", Signature: servables.SignatureRuntime,
		Inputs:  []servables.TensorSpec{{Name: "x", DType: servables.Float32, Shape: []int64{-1, 64}}},
		Outputs: []servables.TensorSpec{{Name: "y", DType: servables.Float32, Shape: []int64{-1, 1}}}}
	f32 := func(name string, shape ...int64) servables.TensorSpec {
		return servables.TensorSpec{Name: name, DType: servables.Float32, Shape: shape}
	}
	for _, c := range []struct {
		name            string
		rt              servables.Metadata
		inputs, outputs []servables.TensorSpec
		want            string // the merged metadata's inputs and outputs, or a part of the error
	}{
		{"torch, all inputs, renamed output", torch, []servables.TensorSpec{f32("a", -1, 4), f32("b", -1, 4), {Name: "mask", DType: servables.Bool, Shape: []int64{-1, 4}}},
			[]servables.TensorSpec{f32("diff", -1, 4)}, "a FLOAT [-1 4], b FLOAT [-1 4], mask BOOL [-1 4] (optional) -> diff FLOAT [-1 4]"},
		{"torch, optional input left out", torch, []servables.TensorSpec{f32("a", -1, 4), f32("b", -1, 4)}, nil, "a FLOAT [-1 4], b FLOAT [-1 4] -> output_0"},
		{"torch, inputs in another order", torch, []servables.TensorSpec{f32("b", -1, 4), f32("a", -1, 4)}, nil, `declared input 0 is "b", the model's is "a"`},
		{"torch, a required input left out", torch, []servables.TensorSpec{f32("a", -1, 4)}, nil, "the declared inputs (a FLOAT [-1 4]) are not the model's (a, b, mask (optional))"},
		{"torch, a bogus input", torch, []servables.TensorSpec{f32("a"), f32("b"), f32("mask"), f32("bogus")}, nil, "are not the model's"},
		{"torch, two outputs for one", torch, nil, []servables.TensorSpec{f32("p"), f32("q")}, "2 outputs are declared, the model has 1"},
		{"onnx agrees, narrows the batch", onnx, []servables.TensorSpec{f32("x", 8, -1)}, []servables.TensorSpec{f32("y", -1, 1)}, "x FLOAT [8 64] -> y FLOAT [-1 1]"},
		{"onnx, another dtype", onnx, []servables.TensorSpec{{Name: "x", DType: servables.Float64, Shape: []int64{-1, 64}}}, nil, `declared input "x" is DOUBLE, the model's is FLOAT`},
		{"onnx, another width", onnx, []servables.TensorSpec{f32("x", -1, 32)}, nil, `declared input "x" has shape [-1 32], the model's is [-1 64] (dimension 1)`},
		{"onnx, another rank", onnx, []servables.TensorSpec{f32("x", -1)}, nil, "another rank"},
		{"onnx, renamed output", onnx, nil, []servables.TensorSpec{f32("z", -1, 1)}, `declared output 0 is "z", the model's is "y"`},
	} {
		got, err := servables.Declare(c.rt, c.inputs, c.outputs)
		var desc string
		if err != nil {
			desc = err.Error()
		} else {
			desc = describe(got)
			if got.Signature != servables.SignatureDeclared {
				t.Errorf("%s: Signature = %q", c.name, got.Signature)
			}
		}
		if !strings.Contains(desc, c.want) {
			t.Errorf("%s: got %s, want %s", c.name, desc, c.want)
		}
	}
	if got, err := servables.Declare(onnx, nil, nil); err != nil || got.Signature != servables.SignatureRuntime {
		t.Errorf("nothing declared: %+v %v, want the runtime's metadata", got, err)
	}
}

// describe writes meta's inputs and outputs as "a FLOAT [-1 4], ... -> out ...".
func describe(meta servables.Metadata) string {
	side := func(specs []servables.TensorSpec) string {
		parts := make([]string, len(specs))
		for i, s := range specs {
			parts[i] = s.Name
			if s.DType != servables.Unknown {
				parts[i] += " " + s.DType.String()
			}
			if s.Shape != nil {
				parts[i] += fmt.Sprintf(" %v", s.Shape)
			}
			if s.Optional {
				parts[i] += " (optional)"
			}
		}
		return strings.Join(parts, ", ")
	}
	return side(meta.Inputs) + " -> " + side(meta.Outputs)
}

func TestLearnTakesTheWarmUpsDatatypesAndShapesWithAVariableFirstDimension(t *testing.T) {
	torch := servables.Metadata{Runtime: "torchscript", ByPosition: true, Signature: servables.SignatureRuntime,
		Inputs: []servables.TensorSpec{{Name: "ids"}, {Name: "x"}}}
	sets := [][]servables.Tensor{
		{tensor(t, "", servables.Int64, 1, 10), tensor(t, "", servables.Float32, 1, 4)},
		{tensor(t, "", servables.Int64, 3, 12), tensor(t, "", servables.Float32, 3, 4)},
	}
	outs := [][]servables.Tensor{
		{tensor(t, "output_0", servables.Float32, 1, 1), tensor(t, "output_1", servables.Float64)},
		{tensor(t, "output_0", servables.Float32, 3, 1), tensor(t, "output_1", servables.Float64)},
	}
	got, err := servables.Learn(torch, sets, outs)
	if err != nil {
		t.Fatal(err)
	}
	want := "ids INT64 [-1 -1], x FLOAT [-1 4] -> output_0 FLOAT [-1 1], output_1 DOUBLE []"
	if d := describe(got); d != want || got.Signature != servables.SignatureWarmUp {
		t.Errorf("learned %s (%s), want %s (warm_up)", d, got.Signature, want)
	}
	if d := describe(torch); d != "ids, x -> " {
		t.Errorf("Learn changed its argument: %s", d)
	}
	declared, _ := servables.Declare(torch, []servables.TensorSpec{{Name: "ids", DType: servables.Int64, Shape: []int64{-1, 10}}, {Name: "x", DType: servables.Float32, Shape: []int64{-1, 4}}}, nil)
	got, err = servables.Learn(declared, sets[:1], outs[:1])
	if err != nil || got.Signature != servables.SignatureDeclared || describe(got) != "ids INT64 [-1 10], x FLOAT [-1 4] -> output_0 FLOAT [-1 1], output_1 DOUBLE []" {
		t.Errorf("declared inputs, learned outputs: %s (%s) %v", describe(got), got.Signature, err)
	}
	if _, err := servables.Learn(torch, [][]servables.Tensor{{tensor(t, "bogus", servables.Float32, 1)}}, nil); !errors.Is(err, servables.ErrInvalidInput) {
		t.Errorf("a warm-up input the model does not have: %v", err)
	}
}

// echo loads a faulty model, which answers with its first input.
func echo(t *testing.T) servables.Servable {
	t.Helper()
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "m.faulty"), []byte(`{}`), 0o644); err != nil {
		t.Fatal(err)
	}
	sv, err := faulty.Runtime{}.Load(context.Background(), dir, []string{"m.faulty"}, servables.LoadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { sv.Close() })
	return sv
}

func TestSignedChecksInputsAndNamesDeclaredOutputs(t *testing.T) {
	rt := servables.Metadata{Runtime: "faulty", ByPosition: true, Inputs: []servables.TensorSpec{{Name: "x"}}, Outputs: []servables.TensorSpec{{Name: "x"}}}
	meta, err := servables.Declare(rt, []servables.TensorSpec{{Name: "x", DType: servables.Float32, Shape: []int64{-1, 2}}},
		[]servables.TensorSpec{{Name: "score", DType: servables.Float32, Shape: []int64{-1, 2}}})
	if err != nil {
		t.Fatal(err)
	}
	s := servables.WithSignature(echo(t), meta)
	out, err := s.Predict(context.Background(), []servables.Tensor{tensor(t, "x", servables.Float32, 3, 2)})
	if err != nil || len(out) != 1 || out[0].Name != "score" {
		t.Fatalf("Predict = %+v, %v; want one output named score", out, err)
	}
	_, err = s.Predict(context.Background(), []servables.Tensor{tensor(t, "x", servables.Float32, 3, 5)})
	if servables.KindOf(err) != servables.InvalidInput || !strings.Contains(err.Error(), `input "x" has shape [3 5], the model takes [-1 2]`) {
		t.Errorf("a wrong width: %v", err)
	}
	// The echo answers with an INT32 tensor where FP32 was declared: the model's fault.
	s.SetMetadata(servables.Metadata{Signature: servables.SignatureDeclared, OutputsDeclared: true, Inputs: []servables.TensorSpec{{Name: "x"}},
		Outputs: []servables.TensorSpec{{Name: "score", DType: servables.Float32, Shape: []int64{-1}}}})
	_, err = s.Predict(context.Background(), []servables.Tensor{tensor(t, "x", servables.Int32, 2)})
	if servables.KindOf(err) != servables.OutputUnsupported || !strings.Contains(err.Error(), `output "score" is INT32, the model takes FLOAT`) {
		t.Errorf("an output that is not as declared: %v", err)
	}
	if got := s.Metadata().Outputs[0].Name; got != "score" {
		t.Errorf("Metadata after SetMetadata names the output %q", got)
	}
}

func TestDeclaredOutputsGiveTorchScriptOutputsTheirNames(t *testing.T) {
	torch := servables.Metadata{Runtime: "torchscript", ByPosition: true, UnnamedOutputs: true,
		Inputs: []servables.TensorSpec{{Name: "a"}}, Outputs: []servables.TensorSpec{{Name: "output_0"}}}
	in := []servables.TensorSpec{{Name: "a", DType: servables.Float32, Shape: []int64{-1, 4}}}
	got, err := servables.Declare(torch, in, nil)
	if err != nil || !got.UnnamedOutputs {
		t.Errorf("inputs only: UnnamedOutputs %v, %v; want the outputs still unnamed", got.UnnamedOutputs, err)
	}
	got, err = servables.Declare(torch, in, []servables.TensorSpec{{Name: "score", DType: servables.Float32, Shape: []int64{-1, 1}}})
	if err != nil || got.UnnamedOutputs || got.Outputs[0].Name != "score" {
		t.Errorf("declared outputs: %+v, %v; want named outputs", got, err)
	}
}

// Declaring only the inputs leaves the outputs to the warm-up, for the
// metadata: a learned output shape is not a declaration, so an answer whose
// shape differs from the warm-up's (here a second dimension the declared
// input leaves open) is not the model's fault.
func TestOutputsLearnedBesideDeclaredInputsAreNotEnforced(t *testing.T) {
	rt := echo(t).Metadata()
	meta, err := servables.Declare(rt, []servables.TensorSpec{{Name: "x", DType: servables.Float32, Shape: []int64{-1, -1}}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	s := servables.WithSignature(echo(t), meta)
	warm := []servables.Tensor{tensor(t, "x", servables.Float32, 1, 3)}
	out, err := s.Predict(context.Background(), warm)
	if err != nil {
		t.Fatal(err)
	}
	learned, err := servables.Learn(s.Metadata(), [][]servables.Tensor{warm}, [][]servables.Tensor{out})
	if err != nil {
		t.Fatal(err)
	}
	if d := describe(learned); d != "x FLOAT [-1 -1] -> x FLOAT [-1 3]" {
		t.Fatalf("learned %s", d)
	}
	s.SetMetadata(learned)
	if _, err := s.Predict(context.Background(), []servables.Tensor{tensor(t, "x", servables.Float32, 2, 5)}); err != nil {
		t.Errorf("an input the declaration takes, answered with another width than the warm-up's: %v", err)
	}
}

// twoOutputs answers with outputs a and b (its input's shape, FP32), or,
// as ONNX models do, only those a context from WithOutputs names.
type twoOutputs struct{}

func (twoOutputs) Metadata() servables.Metadata {
	return servables.Metadata{Runtime: "two", Inputs: []servables.TensorSpec{{Name: "x"}}, Outputs: []servables.TensorSpec{{Name: "a"}, {Name: "b"}}}
}
func (twoOutputs) Close() error { return nil }
func (twoOutputs) Predict(ctx context.Context, in []servables.Tensor) ([]servables.Tensor, error) {
	names, filtered := servables.OutputsFrom(ctx)
	var out []servables.Tensor
	for _, n := range []string{"a", "b"} {
		if !filtered || slices.Contains(names, n) {
			t, err := servables.NewTensor(n, servables.Float32, in[0].Shape)
			if err != nil {
				return nil, err
			}
			out = append(out, t)
		}
	}
	return out, nil
}

// A model that returns only the outputs a call asks for (ONNX) answers a
// filtered call with fewer outputs than declared, and not necessarily the
// first ones: that is not the model's fault.
func TestDeclaredOutputsOfAModelThatReturnsOnlyTheRequestedOnes(t *testing.T) {
	spec := func(name string) servables.TensorSpec {
		return servables.TensorSpec{Name: name, DType: servables.Float32, Shape: []int64{-1, 2}}
	}
	meta, err := servables.Declare(twoOutputs{}.Metadata(), []servables.TensorSpec{spec("x")}, []servables.TensorSpec{spec("a"), spec("b")})
	if err != nil {
		t.Fatal(err)
	}
	s := servables.WithSignature(twoOutputs{}, meta)
	x := []servables.Tensor{tensor(t, "x", servables.Float32, 1, 2)}
	out, err := s.Predict(servables.WithOutputs(context.Background(), []string{"b"}), x)
	if err != nil || len(out) != 1 || out[0].Name != "b" {
		t.Fatalf("only b asked for: %+v, %v; want b alone", out, err)
	}
	if out, err := s.Predict(context.Background(), x); err != nil || len(out) != 2 || out[0].Name != "a" || out[1].Name != "b" {
		t.Errorf("every output: %+v, %v", out, err)
	}
	meta.Outputs[1].Shape = []int64{-1, 3}
	s.SetMetadata(meta)
	if _, err := s.Predict(servables.WithOutputs(context.Background(), []string{"b"}), x); servables.KindOf(err) != servables.OutputUnsupported {
		t.Errorf("b not as declared: %v, want the model's fault", err)
	}
}

func TestCheckInputsInTheModelsOrderDoesNotAllocate(t *testing.T) {
	meta := servables.Metadata{Inputs: []servables.TensorSpec{
		{Name: "a", DType: servables.Float32, Shape: []int64{-1, 2}}, {Name: "b", DType: servables.Int64, Shape: []int64{-1}}}}
	a, _ := servables.NewTensor("a", servables.Float32, []int64{3, 2})
	b, _ := servables.NewTensor("b", servables.Int64, []int64{3})
	unnamedA, unnamedB := a, b
	unnamedA.Name, unnamedB.Name = "", ""
	for name, inputs := range map[string][]servables.Tensor{"named": {a, b}, "unnamed": {unnamedA, unnamedB}} {
		var err error
		if n := testing.AllocsPerRun(100, func() { err = servables.CheckInputs(meta, inputs) }); n != 0 || err != nil {
			t.Errorf("%s: %v allocations, %v; want none", name, n, err)
		}
	}
	if err := servables.CheckInputs(meta, []servables.Tensor{unnamedA, {DType: servables.Float32, Shape: []int64{3}, Data: make([]byte, 12)}}); err == nil ||
		!strings.Contains(err.Error(), `input "b" is FLOAT, the model takes INT64`) {
		t.Errorf("a FLOAT b in order: %v, want the datatype named", err)
	}
}
