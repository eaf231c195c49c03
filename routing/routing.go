// Package routing is the routing policy of contracts (see modelconfig.Contract):
// given a contract and what is known about each of its servables, it
// decides which servables are valid, what share of the user traffic each
// gets, which get shadow copies, and which have expired.
//
// The package is pure: no I/O, no goroutines, no clock. The caller (the
// router actor) owns the state, passes the current time in, and applies
// the Plan it gets back.
//
// # Validity
//
// A servable is valid when it is ready (loaded) and all of its validity
// rules hold:
//
//   - immediately_valid always holds;
//   - never_valid never holds;
//   - valid_after_ms holds once that long has passed since LoadedAt;
//   - min_served_events holds once ShadowExecutions reaches the count;
//   - min_metric holds while Metrics[metric] (or a live outcome metric,
//     see Release gates) ≥ threshold (a missing or NaN metric does not
//     hold);
//   - promote_when holds once Comparison.Executions reaches
//     min_shadow_executions and Comparison meets every bound given (see
//     Release gates below).
//
// The first evaluation at which a servable is valid stamps its ValidSince
// (Plan.ValidSince, for the caller to keep in the state). Validity is then
// partly sticky:
//
//   - valid_after_ms, min_served_events and promote_when count as held
//     while ValidSince is stamped. They measure progress that should not
//     be undone: a reload after a crash or an in-place update resets
//     LoadedAt and may reset the counters (and the comparison), and that
//     must not take a proven release out of traffic or restart its phase-in
//     (ForestFlow resets its metrics on every settings update, which
//     restarts phase-in and makes an old release look newest).
//   - never_valid and min_metric are checked at every evaluation. They are
//     the operator's and the data's verdicts: flipping a servable to
//     never_valid in the config is how a release is pulled, and a release
//     whose metric falls below its threshold should stop serving. When one
//     of them fails, the stamp is cleared, so a servable that comes back
//     ramps up again from 0 % and counts as newly valid.
//   - Not being ready (loading, restarting after a crash, unloaded because
//     it expired) takes a servable out of traffic but keeps its stamp: its
//     phase-in and its age are unchanged when it is ready again, and
//     expiration keeps ranking it (see below), so unloading an expired
//     servable does not bring it back.
//
// An empty validity list holds (the servable is valid once loaded).
//
// # Release gates
//
// promote_when is a validity rule (above): a shadow challenger whose
// answers agree with the champion's becomes valid, which stamps it, and
// its phase-in starts. The evaluation at which it is stamped reports a
// DecisionPromoted in Plan.Decisions. Being a progress rule, it counts as
// held while the stamp lasts: a reload, which resets the comparison, does
// not un-promote a release. A p99 ratio bound does not hold while the
// ratio is unknown (0).
//
// promote_when's outcome bounds read ServableState.Outcomes: the upper end
// of the logloss_confidence interval of the paired log loss difference
// (Paired.LogLossDeltaUpper) at most max_logloss_delta, the paired AUC
// difference at least min_auc_delta, the calibration inside
// calibration_between, each over at least min_outcomes scored predictions
// (paired ones for the differences). With no statistics (nil), too few
// outcomes or an undefined figure (NaN), they do not hold, and the gate
// detail says which.
//
// rollback_when watches a servable from the evaluation after it is
// stamped valid until its phase-in reaches 100 %: the phase-in is the trial,
// and once a release takes its full share it is the champion, which the
// gate does not pull (it would leave the contract with nothing to fall
// back to). While it watches, once Live.Requests reaches min_requests, a
// Live.ErrorRate above max_error_rate or a Live.P99 above max_p99_ms
// rolls the servable back at that evaluation: it is no longer valid, its
// stamp is cleared, it gets no traffic and no shadow copies, and the
// evaluation reports a DecisionRolledBack with the figures. The caller
// keeps the decision and passes it back as ServableState.RolledBack; while
// it is set the servable stays out of traffic whatever its rules and
// counters say. The caller decides when a rollback no longer applies
// (actors: when the release's model content changes); the servable then
// counts as new: valid again by its rules, ramping up from 0 %.
//
// rollback_when's calibration_between is judged apart from its traffic
// bounds: from the evaluation after the servable is stamped valid, at
// every evaluation whatever its phase-in (outcomes arrive a window late,
// after most phase-ins end), a calibration in Outcomes outside the range
// once min_outcomes are scored rolls it back the same way. No statistics,
// too few outcomes or an undefined calibration never roll back. It may be
// the gate's only bound; the gate then stays watching while the servable
// is valid.
//
// min_metric and keep_top_ranked read the live outcome metrics
// (modelconfig.OutcomeMetrics, higher is better) from Outcomes, never from
// Metrics, so a value pushed under such a name cannot hide the live one;
// pushed metrics keep their own names (auc, logloss, ...).
//
// Status.Gate and Status.GateDetail give each servable's gate state:
// waiting (with what promote_when misses), watching (with the live
// figures), promoted, passed, or rolled back (with the reason).
//
// # Phase-in and routers
//
// A valid servable's phase-in percentage is 100 with immediate, and with
// linear_over_secs 100·(now−ValidSince)/secs clamped to [0, 100], computed
// at now (continuously, not on a tick).
//
// The fair router gives each valid, unexpired servable the fraction
// pct/Σpct: A=100, B=100, C=50 get exactly 40 %, 40 % and 20 %, and a servable
// at 0 % gets none. The latest router gives the newest valid servable
// exactly pct/100 of the traffic and the previous one the rest (ForestFlow
// gives the newest p/(p+100)); the others get none. Newest means the
// latest ValidSince; servables stamped at the same instant (as at start-up)
// are ordered by their position in the contract, the later entry being the
// newer, because load order is an accident and the config order is what
// the operator wrote.
//
// Phase-in only weighs servables against each other; it never leaves a
// contract without an answer: a lone valid servable gets all the traffic
// even while it ramps up (the alternative is refusing every request until
// the ramp ends), and under the fair router, servables that are all at
// exactly 0 % (only at the instant they became valid together) share the
// traffic equally. With no valid servable, Plan.Pick reports false and the
// API answers an error.
//
// # Shadows
//
// Every servable with a shadow setting that is ready, not expired and not
// rolled back, valid or not, gets a copy of each request routed to another
// servable with probability sample_rate (Plan.ShadowTargets).
//
// # Expiration
//
// Expiration ranks the servables whose ValidSince is stamped: valid ones,
// and ones that were valid and are not ready now (restarting, or expired
// and unloaded). Never-valid servables, such as shadow-only challengers and
// releases still waiting for their validity rules, are never expired.
// keep_latest ranks the most recently valid first; keep_top_ranked ranks
// by Metrics[metric], highest first, a missing or NaN metric last, ties
// going to the newer.
//
// A servable expires once N servables ranked above it are established:
// ready and at 100 % phase-in. So a release keeps its share while its
// replacement ramps up (with keep_latest 1 and a linear phase-in, the
// champion retires when the challenger reaches 100 %, not the instant it
// becomes valid and takes everything), and an expired servable stays
// expired when its model is unloaded. Expired servables get no traffic and
// no shadow copies.
//
// Expiration is recomputed at every evaluation rather than remembered:
// if a kept release is pulled (never_valid), fails its min_metric, or stops
// being ready, the best expired one is no longer expired: the caller
// reloads it if it was unloaded, which is the rollback an operator wants.
// (While an expired servable is within its grace period it is still
// loaded, so a short restart of its replacement falls back to it at once.)
// To keep keep_top_ranked from expiring a new release before it has the
// metric, give it a min_metric rule: it is only ranked once it is valid.
//
// # Routers that follow the outcome
//
// The thompson and epsilon_greedy routers (modelconfig.RouterThompson,
// modelconfig.RouterEpsilonGreedy) split the traffic by reward rather than by
// phase-in. The caller keeps a BanditState per contract and, every
// update_every (and when the eligible releases change), passes it the
// evaluator's cumulative counts of each release's served predictions and
// Plan.Eligible; BanditState.Update decays and folds the counts and
// returns the shares and each release's posterior. Between updates the
// caller evaluates the contract as for any router and applies the last
// shares with Plan.FollowShares, so the gates stay in charge: a release
// they stop loses its traffic at once, whatever the last update chose.
// Evaluate itself splits a bandit contract's traffic as the fair router
// does.
//
// # Splitting traffic exactly
//
// Plan.Pick maps a number u in [0, 1) onto the shares' cumulative fractions
// in contract order. Fed with a Sequence (the golden-ratio additive
// recurrence, a low-discrepancy sequence), every share over a run of
// thousands of requests is within a fraction of a percentage point of its
// target, which random draws do not give (their error over 10,000
// requests is about 0.5 percentage point, one standard deviation). Fed with StickyU of a request's
// sticky_key value, the same value goes to the same servable as long as the
// shares are unchanged.
package routing

import (
	"cmp"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/groveml/grove/conf/modelconfig"
)

// ServableState is what the caller observes of one servable of a
// contract; Evaluate takes it keyed by release version. The zero value is a
// servable that is not loaded.
type ServableState struct {
	// Ready reports whether the servable's model is loaded and can serve.
	Ready bool
	// LoadedAt is when the model (its current content) became ready;
	// valid_after_ms counts from it.
	LoadedAt time.Time
	// ShadowExecutions counts the shadow requests the servable has
	// executed; min_served_events compares against it.
	ShadowExecutions int64
	// Metrics are the servable's performance metrics (from the metrics
	// API), for min_metric and keep_top_ranked.
	Metrics map[string]float64
	// ValidSince is when the servable became valid, or zero if it is not.
	// The caller stores the Plan.ValidSince value after each evaluation.
	ValidSince time.Time
	// Comparison is how its shadow answers compare with the champion's
	// (promote_when).
	Comparison Comparison
	// Live is its own user traffic since it became valid (rollback_when).
	Live Live
	// Outcomes are the outcome statistics of its predictions (promote_when
	// and rollback_when's outcome bounds, the live outcome metrics of
	// min_metric and keep_top_ranked); nil: none yet.
	Outcomes *OutcomeStats
	// RolledBack is the rollback_when decision in force for the servable
	// (kept by the caller, in the shared contract state), zero if none: a
	// rolled-back servable gets no traffic.
	RolledBack Rollback
}

// Share is a servable's share of the user traffic.
type Share struct {
	// Release is the servable's release version.
	Release string
	// ModelPath is the model the servable serves.
	ModelPath string
	// PhaseInPct is its phase-in percentage, from 0 to 100.
	PhaseInPct float64
	// Fraction is its share of the contract's user traffic, in (0, 1].
	Fraction float64
}

// Shadow is a servable that receives copies of requests routed to others.
type Shadow struct {
	// Release is the servable's release version.
	Release string
	// ModelPath is the model the servable serves.
	ModelPath string
	// SampleRate is the probability that a request is copied to it.
	SampleRate float64
}

// Status is the outcome of an evaluation for one servable, for stats and
// diagnostics.
type Status struct {
	// Release is the servable's release version.
	Release string
	// ModelPath is the model the servable serves.
	ModelPath string
	// Ready is ServableState.Ready.
	Ready bool
	// Valid reports whether it is ready and all its validity rules hold.
	Valid bool
	// ValidSince is its new ValidSince (zero if it is not valid).
	ValidSince time.Time
	// Expired reports whether the expiration policy retired it.
	Expired bool
	// PhaseInPct is its phase-in percentage if it is valid and not
	// expired, else 0.
	PhaseInPct float64
	// Fraction is its share of the user traffic, from 0 to 1.
	Fraction float64
	// Reason says why it gets no user traffic, or is empty if it gets some.
	Reason string
	// Gate is the state of its release gates (promote_when,
	// rollback_when); GateDetail says what is missing, what is measured,
	// or why it was rolled back.
	Gate       GateState
	GateDetail string
	// RolledBack is the rollback decision in force (taken at this
	// evaluation or before), zero if none.
	RolledBack Rollback
}

// Plan is the routing decision for a contract at one instant.
type Plan struct {
	// Contract is the contract's ID, organization/project/contract_number.
	Contract string
	// Shares are the servables that get user traffic, in contract order;
	// their fractions are positive and sum to 1. Empty when no servable is
	// valid.
	Shares []Share
	// Shadows are the ready, unexpired servables with a shadow setting and
	// a positive sample rate, in contract order.
	Shadows []Shadow
	// Expired are the release versions retired by the expiration policy,
	// in contract order; their models can be unloaded after their grace
	// period.
	Expired []string
	// ValidSince holds, for every servable of the contract, the ValidSince
	// to store in its state (zero: not valid).
	ValidSince map[string]time.Time
	// Servables hold the outcome for every servable, in contract order.
	Servables []Status
	// Decisions are the gates' decisions taken at this evaluation, in
	// contract order: promotions and rollbacks, for the caller to record
	// (ValidSince and ServableState.RolledBack), log and count. They are
	// taken once: the next evaluation, given the recorded state, does not
	// take them again.
	Decisions []Decision
	// RecheckAt is when the plan may change through the passing of time
	// alone: a valid_after_ms delay ends, or (RecheckAt equal to the
	// evaluation time) a phase-in ramp is moving the shares, in which case
	// the caller re-evaluates for every request or at the granularity it
	// can afford. Zero means never. Any change of the state or the contract
	// (readiness, shadow executions, metrics, config) also calls for a new
	// evaluation.
	RecheckAt time.Time
}

// Evaluate decides, at now, how contract c routes its traffic given the
// state of its servables (keyed by release version; a missing entry is a
// servable that is not loaded). See the package documentation for the
// rules.
func Evaluate(c modelconfig.Contract, state map[string]ServableState, now time.Time) Plan {
	n := len(c.Servables)
	p := Plan{
		Contract:   c.ID(),
		ValidSince: make(map[string]time.Time, n),
		Servables:  make([]Status, n),
	}
	// Validity.
	for i, s := range c.Servables {
		st := state[s.ReleaseVersion]
		since := st.ValidSince
		v := validity(s.Validity, st, now, !since.IsZero())
		if v.revoked {
			since = time.Time{}
		}
		valid := st.Ready && v.holds
		rb := st.RolledBack
		if rb.IsZero() && valid && !since.IsZero() && s.RollbackWhen != nil {
			var why string
			if WatchesLive(c, s, since, now) {
				why = rollbackBroken(*s.RollbackWhen, st.Live)
			}
			if why == "" {
				why = rollbackCalibration(*s.RollbackWhen, st.Outcomes)
			}
			if why != "" {
				rb = Rollback{At: now, Reason: why}
				p.Decisions = append(p.Decisions, Decision{Release: s.ReleaseVersion, Kind: DecisionRolledBack, Reason: why, At: now})
			}
		}
		if !rb.IsZero() {
			valid, since = false, time.Time{}
		}
		if valid && since.IsZero() {
			since = now
			if pw, ok := promoteRule(s); ok {
				p.Decisions = append(p.Decisions, Decision{Release: s.ReleaseVersion, Kind: DecisionPromoted, Reason: promoteMet(pw, st.Comparison, st.Outcomes), At: now})
			}
		}
		p.Servables[i] = Status{Release: s.ReleaseVersion, ModelPath: s.ModelPath, Ready: st.Ready, Valid: valid, ValidSince: since, RolledBack: rb}
		p.Servables[i].Gate, p.Servables[i].GateDetail = gate(s, st, v, since, rb, WatchesLive(c, s, since, now))
		p.ValidSince[s.ReleaseVersion] = since
		switch {
		case !rb.IsZero():
			p.Servables[i].Reason = "rolled back at " + rb.At.UTC().Format(time.RFC3339) + ": " + rb.Reason
		case !st.Ready:
			p.Servables[i].Reason = "not loaded"
		case !v.holds:
			p.Servables[i].Reason = v.reason
		}
		if st.Ready && !v.holds && !v.wakeAt.IsZero() {
			p.RecheckAt = earliest(p.RecheckAt, v.wakeAt)
		}
	}

	// Expiration, over the stamped servables in rank order.
	var stamped []int
	pct := make([]float64, n)
	for i, v := range p.Servables {
		if !v.ValidSince.IsZero() {
			stamped = append(stamped, i)
			pct[i] = phaseInPct(c.Servables[i].PhaseIn, v.ValidSince, now)
		}
	}
	newerFirst := func(a, b int) int {
		if c := p.Servables[b].ValidSince.Compare(p.Servables[a].ValidSince); c != 0 {
			return c
		}
		return cmp.Compare(b, a)
	}
	e := c.Expiration
	if e.Kind == modelconfig.ExpireKeepLatest || e.Kind == modelconfig.ExpireKeepTopRanked {
		switch e.Kind {
		case modelconfig.ExpireKeepLatest:
			slices.SortFunc(stamped, newerFirst)
		case modelconfig.ExpireKeepTopRanked:
			metric := func(i int) (float64, bool) {
				return metricOf(state[c.Servables[i].ReleaseVersion], e.Metric)
			}
			slices.SortFunc(stamped, func(a, b int) int {
				va, oka := metric(a)
				vb, okb := metric(b)
				switch {
				case oka && okb && va != vb:
					return cmp.Compare(vb, va)
				case oka != okb:
					if oka {
						return -1
					}
					return 1
				}
				return newerFirst(a, b)
			})
		}
		reason := fmt.Sprintf("expired by %s %d", e.Kind, e.Keep)
		if e.Kind == modelconfig.ExpireKeepTopRanked {
			reason += " on " + e.Metric
		}
		// A servable expires once N servables ranked above it are
		// established: ready and fully phased in.
		established := 0
		var rampEnd time.Time // when a ramp above ends
		for _, i := range stamped {
			v := &p.Servables[i]
			if !rampEnd.IsZero() {
				p.RecheckAt = earliest(p.RecheckAt, rampEnd) // v may expire then
			}
			switch {
			case established >= e.Keep:
				v.Expired = true
				v.Reason = reason
			case v.Ready && pct[i] >= 100:
				established++
			case v.Ready:
				rampEnd = earliest(rampEnd, v.ValidSince.Add(c.Servables[i].PhaseIn.Over))
			}
		}
	}

	// Phase-in and traffic fractions over the valid, unexpired servables.
	var live []int
	for i := range c.Servables {
		v := &p.Servables[i]
		if v.Expired {
			p.Expired = append(p.Expired, v.Release)
			continue
		}
		if v.Valid {
			v.PhaseInPct = pct[i]
			live = append(live, i)
		}
	}
	ramping := func(i int) bool { return p.Servables[i].PhaseInPct < 100 }
	switch c.Router {
	case modelconfig.RouterLatest:
		slices.SortFunc(live, newerFirst)
		switch len(live) {
		case 0:
		case 1:
			p.Servables[live[0]].Fraction = 1
		default:
			newest, previous := &p.Servables[live[0]], &p.Servables[live[1]]
			newest.Fraction = newest.PhaseInPct / 100
			previous.Fraction = 1 - newest.Fraction
			for _, i := range live[2:] {
				p.Servables[i].Reason = "latest router: neither the newest nor the previous valid servable"
			}
			if newest.Fraction == 0 {
				newest.Reason = "phase-in at 0 %"
			}
			if previous.Fraction == 0 {
				previous.Reason = "latest router: the newest valid servable takes all the traffic"
			}
			if ramping(live[0]) {
				p.RecheckAt = now
			}
		}
	default: // modelconfig.RouterFair
		total := 0.0
		for _, i := range live {
			total += p.Servables[i].PhaseInPct
		}
		for _, i := range live {
			v := &p.Servables[i]
			switch {
			case total > 0:
				v.Fraction = v.PhaseInPct / total
			default: // all at exactly 0 %: they became valid at this instant
				v.Fraction = 1 / float64(len(live))
			}
			if v.Fraction == 0 {
				v.Reason = "phase-in at 0 %"
			}
			if len(live) > 1 && ramping(i) {
				p.RecheckAt = now
			}
		}
	}
	for i, s := range c.Servables {
		v := p.Servables[i]
		if v.Fraction > 0 {
			p.Shares = append(p.Shares, Share{Release: v.Release, ModelPath: v.ModelPath, PhaseInPct: v.PhaseInPct, Fraction: v.Fraction})
		}
		if s.Shadow != nil && s.Shadow.SampleRate > 0 && v.Ready && !v.Expired && v.RolledBack.IsZero() {
			p.Shadows = append(p.Shadows, Shadow{Release: v.Release, ModelPath: v.ModelPath, SampleRate: s.Shadow.SampleRate})
		}
	}
	return p
}

// ruleOutcome is the verdict of a servable's validity rules.
type ruleOutcome struct {
	// holds reports whether every rule holds.
	holds bool
	// revoked reports whether a rule checked at every evaluation
	// (never_valid, min_metric, or an unknown rule) failed, which clears
	// the ValidSince stamp.
	revoked bool
	// reason describes the failing rules.
	reason string
	// wakeAt is when a pending valid_after_ms rule will hold, or zero.
	wakeAt time.Time
	// promote is what keeps a promote_when rule from holding, if one does.
	promote string
}

// validity applies the validity rules to st at now; stamped says whether
// the servable has a ValidSince stamp, which makes the progress rules
// (valid_after_ms, min_served_events, promote_when) hold.
func validity(rules []modelconfig.ValidityRule, st ServableState, now time.Time, stamped bool) ruleOutcome {
	out := ruleOutcome{holds: true}
	var reasons []string
	fail := func(recheck bool, format string, args ...any) {
		out.holds = false
		out.revoked = out.revoked || recheck
		reasons = append(reasons, fmt.Sprintf(format, args...))
	}
	for _, r := range rules {
		switch r.Kind {
		case modelconfig.RuleImmediatelyValid:
		case modelconfig.RuleNeverValid:
			fail(true, "never_valid")
		case modelconfig.RuleValidAfterMs:
			switch {
			case stamped:
			case !st.Ready || st.LoadedAt.IsZero():
				fail(false, "valid_after_ms: waiting for the model to load")
			case now.Sub(st.LoadedAt) < r.After:
				fail(false, "valid_after_ms: loaded %v ago, needs %v", now.Sub(st.LoadedAt), r.After)
				out.wakeAt = earliest(out.wakeAt, st.LoadedAt.Add(r.After))
			}
		case modelconfig.RuleMinServedEvents:
			if !stamped && st.ShadowExecutions < r.Count {
				fail(false, "min_served_events: %d of %d shadow executions", st.ShadowExecutions, r.Count)
			}
		case modelconfig.RulePromoteWhen:
			if !stamped {
				if why := promoteMissing(r.Promote, st.Comparison, st.Outcomes); why != "" {
					fail(false, "%s", why)
					out.promote = why
				}
			}
		case modelconfig.RuleMinMetric:
			v, ok := metricOf(st, r.Metric)
			switch {
			case !ok && modelconfig.IsOutcomeMetric(r.Metric) && st.Outcomes == nil:
				fail(true, "min_metric: no %s metric: no outcome statistics yet", r.Metric)
			case !ok:
				fail(true, "min_metric: no %s metric", r.Metric)
			case v < r.Threshold:
				fail(true, "min_metric: %s %v is below %v", r.Metric, v, r.Threshold)
			}
		default:
			fail(true, "unknown validity rule %q", r.Kind)
		}
	}
	out.reason = strings.Join(reasons, "; ")
	return out
}

// phaseInPct returns the phase-in percentage, at now, of a servable valid
// since the given time.
func phaseInPct(p modelconfig.PhaseIn, since, now time.Time) float64 {
	if p.Kind != modelconfig.PhaseInLinear || p.Over <= 0 {
		return 100
	}
	pct := 100 * float64(now.Sub(since)) / float64(p.Over)
	return min(max(pct, 0), 100)
}

// earliest returns the earlier of two times, zero meaning none.
func earliest(a, b time.Time) time.Time {
	if a.IsZero() || (!b.IsZero() && b.Before(a)) {
		return b
	}
	return a
}

// Pick returns the share that answers a request given u in [0, 1): the
// share whose interval of the cumulative fractions, in the order of
// Shares, holds u. With u uniform each share is picked with exactly its
// fraction; with u from a Sequence the split is exact up to a fraction of a
// percentage point over any run of requests; with u from StickyU the same
// value picks the same share while the shares are unchanged. Values
// outside [0, 1) are clamped. Pick reports false when no servable is valid.
func (p *Plan) Pick(u float64) (Share, bool) {
	if len(p.Shares) == 0 {
		return Share{}, false
	}
	acc := 0.0
	for _, s := range p.Shares {
		acc += s.Fraction
		if u < acc {
			return s, true
		}
	}
	return p.Shares[len(p.Shares)-1], true // u ≥ 1, NaN, or rounding at the top
}

// ShadowTargets returns the servables that get a shadow copy of a request
// answered by the release picked (which gets none; "" if none answered):
// each of Shadows with probability SampleRate, decided by comparing a draw
// in [0, 1) with it. draw is called once per shadow with a sample rate
// strictly between 0 and 1; use a source independent of the one fed to
// Pick, or the two decisions are correlated. It returns nil if there are
// none.
func (p *Plan) ShadowTargets(picked string, draw func() float64) []Shadow {
	var out []Shadow
	for _, s := range p.Shadows {
		if s.Release == picked {
			continue
		}
		if s.SampleRate >= 1 || (s.SampleRate > 0 && draw() < s.SampleRate) {
			out = append(out, s)
		}
	}
	return out
}

// Sequence yields the golden-ratio additive recurrence u(n) = frac(n·φ),
// a low-discrepancy sequence in [0, 1): fed to Plan.Pick, any run of N
// requests splits within O(log N / N) of the target fractions (over 10,000
// requests, well within 0.1 percentage point), even when the shares change
// between requests. The state is a 64-bit fixed-point fraction, so the
// sequence does not drift however long it runs. The zero value starts at
// 0. A Sequence is not safe for concurrent use; the router actor keeps one
// per contract.
type Sequence struct {
	x uint64
}

// golden is 2^64/φ, the fixed-point step of Sequence.
const golden = 0x9E3779B97F4A7C15

// Next returns the next number of the sequence, in [0, 1).
func (s *Sequence) Next() float64 {
	u := float64(s.x>>11) / (1 << 53)
	s.x += golden
	return u
}

// StickyU maps a sticky key value (the request config named by the
// contract's sticky_key) to [0, 1) for Plan.Pick: the same value always
// gives the same number, on every replica and across restarts, and
// distinct values spread uniformly. It is FNV-1a 64 followed by the
// MurmurHash3 64-bit finaliser (FNV-1a alone spreads similar short keys
// poorly in its high bits); changing it would move sticky callers.
func StickyU(value string) float64 {
	h := uint64(14695981039346656037) // FNV-1a 64 offset basis
	for i := 0; i < len(value); i++ {
		h ^= uint64(value[i])
		h *= 1099511628211 // FNV-1a 64 prime
	}
	h ^= h >> 33
	h *= 0xff51afd7ed558ccd
	h ^= h >> 33
	h *= 0xc4ceb9fe1a85ec53
	h ^= h >> 33
	return float64(h>>11) / (1 << 53)
}
