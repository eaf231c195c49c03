package logging

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/groveml/grove/conf"
)

// The embedded broker's limits: kept in memory only, it keeps at most
// EmbeddedRetentionBytes of each partition (older events are discarded,
// in segments of EmbeddedSegmentBytes); with a data directory, records
// are discarded by age alone. Retention is applied every
// EmbeddedRetentionCheck.
const (
	EmbeddedRetentionBytes = 256 << 20
	EmbeddedSegmentBytes   = 16 << 20
	EmbeddedRetentionCheck = 30 * time.Second
)

// EmbeddedDefaultRetention is how long the embedded broker keeps the
// records of a topic that is not compacted when EmbeddedOptions.Retention
// is 0 (kfake's default, Kafka's log.retention.ms).
const EmbeddedDefaultRetention = 7 * 24 * time.Hour

// Embedded is an in-process Kafka broker for development and tests
// (franz-go's kfake): a single broker on a loopback address. Without a
// data directory it keeps every event in memory only (up to
// EmbeddedRetentionBytes per partition) and loses them all when it stops;
// with one (EmbeddedOptions.DataDir) it keeps its topics, records,
// consumer group offsets and transactions there, and a broker started
// again on the same directory finds them. It is not for production: there
// is no replication, TLS or authentication. Any Kafka client (kcat,
// franz-go, librdkafka) can produce to and consume from it.
type Embedded struct {
	cluster *kfake.Cluster
	admin   *kgo.Client // the broker's own requests: config changes
	addr    string
	stop    chan struct{}
	done    sync.WaitGroup
	once    sync.Once

	partitions int // of the topics it creates

	retainMu  sync.Mutex
	retention time.Duration // the broker's log.retention.ms
}

// EmbeddedOptions configure the broker Start starts.
type EmbeddedOptions struct {
	// Addr is the host:port the broker listens on, on a loopback address;
	// port 0 picks a free port (see Embedded.Addr).
	Addr string
	// Topics are created at start unless they exist (the prediction log's,
	// the outcome topic); they keep their records Retention.
	Topics []string
	// CompactedTopics are created at start unless they exist, compacted
	// and never expired (cleanup.policy=compact, retention.ms=-1,
	// retention.bytes=-1); existing ones are set so.
	CompactedTopics []string
	// KeptTopics are created at start unless they exist, neither
	// compacted nor expired (cleanup.policy=delete, retention.ms=-1,
	// retention.bytes=-1: only a client deletes their records, with
	// DeleteRecords); existing ones are set so.
	KeptTopics []string
	// Partitions is the partition count of the topics the broker creates:
	// Topics, CompactedTopics, KeptTopics, and any a client creates by
	// producing to it or by a CreateTopics request without a count; from 1 to
	// conf.MaxEmbeddedPartitions, 0 meaning 1. A topic found in DataDir
	// keeps the count it was created with, and when Topics[0] (the
	// prediction log) is found there, the topics created with it take its
	// count, so that they stay co-partitioned with it.
	Partitions int
	// DataDir is the directory the broker keeps its data in (created if
	// missing); empty: memory only.
	DataDir string
	// Retention is how long the records of every topic but the compacted
	// and kept ones are kept (the broker's log.retention.ms), by their timestamps;
	// 0 is EmbeddedDefaultRetention. Memory only, a partition also keeps
	// no more than EmbeddedRetentionBytes.
	Retention time.Duration
	// Logger receives the broker's warnings; nil discards them.
	Logger *slog.Logger
}

// StartEmbedded starts a development broker listening on addr (host:port on
// a loopback address; port 0 picks a free port, see Addr) that keeps its
// records in memory only, with topics created (the prediction log's, the
// outcome topic), one partition each, so a consumer sees records in the
// order they were produced. Producers may create further topics, also of
// one partition, by producing to them. It is EmbeddedOptions{Addr: addr,
// Topics: topics}.Start().
func StartEmbedded(addr string, topics ...string) (*Embedded, error) {
	return EmbeddedOptions{Addr: addr, Topics: topics}.Start()
}

// Start starts the broker o describes and creates its topics. It fails on
// an address that is not host:port on a loopback address, a partition
// count out of range, a negative retention, or a data directory kfake
// cannot use.
func (o EmbeddedOptions) Start() (*Embedded, error) {
	host, port, err := net.SplitHostPort(o.Addr)
	if err != nil {
		return nil, fmt.Errorf("embedded Kafka broker address %q: %w", o.Addr, err)
	}
	portNum, err := strconv.ParseUint(port, 10, 16)
	if err != nil {
		return nil, fmt.Errorf("embedded Kafka broker address %q: port %q is not a number from 0 to 65535", o.Addr, port)
	}
	if ip := net.ParseIP(host); host != "localhost" && (ip == nil || !ip.IsLoopback()) {
		return nil, fmt.Errorf("embedded Kafka broker address %q: not a loopback address", o.Addr)
	}
	parts := o.Partitions
	switch {
	case parts == 0:
		parts = 1
	case parts < 0 || parts > conf.MaxEmbeddedPartitions:
		return nil, fmt.Errorf("embedded Kafka broker: %d partitions, want 1 to %d", parts, conf.MaxEmbeddedPartitions)
	}
	retention := o.Retention
	switch {
	case retention == 0:
		retention = EmbeddedDefaultRetention
	case retention < time.Millisecond:
		return nil, fmt.Errorf("embedded Kafka broker: retention %v is not at least 1ms", retention)
	}
	log := o.Logger
	if log == nil {
		log = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	brokerConfigs := map[string]string{
		"log.segment.bytes": strconv.Itoa(EmbeddedSegmentBytes),
		"log.retention.ms":  strconv.FormatInt(retention.Milliseconds(), 10),
	}
	if o.DataDir == "" {
		brokerConfigs["log.retention.bytes"] = strconv.Itoa(EmbeddedRetentionBytes)
	} else {
		// A data directory written with a byte limit keeps it otherwise
		// (kfake persists the broker's configs); "" resets it.
		brokerConfigs["log.retention.bytes"] = ""
	}
	opts := []kfake.Opt{
		kfake.Ports(int(portNum)), // one broker
		kfake.ListenFn(func(network, _ string) (net.Listener, error) { return net.Listen(network, o.Addr) }),
		kfake.AllowAutoTopicCreation(),
		kfake.DefaultNumPartitions(parts),
		kfake.BrokerConfigs(brokerConfigs),
	}
	if o.DataDir != "" {
		opts = append(opts, kfake.DataDir(o.DataDir))
	}
	c, err := kfake.NewCluster(opts...)
	if err != nil {
		return nil, fmt.Errorf("starting the embedded Kafka broker on %s: %w", o.Addr, err)
	}
	e := &Embedded{cluster: c, addr: c.ListenAddrs()[0], stop: make(chan struct{}), partitions: parts, retention: retention}
	if e.admin, err = kgo.NewClient(kgo.SeedBrokers(e.addr)); err != nil {
		c.Close()
		return nil, fmt.Errorf("embedded Kafka broker: admin client: %w", err)
	}
	if err := e.createTopics(o.Topics, o.CompactedTopics, o.KeptTopics, parts, log); err != nil {
		e.admin.Close()
		c.Close()
		return nil, err
	}
	e.done.Add(1)
	go e.retain()
	return e, nil
}

// compactedConfigs are the configs of a compacted topic that never
// expires, keptConfigs those of a topic neither compacted nor expired.
var (
	compactedConfigs = map[string]string{"cleanup.policy": "compact", "retention.ms": "-1", "retention.bytes": "-1"}
	keptConfigs      = map[string]string{"cleanup.policy": "delete", "retention.ms": "-1", "retention.bytes": "-1"}
)

// createTopics creates the topics, compacted topics and kept topics that
// do not exist with parts partitions, or with those of topics[0] if it
// exists (a topic in topics and another list is of the other), sets the
// existing compacted and kept ones so, and warns of an existing topic
// whose partition count is not parts.
func (e *Embedded) createTopics(topics, compacted, kept []string, parts int, log *slog.Logger) error {
	if len(topics) > 0 {
		if n := len(e.cluster.PartitionInfos(topics[0])); n > 0 && n != parts {
			log.Warn("embedded Kafka broker: the topics of the data directory keep their partition count, and new ones take it",
				"topic", topics[0], "partitions", n, "configured", parts)
			parts = n
		}
	}
	for _, t := range topics {
		if !slices.Contains(compacted, t) && !slices.Contains(kept, t) {
			if err := e.createTopic(t, parts, nil, log); err != nil {
				return err
			}
		}
	}
	for _, t := range compacted {
		if err := e.createTopic(t, parts, compactedConfigs, log); err != nil {
			return err
		}
	}
	for _, t := range kept {
		if err := e.createTopic(t, parts, keptConfigs, log); err != nil {
			return err
		}
	}
	return nil
}

// createTopic creates topic t with parts partitions and configs, or, if
// it exists, sets configs on it.
func (e *Embedded) createTopic(t string, parts int, configs map[string]string, log *slog.Logger) error {
	if e.cluster.TopicInfo(t) == nil {
		if err := e.cluster.CreateTopic(t, int32(parts), configs); err != nil {
			return fmt.Errorf("embedded Kafka broker: creating topic %s: %w", t, err)
		}
		return nil
	}
	if n := len(e.cluster.PartitionInfos(t)); n != parts {
		log.Warn("embedded Kafka broker: a topic of the data directory keeps its partition count", "topic", t,
			"partitions", n, "wanted", parts)
	}
	if len(configs) > 0 {
		if err := e.alterConfigs(kmsg.ConfigResourceTypeTopic, t, configs); err != nil {
			return fmt.Errorf("embedded Kafka broker: setting the configs of topic %s: %w", t, err)
		}
	}
	return nil
}

// alterConfigs sets configs of a resource (a topic, or the broker with
// name "") through the broker's own client.
func (e *Embedded) alterConfigs(typ kmsg.ConfigResourceType, name string, configs map[string]string) error {
	req := kmsg.NewPtrIncrementalAlterConfigsRequest()
	r := kmsg.NewIncrementalAlterConfigsRequestResource()
	r.ResourceType, r.ResourceName = typ, name
	for k, v := range configs {
		rc := kmsg.NewIncrementalAlterConfigsRequestResourceConfig()
		rc.Name, rc.Op, rc.Value = k, kmsg.IncrementalAlterConfigOpSet, kmsg.StringPtr(v)
		r.Configs = append(r.Configs, rc)
	}
	req.Resources = append(req.Resources, r)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	resp, err := req.RequestWith(ctx, e.admin)
	if err != nil {
		return err
	}
	for _, rr := range resp.Resources {
		if err := kerr.ErrorForCode(rr.ErrorCode); err != nil {
			return err
		}
	}
	return nil
}

// RetainAtLeast raises to d, if it is longer, how long the broker keeps
// the records of every topic but the compacted and kept ones
// (log.retention.ms):
// the evaluator needs the longest outcome window plus a day of the
// prediction log. It never shortens it. A broker started again keeps
// EmbeddedOptions.Retention until told again.
func (e *Embedded) RetainAtLeast(d time.Duration) error {
	if e == nil {
		return errors.New("no embedded Kafka broker")
	}
	e.retainMu.Lock()
	defer e.retainMu.Unlock()
	if d <= e.retention {
		return nil
	}
	if err := e.alterConfigs(kmsg.ConfigResourceTypeBroker, "", map[string]string{
		"log.retention.ms": strconv.FormatInt(d.Milliseconds(), 10),
	}); err != nil {
		return fmt.Errorf("embedded Kafka broker: raising its retention to %v: %w", d, err)
	}
	e.retention = d
	return nil
}

// Retention is how long the broker keeps the records of every topic but
// the compacted and kept ones (see RetainAtLeast).
func (e *Embedded) Retention() time.Duration {
	e.retainMu.Lock()
	defer e.retainMu.Unlock()
	return e.retention
}

// retain applies the retention limits until Close.
func (e *Embedded) retain() {
	defer e.done.Done()
	t := time.NewTicker(EmbeddedRetentionCheck)
	defer t.Stop()
	for {
		select {
		case <-e.stop:
			return
		case <-t.C:
			e.cluster.ApplyRetention()
		}
	}
}

// Addr is the host:port the broker listens on, with the real port when it
// was started on port 0; clients use it as their seed broker.
func (e *Embedded) Addr() string { return e.addr }

// Close stops the broker, closing its clients' connections: kept in
// memory only, the events it holds are dropped; with a data directory,
// its state is written there. Closing a nil or closed Embedded does
// nothing.
func (e *Embedded) Close() {
	if e == nil {
		return
	}
	e.once.Do(func() {
		close(e.stop)
		e.done.Wait()
		e.admin.Close()
		e.cluster.Close()
	})
}
