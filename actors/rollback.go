package actors

import (
	"context"
	"fmt"
	"time"

	"github.com/groveml/grove/conf/modelconfig"
	"github.com/groveml/grove/servables"
)

// Errors of Rollback.
var (
	// ErrNothingKept: the model has no previous content kept to go back to.
	ErrNothingKept = servables.NewError(servables.Conflict, "nothing kept to roll back to")
	// ErrNotAnEntry: the model path is served but is not an entry of the
	// model config that Rollback can edit.
	ErrNotAnEntry = servables.NewError(servables.Conflict, "not a model_metadata entry of the model config")
)

// Rolled describes a rollback done.
type Rolled struct {
	// ModelPath is the model rolled back.
	ModelPath string
	// Checksum is the checksum serving now, From the one serving before.
	Checksum, From string
	// Took is the time from the call to the kept content serving.
	Took time.Duration
}

// Rollback puts the previous content of model path, kept loaded out of
// service since an in-place update (keep_previous_for), back into service.
// It writes the kept content's checksum, serving options and signature
// into the path's entry of the model config in the bucket (EditConfig), so
// every replica goes back at its next poll and later polls keep it there,
// and returns once this replica serves the kept content, which takes no
// load. Errors: ErrModelNotFound for a path no model has, ErrNothingKept
// (saying why) when nothing is kept, ErrNotAnEntry for a path the config
// has no entry of, and those of EditConfig (ErrReadOnly, a lost race).
func (s *System) Rollback(ctx context.Context, path string) (Rolled, error) {
	start := time.Now()
	var m *ModelStatus
	st := s.status.Load()
	for i := range st.Models {
		if st.Models[i].Path == path {
			m = &st.Models[i]
		}
	}
	switch {
	case m == nil:
		return Rolled{}, fmt.Errorf("%w: no model has the path %q", ErrModelNotFound, path)
	case m.Kept == nil:
		return Rolled{}, nothingKept(m)
	case m.Registered:
		return Rolled{}, fmt.Errorf("%w: %s is a registered model", ErrNotAnEntry, path)
	}
	kept, id := m.keptMeta, m.keptID
	kept.Checksum = m.Kept.Checksum
	if _, err := s.EditConfig(ctx, func(c *modelconfig.Config) error { return rollbackEntry(c, path, kept) }); err != nil {
		return Rolled{}, err
	}
	// EditConfig applied the config here before returning, and a restore
	// is part of applying it: the kept content serves now, unless its
	// keep time ended in between.
	c := (*s.routes.Load())[path]
	if c == nil || c.id != id {
		return Rolled{}, fmt.Errorf("%w for %s: the config now asks for checksum %s, but its kept copy was released meanwhile, so it is loaded afresh",
			ErrNothingKept, path, kept.Checksum)
	}
	return Rolled{ModelPath: path, Checksum: c.checksum, From: m.Checksum, Took: time.Since(start)}, nil
}

// rollbackEntry makes the entry of path in c ask for the kept content:
// its checksum, and the serving options and signature it was loaded with.
func rollbackEntry(c *modelconfig.Config, path string, kept modelconfig.Model) error {
	for i := range c.Models {
		if e := &c.Models[i]; e.Path == path {
			e.Checksum, e.Serving, e.Signature = kept.Checksum, kept.Serving, kept.Signature
			return nil
		}
	}
	// A path that is no entry of its own: removed from the config (listing
	// it again brings its kept content back), or, once entries have
	// versions (version_policy), a version such as pcvr/3/, whose rollback
	// pins the entry's policy to the kept version here.
	return fmt.Errorf("%w: %s is not listed in the model config; list it again to bring its kept content back", ErrNotAnEntry, path)
}

// nothingKept says why m has no kept content.
func nothingKept(m *ModelStatus) error {
	switch {
	case m.KeepPreviousForMs == 0:
		return fmt.Errorf("%w for %s: keeping is off for it (keep_previous_for in grove.yaml, or keep_previous_for_ms in its entry, is 0)", ErrNothingKept, m.Path)
	case !m.keptReleased.IsZero():
		return fmt.Errorf("%w for %s: its previous content was released at %s, when its keep time (%v) ended", ErrNothingKept, m.Path,
			m.keptReleased.UTC().Format(time.RFC3339), time.Duration(m.KeepPreviousForMs)*time.Millisecond)
	}
	return fmt.Errorf("%w for %s: it has not been updated in place since keeping was on", ErrNothingKept, m.Path)
}
