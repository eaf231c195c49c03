package main

import (
	"github.com/groveml/grove/servables"
	"github.com/groveml/grove/servables/runtimes"
)

// runtimes lists the model runtimes of this build (runtimes.Builtin);
// build tags may add more. The TorchScript and ONNX runtimes open their
// libraries with their first model (empty paths: $GROVE_TORCH_LIB and
// $GROVE_ONNXRUNTIME_LIB, else ../lib/ from the executable's directory as
// in a release, else the .cache that `make deps` fills); without one only
// that runtime's models fail to load.
func runtimesOf(libs runtimes.Libraries) servables.Registry {
	return append(runtimes.Builtin(libs), extraRuntimes()...)
}
