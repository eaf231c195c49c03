package servables

import (
	"archive/zip"
	"encoding/binary"
	"errors"
	"io"
	"io/fs"
	"path"
	"strings"
)

// Format is a model file format, as recognised from a file's content.
type Format uint8

// The formats Sniff recognises.
const (
	// UnknownFormat is a file Sniff does not recognise.
	UnknownFormat Format = iota
	// TorchScript is a TorchScript archive (torch.jit.save).
	TorchScript
	// ONNX is a serialized ONNX ModelProto.
	ONNX
)

// String names the format ("TorchScript", "ONNX", "unknown").
func (f Format) String() string {
	switch f {
	case TorchScript:
		return "TorchScript"
	case ONNX:
		return "ONNX"
	}
	return "unknown"
}

// Sniff tells the format of the size bytes r holds from their content, so
// that a model file without an extension (as a B&A bucket or a
// RegisterModel call may hold one) can be loaded:
//
//   - TorchScript: a zip archive whose entries all sit under one top
//     folder, which holds data.pkl, constants.pkl and a code/ folder (a
//     plain torch.save checkpoint has no constants.pkl nor code/);
//   - ONNX: a protobuf message whose top-level fields walk to the exact
//     end of the file, each with a valid wire type (the right one for the
//     ModelProto fields Grove knows), with an ir_version (field 1, a
//     varint between 1 and 255) and a graph (field 7, length-delimited).
//
// Only the zip directory or the top-level field tags are read, never the
// weights, so sniffing a large model is cheap. Sniff never fails: a file
// it cannot read is UnknownFormat.
func Sniff(r io.ReaderAt, size int64) Format {
	switch {
	case isTorchScript(r, size):
		return TorchScript
	case isONNX(r, size):
		return ONNX
	}
	return UnknownFormat
}

// SniffFile is Sniff on the file name of fsys. A file that cannot be opened
// or read at random offsets is UnknownFormat.
func SniffFile(fsys fs.FS, name string) Format {
	f, err := fsys.Open(name)
	if err != nil {
		return UnknownFormat
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil || !st.Mode().IsRegular() {
		return UnknownFormat
	}
	ra, ok := f.(io.ReaderAt)
	if !ok {
		rs, ok := f.(io.ReadSeeker)
		if !ok {
			return UnknownFormat
		}
		ra = &seekReaderAt{rs}
	}
	return Sniff(ra, st.Size())
}

// seekReaderAt reads at offsets through Seek and Read.
type seekReaderAt struct{ rs io.ReadSeeker }

func (s *seekReaderAt) ReadAt(p []byte, off int64) (int, error) {
	if _, err := s.rs.Seek(off, io.SeekStart); err != nil {
		return 0, err
	}
	return io.ReadFull(s.rs, p)
}

// ModelFiles returns the files among files that hold a model of format f:
// those whose name ends in one of exts (any case), or, when none does, the
// files whose content Sniff recognises as f (none when fsys is nil). A
// model directory that names its model file keeps being read as before; an
// extension-less one is recognised by content.
func ModelFiles(fsys fs.FS, files []string, f Format, exts ...string) []string {
	var found []string
	for _, name := range files {
		for _, e := range exts {
			if strings.EqualFold(path.Ext(name), e) {
				found = append(found, name)
				break
			}
		}
	}
	if len(found) > 0 || fsys == nil {
		return found
	}
	for _, name := range files {
		if SniffFile(fsys, name) == f {
			found = append(found, name)
		}
	}
	return found
}

// zipMagic starts every zip archive torch.jit.save writes (a local file header).
const zipMagic = "PK\x03\x04"

// isTorchScript reports whether r holds a TorchScript archive.
func isTorchScript(r io.ReaderAt, size int64) bool {
	var head [4]byte
	if size < int64(len(head)) {
		return false
	}
	if _, err := r.ReadAt(head[:], 0); err != nil || string(head[:]) != zipMagic {
		return false
	}
	zr, err := zip.NewReader(r, size)
	if err != nil {
		return false
	}
	top := ""
	var data, constants, code bool
	for _, e := range zr.File {
		dir, rest, ok := strings.Cut(e.Name, "/")
		if !ok || dir == "" || rest == "" && !e.FileInfo().IsDir() {
			return false // an entry outside a top folder
		}
		if top == "" {
			top = dir
		} else if dir != top {
			return false // a second top folder
		}
		switch {
		case rest == "data.pkl":
			data = true
		case rest == "constants.pkl":
			constants = true
		case strings.HasPrefix(rest, "code/"):
			code = true
		}
	}
	return data && constants && code
}

// Protobuf wire types.
const (
	wireVarint  = 0
	wireFixed64 = 1
	wireBytes   = 2
	wireFixed32 = 5
)

// modelProtoWire returns the wire type of a ModelProto field Grove knows
// (onnx.proto: ir_version 1, producer_name 2, producer_version 3, domain 4,
// model_version 5, doc_string 6, graph 7, opset_import 8,
// metadata_props 14, training_info 20, functions 25, configuration 26).
func modelProtoWire(num uint64) (wire uint64, known bool) {
	switch num {
	case 1, 5:
		return wireVarint, true
	case 2, 3, 4, 6, 7, 8, 14, 20, 25, 26:
		return wireBytes, true
	}
	return 0, false
}

// maxONNXFields bounds the top-level fields isONNX walks; a real model has
// a few dozen at most.
const maxONNXFields = 1 << 16

// errShort is a varint that runs past the end of the file or over 10 bytes.
var errShort = errors.New("truncated varint")

// isONNX reports whether r holds a serialized ONNX ModelProto.
func isONNX(r io.ReaderAt, size int64) bool {
	var irVersion, graph bool
	var buf [binary.MaxVarintLen64]byte
	// readVarint reads the varint at off and returns it with its length.
	readVarint := func(off int64) (uint64, int64, error) {
		n := min(int64(len(buf)), size-off)
		if n <= 0 {
			return 0, 0, errShort
		}
		if _, err := r.ReadAt(buf[:n], off); err != nil && !errors.Is(err, io.EOF) {
			return 0, 0, err
		}
		v, k := binary.Uvarint(buf[:n])
		if k <= 0 {
			return 0, 0, errShort
		}
		return v, int64(k), nil
	}
	off := int64(0)
	for fields := 0; off < size; fields++ {
		if fields == maxONNXFields {
			return false
		}
		tag, k, err := readVarint(off)
		if err != nil {
			return false
		}
		off += k
		num, wire := tag>>3, tag&7
		if num == 0 || num > 1<<29-1 {
			return false
		}
		if want, known := modelProtoWire(num); known && wire != want {
			return false
		}
		switch wire {
		case wireVarint:
			v, k, err := readVarint(off)
			if err != nil {
				return false
			}
			off += k
			if num == 1 {
				if v < 1 || v > 255 {
					return false
				}
				irVersion = true
			}
		case wireFixed64:
			off += 8
		case wireFixed32:
			off += 4
		case wireBytes:
			n, k, err := readVarint(off)
			if err != nil || n > uint64(size) {
				return false
			}
			off += k + int64(n)
			if num == 7 && n > 0 {
				graph = true
			}
		default:
			return false // groups (3, 4) and invalid wire types
		}
	}
	return off == size && irVersion && graph
}
