// The Go side of libgrove_torch.so (shim/shim.h): gt_open opens the library
// and resolves its functions; each gt_ function calls the grove_ function
// of the same name through that table. Call gt_open successfully before
// any other gt_ function.
#ifndef GROVE_TORCH_DL_H
#define GROVE_TORCH_DL_H

#include "shim/shim.h"

// gt_open opens the library at path (RTLD_NOW | RTLD_LOCAL) and checks that
// it was built as version want. It returns NULL, or a malloc'd message; once
// it has succeeded, later calls return NULL and open nothing.
char* gt_open(const char* path, const char* want);

char* gt_init(int32_t interop_threads);
grove_module* gt_load(const char* path, int32_t* frozen, char** err);
void gt_module_free(grove_module* m);
char* gt_signature(grove_module* m, int32_t* n_args, int32_t* n_required,
                   int32_t* n_outputs, char** err);
int gt_forward(grove_module* m, int32_t n, const int32_t* dtypes,
               const int32_t* ndims, const int64_t* shapes, void* const* data,
               const int64_t* nbytes, int32_t intra_threads, grove_result** out,
               char** err);
void gt_result_free(grove_result* r);
int32_t gt_omp_team_size(int32_t intra_threads);
void gt_blas_find(grove_blas* b);
void gt_blas_free(grove_blas* b);
int32_t gt_blas_set_threads(int32_t n);
int32_t gt_mm_cpu(int32_t n, int32_t reps, int32_t intra_threads,
                  int64_t* thread_ns, int64_t* process_ns);

#endif  // GROVE_TORCH_DL_H
