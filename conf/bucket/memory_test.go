package bucket

import (
	"errors"
	"testing"

	"github.com/groveml/grove/internal/capped"
)

func TestMemoryReadsNoObjectOverTheLimit(t *testing.T) {
	m := NewMemory("mem", map[string][]byte{"c.json": []byte("0123456789")})
	if data, _, err := m.ReadObject(t.Context(), "c.json", 10); err != nil || string(data) != "0123456789" {
		t.Fatalf("an object of exactly the limit: %q, %v", data, err)
	}
	_, _, err := m.ReadObject(t.Context(), "c.json", 9)
	var tooLarge *capped.TooLargeError
	if !errors.As(err, &tooLarge) || err.Error() != "object c.json in mem is larger than its limit of 9 bytes" {
		t.Fatalf("an object one byte over the limit: got %v", err)
	}
}
