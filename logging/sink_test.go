package logging

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/groveml/grove/actors"
	"github.com/groveml/grove/actors/quality"
	"github.com/groveml/grove/conf"
	"github.com/groveml/grove/servables"
)

func TestEventCarriesRequestAnswerAndCleanedConfigs(t *testing.T) {
	x, _ := servables.NewTensor("", servables.Float32, []int64{1, 2})
	copy(x.Float32s(), []float32{1, 2})
	y, _ := servables.NewTensor("output_0", servables.Float64, []int64{1})
	y.Float64s()[0] = 0.5
	req := &actors.Request{API: "ba", ModelPath: "m/", RequestID: "r1", Inputs: []servables.Tensor{x},
		Configs: map[string]string{"user_id": "u\xff1"}}
	res := &actors.Result{ModelPath: "m/", Checksum: "abc", Outputs: []servables.Tensor{y}, Queued: time.Millisecond, Compute: 2 * time.Millisecond}
	ev := Event(req, res, true)
	if ev.GetModelPath() != "m/" || ev.GetModelChecksum() != "abc" || !ev.GetServed() || ev.GetApi() != "ba" || ev.GetRequestId() != "r1" {
		t.Fatalf("event %v", ev)
	}
	if got := ev.GetInputs()[0].GetFloatData(); len(got) != 2 || got[1] != 2 {
		t.Errorf("inputs %v", ev.GetInputs())
	}
	if got := ev.GetOutputs()[0].GetDoubleData(); len(got) != 1 || got[0] != 0.5 {
		t.Errorf("outputs %v", ev.GetOutputs())
	}
	if ev.GetConfigs()["user_id"] != "u\uFFFD1" {
		t.Errorf("config not cleaned to valid UTF-8: %q", ev.GetConfigs()["user_id"])
	}
	if ev.GetComputeLatency().AsDuration() != 2*time.Millisecond || ev.GetError() != nil {
		t.Errorf("latency %v error %v", ev.GetComputeLatency(), ev.GetError())
	}
}

func TestEventCarriesTheRequestsBatchItemInProtoAndJSON(t *testing.T) {
	y, _ := servables.NewTensor("output_0", servables.Float64, []int64{1})
	for _, item := range []int{0, 1, 2} {
		ev := Event(&actors.Request{API: "ba", ModelPath: "m/", RequestID: "r1", Item: item}, &actors.Result{ModelPath: "m/", Outputs: []servables.Tensor{y}}, true)
		if ev.GetItem() != int64(item) {
			t.Errorf("item %d: event's item %d", item, ev.GetItem())
		}
		js, err := Encode(ev, conf.EncodingJSON)
		if err != nil {
			t.Fatal(err)
		}
		// protojson leaves a default out and writes an int64 as a string.
		var fields map[string]any
		if err := json.Unmarshal(js, &fields); err != nil {
			t.Fatal(err)
		}
		if v, ok := fields["item"]; ok != (item != 0) || (ok && v != strconv.Itoa(item)) {
			t.Errorf("item %d: JSON %s", item, js)
		}
		back, err := Decode(js, []kgo.RecordHeader{{Key: HeaderEncoding, Value: []byte(EncodingJSON)}})
		if err != nil || back.GetItem() != int64(item) {
			t.Errorf("item %d: decoded back %v, %v", item, back.GetItem(), err)
		}
	}
}

func TestEventClassifiesErrorsWithTheB_ATypes(t *testing.T) {
	for err, want := range map[error]string{
		fmt.Errorf("%w: x", actors.ErrModelNotFound):   "MODEL_NOT_FOUND",
		fmt.Errorf("%w: x", servables.ErrInvalidInput): "INPUT_PARSING",
		fmt.Errorf("%w: x", servables.ErrOutput):       "OUTPUT_PARSING",
		fmt.Errorf("%w: x", actors.ErrModelCrashed):    "MODEL_EXECUTION",
		fmt.Errorf("%w: x", actors.ErrOverloaded):      "MODEL_EXECUTION",
		fmt.Errorf("%w: x", servables.ErrExecution):    "MODEL_EXECUTION",
		fmt.Errorf("x: %w", context.DeadlineExceeded):  "MODEL_EXECUTION",
		fmt.Errorf("%w: x", actors.ErrStopped):         "MODEL_EXECUTION",
	} {
		ev := Event(&actors.Request{}, &actors.Result{Err: err}, true)
		if ev.GetError().GetType() != want || ev.GetError().GetMessage() != err.Error() {
			t.Errorf("%v: error %v, want type %s", err, ev.GetError(), want)
		}
	}
}

func TestNilSinkAndNoneLevelLogNothing(t *testing.T) {
	var s *Sink
	s.LogPrediction(&actors.Request{}, &actors.Result{}, true) // must not panic
	(&Sink{Direct: Policy{Level: LevelFull}}).LogPrediction(&actors.Request{}, &actors.Result{}, true)
}

// A compared shadow execution's event names the answer it was compared
// with and carries the comparison's figures, through both encodings.
func TestShadowEventCarriesItsComparison(t *testing.T) {
	y, _ := servables.NewTensor("p", servables.Float32, []int64{2, 1})
	req := &actors.Request{API: "forestflow", ModelPath: "b/", RequestID: "r7", Contract: "ads/p/1", Release: "v2"}
	res := &actors.Result{ModelPath: "b/", Outputs: []servables.Tensor{y}, Comparison: &actors.ShadowComparison{
		RequestID: "r7", Release: "v1", ChampionCompute: 3 * time.Millisecond, Tolerance: 0.01,
		Outputs: []quality.OutputDiff{{Name: "p", Rows: 2, Elements: 2, SumAbsDiff: 0.4, MaxAbsDiff: 0.2, Score: true, Agree: 1},
			{Name: "extra", Mismatch: "the champion has no such output"}}}}
	ev := Event(req, res, false)
	for _, enc := range []conf.Encoding{conf.EncodingProto, conf.EncodingJSON} {
		v, err := Encode(ev, enc)
		if err != nil {
			t.Fatal(enc, err)
		}
		got, err := Decode(v, nil)
		if err != nil {
			t.Fatal(enc, err)
		}
		c := got.GetComparison()
		if got.GetServed() || got.GetComparedRequestId() != "r7" || got.GetComparedReleaseVersion() != "v1" || c.GetChampionFailed() ||
			c.GetChampionComputeLatency().AsDuration() != 3*time.Millisecond || c.GetTolerance() != 0.01 || len(c.GetOutputs()) != 2 {
			t.Fatalf("%s: decoded %v", enc, got)
		}
		p, extra := c.GetOutputs()[0], c.GetOutputs()[1]
		if p.GetName() != "p" || p.GetRows() != 2 || p.GetMeanAbsDiff() != 0.2 || p.GetMaxAbsDiff() != 0.2 || !p.GetScore() ||
			p.GetRowsAgreeing() != 1 || p.GetRowsWithinTolerance() != 0 || p.GetMismatch() != "" {
			t.Errorf("%s: output p %v", enc, p)
		}
		if extra.GetName() != "extra" || extra.GetMismatch() != "the champion has no such output" {
			t.Errorf("%s: output extra %v", enc, extra)
		}
	}
	// A served event, and a shadow event not compared, carry none of it.
	res.Comparison = nil
	if ev := Event(req, res, false); ev.GetComparedRequestId() != "" || ev.GetComparison() != nil {
		t.Errorf("uncompared event %v", ev)
	}
}
