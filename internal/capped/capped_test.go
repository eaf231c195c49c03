package capped

import (
	"bytes"
	"errors"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"testing"
)

func TestReadAllReadsContentOfExactlyTheLimit(t *testing.T) {
	data, err := ReadAll(bytes.NewReader(bytes.Repeat([]byte("x"), 10)), 10, "thing")
	if err != nil || len(data) != 10 {
		t.Fatalf("ReadAll at the limit: %d bytes, %v", len(data), err)
	}
}

func TestReadAllRefusesOneByteOverTheLimit(t *testing.T) {
	_, err := ReadAll(bytes.NewReader(bytes.Repeat([]byte("x"), 11)), 10, `model config "m/config.json"`)
	var tl *TooLargeError
	if !errors.As(err, &tl) || tl.Limit != 10 {
		t.Fatalf("got %v, want a *TooLargeError of limit 10", err)
	}
	if want := `model config "m/config.json" is larger than its limit of 10 bytes`; err.Error() != want {
		t.Errorf("message %q, want %q", err, want)
	}
}

// endless is a reader that never ends.
type endless struct{ read int64 }

func (e *endless) Read(p []byte) (int, error) {
	e.read += int64(len(p))
	return len(p), nil
}

func TestReadAllStopsReadingAnEndlessReaderAfterTheLimit(t *testing.T) {
	r := &endless{}
	if _, err := ReadAll(r, 4<<20, "stream"); err == nil || err.Error() != "stream is larger than its limit of 4 MiB" {
		t.Fatalf("got %v", err)
	}
	if r.read > 4<<20+64<<10 {
		t.Errorf("read %d bytes of an endless reader with a limit of 4 MiB", r.read)
	}
}

func TestReadAllPassesReadErrorsOn(t *testing.T) {
	boom := errors.New("boom")
	if _, err := ReadAll(io.MultiReader(bytes.NewReader([]byte("ab")), iotestErr{boom}), 10, "x"); !errors.Is(err, boom) {
		t.Fatalf("got %v, want boom", err)
	}
}

type iotestErr struct{ err error }

func (e iotestErr) Read([]byte) (int, error) { return 0, e.err }

func TestReadFileHoldsFilesToTheLimit(t *testing.T) {
	dir := t.TempDir()
	at, over := filepath.Join(dir, "at"), filepath.Join(dir, "over")
	if err := os.WriteFile(at, bytes.Repeat([]byte("x"), 1024), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(over, bytes.Repeat([]byte("x"), 1025), 0o644); err != nil {
		t.Fatal(err)
	}
	if data, err := ReadFile(at, 1024, "config file "+at); err != nil || len(data) != 1024 {
		t.Fatalf("a file of the limit: %d bytes, %v", len(data), err)
	}
	_, err := ReadFile(over, 1024, "config file "+over)
	if want := "config file " + over + " is larger than its limit of 1 KiB"; err == nil || err.Error() != want {
		t.Fatalf("a file one byte over: got %v, want %q", err, want)
	}
	if _, err := ReadFile(filepath.Join(dir, "absent"), 1024, "x"); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("a missing file: got %v", err)
	}
}

func TestSizeNamesWholeUnits(t *testing.T) {
	for n, want := range map[int64]string{
		1: "1 byte", 1000: "1000 bytes", 1 << 10: "1 KiB", 4 << 10: "4 KiB", 1<<20 + 1<<10: "1025 KiB",
		64 << 20: "64 MiB", 2 << 30: "2 GiB", 1<<20 + 1: "1048577 bytes",
	} {
		if got := Size(n); got != want {
			t.Errorf("Size(%d) = %q, want %q", n, got, want)
		}
	}
}
