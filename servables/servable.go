// Package servables defines the small interface every model runtime
// implements, and the tensor type that flows between the APIs, the model
// actors and the runtimes.
package servables

import (
	"context"
	"fmt"
	"io/fs"
	"path"
	"strings"
)

// Servable is one loaded model: it answers predictions until it is closed.
// Predict may be called from several goroutines at once; Close is called once,
// after the last Predict has returned.
type Servable interface {
	// Metadata describes the model's inputs and outputs.
	Metadata() Metadata
	// Predict runs the model on inputs and returns its outputs. Errors
	// wrap ErrInvalidInput when the inputs are the caller's fault, ErrOutput
	// when the model produced something Grove cannot return, and
	// ErrExecution when the model failed to run; an error that wraps
	// nothing counts as ErrExecution (see KindOf). Predict does not start
	// when ctx is already done.
	Predict(ctx context.Context, inputs []Tensor) ([]Tensor, error)
	// Close releases the model's memory.
	Close() error
}

// Runtime loads one kind of model file (TorchScript, ONNX, ...).
type Runtime interface {
	// Name is the runtime's name as shown in status and metrics, e.g. "torchscript".
	Name() string
	// Accepts reports whether this runtime loads a model made of files
	// (slash-separated paths relative to the model's root directory, which
	// fsys holds): by a model file's extension, or, for files without one
	// the runtime knows, by their content (see ModelFiles and Sniff).
	Accepts(fsys fs.FS, files []string) bool
	// Load loads the model stored under dir. files lists its files relative to dir.
	Load(ctx context.Context, dir string, files []string, opts LoadOptions) (Servable, error)
}

// ThreadStarter is implemented by a runtime whose Load, with some
// options, starts threads that later run the model's forward calls (its
// own thread pool). Grove runs loads at a lower CPU priority
// (internal/lowprio), which threads started during the load inherit, so
// such a load runs at normal priority.
type ThreadStarter interface {
	// StartsThreads reports whether Load with opts starts such threads.
	StartsThreads(opts LoadOptions) bool
}

// LoadOptions are the per-model settings a runtime honours.
type LoadOptions struct {
	// IntraOpThreads is the number of threads one forward call may use; 0 means 1.
	IntraOpThreads int
	// MissingValue is the model entry's missing_value: an input value the
	// model takes as missing, as it takes NaN (XGBoost's DMatrix missing);
	// nil for none. Only runtimes of models with missing values (XGBoost)
	// take one; the others refuse it.
	MissingValue *float64
	// Checksum identifies the content of the model's files (Grove passes
	// the model checksum it verified), so that a runtime may reuse what
	// it learned from loading the same content before; empty when unknown.
	Checksum string
	// MaxModelBytes is the server's max_model_bytes: a runtime that
	// inflates compressed model files (TorchScript's zip archive) holds
	// their inflated size to it; 0 means DefaultMaxModelBytes.
	MaxModelBytes int64
}

// DefaultMaxModelBytes is max_model_bytes's default, 2 GiB.
const DefaultMaxModelBytes = 2 << 30

// Metadata describes a model's signature. Dimensions of -1 are dynamic.
type Metadata struct {
	Runtime string       `json:"runtime"`
	Inputs  []TensorSpec `json:"inputs"`
	Outputs []TensorSpec `json:"outputs"`
	// Signature says where the datatypes and shapes come from:
	// SignatureRuntime, SignatureDeclared or SignatureWarmUp (signature.go).
	Signature string `json:"signature,omitempty"`
	// ByPosition reports that the runtime's own calling convention passes
	// inputs and outputs by position (TorchScript's forward; XGBoost's
	// predict, one matrix in and one array out): protocols
	// that follow it (the B&A API, as the inference sidecar does for
	// PyTorch) bind such a model's inputs by position whatever their
	// names, and a declared signature may name its outputs.
	ByPosition bool `json:"-"`
	// UnnamedOutputs is set when the model's outputs have no names of
	// their own: a TorchScript forward returns a Tensor or a tuple, whose
	// elements the runtime names output_0, output_1, ... for the protocols
	// that need a name (OIP). The B&A sidecar's PyTorch answers carry no
	// tensor_name, so Grove's B&A answers leave these names out. A declared
	// signature that names the outputs clears it.
	UnnamedOutputs bool `json:"-"`
	// OutputsDeclared is set when the outputs are declared (Declare):
	// Signed holds the model's answers to them. Outputs learned
	// from the warm-up only describe the model.
	OutputsDeclared bool `json:"-"`
	// Parameters are what else the runtime reads from the model file that
	// its users may want to see (an XGBoost model's objective and feature
	// names); nil when it has nothing to add.
	Parameters map[string]string `json:"parameters,omitempty"`
}

// TensorSpec describes one input or output of a model. DType is Unknown and
// Shape nil where nothing tells them (TorchScript does not record them; a
// declared or learned signature does).
type TensorSpec struct {
	Name  string  `json:"name"`
	DType DType   `json:"datatype"`
	Shape []int64 `json:"shape"`
	// Optional marks an input the model can run without (a forward
	// argument with a default value).
	Optional bool `json:"optional,omitempty"`
	// AlsoTakes is a datatype besides DType that the model takes for this
	// input and converts to DType itself (an XGBoost model's FP64 input,
	// converted to float32 as XGBoost's DMatrix does); Unknown for none.
	// Requests are checked against both; the metadata APIs show DType.
	AlsoTakes DType `json:"-"`
}

// ErrUnsupportedRuntime marks a model whose format no runtime in this
// build loads; a caller who sends such a model made an InvalidInput
// mistake. (The other sentinels, and Kind, are in errors.go.)
var ErrUnsupportedRuntime = NewError(InvalidInput, "unsupported runtime")

// Registry is the ordered list of runtimes a server can load models with.
type Registry []Runtime

// Find returns the first runtime that accepts files (held by fsys, as for
// Runtime.Accepts), or an error wrapping ErrUnsupportedRuntime that says
// why none does.
func (r Registry) Find(fsys fs.FS, files []string) (Runtime, error) {
	for _, rt := range r {
		if rt.Accepts(fsys, files) {
			return rt, nil
		}
	}
	for _, f := range files {
		if path.Base(f) == "saved_model.pb" {
			return nil, fmt.Errorf("%w: %s is a TensorFlow SavedModel: TensorFlow runtime not available in this build", ErrUnsupportedRuntime, f)
		}
	}
	names := make([]string, len(r))
	for i, rt := range r {
		names[i] = rt.Name()
	}
	return nil, fmt.Errorf("%w: no runtime accepts files %s, by extension or by content (runtimes in this build: %s)",
		ErrUnsupportedRuntime, strings.Join(files, ", "), strings.Join(names, ", "))
}
