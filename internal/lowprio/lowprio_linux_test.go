package lowprio

import (
	"os"
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

// seen is the thread a goroutine ran on and its nice value.
type seen struct{ tid, nice int }

// startLocked starts n goroutines, each locked to the thread it runs on
// and holding it until release is closed, so that Go has to start a
// thread for each, and returns the thread each ran on.
func startLocked(t *testing.T, n int, release <-chan struct{}) []seen {
	got := make(chan seen, n)
	for range n {
		go func() {
			runtime.LockOSThread()
			defer runtime.UnlockOSThread()
			tid := unix.Gettid()
			got <- seen{tid, threadNice(t, tid)}
			<-release
		}()
	}
	out := make([]seen, n)
	for i := range out {
		out[i] = <-got
	}
	return out
}

func TestGoroutinesStartedByTheWorkAndLaterOnesRunAtNormalPriority(t *testing.T) {
	base := threadNice(t, unix.Gettid())
	if base >= Nice {
		t.Skipf("the test runs at nice %d already", base)
	}
	const n = 8
	release := make(chan struct{})
	defer close(release)
	var lowered int
	if err := Run(Nice, func() {
		lowered = unix.Gettid()
		for _, s := range startLocked(t, n, release) {
			if s.tid == lowered || s.nice != base {
				t.Errorf("a goroutine started by the work ran on thread %d at nice %d (the work's thread: %d; want nice %d)", s.tid, s.nice, lowered, base)
			}
		}
	}); err != nil {
		t.Fatal(err)
	}
	// The lowered thread ends with its goroutine: no later goroutine runs
	// on it.
	for _, s := range startLocked(t, n, release) {
		if s.tid == lowered || s.nice != base {
			t.Errorf("a goroutine started after the work ran on thread %d at nice %d (the work's thread: %d; want nice %d)", s.tid, s.nice, lowered, base)
		}
	}
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

// init locks the test binary's main goroutine to the main thread, so that
// TestMain runs there and can check runLowered on it.
func init() { runtime.LockOSThread() }

// onMain is what runLowered did when called on the main thread
// (TestMain): the thread f ran on and its nice value, and the main
// thread's nice value before and after.
var onMain struct {
	ran, before, after seen
	err                error
}

func TestMain(m *testing.M) {
	pid := unix.Getpid()
	if unix.Gettid() == pid {
		onMain.before.tid = pid
		onMain.before.nice, onMain.err = ThreadNice(pid)
		done := make(chan result, 1)
		runLowered(Nice, func() {
			onMain.ran.tid = unix.Gettid()
			onMain.ran.nice, _ = ThreadNice(onMain.ran.tid)
		}, done)
		<-done
		onMain.after.tid = pid
		onMain.after.nice, _ = ThreadNice(pid)
	}
	os.Exit(m.Run())
}

func TestRunNeverLowersTheMainThread(t *testing.T) {
	if onMain.before.tid == 0 {
		t.Skip("TestMain did not run on the main thread")
	}
	if onMain.err != nil {
		t.Fatal(onMain.err)
	}
	if onMain.before.nice >= Nice {
		t.Skipf("the test runs at nice %d already", onMain.before.nice)
	}
	if onMain.ran.tid == onMain.before.tid || onMain.ran.nice != Nice {
		t.Errorf("work started on the main thread %d ran on thread %d at nice %d, want another thread at nice %d", onMain.before.tid, onMain.ran.tid, onMain.ran.nice, Nice)
	}
	if onMain.after.nice != onMain.before.nice {
		t.Errorf("the main thread is at nice %d after the work, want %d", onMain.after.nice, onMain.before.nice)
	}
}
