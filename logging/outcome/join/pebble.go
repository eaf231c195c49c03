package join

import (
	"errors"
	"fmt"
	"math"

	"github.com/cockroachdb/pebble"
)

// PebbleStore is a Store on disk (github.com/cockroachdb/pebble), so that
// the predictions of a long window (a 7-day conversion window) are bounded
// by disk, not memory. It keeps each entry as "v" + key → due + value and
// indexes due times as "t" + due + key, so that Due is one ordered scan.
// Writes are not synced one by one: Sync makes them durable, which the
// owner does when it checkpoints (Joiner.Checkpoint).
type PebbleStore struct {
	db *pebble.DB
	// floor is a due time no entry is due before: Due scans from it, so as
	// not to step over the deletions of the entries it already returned
	// (pebble keeps them until a compaction).
	floor int64
}

// OpenPebble opens (or creates) the store in directory dir.
func OpenPebble(dir string) (*PebbleStore, error) {
	db, err := pebble.Open(dir, &pebble.Options{Logger: quietLogger{}})
	if err != nil {
		return nil, fmt.Errorf("opening the join store in %s: %w", dir, err)
	}
	return &PebbleStore{db: db, floor: math.MinInt64}, nil
}

// Close closes the store.
func (p *PebbleStore) Close() error { return p.db.Close() }

// Sync makes every write so far durable.
func (p *PebbleStore) Sync() error { return p.db.LogData(nil, pebble.Sync) }

// valueKey and dueKey are the keys of key's entry and of its due time.
func valueKey(key []byte) []byte { return append([]byte{'v'}, key...) }
func dueKey(due int64, key []byte) []byte {
	d := dueBytes(due)
	out := make([]byte, 0, 9+len(key))
	out = append(out, 't')
	out = append(out, d[:]...)
	return append(out, key...)
}

// get returns the stored due + value of key.
func (p *PebbleStore) get(key []byte) ([]byte, bool, error) {
	v, closer, err := p.db.Get(valueKey(key))
	if errors.Is(err, pebble.ErrNotFound) {
		return nil, false, nil
	}
	if err != nil {
		return nil, false, fmt.Errorf("join store: %w", err)
	}
	out := append([]byte(nil), v...)
	if err := closer.Close(); err != nil {
		return nil, false, fmt.Errorf("join store: %w", err)
	}
	if len(out) < 8 {
		return nil, false, corrupt("entry shorter than its due time")
	}
	return out, true, nil
}

// Get implements Store.
func (p *PebbleStore) Get(key []byte) ([]byte, bool, error) {
	v, ok, err := p.get(key)
	if !ok || err != nil {
		return nil, ok, err
	}
	return v[8:], true, nil
}

// Put implements Store.
func (p *PebbleStore) Put(key []byte, due int64, value []byte) error {
	old, ok, err := p.get(key)
	if err != nil {
		return err
	}
	b := p.db.NewBatch()
	defer b.Close()
	d := dueBytes(due)
	if ok {
		od, _ := dueOf(old)
		if od != due {
			if err := b.Delete(dueKey(od, key), nil); err != nil {
				return fmt.Errorf("join store: %w", err)
			}
		}
	}
	if !ok || !sameDue(old, d) {
		if err := b.Set(dueKey(due, key), nil, nil); err != nil {
			return fmt.Errorf("join store: %w", err)
		}
	}
	v := make([]byte, 0, 8+len(value))
	v = append(append(v, d[:]...), value...)
	if err := b.Set(valueKey(key), v, nil); err != nil {
		return fmt.Errorf("join store: %w", err)
	}
	if err := b.Commit(pebble.NoSync); err != nil {
		return fmt.Errorf("join store: %w", err)
	}
	p.floor = min(p.floor, due)
	return nil
}

// sameDue reports whether stored entry old has due time d.
func sameDue(old []byte, d [8]byte) bool { return string(old[:8]) == string(d[:]) }

// Delete implements Store.
func (p *PebbleStore) Delete(key []byte) error {
	old, ok, err := p.get(key)
	if err != nil || !ok {
		return err
	}
	od, _ := dueOf(old)
	b := p.db.NewBatch()
	defer b.Close()
	if err := b.Delete(dueKey(od, key), nil); err != nil {
		return fmt.Errorf("join store: %w", err)
	}
	if err := b.Delete(valueKey(key), nil); err != nil {
		return fmt.Errorf("join store: %w", err)
	}
	if err := b.Commit(pebble.NoSync); err != nil {
		return fmt.Errorf("join store: %w", err)
	}
	return nil
}

// Due implements Store.
func (p *PebbleStore) Due(t int64, limit int) ([][]byte, error) {
	// Keys due at t sort after "t"+upper alone: bound by the next due time.
	var hi []byte
	if t == never {
		hi = []byte{'u'}
	} else {
		n := dueBytes(t + 1)
		hi = append([]byte{'t'}, n[:]...)
	}
	lo := dueBytes(p.floor)
	it, err := p.db.NewIter(&pebble.IterOptions{LowerBound: append([]byte{'t'}, lo[:]...), UpperBound: hi})
	if err != nil {
		return nil, fmt.Errorf("join store: %w", err)
	}
	var out [][]byte
	var first int64
	for ok := it.First(); ok && len(out) < limit; ok = it.Next() {
		k := it.Key()
		if len(k) < 9 {
			it.Close()
			return nil, corrupt("due index key too short")
		}
		if len(out) == 0 {
			first, _ = dueOf(k[1:9])
		}
		out = append(out, append([]byte(nil), k[9:]...))
	}
	if err := it.Close(); err != nil {
		return nil, fmt.Errorf("join store: %w", err)
	}
	// Nothing is due before the first key returned, or, when none was,
	// at t: the caller moves or deletes the keys it gets.
	if len(out) == 0 {
		if t != never {
			p.floor = max(p.floor, t+1)
		}
	} else {
		p.floor = max(p.floor, first)
	}
	return out, nil
}

// quietLogger drops pebble's informational messages; its fatal ones
// (broken invariants of the store) stay pebble's own.
type quietLogger struct{}

func (quietLogger) Infof(string, ...any) {}
func (quietLogger) Fatalf(format string, args ...any) {
	pebble.DefaultLogger.Fatalf(format, args...)
}
