package outcome

import (
	"context"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/groveml/grove/grovepb"
	"github.com/groveml/grove/logging"
)

// Writer produces outcomes to the outcome topic through the prediction
// log's Kafka client and waits for the broker's acknowledgement. It is
// safe for concurrent use.
type Writer struct {
	producer *logging.Producer
	topic    string
}

// NewWriter returns a Writer producing to topic through p. With a nil p
// (Kafka off) every Write fails with logging.ErrClosed: Enabled says so
// beforehand.
func NewWriter(p *logging.Producer, topic string) *Writer {
	return &Writer{producer: p, topic: topic}
}

// Enabled reports whether w has a producer to write to.
func (w *Writer) Enabled() bool { return w != nil && w.producer != nil }

// Topic is the topic w produces to.
func (w *Writer) Topic() string { return w.topic }

// Write produces each of outcomes (validated: Validate) as Record makes
// its record, and waits until the broker has acknowledged or refused each,
// or until ctx is done: errs[i] is nil when outcomes[i] is stored.
func (w *Writer) Write(ctx context.Context, outcomes []*grovepb.Outcome) []error {
	errs := make([]error, len(outcomes))
	records := make([]*kgo.Record, 0, len(outcomes))
	at := make([]int, 0, len(outcomes)) // the outcome of each record
	for i, o := range outcomes {
		r, err := Record(o, w.topic)
		if err != nil {
			errs[i] = err
			continue
		}
		records, at = append(records, r), append(at, i)
	}
	for j, err := range w.producer.Produce(ctx, records) {
		errs[at[j]] = err
	}
	return errs
}
