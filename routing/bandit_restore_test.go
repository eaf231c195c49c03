package routing

import (
	"math"
	"strings"
	"testing"
	"time"

	"github.com/groveml/grove/conf/modelconfig"
)

// banditStep is one update's readings, at t0 plus at.
type banditStep struct {
	at  time.Duration
	cum map[string]Cumulative
}

// clickHistory is a reading every step for span: release a scores 600
// predictions a step, clicked at 1 % until turn and at 3 % after; b
// scores 600 a step at 2 % throughout.
func clickHistory(step, span, turn time.Duration) []banditStep {
	var out []banditStep
	var a, b Cumulative
	for d := step; d <= span; d += step {
		rate := 0.01
		if d > turn {
			rate = 0.03
		}
		a.Count += 600
		a.Positives += uint64(600 * rate)
		b.Count += 600
		b.Positives += 12
		out = append(out, banditStep{at: d, cum: map[string]Cumulative{"a": a, "b": b}})
	}
	return out
}

// valueHistory is clickHistory's numeric twin: a earns a value of 1 per
// prediction until turn and 3 after, b 2 throughout.
func valueHistory(step, span, turn time.Duration) []banditStep {
	var out []banditStep
	var a, b Cumulative
	for d := step; d <= span; d += step {
		v := 1.0
		if d > turn {
			v = 3
		}
		a.Count += 600
		a.Sum += 600 * v
		a.SumSq += 600 * v * v
		b.Count += 600
		b.Sum += 1200
		b.SumSq += 2400
		out = append(out, banditStep{at: d, cum: map[string]Cumulative{"a": a, "b": b}})
	}
	return out
}

// replay runs steps on s and returns the last update's shares.
func replay(s *BanditState, set BanditSettings, steps []banditStep) map[string]float64 {
	var shares map[string]float64
	for _, st := range steps {
		shares, _ = s.Update(at(st.at), modelconfig.RouterThompson, set, st.cum, []string{"a", "b"}, seeded(1))
	}
	return shares
}

// A bandit restarted from the snapshot of its last update, then given the
// readings a live one gets, believes what the live one believes and
// chooses the same shares; whatever the live one folded after the
// snapshot (the readings a restarted node missed) is folded at the
// restart, weighed as new, so that a snapshot older than the restart
// errs by no more than what was scored since it, times the decay of that
// gap.
func TestARestoredBanditBelievesWhatALiveOneBelieves(t *testing.T) {
	clicks := clickHistory(10*time.Minute, 11*time.Hour, 8*time.Hour)
	values := valueHistory(10*time.Minute, 11*time.Hour, 8*time.Hour)
	n := len(clicks)
	withC := func(steps []banditStep, i int, r string, c Cumulative) []banditStep {
		out := make([]banditStep, len(steps))
		copy(out, steps)
		cum := map[string]Cumulative{}
		for k, v := range steps[i].cum {
			cum[k] = v
		}
		cum[r] = c
		out[i] = banditStep{at: steps[i].at, cum: cum}
		return out
	}
	for _, tc := range []struct {
		name  string
		set   BanditSettings
		steps []banditStep
		// snap is the number of steps the snapshot was taken after; the
		// restarted state reads steps[resume:] (resume > snap: it missed
		// some), after the catchUp readings (at steps[resume]'s time).
		snap, resume int
		edit         func(*BanditSnapshot)
		catchUp      []map[string]Cumulative
		// tol bounds the difference of each count; shareTol of each share.
		tol, shareTol float64
	}{
		{name: "binary, restarted at the update after the snapshot", set: binary(time.Hour), steps: clicks, snap: n - 1, resume: n - 1},
		{name: "numeric, restarted at the update after the snapshot", set: numeric(time.Hour), steps: values, snap: n - 1, resume: n - 1},
		{name: "restarted half-way, then every update", set: binary(time.Hour), steps: clicks, snap: n / 2, resume: n / 2},
		{name: "a half-life of 0 keeps every count at full weight", set: binary(0), steps: clicks, snap: n / 2, resume: n / 2},
		{name: "the source catching up reads below the snapshot first", set: binary(time.Hour), steps: clicks, snap: n - 1, resume: n - 1,
			catchUp: []map[string]Cumulative{{"a": {Count: 600, Positives: 18}, "b": {Count: 300, Positives: 6}}, {}}},
		{name: "the source started a release over while the node was down", set: binary(time.Hour),
			steps: withC(clicks, n-1, "a", Cumulative{Count: 500, Positives: 15}), snap: n - 1, resume: n - 1,
			edit: func(s *BanditSnapshot) { a := s.Arms["a"]; a.Seen = Cumulative{}; s.Arms["a"] = a }},
		{name: "a release first read after the snapshot is taken whole", set: binary(time.Hour),
			steps: withC(clicks, n-1, "c", Cumulative{Count: 900, Positives: 40}), snap: n - 1, resume: n - 1},
		// The live state folds the last step's 600 of each release at
		// weight 1 and the 600 before at 2^(−1/6); the restarted one,
		// which missed the step before, folds all 1,200 at weight 1.
		{name: "a snapshot one update older than the restart errs by the decay of what was scored since", set: binary(time.Hour), steps: clicks,
			snap: n - 2, resume: n - 1, tol: 600 * (1 - math.Exp2(-1.0/6)), shareTol: 0.02},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var live, before BanditState
			liveShares := replay(&live, tc.set, tc.steps)
			replay(&before, tc.set, tc.steps[:tc.snap])
			snap := before.Snapshot()
			if tc.edit != nil {
				tc.edit(&snap)
			}
			restarted, err := RestoreBanditState(snap)
			if err != nil {
				t.Fatal(err)
			}
			for _, cum := range tc.catchUp {
				restarted.Update(at(tc.steps[tc.resume].at), modelconfig.RouterThompson, tc.set, cum, []string{"a", "b"}, seeded(1))
			}
			shares := replay(&restarted, tc.set, tc.steps[tc.resume:])

			want, got := live.Snapshot(), restarted.Snapshot()
			if len(got.Arms) != len(want.Arms) || !got.At.Equal(want.At) {
				t.Fatalf("restarted %+v, live %+v", got, want)
			}
			for r, w := range want.Arms {
				g := got.Arms[r]
				if math.Abs(g.N-w.N) > tc.tol || math.Abs(g.Positives-w.Positives) > tc.tol ||
					math.Abs(g.Sum-w.Sum) > 3*tc.tol || math.Abs(g.SumSq-w.SumSq) > 9*tc.tol || g.Seen != w.Seen {
					t.Errorf("release %s: restarted %+v, live %+v (within %g)", r, g, w, tc.tol)
				}
			}
			checkShares(t, shares, liveShares, tc.shareTol)
		})
	}
}

// What a restore is for: a bandit started afresh takes the cumulative
// counts whole, so that a release bad for eight hours and good for the
// last three looks bad, where the decayed counts (half-life 1 h) say it
// is the best (the history TestARestoredBanditBelievesWhatALiveOneBelieves
// restarts in).
func TestABanditStartedAfreshTakesTheCumulativeCountsWhole(t *testing.T) {
	clicks := clickHistory(10*time.Minute, 11*time.Hour, 8*time.Hour)
	set := binary(time.Hour)
	var live BanditState
	liveShares := replay(&live, set, clicks)
	if liveShares["a"] < 0.9 {
		t.Fatalf("live shares %v: a, the best of late, should have the most", liveShares)
	}
	var fresh BanditState
	if shares := replay(&fresh, set, clicks[len(clicks)-1:]); shares["a"] > 0.1 {
		t.Fatalf("a fresh state's shares %v: the whole counts should make b the best", shares)
	}
}

func TestRestoreBanditStateRefusesCountsNoStateHas(t *testing.T) {
	for _, tc := range []struct {
		arm  BanditArm
		want string
	}{
		{BanditArm{N: math.NaN()}, "not all finite"},
		{BanditArm{N: 10, SumSq: math.Inf(1)}, "not all finite"},
		{BanditArm{N: -1}, "negative"},
		{BanditArm{N: 10, SumSq: -1}, "negative"},
		{BanditArm{N: 10, Positives: 11}, "positives 11 above n 10"},
		{BanditArm{N: 10, Seen: Cumulative{Count: 5, Positives: 6}}, "last reading"},
		{BanditArm{N: 10, Seen: Cumulative{Count: 5, Sum: math.NaN()}}, "last reading"},
	} {
		_, err := RestoreBanditState(BanditSnapshot{At: t0, Arms: map[string]BanditArm{"v2": tc.arm}})
		if err == nil || !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), `"v2"`) {
			t.Errorf("%+v: error %v, want one naming v2 and saying %q", tc.arm, err, tc.want)
		}
	}
	s, err := RestoreBanditState(BanditSnapshot{})
	if err != nil {
		t.Fatal(err)
	}
	// An empty snapshot is a state with nothing seen: the first reading is
	// taken whole, undecayed.
	_, post := s.Update(t0, modelconfig.RouterThompson, binary(time.Hour), map[string]Cumulative{"a": {Count: 100, Positives: 3}}, []string{"a"}, seeded(1))
	if post["a"].N != 100 {
		t.Errorf("posterior %+v after an empty snapshot, want N 100", post["a"])
	}
}
