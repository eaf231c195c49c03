package bucket

import (
	"context"
	"errors"
	"io"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"cloud.google.com/go/storage"
	"github.com/fsouza/fake-gcs-server/fakestorage"
	"google.golang.org/api/option"
)

// Checksums from the B&A test suites (see the research notes, §2.4).
const (
	sumFile1    = "4f2d6937ca0d91126b175de2d90138a1c8825a3eb13c2d999317fd1a5f320653" // file1.txt = content1
	sumContent3 = "4f23a79b280289568bde060cd83efa0088ac765ae65350a43053bab82de9eb40" // content1..3
	sumModel1   = "59390c4fa97b2cbfe5bd300e254e6eddb7b4b45c2dbc0c1cfc6e93793a143d04" // model1 = bytes1
)

// testObjects is the content of every test bucket.
var testObjects = map[string]string{
	"model_config.json":      `{"model_metadata": []}`,
	"model1":                 "bytes1",
	"model12/v2":             "v2",
	"model123":               "bytes123",
	"dir/file1.txt":          "content1",
	"three/a.txt":            "content1",
	"three/b.txt.d/e":        "content2", // '.' sorts before '/'
	"three/b/c.txt":          "content3",
	"nested/saved_model.pb":  "pb",
	"nested/variables/x.idx": "index",
	"big/a":                  strings.Repeat("a", 600),
	"big/b":                  strings.Repeat("b", 600),
}

// newFileBucket writes objects into a temporary directory and opens it as a bucket.
func newFileBucket(t *testing.T, objects map[string]string) Bucket {
	t.Helper()
	dir := t.TempDir()
	for name, content := range objects {
		p := filepath.Join(dir, filepath.FromSlash(name))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	b, err := Open(context.Background(), "file://"+filepath.ToSlash(dir))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b.(io.Closer).Close() })
	return b
}

// newFakeGCS starts fake-gcs-server in-process, over HTTP, holding objects in bucket "models".
func newFakeGCS(t *testing.T, objects map[string]string) *fakestorage.Server {
	t.Helper()
	var initial []fakestorage.Object
	for name, content := range objects {
		initial = append(initial, fakestorage.Object{
			ObjectAttrs: fakestorage.ObjectAttrs{BucketName: "models", Name: name},
			Content:     []byte(content),
		})
	}
	srv, err := fakestorage.NewServerWithOptions(fakestorage.Options{
		InitialObjects: initial,
		Scheme:         "http",
		Host:           "127.0.0.1",
		PublicHost:     "127.0.0.1",
		Writer:         io.Discard,
	})
	if err != nil {
		t.Fatal(err)
	}
	srv.CreateBucketWithOpts(fakestorage.CreateBucketOpts{Name: "models"})
	t.Cleanup(srv.Stop)
	return srv
}

// newGCSBucket opens gs://models/<prefix> on a fake server holding objects
// under prefix, through a real storage client.
func newGCSBucket(t *testing.T, objects map[string]string, prefix string) Bucket {
	t.Helper()
	prefixed := make(map[string]string, len(objects))
	for name, content := range objects {
		prefixed[prefix+name] = content
	}
	if prefix != "" {
		prefixed["outside-the-prefix"] = "x"
	}
	srv := newFakeGCS(t, prefixed)
	b, err := Open(context.Background(), "gs://models/"+prefix,
		WithClientOptions(option.WithEndpoint(srv.URL()+"/storage/v1/"), option.WithoutAuthentication()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b.(io.Closer).Close() })
	return b
}

// eachBucket runs f against a file bucket and GCS buckets (with and without a prefix) holding objects.
func eachBucket(t *testing.T, objects map[string]string, f func(t *testing.T, b Bucket)) {
	t.Run("file", func(t *testing.T) { f(t, newFileBucket(t, objects)) })
	t.Run("gcs", func(t *testing.T) { f(t, newGCSBucket(t, objects, "")) })
	t.Run("gcs-prefix", func(t *testing.T) { f(t, newGCSBucket(t, objects, "serving/grove/")) })
}

func TestListMatchesPlainPrefixAndSorts(t *testing.T) {
	eachBucket(t, testObjects, func(t *testing.T, b Bucket) {
		ctx := context.Background()
		got, err := b.List(ctx, "model1")
		if err != nil {
			t.Fatal(err)
		}
		want := []Object{{"model1", 6}, {"model12/v2", 2}, {"model123", 8}}
		if !reflect.DeepEqual(got, want) {
			t.Errorf("List(model1) = %v, want %v", got, want)
		}
		got, err = b.List(ctx, "three/b")
		if err != nil {
			t.Fatal(err)
		}
		want = []Object{{"three/b.txt.d/e", 8}, {"three/b/c.txt", 8}}
		if !reflect.DeepEqual(got, want) {
			t.Errorf("List(three/b) = %v, want %v", got, want)
		}
		all, err := b.List(ctx, "")
		if err != nil {
			t.Fatal(err)
		}
		if len(all) != len(testObjects) {
			t.Errorf("List(\"\") has %d objects, want %d: %v", len(all), len(testObjects), all)
		}
		none, err := b.List(ctx, "absent/")
		if err != nil || len(none) != 0 {
			t.Errorf("List(absent/) = %v, %v; want nothing", none, err)
		}
	})
}

func TestReadObjectReturnsContentAndAttrs(t *testing.T) {
	eachBucket(t, testObjects, func(t *testing.T, b Bucket) {
		data, attrs, err := b.ReadObject(context.Background(), "model_config.json")
		if err != nil {
			t.Fatal(err)
		}
		if string(data) != testObjects["model_config.json"] {
			t.Errorf("content %q", data)
		}
		if attrs.Size != int64(len(data)) || attrs.Generation == 0 || attrs.ModTime.IsZero() {
			t.Errorf("attrs %+v", attrs)
		}
	})
}

func TestMissingObjectsAreErrNotExist(t *testing.T) {
	eachBucket(t, testObjects, func(t *testing.T, b Bucket) {
		ctx := context.Background()
		for _, name := range []string{"absent.json", "dir/absent", "model1/x"} {
			if _, _, err := b.ReadObject(ctx, name); !errors.Is(err, ErrNotExist) {
				t.Errorf("ReadObject(%s): got %v, want ErrNotExist", name, err)
			}
			if _, err := b.Open(ctx, name); !errors.Is(err, ErrNotExist) {
				t.Errorf("Open(%s): got %v, want ErrNotExist", name, err)
			}
		}
	})
}

func TestFileBucketDirectoriesAreNotObjects(t *testing.T) {
	b := newFileBucket(t, testObjects)
	for _, name := range []string{"dir", "dir/"} {
		if _, _, err := b.ReadObject(context.Background(), name); !errors.Is(err, ErrNotExist) {
			t.Errorf("ReadObject(%s): got %v, want ErrNotExist", name, err)
		}
	}
	if _, _, err := b.ReadObject(context.Background(), "dir/../model1"); err == nil || errors.Is(err, ErrNotExist) {
		t.Errorf("ReadObject(dir/../model1): got %v, want an invalid name error", err)
	}
}

func TestFileGenerationChangesWithContent(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "c.json")
	if err := os.WriteFile(p, []byte("{}"), 0o644); err != nil {
		t.Fatal(err)
	}
	b, err := Open(context.Background(), "file://"+dir)
	if err != nil {
		t.Fatal(err)
	}
	defer b.(io.Closer).Close()
	_, a1, err := b.ReadObject(context.Background(), "c.json")
	if err != nil {
		t.Fatal(err)
	}
	_, a2, _ := b.ReadObject(context.Background(), "c.json")
	if a1 != a2 {
		t.Errorf("unchanged file: generations %d and %d differ", a1.Generation, a2.Generation)
	}
	if err := os.WriteFile(p, []byte(`{"model_metadata":[]}`), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Chtimes(p, time.Time{}, a1.ModTime.Add(time.Second)); err != nil {
		t.Fatal(err)
	}
	_, a3, _ := b.ReadObject(context.Background(), "c.json")
	if a3.Generation == a1.Generation {
		t.Errorf("rewritten file kept generation %d", a1.Generation)
	}
}

func TestFileBucketRejectsSymlinksEscapingTheRoot(t *testing.T) {
	outside := t.TempDir()
	if err := os.WriteFile(filepath.Join(outside, "secret"), []byte("secret"), 0o644); err != nil {
		t.Fatal(err)
	}
	root := t.TempDir()
	for _, dir := range []string{"m", "inside"} {
		if err := os.Mkdir(filepath.Join(root, dir), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	mustWrite(t, filepath.Join(root, "inside", "w"), "weights")
	mustSymlink(t, filepath.Join("..", "..", filepath.Base(outside), "secret"), filepath.Join(root, "m", "rel-escape"))
	mustSymlink(t, filepath.Join(outside, "secret"), filepath.Join(root, "abs-escape"))
	mustSymlink(t, outside, filepath.Join(root, "dir-escape"))
	mustSymlink(t, "../inside/w", filepath.Join(root, "m", "ok"))
	mustSymlink(t, "inside", filepath.Join(root, "linked"))

	b, err := Open(context.Background(), "file://"+root)
	if err != nil {
		t.Fatal(err)
	}
	defer b.(io.Closer).Close()
	ctx := context.Background()
	for _, name := range []string{"m/rel-escape", "abs-escape", "dir-escape/secret"} {
		data, _, err := b.ReadObject(ctx, name)
		if err == nil || errors.Is(err, ErrNotExist) {
			t.Errorf("ReadObject(%s) = %q, %v; want an escape error", name, data, err)
		}
	}
	if _, err := b.List(ctx, "m/"); err == nil || !strings.Contains(err.Error(), "escapes") {
		t.Errorf("List(m/): got %v, want an escape error", err)
	}
	if _, err := Fetch(ctx, b, "m/", t.TempDir(), 0); err == nil {
		t.Error("Fetch(m/) succeeded; want an escape error")
	}
	// Symlinks that stay inside the root are followed.
	data, _, err := b.ReadObject(ctx, "m/ok")
	if err != nil || string(data) != "weights" {
		t.Errorf("ReadObject(m/ok) = %q, %v", data, err)
	}
	got, err := b.List(ctx, "linked/")
	if want := []Object{{"linked/w", 7}}; err != nil || !reflect.DeepEqual(got, want) {
		t.Errorf("List(linked/) = %v, %v; want %v", got, err, want)
	}
}

func TestFileBucketDetectsSymlinkCycles(t *testing.T) {
	root := t.TempDir()
	mustWrite(t, filepath.Join(root, "m", "f"), "x")
	mustSymlink(t, "..", filepath.Join(root, "m", "loop"))
	b, err := Open(context.Background(), "file://"+root)
	if err != nil {
		t.Fatal(err)
	}
	defer b.(io.Closer).Close()
	if _, err := b.List(context.Background(), "m/"); err == nil || !strings.Contains(err.Error(), "cycle") {
		t.Errorf("got %v, want a symlink cycle error", err)
	}
}

func TestOpenFileURLRelativeToWorkingDirectory(t *testing.T) {
	wd := t.TempDir()
	mustWrite(t, filepath.Join(wd, "rel", "dir", "model_config.json"), "{}")
	t.Chdir(wd)
	b, err := Open(context.Background(), "file://./rel/dir")
	if err != nil {
		t.Fatal(err)
	}
	defer b.(io.Closer).Close()
	data, _, err := b.ReadObject(context.Background(), "model_config.json")
	if err != nil || string(data) != "{}" {
		t.Errorf("ReadObject = %q, %v", data, err)
	}
	if want := "file://" + filepath.ToSlash(filepath.Join(wd, "rel", "dir")); b.String() != want {
		t.Errorf("String() = %q, want the absolute %q", b.String(), want)
	}
}

func TestOpenRejectsMissingDirectory(t *testing.T) {
	if _, err := Open(context.Background(), "file://"+filepath.Join(t.TempDir(), "absent")); err == nil {
		t.Error("opened a missing directory")
	}
}

func TestOpenGCSUsesStorageEmulatorHost(t *testing.T) {
	srv := newFakeGCS(t, map[string]string{"p/model_config.json": "{}"})
	t.Setenv("STORAGE_EMULATOR_HOST", strings.TrimPrefix(srv.URL(), "http://"))
	b, err := Open(context.Background(), "gs://models/p")
	if err != nil {
		t.Fatal(err)
	}
	defer b.(io.Closer).Close()
	data, _, err := b.ReadObject(context.Background(), "model_config.json")
	if err != nil || string(data) != "{}" {
		t.Errorf("ReadObject = %q, %v", data, err)
	}
	if b.String() != "gs://models/p/" {
		t.Errorf("String() = %q", b.String())
	}
}

func TestOpenGCSWithStorageClient(t *testing.T) {
	srv := newFakeGCS(t, map[string]string{"a": "b"})
	client, err := storage.NewClient(context.Background(), storage.WithJSONReads(),
		option.WithEndpoint(srv.URL()+"/storage/v1/"), option.WithoutAuthentication())
	if err != nil {
		t.Fatal(err)
	}
	defer client.Close()
	b, err := Open(context.Background(), "gs://models", WithStorageClient(client))
	if err != nil {
		t.Fatal(err)
	}
	data, _, err := b.ReadObject(context.Background(), "a")
	if err != nil || string(data) != "b" {
		t.Errorf("ReadObject = %q, %v", data, err)
	}
}

func mustWrite(t *testing.T, p, content string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}

func mustSymlink(t *testing.T, target, link string) {
	t.Helper()
	if err := os.Symlink(target, link); err != nil {
		t.Fatal(err)
	}
}
