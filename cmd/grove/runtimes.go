package main

import (
	"github.com/groveml/grove/servables"
	"github.com/groveml/grove/servables/onnx"
	"github.com/groveml/grove/servables/torch"
)

// runtimes lists the model runtimes of this build; build tags may add more.
// The ONNX runtime loads onnxLib (empty: onnx.DefaultLibraryPath, that is
// $GROVE_ONNXRUNTIME_LIB, else ../lib/ from the executable's directory as in
// a release, else the .cache that `make deps` fills) with the first .onnx
// model; without it only .onnx models fail to load.
func runtimes(onnxLib string) servables.Registry {
	return append(servables.Registry{torch.Runtime{}, onnx.Runtime{LibraryPath: onnxLib}}, extraRuntimes()...)
}
