package jsonscan

import (
	"errors"
	"math"
	"math/big"
	"strconv"
	"strings"
	"testing"
)

// exactly converts a decimal literal to a float of bitSize through an
// exact rational, the oracle ParseFloat is checked against; inRange is
// false when the value rounds beyond the largest finite float.
func exactly(t testing.TB, lit string, bitSize int) (f float64, inRange bool) {
	t.Helper()
	r, ok := new(big.Rat).SetString(lit)
	if !ok {
		t.Fatalf("big.Rat cannot read %.40q", lit)
	}
	if bitSize == 32 {
		g, _ := r.Float32()
		f = float64(g)
	} else {
		f, _ = r.Float64()
	}
	if strings.HasPrefix(lit, "-") && f == 0 {
		f = math.Copysign(0, -1)
	}
	return f, !math.IsInf(f, 0)
}

// checkParseFloat fails the test unless ParseFloat reads lit as the
// exact rational rounds it, with ErrRange exactly when it overflows.
func checkParseFloat(t testing.TB, lit string, bitSize int) {
	t.Helper()
	want, inRange := exactly(t, lit, bitSize)
	got, err := ParseFloat([]byte(lit), bitSize)
	if math.Float64bits(got) != math.Float64bits(want) {
		t.Errorf("ParseFloat(%.60q… (%d bytes), %d) = %g, want %g", lit, len(lit), bitSize, got, want)
	}
	if inRange != (err == nil) || err != nil && !errors.Is(err, strconv.ErrRange) {
		t.Errorf("ParseFloat(%.60q… (%d bytes), %d): error %v, want ErrRange only when out of range (%v)", lit, len(lit), bitSize, err, !inRange)
	}
	if err != nil && len(err.Error()) > 200 {
		t.Errorf("ParseFloat's error quotes the whole literal: %d bytes", len(err.Error()))
	}
}

// TestParseFloatReadsLongLiteralsRight: literals whose digits strconv
// miscounts (an integer part beyond 800 digits, an exponent cancelled by
// many digits) are read as their exact value rounds, and so are the
// halfway cases that only a digit far down decides.
func TestParseFloatReadsLongLiteralsRight(t *testing.T) {
	zeros := strings.Repeat("0", 1000)
	long := strings.Repeat("1234567890", 120)
	lits := []string{
		"1" + zeros + "e-1000",  // strconv: 1e-201
		"-1" + zeros + "e-1001", // strconv: -1e-202
		"1" + strings.Repeat("0", 20000) + "e-20000",
		"0." + strings.Repeat("0", 20000) + "9e20000",
		"0." + strings.Repeat("0", 100000) + "9e100000", // golang/go#42436
		"1" + zeros + "e-1320",                          // subnormal
		"1" + zeros + "e-2000",                          // below every subnormal
		"-1" + zeros + "e-2000",
		"1" + zeros + "e-600", // beyond float64
		"1" + zeros + "e-961", // beyond float32, not float64
		long, "-" + long + "e-1190", "0." + long, long + "." + long + "e-2400",
		// float64 halfway between 2^53 and 2^53+2: the digit 1,000 places
		// down decides, and so does a zero-padded tie (to even).
		"9007199254740993" + zeros + "1e-1000",
		"9007199254740993" + zeros + "e-1000",
		"9007199254740993." + zeros,
		"9007199254740993." + zeros + "1",
		// float32 halfway between 2^24 and 2^24+2.
		"16777217." + zeros + "1",
		"16777217" + zeros + "e-1000",
		"1" + zeros + "e", // not a literal: strconv's error
	}
	// The float64 midpoint of the most digits, (2^54-1)·2^-1075 (768
	// significant digits): exactly (a tie, to even), a little above and a
	// little below.
	mid := new(big.Rat).SetFrac(new(big.Int).Sub(new(big.Int).Lsh(big.NewInt(1), 54), big.NewInt(1)), new(big.Int).Lsh(big.NewInt(1), 1075))
	m := mid.FloatString(1075)
	below := []byte(m)
	below[len(below)-1]-- // it ends in 5
	lits = append(lits, m, m+strings.Repeat("0", 500)+"1", string(below)+strings.Repeat("9", 500))
	for _, lit := range lits {
		for _, bits := range []int{32, 64} {
			if strings.HasSuffix(lit, "e") {
				if _, err := ParseFloat([]byte(lit), bits); err == nil || errors.Is(err, strconv.ErrRange) {
					t.Errorf("ParseFloat(%.20q…e): error %v, want a syntax error", lit, err)
				}
				continue
			}
			checkParseFloat(t, lit, bits)
		}
	}
}

// TestParseFloatReadsLongHexadecimalLiteralsRight: hexadecimal literals
// (which B&A values may be) of thousands of digits read as their exact
// value rounds, where strconv misreads them.
func TestParseFloatReadsLongHexadecimalLiteralsRight(t *testing.T) {
	zeros := strings.Repeat("0", 3000)
	for _, c := range []struct {
		lit     string
		inRange bool
	}{
		{"0x1" + zeros + "p-12000", true},
		{"-0x1" + zeros + "p-12000", true},
		{"0x1" + zeros + "p-120000", true},
		{"0x0." + zeros + "1p120000", false},
		{"0x0." + zeros + "1p12003", true},
		{"0x1" + zeros + ".8p-12001", true},
		{"0x1fffffffffffff8" + zeros + "p-12004", true}, // a tie, to even
		{"0x1fffffffffffff8" + zeros + "1p-12008", true},
	} {
		x, _, err := big.ParseFloat(c.lit, 0, 20000, big.ToNearestEven)
		if err != nil {
			t.Fatalf("big.ParseFloat(%.20q…): %v", c.lit, err)
		}
		for _, bits := range []int{32, 64} {
			var want float64
			if bits == 32 {
				w, _ := x.Float32()
				want = float64(w)
			} else {
				want, _ = x.Float64()
			}
			got, err := ParseFloat([]byte(c.lit), bits)
			if math.Float64bits(got) != math.Float64bits(want) || (err == nil) != !math.IsInf(want, 0) {
				t.Errorf("ParseFloat(%.20q… (%d bytes), %d) = %g, %v; want %g", c.lit, len(c.lit), bits, got, err, want)
			}
		}
	}
}

// FuzzParseFloat builds long literals from a short mantissa, zeros
// around it and an exponent, in a fraction (0.000…mant000…e±exp) or an
// integer part (+mant000….000…E±exp), and checks ParseFloat against the
// exact value.
func FuzzParseFloat(f *testing.F) {
	f.Add("1", uint16(1000), uint16(0), int32(-1000), false, false)
	f.Add("9007199254740993", uint16(800), uint16(0), int32(-800), false, true)
	f.Add("16777217", uint16(0), uint16(900), int32(0), true, false)
	f.Add("9", uint16(0), uint16(5000), int32(5000), false, false)
	f.Add("17976931348623159", uint16(700), uint16(3), int32(-400), false, true)
	f.Fuzz(func(t *testing.T, mant string, zerosAfter, zerosBefore uint16, exp int32, neg, integer bool) {
		if mant == "" || len(mant) > 40 || strings.Trim(mant, "0123456789") != "" {
			return
		}
		if exp < -30000 || exp > 30000 {
			return
		}
		var b strings.Builder
		if neg {
			b.WriteByte('-')
		}
		if integer {
			b.WriteByte('+')
			b.WriteString(mant)
			b.WriteString(strings.Repeat("0", int(zerosAfter)))
			b.WriteByte('.')
			b.WriteString(strings.Repeat("0", int(zerosBefore)))
			b.WriteString("E")
		} else {
			b.WriteString("0.")
			b.WriteString(strings.Repeat("0", int(zerosBefore)))
			b.WriteString(mant)
			b.WriteString(strings.Repeat("0", int(zerosAfter)))
			b.WriteString("e")
		}
		b.WriteString(strconv.Itoa(int(exp)))
		lit := b.String()
		if len(lit) > 80000 || neg && integer {
			return // "-+" is no literal
		}
		for _, bits := range []int{32, 64} {
			checkParseFloat(t, strings.TrimPrefix(lit, "+"), bits)
			if integer {
				got, err := ParseFloat([]byte(lit), bits)
				want, _ := ParseFloat([]byte(strings.TrimPrefix(lit, "+")), bits)
				if math.Float64bits(got) != math.Float64bits(want) || err != nil && !errors.Is(err, strconv.ErrRange) {
					t.Errorf("ParseFloat(%.40q…) = %g, %v; without its '+' %g", lit, got, err, want)
				}
			}
		}
	})
}
