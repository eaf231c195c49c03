package actors

import (
	"testing"
	"testing/synctest"
	"time"
)

func TestModelServingReportsReplicasAndTheBatchingInForce(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		w := newWorld(t, configJSON(
			entry("server/", "", `"max_queue_delay_us": 300`),
			entry("own/", "", `"replicas": 2, "max_batch_rows": 8, "max_queue_delay_us": 500`),
			entry("off/", "", `"max_batch_rows": 1, "max_queue_delay_us": 500`)),
			map[string]faultySpec{"server/": version(1), "own/": version(1), "off/": version(1)},
			func(_ *world, o *Options) { o.MaxBatchRows = 32 })
		defer w.stop()
		synctest.Wait()
		for path, want := range map[string]ModelServing{
			"server/": {Replicas: 1, MaxBatchRows: 32, MaxQueueDelay: 300 * time.Microsecond}, // the server's max_batch_rows
			"own/":    {Replicas: 2, MaxBatchRows: 8, MaxQueueDelay: 500 * time.Microsecond},
			"off/":    {Replicas: 1, MaxBatchRows: 1}, // not batched: no delay either
		} {
			if got, ok := w.sys.ModelServing(path); !ok || got != want {
				t.Errorf("%s: %+v %v, want %+v", path, got, ok, want)
			}
		}
		if _, ok := w.sys.ModelServing("nope/"); ok {
			t.Error("a path nothing serves has serving settings")
		}
	})
}
