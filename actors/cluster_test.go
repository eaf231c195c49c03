package actors

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/groveml/grove/cluster/forward"
	"github.com/groveml/grove/routing/quality"
	"github.com/groveml/grove/servables"
)

// TestSetShare: a cluster node loads only its share of the config, loads
// a model when the share gains it, unloads one the share lost after its
// grace period, and a nil share is every model again.
func TestSetShare(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		cfg := configJSON(entry("a/", "", `"eviction_grace_period_in_ms": 3000`), entry("b/", "", `"eviction_grace_period_in_ms": 3000`))
		w := newWorld(t, cfg, map[string]faultySpec{"a/": {}, "b/": {}})
		defer w.stop()
		w.sys.SetShare([]string{"a/"}) // before the first poll: the first config is filtered
		w.settle()
		if got, _ := w.sys.AppliedConfig(); got == nil || len(got.Models) != 2 {
			t.Fatalf("applied config: %+v, want both models (the share filters the loads, not the config)", got)
		}
		if st := w.model("a/").State; st != StateReady {
			t.Fatalf("a/ is %s, want ready", st)
		}
		for _, m := range w.sys.Status().Models {
			if m.Path == "b/" {
				t.Fatalf("b/ is outside the share but has a status: %+v", m)
			}
		}
		if res := w.infer("b/", 1); !errors.Is(res.Err, ErrModelNotFound) {
			t.Fatalf("b/ outside the share answered %v, want not found (no remote)", res.Err)
		}

		_, changed := w.sys.AppliedConfig()
		w.sys.SetShare([]string{"a/", "b/"})
		synctest.Wait()
		if st := w.model("b/").State; st != StateReady {
			t.Fatalf("b/ joined the share but is %s", st)
		}
		if res := w.infer("b/", 1); res.Err != nil {
			t.Fatalf("b/ after joining the share: %v", res.Err)
		}

		w.sys.SetShare([]string{"b/"})
		synctest.Wait()
		if st := w.model("a/").State; st != StateEvicting {
			t.Fatalf("a/ left the share but is %s, want evicting for its grace period", st)
		}
		if res := w.infer("a/", 1); res.Err != nil {
			t.Fatalf("a/ in its grace period: %v", res.Err)
		}
		time.Sleep(3 * time.Second)
		synctest.Wait()
		for _, m := range w.sys.Status().Models {
			if m.Path == "a/" {
				t.Fatalf("a/ still held after its grace period: %+v", m)
			}
		}

		w.sys.SetShare(nil)
		synctest.Wait()
		if st := w.model("a/").State; st != StateReady {
			t.Fatalf("nil share: a/ is %s, want ready", st)
		}
		select {
		case <-changed:
			t.Fatal("the applied config's channel closed though the config did not change")
		default:
		}
		w.setConfig(configJSON(entry("a/", "", "")))
		select {
		case <-changed:
		default:
			t.Fatal("a new config did not close the applied config's channel")
		}
	})
}

// TestSetShareVersions: a versioned entry's share is its path, for
// each of its versions.
func TestSetShareVersions(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		cfg := configJSON(entry("v/", "", `"version_policy": {"all": {}}`), entry("b/", "", ""))
		w := newWorld(t, cfg, map[string]faultySpec{"v/1/": {}, "v/2/": {}, "b/": {}})
		defer w.stop()
		w.sys.SetShare([]string{"v/"})
		w.settle()
		for _, p := range []string{"v/1/", "v/2/"} {
			if st := w.model(p).State; st != StateReady {
				t.Fatalf("%s is %s, want ready", p, st)
			}
		}
		if res := w.infer("b/", 1); servables.KindOf(res.Err) != servables.NotFound {
			t.Fatalf("b/ outside the share: %v", res.Err)
		}
	})
}

// TestForwardedNotHereCountsNothing: a request another node forwarded
// here for a model not ready here fails Unavailable (the forwarding node
// tries another replica) and is not counted in this node's
// grove_model_requests_total: it did not execute here, and the
// forwarding node counts the hop (docs/cluster.md, "Counting"). One it
// serves counts here.
func TestForwardedNotHereCountsNothing(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		w := newWorld(t, configJSON(entry("a/", "", "")), map[string]faultySpec{"a/": {}})
		defer w.stop()
		w.settle()
		fwd := func(path string) error {
			_, err := w.sys.Predict(context.Background(), forward.ForwardedRequest{Request: forward.Request{
				ModelPath: path, Inputs: scalar(t, 2), RequestID: "r1", Priority: forward.User, API: "fwd"}, Peer: "n2"})
			return err
		}
		if err := fwd("gone/"); servables.KindOf(err) != servables.Unavailable {
			t.Fatalf("forwarded request for a model not here: %v (kind %v), want Unavailable", err, servables.KindOf(err))
		}
		if n := w.metric("grove_model_requests_total", map[string]string{"api": "fwd"}); n != 0 {
			t.Errorf("a forwarded request this node did not execute counted %v times in grove_model_requests_total, want 0", n)
		}
		if err := fwd("a/"); err != nil {
			t.Fatalf("forwarded request for a model here: %v", err)
		}
		if n := w.metric("grove_model_requests_total", map[string]string{"api": "fwd", "model": "a/", "outcome": "ok"}); n != 1 {
			t.Errorf("a forwarded request served here counted %v times, want 1", n)
		}
	})
}

// TestPredictAsync: the framed transport's PredictAsync answers a
// forwarded request exactly once, without a goroutine waiting for it,
// with what Predict would answer: the model's outputs; Unavailable for a
// model not here; DeadlineExceeded at the caller's deadline while the
// model is still busy (counted as Predict counts it); the caller's
// cancellation at once; and ErrStopped for a request the actors never
// answer because they stopped.
func TestPredictAsync(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		w := newWorld(t, configJSON(entry("a/", "", ""), entry("slow/", "", "")),
			map[string]faultySpec{"a/": {Add: 1}, "slow/": {DelayMs: 1000}})
		w.settle()
		req := func(path string, v float32) forward.ForwardedRequest {
			return forward.ForwardedRequest{Request: forward.Request{ModelPath: path, Inputs: scalar(t, v), RequestID: "r",
				Priority: forward.User, API: "fwd"}, Peer: "n2"}
		}
		type outcome struct {
			a   forward.Answer
			err error
		}
		call := func(ctx context.Context, r forward.ForwardedRequest) chan outcome {
			got := make(chan outcome, 2) // a second answer would be seen below
			w.sys.PredictAsync(ctx, r, func(a forward.Answer, err error) { got <- outcome{a, err} })
			return got
		}
		once := func(got chan outcome) outcome {
			t.Helper()
			synctest.Wait()
			select {
			case o := <-got:
				if len(got) != 0 {
					t.Fatalf("done called twice: %+v then %+v", o, <-got)
				}
				return o
			default:
				t.Fatal("done not called")
			}
			return outcome{}
		}

		o := once(call(context.Background(), req("a/", 2)))
		if o.err != nil || len(o.a.Outputs) != 1 || o.a.Outputs[0].Float32s()[0] != 3 {
			t.Fatalf("answer %+v, %v; want the model's output 3", o.a, o.err)
		}
		want, err := w.sys.Predict(context.Background(), req("a/", 2))
		if err != nil || want.Checksum != o.a.Checksum {
			t.Fatalf("Predict answered %+v, %v; PredictAsync's checksum %q", want, err, o.a.Checksum)
		}

		if o := once(call(context.Background(), req("gone/", 1))); servables.KindOf(o.err) != servables.Unavailable {
			t.Fatalf("a model not here: %v, want Unavailable", o.err)
		}

		ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
		defer cancel()
		got := call(ctx, req("slow/", 1))
		time.Sleep(99 * time.Millisecond)
		synctest.Wait()
		if len(got) != 0 {
			t.Fatalf("answered before the deadline: %+v", <-got)
		}
		time.Sleep(time.Millisecond)
		if o := once(got); servables.KindOf(o.err) != servables.DeadlineExceeded {
			t.Fatalf("at the deadline: %v, want DeadlineExceeded", o.err)
		}
		if n := w.metric("grove_model_requests_total", map[string]string{"api": "fwd", "model": "slow/", "outcome": "deadline_exceeded"}); n != 1 {
			t.Errorf("the expired request counted %v times as deadline_exceeded, want 1", n)
		}
		time.Sleep(2 * time.Second) // the model ends its run: no second answer
		if o := once2(got); o != nil {
			t.Fatalf("a second answer after the deadline: %+v", *o)
		}

		cctx, ccancel := context.WithCancel(context.Background())
		got = call(cctx, req("slow/", 1))
		synctest.Wait()
		if len(got) != 0 {
			t.Fatal("answered before the model ran or the caller gave up")
		}
		ccancel()
		if o := once(got); !errors.Is(o.err, context.Canceled) {
			t.Fatalf("canceled: %v, want context.Canceled", o.err)
		}
		time.Sleep(2 * time.Second)

		got = call(context.Background(), req("slow/", 1))
		synctest.Wait()
		w.sys.markStopped() // as Stop does when its context ends before the actors answer
		if o := once(got); !errors.Is(o.err, ErrStopped) {
			t.Fatalf("stopped: %v, want ErrStopped", o.err)
		}
		w.stop()
	})
}

// once2 returns a pending second answer, if any.
func once2[T any](ch chan T) *T {
	select {
	case v := <-ch:
		return &v
	default:
		return nil
	}
}

// TestPredictAsyncCountsLikePredict: a forwarded request whose caller
// goes away while its model runs it is counted where the model ran, in
// grove_model_requests_total, whichever transport brought it: the
// framed one's PredictAsync leaves it to its model as the gRPC one's
// Predict does, instead of claiming it uncounted.
func TestPredictAsyncCountsLikePredict(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		w := newWorld(t, configJSON(entry("slow/", "", "")), map[string]faultySpec{"slow/": {DelayMs: 1000}})
		defer w.stop()
		w.settle()
		req := func(api string) forward.ForwardedRequest {
			return forward.ForwardedRequest{Request: forward.Request{ModelPath: "slow/", Inputs: scalar(t, 1), RequestID: "r",
				Priority: forward.User, API: api}, Peer: "n2"}
		}

		ctx, cancel := context.WithCancel(context.Background())
		errc := make(chan error, 1)
		go func() {
			_, err := w.sys.Predict(ctx, req("grpc"))
			errc <- err
		}()
		synctest.Wait() // the model runs it
		cancel()
		if err := <-errc; !errors.Is(err, context.Canceled) {
			t.Fatalf("Predict, canceled: %v, want context.Canceled", err)
		}

		actx, acancel := context.WithCancel(context.Background())
		got := make(chan error, 2) // a second answer would be seen below
		w.sys.PredictAsync(actx, req("framed"), func(_ forward.Answer, err error) { got <- err })
		synctest.Wait()
		acancel()
		synctest.Wait()
		select {
		case err := <-got:
			if !errors.Is(err, context.Canceled) {
				t.Fatalf("PredictAsync, canceled: %v, want context.Canceled", err)
			}
		default:
			t.Fatal("PredictAsync did not answer its canceled caller at once")
		}

		time.Sleep(2 * time.Second) // both runs end
		synctest.Wait()
		if len(got) != 0 {
			t.Fatalf("PredictAsync answered twice: then %v", <-got)
		}
		byGRPC, byFramed := requestsCounted(t, w, "grpc"), requestsCounted(t, w, "framed")
		if byGRPC != 1 || byFramed != byGRPC {
			t.Fatalf("grove_model_requests_total of slow/: %v by Predict, %v by PredictAsync; want 1 each", byGRPC, byFramed)
		}
	})
}

// requestsCounted is grove_model_requests_total of model slow/ under api,
// over every outcome.
func requestsCounted(t *testing.T, w *world, api string) float64 {
	t.Helper()
	fams, err := w.reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	var n float64
	for _, f := range fams {
		if f.GetName() != "grove_model_requests_total" {
			continue
		}
		for _, m := range f.GetMetric() {
			labels := map[string]string{}
			for _, lp := range m.GetLabel() {
				labels[lp.GetName()] = lp.GetValue()
			}
			if labels["api"] == api && labels["model"] == "slow/" {
				n += m.GetCounter().GetValue()
			}
		}
	}
	return n
}

// awaitingRemote is a cluster whose on-demand model "w/" is ready
// nowhere: Forward waits for it until the request's deadline and then
// says it is loading, as the node agent does (awaitPlaced).
type awaitingRemote struct{}

func (awaitingRemote) Serves(string) bool                     { return false }
func (awaitingRemote) Paths() []string                        { return nil }
func (awaitingRemote) Awaits(path string) bool                { return path == "w/" }
func (awaitingRemote) Want(string) bool                       { return true }
func (awaitingRemote) Model(string) (forward.ModelInfo, bool) { return forward.ModelInfo{}, false }
func (awaitingRemote) Forward(ctx context.Context, req forward.Request) (forward.Answer, error) {
	<-ctx.Done()
	return forward.Answer{}, &LoadingError{Path: req.ModelPath, RetryAfter: time.Second}
}

// A request for an on-demand model that another node is to load, whose
// deadline ends while it waits, is answered "model is loading"
// (Unavailable, with a retry-after), as on one node, not DeadlineExceeded:
// one request (forwarded by its caller's goroutine) or two in a batch
// (forwarded by the router).
func TestForwardedRequestWaitingPastItsDeadlineForALoadSaysLoading(t *testing.T) {
	bk := newMemBucket()
	data, err := json.Marshal(faultySpec{})
	if err != nil {
		t.Fatal(err)
	}
	bk.set("a/model.faulty", data)
	bk.set("model_config.json", []byte(`{"model_metadata": [{"model_path": "a/"}]}`))
	sys := startReady(t, Options{Bucket: bk, ModelConfigPath: "model_config.json", PollInterval: time.Hour, CacheDir: t.TempDir(),
		MaxModelBytes: 1 << 20, QueueSize: 16, Runtimes: servables.Registry{&countingRuntime{}}, Remote: awaitingRemote{}})
	x, err := servables.NewTensor("x", servables.Float32, []int64{1, 1})
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range []int{1, 2} {
		ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
		var reqs []Request
		for range n {
			reqs = append(reqs, Request{API: "test", ModelPath: "w/", Inputs: []servables.Tensor{x}})
		}
		res, err := sys.Infer(ctx, reqs)
		cancel()
		if err != nil {
			t.Fatal(err)
		}
		if len(res) != n {
			t.Fatalf("%d results, want %d", len(res), n)
		}
		for i, r := range res {
			if k := servables.KindOf(r.Err); k != servables.Unavailable {
				t.Errorf("%d requests, answer %d: %v: kind %v, want Unavailable (\"model is loading\")", n, i, r.Err, k)
			}
			if s, ok := RetryAfter(r.Err); !ok || s < 1 {
				t.Errorf("%d requests, answer %d: %v: no retry-after (%d, %v)", n, i, r.Err, s, ok)
			}
		}
	}
}

// TestAContractPicksAReleaseWhoseOnDemandModelIsLoadedNowhereInTheCluster:
// a release whose model is on demand and ready on no node counts as
// valid, as on one node: the contract picks it, and the call goes to the
// node that is to load it (here it says the model is loading).
func TestAContractPicksAReleaseWhoseOnDemandModelIsLoadedNowhereInTheCluster(t *testing.T) {
	bk := newMemBucket()
	data, err := json.Marshal(faultySpec{})
	if err != nil {
		t.Fatal(err)
	}
	bk.set("w/model.faulty", data)
	bk.set("model_config.json", []byte(`{"model_metadata": [{"model_path": "w/", "load": "on_demand"}],
 "contracts": [{"organization": "ads", "project": "pctr", "contract_number": 1,
   "servables": [{"release_version": "v1", "model_path": "w/"}]}]}`))
	sys := startReady(t, Options{Bucket: bk, ModelConfigPath: "model_config.json", PollInterval: time.Hour, CacheDir: t.TempDir(),
		MaxModelBytes: 1 << 20, QueueSize: 16, Runtimes: servables.Registry{&countingRuntime{}}, Remote: awaitingRemote{}, ClusterNode: true})
	x, err := servables.NewTensor("x", servables.Float32, []int64{1, 1})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	res, rv, err := sys.Score(ctx, "ads/pctr/1", "", Request{API: "test", Inputs: []servables.Tensor{x}})
	if err != nil {
		t.Fatalf("contract call: %v (the release must count as valid)", err)
	}
	if rv != "v1" || servables.KindOf(res.Err) != servables.Unavailable {
		t.Fatalf("release %q, %v: want v1, answered \"model is loading\"", rv, res.Err)
	}
}

// wantingRemote is awaitingRemote that records the paths the router
// wants placed (Remote.Want).
type wantingRemote struct {
	awaitingRemote
	wants chan string
}

func (r wantingRemote) Want(path string) bool { r.wants <- path; return true }

// A contract release whose validity waits on its model's load
// (valid_after_ms), its model on demand and ready on no cluster node, is
// never picked, so no request would place it: the router asks the cluster
// to place it, once, and again only a minute later if it is still ready
// nowhere. A release picked for traffic is placed by its calls instead.
func TestARoutersReleaseWaitingOnItsOnDemandModelIsPlacedInTheCluster(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		wants := make(chan string, 16)
		cfg := `{"model_metadata": [{"model_path": "a/"}, {"model_path": "w/", "load": "on_demand"}],
 "contracts": [{"organization": "ads", "project": "pctr", "contract_number": 1,
   "servables": [{"release_version": "v1", "model_path": "a/"},
     {"release_version": "v2", "model_path": "w/", "validity": [{"valid_after_ms": {"ms": 1000}}]}]}]}`
		w := newWorld(t, cfg, map[string]faultySpec{"a/": version(1), "w/": version(2)}, func(_ *world, o *Options) {
			o.Remote, o.ClusterNode = wantingRemote{wants: wants}, true
			o.PollInterval = time.Hour
		})
		defer w.stop()
		w.sys.SetShare([]string{"a/"})
		synctest.Wait()
		drain := func() []string {
			var got []string
			for {
				select {
				case p := <-wants:
					got = append(got, p)
				default:
					return got
				}
			}
		}
		time.Sleep(10 * time.Second) // a hundred evaluations of the contract
		synctest.Wait()
		if got := drain(); len(got) != 1 || got[0] != "w/" {
			t.Fatalf("the router wanted %v placed in 10 s, want w/ once", got)
		}
		time.Sleep(reaskLoadAfter)
		synctest.Wait()
		if got := drain(); len(got) != 1 || got[0] != "w/" {
			t.Fatalf("a minute later, still ready nowhere: wanted %v, want w/ once more", got)
		}
	})
}

// Shadow copies another node forwards here take their places among the
// model's shadow work and give them back as such: the user queue's count
// does not grow with each one until the idle model refuses its users
// (overloaded with an empty queue).
func TestForwardedShadowCopiesLeaveTheUserQueueAsTheyFoundIt(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		w := newWorld(t, configJSON(entry("a/", "", "")), map[string]faultySpec{"a/": {}}, func(_ *world, o *Options) { o.QueueSize = 4 })
		defer w.stop()
		w.settle()
		c := (*w.sys.routes.Load())["a/"]
		for i := range 6 {
			if _, err := w.sys.Predict(context.Background(), forward.ForwardedRequest{Request: forward.Request{
				ModelPath: "a/", Inputs: scalar(t, 2), RequestID: "r", Priority: forward.Shadow, API: "fwd"}, Peer: "n2"}); err != nil {
				t.Fatalf("forwarded shadow copy %d: %v", i, err)
			}
			synctest.Wait()
			if q, sq := c.queued.Load(), c.shadowQueued.Load(); q != 0 || sq != 0 {
				t.Fatalf("after forwarded shadow copy %d: queued %d, shadow queued %d; want 0 and 0", i, q, sq)
			}
		}
		if res := w.infer("a/", 1); res.Err != nil {
			t.Fatalf("a user request on the idle model: %v", res.Err)
		}
	})
}

// Shadow copies another node forwards here share the shadow work's part
// of the queue limit (a quarter) with this node's own: with the limit at
// 4 and one copy waiting, the next is refused, and users are not.
func TestForwardedShadowCopiesGetTheShadowShareOfTheQueue(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		w := newWorld(t, configJSON(entry("a/", "", "")), map[string]faultySpec{"a/": {DelayMs: 10}}, func(_ *world, o *Options) { o.QueueSize = 4 })
		defer w.stop()
		w.settle()
		busy := w.busy("a/")
		shadow := func() chan error {
			out := make(chan error, 1)
			go func() {
				_, err := w.sys.Predict(context.Background(), forward.ForwardedRequest{Request: forward.Request{
					ModelPath: "a/", Inputs: scalar(t, 2), RequestID: "r", Priority: forward.Shadow, API: "fwd"}, Peer: "n2"})
				out <- err
			}()
			synctest.Wait()
			return out
		}
		first, second := shadow(), shadow()
		if err := <-second; !errors.Is(err, ErrOverloaded) {
			t.Errorf("a second forwarded shadow copy beyond the shadow share: %v, want overloaded", err)
		}
		if res := w.infer("a/", 1); res.Err != nil {
			t.Errorf("a user request meanwhile: %v", res.Err)
		}
		if err := <-first; err != nil {
			t.Errorf("the first forwarded shadow copy: %v", err)
		}
		<-busy
	})
}

// A shadow copy answered by another node's content that the cluster no
// longer describes for the path (an old content answering late during a
// swap) is a straggler: it does not restart the comparison windows of
// the content that serves now, as a retired local content's does not.
func TestALateRemoteShadowAnswerFromAnOldContentDoesNotRestartTheWindows(t *testing.T) {
	remote := instantRemote{} // describes "r/" as served by the content with checksum "remote"
	described, straggler := remoteContent(remote, "r/", "remote"), remoteContent(remote, "r/", "old")
	if !described.current() || straggler.current() {
		t.Fatalf("current: the content the cluster describes %v, another %v; want true, false", described.current(), straggler.current())
	}
	if undescribed := remoteContent(remote, "x/", "any"); !undescribed.current() {
		t.Fatal("the answer for a path the cluster describes no content for must count as current")
	}
	w := newCompareWindows(100)
	at := time.Now()
	for range 50 {
		w.record(described.id, described.current(), quality.Execution{}, at)
	}
	w.record(straggler.id, straggler.current(), quality.Execution{}, at)
	if got := w.comparison(described.id, at).Executions; got != 50 {
		t.Fatalf("%d executions after a straggler, want 50", got)
	}
}

// A shadow challenger served by another cluster node: the contract's
// stats count its answered copies compared here as its shadow
// executions, as the min_served_events gate does (docs/cluster.md).
func TestStatsCountARemoteChallengersAnsweredShadowCopies(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		cfg := `{"model_metadata": [{"model_path": "a/"}, {"model_path": "r/"}],
 "contracts": [{"organization": "ads", "project": "pctr", "contract_number": 1,
   "servables": [
     {"release_version": "v1", "model_path": "a/"},
     {"release_version": "v2", "model_path": "r/", "validity": [{"min_served_events": {"count": 100}}], "shadow": {}}]}]}`
		in := scalar(t, 3)
		w := newWorld(t, cfg, map[string]faultySpec{"a/": {}}, func(_ *world, o *Options) {
			o.Remote = instantRemote{answer: forward.Answer{Checksum: "remote", Outputs: in}}
		})
		defer w.stop()
		w.sys.SetShare([]string{"a/"})
		w.settle()
		for range 3 {
			if res, rv, err := w.sys.Score(context.Background(), "ads/pctr/1", "", Request{API: "test", Inputs: in}); err != nil || res.Err != nil || rv != "v1" {
				t.Fatalf("score: %v %v %s", err, res.Err, rv)
			}
		}
		synctest.Wait()
		stats, err := w.sys.ContractStats("ads/pctr/1")
		if err != nil || len(stats) != 2 {
			t.Fatalf("stats: %v %+v", err, stats)
		}
		v2 := stats[1]
		if v2.Comparison == nil || v2.Comparison.SinceStart.Executions != 3 {
			t.Fatalf("v2 comparison: %+v", v2.Comparison)
		}
		if v2.ShadowExecutions != 3 {
			t.Errorf("v2 shadow_executions %d, want 3 (the reason says %q)", v2.ShadowExecutions, v2.Reason)
		}
	})
}

// linkedRemote is the rest of a cluster as one other in-process node,
// whose System is to: Forward hands it a request as its forward server
// would (System.Predict, under the call's context).
type linkedRemote struct{ to *System }

func (l linkedRemote) Serves(path string) bool {
	_, ok := l.to.ModelInfo(path)
	return ok
}
func (l linkedRemote) Paths() []string  { return []string{"r/"} }
func (linkedRemote) Awaits(string) bool { return false }
func (linkedRemote) Want(string) bool   { return false }
func (l linkedRemote) Model(path string) (forward.ModelInfo, bool) {
	return l.to.ModelInfo(path)
}
func (l linkedRemote) Forward(ctx context.Context, req forward.Request) (forward.Answer, error) {
	return l.to.Predict(ctx, forward.ForwardedRequest{Request: req, Peer: "a"})
}

// shadowedCluster starts two nodes in the caller's bubble: a, whose
// contract ads/pctr/1 serves v1 on its own a/ and shadows v2, compared,
// on r/, which only b serves (shadow_timeout 1 s, the default); b's
// model holds every run until hold is closed (nil: never). tweakA
// changes a's options after its Remote is set.
func shadowedCluster(t *testing.T, hold chan struct{}, tweakA ...func(*world, *Options)) (a, b *world) {
	t.Helper()
	b = newWorld(t, configJSON(entry("r/", "", "")), map[string]faultySpec{"r/": {}}, func(w *world, _ *Options) { w.rt.hold = hold })
	cfg := `{"model_metadata": [{"model_path": "a/"}, {"model_path": "r/"}],
 "contracts": [{"organization": "ads", "project": "pctr", "contract_number": 1,
   "servables": [
     {"release_version": "v1", "model_path": "a/"},
     {"release_version": "v2", "model_path": "r/", "validity": [{"never_valid": {}}], "shadow": {}}]}]}`
	a = newWorld(t, cfg, map[string]faultySpec{"a/": {}}, append([]func(*world, *Options){func(_ *world, o *Options) { o.Remote = linkedRemote{to: b.sys} }}, tweakA...)...)
	a.sys.SetShare([]string{"a/"})
	a.settle()
	if _, ok := b.sys.ModelInfo("r/"); !ok {
		t.Fatal("node b does not serve r/")
	}
	return a, b
}

// scoreShadowed scores one request on a's contract, answered by v1, and
// lets its shadow copy go as far as it can.
func scoreShadowed(t *testing.T, a *world) {
	t.Helper()
	if res, rv, err := a.sys.Score(context.Background(), "ads/pctr/1", "", Request{API: "test", Inputs: scalar(t, 3)}); err != nil || res.Err != nil || rv != "v1" {
		t.Fatalf("score: %v %v %s", err, res.Err, rv)
	}
	synctest.Wait()
}

// A shadow copy sent to a challenger on another node that starts within
// shadow_timeout is compared and counted however long it then runs, as a
// copy on this node is: shadow_timeout bounds its wait to start, not its
// run.
func TestARemoteShadowCopyThatStartsInTimeIsComparedHoweverLongItRuns(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		hold := make(chan struct{})
		a, b := shadowedCluster(t, hold)
		defer b.stop()
		defer a.stop()
		scoreShadowed(t, a)
		if n := b.rt.calls.Load(); n != 1 {
			t.Fatalf("node b started %d runs, want the shadow copy's", n)
		}
		time.Sleep(3 * time.Second) // the run goes on, past shadow_timeout (1 s)
		close(hold)
		synctest.Wait()
		v2 := v2Stats(t, a.sys)
		if v2.Comparison == nil || v2.Comparison.SinceStart.Executions != 1 || v2.ShadowExecutions != 1 {
			t.Fatalf("v2 comparison %+v, shadow_executions %d; want the copy compared and counted once", v2.Comparison, v2.ShadowExecutions)
		}
		if n := a.metric("grove_cluster_forwarded_total", map[string]string{"model": "r/", "result": "ok"}); n != 1 {
			t.Errorf("grove_cluster_forwarded_total{result=ok} of r/ = %v, want 1", n)
		}
	})
}

// A shadow copy sent to a challenger on another node that cannot start
// within shadow_timeout (its model busy with a user request there) is
// dropped unrun and counted there as that node counts its own copies past
// shadow_timeout, and is not compared, though the forwarded call itself
// has longer.
func TestARemoteShadowCopyThatCannotStartInTimeIsDroppedUnrun(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		hold := make(chan struct{})
		a, b := shadowedCluster(t, hold)
		defer b.stop()
		defer a.stop()
		user := b.busy("r/") // held: the shadow copy queues behind it
		scoreShadowed(t, a)
		time.Sleep(3 * time.Second) // past the copy's start-by (1 s)
		close(hold)
		if res := <-user; res.Err != nil {
			t.Fatalf("b's user request: %v", res.Err)
		}
		synctest.Wait()
		if n := b.rt.calls.Load(); n != 1 {
			t.Fatalf("node b ran %d requests, want only its user's: the shadow copy ran past its start-by", n)
		}
		if n := b.expired("r/", "deadline"); n != 1 {
			t.Errorf("node b's grove_requests_expired_total{reason=deadline} of r/ = %v, want 1", n)
		}
		if n := b.metric("grove_model_requests_total", map[string]string{"api": "test-shadow", "model": "r/", "outcome": "deadline_exceeded"}); n != 1 {
			t.Errorf("node b's grove_model_requests_total{api=test-shadow, outcome=deadline_exceeded} of r/ = %v, want 1", n)
		}
		if v2 := v2Stats(t, a.sys); (v2.Comparison != nil && v2.Comparison.SinceStart.Executions != 0) || v2.ShadowExecutions != 0 {
			t.Errorf("v2 comparison %+v, shadow_executions %d; want a copy dropped unrun neither compared nor counted", v2.Comparison, v2.ShadowExecutions)
		}
		if n := a.metric("grove_cluster_forwarded_total", map[string]string{"model": "r/", "result": "deadline_exceeded"}); n != 1 {
			t.Errorf("grove_cluster_forwarded_total{result=deadline_exceeded} of r/ = %v, want 1", n)
		}
	})
}

// A shadow copy sent to another node that started in time but is still
// running at its start-by plus shadowRunAllowance ends then, counted as a
// forward error and not compared: nothing waits for a remote copy
// forever.
func TestARemoteShadowCopyStillRunningPastItsAllowanceEnds(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		hold := make(chan struct{})
		a, b := shadowedCluster(t, hold)
		defer b.stop()
		defer a.stop()
		forwarded := func(result string) float64 {
			return a.metric("grove_cluster_forwarded_total", map[string]string{"model": "r/", "result": result})
		}
		scoreShadowed(t, a)
		time.Sleep(time.Second + shadowRunAllowance - time.Millisecond)
		synctest.Wait()
		if n := forwarded("deadline_exceeded"); n != 0 {
			t.Fatalf("the copy's call ended before its start-by plus the allowance (%v)", n)
		}
		time.Sleep(time.Millisecond)
		synctest.Wait()
		if n := forwarded("deadline_exceeded"); n != 1 {
			t.Fatalf("grove_cluster_forwarded_total{result=deadline_exceeded} of r/ = %v at the copy's start-by plus the allowance, want 1", n)
		}
		if v2 := v2Stats(t, a.sys); (v2.Comparison != nil && v2.Comparison.SinceStart.Executions != 0) || v2.ShadowExecutions != 0 {
			t.Errorf("v2 comparison %+v, shadow_executions %d; want a copy cut off neither compared nor counted", v2.Comparison, v2.ShadowExecutions)
		}
		close(hold)
		synctest.Wait()
	})
}

// heldRemote forwards as its Remote does, once release is closed: each
// call counted in calls waits for it (or for its context) first, as a
// serving node that accepted the call and does not answer.
type heldRemote struct {
	Remote
	release chan struct{}
	calls   *atomic.Int64
}

func (h heldRemote) Forward(ctx context.Context, req forward.Request) (forward.Answer, error) {
	h.calls.Add(1)
	select {
	case <-h.release:
	case <-ctx.Done():
		return forward.Answer{}, ctx.Err()
	}
	return h.Remote.Forward(ctx, req)
}

// Shadow copies sent to a challenger on another node that does not answer
// are held in flight up to the room a local challenger's copies get (a
// quarter of model_queue_size): the next copy is not forwarded but dropped
// and counted as overloaded, as a local copy that finds no room is, and the
// caller's answer does not change. Once the held copies end, copies are
// forwarded again.
func TestRemoteShadowCopiesInFlightAreCappedAndTheRestDroppedAsOverloaded(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		release, calls := make(chan struct{}), &atomic.Int64{}
		a, b := shadowedCluster(t, nil, func(_ *world, o *Options) {
			o.QueueSize = 8 // room for 2 shadow copies in flight per challenger
			o.Remote = heldRemote{Remote: o.Remote, release: release, calls: calls}
		})
		defer b.stop()
		defer a.stop()
		in := scalar(t, 3)
		score := func() Result {
			t.Helper()
			res, rv, err := a.sys.Score(context.Background(), "ads/pctr/1", "", Request{API: "test", Inputs: in})
			if err != nil || res.Err != nil || rv != "v1" {
				t.Fatalf("score: %v %v %s", err, res.Err, rv)
			}
			synctest.Wait()
			return res
		}
		dropped := func() float64 {
			return a.metric("grove_shadow_dropped_total", map[string]string{"model": "r/", "reason": "overloaded"})
		}
		first := score()
		score()
		if n := calls.Load(); n != 2 {
			t.Fatalf("%d copies forwarded, want 2 held in flight", n)
		}
		capped := score()
		if n := calls.Load(); n != 2 {
			t.Fatalf("%d copies forwarded with 2 in flight, want the third not forwarded", n)
		}
		if n := dropped(); n != 1 {
			t.Errorf("grove_shadow_dropped_total{reason=overloaded} of r/ = %v, want 1", n)
		}
		if v2 := v2Stats(t, a.sys); v2.ShadowDropped != 1 {
			t.Errorf("v2 shadow_dropped %d, want 1", v2.ShadowDropped)
		}
		if !reflect.DeepEqual(capped.Outputs, first.Outputs) {
			t.Errorf("the caller's answer with its copy dropped %+v, want %+v as without", capped.Outputs, first.Outputs)
		}
		close(release)
		synctest.Wait()
		if n := a.metric("grove_cluster_forwarded_total", map[string]string{"model": "r/", "result": "ok"}); n != 2 {
			t.Fatalf("grove_cluster_forwarded_total{result=ok} of r/ = %v after the release, want the 2 held copies", n)
		}
		score()
		if n := calls.Load(); n != 3 {
			t.Errorf("%d copies forwarded after the held ones ended, want the new copy's too (3)", n)
		}
		if n := a.metric("grove_cluster_forwarded_total", map[string]string{"model": "r/", "result": "ok"}); n != 3 {
			t.Errorf("grove_cluster_forwarded_total{result=ok} of r/ = %v, want 3", n)
		}
		if v2 := v2Stats(t, a.sys); v2.ShadowExecutions != 3 || v2.ShadowDropped != 1 {
			t.Errorf("v2 shadow_executions %d, shadow_dropped %d; want 3 and 1", v2.ShadowExecutions, v2.ShadowDropped)
		}
	})
}

// remoteShadowEntry reports whether a's router keeps counters of the
// shadow copies of path sent to other nodes, and their in-flight count.
func remoteShadowEntry(t *testing.T, a *world, path string) (inflight int64, kept bool) {
	t.Helper()
	if err := a.sys.askRouter(context.Background(), func(r *routerActor) {
		if rs := r.remoteShadow[path]; rs != nil {
			inflight, kept = rs.inflight.Load(), true
		}
	}); err != nil {
		t.Fatal(err)
	}
	return inflight, kept
}

// A challenger on another node that no contract shadows any more leaves
// no counters behind on the router once its copies in flight have ended,
// and one removed and added again starts its shadow_dropped from zero,
// as a local challenger's does when its content is replaced; its copies
// still in flight keep counting against its bound.
func TestARemovedRemoteChallengerLeavesNoCountersAndStartsAgainFromZero(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		release, calls := make(chan struct{}), &atomic.Int64{}
		a, b := shadowedCluster(t, nil, func(_ *world, o *Options) {
			o.QueueSize = 8 // room for 2 shadow copies in flight per challenger
			o.Remote = heldRemote{Remote: o.Remote, release: release, calls: calls}
		})
		defer b.stop()
		defer a.stop()
		with := a.b.get("model_config.json")
		without := `{"model_metadata": [{"model_path": "a/"}, {"model_path": "r/"}],
 "contracts": [{"organization": "ads", "project": "pctr", "contract_number": 1,
   "servables": [{"release_version": "v1", "model_path": "a/"}]}]}`
		for range 3 {
			scoreShadowed(t, a)
		}
		if v2 := v2Stats(t, a.sys); v2.ShadowDropped != 1 {
			t.Fatalf("v2 shadow_dropped %d, want 1 (2 copies held in flight)", v2.ShadowDropped)
		}

		a.setConfig(without)
		a.setConfig(string(with))
		if v2 := v2Stats(t, a.sys); v2.ShadowDropped != 0 {
			t.Errorf("v2 shadow_dropped %d once removed and added again, want 0", v2.ShadowDropped)
		}
		scoreShadowed(t, a)
		if n := calls.Load(); n != 2 {
			t.Errorf("%d copies forwarded with the 2 sent before the removal still in flight, want 2", n)
		}
		if v2 := v2Stats(t, a.sys); v2.ShadowDropped != 1 {
			t.Errorf("v2 shadow_dropped %d, want the copy that found no room (1)", v2.ShadowDropped)
		}

		a.setConfig(without)
		if n, kept := remoteShadowEntry(t, a, "r/"); !kept || n != 2 {
			t.Fatalf("counters of r/ kept %v with %d in flight, want kept with the 2 held copies", kept, n)
		}
		close(release)
		synctest.Wait()
		time.Sleep(expiryInterval)
		synctest.Wait()
		if _, kept := remoteShadowEntry(t, a, "r/"); kept {
			t.Errorf("counters of r/ kept after its copies ended, though no contract shadows it")
		}
	})
}

// A challenger on another node whose content there is replaced (a new
// checksum) counts its shadow_dropped from zero again, as one on this
// node does and as its comparison does: the copies dropped while the old
// content served are not the new content's.
func TestARemoteChallengersShadowDroppedStartsFromZeroWhenItsContentIsReplaced(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		release, calls := make(chan struct{}), &atomic.Int64{}
		a, b := shadowedCluster(t, nil, func(_ *world, o *Options) {
			o.QueueSize = 8 // room for 2 shadow copies in flight per challenger
			o.Remote = heldRemote{Remote: o.Remote, release: release, calls: calls}
		})
		defer b.stop()
		defer a.stop()
		defer close(release)
		for range 3 {
			scoreShadowed(t, a)
		}
		if v2 := v2Stats(t, a.sys); v2.ShadowDropped != 1 {
			t.Fatalf("v2 shadow_dropped %d, want 1 (2 copies held in flight)", v2.ShadowDropped)
		}

		sum2 := b.putModel("r/", version(2))
		b.setConfig(configJSON(entry("r/", sum2, "")))
		if info, ok := b.sys.ModelInfo("r/"); !ok || info.Checksum != sum2 {
			t.Fatalf("node b serves r/ as %+v (%v), want checksum %s", info, ok, sum2)
		}
		if v2 := v2Stats(t, a.sys); v2.ShadowDropped != 0 {
			t.Errorf("v2 shadow_dropped %d once node b serves a new content, want 0", v2.ShadowDropped)
		}
		scoreShadowed(t, a) // the 2 copies sent before the update are still in flight
		if n := calls.Load(); n != 2 {
			t.Fatalf("%d copies forwarded, want the 2 held ones", n)
		}
		if v2 := v2Stats(t, a.sys); v2.ShadowDropped != 1 {
			t.Errorf("v2 shadow_dropped %d, want the copy dropped since the update (1)", v2.ShadowDropped)
		}
	})
}

// A request another node forwards here labels this node's metrics with
// the API its caller used, but a faulty peer cannot make a series per
// request: a name not shaped like Grove's APIs, and any name beyond the
// first maxPeerAPIs, count as "other".
func TestAForwardedRequestsAPILabelIsBounded(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		w := newWorld(t, configJSON(entry("a/", "", "")), map[string]faultySpec{"a/": {}})
		defer w.stop()
		w.settle()
		forwarded := func(api string) {
			t.Helper()
			if _, err := w.sys.Predict(context.Background(), forward.ForwardedRequest{Request: forward.Request{
				ModelPath: "a/", Inputs: scalar(t, 2), RequestID: "r", API: api}, Peer: "n2"}); err != nil {
				t.Fatalf("forwarded request as %q: %v", api, err)
			}
		}
		forwarded("ba")
		forwarded("Bad API\n")
		forwarded(strings.Repeat("x", 33))
		for i := range maxPeerAPIs + 5 {
			forwarded(fmt.Sprintf("api-%d", i))
		}
		forwarded("ba")
		ok := func(api string) float64 {
			return w.metric("grove_model_requests_total", map[string]string{"api": api, "model": "a/", "outcome": "ok"})
		}
		if n := ok("ba"); n != 2 {
			t.Errorf("requests forwarded as ba counted under ba: %v, want 2", n)
		}
		if n := ok("api-0"); n != 1 {
			t.Errorf("requests forwarded as api-0 counted under it: %v, want 1", n)
		}
		if n := ok(fmt.Sprintf("api-%d", maxPeerAPIs)); n != 0 {
			t.Errorf("a name beyond the first %d has a series of its own (%v requests)", maxPeerAPIs, n)
		}
		// Two malformed names, and the names beyond the first maxPeerAPIs
		// (ba is one of them).
		if n, want := ok("other"), float64(2+maxPeerAPIs+5-(maxPeerAPIs-1)); n != want {
			t.Errorf("requests counted under other: %v, want %v", n, want)
		}
	})
}
