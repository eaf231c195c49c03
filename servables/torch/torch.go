package torch

// #cgo LDFLAGS: -ldl
// #include <stdlib.h>
// #include "dl.h"
import "C"

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"unsafe"

	"github.com/groveml/grove/servables"
)

// RuntimeName is the name the TorchScript runtime reports.
const RuntimeName = "torchscript"

// modelExtensions are the file name endings of a TorchScript model file.
var modelExtensions = []string{".pt", ".pth", ".torchscript"}

// Runtime loads TorchScript models with libtorch, through Grove's library
// over it (libgrove_torch.so, opened by the first Load). Its zero value is
// ready to use and finds the library with DefaultLibraryPath.
type Runtime struct {
	// LibraryPath is libgrove_torch.so, built from this package's shim
	// sources (scripts/torchshim.sh). Empty means DefaultLibraryPath().
	// The library is opened once per process: every Runtime value of the
	// process must name the same file.
	LibraryPath string
}

var _ servables.Runtime = Runtime{}

// Name returns "torchscript".
func (Runtime) Name() string { return RuntimeName }

// Accepts reports whether exactly one of files is a TorchScript model file:
// one ending in .pt, .pth or .torchscript, or, when none does, one whose
// content is a TorchScript archive (servables.ModelFiles); other files are
// ignored.
func (Runtime) Accepts(fsys fs.FS, files []string) bool {
	_, err := modelFile(fsys, files)
	return err == nil
}

// modelFile returns the one TorchScript file among files.
func modelFile(fsys fs.FS, files []string) (string, error) {
	found := servables.ModelFiles(fsys, files, servables.TorchScript, modelExtensions...)
	switch len(found) {
	case 1:
		return found[0], nil
	case 0:
		return "", fmt.Errorf("%w: no TorchScript file (%s, or a TorchScript archive by content) among %s", servables.ErrUnsupportedRuntime,
			strings.Join(modelExtensions, ", "), strings.Join(files, ", "))
	}
	return "", fmt.Errorf("%w: %d TorchScript files (%s), a model has exactly one",
		servables.ErrUnsupportedRuntime, len(found), strings.Join(found, ", "))
}

// Load loads the TorchScript file among files (see Accepts), puts it in eval mode and
// freezes it (falling back to the unfrozen module if freezing fails).
// opts.IntraOpThreads is applied to each forward call; see the package doc.
// opts.MissingValue is refused: TorchScript models have no missing values.
func (r Runtime) Load(ctx context.Context, dir string, files []string, opts servables.LoadOptions) (servables.Servable, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	rel, err := modelFile(os.DirFS(dir), files)
	if err != nil {
		return nil, err
	}
	if opts.IntraOpThreads < 0 {
		return nil, fmt.Errorf("torchscript: IntraOpThreads is %d, it has to be 0 or more", opts.IntraOpThreads)
	}
	if opts.MissingValue != nil {
		return nil, fmt.Errorf("torchscript: missing_value is %v: a TorchScript model takes no missing value (only XGBoost models do)", *opts.MissingValue)
	}
	if err := initTorch(r.LibraryPath); err != nil {
		return nil, err
	}
	file := filepath.Join(dir, filepath.FromSlash(rel))
	if _, err := os.Stat(file); err != nil {
		return nil, fmt.Errorf("torchscript: loading model: %w", err)
	}
	if err := checkPickles(file, opts.MaxModelBytes); err != nil {
		return nil, fmt.Errorf("torchscript: loading %s: %w", file, err)
	}
	cpath := C.CString(file)
	defer C.free(unsafe.Pointer(cpath))
	var frozen C.int32_t
	var cerr *C.char
	h := C.gt_load(cpath, &frozen, &cerr)
	if h == nil {
		msg := takeString(cerr)
		if strings.Contains(msg, "constants.pkl") {
			msg += " (this is not a TorchScript file: save models with torch.jit.save or ScriptModule.save, not torch.save)"
		}
		return nil, fmt.Errorf("torchscript: loading %s: %s", file, msg)
	}
	m := &Model{h: h, file: file, threads: max(opts.IntraOpThreads, 1), frozen: frozen != 0}
	if err := m.readSignature(); err != nil {
		C.gt_module_free(h)
		return nil, fmt.Errorf("torchscript: loading %s: %w", file, err)
	}
	return m, nil
}

// takeString returns a C string made by the shim and frees it.
func takeString(s *C.char) string {
	if s == nil {
		return "unknown error"
	}
	defer C.free(unsafe.Pointer(s))
	return C.GoString(s)
}

// Model is a loaded TorchScript module. Predict is safe for concurrent use;
// after Close it returns an error.
type Model struct {
	mu      sync.RWMutex // Predict holds it shared; Close exclusively
	h       *C.grove_module
	file    string
	threads int
	frozen  bool

	meta servables.Metadata
}

var _ servables.Servable = (*Model)(nil)

func (m *Model) readSignature() error {
	var nArgs, nRequired, nOutputs C.int32_t
	var cerr *C.char
	names := C.gt_signature(m.h, &nArgs, &nRequired, &nOutputs, &cerr)
	if names == nil {
		return errors.New(takeString(cerr))
	}
	m.meta = servables.Metadata{Runtime: RuntimeName, Inputs: []servables.TensorSpec{}, Outputs: []servables.TensorSpec{},
		Signature: servables.SignatureRuntime, ByPosition: true, UnnamedOutputs: true}
	if s := takeString(names); nArgs > 0 {
		for i, n := range strings.Split(s, "\n") {
			// Arguments with a default come last (TorchScript, like
			// Python, has no required argument after an optional one).
			m.meta.Inputs = append(m.meta.Inputs, servables.TensorSpec{Name: n, Optional: i >= int(nRequired)})
		}
	}
	for i := 0; i < int(nOutputs); i++ {
		m.meta.Outputs = append(m.meta.Outputs, servables.TensorSpec{Name: outputName(i)})
	}
	return nil
}

// outputName is the name of the i-th output tensor: output_0, output_1, ...
func outputName(i int) string { return "output_" + strconv.Itoa(i) }

// Metadata returns the runtime name, forward's argument names as inputs
// (those with a default value Optional), and output_0... as outputs when
// forward declares a Tensor or a Tuple of Tensors. TorchScript records no
// dtypes or shapes: they are Unknown and nil. ByPosition is set.
func (m *Model) Metadata() servables.Metadata { return m.meta }

// Frozen reports whether the model runs as a frozen module (see the package doc).
func (m *Model) Frozen() bool { return m.frozen }

// Predict runs forward on inputs and returns one tensor per output tensor,
// named output_0, output_1, ... Inputs are bound to forward's arguments by
// name when every input has a name, by position when none has (see
// servables.Bind); optional arguments left out take their defaults, which
// TorchScript allows only at the end. Errors wrap servables.ErrInvalidInput
// when the inputs do not fit forward's signature, or when libtorch refuses
// their shapes or dtypes while the model runs (runError); servables.ErrOutput
// when forward returns something other than a Tensor or a Tuple or List of
// Tensors of a supported dtype; and servables.ErrExecution, with torch's
// message, when the model fails to run.
func (m *Model) Predict(ctx context.Context, inputs []servables.Tensor) ([]servables.Tensor, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	inputs, err := m.bind(inputs)
	if err != nil {
		return nil, err
	}
	n := len(inputs)
	a := forwardArgsPool.Get().(*forwardArgs)
	defer forwardArgsPool.Put(a)
	a.reset(n)
	var pin runtime.Pinner
	defer pin.Unpin()
	defer clear(a.ptrs) // the pooled args must not keep the inputs alive, on any return
	for i, t := range inputs {
		if err := t.Validate(); err != nil {
			return nil, fmt.Errorf("%w: input %d (%s): %w", servables.ErrInvalidInput, i, t.Name, err)
		}
		if t.DType == servables.Bytes {
			return nil, fmt.Errorf("%w: input %d (%s) is BYTES; TorchScript models take numeric tensors only", servables.ErrInvalidInput, i, t.Name)
		}
		a.dtypes[i] = C.int32_t(t.DType)
		a.ndims[i] = C.int32_t(len(t.Shape))
		a.nbytes[i] = C.int64_t(len(t.Data))
		for _, d := range t.Shape {
			a.shapes = append(a.shapes, C.int64_t(d))
		}
		p := unsafe.Pointer(unsafe.SliceData(t.Data))
		pin.Pin(p)
		a.ptrs[i] = p
	}

	m.mu.RLock()
	defer m.mu.RUnlock()
	if m.h == nil {
		return nil, fmt.Errorf("torchscript: model %s is closed", m.file)
	}
	status := C.gt_forward(m.h, C.int32_t(n), first(a.dtypes), first(a.ndims), first(a.shapes),
		(*unsafe.Pointer)(first(a.ptrs)), first(a.nbytes), C.int32_t(m.threads), &a.res, &a.cerr)
	res, cerr := a.res, a.cerr
	switch status {
	case C.GROVE_OK:
	case C.GROVE_ERR_INPUT:
		return nil, fmt.Errorf("%w: %s", servables.ErrInvalidInput, takeString(cerr))
	case C.GROVE_ERR_OUTPUT:
		return nil, fmt.Errorf("%w: %s", servables.ErrOutput, takeString(cerr))
	default:
		return nil, m.runError(takeString(cerr), inputs)
	}
	defer C.gt_result_free(res)
	return copyOutputs(res)
}

// forwardArgs are the arrays one forward call hands the shim, pooled so
// that a call does not allocate them (they escape to the heap through cgo).
type forwardArgs struct {
	dtypes, ndims []C.int32_t
	nbytes        []C.int64_t
	ptrs          []unsafe.Pointer
	shapes        []C.int64_t
	res           *C.grove_result
	cerr          *C.char
}

// forwardArgsPool holds *forwardArgs.
var forwardArgsPool = sync.Pool{New: func() any { return new(forwardArgs) }}

// reset sizes a for n inputs.
func (a *forwardArgs) reset(n int) {
	if cap(a.dtypes) < n {
		a.dtypes, a.ndims = make([]C.int32_t, n), make([]C.int32_t, n)
		a.nbytes, a.ptrs = make([]C.int64_t, n), make([]unsafe.Pointer, n)
	}
	a.dtypes, a.ndims, a.nbytes, a.ptrs = a.dtypes[:n], a.ndims[:n], a.nbytes[:n], a.ptrs[:n]
	a.shapes = a.shapes[:0]
	a.res, a.cerr = nil, nil
}

// copyOutputs copies the shim's output tensors into Go-allocated tensors.
func copyOutputs(res *C.grove_result) ([]servables.Tensor, error) {
	views := unsafe.Slice(res.tensors, int(res.n))
	outs := make([]servables.Tensor, len(views))
	for i, v := range views {
		shape := unsafe.Slice((*int64)(unsafe.Pointer(v.shape)), int(v.ndim))
		t, err := servables.NewTensor(outputName(i), servables.DType(v.dtype), shape)
		if err != nil {
			return nil, fmt.Errorf("%w: output %d: %w", servables.ErrOutput, i, err)
		}
		if len(t.Data) != int(v.nbytes) {
			return nil, fmt.Errorf("%w: output %d has %d bytes, shape %v of %v needs %d",
				servables.ErrOutput, i, v.nbytes, t.Shape, t.DType, len(t.Data))
		}
		copy(t.Data, unsafe.Slice((*byte)(v.data), len(t.Data)))
		outs[i] = t
	}
	return outs, nil
}

// bind puts inputs in the order of forward's arguments (servables.Bind):
// those given, up to the last one given; an optional argument left out
// before one that is given is an error, as forward takes them by position.
func (m *Model) bind(inputs []servables.Tensor) ([]servables.Tensor, error) {
	if servables.InOrder(m.meta.Inputs, inputs) {
		return inputs, nil // the common case, without allocating
	}
	idx, err := servables.Bind(m.meta.Inputs, inputs)
	if err != nil {
		return nil, err
	}
	last := -1
	for j, i := range idx {
		if i >= 0 {
			last = j
		}
	}
	ordered := make([]servables.Tensor, last+1)
	for j := range ordered {
		if idx[j] < 0 {
			return nil, servables.InvalidInputf("input %q is left out but %q, after it in forward, is given: TorchScript takes optional inputs in order; the model's inputs are: %s",
				m.meta.Inputs[j].Name, m.meta.Inputs[last].Name, m.meta.Inputs)
		}
		ordered[j] = inputs[idx[j]]
		ordered[j].Name = m.meta.Inputs[j].Name
	}
	return ordered, nil
}

// callerErrors are the beginnings or parts of libtorch's messages that say
// the inputs do not fit the model's operators (shapes, ranks, dtypes or
// index values), which is the caller's mistake, not the model's.
var callerErrors = []string{
	"mat1 and mat2 shapes cannot be multiplied", // linear layers, matmul
	"size mismatch",
	"must match the size of tensor", // broadcasting
	"Sizes of tensors must match",   // cat, stack
	"is invalid for input of size",  // view, reshape
	"Dimension out of range",
	"dimension out of range",
	"expected input[",             // convolutions: channels
	"must be equal to input_size", // recurrent layers
	"should contain",              // batch norm: features
	"must be a 1D tensor",
	"must be a 2D tensor",
	"must be a 3D tensor",
	"Expected 2D",
	"Expected 3D",
	"Expected 4D",
	"expected 2D",
	"expected 3D",
	"expected 4D",
	"too many indices for tensor",
	"index out of range in self", // embedding ids
	"The expanded size of the tensor",
	"expected scalar type",
	"Expected object of scalar type",
	"must have the same dtype",
	"to have the same dtype",
	"to have same dtype",
	"Found dtype",
	"with dtype",
	"to have one of the following scalar types",
	"tensors used as indices must be",
	"Input type (",
}

// runError classifies a failure of forward: a libtorch message that says
// the inputs do not fit the operators is an InvalidInput error naming the
// inputs sent; anything else is ErrExecution.
func (m *Model) runError(msg string, inputs []servables.Tensor) error {
	for _, s := range callerErrors {
		if strings.Contains(msg, s) {
			sent := slices.Clone(inputs)
			for i := range sent {
				if sent[i].Name == "" && i < len(m.meta.Inputs) {
					sent[i].Name = m.meta.Inputs[i].Name // bound by position
				}
			}
			return servables.InvalidInputf("the model cannot run on the inputs sent (%s): %s; the model's inputs are: %s",
				servables.Sent(sent), msg, m.meta.Inputs)
		}
	}
	return fmt.Errorf("%w: %s", servables.ErrExecution, msg)
}

// ompTeamSize applies IntraOpThreads n to the calling OS thread, as Predict
// does, and returns the OpenMP team size a parallel region there gets.
func ompTeamSize(n int) int { return int(C.gt_omp_team_size(C.int32_t(n))) }

// first returns a pointer to s[0], or nil for an empty s.
func first[T any](s []T) *T {
	if len(s) == 0 {
		return nil
	}
	return &s[0]
}

// Close frees the module. It waits for running Predict calls; later calls
// return an error. Closing twice is harmless.
func (m *Model) Close() error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.h != nil {
		C.gt_module_free(m.h)
		m.h = nil
	}
	return nil
}
