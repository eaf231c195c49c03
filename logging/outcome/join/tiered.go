package join

import (
	"cmp"
	"slices"
)

// TieredStore keeps entries in memory up to a budget and the rest on disk:
// a join of short windows never touches the disk, one of long windows (a
// 7-day conversion window) is bounded by it. A key stays in the tier it
// was first put in until it is deleted. Once a key has gone to disk, every
// lookup of a key not in memory reads the disk too. It is used by one
// goroutine at a time, like every Store.
//
// For an owner that mirrors it elsewhere (the evaluator's changelog), it
// tells which keys were written (TrackChanges, Changes) and visits its
// entries a budget at a time (Scan).
type TieredStore struct {
	mem    *MemStore
	disk   diskTier
	budget int64
	// spilled: a key has gone to disk (it may have been deleted since).
	spilled bool
	// diskDirty are the keys written to disk since the last Changes, when
	// tracking (nil when not).
	diskDirty map[string]struct{}
}

// diskTier is the store a TieredStore spills to: a Store that tells a
// key's due time and visits its entries in key order.
type diskTier interface {
	Store
	dueTime(key []byte) (int64, bool, error)
	// entry returns key's due time and value (valid until the next
	// write).
	entry(key []byte) (due int64, value []byte, ok bool, err error)
	// scan calls fn with the entries whose keys are after from (all when
	// from is nil), in key order, until it has been given budget bytes of
	// keys and values; it returns the last key given, and done when no
	// entry is left after it.
	scan(from []byte, budget int, fn func(key string, due int64, value []byte) error) (last []byte, done bool, err error)
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

// view is Get without the copy of a value in memory, which is valid
// until the next write.
func (s *TieredStore) view(key []byte) ([]byte, bool, error) {
	if v, ok, _ := s.mem.view(key); ok || !s.spilled {
		return v, ok, nil
	}
	return s.disk.Get(key)
}

// Put implements Store: in memory when the key is there, or is new and
// the budget has room; else on disk.
func (s *TieredStore) Put(key []byte, due int64, value []byte) error {
	if s.mem.update(key, due, value) {
		return nil
	}
	if s.spilled {
		if _, ok, err := s.disk.dueTime(key); err != nil {
			return err
		} else if ok {
			s.diskChanged(key)
			return s.disk.Put(key, due, value)
		}
	}
	if s.mem.Bytes()+int64(len(key)+len(value)) <= s.budget {
		s.mem.insert(key, due, value)
		return nil
	}
	s.spilled = true
	s.diskChanged(key)
	return s.disk.Put(key, due, value)
}

// Delete implements Store.
func (s *TieredStore) Delete(key []byte) error {
	if s.mem.delete(key) {
		return nil
	}
	if s.spilled {
		s.diskChanged(key)
		return s.disk.Delete(key)
	}
	return nil
}

// diskChanged notes a key written to disk, when tracking.
func (s *TieredStore) diskChanged(key []byte) {
	if s.diskDirty != nil {
		s.diskDirty[string(key)] = struct{}{}
	}
}

// TrackChanges makes the store note the keys written from now on, for
// Changes.
func (s *TieredStore) TrackChanges() {
	s.mem.track = true
	if s.diskDirty == nil {
		s.diskDirty = map[string]struct{}{}
	}
}

// Changes calls fn with each key written since TrackChanges or the last
// Changes and its entry now: its due time and value, or deleted; then
// forgets them. A key may come more than once, each time as it is now.
// The value is valid during the call only. The first error of fn stops
// it and is returned; the keys not reported yet are forgotten too.
func (s *TieredStore) Changes(fn func(key string, due int64, value []byte, deleted bool) error) error {
	mem, disk := s.mem.changed, s.diskDirty
	defer func() {
		clear(mem)
		s.mem.changed = mem[:0]
		if len(disk) > 0 {
			s.diskDirty = map[string]struct{}{}
		}
	}()
	for _, e := range mem {
		var err error
		switch {
		case !e.gone && e.dirty:
			e.dirty = false
			err = fn(e.key, e.due, e.value, false)
		case e.gone:
			// Deleted: its key as it is now (put again, on disk, or gone).
			err = s.report(e.key, fn)
		}
		if err != nil {
			return err
		}
	}
	for k := range disk {
		if err := s.report(k, fn); err != nil {
			return err
		}
	}
	return nil
}

// report calls fn with key k's entry now, unless it is in memory and was
// reported already.
func (s *TieredStore) report(k string, fn func(key string, due int64, value []byte, deleted bool) error) error {
	if e, ok := s.mem.entries[k]; ok {
		if !e.dirty {
			return nil
		}
		e.dirty = false
		return fn(k, e.due, e.value, false)
	}
	if s.spilled {
		due, v, ok, err := s.disk.entry([]byte(k))
		if err != nil {
			return err
		}
		if ok {
			return fn(k, due, v, false)
		}
	}
	return fn(k, 0, nil, true)
}

// Scan is a cursor over the entries of a TieredStore (TieredStore.Scan).
type Scan struct {
	s *TieredStore
	// mem are the keys in memory when the scan began, not visited yet.
	mem []string
	// from is the last disk key visited (nil: none yet); diskDone: the
	// disk tier is visited.
	from     []byte
	diskDone bool
}

// Scan returns a cursor over the store's entries: Next visits every
// entry there now that is not deleted before the cursor reaches it (its
// value as it is then), and may visit entries put later.
func (s *TieredStore) Scan() *Scan {
	c := &Scan{s: s, mem: make([]string, 0, len(s.mem.entries)), diskDone: !s.spilled}
	for k := range s.mem.entries {
		c.mem = append(c.mem, k)
	}
	return c
}

// Next calls fn with the entries not visited yet, each with its due time
// and value (valid during the call only), until it has given budget
// bytes of keys and values or every entry is visited, which done
// reports. The first error of fn stops it and is returned.
func (c *Scan) Next(budget int, fn func(key string, due int64, value []byte) error) (done bool, err error) {
	given := 0
	for len(c.mem) > 0 && given < budget {
		k := c.mem[len(c.mem)-1]
		c.mem[len(c.mem)-1] = ""
		c.mem = c.mem[:len(c.mem)-1]
		e, ok := c.s.mem.entries[k]
		if !ok {
			continue
		}
		given += len(k) + len(e.value)
		if err := fn(k, e.due, e.value); err != nil {
			return false, err
		}
	}
	if len(c.mem) > 0 {
		return false, nil
	}
	if !c.diskDone && given < budget {
		var last []byte
		last, c.diskDone, err = c.s.disk.scan(c.from, budget-given, fn)
		if err != nil {
			return false, err
		}
		if last != nil {
			c.from = append(c.from[:0], last...)
		}
	}
	return c.diskDone, nil
}

// Due implements Store: the keys of both tiers due by t, merged in due
// order (then by key), up to limit.
func (s *TieredStore) Due(t int64, limit int) ([][]byte, error) {
	keys, err := s.dueKeys(t, limit, nil)
	if err != nil {
		return nil, err
	}
	out := make([][]byte, len(keys))
	for i, k := range keys {
		out[i] = []byte(k.key)
	}
	return out, nil
}

// dueKeys is Due appending the keys to out as strings (those in memory
// the entries' own, with their entries).
func (s *TieredStore) dueKeys(t int64, limit int, out []dueRef) ([]dueRef, error) {
	start := len(out)
	out, err := s.mem.dueKeys(t, limit, out)
	if err != nil || !s.spilled {
		return out, err
	}
	d, err := s.disk.Due(t, limit)
	if err != nil || len(d) == 0 {
		return out, err
	}
	m := slices.Clone(out[start:])
	out = out[:start]
	for len(out)-start < limit && (len(m) > 0 || len(d) > 0) {
		switch {
		case len(d) == 0:
			out, m = append(out, m[0]), m[1:]
		case len(m) == 0:
			out, d = append(out, dueRef{key: string(d[0])}), d[1:]
		case s.before(m[0], d[0]):
			out, m = append(out, m[0]), m[1:]
		default:
			out, d = append(out, dueRef{key: string(d[0])}), d[1:]
		}
	}
	return out, nil
}

// focus is MemStore.focus.
func (s *TieredStore) focus(e *memEntry) { s.mem.focus(e) }

// before reports whether memory key a is due before disk key b (then by
// key).
func (s *TieredStore) before(a dueRef, b []byte) bool {
	db, ok, err := s.disk.dueTime(b)
	if err != nil || !ok {
		return true
	}
	if c := cmp.Compare(a.e.due, db); c != 0 {
		return c < 0
	}
	return a.key < string(b)
}

// entry implements diskTier, for a MemStore standing in for a disk in
// tests.
func (m *MemStore) entry(key []byte) (int64, []byte, bool, error) {
	e, ok := m.entries[string(key)]
	if !ok {
		return 0, nil, false, nil
	}
	return e.due, e.value, true, nil
}

// scan implements diskTier, for a MemStore standing in for a disk in
// tests (it sorts its keys on every call).
func (m *MemStore) scan(from []byte, budget int, fn func(key string, due int64, value []byte) error) ([]byte, bool, error) {
	keys := make([]string, 0, len(m.entries))
	for k := range m.entries {
		if from == nil || k > string(from) {
			keys = append(keys, k)
		}
	}
	slices.Sort(keys)
	given := 0
	for i, k := range keys {
		if given >= budget {
			return []byte(keys[i-1]), false, nil
		}
		e := m.entries[k]
		given += len(k) + len(e.value)
		if err := fn(k, e.due, e.value); err != nil {
			return nil, false, err
		}
	}
	if len(keys) == 0 {
		return nil, true, nil
	}
	return []byte(keys[len(keys)-1]), true, nil
}
