package evaluate

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"slices"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/groveml/grove/logging/outcome/join"
)

// The changelog's own keys: a store key never starts with 0xff (the
// join's keys start with a letter), so these never collide with one.
var (
	checkpointKey = []byte("\xffcheckpoint")
	fenceKey      = []byte("\xfffence")
)

// loggedStore is a join store whose writes since the last flush are
// remembered, the newest per key, for the changelog: the on-disk store is
// a cache of the changelog partition, which is the state's truth.
type loggedStore struct {
	join.Store
	changes map[string]change
}

// change is the newest write of one key: its due time and value, or a
// deletion.
type change struct {
	due     int64
	value   []byte
	deleted bool
}

// newLoggedStore wraps s.
func newLoggedStore(s join.Store) *loggedStore {
	return &loggedStore{Store: s, changes: map[string]change{}}
}

// Put implements join.Store.
func (l *loggedStore) Put(key []byte, due int64, value []byte) error {
	if err := l.Store.Put(key, due, value); err != nil {
		return err
	}
	l.changes[string(key)] = change{due: due, value: bytes.Clone(value)}
	return nil
}

// Delete implements join.Store.
func (l *loggedStore) Delete(key []byte) error {
	if err := l.Store.Delete(key); err != nil {
		return err
	}
	l.changes[string(key)] = change{deleted: true}
	return nil
}

// drain returns the changes since the last drain as changelog records of
// partition, in key order, and forgets them.
func (l *loggedStore) drain(topic string, partition int32) []*kgo.Record {
	keys := make([]string, 0, len(l.changes))
	for k := range l.changes {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	out := make([]*kgo.Record, 0, len(keys))
	for _, k := range keys {
		c := l.changes[k]
		r := &kgo.Record{Topic: topic, Partition: partition, Key: []byte(k)}
		if !c.deleted {
			r.Value = binary.BigEndian.AppendUint64(make([]byte, 0, 8+len(c.value)), uint64(c.due))
			r.Value = append(r.Value, c.value...)
		}
		out = append(out, r)
	}
	clear(l.changes)
	return out
}

// applyChange writes one changelog record into s: a tombstone deletes
// its key, any other value is the due time and the value.
func applyChange(s join.Store, r *kgo.Record) error {
	if r.Value == nil {
		return s.Delete(r.Key)
	}
	if len(r.Value) < 8 {
		return fmt.Errorf("changelog record at offset %d: value of %d bytes, shorter than its due time", r.Offset, len(r.Value))
	}
	return s.Put(r.Key, int64(binary.BigEndian.Uint64(r.Value)), r.Value[8:])
}

// errNoStore is returned for a changelog key that is empty.
var errNoStore = errors.New("changelog record without a key")
