package join

import (
	"bytes"
	"cmp"
)

// TieredStore keeps entries in memory up to a budget and the rest on disk:
// a join of short windows never touches the disk, one of long windows (a
// 7-day conversion window) is bounded by it. A key stays in the tier it
// was first put in until it is deleted. Once a key has gone to disk, every
// lookup of a key not in memory reads the disk too. It is used by one
// goroutine at a time, like every Store.
type TieredStore struct {
	mem    *MemStore
	disk   diskTier
	budget int64
	// spilled: a key has gone to disk (it may have been deleted since).
	spilled bool
}

// diskTier is the store a TieredStore spills to: a Store that tells a
// key's due time.
type diskTier interface {
	Store
	dueTime(key []byte) (int64, bool, error)
}

// NewTieredStore keeps up to budget bytes of keys and values in memory and
// the rest in disk, an empty store.
func NewTieredStore(budget int64, disk *PebbleStore) *TieredStore {
	return newTiered(budget, disk)
}

// newTiered is NewTieredStore over any disk tier.
func newTiered(budget int64, disk diskTier) *TieredStore {
	return &TieredStore{mem: NewMemStore(), disk: disk, budget: budget}
}

// Get implements Store.
func (s *TieredStore) Get(key []byte) ([]byte, bool, error) {
	v, ok, err := s.mem.Get(key)
	if ok || err != nil || !s.spilled {
		return v, ok, err
	}
	return s.disk.Get(key)
}

// Put implements Store: in memory when the key is there, or is new and
// the budget has room; else on disk.
func (s *TieredStore) Put(key []byte, due int64, value []byte) error {
	if s.mem.Has(key) {
		return s.mem.Put(key, due, value)
	}
	if s.spilled {
		if _, ok, err := s.disk.Get(key); err != nil {
			return err
		} else if ok {
			return s.disk.Put(key, due, value)
		}
	}
	if s.mem.Bytes()+int64(len(key)+len(value)) <= s.budget {
		return s.mem.Put(key, due, value)
	}
	s.spilled = true
	return s.disk.Put(key, due, value)
}

// Delete implements Store.
func (s *TieredStore) Delete(key []byte) error {
	if s.mem.Has(key) {
		return s.mem.Delete(key)
	}
	if s.spilled {
		return s.disk.Delete(key)
	}
	return nil
}

// Due implements Store: the keys of both tiers due by t, merged in due
// order (then by key), up to limit.
func (s *TieredStore) Due(t int64, limit int) ([][]byte, error) {
	m, err := s.mem.Due(t, limit)
	if err != nil || !s.spilled {
		return m, err
	}
	d, err := s.disk.Due(t, limit)
	if err != nil || len(d) == 0 {
		return m, err
	}
	out := make([][]byte, 0, min(limit, len(m)+len(d)))
	for len(out) < limit && (len(m) > 0 || len(d) > 0) {
		switch {
		case len(d) == 0:
			out, m = append(out, m[0]), m[1:]
		case len(m) == 0:
			out, d = append(out, d[0]), d[1:]
		case s.before(m[0], d[0]):
			out, m = append(out, m[0]), m[1:]
		default:
			out, d = append(out, d[0]), d[1:]
		}
	}
	return out, nil
}

// before reports whether memory key a is due before disk key b (then by
// key).
func (s *TieredStore) before(a, b []byte) bool {
	da := s.mem.entries[string(a)].due
	db, ok, err := s.disk.dueTime(b)
	if err != nil || !ok {
		return true
	}
	if c := cmp.Compare(da, db); c != 0 {
		return c < 0
	}
	return bytes.Compare(a, b) < 0
}
