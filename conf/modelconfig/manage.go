package modelconfig

import (
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"
	"time"

	"github.com/groveml/grove/internal/jsondoc"
)

// This file holds the management API's side of the model config: the
// documents it accepts (contract settings, servable policy, logging, serve
// requests), their canonical JSON, and the edits it makes to a Config.
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
	err := jsondoc.Decode(data, "contract settings", contractSettingsFields(), &cs)
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
	err := jsondoc.Decode(data, "policy", policyFields(), &p)
	return p, err
}

// ParseLogging reads a servable's logging settings, as in the config file;
// ForestFlow's LoggingSettings ({"logLevel": "FULL", "keyFeatures": [...]})
// is the same document in lowerCamelCase.
func ParseLogging(data []byte) (ServableLogging, error) {
	l := defaultLogging()
	err := jsondoc.Decode(data, "logging settings", loggingFields(), &l)
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
	Model Model
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
	if err := jsondoc.Decode(data, "serve request", serveRequestFields(), r); err != nil {
		return nil, err
	}
	if r.Model.Path == "" {
		return nil, &jsondoc.Error{Field: "path", Msg: "serve request needs the model's path in the bucket"}
	}
	if strings.Contains(r.Model.Path, "://") {
		return nil, &jsondoc.Error{Field: "path", Msg: fmt.Sprintf("path %q is a URL; give the model's path in the serving bucket (like \"pctr_v2/\"), after copying the model there", r.Model.Path)}
	}
	switch k := r.Contract; {
	case k.Organization == "" && k.Project == "" && k.Number == 0:
		return nil, &jsondoc.Error{Field: "fqrv", Msg: `serve request needs the release's fqrv: {"contract": {"organization": …, "project": …, "contract_number": …}, "release_version": …}`}
	case r.Servable.ReleaseVersion == "":
		return nil, &jsondoc.Error{Field: "fqrv.release_version", Msg: "serve request needs the release_version"}
	}
	r.Servable.ModelPath = r.Model.Path
	return r, nil
}

// contractSettingsFields are the fields of a contract settings document.
func contractSettingsFields() []jsondoc.Field[ContractSettings] {
	var ck []jsondoc.Field[Contract]
	for _, f := range contractFields() {
		if f.Name == "expiration" || f.Name == "sticky_key" {
			ck = append(ck, f)
		}
	}
	// Reuse the contract's decoders through a Contract holding the settings.
	via := func(f jsondoc.Field[Contract]) jsondoc.Field[ContractSettings] {
		return jsondoc.Field[ContractSettings]{Name: f.Name, Decode: func(d *jsondoc.Decoder, path string, cs *ContractSettings) error {
			c := Contract{Router: cs.Router, Expiration: cs.Expiration, StickyKey: cs.StickyKey}
			err := f.Decode(d, path, &c)
			*cs = c.Settings()
			return err
		}}
	}
	fields := []jsondoc.Field[ContractSettings]{
		{Name: "router", Decode: func(d *jsondoc.Decoder, path string, cs *ContractSettings) error {
			raw, err := d.Raw(path)
			if err != nil || raw == nil {
				return err
			}
			var name string
			if json.Unmarshal(raw, &name) == nil {
				cs.Router = Router(name)
				return nil
			}
			sub := jsondoc.NewDecoder(raw)
			var r Router
			err = jsondoc.DecodeOneOf(sub, path, false, []jsondoc.Field[Router]{
				emptyOption("FairPhaseInPctBasedRouter", func(r *Router) { *r = RouterFair }),
				emptyOption("LatestPhaseInPctBasedRouter", func(r *Router) { *r = RouterLatest }),
			}, &r, func(r *Router, key string) { *r = Router(key) })
			cs.Router = r
			return err
		}},
		{Name: "expiration_policy", SameAs: "expiration", Decode: func(d *jsondoc.Decoder, path string, cs *ContractSettings) error {
			return jsondoc.DecodeOneOf(d, path, true, []jsondoc.Field[Expiration]{
				{Name: "KeepLatest", Decode: func(d *jsondoc.Decoder, path string, e *Expiration) error {
					*e = Expiration{Kind: ExpireKeepLatest}
					return jsondoc.DecodeObject(d, path, []jsondoc.Field[Expiration]{
						{Name: "servablesToKeep", Decode: keepField},
					}, e)
				}},
				{Name: "KeepTopRanked", Decode: func(d *jsondoc.Decoder, path string, e *Expiration) error {
					*e = Expiration{Kind: ExpireKeepTopRanked}
					return jsondoc.DecodeObject(d, path, []jsondoc.Field[Expiration]{
						{Name: "servablesToKeep", Decode: keepField},
						{Name: "metricToEvaluate", Decode: func(d *jsondoc.Decoder, path string, e *Expiration) error {
							return d.String(path, &e.Metric)
						}},
						{Name: "ordering", Decode: func(d *jsondoc.Decoder, path string, e *Expiration) error {
							var o string
							if err := d.String(path, &o); err != nil {
								return err
							}
							if o != "" && o != "DESC" {
								return &jsondoc.Error{Field: path, Msg: fmt.Sprintf("ordering %q is not supported: keep_top_ranked keeps the highest values (DESC); rank by a metric where higher is better", o)}
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
func keepField(d *jsondoc.Decoder, path string, e *Expiration) error {
	n, err := d.Integer(path, math.MinInt32, math.MaxInt32)
	e.Keep = int(n)
	return err
}

// emptyOption is a oneof option whose value is the empty object {}.
func emptyOption[T any](name string, set func(*T)) jsondoc.Field[T] {
	return jsondoc.Field[T]{Name: name, Decode: func(d *jsondoc.Decoder, path string, dst *T) error {
		set(dst)
		var none struct{}
		return jsondoc.DecodeObject(d, path, []jsondoc.Field[struct{}]{}, &none)
	}}
}

// policyFields are the fields of a policy document.
func policyFields() []jsondoc.Field[Policy] {
	rules := func(d *jsondoc.Decoder, path string, p *Policy) error {
		p.Validity = nil
		opts := append(ruleOptions(), forestFlowRuleOptions()...)
		return jsondoc.DecodeArray(d, path, func(path string) error {
			var r ValidityRule
			if err := jsondoc.DecodeOneOf(d, path, false, opts, &r,
				func(r *ValidityRule, key string) { r.Kind = RuleKind(key) }); err != nil {
				return err
			}
			p.Validity = append(p.Validity, r)
			return nil
		})
	}
	phaseIn := func(d *jsondoc.Decoder, path string, p *Policy) error {
		return jsondoc.DecodeOneOf(d, path, true, append(phaseInOptions(), forestFlowPhaseInOptions()...), &p.PhaseIn,
			func(ph *PhaseIn, key string) { ph.Kind = PhaseInKind(key) })
	}
	return []jsondoc.Field[Policy]{
		{Name: "validity", Decode: rules},
		{Name: "validity_policy", SameAs: "validity", Decode: rules},
		{Name: "phase_in", Decode: phaseIn},
		{Name: "phase_in_policy", SameAs: "phase_in", Decode: phaseIn},
		{Name: "shadow", Decode: func(d *jsondoc.Decoder, path string, p *Policy) error {
			return decodeShadow(d, path, &p.Shadow)
		}},
	}
}

// forestFlowRuleOptions are ForestFlow's validity rules (ValidityRules.proto).
func forestFlowRuleOptions() []jsondoc.Field[ValidityRule] {
	return []jsondoc.Field[ValidityRule]{
		emptyOption("ImmediatelyValid", func(r *ValidityRule) { *r = ValidityRule{Kind: RuleImmediatelyValid} }),
		emptyOption("NeverValid", func(r *ValidityRule) { *r = ValidityRule{Kind: RuleNeverValid} }),
		{Name: "TimeBasedValidity", Decode: func(d *jsondoc.Decoder, path string, r *ValidityRule) error {
			*r = ValidityRule{Kind: RuleValidAfterMs}
			return jsondoc.DecodeObject(d, path, []jsondoc.Field[ValidityRule]{
				{Name: "validAfterMS", Decode: func(d *jsondoc.Decoder, path string, r *ValidityRule) error {
					ms, err := d.Integer(path, 0, maxValidAfterMs)
					r.After = time.Duration(ms) * time.Millisecond
					return err
				}},
			}, r)
		}},
		{Name: "MinServedEventsBasedValidity", Decode: func(d *jsondoc.Decoder, path string, r *ValidityRule) error {
			*r = ValidityRule{Kind: RuleMinServedEvents}
			return jsondoc.DecodeObject(d, path, []jsondoc.Field[ValidityRule]{
				{Name: "validAfterMinServedEvents", Decode: func(d *jsondoc.Decoder, path string, r *ValidityRule) error {
					n, err := d.Integer(path, 0, maxEventCount)
					r.Count = n
					return err
				}},
			}, r)
		}},
		{Name: "PerformanceBasedValidity", Decode: func(d *jsondoc.Decoder, path string, r *ValidityRule) error {
			return &jsondoc.Error{Field: path, Msg: `ForestFlow's PerformanceBasedValidity names no metric; use {"min_metric": {"metric": "auc", "threshold": 0.7}}`}
		}},
	}
}

// forestFlowPhaseInOptions are ForestFlow's phase-in policies (PhaseInPolicies.proto).
func forestFlowPhaseInOptions() []jsondoc.Field[PhaseIn] {
	return []jsondoc.Field[PhaseIn]{
		emptyOption("ImmediatePhaseIn", func(p *PhaseIn) { *p = PhaseIn{Kind: PhaseInImmediate} }),
		{Name: "LinearTimeBasedPhaseIn", Decode: func(d *jsondoc.Decoder, path string, p *PhaseIn) error {
			*p = PhaseIn{Kind: PhaseInLinear}
			return jsondoc.DecodeObject(d, path, []jsondoc.Field[PhaseIn]{
				{Name: "phase_in_over_secs", Decode: func(d *jsondoc.Decoder, path string, p *PhaseIn) error {
					secs, err := d.Integer(path, math.MinInt32, math.MaxInt32)
					p.Over = time.Duration(secs) * time.Second
					return err
				}},
			}, p)
		}},
	}
}

// serveRequestFields are the fields of a serve request.
func serveRequestFields() []jsondoc.Field[ServeRequest] {
	modelPath := func(d *jsondoc.Decoder, path string, r *ServeRequest) error { return d.String(path, &r.Model.Path) }
	via := func(name string) jsondoc.Field[ServeRequest] {
		f, _ := jsondoc.Lookup(modelMetadataFields(), name)
		return jsondoc.Field[ServeRequest]{Name: name, Decode: func(d *jsondoc.Decoder, path string, r *ServeRequest) error {
			return f.Decode(d, path, &r.Model)
		}}
	}
	return []jsondoc.Field[ServeRequest]{
		{Name: "path", Decode: modelPath},
		{Name: "model_path", SameAs: "path", Decode: modelPath},
		via("checksum"),
		via("warm_up_batch_request_json"),
		via("eviction_grace_period_in_ms"),
		via("replicas"),
		via("max_batch_rows"),
		via("max_queue_delay_us"),
		via("intra_op_threads"),
		via("default_timeout_ms"),
		via("queue_timeout_ms"),
		{Name: "fqrv", Decode: func(d *jsondoc.Decoder, path string, r *ServeRequest) error {
			return jsondoc.DecodeObject(d, path, []jsondoc.Field[ServeRequest]{
				{Name: "contract", Decode: func(d *jsondoc.Decoder, path string, r *ServeRequest) error {
					var names []jsondoc.Field[Contract]
					for _, f := range contractFields() {
						if f.Name == "organization" || f.Name == "project" || f.Name == "contract_number" {
							names = append(names, f)
						}
					}
					return jsondoc.DecodeObject(d, path, names, &r.Contract)
				}},
				{Name: "release_version", Decode: func(d *jsondoc.Decoder, path string, r *ServeRequest) error {
					return d.String(path, &r.Servable.ReleaseVersion)
				}},
			}, r)
		}},
		{Name: "servable_settings", Decode: func(d *jsondoc.Decoder, path string, r *ServeRequest) error {
			return jsondoc.DecodeObject(d, path, []jsondoc.Field[ServeRequest]{
				{Name: "policy_settings", Decode: func(d *jsondoc.Decoder, path string, r *ServeRequest) error {
					p := r.Servable.Policy()
					if err := jsondoc.DecodeObject(d, path, policyFields(), &p); err != nil {
						return err
					}
					r.Servable.Validity, r.Servable.PhaseIn, r.Servable.Shadow = p.Validity, p.PhaseIn, p.Shadow
					return nil
				}},
				{Name: "logging_settings", Decode: func(d *jsondoc.Decoder, path string, r *ServeRequest) error {
					return jsondoc.DecodeObject(d, path, loggingFields(), &r.Servable.Logging)
				}},
			}, r)
		}},
		{Name: "contract_settings", Decode: func(d *jsondoc.Decoder, path string, r *ServeRequest) error {
			cs := ContractSettings{Router: RouterFair}
			if err := jsondoc.DecodeObject(d, path, contractSettingsFields(), &cs); err != nil {
				return err
			}
			r.ContractSettings = &cs
			return nil
		}},
		{Name: "tags", Decode: func(d *jsondoc.Decoder, path string, _ *ServeRequest) error { return d.Skip(path) }},
		{Name: "flavor", Decode: func(d *jsondoc.Decoder, path string, _ *ServeRequest) error {
			return &jsondoc.Error{Field: path, Msg: "flavor is not used: Grove picks the runtime from the model's files (TorchScript .pt, ONNX .onnx)"}
		}},
	}
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
func (c *Config) contract(id string) (*Contract, error) {
	for i := range c.Contracts {
		if c.Contracts[i].ID() == id {
			return &c.Contracts[i], nil
		}
	}
	return nil, fmt.Errorf("%w %s", ErrContractNotFound, id)
}

// servable returns the release rv of contract id.
func (c *Config) servable(id, rv string) (*ContractServable, error) {
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
func (c *Config) CreateContract(org, project string, n int, cs ContractSettings) error {
	k := Contract{Organization: org, Project: project, Number: n}
	if _, err := c.contract(k.ID()); err == nil {
		return fmt.Errorf("%w: %s; use PUT /%s to update it", ErrContractExists, k.ID(), k.ID())
	}
	k.Router, k.Expiration, k.StickyKey = cs.Router, cs.Expiration, cs.StickyKey
	c.Contracts = append(c.Contracts, k)
	return nil
}

// UpdateContract replaces the settings of contract id.
func (c *Config) UpdateContract(id string, cs ContractSettings) error {
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
func (c *Config) AddServable(r *ServeRequest) error {
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
	if !slices.ContainsFunc(c.Models, func(m Model) bool { return m.Path == r.Model.Path }) {
		c.Models = append(c.Models, r.Model)
	}
	s := r.Servable
	s.ModelPath = r.Model.Path
	k.Servables = append(k.Servables, s)
	return nil
}

// SetPolicy replaces the policy of release rv of contract id.
func (c *Config) SetPolicy(id, rv string, p Policy) error {
	s, err := c.servable(id, rv)
	if err != nil {
		return err
	}
	s.Validity, s.PhaseIn, s.Shadow = p.Validity, p.PhaseIn, p.Shadow
	return nil
}

// SetLogging replaces the logging settings of release rv of contract id.
func (c *Config) SetLogging(id, rv string, l ServableLogging) error {
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
func (c *Config) RemoveServable(id, rv string) error {
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
	c.Models = slices.DeleteFunc(c.Models, func(m Model) bool { return m.Path == path })
	return nil
}

// Validate checks an edited config by the rules of Parse and
// returns it in canonical JSON, the form to write to the bucket.
func (c *Config) Validate() ([]byte, error) {
	data, err := json.Marshal(c)
	if err != nil {
		return nil, fmt.Errorf("encoding model config: %w", err)
	}
	if _, err := Parse(data); err != nil {
		return nil, err
	}
	return data, nil
}
