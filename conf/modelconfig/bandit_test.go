package modelconfig

import (
	"strings"
	"testing"
	"time"

	"github.com/groveml/grove/internal/jsondoc"
)

// banditContract is a config whose contract has the given router and
// members (after the outcomes object, which learns clicks).
func banditContract(router, members string) string {
	return `{"model_metadata": [{"model_path": "a/"}, {"model_path": "b/"}],
 "contracts": [{"organization": "ads", "project": "pctr", "contract_number": 1, "router": "` + router + `",
   "outcomes": {"label": "click", "window": "30m"}` + members + `,
   "servables": [{"release_version": "v1", "model_path": "a/", "logging": {"log_level": "FULL"}},
                 {"release_version": "v2", "model_path": "b/", "logging": {"log_level": "FULL"}}]}]}`
}

func TestBanditRoutersTakeTheirSettingsWithDefaults(t *testing.T) {
	for _, tc := range []struct {
		name, router, members string
		want                  Bandit
	}{
		{"thompson, defaults", "thompson", `, "bandit": {"reward": "click"}`,
			Bandit{Reward: "click", Prior: [2]float64{1, 1}, HalfLife: 6 * time.Hour, MinShare: 0.05, MaxShare: 0.95, UpdateEvery: 10 * time.Second, Epsilon: 0.1}},
		{"thompson, every key", "thompson", `, "bandit": {"reward": "click", "prior": [2, 50], "half_life": "1h", "min_share": 0.1, "max_share": 0.8, "update_every": "30s"}`,
			Bandit{Reward: "click", Prior: [2]float64{2, 50}, HalfLife: time.Hour, MinShare: 0.1, MaxShare: 0.8, UpdateEvery: 30 * time.Second, Epsilon: 0.1,
				given: banditKeys{prior: true, minShare: true, maxShare: true}}},
		{"epsilon_greedy in lowerCamelCase", "epsilon_greedy", `, "bandit": {"reward": "click", "epsilon": 0.2, "halfLife": "2h", "updateEvery": "5s"}`,
			Bandit{Reward: "click", Prior: [2]float64{1, 1}, HalfLife: 2 * time.Hour, MinShare: 0.05, MaxShare: 0.95, UpdateEvery: 5 * time.Second, Epsilon: 0.2,
				given: banditKeys{epsilon: true}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, err := Parse([]byte(banditContract(tc.router, tc.members)))
			if err != nil {
				t.Fatal(err)
			}
			k := c.Contracts[0]
			if string(k.Router) != tc.router || !k.Router.IsBandit() || k.Bandit == nil || *k.Bandit != tc.want {
				t.Fatalf("router %q bandit %+v, want %q %+v", k.Router, k.Bandit, tc.router, tc.want)
			}
			// The canonical JSON parses back to the same settings.
			data, err := c.Validate()
			if err != nil {
				t.Fatal(err)
			}
			again, err := Parse(data)
			if err != nil {
				t.Fatalf("%v\n%s", err, data)
			}
			if b := again.Contracts[0].Bandit; b.Reward != tc.want.Reward || b.Prior != tc.want.Prior || b.HalfLife != tc.want.HalfLife ||
				b.UpdateEvery != tc.want.UpdateEvery || (tc.router == "thompson" && (b.MinShare != tc.want.MinShare || b.MaxShare != tc.want.MaxShare)) ||
				(tc.router == "epsilon_greedy" && b.Epsilon != tc.want.Epsilon) {
				t.Errorf("after a round trip %+v, want %+v:\n%s", b, tc.want, data)
			}
		})
	}
}

func TestBanditSettingsErrorsNameTheKey(t *testing.T) {
	for _, tc := range []struct {
		name, router, members, want string
	}{
		{"bandit router without bandit", "thompson", ``, `contracts[0].bandit: contract ads/pctr/1: router "thompson" needs a bandit object`},
		{"bandit without a bandit router", "fair", `, "bandit": {"reward": "click"}`, `contracts[0].bandit: contract ads/pctr/1: bandit holds the settings of router "thompson" or "epsilon_greedy", and the router is "fair"`},
		{"no reward", "thompson", `, "bandit": {}`, `contracts[0].bandit.reward: contract ads/pctr/1: bandit needs the reward, the contract's outcomes label "click"`},
		{"reward not the label", "thompson", `, "bandit": {"reward": "conversion"}`, `reward "conversion" is not the contract's outcomes label "click"`},
		{"prior of one number", "thompson", `, "bandit": {"reward": "click", "prior": [1]}`, `contracts[0].bandit.prior: prior needs two numbers, [alpha, beta], got 1`},
		{"prior zero", "thompson", `, "bandit": {"reward": "click", "prior": [0, 1]}`, `contracts[0].bandit.prior: contract ads/pctr/1: prior [0 1] needs two finite numbers above 0`},
		{"half_life zero", "thompson", `, "bandit": {"reward": "click", "half_life": "0s"}`, `half_life 0s must be more than 0`},
		{"half_life not a duration", "thompson", `, "bandit": {"reward": "click", "half_life": "6 hours"}`, `contracts[0].bandit.half_life: half_life "6 hours" is not a duration`},
		{"update_every too short", "thompson", `, "bandit": {"reward": "click", "update_every": "100ms"}`, `update_every 100ms must be at least 1s`},
		{"min_share 1", "thompson", `, "bandit": {"reward": "click", "min_share": 1}`, `min_share 1 must be from 0 to less than 1`},
		{"max_share below min_share", "thompson", `, "bandit": {"reward": "click", "min_share": 0.5, "max_share": 0.4}`, `max_share 0.4 must be above 0, at most 1 and at least min_share 0.5`},
		{"epsilon above 1", "epsilon_greedy", `, "bandit": {"reward": "click", "epsilon": 1.5}`, `epsilon 1.5 must be from 0 to 1`},
		{"epsilon with thompson", "thompson", `, "bandit": {"reward": "click", "epsilon": 0.1}`, `epsilon is a setting of router "epsilon_greedy"`},
		{"min_share with epsilon_greedy", "epsilon_greedy", `, "bandit": {"reward": "click", "min_share": 0.1}`, `prior, min_share and max_share are settings of router "thompson"`},
		{"unknown key", "thompson", `, "bandit": {"reward": "click", "arms": 3}`, `contracts[0].bandit: unknown field "arms"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Parse([]byte(banditContract(tc.router, tc.members)))
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("error %v, want it to contain %q", err, tc.want)
			}
		})
	}
	// A bandit router decides the ramp: no linear phase_in.
	ramp := strings.Replace(banditContract("epsilon_greedy", `, "bandit": {"reward": "click"}`), `"model_path": "a/",`, `"model_path": "a/", "phase_in": {"linear_over_secs": {"secs": 60}},`, 1)
	if _, err := Parse([]byte(ramp)); err == nil || !strings.Contains(err.Error(),
		`servables[0].phase_in: contract ads/pctr/1: release v1: router "epsilon_greedy" decides the traffic by the outcomes; leave phase_in immediate`) {
		t.Errorf("a ramp under a bandit: %v", err)
	}
	// A numeric reward takes a prior [mean, weight].
	numeric := func(members string) error {
		_, err := Parse([]byte(strings.Replace(banditContract("thompson", members), `"window": "30m"`, `"window": "30m", "kind": "numeric"`, 1)))
		return err
	}
	if err := numeric(`, "bandit": {"reward": "click", "prior": [-2.5, 10]}`); err != nil {
		t.Errorf("a numeric reward with a negative prior mean: %v", err)
	}
	if err := numeric(`, "bandit": {"reward": "click", "prior": [3, 0]}`); err == nil || !strings.Contains(err.Error(), "needs a finite mean and a finite weight above 0") {
		t.Errorf("a numeric reward with a prior of no weight: %v", err)
	}
	// A bandit router needs the contract's outcomes.
	var err error
	_, err = Parse([]byte(`{"model_metadata": [{"model_path": "a/"}], "contracts": [{"organization": "ads", "project": "pctr", "contract_number": 1,
  "router": "thompson", "bandit": {"reward": "click"}, "servables": [{"release_version": "v1", "model_path": "a/"}]}]}`))
	if err == nil || !strings.Contains(err.Error(), `router "thompson" follows the outcomes: the contract needs an outcomes object`) {
		t.Errorf("thompson without outcomes: %v", err)
	}
}

func TestDecodeBanditReadsTheConfigFilesKeys(t *testing.T) {
	var b *Bandit
	d := jsondoc.NewDecoder([]byte(`{"reward": "click", "prior": [3, 7], "max_share": 0.9, "updateEvery": "20s"}`))
	if err := DecodeBandit(d, "bandit", &b); err != nil {
		t.Fatal(err)
	}
	want := Bandit{Reward: "click", Prior: [2]float64{3, 7}, HalfLife: 6 * time.Hour, MinShare: 0.05, MaxShare: 0.9, UpdateEvery: 20 * time.Second, Epsilon: 0.1,
		given: banditKeys{prior: true, maxShare: true}}
	if b == nil || *b != want {
		t.Fatalf("%+v, want %+v", b, want)
	}
	for _, bad := range []struct{ doc, want string }{
		{`{"reward": "click", "prior": "flat"}`, `bandit.prior: prior must be two numbers`},
		{`{"reward": "click", "half_life": 6}`, `bandit.half_life: expected a string`},
		{`{"reward": "click", "wat": 1}`, `unknown field "wat"`},
		{`[]`, `bandit: expected an object`},
	} {
		var b *Bandit
		err := DecodeBandit(jsondoc.NewDecoder([]byte(bad.doc)), "bandit", &b)
		if err == nil || !strings.Contains(err.Error(), bad.want) {
			t.Errorf("%s: %v, want %q", bad.doc, err, bad.want)
		}
	}
}

// TestABanditsReleaseTakesRollbackWhenTrafficBoundsWithoutARamp: under a
// bandit router a release's phase-in stays immediate and rollback_when's
// traffic bounds watch it as long as it serves, so they need no ramp
// there (another router still refuses them without one).
func TestABanditsReleaseTakesRollbackWhenTrafficBoundsWithoutARamp(t *testing.T) {
	data := strings.Replace(banditContract("thompson", `, "bandit": {"reward": "click"}`),
		`{"release_version": "v2", "model_path": "b/", "logging": {"log_level": "FULL"}}`,
		`{"release_version": "v2", "model_path": "b/", "logging": {"log_level": "FULL"}, "rollback_when": {"min_requests": 500, "max_error_rate": 0.01}}`, 1)
	c, err := Parse([]byte(data))
	if err != nil {
		t.Fatal(err)
	}
	if rw := c.Contracts[0].Servables[1].RollbackWhen; rw == nil || rw.MinRequests != 500 || rw.MaxErrorRate == nil || *rw.MaxErrorRate != 0.01 {
		t.Fatalf("v2's rollback_when %+v", rw)
	}
	fair := strings.Replace(strings.Replace(data, `"router": "thompson"`, `"router": "fair"`, 1), `, "bandit": {"reward": "click"}`, ``, 1)
	if _, err := Parse([]byte(fair)); err == nil || !strings.Contains(err.Error(), "rollback_when watches a release while it phases in, and phase_in is immediate") {
		t.Fatalf("router fair, rollback_when traffic bounds without a ramp: %v", err)
	}
}
