package httpserver

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"unicode/utf8"
)

// FuzzRoutes serves arbitrary paths through overlapping routes: nothing
// panics, a route answers only for paths of its shape, with the path's
// segments as its wildcards, and score wins over create. The seed corpus
// is in testdata/fuzz/FuzzRoutes.
func FuzzRoutes(f *testing.F) {
	answer := func(name string) http.HandlerFunc {
		return func(w http.ResponseWriter, r *http.Request) {
			_ = json.NewEncoder(w).Encode([]string{name, r.PathValue("org"), r.PathValue("project"), r.PathValue("n")})
		}
	}
	s := New(Options{})
	s.Handle("POST /contract/{org}/{project}/{n}", "manage", answer("create"))
	s.Handle("POST /{org}/{project}/{n}/score", "forestflow", answer("score"))
	s.Handle("POST /{org}/{project}/{n}/gp", "graphpipe", answer("gp"))
	s.Mount("/v2", http.NotFoundHandler())
	h := s.Handler()
	f.Fuzz(func(t *testing.T, method, path string) {
		if !strings.HasPrefix(path, "/") || !utf8.ValidString(path) || strings.ContainsAny(method, " \t\r\n") {
			return
		}
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, &http.Request{Method: method, URL: &url.URL{Path: path}, Header: http.Header{}})
		if rec.Code != http.StatusOK {
			return
		}
		var fields []string
		if err := json.Unmarshal(rec.Body.Bytes(), &fields); err != nil || len(fields) != 4 {
			t.Fatalf("%s %s answered %q", method, path, rec.Body.String())
		}
		vals := strings.Join(fields[1:], "/")
		want := "/" + vals + "/" + fields[0]
		if fields[0] == "create" {
			want = "/contract/" + vals
		}
		if method != "POST" || want != path {
			t.Fatalf("%s %s answered by %q", method, path, rec.Body.String())
		}
		if fields[0] == "create" && (strings.HasSuffix(path, "/score") || strings.HasSuffix(path, "/gp")) {
			t.Fatalf("%s went to create, not to score or gp", path)
		}
	})
}
