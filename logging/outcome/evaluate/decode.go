package evaluate

import (
	"bytes"
	"fmt"

	"github.com/twmb/franz-go/pkg/kgo"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"

	"github.com/groveml/grove/grovepb"
	"github.com/groveml/grove/logging"
)

// joinFields are the PredictionEvent fields the join reads: event_id,
// timestamp, request_id, model_path, contract, release_version, served,
// outputs, error and item. The inputs, configs and shadow comparison of
// an event at FULL are most of its bytes, and the join never reads them.
var joinFields = [...]bool{1: true, 2: true, 3: true, 5: true, 7: true, 8: true, 9: true, 12: true, 13: true, 20: true}

// decodeEvent decodes a prediction log record for the join: as
// logging.Decode does, but a protobuf value is decoded from its join
// fields only, so the evaluator neither allocates nor copies an event's
// inputs.
func decodeEvent(value []byte, headers []kgo.RecordHeader, scratch *[]byte) (*grovepb.PredictionEvent, error) {
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
	if v := bytes.TrimLeft(value, " \t\r\n"); !proto3 || (len(v) > 0 && v[0] == '{') {
		return logging.Decode(value, headers)
	}
	kept := (*scratch)[:0]
	for b := value; len(b) > 0; {
		num, typ, n := protowire.ConsumeTag(b)
		if n < 0 {
			return nil, fmt.Errorf("prediction event: %w", protowire.ParseError(n))
		}
		m := protowire.ConsumeFieldValue(num, typ, b[n:])
		if m < 0 {
			return nil, fmt.Errorf("prediction event field %d: %w", num, protowire.ParseError(m))
		}
		if int(num) < len(joinFields) && joinFields[num] {
			kept = append(kept, b[:n+m]...)
		}
		b = b[n+m:]
	}
	*scratch = kept
	ev := new(grovepb.PredictionEvent)
	if err := proto.Unmarshal(kept, ev); err != nil {
		return nil, err
	}
	return ev, nil
}
