package evaluations

import (
	"errors"
	"testing"
)

// FuzzApply: whatever the key and value (nil when tombstone), Apply returns nil or an error
// wrapping ErrBadRecord, never panics, and what it takes publishes and
// reads without panicking. The corpus (testdata/fuzz/FuzzApply) holds
// real records of a two-partition stream, a tombstone and damaged
// copies.
func FuzzApply(f *testing.F) {
	f.Add([]byte("partition\x000"), []byte{}, true)
	f.Add([]byte("series\x00ads/pctr/1\x00v1\x00served\x000"), []byte{0x08, 0x00}, false)
	f.Fuzz(func(t *testing.T, key, value []byte, tombstone bool) {
		if tombstone {
			value = nil
		} else if value == nil {
			value = []byte{}
		}
		tb := NewTable()
		err := tb.Apply(key, value)
		if err != nil && !errors.Is(err, ErrBadRecord) {
			t.Fatalf("Apply: %v does not wrap ErrBadRecord", err)
		}
		tb.Publish()
		for _, s := range tb.Series() {
			tb.Outcomes(s.Key.Contract, s.Key.Release, s.Key.Shadow, "v1")
		}
		_ = tb.Totals()
		if err == nil && value == nil && len(tb.Series()) > 0 {
			t.Fatal("a tombstone added a series")
		}
	})
}
