package routing

import (
	"math"
	"math/rand/v2"
	"runtime"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/groveml/grove/conf/modelconfig"
)

// simulation is the issue's bandit simulation on a simulated clock: the
// releases' true click rates, the request rate, how long after a request
// its reward (click or none) is scored at most (uniformly within), how
// often the shares are updated, and how many requests are served.
type simulation struct {
	rates     []float64
	perSecond int
	delay     time.Duration
	every     time.Duration
	requests  int
	// at is the request at which the best release's share is recorded.
	at int
}

// issueSimulation is the issue's: click rates 2.0 %, 2.2 % and 1.8 %,
// 1,000 requests a second, rewards within 10 minutes, updates every 10 s,
// 1M requests, the best release's share read at 300k.
var issueSimulation = simulation{rates: []float64{0.020, 0.022, 0.018}, perSecond: 1000, delay: 10 * time.Minute, every: 10 * time.Second, requests: 1_000_000, at: 300_000}

// simResult is what one router did in a simulation.
type simResult struct {
	// regret is the clicks lost against always choosing the best release,
	// in expectation: the sum over requests of p_best − p_chosen.
	regret float64
	// shareAt is the best release's share in force at request sim.at.
	shareAt float64
	// bestTraffic is the fraction of all requests the best release served.
	bestTraffic float64
}

// run serves the simulation's requests under router (modelconfig.RouterThompson,
// modelconfig.RouterEpsilonGreedy, or "" for the fixed equal split) with settings
// set. seed drives the clicks and the reward delays (the same for every
// router given the same seed) and, apart, the router's draws. Requests
// pick a release from the shares with a Sequence, as the router actor
// does; the counts the router reads at an update are those of the rewards
// scored by then.
func (sim simulation) run(router modelconfig.Router, set BanditSettings, seed uint64) simResult {
	k := len(sim.rates)
	best := 0
	for i, r := range sim.rates {
		if r > sim.rates[best] {
			best = i
		}
	}
	names := make([]string, k)
	for i := range names {
		names[i] = string(rune('a' + i))
	}
	world := rand.New(rand.NewPCG(seed, 1))
	draws := rand.New(rand.NewPCG(seed, 2))
	start := t0
	// scored[b][i]: rewards of release i scored in ((b−1)·every, b·every],
	// read at the update at b·every.
	secs := func(d time.Duration) float64 { return d.Seconds() }
	buckets := int(float64(sim.requests)/float64(sim.perSecond)/secs(sim.every)+secs(sim.delay)/secs(sim.every)) + 2
	scored := make([][]Cumulative, buckets)
	for b := range scored {
		scored[b] = make([]Cumulative, k)
	}
	cum := make(map[string]Cumulative, k)
	total := make([]Cumulative, k)
	var state BanditState
	var seq Sequence
	shares := make([]float64, k)
	var res simResult
	served := 0
	for update := 0; served < sim.requests; update++ {
		now := start.Add(time.Duration(update) * sim.every)
		for i := range k {
			total[i].Count += scored[update][i].Count
			total[i].Positives += scored[update][i].Positives
			cum[names[i]] = total[i]
		}
		switch router {
		case "":
			for i := range shares {
				shares[i] = 1 / float64(k)
			}
		default:
			got, _ := state.Update(now, router, set, cum, names, draws)
			for i, n := range names {
				shares[i] = got[n]
			}
		}
		end := min(served+int(float64(sim.perSecond)*secs(sim.every)), sim.requests)
		for ; served < end; served++ {
			if served == sim.at {
				res.shareAt = shares[best]
			}
			u, acc, i := seq.Next(), 0.0, k-1
			for j, s := range shares {
				acc += s
				if u < acc {
					i = j
					break
				}
			}
			res.regret += sim.rates[best] - sim.rates[i]
			if i == best {
				res.bestTraffic++
			}
			t := float64(served)/float64(sim.perSecond) + world.Float64()*secs(sim.delay)
			b := int(math.Ceil(t / secs(sim.every)))
			scored[b][i].Count++
			if world.Float64() < sim.rates[i] {
				scored[b][i].Positives++
			}
		}
	}
	res.bestTraffic /= float64(sim.requests)
	return res
}

// issueSettings are the issue's bandit settings: prior [1, 1], half-life
// 6h, shares within [0.05, 0.95], ε 0.1.
func issueSettings() BanditSettings { return DefaultBanditSettings(false) }

// simSeeds is how many seeds TestThompsonMeetsTheIssueTargetsInTheSimulation
// runs: each run is one draw of the clicks and delays, in which the
// release leading after the first minute's few dozen clicks may be the
// wrong one, so a target judged on a single run judges the seed.
const simSeeds = 8

// TestThompsonMeetsTheIssueTargetsInTheSimulation runs the issue's
// simulation (1M requests) with seeds 1 to simSeeds and checks its
// targets: Thompson's mean regret at most 30 % of the fixed split's, and
// the best release's share at request 300k at least 80 % in the median
// run (BenchmarkBanditRegret reports the mean too).
func TestThompsonMeetsTheIssueTargetsInTheSimulation(t *testing.T) {
	if testing.Short() {
		t.Skip("the 1M-request simulation")
	}
	sim := issueSimulation
	fixed := sim.run("", issueSettings(), 1)
	// The fixed split loses (0.2 + 0.4)/3 percentage points a request.
	if want := 0.002 * float64(sim.requests); math.Abs(fixed.regret-want) > 1e-4*want {
		t.Errorf("fixed split's regret %.2f, want %.2f", fixed.regret, want)
	}
	regret, shares := 0.0, make([]float64, simSeeds)
	for i := range simSeeds {
		r := sim.run(modelconfig.RouterThompson, issueSettings(), uint64(i+1))
		regret += r.regret / simSeeds
		shares[i] = r.shareAt
	}
	slices.Sort(shares)
	median := (shares[simSeeds/2-1] + shares[simSeeds/2]) / 2
	t.Logf("thompson: mean regret %.0f clicks, %.3f of the fixed split's %.0f; best release's share at request 300k: median %.3f, by run %.3f",
		regret, regret/fixed.regret, fixed.regret, median, shares)
	if r := regret / fixed.regret; r > 0.30 {
		t.Errorf("thompson's mean regret is %.3f of the fixed split's, above 0.30", r)
	}
	if median < 0.80 {
		t.Errorf("thompson gives the best release a median %.3f of the traffic at request 300k, below 0.80", median)
	}
}

// banditSeeds is how many seeded runs one op of BenchmarkBanditRegret
// makes of each router: whether the best release leads at request 300k
// depends on the run's draw of clicks (by then about a quarter of the
// rewards are scored), so the share there is a mean over many runs, and
// with 500 its standard error is about 0.01.
const banditSeeds = 500

// BenchmarkBanditRegret runs the issue's simulation (1M requests) with
// seeds 1 to banditSeeds for each router, the runs spread over GOMAXPROCS
// goroutines, and reports the mean regret (expected clicks lost against
// always choosing the best release) of each, Thompson's over the fixed
// split's, the best release's mean share at request 300k with its
// standard error, and the fraction of runs in which that share was at
// least 80 %. One op is all the runs.
func BenchmarkBanditRegret(b *testing.B) {
	sim := issueSimulation
	type runs struct{ th, eg, fx simResult }
	all := make([]runs, banditSeeds)
	for b.Loop() {
		next := make(chan int)
		var wg sync.WaitGroup
		for range runtime.GOMAXPROCS(0) {
			wg.Go(func() {
				for i := range next {
					seed := uint64(i + 1)
					all[i] = runs{sim.run(modelconfig.RouterThompson, issueSettings(), seed),
						sim.run(modelconfig.RouterEpsilonGreedy, issueSettings(), seed), sim.run("", issueSettings(), seed)}
				}
			})
		}
		for i := range all {
			next <- i
		}
		close(next)
		wg.Wait()
	}
	var th, eg, fx simResult
	var thHit, egHit, thSq float64
	for _, r := range all {
		th.regret += r.th.regret
		th.shareAt += r.th.shareAt
		thSq += r.th.shareAt * r.th.shareAt
		th.bestTraffic += r.th.bestTraffic
		eg.regret += r.eg.regret
		eg.shareAt += r.eg.shareAt
		fx.regret += r.fx.regret
		if r.th.shareAt >= 0.8 {
			thHit++
		}
		if r.eg.shareAt >= 0.8 {
			egHit++
		}
	}
	n := float64(len(all))
	mean := th.shareAt / n
	b.ReportMetric(th.regret/n, "thompson_regret")
	b.ReportMetric(eg.regret/n, "egreedy_regret")
	b.ReportMetric(fx.regret/n, "fixed_regret")
	b.ReportMetric(th.regret/fx.regret, "thompson/fixed")
	b.ReportMetric(mean, "thompson_best_share@300k")
	b.ReportMetric(math.Sqrt(max(thSq/n-mean*mean, 0)/(n-1)), "thompson_best_share_se")
	b.ReportMetric(thHit/n, "thompson_runs_80%@300k")
	b.ReportMetric(eg.shareAt/n, "egreedy_best_share@300k")
	b.ReportMetric(egHit/n, "egreedy_runs_80%@300k")
	b.ReportMetric(th.bestTraffic/n, "thompson_best_traffic")
}
