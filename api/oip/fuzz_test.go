package oip

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/groveml/grove/servables"
)

// fuzzSeed is one FuzzParseInferRequest input: a JSON header, binary data,
// and whether the binary data follows the header as the binary tensor
// extension has it (headerLen = len(header)) or the body is plain JSON
// (headerLen 0, body = header + tail).
type fuzzSeed struct {
	header, tail string
	binary       bool
}

func bin[T float32 | float64 | int8 | int16 | int32 | int64 | uint8 | bool](vals ...T) string {
	var b bytes.Buffer
	for _, v := range vals {
		binary.Write(&b, binary.LittleEndian, v)
	}
	return b.String()
}

// fuzzSeeds start FuzzParseInferRequest; the same inputs are checked in
// under testdata/fuzz/FuzzParseInferRequest, written by
// OIP_WRITE_CORPUS=1 go test -run TestWriteFuzzCorpus.
var fuzzSeeds = []fuzzSeed{
	{`{"id":"42","inputs":[{"name":"input0","shape":[2,2],"datatype":"INT32","data":[1,2,3,4]},{"name":"input1","shape":[3],"datatype":"FP32","data":[1.5,-2e-3,7]}],"outputs":[{"name":"output0"}]}`, "", false},
	{`{"model_name":"mymodel","inputs":[{"name":"input0","shape":[2,2],"datatype":"INT32","parameters":{"binary_data_size":16}},{"name":"input1","shape":[3],"datatype":"INT8","parameters":{"binary_data_size":3}}],"outputs":[{"name":"output0","parameters":{"binary_data":true}}]}`,
		bin[int32](1, 2, 3, 4) + bin[int8](1, 0, 1), true},
	{`{"inputs":[{"name":"x","shape":[2,1,2],"datatype":"FP64","data":[[[1e308,-0.0]],[[NaN,-Infinity]]]}]}`, "", false},
	{`{"parameters":{"binary_data_output":true,"priority":1,"s":"v","f":0.5,"u":18446744073709551615},"inputs":[{"data":[-128,127],"datatype":"INT8","name":"a","shape":[2],"parameters":{"k":false}},{"name":"b","shape":[],"datatype":"INT64","data":[-9223372036854775808]}],"outputs":[{"name":"o","parameters":{"binary_data":false}},{"name":"p"}]}`, "", false},
	{`{"inputs":[{"name":"f","shape":[2],"datatype":"FP32","parameters":{"binary_data_size":8}},{"name":"j","shape":[1],"datatype":"INT16","data":[32767]},{"name":"d","shape":[1],"datatype":"FP64","parameters":{"binary_data_size":8}}]}`,
		bin[float32](float32(math.NaN()), 1) + bin[float64](math.Inf(-1)), true},
	{`{"inputs":[{"name":"x","shape":[2,2],"datatype":"FP32","data":[[1,2],[3]]}]}`, "", false},
	{`{"inputs":[{"name":"x","shape":[3],"datatype":"INT8","data":[1,2,300]}]}`, "", false},
	{`{"inputs":[{"name":"x","shape":[1],"datatype":"BOOL","data":[true]}]}`, "", false},
	{`{"inputs":[{"name":"x","shape":[-1],"datatype":"FP32","data":[1]},{"name":"x"}]}`, "", false},
	{`{"inputs":[{"name":"x","shape":[2],"datatype":"FP32","parameters":{"binary_data_size":8}}]}`, "\x00\x00\x80?", true},
	{`{"inputs":[{"name":"x","shape":[1],"datatype":"FP32","data":[1]}]}`, "trailing", false},
	{`{"inputs":[{"n\u0061me":"\ud83d\ude00","shape":[1],"datatype":"FP\u00332","data":[1e-45]}],"outputs":[{"name":"y","parameters":{"classification":2}}]}`, "", false},
	{`{"inputs":[{"name":"x","shape":[65536,65536],"datatype":"FP64","data":[1,2]}],"x":[{"y":[null,true,"s"]}]}`, "", false},
	{"{\"inputs\":[{\"name\":\"\xff\"}]}", "", false},
	{`{"inputs":[{"name":"x","shape":[1],"datatype":"INT32","data":[1.0]}]`, "", false},
	{`{"inputs":[{"name":"m","shape":[2,2],"datatype":"BOOL","data":[[true,false],[false,true]]},{"name":"u","shape":[3],"datatype":"UINT8","data":[0,7,255]}]}`, "", false},
	{`{"inputs":[{"name":"m","shape":[3],"datatype":"BOOL","parameters":{"binary_data_size":3}},{"name":"u","shape":[2],"datatype":"UINT8","parameters":{"binary_data_size":2}}],"parameters":{"binary_data_output":true}}`,
		bin(true, false, true) + bin[uint8](255, 16), true},
	{`{"inputs":[{"name":"m","shape":[2],"datatype":"BOOL","parameters":{"binary_data_size":2}}]}`, "\x01\x02", true},
	{`{"inputs":[{"name":"u","shape":[2],"datatype":"UINT8","data":[1,256]},{"name":"m","shape":[1],"datatype":"BOOL","data":[1]}]}`, "", false},
	{`{"inputs":[{"name":"s","shape":[2,2],"datatype":"BYTES","data":[["human1","human"],["\u00e9\n",""]]}]}`, "", false},
	{`{"inputs":[{"name":"s","shape":[2],"datatype":"BYTES","parameters":{"binary_data_size":12}}],"parameters":{"binary_data_output":true}}`, "\x03\x00\x00\x00a\x00b\x01\x00\x00\x00\xff", true},
}

func FuzzParseInferRequest(f *testing.F) {
	for _, s := range fuzzSeeds {
		f.Add([]byte(s.header), []byte(s.tail), s.binary)
	}
	f.Fuzz(func(t *testing.T, header, tail []byte, binaryTail bool) {
		body := append(append([]byte{}, header...), tail...)
		headerLen := 0
		if binaryTail {
			headerLen = len(header)
		}
		req, err := ParseInferRequest(body, headerLen)
		if err != nil {
			var e *Error
			if !errors.As(err, &e) || e.Status != 400 || e.Msg == "" || req != nil {
				t.Fatalf("bad error %T %v (request %v)", err, err, req)
			}
			if doc := AppendError(nil, e.Msg); !json.Valid(doc) {
				t.Fatalf("invalid error document %q", doc)
			}
			return
		}
		checkRequest(t, req)
		// The pooled parser keeps nothing between calls.
		again, err := ParseInferRequest(body, headerLen)
		if err != nil || !sameRequest(req, again) {
			t.Fatalf("parsing twice differs: %v\n%+v\n%+v", err, req, again)
		}
		roundTrip(t, req.Inputs)
	})
}

// checkRequest checks the invariants of an accepted request.
func checkRequest(t *testing.T, req *InferRequest) {
	t.Helper()
	if len(req.Inputs) == 0 {
		t.Fatalf("accepted without inputs")
	}
	names := map[string]bool{}
	for i, in := range req.Inputs {
		if err := in.Validate(); err != nil {
			t.Fatalf("input %d: %v", i, err)
		}
		if _, ok := Datatype(in.DType); !ok {
			t.Fatalf("input %d has DType %v", i, in.DType)
		}
		if in.Name == "" || names[in.Name] {
			t.Fatalf("input %d: empty or repeated name %q", i, in.Name)
		}
		names[in.Name] = true
	}
	if req.InputParameters != nil && len(req.InputParameters) != len(req.Inputs) {
		t.Fatalf("%d input parameters for %d inputs", len(req.InputParameters), len(req.Inputs))
	}
	checkParams := func(ps Parameters) {
		seen := map[string]bool{}
		for _, p := range ps {
			if seen[p.Name] || p.Kind < ParamString || p.Kind > ParamFloat {
				t.Fatalf("bad parameter %+v in %+v", p, ps)
			}
			seen[p.Name] = true
		}
	}
	checkParams(req.Parameters)
	for _, ps := range req.InputParameters {
		checkParams(ps)
	}
	outs := map[string]bool{}
	for _, o := range req.Outputs {
		if o.Name == "" || outs[o.Name] {
			t.Fatalf("empty or repeated output %q", o.Name)
		}
		outs[o.Name] = true
		checkParams(o.Parameters)
	}
}

func sameRequest(a, b *InferRequest) bool {
	if len(a.Inputs) != len(b.Inputs) {
		return false
	}
	for i := range a.Inputs {
		if !sameTensor(a.Inputs[i], b.Inputs[i]) {
			return false
		}
	}
	ca, cb := *a, *b
	ca.Inputs, cb.Inputs = nil, nil
	return reflect.DeepEqual(ca, cb)
}

// roundTrip writes inputs as response outputs, JSON and binary, and parses
// the response's outputs back as request inputs.
func roundTrip(t *testing.T, inputs []servables.Tensor) {
	t.Helper()
	for _, binaryOut := range []bool{false, true} {
		resp := InferResponse{ModelName: "m", Outputs: inputs, BinaryOutputs: binaryOut, NonFiniteLiterals: true}
		body, h, err := AppendInferResponse(nil, resp)
		if err != nil {
			if e, ok := err.(*Error); ok && !binaryOut && e.Status == 500 && strings.Contains(e.Msg, "is not valid UTF-8") {
				continue // BYTES that JSON strings cannot carry: binary only
			}
			t.Fatalf("encoding accepted inputs: %v", err)
		}
		// Strict JSON unless a value is not finite.
		strict := resp
		strict.NonFiniteLiterals = false
		if sbody, sh, serr := AppendInferResponse(nil, strict); serr == nil {
			jsonPart := sbody
			if sh > 0 {
				jsonPart = sbody[:sh]
			}
			if !json.Valid(jsonPart) {
				t.Fatalf("invalid JSON response %q", jsonPart)
			}
		} else if e, ok := serr.(*Error); !ok || e.Status != 500 || binaryOut {
			t.Fatalf("strict encoding: %v", serr)
		}
		const prefix = `{"model_name":"m","outputs":`
		if !bytes.HasPrefix(body, []byte(prefix)) {
			t.Fatalf("response %q", body)
		}
		reqBody := append([]byte(`{"inputs":`), body[len(prefix):]...)
		reqH := 0
		if h > 0 {
			reqH = h - len(prefix) + len(`{"inputs":`)
		}
		req, err := ParseInferRequest(reqBody, reqH)
		if err != nil {
			t.Fatalf("response does not parse back (binary %v): %v\n%q", binaryOut, err, reqBody)
		}
		for i := range inputs {
			if !sameValues(req.Inputs[i], inputs[i]) {
				t.Fatalf("binary %v: input %d comes back as %+v, want %+v", binaryOut, i, req.Inputs[i], inputs[i])
			}
		}
	}
}

// sameValues compares tensors bit for bit, except that any NaN equals any
// NaN (JSON's NaN literal has no payload).
func sameValues(a, b servables.Tensor) bool {
	if a.Name != b.Name || a.DType != b.DType || !sameShape(a.Shape, b.Shape) || len(a.Data) != len(b.Data) {
		return false
	}
	if bytes.Equal(a.Data, b.Data) {
		return true
	}
	for i := 0; i < a.Len(); i++ {
		x, y := a.Float64At(i), b.Float64At(i)
		switch a.DType {
		case servables.Float32:
			if math.Float32bits(a.Float32s()[i]) == math.Float32bits(b.Float32s()[i]) {
				continue
			}
		case servables.Float64:
			if math.Float64bits(x) == math.Float64bits(y) {
				continue
			}
		default:
			if x == y {
				continue
			}
		}
		if !(math.IsNaN(x) && math.IsNaN(y)) {
			return false
		}
	}
	return true
}

// TestWriteFuzzCorpus writes fuzzSeeds to the seed corpus directory, in
// the "go test fuzz v1" format, when OIP_WRITE_CORPUS is set.
func TestWriteFuzzCorpus(t *testing.T) {
	if os.Getenv("OIP_WRITE_CORPUS") == "" {
		t.Skip("set OIP_WRITE_CORPUS=1 to rewrite testdata/fuzz/FuzzParseInferRequest")
	}
	dir := filepath.Join("testdata", "fuzz", "FuzzParseInferRequest")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	for i, s := range fuzzSeeds {
		content := fmt.Sprintf("go test fuzz v1\n[]byte(%q)\n[]byte(%q)\nbool(%v)\n", s.header, s.tail, s.binary)
		if err := os.WriteFile(filepath.Join(dir, fmt.Sprintf("seed-%02d", i)), []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}
