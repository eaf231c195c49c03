package httpserver

import (
	"bytes"
	"compress/gzip"
	"compress/zlib"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/groveml/grove/auth"
	"github.com/groveml/grove/internal/urlspace"
)

// FuzzRoutes serves arbitrary paths through overlapping routes: nothing
// panics, a route answers only for paths of its shape, with the path's
// segments as its wildcards, score wins over create, and no path under a
// reserved first segment (urlspace) reaches a route whose first segment
// is a wildcard, while /api/predict/{model...} takes all of its own. The
// seed corpus is in testdata/fuzz/FuzzRoutes.
func FuzzRoutes(f *testing.F) {
	answer := func(name string) http.HandlerFunc {
		return func(w http.ResponseWriter, r *http.Request) {
			_ = json.NewEncoder(w).Encode([]string{name, r.PathValue("org"), r.PathValue("project"), r.PathValue("n")})
		}
	}
	s := New(Options{})
	s.Handle("POST /contract/{org}/{project}/{n}", auth.RoleManage, "manage", answer("create"))
	s.Handle("POST /{org}/{project}/{n}/score", auth.RoleInfer, "forestflow", answer("score"))
	s.Handle("POST /{org}/{project}/{n}/gp", auth.RoleInfer, "graphpipe", answer("gp"))
	s.Handle("POST /api/predict/{model...}", auth.RoleInfer, "deeprec", func(w http.ResponseWriter, r *http.Request) {
		_ = json.NewEncoder(w).Encode([]string{"deeprec", r.PathValue("model"), "", ""})
	})
	s.Mount("/v2", v2Role, http.NotFoundHandler())
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
		switch fields[0] {
		case "create":
			want = "/contract/" + vals
		case "deeprec":
			want = "/api/predict/" + fields[1]
		default:
			if urlspace.ReservedPath(path) {
				t.Fatalf("%s, under a reserved segment, went to %s", path, fields[0])
			}
		}
		if method != "POST" || want != path {
			t.Fatalf("%s %s answered by %q", method, path, rec.Body.String())
		}
		if fields[0] == "create" && (strings.HasSuffix(path, "/score") || strings.HasSuffix(path, "/gp")) {
			t.Fatalf("%s went to create, not to score or gp", path)
		}
	})
}

// FuzzReadBody reads arbitrary bodies under arbitrary Content-Encoding
// headers: nothing panics, the status is 200, 400, 413 or 415, a decoded
// body is never over the limit, and a gzip or zlib body decodes to what
// the standard library's reader gives. The seed corpus is in
// testdata/fuzz/FuzzReadBody.
func FuzzReadBody(f *testing.F) {
	const limit = 4 << 10
	s := New(Options{MaxBodyBytes: limit})
	f.Fuzz(func(t *testing.T, encoding string, body []byte) {
		r := httptest.NewRequest("POST", "/x", bytes.NewReader(body))
		if encoding != "" {
			r.Header["Content-Encoding"] = []string{encoding}
		}
		got, code, err := s.ReadBody(r, new([]byte))
		switch code {
		case http.StatusOK:
			if err != nil || len(got) > limit {
				t.Fatalf("200 with %v and %d bytes", err, len(got))
			}
		case http.StatusBadRequest, http.StatusRequestEntityTooLarge, http.StatusUnsupportedMediaType:
			if err == nil || got != nil {
				t.Fatalf("%d without an error", code)
			}
			return
		default:
			t.Fatalf("status %d: %v", code, err)
		}
		var ref io.Reader
		switch strings.ToLower(strings.TrimSpace(encoding)) {
		case "gzip":
			zr, err := gzip.NewReader(bytes.NewReader(body))
			if err != nil {
				t.Fatalf("decoded a body gzip refuses: %v", err)
			}
			ref = zr
		case "deflate":
			if !isZlibHeader(body) {
				return
			}
			zr, err := zlib.NewReader(bytes.NewReader(body))
			if err != nil {
				t.Fatalf("decoded a body zlib refuses: %v", err)
			}
			ref = zr
		default:
			return
		}
		want, err := io.ReadAll(ref)
		if err != nil || !bytes.Equal(got, want) {
			t.Fatalf("decoded %q, the standard library %q (%v)", got, want, err)
		}
	})
}
