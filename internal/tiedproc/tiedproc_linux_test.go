package tiedproc

import (
	"errors"
	"os/exec"
	"runtime"
	"syscall"
	"testing"
)

// A child started with Start outlives the end of the OS thread its caller
// ran on, where a child started plainly with a death signal from that
// thread is killed.
func TestChildOutlivesTheCallersThread(t *testing.T) {
	control := exec.Command("sleep", "60")
	control.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	tied := exec.Command("sleep", "60")
	var waited <-chan error
	errs := make(chan error, 1)
	go func() {
		// Locked and never unlocked: the thread ends with this goroutine.
		runtime.LockOSThread()
		if err := control.Start(); err != nil {
			errs <- err
			return
		}
		var err error
		waited, err = Start(tied)
		errs <- err
	}()
	if err := <-errs; err != nil {
		t.Fatal(err)
	}
	defer func() {
		_ = tied.Process.Kill()
		<-waited
	}()
	// The control child is killed when the thread that forked it ends.
	err := control.Wait()
	var exit *exec.ExitError
	if !errors.As(err, &exit) || exit.Sys().(syscall.WaitStatus).Signal() != syscall.SIGKILL {
		t.Fatalf("the control child ended with %v, want killed by its death signal", err)
	}
	select {
	case err := <-waited:
		t.Fatalf("the tied child ended with its caller's thread: %v", err)
	default:
	}
	if err := tied.Process.Signal(syscall.Signal(0)); err != nil {
		t.Fatalf("the tied child is gone: %v", err)
	}
}

// Start returns the error of a command that cannot start.
func TestStartFails(t *testing.T) {
	if _, err := Start(exec.Command("/nonexistent/grove-test-binary")); err == nil {
		t.Fatal("Start of a missing binary succeeded")
	}
}

// The tests' main goroutine keeps Go's main thread, which Go parks instead
// of ending when a locked goroutine exits on it: the goroutines the tests
// lock then run on threads that end.
func init() { runtime.LockOSThread() }
