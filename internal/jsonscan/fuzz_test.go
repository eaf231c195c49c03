package jsonscan

import (
	"encoding/json"
	"math"
	"testing"
	"unicode/utf8"
)

// fuzzSeeds start FuzzSkipValue; the same documents are checked in under
// testdata/fuzz/FuzzSkipValue.
var fuzzSeeds = []string{
	``,
	`{"a":[1,-2.5e3,true,false,null,{"b":{}},[]],"c":"\u00e9\n\ud83d\ude00","d":"\/\b\f\r\t\\\""}`,
	`[0,-0,0.5,1E+2,1e-2,123456789012345678901234567890,0.000000000000000000001]`,
	`"\ud800\udc00 \ud800 \udc00"`,
	`"\u12G4"`,
	"\"a\x00b\" \"\xff\" \"\xed\xa0\x80\" \"a\tb\"",
	`{"a" 1} {"a":1 "b":2} {a:1} {"a":1,}`,
	`[1,] [1 2] [-] [1.] [1e+] [01] [+1] [nul] [NaN] [Infinity]`,
	`[1e308,1e309,-1e309,0.1e309,0.1e310]`,
	`999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999`,
	`[[[[[[[[[[{"a":[{"b":[[[]]]}]}]]]]]]]]]]`,
	`{"request":[{"model_path":"m","tensors":[{"data_type":"FLOAT","tensor_shape":[1],"tensor_content":["1.5"]}]}]}`,
	`{"inputs":[{"name":"x","shape":[2],"datatype":"FP32","data":[1.5,-2e-3]}]} x`,
}

// FuzzSkipValue checks the scanner against encoding/json on any input:
// what it accepts is valid JSON, and valid JSON it refuses only for what
// RFC 8259 allows but it does not (invalid UTF-8, lone surrogate escapes)
// or, with RapidjsonNumbers, for a number too big for rapidjson. A string
// it accepts decodes as encoding/json decodes it, a number converts as
// strconv converts it, and RapidjsonNumbers changes nothing but adding
// NumberTooBig.
func FuzzSkipValue(f *testing.F) {
	for _, s := range fuzzSeeds {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, doc []byte) {
		std := scanDoc(doc, false)
		rj := scanDoc(doc, true)
		for _, s := range []*Scanner{std, rj} {
			if s.Err == OK {
				continue
			}
			if s.Err >= numKinds || s.ErrPos < 0 || s.ErrPos > len(doc) || s.ErrStart < 0 || s.ErrStart > s.ErrPos {
				t.Fatalf("%v at %d (start %d) in %d bytes", s.Err, s.ErrPos, s.ErrStart, len(doc))
			}
		}
		if rj.Err != NumberTooBig && (rj.Err != std.Err || rj.ErrPos != std.ErrPos || rj.ErrStart != std.ErrStart || rj.Pos != std.Pos) {
			t.Fatalf("RapidjsonNumbers changes %v at %d to %v at %d", std.Err, std.ErrPos, rj.Err, rj.ErrPos)
		}
		valid := json.Valid(doc)
		switch {
		case std.Err == OK && !valid:
			t.Fatalf("accepted invalid JSON %q", doc)
		case std.Err != OK && valid && std.Err != StringInvalidUTF8 && std.Err != StringSurrogateInvalid:
			t.Fatalf("refused valid JSON %q: %v at %d", doc, std.Err, std.ErrPos)
		case std.Err != OK:
			return
		}
		// A lone value: check its decoding.
		s := Scanner{Buf: doc}
		s.SkipWS()
		switch c := s.Peek(); {
		case c == '"':
			ref, ok := s.ScanString()
			var want string
			if err := json.Unmarshal(doc, &want); !ok || err != nil {
				t.Fatalf("%q: %v, %v", doc, s.Err, err)
			}
			if got := string(Unescape(nil, doc[ref.Start:ref.End])); got != want || !utf8.ValidString(got) {
				t.Fatalf("%q decodes to %q, encoding/json says %q", doc, got, want)
			}
		case c == '-' || IsDigit(c):
			var n Number
			if !s.LexNumber(&n) {
				t.Fatalf("%q: %v", doc, s.Err)
			}
			lit := string(doc[n.Start:n.End])
			for _, bits := range []int{32, 64} {
				got, ok := n.Float(doc, bits)
				want, err := ParseFloat([]byte(lit), bits) // strconv's value, at any length
				if ok != (err == nil) || ok && math.Float64bits(got) != math.Float64bits(want) {
					t.Fatalf("%s at %d bits: %v %v, strconv %v %v", lit, bits, got, ok, want, err)
				}
			}
		}
	})
}
