package modelconfig

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"
	"unicode/utf16"
	"unicode/utf8"

	"google.golang.org/protobuf/reflect/protoreflect"

	"github.com/groveml/grove/grovepb"
	"github.com/groveml/grove/internal/jsondoc"
)

// A scan is one pass over the tokens of a model config, led by its schema
// (grovepb.ModelConfig), made before protojson decodes it. It does what
// protobuf's JSON mapping does not:
//
//   - it reports syntax errors with their line and column, before anything
//     else, and refuses a document that is not one JSON object;
//   - it checks numbers against Grove's ranges, keeping the text as written
//     in the error ("1e2 is out of range 0..64");
//   - it checks the choice objects (a message that is one oneof, such as a
//     validity rule): exactly one key, and not null; a single unknown key
//     is taken out of the document (blanked) and remembered, so that
//     validation can report the unknown name with its contract and release;
//   - asked for a token's offset, it says where the token is (its field
//     path, its field), which turns protojson's errors into Grove's.
type scan struct {
	d    *jsondoc.Decoder
	data []byte
	// target is the offset of the token to locate, or -1; found is that
	// token once read.
	target int64
	found  *location
	// unknown maps the path of a choice object holding one unknown key to
	// that key; blanks are the byte ranges of those members.
	unknown map[string]string
	blanks  [][2]int64
	// problem is the first problem found in document order; problemAt
	// places it in the document.
	problem   error
	problemAt int64
}

// A location describes the token at an offset of the model config.
type location struct {
	// path is the field path of the value, or of the object holding the key.
	path string
	// key is the object key as written, when the token is one.
	key   string
	isKey bool
	// field is the field of the key or value; nil for an unknown key.
	field protoreflect.FieldDescriptor
	// elem is true for an element of a repeated field.
	elem bool
	// prev is how the key's field was first written in its object, when
	// the key repeats it.
	prev string
	// tok is the token.
	tok json.Token
}

// errFound stops a scan at its target.
var errFound = errors.New("target token found")

// scanModelConfig scans data, a model config with its trailing commas
// blanked. With a target offset, it stops at the token there and sets found.
func scanModelConfig(data []byte, target int64) (*scan, error) {
	s := &scan{d: jsondoc.NewDecoder(data), data: data, target: target, unknown: map[string]string{}}
	tok, start, err := s.next("")
	if err != nil {
		return nil, err
	}
	if tok != json.Delim('{') {
		return nil, &Error{Msg: fmt.Sprintf("model config must be a JSON object, got %s", jsondoc.Describe(tok))}
	}
	err = s.message("", (&grovepb.ModelConfig{}).ProtoReflect().Descriptor(), start)
	if errors.Is(err, errFound) {
		return s, nil
	}
	if err != nil {
		return nil, err
	}
	if err := s.d.End("model config"); err != nil {
		return nil, err
	}
	return s, nil
}

// next reads the next token and the offset where it starts.
func (s *scan) next(path string) (json.Token, int64, error) {
	start := s.d.InputOffset() // the end of the previous token
	for start < int64(len(s.data)) && strings.IndexByte(" \t\r\n,:", s.data[start]) >= 0 {
		start++
	}
	tok, err := s.d.Token(path)
	if str, ok := tok.(string); ok && strings.ContainsRune(str, utf8.RuneError) {
		// encoding/json reads an unpaired surrogate escape as U+FFFD;
		// protojson refuses it with a message that gives no position.
		if i := unpairedSurrogate(s.data[start:s.d.InputOffset()]); i >= 0 {
			line, col := jsondoc.Position(s.data, start+int64(i))
			return nil, start, &Error{Msg: fmt.Sprintf("invalid JSON at line %d, column %d: %s is half of a UTF-16 surrogate pair", line, col, s.data[start+int64(i):start+int64(i)+6])}
		}
	}
	return tok, start, err
}

// unpairedSurrogate returns the index in raw, a JSON string as written, of
// a \u escape of a UTF-16 surrogate that is not part of a pair, or -1.
func unpairedSurrogate(raw []byte) int {
	for i := 0; i+6 <= len(raw); i++ {
		switch {
		case raw[i] != '\\':
			continue
		case raw[i+1] != 'u':
			i++ // an escaped character
			continue
		}
		r := hexRune(raw[i+2 : i+6])
		if !utf16.IsSurrogate(r) {
			i += 5
			continue
		}
		if i+12 <= len(raw) && raw[i+6] == '\\' && raw[i+7] == 'u' && utf16.DecodeRune(r, hexRune(raw[i+8:i+12])) != utf8.RuneError {
			i += 11
			continue
		}
		return i
	}
	return -1
}

// hexRune reads four hex digits.
func hexRune(b []byte) rune {
	n, _ := strconv.ParseUint(string(b), 16, 16)
	return rune(n)
}

// report records a problem unless one placed earlier in the document is
// known: order places it, at is the offset its line and column name.
func (s *scan) report(order, at int64, err error) {
	if s.problem != nil && s.problemAt <= order {
		return
	}
	var ce *Error
	if errors.As(err, &ce) {
		line, col := jsondoc.Position(s.data, at)
		ce.Msg += fmt.Sprintf(" (line %d, column %d)", line, col)
	}
	s.problem, s.problemAt = err, order
}

// message reads the members of an object of message md at path, whose
// "{" is at offset open.
func (s *scan) message(path string, md protoreflect.MessageDescriptor, open int64) error {
	choice := isChoice(md)
	given := map[protoreflect.FieldNumber]string{} // field -> key as first written
	var keys []string
	var unknownMember [2]int64
	for s.d.More() {
		tok, start, err := s.next(path)
		if err != nil {
			return err
		}
		key := tok.(string) // the decoder guarantees object keys are strings
		fd := fieldByKey(md, key)
		if start == s.target {
			s.found = &location{path: path, key: key, isKey: true, field: fd}
			if fd != nil {
				s.found.prev = given[fd.Number()]
			}
			return errFound
		}
		keys = append(keys, key)
		if choice && len(keys) == 2 {
			s.report(open, start, &Error{Field: path, Msg: fmt.Sprintf("give exactly one of %s, got %q and %q", choiceNames(md), keys[0], key)})
		}
		if fd == nil {
			if err := s.d.Skip(join(path, key)); err != nil {
				return err
			}
			unknownMember = [2]int64{start, s.d.InputOffset()}
			continue
		}
		if _, ok := given[fd.Number()]; !ok {
			given[fd.Number()] = key
		}
		fieldPath := join(path, string(fd.Name()))
		tok, vstart, err := s.next(fieldPath)
		if err != nil {
			return err
		}
		if choice && tok == nil {
			s.report(open, vstart, &Error{Field: fieldPath, Msg: fmt.Sprintf("expected %s, got null", wanted(fd, false))})
		}
		if err := s.value(fieldPath, fd, false, tok, vstart); err != nil {
			return err
		}
	}
	if _, err := s.d.Token(path); err != nil { // the closing "}"
		return err
	}
	switch {
	case !choice:
	case len(keys) == 0:
		s.report(open, open, &Error{Field: path, Msg: fmt.Sprintf("expected one of %s, got an empty object", choiceNames(md))})
	case keys[0] == "":
		// An empty name would read as the choice's zero value (none, immediate).
		s.report(open, open, &Error{Field: path, Msg: fmt.Sprintf("expected one of %s, got an empty key", choiceNames(md))})
	case len(keys) == 1 && fieldByKey(md, keys[0]) == nil:
		s.unknown[path] = keys[0]
		s.blanks = append(s.blanks, unknownMember)
	}
	return nil
}

// value reads the value of field fd at path (an element of it if elem),
// whose first token tok, at offset start, has been read.
func (s *scan) value(path string, fd protoreflect.FieldDescriptor, elem bool, tok json.Token, start int64) error {
	if start == s.target {
		s.found = &location{path: path, field: fd, elem: elem, tok: tok}
		return errFound
	}
	switch {
	case fd.IsList() && !elem:
		if tok != json.Delim('[') {
			break // protojson rejects it
		}
		for i := 0; s.d.More(); i++ {
			at := fmt.Sprintf("%s[%d]", path, i)
			tok, start, err := s.next(at)
			if err != nil {
				return err
			}
			if err := s.value(at, fd, true, tok, start); err != nil {
				return err
			}
		}
		_, err := s.d.Token(path) // the closing "]"
		return err
	case fd.IsMap():
		// version_checksums, a map of strings that protojson checks;
		// validation checks its keys and values.
	case tok == nil:
		// null: the default for a field, rejected by protojson in a list.
	case fd.Message() != nil:
		if tok == json.Delim('{') {
			return s.message(path, fd.Message(), start)
		}
	case isInteger(fd.Kind()):
		lo, hi := intRange(fd)
		if _, err := jsondoc.IntValue(path, tok, lo, hi); err != nil {
			s.report(start, start, err)
		}
	case fd.Kind() == protoreflect.DoubleKind || fd.Kind() == protoreflect.FloatKind:
		if _, err := jsondoc.FloatValue(path, tok); err != nil {
			s.report(start, start, err)
		}
	}
	return s.d.SkipRest(path, tok)
}

// blanked returns the data with the members recorded in blanks replaced by
// spaces, keeping newlines: byte offsets and lines stay the same.
func (s *scan) blanked() []byte {
	if len(s.blanks) == 0 {
		return s.data
	}
	out := bytes.Clone(s.data)
	for _, b := range s.blanks {
		for i := b[0]; i < b[1]; i++ {
			if out[i] != '\n' {
				out[i] = ' '
			}
		}
	}
	return out
}

// decodeError turns protojson's error on decoding input (the blanked data)
// into a *Error naming the field and the line and column, or returns
// the scan's problem if it comes first in the document. protojson's
// messages start with "(line L:C)", C counting characters; the scan
// locates the token there and says what is wrong with it in Grove's words.
func (s *scan) decodeError(input []byte, err error) error {
	msg, off := err.Error(), int64(-1)
	if i := strings.Index(msg, "(line "); i >= 0 {
		var line, col int
		if n, _ := fmt.Sscanf(msg[i:], "(line %d:%d)", &line, &col); n == 2 {
			off = offsetOf(input, line, col)
		}
		if j := strings.Index(msg[i:], "): "); j >= 0 {
			msg = msg[i+j+3:]
		}
	}
	if s.problem != nil && (off < 0 || s.problemAt <= off) {
		return s.problem
	}
	if off < 0 {
		msg = strings.TrimLeft(strings.TrimPrefix(msg, "proto:"), " \u00a0")
		return &Error{Msg: "invalid model config: " + msg, Err: err}
	}
	e := &Error{Msg: msg, Err: err}
	if at, _ := scanModelConfig(input, off); at != nil && at.found != nil {
		e.Field, e.Msg = at.found.explain(msg)
	}
	line, col := jsondoc.Position(input, off)
	e.Msg += fmt.Sprintf(" (line %d, column %d)", line, col)
	return e
}

// explain returns the field path and the message of the error protojson
// reported at l; fallback is protojson's message, for errors it cannot tell.
func (l *location) explain(fallback string) (field, msg string) {
	switch {
	case l.isKey && l.field == nil:
		return l.path, fmt.Sprintf("unknown field %q", l.key)
	case l.isKey && l.prev != "" && l.prev != l.key:
		return l.path, fmt.Sprintf("duplicate field %q (already given as %q)", l.key, l.prev)
	case l.isKey && l.prev != "":
		return l.path, fmt.Sprintf("duplicate field %q", l.key)
	case l.isKey, fits(l.field, l.elem, l.tok):
		return l.path, fallback
	}
	return l.path, fmt.Sprintf("expected %s, got %s", wanted(l.field, l.elem), jsondoc.Describe(l.tok))
}

// wanted names the JSON value field fd takes (an element of it if elem).
func wanted(fd protoreflect.FieldDescriptor, elem bool) string {
	switch k := fd.Kind(); {
	case fd.IsList() && !elem:
		return "an array"
	case fd.Message() != nil:
		return "an object"
	case isInteger(k):
		return "an integer"
	case k == protoreflect.DoubleKind || k == protoreflect.FloatKind:
		return "a number"
	case k == protoreflect.BoolKind:
		return "a boolean"
	}
	return "a string"
}

// fits reports whether tok has the JSON type that wanted names.
func fits(fd protoreflect.FieldDescriptor, elem bool, tok json.Token) bool {
	switch wanted(fd, elem) {
	case "an array":
		return tok == json.Delim('[')
	case "an object":
		return tok == json.Delim('{')
	case "an integer", "a number":
		_, number := tok.(json.Number)
		_, str := tok.(string)
		return number || str
	case "a boolean":
		_, ok := tok.(bool)
		return ok
	}
	_, ok := tok.(string)
	return ok
}

// isInteger reports whether k is an integer kind.
func isInteger(k protoreflect.Kind) bool {
	switch k {
	case protoreflect.Int32Kind, protoreflect.Sint32Kind, protoreflect.Sfixed32Kind,
		protoreflect.Int64Kind, protoreflect.Sint64Kind, protoreflect.Sfixed64Kind:
		return true
	}
	return false
}

// intRange returns the values Grove accepts for integer field fd: its
// limit if it has one, else the range of its type.
func intRange(fd protoreflect.FieldDescriptor) (lo, hi int64) {
	switch fd.FullName() {
	case "grove.v1.ModelMetadata.eviction_grace_period_in_ms", "grove.v1.ModelMetadata.keep_previous_for_ms":
		return 0, MaxGracePeriodMs
	case "grove.v1.ModelMetadata.replicas":
		return 0, MaxReplicas
	case "grove.v1.ModelMetadata.nodes", "grove.v1.ModelMetadata.min_nodes":
		return 0, MaxNodes
	case "grove.v1.ModelMetadata.max_batch_rows":
		return 0, MaxBatchRowsLimit
	case "grove.v1.ModelMetadata.max_queue_delay_us":
		return 0, MaxQueueDelayUs
	case "grove.v1.ModelMetadata.intra_op_threads":
		return 0, MaxIntraOpThreads
	case "grove.v1.ModelMetadata.default_timeout_ms", "grove.v1.ModelMetadata.queue_timeout_ms":
		return 0, MaxTimeoutMs
	case "grove.v1.ValidAfterMs.ms":
		return 0, MaxValidAfterMs
	case "grove.v1.MinServedEvents.count", "grove.v1.PromoteWhen.min_shadow_executions", "grove.v1.RollbackWhen.min_requests",
		"grove.v1.PromoteWhen.min_outcomes", "grove.v1.RollbackWhen.min_outcomes":
		return 0, MaxEventCount
	case "grove.v1.VersionPolicy.Latest.num_versions":
		return 1, math.MaxInt32
	case "grove.v1.VersionPolicy.Specific.versions":
		return 1, math.MaxInt64
	}
	switch fd.Kind() {
	case protoreflect.Int64Kind, protoreflect.Sint64Kind, protoreflect.Sfixed64Kind:
		return math.MinInt64, math.MaxInt64
	}
	return math.MinInt32, math.MaxInt32
}

// isChoice reports whether md is a choice: all its fields are in one oneof.
func isChoice(md protoreflect.MessageDescriptor) bool {
	ods := md.Oneofs()
	return ods.Len() == 1 && !ods.Get(0).IsSynthetic() && ods.Get(0).Fields().Len() == md.Fields().Len()
}

// choiceNames lists the field names of choice md as "a, b or c".
func choiceNames(md protoreflect.MessageDescriptor) string {
	names := make([]string, md.Fields().Len())
	for i := range names {
		names[i] = string(md.Fields().Get(i).Name())
	}
	return jsondoc.OrList(names)
}

// fieldByKey finds the field of md that key names, by its JSON name or its
// proto name, as protojson does; nil if there is none.
func fieldByKey(md protoreflect.MessageDescriptor, key string) protoreflect.FieldDescriptor {
	if fd := md.Fields().ByJSONName(key); fd != nil {
		return fd
	}
	return md.Fields().ByTextName(key)
}

// join appends a field name to a field path.
func join(path, name string) string {
	if path == "" {
		return name
	}
	return path + "." + name
}

// offsetOf converts a 1-based line and column, counted in characters as
// protojson counts them, into a byte offset of data; -1 if out of data.
func offsetOf(data []byte, line, col int) int64 {
	off := 0
	for ; line > 1; line-- {
		i := bytes.IndexByte(data[off:], '\n')
		if i < 0 {
			return -1
		}
		off += i + 1
	}
	for ; col > 1; col-- {
		_, n := utf8.DecodeRune(data[off:])
		if n == 0 {
			return -1
		}
		off += n
	}
	return int64(off)
}
