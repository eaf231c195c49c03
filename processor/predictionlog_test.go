package processor

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/groveml/grove/logging/kafkatest"
)

// grove_prediction_log logs the processor's answers through the actors'
// prediction sink, to a real Kafka protocol broker (kfake).
func TestProcessorPredictionLog(t *testing.T) {
	c, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(1, "deeprec.log"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close) // after the processor's Close, which flushes to it
	addr := c.ListenAddrs()[0]
	dir := modelDir(t, "onnx", "model.onnx")
	p := start(t, fmt.Sprintf(`{"checkpoint_dir": %q, "grove_prediction_log": {"kafka": {"brokers": [%q], "topic": "deeprec.log",
		"encoding": "json", "linger": "1ms"}, "prediction_log": {"default_level": "FULL"}}}`, dir, addr))
	in, err := os.ReadFile(filepath.Join(data, "req_b1.bin"))
	if err != nil {
		t.Fatal(err)
	}
	if out, st := p.Process(context.Background(), 1, in); st != StatusOK {
		t.Fatalf("process: %d %s", st, out)
	}
	for _, r := range kafkatest.ReadUntil(t, addr, "deeprec.log", 20*time.Second, func(r []*kgo.Record) bool { return len(r) > 0 }) {
		v := string(r.Value)
		if !strings.Contains(v, API) || !strings.Contains(v, "onnx/") {
			t.Fatalf("event %s: want API %s and the model path", v, API)
		}
	}
}
