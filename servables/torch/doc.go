// Package torch is Grove's TorchScript runtime: a thin binding to libtorch
// (Debian's libtorch 1.13, C++17, CXX11 ABI), through the extern "C" API of
// shim/shim.h, implementing servables.Runtime and servables.Servable. That
// API is a shared library of its own, libgrove_torch.so, which the first
// Load (or HostBLAS) opens (dl.c; Library, FindLibrary): a process that
// loads no TorchScript model never loads libtorch.
//
// # Models
//
// A model directory holds exactly one TorchScript file (.pt, .pth or
// .torchscript, written by torch.jit.save or ScriptModule.save; with no
// file of those names, one file whose content is a TorchScript archive, see
// servables.Sniff); other files are ignored. Load first walks the
// archive's pickles (checkPickles): libtorch 1.13's unpickler pops its
// stack without looking, so a pickle that takes values it never pushed
// would crash the process; such a file fails its load instead. Before
// that, the archive's deflated entries, inflated, must add up to at most
// LoadOptions.MaxModelBytes (max_model_bytes): libtorch allocates each
// entry's inflated size, and torch.jit.save deflates some entries (code/,
// the .debug_pkl files), so a small file could hold a deflate bomb; a
// stored entry (the weights) must take in the file the size it declares,
// the stored entries together no more than the file holds (entries may
// not share their bytes), and the file was held to max_model_bytes when
// it was fetched. The
// sizes are read from the zip directory, and the pickles are checked as
// they inflate, never held whole. Load then
// runs torch::jit::load on the CPU, eval(), and then
// torch::jit::freeze, as the B&A inference sidecar does, followed by the
// FrozenLinearTranspose pass (linear layers become a matmul with a
// pre-transposed constant weight; torch.jit.optimize_for_inference does the
// same). With Debian's reference BLAS that pass makes the pCTR benchmark model
// about 1.8x faster; it is a mathematically equivalent rewrite (pCTR's outputs
// stay within 1e-5 of eager PyTorch's). If freezing fails the unfrozen module
// is used (Model.Frozen reports which). The rest of optimize_for_inference
// (conversion to oneDNN layouts, conv fusions) is not applied: it is marked
// beta and changes numerics and memory layout.
//
// Graphs run on TorchScript's non-profiling executor (set when the library
// opens, for the process): a graph's first forward call optimizes it for
// its inputs' dtypes and ranks, whatever their sizes, and every later call
// runs that plan. The profiling executor, the default, instruments the
// first call, re-optimizes at the second for the shapes it saw, and is
// for fusers that this libtorch leaves off on the CPU; on the pCTR model it
// made the second call 1.4-1.8 ms where this makes it 0.06 ms, for the
// same forward times after (BenchmarkLoadPCTR, BenchmarkForwardPCTR).
//
// # Predict
//
// Inputs are bound to forward's arguments (read from its schema at load,
// those with a default Optional in Metadata) by name when every input is
// named, by position when none is (servables.Bind); an unknown, repeated or
// missing name is an error wrapping servables.ErrInvalidInput that lists the
// arguments. Protocols whose convention is positional (B&A) send them
// unnamed (Metadata.ByPosition). They are copied into libtorch-owned
// contiguous tensors before the call; no pointer to Go memory
// outlives a call. forward runs under c10::InferenceMode. The output must be a
// Tensor, or a Tuple or List of Tensors; each becomes one Go tensor named
// output_0, output_1, ... (placeholders: Metadata.UnnamedOutputs is set),
// made contiguous and copied into memory from
// servables.NewTensor, after which the C++ output is freed. Supported dtypes
// both ways: float32, float64, int8, int16, int32, int64, bool (Bool, one
// byte 0 or 1) and uint8 (Byte). Any other output type or dtype (half, a
// dict, a string, nested tuples, an empty tensor) is an error wrapping
// servables.ErrOutput that names it.
//
// Inputs that do not fit forward's signature (names, too few or too many
// tensors, checked before the model runs) are errors wrapping
// servables.ErrInvalidInput. So are libtorch's refusals of the inputs'
// shapes, ranks or dtypes while the model runs ("mat1 and mat2 shapes cannot
// be multiplied", "must match the size of tensor", "expected scalar type",
// ...: callerErrors), as servables.InvalidInputf errors naming the inputs sent. Any
// other failure while the model runs is an error wrapping
// servables.ErrExecution with torch's message, without its C++ backtrace or
// TorchScript traceback. TorchScript records no dtypes or shapes: a
// declared or learned signature (docs/signatures.md) adds them.
// Every C++ exception is caught in the shim; none reaches Go.
//
// Predict is safe for concurrent use (libtorch's graph executor is
// thread-safe in inference mode). Close frees the module after running calls
// return; later calls return an error.
//
// # Threads
//
// LoadOptions.IntraOpThreads (0 means 1) is the number of threads one forward
// call of the model may use. Debian's libtorch uses the OpenMP parallel
// backend, whose thread count is an OpenMP setting of the calling OS thread,
// not of the process. So the shim sets it with omp_set_num_threads on the OS
// thread that runs each forward call (Go keeps a goroutine on one OS thread
// for the length of a cgo call), after letting ATen run its one-time
// per-thread initialisation so that it cannot overwrite the value later.
// Models with different settings therefore run side by side, each with its
// own count: TestIntraOpThreadsIsPerCallNotProcessWide has 8 goroutines ask
// for 1 or 2 threads at once and checks each OpenMP team has the size asked.
// On this 2-core machine single elementwise ops on 1M floats (sigmoid, exp,
// sin, tanh) ran 1.5x to 2x faster with 2 threads than with 1; a whole forward
// call of testdata/heavy.pt (BenchmarkIntraOpThreads) gained between nothing
// and 1.7x, and while other processes kept the cores busy 2 threads could be
// much slower (9x in PyTorch itself): an OpenMP team waits at its barrier for
// a worker that is not running. Keep n x (concurrent calls) within the cores.
// at::set_num_threads is never called: it would also reset process-wide state
// (the default for new threads, the shared pthreadpool, the oneDNN cache).
//
// What the setting does and does not do:
//   - It speeds up operators that ATen splits with at::parallel_for, on
//     tensors larger than their grain size (32768 elements for elementwise
//     ops), and oneDNN convolutions. Matrix products go to the host's BLAS
//     (see "BLAS" below), where it applies only when that library takes its
//     count from OpenMP; for small MLPs such as pCTR it changes nothing.
//   - Each OS thread that runs a forward call with a setting of n > 1 gets its
//     own OpenMP pool of n-1 worker threads, kept for later calls: up to
//     (concurrent forward calls) x (n-1) extra threads. After a parallel region
//     libgomp's workers spin briefly before sleeping; set OMP_WAIT_POLICY=passive
//     to stop that when cores are scarce.
//   - A setting of 1 (the default) never starts an OpenMP thread; throughput
//     then comes from Grove running several calls at once.
//
// The process-wide inter-op pool (used only by torch.jit.fork) is set to one
// thread, and started, the first time a model is loaded, on a goroutine of
// the runtime's own: Grove loads models on a thread at a lowered CPU
// priority (internal/lowprio), which threads started from it inherit. The
// OpenMP pool a forward call of such a thread starts (a warm-up with n > 1)
// is that thread's own, and ends with it.
//
// # BLAS
//
// libtorch's matrix products (linear layers, matmul) call the host's
// libblas.so.3, whichever library the system selects: on Debian an
// alternative, which installing numpy or scipy (python3-xgboost, say) may
// switch to OpenBLAS's pthread build, whose own pool of one thread per core
// ignores OpenMP settings and so intra_op_threads. Before the first model
// loads (and when HostBLAS is called: grove serve does at start, to log it),
// the binding finds the library libtorch's sgemm_ resolves to (dlsym, then
// the thread API in that file or its dependencies: Debian's libblas.so.3 of
// OpenBLAS is an interface over libopenblas.so.0, each an alternative of its
// own) and sets its own thread count to one through its own process-wide
// API: openblas_set_num_threads, MKL_Set_Num_Threads or
// bli_thread_set_num_threads. One is the only count right for every model
// at once, as the setting is the process's, not the call's. Then:
//   - OpenBLAS's OpenMP interface (Debian's openblas-openmp libblas.so.3)
//     sizes each matrix product from the calling thread's OpenMP setting,
//     which Predict sets to the model's intra_op_threads: the setting holds
//     for matrix products too (servables.BLAS.PerCall).
//   - OpenBLAS's pthread interface, MKL and BLIS run every matrix product on
//     the calling thread; intra_op_threads still applies to the operators
//     ATen splits itself.
//   - A library without a thread API Grove knows (the reference BLAS,
//     ATLAS) is left as it is.
//
// TestMatrixProductsKeepIntraOpThreadsWhicheverOpenBLAS checks this on the
// host's selection and on each of Debian's OpenBLAS builds (chosen with
// LD_LIBRARY_PATH in a child process), by the CPU time the calling thread
// and the rest of the process use during 512 x 512 products. Served by
// grove on this 2-core machine, the pthread build left at its default cost
// 1.7x (batch 1, 32 clients) and 2.4x (batch 64, 8 clients) the CPU time
// per request; with the setting it serves what OPENBLAS_NUM_THREADS=1 and
// the OpenMP build serve (docs/performance.md, "BLAS").
//
// # Build
//
// The Go package needs no libtorch to build. scripts/torchshim.sh (make
// deps) builds shim/shim.cc with Debian's libtorch-dev (headers in
// /usr/include and /usr/include/torch/csrc/api/include), -std=c++17
// -fopenmp (as libtorch itself was), linking -ltorch -ltorch_cpu -lc10
// -lgomp, into .cache/torchshim/<LibraryVersion>/libgrove_torch.so, where
// the version is a hash of shim.h and shim.cc: the package embeds both,
// looks for that directory, and opens only a library that reports that
// version, so a stale build is never used.
package torch
