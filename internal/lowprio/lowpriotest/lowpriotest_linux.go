// Package lowpriotest helps the tests of runtimes check which threads a
// load at lowprio.Nice leaves behind (Linux).
package lowpriotest

import (
	"testing"

	"golang.org/x/sys/unix"

	"github.com/groveml/grove/internal/lowprio"
)

// Niced lists the process's threads at lowprio.Nice or more, but except
// (-1: none left out). It skips the test where threads' nice values
// cannot be read.
func Niced(t testing.TB, except int) []int {
	t.Helper()
	tids, err := lowprio.ThreadsAtLeast(lowprio.Nice, except)
	if err != nil {
		t.Skip(err)
	}
	return tids
}

// Run runs f as Grove runs a load, with lowprio.Run at lowprio.Nice, and
// returns the id of the lowered thread f ran on. It skips the test where
// the priority cannot be set.
func Run(t testing.TB, f func()) (tid int) {
	t.Helper()
	if err := lowprio.Run(lowprio.Nice, func() {
		tid = unix.Gettid()
		f()
	}); err != nil {
		t.Skip(err)
	}
	return tid
}
