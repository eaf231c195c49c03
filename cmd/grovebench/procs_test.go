package main

import (
	"os/exec"
	"strings"
	"testing"
)

// The wrapper script execs the wrapper command with grove's path and the
// script's own arguments, each passed as one argument whatever it holds.
func TestGroveWrapperExecsTheWrapperWithGroveAndItsArguments(t *testing.T) {
	path, err := writeGroveWrapper(t.TempDir(), []string{"env", "GROVE_WRAPPED=it's"}, "/bin/sh")
	if err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command(path, "-c", `printf '%s|%s|%s' "$GROVE_WRAPPED" "$0" "$1"`, "a b", "c").CombinedOutput()
	if err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	if got, want := strings.TrimSpace(string(out)), "it's|a b|c"; got != want {
		t.Errorf("the wrapped command printed %q, want %q", got, want)
	}
}
