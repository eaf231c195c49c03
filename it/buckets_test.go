package it

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/fsouza/fake-gcs-server/fakestorage"

	"github.com/groveml/grove/conf/bucket/s3/s3fake"
)

// testBucket is a bucket the test writes and grove reads.
type testBucket interface {
	// URL is the --bucket value; Env the environment and Args the other
	// flags grove needs to reach it.
	URL() string
	Env() []string
	Args() []string
	Put(t *testing.T, name string, data []byte)
	Delete(t *testing.T, name string)
}

// startOn runs grove serve on b (see startGrove) with args.
func startOn(t *testing.T, b testBucket, args ...string) *grove {
	t.Helper()
	return startGrove(t, b.URL(), b.Env(), append(b.Args(), args...)...)
}

// dirBucket is a file:// bucket in a temp directory.
type dirBucket struct{ dir string }

func newDirBucket(t *testing.T) *dirBucket { return &dirBucket{dir: t.TempDir()} }

func (b *dirBucket) URL() string    { return "file://" + b.dir }
func (b *dirBucket) Env() []string  { return nil }
func (b *dirBucket) Args() []string { return nil }

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

func (b *gcsBucket) Args() []string { return nil }

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

// s3Bucket is an s3:// bucket on an in-process gofakes3 store, reached by
// grove through aws-sdk-go-v2 with --s3-endpoint and credentials in its
// environment.
type s3Bucket struct {
	srv    *s3fake.Server
	bucket string
	prefix string
}

func newS3Bucket(t *testing.T) *s3Bucket {
	t.Helper()
	return &s3Bucket{srv: s3fake.Start(t, "models"), bucket: "models", prefix: "ads/"}
}

func (b *s3Bucket) URL() string { return "s3://" + b.bucket + "/" + strings.TrimSuffix(b.prefix, "/") }

// Env gives grove credentials and keeps it from the machine's AWS setup:
// no shared config, no instance metadata; the region is left unset, so
// grove uses its default.
func (b *s3Bucket) Env() []string {
	return []string{"AWS_ACCESS_KEY_ID=AKIDTEST", "AWS_SECRET_ACCESS_KEY=secret", "AWS_SESSION_TOKEN=",
		"AWS_REGION=", "AWS_DEFAULT_REGION=", "AWS_PROFILE=", "AWS_ENDPOINT_URL=", "AWS_ENDPOINT_URL_S3=",
		"AWS_CONFIG_FILE=/nonexistent/aws-config", "AWS_SHARED_CREDENTIALS_FILE=/nonexistent/aws-credentials",
		"AWS_EC2_METADATA_DISABLED=true"}
}

func (b *s3Bucket) Args() []string { return []string{"--s3-endpoint", b.srv.URL} }

func (b *s3Bucket) Put(t *testing.T, name string, data []byte) {
	t.Helper()
	b.srv.Put(t, b.bucket, b.prefix+name, data)
}

func (b *s3Bucket) Delete(t *testing.T, name string) {
	t.Helper()
	b.srv.Delete(t, b.bucket, b.prefix+name)
}

// eachBucket runs f as a subtest against a file://, a gs:// and an s3://
// bucket. The tests that run on every kind are those that exercise what a
// bucket does: reading the config and fetching models (serving the
// configured models), fetching new content in place (the update under
// load), and conditional writes from replicas (the management API). The
// other lifecycle rules do not depend on the bucket: they are table tests
// of the planner and in-process System tests (actors), and run here once,
// on a directory, with onDir.
func eachBucket(t *testing.T, f func(t *testing.T, b testBucket)) {
	t.Run("file", func(t *testing.T) { f(t, newDirBucket(t)) })
	t.Run("gcs", func(t *testing.T) { f(t, newGCSBucket(t)) })
	t.Run("s3", func(t *testing.T) { f(t, newS3Bucket(t)) })
}

// onDir runs f against a file:// bucket (see eachBucket).
func onDir(t *testing.T, f func(t *testing.T, b testBucket)) { f(t, newDirBucket(t)) }
