//go:build !grove_notorch

package runtimes

import (
	"github.com/groveml/grove/servables"
	"github.com/groveml/grove/servables/torch"
)

// torchRuntimes is the TorchScript runtime (libtorch, linked in).
func torchRuntimes() servables.Registry { return servables.Registry{torch.Runtime{}} }

// hostBLAS is the BLAS library libtorch's matrix products run on.
func hostBLAS() (servables.BLAS, bool) { return torch.HostBLAS(), true }
