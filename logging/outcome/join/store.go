package join

import (
	"container/heap"
	"errors"
	"fmt"
	"math"
	"strings"
)

// Store keeps what a Joiner waits on: each entry a key, a value and a due
// time, the event time (Unix nanoseconds) at which the Joiner looks at it
// again. The Joiner owns its Store's contents; a Store is used by one
// goroutine at a time.
type Store interface {
	// Get returns key's value (ok false when there is none). The value is
	// the caller's to keep.
	Get(key []byte) (value []byte, ok bool, err error)
	// Put sets key's value and due time, replacing both.
	Put(key []byte, due int64, value []byte) error
	// Delete removes key; a key that is not there is no error.
	Delete(key []byte) error
	// Due returns up to limit keys due at or before t, the earliest due
	// first (then by key).
	Due(t int64, limit int) ([][]byte, error)
}

// MemStore is a Store in memory, for tests and short windows: its
// contents are lost with the process. The zero value is not ready: use
// NewMemStore.
type MemStore struct {
	entries map[string]memEntry
	due     dueHeap
	bytes   int64 // of the entries' keys and values
}

// memEntry is one entry of a MemStore.
type memEntry struct {
	due   int64
	value []byte
}

// NewMemStore returns an empty MemStore.
func NewMemStore() *MemStore { return &MemStore{entries: map[string]memEntry{}} }

// Get implements Store.
func (m *MemStore) Get(key []byte) ([]byte, bool, error) {
	e, ok := m.entries[string(key)]
	if !ok {
		return nil, false, nil
	}
	return append([]byte(nil), e.value...), true, nil
}

// Put implements Store.
func (m *MemStore) Put(key []byte, due int64, value []byte) error {
	k := string(key)
	old, ok := m.entries[k]
	if ok {
		m.bytes -= int64(len(old.value))
	} else {
		m.bytes += int64(len(k))
	}
	m.bytes += int64(len(value))
	m.entries[k] = memEntry{due: due, value: append([]byte(nil), value...)}
	if !ok || old.due != due {
		heap.Push(&m.due, dueItem{due: due, key: k})
	}
	return nil
}

// Delete implements Store.
func (m *MemStore) Delete(key []byte) error {
	if old, ok := m.entries[string(key)]; ok {
		m.bytes -= int64(len(key) + len(old.value))
		delete(m.entries, string(key))
	}
	return nil
}

// Has reports whether key has an entry.
func (m *MemStore) Has(key []byte) bool {
	_, ok := m.entries[string(key)]
	return ok
}

// dueTime is key's due time.
func (m *MemStore) dueTime(key []byte) (int64, bool, error) {
	e, ok := m.entries[string(key)]
	return e.due, ok, nil
}

// Bytes is the size of the entries' keys and values.
func (m *MemStore) Bytes() int64 { return m.bytes }

// Due implements Store. Entries of the heap that a later Put or a Delete
// made stale are dropped as they reach its top.
func (m *MemStore) Due(t int64, limit int) ([][]byte, error) {
	var out [][]byte
	var keep []dueItem
	for len(m.due) > 0 && m.due[0].due <= t && len(out) < limit {
		it := heap.Pop(&m.due).(dueItem)
		e, ok := m.entries[it.key]
		if !ok || e.due != it.due {
			continue
		}
		out = append(out, []byte(it.key))
		keep = append(keep, it)
	}
	// The keys returned stay due until the caller puts or deletes them.
	for _, it := range keep {
		heap.Push(&m.due, it)
	}
	return out, nil
}

// Len is the number of entries.
func (m *MemStore) Len() int { return len(m.entries) }

// dueItem is one key's due time in the heap.
type dueItem struct {
	due int64
	key string
}

// dueHeap orders keys by due time, then key.
type dueHeap []dueItem

func (h dueHeap) Len() int { return len(h) }
func (h dueHeap) Less(i, j int) bool {
	if h[i].due != h[j].due {
		return h[i].due < h[j].due
	}
	return strings.Compare(h[i].key, h[j].key) < 0
}
func (h dueHeap) Swap(i, j int) { h[i], h[j] = h[j], h[i] }
func (h *dueHeap) Push(x any)   { *h = append(*h, x.(dueItem)) }
func (h *dueHeap) Pop() any {
	old := *h
	it := old[len(old)-1]
	*h = old[:len(old)-1]
	return it
}

// dueBytes is t as 8 bytes that sort as t does (big-endian, sign bit
// flipped).
func dueBytes(t int64) [8]byte {
	u := uint64(t) ^ (1 << 63)
	var b [8]byte
	for i := 7; i >= 0; i-- {
		b[i] = byte(u)
		u >>= 8
	}
	return b
}

// dueOf reads dueBytes back.
func dueOf(b []byte) (int64, error) {
	if len(b) < 8 {
		return 0, errors.New("join: short due time")
	}
	var u uint64
	for _, c := range b[:8] {
		u = u<<8 | uint64(c)
	}
	return int64(u ^ (1 << 63)), nil
}

// never is a due time no watermark reaches.
const never = math.MaxInt64

// errCorrupt is wrapped by every error about a stored value that does not
// decode.
var errCorrupt = errors.New("join: corrupt stored value")

// corrupt wraps errCorrupt.
func corrupt(what string) error { return fmt.Errorf("%w: %s", errCorrupt, what) }
