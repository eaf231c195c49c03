package bucket

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"cloud.google.com/go/storage"
	"github.com/googleapis/gax-go/v2"
	"google.golang.org/api/option"
)

// eachWriter runs f against every kind of test bucket, as a Writer.
func eachWriter(t *testing.T, objects map[string]string, f func(t *testing.T, w Writer)) {
	eachBucket(t, objects, func(t *testing.T, b Bucket) {
		w, ok := b.(Writer)
		if !ok {
			t.Fatalf("%T does not implement Writer", b)
		}
		f(t, w)
	})
}

// conflictCounter is a Writer that counts the conflicts of its writes.
type conflictCounter struct {
	Writer
	conflicts atomic.Int64
}

// updateTurns lets Updates through the counter take the wrapped bucket's turns.
func (c *conflictCounter) updateTurns() *turns {
	if tt, ok := c.Writer.(turnTaker); ok {
		return tt.updateTurns()
	}
	return nil
}

func (c *conflictCounter) WriteObject(ctx context.Context, name string, data []byte, ifGeneration int64) (Attrs, error) {
	a, err := c.Writer.WriteObject(ctx, name, data, ifGeneration)
	if errors.Is(err, ErrConflict) {
		c.conflicts.Add(1)
	}
	return a, err
}

func TestWriteObjectCreateIfAbsent(t *testing.T) {
	eachWriter(t, testObjects, func(t *testing.T, w Writer) {
		ctx := context.Background()
		a, err := w.WriteObject(ctx, "metrics/ads/pctr.json", []byte("one"), 0)
		if err != nil {
			t.Fatal(err)
		}
		if a.Generation <= 0 || a.Size != 3 || a.ModTime.IsZero() {
			t.Errorf("attrs %+v", a)
		}
		data, ra, err := w.ReadObject(ctx, "metrics/ads/pctr.json")
		if err != nil || string(data) != "one" || ra.Generation != a.Generation {
			t.Errorf("ReadObject = %q, %+v, %v; want \"one\" at generation %d", data, ra, err, a.Generation)
		}
		// A second create, and a create over a pre-existing object, conflict.
		for _, name := range []string{"metrics/ads/pctr.json", "model_config.json"} {
			before, _, _ := w.ReadObject(ctx, name)
			if _, err := w.WriteObject(ctx, name, []byte("two"), 0); !errors.Is(err, ErrConflict) {
				t.Errorf("create of existing %s: got %v, want ErrConflict", name, err)
			}
			if after, _, _ := w.ReadObject(ctx, name); string(after) != string(before) {
				t.Errorf("%s changed by a failed write: %q", name, after)
			}
		}
	})
}

func TestWriteObjectGenerationMismatch(t *testing.T) {
	eachWriter(t, testObjects, func(t *testing.T, w Writer) {
		ctx := context.Background()
		_, a1, err := w.ReadObject(ctx, "model_config.json")
		if err != nil {
			t.Fatal(err)
		}
		a2, err := w.WriteObject(ctx, "model_config.json", []byte(`{"v":2}`), a1.Generation)
		if err != nil {
			t.Fatal(err)
		}
		if a2.Generation == a1.Generation {
			t.Fatalf("write kept generation %d", a1.Generation)
		}
		// The generation read before the write is stale now.
		if _, err := w.WriteObject(ctx, "model_config.json", []byte(`{"v":3}`), a1.Generation); !errors.Is(err, ErrConflict) {
			t.Errorf("write at stale generation: got %v, want ErrConflict", err)
		}
		if _, err := w.WriteObject(ctx, "model_config.json", []byte(`{"v":3}`), a2.Generation+1); !errors.Is(err, ErrConflict) {
			t.Errorf("write at a wrong generation: got %v, want ErrConflict", err)
		}
		data, a, err := w.ReadObject(ctx, "model_config.json")
		if err != nil || string(data) != `{"v":2}` || a.Generation != a2.Generation {
			t.Errorf("ReadObject = %q, %+v, %v; want v2 at generation %d", data, a, err, a2.Generation)
		}
		if _, err := w.WriteObject(ctx, "model_config.json", []byte(`{"v":3}`), a2.Generation); err != nil {
			t.Errorf("write at current generation: %v", err)
		}
		// An object that does not exist has no generation to match.
		if _, err := w.WriteObject(ctx, "absent.json", []byte("x"), a2.Generation); !errors.Is(err, ErrConflict) {
			t.Errorf("write of absent object at generation %d: got %v, want ErrConflict", a2.Generation, err)
		}
		if _, _, err := w.ReadObject(ctx, "absent.json"); !errors.Is(err, ErrNotExist) {
			t.Errorf("absent.json after a failed write: %v", err)
		}
		if _, err := w.WriteObject(ctx, "model_config.json", nil, -1); err == nil || errors.Is(err, ErrConflict) {
			t.Errorf("negative generation: got %v, want an argument error", err)
		}
	})
}

// TestFileGenerationChangesOnEverySameSizeWrite writes same-size content
// back to back, well within one file system timestamp tick.
func TestFileGenerationChangesOnEverySameSizeWrite(t *testing.T) {
	w := newFileBucket(t, testObjects).(Writer)
	ctx := context.Background()
	_, a, err := w.ReadObject(ctx, "model1")
	if err != nil {
		t.Fatal(err)
	}
	seen := map[int64]bool{a.Generation: true}
	prev := a
	for i := range 200 {
		content := []byte(fmt.Sprintf("v%05d", i%2)) // alternates between two contents
		na, err := w.WriteObject(ctx, "model1", content, prev.Generation)
		if err != nil {
			t.Fatalf("write %d: %v", i, err)
		}
		if seen[na.Generation] {
			t.Fatalf("write %d reused generation %d", i, na.Generation)
		}
		seen[na.Generation] = true
		if !na.ModTime.After(prev.ModTime) {
			t.Fatalf("write %d: modification time %v not after %v", i, na.ModTime, prev.ModTime)
		}
		data, ra, err := w.ReadObject(ctx, "model1")
		if err != nil || string(data) != string(content) || ra != na {
			t.Fatalf("write %d: ReadObject = %q, %+v, %v; want %q, %+v", i, data, ra, err, content, na)
		}
		// Any earlier generation is stale.
		if _, err := w.WriteObject(ctx, "model1", content, a.Generation); !errors.Is(err, ErrConflict) {
			t.Fatalf("write %d: write at the first generation: got %v, want ErrConflict", i, err)
		}
		prev = na
	}
}

func TestFileWriteObjectLeavesNoTemporaryFiles(t *testing.T) {
	b := newFileBucket(t, testObjects)
	w := b.(Writer)
	ctx := context.Background()
	if _, err := w.WriteObject(ctx, "a/b/c.json", []byte("x"), 0); err != nil {
		t.Fatal(err)
	}
	if _, err := w.WriteObject(ctx, "a/b/c.json", []byte("y"), 0); !errors.Is(err, ErrConflict) {
		t.Fatalf("got %v, want ErrConflict", err)
	}
	objs, err := b.List(ctx, "a/")
	if err != nil {
		t.Fatal(err)
	}
	for _, o := range objs {
		if strings.Contains(o.Name, ".tmp-") {
			t.Errorf("temporary file left: %s", o.Name)
		}
	}
	if len(objs) != 2 || objs[0].Name != "a/b/.c.json.lock" || objs[1].Name != "a/b/c.json" {
		t.Errorf("List(a/) = %v; want the object and its lock file", objs)
	}
}

func TestFileWriteObjectRejectsBadTargets(t *testing.T) {
	root := t.TempDir()
	mustWrite(t, filepath.Join(root, "real.json"), "{}")
	mustSymlink(t, "real.json", filepath.Join(root, "link.json"))
	mustWrite(t, filepath.Join(root, "dir", "f"), "x")
	b, err := Open(context.Background(), "file://"+root)
	if err != nil {
		t.Fatal(err)
	}
	defer b.(io.Closer).Close()
	w := b.(Writer)
	ctx := context.Background()
	_, a, err := w.ReadObject(ctx, "link.json")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := w.WriteObject(ctx, "link.json", []byte("x"), a.Generation); err == nil || !strings.Contains(err.Error(), "symlink") {
		t.Errorf("write through a symlink: got %v", err)
	}
	for _, name := range []string{"dir", "dir/", "../x", "a//b", "", "."} {
		if _, err := w.WriteObject(ctx, name, []byte("x"), 0); err == nil || errors.Is(err, ErrConflict) {
			t.Errorf("WriteObject(%q): got %v, want an error", name, err)
		}
	}
	if data, _ := os.ReadFile(filepath.Join(root, "real.json")); string(data) != "{}" {
		t.Errorf("symlink target changed: %q", data)
	}
}

func TestFileWriteObjectHonoursCancellation(t *testing.T) {
	b := newFileBucket(t, testObjects)
	fb := b.(*fileBucket)
	unlock, err := lockFile(context.Background(), fb.root, ".model1.lock")
	if err != nil {
		t.Fatal(err)
	}
	defer unlock()
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	_, a, _ := fb.ReadObject(ctx, "model1")
	if _, err := fb.WriteObject(ctx, "model1", []byte("x"), a.Generation); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("write while another holds the lock: got %v, want the deadline", err)
	}
}

// appendLine is an Update change that appends line.
func appendLine(line string) func([]byte, bool) ([]byte, error) {
	return func(current []byte, exists bool) ([]byte, error) {
		return append(append([]byte(nil), current...), line+"\n"...), nil
	}
}

// runAppenders makes goroutines goroutines each append updates unique
// lines "<who>-<goroutine>-<update>" to name with Update.
func runAppenders(ctx context.Context, w Writer, name, who string, goroutines, updates int) error {
	var wg sync.WaitGroup
	errs := make([]error, goroutines)
	for g := range goroutines {
		wg.Go(func() {
			for u := range updates {
				if err := Update(ctx, w, name, appendLine(fmt.Sprintf("%s-%d-%d", who, g, u))); err != nil {
					errs[g] = err
					return
				}
			}
		})
	}
	wg.Wait()
	return errors.Join(errs...)
}

// checkLines checks that data holds exactly the lines runAppenders wrote for each of whos.
func checkLines(t *testing.T, data []byte, whos []string, goroutines, updates int) {
	t.Helper()
	got := map[string]int{}
	for line := range strings.Lines(string(data)) {
		got[strings.TrimSuffix(line, "\n")]++
	}
	missing := 0
	for _, who := range whos {
		for g := range goroutines {
			for u := range updates {
				line := fmt.Sprintf("%s-%d-%d", who, g, u)
				if got[line] != 1 {
					if missing++; missing <= 10 {
						t.Errorf("line %s present %d times", line, got[line])
					}
				}
				delete(got, line)
			}
		}
	}
	if missing > 0 {
		t.Errorf("%d lines lost or duplicated", missing)
	}
	if len(got) > 0 {
		t.Errorf("unexpected lines: %v", got)
	}
}

// replicas opens n buckets of the given kind ("file", "gcs" or
// "gcs-prefix") on one store holding objects, each as another replica
// would: its own directory handle or storage client.
func replicas(t *testing.T, kind string, n int, objects map[string]string) []Writer {
	t.Helper()
	var urls []string
	var opts []Option
	switch kind {
	case "file":
		urls = slices.Repeat([]string{newFileBucket(t, objects).String()}, n)
	default:
		prefix := ""
		if kind == "gcs-prefix" {
			prefix = "serving/grove/"
		}
		prefixed := map[string]string{}
		for name, content := range objects {
			prefixed[prefix+name] = content
		}
		srv := newFakeGCS(t, prefixed)
		urls = slices.Repeat([]string{"gs://models/" + prefix}, n)
		opts = []Option{WithClientOptions(option.WithEndpoint(srv.URL()+"/storage/v1/"), option.WithoutAuthentication())}
	}
	var ws []Writer
	for _, u := range urls {
		b, err := Open(context.Background(), u, opts...)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { b.(io.Closer).Close() })
		ws = append(ws, b.(Writer))
	}
	return ws
}

// TestUpdateConcurrentAppendsLoseNothing has several replicas, each with
// several goroutines, append lines to one object at once.
func TestUpdateConcurrentAppendsLoseNothing(t *testing.T) {
	const nReplicas, goroutines, updates = 3, 3, 15
	for _, kind := range []string{"file", "gcs", "gcs-prefix"} {
		t.Run(kind, func(t *testing.T) {
			ctx := context.Background()
			var counters []*conflictCounter
			var whos []string
			var wg sync.WaitGroup
			errs := make([]error, nReplicas)
			for i, w := range replicas(t, kind, nReplicas, testObjects) {
				cw := &conflictCounter{Writer: w}
				counters = append(counters, cw)
				who := fmt.Sprintf("replica%d", i)
				whos = append(whos, who)
				wg.Go(func() { errs[i] = runAppenders(ctx, cw, "log/lines.txt", who, goroutines, updates) })
			}
			wg.Wait()
			if err := errors.Join(errs...); err != nil {
				t.Fatal(err)
			}
			data, _, err := counters[0].ReadObject(ctx, "log/lines.txt")
			if err != nil {
				t.Fatal(err)
			}
			checkLines(t, data, whos, goroutines, updates)
			var conflicts int64
			for _, c := range counters {
				conflicts += c.conflicts.Load()
			}
			t.Logf("%d updates, %d conflicts retried", nReplicas*goroutines*updates, conflicts)
			if conflicts == 0 {
				t.Log("no conflicts: the replicas did not overlap")
			}
		})
	}
}

// TestUpdateTakesTurnsWithinAWriter checks that goroutines updating
// through one Writer do not make each other retry.
func TestUpdateTakesTurnsWithinAWriter(t *testing.T) {
	const goroutines, updates = 6, 10
	eachWriter(t, testObjects, func(t *testing.T, w Writer) {
		cw := &conflictCounter{Writer: w}
		ctx := context.Background()
		if err := runAppenders(ctx, cw, "log/lines.txt", "p", goroutines, updates); err != nil {
			t.Fatal(err)
		}
		data, _, err := w.ReadObject(ctx, "log/lines.txt")
		if err != nil {
			t.Fatal(err)
		}
		checkLines(t, data, []string{"p"}, goroutines, updates)
		if n := cw.conflicts.Load(); n != 0 {
			t.Errorf("%d conflicts within one Writer", n)
		}
		turns := w.(turnTaker).updateTurns()
		turns.mu.Lock()
		defer turns.mu.Unlock()
		if len(turns.slots) != 0 {
			t.Errorf("%d turn slots left", len(turns.slots))
		}
	})
}

// Environment of TestHelperUpdateProcess.
const (
	helperEnv = "GROVE_BUCKET_TEST_UPDATER" // "<bucket dir>|<object>|<who>|<goroutines>|<updates>|<sync dir>"
)

// TestHelperUpdateProcess is not a test: TestFileUpdateAcrossProcesses
// runs the test binary with it, as another process appending to a file bucket.
func TestHelperUpdateProcess(t *testing.T) {
	spec := os.Getenv(helperEnv)
	if spec == "" {
		t.Skip("helper process for TestFileUpdateAcrossProcesses")
	}
	f := strings.Split(spec, "|")
	dir, name, who, syncDir := f[0], f[1], f[2], f[5]
	goroutines, _ := strconv.Atoi(f[3])
	updates, _ := strconv.Atoi(f[4])
	ctx := context.Background()
	b, err := Open(ctx, "file://"+dir)
	if err != nil {
		t.Fatal(err)
	}
	defer b.(io.Closer).Close()
	cw := &conflictCounter{Writer: b.(Writer)}
	// Say ready, then wait for the signal to start, so that every process runs at once.
	mustWrite(t, filepath.Join(syncDir, "ready-"+who), "")
	for {
		if _, err := os.Stat(filepath.Join(syncDir, "go")); err == nil {
			break
		}
		time.Sleep(time.Millisecond)
	}
	if err := runAppenders(ctx, cw, name, who, goroutines, updates); err != nil {
		t.Fatal(err)
	}
	fmt.Printf("helper %s: %d conflicts retried\n", who, cw.conflicts.Load())
}

// TestFileUpdateAcrossProcesses has two other processes and this one append
// to one file object at once.
func TestFileUpdateAcrossProcesses(t *testing.T) {
	if os.Getenv(helperEnv) != "" {
		t.Skip("in a helper process")
	}
	const goroutines, updates = 3, 15
	dir, syncDir := t.TempDir(), t.TempDir()
	b, err := Open(context.Background(), "file://"+dir)
	if err != nil {
		t.Fatal(err)
	}
	defer b.(io.Closer).Close()
	w := &conflictCounter{Writer: b.(Writer)}

	whos := []string{"child1", "child2"}
	var wg sync.WaitGroup
	for _, who := range whos {
		cmd := exec.Command(os.Args[0], "-test.run=^TestHelperUpdateProcess$", "-test.count=1", "-test.v")
		cmd.Env = append(os.Environ(), helperEnv+"="+strings.Join([]string{
			dir, "config.json", who, strconv.Itoa(goroutines), strconv.Itoa(updates), syncDir}, "|"))
		out := &strings.Builder{}
		cmd.Stdout, cmd.Stderr = out, out
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		wg.Go(func() {
			if err := cmd.Wait(); err != nil {
				t.Errorf("%s: %v\n%s", who, err, out)
				return
			}
			for line := range strings.Lines(out.String()) {
				if strings.HasPrefix(line, "helper ") {
					t.Log(strings.TrimSpace(line))
				}
			}
		})
	}
	deadline := time.Now().Add(time.Minute)
	for _, who := range whos {
		for {
			if _, err := os.Stat(filepath.Join(syncDir, "ready-"+who)); err == nil {
				break
			}
			if time.Now().After(deadline) {
				os.WriteFile(filepath.Join(syncDir, "go"), nil, 0o644) // release the other
				wg.Wait()
				t.Fatalf("%s never got ready", who)
			}
			time.Sleep(time.Millisecond)
		}
	}
	mustWrite(t, filepath.Join(syncDir, "go"), "")
	if err := runAppenders(context.Background(), w, "config.json", "parent", goroutines, updates); err != nil {
		t.Error(err)
	}
	wg.Wait()
	data, _, err := b.ReadObject(context.Background(), "config.json")
	if err != nil {
		t.Fatal(err)
	}
	checkLines(t, data, append(whos, "parent"), goroutines, updates)
	t.Logf("parent: %d conflicts retried", w.conflicts.Load())
}

func TestUpdateCreatesAndSeesMissingObject(t *testing.T) {
	eachWriter(t, testObjects, func(t *testing.T, w Writer) {
		ctx := context.Background()
		var sawExists []bool
		change := func(current []byte, exists bool) ([]byte, error) {
			sawExists = append(sawExists, exists)
			return append(append([]byte(nil), current...), 'x'), nil
		}
		for range 2 {
			if err := Update(ctx, w, "new.txt", change); err != nil {
				t.Fatal(err)
			}
		}
		if data, _, _ := w.ReadObject(ctx, "new.txt"); string(data) != "xx" || len(sawExists) != 2 || sawExists[0] || !sawExists[1] {
			t.Errorf("content %q, exists seen %v", data, sawExists)
		}
	})
}

func TestUpdateReturnsChangeErrorWithoutWriting(t *testing.T) {
	eachWriter(t, testObjects, func(t *testing.T, w Writer) {
		boom := errors.New("invalid contract")
		err := Update(context.Background(), w, "model_config.json", func([]byte, bool) ([]byte, error) { return []byte("bad"), boom })
		if !errors.Is(err, boom) {
			t.Errorf("got %v, want the change's error", err)
		}
		if data, _, _ := w.ReadObject(context.Background(), "model_config.json"); string(data) != testObjects["model_config.json"] {
			t.Errorf("content changed to %q", data)
		}
	})
}

// alwaysConflicts is a Writer whose writes always conflict, as if another
// writer always got in first.
type alwaysConflicts struct {
	Writer
	writes int
}

func (a *alwaysConflicts) WriteObject(context.Context, string, []byte, int64) (Attrs, error) {
	a.writes++
	return Attrs{}, fmt.Errorf("test: %w", ErrConflict)
}

func TestUpdateGivesUpAfterLastTry(t *testing.T) {
	w := &alwaysConflicts{Writer: newFileBucket(t, testObjects).(Writer)}
	calls := 0
	err := Update(context.Background(), w, "model_config.json", func(c []byte, _ bool) ([]byte, error) { calls++; return c, nil })
	if !errors.Is(err, ErrConflict) || !strings.Contains(err.Error(), "gave up after 10 attempts") {
		t.Errorf("got %v, want a give-up error wrapping ErrConflict", err)
	}
	if w.writes != UpdateTries || calls != UpdateTries {
		t.Errorf("%d writes, %d change calls; want %d each", w.writes, calls, UpdateTries)
	}
	// A cancelled context stops the retries.
	ctx, cancel := context.WithCancel(context.Background())
	w.writes = 0
	err = Update(ctx, w, "model_config.json", func(c []byte, _ bool) ([]byte, error) { cancel(); return c, nil })
	if !errors.Is(err, context.Canceled) || w.writes != 1 {
		t.Errorf("cancelled: got %v after %d writes", err, w.writes)
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

func TestGCSWriteRecognisesItsOwnWriteAfterALostAnswer(t *testing.T) {
	srv := newFakeGCS(t, map[string]string{"c.json": "v1"})
	transport := &dropFirstUpload{base: http.DefaultTransport}
	client, err := storage.NewClient(context.Background(), storage.WithJSONReads(),
		option.WithEndpoint(srv.URL()+"/storage/v1/"), option.WithHTTPClient(&http.Client{Transport: transport}))
	if err != nil {
		t.Fatal(err)
	}
	defer client.Close()
	client.SetRetry(storage.WithBackoff(gax.Backoff{Initial: time.Millisecond, Max: 10 * time.Millisecond}))
	b, err := Open(context.Background(), "gs://models", WithStorageClient(client))
	if err != nil {
		t.Fatal(err)
	}
	w := b.(Writer)
	ctx := context.Background()
	_, a, err := w.ReadObject(ctx, "c.json")
	if err != nil {
		t.Fatal(err)
	}
	na, err := w.WriteObject(ctx, "c.json", []byte("v2"), a.Generation)
	if err != nil {
		t.Fatalf("write whose first answer was lost: %v", err)
	}
	if !transport.dropped.Load() {
		t.Fatal("the transport dropped no answer")
	}
	data, ra, err := w.ReadObject(ctx, "c.json")
	if err != nil || string(data) != "v2" || ra.Generation != na.Generation {
		t.Errorf("ReadObject = %q, %+v, %v; want v2 at generation %d", data, ra, err, na.Generation)
	}
	// A real conflict is still one.
	if _, err := w.WriteObject(ctx, "c.json", []byte("v3"), a.Generation); !errors.Is(err, ErrConflict) {
		t.Errorf("stale write: got %v, want ErrConflict", err)
	}
}

// TestFileWriteAfterClockWentBack writes over an object whose modification
// time is ahead of the clock: the new version's must still be later, or a
// same-size rewrite within the same tick could repeat a generation.
func TestFileWriteAfterClockWentBack(t *testing.T) {
	dir := t.TempDir()
	mustWrite(t, filepath.Join(dir, "c.json"), "v1")
	future := time.Now().Add(time.Hour)
	if err := os.Chtimes(filepath.Join(dir, "c.json"), time.Time{}, future); err != nil {
		t.Fatal(err)
	}
	b, err := Open(context.Background(), "file://"+dir)
	if err != nil {
		t.Fatal(err)
	}
	defer b.(io.Closer).Close()
	w := b.(Writer)
	_, a, err := w.ReadObject(context.Background(), "c.json")
	if err != nil {
		t.Fatal(err)
	}
	na, err := w.WriteObject(context.Background(), "c.json", []byte("v2"), a.Generation)
	if err != nil {
		t.Fatal(err)
	}
	if !na.ModTime.After(future) || na.ModTime.After(future.Add(time.Second)) || na.Generation == a.Generation {
		t.Errorf("after a version from %v: new version %+v", future, na)
	}
}
