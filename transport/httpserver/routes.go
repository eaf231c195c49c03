package httpserver

import (
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"

	"github.com/groveml/grove/auth"
)

// route is a protocol route. A route whose pattern has a method and a path
// of literal and single-segment wildcard segments ("POST /{org}/score") has
// method and segs set; routes of that shape can be grouped with those they
// overlap. Any other pattern goes to net/http as it is.
type route struct {
	pattern string
	api     string // the metrics label, which also says whether the route is an admin one
	role    auth.Role
	method  string
	segs    []segment
	h       http.HandlerFunc
}

// segment is one path segment of a route: a literal, or a wildcard's name.
type segment struct {
	literal, wildcard string
}

func newRoute(pattern string, h http.HandlerFunc) route {
	r := route{pattern: pattern, h: h}
	method, path, ok := strings.Cut(pattern, " ")
	if !ok || !strings.HasPrefix(path, "/") || strings.HasSuffix(path, "/") {
		return r // no method, a host, or a subtree
	}
	segs := make([]segment, 0, strings.Count(path, "/"))
	for _, s := range strings.Split(path[1:], "/") {
		switch {
		case strings.HasPrefix(s, "{") && strings.HasSuffix(s, "}"):
			name := s[1 : len(s)-1]
			if name == "$" || strings.HasSuffix(name, "...") {
				return r
			}
			segs = append(segs, segment{wildcard: name})
		case strings.ContainsAny(s, "{}"):
			return r // not a valid pattern: net/http says why
		default:
			lit, err := url.PathUnescape(s)
			if err != nil {
				return r
			}
			segs = append(segs, segment{literal: lit})
		}
	}
	r.method, r.segs = method, segs
	return r
}

// overlaps reports whether some request path matches both a and b.
func overlaps(a, b route) bool {
	if a.segs == nil || b.segs == nil || a.method != b.method || len(a.segs) != len(b.segs) {
		return false
	}
	for i, s := range a.segs {
		if t := b.segs[i]; s.wildcard == "" && t.wildcard == "" && s.literal != t.literal {
			return false
		}
	}
	return true
}

// precedence orders overlapping routes: compared from the last segment
// backwards, the first route with a literal where the other has a wildcard
// comes first. It returns 0 for routes with literals in the same places.
func precedence(a, b route) int {
	for i := len(a.segs) - 1; i >= 0; i-- {
		al, bl := a.segs[i].wildcard == "", b.segs[i].wildcard == ""
		switch {
		case al && !bl:
			return -1
		case bl && !al:
			return 1
		}
	}
	return 0
}

// registerRoutes adds routes to mux: each on its own, except routes whose
// shapes overlap, directly or through others, which net/http cannot order:
// those are served by one pattern that matches all of them and tries them
// in precedence order, answering a path none of them matches with
// notFound.
func registerRoutes(mux *http.ServeMux, routes []route, notFound http.HandlerFunc) {
	group := make([]int, len(routes)) // the first route of each route's group
	for i := range routes {
		group[i] = i
		for j := range i {
			if overlaps(routes[i], routes[j]) {
				merge(group, group[j], group[i])
			}
		}
	}
	for i, r := range routes {
		if group[i] != i {
			continue
		}
		var members []route
		for j := i; j < len(routes); j++ {
			if group[j] == i {
				members = append(members, routes[j])
			}
		}
		if len(members) == 1 {
			mux.HandleFunc(r.pattern, r.h)
			continue
		}
		slices.SortStableFunc(members, precedence)
		for k := 1; k < len(members); k++ {
			for _, m := range members[:k] {
				if precedence(m, members[k]) == 0 && overlaps(m, members[k]) {
					panic(fmt.Sprintf("httpserver: routes %q and %q match the same paths", m.pattern, members[k].pattern))
				}
			}
		}
		pattern, names := groupPattern(members)
		mux.HandleFunc(pattern, dispatch(members, names, notFound))
	}
}

// merge puts every route of group b into group a, or the other way round,
// so that a group is named by its first route.
func merge(group []int, a, b int) {
	if a == b {
		return
	}
	if b < a {
		a, b = b, a
	}
	for i, g := range group {
		if g == b {
			group[i] = a
		}
	}
}

// groupPattern returns the one pattern that serves members: a literal where
// all of them have the same one, else a wildcard, whose names it returns
// ("" for a literal).
func groupPattern(members []route) (string, []string) {
	var b strings.Builder
	b.WriteString(members[0].method + " ")
	names := make([]string, len(members[0].segs))
	for i, s := range members[0].segs {
		b.WriteByte('/')
		same := s.wildcard == ""
		for _, m := range members[1:] {
			same = same && m.segs[i].wildcard == "" && m.segs[i].literal == s.literal
		}
		if same {
			b.WriteString(url.PathEscape(s.literal))
			continue
		}
		names[i] = "httpserverSegment" + strconv.Itoa(i)
		b.WriteString("{" + names[i] + "}")
	}
	return b.String(), names
}

// dispatch serves a request with the first of members (in precedence order)
// that matches its path, setting that route's wildcards; none matching is
// served by notFound.
func dispatch(members []route, names []string, notFound http.HandlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
	next:
		for _, m := range members {
			for i, s := range m.segs {
				if names[i] != "" && s.wildcard == "" && r.PathValue(names[i]) != s.literal {
					continue next
				}
			}
			var buf [8]string // read every value before setting any: names may repeat
			vals := buf[:0]
			if len(m.segs) > len(buf) {
				vals = make([]string, 0, len(m.segs))
			}
			vals = vals[:len(m.segs)]
			for i := range m.segs {
				if names[i] != "" {
					vals[i] = r.PathValue(names[i])
				}
			}
			for i, s := range m.segs {
				if s.wildcard != "" {
					r.SetPathValue(s.wildcard, vals[i])
				}
			}
			m.h(w, r)
			return
		}
		notFound(w, r)
	}
}
