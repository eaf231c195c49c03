package audit

import (
	"encoding/json"
	"net/url"
	"testing"
	"time"
)

// FuzzParseSince checks that no since parameter panics the parser, and
// that a time it accepts reads back to the same instant.
func FuzzParseSince(f *testing.F) {
	for _, s := range []string{"2026-11-25T03:00:00Z", "2026-11-25T04:00:00.123456789+01:00", "", "yesterday", "2026-11-25T04:00:00 01:00", "9999-12-31T23:59:59Z"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		tm, err := ParseSince(url.Values{"since": {s}})
		if err != nil {
			return
		}
		again, err := ParseSince(url.Values{"since": {tm.Format(time.RFC3339Nano)}})
		if err != nil || !again.Equal(tm) {
			t.Fatalf("%q read as %v, which reads back as %v, %v", s, tm, again, err)
		}
	})
}

// FuzzDecode checks that no object panics the decoder, and that an entry
// it accepts is encoded and decoded back to itself.
func FuzzDecode(f *testing.F) {
	for _, s := range []string{
		`{"id":"a-1","time":"2026-11-25T03:04:31Z","who":"bot","auth":"token","api":"manage","route":"POST /servable","result":"ok","after":{"model_config":{"model_metadata":[]}}}`,
		`{"id":"a-2","time":"2026-11-25T03:04:31.5Z","who":"anonymous","auth":"none","api":"oip","route":"POST /v2/repository/models/{name}/load","result":"error","error":"refused","status":"409"}`,
		`{"id":"x"}`, `[]`, `{"id":"a","time":"0001-01-01T00:00:00Z"}`, "\xff",
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		e, err := Decode(data)
		if err != nil {
			return
		}
		enc, err := json.Marshal(e)
		if err != nil {
			t.Fatalf("accepted %q, cannot encode it: %v", data, err)
		}
		back, err := Decode(enc)
		if err != nil {
			t.Fatalf("accepted %q, not its encoding %s: %v", data, enc, err)
		}
		enc2, _ := json.Marshal(back)
		if string(enc) != string(enc2) {
			t.Fatalf("round trip of %q: %s then %s", data, enc, enc2)
		}
	})
}
