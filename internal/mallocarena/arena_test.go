//go:build linux && cgo

package mallocarena

import (
	"os"
	"testing"
)

// A program importing the package has at most two malloc arenas, however
// many threads contend for malloc (glibc would give 32 threads up to
// eight arenas per core), unless its environment set the limit.
func TestTheProcessKeepsTwoArenasUnderContention(t *testing.T) {
	if _, ok := os.LookupEnv("MALLOC_ARENA_MAX"); ok {
		t.Skip("MALLOC_ARENA_MAX is set in the environment: it decides")
	}
	if got := Setting(); got != "2" {
		t.Fatalf("Setting() = %q, want 2", got)
	}
	contend(32)
	if n := arenas(); n < 1 || n > 2 {
		t.Errorf("%d arenas after 32 threads contended for malloc, want 1 or 2", n)
	}
}
