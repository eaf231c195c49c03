package onnx

import (
	"os"
	"path/filepath"
	"testing"
)

func TestFindLibraryOrder(t *testing.T) {
	cache := filepath.FromSlash(DefaultLibraryRel)
	for _, c := range []struct {
		name          string
		env, wd, self string
		files         []string
		want          string
	}{
		{name: "the environment variable wins", env: "/x/ort.so", wd: "/repo", self: "/opt/grove/bin/grove",
			files: []string{"/opt/grove/lib/libonnxruntime.so.1", "/repo/" + DefaultLibraryRel}, want: "/x/ort.so"},
		{name: "a release's lib/ before the working directory's .cache", wd: "/repo", self: "/opt/grove/bin/grove",
			files: []string{"/opt/grove/lib/libonnxruntime.so.1", "/repo/" + DefaultLibraryRel}, want: "/opt/grove/lib/libonnxruntime.so.1"},
		{name: "a library in lib/ finds its own directory", wd: "/tmp", self: "/opt/grove/lib/libgrove_processor.so",
			files: []string{"/opt/grove/lib/libonnxruntime.so.1"}, want: "/opt/grove/lib/libonnxruntime.so.1"},
		{name: ".cache in a parent of the working directory", wd: "/repo/api/oip", self: "/tmp/go-build1/oip.test",
			files: []string{"/repo/" + DefaultLibraryRel}, want: "/repo/" + DefaultLibraryRel},
		{name: ".cache from the executable upwards", wd: "/", self: "/repo/bin/grove",
			files: []string{"/repo/" + DefaultLibraryRel}, want: "/repo/" + DefaultLibraryRel},
		{name: "the working directory's .cache before the executable's", wd: "/a", self: "/b/bin/grove",
			files: []string{"/a/" + DefaultLibraryRel, "/b/" + DefaultLibraryRel}, want: "/a/" + DefaultLibraryRel},
		{name: "no executable path", wd: "/a",
			files: []string{"/a/" + DefaultLibraryRel}, want: "/a/" + DefaultLibraryRel},
		{name: "nothing anywhere: the relative path", wd: "/a", self: "/b/bin/grove", want: cache},
	} {
		t.Run(c.name, func(t *testing.T) {
			have := map[string]bool{}
			for _, f := range c.files {
				have[filepath.FromSlash(f)] = true
			}
			got := findLibrary(c.env, filepath.FromSlash(c.wd), filepath.FromSlash(c.self), func(p string) bool { return have[p] })
			if got != filepath.FromSlash(c.want) {
				t.Errorf("findLibrary = %q, want %q", got, c.want)
			}
		})
	}
}

// TestFindLibraryFollowsSymlinks: a link to a release's bin/grove (say in
// /usr/local/bin) still finds the release's lib/.
func TestFindLibraryFollowsSymlinks(t *testing.T) {
	release := t.TempDir()
	for _, d := range []string{"bin", "lib"} {
		if err := os.Mkdir(filepath.Join(release, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	exe := filepath.Join(release, "bin", "grove")
	lib := filepath.Join(release, "lib", "libonnxruntime.so.1")
	for _, f := range []string{exe, lib} {
		if err := os.WriteFile(f, nil, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	link := filepath.Join(t.TempDir(), "grove")
	if err := os.Symlink(exe, link); err != nil {
		t.Fatal(err)
	}
	t.Setenv(LibraryEnv, "")
	got := FindLibrary(link)
	if real, _ := filepath.EvalSymlinks(lib); got != real {
		t.Errorf("FindLibrary(%s) = %q, want %q", link, got, real)
	}
}
