package lowprio

import (
	"fmt"
	"runtime"

	"golang.org/x/sys/unix"
)

func lockThread() { runtime.LockOSThread() }

// lower raises the calling thread's nice value to nice, unless it is
// already that high.
func lower(nice int) error {
	tid := unix.Gettid()
	// The raw getpriority system call returns 20 - nice.
	raw, err := unix.Getpriority(unix.PRIO_PROCESS, tid)
	if err != nil {
		return fmt.Errorf("lowprio: reading thread %d's nice value: %w", tid, err)
	}
	if 20-raw >= nice {
		return nil
	}
	if err := unix.Setpriority(unix.PRIO_PROCESS, tid, nice); err != nil {
		return fmt.Errorf("lowprio: setting thread %d's nice value to %d: %w", tid, nice, err)
	}
	return nil
}
