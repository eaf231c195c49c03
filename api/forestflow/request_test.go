package forestflow

import (
	"errors"
	"math"
	"net/http"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/groveml/grove/servables"
)

// researchRequest is the gaming example of ForestFlow's docs/inference.md,
// text and whitespace unchanged (testdata/gaming_request.json; the it/
// tests send it to the real binary).
func researchRequest(t *testing.T) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", "gaming_request.json"))
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// numericRequest is researchRequest without its String entry and tensors.
const numericRequest = `{
"schema": [{ "type": "Float64", "fields": ["hp", "attack", "defence"] }],
"datum": [
 {"tensors": [{ "Float64": { "data": [67.37, 25.2, 80.6] } }]},
 {"tensors": [{ "Float64": { "data": [76.5, 62, 33.9] } }]}
],
"configs" : {"gameid": "some-uuid", "playerid": "player-uuid"}
}`

func mustParse(t *testing.T, body string) *Request {
	t.Helper()
	req, err := ParseInferenceRequest([]byte(body))
	if err != nil {
		t.Fatalf("ParseInferenceRequest: %v", err)
	}
	for i, in := range req.Inputs {
		if err := in.Validate(); err != nil {
			t.Fatalf("input %d: %v", i, err)
		}
	}
	return req
}

func TestResearchExampleRequestBecomesAStringAndAFloat64Tensor(t *testing.T) {
	req := mustParse(t, researchRequest(t))
	if req.Rows != 2 || len(req.Inputs) != 2 {
		t.Fatalf("rows %d, %d inputs; want 2 rows, 2 inputs", req.Rows, len(req.Inputs))
	}
	s := req.Inputs[0]
	got, err := s.Strings()
	if err != nil || s.Name != "String" || s.DType != servables.Bytes || !reflect.DeepEqual(s.Shape, []int64{2, 2}) ||
		!reflect.DeepEqual(got, []string{"human1", "human", "monster16", "monster"}) {
		t.Fatalf("String input %q %v %v %q, %v", s.Name, s.DType, s.Shape, got, err)
	}
	if f := req.Inputs[1]; f.Name != "Float64" || !reflect.DeepEqual(f.Float64s(), []float64{67.37, 25.2, 80.6, 76.5, 62, 33.9}) {
		t.Fatalf("Float64 input %q %v", f.Name, f.Float64s())
	}
}

func TestBytesValuesAreBase64AndStringValuesText(t *testing.T) {
	req := mustParse(t, `{"schema":[{"type":"Bytes","fields":["raw","url"]},{"type":"String","fields":["s"]}],
 "datum":[{"tensors":[{"String":{"data":["caf\u00e9 \"x\""]}},{"Byte":{"data":["AP8=","-_8"]}}]}]}`)
	b, _ := req.Inputs[0].Strings()
	s, _ := req.Inputs[1].Strings()
	if req.Inputs[0].Name != "Bytes" || !reflect.DeepEqual(b, []string{"\x00\xff", "\xfb\xff"}) || !reflect.DeepEqual(s, []string{"café \"x\""}) {
		t.Fatalf("Bytes %q, String %q", b, s)
	}
}

// A value whose integer part has more digits than strconv keeps (800) is
// read as written: "1", 1,000 zeros, "e-1000" is 1, not strconv's 1e-201.
func TestLongNumberLiteralReadsAsWritten(t *testing.T) {
	one := "1" + strings.Repeat("0", 1000) + "e-1000"
	for _, tt := range []string{"Float32", "Float64"} {
		req := mustParse(t, `{"schema":[{"type":"`+tt+`","fields":["a","b"]}],"datum":[{"tensors":[{"`+tt+`":{"data":[`+one+`,"`+one+`"]}}]}]}`)
		in := req.Inputs[0]
		var got []float64
		if tt == "Float32" {
			for _, v := range in.Float32s() {
				got = append(got, float64(v))
			}
		} else {
			got = in.Float64s()
		}
		if !reflect.DeepEqual(got, []float64{1, 1}) {
			t.Errorf("%s: data %v, want [1 1]", tt, got)
		}
	}
}

func TestNumericRequestBecomesOneRowPerDatum(t *testing.T) {
	req := mustParse(t, numericRequest)
	if req.Rows != 2 || len(req.Inputs) != 1 {
		t.Fatalf("rows %d, %d inputs; want 2 rows, 1 input", req.Rows, len(req.Inputs))
	}
	in := req.Inputs[0]
	if in.Name != "Float64" || in.DType != servables.Float64 || !reflect.DeepEqual(in.Shape, []int64{2, 3}) {
		t.Errorf("input %q %v %v, want Float64 DOUBLE [2 3]", in.Name, in.DType, in.Shape)
	}
	if want := []float64{67.37, 25.2, 80.6, 76.5, 62, 33.9}; !reflect.DeepEqual(in.Float64s(), want) {
		t.Errorf("data %v, want %v", in.Float64s(), want)
	}
	if want := map[string]string{"gameid": "some-uuid", "playerid": "player-uuid"}; !reflect.DeepEqual(req.Configs, want) {
		t.Errorf("configs %v, want %v", req.Configs, want)
	}
	if want := []SchemaEntry{{Float64, []string{"hp", "attack", "defence"}}}; !reflect.DeepEqual(req.Schema, want) {
		t.Errorf("schema %v, want %v", req.Schema, want)
	}
}

func TestMultiTypeSchemaGivesOneTensorPerEntryInSchemaOrder(t *testing.T) {
	// Datum tensors come in any order and are matched by type, as in ForestFlow.
	body := `{"schema":[
	  {"type":"Int64","fields":["id"]},
	  {"type":"Float32","fields":["a","b"]},
	  {"type":6,"fields":["c"]},
	  {"type":"Int8","fields":["d","e"]},
	  {"type":"Int16","fields":["f"]},
	  {"type":"Float64","fields":["g"]}],
	 "datum":[
	  {"tensors":[{"Float32":{"data":[0.1,"2.5"]}},{"Int64":{"data":["9223372036854775807"]}},{"Int32":{"data":[-7]}},
	              {"Int8":{"data":[-128,127]}},{"Int16":{"data":["-32768"]}},{"Float64":{"data":["NaN"],"tensorType":"Float64"}}]},
	  {"tensors":[{"Int64":{"data":[-1]}},{"Float32":{"data":["-Infinity",3e2]}},{"Int32":{"data":["2147483647"]}},
	              {"Int8":{"data":[0,1]}},{"Int16":{"data":[32767]}},{"Float64":{"data":[1e-300],"tensorType":3}}]}],
	 "configs":null}`
	req := mustParse(t, body)
	if req.Rows != 2 || len(req.Inputs) != 6 || len(req.Configs) != 0 || req.Configs == nil {
		t.Fatalf("rows %d, %d inputs, configs %v", req.Rows, len(req.Inputs), req.Configs)
	}
	wantTypes := []servables.DType{servables.Int64, servables.Float32, servables.Int32, servables.Int8, servables.Int16, servables.Float64}
	wantWidth := []int64{1, 2, 1, 2, 1, 1}
	for i, in := range req.Inputs {
		if in.DType != wantTypes[i] || !reflect.DeepEqual(in.Shape, []int64{2, wantWidth[i]}) || in.Name != req.Schema[i].Type.String() {
			t.Errorf("input %d: %q %v %v, want %v [2 %d]", i, in.Name, in.DType, in.Shape, wantTypes[i], wantWidth[i])
		}
	}
	check := func(name string, got, want any) {
		t.Helper()
		if !reflect.DeepEqual(got, want) {
			t.Errorf("%s = %v, want %v", name, got, want)
		}
	}
	check("Int64", req.Inputs[0].Int64s(), []int64{math.MaxInt64, -1})
	check("Float32", req.Inputs[1].Float32s(), []float32{0.1, 2.5, float32(math.Inf(-1)), 300})
	check("Int32", req.Inputs[2].Int32s(), []int32{-7, math.MaxInt32})
	check("Int8", req.Inputs[3].Int8s(), []int8{-128, 127, 0, 1})
	check("Int16", req.Inputs[4].Int16s(), []int16{-32768, 32767})
	f64 := req.Inputs[5].Float64s()
	if !math.IsNaN(f64[0]) || f64[1] != 1e-300 {
		t.Errorf("Float64 = %v, want [NaN 1e-300]", f64)
	}
}

func TestRequestErrors(t *testing.T) {
	const f2 = `"schema":[{"type":"Float64","fields":["a","b"]}]`
	tests := []struct {
		name         string
		body         string
		kind         ErrorKind
		datum, entry int
		contains     []string
	}{
		{"empty body", ``, Malformed, -1, -1, []string{"not valid JSON"}},
		{"invalid JSON", `{"schema":[}`, Malformed, -1, -1, []string{"not valid JSON"}},
		{"top level is an array", `[]`, Malformed, -1, -1, []string{"want an object"}},
		{"top level is null", `null`, Malformed, -1, -1, []string{"want an object"}},
		{"unknown top-level member", `{"schema":[],"datums":[]}`, Malformed, -1, -1, []string{`unknown member "datums"`}},
		{"member names are case-sensitive", `{"Schema":[]}`, Malformed, -1, -1, []string{`"Schema"`}},
		{"schema is not an array", `{"schema":{}}`, Malformed, -1, -1, []string{"schema is an object, want an array"}},
		{"configs value is not a string", `{"configs":{"k":1}}`, Malformed, -1, -1, []string{`configs["k"]`, "want a string"}},
		{"configs is an array", `{"configs":[]}`, Malformed, -1, -1, []string{"configs is an array"}},
		{"schema entry without type", `{"schema":[{"fields":["a"]}]}`, Malformed, -1, 0, []string{"schema entry 0 has no type"}},
		{"schema entry is null", `{"schema":[null]}`, Malformed, -1, 0, []string{"schema entry 0 is null"}},
		{"unknown type name", `{"schema":[{"type":"float64","fields":["a"]}]}`, Malformed, -1, 0, []string{`"float64" is not a TensorType`}},
		{"unknown type number", `{"schema":[{"type":11,"fields":["a"]}]}`, Malformed, -1, 0, []string{"11 is not a TensorType"}},
		{"type is a boolean", `{"schema":[{"type":true,"fields":["a"]}]}`, Malformed, -1, 0, []string{"a boolean"}},
		{"field is not a string", `{"schema":[{"type":"Int32","fields":[1]}]}`, Malformed, -1, 0, []string{"field 0 is a number"}},
		{"unknown schema member", `{"schema":[{"type":"Int32","fields":["a"],"shape":[1]}]}`, Malformed, -1, 0, []string{`unknown member "shape"`}},
		{"no schema", `{"datum":[{"tensors":[]}]}`, Unprocessable, -1, -1, []string{"no schema"}},
		{"Float16 type", `{"schema":[{"type":"Float16","fields":["a"]}]}`, UnsupportedType, -1, 0, []string{"Float16"}},
		{"Bool type", `{"schema":[{"type":9,"fields":["a"]}]}`, UnsupportedType, -1, 0, []string{"Bool"}},
		{"String value is a number", `{"schema":[{"type":"String","fields":["s"]}],"datum":[{"tensors":[{"String":{"data":[1]}}]}]}`, Malformed, 0, 0, []string{"datum 0 tensor 0 data[0] is a number, want a string"}},
		{"Bytes value is not base64", `{"schema":[{"type":"Bytes","fields":["b"]}],"datum":[{"tensors":[{"Byte":{"data":["no!"]}}]}]}`, Malformed, 0, 0, []string{`schema entry 0 (Bytes) value 0 "no!" is not base64`}},
		{"type named twice", `{"schema":[{"type":"Int32","fields":["a"]},{"type":"Int32","fields":["b"]}]}`, Unprocessable, -1, 1, []string{"entries 0 and 1 both have type Int32"}},
		{"entry without fields", `{"schema":[{"type":"Int32"}]}`, Unprocessable, -1, 0, []string{"schema entry 0 (Int32) has no fields"}},
		{"no datum", `{` + f2 + `}`, Unprocessable, -1, -1, []string{"no datum"}},
		{"empty datum array", `{` + f2 + `,"datum":[]}`, Unprocessable, -1, -1, []string{"no datum"}},
		{"datum is not an array", `{` + f2 + `,"datum":{}}`, Malformed, -1, -1, []string{"datum is an object"}},
		{"datum is null element", `{` + f2 + `,"datum":[null]}`, Malformed, 0, -1, []string{"datum 0 is null"}},
		{"datum without tensors", `{` + f2 + `,"datum":[{"tensors":[{"Float64":{"data":[1,2]}}]},{}]}`, Unprocessable, 1, 0, []string{"datum 1 has no Float64 tensor for schema entry 0 (2 fields)"}},
		{"too few values", `{` + f2 + `,"datum":[{"tensors":[{"Float64":{"data":[1,2]}}]},{"tensors":[{"Float64":{"data":[1]}}]}]}`, Unprocessable, 1, 0, []string{"datum 1", "schema entry 0 (Float64, 2 fields) has 1 values, want 2"}},
		{"too many values", `{` + f2 + `,"datum":[{"tensors":[{"Float64":{"data":[1,2,3]}}]}]}`, Unprocessable, 0, 0, []string{"has 3 values, want 2"}},
		{"missing data", `{` + f2 + `,"datum":[{"tensors":[{"Float64":{}}]}]}`, Unprocessable, 0, 0, []string{"has 0 values, want 2"}},
		{"type not in schema", `{` + f2 + `,"datum":[{"tensors":[{"Int32":{"data":[1]}}]}]}`, Unprocessable, 0, -1, []string{"datum 0 tensor 0 has type Int32, which is not in the schema"}},
		{"String tensor not in schema", `{` + f2 + `,"datum":[{"tensors":[{"String":{"data":["x"]}}]}]}`, Unprocessable, 0, -1, []string{"type String"}},
		{"two tensors of one type", `{` + f2 + `,"datum":[{"tensors":[{"Float64":{"data":[1,2]}},{"Float64":{"data":[1,2]}}]}]}`, Unprocessable, 0, 0, []string{"two Float64 tensors"}},
		{"tensor with two values", `{` + f2 + `,"datum":[{"tensors":[{"Float64":{"data":[1,2]},"Int32":{"data":[1]}}]}]}`, Malformed, 0, -1, []string{"two values"}},
		{"tensor with no value", `{` + f2 + `,"datum":[{"tensors":[{}]}]}`, Unprocessable, 0, -1, []string{"datum 0 tensor 0 has no value"}},
		{"unknown tensor case", `{` + f2 + `,"datum":[{"tensors":[{"Double":{"data":[1,2]}}]}]}`, Malformed, 0, -1, []string{`unknown member "Double"`}},
		{"tensorType mismatch", `{` + f2 + `,"datum":[{"tensors":[{"Float64":{"data":[1,2],"tensorType":"Int32"}}]}]}`, Unprocessable, 0, -1, []string{"Float64 tensor with tensorType Int32"}},
		{"data is not an array", `{` + f2 + `,"datum":[{"tensors":[{"Float64":{"data":1}}]}]}`, Malformed, 0, 0, []string{"data is a number"}},
		{"null value", `{` + f2 + `,"datum":[{"tensors":[{"Float64":{"data":[1,null]}}]}]}`, Malformed, 0, 0, []string{"data[1] is null"}},
		{"nested array value", `{` + f2 + `,"datum":[{"tensors":[{"Float64":{"data":[[1],2]}}]}]}`, Malformed, 0, 0, []string{"data[0] is an array"}},
		{"boolean value", `{` + f2 + `,"datum":[{"tensors":[{"Float64":{"data":[true,2]}}]}]}`, Malformed, 0, 0, []string{"a boolean"}},
		{"non-numeric string", `{` + f2 + `,"datum":[{"tensors":[{"Float64":{"data":[1,"inf"]}}]}]}`, Malformed, 0, 0, []string{`value 1 "inf" is not a number`}},
		{"hex string", `{` + f2 + `,"datum":[{"tensors":[{"Float64":{"data":["0x10",1]}}]}]}`, Malformed, 0, 0, []string{"is not a number"}},
		{"Float64 overflow", `{` + f2 + `,"datum":[{"tensors":[{"Float64":{"data":[1e400,1]}}]}]}`, Malformed, 0, 0, []string{"out of range for Float64"}},
		{"Float32 overflow", `{"schema":[{"type":"Float32","fields":["a"]}],"datum":[{"tensors":[{"Float32":{"data":[1e39]}}]}]}`, Malformed, 0, 0, []string{"out of range for Float32"}},
		{"Int32 fraction", `{"schema":[{"type":"Int32","fields":["a"]}],"datum":[{"tensors":[{"Int32":{"data":[1.0]}}]}]}`, Malformed, 0, 0, []string{"is not an integer"}},
		{"Int32 overflow", `{"schema":[{"type":"Int32","fields":["a"]}],"datum":[{"tensors":[{"Int32":{"data":[2147483648]}}]}]}`, Malformed, 0, 0, []string{"out of range for Int32"}},
		{"Int64 overflow", `{"schema":[{"type":"Int64","fields":["a"]}],"datum":[{"tensors":[{"Int64":{"data":["9223372036854775808"]}}]}]}`, Malformed, 0, 0, []string{"out of range for Int64"}},
		{"Int8 out of range", `{"schema":[{"type":"Int8","fields":["a"]}],"datum":[{"tensors":[{"Int8":{"data":[128]}}]}]}`, Unprocessable, 0, 0, []string{"out of range for Int8"}},
		{"Int16 out of range", `{"schema":[{"type":"Int16","fields":["a"]}],"datum":[{"tensors":[{"Int16":{"data":[-32769]}}]}]}`, Unprocessable, 0, 0, []string{"out of range for Int16"}},
		{"second datum bad value", `{"schema":[{"type":"Int32","fields":["a","b"]}],"datum":[{"tensors":[{"Int32":{"data":[1,2]}}]},{"tensors":[{"Int32":{"data":[3,"x"]}}]}]}`, Malformed, 1, 0, []string{"datum 1: schema entry 0 (Int32) value 1"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			req, err := ParseInferenceRequest([]byte(tc.body))
			if req != nil {
				t.Fatalf("got a request, want an error")
			}
			var re *RequestError
			if !errors.As(err, &re) {
				t.Fatalf("err = %#v, want a *RequestError", err)
			}
			if re.Kind != tc.kind || re.Datum != tc.datum || re.Entry != tc.entry {
				t.Errorf("kind %d datum %d entry %d, want %d %d %d (%v)", re.Kind, re.Datum, re.Entry, tc.kind, tc.datum, tc.entry, re)
			}
			for _, s := range tc.contains {
				if !strings.Contains(re.Error(), s) {
					t.Errorf("error %q does not contain %q", re, s)
				}
			}
			wantStatus := http.StatusUnprocessableEntity
			if tc.kind == Malformed {
				wantStatus = http.StatusBadRequest
			}
			if re.Status() != wantStatus {
				t.Errorf("status %d, want %d", re.Status(), wantStatus)
			}
			if errors.Is(err, ErrMalformed) != (tc.kind == Malformed) || errors.Is(err, ErrUnprocessable) == (tc.kind == Malformed) ||
				errors.Is(err, ErrUnsupportedType) != (tc.kind == UnsupportedType) || errors.Is(err, ErrOutput) {
				t.Errorf("errors.Is does not match kind %d", tc.kind)
			}
		})
	}
}

func TestNullMembersCountAsAbsent(t *testing.T) {
	req := mustParse(t, `{"schema":[{"type":"Int32","fields":["a"]}],"datum":[{"tensors":[{"Int32":{"data":[5],"tensorType":null},"Float64":null}]}],"configs":null}`)
	if got := req.Inputs[0].Int32s(); !reflect.DeepEqual(got, []int32{5}) {
		t.Errorf("data %v, want [5]", got)
	}
}

func TestQuotedNumbersAreUnescapedButNotTrimmed(t *testing.T) {
	req := mustParse(t, `{"schema":[{"type":"Int32","fields":["a\"b","\u00e9"]}],"datum":[{"tensors":[{"Int32":{"data":["\u0031", "-2"]}}]}]}`)
	if got := req.Inputs[0].Int32s(); !reflect.DeepEqual(got, []int32{1, -2}) {
		t.Errorf("data %v, want [1 -2]", got)
	}
	if want := []string{"a\"b", "\u00e9"}; !reflect.DeepEqual(req.Schema[0].Fields, want) {
		t.Errorf("fields %q, want %q", req.Schema[0].Fields, want)
	}
	_, err := ParseInferenceRequest([]byte(`{"schema":[{"type":"Int32","fields":["a"]}],"datum":[{"tensors":[{"Int32":{"data":[" 2"]}}]}]}`))
	if !errors.Is(err, ErrMalformed) {
		t.Errorf("err = %v, want malformed for a padded quoted number", err)
	}
}
