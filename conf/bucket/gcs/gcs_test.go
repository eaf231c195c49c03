package gcs

import (
	"context"
	"errors"
	"io"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"cloud.google.com/go/storage"
	"github.com/fsouza/fake-gcs-server/fakestorage"
	"github.com/googleapis/gax-go/v2"
	"google.golang.org/api/option"

	"github.com/groveml/grove/conf/bucket"
	"github.com/groveml/grove/conf/bucket/buckettest"
)

// newFakeGCS starts fake-gcs-server in-process, over HTTP, holding objects in bucket "models".
func newFakeGCS(t *testing.T, objects map[string]string) *fakestorage.Server {
	t.Helper()
	var initial []fakestorage.Object
	for name, content := range objects {
		initial = append(initial, fakestorage.Object{
			ObjectAttrs: fakestorage.ObjectAttrs{BucketName: "models", Name: name},
			Content:     []byte(content),
		})
	}
	srv, err := fakestorage.NewServerWithOptions(fakestorage.Options{
		InitialObjects: initial,
		Scheme:         "http",
		Host:           "127.0.0.1",
		PublicHost:     "127.0.0.1",
		Writer:         io.Discard,
	})
	if err != nil {
		t.Fatal(err)
	}
	srv.CreateBucketWithOpts(fakestorage.CreateBucketOpts{Name: "models"})
	t.Cleanup(srv.Stop)
	return srv
}

// storeWithPrefix returns a buckettest.NewStore of gs://models/<prefix>
// buckets on a fake server that also holds an object outside the prefix,
// if there is one. Each bucket opened has its own storage client, as a
// replica's would.
func storeWithPrefix(prefix string) buckettest.NewStore {
	return func(t *testing.T, objects map[string]string) func(t *testing.T) bucket.Writer {
		t.Helper()
		prefixed := map[string]string{}
		if prefix != "" {
			prefixed["outside-the-prefix"] = "x"
		}
		for name, content := range objects {
			prefixed[prefix+name] = content
		}
		srv := newFakeGCS(t, prefixed)
		return func(t *testing.T) bucket.Writer {
			t.Helper()
			b, err := Open(t.Context(), "gs://models/"+prefix,
				WithClientOptions(option.WithEndpoint(srv.URL()+"/storage/v1/"), option.WithoutAuthentication()))
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { b.Close() })
			return b
		}
	}
}

func TestGCSBucketBehavesAsABucket(t *testing.T) {
	t.Parallel()
	buckettest.Run(t, storeWithPrefix(""))
}

func TestGCSBucketWithAPrefixBehavesAsABucket(t *testing.T) {
	t.Parallel()
	buckettest.Run(t, storeWithPrefix("serving/grove/"))
}

func TestParseURL(t *testing.T) {
	for _, tc := range []struct{ url, name, prefix string }{
		{"gs://bucket", "bucket", ""},
		{"gs://bucket/", "bucket", ""},
		{"gs://my-bucket.x_y/a/b", "my-bucket.x_y", "a/b/"},
		{"gs://b/a/b/", "b", "a/b/"},
	} {
		name, prefix, err := ParseURL(tc.url)
		if err != nil || name != tc.name || prefix != tc.prefix {
			t.Errorf("%s: got %q, %q, %v; want %q, %q", tc.url, name, prefix, err, tc.name, tc.prefix)
		}
	}
	for _, tc := range []struct{ url, want string }{
		{"gs://", "no bucket name"},
		{"gs://Bucket", "may only contain lowercase letters"},
		{"gs://b:80/p", "a bucket name has no port"},
		{"gs://b/a//c", "empty"},
		{"gs://b/../c", `".."`},
		{"gs://b/./c", `"."`},
		{"gs://b?x=1", "a query is not allowed"},
		{"gs://user@b", "user information"},
		{"gs://b#frag", "a fragment is not allowed"},
		{"s3://b", "the scheme is not gs"},
	} {
		_, _, err := ParseURL(tc.url)
		buckettest.CheckURLError(t, tc.url, err, tc.want)
	}
}

// FuzzParseURL checks that ParseURL never panics and that what it accepts
// is the same bucket once written back as a URL.
func FuzzParseURL(f *testing.F) {
	f.Add("gs://bucket/a/b")
	f.Add("gs://b/a//c")
	f.Fuzz(func(t *testing.T, raw string) { buckettest.CheckNamedURL(t, "gs", raw, ParseURL) })
}

func TestWriteObjectRejectsAVersionThatIsNotAGeneration(t *testing.T) {
	w := storeWithPrefix("")(t, map[string]string{"c.json": "{}"})(t)
	for _, v := range []string{"-1", "0", "abc", "1.5"} {
		if _, err := w.WriteObject(t.Context(), "c.json", []byte("x"), v); err == nil || errors.Is(err, bucket.ErrConflict) || !strings.Contains(err.Error(), "not a GCS generation") {
			t.Errorf("version %q: got %v, want an argument error", v, err)
		}
	}
}

func TestOpenUsesStorageEmulatorHost(t *testing.T) {
	srv := newFakeGCS(t, map[string]string{"p/model_config.json": "{}"})
	t.Setenv("STORAGE_EMULATOR_HOST", strings.TrimPrefix(srv.URL(), "http://"))
	b, err := bucket.Drivers{Driver()}.Open(t.Context(), "gs://models/p")
	if err != nil {
		t.Fatal(err)
	}
	defer b.(*Bucket).Close()
	data, _, err := b.ReadObject(t.Context(), "model_config.json", 1<<20)
	if err != nil || string(data) != "{}" {
		t.Errorf("ReadObject = %q, %v", data, err)
	}
	if b.String() != "gs://models/p/" {
		t.Errorf("String() = %q", b.String())
	}
}

func TestOpenWithStorageClient(t *testing.T) {
	srv := newFakeGCS(t, map[string]string{"a": "b"})
	client, err := storage.NewClient(t.Context(), storage.WithJSONReads(),
		option.WithEndpoint(srv.URL()+"/storage/v1/"), option.WithoutAuthentication())
	if err != nil {
		t.Fatal(err)
	}
	defer client.Close()
	b, err := Open(t.Context(), "gs://models", WithStorageClient(client))
	if err != nil {
		t.Fatal(err)
	}
	data, _, err := b.ReadObject(t.Context(), "a", 1<<20)
	if err != nil || string(data) != "b" {
		t.Errorf("ReadObject = %q, %v", data, err)
	}
}

func TestFetchSkipsDirectoryPlaceholders(t *testing.T) {
	buckettest.CheckFetchSkipsFolderPlaceholders(t, storeWithPrefix(""))
}

func TestFetchRejectsNamesUnsafeForLocalFiles(t *testing.T) {
	b := storeWithPrefix("")(t, map[string]string{"m/a": "a", "m/../escape": "x"})(t)
	_, err := bucket.Fetch(t.Context(), b, "m/", t.TempDir(), 0)
	if err == nil || !strings.Contains(err.Error(), "cannot be stored as a local file") {
		t.Errorf("got %v", err)
	}
}

// dropFirstUpload is a transport that applies the first upload request but
// answers it with a 503, as if the answer had been lost.
type dropFirstUpload struct {
	base    http.RoundTripper
	dropped atomic.Bool
}

func (d *dropFirstUpload) RoundTrip(r *http.Request) (*http.Response, error) {
	resp, err := d.base.RoundTrip(r)
	if err != nil || !strings.Contains(r.URL.Path, "/upload/") || !d.dropped.CompareAndSwap(false, true) {
		return resp, err
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return &http.Response{
		StatusCode: http.StatusServiceUnavailable, Status: "503 Service Unavailable",
		Header: http.Header{}, Body: io.NopCloser(strings.NewReader("")), Request: r,
		Proto: "HTTP/1.1", ProtoMajor: 1, ProtoMinor: 1,
	}, nil
}

func TestWriteRecognisesItsOwnWriteAfterALostAnswer(t *testing.T) {
	srv := newFakeGCS(t, map[string]string{"c.json": "v1"})
	transport := &dropFirstUpload{base: http.DefaultTransport}
	client, err := storage.NewClient(context.Background(), storage.WithJSONReads(),
		option.WithEndpoint(srv.URL()+"/storage/v1/"), option.WithHTTPClient(&http.Client{Transport: transport}))
	if err != nil {
		t.Fatal(err)
	}
	defer client.Close()
	client.SetRetry(storage.WithBackoff(gax.Backoff{Initial: time.Millisecond, Max: 10 * time.Millisecond}))
	w, err := Open(t.Context(), "gs://models", WithStorageClient(client))
	if err != nil {
		t.Fatal(err)
	}
	buckettest.CheckOwnWriteAfterALostAnswer(t, w, transport.dropped.Load)
}
