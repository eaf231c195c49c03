package onnx

import (
	"context"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/groveml/grove/internal/lowprio"
	"github.com/groveml/grove/servables"
)

// nicedThreads lists the threads of the process at lowprio.Nice or
// more, but except.
func nicedThreads(t *testing.T, except int) []int {
	t.Helper()
	tids, err := lowprio.ThreadsAtLeast(lowprio.Nice, except)
	if err != nil {
		t.Skip(err)
	}
	return tids
}

// StartsThreads is what Grove goes by to load a model at a lowered
// priority: a load with intra-op threads above 1 leaves threads at that
// priority (the session's pool, which serves the model's calls), one
// with a single thread leaves none. The threads of an earlier load (its
// lowered thread, its closed session's pool) end asynchronously, so each
// load waits for them to be gone first and counts only threads that were
// not there before it.
func TestStartsThreadsSaysWhetherALoweredLoadLeavesLoweredThreads(t *testing.T) {
	load(t, pctrONNX, servables.LoadOptions{}) // the library and environment
	base := nicedThreads(t, -1)
	for _, n := range []int{1, 2, 3} {
		deadline := time.Now().Add(10 * time.Second)
		for {
			left := slices.DeleteFunc(nicedThreads(t, -1), func(tid int) bool { return slices.Contains(base, tid) })
			if len(left) == 0 {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("before the load with intra_op_threads %d: lowered threads %v of the earlier loads still run after 10 s", n, left)
			}
			time.Sleep(10 * time.Millisecond)
		}
		opts := servables.LoadOptions{IntraOpThreads: n}
		var lowered int
		var s servables.Servable
		var err error
		if perr := lowprio.Run(lowprio.Nice, func() {
			lowered = unix.Gettid()
			s, err = Runtime{}.Load(context.Background(), filepath.Dir(pctrONNX), []string{"model.onnx"}, opts)
		}); perr != nil {
			t.Skip(perr)
		}
		if err != nil {
			t.Fatal(err)
		}
		added := len(slices.DeleteFunc(nicedThreads(t, lowered), func(tid int) bool { return slices.Contains(base, tid) }))
		s.Close()
		if starts := (Runtime{}).StartsThreads(opts); starts != (added > 0) || (starts && added != n-1) {
			t.Errorf("intra_op_threads %d: StartsThreads says %v, and the lowered load left %d lowered threads", n, starts, added)
		}
	}
}
