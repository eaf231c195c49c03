// Command processor is libgrove_processor.so, Grove as a DeepRec serving
// processor: built with go build -buildmode=c-shared (make processor), it
// exports DeepRec's C API (serving/processor/serving/processor.h) and
// wires it to package processor, which does the work. docs/deeprec.md
// says how to link it.
//
// Memory: every output buffer is allocated with malloc and the caller
// frees it with free(). Inputs are copied before the call returns. The
// handle initialize returns is a malloc'd box around a runtime/cgo.Handle
// of the *processor.Processor; it lives as long as the process (DeepRec's
// API has no release). Each handle's model cache ($TMPDIR/grove-processor-*)
// is removed by a C atexit handler when the process exits normally.
// Every function is safe to call from any number of threads at once.
package main

/*
#cgo LDFLAGS: -ldl
#cgo CFLAGS: -D_GNU_SOURCE
#include <dlfcn.h>
#include <ftw.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

// grove_processor_alloc allocates what the library hands to its caller
// (outputs, the handle's box), with malloc: the caller frees it with
// free(). A function of its own so that memory checkers tell these
// buffers from other allocations (processor/ctest/valgrind.supp).
static void *grove_processor_alloc(size_t n) { return malloc(n ? n : 1); }

// grove_processor_self is the path this library was loaded from (NULL
// when unknown): ONNX Runtime is looked for beside it, as a release
// ships it (lib/libgrove_processor.so beside lib/libonnxruntime.so.1).
static const char *grove_processor_self(void) {
	Dl_info info;
	if (dladdr((void *)&grove_processor_self, &info) && info.dli_fname) {
		return info.dli_fname;
	}
	return NULL;
}

// The model caches to remove when the process exits (C only: no Go runs
// in an atexit handler). DeepRec's API has no release call, so a
// process's exit is the only time a handle's cache is known to be done.
static pthread_mutex_t grove_cache_mu = PTHREAD_MUTEX_INITIALIZER;
static char **grove_caches;
static size_t grove_ncaches;

static int grove_remove_entry(const char *path, const struct stat *sb, int flag, struct FTW *ftw) {
	(void)sb; (void)flag; (void)ftw;
	remove(path);
	return 0;
}

static void grove_remove_caches(void) {
	pthread_mutex_lock(&grove_cache_mu);
	for (size_t i = 0; i < grove_ncaches; i++) {
		nftw(grove_caches[i], grove_remove_entry, 16, FTW_DEPTH | FTW_PHYS);
	}
	pthread_mutex_unlock(&grove_cache_mu);
}

// grove_processor_remove_at_exit has dir removed, with what it holds,
// when the process exits through exit() or a return from main; 0 on
// success.
static int grove_processor_remove_at_exit(const char *dir) {
	int rc = -1;
	pthread_mutex_lock(&grove_cache_mu);
	char **caches = realloc(grove_caches, (grove_ncaches + 1) * sizeof *caches);
	char *copy = strdup(dir);
	if (caches && copy) {
		grove_caches = caches;
		grove_caches[grove_ncaches++] = copy;
		copy = NULL;
		rc = grove_ncaches > 1 || atexit(grove_remove_caches) == 0 ? 0 : -1;
	} else if (caches) {
		grove_caches = caches;
	}
	free(copy);
	pthread_mutex_unlock(&grove_cache_mu);
	return rc;
}
*/
import "C"

import (
	"context"
	"log/slog"
	"os"
	"path/filepath"
	"runtime/cgo"
	"syscall"
	"unsafe"

	"github.com/groveml/grove/processor"
	"github.com/groveml/grove/servables/onnx"
	"github.com/groveml/grove/servables/runtimes"
	"github.com/groveml/grove/servables/torch"
)

// maxBatch bounds the NULL-terminated arrays of batch_process.
const maxBatch = 1 << 20

func main() {}

// logger is the library's log: text on stderr, at the level of
// $GROVE_LOG_LEVEL (debug, info, warn, error; default info).
func logger() *slog.Logger {
	var level slog.Level
	if err := level.UnmarshalText([]byte(os.Getenv("GROVE_LOG_LEVEL"))); err != nil {
		level = slog.LevelInfo
	}
	return slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: level}))
}

// selfPath is the path this library was loaded from, or "" when unknown.
func selfPath() string {
	if p := C.grove_processor_self(); p != nil {
		return C.GoString(p)
	}
	return ""
}

//export initialize
func initialize(modelEntry, modelConfig *C.char, state *C.int) unsafe.Pointer {
	fail := func() unsafe.Pointer {
		if state != nil {
			*state = -1
		}
		return nil
	}
	log := logger()
	if modelConfig == nil {
		log.Error("initialize: model_config is NULL")
		return fail()
	}
	entry := ""
	if modelEntry != nil {
		entry = C.GoString(modelEntry)
	}
	// An absolute path: the atexit handler removes it by this path, after
	// the host may have changed its working directory ($TMPDIR may be
	// relative).
	tmp, err := filepath.Abs(os.TempDir())
	var cache string
	if err == nil {
		cache, err = os.MkdirTemp(tmp, "grove-processor-")
	}
	if err != nil {
		log.Error("initialize: creating the model cache", "err", err)
		return fail()
	}
	cdir := C.CString(cache)
	rc := C.grove_processor_remove_at_exit(cdir)
	C.free(unsafe.Pointer(cdir))
	if rc != 0 {
		log.Warn("initialize: the model cache will not be removed at exit", "dir", cache)
	}
	p, err := processor.New(context.Background(), entry, []byte(C.GoString(modelConfig)),
		processor.Options{Logger: log, CacheDir: cache,
			Libraries: runtimes.Libraries{ONNX: onnx.FindLibrary(selfPath()), Torch: torch.FindLibrary(selfPath())}})
	if err != nil {
		log.Error("initialize failed", "err", err)
		return fail()
	}
	box := (*C.uintptr_t)(C.grove_processor_alloc(C.size_t(unsafe.Sizeof(C.uintptr_t(0)))))
	*box = C.uintptr_t(cgo.NewHandle(p))
	if state != nil {
		*state = 0
	}
	return unsafe.Pointer(box)
}

// lookup returns the Processor a handle from initialize boxes; nil for a
// NULL handle.
func lookup(modelBuf unsafe.Pointer) *processor.Processor {
	if modelBuf == nil {
		return nil
	}
	p, _ := cgo.Handle(*(*C.uintptr_t)(modelBuf)).Value().(*processor.Processor)
	return p
}

// output hands data to the caller in a malloc'd buffer (never NULL). The
// bytes are copied by Go, not by libc's memcpy: a memory checker that
// does not know Go's heap (valgrind) at times sees reused goroutine
// stack memory there as unaddressable, and would report the read.
func output(data []byte, outputData *unsafe.Pointer, outputSize *C.int) {
	buf := C.grove_processor_alloc(C.size_t(len(data)))
	copy(unsafe.Slice((*byte)(buf), len(data)), data)
	*outputData = buf
	*outputSize = C.int(len(data))
}

// processOne serves one input for the calling thread.
func processOne(p *processor.Processor, input unsafe.Pointer, size C.int) ([]byte, int) {
	if size < 0 || (size > 0 && input == nil) {
		return []byte("process: input_data is NULL or input_size is negative"), processor.StatusError
	}
	var in []byte
	if size > 0 {
		in = C.GoBytes(input, size)
	}
	// A cgo call runs on the calling thread: its id picks the replica under MOD.
	return p.Process(context.Background(), int64(syscall.Gettid()), in)
}

//export process
func process(modelBuf unsafe.Pointer, inputData unsafe.Pointer, inputSize C.int, outputData *unsafe.Pointer, outputSize *C.int) C.int {
	if outputData == nil || outputSize == nil {
		return processor.StatusError
	}
	p := lookup(modelBuf)
	if p == nil {
		output([]byte("process: model_buf is NULL"), outputData, outputSize)
		return processor.StatusError
	}
	out, status := processOne(p, inputData, inputSize)
	output(out, outputData, outputSize)
	return C.int(status)
}

// batch_process serves input_data[0..n-1], where n is the number of
// entries before the first NULL in input_data (DeepRec counts its inputs
// wrongly, with sizeof on a pointer; here the array ends with a NULL, as
// argv does). output_data and output_size must have room for n entries;
// each output is malloc'd and freed by the caller. It returns 200 when
// every input returned 200, else 500 (each output then holds its
// response or its error text).
//
//export batch_process
func batch_process(modelBuf unsafe.Pointer, inputData *unsafe.Pointer, inputSize *C.int, outputData *unsafe.Pointer, outputSize *C.int) C.int {
	if inputData == nil || inputSize == nil || outputData == nil || outputSize == nil {
		return processor.StatusError
	}
	inputs := unsafe.Slice(inputData, maxBatch)
	n := 0
	for n < maxBatch && inputs[n] != nil {
		n++
	}
	sizes := unsafe.Slice(inputSize, n)
	outs, outSizes := unsafe.Slice(outputData, n), unsafe.Slice(outputSize, n)
	p := lookup(modelBuf)
	status := C.int(processor.StatusOK)
	for i := range n {
		out, st := []byte("batch_process: model_buf is NULL"), processor.StatusError
		if p != nil {
			out, st = processOne(p, inputs[i], sizes[i])
		}
		output(out, &outs[i], &outSizes[i])
		if st != processor.StatusOK {
			status = processor.StatusError
		}
	}
	return status
}

//export get_serving_model_info
func get_serving_model_info(modelBuf unsafe.Pointer, outputData *unsafe.Pointer, outputSize *C.int) C.int {
	if outputData == nil || outputSize == nil {
		return processor.StatusError
	}
	p := lookup(modelBuf)
	if p == nil {
		output([]byte("get_serving_model_info: model_buf is NULL"), outputData, outputSize)
		return processor.StatusError
	}
	out, status := p.ServingModelInfo()
	output(out, outputData, outputSize)
	return C.int(status)
}
