package actors

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/groveml/grove/conf"
	"github.com/groveml/grove/routing"
	"github.com/groveml/grove/servables"
)

// Contract errors, for the API layer to map to its error bodies.
var (
	// ErrUnknownContract means no contract with that id is configured.
	ErrUnknownContract = servables.NewError(servables.NotFound, "unknown contract")
	// ErrUnknownRelease means the contract has no servable with that release version.
	ErrUnknownRelease = servables.NewError(servables.NotFound, "unknown release")
	// ErrNoActiveServable means no servable of the contract is valid and ready.
	ErrNoActiveServable = servables.NewError(servables.Unavailable, "no active servables for contract")
)

// contractState is a configured contract and what Grove has observed of it:
// when each servable became valid, and the contract's pick sequence.
type contractState struct {
	cfg        conf.Contract
	mu         sync.Mutex
	validSince map[string]time.Time
	seq        routing.Sequence
	// releases holds each release's user-request counters; the map is
	// fixed when the state is made.
	releases map[string]*releaseCounters
}

// releaseCounters count one release's user requests through its contract.
type releaseCounters struct {
	latency latencyWindow // recent latencies of answered requests
	served  atomic.Int64  // answered requests
}

// contracts maps contract ids ("org/project/n") to their state.
type contracts map[string]*contractState

// setContracts publishes the configured contracts, keeping the observed
// state of contracts that stay, and records in the shared state when
// releases seen for the first time were created.
func (s *System) setContracts(cfg []conf.Contract, now time.Time) {
	old := *s.contracts.Load()
	next := make(contracts, len(cfg))
	shared := s.state.load()
	for _, c := range cfg {
		for _, sv := range c.Servables {
			if shared.Record(c.ID(), sv.ReleaseVersion).Created.IsZero() {
				s.state.setCreated(c.ID(), sv.ReleaseVersion, now)
			}
		}
		st := &contractState{cfg: c, validSince: map[string]time.Time{}, releases: make(map[string]*releaseCounters, len(c.Servables))}
		for _, sv := range c.Servables {
			st.releases[sv.ReleaseVersion] = &releaseCounters{latency: latencyWindow{start: now}}
		}
		if prev := old[c.ID()]; prev != nil {
			for rv, rc := range prev.releases {
				if st.releases[rv] != nil {
					st.releases[rv] = rc
				}
			}
			prev.mu.Lock()
			for k, v := range prev.validSince {
				st.validSince[k] = v
			}
			st.seq = prev.seq
			prev.mu.Unlock()
		}
		next[c.ID()] = st
	}
	s.contracts.Store(&next)
}

// plan evaluates the contract's routing policy now, from the served models' state.
func (s *System) plan(st *contractState, now time.Time) routing.Plan {
	routes := *s.routes.Load()
	shared := s.state.load()
	id := st.cfg.ID()
	state := make(map[string]routing.ServableState, len(st.cfg.Servables))
	for _, sv := range st.cfg.Servables {
		// The shared stamp wins: every replica then phases in and expires
		// alike, and a restart keeps a release's age.
		rec := shared.Record(id, sv.ReleaseVersion)
		ss := routing.ServableState{ValidSince: rec.ValidSince, Metrics: rec.Metrics}
		if ss.ValidSince.IsZero() {
			ss.ValidSince = st.validSince[sv.ReleaseVersion]
		}
		if c := routes[sv.ModelPath]; c != nil {
			ss.Ready, ss.LoadedAt, ss.ShadowExecutions = true, c.loadedAt, c.shadowed.Load()
		}
		state[sv.ReleaseVersion] = ss
	}
	p := routing.Evaluate(st.cfg, state, now)
	for rv, t := range p.ValidSince {
		if t.IsZero() {
			delete(st.validSince, rv)
		} else {
			st.validSince[rv] = t
		}
		if was := shared.Record(id, rv).ValidSince; t.IsZero() != was.IsZero() {
			s.state.setValidSince(id, rv, t, was)
		}
	}
	return p
}

// ContractPlan returns the current routing plan of a contract, for stats.
func (s *System) ContractPlan(id string) (routing.Plan, error) {
	st := (*s.contracts.Load())[id]
	if st == nil {
		return routing.Plan{}, fmt.Errorf("%w %s", ErrUnknownContract, id)
	}
	st.mu.Lock()
	defer st.mu.Unlock()
	return s.plan(st, time.Now()), nil
}

// Score runs req through contract id: release picks a servable directly
// (no shadows); empty release lets the contract's router pick one, and the
// contract's shadow servables get copies. The Result's ModelPath is the
// picked servable's; the returned release names it.
func (s *System) Score(ctx context.Context, id, release string, req Request) (Result, string, error) {
	st := (*s.contracts.Load())[id]
	if st == nil {
		return Result{}, "", fmt.Errorf("%w %s", ErrUnknownContract, id)
	}
	req.Contract = id
	if release != "" {
		sv, ok := st.servable(release)
		if !ok {
			return Result{}, "", fmt.Errorf("%w %s in contract %s", ErrUnknownRelease, release, id)
		}
		req.ModelPath, req.Release, req.Logging = sv.ModelPath, release, &sv.Logging
	} else {
		st.mu.Lock()
		p := s.plan(st, time.Now())
		u := st.seq.Next()
		if key := st.cfg.StickyKey; key != "" {
			if v, ok := req.Configs[key]; ok {
				u = routing.StickyU(v)
			}
		}
		share, ok := p.Pick(u)
		st.mu.Unlock()
		if !ok {
			return Result{}, "", fmt.Errorf("%w %s", ErrNoActiveServable, id)
		}
		sv, _ := st.servable(share.Release)
		req.ModelPath, req.Release, req.Logging = sv.ModelPath, share.Release, &sv.Logging
		for _, sh := range p.ShadowTargets(share.Release, rand.Float64) {
			shv, _ := st.servable(sh.Release)
			req.Shadows = append(req.Shadows, ShadowTarget{ModelPath: sh.ModelPath, Release: sh.Release, Logging: &shv.Logging})
		}
	}
	start := time.Now()
	res, err := s.Infer(ctx, []Request{req})
	if err != nil {
		return Result{}, "", err
	}
	if res[0].Err == nil {
		now := time.Now()
		rc := st.releases[req.Release]
		rc.latency.observe(now.Sub(start), now)
		rc.served.Add(1)
	}
	return res[0], req.Release, nil
}

// servable finds a servable of the contract by release version.
func (st *contractState) servable(release string) (*conf.ContractServable, bool) {
	for i := range st.cfg.Servables {
		if st.cfg.Servables[i].ReleaseVersion == release {
			return &st.cfg.Servables[i], true
		}
	}
	return nil, false
}

// ServableStats describes one servable of a contract, for the stats API.
type ServableStats struct {
	Release   string `json:"release_version"`
	ModelPath string `json:"model_path"`
	Ready     bool   `json:"ready"`
	Valid     bool   `json:"valid"`
	Expired   bool   `json:"expired"`
	Reason    string `json:"reason,omitempty"`
	// Created is when the release was first configured.
	Created    *time.Time `json:"created,omitempty"`
	LoadedAt   *time.Time `json:"loaded_at,omitempty"`
	ValidSince *time.Time `json:"valid_since,omitempty"`
	PhaseInPct float64    `json:"phase_in_pct"`
	// TrafficShare is the fraction of user requests the router sends it now.
	TrafficShare float64 `json:"traffic_share"`
	// Served counts the user requests it answered through this contract
	// (routed or scored directly); ShadowExecutions the shadow copies its
	// model content ran and answered;
	// ShadowDropped those dropped because its model was overloaded or the
	// low-priority shadow worker was busy.
	Served           int64 `json:"served"`
	ShadowExecutions int64 `json:"shadow_executions"`
	ShadowDropped    int64 `json:"shadow_dropped"`
	// Latency is the user-request latency through the contract over the
	// last one to two minutes, in milliseconds (to within 5 %).
	Latency LatencyStats `json:"latency"`
	// Metrics are its performance metrics, from the metrics API.
	Metrics map[string]float64 `json:"metrics,omitempty"`
}

// LatencyStats are latency quantiles over a recent window.
type LatencyStats struct {
	// Count is how many requests the window holds.
	Count uint64 `json:"count"`
	// P50Ms and P99Ms are the median and 99th percentile, in milliseconds.
	P50Ms float64 `json:"p50_ms"`
	P99Ms float64 `json:"p99_ms"`
}

// ContractStats evaluates contract id now and describes each servable.
func (s *System) ContractStats(id string) ([]ServableStats, error) {
	p, err := s.ContractPlan(id)
	if err != nil {
		return nil, err
	}
	cs := (*s.contracts.Load())[id]
	routes := *s.routes.Load()
	shared := s.state.load()
	now := time.Now()
	out := make([]ServableStats, 0, len(p.Servables))
	for _, sv := range p.Servables {
		rec := shared.Record(id, sv.Release)
		st := ServableStats{Release: sv.Release, ModelPath: sv.ModelPath, Ready: sv.Ready, Valid: sv.Valid, Expired: sv.Expired,
			Reason: sv.Reason, Created: timePtr(rec.Created), ValidSince: timePtr(sv.ValidSince), PhaseInPct: sv.PhaseInPct,
			TrafficShare: sv.Fraction, Metrics: rec.Metrics}
		if rc := cs.release(sv.Release); rc != nil {
			q, n := rc.latency.quantiles(now, 0.5, 0.99)
			st.Latency = LatencyStats{Count: n, P50Ms: ms(q[0]), P99Ms: ms(q[1])}
			st.Served = rc.served.Load()
		}
		if c := routes[sv.ModelPath]; c != nil {
			st.LoadedAt, st.ShadowExecutions = timePtr(c.loadedAt), c.shadowed.Load()
			st.ShadowDropped = c.shadowDropped.Load()
		}
		out = append(out, st)
	}
	return out, nil
}

// Contracts lists the configured contracts, sorted by id.
func (s *System) Contracts() []conf.Contract {
	cs := *s.contracts.Load()
	out := make([]conf.Contract, 0, len(cs))
	for _, st := range cs {
		out = append(out, st.cfg)
	}
	slices.SortFunc(out, func(a, b conf.Contract) int { return strings.Compare(a.ID(), b.ID()) })
	return out
}

// ms converts d to milliseconds, rounded to the microsecond.
func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }

// release returns the counters of release rv, nil if none (or st is nil).
func (st *contractState) release(rv string) *releaseCounters {
	if st == nil {
		return nil
	}
	return st.releases[rv]
}

// expiredPaths returns the model paths that contracts have expired at now
// and that no unexpired servable uses: the models to unload.
func (s *System) expiredPaths(now time.Time) map[string]bool {
	expired, needed := map[string]bool{}, map[string]bool{}
	for _, st := range *s.contracts.Load() {
		st.mu.Lock()
		p := s.plan(st, now)
		st.mu.Unlock()
		for _, v := range p.Servables {
			if v.Expired {
				expired[v.ModelPath] = true
			} else {
				needed[v.ModelPath] = true
			}
		}
	}
	for path := range needed {
		delete(expired, path)
	}
	return expired
}
