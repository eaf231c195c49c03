// Package node is a Grove server's cluster agent (docs/cluster.md): it
// makes the server a member of the cluster, keeps its member record in
// step with what its actors hold, runs its share of the placement
// controller, gives the actors their share of the placement table, and
// forwards the requests for models ready only on other nodes (it is the
// actors' Remote).
//
// # Who owns what
//
//	state                              owner                       how others read it
//	---------------------------------  --------------------------  -------------------------------------
//	membership session (coord.Node)    Run (joins, rejoins after    atomic pointer (Drain, Leave, Status)
//	                                     ErrSessionLost)
//	member snapshot, table in force,   the watch goroutines of Run atomic pointers to values replaced,
//	  who serves what elsewhere and                                  never changed (Serves, Model,
//	  its description, controller name                               Forward, Status, the metrics;
//	                                                                 a replaced view's channel is closed)
//	membership read afresh for a peer   ConfirmMember's reads       atomic pointer (IsMember believes it
//	  the watch did not list yet          (rereader, under its mu)    while it is newer than the watch's)
//	draining                           Drain                       atomic (the record Run writes)
//	on-demand paths of the config       whoever first reads them    atomic pointer to a set replaced,
//	                                      for a config applied        never changed (onDemandPaths:
//	                                      (onDemandPaths)             Awaits, Paths, Forward)
//	requests waiting for a placement,   Forward (awaitPlaced),      waiting.mu (the record's Use.Waiting)
//	  paths wanted without a request      Want
//	desired models' file sizes         the controller's Desired    sizes.mu (cache by config)
//	                                     calls
package node

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/groveml/grove/actors"
	"github.com/groveml/grove/cluster"
	"github.com/groveml/grove/cluster/coord"
	"github.com/groveml/grove/cluster/forward"
	"github.com/groveml/grove/cluster/placement"
	"github.com/groveml/grove/conf/bucket"
	"github.com/groveml/grove/conf/modelconfig"
	"github.com/groveml/grove/servables"
)

// Config configures an Agent.
type Config struct {
	// Client is the connection to the cluster's etcd.
	Client *coord.Client
	// Name is this node's name (cluster.node_name); Advertise the
	// host:port its forward server listens on (cluster.advertise).
	Name, Advertise string
	// BudgetBytes is the memory this node gives models (memory_budget_bytes).
	BudgetBytes int64
	// LeaseTTL is the membership lease (cluster.lease_ttl): above 0,
	// rounded up to whole seconds.
	LeaseTTL time.Duration
	// MemoryFactor estimates a model's memory from its file size until
	// its load was measured (cluster.memory_factor): a finite number
	// above 0.
	MemoryFactor float64
	// IdleUnloadAfter is idle_unload_after, which the controller applies
	// to the cluster's on-demand models while this node leads (0: never).
	IdleUnloadAfter time.Duration
	// AwaitPoll is how often a request waiting for its on-demand model to
	// be placed tries again when neither the table nor the membership
	// changed (100 ms when zero): the node placed may not have taken its
	// share yet.
	AwaitPoll time.Duration
	// Bucket holds the models, whose file sizes placement needs.
	Bucket bucket.Bucket
	// Forward forwards requests to the other nodes.
	Forward *forward.Client
	// UpdateEvery bounds how often the member record is rewritten (at
	// most once per UpdateEvery, when it changed; 500 ms when zero).
	UpdateEvery time.Duration
	// Retry is the pause before joining again after a failure (1 s when zero).
	Retry time.Duration
	// MoveWait bounds how long a forwarded request whose peers failed
	// Unavailable waits for the membership to show its model on another
	// node (250 ms when zero; never past the request's deadline).
	MoveWait time.Duration
	// Available reads the memory the machine or container has left, in
	// bytes, -1 when unknown; the free memory in the record never exceeds
	// it (SystemAvailable when nil).
	Available func() int64
	// Logger receives the agent's logs (slog.Default when nil).
	Logger *slog.Logger
	// Registerer receives the cluster metrics (none when nil).
	Registerer prometheus.Registerer
}

// Agent is a node's cluster agent. Create it with New, give it to the
// actors as their Remote, and Run it with the actors.
type Agent struct {
	cfg Config
	log *slog.Logger

	sys     atomic.Pointer[actors.System]
	node    atomic.Pointer[coord.Node]
	members atomic.Pointer[coord.Members]
	// confirmed is the membership ConfirmMember last read, which IsMember
	// believes while it is newer than members (the watch lags behind).
	confirmed atomic.Pointer[coord.Members]
	reread    rereader
	table     atomic.Pointer[coord.Placement]
	// tableChanged is closed, and replaced, when a new table is stored.
	tableChanged atomic.Pointer[chan struct{}]
	ready        atomic.Pointer[readyView]                    // who has each path ready elsewhere
	models       atomic.Pointer[map[string]forward.ModelInfo] // path -> as the first other node with it ready describes it
	leader       atomic.Pointer[string]
	draining     atomic.Bool
	// left is set by Leave: Run joins no more.
	left atomic.Bool
	// leftc is closed by Leave: it cancels a join in flight and wakes
	// Run's wait before it joins again.
	leftc chan struct{}
	// leaving orders Leave against the start of a session (startSession):
	// a join that completes after Leave set left ends its session, since
	// Leave could not see it.
	leaving sync.Mutex
	// wake makes Run write the record at once (Drain, a request waiting
	// for a placement).
	wake chan struct{}
	// onDemand is the set of on-demand paths of the config applied
	// (onDemandPaths).
	onDemand atomic.Pointer[onDemandSet]

	waiting struct {
		mu sync.Mutex
		by map[string]int // path -> requests waiting for it to be placed
		// wanted is, for each path Want asked for, when it stops
		// counting as a request waiting, unless a node has it ready
		// before.
		wanted map[string]time.Time
	}

	sizes struct {
		mu  sync.Mutex
		cfg *modelconfig.Config
		by  map[string]int64
	}

	// newController is cluster.NewController (a test makes it fail).
	newController func(cluster.ControllerConfig) (*cluster.Controller, error)
	// join is the client's Join (a test holds a join back).
	join func(context.Context, coord.Member, time.Duration) (*coord.Node, error)
}

// New checks cfg and returns an Agent.
func New(cfg Config) (*Agent, error) {
	switch {
	case cfg.Client == nil:
		return nil, errors.New("cluster node: no etcd client")
	case cfg.Name == "":
		return nil, errors.New("cluster node: no node name (cluster.node_name)")
	case cfg.Advertise == "":
		return nil, errors.New("cluster node: no address to advertise to peers (cluster.advertise)")
	case cfg.BudgetBytes <= 0:
		return nil, errors.New("cluster node: memory_budget_bytes must be positive")
	case cfg.LeaseTTL <= 0:
		return nil, fmt.Errorf("cluster node: cluster.lease_ttl %v is not above 0", cfg.LeaseTTL)
	case !(cfg.MemoryFactor > 0) || math.IsInf(cfg.MemoryFactor, 0):
		return nil, fmt.Errorf("cluster node: cluster.memory_factor %v is not a finite number above 0", cfg.MemoryFactor)
	case cfg.Bucket == nil || cfg.Forward == nil:
		return nil, errors.New("cluster node: needs the bucket and a forward client")
	}
	if cfg.UpdateEvery <= 0 {
		cfg.UpdateEvery = 500 * time.Millisecond
	}
	if cfg.Retry <= 0 {
		cfg.Retry = time.Second
	}
	if cfg.MoveWait <= 0 {
		cfg.MoveWait = 250 * time.Millisecond
	}
	if cfg.AwaitPoll <= 0 {
		cfg.AwaitPoll = 100 * time.Millisecond
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.Available == nil {
		cfg.Available = SystemAvailable
	}
	a := &Agent{cfg: cfg, log: cfg.Logger.With("component", "cluster", "node", cfg.Name), wake: make(chan struct{}, 1),
		leftc: make(chan struct{}), newController: cluster.NewController, join: cfg.Client.Join}
	a.members.Store(&coord.Members{})
	a.confirmed.Store(&coord.Members{})
	a.reread = rereader{read: a.readMembers, gap: confirmGap, timeout: confirmTimeout}
	a.table.Store(&coord.Placement{})
	tc := make(chan struct{})
	a.tableChanged.Store(&tc)
	a.ready.Store(&readyView{peers: map[string][]forward.Peer{}, changed: make(chan struct{})})
	a.models.Store(&map[string]forward.ModelInfo{})
	a.onDemand.Store(&onDemandSet{})
	a.waiting.by, a.waiting.wanted = map[string]int{}, map[string]time.Time{}
	a.leader.Store(new(""))
	if cfg.Registerer != nil {
		cfg.Registerer.MustRegister(&collector{a: a})
	}
	return a, nil
}

// onDemandSet is the set of on-demand paths of cfg.
type onDemandSet struct {
	cfg   *modelconfig.Config
	paths map[string]bool
}

// onDemandPaths returns the on-demand paths of the config the actors
// applied last. It reads the set for that config once: a request sent
// once the config is applied (AppliedConfig) finds its on-demand models
// awaited, without waiting for watchConfig's turn.
func (a *Agent) onDemandPaths() map[string]bool {
	od := a.onDemand.Load()
	sys := a.sys.Load()
	if sys == nil {
		return od.paths
	}
	cfg, _ := sys.AppliedConfig()
	if cfg == od.cfg {
		return od.paths
	}
	n := &onDemandSet{cfg: cfg, paths: map[string]bool{}}
	if cfg != nil {
		for _, m := range cfg.Models {
			if m.OnDemand(sys.LoadPolicy()) {
				n.paths[m.Path] = true
			}
		}
	}
	a.onDemand.Store(n) // a racing reader of the same config stores the same set
	return n.paths
}

// Name returns the node's name.
func (a *Agent) Name() string { return a.cfg.Name }

// Serves reports whether another node has path ready (actors.Remote).
func (a *Agent) Serves(path string) bool {
	return len(a.ready.Load().peers[path]) > 0
}

// Paths lists the paths other nodes have ready and the on-demand models
// of the config, which any node takes a request for (actors.Remote).
func (a *Agent) Paths() []string {
	ready := a.ready.Load().peers
	od := a.onDemandPaths()
	out := make([]string, 0, len(ready)+len(od))
	for p := range ready {
		out = append(out, p)
	}
	for p := range od {
		if ready[p] == nil {
			out = append(out, p)
		}
	}
	return out
}

// Awaits reports whether path is an on-demand model of the config that no
// other node has ready and the table does not place here (actors.Remote):
// Forward waits for its placement.
func (a *Agent) Awaits(path string) bool {
	if !a.onDemandPaths()[path] || len(a.ready.Load().peers[path]) > 0 {
		return false
	}
	return !slices.Contains(a.table.Load().Table[path], a.cfg.Name)
}

// Model describes path as the first other node (by name) that has it
// ready published it in its record (actors.Remote).
func (a *Agent) Model(path string) (forward.ModelInfo, bool) {
	info, ok := (*a.models.Load())[path]
	return info, ok
}

// Forward runs req on another node that has its model ready
// (actors.Remote): the power of two choices among them, one retry on
// Unavailable, and, when both fail Unavailable, once more on the nodes
// the membership lists for the model by then and did not list before
// (followMove).
//
// A request for an on-demand model that no node has ready, or whose
// nodes all failed Unavailable (a node killed, its record not yet
// expired), waits for the controller to place it (awaitPlaced).
//
// While the node's session is lost (its lease ended: etcd unreachable for
// a lease TTL) and it has not joined again, it forwards nothing: its
// peers would refuse the call as no member's, each after a read of etcd.
// The request fails at once Unavailable, with a retry-after of Retry
// (sessionLostError); models ready here still serve here. So it does once
// the node has left (Leave: shutting down), saying so, and so does a
// request already waiting for a placement when the session ends, unless
// the table places its model here. A request already forwarding when the
// session ends keeps its call in flight: the peer accepted it, so its
// answer is the request's. What would otherwise be refused or wait fails
// so, at once: an Unavailable failure once the session has ended (its
// peers refusing a node that is no member), and a request waiting for
// its model to move (followMove).
func (a *Agent) Forward(ctx context.Context, req forward.Request) (forward.Answer, error) {
	// lost is closed when the session the request starts in ends (nil
	// before the node first joined).
	var lost <-chan struct{}
	if n := a.node.Load(); n != nil {
		if lost = n.Done(); closed(lost) {
			return forward.Answer{}, a.lostSessionErr()
		}
	}
	od := a.onDemandPaths()[req.ModelPath]
	v := a.ready.Load()
	if len(v.peers[req.ModelPath]) == 0 {
		if od {
			return a.awaitPlaced(ctx, req)
		}
		return forward.Answer{}, servables.NewError(servables.Unavailable, fmt.Sprintf("model %s is ready on no other cluster node", req.ModelPath))
	}
	ans, err := followMove(ctx, req.ModelPath, v, a.ready.Load, a.cfg.MoveWait, lost,
		func(ctx context.Context, peers []forward.Peer) (forward.Answer, error) {
			return a.cfg.Forward.Forward(ctx, peers, req)
		})
	if err == nil || servables.KindOf(err) != servables.Unavailable || ctx.Err() != nil {
		return ans, err
	}
	if od {
		return a.awaitPlaced(ctx, req)
	}
	if closed(lost) {
		a.log.Debug("forwarded request ends: this node's cluster session ended", "model", req.ModelPath, "peer_err", err)
		return forward.Answer{}, a.lostSessionErr()
	}
	return ans, err
}

// closed reports whether ch, a session's Done channel, is closed (false
// for nil).
func closed(ch <-chan struct{}) bool {
	select {
	case <-ch:
		return true
	default:
		return false
	}
}

// awaitPlaced runs req, for an on-demand model, once a node has it: it
// marks the request waiting in the node's record (Use.Waiting, written at
// once), which makes the controller place the model if it is placed
// nowhere, and forwards req to a node that has it ready, else to a node
// the table places it on (which parks it until its load ends), else, when
// the table places it here, runs it here (System.Predict parks it on the
// local load). A node that answers Unavailable (not yet given its share,
// gone) is tried again when the table or the membership changes, or
// after AwaitPoll. When ctx ends first, or the node placed to load the
// model says it ended there (cutShort), the answer is "model is loading"
// (actors.LoadingError). A shadow copy with a start-by waits only until
// then, as a copy waits to start: its calls still run under ctx, whose
// deadline leaves room for the run.
//
// When the node's session ends (its lease lost, or the node left), the
// request stops waiting at once with Forward's sessionLostError: the node
// can forward it to no peer, and no controller places for it until it
// joins again. A model the table places here still runs here: a node
// whose session is lost keeps serving what it holds, so the load it was
// given goes on, and a call already parked on that load is left to end.
func (a *Agent) awaitPlaced(ctx context.Context, req forward.Request) (forward.Answer, error) {
	path := a.markWaiting(req.ModelPath, 1)
	defer a.markWaiting(path, -1)
	wait := ctx
	if !req.StartBy.IsZero() {
		var cancel context.CancelFunc
		wait, cancel = context.WithDeadline(ctx, req.StartBy)
		defer cancel()
	}
	poll := time.NewTimer(a.cfg.AwaitPoll)
	defer poll.Stop()
	var last error
	for {
		// lost is closed when the session this attempt runs in ends (nil
		// before the node first joined, or once it has ended).
		var lost <-chan struct{}
		ended := false
		if n := a.node.Load(); n != nil {
			select {
			case <-n.Done():
				ended = true
			default:
				lost = n.Done()
			}
		}
		v := a.ready.Load()
		changed := a.tableChanged.Load()
		listed := a.table.Load().Table[path]
		here := slices.Contains(listed, a.cfg.Name)
		if ended && !here {
			a.log.Debug("request waiting for its on-demand model's placement ends: this node's cluster session ended", "model", path, "last_err", last)
			return forward.Answer{}, a.lostSessionErr()
		}
		var ans forward.Answer
		var err error
		tried, toReady := true, false
		switch {
		case len(v.peers[path]) > 0 && !ended:
			toReady = true
			ans, err = a.cfg.Forward.Forward(ctx, v.peers[path], req)
		case here:
			if sys := a.sys.Load(); sys != nil {
				ans, err = sys.Predict(ctx, forward.ForwardedRequest{Request: req})
			}
		case len(a.peersOf(listed)) > 0:
			ans, err = a.cfg.Forward.Forward(ctx, a.peersOf(listed), req)
		default:
			tried = false // placed nowhere yet, or on a node gone
		}
		if tried && err == nil && ctx.Err() == nil {
			return ans, nil // past a start-by too: the serving node started the copy in time
		}
		if wait.Err() != nil || cutShort(err, toReady) {
			return forward.Answer{}, awaitExpired(path, err, last, toReady)
		}
		if err != nil && servables.KindOf(err) != servables.Unavailable {
			return forward.Answer{}, err
		}
		if err != nil {
			last = err
		}
		poll.Reset(a.cfg.AwaitPoll)
		select {
		case <-wait.Done():
			a.log.Debug("request waited for its on-demand model's placement past its deadline (a shadow copy's: its start-by)", "model", path, "last_err", last)
		case <-v.changed:
		case <-*changed:
		case <-poll.C:
		case <-lost:
		}
	}
}

// awaitExpired is awaitPlaced's answer when its request's deadline ended
// on err (nil: before it was tried), toReady telling whether it was sent
// to a node that had path ready: "model is loading" (actors.LoadingError)
// when it was waiting for a placement or a load, which includes a call to
// a node placed to load path that ended unanswered (DeadlineExceeded) or
// found it not ready (Unavailable); else err, such as a ready copy's
// answer past the deadline or a model's own failure. Its retry-after is
// the estimate of the node loading path, from err or else from last (the
// attempt before), and 1 s when neither gave one.
func awaitExpired(path string, err, last error, toReady bool) error {
	switch k := servables.KindOf(err); {
	case err == nil, k == servables.Unavailable, cutShort(err, toReady):
		after := time.Second
		for _, e := range []error{err, last} {
			if re, ok := errors.AsType[*forward.RemoteError](e); ok && re.RetryAfter > 0 {
				after = re.RetryAfter
				break
			}
		}
		return &actors.LoadingError{Path: path, RetryAfter: after}
	}
	return err
}

// cutShort reports whether err, the answer of a node placed to load the
// model (not one that had it ready), says that the request's deadline
// ended there. The call carries this node's deadline, so it has ended
// here too, or will within the answer's trip: which of the two ends is
// seen first must not decide whether the caller hears "model is
// loading".
func cutShort(err error, toReady bool) bool {
	return err != nil && !toReady && servables.KindOf(err) == servables.DeadlineExceeded
}

// wantFor is how long a path Want asked for counts as a request waiting
// for it when no node has it ready by then (the router asks again after
// as long).
const wantFor = time.Minute

// Want has the controller place path, an on-demand model of the config
// that no node has ready and the table does not place here, though no
// request waits for it (actors.Remote): the record counts one request
// waiting for it until a node has it ready, for at most wantFor from
// this call. It reports false when path is not awaited (ready on a node,
// placed here, not on demand), and does nothing then.
func (a *Agent) Want(path string) bool {
	if !a.Awaits(path) {
		return false
	}
	now := time.Now()
	a.waiting.mu.Lock()
	until, marked := a.waiting.wanted[path]
	fresh := !marked || now.After(until) // a mark expired but not yet dropped by record counts no more
	a.waiting.wanted[path] = now.Add(wantFor)
	a.waiting.mu.Unlock()
	if fresh {
		a.writeRecordNow()
	}
	return true
}

// markWaiting adds n to the requests waiting for path's placement and,
// when the first one starts waiting, has the record written at once. It
// returns path.
func (a *Agent) markWaiting(path string, n int) string {
	a.waiting.mu.Lock()
	a.waiting.by[path] += n
	first := n > 0 && a.waiting.by[path] == n
	if a.waiting.by[path] <= 0 {
		delete(a.waiting.by, path)
	}
	a.waiting.mu.Unlock()
	if first {
		a.writeRecordNow()
	}
	return path
}

// writeRecordNow has Run write the node's record at once (keepRecord),
// without waiting for UpdateEvery; it never blocks.
func (a *Agent) writeRecordNow() {
	select {
	case a.wake <- struct{}{}:
	default:
	}
}

// peersOf are the live members among names, but this node, as forward peers.
func (a *Agent) peersOf(names []string) []forward.Peer {
	var out []forward.Peer
	for _, m := range a.members.Load().List {
		if m.Name != a.cfg.Name && slices.Contains(names, m.Name) {
			out = append(out, forward.Peer{Name: m.Name, Addr: m.Advertise})
		}
	}
	return out
}

// IsMember reports whether name is a live member (the forward server's
// member check), as the newest membership this node has seen says: its
// watch's, or ConfirmMember's read when that is newer.
func (a *Agent) IsMember(name string) bool {
	m := a.members.Load()
	if c := a.confirmed.Load(); c.Revision > m.Revision {
		m = c
	}
	return slices.ContainsFunc(m.List, func(x coord.Member) bool { return x.Name == name })
}

// ConfirmMember reports whether name is a live member by a read of the
// membership begun after the call (the forward server's confirmation of
// a peer IsMember does not know): a node that has just joined forwards as
// soon as its own watch lists its peers, which may be before this node's
// watch lists it. The reads are shared and spaced (rereader), so a peer
// that is no member cannot make this node read etcd at will; the
// membership read is believed by IsMember until the watch catches up.
func (a *Agent) ConfirmMember(ctx context.Context, name string) (bool, error) {
	if a.IsMember(name) {
		return true, nil
	}
	m, err := a.reread.fresh(ctx)
	if err != nil {
		return false, fmt.Errorf("confirming that %q is a cluster member: %w", name, err)
	}
	return slices.ContainsFunc(m.List, func(x coord.Member) bool { return x.Name == name }), nil
}

// readMembers reads the membership from etcd and keeps it for IsMember
// when it is the newest this node has read.
func (a *Agent) readMembers(ctx context.Context) (coord.Members, error) {
	m, err := a.cfg.Client.Members(ctx)
	if err != nil {
		return coord.Members{}, err
	}
	for {
		old := a.confirmed.Load()
		if old.Revision >= m.Revision || a.confirmed.CompareAndSwap(old, &m) {
			return m, nil
		}
	}
}

// Run makes the node a member and keeps it one until ctx is done: it
// joins with the node's record, keeps the record in step with sys's
// status, runs the placement controller with the config sys applied,
// gives sys its share of the table, and joins again when the session is
// lost or fails (after Retry). A session that fails while its lease is
// alive ends the lease first, so that the next join finds the node's name
// free; so does a join that completes after Leave, and Run returns. Leave
// cancels a join in flight (one waiting for the node's name, held by
// another live lease, or for an unreachable etcd) and wakes the wait
// before the next join, so Run returns promptly. It returns nil when ctx
// is done (without leaving: Leave does).
func (a *Agent) Run(ctx context.Context, sys *actors.System) error {
	a.sys.Store(sys)
	for ctx.Err() == nil && !a.left.Load() {
		err := a.session(ctx, sys)
		switch {
		case ctx.Err() != nil || a.left.Load():
		case errors.Is(err, coord.ErrSessionLost):
			a.log.Warn("cluster session lost; joining again", "err", err)
		default:
			a.log.Error("cluster membership failed; retrying", "err", err)
			select {
			case <-ctx.Done():
			case <-a.leftc:
			case <-time.After(a.cfg.Retry):
			}
		}
	}
	return nil
}

// session is one membership: join, run, until the lease ends or ctx is
// done. When it fails with the lease alive and ctx not done, it ends the
// lease (endSession) before it returns; so it does, whatever ctx, when
// the join completed after Leave. Leave cancels the join in flight: the
// join revokes the lease it granted when it fails.
func (a *Agent) session(ctx context.Context, sys *actors.System) (err error) {
	jctx, cancel := a.untilLeft(ctx)
	n, err := a.join(jctx, a.record(sys), a.cfg.LeaseTTL)
	cancel()
	if err != nil {
		return err
	}
	if !a.startSession(n) {
		// Leave, called while the node was joining, did not see n: its
		// lease would keep the node a member until the process ends and
		// a TTL after. The revoke outlives ctx, which the shutdown
		// cancels once Leave has returned.
		a.log.Info("a join completed after the node left the cluster; revoking its lease")
		a.endSession(context.WithoutCancel(ctx), n, "the cluster session joined after leaving")
		return nil
	}
	defer func() {
		if err != nil && ctx.Err() == nil && !closed(n.Done()) {
			a.endSession(ctx, n, "the failed cluster session")
		}
	}()
	a.log.Info("joined the cluster", "advertise", a.cfg.Advertise, "budget_bytes", a.cfg.BudgetBytes)
	ctrl, err := a.newController(cluster.ControllerConfig{Client: a.cfg.Client, Node: n, Desired: a.desired,
		MemoryFactor: a.cfg.MemoryFactor, IdleUnloadAfter: a.cfg.IdleUnloadAfter, Retry: a.cfg.Retry, Logger: a.log})
	if err != nil {
		return err
	}
	sctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var wg sync.WaitGroup
	errs := make(chan error, 2)
	run := func(f func(context.Context) error) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := f(sctx); err != nil {
				errs <- err
			}
			cancel()
		}()
	}
	run(ctrl.Run)
	run(func(ctx context.Context) error { a.watchTable(ctx, sys); return nil })
	run(func(ctx context.Context) error { a.watchMembers(ctx); return nil })
	run(func(ctx context.Context) error { a.watchLeader(ctx); return nil })
	run(func(ctx context.Context) error { a.watchConfig(ctx, sys, ctrl); return nil })
	run(func(ctx context.Context) error { return a.keepRecord(ctx, sys, n) })
	select {
	case <-sctx.Done():
	case <-n.Done():
	}
	cancel()
	wg.Wait()
	select {
	case <-n.Done():
		if ctx.Err() == nil {
			return coord.ErrSessionLost
		}
	default:
	}
	select {
	case err := <-errs:
		return err
	default:
		return nil
	}
}

// untilLeft returns a context derived from ctx that Leave cancels too.
func (a *Agent) untilLeft(ctx context.Context) (context.Context, context.CancelFunc) {
	ctx, cancel := context.WithCancel(ctx)
	go func() {
		select {
		case <-a.leftc:
			cancel()
		case <-ctx.Done():
		}
	}()
	return ctx, cancel
}

// startSession makes n the node's session unless Leave has been called,
// in which case it reports false: n is then for the caller to end.
func (a *Agent) startSession(n *coord.Node) bool {
	a.leaving.Lock()
	defer a.leaving.Unlock()
	if a.left.Load() {
		return false
	}
	a.node.Store(n)
	return true
}

// endSession revokes the lease of n, a session that failed while its
// lease was alive or that joined after Leave (what names which): the lease
// would otherwise keep the node's record, and so its name, which the next
// join waits for, until it is no longer kept alive and its TTL has
// passed. The revoke is given the lease TTL: by then the lease, no
// longer kept alive, has ended anyway.
func (a *Agent) endSession(ctx context.Context, n *coord.Node, what string) {
	rctx, cancel := context.WithTimeout(ctx, a.cfg.LeaseTTL)
	defer cancel()
	if err := n.Leave(rctx); err != nil {
		a.log.Warn("revoking the lease of "+what+" failed; it ends by itself within cluster.lease_ttl", "err", err)
	}
}

// watchTable gives sys its share of each table written.
func (a *Agent) watchTable(ctx context.Context, sys *actors.System) {
	for p := range a.cfg.Client.WatchTable(ctx) {
		a.table.Store(&p)
		next := make(chan struct{})
		close(*a.tableChanged.Swap(&next))
		share := p.Table.ModelsOn(a.cfg.Name)
		if share == nil {
			share = []string{}
		}
		sys.SetShare(share)
	}
}

// watchMembers keeps the membership, who serves what elsewhere, and the
// forward client's pool to the members.
func (a *Agent) watchMembers(ctx context.Context) {
	for m := range a.cfg.Client.WatchMembers(ctx) {
		a.members.Store(&m)
		ready := map[string][]forward.Peer{}
		described := map[string]forward.ModelInfo{}
		addrs := make([]string, 0, len(m.List))
		for _, x := range m.List {
			if x.Name == a.cfg.Name {
				continue
			}
			addrs = append(addrs, x.Advertise)
			peer := forward.Peer{Name: x.Name, Addr: x.Advertise}
			for _, h := range x.Held {
				if h.State != placement.Ready {
					continue
				}
				for _, path := range []string{h.Path, versionPath(h)} {
					if path != "" && !slices.Contains(ready[path], peer) {
						ready[path] = append(ready[path], peer)
					}
					if info, ok := x.Models[path]; ok && path != "" {
						if _, seen := described[path]; !seen {
							described[path] = info
						}
					}
				}
			}
		}
		a.models.Store(&described)
		old := a.ready.Swap(&readyView{peers: ready, changed: make(chan struct{})})
		close(old.changed)
		a.cfg.Forward.Retain(addrs)
	}
}

// watchLeader keeps the controller's name.
func (a *Agent) watchLeader(ctx context.Context) {
	for l := range a.cfg.Client.WatchLeader(ctx) {
		a.leader.Store(&l)
	}
}

// watchConfig tells the controller each config sys applies, and keeps
// the set of its on-demand paths.
func (a *Agent) watchConfig(ctx context.Context, sys *actors.System, ctrl *cluster.Controller) {
	for {
		_, changed := sys.AppliedConfig()
		a.onDemandPaths()
		ctrl.ConfigChanged()
		select {
		case <-ctx.Done():
			return
		case <-changed:
		}
	}
}

// keepRecord rewrites the node's record when it changed, at most once per
// UpdateEvery, and at once when Drain asks.
func (a *Agent) keepRecord(ctx context.Context, sys *actors.System, n *coord.Node) error {
	t := time.NewTicker(a.cfg.UpdateEvery)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		case <-a.wake:
		}
		err := n.Update(ctx, a.record(sys))
		switch {
		case errors.Is(err, coord.ErrSessionLost):
			return err
		case err != nil && ctx.Err() == nil:
			a.log.Warn("updating the member record failed; retrying", "err", err)
		}
	}
}

// versionPath is the path of the version a held content is ("v/3/"),
// which its Content names; empty for a model that is not a version.
func versionPath(h placement.Held) string {
	if strings.HasSuffix(h.Content, "/") {
		return h.Content
	}
	return ""
}

// record is the node's member record from sys's status: every content it
// holds (each version, a kept previous content) with its memory (the
// load's measured growth, else the file size times the memory factor)
// and state, and its free memory (FreeBytes: the budget less the memory
// of the contents held ready, at most what the machine has available).
func (a *Agent) record(sys *actors.System) coord.Member {
	m := coord.Member{Member: placement.Member{Name: a.cfg.Name, BudgetBytes: a.cfg.BudgetBytes, Draining: a.draining.Load()},
		Advertise: a.cfg.Advertise}
	var used, reserved int64
	hold := func(path, content string, measured, size int64, st placement.State) {
		b := measured
		if b <= 0 {
			b = placement.Need(placement.Model{FileBytes: size}, a.cfg.MemoryFactor)
		}
		m.Held = append(m.Held, placement.Held{Path: path, Content: content, Bytes: b, State: st})
		switch st {
		case placement.Ready:
			used += b
		case placement.Loading:
			reserved += b
		}
	}
	for _, s := range sys.Status().Models {
		if s.Registered {
			continue // not the config's: not placed
		}
		if s.OnDemand && (s.State == actors.StateReady || s.LastUsedAt != nil) {
			// Placed by its path, a versioned entry's by the entry's, the
			// use of its versions summed.
			key := s.Path
			if s.VersionOf != "" {
				key = s.VersionOf
			}
			if m.Use == nil {
				m.Use = map[string]placement.Use{}
			}
			u := m.Use[key]
			u.InFlight += s.InFlight
			u.Replicas = max(u.Replicas, s.Replicas)
			if s.LastUsedAt != nil {
				u.LastUsed = max(u.LastUsed, s.LastUsedAt.Unix())
			}
			// A copy counts as used when it went into service, as one
			// node's budget counts it: else one just loaded for a request
			// waiting here, before it took that request, was never used,
			// the first copy the controller unloads to make room.
			if s.State == actors.StateReady && s.LoadedAt != nil {
				u.LastUsed = max(u.LastUsed, s.LoadedAt.Unix())
			}
			m.Use[key] = u
		}
		path, content := s.Path, s.Checksum
		if s.VersionOf != "" {
			path, content = s.VersionOf, s.Path
		}
		switch s.State {
		case actors.StateReady, actors.StateEvicting, actors.StateExpiring:
			hold(path, content, s.MemoryBytes, s.SizeBytes, placement.Ready)
		case actors.StateLoading:
			hold(path, content, 0, a.sizeOf(path), placement.Loading)
		case actors.StateFailed:
			m.Held = append(m.Held, placement.Held{Path: path, Content: content, State: placement.Failed})
		}
		if k := s.Kept; k != nil {
			hold(path, k.Checksum, k.MemoryBytes, k.SizeBytes, placement.Ready)
		}
	}
	a.waiting.mu.Lock()
	waiting := func(path string, n int) {
		if m.Use == nil {
			m.Use = map[string]placement.Use{}
		}
		u := m.Use[path]
		u.Waiting += n
		m.Use[path] = u
	}
	for path, n := range a.waiting.by {
		waiting(path, n)
	}
	now := time.Now()
	for path, until := range a.waiting.wanted {
		if _, here := sys.ModelInfo(path); here || a.Serves(path) || now.After(until) {
			delete(a.waiting.wanted, path)
			continue
		}
		waiting(path, 1)
	}
	a.waiting.mu.Unlock()
	m.ReservedBytes = reserved
	m.FreeBytes = FreeBytes(a.cfg.BudgetBytes, used, a.cfg.Available())
	m.Models = describe(sys, m.Held)
	return m
}

// describe describes each path of the held contents that sys serves (a
// model's, a version's and its versioned entry's), for the record.
func describe(sys *actors.System, held []placement.Held) map[string]forward.ModelInfo {
	var out map[string]forward.ModelInfo
	for _, h := range held {
		if h.State != placement.Ready {
			continue
		}
		for _, path := range []string{h.Path, versionPath(h)} {
			if path == "" {
				continue
			}
			if info, ok := sys.ModelInfo(path); ok {
				if out == nil {
					out = map[string]forward.ModelInfo{}
				}
				out[path] = info
			}
		}
	}
	return out
}

// sizeOf is the file size of the model at path from the last listing, 0
// when unknown.
func (a *Agent) sizeOf(path string) int64 {
	a.sizes.mu.Lock()
	defer a.sizes.mu.Unlock()
	return a.sizes.by[path]
}

// desired is the controller's Desired: the models of the config sys
// applied, with their file sizes from the bucket's listing (listed once
// per config).
func (a *Agent) desired(ctx context.Context) ([]placement.Model, error) {
	sys := a.sys.Load()
	cfg, _ := sys.AppliedConfig()
	if cfg == nil {
		return nil, errors.New("no model config applied yet")
	}
	a.sizes.mu.Lock()
	defer a.sizes.mu.Unlock()
	if a.sizes.cfg != cfg {
		by := make(map[string]int64, len(cfg.Models))
		for _, m := range cfg.Models {
			objs, err := a.cfg.Bucket.List(ctx, m.Path)
			if err != nil {
				return nil, fmt.Errorf("listing model %s: %w", m.Path, err)
			}
			by[m.Path] = FileBytes(m, objs)
		}
		a.sizes.cfg, a.sizes.by = cfg, by
	}
	return cluster.Desired(cfg, a.sizes.by, sys.LoadPolicy()), nil
}

// FileBytes is the size of the files a node that takes model entry m
// loads, from the listing objs of its path: the file itself, or every
// file under a directory; for a versioned entry only the version
// directories its version_policy serves (a bucket keeping twenty old
// versions of a latest-1 entry counts one), each a version a node holds.
func FileBytes(m modelconfig.Model, objs []bucket.Object) int64 {
	var serve []int64
	if m.IsVersioned() {
		var found []int64
		for _, o := range objs {
			if v, ok := versionOf(m.Path, o.Name); ok && !slices.Contains(found, v) {
				found = append(found, v)
			}
		}
		serve = m.VersionPolicy.Select(found)
	}
	var n int64
	for _, o := range objs {
		switch {
		case m.IsVersioned():
			if v, ok := versionOf(m.Path, o.Name); !ok || !slices.Contains(serve, v) {
				continue
			}
		case o.Name != m.Path && !strings.HasSuffix(m.Path, "/"):
			continue
		}
		n += o.Size
	}
	return n
}

// versionOf is the version whose directory under a versioned entry's
// parent holds file name (a file, not a directory placeholder or the
// version's bucket.ChecksumFile, as the supervisor finds versions).
func versionOf(parent, name string) (int64, bool) {
	rest, ok := strings.CutPrefix(name, parent)
	if !ok || strings.HasSuffix(rest, "/") {
		return 0, false
	}
	dir, file, ok := strings.Cut(rest, "/")
	if !ok || file == bucket.ChecksumFile {
		return 0, false
	}
	return modelconfig.ParseVersion(dir)
}

// Drain marks the node draining, so that the controller places its
// models elsewhere, and returns once every model it holds ready is ready
// on another node too, or when ctx is done (drain_timeout). It returns
// early, logging which models go unserved, when no other live member can
// take them: no member but this one is live and not draining, or the
// placement table written since the node said it drains places each
// model left on no node but this one (it fits nowhere else), since
// waiting would only delay the exit. It returns early too when the node
// is no member (its session ended: etcd unreachable for a lease TTL, so
// nobody can learn it drains, and the controller re-places its models as
// a dead node's), rather than spend the shutdown's whole drain_timeout,
// which the servers and the prediction log's flush share. The node keeps
// serving meanwhile.
func (a *Agent) Drain(ctx context.Context) error {
	a.draining.Store(true)
	a.writeRecordNow()
	a.log.Info("draining: waiting for this node's models to be ready on other nodes")
	t := time.NewTicker(100 * time.Millisecond)
	defer t.Stop()
	for {
		left := a.handoverLeft()
		if len(left) == 0 {
			a.log.Info("drained: every model of this node is ready elsewhere")
			return nil
		}
		if !a.isMember() {
			a.log.Warn("draining: this node is no cluster member (etcd unreachable for a lease TTL): nobody can take over its models through it; leaving", "models", left)
			return nil
		}
		if !a.othersServing() {
			a.log.Warn("draining: no other live node to hand over to; leaving", "models", left)
			return nil
		}
		if NowhereElse(*a.table.Load(), a.cfg.Name, left) {
			a.log.Warn("draining: no other node has room for this node's remaining models; leaving without waiting for drain_timeout", "models", left)
			return nil
		}
		select {
		case <-ctx.Done():
			a.log.Warn("drain timeout: models ready on no other node", "models", left)
			return ctx.Err()
		case <-t.C:
		}
	}
}

// NowhereElse reports whether the table p places each of paths (model
// entry paths) on no node but name, and reports it unplaceable with no
// copy on a node that is not draining: the controller placed it after it
// saw name draining (before, name counted as a copy), and found no other
// node with room for it.
func NowhereElse(p coord.Placement, name string, paths []string) bool {
	for _, path := range paths {
		for _, n := range p.Table[path] {
			if n != name {
				return false
			}
		}
		i := slices.IndexFunc(p.Unplaceable, func(s placement.Shortfall) bool { return s.Path == path })
		if i < 0 || p.Unplaceable[i].Placed > 0 {
			return false
		}
	}
	return true
}

// isMember reports whether the node's current session is alive.
func (a *Agent) isMember() bool {
	n := a.node.Load()
	if n == nil {
		return false
	}
	select {
	case <-n.Done():
		return false
	default:
		return true
	}
}

// lostSessionErr is Forward's answer while the node's session is lost
// or once it has left.
func (a *Agent) lostSessionErr() error {
	return &sessionLostError{retryAfter: a.cfg.Retry, left: a.left.Load()}
}

// sessionLostError is Forward's answer while the node's session is lost,
// or once it has left (left: it will not join again). Its kind is
// Unavailable (503, gRPC UNAVAILABLE); its RetryIn gives the front ends a
// Retry-After (actors.RetryAfter).
type sessionLostError struct {
	retryAfter time.Duration
	left       bool
}

func (e *sessionLostError) Error() string {
	if e.left {
		return "this node left the cluster (shutting down), so it forwards no request to other nodes"
	}
	return "this node lost its cluster session; rejoining, so it forwards no request to other nodes until then"
}

// Unwrap makes its kind Unavailable.
func (e *sessionLostError) Unwrap() error { return servables.ErrUnavailable }

// RetryIn is when a retry may find the node joined again (or, once it
// left, reach another node).
func (e *sessionLostError) RetryIn() time.Duration { return e.retryAfter }

// othersServing reports whether another member is live and not draining.
func (a *Agent) othersServing() bool {
	for _, m := range a.members.Load().List {
		if m.Name != a.cfg.Name && !m.Draining {
			return true
		}
	}
	return false
}

// handoverLeft lists the models (their entry paths in the config) this
// node holds ready that no other node has ready yet.
func (a *Agent) handoverLeft() []string {
	sys := a.sys.Load()
	if sys == nil {
		return nil
	}
	ready := a.ready.Load().peers
	var left []string
	for _, s := range sys.Status().Models {
		if s.Registered || s.State != actors.StateReady {
			continue
		}
		if len(ready[s.Path]) == 0 {
			entry := s.Path
			if s.VersionOf != "" {
				entry = s.VersionOf
			}
			if !slices.Contains(left, entry) {
				left = append(left, entry)
			}
		}
	}
	return left
}

// Leave ends the membership at once (the lease revoked): the record
// vanishes for every peer, and Run returns without joining again. A
// session that has already ended has no lease left to revoke. Leave does
// not wait for a join in flight: it cancels it, and Run revokes the
// lease of a join that completes after Leave all the same.
func (a *Agent) Leave(ctx context.Context) error {
	a.leaving.Lock()
	if !a.left.Swap(true) {
		close(a.leftc)
	}
	n := a.node.Load()
	a.leaving.Unlock()
	if n == nil || closed(n.Done()) {
		return nil
	}
	if err := n.Leave(ctx); err != nil {
		return err
	}
	a.log.Info("left the cluster")
	return nil
}
