package actors

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/groveml/grove/conf/modelconfig"
	"github.com/groveml/grove/servables"
)

// A model without warm_up_batch_request_json gets Options.WarmUp's
// warm-up: each set run Runs times on every replica before it serves.
func TestSystemWarmUpHookRunsOnEveryReplica(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var asked atomic.Value
		hook := func(meta modelconfig.Model, sig servables.Metadata) (WarmUp, error) {
			asked.Store(meta.Path)
			if len(sig.Inputs) != 1 || sig.Inputs[0].Name != "x" {
				return WarmUp{}, errors.New("the hook did not get the loaded signature")
			}
			return WarmUp{Sets: [][]servables.Tensor{scalar(t, 2), scalar(t, 3)}, Runs: 5, PerReplica: true}, nil
		}
		w := newWorld(t, configJSON(entry("a/", "", `"replicas": 3`)), map[string]faultySpec{"a/": version(1)},
			func(_ *world, o *Options) { o.WarmUp = hook })
		defer w.stop()
		synctest.Wait()
		if m := w.model("a/"); m.State != StateReady {
			t.Fatalf("status: %+v", m)
		}
		if got := asked.Load(); got != "a/" {
			t.Fatalf("hook asked for %v, want a/", got)
		}
		if n := w.rt.calls.Load(); n != 2*5*3 {
			t.Fatalf("warm-up forward calls = %d, want 30 (2 sets x 5 runs x 3 replicas)", n)
		}
		if got := w.infer("a/", 1).Outputs[0].Float32s()[0]; got != 1 {
			t.Fatalf("after warm-up the model answers %v, want 1", got)
		}
	})
}

// A warm-up from the hook that fails, or a hook that fails, rejects the
// content; the configured warm_up_batch_request_json wins over the hook.
func TestSystemWarmUpHookFailures(t *testing.T) {
	for _, tc := range []struct {
		name, extra string
		hook        func(modelconfig.Model, servables.Metadata) (WarmUp, error)
		wantErr     string
		wantCalls   int64
	}{
		{name: "request fails", hook: func(modelconfig.Model, servables.Metadata) (WarmUp, error) {
			return WarmUp{Sets: [][]servables.Tensor{{}}, Runs: 5, PerReplica: true}, nil
		}, wantErr: "warm-up request 0 (run 1, replica 1)"},
		{name: "hook fails", hook: func(modelconfig.Model, servables.Metadata) (WarmUp, error) {
			return WarmUp{}, errors.New("no warm-up file here")
		}, wantErr: "no warm-up file here"},
		{name: "config wins", extra: `"warm_up_batch_request_json": "[[4]]"`, hook: func(modelconfig.Model, servables.Metadata) (WarmUp, error) {
			return WarmUp{}, errors.New("the hook must not run")
		}, wantCalls: 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				w := newWorld(t, configJSON(entry("a/", "", tc.extra)), map[string]faultySpec{"a/": {ErrorOn: f64(7)}},
					func(_ *world, o *Options) { o.WarmUp = tc.hook })
				defer w.stop()
				synctest.Wait()
				m := w.model("a/")
				if tc.wantErr == "" {
					if m.State != StateReady || w.rt.calls.Load() != tc.wantCalls {
						t.Fatalf("status %+v after %d calls, want ready after %d", m, w.rt.calls.Load(), tc.wantCalls)
					}
					return
				}
				if m.State != StateFailed || !strings.Contains(m.LastError, tc.wantErr) {
					t.Fatalf("status: %+v, want failed with %q", m, tc.wantErr)
				}
			})
		})
	}
}

// Request.Replica picks a replica modulo their number; 0 the least busy.
func TestContentSendPicksTheAskedReplica(t *testing.T) {
	pids := []*actor.PID{actor.NewPID("x", "r0"), actor.NewPID("x", "r1"), actor.NewPID("x", "r2")}
	c := &content{pids: pids, busy: make([]atomic.Int64, 3)}
	c.busy[0].Store(4)
	c.busy[1].Store(1)
	c.busy[2].Store(2)
	for _, tc := range []struct{ replica, want int }{{0, 1}, {1, 0}, {3, 2}, {5, 1}, {7, 0}} {
		var got *actor.PID
		c.send(func(p *actor.PID, _ any) { got = p }, &predict{replica: tc.replica, done: func(_ []servables.Tensor, _ error, _, _ time.Duration) {}}, false)
		if got != pids[tc.want] {
			t.Errorf("replica %d went to %v, want %v", tc.replica, got, pids[tc.want])
		}
	}
}

// stallWarmUp bounds warm-ups to timeout and makes the nth forward call
// whose input is 5 (the warm-up of warmUpOf5) block until release is
// called. release, which may be called more than once, then waits for
// what follows the call's return (its content's actors stopping), so
// that Stop does not race them.
func stallWarmUp(n int64, timeout time.Duration) (tweak func(*world, *Options), release func()) {
	unblock := make(chan struct{})
	var fives atomic.Int64
	tweak = func(w *world, o *Options) {
		o.WarmUpTimeout = timeout
		w.rt.onPredict = func(in []servables.Tensor) {
			if len(in) > 0 && in[0].Len() > 0 && in[0].Float64At(0) == 5 && fives.Add(1) == n {
				<-unblock
			}
		}
	}
	unblockOnce := sync.OnceFunc(func() { close(unblock) })
	return tweak, func() {
		unblockOnce()
		synctest.Wait()
	}
}

const warmUpOf5 = `"warm_up_batch_request_json": "[[5]]"`

// A warm-up whose forward call hangs fails the load at warmup_timeout,
// naming the model and the bound; the servable is closed only once the
// call returns, after which the next poll loads the model again.
func TestAWarmUpPastWarmUpTimeoutFailsTheLoadAndTheNextPollAfterTheCallReturnsRetriesIt(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		tweak, release := stallWarmUp(1, 2500*time.Millisecond) // ends between two polls
		w := newWorld(t, configJSON(entry("a/", "", warmUpOf5)), map[string]faultySpec{"a/": version(1)}, tweak)
		defer w.stop()
		defer release()
		synctest.Wait()
		if m := w.model("a/"); m.State != StateLoading {
			t.Fatalf("while its warm-up hangs: %+v", m)
		}
		time.Sleep(2500 * time.Millisecond)
		synctest.Wait()
		m := w.model("a/")
		if want := `warming up model a/: warm-up request 0 (run 1, replica 1): warm-up of "a/" did not finish within 2.5s`; m.State != StateFailed || m.LastError != want || m.StuckWarmUps != 1 {
			t.Fatalf("status at warmup_timeout: %+v, want failed with %q and one stuck warm-up", m, want)
		}
		if n := w.metric("grove_model_loads_total", map[string]string{"model": "a/", "result": "failed", "reason": "eager"}); n != 1 {
			t.Fatalf("failed loads = %v, want 1", n)
		}
		if n := w.rt.closed.Load(); n != 0 {
			t.Fatalf("%d servables closed while the warm-up's forward call still runs on one", n)
		}
		release()
		if l, c := w.rt.loaded.Load(), w.rt.closed.Load(); l != 1 || c != 1 {
			t.Fatalf("once the hung call returned: %d servables loaded, %d closed; want the hung one closed", l, c)
		}
		if m := w.model("a/"); m.State != StateFailed || m.StuckWarmUps != 0 {
			t.Fatalf("once the hung call returned, before the next poll: %+v", m)
		}
		time.Sleep(poll / 2) // the next poll
		synctest.Wait()
		if m := w.model("a/"); m.State != StateReady || m.LastError != "" {
			t.Fatalf("after the next poll: %+v", m)
		}
		if res := w.infer("a/", 3); res.Err != nil || res.Outputs[0].Float32s()[0] != 3 {
			t.Fatalf("after the retry: %+v", res)
		}
	})
}

// A caller waiting for an on-demand model whose warm-up hangs gets the
// warm-up's error at warmup_timeout, not a hang. While that call is stuck,
// later callers get the same error at once, past any backoff, and no load
// of the same content starts; once it returns, the next request loads it.
func TestAnOnDemandLoadWhoseWarmUpHangsAnswersItsCallerAtWarmUpTimeoutAndIsRetriedOnceTheCallReturns(t *testing.T) {
	for _, withSum := range []bool{true, false} {
		t.Run(fmt.Sprintf("checksum in config %v", withSum), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				tweak, release, hung := hangWarmUps(2500 * time.Millisecond)
				sum := ""
				if withSum {
					sum = checksumOf(t, "a/", version(1))
				}
				w := newWorld(t, configJSON(entry("a/", sum, onDemandLoad+", "+warmUpOf5)), map[string]faultySpec{"a/": version(1)}, tweak)
				defer w.stop()
				defer release()
				synctest.Wait()
				// The caller's own deadline is far later: the answer comes from the bound.
				ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
				defer cancel()
				start := time.Now()
				res, err := w.sys.Infer(ctx, []Request{{API: "test", ModelPath: "a/", Inputs: scalar(t, 1)}})
				if err != nil {
					t.Fatal(err)
				}
				const warmUpErr = `warm-up of "a/" did not finish within 2.5s`
				if got := res[0].Err; servables.KindOf(got) != servables.Unavailable || !strings.Contains(fmt.Sprint(got), warmUpErr) {
					t.Fatalf("the waiting caller got %v, want Unavailable with the warm-up's error", got)
				}
				if waited := time.Since(start); waited != 2500*time.Millisecond {
					t.Fatalf("the caller waited %v, want warmup_timeout", waited)
				}
				if m := w.model("a/"); m.State != StateFailed || m.RetryAt == nil || m.StuckWarmUps != 1 {
					t.Fatalf("after its warm-up timed out: %+v", m)
				}
				if res := w.infer("a/", 1); !strings.Contains(fmt.Sprint(res.Err), warmUpErr) {
					t.Fatalf("within the backoff: %v, want the same error at once", res.Err)
				}
				for i := range 8 { // past the backoff, and polls
					time.Sleep(time.Second)
					start := time.Now()
					ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second) // a caller left waiting fails, not hangs
					res, err := w.sys.Infer(ctx, []Request{{API: "test", ModelPath: "a/", Inputs: scalar(t, 1)}})
					cancel()
					if err != nil {
						t.Fatal(err)
					}
					if got := res[0].Err; servables.KindOf(got) != servables.Unavailable || !strings.Contains(fmt.Sprint(got), warmUpErr) || time.Since(start) != 0 {
						t.Fatalf("%d s after the backoff, the stuck call still running: %v after %v, want the warm-up's error at once", i+1, got, time.Since(start))
					}
				}
				if l, h := w.rt.loaded.Load(), hung.Load(); l != 1 || h != 1 {
					t.Fatalf("while the stuck call runs: %d servables loaded, %d calls stuck; want 1 and 1", l, h)
				}
				if m := w.model("a/"); m.State != StateFailed || m.StuckWarmUps != 1 || !strings.Contains(m.LastError, warmUpErr) {
					t.Fatalf("while the stuck call runs: %+v", m)
				}
				release()
				if res := w.infer("a/", 4); res.Err != nil || res.Outputs[0].Float32s()[0] != 4 {
					t.Fatalf("once the stuck call returned: %+v", res)
				}
				if n := w.metric("grove_model_loads_total", map[string]string{"model": "a/", "result": "failed", "reason": "demand"}); n != 1 {
					t.Fatalf("failed loads = %v, want 1", n)
				}
				if l, c := w.rt.loaded.Load(), w.rt.closed.Load(); l != 2 || c != 1 {
					t.Fatalf("once the stuck call returned: %d servables loaded, %d closed; want 2 and the stuck one closed", l, c)
				}
			})
		})
	}
}

// An in-place update whose warm-up hangs fails at warmup_timeout and the
// old content keeps serving, before, during and after; polls do not load
// the update again while its call is stuck, and once it returns the
// update is retried.
func TestAnUpdateWhoseWarmUpHangsFailsAtWarmUpTimeoutAndTheOldContentKeepsServing(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		tweak, release := stallWarmUp(2, 2500*time.Millisecond) // the first warm-up is the old content's
		sum1 := checksumOf(t, "a/", version(1))
		w := newWorld(t, configJSON(entry("a/", sum1, warmUpOf5)), map[string]faultySpec{"a/": version(1)}, tweak)
		defer w.stop()
		defer release()
		synctest.Wait()
		sum2 := w.putModel("a/", version(2))
		w.setConfig(configJSON(entry("a/", sum2, warmUpOf5)))
		if m := w.model("a/"); m.State != StateReady || !m.Updating || m.Checksum != sum1 {
			t.Fatalf("while the update's warm-up hangs: %+v", m)
		}
		if res := w.infer("a/", 3); res.Err != nil || res.Checksum != sum1 {
			t.Fatalf("during the update: %+v", res)
		}
		time.Sleep(2500 * time.Millisecond)
		synctest.Wait()
		m := w.model("a/")
		if m.State != StateReady || m.Updating || m.Checksum != sum1 || !strings.Contains(m.LastError, `warm-up of "a/" did not finish within 2.5s`) {
			t.Fatalf("status at warmup_timeout: %+v", m)
		}
		if res := w.infer("a/", 3); res.Err != nil || res.Checksum != sum1 {
			t.Fatalf("after the failed update: %+v", res)
		}
		if n := w.metric("grove_model_loads_total", map[string]string{"model": "a/", "result": "failed", "reason": "update"}); n != 1 {
			t.Fatalf("failed updates = %v, want 1", n)
		}
		if n := w.rt.closed.Load(); n != 0 {
			t.Fatalf("%d servables closed while the warm-up's forward call still runs on one", n)
		}
		for range 5 {
			w.settle()
		}
		if l, m := w.rt.loaded.Load(), w.model("a/"); l != 2 || m.Updating || m.StuckWarmUps != 1 {
			t.Fatalf("five polls later, the update's call still stuck: %d servables loaded, status %+v; want no new load", l, m)
		}
		release()
		if n := w.rt.closed.Load(); n != 2 {
			t.Fatalf("%d servables closed once the hung call returned, want the update's, then the old content once the retried update replaced it", n)
		}
		if m := w.model("a/"); m.State != StateReady || m.Checksum != sum2 || m.LastError != "" || m.StuckWarmUps != 0 {
			t.Fatalf("once the hung call returned, the update is retried: %+v", m)
		}
	})
}

// hangWarmUps bounds warm-ups to timeout and makes every forward call
// whose input is 5 (the warm-up of warmUpOf5) block until release is
// called, after which such calls return at once; hung counts the calls
// that blocked. release, which may be called more than once, then waits
// for what follows the calls' return.
func hangWarmUps(timeout time.Duration) (tweak func(*world, *Options), release func(), hung *atomic.Int64) {
	unblock := make(chan struct{})
	hung = new(atomic.Int64)
	tweak = func(w *world, o *Options) {
		o.WarmUpTimeout = timeout
		w.rt.onPredict = func(in []servables.Tensor) {
			if len(in) > 0 && in[0].Len() > 0 && in[0].Float64At(0) == 5 {
				select {
				case <-unblock:
				default:
					hung.Add(1)
					<-unblock
				}
			}
		}
	}
	unblockOnce := sync.OnceFunc(func() { close(unblock) })
	return tweak, func() {
		unblockOnce()
		synctest.Wait()
	}, hung
}

// A model whose every warm-up hangs keeps one stuck copy, not one more at
// each poll: while the forward call of its timed-out warm-up runs, polls
// start no load of the same content (the config's checksum, or, with
// none, what a fetch finds), and the path stays failed with the warm-up's
// error. Once the call returns, its content is closed and the model loads
// again.
func TestAModelWhoseWarmUpHangsIsNotLoadedAgainUntilTheStuckCallReturns(t *testing.T) {
	for _, withSum := range []bool{true, false} {
		t.Run(fmt.Sprintf("checksum in config %v", withSum), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				tweak, release, hung := hangWarmUps(2500 * time.Millisecond)
				sum := ""
				if withSum {
					sum = checksumOf(t, "a/", version(1))
				}
				w := newWorld(t, configJSON(entry("a/", sum, warmUpOf5)), map[string]faultySpec{"a/": version(1)}, tweak)
				defer w.stop()
				defer release()
				time.Sleep(2500 * time.Millisecond)
				synctest.Wait()
				const warmUpErr = `warm-up of "a/" did not finish within 2.5s`
				for range 10 { // ten polls
					w.settle()
				}
				m := w.model("a/")
				if m.State != StateFailed || !strings.Contains(m.LastError, warmUpErr) || m.StuckWarmUps != 1 {
					t.Fatalf("after ten polls while the warm-up's call is stuck: %+v, want failed with %q and one stuck warm-up", m, warmUpErr)
				}
				if l, h := w.rt.loaded.Load(), hung.Load(); l != 1 || h != 1 {
					t.Fatalf("after ten polls: %d servables loaded, %d forward calls stuck; want 1 and 1", l, h)
				}
				if n := w.metric("grove_model_loads_total", map[string]string{"model": "a/", "result": "failed"}); n != 1 {
					t.Fatalf("failed loads = %v, want 1", n)
				}
				if n := w.rt.closed.Load(); n != 0 {
					t.Fatalf("%d servables closed while the stuck call runs", n)
				}
				release() // a poll came since the failure: it loads at once
				if m := w.model("a/"); m.State != StateReady || m.LastError != "" || m.StuckWarmUps != 0 {
					t.Fatalf("once the stuck call returned: %+v", m)
				}
				if n := strings.Count(w.log.String(), "the forward call of a timed-out warm-up returned"); n != 1 {
					t.Fatalf("the stuck call's return was logged %d times, want once", n)
				}
				if l, c := w.rt.loaded.Load(), w.rt.closed.Load(); l != 2 || c != 1 {
					t.Fatalf("once the stuck call returned: %d servables loaded, %d closed; want 2 and the stuck one closed", l, c)
				}
				if res := w.infer("a/", 3); res.Err != nil || res.Outputs[0].Float32s()[0] != 3 {
					t.Fatalf("after the retry: %+v", res)
				}
			})
		})
	}
}

// A new checksum is not held back by a stuck warm-up of the old one,
// whether the config names it or, with no checksum in the config, the
// bucket's files change: it loads while the stuck call still runs.
func TestANewChecksumLoadsWhileAWarmUpOfTheOldOneIsStuck(t *testing.T) {
	for _, withSum := range []bool{true, false} {
		t.Run(fmt.Sprintf("checksum in config %v", withSum), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				tweak, release, hung := hangWarmUps(2500 * time.Millisecond)
				sum1 := ""
				if withSum {
					sum1 = checksumOf(t, "a/", version(1))
				}
				w := newWorld(t, configJSON(entry("a/", sum1, warmUpOf5)), map[string]faultySpec{"a/": version(1)}, tweak)
				defer w.stop()
				defer release()
				time.Sleep(2500 * time.Millisecond)
				synctest.Wait()
				w.settle()
				if l := w.rt.loaded.Load(); l != 1 {
					t.Fatalf("%d servables loaded while the first warm-up is stuck, want 1", l)
				}
				// The new content's warm-up does not hang.
				sum2 := w.putModel("a/", version(2))
				if withSum {
					w.setConfig(configJSON(entry("a/", sum2, `"warm_up_batch_request_json": "[[6]]"`)))
				} else {
					w.b.set("model_config.json", []byte(configJSON(entry("a/", "", `"warm_up_batch_request_json": "[[6]]"`))))
					w.settle()
				}
				if m := w.model("a/"); m.State != StateReady || m.Checksum != sum2 {
					t.Fatalf("after the new checksum, with the old one's warm-up still stuck: %+v", m)
				}
				if res := w.infer("a/", 3); res.Err != nil || res.Checksum != sum2 {
					t.Fatalf("the new content: %+v", res)
				}
				if l, c, h := w.rt.loaded.Load(), w.rt.closed.Load(), hung.Load(); l != 2 || c != 0 || h != 1 {
					t.Fatalf("%d servables loaded, %d closed, %d calls stuck; want 2, 0 and 1", l, c, h)
				}
				release()
				if c := w.rt.closed.Load(); c != 1 {
					t.Fatalf("%d servables closed once the stuck call returned, want the stuck one", c)
				}
				if m := w.model("a/"); m.State != StateReady || m.Checksum != sum2 {
					t.Fatalf("once the stuck call returned: %+v", m)
				}
			})
		})
	}
}

// crashingBucket is a bucket whose String, which the supervisor calls as
// it publishes a status snapshot or fetches a model, panics once after
// crash is set: a bug in the supervisor's handling of one message, which
// it recovers (panics.go).
type crashingBucket struct {
	*memBucket
	crash atomic.Bool
}

func (b *crashingBucket) String() string {
	if b.crash.CompareAndSwap(true, false) {
		panic("test: the supervisor crashes")
	}
	return b.memBucket.String()
}

// A supervisor that panics while the forward call of a timed-out warm-up
// is stuck keeps its record of it (it is not restarted, and loses no
// state: actors/doc.go): ten polls load the same content no second time,
// and it loads again once the call returns.
func TestAStuckWarmUpStillHoldsItsContentBackAfterASupervisorPanic(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		tweak, release, hung := hangWarmUps(2500 * time.Millisecond)
		var cb *crashingBucket
		w := newWorld(t, configJSON(entry("a/", "", warmUpOf5)), map[string]faultySpec{"a/": version(1)}, tweak, crashOn(&cb))
		defer w.stop()
		defer release()
		time.Sleep(2500 * time.Millisecond)
		synctest.Wait()
		if m := w.model("a/"); m.State != StateFailed || m.StuckWarmUps != 1 {
			t.Fatalf("at warmup_timeout: %+v, want failed with one stuck warm-up", m)
		}
		events := supervision(t, w)
		cb.crash.Store(true)
		w.settle()     // a poll: the status changes
		w.sys.Status() // its snapshot panics
		synctest.Wait()
		if cb.crash.Load() {
			t.Fatal("the supervisor did not panic")
		}
		for range 10 { // ten polls
			w.settle()
		}
		if l, h := w.rt.loaded.Load(), hung.Load(); l != 1 || h != 1 {
			t.Fatalf("ten polls after the supervisor panicked: %d servables loaded, %d forward calls stuck; want 1 and 1", l, h)
		}
		if m := w.model("a/"); m.State != StateFailed || m.StuckWarmUps != 1 {
			t.Fatalf("ten polls after the supervisor panicked: %+v, want still failed with one stuck warm-up", m)
		}

		release()
		w.settle()
		if l := w.rt.loaded.Load(); l != 2 {
			t.Fatalf("once the stuck call returned: %d servables loaded, want the stuck one and a new load", l)
		}
		if m := w.model("a/"); m.State != StateReady || m.LastError != "" {
			t.Fatalf("once the stuck call returned: %+v", m)
		}
		if res := w.infer("a/", 3); res.Err != nil || res.Outputs[0].Float32s()[0] != 3 {
			t.Fatalf("after the retry: %+v", res)
		}
		noSupervision(t, events)
	})
}

// A content of two replicas shares one servable: whatever becomes of its
// load (its warm-up fails, hangs past warmup_timeout, or succeeds and
// the content is later replaced), the servable is closed exactly once,
// and only once no replica runs on it any more.
func TestAServableSharedByReplicasIsClosedOnceWhateverItsWarmUpDoes(t *testing.T) {
	const two = `"replicas": 2, ` + warmUpOf5
	t.Run("warm-up fails", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			w := newWorld(t, configJSON(entry("a/", "", two)), map[string]faultySpec{"a/": {ErrorOn: f64(5)}})
			defer w.stop()
			synctest.Wait()
			if m := w.model("a/"); m.State != StateFailed {
				t.Fatalf("a/ whose warm-up fails: %+v", m)
			}
			if left := w.modelActors(); len(left) != 0 {
				t.Fatalf("model actors after the failed warm-up: %v", left)
			}
			if l, c := w.rt.loaded.Load(), w.rt.closed.Load(); l != 1 || c != 1 {
				t.Fatalf("%d servables loaded, %d closed; want the one closed once", l, c)
			}
		})
	})
	t.Run("warm-up hangs", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			tweak, release := stallWarmUp(1, 2500*time.Millisecond)
			w := newWorld(t, configJSON(entry("a/", "", two)), map[string]faultySpec{"a/": version(1)}, tweak)
			defer w.stop()
			defer release()
			time.Sleep(2500 * time.Millisecond)
			synctest.Wait()
			if m := w.model("a/"); m.State != StateFailed || m.StuckWarmUps != 1 {
				t.Fatalf("a/ at warmup_timeout: %+v", m)
			}
			if left := w.modelActors(); len(left) != 1 {
				t.Fatalf("model actors while the warm-up hangs: %v, want the hung one alone", left)
			}
			if c := w.rt.closed.Load(); c != 0 {
				t.Fatalf("%d servables closed while a replica still runs on it", c)
			}
			release()
			if l, c := w.rt.loaded.Load(), w.rt.closed.Load(); l != 1 || c != 1 {
				t.Fatalf("once the hung call returned: %d servables loaded, %d closed; want the one closed once", l, c)
			}
		})
	})
	t.Run("replaced", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			w := newWorld(t, configJSON(entry("a/", "", two)), map[string]faultySpec{"a/": version(1)})
			defer w.stop()
			synctest.Wait()
			if m := w.model("a/"); m.State != StateReady || m.Replicas != 2 {
				t.Fatalf("a/: %+v", m)
			}
			if c := w.rt.closed.Load(); c != 0 {
				t.Fatalf("%d servables closed while a/ serves", c)
			}
			sum := w.putModel("a/", version(2))
			w.setConfig(configJSON(entry("a/", sum, two)))
			if m := w.model("a/"); m.Checksum != sum || m.Retiring != 0 {
				t.Fatalf("a/ after its update: %+v", m)
			}
			if l, c := w.rt.loaded.Load(), w.rt.closed.Load(); l != 2 || c != 1 {
				t.Fatalf("%d servables loaded, %d closed; want the replaced one closed once", l, c)
			}
			if left := w.modelActors(); len(left) != 2 {
				t.Fatalf("model actors: %v, want the new content's two", left)
			}
		})
	})
}
