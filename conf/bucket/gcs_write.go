package bucket

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"net/http"

	"cloud.google.com/go/storage"
	"google.golang.org/api/googleapi"
)

// writeIDKey is the custom metadata key under which WriteObject tags each
// version it writes, to recognise its own write behind a precondition
// failure.
const writeIDKey = "grove-write-id"

// WriteObject implements Writer with a GCS generation precondition
// (ifGenerationMatch, 0 meaning "does not exist"); GCS answers HTTP 412
// when it fails, which becomes ErrConflict.
//
// The storage client retries conditional uploads after transient errors.
// If the first attempt was applied but its answer lost, the retry fails
// its precondition against the version the first attempt wrote; to tell
// that from a real conflict, each version carries a random write ID in its
// metadata, and a 412 whose current version has ours is a success.
func (b *gcsBucket) WriteObject(ctx context.Context, name string, data []byte, ifGeneration int64) (Attrs, error) {
	if name == "" {
		return Attrs{}, fmt.Errorf("writing to %s: invalid object name %q", b, name)
	}
	if ifGeneration < 0 {
		return Attrs{}, fmt.Errorf("writing %s to %s: negative generation %d", name, b, ifGeneration)
	}
	obj := b.bkt.Object(b.loc.Prefix + name)
	cond := storage.Conditions{GenerationMatch: ifGeneration}
	if ifGeneration == 0 {
		cond = storage.Conditions{DoesNotExist: true}
	}
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
		a := w.Attrs()
		return Attrs{Generation: a.Generation, ModTime: a.Updated, Size: a.Size}, nil
	}
	if !isPreconditionFailed(err) {
		return Attrs{}, fmt.Errorf("writing %s to %s: %w", name, b, err)
	}
	if a, aerr := obj.Attrs(ctx); aerr == nil && a.Metadata[writeIDKey] == writeID {
		return Attrs{Generation: a.Generation, ModTime: a.Updated, Size: a.Size}, nil
	}
	want := "not to exist"
	if ifGeneration > 0 {
		want = fmt.Sprintf("to be at generation %d", ifGeneration)
	}
	return Attrs{}, fmt.Errorf("writing %s to %s: %w: the write required it %s: %v", name, b, ErrConflict, want, err)
}

// isPreconditionFailed reports whether err is GCS's HTTP 412.
func isPreconditionFailed(err error) bool {
	var gerr *googleapi.Error
	return errors.As(err, &gerr) && gerr.Code == http.StatusPreconditionFailed
}
