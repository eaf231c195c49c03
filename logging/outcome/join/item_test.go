package join_test

import (
	"fmt"
	"math"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/groveml/grove/actors"
	"github.com/groveml/grove/conf"
	"github.com/groveml/grove/conf/modelconfig"
	"github.com/groveml/grove/grovepb"
	"github.com/groveml/grove/logging"
	"github.com/groveml/grove/logging/outcome/join"
	"github.com/groveml/grove/servables"
)

// TestOutcomeNamingItem2MatchesOnlyItem2sPredictionFromTheEvent logs a
// B&A batch of three items of one request as the prediction log does
// (actors.PredictionEvent, encoded and decoded as the topic carries it), item i
// predicting p[i], and reports a click naming item 2: only item 2's
// prediction is positive, found by the item the event carries.
func TestOutcomeNamingItem2MatchesOnlyItem2sPredictionFromTheEvent(t *testing.T) {
	t0 := time.Date(2026, 5, 1, 12, 0, 0, 0, time.UTC)
	rule := modelconfig.Outcomes{Label: "click", Kind: modelconfig.OutcomeBinary, Window: 30 * time.Minute,
		Missing: modelconfig.OutcomeMissingNegative, Lateness: time.Minute}
	j, err := join.New(join.Options{Rules: []join.Rule{{ModelPath: "pctr/", Outcomes: rule}}, Store: join.NewMemStore()})
	if err != nil {
		t.Fatal(err)
	}
	p := []float64{0.1, 0.2, 0.9}
	for item, v := range p {
		out, _ := servables.NewTensor("output_0", servables.Float64, []int64{1})
		out.Float64s()[0] = v
		ev := actors.PredictionEvent(&actors.Request{API: "ba", ModelPath: "pctr/", RequestID: "r1", Item: item},
			&actors.Result{ModelPath: "pctr/", Outputs: []servables.Tensor{out}}, true)
		ev.EventId, ev.Timestamp = fmt.Sprintf("e%d", item), timestamppb.New(t0)
		value, err := logging.Encode(ev, conf.EncodingProto)
		if err != nil {
			t.Fatal(err)
		}
		read, err := logging.Decode(value, []kgo.RecordHeader{{Key: logging.HeaderEncoding, Value: []byte(logging.EncodingProto)}})
		if err != nil {
			t.Fatal(err)
		}
		if err := j.AddPrediction(t0, join.Prediction{Event: read}); err != nil {
			t.Fatal(err)
		}
	}
	click := &grovepb.Outcome{OutcomeId: "o1", RequestId: "r1", Item: 2, EventTime: timestamppb.New(t0.Add(time.Minute)),
		Labels: map[string]float64{"click": 1}}
	if err := j.AddOutcome(t0.Add(time.Minute), click); err != nil {
		t.Fatal(err)
	}
	if err := j.Advance(t0.Add(2 * time.Hour)); err != nil { // past the window and the lateness
		t.Fatal(err)
	}
	snap, err := j.Snapshot()
	if err != nil {
		t.Fatal(err)
	}
	if len(snap.Series) != 1 || snap.Counters.Unmatched != 0 {
		t.Fatalf("series %v, counters %+v", snap.Series, snap.Counters)
	}
	f := snap.Series[0].Stats.SinceValid
	// Item 2 (0.9) positive, items 0 (0.1) and 1 (0.2) negative.
	want := (-math.Log(0.9) - math.Log(0.8) - math.Log(0.9)) / 3
	if f.Count != 3 || f.BinaryFigures == nil || f.Positives != 1 || f.LogLoss == nil || math.Abs(*f.LogLoss-want) > 1e-9 {
		t.Fatalf("since_valid %+v (log loss %v), want 3 scored, 1 positive, log loss %v (item 2's the positive)", f, f.LogLoss, want)
	}
}
