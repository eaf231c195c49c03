package node

import (
	"context"
	"errors"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"testing/synctest"
	"time"

	"github.com/groveml/grove/actors"
	"github.com/groveml/grove/cluster/coord"
	"github.com/groveml/grove/cluster/forward"
	"github.com/groveml/grove/conf/bucket/file"
	"github.com/groveml/grove/servables"
	"github.com/groveml/grove/servables/faulty"
)

// wantAgent is an agent not yet in a cluster whose config has the
// on-demand model w/, with the actors its record describes.
func wantAgent(t *testing.T) (*Agent, *actors.System) {
	t.Helper()
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "model_config.json"), []byte(`{"model_metadata": [{"model_path": "w/", "load": "on_demand"}]}`), 0o644); err != nil {
		t.Fatal(err)
	}
	b, err := file.Open("file://" + dir)
	if err != nil {
		t.Fatal(err)
	}
	a := bareAgent()
	a.onDemand.Store(&onDemandSet{paths: map[string]bool{"w/": true}})
	sys, err := actors.Start(actors.Options{Bucket: b, ModelConfigPath: "model_config.json", PollInterval: time.Hour,
		CacheDir: t.TempDir(), MaxModelBytes: 1 << 20, QueueSize: 8, Runtimes: servables.Registry{faulty.Runtime{}}, ClusterNode: true, Remote: a})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = sys.Stop(context.Background()) })
	return a, sys
}

// bareAgent is an agent named n1 in no cluster: no members, an empty
// table, nothing ready elsewhere, no on-demand paths until its actors
// have a config.
func bareAgent() *Agent {
	a := &Agent{cfg: Config{Name: "n1", Available: func() int64 { return -1 }}, wake: make(chan struct{}, 1), leftc: make(chan struct{}), log: slog.New(slog.DiscardHandler)}
	a.members.Store(&coord.Members{})
	a.table.Store(&coord.Placement{})
	a.ready.Store(&readyView{peers: map[string][]forward.Peer{}, changed: make(chan struct{})})
	a.models.Store(&map[string]forward.ModelInfo{})
	a.onDemand.Store(&onDemandSet{})
	a.waiting.by, a.waiting.wanted = map[string]int{}, map[string]time.Time{}
	tc := make(chan struct{})
	a.tableChanged.Store(&tc)
	return a
}

// woken reports whether the agent was asked to write its record at once.
func woken(a *Agent) bool {
	select {
	case <-a.wake:
		return true
	default:
		return false
	}
}

// A path the router wants placed counts as one request waiting for it in
// the node's record, written at once, for a minute. The router's next
// ask, a minute later, counts again at once even when the record has not
// yet dropped the expired mark, and an ask while marked writes nothing
// new; without asks the mark ends. A path that is not awaited is not
// wanted.
func TestAWantedPathCountsAsARequestWaitingUntilItsMarkEnds(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		a, sys := wantAgent(t)
		synctest.Wait()
		if !a.Want("w/") || !woken(a) {
			t.Fatal("the first Want did not mark w/ and have the record written")
		}
		if n := a.record(sys).Use["w/"].Waiting; n != 1 {
			t.Fatalf("record after Want: waiting %d, want 1", n)
		}
		time.Sleep(wantFor + 50*time.Millisecond) // the router asks again on its next tick
		if !a.Want("w/") || !woken(a) {
			t.Fatal("the second Want, after the first mark expired, did not have the record written")
		}
		if n := a.record(sys).Use["w/"].Waiting; n != 1 {
			t.Fatalf("record after the second Want: waiting %d, want 1", n)
		}
		if !a.Want("w/") || woken(a) {
			t.Fatal("a Want while w/ is marked: want it counted already, with nothing to write at once")
		}
		time.Sleep(wantFor + time.Second)
		if n := a.record(sys).Use["w/"].Waiting; n != 0 {
			t.Fatalf("record a minute after the last Want: waiting %d, want 0", n)
		}
		if a.Want("x/") || woken(a) {
			t.Fatal("a path that is not on demand was wanted")
		}
	})
}

// The agent's on-demand paths are the config's the actors applied last,
// read when first asked for (not when watchConfig's turn comes): a call
// made once a config is applied finds its new on-demand models awaited.
func TestTheOnDemandPathsFollowTheAppliedConfigAtOnce(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		a, sys := wantAgent(t)
		a.onDemand.Store(&onDemandSet{}) // as New leaves it
		synctest.Wait()
		if a.Awaits("w/") {
			t.Fatal("w/ awaited before the agent knows the actors")
		}
		a.sys.Store(sys)
		if !a.Awaits("w/") || !slices.Contains(a.Paths(), "w/") {
			t.Fatal("w/, on demand in the config applied, is not awaited")
		}
	})
}

// A versioned on-demand entry is placed by its own path, so its
// versions' use is published under it: requests for it keep it from
// going idle, as for any on-demand model.
func TestAVersionedOnDemandEntrysUseIsPublishedUnderItsPath(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		a, sys := onDemandNode(t, "v/1/",
			`{"model_metadata": [{"model_path": "v/", "load": "on_demand", "version_policy": {"latest": {"num_versions": 1}}}]}`)
		sys.SetShare([]string{"v/"}) // the table places it here
		synctest.Wait()
		x, err := servables.NewTensor("x", servables.Float32, []int64{1, 1})
		if err != nil {
			t.Fatal(err)
		}
		res, err := sys.Infer(context.Background(), []actors.Request{{API: "test", ModelPath: "v/1/", Inputs: []servables.Tensor{x}}})
		if err != nil || res[0].Err != nil {
			t.Fatalf("request for v/1/: %v %v", err, res)
		}
		synctest.Wait()
		use := a.record(sys).Use
		if u, ok := use["v/"]; !ok || u.LastUsed == 0 {
			t.Fatalf("record's use %+v: want v/ used", use)
		}
		if _, ok := use["v/1/"]; ok {
			t.Fatalf("record's use %+v: a version's use published under its own path", use)
		}
	})
}

// A shadow copy for an on-demand model placed nowhere waits for its
// placement only until its start-by, not to the end of its call's
// deadline (which leaves room for its run): it is then answered "model
// is loading", and no longer counts as a request waiting for the model.
func TestAShadowCopyWaitsForItsModelsPlacementUntilItsStartBy(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		a := bareAgent()
		a.cfg.AwaitPoll = 100 * time.Millisecond
		a.onDemand.Store(&onDemandSet{paths: map[string]bool{"w/": true}})
		ctx, cancel := context.WithTimeout(context.Background(), 31*time.Second)
		defer cancel()
		start := time.Now()
		_, err := a.Forward(ctx, forward.Request{ModelPath: "w/", Priority: forward.Shadow, StartBy: start.Add(time.Second)})
		if _, ok := errors.AsType[*actors.LoadingError](err); !ok || time.Since(start) != time.Second {
			t.Fatalf("after %v: %v, want \"model is loading\" at the copy's start-by (1s)", time.Since(start), err)
		}
		a.waiting.mu.Lock()
		defer a.waiting.mu.Unlock()
		if n := a.waiting.by["w/"]; n != 0 {
			t.Errorf("%d requests still counted waiting for w/", n)
		}
	})
}

// An on-demand copy that has taken no request since its load publishes
// its load as its last use, as one node's budget counts it: a copy just
// loaded for a request waiting here is not the first the controller
// unloads to make room, before that request reaches it.
func TestAnOnDemandCopyJustLoadedCountsAsUsedWhenItLoaded(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		a, sys := onDemandNode(t, "w/", `{"model_metadata": [{"model_path": "w/", "load": "on_demand"}]}`)
		time.Sleep(90 * time.Second) // the load's second, well after the start's
		sys.SetShare([]string{"w/"}) // the table places it here
		synctest.Wait()
		loaded := time.Now().Unix()
		if u := a.record(sys).Use["w/"]; u.LastUsed != loaded {
			t.Fatalf("record's use of w/ %+v after its load at %d with no request: want last used %d", u, loaded, loaded)
		}
	})
}

// onDemandNode starts, in the test's synctest bubble, a cluster node's
// actor system on a bucket holding a faulty model at dir and the model
// config cfg, with a bare agent as its Remote, stopped after the test;
// it returns both once the config is applied.
func onDemandNode(t *testing.T, dir, cfg string) (*Agent, *actors.System) {
	t.Helper()
	root := t.TempDir()
	if err := os.MkdirAll(filepath.Join(root, dir), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(root, dir, "model.faulty"), []byte(`{"add": 1}`), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(root, "model_config.json"), []byte(cfg), 0o644); err != nil {
		t.Fatal(err)
	}
	b, err := file.Open("file://" + root)
	if err != nil {
		t.Fatal(err)
	}
	a := bareAgent()
	sys, err := actors.Start(actors.Options{Bucket: b, ModelConfigPath: "model_config.json", PollInterval: time.Hour,
		CacheDir: t.TempDir(), MaxModelBytes: 1 << 20, QueueSize: 8, Runtimes: servables.Registry{faulty.Runtime{}}, ClusterNode: true, Remote: a})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = sys.Stop(context.Background()) })
	synctest.Wait()
	return a, sys
}
