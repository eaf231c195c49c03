package actors

import (
	"context"
	"runtime"
	"strings"
	"testing"
	"time"
)

// grovesGoroutines returns the stacks of the goroutines running code of
// this package or of protoactor.
func grovesGoroutines() []string {
	buf := make([]byte, 1<<20)
	buf = buf[:runtime.Stack(buf, true)]
	var out []string
	for _, g := range strings.Split(string(buf), "\n\n") {
		if strings.Contains(g, "TestStopLeavesNoGoroutineBehind") {
			continue // this test's own goroutine
		}
		if strings.Contains(g, "groveml/grove/actors.") || strings.Contains(g, "asynkron/protoactor-go") {
			out = append(out, g)
		}
	}
	return out
}

// On the real clock, outside any bubble: after Stop returns, no goroutine
// of the actors, of protoactor or of the background jobs is left, even
// with contracts (the router's expiry timer), shadow copies (the niced
// workers), the shared-state writer and a load still running.
func TestStopLeavesNoGoroutineBehind(t *testing.T) {
	if leftover := grovesGoroutines(); len(leftover) > 0 {
		t.Skipf("another test left goroutines running: %s", leftover[0])
	}
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
		left := grovesGoroutines()
		if len(left) == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d goroutines left after Stop, the first:\n%s", len(left), left[0])
		}
		time.Sleep(10 * time.Millisecond)
	}
}
