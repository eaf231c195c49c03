package forestflow

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"

	"github.com/groveml/grove/internal/jsonscan"
	"github.com/groveml/grove/servables"
)

func malformed(datum, entry int, format string, args ...any) *RequestError {
	return &RequestError{Kind: Malformed, Datum: datum, Entry: entry, Msg: fmt.Sprintf(format, args...)}
}

func unprocessable(datum, entry int, t TensorType, format string, args ...any) *RequestError {
	return &RequestError{Kind: Unprocessable, Datum: datum, Entry: entry, Type: t, Msg: fmt.Sprintf(format, args...)}
}

// isNull reports whether a raw JSON value is null.
// An absent member (nil) counts as null.
func isNull(raw json.RawMessage) bool { return len(raw) == 0 || string(raw) == "null" }

// jsonKind names the JSON type of a raw value for error messages.
func jsonKind(raw []byte) string {
	if len(raw) == 0 {
		return "nothing"
	}
	switch raw[0] {
	case '{':
		return "an object"
	case '[':
		return "an array"
	case '"':
		return "a string"
	case 't', 'f':
		return "a boolean"
	case 'n':
		return "null"
	}
	return "a number"
}

// object decodes a raw JSON object into its members, checking every key is
// one of allowed. A null value is an empty object.
func object(raw json.RawMessage, what string, allowed ...string) (map[string]json.RawMessage, *RequestError) {
	if isNull(raw) {
		return nil, nil
	}
	if len(raw) == 0 || raw[0] != '{' {
		return nil, malformed(-1, -1, "%s is %s, want an object", what, jsonKind(raw))
	}
	var m map[string]json.RawMessage
	if err := json.Unmarshal(raw, &m); err != nil {
		return nil, malformed(-1, -1, "%s: %v", what, err)
	}
	for k := range m {
		ok := false
		for _, a := range allowed {
			if k == a {
				ok = true
				break
			}
		}
		if !ok {
			return nil, malformed(-1, -1, "%s has an unknown member %q", what, k)
		}
	}
	return m, nil
}

// array decodes a raw JSON array into its elements. A null value is an
// empty array.
func array(raw json.RawMessage, what string) ([]json.RawMessage, *RequestError) {
	if isNull(raw) {
		return nil, nil
	}
	if len(raw) == 0 || raw[0] != '[' {
		return nil, malformed(-1, -1, "%s is %s, want an array", what, jsonKind(raw))
	}
	var a []json.RawMessage
	if err := json.Unmarshal(raw, &a); err != nil {
		return nil, malformed(-1, -1, "%s: %v", what, err)
	}
	return a, nil
}

// parseType reads a TensorType enum value: its name, or its number.
func parseType(raw json.RawMessage, what string) (TensorType, *RequestError) {
	if len(raw) > 0 && raw[0] == '"' {
		var s string
		if err := json.Unmarshal(raw, &s); err != nil {
			return 0, malformed(-1, -1, "%s: %v", what, err)
		}
		for t := Float16; t <= Bytes; t++ {
			if s == t.String() {
				return t, nil
			}
		}
		return 0, malformed(-1, -1, "%s %q is not a TensorType (Float16, Float32, Float64, Int8, Int16, Int32, Int64, String, Bool, Bytes)", what, s)
	}
	if n, err := strconv.ParseInt(string(raw), 10, 32); err == nil {
		if t := TensorType(n); t >= Float16 && t <= Bytes {
			return t, nil
		}
		return 0, malformed(-1, -1, "%s %d is not a TensorType number (1 to 10)", what, n)
	}
	return 0, malformed(-1, -1, "%s is %s, want a TensorType name", what, jsonKind(raw))
}

// ParseInferenceRequest parses a ForestFlow InferenceRequest in protobuf
// JSON and converts it to one input tensor per schema entry (see the package
// documentation for the mapping and the checks). Errors are *RequestError.
//
// Memory use is bounded by the size of body: tensors are allocated only
// after every datum has been checked to carry exactly len(fields) values per
// schema entry, so their total size is at most a small multiple of the
// number of values present in body.
func ParseInferenceRequest(body []byte) (*Request, error) {
	req, rerr := parse(body)
	if rerr != nil {
		return nil, rerr
	}
	return req, nil
}

func parse(body []byte) (*Request, *RequestError) {
	body = bytes.TrimSpace(body)
	if !json.Valid(body) {
		var v any
		err := json.Unmarshal(body, &v)
		if err == nil { // cannot happen; keep a message anyway
			err = errors.New("invalid JSON")
		}
		return nil, malformed(-1, -1, "the request is not valid JSON: %v", err)
	}
	if body[0] != '{' {
		return nil, malformed(-1, -1, "the request is %s, want an object", jsonKind(body))
	}
	top, rerr := object(body, "the request", "schema", "datum", "configs")
	if rerr != nil {
		return nil, rerr
	}
	req := &Request{Configs: map[string]string{}}

	// configs: map<string, string>.
	if raw, ok := top["configs"]; ok {
		if isNull(raw) {
			// absent
		} else if len(raw) == 0 || raw[0] != '{' {
			return nil, malformed(-1, -1, "configs is %s, want an object of strings", jsonKind(raw))
		} else {
			var m map[string]json.RawMessage
			if err := json.Unmarshal(raw, &m); err != nil {
				return nil, malformed(-1, -1, "configs: %v", err)
			}
			for k, v := range m {
				var s string
				if len(v) == 0 || v[0] != '"' || json.Unmarshal(v, &s) != nil {
					return nil, malformed(-1, -1, "configs[%q] is %s, want a string", k, jsonKind(v))
				}
				req.Configs[k] = s
			}
		}
	}

	// schema: repeated TensorSchema.
	entries, rerr := array(top["schema"], "schema")
	if rerr != nil {
		return nil, rerr
	}
	for i, raw := range entries {
		what := fmt.Sprintf("schema entry %d", i)
		if isNull(raw) {
			return nil, malformed(-1, i, "%s is null, want an object", what)
		}
		m, rerr := object(raw, what, "type", "fields")
		if rerr != nil {
			rerr.Entry = i
			return nil, rerr
		}
		traw, ok := m["type"]
		if !ok || isNull(traw) {
			return nil, malformed(-1, i, "%s has no type", what)
		}
		t, rerr := parseType(traw, what+" type")
		if rerr != nil {
			rerr.Entry = i
			return nil, rerr
		}
		fraw, rerr := array(m["fields"], what+" fields")
		if rerr != nil {
			rerr.Entry = i
			return nil, rerr
		}
		fields := make([]string, len(fraw))
		for j, f := range fraw {
			if len(f) == 0 || f[0] != '"' || json.Unmarshal(f, &fields[j]) != nil {
				return nil, malformed(-1, i, "%s field %d is %s, want a string", what, j, jsonKind(f))
			}
		}
		req.Schema = append(req.Schema, SchemaEntry{Type: t, Fields: fields})
	}
	if len(req.Schema) == 0 {
		return nil, unprocessable(-1, -1, 0, "the request has no schema entries")
	}
	entryOf := map[TensorType]int{}
	for i, e := range req.Schema {
		if _, ok := e.Type.DType(); !ok {
			return nil, &RequestError{Kind: UnsupportedType, Datum: -1, Entry: i, Type: e.Type,
				Msg: fmt.Sprintf("schema entry %d has type %v, which Grove does not support (supported: Float32, Float64, Int8, Int16, Int32, Int64, String, Bytes)", i, e.Type)}
		}
		if j, dup := entryOf[e.Type]; dup {
			return nil, unprocessable(-1, i, e.Type, "schema entries %d and %d both have type %v; a schema names each type once", j, i, e.Type)
		}
		entryOf[e.Type] = i
		if len(e.Fields) == 0 {
			return nil, unprocessable(-1, i, e.Type, "schema entry %d (%v) has no fields", i, e.Type)
		}
	}
	nEntries := len(req.Schema) // at most 8: types are distinct and supported

	// datum: repeated Datum. First pass: structure and counts; cells[d*n+e]
	// is the raw data array of datum d for schema entry e.
	datums, rerr := array(top["datum"], "datum")
	if rerr != nil {
		return nil, rerr
	}
	if len(datums) == 0 {
		return nil, unprocessable(-1, -1, 0, "the request has no datum")
	}
	rows := len(datums)
	cells := make([][]byte, rows*nEntries)
	for d, raw := range datums {
		if rerr := parseDatum(raw, d, req.Schema, entryOf, cells[d*nEntries:(d+1)*nEntries]); rerr != nil {
			return nil, rerr
		}
	}

	// Second pass: allocate and fill the tensors.
	req.Rows = rows
	req.Inputs = make([]servables.Tensor, nEntries)
	for e, se := range req.Schema {
		dt, _ := se.Type.DType()
		k := len(se.Fields)
		if dt == servables.Bytes {
			var data []byte
			for d := 0; d < rows; d++ {
				if data, rerr = appendStrings(data, cells[d*nEntries+e], d, e, se.Type); rerr != nil {
					return nil, rerr
				}
			}
			req.Inputs[e] = servables.Tensor{Name: se.Type.String(), DType: dt, Shape: []int64{int64(rows), int64(k)}, Data: data}
			continue
		}
		t, err := servables.NewTensor(se.Type.String(), dt, []int64{int64(rows), int64(k)})
		if err != nil {
			return nil, unprocessable(-1, e, se.Type, "schema entry %d (%v): %d datums × %d fields: %v", e, se.Type, rows, k, err)
		}
		for d := 0; d < rows; d++ {
			if rerr := fill(t, d*k, cells[d*nEntries+e], d, e, se.Type); rerr != nil {
				return nil, rerr
			}
		}
		req.Inputs[e] = t
	}
	return req, nil
}

// parseDatum checks datum d and stores the raw data array of each of its
// tensors in cells, at the index of the schema entry of the same type.
func parseDatum(raw json.RawMessage, d int, schema []SchemaEntry, entryOf map[TensorType]int, cells [][]byte) *RequestError {
	what := fmt.Sprintf("datum %d", d)
	if isNull(raw) {
		return malformed(d, -1, "%s is null, want an object", what)
	}
	m, rerr := object(raw, what, "tensors")
	if rerr != nil {
		rerr.Datum = d
		return rerr
	}
	tensors, rerr := array(m["tensors"], what+" tensors")
	if rerr != nil {
		rerr.Datum = d
		return rerr
	}
	for j, traw := range tensors {
		twhat := fmt.Sprintf("datum %d tensor %d", d, j)
		if isNull(traw) {
			return malformed(d, -1, "%s is null, want an object", twhat)
		}
		cases, rerr := object(traw, twhat, "String", "Int8", "Int16", "Int32", "Int64",
			"Float16", "Float32", "Float64", "Bool", "Byte")
		if rerr != nil {
			rerr.Datum = d
			return rerr
		}
		var t TensorType
		var body json.RawMessage
		for ct := Float16; ct <= Bytes; ct++ {
			v, ok := cases[ct.caseName()]
			if !ok || isNull(v) {
				continue
			}
			if t != 0 {
				return malformed(d, -1, "%s has two values, %s and %s; a Tensor holds one", twhat, t.caseName(), ct.caseName())
			}
			t, body = ct, v
		}
		if t == 0 {
			return unprocessable(d, -1, 0, "%s has no value (want one of String, Int8, Int16, Int32, Int64, Float16, Float32, Float64, Bool, Byte)", twhat)
		}
		dm, rerr := object(body, twhat+" "+t.caseName(), "data", "tensorType")
		if rerr != nil {
			rerr.Datum = d
			return rerr
		}
		if ttraw, ok := dm["tensorType"]; ok && !isNull(ttraw) {
			tt, rerr := parseType(ttraw, twhat+" tensorType")
			if rerr != nil {
				rerr.Datum = d
				return rerr
			}
			if tt != t {
				return unprocessable(d, -1, t, "%s is a %s tensor with tensorType %v", twhat, t.caseName(), tt)
			}
		}
		e, ok := entryOf[t]
		if !ok {
			return unprocessable(d, -1, t, "%s has type %v, which is not in the schema", twhat, t)
		}
		if cells[e] != nil {
			return unprocessable(d, e, t, "datum %d has two %v tensors (schema entry %d)", d, t, e)
		}
		data, ok := dm["data"]
		if !ok || isNull(data) {
			data = json.RawMessage("[]")
		}
		if data[0] != '[' {
			return malformed(d, e, "%s data is %s, want an array", twhat, jsonKind(data))
		}
		n, rerr := countElems(data, d, e, twhat, t)
		if rerr != nil {
			return rerr
		}
		if want := len(schema[e].Fields); n != want {
			return unprocessable(d, e, t, "datum %d: schema entry %d (%v, %d fields) has %d values, want %d", d, e, t, want, n, want)
		}
		cells[e] = data
	}
	for e, se := range schema {
		if cells[e] == nil {
			return unprocessable(d, e, se.Type, "datum %d has no %v tensor for schema entry %d (%d fields)", d, se.Type, e, len(se.Fields))
		}
	}
	return nil
}

func isSpace(c byte) bool { return c == ' ' || c == '\t' || c == '\n' || c == '\r' }

// nextElem returns the element of the valid JSON array arr that starts at
// or after i (i must be past the '[' or at a ','), and the index after it;
// ok is false at the end of the array. Elements that are arrays or objects
// are returned as their first byte only: they are errors to the caller.
func nextElem(arr []byte, i int) (elem []byte, next int, ok bool) {
	for i < len(arr) && (isSpace(arr[i]) || arr[i] == ',') {
		i++
	}
	if i >= len(arr) || arr[i] == ']' {
		return nil, i, false
	}
	start := i
	switch arr[i] {
	case '"':
		i++
		for i < len(arr) && arr[i] != '"' {
			if arr[i] == '\\' {
				i++
			}
			i++
		}
		i++
	case '[', '{':
		i++
	default:
		for i < len(arr) && arr[i] != ',' && arr[i] != ']' && !isSpace(arr[i]) {
			i++
		}
	}
	if i > len(arr) {
		i = len(arr)
	}
	return arr[start:i], i, true
}

// countElems counts the elements of the data array arr, rejecting any that
// is not a scalar, or for String and Bytes not a string.
func countElems(arr []byte, d, e int, what string, tt TensorType) (int, *RequestError) {
	n := 0
	for i := 1; ; {
		elem, next, ok := nextElem(arr, i)
		if !ok {
			return n, nil
		}
		if tt == String || tt == Bytes {
			if elem[0] != '"' {
				return 0, malformed(d, e, "%s data[%d] is %s, want a string", what, n, jsonKind(elem))
			}
		} else {
			switch elem[0] {
			case '[', '{', 'n', 't', 'f':
				return 0, malformed(d, e, "%s data[%d] is %s, want a number", what, n, jsonKind(elem))
			}
		}
		n++
		i = next
	}
}

// appendStrings appends the elements of the String or Bytes data array arr
// (already counted: every element is a JSON string) to data, in the binary
// form of servables.Bytes: String values as their text, Bytes values
// base64-decoded, as protobuf JSON writes bytes.
func appendStrings(data, arr []byte, d, e int, tt TensorType) ([]byte, *RequestError) {
	k := 0
	for i := 1; ; k++ {
		elem, next, ok := nextElem(arr, i)
		if !ok {
			return data, nil
		}
		i = next
		var s string
		if err := json.Unmarshal(elem, &s); err != nil {
			return nil, malformed(d, e, "datum %d: schema entry %d (%v) value %d: %v", d, e, tt, k, err)
		}
		if tt == String {
			data = servables.AppendStringElement(data, s)
			continue
		}
		b, err := decodeBase64(s)
		if err != nil {
			return nil, malformed(d, e, "datum %d: schema entry %d (%v) value %d %s is not base64 (Bytes values are base64 strings, as protobuf JSON writes bytes): %v", d, e, tt, k, elem, err)
		}
		data = servables.AppendBytesElement(data, b)
	}
}

// decodeBase64 decodes s as protobuf JSON parsers accept bytes: the
// standard or the URL-safe alphabet, with or without padding.
func decodeBase64(s string) ([]byte, error) {
	enc := base64.StdEncoding
	if strings.ContainsAny(s, "-_") {
		enc = base64.URLEncoding
	}
	if len(s)%4 != 0 {
		enc = enc.WithPadding(base64.NoPadding)
	}
	return enc.DecodeString(s)
}

// fill converts the data array arr (already counted) into t starting at
// element off.
func fill(t servables.Tensor, off int, arr []byte, d, e int, tt TensorType) *RequestError {
	k := 0
	for i := 1; ; k++ {
		elem, next, ok := nextElem(arr, i)
		if !ok {
			return nil
		}
		i = next
		tok := elem
		quoted := tok[0] == '"'
		if quoted {
			var s string
			if err := json.Unmarshal(elem, &s); err != nil {
				return malformed(d, e, "datum %d: schema entry %d (%v) value %d: %v", d, e, tt, k, err)
			}
			tok = []byte(s)
		}
		bad := func(kind ErrorKind, why string) *RequestError {
			return &RequestError{Kind: kind, Datum: d, Entry: e, Type: tt,
				Msg: fmt.Sprintf("datum %d: schema entry %d (%v) value %d %s %s", d, e, tt, k, elem, why)}
		}
		switch tt {
		case Float32, Float64:
			var v float64
			switch {
			case quoted && string(tok) == "NaN":
				v = math.NaN()
			case quoted && string(tok) == "Infinity":
				v = math.Inf(1)
			case quoted && string(tok) == "-Infinity":
				v = math.Inf(-1)
			default:
				if !isJSONNumber(tok) {
					return bad(Malformed, "is not a number")
				}
				bits := 64
				if tt == Float32 {
					bits = 32
				}
				var err error
				v, err = jsonscan.ParseFloat(tok, bits)
				if err != nil {
					return bad(Malformed, "is out of range for "+tt.String())
				}
			}
			if tt == Float32 {
				t.Float32s()[off+k] = float32(v)
			} else {
				t.Float64s()[off+k] = v
			}
		default:
			if !isJSONNumber(tok) {
				return bad(Malformed, "is not a number")
			}
			bits := 32
			if tt == Int64 {
				bits = 64
			}
			v, err := strconv.ParseInt(string(tok), 10, bits)
			if err != nil {
				var ne *strconv.NumError
				if errors.As(err, &ne) && ne.Err == strconv.ErrRange {
					return bad(Malformed, "is out of range for "+tt.String())
				}
				return bad(Malformed, "is not an integer")
			}
			switch tt {
			case Int8:
				if v < math.MinInt8 || v > math.MaxInt8 {
					return bad(Unprocessable, "is out of range for Int8")
				}
				t.Int8s()[off+k] = int8(v)
			case Int16:
				if v < math.MinInt16 || v > math.MaxInt16 {
					return bad(Unprocessable, "is out of range for Int16")
				}
				t.Int16s()[off+k] = int16(v)
			case Int32:
				t.Int32s()[off+k] = int32(v)
			case Int64:
				t.Int64s()[off+k] = v
			}
		}
	}
}

// isJSONNumber reports whether b is a number in JSON's grammar.
func isJSONNumber(b []byte) bool {
	i := 0
	if i < len(b) && b[i] == '-' {
		i++
	}
	if i >= len(b) {
		return false
	}
	switch {
	case b[i] == '0':
		i++
	case b[i] >= '1' && b[i] <= '9':
		for i < len(b) && b[i] >= '0' && b[i] <= '9' {
			i++
		}
	default:
		return false
	}
	if i < len(b) && b[i] == '.' {
		i++
		j := i
		for i < len(b) && b[i] >= '0' && b[i] <= '9' {
			i++
		}
		if i == j {
			return false
		}
	}
	if i < len(b) && (b[i] == 'e' || b[i] == 'E') {
		i++
		if i < len(b) && (b[i] == '+' || b[i] == '-') {
			i++
		}
		j := i
		for i < len(b) && b[i] >= '0' && b[i] <= '9' {
			i++
		}
		if i == j {
			return false
		}
	}
	return i == len(b)
}
