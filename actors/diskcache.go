package actors

import (
	"container/list"

	"github.com/groveml/grove/conf/bucket"
)

// diskCache keeps the files of on-demand models unloaded while still
// listed (for the memory budget or idleness), up to a number of bytes,
// so that the next load of the same content verifies them on disk
// instead of fetching them from the bucket again (Options.DiskCacheBytes).
// An entry is a model path's content by checksum; the least recently
// kept entries are removed first. The supervisor owns it.
type diskCache struct {
	limit, used int64
	// order holds the entries, the most recently kept at the front;
	// byKey finds them by path and checksum.
	order *list.List
	byKey map[diskKey]*list.Element
}

// diskKey is what a cached copy answers for: a model path's content.
type diskKey struct{ path, checksum string }

// newDiskCache returns a cache of up to limit bytes; nil when limit is 0
// (no cache: unloaded models' files are deleted).
func newDiskCache(limit int64) *diskCache {
	if limit <= 0 {
		return nil
	}
	return &diskCache{limit: limit, order: list.New(), byKey: map[diskKey]*list.Element{}}
}

// put keeps m and returns what it no longer keeps, for the caller to
// delete: the least recently kept entries that no longer fit, m itself
// when it is larger than the whole cache, or a copy of the same content
// kept before.
func (d *diskCache) put(m *bucket.LocalModel) (drop []*bucket.LocalModel) {
	if m.Size > d.limit {
		return []*bucket.LocalModel{m}
	}
	k := diskKey{m.Path, m.Checksum}
	if e := d.byKey[k]; e != nil {
		drop = append(drop, d.remove(e))
	}
	for d.used+m.Size > d.limit {
		drop = append(drop, d.remove(d.order.Back()))
	}
	d.byKey[k] = d.order.PushFront(m)
	d.used += m.Size
	return drop
}

// take returns the copy of path's content checksum and stops keeping it
// (the caller owns it now), or nil.
func (d *diskCache) take(path, checksum string) *bucket.LocalModel {
	e := d.byKey[diskKey{path, checksum}]
	if e == nil {
		return nil
	}
	return d.remove(e)
}

// all stops keeping every entry and returns them.
func (d *diskCache) all() []*bucket.LocalModel {
	var out []*bucket.LocalModel
	for d.order.Len() > 0 {
		out = append(out, d.remove(d.order.Front()))
	}
	return out
}

func (d *diskCache) remove(e *list.Element) *bucket.LocalModel {
	m := d.order.Remove(e).(*bucket.LocalModel)
	delete(d.byKey, diskKey{m.Path, m.Checksum})
	d.used -= m.Size
	return m
}
