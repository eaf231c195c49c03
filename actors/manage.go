package actors

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/groveml/grove/conf/bucket"
	"github.com/groveml/grove/conf/modelconfig"
	"github.com/groveml/grove/logging/audit"
	"github.com/groveml/grove/servables"
)

// ErrReadOnly means the bucket cannot be written, so the management API
// cannot change the model config or the contract state.
var ErrReadOnly = servables.NewError(servables.ReadOnly, "the bucket is read-only")

// EditConfig changes the model config object in the bucket: it reads it,
// applies edit, validates the result and writes it back in canonical form
// on condition that nobody wrote it in between, retrying from a fresh read
// on a conflict (see bucket.Update), so concurrent edits by any number of
// replicas all land. It then makes this replica apply the new config
// before returning (other replicas pick it up at their next poll), and
// returns the config written. If reading or applying it here panics (a
// bug: an internal error, logged and counted), the edit is still answered
// as written, with no error: it is in the bucket, the next poll applies it,
// and a caller told to retry would make it again.
//
// Errors from edit (such as modelconfig.ErrServableExists) and validation errors
// (*modelconfig.Error) are returned wrapped; the bucket is then unchanged.
// Errors name no server path (serverPaths).
func (s *System) EditConfig(ctx context.Context, edit func(*modelconfig.Config) error) (*modelconfig.Config, error) {
	w, ok := s.opts.Bucket.(bucket.Writer)
	if !ok {
		return nil, fmt.Errorf("%w: %s", ErrReadOnly, s.opts.Bucket)
	}
	rec := audit.FromContext(ctx)
	var before, written *modelconfig.Config
	err := bucket.Update(ctx, w, s.opts.ModelConfigPath, modelconfig.MaxConfigBytes, func(current []byte, exists bool) ([]byte, error) {
		cfg := &modelconfig.Config{}
		before = nil
		if exists {
			var err error
			if cfg, err = modelconfig.Parse(current); err != nil {
				return nil, fmt.Errorf("the model config in the bucket is invalid, fix it first: %w", err)
			}
			if rec != nil { // a copy to compare the edit with (it parsed above)
				before, _ = modelconfig.Parse(current)
			}
		}
		if err := edit(cfg); err != nil {
			return nil, err
		}
		data, err := cfg.Validate()
		if err != nil {
			return nil, err
		}
		// What the supervisor would refuse to apply is refused here, not
		// written.
		if err := cfg.ValidateOutcomeLogging(cmp.Or(s.opts.DirectLogLevel, modelconfig.LogLevelNone)); err != nil {
			return nil, err
		}
		written = cfg
		return data, nil
	})
	if err != nil {
		return nil, s.paths.Error(err)
	}
	rec.ConfigChange(before, written)
	if err := s.Reload(ctx); errors.Is(err, errInternal) {
		s.log.Warn("model config written; reading or applying it here panicked, the next poll applies it", "err", err)
	} else if err != nil {
		return written, s.paths.Error(fmt.Errorf("config written, not yet applied here: %w", err))
	}
	return written, nil
}

// Reload reads the model config now, and returns once it is applied (its
// models may still be loading), or with the internal error that cut the
// poll or its application short (the next poll applies it again).
func (s *System) Reload(ctx context.Context) error {
	done := make(chan error, 1)
	s.as.Root.Send(s.supervisor, reloadRequest{done: done})
	select {
	case err := <-done:
		return err
	case <-ctx.Done():
		return ctx.Err()
	case <-s.stopped:
		return ErrStopped
	}
}

// DeleteServable removes release rv from contract id (see
// modelconfig.Config.RemoveServable) and forgets its shared state: its
// stamps and metrics.
func (s *System) DeleteServable(ctx context.Context, id, rv string) error {
	if _, err := s.EditConfig(ctx, func(c *modelconfig.Config) error { return c.RemoveServable(id, rv) }); err != nil {
		return err
	}
	w, ok := s.opts.Bucket.(bucket.Writer)
	if !ok {
		return nil
	}
	var before modelconfig.ServableRecord
	err := s.state.update(ctx, w, func(st *modelconfig.ContractState) error {
		st.Edit(id, rv, func(r *modelconfig.ServableRecord) { before, *r = *r, modelconfig.ServableRecord{} })
		return nil
	})
	if err != nil {
		return fmt.Errorf("servable deleted; its recorded state remains: %w", err)
	}
	audit.FromContext(ctx).StateChange(id, rv, &before, nil)
	return nil
}

// SetMetrics records performance metrics of release rv of contract id in
// the shared contract state, for min_metric and keep_top_ranked, and
// returns all of its metrics. Every replica sees them at its next poll;
// this one at once.
func (s *System) SetMetrics(ctx context.Context, id, rv string, u modelconfig.MetricsUpdate) (map[string]float64, error) {
	if _, err := s.servable(ctx, id, rv); err != nil {
		return nil, err
	}
	w, ok := s.opts.Bucket.(bucket.Writer)
	if !ok {
		return nil, fmt.Errorf("%w: %s", ErrReadOnly, s.opts.Bucket)
	}
	var out map[string]float64
	var before, after modelconfig.ServableRecord
	err := s.state.update(ctx, w, func(cs *modelconfig.ContractState) error {
		var err error
		cs.Edit(id, rv, func(r *modelconfig.ServableRecord) {
			var m map[string]float64
			before = *r
			if m, err = u.Apply(r.Metrics); err == nil {
				r.Metrics, out = m, m
			}
			after = *r
		})
		return err
	})
	if err != nil {
		return nil, err
	}
	audit.FromContext(ctx).StateChange(id, rv, &before, &after)
	return out, nil
}

// Contract returns the configured contract id, as in the config in force.
func (s *System) Contract(id string) (modelconfig.Contract, error) {
	return s.contract(context.Background(), id)
}

func (s *System) contract(ctx context.Context, id string) (modelconfig.Contract, error) {
	var k modelconfig.Contract
	var err error
	if qerr := s.askRouter(ctx, func(r *routerActor) {
		if st := r.contracts[id]; st != nil {
			k = st.cfg
		} else {
			err = fmt.Errorf("%w %s", ErrUnknownContract, id)
		}
	}); qerr != nil {
		return modelconfig.Contract{}, qerr
	}
	return k, err
}

// servable finds release rv of contract id in the config in force.
func (s *System) servable(ctx context.Context, id, rv string) (modelconfig.ContractServable, error) {
	k, err := s.contract(ctx, id)
	if err != nil {
		return modelconfig.ContractServable{}, err
	}
	for _, sv := range k.Servables {
		if sv.ReleaseVersion == rv {
			return sv, nil
		}
	}
	return modelconfig.ContractServable{}, fmt.Errorf("%w %s in contract %s", ErrUnknownRelease, rv, id)
}

// ServableInfo describes the model a release of a contract serves, for the
// metadata API.
type ServableInfo struct {
	// Ready reports whether the model is loaded.
	Ready bool
	// Checksum and Metadata describe the loaded content (empty if not ready).
	Checksum string
	Metadata servables.Metadata
	// Created is when the release was first configured (zero if unknown).
	Created time.Time
	// Metrics are its performance metrics.
	Metrics map[string]float64
}

// Servable describes release rv of contract id.
func (s *System) Servable(id, rv string) (ServableInfo, error) {
	sv, err := s.servable(context.Background(), id, rv)
	if err != nil {
		return ServableInfo{}, err
	}
	rec := s.state.load().Record(id, rv)
	info := ServableInfo{Created: rec.Created, Metrics: rec.Metrics}
	if c := (*s.routes.Load())[sv.ModelPath]; c != nil {
		info.Ready, info.Checksum, info.Metadata = true, c.checksum, c.metadata()
	}
	return info, nil
}

// ModelMetadata describes the content serving path: its runtime's signature
// and checksum; on a cluster node, a path ready only on other nodes is
// described as they published it (Remote.Model). ok is false when no
// content serves it.
func (s *System) ModelMetadata(path string) (meta servables.Metadata, checksum string, ok bool) {
	c := (*s.routes.Load())[path]
	if c == nil {
		if info, ok := s.remoteModel(path); ok {
			return info.Metadata(), info.Checksum, true
		}
		return servables.Metadata{}, "", false
	}
	return c.metadata(), c.checksum, true
}

// ModelServing is how the content serving a model path runs: its model
// actors and its dynamic batching.
type ModelServing struct {
	// Replicas is the number of model actors.
	Replicas int
	// MaxBatchRows is the most rows one forward call takes from queued
	// requests (the entry's max_batch_rows, else the server's); 1 when the
	// model is not batched.
	MaxBatchRows int
	// MaxQueueDelay is how long a lone request waits for others to batch
	// with (max_queue_delay_us; 0 when not batched).
	MaxQueueDelay time.Duration
}

// ModelServing describes how the content serving path runs (on a cluster
// node, on the node that has it ready when it is not here); ok is false
// when no content serves it.
func (s *System) ModelServing(path string) (serving ModelServing, ok bool) {
	c := (*s.routes.Load())[path]
	if c == nil {
		if info, ok := s.remoteModel(path); ok {
			return ModelServing{Replicas: info.Replicas, MaxBatchRows: info.MaxBatchRows, MaxQueueDelay: info.MaxQueueDelay}, true
		}
		return ModelServing{}, false
	}
	return c.serving, true
}
