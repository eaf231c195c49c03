package xgboost

import (
	"bytes"
	"io"
	"io/fs"
)

// Format is the format of an XGBoost model file, as its first bytes tell.
type Format uint8

// The formats Detect tells apart.
const (
	// FormatUnknown is not an XGBoost model file Detect recognises.
	FormatUnknown Format = iota
	// FormatJSON is a JSON model (model.json).
	FormatJSON
	// FormatUBJSON is a Universal Binary JSON model (model.ubj).
	FormatUBJSON
	// FormatLegacyBinary is XGBoost's deprecated binary format.
	FormatLegacyBinary
)

// String names the format.
func (f Format) String() string {
	switch f {
	case FormatJSON:
		return "JSON"
	case FormatUBJSON:
		return "UBJSON"
	case FormatLegacyBinary:
		return "legacy binary"
	}
	return "unknown"
}

// sniffLen is how many bytes Detect needs at most.
const sniffLen = 64

// Detect tells the format of an XGBoost model from its first bytes, as
// XGBoost writes them: a JSON object whose first key is "learner"; the
// same in UBJSON ('{', a length of type L, l, I, i or U, "learner"); or
// the legacy binary's "binf" magic.
func Detect(head []byte) Format {
	switch {
	case looksLegacyBinary(head):
		return FormatLegacyBinary
	case isUBJSONLearner(head):
		return FormatUBJSON
	case isJSONLearner(head):
		return FormatJSON
	}
	return FormatUnknown
}

func looksLegacyBinary(head []byte) bool { return bytes.HasPrefix(head, []byte("binf")) }

func isJSONLearner(head []byte) bool {
	rest := bytes.TrimLeft(head, " \t\r\n")
	if len(rest) == 0 || rest[0] != '{' {
		return false
	}
	rest = bytes.TrimLeft(rest[1:], " \t\r\n")
	if !bytes.HasPrefix(rest, []byte(`"learner"`)) {
		return false
	}
	rest = bytes.TrimLeft(rest[len(`"learner"`):], " \t\r\n")
	if len(rest) == 0 || rest[0] != ':' {
		return false
	}
	rest = bytes.TrimLeft(rest[1:], " \t\r\n")
	return len(rest) > 0 && rest[0] == '{'
}

func isUBJSONLearner(head []byte) bool {
	if len(head) < 2 || head[0] != '{' {
		return false
	}
	var size int
	switch head[1] {
	case 'i', 'U':
		size = 1
	case 'I':
		size = 2
	case 'l':
		size = 4
	case 'L':
		size = 8
	default:
		return false
	}
	key := head[2:]
	if len(key) < size {
		return false
	}
	n := 0
	for _, b := range key[:size] { // big-endian
		n = n<<8 | int(b)
	}
	return n == len("learner") && bytes.HasPrefix(key[size:], []byte("learner"))
}

// DetectFile is Detect on the first bytes of the file name in fsys;
// FormatUnknown when it cannot be read.
func DetectFile(fsys fs.FS, name string) Format {
	f, err := fsys.Open(name)
	if err != nil {
		return FormatUnknown
	}
	defer f.Close()
	if st, err := f.Stat(); err != nil || !st.Mode().IsRegular() {
		return FormatUnknown
	}
	head := make([]byte, sniffLen)
	n, err := io.ReadFull(f, head)
	if err != nil && err != io.ErrUnexpectedEOF {
		return FormatUnknown
	}
	return Detect(head[:n])
}
