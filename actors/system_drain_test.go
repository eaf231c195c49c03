package actors

import (
	"testing"
	"testing/synctest"
)

func TestDrainTurnsReadyFalseAndKeepsServing(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		w := newWorld(t, configJSON(entry("a/", "", "")), map[string]faultySpec{"a/": {}})
		defer w.stop()
		synctest.Wait()
		if !w.sys.Ready() {
			t.Fatal("not ready once its model loaded")
		}
		w.sys.Drain()
		if w.sys.Ready() {
			t.Error("still ready while draining")
		}
		if res := w.infer("a/", 1); res.Err != nil {
			t.Errorf("a request while draining: %v, want it served", res.Err)
		}
	})
}
