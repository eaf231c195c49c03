// Package runtimes lists the model runtimes Grove is built with: the one
// registration line a new runtime adds, read by both programs that load
// models (cmd/grove and the DeepRec processor library).
package runtimes

import (
	"github.com/groveml/grove/servables"
	"github.com/groveml/grove/servables/onnx"
	"github.com/groveml/grove/servables/torch"
)

// Builtin returns the runtimes of this build, in the order a model's files
// are offered to them. The ONNX runtime loads onnxLib (empty:
// onnx.DefaultLibraryPath) with the first .onnx model; without it only
// .onnx models fail to load.
func Builtin(onnxLib string) servables.Registry {
	return servables.Registry{
		torch.Runtime{},
		onnx.Runtime{LibraryPath: onnxLib},
	}
}
