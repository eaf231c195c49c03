package join

import (
	"encoding/binary"
	"math"

	"github.com/groveml/grove/internal/binform"
)

// The stored values: each a version byte, then its fields, strings and
// counts as unsigned varints (a string's length first), times as signed
// varints of Unix nanoseconds, floats as their 8 IEEE 754 bytes,
// little-endian, booleans as one byte.

// storeVersion is the version of the stored values written. Version 1
// (still read) held each prediction's record key too, which nothing read
// back, and no group stood for an index entry (group.keyed); versions 1
// and 2 (still read) held one window for every prediction of a group.
const storeVersion = 3

// group is the entry of one join key (request_id, item, row): the
// predictions made for it that wait for their window to close, the
// outcomes received for it, and the window of those already scored.
type group struct {
	// preds are the open predictions, each contract's scored together
	// when their window closes; start and end span the open windows.
	preds      []pred
	start, end int64
	// outs are the outcomes of the join key, kept until the watermark
	// passes their time by the longest window, so that predictions that
	// come after them still find them.
	outs []out
	// closedStart and closedEnd span the windows already scored (closedEnd
	// 0: none); an outcome that falls in them comes too late. closedEvents
	// are the event_ids of the predictions scored, so that a copy of one
	// is a duplicate.
	closedStart, closedEnd int64
	closedEvents           [][]byte
	// keyed: the group's join key is its record key's own, and stands for
	// the record key's index entry of it, [keyedStart, keyedEnd]
	// (Joiner.indexKey).
	keyed                bool
	keyedStart, keyedEnd int64
}

// hasEvent reports whether g holds a prediction of event id, open or
// scored.
func (g *group) hasEvent(id string) bool {
	for i := range g.preds {
		if string(g.preds[i].eventID) == id {
			return true
		}
	}
	for _, e := range g.closedEvents {
		if string(e) == id {
			return true
		}
	}
	return false
}

// pred is one prediction: a row of a logged event. Its id is bytes of
// the value it was read from, or of the Joiner's copy of the event's: a
// group lives until its value is written back (getGroup).
type pred struct {
	eventID                      []byte
	contract, release, modelPath string
	served                       bool
	// ts is the event's timestamp, the time its figures count at.
	ts    int64
	value float64
	// start and end are the window [start, end] of the contract's (or
	// model entry's direct calls', sameRule) predictions of the row: its
	// start is the served prediction's event time (eventTimes; the
	// earliest one's while no served one came), so that a shadow is
	// scored on exactly the champion's window.
	start, end int64
}

// out is one outcome: its id, time, narrowing and labels, and whether a
// prediction was scored with it. Its id, like a pred's, is bytes of the
// value or outcome it was read from.
type out struct {
	id                  []byte
	modelPath, contract string
	t                   int64
	labels              []label
	used                bool
}

// label is one of an outcome's labels.
type label struct {
	name  string
	value float64
}

// keyIndex is the entry of one record key: the join keys of the
// predictions logged under it (newest last), for the outcomes that name
// the key, and those outcomes while no prediction holds them.
type keyIndex struct {
	refs    []keyRef
	pending []out
}

// keyRef is one join key logged under a record key, with its window (the
// key, bytes of the value it was read from, or of the Joiner's buffer).
type keyRef struct {
	joinKey    []byte
	start, end int64
}

// enc appends the binary forms.
type enc []byte

func (e enc) u(v uint64) enc  { return binary.AppendUvarint(e, v) }
func (e enc) i(v int64) enc   { return binary.AppendVarint(e, v) }
func (e enc) s(v string) enc  { return append(e.u(uint64(len(v))), v...) }
func (e enc) y(v []byte) enc  { return append(e.u(uint64(len(v))), v...) }
func (e enc) f(v float64) enc { return binary.LittleEndian.AppendUint64(e, math.Float64bits(v)) }
func (e enc) b(v bool) enc {
	if v {
		return append(e, 1)
	}
	return append(e, 0)
}

// dec reads them; the first error sticks.
type dec struct{ binform.Reader }

// newDec returns a dec of b, whose errors wrap errCorrupt.
func newDec(b []byte) *dec { return &dec{binform.NewReader(b, errCorrupt)} }

// version reads the version byte: 1 to storeVersion. A later one is
// from a newer Grove, whose store this one cannot read (docs/outcomes.md,
// Upgrading).
func (d *dec) version() byte {
	switch {
	case len(d.B) < 1:
		d.Fail("no version byte")
		return 0
	case d.B[0] > storeVersion:
		d.Fail("version %d: the store was written by a newer Grove (this one reads versions 1 to %d)", d.B[0], storeVersion)
		return 0
	case d.B[0] < 1:
		d.Fail("unknown version %d", d.B[0])
		return 0
	}
	v := d.B[0]
	d.B = d.B[1:]
	return v
}

// end is the error, or one for bytes left over.
func (d *dec) end() error {
	if d.Err == nil && len(d.B) > 0 {
		d.Fail("trailing bytes")
	}
	return d.Err
}

func (e enc) out(o *out) enc {
	e = e.y(o.id).s(o.modelPath).s(o.contract).i(o.t).b(o.used).u(uint64(len(o.labels)))
	for _, l := range o.labels {
		e = e.s(l.name).f(l.value)
	}
	return e
}

func (d *dec) out(names *names) out {
	o := out{id: d.bytes(), modelPath: d.name(names), contract: d.name(names), t: d.I(), used: d.Bool()}
	n := d.Count(9)
	if n > 0 {
		o.labels = make([]label, n)
		for i := range o.labels {
			o.labels[i] = label{name: d.name(names), value: d.F()}
		}
	}
	return o
}

// names keeps the names that recur in stored values (contracts,
// releases, model paths, labels) once each, so that decoding a value
// allocates none of them (up to maxNames; past it, they are allocated
// each time). The zero value is ready.
type names struct{ m map[string]string }

// maxNames bounds names.
const maxNames = 4096

// of returns b as a string, the one kept when there is one.
func (n *names) of(b []byte) string {
	if s, ok := n.m[string(b)]; ok {
		return s
	}
	s := string(b)
	if n.m == nil {
		n.m = map[string]string{}
	}
	if len(n.m) < maxNames {
		n.m[s] = s
	}
	return s
}

// bytes reads a string as bytes of the value read (capped, so that an
// append to them copies).
func (d *dec) bytes() []byte {
	n := d.U()
	if d.Err != nil {
		return nil
	}
	if n > uint64(len(d.B)) {
		d.Fail("string past the end")
		return nil
	}
	v := d.B[:n:n]
	d.B = d.B[n:]
	return v
}

// name reads a string, kept once in names.
func (d *dec) name(names *names) string {
	n := d.U()
	if d.Err != nil {
		return ""
	}
	if n > uint64(len(d.B)) {
		d.Fail("string past the end")
		return ""
	}
	v := names.of(d.B[:n])
	d.B = d.B[n:]
	return v
}

// appendTo appends g's binary form to b.
func (g *group) appendTo(b []byte) []byte {
	e := enc(append(b, storeVersion)).i(g.start).i(g.end).i(g.closedStart).i(g.closedEnd).u(uint64(len(g.preds)))
	for i := range g.preds {
		p := &g.preds[i]
		e = e.y(p.eventID).s(p.contract).s(p.release).s(p.modelPath).b(p.served).i(p.ts).f(p.value).i(p.start - g.start).i(p.end - g.end)
	}
	e = e.u(uint64(len(g.outs)))
	for i := range g.outs {
		e = e.out(&g.outs[i])
	}
	e = e.u(uint64(len(g.closedEvents)))
	for _, id := range g.closedEvents {
		e = e.y(id)
	}
	// The index entry's window, mostly the group's: as differences.
	if e = e.b(g.keyed); g.keyed {
		e = e.i(g.keyedStart - g.start).i(g.keyedEnd - g.end)
	}
	return e
}

// reset empties g, keeping its slices' arrays.
func (g *group) reset() {
	clear(g.preds)
	clear(g.outs)
	clear(g.closedEvents)
	*g = group{preds: g.preds[:0], outs: g.outs[:0], closedEvents: g.closedEvents[:0]}
}

// unmarshal sets g to the group of binary form b, its names kept once in
// names; its ids are bytes of b.
func (g *group) unmarshal(b []byte, names *names) error {
	g.reset()
	d := newDec(b)
	v := d.version()
	g.start, g.end, g.closedStart, g.closedEnd = d.I(), d.I(), d.I(), d.I()
	for n := d.Count(14); n > 0; n-- {
		p := pred{eventID: d.bytes(), contract: d.name(names), release: d.name(names), modelPath: d.name(names)}
		if v == 1 {
			d.bytes() // the record key
		}
		p.served, p.ts, p.value = d.Bool(), d.I(), d.F()
		p.start, p.end = g.start, g.end
		if v >= 3 {
			p.start, p.end = g.start+d.I(), g.end+d.I()
		}
		g.preds = append(g.preds, p)
	}
	for n := d.Count(6); n > 0; n-- {
		g.outs = append(g.outs, d.out(names))
	}
	for n := d.Count(1); n > 0; n-- {
		g.closedEvents = append(g.closedEvents, d.bytes())
	}
	if v != 1 {
		if g.keyed = d.Bool(); g.keyed {
			g.keyedStart, g.keyedEnd = g.start+d.I(), g.end+d.I()
		}
	}
	return d.end()
}

// appendTo appends k's binary form to b.
func (k *keyIndex) appendTo(b []byte) []byte {
	e := enc(append(b, storeVersion)).u(uint64(len(k.refs)))
	for _, r := range k.refs {
		e = e.y(r.joinKey).i(r.start).i(r.end)
	}
	e = e.u(uint64(len(k.pending)))
	for i := range k.pending {
		e = e.out(&k.pending[i])
	}
	return e
}

// reset empties k, keeping its slices' arrays.
func (k *keyIndex) reset() {
	clear(k.refs)
	clear(k.pending)
	*k = keyIndex{refs: k.refs[:0], pending: k.pending[:0]}
}

// unmarshal sets k to the index entry of binary form b, its names kept
// once in names; its keys and ids are bytes of b.
func (k *keyIndex) unmarshal(b []byte, names *names) error {
	k.reset()
	d := newDec(b)
	d.version()
	for n := d.Count(3); n > 0; n-- {
		k.refs = append(k.refs, keyRef{joinKey: d.bytes(), start: d.I(), end: d.I()})
	}
	for n := d.Count(6); n > 0; n-- {
		k.pending = append(k.pending, d.out(names))
	}
	return d.end()
}
