package actors

import (
	"context"
	"runtime"
	"strings"
	"testing"
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
