package outcome

import (
	"bytes"
	"encoding/json"
	"fmt"
	"maps"
	"math"
	"slices"
	"strconv"
	"time"
	"unicode/utf8"

	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/groveml/grove/grovepb"
	"github.com/groveml/grove/internal/jsonscan"
)

// jsonFields maps each name a JSON outcome may give a field, the .proto
// name and protojson's lowerCamelCase one, to the .proto name.
var jsonFields = map[string]string{
	"outcome_id": "outcome_id", "outcomeId": "outcome_id",
	"request_id": "request_id", "requestId": "request_id",
	"item": "item", "row": "row", "key": "key",
	"event_time": "event_time", "eventTime": "event_time",
	"labels":     "labels",
	"model_path": "model_path", "modelPath": "model_path",
	"contract": "contract",
}

// decodeJSON decodes one JSON outcome, field by field, each error naming
// its field: what protojson reads (the two names of each field, item and
// row as numbers or decimal strings, event_time an RFC 3339 string, null
// for a field's default), but labels only as JSON numbers, and, as
// protojson, no string that is not UTF-8. An unknown field is an error
// when strict, else ignored.
func decodeJSON(data []byte, strict bool) (*grovepb.Outcome, error) {
	var fields map[string]json.RawMessage
	if err := json.Unmarshal(data, &fields); err != nil {
		return nil, fmt.Errorf("not a JSON outcome: %w", jsonError(err))
	}
	if fields == nil {
		return nil, fmt.Errorf("not a JSON outcome: null")
	}
	o := new(grovepb.Outcome)
	// In a fixed order, so that the first of several errors is the same
	// every time.
	for _, name := range slices.Sorted(maps.Keys(fields)) {
		raw := fields[name]
		field, known := jsonFields[name]
		if !known {
			if strict {
				return nil, fmt.Errorf("unknown field %q", name)
			}
			continue
		}
		if bytes.Equal(raw, []byte("null")) {
			continue
		}
		// encoding/json reads a byte that is not UTF-8 as U+FFFD: the
		// outcome would name another request, key or label than sent.
		if !utf8.Valid(raw) || loneSurrogate(raw) {
			return nil, fmt.Errorf("%s: not valid UTF-8", field)
		}
		var err error
		switch field {
		case "outcome_id":
			err = jsonString(raw, &o.OutcomeId)
		case "request_id":
			err = jsonString(raw, &o.RequestId)
		case "key":
			err = jsonString(raw, &o.Key)
		case "model_path":
			err = jsonString(raw, &o.ModelPath)
		case "contract":
			err = jsonString(raw, &o.Contract)
		case "item":
			o.Item, err = jsonInt(raw)
		case "row":
			o.Row, err = jsonInt(raw)
		case "event_time":
			o.EventTime, err = jsonTime(raw)
		case "labels":
			o.Labels, err = jsonLabels(raw)
		}
		if err != nil {
			return nil, fmt.Errorf("%s: %w", field, err)
		}
	}
	return o, nil
}

// jsonError is err without encoding/json's Go type names.
func jsonError(err error) error {
	if te, ok := err.(*json.UnmarshalTypeError); ok {
		return fmt.Errorf("a JSON %s, not an object", te.Value)
	}
	return err
}

// loneSurrogate reports whether the JSON text raw escapes a UTF-16
// surrogate that is not half of a pair ("\ud800"), which encoding/json
// reads as U+FFFD and protojson refuses.
func loneSurrogate(raw []byte) bool {
	high := false // the escape before was a high surrogate
	for i := 0; i < len(raw); i++ {
		if raw[i] != '\\' || i+1 >= len(raw) {
			if high {
				return true
			}
			continue
		}
		i++
		if raw[i] != 'u' || i+4 >= len(raw) {
			if high {
				return true
			}
			continue
		}
		r, err := strconv.ParseUint(string(raw[i+1:i+5]), 16, 16)
		i += 4
		switch {
		case err != nil:
			return false // not JSON: encoding/json refuses it
		case r >= 0xd800 && r < 0xdc00:
			if high {
				return true
			}
			high = true
		case r >= 0xdc00 && r < 0xe000:
			if !high {
				return true
			}
			high = false
		default:
			if high {
				return true
			}
		}
	}
	return high
}

// jsonString reads a JSON string into *s.
func jsonString(raw json.RawMessage, s *string) error {
	if len(raw) == 0 || raw[0] != '"' {
		return fmt.Errorf("%s is not a string", clip(raw))
	}
	return json.Unmarshal(raw, s)
}

// jsonInt reads a JSON integer, or a string of one (as protojson writes
// 64-bit integers).
func jsonInt(raw json.RawMessage) (int64, error) {
	text := string(raw)
	if len(raw) > 0 && raw[0] == '"' {
		if err := json.Unmarshal(raw, &text); err != nil {
			return 0, err
		}
	}
	n, err := strconv.ParseInt(text, 10, 64)
	if err != nil {
		return 0, fmt.Errorf("%s is not a whole number", clip(raw))
	}
	return n, nil
}

// jsonTime reads an RFC 3339 time string ("2026-05-01T12:00:00Z", any
// offset, fractions of a second up to nanoseconds).
func jsonTime(raw json.RawMessage) (*timestamppb.Timestamp, error) {
	var s string
	if len(raw) == 0 || raw[0] != '"' || json.Unmarshal(raw, &s) != nil {
		return nil, fmt.Errorf("%s is not an RFC 3339 time string such as \"2026-05-01T12:00:00Z\"", clip(raw))
	}
	t, err := time.Parse(time.RFC3339Nano, s)
	if err != nil {
		return nil, fmt.Errorf("%q is not an RFC 3339 time such as \"2026-05-01T12:00:00Z\"", clip([]byte(s)))
	}
	ts := timestamppb.New(t)
	if err := ts.CheckValid(); err != nil {
		return nil, fmt.Errorf("%q: %w", s, err)
	}
	return ts, nil
}

// jsonLabels reads an object of JSON numbers.
func jsonLabels(raw json.RawMessage) (map[string]float64, error) {
	var m map[string]json.RawMessage
	if len(raw) == 0 || raw[0] != '{' || json.Unmarshal(raw, &m) != nil {
		return nil, fmt.Errorf("%s is not an object of numbers such as {\"click\": 1}", clip(raw))
	}
	labels := make(map[string]float64, len(m))
	for _, name := range slices.Sorted(maps.Keys(m)) {
		v := m[name]
		if len(v) == 0 || !(v[0] == '-' || v[0] >= '0' && v[0] <= '9') {
			return nil, fmt.Errorf("%q is %s, not a number", name, clip(v))
		}
		f, err := jsonscan.ParseFloat(v, 64)
		if err != nil || math.IsInf(f, 0) {
			return nil, fmt.Errorf("%q is %s, not a finite number", name, clip(v))
		}
		labels[name] = f
	}
	return labels, nil
}

// clip is a JSON value for an error message, cut after 64 bytes.
func clip(raw []byte) string {
	if len(raw) > 64 {
		return string(raw[:64]) + "..."
	}
	return string(raw)
}
