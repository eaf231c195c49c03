package runtimes

import (
	"os"
	"path/filepath"
	"slices"
	"testing"
	"testing/fstest"
)

// TestBuiltinNamesTorchThenONNXThenXGBoost: the build's runtimes are
// TorchScript, ONNX Runtime and XGBoost, in that order (a model's files go
// to the first that accepts them).
func TestBuiltinNamesTorchThenONNXThenXGBoost(t *testing.T) {
	var names []string
	for _, r := range Builtin(Libraries{}) {
		names = append(names, r.Name())
	}
	if want := []string{"torchscript", "onnx", "xgboost"}; !slices.Equal(names, want) {
		t.Errorf("runtimes %v, want %v", names, want)
	}
}

// TestBuiltinTakesXGBoostModelsOfEitherFormat: an XGBoost model saved as
// JSON or UBJSON goes to the xgboost runtime, by its name or without
// one; TorchScript and ONNX, asked first, do not take it.
func TestBuiltinTakesXGBoostModelsOfEitherFormat(t *testing.T) {
	for _, file := range []string{"squarederror.json", "squarederror.ubj", "cat_binary_logistic.ubj"} {
		data, err := os.ReadFile(filepath.Join("..", "xgboost", "testdata", file))
		if err != nil {
			t.Fatal(err)
		}
		for _, name := range []string{file, "model"} {
			rt, err := Builtin(Libraries{}).Find(fstest.MapFS{name: {Data: data}}, []string{name})
			if err != nil || rt.Name() != "xgboost" {
				t.Errorf("%s as %s: runtime %v, error %v; want xgboost", file, name, rt, err)
			}
		}
	}
}
