package quality

import (
	"bytes"
	"fmt"
	"math"
	"slices"

	"github.com/groveml/grove/servables"
)

// The comparison of one shadow execution with the answer the caller got
// for the same request (the champion's): pure functions of the two
// answers, no state. Windows (windows.go) adds them up.

// DefaultCompareTolerance is the tolerance of the rows-within share when
// the server config sets none.
const DefaultCompareTolerance = 0.01

// OutputDiff compares one output of one shadow execution with the
// champion's output of the same name (else position).
type OutputDiff struct {
	// Name is the champion's output name (the shadow's when the champion
	// has no such output).
	Name string
	// Mismatch, when not empty, says why the two could not be compared
	// (missing output, datatype, shape); the figures below are then zero.
	Mismatch string
	// Bytes is set for BYTES outputs: only Rows and Equal are measured.
	Bytes bool
	// Rows is the first dimension (1 for a scalar); Elements the values compared.
	Rows, Elements int
	// SumAbsDiff and MaxAbsDiff are over the elements whose values are both
	// finite or equal; NonFinite counts the others (NaN or an infinity on
	// one side only), which are never within the tolerance.
	SumAbsDiff, MaxAbsDiff float64
	NonFinite              int
	// Within counts the rows whose every element differs by at most the tolerance.
	Within int
	// Score is set for single-score outputs (one value per row); Agree then
	// counts the rows on the same side of 0.5 (both ≥ 0.5 or both < 0.5).
	Score bool
	Agree int
	// Equal counts the rows of a BYTES output whose elements are all equal.
	Equal int
}

// MeanAbsDiff is SumAbsDiff over the finite elements compared, 0 when none.
func (d OutputDiff) MeanAbsDiff() float64 {
	if n := d.Elements - d.NonFinite; n > 0 {
		return d.SumAbsDiff / float64(n)
	}
	return 0
}

// DiffOutputs compares a shadow execution's outputs with the champion's:
// one OutputDiff per champion output, matched by name, else by position
// (when the shadow's output there has a name no champion output has),
// then one (a mismatch) per shadow output left unmatched. tol is the
// rows-within tolerance.
func DiffOutputs(champion, shadow []servables.Tensor, tol float64) []OutputDiff {
	out := make([]OutputDiff, 0, max(len(champion), len(shadow)))
	used := make([]bool, len(shadow))
	match := make([]int, len(champion))
	for i, c := range champion {
		match[i] = -1
		if c.Name == "" {
			continue
		}
		if j := slices.IndexFunc(shadow, func(s servables.Tensor) bool { return s.Name == c.Name }); j >= 0 && !used[j] {
			match[i], used[j] = j, true
		}
	}
	for i := range champion {
		if match[i] < 0 && i < len(shadow) && !used[i] &&
			!slices.ContainsFunc(champion, func(c servables.Tensor) bool { return c.Name != "" && c.Name == shadow[i].Name }) {
			match[i], used[i] = i, true
		}
	}
	for i, c := range champion {
		if match[i] < 0 {
			out = append(out, OutputDiff{Name: c.Name, Mismatch: "the challenger has no such output"})
			continue
		}
		out = append(out, diffTensor(c, shadow[match[i]], tol))
	}
	for j, s := range shadow {
		if !used[j] {
			out = append(out, OutputDiff{Name: s.Name, Mismatch: "the champion has no such output"})
		}
	}
	return out
}

// diffTensor compares two tensors of the same datatype and shape.
func diffTensor(c, s servables.Tensor, tol float64) OutputDiff {
	d := OutputDiff{Name: c.Name}
	if d.Name == "" {
		d.Name = s.Name
	}
	switch {
	case c.DType != s.DType:
		d.Mismatch = fmt.Sprintf("datatype %v, the champion's %v", s.DType, c.DType)
		return d
	case !slices.Equal(c.Shape, s.Shape):
		d.Mismatch = fmt.Sprintf("shape %v, the champion's %v", s.Shape, c.Shape)
		return d
	}
	n, err := servables.NumElements(c.Shape)
	if err != nil {
		d.Mismatch = err.Error()
		return d
	}
	d.Rows = 1
	if len(c.Shape) > 0 {
		d.Rows = int(c.Shape[0])
	}
	var ce, se [][]byte // the elements of BYTES outputs
	if d.Bytes = c.DType == servables.Bytes; d.Bytes {
		var cerr, serr error
		ce, cerr = c.BytesElements()
		se, serr = s.BytesElements()
		if cerr != nil || serr != nil || len(ce) != n || len(se) != n {
			d.Mismatch = "data does not fill its shape"
			return d
		}
	} else if c.Validate() != nil || s.Validate() != nil {
		d.Mismatch = "data does not fill its shape"
		return d
	}
	d.Elements = n
	if d.Rows == 0 {
		return d
	}
	per := n / d.Rows
	d.Score = per == 1 && !d.Bytes
	for r := range d.Rows {
		lo, hi := r*per, (r+1)*per
		if d.Bytes {
			if slices.EqualFunc(ce[lo:hi], se[lo:hi], bytes.Equal) {
				d.Equal++
			}
			continue
		}
		if d.addRow(c, s, lo, hi, tol) {
			d.Within++
		}
		if d.Score && agree(c.Float64At(r), s.Float64At(r)) {
			d.Agree++
		}
	}
	return d
}

// addRow adds the differences of values lo to hi (one row) to d and
// reports whether every one is within tol.
func (d *OutputDiff) addRow(c, s servables.Tensor, lo, hi int, tol float64) bool {
	within := true
	for k := lo; k < hi; k++ {
		a, b := c.Float64At(k), s.Float64At(k)
		diff := math.Abs(a - b)
		switch {
		case c.DType == servables.Int64: // beyond 2^53 two values can round to the same float64
			diff = absDiffInt64(c.Int64s()[k], s.Int64s()[k])
		case a == b || (math.IsNaN(a) && math.IsNaN(b)):
			diff = 0
		case math.IsNaN(diff) || math.IsInf(diff, 0):
			d.NonFinite++
			within = false
			continue
		}
		d.SumAbsDiff += diff
		d.MaxAbsDiff = max(d.MaxAbsDiff, diff)
		if diff > tol {
			within = false
		}
	}
	return within
}

// agree reports whether scores a and b are on the same side of 0.5: both
// at or above it, both below it, or both NaN (the same answer). A NaN is
// on neither side, so it never agrees with a number.
func agree(a, b float64) bool {
	if math.IsNaN(a) || math.IsNaN(b) {
		return math.IsNaN(a) && math.IsNaN(b)
	}
	return (a >= 0.5) == (b >= 0.5)
}

// absDiffInt64 is |x - y|, exact as an integer (it may exceed the int64
// range), then rounded to float64.
func absDiffInt64(x, y int64) float64 {
	if x < y {
		x, y = y, x
	}
	return float64(uint64(x) - uint64(y))
}
