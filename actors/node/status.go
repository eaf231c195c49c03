package node

import (
	"encoding/json"
	"maps"
	"net/http"
	"slices"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/groveml/grove/cluster/forward"
	"github.com/groveml/grove/cluster/placement"
)

// Status is the document of GET /v1/cluster: this node, the controller
// and its term, the members with their records, the placement table and
// the models short of nodes.
type Status struct {
	Node            string            `json:"node"`
	Controller      string            `json:"controller"`
	Term            int64             `json:"term"`
	Members         []MemberStatus    `json:"members"`
	Placement       placement.Table   `json:"placement"`
	Unplaceable     []ShortfallStatus `json:"unplaceable"`
	UnderReplicated []ShortfallStatus `json:"under_replicated"`
}

// ShortfallStatus is a model placed on fewer nodes than it wants
// (placement.Shortfall, named by model_path like every Grove document).
type ShortfallStatus struct {
	Path      string `json:"model_path"`
	Want      int    `json:"want"`
	Min       int    `json:"min"`
	Placed    int    `json:"placed"`
	NeedBytes int64  `json:"need_bytes"`
	Reason    string `json:"reason"`
}

// shortfalls converts the table's shortfalls for the status document.
func shortfalls(in []placement.Shortfall) []ShortfallStatus {
	out := make([]ShortfallStatus, 0, len(in))
	for _, s := range in {
		out = append(out, ShortfallStatus{Path: s.Path, Want: s.Want, Min: s.Min, Placed: s.Placed, NeedBytes: s.NeedBytes, Reason: s.Reason})
	}
	return out
}

// MemberStatus is one member's record.
type MemberStatus struct {
	Name          string       `json:"name"`
	Advertise     string       `json:"advertise"`
	BudgetBytes   int64        `json:"budget_bytes"`
	FreeBytes     int64        `json:"free_bytes"`
	ReservedBytes int64        `json:"reserved_bytes"`
	Draining      bool         `json:"draining"`
	Models        []HeldStatus `json:"models"`
	// ModelInfo describes each path the member has ready, as every
	// other node answers its metadata (docs/cluster.md).
	ModelInfo map[string]forward.ModelInfo `json:"model_info,omitempty"`
}

// HeldStatus is one content a member holds.
type HeldStatus struct {
	Path    string          `json:"model_path"`
	Content string          `json:"content,omitempty"`
	State   placement.State `json:"state"`
	Bytes   int64           `json:"bytes"`
}

// Status returns the cluster as this node sees it.
func (a *Agent) Status() Status {
	p := a.table.Load()
	st := Status{Node: a.cfg.Name, Controller: *a.leader.Load(), Term: p.Term, Members: []MemberStatus{},
		Placement: p.Table, Unplaceable: shortfalls(p.Unplaceable), UnderReplicated: shortfalls(p.UnderReplicated)}
	if st.Placement == nil {
		st.Placement = placement.Table{}
	}
	for _, m := range a.members.Load().List {
		ms := MemberStatus{Name: m.Name, Advertise: m.Advertise, BudgetBytes: m.BudgetBytes, FreeBytes: m.FreeBytes,
			ReservedBytes: m.ReservedBytes, Draining: m.Draining, Models: []HeldStatus{}, ModelInfo: m.Models}
		for _, h := range m.Held {
			ms.Models = append(ms.Models, HeldStatus{Path: h.Path, Content: h.Content, State: h.State, Bytes: h.Bytes})
		}
		st.Members = append(st.Members, ms)
	}
	return st
}

// ModelPlacement is where one model is placed and where it is ready, for
// the "cluster" section of /v1/status.
type ModelPlacement struct {
	Path     string   `json:"model_path"`
	PlacedOn []string `json:"placed_on"`
	ReadyOn  []string `json:"ready_on"`
}

// Section is the "cluster" section of /v1/status: this node, the
// controller, and each model's placement and readiness.
type Section struct {
	Node       string           `json:"node"`
	Controller string           `json:"controller"`
	Draining   bool             `json:"draining"`
	Models     []ModelPlacement `json:"models"`
}

// StatusSection returns the "cluster" section of /v1/status.
func (a *Agent) StatusSection() Section {
	p := a.table.Load()
	ready := map[string][]string{}
	for _, m := range a.members.Load().List {
		for _, h := range m.Held {
			if h.State == placement.Ready && !slices.Contains(ready[h.Path], m.Name) {
				ready[h.Path] = append(ready[h.Path], m.Name)
			}
		}
	}
	paths := map[string]bool{}
	for path := range p.Table {
		paths[path] = true
	}
	for path := range ready {
		paths[path] = true
	}
	sec := Section{Node: a.cfg.Name, Controller: *a.leader.Load(), Draining: a.draining.Load(), Models: []ModelPlacement{}}
	for _, path := range slices.Sorted(maps.Keys(paths)) {
		mp := ModelPlacement{Path: path, PlacedOn: append([]string{}, p.Table[path]...), ReadyOn: ready[path]}
		if mp.ReadyOn == nil {
			mp.ReadyOn = []string{}
		}
		slices.Sort(mp.ReadyOn)
		sec.Models = append(sec.Models, mp)
	}
	return sec
}

// Handler serves GET /v1/cluster for a (nil: no cluster, 404 saying so).
func Handler(a *Agent) http.HandlerFunc {
	return func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		if a == nil {
			w.WriteHeader(http.StatusNotFound)
			_ = json.NewEncoder(w).Encode(map[string]string{"error": "this server is not a cluster node: cluster mode is off (set cluster.etcd_endpoints)"})
			return
		}
		_ = json.NewEncoder(w).Encode(a.Status())
	}
}

// collector exports the cluster metrics.
type collector struct{ a *Agent }

var (
	membersDesc     = prometheus.NewDesc("grove_cluster_members", "Live members of the cluster, as this node sees them.", nil, nil)
	controllerDesc  = prometheus.NewDesc("grove_cluster_is_controller", "1 when this node is the cluster's placement controller, else 0.", nil, nil)
	unplaceableDesc = prometheus.NewDesc("grove_cluster_unplaceable_models", "Models of the placement table in force placed on fewer nodes than their min_nodes (no node has the memory).", nil, nil)
	memoryFreeDesc  = prometheus.NewDesc("grove_cluster_memory_free_bytes", "Memory of this node's budget (memory_budget_bytes) not taken by the models it holds ready, at most what the machine or container has available, as its member record says.", nil, nil)
	collectorDescs  = []*prometheus.Desc{membersDesc, controllerDesc, unplaceableDesc, memoryFreeDesc}
)

func (c *collector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range collectorDescs {
		ch <- d
	}
}

func (c *collector) Collect(ch chan<- prometheus.Metric) {
	a := c.a
	members := a.members.Load().List
	ch <- prometheus.MustNewConstMetric(membersDesc, prometheus.GaugeValue, float64(len(members)))
	is := 0.0
	if *a.leader.Load() == a.cfg.Name {
		is = 1
	}
	ch <- prometheus.MustNewConstMetric(controllerDesc, prometheus.GaugeValue, is)
	ch <- prometheus.MustNewConstMetric(unplaceableDesc, prometheus.GaugeValue, float64(len(a.table.Load().Unplaceable)))
	free := float64(a.cfg.BudgetBytes)
	for _, m := range members {
		if m.Name == a.cfg.Name {
			free = float64(m.FreeBytes)
		}
	}
	ch <- prometheus.MustNewConstMetric(memoryFreeDesc, prometheus.GaugeValue, free)
}
