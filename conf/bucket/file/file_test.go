package file

import (
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/groveml/grove/conf/bucket"
	"github.com/groveml/grove/conf/bucket/buckettest"
)

// newStore writes objects into a temporary directory; each bucket opened
// on it has its own directory handle, as another process's would.
func newStore(t *testing.T, objects map[string]string) func(t *testing.T) bucket.Writer {
	t.Helper()
	dir := t.TempDir()
	for name, content := range objects {
		mustWrite(t, filepath.Join(dir, filepath.FromSlash(name)), content)
	}
	return func(t *testing.T) bucket.Writer { return mustOpen(t, dir) }
}

// mustOpen opens the file bucket at dir, closing it when the test ends.
func mustOpen(t *testing.T, dir string) *Bucket {
	t.Helper()
	b, err := Open("file://" + filepath.ToSlash(dir))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b.Close() })
	return b
}

func TestFileBucketBehavesAsABucket(t *testing.T) {
	buckettest.Run(t, newStore)
}

func TestParseURL(t *testing.T) {
	for _, tc := range []struct{ url, dir string }{
		{"file:///srv/models", "/srv/models"},
		{"file:///srv/models/", "/srv/models"},
		{"file://localhost/srv", "/srv"},
		{"file://./rel/dir", "rel/dir"},
		{"file://.", "."},
		{"file://./.hidden", ".hidden"},
		{"file://./a/../b", "b"},
	} {
		dir, err := ParseURL(tc.url)
		if err != nil || dir != filepath.FromSlash(tc.dir) {
			t.Errorf("%s: got %q, %v; want %q", tc.url, dir, err, tc.dir)
		}
	}
	for _, tc := range []struct{ url, want string }{
		{"file://models", `not host "models"`},
		{"file://", "no directory"},
		{"file:rel", "with two slashes"},
		{"gs://b", "the scheme is not file"},
		{"file:///srv?x", "a query is not allowed"},
		{"/srv/models", "no scheme"},
		{"file:///srv/a%00b", "control character"},
	} {
		_, err := ParseURL(tc.url)
		buckettest.CheckURLError(t, tc.url, err, tc.want)
	}
}

// FuzzParseURL checks that ParseURL never panics and that a directory it
// returns, written back as a URL, parses to itself.
func FuzzParseURL(f *testing.F) {
	f.Add("file:///srv/models")
	f.Add("file://./rel/../dir")
	f.Fuzz(func(t *testing.T, raw string) {
		dir, err := ParseURL(raw)
		if err != nil {
			if !strings.HasPrefix(err.Error(), "invalid bucket URL ") {
				t.Fatalf("%q: error %q does not say it is an invalid bucket URL", raw, err)
			}
			return
		}
		if dir == "" || dir != filepath.Clean(dir) {
			t.Fatalf("%q: directory %q is not clean", raw, dir)
		}
		again := "file://" + filepath.ToSlash(dir)
		if !filepath.IsAbs(dir) {
			again = "file://./" + filepath.ToSlash(dir)
		}
		if strings.ContainsAny(dir, "?#%") {
			return // would need escaping to be written back
		}
		if d2, err := ParseURL(again); err != nil || d2 != dir {
			t.Fatalf("%q: directory %q written back as %q parses to %q, %v", raw, dir, again, d2, err)
		}
	})
}

func TestDriverServesFileURLs(t *testing.T) {
	dir := t.TempDir()
	mustWrite(t, filepath.Join(dir, "model_config.json"), "{}")
	b, err := bucket.Drivers{Driver()}.Open(t.Context(), "file://"+dir)
	if err != nil {
		t.Fatal(err)
	}
	defer b.(*Bucket).Close()
	if data, _, err := b.ReadObject(t.Context(), "model_config.json", 1<<20); err != nil || string(data) != "{}" {
		t.Errorf("ReadObject = %q, %v", data, err)
	}
}

func TestDirectoriesAreNotObjects(t *testing.T) {
	b := newStore(t, buckettest.Objects())(t)
	for _, name := range []string{"dir", "dir/"} {
		if _, _, err := b.ReadObject(t.Context(), name, 1<<20); !errors.Is(err, bucket.ErrNotExist) {
			t.Errorf("ReadObject(%s): got %v, want ErrNotExist", name, err)
		}
	}
	if _, _, err := b.ReadObject(t.Context(), "dir/../model1", 1<<20); err == nil || errors.Is(err, bucket.ErrNotExist) {
		t.Errorf("ReadObject(dir/../model1): got %v, want an invalid name error", err)
	}
}

func TestReadsFollowSymlinksOnlyInsideTheRoot(t *testing.T) {
	outside := t.TempDir()
	mustWrite(t, filepath.Join(outside, "secret"), "secret")
	root := t.TempDir()
	mustWrite(t, filepath.Join(root, "inside", "w"), "weights")
	if err := os.Mkdir(filepath.Join(root, "m"), 0o755); err != nil {
		t.Fatal(err)
	}
	mustSymlink(t, filepath.Join("..", "..", filepath.Base(outside), "secret"), filepath.Join(root, "m", "rel-escape"))
	mustSymlink(t, filepath.Join(outside, "secret"), filepath.Join(root, "abs-escape"))
	mustSymlink(t, outside, filepath.Join(root, "dir-escape"))
	mustSymlink(t, "../inside/w", filepath.Join(root, "m", "ok"))
	mustSymlink(t, "inside", filepath.Join(root, "linked"))

	b := mustOpen(t, root)
	ctx := t.Context()
	for _, name := range []string{"m/rel-escape", "abs-escape", "dir-escape/secret"} {
		data, _, err := b.ReadObject(ctx, name, 1<<20)
		if err == nil || errors.Is(err, bucket.ErrNotExist) {
			t.Errorf("ReadObject(%s) = %q, %v; want an escape error", name, data, err)
		}
	}
	if _, err := b.List(ctx, "m/"); err == nil || !strings.Contains(err.Error(), "escapes") {
		t.Errorf("List(m/): got %v, want an escape error", err)
	}
	if _, err := bucket.Fetch(ctx, b, "m/", t.TempDir(), 0); err == nil {
		t.Error("Fetch(m/) succeeded; want an escape error")
	}
	// Symlinks that stay inside the root are followed.
	data, _, err := b.ReadObject(ctx, "m/ok", 1<<20)
	if err != nil || string(data) != "weights" {
		t.Errorf("ReadObject(m/ok) = %q, %v", data, err)
	}
	got, err := b.List(ctx, "linked/")
	if want := []bucket.Object{{Name: "linked/w", Size: 7}}; err != nil || !reflect.DeepEqual(got, want) {
		t.Errorf("List(linked/) = %v, %v; want %v", got, err, want)
	}
}

func TestListDetectsSymlinkCycles(t *testing.T) {
	root := t.TempDir()
	mustWrite(t, filepath.Join(root, "m", "f"), "x")
	mustSymlink(t, "..", filepath.Join(root, "m", "loop"))
	if _, err := mustOpen(t, root).List(t.Context(), "m/"); err == nil || !strings.Contains(err.Error(), "cycle") {
		t.Errorf("got %v, want a symlink cycle error", err)
	}
}

func TestOpenResolvesRelativeURLsAgainstTheWorkingDirectory(t *testing.T) {
	wd := t.TempDir()
	mustWrite(t, filepath.Join(wd, "rel", "dir", "model_config.json"), "{}")
	t.Chdir(wd)
	b, err := Open("file://./rel/dir")
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	data, _, err := b.ReadObject(t.Context(), "model_config.json", 1<<20)
	if err != nil || string(data) != "{}" {
		t.Errorf("ReadObject = %q, %v", data, err)
	}
	if want := "file://" + filepath.ToSlash(filepath.Join(wd, "rel", "dir")); b.String() != want {
		t.Errorf("String() = %q, want the absolute %q", b.String(), want)
	}
}

func TestOpenRejectsAMissingDirectory(t *testing.T) {
	if _, err := Open("file://" + filepath.Join(t.TempDir(), "absent")); err == nil {
		t.Error("opened a missing directory")
	}
}

// TestVersionChangesWithTheContentAlone writes two same-size contents and
// gives both files the same modification time, as two writes in one
// timestamp tick (or a hand edit that kept the time) would have: the
// versions still differ, and a writer holding the first one conflicts.
func TestVersionChangesWithTheContentAlone(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "c.json")
	tick := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	mustWrite(t, p, `{"v":1}`)
	if err := os.Chtimes(p, tick, tick); err != nil {
		t.Fatal(err)
	}
	b := mustOpen(t, dir)
	_, a1, err := b.ReadObject(t.Context(), "c.json", 1<<20)
	if err != nil {
		t.Fatal(err)
	}
	a2, err := b.WriteObject(t.Context(), "c.json", []byte(`{"v":2}`), a1.Version)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Chtimes(p, tick, tick); err != nil {
		t.Fatal(err)
	}
	_, read2, err := b.ReadObject(t.Context(), "c.json", 1<<20)
	if err != nil || read2.Version != a2.Version || !read2.ModTime.Equal(a1.ModTime) || read2.Size != a1.Size {
		t.Fatalf("after the write: %+v, %v; want version %q at the first version's time and size %+v", read2, err, a2.Version, a1)
	}
	if a2.Version == a1.Version {
		t.Fatalf("same-size content in the same tick kept version %q", a1.Version)
	}
	if _, err := b.WriteObject(t.Context(), "c.json", []byte(`{"v":3}`), a1.Version); !errors.Is(err, bucket.ErrConflict) {
		t.Errorf("write at the first version: got %v, want ErrConflict", err)
	}
	// A hand edit in place, keeping the size and the time, is seen too.
	if err := os.WriteFile(p, []byte(`{"v":9}`), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Chtimes(p, tick, tick); err != nil {
		t.Fatal(err)
	}
	if _, err := b.WriteObject(t.Context(), "c.json", []byte(`{"v":3}`), a2.Version); !errors.Is(err, bucket.ErrConflict) {
		t.Errorf("write over a hand edit: got %v, want ErrConflict", err)
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

func TestLocalDirNamesTheBucketsAbsoluteDirectory(t *testing.T) {
	dir := t.TempDir()
	b, err := Open("file://" + filepath.ToSlash(dir))
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	if got := bucket.LocalDir(b); got != dir || b.String() != "file://"+filepath.ToSlash(got) {
		t.Errorf("LocalDir = %q, String = %q; want %q", got, b.String(), dir)
	}
}
