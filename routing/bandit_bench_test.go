package routing

import (
	"math/rand/v2"
	"testing"
	"time"

	"github.com/groveml/grove/conf/modelconfig"
)

// BenchmarkBanditUpdate is one update of a three-release contract's
// bandit, what the router actor does every update_every (one op).
func BenchmarkBanditUpdate(b *testing.B) {
	for _, router := range []modelconfig.Router{modelconfig.RouterThompson, modelconfig.RouterEpsilonGreedy} {
		b.Run(string(router), func(b *testing.B) {
			var s BanditState
			rng := rand.New(rand.NewPCG(1, 2))
			set := DefaultBanditSettings(false)
			eligible := []string{"v1", "v2", "v3"}
			now := time.Unix(1_800_000_000, 0)
			n := uint64(0)
			for b.Loop() {
				n += 1000
				cum := map[string]Cumulative{"v1": {Count: n, Positives: n / 50}, "v2": {Count: n, Positives: n * 22 / 1000}, "v3": {Count: n, Positives: n * 18 / 1000}}
				now = now.Add(10 * time.Second)
				s.Update(now, router, set, cum, eligible, rng)
			}
		})
	}
}
