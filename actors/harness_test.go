package actors

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/groveml/grove/conf/bucket"
	"github.com/groveml/grove/servables"
	"github.com/groveml/grove/servables/faulty"
)

// The in-process harness: a whole System (supervisor, model actors,
// router) over an in-memory bucket and the fault-injection runtime, run in
// a synctest bubble so that poll intervals, grace periods and delays pass
// on a fake clock, and Stop is checked to leave no goroutine behind (the
// bubble fails the test if one is left).

// memBucket is a writable in-memory bucket with conditional writes.
type memBucket struct {
	mu      sync.Mutex
	objects map[string][]byte
	gens    map[string]int64
	gen     int64
	// failReads, when set, makes ReadObject of that name fail.
	failReads map[string]error
	// opens counts the Opens of each object (a fetch's downloads).
	opens map[string]int
}

func newMemBucket() *memBucket {
	return &memBucket{objects: map[string][]byte{}, gens: map[string]int64{}, failReads: map[string]error{}, opens: map[string]int{}}
}

func (b *memBucket) String() string { return "mem://test" }

func (b *memBucket) set(name string, data []byte) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.gen++
	b.objects[name], b.gens[name] = bytes.Clone(data), b.gen
}

// remove deletes object name.
func (b *memBucket) remove(name string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	delete(b.objects, name)
	delete(b.gens, name)
}

func (b *memBucket) get(name string) []byte {
	b.mu.Lock()
	defer b.mu.Unlock()
	return bytes.Clone(b.objects[name])
}

func (b *memBucket) ReadObject(_ context.Context, name string, limit int64) ([]byte, bucket.Attrs, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	data, err := b.read(name)
	if err != nil {
		return nil, bucket.Attrs{}, err
	}
	if data, err = bucket.ReadAll(bytes.NewReader(data), b, name, limit); err != nil {
		return nil, bucket.Attrs{}, err
	}
	return data, bucket.Attrs{Version: strconv.FormatInt(b.gens[name], 10), Size: int64(len(data))}, nil
}

// read returns object name, or the error failReads sets for it; b.mu is held.
func (b *memBucket) read(name string) ([]byte, error) {
	if err := b.failReads[name]; err != nil {
		return nil, err
	}
	data, ok := b.objects[name]
	if !ok {
		return nil, fmt.Errorf("%w: %s", bucket.ErrNotExist, name)
	}
	return data, nil
}

func (b *memBucket) List(_ context.Context, prefix string) ([]bucket.Object, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	var out []bucket.Object
	for name, data := range b.objects {
		if strings.HasPrefix(name, prefix) {
			out = append(out, bucket.Object{Name: name, Size: int64(len(data))})
		}
	}
	slices.SortFunc(out, func(x, y bucket.Object) int { return strings.Compare(x.Name, y.Name) })
	return out, nil
}

func (b *memBucket) Open(_ context.Context, name string) (io.ReadCloser, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	data, err := b.read(name)
	if err != nil {
		return nil, err
	}
	b.opens[name]++
	return io.NopCloser(bytes.NewReader(data)), nil
}

// opened returns how many times object name was opened.
func (b *memBucket) opened(name string) int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.opens[name]
}

func (b *memBucket) WriteObject(_ context.Context, name string, data []byte, ifVersion string) (bucket.Attrs, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	cur := ""
	if _, ok := b.objects[name]; ok {
		cur = strconv.FormatInt(b.gens[name], 10)
	}
	if cur != ifVersion {
		return bucket.Attrs{}, fmt.Errorf("%w: %s is at version %q, not %q", bucket.ErrConflict, name, cur, ifVersion)
	}
	b.gen++
	b.objects[name], b.gens[name] = bytes.Clone(data), b.gen
	return bucket.Attrs{Version: strconv.FormatInt(b.gen, 10), Size: int64(len(data))}, nil
}

// faultySpec is the content of a faulty model file (see servables/faulty).
type faultySpec struct {
	PanicOn   *float64 `json:"panic_on,omitempty"`
	ErrorOn   *float64 `json:"error_on,omitempty"`
	DelayMs   int      `json:"delay_ms,omitempty"`
	FailLoad  bool     `json:"fail_load,omitempty"`
	PanicLoad bool     `json:"panic_load,omitempty"`
	ByPos     bool     `json:"by_position,omitempty"`
	Add       float64  `json:"add,omitempty"`
}

// version returns an echoing spec whose bytes (and so checksum) differ
// for each n: two versions of the same model.
func version(n float64) faultySpec { return faultySpec{ErrorOn: f64(-1000 - n)} }

func f64(v float64) *float64 { return &v }

// countingRuntime wraps the faulty runtime to count servables loaded and
// closed, and can hold loads, or forward calls, until a gate opens.
type countingRuntime struct {
	faulty.Runtime
	loaded, closed atomic.Int64
	// calls counts forward calls; ran records the first input value of each.
	calls atomic.Int64
	mu    sync.Mutex
	ran   []float64
	// gate, if not nil, blocks Load until it is closed.
	gate chan struct{}
	// onPredict, if not nil, runs at the start of each forward call with
	// its inputs (a test's stall); set it before the world starts.
	onPredict func(in []servables.Tensor)
	// hold, if not nil, blocks every forward call, once counted in calls,
	// until it is closed.
	hold chan struct{}
	// opts are the load options of each Load, by the model's directory
	// name (its path in the cache).
	opts map[string]servables.LoadOptions
}

func (r *countingRuntime) Load(ctx context.Context, dir string, files []string, o servables.LoadOptions) (servables.Servable, error) {
	if r.gate != nil {
		<-r.gate
	}
	r.mu.Lock()
	if r.opts == nil {
		r.opts = map[string]servables.LoadOptions{}
	}
	r.opts[dir] = o
	r.mu.Unlock()
	sv, err := r.Runtime.Load(ctx, dir, files, o)
	if err != nil {
		return nil, err
	}
	r.loaded.Add(1)
	return &countedServable{Servable: sv, rt: r}, nil
}

// order returns the first input value of each forward call so far.
func (r *countingRuntime) order() []float64 {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.ran)
}

type countedServable struct {
	servables.Servable
	rt   *countingRuntime
	once sync.Once
}

func (s *countedServable) Predict(ctx context.Context, in []servables.Tensor) ([]servables.Tensor, error) {
	s.rt.calls.Add(1)
	if s.rt.onPredict != nil {
		s.rt.onPredict(in)
	}
	if len(in) > 0 && in[0].Len() > 0 {
		s.rt.mu.Lock()
		s.rt.ran = append(s.rt.ran, in[0].Float64At(0))
		s.rt.mu.Unlock()
	}
	if s.rt.hold != nil {
		<-s.rt.hold
	}
	return s.Servable.Predict(ctx, in)
}

func (s *countedServable) Close() error {
	s.once.Do(func() { s.rt.closed.Add(1) })
	return s.Servable.Close()
}

// warmUpParser reads the test warm-up format: a JSON array of float lists,
// one request of one float32 [n] tensor each.
func warmUpParser(js, _ string) ([][]servables.Tensor, error) {
	var sets [][]float32
	if err := json.Unmarshal([]byte(js), &sets); err != nil {
		return nil, fmt.Errorf("warm-up: %w", err)
	}
	out := make([][]servables.Tensor, len(sets))
	for i, vals := range sets {
		t, err := servables.NewTensor("x", servables.Float32, []int64{int64(len(vals))})
		if err != nil {
			return nil, err
		}
		copy(t.Float32s(), vals)
		out[i] = []servables.Tensor{t}
	}
	return out, nil
}

// world is one System under test with its bucket and runtime.
type world struct {
	t   *testing.T
	b   *memBucket
	rt  *countingRuntime
	sys *System
	reg *prometheus.Registry
	log *logBuffer
}

const poll = time.Second

// newWorld starts a System over a bucket holding cfg (a model config
// JSON) and models (path -> faulty spec), inside the caller's bubble.
func newWorld(t *testing.T, cfg string, models map[string]faultySpec, tweak ...func(*world, *Options)) *world {
	t.Helper()
	w := &world{t: t, b: newMemBucket(), rt: &countingRuntime{}, reg: prometheus.NewRegistry(), log: &logBuffer{}}
	for path, spec := range models {
		w.putModel(path, spec)
	}
	w.b.set("model_config.json", []byte(cfg))
	opts := Options{Bucket: w.b, ModelConfigPath: "model_config.json", PollInterval: poll, CacheDir: t.TempDir(),
		MaxModelBytes: 1 << 20, QueueSize: 64, Runtimes: servables.Registry{w.rt}, ParseWarmUp: warmUpParser,
		Logger: slog.New(slog.NewTextHandler(w.log, &slog.HandlerOptions{Level: slog.LevelDebug})), Registerer: w.reg}
	for _, f := range tweak {
		f(w, &opts)
	}
	sys, err := Start(opts)
	if err != nil {
		t.Fatal(err)
	}
	w.sys = sys
	return w
}

// logBuffer is a world's log: written by the System's goroutines while
// a test reads it, both under its lock.
type logBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (l *logBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.Write(p)
}

func (l *logBuffer) Len() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.Len()
}

func (l *logBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.String()
}

// putModel writes a faulty model file at path (a directory path gets one
// file in it) and returns its checksum.
func (w *world) putModel(path string, spec faultySpec) string {
	w.t.Helper()
	name, data := modelFile(w.t, path, spec)
	w.b.set(name, data)
	return checksumOf(w.t, path, spec)
}

// modelFile is the object name and content of a faulty model at path.
func modelFile(t *testing.T, path string, spec faultySpec) (string, []byte) {
	t.Helper()
	data, err := json.Marshal(spec)
	if err != nil {
		t.Fatal(err)
	}
	if strings.HasSuffix(path, "/") {
		return path + "model.faulty", data
	}
	return path, data
}

// checksumOf is the checksum of the faulty model spec at path.
func checksumOf(t *testing.T, path string, spec faultySpec) string {
	t.Helper()
	name, data := modelFile(t, path, spec)
	sum, err := bucket.Checksum(map[string][]byte{name: data})
	if err != nil {
		t.Fatal(err)
	}
	return sum
}

// setConfig writes the model config and waits for the next poll to apply it.
func (w *world) setConfig(cfg string) {
	w.t.Helper()
	w.b.set("model_config.json", []byte(cfg))
	w.settle()
}

// settle lets a poll interval pass and everything that follows from it happen.
func (w *world) settle() {
	time.Sleep(poll)
	synctest.Wait()
}

// stop stops the system; the bubble then checks that no goroutine is left.
func (w *world) stop() {
	w.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := w.sys.Stop(ctx); err != nil {
		w.t.Fatal(err)
	}
	if l, c := w.rt.loaded.Load(), w.rt.closed.Load(); l != c {
		w.t.Errorf("after Stop: %d servables loaded, %d closed", l, c)
	}
}

// model returns the status of path, failing the test if it has none.
func (w *world) model(path string) ModelStatus {
	w.t.Helper()
	for _, m := range w.sys.Status().Models {
		if m.Path == path {
			return m
		}
	}
	w.t.Fatalf("no status for %s in %+v", path, w.sys.Status().Models)
	return ModelStatus{}
}

// infer sends one float32 [1] request with value v to path.
func (w *world) infer(path string, v float32) Result {
	w.t.Helper()
	res, err := w.sys.Infer(context.Background(), []Request{{API: "test", ModelPath: path, Inputs: scalar(w.t, v)}})
	if err != nil {
		w.t.Fatal(err)
	}
	return res[0]
}

// configJSON builds a model config from entries.
func configJSON(entries ...string) string {
	return `{"model_metadata": [` + strings.Join(entries, ",") + `]}`
}

func entry(path, sum string, extra string) string {
	e := fmt.Sprintf(`{"model_path": %q`, path)
	if sum != "" {
		e += fmt.Sprintf(`, "checksum": %q`, sum)
	}
	if extra != "" {
		e += ", " + extra
	}
	return e + "}"
}

// metric returns the value of the metric family name with labels, or 0.
func (w *world) metric(name string, labels map[string]string) float64 {
	w.t.Helper()
	fams, err := w.reg.Gather()
	if err != nil {
		w.t.Fatal(err)
	}
	for _, f := range fams {
		if f.GetName() != name {
			continue
		}
	next:
		for _, m := range f.GetMetric() {
			for _, lp := range m.GetLabel() {
				if want, ok := labels[lp.GetName()]; ok && want != lp.GetValue() {
					continue next
				}
			}
			switch {
			case m.GetCounter() != nil:
				return m.GetCounter().GetValue()
			case m.GetGauge() != nil:
				return m.GetGauge().GetValue()
			}
		}
	}
	return 0
}
