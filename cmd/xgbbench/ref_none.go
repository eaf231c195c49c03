//go:build !xgbref

package main

import "errors"

// errNoRef is what a build without the xgbref tag answers: the reference
// predictor needs cgo and Debian's libxgboost-dev.
var errNoRef = errors.New("xgbbench was built without XGBoost's C API: build it with -tags xgbref (cgo, Debian's libxgboost-dev), as make bench-xgboost does")

type refBooster struct{ numFeature int }

type refInput struct{ rows int }

// refBuilt reports whether the program has XGBoost's C API: it has not.
func refBuilt() error { return errNoRef }

func refVersion() string { return "none" }

func loadRef(string) (*refBooster, error) { return nil, errNoRef }

func (*refBooster) newInput([]float32, int) *refInput { return nil }

func (*refInput) free() {}

func (*refBooster) run(*refInput, bool) ([]float32, error) { return nil, errNoRef }

func (*refBooster) close() {}
