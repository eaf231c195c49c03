package lowprio

import (
	"fmt"
	"os"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"time"

	"golang.org/x/sys/unix"
)

func lockThread() { runtime.LockOSThread() }

func unlockThread() { runtime.UnlockOSThread() }

// onMainThread reports whether the calling thread is the process's main
// thread (whose thread id is the process id).
func onMainThread() bool { return unix.Gettid() == unix.Getpid() }

// Lower raises the calling thread's nice value to nice, unless it is
// already that high (a thread cannot lower its nice value without
// privileges). The caller keeps the goroutine locked to its thread.
func Lower(nice int) error {
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

// ThreadCPU returns the CPU time the calling OS thread has used
// (CLOCK_THREAD_CPUTIME_ID), 0 if it cannot be read. Only a goroutine
// locked to its thread, as Run's function is, measures its own work
// with it.
func ThreadCPU() time.Duration {
	var ts unix.Timespec
	if err := unix.ClockGettime(unix.CLOCK_THREAD_CPUTIME_ID, &ts); err != nil {
		return 0
	}
	return time.Duration(ts.Nano())
}

// ThreadNice returns thread tid of this process's nice value, read from
// /proc/self/task/TID/stat (its 19th field).
func ThreadNice(tid int) (int, error) {
	b, err := os.ReadFile("/proc/self/task/" + strconv.Itoa(tid) + "/stat")
	if err != nil {
		return 0, fmt.Errorf("lowprio: thread %d: %w", tid, err)
	}
	s := string(b)
	// The fields after "pid (comm) " start at the 3rd; the name may hold
	// spaces and parentheses, so it ends at the last ')'.
	i := strings.LastIndexByte(s, ')')
	if i < 0 || i+2 > len(s) {
		return 0, fmt.Errorf("lowprio: thread %d: malformed stat %q", tid, s)
	}
	f := strings.Fields(s[i+2:])
	if len(f) < 17 {
		return 0, fmt.Errorf("lowprio: thread %d: stat has %d fields after its name, want 17 or more", tid, len(f))
	}
	n, err := strconv.Atoi(f[16])
	if err != nil {
		return 0, fmt.Errorf("lowprio: thread %d: nice value: %w", tid, err)
	}
	return n, nil
}

// ThreadsAtLeast lists the threads of this process whose nice value is
// nice or more, but those in except (a thread that ends while they are
// read is left out).
func ThreadsAtLeast(nice int, except ...int) ([]int, error) {
	entries, err := os.ReadDir("/proc/self/task")
	if err != nil {
		return nil, fmt.Errorf("lowprio: listing threads: %w", err)
	}
	var out []int
	for _, e := range entries {
		tid, err := strconv.Atoi(e.Name())
		if err != nil || slices.Contains(except, tid) {
			continue
		}
		if n, err := ThreadNice(tid); err == nil && n >= nice {
			out = append(out, tid)
		}
	}
	return out, nil
}
