package gcs

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"net/http"
	"strconv"

	"cloud.google.com/go/storage"
	"google.golang.org/api/googleapi"

	"github.com/groveml/grove/conf/bucket"
)

// writeIDKey is the custom metadata key under which WriteObject tags each
// version it writes, to recognise its own write behind a precondition
// failure.
const writeIDKey = "grove-write-id"

// version is the Attrs.Version of a GCS generation.
func version(generation int64) string { return strconv.FormatInt(generation, 10) }

// parseVersion returns the generation an Attrs.Version holds.
func parseVersion(v string) (int64, error) {
	g, err := strconv.ParseInt(v, 10, 64)
	if err != nil || g <= 0 {
		return 0, fmt.Errorf("version %q is not a GCS generation (a positive decimal number)", v)
	}
	return g, nil
}

// WriteObject replaces the named object's content with data if the object
// is at version ifVersion ("": if it does not exist); see bucket.Writer. It
// writes with a GCS generation precondition (ifGenerationMatch, 0 meaning
// "does not exist"); GCS answers HTTP 412 when it fails, which becomes
// bucket.ErrConflict.
//
// The storage client retries conditional uploads after transient errors.
// If the first attempt was applied but its answer lost, the retry fails
// its precondition against the version the first attempt wrote; to tell
// that from a real conflict, each version carries a random write ID in its
// metadata, and a 412 whose current version has ours is a success.
func (b *Bucket) WriteObject(ctx context.Context, name string, data []byte, ifVersion string) (bucket.Attrs, error) {
	if name == "" {
		return bucket.Attrs{}, fmt.Errorf("writing to %s: invalid object name %q", b, name)
	}
	cond := storage.Conditions{DoesNotExist: true}
	if ifVersion != "" {
		g, err := parseVersion(ifVersion)
		if err != nil {
			return bucket.Attrs{}, fmt.Errorf("writing %s to %s: %w", name, b, err)
		}
		cond = storage.Conditions{GenerationMatch: g}
	}
	obj := b.bkt.Object(b.prefix + name)
	var id [16]byte
	rand.Read(id[:])
	writeID := hex.EncodeToString(id[:])

	ctx, cancel := context.WithCancel(ctx)
	defer cancel() // aborts the upload if Write fails
	w := obj.If(cond).NewWriter(ctx)
	w.Metadata = map[string]string{writeIDKey: writeID}
	_, werr := w.Write(data)
	cerr := w.Close()
	err := errors.Join(werr, cerr)
	if err == nil {
		return attrs(w.Attrs()), nil
	}
	if !isPreconditionFailed(err) {
		return bucket.Attrs{}, fmt.Errorf("writing %s to %s: %w", name, b, err)
	}
	if a, aerr := obj.Attrs(ctx); aerr == nil && a.Metadata[writeIDKey] == writeID {
		return attrs(a), nil
	}
	want := "not to exist"
	if ifVersion != "" {
		want = "to be at generation " + ifVersion
	}
	return bucket.Attrs{}, fmt.Errorf("writing %s to %s: %w: the write required it %s: %v", name, b, bucket.ErrConflict, want, err)
}

// attrs returns the bucket.Attrs of a GCS object version.
func attrs(a *storage.ObjectAttrs) bucket.Attrs {
	return bucket.Attrs{Version: version(a.Generation), ModTime: a.Updated, Size: a.Size}
}

// isPreconditionFailed reports whether err is GCS's HTTP 412.
func isPreconditionFailed(err error) bool {
	var gerr *googleapi.Error
	return errors.As(err, &gerr) && gerr.Code == http.StatusPreconditionFailed
}
