package evaluations

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// FollowOptions configure Follow.
type FollowOptions struct {
	// Brokers are the seed brokers; Topic the evaluations topic.
	Brokers []string
	Topic   string
	// Kgo are further franz-go client options, after Follow's own (the
	// security options of kafka.tls and kafka.sasl; tests' tuning).
	Kgo []kgo.Opt
	// Logger receives the records that cannot be read and the fetch
	// errors; nil means slog.Default().
	Logger *slog.Logger
}

// followMetadataAge is how often the follower asks for the topic's
// metadata: a partition added to the topic is read from within it (a
// topic not there yet is asked for every second).
const followMetadataAge = 30 * time.Second

// Follow reads the evaluations topic into t until ctx is done: every
// partition from its start, and each partition added later, with no
// consumer group (every grove serve reads it all) and isolation level
// read_committed (the evaluator writes in transactions: an aborted
// result is never seen). It applies each record (Table.Apply), logging
// and counting (Table.Rejected) those it cannot read, and publishes the
// figures after each fetch. A missing topic is waited for. It returns nil
// once ctx is done, or the error of making the client. A topic deleted
// and created again (the brokers give it an id other than that of the
// topic its records were read from) is followed anew: its old records are
// forgotten. A fetch refused with UNKNOWN_TOPIC_ID while the topic keeps
// its id (a partition lagging just after the topic was created, a broker
// whose metadata catches up), or while no topic of its name exists (one
// deleted and not created again yet), leaves the table as it is, and is
// retried.
func Follow(ctx context.Context, t *Table, opts FollowOptions) error {
	log := opts.Logger
	if log == nil {
		log = slog.Default()
	}
	if opts.Topic == "" || len(opts.Brokers) == 0 {
		return errors.New("evaluations: no topic or no brokers to follow")
	}
	cl, err := kgo.NewClient(append([]kgo.Opt{
		kgo.SeedBrokers(opts.Brokers...),
		kgo.ConsumeTopics(opts.Topic),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.FetchIsolationLevel(kgo.ReadCommitted()),
		kgo.MetadataMinAge(time.Second),
		kgo.MetadataMaxAge(followMetadataAge),
	}, opts.Kgo...)...)
	if err != nil {
		return fmt.Errorf("evaluations: following %s: %w", opts.Topic, err)
	}
	defer cl.Close()
	var lastWarn, lastIDWarn time.Time
	var id [16]byte // the topic id the table's records were read from; zero before any
	for {
		fs := cl.PollFetches(ctx)
		if ctx.Err() != nil || fs.IsClientClosed() {
			return nil
		}
		unknownID := false
		fs.EachError(func(topic string, p int32, err error) {
			// The topic was perhaps deleted and created again (the client
			// never reads a new instance of it by itself), or one broker
			// does not know its id yet: checked below.
			if errors.Is(err, kerr.UnknownTopicID) {
				unknownID = true
			}
			// The client retries; one warning a minute says it is stuck.
			if time.Since(lastWarn) >= time.Minute {
				lastWarn = time.Now()
				log.Warn("evaluations: fetching the evaluator's results", "topic", topic, "partition", p, "err", err)
			}
		})
		fs.EachTopic(func(ft kgo.FetchTopic) {
			if ft.TopicID == ([16]byte{}) {
				return
			}
			for _, p := range ft.Partitions {
				if len(p.Records) > 0 {
					id = ft.TopicID
				}
			}
		})
		fs.EachRecord(func(r *kgo.Record) {
			if err := t.Apply(r.Key, r.Value); err != nil {
				log.Warn("evaluations: a record of the evaluations topic left out", "topic", r.Topic, "partition", r.Partition,
					"offset", r.Offset, "err", err)
			}
		})
		if unknownID {
			cur, err := topicID(ctx, cl, opts.Topic)
			switch {
			case err != nil:
				if time.Since(lastIDWarn) >= time.Minute {
					lastIDWarn = time.Now()
					log.Warn("evaluations: checking whether the topic was created again", "topic", opts.Topic, "err", err)
				}
			case cur != [16]byte{} && cur != id:
				// Read the new topic from its start, and forget the old
				// one's records, as a follower started now would.
				log.Warn("evaluations: the topic was deleted and created again, following it anew", "topic", opts.Topic)
				cl.PurgeTopicsFromClient(opts.Topic)
				cl.AddConsumeTopics(opts.Topic)
				t.reset()
				id = [16]byte{}
			}
		}
		t.Publish()
	}
}

// followIDWait bounds how long the follower waits for the brokers to tell
// the topic's id.
const followIDWait = 10 * time.Second

// topicID asks the brokers for topic's id (an answer at most a second
// old): zero when they know no topic of that name.
func topicID(ctx context.Context, cl *kgo.Client, topic string) ([16]byte, error) {
	ctx, cancel := context.WithTimeout(ctx, followIDWait)
	defer cancel()
	req := kmsg.NewPtrMetadataRequest()
	rt := kmsg.NewMetadataRequestTopic()
	rt.Topic = kmsg.StringPtr(topic)
	req.Topics = append(req.Topics, rt)
	resp, err := cl.RequestCachedMetadata(ctx, req, time.Second)
	if err != nil {
		return [16]byte{}, fmt.Errorf("asking the brokers for the id of topic %s: %w", topic, err)
	}
	for _, rt := range resp.Topics {
		if rt.Topic != nil && *rt.Topic == topic && rt.ErrorCode == 0 {
			return rt.TopicID, nil
		}
	}
	return [16]byte{}, nil
}
