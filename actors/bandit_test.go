package actors

import (
	"context"
	"fmt"
	"math"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/groveml/grove/routing"
	"github.com/groveml/grove/routing/quality"
)

// banditConfig is a contract of three valid releases behind router, which
// learns clicks; v2's validity is given.
func banditConfig(router, v2Validity string) string {
	bandit := `{"reward": "click", "update_every": "10s"}`
	return fmt.Sprintf(`{"model_metadata": [{"model_path": "a/"}, {"model_path": "b/"}, {"model_path": "c/"}],
 "contracts": [{"organization": "ads", "project": "pctr", "contract_number": 1, "router": %q, "bandit": %s,
   "outcomes": {"label": "click", "window": "30m"},
   "servables": [
     {"release_version": "v1", "model_path": "a/", "logging": {"log_level": "FULL"}},
     {"release_version": "v2", "model_path": "b/", "logging": {"log_level": "FULL"}, "validity": [%s]},
     {"release_version": "v3", "model_path": "c/", "logging": {"log_level": "FULL"}}]}]}`, router, bandit, v2Validity)
}

// servedClicks is an OutcomeSource of each release's served clicks, which
// the test changes.
type servedClicks struct {
	mu     sync.Mutex
	counts map[string][2]uint64 // release → scored, clicked
}

func (s *servedClicks) Outcomes(contract, release string, shadow bool, _ string) (*routing.OutcomeStats, *quality.OutcomeStats) {
	s.mu.Lock()
	defer s.mu.Unlock()
	c, ok := s.counts[release]
	if !ok || shadow {
		return nil, nil
	}
	return nil, &quality.OutcomeStats{SinceValid: quality.OutcomeFigures{Count: c[0], BinaryFigures: &quality.BinaryFigures{Positives: c[1]}}}
}

func (s *servedClicks) set(release string, scored, clicked uint64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.counts[release] = [2]uint64{scored, clicked}
}

// TestThompsonRouterFollowsTheClicksAndTheGatesStayInCharge: with no
// outcomes the three releases split the traffic evenly; once v2's click
// rate is clearly the best, the next update gives it the most (all but
// the others' min_share) and the stats and grove_router_share say so,
// with each release's posterior; made invalid, v2 drops to nothing at once
// and the others take its share in proportion.
func TestThompsonRouterFollowsTheClicksAndTheGatesStayInCharge(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		src := &servedClicks{counts: map[string][2]uint64{}}
		w := newWorld(t, banditConfig("thompson", `{"immediately_valid": {}}`), map[string]faultySpec{"a/": version(1), "b/": version(2), "c/": version(3)},
			func(_ *world, o *Options) { o.Outcomes = src })
		defer w.stop()
		time.Sleep(5 * time.Second)
		synctest.Wait()
		shares := func() map[string]float64 { return trafficShares(t, w, "ads/pctr/1") }
		// Thompson's probabilities are estimated from 4,000 draws: within
		// 0.03 of a third.
		for rv, s := range shares() {
			if math.Abs(s-1.0/3) > 0.03 {
				t.Fatalf("%s: share %v with no outcomes, want about a third", rv, s)
			}
		}

		src.set("v1", 100_000, 2_000)
		src.set("v2", 100_000, 2_600)
		src.set("v3", 100_000, 1_800)
		time.Sleep(11 * time.Second) // past update_every
		synctest.Wait()
		got := shares()
		if math.Abs(got["v2"]-0.9) > 1e-9 || math.Abs(got["v1"]-0.05) > 1e-9 || math.Abs(got["v3"]-0.05) > 1e-9 {
			t.Fatalf("shares %v, want v2 0.9 and the others their min_share 0.05", got)
		}
		stats, _ := w.sys.ContractStats("ads/pctr/1")
		b := stats[1].Bandit
		if b == nil || b.Mean == nil || math.Abs(*b.Mean-2601.0/100_002) > 1e-9 || b.CI95 == nil || b.CI95[0] >= *b.Mean || b.CI95[1] <= *b.Mean ||
			b.N != 100_000 || math.Abs(b.ChosenShare-0.9) > 1e-9 {
			t.Errorf("v2's bandit stats %+v, want its Beta(2601, 97401) posterior and share 0.9", b)
		}
		if m := w.metric("grove_router_share", map[string]string{"contract": "ads/pctr/1", "release": "v2"}); math.Abs(m-0.9) > 1e-9 {
			t.Errorf("grove_router_share of v2 = %v, want 0.9", m)
		}

		// The gates stay in charge: v2 made invalid drops out at once (the
		// bandit updates when the releases it may share change), and v1,
		// now the best, gets all but v3's min_share.
		w.setConfig(banditConfig("thompson", `{"never_valid": {}}`))
		got = shares()
		if got["v2"] != 0 || math.Abs(got["v1"]-0.95) > 1e-9 || math.Abs(got["v3"]-0.05) > 1e-9 {
			t.Errorf("shares %v after v2 became invalid, want v2 0, v1 0.95 and v3 0.05", got)
		}
		for _, s := range stats {
			if s.Bandit != nil && strings.Contains(s.Reason, "bandit") && s.TrafficShare > 0 {
				t.Errorf("%s gets traffic and says %q", s.Release, s.Reason)
			}
		}
	})
}

// servedValues is an OutcomeSource of each release's served numeric
// outcomes: count, sum and sum of squares of the values.
type servedValues map[string][3]float64

func (s servedValues) Outcomes(contract, release string, shadow bool, _ string) (*routing.OutcomeStats, *quality.OutcomeStats) {
	v, ok := s[release]
	if !ok || shadow {
		return nil, nil
	}
	return nil, &quality.OutcomeStats{SinceValid: quality.OutcomeFigures{Count: uint64(v[0]),
		NumericFigures: &quality.NumericFigures{LabelSum: v[1], LabelSumSq: v[2]}}}
}

// TestEpsilonGreedyRouterFollowsTheMeanValue: with a numeric reward (a
// purchase's value), epsilon_greedy gives 1 − ε + ε/3 to the release of
// the highest mean value and ε/3 to each other, and the stats show each
// release's mean.
func TestEpsilonGreedyRouterFollowsTheMeanValue(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		cfg := strings.NewReplacer(`"router": "thompson"`, `"router": "epsilon_greedy"`, `"window": "30m"}`, `"window": "30m", "kind": "numeric"}`,
			`"reward": "click", "update_every": "10s"`, `"reward": "click", "epsilon": 0.3, "update_every": "10s"`).Replace(banditConfig("thompson", `{"immediately_valid": {}}`))
		// v3's values average 12.5, v1's 10 and v2's 8 (1,000 each, spread 2).
		src := servedValues{"v1": {1000, 10_000, 104_000}, "v2": {1000, 8_000, 68_000}, "v3": {1000, 12_500, 160_250}}
		w := newWorld(t, cfg, map[string]faultySpec{"a/": version(1), "b/": version(2), "c/": version(3)},
			func(_ *world, o *Options) { o.Outcomes = src })
		defer w.stop()
		time.Sleep(5 * time.Second)
		synctest.Wait()
		stats, err := w.sys.ContractStats("ads/pctr/1")
		if err != nil {
			t.Fatal(err)
		}
		want := map[string]float64{"v1": 0.1, "v2": 0.1, "v3": 0.8}
		for _, s := range stats {
			if math.Abs(s.TrafficShare-want[s.Release]) > 1e-9 {
				t.Errorf("%s: share %v, want %v", s.Release, s.TrafficShare, want[s.Release])
			}
		}
		// The prior mean 0 weighs one observation against the (decayed)
		// count of values.
		if b := stats[2].Bandit; b == nil || b.Mean == nil || b.N < 999 || math.Abs(*b.Mean-12.5*b.N/(b.N+1)) > 1e-9 {
			t.Errorf("v3's bandit stats %+v, want its mean value, 12.5 against the prior's 0", b)
		}
	})
}

// TestStickyCallersStayOnOneReleaseBetweenBanditUpdates: under a bandit
// router a contract's sticky_key still holds a caller to one release
// between updates, and callers spread over the releases by the shares the
// last update chose.
func TestStickyCallersStayOnOneReleaseBetweenBanditUpdates(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		src := &servedClicks{counts: map[string][2]uint64{}}
		src.set("v1", 100_000, 2_000)
		src.set("v2", 100_000, 2_600)
		src.set("v3", 100_000, 1_800)
		cfg := strings.Replace(banditConfig("thompson", `{"immediately_valid": {}}`), `"contract_number": 1,`, `"contract_number": 1, "sticky_key": "user",`, 1)
		w := newWorld(t, cfg, map[string]faultySpec{"a/": version(1), "b/": version(2), "c/": version(3)},
			func(_ *world, o *Options) { o.Outcomes = src })
		defer w.stop()
		synctest.Wait()
		on := map[string]string{} // user → release
		count := map[string]int{}
		for round := range 5 {
			for u := range 200 {
				user := fmt.Sprintf("user-%d", u)
				res, rv, err := w.sys.Score(context.Background(), "ads/pctr/1", "", Request{API: "test", Inputs: scalar(t, 1), Configs: map[string]string{"user": user}})
				if err != nil || res.Err != nil {
					t.Fatal(err, res.Err)
				}
				if round == 0 {
					on[user] = rv
					count[rv]++
				} else if on[user] != rv {
					t.Fatalf("round %d: %s moved from %s to %s between updates", round, user, on[user], rv)
				}
			}
		}
		// Shares 0.05, 0.9, 0.05: about 180 of the 200 callers on v2.
		if count["v2"] < 160 || count["v1"]+count["v3"] == 0 {
			t.Errorf("callers by release %v, want about 10, 180, 10", count)
		}
	})
}

// TestABanditSettingsChangeKeepsWhatTheBanditLearned: a reload that
// changes a bandit setting (here min_share) keeps the router's decayed
// counts and applies the new setting at once. Read again whole, the
// evaluator's since_valid counts would bring back outcomes the half-life
// had faded: v1, the best long ago and the worst now, would take the
// traffic back from v2.
func TestABanditSettingsChangeKeepsWhatTheBanditLearned(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		cfg := func(bandit string) string {
			return strings.Replace(banditConfig("thompson", `{"immediately_valid": {}}`), `"reward": "click", "update_every": "10s"`, bandit, 1)
		}
		src := &servedClicks{counts: map[string][2]uint64{}}
		src.set("v1", 100_000, 5_000) // 5 %, long ago
		src.set("v2", 100_000, 2_000)
		src.set("v3", 100_000, 2_000)
		w := newWorld(t, cfg(`"reward": "click", "half_life": "1m", "update_every": "10s"`), map[string]faultySpec{"a/": version(1), "b/": version(2), "c/": version(3)},
			func(_ *world, o *Options) { o.Outcomes = src })
		defer w.stop()
		synctest.Wait()
		shares := func() map[string]float64 { return trafficShares(t, w, "ads/pctr/1") }
		if got := shares(); math.Abs(got["v1"]-0.9) > 1e-9 {
			t.Fatalf("shares %v, want v1 0.9 at first", got)
		}
		// 20 half-lives later, 100,000 more each: v1 at 1 %, v2 at 3 %, v3
		// at 2 %.
		time.Sleep(20 * time.Minute)
		src.set("v1", 200_000, 6_000)
		src.set("v2", 200_000, 5_000)
		src.set("v3", 200_000, 4_000)
		time.Sleep(11 * time.Second)
		synctest.Wait()
		if got := shares(); math.Abs(got["v2"]-0.9) > 1e-9 {
			t.Fatalf("shares %v, want v2 0.9 once the old clicks have faded", got)
		}

		w.setConfig(cfg(`"reward": "click", "half_life": "1m", "update_every": "10s", "min_share": 0.02`))
		got := shares()
		if math.Abs(got["v2"]-0.95) > 1e-9 || math.Abs(got["v1"]-0.025) > 1e-9 || math.Abs(got["v3"]-0.025) > 1e-9 {
			t.Errorf("shares %v after min_share became 0.02, want v2 0.95 and the others 0.025", got)
		}
		stats, _ := w.sys.ContractStats("ads/pctr/1")
		if b := stats[0].Bandit; b == nil || b.N > 100_001 {
			t.Errorf("v1's bandit stats %+v after the reload, want the faded count (about 100,000)", b)
		}
	})
}

// switchingOutcomes is an OutcomeSource that serves src, which the test
// replaces.
type switchingOutcomes struct {
	mu  sync.Mutex
	src OutcomeSource
}

func (s *switchingOutcomes) Outcomes(contract, release string, shadow bool, champion string) (*routing.OutcomeStats, *quality.OutcomeStats) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.src.Outcomes(contract, release, shadow, champion)
}

func (s *switchingOutcomes) set(src OutcomeSource) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.src = src
}

// TestABanditWhoseRewardBecomesNumericStartsOver: a reload that makes the
// outcomes numeric under the same label and bandit object starts the
// bandit over, as the clicks counted so far are no values: each release's
// mean value rests on its values alone.
func TestABanditWhoseRewardBecomesNumericStartsOver(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		cfg := strings.NewReplacer(`"router": "thompson"`, `"router": "epsilon_greedy"`).Replace(banditConfig("thompson", `{"immediately_valid": {}}`))
		clicks := &servedClicks{counts: map[string][2]uint64{}}
		clicks.set("v1", 50_000, 1_000)
		clicks.set("v2", 50_000, 1_000)
		clicks.set("v3", 50_000, 1_000)
		src := &switchingOutcomes{src: clicks}
		w := newWorld(t, cfg, map[string]faultySpec{"a/": version(1), "b/": version(2), "c/": version(3)},
			func(_ *world, o *Options) { o.Outcomes = src })
		defer w.stop()
		synctest.Wait()
		if _, err := w.sys.ContractStats("ads/pctr/1"); err != nil {
			t.Fatal(err)
		}

		src.set(servedValues{"v1": {1000, 10_000, 104_000}, "v2": {1000, 8_000, 68_000}, "v3": {1000, 12_500, 160_250}})
		w.setConfig(strings.Replace(cfg, `"window": "30m"}`, `"window": "30m", "kind": "numeric"}`, 1))
		stats, err := w.sys.ContractStats("ads/pctr/1")
		if err != nil {
			t.Fatal(err)
		}
		if b := stats[2].Bandit; b == nil || b.Mean == nil || math.Abs(b.N-1000) > 1e-6 || math.Abs(*b.Mean-12.5*1000/1001) > 1e-9 {
			t.Errorf("v3's bandit stats %+v, want its 1,000 values of mean 12.5 against the prior's 0", b)
		}
	})
}

// trafficShares returns each release of contract id's traffic share, as
// its stats give them.
func trafficShares(t *testing.T, w *world, id string) map[string]float64 {
	t.Helper()
	stats, err := w.sys.ContractStats(id)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]float64{}
	for _, s := range stats {
		out[s.Release] = s.TrafficShare
	}
	return out
}
