package logging

import (
	"reflect"
	"strings"
	"testing"

	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"

	"github.com/groveml/grove/grovepb"
	"github.com/groveml/grove/servables"
)

func TestBytesTensorsRoundTripThroughTheEvent(t *testing.T) {
	s, err := servables.NewStringTensor("String", []int64{2, 2}, []string{"human1", "human", "monster16", "\x00\xff"})
	if err != nil {
		t.Fatal(err)
	}
	ps := TensorsToProto([]servables.Tensor{s})
	if ps[0].GetDatatype() != "BYTES" || len(ps[0].GetBytesData()) != 4 || string(ps[0].GetBytesData()[2]) != "monster16" || ps[0].GetRawData() != nil {
		t.Fatalf("event tensor %v", ps[0])
	}
	ev := &grovepb.PredictionEvent{Inputs: ps}
	for name, codec := range map[string]struct {
		marshal   func(*grovepb.PredictionEvent) ([]byte, error)
		unmarshal func([]byte, *grovepb.PredictionEvent) error
	}{
		"proto": {func(e *grovepb.PredictionEvent) ([]byte, error) { return proto.Marshal(e) }, func(b []byte, e *grovepb.PredictionEvent) error { return proto.Unmarshal(b, e) }},
		"json":  {func(e *grovepb.PredictionEvent) ([]byte, error) { return protojson.Marshal(e) }, func(b []byte, e *grovepb.PredictionEvent) error { return protojson.Unmarshal(b, e) }},
	} {
		b, err := codec.marshal(ev)
		if err != nil {
			t.Fatal(err)
		}
		if name == "json" && !strings.Contains(strings.ReplaceAll(string(b), " ", ""), `"bytesData":["aHVtYW4x","aHVtYW4=","bW9uc3RlcjE2","AP8="]`) {
			t.Errorf("JSON event %s: no base64 bytesData", b)
		}
		var back grovepb.PredictionEvent
		if err := codec.unmarshal(b, &back); err != nil {
			t.Fatal(err)
		}
		ts, err := TensorsFromProto(back.GetInputs())
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if !reflect.DeepEqual(ts[0], s) {
			t.Fatalf("%s: tensor comes back as %+v, want %+v", name, ts[0], s)
		}
	}
}

func TestBytesTensorsFromProtoCheckTheirElements(t *testing.T) {
	framed := servables.AppendStringElement(servables.AppendStringElement(nil, "a"), "bc")
	if ts, err := TensorsFromProto([]*grovepb.Tensor{{Datatype: "BYTES", Shape: []int64{2}, RawData: framed}}); err != nil || string(ts[0].Data) != string(framed) {
		t.Fatalf("raw_data in OIP framing: %v, %v", ts, err)
	}
	for _, tc := range []struct {
		p    *grovepb.Tensor
		want string
	}{
		{&grovepb.Tensor{Datatype: "BYTES", Shape: []int64{3}, BytesData: [][]byte{[]byte("a")}}, "1 values for shape [3] (3 elements) of BYTES"},
		{&grovepb.Tensor{Datatype: "BYTES", Shape: []int64{3}, RawData: framed}, "raw_data: BYTES data holds 2 element(s), the shape needs 3"},
	} {
		if _, err := TensorsFromProto([]*grovepb.Tensor{tc.p}); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("TensorsFromProto(%v) = %v, want %q", tc.p, err, tc.want)
		}
	}
}
