package bucket

import (
	"context"
	"errors"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

// readLocal returns the content of every file of m, by name.
func readLocal(t *testing.T, m *LocalModel) map[string]string {
	t.Helper()
	got := map[string]string{}
	for _, f := range m.Files {
		data, err := os.ReadFile(filepath.Join(m.Dir, filepath.FromSlash(f)))
		if err != nil {
			t.Fatal(err)
		}
		got[f] = string(data)
	}
	return got
}

func TestFetchDirectoryModel(t *testing.T) {
	eachBucket(t, testObjects, func(t *testing.T, b Bucket) {
		cache := t.TempDir()
		m, err := Fetch(context.Background(), b, "nested/", cache, 1<<20)
		if err != nil {
			t.Fatal(err)
		}
		if want := []string{"saved_model.pb", "variables/x.idx"}; !reflect.DeepEqual(m.Files, want) {
			t.Errorf("Files = %q, want %q", m.Files, want)
		}
		if got := readLocal(t, m); got["saved_model.pb"] != "pb" || got["variables/x.idx"] != "index" {
			t.Errorf("content %q", got)
		}
		if m.Size != 7 || filepath.Dir(m.Dir) != cache {
			t.Errorf("Size = %d, Dir = %s", m.Size, m.Dir)
		}
		entries, _ := os.ReadDir(m.Dir)
		for _, e := range entries {
			if strings.HasPrefix(e.Name(), ".grove-tmp") {
				t.Errorf("temporary file %s left behind", e.Name())
			}
		}
		if err := m.Remove(); err != nil {
			t.Fatal(err)
		}
		if _, err := os.Stat(m.Dir); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("Remove left %s: %v", m.Dir, err)
		}
	})
}

func TestFetchChecksumVectors(t *testing.T) {
	eachBucket(t, testObjects, func(t *testing.T, b Bucket) {
		for _, tc := range []struct{ path, want string }{
			{"dir/", sumFile1},
			{"dir/file1.txt", sumFile1},
			{"three/", sumContent3},
			{"model1", sumModel1},
		} {
			m, err := Fetch(context.Background(), b, tc.path, t.TempDir(), 0)
			if err != nil {
				t.Errorf("%s: %v", tc.path, err)
				continue
			}
			if m.Checksum != tc.want {
				t.Errorf("%s: checksum %s, want %s", tc.path, m.Checksum, tc.want)
			}
		}
	})
}

func TestFetchSingleFileModelIsExactMatch(t *testing.T) {
	eachBucket(t, testObjects, func(t *testing.T, b Bucket) {
		m, err := Fetch(context.Background(), b, "model1", t.TempDir(), 0)
		if err != nil {
			t.Fatal(err)
		}
		if got := readLocal(t, m); !reflect.DeepEqual(got, map[string]string{"model1": "bytes1"}) {
			t.Errorf("model1 fetched %q; model12/v2 and model123 must not match", got)
		}
		m, err = Fetch(context.Background(), b, "three/b/c.txt", t.TempDir(), 0)
		if err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(m.Files, []string{"c.txt"}) {
			t.Errorf("Files = %q, want the base name", m.Files)
		}
	})
}

func TestFetchWithoutObjectsFails(t *testing.T) {
	eachBucket(t, testObjects, func(t *testing.T, b Bucket) {
		cache := t.TempDir()
		for _, p := range []string{"absent/", "absent", "model", "dir"} {
			_, err := Fetch(context.Background(), b, p, cache, 0)
			if err == nil || !strings.Contains(err.Error(), `no objects found under model path "`+p+`"`) {
				t.Errorf("%s: got %v", p, err)
			}
		}
		_, err := Fetch(context.Background(), b, "dir", cache, 0)
		if err == nil || !strings.Contains(err.Error(), `write "dir/"`) {
			t.Errorf("dir: got %v, want a hint about the trailing slash", err)
		}
		if entries, _ := os.ReadDir(cache); len(entries) != 0 {
			t.Errorf("failed fetches left %d entries in the cache", len(entries))
		}
	})
}

func TestFetchRejectsModelsOverTheLimitBeforeCopying(t *testing.T) {
	eachBucket(t, testObjects, func(t *testing.T, b Bucket) {
		cache := t.TempDir()
		_, err := Fetch(context.Background(), b, "big/", cache, 1000)
		if err == nil || !strings.Contains(err.Error(), "is 1200 bytes, over the limit of 1000 bytes") {
			t.Errorf("got %v", err)
		}
		if entries, _ := os.ReadDir(cache); len(entries) != 0 {
			t.Errorf("the rejected model was copied: %v", entries)
		}
		if _, err := Fetch(context.Background(), b, "big/", cache, 1200); err != nil {
			t.Errorf("a model exactly at the limit: %v", err)
		}
	})
}

// shrinkingBucket under-reports object sizes, as if objects grew after listing.
type shrinkingBucket struct{ Bucket }

func (b shrinkingBucket) List(ctx context.Context, prefix string) ([]Object, error) {
	objs, err := b.Bucket.List(ctx, prefix)
	for i := range objs {
		objs[i].Size = 1
	}
	return objs, err
}

func TestFetchEnforcesTheLimitWhileCopying(t *testing.T) {
	eachBucket(t, testObjects, func(t *testing.T, b Bucket) {
		cache := t.TempDir()
		_, err := Fetch(context.Background(), shrinkingBucket{b}, "big/", cache, 1000)
		if err == nil || !strings.Contains(err.Error(), "grew over the limit of 1000 bytes") {
			t.Errorf("got %v", err)
		}
		if entries, _ := os.ReadDir(cache); len(entries) != 0 {
			t.Errorf("the partial copy was left: %v", entries)
		}
	})
}

func TestFetchMakesAFreshDirectoryEachTime(t *testing.T) {
	b := newFileBucket(t, testObjects)
	cache := t.TempDir()
	m1, err := Fetch(context.Background(), b, "nested/", cache, 0)
	if err != nil {
		t.Fatal(err)
	}
	m2, err := Fetch(context.Background(), b, "nested/", cache, 0)
	if err != nil {
		t.Fatal(err)
	}
	if m1.Dir == m2.Dir || m1.Checksum != m2.Checksum {
		t.Errorf("dirs %s and %s, checksums %s and %s", m1.Dir, m2.Dir, m1.Checksum, m2.Checksum)
	}
	if !strings.HasPrefix(filepath.Base(m1.Dir), "nested-") {
		t.Errorf("dir %s is not named after the model", m1.Dir)
	}
}

func TestFetchStopsWhenTheContextIsCanceled(t *testing.T) {
	b := newFileBucket(t, testObjects)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := Fetch(ctx, b, "nested/", t.TempDir(), 0); !errors.Is(err, context.Canceled) {
		t.Errorf("got %v, want context.Canceled", err)
	}
}

func TestFetchGCSSkipsDirectoryPlaceholders(t *testing.T) {
	b := newGCSBucket(t, map[string]string{"m/": "", "m/variables/": "", "m/saved_model.pb": "pb", "m/variables/v": "v"}, "")
	m, err := Fetch(context.Background(), b, "m/", t.TempDir(), 0)
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{"saved_model.pb", "variables/v"}; !reflect.DeepEqual(m.Files, want) {
		t.Errorf("Files = %q, want %q", m.Files, want)
	}
}

func TestFetchGCSRejectsNamesUnsafeForLocalFiles(t *testing.T) {
	b := newGCSBucket(t, map[string]string{"m/a": "a", "m/../escape": "x"}, "")
	_, err := Fetch(context.Background(), b, "m/", t.TempDir(), 0)
	if err == nil || !strings.Contains(err.Error(), "cannot be stored as a local file") {
		t.Errorf("got %v", err)
	}
}

func TestChecksumVectors(t *testing.T) {
	for _, tc := range []struct {
		files map[string][]byte
		want  string
	}{
		{map[string][]byte{"file1.txt": []byte("content1")}, sumFile1},
		{map[string][]byte{"c": []byte("content3"), "a": []byte("content1"), "b": []byte("content2")}, sumContent3},
		{map[string][]byte{"model1": []byte("bytes1")}, sumModel1},
	} {
		got, err := Checksum(tc.files)
		if err != nil || got != tc.want {
			t.Errorf("Checksum(%q) = %s, %v; want %s", tc.files, got, err, tc.want)
		}
	}
	if _, err := Checksum(nil); err == nil {
		t.Error("Checksum of no files succeeded")
	}
}

func TestChecksumPathMatchesTheShellPipeline(t *testing.T) {
	for _, tool := range []string{"bash", "find", "sha256sum", "sort", "awk", "tr"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skipf("%s not found", tool)
		}
	}
	dir := t.TempDir()
	// "a.txt" sorts before "a/b" by full path ('.' < '/') although a
	// directory walk visits "a/" first; "with space" checks field splitting.
	for name, content := range map[string]string{
		"a.txt": "1", "a/b": "2", "a/c/d": "3", "B": "4", "with space/e f": "5", "z-empty": "",
		"variables/variables.data-00000-of-00001": "6", "variables/variables.index": "7", "saved_model.pb": "8",
	} {
		mustWrite(t, filepath.Join(dir, filepath.FromSlash(name)), content)
	}
	mustSymlink(t, "a.txt", filepath.Join(dir, "link-not-followed"))

	shell := func(path string) string {
		t.Helper()
		cmd := exec.Command("bash", "-c", `find "$1" -type f -exec sha256sum {} \; | sort -k 2 | awk '{print $1}' | tr -d '\n' | sha256sum | awk '{print $1}'`, "bash", path)
		cmd.Env = append(os.Environ(), "LC_ALL=C")
		out, err := cmd.Output()
		if err != nil {
			t.Fatal(err)
		}
		return strings.TrimSpace(string(out))
	}
	for _, p := range []string{dir, filepath.Join(dir, "a"), filepath.Join(dir, "a.txt"), filepath.Join(dir, "with space")} {
		got, err := ChecksumPath(p)
		if err != nil {
			t.Fatal(err)
		}
		if want := shell(p); got != want {
			t.Errorf("ChecksumPath(%s) = %s, shell pipeline %s", p, got, want)
		}
	}

	// The checksum of a fetched model is the checksum of its files on disk.
	b, err := Open(context.Background(), "file://"+dir)
	if err != nil {
		t.Fatal(err)
	}
	defer b.(io.Closer).Close()
	m, err := Fetch(context.Background(), b, "a/", t.TempDir(), 0)
	if err != nil {
		t.Fatal(err)
	}
	if want, _ := ChecksumPath(m.Dir); m.Checksum != want {
		t.Errorf("Fetch checksum %s, ChecksumPath of the copy %s", m.Checksum, want)
	}
}

func TestChecksumPathOfEmptyDirectoryFails(t *testing.T) {
	if _, err := ChecksumPath(t.TempDir()); err == nil {
		t.Error("got a checksum for an empty directory")
	}
}

func TestCacheName(t *testing.T) {
	for in, want := range map[string]string{
		"pcvr_v1/": "pcvr_v1", "a/b/model.pt": "a_b_model.pt", ".hidden": "m.hidden", "sp ace/": "sp_ace",
		strings.Repeat("x", 70) + "/": strings.Repeat("x", 64),
	} {
		if got := cacheName(in); got != want {
			t.Errorf("cacheName(%q) = %q, want %q", in, got, want)
		}
	}
}
