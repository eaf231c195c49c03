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
	"io"
	"time"
)

// Bucket is a store of objects named by slash-separated paths relative to
// the root directory or prefix of the bucket's URL.
type Bucket interface {
	// ReadObject returns the whole content of the named object and its attributes.
	ReadObject(ctx context.Context, name string) ([]byte, Attrs, error)
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

// LocalDir returns the absolute directory on this server that holds b's
// objects, for a bucket whose objects are files here (the file driver's:
// its URL and its errors name the directory), or "" for any other.
func LocalDir(b Bucket) string {
	if l, ok := b.(interface{ LocalDir() string }); ok {
		return l.LocalDir()
	}
	return ""
}
