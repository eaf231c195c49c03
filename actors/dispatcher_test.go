package actors

import (
	"sync/atomic"
	"testing"
	"time"
)

func TestWorkerDispatcherReusesIdleWorkers(t *testing.T) {
	d := newWorkerDispatcher(10, time.Minute)
	var started atomic.Int32
	for range 100 {
		done := make(chan struct{})
		d.Schedule(func() { started.Add(1); close(done) })
		<-done
		time.Sleep(time.Millisecond) // let the worker get back to waiting
	}
	if n := started.Load(); n != 100 {
		t.Fatalf("%d of 100 functions ran", n)
	}
	if n := d.started.Load(); n != 1 {
		t.Errorf("%d workers started for 100 schedules one after the other, want 1", n)
	}
}

func TestWorkerDispatcherNeverQueuesBehindABusyWorker(t *testing.T) {
	d := newWorkerDispatcher(10, time.Minute)
	block := make(chan struct{})
	d.Schedule(func() { <-block }) // like a model actor in a long forward call
	ran := make(chan struct{})
	d.Schedule(func() { close(ran) })
	select {
	case <-ran:
	case <-time.After(5 * time.Second):
		t.Fatal("the second mailbox waited for the busy one")
	}
	close(block)
}

func TestWorkerDispatcherWorkersExitWhenIdle(t *testing.T) {
	d := newWorkerDispatcher(10, 20*time.Millisecond)
	for range 3 {
		d.Schedule(func() { time.Sleep(5 * time.Millisecond) })
	}
	exited := make(chan struct{})
	go func() { d.wg.Wait(); close(exited) }()
	select {
	case <-exited:
	case <-time.After(5 * time.Second):
		t.Fatal("idle workers did not exit")
	}
}
