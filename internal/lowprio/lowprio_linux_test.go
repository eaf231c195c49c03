package lowprio

import (
	"os"
	"runtime"
	"strconv"
	"strings"
	"testing"

	"golang.org/x/sys/unix"
)

// threadNice reads thread tid's nice value from /proc (field 19 of its stat).
func threadNice(t *testing.T, tid int) int {
	t.Helper()
	b, err := os.ReadFile("/proc/self/task/" + strconv.Itoa(tid) + "/stat")
	if err != nil {
		t.Fatal(err)
	}
	s := string(b)
	fields := strings.Fields(s[strings.LastIndexByte(s, ')')+2:]) // after "pid (comm) "
	n, err := strconv.Atoi(fields[16])                            // field 19 counted from 1
	if err != nil {
		t.Fatalf("stat %q: %v", s, err)
	}
	return n
}

func TestRunRunsOnAThreadAtTheNiceValueAndTheCallerKeepsItsOwn(t *testing.T) {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	caller := unix.Gettid()
	base := threadNice(t, caller)
	if base >= Nice {
		t.Skipf("the test runs at nice %d already", base)
	}
	var tid, nice int
	if err := Run(Nice, func() {
		tid = unix.Gettid()
		nice = threadNice(t, tid)
	}); err != nil {
		t.Fatal(err)
	}
	if tid == caller {
		t.Fatalf("f ran on the caller's thread %d", tid)
	}
	if nice != Nice {
		t.Errorf("f ran at nice %d, want %d", nice, Nice)
	}
	if got := threadNice(t, caller); got != base {
		t.Errorf("the caller's thread is at nice %d after Run, want %d", got, base)
	}
}

func TestGoroutinesStartedByTheWorkAndLaterOnesRunAtNormalPriority(t *testing.T) {
	base := threadNice(t, unix.Gettid())
	if base >= Nice {
		t.Skipf("the test runs at nice %d already", base)
	}
	// Goroutines started from the lowered thread, each locked to the
	// thread it runs on and holding it while others start, so that Go
	// has to start threads while the lowered one runs.
	const n = 8
	type seen struct{ tid, nice int }
	got := make(chan seen, n)
	release := make(chan struct{})
	var lowered int
	if err := Run(Nice, func() {
		lowered = unix.Gettid()
		for range n {
			go func() {
				runtime.LockOSThread()
				defer runtime.UnlockOSThread()
				tid := unix.Gettid()
				got <- seen{tid, threadNice(t, tid)}
				<-release
			}()
		}
		for range n {
			s := <-got
			if s.tid == lowered || s.nice != base {
				t.Errorf("a goroutine started by the work ran on thread %d at nice %d (the work's thread: %d; want nice %d)", s.tid, s.nice, lowered, base)
			}
		}
	}); err != nil {
		t.Fatal(err)
	}
	close(release)
	// The lowered thread ends with its goroutine (or, if it was Go's main
	// thread, is parked for good): no later goroutine runs on it.
	done := make(chan struct{})
	for range n {
		go func() {
			runtime.LockOSThread()
			defer runtime.UnlockOSThread()
			tid := unix.Gettid()
			got <- seen{tid, threadNice(t, tid)}
			<-done
		}()
	}
	for range n {
		if s := <-got; s.tid == lowered || s.nice != base {
			t.Errorf("a goroutine started after the work ran on thread %d at nice %d (the work's thread: %d; want nice %d)", s.tid, s.nice, lowered, base)
		}
	}
	close(done)
}

func TestRunRaisesFsPanicInTheCaller(t *testing.T) {
	defer func() {
		if r := recover(); r != "boom" {
			t.Errorf("recovered %v, want boom", r)
		}
	}()
	_ = Run(Nice, func() { panic("boom") })
	t.Error("Run returned after f panicked")
}
