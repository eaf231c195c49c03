package main

import (
	"encoding/json"
	"math"
	"slices"
	"testing"

	"github.com/groveml/grove/servables"
)

func TestReplayURLSendsInt64InputsExactly(t *testing.T) {
	ids, _ := servables.NewTensor("ids", servables.Int64, []int64{3})
	copy(ids.Int64s(), []int64{1<<53 + 1, math.MaxInt64, math.MinInt64})
	var req struct {
		Request []struct {
			Tensors []struct {
				TensorContent []string `json:"tensor_content"`
			} `json:"tensors"`
		} `json:"request"`
	}
	body := appendBARequest(nil, "m/", []servables.Tensor{ids}, nil)
	if err := json.Unmarshal(body, &req); err != nil {
		t.Fatalf("%v: %s", err, body)
	}
	got := req.Request[0].Tensors[0].TensorContent
	want := []string{"9007199254740993", "9223372036854775807", "-9223372036854775808"}
	if !slices.Equal(got, want) {
		t.Errorf("INT64 values sent as %q, want %q", got, want)
	}
}
