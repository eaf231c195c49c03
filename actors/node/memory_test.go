package node

import (
	"strings"
	"testing"

	"github.com/groveml/grove/cluster/coord"
	"github.com/groveml/grove/cluster/placement"
)

func TestFreeBytes(t *testing.T) {
	const mib = 1 << 20
	for _, c := range []struct {
		name                    string
		budget, used, available int64
		want                    int64
	}{
		{"machine unknown", 100 * mib, 30 * mib, -1, 70 * mib},
		{"machine has more than the budget", 100 * mib, 30 * mib, 10 << 30, 70 * mib},
		{"machine has less than the budget", 100 * mib, 30 * mib, 40 * mib, 32 * mib},
		{"machine rounded down to 16 MiB", 100 * mib, 0, 47*mib + 5, 32 * mib},
		{"machine has nothing left", 100 * mib, 30 * mib, 0, 0},
		{"models use more than the budget", 100 * mib, 130 * mib, 10 << 30, 0},
		{"nothing held", 100 * mib, 0, -1, 100 * mib},
	} {
		if got := FreeBytes(c.budget, c.used, c.available); got != c.want {
			t.Errorf("%s: FreeBytes(%d, %d, %d) = %d, want %d", c.name, c.budget, c.used, c.available, got, c.want)
		}
	}
}

func TestParseMemAvailable(t *testing.T) {
	for _, c := range []struct {
		name, in string
		want     int64
		err      string
	}{
		{"linux", "MemTotal:       24684092 kB\nMemFree:        21664496 kB\nMemAvailable:   23634140 kB\nBuffers: 1 kB\n", 23634140 << 10, ""},
		{"zero", "MemAvailable: 0 kB\n", 0, ""},
		{"missing (kernel before 3.14)", "MemTotal: 1 kB\nMemFree: 1 kB\n", 0, "no MemAvailable"},
		{"no unit", "MemAvailable: 12\n", 0, "is not \"<n> kB\""},
		{"not a number", "MemAvailable: x kB\n", 0, "not a size"},
		{"negative", "MemAvailable: -4 kB\n", 0, "not a size"},
		{"overflow", "MemAvailable: 99999999999999999999 kB\n", 0, "not a size"},
		{"empty", "", 0, "no MemAvailable"},
	} {
		got, err := ParseMemAvailable([]byte(c.in))
		switch {
		case c.err == "" && (err != nil || got != c.want):
			t.Errorf("%s: got %d, %v; want %d", c.name, got, err, c.want)
		case c.err != "" && (err == nil || !strings.Contains(err.Error(), c.err)):
			t.Errorf("%s: got %d, %v; want an error saying %q", c.name, got, err, c.err)
		}
	}
}

func TestCgroupHeadroom(t *testing.T) {
	stat := "anon 300\nfile 900\ninactive_file 400\nactive_file 500\n"
	for _, c := range []struct {
		name, max, current, stat string
		want                     int64
		limited                  bool
		err                      string
	}{
		{"no limit", "max\n", "1000\n", stat, 0, false, ""},
		{"limit less the working set", "2000\n", "1000\n", stat, 1400, true, ""},
		{"no inactive_file line", "2000\n", "1000\n", "anon 300\n", 1000, true, ""},
		{"over the limit", "500\n", "1000\n", "inactive_file 0\n", 0, true, ""},
		{"inactive above current", "2000\n", "100\n", stat, 2000, true, ""},
		{"bad limit", "lots\n", "1000\n", stat, 0, false, "memory.max"},
		{"bad current", "2000\n", "\n", stat, 0, false, "memory.current"},
		{"bad inactive_file", "2000\n", "1000\n", "inactive_file -3\n", 0, false, "inactive_file"},
	} {
		got, limited, err := CgroupHeadroom([]byte(c.max), []byte(c.current), []byte(c.stat))
		switch {
		case c.err == "" && (err != nil || got != c.want || limited != c.limited):
			t.Errorf("%s: got %d, %v, %v; want %d, %v", c.name, got, limited, err, c.want, c.limited)
		case c.err != "" && (err == nil || !strings.Contains(err.Error(), c.err)):
			t.Errorf("%s: got %d, %v; want an error naming %q", c.name, got, err, c.err)
		}
	}
}

func TestNowhereElse(t *testing.T) {
	short := func(path string, placed int) placement.Shortfall {
		return placement.Shortfall{Path: path, Want: 1, Min: 1, Placed: placed}
	}
	for _, c := range []struct {
		name  string
		table placement.Table
		unpl  []placement.Shortfall
		left  []string
		want  bool
	}{
		{"fits nowhere else", placement.Table{"a/": {"me"}}, []placement.Shortfall{short("a/", 0)}, []string{"a/"}, true},
		{"placed on another node too (loading there)", placement.Table{"a/": {"me", "other"}}, nil, []string{"a/"}, false},
		{"table from before the drain", placement.Table{"a/": {"me"}}, nil, []string{"a/"}, false},
		{"unplaceable but with a copy elsewhere", placement.Table{"a/": {"me"}}, []placement.Shortfall{short("a/", 1)}, []string{"a/"}, false},
		{"one of two fits elsewhere", placement.Table{"a/": {"me"}, "b/": {"me", "other"}}, []placement.Shortfall{short("a/", 0)}, []string{"a/", "b/"}, false},
		{"both fit nowhere", placement.Table{"a/": {"me"}, "b/": {"me"}}, []placement.Shortfall{short("a/", 0), short("b/", 0)}, []string{"a/", "b/"}, true},
		{"dropped from the table, placed nowhere", placement.Table{}, []placement.Shortfall{short("a/", 0)}, []string{"a/"}, true},
	} {
		p := coord.Placement{Plan: placement.Plan{Table: c.table, Unplaceable: c.unpl}}
		if got := NowhereElse(p, "me", c.left); got != c.want {
			t.Errorf("%s: NowhereElse = %v, want %v", c.name, got, c.want)
		}
	}
}
