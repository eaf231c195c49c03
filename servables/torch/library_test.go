package torch

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
)

// openChildEnv makes the test binary a child that opens the library named
// by the variable (a library of the wrong version when it ends in
// "@other") with nothing opened before, prints the error, and exits.
const openChildEnv = "GROVE_TORCH_TEST_OPEN"

// openChild is the child process of openIn.
func openChild(p string) int {
	var err error
	if lib, ok := strings.CutSuffix(p, "@other"); ok {
		err = openLibrary(lib, "0123456789abcdef")
	} else {
		err = initTorch(p)
	}
	fmt.Print(err)
	return 0
}

// openIn runs openChild for p in a fresh process and returns what it printed.
func openIn(t *testing.T, p string) string {
	t.Helper()
	return inChild(t, openChildEnv, p)
}

// inChild runs the test binary again with env set to arg (TestMain hands
// it to that variable's child) and returns what the child printed; a
// child that fails or dies (a crash in libtorch) fails the test.
func inChild(t *testing.T, env, arg string) string {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run", "^$")
	cmd.Env = append(os.Environ(), env+"="+arg)
	out, err := cmd.Output()
	if err != nil {
		var stderr []byte
		if ee, ok := err.(*exec.ExitError); ok {
			stderr = ee.Stderr
		}
		first, _, _ := strings.Cut(string(stderr), "\n")
		t.Fatalf("the child for %s=%s died: %v: %s", env, filepath.Base(arg), err, first)
	}
	return string(out)
}

// The library found from the repository is the one scripts/torchshim.sh
// builds for these sources: the script and LibraryVersion hash the same
// bytes.
func TestTheScriptBuildsTheLibraryGroveLooksFor(t *testing.T) {
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command(filepath.Join(root, "scripts", "torchshim.sh")).Output()
	if err != nil {
		t.Fatalf("scripts/torchshim.sh: %v", err)
	}
	built := strings.TrimSpace(string(out))
	want := filepath.Join(".cache", "torchshim", LibraryVersion(), "libgrove_torch.so")
	if !strings.HasSuffix(built, want) {
		t.Fatalf("the script built %s, Grove looks for …/%s", built, want)
	}
	if got, opened := DefaultLibraryPath(), Library(); got != opened {
		t.Errorf("DefaultLibraryPath() = %s, but the tests opened %s", got, opened)
	}
}

// A missing library, a library that is not Grove's and a library of other
// sources are each refused with an error that names the file, says what is
// wrong and how to get the right one; nothing is opened.
func TestOpeningAWrongLibraryFailsClearly(t *testing.T) {
	libc := "/lib/x86_64-linux-gnu/libc.so.6"
	if runtime.GOARCH == "arm64" {
		libc = "/lib/aarch64-linux-gnu/libc.so.6"
	}
	for _, c := range []struct {
		name, path string
		want       []string
	}{
		{"missing", "/nonexistent/libgrove_torch.so", []string{"/nonexistent/libgrove_torch.so", "cannot open shared object file"}},
		{"not Grove's", libc, []string{libc, "has no function grove_shim_version: it is not a Grove TorchScript library"}},
		{"other sources", Library() + "@other", []string{Library(), "was built from other sources (version " + LibraryVersion() + ")"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			got := openIn(t, c.path)
			for _, w := range append(c.want, ErrLibrary.Error(), "make deps", LibraryEnv, LibraryVersion()) {
				if !strings.Contains(got, w) {
					t.Errorf("error %q does not say %q", got, w)
				}
			}
		})
	}
}
