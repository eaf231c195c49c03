package it

import (
	"archive/tar"
	"compress/gzip"
	"context"
	"debug/elf"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"
)

// TestDistReleaseServesFromAnywhere builds the release with `make dist`,
// unpacks it into a temporary directory and serves a TorchScript and an
// ONNX model with it from another working directory, with no
// GROVE_ONNXRUNTIME_LIB or GROVE_TORCH_LIB: the binary must find ONNX
// Runtime and its TorchScript library in the release's lib/ (checked in the
// process's memory map). It also checks `grove version`, the tarball's
// members, and that every shared library the binary and its TorchScript
// library need comes from the runtime packages the container build file
// installs and the README lists.
//
// Budget: 300 s.
func TestDistReleaseServesFromAnywhere(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("builds the release")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	root := repoRoot()
	version := gitDescribe(t, ctx, root)

	out := t.TempDir()
	mk := exec.CommandContext(ctx, "make", "--no-print-directory", "dist", "DISTDIR="+out)
	mk.Dir = root
	mk.Env = withoutEnv(os.Environ(), "MAKEFLAGS", "MAKELEVEL", "MFLAGS")
	if b, err := mk.CombinedOutput(); err != nil {
		t.Fatalf("make dist: %v\n%s", err, b)
	}
	name := fmt.Sprintf("grove-%s-%s-%s", version, runtime.GOOS, runtime.GOARCH)
	tarball := filepath.Join(out, name+".tar.gz")
	if entries, _ := os.ReadDir(out); len(entries) != 1 || entries[0].Name() != name+".tar.gz" {
		t.Fatalf("make dist left %v in DISTDIR, want only %s.tar.gz", entries, name)
	}

	release := t.TempDir()
	members := untar(t, tarball, release)
	want := []string{name + "/bin/grove", name + "/lib/libgrove_torch.so", name + "/lib/libonnxruntime.so.1"}
	if makefileHas(t, root, "processor") {
		want = append(want, name+"/include/processor.h", name+"/lib/libgrove_processor.so")
	}
	slices.Sort(want)
	if !slices.Equal(members, want) {
		t.Fatalf("tarball files %q, want %q", members, want)
	}
	home := filepath.Join(release, name)
	bin := filepath.Join(home, "bin", "grove")

	v, err := exec.CommandContext(ctx, bin, "version").Output()
	if err != nil || strings.TrimSpace(string(v)) != "grove "+version {
		t.Fatalf("grove version = %q (%v), want %q", v, err, "grove "+version)
	}
	checkRuntimePackages(t, root, bin, filepath.Join(home, "lib", "libgrove_torch.so"))
	goFiles := []string{bin}
	if makefileHas(t, root, "processor") {
		goFiles = append(goFiles, filepath.Join(home, "lib", "libgrove_processor.so"))
	}
	for _, f := range goFiles {
		checkSymbolsWithoutDWARF(t, f)
	}

	// Nowhere near the repository: neither the release nor the working
	// directory has a .cache above it.
	wd := t.TempDir()
	for _, d := range []string{home, wd} {
		for dir := d; ; dir = filepath.Dir(dir) {
			if _, err := os.Stat(filepath.Join(dir, ".cache")); err == nil {
				t.Fatalf("%s has a .cache above it (%s): the test would not show that the release finds its own lib/", d, dir)
			}
			if filepath.Dir(dir) == dir {
				break
			}
		}
	}

	exp := loadExpected(t)
	b := newDirBucket(t)
	b.Put(t, "pctr_v1/model.pt", exampleModel(t, "pctr_v1"))
	onnxModel, err := os.ReadFile(filepath.Join(root, "examples", "bucket", "pctr_onnx", "model.onnx"))
	if err != nil {
		t.Fatal(err)
	}
	b.Put(t, "pctr_onnx/model.onnx", onnxModel)
	putConfig(t, b, modelEntry{Path: "pctr_v1/"}, modelEntry{Path: "pctr_onnx/"})
	g := startBinary(t, bin, wd, withoutEnv(os.Environ(), "GROVE_ONNXRUNTIME_LIB", "GROVE_TORCH_LIB"), b.URL())
	g.waitFor("both models", 60*time.Second, func() bool {
		code, body := g.get("/v1/models")
		return code == http.StatusOK && strings.Contains(string(body), "pctr_v1/") && strings.Contains(string(body), "pctr_onnx/")
	})
	code, resp, err := g.infer(batchJSON(requestFor(exp, "pctr_v1", "pctr_v1/"), requestFor(exp, "pctr_v1", "pctr_onnx/")))
	if err != nil || code != http.StatusOK || len(resp.Response) != 2 {
		t.Fatalf("inference: HTTP %d, %v, %+v", code, err, resp)
	}
	checkOutputs(t, exp, "pctr_v1", resp, 0) // TorchScript
	checkOutputs(t, exp, "pctr_v1", resp, 1) // the same model in ONNX

	maps, err := os.ReadFile(fmt.Sprintf("/proc/%d/maps", g.cmd.Process.Pid))
	if err != nil {
		t.Fatal(err)
	}
	for file, grep := range map[string]string{"libonnxruntime.so.1": "onnxruntime", "libgrove_torch.so": "torch"} {
		lib, err := filepath.EvalSymlinks(filepath.Join(home, "lib", file))
		if err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(string(maps), lib) {
			t.Errorf("grove did not map %s; its mappings of %s:\n%s", lib, grep, grepLines(string(maps), grep))
		}
	}
	if makefileHas(t, root, "processor") {
		processorFromRelease(t, ctx, root, home, wd)
	}
}

// processorFromRelease runs the processor library's C test (short: a few
// calls on a TorchScript and an ONNX model) against the release's
// lib/libgrove_processor.so from working directory wd, without
// $GROVE_ONNXRUNTIME_LIB or $GROVE_TORCH_LIB: the library finds ONNX
// Runtime and the TorchScript library beside itself.
func processorFromRelease(t *testing.T, ctx context.Context, root, home, wd string) {
	t.Helper()
	tmp := t.TempDir()
	prog := filepath.Join(tmp, "processor_test")
	cc := exec.CommandContext(ctx, "gcc", "-O2", "-o", prog, filepath.Join(root, "processor", "ctest", "processor_test.c"), "-ldl", "-lpthread", "-lm")
	if b, err := cc.CombinedOutput(); err != nil {
		t.Fatalf("gcc: %v\n%s", err, b)
	}
	data := filepath.Join(root, "processor", "testdata", "deeprec")
	work := filepath.Join(tmp, "work")
	for _, m := range []string{"torch", "onnx"} {
		if err := os.CopyFS(filepath.Join(work, "models", m, "1"), os.DirFS(filepath.Join(data, m, "1"))); err != nil {
			t.Fatal(err)
		}
	}
	run := exec.CommandContext(ctx, prog, filepath.Join(home, "lib", "libgrove_processor.so"), data, filepath.Join(work, "models"), "short")
	run.Dir = wd
	run.Env = append(withoutEnv(os.Environ(), "GROVE_ONNXRUNTIME_LIB", "GROVE_TORCH_LIB", "TMPDIR"), "TMPDIR="+tmp, "GROVE_LOG_LEVEL=warn")
	if b, err := run.CombinedOutput(); err != nil {
		t.Fatalf("the processor C test against the release's library, from %s: %v\n%s", wd, err, b)
	}
}

// gitDescribe is the version the Makefile stamps.
func gitDescribe(t *testing.T, ctx context.Context, root string) string {
	t.Helper()
	cmd := exec.CommandContext(ctx, "git", "describe", "--tags", "--always", "--dirty")
	cmd.Dir = root
	b, err := cmd.Output()
	if err != nil {
		t.Fatalf("git describe: %v", err)
	}
	return strings.TrimSpace(string(b))
}

// withoutEnv is env without the named variables.
func withoutEnv(env []string, names ...string) []string {
	return slices.DeleteFunc(slices.Clone(env), func(kv string) bool {
		k, _, _ := strings.Cut(kv, "=")
		return slices.Contains(names, k)
	})
}

// makefileHas reports whether the Makefile has a rule for target.
func makefileHas(t *testing.T, root, target string) bool {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(root, "Makefile"))
	if err != nil {
		t.Fatal(err)
	}
	return regexp.MustCompile(`(?m)^` + regexp.QuoteMeta(target) + `:`).Match(b)
}

// untar unpacks the gzipped tarball into dir and returns its regular files'
// names, sorted. It refuses anything but directories and regular files, and
// names that leave dir.
func untar(t *testing.T, tarball, dir string) []string {
	t.Helper()
	f, err := os.Open(tarball)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	zr, err := gzip.NewReader(f)
	if err != nil {
		t.Fatalf("%s: %v", tarball, err)
	}
	tr := tar.NewReader(zr)
	var files []string
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatalf("%s: %v", tarball, err)
		}
		if !filepath.IsLocal(h.Name) {
			t.Fatalf("%s: member %q leaves the directory it is unpacked in", tarball, h.Name)
		}
		if h.Uid != 0 || h.Gid != 0 {
			t.Errorf("%s: member %s owned by %d:%d, want 0:0", tarball, h.Name, h.Uid, h.Gid)
		}
		p := filepath.Join(dir, h.Name)
		switch h.Typeflag {
		case tar.TypeDir:
			if err := os.MkdirAll(p, 0o755); err != nil {
				t.Fatal(err)
			}
		case tar.TypeReg:
			w, err := os.OpenFile(p, os.O_CREATE|os.O_WRONLY|os.O_EXCL, h.FileInfo().Mode().Perm())
			if err != nil {
				t.Fatal(err)
			}
			if _, err := io.Copy(w, tr); err != nil {
				t.Fatal(err)
			}
			if err := w.Close(); err != nil {
				t.Fatal(err)
			}
			files = append(files, strings.TrimSuffix(h.Name, "/"))
		default:
			t.Fatalf("%s: member %s has type %q; a release holds directories and files", tarball, h.Name, h.Typeflag)
		}
	}
	slices.Sort(files)
	return files
}

// checkRuntimePackages checks that each shared library the bins need belongs to
// one of the Debian packages the container build file installs in its last
// stage, or to one of their direct dependencies, and that the README names
// each of those packages.
func checkRuntimePackages(t *testing.T, root string, bins ...string) {
	t.Helper()
	df, err := os.ReadFile(filepath.Join(root, "deploy", "container", "Dockerfile"))
	if err != nil {
		t.Fatal(err)
	}
	stages := regexp.MustCompile(`(?m)^FROM `).Split(string(df), -1)
	last := strings.ReplaceAll(stages[len(stages)-1], "\\\n", " ")
	m := regexp.MustCompile(`apt-get install ([^&\n]*)`).FindStringSubmatch(last)
	if m == nil {
		t.Fatal("the Dockerfile's last stage has no apt-get install")
	}
	var pkgs []string
	for _, w := range strings.Fields(m[1]) {
		if !strings.HasPrefix(w, "-") {
			pkgs = append(pkgs, w)
		}
	}
	readme, err := os.ReadFile(filepath.Join(root, "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	provided := map[string]bool{}
	for _, p := range pkgs {
		if !strings.Contains(string(readme), "`"+p+"`") {
			t.Errorf("the README does not list %s, which the container installs", p)
		}
		provided[p] = true
		// A package not installed here adds no dependencies: a library the
		// binary needs from one would then fail the check below.
		deps, _ := exec.Command("dpkg-query", "-W", "-f", "${Depends}", p).Output()
		for _, alt := range strings.Split(string(deps), ",") {
			for _, d := range strings.Split(alt, "|") {
				name, _, _ := strings.Cut(strings.TrimSpace(d), " ")
				name, _, _ = strings.Cut(name, ":")
				provided[name] = true
			}
		}
	}
	for _, bin := range bins {
		f, err := elf.Open(bin)
		if err != nil {
			t.Fatal(err)
		}
		needed, err := f.ImportedLibraries()
		f.Close()
		if err != nil {
			t.Fatal(err)
		}
		for _, lib := range needed {
			owner := libraryPackage(t, lib)
			if !provided[owner] {
				t.Errorf("%s needs %s from Debian's %s, which neither the container's packages %q nor their dependencies are", bin, lib, owner, pkgs)
			}
		}
	}
}

// checkSymbolsWithoutDWARF fails the test unless the ELF file at path
// keeps its symbol table (perf and nm name Go's functions from it) and
// carries no DWARF, which only a debugger reads and which makes the
// release a fifth larger.
func checkSymbolsWithoutDWARF(t *testing.T, path string) {
	t.Helper()
	f, err := elf.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if f.Section(".symtab") == nil {
		t.Errorf("%s has no symbol table", path)
	}
	for _, s := range f.Sections {
		if strings.HasPrefix(s.Name, ".debug_") || strings.HasPrefix(s.Name, ".zdebug_") {
			t.Errorf("%s carries DWARF (section %s): make dist links with -ldflags -w", path, s.Name)
			break
		}
	}
}

// ldconfigArch is how `ldconfig -p` names each architecture's libraries.
var ldconfigArch = map[string]string{"amd64": "x86-64", "arm64": "AArch64"}

// libraryPackage is the Debian package that installs the shared library
// the dynamic linker finds for soname.
func libraryPackage(t *testing.T, soname string) string {
	t.Helper()
	out, err := exec.Command("/sbin/ldconfig", "-p").Output()
	if err != nil {
		t.Fatalf("ldconfig -p: %v", err)
	}
	for _, l := range strings.Split(string(out), "\n") {
		l = strings.TrimSpace(l)
		if !strings.HasPrefix(l, soname+" ") || !strings.Contains(l, ldconfigArch[runtime.GOARCH]) {
			continue
		}
		_, path, _ := strings.Cut(l, "=> ")
		real, err := filepath.EvalSymlinks(path)
		if err != nil {
			t.Fatal(err)
		}
		// usrmerge: dpkg may know the file under /lib or /usr/lib.
		for _, p := range []string{path, real, strings.TrimPrefix(path, "/usr"), "/usr" + path, strings.TrimPrefix(real, "/usr"), "/usr" + real} {
			if b, err := exec.Command("dpkg", "-S", p).Output(); err == nil {
				pkg, _, _ := strings.Cut(string(b), ":")
				return pkg
			}
		}
		t.Fatalf("no Debian package installs %s (%s)", soname, real)
	}
	t.Fatalf("the dynamic linker does not know %s", soname)
	return ""
}

func grepLines(s, sub string) string {
	var out []string
	for _, l := range strings.Split(s, "\n") {
		if strings.Contains(l, sub) {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n")
}
