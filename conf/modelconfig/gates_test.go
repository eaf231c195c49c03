package modelconfig

import (
	"encoding/json"
	"reflect"
	"testing"
)

// gatesExample uses both release gates: a shadow challenger promoted by
// promote_when (every bound, then only the required count) and a release
// rolled back by rollback_when while it phases in.
const gatesExample = `{"model_metadata": [{"model_path": "a/"}, {"model_path": "b/"}, {"model_path": "c/"}],
 "contracts": [{"organization": "ads", "project": "pctr", "contract_number": 1, "router": "latest",
   "servables": [
     {"release_version": "v1", "model_path": "a/"},
     {"release_version": "v2", "model_path": "b/", "shadow": {},
      "validity": [{"promote_when": {"min_shadow_executions": 10000, "max_mean_abs_diff": 0.01, "max_error_rate": 0.001, "max_p99_ratio": 1.2}}],
      "phase_in": {"linear_over_secs": {"secs": 600}},
      "rollback_when": {"max_error_rate": 0.01, "max_p99_ms": 20, "min_requests": 500}},
     {"releaseVersion": "v3", "modelPath": "c/", "shadow": {},
      "validity": [{"promoteWhen": {"minShadowExecutions": "5"}}],
      "phaseIn": {"linearOverSecs": {"secs": 60}},
      "rollbackWhen": {"minRequests": 1, "maxP99Ms": "2.5"}}]}]}`

func TestParseModelConfigReadsTheGates(t *testing.T) {
	c, err := Parse([]byte(gatesExample))
	if err != nil {
		t.Fatal(err)
	}
	f := func(v float64) *float64 { return &v }
	sv := c.Contracts[0].Servables
	if want := (ValidityRule{Kind: RulePromoteWhen, Promote: PromoteWhen{MinShadowExecutions: 10000, MaxMeanAbsDiff: f(0.01), MaxErrorRate: f(0.001), MaxP99Ratio: f(1.2)}}); !reflect.DeepEqual(sv[1].Validity, []ValidityRule{want}) {
		t.Errorf("v2 validity = %+v, want %+v", sv[1].Validity, want)
	}
	if want := (&RollbackWhen{MinRequests: 500, MaxErrorRate: f(0.01), MaxP99Ms: f(20)}); !reflect.DeepEqual(sv[1].RollbackWhen, want) {
		t.Errorf("v2 rollback_when = %+v, want %+v", sv[1].RollbackWhen, want)
	}
	// Absent bounds are nil: no bound.
	if want := (ValidityRule{Kind: RulePromoteWhen, Promote: PromoteWhen{MinShadowExecutions: 5}}); !reflect.DeepEqual(sv[2].Validity, []ValidityRule{want}) {
		t.Errorf("v3 validity = %+v, want %+v", sv[2].Validity, want)
	}
	if want := (&RollbackWhen{MinRequests: 1, MaxP99Ms: f(2.5)}); !reflect.DeepEqual(sv[2].RollbackWhen, want) {
		t.Errorf("v3 rollback_when = %+v, want %+v", sv[2].RollbackWhen, want)
	}
	if sv[0].RollbackWhen != nil {
		t.Errorf("v1 has a rollback_when it was not given: %+v", sv[0].RollbackWhen)
	}
	if got := sv[1].Policy().RollbackWhen; got != sv[1].RollbackWhen {
		t.Errorf("Policy().RollbackWhen = %p, want the servable's %p", got, sv[1].RollbackWhen)
	}
}

func TestModelConfigMarshalJSONRoundTripsTheGates(t *testing.T) {
	c, err := Parse([]byte(gatesExample))
	if err != nil {
		t.Fatal(err)
	}
	out, err := json.Marshal(c)
	if err != nil {
		t.Fatal(err)
	}
	c2, err := Parse(out)
	if err != nil {
		t.Fatalf("re-parsing %s: %v", out, err)
	}
	if !reflect.DeepEqual(c, c2) {
		t.Errorf("round trip changed the config:\n%+v\n%+v", c, c2)
	}
	// The canonical form writes the bounds given and leaves the others out.
	got, err := json.Marshal(c.Contracts[0].Servables[2])
	if err != nil {
		t.Fatal(err)
	}
	want := `{"release_version":"v3","model_path":"c/","validity":[{"promote_when":{"min_shadow_executions":5}}],"phase_in":{"linear_over_secs":{"secs":60}},"shadow":{"sample_rate":1},"rollback_when":{"min_requests":1,"max_p99_ms":2.5},"logging":{"log_level":"NONE","sample_rate":1,"key_features":[],"key_features_separator":"."}}`
	if string(got) != want {
		t.Errorf("got  %s\nwant %s", got, want)
	}
}

func TestParseModelConfigGateErrors(t *testing.T) {
	servable := func(members string) string {
		return `{"model_metadata": [{"model_path": "a/"}], "contracts": [{"organization": "ads", "project": "pctr", "contract_number": 1,
			"servables": [{"release_version": "v2", "model_path": "a/"` + members + `}]}]}`
	}
	ramp := `, "phase_in": {"linear_over_secs": {"secs": 60}}`
	for _, tc := range []struct{ name, data, want string }{
		{"promote_when without a shadow", servable(`, "validity": [{"promote_when": {"min_shadow_executions": 10}}]`),
			`contracts[0].servables[0].validity[0].promote_when: contract ads/pctr/1: release v2: promote_when judges the release's shadow answers, and it has no shadow setting`},
		{"promote_when without count", servable(`, "shadow": {}, "validity": [{"promote_when": {"max_mean_abs_diff": 0.01}}]`),
			`contracts[0].servables[0].validity[0].promote_when.min_shadow_executions: contract ads/pctr/1: release v2: promote_when needs min_shadow_executions from 1 to 9007199254740992, got 0`},
		{"promote_when count out of range", servable(`, "validity": [{"promote_when": {"min_shadow_executions": 1e16}}]`),
			`promote_when.min_shadow_executions: 1e16 is out of range 0..9007199254740992`},
		{"negative mean abs diff", servable(`, "shadow": {}, "validity": [{"promote_when": {"min_shadow_executions": 1, "max_mean_abs_diff": -0.1}}]`),
			`validity[0].promote_when.max_mean_abs_diff: contract ads/pctr/1: release v2: promote_when max_mean_abs_diff -0.1 is negative; bounds are 0 or more`},
		{"error rate above 1", servable(`, "shadow": {}, "validity": [{"promote_when": {"min_shadow_executions": 1, "max_error_rate": 1.5}}]`),
			`promote_when.max_error_rate: contract ads/pctr/1: release v2: promote_when max_error_rate 1.5 is not between 0 and 1`},
		{"infinite p99 ratio", servable(`, "shadow": {}, "validity": [{"promote_when": {"min_shadow_executions": 1, "max_p99_ratio": "Infinity"}}]`),
			`promote_when.max_p99_ratio: "Infinity" is not a number`},
		{"unknown promote_when field", servable(`, "shadow": {}, "validity": [{"promote_when": {"min_shadow_executions": 1, "max_auc_drop": 0.1}}]`),
			`validity[0].promote_when: unknown field "max_auc_drop"`},
		{"rollback_when without min_requests", servable(ramp + `, "rollback_when": {"max_error_rate": 0.01}`),
			`contracts[0].servables[0].rollback_when.min_requests: contract ads/pctr/1: release v2: rollback_when needs min_requests from 1 to 9007199254740992, got 0`},
		{"rollback_when without bound", servable(ramp + `, "rollback_when": {"min_requests": 10}`),
			`contracts[0].servables[0].rollback_when: contract ads/pctr/1: release v2: rollback_when needs at least one bound: max_error_rate, max_p99_ms or calibration_between`},
		{"rollback error rate above 1", servable(ramp + `, "rollback_when": {"min_requests": 10, "max_error_rate": 2}`),
			`rollback_when.max_error_rate: contract ads/pctr/1: release v2: rollback_when max_error_rate 2 is not between 0 and 1`},
		{"negative p99", servable(ramp + `, "rollback_when": {"min_requests": 10, "max_p99_ms": -1}`),
			`rollback_when.max_p99_ms: contract ads/pctr/1: release v2: rollback_when max_p99_ms -1 is negative`},
		{"rollback_when without a ramp", servable(`, "rollback_when": {"min_requests": 10, "max_error_rate": 0.01}`),
			`contracts[0].servables[0].rollback_when: contract ads/pctr/1: release v2: rollback_when watches a release while it phases in, and phase_in is immediate`},
		{"rollback_when not an object", servable(`, "rollback_when": 5`), `rollback_when: expected an object, got number 5`},
		{"unknown rollback_when field", servable(ramp + `, "rollback_when": {"min_requests": 10, "max_errors": 3}`), `rollback_when: unknown field "max_errors"`},
	} {
		t.Run(tc.name, func(t *testing.T) { checkParseError(t, tc.data, tc.want) })
	}
}

func TestSetPolicyCarriesTheRollbackGate(t *testing.T) {
	c, err := Parse([]byte(gatesExample))
	if err != nil {
		t.Fatal(err)
	}
	p := c.Contracts[0].Servables[1].Policy()
	if err := c.SetPolicy("ads/pctr/1", "v3", p); err != nil {
		t.Fatal(err)
	}
	data, err := c.Validate()
	if err != nil {
		t.Fatal(err)
	}
	c2, _ := Parse(data)
	if got := c2.Contracts[0].Servables[2]; !reflect.DeepEqual(got.Policy(), p) {
		t.Errorf("v3's policy after SetPolicy = %+v, want %+v", got.Policy(), p)
	}
}
