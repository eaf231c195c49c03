package actors

import (
	"hash/fnv"
	"math"
	"math/rand/v2"
	"slices"
	"time"

	"github.com/groveml/grove/conf/modelconfig"
	"github.com/groveml/grove/routing"
)

// banditRouter is the state of a contract's bandit router
// (modelconfig.RouterThompson, RouterEpsilonGreedy): its decayed counts,
// the shares it chose at its last update and each release's posterior
// then. The router actor owns it, in the contract's state, and updates it
// on the first plan after each update_every.
type banditRouter struct {
	state  routing.BanditState
	rng    *rand.Rand
	next   time.Time
	shares map[string]float64
	post   map[string]routing.Posterior
	at     time.Time // of the last update
	// eligible are the releases the last update shared the traffic
	// among: when the gates change them, the next plan updates at once.
	eligible []string
}

// newBanditRouter returns the state of contract id's bandit router, not
// updated yet (its first plan updates it), its draws seeded by the id and
// the clock (so nodes and restarts draw differently).
func newBanditRouter(id string) *banditRouter {
	h := fnv.New64a()
	h.Write([]byte(id))
	return &banditRouter{rng: rand.New(rand.NewPCG(h.Sum64(), uint64(time.Now().UnixNano())))}
}

// banditSettings are the routing settings of contract c's bandit object.
func banditSettings(c modelconfig.Contract) routing.BanditSettings {
	b := c.Bandit
	numeric := c.Outcomes != nil && c.Outcomes.Kind == modelconfig.OutcomeNumeric
	set := routing.BanditSettings{Numeric: numeric, Prior: b.Prior, HalfLife: b.HalfLife, MinShare: b.MinShare, MaxShare: b.MaxShare, Epsilon: b.Epsilon}
	if !b.PriorGiven() {
		set.Prior = routing.DefaultBanditSettings(numeric).Prior
	}
	return set
}

// sameReward reports whether contracts prev and c, both with a bandit
// router, reward their releases alike (the same outcomes label, binary or
// numeric alike), so that the counts learned under prev hold under c.
func sameReward(prev, c modelconfig.Contract) bool {
	return prev.Bandit != nil && c.Bandit != nil && prev.Bandit.Reward == c.Bandit.Reward &&
		banditSettings(prev).Numeric == banditSettings(c).Numeric
}

// update reads each release's served outcomes from src (nil: none) and
// chooses the shares of the releases p lets serve, when an update is due
// at now or those releases changed since the last; it reports whether it
// updated.
func (b *banditRouter) update(c modelconfig.Contract, src OutcomeSource, p *routing.Plan, now time.Time) bool {
	eligible := p.Eligible()
	if now.Before(b.next) && slices.Equal(eligible, b.eligible) {
		return false
	}
	cum := make(map[string]routing.Cumulative, len(c.Servables))
	if src != nil {
		for _, sv := range c.Servables {
			_, st := src.Outcomes(c.ID(), sv.ReleaseVersion, false, "")
			if st == nil {
				continue
			}
			f := st.SinceValid
			c := routing.Cumulative{Count: f.Count}
			if f.BinaryFigures != nil {
				c.Positives = f.Positives
			}
			if f.NumericFigures != nil {
				c.Sum, c.SumSq = f.LabelSum, f.LabelSumSq
			}
			cum[sv.ReleaseVersion] = c
		}
	}
	b.shares, b.post = b.state.Update(now, c.Router, banditSettings(c), cum, eligible, b.rng)
	b.next, b.at, b.eligible = now.Add(c.Bandit.UpdateEvery), now, eligible
	return true
}

// BanditStats is what a contract's bandit router believes of one release
// at its last update: the posterior of its reward (mean, 95 % interval,
// null while undefined, and the decayed count of scored predictions it
// rests on) and the share it chose then (traffic_share is the share now,
// after the gates).
type BanditStats struct {
	Mean        *float64    `json:"reward_mean"`
	CI95        *[2]float64 `json:"reward_ci95"`
	N           float64     `json:"n"`
	ChosenShare float64     `json:"chosen_share"`
	UpdatedAt   time.Time   `json:"updated_at"`
}

// stats describes release; nil before the first update.
func (b *banditRouter) stats(release string) *BanditStats {
	if b.post == nil {
		return nil
	}
	st := &BanditStats{ChosenShare: b.shares[release], UpdatedAt: b.at}
	if p, ok := b.post[release]; ok {
		st.N = p.N
		if !math.IsNaN(p.Mean) && !math.IsInf(p.Mean, 0) {
			st.Mean = &p.Mean
		}
		if lo, hi := p.Lower, p.Upper; !math.IsNaN(lo) && !math.IsNaN(hi) && !math.IsInf(lo, 0) && !math.IsInf(hi, 0) {
			st.CI95 = &[2]float64{lo, hi}
		}
	}
	return st
}
