package ba

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/groveml/grove/actors"
	"github.com/groveml/grove/servables"
)

// served is a Backend serving the model "m" only, as the router does: a
// request for another path is MODEL_NOT_FOUND; "m" takes one FLOAT tensor
// (another type is the caller's mistake) and fails on a value of 13.
type served struct{}

func (served) ModelPaths() []string { return []string{"m"} }

func (served) Infer(_ context.Context, reqs []actors.Request) ([]actors.Result, error) {
	out := make([]actors.Result, len(reqs))
	for i, r := range reqs {
		out[i].ModelPath = r.ModelPath
		switch {
		case !slices.Contains(served{}.ModelPaths(), r.ModelPath):
			out[i].Err = fmt.Errorf("%w: Requested model '%s' has not been registered", actors.ErrModelNotFound, r.ModelPath)
		case r.Inputs[0].DType != servables.Float32:
			out[i].Err = fmt.Errorf("%w: input 0 is %v, the model takes FLOAT", servables.ErrInvalidInput, r.Inputs[0].DType)
		case r.Inputs[0].Float32s()[0] == 13:
			out[i].Err = fmt.Errorf("%w: thirteen", servables.ErrExecution)
		default:
			out[i].Outputs = r.Inputs
		}
	}
	return out, nil
}

// TestErrorPrecedenceFollowsTheSidecar checks, for every pair of failures
// an item can have, that the one the sidecar reports wins: the document,
// then the item's structure (an unquoted number included), then the model
// lookup, then the conversion of tensor_content, then the model's run.
func TestErrorPrecedenceFollowsTheSidecar(t *testing.T) {
	const (
		quotes   = `{"error_type":"INPUT_PARSING","description":"All numbers within the tensor_content must be enclosed in quotes"}`
		notFound = `{"error_type":"MODEL_NOT_FOUND","description":"Requested model 'x' has not been registered"}`
	)
	tensor := func(dt, content string) string {
		return `{"data_type":"` + dt + `","tensor_shape":[1],"tensor_content":[` + content + `]}`
	}
	item := func(path string, tensors ...string) string {
		return `{"model_path":"` + path + `","tensors":[` + strings.Join(tensors, ",") + `]}`
	}
	for _, c := range []struct {
		name, item string
		unquoted   bool // ba_accept_unquoted_numbers
		want       string
	}{
		{"missing model_path before anything", `{"tensors":[` + tensor("FLOAT", `1`) + `]}`, false,
			`{"model_path":"","error":{"error_type":"INPUT_PARSING","description":"Missing model_path in the JSON document"}}`},
		{"unquoted number before the model lookup", item("x", tensor("FLOAT", `1`)), false, `{"model_path":"x","error":` + quotes + `}`},
		{"unquoted number in a later tensor before the model lookup", item("x", tensor("FLOAT", `"1"`), tensor("FLOAT", `2`)), false,
			`{"model_path":"x","error":` + quotes + `}`},
		{"unquoted number before a conversion error", item("m", tensor("INT8", `"seven"`), tensor("FLOAT", `2`)), false,
			`{"model_path":"m","error":` + quotes + `}`},
		{"data_type before the model lookup", item("x", tensor("BOOL", `"1"`)), false,
			`{"model_path":"x","error":{"error_type":"INPUT_PARSING","description":"Invalid JSON format: Unsupported 'data_type' field BOOL"}}`},
		{"count mismatch before the model lookup", item("x", `{"data_type":"FLOAT","tensor_shape":[2],"tensor_content":["1"]}`), false,
			`{"model_path":"x","error":{"error_type":"INPUT_PARSING","description":"Mismatch between the size of tensor_content (1) and a product of tensor dimensions (2)"}}`},
		{"model lookup before a conversion error", item("x", tensor("DOUBLE", `"seven"`)), false, `{"model_path":"x","error":` + notFound + `}`},
		{"model lookup before an empty tensors array", item("x"), false, `{"model_path":"x","error":` + notFound + `}`},
		{"model lookup with numbers let through", item("x", tensor("FLOAT", `1`)), true, `{"model_path":"x","error":` + notFound + `}`},
		{"conversion error for a served model", item("m", tensor("DOUBLE", `"seven"`)), false,
			`{"model_path":"m","error":{"error_type":"INPUT_PARSING","description":"Input Tensor Conversion Error. Message: Model m encounters tensor parsing error: Error in double conversion"}}`},
		{"empty tensors for a served model", item("m"), false,
			`{"model_path":"m","error":{"error_type":"INPUT_PARSING","description":"tensors must not be empty"}}`},
		{"conversion error before the model's own checks", item("m", tensor("INT8", `"300"`)), false,
			`{"model_path":"m","error":{"error_type":"INPUT_PARSING","description":"Input Tensor Conversion Error. Message: Model m encounters tensor parsing error: The number is outside of bounds of int8_t."}}`},
		{"the model's input check", item("m", tensor("INT8", `"3"`)), false,
			`{"model_path":"m","error":{"error_type":"MODEL_EXECUTION","description":"Model Execution Error. Message: Model m encounters an exception during evaluation: invalid input: input 0 is INT8, the model takes FLOAT"}}`},
		{"the model's run", item("m", tensor("FLOAT", `"13"`)), false,
			`{"model_path":"m","error":{"error_type":"MODEL_EXECUTION","description":"Model Execution Error. Message: Model m encounters an exception during evaluation: model execution failed: thirteen"}}`},
		{"numbers let through to a served model", item("m", tensor("FLOAT", `1.5`)), true,
			`{"model_path":"m","tensors":[{"tensor_shape":[1],"data_type":"FLOAT","tensor_content":[1.5]}]}`},
	} {
		t.Run(c.name, func(t *testing.T) {
			// The item is answered the same alone and beside a good one.
			body := `{"request":[` + c.item + `,` + item("m", tensor("FLOAT", `"2"`)) + `]}`
			out, code, err := Run(t.Context(), served{}, nil, []byte(body), Call{Parse: ParseOptions{AcceptUnquotedNumbers: c.unquoted}})
			want := `{"response":[` + c.want + `,{"model_path":"m","tensors":[{"tensor_shape":[1],"data_type":"FLOAT","tensor_content":[2.0]}]}]}`
			if err != nil || code != 200 || string(out) != want {
				t.Errorf("got %d %v\n%s\nwant\n%s", code, err, out, want)
			}
		})
	}
	// A document that does not parse fails the whole batch, whatever its items.
	out, code, _ := Run(t.Context(), served{}, nil, []byte(`{"request":[`+item("x", tensor("FLOAT", `1`))+`]`), Call{})
	if want := `{"response":[{"error":{"error_type":"INPUT_PARSING","description":"JSON Parse Error: Missing a comma or '}' after an object member."}}]}`; code != 400 || string(out) != want {
		t.Errorf("malformed document: %d %s", code, out)
	}
}

// namer answers every request with its inputs, named y, from a model
// whose outputs have names of their own or not (UnnamedOutputs).
type namer struct{ unnamed bool }

func (namer) ModelPaths() []string { return []string{"m"} }

func (n namer) Infer(_ context.Context, reqs []actors.Request) ([]actors.Result, error) {
	out := make([]actors.Result, len(reqs))
	for i, r := range reqs {
		y := r.Inputs[0]
		y.Name = "y"
		out[i] = actors.Result{ModelPath: r.ModelPath, Outputs: []servables.Tensor{y}, UnnamedOutputs: n.unnamed}
	}
	return out, nil
}

func TestTensorNameOnlyForOutputsWithNames(t *testing.T) {
	body := []byte(`{"request":[{"model_path":"m","tensors":[{"data_type":"INT64","tensor_shape":[1],"tensor_content":["7"]}]}]}`)
	for _, c := range []struct {
		unnamed bool
		want    string
	}{
		{true, `{"response":[{"model_path":"m","tensors":[{"tensor_shape":[1],"data_type":"INT64","tensor_content":[7]}]}]}`},
		{false, `{"response":[{"model_path":"m","tensors":[{"tensor_name":"y","tensor_shape":[1],"data_type":"INT64","tensor_content":[7]}]}]}`},
	} {
		out, _, err := Run(t.Context(), namer{c.unnamed}, nil, body, Call{})
		if err != nil || string(out) != c.want {
			t.Errorf("unnamed outputs %v: %s %v\nwant %s", c.unnamed, out, err, c.want)
		}
	}
}
