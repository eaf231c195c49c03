package main

import (
	"bytes"
	"context"
	"encoding/json"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/groveml/grove/grovepb"
	"github.com/groveml/grove/logging"
	"github.com/groveml/grove/servables"
)

func TestReplayComparesBytesOutputsExactly(t *testing.T) {
	ctx := context.Background()
	sc, err := loadLocal(ctx, filepath.Join("..", "..", "examples", "bucket", "game_score"), servables.LoadOptions{IntraOpThreads: 1})
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

// TestReplayMissingValueReachesTheModel: --missing-value loads an XGBoost
// model with it, so that the -999 inputs of a model trained with
// DMatrix(missing=-999) score as python3-xgboost scores them; without it
// some score otherwise. A value that is not a finite float32, or the flag
// with --url, is a usage error.
func TestReplayMissingValueReachesTheModel(t *testing.T) {
	ctx := context.Background()
	testdata := filepath.Join("..", "..", "servables", "xgboost", "testdata")
	dir := t.TempDir()
	data, err := os.ReadFile(filepath.Join(testdata, "missing_sentinel.ubj"))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "model.ubj"), data, 0o644); err != nil {
		t.Fatal(err)
	}
	raw, err := os.ReadFile(filepath.Join(testdata, "missing_sentinel.expected.json"))
	if err != nil {
		t.Fatal(err)
	}
	var expected struct {
		Input      [][]*float64 `json:"input"`
		Prediction []float64    `json:"prediction"`
	}
	if err := json.Unmarshal(raw, &expected); err != nil {
		t.Fatal(err)
	}
	in, _ := servables.NewTensor("input", servables.Float32, []int64{int64(len(expected.Input)), 5})
	for r, row := range expected.Input {
		for c, v := range row {
			in.Float32s()[r*5+c] = float32(math.NaN())
			if v != nil {
				in.Float32s()[r*5+c] = float32(*v)
			}
		}
	}
	differ := func(opts servables.LoadOptions) int {
		sc, err := loadLocal(ctx, dir, opts)
		if err != nil {
			t.Fatal(err)
		}
		defer sc.close()
		out, err := sc.s.Predict(ctx, []servables.Tensor{in})
		if err != nil {
			t.Fatal(err)
		}
		n := 0
		for i, v := range out[0].Float32s() {
			if math.Abs(float64(v)-expected.Prediction[i]) > 1e-6 {
				n++
			}
		}
		return n
	}
	missing := -999.0
	if n := differ(servables.LoadOptions{MissingValue: &missing}); n != 0 {
		t.Errorf("with --missing-value -999: %d of %d predictions differ from python3-xgboost's", n, len(expected.Prediction))
	}
	if n := differ(servables.LoadOptions{}); n == 0 {
		t.Error("without --missing-value: every prediction as python3-xgboost's with missing=-999")
	}
	for _, args := range [][]string{
		{"--missing-value", "x", "--model", dir},
		{"--missing-value", "1e39", "--model", dir},
		{"--missing-value", "-999", "--url", "http://127.0.0.1:1"},
	} {
		var out, errb bytes.Buffer
		if code := replay(args, &out, &errb); code != 2 || !strings.Contains(errb.String(), "missing-value") {
			t.Errorf("grove replay %q: exit %d, %s; want a usage error naming --missing-value", args, code, errb.String())
		}
	}
}

// --max-model-bytes is replay's max_model_bytes: a TorchScript model whose
// deflated zip entries inflate to more fails its load naming the limit, and one
// within it loads (the server's max_model_bytes may be set above the 2 GiB
// default, and replay must load what it serves), as its help says. Not
// positive is a usage error.
func TestReplayMaxModelBytesBoundsATorchScriptModelInflated(t *testing.T) {
	model := filepath.Join("..", "..", "examples", "bucket", "pctr_v2") + string(filepath.Separator)
	run := func(args ...string) (int, string) {
		var out, errb bytes.Buffer
		code := replay(append([]string{"--brokers", "127.0.0.1:1", "--topic", "t", "--model", model}, args...), &out, &errb)
		return code, errb.String()
	}
	if code, msg := run("--max-model-bytes", "1024"); code != 1 || !strings.Contains(msg, "which brings the archive's deflated entries past max_model_bytes (1 KiB) inflated") {
		t.Errorf("--max-model-bytes 1024: exit %d, %s; want the load refused naming the limit", code, msg)
	}
	sc, err := loadLocal(context.Background(), model, servables.LoadOptions{IntraOpThreads: 1, MaxModelBytes: 64 << 20})
	if err != nil {
		t.Fatalf("within the limit: %v", err)
	}
	sc.close()
	for _, v := range []string{"0", "-1", "x"} {
		if code, msg := run("--max-model-bytes", v); code != 2 || !strings.Contains(msg, "max-model-bytes") {
			t.Errorf("--max-model-bytes %s: exit %d, %s; want a usage error naming it", v, code, msg)
		}
	}
	var out, help bytes.Buffer
	replay([]string{"-h"}, &out, &help)
	if !strings.Contains(help.String(), "TorchScript model's deflated zip entries may inflate to") {
		t.Errorf("grove replay -h does not say --max-model-bytes bounds the deflated entries:\n%s", help.String())
	}
}
