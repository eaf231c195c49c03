package actors

import (
	"bytes"
	"encoding/json"
	"errors"
	"log/slog"
	"math"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/groveml/grove/conf/modelconfig"
	"github.com/groveml/grove/routing"
)

// TestARestartedBanditRouterChoosesWhatANeverRestartedOneChose: a node
// started on the bucket of one that has run a bandit router for a while
// (a restart, a rolling deploy, a node added to the fleet) begins from
// the decayed counts the running router saved in the shared contract
// state, not from the evaluator's cumulative counts at full weight: its
// first shares are those the running router chose, and its counts are
// the running router's decayed to its own first update. Taken whole, the
// cumulative counts would bring back the clicks the half-life had faded:
// v1, the best long ago and the worst now, would take the traffic.
func TestARestartedBanditRouterChoosesWhatANeverRestartedOneChose(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		cfg := strings.Replace(banditConfig("thompson", `{"immediately_valid": {}}`), `"reward": "click", "update_every": "10s"`,
			`"reward": "click", "half_life": "1m", "update_every": "10s"`, 1)
		models := map[string]faultySpec{"a/": version(1), "b/": version(2), "c/": version(3)}
		src := &servedClicks{counts: map[string][2]uint64{}}
		src.set("v1", 100_000, 5_000) // 5 %, long ago
		src.set("v2", 100_000, 2_000)
		src.set("v3", 100_000, 2_000)
		running := newWorld(t, cfg, models, func(_ *world, o *Options) { o.Outcomes = src })
		defer running.stop()
		synctest.Wait()
		// 20 half-lives later, 100,000 more each: v1 at 1 %, v2 at 3 %, v3
		// at 2 %; then time for the running router to fold and save them.
		time.Sleep(20 * time.Minute)
		src.set("v1", 200_000, 6_000)
		src.set("v2", 200_000, 5_000)
		src.set("v3", 200_000, 4_000)
		time.Sleep(2 * time.Minute)
		synctest.Wait()
		want := trafficShares(t, running, "ads/pctr/1")
		if math.Abs(want["v2"]-0.9) > 1e-9 {
			t.Fatalf("the running router's shares %v, want v2 0.9 once the old clicks have faded", want)
		}
		before, _ := running.sys.ContractStats("ads/pctr/1")

		time.Sleep(30 * time.Second)
		restarted := newWorld(t, cfg, models, func(w *world, o *Options) { w.b, o.Bucket, o.Outcomes = running.b, running.b, src })
		defer restarted.stop()
		synctest.Wait()
		got := trafficShares(t, restarted, "ads/pctr/1")
		for rv, s := range want {
			if math.Abs(got[rv]-s) > 1e-9 {
				t.Fatalf("the restarted router's first shares %v, want the running one's %v", got, want)
			}
		}
		after, _ := restarted.sys.ContractStats("ads/pctr/1")
		for i, s := range after {
			b, was := s.Bandit, before[i].Bandit
			if b == nil || was == nil {
				t.Fatalf("%s: bandit stats %+v, running %+v", s.Release, b, was)
			}
			decayed := was.N * math.Exp2(-b.UpdatedAt.Sub(was.UpdatedAt).Minutes())
			if math.Abs(b.N-decayed) > 1e-9*decayed {
				t.Errorf("%s: the restarted router's count %v, want the running one's %v decayed from %v to %v: %v",
					s.Release, b.N, was.N, was.UpdatedAt, b.UpdatedAt, decayed)
			}
		}
	})
}

// TestARestoredBanditRouterReadsTheEvaluatorAsItStands: at its first
// update a router restores the counts saved in the shared state, decayed
// from their time. A release whose valid_since has moved since they were
// saved had its evaluator counts started over: its reading, below the
// saved one, is what was scored since and is added whole. Any other
// release's reading below the saved one comes from an evaluations table
// still catching up after the restart and is ignored until it grows past
// it. Counts saved for another reward, or that cannot be read (logged),
// are not used.
func TestARestoredBanditRouterReadsTheEvaluatorAsItStands(t *testing.T) {
	cfg, err := modelconfig.Parse([]byte(banditConfig("epsilon_greedy", `{"immediately_valid": {}}`)))
	if err != nil {
		t.Fatal(err)
	}
	c := cfg.Contracts[0] // half_life 6h
	p := routing.Plan{Servables: []routing.Status{{Release: "v1", Valid: true}, {Release: "v2", Valid: true}}}
	savedAt := time.Date(2026, 5, 1, 12, 0, 0, 0, time.UTC)
	now := savedAt.Add(6 * time.Hour) // one half-life later
	was, moved := savedAt.Add(-24*time.Hour), savedAt.Add(time.Hour)
	saved := func(reward string) json.RawMessage {
		data, err := json.Marshal(banditSaved{At: savedAt, Reward: reward, Releases: map[string]banditSavedArm{
			"v1": {BanditArm: routing.BanditArm{N: 4000, Positives: 80, Seen: routing.Cumulative{Count: 100_000, Positives: 2_000}}, ValidSince: was},
			"v2": {BanditArm: routing.BanditArm{N: 4000, Positives: 120, Seen: routing.Cumulative{Count: 100_000, Positives: 3_000}}, ValidSince: was},
		}})
		if err != nil {
			t.Fatal(err)
		}
		return data
	}
	src := &servedClicks{counts: map[string][2]uint64{"v1": {600, 30}, "v2": {600, 18}}}
	for _, tc := range []struct {
		name   string
		saved  json.RawMessage
		v1, v2 float64 // the decayed counts wanted after the update
		warn   string
	}{
		{"restored", saved("click"), 2000 + 600, 2000, ""},
		{"saved for another reward", saved("purchase"), 600, 600, ""},
		{"unreadable", json.RawMessage(`{"at": "yesterday"}`), 600, 600, "bandit counts saved in the contract state not used"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var log bytes.Buffer
			shared := newSharedState(newMemBucket(), "model_config.json", slog.New(slog.NewTextHandler(&log, nil)))
			st := &modelconfig.ContractState{}
			st.Edit(c.ID(), "v1", func(r *modelconfig.ServableRecord) { r.ValidSince = moved })
			st.Edit(c.ID(), "v2", func(r *modelconfig.ServableRecord) { r.ValidSince = was })
			st.SetBandit(c.ID(), tc.saved)
			shared.publishRead(st, shared.readMark())
			b := newBanditRouter(c.ID())
			if !b.update(c, src, &p, now, shared) {
				t.Fatal("no first update")
			}
			if got := [2]float64{b.post["v1"].N, b.post["v2"].N}; math.Abs(got[0]-tc.v1) > 1e-9 || math.Abs(got[1]-tc.v2) > 1e-9 {
				t.Errorf("counts v1 %v, v2 %v; want %v, %v", got[0], got[1], tc.v1, tc.v2)
			}
			if tc.warn == "" && log.Len() > 0 || !strings.Contains(log.String(), tc.warn) {
				t.Errorf("log %q, want %q", log.String(), tc.warn)
			}
		})
	}
}

// TestABanditRouterSavesItsCountsAndAContractWithoutOneForgetsThem: a
// running bandit router saves its counts in the shared contract state
// (model_config.state.json); once the contract's router is no longer a
// bandit, the saved counts are removed, as the router forgets them.
func TestABanditRouterSavesItsCountsAndAContractWithoutOneForgetsThem(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		src := &servedClicks{counts: map[string][2]uint64{"v1": {1000, 20}, "v2": {1000, 30}, "v3": {1000, 10}}}
		cfg := banditConfig("thompson", `{"immediately_valid": {}}`)
		w := newWorld(t, cfg, map[string]faultySpec{"a/": version(1), "b/": version(2), "c/": version(3)},
			func(_ *world, o *Options) { o.Outcomes = src })
		defer w.stop()
		w.settle()
		saved := func() map[string]any {
			st, err := modelconfig.ParseContractState(w.b.get("model_config.state.json"))
			if err != nil {
				t.Fatal(err)
			}
			var out map[string]any
			if data := st.Bandits["ads/pctr/1"]; data != nil {
				if err := json.Unmarshal(data, &out); err != nil {
					t.Fatal(err)
				}
			}
			return out
		}
		got := saved()
		if got == nil || got["reward"] != "click" || len(got["releases"].(map[string]any)) != 3 {
			t.Fatalf("saved counts %v, want the three releases' clicks", got)
		}
		w.setConfig(strings.NewReplacer(`"router": "thompson", "bandit": {"reward": "click", "update_every": "10s"},`, `"router": "fair",`).Replace(cfg))
		w.settle()
		if got := saved(); got != nil {
			t.Errorf("saved counts %v after the router became fair, want none", got)
		}
	})
}

// TestABanditRouterLeavesCountsAnotherReplicaSavedRecently: a fleet's
// replicas each save their counts every banditSaveEvery into one state
// object; a save finding counts of an update less than half of that
// before its own (another replica's) leaves them, so that the object is
// written about once a minute whatever the fleet's size. Older counts,
// and counts that cannot be read, are replaced.
func TestABanditRouterLeavesCountsAnotherReplicaSavedRecently(t *testing.T) {
	at := time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)
	counts := func(t time.Time) json.RawMessage {
		return json.RawMessage(`{"at":"` + t.Format(time.RFC3339Nano) + `","reward":"click","releases":{}}`)
	}
	for _, tc := range []struct {
		name string
		held json.RawMessage
		want bool
	}{
		{"none held", nil, false},
		{"held 20s before ours", counts(at.Add(-20 * time.Second)), true},
		{"held just under half the period before ours", counts(at.Add(-banditSaveEvery/2 + time.Millisecond)), true},
		{"held half the period before ours", counts(at.Add(-banditSaveEvery / 2)), false},
		{"held a minute before ours", counts(at.Add(-banditSaveEvery)), false},
		{"held after ours", counts(at.Add(time.Second)), true},
		{"held unreadable", json.RawMessage(`{"at": 5}`), false},
	} {
		if got := banditSavedRecently(tc.held, counts(at)); got != tc.want {
			t.Errorf("%s: saved recently %v, want %v", tc.name, got, tc.want)
		}
	}
}

// TestABanditRouterRestoresOnceTheStateIsReadAndNeverSavesOverItBefore:
// a router whose node could not read the shared contract state at its
// start (the bucket unreachable for a moment) routes from the evaluator's
// counts meanwhile, but does not save them over the counts a router saved
// there: once the state is read, it restores those and chooses what a
// router that never stopped would. Saving first would have put the
// evaluator's counts at full weight in the state, for every replica
// restarted after it to start from.
func TestABanditRouterRestoresOnceTheStateIsReadAndNeverSavesOverItBefore(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		cfg := strings.Replace(banditConfig("thompson", `{"immediately_valid": {}}`), `"reward": "click", "update_every": "10s"`,
			`"reward": "click", "half_life": "1m", "update_every": "10s"`, 1)
		models := map[string]faultySpec{"a/": version(1), "b/": version(2), "c/": version(3)}
		src := &servedClicks{counts: map[string][2]uint64{}}
		src.set("v1", 100_000, 5_000)
		src.set("v2", 100_000, 2_000)
		src.set("v3", 100_000, 2_000)
		running := newWorld(t, cfg, models, func(_ *world, o *Options) { o.Outcomes = src })
		synctest.Wait()
		time.Sleep(20 * time.Minute)
		src.set("v1", 200_000, 6_000) // the old clicks faded: v2 is the best now
		src.set("v2", 200_000, 5_000)
		src.set("v3", 200_000, 4_000)
		time.Sleep(2 * time.Minute)
		synctest.Wait()
		want := trafficShares(t, running, "ads/pctr/1")
		if math.Abs(want["v2"]-0.9) > 1e-9 {
			t.Fatalf("the running router's shares %v, want v2 0.9 once the old clicks have faded", want)
		}
		running.stop() // the whole fleet restarts

		b := running.b
		state := modelconfig.StatePath("model_config.json")
		b.mu.Lock()
		b.failReads[state] = errors.New("bucket unreachable")
		b.mu.Unlock()
		restarted := newWorld(t, cfg, models, func(w *world, o *Options) { w.b, o.Bucket, o.Outcomes = b, b, src })
		defer restarted.stop()
		synctest.Wait()
		trafficShares(t, restarted, "ads/pctr/1") // its first update, from the evaluator's counts
		b.mu.Lock()
		delete(b.failReads, state)
		b.mu.Unlock()
		time.Sleep(2 * time.Minute) // polls read the state; updates and saves follow
		synctest.Wait()
		got := trafficShares(t, restarted, "ads/pctr/1")
		for rv, s := range want {
			if math.Abs(got[rv]-s) > 1e-9 {
				t.Fatalf("shares %v once the state could be read, want the running router's %v", got, want)
			}
		}
	})
}
