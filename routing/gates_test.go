package routing

import (
	"strings"
	"testing"
	"time"

	"github.com/groveml/grove/conf/modelconfig"
)

func bound(v float64) *float64 { return &v }

// promoteWhen is the promote_when rule.
func promoteWhen() modelconfig.ValidityRule {
	return modelconfig.ValidityRule{Kind: modelconfig.RulePromoteWhen, Promote: modelconfig.PromoteWhen{
		MinShadowExecutions: 10000, MaxMeanAbsDiff: bound(0.01), MaxErrorRate: bound(0.001), MaxP99Ratio: bound(1.2)}}
}

// agreeing is a comparison that meets promoteWhen's bounds.
var agreeing = Comparison{Executions: 10000, Errors: 5, MeanAbsDiff: 0.002, P99Ratio: 1.1}

// gated is the contract: champion v1, and challenger v2 shadowing
// it with promote_when, a 10-minute ramp and rollback_when.
func gated() modelconfig.Contract {
	v2 := shadowed(sv("v2", linear(10*time.Minute), promoteWhen()), 1)
	v2.RollbackWhen = &modelconfig.RollbackWhen{MinRequests: 500, MaxErrorRate: bound(0.01), MaxP99Ms: bound(20)}
	return contract(modelconfig.RouterLatest, sv("v1", immediate), v2)
}

// champion is v1 serving since long before t0.
var champion = validSince(t0.Add(-24 * time.Hour))

func TestPromoteWhenPromotesWhenEveryBoundIsMet(t *testing.T) {
	p := Evaluate(gated(), map[string]ServableState{"v1": champion, "v2": {Ready: true, LoadedAt: t0, Comparison: agreeing}}, at(time.Hour))
	v2 := status(t, p, "v2")
	if !v2.Valid || !v2.ValidSince.Equal(at(time.Hour)) {
		t.Fatalf("v2 = %+v, want valid since %v", v2, at(time.Hour))
	}
	if len(p.Decisions) != 1 || p.Decisions[0].Kind != DecisionPromoted || p.Decisions[0].Release != "v2" || !p.Decisions[0].At.Equal(at(time.Hour)) {
		t.Fatalf("decisions = %+v, want v2 promoted", p.Decisions)
	}
	for _, want := range []string{"10000 shadow executions", "mean_abs_diff 0.002 ≤ 0.01", "error rate 0.0005 ≤ 0.001", "p99 ratio 1.1 ≤ 1.2"} {
		if !strings.Contains(p.Decisions[0].Reason, want) {
			t.Errorf("reason %q does not give %q", p.Decisions[0].Reason, want)
		}
	}
	// Its phase-in starts: none of the traffic at once, half 5 minutes on.
	checkFractions(t, p, map[string]float64{"v1": 1, "v2": 0})
	later := Evaluate(gated(), map[string]ServableState{"v1": champion, "v2": {Ready: true, LoadedAt: t0, ValidSince: at(time.Hour), Comparison: agreeing}},
		at(time.Hour+5*time.Minute))
	checkFractions(t, later, map[string]float64{"v1": 0.5, "v2": 0.5})
	if len(later.Decisions) != 0 {
		t.Errorf("the promotion was decided again: %+v", later.Decisions)
	}
	if g := status(t, later, "v2"); g.Gate != GateWatching {
		t.Errorf("gate while ramping = %q (%s), want watching", g.Gate, g.GateDetail)
	}
}

func TestPromoteWhenWaitsForEveryBound(t *testing.T) {
	for _, tc := range []struct {
		name string
		c    Comparison
		want string
	}{
		{"too few executions", Comparison{Executions: 1200, MeanAbsDiff: 0.001, P99Ratio: 1}, "promote_when: 1200 of 10000 shadow executions"},
		{"outputs differ", Comparison{Executions: 10000, MeanAbsDiff: 0.2, P99Ratio: 1}, "promote_when: mean_abs_diff 0.2 above 0.01"},
		{"too many errors", Comparison{Executions: 10000, Errors: 11, P99Ratio: 1}, "promote_when: error rate 0.0011 (11 of 10000) above 0.001"},
		{"too slow", Comparison{Executions: 10000, P99Ratio: 1.5}, "promote_when: p99 ratio 1.5 above 1.2"},
		{"latency unknown", Comparison{Executions: 10000}, "promote_when: p99 ratio not measured yet"},
		{"never compared", Comparison{}, "promote_when: 0 of 10000 shadow executions; p99 ratio not measured yet"},
		{"all at once", Comparison{Executions: 1200, Errors: 600, MeanAbsDiff: 0.2, P99Ratio: 3},
			"promote_when: 1200 of 10000 shadow executions; mean_abs_diff 0.2 above 0.01; error rate 0.5 (600 of 1200) above 0.001; p99 ratio 3 above 1.2"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := Evaluate(gated(), map[string]ServableState{"v1": champion, "v2": {Ready: true, LoadedAt: t0, Comparison: tc.c}}, at(time.Hour))
			v2 := status(t, p, "v2")
			if v2.Valid || !v2.ValidSince.IsZero() || len(p.Decisions) != 0 {
				t.Fatalf("v2 = %+v, decisions %+v; want it waiting", v2, p.Decisions)
			}
			if v2.Reason != tc.want || v2.Gate != GateWaiting || v2.GateDetail != tc.want {
				t.Errorf("reason %q, gate %q %q; want %q", v2.Reason, v2.Gate, v2.GateDetail, tc.want)
			}
			checkFractions(t, p, map[string]float64{"v1": 1})
		})
	}
}

func TestPromoteWhenWithoutBoundsNeedsOnlyTheCount(t *testing.T) {
	c := contract(modelconfig.RouterFair, sv("v1", immediate), shadowed(sv("v2", immediate,
		modelconfig.ValidityRule{Kind: modelconfig.RulePromoteWhen, Promote: modelconfig.PromoteWhen{MinShadowExecutions: 3}}), 1))
	for _, tc := range []struct {
		c     Comparison
		valid bool
	}{{Comparison{Executions: 2}, false}, {Comparison{Executions: 3, Errors: 3, MeanAbsDiff: 9}, true}} {
		if got := status(t, Evaluate(c, map[string]ServableState{"v1": champion, "v2": {Ready: true, Comparison: tc.c}}, t0), "v2").Valid; got != tc.valid {
			t.Errorf("%+v: valid = %v, want %v", tc.c, got, tc.valid)
		}
	}
}

func TestPromotionIsStickyOnceStamped(t *testing.T) {
	// A reload resets the comparison; the stamp keeps the release promoted,
	// and its ramp goes on.
	p := Evaluate(gated(), map[string]ServableState{"v1": champion, "v2": {Ready: true, LoadedAt: at(2 * time.Hour), ValidSince: at(time.Hour)}}, at(time.Hour+11*time.Minute))
	v2 := status(t, p, "v2")
	if !v2.Valid || !v2.ValidSince.Equal(at(time.Hour)) || v2.PhaseInPct != 100 || len(p.Decisions) != 0 {
		t.Fatalf("v2 = %+v, decisions %+v; want still promoted and fully phased in", v2, p.Decisions)
	}
	if v2.Gate != GatePromoted {
		t.Errorf("gate = %q (%s), want promoted", v2.Gate, v2.GateDetail)
	}
	checkFractions(t, p, map[string]float64{"v1": 0, "v2": 1})
}

// ramping is v2 promoted at t0 and phasing in over 10 minutes with the live traffic l.
func ramping(l Live) map[string]ServableState {
	return map[string]ServableState{"v1": champion, "v2": {Ready: true, LoadedAt: t0, ValidSince: t0, Live: l}}
}

func TestRollbackWhen(t *testing.T) {
	for _, tc := range []struct {
		name   string
		live   Live
		now    time.Duration
		reason string // "" for no rollback
	}{
		{"error rate above the bound at min_requests", Live{Requests: 500, Errors: 50}, time.Minute,
			"rollback_when: error rate 0.1 (50 of 500 requests) above max_error_rate 0.01"},
		{"p99 above the bound", Live{Requests: 800, Errors: 1, P99: 32 * time.Millisecond}, time.Minute,
			"rollback_when: p99 32ms above max_p99_ms 20"},
		{"both bounds broken", Live{Requests: 500, Errors: 500, P99: time.Second}, time.Minute,
			"rollback_when: error rate 1 (500 of 500 requests) above max_error_rate 0.01; p99 1000ms above max_p99_ms 20"},
		{"not before min_requests", Live{Requests: 499, Errors: 499, P99: time.Second}, time.Minute, ""},
		{"at the bounds", Live{Requests: 1000, Errors: 10, P99: 20 * time.Millisecond}, time.Minute, ""},
		{"p99 not measured", Live{Requests: 1000}, time.Minute, ""},
		{"not after the phase-in ends", Live{Requests: 500, Errors: 500}, 10 * time.Minute, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			now := at(tc.now)
			p := Evaluate(gated(), ramping(tc.live), now)
			v2 := status(t, p, "v2")
			if tc.reason == "" {
				if !v2.Valid || !v2.RolledBack.IsZero() || len(p.Decisions) != 0 {
					t.Fatalf("v2 = %+v, decisions %+v; want it kept", v2, p.Decisions)
				}
				return
			}
			want := Rollback{At: now, Reason: tc.reason}
			if v2.Valid || v2.RolledBack != want || !v2.ValidSince.IsZero() || !p.ValidSince["v2"].IsZero() {
				t.Fatalf("v2 = %+v; want rolled back %+v with its stamp cleared", v2, want)
			}
			if len(p.Decisions) != 1 || p.Decisions[0] != (Decision{Release: "v2", Kind: DecisionRolledBack, Reason: tc.reason, At: now}) {
				t.Errorf("decisions = %+v", p.Decisions)
			}
			if v2.Gate != GateRolledBack || v2.GateDetail != tc.reason || !strings.HasPrefix(v2.Reason, "rolled back at 2025-01-01T12:01:00Z: rollback_when") {
				t.Errorf("gate %q %q, reason %q", v2.Gate, v2.GateDetail, v2.Reason)
			}
			// No more traffic at this very evaluation, and no shadow copies.
			checkFractions(t, p, map[string]float64{"v1": 1})
			if len(p.Shadows) != 0 {
				t.Errorf("shadows = %+v, want none", p.Shadows)
			}
		})
	}
}

func TestRollbackWhenWatchesOnlyDuringPhaseIn(t *testing.T) {
	watching := status(t, Evaluate(gated(), ramping(Live{Requests: 120, Errors: 1, P99: 4 * time.Millisecond}), at(time.Minute)), "v2")
	if watching.Gate != GateWatching || watching.GateDetail != "rollback_when: 120 requests (judged from 500), error rate 0.008333 (1), p99 4ms" {
		t.Errorf("while ramping: gate %q %q", watching.Gate, watching.GateDetail)
	}
	// Without promote_when, the gate has passed once the ramp is over.
	c := gated()
	c.Servables[1].Validity = nil
	passed := status(t, Evaluate(c, ramping(Live{Requests: 10000, Errors: 10000}), at(10*time.Minute)), "v2")
	if !passed.Valid || passed.Gate != GatePassed {
		t.Errorf("after the ramp: %+v", passed)
	}
	// Before it is valid, it waits.
	c.Servables[1].Validity = []modelconfig.ValidityRule{never}
	if w := status(t, Evaluate(c, map[string]ServableState{"v2": ready}, t0), "v2"); w.Gate != GateWaiting {
		t.Errorf("not valid: gate %q", w.Gate)
	}
}

func TestRolledBackStaysOut(t *testing.T) {
	// The recorded rollback keeps the servable out whatever its rules and
	// counters say: a replica whose own counters are fine, or one after a
	// restart, does not route to it.
	rb := Rollback{At: t0, Reason: "rollback_when: error rate 0.1 (50 of 500 requests) above max_error_rate 0.01"}
	for _, st := range []ServableState{
		{Ready: true, LoadedAt: t0, RolledBack: rb, Comparison: agreeing},
		{Ready: true, LoadedAt: t0, ValidSince: t0, RolledBack: rb},
		{Ready: true, LoadedAt: t0, ValidSince: t0.Add(-time.Hour), RolledBack: rb, Live: Live{Requests: 1e6}},
	} {
		p := Evaluate(gated(), map[string]ServableState{"v1": champion, "v2": st}, at(time.Hour))
		v2 := status(t, p, "v2")
		if v2.Valid || v2.RolledBack != rb || !v2.ValidSince.IsZero() || len(p.Decisions) != 0 || len(p.Shadows) != 0 {
			t.Errorf("%+v: v2 = %+v, decisions %+v, shadows %+v; want it out, nothing decided", st, v2, p.Decisions, p.Shadows)
		}
		checkFractions(t, p, map[string]float64{"v1": 1})
	}
	// Once the caller clears the rollback, the release counts as new.
	p := Evaluate(gated(), map[string]ServableState{"v1": champion, "v2": {Ready: true, LoadedAt: t0, Comparison: agreeing}}, at(time.Hour))
	if v2 := status(t, p, "v2"); !v2.Valid || v2.PhaseInPct != 0 {
		t.Errorf("after clearing: %+v, want valid again from 0 %%", v2)
	}
}

func TestRollbackOfTheLatestFallsBackToThePrevious(t *testing.T) {
	// With the fair router too, the champion takes everything at once.
	c := gated()
	c.Router = modelconfig.RouterFair
	p := Evaluate(c, ramping(Live{Requests: 600, Errors: 60}), at(5*time.Minute))
	checkFractions(t, p, map[string]float64{"v1": 1})
	if u, ok := p.Pick(0.999); !ok || u.Release != "v1" {
		t.Errorf("Pick = %+v %v, want v1", u, ok)
	}
}

// BenchmarkEvaluateGates evaluates the gated contract (the routing of every
// request through it) while rollback_when watches v2's ramp.
func BenchmarkEvaluateGates(b *testing.B) {
	c, state := gated(), ramping(Live{Requests: 300, Errors: 1, P99: 4 * time.Millisecond})
	b.ReportAllocs()
	for b.Loop() {
		Evaluate(c, state, at(time.Minute))
	}
}

// TestRollbackWhenWatchesABanditsReleasesAsLongAsTheyServe: a bandit
// router's releases phase in at once and its exploration never ends, so
// rollback_when's live bounds judge them for as long as they serve, not
// only during a ramp; under a fixed router the same release, phased in
// long ago, is no longer watched.
func TestRollbackWhenWatchesABanditsReleasesAsLongAsTheyServe(t *testing.T) {
	v2 := sv("v2", immediate)
	v2.RollbackWhen = &modelconfig.RollbackWhen{MinRequests: 500, MaxErrorRate: bound(0.01)}
	state := func(l Live) map[string]ServableState {
		return map[string]ServableState{"v1": champion, "v2": {Ready: true, LoadedAt: t0, ValidSince: t0, Live: l}}
	}
	day := at(24 * time.Hour)
	for _, router := range []modelconfig.Router{modelconfig.RouterThompson, modelconfig.RouterEpsilonGreedy} {
		c := contract(router, sv("v1", immediate), v2)
		p := Evaluate(c, state(Live{Requests: 1000, Errors: 1}), day)
		if s := status(t, p, "v2"); !s.Valid || s.Gate != GateWatching || len(p.Decisions) != 0 {
			t.Errorf("%s, within bounds a day after it went valid: %+v, decisions %+v; want valid and watched", router, s, p.Decisions)
		}
		p = Evaluate(c, state(Live{Requests: 500, Errors: 50}), day)
		s := status(t, p, "v2")
		if s.Valid || s.RolledBack.IsZero() || len(p.Decisions) != 1 || p.Decisions[0].Kind != DecisionRolledBack ||
			p.Decisions[0].Reason != "rollback_when: error rate 0.1 (50 of 500 requests) above max_error_rate 0.01" {
			t.Errorf("%s, error rate above the bound a day after it went valid: %+v, decisions %+v; want it rolled back", router, s, p.Decisions)
		}
	}
	p := Evaluate(contract(modelconfig.RouterLatest, sv("v1", immediate), v2), state(Live{Requests: 500, Errors: 50}), day)
	if s := status(t, p, "v2"); !s.Valid || s.Gate != GatePassed || len(p.Decisions) != 0 {
		t.Errorf("fixed router, phased in long ago: %+v, decisions %+v; want valid, no longer watched", s, p.Decisions)
	}
}
