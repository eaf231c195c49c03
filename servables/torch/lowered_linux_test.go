package torch

import (
	"context"
	"testing"

	"github.com/groveml/grove/internal/lowprio"
	"github.com/groveml/grove/internal/lowprio/lowpriotest"
	"github.com/groveml/grove/servables"
)

// Grove loads and warms up TorchScript models on a lowered thread: the
// threads libtorch starts meanwhile for later calls (the inter-op pool,
// started by the runtime's first load) must not take its priority.
func TestALoweredLoadAndForwardLeaveNoLoweredThread(t *testing.T) {
	if n := lowpriotest.Niced(t, -1); len(n) > 0 {
		t.Skipf("threads %v are at nice %d or more already", n, lowprio.Nice)
	}
	var s servables.Servable
	var err error
	lowered := lowpriotest.Run(t, func() {
		if s, err = (Runtime{}).Load(context.Background(), "testdata", []string{"linear.pt"}, servables.LoadOptions{}); err != nil {
			return
		}
		in, _ := servables.NewTensor("x", servables.Float32, []int64{1, 4})
		_, err = s.Predict(context.Background(), []servables.Tensor{in})
	})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if n := lowpriotest.Niced(t, lowered); len(n) > 0 {
		t.Errorf("threads %v are at nice %d or more after a lowered load and forward call (the lowered thread: %d)", n, lowprio.Nice, lowered)
	}
}
