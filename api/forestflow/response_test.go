package forestflow

import (
	"encoding/json"
	"errors"
	"math"
	"net/http"
	"reflect"
	"strings"
	"testing"

	"github.com/groveml/grove/servables"
)

// researchResponse is the score response of ForestFlow's docs/quickstart.md,
// as quoted in the research notes (keys there are sorted by the client).
const researchResponse = `{"Prediction":{"datum":[{"tensors":[{"Float64":{"data":[438.18]}}]},{"tensors":[{"Float64":{"data":[437.58]}}]}],
 "fqrv":{"contract":{"contractNumber":0,"organization":"samples","project":"energy_output"},"releaseVersion":"StackedEnsemble_…"},
 "schema":[{"fields":["Regression"],"type":"Float64"}]}}`

func tensor(t *testing.T, name string, dt servables.DType, shape []int64, vals ...float64) servables.Tensor {
	t.Helper()
	x, err := servables.NewTensor(name, dt, shape)
	if err != nil {
		t.Fatal(err)
	}
	for i, v := range vals {
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
		}
	}
	return x
}

func decode(t *testing.T, b []byte) any {
	t.Helper()
	var v any
	if err := json.Unmarshal(b, &v); err != nil {
		t.Fatalf("invalid JSON %s: %v", b, err)
	}
	return v
}

var sampleFQRV = FQRV{Contract{"samples", "energy_output", 0}, "StackedEnsemble_…"}

func TestPredictionMatchesResearchExample(t *testing.T) {
	out := tensor(t, "Regression", servables.Float64, []int64{2, 1}, 438.18, 437.58)
	got, err := AppendPrediction(nil, sampleFQRV, []servables.Tensor{out})
	if err != nil {
		t.Fatal(err)
	}
	const want = `{"Prediction":{"fqrv":{"contract":{"organization":"samples","project":"energy_output","contractNumber":0},"releaseVersion":"StackedEnsemble_…"},` +
		`"schema":[{"type":"Float64","fields":["Regression"]}],` +
		`"datum":[{"tensors":[{"Float64":{"data":[438.18]}}]},{"tensors":[{"Float64":{"data":[437.58]}}]}]}}`
	if string(got) != want {
		t.Errorf("got\n%s\nwant\n%s", got, want)
	}
	if !reflect.DeepEqual(decode(t, got), decode(t, []byte(researchResponse))) {
		t.Errorf("not the research example:\n%s", got)
	}
}

func TestPredictionIsWrappedInPredictionKey(t *testing.T) {
	out := tensor(t, "", servables.Float32, []int64{1}, 0.5)
	got, err := AppendPrediction([]byte("prefix:"), sampleFQRV, []servables.Tensor{out})
	if err != nil {
		t.Fatal(err)
	}
	body, ok := strings.CutPrefix(string(got), "prefix:")
	if !ok {
		t.Fatalf("dst not appended to: %s", got)
	}
	m := decode(t, []byte(body)).(map[string]any)
	if len(m) != 1 || m["Prediction"] == nil {
		t.Fatalf("top level %v, want only the Prediction key", m)
	}
	inner := m["Prediction"].(map[string]any)
	for _, k := range []string{"fqrv", "schema", "datum"} {
		if _, ok := inner[k]; !ok {
			t.Errorf("Prediction has no %q", k)
		}
	}
}

func TestPredictionFieldNamesAndNumberFormats(t *testing.T) {
	outs := []servables.Tensor{
		tensor(t, "score", servables.Float32, []int64{2, 3}, 0.1, 1e-7, 3e21, -0.5, 1e6, 2),
		tensor(t, "", servables.Int64, []int64{2}, -9007199254740993, 7),
		tensor(t, "emb", servables.Int8, []int64{2, 1, 2}, -128, 127, 0, 1),
		tensor(t, "q\"x", servables.Float64, []int64{2, 1}, 1e-7, 123456789012),
		tensor(t, "i16", servables.Int16, []int64{2, 1}, -32768, 32767),
		tensor(t, "i32", servables.Int32, []int64{2, 1}, -5, 5),
	}
	outs[1].Int64s()[0] = math.MinInt64
	got, err := AppendPrediction(nil, FQRV{Contract{"o", "p", 7}, "r1"}, outs)
	if err != nil {
		t.Fatal(err)
	}
	const want = `{"Prediction":{"fqrv":{"contract":{"organization":"o","project":"p","contractNumber":7},"releaseVersion":"r1"},"schema":[` +
		`{"type":"Float32","fields":["score_0","score_1","score_2"]},` +
		`{"type":"Int64","fields":["output_1"]},` +
		`{"type":"Int8","fields":["emb_0","emb_1"]},` +
		`{"type":"Float64","fields":["q\"x"]},` +
		`{"type":"Int16","fields":["i16"]},` +
		`{"type":"Int32","fields":["i32"]}],"datum":[` +
		`{"tensors":[{"Float32":{"data":[0.1,1e-7,3e+21]}},{"Int64":{"data":["-9223372036854775808"]}},{"Int8":{"data":[-128,127]}},{"Float64":{"data":[1e-7]}},{"Int16":{"data":[-32768]}},{"Int32":{"data":[-5]}}]},` +
		`{"tensors":[{"Float32":{"data":[-0.5,1000000,2]}},{"Int64":{"data":["7"]}},{"Int8":{"data":[0,1]}},{"Float64":{"data":[123456789012]}},{"Int16":{"data":[32767]}},{"Int32":{"data":[5]}}]}]}}`
	if string(got) != want {
		t.Errorf("got\n%s\nwant\n%s", got, want)
	}
	decode(t, got)
}

func TestPredictionRoundTripsThroughTheRequestParser(t *testing.T) {
	// A Prediction's schema and datum have the request's shape, so the
	// request parser reads them back into the output tensors.
	outs := []servables.Tensor{
		tensor(t, "p", servables.Float64, []int64{3, 2}, 0.25, -1.5e-300, 1.7976931348623157e308, 5e-324, 0, -0),
		tensor(t, "c", servables.Int64, []int64{3, 1}, 1, 2, 3),
		tensor(t, "f", servables.Float32, []int64{3, 1}, 0.1, 3.4028234663852886e38, 1.4e-45),
	}
	got, err := AppendPrediction(nil, sampleFQRV, outs)
	if err != nil {
		t.Fatal(err)
	}
	var wrapped struct{ Prediction map[string]json.RawMessage }
	if err := json.Unmarshal(got, &wrapped); err != nil {
		t.Fatal(err)
	}
	delete(wrapped.Prediction, "fqrv")
	body, _ := json.Marshal(wrapped.Prediction)
	req := mustParse(t, string(body))
	if req.Rows != 3 || len(req.Inputs) != len(outs) {
		t.Fatalf("rows %d, %d inputs", req.Rows, len(req.Inputs))
	}
	for i, in := range req.Inputs {
		if in.DType != outs[i].DType || !reflect.DeepEqual(in.Data, outs[i].Data) {
			t.Errorf("input %d: %v %v, want %v %v", i, in.DType, in.Data, outs[i].DType, outs[i].Data)
		}
	}
}

func TestPredictionErrors(t *testing.T) {
	ok := tensor(t, "ok", servables.Float64, []int64{2, 1}, 1, 2)
	nan := tensor(t, "bad", servables.Float64, []int64{2}, 1, math.NaN())
	inf := tensor(t, "", servables.Float32, []int64{2}, math.Inf(1), 0)
	short := tensor(t, "short", servables.Int32, []int64{1, 2}, 1, 2)
	broken := tensor(t, "broken", servables.Int32, []int64{2, 2})
	broken.Data = broken.Data[:4]
	scalar := servables.Tensor{Name: "s", DType: servables.Float64, Data: make([]byte, 8)}
	unknown := servables.Tensor{Name: "u", DType: servables.Unknown, Shape: []int64{2}}
	tests := []struct {
		name     string
		outputs  []servables.Tensor
		output   int
		contains []string
	}{
		{"no outputs", nil, -1, []string{"no outputs"}},
		{"NaN", []servables.Tensor{ok, nan}, 1, []string{"output 1 (bad)", "element 1 is NaN"}},
		{"infinity", []servables.Tensor{ok, inf}, 1, []string{"output 1 (output_1)", "element 0 is +Inf"}},
		{"row count differs", []servables.Tensor{ok, short}, 1, []string{"output 1 (short)", "1 rows, want 2"}},
		{"data does not fill shape", []servables.Tensor{ok, broken}, 1, []string{"output 1 (broken)", "do not fill shape"}},
		{"scalar first", []servables.Tensor{scalar}, 0, []string{"output 0 (s)", "scalar"}},
		{"unknown dtype", []servables.Tensor{ok, unknown}, 1, []string{"output 1 (u)", "no ForestFlow tensor type"}},
		{"bool dtype", []servables.Tensor{ok, {Name: "m", DType: servables.Bool, Shape: []int64{2}, Data: []byte{0, 1}}}, 1, []string{"output 1 (m)", "dtype BOOL has no ForestFlow tensor type"}},
		{"uint8 dtype", []servables.Tensor{{Name: "u", DType: servables.Uint8, Shape: []int64{2}, Data: []byte{0, 1}}}, 0, []string{"output 0 (u)", "dtype UINT8 has no ForestFlow tensor type"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			dst := []byte("keep")
			got, err := AppendPrediction(dst, sampleFQRV, tc.outputs)
			if string(got) != "keep" {
				t.Errorf("dst changed to %q", got)
			}
			var oe *OutputError
			if !errors.As(err, &oe) || !errors.Is(err, ErrOutput) || errors.Is(err, ErrMalformed) {
				t.Fatalf("err = %v, want an *OutputError", err)
			}
			if oe.Output != tc.output {
				t.Errorf("output %d, want %d", oe.Output, tc.output)
			}
			for _, s := range tc.contains {
				if !strings.Contains(oe.Error(), s) {
					t.Errorf("error %q does not contain %q", oe, s)
				}
			}
		})
	}
}

func TestCheckOutputsComparesWithTheRequestRows(t *testing.T) {
	out := tensor(t, "y", servables.Float32, []int64{2, 1}, 1, 2)
	if err := CheckOutputs(2, []servables.Tensor{out}); err != nil {
		t.Errorf("CheckOutputs(2) = %v", err)
	}
	if err := CheckOutputs(3, []servables.Tensor{out}); err == nil || !strings.Contains(err.Error(), "2 rows, want 3") {
		t.Errorf("CheckOutputs(3) = %v, want a row count error", err)
	}
}

func TestErrorResponses(t *testing.T) {
	c := Contract{"ads", "pctr", 1}
	f := FQRV{c, "v\n2"}
	tests := []struct {
		name   string
		resp   ErrorResponse
		status int
		want   string
	}{
		{"unknown contract", ErrorResponse{Case: UnknownContract, Contract: c}, http.StatusNotFound,
			`{"UnknownContract":{"contract":{"organization":"ads","project":"pctr","contractNumber":1}}}`},
		{"no active servables", ErrorResponse{Case: NoActiveServablesForContract, Contract: c}, http.StatusUnprocessableEntity,
			`{"NoActiveServablesForContract":{"contract":{"organization":"ads","project":"pctr","contractNumber":1}}}`},
		{"unknown servable", ErrorResponse{Case: UnknownServable, FQRV: f}, http.StatusNotFound,
			`{"UnknownServable":{"fqrv":{"contract":{"organization":"ads","project":"pctr","contractNumber":1},"releaseVersion":"v\n2"}}}`},
		{"servable error with message", ErrorResponse{Case: UnknownServableError, FQRV: f, Message: "output 0 (y): element 1 is NaN"}, http.StatusInternalServerError,
			`{"UnknownServableError":{"fqrv":{"contract":{"organization":"ads","project":"pctr","contractNumber":1},"releaseVersion":"v\n2"},"errorMessage":"output 0 (y): element 1 is NaN"}}`},
		{"servable error without message", ErrorResponse{Case: UnknownServableError, FQRV: f}, http.StatusInternalServerError,
			`{"UnknownServableError":{"fqrv":{"contract":{"organization":"ads","project":"pctr","contractNumber":1},"releaseVersion":"v\n2"}}}`},
		{"contract validation", ErrorResponse{Case: ContractValidationError, Contract: c, Message: "duplicate release \"v1\""}, http.StatusUnprocessableEntity,
			`{"ContractValidationError":{"contract":{"organization":"ads","project":"pctr","contractNumber":1},"msg":"duplicate release \"v1\""}}`},
		{"servable exists", ErrorResponse{Case: ServableAlreadyExistsError, FQRV: f}, http.StatusConflict,
			`{"ServableAlreadyExistsError":{"fqrv":{"contract":{"organization":"ads","project":"pctr","contractNumber":1},"releaseVersion":"v\n2"}}}`},
		{"invalid serve request", ErrorResponse{Case: CreateServableRequestInvalidError, FQRV: f, Message: "path: needed"}, http.StatusUnprocessableEntity,
			`{"CreateServableRequestInvalidError":{"fqrv":{"contract":{"organization":"ads","project":"pctr","contractNumber":1},"releaseVersion":"v\n2"},"msg":"path: needed"}}`},
		{"unknown case is a servable error", ErrorResponse{Case: "Bogus", FQRV: f}, http.StatusInternalServerError,
			`{"UnknownServableError":{"fqrv":{"contract":{"organization":"ads","project":"pctr","contractNumber":1},"releaseVersion":"v\n2"}}}`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got := AppendErrorResponse(nil, tc.resp)
			if string(got) != tc.want {
				t.Errorf("got  %s\nwant %s", got, tc.want)
			}
			decode(t, got)
			if s := tc.resp.Case.Status(); s != tc.status {
				t.Errorf("status %d, want %d", s, tc.status)
			}
		})
	}
}

func TestStringsAreEscapedAsJSON(t *testing.T) {
	in := "a\"\\\x01\t\r\n<é>\xff"
	got := appendString(nil, in)
	if want := `"a\"\\\u0001\t\r\n<é>\ufffd"`; string(got) != want {
		t.Errorf("got %s, want %s", got, want)
	}
	var back string
	if err := json.Unmarshal(got, &back); err != nil || back != "a\"\\\x01\t\r\n<é>\uFFFD" {
		t.Errorf("decoded %q, %v", back, err)
	}
}
