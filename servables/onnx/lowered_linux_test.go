package onnx

import (
	"context"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/groveml/grove/internal/lowprio"
	"github.com/groveml/grove/servables"
)

// nicedThreads lists the threads of the process whose nice value is
// lowprio.Nice or more, but except.
func nicedThreads(t *testing.T, except int) []int {
	t.Helper()
	entries, err := os.ReadDir("/proc/self/task")
	if err != nil {
		t.Skip("no /proc/self/task")
	}
	var out []int
	for _, e := range entries {
		tid, _ := strconv.Atoi(e.Name())
		b, err := os.ReadFile("/proc/self/task/" + e.Name() + "/stat")
		if err != nil || tid == except {
			continue // ended meanwhile
		}
		s := string(b)
		nice, err := strconv.Atoi(strings.Fields(s[strings.LastIndexByte(s, ')')+2:])[16])
		if err != nil {
			t.Fatalf("stat %q: %v", s, err)
		}
		if nice >= lowprio.Nice {
			out = append(out, tid)
		}
	}
	return out
}

// StartsThreads is what Grove goes by to load a model at a lowered
// priority: a load with intra-op threads above 1 leaves threads at that
// priority (the session's pool, which serves the model's calls), one
// with a single thread leaves none.
func TestStartsThreadsSaysWhetherALoweredLoadLeavesLoweredThreads(t *testing.T) {
	load(t, pctrONNX, servables.LoadOptions{}) // the library and environment
	for _, n := range []int{1, 2, 3} {
		opts := servables.LoadOptions{IntraOpThreads: n}
		var lowered int
		before := len(nicedThreads(t, -1))
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
		added := len(nicedThreads(t, lowered)) - before
		s.Close()
		if starts := (Runtime{}).StartsThreads(opts); starts != (added > 0) || (starts && added != n-1) {
			t.Errorf("intra_op_threads %d: StartsThreads says %v, and the lowered load left %d lowered threads", n, starts, added)
		}
	}
}
