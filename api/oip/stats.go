package oip

import (
	"github.com/groveml/grove/actors"
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
			mvs = append(mvs, routing.NameModel(p))
		}
	case version == "":
		mvs = routing.Versions(b.ModelPaths(), name)
	default:
		if mv, ok := routing.Resolve(b.ModelPaths(), name, version); ok {
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
// and gRPC alike; onlyReady lists only the ready ones.
func repositoryIndex(b Backend, onlyReady bool) []indexEntry {
	out := []indexEntry{}
	for _, m := range b.Status().Models {
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
	return out
}
