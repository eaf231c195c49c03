package forestflow

// The management API's documents, in Grove's shapes and ForestFlow's: the
// bodies of POST /servable (ServeRequest), of the contract settings and
// policy and logging PUTs, and of the metrics POST. They are read like the
// config file (snake_case or lowerCamelCase, unknown fields are errors),
// and also in ForestFlow's shapes, so ForestFlow's clients and examples
// work unchanged:
//
//	{"expirationPolicy": {"KeepLatest": {"servablesToKeep": 2}}, "router": {"LatestPhaseInPctBasedRouter": {}}}
//	{"validityPolicy": [{"ImmediatelyValid": {}}], "phaseInPolicy": {"LinearTimeBasedPhaseIn": {"phaseInOverSecs": 600}}}
//
// Their values are modelconfig's; the edits that apply them are
// modelconfig's too, and validate the edited config, which is written back
// to the bucket in its canonical form. Every error of a document is a
// *modelconfig.Error.

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"sort"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/groveml/grove/conf/modelconfig"
	"github.com/groveml/grove/internal/jsondoc"
)

// ParseContractSettings reads contract settings: {"router": "latest",
// "expiration": {"keep_latest": 2}, "sticky_key": "user_id", "outcomes":
// {"label": "click", "window": "30m"}}, or ForestFlow's {"router":
// {"LatestPhaseInPctBasedRouter": {}}, "expirationPolicy": {"KeepLatest":
// {"servablesToKeep": 2}}}. Absent fields take their defaults (fair
// router, no expiration, no outcomes): the settings replace the
// contract's. The outcomes object is read and checked by
// modelconfig.DecodeOutcomes, as the config file's; the other values are
// checked when the edited config is validated.
func ParseContractSettings(data []byte) (modelconfig.ContractSettings, error) {
	cs := modelconfig.ContractSettings{Router: modelconfig.RouterFair}
	err := jsondoc.Decode(data, "contract settings", contractSettingsFields(), &cs)
	return cs, err
}

// ParsePolicy reads a servable policy: {"validity": [...], "phase_in":
// {...}, "shadow": {...}, "rollback_when": {...}} as in the config file
// (promote_when and rollback_when with their outcome bounds),
// or ForestFlow's PolicySettings {"validityPolicy": [{"ImmediatelyValid":
// {}}], "phaseInPolicy": {"ImmediatePhaseIn": {}}}. ForestFlow's rule and
// phase-in names are accepted in either field. Absent fields take their
// defaults: no rules, immediate phase-in, no shadow, no rollback gate.
func ParsePolicy(data []byte) (modelconfig.Policy, error) {
	p := modelconfig.Policy{PhaseIn: modelconfig.PhaseIn{Kind: modelconfig.PhaseInImmediate}}
	err := jsondoc.Decode(data, "policy", policyFields(), &p)
	return p, err
}

// ParseLogging reads a servable's logging settings, as in the config file;
// ForestFlow's LoggingSettings ({"logLevel": "FULL", "keyFeatures": [...]})
// is the same document in lowerCamelCase.
func ParseLogging(data []byte) (modelconfig.ServableLogging, error) {
	l := modelconfig.DefaultLogging()
	err := jsondoc.Decode(data, "logging settings", loggingFields(), &l)
	return l, err
}

// ServeRequest is the body of POST /servable: a model in the bucket to
// serve as a release of a contract. In JSON, ForestFlow's BasicServeRequest
// with Grove's model fields:
//
//	{"path": "pctr_v2/",
//	 "checksum": "…", "eviction_grace_period_in_ms": 60000, "warm_up_batch_request_json": "…",
//	 "fqrv": {"contract": {"organization": "ads", "project": "pctr", "contract_number": 1}, "release_version": "v2"},
//	 "servableSettings": {"policySettings": {…a policy, see ParsePolicy…}, "loggingSettings": {…}},
//	 "contractSettings": {…contract settings, only for a new contract…},
//	 "tags": {"any": "string"}}
//
// path (or model_path) is the model's path in the serving bucket, as in
// model_metadata, not a URL: Grove serves what is in its bucket. The model
// fields apply when the path is not in model_metadata yet. tags are
// accepted and ignored, as ForestFlow does. ForestFlow's flavor is refused:
// Grove picks the runtime from the model's files. The model config's edit
// c.AddServable(r.Contract, r.Servable, r.Model, r.ContractSettings) adds
// the release r describes.
type ServeRequest struct {
	// Model is the model_metadata entry to add if the path is not listed.
	Model modelconfig.Model
	// Contract names the contract (organization, project, number); only
	// those fields are set.
	Contract modelconfig.Contract
	// Servable is the release: ReleaseVersion, ModelPath, policy and logging.
	Servable modelconfig.ContractServable
	// ContractSettings, if not nil, are the settings of a contract the
	// request creates; they are refused for an existing contract.
	ContractSettings *modelconfig.ContractSettings
}

// ParseServeRequest reads a serve request; see ServeRequest.
func ParseServeRequest(data []byte) (*ServeRequest, error) {
	r := &ServeRequest{Servable: modelconfig.ContractServable{PhaseIn: modelconfig.PhaseIn{Kind: modelconfig.PhaseInImmediate}, Logging: modelconfig.DefaultLogging()}}
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
func contractSettingsFields() []jsondoc.Field[modelconfig.ContractSettings] {
	var ck []jsondoc.Field[modelconfig.Contract]
	for _, f := range contractFields() {
		if f.Name == "expiration" || f.Name == "sticky_key" {
			ck = append(ck, f)
		}
	}
	// Reuse the contract's decoders through a Contract holding the settings.
	via := func(f jsondoc.Field[modelconfig.Contract]) jsondoc.Field[modelconfig.ContractSettings] {
		return jsondoc.Field[modelconfig.ContractSettings]{Name: f.Name, Decode: func(d *jsondoc.Decoder, path string, cs *modelconfig.ContractSettings) error {
			c := modelconfig.Contract{Router: cs.Router, Expiration: cs.Expiration, StickyKey: cs.StickyKey, Outcomes: cs.Outcomes, Bandit: cs.Bandit}
			err := f.Decode(d, path, &c)
			*cs = c.Settings()
			return err
		}}
	}
	fields := []jsondoc.Field[modelconfig.ContractSettings]{
		{Name: "router", Decode: func(d *jsondoc.Decoder, path string, cs *modelconfig.ContractSettings) error {
			raw, err := d.Raw(path)
			if err != nil || raw == nil {
				return err
			}
			var name string
			if json.Unmarshal(raw, &name) == nil {
				cs.Router = modelconfig.Router(name)
				return nil
			}
			sub := jsondoc.NewDecoder(raw)
			var r modelconfig.Router
			err = jsondoc.DecodeOneOf(sub, path, false, []jsondoc.Field[modelconfig.Router]{
				emptyOption("FairPhaseInPctBasedRouter", func(r *modelconfig.Router) { *r = modelconfig.RouterFair }),
				emptyOption("LatestPhaseInPctBasedRouter", func(r *modelconfig.Router) { *r = modelconfig.RouterLatest }),
			}, &r, func(r *modelconfig.Router, key string) { *r = modelconfig.Router(key) })
			cs.Router = r
			return err
		}},
		{Name: "expiration_policy", SameAs: "expiration", Decode: func(d *jsondoc.Decoder, path string, cs *modelconfig.ContractSettings) error {
			return jsondoc.DecodeOneOf(d, path, true, []jsondoc.Field[modelconfig.Expiration]{
				{Name: "KeepLatest", Decode: func(d *jsondoc.Decoder, path string, e *modelconfig.Expiration) error {
					*e = modelconfig.Expiration{Kind: modelconfig.ExpireKeepLatest}
					return jsondoc.DecodeObject(d, path, []jsondoc.Field[modelconfig.Expiration]{
						{Name: "servablesToKeep", Decode: keepField},
					}, e)
				}},
				{Name: "KeepTopRanked", Decode: func(d *jsondoc.Decoder, path string, e *modelconfig.Expiration) error {
					*e = modelconfig.Expiration{Kind: modelconfig.ExpireKeepTopRanked}
					return jsondoc.DecodeObject(d, path, []jsondoc.Field[modelconfig.Expiration]{
						{Name: "servablesToKeep", Decode: keepField},
						{Name: "metricToEvaluate", Decode: func(d *jsondoc.Decoder, path string, e *modelconfig.Expiration) error {
							return d.String(path, &e.Metric)
						}},
						{Name: "ordering", Decode: func(d *jsondoc.Decoder, path string, e *modelconfig.Expiration) error {
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
			}, &cs.Expiration, func(e *modelconfig.Expiration, key string) { e.Kind = modelconfig.ExpirationKind(key) })
		}},
	}
	for _, f := range ck {
		fields = append(fields, via(f))
	}
	return append(fields, jsondoc.Field[modelconfig.ContractSettings]{Name: "outcomes", Decode: func(d *jsondoc.Decoder, path string, cs *modelconfig.ContractSettings) error {
		return modelconfig.DecodeOutcomes(d, path, &cs.Outcomes)
	}}, jsondoc.Field[modelconfig.ContractSettings]{Name: "bandit", Decode: func(d *jsondoc.Decoder, path string, cs *modelconfig.ContractSettings) error {
		return modelconfig.DecodeBandit(d, path, &cs.Bandit)
	}})
}

// keepField reads ForestFlow's servablesToKeep.
func keepField(d *jsondoc.Decoder, path string, e *modelconfig.Expiration) error {
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
func policyFields() []jsondoc.Field[modelconfig.Policy] {
	rules := func(d *jsondoc.Decoder, path string, p *modelconfig.Policy) error {
		p.Validity = nil
		opts := append(ruleOptions(), forestFlowRuleOptions()...)
		return jsondoc.DecodeArray(d, path, func(path string) error {
			var r modelconfig.ValidityRule
			if err := jsondoc.DecodeOneOf(d, path, false, opts, &r,
				func(r *modelconfig.ValidityRule, key string) { r.Kind = modelconfig.RuleKind(key) }); err != nil {
				return err
			}
			p.Validity = append(p.Validity, r)
			return nil
		})
	}
	phaseIn := func(d *jsondoc.Decoder, path string, p *modelconfig.Policy) error {
		return jsondoc.DecodeOneOf(d, path, true, append(phaseInOptions(), forestFlowPhaseInOptions()...), &p.PhaseIn,
			func(ph *modelconfig.PhaseIn, key string) { ph.Kind = modelconfig.PhaseInKind(key) })
	}
	return []jsondoc.Field[modelconfig.Policy]{
		{Name: "validity", Decode: rules},
		{Name: "validity_policy", SameAs: "validity", Decode: rules},
		{Name: "phase_in", Decode: phaseIn},
		{Name: "phase_in_policy", SameAs: "phase_in", Decode: phaseIn},
		{Name: "shadow", Decode: func(d *jsondoc.Decoder, path string, p *modelconfig.Policy) error {
			return decodeShadow(d, path, &p.Shadow)
		}},
		{Name: "rollback_when", Decode: func(d *jsondoc.Decoder, path string, p *modelconfig.Policy) error {
			return decodeRollbackWhen(d, path, &p.RollbackWhen)
		}},
	}
}

// decodeRollbackWhen reads a servable's rollback_when object into dst;
// null leaves it alone. Its values are checked when the edited config is
// validated.
func decodeRollbackWhen(d *jsondoc.Decoder, path string, dst **modelconfig.RollbackWhen) error {
	if open, err := openObject(d, path); !open {
		return err
	}
	rw := &modelconfig.RollbackWhen{}
	*dst = rw
	return jsondoc.DecodeObjectBody(d, path, []jsondoc.Field[modelconfig.RollbackWhen]{
		{Name: "min_requests", Decode: func(d *jsondoc.Decoder, path string, rw *modelconfig.RollbackWhen) error {
			n, err := d.Integer(path, 0, modelconfig.MaxEventCount)
			rw.MinRequests = n
			return err
		}},
		{Name: "max_error_rate", Decode: func(d *jsondoc.Decoder, path string, rw *modelconfig.RollbackWhen) error {
			return decodeBound(d, path, &rw.MaxErrorRate)
		}},
		{Name: "max_p99_ms", Decode: func(d *jsondoc.Decoder, path string, rw *modelconfig.RollbackWhen) error {
			return decodeBound(d, path, &rw.MaxP99Ms)
		}},
		{Name: "min_outcomes", Decode: func(d *jsondoc.Decoder, path string, rw *modelconfig.RollbackWhen) error {
			n, err := d.Integer(path, 0, modelconfig.MaxEventCount)
			rw.MinOutcomes = n
			return err
		}},
		{Name: "calibration_between", Decode: func(d *jsondoc.Decoder, path string, rw *modelconfig.RollbackWhen) error {
			return decodeRange(d, path, &rw.CalibrationBetween)
		}},
	}, rw)
}

// openObject reads the "{" of an optional object at path: it reports
// false with no error for null, and false with an error for anything but
// an object.
func openObject(d *jsondoc.Decoder, path string) (bool, error) {
	tok, err := d.Token(path)
	switch {
	case err != nil:
		return false, err
	case tok == nil:
		return false, nil
	case tok != json.Delim('{'):
		return false, jsondoc.TypeError(path, "an object", tok)
	}
	return true, nil
}

// decodeBound reads an optional bound of a release gate: null leaves dst
// alone (no bound).
func decodeBound(d *jsondoc.Decoder, path string, dst **float64) error {
	v := math.NaN() // Float refuses NaN, so NaN after it means null
	if err := d.Float(path, &v); err != nil {
		return err
	}
	if !math.IsNaN(v) {
		*dst = &v
	}
	return nil
}

// decodeRange reads an optional [lo, hi] bound of a release gate, such as
// calibration_between, checked by modelconfig.ParseRange as the config
// file's is: null or [] leaves dst alone (no bound).
func decodeRange(d *jsondoc.Decoder, path string, dst **modelconfig.Range) error {
	var v []float64
	if err := jsondoc.DecodeArray(d, path, func(path string) error {
		tok, err := d.Token(path)
		switch {
		case err != nil:
			return err
		case tok == nil: // protobuf refuses null in a list
			return jsondoc.TypeError(path, "a number", tok)
		}
		f, err := jsondoc.FloatValue(path, tok)
		v = append(v, f)
		return err
	}); err != nil || v == nil {
		return err
	}
	r, err := modelconfig.ParseRange(path[strings.LastIndexByte(path, '.')+1:], v) // the key's name
	if err != nil {
		return &jsondoc.Error{Field: path, Msg: err.Error()}
	}
	*dst = r
	return nil
}

// forestFlowRuleOptions are ForestFlow's validity rules (ValidityRules.proto).
func forestFlowRuleOptions() []jsondoc.Field[modelconfig.ValidityRule] {
	return []jsondoc.Field[modelconfig.ValidityRule]{
		emptyOption("ImmediatelyValid", func(r *modelconfig.ValidityRule) {
			*r = modelconfig.ValidityRule{Kind: modelconfig.RuleImmediatelyValid}
		}),
		emptyOption("NeverValid", func(r *modelconfig.ValidityRule) { *r = modelconfig.ValidityRule{Kind: modelconfig.RuleNeverValid} }),
		{Name: "TimeBasedValidity", Decode: func(d *jsondoc.Decoder, path string, r *modelconfig.ValidityRule) error {
			*r = modelconfig.ValidityRule{Kind: modelconfig.RuleValidAfterMs}
			return jsondoc.DecodeObject(d, path, []jsondoc.Field[modelconfig.ValidityRule]{
				{Name: "validAfterMS", Decode: func(d *jsondoc.Decoder, path string, r *modelconfig.ValidityRule) error {
					ms, err := d.Integer(path, 0, modelconfig.MaxValidAfterMs)
					r.After = time.Duration(ms) * time.Millisecond
					return err
				}},
			}, r)
		}},
		{Name: "MinServedEventsBasedValidity", Decode: func(d *jsondoc.Decoder, path string, r *modelconfig.ValidityRule) error {
			*r = modelconfig.ValidityRule{Kind: modelconfig.RuleMinServedEvents}
			return jsondoc.DecodeObject(d, path, []jsondoc.Field[modelconfig.ValidityRule]{
				{Name: "validAfterMinServedEvents", Decode: func(d *jsondoc.Decoder, path string, r *modelconfig.ValidityRule) error {
					n, err := d.Integer(path, 0, modelconfig.MaxEventCount)
					r.Count = n
					return err
				}},
			}, r)
		}},
		// ForestFlow's PerformanceBasedValidity names no metric, and
		// ForestFlow never measured one: here it is the live AUC of the
		// release's predictions against the contract's binary outcomes
		// (min_metric outcome_auc), which is what it was meant to judge.
		{Name: "PerformanceBasedValidity", Decode: func(d *jsondoc.Decoder, path string, r *modelconfig.ValidityRule) error {
			*r = modelconfig.ValidityRule{Kind: modelconfig.RuleMinMetric, Metric: modelconfig.MetricOutcomeAUC}
			return jsondoc.DecodeObject(d, path, []jsondoc.Field[modelconfig.ValidityRule]{
				{Name: "minThreshold", Decode: func(d *jsondoc.Decoder, path string, r *modelconfig.ValidityRule) error {
					if err := d.Float(path, &r.Threshold); err != nil {
						return err
					}
					if r.Threshold < 0 || r.Threshold > 1 {
						return &jsondoc.Error{Field: path, Msg: fmt.Sprintf("%v is not an AUC (0 to 1): PerformanceBasedValidity holds while the live outcome_auc is at least minThreshold", r.Threshold)}
					}
					return nil
				}},
			}, r)
		}},
	}
}

// forestFlowPhaseInOptions are ForestFlow's phase-in policies (PhaseInPolicies.proto).
func forestFlowPhaseInOptions() []jsondoc.Field[modelconfig.PhaseIn] {
	return []jsondoc.Field[modelconfig.PhaseIn]{
		emptyOption("ImmediatePhaseIn", func(p *modelconfig.PhaseIn) { *p = modelconfig.PhaseIn{Kind: modelconfig.PhaseInImmediate} }),
		{Name: "LinearTimeBasedPhaseIn", Decode: func(d *jsondoc.Decoder, path string, p *modelconfig.PhaseIn) error {
			*p = modelconfig.PhaseIn{Kind: modelconfig.PhaseInLinear}
			return jsondoc.DecodeObject(d, path, []jsondoc.Field[modelconfig.PhaseIn]{
				{Name: "phase_in_over_secs", Decode: func(d *jsondoc.Decoder, path string, p *modelconfig.PhaseIn) error {
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
		f, _ := jsondoc.Lookup(modelFields(), name)
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
		via("missing_value"),
		via("default_timeout_ms"),
		via("queue_timeout_ms"),
		{Name: "fqrv", Decode: func(d *jsondoc.Decoder, path string, r *ServeRequest) error {
			return jsondoc.DecodeObject(d, path, []jsondoc.Field[ServeRequest]{
				{Name: "contract", Decode: func(d *jsondoc.Decoder, path string, r *ServeRequest) error {
					var names []jsondoc.Field[modelconfig.Contract]
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
					r.Servable.Validity, r.Servable.PhaseIn, r.Servable.Shadow, r.Servable.RollbackWhen = p.Validity, p.PhaseIn, p.Shadow, p.RollbackWhen
					return nil
				}},
				{Name: "logging_settings", Decode: func(d *jsondoc.Decoder, path string, r *ServeRequest) error {
					return jsondoc.DecodeObject(d, path, loggingFields(), &r.Servable.Logging)
				}},
			}, r)
		}},
		{Name: "contract_settings", Decode: func(d *jsondoc.Decoder, path string, r *ServeRequest) error {
			cs := modelconfig.ContractSettings{Router: modelconfig.RouterFair}
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

// ParseMetrics reads a metrics update: a JSON object of metric names to
// finite numbers, or to null to delete the metric, such as {"auc": 0.71,
// "logloss": null}. Names are 1 to 128 bytes; at most 64 are given.
func ParseMetrics(data []byte) (modelconfig.MetricsUpdate, error) {
	var raw map[string]*float64
	if !utf8.Valid(data) {
		return modelconfig.MetricsUpdate{}, &jsondoc.Error{Msg: "metrics are not valid UTF-8"}
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	if err := dec.Decode(&raw); err != nil {
		return modelconfig.MetricsUpdate{}, &jsondoc.Error{Msg: fmt.Sprintf(`metrics must be a JSON object of names to numbers, like {"auc": 0.71}: %v`, err), Err: err}
	}
	if _, err := dec.Token(); err != io.EOF {
		return modelconfig.MetricsUpdate{}, &jsondoc.Error{Msg: "unexpected data after the metrics object"}
	}
	if raw == nil {
		return modelconfig.MetricsUpdate{}, &jsondoc.Error{Msg: `metrics must be a JSON object of names to numbers, like {"auc": 0.71}, got null`}
	}
	if len(raw) == 0 {
		return modelconfig.MetricsUpdate{}, &jsondoc.Error{Msg: "no metrics given"}
	}
	u := modelconfig.MetricsUpdate{Set: map[string]float64{}}
	for name, v := range raw {
		if v == nil {
			u.Delete = append(u.Delete, name)
		} else {
			u.Set[name] = *v
		}
	}
	sort.Strings(u.Delete)
	if err := modelconfig.ValidateMetrics(u.Set); err != nil {
		return modelconfig.MetricsUpdate{}, &jsondoc.Error{Msg: err.Error()}
	}
	for _, name := range u.Delete {
		if err := modelconfig.ValidateMetricName(name); err != nil {
			return modelconfig.MetricsUpdate{}, &jsondoc.Error{Msg: err.Error()}
		}
	}
	if len(raw) > modelconfig.MaxMetrics {
		return modelconfig.MetricsUpdate{}, &jsondoc.Error{Msg: fmt.Sprintf("%d metrics given; at most %d", len(raw), modelconfig.MaxMetrics)}
	}
	return u, nil
}

// modelFields are the fields of a model_metadata entry, as a serve
// request gives them.
func modelFields() []jsondoc.Field[modelconfig.Model] {
	return []jsondoc.Field[modelconfig.Model]{
		{Name: "model_path", Decode: func(d *jsondoc.Decoder, path string, m *modelconfig.Model) error {
			return d.String(path, &m.Path)
		}},
		{Name: "checksum", Decode: func(d *jsondoc.Decoder, path string, m *modelconfig.Model) error {
			return d.String(path, &m.Checksum)
		}},
		{Name: "warm_up_batch_request_json", Decode: func(d *jsondoc.Decoder, path string, m *modelconfig.Model) error {
			return d.String(path, &m.WarmUpJSON)
		}},
		{Name: "eviction_grace_period_in_ms", Decode: func(d *jsondoc.Decoder, path string, m *modelconfig.Model) error {
			ms, err := d.Integer(path, 0, modelconfig.MaxGracePeriodMs)
			if err != nil {
				return err
			}
			m.EvictionGracePeriod = time.Duration(ms) * time.Millisecond
			return nil
		}},
		{Name: "replicas", Decode: func(d *jsondoc.Decoder, path string, m *modelconfig.Model) error {
			n, err := d.Integer(path, 0, modelconfig.MaxReplicas)
			m.Serving.Replicas = int(n)
			return err
		}},
		{Name: "max_batch_rows", Decode: func(d *jsondoc.Decoder, path string, m *modelconfig.Model) error {
			n, err := d.Integer(path, 0, modelconfig.MaxBatchRowsLimit)
			m.Serving.MaxBatchRows = int(n)
			return err
		}},
		{Name: "max_queue_delay_us", Decode: func(d *jsondoc.Decoder, path string, m *modelconfig.Model) error {
			us, err := d.Integer(path, 0, modelconfig.MaxQueueDelayUs)
			m.Serving.MaxQueueDelay = time.Duration(us) * time.Microsecond
			return err
		}},
		{Name: "intra_op_threads", Decode: func(d *jsondoc.Decoder, path string, m *modelconfig.Model) error {
			n, err := d.Integer(path, 0, modelconfig.MaxIntraOpThreads)
			m.Serving.IntraOpThreads = int(n)
			return err
		}},
		{Name: "missing_value", Decode: func(d *jsondoc.Decoder, path string, m *modelconfig.Model) error {
			v := math.NaN() // Float rejects NaN: still NaN after null
			if err := d.Float(path, &v); err != nil || math.IsNaN(v) {
				return err
			}
			m.Serving.MissingValue, m.Serving.HasMissingValue = v, true
			return nil
		}},
		{Name: "default_timeout_ms", Decode: func(d *jsondoc.Decoder, path string, m *modelconfig.Model) error {
			ms, err := d.Integer(path, 0, modelconfig.MaxTimeoutMs)
			m.DefaultTimeout = time.Duration(ms) * time.Millisecond
			return err
		}},
		{Name: "queue_timeout_ms", Decode: func(d *jsondoc.Decoder, path string, m *modelconfig.Model) error {
			ms, err := d.Integer(path, 0, modelconfig.MaxTimeoutMs)
			m.QueueTimeout = time.Duration(ms) * time.Millisecond
			return err
		}},
	}
}

// contractFields are the fields of a contracts entry that the management
// documents read: the contract's name and some of its settings (the router
// and the servables have their own shapes there).
func contractFields() []jsondoc.Field[modelconfig.Contract] {
	return []jsondoc.Field[modelconfig.Contract]{
		{Name: "organization", Decode: func(d *jsondoc.Decoder, path string, c *modelconfig.Contract) error {
			return d.String(path, &c.Organization)
		}},
		{Name: "project", Decode: func(d *jsondoc.Decoder, path string, c *modelconfig.Contract) error {
			return d.String(path, &c.Project)
		}},
		{Name: "contract_number", Decode: func(d *jsondoc.Decoder, path string, c *modelconfig.Contract) error {
			n, err := d.Integer(path, math.MinInt32, math.MaxInt32)
			c.Number = int(n)
			return err
		}},
		{Name: "expiration", Decode: func(d *jsondoc.Decoder, path string, c *modelconfig.Contract) error {
			return jsondoc.DecodeOneOf(d, path, true, expirationOptions(), &c.Expiration,
				func(e *modelconfig.Expiration, key string) { e.Kind = modelconfig.ExpirationKind(key) })
		}},
		{Name: "sticky_key", Decode: func(d *jsondoc.Decoder, path string, c *modelconfig.Contract) error {
			return d.String(path, &c.StickyKey)
		}},
	}
}

// expirationOptions are the keys of an expiration object.
func expirationOptions() []jsondoc.Field[modelconfig.Expiration] {
	return []jsondoc.Field[modelconfig.Expiration]{
		{Name: string(modelconfig.ExpireKeepLatest), Decode: func(d *jsondoc.Decoder, path string, e *modelconfig.Expiration) error {
			n, err := d.Integer(path, math.MinInt32, math.MaxInt32)
			*e = modelconfig.Expiration{Kind: modelconfig.ExpireKeepLatest, Keep: int(n)}
			return err
		}},
		{Name: string(modelconfig.ExpireKeepTopRanked), Decode: func(d *jsondoc.Decoder, path string, e *modelconfig.Expiration) error {
			*e = modelconfig.Expiration{Kind: modelconfig.ExpireKeepTopRanked}
			return jsondoc.DecodeObject(d, path, []jsondoc.Field[modelconfig.Expiration]{
				{Name: "n", Decode: func(d *jsondoc.Decoder, path string, e *modelconfig.Expiration) error {
					n, err := d.Integer(path, math.MinInt32, math.MaxInt32)
					e.Keep = int(n)
					return err
				}},
				{Name: "metric", Decode: func(d *jsondoc.Decoder, path string, e *modelconfig.Expiration) error {
					return d.String(path, &e.Metric)
				}},
			}, e)
		}},
	}
}

// decodeShadow reads a servable's shadow object into dst; null leaves it
// alone, {} shadows every request.
func decodeShadow(d *jsondoc.Decoder, path string, dst **modelconfig.Shadow) error {
	if open, err := openObject(d, path); !open {
		return err
	}
	sh := &modelconfig.Shadow{SampleRate: 1}
	*dst = sh
	return jsondoc.DecodeObjectBody(d, path, []jsondoc.Field[modelconfig.Shadow]{
		{Name: "sample_rate", Decode: func(d *jsondoc.Decoder, path string, sh *modelconfig.Shadow) error {
			return d.Float(path, &sh.SampleRate)
		}},
	}, sh)
}

// ruleOptions are the keys of a validity rule object.
func ruleOptions() []jsondoc.Field[modelconfig.ValidityRule] {
	empty := func(kind modelconfig.RuleKind) jsondoc.Field[modelconfig.ValidityRule] {
		return jsondoc.Field[modelconfig.ValidityRule]{Name: string(kind), Decode: func(d *jsondoc.Decoder, path string, r *modelconfig.ValidityRule) error {
			*r = modelconfig.ValidityRule{Kind: kind}
			return jsondoc.DecodeObject(d, path, []jsondoc.Field[modelconfig.ValidityRule]{}, r)
		}}
	}
	return []jsondoc.Field[modelconfig.ValidityRule]{
		empty(modelconfig.RuleImmediatelyValid),
		empty(modelconfig.RuleNeverValid),
		{Name: string(modelconfig.RuleValidAfterMs), Decode: func(d *jsondoc.Decoder, path string, r *modelconfig.ValidityRule) error {
			*r = modelconfig.ValidityRule{Kind: modelconfig.RuleValidAfterMs}
			return jsondoc.DecodeObject(d, path, []jsondoc.Field[modelconfig.ValidityRule]{
				{Name: "ms", Decode: func(d *jsondoc.Decoder, path string, r *modelconfig.ValidityRule) error {
					ms, err := d.Integer(path, 0, modelconfig.MaxValidAfterMs)
					r.After = time.Duration(ms) * time.Millisecond
					return err
				}},
			}, r)
		}},
		{Name: string(modelconfig.RuleMinServedEvents), Decode: func(d *jsondoc.Decoder, path string, r *modelconfig.ValidityRule) error {
			*r = modelconfig.ValidityRule{Kind: modelconfig.RuleMinServedEvents}
			return jsondoc.DecodeObject(d, path, []jsondoc.Field[modelconfig.ValidityRule]{
				{Name: "count", Decode: func(d *jsondoc.Decoder, path string, r *modelconfig.ValidityRule) error {
					n, err := d.Integer(path, 0, modelconfig.MaxEventCount)
					r.Count = n
					return err
				}},
			}, r)
		}},
		{Name: string(modelconfig.RuleMinMetric), Decode: func(d *jsondoc.Decoder, path string, r *modelconfig.ValidityRule) error {
			*r = modelconfig.ValidityRule{Kind: modelconfig.RuleMinMetric}
			return jsondoc.DecodeObject(d, path, []jsondoc.Field[modelconfig.ValidityRule]{
				{Name: "metric", Decode: func(d *jsondoc.Decoder, path string, r *modelconfig.ValidityRule) error {
					return d.String(path, &r.Metric)
				}},
				{Name: "threshold", Decode: func(d *jsondoc.Decoder, path string, r *modelconfig.ValidityRule) error {
					return d.Float(path, &r.Threshold)
				}},
			}, r)
		}},
		{Name: string(modelconfig.RulePromoteWhen), Decode: func(d *jsondoc.Decoder, path string, r *modelconfig.ValidityRule) error {
			*r = modelconfig.ValidityRule{Kind: modelconfig.RulePromoteWhen}
			return jsondoc.DecodeObject(d, path, []jsondoc.Field[modelconfig.ValidityRule]{
				{Name: "min_shadow_executions", Decode: func(d *jsondoc.Decoder, path string, r *modelconfig.ValidityRule) error {
					n, err := d.Integer(path, 0, modelconfig.MaxEventCount)
					r.Promote.MinShadowExecutions = n
					return err
				}},
				{Name: "max_mean_abs_diff", Decode: func(d *jsondoc.Decoder, path string, r *modelconfig.ValidityRule) error {
					return decodeBound(d, path, &r.Promote.MaxMeanAbsDiff)
				}},
				{Name: "max_error_rate", Decode: func(d *jsondoc.Decoder, path string, r *modelconfig.ValidityRule) error {
					return decodeBound(d, path, &r.Promote.MaxErrorRate)
				}},
				{Name: "max_p99_ratio", Decode: func(d *jsondoc.Decoder, path string, r *modelconfig.ValidityRule) error {
					return decodeBound(d, path, &r.Promote.MaxP99Ratio)
				}},
				{Name: "min_outcomes", Decode: func(d *jsondoc.Decoder, path string, r *modelconfig.ValidityRule) error {
					n, err := d.Integer(path, 0, modelconfig.MaxEventCount)
					r.Promote.MinOutcomes = n
					return err
				}},
				{Name: "max_logloss_delta", Decode: func(d *jsondoc.Decoder, path string, r *modelconfig.ValidityRule) error {
					return decodeBound(d, path, &r.Promote.MaxLogLossDelta)
				}},
				{Name: "logloss_confidence", Decode: func(d *jsondoc.Decoder, path string, r *modelconfig.ValidityRule) error {
					return decodeBound(d, path, &r.Promote.LogLossConfidence)
				}},
				{Name: "min_auc_delta", Decode: func(d *jsondoc.Decoder, path string, r *modelconfig.ValidityRule) error {
					return decodeBound(d, path, &r.Promote.MinAUCDelta)
				}},
				{Name: "calibration_between", Decode: func(d *jsondoc.Decoder, path string, r *modelconfig.ValidityRule) error {
					return decodeRange(d, path, &r.Promote.CalibrationBetween)
				}},
			}, r)
		}},
	}
}

// phaseInOptions are the keys of a phase_in object.
func phaseInOptions() []jsondoc.Field[modelconfig.PhaseIn] {
	return []jsondoc.Field[modelconfig.PhaseIn]{
		{Name: string(modelconfig.PhaseInImmediate), Decode: func(d *jsondoc.Decoder, path string, p *modelconfig.PhaseIn) error {
			*p = modelconfig.PhaseIn{Kind: modelconfig.PhaseInImmediate}
			return jsondoc.DecodeObject(d, path, []jsondoc.Field[modelconfig.PhaseIn]{}, p)
		}},
		{Name: string(modelconfig.PhaseInLinear), Decode: func(d *jsondoc.Decoder, path string, p *modelconfig.PhaseIn) error {
			*p = modelconfig.PhaseIn{Kind: modelconfig.PhaseInLinear}
			return jsondoc.DecodeObject(d, path, []jsondoc.Field[modelconfig.PhaseIn]{
				{Name: "secs", Decode: func(d *jsondoc.Decoder, path string, p *modelconfig.PhaseIn) error {
					secs, err := d.Integer(path, math.MinInt32, math.MaxInt32)
					p.Over = time.Duration(secs) * time.Second
					return err
				}},
			}, p)
		}},
	}
}

// loggingFields are the fields of a servable's logging object.
func loggingFields() []jsondoc.Field[modelconfig.ServableLogging] {
	return []jsondoc.Field[modelconfig.ServableLogging]{
		{Name: "log_level", Decode: func(d *jsondoc.Decoder, path string, l *modelconfig.ServableLogging) error {
			return d.String(path, &l.Level)
		}},
		{Name: "sample_rate", Decode: func(d *jsondoc.Decoder, path string, l *modelconfig.ServableLogging) error {
			return d.Float(path, &l.SampleRate)
		}},
		{Name: "key_features", Decode: func(d *jsondoc.Decoder, path string, l *modelconfig.ServableLogging) error {
			return jsondoc.DecodeArray(d, path, func(path string) error {
				tok, err := d.Token(path)
				if err != nil {
					return err
				}
				f, ok := tok.(string)
				if !ok {
					return jsondoc.TypeError(path, "a string", tok)
				}
				l.KeyFeatures = append(l.KeyFeatures, f)
				return nil
			})
		}},
		{Name: "key_features_separator", Decode: func(d *jsondoc.Decoder, path string, l *modelconfig.ServableLogging) error {
			return d.String(path, &l.KeyFeaturesSeparator)
		}},
	}
}
