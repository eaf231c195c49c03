package onnx

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"testing"

	"github.com/groveml/grove/servables"
)

// loadWith loads file with r and the given checksum.
func loadWith(t testing.TB, r Runtime, file, sum string) servables.Servable {
	t.Helper()
	s, err := r.Load(context.Background(), filepath.Dir(file), []string{filepath.Base(file)}, servables.LoadOptions{Checksum: sum})
	if err != nil {
		t.Fatalf("Load(%s): %v", file, err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// A content loaded again by its checksum takes its inputs and outputs from
// the cache, and the model it makes is the one a fresh read makes.
func TestInfoCacheServesAContentLoadedBefore(t *testing.T) {
	r := Runtime{Info: NewInfoCache(8)}
	x := rows(t, "x", 2)
	fresh := load(t, pctrONNX, servables.LoadOptions{})
	want := fmt.Sprint(predict(t, fresh, x))
	for i := range 3 {
		m := loadWith(t, r, pctrONNX, "pctr")
		if !reflect.DeepEqual(m.Metadata(), fresh.Metadata()) {
			t.Errorf("load %d: metadata %+v, want %+v", i, m.Metadata(), fresh.Metadata())
		}
		if got := fmt.Sprint(predict(t, m, x)); got != want {
			t.Errorf("load %d: prediction %s, want %s", i, got, want)
		}
	}
	if hits, misses := r.Info.Stats(); hits != 2 || misses != 1 {
		t.Errorf("three loads of one content: %d hits, %d misses; want 2 and 1", hits, misses)
	}
	// Another content, under its own checksum, is read.
	other := testdata("mixed")
	loadWith(t, r, other, "add")
	if hits, misses := r.Info.Stats(); hits != 2 || misses != 2 {
		t.Errorf("after another content: %d hits, %d misses; want 2 and 2", hits, misses)
	}
}

// Without a checksum nothing is remembered; when full, the oldest content
// is forgotten first.
func TestInfoCacheForgetsTheOldestAndIgnoresUnknownContent(t *testing.T) {
	r := Runtime{Info: NewInfoCache(1)}
	loadWith(t, r, pctrONNX, "")
	loadWith(t, r, pctrONNX, "")
	if hits, misses := r.Info.Stats(); hits != 0 || misses != 0 {
		t.Errorf("loads without a checksum: %d hits, %d misses; want none", hits, misses)
	}
	for _, sum := range []string{"a", "b", "a"} {
		loadWith(t, r, pctrONNX, sum)
	}
	if hits, misses := r.Info.Stats(); hits != 0 || misses != 3 {
		t.Errorf("a, b, a in a cache of one: %d hits, %d misses; want 0 and 3", hits, misses)
	}
	loadWith(t, r, pctrONNX, "a")
	if hits, _ := r.Info.Stats(); hits != 1 {
		t.Errorf("a again: %d hits, want 1", hits)
	}
}

// A model file that ONNX Runtime cannot read fails the load whatever the
// cache holds for other contents, and is not remembered.
func TestInfoCacheDoesNotRememberAFailedRead(t *testing.T) {
	r := Runtime{Info: NewInfoCache(8)}
	bad := filepath.Join(t.TempDir(), "model.onnx")
	if err := os.WriteFile(bad, []byte("not a model"), 0o644); err != nil {
		t.Fatal(err)
	}
	for range 2 {
		if _, err := r.Load(context.Background(), filepath.Dir(bad), []string{"model.onnx"}, servables.LoadOptions{Checksum: "bad"}); err == nil {
			t.Fatal("a file that is not a model loaded")
		}
	}
	if hits, misses := r.Info.Stats(); hits != 0 || misses != 2 {
		t.Errorf("two failed loads: %d hits, %d misses; want 0 and 2", hits, misses)
	}
}

// BenchmarkLoadPCTR is one load and close of the pCTR model, reading its
// inputs and outputs from a session of their own (read) or from the
// InfoCache (cached), as an on-demand model loaded again does.
func BenchmarkLoadPCTR(b *testing.B) {
	for _, c := range []struct {
		name string
		r    Runtime
		sum  string
	}{{"info=read", Runtime{}, ""}, {"info=cached", Runtime{Info: NewInfoCache(1)}, "pctr"}} {
		b.Run(c.name, func(b *testing.B) {
			for range b.N {
				s, err := c.r.Load(context.Background(), filepath.Dir(pctrONNX), []string{"model.onnx"}, servables.LoadOptions{Checksum: c.sum})
				if err != nil {
					b.Fatal(err)
				}
				if err := s.Close(); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
