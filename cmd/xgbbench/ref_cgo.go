//go:build xgbref

package main

/*
#cgo LDFLAGS: -lxgboost
#include <stdlib.h>
#include <xgboost/c_api.h>
*/
import "C"

import (
	"errors"
	"fmt"
	"math"
	"unsafe"
)

// refBooster is a model loaded by XGBoost's own library (libxgboost,
// Debian's libxgboost-dev), predicting through its C API on one thread.
type refBooster struct {
	h     C.BoosterHandle
	proxy C.DMatrixHandle
	// predict and margin are XGBoosterPredictFromDense's configurations:
	// the prediction after the objective's transform, and the margin.
	predict, margin *C.char
	numFeature      int
}

// refInput is a batch of rows in C memory with the array interface
// XGBoosterPredictFromDense reads it through, made once before timing.
type refInput struct {
	data  *C.float
	iface *C.char
	rows  int
}

// refBuilt reports whether the program has XGBoost's C API: it has.
func refBuilt() error { return nil }

// refVersion is the version of the loaded XGBoost library.
func refVersion() string {
	var major, minor, patch C.int
	C.XGBoostVersion(&major, &minor, &patch)
	return fmt.Sprintf("%d.%d.%d", major, minor, patch)
}

func xgbErr(what string) error {
	return fmt.Errorf("xgboost C API: %s: %s", what, C.GoString(C.XGBGetLastError()))
}

// loadRef loads the model file path with XGBoosterLoadModel, on one
// thread (nthread 1).
func loadRef(path string) (*refBooster, error) {
	b := &refBooster{}
	if C.XGBoosterCreate(nil, 0, &b.h) != 0 {
		return nil, xgbErr("XGBoosterCreate")
	}
	cpath := C.CString(path)
	defer C.free(unsafe.Pointer(cpath))
	if C.XGBoosterLoadModel(b.h, cpath) != 0 {
		err := xgbErr("XGBoosterLoadModel " + path)
		C.XGBoosterFree(b.h)
		return nil, err
	}
	name, one := C.CString("nthread"), C.CString("1")
	defer C.free(unsafe.Pointer(name))
	defer C.free(unsafe.Pointer(one))
	if C.XGBoosterSetParam(b.h, name, one) != 0 {
		err := xgbErr("XGBoosterSetParam nthread")
		C.XGBoosterFree(b.h)
		return nil, err
	}
	var nf C.bst_ulong
	if C.XGBoosterGetNumFeature(b.h, &nf) != 0 {
		err := xgbErr("XGBoosterGetNumFeature")
		C.XGBoosterFree(b.h)
		return nil, err
	}
	b.numFeature = int(nf)
	// A proxy DMatrix made once, as a serving loop would keep it: without
	// one, each call makes its own.
	if C.XGProxyDMatrixCreate(&b.proxy) != 0 {
		err := xgbErr("XGProxyDMatrixCreate")
		C.XGBoosterFree(b.h)
		return nil, err
	}
	const config = `{"type": %d, "training": false, "iteration_begin": 0, "iteration_end": 0, "strict_shape": false, "missing": NaN, "cache_id": 0}`
	b.predict = C.CString(fmt.Sprintf(config, 0))
	b.margin = C.CString(fmt.Sprintf(config, 1))
	return b, nil
}

// newInput copies rows rows of x (NumFeature values each) into C memory.
func (b *refBooster) newInput(x []float32, rows int) *refInput {
	n := rows * b.numFeature
	data := (*C.float)(C.malloc(C.size_t(max(n, 1)) * C.sizeof_float))
	copy(unsafe.Slice((*float32)(unsafe.Pointer(data)), n), x[:n])
	iface := fmt.Sprintf(`{"data": [%d, true], "shape": [%d, %d], "typestr": "<f4", "version": 3}`,
		uintptr(unsafe.Pointer(data)), rows, b.numFeature)
	return &refInput{data: data, iface: C.CString(iface), rows: rows}
}

// free releases the input's C memory.
func (in *refInput) free() {
	C.free(unsafe.Pointer(in.data))
	C.free(unsafe.Pointer(in.iface))
}

// run predicts in's rows (the margin when margin is set) and returns
// XGBoost's output buffer, valid until the next call.
func (b *refBooster) run(in *refInput, margin bool) ([]float32, error) {
	config := b.predict
	if margin {
		config = b.margin
	}
	var shape *C.bst_ulong
	var dim C.bst_ulong
	var out *C.float
	if C.XGBoosterPredictFromDense(b.h, in.iface, config, b.proxy, &shape, &dim, &out) != 0 {
		return nil, xgbErr("XGBoosterPredictFromDense")
	}
	n := 1
	for _, d := range unsafe.Slice(shape, int(dim)) {
		n *= int(d)
	}
	if n > math.MaxInt32 || out == nil && n > 0 {
		return nil, errors.New("xgboost C API: XGBoosterPredictFromDense returned no output")
	}
	return unsafe.Slice((*float32)(unsafe.Pointer(out)), n), nil
}

// close frees the booster.
func (b *refBooster) close() {
	C.XGDMatrixFree(b.proxy)
	C.XGBoosterFree(b.h)
	C.free(unsafe.Pointer(b.predict))
	C.free(unsafe.Pointer(b.margin))
}
