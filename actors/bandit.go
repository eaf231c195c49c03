package actors

import (
	"encoding/json"
	"fmt"
	"hash/fnv"
	"math"
	"math/rand/v2"
	"slices"
	"sync/atomic"
	"time"

	"github.com/groveml/grove/conf/modelconfig"
	"github.com/groveml/grove/routing"
)

// banditRouter is the state of a contract's bandit router
// (modelconfig.RouterThompson, RouterEpsilonGreedy): its decayed counts,
// the shares it chose at its last update and each release's posterior
// then. The router actor owns it, in the contract's state, and updates it
// on the first plan after each update_every. It saves its counts in the
// shared contract state (banditSaveEvery) and, at its first update once
// that state has been read, starts from the counts saved there, so that
// a restart changes nothing but what time does.
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
	// restored is set once it has looked for counts saved in a shared
	// state read from the bucket (sharedState.known), whether or not it
	// found any; it saves none before.
	restored bool
	// savedAt is when it last saved its counts (zero: never); saved
	// holds them, for the shared state's writer.
	savedAt time.Time
	saved   atomic.Pointer[json.RawMessage]
}

// banditSaveEvery is how often a bandit router saves its counts to the
// shared contract state: at its first update this long after the last
// save. A router started from them (after a restart) weighs what was
// scored between that save and its first update as scored at that update,
// where a router that kept running weighed part of it as older.
const banditSaveEvery = time.Minute

// banditSaved is the JSON object of a bandit router's saved counts
// (modelconfig.ContractState.Bandits): the time of the update they are
// of, the reward they count, and each release's decayed counts with the
// evaluator's cumulative reading they last folded and the release's
// valid_since then (the evaluator counts since_valid from it).
type banditSaved struct {
	At       time.Time                 `json:"at"`
	Reward   string                    `json:"reward"`
	Numeric  bool                      `json:"numeric,omitempty"`
	Releases map[string]banditSavedArm `json:"releases"`
}

// banditSavedArm is one release's part of banditSaved: its counts
// (routing.BanditArm, whose JSON fields it carries) and the release's
// valid_since when they were saved.
type banditSavedArm struct {
	routing.BanditArm
	ValidSince time.Time `json:"valid_since,omitzero"`
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
// updated. Its first update once shared (nil: none) has been read from
// the bucket starts from the counts saved there when they count the same
// reward: until then (the bucket could not be read at start) it folds
// the evaluator's counts, and those counts, which the saved ones then
// replace, are not saved. From then on it saves its counts there every
// banditSaveEvery.
func (b *banditRouter) update(c modelconfig.Contract, src OutcomeSource, p *routing.Plan, now time.Time, shared *sharedState) bool {
	eligible := p.Eligible()
	if now.Before(b.next) && slices.Equal(eligible, b.eligible) {
		return false
	}
	if !b.restored && shared != nil && shared.known() {
		b.restored = true
		if err := b.restore(c, shared.load()); err != nil {
			shared.log.Warn("bandit counts saved in the contract state not used; the bandit starts from the evaluator's counts", "contract", c.ID(), "err", err)
		}
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
	if b.restored && shared.writable() && (b.savedAt.IsZero() || !now.Before(b.savedAt.Add(banditSaveEvery))) {
		b.save(c, shared, now)
	}
	return true
}

// restore makes the counts saved in st for contract c, if any, and if
// they count c's reward, the router's state; a release whose valid_since
// in st is not the one saved has had its evaluator counts started over,
// so its next reading is taken whole.
func (b *banditRouter) restore(c modelconfig.Contract, st *modelconfig.ContractState) error {
	data := st.Bandits[c.ID()]
	if data == nil {
		return nil
	}
	var saved banditSaved
	if err := json.Unmarshal(data, &saved); err != nil {
		return fmt.Errorf("bandit counts saved for contract %s: %w", c.ID(), err)
	}
	if saved.Reward != c.Bandit.Reward || saved.Numeric != banditSettings(c).Numeric {
		return nil // learned of another reward: start over, as a reload does
	}
	snap := routing.BanditSnapshot{At: saved.At, Arms: make(map[string]routing.BanditArm, len(saved.Releases))}
	for rv, a := range saved.Releases {
		if !a.ValidSince.Equal(st.Record(c.ID(), rv).ValidSince) {
			a.Seen = routing.Cumulative{}
		}
		snap.Arms[rv] = a.BanditArm
	}
	state, err := routing.RestoreBanditState(snap)
	if err != nil {
		return fmt.Errorf("bandit counts saved for contract %s: %w", c.ID(), err)
	}
	b.state = state
	return nil
}

// banditSavedRecently reports whether the counts held in the state
// (held) are of an update less than half of banditSaveEvery before that
// of ours, or after it: another replica saved them, and its counts, read
// from the same evaluator, are as good as ours. Each replica of a fleet
// saves every banditSaveEvery, so without this the state object would be
// written once a minute per replica (one object, written with a
// conditional write each time); with it, about once a minute in all.
// Counts that cannot be read are replaced.
func banditSavedRecently(held, ours json.RawMessage) bool {
	var h, o struct {
		At time.Time `json:"at"`
	}
	if held == nil || json.Unmarshal(held, &h) != nil || json.Unmarshal(ours, &o) != nil || h.At.IsZero() {
		return false
	}
	return h.At.After(o.At.Add(-banditSaveEvery / 2))
}

// save asks shared to record the router's counts as of its update at now.
func (b *banditRouter) save(c modelconfig.Contract, shared *sharedState, now time.Time) {
	snap := b.state.Snapshot()
	st := shared.load()
	saved := banditSaved{At: snap.At, Reward: c.Bandit.Reward, Numeric: banditSettings(c).Numeric,
		Releases: make(map[string]banditSavedArm, len(snap.Arms))}
	for rv, a := range snap.Arms {
		saved.Releases[rv] = banditSavedArm{BanditArm: a, ValidSince: st.Record(c.ID(), rv).ValidSince}
	}
	data, err := json.Marshal(saved)
	if err != nil {
		shared.log.Warn("bandit counts not saved", "contract", c.ID(), "err", err)
		return
	}
	raw := json.RawMessage(data)
	b.saved.Store(&raw)
	b.savedAt = now
	shared.saveBandit(c.ID(), &b.saved)
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
