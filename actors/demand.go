package actors

import (
	"cmp"
	"errors"
	"fmt"
	"maps"
	"math"
	"slices"
	"sync"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/groveml/grove/actors/lifecycle"
	"github.com/groveml/grove/servables"
)

// On-demand models (docs/density.md). An on-demand model with no content
// serving has a demand slot, published by the supervisor in the demand
// table beside the routing table. A request that finds no content but a
// slot parks on it (toModel) and, if no load was asked for yet, asks the
// supervisor for one (demandLoad); every request parked meanwhile shares
// that load. Once the content serves, the supervisor opens the slot and
// takes each parked request to it; when the load fails, it answers them
// with the load's error, and later requests with it too until the
// backoff is over. A parked request whose deadline passes first is
// answered "model is loading" (LoadingError, Unavailable, with a
// Retry-After) by whoever ends it (System.runUnlogged, PredictAsync, or
// the model's default_timeout_ms timer here, or, for a shadow copy
// another node forwarded, its start-by's).

// LoadingError is the answer to a request whose deadline ended while its
// on-demand model was loading: a retry after RetryAfter should find it
// loaded. Its kind is Unavailable (503, gRPC UNAVAILABLE).
type LoadingError struct {
	Path       string
	RetryAfter time.Duration
}

// Error says the model is loading and when to retry.
func (e *LoadingError) Error() string {
	return fmt.Sprintf("model %s is loading; retry after %d s", e.Path, retryAfterSeconds(e.RetryAfter))
}

// Unwrap makes its kind Unavailable.
func (e *LoadingError) Unwrap() error { return servables.ErrUnavailable }

// RetryIn is e.RetryAfter (the forward server sends it to the calling node).
func (e *LoadingError) RetryIn() time.Duration { return e.RetryAfter }

// RetryAfter reports, for an answer that says its model is loading (a
// LoadingError, or another node's answer that carries its estimate: a
// forward.RemoteError with a RetryAfter) or another error that says when
// to retry (a RetryIn above 0: a cluster node rejoining after its session
// was lost), the whole seconds after which a retry should succeed, at
// least 1, for a Retry-After header; false for any other error.
func RetryAfter(err error) (int, bool) {
	if le, ok := errors.AsType[*LoadingError](err); ok {
		return retryAfterSeconds(le.RetryAfter), true
	}
	if h, ok := errors.AsType[interface {
		error
		RetryIn() time.Duration
	}](err); ok && h.RetryIn() > 0 {
		return retryAfterSeconds(h.RetryIn()), true
	}
	return 0, false
}

func retryAfterSeconds(d time.Duration) int {
	return max(int(math.Ceil(d.Seconds())), 1)
}

// demandTable maps each on-demand path with no content serving to its
// slot. It is replaced, never changed, by the supervisor.
type demandTable map[string]*demandSlot

// demandLoad asks the supervisor to load an on-demand path a request waits for.
type demandLoad struct{ path string }

// parkedItem is item i of b, parked on a slot at at with what toModel
// had for it (ans, the answer's listener for shadow copies).
type parkedItem struct {
	b     *batch
	i     int
	ans   *championAnswer
	timer *time.Timer
	at    time.Time
}

// demandSlot is where requests for one on-demand path wait for its load.
// Its fields are guarded by mu; the supervisor writes serving, the
// failure and the expected load time, requests park and ask.
type demandSlot struct {
	path string
	mu   sync.Mutex
	// serving is set while a content serves the path, and gone once the
	// path is no longer on demand (the slot is then in no published
	// table): a request that still reads it looks the routing and demand
	// tables up again.
	serving, gone bool
	// asked is set once a parked request asked the supervisor for a
	// load, until that load ends.
	asked  bool
	parked []parkedItem
	// err is the last load's failure, answered at once until retryAt.
	err     error
	retryAt time.Time
	// held is answered at once while the path's load is held back (a
	// warm-up of its content stuck past warmup_timeout: holdDemand).
	held error
	// loadStart is when the load being waited for started (zero: none
	// yet); expect how long the path's last load took (0: unknown).
	loadStart time.Time
	expect    time.Duration
	// timeout is the model's default_timeout_ms (0: none): a parked
	// request with no earlier deadline is answered then.
	timeout time.Duration

	// closedAs is what the last close set, while no take has followed
	// it: the supervisor's own (only it closes and takes a slot), read
	// without mu, so that publishDemand's close of a slot that is
	// closed already with the same values takes no lock.
	closedAs struct {
		valid           bool
		timeout, expect time.Duration
	}
}

// parkResult is what park did with a request.
type parkResult uint8

const (
	// parked: the request waits on the slot.
	parked parkResult = iota
	// lookAgain: a content serves the path now; look the routing table up again.
	lookAgain
	// answered: the request was answered (the last load's failure).
	answered
)

// park parks item i of b on the slot, unless a content serves the path
// (lookAgain) or its last load failed less than a backoff ago (answered
// with that failure). ask is set when the caller must ask the
// supervisor for the load (the first request since the last one ended).
// at is when the item first parked (a resumed item parked again), zero if
// it did not: its default timeout runs from then. A forwarded shadow copy
// with a start-by waits until then at most.
func (d *demandSlot) park(b *batch, i int, ans *championAnswer, w *ways, now, at time.Time) (r parkResult, ask bool) {
	d.mu.Lock()
	defer d.mu.Unlock()
	switch {
	case d.serving || d.gone:
		return lookAgain, false
	case d.held != nil || d.err != nil && now.Before(d.retryAt):
		if b.claim(i) {
			req := &b.reqs[i]
			err := cmp.Or(d.held, d.err)
			b.results[i].Err = err
			w.metrics.observe(req.API, req.ModelPath, err, 0)
			b.finish()
		}
		ans.answer(nil, true, 0)
		return answered, false
	}
	if !b.park(i) {
		ans.answer(nil, true, 0)
		return answered, false // answered meanwhile: its deadline passed
	}
	w.metrics.demandMisses.Inc()
	if at.IsZero() {
		at = now
	}
	it := parkedItem{b: b, i: i, ans: ans, at: at}
	// end is when the item is answered "model is loading" if still parked
	// (zero: at its deadline): a forwarded shadow copy's start-by, which
	// takes the place of default_timeout_ms as it does in sendPredict,
	// else the default timeout when it ends first.
	end := b.startBy
	if dl, ok := b.ctx.Deadline(); end.IsZero() && d.timeout > 0 && (!ok || at.Add(d.timeout).Before(dl)) {
		end = at.Add(d.timeout)
	}
	if !end.IsZero() {
		it.timer = time.AfterFunc(end.Sub(now), func() { b.expireParked(i, d, w) })
	}
	d.parked = append(d.parked, it)
	ask = !d.asked
	d.asked = true
	return parked, ask
}

// loadingError is the answer of a request whose deadline ends at now
// while the path loads.
func (d *demandSlot) loadingError(now time.Time) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	left := d.expect
	if !d.loadStart.IsZero() {
		left -= now.Sub(d.loadStart)
	}
	return &LoadingError{Path: d.path, RetryAfter: max(left, time.Second)}
}

// close marks the slot as not serving (its path has no content now): requests park on it again.
func (d *demandSlot) close(timeout, expect time.Duration) {
	if c := &d.closedAs; c.valid && c.timeout == timeout && c.expect == expect {
		return
	}
	d.mu.Lock()
	d.serving, d.timeout, d.expect = false, timeout, expect
	d.mu.Unlock()
	d.closedAs.valid, d.closedAs.timeout, d.closedAs.expect = true, timeout, expect
}

// loading records that the load requests wait for started at at.
func (d *demandSlot) loading(at time.Time) {
	d.mu.Lock()
	d.loadStart = at
	d.mu.Unlock()
}

// take ends the wait: serving tells whether a content now serves the
// path, and gone that the path is no longer on demand (the supervisor
// drops the slot); it returns the requests parked, each still
// unanswered.
func (d *demandSlot) take(serving, gone bool) []parkedItem {
	d.closedAs.valid = false
	d.mu.Lock()
	defer d.mu.Unlock()
	d.serving, d.gone = serving, gone
	d.asked = false
	d.loadStart = time.Time{}
	if serving {
		d.err, d.retryAt = nil, time.Time{}
	}
	out := d.parked
	d.parked = nil
	for _, it := range out {
		if it.timer != nil {
			it.timer.Stop()
		}
	}
	return out
}

// askOnce reports whether the caller is to ask the supervisor for the
// slot's load now, and records the ask: no content serves the path, no
// load was asked since the last one ended, and the last failure's backoff
// is over. The router asks so for a contract's release whose validity
// waits on its model's load (waitsForLoad).
func (d *demandSlot) askOnce(now time.Time) bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.serving || d.asked || d.held != nil || d.err != nil && now.Before(d.retryAt) {
		return false
	}
	d.asked = true
	return true
}

// fail ends the wait with the load's failure err, which requests get at
// once until retryAt; it returns the requests parked.
func (d *demandSlot) fail(err error, retryAt time.Time) []parkedItem {
	out := d.take(false, false)
	d.mu.Lock()
	d.err, d.retryAt = err, retryAt
	d.mu.Unlock()
	return out
}

// hold makes the slot answer err at once while its path's load is held
// back (nil: no longer), and returns the requests parked: no load will
// end their wait.
func (d *demandSlot) hold(err error) []parkedItem {
	d.mu.Lock()
	d.held = err
	d.mu.Unlock()
	if err == nil {
		return nil
	}
	return d.take(false, false)
}

// resume takes the parked items to the content now serving their path
// (toModel, with send), or answers them with err when err is not nil.
func (w *ways) resume(send func(*actor.PID, any), items []parkedItem, err error) {
	for _, it := range items {
		if !it.b.unpark(it.i) {
			it.ans.answer(nil, true, 0)
			continue // answered at its deadline
		}
		e := err // this item's answer, when it fails
		if e == nil {
			switch w.take(send, it.b, it.i, it.ans, it.at) {
			case sentHere, parkedHere:
				continue // answered by its model, or when its load ends
			case failedHere:
				it.ans.answer(nil, true, 0) // its shadow copies wait for it
				continue
			}
			// elsewhere: its path left this node while it waited and
			// another node has it; forwarding is the router's, so it is
			// told to retry.
			e = servables.NewError(servables.Unavailable,
				fmt.Sprintf("model %s moved to another node while the request waited for its load here; retry", it.b.reqs[it.i].ModelPath))
		}
		if it.b.claim(it.i) {
			req := &it.b.reqs[it.i]
			it.b.results[it.i].Err = e
			w.metrics.observe(req.API, req.ModelPath, e, 0)
			it.b.finish()
		}
		it.ans.answer(nil, true, 0)
	}
}

// demandFor returns the slot of path in the published demand table, nil if none.
func (w *ways) demandFor(path string) *demandSlot {
	if w.demand == nil {
		return nil
	}
	return (*w.demand.Load())[path]
}

// onDemand reports whether path is an on-demand model of the config in force.
func (s *supervisorActor) onDemand(path string) bool {
	p := s.plan.Path(path)
	return p != nil && s.plan.OnDemand(p)
}

// demandable reports whether requests for p wait for its load: an
// on-demand path with no content serving that a demand loads (unloaded,
// loading, or failed: retried after its backoff).
func (s *supervisorActor) demandable(p *lifecycle.Path) bool {
	if !s.plan.OnDemand(p) || p.Active != nil {
		return false
	}
	switch p.Phase {
	case lifecycle.Unloaded, lifecycle.Loading, lifecycle.Failed:
		return true
	}
	return false
}

// publishDemand publishes the demand table, if it changed: a slot for
// every demandable path, each closed (taking requests) before the table
// without its content is published, and, for a versioned entry none of
// whose versions serves, its own path to the slot of its highest
// demandable version (the one it serves once loaded), as for one whose
// newest version served before and is unloaded while a lower one serves
// (reloadVersions). Called before
// publishRoutes with gaining set, when it keeps the entries of the paths
// gaining a content (the routing table without it is still the one out:
// a request that reads both finds one of them), and after it without.
func (s *supervisorActor) publishDemand(now time.Time, gaining bool) {
	old := *s.sys.demand.Load()
	slots, same := s.demandScratch[:0], 0
	paths := s.plan.Paths()
	var entries map[string]*lifecycle.Path // versioned entry -> its highest demandable version
	var serving map[string]bool            // versioned entries with a version in service
	for _, p := range paths {
		if parent := p.Desired.VersionOf; parent != "" && !p.Registered {
			if p.Active != nil {
				if serving == nil {
					serving = map[string]bool{}
				}
				serving[parent] = true
			} else if s.demandable(p) && (entries[parent] == nil || p.Desired.Version > entries[parent].Desired.Version) {
				if entries == nil {
					entries = map[string]*lifecycle.Path{}
				}
				entries[parent] = p
			}
		}
		if !s.demandable(p) {
			if d := old[p.Name]; gaining && d != nil && p.Active != nil {
				slots = append(slots, d) // taken by openDemand, after the routing table
				same++
			}
			continue
		}
		d := s.slots[p.Name]
		if d == nil {
			d = &demandSlot{path: p.Name}
			s.slots[p.Name] = d
		}
		d.close(p.Desired.DefaultTimeout, p.Cost.LoadTime)
		slots = append(slots, d)
		if old[p.Name] == d {
			same++
		}
	}
	clear(slots[len(slots):cap(slots)])
	s.demandScratch = slots
	var aliases map[string]*demandSlot
	alias := func(key string, d *demandSlot) {
		if aliases == nil {
			aliases = map[string]*demandSlot{}
		}
		aliases[key] = d
	}
	for parent, v := range entries {
		if !serving[parent] && s.plan.Path(parent) == nil {
			alias(parent, s.slots[v.Name])
		}
	}
	for parent, v := range s.reloadVersions(paths) {
		alias(parent, s.slots[v.Name])
	}
	if gaining {
		for key, d := range old {
			if key != d.path && aliases[key] == nil && slices.Contains(slots, d) {
				alias(key, d) // its version is gaining a content
			}
		}
	}
	for key, d := range aliases {
		if old[key] == d {
			same++
		}
	}
	if same == len(slots)+len(aliases) && same == len(old) {
		return
	}
	t := make(demandTable, len(slots)+len(aliases))
	for _, d := range slots {
		t[d.path] = d
	}
	maps.Copy(t, aliases)
	s.sys.demand.Store(&t)
}

// openDemand, after the routing table is published, takes the requests
// parked on the slots of the paths that have a content now to it, and
// answers those of the paths no longer on demand (removed, expired,
// eager now) as the routing table does: not found, or to the content.
// With the same demand and routing tables as at its last call it has
// nothing to do: a slot out of the demand table was taken then (it
// serves, and takes no request since, or it is gone), and a slot gets
// into a demand table only by a new table.
func (s *supervisorActor) openDemand(ctx actor.Context) {
	published, routes := s.sys.demand.Load(), s.sys.routes.Load()
	if published == s.opened.demand && routes == s.opened.routes {
		return
	}
	s.opened.demand, s.opened.routes = published, routes
	for path, d := range s.slots {
		if (*published)[path] != nil {
			continue
		}
		serving := (*routes)[path] != nil
		items := d.take(serving, !serving)
		if !serving {
			delete(s.slots, path)
		}
		if len(items) > 0 {
			// toModel answers those with no content not found.
			s.sys.ways.resume(ctx.Send, items, nil)
		}
	}
}

// holdDemand has the slot of each demandable path whose load the planner
// holds back (lifecycle.State.Held: a warm-up of the same content is
// stuck) answer its requests at once with the stuck warm-up's error, as
// within a backoff, and answers those parked, once the status shows it
// (execute); the other slots take requests again.
func (s *supervisorActor) holdDemand(ctx actor.Context) {
	if !s.holding && len(s.plan.StuckWarmUps()) == 0 {
		return
	}
	s.holding = false
	for path, d := range s.slots {
		var err error
		if p := s.plan.Path(path); p != nil && s.demandable(p) {
			if st := s.plan.Held(p); st != nil {
				err = fmt.Errorf("%w: model %s could not be loaded: %w", servables.ErrUnavailable, p.Name, st.Err)
				s.holding = true
			}
		}
		if items := d.hold(err); len(items) > 0 {
			s.failed = append(s.failed, func() { s.sys.ways.resume(ctx.Send, items, err) })
		}
	}
}

// failDemand answers the requests waiting for p's load with its failure
// err, once the status shows it (execute), and has the slot answer
// those that come until p's backoff is over.
func (s *supervisorActor) failDemand(ctx actor.Context, p *lifecycle.Path, err error) {
	d := s.slots[p.Name]
	if d == nil {
		return
	}
	e := fmt.Errorf("%w: model %s could not be loaded: %w", servables.ErrUnavailable, p.Name, err)
	items := d.fail(e, p.RetryAt)
	s.failed = append(s.failed, func() { s.sys.ways.resume(ctx.Send, items, e) })
}
