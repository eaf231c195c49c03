package actors

import (
	"time"

	"github.com/groveml/grove/conf/modelconfig"
)

// State is where a configured model is in its lifecycle.
type State string

// The states a configured model can be in.
const (
	// StateLoading: no content serves yet; the first one is being fetched, loaded or warmed up.
	StateLoading State = "loading"
	// StateReady: a content serves requests (an update may be loading beside it).
	StateReady State = "ready"
	// StateFailed: no content serves; the last load failed and is retried
	// on the next poll (once a stuck warm-up of the same content returns:
	// ModelStatus.StuckWarmUps).
	StateFailed State = "failed"
	// StateEvicting: removed from the config; still served until its grace period ends.
	StateEvicting State = "evicting"
	// StateExpiring: every contract servable using it is expired; still
	// loaded (a contract can fall back to it) until its grace period ends.
	StateExpiring State = "expiring"
	// StateExpired: unloaded because every contract servable using it is
	// expired; loaded again if one stops being expired.
	StateExpired State = "expired"
	// StateUnloaded: an on-demand model with no content: listed and
	// routable, loaded when a request for it arrives (and where the memory
	// budget's unloading takes it back to).
	StateUnloaded State = "unloaded"
)

// Status is a snapshot of the config source and every configured model.
type Status struct {
	Ready  bool          `json:"ready"`
	Config ConfigStatus  `json:"config"`
	Models []ModelStatus `json:"models"`
	// Versioned are the versioned entries of the config in force; their
	// versions are in Models.
	Versioned []VersionedStatus `json:"versioned,omitempty"`
	// Memory is what the loaded models take of the memory budget, and
	// the on-demand models loaded and not; nil on a server with neither
	// a budget nor on-demand models.
	Memory *MemoryStatus `json:"memory,omitempty"`
}

// MemoryStatus describes the memory budget and the on-demand models
// (docs/density.md).
type MemoryStatus struct {
	// BudgetBytes is memory_budget_bytes (0: unbounded); UsedBytes what
	// the loaded contents and the load running are counted at (each its
	// measured growth, at least its estimate: docs/density.md).
	BudgetBytes int64 `json:"budget_bytes"`
	UsedBytes   int64 `json:"used_bytes"`
	// LoadPolicy is the server's load_policy.
	LoadPolicy string `json:"load_policy"`
	// Loaded and Unloaded count the on-demand models with a content
	// serving and without (unloaded, loading or failed).
	Loaded   int `json:"loaded"`
	Unloaded int `json:"unloaded"`
	// UnloadOrder lists the loaded on-demand models the budget may
	// unload, least valuable first: the order idle ones go in.
	UnloadOrder []string `json:"unload_order"`
	// RuntimeStartBytes is, by runtime, the memory growth of its first
	// load in this process: mostly the runtime's own start-up, part of
	// the base rather than of that model, which is counted at its
	// estimate instead.
	RuntimeStartBytes map[string]int64 `json:"runtime_start_bytes,omitempty"`
}

// VersionedStatus describes a versioned model entry (one with a
// version_policy): the versions found under its directory and the one
// its own path serves.
type VersionedStatus struct {
	Path   string                    `json:"model_path"`
	Policy modelconfig.VersionPolicy `json:"version_policy"`
	// Found are the version directories of the last listing that worked.
	Found []int64 `json:"versions_found"`
	// ServingVersion is the version the entry's path serves, and
	// ServingPath its path: the newest ready version (0 and empty: none).
	ServingVersion int64  `json:"serving_version,omitempty"`
	ServingPath    string `json:"serving_path,omitempty"`
	// ListError is why the last listing of the directory failed, if it did.
	ListError   string     `json:"list_error,omitempty"`
	ListErrorAt *time.Time `json:"list_error_at,omitempty"`
}

// ConfigStatus describes the model config file and its polling.
type ConfigStatus struct {
	Source       string     `json:"source"`
	PollInterval string     `json:"poll_interval"`
	LastPoll     *time.Time `json:"last_poll,omitempty"`
	LastSuccess  *time.Time `json:"last_success,omitempty"`
	LastError    string     `json:"last_error,omitempty"`
	LastErrorAt  *time.Time `json:"last_error_at,omitempty"`
	// Models is the number of entries in the config in force.
	Models int `json:"models"`
}

// ModelStatus describes one configured model path.
type ModelStatus struct {
	Path  string `json:"model_path"`
	State State  `json:"state"`
	// Checksum, Runtime, LoadedAt and SizeBytes describe the serving content.
	Checksum  string     `json:"checksum,omitempty"`
	Runtime   string     `json:"runtime,omitempty"`
	LoadedAt  *time.Time `json:"loaded_at,omitempty"`
	SizeBytes int64      `json:"size_bytes,omitempty"`
	// MemoryBytes is the growth of the process's resident memory over the
	// serving content's load (Linux), what a cluster places it by; 0 when
	// not measured (another load ran at the same time, or not Linux).
	MemoryBytes int64 `json:"memory_bytes,omitempty"`
	// Registered is set for a model loaded through the registration API
	// (B&A RegisterModel) rather than listed in the config.
	Registered bool `json:"registered,omitempty"`
	// VersionOf is, for a version of a versioned entry, the entry's path;
	// Version is its version number.
	VersionOf string `json:"version_of,omitempty"`
	Version   int64  `json:"version,omitempty"`
	// ConfiguredChecksum is the checksum the config asks for, if any.
	ConfiguredChecksum string `json:"configured_checksum,omitempty"`
	// Updating is set while new content for this path loads beside the serving one.
	Updating bool `json:"updating,omitempty"`
	// LastError is the last load, checksum or warm-up failure for this path.
	LastError   string     `json:"last_error,omitempty"`
	LastErrorAt *time.Time `json:"last_error_at,omitempty"`
	// GraceRemainingMs is the time left before an evicting or expiring model is unloaded.
	GraceRemainingMs *int64 `json:"grace_remaining_ms,omitempty"`
	// Replicas is the number of model actors serving the content.
	Replicas int   `json:"replicas,omitempty"`
	Served   int64 `json:"served"`
	Crashes  int64 `json:"crashes"`
	// Retiring counts replaced contents still held for their grace period or in-flight requests.
	Retiring int `json:"retiring,omitempty"`
	// StuckWarmUps counts the loads of this path whose warm-up timed out
	// (warmup_timeout) while a forward call still runs: each keeps its
	// content loaded, and counted against the memory budget, until the
	// call returns, and the same content is not loaded again meanwhile
	// with the same warm-up request, serving options and signature.
	StuckWarmUps int `json:"stuck_warmups,omitempty"`
	// KeepPreviousForMs is the keep time in force for the model (its
	// entry's keep_previous_for_ms, else the server's keep_previous_for);
	// 0: off.
	KeepPreviousForMs int64 `json:"keep_previous_for_ms"`
	// Kept is the previous content held loaded and warm out of service
	// for an instant rollback, nil if none.
	Kept *KeptStatus `json:"kept,omitempty"`
	// OnDemand is set for a model loaded on demand (its load, or the
	// server's load_policy); LastLoadMs is how long its last load took,
	// fetch to warm-up, less its wait for its turn under the budget (0:
	// never loaded); RetryAt, after a failed load,
	// when the next request may load it again.
	OnDemand   bool       `json:"on_demand,omitempty"`
	LastLoadMs int64      `json:"last_load_ms,omitempty"`
	RetryAt    *time.Time `json:"retry_at,omitempty"`
	// InFlight counts the requests the serving content holds (queued or
	// running); LastUsedAt is when an on-demand model's content last took
	// a request (nil: never). A cluster's controller adds and drops
	// on-demand copies by them.
	InFlight   int64      `json:"in_flight,omitempty"`
	LastUsedAt *time.Time `json:"last_used_at,omitempty"`

	evictAt time.Time
	active  *content
	// keptID and keptMeta are the kept content's id and the entry it was
	// loaded with; keptReleased when the last kept one's time ended.
	keptID       int64
	keptMeta     modelconfig.Model
	keptReleased time.Time
}

// KeptStatus describes a model's kept previous content and what it costs.
type KeptStatus struct {
	Checksum string `json:"checksum"`
	Runtime  string `json:"runtime"`
	// SizeBytes is the size of its files (in the local cache), the memory
	// its weights hold give or take the runtime's own overhead.
	SizeBytes int64 `json:"size_bytes"`
	// MemoryBytes is the memory its load took (ModelStatus.MemoryBytes).
	MemoryBytes int64 `json:"memory_bytes,omitempty"`
	// Replicas is the number of model actors kept with it.
	Replicas int `json:"replicas"`
	// Since is when it left service, Until when it is released.
	Since time.Time `json:"kept_since"`
	Until time.Time `json:"kept_until"`
}

// finish fills the fields that change without the supervisor's involvement.
func (m *ModelStatus) finish(now time.Time) {
	if m.active != nil {
		m.Served = m.active.served.Load()
		m.Crashes = m.active.crashes.Load()
		m.InFlight = m.active.inflight.Load()
		if ns := m.active.lastUsed.Load(); ns != 0 {
			m.LastUsedAt = timePtr(time.Unix(0, ns).UTC())
		}
	}
	if m.State == StateEvicting || m.State == StateExpiring {
		left := max(m.evictAt.Sub(now).Milliseconds(), 0)
		m.GraceRemainingMs = &left
	}
}

func timePtr(t time.Time) *time.Time {
	if t.IsZero() {
		return nil
	}
	return &t
}

// versionedStatus describes the versioned entries of the config in force.
func (s *supervisorActor) versionedStatus() []VersionedStatus {
	if len(s.versioned) == 0 {
		return nil
	}
	paths := s.plan.Paths()
	serving, reload := servingVersions(paths), s.reloadVersions(paths)
	out := make([]VersionedStatus, 0, len(s.versioned))
	for _, v := range s.versioned {
		vs := VersionedStatus{Path: v.entry.Path, Policy: *v.entry.VersionPolicy, Found: append([]int64{}, v.found...),
			ListError: v.listErr, ListErrorAt: timePtr(v.listErrAt)}
		// While its newest version loads on demand for it, the path
		// serves no loaded version, as while none is loaded.
		if p := serving[v.entry.Path]; p != nil && reload[v.entry.Path] == nil {
			vs.ServingVersion, vs.ServingPath = p.Desired.Version, p.Name
		}
		out = append(out, vs)
	}
	return out
}
