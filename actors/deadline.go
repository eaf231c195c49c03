package actors

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/groveml/grove/servables"
)

// Request deadlines. A request carries its caller's context (an HTTP
// request's, cancelled when the client goes; a gRPC call's, with its
// deadline) and a deadline: the context's, or, when the caller brings
// none, now plus the model's default_timeout_ms. Shadow copies get the
// server's shadow_timeout, and a copy another node forwarded here its
// start-by (forward.Request.StartBy): the time they may wait to start,
// not to run.
//
// Work is never run for nobody: a model actor drops a request when it
// takes it from its mailbox (or from the requests waiting for a dynamic
// batch) if its caller went away, its deadline passed, its answer would not
// reach the caller before its deadline at the model's recent pace while
// other requests wait (see timeNeeded), or it waited in the queue longer
// than the model's queue_timeout_ms. Each drop is counted in
// grove_requests_expired_total{model,reason} and answered with an error
// of kind DeadlineExceeded or Canceled. The caller, if still there, gets
// its answer at its deadline, not when the queue reaches its request.

// Expiry reasons, the reason label of grove_requests_expired_total.
const (
	expiredDeadline     = "deadline"
	expiredCanceled     = "canceled"
	expiredQueueTimeout = "queue_timeout"
)

// timeouts are a content's per-model deadline settings; the supervisor
// replaces them in place when the config changes.
type timeouts struct {
	// def is default_timeout_ms: the deadline of a request that brings none.
	def time.Duration
	// queue is queue_timeout_ms: a request that waited longer is not started.
	queue time.Duration
}

// setTimeouts applies new deadline settings to c.
func (c *content) setTimeouts(def, queue time.Duration) {
	if c.deadlineSettings() != (timeouts{def: def, queue: queue}) {
		c.timeouts.Store(&timeouts{def: def, queue: queue})
	}
}

// deadlineSettings returns c's timeouts (zero: none).
func (c *content) deadlineSettings() timeouts {
	if t := c.timeouts.Load(); t != nil {
		return *t
	}
	return timeouts{}
}

// observeService folds one forward call's duration into c's estimate of
// how long a request takes to run: an average that rises slowly and falls
// fast. A call counts for at most twice the estimate and moves it up by an
// eighth of the gap, so one stall (a pause, a cold cache) cannot make the
// model look too slow to serve anyone; a faster call moves it down by half
// the gap. An estimate too high sheds requests that would have made it; one
// too low lets a few answers arrive late.
//
// It also keeps the slowest recent call (slowNs), for runsInline: a
// slower call replaces it at once, and each faster one takes a 64th of
// the gap off.
func (c *content) observeService(d time.Duration) {
	old, ns := c.serviceNs.Load(), int64(d)
	switch {
	case old == 0:
		c.serviceNs.Store(ns)
	case ns > old:
		c.serviceNs.Store(old + (min(ns, 2*old)-old)/8)
	default:
		c.serviceNs.Store(old - (old-ns)/2)
	}
	if slow := c.slowNs.Load(); ns >= slow {
		c.slowNs.Store(ns)
	} else {
		c.slowNs.Store(slow - (slow-ns)/64)
	}
}

// inlineHeadroom is how many of its model's slowest recent forward calls
// must fit in a request's time left for it to run on its caller's
// goroutine (runsInline).
const inlineHeadroom = 4

// runsInline reports whether a request with deadline dl (zero: none),
// sent at now, may run on its caller's goroutine when its model actor is
// idle (modelMailbox.postInline). A caller running its own forward call
// cannot be answered at its deadline, as one waiting for a model actor
// is: so a request with a deadline runs there only when its time left is
// more than inlineHeadroom of c's slowest recent calls, plus answerMargin,
// and not before c has run one. A forward call that stalls for longer
// than that (its model's first stall that long) answers its caller late,
// by the stall.
func (c *content) runsInline(dl, now time.Time) bool {
	if dl.IsZero() {
		return true
	}
	slow := time.Duration(c.slowNs.Load())
	return slow > 0 && dl.Sub(now) > inlineHeadroom*slow+answerMargin
}

// answerMargin is the time an answer needs after its forward call, to
// reach its caller (encoding, writing, the network), on top of an eighth
// of the forward's recent duration for its variation.
const answerMargin = time.Millisecond

// timeNeeded is how long a request needs from the moment it is taken from
// the queue to reach its caller, at c's recent pace; 0 before c has run
// any request. It is only applied to requests that wait beside others
// (see expiry), which keeps it honest: an idle model runs what comes.
func (c *content) timeNeeded() time.Duration {
	est := time.Duration(c.serviceNs.Load())
	if est == 0 {
		return 0
	}
	return est + est/8 + answerMargin
}

// expiry says why m must not run at now ("" if it may), with the error
// its caller gets.
func (a *modelActor) expiry(m *predict, now time.Time) (string, error) {
	if m.ctx != nil && m.ctx.Err() != nil {
		if pastDeadline(m.ctx, now) {
			return expiredDeadline, fmt.Errorf("%w: model %s did not start the request before its deadline", servables.ErrDeadlineExceeded, a.c.path)
		}
		return expiredCanceled, fmt.Errorf("%w: the caller of model %s went away before it ran", servables.ErrCanceled, a.c.path)
	}
	if !m.deadline.IsZero() {
		left := m.deadline.Sub(now)
		if left <= 0 {
			return expiredDeadline, fmt.Errorf("%w: model %s did not start the request before its deadline", servables.ErrDeadlineExceeded, a.c.path)
		}
		// Only a request that competes with others for the model is held
		// to its recent pace: one that finds the model otherwise idle runs
		// (and measures the pace again), so a stale estimate cannot keep
		// every request out.
		if need := a.c.timeNeeded(); m.priority == priorityUser && need > left && a.c.queued.Load() > 1 {
			return expiredDeadline, fmt.Errorf("%w: model %s would not answer the request before its deadline (%v left, it needs about %v)",
				servables.ErrDeadlineExceeded, a.c.path, left.Round(time.Microsecond), need.Round(time.Microsecond))
		}
	}
	if m.priority == priorityUser {
		if q := a.c.deadlineSettings().queue; q > 0 {
			if waited := now.Sub(m.enqueued); waited > q {
				return expiredQueueTimeout, fmt.Errorf("%w: the request waited %v in the queue of model %s, over its queue_timeout_ms (%v)",
					servables.ErrDeadlineExceeded, waited.Round(time.Microsecond), a.c.path, q)
			}
		}
	}
	return "", nil
}

// pastDeadline reports whether ctx, which is done, ended by its deadline:
// its error says so, or it was cancelled at or after its deadline (a gRPC
// client whose deadline passes cancels its call, which the server may see
// before its own deadline timer fires).
func pastDeadline(ctx context.Context, now time.Time) bool {
	if errors.Is(ctx.Err(), context.DeadlineExceeded) {
		return true
	}
	dl, ok := ctx.Deadline()
	return ok && !now.Before(dl)
}

// dropIfExpired answers m with its expiry error and counts it, if it must
// not run at now; it reports whether it did.
func (a *modelActor) dropIfExpired(m *predict, now time.Time) bool {
	reason, err := a.expiry(m, now)
	if err == nil {
		return false
	}
	a.m.expired.WithLabelValues(a.c.path, reason).Inc()
	m.done(nil, err, now.Sub(m.enqueued), 0)
	return true
}

// predictContext is the context a forward call of m runs under.
func predictContext(m *predict) context.Context {
	if m.ctx == nil {
		return context.Background()
	}
	return m.ctx
}

// joinContexts returns a context that is done once every member's caller
// is done (a dynamic batch runs for as long as any of its requests is
// wanted): context.Background when a member is always wanted, else a
// *joinedContext, to release once the forward call returned.
func joinContexts(batch []*predict) context.Context {
	for _, m := range batch {
		if m.ctx == nil || m.ctx.Done() == nil {
			return context.Background() // this one is wanted whatever happens
		}
	}
	return &joinedContext{members: batch}
}

// joinedContext is the context of a dynamic batch's forward call
// (joinContexts). The runtimes ask a call's context for Err before they
// run, which asks the members' contexts; the members are watched
// (context.AfterFunc) only once Done is asked for, so that a batch costs
// no callbacks registered with its callers' contexts and nothing
// allocated but the joinedContext itself unless a runtime waits on Done.
type joinedContext struct {
	mu sync.Mutex
	// members are the batch's requests, until release.
	members []*predict
	// done, made by the first Done, is closed with err set once every
	// member's context is done, or at release; left counts the members
	// not done yet, stops unregisters their callbacks.
	done     chan struct{}
	err      error
	left     int
	stops    []func() bool
	released bool
}

// Deadline reports none: the batch runs for as long as any member is
// wanted, whatever their deadlines.
func (*joinedContext) Deadline() (time.Time, bool) { return time.Time{}, false }

// Value carries no values.
func (*joinedContext) Value(any) any { return nil }

// Err is context.Canceled once every member's context is done (or the
// call has returned), else nil.
func (j *joinedContext) Err() error {
	j.mu.Lock()
	defer j.mu.Unlock()
	if j.done != nil {
		return j.err // watched: err is set when done closes
	}
	if j.released || j.allGone() {
		return context.Canceled
	}
	return nil
}

// Done returns a channel closed once every member's context is done (or
// the call has returned); the first call starts watching the members.
func (j *joinedContext) Done() <-chan struct{} {
	j.mu.Lock()
	defer j.mu.Unlock()
	if j.done != nil {
		return j.done
	}
	j.done = make(chan struct{})
	if j.released || j.allGone() {
		j.closeLocked()
		return j.done
	}
	j.left = len(j.members)
	j.stops = make([]func() bool, len(j.members))
	for i, m := range j.members {
		// A context already done runs the callback on a goroutine of its
		// own, which waits for mu: never here.
		j.stops[i] = context.AfterFunc(m.ctx, func() {
			j.mu.Lock()
			defer j.mu.Unlock()
			if j.left--; j.left == 0 {
				j.closeLocked()
			}
		})
	}
	return j.done
}

// allGone reports whether every member's context is done; j.mu is held.
func (j *joinedContext) allGone() bool {
	for _, m := range j.members {
		if m.ctx.Err() == nil {
			return false
		}
	}
	return true
}

// closeLocked marks j done, once; j.mu is held.
func (j *joinedContext) closeLocked() {
	if j.err == nil {
		j.err = context.Canceled
		close(j.done)
	}
}

// release ends j once the forward call has returned: it unregisters the
// members' callbacks, lets go of the members (the batch's list is
// reused) and is done from then on.
func (j *joinedContext) release() {
	j.mu.Lock()
	defer j.mu.Unlock()
	for _, stop := range j.stops {
		stop()
	}
	j.stops, j.members, j.released = nil, nil, true
	if j.done != nil {
		j.closeLocked()
	}
}
