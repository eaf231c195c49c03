package bucket

import (
	"context"
	"errors"
	"path/filepath"
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
