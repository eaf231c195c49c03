package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/groveml/grove/servables"
)

// blasReport is the BLAS library grove's TorchScript models ran on, as the
// grove serve that was measured reports it (the blas object of its
// /v1/status), or why it is unknown.
type blasReport struct {
	servables.BLAS
	Error string `json:"error,omitempty"`
}

// errNoBLAS says /v1/status has no blas object.
var errNoBLAS = errors.New("no blas in /v1/status: a grove built without libtorch, or older than the BLAS report")

// fetchBLAS reads GET baseURL/v1/status's blas object.
func fetchBLAS(ctx context.Context, baseURL string) blasReport {
	body, err := getStatus(ctx, baseURL)
	if err != nil {
		return blasReport{Error: err.Error()}
	}
	b, err := parseBLAS(body)
	if err != nil {
		return blasReport{Error: err.Error()}
	}
	return blasReport{BLAS: b}
}

// parseBLAS extracts the blas object of a /v1/status body.
func parseBLAS(body []byte) (servables.BLAS, error) {
	var st struct {
		BLAS *servables.BLAS `json:"blas"`
	}
	if err := json.Unmarshal(body, &st); err != nil {
		return servables.BLAS{}, fmt.Errorf("GET /v1/status: %w", err)
	}
	if st.BLAS == nil {
		return servables.BLAS{}, errNoBLAS
	}
	return *st.BLAS, nil
}

// line is the report's BLAS line: the library and build, its threading,
// the threads a matrix product used and the files.
func (b blasReport) line() string {
	switch {
	case b.Error != "":
		return "BLAS: unknown (" + b.Error + ")"
	case b.Library == "":
		return "BLAS: none found in grove's process"
	}
	threads := fmt.Sprintf("%d thread(s) per matrix product", b.Threads)
	if b.PerCall {
		threads = "intra_op_threads per matrix product (OpenMP interface)"
	} else if b.Threads == 0 {
		threads = "its own threads (no thread API Grove sets)"
	}
	what := b.Library
	if b.Version != "" {
		what = b.Version
	}
	files := b.Path
	if b.CorePath != "" {
		files += " over " + b.CorePath
	}
	return fmt.Sprintf("BLAS of grove's TorchScript models (from its /v1/status): %s, parallel %s, %s; %s", what, b.Parallel, threads, files)
}
