package routing

import (
	"math"
	"strings"
	"testing"
	"time"

	"github.com/groveml/grove/conf/modelconfig"
)

// outcomePromote is the promote_when outcome rule, without
// min_shadow_executions.
func outcomePromote() modelconfig.ValidityRule {
	return modelconfig.ValidityRule{Kind: modelconfig.RulePromoteWhen, Promote: modelconfig.PromoteWhen{
		MinOutcomes: 20000, MaxLogLossDelta: bound(0), LogLossConfidence: bound(0.95), MinAUCDelta: bound(0.002),
		CalibrationBetween: &modelconfig.Range{Lo: 0.9, Hi: 1.1}}}
}

// better is a challenger's statistics that meet outcomePromote: its log
// loss is lower than the champion's with 95 % confidence (upper end
// -0.004 + 1.96 × 0.001 < 0), its AUC 0.005 higher, its calibration 1.02.
func better() OutcomeStats {
	return OutcomeStats{Scored: 25000, AUC: 0.76, LogLoss: 0.41, Brier: 0.12, ECE: 0.01, Calibration: 1.02,
		VsChampion: Paired{N: 24000, LogLossDelta: -0.004, LogLossDeltaSE: 0.001, AUCDelta: 0.005}}
}

// outcomeGated is champion v1 and challenger v2 in shadow with the
// outcome rule.
func outcomeGated() modelconfig.Contract {
	return contract(modelconfig.RouterLatest, sv("v1", immediate), shadowed(sv("v2", linear(10*time.Minute), outcomePromote()), 1))
}

func TestOutcomePromoteWhen(t *testing.T) {
	now := at(time.Hour)
	with := func(f func(*OutcomeStats)) *OutcomeStats {
		o := better()
		f(&o)
		return &o
	}
	for _, tc := range []struct {
		name     string
		outcomes *OutcomeStats
		// want is "" for a promotion, else what the gate detail says.
		want string
	}{
		{"every bound met", with(func(*OutcomeStats) {}), ""},
		{"no outcome statistics yet", nil, "promote_when: no outcome statistics yet"},
		{"too few paired outcomes", with(func(o *OutcomeStats) { o.VsChampion.N = 19999 }),
			"promote_when: logloss_delta: 19999 of 20000 paired outcomes; auc_delta: 19999 of 20000 paired outcomes"},
		{"too few scored outcomes", with(func(o *OutcomeStats) { o.Scored = 100 }), "promote_when: calibration: 100 of 20000 scored outcomes"},
		{"log loss lower but not surely", with(func(o *OutcomeStats) { o.VsChampion.LogLossDeltaSE = 0.003 }),
			"promote_when: logloss_delta -0.004, upper end 0.00188 of its 0.95 interval, above 0"},
		{"log loss higher", with(func(o *OutcomeStats) { o.VsChampion.LogLossDelta = 0.01 }), "logloss_delta 0.01, upper end 0.01196 of its 0.95 interval, above 0"},
		{"log loss delta undefined", with(func(o *OutcomeStats) { o.VsChampion.LogLossDeltaSE = math.NaN() }), "promote_when: logloss_delta undefined"},
		{"auc gain too small", with(func(o *OutcomeStats) { o.VsChampion.AUCDelta = 0.001 }), "promote_when: auc_delta 0.001 below 0.002"},
		{"auc delta undefined", with(func(o *OutcomeStats) { o.VsChampion.AUCDelta = math.NaN() }), "promote_when: auc_delta undefined"},
		{"calibrated too high", with(func(o *OutcomeStats) { o.Calibration = 1.5 }), "promote_when: calibration 1.5 over 25000 scored outcomes outside [0.9, 1.1]"},
		{"calibrated too low", with(func(o *OutcomeStats) { o.Calibration = 0.85 }), "calibration 0.85 over 25000 scored outcomes outside [0.9, 1.1]"},
		{"calibration undefined: no positive outcome", with(func(o *OutcomeStats) { o.Calibration = math.NaN() }),
			"promote_when: calibration undefined over 25000 scored outcomes (no positive outcome)"},
		{"calibration at the range's end", with(func(o *OutcomeStats) { o.Calibration = 1.1 }), ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := Evaluate(outcomeGated(), map[string]ServableState{"v1": champion, "v2": {Ready: true, LoadedAt: t0, Outcomes: tc.outcomes}}, now)
			v2 := status(t, p, "v2")
			if tc.want == "" {
				if !v2.Valid || len(p.Decisions) != 1 || p.Decisions[0].Kind != DecisionPromoted {
					t.Fatalf("v2 = %+v, decisions %+v; want promoted", v2, p.Decisions)
				}
				for _, want := range []string{"over 24000 paired outcomes, ≤ 0", "auc_delta 0.005 over 24000 paired outcomes ≥ 0.002", "scored outcomes in [0.9, 1.1]"} {
					if !strings.Contains(p.Decisions[0].Reason, want) {
						t.Errorf("reason %q does not give %q", p.Decisions[0].Reason, want)
					}
				}
				if strings.Contains(p.Decisions[0].Reason, "shadow executions") {
					t.Errorf("reason %q counts shadow executions, which the rule does not bound", p.Decisions[0].Reason)
				}
				return
			}
			if v2.Valid || len(p.Decisions) != 0 {
				t.Fatalf("v2 = %+v, decisions %+v; want not promoted", v2, p.Decisions)
			}
			if v2.Gate != GateWaiting || !strings.Contains(v2.GateDetail, tc.want) {
				t.Errorf("gate %q %q, want waiting with %q", v2.Gate, v2.GateDetail, tc.want)
			}
		})
	}
}

func TestOutcomeIntervalFollowsTheConfiguredConfidence(t *testing.T) {
	p := Paired{LogLossDelta: -0.004, LogLossDeltaSE: 0.001}
	for _, tc := range []struct{ conf, z float64 }{{0.95, 1.959964}, {0.99, 2.575829}, {0.5, 0.674490}} {
		if got := p.LogLossDeltaUpper(tc.conf); math.Abs(got-(-0.004+tc.z*0.001)) > 1e-9 {
			t.Errorf("upper end at %v = %v, want %v", tc.conf, got, -0.004+tc.z*0.001)
		}
	}
	// The same statistics pass at 95 % and fail at 99.9 %.
	c := outcomeGated()
	c.Servables[1].Validity[0].Promote.LogLossConfidence = bound(0.999)
	o := better()
	o.VsChampion.LogLossDeltaSE = 0.0013 // upper ends: -0.00145 at 95 %, +0.00028 at 99.9 %
	if p := Evaluate(outcomeGated(), map[string]ServableState{"v1": champion, "v2": {Ready: true, LoadedAt: t0, Outcomes: &o}}, at(time.Hour)); !status(t, p, "v2").Valid {
		t.Errorf("not promoted at 95 %%: %s", status(t, p, "v2").GateDetail)
	}
	if p := Evaluate(c, map[string]ServableState{"v1": champion, "v2": {Ready: true, LoadedAt: t0, Outcomes: &o}}, at(time.Hour)); status(t, p, "v2").Valid {
		t.Errorf("promoted at 99.9 %% with an upper end above 0")
	}
}

func TestOutcomeAndShadowBoundsMustBothHold(t *testing.T) {
	c := outcomeGated()
	c.Servables[1].Validity[0].Promote.MinShadowExecutions = 10000
	o := better()
	p := Evaluate(c, map[string]ServableState{"v1": champion, "v2": {Ready: true, LoadedAt: t0, Outcomes: &o, Comparison: Comparison{Executions: 50}}}, at(time.Hour))
	if v2 := status(t, p, "v2"); v2.Valid || !strings.Contains(v2.GateDetail, "50 of 10000 shadow executions") {
		t.Errorf("v2 = %+v, want waiting for its shadow executions", v2)
	}
}

func TestOutcomeRuleWithComparisonBoundsWaitsForAShadowExecution(t *testing.T) {
	c := outcomeGated()
	c.Servables[1].Validity[0].Promote.MaxMeanAbsDiff = bound(0.01)
	c.Servables[1].Validity[0].Promote.MaxErrorRate = bound(0.001)
	o := better()
	// The outcomes are known (the evaluator's, which outlive a restart)
	// but the comparison has not seen a shadow execution yet.
	p := Evaluate(c, map[string]ServableState{"v1": champion, "v2": {Ready: true, LoadedAt: t0, Outcomes: &o}}, at(time.Hour))
	want := "promote_when: mean_abs_diff not measured yet (no shadow execution); error rate not measured yet (no shadow execution)"
	if v2 := status(t, p, "v2"); v2.Valid || v2.GateDetail != want {
		t.Errorf("v2 = %+v, want waiting with %q", v2, want)
	}
	p = Evaluate(c, map[string]ServableState{"v1": champion, "v2": {Ready: true, LoadedAt: t0, Outcomes: &o,
		Comparison: Comparison{Executions: 1, MeanAbsDiff: 0.001}}}, at(time.Hour))
	if v2 := status(t, p, "v2"); !v2.Valid {
		t.Errorf("v2 = %+v, want promoted once a shadow execution agrees", v2)
	}
}

// calibrated is v2, valid since t0 with a linear phase-in of 10 minutes,
// whose rollback_when has calibration_between as its only bound.
func calibrated() modelconfig.Contract {
	v2 := sv("v2", linear(10*time.Minute))
	v2.RollbackWhen = &modelconfig.RollbackWhen{MinOutcomes: 5000, CalibrationBetween: &modelconfig.Range{Lo: 0.8, Hi: 1.25}}
	return contract(modelconfig.RouterFair, sv("v1", immediate), v2)
}

func TestRollbackOnCalibration(t *testing.T) {
	stats := func(scored int64, cal float64) *OutcomeStats {
		return &OutcomeStats{Scored: scored, Calibration: cal, AUC: math.NaN(), LogLoss: math.NaN(), Brier: math.NaN(), ECE: math.NaN()}
	}
	for _, tc := range []struct {
		name     string
		outcomes *OutcomeStats
		// after is how long v2 has been valid: past 10 minutes, its phase-in is over.
		after time.Duration
		// want is the rollback reason, "" for none.
		want, gate string
	}{
		{"outside the range once min_outcomes are scored, while ramping", stats(5000, 1.5), 5 * time.Minute,
			"rollback_when: calibration 1.5 over 5000 scored outcomes outside calibration_between [0.8, 1.25]", ""},
		{"outside the range after the phase-in ended", stats(6000, 0.7), 3 * time.Hour,
			"rollback_when: calibration 0.7 over 6000 scored outcomes outside calibration_between [0.8, 1.25]", ""},
		{"not enough outcomes yet", stats(4999, 1.5), 3 * time.Hour, "", "rollback_when: calibration 1.5 over 4999 scored outcomes (judged from 5000) against [0.8, 1.25]"},
		{"inside the range", stats(6000, 1.1), 3 * time.Hour, "", "rollback_when: calibration 1.1 over 6000 scored outcomes (judged from 5000) against [0.8, 1.25]"},
		{"calibration undefined: no positive outcome", stats(6000, math.NaN()), 3 * time.Hour, "", "rollback_when: calibration NaN over 6000 scored outcomes"},
		{"no outcome statistics yet", nil, 3 * time.Hour, "", "rollback_when: no outcome statistics yet"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			now := at(tc.after)
			st := validSince(t0)
			st.Outcomes = tc.outcomes
			st.Live = Live{Requests: 1e6, Errors: 1e6} // no traffic bound: never judged
			p := Evaluate(calibrated(), map[string]ServableState{"v1": champion, "v2": st}, now)
			v2 := status(t, p, "v2")
			if tc.want == "" {
				if !v2.RolledBack.IsZero() || len(p.Decisions) != 0 || !v2.Valid {
					t.Fatalf("v2 = %+v, decisions %+v; want no rollback", v2, p.Decisions)
				}
				if v2.Gate != GateWatching || !strings.Contains(v2.GateDetail, tc.gate) {
					t.Errorf("gate %q %q, want watching with %q", v2.Gate, v2.GateDetail, tc.gate)
				}
				return
			}
			if v2.Valid || v2.RolledBack.Reason != tc.want || !v2.RolledBack.At.Equal(now) {
				t.Fatalf("v2 = %+v, want rolled back at %v: %s", v2, now, tc.want)
			}
			if len(p.Decisions) != 1 || p.Decisions[0] != (Decision{Release: "v2", Kind: DecisionRolledBack, Reason: tc.want, At: now}) {
				t.Errorf("decisions = %+v", p.Decisions)
			}
		})
	}
}

func TestRollbackTrafficBoundsStillOnlyWatchThePhaseIn(t *testing.T) {
	c := calibrated()
	c.Servables[1].RollbackWhen.MinRequests, c.Servables[1].RollbackWhen.MaxErrorRate = 100, bound(0.01)
	st := validSince(t0)
	st.Live = Live{Requests: 1000, Errors: 500}
	st.Outcomes = &OutcomeStats{Scored: 6000, Calibration: 1}
	if p := Evaluate(c, map[string]ServableState{"v1": champion, "v2": st}, at(time.Hour)); len(p.Decisions) != 0 {
		t.Errorf("error rate judged after the phase-in: %+v", p.Decisions)
	}
	p := Evaluate(c, map[string]ServableState{"v1": champion, "v2": st}, at(time.Minute))
	if len(p.Decisions) != 1 || !strings.Contains(p.Decisions[0].Reason, "error rate 0.5") {
		t.Errorf("decisions while ramping = %+v, want an error-rate rollback", p.Decisions)
	}
}

func TestLiveOutcomeMetrics(t *testing.T) {
	o := &OutcomeStats{Scored: 1000, AUC: 0.75, LogLoss: 0.4, Brier: 0.1, ECE: 0.02, Calibration: 1}
	// A push under the live names and under the pushed names, which must
	// not be read for the live ones.
	pushed := map[string]float64{"outcome_auc": 0.99, "outcome_neg_logloss": 0, "auc": 0.5, "logloss": 9}
	for _, tc := range []struct {
		name     string
		metric   string
		outcomes *OutcomeStats
		th       float64
		// want is "" when min_metric holds, else the reason.
		want string
	}{
		{"live auc above", modelconfig.MetricOutcomeAUC, o, 0.7, ""},
		{"live auc below, whatever was pushed under its name", modelconfig.MetricOutcomeAUC, o, 0.8, "min_metric: outcome_auc 0.75 is below 0.8"},
		{"live log loss is negated", modelconfig.MetricOutcomeNegLogLoss, o, -0.5, ""},
		{"live log loss below", modelconfig.MetricOutcomeNegLogLoss, o, -0.3, "min_metric: outcome_neg_logloss -0.4 is below -0.3"},
		{"live brier", modelconfig.MetricOutcomeNegBrier, o, -0.2, ""},
		{"live ece", modelconfig.MetricOutcomeNegECE, o, -0.01, "min_metric: outcome_neg_ece -0.02 is below -0.01"},
		{"no statistics yet, whatever was pushed", modelconfig.MetricOutcomeAUC, nil, 0.5, "min_metric: no outcome_auc metric: no outcome statistics yet"},
		{"undefined auc", modelconfig.MetricOutcomeAUC, &OutcomeStats{AUC: math.NaN()}, 0.5, "min_metric: no outcome_auc metric"},
		{"pushed auc keeps its name", "auc", o, 0.6, "min_metric: auc 0.5 is below 0.6"},
		{"pushed logloss keeps its name", "logloss", nil, 5, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := contract(modelconfig.RouterFair, sv("v1", immediate, minMetric(tc.metric, tc.th)))
			st := validSince(t0)
			st.Metrics, st.Outcomes = pushed, tc.outcomes
			v1 := status(t, Evaluate(c, map[string]ServableState{"v1": st}, at(time.Hour)), "v1")
			if tc.want == "" {
				if !v1.Valid {
					t.Errorf("v1 not valid: %s", v1.Reason)
				}
				return
			}
			if v1.Valid || v1.Reason != tc.want {
				t.Errorf("v1 valid %v, reason %q; want invalid: %q", v1.Valid, v1.Reason, tc.want)
			}
		})
	}
}

func TestKeepTopRankedByLiveOutcomeMetric(t *testing.T) {
	live := func(auc float64, pushed float64) ServableState {
		s := validSince(t0)
		s.Outcomes = &OutcomeStats{Scored: 1000, AUC: auc}
		s.Metrics = map[string]float64{modelconfig.MetricOutcomeAUC: pushed}
		return s
	}
	c := contract(modelconfig.RouterFair, sv("v1", immediate), sv("v2", immediate), sv("v3", immediate))
	c.Expiration = modelconfig.Expiration{Kind: modelconfig.ExpireKeepTopRanked, Keep: 1, Metric: modelconfig.MetricOutcomeAUC}
	// v2 has the best live AUC; an old push says v1 is best, and v3 has no statistics.
	state := map[string]ServableState{"v1": live(0.70, 0.99), "v2": live(0.78, 0.1), "v3": validSince(t0.Add(time.Minute))}
	checkExpired(t, Evaluate(c, state, at(time.Hour)), "v1 v3")
}
