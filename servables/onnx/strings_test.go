package onnx

import (
	"errors"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/groveml/grove/servables"
)

// gameScore is the ForestFlow gaming example's model, made by
// examples/models/make_game_model.py.
var gameScore = filepath.Join(bucket, "game_score", "model.onnx")

// gameExpect computes the game model's outputs for one row from the formula
// the script documents, independently of ONNX Runtime.
func gameExpect(category string, hp, attack, defence float64) (float64, string) {
	bias := map[string]float64{"human": 1.5, "monster": -0.5, "elf": 0.75}[category]
	side, ok := map[string]string{"human": "friend", "elf": "friend", "monster": "foe"}[category]
	if !ok {
		side = "unknown"
	}
	return 0.02*hp + 0.05*attack - 0.01*defence + bias, side
}

func TestStringInputsAndOutputsRunThroughONNXRuntime(t *testing.T) {
	m := load(t, gameScore, servables.LoadOptions{})
	md := m.Metadata()
	if md.Inputs[0].DType != servables.Bytes || md.Outputs[1].DType != servables.Bytes {
		t.Fatalf("metadata %+v: STRING inputs and outputs should be Bytes", md)
	}
	rows := [][]string{{"human1", "human"}, {"monster16", "monster"}, {"dragon", "wyrm"}, {"", "elf"}}
	nums := [][3]float64{{67.37, 25.2, 80.6}, {76.5, 62, 33.9}, {10, 20, 30}, {1, 2, 3}}
	var strs []string
	var flat []float64
	for i := range rows {
		strs = append(strs, rows[i]...)
		flat = append(flat, nums[i][:]...)
	}
	s, err := servables.NewStringTensor("String", []int64{4, 2}, strs)
	if err != nil {
		t.Fatal(err)
	}
	out := predict(t, m, s, tensor(t, "Float64", servables.Float64, []int64{4, 3}, flat...))
	if out[0].Name != "score" || out[1].Name != "side" || out[1].DType != servables.Bytes || !slices.Equal(out[1].Shape, []int64{4, 1}) {
		t.Fatalf("outputs %v %v %v / %v %v %v", out[0].Name, out[0].DType, out[0].Shape, out[1].Name, out[1].DType, out[1].Shape)
	}
	sides, err := out[1].Strings()
	if err != nil {
		t.Fatal(err)
	}
	var wantScore []float64
	var wantSide []string
	for i := range rows {
		sc, sd := gameExpect(rows[i][1], nums[i][0], nums[i][1], nums[i][2])
		wantScore, wantSide = append(wantScore, sc), append(wantSide, sd)
	}
	closeTo(t, "score", out[0].Float64s(), wantScore, 1e-6)
	if !slices.Equal(sides, wantSide) {
		t.Fatalf("side = %q, want %q", sides, wantSide)
	}
}

func TestStringInputErrorsAreTheCallersAndNameTheInput(t *testing.T) {
	m := load(t, gameScore, servables.LoadOptions{})
	nums := tensor(t, "Float64", servables.Float64, []int64{1, 3}, 1, 2, 3)
	nul, _ := servables.NewStringTensor("String", []int64{1, 2}, []string{"a\x00b", "human"})
	broken := servables.Tensor{Name: "String", DType: servables.Bytes, Shape: []int64{1, 2}, Data: []byte{5, 0, 0, 0, 'a'}}
	for _, tc := range []struct {
		name string
		in   servables.Tensor
		want string
	}{
		{"NUL byte", nul, `input "String": element 0 has a NUL byte at 1`},
		{"broken framing", broken, "has length 5, but only 1 bytes follow it"},
		{"numbers for strings", tensor(t, "String", servables.Float64, []int64{1, 2}, 1, 2), `input "String" is DOUBLE, the model takes BYTES`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := m.Predict(t.Context(), []servables.Tensor{tc.in, nums})
			if !errors.Is(err, servables.ErrInvalidInput) || !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), "String BYTES [-1 2]") {
				t.Fatalf("Predict = %v, want ErrInvalidInput with %q and the model's inputs", err, tc.want)
			}
		})
	}
}
