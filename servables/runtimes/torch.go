//go:build !grove_notorch

package runtimes

import (
	"github.com/groveml/grove/servables"
	"github.com/groveml/grove/servables/torch"
)

// torchRuntimes is the TorchScript runtime, opening libgrove_torch.so at
// lib (empty: torch.DefaultLibraryPath) with the first TorchScript model.
func torchRuntimes(lib string) servables.Registry {
	return servables.Registry{torch.Runtime{LibraryPath: lib}}
}

// hostBLAS is the BLAS library libtorch's matrix products run on.
func hostBLAS(lib string) (servables.BLAS, bool, error) {
	b, err := torch.HostBLAS(lib)
	return b, err == nil, err
}
