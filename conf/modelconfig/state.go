package modelconfig

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"sort"
	"strings"
	"time"
	"unicode/utf8"
)

// ContractState is what replicas observe of contracts and must agree on,
// kept in the bucket next to the model config (see StatePath): when each
// servable was first configured and first became valid, and the
// performance metrics fed to it through the metrics API. Sharing the
// valid-since stamps gives every replica the same phase-in and expiration,
// and keeps them across restarts. In JSON:
//
//	{"contracts": {"ads/pctr/1": {"v2": {"created": "2026-11-22T10:00:00Z",
//	  "valid_since": "2026-11-22T10:01:00Z", "metrics": {"auc": 0.71},
//	  "promoted": "2026-11-22T10:01:00Z",
//	  "rolled_back": {"at": "2026-11-22T10:03:00Z", "reason": "rollback_when: ...", "checksum": "9f2c..."}}}}}
//
// promoted and rolled_back are the release gates' decisions (package
// routing): when promote_when promoted the release, and when and why
// rollback_when rolled it back, with the checksum of the model content
// it judged. A "bandits" object holds, by contract id, the counts a
// contract's bandit router last saved, in the router's own JSON object
// (package actors reads and writes it), so that a restarted replica
// starts from them.
//
// Unknown fields are ignored, so that replicas of an older version keep
// reading the state a newer one writes during a rolling upgrade.
type ContractState struct {
	// Contracts maps contract ids ("org/project/n") to their releases' records.
	Contracts map[string]map[string]ServableRecord
	// Bandits maps contract ids to the JSON object of the counts their
	// bandit router last saved (nil: none).
	Bandits map[string]json.RawMessage
}

// ServableRecord is the shared state of one release of a contract.
type ServableRecord struct {
	// Created is when a replica first saw the release in the config.
	Created time.Time
	// ValidSince is when it first became valid (zero: not valid).
	ValidSince time.Time
	// Metrics are its performance metrics, for min_metric and keep_top_ranked.
	Metrics map[string]float64
	// Promoted is when its promote_when rule promoted it (zero: never).
	Promoted time.Time
	// RolledBack is its rollback_when failure, if it has one.
	RolledBack Failure
}

// Failure is a release rolled back by its rollback_when gate. It holds
// while the release serves the content it judged (Checksum); the release
// then gets no traffic on any replica.
type Failure struct {
	// At is when the release was rolled back (zero: not failed).
	At time.Time
	// Reason names the bound broken and the figures measured.
	Reason string
	// Checksum is the checksum of the model content that failed.
	Checksum string
}

// IsZero reports whether there is no failure.
func (f Failure) IsZero() bool { return f.At.IsZero() }

// Limits of the contract state and the metrics API.
const (
	// MaxMetrics is the most metrics one servable may have.
	MaxMetrics = 64
	// maxMetricName is the longest metric name, in bytes.
	maxMetricName = 128
)

// MaxStateBytes is the largest contract state object Grove reads or
// writes: 64 MiB, as the model config.
const MaxStateBytes = 64 << 20

// StatePath returns the name of the contract state object of the model
// config named configPath: "model_config.json" gives
// "model_config.state.json", next to it.
func StatePath(configPath string) string {
	return strings.TrimSuffix(configPath, ".json") + ".state.json"
}

// stateJSON is ContractState's JSON shape.
type stateJSON struct {
	Contracts map[string]map[string]recordJSON `json:"contracts"`
	Bandits   map[string]json.RawMessage       `json:"bandits,omitempty"`
}

type recordJSON struct {
	Created    string             `json:"created,omitempty"`
	ValidSince string             `json:"valid_since,omitempty"`
	Metrics    map[string]float64 `json:"metrics,omitempty"`
	Promoted   string             `json:"promoted,omitempty"`
	RolledBack *failureJSON       `json:"rolled_back,omitempty"`
}

type failureJSON struct {
	At       string `json:"at"`
	Reason   string `json:"reason,omitempty"`
	Checksum string `json:"checksum,omitempty"`
}

// ParseContractState reads a contract state object. An empty object (or
// empty data) is an empty state.
func ParseContractState(data []byte) (*ContractState, error) {
	st := &ContractState{Contracts: map[string]map[string]ServableRecord{}}
	if len(bytes.TrimSpace(data)) == 0 {
		return st, nil
	}
	if !utf8.Valid(data) {
		return nil, &Error{Msg: "contract state is not valid UTF-8"}
	}
	var doc stateJSON
	if err := json.Unmarshal(data, &doc); err != nil {
		return nil, &Error{Msg: fmt.Sprintf("contract state is not valid: %v", err), Err: err}
	}
	for id, releases := range doc.Contracts {
		if strings.Count(id, "/") != 2 {
			return nil, &Error{Field: "contracts", Msg: fmt.Sprintf("%q is not a contract id (organization/project/contract_number)", id)}
		}
		recs := make(map[string]ServableRecord, len(releases))
		for rv, r := range releases {
			at := fmt.Sprintf("contracts[%q][%q]", id, rv)
			if rv == "" {
				return nil, &Error{Field: fmt.Sprintf("contracts[%q]", id), Msg: "empty release version"}
			}
			var rec ServableRecord
			var err error
			if rec.Created, err = parseStamp(r.Created); err != nil {
				return nil, &Error{Field: at + ".created", Msg: err.Error(), Err: err}
			}
			if rec.ValidSince, err = parseStamp(r.ValidSince); err != nil {
				return nil, &Error{Field: at + ".valid_since", Msg: err.Error(), Err: err}
			}
			if err := ValidateMetrics(r.Metrics); err != nil {
				return nil, &Error{Field: at + ".metrics", Msg: err.Error()}
			}
			rec.Metrics = r.Metrics
			if rec.Promoted, err = parseStamp(r.Promoted); err != nil {
				return nil, &Error{Field: at + ".promoted", Msg: err.Error(), Err: err}
			}
			if f := r.RolledBack; f != nil {
				if rec.RolledBack.At, err = parseStamp(f.At); err != nil || rec.RolledBack.At.IsZero() {
					if err == nil {
						err = errors.New("a rollback needs its time")
					}
					return nil, &Error{Field: at + ".rolled_back.at", Msg: err.Error(), Err: err}
				}
				rec.RolledBack.Reason, rec.RolledBack.Checksum = f.Reason, f.Checksum
			}
			recs[rv] = rec
		}
		st.Contracts[id] = recs
	}
	for id, saved := range doc.Bandits {
		if strings.Count(id, "/") != 2 {
			return nil, &Error{Field: "bandits", Msg: fmt.Sprintf("%q is not a contract id (organization/project/contract_number)", id)}
		}
		var buf bytes.Buffer
		if err := json.Compact(&buf, saved); err != nil || buf.Len() == 0 || buf.Bytes()[0] != '{' {
			return nil, &Error{Field: fmt.Sprintf("bandits[%q]", id), Msg: "a bandit's saved counts are a JSON object"}
		}
		st.SetBandit(id, buf.Bytes())
	}
	return st, nil
}

func parseStamp(s string) (time.Time, error) {
	if s == "" {
		return time.Time{}, nil
	}
	t, err := time.Parse(time.RFC3339Nano, s)
	if err != nil {
		return time.Time{}, err
	}
	// stamp writes it in UTC, where RFC 3339 has only the years 0000 to 9999.
	if y := t.UTC().Year(); y < 0 || y > 9999 {
		return time.Time{}, fmt.Errorf("%q is outside the years 0000 to 9999 in UTC", s)
	}
	return t, nil
}

func stamp(t time.Time) string {
	if t.IsZero() {
		return ""
	}
	return t.UTC().Format(time.RFC3339Nano)
}

// MarshalJSON writes the state; ParseContractState reads it back.
func (s *ContractState) MarshalJSON() ([]byte, error) {
	doc := stateJSON{Contracts: make(map[string]map[string]recordJSON, len(s.Contracts))}
	for id, recs := range s.Contracts {
		out := make(map[string]recordJSON, len(recs))
		for rv, r := range recs {
			rec := recordJSON{Created: stamp(r.Created), ValidSince: stamp(r.ValidSince), Metrics: r.Metrics, Promoted: stamp(r.Promoted)}
			if f := r.RolledBack; !f.IsZero() {
				rec.RolledBack = &failureJSON{At: stamp(f.At), Reason: f.Reason, Checksum: f.Checksum}
			}
			out[rv] = rec
		}
		doc.Contracts[id] = out
	}
	doc.Bandits = s.Bandits
	return json.Marshal(doc)
}

// SetBandit records saved, the JSON object of the counts contract id's
// bandit router saves; nil (or empty) removes them.
func (s *ContractState) SetBandit(id string, saved json.RawMessage) {
	if len(saved) == 0 {
		delete(s.Bandits, id)
		if len(s.Bandits) == 0 {
			s.Bandits = nil
		}
		return
	}
	if s.Bandits == nil {
		s.Bandits = map[string]json.RawMessage{}
	}
	s.Bandits[id] = saved
}

// Record returns the record of release rv of contract id (zero if none).
func (s *ContractState) Record(id, rv string) ServableRecord {
	if s == nil {
		return ServableRecord{}
	}
	return s.Contracts[id][rv]
}

// Clone returns a deep copy of s, to modify.
func (s *ContractState) Clone() *ContractState {
	c := &ContractState{Contracts: make(map[string]map[string]ServableRecord, len(s.Contracts))}
	for id, recs := range s.Contracts {
		out := make(map[string]ServableRecord, len(recs))
		for rv, r := range recs {
			if r.Metrics != nil {
				m := make(map[string]float64, len(r.Metrics))
				for k, v := range r.Metrics {
					m[k] = v
				}
				r.Metrics = m
			}
			out[rv] = r
		}
		c.Contracts[id] = out
	}
	for id, saved := range s.Bandits {
		c.SetBandit(id, bytes.Clone(saved))
	}
	return c
}

// Edit applies change to the record of release rv of contract id,
// creating it if needed and removing it if it ends up empty.
func (s *ContractState) Edit(id, rv string, change func(r *ServableRecord)) {
	if s.Contracts == nil {
		s.Contracts = map[string]map[string]ServableRecord{}
	}
	recs := s.Contracts[id]
	if recs == nil {
		recs = map[string]ServableRecord{}
		s.Contracts[id] = recs
	}
	r := recs[rv]
	change(&r)
	if r.Created.IsZero() && r.ValidSince.IsZero() && len(r.Metrics) == 0 && r.Promoted.IsZero() && r.RolledBack.IsZero() {
		delete(recs, rv)
	} else {
		recs[rv] = r
	}
	if len(recs) == 0 {
		delete(s.Contracts, id)
	}
}

// MetricsUpdate is the body of POST /{org}/{project}/{n}/{rv}/metrics:
// metrics to set, and metrics to delete (given as null).
type MetricsUpdate struct {
	// Set maps metric names to their new values.
	Set map[string]float64
	// Delete lists the metrics to remove, sorted.
	Delete []string
}

// Apply sets and deletes metrics in m (which may be nil) and returns the
// result, or an *Error (the caller's mistake) if the servable would have
// over MaxMetrics.
func (u MetricsUpdate) Apply(m map[string]float64) (map[string]float64, error) {
	out := make(map[string]float64, len(m)+len(u.Set))
	for k, v := range m {
		out[k] = v
	}
	for k, v := range u.Set {
		out[k] = v
	}
	for _, k := range u.Delete {
		delete(out, k)
	}
	if len(out) > MaxMetrics {
		return nil, &Error{Msg: fmt.Sprintf("a servable has at most %d metrics; this update would give it %d", MaxMetrics, len(out))}
	}
	return out, nil
}

// ValidateMetrics checks a servable's metrics: at most MaxMetrics, each
// with a valid name (see ValidateMetricName) and a finite value.
func ValidateMetrics(m map[string]float64) error {
	if len(m) > MaxMetrics {
		return fmt.Errorf("%d metrics; at most %d", len(m), MaxMetrics)
	}
	names := make([]string, 0, len(m))
	for name := range m {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		if err := ValidateMetricName(name); err != nil {
			return err
		}
		if v := m[name]; math.IsNaN(v) || math.IsInf(v, 0) {
			return fmt.Errorf("metric %q is %v; metrics are finite numbers", name, v)
		}
	}
	return nil
}

// ValidateMetricName checks a metric name: 1 to 128 bytes.
func ValidateMetricName(name string) error {
	if name == "" || len(name) > maxMetricName {
		return fmt.Errorf("metric name %q must be 1 to %d bytes", name, maxMetricName)
	}
	return nil
}
