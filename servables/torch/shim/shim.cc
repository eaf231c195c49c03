// Grove's thin C API over libtorch's TorchScript runtime; see shim.h.
//
// Rules kept here: no C++ exception ever leaves an extern "C" function; every
// object handed to Go is freed by an explicit call; input bytes are copied
// into libtorch-owned tensors before the model runs, so no pointer to Go
// memory survives a call.

#include "shim.h"

#include <dlfcn.h>
#include <link.h>
#include <omp.h>
#include <time.h>

#include <cctype>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <future>
#include <memory>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include <ATen/Parallel.h>
#include <torch/csrc/jit/passes/frozen_linear_transpose.h>
#include <torch/csrc/jit/runtime/graph_executor.h>
#include <torch/script.h>

struct grove_module {
  torch::jit::Module module;
  torch::jit::Method forward;

  explicit grove_module(torch::jit::Module m)
      : module(std::move(m)), forward(module.get_method("forward")) {}
};

namespace {

// Holder owns the output tensors that a grove_result points into.
struct Holder {
  grove_result result{};
  std::vector<at::Tensor> tensors;
  std::vector<grove_tensor> views;
};

char* dup(const std::string& s) {
  char* p = static_cast<char*>(std::malloc(s.size() + 1));
  if (p != nullptr) {
    std::memcpy(p, s.data(), s.size());
    p[s.size()] = '\0';
  }
  return p;
}

std::string trim(const std::string& s) {
  const char* ws = " \t\r\n";
  size_t b = s.find_first_not_of(ws);
  if (b == std::string::npos) return "";
  size_t e = s.find_last_not_of(ws);
  return s.substr(b, e - b + 1);
}

// message returns an exception's text without libtorch's C++ backtrace.
std::string message(const std::exception& e) {
  if (const auto* ce = dynamic_cast<const c10::Error*>(&e)) {
    return ce->what_without_backtrace();
  }
  return e.what();
}

bool is_error_line(const std::string& line) {
  // "RuntimeError: ...", "builtins.ValueError: ...", "torch.jit.Error: ..."
  size_t colon = line.find(": ");
  if (colon == std::string::npos || colon == 0) return false;
  for (size_t i = 0; i < colon; i++) {
    char c = line[i];
    if (!(std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '.')) return false;
  }
  std::string head = line.substr(0, colon);
  return head.size() >= 5 &&
         (head.compare(head.size() - 5, 5, "Error") == 0 ||
          (head.size() >= 9 && head.compare(head.size() - 9, 9, "Exception") == 0));
}

// summarize keeps the useful part of a libtorch message: for TorchScript
// interpreter failures the cause after the traceback, else the first lines.
std::string summarize(const std::string& msg, size_t max_lines = 2) {
  std::vector<std::string> lines;
  std::istringstream in(msg);
  for (std::string line; std::getline(in, line);) {
    line = trim(line);
    if (!line.empty()) lines.push_back(line);
  }
  size_t start = 0;
  if (msg.find("The following operation failed in the TorchScript interpreter") != std::string::npos) {
    for (size_t i = lines.size(); i-- > 0;) {
      if (is_error_line(lines[i])) {
        start = i;
        break;
      }
    }
  }
  std::string out;
  for (size_t i = start; i < lines.size() && i < start + max_lines; i++) {
    if (!out.empty()) out += " | ";
    out += lines[i];
  }
  if (out.size() > 600) out = out.substr(0, 600) + "...";
  return out.empty() ? std::string("unknown error") : out;
}

bool to_scalar_type(int32_t d, c10::ScalarType* st) {
  switch (d) {
    case GROVE_FLOAT: *st = c10::kFloat; return true;
    case GROVE_DOUBLE: *st = c10::kDouble; return true;
    case GROVE_INT8: *st = c10::kChar; return true;
    case GROVE_INT16: *st = c10::kShort; return true;
    case GROVE_INT32: *st = c10::kInt; return true;
    case GROVE_INT64: *st = c10::kLong; return true;
    case GROVE_BOOL: *st = c10::kBool; return true;
    case GROVE_UINT8: *st = c10::kByte; return true;
  }
  return false;
}

int32_t from_scalar_type(c10::ScalarType st) {
  switch (st) {
    case c10::kFloat: return GROVE_FLOAT;
    case c10::kDouble: return GROVE_DOUBLE;
    case c10::kChar: return GROVE_INT8;
    case c10::kShort: return GROVE_INT16;
    case c10::kInt: return GROVE_INT32;
    case c10::kLong: return GROVE_INT64;
    case c10::kBool: return GROVE_BOOL;
    case c10::kByte: return GROVE_UINT8;
    default: return 0;
  }
}

// set_intra_threads sets the OpenMP thread count of the calling OS thread.
// libtorch 1.13 (OpenMP backend) sizes each parallel region from the calling
// thread's OpenMP ICV, which is per thread. at::set_num_threads would also
// change process-wide state (the global default, the shared pthreadpool, the
// oneDNN cache), so only the per-thread value is set here; at::get_num_threads
// first runs ATen's one-time per-thread initialisation so that it cannot
// later overwrite this value.
void set_intra_threads(int32_t n) {
  if (n < 1) n = 1;
  if (at::get_num_threads() != n) omp_set_num_threads(n);
}

// BLAS is the BLAS library libtorch's matrix products run on: a handle on
// the file its sgemm_ is in, whose dependencies include the library's
// core (Debian's libblas.so.3 of OpenBLAS, MKL or BLIS is an interface over
// the library proper).
class BLAS {
 public:
  BLAS() {
    void* gemm = global_sym("sgemm_");
    Dl_info di;
    if (gemm == nullptr || dladdr(gemm, &di) == 0 || di.dli_fname == nullptr) return;
    path_ = di.dli_fname;
    handle_ = dlopen(path_.c_str(), RTLD_LAZY | RTLD_NOLOAD);
    if (handle_ == nullptr) handle_ = dlopen(nullptr, RTLD_LAZY);  // sgemm_ in the executable
  }
  ~BLAS() {
    if (handle_ != nullptr) dlclose(handle_);
  }
  BLAS(const BLAS&) = delete;
  BLAS& operator=(const BLAS&) = delete;

  bool found() const { return handle_ != nullptr; }
  const std::string& path() const { return path_; }

  // sym looks name up in the BLAS file and its dependencies.
  template <typename F>
  F sym(const char* name) const {
    return handle_ == nullptr ? nullptr : reinterpret_cast<F>(dlsym(handle_, name));
  }

  // file returns the file that p (a symbol's address) is in.
  static std::string file(void* p) {
    Dl_info di;
    if (p == nullptr || dladdr(p, &di) == 0 || di.dli_fname == nullptr) return "";
    return di.dli_fname;
  }

 private:
  // global_sym finds name as libtorch's references to it resolve: in the
  // global scope, or else in whichever loaded object defines it (a host
  // program may have opened Grove's library, and libtorch with it, with
  // RTLD_LOCAL).
  static void* global_sym(const char* name) {
    if (void* p = dlsym(RTLD_DEFAULT, name)) return p;
    std::vector<std::string> names;
    dl_iterate_phdr(
        [](dl_phdr_info* info, size_t, void* data) -> int {
          if (info->dlpi_name != nullptr && info->dlpi_name[0] != '\0') {
            static_cast<std::vector<std::string>*>(data)->emplace_back(info->dlpi_name);
          }
          return 0;
        },
        &names);
    // dlopen is not called from dl_iterate_phdr's callback, which holds
    // the loader's lock.
    for (const std::string& n : names) {
      void* h = dlopen(n.c_str(), RTLD_LAZY | RTLD_NOLOAD);
      if (h == nullptr) continue;
      void* p = dlsym(h, name);
      dlclose(h);  // the object stays loaded: NOLOAD took one more reference
      if (p != nullptr) return p;
    }
    return nullptr;
  }

  std::string path_;
  void* handle_ = nullptr;
};

// The BLAS libraries' own APIs, as they declare them (BLIS's dim_t and
// gint_t are 64-bit integers in its default build; a 32-bit build returns
// the same small values in the low half, which is all that is read).
using openblas_get_config_t = char* (*)();
using openblas_int_t = int (*)();
using openblas_set_t = void (*)(int);
using mkl_version_t = void (*)(char*, int);
using mkl_int_t = int (*)();
using mkl_set_t = void (*)(int);
using bli_str_t = const char* (*)();
using bli_int_t = int64_t (*)();
using bli_set_t = void (*)(int64_t);

// cpu_ns reads a CPU-time clock (of the calling thread or of the process).
int64_t cpu_ns(clockid_t clock) {
  timespec ts{};
  clock_gettime(clock, &ts);
  return static_cast<int64_t>(ts.tv_sec) * 1000000000 + ts.tv_nsec;
}

// type_name names the TorchScript type of a value, for error messages.
std::string type_name(const c10::IValue& v) {
  try {
    return v.type()->annotation_str();
  } catch (...) {
    return v.tagKind();
  }
}

}  // namespace

extern "C" {

#ifndef GROVE_SHIM_VERSION
#error "build with -DGROVE_SHIM_VERSION=\"<version>\" (scripts/torchshim.sh)"
#endif

const char* grove_shim_version(void) { return GROVE_SHIM_VERSION; }

char* grove_init(int32_t interop_threads) {
  try {
    // Run graphs on TorchScript's non-profiling executor. The profiling
    // one instruments a graph's first run and re-optimizes it on the
    // second, guarded by the shapes it saw: a 2-3 ms warm-up a pCTR load
    // (10 ms for rank_deep) where this one takes 0.5 ms, for the same
    // forward time after, with batch sizes that vary as dynamic batching
    // makes them. Its fusers, which the profiling executor is for, are
    // off on CPU in this libtorch.
    torch::jit::getProfilingMode() = false;
    at::set_num_interop_threads(interop_threads < 1 ? 1 : interop_threads);
    // Start the inter-op pool now, from the calling thread, rather than
    // at a model's first torch.jit.fork: its threads take the priority of
    // the thread that starts them, and a fork may first run in a warm-up
    // at the lower priority of loads.
    std::promise<void> started;
    at::launch([&started] { started.set_value(); });
    started.get_future().wait();
    return nullptr;
  } catch (const std::exception& e) {
    return dup(summarize(message(e)));
  } catch (...) {
    return dup("unknown C++ exception");
  }
}

grove_module* grove_load(const char* path, int32_t* frozen, char** err) {
  *frozen = 0;
  *err = nullptr;
  try {
    torch::jit::Module mod = torch::jit::load(std::string(path), c10::Device(c10::kCPU));
    mod.eval();
    // Freeze (inline weights as constants, fold and fuse), as the B&A
    // sidecar does, then pre-transpose linear weights (exact rewrite that
    // torch.jit.optimize_for_inference also does). Some models cannot be
    // frozen; they run unfrozen.
    try {
      torch::jit::Module f = torch::jit::freeze(mod);
      std::shared_ptr<torch::jit::Graph> g = f.get_method("forward").graph();
      torch::jit::FrozenLinearTranspose(g);
      mod = std::move(f);
      *frozen = 1;
    } catch (...) {
    }
    return new grove_module(std::move(mod));
  } catch (const std::exception& e) {
    *err = dup(summarize(message(e)));
  } catch (...) {
    *err = dup("unknown C++ exception");
  }
  return nullptr;
}

void grove_module_free(grove_module* m) {
  try {
    delete m;
  } catch (...) {
  }
}

char* grove_signature(grove_module* m, int32_t* n_args, int32_t* n_required,
                      int32_t* n_outputs, char** err) {
  *err = nullptr;
  try {
    const c10::FunctionSchema& schema = m->forward.function().getSchema();
    std::string names;
    int32_t args = 0, required = 0;
    const auto& arguments = schema.arguments();
    for (size_t i = 0; i < arguments.size(); i++) {
      const c10::Argument& a = arguments[i];
      if (i == 0 && a.name() == "self") continue;
      if (args > 0) names += "\n";
      names += a.name();
      args++;
      if (!a.default_value().has_value()) required++;
    }
    int32_t outputs = -1;
    if (schema.returns().size() == 1) {
      const c10::TypePtr& t = schema.returns()[0].type();
      if (t->kind() == c10::TypeKind::TensorType) {
        outputs = 1;
      } else if (t->kind() == c10::TypeKind::TupleType) {
        const auto& elems = t->expectRef<c10::TupleType>().elements();
        outputs = static_cast<int32_t>(elems.size());
        for (const auto& e : elems) {
          if (e->kind() != c10::TypeKind::TensorType) outputs = -1;
        }
      }
    }
    *n_args = args;
    *n_required = required;
    *n_outputs = outputs;
    return dup(names);
  } catch (const std::exception& e) {
    *err = dup(summarize(message(e)));
  } catch (...) {
    *err = dup("unknown C++ exception");
  }
  return nullptr;
}

int grove_forward(grove_module* m, int32_t n, const int32_t* dtypes,
                  const int32_t* ndims, const int64_t* shapes,
                  void* const* data, const int64_t* nbytes,
                  int32_t intra_threads, grove_result** out, char** err) {
  *out = nullptr;
  *err = nullptr;
  if (m == nullptr) {
    *err = dup("model is closed");
    return GROVE_ERR_EXEC;
  }
  try {
    set_intra_threads(intra_threads);
    c10::InferenceMode guard;

    torch::jit::Stack stack;
    stack.reserve(static_cast<size_t>(n) + 1);
    stack.emplace_back(m->module._ivalue());
    const int64_t* dims = shapes;
    for (int32_t i = 0; i < n; i++) {
      c10::ScalarType st;
      if (!to_scalar_type(dtypes[i], &st)) {
        *err = dup("input " + std::to_string(i) + " has an unsupported data type");
        return GROVE_ERR_INPUT;
      }
      at::Tensor t = at::empty(c10::IntArrayRef(dims, static_cast<size_t>(ndims[i])),
                               at::TensorOptions().dtype(st));
      dims += ndims[i];
      if (static_cast<int64_t>(t.nbytes()) != nbytes[i]) {
        *err = dup("input " + std::to_string(i) + " has " + std::to_string(nbytes[i]) +
                   " bytes, its shape needs " + std::to_string(t.nbytes()));
        return GROVE_ERR_INPUT;
      }
      if (nbytes[i] > 0) std::memcpy(t.data_ptr(), data[i], static_cast<size_t>(nbytes[i]));
      stack.emplace_back(std::move(t));
    }

    torch::jit::Function& fn = m->forward.function();
    try {
      fn.getSchema().checkAndNormalizeInputs(stack);
    } catch (const std::exception& e) {
      *err = dup(summarize(message(e), 1));
      return GROVE_ERR_INPUT;
    }
    fn.run(stack);
    if (stack.size() != 1) {
      *err = dup("forward left " + std::to_string(stack.size()) + " values on the stack");
      return GROVE_ERR_EXEC;
    }
    c10::IValue result = std::move(stack.back());
    stack.clear();

    auto h = std::make_unique<Holder>();
    auto add = [&](const c10::IValue& v, const std::string& where) -> bool {
      if (!v.isTensor()) {
        *err = dup(where + " is " + type_name(v) +
                   "; Grove returns a Tensor, or a Tuple or List of Tensors");
        return false;
      }
      at::Tensor t = v.toTensor();
      if (t.layout() == c10::kMkldnn) t = t.to_dense();
      if (t.layout() != c10::kStrided || !t.device().is_cpu()) {
        *err = dup(where + " is a " + c10::str(t.layout()) + " tensor on " + t.device().str() +
                   "; Grove returns dense CPU tensors");
        return false;
      }
      if (from_scalar_type(t.scalar_type()) == 0) {
        *err = dup(where + " has dtype " + std::string(c10::toString(t.scalar_type())) +
                   "; Grove returns Float, Double, Char (int8), Short, Int, Long, Bool and Byte (uint8) tensors");
        return false;
      }
      h->tensors.push_back(t.contiguous());
      return true;
    };
    bool ok = true;
    if (result.isTensor()) {
      ok = add(result, "the output");
    } else if (result.isTuple()) {
      const auto& elems = result.toTupleRef().elements();
      for (size_t i = 0; ok && i < elems.size(); i++) {
        ok = add(elems[i], "element " + std::to_string(i) + " of the output " + type_name(result));
      }
    } else if (result.isList()) {
      c10::ArrayRef<c10::IValue> elems = result.toListRef();
      for (size_t i = 0; ok && i < elems.size(); i++) {
        ok = add(elems[i], "element " + std::to_string(i) + " of the output " + type_name(result));
      }
    } else {
      ok = add(result, "the output");
    }
    if (!ok) return GROVE_ERR_OUTPUT;

    h->views.resize(h->tensors.size());
    for (size_t i = 0; i < h->tensors.size(); i++) {
      const at::Tensor& t = h->tensors[i];
      grove_tensor& v = h->views[i];
      v.dtype = from_scalar_type(t.scalar_type());
      v.ndim = static_cast<int32_t>(t.dim());
      v.shape = t.sizes().data();
      v.data = t.data_ptr();
      v.nbytes = t.nbytes();
    }
    h->result.n = static_cast<int32_t>(h->views.size());
    h->result.tensors = h->views.data();
    h->result.impl = h.get();
    *out = &h.release()->result;
    return GROVE_OK;
  } catch (const std::exception& e) {
    *err = dup(summarize(message(e)));
  } catch (...) {
    *err = dup("unknown C++ exception");
  }
  return GROVE_ERR_EXEC;
}

void grove_result_free(grove_result* r) {
  if (r == nullptr) return;
  try {
    delete static_cast<Holder*>(r->impl);
  } catch (...) {
  }
}

int32_t grove_omp_team_size(int32_t intra_threads) {
  try {
    set_intra_threads(intra_threads);
    int32_t size = 0;
#pragma omp parallel
    {
#pragma omp single
      size = omp_get_num_threads();
    }
    return size;
  } catch (...) {
    return -1;
  }
}

void grove_blas_find(grove_blas* b) {
  *b = grove_blas{"", nullptr, nullptr, nullptr, GROVE_BLAS_UNKNOWN, -1};
  try {
    BLAS blas;
    if (!blas.found()) return;
    b->path = dup(blas.path());
    if (auto config = blas.sym<openblas_get_config_t>("openblas_get_config")) {
      b->library = "OpenBLAS";
      b->version = dup(config());
      b->core_path = dup(BLAS::file(reinterpret_cast<void*>(config)));
      if (auto parallel = blas.sym<openblas_int_t>("openblas_get_parallel")) {
        int p = parallel();
        if (p >= GROVE_BLAS_SEQUENTIAL && p <= GROVE_BLAS_OPENMP) b->parallel = p;
      }
      if (auto threads = blas.sym<openblas_int_t>("openblas_get_num_threads")) b->threads = threads();
      return;
    }
    auto mkl_threads = blas.sym<mkl_int_t>("MKL_Get_Max_Threads");
    if (mkl_threads == nullptr) mkl_threads = blas.sym<mkl_int_t>("mkl_get_max_threads");
    if (mkl_threads != nullptr) {
      b->library = "MKL";
      b->core_path = dup(BLAS::file(reinterpret_cast<void*>(mkl_threads)));
      if (auto version = blas.sym<mkl_version_t>("MKL_Get_Version_String")) {
        char buf[256] = {0};
        version(buf, sizeof buf - 1);
        b->version = dup(trim(buf));
      }
      b->threads = mkl_threads();
      return;
    }
    if (auto threads = blas.sym<bli_int_t>("bli_thread_get_num_threads")) {
      b->library = "BLIS";
      b->core_path = dup(BLAS::file(reinterpret_cast<void*>(threads)));
      if (auto version = blas.sym<bli_str_t>("bli_info_get_version_str")) b->version = dup(std::string("BLIS ") + version());
      auto openmp = blas.sym<bli_int_t>("bli_info_get_enable_openmp");
      auto pthreads = blas.sym<bli_int_t>("bli_info_get_enable_pthreads");
      if (openmp != nullptr && pthreads != nullptr) {
        b->parallel = static_cast<int32_t>(openmp()) != 0     ? GROVE_BLAS_OPENMP
                      : static_cast<int32_t>(pthreads()) != 0 ? GROVE_BLAS_PTHREAD
                                                               : GROVE_BLAS_SEQUENTIAL;
      }
      b->threads = static_cast<int32_t>(threads());
      return;
    }
    if (void* atlas = blas.sym<void*>("ATL_buildinfo")) {
      b->library = "ATLAS";
      b->core_path = dup(BLAS::file(atlas));
      return;
    }
    b->library = "other";
  } catch (...) {
  }
}

void grove_blas_free(grove_blas* b) {
  if (b == nullptr) return;
  std::free(b->version);
  std::free(b->path);
  std::free(b->core_path);
  b->version = b->path = b->core_path = nullptr;
}

int32_t grove_blas_set_threads(int32_t n) {
  try {
    if (n < 1) n = 1;
    BLAS blas;
    if (blas.sym<openblas_get_config_t>("openblas_get_config") != nullptr) {
      if (auto set = blas.sym<openblas_set_t>("openblas_set_num_threads")) {
        set(n);
        return 0;
      }
      return -1;
    }
    auto mkl_set = blas.sym<mkl_set_t>("MKL_Set_Num_Threads");
    if (mkl_set == nullptr) mkl_set = blas.sym<mkl_set_t>("mkl_set_num_threads");
    if (mkl_set != nullptr) {
      mkl_set(n);
      return 0;
    }
    if (auto set = blas.sym<bli_set_t>("bli_thread_set_num_threads")) {
      set(n);
      return 0;
    }
  } catch (...) {
  }
  return -1;
}

int32_t grove_mm_cpu(int32_t n, int32_t reps, int32_t intra_threads,
                     int64_t* thread_ns, int64_t* process_ns) {
  try {
    set_intra_threads(intra_threads);
    c10::InferenceMode guard;
    at::Tensor a = at::rand({n, n});
    at::Tensor b = at::rand({n, n});
    at::Tensor c = at::mm(a, b);  // warm-up: OpenBLAS's buffers, ATen's dispatch
    int64_t t0 = cpu_ns(CLOCK_THREAD_CPUTIME_ID), p0 = cpu_ns(CLOCK_PROCESS_CPUTIME_ID);
    for (int32_t i = 0; i < reps; i++) c = at::mm(a, b);
    *thread_ns = cpu_ns(CLOCK_THREAD_CPUTIME_ID) - t0;
    *process_ns = cpu_ns(CLOCK_PROCESS_CPUTIME_ID) - p0;
    return c.numel() == static_cast<int64_t>(n) * n ? 0 : -1;
  } catch (...) {
    return -1;
  }
}

}  // extern "C"
