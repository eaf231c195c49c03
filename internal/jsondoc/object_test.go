package jsondoc

import (
	"errors"
	"strings"
	"testing"
)

// point is a document with one field in three spellings: "x_pos", its
// lowerCamelCase "xPos", and "x" declared SameAs "x_pos".
type point struct{ X, Y int64 }

func pointFields() []Field[point] {
	x := func(d *Decoder, path string, p *point) error {
		var err error
		p.X, err = d.Integer(path, 0, 10)
		return err
	}
	return []Field[point]{
		{Name: "x_pos", Decode: x},
		{Name: "x", SameAs: "x_pos", Decode: x},
		{Name: "y", Decode: func(d *Decoder, path string, p *point) error {
			var err error
			p.Y, err = d.Integer(path, 0, 10)
			return err
		}},
	}
}

func TestDecodeReadsEverySpellingOfAField(t *testing.T) {
	for _, doc := range []string{`{"x_pos": 3, "y": "4"}`, `{"xPos": 3, "y": 4e0}`, `{"x": 3, "y": 4}`} {
		var p point
		if err := Decode([]byte(doc), "point", pointFields(), &p); err != nil || p != (point{3, 4}) {
			t.Errorf("%s: got %+v, %v; want {3 4}", doc, p, err)
		}
	}
}

func TestDecodeNamesWhatIsWrong(t *testing.T) {
	for _, tc := range []struct{ doc, want string }{
		{`{"x_pos": 1, "xPos": 2}`, `duplicate field "xPos" (already given as "x_pos")`},
		{`{"x": 1, "x_pos": 2}`, `duplicate field "x_pos" (already given as "x")`},
		{`{"y": 1, "y": 2}`, `duplicate field "y"`},
		{`{"z": 1}`, `unknown field "z"`},
		{`{"y": 11}`, `y: 11 is out of range 0..10`},
		{`{"y": 1.5}`, `y: 1.5 is not an integer`},
		{`{"y": "1s"}`, `y: "1s" is not a number`},
		{`{"y": [1]}`, `y: expected an integer, got an array`},
		{`[]`, `point must be a JSON object, got an array`},
		{`{} {}`, `unexpected data after the point object at offset 4`},
		{"{\n \"y\": 1,,}", `invalid JSON at line 2, column 9`},
		{"{\"y\": \"\xff\"}", `point is not valid UTF-8`},
	} {
		var p point
		err := Decode([]byte(tc.doc), "point", pointFields(), &p)
		var e *Error
		if !errors.As(err, &e) || !strings.HasPrefix(err.Error(), tc.want) {
			t.Errorf("%q: got %v, want an *Error starting %q", tc.doc, err, tc.want)
		}
	}
}
