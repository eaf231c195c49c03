package routing

import (
	"math"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/groveml/grove/conf/modelconfig"
)

// seeded returns a random source for the tests' draws.
func seeded(seed uint64) *rand.Rand { return rand.New(rand.NewPCG(seed, 7)) }

// abc are three releases.
var abc = []string{"a", "b", "c"}

// binary returns the default binary settings with half-life hl.
func binary(hl time.Duration) BanditSettings {
	s := DefaultBanditSettings(false)
	s.HalfLife = hl
	return s
}

// numeric returns the default numeric settings with half-life hl.
func numeric(hl time.Duration) BanditSettings {
	s := DefaultBanditSettings(true)
	s.HalfLife = hl
	return s
}

// near reports whether a and b differ by at most tol.
func near(a, b, tol float64) bool { return math.Abs(a-b) <= tol }

// checkShares fails unless got has exactly want's releases, each within
// tol of its share.
func checkShares(t *testing.T, got, want map[string]float64, tol float64) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("shares %v, want %v", got, want)
	}
	for r, w := range want {
		g, ok := got[r]
		if !ok || !near(g, w, tol) {
			t.Fatalf("shares %v, want %v (within %g)", got, want, tol)
		}
	}
}

func TestBanditShares(t *testing.T) {
	clearlyBest := map[string]Cumulative{"a": {Count: 50000, Positives: 1000}, "b": {Count: 50000, Positives: 1500}, "c": {Count: 50000, Positives: 900}}
	for _, tc := range []struct {
		name     string
		kind     modelconfig.Router
		set      BanditSettings
		cum      map[string]Cumulative
		eligible []string
		want     map[string]float64
		tol      float64
	}{
		{"no outcomes: thompson splits by the prior, equally", modelconfig.RouterThompson, binary(0), nil, abc,
			map[string]float64{"a": 1.0 / 3, "b": 1.0 / 3, "c": 1.0 / 3}, 0.03},
		{"no outcomes: epsilon_greedy ties, equal split", modelconfig.RouterEpsilonGreedy, binary(0), nil, abc,
			map[string]float64{"a": 1.0 / 3, "b": 1.0 / 3, "c": 1.0 / 3}, 1e-12},
		{"no numeric outcomes: thompson splits equally", modelconfig.RouterThompson, numeric(0), nil, abc,
			map[string]float64{"a": 1.0 / 3, "b": 1.0 / 3, "c": 1.0 / 3}, 1e-12},
		{"clearly best of two gets max_share", modelconfig.RouterThompson, binary(0), clearlyBest, []string{"a", "b"},
			map[string]float64{"a": 0.05, "b": 0.95}, 1e-12},
		{"clearly best of three gets what min_share leaves", modelconfig.RouterThompson, binary(0), clearlyBest, abc,
			map[string]float64{"a": 0.05, "b": 0.9, "c": 0.05}, 1e-12},
		{"ineligible best gets nothing", modelconfig.RouterThompson, binary(0), clearlyBest, []string{"a", "c"},
			map[string]float64{"a": 0.95, "c": 0.05}, 1e-12},
		{"one eligible release gets everything", modelconfig.RouterThompson, binary(0), clearlyBest, []string{"c"},
			map[string]float64{"c": 1}, 0},
		{"no eligible release, no shares", modelconfig.RouterThompson, binary(0), clearlyBest, nil, map[string]float64{}, 0},
		{"duplicate eligible releases count once", modelconfig.RouterThompson, binary(0), clearlyBest, []string{"a", "b", "b"},
			map[string]float64{"a": 0.05, "b": 0.95}, 1e-12},
		{"epsilon_greedy: 1-ε+ε/k to the best mean", modelconfig.RouterEpsilonGreedy, binary(0), clearlyBest, abc,
			map[string]float64{"a": 0.1 / 3, "b": 0.9 + 0.1/3, "c": 0.1 / 3}, 1e-12},
		{"epsilon_greedy ignores the share bounds", modelconfig.RouterEpsilonGreedy, func() BanditSettings { s := binary(0); s.Epsilon = 0.02; return s }(), clearlyBest, []string{"a", "b"},
			map[string]float64{"a": 0.01, "b": 0.99}, 1e-12},
		{"epsilon_greedy splits the greedy share between tied releases", modelconfig.RouterEpsilonGreedy, binary(0),
			map[string]Cumulative{"a": {Count: 100, Positives: 10}, "b": {Count: 100, Positives: 10}, "c": {Count: 100}}, abc,
			map[string]float64{"a": 0.45 + 0.1/3, "b": 0.45 + 0.1/3, "c": 0.1 / 3}, 1e-12},
		{"a router that does not follow the outcome splits equally", modelconfig.RouterFair, binary(0), clearlyBest, abc,
			map[string]float64{"a": 1.0 / 3, "b": 1.0 / 3, "c": 1.0 / 3}, 1e-12},
		{"min_share above 1/k: equal split", modelconfig.RouterThompson, func() BanditSettings { s := binary(0); s.MinShare, s.MaxShare = 0.4, 0.9; return s }(), clearlyBest, abc,
			map[string]float64{"a": 1.0 / 3, "b": 1.0 / 3, "c": 1.0 / 3}, 1e-12},
		{"max_share below 1/k: equal split", modelconfig.RouterThompson, func() BanditSettings { s := binary(0); s.MinShare, s.MaxShare = 0, 0.2; return s }(), clearlyBest, abc,
			map[string]float64{"a": 1.0 / 3, "b": 1.0 / 3, "c": 1.0 / 3}, 1e-12},
		{"no bounds: thompson gives the best all", modelconfig.RouterThompson, func() BanditSettings { s := binary(0); s.MinShare, s.MaxShare = 0, 1; return s }(), clearlyBest, abc,
			map[string]float64{"a": 0, "b": 1, "c": 0}, 1e-12},
		{"numeric: the best mean reward gets what min_share leaves", modelconfig.RouterThompson, numeric(0),
			map[string]Cumulative{"a": {Count: 1000, Sum: 1000, SumSq: 2000}, "b": {Count: 1000, Sum: 1500, SumSq: 3250}, "c": {Count: 1000, Sum: 900, SumSq: 1810}}, abc,
			map[string]float64{"a": 0.05, "b": 0.9, "c": 0.05}, 1e-12},
		{"numeric epsilon_greedy", modelconfig.RouterEpsilonGreedy, numeric(0),
			map[string]Cumulative{"a": {Count: 10, Sum: 30, SumSq: 100}, "b": {Count: 10, Sum: -30, SumSq: 100}}, []string{"a", "b"},
			map[string]float64{"a": 0.95, "b": 0.05}, 1e-12},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var s BanditState
			got, post := s.Update(t0, tc.kind, tc.set, tc.cum, tc.eligible, seeded(1))
			checkShares(t, got, tc.want, tc.tol)
			for _, r := range tc.eligible {
				if _, ok := post[r]; !ok {
					t.Errorf("no posterior for eligible release %s: %v", r, post)
				}
			}
		})
	}
}

func TestBanditPosteriorWithoutOutcomesIsThePrior(t *testing.T) {
	var s BanditState
	set := binary(time.Hour)
	set.Prior = [2]float64{1, 5}
	_, post := s.Update(t0, modelconfig.RouterThompson, set, nil, []string{"a"}, seeded(1))
	// Beta(1, 5): mean 1/6, quantile q at 1 − (1−q)^(1/5).
	want := Posterior{Mean: 1.0 / 6, Lower: 1 - math.Pow(0.975, 0.2), Upper: 1 - math.Pow(0.025, 0.2)}
	if p := post["a"]; !near(p.Mean, want.Mean, 1e-12) || !near(p.Lower, want.Lower, 1e-9) || !near(p.Upper, want.Upper, 1e-9) || p.N != 0 {
		t.Errorf("posterior %+v, want %+v", p, want)
	}

	s = BanditState{}
	_, post = s.Update(t0, modelconfig.RouterThompson, numeric(0), nil, []string{"a"}, seeded(1))
	if p := post["a"]; p.Mean != 0 || !math.IsNaN(p.Lower) || !math.IsNaN(p.Upper) || p.N != 0 {
		t.Errorf("numeric posterior %+v, want mean 0 (the prior's) and an unknown (NaN) interval", p)
	}
}

func TestBanditBinaryPosterior(t *testing.T) {
	var s BanditState
	_, post := s.Update(t0, modelconfig.RouterThompson, binary(0), map[string]Cumulative{"a": {Count: 4, Positives: 4}, "b": {Count: 10000, Positives: 200}}, []string{"a", "b"}, seeded(1))
	// Beta(5, 1): quantile q at q^(1/5).
	if p := post["a"]; !near(p.Mean, 5.0/6, 1e-12) || !near(p.Lower, math.Pow(0.025, 0.2), 1e-9) || !near(p.Upper, math.Pow(0.975, 0.2), 1e-9) || p.N != 4 {
		t.Errorf("posterior of 4 clicks in 4: %+v, want Beta(5, 1)'s", p)
	}
	// Beta(201, 9801): mean 0.0201, sd 0.0014; the interval is a little
	// skewed to the right.
	p := post["b"]
	if !near(p.Mean, 201.0/10002, 1e-12) || p.N != 10000 || !(p.Lower > 0.0174 && p.Lower < 0.0176) || !(p.Upper > 0.0229 && p.Upper < 0.0231) ||
		!(p.Upper-p.Mean > p.Mean-p.Lower) {
		t.Errorf("posterior of 200 clicks in 10000: %+v, want mean 0.0201 within about [0.0175, 0.0230]", p)
	}
}

func TestBanditNumericPosterior(t *testing.T) {
	var s BanditState
	// a: 100 rewards of mean 2 and variance 1; b: 100 of mean 1, variance 1.
	cum := map[string]Cumulative{"a": {Count: 100, Sum: 200, SumSq: 100*1 + 100*4}, "b": {Count: 100, Sum: 100, SumSq: 100*1 + 100*1}}
	_, post := s.Update(t0, modelconfig.RouterThompson, numeric(0), cum, []string{"a", "b"}, seeded(1))
	// Prior [0, 1]: mean 200/101; spread (100 + 2·1)/102 = 1, over 101.
	p := post["a"]
	sd := math.Sqrt(1.0 / 101)
	if !near(p.Mean, 200.0/101, 1e-12) || !near(p.Upper-p.Mean, 1.959963984540054*sd, 1e-9) || !near(p.Mean-p.Lower, 1.959963984540054*sd, 1e-9) || p.N != 100 {
		t.Errorf("posterior %+v, want mean %.4f ± 1.96·%.4f", p, 200.0/101, sd)
	}
}

func TestBanditDecayHalvesTheCountsAfterOneHalfLife(t *testing.T) {
	var s BanditState
	cum := map[string]Cumulative{"a": {Count: 1000, Positives: 40}}
	s.Update(t0, modelconfig.RouterThompson, binary(6*time.Hour), cum, []string{"a"}, seeded(1))
	_, post := s.Update(at(6*time.Hour), modelconfig.RouterThompson, binary(6*time.Hour), cum, []string{"a"}, seeded(1))
	if p := post["a"]; !near(p.N, 500, 1e-9) || !near(p.Mean, 21.0/502, 1e-12) {
		t.Errorf("after a half-life: %+v, want N 500 and mean (1+20)/(2+500)", p)
	}
	// New outcomes come in at full weight; two more half-lives quarter the rest.
	cum["a"] = Cumulative{Count: 1100, Positives: 44}
	_, post = s.Update(at(18*time.Hour), modelconfig.RouterThompson, binary(6*time.Hour), cum, []string{"a"}, seeded(1))
	if p := post["a"]; !near(p.N, 125+100, 1e-9) || !near(p.Mean, (1+5+4)/(2.0+225), 1e-12) {
		t.Errorf("two half-lives later, with 100 new: %+v, want N 225 and mean 10/227", p)
	}
	// A clock that goes back neither decays nor grows the counts.
	_, post = s.Update(at(12*time.Hour), modelconfig.RouterThompson, binary(6*time.Hour), cum, []string{"a"}, seeded(1))
	if p := post["a"]; !near(p.N, 225, 1e-9) {
		t.Errorf("an update in the past changed the counts: %+v, want N 225", p)
	}
	// HalfLife 0 keeps everything.
	s = BanditState{}
	s.Update(t0, modelconfig.RouterThompson, binary(0), cum, []string{"a"}, seeded(1))
	_, post = s.Update(at(1000*time.Hour), modelconfig.RouterThompson, binary(0), cum, []string{"a"}, seeded(1))
	if p := post["a"]; p.N != 1100 {
		t.Errorf("half_life 0 decayed the counts: %+v, want N 1100", p)
	}
}

func TestBanditFoldsOnlyTheDifferenceOfTheCumulativeCounts(t *testing.T) {
	update := func(s *BanditState, c Cumulative) Posterior {
		_, post := s.Update(t0, modelconfig.RouterThompson, binary(0), map[string]Cumulative{"a": c}, []string{"a"}, seeded(1))
		return post["a"]
	}
	for _, tc := range []struct {
		name     string
		readings []Cumulative
		n, pos   float64
	}{
		{"growing readings add their differences", []Cumulative{{Count: 100, Positives: 5}, {Count: 250, Positives: 9}, {Count: 250, Positives: 9}}, 250, 9},
		{"a count that went down restarts from the new reading", []Cumulative{{Count: 1000, Positives: 50}, {Count: 300, Positives: 10}}, 1300, 60},
		{"positives that went down restart from the new reading", []Cumulative{{Count: 1000, Positives: 50}, {Count: 1200, Positives: 10}}, 2200, 60},
		{"positives grown more than the count restart from the new reading", []Cumulative{{Count: 1000, Positives: 50}, {Count: 1001, Positives: 60}}, 2001, 110},
		{"a reading with more positives than scored is ignored", []Cumulative{{Count: 100, Positives: 5}, {Count: 10, Positives: 11}, {Count: 150, Positives: 6}}, 150, 6},
		{"a binary reading's NaN sum is not used", []Cumulative{{Count: 100, Positives: 5, Sum: math.NaN(), SumSq: math.Inf(1)}}, 100, 5},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var s BanditState
			var p Posterior
			for _, c := range tc.readings {
				p = update(&s, c)
			}
			if p.N != tc.n || !near(p.Mean, (1+tc.pos)/(2+tc.n), 1e-12) {
				t.Errorf("posterior %+v, want N %v with %v positives", p, tc.n, tc.pos)
			}
		})
	}
}

func TestBanditIgnoresANumericReadingThatIsNotFinite(t *testing.T) {
	var s BanditState
	good := Cumulative{Count: 10, Sum: 20, SumSq: 50}
	for _, bad := range []Cumulative{{Count: 20, Sum: math.NaN(), SumSq: 100}, {Count: 20, Sum: 40, SumSq: math.Inf(1)}, {Count: 20, Sum: 40, SumSq: -1}} {
		s.Update(t0, modelconfig.RouterThompson, numeric(0), map[string]Cumulative{"a": good}, []string{"a", "b"}, seeded(1))
		shares, post := s.Update(t0, modelconfig.RouterThompson, numeric(0), map[string]Cumulative{"a": bad}, []string{"a", "b"}, seeded(1))
		if p := post["a"]; p.N != 10 || !near(p.Mean, 20.0/11, 1e-12) || math.IsNaN(p.Lower) {
			t.Errorf("reading %+v: posterior %+v, want the last good one's (N 10, mean 20/11)", bad, p)
		}
		if sum := shares["a"] + shares["b"]; !near(sum, 1, 1e-12) {
			t.Errorf("reading %+v: shares %v", bad, shares)
		}
	}
}

func TestBanditForgetsAReleaseNeitherReadNorEligible(t *testing.T) {
	var s BanditState
	cum := map[string]Cumulative{"a": {Count: 10}, "b": {Count: 10}}
	s.Update(t0, modelconfig.RouterThompson, binary(0), cum, []string{"a", "b"}, seeded(1))
	// b is ineligible but still read: kept, with its posterior.
	_, post := s.Update(t0, modelconfig.RouterThompson, binary(0), cum, []string{"a"}, seeded(1))
	if _, ok := post["b"]; !ok {
		t.Errorf("b, read but not eligible, has no posterior: %v", post)
	}
	delete(cum, "b")
	_, post = s.Update(t0, modelconfig.RouterThompson, binary(0), cum, []string{"a"}, seeded(1))
	if _, ok := post["b"]; ok {
		t.Errorf("b, neither read nor eligible, is still known: %v", post)
	}
	// Read again, it is taken whole.
	cum["b"] = Cumulative{Count: 30}
	_, post = s.Update(t0, modelconfig.RouterThompson, binary(0), cum, []string{"a"}, seeded(1))
	if post["b"].N != 30 {
		t.Errorf("b read again: %+v, want N 30", post["b"])
	}
}

func TestBanditSettingsOutOfRangeFallBackToTheDefaults(t *testing.T) {
	cum := map[string]Cumulative{"a": {Count: 50000, Positives: 1000}, "b": {Count: 50000, Positives: 1500}}
	for _, tc := range []struct {
		name string
		set  func(*BanditSettings)
		want string
	}{
		{"NaN prior", func(s *BanditSettings) { s.Prior = [2]float64{math.NaN(), 1} }, "bandit prior [NaN, 1]"},
		{"zero prior", func(s *BanditSettings) { s.Prior = [2]float64{} }, "bandit prior [0, 0]"},
		{"negative half-life", func(s *BanditSettings) { s.HalfLife = -time.Hour }, "bandit half_life -1h0m0s is negative"},
		{"NaN min_share", func(s *BanditSettings) { s.MinShare = math.NaN() }, "bandit min_share NaN is not in [0, 1]"},
		{"max_share above 1", func(s *BanditSettings) { s.MaxShare = 2 }, "bandit max_share 2 is not in [0, 1]"},
		{"min_share above max_share", func(s *BanditSettings) { s.MinShare, s.MaxShare = 0.5, 0.4 }, "bandit min_share 0.5 is above max_share 0.4"},
		{"infinite epsilon", func(s *BanditSettings) { s.Epsilon = math.Inf(1) }, "bandit epsilon +Inf is not in [0, 1]"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			set := binary(0)
			tc.set(&set)
			if err := set.Validate(); err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("Validate() = %v, want %q", err, tc.want)
			}
			var s BanditState
			got, post := s.Update(t0, modelconfig.RouterThompson, set, cum, []string{"a", "b"}, seeded(1))
			checkShares(t, got, map[string]float64{"a": 0.05, "b": 0.95}, 1e-12)
			if p := post["b"]; !near(p.Mean, 1501.0/50002, 1e-12) {
				t.Errorf("posterior %+v, want the default prior's mean 1501/50002", p)
			}
			var g BanditState
			got, _ = g.Update(t0, modelconfig.RouterEpsilonGreedy, set, cum, []string{"a", "b"}, seeded(1))
			checkShares(t, got, map[string]float64{"a": 0.05, "b": 0.95}, 1e-12)
		})
	}
	for _, numeric := range []bool{false, true} {
		if err := DefaultBanditSettings(numeric).Validate(); err != nil {
			t.Errorf("the defaults (numeric %v) are refused: %v", numeric, err)
		}
	}
	if err := (BanditSettings{Numeric: true, Prior: [2]float64{-3, 0.5}}).Validate(); err != nil {
		t.Errorf("a numeric prior with a negative mean is refused: %v", err)
	}
}

func TestBanditThompsonIsDeterministicForASeed(t *testing.T) {
	cum := map[string]Cumulative{"a": {Count: 500, Positives: 10}, "b": {Count: 500, Positives: 12}, "c": {Count: 500, Positives: 9}}
	run := func(seed uint64) map[string]float64 {
		var s BanditState
		got, _ := s.Update(t0, modelconfig.RouterThompson, binary(0), cum, abc, seeded(seed))
		return got
	}
	first, again, other := run(3), run(3), run(4)
	for _, r := range abc {
		if first[r] != again[r] {
			t.Fatalf("seed 3 gave %v, then %v", first, again)
		}
	}
	if first["a"] == other["a"] && first["b"] == other["b"] {
		t.Errorf("seeds 3 and 4 gave the same shares %v: the draws do not use the source", first)
	}
	// A nil source is a fixed one.
	var s1, s2 BanditState
	g1, _ := s1.Update(t0, modelconfig.RouterThompson, binary(0), cum, abc, nil)
	g2, _ := s2.Update(t0, modelconfig.RouterThompson, binary(0), cum, abc, nil)
	if g1["a"] != g2["a"] || g1["b"] != g2["b"] {
		t.Errorf("a nil source gave %v, then %v", g1, g2)
	}
}

func TestBoundShares(t *testing.T) {
	for _, tc := range []struct {
		name   string
		p      []float64
		lo, hi float64
		want   []float64
	}{
		{"within the bounds: unchanged", []float64{0.5, 0.3, 0.2}, 0.05, 0.95, []float64{0.5, 0.3, 0.2}},
		{"losers raised to min_share, taken from the winner", []float64{1, 0, 0}, 0.05, 0.95, []float64{0.9, 0.05, 0.05}},
		{"winner capped, the rest shifted equally", []float64{0.5, 0.3, 0.2}, 0, 0.45, []float64{0.45, 0.325, 0.225}},
		{"cap with zeros: the zeros take the rest", []float64{1, 0, 0}, 0, 0.5, []float64{0.5, 0.25, 0.25}},
		{"a raised loser lowers the others equally", []float64{0.6, 0.39, 0.01}, 0.1, 1, []float64{0.555, 0.345, 0.1}},
		{"infeasible min_share: equal split", []float64{0.7, 0.2, 0.1}, 0.5, 1, []float64{1.0 / 3, 1.0 / 3, 1.0 / 3}},
		{"infeasible max_share: equal split", []float64{0.7, 0.2, 0.1}, 0, 0.1, []float64{1.0 / 3, 1.0 / 3, 1.0 / 3}},
		{"two: max_share and min_share meet", []float64{0.99, 0.01}, 0.05, 0.95, []float64{0.95, 0.05}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := boundShares(tc.p, tc.lo, tc.hi)
			for i := range got {
				if !near(got[i], tc.want[i], 1e-12) {
					t.Fatalf("boundShares(%v, %g, %g) = %v, want %v", tc.p, tc.lo, tc.hi, got, tc.want)
				}
			}
		})
	}
}

func TestBetaDrawsHaveTheBetaMeanAndVariance(t *testing.T) {
	rng := seeded(9)
	for _, ab := range [][2]float64{{2, 5}, {0.5, 0.5}, {0.1, 3}, {400, 20000}} {
		a, b := ab[0], ab[1]
		const n = 40000
		var sum, sumSq float64
		for range n {
			x := betaDraw(rng, a, b)
			if !(x >= 0 && x <= 1) {
				t.Fatalf("Beta(%g, %g) drew %v", a, b, x)
			}
			sum += x
			sumSq += x * x
		}
		mean, variance := sum/n, sumSq/n-(sum/n)*(sum/n)
		wantMean, wantVar := a/(a+b), a*b/((a+b)*(a+b)*(a+b+1))
		// Within 5 standard errors of the mean; the variance within 5 %.
		if !near(mean, wantMean, 5*math.Sqrt(wantVar/n)) || !near(variance, wantVar, 0.05*wantVar) {
			t.Errorf("Beta(%g, %g): mean %.5g variance %.5g, want %.5g and %.5g", a, b, mean, variance, wantMean, wantVar)
		}
	}
}

// TestBanditSharesProperties checks, over random counts, eligible sets,
// settings (out of range ones included) and routers, that the shares are
// in [0, 1], sum to 1 over exactly the eligible releases, keep the share
// bounds (as made feasible) under thompson and give at least ε/k under
// epsilon_greedy, that the posteriors are ordered, and that the same
// seed gives the same shares.
func TestBanditSharesProperties(t *testing.T) {
	names := []string{"a", "b", "c", "d", "e", "f"}
	kinds := []modelconfig.Router{modelconfig.RouterThompson, modelconfig.RouterEpsilonGreedy, modelconfig.RouterLatest}
	gen := rand.New(rand.NewPCG(29, 29))
	pick := func(vals ...float64) float64 { return vals[gen.IntN(len(vals))] }
	type step struct {
		now      time.Time
		cum      map[string]Cumulative
		eligible []string
	}
	for iter := range 300 {
		set := BanditSettings{
			Numeric:  gen.IntN(2) == 0,
			Prior:    [2]float64{pick(1, 0.5, 3, -2, 0, math.NaN()), pick(1, 0.2, 10, 0, math.Inf(1))},
			HalfLife: time.Duration(pick(0, 1, 60, 21600, -5)) * time.Second,
			MinShare: pick(0, 0.05, 0.2, 0.4, math.NaN(), 1.5),
			MaxShare: pick(1, 0.95, 0.5, 0.3, 0.1, -1),
			Epsilon:  pick(0, 0.1, 0.5, 1, math.NaN()),
		}
		kind := kinds[gen.IntN(len(kinds))]
		var steps []step
		totals := map[string]Cumulative{}
		for u := range 4 {
			cum := map[string]Cumulative{}
			for _, r := range names {
				if gen.IntN(4) == 0 {
					continue
				}
				c := totals[r]
				if gen.IntN(10) == 0 {
					c = Cumulative{} // reset
				}
				n := uint64(gen.IntN(3000))
				c.Count += n
				if n > 0 {
					c.Positives += uint64(gen.IntN(int(n) + 1))
				}
				for range min(n, 50) {
					x := gen.NormFloat64()*pick(1, 100) + pick(0, 5, -3)
					c.Sum += x * float64(n) / float64(min(n, 50))
					c.SumSq += x * x * float64(n) / float64(min(n, 50))
				}
				if gen.IntN(20) == 0 {
					c.Sum = math.NaN()
				}
				totals[r] = c
				cum[r] = c
			}
			var elig []string
			for _, r := range names {
				if gen.IntN(2) == 0 {
					elig = append(elig, r)
				}
			}
			steps = append(steps, step{now: at(time.Duration(u*gen.IntN(7200)) * time.Second), cum: cum, eligible: elig})
		}
		run := func() []map[string]float64 {
			var s BanditState
			rng := seeded(uint64(iter))
			var out []map[string]float64
			for _, st := range steps {
				shares, post := s.Update(st.now, kind, set, st.cum, st.eligible, rng)
				out = append(out, shares)
				for r, p := range post {
					if math.IsNaN(p.Mean) || math.IsInf(p.Mean, 0) || p.N < 0 || p.Lower > p.Mean || p.Upper < p.Mean {
						t.Fatalf("iteration %d, settings %+v: posterior of %s %+v", iter, set, r, p)
					}
					if !set.Numeric && !(p.Lower >= 0 && p.Upper <= 1) {
						t.Fatalf("iteration %d: binary posterior of %s %+v outside [0, 1]", iter, r, p)
					}
				}
				k := len(st.eligible)
				if len(shares) != k {
					t.Fatalf("iteration %d: shares %v for eligible %v", iter, shares, st.eligible)
				}
				sum := 0.0
				for _, r := range st.eligible {
					v, ok := shares[r]
					if !ok || !(v >= 0 && v <= 1) {
						t.Fatalf("iteration %d: shares %v for eligible %v", iter, shares, st.eligible)
					}
					sum += v
				}
				if k > 0 && !near(sum, 1, 1e-9) {
					t.Fatalf("iteration %d: shares %v sum to %v", iter, shares, sum)
				}
				u := set.usable()
				for _, v := range shares {
					switch {
					case k == 1:
					case kind == modelconfig.RouterThompson && (v < min(u.MinShare, 1/float64(k))-1e-12 || v > max(u.MaxShare, 1/float64(k))+1e-12):
						t.Fatalf("iteration %d: thompson shares %v break the bounds [%g, %g]", iter, shares, u.MinShare, u.MaxShare)
					case kind == modelconfig.RouterEpsilonGreedy && v < u.Epsilon/float64(k)-1e-12:
						t.Fatalf("iteration %d: epsilon_greedy shares %v give less than ε/k, ε %g", iter, shares, u.Epsilon)
					}
				}
			}
			return out
		}
		first, again := run(), run()
		for i := range first {
			for r, v := range first[i] {
				if again[i][r] != v {
					t.Fatalf("iteration %d: the same seed gave %v, then %v", iter, first[i], again[i])
				}
			}
		}
	}
}

func TestFollowShares(t *testing.T) {
	c := contract(modelconfig.RouterThompson, sv("v1", immediate), sv("v2", linear(time.Hour)), sv("v3", immediate, never), sv("v4", immediate))
	state := map[string]ServableState{"v1": validSince(t0), "v2": validSince(t0), "v3": ready, "v4": validSince(t0)}
	now := at(time.Minute) // v2's phase-in is at 1.7 %, which the bandit ignores
	for _, tc := range []struct {
		name   string
		shares map[string]float64
		want   map[string]float64
	}{
		{"the update's shares, as chosen", map[string]float64{"v1": 0.5, "v2": 0.3, "v4": 0.2}, map[string]float64{"v1": 0.5, "v2": 0.3, "v3": 0, "v4": 0.2}},
		{"an ineligible release's share goes to the others in proportion", map[string]float64{"v1": 0.25, "v2": 0.25, "v3": 0.5}, map[string]float64{"v1": 0.5, "v2": 0.5, "v3": 0, "v4": 0}},
		{"no eligible release with a share: equal split", map[string]float64{"v3": 1}, map[string]float64{"v1": 1.0 / 3, "v2": 1.0 / 3, "v3": 0, "v4": 1.0 / 3}},
		{"no update yet: equal split", nil, map[string]float64{"v1": 1.0 / 3, "v2": 1.0 / 3, "v3": 0, "v4": 1.0 / 3}},
		{"NaN and negative shares count as none", map[string]float64{"v1": math.NaN(), "v2": -1, "v4": 0.4}, map[string]float64{"v1": 0, "v2": 0, "v3": 0, "v4": 1}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := Evaluate(c, state, now)
			if got := p.Eligible(); strings.Join(got, ",") != "v1,v2,v4" {
				t.Fatalf("Eligible() = %v, want v1, v2, v4", got)
			}
			p.FollowShares(tc.shares)
			checkFractions(t, p, tc.want)
			sum := 0.0
			for i, s := range p.Shares {
				sum += s.Fraction
				if s.Fraction <= 0 || (i > 0 && s.Release < p.Shares[i-1].Release) {
					t.Fatalf("Shares %+v: not positive in contract order", p.Shares)
				}
			}
			if !near(sum, 1, 1e-12) {
				t.Errorf("Shares %+v sum to %v", p.Shares, sum)
			}
			for _, v := range p.Servables {
				if v.Fraction == 0 && v.Reason == "" || v.Fraction > 0 && v.Reason != "" {
					t.Errorf("%s: fraction %v with reason %q", v.Release, v.Fraction, v.Reason)
				}
			}
		})
	}
}
