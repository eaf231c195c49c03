package logging

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/groveml/grove/conf"
	"github.com/groveml/grove/grovepb"
)

func sampleEvent(t *testing.T) *grovepb.PredictionEvent {
	return &grovepb.PredictionEvent{
		EventId:          "0190c0de-0000-7000-8000-000000000001",
		Timestamp:        timestamppb.New(time.Date(2026, 3, 1, 12, 0, 0, 5000, time.UTC)),
		RequestId:        "req-1",
		Api:              "ba",
		ModelPath:        "pctr_v1/",
		ModelChecksum:    "abc123",
		Served:           true,
		Inputs:           TensorsToProto(sampleTensors(t)),
		Configs:          map[string]string{"user": "u1", "campaign": "c9"},
		Outputs:          []*grovepb.Tensor{{Datatype: "FLOAT", Shape: []int64{1, 1}, FloatData: []float32{0.25}}},
		QueueLatency:     durationpb.New(125 * time.Microsecond),
		ComputeLatency:   durationpb.New(2 * time.Millisecond),
		ServerInstanceId: "host/1",
	}
}

func TestEncodeDecodeRoundTripBothEncodings(t *testing.T) {
	ev := sampleEvent(t)
	ev.Error = &grovepb.Error{Type: "MODEL_EXECUTION", Message: "boom"}
	for _, enc := range []conf.Encoding{conf.EncodingProto, conf.EncodingJSON} {
		v, err := Encode(ev, enc)
		if err != nil {
			t.Fatal(enc, err)
		}
		for _, hs := range [][]kgo.RecordHeader{recordHeaders(enc), nil} { // with headers and sniffed
			got, err := Decode(v, hs)
			if err != nil {
				t.Fatalf("%s (headers %v): %v", enc, hs != nil, err)
			}
			if !proto.Equal(got, ev) {
				t.Errorf("%s (headers %v): got %v\nwant %v", enc, hs != nil, got, ev)
			}
		}
	}
	if _, err := Encode(ev, conf.Encoding(9)); err == nil || !strings.Contains(err.Error(), "conf.Encoding(9) is not") {
		t.Errorf("encoding conf.Encoding(9): got %v, want an error", err)
	}
}

func TestEncodingHeaderIsTheConfigName(t *testing.T) {
	for enc, want := range map[conf.Encoding]string{conf.EncodingProto: EncodingProto, conf.EncodingJSON: EncodingJSON} {
		if enc.String() != want {
			t.Errorf("kafka.encoding %s is named %q in the header", enc, want)
		}
		if h := headerMap(recordHeaders(enc)); h[HeaderEncoding] != want {
			t.Errorf("%s: headers %v", enc, h)
		}
	}
}

func TestJSONEncodingIsReadableWithJq(t *testing.T) {
	v, err := Encode(sampleEvent(t), conf.EncodingJSON)
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(v), "\n") {
		t.Errorf("JSON spans lines: %s", v)
	}
	var m map[string]any
	if err := json.Unmarshal(v, &m); err != nil {
		t.Fatal(err)
	}
	// snake_case names, numbers as JSON numbers (64-bit integers as strings),
	// defaults left out.
	if m["model_path"] != "pctr_v1/" || m["served"] != true || m["queue_latency"] != "0.000125s" ||
		m["timestamp"] != "2026-03-01T12:00:00.000005Z" || m["contract"] != nil || m["error"] != nil {
		t.Errorf("unexpected JSON: %s", v)
	}
	in := m["inputs"].([]any)
	f := in[0].(map[string]any)
	if f["datatype"] != "FLOAT" || f["float_data"].([]any)[0] != 0.5 || f["shape"].([]any)[0] != "2" {
		t.Errorf("FLOAT tensor JSON %v", f)
	}
	if i8 := in[2].(map[string]any); i8["int32_data"].([]any)[0] != -128.0 {
		t.Errorf("INT8 tensor JSON %v", i8)
	}
	if i64 := in[5].(map[string]any); i64["int64_data"].([]any)[0] != "-9223372036854775808" {
		t.Errorf("INT64 tensor JSON %v", i64)
	}
}

func TestDecodeErrors(t *testing.T) {
	pv, _ := Encode(sampleEvent(t), conf.EncodingProto)
	for _, tc := range []struct {
		name    string
		value   []byte
		headers []kgo.RecordHeader
		want    string
	}{
		{"other schema", pv, []kgo.RecordHeader{{Key: HeaderSchema, Value: []byte("x.Other")}}, `record schema "x.Other" is not grove.v1.PredictionEvent`},
		{"unknown encoding", pv, []kgo.RecordHeader{{Key: HeaderEncoding, Value: []byte("avro")}}, `unknown record encoding "avro"`},
		{"bad json", []byte(`{"served": 3}`), nil, "decoding json prediction event"},
		{"json announced as proto", []byte(`{}`), recordHeaders(conf.EncodingProto), "decoding proto prediction event"},
		{"bad proto", []byte{0x0a, 0xff}, nil, "decoding proto prediction event"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Decode(tc.value, tc.headers)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("got %v, want an error containing %q", err, tc.want)
			}
		})
	}
}

func TestDecodeIgnoresUnknownJSONFields(t *testing.T) {
	ev, err := Decode([]byte(` {"model_path":"m/","added_later":{"x":1}}`), nil)
	if err != nil || ev.ModelPath != "m/" {
		t.Errorf("got %v, %v", ev, err)
	}
}
