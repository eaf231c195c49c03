package actors

import (
	"context"
	"slices"
	"sync/atomic"
	"time"

	"github.com/groveml/grove/conf/modelconfig"
	"github.com/groveml/grove/routing"
	"github.com/groveml/grove/servables"
)

// This file holds the router's side of the release gates (package
// routing decides): each release's live counters, the rollbacks in
// force, and the decisions' recording, logging and counting.

// liveCounters count a release's user requests since it became valid
// (routing.Live): a new set replaces them when its ValidSince stamp
// changes. Score adds to them; only the router replaces them.
type liveCounters struct {
	since    time.Time // the stamp they count from (zero: not valid)
	requests atomic.Int64
	errors   atomic.Int64
	// Under a bandit router, whose gates watch a release as long as it
	// serves, the counts are windowed (banditLiveWindow): from is when
	// this set began counting, and prev is the set it replaced, whose
	// counts are judged with its own (nil: none).
	from time.Time
	prev *liveCounters
	// latency holds the answered requests' latencies since the stamp (of
	// the last one to two minutes), for max_p99_ms: the stats' window
	// (releaseCounters.latency) may still hold those of content rolled
	// back. A bandit's rotated sets share it (rotate).
	latency *latencyWindow
}

// record counts a user request routed to the release that ended with
// err after starting at start: answered requests feed the latency window
// and the served count; every request counts in the live counters except
// those that failed through the caller's fault (see servableFault).
func (rc *releaseCounters) record(ctx context.Context, err error, start, now time.Time) {
	l := rc.live.Load()
	switch {
	case err == nil:
		rc.latency.observe(now.Sub(start), now)
		l.latency.observe(now.Sub(start), now)
		rc.served.Add(1)
	case servableFault(ctx, err):
		l.errors.Add(1)
	default:
		return
	}
	l.requests.Add(1)
}

// servableFault reports whether a user request that failed with err, for
// a caller whose context is ctx, failed through the servable's fault:
// execution errors, crashes, overload, outputs it cannot return, a model
// that cannot take requests, and deadlines the model set
// (default_timeout_ms, queue_timeout_ms: a deadline counts only when the
// caller set none, since with one Grove cannot tell whose it was). Not
// the caller's invalid input, cancellation or deadline.
func servableFault(ctx context.Context, err error) bool {
	switch servables.KindOf(err) {
	case servables.Execution, servables.Crashed, servables.Overloaded, servables.OutputUnsupported, servables.Unavailable:
		return true
	case servables.DeadlineExceeded:
		_, callers := ctx.Deadline()
		return !callers
	}
	return false
}

// liveSince returns the release's live counters counting from the stamp
// since, starting new ones if they count from another.
func (rc *releaseCounters) liveSince(since time.Time) *liveCounters {
	l := rc.live.Load()
	if !l.since.Equal(since) {
		lw := newLatencyWindow(since)
		l = &liveCounters{since: since, latency: &lw, from: since}
		rc.live.Store(l)
	}
	return l
}

// banditLiveWindow is how long a set of live counters counts under a
// bandit router before a new set takes over: the gates then judge the
// requests of the last one to two windows, so that a release that turns
// bad after a long clean run is judged on its recent requests, not on
// its whole life.
const banditLiveWindow = 10 * time.Minute

// rotate has a new set of counters take over from l, keeping l as its
// prev, when l has counted for banditLiveWindow at now, and returns the
// set in force; when l began two windows ago or more (no evaluation
// meanwhile), the new set keeps no prev: l's counts are older than the
// two windows judged. The latency window, which keeps only its last one
// to two minutes, is shared.
func (rc *releaseCounters) rotate(l *liveCounters, now time.Time) *liveCounters {
	age := now.Sub(l.from)
	if age < banditLiveWindow {
		return l
	}
	next := &liveCounters{since: l.since, latency: l.latency, from: now}
	if age < 2*banditLiveWindow {
		next.prev = l
	}
	l.prev = nil // only the last window before counts
	rc.live.Store(next)
	return next
}

// figures returns the requests and errors l judges: its own and its
// prev's.
func (l *liveCounters) figures() (requests, errors int64) {
	requests, errors = l.requests.Load(), l.errors.Load()
	if p := l.prev; p != nil {
		requests, errors = requests+p.requests.Load(), errors+p.errors.Load()
	}
	return requests, errors
}

// newReleaseCounters returns the counters of a release first seen at now.
func newReleaseCounters(now time.Time) *releaseCounters {
	rc := &releaseCounters{latency: newLatencyWindow(now)}
	lw := newLatencyWindow(now)
	rc.live.Store(&liveCounters{latency: &lw})
	return rc
}

// gates fills in what the release gates read of release sv, whose shared
// record is rec and whose model content is c (nil if none is loaded): its
// live traffic since its stamp ss.ValidSince, and the rollback in force.
// A rollback holds while the release serves the content it judged (or
// none): once the release serves other content, the rollback is cleared
// here and in the shared state.
func (r *routerActor) gates(st *contractState, sv *modelconfig.ContractServable, rec modelconfig.ServableRecord, c *content, ss *routing.ServableState, now time.Time) {
	rv := sv.ReleaseVersion
	f := rec.RolledBack
	if !f.IsZero() && f.At.Equal(st.cleared[rv]) {
		f = modelconfig.Failure{} // cleared here; the shared state does not know yet
	}
	if own, ok := st.failures[rv]; ok {
		if !f.IsZero() && f.Checksum == own.Checksum {
			// The shared state has it: from now on it rules, so that a
			// rollback deleted from it is cleared here as on every replica.
			delete(st.failures, rv)
		} else {
			f = own
		}
	}
	if !f.IsZero() && c != nil && c.checksum != f.Checksum {
		r.log.Info("release rollback cleared: the release serves new model content", "contract", st.cfg.ID(), "release", rv,
			"model", sv.ModelPath, "failed_checksum", f.Checksum, "checksum", c.checksum, "rolled_back_at", f.At)
		delete(st.failures, rv)
		st.cleared[rv] = f.At
		r.state.clearRolledBack(st.cfg.ID(), rv, f)
		f = modelconfig.Failure{}
	}
	if !f.IsZero() {
		ss.RolledBack = routing.Rollback{At: f.At, Reason: f.Reason}
	}
	rc := st.releases[rv]
	if rc == nil {
		return
	}
	l := rc.liveSince(ss.ValidSince)
	if st.cfg.Router.IsBandit() && !ss.ValidSince.IsZero() {
		l = rc.rotate(l, now)
	}
	requests, errors := l.figures()
	ss.Live = routing.Live{Requests: requests, Errors: errors}
	if rw := sv.RollbackWhen; rw != nil && rw.MaxP99Ms != nil && !ss.ValidSince.IsZero() && routing.WatchesLive(st.cfg, *sv, ss.ValidSince, now) {
		// Only while the gate watches: the quantile costs a scan of the window.
		q, _ := l.latency.quantiles(now, 0.99)
		ss.Live.P99 = q[0]
	}
}

// decide records the gates' decisions of plan p in the contract's state
// and the shared state, logs them and counts them; routes is the routing
// table p was made from.
func (r *routerActor) decide(st *contractState, p routing.Plan, routes table) {
	id := st.cfg.ID()
	for _, d := range p.Decisions {
		sv, _ := st.servable(d.Release)
		switch d.Kind {
		case routing.DecisionPromoted:
			r.state.setPromoted(id, d.Release, d.At)
			r.log.Info("release promoted", "contract", id, "release", d.Release, "model", sv.ModelPath, "reason", d.Reason)
		case routing.DecisionRolledBack:
			f := modelconfig.Failure{At: d.At, Reason: d.Reason}
			if c := routes[sv.ModelPath]; c != nil {
				f.Checksum = c.checksum
			}
			st.failures[d.Release] = f
			r.state.setRolledBack(id, d.Release, f)
			r.log.Warn("release rolled back", "contract", id, "release", d.Release, "model", sv.ModelPath, "checksum", f.Checksum, "reason", d.Reason)
		}
		r.metrics.decisions.WithLabelValues(id, d.Release, string(d.Kind)).Inc()
	}
}

// setPromoted asks for release rv of contract id to be recorded as
// promoted at t, unless it was before.
func (s *sharedState) setPromoted(id, rv string, t time.Time) {
	s.ask("promoted "+id+" "+rv, func(st *modelconfig.ContractState) {
		st.Edit(id, rv, func(r *modelconfig.ServableRecord) {
			if r.Promoted.IsZero() {
				r.Promoted = t
			}
		})
	})
}

// setRolledBack asks for release rv of contract id to be recorded as
// rolled back, unless another replica recorded it first for the same
// content. A promotion recorded before is undone with it: promoted, if
// ever again, is when promote_when promotes the release anew.
func (s *sharedState) setRolledBack(id, rv string, f modelconfig.Failure) {
	s.ask("rolled back "+id+" "+rv, func(st *modelconfig.ContractState) {
		st.Edit(id, rv, func(r *modelconfig.ServableRecord) {
			if r.RolledBack.IsZero() || r.RolledBack.Checksum != f.Checksum {
				r.RolledBack, r.Promoted = f, time.Time{}
			}
		})
	})
}

// clearRolledBack asks for the rollback f of release rv of contract id to
// be cleared, if it is still the one recorded.
func (s *sharedState) clearRolledBack(id, rv string, f modelconfig.Failure) {
	s.ask("clear rollback "+id+" "+rv, func(st *modelconfig.ContractState) {
		st.Edit(id, rv, func(r *modelconfig.ServableRecord) {
			if r.RolledBack.At.Equal(f.At) && r.RolledBack.Checksum == f.Checksum {
				r.RolledBack = modelconfig.Failure{}
			}
		})
	})
}

// GateStats is the state of a servable's release gates, for the stats API.
type GateStats struct {
	// State is waiting, promoted, watching, passed or rolled_back (see
	// routing.GateState); Detail says what promote_when misses, what
	// rollback_when sees, or why the release was rolled back.
	State  string `json:"state"`
	Detail string `json:"detail,omitempty"`
	// PromotedAt is when promote_when promoted it.
	PromotedAt *time.Time `json:"promoted_at,omitempty"`
	// RolledBackAt is when rollback_when rolled it back, RollbackReason why.
	RolledBackAt   *time.Time `json:"rolled_back_at,omitempty"`
	RollbackReason string     `json:"rollback_reason,omitempty"`
}

// LiveStats are a release's user requests since it became valid (what
// rollback_when judges).
type LiveStats struct {
	// Requests counts the user requests routed to it, answered or failed
	// through its own fault; Errors those that failed.
	Requests int64 `json:"requests"`
	Errors   int64 `json:"errors"`
}

// gateStats describes the gates of servable sv, whose evaluation is v and
// whose shared record is rec; nil if it has none.
func gateStats(sv *modelconfig.ContractServable, v routing.Status, rec modelconfig.ServableRecord) *GateStats {
	if v.Gate == routing.GateNone {
		return nil
	}
	g := &GateStats{State: string(v.Gate), Detail: v.GateDetail, PromotedAt: timePtr(rec.Promoted)}
	if g.PromotedAt == nil && !v.ValidSince.IsZero() && slices.ContainsFunc(sv.Validity, func(r modelconfig.ValidityRule) bool { return r.Kind == modelconfig.RulePromoteWhen }) {
		g.PromotedAt = timePtr(v.ValidSince) // promoted here; the shared state has it within a second
	}
	if !v.RolledBack.IsZero() {
		g.RolledBackAt, g.RollbackReason = timePtr(v.RolledBack.At), v.RolledBack.Reason
	}
	return g
}
