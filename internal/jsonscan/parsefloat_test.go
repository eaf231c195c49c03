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
		"1" + zeros + "e-1400",                          // subnormal
		"1" + zeros + "e-2000",                          // below every subnormal
		"-1" + zeros + "e-2000",
		"1" + zeros + "e-600", // beyond float64
		"1" + zeros + "e-963", // beyond float32, not float64
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

// FuzzParseFloat builds long literals from a short mantissa, zeros around
// its decimal point and an exponent, and checks ParseFloat against the
// exact value.
func FuzzParseFloat(f *testing.F) {
	f.Add("1", uint16(1000), uint16(0), int32(-1000), false)
	f.Add("9007199254740993", uint16(800), uint16(0), int32(-800), false)
	f.Add("16777217", uint16(0), uint16(900), int32(0), true)
	f.Add("9", uint16(0), uint16(5000), int32(5000), false)
	f.Add("17976931348623159", uint16(700), uint16(3), int32(-400), false)
	f.Fuzz(func(t *testing.T, mant string, zerosAfter, zerosBefore uint16, exp int32, neg bool) {
		if mant == "" || len(mant) > 40 || strings.Trim(mant, "0123456789") != "" {
			return
		}
		if exp < -30000 || exp > 30000 {
			return
		}
		// mant, then zerosAfter zeros, with zerosBefore zeros ahead of the
		// point: 0.000…mant000…e±exp.
		var b strings.Builder
		if neg {
			b.WriteByte('-')
		}
		b.WriteString("0.")
		b.WriteString(strings.Repeat("0", int(zerosBefore)))
		b.WriteString(mant)
		b.WriteString(strings.Repeat("0", int(zerosAfter)))
		b.WriteString("e")
		b.WriteString(strconv.Itoa(int(exp)))
		lit := b.String()
		if len(lit) > 80000 {
			return
		}
		for _, bits := range []int{32, 64} {
			checkParseFloat(t, lit, bits)
		}
	})
}
