package modelconfig

import (
	"bytes"
	"encoding/json"
	"fmt"
	"maps"
	"reflect"
	"strings"
	"testing"
	"time"
)

// sameState reports whether a and b hold the same records: the same
// contracts and releases, equal instants, and equal metrics (no metrics
// and an empty map are the same), and the same bandits' saved counts.
func sameState(a, b *ContractState) bool {
	if len(a.Contracts) != len(b.Contracts) {
		return false
	}
	for id, ra := range a.Contracts {
		rb, ok := b.Contracts[id]
		if !ok || len(ra) != len(rb) {
			return false
		}
		for rv, x := range ra {
			y, ok := rb[rv]
			if !ok || !x.Created.Equal(y.Created) || !x.ValidSince.Equal(y.ValidSince) || !maps.Equal(x.Metrics, y.Metrics) ||
				!x.Promoted.Equal(y.Promoted) || !x.RolledBack.At.Equal(y.RolledBack.At) ||
				x.RolledBack.Reason != y.RolledBack.Reason || x.RolledBack.Checksum != y.RolledBack.Checksum {
				return false
			}
		}
	}
	if len(a.Bandits) != len(b.Bandits) {
		return false
	}
	for id, x := range a.Bandits {
		if y, ok := b.Bandits[id]; !ok || !bytes.Equal(x, y) {
			return false
		}
	}
	return true
}

func TestContractStateRoundTripsThroughJSON(t *testing.T) {
	created := time.Date(2026, 11, 22, 10, 0, 0, 123456789, time.UTC)
	valid := time.Date(2026, 11, 22, 10, 1, 0, 0, time.UTC)
	st := &ContractState{Contracts: map[string]map[string]ServableRecord{
		"ads/pctr/1": {
			"v1": {Created: created, ValidSince: valid, Metrics: map[string]float64{"auc": 0.71, "logloss": -1e-9}},
			"v2": {Created: created},
		},
		"ads/pcvr/2": {"v1": {Metrics: map[string]float64{"auc": 0.5}}},
	}}
	data, err := json.Marshal(st)
	if err != nil {
		t.Fatal(err)
	}
	want := `{"contracts":{"ads/pctr/1":{"v1":{"created":"2026-11-22T10:00:00.123456789Z","valid_since":"2026-11-22T10:01:00Z","metrics":{"auc":0.71,"logloss":-1e-9}},` +
		`"v2":{"created":"2026-11-22T10:00:00.123456789Z"}},"ads/pcvr/2":{"v1":{"metrics":{"auc":0.5}}}}}`
	if string(data) != want {
		t.Errorf("got  %s\nwant %s", data, want)
	}
	got, err := ParseContractState(data)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, st) {
		t.Errorf("got  %+v\nwant %+v", got, st)
	}
}

func TestContractStateWritesTimesInUTC(t *testing.T) {
	st, err := ParseContractState([]byte(`{"contracts": {"o/p/1": {"v1": {"created": "2026-11-22T11:00:00.5+01:00", "valid_since": "2026-11-21T23:00:00-11:00"}}}}`))
	if err != nil {
		t.Fatal(err)
	}
	r := st.Record("o/p/1", "v1")
	if want := time.Date(2026, 11, 22, 10, 0, 0, 5e8, time.UTC); !r.Created.Equal(want) {
		t.Errorf("created %v, want %v", r.Created, want)
	}
	data, err := json.Marshal(st)
	if err != nil {
		t.Fatal(err)
	}
	if want := `{"contracts":{"o/p/1":{"v1":{"created":"2026-11-22T10:00:00.5Z","valid_since":"2026-11-22T10:00:00Z"}}}}`; string(data) != want {
		t.Errorf("got  %s\nwant %s", data, want)
	}
}

func TestContractStateRoundTripsTheFirstAndLastYears(t *testing.T) {
	for _, stamp := range []string{"0000-01-01T00:00:00Z", "0000-01-01T00:30:00-01:00", "9999-12-31T23:59:59.999999999Z", "9999-12-31T23:30:00+01:00"} {
		data := `{"contracts": {"o/p/1": {"v1": {"created": "` + stamp + `"}}}}`
		st, err := ParseContractState([]byte(data))
		if err != nil {
			t.Errorf("%s: %v", stamp, err)
			continue
		}
		out, err := json.Marshal(st)
		if err != nil {
			t.Fatal(err)
		}
		back, err := ParseContractState(out)
		if err != nil {
			t.Errorf("%s: re-parsing %s: %v", stamp, out, err)
			continue
		}
		if !sameState(st, back) {
			t.Errorf("%s: %s reads back as %+v", stamp, out, back)
		}
	}
}

func TestParseContractStateReadsEmptyInputAsAnEmptyState(t *testing.T) {
	for _, data := range []string{``, " \n\t", `{}`, `null`, `{"contracts": null}`, `{"contracts": {}}`} {
		st, err := ParseContractState([]byte(data))
		if err != nil {
			t.Errorf("%q: %v", data, err)
			continue
		}
		if st.Contracts == nil || len(st.Contracts) != 0 {
			t.Errorf("%q: got %+v, want an empty non-nil map", data, st.Contracts)
		}
		if out, err := json.Marshal(st); err != nil || string(out) != `{"contracts":{}}` {
			t.Errorf("%q: written as %s, %v", data, out, err)
		}
	}
}

func TestParseContractStateKeepsEmptyContractsAndRecords(t *testing.T) {
	st, err := ParseContractState([]byte(`{"contracts": {"o/p/1": {}, "o/p/2": null, "o/p/3": {"v1": {}, "v2": {"metrics": null}}}}`))
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]map[string]ServableRecord{"o/p/1": {}, "o/p/2": {}, "o/p/3": {"v1": {}, "v2": {}}}
	if !reflect.DeepEqual(st.Contracts, want) {
		t.Errorf("got  %+v\nwant %+v", st.Contracts, want)
	}
}

func TestParseContractStateIgnoresUnknownFields(t *testing.T) {
	data := `{"version": 2, "written_by": {"replica": "r1"},
		"contracts": {"ads/pctr/1": {"v1": {"created": "2026-11-22T10:00:00Z", "served": 5, "phase": {"pct": 50}, "metrics": {"auc": 0.7}}}}}`
	st, err := ParseContractState([]byte(data))
	if err != nil {
		t.Fatal(err)
	}
	want := ServableRecord{Created: time.Date(2026, 11, 22, 10, 0, 0, 0, time.UTC), Metrics: map[string]float64{"auc": 0.7}}
	if got := st.Record("ads/pctr/1", "v1"); !reflect.DeepEqual(got, want) {
		t.Errorf("got %+v, want %+v", got, want)
	}
}

func TestParseContractStateErrors(t *testing.T) {
	record := func(members string) string {
		return `{"contracts": {"ads/pctr/1": {"v1": {` + members + `}}}}`
	}
	metrics := func(n int) string {
		var b strings.Builder
		for i := range n {
			if i > 0 {
				b.WriteString(",")
			}
			fmt.Fprintf(&b, `"m%d": %d`, i, i)
		}
		return record(`"metrics": {` + b.String() + `}`)
	}
	for _, tc := range []struct {
		name, data, want string
	}{
		{"contract id with two segments", `{"contracts": {"ads/pctr": {}}}`, `contracts: "ads/pctr" is not a contract id (organization/project/contract_number)`},
		{"contract id with four segments", `{"contracts": {"ads/pctr/1/v1": {}}}`, `"ads/pctr/1/v1" is not a contract id`},
		{"empty contract id", `{"contracts": {"": {}}}`, `"" is not a contract id`},
		{"empty release", `{"contracts": {"ads/pctr/1": {"": {}}}}`, `contracts["ads/pctr/1"]: empty release version`},
		{"promoted not a time", record(`"promoted": "today"`), `contracts["ads/pctr/1"]["v1"].promoted: parsing time "today"`},
		{"rollback without its time", record(`"rolled_back": {"reason": "x"}`), `contracts["ads/pctr/1"]["v1"].rolled_back.at: a rollback needs its time`},
		{"rollback time not a time", record(`"rolled_back": {"at": "1"}`), `contracts["ads/pctr/1"]["v1"].rolled_back.at: parsing time "1"`},
		{"rollback not an object", record(`"rolled_back": true`), `contract state is not valid`},
		{"bad created", record(`"created": "yesterday"`), `contracts["ads/pctr/1"]["v1"].created: parsing time "yesterday"`},
		{"created without a zone", record(`"created": "2026-11-22T10:00:00"`), `contracts["ads/pctr/1"]["v1"].created: parsing time "2026-11-22T10:00:00"`},
		{"created with a space", record(`"created": "2026-11-22 10:00:00Z"`), `.created: parsing time`},
		{"bad valid_since", record(`"valid_since": "2026-13-01T00:00:00Z"`), `contracts["ads/pctr/1"]["v1"].valid_since: parsing time "2026-13-01T00:00:00Z": month out of range`},
		{"created a number", record(`"created": 1764000000`), `contract state is not valid: json: cannot unmarshal number`},
		// Written in UTC, these would be years 10000 and -1, which RFC 3339 cannot write.
		{"created after 9999 in UTC", record(`"created": "9999-12-31T23:30:00-01:00"`),
			`contracts["ads/pctr/1"]["v1"].created: "9999-12-31T23:30:00-01:00" is outside the years 0000 to 9999 in UTC`},
		{"valid_since before 0000 in UTC", record(`"valid_since": "0000-01-01T00:30:00+01:00"`),
			`contracts["ads/pctr/1"]["v1"].valid_since: "0000-01-01T00:30:00+01:00" is outside the years 0000 to 9999 in UTC`},
		{"metric name too long", record(`"metrics": {"` + strings.Repeat("m", 129) + `": 1}`), `contracts["ads/pctr/1"]["v1"].metrics: metric name "mmm`},
		{"empty metric name", record(`"metrics": {"": 1}`), `contracts["ads/pctr/1"]["v1"].metrics: metric name "" must be 1 to 128 bytes`},
		{"too many metrics", metrics(MaxMetrics + 1), `contracts["ads/pctr/1"]["v1"].metrics: 65 metrics; at most 64`},
		{"metric not a number", record(`"metrics": {"auc": "0.7"}`), `contract state is not valid: json: cannot unmarshal string`},
		{"metric overflow", record(`"metrics": {"auc": 1e400}`), `contract state is not valid`},
		{"contracts an array", `{"contracts": []}`, `contract state is not valid: json: cannot unmarshal array`},
		{"not an object", `[]`, `contract state is not valid`},
		{"a string", `"state"`, `contract state is not valid`},
		{"syntax error", `{"contracts": {`, `contract state is not valid: unexpected end of JSON input`},
		{"trailing data", `{} {}`, `contract state is not valid: invalid character '{' after top-level value`},
		{"invalid UTF-8", "{\"contracts\": {\"o/p/1\": {\"v\xff\": {}}}}", `contract state is not valid UTF-8`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			st, err := ParseContractState([]byte(tc.data))
			checkConfigError(t, err, tc.want)
			if st != nil {
				t.Errorf("got a state %+v with the error", st)
			}
		})
	}
	// The most metrics and the longest name are accepted.
	if _, err := ParseContractState([]byte(metrics(MaxMetrics))); err != nil {
		t.Errorf("%d metrics: %v", MaxMetrics, err)
	}
	if _, err := ParseContractState([]byte(record(`"metrics": {"` + strings.Repeat("m", 128) + `": 1}`))); err != nil {
		t.Errorf("128-byte metric name: %v", err)
	}
}

func TestContractStateRecordOfAMissingReleaseIsZero(t *testing.T) {
	var nilState *ContractState
	if r := nilState.Record("o/p/1", "v1"); !reflect.DeepEqual(r, ServableRecord{}) {
		t.Errorf("nil state: got %+v", r)
	}
	st := &ContractState{Contracts: map[string]map[string]ServableRecord{"o/p/1": {"v1": {Metrics: map[string]float64{"auc": 1}}}}}
	for _, k := range [][2]string{{"o/p/2", "v1"}, {"o/p/1", "v2"}} {
		if r := st.Record(k[0], k[1]); !reflect.DeepEqual(r, ServableRecord{}) {
			t.Errorf("%s %s: got %+v", k[0], k[1], r)
		}
	}
	if r := st.Record("o/p/1", "v1"); r.Metrics["auc"] != 1 {
		t.Errorf("got %+v", r)
	}
}

func TestContractStateEditCreatesAndRemovesRecords(t *testing.T) {
	now := time.Date(2026, 11, 22, 10, 0, 0, 0, time.UTC)
	st, err := ParseContractState(nil)
	if err != nil {
		t.Fatal(err)
	}
	st.Edit("o/p/1", "v1", func(r *ServableRecord) { r.Created = now })
	st.Edit("o/p/1", "v2", func(r *ServableRecord) { r.Metrics = map[string]float64{"auc": 0.5} })
	want := map[string]map[string]ServableRecord{"o/p/1": {"v1": {Created: now}, "v2": {Metrics: map[string]float64{"auc": 0.5}}}}
	if !reflect.DeepEqual(st.Contracts, want) {
		t.Fatalf("got %+v, want %+v", st.Contracts, want)
	}
	// A record left empty is removed; the contract stays while it has others.
	st.Edit("o/p/1", "v2", func(r *ServableRecord) { r.Metrics = map[string]float64{} })
	want = map[string]map[string]ServableRecord{"o/p/1": {"v1": {Created: now}}}
	if !reflect.DeepEqual(st.Contracts, want) {
		t.Fatalf("after emptying v2: got %+v, want %+v", st.Contracts, want)
	}
	// The contract goes with its last record.
	st.Edit("o/p/1", "v1", func(r *ServableRecord) { *r = ServableRecord{} })
	if len(st.Contracts) != 0 {
		t.Fatalf("after emptying v1: got %+v, want no contracts", st.Contracts)
	}
	// An edit that leaves a missing record empty adds nothing.
	st.Edit("o/p/2", "v1", func(r *ServableRecord) {})
	if len(st.Contracts) != 0 {
		t.Errorf("a no-op edit added %+v", st.Contracts)
	}
	// An edit sees the current record.
	st.Edit("o/p/1", "v1", func(r *ServableRecord) { r.ValidSince = now })
	st.Edit("o/p/1", "v1", func(r *ServableRecord) {
		if !r.ValidSince.Equal(now) {
			t.Errorf("edit sees %+v", r)
		}
		r.Created = now.Add(-time.Minute)
	})
	if r := st.Record("o/p/1", "v1"); !r.ValidSince.Equal(now) || !r.Created.Equal(now.Add(-time.Minute)) {
		t.Errorf("got %+v", r)
	}
}

func TestContractStateEditRemovesEmptyContractsReadFromJSON(t *testing.T) {
	st, err := ParseContractState([]byte(`{"contracts": {"o/p/1": {"v1": {}}}}`))
	if err != nil {
		t.Fatal(err)
	}
	st.Edit("o/p/1", "v1", func(r *ServableRecord) {})
	if len(st.Contracts) != 0 {
		t.Errorf("got %+v, want the empty record and contract removed", st.Contracts)
	}
}

func TestContractStateCloneIsDeep(t *testing.T) {
	now := time.Date(2026, 11, 22, 10, 0, 0, 0, time.UTC)
	st := &ContractState{Contracts: map[string]map[string]ServableRecord{
		"o/p/1": {"v1": {Created: now, Metrics: map[string]float64{"auc": 0.7}}, "v2": {ValidSince: now}},
	}}
	c := st.Clone()
	if !reflect.DeepEqual(c, st) {
		t.Fatalf("clone %+v differs from %+v", c, st)
	}
	c.Contracts["o/p/1"]["v1"].Metrics["auc"] = 0.1
	c.Contracts["o/p/1"]["v1"].Metrics["new"] = 1
	c.Edit("o/p/1", "v2", func(r *ServableRecord) { *r = ServableRecord{} })
	c.Edit("o/p/2", "v1", func(r *ServableRecord) { r.Created = now })
	want := &ContractState{Contracts: map[string]map[string]ServableRecord{
		"o/p/1": {"v1": {Created: now, Metrics: map[string]float64{"auc": 0.7}}, "v2": {ValidSince: now}},
	}}
	if !reflect.DeepEqual(st, want) {
		t.Errorf("modifying the clone changed the original to %+v", st)
	}
	if empty := (&ContractState{}).Clone(); empty.Contracts == nil || len(empty.Contracts) != 0 {
		t.Errorf("clone of an empty state: %+v", empty)
	}
}

func TestStatePathIsNextToTheConfig(t *testing.T) {
	for in, want := range map[string]string{
		"model_config.json":      "model_config.state.json",
		"configs/prod.json":      "configs/prod.state.json",
		"model_config":           "model_config.state.json",
		"model_config.json.json": "model_config.json.state.json",
	} {
		if got := StatePath(in); got != want {
			t.Errorf("StatePath(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestMetricsUpdateApply(t *testing.T) {
	full := map[string]float64{}
	for i := range MaxMetrics {
		full[fmt.Sprintf("m%d", i)] = float64(i)
	}
	with := func(m map[string]float64, k string, v float64) map[string]float64 {
		out := maps.Clone(m)
		out[k] = v
		return out
	}
	without := func(m map[string]float64, k string) map[string]float64 {
		out := maps.Clone(m)
		delete(out, k)
		return out
	}
	for _, tc := range []struct {
		name    string
		u       MetricsUpdate
		m, want map[string]float64
		err     string
	}{
		{"set into nil", MetricsUpdate{Set: map[string]float64{"auc": 0.7}}, nil, map[string]float64{"auc": 0.7}, ""},
		{"set replaces and adds", MetricsUpdate{Set: map[string]float64{"auc": 0.8, "f1": 0.5}}, map[string]float64{"auc": 0.7, "loss": 1},
			map[string]float64{"auc": 0.8, "f1": 0.5, "loss": 1}, ""},
		{"delete", MetricsUpdate{Set: map[string]float64{}, Delete: []string{"auc", "missing"}}, map[string]float64{"auc": 0.7, "loss": 1},
			map[string]float64{"loss": 1}, ""},
		{"delete everything", MetricsUpdate{Delete: []string{"auc"}}, map[string]float64{"auc": 0.7}, map[string]float64{}, ""},
		{"replace in a full servable", MetricsUpdate{Set: map[string]float64{"m0": -1}}, full, with(full, "m0", -1), ""},
		{"delete makes room", MetricsUpdate{Set: map[string]float64{"new": 1}, Delete: []string{"m1"}}, full, with(without(full, "m1"), "new", 1), ""},
		{"one over MaxMetrics", MetricsUpdate{Set: map[string]float64{"new": 1}}, full, nil, "a servable has at most 64 metrics; this update would give it 65"},
		{"deleting a missing one makes no room", MetricsUpdate{Set: map[string]float64{"new": 1}, Delete: []string{"missing"}}, full, nil, "would give it 65"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			before := maps.Clone(tc.m)
			got, err := tc.u.Apply(tc.m)
			if !maps.Equal(tc.m, before) || (tc.m == nil) != (before == nil) {
				t.Errorf("Apply modified its input to %v", tc.m)
			}
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("got %v, %v; want error %q", got, err, tc.err)
				}
				if got != nil {
					t.Errorf("got %v with the error", got)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got == nil || !maps.Equal(got, tc.want) {
				t.Errorf("got %v, want %v", got, tc.want)
			}
		})
	}
	// The result is a new map: modifying it leaves the input alone.
	m := map[string]float64{"auc": 0.7}
	out, err := MetricsUpdate{Set: map[string]float64{"f1": 1}}.Apply(m)
	if err != nil {
		t.Fatal(err)
	}
	out["auc"] = 0
	if m["auc"] != 0.7 || len(m) != 1 {
		t.Errorf("the result shares the input map: %v", m)
	}
}

// FuzzParseContractState checks that parsing the contract state never
// panics, fails only with *Error, and that the state written back
// (MarshalJSON) reads back to the same records.
func FuzzParseContractState(f *testing.F) {
	f.Add([]byte(`{"contracts":{"ads/pctr/1":{"v1":{"created":"2026-11-22T10:00:00.123456789Z","valid_since":"2026-11-22T10:01:00Z","metrics":{"auc":0.71}},"v2":{}}}}`))
	f.Add([]byte(`{"contracts":{"o/p/1":{"v1":{"created":"2026-11-22T11:00:00+01:00","metrics":{}}},"o/p/2":null},"version":2}`))
	f.Add([]byte(`{}`))
	f.Add([]byte(`{"contracts":{"ads/pctr/1":{"v2":{"valid_since":"2026-11-22T10:01:00Z","promoted":"2026-11-22T10:01:00Z","rolled_back":{"at":"2026-11-22T10:03:00+01:00","reason":"rollback_when: error rate 0.1","checksum":"9f"}}}}}`))
	f.Add([]byte(``))
	f.Add([]byte(`{"contracts":{"o/p":{"":{"created":"x"}}}}`))
	f.Add([]byte(`{"contracts":{},"bandits":{"o/p/1":{"at":"2026-11-22T10:00:00Z","releases":{"v1":{"n":1.5}}},"o/p/2":[]}}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		st, err := ParseContractState(data)
		checkOnlyConfigErrors(t, err)
		if err != nil {
			if st != nil {
				t.Fatalf("a state with the error %v", err)
			}
			return
		}
		if len(bytes.TrimSpace(data)) > 0 && !json.Valid(data) {
			t.Fatalf("accepted invalid JSON %q", data)
		}
		again, err := json.Marshal(st)
		if err != nil {
			t.Fatal(err)
		}
		st2, err := ParseContractState(again)
		if err != nil {
			t.Fatalf("re-parsing %s: %v", again, err)
		}
		if !sameState(st, st2) {
			t.Fatalf("round trip through %s changed the state:\n%+v\n%+v", again, st, st2)
		}
		// Written in canonical form, it reads back exactly and writes the same.
		third, err := json.Marshal(st2)
		if err != nil {
			t.Fatal(err)
		}
		if string(third) != string(again) {
			t.Fatalf("canonical form not stable:\n%s\n%s", again, third)
		}
		if c := st2.Clone(); !reflect.DeepEqual(c, st2) {
			t.Fatalf("clone %+v differs from %+v", c, st2)
		}
	})
}

func TestContractStateRoundTripsTheGatesDecisions(t *testing.T) {
	promoted := time.Date(2026, 11, 22, 10, 1, 0, 0, time.UTC)
	failed := time.Date(2026, 11, 22, 10, 3, 0, 500, time.UTC)
	st := &ContractState{Contracts: map[string]map[string]ServableRecord{"ads/pctr/1": {
		"v2": {Promoted: promoted, RolledBack: Failure{At: failed, Reason: "rollback_when: error rate 0.1 (50 of 500 requests) above max_error_rate 0.01", Checksum: "9f2c"}},
		"v3": {Promoted: promoted},
	}}}
	data, err := json.Marshal(st)
	if err != nil {
		t.Fatal(err)
	}
	want := `{"contracts":{"ads/pctr/1":{"v2":{"promoted":"2026-11-22T10:01:00Z","rolled_back":{"at":"2026-11-22T10:03:00.0000005Z","reason":"rollback_when: error rate 0.1 (50 of 500 requests) above max_error_rate 0.01","checksum":"9f2c"}},` +
		`"v3":{"promoted":"2026-11-22T10:01:00Z"}}}}`
	if string(data) != want {
		t.Errorf("got  %s\nwant %s", data, want)
	}
	got, err := ParseContractState(data)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, st) {
		t.Errorf("got  %+v\nwant %+v", got, st)
	}
	// A record holding only a decision is kept by Edit; clearing it removes the record.
	got.Edit("ads/pctr/1", "v2", func(r *ServableRecord) { r.Promoted = time.Time{} })
	if _, ok := got.Contracts["ads/pctr/1"]["v2"]; !ok {
		t.Fatal("Edit removed a record that still holds a rollback")
	}
	got.Edit("ads/pctr/1", "v2", func(r *ServableRecord) { r.RolledBack = Failure{} })
	if _, ok := got.Contracts["ads/pctr/1"]["v2"]; ok {
		t.Error("Edit kept an empty record")
	}
}

// A bandit's saved counts round-trip as the JSON object they are (compact),
// beside the records; a clone does not share them; SetBandit(nil) removes
// them; anything but an object under a contract id is refused.
func TestContractStateKeepsTheBanditsSavedCounts(t *testing.T) {
	data := []byte(`{"contracts": {"ads/pctr/1": {"v1": {"created": "2026-11-22T10:00:00Z"}}},
 "bandits": {"ads/pctr/1": {"at": "2026-11-22T10:05:00Z", "releases": {"v1": {"n": 1234.5, "positives": 30.25}}}}}`)
	st, err := ParseContractState(data)
	if err != nil {
		t.Fatal(err)
	}
	want := `{"at":"2026-11-22T10:05:00Z","releases":{"v1":{"n":1234.5,"positives":30.25}}}`
	if got := string(st.Bandits["ads/pctr/1"]); got != want {
		t.Fatalf("saved counts %s, want %s", got, want)
	}
	out, err := json.Marshal(st)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasSuffix(string(out), `"bandits":{"ads/pctr/1":`+want+`}}`) {
		t.Errorf("written as %s", out)
	}
	c := st.Clone()
	c.Bandits["ads/pctr/1"][2] = 'X'
	c.SetBandit("ads/pcvr/2", json.RawMessage(`{}`))
	if string(st.Bandits["ads/pctr/1"]) != want || len(st.Bandits) != 1 {
		t.Errorf("modifying the clone changed the original: %s", st.Bandits)
	}
	st.SetBandit("ads/pctr/1", nil)
	if out, _ := json.Marshal(st); strings.Contains(string(out), "bandits") {
		t.Errorf("removed counts still written: %s", out)
	}
	for _, bad := range []string{`{"bandits": {"ads/pctr": {}}}`, `{"bandits": {"ads/pctr/1": [1]}}`, `{"bandits": {"ads/pctr/1": null}}`} {
		if _, err := ParseContractState([]byte(bad)); err == nil || !strings.Contains(err.Error(), "bandits") {
			t.Errorf("%s: error %v, want one naming bandits", bad, err)
		}
	}
}
