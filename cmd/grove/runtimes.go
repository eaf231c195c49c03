package main

import (
	"github.com/groveml/grove/servables"
	"github.com/groveml/grove/servables/runtimes"
)

// runtimes lists the model runtimes of this build (runtimes.Builtin);
// build tags may add more. The ONNX runtime loads onnxLib (empty:
// onnx.DefaultLibraryPath, that is $GROVE_ONNXRUNTIME_LIB, else ../lib/
// from the executable's directory as in a release, else the .cache that
// `make deps` fills) with the first .onnx model; without it only .onnx
// models fail to load.
func runtimesOf(onnxLib string) servables.Registry {
	return append(runtimes.Builtin(onnxLib), extraRuntimes()...)
}
