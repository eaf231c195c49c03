package s3

import (
	"errors"
	"io"
	"net/http"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/aws/retry"
	"github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/credentials"

	"github.com/groveml/grove/conf/bucket"
	"github.com/groveml/grove/conf/bucket/buckettest"
	"github.com/groveml/grove/conf/bucket/s3/s3fake"
)

// isolate keeps the test away from the machine's AWS configuration: no
// shared files, no region, no endpoint, no instance metadata.
func isolate(t *testing.T) {
	t.Helper()
	for _, k := range []string{"AWS_REGION", "AWS_DEFAULT_REGION", "AWS_PROFILE", "AWS_ENDPOINT_URL", "AWS_ENDPOINT_URL_S3",
		"AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN", "AWS_WEB_IDENTITY_TOKEN_FILE", "AWS_ROLE_ARN",
		"AWS_CONTAINER_CREDENTIALS_FULL_URI", "AWS_CONTAINER_CREDENTIALS_RELATIVE_URI", "AWS_CA_BUNDLE"} {
		t.Setenv(k, "")
	}
	t.Setenv("AWS_CONFIG_FILE", t.TempDir()+"/absent-config")
	t.Setenv("AWS_SHARED_CREDENTIALS_FILE", t.TempDir()+"/absent-credentials")
	t.Setenv("AWS_EC2_METADATA_DISABLED", "true")
}

// testCredentials are static credentials; gofakes3 does not check signatures.
var testCredentials = config.WithCredentialsProvider(credentials.NewStaticCredentialsProvider("AKIDTEST", "secret", ""))

// openOn opens s3://models/<prefix> on srv with test credentials and more.
func openOn(t *testing.T, srv *s3fake.Server, prefix string, more ...func(*config.LoadOptions) error) *Bucket {
	t.Helper()
	b, err := Open(t.Context(), "s3://models/"+prefix, WithEndpoint(srv.URL), WithLoadOptions(append(more, testCredentials)...))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b.Close() })
	return b
}

// storeWithPrefix returns a buckettest.NewStore of s3://models/<prefix>
// buckets on a new gofakes3 store that also holds an object outside the
// prefix, if there is one. Each bucket opened has its own client, as a
// replica's would.
func storeWithPrefix(prefix string) buckettest.NewStore {
	return func(t *testing.T, objects map[string]string) func(t *testing.T) bucket.Writer {
		t.Helper()
		isolate(t)
		srv := s3fake.Start(t, "models")
		if prefix != "" {
			srv.Put(t, "models", "outside-the-prefix", []byte("x"))
		}
		for name, content := range objects {
			srv.Put(t, "models", prefix+name, []byte(content))
		}
		return func(t *testing.T) bucket.Writer { return openOn(t, srv, prefix) }
	}
}

func TestS3BucketBehavesAsABucket(t *testing.T) {
	buckettest.Run(t, storeWithPrefix(""))
}

func TestS3BucketWithAPrefixBehavesAsABucket(t *testing.T) {
	buckettest.Run(t, storeWithPrefix("serving/grove/"))
}

// transport is an http.RoundTripper that lets a test see, count or change
// the SDK's requests and the store's answers.
type transport func(r *http.Request) (*http.Response, error)

func (f transport) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

func TestListReadsEveryPage(t *testing.T) {
	isolate(t)
	srv := s3fake.Start(t, "models")
	for i := range 11 {
		srv.Put(t, "models", "m/"+strconv.Itoa(i), []byte("x"))
	}
	srv.Put(t, "models", "n", []byte("not under m/"))
	var lists atomic.Int64
	counting := transport(func(r *http.Request) (*http.Response, error) {
		if r.Method == http.MethodGet && r.URL.Query().Get("list-type") == "2" {
			lists.Add(1)
		}
		return http.DefaultTransport.RoundTrip(r)
	})
	b := openOn(t, srv, "", config.WithHTTPClient(&http.Client{Transport: counting}))
	b.pageSize = 3
	got, err := b.List(t.Context(), "m/")
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 11 || got[0].Name != "m/0" || got[1].Name != "m/1" || got[2].Name != "m/10" || got[10].Name != "m/9" {
		t.Errorf("List(m/) = %v; want m/0 to m/10, sorted", got)
	}
	if n := lists.Load(); n != 4 {
		t.Errorf("%d ListObjectsV2 requests for 11 objects 3 at a time; want 4", n)
	}
}

func TestParseURL(t *testing.T) {
	for _, tc := range []struct{ url, name, prefix string }{
		{"s3://bucket", "bucket", ""},
		{"s3://bucket/", "bucket", ""},
		{"s3://my-bucket.v2/a/b", "my-bucket.v2", "a/b/"},
		{"s3://Legacy_Bucket/p/", "Legacy_Bucket", "p/"},
	} {
		name, prefix, err := ParseURL(tc.url)
		if err != nil || name != tc.name || prefix != tc.prefix {
			t.Errorf("%s: got %q, %q, %v; want %q, %q", tc.url, name, prefix, err, tc.name, tc.prefix)
		}
	}
	for _, tc := range []struct{ url, want string }{
		{"s3://", "no bucket name"},
		{"s3://ab", "3 to 255 characters"},
		{"s3://" + strings.Repeat("a", 256), "3 to 255 characters"},
		{"s3://-bucket", "start and end with a letter or digit"},
		{"s3://bucket./p", "start and end with a letter or digit"},
		{"s3://bu$ket", "may only contain letters, digits"},
		{"s3://bucket:9000/p", "a bucket name has no port"},
		{"s3://bkt/a//c", "empty"},
		{"s3://bkt/../c", `".."`},
		{"s3://b?versionId=1", "a query is not allowed"},
		{"s3://key:secret@bucket", "user information"},
		{"gs://bucket", "the scheme is not s3"},
	} {
		_, _, err := ParseURL(tc.url)
		buckettest.CheckURLError(t, tc.url, err, tc.want)
	}
}

// FuzzParseURL checks that ParseURL never panics and that what it accepts
// is the same bucket once written back as a URL.
func FuzzParseURL(f *testing.F) {
	f.Add("s3://bucket/a/b")
	f.Add("s3://b/a//c")
	f.Fuzz(func(t *testing.T, raw string) { buckettest.CheckNamedURL(t, "s3", raw, ParseURL) })
}

// TestDriverUsesTheDefaultChainAndAWSEndpointURL opens a bucket with no
// option, as grove serve does without --s3-endpoint: the credentials come
// from the environment, the endpoint from AWS_ENDPOINT_URL (addressed
// path-style: virtual-hosted addressing would look up models.127.0.0.1),
// and the region, configured nowhere, is DefaultRegion.
func TestDriverUsesTheDefaultChainAndAWSEndpointURL(t *testing.T) {
	isolate(t)
	srv := s3fake.Start(t, "models")
	srv.Put(t, "models", "p/model_config.json", []byte("{}"))
	t.Setenv("AWS_ENDPOINT_URL", srv.URL)
	drivers := bucket.Drivers{Driver()}
	read := func() ([]byte, error) {
		b, err := drivers.Open(t.Context(), "s3://models/p")
		if err != nil {
			t.Fatal(err)
		}
		if b.String() != "s3://models/p/" {
			t.Errorf("String() = %q", b.String())
		}
		data, _, err := b.ReadObject(t.Context(), "model_config.json", 1<<20)
		return data, err
	}
	if data, err := read(); err == nil || !strings.Contains(err.Error(), "credentials") {
		t.Errorf("without credentials anywhere: got %q, %v; want a credentials error", data, err)
	}
	t.Setenv("AWS_ACCESS_KEY_ID", "AKIDTEST")
	t.Setenv("AWS_SECRET_ACCESS_KEY", "secret")
	if data, err := read(); err != nil || string(data) != "{}" {
		t.Errorf("with credentials in the environment: got %q, %v", data, err)
	}
}

// TestWithEndpointWinsOverAWSEndpointURL checks that grove's own endpoint
// setting is the one used when AWS_ENDPOINT_URL names another.
func TestWithEndpointWinsOverAWSEndpointURL(t *testing.T) {
	isolate(t)
	srv := s3fake.Start(t, "models")
	srv.Put(t, "models", "c.json", []byte("{}"))
	t.Setenv("AWS_ENDPOINT_URL", "http://127.0.0.1:1")
	if data, _, err := openOn(t, srv, "").ReadObject(t.Context(), "c.json", 1<<20); err != nil || string(data) != "{}" {
		t.Errorf("ReadObject = %q, %v", data, err)
	}
}

func TestAMissingBucketIsNotAMissingObject(t *testing.T) {
	isolate(t)
	srv := s3fake.Start(t, "models")
	b, err := Open(t.Context(), "s3://absent", WithEndpoint(srv.URL), WithLoadOptions(testCredentials))
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := b.ReadObject(t.Context(), "model_config.json", 1<<20); err == nil || errors.Is(err, bucket.ErrNotExist) || !strings.Contains(err.Error(), "NoSuchBucket") {
		t.Errorf("read from a missing bucket: got %v, want a NoSuchBucket error that is not ErrNotExist", err)
	}
}

// answer returns an HTTP answer of the store with an S3 error document.
func answer(r *http.Request, status int, code string) *http.Response {
	body := `<?xml version="1.0" encoding="UTF-8"?><Error><Code>` + code + `</Code><Message>test</Message></Error>`
	return &http.Response{
		StatusCode: status, Status: strconv.Itoa(status) + " " + http.StatusText(status),
		Header: http.Header{"Content-Type": {"application/xml"}}, Body: io.NopCloser(strings.NewReader(body)),
		ContentLength: int64(len(body)), Request: r, Proto: "HTTP/1.1", ProtoMajor: 1, ProtoMinor: 1,
	}
}

// TestWriteObjectConflictsOnlyOnTheStoresConflictAnswers gives every
// PutObject an answer gofakes3 never gives (a race with another
// conditional write, a missing object under If-Match, a refusal) and
// checks which ones WriteObject reports as conflicts, for Update to retry.
func TestWriteObjectConflictsOnlyOnTheStoresConflictAnswers(t *testing.T) {
	isolate(t)
	srv := s3fake.Start(t, "models")
	srv.Put(t, "models", "c.json", []byte("{}"))
	for _, tc := range []struct {
		status    int
		code      string
		ifVersion string
		conflict  bool
	}{
		{http.StatusConflict, "ConditionalRequestConflict", "", true},
		{http.StatusConflict, "ConditionalRequestConflict", `"etag"`, true},
		{http.StatusConflict, "OperationAborted", `"etag"`, true},
		{http.StatusNotFound, "NoSuchKey", `"etag"`, true},
		{http.StatusPreconditionFailed, "PreconditionFailed", `"etag"`, true},
		{http.StatusConflict, "BucketNotEmpty", `"etag"`, false},
		{http.StatusNotFound, "NoSuchBucket", `"etag"`, false},
		{http.StatusForbidden, "AccessDenied", "", false},
		{http.StatusBadRequest, "InvalidRequest", "", false},
	} {
		fake := transport(func(r *http.Request) (*http.Response, error) {
			if r.Method == http.MethodPut {
				return answer(r, tc.status, tc.code), nil
			}
			return http.DefaultTransport.RoundTrip(r)
		})
		b := openOn(t, srv, "", config.WithHTTPClient(&http.Client{Transport: fake}))
		_, err := b.WriteObject(t.Context(), "c.json", []byte("x"), tc.ifVersion)
		if err == nil || errors.Is(err, bucket.ErrConflict) != tc.conflict || !strings.Contains(err.Error(), tc.code) {
			t.Errorf("%d %s (ifVersion %q): got %v; want an error naming %s that is a conflict: %v", tc.status, tc.code, tc.ifVersion, err, tc.code, tc.conflict)
		}
	}
}

func TestWriteRecognisesItsOwnWriteAfterALostAnswer(t *testing.T) {
	isolate(t)
	srv := s3fake.Start(t, "models")
	srv.Put(t, "models", "c.json", []byte("v1"))
	var dropped atomic.Bool
	dropFirstPut := transport(func(r *http.Request) (*http.Response, error) {
		resp, err := http.DefaultTransport.RoundTrip(r)
		if err != nil || r.Method != http.MethodPut || !dropped.CompareAndSwap(false, true) {
			return resp, err
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		return answer(r, http.StatusServiceUnavailable, "ServiceUnavailable"), nil
	})
	w := openOn(t, srv, "", config.WithHTTPClient(&http.Client{Transport: dropFirstPut}),
		config.WithRetryer(func() aws.Retryer { return retry.AddWithMaxBackoffDelay(retry.NewStandard(), time.Millisecond) }))
	buckettest.CheckOwnWriteAfterALostAnswer(t, w, dropped.Load)
}

// TestFetchSkipsFolderPlaceholders reads a model whose "folders" have the
// empty placeholder objects that S3 consoles create.
func TestFetchSkipsFolderPlaceholders(t *testing.T) {
	buckettest.CheckFetchSkipsFolderPlaceholders(t, storeWithPrefix(""))
}
