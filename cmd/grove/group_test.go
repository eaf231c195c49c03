package main

import (
	"context"
	"errors"
	"slices"
	"sync"
	"testing"
	"testing/synctest"
	"time"
)

// events records what the components of a test did, in order.
type events struct {
	mu  sync.Mutex
	got []string
}

func (e *events) add(s string) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.got = append(e.got, s)
}

// waiter is a component whose execute waits for interrupt, recording both.
func (e *events) waiter(name string) component {
	stop := make(chan struct{})
	return component{name: name,
		execute:   func() error { <-stop; e.add(name + " returned"); return nil },
		interrupt: func(context.Context) { e.add(name + " interrupted"); close(stop) },
	}
}

func TestGroupStopsStagesInReverseOrderOnceOneReturns(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var e events
		fail := make(chan error)
		g := group{stopTimeout: time.Second}
		g.add("producer", component{name: "producer", interrupt: func(context.Context) { e.add("producer interrupted") }})
		g.add("actors", e.waiter("actors"))
		g.add("servers", component{name: "http", execute: func() error { return <-fail }, interrupt: func(context.Context) { e.add("http interrupted") }})
		g.add("signals", e.waiter("signals"))
		boom := errors.New("serving HTTP: boom")
		go func() { fail <- boom }()
		if err := g.run(); err != boom {
			t.Errorf("run: %v, want the first error", err)
		}
		want := []string{"signals interrupted", "signals returned", "http interrupted", "actors interrupted", "actors returned", "producer interrupted"}
		if !slices.Equal(e.got, want) {
			t.Errorf("events\n%q\nwant\n%q", e.got, want)
		}
	})
}

func TestGroupWaitsForAStageToStopBeforeTheNext(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var e events
		g := group{stopTimeout: time.Minute}
		g.add("actors", component{name: "actors", interrupt: func(context.Context) { e.add("actors interrupted") }})
		drained := make(chan struct{})
		g.add("servers", component{name: "http", execute: func() error { <-drained; e.add("http drained"); return nil },
			interrupt: func(context.Context) {
				go func() { time.Sleep(10 * time.Second); close(drained) }() // in-flight requests finish later
			}})
		g.add("signals", component{name: "signals", execute: func() error { return nil }})
		start := time.Now()
		if err := g.run(); err != nil {
			t.Fatal(err)
		}
		if want := []string{"http drained", "actors interrupted"}; !slices.Equal(e.got, want) {
			t.Errorf("events %q, want %q", e.got, want)
		}
		if took := time.Since(start); took != 10*time.Second {
			t.Errorf("stopping took %v, want the drain's 10s", took)
		}
	})
}

func TestGroupInterruptsTheComponentsOfAStageTogether(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		httpStarted, grpcStarted := make(chan struct{}), make(chan struct{})
		// Each interrupt waits for the other to have started: one after the
		// other, the first would wait until the stop deadline.
		together := func(mine, other chan struct{}) func(ctx context.Context) {
			return func(ctx context.Context) {
				close(mine)
				select {
				case <-other:
				case <-ctx.Done():
					t.Error("the other server was not interrupted until the stop deadline")
				}
			}
		}
		g := group{stopTimeout: time.Minute}
		g.add("servers", component{name: "http", interrupt: together(httpStarted, grpcStarted)})
		g.add("servers", component{name: "grpc", interrupt: together(grpcStarted, httpStarted)})
		g.add("signals", component{name: "signals", execute: func() error { return nil }})
		if err := g.run(); err != nil {
			t.Fatal(err)
		}
	})
}

func TestGroupGivesEveryInterruptTheSameStopDeadline(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		start := time.Now()
		var deadlines []time.Duration
		record := func(ctx context.Context) {
			d, _ := ctx.Deadline()
			deadlines = append(deadlines, d.Sub(start))
			<-ctx.Done() // this one uses up the whole drain
		}
		g := group{stopTimeout: 30 * time.Second}
		g.add("producer", component{name: "producer", interrupt: record})
		g.add("servers", component{name: "http", interrupt: record})
		g.add("signals", component{name: "signals", execute: func() error { return nil }})
		if err := g.run(); err != nil {
			t.Fatal(err)
		}
		if want := []time.Duration{30 * time.Second, 30 * time.Second}; !slices.Equal(deadlines, want) {
			t.Errorf("deadlines %v, want %v", deadlines, want)
		}
		if took := time.Since(start); took != 30*time.Second {
			t.Errorf("stopping took %v, want the stop timeout", took)
		}
	})
}

func TestGroupAbortStopsWhatWasAddedWithoutRunningIt(t *testing.T) {
	var e events
	g := group{stopTimeout: time.Second}
	g.add("producer", component{name: "producer", execute: func() error { e.add("producer executed"); return nil },
		interrupt: func(context.Context) { e.add("producer interrupted") }})
	g.add("actors", component{name: "actors", interrupt: func(context.Context) { e.add("actors interrupted") }})
	listen := errors.New("listening for HTTP: address in use")
	if err := g.abort(listen); err != listen {
		t.Errorf("abort: %v, want its error", err)
	}
	if want := []string{"actors interrupted", "producer interrupted"}; !slices.Equal(e.got, want) {
		t.Errorf("events %q, want %q", e.got, want)
	}
}

// A stage that never stops (a Kafka producer flushing to an unreachable
// broker) is left behind at the end of its time, and a later stage with
// a share still gets that share of the stop timeout: the whole stop ends
// at the stop timeout.
func TestGroupKeepsEachStagesShareFromAComponentThatNeverReturns(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		start := time.Now()
		var (
			mu        sync.Mutex
			deadlines = map[string]time.Duration{}
			auditRan  time.Duration
		)
		g := group{stopTimeout: 30 * time.Second, shares: map[string]float64{"audit": 0.2, "bucket": 0.05}}
		g.add("bucket", component{name: "bucket", interrupt: func(ctx context.Context) {
			d, _ := ctx.Deadline()
			mu.Lock()
			deadlines["bucket"] = d.Sub(start)
			mu.Unlock()
		}})
		g.add("audit", component{name: "audit", interrupt: func(ctx context.Context) {
			d, _ := ctx.Deadline()
			began := time.Now()
			time.Sleep(5 * time.Second) // writing its queue takes a while
			mu.Lock()
			deadlines["audit"], auditRan = d.Sub(start), time.Since(began)
			mu.Unlock()
		}})
		never := make(chan struct{})
		defer close(never)
		g.add("prediction log", component{name: "kafka", execute: func() error { <-never; return nil },
			interrupt: func(ctx context.Context) {
				d, _ := ctx.Deadline()
				mu.Lock()
				deadlines["prediction log"] = d.Sub(start)
				mu.Unlock()
			}})
		g.add("signals", component{name: "signals", execute: func() error { return nil }})
		if err := g.run(); err != nil {
			t.Fatal(err)
		}
		want := map[string]time.Duration{"prediction log": 22500 * time.Millisecond, "audit": 28500 * time.Millisecond, "bucket": 30 * time.Second}
		for k, w := range want {
			if deadlines[k] != w {
				t.Errorf("%s's stop deadline %v after the start, want %v", k, deadlines[k], w)
			}
		}
		if auditRan != 5*time.Second {
			t.Errorf("the audit trail ran %v, want the 5 s it needed", auditRan)
		}
		if took := time.Since(start); took > 30*time.Second {
			t.Errorf("stopping took %v, past the stop timeout", took)
		}
	})
}
