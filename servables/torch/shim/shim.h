// Grove's C API over libtorch's TorchScript runtime (shim.cc), built into
// libgrove_torch.so (scripts/torchshim.sh), which Grove opens when a
// TorchScript model first loads (dl.c). Every function catches all C++
// exceptions; failures come back as a status code and a malloc'd message
// that the caller frees with free().
#ifndef GROVE_TORCH_SHIM_H
#define GROVE_TORCH_SHIM_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

// Element types; the values are those of servables.DType.
enum {
  GROVE_FLOAT = 1,
  GROVE_DOUBLE = 2,
  GROVE_INT8 = 3,
  GROVE_INT16 = 4,
  GROVE_INT32 = 5,
  GROVE_INT64 = 6,
  GROVE_BOOL = 7,
  GROVE_UINT8 = 8,
};

// Status of grove_forward.
enum {
  GROVE_OK = 0,
  GROVE_ERR_INPUT = 1,   // the inputs do not fit the forward schema
  GROVE_ERR_OUTPUT = 2,  // the model returned something Grove cannot return
  GROVE_ERR_EXEC = 3,    // the model failed while running
};

// A loaded TorchScript module (opaque).
typedef struct grove_module grove_module;

// One output tensor, contiguous, owned by its grove_result.
typedef struct {
  int32_t dtype;
  int32_t ndim;
  const int64_t* shape;
  const void* data;
  size_t nbytes;
} grove_tensor;

// The outputs of one forward call; free with grove_result_free.
typedef struct {
  int32_t n;
  grove_tensor* tensors;
  void* impl;
} grove_result;

// grove_shim_version returns the version the library was built as: the
// first 16 hex digits of the SHA-256 of shim.h followed by shim.cc. Grove
// opens only the library of its own sources.
const char* grove_shim_version(void);

// grove_init sets the process-wide inter-op thread count. It returns NULL or
// an error message (libtorch refuses once inter-op work has started).
char* grove_init(int32_t interop_threads);

// grove_load loads a TorchScript file on the CPU, puts it in eval mode and
// tries to freeze it. *frozen is set to 1 when the frozen module is used.
// Returns NULL and sets *err on failure.
grove_module* grove_load(const char* path, int32_t* frozen, char** err);

// grove_module_free frees a module; NULL is ignored.
void grove_module_free(grove_module* m);

// grove_signature describes forward: its argument count (without self), how
// many arguments have no default, and its output count (-1 when it is not a
// Tensor or a Tuple of Tensors). It returns the argument names joined by
// '\n' (malloc'd), or NULL and sets *err.
char* grove_signature(grove_module* m, int32_t* n_args, int32_t* n_required,
                      int32_t* n_outputs, char** err);

// grove_forward runs forward on n inputs. Input i has type dtypes[i], ndims[i]
// dimensions (taken in order from shapes) and nbytes[i] bytes at data[i];
// the bytes are copied before the model runs and no pointer to them is kept.
// intra_threads is the OpenMP thread count for this call (on this OS thread).
// On GROVE_OK *out holds the outputs; otherwise *err holds a message.
int grove_forward(grove_module* m, int32_t n, const int32_t* dtypes,
                  const int32_t* ndims, const int64_t* shapes,
                  void* const* data, const int64_t* nbytes,
                  int32_t intra_threads, grove_result** out, char** err);

// grove_result_free frees the outputs of grove_forward; NULL is ignored.
void grove_result_free(grove_result* r);

// grove_omp_team_size applies intra_threads to the calling OS thread as
// grove_forward does, then returns the size of an OpenMP team that a parallel
// region started on this thread gets (ATen's parallel_for uses the same kind
// of region). For tests.
int32_t grove_omp_team_size(int32_t intra_threads);

// Threading of a BLAS library (grove_blas.parallel); the values are those
// of OpenBLAS's openblas_get_parallel.
enum {
  GROVE_BLAS_UNKNOWN = -1,
  GROVE_BLAS_SEQUENTIAL = 0,
  GROVE_BLAS_PTHREAD = 1,
  GROVE_BLAS_OPENMP = 2,
};

// The BLAS library libtorch's matrix products run on in this process: the
// file its sgemm_ resolves to, and the thread API found there or in that
// file's dependencies (Debian's libblas.so.3 of OpenBLAS is an interface
// over libopenblas.so.0). Free with grove_blas_free.
typedef struct {
  const char* library;  // "OpenBLAS", "MKL", "BLIS", "ATLAS", "other", or "" without sgemm_ (static)
  char* version;        // the library's description of itself, or NULL
  char* path;           // the file sgemm_ is in, as loaded, or NULL
  char* core_path;      // the file the thread API (or ATLAS's build info) is in, or NULL
  int32_t parallel;     // GROVE_BLAS_*
  int32_t threads;      // the library's own thread count, or -1 without a thread API
} grove_blas;

// grove_blas_find fills *b. It never fails: what it cannot find is left
// empty.
void grove_blas_find(grove_blas* b);

// grove_blas_free frees the strings grove_blas_find allocated.
void grove_blas_free(grove_blas* b);

// grove_blas_set_threads sets the thread count of the library
// grove_blas_find describes through its own process-wide API
// (openblas_set_num_threads, MKL_Set_Num_Threads, bli_thread_set_num_threads).
// It returns 0, or -1 when the library has none of them.
int32_t grove_blas_set_threads(int32_t n);

// grove_mm_cpu applies intra_threads to the calling OS thread as
// grove_forward does, then multiplies two n x n float matrices with libtorch
// reps times and reports the CPU time the calling thread and the whole
// process used meanwhile. For tests. Returns 0, or -1 on failure.
int32_t grove_mm_cpu(int32_t n, int32_t reps, int32_t intra_threads,
                     int64_t* thread_ns, int64_t* process_ns);

#ifdef __cplusplus
}
#endif

#endif  // GROVE_TORCH_SHIM_H
