package bucket

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestVerifyTellsKeptFilesFromChangedOnes: Verify passes files that still
// have the checksum they were fetched with, and names the model when one
// changed, went missing, or ctx ended.
func TestVerifyTellsKeptFilesFromChangedOnes(t *testing.T) {
	dir := t.TempDir()
	files := map[string][]byte{"m/model.onnx": []byte("weights"), "m/vocab/words.txt": []byte("a b c")}
	sum, err := Checksum(files)
	if err != nil {
		t.Fatal(err)
	}
	m := &LocalModel{Dir: dir, Files: []string{"model.onnx", "vocab/words.txt"}, Checksum: sum, Path: "m/"}
	for name, data := range files {
		p := filepath.Join(dir, filepath.FromSlash(strings.TrimPrefix(name, "m/")))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if err := m.Verify(context.Background()); err != nil {
		t.Fatalf("unchanged files: %v", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := m.Verify(ctx); err == nil || !strings.Contains(err.Error(), "model m/") {
		t.Errorf("with ctx done: %v, want an error naming the model", err)
	}
	if err := os.WriteFile(filepath.Join(dir, "vocab", "words.txt"), []byte("a b d"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := m.Verify(context.Background()); err == nil || !strings.Contains(err.Error(), "the files of model m/ in "+dir+" changed on disk") {
		t.Errorf("a changed file: %v", err)
	}
	if err := os.Remove(filepath.Join(dir, "model.onnx")); err != nil {
		t.Fatal(err)
	}
	if err := m.Verify(context.Background()); err == nil || !strings.Contains(err.Error(), "verifying the files of model m/") {
		t.Errorf("a missing file: %v", err)
	}
}
