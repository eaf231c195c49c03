package logging

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/groveml/grove/conf"
	"github.com/groveml/grove/logging/kafkatest"
)

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
	if recs := kafkatest.ReadExactly(t, e.Addr(), "grove.outcomes", 2, 10*time.Second); string(recs[0].Key) != "a" || string(recs[1].Value) != "2" {
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
