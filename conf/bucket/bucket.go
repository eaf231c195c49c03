// Package bucket is Grove's view of the object store that holds the model
// config and the models: the Bucket and Writer interfaces that every
// driver implements, the driver registry (Drivers) that opens a bucket by
// its URL's scheme, optimistic read-modify-write (Update), the copy of a
// model into the local cache (Fetch), model checksums and an in-memory
// bucket. The drivers live in the packages below this one (file, gcs, ...).
package bucket

import (
	"context"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/groveml/grove/internal/capped"
)

// Bucket is a store of objects named by slash-separated paths relative to
// the root directory or prefix of the bucket's URL.
type Bucket interface {
	// ReadObject returns the whole content of the named object and its
	// attributes. An object larger than limit bytes is an error, a
	// *capped.TooLargeError naming it, read no further than limit+1 bytes.
	ReadObject(ctx context.Context, name string, limit int64) ([]byte, Attrs, error)
	// List returns the objects whose names start with prefix (a plain string
	// prefix, not a directory), sorted by name.
	List(ctx context.Context, prefix string) ([]Object, error)
	// Open returns a reader of the named object's content.
	Open(ctx context.Context, name string) (io.ReadCloser, error)
	// String returns the bucket's URL.
	String() string
}

// Object is an entry of a bucket listing.
type Object struct {
	// Name is relative to the bucket's root directory or prefix.
	Name string
	// Size is in bytes.
	Size int64
}

// Attrs are the attributes of one version of an object.
type Attrs struct {
	// Version tells this version of the object from the others; it is what
	// Writer.WriteObject's precondition compares. It is opaque: each driver
	// documents what it is made of (a GCS generation, a hash of a file's
	// content, ...). It is never empty for an existing object.
	Version string
	// ModTime is when the object was last written.
	ModTime time.Time
	// Size is in bytes.
	Size int64
}

// ErrNotExist is wrapped by the errors for objects that do not exist.
var ErrNotExist = errors.New("object does not exist")

// ReadAll reads r, the content of object name of b, for a driver's
// ReadObject: more than limit bytes is a *capped.TooLargeError naming the
// object, and the error of a failed read names it too.
func ReadAll(r io.Reader, b Bucket, name string, limit int64) ([]byte, error) {
	data, err := capped.ReadAll(r, limit, fmt.Sprintf("object %s in %s", name, b))
	var tooLarge *capped.TooLargeError
	if err != nil && !errors.As(err, &tooLarge) {
		return nil, fmt.Errorf("reading %s from %s: %w", name, b, err)
	}
	return data, err
}

// LocalDir returns the absolute directory on this server that holds b's
// objects, for a bucket whose objects are files here (the file driver's:
// its URL and its errors name the directory), or "" for any other.
func LocalDir(b Bucket) string {
	if l, ok := b.(interface{ LocalDir() string }); ok {
		return l.LocalDir()
	}
	return ""
}
