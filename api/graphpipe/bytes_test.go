package graphpipe

import (
	"errors"
	"reflect"
	"strings"
	"testing"

	fb "github.com/google/flatbuffers/go"
	gp "github.com/oracle/graphpipe-go"
	gpfb "github.com/oracle/graphpipe-go/graphpipefb"

	"github.com/groveml/grove/servables"
)

func TestStringTensorsAreBytesBothWays(t *testing.T) {
	req, err := ParseRequest(buildInfer(t, "", []string{"String"}, nil, [][]string{{"human1", "human"}, {"monster16", "a\x00b"}}))
	if err != nil {
		t.Fatal(err)
	}
	in := req.Inputs[0]
	got, err := in.Strings()
	if err != nil || in.DType != servables.Bytes || !reflect.DeepEqual(in.Shape, []int64{2, 2}) ||
		!reflect.DeepEqual(got, []string{"human1", "human", "monster16", "a\x00b"}) {
		t.Fatalf("input %v %v %q, %v", in.DType, in.Shape, got, err)
	}
	// Written back as a String tensor, graphpipe-go's client reads the strings.
	res := gpfb.GetRootAsInferResponse(AppendInferResponse(nil, req.Inputs), 0)
	var ft gpfb.Tensor
	res.OutputTensors(&ft, 0)
	back, err := gp.TensorToNative(&ft)
	if err != nil || !reflect.DeepEqual(back, [][]string{{"human1", "human"}, {"monster16", "a\x00b"}}) {
		t.Fatalf("graphpipe-go reads %#v, %v", back, err)
	}
	md := gpfb.GetRootAsMetadataResponse(AppendMetadataResponse(nil, Metadata{Inputs: []IO{{Name: "String", Type: servables.Bytes, Shape: []int64{-1, 2}}}}), 0)
	var io gpfb.IOMetadata
	md.Inputs(&io, 0)
	if io.Type() != gpfb.TypeString {
		t.Fatalf("metadata type %d, want String", io.Type())
	}
}

func TestStringTensorErrors(t *testing.T) {
	withData := func(b *fb.Builder) fb.UOffsetT { return dataAndStrings(b, gpfb.TypeString, 1) }
	for _, tc := range []struct {
		name string
		body []byte
		is   error
		says string
	}{
		{"count", buildInfer(t, "", nil, nil, &gp.NativeTensor{Type: gpfb.TypeString, Shape: []int64{3}, StringVals: []string{"a", "b"}}), servables.ErrShape, "2 string_val entries do not fill shape [3]"},
		{"data", buildInfer(t, "", nil, nil, withData), ErrMalformed, "a String tensor carries 1 bytes of data"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := ParseRequest(tc.body)
			if !errors.Is(err, tc.is) || !strings.Contains(err.Error(), tc.says) {
				t.Fatalf("ParseRequest = %v, want %v saying %q", err, tc.is, tc.says)
			}
		})
	}
}
