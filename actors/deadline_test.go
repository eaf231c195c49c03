package actors

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"testing"
	"testing/synctest"
	"time"

	"github.com/groveml/grove/servables"
)

// Deadlines and cancellation, end to end through a System (deadline.go).

// busy sends a request to path that holds its model for the model's delay.
func (w *world) busy(path string) chan Result {
	out := make(chan Result, 1)
	go func() { out <- w.infer(path, 1) }()
	synctest.Wait()
	return out
}

func (w *world) inferCtx(ctx context.Context, path string, v float32) ([]Result, error) {
	return w.sys.Infer(ctx, []Request{{API: "test", ModelPath: path, Inputs: scalar(w.t, v)}})
}

func (w *world) expired(path, reason string) float64 {
	return w.metric("grove_requests_expired_total", map[string]string{"model": path, "reason": reason})
}

func TestAQueuedRequestWhoseDeadlinePassesIsAnsweredThenAndNeverRun(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		w := newWorld(t, configJSON(entry("a/", "", "")), map[string]faultySpec{"a/": {DelayMs: 100}})
		defer w.stop()
		synctest.Wait()
		first := w.busy("a/")
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
		defer cancel()
		start := time.Now()
		res, err := w.inferCtx(ctx, "a/", 1)
		if err != nil || servables.KindOf(res[0].Err) != servables.DeadlineExceeded {
			t.Fatalf("got %v %+v, want a DeadlineExceeded result", err, res)
		}
		if took := time.Since(start); took != 20*time.Millisecond {
			t.Fatalf("answered after %v, want at its deadline (20ms)", took)
		}
		<-first
		synctest.Wait()
		if n := w.rt.calls.Load(); n != 1 {
			t.Fatalf("%d forward calls, want 1: the expired request ran", n)
		}
		if n := w.expired("a/", "deadline"); n != 1 {
			t.Fatalf("expired{deadline} = %v", n)
		}
	})
}

func TestARequestWhoseCallerLeftIsNeverRun(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		w := newWorld(t, configJSON(entry("a/", "", "")), map[string]faultySpec{"a/": {DelayMs: 100}})
		defer w.stop()
		synctest.Wait()
		first := w.busy("a/")
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan error, 1)
		go func() { _, err := w.inferCtx(ctx, "a/", 1); done <- err }()
		synctest.Wait()
		cancel()
		if err := <-done; !errors.Is(err, context.Canceled) {
			t.Fatalf("Infer returned %v, want context.Canceled", err)
		}
		<-first
		synctest.Wait()
		if n := w.rt.calls.Load(); n != 1 || w.expired("a/", "canceled") != 1 {
			t.Fatalf("%d forward calls, expired{canceled} = %v", n, w.expired("a/", "canceled"))
		}
	})
}

func TestARequestThatWouldMissItsDeadlineAtTheModelsPaceIsNotStarted(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		w := newWorld(t, configJSON(entry("a/", "", "")), map[string]faultySpec{"a/": {DelayMs: 100}})
		defer w.stop()
		synctest.Wait()
		<-w.busy("a/") // the model's pace: 100 ms a call
		first := w.busy("a/")
		ctx, cancel := context.WithTimeout(context.Background(), 150*time.Millisecond)
		defer cancel()
		late := make(chan Result, 1)
		go func() { res, _ := w.inferCtx(ctx, "a/", 1); late <- res[0] }() // taken at 100 ms with 50 ms left
		synctest.Wait()
		after := w.busy("a/") // waits beside it: the model is not idle then
		<-first
		<-after
		if res := <-late; servables.KindOf(res.Err) != servables.DeadlineExceeded || w.rt.calls.Load() != 3 || w.expired("a/", "deadline") != 1 {
			t.Fatalf("result %v, %d calls, expired %v", res.Err, w.rt.calls.Load(), w.expired("a/", "deadline"))
		}
	})
}

func TestAModelThatLooksTooSlowStillRunsARequestWhenIdle(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		w := newWorld(t, configJSON(entry("a/", "", "")), map[string]faultySpec{"a/": {DelayMs: 5}})
		defer w.stop()
		synctest.Wait()
		c := (*w.sys.routes.Load())["a/"]
		c.serviceNs.Store(int64(time.Hour)) // as after one very slow call
		for range 3 {
			ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
			res, _ := w.inferCtx(ctx, "a/", 1)
			cancel()
			if res[0].Err != nil {
				t.Fatalf("an idle model refused a request it can serve in time: %v", res[0].Err)
			}
		}
		if est := time.Duration(c.serviceNs.Load()); est > 10*time.Minute {
			t.Fatalf("the estimate did not come down: %v", est)
		}
	})
}

func TestTheModelsDefaultTimeoutBoundsRequestsThatBringNone(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		w := newWorld(t, configJSON(entry("a/", "", `"default_timeout_ms": 30`)), map[string]faultySpec{"a/": {DelayMs: 100}})
		defer w.stop()
		synctest.Wait()
		first := w.busy("a/")
		start := time.Now()
		res := w.infer("a/", 1)
		if servables.KindOf(res.Err) != servables.DeadlineExceeded || time.Since(start) != 30*time.Millisecond {
			t.Fatalf("got %v after %v, want DeadlineExceeded after 30ms", res.Err, time.Since(start))
		}
		if r := <-first; servables.KindOf(r.Err) != servables.DeadlineExceeded {
			t.Fatalf("the running request (100 ms, over its 30 ms default) got %v", r.Err)
		}
		time.Sleep(100 * time.Millisecond) // the running forward call ends; the queued request is reached
		synctest.Wait()
		if w.expired("a/", "deadline") != 1 || w.rt.calls.Load() != 1 {
			t.Fatalf("expired %v, calls %d", w.expired("a/", "deadline"), w.rt.calls.Load())
		}
	})
}

// TestARequestThatRunsPastItsDeadlineCountsAsLateNotExpired: a request
// that started in time and whose deadline passes during its forward call
// is answered at its deadline; when the call ends, it counts in
// grove_requests_late_total (it ran, for nobody), not as expired.
func TestARequestThatRunsPastItsDeadlineCountsAsLateNotExpired(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		w := newWorld(t, configJSON(entry("a/", "", "")), map[string]faultySpec{"a/": {DelayMs: 100}})
		defer w.stop()
		synctest.Wait()
		late := func() float64 { return w.metric("grove_requests_late_total", map[string]string{"model": "a/"}) }
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Millisecond)
		defer cancel()
		start := time.Now()
		res, err := w.inferCtx(ctx, "a/", 1)
		if err != nil || servables.KindOf(res[0].Err) != servables.DeadlineExceeded || time.Since(start) != 30*time.Millisecond {
			t.Fatalf("got %v %+v after %v, want a DeadlineExceeded result at 30ms", err, res, time.Since(start))
		}
		synctest.Wait()
		if n := late(); n != 0 {
			t.Fatalf("late = %v while the forward call still runs, want 0", n)
		}
		time.Sleep(70 * time.Millisecond) // the forward call ends
		synctest.Wait()
		if n, e := late(), w.expired("a/", "deadline"); n != 1 || e != 0 || w.rt.calls.Load() != 1 {
			t.Fatalf("late %v, expired{deadline} %v, %d forward calls; want 1, 0, 1", n, e, w.rt.calls.Load())
		}
		// A request on time counts nowhere.
		if r := w.infer("a/", 1); r.Err != nil {
			t.Fatal(r.Err)
		}
		if n := late(); n != 1 {
			t.Fatalf("late = %v after a request on time, want 1", n)
		}
	})
}

func TestACallersEarlierDeadlineWinsOverTheModelsDefault(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		w := newWorld(t, configJSON(entry("a/", "", `"default_timeout_ms": 1000`)), map[string]faultySpec{"a/": {DelayMs: 100}})
		defer w.stop()
		synctest.Wait()
		first := w.busy("a/")
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Millisecond)
		defer cancel()
		start := time.Now()
		if r, _ := w.inferCtx(ctx, "a/", 1); servables.KindOf(r[0].Err) != servables.DeadlineExceeded || time.Since(start) != 5*time.Millisecond {
			t.Fatalf("caller's 5ms deadline: %v after %v", r[0].Err, time.Since(start))
		}
		if r := <-first; r.Err != nil {
			t.Fatalf("a request within the 1 s default failed: %v", r.Err)
		}
	})
}

func TestWorkThatWaitedLongerThanTheQueueTimeoutIsNotStarted(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		w := newWorld(t, configJSON(entry("a/", "", `"queue_timeout_ms": 10`)), map[string]faultySpec{"a/": {DelayMs: 50}})
		defer w.stop()
		synctest.Wait()
		first := w.busy("a/")
		res := w.infer("a/", 1) // waits 50 ms > 10 ms
		if servables.KindOf(res.Err) != servables.DeadlineExceeded || w.expired("a/", "queue_timeout") != 1 {
			t.Fatalf("got %v, expired{queue_timeout} = %v", res.Err, w.expired("a/", "queue_timeout"))
		}
		if r := <-first; r.Err != nil {
			t.Fatalf("the request that did not wait failed: %v", r.Err)
		}
	})
}

func TestChangedTimeoutsApplyWithoutReloadingTheModel(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		w := newWorld(t, configJSON(entry("a/", "", "")), map[string]faultySpec{"a/": {DelayMs: 100}})
		defer w.stop()
		synctest.Wait()
		w.setConfig(configJSON(entry("a/", "", `"default_timeout_ms": 30`)))
		if n := w.rt.loaded.Load(); n != 1 {
			t.Fatalf("a timeout change reloaded the model (%d loads)", n)
		}
		first := w.busy("a/")
		if res := w.infer("a/", 1); servables.KindOf(res.Err) != servables.DeadlineExceeded {
			t.Fatalf("the new default timeout is not in force: %v", res.Err)
		}
		<-first
	})
}

func TestAnItemPastItsDeadlineFailsAloneInItsBatch(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		w := newWorld(t, configJSON(entry("slow/", "", ""), entry("fast/", "", "")),
			map[string]faultySpec{"slow/": {DelayMs: 100}, "fast/": version(1)})
		defer w.stop()
		synctest.Wait()
		ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
		defer cancel()
		res, err := w.sys.Infer(ctx, []Request{{ModelPath: "slow/", Inputs: scalar(t, 1)}, {ModelPath: "fast/", Inputs: scalar(t, 2)}})
		if err != nil {
			t.Fatal(err)
		}
		if servables.KindOf(res[0].Err) != servables.DeadlineExceeded || res[1].Err != nil || res[1].Outputs[0].Float32s()[0] != 2 {
			t.Fatalf("results %+v", res)
		}
		synctest.Wait()
	})
}

func TestRequestsThatExpireWhileWaitingForABatchAreLeftOut(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		w := newWorld(t, configJSON(entry("a/", "", `"max_batch_rows": 8, "max_queue_delay_us": 50000`)), map[string]faultySpec{"a/": version(1)})
		defer w.stop()
		synctest.Wait()
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
		defer cancel()
		patient := make(chan Result, 1)
		go func() { patient <- w.infer("a/", 1) }()
		res, _ := w.inferCtx(ctx, "a/", 1)
		if servables.KindOf(res[0].Err) != servables.DeadlineExceeded {
			t.Fatalf("impatient request: %v", res[0].Err)
		}
		if r := <-patient; r.Err != nil {
			t.Fatalf("patient request: %v", r.Err)
		}
		synctest.Wait()
		if w.rt.calls.Load() != 1 || w.expired("a/", "deadline") != 1 {
			t.Fatalf("%d calls, expired %v: the expired request was batched", w.rt.calls.Load(), w.expired("a/", "deadline"))
		}
	})
}

func TestShadowCopiesThatWaitPastTheShadowTimeoutAreDropped(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		cfg := `{"model_metadata": [{"model_path": "a/"}, {"model_path": "b/"}],
 "contracts": [{"organization": "o", "project": "p", "contract_number": 1,
   "servables": [{"release_version": "v1", "model_path": "a/"},
                 {"release_version": "v2", "model_path": "b/", "validity": [{"never_valid": {}}], "shadow": {}}]}]}`
		w := newWorld(t, cfg, map[string]faultySpec{"a/": version(1), "b/": {DelayMs: 200}},
			func(_ *world, o *Options) { o.ShadowTimeout = 50 * time.Millisecond })
		defer w.stop()
		synctest.Wait()
		for range 2 {
			if res, _, err := w.sys.Score(context.Background(), "o/p/1", "", Request{Inputs: scalar(t, 1)}); err != nil || res.Err != nil {
				t.Fatal(err, res.Err)
			}
		}
		time.Sleep(time.Second)
		synctest.Wait()
		// The first copy runs for 200 ms on the shadow worker; the second
		// waits for it, past its 50 ms.
		if n := w.expired("b/", "deadline"); n != 1 {
			t.Fatalf("expired shadow copies = %v, want 1", n)
		}
	})
}

// doneCtx is a context that is already done with err, with a deadline.
type doneCtx struct {
	context.Context
	err      error
	deadline time.Time
}

func (c doneCtx) Err() error                       { return c.err }
func (c doneCtx) Deadline() (time.Time, bool)      { return c.deadline, !c.deadline.IsZero() }
func (c doneCtx) Done() <-chan struct{}            { ch := make(chan struct{}); close(ch); return ch }
func (c doneCtx) Value(any) any                    { return nil }
func (c doneCtx) String() string                   { return "doneCtx" }
func (c doneCtx) withDeadline(t time.Time) doneCtx { c.deadline = t; return c }

func TestACancellationAtItsDeadlineCountsAsTheDeadline(t *testing.T) {
	now := time.Now()
	canceled := doneCtx{err: context.Canceled}
	for _, tc := range []struct {
		name string
		ctx  context.Context
		want bool
	}{
		{"deadline exceeded", doneCtx{err: context.DeadlineExceeded}, true},
		{"canceled without a deadline", canceled, false},
		{"canceled before its deadline", canceled.withDeadline(now.Add(time.Second)), false},
		{"canceled at its deadline (a gRPC client's deadline)", canceled.withDeadline(now), true},
		{"canceled after its deadline", canceled.withDeadline(now.Add(-time.Millisecond)), true},
	} {
		if got := pastDeadline(tc.ctx, now); got != tc.want {
			t.Errorf("%s: pastDeadline = %v, want %v", tc.name, got, tc.want)
		}
	}
}

func TestUnderBacklogTheNewestRequestWithADeadlineRunsFirst(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		w := newWorld(t, configJSON(entry("a/", "", "")), map[string]faultySpec{"a/": {DelayMs: 20}})
		defer w.stop()
		synctest.Wait()
		first := make(chan Result, 1)
		go func() { first <- w.infer("a/", 0) }() // no deadline: holds the model 0..20 ms
		synctest.Wait()
		results := make([]chan Result, 5)
		for i := 1; i <= 4; i++ { // deadlines 100 ms away, a quarter is 25 ms
			results[i] = make(chan Result, 1)
			go func() {
				ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
				defer cancel()
				res, _ := w.inferCtx(ctx, "a/", float32(i))
				results[i] <- res[0]
			}()
			synctest.Wait()
		}
		<-first
		for i := 1; i <= 4; i++ {
			<-results[i]
		}
		// At 20 ms the oldest has waited less than 25 ms: arrival order, 1.
		// At 40 and 60 ms the queue is backed up: newest first, 4 then 3.
		// At 80 ms request 2 is alone: it runs (its caller is answered at
		// its deadline, 100 ms, either way).
		if got, want := w.rt.order(), []float64{0, 1, 4, 3, 2}; !slices.Equal(got, want) {
			t.Fatalf("ran %v, want %v", got, want)
		}
	})
}

func TestRequestsWithoutADeadlineKeepArrivalOrderUnderBacklog(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		w := newWorld(t, configJSON(entry("a/", "", "")), map[string]faultySpec{"a/": {DelayMs: 20}})
		defer w.stop()
		synctest.Wait()
		var done []chan Result
		for i := range 5 {
			ch := make(chan Result, 1)
			done = append(done, ch)
			go func() { ch <- w.infer("a/", float32(i)) }()
			synctest.Wait()
		}
		for _, ch := range done {
			<-ch
		}
		if got, want := w.rt.order(), []float64{0, 1, 2, 3, 4}; !slices.Equal(got, want) {
			t.Fatalf("ran %v, want arrival order %v", got, want)
		}
	})
}

func TestTheServiceEstimateShrugsOffAStallAndFollowsASlowerModel(t *testing.T) {
	var c content
	ms := time.Millisecond
	for range 10 {
		c.observeService(5 * ms)
	}
	c.observeService(400 * ms) // one stall
	if est := time.Duration(c.serviceNs.Load()); est > 6*ms {
		t.Fatalf("one 400 ms stall moved a 5 ms estimate to %v", est)
	}
	for range 30 {
		c.observeService(20 * ms) // the model really got slower
	}
	if est := time.Duration(c.serviceNs.Load()); est < 19*ms {
		t.Fatalf("30 calls of 20 ms left the estimate at %v", est)
	}
	c.observeService(5 * ms)
	if est := time.Duration(c.serviceNs.Load()); est > 13*ms {
		t.Fatalf("a fast call moved a 20 ms estimate only to %v", est)
	}
}

func TestUnderBacklogARequestWithoutADeadlineStillGetsATurn(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		w := newWorld(t, configJSON(entry("a/", "", "")), map[string]faultySpec{"a/": {DelayMs: 20}})
		defer w.stop()
		synctest.Wait()
		var waits []chan Result
		send := func(v float32, deadline time.Duration) {
			ch := make(chan Result, 1)
			waits = append(waits, ch)
			go func() {
				ctx, cancel := context.Background(), func() {}
				if deadline > 0 {
					ctx, cancel = context.WithTimeout(ctx, deadline)
				}
				defer cancel()
				res, _ := w.inferCtx(ctx, "a/", v)
				ch <- res[0]
			}()
			synctest.Wait()
		}
		send(0, 0) // runs 0..20 ms
		for v := float32(1); v <= 4; v++ {
			send(v, 100*time.Millisecond)
		}
		time.Sleep(30 * time.Millisecond)
		send(9, 0) // no deadline, arrives under backlog
		for _, ch := range waits {
			<-ch
		}
		// 20 ms: no backlog yet, 1. 40 ms: backlog, the newest with a
		// deadline, 4. 60 ms: the one without a deadline gets its turn, 9
		// (newest first alone would run 3 here and 9 last). 80 ms: 2, at
		// the front, would not answer in time beside 3 and is dropped; 3,
		// then alone, runs.
		if got, want := w.rt.order(), []float64{0, 1, 4, 9, 3}; !slices.Equal(got, want) {
			t.Fatalf("ran %v, want %v", got, want)
		}
	})
}

func TestACrashWhileAFailedBatchRunsAloneLosesNoOtherRequest(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		spec := faultySpec{ErrorOn: f64(7), PanicOn: f64(13), DelayMs: 10}
		w := newWorld(t, configJSON(entry("a/", "", `"max_batch_rows": 8`)), map[string]faultySpec{"a/": spec})
		defer w.stop()
		synctest.Wait()
		first := w.busy("a/") // the model is busy; the next three wait and batch
		var waits []chan Result
		for _, v := range []float32{7, 13, 2} {
			ch := make(chan Result, 1)
			waits = append(waits, ch)
			go func() { // a lost request shows as DeadlineExceeded after a second
				ctx, cancel := context.WithTimeout(context.Background(), time.Second)
				defer cancel()
				res, _ := w.inferCtx(ctx, "a/", v)
				ch <- res[0]
			}()
			synctest.Wait()
		}
		<-first
		// The batch fails on 7; each runs alone: 7 fails, 13 panics, and 2
		// must still be answered, by the restarted actor.
		errs := []servables.Kind{}
		for _, ch := range waits {
			errs = append(errs, servables.KindOf((<-ch).Err))
		}
		if want := []servables.Kind{servables.Execution, servables.Crashed, servables.OK}; !slices.Equal(errs, want) {
			t.Fatalf("kinds %v, want %v", errs, want)
		}
		synctest.Wait()
		if c := (*w.sys.routes.Load())["a/"]; c.queued.Load() != 0 || c.inflight.Load() != 0 {
			t.Fatalf("queue accounting drifted: queued %d, inflight %d", c.queued.Load(), c.inflight.Load())
		}
	})
}

// A dynamic batch's context (joinContexts) is done once every member's
// caller has gone, or the forward call has returned, and not before;
// whether the runtime only asks Err or waits on Done.
func TestABatchsContextIsDoneOnceEveryCallerHasGone(t *testing.T) {
	for _, watch := range []bool{false, true} {
		t.Run(fmt.Sprintf("done asked first %v", watch), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				c1, cancel1 := context.WithCancel(context.Background())
				c2, cancel2 := context.WithCancel(context.Background())
				defer cancel1()
				defer cancel2()
				ctx := joinContexts([]*predict{{ctx: c1}, {ctx: c2}})
				var done <-chan struct{}
				if watch {
					done = ctx.Done()
				}
				isDone := func() bool {
					synctest.Wait()
					if done == nil {
						return ctx.Err() != nil
					}
					select {
					case <-done:
						if ctx.Err() != context.Canceled {
							t.Fatalf("done closed but Err is %v", ctx.Err())
						}
						return true
					default:
						if ctx.Err() != nil {
							t.Fatalf("done open but Err is %v", ctx.Err())
						}
						return false
					}
				}
				if isDone() {
					t.Fatal("done while both callers wait")
				}
				cancel1()
				if isDone() {
					t.Fatal("done while one caller waits")
				}
				cancel2()
				if !isDone() {
					t.Fatal("not done once both callers have gone")
				}
				ctx.(*joinedContext).release()
				if !isDone() || ctx.Err() != context.Canceled {
					t.Fatalf("after release: %v", ctx.Err())
				}
			})
		})
	}
	t.Run("released", func(t *testing.T) {
		c1, cancel1 := context.WithCancel(context.Background())
		defer cancel1()
		ctx := joinContexts([]*predict{{ctx: c1}, {ctx: c1}})
		ctx.(*joinedContext).release()
		select {
		case <-ctx.Done():
		default:
			t.Fatal("Done open after the forward call returned")
		}
		if ctx.Err() != context.Canceled {
			t.Fatalf("Err %v after the forward call returned", ctx.Err())
		}
	})
	t.Run("a member that cannot be cancelled", func(t *testing.T) {
		c1, cancel1 := context.WithCancel(context.Background())
		cancel1()
		ctx := joinContexts([]*predict{{ctx: c1}, {ctx: context.Background()}})
		if ctx.Err() != nil || ctx.Done() != nil {
			t.Fatalf("a batch with a member that is always wanted is done: %v", ctx.Err())
		}
	})
}

// BenchmarkJoinContexts is what a dynamic batch of four requests, each
// with a cancellable caller context (an HTTP request's), costs for its
// joined context when the runtime asks it for Err only, as Grove's do.
func BenchmarkJoinContexts(b *testing.B) {
	batch := make([]*predict, 4)
	for i := range batch {
		ctx, cancel := context.WithCancel(context.Background())
		b.Cleanup(cancel)
		batch[i] = &predict{ctx: ctx}
	}
	b.ReportAllocs()
	for b.Loop() {
		ctx := joinContexts(batch)
		if ctx.Err() != nil {
			b.Fatal(ctx.Err())
		}
		if j, ok := ctx.(*joinedContext); ok {
			j.release()
		}
	}
}
