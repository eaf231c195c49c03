package actors

import (
	"context"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/groveml/grove/servables"
)

// forwardGoroutines records the goroutine of each forward call of w's
// models, in order.
func forwardGoroutines(w *world) func() []string {
	var mu sync.Mutex
	var got []string
	w.rt.onPredict = func([]servables.Tensor) {
		mu.Lock()
		defer mu.Unlock()
		got = append(got, goroutineID())
	}
	return func() []string {
		mu.Lock()
		defer mu.Unlock()
		return append([]string(nil), got...)
	}
}

// A single request to an idle model runs its forward call on the
// caller's goroutine, when it has no deadline or one far beyond its
// model's slowest recent call (inlineHeadroom of them) and it is the only
// call the engine serves; one whose deadline is closer, one beside
// another call, or a batch of two, waits for a model actor on the
// dispatcher.
func TestAnIdleModelRunsALoneRequestOnItsCallersGoroutineWhenItsDeadlineAllowsAndItIsAlone(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var calls func() []string
		w := newWorld(t, configJSON(entry("a/", "", "")), map[string]faultySpec{"a/": {DelayMs: 10}},
			func(w *world, o *Options) { calls = forwardGoroutines(w) })
		defer w.stop()
		synctest.Wait()
		me := goroutineID()
		infer := func(timeout time.Duration) {
			t.Helper()
			ctx := context.Background()
			if timeout > 0 {
				c, cancel := context.WithTimeout(ctx, timeout)
				defer cancel()
				ctx = c
			}
			res, err := w.inferCtx(ctx, "a/", 1)
			if err != nil || res[0].Err != nil {
				t.Fatalf("deadline %v: %v %+v", timeout, err, res)
			}
		}
		for _, tc := range []struct {
			name    string
			timeout time.Duration // 0: none
			beside  bool          // another call in flight
			inline  bool
		}{
			{"a deadline before the model has run", time.Hour, false, false},
			{"no deadline", 0, false, true},
			{"no deadline, beside another call", 0, true, false},
			{"a deadline under 4 × 10 ms + 1 ms", 40 * time.Millisecond, false, false},
			{"a deadline over 4 × 10 ms + 1 ms", 42 * time.Millisecond, false, true},
		} {
			if tc.beside {
				w.sys.calls.Add(1)
			}
			infer(tc.timeout)
			if tc.beside {
				w.sys.calls.Add(-1)
			}
			got := calls()
			if ran := got[len(got)-1]; (ran == me) != tc.inline {
				t.Errorf("%s: forward call on goroutine %s, caller %s; want inline %v", tc.name, ran, me, tc.inline)
			}
		}
		res, err := w.sys.Infer(context.Background(), []Request{{API: "test", ModelPath: "a/", Inputs: scalar(t, 1)}, {API: "test", ModelPath: "a/", Inputs: scalar(t, 2)}})
		if err != nil || res[0].Err != nil || res[1].Err != nil {
			t.Fatalf("a batch of two: %v %+v", err, res)
		}
		for _, ran := range calls()[5:] {
			if ran == me {
				t.Errorf("a batch of two ran a forward call on its caller's goroutine")
			}
		}
	})
}

// Once a model's calls are known to take 100 ms, a request with 30 ms
// left is not run on its caller's goroutine (where nobody could answer
// it at its deadline): it is answered at 30 ms, and its call counts late.
func TestARequestWhoseDeadlineIsCloserThanItsModelsSlowestCallIsAnsweredAtItsDeadline(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		w := newWorld(t, configJSON(entry("a/", "", "")), map[string]faultySpec{"a/": {DelayMs: 100}})
		defer w.stop()
		synctest.Wait()
		if r := w.infer("a/", 1); r.Err != nil { // runs inline: no deadline
			t.Fatal(r.Err)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Millisecond)
		defer cancel()
		start := time.Now()
		res, err := w.inferCtx(ctx, "a/", 1)
		if err != nil || servables.KindOf(res[0].Err) != servables.DeadlineExceeded || time.Since(start) != 30*time.Millisecond {
			t.Fatalf("got %v %+v after %v, want a DeadlineExceeded result at 30ms", err, res, time.Since(start))
		}
		time.Sleep(70 * time.Millisecond)
		synctest.Wait()
		if n := w.metric("grove_requests_late_total", map[string]string{"model": "a/"}); n != 1 {
			t.Fatalf("late = %v, want 1", n)
		}
	})
}

func TestRunsInlineNeedsNoDeadlineOrHeadroomOverTheSlowestRecentCall(t *testing.T) {
	now := time.Unix(1000, 0)
	for _, tc := range []struct {
		name string
		slow time.Duration
		left time.Duration // 0: no deadline
		want bool
	}{
		{"no deadline, model never ran", 0, 0, true},
		{"a deadline, model never ran", 0, time.Hour, false},
		{"a deadline far off", time.Millisecond, 5*time.Millisecond + time.Microsecond, true},
		{"a deadline just inside the headroom", time.Millisecond, 5 * time.Millisecond, false},
		{"a deadline passed", time.Millisecond, -time.Second, false},
	} {
		c := &content{}
		c.slowNs.Store(int64(tc.slow))
		var dl time.Time
		if tc.left != 0 {
			dl = now.Add(tc.left)
		}
		if got := c.runsInline(dl, now); got != tc.want {
			t.Errorf("%s: runsInline = %v, want %v", tc.name, got, tc.want)
		}
	}
}

func TestTheSlowestRecentCallRisesAtOnceAndFallsByA64thOfTheGap(t *testing.T) {
	c := &content{}
	c.observeService(10 * time.Millisecond)
	c.observeService(100 * time.Millisecond)
	if got := time.Duration(c.slowNs.Load()); got != 100*time.Millisecond {
		t.Fatalf("after a 100 ms call: %v", got)
	}
	c.observeService(36 * time.Millisecond)
	if got := time.Duration(c.slowNs.Load()); got != 99*time.Millisecond {
		t.Fatalf("after a 36 ms call: %v, want 99ms", got)
	}
	for range 2000 {
		c.observeService(time.Millisecond)
	}
	if got := time.Duration(c.slowNs.Load()); got > 2*time.Millisecond {
		t.Fatalf("after 2000 calls of 1 ms: %v, want under 2ms", got)
	}
}

// A request run on its caller's goroutine whose forward call stalls far
// past its model's recent calls cannot be answered at its deadline: it
// gets its answer when the call ends, late, counted in
// grove_requests_late_total.
func TestAnInlineRunThatStallsPastItsDeadlineIsAnsweredLateAndCounted(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		w := newWorld(t, configJSON(entry("a/", "", "")), map[string]faultySpec{"a/": {DelayMs: 1}}, func(w *world, o *Options) {
			w.rt.onPredict = func(in []servables.Tensor) {
				if in[0].Float64At(0) == 9 {
					time.Sleep(100 * time.Millisecond)
				}
			}
		})
		defer w.stop()
		synctest.Wait()
		if r := w.infer("a/", 1); r.Err != nil { // the model's calls take 1 ms
			t.Fatal(r.Err)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Millisecond) // over 4 × 1 ms + 1 ms
		defer cancel()
		start := time.Now()
		res, err := w.inferCtx(ctx, "a/", 9)
		if err != nil || res[0].Err != nil || time.Since(start) < 100*time.Millisecond {
			t.Fatalf("got %v %+v after %v, want the answer when the stalled call ends", err, res, time.Since(start))
		}
		if n := w.metric("grove_requests_late_total", map[string]string{"model": "a/"}); n != 1 {
			t.Fatalf("late = %v, want 1", n)
		}
	})
}
