package jsonscan

import (
	"fmt"
	"math"
	"math/rand"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// checkLiteral converts s, which must be a whole JSON number, at both bit
// sizes and compares with ParseFloat (strconv's correct rounding, at any
// length).
func checkLiteral(t *testing.T, s string) {
	t.Helper()
	sc := Scanner{Buf: []byte(s)}
	var n Number
	if !sc.LexNumber(&n) || sc.Pos != len(s) {
		t.Fatalf("%q: not a JSON number (%v at %d)", s, sc.Err, sc.ErrPos)
	}
	for _, bits := range []int{32, 64} {
		got, ok := n.Float(sc.Buf, bits)
		want, err := ParseFloat([]byte(s), bits) // strconv's value, at any length
		if ok != (err == nil) {
			t.Fatalf("%q at %d bits: in range %v, strconv error %v", s, bits, ok, err)
		}
		if ok && math.Float64bits(got) != math.Float64bits(want) {
			t.Fatalf("%q at %d bits: got %v (%#x), want %v (%#x)", s, bits, got, math.Float64bits(got), want, math.Float64bits(want))
		}
	}
	if mag, ok := n.Uint(sc.Buf); n.IsInt {
		want, err := strconv.ParseUint(strings.TrimPrefix(s, "-"), 10, 64)
		if ok != (err == nil) || ok && mag != want {
			t.Fatalf("%q: integer %d %v, strconv %d %v", s, mag, ok, want, err)
		}
	} else if ok {
		t.Fatalf("%q: Uint accepted a non-integer", s)
	}
}

func TestNumberConversion(t *testing.T) {
	for _, s := range []string{
		"0", "-0", "0.0", "-0.0e-5", "1", "-1", "0.1", "0.5", "1e0", "1E+0", "1e-0",
		"16777216", "16777217", "16777219", "9007199254740993", "9007199254740992",
		"3.4028234663852886e38", "3.4028235e38", "3.4028235677973366e38", "3.4028235677973367e38", "3.40282357e38",
		"1.17549435e-38", "1.4e-45", "7e-46", "7.1e-46", "1e-50", "2.2250738585072014e-308", "4.9e-324", "2e-324", "2.5e-324",
		"1.7976931348623157e308", "1.7976931348623159e308", "1e309", "-1e309", "1e-400",
		"123456789012345678901234567890", "0.000000000000000000000000000000123456789012345678901234567890",
		"18446744073709551615", "18446744073709551616", "9223372036854775807", "-9223372036854775808", "-9223372036854775809",
		"1e22", "1e23", "1.5e-22", "9999999999999999999", "99999999999999999999", "0.30000000000000004", "100000000000000000000000e-30",
		"1e1000000000", "1e-1000000000", "0e1000000000",
	} {
		checkLiteral(t, s)
	}
	r := rand.New(rand.NewSource(3))
	for i := 0; i < 200000; i++ {
		var s string
		switch i % 6 {
		case 0: // shortest float32
			s = strconv.FormatFloat(float64(math.Float32frombits(r.Uint32())), 'g', -1, 32)
		case 1: // a float32 printed as a double, as Python clients send it
			s = strconv.FormatFloat(float64(math.Float32frombits(r.Uint32())), 'g', -1, 64)
		case 2: // shortest float64
			s = strconv.FormatFloat(math.Float64frombits(r.Uint64()), 'g', -1, 64)
		case 3: // near a float32 rounding midpoint
			v := math.Float32frombits(r.Uint32() &^ (1 << 31))
			next := math.Nextafter32(v, float32(math.Inf(1)))
			mid := (float64(v) + float64(next)) / 2
			s = strconv.FormatFloat(mid, 'e', r.Intn(25), 64)
		case 4: // random digits and exponent
			var b strings.Builder
			if r.Intn(2) == 0 {
				b.WriteByte('-')
			}
			b.WriteByte(byte('1' + r.Intn(9)))
			for k := r.Intn(24); k > 0; k-- {
				b.WriteByte(byte('0' + r.Intn(10)))
			}
			if r.Intn(2) == 0 {
				b.WriteByte('.')
				for k := 1 + r.Intn(20); k > 0; k-- {
					b.WriteByte(byte('0' + r.Intn(10)))
				}
			}
			if r.Intn(2) == 0 {
				b.WriteString("e" + strconv.Itoa(r.Intn(90)-45))
			}
			s = b.String()
		case 5: // normally distributed float32 values printed with 6 to 9 digits
			s = strconv.FormatFloat(float64(float32(r.NormFloat64()*math.Pow(10, float64(r.Intn(20)-10)))), 'g', 6+r.Intn(4), 32)
		}
		if strings.ContainsAny(s, "NI") { // NaN, Inf
			continue
		}
		checkLiteral(t, s)
	}
}

// An exponent part beyond the clamp of the exponent is not cancelled by
// as many digits: 1 and a million zeros times 10^-10000000 is 0, not 1e18.
func TestNumberHugeExponentWithManyDigits(t *testing.T) {
	for _, lit := range []string{"1", "-1", "123"} {
		lit += strings.Repeat("0", 1000018) + "e-10000000"
		s := Scanner{Buf: []byte(lit)}
		var n Number
		if !s.LexNumber(&n) || s.Pos != len(lit) {
			t.Fatalf("%.8s…: %v at %d", lit, s.Err, s.ErrPos)
		}
		for _, bits := range []int{32, 64} {
			if got, ok := n.Float(s.Buf, bits); !ok || got != 0 {
				t.Errorf("%.8s…e-10000000 at %d bits: %v %v, want 0", lit, bits, got, ok)
			}
		}
	}
}

// A number whose integer part has more digits than strconv keeps (800)
// reads as written: "1", 1,000 zeros, "e-1000" is 1, not strconv's 1e-201.
func TestNumberLongIntegerPartReadsAsWritten(t *testing.T) {
	lit := "1" + strings.Repeat("0", 1000) + "e-1000"
	s := Scanner{Buf: []byte(lit)}
	var n Number
	if !s.LexNumber(&n) || s.Pos != len(lit) {
		t.Fatalf("%.8s…: %v at %d", lit, s.Err, s.ErrPos)
	}
	for _, bits := range []int{32, 64} {
		if got, ok := n.Float(s.Buf, bits); !ok || got != 1 {
			t.Errorf("%.8s…e-1000 at %d bits: %v %v, want 1", lit, bits, got, ok)
		}
	}
}

func FuzzNumber(f *testing.F) {
	for _, s := range []string{"0", "-1.5e-3", "3.4028235677973366e38", "123456789012345678901234567890", "0.1", "1e-45", "16777217"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		sc := Scanner{Buf: []byte(s)}
		var n Number
		if !sc.LexNumber(&n) || sc.Pos != len(s) {
			return
		}
		checkLiteral(t, s)
	})
}

// Digits8 reads eight ASCII digits as their value and refuses any other
// eight bytes: every digit string of a sample, and each with one byte
// changed to every non-digit.
func TestDigits8ReadsEightDigitsAndNothingElse(t *testing.T) {
	r := rand.New(rand.NewSource(8))
	for range 20000 {
		want := uint64(r.Int63n(100000000))
		s := []byte(fmt.Sprintf("x%08d", want))
		if got, ok := Digits8(s, 1); !ok || got != want {
			t.Fatalf("Digits8(%q) = %d, %v, want %d", s[1:], got, ok, want)
		}
		k := 1 + r.Intn(8)
		for c := range 256 {
			if IsDigit(byte(c)) {
				continue
			}
			bad := slices.Clone(s)
			bad[k] = byte(c)
			if got, ok := Digits8(bad, 1); ok {
				t.Fatalf("Digits8(%q) = %d, true, want a refusal", bad[1:], got)
			}
		}
	}
	if _, ok := Digits8([]byte("1234567"), 0); ok {
		t.Error("Digits8 read past the end of a 7-byte buffer")
	}
}
