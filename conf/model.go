package conf

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"
)

// ModelConfig is the model config file kept in the bucket: the models to serve.
type ModelConfig struct {
	// Models are the model_metadata entries, in file order.
	Models []ModelMetadata
}

// ModelMetadata is one model_metadata entry of the model config.
type ModelMetadata struct {
	// Path is model_path, the model's object name in the bucket; a trailing
	// "/" makes it a directory (every object under the prefix).
	Path string
	// Checksum is the expected checksum (lowercase hex SHA-256), or empty for none.
	Checksum string
	// WarmUpJSON is warm_up_batch_request_json, a batch request sent to the
	// model before it takes traffic, or empty for none.
	WarmUpJSON string
	// EvictionGracePeriod is eviction_grace_period_in_ms: how long a model
	// keeps serving after it is removed from the config or replaced.
	EvictionGracePeriod time.Duration
}

// IsDir reports whether the model path names a directory, that is whether it ends in "/".
func (m ModelMetadata) IsDir() bool { return strings.HasSuffix(m.Path, "/") }

// ConfigError reports a model config that was read but could not be accepted.
type ConfigError struct {
	// Field locates the problem, e.g. "model_metadata[1].checksum"; it is
	// empty when the problem concerns the whole document.
	Field string
	// Msg describes the problem.
	Msg string
	// Err is the underlying error, if any, such as a *json.SyntaxError.
	Err error
}

// Error returns "field: message", or the message alone for document-level problems.
func (e *ConfigError) Error() string {
	if e.Field == "" {
		return e.Msg
	}
	return e.Field + ": " + e.Msg
}

// Unwrap returns the underlying error.
func (e *ConfigError) Unwrap() error { return e.Err }

// ParseModelConfig parses and validates a model config file.
//
// The format is the protobuf JSON mapping of the B&A inference ModelConfig
// message, and parsing follows protobuf's rules: each field may be spelled
// in snake_case or lowerCamelCase; unknown fields are an error; null means
// the field's default; eviction_grace_period_in_ms is an int32 given as a
// number or a quoted number; trailing commas before "]" or "}" are
// tolerated, as protobuf's parser (and the published example) allow.
// A field given twice, under either spelling, is an error.
//
// Validation rejects entries with an empty, absolute or otherwise unsafe
// model_path, duplicate model paths, checksums that are not 64 lowercase
// hex characters, warm-up requests that are not JSON, and negative grace
// periods. All errors are *ConfigError.
func ParseModelConfig(data []byte) (*ModelConfig, error) {
	if !utf8.Valid(data) {
		return nil, &ConfigError{Msg: "model config is not valid UTF-8"}
	}
	dec := json.NewDecoder(bytes.NewReader(blankTrailingCommas(data)))
	dec.UseNumber()
	d := &decoder{dec: dec, data: data}

	var c ModelConfig
	tok, err := d.token("")
	if err != nil {
		return nil, err
	}
	if tok != json.Delim('{') {
		return nil, &ConfigError{Msg: fmt.Sprintf("model config must be a JSON object, got %s", describe(tok))}
	}
	if err := decodeObjectBody(d, "", modelConfigFields(), &c); err != nil {
		return nil, err
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, &ConfigError{Msg: fmt.Sprintf("unexpected data after the model config object at offset %d", dec.InputOffset())}
	}
	if err := c.validate(); err != nil {
		return nil, err
	}
	return &c, nil
}

// maxGracePeriodMs is the largest eviction_grace_period_in_ms, the int32 maximum.
const maxGracePeriodMs = math.MaxInt32

// field describes one field of a JSON object decoded into a T. Adding a
// field (or a top-level section) to the model config is one entry in a
// table of these.
type field[T any] struct {
	// name is the protobuf field name (snake_case); its lowerCamelCase JSON
	// name is accepted too.
	name string
	// decode reads the field's value from d into dst; path names the field
	// in errors. A null value must leave dst alone, as protobuf reads it as
	// the default.
	decode func(d *decoder, path string, dst *T) error
}

// modelConfigFields are the fields of the top-level ModelConfig object.
func modelConfigFields() []field[ModelConfig] {
	return []field[ModelConfig]{
		{"model_metadata", func(d *decoder, path string, c *ModelConfig) error {
			return decodeArray(d, path, func(path string) error {
				var m ModelMetadata
				if err := decodeObject(d, path, modelMetadataFields(), &m); err != nil {
					return err
				}
				c.Models = append(c.Models, m)
				return nil
			})
		}},
	}
}

// modelMetadataFields are the fields of a model_metadata entry.
func modelMetadataFields() []field[ModelMetadata] {
	return []field[ModelMetadata]{
		{"model_path", func(d *decoder, path string, m *ModelMetadata) error {
			return d.string(path, &m.Path)
		}},
		{"checksum", func(d *decoder, path string, m *ModelMetadata) error {
			return d.string(path, &m.Checksum)
		}},
		{"warm_up_batch_request_json", func(d *decoder, path string, m *ModelMetadata) error {
			return d.string(path, &m.WarmUpJSON)
		}},
		{"eviction_grace_period_in_ms", func(d *decoder, path string, m *ModelMetadata) error {
			ms, err := d.integer(path, 0, maxGracePeriodMs)
			if err != nil {
				return err
			}
			m.EvictionGracePeriod = time.Duration(ms) * time.Millisecond
			return nil
		}},
	}
}

// validate checks the parsed config; see ParseModelConfig.
func (c *ModelConfig) validate() error {
	seen := make(map[string]int, len(c.Models))
	for i, m := range c.Models {
		entry := fmt.Sprintf("model_metadata[%d]", i)
		if err := validateObjectPath(m.Path); err != nil {
			return &ConfigError{Field: entry + ".model_path", Msg: err.Error()}
		}
		if j, dup := seen[m.Path]; dup {
			return &ConfigError{Field: entry + ".model_path", Msg: fmt.Sprintf("duplicate model path %q (also in model_metadata[%d])", m.Path, j)}
		}
		seen[m.Path] = i
		if err := validateChecksum(m.Checksum); err != nil {
			return &ConfigError{Field: entry + ".checksum", Msg: err.Error()}
		}
		if m.WarmUpJSON != "" {
			var raw json.RawMessage
			if err := json.Unmarshal([]byte(m.WarmUpJSON), &raw); err != nil {
				return &ConfigError{Field: entry + ".warm_up_batch_request_json", Msg: fmt.Sprintf("not valid JSON: %v", err), Err: err}
			}
		}
	}
	return nil
}

// validateObjectPath checks that p is a usable object name in a bucket:
// non-empty, relative (no leading "/"), with no ".." segments, backslashes or NUL bytes.
func validateObjectPath(p string) error {
	switch {
	case p == "":
		return errors.New("must not be empty")
	case strings.HasPrefix(p, "/"):
		return fmt.Errorf("%q must not start with \"/\"; paths are relative to the bucket", p)
	case strings.ContainsRune(p, '\\'):
		return fmt.Errorf("%q must not contain backslashes; use \"/\" as separator", p)
	case strings.ContainsRune(p, 0):
		return fmt.Errorf("%q must not contain NUL bytes", p)
	}
	for seg := range strings.SplitSeq(p, "/") {
		if seg == ".." {
			return fmt.Errorf("%q must not contain \"..\" segments", p)
		}
	}
	return nil
}

// validateChecksum accepts the empty string or 64 lowercase hex characters.
func validateChecksum(s string) error {
	if s == "" {
		return nil
	}
	upper := false
	for _, r := range s {
		switch {
		case '0' <= r && r <= '9', 'a' <= r && r <= 'f':
		case 'A' <= r && r <= 'F':
			upper = true
		default:
			return fmt.Errorf("%q is not hex (invalid character %q); checksums are 64 lowercase hex characters", s, r)
		}
	}
	if upper {
		return fmt.Errorf("%q has uppercase letters; checksums are lowercase hex and compared exactly", s)
	}
	if len(s) != 64 {
		return fmt.Errorf("%q has %d characters; a SHA-256 checksum has 64 lowercase hex characters", s, len(s))
	}
	return nil
}

// decoder reads JSON tokens and turns failures into *ConfigError.
type decoder struct {
	dec  *json.Decoder
	data []byte // the original input, for line numbers
}

// token reads the next token; path names where it is for errors.
func (d *decoder) token(path string) (json.Token, error) {
	tok, err := d.dec.Token()
	if err == nil {
		return tok, nil
	}
	if err == io.EOF {
		err = io.ErrUnexpectedEOF
	}
	var se *json.SyntaxError
	if errors.As(err, &se) {
		line, col := position(d.data, se.Offset)
		return nil, &ConfigError{Msg: fmt.Sprintf("invalid JSON at line %d, column %d: %v", line, col, se), Err: err}
	}
	return nil, &ConfigError{Field: path, Msg: fmt.Sprintf("invalid JSON: %v", err), Err: err}
}

// string reads a string field; null leaves dst unchanged.
func (d *decoder) string(path string, dst *string) error {
	tok, err := d.token(path)
	if err != nil {
		return err
	}
	switch v := tok.(type) {
	case nil:
		return nil
	case string:
		*dst = v
		return nil
	}
	return d.typeError(path, "a string", tok)
}

// integer reads an integer field given as a number or a quoted number, as
// protobuf JSON allows for int32 fields, and checks it is in lo..hi; null
// reads as 0.
func (d *decoder) integer(path string, lo, hi int64) (int64, error) {
	tok, err := d.token(path)
	if err != nil {
		return 0, err
	}
	var s string
	switch v := tok.(type) {
	case nil:
		return 0, nil
	case json.Number:
		s = string(v)
	case string:
		if !isNumber(v) {
			return 0, &ConfigError{Field: path, Msg: fmt.Sprintf("%q is not a number", v)}
		}
		s = v
	default:
		return 0, d.typeError(path, "an integer", tok)
	}
	outOfRange := &ConfigError{Field: path, Msg: fmt.Sprintf("%s is out of range %d..%d", s, lo, hi)}
	if i, err := strconv.ParseInt(s, 10, 64); err == nil {
		if i < lo || i > hi {
			return 0, outOfRange
		}
		return i, nil
	}
	// Protobuf also accepts integral values written with a fraction or an exponent, e.g. 6e4.
	f, err := strconv.ParseFloat(s, 64)
	switch {
	case err != nil && !errors.Is(err, strconv.ErrRange):
		return 0, &ConfigError{Field: path, Msg: fmt.Sprintf("%s is not an integer", s), Err: err}
	case f != math.Trunc(f):
		return 0, &ConfigError{Field: path, Msg: fmt.Sprintf("%s is not an integer", s)}
	case err != nil || f < float64(lo) || f > float64(hi):
		return 0, outOfRange
	}
	return int64(f), nil
}

// typeError reports a value of the wrong type. If the value is an array
// or object it is not consumed: decoding stops at the first error.
func (d *decoder) typeError(path, want string, got json.Token) error {
	return &ConfigError{Field: path, Msg: fmt.Sprintf("expected %s, got %s", want, describe(got))}
}

// decodeObject reads a JSON object into dst using the field table. Null
// is rejected: protobuf does not allow it as an element of a repeated field.
func decodeObject[T any](d *decoder, path string, fields []field[T], dst *T) error {
	tok, err := d.token(path)
	if err != nil {
		return err
	}
	if tok != json.Delim('{') {
		return d.typeError(path, "an object", tok)
	}
	return decodeObjectBody(d, path, fields, dst)
}

// decodeObjectBody reads the members of an object whose "{" has been read.
func decodeObjectBody[T any](d *decoder, path string, fields []field[T], dst *T) error {
	given := make(map[string]string, len(fields)) // field name -> key as written
	for d.dec.More() {
		tok, err := d.token(path)
		if err != nil {
			return err
		}
		key := tok.(string) // the decoder guarantees object keys are strings
		f, ok := lookup(fields, key)
		if !ok {
			return &ConfigError{Field: path, Msg: fmt.Sprintf("unknown field %q", key)}
		}
		if prev, dup := given[f.name]; dup {
			msg := fmt.Sprintf("duplicate field %q", key)
			if prev != key {
				msg += fmt.Sprintf(" (already given as %q)", prev)
			}
			return &ConfigError{Field: path, Msg: msg}
		}
		given[f.name] = key
		fieldPath := f.name
		if path != "" {
			fieldPath = path + "." + f.name
		}
		if err := f.decode(d, fieldPath, dst); err != nil {
			return err
		}
	}
	_, err := d.token(path) // the closing "}"
	return err
}

// decodeArray reads a JSON array (or null), calling elem for each element
// with the element's path; elem must consume exactly one value.
func decodeArray(d *decoder, path string, elem func(path string) error) error {
	tok, err := d.token(path)
	if err != nil {
		return err
	}
	switch tok {
	case nil:
		return nil
	case json.Delim('['):
	default:
		return d.typeError(path, "an array", tok)
	}
	for i := 0; d.dec.More(); i++ {
		if err := elem(fmt.Sprintf("%s[%d]", path, i)); err != nil {
			return err
		}
	}
	_, err = d.token(path) // the closing "]"
	return err
}

// lookup finds the field named key in either spelling.
func lookup[T any](fields []field[T], key string) (field[T], bool) {
	for _, f := range fields {
		if key == f.name || key == lowerCamel(f.name) {
			return f, true
		}
	}
	return field[T]{}, false
}

// lowerCamel converts a protobuf field name to its JSON name, as protoc
// does: "warm_up_batch_request_json" becomes "warmUpBatchRequestJson".
func lowerCamel(name string) string {
	var b strings.Builder
	upper := false
	for i := 0; i < len(name); i++ {
		c := name[i]
		switch {
		case c == '_':
			upper = true
		case upper && 'a' <= c && c <= 'z':
			b.WriteByte(c - 'a' + 'A')
			upper = false
		default:
			b.WriteByte(c)
			upper = false
		}
	}
	return b.String()
}

// describe names the JSON type of a token for error messages.
func describe(tok json.Token) string {
	switch v := tok.(type) {
	case nil:
		return "null"
	case json.Delim:
		if v == '{' {
			return "an object"
		}
		return "an array"
	case string:
		return fmt.Sprintf("string %q", v)
	case json.Number:
		return "number " + string(v)
	case bool:
		return fmt.Sprintf("boolean %v", v)
	}
	return fmt.Sprintf("%v", tok)
}

// isNumber reports whether s is a JSON number with no surrounding space.
func isNumber(s string) bool {
	if s == "" || !(s[0] == '-' || '0' <= s[0] && s[0] <= '9') || !('0' <= s[len(s)-1] && s[len(s)-1] <= '9') {
		return false
	}
	var n json.Number
	return json.Unmarshal([]byte(s), &n) == nil
}

// position converts a byte offset into a 1-based line and column.
func position(data []byte, offset int64) (line, col int) {
	offset = min(max(offset, 0), int64(len(data)))
	before := data[:offset]
	line = 1 + bytes.Count(before, []byte("\n"))
	col = 1 + len(before) - (bytes.LastIndexByte(before, '\n') + 1)
	return line, col
}

// blankTrailingCommas replaces with a space each comma (outside strings)
// that is followed, after optional whitespace, by "]" or "}" and that
// follows a value. Blanking rather than removing keeps syntax error offsets
// right. Commas after "[", "{" or another comma are left for the JSON
// decoder to reject. data is not modified; a copy is made if needed.
func blankTrailingCommas(data []byte) []byte {
	out, copied := data, false
	inString, escaped := false, false
	var last byte // last significant byte outside strings
	for i := 0; i < len(data); i++ {
		c := data[i]
		if inString {
			switch {
			case escaped:
				escaped = false
			case c == '\\':
				escaped = true
			case c == '"':
				inString = false
			}
			continue
		}
		switch c {
		case ' ', '\t', '\n', '\r':
			continue
		case '"':
			inString = true
		case ',':
			if last == '[' || last == '{' || last == ',' || last == 0 {
				break
			}
			j := i + 1
			for j < len(data) && (data[j] == ' ' || data[j] == '\t' || data[j] == '\n' || data[j] == '\r') {
				j++
			}
			if j < len(data) && (data[j] == ']' || data[j] == '}') {
				if !copied {
					out, copied = bytes.Clone(data), true
				}
				out[i] = ' '
			}
		}
		last = c
	}
	return out
}
