package main

import (
	"context"
	"math"
	"path/filepath"
	"testing"

	"github.com/groveml/grove/grovepb"
	"github.com/groveml/grove/logging"
	"github.com/groveml/grove/servables"
)

func TestReplayComparesBytesOutputsExactly(t *testing.T) {
	ctx := context.Background()
	sc, err := loadLocal(ctx, filepath.Join("..", "..", "examples", "bucket", "game_score"), 1)
	if err != nil {
		t.Fatal(err)
	}
	defer sc.close()
	strs, _ := servables.NewStringTensor("String", []int64{2, 2}, []string{"human1", "human", "monster16", "monster"})
	nums, _ := servables.NewTensor("Float64", servables.Float64, []int64{2, 3})
	copy(nums.Float64s(), []float64{67.37, 25.2, 80.6, 76.5, 62, 33.9})
	inputs := []servables.Tensor{strs, nums}
	outs, err := sc.s.Predict(ctx, inputs)
	if err != nil {
		t.Fatal(err)
	}
	ev := &grovepb.PredictionEvent{Served: true, Inputs: logging.TensorsToProto(inputs), Outputs: logging.TensorsToProto(outs)}

	s := newSummary(1e-9)
	if err := s.replay(ctx, sc, ev); err != nil {
		t.Fatal(err)
	}
	if s.Compared != 1 || s.Within != 1 || s.Values != 4 {
		t.Fatalf("same model: %+v", s)
	}
	// A logged side that differs is a difference, however alike the bytes.
	ev.Outputs[1].BytesData[0] = []byte("friendly")
	s = newSummary(1e-9)
	if err := s.replay(ctx, sc, ev); err != nil {
		t.Fatal(err)
	}
	if s.Compared != 1 || s.Within != 0 || !math.IsInf(float64(s.MaxAbsDiff), 1) {
		t.Fatalf("changed string: %+v", s)
	}
}
