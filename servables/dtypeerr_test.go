package servables

import (
	"errors"
	"fmt"
	"testing"
)

func TestDTypeErrorsRenderWithTheCallersNames(t *testing.T) {
	inner := Errorf(ErrInvalidInput, "input %q is %v, the model takes %v; inputs: %s", "x", Float64, Float32, specList{{Name: "x", DType: Float32}})
	err := fmt.Errorf("model m/: %w", inner)
	if got, want := err.Error(), `model m/: invalid input: input "x" is DOUBLE, the model takes FLOAT; inputs: x FLOAT`; got != want {
		t.Errorf("Error: %q, want %q", got, want)
	}
	oip := func(d DType) string { return map[DType]string{Float32: "FP32", Float64: "FP64"}[d] }
	if got, want := RenderDTypes(err, oip), `model m/: invalid input: input "x" is FP64, the model takes FP32; inputs: x FP32`; got != want {
		t.Errorf("RenderDTypes: %q, want %q", got, want)
	}
	if KindOf(err) != InvalidInput || !errors.Is(err, ErrInvalidInput) {
		t.Errorf("kind %v", KindOf(err))
	}
	plain := errors.New("no types here")
	if RenderDTypes(plain, oip) != "no types here" {
		t.Error("a plain error changed")
	}
}
