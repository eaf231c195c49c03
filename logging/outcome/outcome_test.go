package outcome

import (
	"math"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/groveml/grove/grovepb"
	"github.com/groveml/grove/logging"
)

var received = time.Date(2026, 5, 1, 12, 0, 0, 0, time.UTC)

func TestParseJSONReadsWhatUsersWrite(t *testing.T) {
	for _, tc := range []struct {
		name, in string
		want     *grovepb.Outcome
	}{
		{"proto names, RFC 3339 time, numbers",
			`{"outcome_id":"o1","request_id":"r1","item":2,"row":3,"event_time":"2026-05-01T10:00:00Z","labels":{"click":1,"value":12.5},"model_path":"pctr_v1/","contract":"ads/ctr/1"}`,
			&grovepb.Outcome{OutcomeId: "o1", RequestId: "r1", Item: 2, Row: 3, EventTime: timestamppb.New(time.Date(2026, 5, 1, 10, 0, 0, 0, time.UTC)),
				Labels: map[string]float64{"click": 1, "value": 12.5}, ModelPath: "pctr_v1/", Contract: "ads/ctr/1"}},
		{"camelCase names, a time with an offset, integers as strings",
			`{"outcomeId":"o2","requestId":"r2","item":"1","eventTime":"2026-05-01T12:30:00.5+02:00","labels":{"conversion":1}}`,
			&grovepb.Outcome{OutcomeId: "o2", RequestId: "r2", Item: 1, EventTime: timestamppb.New(time.Date(2026, 5, 1, 10, 30, 0, 5e8, time.UTC)),
				Labels: map[string]float64{"conversion": 1}}},
		{"key instead of request_id", `{"outcome_id":"o3","key":"u1.ad7","labels":{"click":0}}`,
			&grovepb.Outcome{OutcomeId: "o3", Key: "u1.ad7", Labels: map[string]float64{"click": 0}}},
		{"nulls are defaults", `{"outcome_id":"o4","request_id":"r","item":null,"event_time":null,"labels":{"click":-0.5e1}}`,
			&grovepb.Outcome{OutcomeId: "o4", RequestId: "r", Labels: map[string]float64{"click": -5}}},
		{"a label of a thousand digits", `{"outcome_id":"o5","request_id":"r","labels":{"value":1` + strings.Repeat("0", 1000) + `e-1000}}`,
			&grovepb.Outcome{OutcomeId: "o5", RequestId: "r", Labels: map[string]float64{"value": 1}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := ParseJSON([]byte(tc.in))
			if err != nil {
				t.Fatal(err)
			}
			if !proto.Equal(got, tc.want) {
				t.Errorf("ParseJSON = %v, want %v", got, tc.want)
			}
		})
	}
}

func TestParseJSONErrorsNameTheField(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{`{"outcome_id":"o","request_id":"r","labels":{"click":"yes"}}`, `labels: "click" is "yes", not a number`},
		{`{"outcome_id":"o","request_id":"r","labels":{"click":1e999}}`, `labels: "click" is 1e999, not a finite number`},
		{`{"outcome_id":"o","request_id":"r","labels":[1]}`, `labels: [1] is not an object of numbers`},
		{`{"outcome_id":"o","request_id":"r","event_time":"yesterday","labels":{"click":1}}`, `event_time: "yesterday" is not an RFC 3339 time`},
		{`{"outcome_id":"o","request_id":"r","event_time":1714557600,"labels":{"click":1}}`, "event_time: 1714557600 is not an RFC 3339 time string"},
		{`{"outcome_id":"o","request_id":"r","event_time":"10000-01-01T00:00:00Z","labels":{"click":1}}`, "event_time:"},
		{`{"outcome_id":"o","request_id":"r","item":1.5,"labels":{"click":1}}`, "item: 1.5 is not a whole number"},
		{`{"outcome_id":"o","request_id":"r","row":"x","labels":{"click":1}}`, `row: "x" is not a whole number`},
		{`{"outcome_id":"o","request_id":"r","lables":{"click":1}}`, `unknown field "lables"`},
		{`{"outcome_id":7,"labels":{"click":1}}`, "outcome_id: 7 is not a string"},
		{`{"outcomeId":"o","requestId":true}`, "request_id: true is not a string"},
		{`[1]`, "not a JSON outcome: a JSON array, not an object"},
		{`null`, "not a JSON outcome: null"},
		{`{"outcome_id":"o"`, "not a JSON outcome"},
	} {
		_, err := ParseJSON([]byte(tc.in))
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("ParseJSON(%s) = %v, want an error containing %q", tc.in, err, tc.want)
		}
	}
}

func TestValidateNamesTheFieldAtFault(t *testing.T) {
	ok := func(mod func(o *grovepb.Outcome)) *grovepb.Outcome {
		o := &grovepb.Outcome{OutcomeId: "o1", RequestId: "r1", Labels: map[string]float64{"click": 1}}
		mod(o)
		return o
	}
	for _, tc := range []struct {
		name string
		o    *grovepb.Outcome
		want string // "" for valid
	}{
		{"valid with request_id", ok(func(*grovepb.Outcome) {}), ""},
		{"valid with item and row", ok(func(o *grovepb.Outcome) { o.Item, o.Row = 3, 7 }), ""},
		{"valid with key", ok(func(o *grovepb.Outcome) { o.RequestId, o.Key = "", "k" }), ""},
		{"valid with a zero label", ok(func(o *grovepb.Outcome) { o.Labels = map[string]float64{"click": 0} }), ""},
		{"no outcome_id", ok(func(o *grovepb.Outcome) { o.OutcomeId = "" }), "outcome_id: required"},
		{"long outcome_id", ok(func(o *grovepb.Outcome) { o.OutcomeId = strings.Repeat("x", 129) }), "outcome_id: 129 bytes"},
		{"neither request_id nor key", ok(func(o *grovepb.Outcome) { o.RequestId = "" }), "request_id, key: one is required"},
		{"both request_id and key", ok(func(o *grovepb.Outcome) { o.Key = "k" }), "request_id, key: both are set"},
		{"long request_id", ok(func(o *grovepb.Outcome) { o.RequestId = strings.Repeat("r", 129) }), "request_id: 129 bytes"},
		{"negative item", ok(func(o *grovepb.Outcome) { o.Item = -1 }), "item: -1 is negative"},
		{"negative row", ok(func(o *grovepb.Outcome) { o.Row = -2 }), "row: -2 is negative"},
		{"item with key", ok(func(o *grovepb.Outcome) { o.RequestId, o.Key, o.Item = "", "k", 1 }), "item: only with request_id"},
		{"row with key", ok(func(o *grovepb.Outcome) { o.RequestId, o.Key, o.Row = "", "k", 1 }), "row: only with request_id"},
		{"no labels", ok(func(o *grovepb.Outcome) { o.Labels = nil }), "labels: at least one is required"},
		{"empty label name", ok(func(o *grovepb.Outcome) { o.Labels = map[string]float64{"": 1} }), "labels: a label's name is empty"},
		{"NaN label", ok(func(o *grovepb.Outcome) { o.Labels = map[string]float64{"value": math.NaN()} }), `labels: "value" is NaN`},
		{"infinite label", ok(func(o *grovepb.Outcome) { o.Labels = map[string]float64{"value": math.Inf(-1)} }), `labels: "value" is -Inf`},
		{"invalid event_time", ok(func(o *grovepb.Outcome) { o.EventTime = &timestamppb.Timestamp{Nanos: 2e9} }), "event_time:"},
		{"event_time within the clock skew allowed", ok(func(o *grovepb.Outcome) { o.EventTime = timestamppb.New(received.Add(59 * time.Minute)) }), ""},
		{"event_time more than an hour ahead", ok(func(o *grovepb.Outcome) { o.EventTime = timestamppb.New(received.Add(61 * time.Minute)) }),
			"event_time: 2026-05-01T13:01:00Z is more than 1h0m0s after the time it was received (2026-05-01T12:00:00Z)"},
		{"event_time past 2262 (beyond nanoseconds since 1970)", ok(func(o *grovepb.Outcome) {
			o.EventTime = timestamppb.New(time.Date(2610, 11, 20, 0, 0, 0, 0, time.UTC))
		}), "event_time: 2610-11-20T00:00:00Z is more than 1h0m0s after"},
		{"event_time before 1970", ok(func(o *grovepb.Outcome) { o.EventTime = timestamppb.New(time.Date(1969, 12, 31, 0, 0, 0, 0, time.UTC)) }),
			"event_time: 1969-12-31T00:00:00Z is before 1970"},
		{"a label too large for the sums of squares", ok(func(o *grovepb.Outcome) { o.Labels = map[string]float64{"revenue": 2e154} }),
			`labels: "revenue" is 2e+154, more than 1e+15 in magnitude`},
		{"a large label within the limit", ok(func(o *grovepb.Outcome) { o.Labels = map[string]float64{"revenue": -1e15} }), ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := Validate(tc.o, received)
			switch {
			case tc.want == "" && err != nil:
				t.Fatalf("Validate = %v, want nil", err)
			case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
				t.Fatalf("Validate = %v, want an error containing %q", err, tc.want)
			}
		})
	}
}

func TestValidateSetsAMissingEventTimeToTheReceiveTimeAndKeepsAGivenOne(t *testing.T) {
	o := &grovepb.Outcome{OutcomeId: "o", Key: "k", Labels: map[string]float64{"click": 1}}
	if err := Validate(o, received); err != nil {
		t.Fatal(err)
	}
	if got := o.EventTime.AsTime(); !got.Equal(received) {
		t.Errorf("event_time = %v, want the receive time %v", got, received)
	}
	given := time.Date(2026, 4, 30, 0, 0, 0, 0, time.UTC)
	o.EventTime = timestamppb.New(given)
	if err := Validate(o, received); err != nil {
		t.Fatal(err)
	}
	if got := o.EventTime.AsTime(); !got.Equal(given) {
		t.Errorf("event_time = %v, want the given %v", got, given)
	}
}

func TestParseArrayReadsEachElementOnItsOwn(t *testing.T) {
	items, err := ParseArray([]byte(`[
		{"outcome_id":"a","request_id":"r","labels":{"click":1}},
		{"outcome_id":"b","request_id":"r","labels":{"click":"x"}},
		42,
		{"outcome_id":"c","key":"k","labels":{"click":0}}
	]`))
	if err != nil {
		t.Fatal(err)
	}
	if len(items) != 4 {
		t.Fatalf("%d items, want 4", len(items))
	}
	for i, wantErr := range []bool{false, true, true, false} {
		if (items[i].Err != nil) != wantErr || (items[i].Outcome == nil) != wantErr {
			t.Errorf("item %d = %+v, want error %v", i, items[i], wantErr)
		}
	}
	if items[3].Outcome.GetOutcomeId() != "c" {
		t.Errorf("item 3 = %v, want outcome c", items[3].Outcome)
	}
}

func TestParseArrayRefusesABodyThatIsNotAnArray(t *testing.T) {
	for in, want := range map[string]string{
		`{"outcome_id":"a"}`:  "JSON object, not an array",
		`[{"outcome_id":"a"}`: "not a JSON array",
		``:                    "not a JSON array",
		`"x"`:                 "JSON string, not an array",
	} {
		if _, err := ParseArray([]byte(in)); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("ParseArray(%q) = %v, want an error containing %q", in, err, want)
		}
	}
}

func TestParseLinesSkipsBlankLinesAndCountsOutcomes(t *testing.T) {
	items := ParseLines([]byte("{\"outcome_id\":\"a\",\"request_id\":\"r\",\"labels\":{\"click\":1}}\r\n\n  \nnot json\n{\"outcome_id\":\"c\",\"key\":\"k\",\"labels\":{\"v\":2}}"))
	if len(items) != 3 {
		t.Fatalf("%d items, want 3: %+v", len(items), items)
	}
	if items[0].Err != nil || items[0].Outcome.GetOutcomeId() != "a" {
		t.Errorf("item 0 = %+v, want outcome a", items[0])
	}
	if items[1].Err == nil {
		t.Errorf("item 1 = %+v, want an error", items[1])
	}
	if items[2].Err != nil || items[2].Outcome.GetLabels()["v"] != 2 {
		t.Errorf("item 2 = %+v, want outcome c", items[2])
	}
	if n := len(ParseLines([]byte("\n \n"))); n != 0 {
		t.Errorf("blank lines: %d items, want 0", n)
	}
}

func TestParseProtoRefusesBytesThatAreNotAnOutcome(t *testing.T) {
	if _, err := ParseProto([]byte{0x0a, 0x05, 'a'}); err == nil || !strings.Contains(err.Error(), "not a protobuf grove.v1.Outcome") {
		t.Errorf("truncated = %v, want an error", err)
	}
	if _, err := ParseProto([]byte{0x0a, 0x01, 0xff}); err == nil {
		t.Error("invalid UTF-8 outcome_id: no error")
	}
}

func TestRecordIsKeyedByTheJoinKeyAndDecodesToTheSameOutcome(t *testing.T) {
	for _, o := range []*grovepb.Outcome{
		{OutcomeId: "o1", RequestId: "req-1", Item: 1, Labels: map[string]float64{"click": 1}, EventTime: timestamppb.New(received)},
		{OutcomeId: "o2", Key: "u1.ad7", Labels: map[string]float64{"value": 12.5}, EventTime: timestamppb.New(received)},
	} {
		r, err := Record(o, "grove.outcomes")
		if err != nil {
			t.Fatal(err)
		}
		if want := o.RequestId + o.Key; string(r.Key) != want || r.Topic != "grove.outcomes" {
			t.Errorf("record key %q topic %q, want %q grove.outcomes", r.Key, r.Topic, want)
		}
		headers := map[string]string{}
		for _, h := range r.Headers {
			headers[h.Key] = string(h.Value)
		}
		if headers["grove-encoding"] != "proto" || headers["grove-schema"] != "grove.v1.Outcome" || headers["content-type"] != "application/x-protobuf" {
			t.Errorf("headers = %v", headers)
		}
		back, err := DecodeRecord(r.Value, r.Headers)
		if err != nil || !proto.Equal(back, o) {
			t.Errorf("DecodeRecord = %v, %v; want %v", back, err, o)
		}
	}
}

func TestDecodeRecordReadsJSONByItsHeaderOrItsFirstByte(t *testing.T) {
	want := &grovepb.Outcome{OutcomeId: "o", Key: "k", Labels: map[string]float64{"click": 1}}
	value, err := protojson.Marshal(want)
	if err != nil {
		t.Fatal(err)
	}
	withNewField := []byte(`{"outcome_id":"o","key":"k","labels":{"click":1},"from_the_future":true}`)
	if _, err := ParseJSON(withNewField); err == nil {
		t.Error("ParseJSON took an unknown field; DecodeRecord should be the lenient one")
	}
	for name, tc := range map[string]struct {
		value   []byte
		headers []kgo.RecordHeader
	}{
		"json header":            {value, []kgo.RecordHeader{{Key: logging.HeaderEncoding, Value: []byte("json")}, {Key: logging.HeaderSchema, Value: []byte(SchemaName)}}},
		"no header":              {value, nil},
		"unknown field, ignored": {withNewField, nil},
	} {
		got, err := DecodeRecord(tc.value, tc.headers)
		if err != nil || !proto.Equal(got, want) {
			t.Errorf("%s: DecodeRecord = %v, %v; want %v", name, got, err, want)
		}
	}
	if _, err := DecodeRecord(value, []kgo.RecordHeader{{Key: logging.HeaderSchema, Value: []byte(logging.SchemaName)}}); err == nil ||
		!strings.Contains(err.Error(), "is not grove.v1.Outcome") {
		t.Errorf("a PredictionEvent schema header: %v, want an error", err)
	}
	if _, err := DecodeRecord(value, []kgo.RecordHeader{{Key: logging.HeaderEncoding, Value: []byte("avro")}}); err == nil ||
		!strings.Contains(err.Error(), `unknown record encoding "avro"`) {
		t.Errorf("encoding avro: %v, want an error", err)
	}
}

func TestParseJSONRefusesStringsThatAreNotUTF8(t *testing.T) {
	// encoding/json would read each as a string with U+FFFD in place of
	// the bad byte: an outcome for another request or label than sent.
	for _, tc := range []struct{ in, want string }{
		{"{\"outcome_id\":\"o\",\"request_id\":\"r\xff\",\"labels\":{\"click\":1}}", "request_id: not valid UTF-8"},
		{"{\"outcome_id\":\"o\xc3\",\"key\":\"k\",\"labels\":{\"click\":1}}", "outcome_id: not valid UTF-8"},
		{"{\"outcome_id\":\"o\",\"request_id\":\"r\",\"labels\":{\"cl\xffick\":1}}", "labels: not valid UTF-8"},
		{"{\"outcome_id\":\"o\",\"request_id\":\"r\",\"contract\":\"a/b/\xfe\",\"labels\":{\"click\":1}}", "contract: not valid UTF-8"},
	} {
		if o, err := ParseJSON([]byte(tc.in)); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("ParseJSON(%q) = %v, %v; want an error containing %q", tc.in, o, err, tc.want)
		}
	}
}

func TestParseJSONRefusesEscapedLoneSurrogates(t *testing.T) {
	// encoding/json reads a lone surrogate escape as U+FFFD; protojson
	// refuses it.
	for _, id := range []string{`r\ud800`, `r\udc00`, `\ud800\u0041`, `\ud800x`, `\ud800\\`} {
		in := `{"outcome_id":"o","request_id":"` + id + `","labels":{"click":1}}`
		if o, err := ParseJSON([]byte(in)); err == nil || !strings.Contains(err.Error(), "request_id: not valid UTF-8") {
			t.Errorf("ParseJSON(%s) = %v, %v; want request_id refused", in, o, err)
		}
	}
	for id, want := range map[string]string{`\ud83d\ude00`: "\U0001F600", `\\ud800`: `\ud800`, `a\u00e9`: "aé"} {
		in := `{"outcome_id":"o","request_id":"` + id + `","labels":{"click":1}}`
		if o, err := ParseJSON([]byte(in)); err != nil || o.GetRequestId() != want {
			t.Errorf("ParseJSON(%s) = %v, %v; want request_id %q", in, o, err, want)
		}
	}
}
