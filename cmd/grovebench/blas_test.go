package main

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

// TestBLASLineSaysWhatGroveReported: the report's BLAS line is read from
// grove's /v1/status and names the library's build, its threading, the
// threads a matrix product uses and the files; a status without a blas
// object, or no answer, gives a line that says the BLAS is unknown and why.
func TestBLASLineSaysWhatGroveReported(t *testing.T) {
	status := `{"models":[],"ready":true,"blas":{"library":"OpenBLAS","version":"OpenBLAS 0.3.21 DYNAMIC_ARCH Haswell",` +
		`"parallel":"pthread","path":"/usr/lib/x86_64-linux-gnu/openblas-pthread/libblas.so.3",` +
		`"core_path":"/usr/lib/x86_64-linux-gnu/openblas-pthread/libopenblasp-r0.3.21.so","threads":1,"per_call":false}}`
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/v1/status" {
			http.NotFound(w, r)
			return
		}
		fmt.Fprint(w, status)
	}))
	defer srv.Close()
	b := fetchBLAS(context.Background(), srv.URL)
	line := b.line()
	for _, want := range []string{"OpenBLAS 0.3.21 DYNAMIC_ARCH Haswell", "parallel pthread", "1 thread(s) per matrix product",
		"openblas-pthread/libblas.so.3 over /usr/lib/x86_64-linux-gnu/openblas-pthread/libopenblasp-r0.3.21.so"} {
		if !strings.Contains(line, want) {
			t.Errorf("line %q lacks %q", line, want)
		}
	}
	b.PerCall = true
	if line := b.line(); !strings.Contains(line, "intra_op_threads per matrix product") {
		t.Errorf("per call: line %q", line)
	}

	if _, err := parseBLAS([]byte(`{"models":[],"ready":true}`)); !errors.Is(err, errNoBLAS) {
		t.Errorf("no blas object: %v", err)
	}
	status = `{"models":[]}`
	if line := fetchBLAS(context.Background(), srv.URL).line(); !strings.HasPrefix(line, "BLAS: unknown (no blas in /v1/status") {
		t.Errorf("no blas object: line %q", line)
	}
	if line := fetchBLAS(context.Background(), srv.URL+"/nothing").line(); !strings.HasPrefix(line, "BLAS: unknown (GET /v1/status: HTTP 404") {
		t.Errorf("HTTP 404: line %q", line)
	}
}
