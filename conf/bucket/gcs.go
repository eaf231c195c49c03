package bucket

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

	"github.com/groveml/grove/conf"
)

// gcsBucket is a bucket in Google Cloud Storage, or in an emulator.
type gcsBucket struct {
	client    *storage.Client
	ownClient bool // Close closes client
	bkt       *storage.BucketHandle
	loc       conf.BucketURL
	turns     turns
}

func (b *gcsBucket) updateTurns() *turns { return &b.turns }

func openGCS(ctx context.Context, loc conf.BucketURL, o options) (*gcsBucket, error) {
	client, own := o.client, false
	if client == nil {
		var err error
		client, err = storage.NewClient(ctx, append([]option.ClientOption{storage.WithJSONReads()}, o.clientOptions...)...)
		if err != nil {
			return nil, fmt.Errorf("creating storage client for %s: %w", loc, err)
		}
		own = true
	}
	return &gcsBucket{client: client, ownClient: own, bkt: client.Bucket(loc.Bucket), loc: loc}, nil
}

func (b *gcsBucket) String() string { return b.loc.String() }

// Close closes the storage client if Open created it.
func (b *gcsBucket) Close() error {
	if !b.ownClient {
		return nil
	}
	return b.client.Close()
}

// ReadObject implements Bucket.
func (b *gcsBucket) ReadObject(ctx context.Context, name string) ([]byte, Attrs, error) {
	r, err := b.reader(ctx, name)
	if err != nil {
		return nil, Attrs{}, err
	}
	defer r.Close()
	data, err := io.ReadAll(r)
	if err != nil {
		return nil, Attrs{}, fmt.Errorf("reading %s from %s: %w", name, b, err)
	}
	return data, Attrs{Generation: r.Attrs.Generation, ModTime: r.Attrs.LastModified, Size: int64(len(data))}, nil
}

// Open implements Bucket.
func (b *gcsBucket) Open(ctx context.Context, name string) (io.ReadCloser, error) {
	return b.reader(ctx, name)
}

func (b *gcsBucket) reader(ctx context.Context, name string) (*storage.Reader, error) {
	if name == "" {
		return nil, fmt.Errorf("invalid object name %q", name)
	}
	r, err := b.bkt.Object(b.loc.Prefix + name).NewReader(ctx)
	if errors.Is(err, storage.ErrObjectNotExist) {
		return nil, fmt.Errorf("%w: %s in %s", ErrNotExist, name, b)
	}
	if err != nil {
		return nil, fmt.Errorf("object %s in %s: %w", name, b, err)
	}
	return r, nil
}

// List implements Bucket.
func (b *gcsBucket) List(ctx context.Context, prefix string) ([]Object, error) {
	q := &storage.Query{Prefix: b.loc.Prefix + prefix}
	if err := q.SetAttrSelection([]string{"Name", "Size"}); err != nil {
		return nil, fmt.Errorf("listing %q in %s: %w", prefix, b, err)
	}
	var out []Object
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
		out = append(out, Object{Name: strings.TrimPrefix(attrs.Name, b.loc.Prefix), Size: attrs.Size})
	}
	slices.SortFunc(out, func(x, y Object) int { return strings.Compare(x.Name, y.Name) })
	return out, nil
}
