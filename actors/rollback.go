package actors

import (
	"context"
	"fmt"
	"slices"
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
	// Version and FromVersion are, for a versioned entry, the version
	// serving now and the one rolled back from (0 otherwise).
	Version, FromVersion int64
	// Took is the time from the call to the kept content serving.
	Took time.Duration
}

// Rollback puts the previous content of model path, kept loaded out of
// service since an in-place update (keep_previous_for), back into service.
// It writes the kept content's checksum, serving options and signature
// into the path's entry of the model config in the bucket (EditConfig), so
// every replica goes back at its next poll and later polls keep it there,
// and returns once this replica serves the kept content, which takes no
// load. For a versioned entry (path is its path or one of its versions'),
// it goes back to an older version instead: see rollbackVersion. Errors: ErrModelNotFound for a path no model has, ErrNothingKept
// (saying why) when nothing is kept, ErrNotAnEntry for a path the config
// has no entry of, and those of EditConfig (ErrReadOnly, a lost race).
func (s *System) Rollback(ctx context.Context, path string) (Rolled, error) {
	start := time.Now()
	var m *ModelStatus
	st := s.freshStatus()
	for i := range st.Models {
		if st.Models[i].Path == path {
			m = &st.Models[i]
		}
	}
	if v := versionedEntry(st, path, m); v != nil {
		return s.rollbackVersion(ctx, start, st, v, m)
	}
	switch {
	case m == nil:
		return Rolled{}, fmt.Errorf("%w: no model has the path %q", ErrModelNotFound, path)
	case m.Registered:
		// Checked first: a registration keeps nothing.
		return Rolled{}, fmt.Errorf("%w: %s is a registered model", ErrNotAnEntry, path)
	case m.Kept == nil:
		return Rolled{}, nothingKept(m)
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
	// it again brings its kept content back). (A version such as pcvr/3/
	// is rolled back by rollbackVersion.)
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

// versionedEntry returns the versioned entry a rollback of path concerns:
// the entry whose path it is (even while a model of that path, from
// before the entry had a policy, is still loaded), or the entry of the
// version m it names; nil for a path that is neither.
func versionedEntry(st *Status, path string, m *ModelStatus) *VersionedStatus {
	entry := path
	if m != nil && m.VersionOf != "" {
		entry = m.VersionOf
	}
	for i := range st.Versioned {
		if st.Versioned[i].Path == entry {
			return &st.Versioned[i]
		}
	}
	return nil
}

// rollbackVersion rolls versioned entry v back from the version it serves
// (or from version m, when the call named a version path) to the newest
// older version still loaded (serving under the policy, within its grace
// period, or kept after leaving the policy: keep_previous_for) and still
// in the bucket, since a pinned version must be listed to serve. It pins
// the entry's version_policy to {"specific": [the versions the policy
// serves below the one rolled back from, and the one rolled back to]}, so
// that every replica agrees and newer versions are not picked up again
// until the operator changes the policy, and returns once the entry's
// path serves that version, which takes no load.
func (s *System) rollbackVersion(ctx context.Context, start time.Time, st *Status, v *VersionedStatus, m *ModelStatus) (Rolled, error) {
	from := v.ServingVersion
	if m != nil && m.VersionOf != "" {
		from = m.Version
	}
	if from == 0 {
		return Rolled{}, fmt.Errorf("%w for %s: no version of it serves", ErrNothingKept, v.Path)
	}
	var to *ModelStatus
	var fromSum string
	for i := range st.Models {
		ms := &st.Models[i]
		if ms.VersionOf != v.Path {
			continue
		}
		if ms.Version == from {
			fromSum = ms.Checksum
		}
		loaded := (ms.Checksum != "" && (ms.State == StateReady || ms.State == StateEvicting)) || ms.Kept != nil
		// A version gone from the bucket cannot be listed again: pinned
		// to it, the entry would serve none of its versions.
		listed := slices.Contains(v.Found, ms.Version)
		if ms.Version < from && loaded && listed && (to == nil || ms.Version > to.Version) {
			to = ms
		}
	}
	if to == nil {
		return Rolled{}, fmt.Errorf("%w for %s: no version older than %d is loaded and still in the bucket (a version that left the policy stays loaded for the longer of its grace period and keep_previous_for); pin version_policy to an older version in the config to load it afresh",
			ErrNothingKept, v.Path, from)
	}
	found := slices.Clone(v.Found)
	_, err := s.EditConfig(ctx, func(c *modelconfig.Config) error {
		for i := range c.Models {
			if e := &c.Models[i]; e.Path == v.Path && e.IsVersioned() {
				keep := slices.DeleteFunc(e.VersionPolicy.Select(found), func(n int64) bool { return n >= from })
				if !slices.Contains(keep, to.Version) {
					keep = append(keep, to.Version)
				}
				slices.Sort(keep)
				e.VersionPolicy = &modelconfig.VersionPolicy{Kind: modelconfig.VersionsSpecific, Versions: keep}
				return nil
			}
		}
		return fmt.Errorf("%w: %s is no longer a versioned entry of the model config", ErrNotAnEntry, v.Path)
	})
	if err != nil {
		return Rolled{}, err
	}
	// EditConfig applied the config here before returning: the entry's
	// path serves the version rolled back to, unless it was released in
	// between.
	c := (*s.routes.Load())[v.Path]
	if c == nil || c.path != to.Path {
		return Rolled{}, fmt.Errorf("%w for %s: the policy is now pinned to version %d, but its loaded copy was released meanwhile, so it is loaded afresh",
			ErrNothingKept, v.Path, to.Version)
	}
	return Rolled{ModelPath: v.Path, Checksum: c.checksum, From: fromSum, Version: to.Version, FromVersion: from, Took: time.Since(start)}, nil
}
