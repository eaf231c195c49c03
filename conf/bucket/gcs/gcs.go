// Package gcs is the bucket driver of gs:// URLs: a Google Cloud Storage
// bucket, or an emulator of one.
package gcs

import (
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"

	"cloud.google.com/go/storage"
	"google.golang.org/api/iterator"
	"google.golang.org/api/option"

	"github.com/groveml/grove/conf/bucket"
)

// Option configures Open and Driver.
type Option func(*options)

type options struct {
	client        *storage.Client
	clientOptions []option.ClientOption
}

// WithStorageClient makes Open use client; the caller keeps ownership of
// it (closing the bucket does not close the client).
func WithStorageClient(client *storage.Client) Option {
	return func(o *options) { o.client = client }
}

// WithClientOptions adds options to the storage client that Open creates,
// e.g. option.WithEndpoint for an emulator.
func WithClientOptions(opts ...option.ClientOption) Option {
	return func(o *options) { o.clientOptions = append(o.clientOptions, opts...) }
}

// Driver returns the driver of gs:// URLs, opening buckets with opts.
func Driver(opts ...Option) bucket.Driver {
	return bucket.Driver{Scheme: "gs", Open: func(ctx context.Context, rawURL string) (bucket.Bucket, error) {
		return Open(ctx, rawURL, opts...)
	}}
}

// ParseURL returns the bucket name and object name prefix of a
// gs://bucket[/prefix] URL. The prefix is a directory, empty or ending in
// "/": "gs://b/models" holds the object "models/x" as "x".
func ParseURL(raw string) (name, prefix string, err error) {
	return bucket.ParseNamedURL(raw, "gs", checkName)
}

// checkName checks the characters allowed in GCS bucket names.
func checkName(name string) error {
	if name == "" {
		return errors.New("no bucket name")
	}
	for _, r := range name {
		if !('a' <= r && r <= 'z' || '0' <= r && r <= '9' || r == '-' || r == '_' || r == '.') {
			return fmt.Errorf("bucket name %q may only contain lowercase letters, digits, '-', '_' and '.'", name)
		}
	}
	return nil
}

// Bucket is a bucket in Google Cloud Storage, or in an emulator. An
// object's version is its GCS generation, in decimal.
type Bucket struct {
	bucket.Turns
	client    *storage.Client
	ownClient bool // Close closes client
	bkt       *storage.BucketHandle
	name      string
	prefix    string
}

// Open opens the gs:// bucket at rawURL. It uses a storage client made
// with storage.WithJSONReads() and the WithClientOptions options, unless
// WithStorageClient gives one. Like any storage client, it talks to the
// emulator at STORAGE_EMULATOR_HOST when that variable is set, and
// otherwise uses Application Default Credentials. Open does not contact
// the bucket.
func Open(ctx context.Context, rawURL string, opts ...Option) (*Bucket, error) {
	name, prefix, err := ParseURL(rawURL)
	if err != nil {
		return nil, err
	}
	var o options
	for _, opt := range opts {
		opt(&o)
	}
	b := &Bucket{client: o.client, name: name, prefix: prefix}
	if b.client == nil {
		b.client, err = storage.NewClient(ctx, append([]option.ClientOption{storage.WithJSONReads()}, o.clientOptions...)...)
		if err != nil {
			return nil, fmt.Errorf("creating storage client for %s: %w", b, err)
		}
		b.ownClient = true
	}
	b.bkt = b.client.Bucket(name)
	return b, nil
}

// String returns the bucket's URL, gs://bucket/prefix/.
func (b *Bucket) String() string { return "gs://" + b.name + "/" + b.prefix }

// Close closes the storage client if Open created it.
func (b *Bucket) Close() error {
	if !b.ownClient {
		return nil
	}
	return b.client.Close()
}

// ReadObject returns the named object's content and attributes.
func (b *Bucket) ReadObject(ctx context.Context, name string, limit int64) ([]byte, bucket.Attrs, error) {
	r, err := b.reader(ctx, name)
	if err != nil {
		return nil, bucket.Attrs{}, err
	}
	defer r.Close()
	data, err := bucket.ReadAll(r, b, name, limit)
	if err != nil {
		return nil, bucket.Attrs{}, err
	}
	return data, bucket.Attrs{Version: version(r.Attrs.Generation), ModTime: r.Attrs.LastModified, Size: int64(len(data))}, nil
}

// Open returns a reader of the named object.
func (b *Bucket) Open(ctx context.Context, name string) (io.ReadCloser, error) {
	return b.reader(ctx, name)
}

func (b *Bucket) reader(ctx context.Context, name string) (*storage.Reader, error) {
	if name == "" {
		return nil, fmt.Errorf("invalid object name %q", name)
	}
	r, err := b.bkt.Object(b.prefix + name).NewReader(ctx)
	if errors.Is(err, storage.ErrObjectNotExist) {
		return nil, fmt.Errorf("%w: %s in %s", bucket.ErrNotExist, name, b)
	}
	if err != nil {
		return nil, fmt.Errorf("object %s in %s: %w", name, b, err)
	}
	return r, nil
}

// List returns the objects whose names start with prefix, sorted.
func (b *Bucket) List(ctx context.Context, prefix string) ([]bucket.Object, error) {
	q := &storage.Query{Prefix: b.prefix + prefix}
	if err := q.SetAttrSelection([]string{"Name", "Size"}); err != nil {
		return nil, fmt.Errorf("listing %q in %s: %w", prefix, b, err)
	}
	var out []bucket.Object
	it := b.bkt.Objects(ctx, q)
	for {
		attrs, err := it.Next()
		if err == iterator.Done {
			break
		}
		if err != nil {
			return nil, fmt.Errorf("listing %q in %s: %w", prefix, b, err)
		}
		if attrs.Name == "" { // a synthetic prefix entry; none without a delimiter
			continue
		}
		out = append(out, bucket.Object{Name: strings.TrimPrefix(attrs.Name, b.prefix), Size: attrs.Size})
	}
	slices.SortFunc(out, func(x, y bucket.Object) int { return strings.Compare(x.Name, y.Name) })
	return out, nil
}
