package torch

import (
	"archive/zip"
	"bytes"
	"compress/flate"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"testing/iotest"

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

// rewriteArchive writes a copy of the archive src: each entry edit does
// not write itself (edit reports false) is copied as it is, then extra,
// if not nil, adds entries. Deflated entries are written at flate's best
// speed.
func rewriteArchive(t *testing.T, src string, edit func(zw *zip.Writer, e *zip.File) (bool, error), extra func(zw *zip.Writer) error) string {
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
	zw.RegisterCompressor(zip.Deflate, func(w io.Writer) (io.WriteCloser, error) { return flate.NewWriter(w, flate.BestSpeed) })
	for _, e := range zr.File {
		done, err := edit(zw, e)
		if err == nil && !done {
			err = zw.Copy(e)
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	if extra != nil {
		if err := extra(zw); err != nil {
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

// withEntry writes a copy of the archive src, every entry stored, with
// the entry whose name ends in suffix replaced by data.
func withEntry(t *testing.T, src, suffix string, data []byte) string {
	t.Helper()
	return rewriteArchive(t, src, func(zw *zip.Writer, e *zip.File) (bool, error) {
		w, err := zw.CreateHeader(&zip.FileHeader{Name: e.Name, Method: zip.Store})
		if err != nil {
			return true, err
		}
		if strings.HasSuffix(e.Name, suffix) {
			_, err = w.Write(data)
			return true, err
		}
		rc, err := e.Open()
		if err == nil {
			_, err = io.Copy(w, rc)
			rc.Close()
		}
		return true, err
	}, nil)
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
	out := rewriteArchive(t, testdata("add"), func(*zip.Writer, *zip.File) (bool, error) { return false, nil }, func(zw *zip.Writer) error {
		w, err := zw.CreateHeader(&zip.FileHeader{Name: "add/extra/labels.pkl", Method: zip.Store})
		if err == nil {
			_, err = w.Write([]byte("labels\ncat\ndog\n"))
		}
		return err
	})
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
		if err := checkPickles(f, 1<<30); err != nil {
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
		_ = checkPickle(bytes.NewReader(data))
	})
}

// withDeflatedEntry writes a copy of the archive src with the entry whose
// name ends in suffix replaced by the deflated bytes of w's output.
func withDeflatedEntry(t *testing.T, src, suffix string, write func(io.Writer) error) string {
	t.Helper()
	return rewriteArchive(t, src, func(zw *zip.Writer, e *zip.File) (bool, error) {
		if !strings.HasSuffix(e.Name, suffix) {
			return false, nil
		}
		w, err := zw.CreateHeader(&zip.FileHeader{Name: e.Name, Method: zip.Deflate})
		if err == nil {
			err = write(w)
		}
		return true, err
	}, nil)
}

// run writes n bytes b.
func run(w io.Writer, b byte, n int) error {
	chunk := bytes.Repeat([]byte{b}, 1<<20)
	for ; n > 0; n -= len(chunk) {
		if _, err := w.Write(chunk[:min(n, len(chunk))]); err != nil {
			return err
		}
	}
	return nil
}

// allocated returns the bytes f allocates on the Go heap.
func allocated(f func()) uint64 {
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	f()
	runtime.ReadMemStats(&after)
	return after.TotalAlloc - before.TotalAlloc
}

// A small TorchScript file whose data.pkl is a deflate bomb (256 MiB of
// one byte in about 1 MiB) fails its load with an error naming the file and
// the entry, before anything is inflated: the archive's entries, inflated,
// are held to max_model_bytes (here 64 MiB), as libtorch would allocate
// each entry's inflated size to read it.
func TestADeflateBombInATorchScriptFileFailsItsLoadWithoutBeingInflated(t *testing.T) {
	file := withDeflatedEntry(t, testdata("add"), "/data.pkl", func(w io.Writer) error { return run(w, 'N', 256<<20) })
	if fi, err := os.Stat(file); err != nil || fi.Size() > 2<<20 {
		t.Fatalf("the bomb: %v, %v", fi.Size(), err)
	}
	var err error
	n := allocated(func() {
		_, err = Runtime{}.Load(context.Background(), filepath.Dir(file), []string{filepath.Base(file)}, servables.LoadOptions{MaxModelBytes: 64 << 20})
	})
	want := fmt.Sprintf("torchscript: loading %s: add/data.pkl inflates to 256 MiB, which brings the archive's deflated entries past max_model_bytes (64 MiB) inflated", file)
	if err == nil || err.Error() != want {
		t.Errorf("Load: %v\nwant %s", err, want)
	}
	if n > 8<<20 {
		t.Errorf("Load allocated %d MiB for a file of 1 MiB", n>>20)
	}
}

// The entries' inflated sizes add up: two entries of 40 MiB each are more
// than a max_model_bytes of 64 MiB, and the error names the entry that
// passes it.
func TestTheEntriesOfATorchScriptFileInflatedAddUpToAtMostMaxModelBytes(t *testing.T) {
	file := withDeflatedEntry(t, testdata("add"), "/version", func(w io.Writer) error { return run(w, '1', 40<<20) })
	file = withDeflatedEntry(t, file, "/__torch__.py", func(w io.Writer) error { return run(w, ' ', 40<<20) })
	err := checkPickles(file, 64<<20)
	if want := "add/version inflates to 40 MiB, which brings the archive's deflated entries past max_model_bytes (64 MiB) inflated"; err == nil || err.Error() != want {
		t.Errorf("checkPickles: %v\nwant %s", err, want)
	}
	if err := checkPickles(file, 128<<20); err != nil {
		t.Errorf("checkPickles under a limit of 128 MiB: %v", err)
	}
}

// Stored entries (torch.jit.save stores the weights) take from the file
// itself what they declare, and the file was held to max_model_bytes as
// it was fetched: only the deflated entries' inflated sizes count against
// it, so a file within the limit whose stored and deflated entries
// together are larger is not refused.
func TestOnlyTheDeflatedEntriesOfATorchScriptFileCountInflated(t *testing.T) {
	file := withEntry(t, testdata("add"), "/version", bytes.Repeat([]byte{'1'}, 40<<20)) // every entry stored
	file = withDeflatedEntry(t, file, "/__torch__.py", func(w io.Writer) error { return run(w, ' ', 40<<20) })
	if err := checkPickles(file, 64<<20); err != nil {
		t.Errorf("checkPickles of 40 MiB stored and 40 MiB deflated under a limit of 64 MiB: %v", err)
	}
}

// A stored entry whose declared size is not what it takes in the file
// (libtorch would allocate what it declares) is refused as damaged.
func TestAStoredEntryDeclaringMoreThanItHoldsIsRefused(t *testing.T) {
	out := filepath.Join(t.TempDir(), "lying.pt")
	f, err := os.Create(out)
	if err != nil {
		t.Fatal(err)
	}
	zw := zip.NewWriter(f)
	w, err := zw.CreateRaw(&zip.FileHeader{Name: "lying/data/0", Method: zip.Store, CompressedSize64: 10, UncompressedSize64: 1 << 30})
	if err == nil {
		_, err = w.Write(make([]byte, 10))
	}
	if err == nil {
		err = zw.Close()
	}
	if err == nil {
		err = f.Close()
	}
	if err != nil {
		t.Fatal(err)
	}
	want := "lying/data/0 is damaged: stored, it declares 1073741824 bytes but takes 10 in the file"
	if err := checkPickles(out, 64<<20); err == nil || err.Error() != want {
		t.Errorf("checkPickles: %v\nwant %s", err, want)
	}
}

// sharedBytes writes a zip archive whose n stored entries,
// bomb/data/0 to bomb/data/<n-1>, all point at the same size bytes of the
// file: each is a valid stored entry, and libtorch would allocate and
// copy size bytes for each tensor whose storage it is.
func sharedBytes(t *testing.T, n, size int) string {
	t.Helper()
	data := bytes.Repeat([]byte{1}, size)
	crc := crc32.ChecksumIEEE(data)
	var b bytes.Buffer
	le := func(vs ...any) {
		for _, v := range vs {
			if err := binary.Write(&b, binary.LittleEndian, v); err != nil {
				t.Fatal(err)
			}
		}
	}
	first := "bomb/data/0"
	le(uint32(0x04034b50), uint16(20), uint16(0), uint16(zip.Store), uint16(0), uint16(0), crc, uint32(size), uint32(size), uint16(len(first)), uint16(0))
	b.WriteString(first)
	b.Write(data)
	dir := b.Len()
	for i := range n {
		name := fmt.Sprintf("bomb/data/%d", i)
		le(uint32(0x02014b50), uint16(20), uint16(20), uint16(0), uint16(zip.Store), uint16(0), uint16(0), crc, uint32(size), uint32(size),
			uint16(len(name)), uint16(0), uint16(0), uint16(0), uint16(0), uint32(0), uint32(0))
		b.WriteString(name)
	}
	le(uint32(0x06054b50), uint16(0), uint16(0), uint16(n), uint16(n), uint32(b.Len()-dir), uint32(dir), uint16(0))
	out := filepath.Join(t.TempDir(), "bomb.pt")
	if err := os.WriteFile(out, b.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	return out
}

// Stored entries can only take from the file what it holds: a file whose
// stored entries declare more bytes in all than it has (entries sharing
// their bytes, or one declaring more than the whole file) is refused as
// damaged before libtorch reads it, however far within max_model_bytes
// the file is. Sharing, 32 entries of 4 MiB in a 4 MiB file would have
// libtorch allocate and fill 128 MiB.
func TestATorchScriptFileWhoseStoredEntriesDeclareMoreThanItHoldsIsRefused(t *testing.T) {
	bomb := sharedBytes(t, 32, 4<<20)
	if _, err := zip.OpenReader(bomb); err != nil {
		t.Fatalf("the archive does not open: %v", err)
	}
	st, err := os.Stat(bomb)
	if err != nil {
		t.Fatal(err)
	}
	want := fmt.Sprintf("bomb/data/1 is damaged: the stored entries up to it declare more than the file's %d bytes", st.Size())
	if err := checkPickles(bomb, 1<<30); err == nil || err.Error() != want {
		t.Errorf("32 stored entries sharing 4 MiB: %v\nwant %s", err, want)
	}

	out := filepath.Join(t.TempDir(), "lying.pt")
	f, err := os.Create(out)
	if err != nil {
		t.Fatal(err)
	}
	zw := zip.NewWriter(f)
	w, err := zw.CreateRaw(&zip.FileHeader{Name: "lying/data/0", Method: zip.Store, CompressedSize64: 1 << 30, UncompressedSize64: 1 << 30})
	if err == nil {
		_, err = w.Write(make([]byte, 10))
	}
	if err == nil {
		err = zw.Close()
	}
	if err == nil {
		err = f.Close()
	}
	if err != nil {
		t.Fatal(err)
	}
	if st, err = os.Stat(out); err != nil {
		t.Fatal(err)
	}
	want = fmt.Sprintf("lying/data/0 is damaged: the stored entries up to it declare more than the file's %d bytes", st.Size())
	if err := checkPickles(out, 2<<30); err == nil || err.Error() != want {
		t.Errorf("a stored entry declaring 1 GiB in a file of %d bytes: %v\nwant %s", st.Size(), err, want)
	}
}

// A large valid pickle (16 MiB, deflated) is checked as it is inflated,
// without being held in memory.
func TestALargePickleIsCheckedWithoutHoldingItInMemory(t *testing.T) {
	file := withDeflatedEntry(t, testdata("add"), "/data.pkl", func(w io.Writer) error {
		if _, err := io.WriteString(w, "\x80\x02"); err != nil {
			return err
		}
		if err := run(w, 'N', 8<<20); err != nil {
			return err
		}
		if err := run(w, '0', 8<<20-1); err != nil {
			return err
		}
		_, err := io.WriteString(w, ".")
		return err
	})
	var err error
	n := allocated(func() { err = checkPickles(file, 1<<30) })
	if err != nil {
		t.Fatalf("checkPickles: %v", err)
	}
	if n > 4<<20 {
		t.Errorf("checkPickles allocated %d MiB for a pickle of 16 MiB", n>>20)
	}
}

// A pickle whose entry is damaged (its checksum does not match) fails the
// load as an entry that cannot be read, not as an invalid pickle.
func TestAPickleEntryThatFailsItsChecksumFailsTheLoadAsUnreadable(t *testing.T) {
	out := rewriteArchive(t, testdata("add"), func(zw *zip.Writer, e *zip.File) (bool, error) {
		if e.Name != "add/constants.pkl" {
			return false, nil
		}
		pickle := []byte("\x80\x02).")
		w, err := zw.CreateRaw(&zip.FileHeader{Name: e.Name, Method: zip.Store, CRC32: 1,
			CompressedSize64: uint64(len(pickle)), UncompressedSize64: uint64(len(pickle))})
		if err == nil {
			_, err = w.Write(pickle)
		}
		return true, err
	}, nil)
	if err := checkPickles(out, 0); err == nil || err.Error() != "reading add/constants.pkl: zip: checksum error" {
		t.Errorf("checkPickles: %v", err)
	}
}

// The check reads its pickle through any reader, a byte at a time too,
// and gives the same answers.
func TestThePickleCheckGivesTheSameAnswerWhateverTheReadSizes(t *testing.T) {
	for _, pickle := range []string{"\x80\x02).", "\x80\x02bT.", "\x80\x02X\x05\x00\x00\x00abc", "\x80\x02(Vab\ncx\ny\nt.", "\x80\x02Vabc", "\x80\x02N"} {
		want := fmt.Sprint(checkPickle(strings.NewReader(pickle)))
		if got := fmt.Sprint(checkPickle(iotest.OneByteReader(strings.NewReader(pickle)))); got != want {
			t.Errorf("%q a byte at a time: %s, at once: %s", pickle, got, want)
		}
	}
	boom := errors.New("boom")
	if err := checkPickle(io.MultiReader(strings.NewReader("\x80\x02X\x05\x00"), iotest.ErrReader(boom))); !errors.Is(err, boom) {
		t.Errorf("a read error: %v, want boom", err)
	}
}
