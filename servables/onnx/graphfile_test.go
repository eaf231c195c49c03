package onnx

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"reflect"
	"runtime"
	"strings"
	"testing"
	"testing/iotest"

	"google.golang.org/protobuf/encoding/protowire"
)

// message appends field num, a length-delimited value, to b.
func message(b []byte, num protowire.Number, v []byte) []byte {
	return protowire.AppendBytes(protowire.AppendTag(b, num, protowire.BytesType), v)
}

// tensorInfo is a ValueInfoProto of a FLOAT16 tensor [batch, 4].
func tensorInfo(name string) []byte {
	var dims []byte
	dims = message(dims, 1, message(nil, 2, []byte("batch")))
	dims = message(dims, 1, protowire.AppendVarint(protowire.AppendTag(nil, 1, protowire.VarintType), 4))
	tensor := protowire.AppendVarint(protowire.AppendTag(nil, 1, protowire.VarintType), 10)
	tensor = message(tensor, 2, dims)
	return message(message(nil, 1, []byte(name)), 2, message(nil, 1, tensor))
}

// withInitializer writes a model whose graph has an input x, an
// initializer of size bytes of raw data between it and the output y.
func withInitializer(t *testing.T, size int) string {
	t.Helper()
	file := filepath.Join(t.TempDir(), "big.onnx")
	f, err := os.Create(file)
	if err != nil {
		t.Fatal(err)
	}
	// TensorProto: data_type FLOAT (2), raw_data (9).
	tensorHead := protowire.AppendVarint(protowire.AppendTag(nil, 2, protowire.VarintType), 1)
	tensorHead = protowire.AppendVarint(protowire.AppendTag(tensorHead, 9, protowire.BytesType), uint64(size))
	tensorLen := len(tensorHead) + size
	in, out := message(nil, 11, tensorInfo("x")), message(nil, 12, tensorInfo("y"))
	initHead := protowire.AppendVarint(protowire.AppendTag(nil, 5, protowire.BytesType), uint64(tensorLen))
	graphLen := len(in) + len(initHead) + tensorLen + len(out)
	head := protowire.AppendVarint(protowire.AppendTag(nil, 1, protowire.VarintType), 8) // ir_version
	head = protowire.AppendVarint(protowire.AppendTag(head, 7, protowire.BytesType), uint64(graphLen))
	head = append(append(append(head, in...), initHead...), tensorHead...)
	if _, err := f.Write(head); err != nil {
		t.Fatal(err)
	}
	if err := f.Truncate(int64(len(head) + size)); err != nil { // the raw data, zeros
		t.Fatal(err)
	}
	if _, err := f.WriteAt(out, int64(len(head)+size)); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	return file
}

// dimsOf reads graphDims from data, seeking over what it skips.
func dimsOf(data []byte) (inputs, outputs map[string][]dim, err error) {
	return graphDims(bytes.NewReader(data), int64(len(data)))
}

// allocated returns the bytes f allocates on the Go heap.
func allocated(f func()) uint64 {
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	f()
	runtime.ReadMemStats(&after)
	return after.TotalAlloc - before.TotalAlloc
}

// The declared shapes of a model with a large initializer (64 MiB) are
// read without reading the initializer into memory, from the file (which
// seeks over it) and from a stream (which reads it through its buffer).
func TestTheDeclaredShapesOfAModelAreReadWithoutItsInitializers(t *testing.T) {
	file := withInitializer(t, 64<<20)
	batch4 := []dim{{param: "batch"}, {value: 4}}
	want := map[string][]dim{"x": batch4}
	var ins, outs map[string][]dim
	var err error
	if n := allocated(func() { ins, outs, err = graphDimsOf(file) }); n > 256<<10 {
		t.Errorf("reading the shapes of the file allocated %d KiB for a model of 64 MiB", n>>10)
	}
	if err != nil || !reflect.DeepEqual(ins, want) || !reflect.DeepEqual(outs, map[string][]dim{"y": batch4}) {
		t.Errorf("from the file: inputs %v, outputs %v, %v", ins, outs, err)
	}
	f, err := os.Open(file)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if n := allocated(func() { ins, outs, err = graphDims(struct{ io.Reader }{f}, -1) }); n > 256<<10 {
		t.Errorf("reading the shapes of the stream allocated %d KiB for a model of 64 MiB", n>>10)
	}
	if err != nil || !reflect.DeepEqual(ins, want) || !reflect.DeepEqual(outs, map[string][]dim{"y": batch4}) {
		t.Errorf("from a stream: inputs %v, outputs %v, %v", ins, outs, err)
	}
}

// onnxFiles are the committed ONNX models.
func onnxFiles(t *testing.T) []string {
	t.Helper()
	var files []string
	for _, glob := range []string{"testdata/*.onnx", "../../examples/bucket/*/*.onnx", "../../processor/testdata/*/*/*/*.onnx"} {
		more, err := filepath.Glob(glob)
		if err != nil {
			t.Fatal(err)
		}
		files = append(files, more...)
	}
	if len(files) < 12 {
		t.Fatalf("%d ONNX models: %v", len(files), files)
	}
	return files
}

// Every committed ONNX model's declared shapes read from its file are
// those the whole file read into memory gives.
func TestTheDeclaredShapesReadFromTheFileAreThoseOfTheWholeModel(t *testing.T) {
	for _, file := range onnxFiles(t) {
		data, err := os.ReadFile(file)
		if err != nil {
			t.Fatal(err)
		}
		wantIns, wantOuts, err := graphDimsInMemory(data)
		if err != nil {
			t.Fatalf("%s: %v", file, err)
		}
		ins, outs, err := graphDimsOf(file)
		if err != nil || !reflect.DeepEqual(ins, wantIns) || !reflect.DeepEqual(outs, wantOuts) {
			t.Errorf("%s: inputs %v, outputs %v, %v; want %v, %v", file, ins, outs, err, wantIns, wantOuts)
		}
		if len(ins)+len(outs) == 0 {
			t.Errorf("%s: no inputs or outputs", file)
		}
	}
}

// A truncated model file and a file that is no model are errors wrapping
// errProto that say where the model breaks.
func TestATruncatedOrGarbageModelFileIsAClearError(t *testing.T) {
	data, err := os.ReadFile(testdata("half"))
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	for _, c := range []struct {
		name string
		data []byte
		want string
	}{
		{"truncated", data[:len(data)-3], fmt.Sprintf("not a valid ONNX model (protobuf): at byte %d: field 8 of 4 bytes runs past the end", len(data)-4)}, // opset_import

		{"text", []byte("hello, world\n"), "not a valid ONNX model (protobuf): at byte 3: field 13 has wire type 4"}, // "he" is a varint field, "l" an end of group
		{"empty tag", []byte{0x00}, "not a valid ONNX model (protobuf): at byte 1: a field number of 0"},
		{"a varint that ends with the file", []byte{0x08, 0x80}, "not a valid ONNX model (protobuf): at byte 2: a varint runs past the end"},
	} {
		file := filepath.Join(dir, c.name+".onnx")
		if err := os.WriteFile(file, c.data, 0o644); err != nil {
			t.Fatal(err)
		}
		_, _, err := graphDimsOf(file)
		if !errors.Is(err, errProto) || err.Error() != c.want {
			t.Errorf("%s: %v, want %s", c.name, err, c.want)
		}
		if _, _, err := graphDims(bytes.NewBuffer(c.data), -1); !errors.Is(err, errProto) {
			t.Errorf("%s from a stream: %v", c.name, err)
		}
	}
}

// FuzzGraphDimsStreamed reads arbitrary bytes as an ONNX model's graph,
// seeking over what it skips and reading a byte at a time: both read the
// dimensions the model read whole into memory gives (graphDimsInMemory),
// or fail where it fails, with an error wrapping errProto. The seed corpus
// is in testdata/fuzz/FuzzGraphDimsStreamed.
func FuzzGraphDimsStreamed(f *testing.F) {
	f.Fuzz(func(t *testing.T, data []byte) {
		wantIns, wantOuts, wantErr := graphDimsInMemory(data)
		for how, read := range map[string]func() (map[string][]dim, map[string][]dim, error){
			"seeking": func() (map[string][]dim, map[string][]dim, error) { return dimsOf(data) },
			"reading": func() (map[string][]dim, map[string][]dim, error) {
				return graphDims(iotest.OneByteReader(bytes.NewReader(data)), -1)
			},
		} {
			ins, outs, err := read()
			if (err == nil) != (wantErr == nil) {
				t.Fatalf("%s: %v, read whole: %v", how, err, wantErr)
			}
			if err != nil {
				if !errors.Is(err, errProto) || !strings.HasPrefix(err.Error(), "not a valid ONNX model (protobuf): at byte ") {
					t.Fatalf("%s: %v", how, err)
				}
				continue
			}
			if !reflect.DeepEqual(ins, wantIns) || !reflect.DeepEqual(outs, wantOuts) {
				t.Fatalf("%s: %v %v, read whole: %v %v", how, ins, outs, wantIns, wantOuts)
			}
		}
	})
}
