package it

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/fsouza/fake-gcs-server/fakestorage"
)

// testBucket is a bucket the test writes and grove reads.
type testBucket interface {
	// URL is the --bucket value; Env the environment grove needs to reach it.
	URL() string
	Env() []string
	Put(t *testing.T, name string, data []byte)
	Delete(t *testing.T, name string)
}

// dirBucket is a file:// bucket in a temp directory.
type dirBucket struct{ dir string }

func newDirBucket(t *testing.T) *dirBucket { return &dirBucket{dir: t.TempDir()} }

func (b *dirBucket) URL() string   { return "file://" + b.dir }
func (b *dirBucket) Env() []string { return nil }

// Put writes atomically, as a careful uploader would.
func (b *dirBucket) Put(t *testing.T, name string, data []byte) {
	t.Helper()
	p := filepath.Join(b.dir, filepath.FromSlash(name))
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	tmp := p + ".tmp-upload"
	if err := os.WriteFile(tmp, data, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, p); err != nil {
		t.Fatal(err)
	}
}

func (b *dirBucket) Delete(t *testing.T, name string) {
	t.Helper()
	if err := os.Remove(filepath.Join(b.dir, filepath.FromSlash(name))); err != nil {
		t.Fatal(err)
	}
}

// gcsBucket is a gs:// bucket on an in-process fake-gcs-server, reached by
// grove through the real GCS client and STORAGE_EMULATOR_HOST.
type gcsBucket struct {
	srv    *fakestorage.Server
	bucket string
	prefix string
}

func newGCSBucket(t *testing.T) *gcsBucket {
	t.Helper()
	srv, err := fakestorage.NewServerWithOptions(fakestorage.Options{
		Scheme: "http", Host: "127.0.0.1", PublicHost: "127.0.0.1", NoListener: false,
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(srv.Stop)
	b := &gcsBucket{srv: srv, bucket: "models", prefix: "ads/"}
	srv.CreateBucketWithOpts(fakestorage.CreateBucketOpts{Name: b.bucket})
	return b
}

func (b *gcsBucket) URL() string { return "gs://" + b.bucket + "/" + strings.TrimSuffix(b.prefix, "/") }

func (b *gcsBucket) Env() []string {
	return []string{"STORAGE_EMULATOR_HOST=" + strings.TrimPrefix(b.srv.URL(), "http://")}
}

func (b *gcsBucket) Put(t *testing.T, name string, data []byte) {
	t.Helper()
	b.srv.CreateObject(fakestorage.Object{ObjectAttrs: fakestorage.ObjectAttrs{BucketName: b.bucket, Name: b.prefix + name}, Content: data})
}

func (b *gcsBucket) Delete(t *testing.T, name string) {
	t.Helper()
	if err := b.srv.Backend().DeleteObject(b.bucket, b.prefix+name); err != nil {
		t.Fatal(err)
	}
}

// eachBucket runs f as a subtest against a file:// and a gs:// bucket.
func eachBucket(t *testing.T, f func(t *testing.T, b testBucket)) {
	t.Run("file", func(t *testing.T) { f(t, newDirBucket(t)) })
	t.Run("gcs", func(t *testing.T) { f(t, newGCSBucket(t)) })
}
