// Package runtimes lists the model runtimes Grove is built with: the one
// registration line a new runtime adds, read by both programs that load
// models (cmd/grove and the DeepRec processor library).
package runtimes

import (
	"github.com/groveml/grove/servables"
	"github.com/groveml/grove/servables/onnx"
	"github.com/groveml/grove/servables/xgboost"
)

// Builtin returns the runtimes of this build, in the order a model's files
// are offered to them: TorchScript (unless built with the grove_notorch
// tag), then ONNX, then XGBoost (pure Go). The ONNX runtime loads onnxLib (empty:
// onnx.DefaultLibraryPath) with the first .onnx model; without it only
// .onnx models fail to load.
func Builtin(onnxLib string) servables.Registry {
	return append(torchRuntimes(),
		onnx.Runtime{LibraryPath: onnxLib},
		xgboost.Runtime{},
	)
}

// BLAS returns the host's BLAS library that the TorchScript runtime's
// matrix products run on in this process, its threads set up for serving
// (torch.HostBLAS); ok is false in a build without libtorch. ONNX Runtime
// and XGBoost use no system BLAS.
func BLAS() (b servables.BLAS, ok bool) { return hostBLAS() }
