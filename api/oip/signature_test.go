package oip

import (
	"fmt"
	"testing"

	"github.com/groveml/grove/servables"
)

func TestErrorsNameDatatypesInOIPTerms(t *testing.T) {
	spec := servables.TensorSpec{Name: "x", DType: servables.Float32, Shape: []int64{-1, 4}}
	err := fmt.Errorf("model m: %w", servables.InvalidInputf("input %q is %v, the model takes %v (%s)", "x", servables.Float64, servables.Float32, spec))
	want := `model m: invalid input: input "x" is FP64, the model takes FP32 (x FP32 [-1 4])`
	if got := errorText(err); got != want {
		t.Errorf("errorText = %q, want %q", got, want)
	}
	plain := fmt.Errorf("%w: FLOAT stays as the model said it", servables.ErrExecution)
	if got := errorText(plain); got != plain.Error() {
		t.Errorf("errorText changed another error: %q", got)
	}
}
