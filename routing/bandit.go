package routing

import (
	"fmt"
	"maps"
	"math"
	"math/rand/v2"
	"slices"
	"time"

	"github.com/groveml/grove/conf/modelconfig"
)

// ThompsonDraws is how many joint draws from the releases' posteriors
// estimate, at each update, the probability that each is the best: the
// estimate's standard error is at most 0.008 (√(¼/4000)).
const ThompsonDraws = 4000

// Cumulative is what the evaluator has scored so far of one release's
// served predictions (not its shadow ones): for a binary reward, Count
// scored and Positives rewarded; for a numeric reward, Count scored and
// the Sum and SumSq (sum of squares) of their rewards. The fields the
// reward's kind does not use are ignored.
type Cumulative struct {
	Count     uint64  `json:"count"`
	Positives uint64  `json:"positives,omitempty"`
	Sum       float64 `json:"sum,omitempty"`
	SumSq     float64 `json:"sum_sq,omitempty"`
}

// BanditSettings are a contract's bandit settings (the "bandit" object of
// a thompson or epsilon_greedy router). DefaultBanditSettings gives the
// defaults and Validate says what is refused; Update replaces a value
// Validate refuses by its default rather than failing.
type BanditSettings struct {
	// Numeric says the reward is numeric (a Normal model of each
	// release's mean reward) rather than binary (Beta–Bernoulli).
	Numeric bool
	// Prior is, for a binary reward, the Beta(α, β) prior of each
	// release's reward rate (default [1, 1], uniform; both finite and
	// positive); for a numeric reward, [μ0, n0]: a prior mean reward μ0
	// weighing as much as n0 scored predictions (default [0, 1]; μ0
	// finite, n0 finite and positive).
	Prior [2]float64
	// HalfLife is the half-life of the counts: an outcome scored dt
	// before an update weighs 2^(−dt/HalfLife). 0 keeps every outcome at
	// full weight; it may not be negative.
	HalfLife time.Duration
	// MinShare and MaxShare bound each eligible release's share under the
	// thompson router (defaults 0.05 and 0.95; 0 ≤ MinShare ≤ MaxShare ≤
	// 1). With k eligible releases the bounds used are min(MinShare, 1/k)
	// and max(MaxShare, 1/k), so they can always be met. The
	// epsilon_greedy router ignores them: ε bounds its exploration.
	MinShare, MaxShare float64
	// Epsilon is the epsilon_greedy router's exploration share, in [0, 1]
	// (default 0.1).
	Epsilon float64
}

// DefaultBanditSettings returns the default settings for a binary or a
// numeric reward: prior [1, 1] (binary) or [0, 1] (numeric), half-life
// 6h, shares within [0.05, 0.95], ε 0.1.
func DefaultBanditSettings(numeric bool) BanditSettings {
	s := BanditSettings{Numeric: numeric, Prior: [2]float64{1, 1}, HalfLife: 6 * time.Hour, MinShare: 0.05, MaxShare: 0.95, Epsilon: 0.1}
	if numeric {
		s.Prior = [2]float64{0, 1}
	}
	return s
}

// Validate returns an error naming the first setting out of its range, or
// nil.
func (s BanditSettings) Validate() error {
	p0, p1 := s.Prior[0], s.Prior[1]
	switch {
	case !s.Numeric && !(finite(p0) && finite(p1) && p0 > 0 && p1 > 0):
		return fmt.Errorf("bandit prior [%g, %g]: a binary reward's Beta prior needs two finite numbers above 0", p0, p1)
	case s.Numeric && !(finite(p0) && finite(p1) && p1 > 0):
		return fmt.Errorf("bandit prior [%g, %g]: a numeric reward's prior is [mean, weight], a finite mean and a finite weight above 0", p0, p1)
	case s.HalfLife < 0:
		return fmt.Errorf("bandit half_life %v is negative", s.HalfLife)
	case !(s.MinShare >= 0 && s.MinShare <= 1):
		return fmt.Errorf("bandit min_share %g is not in [0, 1]", s.MinShare)
	case !(s.MaxShare >= 0 && s.MaxShare <= 1):
		return fmt.Errorf("bandit max_share %g is not in [0, 1]", s.MaxShare)
	case s.MinShare > s.MaxShare:
		return fmt.Errorf("bandit min_share %g is above max_share %g", s.MinShare, s.MaxShare)
	case !(s.Epsilon >= 0 && s.Epsilon <= 1):
		return fmt.Errorf("bandit epsilon %g is not in [0, 1]", s.Epsilon)
	}
	return nil
}

// usable returns s with every value Validate refuses replaced by its
// default (both share bounds together, as they are checked together).
func (s BanditSettings) usable() BanditSettings {
	d := DefaultBanditSettings(s.Numeric)
	p0, p1 := s.Prior[0], s.Prior[1]
	if !finite(p0) || !finite(p1) || p1 <= 0 || (!s.Numeric && p0 <= 0) {
		s.Prior = d.Prior
	}
	if s.HalfLife < 0 {
		s.HalfLife = d.HalfLife
	}
	if !(s.MinShare >= 0 && s.MaxShare <= 1 && s.MinShare <= s.MaxShare) {
		s.MinShare, s.MaxShare = d.MinShare, d.MaxShare
	}
	if !(s.Epsilon >= 0 && s.Epsilon <= 1) {
		s.Epsilon = d.Epsilon
	}
	return s
}

// Posterior is what a bandit router believes of one release's reward:
// the posterior mean of its reward (rate or mean value), the equal-tailed
// 95 % interval [Lower, Upper], and N, the decayed count of scored
// predictions it rests on (prior excluded). For a numeric reward, Lower
// and Upper are NaN while the reward's spread is unknown (fewer than 2
// decayed scored predictions in the whole contract).
type Posterior struct {
	Mean, Lower, Upper float64
	N                  float64
}

// BanditState is a contract's bandit router state: each release's decayed
// counts, and the cumulative counts last seen, so that each update adds
// only what was scored since. The zero value is a state with nothing
// seen; RestoreBanditState rebuilds one from its Snapshot (after a
// restart). It is not safe for concurrent use; the caller owns one per
// contract and passes it nothing but its own updates.
type BanditState struct {
	at   time.Time
	arms map[string]*banditArm
}

// banditArm is one release's state: decayed sums and the last reading.
// restored says the arm comes from a snapshot and no reading has grown
// from its last one since (see RestoreBanditState).
type banditArm struct {
	n, pos, sum, sumSq float64
	seen               Cumulative
	restored           bool
}

// BanditSnapshot is a BanditState in plain values, to keep across a
// restart: the time of its last update (zero: none) and each release's
// decayed counts as of then, with the cumulative reading they last
// folded.
type BanditSnapshot struct {
	At   time.Time
	Arms map[string]BanditArm
}

// BanditArm is one release's part of a BanditSnapshot: its decayed count
// N of scored predictions and, of those, the decayed Positives (binary
// reward) or Sum and SumSq of the rewards (numeric), and Seen, the last
// cumulative reading folded.
type BanditArm struct {
	N         float64    `json:"n"`
	Positives float64    `json:"positives,omitempty"`
	Sum       float64    `json:"sum,omitempty"`
	SumSq     float64    `json:"sum_sq,omitempty"`
	Seen      Cumulative `json:"seen"`
}

// Snapshot returns s's counts as of its last update.
func (s *BanditState) Snapshot() BanditSnapshot {
	snap := BanditSnapshot{At: s.at, Arms: make(map[string]BanditArm, len(s.arms))}
	for r, a := range s.arms {
		snap.Arms[r] = BanditArm{N: a.n, Positives: a.pos, Sum: a.sum, SumSq: a.sumSq, Seen: a.seen}
	}
	return snap
}

// RestoreBanditState returns the state snap was taken of, as if its last
// update had just run: the next Update decays its counts from snap.At and
// folds what each release's reading adds to Seen, as it would have in the
// state snap was taken of. One difference: until a release's reading has
// grown from its Seen, a reading below it (Count or Positives lower, or
// Positives grown more than Count) is taken for a source still catching
// up after the restart and ignored, where a live state would take it
// whole as what was scored since a reset; zero a release's Seen when the
// source is known to have started its counts over. A count that is NaN,
// infinite or negative, a Positives above N, or a Seen with Positives
// above Count is an error naming the release.
func RestoreBanditState(snap BanditSnapshot) (BanditState, error) {
	s := BanditState{at: snap.At, arms: make(map[string]*banditArm, len(snap.Arms))}
	for _, r := range slices.Sorted(maps.Keys(snap.Arms)) {
		a := snap.Arms[r]
		switch {
		case !finite(a.N) || !finite(a.Positives) || !finite(a.Sum) || !finite(a.SumSq):
			return BanditState{}, fmt.Errorf("bandit counts of release %q: n %g, positives %g, sum %g, sum of squares %g: not all finite", r, a.N, a.Positives, a.Sum, a.SumSq)
		case a.N < 0 || a.Positives < 0 || a.SumSq < 0:
			return BanditState{}, fmt.Errorf("bandit counts of release %q: n %g, positives %g, sum of squares %g: a negative count", r, a.N, a.Positives, a.SumSq)
		case a.Positives > a.N:
			return BanditState{}, fmt.Errorf("bandit counts of release %q: positives %g above n %g", r, a.Positives, a.N)
		case a.Seen.Positives > a.Seen.Count || !finite(a.Seen.Sum) || !finite(a.Seen.SumSq) || a.Seen.SumSq < 0:
			return BanditState{}, fmt.Errorf("bandit counts of release %q: last reading %+v is not one a source gives", r, a.Seen)
		}
		s.arms[r] = &banditArm{n: a.N, pos: a.Positives, sum: a.Sum, sumSq: a.SumSq, seen: a.Seen, restored: true}
	}
	return s, nil
}

// Update folds the cumulative counts cum (by release) read at now into the
// decayed counts and returns the traffic shares of the eligible releases
// and the posterior of every release known to the state.
//
// Decay: every decayed count is multiplied by 2^(−(now−last)/HalfLife),
// last being the latest time of an earlier update (no decay at the first
// update, nor when now is not after last). Folding: for each release in
// cum, the difference between its reading and the one last seen is added;
// a reading below the last (Count or Positives went down, or Positives
// grew more than Count: the evaluator's state was reset) is taken whole,
// as what was scored since the reset. A binary reading with Positives
// above Count, or a numeric one with a NaN or infinite Sum or SumSq or a
// negative SumSq, is ignored and the last one kept. A release first seen
// is taken whole. A release neither in cum nor in eligible is forgotten.
// A reset after which Count is already above the last reading cannot be
// told from growth.
//
// Shares: over eligible (the releases the gates let serve: valid, not
// rolled back, not expired; duplicates count once), summing to 1; any
// other release gets none, one eligible release gets 1, none gives an
// empty map. A release with no outcome yet has its prior for posterior.
// Under modelconfig.RouterThompson the shares are the probabilities, estimated from
// ThompsonDraws joint draws with rng, that each release's reward is the
// largest, projected onto the share bounds (see BanditSettings.MinShare):
// share_i = clamp(p_i + τ, lo, hi), with τ such that they sum to 1, the
// nearest bounded shares to the probabilities. Under
// modelconfig.RouterEpsilonGreedy, each gets ε/k and the 1−ε left is split equally
// among the releases of the highest posterior mean (one, but for ties).
// Any other router gets the equal split. A nil rng draws from a source
// with a fixed seed.
func (s *BanditState) Update(now time.Time, kind modelconfig.Router, set BanditSettings, cum map[string]Cumulative, eligible []string, rng *rand.Rand) (shares map[string]float64, post map[string]Posterior) {
	set = set.usable()
	if s.arms == nil {
		s.arms = make(map[string]*banditArm)
	}
	f := 1.0
	if !s.at.IsZero() && now.After(s.at) && set.HalfLife > 0 {
		f = math.Exp2(-float64(now.Sub(s.at)) / float64(set.HalfLife))
	}
	if s.at.IsZero() || now.After(s.at) {
		s.at = now
	}
	for _, a := range s.arms {
		a.n, a.pos, a.sum, a.sumSq = f*a.n, f*a.pos, f*a.sum, f*a.sumSq
	}
	var elig []string
	for _, r := range eligible {
		if !slices.Contains(elig, r) {
			elig = append(elig, r)
		}
	}
	for r, c := range cum {
		a := s.arms[r]
		if a == nil {
			a = &banditArm{}
			s.arms[r] = a
		}
		a.fold(c, set.Numeric)
	}
	for r := range s.arms {
		if _, ok := cum[r]; !ok && !slices.Contains(elig, r) {
			delete(s.arms, r)
		}
	}
	for _, r := range elig {
		if s.arms[r] == nil {
			s.arms[r] = &banditArm{}
		}
	}

	m := newModel(set, s.arms)
	post = make(map[string]Posterior, len(s.arms))
	for r, a := range s.arms {
		post[r] = m.posterior(a)
	}
	shares = make(map[string]float64, len(elig))
	k := len(elig)
	switch {
	case k == 0:
		return shares, post
	case k == 1:
		shares[elig[0]] = 1
		return shares, post
	}
	var p []float64
	switch kind {
	case modelconfig.RouterThompson:
		if rng == nil {
			rng = rand.New(rand.NewPCG(1, 2))
		}
		arms := make([]*banditArm, k)
		for i, r := range elig {
			arms[i] = s.arms[r]
		}
		p = boundShares(m.probBest(arms, rng), set.MinShare, set.MaxShare)
	case modelconfig.RouterEpsilonGreedy:
		p = make([]float64, k)
		best, ties := math.Inf(-1), 0
		for _, r := range elig {
			switch mean := post[r].Mean; {
			case mean > best:
				best, ties = mean, 1
			case mean == best:
				ties++
			}
		}
		for i, r := range elig {
			p[i] = set.Epsilon / float64(k)
			if post[r].Mean == best {
				p[i] += (1 - set.Epsilon) / float64(ties)
			}
		}
	default:
		p = make([]float64, k)
		for i := range p {
			p[i] = 1 / float64(k)
		}
	}
	for i, r := range elig {
		shares[r] = p[i]
	}
	return shares, post
}

// fold adds to a what reading c adds to the one last seen (see Update
// and, for an arm restored from a snapshot, RestoreBanditState), ignoring
// the fields the reward's kind does not use.
func (a *banditArm) fold(c Cumulative, numeric bool) {
	if numeric {
		c.Positives = 0
	} else {
		c.Sum, c.SumSq = 0, 0
	}
	if c.Positives > c.Count || !finite(c.Sum) || !finite(c.SumSq) || c.SumSq < 0 {
		return
	}
	d := c
	grew := c.Count >= a.seen.Count && c.Positives >= a.seen.Positives && c.Positives-a.seen.Positives <= c.Count-a.seen.Count
	if !grew && a.restored {
		return
	}
	if grew {
		d = Cumulative{Count: c.Count - a.seen.Count, Positives: c.Positives - a.seen.Positives}
		if d.Count > 0 {
			d.Sum, d.SumSq = c.Sum-a.seen.Sum, max(c.SumSq-a.seen.SumSq, 0)
		}
	}
	a.seen, a.restored = c, false
	a.n += float64(d.Count)
	a.pos += float64(d.Positives)
	a.sum += d.Sum
	a.sumSq += d.SumSq
}

// banditModel is the posterior model of an update: the settings, and for a
// numeric reward the spread of the rewards pooled over the releases.
type banditModel struct {
	set BanditSettings
	// pooled is the variance of a reward about its release's mean, pooled
	// over the releases; NaN while unknown.
	pooled float64
}

// newModel returns the model of the releases' decayed counts.
func newModel(set BanditSettings, arms map[string]*banditArm) banditModel {
	m := banditModel{set: set, pooled: math.NaN()}
	if !set.Numeric {
		return m
	}
	var n, q float64
	for _, a := range arms {
		n += a.n
		q += a.centred()
	}
	if n >= 2 {
		m.pooled = q / n
	}
	return m
}

// centred returns the sum of the squared deviations of a's rewards from
// their mean (decayed).
func (a *banditArm) centred() float64 {
	if a.n <= 0 {
		return 0
	}
	return max(a.sumSq-a.sum*a.sum/a.n, 0)
}

// normal returns the mean and standard deviation of the Normal posterior
// of a's mean reward (numeric rewards): mean (n0·μ0 + Σx)/(n0 + n), and
// variance σ²/(n0 + n) where σ² = (Q + 2·pooled)/(n + 2) is a's own
// spread Q (the sum of squared deviations) shrunk towards the pooled
// variance by two predictions' worth. The deviation is NaN while the
// pooled variance is unknown.
func (m banditModel) normal(a *banditArm) (mean, sd float64) {
	mu0, n0 := m.set.Prior[0], m.set.Prior[1]
	mean = (n0*mu0 + a.sum) / (n0 + a.n)
	v := (a.centred() + 2*m.pooled) / (a.n + 2)
	return mean, math.Sqrt(v / (n0 + a.n))
}

// beta returns the Beta posterior of a's reward rate (binary rewards):
// α0 + positives, β0 + negatives.
func (m banditModel) beta(a *banditArm) (alpha, beta float64) {
	return m.set.Prior[0] + a.pos, m.set.Prior[1] + max(a.n-a.pos, 0)
}

// posterior returns a's posterior.
func (m banditModel) posterior(a *banditArm) Posterior {
	if m.set.Numeric {
		mean, sd := m.normal(a)
		return Posterior{Mean: mean, Lower: mean - z975*sd, Upper: mean + z975*sd, N: a.n}
	}
	al, be := m.beta(a)
	lo, hi := betaInterval(al, be)
	return Posterior{Mean: al / (al + be), Lower: lo, Upper: hi, N: a.n}
}

// z975 is the standard Normal's 97.5th percentile.
const z975 = 1.959963984540054

// probBest estimates, from ThompsonDraws joint draws of the arms'
// posteriors, the probability that each arm's reward is the largest
// (ties broken uniformly). While the numeric rewards' spread is unknown
// every arm is equally likely.
func (m banditModel) probBest(arms []*banditArm, rng *rand.Rand) []float64 {
	k := len(arms)
	p := make([]float64, k)
	if m.set.Numeric && math.IsNaN(m.pooled) {
		for i := range p {
			p[i] = 1 / float64(k)
		}
		return p
	}
	type dist struct{ a, b float64 }
	d := make([]dist, k)
	for i, a := range arms {
		if m.set.Numeric {
			d[i].a, d[i].b = m.normal(a)
		} else {
			d[i].a, d[i].b = m.beta(a)
		}
	}
	wins := make([]int, k)
	for range ThompsonDraws {
		best, at, ties := math.Inf(-1), 0, 0
		for i := range d {
			var x float64
			if m.set.Numeric {
				x = d[i].a + d[i].b*rng.NormFloat64()
			} else {
				x = betaDraw(rng, d[i].a, d[i].b)
			}
			switch {
			case x > best:
				best, at, ties = x, i, 1
			case x == best:
				ties++
				if rng.IntN(ties) == 0 {
					at = i
				}
			}
		}
		wins[at]++
	}
	for i, w := range wins {
		p[i] = float64(w) / ThompsonDraws
	}
	return p
}

// boundShares returns the shares nearest to p (which sums to 1) that sum
// to 1 and lie within [lo', hi'], lo' = min(lo, 1/k) and hi' = max(hi,
// 1/k): share_i = clamp(p_i + τ, lo', hi'), τ found by bisection until
// its interval cannot shrink (the shares then sum to 1 within a few ulps).
func boundShares(p []float64, lo, hi float64) []float64 {
	k := float64(len(p))
	lo, hi = min(lo, 1/k), max(hi, 1/k)
	clamp := func(x float64) float64 { return min(max(x, lo), hi) }
	sum := func(tau float64) float64 {
		s := 0.0
		for _, x := range p {
			s += clamp(x + tau)
		}
		return s
	}
	a, b := lo-slices.Max(p), hi-slices.Min(p) // sum(a) = k·lo ≤ 1 ≤ k·hi = sum(b)
	for range 200 {
		mid := (a + b) / 2
		if mid == a || mid == b {
			break
		}
		if sum(mid) < 1 {
			a = mid
		} else {
			b = mid
		}
	}
	tau := (a + b) / 2
	out := make([]float64, len(p))
	for i, x := range p {
		out[i] = clamp(x + tau)
	}
	return out
}

// betaDraw draws from Beta(a, b) as X/(X+Y), X ~ Gamma(a), Y ~ Gamma(b).
func betaDraw(rng *rand.Rand, a, b float64) float64 {
	x, y := gammaDraw(rng, a), gammaDraw(rng, b)
	if x+y == 0 {
		return a / (a + b)
	}
	return x / (x + y)
}

// gammaDraw draws from Gamma(a, 1), a > 0, by Marsaglia and Tsang's
// method (with the U^(1/a) boost for a < 1).
func gammaDraw(rng *rand.Rand, a float64) float64 {
	if a < 1 {
		return gammaDraw(rng, a+1) * math.Pow(rng.Float64(), 1/a)
	}
	d := a - 1.0/3
	c := 1 / math.Sqrt(9*d)
	for {
		x := rng.NormFloat64()
		v := 1 + c*x
		if v <= 0 {
			continue
		}
		v = v * v * v
		u := rng.Float64()
		if u < 1-0.0331*x*x*x*x || math.Log(u) < 0.5*x*x+d*(1-v+math.Log(v)) {
			return d * v
		}
	}
}

// betaInterval returns the equal-tailed 95 % interval of Beta(a, b): its
// 2.5th and 97.5th percentiles, exact (to 1e-12) but for a and b both
// above 10,000, where the Normal approximation is used (its skewness is
// then below 0.02).
func betaInterval(a, b float64) (lo, hi float64) {
	if a > 1e4 && b > 1e4 {
		mean := a / (a + b)
		sd := math.Sqrt(a * b / ((a + b) * (a + b) * (a + b + 1)))
		return max(mean-z975*sd, 0), min(mean+z975*sd, 1)
	}
	return betaQuantile(0.025, a, b), betaQuantile(0.975, a, b)
}

// betaQuantile returns the q-quantile of Beta(a, b) by bisection on the
// regularised incomplete beta function.
func betaQuantile(q, a, b float64) float64 {
	lo, hi := 0.0, 1.0
	for range 100 {
		mid := (lo + hi) / 2
		if mid == lo || mid == hi || hi-lo < 1e-12*mid {
			break
		}
		if regIncBeta(mid, a, b) < q {
			lo = mid
		} else {
			hi = mid
		}
	}
	return (lo + hi) / 2
}

// regIncBeta returns the regularised incomplete beta function I_x(a, b),
// by its continued fraction (Numerical Recipes' betacf, modified Lentz).
func regIncBeta(x, a, b float64) float64 {
	switch {
	case x <= 0:
		return 0
	case x >= 1:
		return 1
	}
	la, _ := math.Lgamma(a)
	lb, _ := math.Lgamma(b)
	lab, _ := math.Lgamma(a + b)
	front := math.Exp(lab - la - lb + a*math.Log(x) + b*math.Log1p(-x))
	if x < (a+1)/(a+b+2) {
		return front * betaFraction(x, a, b) / a
	}
	return 1 - front*betaFraction(1-x, b, a)/b
}

// betaFraction evaluates the continued fraction of I_x(a, b).
func betaFraction(x, a, b float64) float64 {
	const tiny = 1e-300
	guard := func(v float64) float64 {
		if math.Abs(v) < tiny {
			return tiny
		}
		return v
	}
	c, d := 1.0, 1/guard(1-(a+b)*x/(a+1))
	h := d
	for m := 1.0; m <= 10000; m++ {
		aa := m * (b - m) * x / ((a + 2*m - 1) * (a + 2*m))
		d = 1 / guard(1+aa*d)
		c = guard(1 + aa/c)
		h *= d * c
		aa = -(a + m) * (a + b + m) * x / ((a + 2*m) * (a + 2*m + 1))
		d = 1 / guard(1+aa*d)
		c = guard(1 + aa/c)
		del := d * c
		h *= del
		if math.Abs(del-1) < 1e-15 {
			break
		}
	}
	return h
}

// finite reports whether x is neither NaN nor infinite.
func finite(x float64) bool { return !math.IsNaN(x) && !math.IsInf(x, 0) }

// Eligible returns the releases a router that follows the outcome may give
// traffic under this plan, in contract order: valid (ready, their rules
// hold, not rolled back) and not expired.
func (p *Plan) Eligible() []string {
	var out []string
	for _, s := range p.Servables {
		if s.Valid && !s.Expired {
			out = append(out, s.Release)
		}
	}
	return out
}

// FollowShares replaces the plan's traffic fractions (Shares, and each
// Status's Fraction) by shares, the last BanditState.Update's choice,
// restricted to the releases eligible under this plan and renormalised
// over them, so that a release the gates stop between two updates loses
// its traffic at once and the others take it in proportion. Phase-in does
// not weigh them. An eligible release missing from shares (it became
// eligible after the update) gets nothing until the next update, unless
// no eligible release has a share, in which case they split the traffic
// equally. The caller evaluates the contract as usual (Evaluate), then
// calls FollowShares on the plan; updating at once when the eligible
// releases change keeps the share bounds.
func (p *Plan) FollowShares(shares map[string]float64) {
	eligible := p.Eligible()
	weight := func(r string) float64 {
		if w := shares[r]; w > 0 && finite(w) {
			return w
		}
		return 0
	}
	total := 0.0
	for _, r := range eligible {
		total += weight(r)
	}
	p.Shares = nil
	for i := range p.Servables {
		v := &p.Servables[i]
		if !v.Valid || v.Expired {
			v.Fraction = 0
			continue
		}
		switch {
		case total > 0:
			v.Fraction = weight(v.Release) / total
		default:
			v.Fraction = 1 / float64(len(eligible))
		}
		if v.Fraction == 0 {
			v.Reason = "no share at the bandit's last update"
			continue
		}
		v.Reason = ""
		p.Shares = append(p.Shares, Share{Release: v.Release, ModelPath: v.ModelPath, PhaseInPct: v.PhaseInPct, Fraction: v.Fraction})
	}
}
