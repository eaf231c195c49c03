package evaluate

import (
	"context"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

// readAll is false until the member has polled every owned partition to
// its end (a consumer that has not fetched yet finds nothing, which is
// not having read everything), true then, and for a partition whose last
// records are a transactional producer's commit marker, true once the
// same position and end have held for shortSettle.
func TestReadAllOnlyOnceEveryOwnedPartitionIsReadToItsEnd(t *testing.T) {
	brokers := cluster(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	prod, err := kgo.NewClient(kgo.SeedBrokers(brokers), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	if err != nil {
		t.Fatal(err)
	}
	defer prod.Close()
	for range 10 {
		if err := prod.ProduceSync(ctx, &kgo.Record{Topic: predTopic, Partition: 0, Value: []byte("x")}).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	clock := time.Now()
	e := &evaluator{cfg: Config{PredictionTopic: predTopic, OutcomeTopic: outTopic, CommitInterval: 200 * time.Millisecond,
		Now: func() time.Time { return clock }}, aux: prod, assigned: map[int32]bool{0: true}, outAssigned: map[int32]bool{0: true},
		short: map[topicPartition]shortRead{}}
	cl, err := kgo.NewClient(kgo.SeedBrokers(brokers), kgo.ConsumerGroup("readall"), kgo.ConsumeTopics(predTopic, outTopic),
		kgo.FetchIsolationLevel(kgo.ReadCommitted()), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	if e.readAll(ctx, cl) {
		t.Fatal("read all before any poll, with 10 records to read")
	}
	poll := func(want int) {
		t.Helper()
		for n := 0; n < want; {
			fs := cl.PollFetches(ctx)
			if ctx.Err() != nil {
				t.Fatalf("polled %d of %d records", n, want)
			}
			n += fs.NumRecords()
		}
	}
	poll(10)
	if !e.readAll(ctx, cl) {
		t.Fatal("not read all after polling every record")
	}

	tx, err := kgo.NewClient(kgo.SeedBrokers(brokers), kgo.RecordPartitioner(kgo.ManualPartitioner()), kgo.TransactionalID("readall-tx"))
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Close()
	if err := tx.BeginTransaction(); err != nil {
		t.Fatal(err)
	}
	if err := tx.ProduceSync(ctx, &kgo.Record{Topic: outTopic, Partition: 0, Value: []byte("o")}).FirstErr(); err != nil {
		t.Fatal(err)
	}
	if err := tx.EndTransaction(ctx, kgo.TryCommit); err != nil {
		t.Fatal(err)
	}
	poll(1)
	if e.readAll(ctx, cl) {
		t.Fatal("read all at once with a commit marker after the last record")
	}
	clock = clock.Add(shortSettle - time.Millisecond)
	if e.readAll(ctx, cl) {
		t.Fatal("read all before shortSettle")
	}
	clock = clock.Add(time.Millisecond)
	if !e.readAll(ctx, cl) {
		t.Fatal("not read all once the position short of the end by the commit marker held for shortSettle")
	}
}
