package logging

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/groveml/grove/actors"
	"github.com/groveml/grove/conf"
	"github.com/groveml/grove/conf/modelconfig"
)

// With prediction_log.key_by request_id every event, direct or through a
// contract, is keyed by its request id; with key_features (the default)
// by the key features, as before; an event without a request id has no
// key.
func TestKeyByChoosesTheRecordKeyOfEveryEvent(t *testing.T) {
	e := startEmbedded(t, "127.0.0.1:0")
	p := newProducer(t, kafkaConfig(e.Addr()))
	direct := Policy{Level: LevelFull, KeyFeatures: []string{"user"}, Separator: "."}
	contract := &modelconfig.ServableLogging{Level: modelconfig.LogLevelFull, KeyFeatures: []string{"site"}}
	configs := map[string]string{"user": "u1", "site": "s9"}
	log := func(keyBy conf.KeyBy, id string, logging *modelconfig.ServableLogging) {
		s := &Sink{Producer: p, Direct: direct, KeyBy: keyBy}
		s.LogPrediction(&actors.Request{ModelPath: "m/", RequestID: id, Configs: configs, Logging: logging}, &actors.Result{}, true)
	}
	log(conf.KeyByRequestID, "req-1", nil)
	log(conf.KeyByRequestID, "req-2", contract)
	log(conf.KeyByRequestID, "", nil)
	log(conf.KeyByKeyFeatures, "req-3", nil)
	log(conf.KeyByKeyFeatures, "req-4", contract)
	want := []string{"req-1", "req-2", "", "u1", "s9"}
	recs := consume(t, e.Addr(), "grove.predictions", len(want), 10*time.Second)
	for i, r := range recs {
		if string(r.Key) != want[i] || (want[i] == "") != (r.Key == nil) {
			t.Errorf("record %d key %q, want %q", i, r.Key, want[i])
		}
	}
}

// Produce waits for the broker: records to a topic of their own are
// acknowledged and there; with Kafka off every record fails ErrClosed.
func TestProduceWaitsForTheAcknowledgementOfRecordsToAnotherTopic(t *testing.T) {
	e := startEmbedded(t, "127.0.0.1:0")
	p := newProducer(t, kafkaConfig(e.Addr()))
	errs := p.Produce(context.Background(), []*kgo.Record{
		{Topic: "grove.outcomes", Key: []byte("a"), Value: []byte("1")},
		{Topic: "grove.outcomes", Key: []byte("b"), Value: []byte("2")},
	})
	for i, err := range errs {
		if err != nil {
			t.Errorf("record %d: %v", i, err)
		}
	}
	if recs := consume(t, e.Addr(), "grove.outcomes", 2, 10*time.Second); string(recs[0].Key) != "a" || string(recs[1].Value) != "2" {
		t.Errorf("records %v", recs)
	}
	if st := p.Stats(); st.Delivered != 0 || st.Buffered != 0 {
		t.Errorf("the prediction log's counters moved: %+v", st)
	}
	var off *Producer
	if errs := off.Produce(context.Background(), []*kgo.Record{{Value: []byte("x")}}); !errors.Is(errs[0], ErrClosed) {
		t.Errorf("nil producer: %v, want ErrClosed", errs)
	}
}

// The embedded broker creates the topics WithTopics names.
func TestEmbeddedBrokerCreatesTheTopicsNamed(t *testing.T) {
	cfg := conf.DefaultServer().Kafka
	cfg.Embedded, cfg.EmbeddedAddr = true, "127.0.0.1:0"
	p := newProducer(t, cfg, WithTopics("grove.outcomes"))
	cl, err := kgo.NewClient(kgo.SeedBrokers(p.Stats().Brokers...))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	topics, err := listTopics(ctx, cl)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"grove.predictions", "grove.outcomes"} {
		if !topics[want] {
			t.Errorf("topic %s not created: %v", want, topics)
		}
	}
}

// listTopics returns the topics the broker cl talks to has.
func listTopics(ctx context.Context, cl *kgo.Client) (map[string]bool, error) {
	resp, err := kmsg.NewPtrMetadataRequest().RequestWith(ctx, cl)
	if err != nil {
		return nil, err
	}
	topics := map[string]bool{}
	for _, t := range resp.Topics {
		if t.Topic != nil {
			topics[*t.Topic] = true
		}
	}
	return topics, nil
}
