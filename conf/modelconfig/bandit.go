package modelconfig

import (
	"encoding/json"
	"fmt"
	"math"
	"time"

	"github.com/groveml/grove/grovepb"
	"github.com/groveml/grove/internal/jsondoc"
)

// This file holds the bandit object of a contract whose router follows
// the outcomes (RouterThompson, RouterEpsilonGreedy; docs/outcomes.md).

// Bandit is a contract's bandit object, the settings of its bandit
// router. In JSON:
//
//	{"reward": "click", "prior": [1, 1], "half_life": "6h", "min_share": 0.05, "max_share": 0.95, "update_every": "10s"}
//	{"reward": "click", "epsilon": 0.1, "half_life": "6h", "update_every": "10s"}
//
// reward is required and must be the label of the contract's outcomes
// object; the others take the defaults below. prior, min_share and
// max_share are settings of thompson, epsilon of epsilon_greedy.
type Bandit struct {
	// Reward is reward, the outcomes label each release is rewarded by.
	Reward string
	// Prior is prior: Beta(α, β) of a binary reward, both above 0, [1, 1]
	// when absent; for a numeric reward, the prior mean and its weight in
	// observations (above 0), [0, 1] when absent (PriorGiven).
	Prior [2]float64
	// HalfLife is half_life: a reward counts half after it; above 0.
	HalfLife time.Duration
	// MinShare and MaxShare are min_share and max_share, the bounds of an
	// eligible release's share under thompson.
	MinShare, MaxShare float64
	// UpdateEvery is update_every: how often the shares are recomputed,
	// at least MinBanditUpdate.
	UpdateEvery time.Duration
	// Epsilon is epsilon: the share epsilon_greedy spreads over every
	// eligible release, the rest going to the best.
	Epsilon float64
	// given records which router-specific keys the object gave.
	given banditKeys
}

// The bandit object's defaults, and the shortest update_every.
const (
	DefaultBanditHalfLife    = 6 * time.Hour
	DefaultBanditMinShare    = 0.05
	DefaultBanditMaxShare    = 0.95
	DefaultBanditUpdateEvery = 10 * time.Second
	DefaultBanditEpsilon     = 0.1
	MinBanditUpdate          = time.Second
)

// The bandit routers.
const (
	// RouterThompson shares the traffic by Thompson sampling: each
	// eligible release gets the probability that its reward is the best,
	// within [min_share, max_share].
	RouterThompson Router = "thompson"
	// RouterEpsilonGreedy gives 1 − epsilon of the traffic to the release
	// with the best mean reward, and spreads epsilon over all of them.
	RouterEpsilonGreedy Router = "epsilon_greedy"
)

// PriorGiven reports whether the object gave its prior; without one, a
// numeric reward's prior is [0, 1] (mean 0, weighing one observation)
// rather than Prior's [1, 1].
func (b *Bandit) PriorGiven() bool { return b.given.prior }

// IsBandit reports whether r is a bandit router, which needs a bandit
// object.
func (r Router) IsBandit() bool { return r == RouterThompson || r == RouterEpsilonGreedy }

// banditFromProto converts a bandit object at path, applying its
// defaults; nil for none. Its errors name the key: a duration that does
// not parse. validate checks the rest.
func banditFromProto(b *grovepb.BanditConfig, path string) (*Bandit, error) {
	if b == nil {
		return nil, nil
	}
	out := &Bandit{Reward: b.GetReward(), Prior: [2]float64{1, 1}, HalfLife: DefaultBanditHalfLife, MinShare: DefaultBanditMinShare,
		MaxShare: DefaultBanditMaxShare, UpdateEvery: DefaultBanditUpdateEvery, Epsilon: DefaultBanditEpsilon, given: keysOf(b)}
	if p := b.GetPrior(); len(p) > 0 {
		if len(p) != 2 {
			return nil, &Error{Field: path + ".prior", Msg: fmt.Sprintf("prior needs two numbers, [alpha, beta], got %d", len(p))}
		}
		out.Prior = [2]float64{p[0], p[1]}
	}
	var err error
	if b.HalfLife != nil {
		if out.HalfLife, err = parseOutcomeDuration("half_life", b.GetHalfLife()); err != nil {
			return nil, &Error{Field: path + ".half_life", Msg: err.Error()}
		}
	}
	if b.UpdateEvery != nil {
		if out.UpdateEvery, err = parseOutcomeDuration("update_every", b.GetUpdateEvery()); err != nil {
			return nil, &Error{Field: path + ".update_every", Msg: err.Error()}
		}
	}
	if b.MinShare != nil {
		out.MinShare = b.GetMinShare()
	}
	if b.MaxShare != nil {
		out.MaxShare = b.GetMaxShare()
	}
	if b.Epsilon != nil {
		out.Epsilon = b.GetEpsilon()
	}
	return out, nil
}

// checkBandit checks a contract's router, bandit object b (nil: none) and
// outcomes object o together; the error's field is below the contract
// (".bandit", ".bandit.reward", ...). A key of the other router is an
// error.
func checkBandit(r Router, b *Bandit, o *Outcomes) *gateError {
	switch {
	case !r.IsBandit() && b == nil:
		return nil
	case !r.IsBandit():
		return &gateError{".bandit", fmt.Sprintf(`bandit holds the settings of router "thompson" or "epsilon_greedy", and the router is %q`, r)}
	case b == nil:
		return &gateError{".bandit", fmt.Sprintf(`router %q needs a bandit object, such as {"reward": "click"}`, r)}
	case o == nil:
		return &gateError{".bandit.reward", fmt.Sprintf(`router %q follows the outcomes: the contract needs an outcomes object (docs/outcomes.md)`, r)}
	case b.Reward == "":
		return &gateError{".bandit.reward", fmt.Sprintf("bandit needs the reward, the contract's outcomes label %q", o.Label)}
	case b.Reward != o.Label:
		return &gateError{".bandit.reward", fmt.Sprintf("reward %q is not the contract's outcomes label %q, the only label the evaluator scores for it", b.Reward, o.Label)}
	case o.Kind == OutcomeBinary && (!(b.Prior[0] > 0) || !(b.Prior[1] > 0) || math.IsInf(b.Prior[0], 0) || math.IsInf(b.Prior[1], 0)):
		return &gateError{".bandit.prior", fmt.Sprintf("prior %v needs two finite numbers above 0 (Beta(alpha, beta) of a binary reward)", b.Prior)}
	case o.Kind == OutcomeNumeric && (math.IsNaN(b.Prior[0]) || math.IsInf(b.Prior[0], 0) || !(b.Prior[1] > 0) || math.IsInf(b.Prior[1], 0)):
		return &gateError{".bandit.prior", fmt.Sprintf("prior %v needs a finite mean and a finite weight above 0 ([mean, weight] of a numeric reward)", b.Prior)}
	case b.HalfLife <= 0:
		return &gateError{".bandit.half_life", fmt.Sprintf("half_life %v must be more than 0", b.HalfLife)}
	case b.UpdateEvery < MinBanditUpdate:
		return &gateError{".bandit.update_every", fmt.Sprintf("update_every %v must be at least %v", b.UpdateEvery, MinBanditUpdate)}
	case !(b.MinShare >= 0 && b.MinShare < 1):
		return &gateError{".bandit.min_share", fmt.Sprintf("min_share %v must be from 0 to less than 1", b.MinShare)}
	case !(b.MaxShare > 0 && b.MaxShare <= 1) || b.MaxShare < b.MinShare:
		return &gateError{".bandit.max_share", fmt.Sprintf("max_share %v must be above 0, at most 1 and at least min_share %v", b.MaxShare, b.MinShare)}
	case !(b.Epsilon >= 0 && b.Epsilon <= 1):
		return &gateError{".bandit.epsilon", fmt.Sprintf("epsilon %v must be from 0 to 1", b.Epsilon)}
	case r == RouterThompson && b.given.epsilon:
		return &gateError{".bandit.epsilon", `epsilon is a setting of router "epsilon_greedy"`}
	case r == RouterEpsilonGreedy && (b.given.prior || b.given.minShare || b.given.maxShare):
		return &gateError{".bandit", `prior, min_share and max_share are settings of router "thompson"`}
	}
	return nil
}

// banditKeys records which keys of a bandit object were given.
type banditKeys struct{ prior, minShare, maxShare, epsilon bool }

// keysOf returns which of b's keys were given.
func keysOf(b *grovepb.BanditConfig) banditKeys {
	return banditKeys{prior: len(b.GetPrior()) > 0, minShare: b.MinShare != nil, maxShare: b.MaxShare != nil, epsilon: b.Epsilon != nil}
}

// banditJSON is the bandit object's canonical JSON shape: the keys of
// its router, durations in Go's syntax.
type banditJSON struct {
	Reward      string      `json:"reward"`
	Prior       *[2]float64 `json:"prior,omitempty"`
	HalfLife    string      `json:"half_life"`
	MinShare    *float64    `json:"min_share,omitempty"`
	MaxShare    *float64    `json:"max_share,omitempty"`
	UpdateEvery string      `json:"update_every"`
	Epsilon     *float64    `json:"epsilon,omitempty"`
}

// canonical returns the object's canonical JSON shape for router r, nil
// for none.
func (b *Bandit) canonical(r Router) *banditJSON {
	if b == nil {
		return nil
	}
	out := &banditJSON{Reward: b.Reward, HalfLife: b.HalfLife.String(), UpdateEvery: b.UpdateEvery.String()}
	if r == RouterEpsilonGreedy {
		out.Epsilon = &b.Epsilon
	} else {
		out.MinShare, out.MaxShare = &b.MinShare, &b.MaxShare
		if b.given.prior {
			out.Prior = &b.Prior
		}
	}
	return out
}

// DecodeBandit reads the bandit object at path of a management document
// (api/forestflow's contract settings) into dst as Parse reads it from
// the config file: the same keys in snake_case or lowerCamelCase (unknown
// ones refused) and the same defaults. null leaves dst alone. It is
// checked with the router and the outcomes object when the edited config
// is validated.
func DecodeBandit(d *jsondoc.Decoder, path string, dst **Bandit) error {
	tok, err := d.Token(path)
	switch {
	case err != nil:
		return err
	case tok == nil:
		return nil
	case tok != json.Delim('{'):
		return jsondoc.TypeError(path, "an object", tok)
	}
	optString := func(name string, get func(*grovepb.BanditConfig) **string) jsondoc.Field[grovepb.BanditConfig] {
		return jsondoc.Field[grovepb.BanditConfig]{Name: name, Decode: func(d *jsondoc.Decoder, path string, b *grovepb.BanditConfig) error {
			var s string
			if err := d.String(path, &s); err != nil {
				return err
			}
			*get(b) = &s
			return nil
		}}
	}
	optFloat := func(name string, get func(*grovepb.BanditConfig) **float64) jsondoc.Field[grovepb.BanditConfig] {
		return jsondoc.Field[grovepb.BanditConfig]{Name: name, Decode: func(d *jsondoc.Decoder, path string, b *grovepb.BanditConfig) error {
			var v float64
			if err := d.Float(path, &v); err != nil {
				return err
			}
			*get(b) = &v
			return nil
		}}
	}
	var pb grovepb.BanditConfig
	if err := jsondoc.DecodeObjectBody(d, path, []jsondoc.Field[grovepb.BanditConfig]{
		{Name: "reward", Decode: func(d *jsondoc.Decoder, path string, b *grovepb.BanditConfig) error { return d.String(path, &b.Reward) }},
		{Name: "prior", Decode: func(d *jsondoc.Decoder, path string, b *grovepb.BanditConfig) error {
			raw, err := d.Raw(path)
			if err != nil {
				return err
			}
			if err := json.Unmarshal(raw, &b.Prior); err != nil {
				return &jsondoc.Error{Field: path, Msg: "prior must be two numbers, [alpha, beta]"}
			}
			return nil
		}},
		optString("half_life", func(b *grovepb.BanditConfig) **string { return &b.HalfLife }),
		optFloat("min_share", func(b *grovepb.BanditConfig) **float64 { return &b.MinShare }),
		optFloat("max_share", func(b *grovepb.BanditConfig) **float64 { return &b.MaxShare }),
		optString("update_every", func(b *grovepb.BanditConfig) **string { return &b.UpdateEvery }),
		optFloat("epsilon", func(b *grovepb.BanditConfig) **float64 { return &b.Epsilon }),
	}, &pb); err != nil {
		return err
	}
	b, err := banditFromProto(&pb, path)
	if err != nil {
		return err
	}
	*dst = b
	return nil
}
