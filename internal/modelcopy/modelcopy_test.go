package modelcopy

import (
	"archive/zip"
	"bytes"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"google.golang.org/protobuf/encoding/protowire"
)

func example(t *testing.T, file string) []byte {
	t.Helper()
	data, err := os.ReadFile(filepath.Join("..", "..", "examples", "bucket", file))
	if err != nil {
		t.Fatal(err)
	}
	return data
}

// TestATorchScriptCopyKeepsEveryRecordAndAddsItsNumber: the copy is an
// archive with the original's records, byte for byte, and one more extra
// file holding the copy's number; copies differ from each other.
func TestATorchScriptCopyKeepsEveryRecordAndAddsItsNumber(t *testing.T) {
	data := example(t, "pctr_v1/model.pt")
	a, err := Distinct("model.pt", data, 3)
	if err != nil {
		t.Fatal(err)
	}
	b, err := Distinct("model.pt", data, 4)
	if err != nil {
		t.Fatal(err)
	}
	if bytes.Equal(a, b) || bytes.Equal(a, data) {
		t.Fatal("copies 3 and 4 and the original are not all different")
	}
	read := func(data []byte) map[string][]byte {
		r, err := zip.NewReader(bytes.NewReader(data), int64(len(data)))
		if err != nil {
			t.Fatal(err)
		}
		out := map[string][]byte{}
		for _, f := range r.File {
			rc, err := f.Open()
			if err != nil {
				t.Fatal(err)
			}
			out[f.Name], err = io.ReadAll(rc)
			rc.Close()
			if err != nil {
				t.Fatal(err)
			}
		}
		return out
	}
	orig, cp := read(data), read(a)
	for name, content := range orig {
		if !bytes.Equal(cp[name], content) {
			t.Errorf("record %s differs in the copy", name)
		}
	}
	if len(cp) != len(orig)+1 || string(cp["model/extra/grove_copy"]) != "3" {
		t.Errorf("copy has %d records (original %d), extra/grove_copy %q", len(cp), len(orig), cp["model/extra/grove_copy"])
	}
}

// TestAnONNXCopyIsTheModelWithOneMetadataEntryMore: the copy is the
// original's bytes followed by one metadata_props field holding
// grove_copy and the copy's number.
func TestAnONNXCopyIsTheModelWithOneMetadataEntryMore(t *testing.T) {
	data := example(t, "pctr_onnx/model.onnx")
	cp, err := Distinct("model.onnx", data, 12)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.HasPrefix(cp, data) {
		t.Fatal("the copy does not start with the original model")
	}
	num, typ, n := protowire.ConsumeTag(cp[len(data):])
	if n < 0 || num != onnxMetadataProps || typ != protowire.BytesType {
		t.Fatalf("appended field %d type %d", num, typ)
	}
	entry, m := protowire.ConsumeBytes(cp[len(data)+n:])
	if m < 0 || len(data)+n+m != len(cp) || !bytes.Contains(entry, []byte("grove_copy")) || !bytes.HasSuffix(entry, []byte("12")) {
		t.Fatalf("appended entry %q", entry)
	}
}

func TestAnythingElseIsAnError(t *testing.T) {
	if _, err := Distinct("model.bin", []byte("x"), 1); err == nil || !strings.Contains(err.Error(), "model.bin is neither") {
		t.Errorf("a .bin file: %v", err)
	}
	if _, err := Distinct("model.pt", []byte("not a zip"), 1); err == nil || !strings.Contains(err.Error(), "copying model.pt") {
		t.Errorf("a .pt that is no archive: %v", err)
	}
}
