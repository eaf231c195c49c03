package modelconfig

import (
	"encoding/json"
	"errors"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"
)

// checkConfigError fails t unless err is a *Error whose message contains want.
func checkConfigError(t *testing.T, err error, want string) {
	t.Helper()
	if err == nil {
		t.Fatalf("no error, want %q", want)
	}
	var ce *Error
	if !errors.As(err, &ce) {
		t.Errorf("error %T is not a *Error: %v", err, err)
	}
	if !strings.Contains(err.Error(), want) {
		t.Errorf("error %q does not contain %q", err, want)
	}
}

// defaultServableLogging is the logging of a servable given none.
var defaultServableLogging = ServableLogging{Level: LogLevelNone, SampleRate: 1, KeyFeaturesSeparator: "."}

func TestParseContractSettingsReadsGroveAndForestFlowShapes(t *testing.T) {
	for _, tc := range []struct {
		name, data string
		want       ContractSettings
	}{
		{"empty object takes the defaults", `{}`, ContractSettings{Router: RouterFair}},
		{"nulls take the defaults", `{"router": null, "expiration": null, "sticky_key": null}`, ContractSettings{Router: RouterFair}},
		{"config shape", `{"router": "latest", "expiration": {"keep_latest": 2}, "sticky_key": "user_id"}`,
			ContractSettings{Router: RouterLatest, Expiration: Expiration{Kind: ExpireKeepLatest, Keep: 2}, StickyKey: "user_id"}},
		{"config shape in lowerCamelCase", `{"router": "fair", "expiration": {"keepTopRanked": {"n": "3", "metric": "auc"}}, "stickyKey": "u"}`,
			ContractSettings{Router: RouterFair, Expiration: Expiration{Kind: ExpireKeepTopRanked, Keep: 3, Metric: "auc"}, StickyKey: "u"}},
		{"ForestFlow's contract creation body", `{"expirationPolicy":{"KeepLatest":{"servablesToKeep":2}},"router":{"LatestPhaseInPctBasedRouter":{}}}`,
			ContractSettings{Router: RouterLatest, Expiration: Expiration{Kind: ExpireKeepLatest, Keep: 2}}},
		{"ForestFlow's fair router and KeepTopRanked in snake_case", `{"expiration_policy": {"KeepTopRanked": {"servablesToKeep": "1", "metricToEvaluate": "auc", "ordering": "DESC"}}, "router": {"FairPhaseInPctBasedRouter": {}}}`,
			ContractSettings{Router: RouterFair, Expiration: Expiration{Kind: ExpireKeepTopRanked, Keep: 1, Metric: "auc"}}},
		{"KeepTopRanked without ordering", `{"expirationPolicy": {"KeepTopRanked": {"servablesToKeep": 2, "metricToEvaluate": "auc"}}}`,
			ContractSettings{Router: RouterFair, Expiration: Expiration{Kind: ExpireKeepTopRanked, Keep: 2, Metric: "auc"}}},
		{"KeepLatest without servablesToKeep is left to validation", `{"expirationPolicy": {"KeepLatest": {}}}`,
			ContractSettings{Router: RouterFair, Expiration: Expiration{Kind: ExpireKeepLatest}}},
		{"unknown router name is left to validation", `{"router": "random"}`, ContractSettings{Router: "random"}},
		{"unknown ForestFlow router is left to validation", `{"router": {"RandomRouter": {"x": [1]}}}`, ContractSettings{Router: "RandomRouter"}},
		{"unknown expiration policy is left to validation", `{"expirationPolicy": {"KeepOldest": {"servablesToKeep": 1}}}`,
			ContractSettings{Router: RouterFair, Expiration: Expiration{Kind: "KeepOldest"}}},
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
			checkConfigError(t, err, tc.want)
		})
	}
}

func TestParsePolicyReadsGroveAndForestFlowShapes(t *testing.T) {
	immediate := PhaseIn{Kind: PhaseInImmediate}
	for _, tc := range []struct {
		name, data string
		want       Policy
	}{
		{"empty object takes the defaults", `{}`, Policy{PhaseIn: immediate}},
		{"nulls take the defaults", `{"validity": null, "phase_in": null, "shadow": null}`, Policy{PhaseIn: immediate}},
		{"empty validity list", `{"validityPolicy": []}`, Policy{PhaseIn: immediate}},
		{"ForestFlow's PolicySettings",
			`{"validityPolicy":[{"ImmediatelyValid":{}},{"TimeBasedValidity":{"validAfterMS":5000}},{"MinServedEventsBasedValidity":{"validAfterMinServedEvents":10}}],"phaseInPolicy":{"LinearTimeBasedPhaseIn":{"phaseInOverSecs":600}}}`,
			Policy{Validity: []ValidityRule{{Kind: RuleImmediatelyValid}, {Kind: RuleValidAfterMs, After: 5 * time.Second}, {Kind: RuleMinServedEvents, Count: 10}},
				PhaseIn: PhaseIn{Kind: PhaseInLinear, Over: 10 * time.Minute}}},
		{"ForestFlow's shadow-only servable", `{"validity_policy": [{"NeverValid": {}}], "phase_in_policy": {"ImmediatePhaseIn": {}}}`,
			Policy{Validity: []ValidityRule{{Kind: RuleNeverValid}}, PhaseIn: immediate}},
		{"ForestFlow's phase_in_over_secs in snake_case", `{"phaseInPolicy": {"LinearTimeBasedPhaseIn": {"phase_in_over_secs": "60"}}}`,
			Policy{PhaseIn: PhaseIn{Kind: PhaseInLinear, Over: time.Minute}}},
		{"ForestFlow's rules with their fields absent", `{"validityPolicy": [{"TimeBasedValidity": {}}, {"MinServedEventsBasedValidity": {}}]}`,
			Policy{Validity: []ValidityRule{{Kind: RuleValidAfterMs}, {Kind: RuleMinServedEvents}}, PhaseIn: immediate}},
		{"config shape",
			`{"validity": [{"valid_after_ms": {"ms": 60000}}, {"min_metric": {"metric": "auc", "threshold": 0.7}}], "phase_in": {"linear_over_secs": {"secs": 600}}, "shadow": {"sample_rate": 0.25}}`,
			Policy{Validity: []ValidityRule{{Kind: RuleValidAfterMs, After: time.Minute}, {Kind: RuleMinMetric, Metric: "auc", Threshold: 0.7}},
				PhaseIn: PhaseIn{Kind: PhaseInLinear, Over: 10 * time.Minute}, Shadow: &Shadow{SampleRate: 0.25}}},
		{"config shape in lowerCamelCase, empty shadow", `{"validity": [{"minServedEvents": {"count": "1000"}}], "phaseIn": {"immediate": {}}, "shadow": {}}`,
			Policy{Validity: []ValidityRule{{Kind: RuleMinServedEvents, Count: 1000}}, PhaseIn: immediate, Shadow: &Shadow{SampleRate: 1}}},
		{"names of either shape in either field", `{"validityPolicy": [{"never_valid": {}}, {"ImmediatelyValid": {}}], "phase_in": {"ImmediatePhaseIn": {}}}`,
			Policy{Validity: []ValidityRule{{Kind: RuleNeverValid}, {Kind: RuleImmediatelyValid}}, PhaseIn: immediate}},
		{"unknown rule is left to validation", `{"validity": [{"always_valid": {"x": 1}}]}`,
			Policy{Validity: []ValidityRule{{Kind: "always_valid"}}, PhaseIn: immediate}},
		{"unknown phase-in is left to validation", `{"phaseInPolicy": {"StepPhaseIn": {}}}`, Policy{PhaseIn: PhaseIn{Kind: "StepPhaseIn"}}},
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
		{"PerformanceBasedValidity refused", `{"validityPolicy": [{"ImmediatelyValid": {}}, {"PerformanceBasedValidity": {"minThreshold": 0.7}}]}`,
			`validity_policy[1].PerformanceBasedValidity: ForestFlow's PerformanceBasedValidity names no metric; use {"min_metric"`},
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
		{"empty rule", `{"validity": [{}]}`, `validity[0]: expected one of immediately_valid, never_valid, valid_after_ms, min_served_events, min_metric, ImmediatelyValid, NeverValid, TimeBasedValidity, MinServedEventsBasedValidity or PerformanceBasedValidity, got an empty object`},
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
		{"not an object", `[{"ImmediatelyValid": {}}]`, `policy must be a JSON object, got an array`},
		{"null", `null`, `policy must be a JSON object, got null`},
		{"empty", ``, `unexpected EOF`},
		{"trailing data", `{}]`, `unexpected data after the policy object`},
		{"syntax error", "{\n\"validity\": [{\"NeverValid\": {}]}", `invalid JSON at line 2, column 31`},
		{"invalid UTF-8", "{\"validity\": [{\"\xfe\": {}}]}", `policy is not valid UTF-8`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := ParsePolicy([]byte(tc.data))
			checkConfigError(t, err, tc.want)
		})
	}
}

func TestParseLoggingReadsConfigAndForestFlowShapes(t *testing.T) {
	for _, tc := range []struct {
		name, data string
		want       ServableLogging
	}{
		{"empty object takes the defaults", `{}`, defaultServableLogging},
		{"nulls take the defaults", `{"log_level": null, "sample_rate": null, "key_features": null, "key_features_separator": null}`, defaultServableLogging},
		{"ForestFlow's LoggingSettings", `{"logLevel": "FULL", "keyFeatures": ["someKey", "anotherKey"]}`,
			ServableLogging{Level: LogLevelFull, SampleRate: 1, KeyFeatures: []string{"someKey", "anotherKey"}, KeyFeaturesSeparator: "."}},
		{"config shape", `{"log_level": "SAMPLE", "sample_rate": "0.01", "key_features": ["user_id"], "key_features_separator": "|"}`,
			ServableLogging{Level: LogLevelSample, SampleRate: 0.01, KeyFeatures: []string{"user_id"}, KeyFeaturesSeparator: "|"}},
		{"explicit empty separator", `{"keyFeaturesSeparator": ""}`, ServableLogging{Level: LogLevelNone, SampleRate: 1}},
		{"unknown level is left to validation", `{"logLevel": "full"}`, ServableLogging{Level: "full", SampleRate: 1, KeyFeaturesSeparator: "."}},
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
			checkConfigError(t, err, tc.want)
		})
	}
}

// basicServeRequest is a ForestFlow BasicServeRequest with Grove's model
// fields instead of its URL path and flavor.
const basicServeRequest = `{
  "path": "pctr_v2/",
  "checksum": "` + sum1 + `",
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
		Model:    Model{Path: "pctr_v2/", Checksum: sum1, WarmUpJSON: `{"request": []}`, EvictionGracePeriod: time.Minute},
		Contract: Contract{Organization: "ads", Project: "pctr", Number: 3},
		Servable: ContractServable{ReleaseVersion: "2.0", ModelPath: "pctr_v2/",
			Validity: []ValidityRule{{Kind: RuleImmediatelyValid}, {Kind: RuleValidAfterMs, After: 5 * time.Second}},
			PhaseIn:  PhaseIn{Kind: PhaseInLinear, Over: 10 * time.Minute},
			Logging:  ServableLogging{Level: LogLevelFull, SampleRate: 1, KeyFeatures: []string{"someKey", "anotherKey"}, KeyFeaturesSeparator: "."}},
		ContractSettings: &ContractSettings{Router: RouterLatest, Expiration: Expiration{Kind: ExpireKeepLatest, Keep: 2}},
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("got  %+v\nwant %+v", got, want)
	}
}

func TestParseServeRequestDefaultsAndSpellings(t *testing.T) {
	servable := func(rv, path string) ContractServable {
		return ContractServable{ReleaseVersion: rv, ModelPath: path, PhaseIn: PhaseIn{Kind: PhaseInImmediate}, Logging: defaultServableLogging}
	}
	for _, tc := range []struct {
		name, data string
		want       *ServeRequest
	}{
		{"only path and fqrv",
			`{"path": "m/", "fqrv": {"contract": {"organization": "o", "project": "p", "contract_number": 1}, "release_version": "v1"}}`,
			&ServeRequest{Model: Model{Path: "m/"}, Contract: Contract{Organization: "o", Project: "p", Number: 1}, Servable: servable("v1", "m/")}},
		{"snake_case and model_path",
			`{"model_path": "m.pt", "eviction_grace_period_in_ms": "250", "fqrv": {"contract": {"organization": "o", "project": "p", "contract_number": "2"}, "release_version": "v1"},
			  "servable_settings": {"policy_settings": {"shadow": {"sample_rate": 0.5}}, "logging_settings": {"log_level": "SAMPLE", "sample_rate": 0.1}},
			  "contract_settings": {}, "tags": null}`,
			&ServeRequest{Model: Model{Path: "m.pt", EvictionGracePeriod: 250 * time.Millisecond}, Contract: Contract{Organization: "o", Project: "p", Number: 2},
				Servable: ContractServable{ReleaseVersion: "v1", ModelPath: "m.pt", PhaseIn: PhaseIn{Kind: PhaseInImmediate}, Shadow: &Shadow{SampleRate: 0.5},
					Logging: ServableLogging{Level: LogLevelSample, SampleRate: 0.1, KeyFeaturesSeparator: "."}},
				ContractSettings: &ContractSettings{Router: RouterFair}}},
		{"lowerCamelCase",
			`{"modelPath": "m/", "warmUpBatchRequestJson": "[]", "evictionGracePeriodInMs": 5, "fqrv": {"contract": {"organization": "o", "project": "p", "contractNumber": 1}, "releaseVersion": "v1"},
			  "servableSettings": {"policySettings": {}, "loggingSettings": {}}, "tags": {"k": "v", "nested": {"x": [1, 2]}}}`,
			&ServeRequest{Model: Model{Path: "m/", WarmUpJSON: "[]", EvictionGracePeriod: 5 * time.Millisecond}, Contract: Contract{Organization: "o", Project: "p", Number: 1},
				Servable: servable("v1", "m/")}},
		{"policy settings absent keep the other's defaults",
			`{"path": "m/", "fqrv": {"contract": {"organization": "o", "project": "p", "contract_number": 1}, "release_version": "v1"},
			  "servableSettings": {"loggingSettings": {"keyFeatures": ["u"]}}}`,
			&ServeRequest{Model: Model{Path: "m/"}, Contract: Contract{Organization: "o", Project: "p", Number: 1},
				Servable: ContractServable{ReleaseVersion: "v1", ModelPath: "m/", PhaseIn: PhaseIn{Kind: PhaseInImmediate},
					Logging: ServableLogging{Level: LogLevelNone, SampleRate: 1, KeyFeatures: []string{"u"}, KeyFeaturesSeparator: "."}}}},
		{"request timeouts",
			`{"path": "m/", "default_timeout_ms": 100, "queueTimeoutMs": "20", "fqrv": {"contract": {"organization": "o", "project": "p", "contract_number": 1}, "release_version": "v1"}}`,
			&ServeRequest{Model: Model{Path: "m/", DefaultTimeout: 100 * time.Millisecond, QueueTimeout: 20 * time.Millisecond},
				Contract: Contract{Organization: "o", Project: "p", Number: 1}, Servable: servable("v1", "m/")}},
		{"fqrv with only a project",
			`{"path": "m/", "fqrv": {"contract": {"project": "p"}, "release_version": "v1"}}`,
			&ServeRequest{Model: Model{Path: "m/"}, Contract: Contract{Project: "p"}, Servable: servable("v1", "m/")}},
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
		{"PerformanceBasedValidity in the policy", `{"path": "m/", ` + fqrv + `, "servableSettings": {"policySettings": {"validityPolicy": [{"PerformanceBasedValidity": {}}]}}}`,
			`servable_settings.policy_settings.validity_policy[0].PerformanceBasedValidity: ForestFlow's PerformanceBasedValidity names no metric`},
		{"bad logging settings", `{"path": "m/", ` + fqrv + `, "servableSettings": {"loggingSettings": {"logLevel": 1}}}`, `servable_settings.logging_settings.log_level: expected a string, got number 1`},
		{"null policy settings", `{"path": "m/", ` + fqrv + `, "servableSettings": {"policySettings": null}}`, `servable_settings.policy_settings: expected an object, got null`},
		{"ordering ASC in the contract settings", `{"path": "m/", ` + fqrv + `, "contractSettings": {"expirationPolicy": {"KeepTopRanked": {"ordering": "ASC"}}}}`,
			`contract_settings.expiration_policy.KeepTopRanked.ordering: ordering "ASC" is not supported`},
		{"contract settings not an object", `{"path": "m/", ` + fqrv + `, "contractSettings": "fair"}`, `contract_settings: expected an object, got string "fair"`},
		{"negative grace period", `{"path": "m/", "eviction_grace_period_in_ms": -1, ` + fqrv + `}`, `eviction_grace_period_in_ms: -1 is out of range 0..2147483647`},
		{"checksum not a string", `{"path": "m/", "checksum": 5, ` + fqrv + `}`, `checksum: expected a string, got number 5`},
		{"bad JSON in the tags", `{"path": "m/", ` + fqrv + `, "tags": {"a": tru}}`, `invalid JSON`},
		{"not an object", `[]`, `serve request must be a JSON object, got an array`},
		{"null", `null`, `serve request must be a JSON object, got null`},
		{"empty", ` `, `unexpected EOF`},
		{"trailing data", `{"path": "m/", ` + fqrv + `} {}`, `unexpected data after the serve request object`},
		{"invalid UTF-8", "{\"path\": \"m\xff/\", " + fqrv + "}", `serve request is not valid UTF-8`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r, err := ParseServeRequest([]byte(tc.data))
			checkConfigError(t, err, tc.want)
			if r != nil {
				t.Errorf("got a request %+v with the error", r)
			}
		})
	}
}

// twoContracts is a config with contracts ads/pctr/1 (v1 on a/, v2 on b/)
// and ads/pcvr/1 (v1 on a/), and model c/ in no contract.
const twoContracts = `{"model_metadata": [{"model_path": "a/", "checksum": "` + sum1 + `"}, {"model_path": "b/"}, {"model_path": "c/"}],
 "contracts": [
  {"organization": "ads", "project": "pctr", "contract_number": 1, "router": "latest", "expiration": {"keep_latest": 2},
   "servables": [{"release_version": "v1", "model_path": "a/"}, {"release_version": "v2", "model_path": "b/", "shadow": {}}]},
  {"organization": "ads", "project": "pcvr", "contract_number": 1,
   "servables": [{"release_version": "v1", "model_path": "a/"}]}]}`

// parseConfig parses a model config or fails t.
func parseConfig(t *testing.T, data string) *Config {
	t.Helper()
	c, err := Parse([]byte(data))
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// serveRequest returns a serve request for release rv of contract o/p/n on model path.
func serveRequest(org, project string, n int, rv, path string) *ServeRequest {
	return &ServeRequest{
		Model:    Model{Path: path},
		Contract: Contract{Organization: org, Project: project, Number: n},
		Servable: ContractServable{ReleaseVersion: rv, ModelPath: path, PhaseIn: PhaseIn{Kind: PhaseInImmediate}, Logging: defaultServableLogging},
	}
}

// checkValid fails t unless c validates and its canonical JSON reads back to c.
func checkValid(t *testing.T, c *Config) {
	t.Helper()
	data, err := c.Validate()
	if err != nil {
		t.Fatalf("Validate: %v", err)
	}
	back, err := Parse(data)
	if err != nil {
		t.Fatalf("re-parsing %s: %v", data, err)
	}
	if want := normalized(c); !reflect.DeepEqual(back, want) {
		t.Errorf("Validate's JSON reads back to\n%+v\nnot\n%+v", back, want)
	}
}

// The canonical JSON writes an empty router, phase-in or log level as its
// default (fair, immediate, NONE), as their types document; the documents
// accept "" for them (left to validation, which reads the canonical form).
// It writes an unknown expiration or phase-in policy, which validation
// rejects, by its name alone: {"KeepOldest": {}}. (A document that gives a
// setting in both spellings, like "phase_in" and "phase_in_policy", can
// leave a parameter of the first on the unknown policy of the second.)
func canonicalSettings(cs ContractSettings) ContractSettings {
	if cs.Router == "" {
		cs.Router = RouterFair
	}
	if k := cs.Expiration.Kind; k != ExpireNone && k != ExpireKeepLatest && k != ExpireKeepTopRanked {
		cs.Expiration = Expiration{Kind: k}
	}
	return cs
}

func canonicalPolicy(p Policy) Policy {
	switch p.PhaseIn.Kind {
	case "":
		p.PhaseIn.Kind = PhaseInImmediate
	case PhaseInImmediate, PhaseInLinear:
	default:
		p.PhaseIn = PhaseIn{Kind: p.PhaseIn.Kind}
	}
	return p
}

func canonicalLogging(l ServableLogging) ServableLogging {
	if l.Level == "" {
		l.Level = LogLevelNone
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

// normalized returns a deep copy of c as Parse reads it: empty
// lists are nil (an edit that removes the last servable leaves an empty
// slice, written as [] and read back as nil).
func normalized(c *Config) *Config {
	out := &Config{Models: slices.Clone(c.Models)}
	for _, k := range c.Contracts {
		cs := canonicalSettings(k.Settings())
		k.Router, k.Expiration = cs.Router, cs.Expiration
		k.Servables = slices.Clone(k.Servables)
		for i := range k.Servables {
			s := &k.Servables[i]
			s.PhaseIn = canonicalPolicy(s.Policy()).PhaseIn
			s.Logging = canonicalLogging(s.Logging)
			s.Validity = slices.Clone(s.Validity)
			s.Logging.KeyFeatures = slices.Clone(s.Logging.KeyFeatures)
			if len(s.Validity) == 0 {
				s.Validity = nil
			}
			if len(s.Logging.KeyFeatures) == 0 {
				s.Logging.KeyFeatures = nil
			}
		}
		if len(k.Servables) == 0 {
			k.Servables = nil
		}
		out.Contracts = append(out.Contracts, k)
	}
	if len(out.Models) == 0 {
		out.Models = nil
	}
	return out
}

func TestCreateContractAddsAContractWithNoServables(t *testing.T) {
	c := parseConfig(t, twoContracts)
	cs := ContractSettings{Router: RouterLatest, Expiration: Expiration{Kind: ExpireKeepTopRanked, Keep: 2, Metric: "auc"}, StickyKey: "user_id"}
	if err := c.CreateContract("ads", "pctr", 2, cs); err != nil {
		t.Fatal(err)
	}
	want := Contract{Organization: "ads", Project: "pctr", Number: 2, Router: RouterLatest,
		Expiration: Expiration{Kind: ExpireKeepTopRanked, Keep: 2, Metric: "auc"}, StickyKey: "user_id"}
	if len(c.Contracts) != 3 || !reflect.DeepEqual(c.Contracts[2], want) {
		t.Fatalf("contracts %+v, want the third %+v", c.Contracts, want)
	}
	if got := c.Contracts[2].Settings(); !reflect.DeepEqual(got, cs) {
		t.Errorf("Settings() = %+v, want %+v", got, cs)
	}
	checkValid(t, c)
}

func TestCreateContractRefusesAnExistingContract(t *testing.T) {
	c := parseConfig(t, twoContracts)
	before := parseConfig(t, twoContracts)
	err := c.CreateContract("ads", "pcvr", 1, ContractSettings{Router: RouterLatest})
	if !errors.Is(err, ErrContractExists) {
		t.Fatalf("got %v, want ErrContractExists", err)
	}
	if !strings.Contains(err.Error(), "ads/pcvr/1") {
		t.Errorf("error %q does not name the contract", err)
	}
	if !reflect.DeepEqual(c, before) {
		t.Errorf("the config changed: %+v", c)
	}
}

func TestUpdateContractReplacesTheSettingsOnly(t *testing.T) {
	c := parseConfig(t, twoContracts)
	cs := ContractSettings{Router: RouterFair, StickyKey: "u"}
	if err := c.UpdateContract("ads/pctr/1", cs); err != nil {
		t.Fatal(err)
	}
	k := c.Contracts[0]
	if !reflect.DeepEqual(k.Settings(), cs) || len(k.Servables) != 2 || k.ID() != "ads/pctr/1" {
		t.Errorf("contract %+v, want settings %+v and its two servables", k, cs)
	}
	checkValid(t, c)
	if err := c.UpdateContract("ads/pctr/9", cs); !errors.Is(err, ErrContractNotFound) {
		t.Errorf("unknown contract: got %v, want ErrContractNotFound", err)
	}
}

func TestAddServableCreatesTheContractWithDefaultSettings(t *testing.T) {
	var c Config
	r := serveRequest("ads", "pctr", 1, "v1", "a/")
	r.Model.EvictionGracePeriod = time.Minute
	if err := c.AddServable(r); err != nil {
		t.Fatal(err)
	}
	want := Config{
		Models: []Model{{Path: "a/", EvictionGracePeriod: time.Minute}},
		Contracts: []Contract{{Organization: "ads", Project: "pctr", Number: 1, Router: RouterFair,
			Servables: []ContractServable{r.Servable}}},
	}
	if !reflect.DeepEqual(c, want) {
		t.Errorf("got  %+v\nwant %+v", c, want)
	}
	if c.Contracts[0].Expiration.Kind != ExpireNone {
		t.Errorf("a created contract expires %+v, want no expiration (not ForestFlow's KeepLatest(1))", c.Contracts[0].Expiration)
	}
	checkValid(t, &c)
}

func TestAddServableCreatesTheContractWithTheGivenSettings(t *testing.T) {
	r, err := ParseServeRequest([]byte(basicServeRequest))
	if err != nil {
		t.Fatal(err)
	}
	var c Config
	if err := c.AddServable(r); err != nil {
		t.Fatal(err)
	}
	k := c.Contracts[0]
	if k.ID() != "ads/pctr/3" || !reflect.DeepEqual(k.Settings(), *r.ContractSettings) || !reflect.DeepEqual(k.Servables, []ContractServable{r.Servable}) {
		t.Errorf("contract %+v, want settings %+v and servable %+v", k, *r.ContractSettings, r.Servable)
	}
	if !reflect.DeepEqual(c.Models, []Model{r.Model}) {
		t.Errorf("models %+v, want %+v", c.Models, r.Model)
	}
	checkValid(t, &c)
}

func TestAddServableListsTheModelOnlyIfMissing(t *testing.T) {
	c := parseConfig(t, twoContracts)
	// a/ is listed with a checksum: the request's model fields do not replace it.
	r := serveRequest("ads", "pctr", 2, "v1", "a/")
	r.Model.EvictionGracePeriod = time.Hour
	if err := c.AddServable(r); err != nil {
		t.Fatal(err)
	}
	if len(c.Models) != 3 || c.Models[0] != (Model{Path: "a/", Checksum: sum1}) {
		t.Errorf("models %+v, want a/ unchanged and nothing added", c.Models)
	}
	// d/ is new: it is appended with the request's fields.
	r = serveRequest("ads", "pctr", 1, "v3", "d/")
	r.Model.Checksum = sum1
	if err := c.AddServable(r); err != nil {
		t.Fatal(err)
	}
	if len(c.Models) != 4 || c.Models[3] != r.Model {
		t.Errorf("models %+v, want d/ appended as %+v", c.Models, r.Model)
	}
	if s := c.Contracts[0].Servables; len(s) != 3 || s[2].ReleaseVersion != "v3" || s[2].ModelPath != "d/" {
		t.Errorf("servables %+v, want v3 on d/ appended", s)
	}
	checkValid(t, c)
}

func TestAddServableUsesTheModelPathOfTheRequest(t *testing.T) {
	var c Config
	r := serveRequest("o", "p", 1, "v1", "m/")
	r.Servable.ModelPath = "elsewhere/"
	if err := c.AddServable(r); err != nil {
		t.Fatal(err)
	}
	if got := c.Contracts[0].Servables[0].ModelPath; got != "m/" {
		t.Errorf("model_path %q, want the request's path m/", got)
	}
	if r.Servable.ModelPath != "elsewhere/" {
		t.Errorf("AddServable modified the request")
	}
}

func TestAddServableRefusesContractSettingsForAnExistingContract(t *testing.T) {
	c := parseConfig(t, twoContracts)
	before := parseConfig(t, twoContracts)
	r := serveRequest("ads", "pctr", 1, "v3", "d/")
	r.ContractSettings = &ContractSettings{Router: RouterFair}
	err := c.AddServable(r)
	if !errors.Is(err, ErrContractSettingsGiven) {
		t.Fatalf("got %v, want ErrContractSettingsGiven", err)
	}
	if !strings.Contains(err.Error(), "ads/pctr/1") {
		t.Errorf("error %q does not name the contract", err)
	}
	if !reflect.DeepEqual(c, before) {
		t.Errorf("the config changed: %+v", c)
	}
}

func TestAddServableRefusesADuplicateRelease(t *testing.T) {
	c := parseConfig(t, twoContracts)
	before := parseConfig(t, twoContracts)
	err := c.AddServable(serveRequest("ads", "pctr", 1, "v2", "d/"))
	if !errors.Is(err, ErrServableExists) {
		t.Fatalf("got %v, want ErrServableExists", err)
	}
	if !strings.Contains(err.Error(), "v2") || !strings.Contains(err.Error(), "ads/pctr/1") {
		t.Errorf("error %q does not name the release and contract", err)
	}
	if !reflect.DeepEqual(c, before) {
		t.Errorf("the config changed (d/ must not be listed): %+v", c)
	}
}

func TestEditsOfUnknownContractsAndReleasesFail(t *testing.T) {
	for _, tc := range []struct {
		name string
		edit func(c *Config) error
		want error
	}{
		{"SetPolicy unknown contract", func(c *Config) error { return c.SetPolicy("ads/pctr/2", "v1", Policy{}) }, ErrContractNotFound},
		{"SetPolicy unknown release", func(c *Config) error { return c.SetPolicy("ads/pctr/1", "v3", Policy{}) }, ErrServableNotFound},
		{"SetPolicy release of another contract", func(c *Config) error { return c.SetPolicy("ads/pcvr/1", "v2", Policy{}) }, ErrServableNotFound},
		{"SetLogging unknown contract", func(c *Config) error { return c.SetLogging("ads/x/1", "v1", ServableLogging{}) }, ErrContractNotFound},
		{"SetLogging unknown release", func(c *Config) error { return c.SetLogging("ads/pctr/1", "V1", ServableLogging{}) }, ErrServableNotFound},
		{"RemoveServable unknown contract", func(c *Config) error { return c.RemoveServable("ads/pctr/01", "v1") }, ErrContractNotFound},
		{"RemoveServable unknown release", func(c *Config) error { return c.RemoveServable("ads/pcvr/1", "v2") }, ErrServableNotFound},
		{"UpdateContract unknown contract", func(c *Config) error { return c.UpdateContract("", ContractSettings{}) }, ErrContractNotFound},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := parseConfig(t, twoContracts)
			before := parseConfig(t, twoContracts)
			err := tc.edit(c)
			if !errors.Is(err, tc.want) {
				t.Fatalf("got %v, want %v", err, tc.want)
			}
			if !reflect.DeepEqual(c, before) {
				t.Errorf("the config changed: %+v", c)
			}
		})
	}
}

func TestSetPolicyReplacesTheServablesPolicy(t *testing.T) {
	c := parseConfig(t, twoContracts)
	p, err := ParsePolicy([]byte(`{"validityPolicy": [{"TimeBasedValidity": {"validAfterMS": 5000}}], "phaseInPolicy": {"LinearTimeBasedPhaseIn": {"phaseInOverSecs": 600}}}`))
	if err != nil {
		t.Fatal(err)
	}
	if err := c.SetPolicy("ads/pctr/1", "v2", p); err != nil {
		t.Fatal(err)
	}
	s := c.Contracts[0].Servables[1]
	if !reflect.DeepEqual(s.Policy(), p) {
		t.Errorf("policy %+v, want %+v", s.Policy(), p)
	}
	if s.Shadow != nil {
		t.Errorf("the shadow was kept: a policy replaces the whole policy")
	}
	if s.ReleaseVersion != "v2" || s.ModelPath != "b/" || !reflect.DeepEqual(s.Logging, defaultServableLogging) {
		t.Errorf("SetPolicy changed more than the policy: %+v", s)
	}
	if other := c.Contracts[1].Servables[0]; other.Validity != nil {
		t.Errorf("SetPolicy changed release v1 of ads/pcvr/1: %+v", other)
	}
	checkValid(t, c)
}

func TestSetLoggingReplacesTheServablesLogging(t *testing.T) {
	c := parseConfig(t, twoContracts)
	l, err := ParseLogging([]byte(`{"logLevel": "FULL", "keyFeatures": ["user_id"]}`))
	if err != nil {
		t.Fatal(err)
	}
	if err := c.SetLogging("ads/pcvr/1", "v1", l); err != nil {
		t.Fatal(err)
	}
	if got := c.Contracts[1].Servables[0].Logging; !reflect.DeepEqual(got, l) {
		t.Errorf("logging %+v, want %+v", got, l)
	}
	if got := c.Contracts[0].Servables[0].Logging; !reflect.DeepEqual(got, defaultServableLogging) {
		t.Errorf("SetLogging changed release v1 of ads/pctr/1: %+v", got)
	}
	checkValid(t, c)
}

func TestRemoveServableRemovesTheModelOnlyWhenUnused(t *testing.T) {
	c := parseConfig(t, twoContracts)
	// b/ is used by ads/pctr/1 v2 only: it leaves model_metadata.
	if err := c.RemoveServable("ads/pctr/1", "v2"); err != nil {
		t.Fatal(err)
	}
	if got := paths(c.Models); !reflect.DeepEqual(got, []string{"a/", "c/"}) {
		t.Errorf("models %v, want a/ and c/", got)
	}
	// a/ is still used by ads/pcvr/1 v1: it stays.
	if err := c.RemoveServable("ads/pctr/1", "v1"); err != nil {
		t.Fatal(err)
	}
	if got := paths(c.Models); !reflect.DeepEqual(got, []string{"a/", "c/"}) {
		t.Errorf("models %v, want a/ (used by ads/pcvr/1) and c/", got)
	}
	if n := len(c.Contracts[0].Servables); n != 0 || len(c.Contracts) != 2 {
		t.Errorf("contracts %+v, want ads/pctr/1 kept with no servables", c.Contracts)
	}
	checkValid(t, c)
	// Its last user gone, a/ leaves too; c/, which no contract used, stays.
	if err := c.RemoveServable("ads/pcvr/1", "v1"); err != nil {
		t.Fatal(err)
	}
	if got := paths(c.Models); !reflect.DeepEqual(got, []string{"c/"}) {
		t.Errorf("models %v, want c/", got)
	}
	if c.Models[0] != (Model{Path: "c/"}) {
		t.Errorf("model c/ changed: %+v", c.Models[0])
	}
	checkValid(t, c)
}

func TestRemoveServableKeepsTheContractsOtherReleases(t *testing.T) {
	c := parseConfig(t, twoContracts)
	if err := c.RemoveServable("ads/pctr/1", "v1"); err != nil {
		t.Fatal(err)
	}
	s := c.Contracts[0].Servables
	if len(s) != 1 || s[0].ReleaseVersion != "v2" || s[0].Shadow == nil {
		t.Errorf("servables %+v, want v2 unchanged", s)
	}
}

func paths(models []Model) []string {
	var out []string
	for _, m := range models {
		out = append(out, m.Path)
	}
	return out
}

func TestValidateRejectsInvalidEdits(t *testing.T) {
	for _, tc := range []struct {
		name string
		edit func(c *Config) error
		want string
	}{
		{"two releases on one model_path", func(c *Config) error {
			return c.AddServable(serveRequest("ads", "pctr", 1, "v3", "a/"))
		}, `contracts[0].servables[2].model_path: contract ads/pctr/1: release v3: model_path "a/" is already release v1 of this contract`},
		{"keep_latest 0", func(c *Config) error {
			return c.UpdateContract("ads/pcvr/1", ContractSettings{Router: RouterFair, Expiration: Expiration{Kind: ExpireKeepLatest}})
		}, `contracts[1].expiration.keep_latest: contract ads/pcvr/1: keep_latest must keep at least 1 servable, got 0`},
		{"ForestFlow's KeepLatest without servablesToKeep", func(c *Config) error {
			cs, err := ParseContractSettings([]byte(`{"expirationPolicy": {"KeepLatest": {}}}`))
			if err != nil {
				return err
			}
			return c.CreateContract("ads", "new", 1, cs)
		}, `keep_latest must keep at least 1 servable, got 0`},
		{"unknown router", func(c *Config) error {
			cs, err := ParseContractSettings([]byte(`{"router": {"RandomRouter": {}}}`))
			if err != nil {
				return err
			}
			return c.UpdateContract("ads/pctr/1", cs)
		}, `contracts[0].router: contract ads/pctr/1: router "RandomRouter" is not fair or latest`},
		{"unknown expiration policy", func(c *Config) error {
			return c.CreateContract("ads", "new", 1, ContractSettings{Router: RouterFair, Expiration: Expiration{Kind: "KeepOldest"}})
		}, `contracts[2].expiration: contract ads/new/1: unknown expiration policy "KeepOldest"`},
		{"bad contract names", func(c *Config) error {
			return c.AddServable(serveRequest("a/b", "p", 1, "v1", "d/"))
		}, `contracts[2].organization: contract a/b/p/1: organization "a/b" has the character '/'`},
		{"contract number 0", func(c *Config) error {
			return c.AddServable(serveRequest("o", "p", 0, "v1", "d/"))
		}, `contract_number 0 must be at least 1`},
		{"release name with a space", func(c *Config) error {
			return c.AddServable(serveRequest("ads", "pctr", 1, "v 3", "d/"))
		}, `release_version "v 3" has the character ' '`},
		{"unsafe model path", func(c *Config) error {
			return c.AddServable(serveRequest("ads", "pctr", 1, "v3", "../d/"))
		}, `model_metadata[3].model_path: "../d/" must not contain ".." segments`},
		{"bad checksum", func(c *Config) error {
			r := serveRequest("ads", "pctr", 1, "v3", "d/")
			r.Model.Checksum = "abc"
			return c.AddServable(r)
		}, `model_metadata[3].checksum: "abc" has 3 characters`},
		{"zero-second linear phase-in", func(c *Config) error {
			return c.SetPolicy("ads/pctr/1", "v1", Policy{PhaseIn: PhaseIn{Kind: PhaseInLinear}})
		}, `contracts[0].servables[0].phase_in.linear_over_secs.secs: contract ads/pctr/1: release v1: linear_over_secs needs secs ≥ 1, got 0`},
		{"unknown ForestFlow-named rule", func(c *Config) error {
			p, err := ParsePolicy([]byte(`{"validityPolicy": [{"AlwaysValid": {}}]}`))
			if err != nil {
				return err
			}
			return c.SetPolicy("ads/pctr/1", "v2", p)
		}, `contracts[0].servables[1].validity[0]: contract ads/pctr/1: release v2: unknown validity rule "AlwaysValid"`},
		{"min_metric without a metric", func(c *Config) error {
			return c.SetPolicy("ads/pctr/1", "v2", Policy{Validity: []ValidityRule{{Kind: RuleMinMetric}}})
		}, `min_metric needs the name of the metric`},
		{"shadow rate above 1", func(c *Config) error {
			return c.SetPolicy("ads/pctr/1", "v2", Policy{Shadow: &Shadow{SampleRate: 2}})
		}, `shadow sample_rate 2 is not between 0 and 1`},
		{"lowercase log level", func(c *Config) error {
			return c.SetLogging("ads/pcvr/1", "v1", ServableLogging{Level: "full", SampleRate: 1})
		}, `contracts[1].servables[0].logging.log_level: contract ads/pcvr/1: release v1: log_level "full" is not NONE, FULL or SAMPLE`},
		{"duplicate key feature", func(c *Config) error {
			return c.SetLogging("ads/pcvr/1", "v1", ServableLogging{Level: LogLevelFull, SampleRate: 1, KeyFeatures: []string{"u", "u"}})
		}, `key feature "u" is listed twice`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := parseConfig(t, twoContracts)
			if err := tc.edit(c); err != nil {
				t.Fatalf("the edit itself failed: %v", err)
			}
			data, err := c.Validate()
			checkConfigError(t, err, tc.want)
			if data != nil {
				t.Errorf("Validate returned data with its error: %s", data)
			}
		})
	}
}

func TestValidateReturnsCanonicalJSONThatReadsBack(t *testing.T) {
	c := parseConfig(t, allShapesExample)
	r, err := ParseServeRequest([]byte(basicServeRequest))
	if err != nil {
		t.Fatal(err)
	}
	if err := c.AddServable(r); err != nil {
		t.Fatal(err)
	}
	if err := c.SetPolicy("ads/pctr/7", "v1~rc.1", Policy{PhaseIn: PhaseIn{Kind: PhaseInImmediate}, Shadow: &Shadow{SampleRate: 0}}); err != nil {
		t.Fatal(err)
	}
	data, err := c.Validate()
	if err != nil {
		t.Fatal(err)
	}
	canonical, err := json.Marshal(c)
	if err != nil {
		t.Fatal(err)
	}
	if string(data) != string(canonical) {
		t.Errorf("Validate returned\n%s\nnot the canonical\n%s", data, canonical)
	}
	checkValid(t, c)

	// An empty config is valid too.
	data, err = (&Config{}).Validate()
	if err != nil || string(data) != `{"model_metadata":[]}` {
		t.Errorf("empty config: got %s, %v", data, err)
	}
}

func TestContractSettingsMarshalJSONRoundTrips(t *testing.T) {
	for _, cs := range []ContractSettings{
		{Router: RouterFair},
		{Router: RouterLatest, Expiration: Expiration{Kind: ExpireKeepLatest, Keep: 2}, StickyKey: "user_id"},
		{Router: RouterFair, Expiration: Expiration{Kind: ExpireKeepTopRanked, Keep: 3, Metric: "auc"}},
		{Router: "random", Expiration: Expiration{Kind: "KeepOldest"}},
		{Router: RouterFair, Expiration: Expiration{Kind: ExpireKeepLatest, Keep: -5}},
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
	// The canonical shape; an empty router is written as the default.
	for _, tc := range []struct {
		cs   ContractSettings
		want string
	}{
		{ContractSettings{}, `{"router":"fair"}`},
		{ContractSettings{Router: RouterLatest, Expiration: Expiration{Kind: ExpireKeepLatest, Keep: 2}, StickyKey: "u"}, `{"router":"latest","expiration":{"keep_latest":2},"sticky_key":"u"}`},
		{ContractSettings{Router: RouterFair, Expiration: Expiration{Kind: ExpireKeepTopRanked, Keep: 1, Metric: "auc"}}, `{"router":"fair","expiration":{"keep_top_ranked":{"metric":"auc","n":1}}}`},
	} {
		got, err := json.Marshal(tc.cs)
		if err != nil || string(got) != tc.want {
			t.Errorf("%+v: got %s, %v; want %s", tc.cs, got, err, tc.want)
		}
	}
}

func TestPolicyMarshalJSONRoundTrips(t *testing.T) {
	for _, p := range []Policy{
		{PhaseIn: PhaseIn{Kind: PhaseInImmediate}},
		{Validity: []ValidityRule{
			{Kind: RuleImmediatelyValid}, {Kind: RuleNeverValid}, {Kind: RuleValidAfterMs, After: 5 * time.Second},
			{Kind: RuleMinServedEvents, Count: 1 << 53}, {Kind: RuleMinMetric, Metric: "auc", Threshold: -0.125}},
			PhaseIn: PhaseIn{Kind: PhaseInLinear, Over: 10 * time.Minute}, Shadow: &Shadow{SampleRate: 0.1}},
		{Validity: []ValidityRule{{Kind: "always_valid"}}, PhaseIn: PhaseIn{Kind: "step"}, Shadow: &Shadow{}},
		{PhaseIn: PhaseIn{Kind: PhaseInLinear, Over: -3 * time.Second}},
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
	got, err := json.Marshal(Policy{})
	if want := `{"validity":[],"phase_in":{"immediate":{}}}`; err != nil || string(got) != want {
		t.Errorf("zero policy: got %s, %v; want %s", got, err, want)
	}
}

func TestServableLoggingMarshalJSONRoundTrips(t *testing.T) {
	for _, l := range []ServableLogging{
		defaultServableLogging,
		{Level: LogLevelSample, SampleRate: 0.01, KeyFeatures: []string{"user_id", "ad_id"}, KeyFeaturesSeparator: "|"},
		{Level: LogLevelFull, SampleRate: 0},
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
	got, err := json.Marshal(ServableLogging{})
	if want := `{"log_level":"NONE","sample_rate":0,"key_features":[],"key_features_separator":""}`; err != nil || string(got) != want {
		t.Errorf("zero logging: got %s, %v; want %s", got, err, want)
	}
}

func TestContractServableMarshalJSONIsTheConfigsServable(t *testing.T) {
	c := parseConfig(t, allShapesExample)
	for _, s := range c.Contracts[0].Servables {
		data, err := json.Marshal(s)
		if err != nil {
			t.Fatal(err)
		}
		doc := `{"model_metadata": [{"model_path": "a/"}, {"model_path": "b/"}], "contracts": [{"organization": "o", "project": "p", "contract_number": 1, "servables": [` + string(data) + `]}]}`
		back, err := Parse([]byte(doc))
		if err != nil {
			t.Fatalf("parsing %s: %v", doc, err)
		}
		if got := back.Contracts[0].Servables[0]; !reflect.DeepEqual(got, s) {
			t.Errorf("%s reads back as %+v, not %+v", data, got, s)
		}
	}
	data, _ := json.Marshal(ContractServable{ReleaseVersion: "v1", ModelPath: "m/", PhaseIn: PhaseIn{Kind: PhaseInLinear, Over: time.Minute}, Logging: defaultServableLogging})
	want := `{"release_version":"v1","model_path":"m/","validity":[],"phase_in":{"linear_over_secs":{"secs":60}},"logging":{"log_level":"NONE","sample_rate":1,"key_features":[],"key_features_separator":"."}}`
	if string(data) != want {
		t.Errorf("got  %s\nwant %s", data, want)
	}
}

// serveRequestJSON writes r as a serve request in the config's shape.
func serveRequestJSON(t *testing.T, r *ServeRequest) []byte {
	t.Helper()
	doc := map[string]any{
		"path":                        r.Model.Path,
		"checksum":                    r.Model.Checksum,
		"warm_up_batch_request_json":  r.Model.WarmUpJSON,
		"eviction_grace_period_in_ms": r.Model.EvictionGracePeriod.Milliseconds(),
		"fqrv": map[string]any{
			"contract":        map[string]any{"organization": r.Contract.Organization, "project": r.Contract.Project, "contract_number": r.Contract.Number},
			"release_version": r.Servable.ReleaseVersion,
		},
		"servable_settings": map[string]any{"policy_settings": r.Servable.Policy(), "logging_settings": r.Servable.Logging},
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

// checkOnlyConfigErrors fails t unless err is nil or a *Error.
func checkOnlyConfigErrors(t *testing.T, err error) {
	t.Helper()
	var ce *Error
	if err != nil && !errors.As(err, &ce) {
		t.Fatalf("error %T is not a *Error: %v", err, err)
	}
}

// FuzzParseServeRequest checks that parsing a serve request never panics,
// fails only with *Error, reads its canonical JSON back, and that
// adding the servable to an empty config and validating it never panics.
func FuzzParseServeRequest(f *testing.F) {
	f.Add([]byte(basicServeRequest))
	f.Add([]byte(`{"path": "m/", "fqrv": {"contract": {"organization": "o", "project": "p", "contract_number": 1}, "release_version": "v1"}}`))
	f.Add([]byte(`{"modelPath": "m.pt", "evictionGracePeriodInMs": "5", "fqrv": {"contract": {"organization": "o", "project": "p", "contractNumber": "2"}, "releaseVersion": "v1"},
		"servableSettings": {"policySettings": {"validity": [{"min_metric": {"metric": "auc", "threshold": 0.7}}], "phaseIn": {"linearOverSecs": {"secs": 60}}, "shadow": {"sampleRate": 0.5}},
		"loggingSettings": {"logLevel": "SAMPLE", "sampleRate": 0.1, "keyFeatures": ["u"], "keyFeaturesSeparator": "|"}},
		"contractSettings": {"router": "latest", "expiration": {"keep_top_ranked": {"n": 2, "metric": "auc"}}, "sticky_key": "u"}, "tags": {"a": "b"}}`))
	f.Add([]byte(`{"path": "file:///models/0", "flavor": {"H2OMojo": {"mojoPath": "m.zip"}}}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		r, err := ParseServeRequest(data)
		checkOnlyConfigErrors(t, err)
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
		var c Config
		if err := c.AddServable(r); err != nil {
			t.Fatalf("adding to an empty config: %v", err)
		}
		out, err := c.Validate()
		checkOnlyConfigErrors(t, err)
		if err != nil {
			return
		}
		back, err := Parse(out)
		if err != nil {
			t.Fatalf("re-parsing the validated %s: %v", out, err)
		}
		if want := normalized(&c); !reflect.DeepEqual(back, want) {
			t.Fatalf("the validated %s reads back as\n%+v\nnot\n%+v", out, back, want)
		}
	})
}

// FuzzParsePolicy checks that parsing a policy never panics, fails only
// with *Error, and reads its canonical JSON back.
func FuzzParsePolicy(f *testing.F) {
	f.Add([]byte(`{"validityPolicy":[{"ImmediatelyValid":{}},{"TimeBasedValidity":{"validAfterMS":5000}},{"MinServedEventsBasedValidity":{"validAfterMinServedEvents":10}}],"phaseInPolicy":{"LinearTimeBasedPhaseIn":{"phaseInOverSecs":600}}}`))
	f.Add([]byte(`{"validity": [{"valid_after_ms": {"ms": 60000}}, {"min_metric": {"metric": "auc", "threshold": 0.7}}, {"never_valid": {}}], "phase_in": {"linear_over_secs": {"secs": 600}}, "shadow": {"sample_rate": 0.25}}`))
	f.Add([]byte(`{"validity_policy": [{"PerformanceBasedValidity": {}}], "phase_in_policy": {"ImmediatePhaseIn": {}}, "shadow": {}}`))
	f.Add([]byte(`{"phaseIn": {"immediate": {}}, "validity": null, "shadow": null}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		p, err := ParsePolicy(data)
		checkOnlyConfigErrors(t, err)
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
// panics, fails only with *Error, and reads its canonical JSON back.
func FuzzParseContractSettings(f *testing.F) {
	f.Add([]byte(`{"expirationPolicy":{"KeepLatest":{"servablesToKeep":2}},"router":{"LatestPhaseInPctBasedRouter":{}}}`))
	f.Add([]byte(`{"expiration_policy":{"KeepTopRanked":{"servablesToKeep":"3","metricToEvaluate":"auc","ordering":"DESC"}},"router":{"FairPhaseInPctBasedRouter":{}}}`))
	f.Add([]byte(`{"router": "latest", "expiration": {"keep_top_ranked": {"n": 2, "metric": "auc"}}, "sticky_key": "user_id"}`))
	f.Add([]byte(`{"router": null, "expiration": {"keep_latest": 1}}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		cs, err := ParseContractSettings(data)
		checkOnlyConfigErrors(t, err)
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
		var ce *Error
		if !errors.As(err, &ce) || !strings.Contains(err.Error(), "duplicate field") {
			t.Errorf("%s: %v, want a duplicate field error", c.name, err)
		}
	}
}
