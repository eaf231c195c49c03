package logging

import (
	"context"
	"errors"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// waitStats waits until cond holds of the producer's stats, failing the
// test after timeout.
func waitStats(t *testing.T, p *Producer, timeout time.Duration, what string, cond func(Stats) bool) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for !cond(p.Stats()) {
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within %v: %+v", what, timeout, p.Stats())
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// A broker that comes back without its data (a new topic id) while
// events keep coming: the producer makes the client forget the old topic
// once, and every event, those that failed on the old id and those logged
// meanwhile, is delivered; none fails because the producer purged it.
func TestProducerDeliversEveryEventLoggedAcrossABrokerRestart(t *testing.T) {
	t.Parallel()
	emb := startEmbedded(t, "127.0.0.1:0")
	addr := emb.Addr()
	p := newProducer(t, kafkaConfig(addr))

	var logged atomic.Uint64
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for g := range 4 {
		wg.Go(func() {
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				p.Log(event(g<<20|i), nil)
				logged.Add(1)
				time.Sleep(100 * time.Microsecond) // a steady flow, not a flood
			}
		})
	}
	waitStats(t, p, 10*time.Second, "first deliveries", func(s Stats) bool { return s.Delivered >= 200 })
	emb.Close()
	startEmbedded(t, addr) // the same address; it knows nothing of the old broker
	before := p.Stats().Delivered
	waitStats(t, p, 30*time.Second, "deliveries to the new broker", func(s Stats) bool { return s.Delivered >= before+3000 })
	close(stop)
	wg.Wait()

	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := p.Flush(ctx); err != nil {
		t.Fatalf("flush: %v (%+v)", err, p.Stats())
	}
	if s := p.Stats(); s.Failed != 0 || s.Dropped != 0 || s.Delivered != logged.Load() || s.Buffered != 0 {
		t.Errorf("%d events logged: %+v", logged.Load(), s)
	}
}

// recreateTopic deletes topic from the broker at addr and creates it
// again, with a new topic id.
func recreateTopic(t *testing.T, addr, topic string) {
	t.Helper()
	cl := client(t, addr)
	del := kmsg.NewPtrDeleteTopicsRequest()
	dt := kmsg.NewDeleteTopicsRequestTopic()
	dt.Topic = kmsg.StringPtr(topic)
	del.Topics, del.TopicNames = append(del.Topics, dt), []string{topic}
	dresp, err := del.RequestWith(testCtx(t), cl)
	if err != nil {
		t.Fatal(err)
	}
	if err := kerr.ErrorForCode(dresp.Topics[0].ErrorCode); err != nil {
		t.Fatalf("deleting %s: %v", topic, err)
	}
	cr := kmsg.NewPtrCreateTopicsRequest()
	ct := kmsg.NewCreateTopicsRequestTopic()
	ct.Topic, ct.NumPartitions, ct.ReplicationFactor = topic, 1, 1
	cr.Topics = append(cr.Topics, ct)
	cresp, err := cr.RequestWith(testCtx(t), cl)
	if err != nil {
		t.Fatal(err)
	}
	if err := kerr.ErrorForCode(cresp.Topics[0].ErrorCode); err != nil {
		t.Fatalf("creating %s again: %v", topic, err)
	}
}

// Produce's records to a topic deleted and created again (a new topic id)
// are stored in the new topic, as are those of every later call: the
// client does not keep failing the topic with UNKNOWN_TOPIC_ID.
func TestProduceStoresRecordsInARecreatedTopic(t *testing.T) {
	t.Parallel()
	e := startEmbeddedWith(t, EmbeddedOptions{Topics: []string{"grove.predictions", "grove.outcomes"}})
	p := newProducer(t, kafkaConfig(e.Addr()))
	produce := func(v string) error {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		return p.Produce(ctx, []*kgo.Record{{Topic: "grove.outcomes", Value: []byte(v)}})[0]
	}
	if err := produce("before"); err != nil {
		t.Fatal(err)
	}
	recreateTopic(t, e.Addr(), "grove.outcomes")
	for _, v := range []string{"after-1", "after-2"} {
		if err := produce(v); err != nil {
			t.Fatalf("record %s: %v", v, err)
		}
	}
	if got := readAll(t, e.Addr(), "grove.outcomes"); !slices.Equal(got, []string{"after-1", "after-2"}) {
		t.Errorf("the recreated topic holds %q", got)
	}
}

// partitionedHook tells, on its channel, each record the client has put in
// a partition's buffer, where a purge of its topic fails it.
type partitionedHook chan *kgo.Record

func (h partitionedHook) OnProduceRecordPartitioned(r *kgo.Record, _ int32) { h <- r }

// purgedHook tells, on its channel, the error of each record the client
// hands back.
type purgedHook chan error

func (h purgedHook) OnProduceRecordUnbuffered(_ *kgo.Record, err error) { h <- err }

// A record of Produce that other calls' recoveries from a recreated topic
// purge again and again (each purge failing every record of the topic the
// client holds) is produced again each time without spending one of its
// attempts: once the broker takes it, it is stored, however many purges
// it went through.
func TestProduceStoresARecordPurgedByOtherCallsMoreTimesThanItsAttempts(t *testing.T) {
	e := startEmbeddedWith(t, EmbeddedOptions{Topics: []string{"grove.predictions", "grove.outcomes"}})
	partitioned, unbuffered := make(partitionedHook, 16), make(purgedHook, 16)
	p := newProducer(t, kafkaConfig(e.Addr()), WithKgoOptions(kgo.WithHooks(partitioned, unbuffered)))
	// The broker refuses the record with a retriable error until the fault
	// is removed: the client keeps it buffered, where a purge finds it.
	refuse := e.cluster.Fault(kfake.Fault{Keys: []kmsg.Key{kmsg.Produce}, Topic: "grove.outcomes",
		Err: kerr.NotEnoughReplicas, Count: -1})
	done := make(chan error, 1)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		done <- p.Produce(ctx, []*kgo.Record{{Topic: "grove.outcomes", Value: []byte("outcome")}})[0]
	}()
	// A deadline for each step's failure message, not a wait.
	within := func() <-chan time.Time { return time.After(10 * time.Second) }
	for i := range maxTopicAttempts + 1 {
		select {
		case <-partitioned:
		case err := <-done:
			t.Fatalf("Produce returned %v after %d purges", err, i)
		case <-within():
			t.Fatalf("the record was not buffered again after %d purges", i)
		}
		// What another call does when its records failed with UNKNOWN_TOPIC_ID.
		p.cl.PurgeTopicsFromProducing("grove.outcomes")
		select {
		case err := <-unbuffered:
			if err.Error() != errPurgedText {
				t.Fatalf("purge %d failed the record with %v", i+1, err)
			}
		case <-within():
			t.Fatalf("purge %d did not fail the record", i+1)
		}
	}
	refuse.Remove()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("after %d purges: %v", maxTopicAttempts+1, err)
		}
	case <-within():
		t.Fatal("Produce did not return once the broker took the record")
	}
	if got := readAll(t, e.Addr(), "grove.outcomes"); !slices.Equal(got, []string{"outcome"}) {
		t.Errorf("the topic holds %q", got)
	}
}

// topicAttempt: a record refused with UNKNOWN_TOPIC_ID (or failed while
// the prediction log recovers) spends an attempt and asks for a purge, up
// to maxTopicAttempts; one a purge failed is produced again as it is.
func TestTopicAttemptSpendsNoAttemptOnARecordAPurgeFailed(t *testing.T) {
	purged := errors.New(errPurgedText)
	for _, c := range []struct {
		err          error
		n, next      int
		again, purge bool
	}{
		{kerr.UnknownTopicID, 0, 1, true, true},
		{kerr.UnknownTopicID, maxTopicAttempts - 1, maxTopicAttempts, true, true},
		{kerr.UnknownTopicID, maxTopicAttempts, maxTopicAttempts + 1, false, true},
		{kerr.NotLeaderForPartition, 1, 2, true, true},
		{purged, 0, 0, true, false},
		{purged, maxTopicAttempts, maxTopicAttempts, true, false},
	} {
		next, again, purge := topicAttempt(c.err, c.n)
		if next != c.next || again != c.again || purge != c.purge {
			t.Errorf("topicAttempt(%v, %d) = %d, %v, %v; want %d, %v, %v", c.err, c.n, next, again, purge, c.next, c.again, c.purge)
		}
	}
}
