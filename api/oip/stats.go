package oip

import (
	"slices"

	"github.com/groveml/grove/actors"
	"github.com/groveml/grove/api/oip/oippb"
	"github.com/groveml/grove/routing"
)

// versionStats are the statistics of one model version.
type versionStats struct {
	mv routing.ModelVersion
	st actors.ModelStats
}

// statsOf selects what a statistics request names, for REST and gRPC
// alike: every ready model version (name ""), every ready version of name
// (version ""), or one version; it fails with unknownModel when name is
// given and nothing serves it. Counts are since the serving content
// loaded.
func statsOf(b Backend, name, version string) ([]versionStats, error) {
	var mvs []routing.ModelVersion
	switch {
	case name == "":
		for _, p := range b.ModelPaths() {
			if _, parent := b.NewestVersion(p); !parent {
				mvs = append(mvs, routing.NameModel(p))
			}
		}
	case version == "":
		mvs = routing.Versions(b.ModelPaths(), b.NewestVersion, name)
	default:
		if mv, ok := routing.Resolve(b.ModelPaths(), b.NewestVersion, name, version); ok {
			mvs = []routing.ModelVersion{mv}
		}
	}
	if name != "" && len(mvs) == 0 {
		return nil, unknownModel{name, version}
	}
	out := make([]versionStats, 0, len(mvs))
	for _, mv := range mvs {
		if st, ok := b.ModelStats(mv.Path); ok {
			out = append(out, versionStats{mv, st})
		}
	}
	return out, nil
}

// statisticsResponse is Triton's statistics of vs, for REST and gRPC
// alike. compute_input and compute_output are part of compute_infer;
// Grove has no response cache, so cache_hit and cache_miss stay zero.
func statisticsResponse(vs []versionStats) *oippb.ModelStatisticsResponse {
	out := &oippb.ModelStatisticsResponse{ModelStats: make([]*oippb.ModelStatistics, 0, len(vs))}
	for _, v := range vs {
		st := v.st
		out.ModelStats = append(out.ModelStats, &oippb.ModelStatistics{
			Name: v.mv.Name, Version: v.mv.Version,
			LastInference:  uint64(v.lastInferenceMs()),
			InferenceCount: uint64(max(st.Inferences, 0)), ExecutionCount: uint64(max(st.Executions, 0)),
			InferenceStats: &oippb.InferStatistics{
				Success:       statDuration(st.Success),
				Fail:          statDuration(st.Fail),
				Queue:         statDuration(st.Queue),
				ComputeInput:  &oippb.StatisticDuration{},
				ComputeInfer:  statDuration(st.Compute),
				ComputeOutput: &oippb.StatisticDuration{},
				CacheHit:      &oippb.StatisticDuration{},
				CacheMiss:     &oippb.StatisticDuration{},
			},
		})
	}
	return out
}

// statDuration is a count and a total in nanoseconds.
func statDuration(d actors.Duration) *oippb.StatisticDuration {
	return &oippb.StatisticDuration{Count: uint64(max(d.Count, 0)), Ns: uint64(max(int64(d.Total), 0))}
}

// lastInferenceMs is when the model last answered, in Unix milliseconds (0:
// never).
func (v versionStats) lastInferenceMs() int64 {
	if v.st.LastInference.IsZero() {
		return 0
	}
	return v.st.LastInference.UnixMilli()
}

// indexEntry is one configured model version in the repository index.
type indexEntry struct {
	Name    string `json:"name"`
	Version string `json:"version"`
	State   string `json:"state"`
	Reason  string `json:"reason,omitempty"`
}

// repositoryIndex lists every configured model version with its state
// (READY, LOADING, UNAVAILABLE) and the reason it is not ready, for REST
// and gRPC alike; onlyReady lists only the ready ones. On a cluster node
// the models this node does not hold but another has ready follow, READY
// (their requests are forwarded); a model this node holds has its state
// here. Every node lists the same models, this node's first (in its
// status's order), then the others' by path.
func repositoryIndex(b Backend, onlyReady bool) []indexEntry {
	out := []indexEntry{}
	models := b.Status().Models
	paths := b.ModelPaths()
	served := make(map[string]bool, len(paths))
	for _, p := range paths {
		served[p] = true
	}
	// A model evicting that no path serves is only kept loaded, out of
	// service (keep_previous_for): it is no configured model.
	models = slices.DeleteFunc(slices.Clone(models), func(m actors.ModelStatus) bool {
		return m.State == actors.StateEvicting && !served[m.Path]
	})
	here := make(map[string]bool, len(models))
	for _, m := range models {
		here[m.Path] = true
	}
	for _, m := range models {
		mv := routing.NameModel(m.Path)
		e := indexEntry{Name: mv.Name, Version: mv.Version, State: "UNAVAILABLE", Reason: m.LastError}
		switch m.State {
		case actors.StateReady, actors.StateEvicting, actors.StateExpiring:
			e.State, e.Reason = "READY", ""
		case actors.StateLoading:
			e.State = "LOADING"
		case actors.StateExpired:
			e.Reason = "expired by its contracts"
		}
		if onlyReady && e.State != "READY" {
			continue
		}
		out = append(out, e)
	}
	for _, p := range paths {
		if _, parent := b.NewestVersion(p); !here[p] && !parent {
			mv := routing.NameModel(p)
			out = append(out, indexEntry{Name: mv.Name, Version: mv.Version, State: "READY"})
		}
	}
	return out
}
