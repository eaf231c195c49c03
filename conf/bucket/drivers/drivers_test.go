package drivers

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"testing"
)

// TestBuiltinHasOneDriverPerScheme: the build's drivers serve file://,
// gs:// and s3://, each scheme once.
func TestBuiltinHasOneDriverPerScheme(t *testing.T) {
	var schemes []string
	for _, d := range Builtin("") {
		schemes = append(schemes, d.Scheme)
	}
	slices.Sort(schemes)
	if want := []string{"file", "gs", "s3"}; !slices.Equal(schemes, want) {
		t.Errorf("schemes %v, want %v", schemes, want)
	}
}

// TestBuiltinOpensAFileBucket: a file:// URL opens through the list.
func TestBuiltinOpensAFileBucket(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "x"), []byte("y"), 0o644); err != nil {
		t.Fatal(err)
	}
	b, err := Builtin("").Open(context.Background(), "file://"+dir)
	if err != nil {
		t.Fatalf("opening file://%s: %v", dir, err)
	}
	data, _, err := b.ReadObject(context.Background(), "x", 1<<20)
	if err != nil || string(data) != "y" {
		t.Errorf("ReadObject(x) = %q, %v; want y", data, err)
	}
}
