package ba

import (
	"errors"
	"math"
	"math/rand"
	"strconv"
	"strings"
	"testing"

	"github.com/groveml/grove/internal/jsonscan"
)

// TestParseFloatRoundsAsStrconv converts tensor_content strings of the
// forms clients send (float32 values printed as doubles, as Python
// clients print them; shortest float32 and float64 forms; values next to
// a float32 rounding midpoint; random digits and exponents) at both bit
// sizes: every one gives strconv's correctly rounded value, bit for bit,
// and ±Inf past the type's range as SimpleAtof does.
func TestParseFloatRoundsAsStrconv(t *testing.T) {
	r := rand.New(rand.NewSource(7))
	var scratch []byte
	check := func(s string) {
		t.Helper()
		for _, bits := range []int{32, 64} {
			got, ok := parseFloat([]byte(s), bits, &scratch)
			want, err := jsonscan.ParseFloat([]byte(s), bits) // strconv's value, at any length
			if err != nil && !errors.Is(err, strconv.ErrRange) {
				t.Fatalf("%q: strconv: %v", s, err)
			}
			if !ok || math.Float64bits(got) != math.Float64bits(want) {
				t.Fatalf("%q at %d bits: got %v (%#x) %v, want %v (%#x)", s, bits, got, math.Float64bits(got), ok, want, math.Float64bits(want))
			}
		}
	}
	for _, s := range []string{"-0.9682539701461792", "0.015872959047555923", "3.4028234663852886e38", "3.4028235677973366e38",
		"3.4028235677973367e38", "1.401298464324817e-45", "16777217", "0.30000000000000004", "1e-22", "9.999999999999999e22", "-0"} {
		check(s)
	}
	for i := range 300000 {
		var s string
		switch i % 5 {
		case 0:
			s = strconv.FormatFloat(float64(math.Float32frombits(r.Uint32())), 'g', -1, 64)
		case 1:
			s = strconv.FormatFloat(float64(float32(r.NormFloat64())), 'g', -1, 64)
		case 2:
			s = strconv.FormatFloat(float64(math.Float32frombits(r.Uint32())), 'g', -1, 32)
		case 3:
			v := math.Float32frombits(r.Uint32() &^ (1 << 31))
			mid := (float64(v) + float64(math.Nextafter32(v, float32(math.Inf(1))))) / 2
			s = strconv.FormatFloat(mid, 'e', r.Intn(25), 64)
		case 4:
			var b strings.Builder
			if r.Intn(2) == 0 {
				b.WriteByte('-')
			}
			b.WriteByte(byte('1' + r.Intn(9)))
			for k := r.Intn(24); k > 0; k-- {
				b.WriteByte(byte('0' + r.Intn(10)))
			}
			b.WriteByte('.')
			for k := 1 + r.Intn(20); k > 0; k-- {
				b.WriteByte(byte('0' + r.Intn(10)))
			}
			if r.Intn(2) == 0 {
				b.WriteString("e" + strconv.Itoa(r.Intn(90)-45))
			}
			s = b.String()
		}
		if strings.ContainsAny(s, "NI") { // NaN, Inf
			continue
		}
		check(s)
	}
}

// A tensor_content string of a million digits and an exponent past the
// exponent's clamp is 0, as written: the clamped exponent does not cancel
// with the digits into a fast-path one (1e18).
func TestParseFloatHugeExponentWithManyDigits(t *testing.T) {
	var scratch []byte
	for _, lit := range []string{"1", "-1", "123"} {
		lit += strings.Repeat("0", 1000018) + "e-10000000"
		for _, bits := range []int{32, 64} {
			if got, ok := parseFloat([]byte(lit), bits, &scratch); !ok || got != 0 {
				t.Errorf("%.8s…e-10000000 at %d bits: %v %v, want 0", lit, bits, got, ok)
			}
		}
	}
}

// A value whose integer part has more digits than strconv keeps (800) is
// read as written: "1", 1,000 zeros, "e-1000" is 1, not strconv's 1e-201.
func TestParseFloatLongIntegerPartReadsAsWritten(t *testing.T) {
	var scratch []byte
	for _, c := range []struct {
		digits, exp string
		want        float64
	}{{"1", "e-1000", 1}, {"-1", "e-1000", -1}, {"25", "e-1001", 2.5}} {
		lit := c.digits + strings.Repeat("0", 1000) + c.exp
		for _, bits := range []int{32, 64} {
			if got, ok := parseFloat([]byte(lit), bits, &scratch); !ok || got != c.want {
				t.Errorf("%s, 1,000 zeros, %s at %d bits: %v %v, want %v", c.digits, c.exp, bits, got, ok, c.want)
			}
		}
	}
}
