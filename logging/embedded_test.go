package logging

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/groveml/grove/conf"
	"github.com/groveml/grove/grovepb"
	"github.com/groveml/grove/logging/kafkatest"
)

func startEmbeddedWith(t *testing.T, o EmbeddedOptions) *Embedded {
	t.Helper()
	if o.Addr == "" {
		o.Addr = "127.0.0.1:0"
	}
	e, err := o.Start()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(e.Close)
	return e
}

func client(t *testing.T, addr string, opts ...kgo.Opt) *kgo.Client {
	t.Helper()
	cl, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(addr)}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	return cl
}

func testCtx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// partitionCounts asks the broker at addr for the partition count of each topic.
func partitionCounts(t *testing.T, addr string, topics ...string) map[string]int {
	t.Helper()
	req := kmsg.NewPtrMetadataRequest()
	for _, tp := range topics {
		rt := kmsg.NewMetadataRequestTopic()
		rt.Topic = kmsg.StringPtr(tp)
		req.Topics = append(req.Topics, rt)
	}
	resp, err := req.RequestWith(testCtx(t), client(t, addr))
	if err != nil {
		t.Fatal(err)
	}
	got := make(map[string]int)
	for _, rt := range resp.Topics {
		if err := kerr.ErrorForCode(rt.ErrorCode); err != nil {
			t.Fatalf("metadata of %v: %v", rt.Topic, err)
		}
		got[*rt.Topic] = len(rt.Partitions)
	}
	return got
}

// describeConfigs returns the named configs of a resource of the broker
// at addr (a topic, or the broker with name "0").
func describeConfigs(t *testing.T, addr string, typ kmsg.ConfigResourceType, name string, keys ...string) map[string]string {
	t.Helper()
	req := kmsg.NewPtrDescribeConfigsRequest()
	r := kmsg.NewDescribeConfigsRequestResource()
	r.ResourceType, r.ResourceName, r.ConfigNames = typ, name, keys
	req.Resources = append(req.Resources, r)
	resp, err := req.RequestWith(testCtx(t), client(t, addr))
	if err != nil {
		t.Fatal(err)
	}
	got := make(map[string]string)
	for _, rr := range resp.Resources {
		if err := kerr.ErrorForCode(rr.ErrorCode); err != nil {
			t.Fatalf("configs of %s: %v", name, err)
		}
		for _, c := range rr.Configs {
			if c.Value != nil {
				got[c.Name] = *c.Value
			}
		}
	}
	return got
}

// produceAt produces one record per value to topic, each in its own
// batch, with timestamp at.
func produceAt(t *testing.T, addr, topic string, at time.Time, values ...string) {
	t.Helper()
	cl := client(t, addr, kgo.AllowAutoTopicCreation())
	for _, v := range values {
		r := &kgo.Record{Topic: topic, Key: []byte(v), Value: []byte(v), Timestamp: at}
		if err := cl.ProduceSync(testCtx(t), r).FirstErr(); err != nil {
			t.Fatalf("producing %q to %s: %v", v, topic, err)
		}
	}
}

// readAll returns the values of every record of topic, from the start of
// each partition to its end.
func readAll(t *testing.T, addr, topic string) []string {
	t.Helper()
	cl := client(t, addr)
	req := kmsg.NewPtrListOffsetsRequest()
	rt := kmsg.NewListOffsetsRequestTopic()
	rt.Topic = topic
	for p := range partitionCounts(t, addr, topic)[topic] {
		rp := kmsg.NewListOffsetsRequestTopicPartition()
		rp.Partition, rp.Timestamp = int32(p), -1 // the end
		rt.Partitions = append(rt.Partitions, rp)
	}
	req.Topics = append(req.Topics, rt)
	resp, err := req.RequestWith(testCtx(t), cl)
	if err != nil {
		t.Fatal(err)
	}
	parts := make(map[int32]kgo.Offset)
	ends := make(map[int32]int64)
	for _, rp := range resp.Topics[0].Partitions {
		if err := kerr.ErrorForCode(rp.ErrorCode); err != nil {
			t.Fatal(err)
		}
		if rp.Offset > 0 {
			parts[rp.Partition], ends[rp.Partition] = kgo.NewOffset().AtStart(), rp.Offset
		}
	}
	if len(parts) == 0 {
		return nil
	}
	cons := client(t, addr, kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{topic: parts}))
	var values []string
	next := make(map[int32]int64)
	ctx := testCtx(t)
	for {
		done := true
		for p, end := range ends {
			if next[p] < end {
				done = false
			}
		}
		if done {
			return values
		}
		fs := cons.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatalf("reading %s: got %v by %v, want the ends %v", topic, values, next, ends)
		}
		for _, e := range fs.Errors() {
			t.Fatalf("reading %s: %v", topic, e.Err)
		}
		fs.EachRecord(func(r *kgo.Record) {
			values = append(values, string(r.Value))
			next[r.Partition] = r.Offset + 1
		})
	}
}

func sameSet(a, b []string) bool {
	if len(a) != len(b) {
		return false
	}
	seen := make(map[string]int)
	for _, v := range a {
		seen[v]++
	}
	for _, v := range b {
		seen[v]--
	}
	for _, n := range seen {
		if n != 0 {
			return false
		}
	}
	return true
}

func TestEmbeddedCreatesEveryTopicWithTheConfiguredPartitionCount(t *testing.T) {
	t.Parallel()
	e := startEmbeddedWith(t, EmbeddedOptions{Topics: []string{"log", "outcomes"}, CompactedTopics: []string{"evals"}, Partitions: 3})
	produceAt(t, e.Addr(), "auto.created", time.Now(), "x")
	got := partitionCounts(t, e.Addr(), "log", "outcomes", "evals", "auto.created")
	want := map[string]int{"log": 3, "outcomes": 3, "evals": 3, "auto.created": 3}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("partitions %v, want %v", got, want)
	}
	// StartEmbedded keeps one partition per topic, so records stay in order.
	one, err := StartEmbedded("127.0.0.1:0", "log")
	if err != nil {
		t.Fatal(err)
	}
	defer one.Close()
	produceAt(t, one.Addr(), "auto.created", time.Now(), "x")
	if got := partitionCounts(t, one.Addr(), "log", "auto.created"); got["log"] != 1 || got["auto.created"] != 1 {
		t.Errorf("StartEmbedded: partitions %v, want 1 each", got)
	}
}

func TestEmbeddedOptionsRefuseBadPartitionCountsAndRetention(t *testing.T) {
	for _, tc := range []struct {
		o    EmbeddedOptions
		want string
	}{
		{EmbeddedOptions{Addr: "127.0.0.1:0", Partitions: conf.MaxEmbeddedPartitions + 1}, "65 partitions, want 1 to 64"},
		{EmbeddedOptions{Addr: "127.0.0.1:0", Partitions: -1}, "-1 partitions"},
		{EmbeddedOptions{Addr: "127.0.0.1:0", Retention: -time.Hour}, "retention -1h0m0s is not at least 1ms"},
		{EmbeddedOptions{Addr: "127.0.0.1:0", Retention: time.Microsecond}, "is not at least 1ms"},
		{EmbeddedOptions{Addr: "10.0.0.1:0"}, "not a loopback address"},
	} {
		e, err := tc.o.Start()
		if err == nil {
			e.Close()
			t.Errorf("%+v started", tc.o)
		} else if !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%+v: %v, want %q", tc.o, err, tc.want)
		}
	}
}

func TestEmbeddedDataDirKeepsTopicsRecordsAndOffsetsAcrossARestart(t *testing.T) {
	t.Parallel()
	dir := filepath.Join(t.TempDir(), "kafka")
	o := EmbeddedOptions{Topics: []string{"log"}, CompactedTopics: []string{"evals"}, Partitions: 2, DataDir: dir}
	e := startEmbeddedWith(t, o)
	addr := e.Addr()
	var want []string
	for i := range 20 {
		want = append(want, fmt.Sprintf("r%d", i))
	}
	produceAt(t, addr, "log", time.Now(), want...)
	produceAt(t, addr, "evals", time.Now(), "e1", "e2")
	// A consumer group commits the offsets of what it read.
	group := client(t, addr, kgo.ConsumerGroup("g"), kgo.ConsumeTopics("log"), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.DisableAutoCommit())
	var read int
	for ctx := testCtx(t); read < len(want); {
		fs := group.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatalf("the group read %d records of %d", read, len(want))
		}
		read += len(fs.Records())
	}
	if err := group.CommitUncommittedOffsets(testCtx(t)); err != nil {
		t.Fatal(err)
	}
	group.Close()
	e.Close()
	if _, err := os.Stat(filepath.Join(dir, "meta.json")); err != nil {
		t.Fatalf("the data directory has no broker state: %v", err)
	}

	// Started again on the same address and directory, asking for more
	// partitions and a new compacted topic: the topics are found, not
	// created again, and the new one takes the log's count.
	o.Addr, o.Partitions, o.CompactedTopics = addr, 4, []string{"evals", "changelog"}
	e2 := startEmbeddedWith(t, o)
	if got := partitionCounts(t, e2.Addr(), "log", "evals", "changelog"); got["log"] != 2 || got["evals"] != 2 || got["changelog"] != 2 {
		t.Errorf("after the restart: partitions %v, want those of the first start's log, 2 each", got)
	}
	if got := readAll(t, e2.Addr(), "log"); !sameSet(got, want) {
		t.Errorf("after the restart the log holds %v, want %v", got, want)
	}
	if got := readAll(t, e2.Addr(), "evals"); !sameSet(got, []string{"e1", "e2"}) {
		t.Errorf("after the restart the compacted topic holds %v", got)
	}
	if got := describeConfigs(t, e2.Addr(), kmsg.ConfigResourceTypeTopic, "evals", "cleanup.policy", "retention.ms"); got["cleanup.policy"] != "compact" || got["retention.ms"] != "-1" {
		t.Errorf("after the restart the compacted topic's configs are %v", got)
	}
	// The group's committed offsets survived: it resumes at the end.
	adm := client(t, e2.Addr())
	req := kmsg.NewPtrOffsetFetchRequest()
	req.Group = "g"
	resp, err := req.RequestWith(testCtx(t), adm)
	if err != nil {
		t.Fatal(err)
	}
	var committed int64
	for _, rt := range resp.Topics {
		for _, rp := range rt.Partitions {
			committed += rp.Offset
		}
	}
	if committed != int64(len(want)) {
		t.Errorf("after the restart the group's committed offsets sum to %d, want %d", committed, len(want))
	}
	// New records go on from where the log ended.
	produceAt(t, e2.Addr(), "log", time.Now(), "after")
	if got := readAll(t, e2.Addr(), "log"); !sameSet(got, append(append([]string(nil), want...), "after")) {
		t.Errorf("the log holds %v", got)
	}
}

func TestEmbeddedRetentionExpiresOldRecordsButNeverThoseOfCompactedOrKeptTopics(t *testing.T) {
	t.Parallel()
	for _, dataDir := range []string{"", filepath.Join(t.TempDir(), "kafka")} {
		t.Run(fmt.Sprintf("data dir %q", dataDir), func(t *testing.T) {
			e := startEmbeddedWith(t, EmbeddedOptions{Topics: []string{"log"}, CompactedTopics: []string{"evals"}, KeptTopics: []string{"changelog"},
				Partitions: 1, DataDir: dataDir, Retention: time.Hour})
			old := time.Now().Add(-48 * time.Hour)
			produceAt(t, e.Addr(), "log", old, "old1", "old2")
			produceAt(t, e.Addr(), "log", time.Now(), "new")
			for _, topic := range []string{"evals", "changelog"} {
				produceAt(t, e.Addr(), topic, old, topic+"-old1", topic+"-old2")
				produceAt(t, e.Addr(), topic, time.Now(), topic+"-new")
			}
			e.cluster.ApplyRetention()
			if got := readAll(t, e.Addr(), "log"); !sameSet(got, []string{"new"}) {
				t.Errorf("after retention the log holds %v, want only the record younger than an hour", got)
			}
			for _, topic := range []string{"evals", "changelog"} {
				if got := readAll(t, e.Addr(), topic); !sameSet(got, []string{topic + "-old1", topic + "-old2", topic + "-new"}) {
					t.Errorf("after retention %s holds %v, want every record", topic, got)
				}
			}
			c := describeConfigs(t, e.Addr(), kmsg.ConfigResourceTypeTopic, "changelog", "cleanup.policy", "retention.ms", "retention.bytes")
			if c["cleanup.policy"] != "delete" || c["retention.ms"] != "-1" || c["retention.bytes"] != "-1" {
				t.Errorf("kept topic configs %v, want cleanup.policy=delete and never expiring", c)
			}
		})
	}
}

func TestEmbeddedRetainAtLeastRaisesTheRetentionAndNeverLowersIt(t *testing.T) {
	e := startEmbeddedWith(t, EmbeddedOptions{Topics: []string{"log"}, Retention: time.Hour})
	retentionMs := func() string {
		return describeConfigs(t, e.Addr(), kmsg.ConfigResourceTypeBroker, "0", "log.retention.ms")["log.retention.ms"]
	}
	if got := retentionMs(); got != "3600000" || e.Retention() != time.Hour {
		t.Fatalf("log.retention.ms %s, Retention %v; want an hour", got, e.Retention())
	}
	produceAt(t, e.Addr(), "log", time.Now().Add(-2*time.Hour), "two hours old")
	if err := e.RetainAtLeast(3 * time.Hour); err != nil {
		t.Fatal(err)
	}
	if err := e.RetainAtLeast(time.Minute); err != nil { // shorter: ignored
		t.Fatal(err)
	}
	if got := retentionMs(); got != "10800000" || e.Retention() != 3*time.Hour {
		t.Errorf("log.retention.ms %s, Retention %v; want 3h", got, e.Retention())
	}
	e.cluster.ApplyRetention()
	if got := readAll(t, e.Addr(), "log"); !sameSet(got, []string{"two hours old"}) {
		t.Errorf("after retention the log holds %v, want the record of two hours ago", got)
	}
	var none *Embedded
	if err := none.RetainAtLeast(time.Hour); err == nil {
		t.Error("a nil broker accepted a retention")
	}
}

func TestProducerWithEvaluatorKeepsTheEmbeddedBrokersDataInTheCacheDir(t *testing.T) {
	cache := t.TempDir()
	cfg := conf.DefaultServer()
	cfg.Kafka.Embedded, cfg.Kafka.EmbeddedAddr, cfg.Kafka.EmbeddedPartitions, cfg.Kafka.Linger = true, "127.0.0.1:0", 2, time.Millisecond
	cfg.Outcomes.Evaluate = true
	start := func() *Producer {
		p, err := New(cfg.Kafka, WithLogger(quiet), WithInstanceID("test/1"), WithTopics(cfg.Outcomes.Topic), WithEvaluator(cache, cfg.Outcomes))
		if err != nil {
			t.Fatal(err)
		}
		return p
	}
	p := start()
	addr := p.Stats().Brokers[0]
	changelog := cfg.Outcomes.Group + "-changelog"
	got := partitionCounts(t, addr, cfg.Kafka.Topic, cfg.Outcomes.Topic, cfg.Outcomes.EvaluationsTopic, changelog)
	if len(got) != 4 || got[cfg.Kafka.Topic] != 2 || got[cfg.Outcomes.Topic] != 2 || got[cfg.Outcomes.EvaluationsTopic] != 2 || got[changelog] != 2 {
		t.Errorf("partitions %v, want 2 for each of the four topics", got)
	}
	for topic, policy := range map[string]string{cfg.Outcomes.EvaluationsTopic: "compact", changelog: "delete"} {
		c := describeConfigs(t, addr, kmsg.ConfigResourceTypeTopic, topic, "cleanup.policy", "retention.ms", "retention.bytes")
		if c["cleanup.policy"] != policy || c["retention.ms"] != "-1" || c["retention.bytes"] != "-1" {
			t.Errorf("%s configs %v, want cleanup.policy=%s and never expiring", topic, c, policy)
		}
	}
	b := describeConfigs(t, addr, kmsg.ConfigResourceTypeBroker, "0", "log.retention.ms", "log.retention.bytes")
	if b["log.retention.ms"] != strconv.FormatInt(EmbeddedEvaluateRetention.Milliseconds(), 10) || (b["log.retention.bytes"] != "" && b["log.retention.bytes"] != "-1") {
		t.Errorf("broker retention %v, want %v and no byte limit", b, EmbeddedEvaluateRetention)
	}
	if err := p.RetainEmbedded(30 * 24 * time.Hour); err != nil {
		t.Fatal(err)
	}
	if b := describeConfigs(t, addr, kmsg.ConfigResourceTypeBroker, "0", "log.retention.ms"); b["log.retention.ms"] != "2592000000" {
		t.Errorf("after RetainEmbedded(720h) log.retention.ms is %v", b)
	}
	p.Log(&grovepb.PredictionEvent{RequestId: "before-restart", ModelPath: "m/"}, []byte("k"))
	ctx := testCtx(t)
	if err := p.Close(ctx); err != nil || p.Stats().Delivered != 1 {
		t.Fatalf("close: %v, %+v", err, p.Stats())
	}
	if _, err := os.Stat(filepath.Join(cache, "kafka", "meta.json")); err != nil {
		t.Fatalf("no broker state under the cache dir: %v", err)
	}

	cfg.Kafka.EmbeddedAddr = addr
	p2 := start()
	defer p2.Close(ctx)
	recs := kafkatest.ReadExactly(t, addr, cfg.Kafka.Topic, 1, 10*time.Second)
	ev, err := Decode(recs[0].Value, recs[0].Headers)
	if err != nil || ev.RequestId != "before-restart" {
		t.Errorf("after the restart the log holds %v (%v), want the event logged before it", ev, err)
	}
}

func TestProducerWithoutEvaluateKeepsTheEmbeddedBrokerInMemory(t *testing.T) {
	cache := t.TempDir()
	cfg := conf.DefaultServer()
	cfg.Kafka.Embedded, cfg.Kafka.EmbeddedAddr = true, "127.0.0.1:0"
	p := newProducer(t, cfg.Kafka, WithEvaluator(cache, cfg.Outcomes))
	addr := p.Stats().Brokers[0]
	if got := partitionCounts(t, addr, cfg.Kafka.Topic); got[cfg.Kafka.Topic] != conf.DefaultServer().Kafka.EmbeddedPartitions {
		t.Errorf("partitions %v, want the default %d", got, conf.DefaultServer().Kafka.EmbeddedPartitions)
	}
	if b := describeConfigs(t, addr, kmsg.ConfigResourceTypeBroker, "0", "log.retention.bytes"); b["log.retention.bytes"] != strconv.Itoa(EmbeddedRetentionBytes) {
		t.Errorf("memory only, log.retention.bytes is %v, want %d", b, EmbeddedRetentionBytes)
	}
	if entries, err := os.ReadDir(cache); err != nil || len(entries) != 0 {
		t.Errorf("the cache dir holds %v (%v), want nothing", entries, err)
	}
}
