package actors

import (
	"io"
	"log/slog"
	"runtime"
	"sync/atomic"
	"testing"
)

func TestLowPriorityShedsWorkWhenWorkersAndQueueAreFull(t *testing.T) {
	lp := newLowPriority(1, 2, slog.New(slog.NewTextHandler(io.Discard, nil)), nil)
	release := make(chan struct{})
	started := make(chan struct{})
	var ran atomic.Int32
	if !lp.trySubmit(func() { close(started); <-release; ran.Add(1) }) {
		t.Fatal("the first job was refused with an idle worker")
	}
	<-started // the worker holds the first job; the queue is empty
	for i := range 2 {
		if !lp.trySubmit(func() { ran.Add(1) }) {
			t.Fatalf("job %d refused with room in the queue", i+2)
		}
	}
	if lp.trySubmit(func() { ran.Add(1) }) {
		t.Fatal("a job was taken with the worker busy and the queue full")
	}
	close(release)
	lp.stop()
	if n := ran.Load(); n != 3 {
		t.Errorf("%d jobs ran, want the 3 accepted ones", n)
	}
}

func TestLowPriorityWithoutQueueTakesWorkOnlyForAnIdleWorker(t *testing.T) {
	lp := newLowPriority(2, 0, slog.New(slog.NewTextHandler(io.Discard, nil)), nil)
	release := make(chan struct{})
	var started atomic.Int32
	accepted := 0
	// Two idle workers: each takes one job (a worker may need a moment to
	// reach its receive, so retry until both are busy).
	for accepted < 2 {
		if lp.trySubmit(func() { started.Add(1); <-release }) {
			accepted++
		}
	}
	for started.Load() < 2 {
		runtime.Gosched()
	}
	if lp.trySubmit(func() {}) {
		t.Error("a job was taken with both workers busy and no queue")
	}
	close(release)
	lp.stop()
}
