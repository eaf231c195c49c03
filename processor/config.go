package processor

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"math"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/groveml/grove/conf"
	"github.com/groveml/grove/conf/modelconfig"
)

// Config is a DeepRec model config JSON (the model_config argument of
// initialize) as Grove applies it.
type Config struct {
	// StoreType is model_store_type: "local", "gs" or "s3".
	StoreType string
	// ModelDir is the model directory as written (checkpoint_dir, else
	// savedmodel_dir); BucketURL is the Grove bucket holding it and
	// ModelPath its name there, ending in "/" ("/m/ckpt/" is bucket
	// file:///m, model path "ckpt/").
	ModelDir, BucketURL, ModelPath string
	// Replicas is session_num: the model actors sharing the loaded weights.
	Replicas int
	// Policy is select_session_policy: PolicyMOD or PolicyRR.
	Policy string
	// IntraOpThreads is intra_op_parallelism_threads, else
	// omp_num_threads, else 1: the threads of one forward call.
	IntraOpThreads int
	// OMPThreads is omp_num_threads (0: not set), exported as
	// OMP_NUM_THREADS for the runtimes' OpenMP.
	OMPThreads int
	// WarmUpFile is model_entry + warmup_file_name, empty for none.
	WarmUpFile string
	// SignatureName is signature_name (default "serving_default").
	SignatureName string
	// InitTimeout is init_timeout_minutes: how long initialize waits for
	// the first version to serve (default 1 minute).
	InitTimeout time.Duration
	// PollInterval is grove_poll_interval: how often new versions are
	// looked for (default 60s, as DeepRec).
	PollInterval time.Duration
	// GOMAXPROCS is grove_gomaxprocs (0: Go's default); process-wide, so
	// with several Processors in a process the last New that sets it wins.
	GOMAXPROCS int
	// Kafka and PredictionLog are grove_prediction_log's sections, with
	// grove.yaml's defaults; HasPredictionLog says it was given.
	Kafka            conf.Kafka
	PredictionLog    conf.PredictionLog
	HasPredictionLog bool
	// Ignored are the DeepRec keys given that have no meaning here, sorted.
	Ignored []string
}

// The select_session_policy values.
const (
	// PolicyMOD sends the requests of one calling thread to one replica:
	// the threads are numbered as they first call, modulo session_num.
	PolicyMOD = "MOD"
	// PolicyRR sends requests to the replicas in turn.
	PolicyRR = "RR"
)

// Defaults of the keys that have one.
const (
	DefaultSignatureName = "serving_default"
	DefaultPollInterval  = 60 * time.Second
	DefaultInitTimeout   = time.Minute
)

// ignoredKeys are DeepRec's config keys that are accepted and have no
// meaning in Grove (TensorFlow's thread pools and devices, Redis and OSS,
// timelines, EmbeddingVariable storage, sharded embeddings).
var ignoredKeys = []string{
	"cpusets", "embedding_names", "enable_device_placement_optimization", "enable_inline_execute",
	"ev_storage_path", "ev_storage_size", "ev_storage_type", "gpu_ids_list", "id_type",
	"inter_op_parallelism_threads", "kmp_blocktime", "lock_timeout", "model_update_inter_threads",
	"model_update_intra_threads", "oss_access_id", "oss_access_key", "oss_endpoint", "read_thread_num",
	"redis_password", "redis_url", "shard_embedding", "shard_instance_count", "timeline_interval_step",
	"timeline_path", "timeline_start_step", "timeline_trace_count", "update_thread_num",
	"use_multi_stream", "use_per_session_threads",
}

// appliedKeys are the DeepRec keys Grove applies, and Grove's own.
var appliedKeys = []string{
	"checkpoint_dir", "feature_store_type", "init_timeout_minutes", "intra_op_parallelism_threads",
	"model_store_type", "omp_num_threads", "savedmodel_dir", "select_session_policy", "serialize_protocol",
	"session_num", "signature_name", "warmup_file_name",
	"grove_gomaxprocs", "grove_poll_interval", "grove_prediction_log",
}

// storeTypes are the model_store_type values Grove has a bucket driver
// for, with the URL scheme of their directories ("" for a local path).
var storeTypes = map[string]string{"local": "", "gs": "gs://", "s3": "s3://"}

// ParseConfig parses a DeepRec model config JSON. entry is initialize's
// model_entry, which DeepRec puts in front of warmup_file_name. Errors
// name the key at fault; keys Grove ignores are listed in Config.Ignored.
func ParseConfig(entry string, data []byte) (Config, error) {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	var raw map[string]json.RawMessage
	if err := dec.Decode(&raw); err != nil {
		return Config{}, fmt.Errorf("model config: not a JSON object: %w", err)
	}
	if raw == nil {
		return Config{}, errors.New("model config: not a JSON object: null")
	}
	if dec.More() {
		return Config{}, errors.New("model config: text after the JSON object")
	}
	c := Config{StoreType: "local", Replicas: 1, Policy: PolicyMOD, SignatureName: DefaultSignatureName,
		InitTimeout: DefaultInitTimeout, PollInterval: DefaultPollInterval}
	def := conf.DefaultServer()
	c.Kafka, c.PredictionLog = def.Kafka, def.PredictionLog
	var unknown []string
	for _, k := range slices.Sorted(maps.Keys(raw)) {
		v := raw[k]
		if string(v) == "null" { // DeepRec reads null as absent
			continue
		}
		switch {
		case slices.Contains(ignoredKeys, k):
			c.Ignored = append(c.Ignored, k)
		case slices.Contains(appliedKeys, k):
			if err := c.apply(k, v); err != nil {
				return Config{}, fmt.Errorf("model config key %q: %w", k, err)
			}
		default:
			unknown = append(unknown, k)
		}
	}
	if len(unknown) > 0 {
		return Config{}, fmt.Errorf("model config: unknown key %s; Grove takes DeepRec's keys and grove_poll_interval, grove_gomaxprocs and grove_prediction_log (docs/deeprec.md)", quoteList(unknown))
	}
	if c.ModelDir == "" {
		return Config{}, errors.New("model config: no model directory: set checkpoint_dir (a directory of numbered versions) or savedmodel_dir")
	}
	var err error
	if c.BucketURL, c.ModelPath, err = splitModelDir(c.StoreType, c.ModelDir); err != nil {
		return Config{}, err
	}
	if c.IntraOpThreads == 0 {
		c.IntraOpThreads = max(c.OMPThreads, 1)
	}
	if c.WarmUpFile != "" {
		c.WarmUpFile = entry + c.WarmUpFile
	}
	return c, nil
}

// apply sets the applied key k from its JSON value v.
func (c *Config) apply(k string, v json.RawMessage) error {
	var err error
	switch k {
	case "model_store_type":
		var s string
		if s, err = str(v); err == nil {
			if _, ok := storeTypes[s]; !ok {
				return fmt.Errorf("%q: no such driver in Grove; its buckets are local, gs and s3", s)
			}
			c.StoreType = s
		}
	case "checkpoint_dir":
		// The parent of the versions, as in DeepRec: it wins over savedmodel_dir.
		c.ModelDir, err = nonEmpty(v)
	case "savedmodel_dir":
		var s string
		if s, err = nonEmpty(v); err == nil && c.ModelDir == "" {
			c.ModelDir = s
		}
	case "session_num":
		c.Replicas, err = integer(v, 1, modelconfig.MaxReplicas)
	case "select_session_policy":
		var s string
		if s, err = str(v); err == nil {
			if s != PolicyMOD && s != PolicyRR {
				return fmt.Errorf("%q is not %q or %q", s, PolicyMOD, PolicyRR)
			}
			c.Policy = s
		}
	case "omp_num_threads":
		c.OMPThreads, err = integer(v, 1, modelconfig.MaxIntraOpThreads)
	case "intra_op_parallelism_threads":
		c.IntraOpThreads, err = integer(v, 1, modelconfig.MaxIntraOpThreads)
	case "warmup_file_name":
		c.WarmUpFile, err = str(v)
	case "signature_name":
		c.SignatureName, err = nonEmpty(v)
	case "init_timeout_minutes":
		var n int
		if n, err = integer(v, 1, 24*60); err == nil {
			c.InitTimeout = time.Duration(n) * time.Minute
		}
	case "feature_store_type":
		var s string
		if s, err = str(v); err == nil && s != "local" {
			return fmt.Errorf("%q: Grove has no Redis feature store; the model's parameters are loaded with the model (use \"local\")", s)
		}
	case "serialize_protocol":
		var s string
		if s, err = str(v); err == nil && s != "protobuf" {
			return fmt.Errorf("%q: the protocol is \"protobuf\" (PredictRequest and PredictResponse)", s)
		}
	case "grove_poll_interval":
		var s string
		if s, err = str(v); err == nil {
			d, perr := time.ParseDuration(s)
			switch {
			case perr != nil:
				return fmt.Errorf("%q is not a Go duration such as \"60s\"", s)
			case d < conf.MinPollInterval:
				return fmt.Errorf("%s is shorter than %s", d, conf.MinPollInterval)
			}
			c.PollInterval = d
		}
	case "grove_gomaxprocs":
		c.GOMAXPROCS, err = integer(v, 1, 4096)
	case "grove_prediction_log":
		err = c.predictionLog(v)
	}
	return err
}

// predictionLog reads grove_prediction_log: an object with grove.yaml's
// kafka and prediction_log sections, validated as grove serve does.
func (c *Config) predictionLog(v json.RawMessage) error {
	if len(v) == 0 || v[0] != '{' {
		return errors.New("not an object; want {\"kafka\": {...}, \"prediction_log\": {...}} as in grove.yaml")
	}
	s := conf.DefaultServer()
	s.Bucket = "file:///" // validated as a server's; the bucket is not this section's
	sections := struct {
		Kafka         *conf.Kafka         `yaml:"kafka"`
		PredictionLog *conf.PredictionLog `yaml:"prediction_log"`
	}{&s.Kafka, &s.PredictionLog}
	if err := conf.DecodeYAML(v, &sections); err != nil { // JSON is YAML
		return fmt.Errorf("%s", strings.ReplaceAll(err.Error(), "yaml: ", ""))
	}
	if err := s.Validate(); err != nil {
		return err
	}
	c.Kafka, c.PredictionLog, c.HasPredictionLog = s.Kafka, s.PredictionLog, true
	return nil
}

// splitModelDir turns a model directory of store type st into a bucket
// URL and the directory's name in it.
func splitModelDir(st, dir string) (bucketURL, modelPath string, err error) {
	scheme := storeTypes[st]
	bad := func(format string, args ...any) error {
		return fmt.Errorf("model config: model directory %q: %s", dir, fmt.Sprintf(format, args...))
	}
	if scheme == "" {
		p := strings.TrimPrefix(dir, "file://")
		if strings.Contains(p, "://") {
			return "", "", bad("model_store_type is local, which takes a file system path; set model_store_type to the store of this URL (gs or s3)")
		}
		abs, err := filepath.Abs(p)
		if err != nil {
			return "", "", bad("%v", err)
		}
		if abs == "/" {
			return "", "", bad("the root directory cannot be a model directory")
		}
		return "file://" + filepath.Dir(abs), filepath.Base(abs) + "/", nil
	}
	rest, ok := strings.CutPrefix(dir, scheme)
	if !ok {
		return "", "", bad("model_store_type is %s, so the directory is a %s URL", st, scheme)
	}
	rest = strings.TrimRight(rest, "/")
	i := strings.LastIndexByte(rest, '/')
	if i <= 0 || i == len(rest)-1 {
		return "", "", bad("names a bucket, not a directory in it; give %sbucket/dir", scheme)
	}
	return scheme + rest[:i], rest[i+1:] + "/", nil
}

// str reads a JSON string.
func str(v json.RawMessage) (string, error) {
	var s string
	if err := json.Unmarshal(v, &s); err != nil {
		return "", fmt.Errorf("%s is not a string", v)
	}
	return s, nil
}

// nonEmpty reads a JSON string that must not be empty.
func nonEmpty(v json.RawMessage) (string, error) {
	s, err := str(v)
	if err == nil && s == "" {
		err = errors.New("is empty")
	}
	return s, err
}

// integer reads a JSON integer (a number, or a quoted one, as jsoncpp's
// asInt takes both) between lo and hi.
func integer(v json.RawMessage, lo, hi int) (int, error) {
	text := string(v)
	if s, err := str(v); err == nil {
		text = s
	}
	f, err := json.Number(text).Float64()
	if err != nil || f != math.Trunc(f) {
		return 0, fmt.Errorf("%s is not an integer", v)
	}
	if f < float64(lo) || f > float64(hi) {
		return 0, fmt.Errorf("%s is out of range %d..%d", v, lo, hi)
	}
	return int(f), nil
}

// quoteList writes names quoted and comma-separated.
func quoteList(names []string) string {
	q := make([]string, len(names))
	for i, n := range names {
		q[i] = fmt.Sprintf("%q", n)
	}
	return strings.Join(q, ", ")
}
