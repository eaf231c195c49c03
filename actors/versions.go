package actors

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/groveml/grove/actors/lifecycle"
	"github.com/groveml/grove/conf/bucket"
	"github.com/groveml/grove/conf/modelconfig"
)

// versionListing is what a config poll found under a versioned entry's
// directory: its version numbers, or the error listing it.
type versionListing struct {
	found []int64
	err   error
}

// listVersions lists the directory of each versioned entry of cfg.
func listVersions(ctx context.Context, b bucket.Bucket, cfg *modelconfig.Config) map[string]versionListing {
	var out map[string]versionListing
	for _, m := range cfg.Models {
		if !m.IsVersioned() {
			continue
		}
		if out == nil {
			out = map[string]versionListing{}
		}
		objs, err := b.List(ctx, m.Path)
		if err != nil {
			out[m.Path] = versionListing{err: fmt.Errorf("listing the versions of %s in %s: %w", m.Path, b, err)}
			continue
		}
		out[m.Path] = versionListing{found: versionDirs(m.Path, objs)}
	}
	return out
}

// versionDirs returns the versions found in a listing of a versioned
// entry's directory parent: the immediate sub-directories whose name is a
// version number (modelconfig.ParseVersion) holding at least one file
// other than a directory placeholder or their root's
// bucket.ChecksumFile. They are in ascending order.
func versionDirs(parent string, objs []bucket.Object) []int64 {
	var out []int64
	for _, o := range objs {
		rest, ok := strings.CutPrefix(o.Name, parent)
		if !ok || strings.HasSuffix(rest, "/") {
			continue
		}
		dir, file, ok := strings.Cut(rest, "/")
		if !ok || file == bucket.ChecksumFile {
			continue
		}
		if v, ok := modelconfig.ParseVersion(dir); ok && !slices.Contains(out, v) {
			out = append(out, v)
		}
	}
	slices.Sort(out)
	return out
}

// versionsKnown is what the supervisor knows of a versioned entry of the
// config in force.
type versionsKnown struct {
	entry modelconfig.Model
	// found are the versions of the last listing that worked.
	found []int64
	// newest is the highest version of found its policy selects (0: none).
	newest int64
	// listErr and listErrAt describe the last listing, if it failed.
	listErr   string
	listErrAt time.Time
}

// expandVersions returns the models cfg asks for, each versioned entry
// replaced by its versions (modelconfig.Model.Expand) as listings found
// them; an entry whose listing failed keeps the versions found before.
// It records what it found in s.versioned.
func (s *supervisorActor) expandVersions(cfg *modelconfig.Config, listings map[string]versionListing, at time.Time) []modelconfig.Model {
	prev := make(map[string]versionsKnown, len(s.versioned))
	for _, v := range s.versioned {
		prev[v.entry.Path] = v
	}
	s.versioned = s.versioned[:0]
	out := make([]modelconfig.Model, 0, len(cfg.Models))
	for _, m := range cfg.Models {
		if !m.IsVersioned() {
			out = append(out, m)
			continue
		}
		k := versionsKnown{entry: m, found: prev[m.Path].found}
		switch l := listings[m.Path]; {
		case l.err != nil:
			k.listErr, k.listErrAt = s.sys.paths.String(l.err.Error()), at
			s.log.Error("versioned model not listed; the versions found before stay in force", "model", m.Path, "versions", k.found, "err", l.err)
		case !slices.Equal(l.found, k.found):
			s.log.Info("versions found", "model", m.Path, "versions", l.found, "serving", m.VersionPolicy.Select(l.found))
			k.found = l.found
		}
		if sel := m.VersionPolicy.Select(k.found); len(sel) > 0 {
			k.newest = slices.Max(sel)
		}
		s.versioned = append(s.versioned, k)
		vs := m.Expand(k.found)
		if held := s.heldVersion(m, vs); held != nil {
			s.log.Warn("no version in the policy is ready; the version serving stays until one is", "model", m.Path,
				"serving", held.Desired.Version, "policy", m.VersionPolicy.Select(k.found))
			vs = append(vs, m.AtVersion(held.Desired.Version))
			slices.SortFunc(vs, func(a, b modelconfig.Model) int { return cmp.Compare(a.Version, b.Version) })
		}
		out = append(out, vs...)
	}
	return out
}

// heldVersion returns, when none of the versions sel that the policy of
// versioned entry m selects is ready (or loaded, so that listing it
// makes it ready at once), the highest version of m that
// serves (ready, or within its grace period after leaving the policy):
// it is held in service until one of sel is, so that a new version that
// fails to load does not take the entry's service away (TF Serving's
// availability-preserving policy). Nil when one of sel is ready, or none
// other serves.
func (s *supervisorActor) heldVersion(m modelconfig.Model, sel []modelconfig.Model) *lifecycle.Path {
	for _, v := range sel {
		// Serving, or about to at once: within its grace period (listed
		// again, it stays) or kept (listed again, it is restored).
		if p := s.plan.Path(v.Path); p != nil && !p.Registered && (p.Active != nil && !p.Active.Broken || p.Kept != nil) {
			return nil
		}
	}
	var best *lifecycle.Path
	for _, p := range s.plan.Paths() {
		if p.Desired.VersionOf != m.Path || p.Registered || p.Active == nil || p.Active.Broken ||
			!(readyVersion(p) || p.Phase == lifecycle.Evicting) {
			continue
		}
		if best == nil || p.Desired.Version > best.Desired.Version {
			best = p
		}
	}
	return best
}

// loadNewVersions has the newest version of each on-demand versioned
// entry (the highest of its policy) loaded when a lower version serves
// the entry's path and the newest has never served: requests for the
// path reach the lower one, so none would load it, and the path would
// not move to it. A new version is what a loaded model's new content is
// to an unversioned entry: it loads at once (a failed one, new or not, is
// tried again, once its backoff is over, when a later poll asks). Once it
// has served, it loads on demand like any on-demand model, a request for the
// entry's path included (reloadVersions): asked for at each poll, it
// would load again each time it was unloaded (idle, or to make room
// under the memory budget for the lower version callers name), over and
// over.
func (s *supervisorActor) loadNewVersions(ctx actor.Context) {
	serving := servingVersions(s.plan.Paths())
	for _, v := range s.versioned {
		if p := s.newestDemandable(v, serving[v.entry.Path]); p != nil && (!servedBefore(p) || p.Failures > 0) {
			s.apply(ctx, lifecycle.Demand{Path: p.Name})
		}
	}
}

// newestDemandable returns the record of the newest version of versioned
// entry v (the highest of its policy) when it is higher than version on,
// which serves the entry's path (servingVersions), and is an on-demand
// path with no content (demandable); nil otherwise.
func (s *supervisorActor) newestDemandable(v versionsKnown, on *lifecycle.Path) *lifecycle.Path {
	if on == nil || v.newest <= on.Desired.Version {
		return nil
	}
	if p := s.plan.Path(v.entry.AtVersion(v.newest).Path); p != nil && s.demandable(p) {
		return p
	}
	return nil
}

// servedBefore reports whether path p has had a content in service (the
// planner records its load's cost when it swaps in).
func servedBefore(p *lifecycle.Path) bool { return p.Cost.Checksum != "" }

// reloadVersions maps the path of each versioned entry whose newest
// version has served before and has no content now (unloaded, or loading
// again) while a lower version serves the path (newestDemandable), to
// that newest version: the entry's path goes to its demand slot
// (publishDemand) rather than to the lower version (publishRoutes), so
// that a request for the path loads it, as one for the version does. A
// newest version whose last load failed leaves the path to the lower
// version until a load of it succeeds: a poll asks for one once its
// backoff is over (loadNewVersions). An entry whose path has a model of its own (one
// leaving the config) is left out.
func (s *supervisorActor) reloadVersions(paths []*lifecycle.Path) map[string]*lifecycle.Path {
	if len(s.versioned) == 0 {
		return nil
	}
	var out map[string]*lifecycle.Path
	serving := servingVersions(paths)
	for _, v := range s.versioned {
		p := s.newestDemandable(v, serving[v.entry.Path])
		if p == nil || !servedBefore(p) || p.Failures > 0 || s.plan.Path(v.entry.Path) != nil {
			continue
		}
		if out == nil {
			out = map[string]*lifecycle.Path{}
		}
		out[v.entry.Path] = p
	}
	return out
}

// readyVersion reports whether version path p is ready to serve its
// entry: in the policy, loaded and not broken by a crash.
func readyVersion(p *lifecycle.Path) bool {
	return (p.Phase == lifecycle.Ready || p.Phase == lifecycle.Swapping) && p.Active != nil && !p.Active.Broken
}

// servingVersions picks, for each versioned entry with a version loaded,
// the version its own path serves: the highest one that is ready (in the
// policy, and not broken by a crash), else, while every loaded version is
// leaving (evicting) or broken, the highest of them. It maps the entry's
// path to the chosen version's path record.
func servingVersions(paths []*lifecycle.Path) map[string]*lifecycle.Path {
	var out map[string]*lifecycle.Path
	rank := func(p *lifecycle.Path) int {
		if readyVersion(p) {
			return 1
		}
		return 0
	}
	for _, p := range paths {
		parent := p.Desired.VersionOf
		if parent == "" || p.Active == nil || p.Registered {
			continue
		}
		if out == nil {
			out = map[string]*lifecycle.Path{}
		}
		best := out[parent]
		if best == nil || rank(p) > rank(best) || rank(p) == rank(best) && p.Desired.Version > best.Desired.Version {
			out[parent] = p
		}
	}
	return out
}
