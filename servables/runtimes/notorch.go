//go:build grove_notorch

package runtimes

import "github.com/groveml/grove/servables"

// torchRuntimes is none: a build with the grove_notorch tag has no
// TorchScript runtime (the processor library's valgrind run: libtorch
// brings in libhwy, whose initializer valgrind cannot run on every CPU).
func torchRuntimes(string) servables.Registry { return nil }

// hostBLAS is none: without libtorch no runtime calls the host's BLAS.
func hostBLAS(string) (servables.BLAS, bool, error) { return servables.BLAS{}, false, nil }
