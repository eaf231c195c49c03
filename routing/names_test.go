package routing

import (
	"strings"
	"testing"
)

func TestNameModelSplitsADigitLastSegmentIntoAVersion(t *testing.T) {
	for _, c := range []struct{ path, name, version string }{
		{"pcvr/3/", "pcvr", "3"},
		{"ads/pcvr/12", "ads/pcvr", "12"},
		{"pctr_v1/", "pctr_v1", "1"},
		{"model.pt", "model.pt", "1"},
		{"3/", "3", "1"}, // no name left: the whole path is the name
		{"pcvr/v3/", "pcvr/v3", "1"},
		{"pcvr/3a/", "pcvr/3a", "1"},
	} {
		if got := NameModel(c.path); got.Name != c.name || got.Version != c.version || got.Path != c.path {
			t.Errorf("NameModel(%q) = %+v, want name %q version %q", c.path, got, c.name, c.version)
		}
	}
}

func TestResolvePicksTheHighestReadyVersionOrTheOneAskedFor(t *testing.T) {
	ready := []string{"pcvr/2/", "pcvr/10/", "pcvr/9/", "pctr_v1/", "other/pcvr/1/"}
	for _, c := range []struct {
		name, version, want string
		ok                  bool
	}{
		{"pcvr", "", "pcvr/10/", true}, // numeric, not lexical
		{"pcvr", "2", "pcvr/2/", true},
		{"pcvr", "02", "pcvr/2/", true},
		{"pcvr", "3", "", false},
		{"pctr_v1", "", "pctr_v1/", true},
		{"pctr_v1", "1", "pctr_v1/", true},
		{"pctr_v1", "2", "", false},
		{"other/pcvr", "", "other/pcvr/1/", true},
		{"nope", "", "", false},
	} {
		got, ok := Resolve(ready, nil, c.name, c.version)
		if ok != c.ok || got.Path != c.want {
			t.Errorf("Resolve(%q, %q) = %q, %v; want %q, %v", c.name, c.version, got.Path, ok, c.want, c.ok)
		}
	}
	if vs := Versions(ready, nil, "pcvr"); len(vs) != 3 || vs[0].Version != "10" || vs[2].Version != "2" {
		t.Errorf("Versions(pcvr) = %+v", vs)
	}
}

func TestResolveNamesAVersionedEntryByItsNewestReadyVersion(t *testing.T) {
	// pcvr/ is a versioned entry serving version 3, while version 4 (not
	// ready for it: leaving its policy) still answers by its own path.
	ready := []string{"pcvr/", "pcvr/1/", "pcvr/3/", "pcvr/4/", "plain/", "plain/7/"}
	newest := func(parent string) (string, bool) {
		if parent == "pcvr/" {
			return "pcvr/3/", true
		}
		return "", false
	}
	for _, c := range []struct {
		name, version, path, got string
		ok                       bool
	}{
		{"pcvr", "", "pcvr/", "3", true},
		{"pcvr", "1", "pcvr/1/", "1", true}, // not the entry's own path, named version 1 by its shape
		{"pcvr", "4", "pcvr/4/", "4", true},
		{"pcvr", "2", "", "", false},
		// Without a versioned entry, the paths keep their meaning: the
		// highest version, and "plain/" is version 1 of "plain".
		{"plain", "", "plain/7/", "7", true},
		{"plain", "1", "plain/", "1", true},
	} {
		got, ok := Resolve(ready, newest, c.name, c.version)
		if ok != c.ok || got.Path != c.path || got.Version != c.got || ok && got.Name != c.name {
			t.Errorf("Resolve(%q, %q) = %+v, %v; want path %q version %q, %v", c.name, c.version, got, ok, c.path, c.got, c.ok)
		}
	}
	var listed []string
	for _, v := range Versions(ready, newest, "pcvr") {
		listed = append(listed, v.Path)
	}
	if got := strings.Join(listed, ","); got != "pcvr/4/,pcvr/3/,pcvr/1/" {
		t.Errorf("Versions(pcvr) = %s: the entry's own path is not a version", got)
	}
}

func TestResolvePrefersTheVersionAsWrittenOverOneWithLeadingZeros(t *testing.T) {
	// Two plain entries whose last segments are the same number written
	// two ways: each is asked for by its own spelling.
	ready := []string{"m/03/", "m/3/"}
	for _, c := range []struct{ version, want string }{
		{"3", "m/3/"},
		{"03", "m/03/"},
		{"003", "m/03/"}, // neither as written: the first numeric match
	} {
		if got, ok := Resolve(ready, nil, "m", c.version); !ok || got.Path != c.want || got.Version != NameModel(c.want).Version {
			t.Errorf("Resolve(m, %q) = %+v, %v; want %s", c.version, got, ok, c.want)
		}
	}
}
