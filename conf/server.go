package conf

import (
	"bytes"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"time"

	"gopkg.in/yaml.v3"
)

// Server is the configuration of "grove serve". Each field can be set in
// the YAML config file under its yaml key, or with the flag of the same
// name with dashes (poll_interval is --poll-interval).
type Server struct {
	// Bucket is the URL of the bucket holding the model config and the
	// models: file:///abs/dir, file://./rel/dir or gs://bucket[/prefix].
	Bucket string `yaml:"bucket"`
	// ModelConfig is the model config's object name in the bucket.
	ModelConfig string `yaml:"model_config"`
	// HTTP is the host:port the HTTP API listens on.
	HTTP string `yaml:"http"`
	// PollInterval is how often the model config is read; at least MinPollInterval.
	PollInterval time.Duration `yaml:"poll_interval"`
	// CacheDir is where models are copied before loading.
	CacheDir string `yaml:"cache_dir"`
	// MaxModelBytes is the largest model, in bytes, that is fetched.
	MaxModelBytes int64 `yaml:"max_model_bytes"`
	// MaxBodyBytes is the largest request body, in bytes, that is accepted.
	MaxBodyBytes int64 `yaml:"max_body_bytes"`
	// DrainTimeout bounds how long shutdown waits for requests in flight.
	DrainTimeout time.Duration `yaml:"drain_timeout"`
	// ModelQueueSize is the most requests queued for one model.
	ModelQueueSize int `yaml:"model_queue_size"`
	// IntraOpThreads is the number of threads a model uses for one forward pass.
	IntraOpThreads int `yaml:"intra_op_threads"`
	// LogLevel is a slog level: debug, info, warn or error (optionally with an offset, e.g. "debug-4").
	LogLevel string `yaml:"log_level"`
	// LogFormat is "text" or "json".
	LogFormat string `yaml:"log_format"`
}

// MinPollInterval is the shortest accepted poll interval.
const MinPollInterval = time.Second

// DefaultServer returns the defaults of every Server field; Bucket has none.
func DefaultServer() Server {
	cacheDir := "/tmp/grove-cache"
	if d, err := os.UserCacheDir(); err == nil {
		cacheDir = filepath.Join(d, "grove")
	}
	return Server{
		ModelConfig:    "model_config.json",
		HTTP:           "127.0.0.1:8080",
		PollInterval:   30 * time.Second,
		CacheDir:       cacheDir,
		MaxModelBytes:  2 << 30,
		MaxBodyBytes:   64 << 20,
		DrainTimeout:   30 * time.Second,
		ModelQueueSize: 1024,
		IntraOpThreads: 1,
		LogLevel:       "info",
		LogFormat:      "text",
	}
}

// ParseServerArgs parses the arguments of "grove serve" (without the
// command name) and returns the validated configuration. Each field comes
// from, in increasing precedence: DefaultServer, the YAML file named by
// --config, and the flags given in args. It prints nothing; for -h or
// -help it returns flag.ErrHelp, and PrintServerUsage shows the flags.
func ParseServerArgs(args []string) (Server, error) {
	s := DefaultServer()
	fs, configFile, apply := serverFlags(&s)
	if err := fs.Parse(args); err != nil {
		return Server{}, err
	}
	if fs.NArg() > 0 {
		return Server{}, fmt.Errorf("unexpected argument %q; grove serve takes only flags", fs.Arg(0))
	}
	if *configFile != "" {
		if err := loadServerFile(*configFile, &s); err != nil {
			return Server{}, err
		}
	}
	fs.Visit(func(f *flag.Flag) {
		if set, ok := apply[f.Name]; ok {
			set()
		}
	})
	if err := s.Validate(); err != nil {
		return Server{}, err
	}
	return s, nil
}

// PrintServerUsage writes the usage of "grove serve" and its flags to w.
func PrintServerUsage(w io.Writer) {
	s := DefaultServer()
	fs, _, _ := serverFlags(&s)
	fs.SetOutput(w)
	fmt.Fprintf(w, "Usage: grove serve [flags]\n\nServes the models listed in the bucket's model config.\nFlags override the --config file, which overrides the defaults.\n\n")
	fs.PrintDefaults()
}

// serverFlags defines the flags of "grove serve" with s's values as
// defaults. apply maps each flag name but "config" to a function that
// copies the parsed flag value into s.
func serverFlags(s *Server) (fs *flag.FlagSet, configFile *string, apply map[string]func()) {
	fs = flag.NewFlagSet("grove serve", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	fs.Usage = func() {}
	apply = make(map[string]func())
	str := func(p *string, name, usage string) {
		v := fs.String(name, *p, usage)
		apply[name] = func() { *p = *v }
	}
	dur := func(p *time.Duration, name, usage string) {
		v := fs.Duration(name, *p, usage)
		apply[name] = func() { *p = *v }
	}
	i64 := func(p *int64, name, usage string) {
		v := fs.Int64(name, *p, usage)
		apply[name] = func() { *p = *v }
	}
	integer := func(p *int, name, usage string) {
		v := fs.Int(name, *p, usage)
		apply[name] = func() { *p = *v }
	}
	configFile = fs.String("config", "", "YAML config `file`; its keys are the flag names with underscores")
	str(&s.Bucket, "bucket", "bucket `URL` with the model config and models: file:///abs/dir, file://./rel/dir or gs://bucket[/prefix] (required)")
	str(&s.ModelConfig, "model-config", "object `name` of the model config in the bucket")
	str(&s.HTTP, "http", "`host:port` of the HTTP API")
	dur(&s.PollInterval, "poll-interval", "how often the model config is read (at least 1s)")
	str(&s.CacheDir, "cache-dir", "`directory` models are copied to before loading")
	i64(&s.MaxModelBytes, "max-model-bytes", "largest model `size` in bytes")
	i64(&s.MaxBodyBytes, "max-body-bytes", "largest request body `size` in bytes")
	dur(&s.DrainTimeout, "drain-timeout", "how long shutdown waits for requests in flight")
	integer(&s.ModelQueueSize, "model-queue-size", "most requests queued per model")
	integer(&s.IntraOpThreads, "intra-op-threads", "threads per model forward pass")
	str(&s.LogLevel, "log-level", "log `level`: debug, info, warn or error")
	str(&s.LogFormat, "log-format", "log `format`: text or json")
	return fs, configFile, apply
}

// yamlLineError matches a yaml.v3 type error message, and yamlFieldNotFound
// the one for an unknown key.
var (
	yamlLineError     = regexp.MustCompile(`^line (\d+): (.*)$`)
	yamlFieldNotFound = regexp.MustCompile(`^field (.+) not found in type .*$`)
)

// loadServerFile overlays the keys set in a YAML file onto s.
func loadServerFile(path string, s *Server) error {
	data, err := os.ReadFile(path)
	if err != nil {
		return fmt.Errorf("reading config file: %w", err)
	}
	dec := yaml.NewDecoder(bytes.NewReader(data))
	dec.KnownFields(true)
	err = dec.Decode(s)
	if errors.Is(err, io.EOF) { // an empty file sets nothing
		return nil
	}
	var te *yaml.TypeError
	if errors.As(err, &te) {
		keys := yamlKeysByLine(data)
		msgs := make([]string, len(te.Errors))
		for i, m := range te.Errors {
			msgs[i] = m
			sub := yamlLineError.FindStringSubmatch(m)
			if sub == nil {
				continue
			}
			line, msg := sub[1], sub[2]
			if u := yamlFieldNotFound.FindStringSubmatch(msg); u != nil {
				msgs[i] = fmt.Sprintf("line %s: unknown key %q", line, u[1])
				continue
			}
			if strings.Contains(msg, "time.Duration") {
				msg += ` (durations are strings such as "30s")`
			}
			if n, err := strconv.Atoi(line); err == nil && keys[n] != "" {
				msg = keys[n] + ": " + msg
			}
			msgs[i] = fmt.Sprintf("line %s: %s", line, msg)
		}
		return fmt.Errorf("config file %s: %s", path, strings.Join(msgs, "; "))
	}
	if err != nil {
		return fmt.Errorf("config file %s: %w", path, err)
	}
	return nil
}

// yamlKeysByLine maps the lines of a YAML mapping's keys and scalar values
// to the keys, to name the key in yaml.v3 errors, which give only a line.
func yamlKeysByLine(data []byte) map[int]string {
	var doc yaml.Node
	if yaml.Unmarshal(data, &doc) != nil || len(doc.Content) == 0 || doc.Content[0].Kind != yaml.MappingNode {
		return nil
	}
	m := doc.Content[0]
	keys := make(map[int]string, len(m.Content)/2)
	for i := 0; i+1 < len(m.Content); i += 2 {
		keys[m.Content[i+1].Line] = m.Content[i].Value
		keys[m.Content[i].Line] = m.Content[i].Value
	}
	return keys
}

// Validate checks every field and returns all the problems found, each
// naming its config key and flag.
func (s Server) Validate() error {
	var errs []error
	bad := func(key, format string, args ...any) {
		errs = append(errs, fmt.Errorf("%s (--%s): %s", key, strings.ReplaceAll(key, "_", "-"), fmt.Sprintf(format, args...)))
	}
	if s.Bucket == "" {
		bad("bucket", "required")
	} else if _, err := ParseBucketURL(s.Bucket); err != nil {
		bad("bucket", "%v", err)
	}
	if err := validateObjectPath(s.ModelConfig); err != nil {
		bad("model_config", "%v", err)
	} else if strings.HasSuffix(s.ModelConfig, "/") {
		bad("model_config", "%q names a directory; it must name the config object", s.ModelConfig)
	}
	if err := validateHostPort(s.HTTP); err != nil {
		bad("http", "%v", err)
	}
	if s.PollInterval < MinPollInterval {
		bad("poll_interval", "%v is below the minimum of %v", s.PollInterval, MinPollInterval)
	}
	if s.CacheDir == "" {
		bad("cache_dir", "must not be empty")
	}
	if s.MaxModelBytes <= 0 {
		bad("max_model_bytes", "%d must be positive", s.MaxModelBytes)
	}
	if s.MaxBodyBytes <= 0 {
		bad("max_body_bytes", "%d must be positive", s.MaxBodyBytes)
	}
	if s.DrainTimeout < 0 {
		bad("drain_timeout", "%v must not be negative", s.DrainTimeout)
	}
	if s.ModelQueueSize <= 0 {
		bad("model_queue_size", "%d must be positive", s.ModelQueueSize)
	}
	if s.IntraOpThreads <= 0 {
		bad("intra_op_threads", "%d must be positive", s.IntraOpThreads)
	}
	var level slog.Level
	if err := level.UnmarshalText([]byte(s.LogLevel)); err != nil {
		bad("log_level", "%q is not debug, info, warn or error", s.LogLevel)
	}
	if s.LogFormat != "text" && s.LogFormat != "json" {
		bad("log_format", "%q is not text or json", s.LogFormat)
	}
	return errors.Join(errs...)
}

// validateHostPort accepts host:port with a numeric port; the host may be empty.
func validateHostPort(addr string) error {
	_, port, err := net.SplitHostPort(addr)
	if err != nil {
		return fmt.Errorf("%q is not host:port: %w", addr, err)
	}
	if _, err := strconv.ParseUint(port, 10, 16); err != nil {
		return fmt.Errorf("%q: port %q is not a number from 0 to 65535", addr, port)
	}
	return nil
}

// NewLogger returns a logger writing to w in the configured format at the
// configured level (info if LogLevel is invalid).
func (s Server) NewLogger(w io.Writer) *slog.Logger {
	var level slog.Level
	if err := level.UnmarshalText([]byte(s.LogLevel)); err != nil {
		level = slog.LevelInfo
	}
	opts := &slog.HandlerOptions{Level: level}
	if s.LogFormat == "json" {
		return slog.New(slog.NewJSONHandler(w, opts))
	}
	return slog.New(slog.NewTextHandler(w, opts))
}
