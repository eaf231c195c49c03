package file

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/groveml/grove/conf/bucket"
	"github.com/groveml/grove/conf/bucket/buckettest"
)

func TestWriteObjectLeavesNoTemporaryFiles(t *testing.T) {
	b := mustOpen(t, t.TempDir())
	ctx := t.Context()
	if _, err := b.WriteObject(ctx, "a/b/c.json", []byte("x"), ""); err != nil {
		t.Fatal(err)
	}
	if _, err := b.WriteObject(ctx, "a/b/c.json", []byte("y"), ""); !errors.Is(err, bucket.ErrConflict) {
		t.Fatalf("got %v, want ErrConflict", err)
	}
	objs, err := b.List(ctx, "a/")
	if err != nil {
		t.Fatal(err)
	}
	if len(objs) != 2 || objs[0].Name != "a/b/.c.json.lock" || objs[1].Name != "a/b/c.json" {
		t.Errorf("List(a/) = %v; want the object and its lock file", objs)
	}
}

func TestWriteObjectRejectsBadTargets(t *testing.T) {
	root := t.TempDir()
	mustWrite(t, filepath.Join(root, "real.json"), "{}")
	mustSymlink(t, "real.json", filepath.Join(root, "link.json"))
	mustWrite(t, filepath.Join(root, "dir", "f"), "x")
	b := mustOpen(t, root)
	ctx := t.Context()
	_, a, err := b.ReadObject(ctx, "link.json", 1<<20)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := b.WriteObject(ctx, "link.json", []byte("x"), a.Version); err == nil || !strings.Contains(err.Error(), "symlink") {
		t.Errorf("write through a symlink: got %v", err)
	}
	for _, name := range []string{"dir", "dir/", "../x", "a//b", "", "."} {
		if _, err := b.WriteObject(ctx, name, []byte("x"), ""); err == nil || errors.Is(err, bucket.ErrConflict) {
			t.Errorf("WriteObject(%q): got %v, want an error", name, err)
		}
	}
	if data, _ := os.ReadFile(filepath.Join(root, "real.json")); string(data) != "{}" {
		t.Errorf("symlink target changed: %q", data)
	}
}

func TestWriteObjectHonoursCancellationWhileLocked(t *testing.T) {
	root := t.TempDir()
	mustWrite(t, filepath.Join(root, "model1"), "bytes1")
	b := mustOpen(t, root)
	unlock, err := lockFile(t.Context(), b.root, ".model1.lock")
	if err != nil {
		t.Fatal(err)
	}
	defer unlock()
	ctx, cancel := context.WithTimeout(t.Context(), 50*time.Millisecond)
	defer cancel()
	_, a, _ := b.ReadObject(ctx, "model1", 1<<20)
	if _, err := b.WriteObject(ctx, "model1", []byte("x"), a.Version); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("write while another holds the lock: got %v, want the deadline", err)
	}
}

// helperEnv is the environment variable that makes TestHelperUpdateProcess
// run: "<bucket dir>|<object>|<who>|<goroutines>|<updates>|<sync dir>".
const helperEnv = "GROVE_BUCKET_TEST_UPDATER"

// TestHelperUpdateProcess is not a test: TestUpdatesFromProcessesLoseNothing
// runs the test binary with it, as another process appending to a file bucket.
func TestHelperUpdateProcess(t *testing.T) {
	spec := os.Getenv(helperEnv)
	if spec == "" {
		t.Skip("helper process for TestUpdatesFromProcessesLoseNothing")
	}
	f := strings.Split(spec, "|")
	dir, name, who, syncDir := f[0], f[1], f[2], f[5]
	goroutines, _ := strconv.Atoi(f[3])
	updates, _ := strconv.Atoi(f[4])
	b := mustOpen(t, dir)
	// Say ready, then wait for the signal to start, so that every process runs at once.
	mustWrite(t, filepath.Join(syncDir, "ready-"+who), "")
	for {
		if _, err := os.Stat(filepath.Join(syncDir, "go")); err == nil {
			break
		}
		time.Sleep(time.Millisecond)
	}
	retries, err := buckettest.RunAppenders(context.Background(), b, name, who, goroutines, updates)
	if err != nil {
		t.Fatal(err)
	}
	fmt.Printf("helper %s: %d retries after a conflict\n", who, retries)
}

// TestUpdatesFromProcessesLoseNothing has two other processes and this one
// append to one file object at once.
func TestUpdatesFromProcessesLoseNothing(t *testing.T) {
	if os.Getenv(helperEnv) != "" {
		t.Skip("in a helper process")
	}
	const goroutines, updates = 3, 15
	dir, syncDir := t.TempDir(), t.TempDir()
	b := mustOpen(t, dir)

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
	retries, err := buckettest.RunAppenders(context.Background(), b, "config.json", "parent", goroutines, updates)
	if err != nil {
		t.Error(err)
	}
	wg.Wait()
	data, _, err := b.ReadObject(context.Background(), "config.json", 1<<20)
	if err != nil {
		t.Fatal(err)
	}
	buckettest.CheckLines(t, data, append(whos, "parent"), goroutines, updates)
	t.Logf("parent: %d retries after a conflict", retries)
}
