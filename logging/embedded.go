package logging

import (
	"fmt"
	"net"
	"strconv"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"
)

// The embedded broker's limits: it keeps at most EmbeddedRetentionBytes of
// each partition (older events are discarded, in segments of
// EmbeddedSegmentBytes), checked every EmbeddedRetentionCheck.
const (
	EmbeddedRetentionBytes = 256 << 20
	EmbeddedSegmentBytes   = 16 << 20
	EmbeddedRetentionCheck = 30 * time.Second
)

// Embedded is an in-process Kafka broker for development and tests
// (franz-go's kfake): a single broker on a loopback address that keeps
// every event in memory only (up to EmbeddedRetentionBytes per partition)
// and loses them all when it stops. It is not for production: there is no
// persistence, replication, TLS or authentication. Any Kafka client
// (kcat, franz-go, librdkafka) can produce to and consume from it.
type Embedded struct {
	cluster *kfake.Cluster
	addr    string
	stop    chan struct{}
	done    sync.WaitGroup
	once    sync.Once
}

// StartEmbedded starts a development broker listening on addr (host:port on
// a loopback address; port 0 picks a free port, see Addr) with topics
// created (the prediction log's, the outcome topic), one partition each,
// so a consumer sees records in the order they were produced. Producers
// may create further topics by producing to them.
func StartEmbedded(addr string, topics ...string) (*Embedded, error) {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return nil, fmt.Errorf("embedded Kafka broker address %q: %w", addr, err)
	}
	portNum, err := strconv.ParseUint(port, 10, 16)
	if err != nil {
		return nil, fmt.Errorf("embedded Kafka broker address %q: port %q is not a number from 0 to 65535", addr, port)
	}
	if ip := net.ParseIP(host); host != "localhost" && (ip == nil || !ip.IsLoopback()) {
		return nil, fmt.Errorf("embedded Kafka broker address %q: not a loopback address", addr)
	}
	c, err := kfake.NewCluster(
		kfake.Ports(int(portNum)), // one broker
		kfake.ListenFn(func(network, _ string) (net.Listener, error) { return net.Listen(network, addr) }),
		kfake.SeedTopics(1, topics...),
		kfake.AllowAutoTopicCreation(),
		kfake.DefaultNumPartitions(1),
		kfake.BrokerConfigs(map[string]string{
			"log.retention.bytes": strconv.Itoa(EmbeddedRetentionBytes),
			"log.segment.bytes":   strconv.Itoa(EmbeddedSegmentBytes),
		}),
	)
	if err != nil {
		return nil, fmt.Errorf("starting the embedded Kafka broker on %s: %w", addr, err)
	}
	e := &Embedded{cluster: c, addr: c.ListenAddrs()[0], stop: make(chan struct{})}
	e.done.Add(1)
	go e.retain()
	return e, nil
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

// Close stops the broker, dropping the events it holds and closing its
// clients' connections. Closing a nil or closed Embedded does nothing.
func (e *Embedded) Close() {
	if e == nil {
		return
	}
	e.once.Do(func() {
		close(e.stop)
		e.done.Wait()
		e.cluster.Close()
	})
}
