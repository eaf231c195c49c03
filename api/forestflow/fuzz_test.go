package forestflow

import (
	"encoding/json"
	"errors"
	"reflect"
	"strings"
	"testing"

	"github.com/groveml/grove/servables"
)

// FuzzParseInferenceRequest checks that parsing never panics, that every
// error is a *RequestError, and that a successful parse gives one valid
// [Rows, len(fields)] tensor per schema entry which, written as a
// Prediction and read back, keeps its values. Its seed corpus is checked in
// under testdata/fuzz/FuzzParseInferenceRequest.
func FuzzParseInferenceRequest(f *testing.F) {
	f.Fuzz(func(t *testing.T, body []byte) {
		req, err := ParseInferenceRequest(body)
		if err != nil {
			var re *RequestError
			if !errors.As(err, &re) || re.Kind < Malformed || re.Kind > UnsupportedType || re.Msg == "" {
				t.Fatalf("error %#v is not a complete *RequestError", err)
			}
			if req != nil {
				t.Fatal("both a request and an error")
			}
			return
		}
		if req.Rows < 1 || len(req.Inputs) != len(req.Schema) || len(req.Inputs) == 0 || req.Configs == nil {
			t.Fatalf("rows %d, %d inputs for %d schema entries", req.Rows, len(req.Inputs), len(req.Schema))
		}
		for i, in := range req.Inputs {
			if err := in.Validate(); err != nil {
				t.Fatalf("input %d: %v", i, err)
			}
			want := []int64{int64(req.Rows), int64(len(req.Schema[i].Fields))}
			if !reflect.DeepEqual(in.Shape, want) {
				t.Fatalf("input %d shape %v, want %v", i, in.Shape, want)
			}
			if dt, _ := req.Schema[i].Type.DType(); in.DType != dt {
				t.Fatalf("input %d dtype %v, want %v", i, in.DType, dt)
			}
		}
		out, err := AppendPrediction(nil, FQRV{Contract{"o", "p", 1}, "r"}, req.Inputs)
		if err != nil {
			if !errors.Is(err, ErrOutput) {
				t.Fatalf("AppendPrediction: %v", err)
			}
			return // NaN or infinite inputs
		}
		var wrapped struct{ Prediction map[string]json.RawMessage }
		if err := json.Unmarshal(out, &wrapped); err != nil {
			t.Fatalf("prediction is not JSON: %v\n%s", err, out)
		}
		delete(wrapped.Prediction, "fqrv")
		again, _ := json.Marshal(wrapped.Prediction)
		back, err := ParseInferenceRequest(again)
		if err != nil && strings.Contains(err.Error(), "both have type String") {
			return // Bytes of UTF-8 text come back as a second String entry
		}
		if err != nil {
			t.Fatalf("prediction does not parse back: %v\n%s", err, again)
		}
		for i, in := range back.Inputs {
			if !equalBits(in, req.Inputs[i]) {
				t.Fatalf("input %d changed in the round trip: %v -> %v", i, req.Inputs[i].Data, in.Data)
			}
		}
	})
}

func equalBits(a, b servables.Tensor) bool {
	return a.DType == b.DType && reflect.DeepEqual(a.Shape, b.Shape) && string(a.Data) == string(b.Data)
}
