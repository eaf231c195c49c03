package placement

import (
	"reflect"
	"slices"
	"testing"
	"time"
)

// onDemand is an on-demand model of size GiB, up to nodes copies, min
// copies while idle, and demand copies asked for.
func onDemand(path string, size int64, nodes, minNodes, demand int) Model {
	m := model(path, size, nodes, minNodes)
	m.OnDemand, m.Demand = true, demand
	return m
}

func TestComputePlacesOnDemandModelsByTheirDemand(t *testing.T) {
	for _, tc := range []struct {
		name        string
		in          Input
		want        Table
		unplaceable []string
	}{
		{
			name: "idle with min_nodes 0: no copy, nothing reported",
			in:   Input{Models: []Model{onDemand("m", 1, 3, 0, 0)}, Members: []Member{member("n1", 8, 8), member("n2", 8, 8)}},
			want: Table{},
		},
		{
			name: "idle with min_nodes 1: one copy",
			in:   Input{Models: []Model{onDemand("m", 1, 3, 1, 0)}, Members: []Member{member("n1", 8, 8), member("n2", 8, 8)}},
			want: Table{"m": {"n1"}},
		},
		{
			name: "demanded: the node with the most free memory",
			in:   Input{Models: []Model{onDemand("m", 1, 3, 0, 1)}, Members: []Member{member("n1", 8, 5), member("n2", 8, 7), member("n3", 8, 6)}},
			want: Table{"m": {"n2"}},
		},
		{
			name: "equal memory: the node with the fewest loads in flight",
			in: Input{Models: []Model{onDemand("m", 1, 3, 0, 1)},
				Members: []Member{
					{Name: "n1", BudgetBytes: 8 * gib, FreeBytes: 8 * gib, ReservedBytes: 2 * gib, Held: []Held{loading("x", 1), loading("y", 1)}},
					{Name: "n2", BudgetBytes: 8 * gib, FreeBytes: 8 * gib, ReservedBytes: 2 * gib, Held: []Held{loading("z", 2)}}}},
			want: Table{"m": {"n2"}},
		},
		{
			name: "a burst of demanded models spreads over the nodes",
			in: Input{Models: []Model{onDemand("a", 1, 1, 0, 1), onDemand("b", 1, 1, 0, 1), onDemand("c", 1, 1, 0, 1)},
				Members: []Member{member("n1", 8, 8), member("n2", 8, 8), member("n3", 8, 8)}},
			want: Table{"a": {"n1"}, "b": {"n2"}, "c": {"n3"}},
		},
		{
			name: "demand above nodes: nodes copies",
			in:   Input{Models: []Model{onDemand("m", 1, 2, 0, 3)}, Members: []Member{member("n1", 8, 8), member("n2", 8, 8), member("n3", 8, 8)}},
			want: Table{"m": {"n1", "n2"}},
		},
		{
			name: "demand gone: the copies dropped",
			in: Input{Models: []Model{onDemand("m", 1, 3, 0, 0)}, Members: []Member{member("n1", 8, 7, ready("m", 1)), member("n2", 8, 7, ready("m", 1))},
				Current: Table{"m": {"n1", "n2"}}},
			want: Table{},
		},
		{
			name: "demand down to one: the ready copy kept",
			in: Input{Models: []Model{onDemand("m", 1, 3, 0, 1)}, Members: []Member{member("n1", 8, 8, loading("m", 1)), member("n2", 8, 7, ready("m", 1))},
				Current: Table{"m": {"n1", "n2"}}},
			want: Table{"m": {"n2"}},
		},
		{
			name: "demanded but fits nowhere: unplaceable",
			in:   Input{Models: []Model{onDemand("m", 9, 3, 0, 1)}, Members: []Member{member("n1", 8, 8)}},
			want: Table{}, unplaceable: []string{"m"},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if tc.in.SizeFactor == 0 {
				tc.in.SizeFactor = 2
			}
			p, err := Compute(tc.in)
			if err != nil {
				t.Fatal(err)
			}
			if !p.Table.Equal(tc.want) {
				t.Errorf("table %v, want %v", p.Table, tc.want)
			}
			var un []string
			for _, s := range p.Unplaceable {
				un = append(un, s.Path)
			}
			if !reflect.DeepEqual(un, tc.unplaceable) {
				t.Errorf("unplaceable %v, want %v", un, tc.unplaceable)
			}
			if len(p.UnderReplicated) > 0 {
				t.Errorf("under-replicated %+v, want none", p.UnderReplicated)
			}
		})
	}
}

func TestComputeRejectsNegativeDemand(t *testing.T) {
	if _, err := Compute(Input{Models: []Model{onDemand("m", 1, 1, 0, -1)}, SizeFactor: 2}); err == nil {
		t.Error("demand -1 accepted")
	}
}

func TestWantCopies(t *testing.T) {
	t0 := time.Unix(1_000_000, 0)
	idle := time.Minute
	use := func(name string, u Use, held ...Held) Member {
		return Member{Name: name, BudgetBytes: 8 * gib, FreeBytes: 8 * gib, Held: held, Use: map[string]Use{"m": u}}
	}
	for _, tc := range []struct {
		name     string
		model    Model
		members  []Member
		current  Table
		marks    Marks
		now      time.Time
		want     int // 0: absent
		wantMark Mark
		next     time.Time
	}{
		{
			name:  "never asked for: no demand",
			model: onDemand("m", 1, 3, 0, 0), members: []Member{use("n1", Use{})}, now: t0,
		},
		{
			name:  "requests waiting on a node: one copy",
			model: onDemand("m", 1, 3, 0, 0), members: []Member{use("n1", Use{Waiting: 2})}, now: t0,
			want: 1, wantMark: Mark{Want: 1, Used: t0, Busy: t0}, next: t0.Add(idle),
		},
		{
			name:  "a new controller keeps the copies listed, last used when the nodes saw it",
			model: onDemand("m", 1, 3, 0, 0), members: []Member{use("n1", Use{LastUsed: t0.Unix() - 5}, ready("m", 1)), use("n2", Use{}, ready("m", 1))},
			current: Table{"m": {"n1", "n2"}}, now: t0,
			want: 2, wantMark: Mark{Want: 2, Used: t0.Add(-5 * time.Second), Busy: t0}, next: t0.Add(idle - 5*time.Second),
		},
		{
			name:  "a new controller drops a listed model the nodes saw idle",
			model: onDemand("m", 1, 3, 0, 0), members: []Member{use("n1", Use{LastUsed: t0.Unix() - 61}, ready("m", 1))},
			current: Table{"m": {"n1"}}, now: t0,
		},
		{
			name:  "a new controller keeps a listed model never used for a whole idle period",
			model: onDemand("m", 1, 3, 0, 0), members: []Member{use("n1", Use{}, ready("m", 1))},
			current: Table{"m": {"n1"}}, now: t0,
			want: 1, wantMark: Mark{Want: 1, Used: t0, Busy: t0}, next: t0.Add(idle),
		},
		{
			name:  "a request in flight longer than idle_unload_after is a use",
			model: onDemand("m", 1, 3, 0, 0), members: []Member{use("n1", Use{InFlight: 1, Replicas: 1, LastUsed: t0.Unix() - 61}, ready("m", 1))},
			current: Table{"m": {"n1"}}, marks: Marks{"m": {Want: 1, Used: t0.Add(-61 * time.Second), Busy: t0.Add(-61 * time.Second)}}, now: t0,
			want: 1, wantMark: Mark{Want: 1, Used: t0, Busy: t0.Add(-61 * time.Second), Peak: 1}, next: t0.Add(idle),
		},
		{
			name:  "a copy loading where the table lists it is a use",
			model: onDemand("m", 1, 3, 0, 0), members: []Member{use("n1", Use{}, loading("m", 1))},
			current: Table{"m": {"n1"}}, marks: Marks{"m": {Want: 1, Used: t0.Add(-61 * time.Second), Busy: t0.Add(-61 * time.Second)}}, now: t0,
			want: 1, wantMark: Mark{Want: 1, Used: t0, Busy: t0.Add(-61 * time.Second)}, next: t0.Add(idle),
		},
		{
			name:  "every ready copy saturated with min_nodes 2 listed: one more than min_nodes",
			model: onDemand("m", 1, 3, 2, 0), members: []Member{use("n1", Use{InFlight: 2, Replicas: 1, LastUsed: t0.Unix()}, ready("m", 1)), use("n2", Use{InFlight: 2, Replicas: 1, LastUsed: t0.Unix()}, ready("m", 1)), use("n3", Use{})},
			current: Table{"m": {"n1", "n2"}}, marks: Marks{"m": {Want: 1, Used: t0.Add(-time.Second), Busy: t0.Add(-time.Hour)}}, now: t0,
			want: 3, wantMark: Mark{Want: 3, Used: t0, Busy: t0, Peak: 4}, next: t0.Add(idle),
		},
		{
			name:  "not saturated for idle_unload_after but its peak needed the copies: kept, a new window",
			model: onDemand("m", 1, 3, 0, 0), members: []Member{use("n1", Use{InFlight: 1, Replicas: 1, LastUsed: t0.Unix()}, ready("m", 1)), use("n2", Use{InFlight: 1, Replicas: 1, LastUsed: t0.Unix()}, ready("m", 1))},
			current: Table{"m": {"n1", "n2"}}, marks: Marks{"m": {Want: 2, Used: t0, Busy: t0.Add(-idle), Peak: 3}}, now: t0,
			want: 2, wantMark: Mark{Want: 2, Used: t0, Busy: t0, Peak: 2}, next: t0.Add(idle),
		},
		{
			name:  "not saturated for idle_unload_after, a peak two copies of 2 replicas carry: three down to two",
			model: onDemand("m", 1, 3, 0, 0), members: []Member{use("n1", Use{InFlight: 1, Replicas: 2, LastUsed: t0.Unix()}, ready("m", 1)), use("n2", Use{Replicas: 2}, ready("m", 1)), use("n3", Use{Replicas: 2}, ready("m", 1))},
			current: Table{"m": {"n1", "n2", "n3"}}, marks: Marks{"m": {Want: 3, Used: t0, Busy: t0.Add(-idle), Peak: 7}}, now: t0,
			want: 2, wantMark: Mark{Want: 2, Used: t0, Busy: t0, Peak: 1}, next: t0.Add(idle),
		},
		{
			name:  "every ready copy saturated: one more",
			model: onDemand("m", 1, 3, 0, 0), members: []Member{use("n1", Use{InFlight: 4, Replicas: 2, LastUsed: t0.Unix()}, ready("m", 1)), use("n2", Use{})},
			current: Table{"m": {"n1"}}, marks: Marks{"m": {Want: 1, Used: t0.Add(-time.Second), Busy: t0.Add(-time.Hour)}}, now: t0,
			want: 2, wantMark: Mark{Want: 2, Used: t0, Busy: t0, Peak: 4}, next: t0.Add(idle),
		},
		{
			name:  "one copy not saturated: none more",
			model: onDemand("m", 1, 3, 0, 0),
			members: []Member{use("n1", Use{InFlight: 4, Replicas: 2, LastUsed: t0.Unix()}, ready("m", 1)),
				use("n2", Use{InFlight: 1, Replicas: 2, LastUsed: t0.Unix()}, ready("m", 1))},
			current: Table{"m": {"n1", "n2"}}, marks: Marks{"m": {Want: 2, Used: t0, Busy: t0.Add(-time.Second)}}, now: t0,
			want: 2, wantMark: Mark{Want: 2, Used: t0, Busy: t0.Add(-time.Second), Peak: 5}, next: t0.Add(idle - time.Second),
		},
		{
			name:  "a copy still loading: none more",
			model: onDemand("m", 1, 3, 0, 0),
			members: []Member{use("n1", Use{InFlight: 9, Replicas: 1, LastUsed: t0.Unix()}, ready("m", 1)),
				use("n2", Use{}, loading("m", 1))},
			current: Table{"m": {"n1", "n2"}}, marks: Marks{"m": {Want: 2, Used: t0, Busy: t0}}, now: t0,
			want: 2, wantMark: Mark{Want: 2, Used: t0, Busy: t0, Peak: 9}, next: t0.Add(idle),
		},
		{
			name:  "saturated at nodes: no more",
			model: onDemand("m", 1, 1, 0, 0), members: []Member{use("n1", Use{InFlight: 9, Replicas: 1, LastUsed: t0.Unix()}, ready("m", 1))},
			current: Table{"m": {"n1"}}, marks: Marks{"m": {Want: 1, Used: t0, Busy: t0}}, now: t0,
			want: 1, wantMark: Mark{Want: 1, Used: t0, Busy: t0, Peak: 9}, next: t0.Add(idle),
		},
		{
			name:  "not saturated for idle_unload_after: back to one copy",
			model: onDemand("m", 1, 3, 0, 0), members: []Member{use("n1", Use{LastUsed: t0.Unix()}, ready("m", 1)), use("n2", Use{}, ready("m", 1))},
			current: Table{"m": {"n1", "n2"}}, marks: Marks{"m": {Want: 2, Used: t0, Busy: t0.Add(-idle)}}, now: t0,
			want: 1, wantMark: Mark{Want: 1, Used: t0, Busy: t0}, next: t0.Add(idle),
		},
		{
			name:  "no request for idle_unload_after: no demand",
			model: onDemand("m", 1, 3, 0, 0), members: []Member{use("n1", Use{LastUsed: t0.Unix() - 61}, ready("m", 1))},
			current: Table{"m": {"n1"}}, marks: Marks{"m": {Want: 1, Used: t0.Add(-61 * time.Second), Busy: t0.Add(-61 * time.Second)}}, now: t0,
		},
		{
			name:  "eager models have no demand",
			model: model("m", 1, 3, 1), members: []Member{use("n1", Use{Waiting: 3})}, now: t0,
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			demand, marks, next := WantCopies(DemandInput{Models: []Model{tc.model}, Members: tc.members, Current: tc.current, Marks: tc.marks, Now: tc.now, IdleAfter: idle})
			if got := demand["m"]; got != tc.want {
				t.Errorf("demand %d, want %d", got, tc.want)
			}
			if tc.want == 0 {
				if _, ok := marks["m"]; ok || len(demand) > 0 {
					t.Errorf("no demand, but demand %v and marks %v", demand, marks)
				}
				return
			}
			if got := marks["m"]; !got.Used.Equal(tc.wantMark.Used) || !got.Busy.Equal(tc.wantMark.Busy) || got.Want != tc.wantMark.Want || got.Peak != tc.wantMark.Peak {
				t.Errorf("mark %+v, want %+v", got, tc.wantMark)
			}
			if !next.Equal(tc.next) {
				t.Errorf("next change at %v, want %v", next, tc.next)
			}
		})
	}
}

func TestWantCopiesWithoutIdleUnloadAfterKeepsTheDemand(t *testing.T) {
	t0 := time.Unix(1_000_000, 0)
	demand, _, next := WantCopies(DemandInput{Models: []Model{onDemand("m", 1, 3, 0, 0)},
		Members: []Member{{Name: "n1", Held: []Held{ready("m", 1)}}}, Current: Table{"m": {"n1"}},
		Marks: Marks{"m": {Want: 1, Used: t0.Add(-24 * time.Hour)}}, Now: t0})
	if demand["m"] != 1 || !next.IsZero() {
		t.Errorf("demand %v, next %v: want 1 copy and no change by itself", demand, next)
	}
}

func TestComputeMakesRoomForADemandedModelByUnloadingIdleCopies(t *testing.T) {
	// withUse is member n with the on-demand figures use.
	withUse := func(n Member, use map[string]Use) Member { n.Use = use; return n }
	half := func(path string) Held { return Held{Path: path, Bytes: gib / 2, State: Ready} }
	for _, tc := range []struct {
		name        string
		in          Input
		want        Table
		evicted     []Eviction
		unplaceable []string
	}{
		{
			name: "the least recently used idle copy goes",
			in: Input{Models: []Model{onDemand("a", 2, 1, 0, 1), onDemand("b", 2, 1, 0, 1), onDemand("m", 2, 1, 0, 1)},
				Members: []Member{withUse(member("n1", 5, 1, ready("a", 2), ready("b", 2)), map[string]Use{"a": {LastUsed: 200}, "b": {LastUsed: 100}})},
				Current: Table{"a": {"n1"}, "b": {"n1"}}},
			want:    Table{"a": {"n1"}, "m": {"n1"}},
			evicted: []Eviction{{Path: "b", Node: "n1", For: "m"}},
		},
		{
			name: "a copy holding requests is not idle",
			in: Input{Models: []Model{onDemand("a", 2, 1, 0, 1), onDemand("b", 2, 1, 0, 1), onDemand("m", 2, 1, 0, 1)},
				Members: []Member{withUse(member("n1", 5, 1, ready("a", 2), ready("b", 2)), map[string]Use{"a": {LastUsed: 200}, "b": {LastUsed: 100, InFlight: 1}})},
				Current: Table{"a": {"n1"}, "b": {"n1"}}},
			want:    Table{"b": {"n1"}, "m": {"n1"}},
			evicted: []Eviction{{Path: "a", Node: "n1", For: "m"}},
		},
		{
			name: "as many copies as the room needs, oldest first",
			in: Input{Models: []Model{onDemand("a", 1, 1, 0, 1), onDemand("b", 1, 1, 0, 1), onDemand("c", 1, 1, 0, 1), onDemand("m", 2, 1, 0, 1)},
				Members: []Member{withUse(member("n1", 3, 0, ready("a", 1), ready("b", 1), ready("c", 1)), map[string]Use{"a": {LastUsed: 300}, "b": {LastUsed: 100}})},
				Current: Table{"a": {"n1"}, "b": {"n1"}, "c": {"n1"}}},
			// c was never used: it goes first, then b.
			want:    Table{"a": {"n1"}, "m": {"n1"}},
			evicted: []Eviction{{Path: "c", Node: "n1", For: "m"}, {Path: "b", Node: "n1", For: "m"}},
		},
		{
			name: "the node that needs the fewest unloads",
			in: Input{Models: []Model{onDemand("a", 1, 1, 0, 1), onDemand("b", 1, 1, 0, 1), onDemand("c", 2, 1, 0, 1), onDemand("m", 2, 1, 0, 1)},
				Members: []Member{
					member("n1", 2, 0, ready("a", 1), ready("b", 1)),
					member("n2", 2, 0, ready("c", 2))},
				Current: Table{"a": {"n1"}, "b": {"n1"}, "c": {"n2"}}},
			want:    Table{"a": {"n1"}, "b": {"n1"}, "m": {"n2"}},
			evicted: []Eviction{{Path: "c", Node: "n2", For: "m"}},
		},
		{
			name: "eager models, loading copies and copies kept by min_nodes stay",
			in: Input{Models: []Model{model("e", 1, 1, 1), onDemand("k", 1, 1, 1, 1), onDemand("l", 1, 1, 0, 1), onDemand("m", 1, 1, 0, 1)},
				Members: []Member{member("n1", 3, 0, ready("e", 1), ready("k", 1), loading("l", 1))},
				Current: Table{"e": {"n1"}, "k": {"n1"}, "l": {"n1"}}},
			want:        Table{"e": {"n1"}, "k": {"n1"}, "l": {"n1"}},
			unplaceable: []string{"m"},
		},
		{
			name: "nothing unloaded when all the idle copies would not make room",
			in: Input{Models: []Model{onDemand("a", 1, 1, 0, 1), onDemand("m", 3, 1, 0, 1)},
				Members: []Member{member("n1", 2, 1, ready("a", 1))},
				Current: Table{"a": {"n1"}}},
			want:        Table{"a": {"n1"}},
			unplaceable: []string{"m"},
		},
		{
			name: "a model not asked for makes no room",
			in: Input{Models: []Model{onDemand("a", 1, 1, 0, 1), onDemand("m", 1, 1, 0, 0)},
				Members: []Member{member("n1", 1, 0, ready("a", 1))},
				Current: Table{"a": {"n1"}}},
			want: Table{"a": {"n1"}},
		},
		{
			name: "a second copy of a model is unloaded down to its min_nodes",
			in: Input{Models: []Model{onDemand("a", 1, 2, 1, 2), onDemand("m", 1, 1, 0, 1)},
				Members: []Member{
					withUse(member("n1", 1, 0, ready("a", 1)), map[string]Use{"a": {LastUsed: 100}}),
					withUse(member("n2", 1, 0, ready("a", 1)), map[string]Use{"a": {LastUsed: 200}})},
				Current: Table{"a": {"n1", "n2"}}},
			want:    Table{"a": {"n2"}, "m": {"n1"}},
			evicted: []Eviction{{Path: "a", Node: "n1", For: "m"}},
		},
		{
			name: "half-GiB copies: freed bytes are the copies' own",
			in: Input{Models: []Model{onDemand("a", 0, 1, 0, 1), onDemand("m", 1, 1, 0, 1)},
				Members: []Member{member("n1", 1, 0, half("a"), Held{Path: "a", Content: "kept", Bytes: gib / 2, State: Ready})},
				Current: Table{"a": {"n1"}}},
			want:    Table{"m": {"n1"}},
			evicted: []Eviction{{Path: "a", Node: "n1", For: "m"}},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tc.in.SizeFactor = 2
			p, err := Compute(tc.in)
			if err != nil {
				t.Fatal(err)
			}
			if !p.Table.Equal(tc.want) {
				t.Errorf("table %v, want %v", p.Table, tc.want)
			}
			if !reflect.DeepEqual(p.Evicted, tc.evicted) {
				t.Errorf("evicted %+v, want %+v", p.Evicted, tc.evicted)
			}
			var un []string
			for _, s := range p.Unplaceable {
				un = append(un, s.Path)
			}
			if !reflect.DeepEqual(un, tc.unplaceable) {
				t.Errorf("unplaceable %v, want %v", un, tc.unplaceable)
			}
		})
	}
}

// steadyLoad runs the controller's loop (WantCopies, then Compute) every
// step over four nodes for one on-demand model of up to four copies,
// replicas 1: a copy listed becomes ready at the next step, and the
// requests in flight, load(i) at step i, are spread over the ready
// copies. It returns the copies listed after each step.
func steadyLoad(t *testing.T, steps int, step, idle time.Duration, load func(i int) int64) []int {
	t.Helper()
	names := []string{"n1", "n2", "n3", "n4"}
	table, held := Table{}, map[string]State{}
	var marks Marks
	now := time.Unix(1_000_000, 0)
	var copies []int
	for i := range steps {
		var ready []string
		for _, n := range names {
			switch {
			case !slices.Contains(table["m"], n):
				delete(held, n)
			case held[n] == "":
				held[n] = Loading
			default:
				held[n] = Ready
				ready = append(ready, n)
			}
		}
		members := make([]Member, 0, len(names))
		for k, n := range names {
			mem := Member{Name: n, BudgetBytes: 8 * gib, FreeBytes: 8 * gib}
			if s, ok := held[n]; ok {
				mem.Held = []Held{{Path: "m", Bytes: gib, State: s}}
			}
			switch {
			case held[n] == Ready:
				share := load(i) / int64(len(ready))
				if k < int(load(i))%len(ready) {
					share++
				}
				mem.Use = map[string]Use{"m": {InFlight: share, Replicas: 1, LastUsed: now.Unix()}}
			case len(ready) == 0 && k == 0 && load(i) > 0:
				mem.Use = map[string]Use{"m": {Waiting: int(load(i))}}
			}
			members = append(members, mem)
		}
		models := []Model{onDemand("m", 1, 4, 0, 0)}
		demand, next, _ := WantCopies(DemandInput{Models: models, Members: members, Current: table, Marks: marks, Now: now, IdleAfter: idle})
		marks, models[0].Demand = next, demand["m"]
		p, err := Compute(Input{Models: models, Members: members, Current: table, SizeFactor: 1})
		if err != nil {
			t.Fatal(err)
		}
		table = p.Table
		copies = append(copies, len(table["m"]))
		now = now.Add(step)
	}
	return copies
}

// A steady load keeps the copies it needs: they rise to the fewest that
// the load does not saturate and stay there, with no copy dropped and
// loaded again every idle_unload_after; when the load falls, the extra
// copies go, down to one.
func TestASteadyLoadKeepsItsCopiesAndAFallingOneShedsThem(t *testing.T) {
	for _, load := range []int64{1, 3, 6, 8} {
		copies := steadyLoad(t, 120, 10*time.Second, time.Minute, func(int) int64 { return load })
		want := min(copiesFor(load, 1), 4)
		for i := 1; i < len(copies); i++ {
			if copies[i] < copies[i-1] {
				t.Fatalf("steady load %d: a copy dropped at step %d: %v", load, i, copies)
			}
		}
		if got := copies[len(copies)-1]; got != want {
			t.Errorf("steady load %d: %d copies at the end, want %d: %v", load, got, want, copies)
		}
	}
	copies := steadyLoad(t, 120, 10*time.Second, time.Minute, func(i int) int64 {
		if i < 40 {
			return 6
		}
		return 1
	})
	if copies[39] != 4 || copies[len(copies)-1] != 1 {
		t.Errorf("load 6 then 1: %d copies under 6, %d at the end, want 4 then 1: %v", copies[39], copies[len(copies)-1], copies)
	}
}

// An on-demand model that went idle while its only copy sits on a
// draining node is not kept listed there, to be loaded on another node
// at the next pass: it wants no copy, so it has nothing to hand over.
func TestAnIdleOnDemandModelOnADrainingNodeIsNotHandedOver(t *testing.T) {
	t0 := time.Unix(1_000_000, 0)
	members := []Member{
		{Name: "n1", BudgetBytes: 8 * gib, FreeBytes: 7 * gib, Draining: true, Held: []Held{ready("m", 1)},
			Use: map[string]Use{"m": {Replicas: 1, LastUsed: t0.Unix() - 120}}},
		{Name: "n2", BudgetBytes: 8 * gib, FreeBytes: 8 * gib},
	}
	table := Table{"m": {"n1"}}
	marks := Marks{"m": {Want: 1, Used: t0.Add(-120 * time.Second), Busy: t0.Add(-120 * time.Second)}}
	for i := range 2 {
		models := []Model{onDemand("m", 1, 3, 0, 0)}
		demand, next, _ := WantCopies(DemandInput{Models: models, Members: members, Current: table, Marks: marks, Now: t0.Add(time.Duration(i) * time.Second), IdleAfter: time.Minute})
		marks, models[0].Demand = next, demand["m"]
		p, err := Compute(Input{Models: models, Members: members, Current: table, SizeFactor: 1})
		if err != nil {
			t.Fatal(err)
		}
		if len(p.Table["m"]) != 0 {
			t.Fatalf("pass %d: demand %v, table %v: want m placed nowhere", i, demand, p.Table)
		}
		table = p.Table
	}
}
