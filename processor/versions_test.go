package processor

import (
	"context"
	"fmt"
	"log/slog"
	"math"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"

	"github.com/groveml/grove/actors"
	"github.com/groveml/grove/api/deeprec/deeprecpb"
	"github.com/groveml/grove/conf/bucket"
	"github.com/groveml/grove/conf/bucket/file"
	"github.com/groveml/grove/conf/modelconfig"
)

func TestLayoutOf(t *testing.T) {
	for _, tc := range []struct {
		name string
		objs []string
		want Layout
	}{
		{"nothing", nil, LayoutEmpty},
		{"placeholders only", []string{"m/", "m/1/"}, LayoutEmpty},
		{"the model itself", []string{"m/model.onnx"}, LayoutPlain},
		{"the model and its checksum", []string{"m/CHECKSUM", "m/model.pt"}, LayoutPlain},
		{"a version", []string{"m/1/model.onnx"}, LayoutVersions},
		{"a version beside a model", []string{"m/model.onnx", "m/2/model.onnx"}, LayoutVersions},
		{"a version with only its checksum", []string{"m/3/CHECKSUM"}, LayoutEmpty},
		{"a directory that is not a version", []string{"m/tmp/model.onnx"}, LayoutPlain},
		{"another directory", []string{"other/1/model.onnx"}, LayoutEmpty},
	} {
		var objs []bucket.Object
		for _, n := range tc.objs {
			objs = append(objs, bucket.Object{Name: n})
		}
		if got := LayoutOf("m/", objs); got != tc.want {
			t.Errorf("%s: LayoutOf = %d, want %d", tc.name, got, tc.want)
		}
	}
}

// dropVersion writes version v of dir from the test data's version from
// (its model file) elsewhere and renames it in, as uploads should.
func dropVersion(t *testing.T, dir, v, kind, from, file string) {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(data, kind, from, file))
	if err != nil {
		t.Fatal(err)
	}
	writeVersion(t, dir, v, file, b)
}

func writeVersion(t *testing.T, dir, v, file string, content []byte) {
	t.Helper()
	tmp := filepath.Join(t.TempDir(), v)
	if err := os.MkdirAll(tmp, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(tmp, file), content, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, filepath.Join(dir, v)); err != nil {
		t.Fatal(err)
	}
}

// servingVersion is the version ServingModelInfo reports.
func servingVersion(t *testing.T, p *Processor) string {
	t.Helper()
	out, status := p.ServingModelInfo()
	if status != StatusOK {
		t.Fatalf("ServingModelInfo: %d %s", status, out)
	}
	var info deeprecpb.ServingModelInfo
	if err := proto.Unmarshal(out, &info); err != nil {
		t.Fatal(err)
	}
	return info.GetVersion()
}

// await polls cond (the supervisor polls the directory every second)
// for up to a minute.
func await(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within a minute", what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// A directory holding the model itself is served as a directory of
// versions once a version is dropped into it, as DeepRec finds versions,
// with no failed call while it turns.
func TestProcessorPlainThenVersions(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "onnx")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(filepath.Join(data, "onnx", "1", "model.onnx"))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "model.onnx"), b, 0o644); err != nil {
		t.Fatal(err)
	}
	p := start(t, fmt.Sprintf(`{"checkpoint_dir": %q, "grove_poll_interval": "1s"}`, dir))
	if v := servingVersion(t, p); v != "" {
		t.Fatalf("version %q of a directory without versions", v)
	}
	predict(t, p, "req_b1.bin", expected(t, "expected_onnx_v1_b1.txt"))

	dropVersion(t, dir, "2", "onnx", "2", "model.onnx")
	v1, v2 := expected(t, "expected_onnx_v1_b1.txt"), expected(t, "expected_onnx_v2_b1.txt")
	await(t, "version 2 serving", func() bool {
		answeredBy(t, p, "req_b1.bin", v1, v2)
		return servingVersion(t, p) == "2"
	})
	predict(t, p, "req_b64.bin", expected(t, "expected_onnx_v2_b64.txt"))
}

// answeredBy sends the request file req and returns the index of the
// first of wants the answer matches (the same outputs, each value within
// 1e-5); matching none fails the test.
func answeredBy(t *testing.T, p *Processor, req string, wants ...map[string][]float32) int {
	t.Helper()
	in, err := os.ReadFile(filepath.Join(data, req))
	if err != nil {
		t.Fatal(err)
	}
	out, status := p.Process(context.Background(), 1, in)
	if status != StatusOK {
		t.Fatalf("%s: status %d: %s", req, status, out)
	}
	var res deeprecpb.PredictResponse
	if err := proto.Unmarshal(out, &res); err != nil {
		t.Fatal(err)
	}
next:
	for i, want := range wants {
		if len(res.GetOutputs()) != len(want) {
			continue
		}
		for name, vals := range want {
			got := res.GetOutputs()[name].GetFloatVal()
			if len(got) != len(vals) {
				continue next
			}
			for j := range vals {
				if math.Abs(float64(got[j]-vals[j])) > 1e-5 {
					continue next
				}
			}
		}
		return i
	}
	t.Fatalf("%s: answer %v is none of the expected ones", req, res.GetOutputs())
	return -1
}

// An empty directory waits, within init_timeout_minutes, for its first
// version, as DeepRec waits for a checkpoint.
func TestProcessorEmptyThenVersion(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "onnx")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	type result struct {
		p   *Processor
		err error
	}
	done := make(chan result, 1)
	listed := make(chan struct{})
	var once sync.Once
	log := slog.New(onListed{Handler: slog.Default().Handler(), layout: LayoutEmpty, f: func() { once.Do(func() { close(listed) }) }})
	go func() {
		p, err := New(context.Background(), "", []byte(fmt.Sprintf(`{"checkpoint_dir": %q, "grove_poll_interval": "1s"}`, dir)),
			Options{CacheDir: t.TempDir(), Logger: log})
		done <- result{p, err}
	}()
	select {
	case <-listed: // the directory was seen empty
	case r := <-done:
		t.Fatalf("New returned before the directory was listed: %v", r.err)
	}
	dropVersion(t, dir, "1", "onnx", "1", "model.onnx")
	r := <-done
	if r.err != nil {
		t.Fatalf("New with a version dropped in after it started: %v", r.err)
	}
	t.Cleanup(func() { r.p.Close(context.Background()) })
	if v := servingVersion(t, r.p); v != "1" {
		t.Fatalf("version %q serving, want 1", v)
	}
	predict(t, r.p, "req_b1.bin", expected(t, "expected_onnx_v1_b1.txt"))
}

// A new version that fails to load leaves the old one serving; the next
// good version replaces it.
func TestProcessorFailingVersionKeepsServing(t *testing.T) {
	dir := modelDir(t, "onnx", "model.onnx")
	p := start(t, fmt.Sprintf(`{"checkpoint_dir": %q, "grove_poll_interval": "1s", "session_num": 2}`, dir))
	writeVersion(t, dir, "2", "model.onnx", []byte("not an ONNX model"))
	await(t, "version 2 failing", func() bool {
		predict(t, p, "req_b1.bin", expected(t, "expected_onnx_v1_b1.txt"))
		for _, m := range p.sys.Status().Models {
			if m.VersionOf != "" && m.Version == 2 && m.State == actors.StateFailed {
				return true
			}
		}
		return false
	})
	if v := servingVersion(t, p); v != "1" {
		t.Fatalf("version %q serving after version 2 failed, want 1", v)
	}
	predict(t, p, "req_b64.bin", expected(t, "expected_onnx_v1_b64.txt"))

	dropVersion(t, dir, "3", "onnx", "2", "model.onnx")
	await(t, "version 3 serving", func() bool { return servingVersion(t, p) == "3" })
	predict(t, p, "req_b64.bin", expected(t, "expected_onnx_v2_b64.txt"))
}

// onListed calls f when the processor logs a listing of the model
// directory that found layout.
type onListed struct {
	slog.Handler
	layout Layout
	f      func()
}

func (h onListed) Enabled(context.Context, slog.Level) bool { return true }

func (h onListed) Handle(ctx context.Context, r slog.Record) error {
	if r.Message == "model directory listed" {
		r.Attrs(func(a slog.Attr) bool {
			if a.Key == "layout" && a.Value.String() == h.layout.String() {
				h.f()
			}
			return true
		})
	}
	if !h.Handler.Enabled(ctx, r.Level) {
		return nil
	}
	return h.Handler.Handle(ctx, r)
}

func (h onListed) WithAttrs(as []slog.Attr) slog.Handler {
	h.Handler = h.Handler.WithAttrs(as)
	return h
}

func (h onListed) WithGroup(name string) slog.Handler {
	h.Handler = h.Handler.WithGroup(name)
	return h
}

// The model config the supervisor reads follows the directory: the model
// itself while it holds only that, a directory of versions from the
// first version (or while empty) on, and so it stays.
func TestDirBucketConfig(t *testing.T) {
	root := t.TempDir()
	dir := filepath.Join(root, "m")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "model.onnx"), []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	cfg, err := ParseConfig("", []byte(fmt.Sprintf(`{"checkpoint_dir": %q}`, dir)))
	if err != nil {
		t.Fatal(err)
	}
	b, err := bucket.Drivers{file.Driver()}.Open(context.Background(), cfg.BucketURL)
	if err != nil {
		t.Fatal(err)
	}
	d := &dirBucket{Bucket: b, cfg: cfg, log: slog.Default()}
	versioned := func() bool {
		t.Helper()
		data, attrs, err := d.ReadObject(context.Background(), configName, 1<<20)
		if err != nil {
			t.Fatal(err)
		}
		mc, err := modelconfig.Parse(data)
		if err != nil || len(mc.Models) != 1 || attrs.Version == "" {
			t.Fatalf("config %s (%+v): %v", data, attrs, err)
		}
		return mc.Models[0].IsVersioned()
	}
	if versioned() {
		t.Fatal("the model itself served as a directory of versions")
	}
	dropVersion(t, dir, "1", "onnx", "1", "model.onnx")
	if !versioned() {
		t.Fatal("a directory with a version not served as a directory of versions")
	}
	if err := os.RemoveAll(filepath.Join(dir, "1")); err != nil {
		t.Fatal(err)
	}
	if !versioned() {
		t.Fatal("a directory of versions turned back into the model itself")
	}
}
