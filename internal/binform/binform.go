// Package binform reads the compact binary forms of the state Grove
// checkpoints (the outcome accumulators of routing/quality, the join's
// stored values in logging/outcome/join): counts as unsigned varints,
// signed numbers as varints, strings with their length first, floats as
// their 8 IEEE 754 bytes little-endian, booleans as one byte. A Reader
// keeps the first error, wrapping the error it was made with, so that a
// decoder reads every field and checks once; a count or length never
// makes it allocate more than its input can back.
package binform

import (
	"encoding/binary"
	"fmt"
	"math"
)

// Reader reads a binary form; the first error sticks, and every read
// after it returns the zero value.
type Reader struct {
	// B is what is left to read.
	B []byte
	// Err is the first error, wrapping base.
	Err  error
	base error
}

// NewReader returns a Reader of b whose errors wrap base.
func NewReader(b []byte, base error) Reader { return Reader{B: b, base: base} }

// Fail records an error, unless one is recorded already.
func (r *Reader) Fail(format string, args ...any) {
	if r.Err == nil {
		r.Err = fmt.Errorf("%w: %s", r.base, fmt.Sprintf(format, args...))
	}
}

// U reads an unsigned varint.
func (r *Reader) U() uint64 {
	if r.Err != nil {
		return 0
	}
	v, n := binary.Uvarint(r.B)
	if n <= 0 {
		r.Fail("bad varint")
		return 0
	}
	r.B = r.B[n:]
	return v
}

// I reads a signed varint.
func (r *Reader) I() int64 {
	if r.Err != nil {
		return 0
	}
	v, n := binary.Varint(r.B)
	if n <= 0 {
		r.Fail("bad varint")
		return 0
	}
	r.B = r.B[n:]
	return v
}

// F reads a float64.
func (r *Reader) F() float64 {
	if r.Err != nil {
		return 0
	}
	if len(r.B) < 8 {
		r.Fail("float past the end")
		return 0
	}
	v := math.Float64frombits(binary.LittleEndian.Uint64(r.B))
	r.B = r.B[8:]
	return v
}

// S reads a string, its length first.
func (r *Reader) S() string {
	n := r.U()
	if r.Err != nil {
		return ""
	}
	if n > uint64(len(r.B)) {
		r.Fail("string past the end")
		return ""
	}
	v := string(r.B[:n])
	r.B = r.B[n:]
	return v
}

// Bool reads a boolean byte (0 or 1).
func (r *Reader) Bool() bool {
	if r.Err != nil {
		return false
	}
	if len(r.B) < 1 || r.B[0] > 1 {
		r.Fail("bad boolean")
		return false
	}
	v := r.B[0] == 1
	r.B = r.B[1:]
	return v
}

// Count reads a count of items each at least min bytes long, failing
// when the bytes left cannot hold that many.
func (r *Reader) Count(min int) int {
	n := r.U()
	if n > uint64(len(r.B)/min) {
		r.Fail("count past the end")
		return 0
	}
	return int(n)
}
