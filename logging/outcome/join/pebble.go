package join

import (
	"errors"
	"fmt"
	"math"

	"github.com/cockroachdb/pebble"
	"github.com/cockroachdb/pebble/bloom"
)

// PebbleStore is a Store on disk (github.com/cockroachdb/pebble), so that
// the predictions of a long window (a 7-day conversion window) are bounded
// by disk, not memory. It keeps each entry as "v" + key → due + value and
// indexes due times as "t" + due + key, so that Due is one ordered scan.
// Writes are not synced one by one: Sync makes them durable, which the
// owner does when it checkpoints (Joiner.Checkpoint). A store opened with
// OpenPebbleEphemeral writes no log at all.
type PebbleStore struct {
	db *pebble.DB
	// floor is a due time no entry is due before: Due scans from it, so as
	// not to step over the deletions of the entries it already returned
	// (pebble keeps them until a compaction).
	floor int64
	last  lastDue
}

// The block cache and memtable of a PebbleStore: what waits for a short
// window stays in memory, a long one's goes to disk.
const (
	pebbleCacheBytes    = 64 << 20
	pebbleMemTableBytes = 64 << 20
)

// OpenPebble opens (or creates) the store in directory dir.
func OpenPebble(dir string) (*PebbleStore, error) { return openPebble(dir, false) }

// OpenPebbleEphemeral opens (or creates) the store in directory dir for an
// owner that rebuilds it from elsewhere whenever it opens it (the
// evaluator, from its changelog topic): pebble's write-ahead log is off,
// so a write costs no log append and a crash may lose any of them; Sync
// fails.
func OpenPebbleEphemeral(dir string) (*PebbleStore, error) { return openPebble(dir, true) }

// openPebble opens the store in dir, without a write-ahead log when
// noWAL.
func openPebble(dir string, noWAL bool) (*PebbleStore, error) {
	cache := pebble.NewCache(pebbleCacheBytes)
	defer cache.Unref()
	opts := &pebble.Options{Logger: quietLogger{}, Cache: cache, MemTableSize: pebbleMemTableBytes, DisableWAL: noWAL}
	// Most lookups are of keys that are not there (an event_id or
	// outcome_id not seen, a join key with nothing yet): bloom filters
	// answer them without reading a block.
	opts.Levels = make([]pebble.LevelOptions, 7)
	for i := range opts.Levels {
		opts.Levels[i].FilterPolicy = bloom.FilterPolicy(10)
	}
	db, err := pebble.Open(dir, opts)
	if err != nil {
		return nil, fmt.Errorf("opening the join store in %s: %w", dir, err)
	}
	return &PebbleStore{db: db, floor: math.MinInt64}, nil
}

// Close closes the store.
func (p *PebbleStore) Close() error { return p.db.Close() }

// Sync makes every write so far durable; on a store opened with
// OpenPebbleEphemeral, which has no log, it fails.
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

// get returns the stored due + value of key, and remembers key's due
// time (last).
func (p *PebbleStore) get(key []byte) ([]byte, bool, error) {
	v, closer, err := p.db.Get(valueKey(key))
	if errors.Is(err, pebble.ErrNotFound) {
		p.remember(key, 0, false)
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
	due, _ := dueOf(out)
	p.remember(key, due, true)
	return out, true, nil
}

// lastDue is what the store knows of one key's due time without reading
// it: the key last read or written (a Put mostly follows a Get of its
// key), its due time, and whether it is there.
type lastDue struct {
	key    []byte
	due    int64
	exists bool
}

// remember sets last to key.
func (p *PebbleStore) remember(key []byte, due int64, exists bool) {
	p.last = lastDue{key: append(p.last.key[:0], key...), due: due, exists: exists}
}

// dueTime is dueOfKey, for a TieredStore.
func (p *PebbleStore) dueTime(key []byte) (int64, bool, error) { return p.dueOfKey(key) }

// dueOfKey returns key's due time and whether it is there, from last when
// it is key, else from the store.
func (p *PebbleStore) dueOfKey(key []byte) (int64, bool, error) {
	if p.last.key != nil && string(p.last.key) == string(key) {
		return p.last.due, p.last.exists, nil
	}
	v, ok, err := p.get(key)
	if err != nil || !ok {
		return 0, false, err
	}
	due, _ := dueOf(v)
	return due, true, nil
}

// entry implements diskTier.
func (p *PebbleStore) entry(key []byte) (int64, []byte, bool, error) {
	v, ok, err := p.get(key)
	if !ok || err != nil {
		return 0, nil, ok, err
	}
	due, _ := dueOf(v)
	return due, v[8:], true, nil
}

// scan implements diskTier: an ordered scan of the entries' keys ("v" +
// key) after from.
func (p *PebbleStore) scan(from []byte, budget int, fn func(key string, due int64, value []byte) error) ([]byte, bool, error) {
	lower := []byte{'v'}
	if from != nil {
		// The first key after from: from with a zero byte appended.
		lower = append(valueKey(from), 0)
	}
	it, err := p.db.NewIter(&pebble.IterOptions{LowerBound: lower, UpperBound: []byte{'w'}})
	if err != nil {
		return nil, false, fmt.Errorf("join store: %w", err)
	}
	var last []byte
	given := 0
	done := true
	for ok := it.First(); ok; ok = it.Next() {
		if given >= budget {
			done = false
			break
		}
		k, v := it.Key()[1:], it.Value()
		if len(v) < 8 {
			it.Close()
			return nil, false, corrupt("entry shorter than its due time")
		}
		due, _ := dueOf(v)
		given += len(k) + len(v) - 8
		if err := fn(string(k), due, v[8:]); err != nil {
			it.Close()
			return nil, false, err
		}
		last = append(last[:0], k...)
	}
	if err := it.Close(); err != nil {
		return nil, false, fmt.Errorf("join store: %w", err)
	}
	return last, done, nil
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
	old, ok, err := p.dueOfKey(key)
	if err != nil {
		return err
	}
	b := p.db.NewBatch()
	defer b.Close()
	if ok && old != due {
		if err := b.Delete(dueKey(old, key), nil); err != nil {
			return fmt.Errorf("join store: %w", err)
		}
	}
	if !ok || old != due {
		if err := b.Set(dueKey(due, key), nil, nil); err != nil {
			return fmt.Errorf("join store: %w", err)
		}
	}
	d := dueBytes(due)
	v := make([]byte, 0, 8+len(value))
	v = append(append(v, d[:]...), value...)
	if err := b.Set(valueKey(key), v, nil); err != nil {
		return fmt.Errorf("join store: %w", err)
	}
	if err := b.Commit(pebble.NoSync); err != nil {
		p.last = lastDue{}
		return fmt.Errorf("join store: %w", err)
	}
	p.remember(key, due, true)
	p.floor = min(p.floor, due)
	return nil
}

// Delete implements Store.
func (p *PebbleStore) Delete(key []byte) error {
	old, ok, err := p.dueOfKey(key)
	if err != nil || !ok {
		return err
	}
	b := p.db.NewBatch()
	defer b.Close()
	if err := b.Delete(dueKey(old, key), nil); err != nil {
		return fmt.Errorf("join store: %w", err)
	}
	if err := b.Delete(valueKey(key), nil); err != nil {
		return fmt.Errorf("join store: %w", err)
	}
	if err := b.Commit(pebble.NoSync); err != nil {
		p.last = lastDue{}
		return fmt.Errorf("join store: %w", err)
	}
	p.remember(key, 0, false)
	return nil
}

// Due implements Store. It scans the due index from floor, and leaves
// floor at the first due time it did not return, so that a call with
// nothing due reads nothing.
func (p *PebbleStore) Due(t int64, limit int) ([][]byte, error) {
	if t < p.floor {
		return nil, nil
	}
	lo := dueBytes(p.floor)
	it, err := p.db.NewIter(&pebble.IterOptions{LowerBound: append([]byte{'t'}, lo[:]...), UpperBound: []byte{'u'}})
	if err != nil {
		return nil, fmt.Errorf("join store: %w", err)
	}
	var out [][]byte
	floor := int64(never)
	for ok := it.First(); ok; ok = it.Next() {
		k := it.Key()
		if len(k) < 9 {
			it.Close()
			return nil, corrupt("due index key too short")
		}
		due, _ := dueOf(k[1:9])
		if len(out) == 0 {
			floor = due
		}
		if due > t || len(out) == limit {
			break
		}
		out = append(out, append([]byte(nil), k[9:]...))
	}
	if err := it.Close(); err != nil {
		return nil, fmt.Errorf("join store: %w", err)
	}
	// Nothing is due before the first key returned, or, when none was,
	// before the first key after t (the caller moves or deletes the keys
	// it gets; Put lowers floor for a key it puts due earlier).
	p.floor = floor
	return out, nil
}

// quietLogger drops pebble's informational messages; its fatal ones
// (broken invariants of the store) stay pebble's own.
type quietLogger struct{}

func (quietLogger) Infof(string, ...any) {}
func (quietLogger) Fatalf(format string, args ...any) {
	pebble.DefaultLogger.Fatalf(format, args...)
}
