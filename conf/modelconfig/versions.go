package modelconfig

import (
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"

	"github.com/groveml/grove/grovepb"
	"github.com/groveml/grove/internal/jsondoc"
)

// VersionPolicyKind names a version policy: its JSON key.
type VersionPolicyKind string

// The version policies, TF Serving's.
const (
	// VersionsLatest, {"latest": {"num_versions": N}}: the N (≥ 1) highest versions found.
	VersionsLatest VersionPolicyKind = "latest"
	// VersionsSpecific, {"specific": {"versions": [1, 3]}}: the listed versions that are found.
	VersionsSpecific VersionPolicyKind = "specific"
	// VersionsAll, {"all": {}}: every version found.
	VersionsAll VersionPolicyKind = "all"
)

var versionPolicyNames = []string{string(VersionsLatest), string(VersionsSpecific), string(VersionsAll)}

// VersionPolicy is a versioned entry's version_policy: which of the
// numbered version directories under its path are served.
type VersionPolicy struct {
	// Kind is the policy; a parsed config only has the VersionPolicyKind constants.
	Kind VersionPolicyKind
	// Latest is latest's num_versions.
	Latest int
	// Versions are specific's versions, as written.
	Versions []int64
}

// Select returns the versions of found (any order, no duplicates) that
// the policy serves, in ascending order.
func (p VersionPolicy) Select(found []int64) []int64 {
	sorted := slices.Sorted(slices.Values(found))
	switch p.Kind {
	case VersionsLatest:
		return sorted[max(len(sorted)-p.Latest, 0):]
	case VersionsSpecific:
		return slices.DeleteFunc(sorted, func(v int64) bool { return !slices.Contains(p.Versions, v) })
	case VersionsAll:
		return sorted
	}
	return nil
}

// MarshalJSON writes the policy in its config form, {"latest": {"num_versions": 2}}.
func (p VersionPolicy) MarshalJSON() ([]byte, error) { return json.Marshal(p.canonical()) }

// IsVersioned reports whether the entry is a versioned entry: a parent
// directory of numbered versions (it has a version policy).
func (m Model) IsVersioned() bool { return m.VersionPolicy != nil }

// EntryPath is the model_path of the config entry m comes from: its
// VersionOf for a version of a versioned entry, else its own Path.
func (m Model) EntryPath() string {
	if m.VersionOf != "" {
		return m.VersionOf
	}
	return m.Path
}

// Expand turns a versioned entry and the version numbers found under its
// directory into the models to serve: one per version the policy
// selects, in ascending order, at path Path+"N/", with the entry's
// settings, the checksum version_checksums gives it (if any), VersionOf
// set to the entry's path and Version to N. A model that is not versioned
// is returned as it is.
func (m Model) Expand(found []int64) []Model {
	if !m.IsVersioned() {
		return []Model{m}
	}
	var out []Model
	for _, v := range m.VersionPolicy.Select(found) {
		out = append(out, m.AtVersion(v))
	}
	return out
}

// AtVersion is version v of versioned entry m, as Expand makes it.
func (m Model) AtVersion(v int64) Model {
	c := m
	c.Path = m.Path + strconv.FormatInt(v, 10) + "/"
	c.Checksum = m.VersionChecksums[v]
	c.VersionPolicy, c.VersionChecksums = nil, nil
	c.VersionOf, c.Version = m.Path, v
	return c
}

// ParseVersion reads a version number as a version directory's name or a
// version_checksums key writes it: a positive decimal integer, without
// sign or leading zeros ("3", not "03" or "+3").
func ParseVersion(s string) (int64, bool) {
	v, err := strconv.ParseInt(s, 10, 64)
	if err != nil || v < 1 || strconv.FormatInt(v, 10) != s {
		return 0, false
	}
	return v, true
}

// versionParent returns the parent directory of path when path names a
// version directory ("pcvr/3/" gives "pcvr/"), else "".
func versionParent(path string) string {
	dir, ok := strings.CutSuffix(path, "/")
	if !ok {
		return ""
	}
	i := strings.LastIndexByte(dir, '/')
	if _, ok := ParseVersion(dir[i+1:]); !ok || i < 0 {
		return ""
	}
	return dir[:i+1]
}

// versionPolicyFromProto converts a version policy; unknown is the key it
// held if it held an unknown one.
func versionPolicyFromProto(p *grovepb.VersionPolicy, unknown string) *VersionPolicy {
	switch p := p.GetPolicy().(type) {
	case *grovepb.VersionPolicy_Latest_:
		return &VersionPolicy{Kind: VersionsLatest, Latest: int(p.Latest.GetNumVersions())}
	case *grovepb.VersionPolicy_Specific_:
		return &VersionPolicy{Kind: VersionsSpecific, Versions: p.Specific.GetVersions()}
	case *grovepb.VersionPolicy_All_:
		return &VersionPolicy{Kind: VersionsAll}
	}
	return &VersionPolicy{Kind: VersionPolicyKind(unknown)}
}

// versionChecksumsFromProto converts version_checksums; keys that are not
// version numbers are reported at entry.
func versionChecksumsFromProto(sums map[string]string, entry string) (map[int64]string, error) {
	if len(sums) == 0 {
		return nil, nil
	}
	out := make(map[int64]string, len(sums))
	for _, k := range slices.Sorted(maps.Keys(sums)) {
		v, ok := ParseVersion(k)
		if !ok {
			return nil, &Error{Field: entry + ".version_checksums", Msg: fmt.Sprintf("key %q is not a version number; keys are versions 1 or more written in decimal as strings, as in {\"3\": \"<checksum>\"}", k)}
		}
		out[v] = sums[k]
	}
	return out, nil
}

// validateVersioning checks the model at entry's version_policy and version_checksums.
func validateVersioning(entry string, m Model) error {
	if m.VersionPolicy == nil {
		if len(m.VersionChecksums) > 0 {
			return &Error{Field: entry + ".version_checksums", Msg: fmt.Sprintf("model %q: version_checksums needs a version_policy", m.Path)}
		}
		return nil
	}
	bad := func(field, format string, args ...any) error {
		return &Error{Field: entry + field, Msg: fmt.Sprintf("versioned model %q: ", m.Path) + fmt.Sprintf(format, args...)}
	}
	if !m.IsDir() {
		return bad(".model_path", "a versioned entry's model_path is the directory of its versions and must end in \"/\" (%q)", m.Path+"/")
	}
	if m.Checksum != "" {
		return bad(".checksum", "checksum does not apply to a versioned entry; give each version's checksum in version_checksums, as in {\"3\": \"<checksum>\"}")
	}
	switch p := m.VersionPolicy; p.Kind {
	case VersionsLatest:
		if p.Latest < 1 {
			return bad(".version_policy.latest.num_versions", "latest needs num_versions ≥ 1, got %d", p.Latest)
		}
	case VersionsSpecific:
		if len(p.Versions) == 0 {
			return bad(".version_policy.specific.versions", "specific needs at least one version")
		}
		for i, v := range p.Versions {
			at := fmt.Sprintf(".version_policy.specific.versions[%d]", i)
			if v < 1 {
				return bad(at, "version %d is not a version number; versions are 1 or more", v)
			}
			if slices.Contains(p.Versions[:i], v) {
				return bad(at, "version %d is listed twice", v)
			}
		}
	case VersionsAll:
	default:
		return bad(".version_policy", "unknown version_policy %q; the policies are %s", p.Kind, jsondoc.OrList(versionPolicyNames))
	}
	for _, v := range slices.Sorted(maps.Keys(m.VersionChecksums)) {
		at := fmt.Sprintf(".version_checksums[%q]", strconv.FormatInt(v, 10))
		if v < 1 {
			return bad(".version_checksums", "key %d is not a version number; versions are 1 or more", v)
		}
		if m.VersionChecksums[v] == "" {
			return bad(at, "version %d: the checksum is empty", v)
		}
		if err := validateChecksum(m.VersionChecksums[v]); err != nil {
			return bad(at, "version %d: %v", v, err)
		}
	}
	return nil
}

// validateOverlaps rejects a versioned entry that shares files with
// another entry: any entry under its directory (its versions are its own),
// or a directory entry that holds it; and one whose path without its
// trailing slash is another entry's (the same OIP model name).
func validateOverlaps(models []Model) error {
	for i, m := range models {
		if !m.IsVersioned() {
			continue
		}
		for j, o := range models {
			if i == j {
				continue
			}
			var msg string
			switch {
			case strings.HasPrefix(o.Path, m.Path):
				msg = fmt.Sprintf("%q is inside the directory of versioned model %q (model_metadata[%d]), whose versions are listed by its version_policy; remove one of the two entries", o.Path, m.Path, i)
			case o.Path == strings.TrimSuffix(m.Path, "/"):
				// No file is shared, but the name is: OIP would route
				// versions/{v} of the entry to either.
				msg = fmt.Sprintf("%q and versioned model %q (model_metadata[%d]) are both OIP model %q: its versions/{v} would address either; rename one of the two entries", o.Path, m.Path, i, o.Path)
			case o.IsDir() && strings.HasPrefix(m.Path, o.Path):
				msg = fmt.Sprintf("versioned model %q (model_metadata[%d]) is inside the directory of model %q; a versioned directory must not be part of another model; remove one of the two entries", m.Path, i, o.Path)
			default:
				continue
			}
			at := max(i, j) // reported where the second of the two is
			return &Error{Field: fmt.Sprintf("model_metadata[%d].model_path", at), Msg: msg + fmt.Sprintf(" (model_metadata[%d] and model_metadata[%d] overlap)", min(i, j), max(i, j))}
		}
	}
	return nil
}

// canonical returns the policy's canonical JSON shape (nil for none).
func (p *VersionPolicy) canonical() map[string]any {
	if p == nil {
		return nil
	}
	switch p.Kind {
	case VersionsLatest:
		return map[string]any{string(p.Kind): map[string]any{"num_versions": p.Latest}}
	case VersionsSpecific:
		vs := p.Versions
		if vs == nil {
			vs = []int64{}
		}
		return map[string]any{string(p.Kind): map[string]any{"versions": vs}}
	}
	return map[string]any{string(p.Kind): struct{}{}}
}

// versionChecksumsJSON is version_checksums' canonical JSON shape.
func versionChecksumsJSON(sums map[int64]string) map[string]string {
	if len(sums) == 0 {
		return nil
	}
	out := make(map[string]string, len(sums))
	for v, s := range sums {
		out[strconv.FormatInt(v, 10)] = s
	}
	return out
}
