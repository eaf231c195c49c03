package lowprio

import (
	"runtime"
	"slices"
	"testing"

	"golang.org/x/sys/unix"
)

// threadNice is ThreadNice(tid), failing t on an error.
func threadNice(t *testing.T, tid int) int {
	t.Helper()
	n, err := ThreadNice(tid)
	if err != nil {
		t.Fatal(err)
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

func TestThreadsAtLeastListsTheLoweredThreadWhileItRuns(t *testing.T) {
	var tid int
	var during []int
	var err error
	if rerr := Run(Nice, func() {
		tid = unix.Gettid()
		during, err = ThreadsAtLeast(Nice)
	}); rerr != nil {
		t.Skip(rerr)
	}
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Contains(during, tid) {
		t.Errorf("ThreadsAtLeast(%d) = %v while thread %d ran lowered", Nice, during, tid)
	}
	if _, err := ThreadNice(-1); err == nil {
		t.Error("ThreadNice(-1): no error")
	}
}
