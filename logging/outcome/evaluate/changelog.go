package evaluate

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/groveml/grove/logging/outcome/join"
)

// The changelog's record keys: the records of the join's state have none
// (changesKey; an evaluator of the earlier one-record-per-entry form
// refuses a record without a key rather than misread it), the fences
// restore writes fenceKey. The topic is not compacted (the evaluator
// truncates it itself), so the keys only tell the two apart.
var (
	changesKey = []byte{}
	fenceKey   = []byte("\xfffence")
)

// The changelog's form. A changes record's value is changelogVersion,
// then entries until its end, each a kind byte and its fields (lengths
// and counts as unsigned varints, the due time as a signed varint):
//
//   - entryPut: the key, the due time and the value of a store entry
//     (join.Store.Put);
//   - entryDelete: the key of a deleted entry;
//   - entryCheckpoint: the joiner's checkpoint (join.Joiner.Checkpoint).
//
// Applying every entry of a partition's changelog in order, from its
// first record, rebuilds its store, and the last checkpoint its joiner
// (package doc, The changelog).
const (
	changelogVersion = 2
	entryPut         = 1
	entryDelete      = 2
	entryCheckpoint  = 3
)

// changelogRecordBytes is how far a record's value is filled before the
// next record starts (an entry larger than it has a record of its own):
// well under the default largest message of brokers and clients (1 MB).
const changelogRecordBytes = 512 << 10

// changelogWriter encodes one partition's entries of a commit into
// records.
type changelogWriter struct {
	topic     string
	partition int32
	// bufs lends the records' values (nil: they are allocated).
	bufs *bufferPool
	recs []*kgo.Record
	cur  []byte // the value being filled; nil when none
	// bytes is the size of every value written.
	bytes int64
}

// entry starts an entry of n bytes or so (its kind byte included): in
// the record being filled if it fits, else in a new one.
func (w *changelogWriter) entry(kind byte, n int) {
	if w.cur != nil && len(w.cur)+n > changelogRecordBytes {
		w.close()
	}
	if w.cur == nil {
		w.cur = append(w.bufs.get(), changelogVersion)
	}
	w.cur = append(w.cur, kind)
}

// put writes a store entry.
func (w *changelogWriter) put(key string, due int64, value []byte) error {
	w.entry(entryPut, 1+3*binary.MaxVarintLen64+len(key)+len(value))
	w.cur = binary.AppendUvarint(w.cur, uint64(len(key)))
	w.cur = append(w.cur, key...)
	w.cur = binary.AppendVarint(w.cur, due)
	w.cur = binary.AppendUvarint(w.cur, uint64(len(value)))
	w.cur = append(w.cur, value...)
	return nil
}

// change writes a store entry as join.TieredStore.Changes reports it.
func (w *changelogWriter) change(key string, due int64, value []byte, deleted bool) error {
	if !deleted {
		return w.put(key, due, value)
	}
	w.entry(entryDelete, 1+binary.MaxVarintLen64+len(key))
	w.cur = binary.AppendUvarint(w.cur, uint64(len(key)))
	w.cur = append(w.cur, key...)
	return nil
}

// checkpoint writes the joiner's checkpoint.
func (w *changelogWriter) checkpoint(cp []byte) {
	w.entry(entryCheckpoint, 1+binary.MaxVarintLen64+len(cp))
	w.cur = binary.AppendUvarint(w.cur, uint64(len(cp)))
	w.cur = append(w.cur, cp...)
}

// bufferPool keeps the arrays of the changelog records' values from one
// transaction to the next: once a transaction has ended, the Kafka client
// holds none of its records, and their values' arrays serve again. Not
// safe for concurrent use.
type bufferPool struct {
	free, lent [][]byte
}

// get returns an empty slice of changelogRecordBytes capacity, lent
// until reclaim.
func (p *bufferPool) get() []byte {
	var b []byte
	if p == nil {
		return make([]byte, 0, changelogRecordBytes)
	}
	if n := len(p.free); n > 0 {
		b, p.free[n-1] = p.free[n-1][:0], nil
		p.free = p.free[:n-1]
	} else {
		b = make([]byte, 0, changelogRecordBytes)
	}
	p.lent = append(p.lent, b)
	return b
}

// reclaim takes back every slice lent: the records holding them must be
// of no more use to anyone. It keeps poolBuffers of them at most.
func (p *bufferPool) reclaim() {
	for _, b := range p.lent {
		if len(p.free) < poolBuffers {
			p.free = append(p.free, b)
		}
	}
	clear(p.lent)
	p.lent = p.lent[:0]
}

// poolBuffers is how many arrays a bufferPool keeps (8 MiB).
const poolBuffers = 16

// close ends the record being filled.
func (w *changelogWriter) close() {
	if w.cur == nil {
		return
	}
	w.recs = append(w.recs, &kgo.Record{Topic: w.topic, Partition: w.partition, Key: changesKey, Value: w.cur})
	w.bytes += int64(len(w.cur))
	w.cur = nil
}

// records ends the last record and returns them all.
func (w *changelogWriter) records() []*kgo.Record {
	w.close()
	return w.recs
}

// size is the size of the values written so far, the one being filled
// included.
func (w *changelogWriter) size() int64 { return w.bytes + int64(len(w.cur)) }

// applyChanges writes the entries of changes record value into s, and
// returns the last checkpoint it holds (a copy; nil when none).
func applyChanges(s join.Store, value []byte) (checkpoint []byte, err error) {
	if len(value) == 0 || value[0] != changelogVersion {
		return nil, errors.New("not a changes record of this version")
	}
	b := value[1:]
	bytesOf := func() ([]byte, error) {
		n, k := binary.Uvarint(b)
		if k <= 0 || n > uint64(len(b)-k) {
			return nil, errCorruptChanges
		}
		out := b[k : k+int(n)]
		b = b[k+int(n):]
		return out, nil
	}
	for len(b) > 0 {
		kind := b[0]
		b = b[1:]
		switch kind {
		case entryPut:
			key, err := bytesOf()
			if err != nil {
				return nil, err
			}
			due, k := binary.Varint(b)
			if k <= 0 {
				return nil, errCorruptChanges
			}
			b = b[k:]
			v, err := bytesOf()
			if err != nil {
				return nil, err
			}
			if len(key) == 0 {
				return nil, fmt.Errorf("%w: an entry without a key", errCorruptChanges)
			}
			if err := s.Put(key, due, v); err != nil {
				return nil, err
			}
		case entryDelete:
			key, err := bytesOf()
			if err != nil {
				return nil, err
			}
			if err := s.Delete(key); err != nil {
				return nil, err
			}
		case entryCheckpoint:
			cp, err := bytesOf()
			if err != nil {
				return nil, err
			}
			checkpoint = bytes.Clone(cp)
		default:
			return nil, fmt.Errorf("%w: entry kind %d", errCorruptChanges, kind)
		}
	}
	return checkpoint, nil
}

// errCorruptChanges is wrapped by the errors of a changes record that
// does not decode.
var errCorruptChanges = errors.New("corrupt changes record")
