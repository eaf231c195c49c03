package ba

import (
	"fmt"
	"math/rand"
	"strconv"
	"strings"
	"testing"

	"github.com/groveml/grove/servables"
)

// benchRequest builds a request of items items, each with one FLOAT tensor
// of shape [rows,64] whose values are quoted six-decimal strings, as in the
// B&A documentation.
func benchRequest(items, rows int) []byte {
	return benchRequestOf(items, rows, func(v float64) string { return strconv.FormatFloat(v, 'f', 6, 32) })
}

// benchRequestOf is benchRequest with each value written by format.
func benchRequestOf(items, rows int, format func(float64) string) []byte {
	r := rand.New(rand.NewSource(1))
	var b strings.Builder
	b.WriteString(`{"request":[`)
	for i := 0; i < items; i++ {
		if i > 0 {
			b.WriteByte(',')
		}
		fmt.Fprintf(&b, `{"model_path":"pcvr_v1/","tensors":[{"tensor_name":"features","data_type":"FLOAT","tensor_shape":[%d,64],"tensor_content":[`, rows)
		for k := 0; k < rows*64; k++ {
			if k > 0 {
				b.WriteByte(',')
			}
			b.WriteByte('"')
			b.WriteString(format(r.NormFloat64()))
			b.WriteByte('"')
		}
		b.WriteString(`]}]}`)
	}
	b.WriteString(`]}`)
	return []byte(b.String())
}

// BenchmarkParseRequest parses requests of six-decimal values, and
// (doubles) of float32 values in their shortest float64 form, as Python
// clients and grovebench write them.
func BenchmarkParseRequest(b *testing.B) {
	double := func(v float64) string { return strconv.FormatFloat(float64(float32(v)), 'g', -1, 64) }
	for _, bc := range []struct {
		name        string
		items, rows int
		body        []byte
	}{
		{"batch=1", 1, 1, nil},
		{"batch=64", 1, 64, nil},
		{"items=64x1", 64, 1, nil},
		{"batch=1/doubles", 1, 1, benchRequestOf(1, 1, double)},
		{"batch=64/doubles", 1, 64, benchRequestOf(1, 64, double)},
	} {
		body := bc.body
		if body == nil {
			body = benchRequest(bc.items, bc.rows)
		}
		b.Run(bc.name, func(b *testing.B) {
			b.SetBytes(int64(len(body)))
			b.ReportAllocs()
			for b.Loop() {
				req, err := ParseOptions{}.ParseRequest(body)
				if err != nil || req.Items[0].Err != nil {
					b.Fatal(err, req.Items[0].Err)
				}
			}
		})
	}
}

func BenchmarkAppendResponse(b *testing.B) {
	for _, rows := range []int{1, 64} {
		r := rand.New(rand.NewSource(2))
		out, _ := servables.NewTensor("PartitionedCall:0", servables.Float32, []int64{int64(rows), 64})
		for i, v := range out.Float32s() {
			_ = v
			out.Float32s()[i] = r.Float32()
		}
		results := []Result{{ModelPath: "pcvr_v1/", Outputs: []servables.Tensor{out}}}
		b.Run("batch="+strconv.Itoa(rows), func(b *testing.B) {
			b.ReportAllocs()
			var dst []byte
			for b.Loop() {
				dst = AppendResponse(dst[:0], results)
			}
			b.SetBytes(int64(len(dst)))
		})
	}
}
