package quality

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"math/bits"
	"time"

	"github.com/groveml/grove/internal/binform"
)

// The binary form of the outcome accumulators, which the evaluator
// checkpoints with its offsets and publishes: a version byte, a kind
// byte, then the fields, counts as unsigned varints and floats as their
// 8 IEEE 754 bytes, little-endian. A decoder takes only its version and
// kind, and a state that one accumulator could have reached (counts that
// add up, finite sums), so that a corrupt record is an error, not wrong
// figures.

// codecVersion is the version of the binary form (2: a Numeric holds the
// sums of its labels).
const codecVersion = 2

// Kinds of state.
const (
	kindBinary  = 'B'
	kindNumeric = 'N'
	kindPaired  = 'P'
	kindWindows = 'W'
)

// errCorrupt is wrapped by every decoding error.
var errCorrupt = errors.New("quality: corrupt state")

// decoder reads a binary form; the first error sticks.
type decoder struct{ binform.Reader }

// newDecoder returns a decoder of b, whose errors wrap errCorrupt.
func newDecoder(b []byte) *decoder { return &decoder{binform.NewReader(b, errCorrupt)} }

// f reads a float64, which must be finite.
func (d *decoder) f() float64 {
	v := d.F()
	if math.IsNaN(v) || math.IsInf(v, 0) {
		d.Fail("a number not finite")
	}
	return v
}

// header reads the version and kind.
func (d *decoder) header(kind byte) {
	if len(d.B) < 2 {
		d.Fail("truncated")
		return
	}
	if d.B[0] != codecVersion {
		d.Fail("version %d, want %d", d.B[0], codecVersion)
		return
	}
	if d.B[1] != kind {
		d.Fail("kind %q, want %q", d.B[1], kind)
		return
	}
	d.B = d.B[2:]
}

// end fails unless everything was read.
func (d *decoder) end() error {
	if d.Err == nil && len(d.B) > 0 {
		d.Fail("%d bytes after the end", len(d.B))
	}
	return d.Err
}

// sum adds counts, failing on overflow.
func (d *decoder) sum(a, b uint64) uint64 {
	s, carry := bits.Add64(a, b, 0)
	if carry != 0 {
		d.Fail("counts overflow")
	}
	return s
}

// appendU appends v as an unsigned varint.
func appendU(b []byte, v uint64) []byte { return binary.AppendUvarint(b, v) }

// appendF appends v's 8 bytes, little-endian.
func appendF(b []byte, v float64) []byte {
	return binary.LittleEndian.AppendUint64(b, math.Float64bits(v))
}

// MarshalBinary encodes b's state.
func (b *Binary) MarshalBinary() ([]byte, error) {
	return b.appendBody([]byte{codecVersion, kindBinary}), nil
}

// UnmarshalBinary sets b to the state data encodes (MarshalBinary), or
// returns an error and leaves b as it was.
func (b *Binary) UnmarshalBinary(data []byte) error {
	d := newDecoder(data)
	d.header(kindBinary)
	var v Binary
	v.readBody(d)
	if err := d.end(); err != nil {
		return err
	}
	*b = v
	return nil
}

// appendBody appends b's fields to out.
func (b *Binary) appendBody(out []byte) []byte {
	out = appendU(out, b.count)
	out = appendU(out, b.positives)
	out = appendU(out, b.clamped)
	out = appendU(out, b.invalid)
	out = appendF(out, b.sumP)
	out = appendF(out, b.sumBrier)
	out = appendF(out, b.logLoss.mean)
	out = appendF(out, b.logLoss.m2)
	for _, e := range b.ece {
		out = appendU(out, e.n)
		out = appendU(out, e.pos)
		out = appendF(out, e.sumP)
	}
	out = appendU(out, uint64(b.scores.bins()))
	prev := -1
	b.scores.each(func(k uint32, s scoreBin) {
		out = appendU(out, uint64(int(k)-prev-1))
		out = appendU(out, s.pos)
		out = appendU(out, s.neg)
		prev = int(k)
	})
	return out
}

// readBody reads b's fields from d and checks that they add up.
func (b *Binary) readBody(d *decoder) {
	b.count, b.positives, b.clamped, b.invalid = d.U(), d.U(), d.U(), d.U()
	b.sumP, b.sumBrier = d.f(), d.f()
	b.logLoss = moments{n: b.count, mean: d.f(), m2: d.f()}
	var n, pos uint64
	for i := range b.ece {
		e := &b.ece[i]
		e.n, e.pos, e.sumP = d.U(), d.U(), d.f()
		if e.pos > e.n || e.sumP < 0 || e.sumP > float64(e.n) {
			d.Fail("calibration bin %d does not add up", i)
		}
		n, pos = d.sum(n, e.n), d.sum(pos, e.pos)
	}
	if n != b.count || pos != b.positives {
		d.Fail("calibration bins count %d of %d, %d positives of %d", n, b.count, pos, b.positives)
	}
	if b.sumP < 0 || b.sumP > float64(b.count) || b.sumBrier < 0 || b.sumBrier > float64(b.count) ||
		b.logLoss.mean < 0 || b.logLoss.m2 < 0 || (b.count == 0 && (b.sumP != 0 || b.sumBrier != 0 || b.logLoss.mean != 0 || b.logLoss.m2 != 0)) {
		d.Fail("sums out of range")
	}
	k := d.U()
	// Each bin takes at least 3 bytes: a claimed length beyond that is
	// corrupt, and allocates nothing.
	if d.Err != nil || k > aucBins || k > uint64(len(d.B))/3 {
		d.Fail("%d score bins", k)
		return
	}
	prev := -1
	var sp, sn uint64
	for range k {
		gap := d.U()
		s := scoreBin{pos: d.U(), neg: d.U()}
		if d.Err != nil {
			return
		}
		if gap >= aucBins || uint64(prev)+1+gap >= aucBins || s.pos+s.neg == 0 {
			d.Fail("bad score bin")
			return
		}
		prev += 1 + int(gap)
		b.scores.add(uint32(prev), s.pos, s.neg)
		sp, sn = d.sum(sp, s.pos), d.sum(sn, s.neg)
	}
	if b.positives > b.count || sp != b.positives || sn != b.count-b.positives {
		d.Fail("score bins count %d positives and %d negatives of %d and %d", sp, sn, b.positives, b.count-b.positives)
	}
}

// MarshalBinary encodes n's state.
func (n *Numeric) MarshalBinary() ([]byte, error) {
	return n.appendBody([]byte{codecVersion, kindNumeric}), nil
}

// UnmarshalBinary sets n to the state data encodes (MarshalBinary), or
// returns an error and leaves n as it was.
func (n *Numeric) UnmarshalBinary(data []byte) error {
	d := newDecoder(data)
	d.header(kindNumeric)
	var v Numeric
	v.readBody(d)
	if err := d.end(); err != nil {
		return err
	}
	*n = v
	return nil
}

// appendBody appends n's fields to out.
func (n *Numeric) appendBody(out []byte) []byte {
	out = appendU(out, n.count)
	out = appendU(out, n.invalid)
	// Sums that overflowed are infinite: they are written as the largest
	// finite number of their sign, which reads back as as good as infinite.
	out = appendF(out, finite(n.sumErr))
	out = appendF(out, finite(n.sumAbs))
	out = appendF(out, finite(n.sumSqrd))
	out = appendF(out, finite(n.sumLabel))
	return appendF(out, finite(n.sumLabelSq))
}

// readBody reads n's fields from d.
func (n *Numeric) readBody(d *decoder) {
	n.count, n.invalid = d.U(), d.U()
	n.sumErr, n.sumAbs, n.sumSqrd = d.f(), d.f(), d.f()
	n.sumLabel, n.sumLabelSq = d.f(), d.f()
	if n.sumAbs < 0 || n.sumSqrd < 0 || n.sumLabelSq < 0 ||
		(n.count == 0 && (n.sumErr != 0 || n.sumAbs != 0 || n.sumSqrd != 0 || n.sumLabel != 0 || n.sumLabelSq != 0)) {
		d.Fail("sums out of range")
	}
}

// MarshalBinary encodes p's state.
func (p *Paired) MarshalBinary() ([]byte, error) {
	return p.appendBody([]byte{codecVersion, kindPaired}), nil
}

// UnmarshalBinary sets p to the state data encodes (MarshalBinary), or
// returns an error and leaves p as it was.
func (p *Paired) UnmarshalBinary(data []byte) error {
	d := newDecoder(data)
	d.header(kindPaired)
	var v Paired
	v.readBody(d)
	if err := d.end(); err != nil {
		return err
	}
	*p = v
	return nil
}

// appendBody appends p's fields to out.
func (p *Paired) appendBody(out []byte) []byte {
	out = p.champion.appendBody(out)
	out = p.challenger.appendBody(out)
	out = appendF(out, p.diff.mean)
	return appendF(out, p.diff.m2)
}

// readBody reads p's fields from d and checks that both sides are paired.
func (p *Paired) readBody(d *decoder) {
	p.champion.readBody(d)
	p.challenger.readBody(d)
	p.diff = moments{n: p.champion.count, mean: d.f(), m2: d.f()}
	if p.challenger.count != p.champion.count || p.challenger.positives != p.champion.positives ||
		p.challenger.invalid != 0 || p.diff.m2 < 0 || (p.diff.n == 0 && (p.diff.mean != 0 || p.diff.m2 != 0)) {
		d.Fail("the two sides are not paired")
	}
}

// codec is what OutcomeWindows need of an accumulator to encode it.
type codec interface {
	appendBody([]byte) []byte
	readBody(*decoder)
}

// kindOf is the kind byte of accumulator a.
func kindOf(a any) byte {
	switch a.(type) {
	case *Binary:
		return kindBinary
	case *Numeric:
		return kindNumeric
	case *Paired:
		return kindPaired
	}
	return 0
}

// MarshalBinary encodes w's state: its accumulators' kind, since, the
// since_valid total and the minute buckets in use.
func (w *OutcomeWindows[T, P]) MarshalBinary() ([]byte, error) {
	c, ok := any(P(&w.total)).(codec)
	if !ok {
		return nil, fmt.Errorf("quality: windows of %T cannot be encoded", &w.total)
	}
	out := []byte{codecVersion, kindWindows, kindOf(P(&w.total))}
	out = binary.AppendVarint(out, w.since.Unix())
	out = appendU(out, uint64(w.since.Nanosecond()))
	out = c.appendBody(out)
	used := 0
	for i := range w.minutes {
		if w.minutes[i].used {
			used++
		}
	}
	out = appendU(out, uint64(used))
	for i := range w.minutes {
		if b := &w.minutes[i]; b.used {
			out = binary.AppendVarint(out, b.start)
			out = any(P(&b.acc)).(codec).appendBody(out)
		}
	}
	return out, nil
}

// UnmarshalBinary sets w to the state data encodes (MarshalBinary), or
// returns an error and leaves w as it was.
func (w *OutcomeWindows[T, P]) UnmarshalBinary(data []byte) error {
	var v OutcomeWindows[T, P]
	c, ok := any(P(&v.total)).(codec)
	if !ok {
		return fmt.Errorf("quality: windows of %T cannot be decoded", &v.total)
	}
	d := newDecoder(data)
	d.header(kindWindows)
	if d.Err == nil {
		if len(d.B) < 1 || d.B[0] != kindOf(P(&v.total)) {
			d.Fail("windows of another kind")
		} else {
			d.B = d.B[1:]
		}
	}
	sec, nsec := d.I(), d.U()
	if nsec >= 1e9 {
		d.Fail("bad since")
	}
	v.since = time.Unix(sec, int64(nsec)).UTC()
	c.readBody(d)
	used := d.U()
	if used > minuteCount {
		d.Fail("%d minute buckets", used)
	}
	for range used {
		if d.Err != nil {
			break
		}
		start := d.I()
		b := &v.minutes[bucketOf(start)]
		if b.used {
			d.Fail("two buckets in one place")
			break
		}
		b.used, b.start = true, start
		any(P(&b.acc)).(codec).readBody(d)
	}
	if err := d.end(); err != nil {
		return err
	}
	*w = v
	return nil
}
