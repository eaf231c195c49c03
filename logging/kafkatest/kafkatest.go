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

// ReadUntil reads topic from its start on the broker at addr until done
// says the records read so far are enough, and returns them. It fails t
// if done has not said so within timeout (naming the keys that arrived).
func ReadUntil(t testing.TB, addr, topic string, timeout time.Duration, done func([]*kgo.Record) bool) []*kgo.Record {
	t.Helper()
	cl := consumer(t, addr, topic)
	defer cl.Close()
	return pollUntil(t, cl, topic, timeout, done)
}

// ReadExactly reads topic from its start on the broker at addr and returns
// its first n records. It fails t if they do not all arrive within timeout
// (naming the keys that did) or if another record follows them.
func ReadExactly(t testing.TB, addr, topic string, n int, timeout time.Duration) []*kgo.Record {
	t.Helper()
	cl := consumer(t, addr, topic)
	defer cl.Close()
	recs := pollUntil(t, cl, topic, timeout, func(recs []*kgo.Record) bool { return len(recs) >= n })
	more, cancel := context.WithTimeout(context.Background(), settle)
	defer cancel()
	recs = append(recs, cl.PollFetches(more).Records()...)
	if len(recs) > n {
		t.Fatalf("%s: %d records, %d more than the %d expected", topic, len(recs), len(recs)-n, n)
	}
	return recs
}

// consumer is a client reading topic on the broker at addr from its start.
func consumer(t testing.TB, addr, topic string) *kgo.Client {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.ConsumeTopics(topic), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	if err != nil {
		t.Fatal(err)
	}
	return cl
}

// pollUntil polls cl until done says the records it returned are enough,
// failing t if timeout passes first.
func pollUntil(t testing.TB, cl *kgo.Client, topic string, timeout time.Duration, done func([]*kgo.Record) bool) []*kgo.Record {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	var recs []*kgo.Record
	for !done(recs) {
		fs := cl.PollFetches(ctx)
		if ctx.Err() != nil {
			keys := make([]string, len(recs))
			for i, r := range recs {
				keys[i] = string(r.Key)
			}
			t.Fatalf("%s: %d records within %v, not enough; keys seen: %q", topic, len(recs), timeout, keys)
		}
		for _, e := range fs.Errors() {
			t.Logf("%s: fetch error: %v", topic, e.Err)
		}
		recs = append(recs, fs.Records()...)
	}
	return recs
}
