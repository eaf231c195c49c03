package ba

import (
	"math"
	"reflect"
	"runtime"
	"strconv"
	"strings"
	"testing"

	"github.com/groveml/grove/servables"
)

// item wraps one tensor object in a single-item request for model "m".
func item(tensor string) string {
	return `{"request":[{"model_path":"m","tensors":[` + tensor + `]}]}`
}

func TestParseRequestSeedExample(t *testing.T) {
	req, err := ParseOptions{}.ParseRequest([]byte(seedRequest))
	if err != nil {
		t.Fatal(err)
	}
	f32 := func(v ...float32) []float32 { return v }
	if len(req.Items) != 2 || req.Configs != nil {
		t.Fatalf("got %+v", req)
	}
	a, b := req.Items[0], req.Items[1]
	if a.Err != nil || b.Err != nil || a.ModelPath != "pcvr_v1/" || b.ModelPath != "pcvr_v2/" {
		t.Fatalf("items %+v %+v", a, b)
	}
	check := func(tn servables.Tensor, name string, dt servables.DType, shape []int64) {
		t.Helper()
		if tn.Name != name || tn.DType != dt || !reflect.DeepEqual(tn.Shape, shape) || tn.Validate() != nil {
			t.Errorf("tensor %+v, want %s %v %v", tn, name, dt, shape)
		}
	}
	check(a.Inputs[0], "feature1", servables.Float64, []int64{2, 1})
	check(b.Inputs[0], "feature1", servables.Int32, []int64{2, 1})
	check(b.Inputs[1], "feature2", servables.Float32, []int64{2, 2})
	if got := a.Inputs[0].Float64s(); !reflect.DeepEqual(got, []float64{0.454920, -0.25752}) {
		t.Errorf("DOUBLE content %v", got)
	}
	if got := b.Inputs[0].Int32s(); !reflect.DeepEqual(got, []int32{5, 6}) {
		t.Errorf("INT32 content %v", got)
	}
	if got := b.Inputs[1].Float32s(); !reflect.DeepEqual(got, f32(0.5, 0.6, 0.7, 0.8)) {
		t.Errorf("FLOAT content %v", got)
	}
	// Round trip: echoing the inputs gives the documented response shape.
	want := `{"response":[{"model_path":"pcvr_v1/","tensors":[{"tensor_name":"feature1","tensor_shape":[2,1],"data_type":"DOUBLE","tensor_content":[0.45492,-0.25752]}]},` +
		`{"model_path":"pcvr_v2/","tensors":[{"tensor_name":"feature1","tensor_shape":[2,1],"data_type":"INT32","tensor_content":[5,6]},` +
		`{"tensor_name":"feature2","tensor_shape":[2,2],"data_type":"FLOAT","tensor_content":[0.5,0.6000000238418579,0.699999988079071,0.800000011920929]}]}]}`
	got := AppendResponse(nil, []Result{{ModelPath: a.ModelPath, Outputs: a.Inputs}, {ModelPath: b.ModelPath, Outputs: b.Inputs}})
	if string(got) != want {
		t.Errorf("response\n got %s\nwant %s", got, want)
	}
}

func TestParseRequestBatchErrors(t *testing.T) {
	tests := []struct {
		name, body, want string
	}{
		{"empty document", ``, "JSON Parse Error: The document is empty."},
		{"only whitespace", " \n\t\r", "JSON Parse Error: The document is empty."},
		{"invalid value", `{"request":[x]}`, "JSON Parse Error: Invalid value."},
		{"NaN literal", `{"request":[NaN]}`, "JSON Parse Error: Invalid value."},
		{"Infinity literal", `{"request":[Infinity]}`, "JSON Parse Error: Invalid value."},
		{"leading plus", `{"request":[+1]}`, "JSON Parse Error: Invalid value."},
		{"truncated literal", `{"request":nul}`, "JSON Parse Error: Invalid value."},
		{"trailing comma in array", `{"request":[1,]}`, "JSON Parse Error: Invalid value."},
		{"trailing comma in object", `{"request":[],}`, "JSON Parse Error: Missing a name for object member."},
		{"unquoted name", `{request:[]}`, "JSON Parse Error: Missing a name for object member."},
		{"comment", `{"request":[]/* c */}`, "JSON Parse Error: Missing a comma or '}' after an object member."},
		{"line comment", "// c\n{\"request\":[]}", "JSON Parse Error: Invalid value."},
		{"missing colon", `{"request" []}`, "JSON Parse Error: Missing a colon after a name of object member."},
		{"missing comma in object", `{"request":[] "x":1}`, "JSON Parse Error: Missing a comma or '}' after an object member."},
		{"missing comma in array", `{"request":[1 2]}`, "JSON Parse Error: Missing a comma or ']' after an array element."},
		{"unclosed array", `{"request":[`, "JSON Parse Error: Invalid value."},
		{"unclosed object", `{"request":[]`, "JSON Parse Error: Missing a comma or '}' after an object member."},
		{"second root", `{"request":[]} {}`, "JSON Parse Error: The document root must not be followed by other values."},
		{"unclosed string", `{"request":"abc`, "JSON Parse Error: Missing a closing quotation mark in string."},
		{"bad escape", `{"request":"\x"}`, "JSON Parse Error: Invalid escape character in string."},
		{"raw control character", "{\"request\":\"a\tb\"}", "JSON Parse Error: Invalid escape character in string."},
		{"bad hex", `{"request":"\u12G4"}`, "JSON Parse Error: Incorrect hex digit after \\u escape in string."},
		{"lone high surrogate", `{"request":"\ud800"}`, "JSON Parse Error: The surrogate pair in string is invalid."},
		{"high surrogate then BMP", `{"request":"\ud800\u0041"}`, "JSON Parse Error: The surrogate pair in string is invalid."},
		{"lone low surrogate (Grove)", `{"request":"\udc00"}`, "JSON Parse Error: The surrogate pair in string is invalid."},
		{"invalid UTF-8 (Grove)", "{\"request\":[\"\xff\"]}", "JSON Parse Error: Invalid encoding in string."},
		{"UTF-8 surrogate (Grove)", "{\"request\":[\"\xed\xa0\x80\"]}", "JSON Parse Error: Invalid encoding in string."},
		{"overlong UTF-8 (Grove)", "{\"x\":\"\xc0\xaf\",\"request\":[]}", "JSON Parse Error: Invalid encoding in string."},
		{"NUL after the root (Grove)", "{\"request\":[]}\x00", "JSON Parse Error: The document contains a NUL character."},
		{"NUL inside a string (Grove)", "{\"request\":[\"a\x00\"]}", "JSON Parse Error: The document contains a NUL character."},
		{"NUL first (Grove)", "\x00{\"request\":[]}", "JSON Parse Error: The document contains a NUL character."},
		{"missing fraction", `{"request":[1.]}`, "JSON Parse Error: Miss fraction part in number."},
		{"missing exponent", `{"request":[1e+]}`, "JSON Parse Error: Miss exponent in number."},
		{"exponent too big", `{"request":[1e309]}`, "JSON Parse Error: Number too big to be stored in double."},
		{"integer too big", `{"request":[` + strings.Repeat("9", 310) + `]}`, "JSON Parse Error: Number too big to be stored in double."},
		{"leading zero", `{"request":[01]}`, "JSON Parse Error: Missing a comma or ']' after an array element."},
		{"non-object root", `1.0`, "Missing request in the JSON document"},
		{"array root", `[{"request":[]}]`, "Missing request in the JSON document"},
		{"missing request", `{"requests":[]}`, "Missing request in the JSON document"},
		{"request is null", `{"request":null}`, "Value of member: request, has unexpected member type (expected: 4, observed: 0)"},
		{"request is false", `{"request":false}`, "Value of member: request, has unexpected member type (expected: 4, observed: 1)"},
		{"request is true", `{"request":true}`, "Value of member: request, has unexpected member type (expected: 4, observed: 2)"},
		{"request is an object", `{"request":{}}`, "Value of member: request, has unexpected member type (expected: 4, observed: 3)"},
		{"request is a string", `{"request":"[]"}`, "Value of member: request, has unexpected member type (expected: 4, observed: 5)"},
		{"request is a number", `{"request":4}`, "Value of member: request, has unexpected member type (expected: 4, observed: 6)"},
		{"first request wins", `{"request":4,"request":[]}`, "Value of member: request, has unexpected member type (expected: 4, observed: 6)"},
		{"syntax error after the request", `{"request":[],"x":[}`, "JSON Parse Error: Invalid value."},
		{"configs not an object", `{"request":[],"configs":[]}`, "Value of member: configs, has unexpected member type (expected: 3, observed: 4)"},
		{"configs value not a string", `{"request":[],"configs":{"a":"x","b":1}}`, "Value of member: configs.b, has unexpected member type (expected: 5, observed: 6)"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			req, err := ParseOptions{}.ParseRequest([]byte(tt.body))
			if err == nil {
				t.Fatalf("accepted: %+v", req)
			}
			if err.Type != InputParsing || err.Description != tt.want {
				t.Errorf("got %v\nwant %s", err, tt.want)
			}
		})
	}
}

func TestParseRequestItemErrors(t *testing.T) {
	ok := `{"data_type":"FLOAT","tensor_shape":[1],"tensor_content":["1"]}`
	tests := []struct {
		name, item, path, want string
	}{
		{"item not an object", `7`, "", "Value of member: request, has unexpected element type (expected: 3, observed: 6)"},
		{"missing model_path", `{"tensors":[` + ok + `]}`, "", "Missing model_path in the JSON document"},
		{"model_path not a string", `{"model_path":1,"tensors":[` + ok + `]}`, "", "Value of member: model_path, has unexpected member type (expected: 5, observed: 6)"},
		{"empty model_path", `{"model_path":"","tensors":[` + ok + `]}`, "", "Value of member: model_path, is unexpectedly an empty string."},
		{"model_path checked before tensors", `{"tensors":1}`, "", "Missing model_path in the JSON document"},
		{"missing tensors", `{"model_path":"m"}`, "m", "Missing tensors in the JSON document"},
		{"tensors not an array", `{"model_path":"m","tensors":{}}`, "m", "Value of member: tensors, has unexpected member type (expected: 4, observed: 3)"},
		{"empty tensors (Grove; after the model lookup)", `{"model_path":"m","tensors":[]}`, "m", "late: tensors must not be empty"},
		{"tensor not an object", `{"model_path":"m","tensors":[[]]}`, "m", "Value of member: tensors, has unexpected element type (expected: 3, observed: 4)"},
		{"missing data_type", `{"model_path":"m","tensors":[{"tensor_shape":[1],"tensor_content":["1"]}]}`, "m", "Missing data_type in the JSON document"},
		{"data_type not a string", `{"model_path":"m","tensors":[{"data_type":null}]}`, "m", "Value of member: data_type, has unexpected member type (expected: 5, observed: 0)"},
		{"empty data_type", `{"model_path":"m","tensors":[{"data_type":""}]}`, "m", "Value of member: data_type, is unexpectedly an empty string."},
		{"lower-case data_type", `{"model_path":"m","tensors":[{"data_type":"float"}]}`, "m", "Invalid JSON format: Unsupported 'data_type' field float"},
		{"unknown data_type", `{"model_path":"m","tensors":[{"data_type":"BOOL"}]}`, "m", "Invalid JSON format: Unsupported 'data_type' field BOOL"},
		{"UINT8 is not a B&A data_type", `{"model_path":"m","tensors":[{"data_type":"UINT8","tensor_shape":[1],"tensor_content":["1"]}]}`, "m", "Invalid JSON format: Unsupported 'data_type' field UINT8"},
		{"BOOL is not a B&A data_type", `{"model_path":"m","tensors":[{"data_type":"BOOL","tensor_shape":[1],"tensor_content":["1"]}]}`, "m", "Invalid JSON format: Unsupported 'data_type' field BOOL"},
		{"missing tensor_shape", `{"model_path":"m","tensors":[{"data_type":"FLOAT","tensor_content":["1"]}]}`, "m", "Missing tensor_shape in the JSON document"},
		{"tensor_shape not an array", `{"model_path":"m","tensors":[{"data_type":"FLOAT","tensor_shape":1}]}`, "m", "Value of member: tensor_shape, has unexpected member type (expected: 4, observed: 6)"},
		{"zero dimension", `{"model_path":"m","tensors":[{"data_type":"FLOAT","tensor_shape":[1,0],"tensor_content":[]}]}`, "m", "Invalid tensor dimension: it has to be greater than 0"},
		{"negative dimension", `{"model_path":"m","tensors":[{"data_type":"FLOAT","tensor_shape":[-2],"tensor_content":[]}]}`, "m", "Invalid tensor dimension: it has to be greater than 0"},
		{"fractional dimension (Grove)", `{"model_path":"m","tensors":[{"data_type":"FLOAT","tensor_shape":[1.5],"tensor_content":["1"]}]}`, "m", "Invalid tensor dimension: it has to be an integer"},
		{"integral double dimension (Grove)", `{"model_path":"m","tensors":[{"data_type":"FLOAT","tensor_shape":[1.0],"tensor_content":["1"]}]}`, "m", "Invalid tensor dimension: it has to be an integer"},
		{"exponent dimension (Grove)", `{"model_path":"m","tensors":[{"data_type":"FLOAT","tensor_shape":[1e0],"tensor_content":["1"]}]}`, "m", "Invalid tensor dimension: it has to be an integer"},
		{"string dimension (Grove)", `{"model_path":"m","tensors":[{"data_type":"FLOAT","tensor_shape":["1"],"tensor_content":["1"]}]}`, "m", "Invalid tensor dimension: it has to be an integer"},
		{"first bad dimension wins", `{"model_path":"m","tensors":[{"data_type":"FLOAT","tensor_shape":[0,"x"]}]}`, "m", "Invalid tensor dimension: it has to be greater than 0"},
		{"shape checked before content", `{"model_path":"m","tensors":[{"data_type":"FLOAT","tensor_shape":[0]}]}`, "m", "Invalid tensor dimension: it has to be greater than 0"},
		{"missing tensor_content", `{"model_path":"m","tensors":[{"data_type":"FLOAT","tensor_shape":[1]}]}`, "m", "Missing tensor_content in the JSON document"},
		{"tensor_content not an array", `{"model_path":"m","tensors":[{"data_type":"FLOAT","tensor_shape":[1],"tensor_content":"1"}]}`, "m", "Value of member: tensor_content, has unexpected member type (expected: 4, observed: 5)"},
		{"null in tensor_content", `{"model_path":"m","tensors":[{"data_type":"FLOAT","tensor_shape":[2],"tensor_content":["1",null]}]}`, "m", "All numbers within the tensor_content must be enclosed in quotes"},
		{"array in tensor_content", `{"model_path":"m","tensors":[{"data_type":"FLOAT","tensor_shape":[1],"tensor_content":[["1"]]}]}`, "m", "All numbers within the tensor_content must be enclosed in quotes"},
		{"too few values", `{"model_path":"m","tensors":[{"data_type":"FLOAT","tensor_shape":[2,2],"tensor_content":["1","2","3"]}]}`, "m", "Mismatch between the size of tensor_content (3) and a product of tensor dimensions (4)"},
		{"too many values for a scalar", `{"model_path":"m","tensors":[{"data_type":"FLOAT","tensor_shape":[],"tensor_content":["1","2"]}]}`, "m", "Mismatch between the size of tensor_content (2) and a product of tensor dimensions (1)"},
		{"huge shape (Grove)", `{"model_path":"m","tensors":[{"data_type":"FLOAT","tensor_shape":[65536,65536],"tensor_content":["1"]}]}`, "m", "Invalid tensor shape: the product of tensor dimensions exceeds 2147483648"},
		{"shape beyond int64 (Grove)", `{"model_path":"m","tensors":[{"data_type":"FLOAT","tensor_shape":[18446744073709551616],"tensor_content":["1"]}]}`, "m", "Invalid tensor shape: the product of tensor dimensions exceeds 2147483648"},
		{"structure of every tensor before conversion", `{"model_path":"m","tensors":[{"data_type":"INT8","tensor_shape":[1],"tensor_content":["999"]},{"data_type":"BOOL"}]}`, "m", "Invalid JSON format: Unsupported 'data_type' field BOOL"},
		{"first conversion error wins", `{"model_path":"m","tensors":[{"data_type":"INT8","tensor_shape":[2],"tensor_content":["1","x"]},{"data_type":"FLOAT","tensor_shape":[1],"tensor_content":["y"]}]}`, "m", "late: Input Tensor Conversion Error. Message: Model m encounters tensor parsing error: Error in int8 conversion"},
		{"unquoted number", `{"model_path":"m","tensors":[{"data_type":"FLOAT","tensor_shape":[2],"tensor_content":["1",2]}]}`, "m", "All numbers within the tensor_content must be enclosed in quotes"},
		{"unquoted number before a count mismatch", `{"model_path":"m","tensors":[{"data_type":"FLOAT","tensor_shape":[3],"tensor_content":[1]}]}`, "m", "All numbers within the tensor_content must be enclosed in quotes"},
		{"unquoted number before a conversion error", `{"model_path":"m","tensors":[{"data_type":"INT8","tensor_shape":[1],"tensor_content":["x"]},{"data_type":"FLOAT","tensor_shape":[1],"tensor_content":[1]}]}`, "m", "All numbers within the tensor_content must be enclosed in quotes"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			body := `{"request":[` + tt.item + `,{"model_path":"ok","tensors":[` + ok + `]}]}`
			req, err := ParseOptions{}.ParseRequest([]byte(body))
			if err != nil {
				t.Fatalf("batch error %v", err)
			}
			got := req.Items[0]
			e, other := got.Err, got.InputErr
			want, late := strings.CutPrefix(tt.want, "late: ")
			if late {
				e, other = got.InputErr, got.Err
			}
			if e == nil || other != nil || e.Type != InputParsing || e.Description != want || got.ModelPath != tt.path || got.Inputs != nil {
				t.Errorf("got %+v\nwant path %q, %s (found after the model lookup: %v)", got, tt.path, want, late)
			}
			if other := req.Items[1]; other.Err != nil || len(other.Inputs) != 1 {
				t.Errorf("the other item is affected: %+v", other)
			}
		})
	}
}

func TestParseRequestConversions(t *testing.T) {
	conv := "Input Tensor Conversion Error. Message: Model m encounters tensor parsing error: "
	tests := []struct {
		name, dtype, content string
		want                 any    // []float32, []float64, []int8, ... when accepted
		err                  string // conversion message when rejected
		unquoted             bool   // parse with AcceptUnquotedNumbers
	}{
		{"int8 max", "INT8", `"127"`, []int8{127}, "", false},
		{"int8 min", "INT8", `"-128"`, []int8{-128}, "", false},
		{"int8 above max", "INT8", `"128"`, nil, "The number is outside of bounds of int8_t.", false},
		{"int8 below min", "INT8", `"-129"`, nil, "The number is outside of bounds of int8_t.", false},
		{"int8 beyond int", "INT8", `"2147483648"`, nil, "Error in int8 conversion", false},
		{"int16 bounds", "INT16", `"32767","-32768"`, []int16{32767, -32768}, "", false},
		{"int16 above max", "INT16", `"32768"`, nil, "The number is outside of bounds of int16_t.", false},
		{"int16 not a number", "INT16", `"a"`, nil, "Error in int16 conversion", false},
		{"int32 bounds", "INT32", `"2147483647","-2147483648"`, []int32{math.MaxInt32, math.MinInt32}, "", false},
		{"int32 overflow", "INT32", `"2147483648"`, nil, "Error in int32 conversion", false},
		{"int32 underflow", "INT32", `"-2147483649"`, nil, "Error in int32 conversion", false},
		{"int64 bounds", "INT64", `"9223372036854775807","-9223372036854775808"`, []int64{math.MaxInt64, math.MinInt64}, "", false},
		{"int64 overflow", "INT64", `"9223372036854775808"`, nil, "Error in int64 conversion", false},
		{"int with a fraction", "INT32", `"1.0"`, nil, "Error in int32 conversion", false},
		{"int with an exponent", "INT64", `"1e2"`, nil, "Error in int64 conversion", false},
		{"int in hexadecimal", "INT32", `"0x10"`, nil, "Error in int32 conversion", false},
		{"int surrounded by ASCII whitespace", "INT32", `" \t\n\u000b\f\r7 \r"`, []int32{7}, "", false},
		{"int with a plus", "INT32", `"+7"`, []int32{7}, "", false},
		{"int with two signs", "INT32", `"+-7"`, nil, "Error in int32 conversion", false},
		{"int with inner space", "INT32", `"1 2"`, nil, "Error in int32 conversion", false},
		{"int non-ASCII space", "INT32", `"\u00a01"`, nil, "Error in int32 conversion", false},
		{"empty int", "INT16", `""`, nil, "Error in int16 conversion", false},
		{"float exponent", "FLOAT", `"1.5e3","-2E-2"`, []float32{1500, -0.02}, "", false},
		{"float whitespace and plus", "FLOAT", `" +0.25 "`, []float32{0.25}, "", false},
		{"float plus minus", "FLOAT", `"+-1"`, nil, "Error in float conversion", false},
		{"float bare dot forms", "FLOAT", `".5","5."`, []float32{0.5, 5}, "", false},
		{"float lone dot", "FLOAT", `"."`, nil, "Error in float conversion", false},
		{"float overflow is inf", "FLOAT", `"3.5e38","-1e39"`, []float32{float32(math.Inf(1)), float32(math.Inf(-1))}, "", false},
		{"float underflow is zero", "FLOAT", `"1e-50"`, []float32{0}, "", false},
		{"float inf words", "FLOAT", `"inf","-Infinity","INF"`, []float32{float32(math.Inf(1)), float32(math.Inf(-1)), float32(math.Inf(1))}, "", false},
		{"float hexadecimal", "FLOAT", `"0x1p-2","0X10"`, []float32{0.25, 16}, "", false},
		{"float trailing garbage", "FLOAT", `"1.5f"`, nil, "Error in float conversion", false},
		{"float incomplete exponent", "FLOAT", `"1e"`, nil, "Error in float conversion", false},
		{"double overflow is inf", "DOUBLE", `"1e309"`, []float64{math.Inf(1)}, "", false},
		{"double precision", "DOUBLE", `"0.1","1.7976931348623157e308"`, []float64{0.1, math.MaxFloat64}, "", false},
		{"double garbage", "DOUBLE", `"one"`, nil, "Error in double conversion", false},
		{"unquoted float numbers", "FLOAT", `0.5,-1e3,7`, []float32{0.5, -1000, 7}, "", true},
		{"unquoted double numbers", "DOUBLE", `-0.0,1E-7`, []float64{math.Copysign(0, -1), 1e-7}, "", true},
		{"unquoted ints", "INT64", `-9223372036854775808,12`, []int64{math.MinInt64, 12}, "", true},
		{"unquoted int out of range", "INT8", `300`, nil, "The number is outside of bounds of int8_t.", true},
		{"unquoted fraction for an int", "INT32", `1.0`, nil, "Error in int32 conversion", true},
		{"unquoted exponent for an int", "INT32", `1e2`, nil, "Error in int32 conversion", true},
		{"unquoted number overflowing a float", "FLOAT", `1e300`, []float32{float32(math.Inf(1))}, "", true},
		{"quoted and unquoted mixed", "INT16", `"1",2,"3"`, []int16{1, 2, 3}, "", true},
		{"escaped digits", "INT32", `"\u0034\u0032"`, []int32{42}, "", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			n := strings.Count(tt.content, ",") + 1
			shape := "[" + strconv.Itoa(n) + "]"
			body := []byte(item(`{"data_type":"` + tt.dtype + `","tensor_shape":` + shape + `,"tensor_content":[` + tt.content + `]}`))
			req, err := ParseOptions{AcceptUnquotedNumbers: tt.unquoted}.ParseRequest(body)
			if err != nil {
				t.Fatal(err)
			}
			it := req.Items[0]
			if tt.err != "" {
				if it.Err != nil || it.InputErr == nil || it.InputErr.Description != conv+tt.err {
					t.Fatalf("got %+v, want error %q found after the model lookup", it, tt.err)
				}
				return
			}
			if tt.unquoted {
				// The sidecar's default: numbers must be strings.
				def, _ := ParseOptions{}.ParseRequest(body)
				if e := def.Items[0].Err; e == nil || e.Description != msgNotQuoted {
					t.Errorf("without the setting: %+v, want %q", def.Items[0], msgNotQuoted)
				}
			}
			if it.Err != nil {
				t.Fatalf("error %v", it.Err)
			}
			in := it.Inputs[0]
			var got any
			switch in.DType {
			case servables.Float32:
				got = in.Float32s()
			case servables.Float64:
				got = in.Float64s()
			case servables.Int8:
				got = in.Int8s()
			case servables.Int16:
				got = in.Int16s()
			case servables.Int32:
				got = in.Int32s()
			case servables.Int64:
				got = in.Int64s()
			}
			if !reflect.DeepEqual(got, tt.want) || !sameSigns(got, tt.want) {
				t.Errorf("got %v, want %v", got, tt.want)
			}
		})
	}
}

// sameSigns also tells -0 from +0.
func sameSigns(a, b any) bool {
	x, ok1 := a.([]float64)
	y, ok2 := b.([]float64)
	if !ok1 || !ok2 {
		return true
	}
	for i := range x {
		if math.Signbit(x[i]) != math.Signbit(y[i]) {
			return false
		}
	}
	return true
}

func TestParseRequestNaNInput(t *testing.T) {
	req, err := ParseOptions{}.ParseRequest([]byte(item(`{"data_type":"FLOAT","tensor_shape":[3],"tensor_content":["nan","-NaN","nan(0x_1)"]}`)))
	if err != nil || req.Items[0].Err != nil {
		t.Fatal(err, req.Items[0].Err)
	}
	for i, v := range req.Items[0].Inputs[0].Float32s() {
		if v == v {
			t.Errorf("value %d = %v, want NaN", i, v)
		}
	}
}

func TestParseRequestDuplicateKeysFirstWins(t *testing.T) {
	body := `{"request":[{"model_path":"first","model_path":"second","tensors":[` +
		`{"tensor_name":"a","tensor_name":"b","data_type":"INT32","data_type":"BOOL",` +
		`"tensor_shape":[2],"tensor_shape":[3],"tensor_content":["1","2"],"tensor_content":["x"]}],` +
		`"tensors":"ignored"}],"request":"ignored","configs":{"k":"v1","k":"v2"}}`
	req, err := ParseOptions{}.ParseRequest([]byte(body))
	if err != nil {
		t.Fatal(err)
	}
	it := req.Items[0]
	if it.Err != nil || it.ModelPath != "first" || len(it.Inputs) != 1 {
		t.Fatalf("got %+v", it)
	}
	in := it.Inputs[0]
	if in.Name != "a" || in.DType != servables.Int32 || !reflect.DeepEqual(in.Shape, []int64{2}) || !reflect.DeepEqual(in.Int32s(), []int32{1, 2}) {
		t.Errorf("tensor %+v", in)
	}
	if req.Configs["k"] != "v1" {
		t.Errorf("configs %v", req.Configs)
	}
}

func TestParseRequestOptionalAndUnknownMembers(t *testing.T) {
	body := `{"x":{"request":1},"request":[{"extra":[1,{"a":null}],"model_path":"m","tensors":[` +
		`{"tensor_name":5,"data_type":"INT16","tensor_shape":[],"tensor_content":["-3"],"more":true},` +
		`{"data_type":"INT16","tensor_shape":[1],"tensor_content":["4"]}]}],"z":"\u00e9"}`
	req, err := ParseOptions{}.ParseRequest([]byte(body))
	if err != nil {
		t.Fatal(err)
	}
	in := req.Items[0].Inputs
	if req.Items[0].Err != nil || len(in) != 2 || in[0].Name != "" || in[1].Name != "" || len(in[0].Shape) != 0 ||
		in[0].Int16s()[0] != -3 || in[1].Int16s()[0] != 4 || req.Configs != nil {
		t.Errorf("got %+v", req)
	}
}

func TestParseRequestEscapedNames(t *testing.T) {
	body := `{"requ\u0065st":[{"model_p\u0061th":"a\/b\u00e9\ud83d\ude00","tensors":[{"tensor_name":"x\ty\"","data_type":"\u0046LOAT","tensor_shape":[1],"tensor_content":["1"]}]}],` +
		`"configs":{"k\u0065y":"v\nw"}}`
	req, err := ParseOptions{}.ParseRequest([]byte(body))
	if err != nil {
		t.Fatal(err)
	}
	it := req.Items[0]
	if it.Err != nil || it.ModelPath != "a/b\u00e9\U0001F600" || it.Inputs[0].Name != "x\ty\"" || req.Configs["key"] != "v\nw" {
		t.Errorf("got %+v %v", it, req.Configs)
	}
}

func TestParseRequestEmptyBatch(t *testing.T) {
	req, err := ParseOptions{}.ParseRequest([]byte(` {"request" : [ ] } `))
	if err != nil || len(req.Items) != 0 {
		t.Fatalf("got %+v, %v", req, err)
	}
	if got := string(AppendResponse(nil, nil)); got != `{"response":[]}` {
		t.Errorf("empty response %s", got)
	}
}

func TestParseRequestHugeShapeDoesNotAllocate(t *testing.T) {
	body := []byte(item(`{"data_type":"DOUBLE","tensor_shape":[46340,46340],"tensor_content":["1"]}`))
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	for i := 0; i < 10; i++ {
		req, err := ParseOptions{}.ParseRequest(body)
		if err != nil || req.Items[0].Err == nil {
			t.Fatal("accepted")
		}
		want := "Mismatch between the size of tensor_content (1) and a product of tensor dimensions (2147395600)"
		if req.Items[0].Err.Description != want {
			t.Fatalf("got %v", req.Items[0].Err)
		}
	}
	runtime.ReadMemStats(&after)
	if grown := after.TotalAlloc - before.TotalAlloc; grown > 1<<20 {
		t.Errorf("allocated %d bytes for a rejected 2^31-element shape", grown)
	}
}

func TestParseRequestManyOversizedShapesDoNotAllocate(t *testing.T) {
	one := `{"data_type":"DOUBLE","tensor_shape":[100000],"tensor_content":["1"]}`
	body := []byte(item(strings.TrimSuffix(strings.Repeat(one+",", 2000), ",")))
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	req, err := ParseOptions{}.ParseRequest(body)
	runtime.ReadMemStats(&after)
	if err != nil || req.Items[0].Err == nil || !strings.HasPrefix(req.Items[0].Err.Description, "Mismatch") {
		t.Fatalf("got %v %+v", err, req)
	}
	if grown := after.TotalAlloc - before.TotalAlloc; grown > 4<<20 {
		t.Errorf("allocated %d bytes for a %d-byte request", grown, len(body))
	}
}

func TestParseRequestDeepNesting(t *testing.T) {
	const depth = 1 << 20
	deep := `{"request":[],"x":` + strings.Repeat("[", depth) + strings.Repeat("]", depth) + `}`
	if req, err := (ParseOptions{}).ParseRequest([]byte(deep)); err != nil || len(req.Items) != 0 {
		t.Errorf("balanced nesting: %v", err)
	}
	open := `{"request":[],"x":` + strings.Repeat(`{"a":[`, depth)
	if _, err := (ParseOptions{}).ParseRequest([]byte(open)); err == nil || err.Description != "JSON Parse Error: Invalid value." {
		t.Errorf("unclosed nesting: %v", err)
	}
}

func TestParseRequestInternsRepeatedStrings(t *testing.T) {
	one := `{"model_path":"model/","tensors":[{"tensor_name":"in","data_type":"FLOAT","tensor_shape":[1],"tensor_content":["1"]}]}`
	req, err := ParseOptions{}.ParseRequest([]byte(`{"request":[` + one + `,` + one + `]}`))
	if err != nil {
		t.Fatal(err)
	}
	a, b := req.Items[0], req.Items[1]
	if a.ModelPath != b.ModelPath || a.Inputs[0].Name != b.Inputs[0].Name {
		t.Fatal("different values")
	}
	if &a.Inputs[0].Data[0] == &b.Inputs[0].Data[0] {
		t.Error("items share a tensor buffer")
	}
}
