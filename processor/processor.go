// Package processor is Grove as a DeepRec serving processor: what
// libgrove_processor.so (cmd/processor, which only wires the C API to
// it) runs behind initialize, process, batch_process and
// get_serving_model_info.
//
// A Processor is a whole Grove actors.System (supervisor, model actors,
// router; dynamic batching, priorities, deadlines, replicas and the
// prediction log when configured) over one model directory named by a
// DeepRec model config JSON (ParseConfig). The directory is a bucket
// (local, gs or s3) holding either the model itself or numbered versions
// of it; the Processor gives the supervisor a model config of one entry
// for it, made afresh from a listing of the directory on each poll (a
// versioned entry under version_policy latest 1 once the directory holds
// a version or is empty; see dirBucket), so versions are found on each
// poll, as DeepRec finds them, checked against their
// CHECKSUM, loaded, warmed up and swapped in by the supervisor as for
// any Grove model. Requests are DeepRec's protobuf PredictRequest, run
// through package api/deeprec's Predict.
//
// # Who owns what
//
// The models, their versions, signatures and requests in flight are the
// actors' (package actors). The Processor owns only what it is made with
// (its Config, the System, the prediction log producer) and the session
// selection state: the round-robin counter and the numbers given to
// calling threads for MOD, both atomics safe for any number of callers.
// Whether the directory is one of versions (dirBucket.versioned, an
// atomic that only turns true) is written by the supervisor's polls.
package processor

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"google.golang.org/protobuf/proto"

	"github.com/groveml/grove/actors"
	"github.com/groveml/grove/api/deeprec"
	"github.com/groveml/grove/conf/bucket"
	"github.com/groveml/grove/conf/bucket/drivers"
	"github.com/groveml/grove/conf/modelconfig"
	"github.com/groveml/grove/internal/capped"
	"github.com/groveml/grove/logging"
	"github.com/groveml/grove/servables"
	"github.com/groveml/grove/servables/runtimes"
)

// Status codes of process, get_serving_model_info and batch_process, as DeepRec's.
const (
	StatusOK    = 200
	StatusError = 500
)

// WarmUpRuns is how many times the warm-up request runs on each replica
// before a version serves, as DeepRec runs it on each session.
const WarmUpRuns = 5

// API labels the processor's requests in metrics and the prediction log.
const API = "deeprec-processor"

// configName is the name of the model config the Processor gives the
// supervisor; it exists only in the Processor's view of the bucket.
const configName = ".grove-processor-model-config.json"

// Options configure a Processor beyond its model config.
type Options struct {
	// Logger receives the logs; nil means slog.Default().
	Logger *slog.Logger
	// Runtimes are the model runtimes; nil means the built-in ones
	// (runtimes.Builtin), opening Libraries.
	Runtimes servables.Registry
	// Libraries are the shared libraries of the default runtimes; empty
	// paths are searched from the host program's path. The c-shared
	// library passes those found from its own path, so a release finds
	// lib/libonnxruntime.so.1 and lib/libgrove_torch.so beside it.
	Libraries runtimes.Libraries
	// CacheDir is where model files are copied to be loaded; empty means
	// a new directory under os.TempDir().
	CacheDir string
}

// Processor serves one model directory through Grove's actors.
type Processor struct {
	cfg      Config
	log      *slog.Logger
	sys      *actors.System
	producer *logging.Producer
	bucket   bucket.Bucket
	cacheDir string
	// rr is the round-robin counter (RR); threads numbers callers for MOD.
	rr      atomic.Uint64
	threads atomic.Pointer[threadTable]
}

// maxThreads bounds the callers MOD remembers: past it the numbering
// starts afresh, so that a host making a thread per call (each with a new
// id) does not grow the table with every thread it ever ran.
const maxThreads = 1 << 14

// threadTable numbers callers in the order they first call.
type threadTable struct {
	m sync.Map // caller id -> int
	n atomic.Int64
}

// New parses configJSON (ParseConfig, with entry as DeepRec's
// model_entry), applies its process settings (GOMAXPROCS,
// OMP_NUM_THREADS), starts the actors and waits, up to
// init_timeout_minutes, for the model to serve. The error says why it
// could not: a bad key, a bucket that cannot be opened, a model that
// failed to load or warm up, or none found in time.
func New(ctx context.Context, entry string, configJSON []byte, opts Options) (*Processor, error) {
	cfg, err := ParseConfig(entry, configJSON)
	if err != nil {
		return nil, err
	}
	log := opts.Logger
	if log == nil {
		log = slog.Default()
	}
	log = log.With("component", "processor")
	if len(cfg.Ignored) > 0 {
		log.Warn("DeepRec model config keys accepted but without effect in Grove (docs/deeprec.md)", "keys", strings.Join(cfg.Ignored, ","))
	}
	if cfg.GOMAXPROCS > 0 {
		runtime.GOMAXPROCS(cfg.GOMAXPROCS)
	}
	if cfg.OMPThreads > 0 {
		// For OpenMP runtimes that start after this (DeepRec sets it too).
		if err := os.Setenv("OMP_NUM_THREADS", strconv.Itoa(cfg.OMPThreads)); err != nil {
			return nil, fmt.Errorf("setting OMP_NUM_THREADS: %w", err)
		}
	}
	p := &Processor{cfg: cfg, log: log}
	if err := p.start(ctx, opts); err != nil {
		p.Close(context.Background())
		return nil, err
	}
	return p, nil
}

// start opens the bucket and the prediction log, starts the actors and
// waits for the model.
func (p *Processor) start(ctx context.Context, opts Options) error {
	cfg := p.cfg
	b, err := drivers.Builtin(os.Getenv("AWS_ENDPOINT_URL")).Open(ctx, cfg.BucketURL)
	if err != nil {
		return fmt.Errorf("opening the model directory %s: %w", cfg.ModelDir, err)
	}
	p.bucket = b
	p.cacheDir = opts.CacheDir
	if p.cacheDir == "" {
		if p.cacheDir, err = os.MkdirTemp("", "grove-processor-"); err != nil {
			return fmt.Errorf("creating the model cache: %w", err)
		}
	}
	var sink actors.PredictionSink
	if cfg.HasPredictionLog {
		policy, err := logging.PolicyFromConfig(cfg.PredictionLog)
		if err != nil {
			return err
		}
		p.producer, err = logging.New(cfg.Kafka, logging.WithLogger(p.log.With("component", "prediction-log")),
			logging.WithInstanceID(instanceID()))
		if err != nil {
			return fmt.Errorf("starting the prediction log: %w", err)
		}
		sink = &actors.PredictionLog{Producer: p.producer, Direct: policy}
	}
	rts := opts.Runtimes
	if rts == nil {
		rts = runtimes.Builtin(opts.Libraries)
	}
	p.sys, err = actors.Start(actors.Options{
		Bucket:          &dirBucket{Bucket: b, cfg: cfg, log: p.log},
		ModelConfigPath: configName,
		PollInterval:    cfg.PollInterval,
		CacheDir:        p.cacheDir,
		MaxModelBytes:   2 << 30,
		QueueSize:       1024,
		MaxBatchRows:    64,
		IntraOpThreads:  cfg.IntraOpThreads,
		Runtimes:        rts,
		WarmUp:          p.warmUp,
		Predictions:     sink,
		Logger:          p.log,
		// A version's warm-up may take as long as initialize waits for one.
		WarmUpTimeout: cfg.InitTimeout,
	})
	if err != nil {
		return err
	}
	wctx, cancel := context.WithTimeout(ctx, cfg.InitTimeout)
	defer cancel()
	return p.waitServing(wctx)
}

// modelConfig is the model config of one entry the supervisor serves:
// a versioned entry under version_policy latest 1, else the model
// itself, kept in service for init_timeout_minutes after it leaves the
// config (the directory turned into one of versions) or until a version
// is ready, whichever is first (actors serves a versioned entry's path
// with its ready version before a leaving model of the same path).
func modelConfig(cfg Config, versioned bool) ([]byte, error) {
	extra := fmt.Sprintf(`, "eviction_grace_period_in_ms": %d`, min(cfg.InitTimeout.Milliseconds(), modelconfig.MaxGracePeriodMs))
	if versioned {
		extra = `, "version_policy": {"latest": {"num_versions": 1}}`
	}
	data := fmt.Appendf(nil, `{"model_metadata": [{"model_path": %q, "replicas": %d, "intra_op_threads": %d%s}]}`,
		cfg.ModelPath, cfg.Replicas, cfg.IntraOpThreads, extra)
	if _, err := modelconfig.Parse(data); err != nil {
		return nil, fmt.Errorf("model directory %s: %w", cfg.ModelDir, err)
	}
	return data, nil
}

// Layout is what a listing of the model directory holds.
type Layout int

const (
	// LayoutEmpty: no file at all; served as a directory of versions
	// (the first version may come later, as DeepRec waits for one).
	LayoutEmpty Layout = iota
	// LayoutPlain: files, and no numbered version directory with a file.
	LayoutPlain
	// LayoutVersions: at least one numbered version directory
	// (modelconfig.ParseVersion) holding a file.
	LayoutVersions
)

func (l Layout) String() string {
	switch l {
	case LayoutEmpty:
		return "empty"
	case LayoutPlain:
		return "plain"
	case LayoutVersions:
		return "versions"
	}
	return "Layout(" + strconv.Itoa(int(l)) + ")"
}

// LayoutOf tells what the objects listed under dir hold.
func LayoutOf(dir string, objs []bucket.Object) Layout {
	l := LayoutEmpty
	for _, o := range objs {
		rest, ok := strings.CutPrefix(o.Name, dir)
		if !ok || rest == "" || strings.HasSuffix(rest, "/") {
			continue
		}
		v, file, nested := strings.Cut(rest, "/")
		if _, isV := modelconfig.ParseVersion(v); nested && isV {
			if file != bucket.ChecksumFile {
				return LayoutVersions
			}
			continue // a version's CHECKSUM alone: not a version yet
		}
		l = LayoutPlain
	}
	return l
}

// dirBucket is the model directory's bucket as the supervisor sees it:
// read-only, plus the model config (configName) made on each read from a
// listing of the directory, so that versions are found by themselves as
// DeepRec finds them: a directory that is empty, or turns from the model
// itself into one of versions, is served as a directory of versions from
// the next poll on. Once of versions it stays so (a version directory
// removed for a while does not bring back the model it replaced).
type dirBucket struct {
	bucket.Bucket
	cfg       Config
	log       *slog.Logger
	versioned atomic.Bool
}

// LocalDir is the model directory's bucket's (see bucket.LocalDir), so
// that errors name its files by their paths in it, not on the disk.
func (d *dirBucket) LocalDir() string { return bucket.LocalDir(d.Bucket) }

func (d *dirBucket) ReadObject(ctx context.Context, name string, limit int64) ([]byte, bucket.Attrs, error) {
	if name != configName {
		return d.Bucket.ReadObject(ctx, name, limit)
	}
	if !d.versioned.Load() {
		objs, err := d.Bucket.List(ctx, d.cfg.ModelPath)
		if err != nil {
			return nil, bucket.Attrs{}, fmt.Errorf("listing the model directory %s: %w", d.cfg.ModelDir, err)
		}
		l := LayoutOf(d.cfg.ModelPath, objs)
		d.log.Debug("model directory listed", "model_dir", d.cfg.ModelDir, "layout", l)
		if l != LayoutPlain {
			d.versioned.Store(true)
		}
	}
	versioned := d.versioned.Load()
	data, err := modelConfig(d.cfg, versioned)
	if err != nil {
		return nil, bucket.Attrs{}, err
	}
	if int64(len(data)) > limit {
		return nil, bucket.Attrs{}, &capped.TooLargeError{What: "the model config made for " + d.cfg.ModelDir, Limit: limit}
	}
	return data, bucket.Attrs{Version: strconv.FormatBool(versioned), Size: int64(len(data))}, nil
}

// waitServing waits until the model serves, its load fails, or ctx ends.
func (p *Processor) waitServing(ctx context.Context) error {
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	for {
		if _, _, ok := p.sys.ModelMetadata(p.cfg.ModelPath); ok {
			p.log.Info("processor serving", "model_dir", p.cfg.ModelDir, "version", p.version(), "replicas", p.cfg.Replicas,
				"select_session_policy", p.cfg.Policy, "poll_interval", p.cfg.PollInterval)
			return nil
		}
		st := p.sys.Status()
		for _, m := range st.Models {
			if (m.Path == p.cfg.ModelPath || m.VersionOf == p.cfg.ModelPath) && m.State == actors.StateFailed {
				return fmt.Errorf("model directory %s: %s", p.cfg.ModelDir, m.LastError)
			}
		}
		if st.Config.LastError != "" {
			return fmt.Errorf("model directory %s: %s", p.cfg.ModelDir, st.Config.LastError)
		}
		select {
		case <-tick.C:
		case <-ctx.Done():
			return fmt.Errorf("model directory %s: no model served within init_timeout_minutes (%v); a directory of versions needs a numbered version directory holding a TorchScript or ONNX model: %w",
				p.cfg.ModelDir, p.cfg.InitTimeout, ctx.Err())
		}
	}
}

// Config returns the config the Processor runs with.
func (p *Processor) Config() Config { return p.cfg }

// replica is the replica (1-based) that serves a call from caller: by
// the caller's number modulo session_num (MOD: callers are numbered in
// the order they first call, afresh past maxThreads callers) or in turn
// (RR).
func (p *Processor) replica(caller int64) int {
	n := p.cfg.Replicas
	if n <= 1 {
		return 0
	}
	if p.cfg.Policy == PolicyRR {
		return int((p.rr.Add(1)-1)%uint64(n)) + 1
	}
	tt := p.threads.Load()
	if tt == nil {
		p.threads.CompareAndSwap(nil, &threadTable{})
		tt = p.threads.Load()
	}
	v, ok := tt.m.Load(caller)
	if !ok {
		num := tt.n.Add(1) - 1
		if num >= maxThreads {
			p.threads.CompareAndSwap(tt, &threadTable{})
			return p.replica(caller)
		}
		v, _ = tt.m.LoadOrStore(caller, int(num))
	}
	return v.(int)%n + 1
}

// Process serves one serialized PredictRequest from caller (an id of
// the calling thread, for select_session_policy MOD) and returns the
// serialized PredictResponse and StatusOK, or the error text and
// StatusError. An empty input returns the model's signature as JSON, as
// DeepRec's process does.
func (p *Processor) Process(ctx context.Context, caller int64, input []byte) ([]byte, int) {
	b := backend{sys: p.sys, replica: p.replica(caller)}
	out, _, err := deeprec.Process(ctx, b, p.cfg.ModelPath, input, deeprec.Call{API: API, Signature: p.cfg.SignatureName}, nil)
	if err != nil {
		return []byte(deeprec.ErrorText(err)), StatusError
	}
	return out, StatusOK
}

// ServingModelInfo returns the serialized ServingModelInfo of the
// version serving now (deeprec.ModelInfo), its model_path the model
// directory as configured: the version's directory ("<dir>/3/") or, for
// the model itself, the directory.
func (p *Processor) ServingModelInfo() ([]byte, int) {
	info, err := deeprec.ModelInfo(p.sys, p.cfg.ModelPath)
	if err != nil {
		return []byte(deeprec.ErrorText(err)), StatusError
	}
	info.ModelPath = p.cfg.ModelDir
	if info.GetVersion() != "" {
		info.ModelPath = strings.TrimSuffix(p.cfg.ModelDir, "/") + "/" + info.GetVersion() + "/"
	}
	out, err := proto.Marshal(info)
	if err != nil {
		return []byte(err.Error()), StatusError
	}
	return out, StatusOK
}

// version is the number of the version serving now, "" for a model
// without versions.
func (p *Processor) version() string {
	vp, ok := p.sys.NewestVersion(p.cfg.ModelPath)
	if !ok {
		return ""
	}
	return filepath.Base(vp)
}

// maxWarmUpBytes bounds the warm-up file, read whole: the limit of the
// model config, which carries grove serve's warm-up request
// (warm_up_batch_request_json).
const maxWarmUpBytes = modelconfig.MaxConfigBytes

// warmUp is the actors' warm-up hook (actors.Options.WarmUp): the
// warm-up file, one serialized PredictRequest, else a request of ones
// (batch 1) when the signature is known and has no BYTES input; each run
// WarmUpRuns times on every replica, as DeepRec's.
func (p *Processor) warmUp(meta modelconfig.Model, sig servables.Metadata) (actors.WarmUp, error) {
	var set []servables.Tensor
	if f := p.cfg.WarmUpFile; f != "" {
		data, err := capped.ReadFile(f, maxWarmUpBytes, f)
		if err != nil {
			return actors.WarmUp{}, fmt.Errorf("warmup_file_name: %w", err)
		}
		req, err := deeprec.ParseRequest(data)
		if err != nil {
			return actors.WarmUp{}, fmt.Errorf("warmup_file_name %s: %w", f, err)
		}
		if set, err = deeprec.Inputs(req, sig.Inputs); err != nil {
			return actors.WarmUp{}, fmt.Errorf("warmup_file_name %s: %w", f, err)
		}
	} else {
		var ok bool
		if set, ok = Ones(sig); !ok {
			p.log.Info("no warm-up: no warmup_file_name, and the signature is not known or has a string input", "model", meta.Path)
			return actors.WarmUp{}, nil
		}
	}
	return actors.WarmUp{Sets: [][]servables.Tensor{set}, Runs: WarmUpRuns, PerReplica: true}, nil
}

// Ones returns a request of ones for the inputs of sig, batch 1 (every
// dimension of -1 is 1), as DeepRec warms a model without a warm-up
// file; ok is false when an input's datatype or shape is not known or it
// is BYTES.
func Ones(sig servables.Metadata) (inputs []servables.Tensor, ok bool) {
	if len(sig.Inputs) == 0 {
		return nil, false
	}
	for _, s := range sig.Inputs {
		if s.DType == servables.Unknown || s.DType == servables.Bytes || s.Shape == nil {
			return nil, false
		}
		shape := make([]int64, len(s.Shape))
		for i, d := range s.Shape {
			shape[i] = max(d, 1)
		}
		t, err := servables.NewTensor(s.Name, s.DType, shape)
		if err != nil {
			return nil, false
		}
		if !fillOnes(t) {
			return nil, false
		}
		inputs = append(inputs, t)
	}
	return inputs, true
}

// Close stops the actors (deleting their cached files) and flushes the
// prediction log. C callers never call it: DeepRec's API has no release.
func (p *Processor) Close(ctx context.Context) {
	if p.sys != nil {
		if err := p.sys.Stop(ctx); err != nil {
			p.log.Warn("stopping the actors", "err", err)
		}
	}
	if p.producer != nil {
		if err := p.producer.Close(ctx); err != nil {
			p.log.Warn("closing the prediction log", "err", err)
		}
	}
	if c, ok := p.bucket.(io.Closer); ok {
		_ = c.Close()
	}
	if p.cacheDir != "" {
		_ = os.RemoveAll(p.cacheDir)
	}
}

// backend runs the deeprec protocol's requests on sys, on the replica
// the session policy picked.
type backend struct {
	sys     *actors.System
	replica int
}

func (b backend) Infer(ctx context.Context, reqs []actors.Request) ([]actors.Result, error) {
	for i := range reqs {
		reqs[i].Replica = b.replica
	}
	return b.sys.Infer(ctx, reqs)
}

func (b backend) ModelMetadata(path string) (servables.Metadata, string, bool) {
	return b.sys.ModelMetadata(path)
}

// instanceID names this process in prediction events: host name and pid.
func instanceID() string {
	host, _ := os.Hostname()
	return fmt.Sprintf("%s/%d", host, os.Getpid())
}

// fillOnes sets every element of t to 1; false for a datatype it cannot.
func fillOnes(t servables.Tensor) bool {
	switch t.DType {
	case servables.Float32:
		fill(t.Float32s(), 1)
	case servables.Float64:
		fill(t.Float64s(), 1)
	case servables.Int8:
		fill(t.Int8s(), 1)
	case servables.Int16:
		fill(t.Int16s(), 1)
	case servables.Int32:
		fill(t.Int32s(), 1)
	case servables.Int64:
		fill(t.Int64s(), 1)
	case servables.Bool, servables.Uint8:
		fill(t.Uint8s(), 1)
	case servables.Float16:
		fill(t.Uint16s(), 0x3c00)
	case servables.BFloat16:
		fill(t.Uint16s(), 0x3f80)
	default:
		return false
	}
	return true
}

func fill[T any](s []T, v T) {
	for i := range s {
		s[i] = v
	}
}
