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
		c.send(func(p *actor.PID, _ any) { got = p }, &predict{replica: tc.replica, done: func(_ []servables.Tensor, _ error, _, _ time.Duration) {}})
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
// call returns, and the next poll loads the model again.
func TestAWarmUpPastWarmUpTimeoutFailsTheLoadAndTheNextPollRetriesIt(t *testing.T) {
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
		if want := `warming up model a/: warm-up request 0 (run 1, replica 1): warm-up of "a/" did not finish within 2.5s`; m.State != StateFailed || m.LastError != want {
			t.Fatalf("status at warmup_timeout: %+v, want failed with %q", m, want)
		}
		if n := w.metric("grove_model_loads_total", map[string]string{"model": "a/", "result": "failed", "reason": "eager"}); n != 1 {
			t.Fatalf("failed loads = %v, want 1", n)
		}
		if n := w.rt.closed.Load(); n != 0 {
			t.Fatalf("%d servables closed while the warm-up's forward call still runs on one", n)
		}
		time.Sleep(poll / 2) // the next poll
		synctest.Wait()
		if m := w.model("a/"); m.State != StateReady || m.LastError != "" {
			t.Fatalf("after the next poll: %+v", m)
		}
		if res := w.infer("a/", 3); res.Err != nil || res.Outputs[0].Float32s()[0] != 3 {
			t.Fatalf("after the retry: %+v", res)
		}
		release()
		if l, c := w.rt.loaded.Load(), w.rt.closed.Load(); l != 2 || c != 1 {
			t.Fatalf("once the hung call returned: %d servables loaded, %d closed; want 2 and the hung one closed", l, c)
		}
	})
}

// A caller waiting for an on-demand model whose warm-up hangs gets the
// warm-up's error at warmup_timeout, not a hang; the load is retried
// after its backoff.
func TestAnOnDemandLoadWhoseWarmUpHangsAnswersItsCallerAtWarmUpTimeoutAndIsRetriedAfterABackoff(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		tweak, release := stallWarmUp(1, 2500*time.Millisecond)
		w := newWorld(t, configJSON(entry("a/", "", onDemandLoad+", "+warmUpOf5)), map[string]faultySpec{"a/": version(1)}, tweak)
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
		if got := res[0].Err; servables.KindOf(got) != servables.Unavailable || !strings.Contains(fmt.Sprint(got), `warm-up of "a/" did not finish within 2.5s`) {
			t.Fatalf("the waiting caller got %v, want Unavailable with the warm-up's error", got)
		}
		if waited := time.Since(start); waited != 2500*time.Millisecond {
			t.Fatalf("the caller waited %v, want warmup_timeout", waited)
		}
		if m := w.model("a/"); m.State != StateFailed || m.RetryAt == nil {
			t.Fatalf("after its warm-up timed out: %+v", m)
		}
		if res := w.infer("a/", 1); !strings.Contains(fmt.Sprint(res.Err), "did not finish within") {
			t.Fatalf("within the backoff: %v, want the same error at once", res.Err)
		}
		time.Sleep(time.Second)
		if res := w.infer("a/", 4); res.Err != nil || res.Outputs[0].Float32s()[0] != 4 {
			t.Fatalf("after the backoff: %+v", res)
		}
		if n := w.metric("grove_model_loads_total", map[string]string{"model": "a/", "result": "failed", "reason": "demand"}); n != 1 {
			t.Fatalf("failed loads = %v, want 1", n)
		}
	})
}

// An in-place update whose warm-up hangs fails at warmup_timeout and the
// old content keeps serving, before, during and after.
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
		release()
		if n := w.rt.closed.Load(); n != 1 {
			t.Fatalf("%d servables closed once the hung call returned, want the update's", n)
		}
	})
}
