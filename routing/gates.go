package routing

import (
	"fmt"
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
// comparison c ("promote_when: 1200 of 10000 shadow executions;
// mean_abs_diff 0.2 above 0.01"), or "" if it holds.
func promoteMissing(p modelconfig.PromoteWhen, c Comparison) string {
	var miss []string
	if c.Executions < p.MinShadowExecutions {
		miss = append(miss, fmt.Sprintf("%d of %d shadow executions", c.Executions, p.MinShadowExecutions))
	}
	if b := p.MaxMeanAbsDiff; b != nil && c.MeanAbsDiff > *b {
		miss = append(miss, fmt.Sprintf("mean_abs_diff %.4g above %g", c.MeanAbsDiff, *b))
	}
	if b := p.MaxErrorRate; b != nil && c.ErrorRate() > *b {
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

// promoteMet describes the comparison on which promote_when p held.
func promoteMet(p modelconfig.PromoteWhen, c Comparison) string {
	met := []string{fmt.Sprintf("%d shadow executions (min %d)", c.Executions, p.MinShadowExecutions)}
	if b := p.MaxMeanAbsDiff; b != nil {
		met = append(met, fmt.Sprintf("mean_abs_diff %.4g ≤ %g", c.MeanAbsDiff, *b))
	}
	if b := p.MaxErrorRate; b != nil {
		met = append(met, fmt.Sprintf("error rate %.4g ≤ %g", c.ErrorRate(), *b))
	}
	if b := p.MaxP99Ratio; b != nil {
		met = append(met, fmt.Sprintf("p99 ratio %.3g ≤ %g", c.P99Ratio, *b))
	}
	return "promote_when: " + strings.Join(met, ", ")
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

// gate returns the state of servable s's release gates after an
// evaluation at now that found the rule outcome v, the stamp since and the
// rollback rb, and the detail to show with it.
func gate(s modelconfig.ContractServable, st ServableState, v ruleOutcome, since time.Time, rb Rollback, now time.Time) (GateState, string) {
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
	case s.RollbackWhen != nil && phaseInPct(s.PhaseIn, since, now) < 100:
		return GateWatching, rollbackWatch(*s.RollbackWhen, st.Live)
	case promotes:
		return GatePromoted, "promote_when held at " + since.UTC().Format(time.RFC3339)
	case s.RollbackWhen != nil:
		return GatePassed, "rollback_when: phased in to 100 % within its bounds; no longer watched"
	}
	return GateNone, ""
}
