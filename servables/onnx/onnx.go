package onnx

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"reflect"
	"runtime"
	"slices"
	"strings"
	"sync"
	"unsafe"

	ort "github.com/yalue/onnxruntime_go"

	"github.com/groveml/grove/servables"
)

// RuntimeName is the name the ONNX runtime reports.
const RuntimeName = "onnx"

// LibraryVersion is the ONNX Runtime release whose C API
// github.com/yalue/onnxruntime_go v1.27.0 is built against (ORT_API_VERSION
// 24), and the one scripts/onnxruntime.sh fetches. Older libraries fail to
// load; newer 1.x ones still answer that API version.
const LibraryVersion = "1.24.1"

// LibraryEnv names the environment variable that overrides the library path.
const LibraryEnv = "GROVE_ONNXRUNTIME_LIB"

// DefaultLibraryRel is where scripts/onnxruntime.sh (run by `make deps`)
// puts the library, relative to the repository root.
const DefaultLibraryRel = ".cache/onnxruntime/" + LibraryVersion + "/libonnxruntime.so.1"

// ErrLibrary marks a model that could not load because the ONNX Runtime
// shared library is missing or cannot be loaded.
var ErrLibrary = errors.New("ONNX Runtime library not available")

// Runtime loads ONNX models with ONNX Runtime. Its zero value is ready to use
// and finds the library with DefaultLibraryPath.
type Runtime struct {
	// LibraryPath is the ONNX Runtime shared library (libonnxruntime.so.1 of
	// release LibraryVersion). Empty means DefaultLibraryPath(). The library
	// is loaded by the first Load of an ONNX model, once per process: every
	// Runtime value of the process must name the same file.
	LibraryPath string
	// Info, when set, keeps each model content's inputs and outputs by
	// its LoadOptions.Checksum, so that loading that content again skips
	// the session made only to read them. Nil reads them at every Load.
	Info *InfoCache
}

var _ servables.Runtime = Runtime{}

// Name returns "onnx".
func (Runtime) Name() string { return RuntimeName }

// Accepts reports whether exactly one of files is an ONNX model file: one
// ending in .onnx (any case), or, when none does, one whose content is an
// ONNX ModelProto (servables.ModelFiles); other files (external weights,
// READMEs) are ignored.
func (Runtime) Accepts(fsys fs.FS, files []string) bool {
	_, err := modelFile(fsys, files)
	return err == nil
}

// modelFile returns the one ONNX file among files.
func modelFile(fsys fs.FS, files []string) (string, error) {
	found := servables.ModelFiles(fsys, files, servables.ONNX, ".onnx")
	switch len(found) {
	case 1:
		return found[0], nil
	case 0:
		return "", fmt.Errorf("%w: no ONNX file (.onnx, or an ONNX ModelProto by content) among %s", servables.ErrUnsupportedRuntime, strings.Join(files, ", "))
	}
	return "", fmt.Errorf("%w: %d ONNX files (%s), a model has exactly one",
		servables.ErrUnsupportedRuntime, len(found), strings.Join(found, ", "))
}

// ReleaseLibraryRel is where a release keeps the library, relative to the
// directory of the file that loads it: bin/grove finds lib/ beside bin/ (and
// a library in lib/, such as the processor, finds its own directory).
const ReleaseLibraryRel = "../lib/libonnxruntime.so.1"

// places are where the library may be (servables.LibraryPlaces).
var places = servables.LibraryPlaces{Env: LibraryEnv, ReleaseRel: ReleaseLibraryRel, CacheRel: DefaultLibraryRel}

// DefaultLibraryPath is FindLibrary for the running executable.
func DefaultLibraryPath() string { return places.ForExecutable() }

// FindLibrary returns the ONNX Runtime library a program at self (the path
// of the executable or shared library that loads it; empty when unknown)
// should load, the first of: $GROVE_ONNXRUNTIME_LIB when it is set;
// ReleaseLibraryRel from self's directory (the release layout, so an
// unpacked release runs from any directory); DefaultLibraryRel in the
// working directory and each of its parents, then in self's directory and
// each of its parents (so bin/grove, `go test` in any package and `make run`
// find the repository's .cache). Failing all of them it returns the relative
// path DefaultLibraryRel itself, which the load error then names. Symlinks
// in self are resolved first, so a link to bin/grove finds the release's lib/.
func FindLibrary(self string) string { return places.FindLibrary(self) }

// findLibrary is FindLibrary with its inputs passed in: the environment
// variable's value, the working directory and a test for a file.
func findLibrary(env, wd, self string, exists func(string) bool) string {
	return places.Find(env, wd, self, exists)
}

// The ONNX Runtime environment is process-wide in onnxruntime_go (one
// dlopen'ed library, one OrtEnv). lib guards its initialisation, which happens
// at most once successfully; a failed attempt (library missing) is retried by
// the next Load, so `make deps` while the server runs is enough.
var lib struct {
	mu       sync.Mutex
	path     string // the library file loaded (symlinks resolved); "" before
	external bool   // initialised by someone else in this process
}

// Library returns the path and version of the ONNX Runtime library this
// process loaded, or empty strings before the first ONNX model loads.
func Library() (path, version string) {
	lib.mu.Lock()
	defer lib.mu.Unlock()
	if lib.path == "" && !lib.external {
		return "", ""
	}
	return lib.path, ort.GetVersion()
}

// howToGet ends every library error.
func howToGet() string {
	return fmt.Sprintf("Grove needs ONNX Runtime %s: run `make deps` (scripts/onnxruntime.sh fetches it into %s), set %s to a libonnxruntime.so.1 of that release, or keep it in lib/ beside bin/ as a release does",
		LibraryVersion, DefaultLibraryRel, LibraryEnv)
}

// ensureLibrary loads the library at p (DefaultLibraryPath when empty) and
// creates the ORT environment, unless that is done already with the same file.
func ensureLibrary(p string) error {
	if p == "" {
		p = DefaultLibraryPath()
	}
	if _, err := os.Stat(p); err != nil {
		if abs, aerr := filepath.Abs(p); aerr == nil {
			p = abs
		}
		if errors.Is(err, os.ErrNotExist) {
			return fmt.Errorf("%w: %s does not exist; %s", ErrLibrary, p, howToGet())
		}
		return fmt.Errorf("%w: %v; %s", ErrLibrary, err, howToGet())
	}
	real, err := filepath.EvalSymlinks(p)
	if err == nil {
		real, err = filepath.Abs(real)
	}
	if err != nil {
		return fmt.Errorf("%w: %v; %s", ErrLibrary, err, howToGet())
	}
	lib.mu.Lock()
	defer lib.mu.Unlock()
	switch {
	case lib.external:
		return nil
	case lib.path == real:
		return nil
	case lib.path != "":
		return fmt.Errorf("%w: this process already loaded ONNX Runtime from %s and cannot also load %s (one library per process)", ErrLibrary, lib.path, real)
	case ort.IsInitialized():
		// Another package of this process set up onnxruntime_go: use it.
		lib.external = true
		return nil
	}
	ort.SetSharedLibraryPath(real)
	if err := ort.InitializeEnvironment(ort.WithLogLevelError()); err != nil {
		return fmt.Errorf("%w: loading %s: %v; %s", ErrLibrary, real, err, howToGet())
	}
	lib.path = real
	return nil
}

// spec is one model input or output as ONNX Runtime describes it.
type spec struct {
	name    string
	tensor  bool // a tensor (not a sequence, map, optional, ...)
	ortType ort.TensorElementDataType
	dtype   servables.DType // Unknown when Grove has no such type
	shape   []int64         // -1 for a dynamic dimension; empty for rank 0 or unknown
}

func (s spec) TensorSpec() servables.TensorSpec {
	ts := servables.TensorSpec{Name: s.name, DType: s.dtype}
	if s.tensor {
		ts.Shape = append([]int64{}, s.shape...)
	}
	return ts
}

// String describes the spec for error messages: `x FLOAT [-1 64]`.
func (s spec) String() string { return s.FormatDTypes(servables.DType.String) }

// FormatDTypes describes the spec with its data type named by name (ONNX's
// name for a type Grove does not have).
func (s spec) FormatDTypes(name func(servables.DType) string) string {
	if !s.tensor {
		return s.name + " (not a tensor)"
	}
	t := ortTypeName(s.ortType)
	if s.dtype != servables.Unknown {
		t = name(s.dtype)
	}
	return fmt.Sprintf("%s %s %v", s.name, t, s.shape)
}

// specs lists a model's inputs for error messages.
type specs []spec

// FormatDTypes lists the specs, comma-separated ("none" for none).
func (l specs) FormatDTypes(name func(servables.DType) string) string {
	if len(l) == 0 {
		return "none"
	}
	parts := make([]string, len(l))
	for i, s := range l {
		parts[i] = s.FormatDTypes(name)
	}
	return strings.Join(parts, ", ")
}

// dtypes maps ONNX element types to Grove's.
var dtypes = map[ort.TensorElementDataType]servables.DType{
	ort.TensorElementDataTypeFloat:  servables.Float32,
	ort.TensorElementDataTypeDouble: servables.Float64,
	ort.TensorElementDataTypeInt8:   servables.Int8,
	ort.TensorElementDataTypeInt16:  servables.Int16,
	ort.TensorElementDataTypeInt32:  servables.Int32,
	ort.TensorElementDataTypeInt64:  servables.Int64,
	ort.TensorElementDataTypeBool:   servables.Bool,
	ort.TensorElementDataTypeUint8:  servables.Uint8,
	ort.TensorElementDataTypeString: servables.Bytes,
	// onnxruntime_go has no Go type for these: inputs go in as their bytes,
	// outputs come back in buffers Predict allocates (see halfOutput).
	ort.TensorElementDataTypeFloat16:  servables.Float16,
	ort.TensorElementDataTypeBFloat16: servables.BFloat16,
}

// ortTypes is dtypes inverted.
var ortTypes = func() map[servables.DType]ort.TensorElementDataType {
	m := make(map[servables.DType]ort.TensorElementDataType, len(dtypes))
	for o, d := range dtypes {
		m[d] = o
	}
	return m
}()

// ortTypeName is an ONNX element type's name as ONNX spells it (FLOAT16, BOOL, ...).
func ortTypeName(t ort.TensorElementDataType) string {
	return strings.TrimPrefix(t.String(), "ONNX_TENSOR_ELEMENT_DATA_TYPE_")
}

func specsOf(infos []ort.InputOutputInfo) []spec {
	specs := make([]spec, len(infos))
	for i, info := range infos {
		s := spec{name: info.Name, tensor: info.OrtValueType == ort.ONNXTypeTensor, ortType: info.DataType}
		if s.tensor {
			s.dtype = dtypes[info.DataType]
			s.shape = make([]int64, len(info.Dimensions))
			for k, d := range info.Dimensions {
				s.shape[k] = max(d, -1)
			}
		}
		specs[i] = s
	}
	return specs
}

// sessionOptions makes the options of a model's session: intra-op threads,
// one inter-op thread (sequential execution), and no spinning of idle pool
// threads (see the package doc).
func sessionOptions(threads int) (*ort.SessionOptions, error) {
	o, err := ort.NewSessionOptions()
	if err != nil {
		return nil, err
	}
	for _, set := range []func() error{
		func() error { return o.SetIntraOpNumThreads(threads) },
		func() error { return o.SetInterOpNumThreads(1) },
		func() error { return o.SetExecutionMode(ort.ExecutionModeSequential) },
		func() error { return o.AddSessionConfigEntry("session.intra_op.allow_spinning", "0") },
	} {
		if err := set(); err != nil {
			o.Destroy()
			return nil, err
		}
	}
	return o, nil
}

// loadError explains an ONNX Runtime failure to read a model file.
func loadError(file string, err error) error {
	msg := err.Error()
	err = errors.New(strings.TrimPrefix(msg, "Error loading temporary session: "))
	if strings.Contains(msg, "INVALID_PROTOBUF") || strings.Contains(msg, "Protobuf parsing failed") {
		return fmt.Errorf("onnx: loading %s: not a valid ONNX model (protobuf parsing failed): %v", file, err)
	}
	return fmt.Errorf("onnx: loading %s: %v", file, err)
}

// StartsThreads reports whether Load with opts starts the session's own
// intra-op pool (opts.IntraOpThreads above 1), whose threads run the
// model's forward calls later (servables.ThreadStarter).
func (Runtime) StartsThreads(opts servables.LoadOptions) bool { return opts.IntraOpThreads > 1 }

// Load creates an ONNX Runtime session for the ONNX file among files (see Accepts), on
// the CPU, with opts.IntraOpThreads intra-op threads (0 means 1) and one
// inter-op thread (opts.MissingValue is refused: ONNX models have no
// missing values). The first Load of the process loads the library (see
// Runtime.LibraryPath); when it is missing the error wraps ErrLibrary and
// says how to get it.
func (r Runtime) Load(ctx context.Context, dir string, files []string, opts servables.LoadOptions) (servables.Servable, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	rel, err := modelFile(os.DirFS(dir), files)
	if err != nil {
		return nil, err
	}
	if opts.IntraOpThreads < 0 {
		return nil, fmt.Errorf("onnx: IntraOpThreads is %d, it has to be 0 or more", opts.IntraOpThreads)
	}
	if opts.MissingValue != nil {
		return nil, fmt.Errorf("onnx: missing_value is %v: an ONNX model takes no missing value (only XGBoost models do)", *opts.MissingValue)
	}
	file := filepath.Join(dir, filepath.FromSlash(rel))
	if _, err := os.Stat(file); err != nil {
		return nil, fmt.Errorf("onnx: loading model: %w", err)
	}
	if err := ensureLibrary(r.LibraryPath); err != nil {
		return nil, fmt.Errorf("onnx: loading %s: %w", file, err)
	}

	ins, outs, err := r.Info.read(file, opts.Checksum)
	if err != nil {
		return nil, err
	}

	threads := max(opts.IntraOpThreads, 1)
	so, err := sessionOptions(threads)
	if err != nil {
		return nil, fmt.Errorf("onnx: session options: %w", err)
	}
	defer so.Destroy()
	m := &Model{file: file, threads: threads, inputs: specs(specsOf(ins)), outputs: specsOf(outs)}
	inNames := make([]string, len(m.inputs))
	for i, s := range m.inputs {
		inNames[i] = s.name
	}
	outNames := make([]string, len(m.outputs))
	for i, s := range m.outputs {
		outNames[i] = s.name
	}
	if len(outNames) == 0 {
		return nil, fmt.Errorf("onnx: loading %s: the model has no outputs", file)
	}
	m.session, err = ort.NewDynamicAdvancedSession(file, inNames, outNames, so)
	if err != nil {
		return nil, loadError(file, err)
	}
	m.meta = servables.Metadata{Runtime: RuntimeName, Inputs: []servables.TensorSpec{}, Outputs: []servables.TensorSpec{}, Signature: servables.SignatureRuntime}
	for _, s := range m.inputs {
		m.meta.Inputs = append(m.meta.Inputs, s.TensorSpec())
	}
	for _, s := range m.outputs {
		m.meta.Outputs = append(m.meta.Outputs, s.TensorSpec())
	}
	for _, s := range m.outputs {
		if isHalf(s.dtype) || (s.tensor && len(s.shape) == 0) {
			m.inDims, m.outDims, err = graphDimsOf(file)
			if err != nil {
				_ = m.session.Destroy()
				return nil, fmt.Errorf("onnx: loading %s: reading the declared shapes of its outputs: %w", file, err)
			}
			break
		}
	}
	return m, nil
}

// scalarOutput reports whether output i is declared a rank-0 tensor that
// Predict allocates before the run (see newScalarOutput).
func (m *Model) scalarOutput(i int) bool {
	s := m.outputs[i]
	dims := m.outDims[s.name]
	return s.tensor && len(s.shape) == 0 && dims != nil && len(dims) == 0 && !isHalf(s.dtype) && s.dtype != servables.Bytes
}

// newScalarOutput allocates a rank-0 output of dt, zero, for Run to
// write: onnxruntime_go v1.27.0 cannot convert a rank-0 tensor ONNX Runtime
// allocates, and when that conversion fails Run returns without
// converting, or releasing, the outputs after it.
func newScalarOutput(dt servables.DType) (ort.Value, error) {
	var zero [8]byte // as wide as any dtype newScalar takes
	return newScalar(dt, zero[:])
}

// Model is a loaded ONNX model: one ONNX Runtime session. Predict is safe for
// concurrent use; after Close it returns an error.
type Model struct {
	mu      sync.RWMutex // Predict holds it shared; Close exclusively
	session *ort.DynamicAdvancedSession
	file    string
	threads int

	inputs          specs
	outputs         []spec
	meta            servables.Metadata
	inDims, outDims map[string][]dim // declared shapes, read when an output is a 2-byte float or a declared scalar
}

var _ servables.Servable = (*Model)(nil)

// Metadata returns the model's inputs and outputs with their names, dtypes
// (Unknown for element types Grove has no counterpart of) and shapes (-1 for
// dynamic dimensions; nil for inputs or outputs that are not tensors).
func (m *Model) Metadata() servables.Metadata { return m.meta }

// Threads is the model's intra-op thread count.
func (m *Model) Threads() int { return m.threads }

// invalid returns an error wrapping servables.ErrInvalidInput that ends with
// the inputs the model expects; its data types are named as the protocol
// that renders it names them (servables.DTypeError).
func (m *Model) invalid(format string, args ...any) error {
	return servables.Errorf(servables.ErrInvalidInput, format+"; the model's inputs are: %s", append(args, m.inputs)...)
}

// match puts inputs in the model's input order: by name, or by position
// when every input is unnamed and there are as many as the model has. It
// checks each against its spec: dtype, rank and fixed dimensions.
func (m *Model) match(inputs []servables.Tensor) ([]servables.Tensor, error) {
	for i, t := range inputs {
		if err := t.Validate(); err != nil {
			return nil, m.invalid("input %d (%q): %v", i, t.Name, err)
		}
	}
	unnamed := true
	for _, t := range inputs {
		if t.Name != "" {
			unnamed = false
		}
	}
	ordered := make([]servables.Tensor, len(m.inputs))
	if unnamed && len(inputs) == len(m.inputs) {
		copy(ordered, inputs)
	} else {
		seen := make([]bool, len(m.inputs))
		for i, t := range inputs {
			if t.Name == "" {
				if unnamed {
					return nil, m.invalid("got %d unnamed input tensors, the model takes %d (unnamed inputs are matched by position, named ones by name)", len(inputs), len(m.inputs))
				}
				return nil, m.invalid("input %d has no name while others have one (name every input, or none to give them in the model's order)", i)
			}
			j := m.inputIndex(t.Name)
			if j < 0 {
				return nil, m.invalid("unknown input %q", t.Name)
			}
			if seen[j] {
				return nil, m.invalid("input %q is given twice", t.Name)
			}
			seen[j] = true
			ordered[j] = t
		}
		var missing []string
		for j, ok := range seen {
			if !ok {
				missing = append(missing, fmt.Sprintf("%q", m.inputs[j].name))
			}
		}
		if len(missing) > 0 {
			return nil, m.invalid("missing input %s", strings.Join(missing, ", "))
		}
	}
	for j, t := range ordered {
		s := m.inputs[j]
		switch {
		case !s.tensor || s.dtype == servables.Unknown:
			return nil, m.invalid("input %q is %s in the model, a type Grove cannot send", s.name, s)
		case len(t.Shape) == 0 && isHalf(t.DType):
			return nil, m.invalid("input %q is a rank-0 %v: onnxruntime_go cannot pass scalars of 2-byte floats", s.name, t.DType)
		case t.DType != s.dtype:
			return nil, m.invalid("input %q is %v, the model takes %v", s.name, t.DType, s.dtype)
		case len(s.shape) == 0:
			// Rank 0 (a scalar) or a model that does not record the
			// rank: ONNX Runtime checks, see runError.
		case len(t.Shape) != len(s.shape):
			return nil, m.invalid("input %q has shape %v (rank %d), the model takes rank %d %v", s.name, t.Shape, len(t.Shape), len(s.shape), s.shape)
		default:
			for k, d := range s.shape {
				if d >= 0 && t.Shape[k] != d {
					return nil, m.invalid("input %q has shape %v, the model takes %v (dimension %d must be %d)", s.name, t.Shape, s.shape, k, d)
				}
			}
		}
	}
	return ordered, nil
}

func (m *Model) inputIndex(name string) int {
	for j, s := range m.inputs {
		if s.name == name {
			return j
		}
	}
	return -1
}

// ortInputErrors are the beginnings of ONNX Runtime's own input checks'
// messages (InferenceSession::ValidateInputs): the caller's fault.
var ortInputErrors = []string{"Invalid rank for input", "Got invalid dimensions for input", "Unexpected input data type", "Invalid input name"}

// runError classifies an error of Session::Run.
func (m *Model) runError(err error) error {
	msg := err.Error()
	for _, s := range ortInputErrors {
		if strings.Contains(msg, s) {
			return m.invalid("%s", msg)
		}
	}
	return fmt.Errorf("%w: %s", servables.ErrExecution, msg)
}

// newValue wraps t's data, without copying it when it is aligned for its
// dtype, in an ONNX Runtime tensor.
func newValue(t servables.Tensor, pin *runtime.Pinner) (ort.Value, error) {
	if t.DType == servables.Bytes {
		return newStrings(t)
	}
	data := t.Data
	if uintptr(unsafe.Pointer(unsafe.SliceData(data)))%uintptr(t.DType.Size()) != 0 {
		c, err := servables.NewTensor(t.Name, t.DType, t.Shape)
		if err != nil {
			return nil, err
		}
		copy(c.Data, data)
		data = c.Data
	}
	if len(t.Shape) == 0 {
		return newScalar(t.DType, data)
	}
	pin.Pin(unsafe.SliceData(data))
	return ort.NewCustomDataTensor(ort.Shape(t.Shape), data, ortTypes[t.DType])
}

// newStrings copies a Bytes tensor into an ONNX Runtime STRING tensor.
// onnxruntime_go v1.27.0 fills string tensors from NUL-terminated C
// strings (FillStringTensor) and makes tensors of rank 1 or more only, so an
// element holding a NUL byte, or a rank-0 input, is refused as the caller's
// error (a badInput, which Predict reports with the model's inputs).
func newStrings(t servables.Tensor) (ort.Value, error) {
	if len(t.Shape) == 0 {
		return nil, badInput{"a rank-0 (scalar) STRING input cannot be passed to ONNX Runtime through onnxruntime_go; give it shape [1]"}
	}
	elems, err := t.Strings()
	if err != nil {
		return nil, badInput{err.Error()}
	}
	for k, e := range elems {
		if i := strings.IndexByte(e, 0); i >= 0 {
			return nil, badInput{fmt.Sprintf("element %d has a NUL byte at %d; ONNX STRING inputs are passed as C strings and cannot hold NUL", k, i)}
		}
	}
	v, err := ort.NewStringTensor(ort.Shape(t.Shape))
	if err != nil {
		return nil, err
	}
	if err := v.SetContents(elems); err != nil {
		v.Destroy()
		return nil, err
	}
	return v, nil
}

// badInput is an input newValue cannot pass for a reason that is the
// caller's.
type badInput struct{ msg string }

func (e badInput) Error() string { return e.msg }

// newScalar makes a rank-0 value (onnxruntime_go's tensors need a dimension).
func newScalar(dt servables.DType, data []byte) (ort.Value, error) {
	p := unsafe.Pointer(unsafe.SliceData(data))
	switch dt {
	case servables.Float32:
		return ort.NewScalar(*(*float32)(p))
	case servables.Float64:
		return ort.NewScalar(*(*float64)(p))
	case servables.Int8:
		return ort.NewScalar(*(*int8)(p))
	case servables.Int16:
		return ort.NewScalar(*(*int16)(p))
	case servables.Int32:
		return ort.NewScalar(*(*int32)(p))
	case servables.Int64:
		return ort.NewScalar(*(*int64)(p))
	case servables.Bool:
		return ort.NewScalar(*(*byte)(p) != 0)
	case servables.Uint8:
		return ort.NewScalar(*(*uint8)(p))
	}
	return nil, fmt.Errorf("unsupported data type %v", dt)
}

// Predict runs the model. Inputs are matched to the model's inputs by name;
// when every input is unnamed and there are exactly as many as the model
// has, by position. Errors wrap servables.ErrInvalidInput when the inputs do
// not fit (missing, unknown or repeated name, dtype, rank, a fixed
// dimension), naming the inputs the model expects; servables.ErrOutput when
// a wanted output is not a tensor of a dtype Grove returns;
// servables.ErrExecution, with ONNX Runtime's message, when the model fails
// to run. Outputs are named as in the model and come in the model's output
// order: every output, or only those ctx names (servables.WithOutputs), so
// an output Grove cannot convert fails only the calls that want it.
func (m *Model) Predict(ctx context.Context, inputs []servables.Tensor) ([]servables.Tensor, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	ordered, err := m.match(inputs)
	if err != nil {
		return nil, err
	}
	names, filtered := servables.OutputsFrom(ctx)
	wanted := func(i int) bool { return !filtered || slices.Contains(names, m.outputs[i].name) }
	for i, s := range m.outputs {
		if wanted(i) && s.tensor && s.dtype == servables.Unknown && s.ortType != ort.TensorElementDataTypeUndefined {
			// Fail before running: onnxruntime_go cannot even convert
			// some such outputs.
			return nil, unsupportedOutput(s.name, s.ortType)
		}
	}
	m.mu.RLock()
	defer m.mu.RUnlock()
	if m.session == nil {
		return nil, fmt.Errorf("onnx: model %s is closed", m.file)
	}

	var pin runtime.Pinner
	defer pin.Unpin()
	values := make([]ort.Value, len(ordered))
	defer destroyAll(values)
	for i, t := range ordered {
		v, err := newValue(t, &pin)
		if err != nil {
			var bad badInput
			if errors.As(err, &bad) {
				return nil, m.invalid("input %q: %s", m.inputs[i].name, bad.msg)
			}
			return nil, fmt.Errorf("onnx: input %q: %w", m.inputs[i].name, err)
		}
		values[i] = v
	}
	outs := make([]ort.Value, len(m.outputs))
	var halves []servables.Tensor // made for the first 2-byte float output
	for i, s := range m.outputs {
		if m.scalarOutput(i) {
			if outs[i], err = newScalarOutput(s.dtype); err != nil {
				destroyAll(outs)
				return nil, fmt.Errorf("onnx: output %q: %w", s.name, err)
			}
			continue
		}
		if !isHalf(s.dtype) {
			continue
		}
		if halves == nil {
			halves = make([]servables.Tensor, len(m.outputs))
		}
		if halves[i], outs[i], err = m.halfOutput(i, ordered, &pin); err != nil {
			destroyAll(outs)
			return nil, err
		}
	}
	err = m.session.Run(values, outs)
	defer destroyAll(outs) // Run fills outs even when a later conversion fails
	if err != nil {
		return nil, m.runError(err)
	}
	result := make([]servables.Tensor, 0, len(outs))
	for i, v := range outs {
		switch {
		case !wanted(i):
		case isHalf(m.outputs[i].dtype):
			result = append(result, halves[i])
		default:
			t, err := toTensor(m.outputs[i].name, v)
			if err != nil {
				return nil, err
			}
			result = append(result, t)
		}
	}
	return result, nil
}

func isHalf(dt servables.DType) bool { return dt == servables.Float16 || dt == servables.BFloat16 }

// halfOutput allocates output i, a 2-byte float tensor, for Run to write:
// onnxruntime_go cannot hand back such a tensor when ONNX Runtime
// allocates it. Its shape comes from the model's declaration: fixed
// dimensions, and symbolic ones ("batch") that an input declares too take
// that input's size; any other makes it an error wrapping
// servables.ErrOutput. ONNX Runtime checks the shape when it writes the
// output.
func (m *Model) halfOutput(i int, inputs []servables.Tensor, pin *runtime.Pinner) (servables.Tensor, ort.Value, error) {
	s := m.outputs[i]
	declared := m.outDims[s.name]
	if len(declared) == 0 {
		return servables.Tensor{}, nil, fmt.Errorf("%w: output %q is a %v tensor of unknown or zero rank, which Grove cannot allocate before the run (onnxruntime_go cannot return 2-byte float tensors it did not get)",
			servables.ErrOutput, s.name, s.dtype)
	}
	sizes := map[string]int64{}
	for j, in := range m.inputs {
		for k, d := range m.inDims[in.name] {
			if d.param != "" && k < len(inputs[j].Shape) {
				if _, ok := sizes[d.param]; !ok {
					sizes[d.param] = inputs[j].Shape[k]
				}
			}
		}
	}
	shape := make([]int64, len(declared))
	for k, d := range declared {
		switch size, ok := sizes[d.param]; {
		case d.value > 0:
			shape[k] = d.value
		case d.param != "" && ok:
			shape[k] = size
		default:
			return servables.Tensor{}, nil, fmt.Errorf("%w: output %q is a %v tensor whose dimension %d (%q) no input declares, so Grove cannot size it before the run (onnxruntime_go cannot return 2-byte float tensors it did not get)",
				servables.ErrOutput, s.name, s.dtype, k, d.param)
		}
	}
	t, err := servables.NewTensor(s.name, s.dtype, shape)
	if err != nil {
		return servables.Tensor{}, nil, fmt.Errorf("%w: output %q: %w", servables.ErrOutput, s.name, err)
	}
	pin.Pin(unsafe.SliceData(t.Data))
	v, err := ort.NewCustomDataTensor(ort.Shape(shape), t.Data, s.ortType)
	if err != nil {
		return servables.Tensor{}, nil, fmt.Errorf("%w: output %q: %w", servables.ErrOutput, s.name, err)
	}
	return t, v, nil
}

// destroyAll destroys values, skipping nil ones and typed nil pointers (which
// onnxruntime_go leaves in Run's outputs when a conversion fails).
func destroyAll(values []ort.Value) {
	for _, v := range values {
		if v == nil {
			continue
		}
		if rv := reflect.ValueOf(v); rv.Kind() == reflect.Pointer && rv.IsNil() {
			continue
		}
		v.Destroy()
	}
}

// toTensor copies an ONNX Runtime output into a Go tensor named name.
func toTensor(name string, v ort.Value) (servables.Tensor, error) {
	switch x := v.(type) {
	case *ort.Tensor[float32]:
		return copyTensor(name, servables.Float32, x.GetShape(), x.GetData())
	case *ort.Tensor[float64]:
		return copyTensor(name, servables.Float64, x.GetShape(), x.GetData())
	case *ort.Tensor[int8]:
		return copyTensor(name, servables.Int8, x.GetShape(), x.GetData())
	case *ort.Tensor[int16]:
		return copyTensor(name, servables.Int16, x.GetShape(), x.GetData())
	case *ort.Tensor[int32]:
		return copyTensor(name, servables.Int32, x.GetShape(), x.GetData())
	case *ort.Tensor[int64]:
		return copyTensor(name, servables.Int64, x.GetShape(), x.GetData())
	case *ort.Tensor[bool]:
		return copyTensor(name, servables.Bool, x.GetShape(), x.GetData())
	case *ort.Tensor[uint8]:
		return copyTensor(name, servables.Uint8, x.GetShape(), x.GetData())
	case *ort.Scalar[float32]:
		return copyTensor(name, servables.Float32, ort.Shape{}, []float32{x.GetData()})
	case *ort.Scalar[float64]:
		return copyTensor(name, servables.Float64, ort.Shape{}, []float64{x.GetData()})
	case *ort.Scalar[int8]:
		return copyTensor(name, servables.Int8, ort.Shape{}, []int8{x.GetData()})
	case *ort.Scalar[int16]:
		return copyTensor(name, servables.Int16, ort.Shape{}, []int16{x.GetData()})
	case *ort.Scalar[int32]:
		return copyTensor(name, servables.Int32, ort.Shape{}, []int32{x.GetData()})
	case *ort.Scalar[int64]:
		return copyTensor(name, servables.Int64, ort.Shape{}, []int64{x.GetData()})
	case *ort.Scalar[bool]:
		return copyTensor(name, servables.Bool, ort.Shape{}, []bool{x.GetData()})
	case *ort.Scalar[uint8]:
		return copyTensor(name, servables.Uint8, ort.Shape{}, []uint8{x.GetData()})
	case *ort.StringTensor:
		elems, err := x.GetContents()
		if err != nil {
			return servables.Tensor{}, fmt.Errorf("%w: output %q: reading its strings: %w", servables.ErrOutput, name, err)
		}
		t, err := servables.NewStringTensor(name, x.GetShape(), elems)
		if err != nil {
			return servables.Tensor{}, fmt.Errorf("%w: output %q: %w", servables.ErrOutput, name, err)
		}
		return t, nil
	}
	if v.GetONNXType() != ort.ONNXTypeTensor {
		return servables.Tensor{}, fmt.Errorf("%w: output %q is a %v, not a tensor", servables.ErrOutput, name, v.GetONNXType())
	}
	return servables.Tensor{}, unsupportedOutput(name, ort.TensorElementDataType(v.DataType()))
}

func unsupportedOutput(name string, t ort.TensorElementDataType) error {
	return servables.Errorf(servables.ErrOutput, "output %q is a tensor of %s; Grove returns tensors of %s", name, ortTypeName(t), returned{})
}

// returned lists the data types Grove returns from ONNX models.
type returned struct{}

// FormatDTypes lists them, named by name.
func (returned) FormatDTypes(name func(servables.DType) string) string {
	var names []string
	for _, d := range slices.Sorted(maps.Values(dtypes)) {
		names = append(names, name(d))
	}
	return strings.Join(names, ", ")
}

func copyTensor[T any](name string, dt servables.DType, shape ort.Shape, data []T) (servables.Tensor, error) {
	t, err := servables.NewTensor(name, dt, shape)
	if err != nil {
		return servables.Tensor{}, fmt.Errorf("%w: output %q: %w", servables.ErrOutput, name, err)
	}
	if len(t.Data) != len(data)*dt.Size() {
		return servables.Tensor{}, fmt.Errorf("%w: output %q has %d elements, shape %v needs %d", servables.ErrOutput, name, len(data), shape, t.Len())
	}
	if len(data) > 0 {
		copy(t.Data, unsafe.Slice((*byte)(unsafe.Pointer(unsafe.SliceData(data))), len(t.Data)))
	}
	return t, nil
}

// Close destroys the session and frees its memory. It waits for running
// Predict calls; later calls return an error. Closing twice is harmless.
func (m *Model) Close() error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.session != nil {
		err := m.session.Destroy()
		m.session = nil
		return err
	}
	return nil
}
