// Package kafkatest reads what a test produced to a Kafka broker: the
// prediction log, the outcome topic, the evaluation records.
package kafkatest

import (
	"context"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

// settle is how long ReadExactly waits for a record beyond the n expected.
const settle = 300 * time.Millisecond

// ReadExactly reads topic from its start on the broker at addr and returns
// its first n records. It fails t if they do not all arrive within timeout
// (naming the keys that did) or if another record follows them.
func ReadExactly(t testing.TB, addr, topic string, n int, timeout time.Duration) []*kgo.Record {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.ConsumeTopics(topic), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	var recs []*kgo.Record
	for len(recs) < n {
		fs := cl.PollFetches(ctx)
		if ctx.Err() != nil {
			keys := make([]string, len(recs))
			for i, r := range recs {
				keys[i] = string(r.Key)
			}
			t.Fatalf("%s: %d records of %d within %v; keys seen: %q", topic, len(recs), n, timeout, keys)
		}
		for _, e := range fs.Errors() {
			t.Logf("%s: fetch error: %v", topic, e.Err)
		}
		recs = append(recs, fs.Records()...)
	}
	more, cancelMore := context.WithTimeout(context.Background(), settle)
	defer cancelMore()
	recs = append(recs, cl.PollFetches(more).Records()...)
	if len(recs) > n {
		t.Fatalf("%s: %d records, %d more than the %d expected", topic, len(recs), len(recs)-n, n)
	}
	return recs
}
