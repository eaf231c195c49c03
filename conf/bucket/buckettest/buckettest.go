// Package buckettest checks that a bucket driver behaves as package bucket
// documents: listing, reading, conditional writes, Update between replicas
// and Fetch with its checksums. A driver's tests call Run with a function
// that makes a store of that driver.
package buckettest

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/groveml/grove/conf/bucket"
	"github.com/groveml/grove/internal/capped"
)

// Checksums from the B&A test suites (see the research notes, §2.4).
const (
	sumFile1    = "4f2d6937ca0d91126b175de2d90138a1c8825a3eb13c2d999317fd1a5f320653" // file1.txt = content1
	sumContent3 = "4f23a79b280289568bde060cd83efa0088ac765ae65350a43053bab82de9eb40" // content1..3
	sumModel1   = "59390c4fa97b2cbfe5bd300e254e6eddb7b4b45c2dbc0c1cfc6e93793a143d04" // model1 = bytes1
)

// Objects returns the content every check's store starts with, by object name.
func Objects() map[string]string {
	return map[string]string{
		"model_config.json":      `{"model_metadata": []}`,
		"model1":                 "bytes1",
		"model12/v2":             "v2",
		"model123":               "bytes123",
		"dir/file1.txt":          "content1",
		"three/a.txt":            "content1",
		"three/b.txt.d/e":        "content2", // '.' sorts before '/'
		"three/b/c.txt":          "content3",
		"nested/saved_model.pb":  "pb",
		"nested/variables/x.idx": "index",
		"big/a":                  strings.Repeat("a", 600),
		"big/b":                  strings.Repeat("b", 600),
	}
}

// NewStore makes a new store holding objects (by name, relative to the
// bucket's root or prefix) and returns a function that opens a bucket on
// it as a new replica would: with its own client or directory handle. The
// buckets it opens are closed when the test ends.
type NewStore func(t *testing.T, objects map[string]string) (open func(t *testing.T) bucket.Writer)

// Run runs every check, each as a subtest on a new store made by newStore.
func Run(t *testing.T, newStore NewStore) {
	for _, c := range []struct {
		name  string
		check func(t *testing.T, newStore NewStore)
	}{
		{"ListMatchesPlainPrefixAndSorts", listMatchesPlainPrefixAndSorts},
		{"ReadObjectReturnsContentAndAttrs", readObjectReturnsContentAndAttrs},
		{"ReadObjectReadsNoObjectOverItsLimit", readObjectReadsNoObjectOverItsLimit},
		{"MissingObjectsAreErrNotExist", missingObjectsAreErrNotExist},
		{"WriteObjectCreatesOnlyIfAbsent", writeObjectCreatesOnlyIfAbsent},
		{"WriteObjectReplacesOnlyTheVersionRead", writeObjectReplacesOnlyTheVersionRead},
		{"EverySameSizeWriteGetsANewVersion", everySameSizeWriteGetsANewVersion},
		{"UpdateCreatesAndSeesMissingObject", updateCreatesAndSeesMissingObject},
		{"UpdateReturnsChangeErrorWithoutWriting", updateReturnsChangeErrorWithoutWriting},
		{"UpdateReadsAndWritesNoContentOverItsLimit", updateReadsAndWritesNoContentOverItsLimit},
		{"UpdateTakesTurnsWithinAWriter", updateTakesTurnsWithinAWriter},
		{"UpdatesFromReplicasLoseNothing", updatesFromReplicasLoseNothing},
		{"FetchCopiesADirectoryModel", fetchCopiesADirectoryModel},
		{"FetchChecksumVectors", fetchChecksumVectors},
		{"FetchOfASingleFileModelIsAnExactMatch", fetchOfASingleFileModelIsAnExactMatch},
		{"FetchWithoutObjectsFails", fetchWithoutObjectsFails},
		{"FetchRejectsModelsOverTheLimitBeforeCopying", fetchRejectsModelsOverTheLimitBeforeCopying},
		{"FetchEnforcesTheLimitWhileCopying", fetchEnforcesTheLimitWhileCopying},
	} {
		t.Run(c.name, func(t *testing.T) { c.check(t, newStore) })
	}
}

// readLimit is the size limit of the checks' reads, far over their objects'.
const readLimit = 1 << 20

// open makes a store holding Objects and opens one bucket on it.
func open(t *testing.T, newStore NewStore) bucket.Writer {
	return newStore(t, Objects())(t)
}

func listMatchesPlainPrefixAndSorts(t *testing.T, newStore NewStore) {
	b := open(t, newStore)
	ctx := t.Context()
	for _, tc := range []struct {
		prefix string
		want   []bucket.Object
	}{
		{"model1", []bucket.Object{{Name: "model1", Size: 6}, {Name: "model12/v2", Size: 2}, {Name: "model123", Size: 8}}},
		{"three/b", []bucket.Object{{Name: "three/b.txt.d/e", Size: 8}, {Name: "three/b/c.txt", Size: 8}}},
		{"absent/", nil},
	} {
		got, err := b.List(ctx, tc.prefix)
		if err != nil {
			t.Fatal(err)
		}
		if len(got)+len(tc.want) > 0 && !reflect.DeepEqual(got, tc.want) {
			t.Errorf("List(%q) = %v, want %v", tc.prefix, got, tc.want)
		}
	}
	all, err := b.List(ctx, "")
	if err != nil {
		t.Fatal(err)
	}
	if len(all) != len(Objects()) {
		t.Errorf("List(\"\") has %d objects, want %d: %v", len(all), len(Objects()), all)
	}
}

func readObjectReturnsContentAndAttrs(t *testing.T, newStore NewStore) {
	b := open(t, newStore)
	data, attrs, err := b.ReadObject(t.Context(), "model_config.json", readLimit)
	if err != nil {
		t.Fatal(err)
	}
	if string(data) != Objects()["model_config.json"] {
		t.Errorf("content %q", data)
	}
	if attrs.Size != int64(len(data)) || attrs.Version == "" || attrs.ModTime.IsZero() {
		t.Errorf("attrs %+v", attrs)
	}
	_, again, err := b.ReadObject(t.Context(), "model_config.json", readLimit)
	if err != nil || again.Version != attrs.Version {
		t.Errorf("second read of an unchanged object: %+v, %v; want version %q", again, err, attrs.Version)
	}
}

func readObjectReadsNoObjectOverItsLimit(t *testing.T, newStore NewStore) {
	b := open(t, newStore)
	data, attrs, err := b.ReadObject(t.Context(), "big/a", 600) // 600 bytes
	if err != nil || string(data) != Objects()["big/a"] || attrs.Size != 600 {
		t.Fatalf("an object of exactly the limit: %d bytes, %+v, %v", len(data), attrs, err)
	}
	_, _, err = b.ReadObject(t.Context(), "big/a", 599)
	var tooLarge *capped.TooLargeError
	if !errors.As(err, &tooLarge) {
		t.Fatalf("an object one byte over the limit: got %v, want a *capped.TooLargeError", err)
	}
	if want := fmt.Sprintf("object big/a in %s is larger than its limit of 599 bytes", b); err.Error() != want {
		t.Errorf("error %q, want %q", err, want)
	}
}

func missingObjectsAreErrNotExist(t *testing.T, newStore NewStore) {
	b := open(t, newStore)
	for _, name := range []string{"absent.json", "dir/absent", "model1/x"} {
		if _, _, err := b.ReadObject(t.Context(), name, readLimit); !errors.Is(err, bucket.ErrNotExist) {
			t.Errorf("ReadObject(%s): got %v, want ErrNotExist", name, err)
		}
		if _, err := b.Open(t.Context(), name); !errors.Is(err, bucket.ErrNotExist) {
			t.Errorf("Open(%s): got %v, want ErrNotExist", name, err)
		}
	}
}

func writeObjectCreatesOnlyIfAbsent(t *testing.T, newStore NewStore) {
	w := open(t, newStore)
	ctx := t.Context()
	a, err := w.WriteObject(ctx, "metrics/ads/pctr.json", []byte("one"), "")
	if err != nil {
		t.Fatal(err)
	}
	if a.Version == "" || a.Size != 3 || a.ModTime.IsZero() {
		t.Errorf("attrs %+v", a)
	}
	data, ra, err := w.ReadObject(ctx, "metrics/ads/pctr.json", readLimit)
	if err != nil || string(data) != "one" || ra.Version != a.Version {
		t.Errorf("ReadObject = %q, %+v, %v; want \"one\" at version %q", data, ra, err, a.Version)
	}
	// A second create, and a create over a pre-existing object, conflict.
	for _, name := range []string{"metrics/ads/pctr.json", "model_config.json"} {
		before, _, _ := w.ReadObject(ctx, name, readLimit)
		if _, err := w.WriteObject(ctx, name, []byte("two"), ""); !errors.Is(err, bucket.ErrConflict) {
			t.Errorf("create of existing %s: got %v, want ErrConflict", name, err)
		}
		if after, _, _ := w.ReadObject(ctx, name, readLimit); string(after) != string(before) {
			t.Errorf("%s changed by a failed write: %q", name, after)
		}
	}
}

func writeObjectReplacesOnlyTheVersionRead(t *testing.T, newStore NewStore) {
	w := open(t, newStore)
	ctx := t.Context()
	_, a1, err := w.ReadObject(ctx, "model_config.json", readLimit)
	if err != nil {
		t.Fatal(err)
	}
	a2, err := w.WriteObject(ctx, "model_config.json", []byte(`{"v":2}`), a1.Version)
	if err != nil {
		t.Fatal(err)
	}
	if a2.Version == a1.Version {
		t.Fatalf("write kept version %q", a1.Version)
	}
	// The version read before the write is stale now.
	if _, err := w.WriteObject(ctx, "model_config.json", []byte(`{"v":3}`), a1.Version); !errors.Is(err, bucket.ErrConflict) {
		t.Errorf("write at a stale version: got %v, want ErrConflict", err)
	}
	data, a, err := w.ReadObject(ctx, "model_config.json", readLimit)
	if err != nil || string(data) != `{"v":2}` || a.Version != a2.Version {
		t.Errorf("ReadObject = %q, %+v, %v; want v2 at version %q", data, a, err, a2.Version)
	}
	if _, err := w.WriteObject(ctx, "model_config.json", []byte(`{"v":3}`), a2.Version); err != nil {
		t.Errorf("write at the current version: %v", err)
	}
	// An object that does not exist has no version to match.
	if _, err := w.WriteObject(ctx, "absent.json", []byte("x"), a2.Version); !errors.Is(err, bucket.ErrConflict) {
		t.Errorf("write of an absent object at version %q: got %v, want ErrConflict", a2.Version, err)
	}
	if _, _, err := w.ReadObject(ctx, "absent.json", readLimit); !errors.Is(err, bucket.ErrNotExist) {
		t.Errorf("absent.json after a failed write: %v", err)
	}
}

// everySameSizeWriteGetsANewVersion writes new same-size contents back to
// back, well within one clock tick of any file system or store: each gets
// a new version, and every earlier version is stale.
func everySameSizeWriteGetsANewVersion(t *testing.T, newStore NewStore) {
	w := open(t, newStore)
	ctx := t.Context()
	_, first, err := w.ReadObject(ctx, "model1", readLimit)
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]bool{first.Version: true}
	prev := first
	for i := range 20 {
		content := fmt.Appendf(nil, "v%05d", i) // the size of "bytes1"
		a, err := w.WriteObject(ctx, "model1", content, prev.Version)
		if err != nil {
			t.Fatalf("write %d: %v", i, err)
		}
		if seen[a.Version] {
			t.Fatalf("write %d reused version %q", i, a.Version)
		}
		seen[a.Version] = true
		data, ra, err := w.ReadObject(ctx, "model1", readLimit)
		if err != nil || string(data) != string(content) || ra.Version != a.Version || ra.Size != a.Size {
			t.Fatalf("write %d: ReadObject = %q, %+v, %v; want %q, %+v", i, data, ra, err, content, a)
		}
		if _, err := w.WriteObject(ctx, "model1", content, first.Version); !errors.Is(err, bucket.ErrConflict) {
			t.Fatalf("write %d: a write at the first version: got %v, want ErrConflict", i, err)
		}
		prev = a
	}
}

func updateCreatesAndSeesMissingObject(t *testing.T, newStore NewStore) {
	w := open(t, newStore)
	var sawExists []bool
	change := func(current []byte, exists bool) ([]byte, error) {
		sawExists = append(sawExists, exists)
		return append(append([]byte(nil), current...), 'x'), nil
	}
	for range 2 {
		if err := bucket.Update(t.Context(), w, "new.txt", readLimit, change); err != nil {
			t.Fatal(err)
		}
	}
	if data, _, _ := w.ReadObject(t.Context(), "new.txt", readLimit); string(data) != "xx" || len(sawExists) != 2 || sawExists[0] || !sawExists[1] {
		t.Errorf("content %q, exists seen %v", data, sawExists)
	}
}

func updateReadsAndWritesNoContentOverItsLimit(t *testing.T, newStore NewStore) {
	w := open(t, newStore)
	called := false
	err := bucket.Update(t.Context(), w, "big/a", 599, func(current []byte, _ bool) ([]byte, error) {
		called = true
		return current, nil
	})
	var tooLarge *capped.TooLargeError
	if !errors.As(err, &tooLarge) || called {
		t.Errorf("an object over the limit: got %v (change called: %v), want a *capped.TooLargeError", err, called)
	}
	// New content over the limit is not written; of exactly the limit, it is.
	for _, size := range []int{601, 600} {
		err = bucket.Update(t.Context(), w, "big/b", 600, func([]byte, bool) ([]byte, error) {
			return []byte(strings.Repeat("c", size)), nil
		})
		data, _, rerr := w.ReadObject(t.Context(), "big/b", readLimit)
		switch {
		case rerr != nil:
			t.Fatal(rerr)
		case size > 600 && (!errors.As(err, &tooLarge) || !strings.Contains(err.Error(), "the new content of big/b is larger than its limit of 600 bytes")):
			t.Errorf("new content over the limit: got %v", err)
		case size > 600 && string(data) != Objects()["big/b"]:
			t.Errorf("new content over the limit was written: %d bytes", len(data))
		case size == 600 && (err != nil || string(data) != strings.Repeat("c", 600)):
			t.Errorf("new content of exactly the limit: %v, %d bytes written", err, len(data))
		}
	}
}

func updateReturnsChangeErrorWithoutWriting(t *testing.T, newStore NewStore) {
	w := open(t, newStore)
	boom := errors.New("invalid contract")
	err := bucket.Update(t.Context(), w, "model_config.json", readLimit, func([]byte, bool) ([]byte, error) { return []byte("bad"), boom })
	if !errors.Is(err, boom) {
		t.Errorf("got %v, want the change's error", err)
	}
	if data, _, _ := w.ReadObject(t.Context(), "model_config.json", readLimit); string(data) != Objects()["model_config.json"] {
		t.Errorf("content changed to %q", data)
	}
}

// CheckLines checks that data holds exactly once each line
// "<who>-<goroutine>-<update>" for every who in whos, goroutine below
// goroutines and update below updates, and no other line.
func CheckLines(t *testing.T, data []byte, whos []string, goroutines, updates int) {
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

// RunAppenders has goroutines goroutines append updates unique lines each
// to the object name through w with bucket.Update, as CheckLines expects
// them for who. An update that gives up on a contended object
// (bucket.ErrConflict after UpdateTries attempts, which a loaded machine
// can cause with a few replicas) is made again, as a replica would, up to
// 5 times. It returns how many attempts were retries after a conflict:
// Update calls its change once per attempt.
func RunAppenders(ctx context.Context, w bucket.Writer, name, who string, goroutines, updates int) (retries int64, err error) {
	var calls atomic.Int64
	var wg sync.WaitGroup
	errs := make([]error, goroutines)
	for g := range goroutines {
		wg.Go(func() {
			for u := range updates {
				line := fmt.Sprintf("%s-%d-%d\n", who, g, u)
				var err error
				for range 6 {
					err = bucket.Update(ctx, w, name, readLimit, func(current []byte, _ bool) ([]byte, error) {
						calls.Add(1)
						return append(append([]byte(nil), current...), line...), nil
					})
					if !errors.Is(err, bucket.ErrConflict) {
						break
					}
				}
				if err != nil {
					errs[g] = err
					return
				}
			}
		})
	}
	wg.Wait()
	return calls.Load() - int64(goroutines*updates), errors.Join(errs...)
}

// updateTakesTurnsWithinAWriter checks that goroutines updating through
// one Writer do not make each other retry.
func updateTakesTurnsWithinAWriter(t *testing.T, newStore NewStore) {
	const goroutines, updates = 6, 10
	w := open(t, newStore)
	retries, err := RunAppenders(t.Context(), w, "log/lines.txt", "p", goroutines, updates)
	if err != nil {
		t.Fatal(err)
	}
	data, _, err := w.ReadObject(t.Context(), "log/lines.txt", readLimit)
	if err != nil {
		t.Fatal(err)
	}
	CheckLines(t, data, []string{"p"}, goroutines, updates)
	if retries != 0 {
		t.Errorf("%d retries within one Writer; its Updates should take turns (embed bucket.Turns)", retries)
	}
}

// updatesFromReplicasLoseNothing has several replicas, each with several
// goroutines, append lines to one object at once.
func updatesFromReplicasLoseNothing(t *testing.T, newStore NewStore) {
	const replicas, goroutines, updates = 3, 3, 15
	openReplica := newStore(t, Objects())
	var whos []string
	var writers []bucket.Writer
	for i := range replicas {
		whos = append(whos, fmt.Sprintf("replica%d", i))
		writers = append(writers, openReplica(t))
	}
	var wg sync.WaitGroup
	errs := make([]error, replicas)
	var retries atomic.Int64
	for i, w := range writers {
		wg.Go(func() {
			n, err := RunAppenders(t.Context(), w, "log/lines.txt", whos[i], goroutines, updates)
			retries.Add(n)
			errs[i] = err
		})
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		t.Fatal(err)
	}
	data, _, err := writers[0].ReadObject(t.Context(), "log/lines.txt", readLimit)
	if err != nil {
		t.Fatal(err)
	}
	CheckLines(t, data, whos, goroutines, updates)
	t.Logf("%d updates, %d retried after a conflict", replicas*goroutines*updates, retries.Load())
}

// readLocal returns the content of every file of m, by name.
func readLocal(t *testing.T, m *bucket.LocalModel) map[string]string {
	t.Helper()
	got := map[string]string{}
	for _, f := range m.Files {
		data, err := os.ReadFile(filepath.Join(m.Dir, filepath.FromSlash(f)))
		if err != nil {
			t.Fatal(err)
		}
		got[f] = string(data)
	}
	return got
}

func fetchCopiesADirectoryModel(t *testing.T, newStore NewStore) {
	b := open(t, newStore)
	cache := t.TempDir()
	m, err := bucket.Fetch(t.Context(), b, "nested/", cache, 1<<20)
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{"saved_model.pb", "variables/x.idx"}; !reflect.DeepEqual(m.Files, want) {
		t.Errorf("Files = %q, want %q", m.Files, want)
	}
	if got := readLocal(t, m); got["saved_model.pb"] != "pb" || got["variables/x.idx"] != "index" {
		t.Errorf("content %q", got)
	}
	if m.Size != 7 || filepath.Dir(m.Dir) != cache {
		t.Errorf("Size = %d, Dir = %s", m.Size, m.Dir)
	}
	if sum, err := bucket.ChecksumPath(m.Dir); err != nil || sum != m.Checksum {
		t.Errorf("checksum %s, but the copy's is %s (%v)", m.Checksum, sum, err)
	}
	entries, _ := os.ReadDir(m.Dir)
	for _, e := range entries {
		if strings.HasPrefix(e.Name(), ".grove-tmp") {
			t.Errorf("temporary file %s left behind", e.Name())
		}
	}
	if err := m.Remove(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(m.Dir); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("Remove left %s: %v", m.Dir, err)
	}
}

func fetchChecksumVectors(t *testing.T, newStore NewStore) {
	b := open(t, newStore)
	for _, tc := range []struct{ path, want string }{
		{"dir/", sumFile1},
		{"dir/file1.txt", sumFile1},
		{"three/", sumContent3},
		{"model1", sumModel1},
	} {
		m, err := bucket.Fetch(t.Context(), b, tc.path, t.TempDir(), 0)
		if err != nil {
			t.Errorf("%s: %v", tc.path, err)
			continue
		}
		if m.Checksum != tc.want {
			t.Errorf("%s: checksum %s, want %s", tc.path, m.Checksum, tc.want)
		}
	}
}

func fetchOfASingleFileModelIsAnExactMatch(t *testing.T, newStore NewStore) {
	b := open(t, newStore)
	m, err := bucket.Fetch(t.Context(), b, "model1", t.TempDir(), 0)
	if err != nil {
		t.Fatal(err)
	}
	if got := readLocal(t, m); !reflect.DeepEqual(got, map[string]string{"model1": "bytes1"}) {
		t.Errorf("model1 fetched %q; model12/v2 and model123 must not match", got)
	}
	m, err = bucket.Fetch(t.Context(), b, "three/b/c.txt", t.TempDir(), 0)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(m.Files, []string{"c.txt"}) {
		t.Errorf("Files = %q, want the base name", m.Files)
	}
}

func fetchWithoutObjectsFails(t *testing.T, newStore NewStore) {
	b := open(t, newStore)
	cache := t.TempDir()
	for _, p := range []string{"absent/", "absent", "model", "dir"} {
		_, err := bucket.Fetch(t.Context(), b, p, cache, 0)
		if err == nil || !strings.Contains(err.Error(), `no objects found under model path "`+p+`"`) {
			t.Errorf("%s: got %v", p, err)
		}
	}
	_, err := bucket.Fetch(t.Context(), b, "dir", cache, 0)
	if err == nil || !strings.Contains(err.Error(), `write "dir/"`) {
		t.Errorf("dir: got %v, want a hint about the trailing slash", err)
	}
	if entries, _ := os.ReadDir(cache); len(entries) != 0 {
		t.Errorf("failed fetches left %d entries in the cache", len(entries))
	}
}

func fetchRejectsModelsOverTheLimitBeforeCopying(t *testing.T, newStore NewStore) {
	b := open(t, newStore)
	cache := t.TempDir()
	_, err := bucket.Fetch(t.Context(), b, "big/", cache, 1000)
	if err == nil || !strings.Contains(err.Error(), "is 1200 bytes, over the limit of 1000 bytes") {
		t.Errorf("got %v", err)
	}
	if entries, _ := os.ReadDir(cache); len(entries) != 0 {
		t.Errorf("the rejected model was copied: %v", entries)
	}
	if _, err := bucket.Fetch(t.Context(), b, "big/", cache, 1200); err != nil {
		t.Errorf("a model exactly at the limit: %v", err)
	}
}

// shrinkingBucket under-reports object sizes, as if objects grew after listing.
type shrinkingBucket struct{ bucket.Bucket }

func (b shrinkingBucket) List(ctx context.Context, prefix string) ([]bucket.Object, error) {
	objs, err := b.Bucket.List(ctx, prefix)
	for i := range objs {
		objs[i].Size = 1
	}
	return objs, err
}

func fetchEnforcesTheLimitWhileCopying(t *testing.T, newStore NewStore) {
	b := open(t, newStore)
	cache := t.TempDir()
	_, err := bucket.Fetch(t.Context(), shrinkingBucket{b}, "big/", cache, 1000)
	if err == nil || !strings.Contains(err.Error(), "grew over the limit of 1000 bytes") {
		t.Errorf("got %v", err)
	}
	if entries, _ := os.ReadDir(cache); len(entries) != 0 {
		t.Errorf("the partial copy was left: %v", entries)
	}
}

// CheckURLError fails the test unless err is the error of a driver's URL
// parser for the invalid bucket URL raw, naming it and saying want.
func CheckURLError(t *testing.T, raw string, err error, want string) {
	t.Helper()
	if err == nil || !strings.HasPrefix(err.Error(), fmt.Sprintf("invalid bucket URL %q", raw)) || !strings.Contains(err.Error(), want) {
		t.Errorf("%q: got %v; want an invalid bucket URL error saying %q", raw, err, want)
	}
}

// CheckNamedURL is the check of a fuzz test of a driver's parser of
// scheme://name[/prefix] URLs (see bucket.ParseNamedURL) on raw: it does
// not panic, its errors say that the URL is invalid, its prefix is empty
// or a relative directory ending in "/", and what it accepts is the same
// bucket once written back as a URL.
func CheckNamedURL(t *testing.T, scheme, raw string, parse func(string) (name, prefix string, err error)) {
	name, prefix, err := parse(raw)
	if err != nil {
		if !strings.HasPrefix(err.Error(), "invalid bucket URL ") {
			t.Fatalf("%q: error %q does not say it is an invalid bucket URL", raw, err)
		}
		return
	}
	if prefix != "" && !strings.HasSuffix(prefix, "/") || strings.HasPrefix(prefix, "/") {
		t.Fatalf("%q: accepted prefix %q", raw, prefix)
	}
	if strings.ContainsAny(prefix, "?#%") {
		return // would need escaping to be written back
	}
	again := scheme + "://" + name + "/" + prefix
	if n2, p2, err := parse(again); err != nil || n2 != name || p2 != prefix {
		t.Fatalf("%q: accepted as %q, which parses to %q, %q, %v", raw, again, n2, p2, err)
	}
}

// CheckOwnWriteAfterALostAnswer checks a Writer whose store holds
// "c.json" = "v1" and whose transport applies the first write but loses
// its answer (dropped reports that it did), so that the client retries the
// conditional write: WriteObject must see that the version the retry
// conflicts with is its own, and succeed, while a write at the version it
// replaced still conflicts.
func CheckOwnWriteAfterALostAnswer(t *testing.T, w bucket.Writer, dropped func() bool) {
	t.Helper()
	ctx := t.Context()
	_, a, err := w.ReadObject(ctx, "c.json", readLimit)
	if err != nil {
		t.Fatal(err)
	}
	na, err := w.WriteObject(ctx, "c.json", []byte("v2"), a.Version)
	if err != nil {
		t.Fatalf("write whose first answer was lost: %v", err)
	}
	if !dropped() {
		t.Fatal("the transport dropped no answer")
	}
	data, ra, err := w.ReadObject(ctx, "c.json", readLimit)
	if err != nil || string(data) != "v2" || ra.Version != na.Version {
		t.Errorf("ReadObject = %q, %+v, %v; want v2 at version %q", data, ra, err, na.Version)
	}
	if _, err := w.WriteObject(ctx, "c.json", []byte("v3"), a.Version); !errors.Is(err, bucket.ErrConflict) {
		t.Errorf("stale write: got %v, want ErrConflict", err)
	}
}

// CheckFetchSkipsFolderPlaceholders checks, on a store whose object names
// may end in "/", that Fetch leaves out the empty "folder" objects that
// consoles create.
func CheckFetchSkipsFolderPlaceholders(t *testing.T, newStore NewStore) {
	t.Helper()
	b := newStore(t, map[string]string{"m/": "", "m/variables/": "", "m/saved_model.pb": "pb", "m/variables/v": "v"})(t)
	m, err := bucket.Fetch(t.Context(), b, "m/", t.TempDir(), 0)
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{"saved_model.pb", "variables/v"}; !reflect.DeepEqual(m.Files, want) {
		t.Errorf("Files = %q, want %q", m.Files, want)
	}
}
