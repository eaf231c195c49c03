package actors

import (
	"context"
	"errors"
	"runtime"
	"strings"
	"testing"
	"testing/synctest"
	"time"
)

// grovesGoroutines returns the stacks of the goroutines running code of
// this package or of protoactor, by goroutine id.
func grovesGoroutines() map[string]string {
	buf := make([]byte, 1<<20)
	for {
		n := runtime.Stack(buf, true)
		if n < len(buf) {
			buf = buf[:n]
			break
		}
		buf = make([]byte, 2*len(buf))
	}
	out := map[string]string{}
	for _, g := range strings.Split(string(buf), "\n\n") {
		if strings.Contains(g, "groveml/grove/actors.") || strings.Contains(g, "asynkron/protoactor-go") {
			id, _, _ := strings.Cut(strings.TrimPrefix(g, "goroutine "), " ")
			out[id] = g
		}
	}
	return out
}

// On the real clock, outside any bubble: after Stop returns, no goroutine
// of the actors, of protoactor or of the background jobs that this System
// started is left, with contracts (the router's expiry timer), shadow
// copies (the niced workers), the shared-state writer, an eviction and a
// load started by the last config change. Goroutines that other tests of
// the package left are told apart by id.
func TestStopLeavesNoGoroutineBehind(t *testing.T) {
	before := grovesGoroutines()
	w := newWorld(t, promotionConfig, map[string]faultySpec{"a/": version(1), "b/": version(2), "c/": version(3), "d/": version(4)})
	for !w.sys.Ready() {
		time.Sleep(10 * time.Millisecond)
	}
	for range 20 {
		if _, _, err := w.sys.Score(context.Background(), "ads/pctr/1", "", Request{Inputs: scalar(t, 1)}); err != nil {
			t.Fatal(err)
		}
	}
	w.b.set("model_config.json", []byte(`{"model_metadata": [{"model_path": "d/"}]}`)) // loads and evictions at the next poll
	time.Sleep(poll + 100*time.Millisecond)
	w.stop()
	deadline := time.Now().Add(2 * time.Second)
	for {
		var left []string
		for id, g := range grovesGoroutines() {
			if _, old := before[id]; !old {
				left = append(left, g)
			}
		}
		if len(left) == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d goroutines left after Stop, the first:\n%s", len(left), left[0])
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// heldSink holds every shadow execution's log event until release is
// closed, telling entered each time one arrives; served answers pass.
type heldSink struct {
	entered chan struct{}
	release chan struct{}
}

func (s *heldSink) LogPrediction(_ *Request, _ *Result, served bool) {
	if served {
		return
	}
	s.entered <- struct{}{}
	<-s.release
}

// A shadow execution that finished before the champion answered, when
// the low-priority workers are busy at that answer, is logged uncompared
// on a goroutine of its own. That goroutine is the engine's: Stop returns
// only once it has handed its event to the prediction sink (which the
// server closes after Stop), not while it is still there.
func TestStopWaitsForAShadowExecutionLoggedBesideTheBusyWorkers(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		sink := &heldSink{entered: make(chan struct{}, 1), release: make(chan struct{})}
		cfg := `{"model_metadata": [{"model_path": "a/"}, {"model_path": "b/"}],
 "contracts": [{"organization": "ads", "project": "pctr", "contract_number": 1,
   "servables": [
     {"release_version": "v1", "model_path": "a/"},
     {"release_version": "v2", "model_path": "b/", "validity": [{"never_valid": {}}], "shadow": {}}]}]}`
		w := newWorld(t, cfg, map[string]faultySpec{"a/": {ErrorOn: f64(-1001), DelayMs: 100}, "b/": {ErrorOn: f64(-1002)}},
			func(_ *world, o *Options) { o.Predictions, o.ShadowWorkers, o.ShadowQueue = sink, 1, 0 })
		w.settle()

		// v2's copy runs at once on the only worker and waits for the
		// champion, which answers after 100 ms.
		scored := make(chan error, 1)
		go func() {
			_, _, err := w.sys.Score(context.Background(), "ads/pctr/1", "", Request{API: "test", RequestID: "r1", Inputs: scalar(t, 1)})
			scored <- err
		}()
		synctest.Wait()
		// The worker is busy when the champion answers: the comparison is
		// shed, and the event logged on a goroutine of its own.
		hold := make(chan struct{})
		if !w.sys.low.trySubmit(func() { <-hold }) {
			t.Fatal("the low-priority worker is not free")
		}
		time.Sleep(100 * time.Millisecond)
		synctest.Wait()
		if err := <-scored; err != nil {
			t.Fatal(err)
		}
		select {
		case <-sink.entered:
		default:
			t.Fatal("the shadow execution was not logged")
		}
		if n := w.metric("grove_shadow_comparisons_shed_total", map[string]string{"model": "b/"}); n != 1 {
			t.Fatalf("comparisons shed: %v, want 1 (the worker was busy)", n)
		}
		close(hold)

		stopped := make(chan error, 1)
		go func() { stopped <- w.sys.Stop(context.Background()) }()
		synctest.Wait()
		select {
		case err := <-stopped:
			t.Errorf("Stop returned (%v) while a shadow execution was still being logged", err)
			close(sink.release)
			return
		default:
		}
		close(sink.release)
		if err := <-stopped; err != nil {
			t.Fatal(err)
		}
	})
}

// A lone request waiting for company in a dynamic batch (max_queue_delay)
// has its model actor's flush timer running. Stop stops it: nothing of
// the engine runs after Stop returns, so nothing is logged after (a flush
// reaching the stopped actor was a dead letter logged later).
func TestStopStopsTheFlushTimerOfADynamicBatch(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		w := newWorld(t, configJSON(entry("a/", "", `"max_batch_rows": 8, "max_queue_delay_us": 1000000`)), map[string]faultySpec{"a/": version(1)})
		w.settle()
		answered := make(chan Result, 1)
		go func() {
			res, err := w.sys.Infer(context.Background(), []Request{{API: "test", ModelPath: "a/", Inputs: scalar(t, 1)}})
			if err == nil {
				answered <- res[0]
			}
			close(answered)
		}()
		synctest.Wait() // the request waits for company, its flush timer runs
		if err := w.sys.Stop(context.Background()); err != nil {
			t.Fatal(err)
		}
		logged := w.log.Len()
		time.Sleep(2 * time.Second) // past the flush's delay
		synctest.Wait()
		if after := w.log.String()[logged:]; after != "" {
			t.Errorf("logged after Stop returned:\n%s", after)
		}
		if res, ok := <-answered; ok && !errors.Is(res.Err, ErrStopped) { // or no answer at all: Stop let the caller go
			t.Errorf("the waiting request got %v, want ErrStopped", res.Err)
		}
	})
}
