package jsonscan

import (
	"encoding/json"
	"math/rand"
	"strings"
	"testing"
)

// scanDoc validates doc as one JSON document the way the protocols' parsers
// do: a value between optional whitespace.
func scanDoc(doc []byte, rapidjson bool) *Scanner {
	s := &Scanner{Buf: doc, RapidjsonNumbers: rapidjson}
	s.SkipWS()
	if s.Pos >= len(doc) {
		s.Fail(DocumentEmpty, s.Pos)
		return s
	}
	if s.SkipValue() {
		s.SkipWS()
		if s.Pos < len(doc) {
			s.Fail(RootNotSingular, s.Pos)
		}
	}
	return s
}

func TestScanStringDecodesEscapes(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{`""`, ""},
		{`"plain ASCII, longer than eight bytes"`, "plain ASCII, longer than eight bytes"},
		{`"\"\\\/\b\f\n\r\t"`, "\"\\/\b\f\n\r\t"},
		{`"\u0041\u00e9\u20AC"`, "Aé€"},
		{`"\ud83d\ude00 and \uD834\uDD1E"`, "😀 and 𝄞"},
		{`"é😀 raw UTF-8"`, "é😀 raw UTF-8"},
		{`"a\u0000b"`, "a\x00b"},
		{`"` + strings.Repeat(`x\n`, 20) + `"`, strings.Repeat("x\n", 20)},
	} {
		s := Scanner{Buf: []byte(tc.in)}
		ref, ok := s.ScanString()
		if !ok {
			t.Errorf("%s: %v at %d", tc.in, s.Err, s.ErrPos)
			continue
		}
		if s.Pos != len(tc.in) || ref.Start != 1 || ref.End != len(tc.in)-1 {
			t.Errorf("%s: Pos %d, Str %+v", tc.in, s.Pos, ref)
		}
		if ref.Esc != strings.Contains(tc.in, `\`) {
			t.Errorf("%s: Esc %v", tc.in, ref.Esc)
		}
		if got := string(Unescape(nil, s.Buf[ref.Start:ref.End])); got != tc.want {
			t.Errorf("%s: decoded %q, want %q", tc.in, got, tc.want)
		}
	}
}

// TestErrorKindsAndPositions checks each syntax error's kind, the byte
// found wrong (rapidjson's position, which B&A tells a NUL by) and where
// its token or escape starts (OIP's position for literals, escapes and
// surrogates).
func TestErrorKindsAndPositions(t *testing.T) {
	for _, tc := range []struct {
		name, doc  string
		kind       Kind
		pos, start int
	}{
		{"empty", ``, DocumentEmpty, 0, 0},
		{"whitespace only", " \t\r\n", DocumentEmpty, 4, 4},
		{"second root", `[] {}`, RootNotSingular, 3, 3},
		{"no value", `[,]`, ValueInvalid, 1, 1},
		{"trailing comma", `[1,]`, ValueInvalid, 3, 3},
		{"misspelt literal", `[nul]`, ValueInvalid, 4, 1},
		{"literal cut short", `tru`, ValueInvalid, 3, 0},
		{"NaN", `NaN`, ValueInvalid, 0, 0},
		{"unquoted name", `{a:1}`, ObjectMissName, 1, 1},
		{"trailing comma in object", `{"a":1,}`, ObjectMissName, 7, 7},
		{"missing colon", `{"a" 1}`, ObjectMissColon, 5, 5},
		{"missing comma in object", `{"a":1 "b":2}`, ObjectMissCommaOrCurlyBracket, 7, 7},
		{"unclosed object", `{"a":1`, ObjectMissCommaOrCurlyBracket, 6, 6},
		{"missing comma in array", `[1 2]`, ArrayMissCommaOrSquareBracket, 3, 3},
		{"unterminated string", `"abc`, StringUnterminated, 4, 4},
		{"unterminated after escape", `"a\"`, StringUnterminated, 4, 4},
		{"raw tab", "\"a\tb\"", StringControl, 2, 2},
		{"NUL in string", "\"a\x00\"", StringControl, 2, 2},
		{"bad escape", `"ab\x"`, StringEscapeInvalid, 4, 3},
		{"backslash at the end", `"\`, StringEscapeInvalid, 2, 1},
		{"bad hex", `"\u12G4"`, StringHexInvalid, 5, 1},
		{"short hex", `"\u12"`, StringHexInvalid, 5, 1},
		{"bad hex in low half", `"x\ud800\udcZ0"`, StringHexInvalid, 12, 2},
		{"lone high surrogate", `"x\ud800"`, StringSurrogateInvalid, 8, 2},
		{"high surrogate then text", `"\ud800ab"`, StringSurrogateInvalid, 7, 1},
		{"high surrogate then another escape", `"\ud800\n"`, StringSurrogateInvalid, 8, 1},
		{"high surrogate then BMP", `"\ud800\u0041"`, StringSurrogateInvalid, 9, 1},
		{"lone low surrogate", `"ab\udc00"`, StringSurrogateInvalid, 3, 3},
		{"invalid UTF-8", "\"a\xffb\"", StringInvalidUTF8, 2, 2},
		{"UTF-8 surrogate", "\"\xed\xa0\x80\"", StringInvalidUTF8, 1, 1},
		{"overlong UTF-8", "\"\xc0\xaf\"", StringInvalidUTF8, 1, 1},
		{"minus alone", `[-]`, NumberMissDigit, 2, 1},
		{"minus letter", `-x`, NumberMissDigit, 1, 0},
		{"leading plus", `+1`, ValueInvalid, 0, 0},
		{"leading zero", `01`, RootNotSingular, 1, 1},
		{"missing fraction", `[1.]`, NumberMissFraction, 3, 1},
		{"missing fraction, exponent", `-1.e5`, NumberMissFraction, 3, 0},
		{"missing exponent", `1e`, NumberMissExponent, 2, 0},
		{"exponent sign only", `[2.5E+]`, NumberMissExponent, 6, 1},
	} {
		s := scanDoc([]byte(tc.doc), false)
		if s.Err != tc.kind || s.ErrPos != tc.pos || s.ErrStart != tc.start {
			t.Errorf("%s %q: %v at %d (start %d), want %v at %d (start %d)",
				tc.name, tc.doc, s.Err, s.ErrPos, s.ErrStart, tc.kind, tc.pos, tc.start)
		}
	}
}

// TestRapidjsonNumbers checks that RapidjsonNumbers refuses exactly the
// numbers rapidjson 1.1.0 cannot hold in a double (each case's answer is
// rapidjson's, Parse<kParseFullPrecisionFlag>), and that without it the
// same literals are valid JSON.
func TestRapidjsonNumbers(t *testing.T) {
	nines := func(n int) string { return strings.Repeat("9", n) }
	zeros := func(n int) string { return strings.Repeat("0", n) }
	ones := strings.Repeat("1", 40)
	for _, tc := range []struct {
		name, num      string
		rapidjson, std Kind // the error with RapidjsonNumbers, and without
	}{
		{"exponent 308", `1e308`, OK, OK},
		{"exponent 309", `1e309`, NumberTooBig, OK},
		{"exponent 309 with sign", `-1E+309`, NumberTooBig, OK},
		{"negative exponent", `1e-99999`, OK, OK},
		{"a fraction digit raises the limit", `0.1e309`, OK, OK},
		{"each fraction digit by one", `0.01e310`, OK, OK},
		{"past the raised limit", `0.1e310`, NumberTooBig, OK},
		{"fraction zeros raise it too", `0.` + zeros(40) + `1e349`, OK, OK},
		{"past it", `0.` + zeros(40) + `1e350`, NumberTooBig, OK},
		{"17 significant digits raise it", `1.` + ones + `e325`, OK, OK},
		{"the 18th does not", `1.` + ones + `e326`, NumberTooBig, OK},
		{"integer digits do not lower it", `123456789012345678901234e308`, OK, OK},
		{"nor raise it", `123456789012345678901234e309`, NumberTooBig, OK},
		{"exponent beyond int64", `1e99999999999999999999`, NumberTooBig, OK},
		{"308 nines", nines(308), OK, OK},
		{"309 nines", nines(309), NumberTooBig, OK},
		{"310 nines, negative", `-` + nines(310), NumberTooBig, OK},
		{"1e308 written out", `1` + zeros(308), OK, OK},
		{"309 digits from DBL_MAX's", `17976931348623157` + zeros(292), OK, OK},
		{"too big before a missing fraction", nines(320) + `.`, NumberTooBig, NumberMissFraction},
		{"too big before a missing exponent", nines(320) + `.5e+`, NumberTooBig, NumberMissExponent},
		{"uint64 max", `18446744073709551615`, OK, OK},
		{"beyond uint64", `18446744073709551616e288`, OK, OK},
		{"int64 min", `-9223372036854775808e308`, OK, OK},
		{"beyond int64 min", `-9223372036854775809e309`, NumberTooBig, OK},
	} {
		s := scanDoc([]byte(tc.num), true)
		if s.Err != tc.rapidjson {
			t.Errorf("%s: %v, want %v", tc.name, s.Err, tc.rapidjson)
		}
		if s.Err == NumberTooBig && (s.ErrPos != 0 || s.ErrStart != 0) {
			t.Errorf("%s: at %d (start %d), want the number's start", tc.name, s.ErrPos, s.ErrStart)
		}
		if std := scanDoc([]byte(tc.num), false); std.Err != tc.std {
			t.Errorf("%s without RapidjsonNumbers: %v, want %v", tc.name, std.Err, tc.std)
		}
	}
}

func TestLexNumberDescribesTheLiteral(t *testing.T) {
	type D = Number
	for _, tc := range []struct {
		lit   string
		want  Number // but Start, End and IsInt
		isInt bool
	}{
		{"0", D{}, true},
		{"-0", D{Neg: true}, true},
		{"123", D{Mant: 123}, true},
		{"-1.25e-3", D{Mant: 125, E: -5, Neg: true}, false},
		{"0.00125", D{Mant: 125, E: -5}, false},
		{"1E+2", D{Mant: 1, E: 2}, false},
		{"12345678901234567890123", D{Mant: 1234567890123456789, E: 4, Trunc: true}, true},
		{"10000000000000000000000", D{Mant: 1000000000000000000, E: 4}, true},
		{"1.00000000000000000001", D{Mant: 1000000000000000000, E: -18, Trunc: true}, false},
		{"1e99999999", D{Mant: 1, E: 9999999}, false},
		{"0.5e-99999999", D{Mant: 5, E: -10000000}, false},
	} {
		s := Scanner{Buf: []byte(" " + tc.lit + ","), Pos: 1}
		var n Number
		want := tc.want
		want.Start, want.End, want.IsInt = 1, 1+len(tc.lit), tc.isInt
		if !s.LexNumber(&n) || n != want || s.Pos != n.End {
			t.Errorf("%s: %+v (Pos %d, %v), want %+v", tc.lit, n, s.Pos, s.Err, want)
		}
	}
}

// TestSkipValueAgreesWithEncodingJSON compares SkipValue with
// encoding/json on valid documents and on each of their prefixes, which
// are all invalid.
func TestSkipValueAgreesWithEncodingJSON(t *testing.T) {
	docs := []string{
		`{"a":[1,-2.5e3,true,false,null,{"b":{}},[]],"c":"\u00e9\n","d":{"e":[[[]]]}}`,
		`[0, -0, 0.5, 1E2, "x", {"y" : [ ] } ]`,
		` "top-level string" `,
		`123`,
		strings.Repeat("[", 200) + strings.Repeat("]", 200),
		strings.Repeat(`{"k":`, 100) + `0` + strings.Repeat("}", 100),
	}
	for _, doc := range docs {
		if s := scanDoc([]byte(doc), false); s.Err != OK {
			t.Errorf("%.40s: %v at %d", doc, s.Err, s.ErrPos)
		}
		for i := 0; i < len(doc); i++ {
			prefix := []byte(doc[:i])
			if json.Valid(prefix) {
				continue // a number cut short, or a value before trailing blanks
			}
			if s := scanDoc(prefix, false); s.Err == OK {
				t.Errorf("%q: accepted", prefix)
			}
		}
	}
}

// TestSkipValueDeepNesting checks that nesting costs no goroutine stack:
// a million levels are skipped, and a released Scanner lets the grown
// container stack go.
func TestSkipValueDeepNesting(t *testing.T) {
	const depth = 1 << 20
	doc := []byte(strings.Repeat(`[{"a":`, depth/2) + `1` + strings.Repeat(`}]`, depth/2))
	s := scanDoc(doc, false)
	if s.Err != OK {
		t.Fatalf("%v at %d", s.Err, s.ErrPos)
	}
	if cap(s.stack) < depth/64 {
		t.Fatalf("stack of %d words for %d levels", cap(s.stack), depth)
	}
	s.Release()
	if s.Buf != nil || s.stack != nil {
		t.Fatalf("released scanner keeps Buf (%d bytes) or a stack of %d words", len(s.Buf), cap(s.stack))
	}
	bad := append(doc[:len(doc)-1:len(doc)-1], ')')
	s.Reset(bad)
	if s.SkipValue() || s.Err != ArrayMissCommaOrSquareBracket || s.ErrPos != len(bad)-1 {
		t.Fatalf("%v at %d, want %v at %d", s.Err, s.ErrPos, ArrayMissCommaOrSquareBracket, len(bad)-1)
	}
}

func TestResetKeepsTheStackOnly(t *testing.T) {
	s := Scanner{Buf: []byte("[[1]] x"), RapidjsonNumbers: true}
	if !s.SkipValue() {
		t.Fatal(s.Err)
	}
	s.Fail(RootNotSingular, 6)
	stack := s.stack
	s.Reset([]byte("2"))
	if s.Pos != 0 || s.Err != OK || s.ErrPos != 0 || s.ErrStart != 0 || s.RapidjsonNumbers || string(s.Buf) != "2" {
		t.Fatalf("after Reset: %+v", s)
	}
	if cap(s.stack) == 0 || &s.stack[:1][0] != &stack[:1][0] {
		t.Fatal("Reset dropped the stack's memory")
	}
}

func TestFailKeepsTheFirstError(t *testing.T) {
	s := Scanner{Buf: []byte(`[1 2`)}
	if s.Fail(ValueInvalid, 1) || s.Fail(ArrayMissCommaOrSquareBracket, 3) {
		t.Fatal("Fail returned true")
	}
	if s.Err != ValueInvalid || s.ErrPos != 1 {
		t.Fatalf("%v at %d, want the first error", s.Err, s.ErrPos)
	}
}

func TestPlainEndStopsAtTheFirstSpecialByte(t *testing.T) {
	r := rand.New(rand.NewSource(1))
	special := func(c byte) bool { return c < 0x20 || c == '"' || c == '\\' || c >= 0x80 }
	for n := 0; n < 20000; n++ {
		b := make([]byte, r.Intn(40))
		for i := range b {
			b[i] = byte(0x20 + r.Intn(0x60))
			if r.Intn(30) == 0 {
				b[i] = byte(r.Intn(256))
			}
		}
		from := 0
		if len(b) > 0 {
			from = r.Intn(len(b) + 1)
		}
		want := from
		for want < len(b) && !special(b[want]) {
			want++
		}
		if got := PlainEnd(b, from); got != want {
			t.Fatalf("PlainEnd(%q, %d) = %d, want %d", b, from, got, want)
		}
	}
}

func TestEveryKindHasAName(t *testing.T) {
	seen := map[string]bool{"OK": true}
	for _, k := range Kinds() {
		name := k.String()
		if strings.HasPrefix(name, "Kind(") || seen[name] {
			t.Errorf("kind %d: name %q", k, name)
		}
		seen[name] = true
	}
	if got := numKinds.String(); got != "Kind(18)" {
		t.Errorf("an unknown kind is named %q", got)
	}
}

// TestOpenAndNextWalkContainers walks objects and arrays element by
// element, as the protocols' parsers do, and checks the errors where a
// ',' or the closing bracket is missing.
func TestOpenAndNextWalkContainers(t *testing.T) {
	for _, tc := range []struct {
		doc    string
		elems  int  // elements or members walked
		err    Kind // OK, or the error after them
		errPos int
	}{
		{`[]`, 0, OK, 0},
		{`[ ]`, 0, OK, 0},
		{`{ }`, 0, OK, 0},
		{`[1]`, 1, OK, 0},
		{`[ 1 , 2 ,3 ]`, 3, OK, 0},
		{`{"a":1, "b" : [2]}`, 2, OK, 0},
		{`[1 2]`, 1, ArrayMissCommaOrSquareBracket, 3},
		{`{"a":1 "b":2}`, 1, ObjectMissCommaOrCurlyBracket, 7},
		{`[1}`, 1, ArrayMissCommaOrSquareBracket, 2},
		{`{"a":1]`, 1, ObjectMissCommaOrCurlyBracket, 6},
		{`[`, 0, ValueInvalid, 1},
	} {
		s := Scanner{Buf: []byte(tc.doc)}
		end := closer(tc.doc[0])
		n, ok := 0, true
		for more := s.Open(); more && ok; {
			if end == '}' {
				_, ok = s.MemberName()
			}
			if ok = ok && s.SkipValue(); ok {
				n++
				more, ok = s.Next(end)
			}
		}
		if n != tc.elems || s.Err != tc.err || s.ErrPos != tc.errPos || ok != (tc.err == OK) {
			t.Errorf("%s: %d elements, %v at %d, want %d, %v at %d", tc.doc, n, s.Err, s.ErrPos, tc.elems, tc.err, tc.errPos)
		}
		if tc.err == OK && s.Pos != len(tc.doc) {
			t.Errorf("%s: stopped at %d", tc.doc, s.Pos)
		}
	}
}
