package logging

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/sasl"
	"google.golang.org/protobuf/proto"

	"github.com/groveml/grove/conf"
	"github.com/groveml/grove/grovepb"
	"github.com/groveml/grove/logging/kafkatest"
)

var quiet = slog.New(slog.NewTextHandler(io.Discard, nil))

// kafkaConfig is the default kafka config pointed at brokers.
func kafkaConfig(brokers ...string) conf.Kafka {
	k := conf.DefaultServer().Kafka
	k.Brokers = brokers
	k.Linger = time.Millisecond
	return k
}

func startEmbedded(t testing.TB, addr string) *Embedded {
	t.Helper()
	e, err := StartEmbedded(addr, "grove.predictions")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(e.Close)
	return e
}

func newProducer(t testing.TB, cfg conf.Kafka, opts ...Option) *Producer {
	t.Helper()
	p, err := New(cfg, append([]Option{WithLogger(quiet), WithInstanceID("test/1")}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		_ = p.Close(ctx)
	})
	return p
}

func headerMap(hs []kgo.RecordHeader) map[string]string {
	m := make(map[string]string, len(hs))
	for _, h := range hs {
		m[h.Key] = string(h.Value)
	}
	return m
}

func event(i int) *grovepb.PredictionEvent {
	return &grovepb.PredictionEvent{
		RequestId: fmt.Sprintf("req-%d", i), Api: "ba", ModelPath: "pctr_v1/", Served: i%2 == 0,
		Configs: map[string]string{"user": fmt.Sprintf("u%d", i), "campaign": "c9"},
		Inputs:  []*grovepb.Tensor{{Datatype: "FLOAT", Shape: []int64{1, 4}, FloatData: []float32{0.5, 0.5, 0.5, float32(i)}}},
		Outputs: []*grovepb.Tensor{{Datatype: "FLOAT", Shape: []int64{1, 1}, FloatData: []float32{0.25}}},
	}
}

func TestProducerDeliversKeyedEventsInBothEncodings(t *testing.T) {
	policy := Policy{Level: LevelFull, KeyFeatures: []string{"user", "campaign"}, Separator: "."}
	for _, enc := range []conf.Encoding{conf.EncodingProto, conf.EncodingJSON} {
		t.Run(enc.String(), func(t *testing.T) {
			emb := startEmbedded(t, "127.0.0.1:0")
			cfg := kafkaConfig(emb.Addr())
			cfg.Encoding = enc
			p := newProducer(t, cfg)
			const n = 20
			sent := make([]*grovepb.PredictionEvent, n)
			for i := range n {
				ev := event(i)
				key := policy.Key(ev.Configs)
				if i == n-1 {
					key = nil // an unkeyed event
				}
				p.Log(ev, key)
				sent[i] = ev
			}
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			if err := p.Flush(ctx); err != nil {
				t.Fatal(err)
			}
			recs := kafkatest.ReadExactly(t, emb.Addr(), "grove.predictions", n, 10*time.Second)
			ids := make(map[string]bool)
			for i, r := range recs { // one partition: in order
				h := headerMap(r.Headers)
				wantCT := map[conf.Encoding]string{conf.EncodingProto: "application/x-protobuf", conf.EncodingJSON: "application/json"}[enc]
				if h["grove-encoding"] != enc.String() || h["grove-schema"] != "grove.v1.PredictionEvent" || h["content-type"] != wantCT {
					t.Errorf("record %d headers %v", i, h)
				}
				if enc == conf.EncodingJSON && (len(r.Value) == 0 || r.Value[0] != '{') {
					t.Errorf("record %d is not JSON: %q", i, r.Value)
				}
				wantKey := fmt.Sprintf("u%d.c9", i)
				if i == n-1 {
					if r.Key != nil {
						t.Errorf("unkeyed record has key %q", r.Key)
					}
				} else if string(r.Key) != wantKey {
					t.Errorf("record %d key %q, want %q", i, r.Key, wantKey)
				}
				got, err := Decode(r.Value, r.Headers)
				if err != nil {
					t.Fatal(err)
				}
				if !proto.Equal(got, sent[i]) {
					t.Errorf("record %d = %v\nwant %v", i, got, sent[i])
				}
				if got.EventId == "" || ids[got.EventId] || got.Timestamp == nil || got.ServerInstanceId != "test/1" {
					t.Errorf("record %d: event id %q (seen %v), timestamp %v, instance %q", i, got.EventId, ids[got.EventId], got.Timestamp, got.ServerInstanceId)
				}
				ids[got.EventId] = true
			}
			s := p.Stats()
			if s.Delivered != n || s.Failed != 0 || s.Dropped != 0 || s.Buffered != 0 || s.BufferedBytes != 0 ||
				s.Topic != "grove.predictions" || s.Encoding != enc.String() || s.Embedded || s.Brokers[0] != emb.Addr() {
				t.Errorf("stats %+v", s)
			}
		})
	}
}

func TestProducerKeepsCallerFields(t *testing.T) {
	emb := startEmbedded(t, "127.0.0.1:0")
	p := newProducer(t, kafkaConfig(emb.Addr()))
	ev := event(1)
	ev.EventId, ev.ServerInstanceId = "my-id", "my-instance"
	p.Log(ev, nil)
	if err := p.Flush(context.Background()); err != nil {
		t.Fatal(err)
	}
	got, err := Decode(kafkatest.ReadExactly(t, emb.Addr(), "grove.predictions", 1, 10*time.Second)[0].Value, nil)
	if err != nil || got.EventId != "my-id" || got.ServerInstanceId != "my-instance" {
		t.Errorf("got %v, %v", got, err)
	}
}

func TestProducerWithEmbeddedBroker(t *testing.T) {
	cfg := conf.DefaultServer().Kafka
	cfg.Embedded, cfg.EmbeddedAddr, cfg.Topic = true, "127.0.0.1:0", "dev.topic"
	p, err := New(cfg, WithLogger(quiet))
	if err != nil {
		t.Fatal(err)
	}
	s := p.Stats()
	if !s.Embedded || len(s.Brokers) != 1 || strings.HasSuffix(s.Brokers[0], ":0") {
		t.Fatalf("stats %+v", s)
	}
	p.Log(event(1), []byte("k"))
	if err := p.Flush(context.Background()); err != nil {
		t.Fatal(err)
	}
	if r := kafkatest.ReadExactly(t, s.Brokers[0], "dev.topic", 1, 10*time.Second)[0]; string(r.Key) != "k" {
		t.Errorf("key %q", r.Key)
	}
	if err := p.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	if c, err := net.DialTimeout("tcp", s.Brokers[0], time.Second); err == nil {
		c.Close()
		t.Error("the embedded broker still listens after Close")
	}
	p.Log(event(2), nil)
	if s := p.Stats(); s.Dropped != 1 || s.Delivered != 1 {
		t.Errorf("after close: %+v", s)
	}
}

func TestProducerSurvivesBrokerOutage(t *testing.T) {
	emb := startEmbedded(t, "127.0.0.1:0")
	addr := emb.Addr()
	p := newProducer(t, kafkaConfig(addr))

	// A first event, so the producer has its metadata and producer id.
	p.Log(event(0), nil)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := p.Flush(ctx); err != nil {
		t.Fatal(err)
	}

	emb.Close()
	const n = 50
	start := time.Now()
	for i := 1; i <= n; i++ {
		p.Log(event(i), []byte(fmt.Sprint(i)))
	}
	if took := time.Since(start); took > time.Second {
		t.Errorf("logging %d events with the broker down took %v", n, took)
	}
	// Longer than the client's first retries: the events must still wait.
	time.Sleep(3 * time.Second)
	if s := p.Stats(); s.Buffered != n || s.Delivered != 1 || s.Failed != 0 || s.Dropped != 0 {
		t.Fatalf("broker down: %+v", s)
	}

	// A new broker on the same address; it knows nothing of the old one.
	emb2 := startEmbedded(t, addr)
	ctx, cancel = context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := p.Flush(ctx); err != nil {
		t.Fatalf("flush after the broker returned: %v (%+v)", err, p.Stats())
	}
	// Generous: under a loaded CI machine the consumer's first fetches can be slow.
	recs := kafkatest.ReadExactly(t, emb2.Addr(), "grove.predictions", n, 30*time.Second)
	seen := make(map[string]bool)
	for _, r := range recs {
		ev, err := Decode(r.Value, r.Headers)
		if err != nil {
			t.Fatal(err)
		}
		if want := "req-" + string(r.Key); ev.RequestId != want {
			t.Errorf("key %q with request %q", r.Key, ev.RequestId)
		}
		seen[ev.RequestId] = true
	}
	if len(seen) != n {
		t.Errorf("%d distinct events of %d arrived", len(seen), n)
	}
	if s := p.Stats(); s.Delivered != n+1 || s.Failed != 0 || s.Dropped != 0 || s.Buffered != 0 {
		t.Errorf("after the outage: %+v", s)
	}
}

// deadAddr returns a loopback address nothing listens on.
func deadAddr(t *testing.T) string {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	return addr
}

func TestProducerDropsWhenBufferRecordsFull(t *testing.T) {
	cfg := kafkaConfig(deadAddr(t))
	cfg.BufferRecords = 10
	p := newProducer(t, cfg)
	var slowest time.Duration
	start := time.Now()
	for i := range 100 {
		t0 := time.Now()
		p.Log(event(i), nil)
		slowest = max(slowest, time.Since(t0))
	}
	total := time.Since(start)
	if total > 200*time.Millisecond || slowest > 50*time.Millisecond {
		t.Errorf("100 Log calls took %v, the slowest %v", total, slowest)
	}
	s := p.Stats()
	if s.Buffered != 10 || s.Dropped != 90 || s.Delivered != 0 || s.Failed != 0 || s.BufferedBytes <= 0 {
		t.Errorf("stats %+v", s)
	}

	// Flush honours its deadline.
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	t0 := time.Now()
	err := p.Flush(ctx)
	if took := time.Since(t0); !errors.Is(err, context.DeadlineExceeded) || took > 2*time.Second {
		t.Errorf("flush: %v after %v", err, took)
	}

	// Close within a deadline fails what is left.
	ctx, cancel = context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	t0 = time.Now()
	if err := p.Close(ctx); !errors.Is(err, context.DeadlineExceeded) || time.Since(t0) > 2*time.Second {
		t.Errorf("close: %v after %v", err, time.Since(t0))
	}
	if s := p.Stats(); s.Buffered != 0 || s.BufferedBytes != 0 || s.Failed != 10 || s.Dropped != 90 || s.LastError == "" {
		t.Errorf("after close: %+v", s)
	}
}

func TestProducerDropsWhenBufferBytesFull(t *testing.T) {
	ev := event(1)
	ev.EventId, ev.ServerInstanceId = "fixed-id", "test/1"
	size := 0
	{
		withTS := proto.Clone(ev).(*grovepb.PredictionEvent)
		withTS.Timestamp = nil
		v, _ := Encode(withTS, conf.EncodingProto)
		size = len(v) + len("content-type") + len(ContentTypeProto) + len("grove-encoding") + len("proto") + len("grove-schema") + len(SchemaName)
	}
	cfg := kafkaConfig(deadAddr(t))
	cfg.BufferBytes = int64(3*size + size/2 + 64) // three events (timestamps add a few bytes), not four
	p := newProducer(t, cfg)
	for range 10 {
		p.Log(proto.Clone(ev).(*grovepb.PredictionEvent), nil)
	}
	if s := p.Stats(); s.Buffered != 3 || s.Dropped != 7 || s.BufferedBytes > cfg.BufferBytes {
		t.Errorf("stats %+v (event about %d bytes, buffer %d)", s, size, cfg.BufferBytes)
	}
	// An event larger than the whole buffer is dropped too.
	big := event(2)
	big.Inputs[0].FloatData = make([]float32, cfg.BufferBytes)
	p.Log(big, nil)
	if s := p.Stats(); s.Dropped != 8 {
		t.Errorf("big event: %+v", s)
	}
}

func TestProducerCountsUnencodableEventsAsFailed(t *testing.T) {
	p := newProducer(t, kafkaConfig(deadAddr(t)))
	ev := event(1)
	ev.RequestId = "bad\xffutf8"
	p.Log(ev, nil)
	if s := p.Stats(); s.Failed != 1 || s.Buffered != 0 || !strings.Contains(s.LastError, "UTF-8") {
		t.Errorf("stats %+v", s)
	}
}

func TestProducerMetrics(t *testing.T) {
	emb := startEmbedded(t, "127.0.0.1:0")
	reg := prometheus.NewRegistry()
	cfg := kafkaConfig(emb.Addr())
	cfg.BufferRecords = 3
	p := newProducer(t, cfg, WithRegisterer(reg))
	for i := range 3 {
		p.Log(event(i), nil)
	}
	if err := p.Flush(context.Background()); err != nil {
		t.Fatal(err)
	}
	emb.Close()
	for i := range 5 { // 3 buffered, 2 dropped
		p.Log(event(i), nil)
	}
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	got := make(map[string]float64)
	for _, mf := range mfs {
		m := mf.GetMetric()[0]
		if c := m.GetCounter(); c != nil {
			got[mf.GetName()] = c.GetValue()
		} else {
			got[mf.GetName()] = m.GetGauge().GetValue()
		}
	}
	if got["grove_prediction_log_buffered"] != 3 || got["grove_prediction_log_delivered_total"] != 3 ||
		got["grove_prediction_log_dropped_total"] != 2 || got["grove_prediction_log_failed_total"] != 0 ||
		got["grove_prediction_log_buffered_bytes"] <= 0 {
		t.Errorf("metrics %v", got)
	}
	if _, err := New(cfg, WithLogger(quiet), WithRegisterer(reg)); err == nil {
		t.Error("a second producer registered the same metrics")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	_ = p.Close(ctx)
	if mfs, _ := reg.Gather(); len(mfs) != 0 {
		t.Errorf("%d metric families left after Close", len(mfs))
	}
}

func TestNewReturnsNilWhenKafkaIsOff(t *testing.T) {
	p, err := New(conf.DefaultServer().Kafka)
	if p != nil || err != nil {
		t.Fatalf("New = %v, %v", p, err)
	}
	// A nil producer discards everything.
	p.Log(event(1), []byte("k"))
	if err := p.Flush(context.Background()); err != nil {
		t.Error(err)
	}
	if err := p.Close(context.Background()); err != nil {
		t.Error(err)
	}
	if s := p.Stats(); s.Delivered != 0 || s.Dropped != 0 {
		t.Errorf("stats %+v", s)
	}
}

func TestNewErrors(t *testing.T) {
	for _, tc := range []struct {
		name   string
		modify func(*conf.Kafka)
		want   string
	}{
		{"buffer", func(k *conf.Kafka) { k.BufferRecords = 0 }, "must be positive"},
		{"ca file", func(k *conf.Kafka) { k.TLS = conf.KafkaTLS{Enabled: true, CAFile: "/nonexistent/ca.pem"} }, "kafka.tls.ca_file"},
		{"cert file", func(k *conf.Kafka) {
			k.TLS = conf.KafkaTLS{Enabled: true, CertFile: "/nonexistent/c", KeyFile: "/nonexistent/k"}
		}, "kafka.tls.cert_file/key_file"},
		{"embedded addr", func(k *conf.Kafka) { k.Brokers, k.Embedded, k.EmbeddedAddr = nil, true, "0.0.0.0:0" }, "not a loopback address"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			k := kafkaConfig("127.0.0.1:1")
			tc.modify(&k)
			p, err := New(k, WithLogger(quiet))
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("got %v, %v; want an error containing %q", p, err, tc.want)
			}
		})
	}
}

func TestNewGivesTheClientTheOptionsOfEveryAcksCompressionAndSASL(t *testing.T) {
	acks := []struct {
		v    conf.Acks
		want kgo.Acks
	}{{conf.AcksAll, kgo.AllISRAcks()}, {conf.AcksLeader, kgo.LeaderAck()}, {conf.AcksNone, kgo.NoAck()}}
	codecs := []struct {
		v    conf.Compression
		want kgo.CompressionCodec
	}{{conf.CompressionNone, kgo.NoCompression()}, {conf.CompressionGzip, kgo.GzipCompression()},
		{conf.CompressionSnappy, kgo.SnappyCompression()}, {conf.CompressionLz4, kgo.Lz4Compression()}, {conf.CompressionZstd, kgo.ZstdCompression()}}
	mechanisms := []struct {
		v    conf.SASLMechanism
		want string // the franz-go mechanism's name, "" for none
	}{{conf.SASLNone, ""}, {conf.SASLPlain, "PLAIN"}, {conf.SASLScramSHA256, "SCRAM-SHA-256"}, {conf.SASLScramSHA512, "SCRAM-SHA-512"}}
	for i, a := range acks {
		for j, c := range codecs {
			m := mechanisms[(i+j)%len(mechanisms)]
			k := kafkaConfig("127.0.0.1:1")
			k.Acks, k.Compression = a.v, c.v
			if m.v != conf.SASLNone {
				k.SASL = conf.KafkaSASL{Mechanism: m.v, Username: "u", Password: "p"}
			}
			p, err := New(k, WithLogger(quiet))
			if err != nil {
				t.Fatalf("acks %s compression %s sasl %q: %v", a.v, c.v, m.v, err)
			}
			if got := p.cl.OptValue(kgo.RequiredAcks); got != a.want {
				t.Errorf("acks %s: the client's acks are %v", a.v, got)
			}
			if got := p.cl.OptValue(kgo.DisableIdempotentWrite); got != (a.v != conf.AcksAll) {
				t.Errorf("acks %s: idempotence disabled %v", a.v, got)
			}
			if got, _ := p.cl.OptValue(kgo.ProducerBatchCompression).([]kgo.CompressionCodec); len(got) != 1 || got[0] != c.want {
				t.Errorf("compression %s: the client's codecs are %v", c.v, got)
			}
			var names []string
			for _, mech := range p.cl.OptValue(kgo.SASL).([]sasl.Mechanism) {
				names = append(names, mech.Name())
			}
			if got := strings.Join(names, ","); got != m.want {
				t.Errorf("sasl %q: the client's mechanisms are %q", m.v, got)
			}
			ctx, cancel := context.WithTimeout(context.Background(), time.Second)
			_ = p.Close(ctx)
			cancel()
		}
	}
}

func TestProducerDeliversWithEveryCompressionAndAcks(t *testing.T) {
	emb := startEmbedded(t, "127.0.0.1:0")
	n := 0
	for _, tc := range []struct {
		acks        conf.Acks
		compression conf.Compression
	}{
		{conf.AcksAll, conf.CompressionGzip}, {conf.AcksAll, conf.CompressionLz4}, {conf.AcksAll, conf.CompressionZstd},
		{conf.AcksLeader, conf.CompressionNone}, {conf.AcksAll, conf.CompressionSnappy},
	} {
		k := kafkaConfig(emb.Addr())
		k.Acks, k.Compression = tc.acks, tc.compression
		p := newProducer(t, k)
		p.Log(event(n), nil)
		n++
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		if err := p.Flush(ctx); err != nil || p.Stats().Delivered != 1 {
			t.Errorf("%+v: %v %+v", tc, err, p.Stats())
		}
		cancel()
	}
	kafkatest.ReadExactly(t, emb.Addr(), "grove.predictions", n, 10*time.Second)
}

func TestStartEmbeddedReportsItsAddressAndRestartsOnIt(t *testing.T) {
	e := startEmbedded(t, "127.0.0.1:0")
	addr := e.Addr()
	if strings.HasSuffix(addr, ":0") || !strings.HasPrefix(addr, "127.0.0.1:") {
		t.Fatalf("addr %q", addr)
	}
	if _, err := StartEmbedded(addr, "t"); err == nil {
		t.Error("a second broker started on a busy address")
	}
	e.Close()
	e.Close() // twice is fine
	e2 := startEmbedded(t, addr)
	if e2.Addr() != addr {
		t.Errorf("restarted on %q, want %q", e2.Addr(), addr)
	}
	for _, bad := range []string{"127.0.0.1", "127.0.0.1:x", "10.1.2.3:0", "example.com:9092"} {
		if e, err := StartEmbedded(bad, "t"); err == nil {
			e.Close()
			t.Errorf("%q accepted", bad)
		}
	}
	var nilEmb *Embedded
	nilEmb.Close()
}
