package modelconfig

import (
	"encoding/json"
	"errors"
	"reflect"
	"strings"
	"testing"
	"time"

	"google.golang.org/protobuf/reflect/protoreflect"

	"github.com/groveml/grove/grovepb"
)

const sum1 = "59390c4fa97b2cbfe5bd300e254e6eddb7b4b45c2dbc0c1cfc6e93793a143d04"

func TestParseModelConfigReadsAllFields(t *testing.T) {
	data := `{"model_metadata": [
		{"model_path": "pcvr_v1/", "checksum": "` + sum1 + `",
		 "warm_up_batch_request_json": "{\"request\": []}", "eviction_grace_period_in_ms": 60000},
		{"model_path": "pcvr/model.pt"}
	]}`
	got, err := Parse([]byte(data))
	if err != nil {
		t.Fatal(err)
	}
	want := &Config{Models: []Model{
		{Path: "pcvr_v1/", Checksum: sum1, WarmUpJSON: `{"request": []}`, EvictionGracePeriod: time.Minute},
		{Path: "pcvr/model.pt"},
	}}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("got %+v, want %+v", got, want)
	}
	if !got.Models[0].IsDir() || got.Models[1].IsDir() {
		t.Errorf("IsDir: got %v, %v; want true, false", got.Models[0].IsDir(), got.Models[1].IsDir())
	}
}

func TestParseModelConfigAcceptsLowerCamelCaseNames(t *testing.T) {
	data := `{"modelMetadata": [{"modelPath": "m/", "checksum": "", "warmUpBatchRequestJson": "[]", "evictionGracePeriodInMs": 5}]}`
	got, err := Parse([]byte(data))
	if err != nil {
		t.Fatal(err)
	}
	want := Model{Path: "m/", WarmUpJSON: "[]", EvictionGracePeriod: 5 * time.Millisecond}
	if len(got.Models) != 1 || !reflect.DeepEqual(got.Models[0], want) {
		t.Errorf("got %+v, want [%+v]", got.Models, want)
	}
}

func TestParseModelConfigAcceptsTheDocumentedExampleWithTrailingCommas(t *testing.T) {
	// From the B&A inference API docs, trailing commas included.
	data := `{
  "model_metadata": [
    {
      "model_path": "pcvr_v1/",
      "checksum": "dd94b3b08ea19b4240aa5e5f68ff0447b40e37ebdd06cc76fa1a2cf61143a10c",
      "eviction_grace_period_in_ms": 60000,
    },
  ]
}`
	got, err := Parse([]byte(data))
	if err != nil {
		t.Fatal(err)
	}
	if len(got.Models) != 1 || got.Models[0].EvictionGracePeriod != time.Minute {
		t.Errorf("got %+v", got.Models)
	}
}

func TestParseModelConfigGracePeriodForms(t *testing.T) {
	for _, tc := range []struct {
		value string
		want  time.Duration
	}{
		{`0`, 0},
		{`60000`, time.Minute},
		{`"60000"`, time.Minute},
		{`6e4`, time.Minute},
		{`"6e4"`, time.Minute},
		{`60000.0`, time.Minute},
		{`2147483647`, 2147483647 * time.Millisecond},
		{`null`, 0},
	} {
		got, err := Parse([]byte(`{"model_metadata":[{"model_path":"m","eviction_grace_period_in_ms":` + tc.value + `}]}`))
		if err != nil {
			t.Errorf("%s: %v", tc.value, err)
			continue
		}
		if g := got.Models[0].EvictionGracePeriod; g != tc.want {
			t.Errorf("%s: got %v, want %v", tc.value, g, tc.want)
		}
	}
}

func TestParseModelConfigNullsAndEmptyMeanDefaults(t *testing.T) {
	for _, data := range []string{`{}`, `{"model_metadata": null}`, `{"model_metadata": []}`} {
		got, err := Parse([]byte(data))
		if err != nil {
			t.Errorf("%s: %v", data, err)
		} else if len(got.Models) != 0 {
			t.Errorf("%s: got %+v, want no models", data, got.Models)
		}
	}
	got, err := Parse([]byte(`{"model_metadata": [{"model_path": "m", "checksum": null}]}`))
	if err != nil || got.Models[0].Checksum != "" {
		t.Errorf("null checksum: got %+v, %v", got, err)
	}
}

func TestParseModelConfigErrors(t *testing.T) {
	long := strings.Repeat("a", 64)
	for _, tc := range []struct {
		name, data, want string
	}{
		{"unknown entry field", `{"model_metadata":[{"model_path":"a"},{"model_path":"b","checksumm":""}]}`,
			`model_metadata[1]: unknown field "checksumm"`},
		{"unknown top-level field", `{"models":[]}`, `unknown field "models"`},
		{"duplicate key", `{"model_metadata":[{"model_path":"a","model_path":"b"}]}`,
			`model_metadata[0]: duplicate field "model_path"`},
		{"duplicate key in two spellings", `{"model_metadata":[{"model_path":"a","modelPath":"b"}]}`,
			`model_metadata[0]: duplicate field "modelPath" (already given as "model_path")`},
		{"duplicate section", `{"model_metadata":[],"modelMetadata":[]}`, `duplicate field "modelMetadata"`},
		{"not an object", `[]`, "model config must be a JSON object, got an array"},
		{"syntax error", "{\n  \"model_metadata\": [\n  {\"model_path\" \"a\"}]}", "invalid JSON at line 3, column 17: invalid character '\"' after object key"},
		{"syntax error in a literal", "{\n  \"model_metadata\": [\n  {\"model_path\": tru}]}", "invalid JSON at line 3, column 21: invalid character '}' in literal true"},
		{"syntax error in a skipped rule", "{\"contracts\": [{\"servables\": [{\"validity\": [\n {\"x\": [1, {\"y\": nul}]}]}]}]}", "invalid JSON at line 2, column 21: invalid character '}' in literal null"},
		{"truncated", `{"model_metadata": [`, "unexpected EOF"},
		{"trailing data", `{} {}`, "unexpected data after the model config object"},
		{"comma only", `{"model_metadata": [,]}`, "invalid JSON"},
		{"double comma", `{"model_metadata": [{"model_path":"a"},,]}`, "invalid JSON"},
		{"invalid UTF-8", "{\"model_metadata\": [{\"model_path\": \"\xff\"}]}", "not valid UTF-8"},
		{"path not a string", `{"model_metadata":[{"model_path":5}]}`, `model_metadata[0].model_path: expected a string, got number 5`},
		{"entry not an object", `{"model_metadata":["m"]}`, `model_metadata[0]: expected an object, got string "m"`},
		{"null entry", `{"model_metadata":[null]}`, `model_metadata[0]: expected an object, got null`},
		{"section not an array", `{"model_metadata":{}}`, `model_metadata: expected an array, got an object`},
		{"empty path", `{"model_metadata":[{"checksum":""}]}`, `model_metadata[0].model_path: must not be empty`},
		{"absolute path", `{"model_metadata":[{"model_path":"/m"}]}`, `model_metadata[0].model_path: "/m" must not start with "/"`},
		{"dotdot path", `{"model_metadata":[{"model_path":"a/../b"}]}`, `model_metadata[0].model_path: "a/../b" must not contain ".." segments`},
		{"backslash path", `{"model_metadata":[{"model_path":"a\\b"}]}`, `must not contain backslashes`},
		{"NUL path", `{"model_metadata":[{"model_path":"a\u0000b"}]}`, `must not contain NUL bytes`},
		{"duplicate path", `{"model_metadata":[{"model_path":"a/"},{"model_path":"b"},{"model_path":"a/"}]}`,
			`model_metadata[2].model_path: duplicate model path "a/" (also in model_metadata[0])`},
		{"uppercase checksum", `{"model_metadata":[{"model_path":"m","checksum":"` + strings.ToUpper(sum1) + `"}]}`,
			`checksums are lowercase hex`},
		{"short checksum", `{"model_metadata":[{"model_path":"m","checksum":"abc"}]}`, `model_metadata[0].checksum: "abc" has 3 characters`},
		{"long checksum", `{"model_metadata":[{"model_path":"m","checksum":"` + long + `0"}]}`, `has 65 characters`},
		{"non-hex checksum", `{"model_metadata":[{"model_path":"m","checksum":"` + long[:63] + `g"}]}`, `is not hex`},
		{"bad warm-up JSON", `{"model_metadata":[{"model_path":"m","warm_up_batch_request_json":"{"}]}`,
			`model_metadata[0].warm_up_batch_request_json: not valid JSON`},
		{"negative grace", `{"model_metadata":[{"model_path":"m","eviction_grace_period_in_ms":-1}]}`,
			`model_metadata[0].eviction_grace_period_in_ms: -1 is out of range 0..2147483647`},
		{"grace over int32", `{"model_metadata":[{"model_path":"m","eviction_grace_period_in_ms":2147483648}]}`, `2147483648 is out of range 0..2147483647`},
		{"quoted grace over int32", `{"model_metadata":[{"model_path":"m","eviction_grace_period_in_ms":"2147483648"}]}`, `out of range`},
		{"negative exponent grace", `{"model_metadata":[{"model_path":"m","eviction_grace_period_in_ms":-1e3}]}`, `out of range`},
		{"huge grace", `{"model_metadata":[{"model_path":"m","eviction_grace_period_in_ms":1e400}]}`, `out of range`},
		{"fractional grace", `{"model_metadata":[{"model_path":"m","eviction_grace_period_in_ms":1.5}]}`, `1.5 is not an integer`},
		{"grace not a number", `{"model_metadata":[{"model_path":"m","eviction_grace_period_in_ms":"1s"}]}`, `"1s" is not a number`},
		{"grace with spaces", `{"model_metadata":[{"model_path":"m","eviction_grace_period_in_ms":" 1"}]}`, `" 1" is not a number`},
		{"grace boolean", `{"model_metadata":[{"model_path":"m","eviction_grace_period_in_ms":true}]}`, `expected an integer, got boolean true`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			checkParseError(t, tc.data, tc.want)
		})
	}
}

func TestParseModelConfigSeparatesSingleFileFromDirectoryPaths(t *testing.T) {
	got, err := Parse([]byte(`{"model_metadata":[{"model_path":"model1"},{"model_path":"model1/"}]}`))
	if err != nil {
		t.Fatalf("model1 and model1/ are different models: %v", err)
	}
	if got.Models[0].IsDir() || !got.Models[1].IsDir() {
		t.Errorf("IsDir: got %v, %v", got.Models[0].IsDir(), got.Models[1].IsDir())
	}
}

// FuzzParseModelConfig checks that parsing never panics, that accepted
// configs are valid, and that they survive a round trip through their
// canonical JSON (MarshalJSON).
func FuzzParseModelConfig(f *testing.F) {
	f.Add([]byte(`{"model_metadata":[{"model_path":"pcvr_v1/","checksum":"` + sum1 + `","warm_up_batch_request_json":"{}","eviction_grace_period_in_ms":60000}]}`))
	f.Add([]byte(`{"modelMetadata":[{"modelPath":"m","evictionGracePeriodInMs":"5",},]}`))
	f.Add([]byte(issueExample))
	f.Add([]byte(allShapesExample))
	f.Add([]byte(versionsExample))
	f.Add([]byte(`{"model_metadata":[{"model_path":"m/","inputs":[{"name":"x","datatype":"FP32","shape":[-1,64]}],"outputs":[{"name":"y","datatype":"FP64","shape":[]}]}]}`))
	f.Add([]byte(`{"model_metadata":[{"model_path":"a/","nodes":3,"min_nodes":2},{"model_path":"b/","minNodes":"1"}]}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		c, err := Parse(data)
		if err != nil {
			var ce *Error
			if !errors.As(err, &ce) {
				t.Fatalf("error %T is not a *Error: %v", err, err)
			}
			return
		}
		if err := c.validate(); err != nil {
			t.Fatalf("accepted an invalid config: %v", err)
		}
		again, err := json.Marshal(c)
		if err != nil {
			t.Fatal(err)
		}
		c2, err := Parse(again)
		if err != nil {
			t.Fatalf("re-parsing %s: %v", again, err)
		}
		if !reflect.DeepEqual(c, c2) {
			t.Fatalf("round trip changed the config:\n%+v\n%+v", c, c2)
		}
	})
}

// issueExample is the contracts example of issue 4.
const issueExample = `{"model_metadata": [{"model_path": "pctr_v1/"}, {"model_path": "pctr_v2/"}],
 "contracts": [{"organization": "ads", "project": "pctr", "contract_number": 1,
   "router": "fair", "expiration": {"keep_latest": 2}, "sticky_key": "user_id",
   "servables": [
     {"release_version": "v1", "model_path": "pctr_v1/", "validity": [{"immediately_valid": {}}], "phase_in": {"immediate": {}},
      "logging": {"log_level": "FULL", "key_features": ["user_id"], "key_features_separator": "."}},
     {"release_version": "v2", "model_path": "pctr_v2/", "validity": [{"never_valid": {}}], "shadow": {"sample_rate": 1.0},
      "logging": {"log_level": "FULL", "key_features": ["user_id"]}}]}]}`

// versionsExample has an entry of each version policy, one of them named by a contract.
const versionsExample = `{"model_metadata": [
  {"model_path": "pcvr/", "version_policy": {"latest": {"num_versions": 2}}, "version_checksums": {"3": "` + sum1 + `"}, "eviction_grace_period_in_ms": 1000},
  {"modelPath": "pctr/", "versionPolicy": {"specific": {"versions": [1, "3"]}}},
  {"model_path": "all/", "version_policy": {"all": {}}}],
 "contracts": [{"organization": "ads", "project": "pcvr", "contract_number": 1, "servables": [{"release_version": "v", "model_path": "pcvr/"}]}]}`

// allShapesExample uses every rule, policy and option of the contracts
// section, in lowerCamelCase.
const allShapesExample = `{"modelMetadata": [{"modelPath": "a/"}, {"modelPath": "b/"}, {"modelPath": "c.pt"}],
 "contracts": [
  {"organization": "ads", "project": "pctr", "contractNumber": "7", "router": "latest",
   "expiration": {"keepTopRanked": {"n": 2, "metric": "auc"}},
   "servables": [
     {"releaseVersion": "2024-01-01_gbm", "modelPath": "a/",
      "validity": [{"validAfterMs": {"ms": 60000}}, {"minServedEvents": {"count": "1000"}}, {"minMetric": {"metric": "auc", "threshold": "0.7"}}],
      "phaseIn": {"linearOverSecs": {"secs": 600}},
      "shadow": {"sampleRate": 0.25},
      "logging": {"logLevel": "SAMPLE", "sampleRate": 0.01, "keyFeatures": ["user_id", "ad_id"], "keyFeaturesSeparator": "|"}},
     {"releaseVersion": "v1~rc.1", "modelPath": "b/", "shadow": {}}]},
  {"organization": "ads", "project": "pctr", "contract_number": 8, "expiration": {"keep_latest": 1}, "servables": []},
  {"organization": "ads", "project": "pcvr", "contract_number": 7, "servables": [{"release_version": "v1", "model_path": "a/"}]}]}`

func TestParseModelConfigReadsTheIssueContract(t *testing.T) {
	got, err := Parse([]byte(issueExample))
	if err != nil {
		t.Fatal(err)
	}
	want := []Contract{{
		Organization: "ads", Project: "pctr", Number: 1, Router: RouterFair,
		Expiration: Expiration{Kind: ExpireKeepLatest, Keep: 2}, StickyKey: "user_id",
		Servables: []ContractServable{
			{ReleaseVersion: "v1", ModelPath: "pctr_v1/", Validity: []ValidityRule{{Kind: RuleImmediatelyValid}},
				PhaseIn: PhaseIn{Kind: PhaseInImmediate},
				Logging: ServableLogging{Level: LogLevelFull, SampleRate: 1, KeyFeatures: []string{"user_id"}, KeyFeaturesSeparator: "."}},
			{ReleaseVersion: "v2", ModelPath: "pctr_v2/", Validity: []ValidityRule{{Kind: RuleNeverValid}},
				PhaseIn: PhaseIn{Kind: PhaseInImmediate}, Shadow: &Shadow{SampleRate: 1},
				Logging: ServableLogging{Level: LogLevelFull, SampleRate: 1, KeyFeatures: []string{"user_id"}, KeyFeaturesSeparator: "."}},
		},
	}}
	if !reflect.DeepEqual(got.Contracts, want) {
		t.Errorf("got  %+v\nwant %+v", got.Contracts, want)
	}
	if id := got.Contracts[0].ID(); id != "ads/pctr/1" {
		t.Errorf("ID() = %q, want ads/pctr/1", id)
	}
}

func TestParseModelConfigReadsEveryContractShapeInLowerCamelCase(t *testing.T) {
	got, err := Parse([]byte(allShapesExample))
	if err != nil {
		t.Fatal(err)
	}
	want := []Contract{
		{Organization: "ads", Project: "pctr", Number: 7, Router: RouterLatest,
			Expiration: Expiration{Kind: ExpireKeepTopRanked, Keep: 2, Metric: "auc"},
			Servables: []ContractServable{
				{ReleaseVersion: "2024-01-01_gbm", ModelPath: "a/",
					Validity: []ValidityRule{
						{Kind: RuleValidAfterMs, After: time.Minute},
						{Kind: RuleMinServedEvents, Count: 1000},
						{Kind: RuleMinMetric, Metric: "auc", Threshold: 0.7}},
					PhaseIn: PhaseIn{Kind: PhaseInLinear, Over: 10 * time.Minute},
					Shadow:  &Shadow{SampleRate: 0.25},
					Logging: ServableLogging{Level: LogLevelSample, SampleRate: 0.01, KeyFeatures: []string{"user_id", "ad_id"}, KeyFeaturesSeparator: "|"}},
				{ReleaseVersion: "v1~rc.1", ModelPath: "b/", PhaseIn: PhaseIn{Kind: PhaseInImmediate}, Shadow: &Shadow{SampleRate: 1},
					Logging: ServableLogging{Level: LogLevelNone, SampleRate: 1, KeyFeaturesSeparator: "."}},
			}},
		{Organization: "ads", Project: "pctr", Number: 8, Router: RouterFair, Expiration: Expiration{Kind: ExpireKeepLatest, Keep: 1}},
		{Organization: "ads", Project: "pcvr", Number: 7, Router: RouterFair, Servables: []ContractServable{
			{ReleaseVersion: "v1", ModelPath: "a/", PhaseIn: PhaseIn{Kind: PhaseInImmediate},
				Logging: ServableLogging{Level: LogLevelNone, SampleRate: 1, KeyFeaturesSeparator: "."}}}},
	}
	if !reflect.DeepEqual(got.Contracts, want) {
		t.Errorf("got  %+v\nwant %+v", got.Contracts, want)
	}
}

func TestParseModelConfigContractNullsMeanDefaults(t *testing.T) {
	data := `{"model_metadata": [{"model_path": "m"}], "contracts": [{"organization": "o", "project": "p", "contract_number": 1,
		"router": null, "expiration": null, "sticky_key": null, "servables": [{"release_version": "r", "model_path": "m",
		"validity": null, "phase_in": null, "shadow": null, "logging": {"log_level": null, "sample_rate": null, "key_features": null, "key_features_separator": null}}]}]}`
	got, err := Parse([]byte(data))
	if err != nil {
		t.Fatal(err)
	}
	want := Contract{Organization: "o", Project: "p", Number: 1, Router: RouterFair, Servables: []ContractServable{{
		ReleaseVersion: "r", ModelPath: "m", PhaseIn: PhaseIn{Kind: PhaseInImmediate},
		Logging: ServableLogging{Level: LogLevelNone, SampleRate: 1, KeyFeaturesSeparator: "."}}}}
	if len(got.Contracts) != 1 || !reflect.DeepEqual(got.Contracts[0], want) {
		t.Errorf("got  %+v\nwant %+v", got.Contracts, want)
	}
	got, err = Parse([]byte(`{"model_metadata": [{"model_path": "m"}], "contracts": [{"organization": "o", "project": "p", "contract_number": 1,
		"servables": [{"release_version": "r", "model_path": "m", "shadow": {"sample_rate": 0}, "logging": {"key_features_separator": ""}}]}]}`))
	if err != nil {
		t.Fatal(err)
	}
	if s := got.Contracts[0].Servables[0]; s.Shadow == nil || s.Shadow.SampleRate != 0 || s.Logging.KeyFeaturesSeparator != "" {
		t.Errorf("explicit zero values: got shadow %+v, logging %+v", s.Shadow, s.Logging)
	}
}

func TestParseModelConfigContractErrors(t *testing.T) {
	// contract builds a config with models a/ and b/ and one contract whose
	// JSON members are given (after organization, project and contract_number).
	contract := func(members string) string {
		return `{"model_metadata": [{"model_path": "a/"}, {"model_path": "b/"}], "contracts": [{"organization": "ads", "project": "pctr", "contract_number": 1` + members + `}]}`
	}
	// servable builds a config whose contract has a servable v1 on a/ with the members given.
	servable := func(members string) string {
		return contract(`, "servables": [{"release_version": "v1", "model_path": "a/"` + members + `}]`)
	}
	for _, tc := range []struct {
		name, data, want string
	}{
		// Decoding: wrong shapes and unknown fields are reported where they are.
		{"section not an array", `{"contracts": {}}`, `contracts: expected an array, got an object`},
		{"null contract", `{"contracts": [null]}`, `contracts[0]: expected an object, got null`},
		{"unknown contract field", contract(`, "organisation": "x"`), `contracts[0]: unknown field "organisation"`},
		{"unknown servable field", servable(`, "phaseIn": {"immediate": {}}, "weight": 3`), `contracts[0].servables[0]: unknown field "weight"`},
		{"unknown field in a rule", servable(`, "validity": [{"valid_after_ms": {"ms": 5, "s": 1}}]`), `contracts[0].servables[0].validity[0].valid_after_ms: unknown field "s"`},
		{"fields in an empty rule", servable(`, "validity": [{"immediately_valid": {"now": true}}]`), `validity[0].immediately_valid: unknown field "now"`},
		{"unknown shadow field", servable(`, "shadow": {"rate": 1}`), `contracts[0].servables[0].shadow: unknown field "rate"`},
		{"unknown logging field", servable(`, "logging": {"level": "FULL"}`), `contracts[0].servables[0].logging: unknown field "level"`},
		{"unknown field in keep_top_ranked", contract(`, "expiration": {"keep_top_ranked": {"n": 1, "metric": "auc", "ordering": "ASC"}}`), `contracts[0].expiration.keep_top_ranked: unknown field "ordering"`},
		{"two rules in one element", servable(`, "validity": [{"immediately_valid": {}, "never_valid": {}}]`),
			`contracts[0].servables[0].validity[0]: give exactly one of immediately_valid, never_valid, valid_after_ms, min_served_events, min_metric or promote_when, got "immediately_valid" and "never_valid"`},
		{"empty rule element", servable(`, "validity": [{}]`), `contracts[0].servables[0].validity[0]: expected one of immediately_valid`},
		{"null rule element", servable(`, "validity": [null]`), `validity[0]: expected an object, got null`},
		{"bare number rule", servable(`, "validity": [{"valid_after_ms": 5}]`), `validity[0].valid_after_ms: expected an object, got number 5`},
		{"two phase-ins", servable(`, "phase_in": {"immediate": {}, "linear_over_secs": {"secs": 1}}`), `phase_in: give exactly one of immediate or linear_over_secs`},
		{"empty expiration", contract(`, "expiration": {}`), `contracts[0].expiration: expected one of keep_latest or keep_top_ranked, got an empty object`},
		{"negative ms", servable(`, "validity": [{"valid_after_ms": {"ms": -1}}]`), `validity[0].valid_after_ms.ms: -1 is out of range 0..9223372036854`},
		{"huge count", servable(`, "validity": [{"min_served_events": {"count": 1e16}}]`), `min_served_events.count: 1e16 is out of range 0..9007199254740992`},
		{"fractional secs", servable(`, "phase_in": {"linear_over_secs": {"secs": 1.5}}`), `linear_over_secs.secs: 1.5 is not an integer`},
		{"threshold not a number", servable(`, "validity": [{"min_metric": {"metric": "auc", "threshold": "high"}}]`), `min_metric.threshold: "high" is not a number`},
		{"threshold NaN", servable(`, "validity": [{"min_metric": {"metric": "auc", "threshold": "NaN"}}]`), `"NaN" is not a number`},
		{"threshold overflow", servable(`, "validity": [{"min_metric": {"metric": "auc", "threshold": 1e400}}]`), `1e400 is out of range of a finite double`},
		{"key feature not a string", servable(`, "logging": {"key_features": ["a", 1]}`), `logging.key_features[1]: expected a string, got number 1`},
		{"contract number over int32", `{"contracts": [{"contract_number": 2147483648}]}`, `contracts[0].contract_number: 2147483648 is out of range`},

		// Validation: errors name the contract and the release.
		{"empty organization", `{"contracts": [{"project": "p", "contract_number": 1}]}`, `contracts[0].organization: contract /p/1: organization must not be empty`},
		{"slash in organization", `{"contracts": [{"organization": "a/b", "project": "p", "contract_number": 1}]}`, `organization "a/b" has the character '/'`},
		{"reserved organization api", `{"contracts": [{"organization": "api", "project": "predict", "contract_number": 1}]}`,
			`contracts[0].organization: contract api/predict/1: organization "api" is reserved: paths under /api/ belong to Grove's own APIs, so no contract URL could reach it; the reserved names are api, debug, ui, v1, v2`},
		{"reserved organization v2", `{"contracts": [{"organization": "v2", "project": "p", "contract_number": 1}]}`, `organization "v2" is reserved`},
		{"reserved organization v1", `{"contracts": [{"organization": "v1", "project": "p", "contract_number": 1}]}`, `organization "v1" is reserved`},
		{"reserved organization ui", `{"contracts": [{"organization": "ui", "project": "p", "contract_number": 1}]}`, `organization "ui" is reserved`},
		{"reserved organization debug", `{"contracts": [{"organization": "debug", "project": "p", "contract_number": 1}]}`, `organization "debug" is reserved`},
		{"dot-dot project", `{"contracts": [{"organization": "o", "project": "..", "contract_number": 1}]}`, `contracts[0].project: contract o/../1: project ".." is not a usable URL path segment`},
		{"space in project", `{"contracts": [{"organization": "o", "project": "p q", "contract_number": 1}]}`, `project "p q" has the character ' '`},
		{"missing contract number", `{"contracts": [{"organization": "o", "project": "p"}]}`, `contracts[0].contract_number: contract o/p/0: contract_number 0 must be at least 1`},
		{"negative contract number", `{"contracts": [{"organization": "o", "project": "p", "contract_number": -3}]}`, `contract_number -3 must be at least 1`},
		{"duplicate contract", `{"contracts": [{"organization": "o", "project": "p", "contract_number": 1}, {"organization": "o", "project": "q", "contract_number": 1}, {"organization": "o", "project": "p", "contractNumber": "1"}]}`,
			`contracts[2]: contract o/p/1: defined twice (also contracts[0])`},
		{"unknown router", contract(`, "router": "random"`), `contracts[0].router: contract ads/pctr/1: router "random" is not fair, latest, thompson or epsilon_greedy`},
		{"empty router", contract(`, "router": ""`), `router "" is not fair, latest, thompson or epsilon_greedy`},
		{"unknown expiration", contract(`, "expiration": {"keep_oldest": 2}`), `contracts[0].expiration: contract ads/pctr/1: unknown expiration policy "keep_oldest"; the policies are keep_latest or keep_top_ranked`},
		{"keep none", contract(`, "expiration": {"keep_latest": 0}`), `contracts[0].expiration.keep_latest: contract ads/pctr/1: keep_latest must keep at least 1 servable, got 0`},
		{"keep_top_ranked without n", contract(`, "expiration": {"keep_top_ranked": {"metric": "auc"}}`), `contracts[0].expiration.keep_top_ranked.n: contract ads/pctr/1: keep_top_ranked must keep at least 1 servable, got 0`},
		{"keep_top_ranked without metric", contract(`, "expiration": {"keep_top_ranked": {"n": 2}}`), `contracts[0].expiration.keep_top_ranked.metric: contract ads/pctr/1: keep_top_ranked needs the metric to rank by`},
		{"empty release", contract(`, "servables": [{"model_path": "a/"}]`), `contracts[0].servables[0].release_version: contract ads/pctr/1: release_version must not be empty`},
		{"release with slash", contract(`, "servables": [{"release_version": "v/1", "model_path": "a/"}]`), `release_version "v/1" has the character '/'`},
		{"duplicate release", contract(`, "servables": [{"release_version": "v1", "model_path": "a/"}, {"release_version": "v1", "model_path": "b/"}]`),
			`contracts[0].servables[1].release_version: contract ads/pctr/1: release v1: release_version listed twice (also servables[0])`},
		{"empty model path", contract(`, "servables": [{"release_version": "v1"}]`), `contracts[0].servables[0].model_path: contract ads/pctr/1: release v1: model_path must not be empty`},
		{"model path not in model_metadata", contract(`, "servables": [{"release_version": "v1", "model_path": "a/"}, {"release_version": "v2", "model_path": "c/"}]`),
			`contracts[0].servables[1].model_path: contract ads/pctr/1: release v2: model_path "c/" is not listed in model_metadata, nor a version (entry/N/) of a versioned entry`},
		{"model path used twice", contract(`, "servables": [{"release_version": "v1", "model_path": "a/"}, {"release_version": "v2", "model_path": "a/"}]`),
			`contracts[0].servables[1].model_path: contract ads/pctr/1: release v2: model_path "a/" is already release v1 of this contract`},
		{"unknown rule", servable(`, "validity": [{"immediately_valid": {}}, {"always_valid": {"x": [1, {}]}}]`),
			`contracts[0].servables[0].validity[1]: contract ads/pctr/1: release v1: unknown validity rule "always_valid"; the rules are immediately_valid, never_valid, valid_after_ms, min_served_events, min_metric or promote_when`},
		{"min_metric without metric", servable(`, "validity": [{"min_metric": {"threshold": 0.5}}]`), `validity[0].min_metric.metric: contract ads/pctr/1: release v1: min_metric needs the name of the metric`},
		{"unknown phase-in", servable(`, "phase_in": {"step": {}}`), `contracts[0].servables[0].phase_in: contract ads/pctr/1: release v1: unknown phase_in policy "step"; the policies are immediate or linear_over_secs`},
		{"zero-second ramp", servable(`, "phase_in": {"linear_over_secs": {}}`), `phase_in.linear_over_secs.secs: contract ads/pctr/1: release v1: linear_over_secs needs secs ≥ 1, got 0`},
		{"negative ramp", servable(`, "phase_in": {"linear_over_secs": {"secs": -5}}`), `needs secs ≥ 1, got -5`},
		{"shadow rate above 1", servable(`, "shadow": {"sample_rate": 1.5}`), `contracts[0].servables[0].shadow.sample_rate: contract ads/pctr/1: release v1: shadow sample_rate 1.5 is not between 0 and 1`},
		{"negative shadow rate", servable(`, "shadow": {"sample_rate": -0.1}`), `shadow sample_rate -0.1 is not between 0 and 1`},
		{"unknown log level", servable(`, "logging": {"log_level": "full"}`), `contracts[0].servables[0].logging.log_level: contract ads/pctr/1: release v1: log_level "full" is not NONE, FULL or SAMPLE`},
		{"log sample rate", servable(`, "logging": {"log_level": "SAMPLE", "sample_rate": 2}`), `logging.sample_rate: contract ads/pctr/1: release v1: logging sample_rate 2 is not between 0 and 1`},
		{"empty key feature", servable(`, "logging": {"key_features": [""]}`), `logging.key_features[0]: contract ads/pctr/1: release v1: a key feature name is empty`},
		{"duplicate key feature", servable(`, "logging": {"key_features": ["u", "a", "u"]}`), `logging.key_features[2]: contract ads/pctr/1: release v1: key feature "u" is listed twice`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			checkParseError(t, tc.data, tc.want)
		})
	}
}

func TestParseModelConfigAcceptsShadowOnlyServables(t *testing.T) {
	// shadow + never_valid is the normal shadow-only challenger, and
	// immediately_valid with never_valid is simply never valid.
	data := `{"model_metadata": [{"model_path": "a/"}], "contracts": [{"organization": "o", "project": "p", "contract_number": 1,
		"servables": [{"release_version": "v1", "model_path": "a/", "validity": [{"immediately_valid": {}}, {"never_valid": {}}], "shadow": {"sample_rate": 0.5}}]}]}`
	if _, err := Parse([]byte(data)); err != nil {
		t.Fatal(err)
	}
}

func TestParseModelConfigAllowsOneModelInSeveralContracts(t *testing.T) {
	data := `{"model_metadata": [{"model_path": "a/"}], "contracts": [
		{"organization": "o", "project": "p", "contract_number": 1, "servables": [{"release_version": "v1", "model_path": "a/"}]},
		{"organization": "o", "project": "p", "contract_number": 2, "servables": [{"release_version": "v1", "model_path": "a/"}]}]}`
	if _, err := Parse([]byte(data)); err != nil {
		t.Fatal(err)
	}
}

func TestModelConfigMarshalJSONRoundTrips(t *testing.T) {
	for name, data := range map[string]string{"issue": issueExample, "all shapes": allShapesExample, "models only": `{"model_metadata": [{"model_path": "m", "eviction_grace_period_in_ms": 5}]}`,
		"serving options": `{"model_metadata": [{"model_path": "m/", "replicas": 2, "max_batch_rows": 32, "max_queue_delay_us": 500, "intra_op_threads": 2, "missing_value": -999}]}`,
		"missing value 0": `{"model_metadata": [{"model_path": "m/", "missing_value": 0}]}`,
		"versions":        versionsExample} {
		c, err := Parse([]byte(data))
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		out, err := json.MarshalIndent(c, "", "  ")
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		c2, err := Parse(out)
		if err != nil {
			t.Fatalf("%s: re-parsing %s: %v", name, out, err)
		}
		if !reflect.DeepEqual(c, c2) {
			t.Errorf("%s: round trip changed the config:\n%+v\n%+v", name, c, c2)
		}
	}
	// The canonical form of the issue's contract, defaults written out.
	c, _ := Parse([]byte(issueExample))
	got, err := json.Marshal(Config{Contracts: c.Contracts})
	if err != nil {
		t.Fatal(err)
	}
	want := `{"model_metadata":[],"contracts":[{"organization":"ads","project":"pctr","contract_number":1,"router":"fair","expiration":{"keep_latest":2},"sticky_key":"user_id","servables":[` +
		`{"release_version":"v1","model_path":"pctr_v1/","validity":[{"immediately_valid":{}}],"phase_in":{"immediate":{}},"logging":{"log_level":"FULL","sample_rate":1,"key_features":["user_id"],"key_features_separator":"."}},` +
		`{"release_version":"v2","model_path":"pctr_v2/","validity":[{"never_valid":{}}],"phase_in":{"immediate":{}},"shadow":{"sample_rate":1},"logging":{"log_level":"FULL","sample_rate":1,"key_features":["user_id"],"key_features_separator":"."}}]}]}`
	if string(got) != want {
		t.Errorf("got  %s\nwant %s", got, want)
	}
}

func TestParseModelConfigServingOptions(t *testing.T) {
	got, err := Parse([]byte(`{"model_metadata": [
	  {"model_path": "a/", "replicas": 3, "maxBatchRows": "16", "max_queue_delay_us": 250, "intra_op_threads": 2},
	  {"model_path": "b/", "replicas": null}]}`))
	if err != nil {
		t.Fatal(err)
	}
	want := ServingOptions{Replicas: 3, MaxBatchRows: 16, MaxQueueDelay: 250 * time.Microsecond, IntraOpThreads: 2}
	if got.Models[0].Serving != want || got.Models[1].Serving != (ServingOptions{}) {
		t.Errorf("got %+v and %+v, want %+v and defaults", got.Models[0].Serving, got.Models[1].Serving, want)
	}
	for _, tc := range []struct{ field, value, want string }{
		{"replicas", "65", "model_metadata[0].replicas: 65 is out of range 0..64"},
		{"replicas", "-1", "model_metadata[0].replicas: -1 is out of range 0..64"},
		{"replicas", "1.5", "replicas"},
		{"max_batch_rows", "2000000", "model_metadata[0].max_batch_rows: 2000000 is out of range 0..1048576"},
		{"max_queue_delay_us", "1000001", "model_metadata[0].max_queue_delay_us: 1000001 is out of range 0..1000000"},
		{"intra_op_threads", "\"x\"", `model_metadata[0].intra_op_threads: "x" is not a number`},
	} {
		_, err := Parse([]byte(`{"model_metadata": [{"model_path": "m/", "` + tc.field + `": ` + tc.value + `}]}`))
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s=%s: got %v, want an error containing %q", tc.field, tc.value, err, tc.want)
		}
	}
}

// TestParseModelConfigMissingValue: missing_value is a finite number
// within float32's range (0 included, as a set value), absent by default,
// written back in the canonical form when set.
func TestParseModelConfigMissingValue(t *testing.T) {
	c, err := Parse([]byte(`{"model_metadata": [
	  {"model_path": "a/", "missing_value": -999},
	  {"model_path": "b/", "missingValue": "0"},
	  {"model_path": "c/", "missing_value": null},
	  {"model_path": "d/"}]}`))
	if err != nil {
		t.Fatal(err)
	}
	for i, want := range []ServingOptions{{MissingValue: -999, HasMissingValue: true}, {HasMissingValue: true}, {}, {}} {
		if got := c.Models[i].Serving; got != want {
			t.Errorf("%s: %+v, want %+v", c.Models[i].Path, got, want)
		}
	}
	out, err := json.Marshal(c)
	if err != nil {
		t.Fatal(err)
	}
	want := `{"model_metadata":[{"model_path":"a/","missing_value":-999},{"model_path":"b/","missing_value":0},{"model_path":"c/"},{"model_path":"d/"}]}`
	if string(out) != want {
		t.Errorf("canonical form\n got %s\nwant %s", out, want)
	}
	for _, tc := range []struct{ value, want string }{
		{`"NaN"`, `model_metadata[0].missing_value: "NaN" is not a number`},
		{`"Infinity"`, `model_metadata[0].missing_value: "Infinity" is not a number`},
		{`1e400`, `model_metadata[0].missing_value: 1e400 is out of range of a finite double`},
		{`1e39`, `model_metadata[0].missing_value: 1e+39 is not a finite number within float32's range`},
		{`"x"`, `model_metadata[0].missing_value: "x" is not a number`},
	} {
		_, err := Parse([]byte(`{"model_metadata": [{"model_path": "m/", "missing_value": ` + tc.value + `}]}`))
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("missing_value %s: got %v, want an error containing %q", tc.value, err, tc.want)
		}
	}
}

func TestOnDemandEntryMinNodesZeroMeansNoIdleCopy(t *testing.T) {
	c, err := Parse([]byte(`{"model_metadata": [
	  {"model_path": "a/", "load": "on_demand", "nodes": 3},
	  {"model_path": "b/", "load": "on_demand", "nodes": 3, "min_nodes": 1},
	  {"model_path": "c/", "nodes": 3},
	  {"model_path": "d/"}]}`))
	if err != nil {
		t.Fatal(err)
	}
	for i, tc := range []struct {
		def             Load
		nodes, minNodes int
	}{{LoadEager, 3, 0}, {LoadEager, 3, 1}, {LoadEager, 3, 1}, {LoadOnDemand, 1, 0}} {
		m := c.Models[i]
		if n, mn := m.Placement(tc.def); n != tc.nodes || mn != tc.minNodes {
			t.Errorf("%s (policy %s): nodes, min_nodes %d, %d, want %d, %d", m.Path, tc.def, n, mn, tc.nodes, tc.minNodes)
		}
	}
	if n, mn := c.Models[3].Placement(LoadEager); n != 1 || mn != 1 {
		t.Errorf("d/ eager: nodes, min_nodes %d, %d, want 1, 1", n, mn)
	}
	if _, err := Parse([]byte(`{"model_metadata": [{"model_path": "m/", "load": "on_demand", "nodes": 2, "min_nodes": 3}]}`)); err == nil ||
		!strings.Contains(err.Error(), "min_nodes: 3 is more than nodes (2)") {
		t.Errorf("on-demand min_nodes above nodes: got %v", err)
	}
}

func TestParseModelConfigNodes(t *testing.T) {
	c, err := Parse([]byte(`{"model_metadata": [
	  {"model_path": "a/", "nodes": 3, "min_nodes": 2},
	  {"model_path": "b/", "minNodes": "1", "nodes": "2"},
	  {"model_path": "c/"}]}`))
	if err != nil {
		t.Fatal(err)
	}
	for i, want := range [][4]int{{3, 2, 3, 2}, {2, 1, 2, 1}, {0, 0, 1, 1}} {
		m := c.Models[i]
		nodes, minNodes := m.Placement(LoadEager)
		if got := [4]int{m.Nodes, m.MinNodes, nodes, minNodes}; got != want {
			t.Errorf("%s: nodes, min_nodes, and with defaults: %v, want %v", m.Path, got, want)
		}
	}
	out, err := json.Marshal(c)
	if err != nil {
		t.Fatal(err)
	}
	want := `{"model_metadata":[{"model_path":"a/","nodes":3,"min_nodes":2},{"model_path":"b/","nodes":2,"min_nodes":1},{"model_path":"c/"}]}`
	if string(out) != want {
		t.Errorf("canonical form\n got %s\nwant %s", out, want)
	}
	for _, tc := range []struct{ entry, want string }{
		{`"nodes": 65`, "model_metadata[0].nodes: 65 is out of range 0..64"},
		{`"nodes": -1`, "model_metadata[0].nodes: -1 is out of range 0..64"},
		{`"min_nodes": 65`, "model_metadata[0].min_nodes: 65 is out of range 0..64"},
		{`"nodes": 2, "min_nodes": 3`, "model_metadata[0].min_nodes: 3 is more than nodes (2)"},
		{`"min_nodes": 2`, "model_metadata[0].min_nodes: 2 is more than nodes (1)"},
		{`"nodes": 1.5`, "nodes"},
	} {
		_, err := Parse([]byte(`{"model_metadata": [{"model_path": "m/", ` + tc.entry + `}]}`))
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: got %v, want an error containing %q", tc.entry, err, tc.want)
		}
	}
}

// The protojson decoding: what protobuf's JSON mapping allows that Grove
// decides for itself, case by case (see Parse).

func TestParseModelConfigDecodeErrorsNameTheFieldLineAndColumn(t *testing.T) {
	doc := "{\"model_metadata\": [\n  {\"model_path\": \"é/\",\n   \"replicas\": \"x\"},\n  {\"model_path\": \"é\", \"modelPath\": \"c\"}\n]}"
	for _, tc := range []struct {
		name, data, want string
	}{
		// Columns count bytes, as in syntax errors ("é" is two; protojson
		// counts characters).
		{"unknown field", strings.Replace(doc, `"replicas": "x"`, `"replica": 1`, 1), `model_metadata[0]: unknown field "replica" (line 3, column 4)`},
		{"scan problem", doc, `model_metadata[0].replicas: "x" is not a number (line 3, column 16)`},
		{"duplicate in the other spelling", strings.Replace(doc, `"x"`, `1`, 1), `model_metadata[1]: duplicate field "modelPath" (already given as "model_path") (line 4, column 24)`},
		{"wrong type", strings.Replace(doc, `"x"`, `[1]`, 1), `model_metadata[0].replicas: expected an integer, got an array (line 3, column 16)`},
		{"wrong type of a message", `{"contracts": [{"servables": [{"logging": "FULL"}]}]}`, `contracts[0].servables[0].logging: expected an object, got string "FULL" (line 1, column 43)`},
		{"wrong type of a list", `{"contracts": [{"servables": {}}]}`, `contracts[0].servables: expected an array, got an object (line 1, column 30)`},
		{"after blanked trailing commas", "{\"model_metadata\": [{\"model_path\": \"m\",},],\n \"contracts\": 5}", `contracts: expected an array, got number 5 (line 2, column 15)`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Parse([]byte(tc.data))
			checkConfigError(t, err, tc.want)
		})
	}
}

func TestParseModelConfigReportsTheFirstErrorInTheDocument(t *testing.T) {
	// The scan (numbers, one-key objects) and protojson (names, types)
	// find different errors; the one earlier in the file is reported.
	unknownFirst := `{"model_metadata": [{"model_path": "m", "replica": 1, "max_batch_rows": -1}]}`
	rangeFirst := `{"model_metadata": [{"model_path": "m", "max_batch_rows": -1, "replica": 1}]}`
	checkConfigError(t, mustFail(t, unknownFirst), `model_metadata[0]: unknown field "replica"`)
	checkConfigError(t, mustFail(t, rangeFirst), `model_metadata[0].max_batch_rows: -1 is out of range 0..1048576`)
	// A one-key object's problem counts from its "{": an unknown field in it
	// is not reported before the object's own problem.
	twoKeys := `{"contracts": [{"servables": [{"validity": [{"always": {}, "never_valid": {}}]}]}]}`
	checkConfigError(t, mustFail(t, twoKeys), `contracts[0].servables[0].validity[0]: give exactly one of immediately_valid, never_valid, valid_after_ms, min_served_events, min_metric or promote_when, got "always" and "never_valid"`)
}

// mustFail parses data, which must be refused, and returns the error.
func mustFail(t *testing.T, data string) error {
	t.Helper()
	c, err := Parse([]byte(data))
	if err == nil {
		t.Fatalf("%s: accepted as %+v", data, c)
	}
	return err
}

func TestParseModelConfigChoices(t *testing.T) {
	contract := func(members string) string {
		return `{"model_metadata": [{"model_path": "a/"}], "contracts": [{"organization": "o", "project": "p", "contract_number": 1` + members + `}]}`
	}
	servable := func(members string) string {
		return contract(`, "servables": [{"release_version": "v1", "model_path": "a/"` + members + `}]`)
	}
	for _, tc := range []struct {
		name, data, want string
	}{
		{"one key in two spellings", contract(`, "expiration": {"keep_latest": 1, "keepLatest": 2}`),
			`contracts[0].expiration: give exactly one of keep_latest or keep_top_ranked, got "keep_latest" and "keepLatest" (line 1, column 151)`},
		{"null value of a scalar choice", contract(`, "expiration": {"keep_latest": null}`),
			`contracts[0].expiration.keep_latest: expected an integer, got null (line 1, column 148)`},
		{"null value of an object choice", servable(`, "validity": [{"never_valid": null}]`),
			`contracts[0].servables[0].validity[0].never_valid: expected an object, got null`},
		{"unknown key before a known one", servable(`, "phase_in": {"step": {}, "immediate": {}}`),
			`contracts[0].servables[0].phase_in: give exactly one of immediate or linear_over_secs, got "step" and "immediate"`},
		{"empty phase_in", servable(`, "phase_in": {}`), `contracts[0].servables[0].phase_in: expected one of immediate or linear_over_secs, got an empty object`},
		{"unknown key in an empty choice", servable(`, "validity": [{"never_valid": {"x": 1}}]`), `contracts[0].servables[0].validity[0].never_valid: unknown field "x"`},
		{"unknown name, written in camelCase", servable(`, "validity": [{"alwaysValid": {}}]`),
			`contracts[0].servables[0].validity[0]: contract o/p/1: release v1: unknown validity rule "alwaysValid"`},
		{"unknown expiration after a bad contract", `{"contracts": [{"project": "p", "contract_number": 1, "expiration": {"keep_oldest": {"n": 1}}}]}`,
			`contracts[0].organization: contract /p/1: organization must not be empty`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			checkConfigError(t, mustFail(t, tc.data), tc.want)
		})
	}
	// An unknown name is taken out of the document for protojson; the rest
	// of the document still decodes.
	c, err := Parse([]byte(servable(`, "validity": [{"never_valid": {}}, {"sometimes": {"a": [1, {"b": null}]}}], "shadow": {}`)))
	if err == nil {
		t.Fatalf("accepted %+v", c)
	}
	checkConfigError(t, err, `contracts[0].servables[0].validity[1]: contract o/p/1: release v1: unknown validity rule "sometimes"`)
}

func TestParseModelConfigNumbers(t *testing.T) {
	model := func(field, value string) string {
		return `{"model_metadata": [{"model_path": "a/", "` + field + `": ` + value + `}]}`
	}
	threshold := func(value string) string {
		return `{"model_metadata": [{"model_path": "a/"}], "contracts": [{"organization": "o", "project": "p", "contract_number": 1,
			"servables": [{"release_version": "v1", "model_path": "a/", "validity": [{"min_metric": {"metric": "auc", "threshold": ` + value + `}}]}]}]}`
	}
	for _, tc := range []struct {
		name, data string
		want       int
	}{
		{"quoted", model("replicas", `"3"`), 3},
		{"exponent", model("replicas", `3e0`), 3},
		{"quoted exponent", model("replicas", `"0.3e1"`), 3},
		{"fraction of zeros", model("replicas", `3.000`), 3},
		{"negative exponent", model("replicas", `300e-2`), 3},
		{"negative zero", model("replicas", `-0`), 0},
	} {
		c, err := Parse([]byte(tc.data))
		if err != nil {
			t.Errorf("%s: %v", tc.name, err)
		} else if got := c.Models[0].Serving.Replicas; got != tc.want {
			t.Errorf("%s: replicas %d, want %d", tc.name, got, tc.want)
		}
	}
	for _, tc := range []struct {
		name, data, want string
	}{
		{"a fraction too small for a double", model("replicas", `1.000000000000000000001`), `model_metadata[0].replicas: 1.000000000000000000001 is not an integer`},
		{"a tiny exponent", model("replicas", `1e-400`), `1e-400 is not an integer`},
		{"out of int32", model("eviction_grace_period_in_ms", `"6e9"`), `model_metadata[0].eviction_grace_period_in_ms: 6e9 is out of range 0..2147483647`},
		{"out of int32 with no Grove limit", `{"contracts": [{"organization": "o", "project": "p", "contract_number": 1, "expiration": {"keep_latest": -2147483649}}]}`,
			`contracts[0].expiration.keep_latest: -2147483649 is out of range -2147483648..2147483647`},
		{"out of int64", `{"contracts": [{"servables": [{"validity": [{"valid_after_ms": {"ms": "9223372036854775808"}}]}]}]}`,
			`contracts[0].servables[0].validity[0].valid_after_ms.ms: 9223372036854775808 is out of range 0..9223372036854`},
		{"NaN", threshold(`"NaN"`), `min_metric.threshold: "NaN" is not a number`},
		{"Infinity", threshold(`"Infinity"`), `min_metric.threshold: "Infinity" is not a number`},
		{"-Infinity", threshold(`"-Infinity"`), `min_metric.threshold: "-Infinity" is not a number`},
		{"quoted with spaces", threshold(`" 0.5"`), `min_metric.threshold: " 0.5" is not a number`},
		{"boolean", threshold(`true`), `min_metric.threshold: expected a number, got boolean true`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			checkConfigError(t, mustFail(t, tc.data), tc.want)
		})
	}
	c, err := Parse([]byte(threshold(`"-0.25e1"`)))
	if err != nil || c.Contracts[0].Servables[0].Validity[0].Threshold != -2.5 {
		t.Errorf("quoted double: got %+v, %v", c, err)
	}
}

func TestParseModelConfigNullElementsAndStrings(t *testing.T) {
	checkConfigError(t, mustFail(t, `{"contracts": [{"servables": [{"logging": {"key_features": ["a", null]}}]}]}`),
		`contracts[0].servables[0].logging.key_features[1]: expected a string, got null`)
	checkConfigError(t, mustFail(t, `{"contracts": [{"servables": [null]}]}`), `contracts[0].servables[0]: expected an object, got null`)
	// protojson refuses an unpaired UTF-16 surrogate escape, which
	// encoding/json reads as U+FFFD; the error says where it is.
	checkConfigError(t, mustFail(t, "{\"model_metadata\": [\n {\"model_path\": \"a\\ud800b\"}]}"),
		`invalid JSON at line 2, column 19: \ud800 is half of a UTF-16 surrogate pair`)
	checkConfigError(t, mustFail(t, `{"model_metadata": [{"model_path": "a\udc00\ud800"}]}`), `\udc00 is half of a UTF-16 surrogate pair`)
	c, err := Parse([]byte(`{"model_metadata": [{"model_path": "m", "warm_up_batch_request_json": "\"a\ud83d\ude00\\ud800\""}]}`))
	if err != nil || c.Models[0].WarmUpJSON != `"a😀\ud800"` {
		t.Errorf("a surrogate pair and an escaped backslash: got %+v, %v", c, err)
	}
}

func TestModelConfigSchemaKeepsBAFieldNumbers(t *testing.T) {
	// A B&A model config is a Grove model config: the fields of B&A's
	// model_metadata.proto keep their names, numbers and types.
	md := (&grovepb.ModelConfig{}).ProtoReflect().Descriptor()
	if fd := md.Fields().ByName("model_metadata"); fd == nil || fd.Number() != 1 || !fd.IsList() || fd.Message().Name() != "ModelMetadata" {
		t.Errorf("ModelConfig.model_metadata: %v", fd)
	}
	mm := md.Fields().ByName("model_metadata").Message()
	for _, f := range []struct {
		name string
		num  protoreflect.FieldNumber
		kind protoreflect.Kind
	}{
		{"model_path", 1, protoreflect.StringKind},
		{"checksum", 2, protoreflect.StringKind},
		{"warm_up_batch_request_json", 3, protoreflect.StringKind},
		{"eviction_grace_period_in_ms", 4, protoreflect.Int32Kind},
	} {
		fd := mm.Fields().ByName(protoreflect.Name(f.name))
		if fd == nil || fd.Number() != f.num || fd.Kind() != f.kind || fd.Cardinality() != protoreflect.Optional || fd.HasPresence() {
			t.Errorf("ModelMetadata.%s: got %v, want %v = %d", f.name, fd, f.kind, f.num)
		}
	}
	// Grove's own fields stay clear of the numbers B&A may use next.
	for i := range mm.Fields().Len() {
		if fd := mm.Fields().Get(i); fd.Number() > 4 && fd.Number() < 100 {
			t.Errorf("ModelMetadata.%s has number %d, between B&A's and Grove's", fd.Name(), fd.Number())
		}
	}
}

func TestParseModelConfigRequestTimeouts(t *testing.T) {
	got, err := Parse([]byte(`{"model_metadata": [
	  {"model_path": "a/", "default_timeout_ms": 250, "queue_timeout_ms": "50"},
	  {"modelPath": "b/", "defaultTimeoutMs": 3.6e6, "queueTimeoutMs": null},
	  {"model_path": "c/", "max_queue_delay_us": 500}]}`))
	if err != nil {
		t.Fatal(err)
	}
	for i, want := range []Model{
		{Path: "a/", DefaultTimeout: 250 * time.Millisecond, QueueTimeout: 50 * time.Millisecond},
		{Path: "b/", DefaultTimeout: time.Hour},
		{Path: "c/", Serving: ServingOptions{MaxQueueDelay: 500 * time.Microsecond}},
	} {
		if !reflect.DeepEqual(got.Models[i], want) {
			t.Errorf("model %d: got %+v, want %+v", i, got.Models[i], want)
		}
	}
	for _, tc := range []struct{ field, value, want string }{
		{"default_timeout_ms", "3600001", "model_metadata[0].default_timeout_ms: 3600001 is out of range 0..3600000"},
		{"queue_timeout_ms", "-1", "model_metadata[0].queue_timeout_ms: -1 is out of range 0..3600000"},
		{"queueTimeoutMs", "0.5", "model_metadata[0].queue_timeout_ms: 0.5 is not an integer"},
		{"defaultTimeoutMs", `"1s"`, `model_metadata[0].default_timeout_ms: "1s" is not a number`},
	} {
		_, err := Parse([]byte(`{"model_metadata": [{"model_path": "m/", "` + tc.field + `": ` + tc.value + `}]}`))
		checkConfigError(t, err, tc.want)
	}
}

func TestModelConfigMarshalJSONWritesTheTimeoutsWhenSet(t *testing.T) {
	c := Config{Models: []Model{
		{Path: "a/", DefaultTimeout: 250 * time.Millisecond, QueueTimeout: time.Second},
		{Path: "b/"},
	}}
	got, err := json.Marshal(c)
	if err != nil {
		t.Fatal(err)
	}
	want := `{"model_metadata":[{"model_path":"a/","default_timeout_ms":250,"queue_timeout_ms":1000},{"model_path":"b/"}]}`
	if string(got) != want {
		t.Errorf("got  %s\nwant %s", got, want)
	}
	back, err := Parse(got)
	if err != nil || !reflect.DeepEqual(back, &c) {
		t.Errorf("read back %+v, %v; want %+v", back, err, c)
	}
}

// keep_previous_for_ms has presence: absent (or null) is the server's
// default, an explicit 0 turns keeping off for the model.
func TestParseModelConfigKeepPreviousFor(t *testing.T) {
	got, err := Parse([]byte(`{"model_metadata": [
	  {"model_path": "a/", "keep_previous_for_ms": 600000},
	  {"modelPath": "b/", "keepPreviousForMs": "0"},
	  {"model_path": "c/", "keep_previous_for_ms": null},
	  {"model_path": "d/"},
	  {"model_path": "e/", "keep_previous_for_ms": 2147483647}]}`))
	if err != nil {
		t.Fatal(err)
	}
	for i, want := range []*time.Duration{new(10 * time.Minute), new(time.Duration(0)), nil, nil, new(MaxGracePeriodMs * time.Millisecond)} {
		if g := got.Models[i].KeepPreviousFor; !reflect.DeepEqual(g, want) {
			t.Errorf("model %d: keep %v, want %v", i, g, want)
		}
	}
	out, err := json.Marshal(Config{Models: got.Models[:4]})
	if err != nil {
		t.Fatal(err)
	}
	want := `{"model_metadata":[{"model_path":"a/","keep_previous_for_ms":600000},{"model_path":"b/","keep_previous_for_ms":0},{"model_path":"c/"},{"model_path":"d/"}]}`
	if string(out) != want {
		t.Errorf("canonical JSON\n got %s\nwant %s", out, want)
	}
	if back, err := Parse(out); err != nil || !reflect.DeepEqual(back.Models, got.Models[:4]) {
		t.Errorf("read back %+v, %v", back, err)
	}
	for _, tc := range []struct{ value, want string }{
		{"-1", "model_metadata[0].keep_previous_for_ms: -1 is out of range 0..2147483647"},
		{"2147483648", "model_metadata[0].keep_previous_for_ms: 2147483648 is out of range 0..2147483647"},
		{"1.5", "model_metadata[0].keep_previous_for_ms: 1.5 is not an integer"},
		{`"10m"`, `model_metadata[0].keep_previous_for_ms: "10m" is not a number`},
	} {
		_, err := Parse([]byte(`{"model_metadata": [{"model_path": "m/", "keep_previous_for_ms": ` + tc.value + `}]}`))
		checkConfigError(t, err, tc.want)
	}
}

func TestParseModelConfigSignature(t *testing.T) {
	got, err := Parse([]byte(`{"model_metadata": [
	  {"model_path": "sub/", "inputs": [{"name": "a", "datatype": "FP32", "shape": [-1, 4]}, {"name": "b", "datatype": "FP32", "shape": ["-1", 4]}],
	   "outputs": [{"name": "diff", "datatype": "FP32", "shape": [-1, 4]}]},
	  {"model_path": "s/", "inputs": [{"name": "s", "datatype": "INT64"}]},
	  {"model_path": "none/", "inputs": null}]}`))
	if err != nil {
		t.Fatal(err)
	}
	want := Signature{
		Inputs:  []TensorSignature{{"a", "FP32", []int64{-1, 4}}, {"b", "FP32", []int64{-1, 4}}},
		Outputs: []TensorSignature{{"diff", "FP32", []int64{-1, 4}}},
	}
	if !reflect.DeepEqual(got.Models[0].Signature, want) || !got.Models[0].Signature.Equal(want) {
		t.Errorf("got %+v, want %+v", got.Models[0].Signature, want)
	}
	if s := got.Models[1].Signature; len(s.Inputs) != 1 || s.Inputs[0].Shape != nil || s.IsZero() {
		t.Errorf("a scalar input: %+v", s)
	}
	if !got.Models[2].Signature.IsZero() || got.Models[0].Signature.Equal(got.Models[1].Signature) {
		t.Error("IsZero or Equal is wrong")
	}
	out, _ := json.Marshal(Config{Models: got.Models[:2]})
	wantJSON := `{"model_metadata":[{"model_path":"sub/","inputs":[{"name":"a","datatype":"FP32","shape":[-1,4]},{"name":"b","datatype":"FP32","shape":[-1,4]}],` +
		`"outputs":[{"name":"diff","datatype":"FP32","shape":[-1,4]}]},{"model_path":"s/","inputs":[{"name":"s","datatype":"INT64","shape":[]}]}]}`
	if string(out) != wantJSON {
		t.Errorf("canonical JSON\n got %s\nwant %s", out, wantJSON)
	}
	for _, tc := range []struct{ inputs, want string }{
		{`[{"datatype": "FP32"}]`, "model_metadata[0].inputs[0].name: a tensor needs a name"},
		{`[{"name": "x", "datatype": "FP32"}, {"name": "x", "datatype": "FP64"}]`, `model_metadata[0].inputs[1].name: tensor "x" is declared twice (also model_metadata[0].inputs[0])`},
		{`[{"name": "x"}]`, `model_metadata[0].inputs[0].datatype: tensor "x" needs a datatype: BOOL, UINT8,`},
		{`[{"name": "x", "datatype": "FLOAT"}]`, `model_metadata[0].inputs[0].datatype: tensor "x": datatype "FLOAT" is not BOOL, UINT8, INT8, INT16, INT32, INT64, FP16, FP32, FP64, BF16 or BYTES`},
		{`[{"name": "x", "datatype": "FP32", "shape": [-1, 0]}]`, `model_metadata[0].inputs[0].shape[1]: tensor "x": dimension 1 is 0; dimensions are 1 or more, or -1 for any size`},
		{`[{"name": "x", "datatype": "FP32", "shape": [-2]}]`, `inputs[0].shape[0]`},
		{`[{"name": "x", "datatype": "FP32", "shape": [1.5]}]`, `model_metadata[0].inputs[0].shape[0]`},
		{`[{"name": "x", "datatype": "FP32", "dims": [1]}]`, `model_metadata[0].inputs[0]: unknown field "dims"`},
		{`{"name": "x"}`, `model_metadata[0].inputs: expected an array`},
	} {
		_, err := Parse([]byte(`{"model_metadata": [{"model_path": "m/", "inputs": ` + tc.inputs + `}]}`))
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("inputs %s: got %v, want an error containing %q", tc.inputs, err, tc.want)
		}
	}
	if _, err := Parse([]byte(`{"model_metadata": [{"model_path": "m/", "outputs": [{"name": "y", "datatype": "fp32"}]}]}`)); err == nil ||
		!strings.Contains(err.Error(), `model_metadata[0].outputs[0].datatype: tensor "y": datatype "fp32" is not`) {
		t.Errorf("a lowercase output datatype: %v", err)
	}
}

// TestParseModelConfigLoad: load is "eager" or "on_demand", absent by
// default (the server's load_policy decides, OnDemand), written back in
// the canonical form when set; any other value is refused with the
// names it takes.
func TestParseModelConfigLoad(t *testing.T) {
	c, err := Parse([]byte(`{"model_metadata": [
	  {"model_path": "a/", "load": "on_demand"},
	  {"model_path": "b/", "load": "eager"},
	  {"model_path": "c/", "load": null},
	  {"model_path": "d/"}]}`))
	if err != nil {
		t.Fatal(err)
	}
	for i, want := range []Load{LoadOnDemand, LoadEager, "", ""} {
		if got := c.Models[i].Load; got != want {
			t.Errorf("%s: load %q, want %q", c.Models[i].Path, got, want)
		}
	}
	for _, tc := range []struct {
		def  Load
		want []bool
	}{{"", []bool{true, false, false, false}}, {LoadEager, []bool{true, false, false, false}}, {LoadOnDemand, []bool{true, false, true, true}}} {
		for i, want := range tc.want {
			if got := c.Models[i].OnDemand(tc.def); got != want {
				t.Errorf("%s with the server's %q: OnDemand %v, want %v", c.Models[i].Path, tc.def, got, want)
			}
		}
	}
	out, err := json.Marshal(c)
	if err != nil {
		t.Fatal(err)
	}
	want := `{"model_metadata":[{"model_path":"a/","load":"on_demand"},{"model_path":"b/","load":"eager"},{"model_path":"c/"},{"model_path":"d/"}]}`
	if string(out) != want {
		t.Errorf("canonical form\n got %s\nwant %s", out, want)
	}
	for _, tc := range []struct{ value, want string }{
		{`"lazy"`, `model_metadata[0].load: load "lazy" is not eager or on_demand`},
		{`"ON_DEMAND"`, `model_metadata[0].load: load "ON_DEMAND" is not eager or on_demand`},
		{`""`, ``},
		{`1`, `model_metadata[0].load`},
	} {
		_, err := Parse([]byte(`{"model_metadata": [{"model_path": "m/", "load": ` + tc.value + `}]}`))
		if tc.want == "" {
			if err != nil {
				t.Errorf("load %s: %v, want accepted (the server's policy)", tc.value, err)
			}
			continue
		}
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("load %s: got %v, want an error containing %q", tc.value, err, tc.want)
		}
	}
}
