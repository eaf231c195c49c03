package conf

import (
	"bytes"
	"errors"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func writeYAML(t *testing.T, content string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "grove.yaml")
	if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

func TestParseServerArgsAppliesDefaults(t *testing.T) {
	got, err := ParseServerArgs([]string{"--bucket", "gs://models"})
	if err != nil {
		t.Fatal(err)
	}
	want := DefaultServer()
	want.Bucket = "gs://models"
	if got != want {
		t.Errorf("got %+v\nwant %+v", got, want)
	}
	if want.ModelConfig != "model_config.json" || want.HTTP != "127.0.0.1:8080" || want.PollInterval != 30*time.Second ||
		want.MaxModelBytes != 2<<30 || want.MaxBodyBytes != 64<<20 || want.DrainTimeout != 30*time.Second ||
		want.ModelQueueSize != 1024 || want.IntraOpThreads != 1 || want.LogLevel != "info" || want.LogFormat != "text" ||
		!strings.HasSuffix(want.CacheDir, "grove") && want.CacheDir != "/tmp/grove-cache" {
		t.Errorf("unexpected defaults %+v", want)
	}
}

func TestParseServerArgsFlagsOverrideFileOverridesDefaults(t *testing.T) {
	file := writeYAML(t, `
bucket: gs://from-file/prefix
http: 0.0.0.0:9000
poll_interval: 10s
max_model_bytes: 1000
log_format: json
`)
	got, err := ParseServerArgs([]string{"--config", file, "--http", ":7000", "--poll-interval=2s", "--model-queue-size", "7"})
	if err != nil {
		t.Fatal(err)
	}
	want := DefaultServer()
	want.Bucket = "gs://from-file/prefix" // file
	want.HTTP = ":7000"                   // flag over file
	want.PollInterval = 2 * time.Second   // flag over file
	want.MaxModelBytes = 1000             // file
	want.LogFormat = "json"               // file
	want.ModelQueueSize = 7               // flag over default
	if got != want {
		t.Errorf("got %+v\nwant %+v", got, want)
	}
}

func TestParseServerArgsFlagEqualToDefaultStillOverridesFile(t *testing.T) {
	file := writeYAML(t, "bucket: gs://b\nlog_level: debug\n")
	got, err := ParseServerArgs([]string{"--config", file, "--log-level", "info"})
	if err != nil {
		t.Fatal(err)
	}
	if got.LogLevel != "info" {
		t.Errorf("log level %q, want the flag's %q", got.LogLevel, "info")
	}
}

func TestParseServerArgsSetsEveryFieldByFlag(t *testing.T) {
	got, err := ParseServerArgs([]string{
		"--bucket", "file:///srv/models", "--model-config", "cfg/models.json", "--http", "localhost:1",
		"--poll-interval", "1s", "--cache-dir", "/var/cache/g", "--max-model-bytes", "5", "--max-body-bytes", "6",
		"--drain-timeout", "0s", "--model-queue-size", "8", "--intra-op-threads", "4", "--log-level", "warn", "--log-format", "json",
	})
	if err != nil {
		t.Fatal(err)
	}
	want := Server{
		Bucket: "file:///srv/models", ModelConfig: "cfg/models.json", HTTP: "localhost:1", PollInterval: time.Second,
		CacheDir: "/var/cache/g", MaxModelBytes: 5, MaxBodyBytes: 6, DrainTimeout: 0, ModelQueueSize: 8,
		IntraOpThreads: 4, LogLevel: "warn", LogFormat: "json",
	}
	if got != want {
		t.Errorf("got %+v\nwant %+v", got, want)
	}
}

func TestParseServerArgsSetsEveryFieldByYAML(t *testing.T) {
	file := writeYAML(t, `
bucket: file://./models
model_config: cfg/models.json
http: "[::1]:8081"
poll_interval: 1m
cache_dir: /var/cache/g
max_model_bytes: 5
max_body_bytes: 6
drain_timeout: 1.5s
model_queue_size: 8
intra_op_threads: 4
log_level: error
log_format: json
`)
	got, err := ParseServerArgs([]string{"--config", file})
	if err != nil {
		t.Fatal(err)
	}
	want := Server{
		Bucket: "file://./models", ModelConfig: "cfg/models.json", HTTP: "[::1]:8081", PollInterval: time.Minute,
		CacheDir: "/var/cache/g", MaxModelBytes: 5, MaxBodyBytes: 6, DrainTimeout: 1500 * time.Millisecond,
		ModelQueueSize: 8, IntraOpThreads: 4, LogLevel: "error", LogFormat: "json",
	}
	if got != want {
		t.Errorf("got %+v\nwant %+v", got, want)
	}
}

func TestParseServerArgsRejectsUnknownYAMLKey(t *testing.T) {
	file := writeYAML(t, "bucket: gs://b\npoll_intervall: 5s\n")
	_, err := ParseServerArgs([]string{"--config", file})
	if err == nil || !strings.Contains(err.Error(), `line 2: unknown key "poll_intervall"`) {
		t.Errorf("got %v, want the unknown key named", err)
	}
}

func TestParseServerArgsFileErrors(t *testing.T) {
	for _, tc := range []struct{ name, yaml, want string }{
		{"integer duration", "bucket: gs://b\npoll_interval: 30\n", "poll_interval"},
		{"duplicate key", "bucket: gs://b\nbucket: gs://c\n", `"bucket" already defined`},
		{"not a mapping", "- a\n", "cannot unmarshal"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := ParseServerArgs([]string{"--config", writeYAML(t, tc.yaml)})
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("got %v, want an error containing %q", err, tc.want)
			}
		})
	}
	_, err := ParseServerArgs([]string{"--config", filepath.Join(t.TempDir(), "missing.yaml")})
	if !errors.Is(err, os.ErrNotExist) {
		t.Errorf("missing file: got %v, want os.ErrNotExist", err)
	}
}

func TestParseServerArgsEmptyFileSetsNothing(t *testing.T) {
	got, err := ParseServerArgs([]string{"--config", writeYAML(t, ""), "--bucket", "gs://b"})
	if err != nil {
		t.Fatal(err)
	}
	if got.PollInterval != DefaultServer().PollInterval {
		t.Errorf("poll interval %v, want the default", got.PollInterval)
	}
}

func TestParseServerArgsFlagErrors(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--bucket", "gs://b", "--poll-interval", "soon"}, "-poll-interval"},
		{[]string{"--bucket", "gs://b", "--nope"}, "flag provided but not defined: -nope"},
		{[]string{"--bucket", "gs://b", "extra"}, `unexpected argument "extra"`},
	} {
		_, err := ParseServerArgs(tc.args)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%q: got %v, want an error containing %q", tc.args, err, tc.want)
		}
	}
	if _, err := ParseServerArgs([]string{"-h"}); !errors.Is(err, flag.ErrHelp) {
		t.Errorf("-h: got %v, want flag.ErrHelp", err)
	}
}

func TestServerValidateNamesKeyAndFlag(t *testing.T) {
	valid := DefaultServer()
	valid.Bucket = "gs://b"
	if err := valid.Validate(); err != nil {
		t.Fatalf("valid config: %v", err)
	}
	for _, tc := range []struct {
		name   string
		modify func(*Server)
		want   string
	}{
		{"bucket required", func(s *Server) { s.Bucket = "" }, "bucket (--bucket): required"},
		{"bucket scheme", func(s *Server) { s.Bucket = "s3://b" }, `bucket (--bucket): invalid bucket URL "s3://b": unsupported scheme "s3"`},
		{"bucket no scheme", func(s *Server) { s.Bucket = "/srv/models" }, "bucket (--bucket): invalid bucket URL \"/srv/models\": no scheme"},
		{"bucket file host", func(s *Server) { s.Bucket = "file://models" }, "bucket (--bucket):"},
		{"model config empty", func(s *Server) { s.ModelConfig = "" }, "model_config (--model-config): must not be empty"},
		{"model config absolute", func(s *Server) { s.ModelConfig = "/c.json" }, "model_config (--model-config):"},
		{"model config directory", func(s *Server) { s.ModelConfig = "cfg/" }, "model_config (--model-config): \"cfg/\" names a directory"},
		{"http without port", func(s *Server) { s.HTTP = "localhost" }, "http (--http): \"localhost\" is not host:port"},
		{"http bad port", func(s *Server) { s.HTTP = "localhost:http" }, "http (--http): \"localhost:http\": port \"http\" is not a number"},
		{"poll interval", func(s *Server) { s.PollInterval = 500 * time.Millisecond }, "poll_interval (--poll-interval): 500ms is below the minimum of 1s"},
		{"cache dir", func(s *Server) { s.CacheDir = "" }, "cache_dir (--cache-dir): must not be empty"},
		{"max model bytes", func(s *Server) { s.MaxModelBytes = 0 }, "max_model_bytes (--max-model-bytes): 0 must be positive"},
		{"max body bytes", func(s *Server) { s.MaxBodyBytes = -1 }, "max_body_bytes (--max-body-bytes): -1 must be positive"},
		{"drain timeout", func(s *Server) { s.DrainTimeout = -time.Second }, "drain_timeout (--drain-timeout): -1s must not be negative"},
		{"queue size", func(s *Server) { s.ModelQueueSize = 0 }, "model_queue_size (--model-queue-size): 0 must be positive"},
		{"threads", func(s *Server) { s.IntraOpThreads = 0 }, "intra_op_threads (--intra-op-threads): 0 must be positive"},
		{"log level", func(s *Server) { s.LogLevel = "loud" }, `log_level (--log-level): "loud" is not debug, info, warn or error`},
		{"log format", func(s *Server) { s.LogFormat = "xml" }, `log_format (--log-format): "xml" is not text or json`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := valid
			tc.modify(&s)
			err := s.Validate()
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("got %v, want an error containing %q", err, tc.want)
			}
		})
	}
}

func TestServerValidateReportsEveryProblem(t *testing.T) {
	s := DefaultServer()
	s.PollInterval = 0
	s.LogFormat = "xml"
	err := s.Validate()
	for _, key := range []string{"bucket", "poll_interval", "log_format"} {
		if err == nil || !strings.Contains(err.Error(), key+" (--") {
			t.Errorf("error %v does not mention %s", err, key)
		}
	}
}

func TestServerAcceptsBucketURLForms(t *testing.T) {
	for _, u := range []string{"file:///srv/models", "file://./rel/dir", "gs://bucket", "gs://bucket/prefix", "gs://bucket/a/b/"} {
		s := DefaultServer()
		s.Bucket = u
		if err := s.Validate(); err != nil {
			t.Errorf("%s: %v", u, err)
		}
	}
}

func TestServerNewLoggerUsesLevelAndFormat(t *testing.T) {
	var buf bytes.Buffer
	s := DefaultServer()
	s.LogLevel, s.LogFormat = "warn", "json"
	log := s.NewLogger(&buf)
	log.Info("hidden")
	log.Warn("shown", "k", 1)
	if got := buf.String(); strings.Contains(got, "hidden") || !strings.Contains(got, `"msg":"shown"`) {
		t.Errorf("got %q", got)
	}
}

func TestPrintServerUsageListsFlags(t *testing.T) {
	var buf bytes.Buffer
	PrintServerUsage(&buf)
	for _, f := range []string{"-config", "-bucket", "-model-config", "-http", "-poll-interval", "-cache-dir", "-max-model-bytes",
		"-max-body-bytes", "-drain-timeout", "-model-queue-size", "-intra-op-threads", "-log-level", "-log-format"} {
		if !strings.Contains(buf.String(), "  "+f+" ") {
			t.Errorf("usage does not list %s:\n%s", f, buf.String())
		}
	}
}
