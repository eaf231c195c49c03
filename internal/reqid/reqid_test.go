package reqid

import (
	"encoding/hex"
	"testing"
)

func TestNewIsThirtyTwoHexDigitsAndNeverRepeats(t *testing.T) {
	seen := make(map[string]bool)
	for range 10000 {
		id := New()
		if len(id) != 32 {
			t.Fatalf("%q: %d characters, want 32", id, len(id))
		}
		if _, err := hex.DecodeString(id); err != nil {
			t.Fatalf("%q is not hex: %v", id, err)
		}
		if seen[id] {
			t.Fatalf("%q came twice", id)
		}
		seen[id] = true
	}
}
