package bucket

import (
	"context"
	"errors"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// model is a bucket holding one directory model, nested/.
func model() *Memory {
	return NewMemory("mem", map[string][]byte{"nested/saved_model.pb": []byte("pb"), "nested/variables/x.idx": []byte("index")})
}

func TestFetchMakesAFreshDirectoryEachTime(t *testing.T) {
	cache := t.TempDir()
	m1, err := Fetch(t.Context(), model(), "nested/", cache, 0)
	if err != nil {
		t.Fatal(err)
	}
	m2, err := Fetch(t.Context(), model(), "nested/", cache, 0)
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
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	if _, err := Fetch(ctx, model(), "nested/", t.TempDir(), 0); !errors.Is(err, context.Canceled) {
		t.Errorf("got %v, want context.Canceled", err)
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

func TestFetchChecksIncludedChecksumFile(t *testing.T) {
	files := map[string][]byte{"v/3/model.onnx": []byte("weights"), "v/3/sub/CHECKSUM": []byte("a file of the model")}
	plain, err := Fetch(t.Context(), NewMemory("mem", files), "v/3/", t.TempDir(), 0, WithChecksumFile())
	if err != nil {
		t.Fatal(err)
	}
	with := func(content string) map[string][]byte {
		out := map[string][]byte{"v/3/CHECKSUM": []byte(content)}
		for k, v := range files {
			out[k] = v
		}
		return out
	}
	for _, tc := range []struct {
		name, content, err string
	}{
		{"matching", plain.Checksum, ""},
		{"matching, with whitespace", "  " + plain.Checksum + "\n\n", ""},
		{"mismatch", strings.Repeat("0", 64) + "\n", `model v/3/ rejected: its files' checksum is ` + plain.Checksum + `, but v/3/CHECKSUM holds ` + strings.Repeat("0", 64)},
		{"uppercase", strings.ToUpper(plain.Checksum), `v/3/CHECKSUM does not hold a checksum (64 lowercase hex characters)`},
		{"short", "abc", `v/3/CHECKSUM does not hold a checksum (64 lowercase hex characters): "abc"`},
		{"empty", "", `v/3/CHECKSUM does not hold a checksum`},
		{"sha256sum's format", plain.Checksum + "  model.onnx\n", `v/3/CHECKSUM does not hold a checksum`},
		{"huge", strings.Repeat(" ", 5000) + plain.Checksum, `v/3/CHECKSUM does not hold a checksum`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cache := t.TempDir()
			m, err := Fetch(t.Context(), NewMemory("mem", with(tc.content)), "v/3/", cache, 0, WithChecksumFile())
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("got %v, want an error containing %q", err, tc.err)
				}
				if entries, _ := os.ReadDir(cache); len(entries) != 0 {
					t.Errorf("the rejected copy was left in the cache: %v", entries)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			// The root CHECKSUM is not part of the model; one deeper is.
			if want := []string{"model.onnx", "sub/CHECKSUM"}; !slices.Equal(m.Files, want) || m.Checksum != plain.Checksum {
				t.Errorf("Files %q, checksum %s; want %q, %s", m.Files, m.Checksum, want, plain.Checksum)
			}
			if _, err := os.Stat(filepath.Join(m.Dir, ChecksumFile)); !errors.Is(err, os.ErrNotExist) {
				t.Errorf("CHECKSUM copied into the cache: %v", err)
			}
		})
	}
}

func TestFetchWithoutChecksumFileOptionKeepsAChecksumFileAsAModelFile(t *testing.T) {
	// B&A semantics: a directory model's files are all of its objects.
	files := map[string][]byte{"m/model.onnx": []byte("weights"), "m/CHECKSUM": []byte("not a checksum at all")}
	m, err := Fetch(t.Context(), NewMemory("mem", files), "m/", t.TempDir(), 0)
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{"CHECKSUM", "model.onnx"}; !slices.Equal(m.Files, want) {
		t.Errorf("Files %q, want %q", m.Files, want)
	}
	want, err := Checksum(files)
	if err != nil {
		t.Fatal(err)
	}
	if m.Checksum != want {
		t.Errorf("checksum %s, want the checksum of every file, %s", m.Checksum, want)
	}
}

// FuzzParseChecksumFile: a CHECKSUM file's content is accepted only as 64
// lowercase hex characters (whitespace around them ignored), and a refusal
// names the file and shows a bounded part of what it holds.
func FuzzParseChecksumFile(f *testing.F) {
	for _, s := range []string{"", strings.Repeat("a", 64), " " + strings.Repeat("0", 64) + "\n", strings.Repeat("A", 64),
		strings.Repeat("f", 63), strings.Repeat("x", 5000), "\xff\xfe"} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		sum, err := parseChecksumFile("v/3/CHECKSUM", data)
		if err != nil {
			if !strings.HasPrefix(err.Error(), "v/3/CHECKSUM does not hold a checksum") || len(err.Error()) > 500 { // 80 bytes shown, each at most 4 characters quoted
				t.Fatalf("refusal %q", err)
			}
			return
		}
		if len(sum) != 64 || strings.Trim(sum, "0123456789abcdef") != "" || sum != strings.TrimSpace(string(data)) {
			t.Fatalf("accepted %q as %q", data, sum)
		}
	})
}

func TestFetchedModelsPrefixPlusAFileIsTheObjectName(t *testing.T) {
	b := NewMemory("mem", map[string][]byte{"ads/pctr/1/model.onnx": []byte("x"), "ads/pctr.pt": []byte("y"), "root.pt": []byte("z")})
	for _, c := range []struct{ path, want string }{{"ads/pctr/1/", "ads/pctr/1/model.onnx"}, {"ads/pctr.pt", "ads/pctr.pt"}, {"root.pt", "root.pt"}} {
		m, err := Fetch(t.Context(), b, c.path, t.TempDir(), 0)
		if err != nil {
			t.Fatal(err)
		}
		if m.Path != c.path || len(m.Files) != 1 || m.Prefix()+m.Files[0] != c.want {
			t.Errorf("%s: Path %q, Prefix %q, Files %v; want the object %s", c.path, m.Path, m.Prefix(), m.Files, c.want)
		}
	}
}

func TestLocalDirIsEmptyForABucketWithoutFiles(t *testing.T) {
	if d := LocalDir(model()); d != "" {
		t.Errorf("LocalDir of a memory bucket = %q", d)
	}
}

// panicsOpening is a bucket whose client panics (a bug in it) as it
// opens the object named name.
type panicsOpening struct {
	Bucket
	name string
}

func (b panicsOpening) Open(ctx context.Context, name string) (io.ReadCloser, error) {
	if name == b.name {
		panic("test: the bucket client crashes")
	}
	return b.Bucket.Open(ctx, name)
}

// A bucket client that panics partway through a fetch leaves nothing of
// it in the cache directory; the panic goes on to Fetch's caller.
func TestFetchLeavesNoDirectoryWhenTheBucketPanics(t *testing.T) {
	cache := t.TempDir()
	func() {
		defer func() {
			if v := recover(); v == nil {
				t.Fatal("Fetch returned; want the bucket's panic")
			}
		}()
		_, _ = Fetch(t.Context(), panicsOpening{Bucket: model(), name: "nested/variables/x.idx"}, "nested/", cache, 0)
	}()
	if left, err := os.ReadDir(cache); err != nil || len(left) != 0 {
		t.Fatalf("cache directory after the panic: %v (%v), want empty", left, err)
	}
}
