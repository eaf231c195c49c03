// Package s3fake serves an S3-compatible store for tests: gofakes3 with
// its in-memory backend, over HTTP on 127.0.0.1, in the test's process.
//
// gofakes3 (v1.2.0) honours PutObject's If-Match and If-None-Match: "*":
// the memory backend checks them under its lock, in the same critical
// section as the write, and answers 412 PreconditionFailed when they fail
// (also to If-Match on a missing key). Nothing is added in front of it.
// It does not check request signatures, and its ETags are the content's
// MD5, as S3's are for objects written by one PutObject without SSE-KMS.
package s3fake

import (
	"bytes"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"testing"

	"github.com/johannesboyne/gofakes3"
	"github.com/johannesboyne/gofakes3/backend/s3mem"
)

// Server is a running in-memory S3-compatible store.
type Server struct {
	// URL is the endpoint, http://127.0.0.1:port.
	URL string
}

// Start serves a new store holding the named, empty buckets until the test ends.
func Start(t testing.TB, buckets ...string) *Server {
	t.Helper()
	backend := s3mem.New()
	for _, b := range buckets {
		if err := backend.CreateBucket(b); err != nil {
			t.Fatal(err)
		}
	}
	srv := httptest.NewServer(gofakes3.New(backend, gofakes3.WithLogger(gofakes3.DiscardLog())).Server())
	t.Cleanup(srv.Close)
	return &Server{URL: srv.URL}
}

// Put stores data under key in bucket with a plain HTTP PUT, as another
// uploader would.
func (s *Server) Put(t testing.TB, bucket, key string, data []byte) {
	t.Helper()
	s.do(t, http.MethodPut, bucket, key, data)
}

// Delete removes key from bucket with an HTTP DELETE.
func (s *Server) Delete(t testing.TB, bucket, key string) {
	t.Helper()
	s.do(t, http.MethodDelete, bucket, key, nil)
}

// do sends an unsigned request for key in bucket (gofakes3 does not check
// signatures) and fails the test unless it succeeds.
func (s *Server) do(t testing.TB, method, bucket, key string, body []byte) {
	t.Helper()
	u := s.URL + "/" + bucket + "/" + (&url.URL{Path: key}).EscapedPath()
	req, err := http.NewRequestWithContext(t.Context(), method, u, bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	answer, _ := io.ReadAll(resp.Body)
	if resp.StatusCode/100 != 2 {
		t.Fatalf("%s %s: %s %s", method, u, resp.Status, answer)
	}
}
