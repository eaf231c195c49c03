package forestflow

import (
	"encoding/json"
	"errors"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/groveml/grove/conf/modelconfig"
)

// outcomesConfig is a config whose contract learns from clicks, with a
// release gated by its outcomes both ways.
const outcomesConfig = `{"model_metadata": [{"model_path": "a/"}, {"model_path": "b/"}],
 "contracts": [{"organization": "ads", "project": "pctr", "contract_number": 1, "sticky_key": "user_id",
   "outcomes": {"label": "click", "kind": "binary", "window": "30m", "missing": "ignore", "output": "output_0", "lateness": "2m"},
   "servables": [
     {"release_version": "v1", "model_path": "a/", "logging": {"log_level": "FULL"}},
     {"release_version": "v2", "model_path": "b/", "logging": {"log_level": "FULL"}, "shadow": {},
      "validity": [{"promote_when": {"min_outcomes": 20000, "max_logloss_delta": 0, "logloss_confidence": 0.99, "min_auc_delta": 0.002, "calibration_between": [0.9, 1.1]}}],
      "rollback_when": {"calibration_between": [0.8, 1.25], "min_outcomes": 5000}}]}]}`

// put applies edit to the parsed config c and returns the config it
// writes to the bucket, parsed back.
func put(t *testing.T, c *modelconfig.Config, edit func(*modelconfig.Config) error) *modelconfig.Config {
	t.Helper()
	if err := edit(c); err != nil {
		t.Fatalf("edit: %v", err)
	}
	data, err := c.Validate()
	if err != nil {
		t.Fatalf("the edited config is refused: %v", err)
	}
	back, err := modelconfig.Parse(data)
	if err != nil {
		t.Fatalf("the config written does not parse: %v\n%s", err, data)
	}
	return back
}

// A GET of a contract's settings PUT back unchanged keeps its outcomes:
// the document reads the outcomes object GET writes, and the config
// written to the bucket holds it, so the next GET answers the same.
func TestContractSettingsPutBackKeepsOutcomes(t *testing.T) {
	c, err := modelconfig.Parse([]byte(outcomesConfig))
	if err != nil {
		t.Fatal(err)
	}
	want := c.Contracts[0].Settings()
	if want.Outcomes == nil {
		t.Fatal("the test config has no outcomes")
	}
	got, err := json.Marshal(want) // GET …/c-settings
	if err != nil {
		t.Fatal(err)
	}
	cs, err := ParseContractSettings(got) // PUT /ads/pctr/1
	if err != nil {
		t.Fatalf("PUT of the settings GET answered %s: %v", got, err)
	}
	back := put(t, c, func(c *modelconfig.Config) error { return c.UpdateContract("ads/pctr/1", cs) })
	if s := back.Contracts[0].Settings(); !reflect.DeepEqual(s, want) {
		t.Errorf("the config written holds settings %+v (outcomes %+v), not %+v (outcomes %+v)", s, s.Outcomes, want, want.Outcomes)
	}
	again, err := json.Marshal(back.Contracts[0].Settings())
	if err != nil {
		t.Fatal(err)
	}
	if string(again) != string(got) {
		t.Errorf("GET after the PUT answers\n%s\nnot\n%s", again, got)
	}
}

// A PUT that changes the outcomes, in either spelling and in any key
// order, writes them to the bucket with their defaults applied, as the
// config file would read them.
func TestContractSettingsPutWritesNewOutcomes(t *testing.T) {
	for _, tc := range []struct{ name, doc string }{
		{"config shape", `{"router": "latest", "sticky_key": "u", "outcomes": {"label": "conversion", "window": "168h"}}`},
		{"outcomes before the keys read through the contract", `{"outcomes": {"label": "conversion", "window": "168h"}, "sticky_key": "u", "expiration": null, "router": "latest"}`},
		{"lowerCamelCase and nulls for the defaults", `{"router": "latest", "stickyKey": "u", "outcomes": {"label": "conversion", "window": "168h", "kind": null, "missing": null, "lateness": null, "output": null}}`},
		{"ForestFlow's router", `{"router": {"LatestPhaseInPctBasedRouter": {}}, "outcomes": {"label": "conversion", "window": "168h"}, "stickyKey": "u"}`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, err := modelconfig.Parse([]byte(outcomesConfig))
			if err != nil {
				t.Fatal(err)
			}
			cs, err := ParseContractSettings([]byte(tc.doc))
			if err != nil {
				t.Fatal(err)
			}
			back := put(t, c, func(c *modelconfig.Config) error { return c.UpdateContract("ads/pctr/1", cs) })
			want := modelconfig.ContractSettings{Router: modelconfig.RouterLatest, StickyKey: "u", Outcomes: &modelconfig.Outcomes{
				Label: "conversion", Kind: modelconfig.OutcomeBinary, Window: 168 * time.Hour, Missing: modelconfig.OutcomeMissingNegative,
				Lateness: modelconfig.DefaultOutcomeLateness}}
			if got := back.Contracts[0].Settings(); !reflect.DeepEqual(got, want) {
				t.Errorf("the config written holds %+v (outcomes %+v), want %+v (outcomes %+v)", got, got.Outcomes, want, want.Outcomes)
			}
		})
	}
}

// Settings replace the contract's, so a PUT without outcomes removes
// them; while a release's gate judges outcomes, validation refuses that
// edit, naming the gate, and the config is not written.
func TestContractSettingsPutWithoutOutcomesIsRefusedWhileAGateNeedsThem(t *testing.T) {
	c, err := modelconfig.Parse([]byte(outcomesConfig))
	if err != nil {
		t.Fatal(err)
	}
	cs, err := ParseContractSettings([]byte(`{"router": "fair", "sticky_key": "user_id"}`))
	if err != nil {
		t.Fatal(err)
	}
	if err := c.UpdateContract("ads/pctr/1", cs); err != nil {
		t.Fatal(err)
	}
	data, err := c.Validate()
	checkDocumentError(t, err, `contracts[0].servables[1].validity[0].promote_when.max_logloss_delta: contract ads/pctr/1: release v2: promote_when max_logloss_delta is judged on outcomes, and the contract has no outcomes object`)
	if data != nil {
		t.Errorf("Validate returned data with its error: %s", data)
	}
}

// The document refuses a bad outcomes object with the message the config
// file gives for it, its field the key below "outcomes".
func TestContractSettingsOutcomesErrorsAreTheConfigFiles(t *testing.T) {
	for _, tc := range []struct{ name, outcomes, field, want string }{
		{"no window", `{"label": "click"}`, "outcomes.window", `outcomes needs a window, a duration such as "30m" or "168h"`},
		{"window not a duration", `{"label": "click", "window": "soon"}`, "outcomes.window", `window "soon" is not a duration such as "30m" or "168h"`},
		{"window 0", `{"label": "click", "window": "0s"}`, "outcomes.window", `outcomes window 0s must be more than 0`},
		{"negative window", `{"label": "click", "window": "-1m"}`, "outcomes.window", `window -1m is negative`},
		{"no label", `{"window": "30m"}`, "outcomes.label", `outcomes needs the label to learn`},
		{"unknown kind", `{"label": "click", "window": "30m", "kind": "ternary"}`, "outcomes.kind", `kind "ternary" is not binary or numeric`},
		{"unknown missing", `{"label": "click", "window": "30m", "missing": "drop"}`, "outcomes.missing", `missing "drop" is not negative or ignore`},
		{"negative lateness", `{"label": "click", "window": "30m", "lateness": "-5s"}`, "outcomes.lateness", `lateness -5s is negative`},
		{"lateness not a duration", `{"label": "click", "window": "30m", "lateness": "1 minute"}`, "outcomes.lateness", `lateness "1 minute" is not a duration`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := ParseContractSettings([]byte(`{"outcomes": ` + tc.outcomes + `}`))
			checkDocumentError(t, err, tc.want)
			var de *modelconfig.Error
			if !errors.As(err, &de) {
				return
			}
			if de.Field != tc.field {
				t.Errorf("error names %q, want %q", de.Field, tc.field)
			}
			config := strings.Replace(outcomesConfig, `{"label": "click", "kind": "binary", "window": "30m", "missing": "ignore", "output": "output_0", "lateness": "2m"}`, tc.outcomes, 1)
			_, cerr := modelconfig.Parse([]byte(config))
			var fe *modelconfig.Error
			if !errors.As(cerr, &fe) {
				t.Fatalf("the config file with these outcomes gives %v, not a *modelconfig.Error", cerr)
			}
			if !strings.HasSuffix(fe.Field, "contracts[0]."+tc.field) || !strings.HasSuffix(fe.Msg, de.Msg) {
				t.Errorf("the document says %q: %q, the config file %q: %q", de.Field, de.Msg, fe.Field, fe.Msg)
			}
		})
	}
}

// The document's own refusals of an outcomes object's shape name the key.
func TestContractSettingsOutcomesShapeErrors(t *testing.T) {
	for _, tc := range []struct{ name, doc, want string }{
		{"not an object", `{"outcomes": "click"}`, `outcomes: expected an object, got string "click"`},
		{"an array", `{"outcomes": [{"label": "click"}]}`, `outcomes: expected an object, got an array`},
		{"unknown key", `{"outcomes": {"label": "click", "window": "30m", "delay": "1m"}}`, `outcomes: unknown field "delay"`},
		{"key in neither spelling", `{"outcomes": {"label": "click", "window": "30m", "Output": "b"}}`, `outcomes: unknown field "Output"`},
		{"duplicate key", `{"outcomes": {"label": "click", "window": "30m", "lateness": "1m", "lateness": "2m"}}`, `outcomes: duplicate field "lateness"`},
		{"kind not a string", `{"outcomes": {"label": "click", "window": "30m", "kind": 1}}`, `outcomes.kind: expected a string, got number 1`},
		{"window not a string", `{"outcomes": {"label": "click", "window": 30}}`, `outcomes.window: expected a string, got number 30`},
		{"in a serve request's contract settings", `{"path": "a/", "fqrv": {"contract": {"organization": "ads", "project": "new", "contract_number": 1}, "release_version": "v1"},
		  "contractSettings": {"outcomes": {"label": "click", "window": "forever"}}}`, `contract_settings.outcomes.window: window "forever" is not a duration`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var err error
			if strings.Contains(tc.doc, `"fqrv"`) {
				_, err = ParseServeRequest([]byte(tc.doc))
			} else {
				_, err = ParseContractSettings([]byte(tc.doc))
			}
			checkDocumentError(t, err, tc.want)
		})
	}
}

// A GET of a release's policy PUT back keeps the outcome bounds of its
// promote_when and rollback_when, and the config written holds them.
func TestPolicyPutBackKeepsOutcomeBounds(t *testing.T) {
	c, err := modelconfig.Parse([]byte(outcomesConfig))
	if err != nil {
		t.Fatal(err)
	}
	want := c.Contracts[0].Servables[1].Policy()
	if want.RollbackWhen == nil || want.RollbackWhen.CalibrationBetween == nil || !want.Validity[0].Promote.HasOutcomeBounds() {
		t.Fatalf("the test config's policy has no outcome bounds: %+v", want)
	}
	got, err := json.Marshal(want) // GET …/v2/settings' policySettings
	if err != nil {
		t.Fatal(err)
	}
	p, err := ParsePolicy(got) // PUT …/v2/policy
	if err != nil {
		t.Fatalf("PUT of the policy GET answered %s: %v", got, err)
	}
	back := put(t, c, func(c *modelconfig.Config) error { return c.SetPolicy("ads/pctr/1", "v2", p) })
	if s := back.Contracts[0].Servables[1].Policy(); !reflect.DeepEqual(s, want) {
		t.Errorf("the config written holds policy %+v, not %+v", s, want)
	}
}

// A policy document in lowerCamelCase, with calibration_between alone on
// rollback_when, reads as the config file's snake_case does.
func TestParsePolicyReadsOutcomeBoundsInBothSpellings(t *testing.T) {
	snake, err := ParsePolicy([]byte(`{"shadow": {}, "validity": [{"promote_when": {"min_outcomes": 100, "max_logloss_delta": 0.001, "logloss_confidence": 0.9, "min_auc_delta": -0.01, "calibration_between": [0.5, 2]}}],
	  "rollback_when": {"calibration_between": [0.8, 1.25], "min_outcomes": 50}}`))
	if err != nil {
		t.Fatal(err)
	}
	camel, err := ParsePolicy([]byte(`{"shadow": {}, "validityPolicy": [{"promoteWhen": {"minOutcomes": "100", "maxLoglossDelta": "0.001", "loglossConfidence": 0.9, "minAucDelta": -0.01, "calibrationBetween": ["0.5", 2]}}],
	  "rollbackWhen": {"calibrationBetween": [0.8, 1.25], "minOutcomes": 50}}`))
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(snake, camel) {
		t.Errorf("lowerCamelCase reads as %+v, snake_case as %+v", camel, snake)
	}
	pw := snake.Validity[0].Promote
	if pw.MinOutcomes != 100 || *pw.MaxLogLossDelta != 0.001 || pw.Confidence() != 0.9 || *pw.MinAUCDelta != -0.01 || *pw.CalibrationBetween != (modelconfig.Range{Lo: 0.5, Hi: 2}) {
		t.Errorf("promote_when reads as %+v", pw)
	}
	if rw := snake.RollbackWhen; rw.MinOutcomes != 50 || *rw.CalibrationBetween != (modelconfig.Range{Lo: 0.8, Hi: 1.25}) || rw.MinRequests != 0 {
		t.Errorf("rollback_when reads as %+v", rw)
	}
}

// The document refuses bad outcome bounds naming the key; the rules that
// tie them to the rest of the config are the edited config's validation's.
func TestPolicyOutcomeBoundErrorsNameTheKey(t *testing.T) {
	for _, tc := range []struct{ name, doc, want string }{
		{"calibration lo above hi", `{"rollback_when": {"min_outcomes": 5, "calibration_between": [1.1, 0.9]}}`,
			`rollback_when.calibration_between: calibration_between [1.1, 0.9]: lo must be less than hi`},
		{"calibration lo 0", `{"validity": [{"promote_when": {"min_outcomes": 5, "calibration_between": [0, 1]}}]}`,
			`validity[0].promote_when.calibration_between: calibration_between [0, 1]: lo must be more than 0`},
		{"calibration three numbers", `{"validity": [{"promote_when": {"min_outcomes": 5, "calibration_between": [0.9, 1, 1.1]}}]}`,
			`validity[0].promote_when.calibration_between: calibration_between needs two numbers [lo, hi], got 3`},
		{"calibration one number", `{"rollbackWhen": {"minOutcomes": 5, "calibrationBetween": [0.9]}}`,
			`rollback_when.calibration_between: calibration_between needs two numbers [lo, hi], got 1`},
		{"calibration null element", `{"rollback_when": {"calibration_between": [0.9, null]}}`,
			`rollback_when.calibration_between[1]: expected a number, got null`},
		{"calibration NaN", `{"rollback_when": {"calibration_between": ["NaN", 1]}}`,
			`rollback_when.calibration_between[0]: "NaN" is not a number`},
		{"calibration not a list", `{"rollback_when": {"calibration_between": 1.1}}`,
			`rollback_when.calibration_between: expected an array, got number 1.1`},
		{"min_outcomes negative", `{"rollback_when": {"min_outcomes": -1}}`, `rollback_when.min_outcomes: -1 is out of range`},
		{"min_outcomes fractional", `{"validity": [{"promote_when": {"min_outcomes": 1.5}}]}`, `validity[0].promote_when.min_outcomes: 1.5 is not an integer`},
		{"logloss_confidence Infinity", `{"validity": [{"promote_when": {"logloss_confidence": "Infinity"}}]}`,
			`validity[0].promote_when.logloss_confidence: "Infinity" is not a number`},
		{"max_logloss_delta not a number", `{"validity": [{"promote_when": {"max_logloss_delta": "none"}}]}`,
			`validity[0].promote_when.max_logloss_delta: "none" is not a number`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := ParsePolicy([]byte(tc.doc))
			checkDocumentError(t, err, tc.want)
		})
	}
}

// The rules between the outcome bounds and the rest of the config apply
// to a policy PUT as to the config file, naming the release and the key.
func TestValidationJudgesThePutOutcomeBounds(t *testing.T) {
	for _, tc := range []struct{ name, policy, want string }{
		{"bounds without min_outcomes", `{"shadow": {}, "validity": [{"promote_when": {"min_shadow_executions": 10, "max_logloss_delta": 0}}]}`,
			`contracts[0].servables[1].validity[0].promote_when.min_outcomes: contract ads/pctr/1: release v2: promote_when needs min_outcomes from 1 to`},
		{"confidence without its bound", `{"shadow": {}, "validity": [{"promote_when": {"min_outcomes": 10, "min_auc_delta": 0, "logloss_confidence": 0.9}}]}`,
			`promote_when.logloss_confidence: contract ads/pctr/1: release v2: promote_when logloss_confidence is the confidence of max_logloss_delta's interval`},
		{"confidence 1", `{"shadow": {}, "validity": [{"promote_when": {"min_outcomes": 10, "max_logloss_delta": 0, "logloss_confidence": 1}}]}`,
			`promote_when.logloss_confidence: contract ads/pctr/1: release v2: promote_when logloss_confidence 1 is not strictly between 0 and 1`},
		{"rollback min_outcomes without calibration", `{"rollback_when": {"min_outcomes": 10, "max_error_rate": 0.1, "min_requests": 5}, "phase_in": {"linear_over_secs": {"secs": 60}}}`,
			`rollback_when.min_outcomes: contract ads/pctr/1: release v2: rollback_when min_outcomes is what calibration_between is judged from`},
		{"rollback calibration without min_outcomes", `{"rollback_when": {"calibration_between": [0.9, 1.1]}}`,
			`rollback_when.min_outcomes: contract ads/pctr/1: release v2: rollback_when needs min_outcomes from 1 to`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, err := modelconfig.Parse([]byte(outcomesConfig))
			if err != nil {
				t.Fatal(err)
			}
			p, err := ParsePolicy([]byte(tc.policy))
			if err != nil {
				t.Fatalf("the document is refused: %v", err)
			}
			if err := c.SetPolicy("ads/pctr/1", "v2", p); err != nil {
				t.Fatal(err)
			}
			data, err := c.Validate()
			checkDocumentError(t, err, tc.want)
			if data != nil {
				t.Errorf("Validate returned data with its error: %s", data)
			}
		})
	}
}
