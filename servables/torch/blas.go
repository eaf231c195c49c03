package torch

// #include <stdlib.h>
// #include "dl.h"
import "C"

import (
	"debug/elf"
	"path/filepath"
	"slices"

	"github.com/groveml/grove/servables"
)

// HostBLAS returns the BLAS library libtorch's matrix products run on in
// this process, after opening libgrove_torch.so at path (DefaultLibraryPath
// when empty) and setting the BLAS up for serving as Load does before the
// first model (see the package doc, "BLAS"). The error is initTorch's: the
// library could not be opened (ErrLibrary).
func HostBLAS(path string) (servables.BLAS, error) {
	if err := initTorch(path); err != nil {
		return servables.BLAS{}, err
	}
	return findBLAS(), nil
}

// setBLASThreads sets the BLAS library's own thread count through its
// own API; it reports whether the library has one Grove knows.
func setBLASThreads(n int) bool { return C.gt_blas_set_threads(C.int32_t(n)) == 0 }

// findBLAS describes the BLAS library libtorch's sgemm_ resolves to.
func findBLAS() servables.BLAS {
	var b C.grove_blas
	C.gt_blas_find(&b)
	defer C.gt_blas_free(&b)
	out := servables.BLAS{Library: C.GoString(b.library), Version: goString(b.version),
		Parallel: parallelName(int(b.parallel)), Path: resolved(goString(b.path)), Threads: max(int(b.threads), 0)}
	if core := resolved(goString(b.core_path)); core != out.Path {
		out.CorePath = core
	}
	// OpenBLAS's interface built for OpenMP sizes each call from
	// omp_get_max_threads of the calling thread; its pthread interface
	// reads the library's process-wide count.
	out.PerCall = out.Library == "OpenBLAS" && importsOpenMP(out.Path)
	return out
}

// parallelName names a GROVE_BLAS_* threading value.
func parallelName(p int) string {
	switch p {
	case C.GROVE_BLAS_SEQUENTIAL:
		return "sequential"
	case C.GROVE_BLAS_PTHREAD:
		return "pthread"
	case C.GROVE_BLAS_OPENMP:
		return "openmp"
	}
	return "unknown"
}

// goString copies a C string, "" for NULL.
func goString(s *C.char) string {
	if s == nil {
		return ""
	}
	return C.GoString(s)
}

// resolved returns path with its symbolic links resolved, or path itself
// when they cannot be.
func resolved(path string) string {
	if path == "" {
		return ""
	}
	if p, err := filepath.EvalSymlinks(path); err == nil {
		return p
	}
	return path
}

// importsOpenMP reports whether the shared object at path calls
// omp_get_max_threads (false when it cannot be read).
func importsOpenMP(path string) bool {
	f, err := elf.Open(path)
	if err != nil {
		return false
	}
	defer f.Close()
	syms, err := f.ImportedSymbols()
	if err != nil {
		return false
	}
	return slices.ContainsFunc(syms, func(s elf.ImportedSymbol) bool { return s.Name == "omp_get_max_threads" })
}

// mmCPU multiplies two n x n matrices with libtorch reps times on the
// calling OS thread, its OpenMP setting intraOpThreads as Predict sets it,
// and returns the CPU time that thread and the whole process used.
func mmCPU(n, reps, intraOpThreads int) (thread, process int64, ok bool) {
	var t, p C.int64_t
	ok = C.gt_mm_cpu(C.int32_t(n), C.int32_t(reps), C.int32_t(intraOpThreads), &t, &p) == 0
	return int64(t), int64(p), ok
}
