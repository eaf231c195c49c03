package bucket

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// Checksums from the B&A test suites (see the research notes, §2.4).
const (
	sumFile1    = "4f2d6937ca0d91126b175de2d90138a1c8825a3eb13c2d999317fd1a5f320653" // file1.txt = content1
	sumContent3 = "4f23a79b280289568bde060cd83efa0088ac765ae65350a43053bab82de9eb40" // content1..3
	sumModel1   = "59390c4fa97b2cbfe5bd300e254e6eddb7b4b45c2dbc0c1cfc6e93793a143d04" // model1 = bytes1
)

func TestChecksumVectors(t *testing.T) {
	for _, tc := range []struct {
		files map[string][]byte
		want  string
	}{
		{map[string][]byte{"file1.txt": []byte("content1")}, sumFile1},
		{map[string][]byte{"c": []byte("content3"), "a": []byte("content1"), "b": []byte("content2")}, sumContent3},
		{map[string][]byte{"model1": []byte("bytes1")}, sumModel1},
	} {
		got, err := Checksum(tc.files)
		if err != nil || got != tc.want {
			t.Errorf("Checksum(%q) = %s, %v; want %s", tc.files, got, err, tc.want)
		}
	}
	if _, err := Checksum(nil); err == nil {
		t.Error("Checksum of no files succeeded")
	}
}

func TestChecksumPathMatchesTheShellPipeline(t *testing.T) {
	for _, tool := range []string{"bash", "find", "sha256sum", "sort", "awk", "tr"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skipf("%s not found", tool)
		}
	}
	dir := t.TempDir()
	// "a.txt" sorts before "a/b" by full path ('.' < '/') although a
	// directory walk visits "a/" first; "with space" checks field splitting.
	files := map[string]string{
		"a.txt": "1", "a/b": "2", "a/c/d": "3", "B": "4", "with space/e f": "5", "z-empty": "",
		"variables/variables.data-00000-of-00001": "6", "variables/variables.index": "7", "saved_model.pb": "8",
	}
	objects := map[string][]byte{}
	for name, content := range files {
		mustWrite(t, filepath.Join(dir, filepath.FromSlash(name)), content)
		objects[name] = []byte(content)
	}
	if err := os.Symlink("a.txt", filepath.Join(dir, "link-not-followed")); err != nil {
		t.Fatal(err)
	}

	shell := func(path string) string {
		t.Helper()
		cmd := exec.Command("bash", "-c", `find "$1" -type f -exec sha256sum {} \; | sort -k 2 | awk '{print $1}' | tr -d '\n' | sha256sum | awk '{print $1}'`, "bash", path)
		cmd.Env = append(os.Environ(), "LC_ALL=C")
		out, err := cmd.Output()
		if err != nil {
			t.Fatal(err)
		}
		return strings.TrimSpace(string(out))
	}
	for _, p := range []string{dir, filepath.Join(dir, "a"), filepath.Join(dir, "a.txt"), filepath.Join(dir, "with space")} {
		got, err := ChecksumPath(p)
		if err != nil {
			t.Fatal(err)
		}
		if want := shell(p); got != want {
			t.Errorf("ChecksumPath(%s) = %s, shell pipeline %s", p, got, want)
		}
	}

	// The checksum of a fetched model is the checksum of its files on disk.
	m, err := Fetch(t.Context(), NewMemory("mem", objects), "a/", t.TempDir(), 0)
	if err != nil {
		t.Fatal(err)
	}
	if want := shell(filepath.Join(dir, "a")); m.Checksum != want {
		t.Errorf("Fetch checksum %s, shell pipeline on the same files %s", m.Checksum, want)
	}
}

func TestChecksumPathOfEmptyDirectoryFails(t *testing.T) {
	if _, err := ChecksumPath(t.TempDir()); err == nil {
		t.Error("got a checksum for an empty directory")
	}
}

func mustWrite(t *testing.T, p, content string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}

func TestChecksumPathLeavesOutTheRootChecksumFile(t *testing.T) {
	dir := t.TempDir()
	mustWrite(t, filepath.Join(dir, "model.pt"), "weights")
	mustWrite(t, filepath.Join(dir, "sub", ChecksumFile), "part of the model")
	want, err := ChecksumPath(dir)
	if err != nil {
		t.Fatal(err)
	}
	mustWrite(t, filepath.Join(dir, ChecksumFile), want+"\n")
	if got, err := ChecksumPath(dir); err != nil || got != want {
		t.Errorf("with CHECKSUM: %s (%v), want %s as without it", got, err, want)
	}
	// A file given by name is checksummed whatever it is called.
	if got, _ := ChecksumPath(filepath.Join(dir, ChecksumFile)); got == want {
		t.Error("CHECKSUM given by name was left out")
	}
}
