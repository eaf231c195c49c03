package oip

import (
	"encoding/binary"
	"fmt"
	"math"
	"math/rand"
	"strconv"
	"strings"
	"testing"

	"github.com/groveml/grove/servables"
)

// benchJSON builds a request with one FP32 input of shape [rows,64] of
// normally distributed values written in their shortest float32 form (up
// to 9 significant digits). With nested, data is nested as the shape
// ([[...],[...]]), otherwise flat.
func benchJSON(rows int, nested bool) []byte {
	r := rand.New(rand.NewSource(1))
	var b strings.Builder
	fmt.Fprintf(&b, `{"id":"bench","inputs":[{"name":"features","shape":[%d,64],"datatype":"FP32","data":[`, rows)
	for i := 0; i < rows; i++ {
		if i > 0 {
			b.WriteByte(',')
		}
		if nested {
			b.WriteByte('[')
		}
		for j := 0; j < 64; j++ {
			if j > 0 {
				b.WriteByte(',')
			}
			b.WriteString(strconv.FormatFloat(float64(float32(r.NormFloat64())), 'g', -1, 32))
		}
		if nested {
			b.WriteByte(']')
		}
	}
	b.WriteString(`]}],"outputs":[{"name":"output_0"}]}`)
	return []byte(b.String())
}

// benchIDs builds a request with one INT64 input of shape [rows,64] of
// small categorical ids (0 to 99): its tensor is larger than its JSON, so
// it is decoded through the parser's arena.
func benchIDs(rows int) []byte {
	r := rand.New(rand.NewSource(1))
	var b strings.Builder
	fmt.Fprintf(&b, `{"inputs":[{"name":"ids","shape":[%d,64],"datatype":"INT64","data":[`, rows)
	for i := 0; i < rows*64; i++ {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString(strconv.Itoa(r.Intn(100)))
	}
	b.WriteString(`]}]}`)
	return []byte(b.String())
}

// benchBinary builds the same request with the binary tensor extension.
func benchBinary(rows int) ([]byte, int) {
	r := rand.New(rand.NewSource(1))
	n := rows * 64
	header := fmt.Sprintf(`{"id":"bench","inputs":[{"name":"features","shape":[%d,64],"datatype":"FP32","parameters":{"binary_data_size":%d}}],"outputs":[{"name":"output_0","parameters":{"binary_data":true}}]}`, rows, 4*n)
	body := []byte(header)
	for i := 0; i < n; i++ {
		body = binary.LittleEndian.AppendUint32(body, math.Float32bits(float32(r.NormFloat64())))
	}
	return body, len(header)
}

func BenchmarkParseInferRequest(b *testing.B) {
	type bc struct {
		name      string
		body      []byte
		headerLen int
	}
	var cases []bc
	for _, rows := range []int{1, 64} {
		cases = append(cases, bc{fmt.Sprintf("json/batch=%d", rows), benchJSON(rows, false), 0})
		cases = append(cases, bc{fmt.Sprintf("json-nested/batch=%d", rows), benchJSON(rows, true), 0})
		body, h := benchBinary(rows)
		cases = append(cases, bc{fmt.Sprintf("binary/batch=%d", rows), body, h})
		cases = append(cases, bc{fmt.Sprintf("json-int64-ids/batch=%d", rows), benchIDs(rows), 0})
	}
	for _, c := range cases {
		b.Run(c.name, func(b *testing.B) {
			b.SetBytes(int64(len(c.body)))
			b.ReportAllocs()
			for b.Loop() {
				req, err := ParseInferRequest(c.body, c.headerLen)
				if err != nil || len(req.Inputs) != 1 {
					b.Fatal(err)
				}
			}
		})
	}
}

func BenchmarkAppendInferResponse(b *testing.B) {
	for _, rows := range []int{1, 64} {
		r := rand.New(rand.NewSource(2))
		out, _ := servables.NewTensor("output_0", servables.Float32, []int64{int64(rows), 64})
		for i := range out.Float32s() {
			out.Float32s()[i] = r.Float32()
		}
		for _, bin := range []bool{false, true} {
			resp := InferResponse{ModelName: "pctr", ID: "bench", Outputs: []servables.Tensor{out}, BinaryOutputs: bin}
			name := "json"
			if bin {
				name = "binary"
			}
			b.Run(fmt.Sprintf("%s/batch=%d", name, rows), func(b *testing.B) {
				b.ReportAllocs()
				var dst []byte
				for b.Loop() {
					var err error
					dst, _, err = AppendInferResponse(dst[:0], resp)
					if err != nil {
						b.Fatal(err)
					}
				}
				b.SetBytes(int64(len(dst)))
			})
		}
	}
}
