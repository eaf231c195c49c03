package modelconfig

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"
	"time"
)

// outcomesExample learns clicks on a contract, with a champion ranked by
// live AUC, a challenger promoted by its outcome bounds alone and rolled
// back by calibration alone, and conversions on a direct model entry.
const outcomesExample = `{"model_metadata": [{"model_path": "a/"}, {"model_path": "b/"},
   {"model_path": "c/", "outcomes": {"label": "value", "kind": "numeric", "window": "168h", "missing": "ignore", "output": "y", "lateness": "10m"}}],
 "contracts": [{"organization": "ads", "project": "pctr", "contract_number": 1,
   "expiration": {"keep_top_ranked": {"n": 1, "metric": "outcome_auc"}},
   "outcomes": {"label": "click", "window": "30m"},
   "servables": [
     {"release_version": "v1", "model_path": "a/", "logging": {"log_level": "FULL"},
      "validity": [{"min_metric": {"metric": "outcome_neg_logloss", "threshold": -0.5}}]},
     {"release_version": "v2", "model_path": "b/", "shadow": {}, "logging": {"log_level": "FULL"},
      "validity": [{"promote_when": {"min_outcomes": 20000, "max_logloss_delta": 0, "logloss_confidence": 0.99, "min_auc_delta": 0.002, "calibration_between": [0.9, 1.1]}}],
      "rollback_when": {"calibration_between": [0.8, 1.25], "min_outcomes": 5000}}]}]}`

func TestParseModelConfigReadsOutcomesWithTheirDefaults(t *testing.T) {
	c, err := Parse([]byte(outcomesExample))
	if err != nil {
		t.Fatal(err)
	}
	if want := (&Outcomes{Label: "click", Kind: OutcomeBinary, Window: 30 * time.Minute, Missing: OutcomeMissingNegative, Lateness: time.Minute}); !reflect.DeepEqual(c.Contracts[0].Outcomes, want) {
		t.Errorf("contract outcomes = %+v, want %+v", c.Contracts[0].Outcomes, want)
	}
	if want := (&Outcomes{Label: "value", Kind: OutcomeNumeric, Window: 168 * time.Hour, Missing: OutcomeMissingIgnore, Output: "y", Lateness: 10 * time.Minute}); !reflect.DeepEqual(c.Models[2].Outcomes, want) {
		t.Errorf("model outcomes = %+v, want %+v", c.Models[2].Outcomes, want)
	}
	if c.Models[0].Outcomes != nil {
		t.Errorf("model a/ has outcomes it was not given: %+v", c.Models[0].Outcomes)
	}
	f := func(v float64) *float64 { return &v }
	sv := c.Contracts[0].Servables[1]
	wantPromote := PromoteWhen{MinOutcomes: 20000, MaxLogLossDelta: f(0), LogLossConfidence: f(0.99), MinAUCDelta: f(0.002), CalibrationBetween: &Range{Lo: 0.9, Hi: 1.1}}
	if !reflect.DeepEqual(sv.Validity[0].Promote, wantPromote) {
		t.Errorf("promote_when = %+v, want %+v", sv.Validity[0].Promote, wantPromote)
	}
	if got := sv.Validity[0].Promote.Confidence(); got != 0.99 {
		t.Errorf("Confidence() = %v, want 0.99", got)
	}
	if got := (PromoteWhen{}).Confidence(); got != DefaultLogLossConfidence {
		t.Errorf("Confidence() of an absent logloss_confidence = %v, want %v", got, DefaultLogLossConfidence)
	}
	if want := (&RollbackWhen{MinOutcomes: 5000, CalibrationBetween: &Range{Lo: 0.8, Hi: 1.25}}); !reflect.DeepEqual(sv.RollbackWhen, want) {
		t.Errorf("rollback_when = %+v, want %+v", sv.RollbackWhen, want)
	}
	if got := c.Contracts[0].Settings().Outcomes; got != c.Contracts[0].Outcomes {
		t.Errorf("Settings().Outcomes = %p, want the contract's %p", got, c.Contracts[0].Outcomes)
	}
}

func TestModelConfigMarshalJSONRoundTripsOutcomes(t *testing.T) {
	c, err := Parse([]byte(outcomesExample))
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
	for _, want := range []string{
		`"outcomes":{"label":"click","kind":"binary","window":"30m0s","missing":"negative","lateness":"1m0s"}`,
		`"outcomes":{"label":"value","kind":"numeric","window":"168h0m0s","missing":"ignore","output":"y","lateness":"10m0s"}`,
		`{"promote_when":{"min_outcomes":20000,"max_logloss_delta":0,"logloss_confidence":0.99,"min_auc_delta":0.002,"calibration_between":[0.9,1.1]}}`,
		`"rollback_when":{"min_outcomes":5000,"calibration_between":[0.8,1.25]}`,
	} {
		if !strings.Contains(string(out), want) {
			t.Errorf("canonical JSON lacks %s:\n%s", want, out)
		}
	}
}

func TestParseModelConfigOutcomesErrors(t *testing.T) {
	contract := func(outcomes, servable string) string {
		return `{"model_metadata": [{"model_path": "a/"}], "contracts": [{"organization": "ads", "project": "pctr", "contract_number": 1` +
			outcomes + `, "servables": [{"release_version": "v2", "model_path": "a/"` + servable + `}]}]}`
	}
	full := `, "logging": {"log_level": "FULL"}`
	clicks := `, "outcomes": {"label": "click", "window": "30m"}`
	promote := func(members string) string {
		return full + `, "shadow": {}, "validity": [{"promote_when": {` + members + `}}]`
	}
	for _, tc := range []struct{ name, data, want string }{
		{"no label", contract(`, "outcomes": {"window": "30m"}`, full),
			`contracts[0].outcomes.label: contract ads/pctr/1: outcomes needs the label to learn`},
		{"no window", contract(`, "outcomes": {"label": "click"}`, full),
			`contracts[0].outcomes.window: outcomes needs a window`},
		{"window not a duration", contract(`, "outcomes": {"label": "click", "window": "30"}`, full),
			`contracts[0].outcomes.window: window "30" is not a duration`},
		{"zero window", contract(`, "outcomes": {"label": "click", "window": "0s"}`, full),
			`contracts[0].outcomes.window: contract ads/pctr/1: outcomes window 0s must be more than 0`},
		{"negative lateness", contract(`, "outcomes": {"label": "click", "window": "30m", "lateness": "-1m"}`, full),
			`contracts[0].outcomes.lateness: lateness -1m is negative`},
		{"unknown kind", contract(`, "outcomes": {"label": "click", "window": "30m", "kind": "boolean"}`, full),
			`contracts[0].outcomes.kind: kind "boolean" is not binary or numeric`},
		{"unknown missing", contract(`, "outcomes": {"label": "click", "window": "30m", "missing": "zero"}`, full),
			`contracts[0].outcomes.missing: missing "zero" is not negative or ignore`},
		{"unknown outcomes key", contract(`, "outcomes": {"label": "click", "window": "30m", "labels": "x"}`, full),
			`outcomes: unknown field "labels"`},
		{"servable not logged at FULL", contract(clicks, `, "logging": {"log_level": "SAMPLE"}`),
			`contracts[0].servables[0].logging.log_level: contract ads/pctr/1: release v2: the contract's outcomes are joined to logged predictions, and log_level is SAMPLE`},
		{"servable without logging", contract(clicks, ``),
			`contracts[0].servables[0].logging.log_level: contract ads/pctr/1: release v2: the contract's outcomes are joined to logged predictions, and log_level is NONE`},
		{"model entry window", `{"model_metadata": [{"model_path": "a/", "outcomes": {"label": "click", "window": "soon"}}]}`,
			`model_metadata[0].outcomes.window: window "soon" is not a duration`},
		{"model entry without label", `{"model_metadata": [{"model_path": "a/", "outcomes": {"window": "1h"}}]}`,
			`model_metadata[0].outcomes.label: model a/: outcomes needs the label to learn`},

		{"outcome bound without min_outcomes", contract(clicks, promote(`"min_shadow_executions": 10, "min_auc_delta": 0.01`)),
			`validity[0].promote_when.min_outcomes: contract ads/pctr/1: release v2: promote_when needs min_outcomes from 1 to 9007199254740992, got 0: the outcome bounds are judged over that many scored predictions`},
		{"min_outcomes without bound", contract(clicks, promote(`"min_outcomes": 10`)),
			`promote_when.min_outcomes: contract ads/pctr/1: release v2: promote_when min_outcomes needs an outcome bound`},
		{"neither count", contract(clicks, promote(`"max_mean_abs_diff": 0.1`)),
			`promote_when.min_shadow_executions: contract ads/pctr/1: release v2: promote_when needs min_shadow_executions from 1 to 9007199254740992, got 0 (it may be left out when min_outcomes is given)`},
		{"confidence 1", contract(clicks, promote(`"min_outcomes": 10, "max_logloss_delta": 0, "logloss_confidence": 1`)),
			`promote_when.logloss_confidence: contract ads/pctr/1: release v2: promote_when logloss_confidence 1 is not strictly between 0 and 1`},
		{"confidence 0", contract(clicks, promote(`"min_outcomes": 10, "max_logloss_delta": 0, "logloss_confidence": 0`)),
			`logloss_confidence 0 is not strictly between 0 and 1`},
		{"confidence without logloss bound", contract(clicks, promote(`"min_outcomes": 10, "min_auc_delta": 0, "logloss_confidence": 0.9`)),
			`promote_when.logloss_confidence: contract ads/pctr/1: release v2: promote_when logloss_confidence is the confidence of max_logloss_delta's interval`},
		{"negative logloss bound", contract(clicks, promote(`"min_outcomes": 10, "max_logloss_delta": -0.01`)),
			`promote_when.max_logloss_delta: contract ads/pctr/1: release v2: promote_when max_logloss_delta -0.01 is negative`},
		{"auc delta above 1", contract(clicks, promote(`"min_outcomes": 10, "min_auc_delta": 2`)),
			`promote_when.min_auc_delta: contract ads/pctr/1: release v2: promote_when min_auc_delta 2 is not between -1 and 1`},
		{"calibration lo above hi", contract(clicks, promote(`"min_outcomes": 10, "calibration_between": [1.1, 0.9]`)),
			`promote_when.calibration_between: contract ads/pctr/1: release v2: promote_when calibration_between [1.1, 0.9]: lo must be less than hi`},
		{"calibration lo equal to hi", contract(clicks, promote(`"min_outcomes": 10, "calibration_between": [1, 1]`)),
			`calibration_between [1, 1]: lo must be less than hi`},
		{"calibration lo 0", contract(clicks, promote(`"min_outcomes": 10, "calibration_between": [0, 1.1]`)),
			`promote_when.calibration_between: contract ads/pctr/1: release v2: promote_when calibration_between [0, 1.1]: lo must be more than 0`},
		{"calibration one number", contract(clicks, promote(`"min_outcomes": 10, "calibration_between": [0.9]`)),
			`promote_when.calibration_between: contract ads/pctr/1: release v2: promote_when calibration_between needs two numbers [lo, hi], got 1`},
		{"calibration three numbers", contract(clicks, promote(`"min_outcomes": 10, "calibration_between": [0.9, 1, 1.1]`)),
			`calibration_between needs two numbers [lo, hi], got 3`},
		{"outcome bound without outcomes", contract(``, promote(`"min_outcomes": 10, "min_auc_delta": 0`)),
			`promote_when.min_auc_delta: contract ads/pctr/1: release v2: promote_when min_auc_delta is judged on outcomes, and the contract has no outcomes object`},
		{"outcome bound on numeric outcomes", contract(`, "outcomes": {"label": "value", "window": "1h", "kind": "numeric"}`, promote(`"min_outcomes": 10, "max_logloss_delta": 0`)),
			`promote_when.max_logloss_delta: contract ads/pctr/1: release v2: promote_when max_logloss_delta is judged on binary outcomes, and the contract's outcomes are numeric`},
		{"min_outcomes out of range", contract(clicks, promote(`"min_outcomes": 1e16, "min_auc_delta": 0`)),
			`promote_when.min_outcomes: 1e16 is out of range 0..9007199254740992`},

		{"rollback calibration without min_outcomes", contract(clicks, full+`, "rollback_when": {"calibration_between": [0.9, 1.1]}`),
			`contracts[0].servables[0].rollback_when.min_outcomes: contract ads/pctr/1: release v2: rollback_when needs min_outcomes from 1 to 9007199254740992, got 0`},
		{"rollback min_outcomes without calibration", contract(clicks, full+`, "phase_in": {"linear_over_secs": {"secs": 60}}, "rollback_when": {"min_requests": 5, "max_error_rate": 0.1, "min_outcomes": 5}`),
			`rollback_when.min_outcomes: contract ads/pctr/1: release v2: rollback_when min_outcomes is what calibration_between is judged from, and it is not given`},
		{"rollback min_requests without traffic bound", contract(clicks, full+`, "rollback_when": {"min_requests": 5, "min_outcomes": 5, "calibration_between": [0.9, 1.1]}`),
			`rollback_when.min_requests: contract ads/pctr/1: release v2: rollback_when min_requests is what max_error_rate and max_p99_ms are judged from, and neither is given`},
		{"rollback calibration range", contract(clicks, full+`, "rollback_when": {"min_outcomes": 5, "calibration_between": [-1, 1.1]}`),
			`rollback_when.calibration_between: contract ads/pctr/1: release v2: rollback_when calibration_between [-1, 1.1]: lo must be more than 0`},
		{"rollback calibration without outcomes", contract(``, `, "rollback_when": {"min_outcomes": 5, "calibration_between": [0.9, 1.1]}`),
			`rollback_when.calibration_between: contract ads/pctr/1: release v2: rollback_when calibration_between is judged on outcomes, and the contract has no outcomes object`},

		{"min_metric unknown live name", contract(clicks, full+`, "validity": [{"min_metric": {"metric": "outcome_logloss", "threshold": 0}}]`),
			`validity[0].min_metric.metric: contract ads/pctr/1: release v2: min_metric "outcome_logloss" is not a live outcome metric: names starting with "outcome_" are outcome_auc, outcome_neg_logloss, outcome_neg_brier or outcome_neg_ece`},
		{"min_metric live without outcomes", contract(``, `, "validity": [{"min_metric": {"metric": "outcome_auc", "threshold": 0.7}}]`),
			`validity[0].min_metric.metric: contract ads/pctr/1: release v2: min_metric outcome_auc is measured from outcomes, and the contract has no outcomes object`},
		{"keep_top_ranked live without outcomes", `{"model_metadata": [{"model_path": "a/"}], "contracts": [{"organization": "ads", "project": "pctr", "contract_number": 1,
			"expiration": {"keep_top_ranked": {"n": 1, "metric": "outcome_neg_ece"}}, "servables": []}]}`,
			`contracts[0].expiration.keep_top_ranked.metric: contract ads/pctr/1: keep_top_ranked outcome_neg_ece is measured from outcomes, and the contract has no outcomes object`},
	} {
		t.Run(tc.name, func(t *testing.T) { checkParseError(t, tc.data, tc.want) })
	}
}

func TestParseModelConfigAcceptsCalibrationAsTheOnlyRollbackBoundWithoutARamp(t *testing.T) {
	c, err := Parse([]byte(`{"model_metadata": [{"model_path": "a/"}], "contracts": [{"organization": "ads", "project": "pctr", "contract_number": 1,
		"outcomes": {"label": "click", "window": "30m"},
		"servables": [{"release_version": "v1", "model_path": "a/", "logging": {"log_level": "FULL"},
		  "rollback_when": {"min_outcomes": 100, "calibration_between": [0.5, 2]}}]}]}`))
	if err != nil {
		t.Fatal(err)
	}
	if got := c.Contracts[0].Servables[0].RollbackWhen; got == nil || got.MinRequests != 0 || *got.CalibrationBetween != (Range{Lo: 0.5, Hi: 2}) {
		t.Errorf("rollback_when = %+v", got)
	}
}

func TestPushedMetricNamesAreNotOutcomeMetrics(t *testing.T) {
	for _, name := range []string{"auc", "logloss", "brier", "ece", "neg_logloss"} {
		if IsOutcomeMetric(name) {
			t.Errorf("IsOutcomeMetric(%q) = true; pushed metrics keep their names", name)
		}
	}
	for _, name := range OutcomeMetrics() {
		if !IsOutcomeMetric(name) {
			t.Errorf("IsOutcomeMetric(%q) = false", name)
		}
	}
}

func TestValidateOutcomeLoggingNamesTheModelNotLoggedAtFull(t *testing.T) {
	c, err := Parse([]byte(outcomesExample))
	if err != nil {
		t.Fatal(err)
	}
	if err := c.ValidateOutcomeLogging(LogLevelFull); err != nil {
		t.Errorf("at FULL: %v", err)
	}
	for _, level := range []string{LogLevelNone, LogLevelSample} {
		err := c.ValidateOutcomeLogging(level)
		want := "model_metadata[2].outcomes: model c/: outcomes are joined to logged predictions, and direct calls are logged at " + level
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("at %s: error %v, want %q", level, err, want)
		}
	}
	plain, err := Parse([]byte(`{"model_metadata": [{"model_path": "a/"}]}`))
	if err != nil {
		t.Fatal(err)
	}
	if err := plain.ValidateOutcomeLogging(LogLevelNone); err != nil {
		t.Errorf("a config without outcomes: %v", err)
	}
}
