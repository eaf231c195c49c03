package evaluate

import (
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/groveml/grove/grovepb"
	"github.com/groveml/grove/logging"
	"github.com/groveml/grove/logging/outcome"
)

// fullOutcome is an outcome with every field set.
func fullOutcome() *grovepb.Outcome {
	return &grovepb.Outcome{OutcomeId: "o1", RequestId: "r1", Item: 2, Row: 3, EventTime: timestamppb.New(time.Unix(1700000000, 7)),
		Labels: map[string]float64{"click": 1, "value": 12.5}, ModelPath: "pctr_v1/", Contract: "ads/pctr/1"}
}

func TestOutcomeDecoderReadsEveryRecordAsOutcomeDecodeRecordDoes(t *testing.T) {
	o := fullOutcome()
	pb, err := proto.Marshal(o)
	if err != nil {
		t.Fatal(err)
	}
	js := []byte(` {"outcome_id": "o1", "request_id": "r1", "item": 2, "row": 3, "event_time": "2023-11-14T22:13:20.000000007Z",
		"labels": {"click": 1, "value": 12.5}, "model_path": "pctr_v1/", "contract": "ads/pctr/1"}`)
	enc := func(v string) kgo.RecordHeader {
		return kgo.RecordHeader{Key: logging.HeaderEncoding, Value: []byte(v)}
	}
	schema := func(v string) kgo.RecordHeader { return kgo.RecordHeader{Key: logging.HeaderSchema, Value: []byte(v)} }
	var d outcomeDecoder
	for _, c := range []struct {
		name    string
		value   []byte
		headers []kgo.RecordHeader
		proto   bool
	}{
		{"proto, no header", pb, nil, true},
		{"proto, named", pb, []kgo.RecordHeader{enc(logging.EncodingProto), schema(outcome.SchemaName)}, true},
		{"json, no header", js, nil, false},
		{"json, named", js, []kgo.RecordHeader{enc(logging.EncodingJSON)}, false},
		{"json named proto", js, []kgo.RecordHeader{enc(logging.EncodingProto)}, true},
		{"another encoding", pb, []kgo.RecordHeader{enc("avro")}, false},
		{"another schema", pb, []kgo.RecordHeader{schema(logging.SchemaName)}, false},
		{"another schema, then proto", pb, []kgo.RecordHeader{schema(logging.SchemaName), enc(logging.EncodingProto)}, false},
		{"proto, then another schema", pb, []kgo.RecordHeader{enc(logging.EncodingProto), schema(logging.SchemaName)}, false},
		{"another encoding, then proto", pb, []kgo.RecordHeader{enc("avro"), enc(logging.EncodingProto)}, true},
		{"truncated", pb[:len(pb)-3], nil, true},
	} {
		want, werr := outcome.DecodeRecord(c.value, c.headers)
		got, isProto, err := d.record(c.value, c.headers)
		if (err != nil) != (werr != nil) || isProto != c.proto {
			t.Errorf("%s: error %v, protobuf %v; DecodeRecord's error %v", c.name, err, isProto, werr)
			continue
		}
		if err == nil && !proto.Equal(got, want) {
			t.Errorf("%s:\n got %v\nwant %v", c.name, got, want)
		}
	}
	// The decoder's outcome is reused: nothing of the last one is left.
	got, err := d.decode(nil)
	if err != nil || !proto.Equal(got, &grovepb.Outcome{}) {
		t.Fatalf("an empty value: %v %v", got, err)
	}
}

// FuzzDecodeOutcome: outcomeDecoder reads a protobuf value as
// outcome.ParseProto does, or fails when it does; nothing panics.
func FuzzDecodeOutcome(f *testing.F) {
	pb, _ := proto.Marshal(fullOutcome())
	f.Add(pb)
	f.Add([]byte{})
	f.Add([]byte{0x3a, 0x04, 0x0a, 0x02, 'c', 'k'}) // a label without a value
	f.Add([]byte{0x0a, 0x02, 0xff, 0xfe})           // an outcome_id not UTF-8
	var d outcomeDecoder
	f.Fuzz(func(t *testing.T, value []byte) {
		want, werr := outcome.ParseProto(value)
		got, err := d.decode(value)
		if (err != nil) != (werr != nil) {
			t.Fatalf("error %v, ParseProto's %v", err, werr)
		}
		if err != nil {
			return
		}
		dropUnknown(want.ProtoReflect())
		dropUnknown(got.ProtoReflect())
		if !proto.Equal(got, want) {
			t.Fatalf("got %v\nwant %v", got, want)
		}
	})
}
