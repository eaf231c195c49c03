// Package bucket reads the object store that holds Grove's model config
// and models (a local directory or a Google Cloud Storage bucket), copies
// models into a local cache and computes model checksums.
package bucket

import (
	"context"
	"errors"
	"io"
	"time"

	"cloud.google.com/go/storage"
	"google.golang.org/api/option"

	"github.com/groveml/grove/conf"
)

// Bucket is a store of objects named by slash-separated paths relative to
// the root directory or prefix of the bucket's URL.
//
// A Bucket returned by Open also implements io.Closer.
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

// Attrs are the attributes of an object that tell one version from another.
type Attrs struct {
	// Generation is the GCS object generation; for local files it is
	// derived from the modification time (to the nanosecond) and the size,
	// and Writer.WriteObject makes each write's modification time later
	// than the previous version's, so every write changes it. It is never 0
	// for an existing object.
	Generation int64
	// ModTime is when the object was last written.
	ModTime time.Time
	// Size is in bytes.
	Size int64
}

// ErrNotExist is wrapped by the errors for objects that do not exist.
var ErrNotExist = errors.New("object does not exist")

// Option configures Open.
type Option func(*options)

type options struct {
	client        *storage.Client
	clientOptions []option.ClientOption
}

// WithStorageClient makes Open use client for gs:// URLs; the caller keeps
// ownership of it (closing the bucket does not close the client).
func WithStorageClient(client *storage.Client) Option {
	return func(o *options) { o.client = client }
}

// WithClientOptions adds options to the storage client that Open creates
// for gs:// URLs, e.g. option.WithEndpoint for an emulator.
func WithClientOptions(opts ...option.ClientOption) Option {
	return func(o *options) { o.clientOptions = append(o.clientOptions, opts...) }
}

// Open opens the bucket at a URL accepted by conf.ParseBucketURL.
//
// A file:// bucket's directory must exist; relative directories are
// resolved against the working directory now. Symlinks inside it are
// followed as long as they stay inside it; symlinks that point outside it,
// and absolute symlinks, make reads fail.
//
// A gs:// bucket uses a storage client made with storage.WithJSONReads()
// and the WithClientOptions options, unless WithStorageClient gives one.
// Like any storage client, it talks to the emulator at
// STORAGE_EMULATOR_HOST when that variable is set. Open does not contact
// the bucket.
func Open(ctx context.Context, rawURL string, opts ...Option) (Bucket, error) {
	loc, err := conf.ParseBucketURL(rawURL)
	if err != nil {
		return nil, err
	}
	var o options
	for _, opt := range opts {
		opt(&o)
	}
	switch loc.Scheme {
	case "file":
		return openFile(loc.Dir)
	default:
		return openGCS(ctx, loc, o)
	}
}
