package torch

import (
	"archive/zip"
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/groveml/grove/servables"
)

// loadChildEnv makes the test binary a child that loads the model file
// the variable names, prints the error, and exits.
const loadChildEnv = "GROVE_TORCH_TEST_LOAD"

// loadChild is the child process of loadIn.
func loadChild(file string) int {
	s, err := Runtime{}.Load(context.Background(), filepath.Dir(file), []string{filepath.Base(file)}, servables.LoadOptions{})
	if err == nil {
		s.Close()
	}
	fmt.Print(err)
	return 0
}

// loadIn loads file in a fresh process and returns the error it printed;
// a child that dies (a crash in libtorch) fails the test.
func loadIn(t *testing.T, file string) string {
	t.Helper()
	return inChild(t, loadChildEnv, file)
}

// withEntry writes a copy of the archive src with the entry whose name
// ends in suffix replaced by data.
func withEntry(t *testing.T, src, suffix string, data []byte) string {
	t.Helper()
	zr, err := zip.OpenReader(src)
	if err != nil {
		t.Fatal(err)
	}
	defer zr.Close()
	out := filepath.Join(t.TempDir(), filepath.Base(src))
	f, err := os.Create(out)
	if err != nil {
		t.Fatal(err)
	}
	zw := zip.NewWriter(f)
	for _, e := range zr.File {
		w, err := zw.CreateHeader(&zip.FileHeader{Name: e.Name, Method: zip.Store})
		if err != nil {
			t.Fatal(err)
		}
		if strings.HasSuffix(e.Name, suffix) {
			_, err = w.Write(data)
		} else {
			var rc io.ReadCloser
			if rc, err = e.Open(); err == nil {
				_, err = io.Copy(w, rc)
				rc.Close()
			}
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	return out
}

// A TorchScript file whose pickles take values their stack does not hold
// fails its load with an error naming the pickle: libtorch 1.13's
// unpickler pops its stack without looking, and such a file (a 5-byte
// constants.pkl) crashed the server with SIGSEGV or SIGABRT.
func TestAPickleThatUnderflowsItsStackFailsTheLoadWithoutACrash(t *testing.T) {
	for _, c := range []struct {
		name, entry, pickle string
	}{
		{"BUILD on an empty stack", "constants.pkl", "\x80\x02bT."},
		{"BUILD on one value", "constants.pkl", "\x80\x02K\x01b."},
		{"REDUCE on an empty stack", "constants.pkl", "\x80\x02R."},
		{"TUPLE1 on an empty stack", "constants.pkl", "\x80\x02\x85."},
		{"BINPERSID on an empty stack", "constants.pkl", "\x80\x02Q."},
		{"BUILD on an empty stack in data.pkl", "data.pkl", "\x80\x02b."},
	} {
		t.Run(c.name, func(t *testing.T) {
			got := loadIn(t, withEntry(t, testdata("add"), c.entry, []byte(c.pickle)))
			if !strings.Contains(got, c.entry+" is not a valid pickle") {
				t.Errorf("load: %q, want an error saying %s is not a valid pickle", got, c.entry)
			}
		})
	}
	// The archive with its own pickles still loads.
	if got := loadIn(t, withEntry(t, testdata("add"), "constants.pkl", []byte("\x80\x02)."))); got != "<nil>" {
		t.Errorf("add.pt with its own constants.pkl: %s", got)
	}
}

// A file saved with extra files (torch.jit.save's _extra_files, stored
// as extra/<name> in the archive) loads whatever those files hold, even
// under a name ending in "pkl": libtorch hands them back as bytes and
// never unpickles them.
func TestAnExtraFileNamedLikeAPickleDoesNotFailTheLoad(t *testing.T) {
	zr, err := zip.OpenReader(testdata("add"))
	if err != nil {
		t.Fatal(err)
	}
	defer zr.Close()
	out := filepath.Join(t.TempDir(), "add.pt")
	f, err := os.Create(out)
	if err != nil {
		t.Fatal(err)
	}
	zw := zip.NewWriter(f)
	for _, e := range zr.File {
		if err := zw.Copy(e); err != nil {
			t.Fatal(err)
		}
	}
	w, err := zw.CreateHeader(&zip.FileHeader{Name: "add/extra/labels.pkl", Method: zip.Store})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := w.Write([]byte("labels\ncat\ndog\n")); err != nil {
		t.Fatal(err)
	}
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	if got := loadIn(t, out); got != "<nil>" {
		t.Errorf("add.pt with extra/labels.pkl: %s", got)
	}
}

// Every pickle of the test models and the example bucket's TorchScript
// models passes the check.
func TestThePicklesTorchWritesPassTheCheck(t *testing.T) {
	files, _ := filepath.Glob(filepath.Join("testdata", "*.pt"))
	more, _ := filepath.Glob(filepath.Join(bucket, "*", "*.pt"))
	files = append(files, more...)
	for _, f := range files {
		if filepath.Base(f) == "corrupt.pt" {
			continue
		}
		if err := checkPickles(f); err != nil {
			t.Errorf("%s: %v", f, err)
		}
	}
	if len(files) < 10 {
		t.Errorf("checked %d files", len(files))
	}
}

// FuzzCheckPickle feeds arbitrary bytes to the pickle check: it answers
// (nil or an error) and never panics or reads past the data. The seed
// corpus is in testdata/fuzz/FuzzCheckPickle.
func FuzzCheckPickle(f *testing.F) {
	f.Fuzz(func(t *testing.T, data []byte) {
		_ = checkPickle(data)
	})
}
