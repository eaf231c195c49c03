// Package outcome reads and checks grove.v1.Outcome messages, what
// happened after predictions (grovepb/proto/grove/v1/outcome.proto says
// what each field means), whichever way they come in: one JSON object
// (ParseJSON), a JSON array of them (ParseArray), JSON lines
// (ParseLines), protobuf bytes (ParseProto), or a record of the outcome
// topic (DecodeRecord). Validate checks one and fills in its event time;
// Record makes its Kafka record (key, headers, value), and Writer
// produces outcomes and waits for the broker's acknowledgement.
//
// Typical use, for a body of outcomes received at now:
//
//	items, err := outcome.ParseArray(body)
//	if err != nil { ... } // not a JSON array: nothing to take
//	for i := range items {
//		if items[i].Err == nil {
//			items[i].Err = outcome.Validate(items[i].Outcome, now)
//		}
//	}
//
// The package holds no state: a Writer holds only its producer and topic.
package outcome

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/groveml/grove/grovepb"
	"github.com/groveml/grove/logging"
)

// SchemaName is the full protobuf name of the outcome topic's record
// value, the value of its grove-schema header (logging.HeaderSchema).
const SchemaName = "grove.v1.Outcome"

// MaxIDBytes is the longest outcome_id and request_id, in bytes (the
// longest X-Request-Id Grove takes from a caller).
const MaxIDBytes = 128

// Item is one outcome of a body, at its position among the body's
// outcomes (from 0, the index answers name): the outcome, or why it could
// not be read (Err set, Outcome nil).
type Item struct {
	Outcome *grovepb.Outcome
	Err     error
}

// ParseJSON decodes one outcome from a JSON object: its fields by their
// .proto names or protojson's lowerCamelCase ones, event_time an RFC 3339
// string ("2026-05-01T12:00:00Z", any offset), labels an object of JSON
// numbers, item and row numbers or decimal strings, null for a field's
// default. An unknown field is an error, so that a misspelt one
// ("lables") is not dropped unseen. Each error names its field. It does
// not validate the outcome (Validate).
func ParseJSON(data []byte) (*grovepb.Outcome, error) {
	return decodeJSON(data, true)
}

// ParseProto decodes one outcome from its binary protobuf encoding. It
// does not validate it (Validate).
func ParseProto(data []byte) (*grovepb.Outcome, error) {
	o := new(grovepb.Outcome)
	if err := proto.Unmarshal(data, o); err != nil {
		return nil, fmt.Errorf("not a protobuf grove.v1.Outcome: %w", err)
	}
	return o, nil
}

// ParseArray decodes a JSON array of outcomes, each on its own: an
// element that is not an outcome is an Item with Err, and the others are
// still read. The error is for a body that is not a JSON array at all (or
// is not well-formed JSON), of which nothing is read.
func ParseArray(data []byte) ([]Item, error) {
	var raw []json.RawMessage
	if err := json.Unmarshal(data, &raw); err != nil {
		var te *json.UnmarshalTypeError
		if errors.As(err, &te) {
			return nil, fmt.Errorf("the body is JSON %s, not an array of outcomes", te.Value)
		}
		return nil, fmt.Errorf("the body is not a JSON array of outcomes: %w", err)
	}
	items := make([]Item, len(raw))
	for i, r := range raw {
		items[i].Outcome, items[i].Err = ParseJSON(r)
	}
	return items, nil
}

// ParseLines decodes JSON lines (application/x-ndjson): one outcome a
// line, each on its own, as ParseArray does its elements. Lines of spaces
// alone are skipped and do not count: an Item's position is the
// outcome's among the others. A "\r" before a line's "\n" is allowed.
func ParseLines(data []byte) []Item {
	var items []Item
	for len(data) > 0 {
		line := data
		if i := bytes.IndexByte(data, '\n'); i >= 0 {
			line, data = data[:i], data[i+1:]
		} else {
			data = nil
		}
		if len(bytes.TrimSpace(line)) == 0 {
			continue
		}
		var it Item
		it.Outcome, it.Err = ParseJSON(line)
		items = append(items, it)
	}
	return items
}

// Limits on an outcome's values (Validate).
const (
	// MaxEventTimeAhead is how far after its receipt an outcome's
	// event_time may be (clocks differ).
	MaxEventTimeAhead = time.Hour
	// MaxLabel is the largest magnitude of a label's value.
	MaxLabel = 1e15
)

// Validate checks o, and sets its event_time to now when it has none.
// Each error names the field it is about ("labels: ..."):
//   - outcome_id is required, at most MaxIDBytes;
//   - exactly one of request_id (at most MaxIDBytes) and key is set;
//   - item and row are not negative, and are 0 with key;
//   - event_time, when set, is a valid timestamp, not before 1970 and at
//     most MaxEventTimeAhead after now (an outcome from the future would
//     be kept past every window);
//   - labels has at least one label, each with a non-empty name and a
//     finite value of at most MaxLabel in magnitude (larger ones would
//     overflow the sums of squares of numeric outcomes).
//
// Strings are valid UTF-8 already: ParseJSON and ParseProto refuse others.
func Validate(o *grovepb.Outcome, now time.Time) error {
	switch {
	case o == nil:
		return errors.New("no outcome")
	case o.OutcomeId == "":
		return errors.New("outcome_id: required")
	case len(o.OutcomeId) > MaxIDBytes:
		return fmt.Errorf("outcome_id: %d bytes, more than %d", len(o.OutcomeId), MaxIDBytes)
	case o.RequestId == "" && o.Key == "":
		return errors.New("request_id, key: one is required (request_id with item and row, or the prediction log's record key)")
	case o.RequestId != "" && o.Key != "":
		return errors.New("request_id, key: both are set; give one")
	case len(o.RequestId) > MaxIDBytes:
		return fmt.Errorf("request_id: %d bytes, more than %d", len(o.RequestId), MaxIDBytes)
	case o.Item < 0:
		return fmt.Errorf("item: %d is negative", o.Item)
	case o.Row < 0:
		return fmt.Errorf("row: %d is negative", o.Row)
	case o.Key != "" && o.Item != 0:
		return errors.New("item: only with request_id, not with key")
	case o.Key != "" && o.Row != 0:
		return errors.New("row: only with request_id, not with key")
	case len(o.Labels) == 0:
		return errors.New("labels: at least one is required ({\"click\": 1})")
	}
	if o.EventTime != nil {
		if err := o.EventTime.CheckValid(); err != nil {
			return fmt.Errorf("event_time: %w", err)
		}
		switch t := o.EventTime.AsTime(); {
		case t.Before(time.Unix(0, 0)):
			return fmt.Errorf("event_time: %s is before 1970", t.Format(time.RFC3339))
		case t.After(now.Add(MaxEventTimeAhead)):
			return fmt.Errorf("event_time: %s is more than %v after the time it was received (%s)",
				t.Format(time.RFC3339), MaxEventTimeAhead, now.UTC().Format(time.RFC3339))
		}
	}
	var bad []string
	for name, v := range o.Labels {
		switch {
		case name == "":
			bad = append(bad, "a label's name is empty")
		case math.IsNaN(v) || math.IsInf(v, 0):
			bad = append(bad, fmt.Sprintf("%q is %v, not a finite number", name, v))
		case math.Abs(v) > MaxLabel:
			bad = append(bad, fmt.Sprintf("%q is %v, more than %g in magnitude", name, v, MaxLabel))
		}
	}
	if len(bad) > 0 {
		slices.Sort(bad) // not map order: the message is the same every time
		return fmt.Errorf("labels: %s", strings.Join(bad, "; "))
	}
	if o.EventTime == nil {
		o.EventTime = timestamppb.New(now)
	}
	return nil
}

// Key is o's record key: the join key, request_id, or key when it has
// none.
func Key(o *grovepb.Outcome) []byte {
	if o.RequestId != "" {
		return []byte(o.RequestId)
	}
	return []byte(o.Key)
}

// recordHeaders are the headers of every record Record makes; records
// share the slice, which nothing modifies.
var recordHeaders = []kgo.RecordHeader{
	{Key: logging.HeaderContentType, Value: []byte(logging.ContentTypeProto)},
	{Key: logging.HeaderEncoding, Value: []byte(logging.EncodingProto)},
	{Key: logging.HeaderSchema, Value: []byte(SchemaName)},
}

// Record is o's record on topic: keyed by Key, the value o in binary
// protobuf, with the headers content-type, grove-encoding and
// grove-schema (outcome.proto describes them).
func Record(o *grovepb.Outcome, topic string) (*kgo.Record, error) {
	value, err := proto.Marshal(o)
	if err != nil {
		return nil, fmt.Errorf("encoding the outcome: %w", err)
	}
	return &kgo.Record{Topic: topic, Key: Key(o), Value: value, Headers: recordHeaders}, nil
}

// DecodeRecord decodes a record value of the outcome topic, in the
// encoding its grove-encoding header names (proto or json); without that
// header, a value whose first non-space byte is '{' is JSON and anything
// else protobuf. A grove-schema header naming another message is an
// error. Unknown fields are ignored, so records of a newer producer
// decode; JSON is read as ParseJSON reads it. It does not validate the
// outcome (Validate).
func DecodeRecord(value []byte, headers []kgo.RecordHeader) (*grovepb.Outcome, error) {
	encoding := ""
	for _, h := range headers {
		switch h.Key {
		case logging.HeaderEncoding:
			encoding = string(h.Value)
		case logging.HeaderSchema:
			if string(h.Value) != SchemaName {
				return nil, fmt.Errorf("record schema %q is not %s", h.Value, SchemaName)
			}
		}
	}
	if encoding == "" {
		encoding = logging.EncodingProto
		if v := bytes.TrimLeft(value, " \t\r\n"); len(v) > 0 && v[0] == '{' {
			encoding = logging.EncodingJSON
		}
	}
	switch encoding {
	case logging.EncodingProto:
		return ParseProto(value)
	case logging.EncodingJSON:
		return decodeJSON(value, false)
	}
	return nil, fmt.Errorf("unknown record encoding %q (want %s or %s)", encoding, logging.EncodingProto, logging.EncodingJSON)
}
