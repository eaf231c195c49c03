package runtimes

import (
	"slices"
	"testing"
)

// TestBuiltinNamesTorchThenONNX: the build's runtimes are TorchScript and
// ONNX Runtime, in that order (a model's files go to the first that
// accepts them).
func TestBuiltinNamesTorchThenONNX(t *testing.T) {
	var names []string
	for _, r := range Builtin("") {
		names = append(names, r.Name())
	}
	if want := []string{"torchscript", "onnx"}; !slices.Equal(names, want) {
		t.Errorf("runtimes %v, want %v", names, want)
	}
}
