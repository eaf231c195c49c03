// Package onnx is Grove's ONNX Runtime runtime: ONNX models on the CPU
// through github.com/yalue/onnxruntime_go, implementing servables.Runtime and
// servables.Servable.
//
// # Library
//
// onnxruntime_go binds the ONNX Runtime C API at run time: it dlopen()s the
// shared library, so building Grove needs no ONNX Runtime, and a missing
// library only fails the loading of .onnx models (TorchScript models are
// unaffected). v1.27.0 is built against the C API of ONNX Runtime 1.24.1
// (LibraryVersion); scripts/onnxruntime.sh, run by `make deps`, fetches that
// release's libonnxruntime.so.1 from the npm package onnxruntime-node@1.24.1
// into .cache/onnxruntime/1.24.1/. Runtime.LibraryPath names the file;
// empty, DefaultLibraryPath applies: $GROVE_ONNXRUNTIME_LIB, else
// ../lib/libonnxruntime.so.1 from the executable's directory (the release
// layout of `make dist`), else that cache path found from the working
// directory or the executable upwards. A missing
// or unloadable library is an error wrapping ErrLibrary that names the path
// and says to run `make deps`; the next Load tries again.
//
// The library and its environment (OrtEnv) are process-wide in
// onnxruntime_go: the first Load of an ONNX model initialises them, under a
// mutex, and later Loads from any Runtime value reuse them. A process loads
// one library file: a Runtime naming another fails to load models. The
// environment logs at ERROR level to stderr and lives as long as the process.
//
// # Models
//
// A model directory holds exactly one .onnx file (with none, one file whose
// content is an ONNX ModelProto, see servables.Sniff); other files are ignored
// (external weight files next to it are found by ONNX Runtime, which loads
// the model from its path). Load reads the input and output names from a
// throw-away one-thread session (onnxruntime_go needs them before it creates
// a session), then creates the model's DynamicAdvancedSession (any batch
// size; graph optimisations at ORT_ENABLE_ALL, ONNX Runtime's default), so a
// model is parsed twice; with an InfoCache (Runtime.Info, as Grove's
// built-in runtimes have) a content loaded before, known by its
// LoadOptions.Checksum, is parsed once (BenchmarkLoadPCTR: pCTR's load
// 1.6 ms, 0.9 ms cached). A file that is not ONNX fails with "not a valid
// ONNX model".
//
// Metadata lists the model's inputs and outputs with their names, dtypes
// (FLOAT, DOUBLE, INT8, INT16, INT32, INT64, BOOL, UINT8, FLOAT16,
// BFLOAT16, and BYTES for ONNX STRING; any other ONNX element type, such
// as UINT16, is UNKNOWN) and shapes, -1 for a dynamic dimension.
//
// # Strings
//
// ONNX STRING tensors are Grove's Bytes tensors. onnxruntime_go v1.27.0
// has string tensors (NewStringTensor, GetContents) and Predict uses them:
// an input's elements are copied into a new STRING tensor (SetContents, one
// C string per element), and a STRING output's contents are read back whole.
// Because SetContents passes NUL-terminated C strings, an input element
// holding a NUL byte is refused (ErrInvalidInput naming the input and the
// element) rather than cut short; and as onnxruntime_go makes no rank-0
// string tensors, a scalar STRING input is refused too. Outputs carry any
// bytes. examples/models/make_game_model.py makes a model with STRING inputs
// and outputs (ONNX-ML LabelEncoder lookups), examples/bucket/game_score.
//
// # Predict
//
// Inputs are matched to the model's inputs by name. As a convenience for
// clients that send no names (the B&A API does not require them), when every
// request tensor is unnamed and there are exactly as many as the model has
// inputs, they are matched by position, in the model's input order (the order
// of Metadata().Inputs). A missing input, an unknown or repeated name, a mix
// of named and unnamed tensors, a dtype other than the model's, a different
// rank or a fixed dimension of another size is an error wrapping
// servables.ErrInvalidInput whose message lists the inputs the model expects
// (name, dtype, shape). So are ONNX Runtime's own input checks (for inputs
// whose rank the model does not record). Other failures while the model runs
// are errors wrapping servables.ErrExecution with ONNX Runtime's message.
//
// Numeric input data is handed to ONNX Runtime without a copy (pinned for the call;
// copied only when it is not aligned for its dtype). ONNX Runtime allocates
// the outputs; onnxruntime_go copies them into Go memory, and Predict copies
// them into tensors from servables.NewTensor named as the model names its
// outputs, in the model's output order. Every ONNX Runtime value is destroyed
// before Predict returns. An output that is not a tensor, or whose element type
// Grove has no counterpart of, is an error wrapping servables.ErrOutput that
// names it, but only for a call that wants it: a context from
// servables.WithOutputs names the outputs a call wants, and Predict then
// converts and returns only those.
//
// FLOAT16 and BFLOAT16 tensors travel as their 2-byte bit patterns.
// onnxruntime_go cannot return such an output when ONNX Runtime allocates
// it, so Predict allocates it before the run: its shape is the model's
// declared one, where a symbolic dimension ("batch") takes the size of the
// same-named dimension of an input (Load reads the declared shapes from
// the model file when an output is a 2-byte float or a scalar, streaming
// the graph's input and output declarations and seeking over the rest,
// weights included: graphDims). An output with a
// dimension no input names is an ErrOutput; ONNX Runtime checks the shape
// it writes. onnxruntime_go v1.27.0 cannot convert a rank-0 (scalar)
// tensor ONNX Runtime allocates either (and its Run then neither converts
// nor releases the outputs after it), so Predict allocates the outputs the
// model declares rank 0 too; a STRING scalar, or a scalar output of
// undeclared rank, still fails the call.
//
// Predict is safe for concurrent use: ONNX Runtime's Session::Run is, and
// Predict shares the session under a read lock. Close destroys the session
// explicitly (no finalizer is involved), after running calls return; later
// calls return an error.
//
// # Threads
//
// LoadOptions.IntraOpThreads (0 means 1) is the session's intra-op thread
// count: how many threads one Predict call may use inside an operator. A
// session with n > 1 owns a pool of n-1 threads (the calling thread is the
// n-th); concurrent calls of that model share it, and Close ends its threads
// (TestIntraOpThreadsMakeAPoolPerSession). Idle pool threads do not spin
// (session.intra_op.allow_spinning=0), so that models on a busy machine do not
// burn cores waiting for work. The inter-op count is 1 and execution
// sequential: Grove runs calls and models concurrently itself. As with
// TorchScript, keep n x (concurrent calls) within the cores.
//
// Measured on this project's 2-core machine (BenchmarkIntraOpThreads), pCTR
// at batch 1024 took 1.07 ms with 1 thread and 0.77 ms with 2 while the
// machine was otherwise idle, and 0.9 to 1.3 ms with either while other
// processes kept the cores busy; with spinning allowed, 2 threads took 0.63 ms
// idle but 2.3 ms busy. At batch 64, 2 threads were slower than 1 (0.10 ms
// against 0.077 ms): waking a pool thread costs more than it saves.
package onnx
