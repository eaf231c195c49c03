package routing

import (
	"fmt"
	"math"
	"strings"
	"time"

	"github.com/groveml/grove/conf/modelconfig"
)

// Rollback is a rollback_when decision: when a servable was rolled back
// and why. The zero value is none.
type Rollback struct {
	// At is when the gate rolled the servable back.
	At time.Time
	// Reason names the bound it broke and the figures measured.
	Reason string
}

// IsZero reports whether there is no rollback.
func (r Rollback) IsZero() bool { return r.At.IsZero() }

// DecisionKind names a gate's decision.
type DecisionKind string

// The gates' decisions.
const (
	// DecisionPromoted: promote_when held and the servable became valid.
	DecisionPromoted DecisionKind = "promoted"
	// DecisionRolledBack: rollback_when failed the servable while it phased in.
	DecisionRolledBack DecisionKind = "rolled_back"
)

// Decision is a gate's decision taken at an evaluation, for the caller to
// record in the shared contract state, log and count.
type Decision struct {
	// Release is the servable's release version.
	Release string
	// Kind is what was decided.
	Kind DecisionKind
	// Reason gives the figures the decision was taken on.
	Reason string
	// At is when it was taken: the evaluation's time, which is the
	// promoted servable's new ValidSince.
	At time.Time
}

// GateState is the state of a servable's release gates, for stats.
type GateState string

// The gate states.
const (
	// GateNone: the servable has neither promote_when nor rollback_when.
	GateNone GateState = ""
	// GateWaiting: promote_when does not hold yet (or, with rollback_when
	// only, the servable is not valid yet).
	GateWaiting GateState = "waiting"
	// GatePromoted: promote_when held; the servable is stamped valid.
	GatePromoted GateState = "promoted"
	// GateWatching: rollback_when watches the servable's traffic while it
	// phases in.
	GateWatching GateState = "watching"
	// GatePassed: the servable phased in to 100 % without breaking its
	// rollback_when bounds, which are no longer watched.
	GatePassed GateState = "passed"
	// GateRolledBack: rollback_when failed it; it gets no traffic until
	// the failure is cleared.
	GateRolledBack GateState = "rolled_back"
)

// promoteMissing returns what keeps promote_when p from holding given the
// comparison c and the outcome statistics o (nil: none yet)
// ("promote_when: 1200 of 10000 shadow executions; mean_abs_diff 0.2
// above 0.01"), or "" if it holds.
func promoteMissing(p modelconfig.PromoteWhen, c Comparison, o *OutcomeStats) string {
	miss := outcomesMissing(p, o)
	if c.Executions < p.MinShadowExecutions {
		miss = append(miss, fmt.Sprintf("%d of %d shadow executions", c.Executions, p.MinShadowExecutions))
	}
	// Without min_shadow_executions (an outcome rule may leave it out), a
	// bound on the comparison still needs one execution to be judged on.
	unmeasured := c.Executions == 0 && p.MinShadowExecutions == 0
	switch b := p.MaxMeanAbsDiff; {
	case b == nil:
	case unmeasured:
		miss = append(miss, "mean_abs_diff not measured yet (no shadow execution)")
	case c.MeanAbsDiff > *b:
		miss = append(miss, fmt.Sprintf("mean_abs_diff %.4g above %g", c.MeanAbsDiff, *b))
	}
	switch b := p.MaxErrorRate; {
	case b == nil:
	case unmeasured:
		miss = append(miss, "error rate not measured yet (no shadow execution)")
	case c.ErrorRate() > *b:
		miss = append(miss, fmt.Sprintf("error rate %.4g (%d of %d) above %g", c.ErrorRate(), c.Errors, c.Executions, *b))
	}
	switch b := p.MaxP99Ratio; {
	case b == nil:
	case c.P99Ratio == 0:
		miss = append(miss, "p99 ratio not measured yet")
	case c.P99Ratio > *b:
		miss = append(miss, fmt.Sprintf("p99 ratio %.3g above %g", c.P99Ratio, *b))
	}
	if len(miss) == 0 {
		return ""
	}
	return "promote_when: " + strings.Join(miss, "; ")
}

// outcomesMissing returns what keeps the outcome bounds of p from
// holding given the statistics o, none if they hold or p has none. Each
// bound is judged over at least min_outcomes scored predictions: paired
// with the champion's for logloss_delta and auc_delta, the servable's own
// for calibration.
func outcomesMissing(p modelconfig.PromoteWhen, o *OutcomeStats) []string {
	if !p.HasOutcomeBounds() {
		return nil
	}
	if o == nil {
		return []string{"no outcome statistics yet"}
	}
	var miss []string
	paired := o.VsChampion
	if b := p.MaxLogLossDelta; b != nil {
		conf := p.Confidence()
		switch up := paired.LogLossDeltaUpper(conf); {
		case paired.N < p.MinOutcomes:
			miss = append(miss, fmt.Sprintf("logloss_delta: %d of %d paired outcomes", paired.N, p.MinOutcomes))
		case math.IsNaN(up):
			miss = append(miss, "logloss_delta undefined")
		case up > *b:
			miss = append(miss, fmt.Sprintf("logloss_delta %.4g, upper end %.4g of its %g interval, above %g", paired.LogLossDelta, up, conf, *b))
		}
	}
	if b := p.MinAUCDelta; b != nil {
		switch d := paired.AUCDelta; {
		case paired.N < p.MinOutcomes:
			miss = append(miss, fmt.Sprintf("auc_delta: %d of %d paired outcomes", paired.N, p.MinOutcomes))
		case math.IsNaN(d):
			miss = append(miss, "auc_delta undefined (no positive or no negative outcome)")
		case d < *b:
			miss = append(miss, fmt.Sprintf("auc_delta %.4g below %g", d, *b))
		}
	}
	if r := p.CalibrationBetween; r != nil {
		if why := calibrationOutside(*r, o, p.MinOutcomes); why != "" {
			miss = append(miss, why)
		}
	}
	return miss
}

// calibrationOutside says why the calibration of o is not known to be in
// r over at least min scored predictions, or "" if it is.
func calibrationOutside(r modelconfig.Range, o *OutcomeStats, min int64) string {
	switch c := o.Calibration; {
	case o.Scored < min:
		return fmt.Sprintf("calibration: %d of %d scored outcomes", o.Scored, min)
	case math.IsNaN(c):
		return fmt.Sprintf("calibration undefined over %d scored outcomes (no positive outcome)", o.Scored)
	case !r.Contains(c):
		return fmt.Sprintf("calibration %.4g over %d scored outcomes outside %v", c, o.Scored, r)
	}
	return ""
}

// promoteMet describes the comparison and outcome statistics on which
// promote_when p held.
func promoteMet(p modelconfig.PromoteWhen, c Comparison, o *OutcomeStats) string {
	var met []string
	if p.MinShadowExecutions > 0 {
		met = append(met, fmt.Sprintf("%d shadow executions (min %d)", c.Executions, p.MinShadowExecutions))
	}
	if b := p.MaxMeanAbsDiff; b != nil {
		met = append(met, fmt.Sprintf("mean_abs_diff %.4g ≤ %g", c.MeanAbsDiff, *b))
	}
	if b := p.MaxErrorRate; b != nil {
		met = append(met, fmt.Sprintf("error rate %.4g ≤ %g", c.ErrorRate(), *b))
	}
	if b := p.MaxP99Ratio; b != nil {
		met = append(met, fmt.Sprintf("p99 ratio %.3g ≤ %g", c.P99Ratio, *b))
	}
	if o != nil && p.HasOutcomeBounds() {
		if b := p.MaxLogLossDelta; b != nil {
			met = append(met, fmt.Sprintf("logloss_delta %.4g, upper end %.4g of its %g interval over %d paired outcomes, ≤ %g",
				o.VsChampion.LogLossDelta, o.VsChampion.LogLossDeltaUpper(p.Confidence()), p.Confidence(), o.VsChampion.N, *b))
		}
		if b := p.MinAUCDelta; b != nil {
			met = append(met, fmt.Sprintf("auc_delta %.4g over %d paired outcomes ≥ %g", o.VsChampion.AUCDelta, o.VsChampion.N, *b))
		}
		if r := p.CalibrationBetween; r != nil {
			met = append(met, fmt.Sprintf("calibration %.4g over %d scored outcomes in %v", o.Calibration, o.Scored, *r))
		}
	}
	return "promote_when: " + strings.Join(met, ", ")
}

// rollbackCalibration returns the calibration_between bound of r that the
// outcome statistics o (since the servable became valid) break
// ("rollback_when: calibration 1.5 over 20000 scored outcomes outside
// [0.9, 1.1]"), or "" if none, or if fewer than r's min_outcomes are
// scored, or there are no statistics, or the calibration is undefined.
// Unlike the traffic bounds it is judged whatever the phase-in: outcomes
// arrive a window late, after most phase-ins end.
func rollbackCalibration(r modelconfig.RollbackWhen, o *OutcomeStats) string {
	b := r.CalibrationBetween
	if b == nil || o == nil || o.Scored < r.MinOutcomes || math.IsNaN(o.Calibration) || b.Contains(o.Calibration) {
		return ""
	}
	return fmt.Sprintf("rollback_when: calibration %.4g over %d scored outcomes outside calibration_between %v", o.Calibration, o.Scored, *b)
}

// calibrationWatch describes what rollback_when r's calibration bound
// sees of the outcome statistics o.
func calibrationWatch(r modelconfig.RollbackWhen, o *OutcomeStats) string {
	if o == nil {
		return "rollback_when: no outcome statistics yet"
	}
	return fmt.Sprintf("rollback_when: calibration %.4g over %d scored outcomes (judged from %d) against %v", o.Calibration, o.Scored, r.MinOutcomes, *r.CalibrationBetween)
}

// rollbackBroken returns the bounds of r that the live traffic l breaks
// ("rollback_when: error rate 0.1 (50 of 500 requests) above 0.01"), or
// "" if none, or if fewer than min_requests were seen.
func rollbackBroken(r modelconfig.RollbackWhen, l Live) string {
	if l.Requests < r.MinRequests {
		return ""
	}
	var broken []string
	if b := r.MaxErrorRate; b != nil && l.ErrorRate() > *b {
		broken = append(broken, fmt.Sprintf("error rate %.4g (%d of %d requests) above max_error_rate %g", l.ErrorRate(), l.Errors, l.Requests, *b))
	}
	if b := r.MaxP99Ms; b != nil && msOf(l.P99) > *b {
		broken = append(broken, fmt.Sprintf("p99 %.4gms above max_p99_ms %g", msOf(l.P99), *b))
	}
	if len(broken) == 0 {
		return ""
	}
	return "rollback_when: " + strings.Join(broken, "; ")
}

// rollbackWatch describes what rollback_when r sees of the live traffic l.
func rollbackWatch(r modelconfig.RollbackWhen, l Live) string {
	return fmt.Sprintf("rollback_when: %d requests (judged from %d), error rate %.4g (%d), p99 %.4gms",
		l.Requests, r.MinRequests, l.ErrorRate(), l.Errors, msOf(l.P99))
}

// msOf converts d to milliseconds.
func msOf(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

// promoteRule returns the servable's promote_when rule, if it has one.
func promoteRule(s modelconfig.ContractServable) (modelconfig.PromoteWhen, bool) {
	for _, r := range s.Validity {
		if r.Kind == modelconfig.RulePromoteWhen {
			return r.Promote, true
		}
	}
	return modelconfig.PromoteWhen{}, false
}

// WatchesLive reports whether rollback_when's live bounds (error rate,
// p99) judge servable s of contract c, valid since since, at now: while
// its phase-in ramps, or under a bandit router for as long as it serves,
// since a bandit's exploration never ends (its releases' phase-in is
// immediate).
func WatchesLive(c modelconfig.Contract, s modelconfig.ContractServable, since, now time.Time) bool {
	return c.Router.IsBandit() || phaseInPct(s.PhaseIn, since, now) < 100
}

// gate returns the state of servable s's release gates after an
// evaluation that found the rule outcome v, the stamp since and the
// rollback rb, live telling whether rollback_when's live bounds watch it
// (WatchesLive), and the detail to show with it.
func gate(s modelconfig.ContractServable, st ServableState, v ruleOutcome, since time.Time, rb Rollback, live bool) (GateState, string) {
	_, promotes := promoteRule(s)
	switch {
	case !rb.IsZero():
		return GateRolledBack, rb.Reason
	case promotes && since.IsZero():
		if v.promote != "" {
			return GateWaiting, v.promote
		}
		if !st.Ready {
			return GateWaiting, "promote_when holds; the model is not loaded"
		}
		return GateWaiting, "promote_when holds; " + v.reason
	case s.RollbackWhen != nil && since.IsZero():
		return GateWaiting, "rollback_when: watches the release once it is valid"
	case s.RollbackWhen != nil && live && s.RollbackWhen.MaxErrorRate == nil && s.RollbackWhen.MaxP99Ms == nil:
		return GateWatching, calibrationWatch(*s.RollbackWhen, st.Outcomes)
	case s.RollbackWhen != nil && live:
		detail := rollbackWatch(*s.RollbackWhen, st.Live)
		if s.RollbackWhen.CalibrationBetween != nil {
			detail += "; " + strings.TrimPrefix(calibrationWatch(*s.RollbackWhen, st.Outcomes), "rollback_when: ")
		}
		return GateWatching, detail
	case s.RollbackWhen != nil && s.RollbackWhen.CalibrationBetween != nil:
		return GateWatching, calibrationWatch(*s.RollbackWhen, st.Outcomes)
	case promotes:
		return GatePromoted, "promote_when held at " + since.UTC().Format(time.RFC3339)
	case s.RollbackWhen != nil:
		return GatePassed, "rollback_when: phased in to 100 % within its bounds; no longer watched"
	}
	return GateNone, ""
}
