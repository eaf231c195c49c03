//go:build !linux

package lowprio

import "time"

func lockThread() {}

func unlockThread() {}

func onMainThread() bool { return false }

// Lower returns ErrUnsupported: thread priorities are Linux's here.
func Lower(int) error { return ErrUnsupported }

// ThreadCPU returns 0: threads' CPU clocks are read on Linux only here.
func ThreadCPU() time.Duration { return 0 }

// ThreadNice returns ErrUnsupported: thread priorities are Linux's here.
func ThreadNice(int) (int, error) { return 0, ErrUnsupported }

// ThreadsAtLeast returns ErrUnsupported: thread priorities are Linux's here.
func ThreadsAtLeast(int, ...int) ([]int, error) { return nil, ErrUnsupported }
