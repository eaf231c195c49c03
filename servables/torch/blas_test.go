package torch

import (
	"bufio"
	"debug/elf"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"testing"

	"github.com/groveml/grove/servables"
)

// blasChildEnv, set, makes the test binary print blasReport as JSON
// instead of running the tests: a process of its own, whose libraries
// LD_LIBRARY_PATH may choose, where nothing but the matrix products runs.
const blasChildEnv = "GROVE_TORCH_BLAS_CHILD"

// blasReport is what a child process found: HostBLAS, then the CPU time of
// matrix products made at one and at two intra-op threads.
type blasReport struct {
	BLAS servables.BLAS
	MM   []mmSplit
}

// mmSplit is the CPU time of 512 x 512 matrix products made on one thread
// with IntraOpThreads set, and what every other thread of the process used
// meanwhile.
type mmSplit struct {
	IntraOpThreads int
	Caller, Others int64 // ns
}

func TestMain(m *testing.M) {
	if os.Getenv(blasChildEnv) != "" {
		os.Exit(blasChild())
	}
	if p := os.Getenv(openChildEnv); p != "" {
		os.Exit(openChild(p))
	}
	if p := os.Getenv(loadChildEnv); p != "" {
		os.Exit(loadChild(p))
	}
	// The tests that call the library's functions directly need it open.
	if err := initTorch(""); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	os.Exit(m.Run())
}

// blasChild is the child process of blasIn.
func blasChild() int {
	runtime.LockOSThread()
	b, err := HostBLAS("")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	r := blasReport{BLAS: b}
	for _, n := range []int{1, 2} {
		thread, process, ok := mmCPU(512, 10, n)
		if !ok {
			fmt.Fprintln(os.Stderr, "matrix product failed")
			return 1
		}
		r.MM = append(r.MM, mmSplit{IntraOpThreads: n, Caller: thread, Others: process - thread})
	}
	if err := json.NewEncoder(os.Stdout).Encode(r); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	return 0
}

// blasIn runs the test binary as a child process with LD_LIBRARY_PATH
// libDir ("": the host's selection) and returns what it found.
func blasIn(t *testing.T, libDir string) blasReport {
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(exe, "-test.run=^$")
	cmd.Env = append(os.Environ(), blasChildEnv+"=1")
	if libDir != "" {
		cmd.Env = append(cmd.Env, "LD_LIBRARY_PATH="+libDir)
	}
	// The environment variables that would set the library's threads
	// before Grove does are left out: the child sees the library's defaults.
	cmd.Env = slices.DeleteFunc(cmd.Env, func(kv string) bool {
		return strings.HasPrefix(kv, "OPENBLAS_NUM_THREADS=") || strings.HasPrefix(kv, "GOTO_NUM_THREADS=") ||
			strings.HasPrefix(kv, "OMP_NUM_THREADS=")
	})
	out, err := cmd.Output()
	if ee := (*exec.ExitError)(nil); errors.As(err, &ee) {
		t.Fatalf("child process (LD_LIBRARY_PATH=%q): %v: %s", libDir, err, ee.Stderr)
	} else if err != nil {
		t.Fatalf("child process (LD_LIBRARY_PATH=%q): %v", libDir, err)
	}
	var r blasReport
	if err := json.Unmarshal(out, &r); err != nil {
		t.Fatalf("child process output %q: %v", out, err)
	}
	return r
}

// mappedFiles returns the files mapped into this process, symbolic links
// resolved.
func mappedFiles(t *testing.T) map[string]bool {
	t.Helper()
	f, err := os.Open("/proc/self/maps")
	if err != nil {
		t.Skipf("no /proc/self/maps: %v", err)
	}
	defer f.Close()
	files := map[string]bool{}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) >= 6 && strings.HasPrefix(fields[5], "/") {
			files[resolved(fields[5])] = true
		}
	}
	return files
}

// defines reports whether the shared object at path defines symbol name.
func defines(t *testing.T, path, name string) bool {
	t.Helper()
	f, err := elf.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	syms, err := f.DynamicSymbols()
	if err != nil {
		t.Fatal(err)
	}
	return slices.ContainsFunc(syms, func(s elf.Symbol) bool { return s.Name == name && s.Section != elf.SHN_UNDEF })
}

// TestHostBLASIsTheLibraryLibtorchLoaded: HostBLAS names a file this
// process has mapped that defines sgemm_, and, for OpenBLAS, the file that
// defines its thread API; the library's own thread count is then one.
func TestHostBLASIsTheLibraryLibtorchLoaded(t *testing.T) {
	b, err := HostBLAS("")
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("%+v", b)
	if b.Library == "" || b.Path == "" {
		t.Fatalf("HostBLAS() = %+v: no library, or no file", b)
	}
	mapped := mappedFiles(t)
	if !mapped[b.Path] {
		t.Errorf("Path %s is not mapped into this process", b.Path)
	}
	if !defines(t, b.Path, "sgemm_") {
		t.Errorf("Path %s does not define sgemm_", b.Path)
	}
	if b.Library == "OpenBLAS" {
		core := cmp(b.CorePath, b.Path)
		if !mapped[core] || !defines(t, core, "openblas_set_num_threads") {
			t.Errorf("core %s is not mapped or does not define openblas_set_num_threads", core)
		}
		if b.Parallel != "sequential" && b.Parallel != "pthread" && b.Parallel != "openmp" {
			t.Errorf("Parallel %q, want OpenBLAS's own sequential, pthread or openmp", b.Parallel)
		}
	}
	if hasThreadAPI(b) && b.Threads != 1 {
		t.Errorf("%s's own thread count is %d after HostBLAS, want 1", b.Library, b.Threads)
	}
}

// hasThreadAPI reports whether Grove sets b's threads through its API.
func hasThreadAPI(b servables.BLAS) bool {
	return b.Library == "OpenBLAS" || b.Library == "MKL" || b.Library == "BLIS"
}

// cmp returns the first of its arguments that is not empty.
func cmp(s ...string) string {
	for _, x := range s {
		if x != "" {
			return x
		}
	}
	return ""
}

// TestSetBLASThreadsSetsWhatTheLibraryReports: the library's own thread
// count is what setBLASThreads last asked for.
func TestSetBLASThreadsSetsWhatTheLibraryReports(t *testing.T) {
	b, err := HostBLAS("")
	if err != nil {
		t.Fatal(err)
	}
	if !hasThreadAPI(b) {
		t.Skipf("%s has no thread API Grove knows", b.Library)
	}
	t.Cleanup(func() { setBLASThreads(1) })
	for _, n := range []int{2, 1} {
		if !setBLASThreads(n) {
			t.Fatalf("setBLASThreads(%d) found no thread API in %s", n, b.Library)
		}
		if got := findBLAS().Threads; got != n {
			t.Errorf("after setBLASThreads(%d), %s says %d threads", n, b.Library, got)
		}
	}
}

// TestMatrixProductsKeepIntraOpThreadsWhicheverOpenBLAS: in a process of
// its own on the host's BLAS and on each of Debian's OpenBLAS builds
// (chosen with LD_LIBRARY_PATH, the host's selection untouched), HostBLAS
// says which build is loaded and sets its threads to one, and libtorch's
// matrix products made with IntraOpThreads 1 run on the calling thread
// alone (the other threads of the process used under a tenth of its CPU
// time; a second BLAS thread takes about half the work). With
// IntraOpThreads 2 they use a second thread (the others used over a
// quarter of the caller's CPU time) when OpenBLAS's
// interface takes its count from OpenMP, and stay on the calling thread
// when it reads the process-wide count Grove set to one. CPU shares on a
// busy machine say little of that, so make test runs it alone
// (test-alone).
func TestMatrixProductsKeepIntraOpThreadsWhicheverOpenBLAS(t *testing.T) {
	dirs := []string{""}
	builds, _ := filepath.Glob("/usr/lib/*/openblas-*/libblas.so.3")
	for _, f := range builds {
		dirs = append(dirs, filepath.Dir(f))
	}
	for _, dir := range dirs {
		name := "host"
		if dir != "" {
			name = filepath.Base(dir)
		}
		t.Run(name, func(t *testing.T) {
			r := blasIn(t, dir)
			b := r.BLAS
			t.Logf("%+v %+v", b, r.MM)
			if dir != "" {
				if want := resolved(filepath.Join(dir, "libblas.so.3")); b.Path != want {
					t.Errorf("Path %s, want %s", b.Path, want)
				}
				parallel := strings.TrimPrefix(name, "openblas-")
				if b.Library != "OpenBLAS" || b.Parallel != parallel || b.PerCall != (parallel == "openmp") {
					t.Errorf("HostBLAS() = %+v, want OpenBLAS, parallel %s, per call %v", b, parallel, parallel == "openmp")
				}
			}
			if hasThreadAPI(b) && b.Threads != 1 {
				t.Errorf("%s's own thread count is %d, want 1", b.Library, b.Threads)
			}
			for _, mm := range r.MM {
				single := mm.Others < mm.Caller/10
				switch {
				case mm.IntraOpThreads == 1 && !single:
					t.Errorf("IntraOpThreads 1: the other threads used %v of CPU beside the caller's %v: the BLAS ran threads of its own", ns(mm.Others), ns(mm.Caller))
				case mm.IntraOpThreads == 2 && !b.PerCall && !single:
					t.Errorf("IntraOpThreads 2 on a process-wide count of 1: the other threads used %v beside the caller's %v", ns(mm.Others), ns(mm.Caller))
				case mm.IntraOpThreads == 2 && b.PerCall && runtime.NumCPU() >= 2 && mm.Others < mm.Caller/4:
					t.Errorf("IntraOpThreads 2 on OpenBLAS's OpenMP interface: the other threads used %v beside the caller's %v, want a second thread", ns(mm.Others), ns(mm.Caller))
				}
			}
		})
	}
}

// ns formats nanoseconds.
func ns(n int64) string { return fmt.Sprintf("%.1fms", float64(n)/1e6) }
