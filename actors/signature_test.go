package actors

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"testing/synctest"

	"github.com/groveml/grove/servables"
)

// describeMeta writes meta's tensors as "x FLOAT [-1] -> x FLOAT [-1] (warm_up)".
func describeMeta(meta servables.Metadata) string {
	side := func(specs []servables.TensorSpec) string {
		parts := make([]string, len(specs))
		for i, s := range specs {
			parts[i] = fmt.Sprintf("%s %v %v", s.Name, s.DType, s.Shape)
		}
		return strings.Join(parts, ", ")
	}
	return side(meta.Inputs) + " -> " + side(meta.Outputs) + " (" + meta.Signature + ")"
}

func TestSignatureIsLearnedFromTheWarmUpAndRequestsAreCheckedAgainstIt(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		w := newWorld(t, configJSON(entry("a/", "", `"warm_up_batch_request_json": "[[1, 2], [3, 4, 5]]"`), entry("b/", "", "")),
			map[string]faultySpec{"a/": {}, "b/": {}})
		defer w.stop()
		synctest.Wait()
		meta, _, ok := w.sys.ModelMetadata("a/")
		if got := describeMeta(meta); !ok || got != "x FLOAT [-1] -> x FLOAT [-1] (warm_up)" {
			t.Errorf("a/ metadata: %s", got)
		}
		meta, _, _ = w.sys.ModelMetadata("b/")
		if got := describeMeta(meta); got != "x UNKNOWN [] -> x UNKNOWN [] (runtime)" {
			t.Errorf("b/ (no warm-up) metadata: %s", got)
		}
		if logs := w.log.String(); !strings.Contains(logs, `msg="model signature incomplete`) || !strings.Contains(logs, "model=b/") || strings.Contains(logs, "incomplete: its metadata has no datatypes or shapes; declare inputs and outputs in the model config, or give it a warm_up_batch_request_json (docs/signatures.md)\" model=a/") {
			t.Errorf("want the incomplete signature of b/, and only b/'s, logged:\n%s", logs)
		}
		x, _ := servables.NewTensor("x", servables.Float64, []int64{1})
		res, err := w.sys.Infer(context.Background(), []Request{{API: "test", ModelPath: "a/", Inputs: []servables.Tensor{x}}, {API: "test", ModelPath: "b/", Inputs: []servables.Tensor{x}}})
		if err != nil {
			t.Fatal(err)
		}
		if servables.KindOf(res[0].Err) != servables.InvalidInput || !strings.Contains(res[0].Err.Error(), `input "x" is DOUBLE, the model takes FLOAT`) {
			t.Errorf("a DOUBLE input for a/: %v", res[0].Err)
		}
		if res[1].Err != nil {
			t.Errorf("b/ knows no datatype, so takes a DOUBLE: %v", res[1].Err)
		}
		if res := w.infer("a/", 7); res.Err != nil {
			t.Errorf("a FLOAT input for a/: %v", res.Err)
		}
	})
}

func TestDeclaredSignatureIsCheckedAgainstTheModelAtLoad(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ok := `"inputs": [{"name": "x", "datatype": "FP32", "shape": [-1, 2]}], "outputs": [{"name": "x", "datatype": "FP32", "shape": [-1, 2]}]`
		w := newWorld(t, configJSON(entry("a/", "", ok), entry("b/", "", `"inputs": [{"name": "y", "datatype": "FP32", "shape": [-1]}]`),
			entry("c/", "", `"inputs": [{"name": "x", "datatype": "BF16", "shape": [-1]}]`)),
			map[string]faultySpec{"a/": {}, "b/": {}, "c/": {}})
		defer w.stop()
		synctest.Wait()
		meta, _, _ := w.sys.ModelMetadata("a/")
		if got := describeMeta(meta); got != "x FLOAT [-1 2] -> x FLOAT [-1 2] (declared)" {
			t.Errorf("a/ metadata: %s", got)
		}
		if m := w.model("b/"); m.State != StateFailed || !strings.Contains(m.LastError, `does not fit the model: declared input 0 is "y", the model's is "x"`) {
			t.Errorf("b/ declares an input the model does not have: %s %s", m.State, m.LastError)
		}
		if meta, _, _ := w.sys.ModelMetadata("c/"); !strings.HasPrefix(describeMeta(meta), "x BFLOAT16 [-1] ->") {
			t.Errorf("c/ declares a BF16 input: %s", describeMeta(meta))
		}
		x, _ := servables.NewTensor("x", servables.Float32, []int64{1, 3})
		res, _ := w.sys.Infer(context.Background(), []Request{{API: "test", ModelPath: "a/", Inputs: []servables.Tensor{x}}})
		if servables.KindOf(res[0].Err) != servables.InvalidInput || !strings.Contains(res[0].Err.Error(), `input "x" has shape [1 3], the model takes [-1 2] (dimension 1 must be 2)`) {
			t.Errorf("a [1 3] input for a/: %v", res[0].Err)
		}
	})
}

func TestPositionalRequestsBindByPositionOnlyForPositionalRuntimes(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		w := newWorld(t, configJSON(entry("pos/", "", ""), entry("named/", "", "")),
			map[string]faultySpec{"pos/": {ByPos: true}, "named/": {}})
		defer w.stop()
		synctest.Wait()
		bogus, _ := servables.NewTensor("bogus", servables.Float32, []int64{1})
		for _, c := range []struct {
			path       string
			positional bool
			want       string
		}{
			{"pos/", true, ""},
			{"pos/", false, `unknown input "bogus"; the model's inputs are: x`},
			{"named/", true, `unknown input "bogus"`},
		} {
			res, err := w.sys.Infer(context.Background(), []Request{{API: "test", ModelPath: c.path, Inputs: []servables.Tensor{bogus}, Positional: c.positional}})
			if err != nil {
				t.Fatal(err)
			}
			switch got := res[0].Err; {
			case c.want == "" && got != nil:
				t.Errorf("%s positional=%v: %v", c.path, c.positional, got)
			case c.want != "" && (servables.KindOf(got) != servables.InvalidInput || !strings.Contains(got.Error(), c.want)):
				t.Errorf("%s positional=%v: %v, want %q", c.path, c.positional, got, c.want)
			}
		}
	})
}

func TestTypeNamedInputsBindByPositionUnlessTheModelHasTheirNames(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		w := newWorld(t, configJSON(entry("named/", "", "")), map[string]faultySpec{"named/": {}})
		defer w.stop()
		synctest.Wait()
		typed, _ := servables.NewTensor("Float32", servables.Float32, []int64{1})
		x, _ := servables.NewTensor("x", servables.Float32, []int64{1})
		for _, c := range []struct {
			name      string
			inputs    []servables.Tensor
			typeNamed bool
			want      string
		}{
			// ForestFlow's tensors named after their types reach a model
			// whose input is "x" by position.
			{"no name is the model's", []servables.Tensor{typed}, true, ""},
			// The B&A API's names are the model's: a wrong one is refused.
			{"names that are not types", []servables.Tensor{typed}, false, `unknown input "Float32"`},
			// A model whose inputs are named after the types binds them by
			// name, so one that matches keeps the others' names checked.
			{"one name is the model's", []servables.Tensor{x, typed}, true, `unknown input "Float32"`},
			{"every name is the model's", []servables.Tensor{x}, true, ""},
		} {
			res, err := w.sys.Infer(context.Background(), []Request{{API: "test", ModelPath: "named/", Inputs: c.inputs, Positional: true, TypeNamed: c.typeNamed}})
			if err != nil {
				t.Fatal(err)
			}
			switch got := res[0].Err; {
			case c.want == "" && got != nil:
				t.Errorf("%s: %v", c.name, got)
			case c.want != "" && (servables.KindOf(got) != servables.InvalidInput || !strings.Contains(got.Error(), c.want)):
				t.Errorf("%s: %v, want %q", c.name, got, c.want)
			}
		}
	})
}

func TestAModelReloadedAfterACrashKeepsTheLearnedSignature(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		w := newWorld(t, configJSON(entry("a/", "", `"warm_up_batch_request_json": "[[1]]"`)), map[string]faultySpec{"a/": {PanicOn: f64(13)}})
		defer w.stop()
		synctest.Wait()
		if res := w.infer("a/", 13); servables.KindOf(res.Err) != servables.Crashed {
			t.Fatalf("panicking request got %v", res.Err)
		}
		synctest.Wait()
		x, _ := servables.NewTensor("x", servables.Int32, []int64{1})
		res, err := w.sys.Infer(context.Background(), []Request{{API: "test", ModelPath: "a/", Inputs: []servables.Tensor{x}}})
		if err != nil || servables.KindOf(res[0].Err) != servables.InvalidInput || !strings.Contains(res[0].Err.Error(), `input "x" is INT32, the model takes FLOAT`) {
			t.Errorf("an INT32 input after the restart: %v %v, want the learned signature's check", res, err)
		}
		if res := w.infer("a/", 1); res.Err != nil {
			t.Errorf("a FLOAT input after the restart: %v", res.Err)
		}
	})
}
