package deeprec

import (
	"fmt"
	"testing"

	"google.golang.org/protobuf/proto"

	"github.com/groveml/grove/api/deeprec/deeprecpb"
	"github.com/groveml/grove/servables"
)

// BenchmarkConvert is the protocol's own cost per call, without the
// model: decode a serialized PredictRequest of a pCTR-shaped input
// (float32 [rows, 64]), convert it to tensors, convert a [rows, 1] output
// back and encode the PredictResponse.
func BenchmarkConvert(b *testing.B) {
	for _, rows := range []int{1, 64} {
		b.Run(fmt.Sprintf("rows=%d", rows), func(b *testing.B) {
			x := &deeprecpb.ArrayProto{Dtype: deeprecpb.ArrayDataType_DT_FLOAT, ArrayShape: &deeprecpb.ArrayShape{Dim: []int64{int64(rows), 64}},
				FloatVal: make([]float32, rows*64)}
			body, err := proto.Marshal(&deeprecpb.PredictRequest{Inputs: map[string]*deeprecpb.ArrayProto{"x": x}})
			if err != nil {
				b.Fatal(err)
			}
			y, err := servables.NewTensor("output_0", servables.Float32, []int64{int64(rows), 1})
			if err != nil {
				b.Fatal(err)
			}
			b.ReportAllocs()
			for b.Loop() {
				req, err := ParseRequest(body)
				if err != nil {
					b.Fatal(err)
				}
				if _, err := Inputs(req, nil); err != nil {
					b.Fatal(err)
				}
				resp, err := Response("pctr_v1/", []servables.Tensor{y}, nil)
				if err != nil {
					b.Fatal(err)
				}
				if _, err := proto.Marshal(resp); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
