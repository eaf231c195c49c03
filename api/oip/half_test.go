package oip

import (
	"context"
	"fmt"
	"net/http/httptest"
	"strings"
	"testing"

	"google.golang.org/grpc/codes"
	grpcstatus "google.golang.org/grpc/status"

	"github.com/groveml/grove/actors"
	"github.com/groveml/grove/api/oip/oippb"
	"github.com/groveml/grove/servables"
	"github.com/groveml/grove/transport/httpserver"
)

func TestFP16AndBF16DataAreJSONNumbersRoundedToNearestEven(t *testing.T) {
	for _, c := range []struct {
		dt   string
		data string
		want []uint16
	}{
		{"FP16", `[1, 0.1, 65504, 65519, 1e-8, -0, -2.5e0]`, []uint16{0x3c00, 0x2e66, 0x7bff, 0x7bff, 0x0000, 0x8000, 0xc100}},
		{"FP16", `[NaN, Infinity, -Infinity]`, []uint16{0x7e00, 0x7c00, 0xfc00}},
		// 1 + 2^-11 is halfway between 1 and the next FP16: ties to even;
		// a literal just off the tie, which a float64 cannot tell from it,
		// goes to its side.
		{"FP16", `[1.00048828125, 1.000488281250000000000001, 1.000488281249999999999999, -1.000488281250000000000001]`, []uint16{0x3c00, 0x3c01, 0x3c00, 0xbc01}},
		{"FP16", `[1.00146484375, 1.001464843749999999999999]`, []uint16{0x3c02, 0x3c01}}, // halfway, odd below: up
		{"BF16", `[1, 0.1, -2.5, 1.00390625, 1.003906250000000000001, 3.3895313892515355e38]`, []uint16{0x3f80, 0x3dcd, 0xc020, 0x3f80, 0x3f81, 0x7f7f}},
	} {
		req := mustParse(t, in(`{"name":"x","datatype":"`+c.dt+`","shape":[`+fmt.Sprint(len(c.want))+`],"data":`+c.data+`}`), 0)
		x := req.Inputs[0]
		if want := map[string]servables.DType{"FP16": servables.Float16, "BF16": servables.BFloat16}[c.dt]; x.DType != want {
			t.Errorf("%s: DType %v", c.dt, x.DType)
		}
		if got := x.Uint16s(); fmt.Sprintf("%#04x", got) != fmt.Sprintf("%#04x", c.want) {
			t.Errorf("%s %s: %#04x, want %#04x", c.dt, c.data, got, c.want)
		}
	}
	for _, c := range []struct{ dt, data, want string }{
		{"FP16", `[65520]`, `input "x": data[0] = 65520 is out of range for FP16`},
		{"FP16", `[1, -1e6]`, `input "x": data[1] = -1e6 is out of range for FP16`},
		{"BF16", `[3.4e38]`, `input "x": data[0] = 3.4e38 is out of range for BF16`},
		{"FP16", `[1e400]`, `input "x": data[0] = 1e400 is out of range for FP16`},
		{"FP16", `["1"]`, `input "x": data[0] is a string; FP16 data must be JSON numbers`},
	} {
		_, err := ParseInferRequest([]byte(in(`{"name":"x","datatype":"`+c.dt+`","shape":[`+fmt.Sprint(strings.Count(c.data, ",")+1)+`],"data":`+c.data+`}`)), 0)
		checkErr(t, nil, err, 400, c.want)
	}
}

// A literal just below the overflow threshold (65520 for FP16, halfway
// from the largest finite value to the next power of two) rounds to the
// largest finite value, though its nearest float64 is the threshold itself.
func TestFP16AndBF16LiteralJustBelowOverflowIsInRange(t *testing.T) {
	for _, c := range []struct {
		dt, data string
		want     []uint16
	}{
		{"FP16", `[65519.99999999999999999999, -65519.999999999999]`, []uint16{0x7bff, 0xfbff}},
		{"BF16", `[339617752923046005526922703901628039167.999]`, []uint16{0x7f7f}},
	} {
		req, err := ParseInferRequest([]byte(in(`{"name":"x","datatype":"`+c.dt+`","shape":[`+fmt.Sprint(len(c.want))+`],"data":`+c.data+`}`)), 0)
		if err != nil {
			t.Errorf("%s %s: %v", c.dt, c.data, err)
			continue
		}
		if got := req.Inputs[0].Uint16s(); fmt.Sprintf("%#04x", got) != fmt.Sprintf("%#04x", c.want) {
			t.Errorf("%s %s: %#04x, want %#04x", c.dt, c.data, got, c.want)
		}
	}
	for _, c := range []struct{ dt, data, want string }{
		{"FP16", `[65520.0000000000000000001]`, `input "x": data[0] = 65520.0000000000000000001 is out of range for FP16`},
		{"BF16", `[339617752923046005526922703901628039168]`, `input "x": data[0] = 339617752923046005526922703901628039168 is out of range for BF16`},
	} {
		_, err := ParseInferRequest([]byte(in(`{"name":"x","datatype":"`+c.dt+`","shape":[1],"data":`+c.data+`}`)), 0)
		checkErr(t, nil, err, 400, c.want)
	}
}

func TestFP16BinaryDataTakesTwoBytesAnElement(t *testing.T) {
	header := in(`{"name":"x","datatype":"FP16","shape":[2],"parameters":{"binary_data_size":4}}`)
	req := mustParse(t, header+"\x00\x3c\x66\x2e", len(header))
	if got := req.Inputs[0].Uint16s(); got[0] != 0x3c00 || got[1] != 0x2e66 {
		t.Errorf("binary FP16: %#04x", got)
	}
	bad := in(`{"name":"x","datatype":"BF16","shape":[2],"parameters":{"binary_data_size":8}}`)
	_, err := ParseInferRequest([]byte(bad+"12345678"), len(bad))
	checkErr(t, nil, err, 400, `binary_data_size is 8 bytes, but shape [2] of BF16 needs 4`)
}

// half makes a Float16 or BFloat16 tensor of bit patterns.
func half(name string, dt servables.DType, bits ...uint16) servables.Tensor {
	t, _ := servables.NewTensor(name, dt, []int64{int64(len(bits))})
	copy(t.Uint16s(), bits)
	return t
}

func TestFP16AndBF16OutputsAreTheShortestNumbersThatReadBack(t *testing.T) {
	resp := InferResponse{ModelName: "m", Outputs: []servables.Tensor{
		half("h", servables.Float16, 0x2e66, 0x3c00, 0x7bff, 0x0001, 0x8000, 0x3555),
		half("b", servables.BFloat16, 0x3dcd, 0xc020, 0x7f7f),
	}}
	out, _, err := AppendInferResponse(nil, resp)
	want := `{"model_name":"m","outputs":[{"name":"h","datatype":"FP16","shape":[6],"data":[0.1,1,6.55e+04,6e-08,-0,0.3333]},` +
		`{"name":"b","datatype":"BF16","shape":[3],"data":[0.1,-2.5,3.39e+38]}]}`
	if err != nil || string(out) != want {
		t.Fatalf("%v\n%s\nwant\n%s", err, out, want)
	}
	// What is written reads back to the same bits.
	req := mustParse(t, in(`{"name":"h","datatype":"FP16","shape":[6],"data":[0.1,1,6.55e+04,6e-08,-0,0.3333]}`), 0)
	if got := req.Inputs[0].Uint16s(); fmt.Sprintf("%#04x", got) != "[0x2e66 0x3c00 0x7bff 0x0001 0x8000 0x3555]" {
		t.Errorf("read back %#04x", got)
	}
	resp.Outputs = []servables.Tensor{half("h", servables.Float16, 0x7c00)}
	if _, _, err := AppendInferResponse(nil, resp); err == nil || !strings.Contains(err.Error(), "element 0 is +Inf") {
		t.Errorf("FP16 +Inf in JSON: %v", err)
	}
	resp.NonFiniteLiterals = true
	if out, _, err := AppendInferResponse(nil, resp); err != nil || !strings.Contains(string(out), `"data":[Infinity]`) {
		t.Errorf("FP16 +Inf with literals: %s %v", out, err)
	}
}

func TestFP16TravelsInRawContentsOverGRPC(t *testing.T) {
	in, err := inferInputs(&oippb.ModelInferRequest{Inputs: []*oippb.ModelInferRequest_InferInputTensor{{Name: "x", Datatype: "FP16", Shape: []int64{2}}},
		RawInputContents: [][]byte{{0x00, 0x3c, 0x66, 0x2e}}})
	if err != nil || in[0].DType != servables.Float16 || in[0].Uint16s()[1] != 0x2e66 {
		t.Fatalf("raw FP16: %v %+v", err, in)
	}
	_, err = inferInputs(&oippb.ModelInferRequest{Inputs: []*oippb.ModelInferRequest_InferInputTensor{{Name: "x", Datatype: "BF16", Shape: []int64{1},
		Contents: &oippb.InferTensorContents{Fp32Contents: []float32{1}}}}})
	if err == nil || !strings.Contains(err.Error(), "BF16 data travel only in raw_input_contents") {
		t.Errorf("typed BF16: %v", err)
	}
	g := &grpcService{b: &fake{outputs: []servables.Tensor{half("y", servables.Float16, 0x3c00)}}}
	res, err := g.ModelInfer(t.Context(), &oippb.ModelInferRequest{ModelName: "m", Inputs: []*oippb.ModelInferRequest_InferInputTensor{{Name: "x", Datatype: "FP16", Shape: []int64{2}}},
		RawInputContents: [][]byte{{0x00, 0x3c, 0x66, 0x2e}}})
	if err != nil || res.GetOutputs()[0].GetDatatype() != "FP16" || fmt.Sprint(res.GetRawOutputContents()) != "[[0 60]]" {
		t.Errorf("gRPC FP16 output: %v %v", res, err)
	}
}

// declaring is a Backend that declares its model's outputs and keeps the
// output names its last call's context carried.
type declaring struct {
	fake
	declared []servables.TensorSpec
	asked    []string
	filtered bool
}

func (d *declaring) ModelMetadata(string) (servables.Metadata, string, bool) {
	return servables.Metadata{Runtime: "onnx", Outputs: d.declared}, "", true
}

func (d *declaring) Infer(ctx context.Context, reqs []actors.Request) ([]actors.Result, error) {
	d.asked, d.filtered = servables.OutputsFrom(ctx)
	return d.fake.Infer(ctx, reqs)
}

func TestTheRuntimeIsAskedOnlyForTheRequestedOutputs(t *testing.T) {
	y := half("y", servables.Float16, 0x3c00)
	d := &declaring{fake: fake{outputs: []servables.Tensor{y}}, declared: []servables.TensorSpec{{Name: "y"}, {Name: "w"}}}
	h := httpserver.New(httpserver.Options{})
	Register(h, noGRPC{}, d, "1.0", nil)
	post := func(body string) (int, string) {
		rec := httptest.NewRecorder()
		h.Handler().ServeHTTP(rec, httptest.NewRequest("POST", "/v2/models/m/infer", strings.NewReader(body)))
		return rec.Code, rec.Body.String()
	}
	x := `"inputs":[{"name":"x","datatype":"FP32","shape":[1],"data":[1]}]`
	if code, body := post(`{` + x + `,"outputs":[{"name":"y"}]}`); code != 200 || !d.filtered || fmt.Sprint(d.asked) != "[y]" || !strings.Contains(body, `"data":[1]`) {
		t.Errorf("outputs [y]: %d %s, the runtime was asked for %v (%v)", code, body, d.asked, d.filtered)
	}
	if code, _ := post(`{` + x + `}`); code != 200 || d.filtered {
		t.Errorf("no outputs: %d, the runtime was asked for %v", code, d.asked)
	}
	d.asked = nil
	if code, body := post(`{` + x + `,"outputs":[{"name":"z"}]}`); code != 400 || d.asked != nil ||
		!strings.Contains(body, `requested output \"z\" is not an output of model \"m\"; its outputs are \"y\", \"w\"`) {
		t.Errorf("outputs [z]: %d %s", code, body)
	}
	g := &grpcService{b: d}
	_, err := g.ModelInfer(t.Context(), &oippb.ModelInferRequest{ModelName: "m", Outputs: []*oippb.ModelInferRequest_InferRequestedOutputTensor{{Name: "y"}},
		Inputs: []*oippb.ModelInferRequest_InferInputTensor{{Name: "x", Datatype: "FP32", Shape: []int64{1}, Contents: &oippb.InferTensorContents{Fp32Contents: []float32{1}}}}})
	if err != nil || fmt.Sprint(d.asked) != "[y]" {
		t.Errorf("gRPC outputs [y]: %v, asked %v", err, d.asked)
	}
}

func TestOIPErrorsNameOIPDatatypes(t *testing.T) {
	err := servables.Errorf(servables.ErrInvalidInput, "input %q is %v, the model takes %v", "x", servables.Float64, servables.Float32)
	h := httpserver.New(httpserver.Options{})
	Register(h, noGRPC{}, &fake{err: fmt.Errorf("model m/: %w", err)}, "1.0", nil)
	rec := httptest.NewRecorder()
	h.Handler().ServeHTTP(rec, httptest.NewRequest("POST", "/v2/models/m/infer", strings.NewReader(inferBody)))
	if want := `{"error":"model m/: invalid input: input \"x\" is FP64, the model takes FP32"}`; rec.Code != 400 || rec.Body.String() != want {
		t.Errorf("REST: %d %s, want %s", rec.Code, rec.Body, want)
	}
	g := &grpcService{b: &fake{err: err}}
	_, gerr := g.ModelInfer(t.Context(), &oippb.ModelInferRequest{ModelName: "m", Inputs: []*oippb.ModelInferRequest_InferInputTensor{
		{Name: "x", Datatype: "FP32", Shape: []int64{1}, Contents: &oippb.InferTensorContents{Fp32Contents: []float32{1}}}}})
	if st := grpcstatus.Convert(gerr); st.Code() != codes.InvalidArgument || st.Message() != `invalid input: input "x" is FP64, the model takes FP32` {
		t.Errorf("gRPC: %v", gerr)
	}
	if servables.OIPName(servables.Unknown) != "UNKNOWN" {
		t.Errorf("servables.OIPName(Unknown) = %q", servables.OIPName(servables.Unknown))
	}
}

// A literal of a megabyte of digits that the float64 rounds onto a tie
// is decided by its first digits and whether any digit after them is not
// zero, not by reading it all as an exact fraction (seconds of CPU and
// megabytes for each such element).
func TestAHugeLiteralOnATieIsDecidedByItsLeadingDigits(t *testing.T) {
	zeros := strings.Repeat("0", 1<<20)
	for _, c := range []struct {
		name, data string
		want       uint16
	}{
		{"the tie itself: to even", "1.00048828125" + zeros, 0x3c00},
		{"a last digit past the tie: up", "1.00048828125" + zeros + "1", 0x3c01},
		{"nines below the tie: down", "1.00048828124" + strings.Repeat("9", 1<<20), 0x3c00},
		{"the tie with an exponent", "0.000100048828125" + zeros + "e4", 0x3c00},
		{"negative, past the tie", "-1.00048828125" + zeros + "7", 0xbc01},
	} {
		body := []byte(in(`{"name":"x","datatype":"FP16","shape":[1],"data":[` + c.data + `]}`))
		var req *InferRequest
		var err error
		grew := allocated(func() { req, err = ParseInferRequest(body, 0) })
		if err != nil {
			t.Errorf("%s: %v", c.name, err)
			continue
		}
		if got := req.Inputs[0].Uint16s(); len(got) != 1 || got[0] != c.want {
			t.Errorf("%s: %#04x, want %#04x", c.name, got, c.want)
		}
		if grew > 8<<20 {
			t.Errorf("%s: %d bytes allocated to read one element of %d bytes", c.name, grew, len(c.data))
		}
	}
}
