package servables

// BLAS describes the BLAS library a runtime's matrix products run on in
// this process, as the runtime found it and set it up. The TorchScript
// runtime's is the host's: libtorch calls whatever libblas.so.3 the
// system selects (on Debian, an alternative).
type BLAS struct {
	// Library is "OpenBLAS", "MKL", "BLIS", "ATLAS", or "other" (a
	// library whose thread API Grove does not know, such as the
	// single-threaded reference BLAS).
	Library string `json:"library"`
	// Version is the library's description of itself when it has one
	// (OpenBLAS's openblas_get_config: version, build options, CPU core).
	Version string `json:"version,omitempty"`
	// Parallel is how the library runs threads: "sequential",
	// "pthread", "openmp", or "unknown".
	Parallel string `json:"parallel"`
	// Path is the file the BLAS functions (sgemm_) resolve to, symbolic
	// links (Debian's alternatives) resolved.
	Path string `json:"path"`
	// CorePath is the file the library's thread API is in, when it is not
	// Path: Debian's libblas.so.3 of OpenBLAS is an interface over
	// libopenblas.so.0, and each is chosen by an alternative of its own.
	CorePath string `json:"core_path,omitempty"`
	// Threads is the library's own thread count after the runtime set
	// it; 0 when the library has no thread API.
	Threads int `json:"threads"`
	// PerCall reports that a matrix product takes its thread count from
	// the OpenMP setting of the thread that calls it, which the runtime
	// sets to the calling model's intra_op_threads, rather than from
	// Threads (OpenBLAS's OpenMP interface).
	PerCall bool `json:"per_call"`
}
