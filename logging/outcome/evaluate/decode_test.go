package evaluate

import (
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/groveml/grove/conf"
	"github.com/groveml/grove/grovepb"
	"github.com/groveml/grove/logging"
)

// fullEvent is a shadow event at FULL with every field set.
func fullEvent() *grovepb.PredictionEvent {
	return &grovepb.PredictionEvent{EventId: "e1", Timestamp: timestamppb.New(time.Unix(1700000000, 5)), RequestId: "r1", Api: "forestflow",
		ModelPath: "m/", ModelChecksum: "abc", Contract: "ads/pctr/1", ReleaseVersion: "v2", Served: false,
		Inputs:  []*grovepb.Tensor{{Name: "x", Datatype: "FP32", Shape: []int64{1, 64}, FloatData: make([]float32, 64)}},
		Configs: map[string]string{"user": "u1"},
		Outputs: []*grovepb.Tensor{{Name: "output_0", Datatype: "FP32", Shape: []int64{1, 1}, FloatData: []float32{0.25}}},
		Error:   &grovepb.Error{Type: "execution", Message: "m"}, QueueLatency: durationpb.New(time.Millisecond), ComputeLatency: durationpb.New(time.Millisecond),
		ServerInstanceId: "h/1", ComparedRequestId: "r1", ComparedReleaseVersion: "v1",
		Comparison: &grovepb.ShadowComparison{Tolerance: 0.01}, Item: 3, RequestTimestamp: timestamppb.New(time.Unix(1699999998, 7))}
}

// joinView is ev with only the join's fields.
func joinView(ev *grovepb.PredictionEvent) *grovepb.PredictionEvent {
	return &grovepb.PredictionEvent{EventId: ev.EventId, Timestamp: ev.Timestamp, RequestId: ev.RequestId, ModelPath: ev.ModelPath,
		Contract: ev.Contract, ReleaseVersion: ev.ReleaseVersion, Served: ev.Served, Outputs: ev.Outputs, Error: ev.Error, Item: ev.Item,
		RequestTimestamp: ev.RequestTimestamp}
}

func TestDecodeEventKeepsTheJoinFieldsOfEitherEncoding(t *testing.T) {
	ev := fullEvent()
	var dec eventDecoder
	for _, enc := range []conf.Encoding{conf.EncodingProto, conf.EncodingJSON} {
		v, err := logging.Encode(ev, enc)
		if err != nil {
			t.Fatal(err)
		}
		name := map[conf.Encoding]string{conf.EncodingProto: logging.EncodingProto, conf.EncodingJSON: logging.EncodingJSON}[enc]
		got, err := dec.decode(v, []kgo.RecordHeader{{Key: logging.HeaderEncoding, Value: []byte(name)}})
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		want := joinView(ev)
		if enc == conf.EncodingJSON {
			want = ev // JSON is decoded whole
		}
		if !proto.Equal(got, want) {
			t.Errorf("%s:\n got %v\nwant %v", name, got, want)
		}
	}
	if _, err := dec.decode([]byte{0x0a, 0x05, 'a'}, nil); err == nil {
		t.Error("a truncated event decoded")
	}
	if _, err := dec.decode(nil, []kgo.RecordHeader{{Key: logging.HeaderSchema, Value: []byte("grove.v1.Outcome")}}); err == nil {
		t.Error("another schema decoded")
	}
}

// FuzzDecodeEvent: whatever logging.Decode reads as protobuf, eventDecoder
// reads as its join fields; nothing panics.
func FuzzDecodeEvent(f *testing.F) {
	v, _ := logging.Encode(fullEvent(), conf.EncodingProto)
	f.Add(v)
	f.Add([]byte{})
	f.Add([]byte{0x0a, 0x05, 'a'})
	f.Add([]byte(`{"eventId": "e"}`))
	var dec eventDecoder
	f.Fuzz(func(t *testing.T, value []byte) {
		got, err := dec.decode(value, nil)
		full, ferr := logging.Decode(value, nil)
		if ferr != nil {
			return
		}
		if err != nil {
			t.Fatalf("logging.Decode reads it, eventDecoder: %v", err)
		}
		if len(value) > 0 && value[0] == '{' {
			return
		}
		// Unknown fields (a known field of the wrong wire type among them)
		// are no join field: eventDecoder skips them, in the event and in
		// its messages.
		want := joinView(full)
		dropUnknown(got.ProtoReflect())
		dropUnknown(want.ProtoReflect())
		if !proto.Equal(got, want) {
			t.Fatalf("got %v\nwant %v", got, want)
		}
	})
}

// dropUnknown clears the unknown fields of m and of the messages it
// holds.
func dropUnknown(m protoreflect.Message) {
	m.SetUnknown(nil)
	m.Range(func(fd protoreflect.FieldDescriptor, v protoreflect.Value) bool {
		switch {
		case fd.Message() == nil || fd.IsMap():
		case fd.IsList():
			for i := range v.List().Len() {
				dropUnknown(v.List().Get(i).Message())
			}
		default:
			dropUnknown(v.Message())
		}
		return true
	})
}
