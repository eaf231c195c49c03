package routing

import (
	"cmp"
	"slices"
	"strings"
)

// ModelVersion is a served model path as the Open Inference Protocol names
// it: a model name and a version.
type ModelVersion struct {
	// Path is the model path in the config, e.g. "pcvr/3/".
	Path string
	// Name is the OIP model name, e.g. "pcvr".
	Name string
	// Version is the OIP model version, e.g. "3".
	Version string
}

// NameModel names a model path for the Open Inference Protocol: a path
// whose last segment is all digits is that version of the model named by
// the rest ("pcvr/3/" is model "pcvr", version "3"); any other path is a
// model named by the path without its trailing slash, version "1"
// ("pctr_v1/" is model "pctr_v1", version "1").
func NameModel(path string) ModelVersion {
	trimmed := strings.TrimSuffix(path, "/")
	if i := strings.LastIndexByte(trimmed, '/'); i > 0 && allDigits(trimmed[i+1:]) {
		return ModelVersion{Path: path, Name: trimmed[:i], Version: trimmed[i+1:]}
	}
	return ModelVersion{Path: path, Name: trimmed, Version: "1"}
}

func allDigits(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return true
}

// Newest reports, for the path of a versioned model entry ("pcvr/", one
// with a version policy), the path of the version that serves it now
// ("pcvr/3/": its newest ready version); ok is false for any other path.
// A nil Newest knows no versioned entry.
type Newest func(parent string) (path string, ok bool)

// parent reports whether path is a versioned entry's.
func (n Newest) parent(path string) bool {
	if n == nil {
		return false
	}
	_, ok := n(path)
	return ok
}

// Versions returns the versions of model name among paths, highest first
// (numerically; ties, such as "3" and "03", by path). The path of a
// versioned entry (see Newest) is not a version: its versions are.
func Versions(paths []string, newest Newest, name string) []ModelVersion {
	var out []ModelVersion
	for _, p := range paths {
		if mv := NameModel(p); mv.Name == name && !newest.parent(p) {
			out = append(out, mv)
		}
	}
	slices.SortFunc(out, func(a, b ModelVersion) int {
		if c := compareVersions(b.Version, a.Version); c != 0 {
			return c
		}
		return cmp.Compare(a.Path, b.Path)
	})
	return out
}

// compareVersions orders all-digit versions numerically, whatever their length.
func compareVersions(a, b string) int {
	a, b = strings.TrimLeft(a, "0"), strings.TrimLeft(b, "0")
	if c := cmp.Compare(len(a), len(b)); c != 0 {
		return c
	}
	return strings.Compare(a, b)
}

// Resolve picks the model path that serves OIP model name at version among
// the ready paths: the given version; or, when version is empty, the path
// of the versioned entry so named (name + "/"), which serves its newest
// ready version (the ModelVersion has that version's number), else the
// highest version. It reports false when there is none.
func Resolve(ready []string, newest Newest, name, version string) (ModelVersion, bool) {
	if version == "" && newest != nil {
		if p, ok := newest(name + "/"); ok {
			return ModelVersion{Path: name + "/", Name: name, Version: NameModel(p).Version}, true
		}
	}
	vs := Versions(ready, newest, name)
	if len(vs) == 0 {
		return ModelVersion{}, false
	}
	if version == "" {
		return vs[0], true
	}
	// The version as written first: "3" is "m/3/" even when "m/03/" serves too.
	for _, v := range vs {
		if v.Version == version {
			return v, true
		}
	}
	for _, v := range vs {
		if allDigits(version) && compareVersions(v.Version, version) == 0 {
			return v, true
		}
	}
	return ModelVersion{}, false
}
