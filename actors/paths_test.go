package actors

import (
	"context"
	"fmt"
	"io/fs"
	"path/filepath"
	"strings"
	"testing"
	"testing/synctest"

	"github.com/groveml/grove/servables"
)

// pathRuntime fails every load with an error that names the model file it
// was given, twice, as ONNX Runtime's does ("Load model from ... failed").
type pathRuntime struct{}

func (pathRuntime) Name() string                 { return "paths" }
func (pathRuntime) Accepts(fs.FS, []string) bool { return true }
func (pathRuntime) Load(_ context.Context, dir string, files []string, _ servables.LoadOptions) (servables.Servable, error) {
	f := filepath.Join(dir, files[0])
	return nil, fmt.Errorf("%w: loading %s: Load model from %s failed: not a model", servables.ErrInvalidInput, f, f)
}

// fileBucket is a memory bucket that says its objects are files in
// /srv/models, as a file:// bucket does.
type fileBucket struct{ *memBucket }

func (fileBucket) String() string   { return "file:///srv/models" }
func (fileBucket) LocalDir() string { return "/srv/models" }

func TestErrorsShownToCallersNameModelFilesByTheirBucketPathsAndTheLogKeepsTheCachePaths(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		cache := t.TempDir()
		cfg := configJSON(entry("ads/pctr/1/", "", ""), entry("top.onnx", "", ""), entry("ads/pcvr.onnx", "", ""), entry("missing/", "", ""))
		w := newWorld(t, cfg, nil, func(w *world, o *Options) {
			o.Runtimes, o.CacheDir, o.Bucket = servables.Registry{pathRuntime{}}, cache, fileBucket{w.b}
		})
		defer w.stop()
		for _, name := range []string{"ads/pctr/1/model.onnx", "top.onnx", "ads/pcvr.onnx"} {
			w.b.set(name, []byte("not a model"))
		}
		w.settle()

		for path, want := range map[string]string{
			"ads/pctr/1/":   "loading model ads/pctr/1/: invalid input: loading ads/pctr/1/model.onnx: Load model from ads/pctr/1/model.onnx failed: not a model",
			"top.onnx":      "loading model top.onnx: invalid input: loading top.onnx: Load model from top.onnx failed: not a model",
			"ads/pcvr.onnx": "loading model ads/pcvr.onnx: invalid input: loading ads/pcvr.onnx: Load model from ads/pcvr.onnx failed: not a model",
			"missing/":      `loading model missing/: no objects found under model path "missing/" in the bucket`,
		} {
			if m := w.model(path); m.State != StateFailed || m.LastError != want {
				t.Errorf("%s: state %s, last_error\n %q\nwant\n %q", path, m.State, m.LastError, want)
			}
		}
		logs := w.log.String()
		if !strings.Contains(logs, "Load model from "+cache) || !strings.Contains(logs, "in file:///srv/models") {
			t.Errorf("the log lost the server's paths:\n%s", logs)
		}
	})
}
