package audit

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/fsouza/fake-gcs-server/fakestorage"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"google.golang.org/api/option"

	"github.com/groveml/grove/auth"
	"github.com/groveml/grove/conf/bucket"
	"github.com/groveml/grove/conf/bucket/file"
	"github.com/groveml/grove/conf/bucket/gcs"
	"github.com/groveml/grove/conf/bucket/s3"
	"github.com/groveml/grove/conf/bucket/s3/s3fake"
	"github.com/groveml/grove/conf/modelconfig"
	"github.com/groveml/grove/transport/httpserver"
)

// clock is an injected clock that moves only when told.
type clock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *clock) now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.t }

func (c *clock) set(t time.Time) { c.mu.Lock(); c.t = t; c.mu.Unlock() }

var t0 = time.Date(2026, 11, 25, 3, 4, 31, 123456789, time.UTC)

// stores opens a new, empty bucket of each driver: a directory, the GCS
// fake and the S3 fake, each under a prefix, as two replicas would (two
// handles on one store).
func stores(t *testing.T) map[string]func(t *testing.T) (bucket.Writer, bucket.Writer) {
	return map[string]func(t *testing.T) (bucket.Writer, bucket.Writer){
		"file": func(t *testing.T) (bucket.Writer, bucket.Writer) {
			dir := t.TempDir()
			open := func() bucket.Writer {
				b, err := file.Open("file://" + dir + "/serving")
				if err != nil {
					t.Fatal(err)
				}
				t.Cleanup(func() { b.Close() })
				return b
			}
			if err := os.Mkdir(dir+"/serving", 0o755); err != nil {
				t.Fatal(err)
			}
			return open(), open()
		},
		"gcs": func(t *testing.T) (bucket.Writer, bucket.Writer) {
			srv, err := fakestorage.NewServerWithOptions(fakestorage.Options{Scheme: "http", Host: "127.0.0.1", PublicHost: "127.0.0.1", Writer: io.Discard})
			if err != nil {
				t.Fatal(err)
			}
			srv.CreateBucketWithOpts(fakestorage.CreateBucketOpts{Name: "models"})
			t.Cleanup(srv.Stop)
			open := func() bucket.Writer {
				b, err := gcs.Open(t.Context(), "gs://models/serving", gcs.WithClientOptions(option.WithEndpoint(srv.URL()+"/storage/v1/"), option.WithoutAuthentication()))
				if err != nil {
					t.Fatal(err)
				}
				t.Cleanup(func() { b.Close() })
				return b
			}
			return open(), open()
		},
		"s3": func(t *testing.T) (bucket.Writer, bucket.Writer) {
			t.Setenv("AWS_EC2_METADATA_DISABLED", "true")
			t.Setenv("AWS_CONFIG_FILE", t.TempDir()+"/absent")
			t.Setenv("AWS_SHARED_CREDENTIALS_FILE", t.TempDir()+"/absent")
			srv := s3fake.Start(t, "models")
			open := func() bucket.Writer {
				b, err := s3.Open(t.Context(), "s3://models/serving", s3.WithEndpoint(srv.URL),
					s3.WithLoadOptions(config.WithRegion("us-east-1"), config.WithCredentialsProvider(credentials.NewStaticCredentialsProvider("AKIDTEST", "secret", ""))))
				if err != nil {
					t.Fatal(err)
				}
				t.Cleanup(func() { b.Close() })
				return b
			}
			return open(), open()
		},
	}
}

// newTrail starts a trail on b with clock c, logging into logs.
func newTrail(t *testing.T, b bucket.Bucket, c *clock, logs io.Writer, opts Options) (*Trail, *prometheus.Registry) {
	t.Helper()
	reg := prometheus.NewRegistry()
	opts.Bucket, opts.Dir, opts.Now, opts.Registerer = b, DirOf("model_config.json"), c.now, reg
	if opts.Replica == "" {
		opts.Replica = "test/1"
	}
	// A warn-level JSON logger: audit records are written at Info anyway.
	opts.Logger = slog.New(slog.NewJSONHandler(logs, &slog.HandlerOptions{Level: slog.LevelWarn}))
	tr := New(opts)
	t.Cleanup(func() { _ = tr.Close(context.Background()) })
	return tr, reg
}

// syncBuffer is a log destination safe for the trail's goroutines.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string { s.mu.Lock(); defer s.mu.Unlock(); return s.b.String() }

// recordWrite records one management write made by who through rec.
func recordWrite(rec Recorder, who, target string, err error) {
	ctx := context.Background()
	if who != "" {
		ctx = auth.NewContext(ctx, auth.Identity{Name: who, Roles: []auth.Role{auth.RoleManage}, Method: "token"})
	}
	ctx, w := Begin(ctx, rec, Op{API: "manage", Route: "PUT /{org}/{project}/{n}/{rv}/policy", Path: "/" + target + "/policy", Target: target, Remote: "127.0.0.1:5000"})
	FromContext(ctx).StateChange("ads/pctr/1", "v2", nil, &modelconfig.ServableRecord{Metrics: map[string]float64{"auc": 0.7}})
	status := "200"
	if err != nil {
		status = "503"
	}
	w.Finish(ctx, status, err)
}

func TestTrailWritesOneObjectPerEntryAndListsEveryReplicasNewestLast(t *testing.T) {
	for name, open := range stores(t) {
		t.Run(name, func(t *testing.T) {
			b1, b2 := open(t)
			c := &clock{t: t0}
			logs := &syncBuffer{}
			r1, reg := newTrail(t, b1, c, logs, Options{Replica: "r1"})
			r2, _ := newTrail(t, b2, c, io.Discard, Options{Replica: "r2"})

			recordWrite(r1, "release-bot", "ads/pctr/1/v2", nil)
			c.set(t0.Add(time.Second))
			recordWrite(r2, "", "ads/pctr/1/v3", nil)
			c.set(t0.Add(2 * time.Second))
			recordWrite(r1, "release-bot", "ads/pctr/1/v4", errors.New("bucket busy"))

			// Each Record returned once its object was written.
			if got := testutil.ToFloat64(r1.records.WithLabelValues("written")); got != 2 {
				t.Errorf("r1 written = %v, want 2", got)
			}
			objs, err := b1.List(t.Context(), "audit/2")
			if err != nil || len(objs) != 3 {
				t.Fatalf("audit objects %v %v, want 3", objs, err)
			}
			if !strings.HasPrefix(objs[0].Name, "audit/20261125T030431.123456789Z-") || !strings.HasSuffix(objs[0].Name, "-000001.json") {
				t.Errorf("object name %q", objs[0].Name)
			}

			l, err := r2.List(t.Context(), time.Time{})
			if err != nil {
				t.Fatal(err)
			}
			if len(l.Entries) != 3 || l.Truncated || len(l.Unreadable) != 0 {
				t.Fatalf("listing %+v", l)
			}
			want := []struct{ who, replica, target, result string }{
				{"release-bot", "r1", "ads/pctr/1/v2", "ok"}, {Anonymous, "r2", "ads/pctr/1/v3", "ok"}, {"release-bot", "r1", "ads/pctr/1/v4", "error"}}
			for i, w := range want {
				e := l.Entries[i]
				if e.Who != w.who || e.Replica != w.replica || e.Target != w.target || e.Result != w.result || !e.Time.Equal(t0.Add(time.Duration(i)*time.Second)) {
					t.Errorf("entry %d: %+v, want %+v", i, e, w)
				}
			}
			if e := l.Entries[1]; e.Auth != "none" || e.After[SectionContractState] == nil || e.Before != nil {
				t.Errorf("anonymous entry: %+v", e)
			}
			if e := l.Entries[2]; e.Error != "bucket busy" || e.Status != "503" || e.Auth != "token" {
				t.Errorf("failed entry: %+v", e)
			}

			since, err := r1.List(t.Context(), t0.Add(time.Second))
			if err != nil || len(since.Entries) != 2 || since.Entries[0].Target != "ads/pctr/1/v3" {
				t.Errorf("since t0+1s: %+v %v", since, err)
			}

			// The log has one "audit" record per entry, although the logger is at warn.
			n := 0
			for line := range strings.SplitSeq(strings.TrimSpace(logs.String()), "\n") {
				var rec map[string]any
				if err := json.Unmarshal([]byte(line), &rec); err != nil {
					t.Fatalf("log line %q: %v", line, err)
				}
				if rec["msg"] == "audit" {
					n++
					if rec["who"] != "release-bot" || rec["after"] == nil {
						t.Errorf("audit log record %v", rec)
					}
				}
			}
			if n != 2 {
				t.Errorf("%d audit log records from r1, want 2:\n%s", n, logs)
			}
			if got := testutil.CollectAndCount(reg, "grove_audit_records_total"); got != 3 {
				t.Errorf("grove_audit_records_total has %d series, want 3", got)
			}
		})
	}
}

func TestKeysNeverGoBackInTimeOnAReplica(t *testing.T) {
	b1, _ := stores(t)["file"](t)
	c := &clock{t: t0}
	tr, _ := newTrail(t, b1, c, io.Discard, Options{})
	recordWrite(tr, "a", "x/y/1", nil)
	c.set(t0.Add(-time.Hour)) // the wall clock steps back
	recordWrite(tr, "b", "x/y/1", nil)
	l, err := tr.List(t.Context(), time.Time{})
	if err != nil || len(l.Entries) != 2 || l.Entries[0].Who != "a" || l.Entries[1].Who != "b" || l.Entries[1].Time.Before(l.Entries[0].Time) {
		t.Fatalf("listing %+v %v", l, err)
	}
}

// slowBucket is a bucket whose writes wait until release is closed, or
// fail with err.
type slowBucket struct {
	bucket.Writer
	release chan struct{}
	err     error
	writes  chan string
}

func (s *slowBucket) WriteObject(ctx context.Context, name string, data []byte, ifVersion string) (bucket.Attrs, error) {
	s.writes <- name
	select {
	case <-s.release:
	case <-ctx.Done():
		return bucket.Attrs{}, ctx.Err()
	}
	if s.err != nil {
		return bucket.Attrs{}, s.err
	}
	return s.Writer.WriteObject(ctx, name, data, ifVersion)
}

func TestASlowBucketDelaysAWriteByTheWaitBoundAndTheObjectFollows(t *testing.T) {
	b1, _ := stores(t)["file"](t)
	slow := &slowBucket{Writer: b1, release: make(chan struct{}), writes: make(chan string, 10)}
	tr, _ := newTrail(t, slow, &clock{t: t0}, io.Discard, Options{Wait: time.Millisecond})
	recordWrite(tr, "a", "x/y/1", nil) // returns after the wait bound: the write is held
	if got := testutil.ToFloat64(tr.late); got != 1 {
		t.Errorf("unconfirmed = %v, want 1", got)
	}
	close(slow.release)
	if err := tr.Close(t.Context()); err != nil {
		t.Fatal(err)
	}
	if got := testutil.ToFloat64(tr.records.WithLabelValues("written")); got != 1 {
		t.Errorf("written = %v, want 1", got)
	}
	if objs, _ := b1.List(t.Context(), "audit/2"); len(objs) != 1 {
		t.Errorf("objects %v", objs)
	}
}

func TestAFullQueueDropsObjectsButKeepsTheLogAndTheWrite(t *testing.T) {
	b1, _ := stores(t)["file"](t)
	slow := &slowBucket{Writer: b1, release: make(chan struct{}), writes: make(chan string, 10)}
	logs := &syncBuffer{}
	tr, _ := newTrail(t, slow, &clock{t: t0}, logs, Options{Wait: time.Millisecond, QueueSize: 1})
	// Two writers hold one object each, one waits in the queue, the next is dropped.
	for i := range 3 {
		recordWrite(tr, "a", "x/y/1", nil)
		if i < 2 {
			<-slow.writes
		}
	}
	recordWrite(tr, "b", "x/y/1", nil)
	if got := testutil.ToFloat64(tr.records.WithLabelValues("dropped")); got != 1 {
		t.Errorf("dropped = %v, want 1", got)
	}
	if !strings.Contains(logs.String(), `"who":"b"`) || !strings.Contains(logs.String(), "audit object dropped") {
		t.Errorf("logs:\n%s", logs)
	}
	close(slow.release)
	if err := tr.Close(t.Context()); err != nil {
		t.Fatal(err)
	}
	recordWrite(tr, "c", "x/y/1", nil) // after Close: only logged
	if got := testutil.ToFloat64(tr.records.WithLabelValues("dropped")); got != 2 {
		t.Errorf("dropped after close = %v, want 2", got)
	}
}

func TestAFailingBucketCountsTheFailureAndTheWriteGoesOn(t *testing.T) {
	b1, _ := stores(t)["file"](t)
	slow := &slowBucket{Writer: b1, release: make(chan struct{}), err: errors.New("403 forbidden"), writes: make(chan string, 10)}
	close(slow.release)
	tr, _ := newTrail(t, slow, &clock{t: t0}, io.Discard, Options{})
	recordWrite(tr, "a", "x/y/1", nil)
	if got := testutil.ToFloat64(tr.records.WithLabelValues("failed")); got != 1 {
		t.Errorf("failed = %v, want 1", got)
	}
	if len(slow.writes) != writeTries {
		t.Errorf("%d tries, want %d", len(slow.writes), writeTries)
	}
}

func TestCloseCutsWritesAtItsDeadline(t *testing.T) {
	b1, _ := stores(t)["file"](t)
	slow := &slowBucket{Writer: b1, release: make(chan struct{}), writes: make(chan string, 10)}
	tr, _ := newTrail(t, slow, &clock{t: t0}, io.Discard, Options{Wait: time.Millisecond})
	recordWrite(tr, "a", "x/y/1", nil)
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	if err := tr.Close(ctx); err == nil {
		t.Error("Close with a held write and a done context: no error")
	}
	if got := testutil.ToFloat64(tr.records.WithLabelValues("failed")); got != 1 {
		t.Errorf("failed = %v, want 1", got)
	}
}

func TestAReadOnlyBucketOnlyLogs(t *testing.T) {
	logs := &syncBuffer{}
	tr, _ := newTrail(t, bucket.NewMemory("mem", map[string][]byte{}), &clock{t: t0}, logs, Options{})
	recordWrite(tr, "a", "x/y/1", nil)
	if !strings.Contains(logs.String(), `"msg":"audit"`) {
		t.Errorf("logs: %s", logs)
	}
	if l, err := tr.List(t.Context(), time.Time{}); err != nil || len(l.Entries) != 0 {
		t.Errorf("listing %+v %v", l, err)
	}
}

func TestListReportsObjectsThatAreNotEntries(t *testing.T) {
	b1, _ := stores(t)["file"](t)
	tr, _ := newTrail(t, b1, &clock{t: t0}, io.Discard, Options{})
	recordWrite(tr, "a", "x/y/1", nil)
	for name, data := range map[string]string{
		"audit/README.txt":                         "hand-written",
		"audit/" + Key(t0.Add(time.Second), "0-1"): `{"id": "x"}`,
		"audit/" + Key(t0.Add(-time.Hour), "0-2"):  `garbage, before since`,
	} {
		if _, err := b1.WriteObject(t.Context(), name, []byte(data), ""); err != nil {
			t.Fatal(err)
		}
	}
	l, err := tr.List(t.Context(), t0)
	if err != nil {
		t.Fatal(err)
	}
	if len(l.Entries) != 1 || len(l.Unreadable) != 2 {
		t.Fatalf("listing %+v", l)
	}
	for _, u := range l.Unreadable {
		if !strings.Contains(u.Error, "not an audit object name") && !strings.Contains(u.Error, "missing who") {
			t.Errorf("unreadable %+v", u)
		}
	}
}

func TestGetAuditAnswersTheListingAndNamesABadSince(t *testing.T) {
	b1, _ := stores(t)["file"](t)
	c := &clock{t: t0}
	tr, _ := newTrail(t, b1, c, io.Discard, Options{})
	recordWrite(tr, "a", "x/y/1", nil)
	c.set(t0.Add(time.Minute))
	recordWrite(tr, "b", "x/y/1", nil)
	h := httpserver.New(httpserver.Options{})
	Register(h, tr)
	srv := httptest.NewServer(h.Handler())
	t.Cleanup(srv.Close)
	for _, tc := range []struct {
		query string
		code  int
		has   string
		n     int
	}{
		{"", 200, `"who": "a"`, 2},
		{"?since=" + url.QueryEscape(t0.Add(time.Second).Format(time.RFC3339)), 200, `"who": "b"`, 1},
		{"?since=2026-11-25T04:04:32%2B01:00", 200, `"who": "b"`, 1},
		{"?since=2026-11-25T04:04:00+01:00", 400, `%2B`, 0},
		{"?since=yesterday", 400, `query parameter \"since\"`, 0},
		{"?since=", 400, `\"since\" is empty`, 0},
		{"?since=2026-11-25T00:00:00Z&since=2026-11-26T00:00:00Z", 400, "more than once", 0},
		{"?since=%zz", 400, "query", 0},
	} {
		resp, err := http.Get(srv.URL + "/v1/audit" + tc.query)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != tc.code || !strings.Contains(string(body), tc.has) {
			t.Errorf("%s: HTTP %d %s, want %d with %s", tc.query, resp.StatusCode, body, tc.code, tc.has)
			continue
		}
		if tc.code == 200 {
			var l Listing
			if err := json.Unmarshal(body, &l); err != nil || len(l.Entries) != tc.n {
				t.Errorf("%s: %d entries (%v), want %d", tc.query, len(l.Entries), err, tc.n)
			}
		}
	}
}

func TestDirOf(t *testing.T) {
	for in, want := range map[string]string{"model_config.json": "audit/", "serving/grove/config.json": "serving/grove/audit/"} {
		if got := DirOf(in); got != want {
			t.Errorf("DirOf(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestAnEntryTooLargeToListKeepsWhoAndDropsItsSections(t *testing.T) {
	b1, _ := stores(t)["file"](t)
	logs := &syncBuffer{}
	tr, _ := newTrail(t, b1, &clock{t: t0}, logs, Options{})
	ctx := auth.NewContext(context.Background(), auth.Identity{Name: "mallory", Method: "token"})
	ctx, w := Begin(ctx, tr, Op{API: "manage", Route: "POST /servable", Target: "ads/pctr/1/v1"})
	huge := strings.Repeat("x", MaxObjectBytes)
	w.Change("model_config", nil, map[string]string{"settings": huge})
	w.Finish(ctx, "200", nil)
	l, err := tr.List(t.Context(), time.Time{})
	if err != nil || len(l.Unreadable) != 0 || len(l.Entries) != 1 {
		t.Fatalf("listing %d entries, unreadable %+v, %v; want the entry listed", len(l.Entries), l.Unreadable, err)
	}
	e := l.Entries[0]
	if e.Who != "mallory" || e.Target != "ads/pctr/1/v1" || !strings.Contains(string(e.After["model_config"]), "not recorded") {
		t.Errorf("entry by %q on %q, after %.80s; want mallory's, with its section noted as not recorded", e.Who, e.Target, e.After["model_config"])
	}
	if strings.Contains(logs.String(), huge[:4096]) {
		t.Error("the log record holds the oversized section")
	}
}
