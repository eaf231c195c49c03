package logging

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/google/uuid"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/sasl/plain"
	"github.com/twmb/franz-go/pkg/sasl/scram"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/groveml/grove/conf"
	"github.com/groveml/grove/grovepb"
	"github.com/groveml/grove/transport/tlsconf"
)

// Producer produces prediction events to Kafka, asynchronously and within
// a bounded buffer, so that logging never slows down or blocks a request.
//
// Log encodes the event and hands it to the Kafka client's buffer. When
// the broker is down or slow, events wait in the buffer and are delivered
// when it is back, however long that takes (records are retried without a
// limit on tries or time), at least once, with the idempotent producer
// (acks all). When the buffer holds kafka.buffer_records events or
// kafka.buffer_bytes bytes, new events are dropped and counted instead:
// memory never grows past the buffer and Log never waits.
//
// A nil *Producer is valid and discards every event: New returns nil when
// Kafka is off. All methods are safe for concurrent use.
type Producer struct {
	cl         *kgo.Client
	emb        *Embedded
	topic      string
	encoding   conf.Encoding
	brokers    []string
	headers    []kgo.RecordHeader
	headerSize int64
	instanceID string
	log        *slog.Logger
	reg        prometheus.Registerer

	maxRecords, maxBytes  int64
	bufRecords, bufBytes  atomic.Int64
	delivered, failed     atomic.Uint64
	dropped               atomic.Uint64
	closed                atomic.Bool
	promise               func(*kgo.Record, error)
	lastErr               atomic.Pointer[timedError]
	lastFailLog, lastDrop atomic.Int64 // unix nanos of the last warning of each kind

	// Re-producing after the topic was deleted and recreated (see finish).
	retryMu    sync.Mutex
	retry      []*kgo.Record
	purge      bool // the client must forget the topic before retry is produced
	recovering atomic.Bool

	closeOnce sync.Once
	closeErr  error
}

// attemptKey is the record context key of how many times a record was
// produced again after its topic was recreated.
type attemptKey struct{}

// maxTopicAttempts bounds how often one record is produced again after a
// topic recreation.
const maxTopicAttempts = 3

type timedError struct {
	msg string
	at  time.Time
}

// Stats are a Producer's counters, for /v1/status.
type Stats struct {
	// Topic is the topic events are produced to.
	Topic string `json:"topic"`
	// Encoding is the record value encoding, "proto" or "json".
	Encoding string `json:"encoding"`
	// Brokers are the seed brokers (the embedded broker's real address when Embedded).
	Brokers []string `json:"brokers"`
	// Embedded is true when events go to the in-process development broker.
	Embedded bool `json:"embedded"`
	// Buffered is the number of events waiting for the broker's acknowledgement.
	Buffered int64 `json:"buffered"`
	// BufferedBytes is the encoded size (key, value, headers) of the buffered events.
	BufferedBytes int64 `json:"buffered_bytes"`
	// Delivered counts the events the broker acknowledged.
	Delivered uint64 `json:"delivered"`
	// Failed counts the events that could not be encoded or were rejected
	// for good (by the broker, or still buffered at Close).
	Failed uint64 `json:"failed"`
	// Dropped counts the events not buffered because the buffer was full
	// (or the producer closed).
	Dropped uint64 `json:"dropped"`
	// LastError is the last failure's message, empty if none.
	LastError string `json:"last_error,omitempty"`
	// LastErrorAt is when LastError happened.
	LastErrorAt time.Time `json:"last_error_at,omitzero"`
}

// Option configures a Producer.
type Option func(*options)

type options struct {
	log        *slog.Logger
	instanceID string
	reg        prometheus.Registerer
	kgoOpts    []kgo.Opt
	topics     []string
	evaluator  *evaluatorStorage
}

// evaluatorStorage is what the embedded broker keeps for an in-process
// evaluator (WithEvaluator).
type evaluatorStorage struct {
	dataDir         string
	compacted, kept []string
}

// WithLogger sets the logger for the producer's warnings (buffer full,
// failures, Kafka client warnings); the default is slog.Default().
func WithLogger(l *slog.Logger) Option { return func(o *options) { o.log = l } }

// WithInstanceID sets the server_instance_id of the events that have none;
// the default is "<hostname>/<pid>".
func WithInstanceID(id string) Option { return func(o *options) { o.instanceID = id } }

// WithRegisterer registers the producer's Prometheus metrics with reg
// (New fails if that fails); Close unregisters them. The metrics are
// grove_prediction_log_buffered, grove_prediction_log_buffered_bytes,
// grove_prediction_log_delivered_total, grove_prediction_log_failed_total
// and grove_prediction_log_dropped_total.
func WithRegisterer(reg prometheus.Registerer) Option { return func(o *options) { o.reg = reg } }

// WithTopics names further topics the producer's records go to (Produce),
// such as the outcome topic: the embedded broker, when New starts one,
// creates them with the prediction log's topic.
func WithTopics(topics ...string) Option {
	return func(o *options) { o.topics = append(o.topics, topics...) }
}

// EmbeddedEvaluateRetention is how long the embedded broker keeps the
// prediction log and the outcomes when the evaluator runs in-process
// (WithEvaluator): a 7-day outcome window plus a day. The evaluator
// raises it for a longer window (Producer.RetainEmbedded).
const EmbeddedEvaluateRetention = 8 * 24 * time.Hour

// WithEvaluator tells New that the evaluator runs in this process when
// o.Evaluate is set. The embedded broker, if New starts one, then keeps
// its data in cacheDir/kafka (it survives a restart), keeps the records of
// its topics EmbeddedEvaluateRetention, and creates the evaluations topic
// (o.EvaluationsTopic) compacted and never expiring, and the group's
// changelog (o.Group+"-changelog") never expiring, not compacted (the
// evaluator deletes what it no longer needs of it). Without o.Evaluate it
// changes nothing.
func WithEvaluator(cacheDir string, o conf.Outcomes) Option {
	return func(opts *options) {
		if !o.Evaluate {
			return
		}
		opts.evaluator = &evaluatorStorage{
			dataDir:   filepath.Join(cacheDir, "kafka"),
			compacted: []string{o.EvaluationsTopic},
			kept:      []string{o.Group + "-changelog"},
		}
	}
}

// WithKgoOptions appends franz-go client options after Grove's own, to
// override them (tests, tuning).
func WithKgoOptions(opts ...kgo.Opt) Option {
	return func(o *options) { o.kgoOpts = append(o.kgoOpts, opts...) }
}

// New returns a producer for cfg, which should have passed
// conf.Server.Validate. When Kafka is off (cfg.Enabled() is false) it
// returns nil and no error: a nil *Producer discards events. With
// cfg.Embedded it first starts the development broker at cfg.EmbeddedAddr
// with cfg.EmbeddedPartitions partitions per topic (see EmbeddedOptions
// and WithEvaluator), which Close stops. New does not wait for a broker:
// it succeeds while they are all down, and events wait in the buffer.
func New(cfg conf.Kafka, opts ...Option) (*Producer, error) {
	if !cfg.Enabled() {
		return nil, nil
	}
	o := options{log: slog.Default()}
	for _, opt := range opts {
		opt(&o)
	}
	if o.instanceID == "" {
		host, _ := os.Hostname()
		o.instanceID = host + "/" + strconv.Itoa(os.Getpid())
	}
	if cfg.BufferRecords <= 0 || cfg.BufferBytes <= 0 {
		return nil, fmt.Errorf("kafka.buffer_records (%d) and kafka.buffer_bytes (%d) must be positive", cfg.BufferRecords, cfg.BufferBytes)
	}
	kopts, err := clientOptions(cfg, o.log)
	if err != nil {
		return nil, err
	}
	p := &Producer{
		topic:      cfg.Topic,
		encoding:   cfg.Encoding,
		brokers:    append([]string(nil), cfg.Brokers...),
		headers:    recordHeaders(cfg.Encoding),
		instanceID: o.instanceID,
		log:        o.log,
		maxRecords: int64(cfg.BufferRecords),
		maxBytes:   cfg.BufferBytes,
	}
	for _, h := range p.headers {
		p.headerSize += int64(len(h.Key) + len(h.Value))
	}
	p.promise = p.finish
	if cfg.Embedded {
		eo := EmbeddedOptions{Addr: cfg.EmbeddedAddr, Topics: append([]string{cfg.Topic}, o.topics...),
			Partitions: cfg.EmbeddedPartitions, Logger: o.log}
		if ev := o.evaluator; ev != nil {
			eo.DataDir, eo.CompactedTopics, eo.KeptTopics, eo.Retention = ev.dataDir, ev.compacted, ev.kept, EmbeddedEvaluateRetention
		}
		if p.emb, err = eo.Start(); err != nil {
			return nil, err
		}
		p.brokers = []string{p.emb.Addr()}
		if eo.DataDir == "" {
			o.log.Warn("prediction log: started the embedded development Kafka broker; it keeps events in memory only", "addr", p.emb.Addr(),
				"topic", cfg.Topic, "other_topics", o.topics, "partitions", p.emb.partitions)
		} else {
			o.log.Warn("prediction log: started the embedded development Kafka broker", "addr", p.emb.Addr(), "data_dir", eo.DataDir,
				"topic", cfg.Topic, "other_topics", o.topics, "compacted_topics", eo.CompactedTopics, "kept_topics", eo.KeptTopics,
				"partitions", p.emb.partitions, "retention", eo.Retention)
		}
	}
	kopts = append(kopts, kgo.SeedBrokers(p.brokers...))
	kopts = append(kopts, o.kgoOpts...)
	if p.cl, err = kgo.NewClient(kopts...); err != nil {
		p.emb.Close()
		return nil, fmt.Errorf("kafka client: %w", err)
	}
	if o.reg != nil {
		if err := o.reg.Register(p); err != nil {
			p.cl.Close()
			p.emb.Close()
			return nil, fmt.Errorf("registering the prediction log metrics: %w", err)
		}
		p.reg = o.reg
	}
	return p, nil
}

// clientOptions translates cfg into franz-go options (without the brokers).
func clientOptions(cfg conf.Kafka, log *slog.Logger) ([]kgo.Opt, error) {
	opts := []kgo.Opt{
		kgo.ClientID(cfg.ClientID),
		kgo.DefaultProduceTopic(cfg.Topic),
		kgo.AllowAutoTopicCreation(), // where the broker allows it
		kgo.ProducerLinger(cfg.Linger),
		// The Producer's own accounting bounds the buffer exactly (see
		// admit); the client's limits leave room for the one record whose
		// promise has run but which the client has not released yet, so
		// the client never blocks or refuses a record Grove admitted.
		kgo.MaxBufferedRecords(int(min(cfg.BufferRecords, 1<<40)) + 16),
		kgo.MaxBufferedBytes(int(2 * cfg.BufferBytes)),
		// Retried with no limit on tries or time: an outage only fills the
		// buffer. These are franz-go's defaults, stated so they stay.
		kgo.RecordRetries(math.MaxInt),
		kgo.RecordDeliveryTimeout(0),
		kgo.WithLogger(slogKgo{log}),
	}
	// Each choice is one of its constants: conf refuses other names when
	// it reads them.
	switch cfg.Acks {
	case conf.AcksAll:
		opts = append(opts, kgo.RequiredAcks(kgo.AllISRAcks()))
	case conf.AcksLeader:
		opts = append(opts, kgo.RequiredAcks(kgo.LeaderAck()), kgo.DisableIdempotentWrite())
	case conf.AcksNone:
		opts = append(opts, kgo.RequiredAcks(kgo.NoAck()), kgo.DisableIdempotentWrite())
	}
	switch cfg.Compression {
	case conf.CompressionNone:
		opts = append(opts, kgo.ProducerBatchCompression(kgo.NoCompression()))
	case conf.CompressionGzip:
		opts = append(opts, kgo.ProducerBatchCompression(kgo.GzipCompression()))
	case conf.CompressionSnappy:
		opts = append(opts, kgo.ProducerBatchCompression(kgo.SnappyCompression()))
	case conf.CompressionLz4:
		opts = append(opts, kgo.ProducerBatchCompression(kgo.Lz4Compression()))
	case conf.CompressionZstd:
		opts = append(opts, kgo.ProducerBatchCompression(kgo.ZstdCompression()))
	}
	sec, err := SecurityOptions(cfg)
	if err != nil {
		return nil, err
	}
	return append(opts, sec...), nil
}

// SecurityOptions translates cfg's tls and sasl sections into franz-go
// options: the producer's, and those of every Grove client of the same
// brokers (grove logs tail, grove replay).
func SecurityOptions(cfg conf.Kafka) ([]kgo.Opt, error) {
	var opts []kgo.Opt
	if cfg.TLS.Enabled {
		tc, err := tlsConfig(cfg.TLS)
		if err != nil {
			return nil, err
		}
		opts = append(opts, kgo.DialTLSConfig(tc))
	}
	s := cfg.SASL
	switch s.Mechanism {
	case conf.SASLNone:
	case conf.SASLPlain:
		opts = append(opts, kgo.SASL(plain.Auth{User: s.Username, Pass: s.Password}.AsMechanism()))
	case conf.SASLScramSHA256:
		opts = append(opts, kgo.SASL(scram.Auth{User: s.Username, Pass: s.Password}.AsSha256Mechanism()))
	case conf.SASLScramSHA512:
		opts = append(opts, kgo.SASL(scram.Auth{User: s.Username, Pass: s.Password}.AsSha512Mechanism()))
	}
	return opts, nil
}

// tlsConfig builds the TLS config of kafka.tls; the server name is set by
// the client per broker.
func tlsConfig(t conf.KafkaTLS) (*tls.Config, error) {
	tc := &tls.Config{MinVersion: tls.VersionTLS12, InsecureSkipVerify: t.InsecureSkipVerify} //nolint:gosec // opt-in, documented as testing only
	if t.CAFile != "" {
		pem, err := tlsconf.ReadFile(t.CAFile)
		if err != nil {
			return nil, fmt.Errorf("kafka.tls.ca_file: %w", err)
		}
		tc.RootCAs = x509.NewCertPool()
		if !tc.RootCAs.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("kafka.tls.ca_file %s: no PEM certificate in it", t.CAFile)
		}
	}
	if t.CertFile != "" || t.KeyFile != "" {
		cert, err := tlsconf.LoadX509KeyPair(t.CertFile, t.KeyFile)
		if err != nil {
			return nil, fmt.Errorf("kafka.tls.cert_file/key_file: %w", err)
		}
		tc.Certificates = []tls.Certificate{cert}
	}
	return tc, nil
}

// Log hands an event to the producer with the record key key (nil: no
// key; Policy.Key makes it). It never blocks: it encodes the event, and
// either buffers it for sending or, when the buffer is full, drops it and
// counts it. Before encoding, Log fills in event_id (a new UUIDv7),
// timestamp (now) and server_instance_id when they are empty. It does not
// keep ev, which the caller may reuse once Log returns; it keeps key until
// the record is delivered, so key must not be modified afterwards.
func (p *Producer) Log(ev *grovepb.PredictionEvent, key []byte) {
	p.LogTraced(ev, key, "")
}

// TraceHeader is the record header that carries the W3C traceparent of
// the request an event logs (LogTraced).
const TraceHeader = "traceparent"

// traceHeaderSize is the size LogTraced counted for the trace header of
// a record with headers, the producer's fixed ones being the first fixed.
func traceHeaderSize(headers []kgo.RecordHeader, fixed int) int64 {
	if len(headers) <= fixed {
		return 0
	}
	h := headers[fixed]
	return int64(len(h.Key) + len(h.Value))
}

// LogTraced is Log with the W3C traceparent of the request's trace in the
// record's traceparent header (none when traceparent is empty).
func (p *Producer) LogTraced(ev *grovepb.PredictionEvent, key []byte, traceparent string) {
	if p == nil || ev == nil {
		return
	}
	if p.closed.Load() || !p.admitRecord() {
		p.drop()
		return
	}
	if ev.EventId == "" {
		ev.EventId = newEventID()
	}
	if ev.Timestamp == nil {
		ev.Timestamp = timestamppb.Now()
	}
	if ev.ServerInstanceId == "" {
		ev.ServerInstanceId = p.instanceID
	}
	value, err := Encode(ev, p.encoding)
	if err != nil {
		p.bufRecords.Add(-1)
		p.fail(fmt.Errorf("encoding a prediction event: %w", err))
		return
	}
	size := int64(len(key)+len(value)) + p.headerSize
	headers := p.headers
	if traceparent != "" {
		headers = append(headers[:len(headers):len(headers)], kgo.RecordHeader{Key: TraceHeader, Value: []byte(traceparent)})
		size += int64(len(TraceHeader) + len(traceparent))
	}
	if !p.admitBytes(size) {
		p.bufRecords.Add(-1)
		p.drop()
		return
	}
	r := &kgo.Record{Key: key, Value: value, Headers: headers, Topic: p.topic}
	p.cl.TryProduce(context.Background(), r, p.promise)
}

// ErrClosed is the error of a record Produce is given after Close, and of
// every record when Kafka is off (a nil Producer).
var ErrClosed = errors.New("the Kafka producer is closed or Kafka is off")

// Produce produces records, each to the topic it names (a record without
// one goes to the prediction log's topic), through the prediction log's
// Kafka client, and waits until the broker has acknowledged or refused
// each, or until ctx is done: errs[i] is nil when records[i] was
// acknowledged (with the configured acks). Unlike Log, it waits, for
// callers that answer only once their records are stored (outcomes); it
// leaves the prediction log's buffer and counters alone, but shares the
// Kafka client's buffer (kafka.buffer_records): it waits for room there
// when the buffer is full, and while its records fill it, prediction
// events that find no room are dropped and counted as Log drops them. A record ctx ends before it is sent fails with ctx's error;
// one already sent may still be stored, so a caller that retries it must
// tolerate a duplicate. A record refused because its topic was deleted and
// created again is produced again to the new topic, up to 3 times; one the
// client failed while forgetting the old topic for another call is
// produced again without that counting as one of them. (The
// Kafka client fails every record buffered for
// a partition when the first record of its batch has its context done, so
// one caller's ctx ending can fail another's records of the same
// partition too: they get that error, never a false acknowledgement.)
// With a nil or closed Producer every record fails
// with ErrClosed.
func (p *Producer) Produce(ctx context.Context, records []*kgo.Record) []error {
	errs := make([]error, len(records))
	if p == nil || p.closed.Load() {
		for i := range errs {
			errs[i] = ErrClosed
		}
		return errs
	}
	for _, r := range records {
		if r.Topic == "" {
			r.Topic = p.topic
		}
	}
	p.produceWait(ctx, records, errs)
	// A topic deleted and created again (a new topic id, which is also
	// what a broker that lost its data looks like) fails its records with
	// UNKNOWN_TOPIC_ID, and the client fails every later one too until it
	// forgets the topic: make it forget, and produce those records again,
	// which the broker did not store, each up to maxTopicAttempts times.
	// Those a purge failed (this call's or another's) are produced again
	// as the prediction log's are (topicAttempt): without spending an
	// attempt.
	attempts := make([]int, len(records))
	for ctx.Err() == nil {
		var again []int
		var topics []string
		for i, err := range errs {
			if err == nil || !errors.Is(err, kerr.UnknownTopicID) && err.Error() != errPurgedText {
				continue
			}
			n, retry, purge := topicAttempt(err, attempts[i])
			if !retry {
				continue
			}
			attempts[i] = n
			again = append(again, i)
			if purge && !slices.Contains(topics, records[i].Topic) {
				topics = append(topics, records[i].Topic)
			}
		}
		if len(again) == 0 {
			break
		}
		if len(topics) > 0 {
			p.log.Warn("prediction log client: a topic has a new id (deleted and recreated, or a broker that lost its data); producing its records again", "topics", topics)
			p.cl.PurgeTopicsFromProducing(topics...)
		}
		rs, rerrs := make([]*kgo.Record, len(again)), make([]error, len(again))
		for j, i := range again {
			rs[j] = records[i]
		}
		p.produceWait(ctx, rs, rerrs)
		for j, i := range again {
			errs[i] = rerrs[j]
		}
	}
	return errs
}

// produceWait produces records and waits for each one's outcome, which
// it puts in errs.
func (p *Producer) produceWait(ctx context.Context, records []*kgo.Record, errs []error) {
	var wg sync.WaitGroup
	wg.Add(len(records))
	for i, r := range records {
		p.cl.Produce(ctx, r, func(_ *kgo.Record, err error) {
			if errors.Is(err, kgo.ErrClientClosed) {
				err = ErrClosed
			}
			errs[i] = err
			wg.Done()
		})
	}
	wg.Wait()
}

// admitRecord reserves one record of the buffer, false when it is full.
func (p *Producer) admitRecord() bool {
	for {
		n := p.bufRecords.Load()
		if n >= p.maxRecords {
			return false
		}
		if p.bufRecords.CompareAndSwap(n, n+1) {
			return true
		}
	}
}

// admitBytes reserves size bytes of the buffer, false when they do not fit.
func (p *Producer) admitBytes(size int64) bool {
	for {
		n := p.bufBytes.Load()
		if n+size > p.maxBytes {
			return false
		}
		if p.bufBytes.CompareAndSwap(n, n+size) {
			return true
		}
	}
}

// finish is the promise of every record: it releases the record's buffer
// space and counts the outcome.
//
// A record that failed because its topic was deleted and recreated (a new
// topic id: UNKNOWN_TOPIC_ID, which is also what a broker that lost its
// state, such as a restarted development broker, looks like) keeps its
// buffer space and is produced again once the client has forgotten the old
// topic (see recoverTopic), up to maxTopicAttempts times. Without that, the
// client would fail every later record of the topic too. A record the
// purge itself failed is produced again as it is (see topicAttempt).
func (p *Producer) finish(r *kgo.Record, err error) {
	if err != nil && !p.closed.Load() && p.topicRecreated(err) {
		n, _ := r.Context.Value(attemptKey{}).(int)
		if n, again, purge := topicAttempt(err, n); again {
			p.requeue(&kgo.Record{
				Key: r.Key, Value: r.Value, Headers: r.Headers, Topic: r.Topic,
				Context: context.WithValue(context.Background(), attemptKey{}, n),
			}, purge)
			return
		}
	}
	p.bufBytes.Add(-(int64(len(r.Key)+len(r.Value)) + p.headerSize + traceHeaderSize(r.Headers, len(p.headers))))
	p.bufRecords.Add(-1)
	switch {
	case err == nil:
		p.delivered.Add(1)
	case errors.Is(err, kgo.ErrMaxBuffered):
		p.drop()
	default:
		p.fail(err)
	}
}

// errPurgedText is the message of franz-go's (unexported) error for the
// records failed by PurgeTopicsFromProducing.
const errPurgedText = "topic purged while buffered"

// topicAttempt decides what becomes of a record that failed because its
// topic has a new id (UNKNOWN_TOPIC_ID, or any error while the prediction
// log recovers from one) or because a purge of its topic failed it, n
// being how many of its maxTopicAttempts it had spent: it is produced
// again if again, once the client has forgotten the topic if purge, with
// next attempts spent. A record a purge failed (another record's
// recovery, or its own) is produced again as it is: it spends no attempt
// and asks for no other purge, since it failed on the client's side,
// whatever the broker holds.
func topicAttempt(err error, n int) (next int, again, purge bool) {
	if err.Error() == errPurgedText {
		return n, true, false
	}
	return n + 1, n < maxTopicAttempts, true
}

// topicRecreated reports whether a record failed because its topic was
// recreated, or because recoverTopic purged the topic.
func (p *Producer) topicRecreated(err error) bool {
	return errors.Is(err, kerr.UnknownTopicID) || err.Error() == errPurgedText ||
		p.recovering.Load() && !errors.Is(err, kgo.ErrClientClosed)
}

// requeue keeps r to be produced again by recoverTopic, after the client
// forgot the topic if purge is set, starting recoverTopic if it is not
// running.
func (p *Producer) requeue(r *kgo.Record, purge bool) {
	p.retryMu.Lock()
	p.retry = append(p.retry, r)
	p.purge = p.purge || purge
	p.retryMu.Unlock()
	if p.recovering.CompareAndSwap(false, true) {
		go p.recoverTopic()
	}
}

// recoverTopic makes the client forget the topic, if a record asked for
// it, so that it learns its new id, then produces the kept records again;
// it goes on while records are kept.
func (p *Producer) recoverTopic() {
	for {
		p.retryMu.Lock()
		rs, purge := p.retry, p.purge
		p.retry, p.purge = nil, false
		p.retryMu.Unlock()
		if purge {
			p.log.Warn("prediction log: the topic has a new id (deleted and recreated, or a broker that lost its data); producing the waiting events again", "topic", p.topic)
			p.cl.PurgeTopicsFromProducing(p.topic)
		}
		for _, r := range rs {
			p.cl.TryProduce(context.Background(), r, p.promise)
		}
		p.recovering.Store(false)
		// A record kept meanwhile found recovering set and started nothing.
		p.retryMu.Lock()
		more := len(p.retry) > 0
		p.retryMu.Unlock()
		if !more || !p.recovering.CompareAndSwap(false, true) {
			return
		}
	}
}

// warnEvery is the shortest time between two warnings of the same kind.
const warnEvery = 10 * time.Second

func (p *Producer) drop() {
	n := p.dropped.Add(1)
	if p.warnDue(&p.lastDrop) {
		p.log.Warn("prediction log: buffer full or producer closed, dropping events", "dropped_total", n,
			"buffered", p.bufRecords.Load(), "buffered_bytes", p.bufBytes.Load())
	}
}

func (p *Producer) fail(err error) {
	n := p.failed.Add(1)
	p.lastErr.Store(&timedError{msg: err.Error(), at: time.Now()})
	if p.warnDue(&p.lastFailLog) {
		p.log.Warn("prediction log: events failed", "err", err, "failed_total", n)
	}
}

// warnDue reports whether a warning whose last time is in last may be
// logged now, and if so records now.
func (p *Producer) warnDue(last *atomic.Int64) bool {
	now, prev := time.Now().UnixNano(), last.Load()
	return now-prev >= int64(warnEvery) && last.CompareAndSwap(prev, now)
}

// newEventID returns a new UUIDv7 string.
func newEventID() string {
	id, err := uuid.NewV7()
	if err != nil {
		id = uuid.New()
	}
	return id.String()
}

// Flush waits until every buffered event is delivered or failed, or until
// ctx is done, whose error it then returns. Events logged meanwhile are
// waited for too.
func (p *Producer) Flush(ctx context.Context) error {
	if p == nil {
		return nil
	}
	for {
		if err := p.cl.Flush(ctx); err != nil {
			return err
		}
		if p.bufRecords.Load() == 0 { // nothing waiting to be produced again either
			return nil
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(10 * time.Millisecond):
		}
	}
}

// Close flushes within ctx's deadline (as Flush), then closes the Kafka
// client, counting the events still buffered as failed, and stops the
// embedded broker if New started one. Events logged after Close are
// dropped. It returns the flush's error; later calls return the same.
func (p *Producer) Close(ctx context.Context) error {
	if p == nil {
		return nil
	}
	p.closeOnce.Do(func() {
		p.closeErr = p.Flush(ctx)
		p.closed.Store(true)
		if left := p.bufRecords.Load(); p.closeErr != nil && left > 0 {
			p.log.Warn("prediction log: closing with events not delivered", "events", left, "err", p.closeErr)
		}
		p.cl.Close() // fails what is left, through finish
		// The client runs the promises of the records it failed in the
		// background: wait for them (and for a running recoverTopic), so
		// that Stats are final.
		for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); time.Sleep(5 * time.Millisecond) {
			p.retryMu.Lock()
			rs := p.retry
			p.retry = nil
			p.retryMu.Unlock()
			for _, r := range rs {
				p.finish(r, kgo.ErrClientClosed)
			}
			if p.bufRecords.Load() == 0 && !p.recovering.Load() {
				break
			}
		}
		p.emb.Close()
		if p.reg != nil {
			p.reg.Unregister(p)
		}
	})
	return p.closeErr
}

// RetainEmbedded raises to d, if it is longer, how long the embedded broker
// keeps the records of its topics that are neither compacted nor kept (see
// Embedded.RetainAtLeast): the in-process evaluator passes its longest
// outcome window plus a day. Without an embedded broker (a nil producer,
// or real brokers, whose retention is their operator's) it does nothing.
func (p *Producer) RetainEmbedded(d time.Duration) error {
	if p == nil || p.emb == nil {
		return nil
	}
	return p.emb.RetainAtLeast(d)
}

// Stats returns the producer's counters; zero for a nil producer.
func (p *Producer) Stats() Stats {
	if p == nil {
		return Stats{}
	}
	s := Stats{
		Topic:         p.topic,
		Encoding:      p.encoding.String(),
		Brokers:       append([]string(nil), p.brokers...),
		Embedded:      p.emb != nil,
		Buffered:      p.bufRecords.Load(),
		BufferedBytes: p.bufBytes.Load(),
		Delivered:     p.delivered.Load(),
		Failed:        p.failed.Load(),
		Dropped:       p.dropped.Load(),
	}
	if e := p.lastErr.Load(); e != nil {
		s.LastError, s.LastErrorAt = e.msg, e.at
	}
	return s
}

var (
	descBuffered = prometheus.NewDesc("grove_prediction_log_buffered",
		"Prediction log events waiting in the producer's buffer for the broker's acknowledgement.", nil, nil)
	descBufferedBytes = prometheus.NewDesc("grove_prediction_log_buffered_bytes",
		"Encoded size (key, value, headers) of the prediction log events in the producer's buffer.", nil, nil)
	descDelivered = prometheus.NewDesc("grove_prediction_log_delivered_total",
		"Prediction log events the Kafka broker acknowledged.", nil, nil)
	descFailed = prometheus.NewDesc("grove_prediction_log_failed_total",
		"Prediction log events that could not be encoded or were rejected for good (by the broker, or still buffered at shutdown).", nil, nil)
	descDropped = prometheus.NewDesc("grove_prediction_log_dropped_total",
		"Prediction log events dropped because the producer's buffer was full.", nil, nil)
)

// Describe implements prometheus.Collector.
func (p *Producer) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{descBuffered, descBufferedBytes, descDelivered, descFailed, descDropped} {
		ch <- d
	}
}

// Collect implements prometheus.Collector.
func (p *Producer) Collect(ch chan<- prometheus.Metric) {
	s := p.Stats()
	ch <- prometheus.MustNewConstMetric(descBuffered, prometheus.GaugeValue, float64(s.Buffered))
	ch <- prometheus.MustNewConstMetric(descBufferedBytes, prometheus.GaugeValue, float64(s.BufferedBytes))
	ch <- prometheus.MustNewConstMetric(descDelivered, prometheus.CounterValue, float64(s.Delivered))
	ch <- prometheus.MustNewConstMetric(descFailed, prometheus.CounterValue, float64(s.Failed))
	ch <- prometheus.MustNewConstMetric(descDropped, prometheus.CounterValue, float64(s.Dropped))
}

// slogKgo passes the Kafka client's warnings and errors to a slog logger.
type slogKgo struct{ l *slog.Logger }

func (s slogKgo) Level() kgo.LogLevel { return kgo.LogLevelWarn }

func (s slogKgo) Log(level kgo.LogLevel, msg string, keyvals ...any) {
	lvl := slog.LevelWarn
	switch level {
	case kgo.LogLevelError:
		lvl = slog.LevelError
	case kgo.LogLevelInfo:
		lvl = slog.LevelInfo
	case kgo.LogLevelDebug:
		lvl = slog.LevelDebug
	}
	s.l.Log(context.Background(), lvl, "kafka: "+msg, keyvals...)
}
