package torch

import (
	"context"
	"errors"
	"path/filepath"
	"strings"
	"testing"

	"github.com/groveml/grove/servables"
)

func TestBytesInputsAreRefusedByName(t *testing.T) {
	m := load(t, filepath.Join(bucket, "pctr_v1", "model.pt"), servables.LoadOptions{})
	s, _ := servables.NewStringTensor("x", []int64{1, 64}, make([]string, 64))
	_, err := m.Predict(context.Background(), []servables.Tensor{s})
	if !errors.Is(err, servables.ErrInvalidInput) || !strings.Contains(err.Error(), `input 0 (x) is BYTES; TorchScript models take numeric tensors only`) {
		t.Fatalf("Predict = %v", err)
	}
}
