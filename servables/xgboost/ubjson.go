package xgboost

import (
	"encoding/binary"
	"fmt"
	"math"
	"reflect"
	"strings"
)

// The UBJSON markers (https://ubjson.org) decodeUBJSON reads.
const (
	ubjNull      = 'Z'
	ubjNoOp      = 'N'
	ubjTrue      = 'T'
	ubjFalse     = 'F'
	ubjInt8      = 'i'
	ubjUint8     = 'U'
	ubjInt16     = 'I'
	ubjInt32     = 'l'
	ubjInt64     = 'L'
	ubjFloat32   = 'd'
	ubjFloat64   = 'D'
	ubjHighPrec  = 'H'
	ubjChar      = 'C'
	ubjString    = 'S'
	ubjArray     = '['
	ubjArrayEnd  = ']'
	ubjObject    = '{'
	ubjObjectEnd = '}'
	ubjType      = '$'
	ubjCount     = '#'
)

// maxUBJSONDepth bounds the nesting of containers: an XGBoost model nests
// five deep.
const maxUBJSONDepth = 64

// decodeUBJSON decodes data, one UBJSON value and nothing after it, into
// v (a pointer), as encoding/json decodes JSON: object keys name struct
// fields by their json tags (unknown keys are skipped), arrays fill
// slices, null leaves a pointer, slice or map nil. It reads what
// XGBoost's UBJWriter writes (objects of keys and values, arrays counted
// (#) and strongly typed ($) or not, the integer and float types, strings)
// and the rest of UBJSON's syntax (uncounted containers, no-op markers,
// chars), but refuses typed containers of anything other than numbers and
// chars, typed objects and high-precision numbers (ErrUnsupported). Every
// count and length is checked against the bytes left before anything is
// allocated for it, and nesting is bounded, so no input makes it allocate
// much beyond its size or recurse without end. Errors wrap ErrInvalid (or
// ErrUnsupported) and say where: the byte offset and the path of keys.
func decodeUBJSON(data []byte, v any) error {
	d := &ubjDecoder{data: data}
	m, err := d.marker()
	if err != nil {
		return err
	}
	if err := d.value(reflect.ValueOf(v).Elem(), m); err != nil {
		return err
	}
	if d.off != len(d.data) {
		return d.fail("data after the model's UBJSON object")
	}
	return nil
}

// ubjDecoder reads one UBJSON document.
type ubjDecoder struct {
	data  []byte
	off   int
	depth int
	path  []pathStep // the keys and indices of the value being read
}

// pathStep is an object's key, or an array's index when key is "".
type pathStep struct {
	key   string
	index int
}

// fail is an ErrInvalid error at the current offset and path.
func (d *ubjDecoder) fail(format string, args ...any) error {
	return invalid("UBJSON at byte %d%s: %s", d.off, d.where(), fmt.Sprintf(format, args...))
}

// unsupported is an ErrUnsupported error at the current offset and path.
func (d *ubjDecoder) unsupported(format string, args ...any) error {
	return fmt.Errorf("%w: UBJSON at byte %d%s: %s", ErrUnsupported, d.off, d.where(), fmt.Sprintf(format, args...))
}

// where is the path of the value being read, " (learner.objective)", or
// "" at the top.
func (d *ubjDecoder) where() string {
	if len(d.path) == 0 {
		return ""
	}
	var b strings.Builder
	for i, p := range d.path {
		switch {
		case p.key == "":
			fmt.Fprintf(&b, "[%d]", p.index)
		case i > 0:
			b.WriteString("." + p.key)
		default:
			b.WriteString(p.key)
		}
	}
	return " (" + b.String() + ")"
}

// left is the number of bytes not read yet.
func (d *ubjDecoder) left() int { return len(d.data) - d.off }

// take returns the next n bytes.
func (d *ubjDecoder) take(n int) ([]byte, error) {
	if n < 0 || n > d.left() {
		return nil, d.fail("%d bytes needed, %d left (truncated?)", n, d.left())
	}
	b := d.data[d.off : d.off+n]
	d.off += n
	return b, nil
}

// marker reads the next type marker, skipping no-ops.
func (d *ubjDecoder) marker() (byte, error) {
	for d.off < len(d.data) {
		m := d.data[d.off]
		d.off++
		if m != ubjNoOp {
			return m, nil
		}
	}
	return 0, d.fail("unexpected end of data (truncated?)")
}

// peek returns the next marker, skipping no-ops, without reading it; 0 at
// the end of the data.
func (d *ubjDecoder) peek() byte {
	for d.off < len(d.data) && d.data[d.off] == ubjNoOp {
		d.off++
	}
	if d.off == len(d.data) {
		return 0
	}
	return d.data[d.off]
}

// intSize is the size of an integer marker's value, 0 for other markers.
func intSize(m byte) int {
	switch m {
	case ubjInt8, ubjUint8:
		return 1
	case ubjInt16:
		return 2
	case ubjInt32:
		return 4
	case ubjInt64:
		return 8
	}
	return 0
}

// fixedSize is the size of the value of a marker whose values all have
// one size (integers, floats, char), 0 for the others.
func fixedSize(m byte) int {
	switch m {
	case ubjFloat32:
		return 4
	case ubjFloat64:
		return 8
	case ubjChar:
		return 1
	}
	return intSize(m)
}

// integer reads the value of integer marker m.
func (d *ubjDecoder) integer(m byte) (int64, error) {
	n := intSize(m)
	if n == 0 {
		return 0, d.fail("%s where an integer belongs", describeMarker(m))
	}
	b, err := d.take(n)
	if err != nil {
		return 0, err
	}
	switch m {
	case ubjInt8:
		return int64(int8(b[0])), nil
	case ubjUint8:
		return int64(b[0]), nil
	case ubjInt16:
		return int64(int16(binary.BigEndian.Uint16(b))), nil
	case ubjInt32:
		return int64(int32(binary.BigEndian.Uint32(b))), nil
	}
	return int64(binary.BigEndian.Uint64(b)), nil
}

// float reads the value of number marker m (an integer or a float).
func (d *ubjDecoder) float(m byte) (float64, error) {
	switch m {
	case ubjFloat32:
		b, err := d.take(4)
		if err != nil {
			return 0, err
		}
		return float64(math.Float32frombits(binary.BigEndian.Uint32(b))), nil
	case ubjFloat64:
		b, err := d.take(8)
		if err != nil {
			return 0, err
		}
		return math.Float64frombits(binary.BigEndian.Uint64(b)), nil
	case ubjHighPrec:
		return 0, d.unsupported("a high-precision number")
	}
	if intSize(m) == 0 {
		return 0, d.fail("%s where a number belongs", describeMarker(m))
	}
	i, err := d.integer(m)
	return float64(i), err
}

// length reads a length or a count (an integer marker and its value) and
// checks that at least per bytes for each unit are left.
func (d *ubjDecoder) length(what string, per int) (int, error) {
	m, err := d.marker()
	if err != nil {
		return 0, err
	}
	n, err := d.integer(m)
	if err != nil {
		return 0, err
	}
	if n < 0 {
		return 0, d.fail("%s %d is negative", what, n)
	}
	if per > 0 && n > int64(d.left()/per) {
		return 0, d.fail("%s %d is more than the %d bytes left hold (%d or more each)", what, n, d.left(), per)
	}
	return int(n), nil
}

// text reads the value of string or char marker m.
func (d *ubjDecoder) text(m byte) (string, error) {
	switch m {
	case ubjChar:
		b, err := d.take(1)
		return string(b), err
	case ubjString:
		n, err := d.length("string length", 1)
		if err != nil {
			return "", err
		}
		b, err := d.take(n)
		return string(b), err
	case ubjHighPrec:
		return "", d.unsupported("a high-precision number")
	}
	return "", d.fail("%s where a string belongs", describeMarker(m))
}

// header reads the optional type ($) and count (#) after a container's
// opening marker: typ 0 when untyped, n -1 when uncounted. A typed
// container has a count (UBJSON's rule), and its type has values of one
// size (numbers, chars), elemMin bytes or more each; the count is checked
// against the bytes left (elemMin per element when untyped).
func (d *ubjDecoder) header(elemMin int) (typ byte, n int, err error) {
	n = -1
	if d.peek() == ubjType {
		d.off++
		if typ, err = d.marker(); err != nil {
			return 0, 0, err
		}
		if fixedSize(typ) == 0 {
			return 0, 0, d.unsupported("a container of type %s (only numbers and chars are read in typed containers)", describeMarker(typ))
		}
		if d.peek() != ubjCount {
			return 0, 0, d.fail("a typed container without a count")
		}
		elemMin = fixedSize(typ)
	}
	if d.peek() == ubjCount {
		d.off++
		if n, err = d.length("count", elemMin); err != nil {
			return 0, 0, err
		}
	}
	return typ, n, nil
}

// enter counts one more level of nesting; leave undoes it.
func (d *ubjDecoder) enter() error {
	if d.depth++; d.depth > maxUBJSONDepth {
		return d.fail("containers nested deeper than %d", maxUBJSONDepth)
	}
	return nil
}

func (d *ubjDecoder) leave() { d.depth-- }

// key reads an object key: a string without its marker.
func (d *ubjDecoder) key() (string, error) {
	n, err := d.length("key length", 1)
	if err != nil {
		return "", err
	}
	b, err := d.take(n)
	return string(b), err
}

// object reads the object that starts with marker m, calling member for
// each key: member reads the key's value (of marker vm), or skips it.
func (d *ubjDecoder) object(m byte, member func(key string, vm byte) error) error {
	if m != ubjObject {
		return d.fail("%s where an object belongs", describeMarker(m))
	}
	if d.peek() == ubjType {
		return d.unsupported("a typed object")
	}
	_, n, err := d.header(2) // a key's length and a value marker at least
	if err != nil {
		return err
	}
	if err := d.enter(); err != nil {
		return err
	}
	defer d.leave()
	for i := 0; n < 0 || i < n; i++ {
		if n < 0 && d.peek() == ubjObjectEnd {
			d.off++
			break
		}
		k, err := d.key()
		if err != nil {
			return err
		}
		vm, err := d.marker()
		if err != nil {
			return err
		}
		d.path = append(d.path, pathStep{key: k})
		err = member(k, vm)
		d.path = d.path[:len(d.path)-1]
		if err != nil {
			return err
		}
	}
	return nil
}

// array reads the array that starts with marker m, calling elem for each
// element with its index and marker; n is the count, or -1 when the array
// is not counted. start is called first with the count (-1: unknown).
func (d *ubjDecoder) array(m byte, start func(n int), elem func(i int, em byte) error) error {
	if m != ubjArray {
		return d.fail("%s where an array belongs", describeMarker(m))
	}
	typ, n, err := d.header(1)
	if err != nil {
		return err
	}
	if err := d.enter(); err != nil {
		return err
	}
	defer d.leave()
	start(n)
	for i := 0; n < 0 || i < n; i++ {
		em := typ
		if typ == 0 {
			if n < 0 && d.peek() == ubjArrayEnd {
				d.off++
				break
			}
			if em, err = d.marker(); err != nil {
				return err
			}
		}
		d.path = append(d.path, pathStep{index: i})
		err = elem(i, em)
		d.path = d.path[:len(d.path)-1]
		if err != nil {
			return err
		}
	}
	return nil
}

// skip reads the value of marker m and drops it.
func (d *ubjDecoder) skip(m byte) error {
	switch m {
	case ubjNull, ubjTrue, ubjFalse:
		return nil
	case ubjHighPrec:
		return d.unsupported("a high-precision number")
	case ubjString:
		n, err := d.length("string length", 1)
		if err != nil {
			return err
		}
		_, err = d.take(n)
		return err
	case ubjArray:
		return d.array(m, func(int) {}, func(_ int, em byte) error { return d.skip(em) })
	case ubjObject:
		return d.object(m, func(_ string, vm byte) error { return d.skip(vm) })
	}
	if n := fixedSize(m); n > 0 {
		_, err := d.take(n)
		return err
	}
	return d.fail("%s is not a UBJSON value", describeMarker(m))
}

// value decodes the value of marker m into v.
func (d *ubjDecoder) value(v reflect.Value, m byte) error {
	if m == ubjNull {
		switch v.Kind() {
		case reflect.Pointer, reflect.Slice, reflect.Map:
			v.SetZero()
		}
		return nil
	}
	switch v.Kind() {
	case reflect.Pointer:
		if v.IsNil() {
			v.Set(reflect.New(v.Type().Elem()))
		}
		return d.value(v.Elem(), m)
	case reflect.Struct:
		return d.object(m, func(key string, vm byte) error {
			if f, ok := fieldByTag(v, key); ok {
				return d.value(f, vm)
			}
			return d.skip(vm)
		})
	case reflect.Map:
		if v.Type().Key().Kind() != reflect.String {
			break
		}
		if v.IsNil() {
			v.Set(reflect.MakeMap(v.Type()))
		}
		return d.object(m, func(key string, vm byte) error {
			e := reflect.New(v.Type().Elem()).Elem()
			if err := d.value(e, vm); err != nil {
				return err
			}
			v.SetMapIndex(reflect.ValueOf(key).Convert(v.Type().Key()), e)
			return nil
		})
	case reflect.Slice:
		return d.slice(v, m)
	case reflect.String:
		s, err := d.text(m)
		if err == nil {
			v.SetString(s)
		}
		return err
	case reflect.Bool:
		switch m {
		case ubjTrue, ubjFalse:
			v.SetBool(m == ubjTrue)
			return nil
		}
		i, err := d.integer(m)
		if err != nil {
			return err
		}
		if i != 0 && i != 1 {
			return d.fail("%d where 0, 1, true or false belongs", i)
		}
		v.SetBool(i == 1)
		return nil
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		i, err := d.integer(m)
		if err != nil {
			return err
		}
		if v.OverflowInt(i) {
			return d.fail("%d is out of range", i)
		}
		v.SetInt(i)
		return nil
	case reflect.Float32, reflect.Float64:
		f, err := d.float(m)
		if err == nil {
			v.SetFloat(f)
		}
		return err
	}
	return d.fail("no UBJSON reading for a Go %s", v.Type()) // a type of this package's model: never
}

// slice decodes the array of marker m into slice v. The elements of a
// counted array into []int64 or []f32 (the trees' arrays) are read
// without reflection.
func (d *ubjDecoder) slice(v reflect.Value, m byte) error {
	et := v.Type().Elem()
	var s reflect.Value
	var ints []int64
	var floats []f32
	return d.array(m, func(n int) {
		switch {
		case n < 0:
			s = reflect.MakeSlice(v.Type(), 0, 0)
		case et.Kind() == reflect.Struct:
			// Grown as elements come: each is much larger than its bytes.
			s = reflect.MakeSlice(v.Type(), 0, min(n, 64))
		default:
			s = reflect.MakeSlice(v.Type(), n, n) // n was checked against the bytes left
			switch p := s.Interface().(type) {
			case []int64:
				ints = p
			case []f32:
				floats = p
			}
		}
		v.Set(s)
	}, func(i int, em byte) error {
		switch {
		case ints != nil:
			x, err := d.integer(em)
			ints[i] = x
			return err
		case floats != nil:
			x, err := d.float(em)
			floats[i] = f32(x)
			return err
		}
		if i >= s.Len() {
			s = reflect.Append(s, reflect.New(et).Elem())
			v.Set(s)
		}
		return d.value(s.Index(i), em)
	})
}

// fieldByTag returns the field of struct v whose json tag names key.
func fieldByTag(v reflect.Value, key string) (reflect.Value, bool) {
	t := v.Type()
	for i := range t.NumField() {
		name, _, _ := strings.Cut(t.Field(i).Tag.Get("json"), ",")
		if name == key {
			return v.Field(i), true
		}
	}
	return reflect.Value{}, false
}

// describeMarker names a marker for an error message.
func describeMarker(m byte) string {
	names := map[byte]string{
		ubjNull: "null", ubjTrue: "true", ubjFalse: "false", ubjInt8: "an int8", ubjUint8: "a uint8",
		ubjInt16: "an int16", ubjInt32: "an int32", ubjInt64: "an int64", ubjFloat32: "a float32",
		ubjFloat64: "a float64", ubjHighPrec: "a high-precision number", ubjChar: "a char",
		ubjString: "a string", ubjArray: "an array", ubjObject: "an object",
		ubjArrayEnd: "the end of an array", ubjObjectEnd: "the end of an object",
	}
	if s, ok := names[m]; ok {
		return s
	}
	if m >= ' ' && m < 0x7f {
		return fmt.Sprintf("marker %q", m)
	}
	return fmt.Sprintf("byte 0x%02x", m)
}
