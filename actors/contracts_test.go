package actors

import (
	"context"
	"errors"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/groveml/grove/conf/modelconfig"
	"github.com/groveml/grove/servables"
)

// logSink records what the prediction log is handed.
type logSink struct {
	mu     sync.Mutex
	events []string // "model_path served|shadow"
}

func (s *logSink) LogPrediction(req *Request, res *Result, served bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	kind := "shadow"
	if served {
		kind = "served"
	}
	s.events = append(s.events, req.ModelPath+" "+req.Release+" "+kind)
}

func (s *logSink) seen() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.events)
}

// promotionConfig is a contract whose v1 (a/) is valid at once and whose
// v2 (b/) shadows it and becomes valid 2 s after loading; keep_latest 1
// then expires v1.
const promotionConfig = `{"model_metadata": [{"model_path": "a/"}, {"model_path": "b/"}, {"model_path": "c/"}],
 "contracts": [{"organization": "ads", "project": "pctr", "contract_number": 1, "expiration": {"keep_latest": 1},
   "servables": [
     {"release_version": "v1", "model_path": "a/"},
     {"release_version": "v2", "model_path": "b/", "validity": [{"valid_after_ms": {"ms": 2000}}], "shadow": {}}]},
   {"organization": "ads", "project": "off", "contract_number": 2,
   "servables": [{"release_version": "x", "model_path": "c/", "validity": [{"never_valid": {}}]}]}]}`

func TestAContractRoutesToItsValidReleaseShadowsTheChallengerAndExpiresTheOldRelease(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		sink := &logSink{}
		w := newWorld(t, promotionConfig, map[string]faultySpec{"a/": version(1), "b/": version(2), "c/": version(3)},
			func(_ *world, o *Options) { o.Predictions = sink })
		defer w.stop()
		synctest.Wait()
		ctx := context.Background()
		score := func(release string) (Result, string, error) {
			return w.sys.Score(ctx, "ads/pctr/1", release, Request{API: "test", Inputs: scalar(t, 3)})
		}
		res, rv, err := score("")
		if err != nil || res.Err != nil || rv != "v1" || res.ModelPath != "a/" {
			t.Fatalf("before v2 is valid: %v %v %s %+v", err, res.Err, rv, res)
		}
		synctest.Wait()
		if got := sink.seen(); !slices.Contains(got, "a/ v1 served") || !slices.Contains(got, "b/ v2 shadow") {
			t.Fatalf("logged %v, want the served answer and the shadow copy", got)
		}
		if res, rv, _ := score("v2"); res.Err != nil || rv != "v2" {
			t.Fatalf("scoring v2 directly: %v %s", res.Err, rv)
		}

		time.Sleep(2500 * time.Millisecond) // v2 valid; v1 expired by keep_latest 1
		synctest.Wait()
		if res, rv, _ := score(""); res.Err != nil || rv != "v2" {
			t.Fatalf("after v2 became valid the router picked %s (%v)", rv, res.Err)
		}
		if m := w.model("a/"); m.State != StateExpired {
			t.Fatalf("a/ after its release expired: %+v", m)
		}
		if res, _, _ := score("v1"); !errors.Is(res.Err, ErrModelNotFound) {
			t.Fatalf("scoring the expired, unloaded v1: %v", res.Err)
		}
		stats, err := w.sys.ContractStats("ads/pctr/1")
		if err != nil || len(stats) != 2 || !stats[0].Expired || !stats[1].Valid || stats[1].Served != 2 || stats[1].TrafficShare != 1 ||
			stats[1].ShadowExecutions != 1 || stats[1].Created == nil || stats[1].Latency.Count != 2 {
			t.Fatalf("stats: %v %+v", err, stats)
		}
		plan, err := w.sys.ContractPlan("ads/pctr/1")
		if err != nil || len(plan.Servables) != 2 {
			t.Fatalf("plan: %v %+v", err, plan)
		}
	})
}

func TestContractCallsThatCannotBeRoutedFailWithTheirOwnErrors(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		w := newWorld(t, promotionConfig, map[string]faultySpec{"a/": version(1), "b/": version(2), "c/": version(3)})
		defer w.stop()
		synctest.Wait()
		ctx := context.Background()
		for _, tc := range []struct {
			id, release string
			want        error
			kind        servables.Kind
		}{
			{"ads/none/1", "", ErrUnknownContract, servables.NotFound},
			{"ads/pctr/1", "v9", ErrUnknownRelease, servables.NotFound},
			{"ads/off/2", "", ErrNoActiveServable, servables.Unavailable},
		} {
			_, _, err := w.sys.Score(ctx, tc.id, tc.release, Request{Inputs: scalar(t, 1)})
			if !errors.Is(err, tc.want) || servables.KindOf(err) != tc.kind {
				t.Errorf("score %s %q: %v, want %v", tc.id, tc.release, err, tc.want)
			}
		}
		if _, err := w.sys.ContractStats("ads/none/1"); !errors.Is(err, ErrUnknownContract) {
			t.Errorf("stats of an unknown contract: %v", err)
		}
		if _, err := w.sys.ContractPlan("ads/none/1"); !errors.Is(err, ErrUnknownContract) {
			t.Errorf("plan of an unknown contract: %v", err)
		}
		if _, err := w.sys.Servable("ads/pctr/1", "v9"); !errors.Is(err, ErrUnknownRelease) {
			t.Errorf("unknown servable: %v", err)
		}
		ids := []string{}
		list, err := w.sys.Contracts()
		if err != nil {
			t.Fatal(err)
		}
		for _, k := range list {
			ids = append(ids, k.ID())
		}
		if strings.Join(ids, " ") != "ads/off/2 ads/pctr/1" {
			t.Errorf("Contracts = %v", ids)
		}
	})
}

func TestManagementEditsLandInTheBucketAndApplyBeforeReturning(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		w := newWorld(t, promotionConfig, map[string]faultySpec{"a/": version(1), "b/": version(2), "c/": version(3), "d/": version(4)})
		defer w.stop()
		synctest.Wait()
		ctx := context.Background()
		cfg, err := w.sys.EditConfig(ctx, func(c *modelconfig.Config) error {
			c.Models = append(c.Models, modelconfig.Model{Path: "d/"})
			return nil
		})
		if err != nil || len(cfg.Models) != 4 {
			t.Fatalf("EditConfig: %v", err)
		}
		if _, err := modelconfig.Parse(w.b.get("model_config.json")); err != nil {
			t.Fatalf("the config written back does not parse: %v", err)
		}
		if m := w.model("d/"); m.State != StateLoading && m.State != StateReady {
			t.Fatalf("the edit was not applied before EditConfig returned: %+v", m)
		}
		if _, err := w.sys.EditConfig(ctx, func(c *modelconfig.Config) error {
			c.Models = append(c.Models, modelconfig.Model{Path: "/abs"})
			return nil
		}); err == nil {
			t.Fatal("an edit making the config invalid was written")
		}

		u := modelconfig.MetricsUpdate{Set: map[string]float64{"auc": 0.8}}
		got, err := w.sys.SetMetrics(ctx, "ads/pctr/1", "v2", u)
		if err != nil || got["auc"] != 0.8 {
			t.Fatalf("SetMetrics: %v %v", got, err)
		}
		if _, err := w.sys.SetMetrics(ctx, "ads/pctr/1", "v9", u); !errors.Is(err, ErrUnknownRelease) {
			t.Fatalf("metrics for an unknown release: %v", err)
		}
		info, err := w.sys.Servable("ads/pctr/1", "v2")
		if err != nil || !info.Ready || info.Metrics["auc"] != 0.8 {
			t.Fatalf("Servable: %+v %v", info, err)
		}
		if err := w.sys.DeleteServable(ctx, "ads/pctr/1", "v1"); err != nil {
			t.Fatal(err)
		}
		k, err := w.sys.Contract("ads/pctr/1")
		if err != nil || len(k.Servables) != 1 || k.Servables[0].ReleaseVersion != "v2" {
			t.Fatalf("contract after the deletion: %+v %v", k, err)
		}
		w.b.set("model_config.json", []byte(`{`))
		if _, err := w.sys.EditConfig(ctx, func(*modelconfig.Config) error { return nil }); err == nil || !strings.Contains(err.Error(), "fix it first") {
			t.Fatalf("editing a broken config: %v", err)
		}
	})
}

func TestManagementEditGivingADirectlyCalledModelOutcomesWithoutFullLoggingIsRefused(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		w := newWorld(t, promotionConfig, map[string]faultySpec{"a/": version(1), "b/": version(2), "c/": version(3)})
		defer w.stop()
		synctest.Wait()
		before := string(w.b.get("model_config.json"))
		_, err := w.sys.EditConfig(context.Background(), func(c *modelconfig.Config) error {
			c.Models[0].Outcomes = &modelconfig.Outcomes{Label: "click", Kind: modelconfig.OutcomeBinary, Window: time.Minute, Lateness: time.Minute}
			return nil
		})
		var cerr *modelconfig.Error
		if !errors.As(err, &cerr) || !strings.Contains(err.Error(), "outcomes are joined to logged predictions") {
			t.Fatalf("EditConfig: %v", err)
		}
		if after := string(w.b.get("model_config.json")); after != before {
			t.Fatalf("the refused edit was written:\n%s", after)
		}
	})
}

func TestManagementOfAReadOnlyBucketIsRefused(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		w := newWorld(t, promotionConfig, map[string]faultySpec{"a/": version(1), "b/": version(2), "c/": version(3)},
			func(w *world, o *Options) { o.Bucket = readOnly{w.b} })
		defer w.stop()
		synctest.Wait()
		ctx := context.Background()
		if _, err := w.sys.EditConfig(ctx, func(*modelconfig.Config) error { return nil }); !errors.Is(err, ErrReadOnly) || servables.KindOf(err) != servables.ReadOnly {
			t.Fatalf("EditConfig: %v", err)
		}
		u := modelconfig.MetricsUpdate{Set: map[string]float64{"auc": 0.8}}
		if _, err := w.sys.SetMetrics(ctx, "ads/pctr/1", "v2", u); !errors.Is(err, ErrReadOnly) {
			t.Fatalf("SetMetrics: %v", err)
		}
	})
}

// readOnly hides the writer of a bucket.
type readOnly struct{ *memBucket }

func (readOnly) WriteObject() {}

// TestACallAfterAConfigAddsAContractIsRoutedByIt checks that the router
// takes a new config's contracts before any call sent once the config is
// applied, even when those calls reach its mailbox first: it holds the
// router busy while the config is applied and the call is sent.
func TestACallAfterAConfigAddsAContractIsRoutedByIt(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		w := newWorld(t, `{"model_metadata": [{"model_path": "a/"}]}`, map[string]faultySpec{"a/": version(1)})
		defer w.stop()
		synctest.Wait()
		release := make(chan struct{})
		busy := make(chan error, 1)
		go func() {
			busy <- w.sys.askRouter(context.Background(), func(*routerActor) { <-release })
		}()
		synctest.Wait()
		w.setConfig(`{"model_metadata": [{"model_path": "a/"}],
		  "contracts": [{"organization": "ads", "project": "new", "contract_number": 1,
		    "servables": [{"release_version": "v1", "model_path": "a/"}]}]}`)
		if cfg, _ := w.sys.AppliedConfig(); cfg == nil || len(cfg.Contracts) != 1 {
			t.Fatalf("config applied: %+v", cfg)
		}
		type answer struct {
			res     Result
			release string
			err     error
		}
		called := make(chan answer, 1)
		go func() {
			res, rv, err := w.sys.Score(context.Background(), "ads/new/1", "", Request{API: "test", Inputs: scalar(t, 3)})
			called <- answer{res, rv, err}
		}()
		synctest.Wait() // the call's batch waits in the router's mailbox
		close(release)
		if err := <-busy; err != nil {
			t.Fatal(err)
		}
		a := <-called
		if a.err != nil || a.res.Err != nil || a.release != "v1" {
			t.Fatalf("the call sent after the config that added its contract was applied: %v %v %q", a.err, a.res.Err, a.release)
		}
	})
}

// gateHandler holds the goroutine that logs a message containing match
// until gate is closed, and closes blocked the first time.
type gateHandler struct {
	slog.Handler
	match   string
	gate    chan struct{}
	blocked chan struct{}
	once    *sync.Once
}

func (h gateHandler) Handle(ctx context.Context, r slog.Record) error {
	if strings.Contains(r.Message, h.match) {
		h.once.Do(func() { close(h.blocked) })
		<-h.gate
	}
	return h.Handler.Handle(ctx, r)
}

func (h gateHandler) WithAttrs(a []slog.Attr) slog.Handler {
	h.Handler = h.Handler.WithAttrs(a)
	return h
}

func (h gateHandler) WithGroup(n string) slog.Handler {
	h.Handler = h.Handler.WithGroup(n)
	return h
}

// TestAConfigIsVisibleOnlyOnceItsContractsRoutesAndOnDemandModelsAre: a
// config adding a contract whose release's model is on demand and new is
// not shown (AppliedConfig) while the supervisor is still applying it, so
// a caller woken by the change finds the release routable and its call
// loads the model, rather than "no active servables" (or "unknown
// contract"). The supervisor is held on a log line it writes mid-apply.
func TestAConfigIsVisibleOnlyOnceItsContractsRoutesAndOnDemandModelsAre(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		gh := gateHandler{match: "model removed from config", gate: make(chan struct{}), blocked: make(chan struct{}), once: &sync.Once{}}
		w := newWorld(t, `{"model_metadata": [{"model_path": "a/"}, {"model_path": "b/"}]}`,
			map[string]faultySpec{"a/": version(1), "b/": version(1), "w/": version(2)}, func(_ *world, o *Options) {
				gh.Handler = o.Logger.Handler()
				o.Logger = slog.New(gh)
			})
		defer w.stop()
		synctest.Wait()
		_, changed := w.sys.AppliedConfig()
		w.b.set("model_config.json", []byte(`{"model_metadata": [{"model_path": "a/"}, {"model_path": "w/", "load": "on_demand"}],
		  "contracts": [{"organization": "ads", "project": "new", "contract_number": 1,
		    "servables": [{"release_version": "v1", "model_path": "w/"}]}]}`))
		<-gh.blocked // the supervisor is applying the config (b/ leaves it)
		synctest.Wait()
		select {
		case <-changed:
			t.Fatal("the config is shown while the supervisor is still applying it")
		default:
		}
		close(gh.gate)
		<-changed
		res, rv, err := w.sys.Score(context.Background(), "ads/new/1", "", Request{API: "test", Inputs: scalar(t, 3)})
		if err != nil || res.Err != nil || rv != "v1" {
			t.Fatalf("a call once the config is shown: release %q, %v %v; want v1 answered", rv, err, res.Err)
		}
	})
}

// ValidSince gives the outcome evaluator when each release became valid,
// as the contract state shared by the replicas records it: v1 at once,
// v2 once its valid_after_ms has passed, none before.
func TestValidSinceIsWhenTheContractStateRecordsEachReleaseValid(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		w := newWorld(t, promotionConfig, map[string]faultySpec{"a/": version(1), "b/": version(2), "c/": version(3)})
		defer w.stop()
		w.settle()
		start := time.Now()
		if _, ok := w.sys.ValidSince("ads/pctr/1", "v1"); !ok {
			t.Fatal("v1, valid at once, has no valid_since")
		}
		if _, ok := w.sys.ValidSince("ads/pctr/1", "v2"); ok {
			t.Fatal("v2 has a valid_since before its valid_after_ms passed")
		}
		time.Sleep(3 * time.Second)
		synctest.Wait()
		if got, ok := w.sys.ValidSince("ads/pctr/1", "v2"); !ok || got.Before(start) {
			t.Fatalf("v2 after its valid_after_ms: %v %v", got, ok)
		}
		if _, ok := w.sys.ValidSince("ads/none/1", "v1"); ok {
			t.Fatal("an unknown contract has a valid_since")
		}
	})
}
