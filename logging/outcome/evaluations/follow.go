package evaluations

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
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
// (and created again) is followed anew: its old records are forgotten.
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
	var lastWarn time.Time
	for {
		fs := cl.PollFetches(ctx)
		if ctx.Err() != nil || fs.IsClientClosed() {
			return nil
		}
		recreated := false
		fs.EachError(func(topic string, p int32, err error) {
			// The topic was deleted (and perhaps created again): the
			// client never reads a new instance of it by itself.
			if errors.Is(err, kerr.UnknownTopicID) {
				recreated = true
			}
			// The client retries; one warning a minute says it is stuck.
			if time.Since(lastWarn) >= time.Minute {
				lastWarn = time.Now()
				log.Warn("evaluations: fetching the evaluator's results", "topic", topic, "partition", p, "err", err)
			}
		})
		fs.EachRecord(func(r *kgo.Record) {
			if err := t.Apply(r.Key, r.Value); err != nil {
				log.Warn("evaluations: a record of the evaluations topic left out", "topic", r.Topic, "partition", r.Partition,
					"offset", r.Offset, "err", err)
			}
		})
		if recreated {
			// Read the new topic from its start, and forget the old one's
			// records, as a follower started now would.
			log.Warn("evaluations: the topic was deleted, following it anew", "topic", opts.Topic)
			cl.PurgeTopicsFromClient(opts.Topic)
			cl.AddConsumeTopics(opts.Topic)
			t.reset()
		}
		t.Publish()
	}
}
