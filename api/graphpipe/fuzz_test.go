package graphpipe

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strconv"
	"testing"

	gp "github.com/oracle/graphpipe-go"
	gpfb "github.com/oracle/graphpipe-go/graphpipefb"

	"github.com/groveml/grove/servables"
)

// FuzzParseRequest checks that ParseRequest never panics, that every error
// wraps ErrMalformed, ErrUnsupportedType or servables.ErrShape, and that a
// parsed request is consistent: valid tensors, names in place, an
// InferResponse written from its inputs holding the same bytes, and the
// request written again with graphpipe-go's builders parsing to the same
// value. Its seed corpus (valid requests made with graphpipe-go's builders
// and broken ones) is checked in under testdata/fuzz/FuzzParseRequest;
// GRAPHPIPE_WRITE_CORPUS=1 go test -run TestWriteCorpus rewrites it.
func FuzzParseRequest(f *testing.F) {
	f.Fuzz(func(t *testing.T, body []byte) {
		req, err := ParseRequest(body)
		if err != nil {
			if !errors.Is(err, ErrMalformed) && !errors.Is(err, ErrUnsupportedType) && !errors.Is(err, servables.ErrShape) {
				t.Fatalf("error %q wraps none of the package's errors", err)
			}
			if !reflect.DeepEqual(req, Request{}) {
				t.Fatalf("both an error and a request %+v", req)
			}
			return
		}
		if req.Kind == KindMetadata {
			if !reflect.DeepEqual(req, Request{Kind: KindMetadata}) {
				t.Fatalf("metadata request with content: %+v", req)
			}
			return
		}
		if req.Kind != KindInfer || len(req.Inputs) == 0 || len(req.Inputs) > MaxTensors || len(req.InputNames) > len(req.Inputs) {
			t.Fatalf("request %+v", req)
		}
		ins := make([]any, len(req.Inputs))
		for i, in := range req.Inputs {
			if err := in.Validate(); err != nil {
				t.Fatalf("input %d: %v", i, err)
			}
			if i < len(req.InputNames) && in.Name != req.InputNames[i] || i >= len(req.InputNames) && in.Name != "" {
				t.Fatalf("input %d named %q, names %q", i, in.Name, req.InputNames)
			}
			ins[i] = &gp.NativeTensor{Type: toWireTypes[in.DType], Shape: in.Shape, Data: in.Data}
			if in.DType == servables.Bytes {
				strs, _ := in.Strings()
				ins[i] = &gp.NativeTensor{Type: gpfb.TypeString, Shape: in.Shape, StringVals: strs}
			}
		}
		for i, name := range req.OutputNames {
			if name == "" {
				t.Fatalf("output name %d empty", i)
			}
		}

		res := gpfb.GetRootAsInferResponse(AppendInferResponse(nil, req.Inputs), 0)
		if res.OutputTensorsLength() != len(req.Inputs) || res.ErrorsLength() != 0 {
			t.Fatalf("response: %d outputs, %d errors", res.OutputTensorsLength(), res.ErrorsLength())
		}
		for i, in := range req.Inputs {
			var ft gpfb.Tensor
			res.OutputTensors(&ft, i)
			shape := make([]int64, ft.ShapeLength())
			for j := range shape {
				shape[j] = ft.Shape(j)
			}
			data := ft.DataBytes()
			if in.DType == servables.Bytes {
				data = nil
				for j := range ft.StringValLength() {
					data = servables.AppendBytesElement(data, ft.StringVal(j))
				}
			}
			if ft.Type() != toWireTypes[in.DType] || !slices.Equal(shape, in.Shape) || (hostLittle && !bytes.Equal(data, in.Data)) {
				t.Fatalf("output %d: type %d shape %v, want %v %v", i, ft.Type(), shape, in.DType, in.Shape)
			}
		}

		again, err := ParseRequest(buildInfer(t, req.Config, req.InputNames, req.OutputNames, ins...))
		if err != nil {
			t.Fatalf("request written again does not parse: %v", err)
		}
		if !reflect.DeepEqual(again, req) {
			t.Fatalf("request written again parses to\n%+v\nnot\n%+v", again, req)
		}
	})
}

// TestWriteCorpus rewrites the seed corpus of FuzzParseRequest when
// GRAPHPIPE_WRITE_CORPUS is set.
func TestWriteCorpus(t *testing.T) {
	if os.Getenv("GRAPHPIPE_WRITE_CORPUS") == "" {
		t.Skip("set GRAPHPIPE_WRITE_CORPUS=1 to rewrite testdata/fuzz/FuzzParseRequest")
	}
	raw := func(typ uint8, shape []int64, data []byte) *gp.NativeTensor {
		return &gp.NativeTensor{Type: typ, Shape: shape, Data: data}
	}
	valid := buildInfer(t, "user_id:1", []string{"x"}, []string{"y"}, [][]float32{{1, 2, 3}, {4, 5, 6}})
	seeds := map[string][]byte{
		"valid_float32":   valid,
		"valid_multi":     buildInfer(t, "", []string{"a", "b", "c"}, []string{"p", "q"}, []int8{-1, 2}, [][]int16{{3}, {4}}, []int32{5}, [][]int64{{6, 7}}, []float64{0.5}),
		"valid_unnamed":   buildInfer(t, "", nil, nil, []float64{1, 2}, []int32{3}),
		"valid_uint":      buildInfer(t, "", []string{"img"}, nil, [][]uint8{{0, 255}, {7, 8}}, []uint16{65535}, []uint32{1 << 31}),
		"valid_scalar":    buildInfer(t, "", nil, nil, raw(gpfb.TypeInt64, nil, []byte{1, 2, 3, 4, 5, 6, 7, 8})),
		"valid_metadata":  buildMetadataRequest(),
		"bad_uint64":      buildInfer(t, "", nil, nil, []uint64{1}),
		"bad_string":      buildInfer(t, "", nil, nil, []string{"a", "b"}),
		"bad_short_data":  buildInfer(t, "", nil, nil, raw(gpfb.TypeFloat32, []int64{2, 2}, make([]byte, 12))),
		"bad_zero_dim":    buildInfer(t, "", nil, nil, raw(gpfb.TypeFloat32, []int64{0}, nil)),
		"bad_huge_shape":  buildInfer(t, "", nil, nil, raw(gpfb.TypeInt8, []int64{1 << 40, 1 << 40}, nil)),
		"bad_no_inputs":   buildInfer(t, "", nil, []string{"y"}),
		"bad_no_request":  emptyRequest(0, false),
		"bad_truncated":   valid[:len(valid)*2/3],
		"bad_random":      []byte("\x10\x00\x00\x00\xff\xff\xff\x7f\x04\x00\x08\x00\x06\x00\x01\x00garbage!"),
		"bad_empty":       {},
		"bad_root_offset": {0xff, 0xff, 0xff, 0xff, 0, 0, 0, 0},
	}
	dir := filepath.Join("testdata", "fuzz", "FuzzParseRequest")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	for name, body := range seeds {
		data := fmt.Sprintf("go test fuzz v1\n[]byte(%s)\n", strconv.Quote(string(body)))
		if err := os.WriteFile(filepath.Join(dir, name), []byte(data), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}
