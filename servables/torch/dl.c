// See dl.h.

#include "dl.h"

#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

// The library's functions; written once, by the gt_open that succeeds,
// before Go lets any other gt_ function run (Go's lock around gt_open).
static struct {
  const char* (*shim_version)(void);
  char* (*init)(int32_t);
  grove_module* (*load)(const char*, int32_t*, char**);
  void (*module_free)(grove_module*);
  char* (*signature)(grove_module*, int32_t*, int32_t*, int32_t*, char**);
  int (*forward)(grove_module*, int32_t, const int32_t*, const int32_t*,
                 const int64_t*, void* const*, const int64_t*, int32_t,
                 grove_result**, char**);
  void (*result_free)(grove_result*);
  int32_t (*omp_team_size)(int32_t);
  void (*blas_find)(grove_blas*);
  void (*blas_free)(grove_blas*);
  int32_t (*blas_set_threads)(int32_t);
  int32_t (*mm_cpu)(int32_t, int32_t, int32_t, int64_t*, int64_t*);
} fn;

static void* handle;

static char* message(const char* format, const char* a, const char* b) {
  size_t n = strlen(format) + strlen(a) + strlen(b) + 1;
  char* m = malloc(n);
  if (m != NULL) snprintf(m, n, format, a, b);
  return m;
}

char* gt_open(const char* path, const char* want) {
  if (handle != NULL) return NULL;
  void* h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
  if (h == NULL) {
    const char* e = dlerror();
    return message("%s%s", e != NULL ? e : "dlopen failed", "");
  }
  const char* missing = NULL;
#define RESOLVE(field, name)                      \
  do {                                            \
    *(void**)(&fn.field) = dlsym(h, name);        \
    if (fn.field == NULL && missing == NULL) missing = name; \
  } while (0)
  RESOLVE(shim_version, "grove_shim_version");
  RESOLVE(init, "grove_init");
  RESOLVE(load, "grove_load");
  RESOLVE(module_free, "grove_module_free");
  RESOLVE(signature, "grove_signature");
  RESOLVE(forward, "grove_forward");
  RESOLVE(result_free, "grove_result_free");
  RESOLVE(omp_team_size, "grove_omp_team_size");
  RESOLVE(blas_find, "grove_blas_find");
  RESOLVE(blas_free, "grove_blas_free");
  RESOLVE(blas_set_threads, "grove_blas_set_threads");
  RESOLVE(mm_cpu, "grove_mm_cpu");
#undef RESOLVE
  if (missing != NULL) {
    dlclose(h);
    memset(&fn, 0, sizeof fn);
    return message("%s has no function %s: it is not a Grove TorchScript library", path, missing);
  }
  const char* got = fn.shim_version();
  if (strcmp(got, want) != 0) {
    char* m = message("%s was built from other sources (version %s)", path, got);
    dlclose(h);
    memset(&fn, 0, sizeof fn);
    return m;
  }
  handle = h;
  return NULL;
}

char* gt_init(int32_t interop_threads) { return fn.init(interop_threads); }
grove_module* gt_load(const char* path, int32_t* frozen, char** err) { return fn.load(path, frozen, err); }
void gt_module_free(grove_module* m) { fn.module_free(m); }
char* gt_signature(grove_module* m, int32_t* n_args, int32_t* n_required, int32_t* n_outputs, char** err) {
  return fn.signature(m, n_args, n_required, n_outputs, err);
}
int gt_forward(grove_module* m, int32_t n, const int32_t* dtypes, const int32_t* ndims, const int64_t* shapes,
               void* const* data, const int64_t* nbytes, int32_t intra_threads, grove_result** out, char** err) {
  return fn.forward(m, n, dtypes, ndims, shapes, data, nbytes, intra_threads, out, err);
}
void gt_result_free(grove_result* r) { fn.result_free(r); }
int32_t gt_omp_team_size(int32_t intra_threads) { return fn.omp_team_size(intra_threads); }
void gt_blas_find(grove_blas* b) { fn.blas_find(b); }
void gt_blas_free(grove_blas* b) { fn.blas_free(b); }
int32_t gt_blas_set_threads(int32_t n) { return fn.blas_set_threads(n); }
int32_t gt_mm_cpu(int32_t n, int32_t reps, int32_t intra_threads, int64_t* thread_ns, int64_t* process_ns) {
  return fn.mm_cpu(n, reps, intra_threads, thread_ns, process_ns);
}
