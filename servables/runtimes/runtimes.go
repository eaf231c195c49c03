// Package runtimes lists the model runtimes Grove is built with: the one
// registration line a new runtime adds, read by both programs that load
// models (cmd/grove and the DeepRec processor library).
package runtimes

import (
	"github.com/groveml/grove/servables"
	"github.com/groveml/grove/servables/onnx"
	"github.com/groveml/grove/servables/torch"
	"github.com/groveml/grove/servables/xgboost"
)

// Libraries are the shared libraries the runtimes open with their first
// model, each found from the running executable when empty.
type Libraries struct {
	// ONNX is ONNX Runtime's libonnxruntime.so.1 (onnx.DefaultLibraryPath).
	ONNX string
	// Torch is Grove's libgrove_torch.so over libtorch
	// (torch.DefaultLibraryPath).
	Torch string
}

// Builtin returns the runtimes of this build, in the order a model's files
// are offered to them: TorchScript, then ONNX, then XGBoost (pure Go). The
// TorchScript and ONNX runtimes open their libraries with their first
// model; without one only that runtime's models fail to load.
func Builtin(libs Libraries) servables.Registry {
	return servables.Registry{
		torch.Runtime{LibraryPath: libs.Torch},
		onnx.Runtime{LibraryPath: libs.ONNX, Info: onnx.NewInfoCache(onnx.InfoCacheSize)},
		xgboost.Runtime{},
	}
}

// BLAS returns the host's BLAS library that the TorchScript runtime's
// matrix products run on in this process, its threads set up for serving
// (torch.HostBLAS, which opens the TorchScript runtime's library at
// torchLib); the error says why that library could not be opened. ONNX
// Runtime and XGBoost use no system BLAS.
func BLAS(torchLib string) (servables.BLAS, error) { return torch.HostBLAS(torchLib) }
