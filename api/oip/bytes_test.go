package oip

import (
	"bytes"
	"encoding/json"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/groveml/grove/api/oip/oippb"
	"github.com/groveml/grove/servables"
)

// frame writes elems in the BYTES binary form: 4-byte little-endian length + bytes.
func frame(elems ...string) string {
	var b []byte
	for _, e := range elems {
		b = servables.AppendStringElement(b, e)
	}
	return string(b)
}

func strs(t *testing.T, tn servables.Tensor) []string {
	t.Helper()
	s, err := tn.Strings()
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func TestBYTESInputsFromJSONStrings(t *testing.T) {
	for _, tc := range []struct {
		name, input string
		want        []string
	}{
		{"flat", `{"name":"s","shape":[2],"datatype":"BYTES","data":["human1","human"]}`, []string{"human1", "human"}},
		{"nested", `{"name":"s","shape":[2,2],"datatype":"BYTES","data":[["a","b"],["",""]]}`, []string{"a", "b", "", ""}},
		{"escapes and unicode", `{"name":"s","shape":[3],"datatype":"BYTES","data":["q\"\\\n","\u00e9t\u00e9 \ud83d\ude00","naïve"]}`, []string{"q\"\\\n", "été 😀", "naïve"}},
		{"data before datatype", `{"name":"s","data":["x","y"],"shape":[1,2],"datatype":"BYTES"}`, []string{"x", "y"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			req := mustParse(t, in(tc.input), 0)
			if got := strs(t, req.Inputs[0]); !slices.Equal(got, tc.want) || req.Inputs[0].DType != servables.Bytes {
				t.Fatalf("elements %q (%v), want %q", got, req.Inputs[0].DType, tc.want)
			}
		})
	}
}

func TestBYTESInputErrorsNameTheInputAndElement(t *testing.T) {
	header := func(size int) string {
		return in(`{"name":"s","shape":[2],"datatype":"BYTES","parameters":{"binary_data_size":` + strconv.Itoa(size) + `}}`)
	}
	for _, tc := range []struct {
		name      string
		body      string
		headerLen int
		want      string
	}{
		{"number", in(`{"name":"s","shape":[2],"datatype":"BYTES","data":["a",1]}`), 0, `input "s": data[1] is a number; BYTES data must be JSON strings`},
		{"too few", in(`{"name":"s","shape":[3],"datatype":"BYTES","data":["a","b"]}`), 0, `input "s": data has 2 elements, but shape [3] needs 3`},
		{"too many nested", in(`{"name":"s","shape":[1,1],"datatype":"BYTES","data":[["a","b"]]}`), 0, `input "s": data[0] has more than 1 element, the size of dimension 1 of shape [1,1]`},
		{"binary length past the end", header(9) + "\x09\x00\x00\x00abcde", len(header(9)), `input "s": its 9 bytes of binary data are not 2 elements of shape [2], each a 4-byte little-endian length and that many bytes: BYTES element 0 at byte 0 has length 9, but only 5 bytes follow it`},
		{"binary one element short", header(5) + frame("a"), len(header(5)), `BYTES data holds 1 element(s), the shape needs 2`},
		{"binary partial length", header(7) + frame("a") + "\x01\x00", len(header(7)), `BYTES element 1 at byte 5: 2 bytes left, too few for its 4-byte length`},
		{"binary bytes left over", header(11) + frame("a", "b") + "x", len(header(11)), `BYTES data has 1 bytes after its 2 elements`},
		{"binary size past the body", header(20) + frame("a", "b"), len(header(20)), `binary_data_size is 20 bytes, but only 10 bytes of binary data are left after the JSON`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			req, err := ParseInferRequest([]byte(tc.body), tc.headerLen)
			checkErr(t, req, err, 400, tc.want)
		})
	}
}

func TestBYTESBinaryInputIsTheFramedElements(t *testing.T) {
	header := in(`{"name":"s","shape":[3],"datatype":"BYTES","parameters":{"binary_data_size":19}},{"name":"f","shape":[1],"datatype":"FP32","data":[2]}`)
	body := header + frame("a\x00b", "", "\xff\xfe\x00!")
	req := mustParse(t, body, len(header))
	if got := strs(t, req.Inputs[0]); !slices.Equal(got, []string{"a\x00b", "", "\xff\xfe\x00!"}) {
		t.Fatalf("elements %q", got)
	}
}

func TestBYTESOutputsAsJSONStringsAndBinary(t *testing.T) {
	out, _ := servables.NewStringTensor("side", []int64{2, 1}, []string{"friend", "foe \"x\"\n"})
	body, h, err := AppendInferResponse(nil, InferResponse{ModelName: "m", Outputs: []servables.Tensor{out}})
	if err != nil || h != 0 {
		t.Fatal(err, h)
	}
	want := `{"model_name":"m","outputs":[{"name":"side","datatype":"BYTES","shape":[2,1],"data":["friend","foe \"x\"\n"]}]}`
	if string(body) != want {
		t.Fatalf("JSON response\n%s\nwant\n%s", body, want)
	}
	body, h, err = AppendInferResponse(nil, InferResponse{ModelName: "m", Outputs: []servables.Tensor{out}, BinaryOutputs: true})
	if err != nil {
		t.Fatal(err)
	}
	if tail := string(body[h:]); tail != frame("friend", "foe \"x\"\n") || !strings.Contains(string(body[:h]), `"datatype":"BYTES","shape":[2,1],"parameters":{"binary_data_size":22}`) {
		t.Fatalf("binary response %q | %q", body[:h], tail)
	}
	// Bytes JSON cannot carry: a 500 that says to ask for binary data.
	raw, _ := servables.NewStringTensor("b", []int64{1}, []string{"\xff"})
	_, _, err = AppendInferResponse(nil, InferResponse{ModelName: "m", Outputs: []servables.Tensor{raw}})
	if e, ok := err.(*Error); !ok || e.Status != 500 || !strings.Contains(e.Msg, `output "b" element 0 is not valid UTF-8, which a JSON string cannot carry; request the output with the binary_data parameter`) {
		t.Fatalf("non-UTF-8 element in JSON: %v", err)
	}
	if body, _, err := AppendInferResponse(nil, InferResponse{ModelName: "m", Outputs: []servables.Tensor{raw}, BinaryOutputs: true}); err != nil || !bytes.HasSuffix(body, []byte(frame("\xff"))) {
		t.Fatalf("non-UTF-8 element in binary: %v %q", err, body)
	}
}

func TestBYTESOverGRPC(t *testing.T) {
	shape := []int64{2}
	typed := &oippb.ModelInferRequest{Inputs: []*oippb.ModelInferRequest_InferInputTensor{{Name: "s", Datatype: "BYTES", Shape: shape,
		Contents: &oippb.InferTensorContents{BytesContents: [][]byte{[]byte("human"), []byte("a\x00b")}}}}}
	raw := &oippb.ModelInferRequest{Inputs: []*oippb.ModelInferRequest_InferInputTensor{{Name: "s", Datatype: "BYTES", Shape: shape}},
		RawInputContents: [][]byte{[]byte(frame("human", "a\x00b"))}}
	for name, req := range map[string]*oippb.ModelInferRequest{"bytes_contents": typed, "raw_input_contents": raw} {
		got, err := inferInputs(req)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if s := strs(t, got[0]); !slices.Equal(s, []string{"human", "a\x00b"}) {
			t.Fatalf("%s: elements %q", name, s)
		}
	}
	for _, tc := range []struct {
		req  *oippb.ModelInferRequest
		want string
	}{
		{&oippb.ModelInferRequest{Inputs: []*oippb.ModelInferRequest_InferInputTensor{{Name: "s", Datatype: "BYTES", Shape: shape,
			Contents: &oippb.InferTensorContents{BytesContents: [][]byte{[]byte("x")}}}}}, "input 's': 1 values in bytes_contents, expected 2 for shape [2]"},
		{&oippb.ModelInferRequest{Inputs: []*oippb.ModelInferRequest_InferInputTensor{{Name: "s", Datatype: "BYTES", Shape: shape}},
			RawInputContents: [][]byte{[]byte(frame("x") + "\x07\x00\x00\x00ab")}}, "input 's': raw_input_contents of BYTES must be 2 elements (shape [2]), each a 4-byte little-endian length and that many bytes: BYTES element 1 at byte 5 has length 7, but only 2 bytes follow it"},
	} {
		if _, err := inferInputs(tc.req); err == nil || err.Error() != tc.want {
			t.Errorf("inferInputs = %v, want %q", err, tc.want)
		}
	}
}

// FuzzBytesBinary feeds arbitrary bytes as the binary data of a BYTES input
// of n elements, over REST (the binary tensor extension) and gRPC
// (raw_input_contents): both must agree, never panic, and an accepted input
// must hold exactly n elements whose binary form is the data sent.
func FuzzBytesBinary(f *testing.F) {
	f.Add(uint8(2), []byte(frame("human1", "human")))
	f.Add(uint8(1), []byte(frame("")))
	f.Add(uint8(3), []byte(frame("a\x00", "\xff", "")))
	f.Add(uint8(1), []byte{0xff, 0xff, 0xff, 0xff, 'a'})
	f.Add(uint8(2), []byte(frame("a")+"\x01\x00"))
	f.Add(uint8(1), []byte(frame("a")+"x"))
	f.Add(uint8(0), []byte{})
	f.Fuzz(func(t *testing.T, n uint8, data []byte) {
		header := in(`{"name":"s","shape":[` + strconv.Itoa(int(n)) + `],"datatype":"BYTES","parameters":{"binary_data_size":` + strconv.Itoa(len(data)) + `}}`)
		req, err := ParseInferRequest(append([]byte(header), data...), len(header))
		g, gerr := inferInputs(&oippb.ModelInferRequest{Inputs: []*oippb.ModelInferRequest_InferInputTensor{{Name: "s", Datatype: "BYTES", Shape: []int64{int64(n)}}},
			RawInputContents: [][]byte{data}})
		if (err == nil) != (gerr == nil) {
			t.Fatalf("REST says %v, gRPC says %v", err, gerr)
		}
		if err != nil {
			if e, ok := err.(*Error); !ok || e.Status != 400 || !json.Valid(AppendError(nil, e.Msg)) {
				t.Fatalf("bad error %v", err)
			}
			return
		}
		for _, tn := range []servables.Tensor{req.Inputs[0], g[0]} {
			elems, err := tn.BytesElements()
			if err != nil || len(elems) != int(n) {
				t.Fatalf("accepted %d elements, %v; want %d", len(elems), err, n)
			}
			var again []byte
			for _, e := range elems {
				again = servables.AppendBytesElement(again, e)
			}
			if !bytes.Equal(again, data) {
				t.Fatalf("elements re-framed %q, sent %q", again, data)
			}
		}
		roundTrip(t, req.Inputs)
	})
}
