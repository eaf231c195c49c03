package oip

import (
	"bytes"
	"encoding/json"
	"math"
	"math/rand"
	"strconv"
	"testing"

	"github.com/groveml/grove/servables"
)

func TestAppendInferResponseGolden(t *testing.T) {
	out := tensorOf[float32]("output0", servables.Float32, []int64{3, 2}, 1, 1.1, 2, 2.1, 3, 3.1)
	logit := tensorOf[float64]("logit", servables.Float64, []int64{2}, 0.1, -1e-7)
	ids := tensorOf[int64]("ids", servables.Int64, []int64{1, 2}, math.MinInt64, 7)
	small := tensorOf[int8]("small", servables.Int8, []int64{2}, -128, 127)
	for _, tc := range []struct {
		name      string
		resp      InferResponse
		want      string
		headerLen int // 0: no binary data
	}{
		{
			"spec example",
			InferResponse{ModelName: "mymodel", ID: "42", Outputs: []servables.Tensor{out}},
			`{"model_name":"mymodel","id":"42","outputs":[{"name":"output0","datatype":"FP32","shape":[3,2],"data":[1,1.1,2,2.1,3,3.1]}]}`,
			0,
		},
		{
			"all members",
			InferResponse{ModelName: "m", ModelVersion: "3", ID: "a\"b", Parameters: Parameters{StringParam("s", "x"), IntParam("i", -1), BoolParam("b", true), FloatParam("f", 0.5), {Name: "u", Kind: ParamUint, Uint: math.MaxUint64}},
				Outputs: []servables.Tensor{logit, ids, small}},
			`{"model_name":"m","model_version":"3","id":"a\"b","parameters":{"s":"x","i":-1,"b":true,"f":0.5,"u":18446744073709551615},"outputs":[` +
				`{"name":"logit","datatype":"FP64","shape":[2],"data":[0.1,-1e-07]},` +
				`{"name":"ids","datatype":"INT64","shape":[1,2],"data":[-9223372036854775808,7]},` +
				`{"name":"small","datatype":"INT8","shape":[2],"data":[-128,127]}]}`,
			0,
		},
		{
			"requested order",
			InferResponse{ModelName: "m", Outputs: []servables.Tensor{logit, ids, small}, Requested: []RequestedOutput{{Name: "small"}, {Name: "logit"}}},
			`{"model_name":"m","outputs":[{"name":"small","datatype":"INT8","shape":[2],"data":[-128,127]},{"name":"logit","datatype":"FP64","shape":[2],"data":[0.1,-1e-07]}]}`,
			0,
		},
		{
			"binary example",
			InferResponse{ModelName: "mymodel", Outputs: []servables.Tensor{out}, Requested: []RequestedOutput{{Name: "output0", Binary: true}}},
			`{"model_name":"mymodel","outputs":[{"name":"output0","datatype":"FP32","shape":[3,2],"parameters":{"binary_data_size":24}}]}` + string(out.Data),
			len(`{"model_name":"mymodel","outputs":[{"name":"output0","datatype":"FP32","shape":[3,2],"parameters":{"binary_data_size":24}}]}`),
		},
		{
			"mixed binary",
			InferResponse{ModelName: "m", Outputs: []servables.Tensor{logit, ids, small}, Requested: []RequestedOutput{{Name: "small", Binary: true}, {Name: "ids"}, {Name: "logit", Binary: true}}},
			`{"model_name":"m","outputs":[{"name":"small","datatype":"INT8","shape":[2],"parameters":{"binary_data_size":2}},` +
				`{"name":"ids","datatype":"INT64","shape":[1,2],"data":[-9223372036854775808,7]},` +
				`{"name":"logit","datatype":"FP64","shape":[2],"parameters":{"binary_data_size":16}}]}` + string(small.Data) + string(logit.Data),
			len(`{"model_name":"m","outputs":[{"name":"small","datatype":"INT8","shape":[2],"parameters":{"binary_data_size":2}},` +
				`{"name":"ids","datatype":"INT64","shape":[1,2],"data":[-9223372036854775808,7]},` +
				`{"name":"logit","datatype":"FP64","shape":[2],"parameters":{"binary_data_size":16}}]}`),
		},
		{
			"all binary",
			InferResponse{ModelName: "m", Outputs: []servables.Tensor{small}, BinaryOutputs: true},
			`{"model_name":"m","outputs":[{"name":"small","datatype":"INT8","shape":[2],"parameters":{"binary_data_size":2}}]}` + "\x80\x7f",
			len(`{"model_name":"m","outputs":[{"name":"small","datatype":"INT8","shape":[2],"parameters":{"binary_data_size":2}}]}`),
		},
		{
			"no outputs",
			InferResponse{ModelName: "m"},
			`{"model_name":"m","outputs":[]}`,
			0,
		},
		{
			"non-finite literals",
			InferResponse{ModelName: "m", NonFiniteLiterals: true, Outputs: []servables.Tensor{
				tensorOf[float32]("f", servables.Float32, []int64{3}, float32(math.NaN()), float32(math.Inf(1)), float32(math.Inf(-1))),
				tensorOf[float64]("d", servables.Float64, []int64{2}, math.Inf(-1), 1)}},
			`{"model_name":"m","outputs":[{"name":"f","datatype":"FP32","shape":[3],"data":[NaN,Infinity,-Infinity]},{"name":"d","datatype":"FP64","shape":[2],"data":[-Infinity,1]}]}`,
			0,
		},
		{
			"scalar and floats",
			InferResponse{ModelName: "m", Outputs: []servables.Tensor{
				tensorOf[float32]("s", servables.Float32, []int64{}, 1e21),
				tensorOf[float32]("f", servables.Float32, []int64{6}, float32(math.Copysign(0, -1)), math.MaxFloat32, math.SmallestNonzeroFloat32, 100, 1e6, 123456.7)}},
			`{"model_name":"m","outputs":[{"name":"s","datatype":"FP32","shape":[],"data":[1e+21]},{"name":"f","datatype":"FP32","shape":[6],"data":[-0,3.4028235e+38,1e-45,100,1e+06,123456.7]}]}`,
			0,
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			prefix := []byte("prefix")
			got, h, err := AppendInferResponse(prefix, tc.resp)
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.HasPrefix(got, prefix) {
				t.Fatalf("dst prefix lost")
			}
			got = got[len(prefix):]
			if string(got) != tc.want {
				t.Errorf("got\n%q\nwant\n%q", got, tc.want)
			}
			if h != tc.headerLen {
				t.Errorf("headerLen %d, want %d", h, tc.headerLen)
			}
			jsonPart := got
			if h > 0 {
				jsonPart = got[:h]
			}
			if !tc.resp.NonFiniteLiterals && !json.Valid(jsonPart) {
				t.Errorf("invalid JSON: %s", jsonPart)
			}
		})
	}
}

func TestAppendInferResponseBoolAndUint8(t *testing.T) {
	m := tensorOf[bool]("m", servables.Bool, []int64{2, 2}, true, false, false, true)
	u := tensorOf[uint8]("u", servables.Uint8, []int64{3}, 0, 7, 255)
	got, h, err := AppendInferResponse(nil, InferResponse{ModelName: "m", Outputs: []servables.Tensor{m, u}})
	want := `{"model_name":"m","outputs":[{"name":"m","datatype":"BOOL","shape":[2,2],"data":[true,false,false,true]},` +
		`{"name":"u","datatype":"UINT8","shape":[3],"data":[0,7,255]}]}`
	if err != nil || h != 0 || string(got) != want {
		t.Errorf("JSON: %s, %d, %v\nwant %s", got, h, err, want)
	}
	got, h, err = AppendInferResponse(nil, InferResponse{ModelName: "m", Outputs: []servables.Tensor{m, u}, BinaryOutputs: true})
	head := `{"model_name":"m","outputs":[{"name":"m","datatype":"BOOL","shape":[2,2],"parameters":{"binary_data_size":4}},` +
		`{"name":"u","datatype":"UINT8","shape":[3],"parameters":{"binary_data_size":3}}]}`
	if err != nil || h != len(head) || string(got) != head+"\x01\x00\x00\x01\x00\x07\xff" {
		t.Errorf("binary: %q, %d, %v", got, h, err)
	}
}

func TestAppendInferResponseErrors(t *testing.T) {
	a := tensorOf[float32]("a", servables.Float32, []int64{2}, 1, float32(math.NaN()))
	b := tensorOf[float64]("b", servables.Float64, []int64{1}, math.Inf(-1))
	c := tensorOf[int32]("c", servables.Int32, []int64{1}, 1)
	for _, tc := range []struct {
		name   string
		resp   InferResponse
		status int
		want   string
	}{
		{"unknown output", InferResponse{ModelName: "pctr", Outputs: []servables.Tensor{a, c}, Requested: []RequestedOutput{{Name: "c"}, {Name: "nope"}}},
			400, `requested output "nope" is not an output of model "pctr"; its outputs are "a", "c"`},
		{"unknown output, no outputs", InferResponse{Requested: []RequestedOutput{{Name: "x"}}},
			400, `requested output "x" is not an output of the model, which produced no outputs`},
		{"nan", InferResponse{ModelName: "m", Outputs: []servables.Tensor{c, a}},
			500, `output "a" element 1 is NaN, which JSON cannot represent; request the output with the binary_data parameter to receive its raw FP32 values`},
		{"inf", InferResponse{ModelName: "m", Outputs: []servables.Tensor{b}},
			500, `output "b" element 0 is -Inf, which JSON cannot represent`},
		{"invalid tensor", InferResponse{Outputs: []servables.Tensor{{Name: "bad", DType: servables.Float32, Shape: []int64{2}, Data: make([]byte, 4)}}},
			500, `output "bad" is not a valid tensor: invalid tensor shape: 4 bytes of FLOAT do not fill shape [2] (2 elements)`},
		{"unknown dtype", InferResponse{Outputs: []servables.Tensor{{Name: "u", DType: servables.DType(99), Shape: []int64{1}, Data: make([]byte, 1)}}},
			500, `output "u" is not a valid tensor: unsupported data type DType(99)`},
		{"nan parameter", InferResponse{Parameters: Parameters{FloatParam("p", math.NaN())}},
			500, `response parameter "p" is NaN, which JSON cannot represent`},
		{"bad parameter kind", InferResponse{Parameters: Parameters{{Name: "p"}}},
			500, `response parameter "p" has no valid kind`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dst := []byte("keep")
			got, h, err := AppendInferResponse(dst, tc.resp)
			checkErr(t, nil, err, tc.status, tc.want)
			if string(got) != "keep" || h != 0 {
				t.Errorf("got %q, %d; want dst unchanged and 0", got, h)
			}
		})
	}
	// Binary outputs carry NaN and Inf fine.
	got, h, err := AppendInferResponse(nil, InferResponse{Outputs: []servables.Tensor{a, b}, BinaryOutputs: true})
	if err != nil || !bytes.Equal(got[h:], append(append([]byte{}, a.Data...), b.Data...)) {
		t.Errorf("binary NaN: %v", err)
	}
}

func TestSelectOutputs(t *testing.T) {
	a := tensorOf[int8]("a", servables.Int8, []int64{1}, 1)
	b := tensorOf[int8]("b", servables.Int8, []int64{1}, 2)
	all := []servables.Tensor{a, b}
	if got, err := SelectOutputs("m", all, nil); err != nil || len(got) != 2 {
		t.Errorf("nil selection: %v %v", got, err)
	}
	got, err := SelectOutputs("m", all, []RequestedOutput{{Name: "b"}, {Name: "a"}})
	if err != nil || len(got) != 2 || got[0].Name != "b" || got[1].Name != "a" {
		t.Errorf("selection: %v %v", got, err)
	}
	_, err = SelectOutputs("m", all, []RequestedOutput{{Name: "c"}})
	checkErr(t, nil, err, 400, `requested output "c" is not an output of model "m"; its outputs are "a", "b"`)
}

// randomTensor makes a tensor of dt with random values of every magnitude,
// all finite.
func randomTensor(r *rand.Rand, name string, dt servables.DType) servables.Tensor {
	rank := r.Intn(4)
	shape := make([]int64, rank)
	for i := range shape {
		shape[i] = int64(1 + r.Intn(4))
	}
	t, err := servables.NewTensor(name, dt, shape)
	if err != nil {
		panic(err)
	}
	r.Read(t.Data)
	switch dt {
	case servables.Float32:
		for i, v := range t.Float32s() {
			if math.IsNaN(float64(v)) || math.IsInf(float64(v), 0) {
				t.Float32s()[i] = float32(r.NormFloat64())
			}
		}
	case servables.Float64:
		for i, v := range t.Float64s() {
			if math.IsNaN(v) || math.IsInf(v, 0) {
				t.Float64s()[i] = r.NormFloat64() * 1e300
			}
		}
	}
	return t
}

// TestRoundTripEncodingJSON encodes random outputs and decodes them with
// encoding/json, comparing every value.
func TestRoundTripEncodingJSON(t *testing.T) {
	r := rand.New(rand.NewSource(1))
	dts := []servables.DType{servables.Float32, servables.Float64, servables.Int8, servables.Int16, servables.Int32, servables.Int64}
	for iter := 0; iter < 200; iter++ {
		var outs []servables.Tensor
		for i, dt := range dts {
			outs = append(outs, randomTensor(r, "out"+strconv.Itoa(i), dt))
		}
		resp := InferResponse{ModelName: "m\u2028é", ModelVersion: "v1", ID: "id\x01", Outputs: outs,
			Parameters: Parameters{FloatParam("f", r.NormFloat64()), IntParam("i", r.Int63())}}
		body, h, err := AppendInferResponse(nil, resp)
		if err != nil || h != 0 {
			t.Fatal(err, h)
		}
		var doc struct {
			ModelName    string                 `json:"model_name"`
			ModelVersion string                 `json:"model_version"`
			ID           string                 `json:"id"`
			Parameters   map[string]json.Number `json:"parameters"`
			Outputs      []struct {
				Name     string        `json:"name"`
				Datatype string        `json:"datatype"`
				Shape    []int64       `json:"shape"`
				Data     []json.Number `json:"data"`
			} `json:"outputs"`
		}
		dec := json.NewDecoder(bytes.NewReader(body))
		dec.UseNumber()
		dec.DisallowUnknownFields()
		if err := dec.Decode(&doc); err != nil {
			t.Fatalf("%v in %s", err, body)
		}
		if doc.ModelName != resp.ModelName || doc.ModelVersion != "v1" || doc.ID != resp.ID || len(doc.Outputs) != len(outs) {
			t.Fatalf("header mismatch: %+v", doc)
		}
		if f, _ := doc.Parameters["f"].Float64(); f != resp.Parameters[0].Float {
			t.Errorf("parameter f = %v, want %v", f, resp.Parameters[0].Float)
		}
		for i, o := range doc.Outputs {
			want := outs[i]
			name, _ := Datatype(want.DType)
			if o.Name != want.Name || o.Datatype != name || !sameShape(o.Shape, want.Shape) || len(o.Data) != want.Len() {
				t.Fatalf("output %d: %+v vs %+v", i, o, want)
			}
			for k, num := range o.Data {
				switch want.DType {
				case servables.Float32:
					// Read back at float32, as a client of an FP32 output should.
					f, err := strconv.ParseFloat(num.String(), 32)
					if err != nil || float32(f) != want.Float32s()[k] {
						t.Fatalf("FP32 %s reads back as %v, want %v", num, f, want.Float32s()[k])
					}
				case servables.Float64:
					f, err := num.Float64()
					if err != nil || f != want.Float64s()[k] {
						t.Fatalf("FP64 %s reads back as %v, want %v", num, f, want.Float64s()[k])
					}
				default:
					v, err := num.Int64()
					if err != nil || float64(v) != want.Float64At(k) {
						t.Fatalf("%v %s reads back as %v, want %v", want.DType, num, v, want.Float64At(k))
					}
				}
			}
		}
	}
}

func sameShape(a, b []int64) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// asRequest turns a response body into a request body: its outputs array
// is exactly an inputs array ($response_output has the members of
// $request_input, binary_data_size included), followed by the same binary
// data.
func asRequest(t *testing.T, body []byte, headerLen int) ([]byte, int) {
	t.Helper()
	jsonPart := body
	if headerLen > 0 {
		jsonPart = body[:headerLen]
	}
	var doc struct {
		Outputs json.RawMessage `json:"outputs"`
	}
	if err := json.Unmarshal(jsonPart, &doc); err != nil {
		t.Fatalf("%v in %s", err, jsonPart)
	}
	req := append([]byte(`{"inputs":`), doc.Outputs...)
	req = append(req, '}')
	if headerLen == 0 {
		return req, 0
	}
	h := len(req)
	return append(req, body[headerLen:]...), h
}

// TestRoundTripParser encodes random outputs, as JSON and as binary data,
// and parses them back as request inputs.
func TestRoundTripParser(t *testing.T) {
	r := rand.New(rand.NewSource(2))
	dts := []servables.DType{servables.Float32, servables.Float64, servables.Int8, servables.Int16, servables.Int32, servables.Int64}
	for iter := 0; iter < 300; iter++ {
		var outs []servables.Tensor
		var requested []RequestedOutput
		for i := 0; i < 1+r.Intn(5); i++ {
			name := "o" + strconv.Itoa(i)
			outs = append(outs, randomTensor(r, name, dts[r.Intn(len(dts))]))
			requested = append(requested, RequestedOutput{Name: name, Binary: r.Intn(2) == 0})
		}
		r.Shuffle(len(requested), func(i, j int) { requested[i], requested[j] = requested[j], requested[i] })
		body, h, err := AppendInferResponse(nil, InferResponse{ModelName: "m", Outputs: outs, Requested: requested})
		if err != nil {
			t.Fatal(err)
		}
		anyBinary := false
		for _, ro := range requested {
			anyBinary = anyBinary || ro.Binary
		}
		if anyBinary != (h > 0) {
			t.Fatalf("headerLen %d with binary %v", h, anyBinary)
		}
		reqBody, reqH := asRequest(t, body, h)
		req, err := ParseInferRequest(reqBody, reqH)
		if err != nil {
			t.Fatalf("%v in %q", err, reqBody)
		}
		for i, ro := range requested {
			var want servables.Tensor
			for _, o := range outs {
				if o.Name == ro.Name {
					want = o
				}
			}
			if !sameTensor(req.Inputs[i], want) {
				t.Fatalf("output %s (binary %v) comes back as %+v, want %+v", ro.Name, ro.Binary, req.Inputs[i], want)
			}
		}
	}
}

// TestBinaryBothDirections follows Triton's documented example: a binary
// request in, a binary response out.
func TestBinaryBothDirections(t *testing.T) {
	header := `{"model_name":"mymodel","inputs":[` +
		`{"name":"input0","shape":[2,2],"datatype":"INT32","parameters":{"binary_data_size":16}},` +
		`{"name":"input1","shape":[3],"datatype":"INT8","parameters":{"binary_data_size":3}}],` +
		`"outputs":[{"name":"output0","parameters":{"binary_data":true}}]}`
	body, h := binaryBody(header, le[int32](1, 2, 3, 4), le[int8](1, 0, 1))
	if len(body)-h != 19 {
		t.Fatalf("binary data is %d bytes", len(body)-h)
	}
	req := mustParse(t, string(body), h)
	if req.Inputs[0].Int32s()[3] != 4 || req.Inputs[1].Int8s()[2] != 1 {
		t.Fatalf("inputs %+v", req.Inputs)
	}
	output0 := tensorOf[float32]("output0", servables.Float32, []int64{3, 2}, 1, 1.1, 2, 2.1, 3, 3.1)
	other := tensorOf[float32]("other", servables.Float32, []int64{1}, 9)
	resp := req.Response("mymodel", "", []servables.Tensor{other, output0})
	out, oh, err := AppendInferResponse(nil, resp)
	if err != nil {
		t.Fatal(err)
	}
	wantJSON := `{"model_name":"mymodel","outputs":[{"name":"output0","datatype":"FP32","shape":[3,2],"parameters":{"binary_data_size":24}}]}`
	if oh != len(wantJSON) || string(out[:oh]) != wantJSON || len(out) != oh+24 || !bytes.Equal(out[oh:], output0.Data) {
		t.Errorf("response %q (header %d)", out, oh)
	}
}

func TestResponseBinaryPrecedence(t *testing.T) {
	long := `{"name":"x","shape":[1],"datatype":"FP32","data":[1]}`
	a := tensorOf[int8]("a", servables.Int8, []int64{1}, 1)
	b := tensorOf[int8]("b", servables.Int8, []int64{1}, 2)
	for _, tc := range []struct {
		name, body string
		want       string
	}{
		{"default json", `{"inputs":[` + long + `]}`, `{"model_name":"m","outputs":[{"name":"a","datatype":"INT8","shape":[1],"data":[1]},{"name":"b","datatype":"INT8","shape":[1],"data":[2]}]}`},
		{"binary_data_output", `{"parameters":{"binary_data_output":true},"inputs":[` + long + `]}`,
			`{"model_name":"m","outputs":[{"name":"a","datatype":"INT8","shape":[1],"parameters":{"binary_data_size":1}},{"name":"b","datatype":"INT8","shape":[1],"parameters":{"binary_data_size":1}}]}` + "\x01\x02"},
		{"per-output override", `{"parameters":{"binary_data_output":true},"inputs":[` + long + `],"outputs":[{"name":"b","parameters":{"binary_data":false}},{"name":"a"}]}`,
			`{"model_name":"m","outputs":[{"name":"b","datatype":"INT8","shape":[1],"data":[2]},{"name":"a","datatype":"INT8","shape":[1],"parameters":{"binary_data_size":1}}]}` + "\x01"},
		{"per-output binary", `{"inputs":[` + long + `],"outputs":[{"name":"a","parameters":{"binary_data":true}},{"name":"b"}]}`,
			`{"model_name":"m","outputs":[{"name":"a","datatype":"INT8","shape":[1],"parameters":{"binary_data_size":1}},{"name":"b","datatype":"INT8","shape":[1],"data":[2]}]}` + "\x01"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			req := mustParse(t, tc.body, 0)
			out, _, err := AppendInferResponse(nil, req.Response("m", "", []servables.Tensor{a, b}))
			if err != nil || string(out) != tc.want {
				t.Errorf("got %q, %v\nwant %q", out, err, tc.want)
			}
		})
	}
}

func TestSmallDocuments(t *testing.T) {
	for _, tc := range []struct {
		name string
		got  []byte
		want string
	}{
		{"server metadata", AppendServerMetadata(nil, ServerMetadata{Name: "grove", Version: "1.2.3", Extensions: []string{ExtensionBinaryTensorData}}),
			`{"name":"grove","version":"1.2.3","extensions":["binary_tensor_data"]}`},
		{"server metadata, no extensions", AppendServerMetadata(nil, ServerMetadata{Name: "grove"}),
			`{"name":"grove","version":"","extensions":[]}`},
		{"model metadata", AppendModelMetadata(nil, ModelMetadata{
			Name: "pctr", Versions: []string{"1", "2"}, Platform: Platform("onnx"),
			Inputs:  []servables.TensorSpec{{Name: "x", DType: servables.Float32, Shape: []int64{-1, 64}}},
			Outputs: []servables.TensorSpec{{Name: "y", DType: servables.Float64, Shape: []int64{-1, 1}}, {Name: "z", DType: servables.Int64, Shape: []int64{}}},
		}), `{"name":"pctr","versions":["1","2"],"platform":"onnxruntime_onnx","inputs":[{"name":"x","datatype":"FP32","shape":[-1,64]}],"outputs":[{"name":"y","datatype":"FP64","shape":[-1,1]},{"name":"z","datatype":"INT64","shape":[]}]}`},
		{"model metadata, unknown types", AppendModelMetadata(nil, ModelMetadata{
			Name: "ts", Platform: Platform("torchscript"),
			Inputs:  []servables.TensorSpec{{Name: "input"}},
			Outputs: []servables.TensorSpec{{Name: "output_0"}},
		}), `{"name":"ts","platform":"pytorch_libtorch","inputs":[{"name":"input"}],"outputs":[{"name":"output_0"}]}`},
		{"model metadata, learned signature", AppendModelMetadata(nil, ModelMetadata{
			Name: "sub", Platform: Platform("torchscript"), Signature: servables.SignatureWarmUp,
			Inputs:  []servables.TensorSpec{{Name: "a", DType: servables.Float32, Shape: []int64{-1, 2}}},
			Outputs: []servables.TensorSpec{{Name: "output_0", DType: servables.Float32, Shape: []int64{-1, 2}}},
		}), `{"name":"sub","platform":"pytorch_libtorch","inputs":[{"name":"a","datatype":"FP32","shape":[-1,2]}],"outputs":[{"name":"output_0","datatype":"FP32","shape":[-1,2]}],"parameters":{"signature":"warm_up"}}`},
		{"model metadata, runtime parameters", AppendModelMetadata(nil, ModelMetadata{
			Name: "gbt", Platform: Platform("xgboost"), Signature: servables.SignatureRuntime,
			Parameters: map[string]string{"objective": "binary:logistic", "feature_names": `["a","b"]`, "signature": "ignored"},
		}), `{"name":"gbt","platform":"xgboost","inputs":[],"outputs":[],"parameters":{"signature":"runtime","feature_names":"[\"a\",\"b\"]","objective":"binary:logistic"}}`},
		{"model metadata, parameters alone", AppendModelMetadata(nil, ModelMetadata{
			Name: "gbt", Platform: Platform("xgboost"), Parameters: map[string]string{"num_trees": "3"},
		}), `{"name":"gbt","platform":"xgboost","inputs":[],"outputs":[],"parameters":{"num_trees":"3"}}`},
		{"model metadata, empty", AppendModelMetadata(nil, ModelMetadata{Name: "e", Platform: Platform("faulty")}),
			`{"name":"e","platform":"faulty","inputs":[],"outputs":[]}`},
		{"server live", AppendServerLive(nil, true), `{"live":true}`},
		{"server ready", AppendServerReady(nil, false), `{"ready":false}`},
		{"model ready", AppendModelReady(nil, "pctr", true), `{"name":"pctr","ready":true}`},
		{"error", AppendError(nil, "input \"x\": bad\n\x00\u00e9\xff"), `{"error":"input \"x\": bad\n\u0000é` + "\uFFFD" + `"}`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if string(tc.got) != tc.want {
				t.Errorf("got\n%s\nwant\n%s", tc.got, tc.want)
			}
			if !json.Valid(tc.got) {
				t.Errorf("invalid JSON")
			}
		})
	}
}

// TestErrorBodies checks that every parse error message makes a valid
// error document.
func TestErrorBodies(t *testing.T) {
	for _, body := range []string{"{\"inputs\":[{\"name\":\"\xff\"}]}", `{"inputs":[{"name":"a\u0000b","shape":[1],"datatype":"X","data":[1]}]}`, "\x00"} {
		_, err := ParseInferRequest([]byte(body), 0)
		if err == nil {
			t.Fatalf("%q parsed", body)
		}
		if doc := AppendError(nil, err.Error()); !json.Valid(doc) {
			t.Errorf("invalid error document %q", doc)
		}
	}
}
