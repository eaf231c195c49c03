package torch

import (
	"context"
	"testing"

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

// Grove loads and warms up TorchScript models on a lowered thread: the
// threads libtorch starts meanwhile for later calls (the inter-op pool,
// started by the runtime's first load) must not take its priority.
func TestALoweredLoadAndForwardLeaveNoLoweredThread(t *testing.T) {
	if n := nicedThreads(t, -1); len(n) > 0 {
		t.Skipf("threads %v are at nice %d or more already", n, lowprio.Nice)
	}
	var lowered int
	var s servables.Servable
	var err error
	if perr := lowprio.Run(lowprio.Nice, func() {
		lowered = unix.Gettid()
		if s, err = (Runtime{}).Load(context.Background(), "testdata", []string{"linear.pt"}, servables.LoadOptions{}); err != nil {
			return
		}
		in, _ := servables.NewTensor("x", servables.Float32, []int64{1, 4})
		_, err = s.Predict(context.Background(), []servables.Tensor{in})
	}); perr != nil {
		t.Skip(perr)
	}
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if n := nicedThreads(t, lowered); len(n) > 0 {
		t.Errorf("threads %v are at nice %d or more after a lowered load and forward call (the lowered thread: %d)", n, lowprio.Nice, lowered)
	}
}
