package oip

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"reflect"
	"runtime"
	"strings"
	"testing"
	"unsafe"

	"github.com/groveml/grove/servables"
)

func unsafePointer(b []byte) unsafe.Pointer { return unsafe.Pointer(unsafe.SliceData(b)) }

// in wraps one input object in a request.
func in(input string) string { return `{"inputs":[` + input + `]}` }

func mustParse(t *testing.T, body string, headerLen int) *InferRequest {
	t.Helper()
	req, err := ParseInferRequest([]byte(body), headerLen)
	if err != nil {
		t.Fatalf("ParseInferRequest(%.200q): %v", body, err)
	}
	for i, tensor := range req.Inputs {
		if verr := tensor.Validate(); verr != nil {
			t.Fatalf("input %d does not validate: %v", i, verr)
		}
	}
	return req
}

func tensorOf[T float32 | float64 | int8 | int16 | int32 | int64 | uint8 | bool](name string, dt servables.DType, shape []int64, vals ...T) servables.Tensor {
	t, err := servables.NewTensor(name, dt, shape)
	if err != nil {
		panic(err)
	}
	var buf bytes.Buffer
	for _, v := range vals {
		binary.Write(&buf, binary.LittleEndian, v)
	}
	if buf.Len() != len(t.Data) {
		panic(fmt.Sprintf("%d values for %d bytes", len(vals), len(t.Data)))
	}
	copy(t.Data, buf.Bytes())
	return t
}

func sameTensor(a, b servables.Tensor) bool {
	return a.Name == b.Name && a.DType == b.DType && reflect.DeepEqual(append([]int64{}, a.Shape...), append([]int64{}, b.Shape...)) && bytes.Equal(a.Data, b.Data)
}

func TestParseInferRequestSpecExample(t *testing.T) {
	// The spec's example, with its datatypes changed to supported ones.
	body := `{
  "id" : "42",
  "inputs" : [
    {
      "name" : "input0",
      "shape" : [ 2, 2 ],
      "datatype" : "INT32",
      "data" : [ 1, 2, 3, 4 ]
    },
    {
      "name" : "input1",
      "shape" : [ 3 ],
      "datatype" : "FP32",
      "data" : [ 1.5, -2e-3, 7 ]
    }
  ],
  "outputs" : [
    {
      "name" : "output0"
    }
  ]
}`
	req := mustParse(t, body, 0)
	want := &InferRequest{
		ID: "42",
		Inputs: []servables.Tensor{
			tensorOf[int32]("input0", servables.Int32, []int64{2, 2}, 1, 2, 3, 4),
			tensorOf[float32]("input1", servables.Float32, []int64{3}, 1.5, -2e-3, 7),
		},
		Outputs: []RequestedOutput{{Name: "output0"}},
	}
	if req.ID != want.ID || !reflect.DeepEqual(req.Outputs, want.Outputs) || req.Parameters != nil || req.InputParameters != nil || req.BinaryDataOutput {
		t.Errorf("got %+v, want %+v", req, want)
	}
	for i := range want.Inputs {
		if !sameTensor(req.Inputs[i], want.Inputs[i]) {
			t.Errorf("input %d = %+v, want %+v", i, req.Inputs[i], want.Inputs[i])
		}
	}
}

func TestParseInferRequestData(t *testing.T) {
	for _, tc := range []struct {
		name  string
		input string
		want  servables.Tensor
	}{
		{"flat", `{"name":"x","shape":[2,3],"datatype":"FP32","data":[1,2,3,4,5,6]}`,
			tensorOf[float32]("x", servables.Float32, []int64{2, 3}, 1, 2, 3, 4, 5, 6)},
		{"nested", `{"name":"x","shape":[2,3],"datatype":"FP32","data":[[1,2,3],[4,5,6]]}`,
			tensorOf[float32]("x", servables.Float32, []int64{2, 3}, 1, 2, 3, 4, 5, 6)},
		{"nested rank 3", `{"name":"x","shape":[2,1,2],"datatype":"INT16","data":[ [ [1, 2] ] , [[3,4]] ]}`,
			tensorOf[int16]("x", servables.Int16, []int64{2, 1, 2}, 1, 2, 3, 4)},
		{"flat rank 3", `{"name":"x","shape":[2,1,2],"datatype":"INT16","data":[1,2,3,4]}`,
			tensorOf[int16]("x", servables.Int16, []int64{2, 1, 2}, 1, 2, 3, 4)},
		{"scalar", `{"name":"x","shape":[],"datatype":"FP64","data":[2.5]}`,
			tensorOf[float64]("x", servables.Float64, []int64{}, 2.5)},
		{"data first", `{"data":[[1,2],[3,4]],"datatype":"INT64","name":"x","shape":[2,2]}`,
			tensorOf[int64]("x", servables.Int64, []int64{2, 2}, 1, 2, 3, 4)},
		{"data between", `{"datatype":"INT8","data":[-128,127],"shape":[2],"name":"x"}`,
			tensorOf[int8]("x", servables.Int8, []int64{2}, -128, 127)},
		{"float forms", `{"name":"x","shape":[10],"datatype":"FP64","data":[0,-0,1e3,1E+3,1e-3,-2.5E-2,123456789012345678901234567890,0.1,1.7976931348623157e308,5e-324]}`,
			tensorOf[float64]("x", servables.Float64, []int64{10}, 0, math.Copysign(0, -1), 1000, 1000, 0.001, -0.025, 1.2345678901234568e29, 0.1, math.MaxFloat64, 5e-324)},
		{"fp32 rounding", `{"name":"x","shape":[5],"datatype":"FP32","data":[0.1,0.10000000149011612,3.4028234663852886e38,1e-45,16777217]}`,
			tensorOf[float32]("x", servables.Float32, []int64{5}, 0.1, 0.1, math.MaxFloat32, 1e-45, 16777216)},
		{"underflow to zero", `{"name":"x","shape":[2],"datatype":"FP32","data":[1e-50,-1e-400]}`,
			tensorOf[float32]("x", servables.Float32, []int64{2}, 0, float32(math.Copysign(0, -1)))},
		{"non-finite literals", `{"name":"x","shape":[6],"datatype":"FP64","data":[NaN,Infinity,-Infinity,Inf,-Inf,-NaN]}`,
			tensorOf[float64]("x", servables.Float64, []int64{6}, math.NaN(), math.Inf(1), math.Inf(-1), math.Inf(1), math.Inf(-1), math.NaN())},
		{"int extremes", `{"name":"x","shape":[2],"datatype":"INT64","data":[-9223372036854775808,9223372036854775807]}`,
			tensorOf[int64]("x", servables.Int64, []int64{2}, math.MinInt64, math.MaxInt64)},
		{"int32 extremes", `{"name":"x","shape":[3],"datatype":"INT32","data":[-2147483648,2147483647,-0]}`,
			tensorOf[int32]("x", servables.Int32, []int64{3}, math.MinInt32, math.MaxInt32, 0)},
		{"int16 extremes", `{"name":"x","shape":[2],"datatype":"INT16","data":[-32768,32767]}`,
			tensorOf[int16]("x", servables.Int16, []int64{2}, math.MinInt16, math.MaxInt16)},
		{"escapes", `{"n\u0061me":"a\"b\u00e9\ud83d\ude00","d\u0061tatype":"FP\u00332","shape":[1],"data":[1]}`,
			tensorOf[float32]("a\"bé😀", servables.Float32, []int64{1}, 1)},
		{"whitespace", " {\t\"name\" :\n\"x\" , \"shape\":[ 1 ,2 ] ,\"datatype\":\"INT8\",\"data\":[ [ 1 , 2 ] ] } ",
			tensorOf[int8]("x", servables.Int8, []int64{1, 2}, 1, 2)},
		{"unknown members", `{"name":"x","foo":{"a":[1,{"b":null}]},"shape":[1],"datatype":"INT8","data":[5],"contents":{"int_contents":[1]}}`,
			tensorOf[int8]("x", servables.Int8, []int64{1}, 5)},
		{"null parameters", `{"name":"x","shape":[1],"datatype":"INT8","data":[5],"parameters":null}`,
			tensorOf[int8]("x", servables.Int8, []int64{1}, 5)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			req := mustParse(t, in(tc.input), 0)
			if len(req.Inputs) != 1 {
				t.Fatalf("%d inputs", len(req.Inputs))
			}
			got := req.Inputs[0]
			if got.Name != tc.want.Name || got.DType != tc.want.DType || fmt.Sprint(got.Shape) != fmt.Sprint(tc.want.Shape) {
				t.Fatalf("got %s %v %v, want %s %v %v", got.Name, got.DType, got.Shape, tc.want.Name, tc.want.DType, tc.want.Shape)
			}
			if !bytes.Equal(got.Data, tc.want.Data) {
				// NaN payloads may differ; compare values then.
				for i := 0; i < got.Len(); i++ {
					a, b := got.Float64At(i), tc.want.Float64At(i)
					if !(a == b && math.Signbit(a) == math.Signbit(b) || math.IsNaN(a) && math.IsNaN(b)) {
						t.Fatalf("element %d = %v, want %v", i, a, b)
					}
				}
			}
			if uintptr(unsafePointer(got.Data))%8 != 0 {
				t.Errorf("data not 8-byte aligned")
			}
		})
	}
}

func TestParseInferRequestErrors(t *testing.T) {
	long := `{"name":"x","shape":[1],"datatype":"FP32","data":[1]}`
	for _, tc := range []struct {
		name, body string
		want       string // a part of the message
	}{
		// The document.
		{"empty", ``, "the request body is empty"},
		{"blank", " \n\t", "the request body is empty"},
		{"array root", `[1]`, "the request is an array, not a JSON object"},
		{"string root", `"x"`, "the request is a string, not a JSON object"},
		{"bad root", `x`, "malformed JSON at byte 0: expected a JSON value, found 'x'"},
		{"truncated", `{"inputs":[`, "malformed JSON at byte 11: expected a JSON value, found the end of the JSON"},
		{"trailing comma", `{"x":[1,],"inputs":[]}`, "malformed JSON at byte 8: expected a JSON value, found ']'"},
		{"trailing member comma", `{"inputs":[],}`, "expected a member name in quotes, found '}'"},
		{"trailing text", `{"inputs":[` + long + `]} x`, "malformed JSON at byte 67: expected the end of the JSON after the request object, found 'x'"},
		{"two documents", `{"inputs":[` + long + `]}{}`, "expected the end of the JSON after the request object, found '{'"},
		{"missing colon", `{"inputs" []}`, "expected ':' after a member name"},
		{"single quotes", `{'inputs':[]}`, "expected a member name in quotes, found '\\''"},
		{"comment", `{"inputs":[] /* x */}`, "expected ',' or '}' after an object member, found '/'"},
		{"leading zero", in(`{"name":"x","shape":[1],"datatype":"FP32","data":[01]}`), "expected ',' or ']' after an array element, found '1'"},
		{"bare fraction", in(`{"name":"x","shape":[1],"datatype":"FP32","data":[.5]}`), "expected a JSON value, found '.'"},
		{"plus sign", in(`{"name":"x","shape":[1],"datatype":"FP32","data":[+1]}`), "expected a JSON value, found '+'"},
		{"no fraction digits", in(`{"name":"x","shape":[1],"datatype":"FP32","data":[1.]}`), "expected a digit after the decimal point"},
		{"no exponent digits", in(`{"name":"x","shape":[1],"datatype":"FP32","data":[1e+]}`), "expected a digit in the exponent"},
		{"lone minus", in(`{"name":"x","shape":[1],"datatype":"FP32","data":[-]}`), "expected a digit, found ']'"},
		{"hex", in(`{"name":"x","shape":[1],"datatype":"FP32","data":[0x10]}`), "expected ',' or ']' after an array element, found 'x'"},
		{"nan in int data", in(`{"name":"x","shape":[1],"datatype":"INT32","data":[NaN]}`), "expected a JSON value, found 'N'"},
		{"nan in shape", in(`{"name":"x","shape":[NaN],"datatype":"FP32","data":[1]}`), "expected a JSON value, found 'N'"},
		{"nan misspelt", in(`{"name":"x","shape":[1],"datatype":"FP32","data":[Nan]}`), "expected a JSON value, found 'N'"},
		{"invalid utf-8", "{\"inputs\":[],\"x\":\"\xff\"}", "invalid UTF-8 in string"},
		{"control char", "{\"inputs\":[],\"x\":\"a\nb\"}", "control character in string"},
		{"bad escape", `{"inputs":[],"x":"\x"}`, "invalid escape in string"},
		{"bad unicode escape", `{"inputs":[],"x":"\u12g4"}`, "expected a hex digit in a \\u escape, found 'g'"},
		{"lone high surrogate", `{"inputs":[],"x":"\ud800"}`, "lone surrogate"},
		{"lone low surrogate", `{"inputs":[],"x":"\udc00"}`, "lone surrogate"},
		{"unterminated string", `{"inputs":[],"x":"abc`, "unterminated string"},
		{"nul byte", "{\"inputs\":[]}\x00", "expected the end of the JSON after the request object, found byte 0x00"},

		// Request members.
		{"no inputs", `{"id":"1"}`, "the request has no inputs"},
		{"inputs null", `{"inputs":null}`, "the request's inputs is null, not an array"},
		{"inputs object", `{"inputs":{}}`, "the request's inputs is an object, not an array"},
		{"inputs empty", `{"inputs":[]}`, "the request's inputs array is empty"},
		{"inputs twice", `{"inputs":[` + long + `],"inputs":[]}`, `the request has member "inputs" twice`},
		{"id number", `{"id":42,"inputs":[` + long + `]}`, "the request's id is a number, not a string"},
		{"id twice", `{"id":"a","id":"b","inputs":[` + long + `]}`, `the request has member "id" twice`},
		{"parameters array", `{"parameters":[],"inputs":[` + long + `]}`, "the request's parameters is an array, not an object"},
		{"parameter null", `{"parameters":{"a":null},"inputs":[` + long + `]}`, `request parameters: parameter "a" is null; parameter values must be strings, numbers or booleans`},
		{"parameter object", `{"parameters":{"a":{}},"inputs":[` + long + `]}`, `parameter "a" is an object`},
		{"parameter twice", `{"parameters":{"a":1,"b":2,"a":3},"inputs":[` + long + `]}`, `request parameters: parameter "a" appears twice`},
		{"parameter too big", `{"parameters":{"a":1e400},"inputs":[` + long + `]}`, `parameter "a" = 1e400 is out of the range of a float64`},
		{"binary_data_output string", `{"parameters":{"binary_data_output":"true"},"inputs":[` + long + `]}`, "request parameter binary_data_output is a string, not a boolean"},
		{"outputs object", `{"inputs":[` + long + `],"outputs":{}}`, "the request's outputs is an object, not an array"},

		// Inputs.
		{"input not object", in(`[]`), "inputs[0] is an array, not an object"},
		{"input no name", in(`{"shape":[1],"datatype":"FP32","data":[1]}`), "inputs[0] has no name"},
		{"input null name", in(`{"name":null,"shape":[1],"datatype":"FP32","data":[1]}`), "inputs[0] has no name"},
		{"input name number", in(`{"name":1,"shape":[1],"datatype":"FP32","data":[1]}`), "inputs[0] has a name that is a number, not a string"},
		{"input empty name", in(long + `,{"name":"","shape":[1],"datatype":"FP32","data":[1]}`), "inputs[1] has an empty name"},
		{"input names twice", in(long + `,` + long), `input "x" appears twice in the request (inputs[0] and inputs[1])`},
		{"input escaped name twice", in(long + `,{"name":"\u0078","shape":[1],"datatype":"FP32","data":[1]}`), `input "x" appears twice`},
		{"input member twice", in(`{"name":"x","shape":[1],"shape":[1],"datatype":"FP32","data":[1]}`), `input "x" has member "shape" twice`},
		{"no datatype", in(`{"name":"x","shape":[1],"data":[1]}`), `input "x" has no datatype`},
		{"datatype number", in(`{"name":"x","shape":[1],"datatype":32,"data":[1]}`), `input "x" has a datatype that is a number, not a string`},
		{"unknown datatype", in(`{"name":"x","shape":[1],"datatype":"FLOAT","data":[1]}`), `input "x": unknown datatype "FLOAT"; supported datatypes: FP32, FP64, INT8, INT16, INT32, INT64`},
		{"lower-case datatype", in(`{"name":"x","shape":[1],"datatype":"fp32","data":[1]}`), `unknown datatype "fp32"`},
		{"no shape", in(`{"name":"x","datatype":"FP32","data":[1]}`), `input "x" has no shape`},
		{"shape object", in(`{"name":"x","shape":{},"datatype":"FP32","data":[1]}`), `input "x" has a shape that is an object, not an array`},
		{"shape string", in(`{"name":"x","shape":["1"],"datatype":"FP32","data":[1]}`), `input "x": shape[0] is a string, not an integer`},
		{"shape fraction", in(`{"name":"x","shape":[1,1.5],"datatype":"FP32","data":[1]}`), `input "x": shape[1] = 1.5 is not an integer`},
		{"shape exponent", in(`{"name":"x","shape":[1e1],"datatype":"FP32","data":[1]}`), `shape[0] = 1e1 is not an integer`},
		{"shape negative", in(`{"name":"x","shape":[-1,2],"datatype":"FP32","data":[1]}`), `input "x": shape[0] = -1 is negative; dimensions must be at least 1`},
		{"shape zero", in(`{"name":"x","shape":[2,0],"datatype":"FP32","data":[]}`), `input "x": shape[1] is 0; dimensions must be at least 1 (Grove has no empty tensors)`},
		{"shape too big", in(`{"name":"x","shape":[65536,65536],"datatype":"FP32","data":[1]}`), `input "x": shape has more than 2147483648 elements`},
		{"shape beyond uint64", in(`{"name":"x","shape":[123456789012345678901234],"datatype":"FP32","data":[1]}`), `shape has more than 2147483648 elements`},
		{"no data", in(`{"name":"x","shape":[1],"datatype":"FP32"}`), `input "x" has no data (and no binary_data_size parameter)`},
		{"null data", in(`{"name":"x","shape":[1],"datatype":"FP32","data":null}`), `input "x" has no data`},
		{"data string", in(`{"name":"x","shape":[1],"datatype":"FP32","data":"1"}`), `input "x" has data that is a string, not an array`},
		{"data and binary", in(`{"name":"x","shape":[1],"datatype":"FP32","data":[1],"parameters":{"binary_data_size":4}}`), `input "x" has both data and a binary_data_size parameter; give one of them`},
		{"shared memory", in(`{"name":"x","shape":[1],"datatype":"FP32","parameters":{"shared_memory_region":"r"}}`), `input "x": parameter shared_memory_region is not supported`},
		{"input parameters string", in(`{"name":"x","shape":[1],"datatype":"FP32","data":[1],"parameters":"a"}`), `input "x" has parameters that are a string, not an object`},
		{"input parameter twice", in(`{"name":"x","shape":[1],"datatype":"FP32","data":[1],"parameters":{"a":1,"a":1}}`), `input "x" parameters: parameter "a" appears twice`},

		// Data.
		{"too few", in(`{"name":"x","shape":[2,2],"datatype":"FP32","data":[1,2,3]}`), `input "x": data has 3 elements, but shape [2,2] needs 4`},
		{"too many", in(`{"name":"x","shape":[2,2],"datatype":"FP32","data":[1,2,3,4,5]}`), `input "x": data has 5 elements, but shape [2,2] needs 4`},
		{"empty data", in(`{"name":"x","shape":[1],"datatype":"FP32","data":[]}`), `input "x": data has 0 elements, but shape [1] needs 1`},
		{"too few, data first", in(`{"name":"x","data":[1,2,3],"shape":[2,2],"datatype":"FP32"}`), `input "x": data has 3 elements, but shape [2,2] needs 4`},
		{"huge shape, small data", in(`{"name":"x","shape":[1073741824,2],"datatype":"FP64","data":[1,2,3]}`), `data has 3 elements, but shape [1073741824,2] needs 2147483648`},
		{"ragged", in(`{"name":"x","shape":[2,2],"datatype":"FP32","data":[[1,2],[3]]}`), `input "x": data[1] has 1 element, but dimension 1 of shape [2,2] is 2`},
		{"ragged long", in(`{"name":"x","shape":[2,2],"datatype":"FP32","data":[[1,2,3],[4]]}`), `input "x": data[0] has more than 2 elements, the size of dimension 1 of shape [2,2]`},
		{"too many rows", in(`{"name":"x","shape":[2,2],"datatype":"FP32","data":[[1,2],[3,4],[5,6]]}`), `input "x": data has more than 2 elements, the size of dimension 0 of shape [2,2]`},
		{"too few rows", in(`{"name":"x","shape":[2,2],"datatype":"FP32","data":[[1,2]]}`), `input "x": data has 1 element, but dimension 0 of shape [2,2] is 2`},
		{"empty row", in(`{"name":"x","shape":[2,2],"datatype":"FP32","data":[[],[1,2]]}`), `input "x": data[0] is empty, but dimension 1 of shape [2,2] is 2`},
		{"partly nested", in(`{"name":"x","shape":[2,2,2],"datatype":"FP32","data":[[1,2,3,4],[5,6,7,8]]}`), `input "x": data[0][0] is a number, not an array: nested data needs one array level per dimension of shape [2,2,2]`},
		{"nested too deep", in(`{"name":"x","shape":[2],"datatype":"FP32","data":[[1],[2]]}`), `input "x": data[0] is an array, but shape [2] has fewer than 2 dimensions: data is nested too deep`},
		{"nested deeper than shape", in(`{"name":"x","shape":[1,2],"datatype":"FP32","data":[[[1],[2]]]}`), `input "x": data[0][0] is an array: data is nested deeper than shape [1,2]`},
		{"flat then nested", in(`{"name":"x","shape":[2,1],"datatype":"FP32","data":[1,[2]]}`), `input "x": data[1] is an array but data[0] is not`},
		{"nested then flat", in(`{"name":"x","shape":[2,1],"datatype":"FP32","data":[[1],2]}`), `input "x": data[1] is a number, not an array`},
		{"string element", in(`{"name":"x","shape":[2],"datatype":"FP32","data":[1,"2"]}`), `input "x": data[1] is a string; FP32 data must be JSON numbers`},
		{"bool element", in(`{"name":"x","shape":[2],"datatype":"INT32","data":[true,1]}`), `input "x": data[0] is a boolean; INT32 data must be integer numbers`},
		{"null element", in(`{"name":"x","shape":[2],"datatype":"FP64","data":[1,null]}`), `input "x": data[1] is null; FP64 data must be JSON numbers`},
		{"object element", in(`{"name":"x","shape":[1,2],"datatype":"FP64","data":[[1,{}]]}`), `input "x": data[0][1] is an object; FP64 data must be JSON numbers`},
		{"bad literal after problem", in(`{"name":"x","shape":[2],"datatype":"FP32","data":["a",tru]}`), `malformed JSON`},
		{"int8 high", in(`{"name":"x","shape":[3],"datatype":"INT8","data":[1,2,128]}`), `input "x": data[2] = 128 is out of range for INT8 (-128 to 127)`},
		{"int8 low", in(`{"name":"x","shape":[1],"datatype":"INT8","data":[-129]}`), `data[0] = -129 is out of range for INT8 (-128 to 127)`},
		{"int16 high", in(`{"name":"x","shape":[1],"datatype":"INT16","data":[32768]}`), `data[0] = 32768 is out of range for INT16 (-32768 to 32767)`},
		{"int32 high", in(`{"name":"x","shape":[1],"datatype":"INT32","data":[2147483648]}`), `data[0] = 2147483648 is out of range for INT32 (-2147483648 to 2147483647)`},
		{"int64 high", in(`{"name":"x","shape":[1],"datatype":"INT64","data":[9223372036854775808]}`), `data[0] = 9223372036854775808 is out of range for INT64 (-9223372036854775808 to 9223372036854775807)`},
		{"int64 low", in(`{"name":"x","shape":[1],"datatype":"INT64","data":[-9223372036854775809]}`), `data[0] = -9223372036854775809 is out of range for INT64`},
		{"int64 huge", in(`{"name":"x","shape":[1],"datatype":"INT64","data":[123456789012345678901234567890]}`), `data[0] = 123456789012345678901234567890 is out of range for INT64`},
		{"int fraction", in(`{"name":"x","shape":[1],"datatype":"INT32","data":[1.0]}`), `data[0] = 1.0 is not an integer; INT32 data must be integer literals (no fraction, no exponent)`},
		{"int exponent", in(`{"name":"x","shape":[1],"datatype":"INT64","data":[1e2]}`), `data[0] = 1e2 is not an integer`},
		{"fp32 overflow", in(`{"name":"x","shape":[2],"datatype":"FP32","data":[1,-1e39]}`), `input "x": data[1] = -1e39 is out of range for FP32`},
		{"fp32 just over", in(`{"name":"x","shape":[1],"datatype":"FP32","data":[3.4028236e38]}`), `data[0] = 3.4028236e38 is out of range for FP32`},
		{"fp64 overflow", in(`{"name":"x","shape":[1],"datatype":"FP64","data":[1e309]}`), `data[0] = 1e309 is out of range for FP64`},
		{"nested element problem", in(`{"name":"x","shape":[2,2],"datatype":"INT8","data":[[1,2],[3,999]]}`), `input "x": data[1][1] = 999 is out of range for INT8`},
		{"problem named when name comes last", in(`{"shape":[1],"datatype":"INT8","data":[999],"name":"late"}`), `input "late": data[0] = 999 is out of range for INT8`},

		// Outputs.
		{"output not object", `{"inputs":[` + long + `],"outputs":["y"]}`, "outputs[0] is a string, not an object"},
		{"output no name", `{"inputs":[` + long + `],"outputs":[{}]}`, "outputs[0] has no name"},
		{"output empty name", `{"inputs":[` + long + `],"outputs":[{"name":""}]}`, "outputs[0] has an empty name"},
		{"output name number", `{"inputs":[` + long + `],"outputs":[{"name":0}]}`, "outputs[0] has a name that is a number, not a string"},
		{"output twice", `{"inputs":[` + long + `],"outputs":[{"name":"y"},{"name":"y"}]}`, `output "y" is requested twice (outputs[0] and outputs[1])`},
		{"output member twice", `{"inputs":[` + long + `],"outputs":[{"name":"y","name":"z"}]}`, `requested output "y" has member "name" twice`},
		{"output parameters array", `{"inputs":[` + long + `],"outputs":[{"name":"y","parameters":[]}]}`, `requested output "y" has parameters that are an array, not an object`},
		{"binary_data number", `{"inputs":[` + long + `],"outputs":[{"name":"y","parameters":{"binary_data":1}}]}`, `requested output "y": parameter binary_data is an integer, not a boolean`},
		{"classification", `{"inputs":[` + long + `],"outputs":[{"name":"y","parameters":{"classification":3}}]}`, `requested output "y": parameter classification is not supported`},
		{"output shared memory", `{"inputs":[` + long + `],"outputs":[{"name":"y","parameters":{"shared_memory_region":"r"}}]}`, `requested output "y": parameter shared_memory_region is not supported`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			req, err := ParseInferRequest([]byte(tc.body), 0)
			checkErr(t, req, err, 400, tc.want)
		})
	}
}

func checkErr(t *testing.T, req *InferRequest, err error, status int, want string) {
	t.Helper()
	if err == nil {
		t.Fatalf("no error (request %+v), want %q", req, want)
	}
	var e *Error
	if !errors.As(err, &e) {
		t.Fatalf("error %T %v is not an *Error", err, err)
	}
	if req != nil {
		t.Errorf("request %+v returned with error", req)
	}
	if e.Status != status {
		t.Errorf("status %d, want %d", e.Status, status)
	}
	if !strings.Contains(e.Msg, want) {
		t.Errorf("error %q\n does not contain %q", e.Msg, want)
	}
}

func TestParseInferRequestParameters(t *testing.T) {
	body := `{"id":"a\u00e9","parameters":{"s":"v","t":true,"f":false,"i":-42,"big":18446744073709551615,"huger":18446744073709551616,"x":1.5,"e":1e2,"min":-9223372036854775808,"priority":1,"binary_data_output":true},
"inputs":[{"name":"a","shape":[1],"datatype":"INT8","data":[1]},{"name":"b","shape":[1],"datatype":"INT8","data":[1],"parameters":{"k":"v"}},{"name":"c","shape":[1],"datatype":"INT8","data":[1],"parameters":{}}],
"outputs":[{"name":"o1"},{"name":"o2","parameters":{"binary_data":false}},{"name":"o3","parameters":{"binary_data":true,"z":0}}]}`
	req := mustParse(t, body, 0)
	wantParams := Parameters{
		StringParam("s", "v"), BoolParam("t", true), BoolParam("f", false), IntParam("i", -42),
		{Name: "big", Kind: ParamUint, Uint: math.MaxUint64}, FloatParam("huger", 18446744073709551616),
		FloatParam("x", 1.5), FloatParam("e", 100), IntParam("min", math.MinInt64), IntParam("priority", 1),
		BoolParam("binary_data_output", true),
	}
	if req.ID != "aé" {
		t.Errorf("ID %q", req.ID)
	}
	if !reflect.DeepEqual(req.Parameters, wantParams) {
		t.Errorf("parameters\n got %+v\nwant %+v", req.Parameters, wantParams)
	}
	if !req.BinaryDataOutput {
		t.Errorf("BinaryDataOutput false")
	}
	wantIn := []Parameters{nil, {StringParam("k", "v")}, nil}
	if !reflect.DeepEqual(req.InputParameters, wantIn) {
		t.Errorf("input parameters %+v, want %+v", req.InputParameters, wantIn)
	}
	wantOut := []RequestedOutput{
		{Name: "o1", Binary: true},
		{Name: "o2", Parameters: Parameters{BoolParam("binary_data", false)}, Binary: false},
		{Name: "o3", Parameters: Parameters{BoolParam("binary_data", true), IntParam("z", 0)}, Binary: true},
	}
	if !reflect.DeepEqual(req.Outputs, wantOut) {
		t.Errorf("outputs\n got %+v\nwant %+v", req.Outputs, wantOut)
	}
	if p, ok := req.Parameters.Get("priority"); !ok || p.Kind != ParamInt || p.Int != 1 {
		t.Errorf("Get(priority) = %+v, %v", p, ok)
	}
	if v, ok := wantParams[7].Int64(); !ok || v != 100 {
		t.Errorf("Int64 of 1e2 = %v, %v", v, ok)
	}
	if _, ok := req.Parameters.Get("nope"); ok {
		t.Errorf("Get(nope) found")
	}
}

func TestParseInferRequestOptionalMembers(t *testing.T) {
	long := `{"name":"x","shape":[1],"datatype":"FP32","data":[1]}`
	for _, tc := range []struct {
		name, body string
	}{
		{"nulls", `{"id":null,"parameters":null,"outputs":null,"inputs":[` + long + `]}`},
		{"empty outputs", `{"inputs":[` + long + `],"outputs":[]}`},
		{"empty parameters", `{"parameters":{},"inputs":[` + long + `]}`},
		{"extension members", `{"model_name":"m","model_version":"1","inputs":[` + long + `],"foo":[{"bar":[1,2,{"baz":null}]}]}`},
		{"output extension members", `{"inputs":[` + long + `],"outputs":[{"name":"y","foo":1,"parameters":null}]}`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			req := mustParse(t, tc.body, 0)
			if req.ID != "" || req.Parameters != nil || req.BinaryDataOutput || req.InputParameters != nil || len(req.Inputs) != 1 {
				t.Errorf("got %+v", req)
			}
			if tc.name == "output extension members" {
				if want := []RequestedOutput{{Name: "y"}}; !reflect.DeepEqual(req.Outputs, want) {
					t.Errorf("outputs %+v, want %+v", req.Outputs, want)
				}
			} else if req.Outputs != nil {
				t.Errorf("outputs %+v, want nil", req.Outputs)
			}
		})
	}
}

func TestParseInferRequestManyInputs(t *testing.T) {
	// Enough inputs and parameters for the duplicate checks' maps.
	var b strings.Builder
	b.WriteString(`{"parameters":{`)
	for i := 0; i < 100; i++ {
		if i > 0 {
			b.WriteByte(',')
		}
		fmt.Fprintf(&b, `"p%d":%d`, i, i)
	}
	b.WriteString(`},"inputs":[`)
	for i := 0; i < 100; i++ {
		if i > 0 {
			b.WriteByte(',')
		}
		fmt.Fprintf(&b, `{"name":"in%d","shape":[1],"datatype":"INT32","data":[%d]}`, i, i)
	}
	ok := b.String() + `]}`
	req := mustParse(t, ok, 0)
	if len(req.Inputs) != 100 || len(req.Parameters) != 100 {
		t.Fatalf("%d inputs, %d parameters", len(req.Inputs), len(req.Parameters))
	}
	for i, in := range req.Inputs {
		if in.Name != fmt.Sprintf("in%d", i) || in.Int32s()[0] != int32(i) {
			t.Fatalf("input %d = %+v", i, in)
		}
	}
	_, err := ParseInferRequest([]byte(b.String()+`,{"name":"in42","shape":[1],"datatype":"INT32","data":[1]}]}`), 0)
	checkErr(t, nil, err, 400, `input "in42" appears twice in the request (inputs[42] and inputs[100])`)
	dupParam := strings.Replace(b.String(), `"p99":99`, `"p99":99,"p63":1`, 1) + `]}`
	_, err = ParseInferRequest([]byte(dupParam), 0)
	checkErr(t, nil, err, 400, `request parameters: parameter "p63" appears twice`)
	// The pooled parser forgets the names of the previous request.
	mustParse(t, ok, 0)

	var outs strings.Builder
	for i := 0; i < 100; i++ {
		fmt.Fprintf(&outs, `,{"name":"out%d"}`, i)
	}
	withOutputs := strings.TrimSuffix(ok, "}") + `,"outputs":[` + outs.String()[1:]
	req = mustParse(t, withOutputs+`]}`, 0)
	if len(req.Outputs) != 100 || req.Outputs[99].Name != "out99" {
		t.Fatalf("outputs %+v", req.Outputs)
	}
	_, err = ParseInferRequest([]byte(withOutputs+`,{"name":"out50"}]}`), 0)
	checkErr(t, nil, err, 400, `output "out50" is requested twice (outputs[50] and outputs[100])`)
	mustParse(t, withOutputs+`]}`, 0)
}

func TestConcurrentParse(t *testing.T) {
	bodies := [][]byte{benchJSON(3, false), benchJSON(2, true), benchIDs(5)}
	want := make([]*InferRequest, len(bodies))
	for i, b := range bodies {
		want[i] = mustParse(t, string(b), 0)
	}
	done := make(chan error)
	for g := 0; g < 8; g++ {
		go func(g int) {
			for k := 0; k < 200; k++ {
				i := (g + k) % len(bodies)
				got, err := ParseInferRequest(bodies[i], 0)
				if err == nil && !sameRequest(got, want[i]) {
					err = fmt.Errorf("body %d parsed differently", i)
				}
				if err != nil {
					done <- err
					return
				}
			}
			done <- nil
		}(g)
	}
	for g := 0; g < 8; g++ {
		if err := <-done; err != nil {
			t.Error(err)
		}
	}
}

// binaryBody assembles a binary-extension request body.
func binaryBody(header string, blobs ...[]byte) ([]byte, int) {
	body := []byte(header)
	for _, b := range blobs {
		body = append(body, b...)
	}
	return body, len(header)
}

func le[T float32 | float64 | int8 | int16 | int32 | int64 | uint8](vals ...T) []byte {
	var buf bytes.Buffer
	for _, v := range vals {
		binary.Write(&buf, binary.LittleEndian, v)
	}
	return buf.Bytes()
}

func TestParseInferRequestBinary(t *testing.T) {
	header := `{"inputs":[` +
		`{"name":"a","shape":[2,2],"datatype":"FP32","parameters":{"binary_data_size":16}},` +
		`{"name":"j","shape":[2],"datatype":"INT8","data":[1,2]},` +
		`{"name":"b","shape":[3],"datatype":"INT64","parameters":{"binary_data_size":24}},` +
		`{"name":"c","shape":[1],"datatype":"INT16","parameters":{"binary_data_size":2}}],` +
		`"outputs":[{"name":"o","parameters":{"binary_data":true}}]}`
	body, h := binaryBody(header, le[float32](1, 2.5, -3, float32(math.Inf(1))), le[int64](math.MinInt64, 0, math.MaxInt64), le[int16](-2))
	req := mustParse(t, string(body), h)
	want := []servables.Tensor{
		tensorOf[float32]("a", servables.Float32, []int64{2, 2}, 1, 2.5, -3, float32(math.Inf(1))),
		tensorOf[int8]("j", servables.Int8, []int64{2}, 1, 2),
		tensorOf[int64]("b", servables.Int64, []int64{3}, math.MinInt64, 0, math.MaxInt64),
		tensorOf[int16]("c", servables.Int16, []int64{1}, -2),
	}
	for i := range want {
		if !sameTensor(req.Inputs[i], want[i]) {
			t.Errorf("input %d = %+v, want %+v", i, req.Inputs[i], want[i])
		}
		if uintptr(unsafePointer(req.Inputs[i].Data))%8 != 0 {
			t.Errorf("input %d not aligned", i)
		}
	}
	// The tensors do not alias the body.
	for i := range body {
		body[i] = 0xAA
	}
	if !sameTensor(req.Inputs[0], want[0]) {
		t.Errorf("input 0 aliases the body")
	}
	// A binary header with no binary input and nothing after it is fine.
	plain := in(`{"name":"x","shape":[1],"datatype":"FP32","data":[1]}`)
	mustParse(t, plain, len(plain))
}

func TestParseInferRequestBinaryErrors(t *testing.T) {
	one := func(size string) string {
		return in(`{"name":"x","shape":[2],"datatype":"FP32","parameters":{"binary_data_size":` + size + `}}`)
	}
	eight := make([]byte, 8)
	twoBin := `{"inputs":[{"name":"a","shape":[1],"datatype":"INT8","parameters":{"binary_data_size":1}},{"name":"b","shape":[2],"datatype":"INT8","parameters":{"binary_data_size":2}}]}`
	for _, tc := range []struct {
		name      string
		body      []byte
		headerLen int
		want      string
	}{
		{"negative header length", []byte(one("8")), -1, "Inference-Header-Content-Length is -1, but it must be between 0 (no binary data) and the body length (91 bytes)"},
		{"header length past body", []byte(one("8")), 96, "Inference-Header-Content-Length is 96, but it must be between 0"},
		{"no binary body", []byte(one("8")), 0, `input "x" has a binary_data_size parameter, but the request has no binary data: send the length of the JSON in the Inference-Header-Content-Length header`},
		{"header cuts JSON", append([]byte(one("8")), eight...), 50, "malformed JSON at byte 50"},
		{"size too small", append([]byte(one("4")), eight...), len(one("4")), `input "x": binary_data_size is 4 bytes, but shape [2] of FP32 needs 8`},
		{"size too big", append([]byte(one("12")), eight...), len(one("12")), `input "x": binary_data_size is 12 bytes, but shape [2] of FP32 needs 8`},
		{"size zero", append([]byte(one("0")), eight...), len(one("0")), `binary_data_size is 0 bytes, but shape [2] of FP32 needs 8`},
		{"size huge", append([]byte(one("18446744073709551615")), eight...), len(one("18446744073709551615")), `binary_data_size is 18446744073709551615 bytes, but shape [2] of FP32 needs 8`},
		{"size negative", append([]byte(one("-8")), eight...), len(one("-8")), `input "x": parameter binary_data_size is -8; it must be a byte count`},
		{"size string", append([]byte(one(`"8"`)), eight...), len(one(`"8"`)), `input "x": parameter binary_data_size is a string, not an integer byte count`},
		{"size float", append([]byte(one("8.0")), eight...), len(one("8.0")), `parameter binary_data_size is a number with a fraction or an exponent, not an integer byte count`},
		{"short tail", append([]byte(one("8")), 1, 2, 3), len(one("8")), `input "x": binary_data_size is 8 bytes, but only 3 bytes of binary data are left after the JSON`},
		{"long tail", append([]byte(one("8")), make([]byte, 9)...), len(one("8")), `the request has 1 byte of binary data after the JSON that no input claims (the inputs' binary_data_size parameters add up to 8)`},
		{"tail without binary inputs", append([]byte(in(`{"name":"x","shape":[1],"datatype":"FP32","data":[1]}`)), 1), len(in(`{"name":"x","shape":[1],"datatype":"FP32","data":[1]}`)), `the request has 1 byte of binary data after the JSON that no input claims`},
		{"binary tail as JSON", append([]byte(in(`{"name":"x","shape":[1],"datatype":"FP32","data":[1]}`)), eight...), 0, "malformed JSON"},
		{"second input short", append([]byte(twoBin), 1, 2), len(twoBin), `input "b": binary_data_size is 2 bytes, but only 1 byte of binary data is left after the JSON and the previous binary inputs`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			req, err := ParseInferRequest(tc.body, tc.headerLen)
			checkErr(t, req, err, 400, tc.want)
		})
	}
}

func TestDatatypeTable(t *testing.T) {
	for _, tc := range []struct {
		name string
		dt   servables.DType
	}{{"FP32", servables.Float32}, {"FP64", servables.Float64}, {"INT8", servables.Int8}, {"INT16", servables.Int16}, {"INT32", servables.Int32}, {"INT64", servables.Int64},
		{"BOOL", servables.Bool}, {"UINT8", servables.Uint8}, {"FP16", servables.Float16}, {"BF16", servables.BFloat16}, {"BYTES", servables.Bytes}} {
		dt, err := DTypeOf(tc.name)
		if err != nil || dt != tc.dt {
			t.Errorf("DTypeOf(%s) = %v, %v", tc.name, dt, err)
		}
		if n, ok := Datatype(tc.dt); !ok || n != tc.name {
			t.Errorf("Datatype(%v) = %q, %v", tc.dt, n, ok)
		}
	}
	for _, name := range []string{"UINT16", "UINT32", "UINT64"} {
		_, err := DTypeOf(name)
		checkErr(t, nil, err, 400, `datatype "`+name+`" is not supported by Grove; supported datatypes: FP32, FP64, INT8, INT16, INT32, INT64, BOOL, UINT8, FP16, BF16, BYTES`)
		_, err = ParseInferRequest([]byte(in(`{"name":"x","shape":[1],"datatype":"`+name+`","data":[1]}`)), 0)
		checkErr(t, nil, err, 400, `input "x": datatype "`+name+`" is not supported by Grove; supported datatypes: FP32, FP64, INT8, INT16, INT32, INT64, BOOL, UINT8, FP16, BF16, BYTES`)
	}
	if _, ok := Datatype(servables.Unknown); ok {
		t.Errorf("Datatype(Unknown) ok")
	}
	if got := SupportedDatatypes(); !reflect.DeepEqual(got, []string{"FP32", "FP64", "INT8", "INT16", "INT32", "INT64", "BOOL", "UINT8", "FP16", "BF16", "BYTES"}) {
		t.Errorf("SupportedDatatypes() = %v", got)
	}
}

// TestFutureKinds exercises the decoder paths for BOOL and UINT8 and for
// the unsigned kinds no Grove DType uses yet (UINT16, UINT64), with
// stand-in table entries of the right sizes.
func TestFutureKinds(t *testing.T) {
	boolType := *lookupDatatype([]byte("BOOL"))
	u8 := *lookupDatatype([]byte("UINT8"))
	u16 := datatype{"UINT16", servables.Int16, kindUnsigned}
	u64 := datatype{"UINT64", servables.Int64, kindUnsigned}
	for _, tc := range []struct {
		d       *datatype
		data    string
		shape   []int64
		want    []byte
		problem string
	}{
		{&boolType, `[true,false,true]`, []int64{3}, []byte{1, 0, 1}, ""},
		{&boolType, `[[true],[false]]`, []int64{2, 1}, []byte{1, 0}, ""},
		{&boolType, `[1]`, []int64{1}, nil, "data[0] is a number; BOOL data must be true or false"},
		{&boolType, `["true"]`, []int64{1}, nil, "data[0] is a string; BOOL data must be true or false"},
		{&u8, `[0,255,-0]`, []int64{3}, []byte{0, 255, 0}, ""},
		{&u8, `[256]`, []int64{1}, nil, "data[0] = 256 is out of range for UINT8 (0 to 255)"},
		{&u8, `[-1]`, []int64{1}, nil, "data[0] = -1 is out of range for UINT8 (0 to 255)"},
		{&u16, `[65535]`, []int64{1}, le[int16](-1), ""},
		{&u16, `[65536]`, []int64{1}, nil, "data[0] = 65536 is out of range for UINT16 (0 to 65535)"},
		{&u64, `[18446744073709551615]`, []int64{1}, le[int64](-1), ""},
		{&u64, `[18446744073709551616]`, []int64{1}, nil, "data[0] = 18446744073709551616 is out of range for UINT64 (0 to 18446744073709551615)"},
	} {
		p := &parser{}
		p.Reset([]byte(tc.data))
		n, _ := servables.NumElements(tc.shape)
		data, problem, ok := p.decodeData(tc.d, tc.shape, n)
		if !ok {
			t.Errorf("%s %s: syntax error %v", tc.d.name, tc.data, p.error())
			continue
		}
		if problem != tc.problem || (problem == "" && !bytes.Equal(data, tc.want)) {
			t.Errorf("%s %s: got %v %q, want %v %q", tc.d.name, tc.data, data, problem, tc.want, tc.problem)
		}
		if p.Pos != len(tc.data) {
			t.Errorf("%s %s: stopped at %d", tc.d.name, tc.data, p.Pos)
		}
	}
}

// TestParserReuse checks that the pooled parser carries nothing from one
// request to the next, including after errors.
func TestParserReuse(t *testing.T) {
	good := `{"id":"1","parameters":{"a":"b"},"inputs":[{"name":"x","shape":[2],"datatype":"FP32","data":[1,2],"parameters":{"c":1}}],"outputs":[{"name":"y"}]}`
	first := mustParse(t, good, 0)
	for _, bad := range []string{`{"inputs":[{"name":"x","shape":[2],"datatype":"FP32","data":[1,"a"]}]}`, `{"inputs":[`, `{"id":"zz","inputs":[{"name":"q","shape":[1],"datatype":"INT8","data":[1]}]}`} {
		ParseInferRequest([]byte(bad), 0)
		again := mustParse(t, good, 0)
		if !reflect.DeepEqual(first, again) {
			t.Fatalf("after %s:\n got %+v\nwant %+v", bad, again, first)
		}
	}
}

// TestDenseData covers data whose tensor is larger than its JSON (short
// literals of an 8-byte type), decoded through the parser's arena.
func TestDenseData(t *testing.T) {
	for _, n := range []int{1, 7, 513, 5000} {
		var flat, nested strings.Builder
		want := make([]int64, n)
		flat.WriteString(`[`)
		nested.WriteString(`[`)
		for i := 0; i < n; i++ {
			want[i] = int64(i % 10)
			if i > 0 {
				flat.WriteByte(',')
				nested.WriteByte(',')
			}
			fmt.Fprintf(&flat, "%d", i%10)
			fmt.Fprintf(&nested, "[%d]", i%10)
		}
		flat.WriteString(`]`)
		nested.WriteString(`]`)
		for _, tc := range []struct{ shape, data string }{
			{fmt.Sprintf("[%d]", n), flat.String()},
			{fmt.Sprintf("[%d,1]", n), nested.String()},
		} {
			for round := 0; round < 2; round++ { // the second parse reuses the arena
				req := mustParse(t, in(`{"name":"x","shape":`+tc.shape+`,"datatype":"INT64","data":`+tc.data+`}`), 0)
				if got := req.Inputs[0].Int64s(); !reflect.DeepEqual(got, want) {
					t.Fatalf("n=%d %s: got %v", n, tc.shape, got[:min(10, len(got))])
				}
			}
		}
		// One element too many or too few is still counted exactly.
		_, err := ParseInferRequest([]byte(in(fmt.Sprintf(`{"name":"x","shape":[%d],"datatype":"INT64","data":%s}`, n+1, flat.String()))), 0)
		checkErr(t, nil, err, 400, fmt.Sprintf("data has %s, but shape [%d] needs %d", count(int64(n), "element"), n+1, n+1))
		if n > 1 {
			_, err = ParseInferRequest([]byte(in(fmt.Sprintf(`{"name":"x","shape":[%d],"datatype":"INT64","data":%s}`, n-1, flat.String()))), 0)
			checkErr(t, nil, err, 400, fmt.Sprintf("data has %d elements, but shape [%d] needs %d", n, n-1, n-1))
		}
	}
}

// TestAllocationFollowsData checks that a shape the data do not fill costs
// no more memory than the data present, however large the body.
func TestAllocationFollowsData(t *testing.T) {
	padding := strings.Repeat(" ", 4<<20)
	body := []byte(`{"inputs":[{"name":"x","shape":[1048576],"datatype":"FP64","data":[1,2,3]}],"pad":"` + padding + `"}`)
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	_, err := ParseInferRequest(body, 0)
	runtime.ReadMemStats(&after)
	checkErr(t, nil, err, 400, "data has 3 elements, but shape [1048576] needs 1048576")
	if got := after.TotalAlloc - before.TotalAlloc; got > 1<<20 {
		t.Errorf("parsing allocated %d bytes for a tensor of 8 MiB that the data do not fill", got)
	}
}

func TestAllocsPerRequest(t *testing.T) {
	if raceEnabled {
		t.Skip("allocation counts are not meaningful under the race detector")
	}
	for _, rows := range []int{1, 64} {
		body := benchJSON(rows, false)
		bbody, h := benchBinary(rows)
		for _, tc := range []struct {
			name string
			body []byte
			h    int
			max  float64
		}{{"json", body, 0, 7}, {"binary", bbody, h, 9}} { // 6 and 8, with room for a GC emptying the parser pool
			allocs := testing.AllocsPerRun(50, func() {
				if _, err := ParseInferRequest(tc.body, tc.h); err != nil {
					t.Fatal(err)
				}
			})
			if allocs > tc.max {
				t.Errorf("%s rows=%d: %v allocations per request, want at most %v", tc.name, rows, allocs, tc.max)
			}
		}
	}
}

func TestBoolAndUint8(t *testing.T) {
	req := mustParse(t, `{"inputs":[{"name":"m","shape":[2,2],"datatype":"BOOL","data":[[true,false],[false,true]]},`+
		`{"name":"u","shape":[3],"datatype":"UINT8","data":[0,7,255]},{"name":"f","shape":[2],"datatype":"BOOL","data":[false,true]}]}`, 0)
	if m := req.Inputs[0]; m.DType != servables.Bool || !bytes.Equal(m.Data, []byte{1, 0, 0, 1}) || fmt.Sprint(m.Shape) != "[2 2]" {
		t.Errorf("m = %+v", m)
	}
	if u := req.Inputs[1]; u.DType != servables.Uint8 || !bytes.Equal(u.Data, []byte{0, 7, 255}) {
		t.Errorf("u = %+v", u)
	}
	if f := req.Inputs[2]; f.DType != servables.Bool || !bytes.Equal(f.Data, []byte{0, 1}) {
		t.Errorf("f = %+v", f)
	}
	// Binary data: one byte per element.
	header := `{"inputs":[{"name":"m","shape":[3],"datatype":"BOOL","parameters":{"binary_data_size":3}},{"name":"u","shape":[2],"datatype":"UINT8","parameters":{"binary_data_size":2}}]}`
	req = mustParse(t, header+"\x01\x00\x01\xff\x10", len(header))
	if !bytes.Equal(req.Inputs[0].Data, []byte{1, 0, 1}) || req.Inputs[0].DType != servables.Bool ||
		!bytes.Equal(req.Inputs[1].Data, []byte{255, 16}) || req.Inputs[1].DType != servables.Uint8 {
		t.Errorf("binary inputs %+v", req.Inputs)
	}
	for _, tc := range []struct{ name, body, want string }{
		{"bool number", in(`{"name":"m","shape":[2],"datatype":"BOOL","data":[true,1]}`), `input "m": data[1] is a number; BOOL data must be true or false`},
		{"bool string", in(`{"name":"m","shape":[1,2],"datatype":"BOOL","data":[["true",false]]}`), `input "m": data[0][0] is a string; BOOL data must be true or false`},
		{"bool null", in(`{"name":"m","shape":[1],"datatype":"BOOL","data":[null]}`), `input "m": data[0] is null; BOOL data must be true or false`},
		{"uint8 too big", in(`{"name":"u","shape":[2],"datatype":"UINT8","data":[1,256]}`), `input "u": data[1] = 256 is out of range for UINT8 (0 to 255)`},
		{"uint8 negative", in(`{"name":"u","shape":[2,1],"datatype":"UINT8","data":[[0],[-3]]}`), `input "u": data[1][0] = -3 is out of range for UINT8 (0 to 255)`},
		{"uint8 fraction", in(`{"name":"u","shape":[1],"datatype":"UINT8","data":[1.5]}`), `input "u": data[0] = 1.5 is not an integer; UINT8 data must be integer literals`},
		{"uint8 bool", in(`{"name":"u","shape":[1],"datatype":"UINT8","data":[true]}`), `input "u": data[0] is a boolean; UINT8 data must be integer numbers`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			req, err := ParseInferRequest([]byte(tc.body), 0)
			checkErr(t, req, err, 400, tc.want)
		})
	}
	bad := `{"inputs":[{"name":"m","shape":[3],"datatype":"BOOL","parameters":{"binary_data_size":3}}]}`
	req, err := ParseInferRequest([]byte(bad+"\x01\x00\x02"), len(bad))
	checkErr(t, req, err, 400, `input "m": binary data byte 2 is 2; BOOL data must be bytes 0 (false) or 1 (true)`)
}
