package ba

import (
	"math"
	"math/bits"
	"strconv"
)

// appendDouble appends v as rapidjson 1.1.0's Writer::Double writes it: the
// digits of Grisu2 (which are not always the shortest or the closest
// round-tripping ones, so strconv cannot be used), then Prettify's layout:
// plain notation with a ".0" suffix for integers below 1e21, "0.000ddd" down
// to 1e-6, and otherwise "d.ddde-7" with no '+' in the exponent. v must be
// finite.
func appendDouble(dst []byte, v float64) []byte {
	if v == 0 {
		if math.Signbit(v) {
			return append(dst, "-0.0"...)
		}
		return append(dst, "0.0"...)
	}
	if v < 0 {
		dst = append(dst, '-')
		v = -v
	}
	var buf [24]byte
	n, k := grisu2(v, &buf)
	return prettify(dst, buf[:n], k)
}

// prettify lays out the decimal digits d times 10^k.
func prettify(dst, d []byte, k int) []byte {
	n := len(d)
	kk := n + k // 10^(kk-1) <= v < 10^kk
	switch {
	case k >= 0 && kk <= 21: // 1234e7 -> 12340000000.0
		dst = append(dst, d...)
		for i := n; i < kk; i++ {
			dst = append(dst, '0')
		}
		return append(dst, '.', '0')
	case kk > 0 && kk <= 21: // 1234e-2 -> 12.34
		dst = append(dst, d[:kk]...)
		dst = append(dst, '.')
		return append(dst, d[kk:]...)
	case kk > -6 && kk <= 0: // 1234e-6 -> 0.001234
		dst = append(dst, '0', '.')
		for i := kk; i < 0; i++ {
			dst = append(dst, '0')
		}
		return append(dst, d...)
	case kk < -324: // below maxDecimalPlaces (unreachable for doubles)
		return append(dst, "0.0"...)
	case n == 1: // 1e30
		dst = append(dst, d[0], 'e')
		return strconv.AppendInt(dst, int64(kk-1), 10)
	default: // 1234e30 -> 1.234e33
		dst = append(dst, d[0], '.')
		dst = append(dst, d[1:]...)
		dst = append(dst, 'e')
		return strconv.AppendInt(dst, int64(kk-1), 10)
	}
}

// diyFp is an unnormalised floating-point number f * 2^e.
type diyFp struct {
	f uint64
	e int
}

// mul multiplies the 64-bit significands, keeping the rounded high half.
func (a diyFp) mul(b diyFp) diyFp {
	hi, lo := bits.Mul64(a.f, b.f)
	if lo&(1<<63) != 0 {
		hi++
	}
	return diyFp{hi, a.e + b.e + 64}
}

// grisu2 writes the Grisu2 digits of v > 0 into buf and returns their count
// and the decimal exponent K, v ~ digits * 10^K. It follows rapidjson 1.1.0
// step for step (boundaries narrowed by one unit each side, its cached-power
// selection, and no rounding correction past the ninth fractional digit) so
// that the digits are the same.
func grisu2(v float64, buf *[24]byte) (int, int) {
	u := math.Float64bits(v)
	f := u & (1<<52 - 1)
	e := -1074
	if be := int(u >> 52 & 0x7FF); be != 0 {
		f += 1 << 52
		e = be - 1075
	}
	// Upper boundary, normalised so that bit 63 is set.
	plus := diyFp{f<<1 + 1, e - 1}
	for plus.f&(1<<53) == 0 {
		plus.f <<= 1
		plus.e--
	}
	plus.f <<= 10
	plus.e -= 10
	// Lower boundary, closer when v is a power of two.
	minus := diyFp{f<<1 - 1, e - 1}
	if f == 1<<52 {
		minus = diyFp{f<<2 - 1, e - 2}
	}
	minus.f <<= uint(minus.e - plus.e)
	minus.e = plus.e

	cached, K := cachedPower(plus.e)
	s := bits.LeadingZeros64(f)
	w := diyFp{f << s, e - s}.mul(cached)
	wp := plus.mul(cached)
	wm := minus.mul(cached)
	wm.f++
	wp.f--
	return digitGen(w, wp, wp.f-wm.f, buf, K)
}

var pow10u32 = [10]uint32{1, 10, 100, 1000, 10000, 100000, 1000000, 10000000, 100000000, 1000000000}

// countDecimalDigit32 is rapidjson's digit count, capped at 9.
func countDecimalDigit32(n uint32) int {
	for d := 1; d < 9; d++ {
		if n < pow10u32[d] {
			return d
		}
	}
	return 9
}

func digitGen(w, mp diyFp, delta uint64, buf *[24]byte, K int) (int, int) {
	shift := uint(-mp.e)
	one := uint64(1) << shift
	wpw := mp.f - w.f
	p1 := uint32(mp.f >> shift)
	p2 := mp.f & (one - 1)
	kappa := countDecimalDigit32(p1)
	n := 0
	for kappa > 0 {
		var d uint32
		switch kappa { // constant divisors compile to multiplications
		case 9:
			d, p1 = p1/100000000, p1%100000000
		case 8:
			d, p1 = p1/10000000, p1%10000000
		case 7:
			d, p1 = p1/1000000, p1%1000000
		case 6:
			d, p1 = p1/100000, p1%100000
		case 5:
			d, p1 = p1/10000, p1%10000
		case 4:
			d, p1 = p1/1000, p1%1000
		case 3:
			d, p1 = p1/100, p1%100
		case 2:
			d, p1 = p1/10, p1%10
		default:
			d, p1 = p1, 0
		}
		if d != 0 || n != 0 {
			buf[n] = byte('0' + d)
			n++
		}
		kappa--
		if tmp := uint64(p1)<<shift + p2; tmp <= delta {
			grisuRound(buf[:n], delta, tmp, uint64(pow10u32[kappa])<<shift, wpw)
			return n, K + kappa
		}
	}
	for {
		p2 *= 10
		delta *= 10
		d := byte(p2 >> shift)
		if d != 0 || n != 0 {
			buf[n] = '0' + d
			n++
		}
		p2 &= one - 1
		kappa--
		if p2 < delta {
			var scale uint64
			if -kappa < 9 {
				scale = uint64(pow10u32[-kappa])
			}
			grisuRound(buf[:n], delta, p2, one, wpw*scale)
			return n, K + kappa
		}
	}
}

// grisuRound moves the last digit towards the value while it stays inside
// the rounding interval.
func grisuRound(d []byte, delta, rest, tenKappa, wpw uint64) {
	for rest < wpw && delta-rest >= tenKappa &&
		(rest+tenKappa < wpw || wpw-rest > rest+tenKappa-wpw) {
		d[len(d)-1]--
		rest += tenKappa
	}
}

// cachedPower returns the cached power of ten for a boundary with binary
// exponent e, and its decimal exponent, chosen as rapidjson 1.1.0 does.
func cachedPower(e int) (diyFp, int) {
	index := int(cachedIndex[e-minBoundaryExp])
	return cachedPowers[index], 348 - index*8
}

// The binary exponents of normalised upper boundaries of positive doubles.
const (
	minBoundaryExp = -1137
	maxBoundaryExp = 960
)

// cachedIndex maps each boundary exponent to its cachedPowers index,
// computed once with rapidjson's floating-point formula.
var cachedIndex = func() (t [maxBoundaryExp - minBoundaryExp + 1]uint8) {
	for e := minBoundaryExp; e <= maxBoundaryExp; e++ {
		dk := float64(float64(-61-e)*0.30102999566398114) + 347 // explicit rounding: no fused multiply-add
		k := int(dk)
		if dk-float64(k) > 0 {
			k++
		}
		t[e-minBoundaryExp] = uint8(k>>3 + 1)
	}
	return t
}()

// cachedPowers holds 10^k for k = -348, -340, ..., 340 as a 64-bit
// significand rounded to nearest and a binary exponent. The table was
// computed with math/big (TestCachedPowers recomputes it).
var cachedPowers = [87]diyFp{
	{0xfa8fd5a0081c0288, -1220}, // 1e-348
	{0xbaaee17fa23ebf76, -1193}, // 1e-340
	{0x8b16fb203055ac76, -1166}, // 1e-332
	{0xcf42894a5dce35ea, -1140}, // 1e-324
	{0x9a6bb0aa55653b2d, -1113}, // 1e-316
	{0xe61acf033d1a45df, -1087}, // 1e-308
	{0xab70fe17c79ac6ca, -1060}, // 1e-300
	{0xff77b1fcbebcdc4f, -1034}, // 1e-292
	{0xbe5691ef416bd60c, -1007}, // 1e-284
	{0x8dd01fad907ffc3c, -980},  // 1e-276
	{0xd3515c2831559a83, -954},  // 1e-268
	{0x9d71ac8fada6c9b5, -927},  // 1e-260
	{0xea9c227723ee8bcb, -901},  // 1e-252
	{0xaecc49914078536d, -874},  // 1e-244
	{0x823c12795db6ce57, -847},  // 1e-236
	{0xc21094364dfb5637, -821},  // 1e-228
	{0x9096ea6f3848984f, -794},  // 1e-220
	{0xd77485cb25823ac7, -768},  // 1e-212
	{0xa086cfcd97bf97f4, -741},  // 1e-204
	{0xef340a98172aace5, -715},  // 1e-196
	{0xb23867fb2a35b28e, -688},  // 1e-188
	{0x84c8d4dfd2c63f3b, -661},  // 1e-180
	{0xc5dd44271ad3cdba, -635},  // 1e-172
	{0x936b9fcebb25c996, -608},  // 1e-164
	{0xdbac6c247d62a584, -582},  // 1e-156
	{0xa3ab66580d5fdaf6, -555},  // 1e-148
	{0xf3e2f893dec3f126, -529},  // 1e-140
	{0xb5b5ada8aaff80b8, -502},  // 1e-132
	{0x87625f056c7c4a8b, -475},  // 1e-124
	{0xc9bcff6034c13053, -449},  // 1e-116
	{0x964e858c91ba2655, -422},  // 1e-108
	{0xdff9772470297ebd, -396},  // 1e-100
	{0xa6dfbd9fb8e5b88f, -369},  // 1e-92
	{0xf8a95fcf88747d94, -343},  // 1e-84
	{0xb94470938fa89bcf, -316},  // 1e-76
	{0x8a08f0f8bf0f156b, -289},  // 1e-68
	{0xcdb02555653131b6, -263},  // 1e-60
	{0x993fe2c6d07b7fac, -236},  // 1e-52
	{0xe45c10c42a2b3b06, -210},  // 1e-44
	{0xaa242499697392d3, -183},  // 1e-36
	{0xfd87b5f28300ca0e, -157},  // 1e-28
	{0xbce5086492111aeb, -130},  // 1e-20
	{0x8cbccc096f5088cc, -103},  // 1e-12
	{0xd1b71758e219652c, -77},   // 1e-4
	{0x9c40000000000000, -50},   // 1e4
	{0xe8d4a51000000000, -24},   // 1e12
	{0xad78ebc5ac620000, 3},     // 1e20
	{0x813f3978f8940984, 30},    // 1e28
	{0xc097ce7bc90715b3, 56},    // 1e36
	{0x8f7e32ce7bea5c70, 83},    // 1e44
	{0xd5d238a4abe98068, 109},   // 1e52
	{0x9f4f2726179a2245, 136},   // 1e60
	{0xed63a231d4c4fb27, 162},   // 1e68
	{0xb0de65388cc8ada8, 189},   // 1e76
	{0x83c7088e1aab65db, 216},   // 1e84
	{0xc45d1df942711d9a, 242},   // 1e92
	{0x924d692ca61be758, 269},   // 1e100
	{0xda01ee641a708dea, 295},   // 1e108
	{0xa26da3999aef774a, 322},   // 1e116
	{0xf209787bb47d6b85, 348},   // 1e124
	{0xb454e4a179dd1877, 375},   // 1e132
	{0x865b86925b9bc5c2, 402},   // 1e140
	{0xc83553c5c8965d3d, 428},   // 1e148
	{0x952ab45cfa97a0b3, 455},   // 1e156
	{0xde469fbd99a05fe3, 481},   // 1e164
	{0xa59bc234db398c25, 508},   // 1e172
	{0xf6c69a72a3989f5c, 534},   // 1e180
	{0xb7dcbf5354e9bece, 561},   // 1e188
	{0x88fcf317f22241e2, 588},   // 1e196
	{0xcc20ce9bd35c78a5, 614},   // 1e204
	{0x98165af37b2153df, 641},   // 1e212
	{0xe2a0b5dc971f303a, 667},   // 1e220
	{0xa8d9d1535ce3b396, 694},   // 1e228
	{0xfb9b7cd9a4a7443c, 720},   // 1e236
	{0xbb764c4ca7a44410, 747},   // 1e244
	{0x8bab8eefb6409c1a, 774},   // 1e252
	{0xd01fef10a657842c, 800},   // 1e260
	{0x9b10a4e5e9913129, 827},   // 1e268
	{0xe7109bfba19c0c9d, 853},   // 1e276
	{0xac2820d9623bf429, 880},   // 1e284
	{0x80444b5e7aa7cf85, 907},   // 1e292
	{0xbf21e44003acdd2d, 933},   // 1e300
	{0x8e679c2f5e44ff8f, 960},   // 1e308
	{0xd433179d9c8cb841, 986},   // 1e316
	{0x9e19db92b4e31ba9, 1013},  // 1e324
	{0xeb96bf6ebadf77d9, 1039},  // 1e332
	{0xaf87023b9bf0ee6b, 1066},  // 1e340
}
