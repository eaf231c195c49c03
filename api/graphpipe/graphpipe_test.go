package graphpipe

import (
	"bytes"
	"errors"
	"math"
	"math/rand/v2"
	"net/http"
	"reflect"
	"strings"
	"sync"
	"testing"

	fb "github.com/google/flatbuffers/go"
	gp "github.com/oracle/graphpipe-go"
	gpfb "github.com/oracle/graphpipe-go/graphpipefb"

	"github.com/groveml/grove/servables"
)

// TestRemote calls the codec-backed server with graphpipe-go's own client,
// graphpipe.Remote, for every dtype the client can send.
func TestRemote(t *testing.T) {
	if raceEnabled {
		t.Skip("graphpipe-go's client fails -race's checkptr, see race_off_test.go")
	}
	srv := startServer(t)
	cases := []struct {
		in, want any
	}{
		{[][]float32{{1, 2.5, -3}, {4, 5, 6}}, [][]float32{{2, 5, -6}, {8, 10, 12}}},
		{[]float64{0.25, -1e300, math.MaxFloat64 / 4}, []float64{0.5, -2e300, math.MaxFloat64 / 2}},
		{[][][]int8{{{1, -2}}, {{3, -60}}}, [][][]int8{{{2, -4}}, {{6, -120}}}},
		{[]int16{-300, 300}, []int16{-600, 600}},
		{[][]int32{{1 << 20}, {-7}}, [][]int32{{1 << 21}, {-14}}},
		{[]int64{1 << 40, -1}, []int64{1 << 41, -2}},
		// Grove has no unsigned types: Uint8 is widened to Int16, and so on.
		{[]uint8{0, 200, 255}, []int16{0, 400, 510}},
		{[]uint16{65535}, []int32{131070}},
		{[]uint32{math.MaxUint32}, []int64{2 * math.MaxUint32}},
	}
	for _, c := range cases {
		got, err := gp.Remote(http.DefaultClient, srv.URL, c.in, "x", "y")
		if err != nil {
			t.Fatalf("Remote(%T): %v", c.in, err)
		}
		if !reflect.DeepEqual(got, c.want) {
			t.Errorf("Remote(%v) = %#v, want %#v", c.in, got, c.want)
		}
	}
}

// TestMultiRemote sends several inputs at once with graphpipe.MultiRemote,
// with and without names, and checks outputs come back in order.
func TestMultiRemote(t *testing.T) {
	if raceEnabled {
		t.Skip("graphpipe-go's client fails -race's checkptr, see race_off_test.go")
	}
	srv := startServer(t)
	ins := []any{[][]float32{{1, 2}, {3, 4}}, []int64{5, 6, 7}, [][]float64{{0.5}}}
	want := []any{[][]float32{{2, 4}, {6, 8}}, []int64{10, 12, 14}, [][]float64{{1}}}
	got, err := gp.MultiRemote(http.DefaultClient, srv.URL, ins, []string{"a", "b", "c"}, []string{"a2", "b2", "c2"})
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("MultiRemote = %#v, want %#v", got, want)
	}
	got, err = gp.MultiRemote(http.DefaultClient, srv.URL, ins, nil, nil) // no names: all outputs
	if err != nil || !reflect.DeepEqual(got, want) {
		t.Fatalf("MultiRemote without names = %#v, %v", got, err)
	}
	got, err = gp.MultiRemote(http.DefaultClient, srv.URL, ins, nil, []string{"first"})
	if err != nil || !reflect.DeepEqual(got, want[:1]) {
		t.Fatalf("MultiRemote with one output name = %#v, %v", got, err)
	}
}

// TestClientErrors shows what graphpipe-go v1.0.0's client makes of the two
// ways a server can report an error.
func TestClientErrors(t *testing.T) {
	if raceEnabled {
		t.Skip("graphpipe-go's client fails -race's checkptr, see race_off_test.go")
	}
	srv := startServer(t)
	bad := []any{[]uint64{1}} // Uint64 has no lossless Grove dtype

	// HTTP 400 with a text body: MultiRemote returns the error.
	_, err := gp.MultiRemote(http.DefaultClient, srv.URL, bad, nil, nil)
	if err == nil || !strings.Contains(err.Error(), "Uint64 has no Grove dtype") {
		t.Fatalf("MultiRemote error = %v", err)
	}
	// ... but Remote indexes its nil result before returning the error.
	func() {
		defer func() {
			if r := recover(); r == nil {
				t.Error("graphpipe.Remote no longer panics on an error; update the package doc")
			}
		}()
		gp.Remote(http.DefaultClient, srv.URL, []uint64{1}, "", "")
	}()

	// HTTP 200 with InferResponse.errors (ForestFlow's way): the client
	// ignores the errors and returns no outputs and no error.
	outs, err := gp.MultiRemote(http.DefaultClient, srv.URL+"?inline=1", bad, nil, nil)
	if err != nil || len(outs) != 0 {
		t.Fatalf("inline error: MultiRemote = %v, %v", outs, err)
	}
	// The error is in the body, readable with the generated code.
	body := AppendErrorResponse([]byte("prefix"), 400, "bad input")
	if !bytes.HasPrefix(body, []byte("prefix")) {
		t.Fatal("dst not kept")
	}
	res := gpfb.GetRootAsInferResponse(body[len("prefix"):], 0)
	var e gpfb.Error
	if res.OutputTensorsLength() != 0 || res.ErrorsLength() != 1 || !res.Errors(&e, 0) ||
		e.Code() != 400 || string(e.Message()) != "bad input" {
		t.Fatalf("error response: %d outputs, %d errors, code %d, %q", res.OutputTensorsLength(), res.ErrorsLength(), e.Code(), e.Message())
	}
}

// TestMetadata fetches metadata over HTTP with a MetadataRequest built by
// graphpipe-go's generated code, and compares the answer field by field with
// the one graphpipe-go's own server code (NativeMetadataResponse.Build)
// writes for the same description. graphpipe-go v1.0.0 has no FetchMetadata.
func TestMetadata(t *testing.T) {
	srv := startServer(t)
	resp, err := http.Post(srv.URL, "application/octet-stream", bytes.NewReader(buildMetadataRequest()))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var body bytes.Buffer
	body.ReadFrom(resp.Body)
	if resp.StatusCode != 200 {
		t.Fatalf("status %d: %s", resp.StatusCode, body.Bytes())
	}

	native := gp.NativeMetadataResponse{Name: "doubler", Version: "v7", Server: "grove", Description: "doubles every input",
		Inputs: []gp.NativeIOMetadata{
			{Name: "x", Description: "features", Type: gpfb.TypeFloat32, Shape: []int64{-1, 3}},
			{Name: "ids", Type: gpfb.TypeInt64, Shape: []int64{-1}},
		},
		Outputs: []gp.NativeIOMetadata{{Name: "y", Type: gpfb.TypeFloat32, Shape: []int64{-1, 3}}, {Name: "any", Shape: []int64{}}},
	}
	b := fb.NewBuilder(256)
	ref := gp.Serialize(b, native.Build(b))
	if got, want := decodeMetadata(body.Bytes()), decodeMetadata(ref); !reflect.DeepEqual(got, want) {
		t.Fatalf("metadata\n got %+v\nwant %+v", got, want)
	}
	if got := decodeMetadata(body.Bytes()); got.Name != "doubler" || len(got.Inputs) != 2 || got.Inputs[0].Type != gpfb.TypeFloat32 {
		t.Fatalf("metadata %+v", got)
	}
}

// decodeMetadata reads a MetadataResponse with graphpipe-go's generated code.
func decodeMetadata(buf []byte) gp.NativeMetadataResponse {
	m := gpfb.GetRootAsMetadataResponse(buf, 0)
	io := func(n int, get func(*gpfb.IOMetadata, int) bool) []gp.NativeIOMetadata {
		var out []gp.NativeIOMetadata
		for i := range n {
			var x gpfb.IOMetadata
			get(&x, i)
			shape := []int64{}
			for j := range x.ShapeLength() {
				shape = append(shape, x.Shape(j))
			}
			out = append(out, gp.NativeIOMetadata{Name: string(x.Name()), Description: string(x.Description()), Shape: shape, Type: x.Type()})
		}
		return out
	}
	return gp.NativeMetadataResponse{Name: string(m.Name()), Version: string(m.Version()), Server: string(m.Server()),
		Description: string(m.Description()), Inputs: io(m.InputsLength(), m.Inputs), Outputs: io(m.OutputsLength(), m.Outputs)}
}

// TestParseRequest checks the parsed form of well-formed requests.
func TestParseRequest(t *testing.T) {
	body := buildInfer(t, "user_id:42,x:y", []string{"a", "b"}, []string{"out"},
		[][]float32{{1, 2, 3}}, []uint8{7, 255}, []int8{-1})
	req, err := ParseRequest(body)
	if err != nil {
		t.Fatal(err)
	}
	if req.Kind != KindInfer || req.Config != "user_id:42,x:y" || !reflect.DeepEqual(req.InputNames, []string{"a", "b"}) ||
		!reflect.DeepEqual(req.OutputNames, []string{"out"}) || len(req.Inputs) != 3 {
		t.Fatalf("request %+v", req)
	}
	in := req.Inputs
	if in[0].Name != "a" || in[0].DType != servables.Float32 || !reflect.DeepEqual(in[0].Shape, []int64{1, 3}) ||
		!reflect.DeepEqual(in[0].Float32s(), []float32{1, 2, 3}) {
		t.Errorf("input 0: %+v", in[0])
	}
	if in[1].Name != "b" || in[1].DType != servables.Int16 || !reflect.DeepEqual(in[1].Int16s(), []int16{7, 255}) {
		t.Errorf("input 1 (uint8 widened): %+v", in[1])
	}
	if in[2].Name != "" || in[2].DType != servables.Int8 || !reflect.DeepEqual(in[2].Int8s(), []int8{-1}) {
		t.Errorf("input 2 (unnamed): %+v", in[2])
	}
	// The request does not alias the body.
	for i := range body {
		body[i] = 0xff
	}
	if in[0].Float32s()[2] != 3 || req.Config != "user_id:42,x:y" || req.InputNames[0] != "a" {
		t.Fatal("the parsed request shares memory with the body")
	}

	// A scalar: empty shape, one element.
	scalar := &gp.NativeTensor{Type: gpfb.TypeFloat64, Shape: []int64{}, Data: []byte{0, 0, 0, 0, 0, 0, 0xf0, 0x3f}}
	req, err = ParseRequest(buildInfer(t, "", nil, nil, scalar))
	if err != nil || len(req.Inputs[0].Shape) != 0 || req.Inputs[0].Float64s()[0] != 1 {
		t.Fatalf("scalar: %+v, %v", req, err)
	}

	req, err = ParseRequest(buildMetadataRequest())
	if err != nil || !reflect.DeepEqual(req, Request{Kind: KindMetadata}) {
		t.Fatalf("metadata request: %+v, %v", req, err)
	}
}

// TestParseRequestErrors checks each validation rule.
func TestParseRequestErrors(t *testing.T) {
	raw := func(typ uint8, shape []int64, data []byte) *gp.NativeTensor {
		return &gp.NativeTensor{Type: typ, Shape: shape, Data: data}
	}
	f32 := []float32{1}
	cases := []struct {
		name string
		body []byte
		is   error
		msg  string
	}{
		{"empty", nil, ErrMalformed, "too short"},
		{"short", []byte{1, 2, 3, 4, 5}, ErrMalformed, "too short"},
		{"uint64", buildInfer(t, "", nil, nil, []uint64{1}), ErrUnsupportedType, "Uint64"},
		{"null", buildInfer(t, "", nil, nil, raw(gpfb.TypeNull, []int64{1}, nil)), ErrUnsupportedType, "Null"},
		{"type 99", buildInfer(t, "", nil, nil, raw(99, []int64{1}, nil)), ErrUnsupportedType, "type 99"},
		{"short data", buildInfer(t, "", nil, nil, raw(gpfb.TypeFloat32, []int64{2, 2}, make([]byte, 12))), servables.ErrShape, "12 bytes"},
		{"long data", buildInfer(t, "", nil, nil, raw(gpfb.TypeInt64, []int64{1}, make([]byte, 9))), servables.ErrShape, "9 bytes"},
		{"zero dim", buildInfer(t, "", nil, nil, raw(gpfb.TypeFloat32, []int64{3, 0}, nil)), servables.ErrShape, "dimension 1 is 0"},
		{"negative dim", buildInfer(t, "", nil, nil, raw(gpfb.TypeFloat32, []int64{-1, 4}, make([]byte, 16))), servables.ErrShape, "dimension 0 is -1"},
		{"too many elements", buildInfer(t, "", nil, nil, raw(gpfb.TypeInt8, []int64{1 << 20, 1 << 20, 4}, nil)), servables.ErrShape, "exceeds"},
		{"too many dims", buildInfer(t, "", nil, nil, raw(gpfb.TypeInt8, make([]int64, MaxRank+1), nil)), ErrMalformed, "33 dimensions"},
		{"empty scalar", buildInfer(t, "", nil, nil, raw(gpfb.TypeFloat32, []int64{}, nil)), servables.ErrShape, "0 bytes"},
		{"string_val on float", buildInfer(t, "", nil, nil, floatWithStrings), ErrMalformed, "string_val"},
		{"no inputs", buildInfer(t, "", nil, []string{"y"}), ErrMalformed, "no input tensors"},
		{"more names than inputs", buildInfer(t, "", []string{"a", "b"}, nil, f32), ErrMalformed, "2 input names"},
		{"duplicate names", buildInfer(t, "", []string{"a", "a"}, nil, f32, f32), ErrMalformed, `"a" given twice`},
		{"empty output name", buildInfer(t, "", nil, []string{"y", ""}, f32), ErrMalformed, "output name 1 is empty"},
		{"no request", emptyRequest(0, false), ErrMalformed, "neither"},
		{"unknown request type", emptyRequest(7, true), ErrMalformed, "unknown request type 7"},
		{"infer type without table", emptyRequest(gpfb.ReqInferRequest, false), ErrMalformed, "without an InferRequest"},
	}
	for _, c := range cases {
		req, err := ParseRequest(c.body)
		if err == nil {
			t.Errorf("%s: no error, got %+v", c.name, req)
			continue
		}
		if !errors.Is(err, c.is) || !strings.Contains(err.Error(), c.msg) {
			t.Errorf("%s: error %q, want %v containing %q", c.name, err, c.is, c.msg)
		}
		if !reflect.DeepEqual(req, Request{}) {
			t.Errorf("%s: error and a request %+v", c.name, req)
		}
	}
}

// floatWithStrings builds a Float32 tensor of one element that also carries
// a string_val vector.
func floatWithStrings(b *fb.Builder) fb.UOffsetT { return dataAndStrings(b, gpfb.TypeFloat32, 4) }

// dataAndStrings builds a tensor of type typ and shape [1] with both
// size bytes of data and a string_val vector of one string.
func dataAndStrings(b *fb.Builder, typ byte, size int) fb.UOffsetT {
	str := b.CreateByteVector([]byte("x"))
	gpfb.TensorStartStringValVector(b, 1)
	b.PrependUOffsetT(str)
	vals := b.EndVector(1)
	data := b.CreateByteVector(make([]byte, size))
	gpfb.TensorStartShapeVector(b, 1)
	b.PrependInt64(1)
	shape := b.EndVector(1)
	gpfb.TensorStart(b)
	gpfb.TensorAddType(b, typ)
	gpfb.TensorAddShape(b, shape)
	gpfb.TensorAddData(b, data)
	gpfb.TensorAddStringVal(b, vals)
	return gpfb.TensorEnd(b)
}

// emptyRequest builds a Request of the given type, with an empty table in
// req when withTable.
func emptyRequest(typ byte, withTable bool) []byte {
	b := fb.NewBuilder(64)
	var tab fb.UOffsetT
	if withTable {
		gpfb.MetadataRequestStart(b)
		tab = gpfb.MetadataRequestEnd(b)
	}
	gpfb.RequestStart(b)
	gpfb.RequestAddReqType(b, typ)
	if withTable {
		gpfb.RequestAddReq(b, tab)
	}
	return gp.Serialize(b, gpfb.RequestEnd(b))
}

// TestMalformed feeds truncated, bit-flipped and random bodies to
// ParseRequest directly and through the HTTP server: each must give an error
// or a valid request, never a panic.
func TestMalformed(t *testing.T) {
	valid := [][]byte{
		buildInfer(t, "k:v", []string{"a", "b"}, []string{"y"}, [][]float32{{1, 2}, {3, 4}}, []int64{9}),
		buildMetadataRequest(),
	}
	check := func(body []byte) {
		t.Helper()
		defer func() {
			if r := recover(); r != nil {
				t.Fatalf("panic on %x: %v", body, r)
			}
		}()
		req, err := ParseRequest(body)
		if err == nil {
			for i, in := range req.Inputs {
				if err := in.Validate(); err != nil {
					t.Fatalf("input %d of %x: %v", i, body, err)
				}
			}
		}
	}
	rng := rand.New(rand.NewPCG(1, 2))
	for _, v := range valid {
		for n := range len(v) { // every truncation
			check(v[:n])
		}
		for range 5000 { // random byte changes
			b := bytes.Clone(v)
			for range 1 + rng.IntN(4) {
				b[rng.IntN(len(b))] = byte(rng.Uint32())
			}
			check(b)
		}
	}
	for range 5000 { // random bodies
		b := make([]byte, rng.IntN(200))
		for i := range b {
			b[i] = byte(rng.Uint32())
		}
		check(b)
	}

	srv := startServer(t)
	for _, body := range [][]byte{[]byte("not a flatbuffer at all"), valid[0][:len(valid[0])/2], {0xff, 0xff, 0xff, 0x7f, 0, 0, 0, 0}} {
		resp, err := http.Post(srv.URL, "application/octet-stream", bytes.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusBadRequest {
			t.Errorf("body %q: status %d", body, resp.StatusCode)
		}
	}
}

// TestInferResponse checks the response bytes with graphpipe-go's decoder,
// dst handling, and an invalid output.
func TestInferResponse(t *testing.T) {
	a, _ := servables.NewTensor("a", servables.Int32, []int64{2, 2})
	copy(a.Int32s(), []int32{1, -2, 3, math.MinInt32})
	s, _ := servables.NewTensor("s", servables.Float32, nil) // scalar
	s.Float32s()[0] = 1.5
	out := AppendInferResponse([]byte("xy"), []servables.Tensor{a, s})
	if string(out[:2]) != "xy" {
		t.Fatal("dst prefix lost")
	}
	res := gpfb.GetRootAsInferResponse(out[2:], 0)
	if res.OutputTensorsLength() != 2 || res.ErrorsLength() != 0 {
		t.Fatalf("%d outputs, %d errors", res.OutputTensorsLength(), res.ErrorsLength())
	}
	var ft gpfb.Tensor
	res.OutputTensors(&ft, 0)
	want := []byte{1, 0, 0, 0, 0xfe, 0xff, 0xff, 0xff, 3, 0, 0, 0, 0, 0, 0, 0x80} // little-endian
	if ft.Type() != gpfb.TypeInt32 || ft.ShapeLength() != 2 || ft.Shape(0) != 2 || ft.Shape(1) != 2 || !bytes.Equal(ft.DataBytes(), want) {
		t.Fatalf("output 0: type %d, shape %d×%d, data %x", ft.Type(), ft.Shape(0), ft.Shape(1), ft.DataBytes())
	}
	if !raceEnabled {
		got, err := gp.TensorToNative(&ft)
		if err != nil || !reflect.DeepEqual(got, [][]int32{{1, -2}, {3, math.MinInt32}}) {
			t.Fatalf("output 0 = %v, %v", got, err)
		}
	}
	res.OutputTensors(&ft, 1)
	if ft.Type() != gpfb.TypeFloat32 || ft.ShapeLength() != 0 || !bytes.Equal(ft.DataBytes(), s.Data) {
		t.Fatalf("scalar output: type %d, rank %d, data %x", ft.Type(), ft.ShapeLength(), ft.DataBytes())
	}

	bad := servables.Tensor{Name: "bad", DType: servables.Float32, Shape: []int64{3}, Data: make([]byte, 4)}
	res = gpfb.GetRootAsInferResponse(AppendInferResponse(nil, []servables.Tensor{a, bad}), 0)
	var e gpfb.Error
	if res.OutputTensorsLength() != 0 || res.ErrorsLength() != 1 || !res.Errors(&e, 0) || e.Code() != OutputErrorCode ||
		!strings.Contains(string(e.Message()), `output 1 ("bad")`) {
		t.Fatalf("invalid output: %d outputs, %d errors, %q", res.OutputTensorsLength(), res.ErrorsLength(), e.Message())
	}

	res = gpfb.GetRootAsInferResponse(AppendInferResponse(nil, nil), 0)
	if res.OutputTensorsLength() != 0 || res.ErrorsLength() != 0 {
		t.Fatal("empty response")
	}

	// GraphPipe has Uint8; Bool goes as Uint8 bytes 0 and 1.
	u := servables.Tensor{Name: "u", DType: servables.Uint8, Shape: []int64{3}, Data: []byte{0, 7, 255}}
	m := servables.Tensor{Name: "m", DType: servables.Bool, Shape: []int64{2}, Data: []byte{1, 0}}
	res = gpfb.GetRootAsInferResponse(AppendInferResponse(nil, []servables.Tensor{u, m}), 0)
	if res.OutputTensorsLength() != 2 || res.ErrorsLength() != 0 {
		t.Fatalf("uint8/bool: %d outputs, %d errors", res.OutputTensorsLength(), res.ErrorsLength())
	}
	for i, want := range []servables.Tensor{u, m} {
		res.OutputTensors(&ft, i)
		if ft.Type() != gpfb.TypeUint8 || ft.ShapeLength() != 1 || ft.Shape(0) != want.Shape[0] || !bytes.Equal(ft.DataBytes(), want.Data) {
			t.Errorf("output %d (%v): type %d, data %v", i, want.DType, ft.Type(), ft.DataBytes())
		}
	}
}

// TestConcurrentResponses exercises the builder pool from many goroutines
// (run with -race).
func TestConcurrentResponses(t *testing.T) {
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Go(func() {
			for i := range 200 {
				x, _ := servables.NewTensor("x", servables.Int64, []int64{int64(1 + i%7)})
				for j := range x.Int64s() {
					x.Int64s()[j] = int64(g*1000 + i)
				}
				var buf []byte
				switch i % 3 {
				case 0:
					buf = AppendInferResponse(nil, []servables.Tensor{x})
				case 1:
					buf = AppendErrorResponse(nil, 1, strings.Repeat("e", i))
				default:
					buf = AppendMetadataResponse(nil, testMetadata)
				}
				if i%3 == 0 {
					var ft gpfb.Tensor
					gpfb.GetRootAsInferResponse(buf, 0).OutputTensors(&ft, 0)
					if !bytes.Equal(ft.DataBytes(), x.Data) {
						t.Errorf("goroutine %d, response %d: wrong data", g, i)
						return
					}
				}
			}
		})
	}
	wg.Wait()
}

func BenchmarkParseRequest(b *testing.B) {
	rows := make([][]float32, 64)
	for i := range rows {
		rows[i] = make([]float32, 32)
	}
	body := buildInfer(b, "", []string{"x"}, []string{"y"}, rows)
	b.SetBytes(int64(len(body)))
	b.ReportAllocs()
	for b.Loop() {
		if _, err := ParseRequest(body); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkAppendInferResponse(b *testing.B) {
	x, _ := servables.NewTensor("y", servables.Float32, []int64{64, 1})
	buf := make([]byte, 0, 1024)
	b.ReportAllocs()
	for b.Loop() {
		buf = AppendInferResponse(buf[:0], []servables.Tensor{x})
	}
}
