// Package placement decides which cluster nodes load which models. Compute
// is a pure function, with no I/O and no clock: from the desired models,
// the cluster's members (their memory and what they hold) and the current
// placement table, it returns the next table and the models it could not
// place as asked, each with the reason.
//
// The rules, in the manner of Seldon Core v2's scheduler:
//
//   - Filters: a node takes a new copy of a model only if it is not
//     draining and the model's memory need fits in what the node has
//     left, or the node already holds the model (loading or ready).
//   - Sorters: a node that already holds the model ready, then one that
//     holds it loading (no ping-pong), then the node with the most memory
//     left, then the name (deterministic).
//   - Each model wants Nodes copies; if fewer fit, at least MinNodes, else
//     none new and the model is reported unplaceable. Copies already placed
//     are never evicted to make room for another model, with one
//     exception: an on-demand model that is asked for (Demand > 0) and
//     fits on no node is given room by unloading idle on-demand copies
//     (Evictions), least recently used first, on the node that needs the
//     fewest of them. A copy is idle when it is ready and holds no
//     request, and a model keeps at least MinNodes copies.
//   - An on-demand model (Model.OnDemand) wants max(MinNodes, Demand)
//     copies, at most Nodes: MinNodes (0 allowed) while it is idle, more
//     as its demand (Demand, from WantCopies) asks. Copies beyond that are
//     dropped, the ready ones kept. Among the nodes with the most memory
//     left, the one with the fewest loads in flight takes a new copy.
//   - Placements on live, non-draining members are kept: a node that joins
//     takes only new and under-replicated models, nothing moves because it
//     joined. A dead member's (absent from Members) placements are
//     dropped and placed again elsewhere.
//   - A draining member stays listed for a model it holds ready until every
//     other node listed for that model holds it ready, so the model keeps a
//     ready copy during the handover.
//
// The package owns no state: the cluster controller owns the inputs and
// the table it writes.
package placement

import (
	"cmp"
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"
)

// MaxNodes is the most nodes one model may be placed on.
const MaxNodes = 64

// State is the state of a model content on a node.
type State string

// The states a node reports for a content it holds.
const (
	// Loading: fetching, loading or warming up; its memory is reserved.
	Loading State = "loading"
	// Ready: serving.
	Ready State = "ready"
	// Failed: the load failed; the node does not count as holding it.
	Failed State = "failed"
)

// Held is one model content a node holds. A node may hold several
// contents of one path (versions kept under a version policy, a previous
// content kept warm for rollback); each counts for its own bytes.
type Held struct {
	// Path is the model's path in the model config.
	Path string `json:"path"`
	// Content names the content (a checksum or version); informational.
	Content string `json:"content,omitempty"`
	// Bytes is the memory the content takes: its RSS measured after the
	// load once known, else the estimate it was placed with.
	Bytes int64 `json:"bytes"`
	// State is loading, ready or failed.
	State State `json:"state"`
}

// Member is one live cluster node as placement sees it.
type Member struct {
	// Name is the node's unique name.
	Name string `json:"name"`
	// BudgetBytes is the memory the node gives models.
	BudgetBytes int64 `json:"budget_bytes"`
	// FreeBytes is the memory of the budget not in use, as the node measured it.
	FreeBytes int64 `json:"free_bytes"`
	// ReservedBytes is memory promised to contents still loading, which
	// FreeBytes does not show yet.
	ReservedBytes int64 `json:"reserved_bytes"`
	// Draining is set on a node that is stopping: it takes nothing new.
	Draining bool `json:"draining,omitempty"`
	// Held are the contents the node holds.
	Held []Held `json:"held,omitempty"`
	// Use is the node's figures for the on-demand models it holds or
	// was asked for, by path; WantCopies reads them.
	Use map[string]Use `json:"use,omitempty"`
}

// Use is one node's figures for one on-demand model.
type Use struct {
	// Waiting counts the requests on this node waiting for the model to be
	// placed: it is ready on no node (the node's demand mark).
	Waiting int `json:"waiting,omitempty"`
	// InFlight counts the requests its copy here holds (queued or running);
	// Replicas is the copy's model actors.
	InFlight int64 `json:"in_flight,omitempty"`
	Replicas int   `json:"replicas,omitempty"`
	// LastUsed is when its copy here last took a request, or went into
	// service if later, in Unix seconds (0: never).
	LastUsed int64 `json:"last_used,omitempty"`
}

// Model is one model to place.
type Model struct {
	// Path is the model's path in the model config (its identity).
	Path string
	// Nodes is on how many nodes the model should be loaded, 1 to MaxNodes (0: 1).
	Nodes int
	// MinNodes is the fewest acceptable, 1 to Nodes (0: 1). For an
	// on-demand model, the copies it keeps while idle, 0 to Nodes.
	MinNodes int
	// OnDemand marks a model loaded on demand: it wants max(MinNodes,
	// Demand) copies, at most Nodes.
	OnDemand bool
	// Demand is the copies an on-demand model's requests ask for now
	// (WantCopies); 0: none.
	Demand int
	// FileBytes is the size of the model's files.
	FileBytes int64
	// MeasuredBytes is the RSS the model took after its first load; 0: not
	// measured yet, FileBytes × Input.SizeFactor stands for it.
	MeasuredBytes int64
}

// Table maps each placed model's path to the names of the nodes that
// should hold it, sorted. A model placed nowhere has no entry.
type Table map[string][]string

// Input is what Compute decides from.
type Input struct {
	// Models are the desired models; paths are unique.
	Models []Model
	// Members are the live nodes; names are unique.
	Members []Member
	// Current is the table in force; nil for none.
	Current Table
	// SizeFactor multiplies a model's file size to estimate its memory
	// need before it was measured; finite and positive.
	SizeFactor float64
}

// Shortfall is a model placed on fewer nodes than it wants.
type Shortfall struct {
	// Path is the model's path.
	Path string `json:"path"`
	// Want and Min are the model's Nodes and MinNodes (for an on-demand
	// model, the copies its demand wants and the fewest acceptable).
	Want int `json:"want"`
	Min  int `json:"min"`
	// Placed counts the non-draining nodes the table lists for it.
	Placed int `json:"placed"`
	// NeedBytes is the memory one copy needs.
	NeedBytes int64 `json:"need_bytes"`
	// Reason says why no other node could take it.
	Reason string `json:"reason"`
}

// Plan is Compute's answer.
type Plan struct {
	// Table is the new placement table.
	Table Table `json:"table"`
	// Unplaceable are the models placed on fewer than MinNodes nodes (often
	// none), sorted by path: they got no new copy.
	Unplaceable []Shortfall `json:"unplaceable,omitempty"`
	// UnderReplicated are the models placed on at least MinNodes but fewer
	// than Nodes nodes, sorted by path.
	UnderReplicated []Shortfall `json:"under_replicated,omitempty"`
	// Evicted are the idle on-demand copies dropped from the table to
	// make room for an on-demand model asked for that fitted nowhere, in
	// the order they were chosen.
	Evicted []Eviction `json:"evicted,omitempty"`
}

// Eviction is one idle on-demand copy dropped to make room.
type Eviction struct {
	// Path is the model dropped, Node the node it is dropped from.
	Path string `json:"path"`
	Node string `json:"node"`
	// For is the model the room is for.
	For string `json:"for"`
}

// Need returns the memory one copy of m takes: its measured RSS when
// known, else its file size times factor (saturating at math.MaxInt64).
func Need(m Model, factor float64) int64 {
	if m.MeasuredBytes > 0 {
		return m.MeasuredBytes
	}
	f := float64(m.FileBytes) * factor
	if !(f < math.MaxInt64) {
		return math.MaxInt64
	}
	return int64(math.Ceil(f))
}

// Equal reports whether two tables list the same nodes for the same models.
func (t Table) Equal(o Table) bool {
	if len(t) != len(o) {
		return false
	}
	for p, ns := range t {
		if os, ok := o[p]; !ok || !slices.Equal(ns, os) {
			return false
		}
	}
	return true
}

// ModelsOn returns the paths of the models the table lists for node, sorted.
func (t Table) ModelsOn(node string) []string {
	var out []string
	for p, ns := range t {
		if slices.Contains(ns, node) {
			out = append(out, p)
		}
	}
	slices.Sort(out)
	return out
}

// nodeState is a member during one Compute.
type nodeState struct {
	*Member
	holds map[string]State // path -> best state of its contents (ready over loading)
	avail int64            // memory left for new copies; may be negative
	loads int              // contents loading and copies placed not held yet
}

// holding reports whether the node holds path loading or ready.
func (n *nodeState) holding(path string) bool {
	s := n.holds[path]
	return s == Loading || s == Ready
}

// modelState is a model during one Compute.
type modelState struct {
	Model
	need     int64
	want     int          // copies wanted: Nodes, or an on-demand model's max(MinNodes, Demand) up to it
	min      int          // the fewest acceptable when any is wanted
	active   []*nodeState // listed, not draining
	draining []*nodeState // listed, draining, holding it ready
	short    bool         // unplaceable: took nothing new
	evicted  bool         // a copy was unloaded to make room (makeRoom)
}

// listed reports whether n is listed for the model.
func (m *modelState) listed(n *nodeState) bool {
	return slices.Contains(m.active, n) || slices.Contains(m.draining, n)
}

// Compute returns the next placement plan; see the package doc for the
// rules. The result depends only on in, not on the order of its slices.
// Bad input (an empty or repeated name, a negative size, nodes out of
// range) is an error naming it.
func Compute(in Input) (Plan, error) {
	if err := in.validate(); err != nil {
		return Plan{}, err
	}
	nodes := make(map[string]*nodeState, len(in.Members))
	var order []*nodeState
	for i := range in.Members {
		m := &in.Members[i]
		n := &nodeState{Member: m, holds: map[string]State{}}
		var held int64
		for _, h := range m.Held {
			held = satAdd(held, h.Bytes)
			if s := n.holds[h.Path]; h.State == Ready || s == "" || s == Failed {
				n.holds[h.Path] = h.State
			}
			if h.State == Loading {
				n.loads++
			}
		}
		n.avail = min(m.FreeBytes-m.ReservedBytes, m.BudgetBytes-held)
		nodes[m.Name] = n
		order = append(order, n)
	}
	slices.SortFunc(order, func(a, b *nodeState) int { return strings.Compare(a.Name, b.Name) })

	models := make([]*modelState, 0, len(in.Models))
	for _, m := range in.Models {
		if m.Nodes == 0 {
			m.Nodes = 1
		}
		ms := &modelState{Model: m, need: Need(m, in.SizeFactor), want: m.Nodes, min: max(m.MinNodes, 1)}
		if m.OnDemand {
			ms.want = min(max(m.MinNodes, m.Demand), m.Nodes)
			ms.min = min(ms.min, ms.want)
		} else if m.MinNodes == 0 {
			ms.Model.MinNodes = 1
		}
		models = append(models, ms)
	}
	slices.SortFunc(models, func(a, b *modelState) int { return strings.Compare(a.Path, b.Path) })

	// Keep the current placements on live members. A copy placed but not
	// held yet is pending: its memory is spoken for.
	for _, m := range models {
		seen := map[string]bool{}
		for _, name := range in.Current[m.Path] {
			n := nodes[name]
			if n == nil || seen[name] {
				continue
			}
			seen[name] = true
			switch {
			case !n.Draining:
				m.active = append(m.active, n)
				if !n.holding(m.Path) {
					n.avail = satSub(n.avail, m.need)
					n.loads++
				}
			case n.holds[m.Path] == Ready:
				m.draining = append(m.draining, n)
			}
		}
		if len(m.active) > m.want { // fewer nodes wanted: keep the ready ones
			slices.SortStableFunc(m.active, func(a, b *nodeState) int { return compareKeep(m.Path, a, b) })
			for _, n := range m.active[m.want:] {
				if !n.holding(m.Path) {
					n.avail = satAdd(n.avail, m.need)
					n.loads--
				}
			}
			m.active = m.active[:m.want]
		}
	}

	// Place new copies: first every model up to MinNodes, then up to Nodes;
	// models with the fewest copies first, then the biggest.
	slices.SortStableFunc(models, func(a, b *modelState) int {
		if c := len(a.active) - len(b.active); c != 0 {
			return c
		}
		if a.need != b.need {
			if a.need > b.need {
				return -1
			}
			return 1
		}
		return strings.Compare(a.Path, b.Path)
	})
	for round := range 2 {
		for _, m := range models {
			if m.short {
				continue
			}
			target := m.min
			if round == 1 {
				target = m.want
			}
			var added []*nodeState
			for len(m.active) < target {
				n := bestCandidate(m, order)
				if n == nil {
					break
				}
				m.active = append(m.active, n)
				added = append(added, n)
				if !n.holding(m.Path) {
					n.avail = satSub(n.avail, m.need)
					n.loads++
				}
			}
			if round == 0 && len(m.active) < m.min {
				for _, n := range added { // all or nothing: give the memory back
					if !n.holding(m.Path) {
						n.avail = satAdd(n.avail, m.need)
						n.loads--
					}
				}
				m.active = m.active[:len(m.active)-len(added)]
				m.short = true
			}
		}
	}

	// An on-demand model asked for that got no copy, one being enough: room
	// is made for it by unloading idle on-demand copies (models in the
	// rounds' order).
	var evicted []Eviction
	for _, m := range models {
		if m.OnDemand && m.Demand > 0 && m.min <= 1 && len(m.active) == 0 && !m.evicted {
			evicted = append(evicted, makeRoom(m, models, order)...)
		}
	}

	plan := Plan{Table: Table{}, Evicted: evicted}
	for _, m := range models {
		handedOver := len(m.active) > 0
		for _, n := range m.active {
			handedOver = handedOver && n.holds[m.Path] == Ready
		}
		var names []string
		for _, n := range m.active {
			names = append(names, n.Name)
		}
		if !handedOver && m.want > 0 { // an idle on-demand model has nothing to hand over
			for _, n := range m.draining {
				names = append(names, n.Name)
			}
		}
		if len(names) > 0 {
			slices.Sort(names)
			plan.Table[m.Path] = names
		}
		if len(m.active) < m.want {
			s := Shortfall{Path: m.Path, Want: m.want, Min: m.min, Placed: len(m.active), NeedBytes: m.need, Reason: reason(m, order)}
			if len(m.active) < m.min {
				plan.Unplaceable = append(plan.Unplaceable, s)
			} else {
				plan.UnderReplicated = append(plan.UnderReplicated, s)
			}
		}
	}
	byPath := func(a, b Shortfall) int { return strings.Compare(a.Path, b.Path) }
	slices.SortFunc(plan.Unplaceable, byPath)
	slices.SortFunc(plan.UnderReplicated, byPath)
	return plan, nil
}

// makeRoom places one copy of on-demand model m, which fits on no node,
// on the node where unloading the fewest idle on-demand copies frees
// enough memory (then the most memory left, then the name), and returns
// the copies it unloads there; none when no node can be freed enough.
func makeRoom(m *modelState, models []*modelState, nodes []*nodeState) []Eviction {
	var best *nodeState
	var bestVictims []*modelState
	var bestAvail int64
	for _, n := range nodes {
		if n.Draining || m.listed(n) {
			continue
		}
		avail := n.avail
		var victims []*modelState
		for _, v := range idleCopies(n, m, models) {
			if avail >= m.need {
				break
			}
			victims = append(victims, v)
			avail = satAdd(avail, heldBytes(n, v.Path))
		}
		if avail < m.need {
			continue
		}
		if best == nil || len(victims) < len(bestVictims) || len(victims) == len(bestVictims) && avail > bestAvail {
			best, bestVictims, bestAvail = n, victims, avail
		}
	}
	if best == nil {
		return nil
	}
	var out []Eviction
	for _, v := range bestVictims {
		// It wants no more copies than it has left: it is not short.
		v.active = slices.DeleteFunc(v.active, func(x *nodeState) bool { return x == best })
		v.want, v.evicted = len(v.active), true
		best.avail = satAdd(best.avail, heldBytes(best, v.Path))
		out = append(out, Eviction{Path: v.Path, Node: best.Name, For: m.Path})
	}
	m.active = append(m.active, best)
	best.avail = satSub(best.avail, m.need)
	best.loads++
	m.short = false
	return out
}

// idleCopies are the on-demand models other than m whose copy on n may be
// unloaded to make room: listed on n (not draining) and held there ready,
// with no request in it or waiting for it on n, and more copies than the
// model keeps while idle (MinNodes); least recently used first (never
// used before any), then by path.
func idleCopies(n *nodeState, m *modelState, models []*modelState) []*modelState {
	var out []*modelState
	for _, v := range models {
		if v == m || !v.OnDemand || n.holds[v.Path] != Ready || !slices.Contains(v.active, n) || len(v.active) <= v.Model.MinNodes {
			continue
		}
		if u := n.Use[v.Path]; u.InFlight > 0 || u.Waiting > 0 {
			continue
		}
		out = append(out, v)
	}
	slices.SortFunc(out, func(a, b *modelState) int {
		if c := cmp.Compare(n.Use[a.Path].LastUsed, n.Use[b.Path].LastUsed); c != 0 {
			return c
		}
		return strings.Compare(a.Path, b.Path)
	})
	return out
}

// heldBytes is the memory of the contents of path n holds ready.
func heldBytes(n *nodeState, path string) int64 {
	var b int64
	for _, h := range n.Held {
		if h.Path == path && h.State == Ready {
			b = satAdd(b, h.Bytes)
		}
	}
	return b
}

// compareKeep orders the nodes listed for path by which to keep when
// fewer are wanted: ready first, then loading, then by name.
func compareKeep(path string, a, b *nodeState) int {
	if c := rank(b.holds[path]) - rank(a.holds[path]); c != 0 {
		return c
	}
	return strings.Compare(a.Name, b.Name)
}

// rank orders states by how much of a load is done.
func rank(s State) int {
	switch s {
	case Ready:
		return 2
	case Loading:
		return 1
	}
	return 0
}

// bestCandidate returns the node to take one more copy of m, or nil: the
// filters, then the sorters of the package doc.
func bestCandidate(m *modelState, nodes []*nodeState) *nodeState {
	var best *nodeState
	for _, n := range nodes {
		if n.Draining || m.listed(n) || !n.holding(m.Path) && m.need > n.avail {
			continue
		}
		if best == nil || better(m.Path, n, best) {
			best = n
		}
	}
	return best
}

// better reports whether a sorts before b as a home for path.
func better(path string, a, b *nodeState) bool {
	if ra, rb := rank(a.holds[path]), rank(b.holds[path]); ra != rb {
		return ra > rb
	}
	if a.avail != b.avail {
		return a.avail > b.avail
	}
	if a.loads != b.loads {
		return a.loads < b.loads
	}
	return a.Name < b.Name
}

// reason says why no more nodes could take m.
func reason(m *modelState, nodes []*nodeState) string {
	if len(nodes) == 0 {
		return "no cluster member"
	}
	var listed, draining, small int
	var roomiest *nodeState
	for _, n := range nodes {
		switch {
		case m.listed(n) && !n.Draining:
			listed++
		case n.Draining:
			draining++
		default:
			small++
			if roomiest == nil || n.avail > roomiest.avail {
				roomiest = n
			}
		}
	}
	var parts []string
	if listed > 0 {
		parts = append(parts, fmt.Sprintf("%d already hold a copy", listed))
	}
	if draining > 0 {
		parts = append(parts, fmt.Sprintf("%d draining", draining))
	}
	if small > 0 {
		parts = append(parts, fmt.Sprintf("%d lack memory (the most left is %s on %s)", small, FormatBytes(max(roomiest.avail, 0)), roomiest.Name))
	}
	msg := fmt.Sprintf("needs %s per node; of %d members, %s", FormatBytes(m.need), len(nodes), strings.Join(parts, ", "))
	if m.short && m.min > 1 {
		msg += fmt.Sprintf("; fewer than min_nodes %d could take it, so none did", m.min)
	}
	return msg
}

// FormatBytes writes n bytes in the largest binary unit that keeps it at
// least 1, with one decimal ("1.5 GiB", "512 B").
func FormatBytes(n int64) string {
	const unit = 1024
	if n < unit {
		return fmt.Sprintf("%d B", n)
	}
	f, i := float64(n), 0
	for f >= unit && i < 6 {
		f /= unit
		i++
	}
	return fmt.Sprintf("%.1f %ciB", f, "KMGTPE"[i-1])
}

// Validate checks one member record: a name, no negative size, known
// states. The error names the member and what is wrong.
func (m Member) Validate() error {
	var errs []error
	at := fmt.Sprintf("member %q", m.Name)
	if m.Name == "" {
		errs = append(errs, errors.New("a member has no name"))
	}
	if m.BudgetBytes < 0 || m.FreeBytes < 0 || m.ReservedBytes < 0 {
		errs = append(errs, fmt.Errorf("%s: budget %d, free %d and reserved %d bytes must not be negative", at, m.BudgetBytes, m.FreeBytes, m.ReservedBytes))
	}
	for j, h := range m.Held {
		switch {
		case h.Path == "":
			errs = append(errs, fmt.Errorf("%s: held content %d has no path", at, j))
		case h.Bytes < 0:
			errs = append(errs, fmt.Errorf("%s: held content %d (%s) has negative size %d", at, j, h.Path, h.Bytes))
		case h.State != Loading && h.State != Ready && h.State != Failed:
			errs = append(errs, fmt.Errorf("%s: held content %d (%s) has state %q, not loading, ready or failed", at, j, h.Path, h.State))
		}
	}
	return errors.Join(errs...)
}

// validate checks the input; see Compute.
func (in Input) validate() error {
	var errs []error
	bad := func(format string, args ...any) { errs = append(errs, fmt.Errorf(format, args...)) }
	if !(in.SizeFactor > 0) || math.IsInf(in.SizeFactor, 0) {
		bad("size factor %v is not a finite positive number", in.SizeFactor)
	}
	names := map[string]bool{}
	for i, m := range in.Members {
		if m.Name != "" && names[m.Name] {
			bad("member %d (%q): the name is used twice", i, m.Name)
		}
		names[m.Name] = true
		if m.Name == "" {
			bad("member %d has no name", i)
		} else if err := m.Validate(); err != nil {
			bad("%w", err)
		}
	}
	paths := map[string]bool{}
	for i, m := range in.Models {
		at := fmt.Sprintf("model %d (%q)", i, m.Path)
		switch {
		case m.Path == "":
			bad("model %d has no path", i)
		case paths[m.Path]:
			bad("%s: the path is listed twice", at)
		}
		paths[m.Path] = true
		nodes, minNodes := max(m.Nodes, 1), max(m.MinNodes, 1)
		switch {
		case m.Nodes < 0 || m.Nodes > MaxNodes:
			bad("%s: nodes %d is out of range 1..%d", at, m.Nodes, MaxNodes)
		case m.MinNodes < 0 || minNodes > nodes:
			bad("%s: min_nodes %d is out of range 1..%d (its nodes)", at, m.MinNodes, nodes)
		}
		if m.Demand < 0 {
			bad("%s: demand %d must not be negative", at, m.Demand)
		}
		if m.FileBytes < 0 || m.MeasuredBytes < 0 {
			bad("%s: file size %d and measured size %d must not be negative", at, m.FileBytes, m.MeasuredBytes)
		}
	}
	if len(errs) > 0 {
		return fmt.Errorf("placement input: %w", errors.Join(errs...))
	}
	return nil
}

// satAdd adds non-overflowing: the result saturates at the int64 limits.
func satAdd(a, b int64) int64 {
	s := a + b
	switch {
	case a > 0 && b > 0 && s < 0:
		return math.MaxInt64
	case a < 0 && b < 0 && s >= 0:
		return math.MinInt64
	}
	return s
}

// satSub subtracts, saturating at the int64 limits.
func satSub(a, b int64) int64 {
	if b == math.MinInt64 {
		return satAdd(satAdd(a, math.MaxInt64), 1)
	}
	return satAdd(a, -b)
}
