package jsondoc

import (
	"encoding/json"
	"fmt"
	"strings"
	"unicode/utf8"
)

// Field is one member of a JSON object decoded into a T, an entry of the
// field table the object decoders take.
type Field[T any] struct {
	// Name is the field's protobuf-style name (snake_case); its
	// lowerCamelCase spelling is accepted too.
	Name string
	// SameAs, if not empty, is the Name of another field of the table that
	// this one is a second spelling of: giving both is a duplicate field.
	SameAs string
	// Decode reads the field's value from d into dst; path names the field
	// in errors. A null value must leave dst alone, as protobuf reads it as
	// the default.
	Decode func(d *Decoder, path string, dst *T) error
}

// Decode reads data, one JSON object and nothing after it, into dst using
// the field table; what names the document in errors ("policy"). The data
// must be UTF-8. All errors are *Error.
func Decode[T any](data []byte, what string, fields []Field[T], dst *T) error {
	if !utf8.Valid(data) {
		return &Error{Msg: what + " is not valid UTF-8"}
	}
	d := NewDecoder(data)
	tok, err := d.Token("")
	if err != nil {
		return err
	}
	if tok != json.Delim('{') {
		return &Error{Msg: fmt.Sprintf("%s must be a JSON object, got %s", what, Describe(tok))}
	}
	if err := DecodeObjectBody(d, "", fields, dst); err != nil {
		return err
	}
	return d.End(what)
}

// String reads a string field; null leaves dst unchanged.
func (d *Decoder) String(path string, dst *string) error {
	tok, err := d.Token(path)
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
	return TypeError(path, "a string", tok)
}

// Integer reads an integer field given as a number or a quoted number, as
// protobuf JSON allows for int32 fields, and checks it is in lo..hi; null
// reads as 0.
func (d *Decoder) Integer(path string, lo, hi int64) (int64, error) {
	tok, err := d.Token(path)
	if err != nil || tok == nil {
		return 0, err
	}
	return IntValue(path, tok, lo, hi)
}

// Float reads a finite number given as a number or a quoted number, as
// protobuf JSON allows for double fields (its "NaN" and "Infinity" are
// rejected); null leaves dst unchanged.
func (d *Decoder) Float(path string, dst *float64) error {
	tok, err := d.Token(path)
	if err != nil || tok == nil {
		return err
	}
	f, err := FloatValue(path, tok)
	if err == nil {
		*dst = f
	}
	return err
}

// Raw reads the next value whole, or returns nil for null; NewDecoder
// reads the value in turn, with positions counted from its start.
func (d *Decoder) Raw(path string) (json.RawMessage, error) {
	var v json.RawMessage
	if err := d.dec.Decode(&v); err != nil {
		return nil, &Error{Field: path, Msg: fmt.Sprintf("invalid JSON: %v", err), Err: err}
	}
	if string(v) == "null" {
		return nil, nil
	}
	return v, nil
}

// DecodeObject reads a JSON object into dst using the field table. Null
// is rejected: protobuf does not allow it as an element of a repeated field.
func DecodeObject[T any](d *Decoder, path string, fields []Field[T], dst *T) error {
	tok, err := d.Token(path)
	if err != nil {
		return err
	}
	if tok != json.Delim('{') {
		return TypeError(path, "an object", tok)
	}
	return DecodeObjectBody(d, path, fields, dst)
}

// DecodeObjectBody reads the members of an object whose "{" has been read.
func DecodeObjectBody[T any](d *Decoder, path string, fields []Field[T], dst *T) error {
	given := make(map[string]string, len(fields)) // field name -> key as written
	for d.dec.More() {
		tok, err := d.Token(path)
		if err != nil {
			return err
		}
		key := tok.(string) // the decoder guarantees object keys are strings
		f, ok := Lookup(fields, key)
		if !ok {
			return &Error{Field: path, Msg: fmt.Sprintf("unknown field %q", key)}
		}
		same := f.Name
		if f.SameAs != "" {
			same = f.SameAs
		}
		if prev, dup := given[same]; dup {
			msg := fmt.Sprintf("duplicate field %q", key)
			if prev != key {
				msg += fmt.Sprintf(" (already given as %q)", prev)
			}
			return &Error{Field: path, Msg: msg}
		}
		given[same] = key
		fieldPath := f.Name
		if path != "" {
			fieldPath = path + "." + f.Name
		}
		if err := f.Decode(d, fieldPath, dst); err != nil {
			return err
		}
	}
	_, err := d.Token(path) // the closing "}"
	return err
}

// DecodeArray reads a JSON array (or null), calling elem for each element
// with the element's path; elem must consume exactly one value.
func DecodeArray(d *Decoder, path string, elem func(path string) error) error {
	tok, err := d.Token(path)
	if err != nil {
		return err
	}
	switch tok {
	case nil:
		return nil
	case json.Delim('['):
	default:
		return TypeError(path, "an array", tok)
	}
	for i := 0; d.dec.More(); i++ {
		if err := elem(fmt.Sprintf("%s[%d]", path, i)); err != nil {
			return err
		}
	}
	_, err = d.Token(path) // the closing "]"
	return err
}

// Lookup finds the field named key in either spelling.
func Lookup[T any](fields []Field[T], key string) (Field[T], bool) {
	for _, f := range fields {
		if key == f.Name || key == lowerCamel(f.Name) {
			return f, true
		}
	}
	return Field[T]{}, false
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

// DecodeOneOf reads an object that must hold exactly one of the keys in
// options (a protobuf oneof), such as {"keep_latest": 2}. An unknown key is
// passed to unknown and its value skipped, so that validation can name the
// contract and servable in the error; nullable says whether null (the
// default, dst left alone) is accepted instead of an object.
func DecodeOneOf[T any](d *Decoder, path string, nullable bool, options []Field[T], dst *T, unknown func(dst *T, key string)) error {
	tok, err := d.Token(path)
	if err != nil {
		return err
	}
	if tok != json.Delim('{') && (tok != nil || !nullable) {
		return TypeError(path, "an object", tok)
	}
	if tok == nil {
		return nil
	}
	first := ""
	for d.dec.More() {
		tok, err := d.Token(path)
		if err != nil {
			return err
		}
		key := tok.(string)
		if first != "" {
			return &Error{Field: path, Msg: fmt.Sprintf("give exactly one of %s, got %q and %q", optionNames(options), first, key)}
		}
		first = key
		f, ok := Lookup(options, key)
		if !ok {
			unknown(dst, key)
			if err := d.Skip(path + "." + key); err != nil {
				return err
			}
			continue
		}
		if err := f.Decode(d, path+"."+f.Name, dst); err != nil {
			return err
		}
	}
	if first == "" {
		return &Error{Field: path, Msg: fmt.Sprintf("expected one of %s, got an empty object", optionNames(options))}
	}
	_, err = d.Token(path) // the closing "}"
	return err
}

// optionNames lists the names of options as "a, b or c".
func optionNames[T any](options []Field[T]) string {
	names := make([]string, len(options))
	for i, o := range options {
		names[i] = o.Name
	}
	return OrList(names)
}
