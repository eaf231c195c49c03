// Package faulty is a fault-injection runtime for tests: its models echo
// their first input, and panic, fail or stall on demand. It is compiled into
// grove only with the build tag faultinject.
//
// A faulty model is one file ending in ".faulty" holding JSON:
//
//	{"panic_on": 13, "error_on": 7, "delay_ms": 5, "fail_load": false, "panic_load": false, "by_position": false, "add": 0.2}
//
// Predict returns a copy of its first input, with add added to each
// element of a float input (FP32, FP64); it panics when any element of
// that input equals panic_on, returns an execution error when one equals
// error_on, and sleeps delay_ms first. Its metadata names one input and one
// output "x" and says nothing of their datatypes and shapes. fail_load
// makes its load fail, panic_load makes its load panic. by_position
// makes it take inputs by position as TorchScript does
// (servables.Metadata.ByPosition).
package faulty

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"time"

	"github.com/groveml/grove/servables"
)

// Runtime loads ".faulty" models.
type Runtime struct{}

// Name is "faulty".
func (Runtime) Name() string { return "faulty" }

// Accepts a model made of exactly one ".faulty" file.
func (Runtime) Accepts(_ fs.FS, files []string) bool {
	return len(files) == 1 && strings.HasSuffix(files[0], ".faulty")
}

// spec is the content of a ".faulty" file.
type spec struct {
	PanicOn   *float64 `json:"panic_on"`
	ErrorOn   *float64 `json:"error_on"`
	DelayMs   int      `json:"delay_ms"`
	FailLoad  bool     `json:"fail_load"`
	PanicLoad bool     `json:"panic_load"`
	ByPos     bool     `json:"by_position"`
	Add       float64  `json:"add"`
}

// Load reads the model's behaviour from its file.
func (Runtime) Load(_ context.Context, dir string, files []string, _ servables.LoadOptions) (servables.Servable, error) {
	data, err := os.ReadFile(filepath.Join(dir, files[0]))
	if err != nil {
		return nil, err
	}
	var sp spec
	dec := json.NewDecoder(strings.NewReader(string(data)))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&sp); err != nil {
		return nil, fmt.Errorf("faulty model %s: %w", files[0], err)
	}
	if sp.FailLoad {
		return nil, errors.New("faulty model asked to fail loading")
	}
	if sp.PanicLoad {
		panic("faulty model asked to panic while loading")
	}
	return &model{sp: sp}, nil
}

type model struct {
	sp     spec
	closed atomic.Bool
}

func (m *model) Metadata() servables.Metadata {
	return servables.Metadata{Runtime: "faulty", Inputs: []servables.TensorSpec{{Name: "x"}}, Outputs: []servables.TensorSpec{{Name: "x"}},
		Signature: servables.SignatureRuntime, ByPosition: m.sp.ByPos}
}

func (m *model) Predict(_ context.Context, inputs []servables.Tensor) ([]servables.Tensor, error) {
	if m.closed.Load() {
		return nil, errors.New("model is closed")
	}
	if len(inputs) == 0 {
		return nil, fmt.Errorf("%w: the model takes at least one input", servables.ErrInvalidInput)
	}
	if m.sp.DelayMs > 0 {
		time.Sleep(time.Duration(m.sp.DelayMs) * time.Millisecond)
	}
	in := inputs[0]
	for i := range in.Len() {
		v := in.Float64At(i)
		if m.sp.PanicOn != nil && v == *m.sp.PanicOn {
			panic(fmt.Sprintf("faulty model: input contains %v", v))
		}
		if m.sp.ErrorOn != nil && v == *m.sp.ErrorOn {
			return nil, fmt.Errorf("%w: faulty model: input contains %v", servables.ErrExecution, v)
		}
	}
	out, err := servables.NewTensor("", in.DType, in.Shape)
	if err != nil {
		return nil, err
	}
	copy(out.Data, in.Data)
	if m.sp.Add != 0 {
		switch out.DType {
		case servables.Float32:
			xs := out.Float32s()
			for i := range xs {
				xs[i] += float32(m.sp.Add)
			}
		case servables.Float64:
			xs := out.Float64s()
			for i := range xs {
				xs[i] += m.sp.Add
			}
		}
	}
	return []servables.Tensor{out}, nil
}

func (m *model) Close() error {
	m.closed.Store(true)
	return nil
}
