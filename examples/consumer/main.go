// Command consumer is a minimal reader of Grove's prediction log, to start
// a consumer of your own from. It reads the topic from the beginning with
// franz-go and prints, for each event, its model path, record key, whether
// it was served, and its first output value:
//
//	go run ./examples/consumer -brokers 127.0.0.1:9092 -topic grove.predictions
//
// Records are grove.v1.PredictionEvent messages (grovepb/proto/grove/v1/
// prediction_event.proto, Go types in github.com/groveml/grove/grovepb).
// The "grove-encoding" header says how the value is encoded: "proto"
// (binary protobuf) or "json" (protojson, snake_case field names). The key
// is the request's key features joined by the configured separator, or
// null. Delivery is at least once: deduplicate on event_id if it matters.
// logging.Decode(value, headers) does the decoding below in one call.
package main

import (
	"context"
	"flag"
	"fmt"
	"log"
	"os"
	"os/signal"
	"strconv"

	"github.com/twmb/franz-go/pkg/kgo"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"

	"github.com/groveml/grove/grovepb"
)

func main() {
	brokers := flag.String("brokers", "127.0.0.1:9092", "Kafka seed broker host:port")
	topic := flag.String("topic", "grove.predictions", "prediction log topic")
	flag.Parse()

	// Add kgo.ConsumerGroup("name") to share the work and commit offsets.
	cl, err := kgo.NewClient(kgo.SeedBrokers(*brokers), kgo.ConsumeTopics(*topic),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	if err != nil {
		log.Fatal(err)
	}
	defer cl.Close()

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	for {
		fetches := cl.PollFetches(ctx)
		if ctx.Err() != nil {
			return
		}
		fetches.EachError(func(t string, p int32, err error) { log.Printf("fetching %s/%d: %v", t, p, err) })
		fetches.EachRecord(func(r *kgo.Record) {
			ev, err := decode(r)
			if err != nil {
				log.Printf("offset %d: %v", r.Offset, err)
				return
			}
			first := "-" // no output: the event logged an error
			if out := ev.GetOutputs(); len(out) > 0 {
				first = firstValue(out[0])
			}
			fmt.Printf("model=%s key=%q served=%t first_output=%s\n", ev.GetModelPath(), r.Key, ev.GetServed(), first)
		})
	}
}

// decode decodes a record value in the encoding its header names.
func decode(r *kgo.Record) (*grovepb.PredictionEvent, error) {
	ev := new(grovepb.PredictionEvent)
	encoding := "proto" // records without the header are protobuf
	for _, h := range r.Headers {
		if h.Key == "grove-encoding" {
			encoding = string(h.Value)
		}
	}
	switch encoding {
	case "proto":
		return ev, proto.Unmarshal(r.Value, ev)
	case "json":
		return ev, protojson.UnmarshalOptions{DiscardUnknown: true}.Unmarshal(r.Value, ev)
	}
	return nil, fmt.Errorf("unknown encoding %q", encoding)
}

// firstValue formats a tensor's first value, from the field of its datatype.
func firstValue(t *grovepb.Tensor) string {
	switch {
	case len(t.GetFloatData()) > 0:
		return fmt.Sprint(t.GetFloatData()[0])
	case len(t.GetDoubleData()) > 0:
		return fmt.Sprint(t.GetDoubleData()[0])
	case len(t.GetInt32Data()) > 0:
		return fmt.Sprint(t.GetInt32Data()[0])
	case len(t.GetInt64Data()) > 0:
		return fmt.Sprint(t.GetInt64Data()[0])
	case len(t.GetBytesData()) > 0: // BYTES: a string of any bytes
		return strconv.Quote(string(t.GetBytesData()[0]))
	}
	return "-"
}
