package join

import (
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
	// Put sets key's value and due time, replacing both. The store
	// keeps neither key nor value: the caller may reuse them.
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
	entries map[string]*memEntry
	// last is the entry last found, looked at first: a Joiner mostly
	// writes the key it has just read. missed is the key last looked up
	// and not found, while missing (no entry of it has been put since): a
	// Joiner mostly puts the key it has just found missing.
	last    *memEntry
	missed  []byte
	missing bool
	due     dueHeap
	// returned are the heap items the last Due returned, taken off the
	// heap: the next Due puts back those whose entries are as they were.
	returned []dueItem
	bytes    int64 // of the entries' keys and values
	// track: the entries written are listed in changed, for
	// TieredStore.Changes (one may be listed more than once: its dirty
	// says whether its value is still to be reported; and a deleted one
	// stands for its key).
	track   bool
	changed []*memEntry
}

// memEntry is one entry of a MemStore. Its value's array is the entry's
// own, reused by the next Put of a value that fits.
type memEntry struct {
	key   string // the map's key, shared by the heap and changed
	due   int64
	value []byte
	// gone: deleted (the heap's items of it are stale); dirty: written
	// since the last changes (tracking only).
	gone, dirty bool
}

// NewMemStore returns an empty MemStore.
func NewMemStore() *MemStore { return &MemStore{entries: map[string]*memEntry{}} }

// lookup returns key's entry, nil when there is none.
func (m *MemStore) lookup(key []byte) *memEntry {
	if e := m.last; e != nil && !e.gone && e.key == string(key) {
		return e
	}
	if m.missing && string(m.missed) == string(key) {
		return nil
	}
	e := m.entries[string(key)]
	if e != nil {
		m.last = e
	} else {
		m.missed, m.missing = append(m.missed[:0], key...), true
	}
	return e
}

// Get implements Store.
func (m *MemStore) Get(key []byte) ([]byte, bool, error) {
	e := m.lookup(key)
	if e == nil {
		return nil, false, nil
	}
	return append([]byte(nil), e.value...), true, nil
}

// view is Get without the copy: the value is valid until the next write.
func (m *MemStore) view(key []byte) ([]byte, bool, error) {
	e := m.lookup(key)
	if e == nil {
		return nil, false, nil
	}
	return e.value, true, nil
}

// Put implements Store.
func (m *MemStore) Put(key []byte, due int64, value []byte) error {
	if !m.update(key, due, value) {
		m.insert(key, due, value)
	}
	return nil
}

// insert is Put of a key that is not there.
func (m *MemStore) insert(key []byte, due int64, value []byte) {
	e := &memEntry{key: string(key), due: due}
	m.entries[e.key] = e
	m.last, m.missing = e, false
	m.bytes += int64(len(e.key))
	m.due.push(dueItem{due: due, e: e})
	m.set(e, value)
}

// update is Put of a key that is there; it reports false, and does
// nothing, when key is not.
func (m *MemStore) update(key []byte, due int64, value []byte) bool {
	e := m.lookup(key)
	if e == nil {
		return false
	}
	if e.due != due {
		e.due = due
		m.due.push(dueItem{due: due, e: e})
	}
	m.bytes -= int64(len(e.value))
	m.set(e, value)
	return true
}

// set sets e's value, and lists it as changed when tracking.
func (m *MemStore) set(e *memEntry, value []byte) {
	m.bytes += int64(len(value))
	e.value = append(e.value[:0], value...)
	if m.track && !e.dirty {
		e.dirty = true
		m.changed = append(m.changed, e)
	}
}

// Delete implements Store.
func (m *MemStore) Delete(key []byte) error {
	m.delete(key)
	return nil
}

// delete is Delete; it reports whether key was there.
func (m *MemStore) delete(key []byte) bool {
	e := m.lookup(key)
	if e == nil {
		return false
	}
	m.bytes -= int64(len(e.key) + len(e.value))
	delete(m.entries, e.key)
	e.gone = true
	if m.track {
		m.changed = append(m.changed, e)
	}
	return true
}

// Has reports whether key has an entry.
func (m *MemStore) Has(key []byte) bool { return m.lookup(key) != nil }

// dueTime is key's due time.
func (m *MemStore) dueTime(key []byte) (int64, bool, error) {
	e := m.lookup(key)
	if e == nil {
		return 0, false, nil
	}
	return e.due, true, nil
}

// Bytes is the size of the entries' keys and values.
func (m *MemStore) Bytes() int64 { return m.bytes }

// Due implements Store. Entries of the heap that a later Put or a Delete
// made stale are dropped as they reach its top.
func (m *MemStore) Due(t int64, limit int) ([][]byte, error) {
	keys, _ := m.dueKeys(t, limit, nil)
	out := make([][]byte, len(keys))
	for i, k := range keys {
		out[i] = []byte(k.key)
	}
	return out, nil
}

// dueRef is a key that dueKeys returns: the entry's own string, and the
// entry when it is in memory (nil: on disk), which focus takes.
type dueRef struct {
	key string
	e   *memEntry
}

// focus makes e, an entry that dueKeys returned, the one that the next
// lookup of its key finds without the map (as the entry last found),
// unless it has been deleted since. A nil e is ignored.
func (m *MemStore) focus(e *memEntry) {
	if e != nil && !e.gone {
		m.last = e
	}
}

// dueKeys is Due appending the keys to out, as the entries' own strings
// with their entries.
func (m *MemStore) dueKeys(t int64, limit int, out []dueRef) ([]dueRef, error) {
	// The keys returned last time stay due until the caller puts them
	// due at another time or deletes them.
	for _, it := range m.returned {
		if !it.stale() {
			m.due.push(it)
		}
	}
	clear(m.returned)
	m.returned = m.returned[:0]
	for n := 0; len(m.due) > 0 && m.due[0].due <= t && n < limit; {
		it := m.due.pop()
		if it.stale() {
			continue
		}
		out = append(out, dueRef{key: it.e.key, e: it.e})
		m.returned = append(m.returned, it)
		n++
	}
	return out, nil
}

// Len is the number of entries.
func (m *MemStore) Len() int { return len(m.entries) }

// dueItem is one entry's due time in the heap.
type dueItem struct {
	due int64
	e   *memEntry
}

// stale reports whether the item's entry is gone or due at another time
// now (a later item has it).
func (it dueItem) stale() bool { return it.e.gone || it.e.due != it.due }

// dueHeap orders keys by due time, then key: a min-heap of arity
// dueArity, typed so that pushing and popping allocate nothing.
type dueHeap []dueItem

// dueArity is the heap's arity: four children (64 bytes of items, about
// a cache line: they are not aligned to one, so they span one or two)
// per node halve a binary heap's depth, so that a pop from a heap far
// larger than the caches goes down half as many levels, each missing
// them about as often as a binary heap's.
const dueArity = 4

// less orders items i and j.
func (h dueHeap) less(i, j int) bool {
	if h[i].due != h[j].due {
		return h[i].due < h[j].due
	}
	return strings.Compare(h[i].e.key, h[j].e.key) < 0
}

// push adds it.
func (h *dueHeap) push(it dueItem) {
	*h = append(*h, it)
	a := *h
	for i := len(a) - 1; i > 0; {
		p := (i - 1) / dueArity
		if !a.less(i, p) {
			break
		}
		a[i], a[p] = a[p], a[i]
		i = p
	}
}

// pop removes and returns the first item; the heap is not empty.
func (h *dueHeap) pop() dueItem {
	a := *h
	top := a[0]
	n := len(a) - 1
	a[0] = a[n]
	a[n] = dueItem{}
	a = a[:n]
	for i := 0; ; {
		first := dueArity*i + 1
		if first >= n {
			break
		}
		c := first
		for k := first + 1; k < min(first+dueArity, n); k++ {
			if a.less(k, c) {
				c = k
			}
		}
		if !a.less(c, i) {
			break
		}
		a[i], a[c] = a[c], a[i]
		i = c
	}
	*h = a
	return top
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
