package node

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/groveml/grove/cluster/forward"
	"github.com/groveml/grove/servables"
)

// readyView is who has each model path ready on other nodes, as one
// membership snapshot says; changed is closed when a newer snapshot
// replaces it.
type readyView struct {
	peers   map[string][]forward.Peer
	changed chan struct{}
}

// followMove runs call on the peers v lists for path. When the call fails
// Unavailable and ctx is not done, the model may have just moved: a node
// that drains leaves once its models are ready elsewhere, and a request
// this node sent it before learning so fails (its connection is closed
// when the node leaves, or the node's forward server stops). followMove
// then waits, at most wait and never past ctx, for a view (current
// returns the newest) that lists peers for path that v did not, and runs
// call once more on those. The first failure is returned when no such
// view comes, and at once when lost is closed (the node's session ended:
// its peers would refuse the call).
func followMove(ctx context.Context, path string, v *readyView, current func() *readyView, wait time.Duration, lost <-chan struct{},
	call func(context.Context, []forward.Peer) (forward.Answer, error)) (forward.Answer, error) {
	tried := v.peers[path]
	ans, err := call(ctx, tried)
	if err == nil || servables.KindOf(err) != servables.Unavailable || ctx.Err() != nil {
		return ans, err
	}
	timer := time.NewTimer(wait)
	defer timer.Stop()
	for v = current(); ; v = current() {
		if closed(lost) {
			return forward.Answer{}, err
		}
		var fresh []forward.Peer
		for _, p := range v.peers[path] {
			if !slices.Contains(tried, p) {
				fresh = append(fresh, p)
			}
		}
		if len(fresh) > 0 {
			ans, err2 := call(ctx, fresh)
			if err2 != nil {
				return forward.Answer{}, fmt.Errorf("%w; before it, %v", err2, err)
			}
			return ans, nil
		}
		select {
		case <-v.changed:
		case <-timer.C:
			return forward.Answer{}, err
		case <-ctx.Done():
			return forward.Answer{}, err
		case <-lost:
			return forward.Answer{}, err
		}
	}
}
