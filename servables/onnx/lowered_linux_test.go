package onnx

import (
	"context"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/groveml/grove/internal/lowprio/lowpriotest"
	"github.com/groveml/grove/servables"
)

// StartsThreads is what Grove goes by to load a model at a lowered
// priority: a load with intra-op threads above 1 leaves threads at that
// priority (the session's pool, which serves the model's calls), one
// with a single thread leaves none. The threads of an earlier load (its
// lowered thread, its closed session's pool) end asynchronously, so each
// load waits for them to be gone first and counts only threads that were
// not there before it.
func TestStartsThreadsSaysWhetherALoweredLoadLeavesLoweredThreads(t *testing.T) {
	load(t, pctrONNX, servables.LoadOptions{}) // the library and environment
	base := lowpriotest.Niced(t, -1)
	for _, n := range []int{1, 2, 3} {
		deadline := time.Now().Add(10 * time.Second)
		for {
			left := slices.DeleteFunc(lowpriotest.Niced(t, -1), func(tid int) bool { return slices.Contains(base, tid) })
			if len(left) == 0 {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("before the load with intra_op_threads %d: lowered threads %v of the earlier loads still run after 10 s", n, left)
			}
			time.Sleep(10 * time.Millisecond)
		}
		opts := servables.LoadOptions{IntraOpThreads: n}
		var s servables.Servable
		var err error
		lowered := lowpriotest.Run(t, func() {
			s, err = Runtime{}.Load(context.Background(), filepath.Dir(pctrONNX), []string{"model.onnx"}, opts)
		})
		if err != nil {
			t.Fatal(err)
		}
		added := len(slices.DeleteFunc(lowpriotest.Niced(t, lowered), func(tid int) bool { return slices.Contains(base, tid) }))
		s.Close()
		if starts := (Runtime{}).StartsThreads(opts); starts != (added > 0) || (starts && added != n-1) {
			t.Errorf("intra_op_threads %d: StartsThreads says %v, and the lowered load left %d lowered threads", n, starts, added)
		}
	}
}
