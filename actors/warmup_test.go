package actors

import (
	"errors"
	"strings"
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
