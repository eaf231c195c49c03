package actors

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/groveml/grove/actors/lifecycle"
	"github.com/groveml/grove/auth"
	"github.com/groveml/grove/cluster/forward"
	"github.com/groveml/grove/conf/bucket"
	"github.com/groveml/grove/conf/modelconfig"
	"github.com/groveml/grove/routing"
	"github.com/groveml/grove/routing/quality"
	"github.com/groveml/grove/servables"
)

// crashOn makes the world's bucket a crashingBucket, stored in *cb.
func crashOn(cb **crashingBucket) func(*world, *Options) {
	return func(w *world, o *Options) {
		*cb = &crashingBucket{memBucket: w.b}
		o.Bucket = *cb
	}
}

// supervision collects the supervision events of the supervisor and the
// router (a restart, a resume) until the test ends.
func supervision(t *testing.T, w *world) <-chan *actor.SupervisorEvent {
	t.Helper()
	events := make(chan *actor.SupervisorEvent, 16)
	sub := w.sys.as.EventStream.Subscribe(func(ev any) {
		if se, ok := ev.(*actor.SupervisorEvent); ok && (se.Child.Id == supervisorName || se.Child.Id == "router") {
			events <- se
		}
	})
	t.Cleanup(func() { w.sys.as.EventStream.Unsubscribe(sub) })
	return events
}

// noSupervision fails the test if the supervisor or the router was
// restarted, resumed or stopped by protoactor.
func noSupervision(t *testing.T, events <-chan *actor.SupervisorEvent) {
	t.Helper()
	select {
	case se := <-events:
		t.Fatalf("protoactor handled a failure of the %s (%v: %v); the actor must recover its own panics", se.Child.Id, se.Directive, se.Reason)
	default:
	}
}

// A panic while the supervisor handles one message (a status read here,
// whose snapshot names the bucket) costs that message only: the caller
// is answered at once, the supervisor keeps its state and its children,
// so no model actor is stopped or reloaded and every model answers
// during and after, and the next poll applies a config change. The
// panic is logged at error level with the message's type and the stack,
// and counted in grove_actor_panics_total.
func TestAPanicInTheSupervisorCostsOnlyItsMessageAndEveryModelKeepsServing(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		tweak, release := stallWarmUp(2, time.Minute) // a second load of a/ would hang in its warm-up
		var cb *crashingBucket
		w := newWorld(t, configJSON(entry("a/", "", warmUpOf5)), map[string]faultySpec{"a/": version(1), "b/": version(2)}, tweak, crashOn(&cb))
		defer w.stop()
		defer release()
		synctest.Wait()
		before := w.model("a/")
		if before.State != StateReady {
			t.Fatalf("before the panic: %+v", before)
		}
		events := supervision(t, w)

		cb.crash.Store(true)
		w.settle() // a poll: the status is to be published again at the next read
		start := time.Now()
		w.sys.Status() // publishing it panics
		if cb.crash.Load() {
			t.Fatal("the supervisor did not panic")
		}
		if waited := time.Since(start); waited != 0 {
			t.Fatalf("the status read whose snapshot panicked waited %v, want an answer at once", waited)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		res, err := w.sys.Infer(ctx, []Request{{API: "test", ModelPath: "a/", Inputs: scalar(t, 3)}})
		if err != nil || res[0].Err != nil || res[0].Checksum != before.Checksum || time.Since(start) != 0 {
			t.Fatalf("a/ right after the panic: %v %+v after %v, want its answer at once", err, res, time.Since(start))
		}
		synctest.Wait()
		if l := w.rt.loaded.Load(); l != 1 {
			t.Fatalf("%d servables loaded after the panic, want a/'s first only", l)
		}
		if m := w.model("a/"); m.State != StateReady || !m.LoadedAt.Equal(*before.LoadedAt) {
			t.Fatalf("a/ after the panic: %+v, want the content loaded before it", m)
		}
		if res := w.infer("a/", 4); res.Err != nil || res.Checksum != before.Checksum {
			t.Fatalf("a/ after the panic: %+v", res)
		}

		w.setConfig(configJSON(entry("a/", "", warmUpOf5), entry("b/", "", "")))
		if m := w.model("b/"); m.State != StateReady {
			t.Fatalf("b/, added after the panic, at the next poll: %+v", m)
		}
		if res := w.infer("b/", 6); res.Err != nil {
			t.Fatalf("b/: %v", res.Err)
		}
		if l, m := w.rt.loaded.Load(), w.model("a/"); l != 2 || !m.LoadedAt.Equal(*before.LoadedAt) {
			t.Fatalf("after the config change: %d servables loaded, a/ %+v; want b/ loaded and a/ untouched", l, m)
		}
		noSupervision(t, events)
		w.wantPanics("supervisor", 1)
		w.wantPanics("router", 0)
		w.wantLogged("level=ERROR", "actor=supervisor", "message=actors.statusQuery", `panic="test: the supervisor crashes"`, "publishStatus")
	})
}

// A panic in one step the supervisor takes (the fetch of a model added
// to the config, which names the bucket) fails that model's load alone,
// with an error in its status, as a failed fetch does; the next poll
// loads it, and the model serving meanwhile is untouched.
func TestAPanicInALoadStepFailsThatLoadAloneAndTheNextPollRetriesIt(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var cb *crashingBucket
		w := newWorld(t, configJSON(entry("a/", "", "")), map[string]faultySpec{"a/": version(1), "b/": version(2)}, crashOn(&cb))
		defer w.stop()
		synctest.Wait()
		before := w.model("a/")
		events := supervision(t, w)

		cb.crash.Store(true)
		w.setConfig(configJSON(entry("a/", "", ""), entry("b/", "", ""))) // b/'s fetch panics
		if cb.crash.Load() {
			t.Fatal("the supervisor did not panic")
		}
		m := w.model("b/")
		if m.State != StateFailed || !strings.Contains(m.LastError, "loading model b/: internal error") || !strings.Contains(m.LastError, "test: the supervisor crashes") {
			t.Fatalf("b/ after its fetch step panicked: %+v, want failed with the panic", m)
		}
		if res := w.infer("a/", 3); res.Err != nil || res.Checksum != before.Checksum {
			t.Fatalf("a/ after the panic: %+v", res)
		}
		w.settle() // the next poll
		if m := w.model("b/"); m.State != StateReady || m.LastError != "" {
			t.Fatalf("b/ at the next poll: %+v", m)
		}
		if res := w.infer("b/", 4); res.Err != nil {
			t.Fatalf("b/: %v", res.Err)
		}
		noSupervision(t, events)
		if l, m := w.rt.loaded.Load(), w.model("a/"); l != 2 || !m.LoadedAt.Equal(*before.LoadedAt) {
			t.Fatalf("%d servables loaded, a/ %+v; want a/'s and b/'s, a/ untouched", l, m)
		}
		if n := w.metric("grove_model_loads_total", map[string]string{"model": "b/", "result": "failed"}); n != 1 {
			t.Fatalf("b/'s failed loads = %v, want 1", n)
		}
		w.wantPanics("supervisor", 1)
		if !strings.Contains(w.log.String(), `message="fetch step of model b/"`) {
			t.Errorf("the log does not name the step that panicked:\n%s", w.log.String())
		}
	})
}

// A caller waiting for an on-demand model whose load step panics gets
// that failure at once, not at its deadline; after the backoff the next
// request loads the model.
func TestACallerWaitingForAnOnDemandLoadWhoseStepPanicsIsAnsweredAtOnce(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var cb *crashingBucket
		w := newWorld(t, configJSON(entry("a/", "", ""), entry("o/", "", onDemandLoad)), map[string]faultySpec{"a/": version(1), "o/": version(2)}, crashOn(&cb))
		defer w.stop()
		synctest.Wait()
		events := supervision(t, w)

		cb.crash.Store(true)
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		start := time.Now()
		res, err := w.sys.Infer(ctx, []Request{{API: "test", ModelPath: "o/", Inputs: scalar(t, 1)}}) // o/'s fetch panics
		if err != nil {
			t.Fatal(err)
		}
		if cb.crash.Load() {
			t.Fatal("the supervisor did not panic")
		}
		if got := res[0].Err; servables.KindOf(got) != servables.Unavailable || !strings.Contains(got.Error(), "internal error") || time.Since(start) != 0 {
			t.Fatalf("the waiting caller got %v after %v, want Unavailable with the internal error at once", got, time.Since(start))
		}
		if res := w.infer("a/", 3); res.Err != nil {
			t.Fatalf("a/ after the panic: %v", res.Err)
		}
		time.Sleep(time.Second) // o/'s backoff after one failed load
		if res := w.infer("o/", 4); res.Err != nil || res.Outputs[0].Float32s()[0] != 4 {
			t.Fatalf("o/ after the backoff: %+v", res)
		}
		noSupervision(t, events)
		if l := w.rt.loaded.Load(); l != 2 {
			t.Fatalf("%d servables loaded, want a/ once and o/ once", l)
		}
	})
}

// crashingOutcomes is an OutcomeSource with no figures whose Outcomes,
// which the router asks as it plans a contract's routing, panics once
// after crash is set.
type crashingOutcomes struct{ crash atomic.Bool }

func (c *crashingOutcomes) Outcomes(string, string, bool, string) (*routing.OutcomeStats, *quality.OutcomeStats) {
	if c.crash.CompareAndSwap(true, false) {
		panic("test: the router crashes")
	}
	return nil, nil
}

// A panic while the router handles one call fails that call alone, at
// once: a Score call with an internal error, a stats query with an
// error. The router keeps its contracts (a Score call right after is
// routed, with no poll in between), the models serve on, and each panic
// is counted in grove_actor_panics_total.
func TestAPanicInTheRouterFailsOnlyTheCallItHandledAndTheContractsKeepRouting(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		src := &crashingOutcomes{}
		w := newWorld(t, promotionConfig, map[string]faultySpec{"a/": version(1), "b/": version(2), "c/": version(3)},
			func(_ *world, o *Options) { o.Outcomes = src })
		defer w.stop()
		synctest.Wait()
		events := supervision(t, w)
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		score := func() (Result, string, error) {
			return w.sys.Score(ctx, "ads/pctr/1", "", Request{API: "test", Inputs: scalar(t, 3)})
		}
		if res, rv, err := score(); err != nil || res.Err != nil || rv != "v1" {
			t.Fatalf("before the panic: %v %v %s", err, res.Err, rv)
		}

		src.crash.Store(true)
		start := time.Now()
		_, _, err := score() // its routing panics
		if src.crash.Load() {
			t.Fatal("the router did not panic")
		}
		if servables.KindOf(err) != servables.Unavailable || !strings.Contains(err.Error(), "internal error") || time.Since(start) != 0 {
			t.Fatalf("the Score call whose routing panicked: %v after %v, want Unavailable with the internal error at once", err, time.Since(start))
		}
		if res, rv, err := score(); err != nil || res.Err != nil || rv != "v1" || time.Since(start) != 0 {
			t.Fatalf("right after the panic: %v %v %s", err, res.Err, rv)
		}

		src.crash.Store(true)
		stats := make(chan error, 1)
		go func() {
			_, err := w.sys.ContractStats("ads/pctr/1") // its planning panics
			stats <- err
		}()
		select {
		case err := <-stats:
			if !strings.Contains(err.Error(), "internal error") || time.Since(start) != 0 {
				t.Fatalf("the stats query whose planning panicked: %v after %v", err, time.Since(start))
			}
		case <-time.After(time.Minute):
			t.Fatal("the stats query whose planning panicked got no answer")
		}
		if st, err := w.sys.ContractStats("ads/pctr/1"); err != nil || len(st) != 2 {
			t.Fatalf("stats after the panic: %v %+v", err, st)
		}
		if res, rv, err := score(); err != nil || res.Err != nil || rv != "v1" {
			t.Fatalf("after the panics: %v %v %s", err, res.Err, rv)
		}
		synctest.Wait()
		noSupervision(t, events)
		w.wantPanics("router", 2)
		if !strings.Contains(w.log.String(), `actor=router message=*actors.batch panic="test: the router crashes"`) {
			t.Errorf("the log does not have the router's panic:\n%s", w.log.String())
		}
	})
}

// A failure protoactor sees of an actor under resumeOnPanic (a panic its
// own recovery let through) resumes it: it keeps its state and handles
// the next message; the failure is logged at error level and counted.
func TestAFailureTheActorDidNotRecoverResumesIt(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		reg := prometheus.NewRegistry()
		var log logBuffer
		g := &resumeOnPanic{log: slog.New(slog.NewTextHandler(&log, nil)), metrics: NewMetrics(reg)}
		as := actor.NewActorSystem()
		defer as.Shutdown()
		directives := make(chan actor.Directive, 4)
		as.EventStream.Subscribe(func(ev any) {
			if se, ok := ev.(*actor.SupervisorEvent); ok {
				directives <- se.Directive
			}
		})
		handled := make(chan int, 1)
		pid, err := as.Root.SpawnNamed(actor.PropsFromProducer(func() actor.Actor { return &failingActor{handled: handled} }, actor.WithGuardian(g)), supervisorName)
		if err != nil {
			t.Fatal(err)
		}
		as.Root.Send(pid, "fail")
		as.Root.Send(pid, 0)
		synctest.Wait()
		select {
		case got := <-handled:
			if got != 1 {
				t.Fatalf("after the failure the actor's state is %d, want 1 (kept)", got)
			}
		default:
			t.Fatal("the actor handled no message after its failure")
		}
		if d := <-directives; d != actor.ResumeDirective {
			t.Fatalf("the failure was given %v, want resume", d)
		}
		if n := (&world{t: t, reg: reg}).metric("grove_actor_panics_total", map[string]string{"actor": "supervisor"}); n != 1 {
			t.Fatalf("grove_actor_panics_total{actor=supervisor} = %v, want 1", n)
		}
		if !strings.Contains(log.String(), "level=ERROR") || !strings.Contains(log.String(), `panic="test: a panic the actor does not recover"`) {
			t.Fatalf("the failure was not logged at error level:\n%s", log.String())
		}
	})
}

// failingActor counts the strings it gets, and panics at each; it tells
// handled its count when it gets an int. A new incarnation counts from 0.
type failingActor struct {
	n       int
	handled chan int
}

func (a *failingActor) Receive(ctx actor.Context) {
	switch ctx.Message().(type) {
	case string:
		a.n++
		panic("test: a panic the actor does not recover")
	case int:
		a.handled <- a.n
	}
}

// What the supervisor does after a panic in a message's handling
// (supervisorActor.panicked) answers that message's caller: the reloads
// waiting for the config poll whose application panicked get the error
// (and the status shows it), so do a registration and a deletion; the
// requests parked for an on-demand load the planner did not start are
// answered, and the next one asks for the load again.
func TestAfterAPanicTheSupervisorAnswersTheMessagesCaller(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		w := newWorld(t, configJSON(entry("a/", "", "")), map[string]faultySpec{"a/": version(1)})
		defer w.stop()
		synctest.Wait()
		sup := newSupervisor(w.sys) // one of its own, driven here: its planner knows no model
		panicErr := fmt.Errorf("%w: the supervisor panicked handling a test", errInternal)
		isPanic := func(err error) bool {
			return errors.Is(err, errInternal) && servables.KindOf(err) == servables.Unavailable
		}

		reload := make(chan error, 1)
		sup.waitCur = []chan error{reload}
		sup.panicked(configResult{at: time.Now()}, panicErr)
		if err := <-reload; !isPanic(err) {
			t.Errorf("the reload waiting for the poll: %v", err)
		}
		if !strings.Contains(sup.cfgStat.LastError, "applying model config model_config.json: internal error") {
			t.Errorf("config status after the panic: %+v", sup.cfgStat)
		}

		waiting := make(chan error, 1)
		sup.panicked(registerRequest{path: "r/", waiting: waiting}, panicErr)
		if err := <-waiting; !isPanic(err) || !strings.Contains(err.Error(), "registering model r/") {
			t.Errorf("the registration: %v", err)
		}
		reply := make(chan error, 1)
		sup.panicked(unregisterRequest{path: "r/", reply: reply}, panicErr)
		if err := <-reply; !isPanic(err) || !strings.Contains(err.Error(), "deleting model r/") {
			t.Errorf("the deletion: %v", err)
		}

		d := &demandSlot{path: "o/"}
		sup.slots["o/"] = d
		b := newBatch(context.Background(), []Request{{API: "test", ModelPath: "o/", Inputs: scalar(t, 1)}})
		if r, ask := d.park(b, 0, nil, &w.sys.ways, time.Now(), time.Time{}); r != parked || !ask {
			t.Fatalf("the first request: %v, ask %v; want parked, asking for the load", r, ask)
		}
		sup.panicked(demandLoad{path: "o/"}, panicErr)
		select {
		case <-b.reply:
			if err := b.results[0].Err; !isPanic(err) || !strings.Contains(err.Error(), "model o/ could not be loaded") {
				t.Errorf("the parked request: %v", err)
			}
		default:
			t.Fatal("the request parked for the load was not answered")
		}
		next := newBatch(context.Background(), []Request{{API: "test", ModelPath: "o/", Inputs: scalar(t, 1)}})
		if r, ask := d.park(next, 0, nil, &w.sys.ways, time.Now(), time.Time{}); r != parked || !ask {
			t.Fatalf("the next request: %v, ask %v; want parked, asking for the load again", r, ask)
		}
	})
}

// panicOnLog is a log handler that panics once, after armed is set, at
// the first record whose message starts with prefix: a bug in the
// supervisor at that point of its work (what it logs there is the
// handiest place to make it panic).
type panicOnLog struct {
	slog.Handler
	prefix string
	armed  *atomic.Bool
}

func (h panicOnLog) Handle(ctx context.Context, r slog.Record) error {
	if strings.HasPrefix(r.Message, h.prefix) && h.armed.CompareAndSwap(true, false) {
		panic("test: the supervisor crashes at " + strconv.Quote(h.prefix))
	}
	return h.Handler.Handle(ctx, r)
}

func (h panicOnLog) WithAttrs(as []slog.Attr) slog.Handler {
	return panicOnLog{Handler: h.Handler.WithAttrs(as), prefix: h.prefix, armed: h.armed}
}

func (h panicOnLog) WithGroup(name string) slog.Handler {
	return panicOnLog{Handler: h.Handler.WithGroup(name), prefix: h.prefix, armed: h.armed}
}

// crashAtLog makes the world's logger panic once at the first record
// whose message starts with prefix after *armed is set.
func crashAtLog(prefix string, armed *atomic.Bool) func(*world, *Options) {
	return func(_ *world, o *Options) {
		o.Logger = slog.New(panicOnLog{Handler: o.Logger.Handler(), prefix: prefix, armed: armed})
	}
}

// A panic while the supervisor takes the result of a load's stage (here
// the runtime load's, as it notes the runtime's first load) fails that
// load, its servable closed, and the next poll loads the model. The
// result is the one message the planner waits for: lost, the model would
// stay loading for good and the server never ready.
func TestAPanicWhileTakingALoadsResultFailsThatLoadAndTheNextPollRetriesIt(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var armed atomic.Bool
		armed.Store(true)
		w := newWorld(t, configJSON(entry("a/", "", "")), map[string]faultySpec{"a/": version(1)}, crashAtLog("first load of a runtime", &armed))
		defer w.stop()
		synctest.Wait()
		if armed.Load() {
			t.Fatal("the supervisor did not panic")
		}
		m := w.model("a/")
		if m.State != StateFailed || !strings.Contains(m.LastError, "internal error") || !strings.Contains(m.LastError, "test: the supervisor crashes") {
			t.Fatalf("a/ after the handling of its load's result panicked: %+v, want failed with the panic", m)
		}
		if l, c := w.rt.loaded.Load(), w.rt.closed.Load(); l != 1 || c != 1 {
			t.Fatalf("%d servables loaded, %d closed; want the one whose result was lost closed", l, c)
		}
		w.settle() // the next poll
		if m := w.model("a/"); m.State != StateReady || !w.sys.Ready() {
			t.Fatalf("a/ at the next poll: %+v, ready %v", m, w.sys.Ready())
		}
		if res := w.infer("a/", 3); res.Err != nil {
			t.Fatalf("a/: %v", res.Err)
		}
		w.wantPanics("supervisor", 1)
	})
}

// A panic while the supervisor takes the end of a stuck warm-up's content
// (its model actors gone once the forward call returned; it logs it)
// still has the planner forget that content: the model loads again at
// the next poll, instead of being held back for good by a call that has
// returned.
func TestAPanicWhileTakingTheEndOfAStuckWarmUpStillLetsTheModelLoadAgain(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		tweak, release, _ := hangWarmUps(2500 * time.Millisecond)
		var armed atomic.Bool
		w := newWorld(t, configJSON(entry("a/", "", warmUpOf5)), map[string]faultySpec{"a/": version(1)}, tweak,
			crashAtLog("the forward call of a timed-out warm-up returned", &armed))
		defer w.stop()
		defer release()
		time.Sleep(2500 * time.Millisecond)
		synctest.Wait()
		if m := w.model("a/"); m.State != StateFailed || m.StuckWarmUps != 1 {
			t.Fatalf("at warmup_timeout: %+v, want failed with one stuck warm-up", m)
		}
		armed.Store(true)
		release()
		if armed.Load() {
			t.Fatal("the supervisor did not panic")
		}
		w.settle()
		if l, c := w.rt.loaded.Load(), w.rt.closed.Load(); l != 2 || c != 1 {
			t.Fatalf("once the stuck call returned: %d servables loaded, %d closed; want the stuck one closed and a new load", l, c)
		}
		if m := w.model("a/"); m.State != StateReady || m.StuckWarmUps != 0 {
			t.Fatalf("once the stuck call returned: %+v", m)
		}
	})
}

// A panic while the supervisor reports an on-demand model's failed load
// (as it logs it) costs the report only: the request waiting for the
// load gets its failure at once, not at its deadline, and after the
// backoff the next request loads the model. Left half done, the load's
// demand slot kept its "load asked" mark: every request after it waited
// for a load nobody would start.
func TestAPanicWhileReportingAFailedOnDemandLoadStillAnswersItsRequestsAndLetsTheNextLoad(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var armed atomic.Bool
		w := newWorld(t, configJSON(entry("o/", "", onDemandLoad)), map[string]faultySpec{"o/": {FailLoad: true}},
			crashAtLog("on-demand model load failed", &armed))
		defer w.stop()
		synctest.Wait()
		armed.Store(true)
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		start := time.Now()
		res, err := w.sys.Infer(ctx, []Request{{API: "test", ModelPath: "o/", Inputs: scalar(t, 1)}})
		if err != nil {
			t.Fatal(err)
		}
		if armed.Load() {
			t.Fatal("the supervisor did not panic")
		}
		if got := res[0].Err; got == nil || !strings.Contains(got.Error(), "asked to fail loading") || time.Since(start) != 0 {
			t.Fatalf("the waiting request got %v after %v, want the load's failure at once", got, time.Since(start))
		}
		w.putModel("o/", version(1))
		time.Sleep(time.Second) // the backoff after one failed load
		ctx, cancel = context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		start = time.Now()
		res, err = w.sys.Infer(ctx, []Request{{API: "test", ModelPath: "o/", Inputs: scalar(t, 4)}})
		if err != nil || res[0].Err != nil || time.Since(start) != 0 {
			t.Fatalf("o/ after the backoff: %v %+v after %v, want it loaded and answering", err, res, time.Since(start))
		}
	})
}

// A panic while the supervisor releases a content (as it logs it) costs
// the log line only: the content's model actors stop and its servable
// is closed, and its memory no longer counts.
func TestAPanicWhileReleasingAContentStillClosesIt(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var armed atomic.Bool
		w := newWorld(t, configJSON(), nil, crashAtLog("releasing model content", &armed))
		defer w.stop()
		synctest.Wait()
		ctx := context.Background()
		name, data := modelFile(t, "r/", version(1))
		if err := w.sys.RegisterModel(ctx, "r/", map[string][]byte{name: data}, ""); err != nil {
			t.Fatal(err)
		}
		armed.Store(true)
		if err := w.sys.DeleteModel(ctx, "r/"); err != nil {
			t.Fatal(err)
		}
		synctest.Wait()
		if armed.Load() {
			t.Fatal("the supervisor did not panic")
		}
		if c := w.rt.closed.Load(); c != 1 {
			t.Fatalf("%d servables closed after the deletion, want the deleted model's", c)
		}
	})
}

// A panic in the fetch step of an on-demand model whose files the disk
// cache kept (here as it names the bucket, after taking them from the
// cache) fails that load; the files, out of the cache and in no job's
// hands, are still deleted by the time the server stops.
func TestAPanicInAFetchFromTheDiskCacheLeavesNoFilesBehind(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		size := int64(len(mustSpec(t, version(1))))
		sumA, sumB := checksumOf(t, "a/", version(1)), checksumOf(t, "b/", version(2))
		var cb *crashingBucket
		var cacheDir string
		w := newWorld(t, configJSON(entry("a/", sumA, onDemandLoad), entry("b/", sumB, onDemandLoad)),
			map[string]faultySpec{"a/": version(1), "b/": version(2)}, unmeasured, crashOn(&cb),
			func(_ *world, o *Options) {
				o.MemoryBudget, o.MemoryFactor, o.DiskCacheBytes = size+size/2, 1, 10*size
				cacheDir = o.CacheDir
			})
		synctest.Wait()
		for _, p := range []string{"a/", "b/"} { // b/'s load unloads a/, whose files go to the disk cache
			if res := w.infer(p, 2); res.Err != nil {
				t.Fatalf("%s: %v", p, res.Err)
			}
			synctest.Wait()
		}
		if n := w.metric("grove_model_disk_cache_bytes", nil); n != float64(size) {
			t.Fatalf("disk cache bytes = %v, want a/'s %d", n, size)
		}
		cb.crash.Store(true)
		if res := w.infer("a/", 3); !errors.Is(res.Err, errInternal) {
			t.Fatalf("a/ whose fetch from the disk cache panicked: %v, want the internal error", res.Err)
		}
		if cb.crash.Load() {
			t.Fatal("the supervisor did not panic")
		}
		w.stop()
		if left, _ := filepath.Glob(filepath.Join(cacheDir, "*", "model.faulty")); len(left) != 0 {
			t.Errorf("model files left after Stop: %v", left)
		}
	})
}

// A deletion whose handling panics once the planner has it (here as the
// supervisor notes the deleted content retired) is done: its caller hears
// so, not an internal error telling it to retry (a retry would find the
// model not registered), and the model is gone and closed.
func TestADeletionWhoseHandlingPanicsAfterItIsDoneIsAnsweredDone(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var armed atomic.Bool
		w := newWorld(t, configJSON(), nil, crashAtLog("model content retired", &armed))
		defer w.stop()
		synctest.Wait()
		ctx := context.Background()
		name, data := modelFile(t, "r/", version(1))
		if err := w.sys.RegisterModel(ctx, "r/", map[string][]byte{name: data}, ""); err != nil {
			t.Fatal(err)
		}
		armed.Store(true)
		if err := w.sys.DeleteModel(ctx, "r/"); err != nil {
			t.Fatalf("the deletion: %v, want done", err)
		}
		if armed.Load() {
			t.Fatal("the supervisor did not panic")
		}
		w.settle()
		if res := w.infer("r/", 2); !errors.Is(res.Err, ErrModelNotFound) {
			t.Fatalf("the deleted model answered %v", res.Err)
		}
		if c := w.rt.closed.Load(); c != 1 {
			t.Fatalf("%d servables closed after the deletion, want the deleted model's", c)
		}
	})
}

// A registration whose handling panics once the planner has it (register
// puts its caller among the waiters before taking its steps) is left to
// its outcome: panicked does not answer it with an internal error (a
// retry would find it registered already), and the outcome the planner
// notifies reaches the caller.
func TestARegistrationWhoseHandlingPanicsAfterThePlannerHasItHearsItsOutcome(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		w := newWorld(t, configJSON(), nil)
		defer w.stop()
		synctest.Wait()
		sup := newSupervisor(w.sys) // one of its own, driven here
		if err := sup.plan.Apply(lifecycle.Registered{Meta: modelconfig.Model{Path: "r/"}}, time.Now()); err != nil {
			t.Fatal(err)
		}
		waiting := make(chan error, 1)
		sup.waiters["r/"] = []chan error{waiting}
		sup.panicked(registerRequest{path: "r/", waiting: waiting}, fmt.Errorf("%w: the supervisor panicked handling a test", errInternal))
		select {
		case err := <-waiting:
			t.Fatalf("the registration the planner has was answered %v, want its outcome", err)
		default:
		}
		sup.answerHeld([]lifecycle.Step{{Kind: lifecycle.Notify, Path: "r/"}})
		if err := <-waiting; err != nil {
			t.Fatalf("the registration's outcome: %v, want nil (ready)", err)
		}
	})
}

// modelActors returns the names of the model actors alive.
func (w *world) modelActors() []string {
	var out []string
	for _, n := range w.actorNames() {
		if strings.Contains(n, "/model-") {
			out = append(out, n)
		}
	}
	return out
}

// A panic partway through the spawn of a content's model actors (here as
// the supervisor notes the first of two replicas spawned) fails that
// load and leaves nothing half-spawned: the replica spawned is stopped,
// the servable closed once it has, and the next poll loads the model.
// Left running, that replica kept using a servable the failed load's
// drop had closed, until Stop.
func TestAPanicPartwayThroughSpawningAModelsActorsStopsThoseSpawned(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var armed atomic.Bool
		armed.Store(true)
		w := newWorld(t, configJSON(entry("a/", "", `"replicas": 2`)), map[string]faultySpec{"a/": version(1)},
			crashAtLog("model actor spawned", &armed))
		defer w.stop()
		synctest.Wait()
		if armed.Load() {
			t.Fatal("the supervisor did not panic")
		}
		m := w.model("a/")
		if m.State != StateFailed || !strings.Contains(m.LastError, "internal error") {
			t.Fatalf("a/ after its spawn panicked: %+v, want failed with the panic", m)
		}
		if left := w.modelActors(); len(left) != 0 {
			t.Fatalf("model actors still running after the failed load: %v", left)
		}
		if l, c := w.rt.loaded.Load(), w.rt.closed.Load(); l != 1 || c != 1 {
			t.Fatalf("%d servables loaded, %d closed; want the failed load's closed", l, c)
		}
		w.settle() // the next poll
		if m := w.model("a/"); m.State != StateReady || m.Replicas != 2 {
			t.Fatalf("a/ at the next poll: %+v", m)
		}
		if res := w.infer("a/", 3); res.Err != nil {
			t.Fatalf("a/: %v", res.Err)
		}
		if left := w.modelActors(); len(left) != 2 {
			t.Fatalf("model actors: %v, want a/'s two replicas", left)
		}
	})
}

// A replica that cannot be spawned (here its name is taken) fails the
// load as a panic in the spawn does: the replica spawned before it is
// stopped, the servable closed once it has, and the next poll loads the
// model.
func TestAReplicaThatCannotBeSpawnedFailsTheLoadAndStopsThoseSpawned(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		gate := make(chan struct{})
		w := newWorld(t, configJSON(entry("a/", "", `"replicas": 2`)), map[string]faultySpec{"a/": version(1)},
			func(w *world, _ *Options) { w.rt.gate = gate })
		defer w.stop()
		blocker, err := w.sys.as.Root.SpawnNamed(actor.PropsFromFunc(func(actor.Context) {}), supervisorName+"/model-0-1")
		if err != nil {
			t.Fatal(err)
		}
		close(gate)
		synctest.Wait()
		if m := w.model("a/"); m.State != StateFailed || !strings.Contains(m.LastError, "spawning model actor") {
			t.Fatalf("a/ whose second replica could not be spawned: %+v", m)
		}
		if left := w.modelActors(); len(left) != 1 || left[0] != blocker.Id {
			t.Fatalf("model actors after the failed load: %v, want the blocker alone", left)
		}
		if l, c := w.rt.loaded.Load(), w.rt.closed.Load(); l != 1 || c != 1 {
			t.Fatalf("%d servables loaded, %d closed; want the failed load's closed", l, c)
		}
		if err := w.sys.as.Root.StopFuture(blocker).Wait(); err != nil {
			t.Fatal(err)
		}
		w.settle() // the next poll
		if m := w.model("a/"); m.State != StateReady || m.Replicas != 2 {
			t.Fatalf("a/ at the next poll: %+v", m)
		}
		if res := w.infer("a/", 3); res.Err != nil {
			t.Fatalf("a/: %v", res.Err)
		}
	})
}

// failingClose is a servable whose Close notes the call, then fails, or
// panics when panics is set (a bug in a runtime's binding).
type failingClose struct {
	servables.Servable
	closed atomic.Bool
	panics bool
}

func (f *failingClose) Close() error {
	f.closed.Store(true)
	if f.panics {
		panic("test: the servable crashes closing")
	}
	return errors.New("test: close failed")
}

// sendRecorder is an actor context that records what is sent with it.
type sendRecorder struct {
	actor.Context
	sent []any
}

func (r *sendRecorder) Self() *actor.PID           { return actor.NewPID("test", supervisorName) }
func (r *sendRecorder) Send(_ *actor.PID, msg any) { r.sent = append(r.sent, msg) }
func (r *sendRecorder) freed(id int64) (freed bool) {
	return slices.Contains(r.sent, any(freedContent{id: id}))
}

// A panic while the supervisor logs a failed close of a dropped job's
// servable (a bug in the log) costs the log line only: the job's files
// are removed and its memory freed (freedContent), as without it. Before,
// the files stayed on disk for good (the job gone, Stop did not see them)
// and the planner was never told the job's memory was free.
func TestAPanicWhileLoggingAFailedCloseStillFreesTheJob(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var armed atomic.Bool
		w := newWorld(t, configJSON(), nil, crashAtLog("closing model", &armed))
		defer w.stop()
		synctest.Wait()
		sup := newSupervisor(w.sys) // one of its own, driven here
		sv := &failingClose{}
		local := &bucket.LocalModel{Dir: t.TempDir()}
		ctx := &sendRecorder{}
		armed.Store(true)
		func() {
			defer func() { _ = recover() }() // as take does
			sup.drop(ctx, 7, &loadJob{path: "a/", sv: servables.WithSignature(sv, servables.Metadata{}), local: local})
		}()
		if armed.Load() {
			t.Fatal("the supervisor did not panic")
		}
		if !sv.closed.Load() {
			t.Error("the servable was not closed")
		}
		if _, err := os.Stat(local.Dir); !errors.Is(err, fs.ErrNotExist) {
			t.Errorf("the job's files are still there: %v", err)
		}
		if !ctx.freed(7) {
			t.Errorf("no freedContent sent: %v; the planner would count the job's memory for good", ctx.sent)
		}
	})
}

// deadlineCrash is a caller's context whose Deadline panics once after
// armed is set: the first code to ask it (the router, as it sends the
// request to its model) panics.
type deadlineCrash struct {
	context.Context
	armed *atomic.Bool
}

func (c deadlineCrash) Deadline() (time.Time, bool) {
	if c.armed.CompareAndSwap(true, false) {
		panic("test: the router crashes")
	}
	return c.Context.Deadline()
}

// A panic while the router sends a request to its model, after it took
// the request's place in the model's queue, gives that place back: the
// content drains, so once replaced it is released and its servable
// closed. Before, the place was never given back, and the content stayed
// retiring, loaded, until Stop.
func TestAPanicWhileSendingARequestToItsModelGivesItsPlaceBack(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		w := newWorld(t, configJSON(entry("a/", "", "")), map[string]faultySpec{"a/": version(1)})
		defer w.stop()
		synctest.Wait()
		var armed atomic.Bool
		armed.Store(true)
		res, err := w.sys.Infer(deadlineCrash{Context: context.Background(), armed: &armed}, []Request{{API: "test", ModelPath: "a/", Inputs: scalar(t, 1)}})
		if armed.Load() {
			t.Fatal("the router did not panic")
		}
		if err != nil || !errors.Is(res[0].Err, errInternal) {
			t.Fatalf("the request whose sending panicked: %v %+v, want the internal error", err, res)
		}
		if res := w.infer("a/", 2); res.Err != nil {
			t.Fatalf("a/ after the panic: %v", res.Err)
		}
		sum := w.putModel("a/", version(2))
		w.setConfig(configJSON(entry("a/", sum, "")))
		w.settle()
		if m := w.model("a/"); m.Checksum != sum || m.Retiring != 0 {
			t.Fatalf("a/ after its update: %+v, want the new content serving and the old one released", m)
		}
		if l, c := w.rt.loaded.Load(), w.rt.closed.Load(); l != 2 || c != 1 {
			t.Fatalf("%d servables loaded, %d closed; want the replaced one closed", l, c)
		}
	})
}

// valueCrash is a caller's context whose Value panics once after armed
// is set: the first code to look a value up in it (the router, as it
// starts a shadow copy's trace) panics.
type valueCrash struct {
	context.Context
	armed *atomic.Bool
}

func (c valueCrash) Value(key any) any {
	if c.armed.CompareAndSwap(true, false) {
		panic("test: the router crashes")
	}
	return c.Context.Value(key)
}

// A panic while the router sends a shadow copy, after it took the copy's
// places in the shadow model's queue, gives those places back: the
// shadow model's content drains, so once replaced it is released.
func TestAPanicWhileSendingAShadowCopyGivesItsPlacesBack(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		hold := make(chan struct{})
		w := newWorld(t, configJSON(entry("a/", "", ""), entry("b/", "", "")), map[string]faultySpec{"a/": version(1), "b/": version(2)},
			func(w *world, _ *Options) { w.rt.hold = hold }) // the champion answers once the panic is over
		defer w.stop()
		synctest.Wait()
		var armed atomic.Bool
		armed.Store(true)
		ctx := valueCrash{Context: context.Background(), armed: &armed}
		var res []Result
		var err error
		done := make(chan struct{})
		go func() {
			defer close(done)
			res, err = w.sys.Infer(ctx, []Request{{API: "test", ModelPath: "a/", Inputs: scalar(t, 1), Shadows: []ShadowTarget{{ModelPath: "b/"}}}})
		}()
		synctest.Wait()
		if armed.Load() {
			t.Fatal("the router did not panic")
		}
		close(hold)
		<-done
		if err != nil || !errors.Is(res[0].Err, errInternal) {
			t.Fatalf("the request whose shadow copy's sending panicked: %v %+v, want the internal error", err, res)
		}
		sum := w.putModel("b/", version(3))
		w.setConfig(configJSON(entry("a/", "", ""), entry("b/", sum, "")))
		w.settle()
		if m := w.model("b/"); m.Checksum != sum || m.Retiring != 0 {
			t.Fatalf("b/ after its update: %+v, want the new content serving and the old one released", m)
		}
		if l, c := w.rt.loaded.Load(), w.rt.closed.Load(); l != 3 || c != 1 {
			t.Fatalf("%d servables loaded, %d closed; want b/'s replaced one closed", l, c)
		}
	})
}

// A contract listing whose query panics in the router (here on a broken
// entry of its contracts) fails with the internal error, as the router's
// other queries do, instead of returning what it had listed so far as
// the whole list.
func TestAContractListingWhoseQueryPanicsFailsWithTheInternalError(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		w := newWorld(t, promotionConfig, map[string]faultySpec{"a/": version(1), "b/": version(2), "c/": version(3)})
		defer w.stop()
		synctest.Wait()
		ctx := context.Background()
		if err := w.sys.askRouter(ctx, func(r *routerActor) { r.contracts["broken/entry/1"] = nil }); err != nil {
			t.Fatal(err)
		}
		list, err := w.sys.Contracts()
		if !errors.Is(err, errInternal) || servables.KindOf(err) != servables.Unavailable || list != nil {
			t.Fatalf("the listing whose query panicked: %v, %v; want no list and the internal error", list, err)
		}
		if err := w.sys.askRouter(ctx, func(r *routerActor) { delete(r.contracts, "broken/entry/1") }); err != nil {
			t.Fatal(err)
		}
		if list, err := w.sys.Contracts(); err != nil || len(list) != 2 || list[1].ID() != "ads/pctr/1" {
			t.Fatalf("the listing after: %v, %v", list, err)
		}
	})
}

// A config edit whose application here panics (here as the supervisor
// notes the model the edit removed) is answered as written: the config
// is in the bucket, and the next poll applies it. Answered "internal
// error, retry" before, its caller would retry an edit already made (a
// creation would then be refused as a conflict).
func TestAConfigEditWhoseApplicationPanicsIsAnsweredWritten(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var armed atomic.Bool
		w := newWorld(t, configJSON(entry("a/", "", ""), entry("b/", "", `"eviction_grace_period_in_ms": 0`)), map[string]faultySpec{"a/": version(1), "b/": version(2)},
			crashAtLog("model removed from config", &armed))
		defer w.stop()
		synctest.Wait()
		armed.Store(true)
		written, err := w.sys.EditConfig(context.Background(), func(c *modelconfig.Config) error {
			c.Models = slices.DeleteFunc(c.Models, func(m modelconfig.Model) bool { return m.Path == "b/" })
			return nil
		})
		if armed.Load() {
			t.Fatal("the supervisor did not panic")
		}
		if err != nil || written == nil || len(written.Models) != 1 {
			t.Fatalf("the edit whose application panicked: %v, %v; want it answered written", written, err)
		}
		w.wantPanics("supervisor", 1)
		w.settle() // the next poll applies it
		w.settle()
		for _, m := range w.sys.Status().Models {
			if m.Path == "b/" {
				t.Fatalf("b/, removed by the edit, after the next poll: %+v", m)
			}
		}
		if res := w.infer("a/", 3); res.Err != nil {
			t.Fatalf("a/: %v", res.Err)
		}
	})
}

// panickyBucket is a bucket whose client panics (a bug in it) once after
// it is armed: at the next Open of a model file (a fetch's download) when
// panicOpen is set, at the next read of the model config when panicRead is.
type panickyBucket struct {
	*memBucket
	panicOpen, panicRead atomic.Bool
}

func (b *panickyBucket) Open(ctx context.Context, name string) (io.ReadCloser, error) {
	if name != "model_config.json" && b.panicOpen.CompareAndSwap(true, false) {
		panic("test: the bucket client crashes opening " + name)
	}
	return b.memBucket.Open(ctx, name)
}

func (b *panickyBucket) ReadObject(ctx context.Context, name string, limit int64) ([]byte, bucket.Attrs, error) {
	if name == "model_config.json" && b.panicRead.CompareAndSwap(true, false) {
		panic("test: the bucket client crashes reading " + name)
	}
	return b.memBucket.ReadObject(ctx, name, limit)
}

// panicky makes the world's bucket a panickyBucket, stored in *pb, and
// its cache directory known in *cacheDir.
func panicky(pb **panickyBucket, cacheDir *string) func(*world, *Options) {
	return func(w *world, o *Options) {
		*pb = &panickyBucket{memBucket: w.b}
		o.Bucket = *pb
		*cacheDir = o.CacheDir
	}
}

// A panic while a model's files are fetched from the bucket (here in the
// bucket client, as the download opens the file) fails that fetch alone:
// the request waiting for the on-demand model gets the internal error at
// once, nothing of the fetch is left in the cache directory, the panic is
// logged with its stack and counted, the other model serves on, and
// after the backoff the next request loads the model. Before, the panic
// ended the process.
func TestAPanicInAModelsFetchFailsThatFetchAloneAndLeavesNoFiles(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var pb *panickyBucket
		var cacheDir string
		w := newWorld(t, configJSON(entry("a/", "", ""), entry("o/", "", onDemandLoad)), map[string]faultySpec{"a/": version(1), "o/": version(2)},
			panicky(&pb, &cacheDir))
		defer w.stop()
		synctest.Wait()
		before, _ := filepath.Glob(filepath.Join(cacheDir, "*"))
		if len(before) != 1 {
			t.Fatalf("cache directory before: %v, want a/'s files alone", before)
		}

		pb.panicOpen.Store(true)
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		start := time.Now()
		res, err := w.sys.Infer(ctx, []Request{{API: "test", ModelPath: "o/", Inputs: scalar(t, 1)}})
		if err != nil {
			t.Fatal(err)
		}
		if pb.panicOpen.Load() {
			t.Fatal("the bucket client did not panic")
		}
		if got := res[0].Err; !errors.Is(got, errInternal) || servables.KindOf(got) != servables.Unavailable ||
			!strings.Contains(got.Error(), "the fetch of model o/ panicked") || time.Since(start) != 0 {
			t.Fatalf("the waiting request got %v after %v, want the internal error at once", got, time.Since(start))
		}
		synctest.Wait()
		if m := w.model("o/"); !strings.Contains(m.LastError, "the fetch of model o/ panicked: test: the bucket client crashes") {
			t.Fatalf("o/ after its fetch panicked: %+v", m)
		}
		if after, _ := filepath.Glob(filepath.Join(cacheDir, "*")); !slices.Equal(after, before) {
			t.Fatalf("cache directory after the fetch that panicked: %v, want %v", after, before)
		}
		if res := w.infer("a/", 3); res.Err != nil {
			t.Fatalf("a/ after the panic: %v", res.Err)
		}
		w.wantPanics("fetch", 1)
		w.wantLogged("level=ERROR", "actor=fetch", `panic="test: the bucket client crashes opening o/model.faulty"`, "fetchFiles")

		time.Sleep(time.Second) // o/'s backoff after one failed load
		if res := w.infer("o/", 4); res.Err != nil || res.Outputs[0].Float32s()[0] != 4 {
			t.Fatalf("o/ after the backoff: %+v", res)
		}
	})
}

// A panic in a config poll (here in the bucket client, as it reads the
// config) fails that poll alone, as a config that could not be read: the
// config in force stays, its models serve on, the status shows the
// error, the panic is logged with its stack and counted, and the next
// poll runs as usual and applies a change. Before, the panic ended the
// process.
func TestAPanicInAConfigPollFailsThatPollAloneAndTheNextOneRunsAsUsual(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var pb *panickyBucket
		var cacheDir string
		w := newWorld(t, configJSON(entry("a/", "", "")), map[string]faultySpec{"a/": version(1), "b/": version(2)}, panicky(&pb, &cacheDir))
		defer w.stop()
		synctest.Wait()

		pb.panicRead.Store(true)
		w.settle() // the next poll panics
		if pb.panicRead.Load() {
			t.Fatal("the bucket client did not panic")
		}
		if st := w.sys.Status().Config; !strings.Contains(st.LastError, "reading model config model_config.json: internal error: the config poll panicked: test: the bucket client crashes") {
			t.Fatalf("config status after the poll that panicked: %+v", st)
		}
		if res := w.infer("a/", 3); res.Err != nil {
			t.Fatalf("a/ after the panic: %v", res.Err)
		}
		w.wantPanics("config_poll", 1)
		w.wantLogged("level=ERROR", "actor=config_poll", `panic="test: the bucket client crashes reading model_config.json"`, "readConfig")

		w.setConfig(configJSON(entry("a/", "", ""), entry("b/", "", "")))
		if m := w.model("b/"); m.State != StateReady {
			t.Fatalf("b/, added after the poll that panicked, at the next poll: %+v", m)
		}
		if st := w.sys.Status().Config; st.LastError != "" {
			t.Fatalf("config status after the next poll: %+v", st)
		}
	})
}

// A reload waiting for a config poll that panics (here in the bucket
// client, as it reads the config) gets the internal error at once, as one
// whose poll's application panics does: not "applied", which it is not.
// A config edit whose reload so fails is answered written (it is in the
// bucket; the next poll applies it), with the failure logged.
func TestAReloadWhosePollPanicsIsAnsweredWithTheInternalErrorAtOnce(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var pb *panickyBucket
		var cacheDir string
		w := newWorld(t, configJSON(entry("a/", "", "")), map[string]faultySpec{"a/": version(1), "b/": version(2)}, panicky(&pb, &cacheDir))
		defer w.stop()
		synctest.Wait()
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()

		pb.panicRead.Store(true)
		start := time.Now()
		err := w.sys.Reload(ctx)
		if pb.panicRead.Load() {
			t.Fatal("the bucket client did not panic")
		}
		if !errors.Is(err, errInternal) || servables.KindOf(err) != servables.Unavailable || !strings.Contains(err.Error(), "the config poll panicked") || time.Since(start) != 0 {
			t.Fatalf("the reload whose poll panicked: %v after %v, want the internal error at once", err, time.Since(start))
		}

		written, err := w.sys.EditConfig(ctx, func(c *modelconfig.Config) error {
			pb.panicRead.Store(true) // the edit's own read is done: the reload's poll panics
			c.Models = append(c.Models, modelconfig.Model{Path: "b/"})
			return nil
		})
		if pb.panicRead.Load() {
			t.Fatal("the bucket client did not panic")
		}
		if err != nil || written == nil || len(written.Models) != 2 {
			t.Fatalf("the edit whose reload's poll panicked: %v, %v; want it answered written", written, err)
		}
		if !strings.Contains(w.log.String(), "model config written; reading or applying it here panicked") {
			t.Error("the edit's failed reload is not logged")
		}
		w.settle() // the next poll applies it
		if m := w.model("b/"); m.State != StateReady {
			t.Fatalf("b/, added by the edit, after the next poll: %+v", m)
		}
	})
}

// A panic in a warm-up's own code (here as it parses the model's
// warm-up requests, before any forward call) fails that load with the
// internal error, logged with its stack and counted, and releases what
// the load held: the model's two replicas stop, the servable they share
// is closed once, and its memory no longer counts. The next poll loads
// the model. Before, the panic ended the process.
func TestAPanicInAWarmUpFailsThatLoadAndReleasesItsContent(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var armed atomic.Bool
		armed.Store(true)
		size := int64(len(mustSpec(t, version(1))))
		w := newWorld(t, configJSON(entry("a/", "", `"replicas": 2, `+warmUpOf5)), map[string]faultySpec{"a/": version(1)}, unmeasured,
			func(_ *world, o *Options) {
				o.MemoryBudget, o.MemoryFactor = 10*size, 1
				o.ParseWarmUp = func(js, path string) ([][]servables.Tensor, error) {
					if armed.CompareAndSwap(true, false) {
						panic("test: the warm-up crashes")
					}
					return warmUpParser(js, path)
				}
			})
		defer w.stop()
		synctest.Wait()
		if armed.Load() {
			t.Fatal("the warm-up did not panic")
		}
		st := w.sys.Status()
		if m := w.model("a/"); m.State != StateFailed || !strings.Contains(m.LastError, "warming up model a/: internal error: the warm-up of model a/ panicked: test: the warm-up crashes") {
			t.Fatalf("a/ after its warm-up panicked: %+v", m)
		}
		if st.Memory == nil || st.Memory.UsedBytes != 0 {
			t.Fatalf("memory after the failed load: %+v, want none used", st.Memory)
		}
		if left := w.modelActors(); len(left) != 0 {
			t.Fatalf("model actors after the failed load: %v", left)
		}
		if l, c := w.rt.loaded.Load(), w.rt.closed.Load(); l != 1 || c != 1 {
			t.Fatalf("%d servables loaded, %d closed; want the failed load's closed once", l, c)
		}
		w.wantPanics("warm_up", 1)
		w.wantLogged("level=ERROR", "actor=warm_up", `panic="test: the warm-up crashes"`, "warmUpOf")
		if strings.Contains(w.log.String(), "model signature incomplete") {
			t.Error("the warm-up that panicked is logged as one that ended")
		}

		w.settle() // the next poll
		if m := w.model("a/"); m.State != StateReady || m.Replicas != 2 {
			t.Fatalf("a/ at the next poll: %+v", m)
		}
		if res := w.infer("a/", 3); res.Err != nil {
			t.Fatalf("a/: %v", res.Err)
		}
		if st := w.sys.Status(); st.Memory.UsedBytes != size {
			t.Fatalf("memory used with a/ loaded: %d, want %d", st.Memory.UsedBytes, size)
		}
	})
}

// A panic while the supervisor logs a failed close as it stops (a bug in
// the log) costs the log only: every job's servable is still closed, and
// the files of every job, content and leftover are still removed. Before,
// the first failed close's log ended freeAll: the rest stayed open and on
// disk for good.
func TestAPanicWhileLoggingAFailedCloseAtStopStillFreesTheRest(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var armed atomic.Bool
		w := newWorld(t, configJSON(), nil, crashAtLog("closing model", &armed))
		defer w.stop()
		synctest.Wait()
		sup := newSupervisor(w.sys) // one of its own, driven here
		var svs []*failingClose
		var dirs []string
		local := func() *bucket.LocalModel {
			l := &bucket.LocalModel{Dir: t.TempDir()}
			dirs = append(dirs, l.Dir)
			return l
		}
		for id := range int64(3) {
			sv := &failingClose{}
			svs = append(svs, sv)
			sup.jobs[id] = &loadJob{path: "j/", sv: servables.WithSignature(sv, servables.Metadata{}), local: local()}
		}
		sup.contents[7] = &content{id: 7, path: "c/", local: local()}
		sup.leftovers = []*bucket.LocalModel{local()}
		armed.Store(true)
		func() {
			defer func() { _ = recover() }() // as Receive does
			sup.freeAll()
		}()
		if armed.Load() {
			t.Fatal("the supervisor did not panic")
		}
		for i, sv := range svs {
			if !sv.closed.Load() {
				t.Errorf("job %d's servable was not closed", i)
			}
		}
		for _, d := range dirs {
			if _, err := os.Stat(d); !errors.Is(err, fs.ErrNotExist) {
				t.Errorf("%s is still there: %v", d, err)
			}
		}
	})
}

// keyRecorder is a context that records the key of the last value
// looked up in it (and has none).
type keyRecorder struct {
	context.Context
	key any
}

func (k *keyRecorder) Value(key any) any {
	k.key = key
	return nil
}

// identityCrash is a caller's context whose Value panics once after
// armed is set, at the first look-up of the caller's identity
// (auth.FromContext): the router, as it sends a shadow copy to another
// node, panics there.
type identityCrash struct {
	context.Context
	key   any
	armed *atomic.Bool
}

func newIdentityCrash(armed *atomic.Bool) identityCrash {
	rec := &keyRecorder{Context: context.Background()}
	auth.FromContext(rec)
	return identityCrash{Context: context.Background(), key: rec.key, armed: armed}
}

func (c identityCrash) Value(key any) any {
	if key == c.key && c.armed.CompareAndSwap(true, false) {
		panic("test: the router crashes")
	}
	return c.Context.Value(key)
}

// A panic while the router sends a shadow copy to a challenger on another
// node, after it took the copy's place among those in flight (here as it
// reads the caller's identity to forward it), gives that place back: the
// next copy is forwarded, not dropped as overloaded. Before, each such
// panic kept a place for good, and once the bound (one place here) was
// taken, every copy to that challenger was dropped.
func TestAPanicWhileSendingARemoteShadowCopyGivesItsPlaceBack(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		a, b := shadowedCluster(t, nil, func(_ *world, o *Options) { o.QueueSize = 4 }) // room for 1 copy in flight
		defer b.stop()
		defer a.stop()
		var armed atomic.Bool
		armed.Store(true)
		_, _, _ = a.sys.Score(newIdentityCrash(&armed), "ads/pctr/1", "", Request{API: "test", Inputs: scalar(t, 3)})
		synctest.Wait()
		if armed.Load() {
			t.Fatal("the router did not panic")
		}
		if !strings.Contains(a.log.String(), "shadowRemote") {
			t.Fatalf("the router did not panic sending the shadow copy:\n%s", a.log.String())
		}
		if n, _ := remoteShadowEntry(t, a, "r/"); n != 0 {
			t.Fatalf("%d copies of r/ in flight after the panic, want 0", n)
		}
		scoreShadowed(t, a)
		if n := a.metric("grove_shadow_dropped_total", map[string]string{"model": "r/", "reason": "overloaded"}); n != 0 {
			t.Fatalf("grove_shadow_dropped_total{reason=overloaded} of r/ = %v after the panic, want the next copy forwarded", n)
		}
		if n := a.metric("grove_cluster_forwarded_total", map[string]string{"model": "r/", "result": "ok"}); n != 1 {
			t.Fatalf("grove_cluster_forwarded_total{result=ok} of r/ = %v, want the next copy's", n)
		}
	})
}

// A panic in a load's own code around the runtime's (here as it measures
// the memory the load took, once the runtime has loaded the model) fails
// that load alone: the request waiting for the on-demand model gets the
// internal error at once, the servable loaded is closed once, no memory
// counts for it, the load no longer counts as running (a later load
// measures its memory), the panic is logged with its stack and counted,
// and after the backoff the next request loads the model. Before, the
// panic ended the process.
func TestAPanicMeasuringALoadFailsThatLoadAndClosesItsServable(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var armed atomic.Bool
		armed.Store(true)
		size := int64(len(mustSpec(t, version(1))))
		w := newWorld(t, configJSON(entry("o/", "", onDemandLoad)), map[string]faultySpec{"o/": version(1)}, func(w *world, o *Options) {
			o.MemoryBudget, o.MemoryFactor = 10*size, 1
			o.residentBytes = func() int64 {
				if w.rt.loaded.Load() == 1 && armed.CompareAndSwap(true, false) {
					panic("test: measuring the load crashes")
				}
				return 0
			}
		})
		defer w.stop()
		synctest.Wait()

		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		start := time.Now()
		res, err := w.sys.Infer(ctx, []Request{{API: "test", ModelPath: "o/", Inputs: scalar(t, 1)}})
		if err != nil {
			t.Fatal(err)
		}
		if armed.Load() {
			t.Fatal("the load did not panic")
		}
		if got := res[0].Err; !errors.Is(got, errInternal) || !strings.Contains(got.Error(), "the load of model o/ panicked") || time.Since(start) != 0 {
			t.Fatalf("the waiting request got %v after %v, want the internal error at once", got, time.Since(start))
		}
		synctest.Wait()
		if m := w.model("o/"); !strings.Contains(m.LastError, "loading model o/: internal error: the load of model o/ panicked: test: measuring the load crashes") {
			t.Fatalf("o/ after its load panicked: %+v", m)
		}
		if l, c := w.rt.loaded.Load(), w.rt.closed.Load(); l != 1 || c != 1 {
			t.Fatalf("%d servables loaded, %d closed; want the failed load's closed once", l, c)
		}
		if st := w.sys.Status(); st.Memory == nil || st.Memory.UsedBytes != 0 {
			t.Fatalf("memory after the failed load: %+v, want none used", st.Memory)
		}
		if n := w.sys.loads.running.Load(); n != 0 {
			t.Fatalf("%d loads running after the failed one, want none: a later load would seem to overlap it", n)
		}
		w.wantPanics("load", 1)
		w.wantLogged("level=ERROR", "actor=load", `panic="test: measuring the load crashes"`, "loadFiles")

		time.Sleep(time.Second) // o/'s backoff after one failed load
		if res := w.infer("o/", 4); res.Err != nil || res.Outputs[0].Float32s()[0] != 4 {
			t.Fatalf("o/ after the backoff: %+v", res)
		}
		if st := w.sys.Status(); st.Memory.UsedBytes != size {
			t.Fatalf("memory used with o/ loaded: %d, want %d", st.Memory.UsedBytes, size)
		}
	})
}

// A panic as a load gives the model its signature (the runtime's, with
// the declared one applied), after the runtime loaded it, fails that load
// alone with the internal error, and closes the servable loaded once; the
// next poll loads the model. Before, the panic ended the process, and
// the servable was never closed.
func TestAPanicDeclaringALoadsSignatureFailsThatLoadAndClosesItsServable(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var left atomic.Int64
		left.Store(1)
		w := newWorld(t, configJSON(entry("a/", "", "")), map[string]faultySpec{"a/": version(1)}, func(w *world, o *Options) {
			o.Runtimes = servables.Registry{&metadataCrashes{countingRuntime: w.rt, left: &left}}
		})
		defer w.stop()
		synctest.Wait()
		if left.Load() > 0 {
			t.Fatal("the load did not panic")
		}
		if m := w.model("a/"); m.State != StateFailed || !strings.Contains(m.LastError, "loading model a/: internal error: the load of model a/ panicked: test: the signature crashes") {
			t.Fatalf("a/ after its load panicked: %+v", m)
		}
		if l, c := w.rt.loaded.Load(), w.rt.closed.Load(); l != 1 || c != 1 {
			t.Fatalf("%d servables loaded, %d closed; want the failed load's closed once", l, c)
		}
		w.wantPanics("load", 1)

		w.settle() // the next poll
		if res := w.infer("a/", 3); res.Err != nil {
			t.Fatalf("a/ at the next poll: %v", res.Err)
		}
	})
}

// errorCrash is an error whose As panics once after armed is set: a bug
// met as the error is examined.
type errorCrash struct{ armed *atomic.Bool }

func (errorCrash) Error() string { return "test: the warm-up failed" }

func (e errorCrash) As(any) bool {
	if e.armed.CompareAndSwap(true, false) {
		panic("test: examining the warm-up's error crashes")
	}
	return false
}

// A panic in the code that makes a warm-up's result, after System.warmUp
// returned (here as it examines the warm-up's error), fails that load with
// the internal error, logged with its stack and counted, and releases
// what the load held: the replicas stop, the servable is closed once, no
// memory counts. The next poll loads the model. Before, the panic ended
// the process.
func TestAPanicMakingAWarmUpsResultFailsThatLoadAndReleasesItsContent(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var armed, fail atomic.Bool
		armed.Store(true)
		fail.Store(true)
		size := int64(len(mustSpec(t, version(1))))
		w := newWorld(t, configJSON(entry("a/", "", `"replicas": 2, `+warmUpOf5)), map[string]faultySpec{"a/": version(1)}, unmeasured,
			func(_ *world, o *Options) {
				o.MemoryBudget, o.MemoryFactor = 10*size, 1
				o.ParseWarmUp = func(js, path string) ([][]servables.Tensor, error) {
					if fail.CompareAndSwap(true, false) {
						return nil, errorCrash{armed: &armed}
					}
					return warmUpParser(js, path)
				}
			})
		defer w.stop()
		synctest.Wait()
		if armed.Load() {
			t.Fatal("the warm-up's result did not panic")
		}
		if m := w.model("a/"); m.State != StateFailed || !strings.Contains(m.LastError, "warming up model a/: internal error: the warm-up of model a/ panicked: test: examining the warm-up's error crashes") {
			t.Fatalf("a/ after its warm-up's result panicked: %+v", m)
		}
		if st := w.sys.Status(); st.Memory == nil || st.Memory.UsedBytes != 0 {
			t.Fatalf("memory after the failed load: %+v, want none used", st.Memory)
		}
		if left := w.modelActors(); len(left) != 0 {
			t.Fatalf("model actors after the failed load: %v", left)
		}
		if l, c := w.rt.loaded.Load(), w.rt.closed.Load(); l != 1 || c != 1 {
			t.Fatalf("%d servables loaded, %d closed; want the failed load's closed once", l, c)
		}
		w.wantPanics("warm_up", 1)
		if logged := w.log.String(); !strings.Contains(logged, "warmUpContent") {
			t.Error("the log has no stack of the panic")
		}

		w.settle() // the next poll
		if m := w.model("a/"); m.State != StateReady || m.Replicas != 2 {
			t.Fatalf("a/ at the next poll: %+v", m)
		}
		if st := w.sys.Status(); st.Memory.UsedBytes != size {
			t.Fatalf("memory used with a/ loaded: %d, want %d", st.Memory.UsedBytes, size)
		}
	})
}

// unremovable is a model's cached files that cannot be removed: the
// directory's name ends in "/.", which os.RemoveAll refuses.
func unremovable(t *testing.T, path, sum string, size int64) *bucket.LocalModel {
	return &bucket.LocalModel{Dir: t.TempDir() + "/.", Path: path, Checksum: sum, Size: size}
}

// A panic while the background release of a content's files logs a
// failure (a bug in the log) costs the log only: the panic is logged with
// its stack and counted, the other files it releases (those the disk
// cache evicts for the content it keeps) are still removed, and the
// content's memory no longer counts. Before, the panic ended the
// process, and the files after the first failure stayed on disk.
func TestAPanicWhileReleasingAContentsFilesCostsTheLogOnly(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var armed atomic.Bool
		w := newWorld(t, configJSON(), nil, crashAtLog("removing cached model files", &armed),
			func(_ *world, o *Options) { o.DiskCacheBytes = 10 })
		defer w.stop()
		synctest.Wait()
		sup := newSupervisor(w.sys) // one of its own, driven here
		freed := make(chan int64, 2)
		sup.self = w.sys.as.Root.Spawn(actor.PropsFromFunc(func(c actor.Context) {
			if m, ok := c.Message().(freedContent); ok {
				freed <- m.id
			}
		}))
		bad, evicted := unremovable(t, "x/", "1", 4), &bucket.LocalModel{Dir: t.TempDir(), Path: "y/", Checksum: "2", Size: 4}
		w.sys.disk.put(bad)
		w.sys.disk.put(evicted)

		armed.Store(true) // the evictions of the content kept: bad's failure is logged first
		sup.ended(&stoppingContent{id: 7, local: &bucket.LocalModel{Dir: t.TempDir(), Path: "z/", Checksum: "3", Size: 10}, keep: true})
		synctest.Wait()
		if armed.Load() {
			t.Fatal("the release did not panic")
		}
		if _, err := os.Stat(evicted.Dir); !errors.Is(err, fs.ErrNotExist) {
			t.Errorf("the files the disk cache evicted are still there: %v", err)
		}

		armed.Store(true) // a content's files, not kept
		sup.ended(&stoppingContent{id: 8, local: unremovable(t, "w/", "4", 4)})
		synctest.Wait()
		if armed.Load() {
			t.Fatal("the release did not panic")
		}
		if len(freed) != 2 || <-freed != 7 || <-freed != 8 {
			t.Error("the contents' memory was not freed (freedContent)")
		}
		w.wantPanics("release", 2)
		w.wantLogged("level=ERROR", "actor=release", `panic="test: the supervisor crashes at \"removing cached model files\""`, "removeFiles")
	})
}

// A panic while a request the router forwards to another node waits for
// its answer (here as the forward reads the caller's identity, on the
// forward's goroutine) fails that request alone: its caller gets the
// internal error at once, not at its deadline, the other request of the
// call is answered, and the forward counts as failed; the panic is
// logged with its stack and counted. Before, the panic ended the process.
func TestAPanicForwardingARequestToAnotherNodeFailsThatRequestAtOnce(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		a, b := shadowedCluster(t, nil)
		defer b.stop()
		defer a.stop()
		var armed atomic.Bool
		armed.Store(true)
		ctx, cancel := context.WithTimeout(newIdentityCrash(&armed), time.Minute)
		defer cancel()
		start := time.Now()
		res, err := a.sys.Infer(ctx, []Request{{API: "test", ModelPath: "a/", Inputs: scalar(t, 1)}, {API: "test", ModelPath: "r/", Inputs: scalar(t, 2)}})
		if err != nil {
			t.Fatal(err)
		}
		if armed.Load() {
			t.Fatal("the forward did not panic")
		}
		if res[0].Err != nil {
			t.Errorf("a/, served here: %v", res[0].Err)
		}
		if got := res[1].Err; !errors.Is(got, errInternal) || !strings.Contains(got.Error(), "the forward of a request for model r/ panicked: test: the router crashes") || time.Since(start) != 0 {
			t.Fatalf("r/, forwarded: %v after %v, want the internal error at once", got, time.Since(start))
		}
		synctest.Wait()
		if n := a.metric("grove_cluster_forwarded_total", map[string]string{"model": "r/", "result": "unavailable"}); n != 1 {
			t.Errorf("grove_cluster_forwarded_total{result=unavailable} of r/ = %v, want the forward that panicked", n)
		}
		a.wantPanics("forward", 1)
		a.wantLogged("level=ERROR", "actor=forward", `panic="test: the router crashes"`, "forwardItem")
		if res := a.infer("r/", 3); res.Err != nil {
			t.Fatalf("r/ after the panic: %v", res.Err)
		}
	})
}

// panickyRemote forwards as its Remote does, but panics once after armed
// is set: a bug in the cluster's client, met on the forward's goroutine.
type panickyRemote struct {
	Remote
	armed *atomic.Bool
}

func (p panickyRemote) Forward(ctx context.Context, req forward.Request) (forward.Answer, error) {
	if p.armed.CompareAndSwap(true, false) {
		panic("test: the cluster client crashes")
	}
	return p.Remote.Forward(ctx, req)
}

// A panic while a shadow copy sent to a challenger on another node waits
// for its answer (here in the cluster's client) fails that copy alone: it
// counts as a failed forward and is not compared, its place among the
// copies in flight is given back (the next copy is forwarded and
// compared, not dropped as overloaded), and the panic is logged with its
// stack and counted. Before, the panic ended the process.
func TestAPanicSendingAShadowCopyToAnotherNodeFailsThatCopyAlone(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var armed atomic.Bool
		a, b := shadowedCluster(t, nil, func(_ *world, o *Options) {
			o.QueueSize = 4 // room for 1 copy in flight
			o.Remote = panickyRemote{Remote: o.Remote, armed: &armed}
		})
		defer b.stop()
		defer a.stop()
		armed.Store(true)
		scoreShadowed(t, a)
		if armed.Load() {
			t.Fatal("the shadow copy's forward did not panic")
		}
		if n, _ := remoteShadowEntry(t, a, "r/"); n != 0 {
			t.Fatalf("%d copies of r/ in flight after the panic, want 0", n)
		}
		if n := a.metric("grove_cluster_forwarded_total", map[string]string{"model": "r/", "result": "unavailable"}); n != 1 {
			t.Errorf("grove_cluster_forwarded_total{result=unavailable} of r/ = %v, want the copy that panicked", n)
		}
		if v2 := v2Stats(t, a.sys); v2.Comparison != nil && v2.Comparison.SinceStart.Executions != 0 {
			t.Errorf("v2 comparison %+v after the copy that panicked, want none", v2.Comparison)
		}
		a.wantPanics("forward", 1)
		a.wantLogged("level=ERROR", "actor=forward", `panic="test: the cluster client crashes"`, "sendShadow")

		scoreShadowed(t, a)
		if n := a.metric("grove_shadow_dropped_total", map[string]string{"model": "r/", "reason": "overloaded"}); n != 0 {
			t.Fatalf("grove_shadow_dropped_total{reason=overloaded} of r/ = %v after the panic, want the next copy forwarded", n)
		}
		if n := a.metric("grove_cluster_forwarded_total", map[string]string{"model": "r/", "result": "ok"}); n != 1 {
			t.Fatalf("grove_cluster_forwarded_total{result=ok} of r/ = %v, want the next copy's", n)
		}
		if v2 := v2Stats(t, a.sys); v2.Comparison == nil || v2.Comparison.SinceStart.Executions != 1 {
			t.Fatalf("v2 comparison %+v, want the next copy compared", v2.Comparison)
		}
	})
}

// A servable whose Close panics as the supervisor stops (a bug in a
// runtime's binding) fails that close alone: every other job's servable
// is still closed, the files of every job, content and leftover are
// still removed, and the panic is logged with its stack and counted.
// Before, the panic ended freeAll there: the rest stayed open and on
// disk for good.
func TestAServableWhoseClosePanicsAtStopStillLetsTheRestBeFreed(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		w := newWorld(t, configJSON(), nil)
		defer w.stop()
		synctest.Wait()
		sup := newSupervisor(w.sys) // one of its own, driven here
		var dirs []string
		local := func() *bucket.LocalModel {
			l := &bucket.LocalModel{Dir: t.TempDir()}
			dirs = append(dirs, l.Dir)
			return l
		}
		crash := &failingClose{panics: true}
		sup.jobs[0] = &loadJob{path: "p/", sv: servables.WithSignature(crash, servables.Metadata{}), local: local()}
		var others []*failingClose
		for id := range int64(3) {
			sv := &failingClose{}
			others = append(others, sv)
			sup.jobs[id+1] = &loadJob{path: "j/", sv: servables.WithSignature(sv, servables.Metadata{}), local: local()}
		}
		sup.contents[7] = &content{id: 7, path: "c/", local: local()}
		sup.leftovers = []*bucket.LocalModel{local()}
		func() {
			defer func() { _ = recover() }() // as Receive does
			sup.freeAll()
		}()
		if !crash.closed.Load() {
			t.Fatal("the servable that panics was not closed")
		}
		for i, sv := range others {
			if !sv.closed.Load() {
				t.Errorf("job %d's servable was not closed", i+1)
			}
		}
		for _, d := range dirs {
			if _, err := os.Stat(d); !errors.Is(err, fs.ErrNotExist) {
				t.Errorf("%s is still there: %v", d, err)
			}
		}
		w.wantPanics("close", 1)
		w.wantLogged("level=ERROR", "actor=close", `panic="test: the servable crashes closing"`, "closeServable")
	})
}

// A dropped job whose servable's Close panics (a bug in a runtime's
// binding) still has its files removed and its memory freed
// (freedContent). Before, the panic ended drop before either: the files
// stayed on disk and the planner counted the job's memory for good.
func TestADroppedJobWhoseClosePanicsIsStillFreed(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		w := newWorld(t, configJSON(), nil)
		defer w.stop()
		synctest.Wait()
		sup := newSupervisor(w.sys) // one of its own, driven here
		sv := &failingClose{panics: true}
		local := &bucket.LocalModel{Dir: t.TempDir()}
		ctx := &sendRecorder{}
		func() {
			defer func() { _ = recover() }() // as take does
			sup.drop(ctx, 7, &loadJob{path: "a/", sv: servables.WithSignature(sv, servables.Metadata{}), local: local})
		}()
		if !sv.closed.Load() {
			t.Error("the servable was not closed")
		}
		if _, err := os.Stat(local.Dir); !errors.Is(err, fs.ErrNotExist) {
			t.Errorf("the job's files are still there: %v", err)
		}
		if !ctx.freed(7) {
			t.Errorf("no freedContent sent: %v; the planner would count the job's memory for good", ctx.sent)
		}
		w.wantPanics("close", 1)
	})
}

// metadataCrashes is a runtime whose servables' Metadata panics while
// left is above 0, one panic less each time: a bug met, again and again,
// as a load gives the model its signature.
type metadataCrashes struct {
	*countingRuntime
	left *atomic.Int64
}

func (r *metadataCrashes) Load(ctx context.Context, dir string, files []string, o servables.LoadOptions) (servables.Servable, error) {
	sv, err := r.countingRuntime.Load(ctx, dir, files, o)
	if err != nil {
		return nil, err
	}
	return &metadataCrashesServable{Servable: sv, left: r.left}, nil
}

type metadataCrashesServable struct {
	servables.Servable
	left *atomic.Int64
}

func (s *metadataCrashesServable) Metadata() servables.Metadata {
	if s.left.Add(-1) >= 0 {
		panic("test: the signature crashes")
	}
	s.left.Store(0)
	return s.Servable.Metadata()
}

// A model actor restarted after a crash whose reload panics (here as the
// reload gives the model its signature) fails that reload as a reload
// that returns an error does: the panic is logged with its stack and
// counted, the servable it loaded is closed, the actor answers its
// requests Unavailable with the internal error, and the model is loaded
// afresh (which fails here too, and is retried after its backoff). Once
// the bug is gone, the fresh load serves. Before, the panic crashed the
// actor's start and the supervisor restarted it at once, again and
// again: the reload ran as long as it panicked (here until the test's
// budget of panics ran out).
func TestARestartedModelWhoseReloadPanicsAnswersUnavailableAndIsLoadedAfresh(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const budget = 50 // the panics the bug has in it; a tight restart loop uses them all up
		var left atomic.Int64
		w := newWorld(t, configJSON(entry("a/", "", "")), map[string]faultySpec{"a/": {PanicOn: f64(13)}}, func(w *world, o *Options) {
			o.Runtimes = servables.Registry{&metadataCrashes{countingRuntime: w.rt, left: &left}}
		})
		defer w.stop()
		synctest.Wait()
		if res := w.infer("a/", 1); res.Err != nil {
			t.Fatalf("a/ before the crash: %v", res.Err)
		}

		left.Store(budget)
		if res := w.infer("a/", 13); servables.KindOf(res.Err) != servables.Crashed {
			t.Fatalf("the crashing request got %v", res.Err)
		}
		synctest.Wait()
		// The reload's panic, and the fresh load's: no more until its backoff.
		if n := budget - left.Load(); n != 2 {
			t.Fatalf("the signature panicked %d times after the crash, want 2 (the reload, then the fresh load): the restart looped", n)
		}
		res := w.infer("a/", 1)
		if servables.KindOf(res.Err) != servables.Unavailable ||
			!strings.Contains(res.Err.Error(), "could not be reloaded after a crash: internal error: the reload of model a/ panicked: test: the signature crashes") {
			t.Fatalf("a request after the failed reload got %v, want Unavailable with the reload's panic", res.Err)
		}
		w.wantPanics("reload", 1)
		if n := w.metric("grove_actor_panics_total", map[string]string{"actor": "load"}); n != 1 {
			t.Fatalf("grove_actor_panics_total{actor=load} = %v, want 1 (the fresh load)", n)
		}
		if l, c := w.rt.loaded.Load(), w.rt.closed.Load(); l != 3 || c != 3 {
			t.Fatalf("%d servables loaded, %d closed; want the crashed one and the two that panicked all closed", l, c)
		}
		w.wantLogged("actor=reload", `panic="test: the signature crashes"`, "modelActor).reload", "model reload after crash failed")

		left.Store(0) // the bug is gone
		w.settle()    // the fresh load's backoff
		synctest.Wait()
		if res := w.infer("a/", 1); res.Err != nil {
			t.Fatalf("a/ after the fresh load: %v", res.Err)
		}
		if m := w.model("a/"); m.State != StateReady {
			t.Fatalf("a/ after the fresh load: %+v", m)
		}
	})
}

// panickingSink is a prediction sink whose LogPrediction panics once
// after armed is set, and otherwise records as recordingSink does.
type panickingSink struct {
	recordingSink
	armed atomic.Bool
}

func (s *panickingSink) LogPrediction(req *Request, res *Result, served bool) {
	if s.armed.CompareAndSwap(true, false) {
		panic("test: the prediction sink crashes")
	}
	s.recordingSink.LogPrediction(req, res, served)
}

// A panic while a shadow copy that waited for the champion is compared
// with the caller's answer, or while its prediction log entry is handed
// to the sink, on a low-priority worker or on the goroutine a full queue
// spills its log entry to, costs that comparison or that entry alone: it
// is logged at error level with its stack and counted
// (actor="shadow_compare", also as a comparison shed, and
// actor="shadow_log"); a copy whose comparison panicked is still logged,
// uncompared; and the worker goes on comparing and logging the next
// copies. Before, the panic ended the process.
func TestAPanicComparingOrLoggingAShadowCopyCostsThatCopyAlone(t *testing.T) {
	var logged logBuffer
	log := slog.New(slog.NewTextHandler(&logged, nil))
	m := NewMetrics(prometheus.NewRegistry())
	sink := &panickingSink{recordingSink: recordingSink{done: make(chan struct{}, 1)}}
	windows := newCompareWindows(10)
	c := &content{id: 1, path: "b/"}
	// waiting is a copy of request id, answered 0.5 and 0.7, that finished
	// before the champion, whose answer (on low) it waits for.
	waiting := func(low *lowPriority, id string, w *compareWindows) *championAnswer {
		ans := &championAnswer{requestID: id, release: "v1", low: low}
		sc := &shadowCopy{req: Request{RequestID: id, ModelPath: "b/"}, on: localContent(c), outs: make([][]servables.Tensor, 1), pending: 1,
			sink: sink, metrics: m, logger: log, ans: ans, windows: w, tol: 0.01, start: time.Now()}
		sc.finish(0, column(t, 0.5, 0.7), nil, 0, time.Millisecond)
		return ans
	}
	panics := func(label string) float64 { return testutil.ToFloat64(m.panics.WithLabelValues(label)) }
	// Room for r2's and r3's jobs below, so that r3's never spills to a
	// goroutine of its own (which could log before r2's, and meet the
	// armed sink's panic in its place) while the worker has not taken r2's.
	low := newLowPriority(1, 2, log, nil)
	defer low.stop()

	// A bug in the comparison: a copy that has the caller's answer to
	// compare with but no windows to record it in.
	waiting(low, "r1", nil).answer(column(t, 0.5, 0.2), false, time.Millisecond)
	<-sink.done
	sink.mu.Lock()
	first := sink.logged[0]
	sink.mu.Unlock()
	if first.Comparison != nil {
		t.Fatalf("the copy whose comparison panicked was logged with %+v, want none", first.Comparison)
	}
	if n, shed := panics("shadow_compare"), testutil.ToFloat64(m.compareShed.WithLabelValues("b/")); n != 1 || shed != 1 {
		t.Fatalf("grove_actor_panics_total{actor=shadow_compare} = %v, comparisons shed %v; want 1 each", n, shed)
	}

	// A bug in the sink: the entry is dropped, after the comparison.
	sink.armed.Store(true)
	waiting(low, "r2", windows).answer(column(t, 0.5, 0.2), false, time.Millisecond)
	// The worker goes on: the next copy is compared and logged.
	waiting(low, "r3", windows).answer(column(t, 0.5, 0.2), false, time.Millisecond)
	<-sink.done
	sink.mu.Lock()
	if len(sink.logged) != 2 || sink.logged[1].Comparison == nil || sink.logged[1].Comparison.RequestID != "r3" {
		t.Fatalf("logged %+v, want r1 then r3 compared (r2's entry dropped)", sink.logged)
	}
	sink.mu.Unlock()
	if n := windows.comparison(1, time.Now()).Executions; n != 2 {
		t.Fatalf("%d comparisons recorded, want r2's and r3's", n)
	}
	if n := panics("shadow_log"); n != 1 {
		t.Fatalf("grove_actor_panics_total{actor=shadow_log} = %v, want 1", n)
	}

	// The same on the goroutine a full queue spills the log entry to.
	full := newLowPriority(0, 0, log, nil) // no worker: no queue either
	sink.armed.Store(true)
	waiting(full, "r4", windows).answer(column(t, 0.5, 0.2), false, time.Millisecond)
	full.stop() // waits for the spilled entry
	if n := panics("shadow_log"); n != 2 {
		t.Fatalf("grove_actor_panics_total{actor=shadow_log} = %v after the spilled entry's panic, want 2", n)
	}

	out := logged.String()
	for _, want := range []string{"level=ERROR", "actor=shadow_compare", "actor=shadow_log", `panic="test: the prediction sink crashes"`, "compareAndLog"} {
		if !strings.Contains(out, want) {
			t.Errorf("the log has no %q", want)
		}
	}
}

// isCrash is a model's error whose Is panics when asked whether it is
// ErrModelNotFound: a bug met as the answer to a forwarded request is
// made from the model's result.
type isCrash struct{}

func (isCrash) Error() string { return "test: the model failed" }

func (isCrash) Is(target error) bool {
	if target == ErrModelNotFound {
		panic("test: making the answer crashes")
	}
	return false
}

// answerCrash is a runtime whose servables answer an input of 99 with isCrash.
type answerCrash struct{ *countingRuntime }

func (r answerCrash) Load(ctx context.Context, dir string, files []string, o servables.LoadOptions) (servables.Servable, error) {
	sv, err := r.countingRuntime.Load(ctx, dir, files, o)
	if err != nil {
		return nil, err
	}
	return answerCrashServable{sv}, nil
}

type answerCrashServable struct{ servables.Servable }

func (s answerCrashServable) Predict(ctx context.Context, in []servables.Tensor) ([]servables.Tensor, error) {
	if len(in) > 0 && in[0].Len() > 0 && in[0].Float64At(0) == 99 {
		return nil, isCrash{}
	}
	return s.Servable.Predict(ctx, in)
}

// A panic in the transport's done that PredictAsync calls with the
// answer to a request another node forwarded here, on whichever
// goroutine has the answer (the model actor's, the caller's
// cancellation's, the model's default_timeout_ms timer's), costs that
// answer alone: it is logged at error level with its stack and counted
// (actor="forward_reply"), done is not called again, and no model actor
// is restarted. A panic in Grove's code that makes the answer, before
// done is called, answers the request with the internal error. Before,
// the panic restarted the model actor, or, on the other goroutines,
// ended the process.
func TestAPanicAnsweringARequestAnotherNodeForwardedCostsThatAnswerAlone(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		w := newWorld(t, configJSON(entry("a/", "", ""), entry("slow/", "", `"default_timeout_ms": 100`)),
			map[string]faultySpec{"a/": {Add: 1}, "slow/": {DelayMs: 1000}}, func(w *world, o *Options) {
				o.Runtimes = servables.Registry{answerCrash{w.rt}}
			})
		defer w.stop()
		w.settle()
		loaded := w.rt.loaded.Load()
		req := func(path string, v float32) forward.ForwardedRequest {
			return forward.ForwardedRequest{Request: forward.Request{ModelPath: path, Inputs: scalar(t, v), RequestID: "r",
				Priority: forward.User, API: "fwd"}, Peer: "n2"}
		}
		// call sends r with a done that records its answers and, when
		// crash is set, panics once it has.
		call := func(ctx context.Context, r forward.ForwardedRequest, crash bool) chan error {
			got := make(chan error, 2) // a second answer would be seen below
			w.sys.PredictAsync(ctx, r, func(_ forward.Answer, err error) {
				got <- err
				if crash {
					panic("test: the transport's answer crashes")
				}
			})
			return got
		}
		once := func(got chan error, what string, panics float64) error {
			t.Helper()
			synctest.Wait()
			if len(got) != 1 {
				t.Fatalf("%s: done called %d times, want once", what, len(got))
			}
			if n := w.metric("grove_actor_panics_total", map[string]string{"actor": "forward_reply"}); n != panics {
				t.Fatalf("%s: grove_actor_panics_total{actor=forward_reply} = %v, want %v", what, n, panics)
			}
			return <-got
		}

		// On the model actor's goroutine.
		if err := once(call(context.Background(), req("a/", 2), true), "answered by its model", 1); err != nil {
			t.Fatalf("answered by its model: %v", err)
		}
		// On the goroutine of the caller's cancellation.
		ctx, cancel := context.WithCancel(context.Background())
		got := call(ctx, req("slow/", 1), true)
		synctest.Wait()
		cancel()
		if err := once(got, "canceled", 2); !errors.Is(err, context.Canceled) {
			t.Fatalf("canceled: %v", err)
		}
		// On the model's default_timeout_ms timer's.
		got = call(context.Background(), req("slow/", 2), true)
		time.Sleep(100 * time.Millisecond)
		if err := once(got, "at default_timeout_ms", 3); servables.KindOf(err) != servables.DeadlineExceeded {
			t.Fatalf("at default_timeout_ms: %v", err)
		}
		// Before done: the request gets the internal error.
		if err := once(call(context.Background(), req("a/", 99), false), "its answer's making panicked", 4); !errors.Is(err, errInternal) {
			t.Fatalf("a request whose answer's making panicked got %v, want the internal error", err)
		}

		time.Sleep(2 * time.Second) // slow/ ends its runs: no second answer
		synctest.Wait()
		if n := w.rt.loaded.Load(); n != loaded {
			t.Fatalf("%d servables loaded after the panics, %d before: a model actor was restarted", n, loaded)
		}
		if res := w.infer("a/", 1); res.Err != nil || res.Outputs[0].Float32s()[0] != 2 {
			t.Fatalf("a/ after the panics: %+v", res)
		}
		logged := w.log.String()
		for _, want := range []string{"level=ERROR", "actor=forward_reply", `panic="test: the transport's answer crashes"`,
			`panic="test: making the answer crashes"`, "answerForwarded"} {
			if !strings.Contains(logged, want) {
				t.Errorf("the log has no %q", want)
			}
		}
	})
}

// wantPanics fails the test unless grove_actor_panics_total{actor} is n.
func (w *world) wantPanics(actor string, n float64) {
	w.t.Helper()
	if got := w.metric("grove_actor_panics_total", map[string]string{"actor": actor}); got != n {
		w.t.Fatalf("grove_actor_panics_total{actor=%s} = %v, want %v", actor, got, n)
	}
}

// wantLogged fails the test unless the log holds each of wants.
func (w *world) wantLogged(wants ...string) {
	w.t.Helper()
	logged := w.log.String()
	for _, want := range wants {
		if !strings.Contains(logged, want) {
			w.t.Errorf("the log has no %q:\n%s", want, logged)
		}
	}
}

// badLabel is a request's API that is not valid UTF-8: the metric code
// panics on it (prometheus refuses the label value), a bug met as a
// request's answer is counted.
const badLabel = "\xff"

// A panic in the code of a model's default_timeout_ms timer (here in
// its metric code), which answers a request its model has not answered
// in time, costs that request alone: it gets the internal error at once,
// the panic is logged at error level with its stack and counted
// (actor="default_timeout"), and the request's queue place is given back
// when its run ends. Before, the panic ended the process: the timer's
// goroutine recovers nothing.
func TestAPanicAtAModelsDefaultTimeoutFailsThatRequestAlone(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		w := newWorld(t, configJSON(entry("slow/", "", `"default_timeout_ms": 100`)),
			map[string]faultySpec{"slow/": {DelayMs: 1000}}, func(_ *world, o *Options) { o.QueueSize = 1 })
		defer w.stop()
		w.settle()
		start := time.Now()
		res, err := w.sys.Infer(context.Background(), []Request{{API: badLabel, ModelPath: "slow/", Inputs: scalar(t, 1)}})
		if err != nil || !errors.Is(res[0].Err, errInternal) ||
			!strings.Contains(res[0].Err.Error(), "the default_timeout_ms expiry of a request for model slow/ panicked") {
			t.Fatalf("the request whose timeout panicked: %v %+v, want the internal error", err, res)
		}
		if took := time.Since(start); took != 100*time.Millisecond {
			t.Fatalf("the request whose timeout panicked was answered after %v, want at its default_timeout_ms (100ms)", took)
		}
		w.wantPanics("default_timeout", 1)
		w.wantLogged("level=ERROR", "actor=default_timeout", `not valid UTF-8`, "sendPredict")

		time.Sleep(time.Second) // its run ends: its place in the queue of 1 is given back
		synctest.Wait()
		start = time.Now()
		if res := w.infer("slow/", 2); servables.KindOf(res.Err) != servables.DeadlineExceeded || time.Since(start) != 100*time.Millisecond {
			t.Fatalf("the next request got %v after %v, want its default_timeout_ms", res.Err, time.Since(start))
		}
		w.wantPanics("default_timeout", 1)
	})
}

// A panic in the code that answers a request parked for its on-demand
// model's load at its deadline (here the model's default_timeout_ms; in
// the metric code), on the deadline's timer, costs that request alone: it
// gets the internal error at once, the panic is logged at error level
// with its stack and counted (actor="load_wait"), and when the load ends
// the request is not run: the model serves the next one. Before, the
// panic ended the process: the timer's goroutine recovers nothing.
func TestAPanicExpiringARequestWaitingForAnOnDemandLoadFailsThatRequestAlone(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		w := newWorld(t, configJSON(entry("a/", "", onDemandLoad+`, "default_timeout_ms": 300`)), map[string]faultySpec{"a/": version(1)})
		defer w.stop()
		synctest.Wait()
		w.rt.gate = make(chan struct{})
		start := time.Now()
		res, err := w.sys.Infer(context.Background(), []Request{{API: badLabel, ModelPath: "a/", Inputs: scalar(t, 1)}})
		if err != nil || !errors.Is(res[0].Err, errInternal) ||
			!strings.Contains(res[0].Err.Error(), "the expiry of a request waiting for the load of model a/ panicked") {
			t.Fatalf("the request whose expiry panicked: %v %+v, want the internal error", err, res)
		}
		if took := time.Since(start); took != 300*time.Millisecond {
			t.Fatalf("the request whose expiry panicked was answered after %v, want at its default_timeout_ms (300ms)", took)
		}
		w.wantPanics("load_wait", 1)
		w.wantLogged("level=ERROR", "actor=load_wait", `not valid UTF-8`, "expireParked")

		close(w.rt.gate)
		synctest.Wait()
		if res := w.infer("a/", 2); res.Err != nil || res.Outputs[0].Float32s()[0] != 2 {
			t.Fatalf("a/ after its load: %+v", res)
		}
		if n := w.rt.calls.Load(); n != 1 {
			t.Fatalf("a/ ran %d requests, want 1: the expired one was run", n)
		}
		w.wantPanics("load_wait", 1)
	})
}
