package placement

import (
	"math"
	"reflect"
	"strings"
	"testing"
)

const gib = 1 << 30

// member is a node with budget and free memory in GiB, holding held.
func member(name string, budget, free int64, held ...Held) Member {
	return Member{Name: name, BudgetBytes: budget * gib, FreeBytes: free * gib, Held: held}
}

// ready and loading are contents of path of size GiB.
func ready(path string, size int64) Held { return Held{Path: path, Bytes: size * gib, State: Ready} }
func loading(path string, size int64) Held {
	return Held{Path: path, Bytes: size * gib, State: Loading}
}

// model wants nodes copies of a model measured at size GiB.
func model(path string, size int64, nodes, minNodes int) Model {
	return Model{Path: path, Nodes: nodes, MinNodes: minNodes, MeasuredBytes: size * gib}
}

func TestCompute(t *testing.T) {
	for _, tc := range []struct {
		name            string
		in              Input
		want            Table
		unplaceable     []string
		underReplicated []string
	}{
		{
			name: "most free memory first, then the name",
			in: Input{Models: []Model{model("a", 1, 1, 0), model("b", 1, 2, 0)},
				Members: []Member{member("n1", 8, 4), member("n2", 8, 6), member("n3", 8, 6)}},
			// a and b tie on copies and size; a sorts first and takes n2 (ties
			// on free memory go to the name), b then takes n3 and n2.
			want: Table{"a": {"n2"}, "b": {"n2", "n3"}},
		},
		{
			name: "free memory minus what is reserved for loads",
			in: Input{Models: []Model{model("m", 3, 1, 0)},
				Members: []Member{{Name: "n1", BudgetBytes: 8 * gib, FreeBytes: 5 * gib, ReservedBytes: 3 * gib},
					{Name: "n2", BudgetBytes: 8 * gib, FreeBytes: 4 * gib, ReservedBytes: 1 * gib}}},
			want: Table{"m": {"n2"}},
		},
		{
			name: "every content a node holds counts against its budget",
			in: Input{Models: []Model{model("v", 4, 1, 0), model("m", 3, 1, 0)},
				// n1 says 8 GiB free, but holds two contents of v (3 + 3 GiB)
				// of its 8 GiB budget: 2 GiB left; n2 has 3.
				Members: []Member{member("n1", 8, 8, ready("v", 3), Held{Path: "v", Content: "old", Bytes: 3 * gib, State: Ready}), member("n2", 4, 3)},
				Current: Table{"v": {"n1"}}},
			want: Table{"v": {"n1"}, "m": {"n2"}},
		},
		{
			name: "the file size times the factor before the RSS is measured",
			in: Input{Models: []Model{{Path: "m", FileBytes: 2 * gib}},
				Members:    []Member{member("n1", 8, 5), member("n2", 8, 7)},
				SizeFactor: 3},
			want: Table{"m": {"n2"}},
		},
		{
			name: "a node that holds the model keeps it, even without free memory",
			in: Input{Models: []Model{model("m", 4, 1, 0)},
				Members: []Member{member("n1", 8, 8), member("n2", 4, 0, ready("m", 4))}},
			want: Table{"m": {"n2"}},
		},
		{
			name: "ready before loading before free memory",
			in: Input{Models: []Model{model("m", 1, 2, 0)},
				Members: []Member{member("n1", 8, 8), member("n2", 8, 1, loading("m", 1)), member("n3", 8, 0, ready("m", 1))}},
			want: Table{"m": {"n2", "n3"}},
		},
		{
			name: "a draining node takes nothing new",
			in: Input{Models: []Model{model("m", 1, 1, 0)},
				Members: []Member{{Name: "n1", BudgetBytes: 8 * gib, FreeBytes: 8 * gib, Draining: true}, member("n2", 8, 2)}},
			want: Table{"m": {"n2"}},
		},
		{
			name: "fewer than nodes but at least min_nodes: placed and reported under-replicated",
			in: Input{Models: []Model{model("m", 3, 3, 2)},
				Members: []Member{member("n1", 8, 4), member("n2", 8, 4), member("n3", 8, 2)}},
			want:            Table{"m": {"n1", "n2"}},
			underReplicated: []string{"m"},
		},
		{
			name: "fewer than min_nodes: no copy, and the memory stays for others",
			in: Input{Models: []Model{model("big", 3, 3, 3), model("small", 3, 1, 0)},
				Members: []Member{member("n1", 8, 4), member("n2", 8, 3), member("n3", 8, 2)}},
			// big goes first (same copies, bigger) and would take n1 and n2,
			// but needs 3: it takes none and small gets n1.
			want:        Table{"small": {"n1"}},
			unplaceable: []string{"big"},
		},
		{
			name: "nothing evicted to make room for a model that fits nowhere",
			in: Input{Models: []Model{model("old", 6, 1, 0), model("new", 6, 1, 0)},
				Members: []Member{member("n1", 8, 2, ready("old", 6))},
				Current: Table{"old": {"n1"}}},
			want:        Table{"old": {"n1"}},
			unplaceable: []string{"new"},
		},
		{
			name: "a model bigger than any budget",
			in: Input{Models: []Model{model("huge", 100, 1, 0)},
				Members: []Member{member("n1", 8, 8)}},
			want:        Table{},
			unplaceable: []string{"huge"},
		},
		{
			name:        "no members",
			in:          Input{Models: []Model{model("m", 1, 1, 0)}},
			want:        Table{},
			unplaceable: []string{"m"},
		},
		{
			name: "a node that joins moves nothing",
			in: Input{Models: []Model{model("a", 2, 1, 0), model("b", 2, 2, 0)},
				Members: []Member{member("n1", 8, 2, ready("a", 2), ready("b", 2)), member("n2", 8, 6, ready("b", 2)), member("n4", 64, 64)},
				Current: Table{"a": {"n1"}, "b": {"n1", "n2"}}},
			want: Table{"a": {"n1"}, "b": {"n1", "n2"}},
		},
		{
			name: "a node that joins takes the new and the under-replicated",
			in: Input{Models: []Model{model("a", 2, 2, 0), model("new", 2, 1, 0)},
				Members: []Member{member("n1", 8, 6, ready("a", 2)), member("n4", 8, 8)},
				Current: Table{"a": {"n1"}}},
			want: Table{"a": {"n1", "n4"}, "new": {"n4"}},
		},
		{
			name: "a dead node's models go to the survivors",
			in: Input{Models: []Model{model("a", 2, 1, 0), model("b", 2, 2, 0)},
				Members: []Member{member("n1", 8, 6, ready("b", 2)), member("n2", 8, 4)},
				Current: Table{"a": {"n3"}, "b": {"n1", "n3"}}},
			// a, with no copy left, goes first: to n1, which has the most
			// memory left; b's second copy then goes to n2.
			want: Table{"a": {"n1"}, "b": {"n1", "n2"}},
		},
		{
			name: "a draining node stays listed until the new copy is ready",
			in: Input{Models: []Model{model("m", 2, 1, 0)},
				Members: []Member{{Name: "n1", BudgetBytes: 8 * gib, FreeBytes: 6 * gib, Draining: true, Held: []Held{ready("m", 2)}}, member("n2", 8, 8)},
				Current: Table{"m": {"n1"}}},
			want: Table{"m": {"n1", "n2"}},
		},
		{
			name: "still loading on the new node: the draining one stays",
			in: Input{Models: []Model{model("m", 2, 1, 0)},
				Members: []Member{{Name: "n1", BudgetBytes: 8 * gib, FreeBytes: 6 * gib, Draining: true, Held: []Held{ready("m", 2)}}, member("n2", 8, 6, loading("m", 2))},
				Current: Table{"m": {"n1", "n2"}}},
			want: Table{"m": {"n1", "n2"}},
		},
		{
			name: "ready on the new node: the draining one is let go",
			in: Input{Models: []Model{model("m", 2, 1, 0)},
				Members: []Member{{Name: "n1", BudgetBytes: 8 * gib, FreeBytes: 6 * gib, Draining: true, Held: []Held{ready("m", 2)}}, member("n2", 8, 6, ready("m", 2))},
				Current: Table{"m": {"n1", "n2"}}},
			want: Table{"m": {"n2"}},
		},
		{
			name: "a draining node keeps a model that fits nowhere else, reported",
			in: Input{Models: []Model{model("m", 4, 1, 0)},
				Members: []Member{{Name: "n1", BudgetBytes: 8 * gib, FreeBytes: 4 * gib, Draining: true, Held: []Held{ready("m", 4)}}, member("n2", 8, 1)},
				Current: Table{"m": {"n1"}}},
			want:        Table{"m": {"n1"}},
			unplaceable: []string{"m"},
		},
		{
			name: "a draining node that has not loaded the model is dropped at once",
			in: Input{Models: []Model{model("m", 2, 1, 0)},
				Members: []Member{{Name: "n1", BudgetBytes: 8 * gib, FreeBytes: 6 * gib, Draining: true, Held: []Held{loading("m", 2)}}, member("n2", 8, 8)},
				Current: Table{"m": {"n1"}}},
			want: Table{"m": {"n2"}},
		},
		{
			name: "fewer nodes wanted: the ready copies stay",
			in: Input{Models: []Model{model("m", 1, 2, 0)},
				Members: []Member{member("n1", 8, 8), member("n2", 8, 7, ready("m", 1)), member("n3", 8, 7, ready("m", 1))},
				Current: Table{"m": {"n1", "n2", "n3"}}},
			want: Table{"m": {"n2", "n3"}},
		},
		{
			name: "a copy placed but not loaded yet holds its memory",
			in: Input{Models: []Model{model("a", 3, 1, 0), model("b", 3, 1, 0)},
				Members: []Member{member("n1", 8, 4), member("n2", 8, 3)},
				Current: Table{"a": {"n1"}}},
			// n1 shows 4 GiB free but a's 3 are promised: b goes to n2.
			want: Table{"a": {"n1"}, "b": {"n2"}},
		},
		{
			name: "a failed load does not count as holding the model",
			in: Input{Models: []Model{model("m", 3, 1, 0)},
				Members: []Member{member("n1", 8, 1, Held{Path: "m", State: Failed}), member("n2", 8, 4)}},
			want: Table{"m": {"n2"}},
		},
		{
			name: "the current table's unknown models and repeated nodes are dropped",
			in: Input{Models: []Model{model("m", 1, 2, 0)},
				Members: []Member{member("n1", 8, 8, ready("m", 1)), member("n2", 8, 8)},
				Current: Table{"m": {"n1", "n1"}, "gone": {"n1"}}},
			want: Table{"m": {"n1", "n2"}},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if tc.in.SizeFactor == 0 {
				tc.in.SizeFactor = 1
			}
			plan, err := Compute(tc.in)
			if err != nil {
				t.Fatal(err)
			}
			if !plan.Table.Equal(tc.want) {
				t.Errorf("table %v, want %v", plan.Table, tc.want)
			}
			if got := paths(plan.Unplaceable); !reflect.DeepEqual(got, tc.unplaceable) {
				t.Errorf("unplaceable %v, want %v", plan.Unplaceable, tc.unplaceable)
			}
			if got := paths(plan.UnderReplicated); !reflect.DeepEqual(got, tc.underReplicated) {
				t.Errorf("under-replicated %v, want %v", plan.UnderReplicated, tc.underReplicated)
			}
			checkInvariants(t, tc.in, plan)
		})
	}
}

func paths(s []Shortfall) []string {
	var out []string
	for _, f := range s {
		out = append(out, f.Path)
	}
	return out
}

func TestComputeReasons(t *testing.T) {
	plan, err := Compute(Input{SizeFactor: 1,
		Models:  []Model{model("m", 3, 3, 3), model("e", 1, 1, 0)},
		Members: []Member{member("n1", 8, 8, ready("m", 3)), {Name: "n2", BudgetBytes: 8 * gib, FreeBytes: 8 * gib, Draining: true}, member("n3", 8, 2)},
		Current: Table{"m": {"n1"}}})
	if err != nil {
		t.Fatal(err)
	}
	want := []Shortfall{{Path: "m", Want: 3, Min: 3, Placed: 1, NeedBytes: 3 * gib,
		Reason: "needs 3.0 GiB per node; of 3 members, 1 already hold a copy, 1 draining, 1 lack memory (the most left is 2.0 GiB on n3); fewer than min_nodes 3 could take it, so none did"}}
	if !reflect.DeepEqual(plan.Unplaceable, want) {
		t.Errorf("got  %+v\nwant %+v", plan.Unplaceable, want)
	}
	plan, _ = Compute(Input{SizeFactor: 1, Models: []Model{model("m", 1, 1, 0)}})
	if len(plan.Unplaceable) != 1 || plan.Unplaceable[0].Reason != "no cluster member" {
		t.Errorf("got %+v", plan.Unplaceable)
	}
}

func TestComputeRejectsBadInput(t *testing.T) {
	ok := Input{SizeFactor: 1, Models: []Model{model("m", 1, 1, 0)}, Members: []Member{member("n1", 1, 1)}}
	for _, tc := range []struct {
		name, want string
		edit       func(*Input)
	}{
		{"factor", "size factor NaN", func(in *Input) { in.SizeFactor = math.NaN() }},
		{"zero factor", "size factor 0", func(in *Input) { in.SizeFactor = 0 }},
		{"infinite factor", "size factor +Inf", func(in *Input) { in.SizeFactor = math.Inf(1) }},
		{"nameless member", "member 1 has no name", func(in *Input) { in.Members = append(in.Members, Member{}) }},
		{"twice", `member 1 ("n1"): the name is used twice`, func(in *Input) { in.Members = append(in.Members, member("n1", 1, 1)) }},
		{"negative", `member "n1": budget -1`, func(in *Input) { in.Members[0].BudgetBytes = -1 }},
		{"held path", `member "n1": held content 0 has no path`, func(in *Input) { in.Members[0].Held = []Held{{State: Ready}} }},
		{"held size", "held content 0 (m) has negative size -5", func(in *Input) { in.Members[0].Held = []Held{{Path: "m", Bytes: -5, State: Ready}} }},
		{"held state", `has state "gone"`, func(in *Input) { in.Members[0].Held = []Held{{Path: "m", State: "gone"}} }},
		{"pathless model", "model 1 has no path", func(in *Input) { in.Models = append(in.Models, Model{}) }},
		{"model twice", `model 1 ("m"): the path is listed twice`, func(in *Input) { in.Models = append(in.Models, model("m", 1, 1, 0)) }},
		{"nodes", "nodes 65 is out of range 1..64", func(in *Input) { in.Models[0].Nodes = 65 }},
		{"negative nodes", "nodes -1 is out of range", func(in *Input) { in.Models[0].Nodes = -1 }},
		{"min above nodes", "min_nodes 3 is out of range 1..2", func(in *Input) { in.Models[0].Nodes, in.Models[0].MinNodes = 2, 3 }},
		{"size", "file size -1", func(in *Input) { in.Models[0].FileBytes = -1 }},
	} {
		in := ok
		in.Members = append([]Member(nil), ok.Members...)
		in.Models = append([]Model(nil), ok.Models...)
		tc.edit(&in)
		_, err := Compute(in)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: got %v, want an error containing %q", tc.name, err, tc.want)
		}
	}
	if _, err := Compute(ok); err != nil {
		t.Errorf("the valid input: %v", err)
	}
}

func TestNeed(t *testing.T) {
	for _, tc := range []struct {
		m      Model
		factor float64
		want   int64
	}{
		{Model{FileBytes: 100}, 1.5, 150},
		{Model{FileBytes: 3}, 1.5, 5}, // rounded up
		{Model{FileBytes: 100, MeasuredBytes: 120}, 3, 120},
		{Model{FileBytes: math.MaxInt64 / 2}, 4, math.MaxInt64},
	} {
		if got := Need(tc.m, tc.factor); got != tc.want {
			t.Errorf("Need(%+v, %v) = %d, want %d", tc.m, tc.factor, got, tc.want)
		}
	}
}

func TestTableModelsOn(t *testing.T) {
	tab := Table{"b": {"n1", "n2"}, "a": {"n2"}, "c": {"n1"}}
	if got := tab.ModelsOn("n1"); !reflect.DeepEqual(got, []string{"b", "c"}) {
		t.Errorf("got %v", got)
	}
	if got := tab.ModelsOn("n9"); got != nil {
		t.Errorf("got %v", got)
	}
}

func TestFormatBytes(t *testing.T) {
	for n, want := range map[int64]string{0: "0 B", 1023: "1023 B", 1536: "1.5 KiB", 3 * gib: "3.0 GiB", math.MaxInt64: "8.0 EiB"} {
		if got := FormatBytes(n); got != want {
			t.Errorf("FormatBytes(%d) = %q, want %q", n, got, want)
		}
	}
}
