package placement

import (
	"fmt"
	"math/rand/v2"
	"reflect"
	"slices"
	"testing"
)

// randomInput makes an input from a seed: up to 6 members (some draining,
// holding random contents in random states, with on-demand figures for
// some), up to 12 models (a third on demand, some asked for) and a current
// table that lists members, dead nodes and models no longer desired.
func randomInput(seed uint64) Input {
	r := rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))
	const unit = 256 << 20
	in := Input{SizeFactor: 0.5 + r.Float64()*2.5, Current: Table{}}
	paths := func() string { return fmt.Sprintf("m%d", r.IntN(12)) }
	for i := range r.IntN(7) {
		m := Member{Name: fmt.Sprintf("n%d", i), BudgetBytes: int64(r.IntN(64)) * unit, Draining: r.IntN(6) == 0}
		m.FreeBytes = r.Int64N(m.BudgetBytes + 1)
		m.ReservedBytes = r.Int64N(m.FreeBytes + 1)
		for range r.IntN(4) {
			h := Held{Path: paths(), Content: fmt.Sprint(r.IntN(2)), Bytes: int64(r.IntN(8)) * unit,
				State: []State{Loading, Ready, Ready, Failed}[r.IntN(4)]}
			m.Held = append(m.Held, h)
			if r.IntN(2) == 0 { // its on-demand figures, if it is on demand
				if m.Use == nil {
					m.Use = map[string]Use{}
				}
				m.Use[h.Path] = Use{LastUsed: r.Int64N(1000), InFlight: int64(r.IntN(2) * r.IntN(3))}
			}
		}
		in.Members = append(in.Members, m)
	}
	for i := range 12 {
		if r.IntN(3) == 0 {
			continue
		}
		m := Model{Path: fmt.Sprintf("m%d", i), Nodes: r.IntN(5), FileBytes: int64(r.IntN(16)) * unit}
		m.MinNodes = r.IntN(max(m.Nodes, 1) + 1)
		if r.IntN(2) == 0 {
			m.MeasuredBytes = int64(r.IntN(24)) * unit
		}
		if r.IntN(3) == 0 {
			m.OnDemand, m.Demand = true, r.IntN(3)
		}
		in.Models = append(in.Models, m)
	}
	// Most on-demand models are listed where they are held, so that room
	// can be made by unloading them.
	for _, m := range in.Models {
		for _, n := range in.Members {
			if m.OnDemand && r.IntN(4) > 0 && slices.ContainsFunc(n.Held, func(h Held) bool { return h.Path == m.Path }) {
				in.Current[m.Path] = append(in.Current[m.Path], n.Name)
			}
		}
	}
	for range r.IntN(10) {
		p := paths()
		for range 1 + r.IntN(3) {
			in.Current[p] = append(in.Current[p], fmt.Sprintf("n%d", r.IntN(8))) // n6, n7: dead
		}
	}
	return in
}

// shuffled returns in with its slices in another order.
func shuffled(in Input, seed uint64) Input {
	r := rand.New(rand.NewPCG(seed, 7))
	out := in
	out.Models = slices.Clone(in.Models)
	out.Members = slices.Clone(in.Members)
	r.Shuffle(len(out.Models), func(i, j int) { out.Models[i], out.Models[j] = out.Models[j], out.Models[i] })
	r.Shuffle(len(out.Members), func(i, j int) { out.Members[i], out.Members[j] = out.Members[j], out.Members[i] })
	for i := range out.Members {
		h := slices.Clone(out.Members[i].Held)
		r.Shuffle(len(h), func(a, b int) { h[a], h[b] = h[b], h[a] })
		out.Members[i].Held = h
	}
	out.Current = Table{}
	for p, ns := range in.Current {
		ns = slices.Clone(ns)
		r.Shuffle(len(ns), func(a, b int) { ns[a], ns[b] = ns[b], ns[a] })
		out.Current[p] = ns
	}
	return out
}

// checkInvariants checks what every plan must satisfy, whatever its input.
func checkInvariants(t *testing.T, in Input, plan Plan) {
	t.Helper()
	members := map[string]*Member{}
	for i := range in.Members {
		members[in.Members[i].Name] = &in.Members[i]
	}
	holding := func(n *Member, path string) (holds, isReady bool) {
		for _, h := range n.Held {
			if h.Path == path && (h.State == Ready || h.State == Loading) {
				holds, isReady = true, isReady || h.State == Ready
			}
		}
		return holds, isReady
	}
	short := map[string]Shortfall{}
	for _, s := range append(slices.Clone(plan.Unplaceable), plan.UnderReplicated...) {
		if _, dup := short[s.Path]; dup {
			t.Errorf("%s is reported twice", s.Path)
		}
		short[s.Path] = s
	}
	desired := map[string]bool{}
	models := map[string]Model{}
	for _, m := range in.Models {
		models[m.Path] = m
	}
	// evicted[path][node]: the copy was unloaded to make room; freed[n]:
	// the memory that gives back on n.
	evicted, freed := map[string]map[string]bool{}, map[string]int64{}
	for _, e := range plan.Evicted {
		v, n, f := models[e.Path], members[e.Node], models[e.For]
		if n == nil || !v.OnDemand || !f.OnDemand || f.Demand == 0 || slices.Contains(plan.Table[e.Path], e.Node) ||
			!slices.Contains(plan.Table[e.For], e.Node) || slices.Contains(in.Current[e.For], e.Node) {
			t.Errorf("eviction %+v: not an on-demand copy dropped for an on-demand model asked for and placed there", e)
			continue
		}
		if u := n.Use[e.Path]; u.InFlight > 0 || u.Waiting > 0 {
			t.Errorf("eviction %+v: the copy holds requests (%+v)", e, u)
		}
		if len(plan.Table[e.Path]) < v.MinNodes {
			t.Errorf("eviction %+v: %s left on %d nodes, min_nodes %d", e, e.Path, len(plan.Table[e.Path]), v.MinNodes)
		}
		if evicted[e.Path] == nil {
			evicted[e.Path] = map[string]bool{}
		}
		evicted[e.Path][e.Node] = true
		ready := false
		for _, h := range n.Held {
			if h.Path == e.Path && h.State == Ready {
				freed[e.Node] += h.Bytes
				ready = true
			}
		}
		if !ready {
			t.Errorf("eviction %+v: the copy was not ready", e)
		}
	}
	// pending[n] and added[n]: memory of the copies the table lists on n
	// that n does not hold, already placed before and new.
	pending, added := map[string]int64{}, map[string]int64{}
	for _, m := range in.Models {
		desired[m.Path] = true
		nodes, minNodes := max(m.Nodes, 1), max(m.MinNodes, 1)
		if m.OnDemand {
			nodes = min(max(m.MinNodes, m.Demand), max(m.Nodes, 1))
			minNodes = min(minNodes, nodes)
			if len(evicted[m.Path]) > 0 { // wants what it has left
				nodes = len(plan.Table[m.Path])
				minNodes = min(minNodes, nodes)
			}
		}
		listed := plan.Table[m.Path]
		if !slices.IsSorted(listed) || len(slices.Compact(slices.Clone(listed))) != len(listed) {
			t.Errorf("%s: nodes %v are not sorted and distinct (a model twice on a node)", m.Path, listed)
		}
		var live []string // current, live, not draining
		for _, name := range in.Current[m.Path] {
			if n := members[name]; n != nil && !n.Draining && !slices.Contains(live, name) {
				live = append(live, name)
			}
		}
		placed, fresh := 0, 0
		for _, name := range listed {
			n := members[name]
			if n == nil {
				t.Fatalf("%s: placed on %s, not a member", m.Path, name)
			}
			before := slices.Contains(in.Current[m.Path], name)
			holds, isReady := holding(n, m.Path)
			if n.Draining {
				if !before || !isReady {
					t.Errorf("%s: listed on draining %s, which was not listed for it holding it ready", m.Path, name)
				}
				continue
			}
			placed++
			if !before {
				fresh++
			}
			if !holds {
				if before {
					pending[name] += Need(m, in.SizeFactor)
				} else {
					added[name] += Need(m, in.SizeFactor)
				}
			}
		}
		if placed > nodes {
			t.Errorf("%s: on %d nodes, wants %d", m.Path, placed, nodes)
		}
		if len(live) <= nodes {
			for _, name := range live {
				if !slices.Contains(listed, name) && !evicted[m.Path][name] {
					t.Errorf("%s: evicted from %s", m.Path, name)
				}
			}
		}
		s, reported := short[m.Path]
		switch {
		case placed < minNodes:
			if !reported || !slices.ContainsFunc(plan.Unplaceable, func(u Shortfall) bool { return u.Path == m.Path }) {
				t.Errorf("%s: on %d nodes, min %d, not reported unplaceable", m.Path, placed, minNodes)
			}
			if fresh > 0 {
				t.Errorf("%s: unplaceable yet given %d new nodes", m.Path, fresh)
			}
		case placed < nodes:
			if !reported || !slices.ContainsFunc(plan.UnderReplicated, func(u Shortfall) bool { return u.Path == m.Path }) {
				t.Errorf("%s: on %d nodes of %d, not reported under-replicated", m.Path, placed, nodes)
			}
		case reported:
			t.Errorf("%s: fully placed yet reported %+v", m.Path, s)
		}
		if reported && (s.Placed != placed || s.Want != nodes || s.Min != minNodes || s.Reason == "") {
			t.Errorf("%s: report %+v, placed %d", m.Path, s, placed)
		}
	}
	for p := range plan.Table {
		if !desired[p] {
			t.Errorf("%s is placed but not desired", p)
		}
	}
	for name, add := range added {
		n := members[name]
		var held int64
		for _, h := range n.Held {
			held += h.Bytes
		}
		held -= freed[name]
		if held+pending[name]+add > n.BudgetBytes || n.ReservedBytes+pending[name]+add > n.FreeBytes+freed[name] {
			t.Errorf("%s over-committed: budget %d, free %d, reserved %d, held %d, placed before %d, new %d",
				name, n.BudgetBytes, n.FreeBytes, n.ReservedBytes, held, pending[name], add)
		}
	}
}

// checkPlan checks a random input's plan: the invariants, the same answer
// for the input in another order, and no change when it is computed again
// from its own table.
func checkPlan(t *testing.T, seed uint64) {
	in := randomInput(seed)
	plan, err := Compute(in)
	if err != nil {
		t.Fatalf("seed %d: %v", seed, err)
	}
	checkInvariants(t, in, plan)
	if again, _ := Compute(shuffled(in, seed)); !reflect.DeepEqual(again, plan) {
		t.Fatalf("seed %d: another order of the input gave another plan:\n%+v\n%+v", seed, plan, again)
	}
	next := in
	next.Current = plan.Table
	// As the controller does: a model unloaded to make room wants no more
	// copies than it has left.
	next.Models = slices.Clone(in.Models)
	for i, m := range next.Models {
		if slices.ContainsFunc(plan.Evicted, func(e Eviction) bool { return e.Path == m.Path }) {
			next.Models[i].Demand = min(m.Demand, len(plan.Table[m.Path]))
		}
	}
	again, err := Compute(next)
	if err != nil {
		t.Fatal(err)
	}
	if !again.Table.Equal(plan.Table) {
		t.Fatalf("seed %d: not stable: %v then %v", seed, plan.Table, again.Table)
	}
}

func TestComputeProperties(t *testing.T) {
	for seed := range uint64(3000) {
		checkPlan(t, seed)
		if t.Failed() {
			t.Fatalf("seed %d: %+v", seed, randomInput(seed))
		}
	}
}

func FuzzCompute(f *testing.F) {
	for _, s := range []uint64{0, 1, 42, 1 << 40} {
		f.Add(s)
	}
	f.Fuzz(checkPlan)
}
