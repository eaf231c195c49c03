package servables

import (
	"os"
	"path/filepath"
)

// LibraryPlaces says where a runtime's shared library may be: the
// environment variable that names it, its place in a release relative to
// the directory of the file that loads it, and its place in a repository
// checkout relative to the repository root.
type LibraryPlaces struct {
	// Env names the environment variable that overrides every other place.
	Env string
	// ReleaseRel is the release's place, from the loading file's
	// directory: bin/grove finds lib/ beside bin/ with "../lib/<name>"
	// (and a library in lib/, such as the processor, its own directory).
	ReleaseRel string
	// CacheRel is where the repository's scripts put the library, from
	// the repository root (.cache/…).
	CacheRel string
}

// FindLibrary returns the library a program at self (the path of the
// executable or shared library that loads it; empty when unknown) should
// load, the first of: $Env when it is set; ReleaseRel from self's
// directory (so an unpacked release runs from any directory); CacheRel in
// the working directory and each of its parents, then in self's directory
// and each of its parents (so bin/grove, `go test` in any package and
// `make run` find the repository's .cache). Failing all of them it returns
// the relative path CacheRel itself, which the load error then names.
// Symlinks in self are resolved first, so a link to bin/grove finds the
// release's lib/.
func (p LibraryPlaces) FindLibrary(self string) string {
	wd, _ := os.Getwd()
	return p.Find(os.Getenv(p.Env), wd, self, isRegularFile)
}

// ForExecutable is FindLibrary for the running executable.
func (p LibraryPlaces) ForExecutable() string {
	exe, err := os.Executable()
	if err != nil {
		exe = ""
	}
	return p.FindLibrary(exe)
}

func isRegularFile(p string) bool {
	st, err := os.Stat(p)
	return err == nil && st.Mode().IsRegular()
}

// Find is FindLibrary with its inputs passed in: the environment
// variable's value, the working directory and a test for a file.
func (p LibraryPlaces) Find(env, wd, self string, exists func(string) bool) string {
	if env != "" {
		return env
	}
	var selfDir string
	if self != "" {
		if real, err := filepath.EvalSymlinks(self); err == nil {
			self = real
		}
		selfDir = filepath.Dir(self)
		if f := filepath.Join(selfDir, filepath.FromSlash(p.ReleaseRel)); exists(f) {
			return f
		}
	}
	rel := filepath.FromSlash(p.CacheRel)
	for _, dir := range []string{wd, selfDir} {
		if dir == "" {
			continue
		}
		for {
			if f := filepath.Join(dir, rel); exists(f) {
				return f
			}
			parent := filepath.Dir(dir)
			if parent == dir {
				break
			}
			dir = parent
		}
	}
	return rel
}
