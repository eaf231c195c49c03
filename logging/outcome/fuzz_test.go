package outcome

import (
	"math"
	"strings"
	"testing"

	"google.golang.org/protobuf/proto"

	"github.com/groveml/grove/grovepb"
)

// fuzzJSONSeeds start FuzzParseArray and FuzzParseLines; the same
// documents are checked in under testdata/fuzz (the lines joined by "\n"
// for FuzzParseLines).
var fuzzJSONSeeds = []string{
	`{"outcome_id":"o1","request_id":"r1","item":1,"row":2,"event_time":"2026-05-01T10:00:00Z","labels":{"click":1,"value":12.5}}`,
	`{"outcomeId":"o2","key":"u1.ad7","eventTime":"2026-05-01T12:30:00.123456789+02:00","labels":{"conversion":1},"modelPath":"pctr_v1/","contract":"ads/ctr/1"}`,
	`{"outcome_id":"o3","request_id":"r","item":"-1","labels":{"":1,"x":-0}}`,
	`{"outcome_id":"o4","request_id":"r","key":"k","labels":{}}`,
	`{"outcome_id":null,"labels":{"click":1e308}}`,
	`{"lables":{"click":1}}`,
	`42`,
}

// checkItem fails t when an item breaks what the parser promises: an
// outcome or an error, and a valid outcome is what Validate says and
// comes back equal from its record.
func checkItem(t *testing.T, it Item) {
	t.Helper()
	if (it.Outcome == nil) == (it.Err == nil) {
		t.Fatalf("item %+v: want exactly one of outcome and error", it)
	}
	if it.Err != nil {
		if it.Err.Error() == "" {
			t.Fatal("an empty error")
		}
		return
	}
	checkOutcome(t, it.Outcome)
}

// checkOutcome validates o and, when valid, checks its fields against
// Validate's rules and its record's round trip.
func checkOutcome(t *testing.T, o *grovepb.Outcome) {
	t.Helper()
	if err := Validate(o, received); err != nil {
		if err.Error() == "" || !strings.Contains(err.Error(), ":") {
			t.Fatalf("Validate error %q names no field", err)
		}
		return
	}
	if o.OutcomeId == "" || (o.RequestId == "") == (o.Key == "") || o.Item < 0 || o.Row < 0 || len(o.Labels) == 0 || o.EventTime == nil {
		t.Fatalf("Validate took %v", o)
	}
	for name, v := range o.Labels {
		if name == "" || math.IsNaN(v) || math.IsInf(v, 0) {
			t.Fatalf("Validate took label %q = %v", name, v)
		}
	}
	r, err := Record(o, "t")
	if err != nil {
		t.Fatalf("Record(%v): %v", o, err)
	}
	back, err := DecodeRecord(r.Value, r.Headers)
	if err != nil || !proto.Equal(back, o) {
		t.Fatalf("record of %v decodes to %v, %v", o, back, err)
	}
}

func FuzzParseArray(f *testing.F) {
	f.Add([]byte("[" + strings.Join(fuzzJSONSeeds, ",") + "]"))
	for _, s := range fuzzJSONSeeds {
		f.Add([]byte("[" + s + "]"))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		items, err := ParseArray(body)
		if err != nil {
			if items != nil {
				t.Fatalf("items %v with error %v", items, err)
			}
			return
		}
		for _, it := range items {
			checkItem(t, it)
		}
	})
}

func FuzzParseLines(f *testing.F) {
	f.Add([]byte(strings.Join(fuzzJSONSeeds, "\n")))
	f.Add([]byte(fuzzJSONSeeds[0] + "\r\n\n  \n" + fuzzJSONSeeds[1]))
	f.Fuzz(func(t *testing.T, body []byte) {
		items := ParseLines(body)
		if len(items) > strings.Count(string(body), "\n")+1 {
			t.Fatalf("%d items from %d lines", len(items), strings.Count(string(body), "\n")+1)
		}
		for _, it := range items {
			checkItem(t, it)
		}
	})
}

func FuzzParseProto(f *testing.F) {
	for _, s := range fuzzJSONSeeds {
		if o, err := ParseJSON([]byte(s)); err == nil {
			b, err := proto.Marshal(o)
			if err != nil {
				f.Fatal(err)
			}
			f.Add(b)
		}
	}
	f.Add([]byte{0x0a, 0x01, 0xff})
	f.Fuzz(func(t *testing.T, body []byte) {
		o, err := ParseProto(body)
		if (o == nil) == (err == nil) {
			t.Fatalf("ParseProto = %v, %v: want exactly one", o, err)
		}
		if err == nil {
			checkOutcome(t, o)
		}
	})
}
