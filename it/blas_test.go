package it

import (
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// TestServeLogsAndReportsTheBLASItSetUp runs grove serve on the host's
// BLAS and on Debian's pthread OpenBLAS (chosen with LD_LIBRARY_PATH, the
// host's selection untouched; skipped where it is not installed) with
// OPENBLAS_NUM_THREADS unset, and checks that grove logs the library it
// loaded at start, and that /v1/status's blas object and the
// grove_blas_info metric say the same: for the pthread build, its
// libblas.so.3, parallel pthread and one thread per matrix product (the
// library's own default is one per core).
//
// Budget: 5 s.
func TestServeLogsAndReportsTheBLASItSetUp(t *testing.T) {
	t.Parallel()
	dirs := []string{""}
	if found, _ := filepath.Glob("/usr/lib/*/openblas-pthread/libblas.so.3"); len(found) > 0 {
		dirs = append(dirs, filepath.Dir(found[0]))
	}
	for _, dir := range dirs {
		name := "host"
		if dir != "" {
			name = filepath.Base(dir)
		}
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			env := slices.DeleteFunc(os.Environ(), func(kv string) bool {
				return strings.HasPrefix(kv, "OPENBLAS_NUM_THREADS=") || strings.HasPrefix(kv, "GOTO_NUM_THREADS=") ||
					strings.HasPrefix(kv, "OMP_NUM_THREADS=") || strings.HasPrefix(kv, "LD_LIBRARY_PATH=")
			})
			if dir != "" {
				env = append(env, "LD_LIBRARY_PATH="+dir)
			}
			g := startBinary(t, groveBin, "", env, pctrBucket(t).URL())

			line := regexp.MustCompile(`msg="BLAS for TorchScript matrix products" .*`).FindString(g.logs.String())
			if line == "" {
				t.Fatal(`no "BLAS for TorchScript matrix products" line in grove's log`)
			}
			_, body := g.get("/v1/status")
			var st struct {
				BLAS *struct {
					Library  string `json:"library"`
					Parallel string `json:"parallel"`
					Path     string `json:"path"`
					Threads  int    `json:"threads"`
					PerCall  bool   `json:"per_call"`
				} `json:"blas"`
			}
			if err := json.Unmarshal(body, &st); err != nil || st.BLAS == nil {
				t.Fatalf("/v1/status has no blas object (%v): %s", err, body)
			}
			b := *st.BLAS
			threads := "1"
			if b.PerCall {
				threads = "intra_op_threads"
			}
			for _, want := range []string{"library=" + b.Library, "parallel=" + b.Parallel, "path=" + b.Path, "threads=" + threads} {
				if !strings.Contains(line, want+" ") && !strings.HasSuffix(line, want) {
					t.Errorf("log line %q lacks %s (from /v1/status: %+v)", line, want, b)
				}
			}
			_, metrics := g.get("/metrics")
			info := regexp.MustCompile(`(?m)^grove_blas_info\{.*\} 1$`).FindString(string(metrics))
			for _, want := range []string{`library="` + b.Library + `"`, `parallel="` + b.Parallel + `"`, `path="` + b.Path + `"`, `threads="` + threads + `"`} {
				if !strings.Contains(info, want) {
					t.Errorf("metric %q lacks %s", info, want)
				}
			}
			if b.Library == "OpenBLAS" && b.Threads != 1 {
				t.Errorf("OpenBLAS's own thread count is %d, want 1", b.Threads)
			}
			if dir != "" {
				want, _ := filepath.EvalSymlinks(filepath.Join(dir, "libblas.so.3"))
				if b.Library != "OpenBLAS" || b.Parallel != "pthread" || b.Path != want || b.PerCall {
					t.Errorf("blas %+v, want OpenBLAS, parallel pthread, path %s, not per call", b, want)
				}
			}
		})
	}
}
