// Package scripts holds the tests of the set-up scripts beside it, run
// against stand-ins for the system's tools in a temporary directory.
package scripts

import (
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"testing"
)

// fakeApt writes stand-ins for dpkg-query, apt-get, id and
// update-alternatives into a new directory and returns it with the state
// directory they share: a package is installed when state/installed/<name>
// exists. apt-get takes its lock as the real one does, failing at once
// when another apt-get holds it, and logs each package it installs to
// state/log.
func fakeApt(t *testing.T) (bin, state string) {
	t.Helper()
	dir := t.TempDir()
	bin, state = filepath.Join(dir, "bin"), filepath.Join(dir, "state")
	for _, d := range []string{bin, filepath.Join(state, "installed")} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	stubs := map[string]string{
		"dpkg-query":          `p="${!#}"; [ -e "$STATE/installed/$p" ] || exit 1; printf 'install ok installed'`,
		"id":                  `echo 0`,
		"update-alternatives": `exit 0`,
		"apt-get": `mkdir "$STATE/lock" 2>/dev/null || { echo "E: Could not get lock /var/lib/dpkg/lock-frontend" >&2; exit 100; }
trap 'rmdir "$STATE/lock"' EXIT
sleep 0.3
[ "$1" = install ] || exit 0
for a in "$@"; do
  case "$a" in install|-*) ;; *) touch "$STATE/installed/$a"; echo "$a" >>"$STATE/log" ;; esac
done`,
	}
	for name, body := range stubs {
		if err := os.WriteFile(filepath.Join(bin, name), []byte("#!/bin/bash\n"+body+"\n"), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	return bin, state
}

func runDeps(bin, state string, pkgs ...string) (string, error) {
	cmd := exec.Command("./deps.sh", pkgs...)
	cmd.Env = append(os.Environ(), "PATH="+bin+":"+os.Getenv("PATH"), "STATE="+state)
	out, err := cmd.CombinedOutput()
	return string(out), err
}

// TestDepsInstallsOneAtATime runs deps.sh three times at once, as `make -j
// test` (deps beside ui-deps) and `make -j bench` (deps beside deps-bench)
// do: each succeeds, each package is installed once, and a second round
// with everything present installs nothing.
func TestDepsInstallsOneAtATime(t *testing.T) {
	bin, state := fakeApt(t)
	sets := [][]string{{"libtorch-dev", "kcat", "npm"}, {"nodejs", "npm"}, {"python3-xgboost", "kcat"}}
	for round := 0; round < 2; round++ {
		var wg sync.WaitGroup
		for _, pkgs := range sets {
			wg.Add(1)
			go func() {
				defer wg.Done()
				if out, err := runDeps(bin, state, pkgs...); err != nil {
					t.Errorf("round %d: deps.sh %s: %v\n%s", round+1, strings.Join(pkgs, " "), err, out)
				} else if round == 1 && out != "" {
					t.Errorf("round 2: deps.sh %s with everything installed said %q", strings.Join(pkgs, " "), out)
				}
			}()
		}
		wg.Wait()
	}
	log, err := os.ReadFile(filepath.Join(state, "log"))
	if err != nil {
		t.Fatal(err)
	}
	got := strings.Fields(string(log))
	sort.Strings(got)
	want := []string{"kcat", "libtorch-dev", "nodejs", "npm", "python3-xgboost"}
	if strings.Join(got, " ") != strings.Join(want, " ") {
		t.Errorf("installed %v, want each of %v once", got, want)
	}
}
