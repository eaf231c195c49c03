package evaluate

import (
	"errors"
	"fmt"
	"math"
	"strings"
	"unicode/utf8"

	"github.com/twmb/franz-go/pkg/kgo"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/groveml/grove/grovepb"
	"github.com/groveml/grove/logging"
)

// eventDecoder decodes prediction log records for the join: as
// logging.Decode does, but a protobuf value is decoded from the fields
// the join reads only (event_id, timestamp, request_id, model_path,
// contract, release_version, served, outputs, error, item and
// request_timestamp), without reflection, and the names that recur
// (model paths, contracts, releases, tensor names and types) are kept
// once: an event logged at FULL is mostly its inputs, which the
// evaluator neither decodes nor copies. The event it returns from a
// protobuf value is its own, and valid until the next call (the join
// keeps none of it). Not safe for concurrent use.
type eventDecoder struct {
	// names are the names seen, each kept once.
	names nameTable
	// ev, ts, rts, err and tensors are what decode returns, reused.
	ev      grovepb.PredictionEvent
	ts, rts timestamppb.Timestamp
	err     grovepb.Error
	tensors []*grovepb.Tensor
}

// nameTable keeps the names that recur from record to record once each,
// up to maxNames. The zero value is ready.
type nameTable map[string]string

// maxNames bounds a nameTable: past it, names are allocated each time (a
// producer logging endless distinct names costs no memory).
const maxNames = 4096

// decode decodes one record's value.
func (d *eventDecoder) decode(value []byte, headers []kgo.RecordHeader) (*grovepb.PredictionEvent, error) {
	proto3 := true
	for _, h := range headers {
		switch h.Key {
		case logging.HeaderEncoding:
			proto3 = string(h.Value) == logging.EncodingProto
		case logging.HeaderSchema:
			if string(h.Value) != logging.SchemaName {
				return nil, fmt.Errorf("record schema %q is not %s", h.Value, logging.SchemaName)
			}
		}
	}
	if !proto3 || looksJSON(value) {
		return logging.Decode(value, headers)
	}
	ev := &d.ev
	*ev = grovepb.PredictionEvent{Outputs: ev.Outputs[:0]}
	if err := d.event(ev, value); err != nil {
		return nil, fmt.Errorf("decoding proto prediction event: %w", err)
	}
	return ev, nil
}

// tensor returns the tensor for output i of the event being decoded, empty.
func (d *eventDecoder) output(i int) *grovepb.Tensor {
	if i == len(d.tensors) {
		d.tensors = append(d.tensors, new(grovepb.Tensor))
	}
	t := d.tensors[i]
	*t = grovepb.Tensor{Shape: t.Shape[:0], FloatData: t.FloatData[:0], DoubleData: t.DoubleData[:0],
		Int32Data: t.Int32Data[:0], Int64Data: t.Int64Data[:0]}
	return t
}

// looksJSON reports whether value's first byte after any spaces, tabs and
// line breaks is '{', as logging.Decode tells JSON from protobuf (without
// bytes.TrimLeft's cost per record).
func looksJSON(value []byte) bool {
	for _, c := range value {
		switch c {
		case ' ', '\t', '\r', '\n':
			continue
		}
		return c == '{'
	}
	return false
}

// errInvalidUTF8 is protobuf's refusal of a string field that is not
// UTF-8.
var errInvalidUTF8 = errors.New("string field contains invalid UTF-8")

// fields walks the fields of message b, calling fn with each field's
// number, wire type and value (the bytes after its tag, of the field's
// length); fn returns the bytes it consumed of them, or -1 for a field
// it does not read (of another number, or of an unexpected wire type),
// which is skipped as protobuf skips an unknown field.
func fields(b []byte, fn func(num protowire.Number, typ protowire.Type, v []byte) (int, error)) error {
	for len(b) > 0 {
		num, typ, n := protowire.ConsumeTag(b)
		if n < 0 {
			return protowire.ParseError(n)
		}
		if num > protowire.MaxValidNumber {
			// As protobuf refuses it (ConsumeTag takes numbers up to the
			// larger ones of message sets).
			return fmt.Errorf("field number %d out of range", num)
		}
		b = b[n:]
		m, err := fn(num, typ, b)
		if err != nil {
			return fmt.Errorf("field %d: %w", num, err)
		}
		if m < 0 {
			if m = protowire.ConsumeFieldValue(num, typ, b); m < 0 {
				return fmt.Errorf("field %d: %w", num, protowire.ParseError(m))
			}
		}
		b = b[m:]
	}
	return nil
}

// bytesField reads a length-delimited value.
func bytesField(b []byte) ([]byte, int, error) {
	v, n := protowire.ConsumeBytes(b)
	if n < 0 {
		return nil, 0, protowire.ParseError(n)
	}
	return v, n, nil
}

// varintField reads a varint.
func varintField(b []byte) (uint64, int, error) {
	v, n := protowire.ConsumeVarint(b)
	if n < 0 {
		return 0, 0, protowire.ParseError(n)
	}
	return v, n, nil
}

// str reads a string field as a new string.
func str(b []byte) (string, int, error) {
	v, n, err := utf8Field(b)
	return string(v), n, err
}

// utf8Field reads a string field's bytes, which must be UTF-8.
func utf8Field(b []byte) ([]byte, int, error) {
	v, n, err := bytesField(b)
	if err != nil {
		return nil, 0, err
	}
	if !utf8.Valid(v) {
		return nil, 0, errInvalidUTF8
	}
	return v, n, nil
}

// name reads a string field that recurs from event to event, kept once.
func (d *eventDecoder) name(b []byte) (string, int, error) { return d.names.field(b) }

// field reads a string field, kept once in t.
func (t *nameTable) field(b []byte) (string, int, error) {
	v, n, err := bytesField(b)
	if err != nil {
		return "", 0, err
	}
	if s, ok := (*t)[string(v)]; ok {
		return s, n, nil
	}
	if !utf8.Valid(v) {
		return "", 0, errInvalidUTF8
	}
	s := string(v)
	if *t == nil {
		*t = nameTable{}
	}
	if len(*t) < maxNames {
		(*t)[s] = s
	}
	return s, n, nil
}

// event decodes the join fields of a PredictionEvent into ev. Its two
// ids, which differ from event to event, are one string (one
// allocation).
func (d *eventDecoder) event(ev *grovepb.PredictionEvent, b []byte) error {
	var eventID, requestID []byte
	err := fields(b, func(num protowire.Number, typ protowire.Type, b []byte) (n int, err error) {
		switch {
		case typ == protowire.BytesType && num == 1:
			eventID, n, err = utf8Field(b)
		case typ == protowire.BytesType && num == 2:
			n, err = timestampField(&ev.Timestamp, &d.ts, b)
		case typ == protowire.BytesType && num == 3:
			requestID, n, err = utf8Field(b)
		case typ == protowire.BytesType && num == 5:
			ev.ModelPath, n, err = d.name(b)
		case typ == protowire.BytesType && num == 7:
			ev.Contract, n, err = d.name(b)
		case typ == protowire.BytesType && num == 8:
			ev.ReleaseVersion, n, err = d.name(b)
		case typ == protowire.VarintType && num == 9:
			var v uint64
			v, n, err = varintField(b)
			ev.Served = v != 0
		case typ == protowire.BytesType && num == 12:
			var v []byte
			if v, n, err = bytesField(b); err == nil {
				t := d.output(len(ev.Outputs))
				err = d.tensor(t, v)
				ev.Outputs = append(ev.Outputs, t)
			}
		case typ == protowire.BytesType && num == 13:
			var v []byte
			if v, n, err = bytesField(b); err == nil {
				if ev.Error == nil {
					d.err = grovepb.Error{}
					ev.Error = &d.err
				}
				err = d.errorMessage(ev.Error, v)
			}
		case typ == protowire.VarintType && num == 20:
			var v uint64
			v, n, err = varintField(b)
			ev.Item = int64(v)
		case typ == protowire.BytesType && num == 21:
			n, err = timestampField(&ev.RequestTimestamp, &d.rts, b)
		default:
			return -1, nil
		}
		return n, err
	})
	if err != nil || len(eventID)+len(requestID) == 0 {
		return err
	}
	var ids strings.Builder
	ids.Grow(len(eventID) + len(requestID))
	ids.Write(eventID)
	ids.Write(requestID)
	s := ids.String()
	ev.EventId, ev.RequestId = s[:len(eventID)], s[len(eventID):]
	return nil
}

// timestampField decodes the Timestamp field whose value starts b into
// *dst, setting *dst to into (cleared) first when it is nil, and returns
// the bytes it consumed.
func timestampField(dst **timestamppb.Timestamp, into *timestamppb.Timestamp, b []byte) (int, error) {
	v, n, err := bytesField(b)
	if err != nil {
		return n, err
	}
	if *dst == nil {
		*into = timestamppb.Timestamp{}
		*dst = into
	}
	return n, timestamp(*dst, v)
}

// timestamp decodes a google.protobuf.Timestamp into ts (merging, as
// protobuf does a message field that comes twice).
func timestamp(ts *timestamppb.Timestamp, b []byte) error {
	return fields(b, func(num protowire.Number, typ protowire.Type, b []byte) (int, error) {
		if typ != protowire.VarintType || (num != 1 && num != 2) {
			return -1, nil
		}
		v, n, err := varintField(b)
		if num == 1 {
			ts.Seconds = int64(v)
		} else {
			ts.Nanos = int32(v)
		}
		return n, err
	})
}

// errorMessage decodes a grove.v1.Error into e.
func (d *eventDecoder) errorMessage(e *grovepb.Error, b []byte) error {
	return fields(b, func(num protowire.Number, typ protowire.Type, b []byte) (n int, err error) {
		switch {
		case typ == protowire.BytesType && num == 1:
			e.Type, n, err = d.name(b)
		case typ == protowire.BytesType && num == 2:
			e.Message, n, err = str(b)
		default:
			return -1, nil
		}
		return n, err
	})
}

// tensor decodes a grove.v1.Tensor into t; its repeated numbers packed or
// not, as protobuf reads them.
func (d *eventDecoder) tensor(t *grovepb.Tensor, b []byte) error {
	return fields(b, func(num protowire.Number, typ protowire.Type, b []byte) (n int, err error) {
		switch {
		case typ == protowire.BytesType && num == 1:
			t.Name, n, err = d.name(b)
		case typ == protowire.BytesType && num == 2:
			t.Datatype, n, err = d.name(b)
		case num == 3:
			n, err = repeated(typ, protowire.VarintType, b, func(v []byte) int {
				x, m := protowire.ConsumeVarint(v)
				t.Shape = append(t.Shape, int64(x))
				return m
			})
		case typ == protowire.BytesType && num == 4:
			var v []byte
			if v, n, err = bytesField(b); err == nil {
				t.RawData = append(t.RawData[:0:0], v...)
			}
		case num == 5:
			n, err = repeated(typ, protowire.Fixed32Type, b, func(v []byte) int {
				x, m := protowire.ConsumeFixed32(v)
				t.FloatData = append(t.FloatData, math.Float32frombits(x))
				return m
			})
		case num == 6:
			n, err = repeated(typ, protowire.Fixed64Type, b, func(v []byte) int {
				x, m := protowire.ConsumeFixed64(v)
				t.DoubleData = append(t.DoubleData, math.Float64frombits(x))
				return m
			})
		case num == 7:
			n, err = repeated(typ, protowire.VarintType, b, func(v []byte) int {
				x, m := protowire.ConsumeVarint(v)
				t.Int32Data = append(t.Int32Data, int32(x))
				return m
			})
		case num == 8:
			n, err = repeated(typ, protowire.VarintType, b, func(v []byte) int {
				x, m := protowire.ConsumeVarint(v)
				t.Int64Data = append(t.Int64Data, int64(x))
				return m
			})
		case typ == protowire.BytesType && num == 9:
			var v []byte
			if v, n, err = bytesField(b); err == nil {
				t.BytesData = append(t.BytesData, append([]byte{}, v...))
			}
		default:
			return -1, nil
		}
		return n, err
	})
}

// repeated reads a repeated number field of wire type elem: packed (a
// length-delimited run of them) or one element; one reads an element and
// returns its length, negative when it does not parse. A field of any
// other wire type is unknown (-1).
func repeated(typ, elem protowire.Type, b []byte, one func([]byte) int) (int, error) {
	switch typ {
	case elem:
		n := one(b)
		if n < 0 {
			return 0, protowire.ParseError(n)
		}
		return n, nil
	case protowire.BytesType:
		v, n, err := bytesField(b)
		if err != nil {
			return 0, err
		}
		for len(v) > 0 {
			m := one(v)
			if m < 0 {
				return 0, protowire.ParseError(m)
			}
			v = v[m:]
		}
		return n, nil
	}
	return -1, nil
}
