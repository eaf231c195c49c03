package actors

import (
	"context"
	"fmt"
	"maps"
	"math/rand/v2"
	"reflect"
	"slices"
	"strings"
	"sync/atomic"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/groveml/grove/conf/modelconfig"
	"github.com/groveml/grove/internal/reqid"
	"github.com/groveml/grove/routing"
	"github.com/groveml/grove/routing/quality"
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

// contractState is a configured contract and what Grove has observed of
// it: when each servable became valid, the rollbacks this replica decided
// or cleared (until the shared state has them), and the contract's pick
// sequence. The router owns it; only the release counters are touched
// elsewhere.
type contractState struct {
	cfg        modelconfig.Contract
	validSince map[string]time.Time
	failures   map[string]modelconfig.Failure
	cleared    map[string]time.Time // when the rollbacks cleared were decided
	seq        routing.Sequence
	// releases holds each release's user-request counters; the map is
	// fixed when the state is made.
	releases map[string]*releaseCounters
	// bandit is the state of a bandit router (nil for other routers).
	bandit *banditRouter
	// loadAsked is when the router last asked for the load of a release's
	// on-demand model that its validity waits on (plan), by release.
	loadAsked map[string]time.Time
}

// reaskLoadAfter is how long the router waits before it asks again for
// the load of a release's on-demand model its validity waits on, when the
// model was unloaded again (idle, budget) before the release became
// valid: a release that cannot become valid before its model is unloaded
// costs a load a minute, not a load per evaluation.
const reaskLoadAfter = time.Minute

// releaseCounters count one release's user requests through its contract.
// They are written by the goroutine of the call that got the answer
// (System.Score) and read by the router: latencyWindow has its own lock.
type releaseCounters struct {
	latency latencyWindow // recent latencies of answered requests
	served  atomic.Int64  // answered requests
	live    atomic.Pointer[liveCounters]
	// compare keeps a shadow release's comparisons with the answers
	// callers got; the router makes it when it first sends the release a
	// shadow copy, the shadow copies write it (it has its own lock).
	compare *compareWindows
}

// contracts maps contract ids ("org/project/n") to their state.
type contracts map[string]*contractState

// setContracts takes the configured contracts, keeping the observed
// state of contracts that stay, and records in the shared state when
// releases seen for the first time were created.
func (r *routerActor) setContracts(cfg []modelconfig.Contract, now time.Time) {
	next := make(contracts, len(cfg))
	shared := r.state.load()
	for _, c := range cfg {
		for _, sv := range c.Servables {
			if shared.Record(c.ID(), sv.ReleaseVersion).Created.IsZero() {
				r.state.setCreated(c.ID(), sv.ReleaseVersion, now)
			}
		}
		st := &contractState{cfg: c, validSince: map[string]time.Time{}, failures: map[string]modelconfig.Failure{}, cleared: map[string]time.Time{},
			releases: make(map[string]*releaseCounters, len(c.Servables))}
		for _, sv := range c.Servables {
			st.releases[sv.ReleaseVersion] = newReleaseCounters(now)
		}
		if prev := r.contracts[c.ID()]; prev != nil {
			for rv, rc := range prev.releases {
				if st.releases[rv] != nil {
					st.releases[rv] = rc
				}
			}
			if c.Router.IsBandit() && prev.bandit != nil && sameReward(prev.cfg, c) {
				// What it learned holds whatever the settings; new
				// settings apply at once.
				st.bandit = prev.bandit
				if prev.cfg.Router != c.Router || !reflect.DeepEqual(prev.cfg.Bandit, c.Bandit) {
					st.bandit.next = time.Time{}
				}
			}
			maps.Copy(st.validSince, prev.validSince)
			maps.Copy(st.failures, prev.failures)
			maps.Copy(st.cleared, prev.cleared)
			st.seq = prev.seq
			st.loadAsked = prev.loadAsked
		}
		if c.Router.IsBandit() && c.Bandit != nil && st.bandit == nil {
			st.bandit = newBanditRouter(c.ID())
		}
		next[c.ID()] = st
	}
	r.contracts = next
	// A contract that no longer has a bandit router forgets the counts
	// its router saved, as the router forgets them.
	for id := range shared.Bandits {
		if st := next[id]; (st == nil || st.bandit == nil) && r.state.writable() {
			r.state.forgetBandit(id)
		}
	}
}

// plan evaluates the contract's routing policy now, from the served models' state.
func (r *routerActor) plan(st *contractState, now time.Time) routing.Plan {
	routes := *r.routes.Load()
	shared := r.state.load()
	id := st.cfg.ID()
	state := make(map[string]routing.ServableState, len(st.cfg.Servables))
	var unloaded map[string]*demandSlot // on-demand models not loaded, by release
	var awaited map[string]bool         // on-demand models ready on no cluster node, by release
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
			ss.Comparison = st.comparison(sv.ReleaseVersion, localContent(c), now)
		} else if d := r.demandFor(sv.ModelPath); d != nil {
			// On demand and not loaded: the pick that routes to it loads it.
			ss.Ready = true
			if unloaded == nil {
				unloaded = map[string]*demandSlot{}
			}
			unloaded[sv.ReleaseVersion] = d
		} else if r.remote != nil && (r.remote.Serves(sv.ModelPath) || r.remote.Awaits(sv.ModelPath)) {
			// On another cluster node, which the router forwards to, or
			// on demand and loaded nowhere: forwarded to the node the
			// controller places it on, which loads it.
			ss.Ready = true
			if !r.remote.Serves(sv.ModelPath) {
				if awaited == nil {
					awaited = map[string]bool{}
				}
				awaited[sv.ReleaseVersion] = true
			}
			if on, ok := r.servedBy(routes, sv.ModelPath); ok {
				// Its shadow executions answered are those compared here.
				ss.LoadedAt, ss.Comparison = on.loadedAt, st.comparison(sv.ReleaseVersion, on, now)
				ss.ShadowExecutions = ss.Comparison.Executions - ss.Comparison.Errors
			}
		}
		r.gates(st, &sv, rec, routes[sv.ModelPath], &ss, now)
		if r.outcomes != nil {
			ss.Outcomes, _ = r.outcomes.Outcomes(id, sv.ReleaseVersion, judgedInShadow(&sv, ss.ValidSince), "")
		}
		state[sv.ReleaseVersion] = ss
	}
	p := routing.Evaluate(st.cfg, state, now)
	// A release kept from traffic until its on-demand model has loaded
	// (valid_after_ms, shadow executions, promote_when) would never be
	// picked, so nothing would load it: its model is loaded now, here or,
	// in a cluster, where the controller places it.
	for i, sv := range st.cfg.Servables {
		rv := sv.ReleaseVersion
		d := unloaded[rv]
		if d == nil && !awaited[rv] || !waitsForLoad(sv, p.Servables[i]) || now.Sub(st.loadAsked[rv]) < reaskLoadAfter {
			continue
		}
		switch {
		case d != nil && d.askOnce(now):
			r.ask(d.path) // a versioned entry's: its version's
		case d == nil && r.remote.Want(sv.ModelPath):
		default:
			continue
		}
		if st.loadAsked == nil {
			st.loadAsked = map[string]time.Time{}
		}
		st.loadAsked[rv] = now
	}
	if b := st.bandit; b != nil {
		if b.update(st.cfg, r.outcomes, &p, now, r.state) {
			for _, sv := range st.cfg.Servables {
				r.metrics.routerShare.WithLabelValues(id, sv.ReleaseVersion).Set(b.shares[sv.ReleaseVersion])
			}
		}
		p.FollowShares(b.shares)
	}
	r.decide(st, p, routes)
	for rv, t := range p.ValidSince {
		if t.IsZero() {
			delete(st.validSince, rv)
		} else {
			st.validSince[rv] = t
		}
		if was := shared.Record(id, rv).ValidSince; t.IsZero() != was.IsZero() {
			r.state.setValidSince(id, rv, t, was)
		}
	}
	return p
}

// ValidSince returns when release of contract became valid, as the
// contract state shared by the replicas records it (the start of the
// outcome evaluator's since_valid window); false while it is not valid.
// Safe from any goroutine.
func (s *System) ValidSince(contract, release string) (time.Time, bool) {
	t := s.state.load().Record(contract, release).ValidSince
	return t, !t.IsZero()
}

// ContractPlan returns the current routing plan of a contract, for stats.
func (s *System) ContractPlan(id string) (routing.Plan, error) {
	var p routing.Plan
	var err error
	if qerr := s.askRouter(context.Background(), func(r *routerActor) {
		st := r.contracts[id]
		if st == nil {
			err = fmt.Errorf("%w %s", ErrUnknownContract, id)
			return
		}
		p = r.plan(st, time.Now())
	}); qerr != nil {
		return routing.Plan{}, qerr
	}
	return p, err
}

// Score runs req through contract id: release picks a servable directly
// (no shadows); empty release lets the contract's router pick one, and the
// contract's shadow servables get copies. The Result's ModelPath is the
// picked servable's; the returned release names it.
func (s *System) Score(ctx context.Context, id, release string, req Request) (Result, string, error) {
	req.Contract = id
	ctx, cancel := s.clampDeadline(ctx)
	defer cancel()
	b := newBatch(ctx, []Request{req})
	b.score = &scoreCall{contract: id, release: release}
	start := time.Now()
	res, err := s.run(b)
	if err != nil {
		return Result{}, "", err
	}
	if !b.score.routed.Load() {
		return res[0], "", nil // the deadline passed before it was routed
	}
	if rc := b.score.counters; rc != nil {
		rc.record(ctx, res[0].Err, start, time.Now())
	}
	return res[0], b.reqs[0].Release, nil
}

// route picks the servable of b's contract that answers its request, and
// the shadows that get copies; it answers b itself and reports false when
// the contract cannot take the request.
func (r *routerActor) route(ctx actor.Context, b *batch) bool {
	sc, req := b.score, &b.reqs[0]
	st := r.contracts[sc.contract]
	if st == nil {
		b.fail(fmt.Errorf("%w %s", ErrUnknownContract, sc.contract))
		return false
	}
	if sc.release != "" {
		sv, ok := st.servable(sc.release)
		if !ok {
			b.fail(fmt.Errorf("%w %s in contract %s", ErrUnknownRelease, sc.release, sc.contract))
			return false
		}
		req.ModelPath, req.Release, req.Logging = sv.ModelPath, sc.release, &sv.Logging
		sc.counters = st.releases[sc.release]
		sc.routed.Store(true)
		return true
	}
	p := r.plan(st, time.Now())
	u := st.seq.Next()
	if key := st.cfg.StickyKey; key != "" {
		if v, ok := modelconfig.LookupConfig(req.Configs, key); ok {
			u = routing.StickyU(v)
		}
	}
	share, ok := p.Pick(u)
	if !ok {
		b.fail(fmt.Errorf("%w %s", ErrNoActiveServable, sc.contract))
		return false
	}
	sv, _ := st.servable(share.Release)
	req.ModelPath, req.Release, req.Logging = sv.ModelPath, share.Release, &sv.Logging
	for _, sh := range p.ShadowTargets(share.Release, rand.Float64) {
		shv, _ := st.servable(sh.Release)
		rc := st.releases[sh.Release]
		if rc.compare == nil {
			rc.compare = newCompareWindows(r.compareWindow)
		}
		req.Shadows = append(req.Shadows, ShadowTarget{ModelPath: sh.ModelPath, Release: sh.Release, Logging: &shv.Logging, windows: rc.compare})
	}
	if len(req.Shadows) > 0 && req.RequestID == "" {
		// The shadows' log events name the answer they were compared with.
		req.RequestID = reqid.New()
	}
	sc.counters = st.releases[share.Release]
	sc.routed.Store(true)
	return true
}

// comparison is what shadow release has measured against the answers
// callers got, served by content c, for the promote_when rule; zero when
// it has not been compared.
func (st *contractState) comparison(release string, c shadowContent, now time.Time) routing.Comparison {
	if rc := st.releases[release]; rc != nil && rc.compare != nil {
		return rc.compare.comparison(c.id, now)
	}
	return routing.Comparison{}
}

// servedBy is the content that answers for path: this node's, else, on a
// cluster node, the one another node's record describes (whose shadow
// copies this node compares, keyed by remoteContentID).
func (r *routerActor) servedBy(routes map[string]*content, path string) (shadowContent, bool) {
	if c := routes[path]; c != nil {
		return localContent(c), true
	}
	if r.remote == nil {
		return shadowContent{}, false
	}
	info, ok := r.remote.Model(path)
	if !ok {
		return shadowContent{}, false
	}
	return shadowContent{path: path, checksum: info.Checksum, id: remoteContentID(info.Checksum), loadedAt: info.LoadedAt}, true
}

// servable finds a servable of the contract by release version.
func (st *contractState) servable(release string) (*modelconfig.ContractServable, bool) {
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
	// low-priority shadow worker was busy (for a model served by another
	// cluster node: because its copies in flight there were at their
	// bound, while the content the cluster describes for it now served it,
	// since a contract last started shadowing it here).
	Served           int64 `json:"served"`
	ShadowExecutions int64 `json:"shadow_executions"`
	ShadowDropped    int64 `json:"shadow_dropped"`
	// Latency is the user-request latency through the contract over the
	// last one to two minutes, in milliseconds (to within 5 %).
	Latency LatencyStats `json:"latency"`
	// Metrics are its performance metrics, from the metrics API.
	Metrics map[string]float64 `json:"metrics,omitempty"`
	// Live counts its user requests since it became valid.
	Live LiveStats `json:"live"`
	// Gate is the state of its release gates, if it has any.
	Gate *GateStats `json:"gate,omitempty"`
	// Comparison, for a shadow servable, is how its answers compare with
	// those callers got for the same requests.
	Comparison *quality.ComparisonStats `json:"comparison,omitempty"`
	// Outcomes are the evaluator's figures of its predictions once their
	// outcomes are known (Options.Outcomes): of its shadow predictions
	// while it is a challenger not valid yet, else of those it served,
	// compared with the champion's (paired for a shadow, by Welch for a
	// served release, none for the champion); absent without figures.
	Outcomes *quality.OutcomeStats `json:"outcomes,omitempty"`
	// Bandit is what the contract's bandit router believes of the release
	// and the share it chose at its last update; absent for other routers.
	Bandit *BanditStats `json:"bandit,omitempty"`
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
	var out []ServableStats
	var compared []comparedStats
	var err error
	now := time.Now()
	if qerr := s.askRouter(context.Background(), func(r *routerActor) { out, compared, err = r.stats(id, now) }); qerr != nil {
		return nil, qerr
	}
	// The comparison windows are read here, not on the router: their
	// last-N window is a scan of up to shadow_compare_window executions.
	for _, c := range compared {
		out[c.i].Comparison = c.w.stats(c.content, c.loadedAt, c.tol, now)
	}
	return out, err
}

// comparedStats is a shadow servable's comparison windows, for
// ContractStats to describe in the i-th servable's stats.
type comparedStats struct {
	i        int
	w        *compareWindows
	content  int64
	loadedAt time.Time
	tol      float64
}

// stats describes each servable of contract id at now, but for the
// comparison of its shadow servables: it returns their windows.
func (r *routerActor) stats(id string, now time.Time) ([]ServableStats, []comparedStats, error) {
	cs := r.contracts[id]
	if cs == nil {
		return nil, nil, fmt.Errorf("%w %s", ErrUnknownContract, id)
	}
	var compared []comparedStats
	p := r.plan(cs, now)
	routes := *r.routes.Load()
	shared := r.state.load()
	out := make([]ServableStats, 0, len(p.Servables))
	champ := champion(p)
	for _, sv := range p.Servables {
		rec := shared.Record(id, sv.Release)
		st := ServableStats{Release: sv.Release, ModelPath: sv.ModelPath, Ready: sv.Ready, Valid: sv.Valid, Expired: sv.Expired,
			Reason: sv.Reason, Created: timePtr(rec.Created), ValidSince: timePtr(sv.ValidSince), PhaseInPct: sv.PhaseInPct,
			TrafficShare: sv.Fraction, Metrics: rec.Metrics}
		if cfg, ok := cs.servable(sv.Release); ok {
			st.Gate = gateStats(cfg, sv, rec)
			if r.outcomes != nil {
				_, st.Outcomes = r.outcomes.Outcomes(id, sv.Release, judgedInShadow(cfg, sv.ValidSince), champ)
			}
		}
		if b := cs.bandit; b != nil {
			st.Bandit = b.stats(sv.Release)
		}
		if rc := cs.releases[sv.Release]; rc != nil {
			q, n := rc.latency.quantiles(now, 0.5, 0.99)
			st.Latency = LatencyStats{Count: n, P50Ms: ms(q[0]), P99Ms: ms(q[1])}
			st.Served = rc.served.Load()
			requests, errors := rc.live.Load().figures()
			st.Live = LiveStats{Requests: requests, Errors: errors}
		}
		if c := routes[sv.ModelPath]; c != nil {
			st.LoadedAt, st.ShadowExecutions = timePtr(c.loadedAt), c.shadowed.Load()
			st.ShadowDropped = c.shadowDropped.Load()
		} else if rs := r.remoteShadow[sv.ModelPath]; rs != nil {
			st.ShadowDropped = rs.droppedOf(r.describedContent(sv.ModelPath))
		}
		if on, ok := r.servedBy(routes, sv.ModelPath); ok {
			if on.local == nil {
				// Its shadow executions answered are those compared here, as plan counts them.
				g := cs.comparison(sv.Release, on, now)
				st.LoadedAt, st.ShadowExecutions = timePtr(on.loadedAt), g.Executions-g.Errors
			}
			if w := r.comparisonWindows(cs, sv.Release); w != nil {
				compared = append(compared, comparedStats{i: len(out), w: w, content: on.id, loadedAt: on.loadedAt, tol: r.tolerance})
			}
		}
		out = append(out, st)
	}
	return out, compared, nil
}

// comparisonWindows returns the windows of how shadow release compares
// with the answers callers got; nil for a servable that is not a shadow
// and was never compared.
func (r *routerActor) comparisonWindows(cs *contractState, release string) *compareWindows {
	rc := cs.releases[release]
	sv, _ := cs.servable(release)
	if rc == nil || (rc.compare == nil && (sv == nil || sv.Shadow == nil)) {
		return nil
	}
	if rc.compare == nil {
		rc.compare = newCompareWindows(r.compareWindow)
	}
	return rc.compare
}

// Contracts lists the configured contracts, sorted by id. It fails, with
// no list, when the router cannot answer: stopped (ErrStopped), or
// panicking as it lists them (an internal error, kind Unavailable).
func (s *System) Contracts() ([]modelconfig.Contract, error) {
	var out []modelconfig.Contract
	if err := s.askRouter(context.Background(), func(r *routerActor) {
		out = make([]modelconfig.Contract, 0, len(r.contracts))
		for _, st := range r.contracts {
			out = append(out, st.cfg)
		}
	}); err != nil {
		return nil, err
	}
	slices.SortFunc(out, func(a, b modelconfig.Contract) int { return strings.Compare(a.ID(), b.ID()) })
	return out, nil
}

// ms converts d to milliseconds, rounded to the microsecond.
func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }

// expiredPaths returns the model paths that contracts have expired at now
// and that no unexpired servable uses: the models to unload.
func (r *routerActor) expiredPaths(now time.Time) map[string]bool {
	expired, needed := map[string]bool{}, map[string]bool{}
	for _, st := range r.contracts {
		for _, v := range r.plan(st, now).Servables {
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

// waitsForLoad reports whether servable sv, with status st at an
// evaluation, gets no traffic only until its model has loaded: it is not
// valid, expired or rolled back, and a validity rule waits on the model
// (valid_after_ms; min_served_events and promote_when, which need its
// shadow copies) with none that cannot hold (never_valid, or a rule on
// shadow executions without a shadow setting).
func waitsForLoad(sv modelconfig.ContractServable, st routing.Status) bool {
	if st.Valid || st.Expired || !st.RolledBack.IsZero() {
		return false
	}
	waits := false
	for _, r := range sv.Validity {
		switch r.Kind {
		case modelconfig.RuleNeverValid:
			return false
		case modelconfig.RuleValidAfterMs:
			waits = true
		case modelconfig.RuleMinServedEvents, modelconfig.RulePromoteWhen:
			if sv.Shadow == nil {
				return false
			}
			waits = true
		}
	}
	return waits
}
