package forestflow

import (
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/groveml/grove/conf/modelconfig"
)

// checkDocumentError fails t unless err is a *modelconfig.Error whose
// message contains want.
func checkDocumentError(t *testing.T, err error, want string) {
	t.Helper()
	if err == nil {
		t.Fatalf("no error, want %q", want)
	}
	var ce *modelconfig.Error
	if !errors.As(err, &ce) {
		t.Errorf("error %T is not a *modelconfig.Error: %v", err, err)
	}
	if !strings.Contains(err.Error(), want) {
		t.Errorf("error %q does not contain %q", err, want)
	}
}

// defaultServableLogging is the logging of a servable given none.
var defaultServableLogging = modelconfig.ServableLogging{Level: modelconfig.LogLevelNone, SampleRate: 1, KeyFeaturesSeparator: "."}

func TestParseContractSettingsReadsGroveAndForestFlowShapes(t *testing.T) {
	for _, tc := range []struct {
		name, data string
		want       modelconfig.ContractSettings
	}{
		{"empty object takes the defaults", `{}`, modelconfig.ContractSettings{Router: modelconfig.RouterFair}},
		{"nulls take the defaults", `{"router": null, "expiration": null, "sticky_key": null}`, modelconfig.ContractSettings{Router: modelconfig.RouterFair}},
		{"config shape", `{"router": "latest", "expiration": {"keep_latest": 2}, "sticky_key": "user_id"}`,
			modelconfig.ContractSettings{Router: modelconfig.RouterLatest, Expiration: modelconfig.Expiration{Kind: modelconfig.ExpireKeepLatest, Keep: 2}, StickyKey: "user_id"}},
		{"config shape in lowerCamelCase", `{"router": "fair", "expiration": {"keepTopRanked": {"n": "3", "metric": "auc"}}, "stickyKey": "u"}`,
			modelconfig.ContractSettings{Router: modelconfig.RouterFair, Expiration: modelconfig.Expiration{Kind: modelconfig.ExpireKeepTopRanked, Keep: 3, Metric: "auc"}, StickyKey: "u"}},
		{"ForestFlow's contract creation body", `{"expirationPolicy":{"KeepLatest":{"servablesToKeep":2}},"router":{"LatestPhaseInPctBasedRouter":{}}}`,
			modelconfig.ContractSettings{Router: modelconfig.RouterLatest, Expiration: modelconfig.Expiration{Kind: modelconfig.ExpireKeepLatest, Keep: 2}}},
		{"ForestFlow's fair router and KeepTopRanked in snake_case", `{"expiration_policy": {"KeepTopRanked": {"servablesToKeep": "1", "metricToEvaluate": "auc", "ordering": "DESC"}}, "router": {"FairPhaseInPctBasedRouter": {}}}`,
			modelconfig.ContractSettings{Router: modelconfig.RouterFair, Expiration: modelconfig.Expiration{Kind: modelconfig.ExpireKeepTopRanked, Keep: 1, Metric: "auc"}}},
		{"KeepTopRanked without ordering", `{"expirationPolicy": {"KeepTopRanked": {"servablesToKeep": 2, "metricToEvaluate": "auc"}}}`,
			modelconfig.ContractSettings{Router: modelconfig.RouterFair, Expiration: modelconfig.Expiration{Kind: modelconfig.ExpireKeepTopRanked, Keep: 2, Metric: "auc"}}},
		{"KeepLatest without servablesToKeep is left to validation", `{"expirationPolicy": {"KeepLatest": {}}}`,
			modelconfig.ContractSettings{Router: modelconfig.RouterFair, Expiration: modelconfig.Expiration{Kind: modelconfig.ExpireKeepLatest}}},
		{"unknown router name is left to validation", `{"router": "random"}`, modelconfig.ContractSettings{Router: "random"}},
		{"unknown ForestFlow router is left to validation", `{"router": {"RandomRouter": {"x": [1]}}}`, modelconfig.ContractSettings{Router: "RandomRouter"}},
		{"unknown expiration policy is left to validation", `{"expirationPolicy": {"KeepOldest": {"servablesToKeep": 1}}}`,
			modelconfig.ContractSettings{Router: modelconfig.RouterFair, Expiration: modelconfig.Expiration{Kind: "KeepOldest"}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := ParseContractSettings([]byte(tc.data))
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got, tc.want) {
				t.Errorf("got  %+v\nwant %+v", got, tc.want)
			}
		})
	}
}

func TestParseContractSettingsErrors(t *testing.T) {
	for _, tc := range []struct {
		name, data, want string
	}{
		{"unknown field", `{"routr": "fair"}`, `unknown field "routr"`},
		{"servables are not settings", `{"router": "fair", "servables": []}`, `unknown field "servables"`},
		{"duplicate field", `{"router": "fair", "router": "latest"}`, `duplicate field "router"`},
		{"duplicate field in two spellings", `{"sticky_key": "a", "stickyKey": "b"}`, `duplicate field "stickyKey" (already given as "sticky_key")`},
		{"ordering ASC refused", `{"expirationPolicy": {"KeepTopRanked": {"servablesToKeep": 2, "metricToEvaluate": "logloss", "ordering": "ASC"}}}`,
			`expiration_policy.KeepTopRanked.ordering: ordering "ASC" is not supported: keep_top_ranked keeps the highest values (DESC)`},
		{"ordering not a string", `{"expirationPolicy": {"KeepTopRanked": {"ordering": 2}}}`, `ordering: expected a string, got number 2`},
		{"unknown field in KeepLatest", `{"expirationPolicy": {"KeepLatest": {"n": 2}}}`, `expiration_policy.KeepLatest: unknown field "n"`},
		{"servablesToKeep not a number", `{"expirationPolicy": {"KeepLatest": {"servablesToKeep": "two"}}}`, `expiration_policy.KeepLatest.servablesToKeep: "two" is not a number`},
		{"servablesToKeep over int32", `{"expirationPolicy": {"KeepLatest": {"servablesToKeep": 2147483648}}}`, `2147483648 is out of range -2147483648..2147483647`},
		{"servablesToKeep fractional", `{"expirationPolicy": {"KeepLatest": {"servablesToKeep": 1.5}}}`, `1.5 is not an integer`},
		{"two expiration policies", `{"expirationPolicy": {"KeepLatest": {}, "KeepTopRanked": {}}}`, `expiration_policy: give exactly one of KeepLatest or KeepTopRanked, got "KeepLatest" and "KeepTopRanked"`},
		{"empty expiration policy", `{"expirationPolicy": {}}`, `expiration_policy: expected one of KeepLatest or KeepTopRanked, got an empty object`},
		{"expiration policy not an object", `{"expirationPolicy": "KeepLatest"}`, `expiration_policy: expected an object, got string "KeepLatest"`},
		{"config expiration not an object", `{"expiration": 2}`, `expiration: expected an object, got number 2`},
		{"empty router object", `{"router": {}}`, `router: expected one of FairPhaseInPctBasedRouter or LatestPhaseInPctBasedRouter, got an empty object`},
		{"two routers", `{"router": {"FairPhaseInPctBasedRouter": {}, "LatestPhaseInPctBasedRouter": {}}}`, `router: give exactly one of`},
		{"router a number", `{"router": 5}`, `router: expected an object, got number 5`},
		{"router an array", `{"router": ["fair"]}`, `router: expected an object, got an array`},
		{"fields in an empty router", `{"router": {"LatestPhaseInPctBasedRouter": {"x": 1}}}`, `router.LatestPhaseInPctBasedRouter: unknown field "x"`},
		{"router syntax error", `{"router": {"LatestPhaseInPctBasedRouter": {]}}`, `invalid JSON`},
		{"sticky key not a string", `{"sticky_key": 1}`, `sticky_key: expected a string, got number 1`},
		{"not an object", `[]`, `contract settings must be a JSON object, got an array`},
		{"a string", `"fair"`, `contract settings must be a JSON object, got string "fair"`},
		{"null", `null`, `contract settings must be a JSON object, got null`},
		{"empty", ``, `unexpected EOF`},
		{"truncated", `{"router": "fair"`, `unexpected EOF`},
		{"trailing data", `{} {}`, `unexpected data after the contract settings object`},
		{"trailing comma", `{"router": "fair",}`, `invalid JSON at line 1, column 19`},
		{"invalid UTF-8", "{\"sticky_key\": \"\xff\"}", `contract settings is not valid UTF-8`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := ParseContractSettings([]byte(tc.data))
			checkDocumentError(t, err, tc.want)
		})
	}
}

func TestParsePolicyReadsGroveAndForestFlowShapes(t *testing.T) {
	immediate := modelconfig.PhaseIn{Kind: modelconfig.PhaseInImmediate}
	for _, tc := range []struct {
		name, data string
		want       modelconfig.Policy
	}{
		{"empty object takes the defaults", `{}`, modelconfig.Policy{PhaseIn: immediate}},
		{"nulls take the defaults", `{"validity": null, "phase_in": null, "shadow": null}`, modelconfig.Policy{PhaseIn: immediate}},
		{"empty validity list", `{"validityPolicy": []}`, modelconfig.Policy{PhaseIn: immediate}},
		{"ForestFlow's PolicySettings",
			`{"validityPolicy":[{"ImmediatelyValid":{}},{"TimeBasedValidity":{"validAfterMS":5000}},{"MinServedEventsBasedValidity":{"validAfterMinServedEvents":10}}],"phaseInPolicy":{"LinearTimeBasedPhaseIn":{"phaseInOverSecs":600}}}`,
			modelconfig.Policy{Validity: []modelconfig.ValidityRule{{Kind: modelconfig.RuleImmediatelyValid}, {Kind: modelconfig.RuleValidAfterMs, After: 5 * time.Second}, {Kind: modelconfig.RuleMinServedEvents, Count: 10}},
				PhaseIn: modelconfig.PhaseIn{Kind: modelconfig.PhaseInLinear, Over: 10 * time.Minute}}},
		{"ForestFlow's shadow-only servable", `{"validity_policy": [{"NeverValid": {}}], "phase_in_policy": {"ImmediatePhaseIn": {}}}`,
			modelconfig.Policy{Validity: []modelconfig.ValidityRule{{Kind: modelconfig.RuleNeverValid}}, PhaseIn: immediate}},
		{"ForestFlow's phase_in_over_secs in snake_case", `{"phaseInPolicy": {"LinearTimeBasedPhaseIn": {"phase_in_over_secs": "60"}}}`,
			modelconfig.Policy{PhaseIn: modelconfig.PhaseIn{Kind: modelconfig.PhaseInLinear, Over: time.Minute}}},
		{"ForestFlow's PerformanceBasedValidity is the live outcome AUC", `{"validityPolicy": [{"PerformanceBasedValidity": {"minThreshold": 0.7}}]}`,
			modelconfig.Policy{Validity: []modelconfig.ValidityRule{{Kind: modelconfig.RuleMinMetric, Metric: modelconfig.MetricOutcomeAUC, Threshold: 0.7}}, PhaseIn: immediate}},
		{"ForestFlow's rules with their fields absent", `{"validityPolicy": [{"TimeBasedValidity": {}}, {"MinServedEventsBasedValidity": {}}]}`,
			modelconfig.Policy{Validity: []modelconfig.ValidityRule{{Kind: modelconfig.RuleValidAfterMs}, {Kind: modelconfig.RuleMinServedEvents}}, PhaseIn: immediate}},
		{"config shape",
			`{"validity": [{"valid_after_ms": {"ms": 60000}}, {"min_metric": {"metric": "auc", "threshold": 0.7}}], "phase_in": {"linear_over_secs": {"secs": 600}}, "shadow": {"sample_rate": 0.25}}`,
			modelconfig.Policy{Validity: []modelconfig.ValidityRule{{Kind: modelconfig.RuleValidAfterMs, After: time.Minute}, {Kind: modelconfig.RuleMinMetric, Metric: "auc", Threshold: 0.7}},
				PhaseIn: modelconfig.PhaseIn{Kind: modelconfig.PhaseInLinear, Over: 10 * time.Minute}, Shadow: &modelconfig.Shadow{SampleRate: 0.25}}},
		{"config shape in lowerCamelCase, empty shadow", `{"validity": [{"minServedEvents": {"count": "1000"}}], "phaseIn": {"immediate": {}}, "shadow": {}}`,
			modelconfig.Policy{Validity: []modelconfig.ValidityRule{{Kind: modelconfig.RuleMinServedEvents, Count: 1000}}, PhaseIn: immediate, Shadow: &modelconfig.Shadow{SampleRate: 1}}},
		{"names of either shape in either field", `{"validityPolicy": [{"never_valid": {}}, {"ImmediatelyValid": {}}], "phase_in": {"ImmediatePhaseIn": {}}}`,
			modelconfig.Policy{Validity: []modelconfig.ValidityRule{{Kind: modelconfig.RuleNeverValid}, {Kind: modelconfig.RuleImmediatelyValid}}, PhaseIn: immediate}},
		{"unknown rule is left to validation", `{"validity": [{"always_valid": {"x": 1}}]}`,
			modelconfig.Policy{Validity: []modelconfig.ValidityRule{{Kind: "always_valid"}}, PhaseIn: immediate}},
		{"unknown phase-in is left to validation", `{"phaseInPolicy": {"StepPhaseIn": {}}}`, modelconfig.Policy{PhaseIn: modelconfig.PhaseIn{Kind: "StepPhaseIn"}}},
		{"release gates",
			`{"validity": [{"promote_when": {"min_shadow_executions": 10000, "max_mean_abs_diff": 0.01, "max_error_rate": null}}], "phase_in": {"linear_over_secs": {"secs": 60}},
			  "rollbackWhen": {"maxErrorRate": 0.01, "max_p99_ms": "20", "minRequests": 500}}`,
			modelconfig.Policy{Validity: []modelconfig.ValidityRule{{Kind: modelconfig.RulePromoteWhen, Promote: modelconfig.PromoteWhen{MinShadowExecutions: 10000, MaxMeanAbsDiff: ptr(0.01)}}},
				PhaseIn: modelconfig.PhaseIn{Kind: modelconfig.PhaseInLinear, Over: time.Minute}, RollbackWhen: &modelconfig.RollbackWhen{MinRequests: 500, MaxErrorRate: ptr(0.01), MaxP99Ms: ptr(20.0)}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := ParsePolicy([]byte(tc.data))
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got, tc.want) {
				t.Errorf("got  %+v\nwant %+v", got, tc.want)
			}
		})
	}
}

func TestParsePolicyErrors(t *testing.T) {
	for _, tc := range []struct {
		name, data, want string
	}{
		{"unknown field", `{"weight": 3}`, `unknown field "weight"`},
		{"PerformanceBasedValidity's threshold not an AUC", `{"validityPolicy": [{"ImmediatelyValid": {}}, {"PerformanceBasedValidity": {"minThreshold": 70}}]}`,
			`validity_policy[1].PerformanceBasedValidity.minThreshold: 70 is not an AUC (0 to 1)`},
		{"PerformanceBasedValidity's unknown field", `{"validityPolicy": [{"PerformanceBasedValidity": {"metric": "auc"}}]}`,
			`validity_policy[0].PerformanceBasedValidity: unknown field "metric"`},
		{"validAfterMS negative", `{"validityPolicy": [{"TimeBasedValidity": {"validAfterMS": -1}}]}`,
			`validity_policy[0].TimeBasedValidity.validAfterMS: -1 is out of range 0..9223372036854`},
		{"validAfterMS in the config's spelling", `{"validityPolicy": [{"TimeBasedValidity": {"ms": 5}}]}`, `validity_policy[0].TimeBasedValidity: unknown field "ms"`},
		{"validAfterMinServedEvents not a number", `{"validityPolicy": [{"MinServedEventsBasedValidity": {"validAfterMinServedEvents": "ten"}}]}`,
			`MinServedEventsBasedValidity.validAfterMinServedEvents: "ten" is not a number`},
		{"validAfterMinServedEvents over 2^53", `{"validityPolicy": [{"MinServedEventsBasedValidity": {"validAfterMinServedEvents": 1e16}}]}`, `1e16 is out of range 0..9007199254740992`},
		{"fields in ImmediatelyValid", `{"validityPolicy": [{"ImmediatelyValid": {"now": true}}]}`, `validity_policy[0].ImmediatelyValid: unknown field "now"`},
		{"validity not an array", `{"validity": {"ImmediatelyValid": {}}}`, `validity: expected an array, got an object`},
		{"rule not an object", `{"validityPolicy": ["ImmediatelyValid"]}`, `validity_policy[0]: expected an object, got string "ImmediatelyValid"`},
		{"null rule", `{"validity": [null]}`, `validity[0]: expected an object, got null`},
		{"empty rule", `{"validity": [{}]}`, `validity[0]: expected one of immediately_valid, never_valid, valid_after_ms, min_served_events, min_metric, promote_when, ImmediatelyValid, NeverValid, TimeBasedValidity, MinServedEventsBasedValidity or PerformanceBasedValidity, got an empty object`},
		{"two rules in one element", `{"validity": [{"ImmediatelyValid": {}, "NeverValid": {}}]}`, `give exactly one of`},
		{"two phase-ins", `{"phaseInPolicy": {"ImmediatePhaseIn": {}, "LinearTimeBasedPhaseIn": {}}}`,
			`phase_in_policy: give exactly one of immediate, linear_over_secs, ImmediatePhaseIn or LinearTimeBasedPhaseIn, got "ImmediatePhaseIn" and "LinearTimeBasedPhaseIn"`},
		{"empty phase-in", `{"phase_in": {}}`, `phase_in: expected one of immediate, linear_over_secs, ImmediatePhaseIn or LinearTimeBasedPhaseIn, got an empty object`},
		{"phase-in a string", `{"phaseInPolicy": "ImmediatePhaseIn"}`, `phase_in_policy: expected an object, got string "ImmediatePhaseIn"`},
		{"fractional phaseInOverSecs", `{"phaseInPolicy": {"LinearTimeBasedPhaseIn": {"phaseInOverSecs": 1.5}}}`, `phase_in_policy.LinearTimeBasedPhaseIn.phase_in_over_secs: 1.5 is not an integer`},
		{"unknown field in LinearTimeBasedPhaseIn", `{"phaseInPolicy": {"LinearTimeBasedPhaseIn": {"secs": 5}}}`, `phase_in_policy.LinearTimeBasedPhaseIn: unknown field "secs"`},
		{"shadow not an object", `{"shadow": true}`, `shadow: expected an object, got boolean true`},
		{"unknown shadow field", `{"shadow": {"rate": 1}}`, `shadow: unknown field "rate"`},
		{"shadow rate not a number", `{"shadow": {"sample_rate": "high"}}`, `shadow.sample_rate: "high" is not a number`},
		{"min_metric threshold overflow", `{"validity": [{"min_metric": {"metric": "auc", "threshold": 1e400}}]}`, `1e400 is out of range of a finite double`},
		{"duplicate field", `{"validity": [], "validity": []}`, `duplicate field "validity"`},
		{"promote_when bound not a number", `{"validity": [{"promote_when": {"min_shadow_executions": 1, "max_p99_ratio": "fast"}}]}`, `validity[0].promote_when.max_p99_ratio: "fast" is not a number`},
		{"promote_when count over 2^53", `{"validity": [{"promote_when": {"min_shadow_executions": 1e16}}]}`, `promote_when.min_shadow_executions: 1e16 is out of range 0..9007199254740992`},
		{"rollback_when not an object", `{"rollback_when": []}`, `rollback_when: expected an object, got an array`},
		{"unknown rollback_when field", `{"rollback_when": {"max_errors": 1}}`, `rollback_when: unknown field "max_errors"`},
		{"not an object", `[{"ImmediatelyValid": {}}]`, `policy must be a JSON object, got an array`},
		{"null", `null`, `policy must be a JSON object, got null`},
		{"empty", ``, `unexpected EOF`},
		{"trailing data", `{}]`, `unexpected data after the policy object`},
		{"syntax error", "{\n\"validity\": [{\"NeverValid\": {}]}", `invalid JSON at line 2, column 31`},
		{"invalid UTF-8", "{\"validity\": [{\"\xfe\": {}}]}", `policy is not valid UTF-8`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := ParsePolicy([]byte(tc.data))
			checkDocumentError(t, err, tc.want)
		})
	}
}

func TestParseLoggingReadsConfigAndForestFlowShapes(t *testing.T) {
	for _, tc := range []struct {
		name, data string
		want       modelconfig.ServableLogging
	}{
		{"empty object takes the defaults", `{}`, defaultServableLogging},
		{"nulls take the defaults", `{"log_level": null, "sample_rate": null, "key_features": null, "key_features_separator": null}`, defaultServableLogging},
		{"ForestFlow's LoggingSettings", `{"logLevel": "FULL", "keyFeatures": ["someKey", "anotherKey"]}`,
			modelconfig.ServableLogging{Level: modelconfig.LogLevelFull, SampleRate: 1, KeyFeatures: []string{"someKey", "anotherKey"}, KeyFeaturesSeparator: "."}},
		{"config shape", `{"log_level": "SAMPLE", "sample_rate": "0.01", "key_features": ["user_id"], "key_features_separator": "|"}`,
			modelconfig.ServableLogging{Level: modelconfig.LogLevelSample, SampleRate: 0.01, KeyFeatures: []string{"user_id"}, KeyFeaturesSeparator: "|"}},
		{"explicit empty separator", `{"keyFeaturesSeparator": ""}`, modelconfig.ServableLogging{Level: modelconfig.LogLevelNone, SampleRate: 1}},
		{"unknown level is left to validation", `{"logLevel": "full"}`, modelconfig.ServableLogging{Level: "full", SampleRate: 1, KeyFeaturesSeparator: "."}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := ParseLogging([]byte(tc.data))
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got, tc.want) {
				t.Errorf("got  %+v\nwant %+v", got, tc.want)
			}
		})
	}
}

func TestParseLoggingErrors(t *testing.T) {
	for _, tc := range []struct {
		name, data, want string
	}{
		{"unknown field", `{"level": "FULL"}`, `unknown field "level"`},
		{"level not a string", `{"logLevel": 2}`, `log_level: expected a string, got number 2`},
		{"sample rate not a number", `{"sample_rate": "half"}`, `sample_rate: "half" is not a number`},
		{"sample rate infinite", `{"sample_rate": 1e999}`, `sample_rate: 1e999 is out of range of a finite double`},
		{"key features not an array", `{"keyFeatures": "user_id"}`, `key_features: expected an array, got string "user_id"`},
		{"key feature not a string", `{"keyFeatures": ["a", null]}`, `key_features[1]: expected a string, got null`},
		{"not an object", `"FULL"`, `logging settings must be a JSON object, got string "FULL"`},
		{"null", `null`, `logging settings must be a JSON object, got null`},
		{"trailing data", `{} 1`, `unexpected data after the logging settings object`},
		{"invalid UTF-8", "{\"logLevel\": \"F\xc3\"}", `logging settings is not valid UTF-8`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := ParseLogging([]byte(tc.data))
			checkDocumentError(t, err, tc.want)
		})
	}
}

// modelSum is a model's checksum: lowercase hex SHA-256.
const modelSum = "59390c4fa97b2cbfe5bd300e254e6eddb7b4b45c2dbc0c1cfc6e93793a143d04"

// basicServeRequest is a ForestFlow BasicServeRequest with Grove's model
// fields instead of its URL path and flavor.
const basicServeRequest = `{
  "path": "pctr_v2/",
  "checksum": "` + modelSum + `",
  "eviction_grace_period_in_ms": 60000,
  "warm_up_batch_request_json": "{\"request\": []}",
  "fqrv": {"contract": {"organization": "ads", "project": "pctr", "contract_number": 3}, "release_version": "2.0"},
  "servableSettings": {
    "policySettings": {"validityPolicy": [{"ImmediatelyValid": {}}, {"TimeBasedValidity": {"validAfterMS": 5000}}],
                       "phaseInPolicy": {"LinearTimeBasedPhaseIn": {"phaseInOverSecs": 600}}},
    "loggingSettings": {"logLevel": "FULL", "keyFeatures": ["someKey", "anotherKey"]}},
  "contractSettings": {"expirationPolicy": {"KeepLatest": {"servablesToKeep": 2}}, "router": {"LatestPhaseInPctBasedRouter": {}}},
  "tags": {"team": "ads", "ticket": "ADS-1"}
}`

func TestParseServeRequestReadsABasicServeRequest(t *testing.T) {
	got, err := ParseServeRequest([]byte(basicServeRequest))
	if err != nil {
		t.Fatal(err)
	}
	want := &ServeRequest{
		Model:    modelconfig.Model{Path: "pctr_v2/", Checksum: modelSum, WarmUpJSON: `{"request": []}`, EvictionGracePeriod: time.Minute},
		Contract: modelconfig.Contract{Organization: "ads", Project: "pctr", Number: 3},
		Servable: modelconfig.ContractServable{ReleaseVersion: "2.0", ModelPath: "pctr_v2/",
			Validity: []modelconfig.ValidityRule{{Kind: modelconfig.RuleImmediatelyValid}, {Kind: modelconfig.RuleValidAfterMs, After: 5 * time.Second}},
			PhaseIn:  modelconfig.PhaseIn{Kind: modelconfig.PhaseInLinear, Over: 10 * time.Minute},
			Logging:  modelconfig.ServableLogging{Level: modelconfig.LogLevelFull, SampleRate: 1, KeyFeatures: []string{"someKey", "anotherKey"}, KeyFeaturesSeparator: "."}},
		ContractSettings: &modelconfig.ContractSettings{Router: modelconfig.RouterLatest, Expiration: modelconfig.Expiration{Kind: modelconfig.ExpireKeepLatest, Keep: 2}},
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("got  %+v\nwant %+v", got, want)
	}
}

func TestParseServeRequestDefaultsAndSpellings(t *testing.T) {
	servable := func(rv, path string) modelconfig.ContractServable {
		return modelconfig.ContractServable{ReleaseVersion: rv, ModelPath: path, PhaseIn: modelconfig.PhaseIn{Kind: modelconfig.PhaseInImmediate}, Logging: defaultServableLogging}
	}
	for _, tc := range []struct {
		name, data string
		want       *ServeRequest
	}{
		{"only path and fqrv",
			`{"path": "m/", "fqrv": {"contract": {"organization": "o", "project": "p", "contract_number": 1}, "release_version": "v1"}}`,
			&ServeRequest{Model: modelconfig.Model{Path: "m/"}, Contract: modelconfig.Contract{Organization: "o", Project: "p", Number: 1}, Servable: servable("v1", "m/")}},
		{"snake_case and model_path",
			`{"model_path": "m.pt", "eviction_grace_period_in_ms": "250", "fqrv": {"contract": {"organization": "o", "project": "p", "contract_number": "2"}, "release_version": "v1"},
			  "servable_settings": {"policy_settings": {"shadow": {"sample_rate": 0.5}}, "logging_settings": {"log_level": "SAMPLE", "sample_rate": 0.1}},
			  "contract_settings": {}, "tags": null}`,
			&ServeRequest{Model: modelconfig.Model{Path: "m.pt", EvictionGracePeriod: 250 * time.Millisecond}, Contract: modelconfig.Contract{Organization: "o", Project: "p", Number: 2},
				Servable: modelconfig.ContractServable{ReleaseVersion: "v1", ModelPath: "m.pt", PhaseIn: modelconfig.PhaseIn{Kind: modelconfig.PhaseInImmediate}, Shadow: &modelconfig.Shadow{SampleRate: 0.5},
					Logging: modelconfig.ServableLogging{Level: modelconfig.LogLevelSample, SampleRate: 0.1, KeyFeaturesSeparator: "."}},
				ContractSettings: &modelconfig.ContractSettings{Router: modelconfig.RouterFair}}},
		{"lowerCamelCase",
			`{"modelPath": "m/", "warmUpBatchRequestJson": "[]", "evictionGracePeriodInMs": 5, "fqrv": {"contract": {"organization": "o", "project": "p", "contractNumber": 1}, "releaseVersion": "v1"},
			  "servableSettings": {"policySettings": {}, "loggingSettings": {}}, "tags": {"k": "v", "nested": {"x": [1, 2]}}}`,
			&ServeRequest{Model: modelconfig.Model{Path: "m/", WarmUpJSON: "[]", EvictionGracePeriod: 5 * time.Millisecond}, Contract: modelconfig.Contract{Organization: "o", Project: "p", Number: 1},
				Servable: servable("v1", "m/")}},
		{"policy settings absent keep the other's defaults",
			`{"path": "m/", "fqrv": {"contract": {"organization": "o", "project": "p", "contract_number": 1}, "release_version": "v1"},
			  "servableSettings": {"loggingSettings": {"keyFeatures": ["u"]}}}`,
			&ServeRequest{Model: modelconfig.Model{Path: "m/"}, Contract: modelconfig.Contract{Organization: "o", Project: "p", Number: 1},
				Servable: modelconfig.ContractServable{ReleaseVersion: "v1", ModelPath: "m/", PhaseIn: modelconfig.PhaseIn{Kind: modelconfig.PhaseInImmediate},
					Logging: modelconfig.ServableLogging{Level: modelconfig.LogLevelNone, SampleRate: 1, KeyFeatures: []string{"u"}, KeyFeaturesSeparator: "."}}}},
		{"missing_value",
			`{"path": "m/", "missing_value": -999, "fqrv": {"contract": {"organization": "o", "project": "p", "contract_number": 1}, "release_version": "v1"}}`,
			&ServeRequest{Model: modelconfig.Model{Path: "m/", Serving: modelconfig.ServingOptions{MissingValue: -999, HasMissingValue: true}},
				Contract: modelconfig.Contract{Organization: "o", Project: "p", Number: 1}, Servable: servable("v1", "m/")}},
		{"missing_value 0, lowerCamelCase",
			`{"path": "m/", "missingValue": "0", "fqrv": {"contract": {"organization": "o", "project": "p", "contract_number": 1}, "release_version": "v1"}}`,
			&ServeRequest{Model: modelconfig.Model{Path: "m/", Serving: modelconfig.ServingOptions{HasMissingValue: true}},
				Contract: modelconfig.Contract{Organization: "o", Project: "p", Number: 1}, Servable: servable("v1", "m/")}},
		{"missing_value null",
			`{"path": "m/", "missing_value": null, "fqrv": {"contract": {"organization": "o", "project": "p", "contract_number": 1}, "release_version": "v1"}}`,
			&ServeRequest{Model: modelconfig.Model{Path: "m/"}, Contract: modelconfig.Contract{Organization: "o", Project: "p", Number: 1}, Servable: servable("v1", "m/")}},
		{"request timeouts",
			`{"path": "m/", "default_timeout_ms": 100, "queueTimeoutMs": "20", "fqrv": {"contract": {"organization": "o", "project": "p", "contract_number": 1}, "release_version": "v1"}}`,
			&ServeRequest{Model: modelconfig.Model{Path: "m/", DefaultTimeout: 100 * time.Millisecond, QueueTimeout: 20 * time.Millisecond},
				Contract: modelconfig.Contract{Organization: "o", Project: "p", Number: 1}, Servable: servable("v1", "m/")}},
		{"fqrv with only a project",
			`{"path": "m/", "fqrv": {"contract": {"project": "p"}, "release_version": "v1"}}`,
			&ServeRequest{Model: modelconfig.Model{Path: "m/"}, Contract: modelconfig.Contract{Project: "p"}, Servable: servable("v1", "m/")}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := ParseServeRequest([]byte(tc.data))
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got, tc.want) {
				t.Errorf("got  %+v\nwant %+v", got, tc.want)
			}
		})
	}
}

func TestParseServeRequestErrors(t *testing.T) {
	const fqrv = `"fqrv": {"contract": {"organization": "o", "project": "p", "contract_number": 1}, "release_version": "v1"}`
	for _, tc := range []struct {
		name, data, want string
	}{
		{"flavor refused", `{"path": "m/", ` + fqrv + `, "flavor": {"H2OMojo": {"mojoPath": "m.zip"}}}`,
			`flavor: flavor is not used: Grove picks the runtime from the model's files`},
		{"file URL refused", `{"path": "file:///my-models/DreamWorks/schedule/0", ` + fqrv + `}`,
			`path: path "file:///my-models/DreamWorks/schedule/0" is a URL; give the model's path in the serving bucket`},
		{"S3 URL refused", `{"path": "s3::https://host/models bucket=b", ` + fqrv + `}`, `path: path "s3::https://host/models bucket=b" is a URL`},
		{"missing path", `{` + fqrv + `}`, `path: serve request needs the model's path in the bucket`},
		{"empty path", `{"path": "", ` + fqrv + `}`, `path: serve request needs the model's path in the bucket`},
		{"null path", `{"path": null, ` + fqrv + `}`, `path: serve request needs the model's path in the bucket`},
		{"missing fqrv", `{"path": "m/"}`, `fqrv: serve request needs the release's fqrv`},
		{"fqrv with an empty contract", `{"path": "m/", "fqrv": {"contract": {}, "release_version": "v1"}}`, `fqrv: serve request needs the release's fqrv`},
		{"missing release_version", `{"path": "m/", "fqrv": {"contract": {"organization": "o", "project": "p", "contract_number": 1}}}`,
			`fqrv.release_version: serve request needs the release_version`},
		{"path not a string", `{"path": ["m/"], ` + fqrv + `}`, `path: expected a string, got an array`},
		{"fqrv not an object", `{"path": "m/", "fqrv": "o/p/1/v1"}`, `fqrv: expected an object, got string "o/p/1/v1"`},
		{"null fqrv", `{"path": "m/", "fqrv": null}`, `fqrv: expected an object, got null`},
		{"contract number not a number", `{"path": "m/", "fqrv": {"contract": {"contract_number": "one"}}}`, `fqrv.contract.contract_number: "one" is not a number`},
		{"release_version a number", `{"path": "m/", "fqrv": {"contract": {"project": "p"}, "release_version": 2}}`, `fqrv.release_version: expected a string, got number 2`},
		{"unknown fqrv field", `{"path": "m/", "fqrv": {"contract": {"organization": "o"}, "version": "v1"}}`, `fqrv: unknown field "version"`},
		{"contract settings in the fqrv contract", `{"path": "m/", "fqrv": {"contract": {"organization": "o", "router": "fair"}}}`, `fqrv.contract: unknown field "router"`},
		{"ForestFlow's removed artifact_path", `{"path": "m/", "artifact_path": "x", ` + fqrv + `}`, `unknown field "artifact_path"`},
		{"unknown servable settings field", `{"path": "m/", ` + fqrv + `, "servableSettings": {"policy": {}}}`, `servable_settings: unknown field "policy"`},
		{"PerformanceBasedValidity's threshold a string", `{"path": "m/", ` + fqrv + `, "servableSettings": {"policySettings": {"validityPolicy": [{"PerformanceBasedValidity": {"minThreshold": "high"}}]}}}`,
			`servable_settings.policy_settings.validity_policy[0].PerformanceBasedValidity.minThreshold: `},
		{"bad logging settings", `{"path": "m/", ` + fqrv + `, "servableSettings": {"loggingSettings": {"logLevel": 1}}}`, `servable_settings.logging_settings.log_level: expected a string, got number 1`},
		{"null policy settings", `{"path": "m/", ` + fqrv + `, "servableSettings": {"policySettings": null}}`, `servable_settings.policy_settings: expected an object, got null`},
		{"ordering ASC in the contract settings", `{"path": "m/", ` + fqrv + `, "contractSettings": {"expirationPolicy": {"KeepTopRanked": {"ordering": "ASC"}}}}`,
			`contract_settings.expiration_policy.KeepTopRanked.ordering: ordering "ASC" is not supported`},
		{"contract settings not an object", `{"path": "m/", ` + fqrv + `, "contractSettings": "fair"}`, `contract_settings: expected an object, got string "fair"`},
		{"negative grace period", `{"path": "m/", "eviction_grace_period_in_ms": -1, ` + fqrv + `}`, `eviction_grace_period_in_ms: -1 is out of range 0..2147483647`},
		{"checksum not a string", `{"path": "m/", "checksum": 5, ` + fqrv + `}`, `checksum: expected a string, got number 5`},
		{"missing_value not finite", `{"path": "m/", "missing_value": "NaN", ` + fqrv + `}`, `missing_value: "NaN" is not a number`},
		{"missing_value out of range", `{"path": "m/", "missing_value": 1e400, ` + fqrv + `}`, `missing_value: 1e400 is out of range of a finite double`},
		{"bad JSON in the tags", `{"path": "m/", ` + fqrv + `, "tags": {"a": tru}}`, `invalid JSON`},
		{"not an object", `[]`, `serve request must be a JSON object, got an array`},
		{"null", `null`, `serve request must be a JSON object, got null`},
		{"empty", ` `, `unexpected EOF`},
		{"trailing data", `{"path": "m/", ` + fqrv + `} {}`, `unexpected data after the serve request object`},
		{"invalid UTF-8", "{\"path\": \"m\xff/\", " + fqrv + "}", `serve request is not valid UTF-8`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r, err := ParseServeRequest([]byte(tc.data))
			checkDocumentError(t, err, tc.want)
			if r != nil {
				t.Errorf("got a request %+v with the error", r)
			}
		})
	}
}

func TestParseContractSettingsReadsMarshalJSONBack(t *testing.T) {
	for _, cs := range []modelconfig.ContractSettings{
		{Router: modelconfig.RouterFair},
		{Router: modelconfig.RouterLatest, Expiration: modelconfig.Expiration{Kind: modelconfig.ExpireKeepLatest, Keep: 2}, StickyKey: "user_id"},
		{Router: modelconfig.RouterFair, Expiration: modelconfig.Expiration{Kind: modelconfig.ExpireKeepTopRanked, Keep: 3, Metric: "auc"}},
		{Router: "random", Expiration: modelconfig.Expiration{Kind: "KeepOldest"}},
		{Router: modelconfig.RouterFair, Expiration: modelconfig.Expiration{Kind: modelconfig.ExpireKeepLatest, Keep: -5}},
	} {
		data, err := json.Marshal(cs)
		if err != nil {
			t.Fatal(err)
		}
		got, err := ParseContractSettings(data)
		if err != nil {
			t.Errorf("%+v: parsing %s: %v", cs, data, err)
			continue
		}
		if !reflect.DeepEqual(got, cs) {
			t.Errorf("%s reads back as %+v, not %+v", data, got, cs)
		}
	}
}

func TestParsePolicyReadsMarshalJSONBack(t *testing.T) {
	for _, p := range []modelconfig.Policy{
		{PhaseIn: modelconfig.PhaseIn{Kind: modelconfig.PhaseInImmediate}},
		{Validity: []modelconfig.ValidityRule{
			{Kind: modelconfig.RuleImmediatelyValid}, {Kind: modelconfig.RuleNeverValid}, {Kind: modelconfig.RuleValidAfterMs, After: 5 * time.Second},
			{Kind: modelconfig.RuleMinServedEvents, Count: 1 << 53}, {Kind: modelconfig.RuleMinMetric, Metric: "auc", Threshold: -0.125}},
			PhaseIn: modelconfig.PhaseIn{Kind: modelconfig.PhaseInLinear, Over: 10 * time.Minute}, Shadow: &modelconfig.Shadow{SampleRate: 0.1}},
		{Validity: []modelconfig.ValidityRule{{Kind: "always_valid"}}, PhaseIn: modelconfig.PhaseIn{Kind: "step"}, Shadow: &modelconfig.Shadow{}},
		{PhaseIn: modelconfig.PhaseIn{Kind: modelconfig.PhaseInLinear, Over: -3 * time.Second}},
		{Validity: []modelconfig.ValidityRule{{Kind: modelconfig.RulePromoteWhen, Promote: modelconfig.PromoteWhen{MinShadowExecutions: 7, MaxErrorRate: ptr(0), MaxP99Ratio: ptr(1.5)}}},
			PhaseIn: modelconfig.PhaseIn{Kind: modelconfig.PhaseInLinear, Over: time.Minute}, RollbackWhen: &modelconfig.RollbackWhen{MinRequests: 1, MaxP99Ms: ptr(0.5)}},
	} {
		data, err := json.Marshal(p)
		if err != nil {
			t.Fatal(err)
		}
		got, err := ParsePolicy(data)
		if err != nil {
			t.Errorf("%+v: parsing %s: %v", p, data, err)
			continue
		}
		if !reflect.DeepEqual(got, p) {
			t.Errorf("%s reads back as %+v, not %+v", data, got, p)
		}
	}
}

func TestParseLoggingReadsMarshalJSONBack(t *testing.T) {
	for _, l := range []modelconfig.ServableLogging{
		defaultServableLogging,
		{Level: modelconfig.LogLevelSample, SampleRate: 0.01, KeyFeatures: []string{"user_id", "ad_id"}, KeyFeaturesSeparator: "|"},
		{Level: modelconfig.LogLevelFull, SampleRate: 0},
	} {
		data, err := json.Marshal(l)
		if err != nil {
			t.Fatal(err)
		}
		got, err := ParseLogging(data)
		if err != nil {
			t.Errorf("%+v: parsing %s: %v", l, data, err)
			continue
		}
		if !reflect.DeepEqual(got, l) {
			t.Errorf("%s reads back as %+v, not %+v", data, got, l)
		}
	}
}

// The canonical JSON writes an empty router, phase-in or log level as its
// default (fair, immediate, NONE), as their types document; the documents
// accept "" for them (left to validation, which reads the canonical form).
// It writes an unknown expiration or phase-in policy, which validation
// rejects, by its name alone: {"KeepOldest": {}}. (A document that gives a
// setting in both spellings, like "phase_in" and "phase_in_policy", can
// leave a parameter of the first on the unknown policy of the second.)
func canonicalSettings(cs modelconfig.ContractSettings) modelconfig.ContractSettings {
	if cs.Router == "" {
		cs.Router = modelconfig.RouterFair
	}
	if k := cs.Expiration.Kind; k != modelconfig.ExpireNone && k != modelconfig.ExpireKeepLatest && k != modelconfig.ExpireKeepTopRanked {
		cs.Expiration = modelconfig.Expiration{Kind: k}
	}
	return cs
}

func canonicalPolicy(p modelconfig.Policy) modelconfig.Policy {
	switch p.PhaseIn.Kind {
	case "":
		p.PhaseIn.Kind = modelconfig.PhaseInImmediate
	case modelconfig.PhaseInImmediate, modelconfig.PhaseInLinear:
	default:
		p.PhaseIn = modelconfig.PhaseIn{Kind: p.PhaseIn.Kind}
	}
	return p
}

func canonicalLogging(l modelconfig.ServableLogging) modelconfig.ServableLogging {
	if l.Level == "" {
		l.Level = modelconfig.LogLevelNone
	}
	return l
}

// canonicalRequest returns a copy of r with its settings in canonical form.
func canonicalRequest(r *ServeRequest) *ServeRequest {
	out := *r
	p := canonicalPolicy(r.Servable.Policy())
	out.Servable.Validity, out.Servable.PhaseIn, out.Servable.Shadow = p.Validity, p.PhaseIn, p.Shadow
	out.Servable.Logging = canonicalLogging(r.Servable.Logging)
	if r.ContractSettings != nil {
		cs := canonicalSettings(*r.ContractSettings)
		out.ContractSettings = &cs
	}
	return &out
}

// serveRequestJSON writes r as a serve request in the config's shape,
// every model field included.
func serveRequestJSON(t *testing.T, r *ServeRequest) []byte {
	t.Helper()
	m := r.Model
	doc := map[string]any{
		"path":                        m.Path,
		"checksum":                    m.Checksum,
		"warm_up_batch_request_json":  m.WarmUpJSON,
		"eviction_grace_period_in_ms": m.EvictionGracePeriod.Milliseconds(),
		"replicas":                    m.Serving.Replicas,
		"max_batch_rows":              m.Serving.MaxBatchRows,
		"max_queue_delay_us":          m.Serving.MaxQueueDelay.Microseconds(),
		"intra_op_threads":            m.Serving.IntraOpThreads,
		"default_timeout_ms":          m.DefaultTimeout.Milliseconds(),
		"queue_timeout_ms":            m.QueueTimeout.Milliseconds(),
		"fqrv": map[string]any{
			"contract":        map[string]any{"organization": r.Contract.Organization, "project": r.Contract.Project, "contract_number": r.Contract.Number},
			"release_version": r.Servable.ReleaseVersion,
		},
		"servable_settings": map[string]any{"policy_settings": r.Servable.Policy(), "logging_settings": r.Servable.Logging},
	}
	if m.Serving.HasMissingValue {
		doc["missing_value"] = m.Serving.MissingValue
	}
	if r.ContractSettings != nil {
		doc["contract_settings"] = *r.ContractSettings
	}
	data, err := json.Marshal(doc)
	if err != nil {
		t.Fatal(err)
	}
	return data
}

func TestParseServeRequestReadsItsCanonicalJSONBack(t *testing.T) {
	r, err := ParseServeRequest([]byte(basicServeRequest))
	if err != nil {
		t.Fatal(err)
	}
	data := serveRequestJSON(t, r)
	back, err := ParseServeRequest(data)
	if err != nil {
		t.Fatalf("parsing %s: %v", data, err)
	}
	if !reflect.DeepEqual(back, r) {
		t.Errorf("%s reads back as\n%+v\nnot\n%+v", data, back, r)
	}
}

// checkOnlyDocumentErrors fails t unless err is nil or a *modelconfig.Error.
func checkOnlyDocumentErrors(t *testing.T, err error) {
	t.Helper()
	var ce *modelconfig.Error
	if err != nil && !errors.As(err, &ce) {
		t.Fatalf("error %T is not a *modelconfig.Error: %v", err, err)
	}
}

// FuzzParseServeRequest checks that parsing a serve request never panics,
// fails only with *modelconfig.Error, and reads its canonical JSON back;
// and that adding the servable to an empty config validates as adding its
// canonical form does, into JSON that reads back as that config.
func FuzzParseServeRequest(f *testing.F) {
	f.Add([]byte(basicServeRequest))
	f.Add([]byte(`{"path": "m/", "fqrv": {"contract": {"organization": "o", "project": "p", "contract_number": 1}, "release_version": "v1"}}`))
	f.Add([]byte(`{"modelPath": "m.pt", "evictionGracePeriodInMs": "5", "fqrv": {"contract": {"organization": "o", "project": "p", "contractNumber": "2"}, "releaseVersion": "v1"},
		"servableSettings": {"policySettings": {"validity": [{"min_metric": {"metric": "auc", "threshold": 0.7}}], "phaseIn": {"linearOverSecs": {"secs": 60}}, "shadow": {"sampleRate": 0.5}},
		"loggingSettings": {"logLevel": "SAMPLE", "sampleRate": 0.1, "keyFeatures": ["u"], "keyFeaturesSeparator": "|"}},
		"contractSettings": {"router": "latest", "expiration": {"keep_top_ranked": {"n": 2, "metric": "auc"}}, "sticky_key": "u"}, "tags": {"a": "b"}}`))
	f.Add([]byte(`{"path": "file:///models/0", "flavor": {"H2OMojo": {"mojoPath": "m.zip"}}}`))
	f.Add([]byte(`{"path": "m/", "replicas": 2, "maxBatchRows": "8", "max_queue_delay_us": 500, "intraOpThreads": 2, "missing_value": -999, "default_timeout_ms": 100, "queueTimeoutMs": 5e1,
		"fqrv": {"contract": {"organization": "o", "project": "p", "contract_number": 1}, "release_version": "v1"}}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		r, err := ParseServeRequest(data)
		checkOnlyDocumentErrors(t, err)
		if err != nil {
			if r != nil {
				t.Fatalf("a request with the error %v", err)
			}
			return
		}
		if !json.Valid(data) {
			t.Fatalf("accepted invalid JSON %q", data)
		}
		if r.Servable.ModelPath != r.Model.Path || r.Model.Path == "" || r.Servable.ReleaseVersion == "" {
			t.Fatalf("accepted a request without its path or release: %+v", r)
		}
		again := serveRequestJSON(t, r)
		r2, err := ParseServeRequest(again)
		if err != nil {
			t.Fatalf("re-parsing %s: %v", again, err)
		}
		if !reflect.DeepEqual(canonicalRequest(r), r2) {
			t.Fatalf("round trip through %s changed the request:\n%+v\n%+v", again, r, r2)
		}
		var c, canonical modelconfig.Config
		if err := c.AddServable(r.Contract, r.Servable, r.Model, r.ContractSettings); err != nil {
			t.Fatalf("adding to an empty config: %v", err)
		}
		if err := canonical.AddServable(r2.Contract, r2.Servable, r2.Model, r2.ContractSettings); err != nil {
			t.Fatalf("adding the canonical request to an empty config: %v", err)
		}
		out, err := c.Validate()
		checkOnlyDocumentErrors(t, err)
		want, wantErr := canonical.Validate()
		if string(out) != string(want) || (err == nil) != (wantErr == nil) {
			t.Fatalf("the request validates as %s, %v; its canonical form as %s, %v", out, err, want, wantErr)
		}
		if err != nil {
			return
		}
		back, err := modelconfig.Parse(out)
		if err != nil {
			t.Fatalf("re-parsing the validated %s: %v", out, err)
		}
		if !reflect.DeepEqual(back, &canonical) {
			t.Fatalf("the validated %s reads back as\n%+v\nnot\n%+v", out, back, &canonical)
		}
	})
}

// FuzzParsePolicy checks that parsing a policy never panics, fails only
// with *modelconfig.Error, and reads its canonical JSON back.
func FuzzParsePolicy(f *testing.F) {
	f.Add([]byte(`{"validityPolicy":[{"ImmediatelyValid":{}},{"TimeBasedValidity":{"validAfterMS":5000}},{"MinServedEventsBasedValidity":{"validAfterMinServedEvents":10}}],"phaseInPolicy":{"LinearTimeBasedPhaseIn":{"phaseInOverSecs":600}}}`))
	f.Add([]byte(`{"validity": [{"valid_after_ms": {"ms": 60000}}, {"min_metric": {"metric": "auc", "threshold": 0.7}}, {"never_valid": {}}], "phase_in": {"linear_over_secs": {"secs": 600}}, "shadow": {"sample_rate": 0.25}}`))
	f.Add([]byte(`{"validity_policy": [{"PerformanceBasedValidity": {}}], "phase_in_policy": {"ImmediatePhaseIn": {}}, "shadow": {}}`))
	f.Add([]byte(`{"phaseIn": {"immediate": {}}, "validity": null, "shadow": null}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		p, err := ParsePolicy(data)
		checkOnlyDocumentErrors(t, err)
		if err != nil {
			return
		}
		if !json.Valid(data) {
			t.Fatalf("accepted invalid JSON %q", data)
		}
		again, err := json.Marshal(p)
		if err != nil {
			t.Fatal(err)
		}
		p2, err := ParsePolicy(again)
		if err != nil {
			t.Fatalf("re-parsing %s: %v", again, err)
		}
		if !reflect.DeepEqual(canonicalPolicy(p), p2) {
			t.Fatalf("round trip through %s changed the policy:\n%+v\n%+v", again, p, p2)
		}
	})
}

// FuzzParseContractSettings checks that parsing contract settings never
// panics, fails only with *modelconfig.Error, and reads its canonical JSON back.
func FuzzParseContractSettings(f *testing.F) {
	f.Add([]byte(`{"expirationPolicy":{"KeepLatest":{"servablesToKeep":2}},"router":{"LatestPhaseInPctBasedRouter":{}}}`))
	f.Add([]byte(`{"expiration_policy":{"KeepTopRanked":{"servablesToKeep":"3","metricToEvaluate":"auc","ordering":"DESC"}},"router":{"FairPhaseInPctBasedRouter":{}}}`))
	f.Add([]byte(`{"router": "latest", "expiration": {"keep_top_ranked": {"n": 2, "metric": "auc"}}, "sticky_key": "user_id"}`))
	f.Add([]byte(`{"router": null, "expiration": {"keep_latest": 1}}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		cs, err := ParseContractSettings(data)
		checkOnlyDocumentErrors(t, err)
		if err != nil {
			return
		}
		if !json.Valid(data) {
			t.Fatalf("accepted invalid JSON %q", data)
		}
		again, err := json.Marshal(cs)
		if err != nil {
			t.Fatal(err)
		}
		cs2, err := ParseContractSettings(again)
		if err != nil {
			t.Fatalf("re-parsing %s: %v", again, err)
		}
		if !reflect.DeepEqual(canonicalSettings(cs), cs2) {
			t.Fatalf("round trip through %s changed the settings:\n%+v\n%+v", again, cs, cs2)
		}
	})
}

func TestManagementDocumentsRefuseBothSpellingsOfASetting(t *testing.T) {
	for _, c := range []struct {
		name  string
		parse func([]byte) error
		doc   string
	}{
		{"policy validity", func(b []byte) error { _, err := ParsePolicy(b); return err }, `{"validity": [], "validityPolicy": []}`},
		{"policy phase-in", func(b []byte) error { _, err := ParsePolicy(b); return err }, `{"phase_in": {"immediate": {}}, "phaseInPolicy": {"ImmediatePhaseIn": {}}}`},
		{"contract expiration", func(b []byte) error { _, err := ParseContractSettings(b); return err }, `{"expiration": {"keep_latest": 1}, "expirationPolicy": {"KeepLatest": {"servablesToKeep": 2}}}`},
		{"serve request path", func(b []byte) error { _, err := ParseServeRequest(b); return err }, `{"path": "a/", "model_path": "b/"}`},
	} {
		err := c.parse([]byte(c.doc))
		var ce *modelconfig.Error
		if !errors.As(err, &ce) || !strings.Contains(err.Error(), "duplicate field") {
			t.Errorf("%s: %v, want a duplicate field error", c.name, err)
		}
	}
}

func TestParseMetricsSetsAndDeletes(t *testing.T) {
	for _, tc := range []struct {
		name, data string
		want       modelconfig.MetricsUpdate
	}{
		{"set", `{"auc": 0.71, "logloss": 0.3}`, modelconfig.MetricsUpdate{Set: map[string]float64{"auc": 0.71, "logloss": 0.3}}},
		{"set and delete, deletes sorted", `{"zeta": null, "auc": -1e-3, "beta": null, "alpha": null}`,
			modelconfig.MetricsUpdate{Set: map[string]float64{"auc": -0.001}, Delete: []string{"alpha", "beta", "zeta"}}},
		{"delete only", `{"auc": null}`, modelconfig.MetricsUpdate{Set: map[string]float64{}, Delete: []string{"auc"}}},
		{"last of a repeated name wins", `{"auc": 1, "auc": null}`, modelconfig.MetricsUpdate{Set: map[string]float64{}, Delete: []string{"auc"}}},
		{"any name of 1 to 128 bytes", `{"a": 0, "` + strings.Repeat("é", 64) + `": 1e300, "with space/and\"quote": 2}`,
			modelconfig.MetricsUpdate{Set: map[string]float64{"a": 0, strings.Repeat("é", 64): 1e300, `with space/and"quote`: 2}}},
		{"surrounding space", " \n{\"auc\": 1}\n ", modelconfig.MetricsUpdate{Set: map[string]float64{"auc": 1}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := ParseMetrics([]byte(tc.data))
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got, tc.want) {
				t.Errorf("got  %+v\nwant %+v", got, tc.want)
			}
		})
	}
	var b strings.Builder
	b.WriteString("{")
	for i := range modelconfig.MaxMetrics {
		if i > 0 {
			b.WriteString(",")
		}
		fmt.Fprintf(&b, `"m%d": null`, i)
	}
	b.WriteString("}")
	if u, err := ParseMetrics([]byte(b.String())); err != nil || len(u.Delete) != modelconfig.MaxMetrics {
		t.Errorf("%d deletes: got %d, %v", modelconfig.MaxMetrics, len(u.Delete), err)
	}
}

func TestParseMetricsErrors(t *testing.T) {
	many := func(n int, value string) string {
		var b strings.Builder
		b.WriteString("{")
		for i := range n {
			if i > 0 {
				b.WriteString(",")
			}
			fmt.Fprintf(&b, `"m%d": %s`, i, value)
		}
		return b.String() + "}"
	}
	long := strings.Repeat("x", 129)
	for _, tc := range []struct {
		name, data, want string
	}{
		{"array", `[{"auc": 1}]`, `metrics must be a JSON object of names to numbers, like {"auc": 0.71}: json: cannot unmarshal array`},
		{"number", `0.71`, `metrics must be a JSON object of names to numbers`},
		{"null", `null`, `metrics must be a JSON object of names to numbers, like {"auc": 0.71}, got null`},
		{"empty input", ``, `metrics must be a JSON object of names to numbers, like {"auc": 0.71}: EOF`},
		{"empty object", `{}`, `no metrics given`},
		{"empty name", `{"": 1}`, `metric name "" must be 1 to 128 bytes`},
		{"empty name deleted", `{"": null}`, `metric name "" must be 1 to 128 bytes`},
		{"name over 128 bytes", `{"` + long + `": 1}`, `metric name "` + long + `" must be 1 to 128 bytes`},
		{"name over 128 bytes deleted", `{"` + long + `": null}`, `must be 1 to 128 bytes`},
		{"65 metrics set", many(modelconfig.MaxMetrics+1, "1"), `65 metrics; at most 64`},
		{"65 metrics deleted", many(modelconfig.MaxMetrics+1, "null"), `65 metrics given; at most 64`},
		{"65 metrics mixed", many(modelconfig.MaxMetrics, "1")[:len(many(modelconfig.MaxMetrics, "1"))-1] + `, "gone": null}`, `65 metrics given; at most 64`},
		{"string value", `{"auc": "0.7"}`, `cannot unmarshal string`},
		{"boolean value", `{"auc": true}`, `cannot unmarshal bool`},
		{"object value", `{"auc": {"value": 0.7}}`, `cannot unmarshal object`},
		{"overflow", `{"auc": 1e400}`, `cannot unmarshal number 1e400`},
		{"NaN", `{"auc": NaN}`, `invalid character 'N'`},
		{"trailing object", `{"auc": 1} {"x": 2}`, `unexpected data after the metrics object`},
		{"trailing word", `{"auc": 1} x`, `unexpected data after the metrics object`},
		{"trailing brace", `{"auc": 1}}`, `unexpected data after the metrics object`},
		{"trailing bracket", `{"auc": 1}]`, `unexpected data after the metrics object`},
		{"truncated", `{"auc": 1`, `unexpected EOF`},
		{"invalid UTF-8", "{\"a\xffuc\": 1}", `metrics are not valid UTF-8`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			u, err := ParseMetrics([]byte(tc.data))
			checkDocumentError(t, err, tc.want)
			if u.Set != nil || u.Delete != nil {
				t.Errorf("got an update %+v with the error", u)
			}
		})
	}
}

// FuzzParseMetrics checks that parsing a metrics update never panics,
// fails only with *modelconfig.Error, accepts only what it documents, and reads
// its canonical JSON back.
func FuzzParseMetrics(f *testing.F) {
	f.Add([]byte(`{"auc": 0.71, "logloss": null}`))
	f.Add([]byte(`{"b": null, "a": null}`))
	f.Add([]byte(`{"auc": 1}}`))
	f.Add([]byte(`{"": 1e400}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		u, err := ParseMetrics(data)
		checkOnlyDocumentErrors(t, err)
		if err != nil {
			return
		}
		if !json.Valid(data) {
			t.Fatalf("accepted invalid JSON %q", data)
		}
		if n := len(u.Set) + len(u.Delete); n == 0 || n > modelconfig.MaxMetrics {
			t.Fatalf("accepted %d metrics", n)
		}
		if err := modelconfig.ValidateMetrics(u.Set); err != nil {
			t.Fatalf("accepted invalid metrics: %v", err)
		}
		doc := map[string]*float64{}
		for k, v := range u.Set {
			doc[k] = &v
		}
		for i, k := range u.Delete {
			if i > 0 && u.Delete[i-1] >= k {
				t.Fatalf("deletes not sorted and distinct: %q", u.Delete)
			}
			if _, set := u.Set[k]; set {
				t.Fatalf("%q is both set and deleted", k)
			}
			doc[k] = nil
		}
		again, err := json.Marshal(doc)
		if err != nil {
			t.Fatal(err)
		}
		u2, err := ParseMetrics(again)
		if err != nil {
			t.Fatalf("re-parsing %s: %v", again, err)
		}
		if !reflect.DeepEqual(u, u2) {
			t.Fatalf("round trip through %s changed the update:\n%+v\n%+v", again, u, u2)
		}
		if _, err := u.Apply(nil); err != nil {
			t.Fatalf("applying to no metrics: %v", err)
		}
	})
}

// The documents leave what they cannot judge alone, such as a policy name
// they do not know, to the validation of the edited config, which names it
// with its contract and release.
func TestValidationRejectsWhatTheDocumentsLeaveToIt(t *testing.T) {
	const config = `{"model_metadata": [{"model_path": "a/"}],
	 "contracts": [{"organization": "ads", "project": "pctr", "contract_number": 1, "servables": [{"release_version": "v1", "model_path": "a/"}]}]}`
	for _, tc := range []struct {
		name string
		edit func(c *modelconfig.Config) error
		want string
	}{
		{"ForestFlow's KeepLatest without servablesToKeep", func(c *modelconfig.Config) error {
			cs, err := ParseContractSettings([]byte(`{"expirationPolicy": {"KeepLatest": {}}}`))
			if err != nil {
				return err
			}
			return c.CreateContract("ads", "new", 1, cs)
		}, `contracts[1].expiration.keep_latest: contract ads/new/1: keep_latest must keep at least 1 servable, got 0`},
		{"unknown ForestFlow router", func(c *modelconfig.Config) error {
			cs, err := ParseContractSettings([]byte(`{"router": {"RandomRouter": {}}}`))
			if err != nil {
				return err
			}
			return c.UpdateContract("ads/pctr/1", cs)
		}, `contracts[0].router: contract ads/pctr/1: router "RandomRouter" is not fair, latest, thompson or epsilon_greedy`},
		{"unknown ForestFlow-named rule", func(c *modelconfig.Config) error {
			p, err := ParsePolicy([]byte(`{"validityPolicy": [{"AlwaysValid": {}}]}`))
			if err != nil {
				return err
			}
			return c.SetPolicy("ads/pctr/1", "v1", p)
		}, `contracts[0].servables[0].validity[0]: contract ads/pctr/1: release v1: unknown validity rule "AlwaysValid"`},
		{"unknown ForestFlow phase-in", func(c *modelconfig.Config) error {
			p, err := ParsePolicy([]byte(`{"phaseInPolicy": {"StepPhaseIn": {}}}`))
			if err != nil {
				return err
			}
			return c.SetPolicy("ads/pctr/1", "v1", p)
		}, `contracts[0].servables[0].phase_in: contract ads/pctr/1: release v1: unknown phase_in policy "StepPhaseIn"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, err := modelconfig.Parse([]byte(config))
			if err != nil {
				t.Fatal(err)
			}
			if err := tc.edit(c); err != nil {
				t.Fatalf("the document or the edit failed: %v", err)
			}
			data, err := c.Validate()
			checkDocumentError(t, err, tc.want)
			if data != nil {
				t.Errorf("Validate returned data with its error: %s", data)
			}
		})
	}
}

// ptr returns a pointer to v, for the optional bounds of the release gates.
func ptr(v float64) *float64 { return &v }
