package ba

import (
	"encoding/json"
	"math"
	"math/big"
	"strings"
	"testing"

	"github.com/groveml/grove/servables"
)

func tensorOf[T any](t *testing.T, name string, dt servables.DType, shape []int64, view func(servables.Tensor) []T, vals ...T) servables.Tensor {
	t.Helper()
	tn, err := servables.NewTensor(name, dt, shape)
	if err != nil {
		t.Fatal(err)
	}
	copy(view(tn), vals)
	return tn
}

func f32s(t *testing.T, name string, shape []int64, v ...float32) servables.Tensor {
	return tensorOf(t, name, servables.Float32, shape, servables.Tensor.Float32s, v...)
}

func f64s(t *testing.T, shape []int64, v ...float64) servables.Tensor {
	return tensorOf(t, "", servables.Float64, shape, servables.Tensor.Float64s, v...)
}

func TestAppendDoubleFormatsLikeRapidjson(t *testing.T) {
	tests := []struct {
		in   float64
		want string
	}{
		{float64(float32(3.14)), "3.140000104904175"}, // float32 widened (sidecar test)
		{2, "2.0"},
		{125, "125.0"},
		{0, "0.0"},
		{math.Copysign(0, -1), "-0.0"},
		{1, "1.0"},
		{-1, "-1.0"},
		{1.2345, "1.2345"},
		{0.123456789012, "0.123456789012"},
		{1234567.8, "1234567.8"},
		{-79.39773355813419, "-79.39773355813419"},
		{0.001, "0.001"},
		{0.000001, "0.000001"},
		{0.0000001, "1e-7"},
		{1.5e-7, "1.5e-7"},
		{1e20, "100000000000000000000.0"},
		{123456789012345680000.0, "123456789012345680000.0"},
		{1e21, "1e21"},
		{1.5e21, "1.5e21"},
		{1e30, "1e30"},
		{1.234567890123456e30, "1.234567890123456e30"},
		{5e-324, "5e-324"},
		{2.225073858507201e-308, "2.225073858507201e-308"},
		{2.2250738585072014e-308, "2.2250738585072014e-308"},
		{math.MaxFloat64, "1.7976931348623157e308"},
		{-math.MaxFloat64, "-1.7976931348623157e308"},
		// Grisu2 is neither always shortest nor always closest: these differ
		// from strconv's 'g'/-1 output (0.020000000000000004, 0.42500054836273193).
		{0.020000000000000004, "0.020000000000000005"},
		{float64(float32(0.42500055)), "0.42500054836273196"},
	}
	for _, tt := range tests {
		if got := string(appendDouble(nil, tt.in)); got != tt.want {
			t.Errorf("%v: got %s, want %s", tt.in, got, tt.want)
		}
	}
}

// TestCachedPowers recomputes the Grisu cached powers of ten with math/big.
func TestCachedPowers(t *testing.T) {
	two64 := new(big.Int).Lsh(big.NewInt(1), 64)
	for i, c := range cachedPowers {
		k := -348 + 8*i
		// 10^k = f * 2^e, rounded to nearest: f = round(10^k / 2^e).
		num, den := big.NewInt(1), big.NewInt(1)
		p := new(big.Int).Exp(big.NewInt(10), big.NewInt(int64(abs(k))), nil)
		if k >= 0 {
			num.Mul(num, p)
		} else {
			den.Mul(den, p)
		}
		if c.e >= 0 {
			den.Lsh(den, uint(c.e))
		} else {
			num.Lsh(num, uint(-c.e))
		}
		q, r := new(big.Int).QuoRem(num, den, new(big.Int))
		if r.Lsh(r, 1).Cmp(den) >= 0 {
			q.Add(q, big.NewInt(1))
		}
		if q.Cmp(two64) >= 0 || q.Bit(63) == 0 || q.Uint64() != c.f {
			t.Errorf("10^%d: table %#x * 2^%d, computed %#x", k, c.f, c.e, q)
		}
	}
}

func abs(k int) int {
	if k < 0 {
		return -k
	}
	return k
}

func TestAppendStringEscapesLikeRapidjson(t *testing.T) {
	tests := []struct{ in, want string }{
		{"plain", `"plain"`},
		{`a"b\c`, `"a\"b\\c"`},
		{"\b\t\n\f\r", `"\b\t\n\f\r"`},
		{"\x00\x01\x0b\x1f", `"\u0000\u0001\u000B\u001F"`},
		{"\x7f", "\"\x7f\""},
		{"</script>&'", `"</script>&'"`},
		{"a/b", `"a/b"`},
		{"é😀\u2028", "\"é😀\u2028\""},
		{"bad\xffutf8\xe2\x82", "\"bad\uFFFDutf8\uFFFD\uFFFD\""},
		{"", `""`},
	}
	for _, tt := range tests {
		got := appendString(nil, tt.in)
		if string(got) != tt.want {
			t.Errorf("%q: got %s, want %s", tt.in, got, tt.want)
		}
		if !json.Valid(got) {
			t.Errorf("%q: invalid JSON %s", tt.in, got)
		}
	}
}

func TestAppendResponse(t *testing.T) {
	i8 := tensorOf(t, "", servables.Int8, []int64{3}, servables.Tensor.Int8s, -128, 0, 127)
	i64 := tensorOf(t, "ids", servables.Int64, []int64{1, 2}, servables.Tensor.Int64s, math.MinInt64, math.MaxInt64)
	i16 := tensorOf(t, "", servables.Int16, nil, servables.Tensor.Int16s, -7)
	i32 := tensorOf(t, "", servables.Int32, []int64{1}, servables.Tensor.Int32s, 42)
	tests := []struct {
		name    string
		results []Result
		want    string
	}{
		{"no results", nil, `{"response":[]}`},
		{"float outputs with and without names",
			[]Result{{ModelPath: "pcvr/", Outputs: []servables.Tensor{f32s(t, "PartitionedCall:0", []int64{2, 1}, 0.5, 3.14), f64s(t, []int64{1}, -2)}}},
			`{"response":[{"model_path":"pcvr/","tensors":[{"tensor_name":"PartitionedCall:0","tensor_shape":[2,1],"data_type":"FLOAT","tensor_content":[0.5,3.140000104904175]},` +
				`{"tensor_shape":[1],"data_type":"DOUBLE","tensor_content":[-2.0]}]}]}`},
		{"integer outputs",
			[]Result{{ModelPath: "m", Outputs: []servables.Tensor{i8, i64, i16, i32}}},
			`{"response":[{"model_path":"m","tensors":[{"tensor_shape":[3],"data_type":"INT8","tensor_content":[-128,0,127]},` +
				`{"tensor_name":"ids","tensor_shape":[1,2],"data_type":"INT64","tensor_content":[-9223372036854775808,9223372036854775807]},` +
				`{"tensor_shape":[],"data_type":"INT16","tensor_content":[-7]},{"tensor_shape":[1],"data_type":"INT32","tensor_content":[42]}]}]}`},
		{"mixed success and errors",
			[]Result{
				{ModelPath: "a", Outputs: []servables.Tensor{i32}},
				{ModelPath: "pcvr_2", Err: &Error{Type: ModelNotFound, Description: "Requested model 'pcvr_2' has not been registered"}},
				{ModelPath: "", Err: &Error{Type: InputParsing, Description: "Missing model_path in the JSON document"}},
				{ModelPath: "c", Err: &Error{Type: ModelExecution}},
			},
			`{"response":[{"model_path":"a","tensors":[{"tensor_shape":[1],"data_type":"INT32","tensor_content":[42]}]},` +
				`{"model_path":"pcvr_2","error":{"error_type":"MODEL_NOT_FOUND","description":"Requested model 'pcvr_2' has not been registered"}},` +
				`{"model_path":"","error":{"error_type":"INPUT_PARSING","description":"Missing model_path in the JSON document"}},` +
				`{"model_path":"c","error":{"error_type":"MODEL_EXECUTION"}}]}`},
		{"NaN fails only its item",
			[]Result{
				{ModelPath: "nan/", Outputs: []servables.Tensor{f32s(t, "", []int64{1}, 1), f32s(t, "x", []int64{2}, 1, float32(math.NaN()))}},
				{ModelPath: "ok", Outputs: []servables.Tensor{i32}},
			},
			`{"response":[{"model_path":"nan/","error":{"error_type":"OUTPUT_PARSING","description":"Error during output parsing to json: output 1 of model nan/ contains NaN or Inf"}},` +
				`{"model_path":"ok","tensors":[{"tensor_shape":[1],"data_type":"INT32","tensor_content":[42]}]}]}`},
		{"Inf fails its item",
			[]Result{{ModelPath: "inf", Outputs: []servables.Tensor{f64s(t, []int64{1}, math.Inf(-1))}}},
			`{"response":[{"model_path":"inf","error":{"error_type":"OUTPUT_PARSING","description":"Error during output parsing to json: output 0 of model inf contains NaN or Inf"}}]}`},
		{"inconsistent tensor fails its item",
			[]Result{{ModelPath: "bad", Outputs: []servables.Tensor{{DType: servables.Float32, Shape: []int64{2}, Data: make([]byte, 4)}}}},
			`{"response":[{"model_path":"bad","error":{"error_type":"OUTPUT_PARSING","description":"Error during output parsing to json: output 0 of model bad: invalid tensor shape: 4 bytes of FLOAT do not fill shape [2] (2 elements)"}}]}`},
		{"BOOL and UINT8 outputs fail their item",
			[]Result{
				{ModelPath: "b", Outputs: []servables.Tensor{i32, {DType: servables.Bool, Shape: []int64{2}, Data: []byte{0, 1}}}},
				{ModelPath: "u", Outputs: []servables.Tensor{{DType: servables.Uint8, Shape: []int64{1}, Data: []byte{7}}}},
			},
			`{"response":[{"model_path":"b","error":{"error_type":"OUTPUT_PARSING","description":"Error during output parsing to json: output 1 of model b: output type BOOL is not supported by the B&A API"}},` +
				`{"model_path":"u","error":{"error_type":"OUTPUT_PARSING","description":"Error during output parsing to json: output 0 of model u: output type UINT8 is not supported by the B&A API"}}]}`},
		{"escaped strings",
			[]Result{{ModelPath: "a\"b/é", Err: &Error{Type: GRPC, Description: "Code: 14, Message: <closed>\n"}}},
			`{"response":[{"model_path":"a\"b/é","error":{"error_type":"GRPC","description":"Code: 14, Message: <closed>\n"}}]}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			prefix := []byte("prefix:")
			got := AppendResponse(prefix, tt.results)
			if !strings.HasPrefix(string(got), "prefix:") || string(got[len(prefix):]) != tt.want {
				t.Errorf("got  %s\nwant %s", got[len(prefix):], tt.want)
			}
			if !json.Valid(got[len(prefix):]) {
				t.Error("invalid JSON")
			}
		})
	}
}

func TestAppendBatchError(t *testing.T) {
	tests := []struct {
		name string
		err  *Error
		path string
		want string
	}{
		{"without a model path", &Error{Type: GRPC, Description: "transport closed"}, "",
			`{"response":[{"error":{"error_type":"GRPC","description":"transport closed"}}]}`},
		{"with a model path", &Error{Type: OutputParsing, Description: "Error during output parsing to json."}, "m/",
			`{"response":[{"model_path":"m/","error":{"error_type":"OUTPUT_PARSING","description":"Error during output parsing to json."}}]}`},
		{"without a description", &Error{Type: InputParsing}, "",
			`{"response":[{"error":{"error_type":"INPUT_PARSING"}}]}`},
		{"nil error", nil, "",
			`{"response":[{"error":{"error_type":"UNKNOWN"}}]}`},
		{"parse error", &Error{Type: InputParsing, Description: "JSON Parse Error: The document is empty."}, "",
			`{"response":[{"error":{"error_type":"INPUT_PARSING","description":"JSON Parse Error: The document is empty."}}]}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := string(AppendBatchError(nil, tt.err, tt.path)); got != tt.want {
				t.Errorf("got  %s\nwant %s", got, tt.want)
			}
		})
	}
}

func TestAppendModelPaths(t *testing.T) {
	tests := []struct {
		paths []string
		want  string
	}{
		{nil, `[]`},
		{[]string{"pcvr_v1/"}, `["pcvr_v1/"]`},
		{[]string{"pcvr_v1/", "pcvr_v2/", "q\"x"}, `["pcvr_v1/","pcvr_v2/","q\"x"]`},
	}
	for _, tt := range tests {
		if got := string(AppendModelPaths(nil, tt.paths)); got != tt.want {
			t.Errorf("%q: got %s, want %s", tt.paths, got, tt.want)
		}
	}
}

func TestErrorString(t *testing.T) {
	e := &Error{Type: InputParsing, Description: "Missing tensors in the JSON document"}
	var err error = e
	if err.Error() != "INPUT_PARSING: Missing tensors in the JSON document" {
		t.Errorf("got %q", err.Error())
	}
}

// TestBoundaryExponentRange checks the range cachedIndex covers: the
// normalised upper boundary of the smallest subnormal and of the largest
// double.
func TestBoundaryExponentRange(t *testing.T) {
	for _, v := range []float64{5e-324, math.MaxFloat64} {
		u := math.Float64bits(v)
		f, e := u&(1<<52-1), -1074
		if be := int(u >> 52 & 0x7FF); be != 0 {
			f += 1 << 52
			e = be - 1075
		}
		pf, pe := f<<1+1, e-1
		for pf&(1<<53) == 0 {
			pf <<= 1
			pe--
		}
		pe -= 10
		if pe != minBoundaryExp && pe != maxBoundaryExp {
			t.Errorf("%v: boundary exponent %d outside [%d, %d] ends", v, pe, minBoundaryExp, maxBoundaryExp)
		}
	}
}
