package evaluate

import (
	"bytes"
	"errors"
	"fmt"
	"testing"

	"github.com/groveml/grove/logging/outcome/join"
)

// TestChangesRecordsRoundTrip: entries written by a changelogWriter,
// split into records of at most changelogRecordBytes (an entry larger
// than that alone in its own), are applied back in order: puts, deletes
// and the last checkpoint.
func TestChangesRecordsRoundTrip(t *testing.T) {
	w := &changelogWriter{topic: "changelog", partition: 3, bufs: &bufferPool{}}
	small := []byte("v")
	big := bytes.Repeat([]byte("b"), changelogRecordBytes+10)
	for i := range 3000 {
		if err := w.put(fmt.Sprintf("k%04d", i), int64(i)-5, bytes.Repeat(small, 300)); err != nil {
			t.Fatal(err)
		}
	}
	w.checkpoint([]byte("first"))
	if err := w.put("big", 7, big); err != nil {
		t.Fatal(err)
	}
	if err := w.change("k0001", 0, nil, true); err != nil {
		t.Fatal(err)
	}
	w.checkpoint([]byte("last"))
	recs := w.records()
	if len(recs) < 3 {
		t.Fatalf("%d records, want the entries split into several", len(recs))
	}
	var total int64
	s := join.NewMemStore()
	var cp []byte
	for i, r := range recs {
		if r.Topic != "changelog" || r.Partition != 3 || !bytes.Equal(r.Key, changesKey) {
			t.Fatalf("record %d: %s/%d key %q", i, r.Topic, r.Partition, r.Key)
		}
		if len(r.Value) > changelogRecordBytes && !bytes.Contains(r.Value, big) {
			t.Errorf("record %d: %d bytes, over %d without a larger entry", i, len(r.Value), changelogRecordBytes)
		}
		total += int64(len(r.Value))
		c, err := applyChanges(s, r.Value)
		if err != nil {
			t.Fatalf("record %d: %v", i, err)
		}
		if c != nil {
			cp = c
		}
	}
	if total != w.size() {
		t.Errorf("size %d, the records hold %d", w.size(), total)
	}
	if string(cp) != "last" {
		t.Errorf("last checkpoint %q, want last", cp)
	}
	if s.Len() != 3000 {
		t.Errorf("%d entries, want 3000 (2999 and big)", s.Len())
	}
	if v, ok, _ := s.Get([]byte("k0002")); !ok || !bytes.Equal(v, bytes.Repeat(small, 300)) {
		t.Errorf("k0002 = %d bytes, %v", len(v), ok)
	}
	if _, ok, _ := s.Get([]byte("k0001")); ok {
		t.Error("a deleted key is there")
	}
	if v, ok, _ := s.Get([]byte("big")); !ok || !bytes.Equal(v, big) {
		t.Errorf("big = %d bytes, %v", len(v), ok)
	}
	if keys, _ := s.Due(-5, 10); len(keys) != 1 || string(keys[0]) != "k0000" {
		t.Errorf("due at -5: %q, want k0000 (due times kept)", keys)
	}
}

// TestApplyChangesRefusesWhatDoesNotDecode: another version, a cut
// entry, an unknown kind or an empty key is an error, never a panic.
func TestApplyChangesRefusesWhatDoesNotDecode(t *testing.T) {
	w := &changelogWriter{}
	if err := w.put("key", 1, []byte("value")); err != nil {
		t.Fatal(err)
	}
	good := w.records()[0].Value
	for name, v := range map[string][]byte{
		"empty":         nil,
		"old version":   append([]byte{1}, good[1:]...),
		"cut":           good[:len(good)-2],
		"unknown kind":  {changelogVersion, 9},
		"empty key":     {changelogVersion, entryPut, 0, 2, 0},
		"length beyond": {changelogVersion, entryDelete, 200, 'k'},
	} {
		_, err := applyChanges(join.NewMemStore(), v)
		if err == nil {
			t.Errorf("%s: applied", name)
		}
		if name != "empty" && name != "old version" && !errors.Is(err, errCorruptChanges) {
			t.Errorf("%s: %v, want errCorruptChanges", name, err)
		}
	}
}

// FuzzApplyChanges: no value panics applyChanges.
func FuzzApplyChanges(f *testing.F) {
	w := &changelogWriter{}
	_ = w.put("key", 1, []byte("value"))
	_ = w.change("gone", 0, nil, true)
	w.checkpoint([]byte("cp"))
	f.Add(w.records()[0].Value)
	f.Add([]byte{changelogVersion})
	f.Fuzz(func(t *testing.T, v []byte) {
		_, _ = applyChanges(join.NewMemStore(), v)
	})
}
