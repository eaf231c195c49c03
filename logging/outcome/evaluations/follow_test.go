package evaluations

import (
	"context"
	"io"
	"log/slog"
	"net"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

const testTopic = "grove.evaluations"

// produceTxn produces rs to partition p of the test topic in one
// transaction of cl, committed or aborted.
func produceTxn(t *testing.T, cl *kgo.Client, p int32, commit bool, rs ...*kgo.Record) {
	t.Helper()
	ctx := context.Background()
	if err := cl.BeginTransaction(); err != nil {
		t.Fatal(err)
	}
	for _, r := range rs {
		c := *r
		c.Topic, c.Partition = testTopic, p
		if err := cl.ProduceSync(ctx, &c).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	if err := cl.EndTransaction(ctx, kgo.TransactionEndTry(commit)); err != nil {
		t.Fatal(err)
	}
}

// brokerAndProducer starts a kfake broker on loopback with the topic of
// one partition, and a transactional producer that picks partitions by
// hand; both end with the test.
func brokerAndProducer(t *testing.T) (*kfake.Cluster, *kgo.Client) {
	t.Helper()
	c, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(1, testTopic),
		kfake.ListenFn(func(network, _ string) (net.Listener, error) { return net.Listen(network, "127.0.0.1:0") }))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	prod, err := kgo.NewClient(kgo.SeedBrokers(c.ListenAddrs()...), kgo.TransactionalID("evaluator-test"),
		kgo.RecordPartitioner(kgo.ManualPartitioner()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(prod.Close)
	return c, prod
}

// TestFollowReadsCommittedRecordsOfEveryPartitionAddedOrNot: the follower
// reads the topic from its start, skips an aborted transaction's records,
// counts one it cannot read, takes a partition added to the topic while
// it runs, and stops with its context.
func TestFollowReadsCommittedRecordsOfEveryPartitionAddedOrNot(t *testing.T) {
	t.Parallel()
	c, prod := brokerAndProducer(t)

	j := joinStream(t, 12, 2000)
	want, _ := j.all.Snapshot()
	// Before the follower starts: partition 0's results, and an aborted
	// transaction with a counters record of a partition 7.
	produceTxn(t, prod, 0, true, records(t, j.parts[0], 0, j.end)...)
	aborted := records(t, j.parts[1], 7, j.end)
	produceTxn(t, prod, 0, false, aborted[len(aborted)-1])

	tb := NewTable()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		done <- Follow(ctx, tb, FollowOptions{Brokers: c.ListenAddrs(), Topic: testTopic,
			Logger: slog.New(slog.NewTextHandler(io.Discard, nil)),
			Kgo:    []kgo.Opt{kgo.MetadataMinAge(50 * time.Millisecond), kgo.MetadataMaxAge(200 * time.Millisecond)}})
	}()
	waitFor := func(what string, cond func() bool) {
		t.Helper()
		for deadline := time.Now().Add(15 * time.Second); !cond(); time.Sleep(20 * time.Millisecond) {
			if time.Now().After(deadline) {
				t.Fatalf("timed out waiting for %s (totals %+v, rejected %d)", what, tb.Totals(), tb.Rejected())
			}
		}
	}
	waitFor("partition 0's results", func() bool { return tb.Totals().Partitions == 1 })
	produceTxn(t, prod, 0, true, &kgo.Record{Key: []byte("not a key"), Value: []byte("x")})
	waitFor("the unreadable record", func() bool { return tb.Rejected() == 1 })

	// A partition added to the topic: the follower reads it too.
	req := kmsg.NewPtrCreatePartitionsRequest()
	rt := kmsg.NewCreatePartitionsRequestTopic()
	rt.Topic, rt.Count = testTopic, 2
	req.Topics = append(req.Topics, rt)
	req.TimeoutMillis = 5000
	resp, err := req.RequestWith(context.Background(), prod)
	if err != nil || len(resp.Topics) != 1 || resp.Topics[0].ErrorCode != 0 {
		t.Fatalf("adding a partition: %v %+v", err, resp)
	}
	prod.ForceMetadataRefresh()
	time.Sleep(300 * time.Millisecond)
	produceTxn(t, prod, 1, true, records(t, j.parts[1], 1, j.end)...)
	waitFor("both partitions' results", func() bool { return tb.Totals().Partitions == 2 })
	if got := tb.Totals().Counters; got != want.Counters {
		t.Errorf("totals %+v, want %+v (the aborted partition 7 left out)", got, want.Counters)
	}
	_, st := tb.Outcomes(contract, "v1", false, "")
	if w := seriesOf(t, want, v1).Stats.SinceValid; st == nil || st.SinceValid.Count != w.Count {
		t.Errorf("v1 figures %+v, want a count of %d", st, w.Count)
	}
	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Errorf("Follow returned %v once its context ended", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("Follow did not return once its context ended")
	}
}

// TestFollowResumesOnceTheTopicIsRecreated: a follower whose topic is
// deleted and created again reads the new topic from its start, and what
// it had read of the old one is no longer shown.
func TestFollowResumesOnceTheTopicIsRecreated(t *testing.T) {
	t.Parallel()
	c, prod := brokerAndProducer(t)

	j := joinStream(t, 12, 2000)
	produceTxn(t, prod, 0, true, records(t, j.parts[0], 0, j.end)...)

	tb := NewTable()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		done <- Follow(ctx, tb, FollowOptions{Brokers: c.ListenAddrs(), Topic: testTopic,
			Logger: slog.New(slog.NewTextHandler(io.Discard, nil)),
			Kgo:    []kgo.Opt{kgo.MetadataMinAge(50 * time.Millisecond), kgo.MetadataMaxAge(200 * time.Millisecond)}})
	}()
	defer func() {
		cancel()
		<-done
	}()
	waitFor := func(what string, cond func() bool) {
		t.Helper()
		for deadline := time.Now().Add(30 * time.Second); !cond(); time.Sleep(20 * time.Millisecond) {
			if time.Now().After(deadline) {
				t.Fatalf("timed out waiting for %s (totals %+v, rejected %d)", what, tb.Totals(), tb.Rejected())
			}
		}
	}
	waitFor("the old topic's results", func() bool { return tb.Totals().Partitions == 1 })
	old := tb.Totals().Counters

	adm := kadm.NewClient(prod)
	if rs, err := adm.DeleteTopics(context.Background(), testTopic); err != nil || rs.Error() != nil {
		t.Fatalf("deleting the topic: %v %v", err, rs.Error())
	}
	if _, err := adm.CreateTopic(context.Background(), 1, 1, nil, testTopic); err != nil {
		t.Fatalf("creating the topic again: %v", err)
	}
	prod.PurgeTopicsFromClient(testTopic)
	// The new topic holds partition 0's counters alone, as partition 1's.
	rs := records(t, j.parts[1], 1, j.end)
	produceTxn(t, prod, 0, true, rs[len(rs)-1])
	want, _ := j.parts[1].Snapshot()
	// The client tells the topic is a new one some seconds after.
	waitFor("the new topic's results", func() bool {
		tot := tb.Totals()
		return tot.Partitions == 1 && tot.Counters == want.Counters
	})
	if want.Counters == old {
		t.Fatal("the two partitions' counters are the same: the test shows nothing")
	}
	if _, st := tb.Outcomes(contract, "v1", false, ""); st != nil {
		t.Errorf("v1 still has the old topic's figures: %+v", st.SinceValid)
	}
}

// TestFollowKeepsItsFiguresThroughAnUnknownTopicIDOfTheSameTopic: fetches
// answered UNKNOWN_TOPIC_ID while the topic keeps the id its records were
// read from (a partition lagging just after the topic was created, a broker
// whose metadata catches up) leave the figures as they are, and the
// follower goes on reading once the fetches succeed again.
func TestFollowKeepsItsFiguresThroughAnUnknownTopicIDOfTheSameTopic(t *testing.T) {
	t.Parallel()
	c, prod := brokerAndProducer(t)

	j := joinStream(t, 12, 2000)
	produceTxn(t, prod, 0, true, records(t, j.parts[0], 0, j.end)...)

	tb := NewTable()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		// Fetches that wait little and are retried at once: the failed
		// fetches the test counts come quickly.
		done <- Follow(ctx, tb, FollowOptions{Brokers: c.ListenAddrs(), Topic: testTopic,
			Logger: slog.New(slog.NewTextHandler(io.Discard, nil)),
			Kgo: []kgo.Opt{kgo.MetadataMinAge(50 * time.Millisecond), kgo.MetadataMaxAge(200 * time.Millisecond),
				kgo.FetchMaxWait(50 * time.Millisecond),
				kgo.RetryBackoffFn(func(int) time.Duration { return 10 * time.Millisecond })}})
	}()
	defer func() {
		cancel()
		<-done
	}()
	waitFor := func(what string, cond func() bool) {
		t.Helper()
		for deadline := time.Now().Add(15 * time.Second); !cond(); time.Sleep(20 * time.Millisecond) {
			if time.Now().After(deadline) {
				t.Fatalf("timed out waiting for %s (totals %+v, rejected %d)", what, tb.Totals(), tb.Rejected())
			}
		}
	}
	waitFor("the topic's results", func() bool { return tb.Totals().Partitions == 1 })
	old := tb.Totals()

	unknown := c.Fault(kfake.Fault{Keys: []kmsg.Key{kmsg.Fetch}, Topic: testTopic, Err: kerr.UnknownTopicID, Count: -1})
	// The client hands the follower UNKNOWN_TOPIC_ID from the sixth answer
	// in a row on, and asks for the next fetch only once the follower has
	// polled the last: by the eighth answer, the follower is done with the
	// sixth. While every fetch fails, figures forgotten cannot come back.
	wctx, wcancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer wcancel()
	if err := unknown.Wait(wctx, 8); err != nil {
		t.Fatalf("waiting for the follower's fetches: %v (%d answered)", err, unknown.Hits())
	}
	if got := tb.Totals(); got != old {
		t.Fatalf("after UNKNOWN_TOPIC_ID of the same topic, totals %+v, want %+v as before", got, old)
	}
	unknown.Remove()

	// Partition 0's counters are now partition 1's: the follower reads on.
	rs := records(t, j.parts[1], 0, j.end)
	produceTxn(t, prod, 0, true, rs[len(rs)-1])
	want, _ := j.parts[1].Snapshot()
	waitFor("the record written after the fetches failed", func() bool {
		tot := tb.Totals()
		return tot.Partitions == 1 && tot.Counters == want.Counters
	})
	if _, st := tb.Outcomes(contract, "v1", false, ""); st == nil {
		t.Error("v1's figures were forgotten")
	}
}
