// Package cluster ties Grove's cluster coordination together: the
// Controller, which every node runs, campaigns to be the one placement
// controller and, while it is, recomputes the placement table
// (cluster/placement) from the membership and the desired models and
// writes it (cluster/coord) whenever either changes.
//
// Who owns what: etcd holds the membership, the election and the table;
// a Controller owns only its loop, the last plan it wrote and, while it
// leads, the demand marks of the on-demand models (placement.Marks: what
// their requests asked for, when they were last used). The demand itself
// is in the member records: each node publishes, for the on-demand
// models it holds or has requests waiting for, its figures
// (placement.Use); a request for a model ready nowhere is such a mark,
// which vanishes with the record when its node dies. In a cluster only
// the controller unloads an on-demand model, by dropping it from the
// table when it went idle (IdleUnloadAfter). Each node
// reads its share of the table (placement.Table.ModelsOn) and reports
// what it holds in its member record; that reconciliation belongs to the
// node's supervisor, not to this package.
package cluster

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"reflect"
	"time"

	"github.com/groveml/grove/cluster/coord"
	"github.com/groveml/grove/cluster/placement"
	"github.com/groveml/grove/conf/modelconfig"
)

// ControllerConfig configures a Controller.
type ControllerConfig struct {
	// Client reads the membership and the table.
	Client *coord.Client
	// Node is this node's membership, which campaigns.
	Node *coord.Node
	// Desired returns the models to place (from the model config).
	Desired func(context.Context) ([]placement.Model, error)
	// MemoryFactor is placement.Input.SizeFactor: a model's memory is its
	// file size times this until its RSS was measured.
	MemoryFactor float64
	// IdleUnloadAfter is idle_unload_after: an on-demand model no node
	// took a request for that long drops to its min_nodes copies, and one
	// not saturated for that long to one copy (placement.WantCopies);
	// 0: never.
	IdleUnloadAfter time.Duration
	// Now is the clock (time.Now when nil).
	Now func() time.Time
	// Retry is the pause before trying again after a failed read or
	// write (1 s when zero).
	Retry time.Duration
	// Logger receives the controller's decisions and failures
	// (slog.Default when nil).
	Logger *slog.Logger
}

// Controller is one node's share of the placement controller.
type Controller struct {
	cfg     ControllerConfig
	changed chan struct{}
}

// NewController checks cfg and returns a Controller; Run runs it.
func NewController(cfg ControllerConfig) (*Controller, error) {
	switch {
	case cfg.Client == nil || cfg.Node == nil:
		return nil, errors.New("cluster: the controller needs a client and a node")
	case cfg.Desired == nil:
		return nil, errors.New("cluster: the controller needs the desired models")
	case !(cfg.MemoryFactor > 0) || math.IsInf(cfg.MemoryFactor, 0):
		return nil, fmt.Errorf("cluster: memory factor %v is not a finite positive number", cfg.MemoryFactor)
	}
	if cfg.Retry <= 0 {
		cfg.Retry = time.Second
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	return &Controller{cfg: cfg, changed: make(chan struct{}, 1)}, nil
}

// ConfigChanged tells the controller the desired models changed; it
// never blocks. A node that does not lead ignores it.
func (c *Controller) ConfigChanged() {
	select {
	case c.changed <- struct{}{}:
	default:
	}
}

// Run campaigns, and while this node leads keeps the placement table in
// step with the membership and the desired models. It returns nil when
// ctx is done (resigning first, so another node takes over at once), or
// coord.ErrSessionLost when the node's lease ended (the node must join
// again).
func (c *Controller) Run(ctx context.Context) error {
	log := c.cfg.Logger.With("node", c.cfg.Node.Name())
	for {
		l, err := c.cfg.Node.Campaign(ctx)
		switch {
		case ctx.Err() != nil:
			return nil
		case errors.Is(err, coord.ErrSessionLost):
			return err
		case err != nil:
			log.Warn("cluster: campaign failed; retrying", "err", err)
			select {
			case <-ctx.Done():
			case <-time.After(c.cfg.Retry):
			}
			continue
		}
		log.Info("cluster: this node is the placement controller", "term", l.Term())
		c.lead(ctx, l, log)
		if ctx.Err() != nil {
			rctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
			if err := l.Resign(rctx); err != nil {
				log.Warn("cluster: resigning failed; the lease's end will hand over", "err", err)
			}
			cancel()
			return nil
		}
		log.Info("cluster: placement controller lost its leadership")
		select {
		case <-c.cfg.Node.Done():
			return coord.ErrSessionLost
		default:
		}
	}
}

// lead writes the table while l lasts.
func (c *Controller) lead(ctx context.Context, l *coord.Leadership, log *slog.Logger) {
	lctx, cancel := context.WithCancel(ctx)
	defer cancel()
	go func() { // the leadership's end ends every wait below
		select {
		case <-l.Done():
			cancel()
		case <-lctx.Done():
		}
	}()
	var cur coord.Placement
	for {
		var err error
		if cur, err = c.cfg.Client.Table(lctx); err == nil {
			break
		}
		log.Warn("cluster: reading the placement table failed; retrying", "err", err)
		select {
		case <-lctx.Done():
			return
		case <-time.After(c.cfg.Retry):
		}
	}
	members := c.cfg.Client.WatchMembers(lctx)
	var snap coord.Members
	have := false
	retry := time.NewTimer(time.Hour)
	retry.Stop()
	defer retry.Stop()
	idle := time.NewTimer(time.Hour) // the next on-demand model going idle
	idle.Stop()
	defer idle.Stop()
	var marks placement.Marks
	for {
		select {
		case <-lctx.Done():
			return
		case m, ok := <-members:
			if !ok {
				return
			}
			snap, have = m, true
		case <-c.changed:
		case <-retry.C:
		case <-idle.C:
		}
		if !have {
			continue
		}
		plan, next, err := c.plan(lctx, snap, cur.Table, &marks)
		if err != nil {
			log.Warn("cluster: placement not computed; retrying", "err", err)
			retry.Reset(c.cfg.Retry)
			continue
		}
		idle.Stop()
		if !next.IsZero() {
			idle.Reset(max(next.Sub(c.cfg.Now()), time.Millisecond))
		}
		if reflect.DeepEqual(plan, cur.Plan) {
			continue
		}
		rev, err := l.WriteTable(lctx, coord.Placement{Plan: plan})
		switch {
		case errors.Is(err, coord.ErrNotLeader) || lctx.Err() != nil:
			return
		case err != nil:
			log.Warn("cluster: writing the placement table failed; retrying", "err", err)
			retry.Reset(c.cfg.Retry)
			continue
		}
		cur.Plan = plan
		log.Info("cluster: placement table written", "revision", rev, "members", len(snap.List),
			"models", len(plan.Table), "unplaceable", len(plan.Unplaceable), "under_replicated", len(plan.UnderReplicated))
		for _, s := range plan.Unplaceable {
			log.Warn("cluster: model fits nowhere", "model", s.Path, "placed", s.Placed, "min_nodes", s.Min, "reason", s.Reason)
		}
		for _, e := range plan.Evicted {
			log.Info("cluster: idle on-demand copy unloaded to make room", "model", e.Path, "node", e.Node, "for", e.For)
		}
	}
}

// plan computes the next plan from a membership snapshot and the table
// in force, with the on-demand models' demand from marks (which it
// replaces), and returns when an on-demand model's demand next changes
// by itself (zero: never).
func (c *Controller) plan(ctx context.Context, snap coord.Members, cur placement.Table, marks *placement.Marks) (placement.Plan, time.Time, error) {
	models, err := c.cfg.Desired(ctx)
	if err != nil {
		return placement.Plan{}, time.Time{}, fmt.Errorf("reading the desired models: %w", err)
	}
	members := make([]placement.Member, len(snap.List))
	for i, m := range snap.List {
		members[i] = m.Member
	}
	demand, next, nextAt := placement.WantCopies(placement.DemandInput{Models: models, Members: members, Current: cur,
		Marks: *marks, Now: c.cfg.Now(), IdleAfter: c.cfg.IdleUnloadAfter})
	for i := range models {
		models[i].Demand = demand[models[i].Path]
	}
	plan, err := placement.Compute(placement.Input{Models: Measured(models, members), Members: members, Current: cur, SizeFactor: c.cfg.MemoryFactor})
	if err != nil {
		return placement.Plan{}, time.Time{}, err
	}
	// A model unloaded to make room wants no more copies than it has left
	// until a request asks for it again: else the next plan would place it
	// back, and evict the model it made room for.
	for _, e := range plan.Evicted {
		mk, ok := next[e.Path]
		if !ok {
			continue
		}
		if left := len(plan.Table[e.Path]); left == 0 {
			delete(next, e.Path)
		} else {
			mk.Want = min(mk.Want, left)
			next[e.Path] = mk
		}
	}
	*marks = next
	return plan, nextAt, nil
}

// Measured returns models with MeasuredBytes filled in where it was 0 and
// a member holds the model ready: the most any member holds of it ready,
// summed over its contents there (every version a version policy serves,
// and a content kept warm beside the current one, so the figure errs on
// the large side), each content's bytes its RSS measured after its load.
func Measured(models []placement.Model, members []placement.Member) []placement.Model {
	rss := map[string]int64{}
	for _, m := range members {
		on := map[string]int64{}
		for _, h := range m.Held {
			if h.State == placement.Ready {
				on[h.Path] = satAdd(on[h.Path], h.Bytes)
			}
		}
		for p, b := range on {
			rss[p] = max(rss[p], b)
		}
	}
	out := make([]placement.Model, len(models))
	for i, m := range models {
		if m.MeasuredBytes == 0 {
			m.MeasuredBytes = rss[m.Path]
		}
		out[i] = m
	}
	return out
}

// Desired returns the models of a model config as placement takes them:
// nodes and min_nodes with their defaults (def is the server's
// load_policy, which says which entries are on demand), and each model's
// file size from sizes (by model path; the bucket's listing). A model
// missing from sizes counts as needing no memory until a node measures
// it, so the caller should list every model first.
func Desired(cfg *modelconfig.Config, sizes map[string]int64, def modelconfig.Load) []placement.Model {
	out := make([]placement.Model, 0, len(cfg.Models))
	for _, m := range cfg.Models {
		nodes, minNodes := m.Placement(def)
		out = append(out, placement.Model{Path: m.Path, Nodes: nodes, MinNodes: minNodes, OnDemand: m.OnDemand(def), FileBytes: sizes[m.Path]})
	}
	return out
}

// satAdd is a+b for non-negative sizes, saturating at math.MaxInt64.
func satAdd(a, b int64) int64 {
	if b > math.MaxInt64-a {
		return math.MaxInt64
	}
	return a + b
}
