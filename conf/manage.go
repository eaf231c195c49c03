package conf

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"slices"
	"strings"
	"time"
	"unicode/utf8"
)

// This file holds the management API's side of the model config: the
// documents it accepts (contract settings, servable policy, logging, serve
// requests), their canonical JSON, and the edits it makes to a ModelConfig.
//
// The documents are read like the config file (snake_case or
// lowerCamelCase, unknown fields are errors), and also in ForestFlow's
// shapes, so ForestFlow's clients and examples work unchanged:
//
//	{"expirationPolicy": {"KeepLatest": {"servablesToKeep": 2}}, "router": {"LatestPhaseInPctBasedRouter": {}}}
//	{"validityPolicy": [{"ImmediatelyValid": {}}], "phaseInPolicy": {"LinearTimeBasedPhaseIn": {"phaseInOverSecs": 600}}}
//
// What is written back to the bucket is always the canonical form.

// ContractSettings are a contract's own settings: everything but its
// servables. They are the body of POST /contract/{org}/{project}/{n} and
// PUT /{org}/{project}/{n}.
type ContractSettings struct {
	// Router decides how valid servables share traffic ("" means fair).
	Router Router
	// Expiration retires old or poor releases.
	Expiration Expiration
	// StickyKey pins callers to a servable; empty for none.
	StickyKey string
}

// Settings returns the contract's settings.
func (c Contract) Settings() ContractSettings {
	return ContractSettings{Router: c.Router, Expiration: c.Expiration, StickyKey: c.StickyKey}
}

// MarshalJSON writes the settings in the config file's shape.
func (cs ContractSettings) MarshalJSON() ([]byte, error) { return json.Marshal(cs.canonical()) }

// Policy is a servable's routing policy: validity, phase-in and shadowing.
// It is the body of PUT /{org}/{project}/{n}/{rv}/policy.
type Policy struct {
	// Validity are the rules that must all hold for the servable to take traffic.
	Validity []ValidityRule
	// PhaseIn is how its weight rises once valid.
	PhaseIn PhaseIn
	// Shadow, if not nil, makes it receive shadow copies.
	Shadow *Shadow
}

// Policy returns the servable's policy.
func (s ContractServable) Policy() Policy {
	return Policy{Validity: s.Validity, PhaseIn: s.PhaseIn, Shadow: s.Shadow}
}

// MarshalJSON writes the policy in the config file's shape.
func (p Policy) MarshalJSON() ([]byte, error) { return json.Marshal(p.canonical()) }

// MarshalJSON writes the logging settings in the config file's shape.
func (l ServableLogging) MarshalJSON() ([]byte, error) { return json.Marshal(l.canonical()) }

// MarshalJSON writes the servable in the config file's shape.
func (s ContractServable) MarshalJSON() ([]byte, error) { return json.Marshal(canonicalServable(s)) }

// ParseContractSettings reads contract settings: {"router": "latest",
// "expiration": {"keep_latest": 2}, "sticky_key": "user_id"}, or
// ForestFlow's {"router": {"LatestPhaseInPctBasedRouter": {}},
// "expirationPolicy": {"KeepLatest": {"servablesToKeep": 2}}}. Absent
// fields take their defaults (fair router, no expiration). The values are
// checked when the edited config is validated.
func ParseContractSettings(data []byte) (ContractSettings, error) {
	cs := ContractSettings{Router: RouterFair}
	err := parseDocument(data, "contract settings", contractSettingsFields(), &cs)
	return cs, err
}

// ParsePolicy reads a servable policy: {"validity": [...], "phase_in":
// {...}, "shadow": {...}} as in the config file, or ForestFlow's
// PolicySettings {"validityPolicy": [{"ImmediatelyValid": {}}],
// "phaseInPolicy": {"ImmediatePhaseIn": {}}}. ForestFlow's rule and
// phase-in names are accepted in either field. Absent fields take their
// defaults: no rules, immediate phase-in, no shadow.
func ParsePolicy(data []byte) (Policy, error) {
	p := Policy{PhaseIn: PhaseIn{Kind: PhaseInImmediate}}
	err := parseDocument(data, "policy", policyFields(), &p)
	return p, err
}

// ParseLogging reads a servable's logging settings, as in the config file;
// ForestFlow's LoggingSettings ({"logLevel": "FULL", "keyFeatures": [...]})
// is the same document in lowerCamelCase.
func ParseLogging(data []byte) (ServableLogging, error) {
	l := defaultLogging()
	err := parseDocument(data, "logging settings", loggingFields(), &l)
	return l, err
}

// defaultLogging is a servable's logging when none is given.
func defaultLogging() ServableLogging {
	return ServableLogging{Level: LogLevelNone, SampleRate: 1, KeyFeaturesSeparator: "."}
}

// ServeRequest is the body of POST /servable: a model in the bucket to
// serve as a release of a contract. In JSON, ForestFlow's BasicServeRequest
// with Grove's model fields:
//
//	{"path": "pctr_v2/",
//	 "checksum": "…", "eviction_grace_period_in_ms": 60000, "warm_up_batch_request_json": "…",
//	 "fqrv": {"contract": {"organization": "ads", "project": "pctr", "contract_number": 1}, "release_version": "v2"},
//	 "servableSettings": {"policySettings": {…a Policy…}, "loggingSettings": {…}},
//	 "contractSettings": {…ContractSettings, only for a new contract…},
//	 "tags": {"any": "string"}}
//
// path (or model_path) is the model's path in the serving bucket, as in
// model_metadata, not a URL: Grove serves what is in its bucket. The model
// fields apply when the path is not in model_metadata yet. tags are
// accepted and ignored, as ForestFlow does. ForestFlow's flavor is refused:
// Grove picks the runtime from the model's files.
type ServeRequest struct {
	// Model is the model_metadata entry to add if the path is not listed.
	Model ModelMetadata
	// Contract names the contract (organization, project, number); only
	// those fields are set.
	Contract Contract
	// Servable is the release: ReleaseVersion, ModelPath, policy and logging.
	Servable ContractServable
	// ContractSettings, if not nil, are the settings of a contract the
	// request creates; they are refused for an existing contract.
	ContractSettings *ContractSettings
}

// ParseServeRequest reads a serve request; see ServeRequest.
func ParseServeRequest(data []byte) (*ServeRequest, error) {
	r := &ServeRequest{Servable: ContractServable{PhaseIn: PhaseIn{Kind: PhaseInImmediate}, Logging: defaultLogging()}}
	if err := parseDocument(data, "serve request", serveRequestFields(), r); err != nil {
		return nil, err
	}
	if r.Model.Path == "" {
		return nil, &ConfigError{Field: "path", Msg: "serve request needs the model's path in the bucket"}
	}
	if strings.Contains(r.Model.Path, "://") {
		return nil, &ConfigError{Field: "path", Msg: fmt.Sprintf("path %q is a URL; give the model's path in the serving bucket (like \"pctr_v2/\"), after copying the model there", r.Model.Path)}
	}
	switch k := r.Contract; {
	case k.Organization == "" && k.Project == "" && k.Number == 0:
		return nil, &ConfigError{Field: "fqrv", Msg: `serve request needs the release's fqrv: {"contract": {"organization": …, "project": …, "contract_number": …}, "release_version": …}`}
	case r.Servable.ReleaseVersion == "":
		return nil, &ConfigError{Field: "fqrv.release_version", Msg: "serve request needs the release_version"}
	}
	r.Servable.ModelPath = r.Model.Path
	return r, nil
}

// aliasOf maps the management documents' second spellings of a setting
// (ForestFlow's) to the first, so that giving both is a duplicate field.
var aliasOf = map[string]string{
	"validity_policy":   "validity",
	"phase_in_policy":   "phase_in",
	"expiration_policy": "expiration",
	"model_path":        "path",
}

// parseDocument reads one JSON object of a management request into dst.
func parseDocument[T any](data []byte, what string, fields []field[T], dst *T) error {
	if !utf8.Valid(data) {
		return &ConfigError{Msg: what + " is not valid UTF-8"}
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	d := &decoder{dec: dec, data: data}
	tok, err := d.token("")
	if err != nil {
		return err
	}
	if tok != json.Delim('{') {
		return &ConfigError{Msg: fmt.Sprintf("%s must be a JSON object, got %s", what, describe(tok))}
	}
	if err := decodeObjectBody(d, "", fields, dst); err != nil {
		return err
	}
	if _, err := dec.Token(); err != io.EOF {
		return &ConfigError{Msg: fmt.Sprintf("unexpected data after the %s object at offset %d", what, dec.InputOffset())}
	}
	return nil
}

// contractSettingsFields are the fields of a contract settings document.
func contractSettingsFields() []field[ContractSettings] {
	var ck []field[Contract]
	for _, f := range contractFields() {
		if f.name == "expiration" || f.name == "sticky_key" {
			ck = append(ck, f)
		}
	}
	// Reuse the contract's decoders through a Contract holding the settings.
	via := func(f field[Contract]) field[ContractSettings] {
		return field[ContractSettings]{f.name, func(d *decoder, path string, cs *ContractSettings) error {
			c := Contract{Router: cs.Router, Expiration: cs.Expiration, StickyKey: cs.StickyKey}
			err := f.decode(d, path, &c)
			*cs = c.Settings()
			return err
		}}
	}
	fields := []field[ContractSettings]{
		{"router", func(d *decoder, path string, cs *ContractSettings) error {
			raw, err := d.raw(path)
			if err != nil || raw == nil {
				return err
			}
			var name string
			if json.Unmarshal(raw, &name) == nil {
				cs.Router = Router(name)
				return nil
			}
			sub := subDecoder(raw)
			var r Router
			err = decodeOneOf(sub, path, false, []field[Router]{
				emptyOption("FairPhaseInPctBasedRouter", func(r *Router) { *r = RouterFair }),
				emptyOption("LatestPhaseInPctBasedRouter", func(r *Router) { *r = RouterLatest }),
			}, &r, func(r *Router, key string) { *r = Router(key) })
			cs.Router = r
			return err
		}},
		{"expiration_policy", func(d *decoder, path string, cs *ContractSettings) error {
			return decodeOneOf(d, path, true, []field[Expiration]{
				{"KeepLatest", func(d *decoder, path string, e *Expiration) error {
					*e = Expiration{Kind: ExpireKeepLatest}
					return decodeObject(d, path, []field[Expiration]{
						{"servablesToKeep", keepField},
					}, e)
				}},
				{"KeepTopRanked", func(d *decoder, path string, e *Expiration) error {
					*e = Expiration{Kind: ExpireKeepTopRanked}
					return decodeObject(d, path, []field[Expiration]{
						{"servablesToKeep", keepField},
						{"metricToEvaluate", func(d *decoder, path string, e *Expiration) error {
							return d.string(path, &e.Metric)
						}},
						{"ordering", func(d *decoder, path string, e *Expiration) error {
							var o string
							if err := d.string(path, &o); err != nil {
								return err
							}
							if o != "" && o != "DESC" {
								return &ConfigError{Field: path, Msg: fmt.Sprintf("ordering %q is not supported: keep_top_ranked keeps the highest values (DESC); rank by a metric where higher is better", o)}
							}
							return nil
						}},
					}, e)
				}},
			}, &cs.Expiration, func(e *Expiration, key string) { e.Kind = ExpirationKind(key) })
		}},
	}
	for _, f := range ck {
		fields = append(fields, via(f))
	}
	return fields
}

// keepField reads ForestFlow's servablesToKeep.
func keepField(d *decoder, path string, e *Expiration) error {
	n, err := d.integer(path, math.MinInt32, math.MaxInt32)
	e.Keep = int(n)
	return err
}

// emptyOption is a oneof option whose value is the empty object {}.
func emptyOption[T any](name string, set func(*T)) field[T] {
	return field[T]{name, func(d *decoder, path string, dst *T) error {
		set(dst)
		var none struct{}
		return decodeObject(d, path, []field[struct{}]{}, &none)
	}}
}

// policyFields are the fields of a policy document.
func policyFields() []field[Policy] {
	rules := func(d *decoder, path string, p *Policy) error {
		p.Validity = nil
		opts := append(ruleOptions(), forestFlowRuleOptions()...)
		return decodeArray(d, path, func(path string) error {
			var r ValidityRule
			if err := decodeOneOf(d, path, false, opts, &r,
				func(r *ValidityRule, key string) { r.Kind = RuleKind(key) }); err != nil {
				return err
			}
			p.Validity = append(p.Validity, r)
			return nil
		})
	}
	phaseIn := func(d *decoder, path string, p *Policy) error {
		return decodeOneOf(d, path, true, append(phaseInOptions(), forestFlowPhaseInOptions()...), &p.PhaseIn,
			func(ph *PhaseIn, key string) { ph.Kind = PhaseInKind(key) })
	}
	return []field[Policy]{
		{"validity", rules},
		{"validity_policy", rules},
		{"phase_in", phaseIn},
		{"phase_in_policy", phaseIn},
		{"shadow", func(d *decoder, path string, p *Policy) error {
			return decodeShadow(d, path, &p.Shadow)
		}},
	}
}

// forestFlowRuleOptions are ForestFlow's validity rules (ValidityRules.proto).
func forestFlowRuleOptions() []field[ValidityRule] {
	return []field[ValidityRule]{
		emptyOption("ImmediatelyValid", func(r *ValidityRule) { *r = ValidityRule{Kind: RuleImmediatelyValid} }),
		emptyOption("NeverValid", func(r *ValidityRule) { *r = ValidityRule{Kind: RuleNeverValid} }),
		{"TimeBasedValidity", func(d *decoder, path string, r *ValidityRule) error {
			*r = ValidityRule{Kind: RuleValidAfterMs}
			return decodeObject(d, path, []field[ValidityRule]{
				{"validAfterMS", func(d *decoder, path string, r *ValidityRule) error {
					ms, err := d.integer(path, 0, maxValidAfterMs)
					r.After = time.Duration(ms) * time.Millisecond
					return err
				}},
			}, r)
		}},
		{"MinServedEventsBasedValidity", func(d *decoder, path string, r *ValidityRule) error {
			*r = ValidityRule{Kind: RuleMinServedEvents}
			return decodeObject(d, path, []field[ValidityRule]{
				{"validAfterMinServedEvents", func(d *decoder, path string, r *ValidityRule) error {
					n, err := d.integer(path, 0, maxEventCount)
					r.Count = n
					return err
				}},
			}, r)
		}},
		{"PerformanceBasedValidity", func(d *decoder, path string, r *ValidityRule) error {
			return &ConfigError{Field: path, Msg: `ForestFlow's PerformanceBasedValidity names no metric; use {"min_metric": {"metric": "auc", "threshold": 0.7}}`}
		}},
	}
}

// forestFlowPhaseInOptions are ForestFlow's phase-in policies (PhaseInPolicies.proto).
func forestFlowPhaseInOptions() []field[PhaseIn] {
	return []field[PhaseIn]{
		emptyOption("ImmediatePhaseIn", func(p *PhaseIn) { *p = PhaseIn{Kind: PhaseInImmediate} }),
		{"LinearTimeBasedPhaseIn", func(d *decoder, path string, p *PhaseIn) error {
			*p = PhaseIn{Kind: PhaseInLinear}
			return decodeObject(d, path, []field[PhaseIn]{
				{"phase_in_over_secs", func(d *decoder, path string, p *PhaseIn) error {
					secs, err := d.integer(path, math.MinInt32, math.MaxInt32)
					p.Over = time.Duration(secs) * time.Second
					return err
				}},
			}, p)
		}},
	}
}

// serveRequestFields are the fields of a serve request.
func serveRequestFields() []field[ServeRequest] {
	modelPath := func(d *decoder, path string, r *ServeRequest) error { return d.string(path, &r.Model.Path) }
	via := func(name string) field[ServeRequest] {
		f, _ := lookup(modelMetadataFields(), name)
		return field[ServeRequest]{name, func(d *decoder, path string, r *ServeRequest) error {
			return f.decode(d, path, &r.Model)
		}}
	}
	return []field[ServeRequest]{
		{"path", modelPath},
		{"model_path", modelPath},
		via("checksum"),
		via("warm_up_batch_request_json"),
		via("eviction_grace_period_in_ms"),
		via("replicas"),
		via("max_batch_rows"),
		via("max_queue_delay_us"),
		via("intra_op_threads"),
		via("default_timeout_ms"),
		via("queue_timeout_ms"),
		{"fqrv", func(d *decoder, path string, r *ServeRequest) error {
			return decodeObject(d, path, []field[ServeRequest]{
				{"contract", func(d *decoder, path string, r *ServeRequest) error {
					var names []field[Contract]
					for _, f := range contractFields() {
						if f.name == "organization" || f.name == "project" || f.name == "contract_number" {
							names = append(names, f)
						}
					}
					return decodeObject(d, path, names, &r.Contract)
				}},
				{"release_version", func(d *decoder, path string, r *ServeRequest) error {
					return d.string(path, &r.Servable.ReleaseVersion)
				}},
			}, r)
		}},
		{"servable_settings", func(d *decoder, path string, r *ServeRequest) error {
			return decodeObject(d, path, []field[ServeRequest]{
				{"policy_settings", func(d *decoder, path string, r *ServeRequest) error {
					p := r.Servable.Policy()
					if err := decodeObject(d, path, policyFields(), &p); err != nil {
						return err
					}
					r.Servable.Validity, r.Servable.PhaseIn, r.Servable.Shadow = p.Validity, p.PhaseIn, p.Shadow
					return nil
				}},
				{"logging_settings", func(d *decoder, path string, r *ServeRequest) error {
					return decodeObject(d, path, loggingFields(), &r.Servable.Logging)
				}},
			}, r)
		}},
		{"contract_settings", func(d *decoder, path string, r *ServeRequest) error {
			cs := ContractSettings{Router: RouterFair}
			if err := decodeObject(d, path, contractSettingsFields(), &cs); err != nil {
				return err
			}
			r.ContractSettings = &cs
			return nil
		}},
		{"tags", func(d *decoder, path string, _ *ServeRequest) error { return d.skip(path) }},
		{"flavor", func(d *decoder, path string, _ *ServeRequest) error {
			return &ConfigError{Field: path, Msg: "flavor is not used: Grove picks the runtime from the model's files (TorchScript .pt, ONNX .onnx)"}
		}},
	}
}

// raw reads the next value whole, or returns nil for null.
func (d *decoder) raw(path string) (json.RawMessage, error) {
	var v json.RawMessage
	if err := d.dec.Decode(&v); err != nil {
		return nil, &ConfigError{Field: path, Msg: fmt.Sprintf("invalid JSON: %v", err), Err: err}
	}
	if string(v) == "null" {
		return nil, nil
	}
	return v, nil
}

// subDecoder decodes a value read whole by raw.
func subDecoder(raw json.RawMessage) *decoder {
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	return &decoder{dec: dec, data: raw}
}

// Errors of the management edits, for the API to map to its answers.
var (
	// ErrContractExists: the contract to create is already configured.
	ErrContractExists = errors.New("contract already exists")
	// ErrContractNotFound: no contract with that id is configured.
	ErrContractNotFound = errors.New("unknown contract")
	// ErrServableExists: the contract already has that release.
	ErrServableExists = errors.New("servable already exists")
	// ErrServableNotFound: the contract has no such release.
	ErrServableNotFound = errors.New("unknown servable")
	// ErrContractSettingsGiven: a serve request for an existing contract
	// carries contract settings, which it may not change.
	ErrContractSettingsGiven = errors.New("cannot override contract settings with a serve request; use PUT /{organization}/{project}/{contract_number}")
)

// contract returns the configured contract with id "org/project/n".
func (c *ModelConfig) contract(id string) (*Contract, error) {
	for i := range c.Contracts {
		if c.Contracts[i].ID() == id {
			return &c.Contracts[i], nil
		}
	}
	return nil, fmt.Errorf("%w %s", ErrContractNotFound, id)
}

// servable returns the release rv of contract id.
func (c *ModelConfig) servable(id, rv string) (*ContractServable, error) {
	k, err := c.contract(id)
	if err != nil {
		return nil, err
	}
	for i := range k.Servables {
		if k.Servables[i].ReleaseVersion == rv {
			return &k.Servables[i], nil
		}
	}
	return nil, fmt.Errorf("%w %s in contract %s", ErrServableNotFound, rv, id)
}

// CreateContract adds a contract with no servables.
func (c *ModelConfig) CreateContract(org, project string, n int, cs ContractSettings) error {
	k := Contract{Organization: org, Project: project, Number: n}
	if _, err := c.contract(k.ID()); err == nil {
		return fmt.Errorf("%w: %s; use PUT /%s to update it", ErrContractExists, k.ID(), k.ID())
	}
	k.Router, k.Expiration, k.StickyKey = cs.Router, cs.Expiration, cs.StickyKey
	c.Contracts = append(c.Contracts, k)
	return nil
}

// UpdateContract replaces the settings of contract id.
func (c *ModelConfig) UpdateContract(id string, cs ContractSettings) error {
	k, err := c.contract(id)
	if err != nil {
		return err
	}
	k.Router, k.Expiration, k.StickyKey = cs.Router, cs.Expiration, cs.StickyKey
	return nil
}

// AddServable adds the release r describes: it lists the model in
// model_metadata if its path is not there yet, and creates the contract
// (with r's contract settings, or the defaults: fair router, no
// expiration) if it does not exist.
func (c *ModelConfig) AddServable(r *ServeRequest) error {
	id := r.Contract.ID()
	k, err := c.contract(id)
	switch {
	case err != nil:
		cs := ContractSettings{Router: RouterFair}
		if r.ContractSettings != nil {
			cs = *r.ContractSettings
		}
		if err := c.CreateContract(r.Contract.Organization, r.Contract.Project, r.Contract.Number, cs); err != nil {
			return err
		}
		k = &c.Contracts[len(c.Contracts)-1]
	case r.ContractSettings != nil:
		return fmt.Errorf("contract %s: %w", id, ErrContractSettingsGiven)
	}
	if _, err := c.servable(id, r.Servable.ReleaseVersion); err == nil {
		return fmt.Errorf("%w: release %s of contract %s", ErrServableExists, r.Servable.ReleaseVersion, id)
	}
	if !slices.ContainsFunc(c.Models, func(m ModelMetadata) bool { return m.Path == r.Model.Path }) {
		c.Models = append(c.Models, r.Model)
	}
	s := r.Servable
	s.ModelPath = r.Model.Path
	k.Servables = append(k.Servables, s)
	return nil
}

// SetPolicy replaces the policy of release rv of contract id.
func (c *ModelConfig) SetPolicy(id, rv string, p Policy) error {
	s, err := c.servable(id, rv)
	if err != nil {
		return err
	}
	s.Validity, s.PhaseIn, s.Shadow = p.Validity, p.PhaseIn, p.Shadow
	return nil
}

// SetLogging replaces the logging settings of release rv of contract id.
func (c *ModelConfig) SetLogging(id, rv string, l ServableLogging) error {
	s, err := c.servable(id, rv)
	if err != nil {
		return err
	}
	s.Logging = l
	return nil
}

// RemoveServable removes release rv from contract id. Its model leaves
// model_metadata too (and is evicted after its grace period) unless another
// contract's servable uses it; a model that no contract used before stays.
func (c *ModelConfig) RemoveServable(id, rv string) error {
	s, err := c.servable(id, rv)
	if err != nil {
		return err
	}
	path := s.ModelPath
	k, _ := c.contract(id)
	k.Servables = slices.DeleteFunc(k.Servables, func(s ContractServable) bool { return s.ReleaseVersion == rv })
	for _, k := range c.Contracts {
		for _, s := range k.Servables {
			if s.ModelPath == path {
				return nil
			}
		}
	}
	c.Models = slices.DeleteFunc(c.Models, func(m ModelMetadata) bool { return m.Path == path })
	return nil
}

// Validate checks an edited config by the rules of ParseModelConfig and
// returns it in canonical JSON, the form to write to the bucket.
func (c *ModelConfig) Validate() ([]byte, error) {
	data, err := json.Marshal(c)
	if err != nil {
		return nil, fmt.Errorf("encoding model config: %w", err)
	}
	if _, err := ParseModelConfig(data); err != nil {
		return nil, err
	}
	return data, nil
}
