package actors

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/groveml/grove/conf/bucket"
	"github.com/groveml/grove/conf/modelconfig"
	"github.com/groveml/grove/internal/capped"
)

// sharedState is the contract state object (modelconfig.ContractState) as this
// replica knows it: the version last read or written, and the writes of
// this replica's observations (creation and valid-since stamps) waiting to
// be made. The supervisor refreshes it at every config poll; writes go
// through bucket.Update, so replicas writing at once lose nothing.
type sharedState struct {
	b    bucket.Bucket
	name string
	// limit is the most bytes the state object may have
	// (modelconfig.MaxStateBytes).
	limit int64
	log   *slog.Logger
	cur   atomic.Pointer[modelconfig.ContractState]
	// seen is set once cur holds a state read from the bucket or written
	// there (until then, cur is an empty state: see known).
	seen atomic.Bool

	// pub orders publishing: writes counts the states this replica wrote
	// and published, so that a state read before one of them is not
	// published over it (see publishRead).
	pub    sync.Mutex
	writes int64

	mu      sync.Mutex
	pending map[string]stateOp // by key; kept until written, so a change is asked for once
	queued  []string           // keys of pending ops not yet taken by the writer
	wake    chan struct{}
}

// stateOp changes the state; it must be idempotent and may run several
// times (once per write attempt).
type stateOp func(*modelconfig.ContractState)

// errStateUnchanged tells Update that the ops changed nothing.
var errStateUnchanged = errors.New("contract state unchanged")

// errStateFull is the error of a change that would make the state larger
// than its limit (the one read is not).
var errStateFull = errors.New("the change does not fit")

func newSharedState(b bucket.Bucket, configPath string, log *slog.Logger) *sharedState {
	s := &sharedState{b: b, name: modelconfig.StatePath(configPath), limit: modelconfig.MaxStateBytes, log: log, pending: map[string]stateOp{}, wake: make(chan struct{}, 1)}
	s.cur.Store(&modelconfig.ContractState{Contracts: map[string]map[string]modelconfig.ServableRecord{}})
	return s
}

// load returns the current state; it is never nil and must not be modified.
func (s *sharedState) load() *modelconfig.ContractState { return s.cur.Load() }

// readMark notes this replica's writes so far, to be given to publishRead
// with a state read after it.
func (s *sharedState) readMark() int64 {
	s.pub.Lock()
	defer s.pub.Unlock()
	return s.writes
}

// publishRead makes st, read after mark, the current state, unless this
// replica wrote a state since mark: that one is newer, and the next read
// brings whatever other replicas wrote after it.
func (s *sharedState) publishRead(st *modelconfig.ContractState, mark int64) bool {
	s.pub.Lock()
	defer s.pub.Unlock()
	if s.writes != mark {
		return false
	}
	s.cur.Store(st)
	s.seen.Store(true)
	return true
}

// known reports whether the current state is one read from the bucket or
// written there: before the first read or write that worked (at start,
// or while the bucket cannot be read), load returns an empty state that
// says nothing of what the object holds.
func (s *sharedState) known() bool { return s.seen.Load() }

// read reads the state object; a missing object is an empty state.
func (s *sharedState) read(ctx context.Context) (*modelconfig.ContractState, error) {
	data, _, err := s.b.ReadObject(ctx, s.name, s.limit)
	if errors.Is(err, bucket.ErrNotExist) {
		return modelconfig.ParseContractState(nil)
	}
	if err != nil {
		return nil, fmt.Errorf("reading contract state %s: %w", s.name, err)
	}
	st, err := modelconfig.ParseContractState(data)
	if err != nil {
		return nil, fmt.Errorf("contract state %s: %w", s.name, err)
	}
	return st, nil
}

// ask queues op under key unless an op with that key is pending.
func (s *sharedState) ask(key string, op stateOp) {
	s.mu.Lock()
	if _, dup := s.pending[key]; !dup {
		s.pending[key] = op
		s.queued = append(s.queued, key)
		select {
		case s.wake <- struct{}{}:
		default:
		}
	}
	s.mu.Unlock()
}

// run writes the queued ops until ctx is done, at most one write per
// second, so that observations made at many requests become one write.
func (s *sharedState) run(ctx context.Context) {
	w, ok := s.b.(bucket.Writer)
	for {
		select {
		case <-ctx.Done():
			return
		case <-s.wake:
		}
		s.mu.Lock()
		keys := s.queued
		s.queued = nil
		ops := make([]stateOp, len(keys))
		for i, k := range keys {
			ops[i] = s.pending[k]
		}
		s.mu.Unlock()
		var err error
		if !ok {
			err = fmt.Errorf("bucket %s is read-only", s.b)
		} else {
			if err = s.update(ctx, w, applyOps(ops)); errors.Is(err, errStateFull) {
				err = s.fitWithoutBandits(ctx, w, keys, ops)
			}
		}
		if err != nil && ctx.Err() == nil {
			s.log.Warn("could not record contract state; replicas may disagree on phase-in until it is written", "object", s.name, "err", err)
		}
		s.mu.Lock()
		for _, k := range keys {
			delete(s.pending, k)
		}
		s.mu.Unlock()
		select {
		case <-ctx.Done():
			return
		case <-time.After(time.Second):
		}
	}
}

// applyOps is the change that applies ops in turn.
func applyOps(ops []stateOp) func(*modelconfig.ContractState) error {
	return func(st *modelconfig.ContractState) error {
		for _, op := range ops {
			op(st)
		}
		return nil
	}
}

// banditSaveKey prefixes the key of a bandit router's save (saveBandit).
const banditSaveKey = "bandit "

// fitWithoutBandits writes ops (under keys), which made the state larger
// than its limit, giving up the bandit routers' saved counts first: they
// only spare a restarted router the evaluator's counts at full weight,
// where the stamps and gate decisions the other ops write are the
// fleet's. It writes the other ops without the saves, then, if that is
// still too large, with every router's saved counts removed.
func (s *sharedState) fitWithoutBandits(ctx context.Context, w bucket.Writer, keys []string, ops []stateOp) error {
	var rest []stateOp
	for i, k := range keys {
		if !strings.HasPrefix(k, banditSaveKey) {
			rest = append(rest, ops[i])
		}
	}
	if len(rest) == 0 {
		s.log.Warn("bandit counts not saved: the contract state would be larger than its limit", "object", s.name, "limit_bytes", s.limit)
		return nil
	}
	if len(rest) < len(ops) {
		err := s.update(ctx, w, applyOps(rest))
		if !errors.Is(err, errStateFull) {
			if err == nil {
				s.log.Warn("bandit counts not saved: the contract state would be larger than its limit", "object", s.name, "limit_bytes", s.limit)
			}
			return err
		}
	}
	err := s.update(ctx, w, func(st *modelconfig.ContractState) error {
		st.Bandits = nil
		return applyOps(rest)(st)
	})
	if err == nil {
		s.log.Warn("the contract state reached its size limit: every bandit router's saved counts were removed to make room for its stamps",
			"object", s.name, "limit_bytes", s.limit)
	}
	return err
}

// update changes the state object with change, with optimistic
// concurrency, and publishes the result.
func (s *sharedState) update(ctx context.Context, w bucket.Writer, change func(*modelconfig.ContractState) error) error {
	var written *modelconfig.ContractState
	err := bucket.Update(ctx, w, s.name, s.limit, func(current []byte, _ bool) ([]byte, error) {
		st, err := modelconfig.ParseContractState(current)
		if err != nil {
			return nil, fmt.Errorf("contract state %s: %w", s.name, err)
		}
		before, err := st.MarshalJSON()
		if err != nil {
			return nil, err
		}
		if err := change(st); err != nil {
			return nil, err
		}
		after, err := st.MarshalJSON()
		if err != nil {
			return nil, err
		}
		written = st
		if string(before) == string(after) {
			return nil, errStateUnchanged
		}
		if int64(len(after)) > s.limit {
			return nil, fmt.Errorf("%w: %w", errStateFull, &bucket.ContentTooLargeError{Err: &capped.TooLargeError{What: "the new contract state " + s.name, Limit: s.limit}})
		}
		return after, nil
	})
	if err != nil && !errors.Is(err, errStateUnchanged) {
		return err
	}
	s.pub.Lock()
	s.cur.Store(written)
	s.seen.Store(true)
	s.writes++
	s.pub.Unlock()
	return nil
}

// writable reports whether the state can be written (its bucket is a
// bucket.Writer).
func (s *sharedState) writable() bool {
	_, ok := s.b.(bucket.Writer)
	return ok
}

// saveBandit asks for the saved counts of contract id's bandit router to
// be those saved holds when the state is written.
func (s *sharedState) saveBandit(id string, saved *atomic.Pointer[json.RawMessage]) {
	s.ask(banditSaveKey+id, func(st *modelconfig.ContractState) {
		if p := saved.Load(); p != nil && !banditSavedRecently(st.Bandits[id], *p) {
			st.SetBandit(id, *p)
		}
	})
}

// forgetBandit asks for the saved counts of contract id's bandit router to
// be removed.
func (s *sharedState) forgetBandit(id string) {
	s.ask("forget bandit "+id, func(st *modelconfig.ContractState) { st.SetBandit(id, nil) })
}

// setCreated asks for release rv of contract id to get a creation stamp, if it has none.
func (s *sharedState) setCreated(id, rv string, t time.Time) {
	s.ask("created "+id+" "+rv, func(st *modelconfig.ContractState) {
		st.Edit(id, rv, func(r *modelconfig.ServableRecord) {
			if r.Created.IsZero() {
				r.Created = t
			}
		})
	})
}

// setValidSince asks for the valid-since stamp of release rv of contract
// id to be t if it has none, or to be cleared (t zero) if it is was.
func (s *sharedState) setValidSince(id, rv string, t, was time.Time) {
	s.ask("valid "+id+" "+rv, func(st *modelconfig.ContractState) {
		st.Edit(id, rv, func(r *modelconfig.ServableRecord) {
			switch {
			case !t.IsZero() && r.ValidSince.IsZero():
				r.ValidSince = t
			case t.IsZero() && r.ValidSince.Equal(was):
				r.ValidSince = time.Time{}
			}
		})
	})
}
