package runtimes

import (
	"slices"
	"testing"
)

// TestBuiltinNamesTorchThenONNXThenXGBoost: the build's runtimes are
// TorchScript, ONNX Runtime and XGBoost, in that order (a model's files go
// to the first that accepts them).
func TestBuiltinNamesTorchThenONNXThenXGBoost(t *testing.T) {
	var names []string
	for _, r := range Builtin("") {
		names = append(names, r.Name())
	}
	if want := []string{"torchscript", "onnx", "xgboost"}; !slices.Equal(names, want) {
		t.Errorf("runtimes %v, want %v", names, want)
	}
}
