package bucket

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"slices"
	"strings"

	"github.com/groveml/grove/internal/capped"
)

// Memory is a read-only bucket of objects held in memory, such as the model
// files a B&A RegisterModel call carries (keyed by their full bucket
// paths): Fetch copies them into the cache and checksums them exactly as
// it does a real bucket's.
type Memory struct {
	name    string
	objects map[string][]byte
}

// NewMemory returns a bucket holding objects; name is its String.
func NewMemory(name string, objects map[string][]byte) *Memory {
	return &Memory{name: name, objects: objects}
}

// ReadObject returns the named object.
func (m *Memory) ReadObject(_ context.Context, name string, limit int64) ([]byte, Attrs, error) {
	data, ok := m.objects[name]
	if !ok {
		return nil, Attrs{}, fmt.Errorf("%s/%s: %w", m.name, name, ErrNotExist)
	}
	if int64(len(data)) > limit {
		return nil, Attrs{}, &capped.TooLargeError{What: fmt.Sprintf("object %s in %s", name, m), Limit: limit}
	}
	return data, Attrs{Version: "1", Size: int64(len(data))}, nil // objects never change
}

// List returns the objects whose names start with prefix, sorted by name.
func (m *Memory) List(_ context.Context, prefix string) ([]Object, error) {
	var out []Object
	for name, data := range m.objects {
		if strings.HasPrefix(name, prefix) {
			out = append(out, Object{Name: name, Size: int64(len(data))})
		}
	}
	slices.SortFunc(out, func(a, b Object) int { return strings.Compare(a.Name, b.Name) })
	return out, nil
}

// Open returns a reader of the named object.
func (m *Memory) Open(_ context.Context, name string) (io.ReadCloser, error) {
	data, ok := m.objects[name]
	if !ok {
		return nil, fmt.Errorf("%s/%s: %w", m.name, name, ErrNotExist)
	}
	return io.NopCloser(bytes.NewReader(data)), nil
}

// String returns the bucket's name.
func (m *Memory) String() string { return m.name }
