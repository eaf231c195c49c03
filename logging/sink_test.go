package logging

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/groveml/grove/actors"
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
