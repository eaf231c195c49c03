package binform

import (
	"encoding/binary"
	"errors"
	"math"
	"testing"
)

// TestReaderReadsWhatWasWrittenAndKeepsTheFirstError: every kind of
// field reads back as written; a truncated form fails wrapping the base
// error, and reads after the failure return zero values.
func TestReaderReadsWhatWasWrittenAndKeepsTheFirstError(t *testing.T) {
	var b []byte
	b = binary.AppendUvarint(b, 300)
	b = binary.AppendVarint(b, -7)
	b = binary.LittleEndian.AppendUint64(b, math.Float64bits(2.5))
	b = append(binary.AppendUvarint(b, 3), "abc"...)
	b = append(b, 1)
	b = binary.AppendUvarint(b, 2)
	b = append(b, 9, 9)
	base := errors.New("corrupt")
	r := NewReader(b, base)
	if u, i, f, s, ok, n := r.U(), r.I(), r.F(), r.S(), r.Bool(), r.Count(1); u != 300 || i != -7 || f != 2.5 || s != "abc" || !ok || n != 2 || r.Err != nil {
		t.Fatalf("read %v %v %v %q %v %v, err %v", u, i, f, s, ok, n, r.Err)
	}
	r = NewReader(b[:3], base)
	r.U()
	r.I()
	if f := r.F(); f != 0 || !errors.Is(r.Err, base) {
		t.Fatalf("a truncated float read %v, err %v; want 0 and an error wrapping the base", f, r.Err)
	}
	first := r.Err
	if s := r.S(); s != "" || r.Err != first {
		t.Errorf("after the failure S read %q and the error became %v", s, r.Err)
	}
	r = NewReader(binary.AppendUvarint(nil, 1<<40), base)
	if n := r.Count(1); n != 0 || r.Err == nil {
		t.Errorf("a count beyond the bytes left: %d, err %v", n, r.Err)
	}
	r = NewReader([]byte{2}, base)
	if r.Bool() || r.Err == nil {
		t.Errorf("boolean byte 2 read without error")
	}
}
