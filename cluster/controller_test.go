package cluster

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"math"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/groveml/grove/cluster/coord"
	"github.com/groveml/grove/cluster/etcdtest"
	"github.com/groveml/grove/cluster/placement"
	"github.com/groveml/grove/conf/modelconfig"
)

const (
	gib = int64(1) << 30
	ttl = 2 * time.Second
)

// desiredModels is the model config the test changes under the controllers.
type desiredModels struct {
	mu     sync.Mutex
	models []placement.Model
}

func (d *desiredModels) get(context.Context) ([]placement.Model, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	return slices.Clone(d.models), nil
}

func (d *desiredModels) add(m placement.Model) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.models = append(d.models, m)
}

// testNode is a cluster node in the test process: its own etcd client,
// membership and controller, and the part of a supervisor the controller
// depends on: it holds its share of the table (at once, ready, each model
// taking its file size) and reports it in its member record.
type testNode struct {
	name   string
	client *coord.Client
	ctrl   *Controller
	ctx    context.Context
	cancel context.CancelFunc
	done   chan error
}

// run starts the node's controller.
func (n *testNode) run() *testNode {
	go func() { n.done <- n.ctrl.Run(n.ctx) }()
	return n
}

// newNode joins a node; run starts its controller.
func newNode(t *testing.T, srv *etcdtest.Server, name string, budget int64, desired *desiredModels) *testNode {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	log := slog.New(slog.DiscardHandler)
	client, err := coord.Dial(ctx, coord.Config{Endpoints: []string{srv.Addr}, Prefix: "/c/", Logger: log})
	if err != nil {
		t.Fatal(err)
	}
	self := coord.Member{Member: placement.Member{Name: name, BudgetBytes: budget, FreeBytes: budget}, Advertise: "127.0.0.1:1"}
	node, err := client.Join(ctx, self, ttl)
	if err != nil {
		t.Fatal(err)
	}
	ctrl, err := NewController(ControllerConfig{Client: client, Node: node, Desired: desired.get, MemoryFactor: 1, Retry: 100 * time.Millisecond, Logger: log})
	if err != nil {
		t.Fatal(err)
	}
	n := &testNode{name: name, client: client, ctrl: ctrl, ctx: ctx, cancel: cancel, done: make(chan error, 1)}
	go func() { // report the share of the table as held and ready
		for p := range client.WatchTable(ctx) {
			models, _ := desired.get(ctx)
			size := map[string]int64{}
			for _, m := range models {
				size[m.Path] = m.FileBytes
			}
			rec := self
			rec.Held = nil
			for _, path := range p.Table.ModelsOn(name) {
				rec.Held = append(rec.Held, placement.Held{Path: path, Bytes: size[path], State: placement.Ready})
				rec.FreeBytes -= size[path]
			}
			if err := node.Update(ctx, rec); err != nil && ctx.Err() == nil && !errors.Is(err, coord.ErrSessionLost) {
				t.Errorf("%s: updating its record: %v", name, err)
			}
		}
	}()
	t.Cleanup(func() {
		cancel()
		client.Close()
	})
	return n
}

// until reads ch until ok accepts a value, failing the test after within.
func until[T any](t *testing.T, ch <-chan T, within time.Duration, what string, ok func(T) bool) {
	t.Helper()
	deadline := time.After(within)
	for {
		select {
		case v := <-ch:
			if ok(v) {
				return
			}
		case <-deadline:
			t.Fatalf("%s: not within %v", what, within)
		}
	}
}

// kill ends the node as SIGKILL would: no resignation, no revoke; its
// lease expires one TTL later.
func (n *testNode) kill() {
	n.client.Close()
	n.cancel()
}

// awaitTable waits until ok accepts the table, checking each table seen
// with every, and returns it with the time it took.
func awaitTable(t *testing.T, tables <-chan coord.Placement, within time.Duration, what string, every func(coord.Placement), ok func(coord.Placement) bool) (coord.Placement, time.Duration) {
	t.Helper()
	start, deadline := time.Now(), time.After(within)
	var last coord.Placement
	for {
		select {
		case p := <-tables:
			every(p)
			if ok(p) {
				return p, time.Since(start)
			}
			last = p
		case <-deadline:
			t.Fatalf("%s: not within %v; last table %+v by %s", what, within, last.Table, last.Controller)
		}
	}
}

// fits reports whether every model is on its wanted number of nodes, all
// of them among the nodes of budget, each node's share within its budget.
func fits(models []placement.Model, budget map[string]int64) func(coord.Placement) bool {
	return func(p coord.Placement) bool {
		load := map[string]int64{}
		for _, m := range models {
			on := p.Table[m.Path]
			if len(on) != max(m.Nodes, 1) {
				return false
			}
			for _, n := range on {
				if _, ok := budget[n]; !ok {
					return false
				}
				load[n] += m.FileBytes
			}
		}
		for n, l := range load {
			if l > budget[n] {
				return false
			}
		}
		return len(p.Unplaceable) == 0 && len(p.UnderReplicated) == 0
	}
}

func TestControllerPlacesReplacesAndMovesNothingOnJoin(t *testing.T) {
	srv := etcdtest.Start(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	// Six 1 GiB copies (m1 on two nodes) with 4 GiB per node: more than one
	// node holds. (With no slack at all, most-free-memory-first may leave a
	// second copy nowhere to go: placement is not an exact bin packing.)
	desired := &desiredModels{}
	for i := range 5 {
		m := placement.Model{Path: fmt.Sprintf("m%d/", i+1), FileBytes: gib}
		if i == 0 {
			m.Nodes = 2
		}
		desired.add(m)
	}
	models, _ := desired.get(ctx)
	// All three are members before any controller runs: a node that joins
	// later takes only new work.
	nodes := map[string]*testNode{}
	budget := map[string]int64{}
	for _, name := range []string{"n1", "n2", "n3"} {
		nodes[name], budget[name] = newNode(t, srv, name, 4*gib, desired), 4*gib
	}
	for _, n := range nodes {
		n.run()
	}
	observer, err := coord.Dial(ctx, coord.Config{Endpoints: []string{srv.Addr}, Prefix: "/c/", Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	defer observer.Close()
	tables := observer.WatchTable(ctx)
	anyTable := func(coord.Placement) {}
	first, took := awaitTable(t, tables, 10*time.Second, "the first placement", anyTable, fits(models, budget))
	t.Logf("3 nodes: first table after %v by %s: %v", took.Round(time.Millisecond), first.Controller, first.Table)
	for name := range nodes {
		if len(first.Table.ModelsOn(name)) == 0 {
			t.Errorf("%s holds nothing: %v", name, first.Table)
		}
	}

	// A node that is not the controller dies: its models go to the survivors.
	var victim string
	for _, name := range slices.Sorted(maps.Keys(nodes)) {
		if name != first.Controller {
			victim = name
			break
		}
	}
	kept := map[string][]string{} // the survivors' placements, which must not move
	for path, on := range first.Table {
		for _, n := range on {
			if n != victim {
				kept[path] = append(kept[path], n)
			}
		}
	}
	nodes[victim].kill()
	delete(nodes, victim)
	delete(budget, victim)
	noMove := func(p coord.Placement) {
		for path, on := range kept {
			for _, n := range on {
				if !slices.Contains(p.Table[path], n) {
					t.Errorf("%s moved off %s: %v", path, n, p.Table)
				}
			}
		}
	}
	after, took := awaitTable(t, tables, ttl+5*time.Second, "the dead node's models on the survivors", noMove, fits(models, budget))
	t.Logf("a dead node's models re-placed %v after it died (TTL %v): %v", took.Round(time.Millisecond), ttl, after.Table)

	// A fourth node with 6 GiB joins: nothing moves; a new 3 GiB model,
	// too big for the survivors, goes to it (if the controller sees the new
	// model before the new node, it reports it unplaceable, then places it).
	for path, on := range after.Table {
		kept[path] = on
	}
	nodes["n4"], budget["n4"] = newNode(t, srv, "n4", 6*gib, desired).run(), 6*gib
	until(t, observer.WatchMembers(ctx), 5*time.Second, "n4 a member", func(m coord.Members) bool { return slices.Contains(m.Names(), "n4") })
	desired.add(placement.Model{Path: "new/", FileBytes: 3 * gib})
	for _, n := range nodes {
		n.ctrl.ConfigChanged()
	}
	models, _ = desired.get(ctx)
	joined, _ := awaitTable(t, tables, 10*time.Second, "the new model on the new node", noMove, func(p coord.Placement) bool {
		return fits(models, budget)(p) && slices.Equal(p.Table["new/"], []string{"n4"})
	})
	for path, on := range joined.Table {
		if path != "new/" && !slices.Equal(on, kept[path]) {
			t.Errorf("%s moved when n4 joined: %v, was %v", path, on, kept[path])
		}
	}

	// The controller dies: another node takes over and re-places its
	// models (9 GiB of copies on the 10 GiB left).
	leader := joined.Controller
	nodes[leader].kill()
	delete(budget, leader)
	start := time.Now()
	final, _ := awaitTable(t, tables, ttl+5*time.Second, "a new controller re-placing the old one's models", func(coord.Placement) {},
		func(p coord.Placement) bool {
			return p.Controller != leader && p.Term > joined.Term && fits(models, budget)(p)
		})
	t.Logf("the controller died: %s took over and re-placed its models %v later (TTL %v): %v", final.Controller, time.Since(start).Round(time.Millisecond), ttl, final.Table)
}

func TestControllerStopResignsAndReportsUnplaceable(t *testing.T) {
	srv := etcdtest.Start(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	desired := &desiredModels{models: []placement.Model{{Path: "small/", FileBytes: gib}, {Path: "huge/", FileBytes: 10 * gib}}}
	a := newNode(t, srv, "a", 2*gib, desired).run()
	b := newNode(t, srv, "b", 2*gib, desired).run()
	observer, err := coord.Dial(ctx, coord.Config{Endpoints: []string{srv.Addr}, Prefix: "/c/", Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	defer observer.Close()
	tables := observer.WatchTable(ctx)
	p, _ := awaitTable(t, tables, 10*time.Second, "a table", func(coord.Placement) {}, func(p coord.Placement) bool { return len(p.Table["small/"]) == 1 })
	if len(p.Unplaceable) != 1 || p.Unplaceable[0].Path != "huge/" || p.Table["huge/"] != nil {
		t.Errorf("huge/ not reported unplaceable: %+v", p)
	}

	// Stopping the controller's node resigns: the other leads at once,
	// long before the lease would have expired.
	leader, other := a, b
	if p.Controller == "b" {
		leader, other = b, a
	}
	start := time.Now()
	leader.cancel()
	if err := <-leader.done; err != nil {
		t.Errorf("Run returned %v after its context ended", err)
	}
	until(t, observer.WatchLeader(ctx), 5*time.Second, "the other node leading", func(name string) bool { return name == other.name })
	if d := time.Since(start); d > ttl/2 {
		t.Errorf("handover after a stop took %v; a resignation should not wait for the lease (TTL %v)", d, ttl)
	} else {
		t.Logf("handover after the controller stopped: %v", d.Round(time.Millisecond))
	}

	// A node whose lease ended is told so.
	other.client.Close()
	select {
	case err := <-other.done:
		if !errors.Is(err, coord.ErrSessionLost) {
			t.Errorf("Run after the session ended: %v, want ErrSessionLost", err)
		}
	case <-time.After(ttl + 5*time.Second):
		t.Error("Run went on after its session ended")
	}
}

func TestNewControllerChecksItsConfig(t *testing.T) {
	if _, err := NewController(ControllerConfig{}); err == nil {
		t.Error("an empty config was accepted")
	}
}

func TestMeasured(t *testing.T) {
	got := Measured([]placement.Model{{Path: "a", FileBytes: 10}, {Path: "b", FileBytes: 10, MeasuredBytes: 7}, {Path: "c", FileBytes: 10}},
		[]placement.Member{
			{Name: "n1", Held: []placement.Held{{Path: "a", Bytes: 30, State: placement.Ready}, {Path: "b", Bytes: 99, State: placement.Ready}}},
			{Name: "n2", Held: []placement.Held{{Path: "a", Bytes: 40, State: placement.Ready}, {Path: "c", Bytes: 50, State: placement.Loading}}},
		})
	if got[0].MeasuredBytes != 40 || got[1].MeasuredBytes != 7 || got[2].MeasuredBytes != 0 {
		t.Errorf("got %+v", got)
	}
}

// TestMeasuredCountsEveryContent: a model a member holds as several
// contents (two versions a version policy serves, a previous content
// kept warm) needs them all on a node that takes it, not the largest one.
func TestMeasuredCountsEveryContent(t *testing.T) {
	got := Measured([]placement.Model{{Path: "v/", FileBytes: 10}, {Path: "k", FileBytes: 10}, {Path: "huge", FileBytes: 10}},
		[]placement.Member{
			{Name: "n1", Held: []placement.Held{{Path: "v/", Content: "v/2/", Bytes: 30, State: placement.Ready},
				{Path: "v/", Content: "v/3/", Bytes: 35, State: placement.Ready}, {Path: "v/", Content: "v/4/", Bytes: 99, State: placement.Loading}}},
			{Name: "n2", Held: []placement.Held{{Path: "v/", Content: "v/3/", Bytes: 50, State: placement.Ready},
				{Path: "k", Content: "new", Bytes: 20, State: placement.Ready}, {Path: "k", Content: "old", Bytes: 18, State: placement.Ready},
				{Path: "huge", Content: "a", Bytes: math.MaxInt64 - 1, State: placement.Ready}, {Path: "huge", Content: "b", Bytes: 5, State: placement.Ready}}},
		})
	if got[0].MeasuredBytes != 65 {
		t.Errorf("two ready versions of 30 and 35 on n1 (50 for one on n2): measured %d, want 65", got[0].MeasuredBytes)
	}
	if got[1].MeasuredBytes != 38 {
		t.Errorf("a content of 20 and a kept one of 18: measured %d, want 38", got[1].MeasuredBytes)
	}
	if got[2].MeasuredBytes != math.MaxInt64 {
		t.Errorf("a sum past int64: measured %d, want it saturated", got[2].MeasuredBytes)
	}
}

func TestDesired(t *testing.T) {
	cfg, err := modelconfig.Parse([]byte(`{"model_metadata": [{"model_path": "a/", "nodes": 3, "min_nodes": 2}, {"model_path": "b"},
	  {"model_path": "c/", "load": "on_demand", "nodes": 3}, {"model_path": "d/", "load": "eager"}]}`))
	if err != nil {
		t.Fatal(err)
	}
	got := Desired(cfg, map[string]int64{"a/": 100, "b": 7, "c/": 5, "d/": 9}, modelconfig.LoadEager)
	want := []placement.Model{{Path: "a/", Nodes: 3, MinNodes: 2, FileBytes: 100}, {Path: "b", Nodes: 1, MinNodes: 1, FileBytes: 7},
		{Path: "c/", Nodes: 3, MinNodes: 0, OnDemand: true, FileBytes: 5}, {Path: "d/", Nodes: 1, MinNodes: 1, FileBytes: 9}}
	if !slices.Equal(got, want) {
		t.Errorf("eager policy: got %+v, want %+v", got, want)
	}
	got = Desired(cfg, map[string]int64{"a/": 100, "b": 7, "c/": 5, "d/": 9}, modelconfig.LoadOnDemand)
	want[0].OnDemand, want[0].MinNodes = true, 2
	want[1].OnDemand, want[1].MinNodes = true, 0
	if !slices.Equal(got, want) {
		t.Errorf("on-demand policy: got %+v, want %+v", got, want)
	}
}

// TestControllerPlacesAnOnDemandModelWhenAskedForAndDropsItWhenIdle runs
// a controller against etcd with one on-demand model (min_nodes 0): placed
// nowhere while nobody asks for it, placed on the roomier node once a
// member's record says requests wait for it, kept while it is used, and
// dropped from the table once no node used it for idle_unload_after (the
// controller's clock is the test's: no sleeps).
func TestControllerPlacesAnOnDemandModelWhenAskedForAndDropsItWhenIdle(t *testing.T) {
	srv := etcdtest.Start(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	log := slog.New(slog.DiscardHandler)
	desired := &desiredModels{}
	desired.add(placement.Model{Path: "eager/", Nodes: 1, MinNodes: 1, FileBytes: gib})
	desired.add(placement.Model{Path: "od/", Nodes: 2, OnDemand: true, FileBytes: gib})
	var mu sync.Mutex
	now := time.Unix(1_000_000, 0)
	clock := func() time.Time { mu.Lock(); defer mu.Unlock(); return now }
	join := func(name string, free int64) (*coord.Client, *coord.Node, coord.Member) {
		client, err := coord.Dial(ctx, coord.Config{Endpoints: []string{srv.Addr}, Prefix: "/c/", Logger: log})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { client.Close() })
		rec := coord.Member{Member: placement.Member{Name: name, BudgetBytes: 8 * gib, FreeBytes: free}, Advertise: "127.0.0.1:1"}
		node, err := client.Join(ctx, rec, ttl)
		if err != nil {
			t.Fatal(err)
		}
		return client, node, rec
	}
	client1, node1, _ := join("n1", 4*gib)
	_, node2, rec2 := join("n2", 6*gib)
	ctrl, err := NewController(ControllerConfig{Client: client1, Node: node1, Desired: desired.get, MemoryFactor: 1,
		IdleUnloadAfter: time.Minute, Now: clock, Retry: 100 * time.Millisecond, Logger: log})
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- ctrl.Run(ctx) }()
	tables := client1.WatchTable(ctx)
	until(t, tables, 10*time.Second, "the eager model placed, the idle on-demand one not", func(p coord.Placement) bool {
		return len(p.Table["eager/"]) == 1 && p.Table["od/"] == nil
	})

	// n1's record says a request waits for od/: the controller places it
	// on n2, which has more memory left.
	rec1 := coord.Member{Member: placement.Member{Name: "n1", BudgetBytes: 8 * gib, FreeBytes: 4 * gib,
		Use: map[string]placement.Use{"od/": {Waiting: 1}}}, Advertise: "127.0.0.1:1"}
	if err := node1.Update(ctx, rec1); err != nil {
		t.Fatal(err)
	}
	until(t, tables, 10*time.Second, "od/ placed on n2 once asked for", func(p coord.Placement) bool {
		return slices.Equal(p.Table["od/"], []string{"n2"})
	})

	// n2 loads it and serves it; the request on n1 ends. It stays placed.
	mu.Lock()
	now = now.Add(30 * time.Second)
	mu.Unlock()
	rec2.Held = []placement.Held{{Path: "od/", Bytes: gib, State: placement.Ready}}
	rec2.Use = map[string]placement.Use{"od/": {Replicas: 1, LastUsed: clock().Unix()}}
	if err := node2.Update(ctx, rec2); err != nil {
		t.Fatal(err)
	}
	rec1.Use = nil
	if err := node1.Update(ctx, rec1); err != nil {
		t.Fatal(err)
	}
	// A model added to the config makes the controller write a table
	// after it read those records: od/ is in it, still on n2.
	desired.add(placement.Model{Path: "x/", Nodes: 1, MinNodes: 1, FileBytes: gib})
	ctrl.ConfigChanged()
	until(t, tables, 10*time.Second, "x/ placed, od/ kept on n2 while used", func(p coord.Placement) bool {
		if len(p.Table["x/"]) == 0 {
			return false
		}
		if !slices.Equal(p.Table["od/"], []string{"n2"}) {
			t.Fatalf("od/ in use: table %v, want it kept on n2", p.Table)
		}
		return true
	})

	// A minute with no request on any node: dropped from the table. The
	// controller may plan once more from n1's record before it sees the
	// request there end, which counts as a use at that time: the clock
	// then moves on by another minute.
	dropped := false
	for try := 0; !dropped && try < 5; try++ {
		mu.Lock()
		now = now.Add(time.Minute)
		mu.Unlock()
		ctrl.ConfigChanged()
		wait := time.After(2 * time.Second)
		for !dropped {
			select {
			case p := <-tables:
				dropped = p.Table["od/"] == nil && len(p.Table["eager/"]) == 1
				continue
			case <-wait:
			}
			break
		}
	}
	if !dropped {
		t.Fatal("od/ not dropped after idle_unload_after with no request on any node (five minutes of fake time)")
	}
	cancel()
	if err := <-done; err != nil {
		t.Errorf("Run: %v", err)
	}
}

func TestControllerUnloadsAnIdleOnDemandModelToMakeRoomAndDoesNotPlaceItBack(t *testing.T) {
	srv := etcdtest.Start(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	log := slog.New(slog.DiscardHandler)
	desired := &desiredModels{}
	const size = 3 * gib / 2
	desired.add(placement.Model{Path: "a/", Nodes: 1, OnDemand: true, FileBytes: size})
	desired.add(placement.Model{Path: "b/", Nodes: 1, OnDemand: true, FileBytes: size})
	now := time.Unix(1_000_000, 0)
	client, err := coord.Dial(ctx, coord.Config{Endpoints: []string{srv.Addr}, Prefix: "/c/", Logger: log})
	if err != nil {
		t.Fatal(err)
	}
	defer client.Close()
	// n1 has room for one of the two.
	rec := coord.Member{Member: placement.Member{Name: "n1", BudgetBytes: 2 * gib, FreeBytes: 2 * gib,
		Use: map[string]placement.Use{"a/": {Waiting: 1}}}, Advertise: "127.0.0.1:1"}
	node, err := client.Join(ctx, rec, ttl)
	if err != nil {
		t.Fatal(err)
	}
	ctrl, err := NewController(ControllerConfig{Client: client, Node: node, Desired: desired.get, MemoryFactor: 1,
		IdleUnloadAfter: time.Hour, Now: func() time.Time { return now }, Retry: 100 * time.Millisecond, Logger: log})
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- ctrl.Run(ctx) }()
	tables := client.WatchTable(ctx)
	until(t, tables, 10*time.Second, "a/ placed once asked for", func(p coord.Placement) bool {
		return slices.Equal(p.Table["a/"], []string{"n1"})
	})

	// n1 serves a/, now idle; then a request waits for b/, which fits
	// nowhere: a/ is unloaded and b/ placed.
	rec.Held = []placement.Held{{Path: "a/", Bytes: size, State: placement.Ready}}
	rec.FreeBytes = 2*gib - size
	rec.Use = map[string]placement.Use{"a/": {Replicas: 1, LastUsed: now.Unix()}, "b/": {Waiting: 1}}
	if err := node.Update(ctx, rec); err != nil {
		t.Fatal(err)
	}
	until(t, tables, 10*time.Second, "a/ unloaded for b/", func(p coord.Placement) bool {
		return p.Table["a/"] == nil && slices.Equal(p.Table["b/"], []string{"n1"})
	})

	// n1 unloads a/ and serves b/. Plans after that keep b/ and do not put
	// a/ back (which would unload b/ for it in turn).
	rec.Held = []placement.Held{{Path: "b/", Bytes: size, State: placement.Ready}}
	rec.Use = map[string]placement.Use{"a/": {LastUsed: now.Unix()}, "b/": {Replicas: 1, LastUsed: now.Unix()}}
	if err := node.Update(ctx, rec); err != nil {
		t.Fatal(err)
	}
	desired.add(placement.Model{Path: "c/", Nodes: 1, OnDemand: true, FileBytes: size})
	ctrl.ConfigChanged()
	for range 3 {
		ctrl.ConfigChanged()
		select {
		case p := <-tables:
			if p.Table["a/"] != nil || !slices.Equal(p.Table["b/"], []string{"n1"}) {
				t.Fatalf("table %v after a/ was unloaded for b/: want b/ kept and a/ not placed back", p.Table)
			}
		case <-time.After(500 * time.Millisecond):
		}
	}
	cancel()
	if err := <-done; err != nil {
		t.Errorf("Run: %v", err)
	}
}
