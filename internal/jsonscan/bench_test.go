package jsonscan

import (
	"math/rand"
	"strconv"
	"strings"
	"testing"
)

// benchDoc is an object of arrays of numbers, strings and small objects,
// as an unknown member of a request might hold.
func benchDoc() []byte {
	r := rand.New(rand.NewSource(1))
	var b strings.Builder
	b.WriteString(`{"numbers":[`)
	for i := 0; i < 1024; i++ {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString(strconv.FormatFloat(float64(float32(r.NormFloat64())), 'g', -1, 32))
	}
	b.WriteString(`],"strings":[`)
	for i := 0; i < 256; i++ {
		if i > 0 {
			b.WriteString(", ")
		}
		b.WriteString(`"` + strconv.FormatFloat(r.NormFloat64(), 'f', 6, 32) + `"`)
	}
	b.WriteString(`],"objects":[`)
	for i := 0; i < 256; i++ {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString(`{"name":"x` + strconv.Itoa(i) + `","shape":[1,64],"flag":true,"none":null}`)
	}
	b.WriteString(`]}`)
	return []byte(b.String())
}

func BenchmarkSkipValue(b *testing.B) {
	doc := benchDoc()
	b.SetBytes(int64(len(doc)))
	b.ReportAllocs()
	var s Scanner
	for b.Loop() {
		s.Reset(doc)
		if !s.SkipValue() || s.Pos != len(doc) {
			b.Fatal(s.Err, s.ErrPos)
		}
	}
}

func BenchmarkLexNumberFloat(b *testing.B) {
	doc := benchDoc()
	doc = doc[len(`{"numbers":[`):]
	b.ReportAllocs()
	var s Scanner
	var n Number
	for b.Loop() {
		s.Reset(doc)
		for {
			if !s.LexNumber(&n) {
				b.Fatal(s.Err, s.ErrPos)
			}
			if _, ok := n.Float(doc, 32); !ok {
				b.Fatal(string(doc[n.Start:n.End]))
			}
			if s.Peek() != ',' {
				break
			}
			s.Pos++
		}
	}
}
