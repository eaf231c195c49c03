package actors

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/groveml/grove/actors/lifecycle"
	"github.com/groveml/grove/conf/bucket"
	"github.com/groveml/grove/conf/modelconfig"
	"github.com/groveml/grove/logging/audit"
	"github.com/groveml/grove/servables"
)

// Registration errors, for the APIs to map to their status codes.
var (
	// ErrManagedByConfig: the model path is listed in the bucket config,
	// which wins over registrations.
	ErrManagedByConfig = servables.NewError(servables.Conflict, "the model path is managed by the model config")
	// ErrAlreadyRegistered: a model with that path is already served.
	ErrAlreadyRegistered = servables.NewError(servables.Conflict, "model path already exists")
	// ErrNotRegistered: no registered model has that path.
	ErrNotRegistered = servables.NewError(servables.NotFound, "model path is not registered")
	// ErrBadRegistration: the registration request itself is invalid.
	ErrBadRegistration = servables.NewError(servables.InvalidInput, "invalid model registration")
)

// Messages to the supervisor for the registration API.
type (
	registerRequest struct {
		path    string
		files   map[string][]byte
		warmUp  string
		waiting chan error
	}
	unregisterRequest struct {
		path  string
		reply chan error
	}
)

// RegisterModel loads a model from files sent by the caller rather than
// from the bucket, as the B&A inference sidecar's RegisterModel does: the
// keys of files are full bucket paths under modelPath (every file under
// the prefix for a directory path ending in "/", exactly modelPath
// otherwise). It returns once the model is ready (warm-up included) or
// failed.
//
// Registered models are kept apart from the config: reconciliation never
// evicts them. If the config lists the same path, the config wins: its
// content replaces the registered one (and a registration of a path the
// config lists is refused with ErrManagedByConfig). A failed registration
// is not retried.
func (s *System) RegisterModel(ctx context.Context, modelPath string, files map[string][]byte, warmUpJSON string) error {
	if err := modelconfig.ValidateModelPath(modelPath); err != nil {
		return fmt.Errorf("%w: model path %q: %v", ErrBadRegistration, modelPath, err)
	}
	if len(files) == 0 {
		return fmt.Errorf("%w: model %s has no model files", ErrBadRegistration, modelPath)
	}
	for name := range files {
		if under := strings.HasSuffix(modelPath, "/") && strings.HasPrefix(name, modelPath) && name != modelPath; !under && name != modelPath {
			return fmt.Errorf("%w: model file %q is not under model path %q (keys are full bucket paths)", ErrBadRegistration, name, modelPath)
		}
	}
	if warmUpJSON != "" && s.opts.ParseWarmUp != nil {
		// A malformed warm-up request is the caller's error, found before
		// any loading.
		if _, err := s.opts.ParseWarmUp(warmUpJSON, modelPath); err != nil {
			return fmt.Errorf("%w: model %s: warm_up_batch_request_json: %v", ErrBadRegistration, modelPath, err)
		}
	}
	waiting := make(chan error, 1)
	s.as.Root.Send(s.supervisor, registerRequest{path: modelPath, files: files, warmUp: warmUpJSON, waiting: waiting})
	select {
	case err := <-waiting:
		if err == nil {
			after := audit.Model{Path: modelPath, Files: map[string]int{}, WarmUp: warmUpJSON != ""}
			for name, data := range files {
				after.Files[name] = len(data)
			}
			if meta, sum, ok := s.ModelMetadata(modelPath); ok {
				after.Checksum, after.Runtime = sum, meta.Runtime
			}
			audit.FromContext(ctx).Change(audit.SectionRegisteredModel, nil, after)
		}
		return err
	case <-ctx.Done():
		return fmt.Errorf("registering model %s: %w (it may still load)", modelPath, ctx.Err())
	case <-s.stopped:
		return fmt.Errorf("registering model %s: %w", modelPath, ErrStopped)
	}
}

// DeleteModel unloads a registered model at once (requests already queued
// are answered); paths listed in the config are refused with
// ErrManagedByConfig.
func (s *System) DeleteModel(ctx context.Context, modelPath string) error {
	before := audit.Model{Path: modelPath}
	if meta, sum, ok := s.ModelMetadata(modelPath); ok {
		before.Checksum, before.Runtime = sum, meta.Runtime
	}
	reply := make(chan error, 1)
	s.as.Root.Send(s.supervisor, unregisterRequest{path: modelPath, reply: reply})
	select {
	case err := <-reply:
		if err == nil {
			audit.FromContext(ctx).Change(audit.SectionRegisteredModel, before, nil)
		}
		return err
	case <-ctx.Done():
		return ctx.Err()
	case <-s.stopped:
		return ErrStopped
	}
}

// register starts the load of a registered model.
func (s *supervisorActor) register(ctx actor.Context, r registerRequest) {
	if s.quiet {
		r.waiting <- fmt.Errorf("model %s: %w", r.path, ErrStopped)
		return
	}
	if s.versionedPath(r.path) {
		r.waiting <- registrationError(r.path, lifecycle.ErrManagedByConfig)
		return
	}
	prev, had := s.sources[r.path]
	s.sources[r.path] = bucket.NewMemory("registered:"+r.path, r.files)
	now := time.Now()
	if err := s.plan.Apply(lifecycle.Registered{Meta: modelconfig.Model{Path: r.path, WarmUpJSON: r.warmUp}}, now); err != nil {
		if had {
			s.sources[r.path] = prev
		} else {
			delete(s.sources, r.path)
		}
		r.waiting <- registrationError(r.path, err)
		return
	}
	// Before its steps are taken: the planner has the registration, and
	// its outcome (lifecycle.Notify) answers the caller even if taking
	// them panics (supervisorActor.panicked).
	s.waiters[r.path] = append(s.waiters[r.path], r.waiting)
	if !s.quiet {
		s.execute(ctx, now)
	}
}

// unregister unloads a registered model now and answers reply. The
// deletion is done once the planner has it: its caller hears so even if
// taking its steps panics (the next event takes them).
func (s *supervisorActor) unregister(ctx actor.Context, m unregisterRequest) {
	now := time.Now()
	if err := s.plan.Apply(lifecycle.Unregistered{Path: m.path}, now); err != nil {
		m.reply <- registrationError(m.path, err)
		return
	}
	defer func() { m.reply <- nil }()
	s.log.Info("registered model deleted", "model", m.path)
	if !s.quiet {
		s.execute(ctx, now)
	}
}

// registrationError is the error a registration's caller gets for the
// planner's err: its own sentinels become the kinded ones of this package.
func registrationError(path string, err error) error {
	switch {
	case err == nil:
		return nil
	case errors.Is(err, lifecycle.ErrManagedByConfig):
		return fmt.Errorf("model %s: %w", path, ErrManagedByConfig)
	case errors.Is(err, lifecycle.ErrAlreadyRegistered):
		return fmt.Errorf("model %s: %w", path, ErrAlreadyRegistered)
	case errors.Is(err, lifecycle.ErrNotRegistered):
		return fmt.Errorf("model %s: %w", path, ErrNotRegistered)
	case errors.Is(err, lifecycle.ErrDeletedWhileLoading):
		return fmt.Errorf("model %s: %w", path, errDeletedWhileLoading)
	}
	return err
}

// errDeletedWhileLoading answers a registration deleted before it was ready.
var errDeletedWhileLoading = servables.NewError(servables.Conflict, "deleted while loading")
