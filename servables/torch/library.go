package torch

// #include <stdlib.h>
// #include "dl.h"
import "C"

import (
	"crypto/sha256"
	"embed"
	"encoding/hex"
	"errors"
	"fmt"
	"sync"
	"unsafe"

	"github.com/groveml/grove/servables"
)

// LibraryEnv names the environment variable that overrides the path of
// libgrove_torch.so.
const LibraryEnv = "GROVE_TORCH_LIB"

// ReleaseLibraryRel is where a release keeps libgrove_torch.so, relative
// to the directory of the file that opens it (servables.LibraryPlaces).
const ReleaseLibraryRel = "../lib/libgrove_torch.so"

// ErrLibrary marks a model that could not load because libgrove_torch.so,
// or libtorch under it, is missing or cannot be opened.
var ErrLibrary = errors.New("TorchScript runtime not available")

//go:embed shim/shim.h shim/shim.cc
var shimSources embed.FS

// LibraryVersion is the version libgrove_torch.so must say it is: the
// first 16 hex digits of the SHA-256 of shim/shim.h followed by
// shim/shim.cc, as scripts/torchshim.sh computes it.
func LibraryVersion() string { return libraryVersion() }

// libraryVersion computes LibraryVersion once.
var libraryVersion = sync.OnceValue(func() string {
	h := sha256.New()
	for _, name := range []string{"shim/shim.h", "shim/shim.cc"} {
		b, err := shimSources.ReadFile(name)
		if err != nil {
			panic(err) // embedded at build time
		}
		h.Write(b)
	}
	return hex.EncodeToString(h.Sum(nil))[:16]
})

// places are where libgrove_torch.so may be: $GROVE_TORCH_LIB, a release's
// lib/, or the repository's .cache/torchshim/<version>/.
func places() servables.LibraryPlaces {
	return servables.LibraryPlaces{Env: LibraryEnv, ReleaseRel: ReleaseLibraryRel,
		CacheRel: ".cache/torchshim/" + LibraryVersion() + "/libgrove_torch.so"}
}

// DefaultLibraryPath is FindLibrary for the running executable.
func DefaultLibraryPath() string { return places().ForExecutable() }

// FindLibrary returns the libgrove_torch.so a program at self (the path of
// the executable or shared library that opens it; empty when unknown)
// should open: $GROVE_TORCH_LIB when set, else lib/ of a release, else the
// repository's .cache (servables.LibraryPlaces.FindLibrary).
func FindLibrary(self string) string { return places().FindLibrary(self) }

// lib is the process's one libgrove_torch.so, opened and set up by the
// first initTorch that finds it; a failed attempt is retried by the next,
// so building the library while the server runs is enough.
var lib struct {
	mu    sync.Mutex
	ready bool
	path  string
}

// initTorch opens libgrove_torch.so at path (DefaultLibraryPath when
// empty), once per process, and sets libtorch's process-wide inter-op
// pool to one thread and the BLAS library's own thread count to one (see
// the package doc, "BLAS"). Grove runs models concurrently itself, and
// TorchScript models only use the inter-op pool for torch.jit.fork.
// libtorch refuses the inter-op setting once inter-op work has started;
// that is harmless and ignored, as is a BLAS library without a thread
// API. The opening (libtorch's initializers) and the inter-op pool's
// start run on a goroutine of their own: Load may run on a thread at a
// lowered priority (internal/lowprio), which threads started there,
// serving every model later, would inherit; a goroutine that does not
// lock its thread never runs on such a thread.
func initTorch(path string) error {
	lib.mu.Lock()
	defer lib.mu.Unlock()
	if lib.ready {
		return nil
	}
	if path == "" {
		path = DefaultLibraryPath()
	}
	errc := make(chan error, 1)
	go func() {
		if err := openLibrary(path, LibraryVersion()); err != nil {
			errc <- err
			return
		}
		if msg := C.gt_init(1); msg != nil {
			C.free(unsafe.Pointer(msg))
		}
		setBLASThreads(1)
		errc <- nil
	}()
	if err := <-errc; err != nil {
		return err
	}
	lib.ready, lib.path = true, path
	return nil
}

// openLibrary opens the library at path if it was built as version want.
func openLibrary(path, want string) error {
	cpath, cwant := C.CString(path), C.CString(want)
	defer C.free(unsafe.Pointer(cpath))
	defer C.free(unsafe.Pointer(cwant))
	if msg := C.gt_open(cpath, cwant); msg != nil {
		return fmt.Errorf("%w: opening %s: %s; %s", ErrLibrary, path, takeString(msg), howToGet())
	}
	return nil
}

// howToGet ends every library error.
func howToGet() string {
	return fmt.Sprintf("Grove's TorchScript runtime needs libgrove_torch.so of these sources (version %s) and Debian's libtorch: "+
		"run `make deps` (it installs libtorch-dev; scripts/torchshim.sh builds the library into .cache/torchshim/), "+
		"set %s to the library, or keep it in lib/ beside bin/ as a release does", LibraryVersion(), LibraryEnv)
}

// Library returns the path of the libgrove_torch.so this process opened,
// or "" before the first TorchScript model loads.
func Library() string {
	lib.mu.Lock()
	defer lib.mu.Unlock()
	return lib.path
}
