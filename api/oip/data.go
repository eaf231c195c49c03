package oip

import (
	"encoding/binary"
	"math"
	"math/big"
	"strconv"
	"strings"
	"unsafe"

	"github.com/groveml/grove/internal/jsonscan"
	"github.com/groveml/grove/servables"
)

// alignedBytes returns n zeroed bytes whose first byte is 8-byte aligned.
func alignedBytes(n int) []byte {
	if n == 0 {
		return []byte{}
	}
	words := make([]uint64, (n+7)/8)
	return unsafe.Slice((*byte)(unsafe.Pointer(&words[0])), n)
}

// store writes the low size bytes of v, in host byte order, as element k
// of out (nil: validate only).
func store(out []byte, k, size int, v uint64) {
	if out == nil {
		return
	}
	switch size {
	case 1:
		out[k] = byte(v)
	case 2:
		b := out[2*k : 2*k+2]
		*(*uint16)(unsafe.Pointer(&b[0])) = uint16(v)
	case 4:
		b := out[4*k : 4*k+4]
		*(*uint32)(unsafe.Pointer(&b[0])) = uint32(v)
	case 8:
		b := out[8*k : 8*k+8]
		*(*uint64)(unsafe.Pointer(&b[0])) = v
	}
}

// storeFloat stores f as element k of out (nil: validate only), of float
// datatype d. A 2-byte float is rounded to the nearest, ties to even, from
// the decimal literal (nil for NaN and ±Inf) when f, the float64 nearest
// to it, is exactly halfway between two of them: the float64 rounding may
// have moved the literal onto the tie. It reports false when a finite f is
// beyond d's range.
func storeFloat(out []byte, k int, d *datatype, f float64, literal []byte) bool {
	switch d.dt {
	case servables.Float32:
		store(out, k, 4, uint64(math.Float32bits(float32(f))))
		return true
	case servables.Float64:
		store(out, k, 8, math.Float64bits(f))
		return true
	}
	round := servables.Float16Bits
	if d.dt == servables.BFloat16 {
		round = servables.BFloat16Bits
	}
	b, inRange := round(f)
	if literal != nil {
		// A literal just below the overflow threshold, which f rounds
		// onto, is in range: halfTie moves it from ±Inf to the largest
		// finite value, never the other way.
		if tie := halfTie(f, b, literal, d.dt); tie != b {
			b, inRange = tie, true
		}
	}
	store(out, k, 2, uint64(b))
	return inRange
}

// halfTie corrects b, f rounded to a 2-byte float of type dt, when f lies
// exactly halfway between b and its neighbour: the decimal literal f was
// read from decides, exactly, which side it is on.
func halfTie(f float64, b uint16, literal []byte, dt servables.DType) uint16 {
	value := servables.Float16Value
	if dt == servables.BFloat16 {
		value = func(b uint16) float64 { return float64(math.Float32frombits(uint32(b) << 16)) }
	}
	v := value(b)
	if v == f {
		return b
	}
	other := b + 1 // the neighbour away from zero
	if math.Abs(v) > math.Abs(f) {
		other = b - 1
	}
	mid := (v + value(other)) / 2
	if math.IsInf(v, 0) {
		// Past the largest finite value, other, the tie is the overflow
		// threshold, half an ulp above it.
		mid = value(other) + (value(other)-value(other-1))/2
	}
	if mid != f {
		return b
	}
	lit, cut, ok := cutDecimal(literal)
	if !ok {
		return b
	}
	exact, ok := new(big.Rat).SetString(lit)
	if !ok {
		return b
	}
	farther := exact.Cmp(new(big.Rat).SetFloat64(f)) * sign(f)
	if farther == 0 && cut {
		farther = 1 // the digits cut made it farther from zero than the tie
	}
	switch farther {
	case 0:
		return b // a true tie: b is the even one
	case 1: // farther from zero than the tie
		if math.Abs(value(other)) > math.Abs(v) {
			return other
		}
	case -1:
		if math.Abs(value(other)) < math.Abs(v) {
			return other
		}
	}
	return b
}

// tieDigits is how many significant digits of a literal decide a tie:
// more than the exact decimal form of any 2-byte float's midpoint has
// (fewer than 160, for BF16's smallest), so that digits past them only
// say, by being non-zero, that the value is farther from zero.
const tieDigits = 400

// cutDecimal returns the JSON number literal as digits × 10^exp with its
// significant digits cut (toward zero) to tieDigits, and whether a
// non-zero digit was cut; ok is false when its exponent puts it far from
// any 2-byte float. So that big.Rat never reads a literal of a megabyte
// of digits and an exponent as large, which costs seconds.
func cutDecimal(literal []byte) (lit string, cut, ok bool) {
	s := string(literal)
	neg := strings.HasPrefix(s, "-")
	mant, expText, _ := strings.Cut(strings.ToLower(strings.TrimPrefix(s, "-")), "e")
	exp := 0
	if expText != "" {
		e, err := strconv.Atoi(expText)
		if err != nil || e < -1<<40 || e > 1<<40 {
			return "", false, false
		}
		exp = e
	}
	intp, frac, _ := strings.Cut(mant, ".")
	digits := strings.TrimLeft(intp+frac, "0")
	exp -= len(frac)
	if len(digits) > tieDigits {
		cut = strings.Trim(digits[tieDigits:], "0") != ""
		exp += len(digits) - tieDigits
		digits = digits[:tieDigits]
	}
	if digits == "" {
		return "0", false, true
	}
	if mag := exp + len(digits); mag < -1000 || mag > 1000 {
		return "", false, false // far below the smallest, or above the largest
	}
	if neg {
		digits = "-" + digits
	}
	return digits + "e" + strconv.Itoa(exp), cut, true
}

func sign(f float64) int {
	if f < 0 {
		return -1
	}
	return 1
}

// fmtShape formats dims as [2,3].
func fmtShape(dims []int64) string {
	b := make([]byte, 0, 2+4*len(dims))
	b = append(b, '[')
	for i, d := range dims {
		if i > 0 {
			b = append(b, ',')
		}
		b = strconv.AppendInt(b, d, 10)
	}
	return string(append(b, ']'))
}

// count returns "1 element", "2 elements", ...
func count(n int64, noun string) string {
	if n == 1 {
		return "1 " + noun
	}
	return strconv.FormatInt(n, 10) + " " + noun + "s"
}

// literalText returns the source text of the number n, shortened.
func (p *parser) literalText(n *jsonscan.Number) string {
	t := p.Buf[n.Start:n.End]
	if len(t) > 40 {
		return string(t[:40]) + "…"
	}
	return string(t)
}

// rangeText describes the range of an integer datatype, e.g. "-128 to 127".
func rangeText(d *datatype) string {
	bits := 8 * d.size()
	if d.kind == kindUnsigned {
		return "0 to " + strconv.FormatUint(math.MaxUint64>>(64-bits), 10)
	}
	lim := int64(1) << (bits - 1)
	if bits == 64 {
		return "-9223372036854775808 to 9223372036854775807"
	}
	return strconv.FormatInt(-lim, 10) + " to " + strconv.FormatInt(lim-1, 10)
}

// scalar decodes the data element at p.Pos as element k of an input of
// datatype d, into out (nil: validate only). A problem is the end of a
// sentence whose subject is the element ("is a string; ..."); ok is false
// on a syntax error.
func (p *parser) scalar(d *datatype, out []byte, k int) (problem string, ok bool) {
	c := p.Peek()
	size := d.size()
	switch d.kind {
	case kindFloat:
		if c == 'N' || c == 'I' || (c == '-' && (p.At(p.Pos+1) == 'N' || p.At(p.Pos+1) == 'I')) {
			f, ok := p.nonFinite()
			if !ok {
				return "", p.Fail(jsonscan.ValueInvalid, p.Pos)
			}
			storeFloat(out, k, d, f, nil)
			return "", true
		}
		if c != '-' && !jsonscan.IsDigit(c) {
			break
		}
		var n jsonscan.Number
		if !p.LexNumber(&n) {
			return "", false
		}
		bits := 8 * size
		if size == 2 {
			bits = 64 // 2-byte floats are rounded from the float64
		}
		f, inRange := n.Float(p.Buf, bits)
		if inRange {
			inRange = storeFloat(out, k, d, f, p.Buf[n.Start:n.End])
		}
		if !inRange {
			return "= " + p.literalText(&n) + " is out of range for " + d.name, true
		}
		return "", true
	case kindSigned, kindUnsigned:
		if c != '-' && !jsonscan.IsDigit(c) {
			break
		}
		var n jsonscan.Number
		if !p.LexNumber(&n) {
			return "", false
		}
		if !n.IsInt {
			return "= " + p.literalText(&n) + " is not an integer; " + d.name + " data must be integer literals (no fraction, no exponent)", true
		}
		mag, fits := n.Uint(p.Buf)
		bits := uint(8 * size)
		var v uint64
		if d.kind == kindSigned {
			lim := uint64(1) << (bits - 1)
			switch {
			case !fits:
			case n.Neg && mag <= lim:
				v, fits = -mag, true
			case !n.Neg && mag < lim:
				v, fits = mag, true
			default:
				fits = false
			}
		} else {
			fits = fits && (!n.Neg || mag == 0) && (bits == 64 || mag < 1<<bits)
			v = mag
		}
		if !fits {
			return "= " + p.literalText(&n) + " is out of range for " + d.name + " (" + rangeText(d) + ")", true
		}
		store(out, k, size, v)
		return "", true
	case kindBytes:
		if c != '"' {
			break
		}
		r, ok := p.ScanString()
		if !ok {
			return "", false
		}
		if k < p.outMax { // BYTES elements go straight into p.out (see decodeData)
			at := len(p.out)
			p.out = append(p.out, 0, 0, 0, 0)
			if r.Esc {
				p.out = jsonscan.Unescape(p.out, p.Buf[r.Start:r.End])
			} else {
				p.out = append(p.out, p.Buf[r.Start:r.End]...)
			}
			binary.LittleEndian.PutUint32(p.out[at:], uint32(len(p.out)-at-servables.BytesLenSize))
		}
		return "", true
	case kindBool:
		switch c {
		case 't':
			if !p.Literal("true") {
				return "", false
			}
			store(out, k, 1, 1)
			return "", true
		case 'f':
			if !p.Literal("false") {
				return "", false
			}
			store(out, k, 1, 0)
			return "", true
		}
	}
	// A value of the wrong JSON type. Its syntax is checked when the caller
	// skips the whole array.
	switch c {
	case '"', 't', 'f', 'n', '{', '[', '-', '0', '1', '2', '3', '4', '5', '6', '7', '8', '9':
	default:
		return "", p.Fail(jsonscan.ValueInvalid, p.Pos)
	}
	switch d.kind {
	case kindFloat:
		return "is " + jsonType(c) + "; " + d.name + " data must be JSON numbers", true
	case kindBool:
		return "is " + jsonType(c) + "; " + d.name + " data must be true or false", true
	case kindBytes:
		return "is " + jsonType(c) + "; " + d.name + " data must be JSON strings", true
	}
	return "is " + jsonType(c) + "; " + d.name + " data must be integer numbers", true
}

// decodeData decodes the "data" array at p.Pos for an input of datatype d
// and shape, with n = product(shape) elements. It returns the tensor bytes;
// or a problem, a sentence about the data (without the input's name); or
// ok false on a syntax error. p.Pos ends after the array unless ok is
// false.
//
// Memory follows the data actually present, never the shape alone: when
// the tensor is no larger than the rest of the JSON, the common case, it is
// allocated at once and decoded into; otherwise (a shape the body cannot
// fill, or short literals such as 0 for an 8-byte type) the values go to
// the parser's pooled arena, which grows with the elements read, and are
// copied to the tensor once their count is right.
//
// BYTES elements have no fixed size: scalar appends each, in the binary
// form of servables.Bytes, to p.out, which grows with the strings read (the
// first n only), so memory follows the data present as well.
func (p *parser) decodeData(d *datatype, shape []int64, n int) (data []byte, problem string, ok bool) {
	start := p.Pos
	size := d.size()
	p.outDirect = n*size <= len(p.Buf)-start
	if d.kind == kindBytes {
		p.out = make([]byte, 0, min(len(p.Buf)-start, n*(servables.BytesLenSize+8)))
	} else if p.outDirect {
		p.out = alignedBytes(n * size)
	} else {
		p.out = p.arenaBytes()
	}
	p.outMax = n
	p.Pos++
	p.SkipWS()
	if p.Peek() == '[' && len(shape) >= 2 {
		problem, ok = p.decodeNested(d, shape)
	} else {
		problem, ok = p.decodeFlat(d, shape, n)
	}
	out := p.out
	p.out = nil
	if !ok {
		return nil, "", false
	}
	if problem != "" {
		// Move past the array from its start, validating the rest of it.
		p.Pos = start
		if !p.SkipValue() {
			return nil, "", false
		}
		return nil, problem, true
	}
	if !p.outDirect {
		data := alignedBytes(n * size)
		copy(data, out)
		return data, "", true
	}
	return out, "", true
}

// slot returns the buffer that element k, of size bytes, is stored in, or
// nil past the shape's element count (the elements are then only counted).
func (p *parser) slot(k, size int) []byte {
	if (k+1)*size <= len(p.out) {
		return p.out
	}
	if p.outDirect || k >= p.outMax {
		return nil
	}
	// Grow the arena, doubling, up to the tensor's size.
	words := max(2*len(p.arena), 512, ((k+1)*size+7)/8)
	words = min(words, (p.outMax*size+7)/8)
	grown := make([]uint64, words)
	copy(grown, p.arena)
	p.arena = grown
	p.out = p.arenaBytes()
	return p.out
}

// arenaBytes views the arena as bytes.
func (p *parser) arenaBytes() []byte {
	if len(p.arena) == 0 {
		return nil
	}
	return unsafe.Slice((*byte)(unsafe.Pointer(&p.arena[0])), 8*len(p.arena))
}

// decodeFlat decodes a flat data array; p.Pos is just inside it.
func (p *parser) decodeFlat(d *datatype, shape []int64, n int) (string, bool) {
	k, size := 0, d.size()
	if p.Peek() == ']' {
		p.Pos++
	} else {
		for {
			if p.Peek() == '[' {
				if k == 0 {
					return "data[0] is an array, but shape " + fmtShape(shape) + " has fewer than 2 dimensions: data is nested too deep", true
				}
				return "data[" + strconv.Itoa(k) + "] is an array but data[0] is not: give data flat, or nested with one array level per dimension of shape " + fmtShape(shape), true
			}
			problem, ok := p.scalar(d, p.slot(k, size), k)
			if !ok {
				return "", false
			}
			if problem != "" {
				return "data[" + strconv.Itoa(k) + "] " + problem, true
			}
			k++
			p.SkipWS()
			c := p.Peek()
			if c == ',' {
				p.Pos++
				p.SkipWS()
				continue
			}
			if c == ']' {
				p.Pos++
				break
			}
			return "", p.Fail(jsonscan.ArrayMissCommaOrSquareBracket, p.Pos)
		}
	}
	if k != n {
		return "data has " + count(int64(k), "element") + ", but shape " + fmtShape(shape) + " needs " + strconv.Itoa(n), true
	}
	return "", true
}

// decodeNested decodes data nested as its shape, one array level per
// dimension; p.Pos is at the '[' of data[0].
func (p *parser) decodeNested(d *datatype, shape []int64) (string, bool) {
	rank, size := len(shape), d.size()
	idx := p.idx[:0]
	for range rank {
		idx = append(idx, 0)
	}
	p.idx = idx
	// path names the array at depth (data, data[1], data[1][0], ...); with
	// elem, the element at idx[depth] in it.
	path := func(depth int, elem bool) string {
		b := []byte("data")
		last := depth
		if elem {
			last++
		}
		for i := 0; i < last; i++ {
			b = append(b, '[')
			b = strconv.AppendInt(b, idx[i], 10)
			b = append(b, ']')
		}
		return string(b)
	}
	depth, k := 0, 0
	for {
		// An element of the array at depth starts at p.Pos.
		if idx[depth] >= shape[depth] {
			return path(depth, false) + " has more than " + count(shape[depth], "element") + ", the size of dimension " + strconv.Itoa(depth) + " of shape " + fmtShape(shape), true
		}
		c := p.Peek()
		if depth < rank-1 {
			if c != '[' {
				if c == ']' || c == ',' || c == 0 {
					return "", p.Fail(jsonscan.ValueInvalid, p.Pos)
				}
				return path(depth, true) + " is " + jsonType(c) + ", not an array: nested data needs one array level per dimension of shape " + fmtShape(shape), true
			}
			p.Pos++
			p.SkipWS()
			depth++
			idx[depth] = 0
			if p.Peek() == ']' {
				return path(depth, false) + " is empty, but dimension " + strconv.Itoa(depth) + " of shape " + fmtShape(shape) + " is " + strconv.FormatInt(shape[depth], 10), true
			}
			continue
		}
		if c == '[' {
			return path(depth, true) + " is an array: data is nested deeper than shape " + fmtShape(shape), true
		}
		problem, ok := p.scalar(d, p.slot(k, size), k)
		if !ok {
			return "", false
		}
		if problem != "" {
			return path(depth, true) + " " + problem, true
		}
		k++
		// Close the arrays that end here.
	closing:
		for {
			p.SkipWS()
			switch p.Peek() {
			case ',':
				p.Pos++
				p.SkipWS()
				idx[depth]++
				break closing
			case ']':
				if got := idx[depth] + 1; got != shape[depth] {
					return path(depth, false) + " has " + count(got, "element") + ", but dimension " + strconv.Itoa(depth) + " of shape " + fmtShape(shape) + " is " + strconv.FormatInt(shape[depth], 10), true
				}
				p.Pos++
				if depth == 0 {
					return "", true
				}
				depth--
			default:
				return "", p.Fail(jsonscan.ArrayMissCommaOrSquareBracket, p.Pos)
			}
		}
	}
}
