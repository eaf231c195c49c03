package servables

import (
	"archive/zip"
	"bytes"
	"context"
	"errors"
	"io/fs"
	"os"
	"slices"
	"strings"
	"testing"
	"testing/fstest"
)

// readFile reads a test file of the repository, relative to this package.
func readFile(t testing.TB, name string) []byte {
	t.Helper()
	b, err := os.ReadFile(name)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// zipOf builds a zip archive holding names (empty files).
func zipOf(t testing.TB, names ...string) []byte {
	t.Helper()
	var buf bytes.Buffer
	w := zip.NewWriter(&buf)
	for _, n := range names {
		if _, err := w.Create(n); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

func TestSniffRecognisesModelsByContent(t *testing.T) {
	onnx := readFile(t, "onnx/testdata/mixed.onnx")
	for _, c := range []struct {
		name string
		data []byte
		want Format
	}{
		{"a TorchScript archive (torch.jit.save)", readFile(t, "torch/testdata/add.pt"), TorchScript},
		{"a larger TorchScript model", readFile(t, "../examples/bucket/pcvr/model.pt"), TorchScript},
		{"an ONNX model", onnx, ONNX},
		{"an ONNX model with weights", readFile(t, "../examples/bucket/pctr_onnx/model.onnx"), ONNX},
		{"an ONNX scalar model", readFile(t, "onnx/testdata/scalar.onnx"), ONNX},
		{"a torch.save checkpoint (no code/, no constants.pkl)", readFile(t, "testdata/checkpoint.pt"), UnknownFormat},
		{"corrupt bytes", readFile(t, "torch/testdata/corrupt.pt"), UnknownFormat},
		{"a truncated TorchScript archive", readFile(t, "torch/testdata/add.pt")[:700], UnknownFormat},
		{"a truncated ONNX model", onnx[:len(onnx)-1], UnknownFormat},
		{"an ONNX model with a byte after it", append(slices.Clone(onnx), 0), UnknownFormat},
		{"an empty file", nil, UnknownFormat},
		{"text", []byte("{\"model_metadata\": []}\n"), UnknownFormat},
		{"a TorchScript layout", zipOf(t, "m/data.pkl", "m/constants.pkl", "m/code/__torch__.py", "m/version"), TorchScript},
		{"a zip with two top folders", zipOf(t, "m/data.pkl", "m/constants.pkl", "m/code/x.py", "n/version"), UnknownFormat},
		{"a zip with files at its root", zipOf(t, "data.pkl", "constants.pkl", "code/x.py"), UnknownFormat},
		{"a zip without code/", zipOf(t, "m/data.pkl", "m/constants.pkl"), UnknownFormat},
		{"an ir_version alone", []byte{0x08, 0x07}, UnknownFormat},
		{"a graph alone", []byte{0x3a, 0x01, 0x00}, UnknownFormat},
		{"an ir_version and a graph", []byte{0x08, 0x07, 0x3a, 0x01, 0x00}, ONNX},
		{"an ir_version of 0", []byte{0x08, 0x00, 0x3a, 0x01, 0x00}, UnknownFormat},
		{"a graph sent as a varint", []byte{0x08, 0x07, 0x38, 0x01}, UnknownFormat},
		{"a group", []byte{0x08, 0x07, 0x3a, 0x01, 0x00, 0x0b}, UnknownFormat},
		{"a length past the end", []byte{0x08, 0x07, 0x3a, 0x05, 0x00}, UnknownFormat},
	} {
		if got := Sniff(bytes.NewReader(c.data), int64(len(c.data))); got != c.want {
			t.Errorf("%s: %v, want %v", c.name, got, c.want)
		}
	}
}

func TestModelFilesPrefersExtensionsThenContent(t *testing.T) {
	ts := readFile(t, "torch/testdata/add.pt")
	onnx := readFile(t, "onnx/testdata/mixed.onnx")
	fsys := fstest.MapFS{
		"simple_model":          {Data: ts},
		"dir/model.pt":          {Data: []byte("not even a zip")},
		"dir/README":            {Data: []byte("hello")},
		"dir/weights":           {Data: ts},
		"net":                   {Data: onnx},
		"two/a":                 {Data: ts},
		"two/b":                 {Data: ts},
		"subdir/nested/pcvr_v1": {Data: ts},
	}
	for _, c := range []struct {
		files []string
		f     Format
		exts  []string
		want  []string
	}{
		{[]string{"simple_model"}, TorchScript, []string{".pt"}, []string{"simple_model"}},
		{[]string{"simple_model"}, ONNX, []string{".onnx"}, nil},
		{[]string{"net"}, ONNX, []string{".onnx"}, []string{"net"}},
		{[]string{"net"}, TorchScript, []string{".pt"}, nil},
		// A named model file wins: its content is not checked, nor are the others sniffed.
		{[]string{"dir/README", "dir/model.pt", "dir/weights"}, TorchScript, []string{".pt"}, []string{"dir/model.pt"}},
		{[]string{"two/a", "two/b"}, TorchScript, []string{".pt"}, []string{"two/a", "two/b"}},
		{[]string{"subdir/nested/pcvr_v1"}, TorchScript, []string{".pt"}, []string{"subdir/nested/pcvr_v1"}},
		{[]string{"missing"}, TorchScript, []string{".pt"}, nil},
	} {
		if got := ModelFiles(fsys, c.files, c.f, c.exts...); !slices.Equal(got, c.want) {
			t.Errorf("ModelFiles(%q, %v) = %q, want %q", c.files, c.f, got, c.want)
		}
	}
}

type namedRuntime struct {
	name string
	f    Format
}

func (r namedRuntime) Name() string { return r.name }
func (r namedRuntime) Accepts(fsys fs.FS, files []string) bool {
	return len(ModelFiles(fsys, files, r.f, "."+r.name)) == 1
}
func (namedRuntime) Load(context.Context, string, []string, LoadOptions) (Servable, error) {
	return nil, errors.New("not loaded")
}

func TestFindPicksTheRuntimeByContentAndSaysWhyNoneFits(t *testing.T) {
	reg := Registry{namedRuntime{"pt", TorchScript}, namedRuntime{"onnx", ONNX}}
	fsys := fstest.MapFS{
		"simple_model":                 {Data: readFile(t, "torch/testdata/add.pt")},
		"net":                          {Data: readFile(t, "onnx/testdata/mixed.onnx")},
		"notes":                        {Data: []byte("hello")},
		"sm/saved_model.pb":            {Data: []byte{0x08, 0x01}},
		"sm/variables/variables.index": {Data: []byte{}},
	}
	for files, want := range map[string]string{"simple_model": "pt", "net": "onnx"} {
		if rt, err := reg.Find(fsys, []string{files}); err != nil || rt.Name() != want {
			t.Errorf("Find(%s) = %v, %v; want %s", files, rt, err, want)
		}
	}
	_, err := reg.Find(fsys, []string{"notes"})
	if want := "unsupported runtime: no runtime accepts files notes, by extension or by content (runtimes in this build: pt, onnx)"; err == nil || err.Error() != want {
		t.Errorf("Find(notes) = %v, want %q", err, want)
	}
	_, err = reg.Find(fsys, []string{"sm/saved_model.pb", "sm/variables/variables.index"})
	if !errors.Is(err, ErrUnsupportedRuntime) || !strings.Contains(err.Error(), "TensorFlow runtime not available in this build") {
		t.Errorf("Find(SavedModel) = %v, want TensorFlow named", err)
	}
}

// FuzzSniff feeds arbitrary bytes to Sniff: it answers a Format without
// panicking, reading past the end or allocating out of proportion, and
// what it calls ONNX walks as protobuf fields to the exact end. The seed
// corpus (testdata/fuzz/FuzzSniff) holds small real models of both
// formats, a torch.save checkpoint, truncated models and near misses.
func FuzzSniff(f *testing.F) {
	f.Fuzz(func(t *testing.T, b []byte) {
		got := Sniff(bytes.NewReader(b), int64(len(b)))
		if got > ONNX {
			t.Fatalf("format %d", got)
		}
		if got == TorchScript && !bytes.HasPrefix(b, []byte(zipMagic)) {
			t.Fatal("TorchScript without a zip header")
		}
		if got == ONNX && len(b) < 4 {
			t.Fatalf("ONNX from %d bytes", len(b))
		}
		if got2 := SniffFile(fstest.MapFS{"f": {Data: b}}, "f"); got2 != got {
			t.Fatalf("SniffFile %v, Sniff %v", got2, got)
		}
	})
}
