package conf

import (
	"bytes"
	"errors"
	"flag"
	"log/slog"
	"math"
	"os"
	"path/filepath"
	"reflect"
	"slices"
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
	if !reflect.DeepEqual(got, want) {
		t.Errorf("got %+v\nwant %+v", got, want)
	}
	if want.AdminGRPC != "" || want.GRPCMaxConnectionIdle != 2*time.Minute || want.GRPCKeepaliveTime != time.Minute ||
		want.GRPCKeepaliveTimeout != 20*time.Second {
		t.Errorf("unexpected gRPC connection defaults %+v", want)
	}
	if conns := DefaultConnectionLimits(fdLimit()); want.GRPCMaxConnections != conns.Public || want.AdminGRPCMaxConnections != conns.Admin {
		t.Errorf("defaults grpc_max_connections %d, admin_grpc_max_connections %d; want %+v for this process's %d descriptors",
			want.GRPCMaxConnections, want.AdminGRPCMaxConnections, conns, fdLimit())
	}
	if want.ModelConfig != "model_config.json" || want.HTTP != "127.0.0.1:8080" || want.PollInterval != 30*time.Second ||
		want.MaxModelBytes != 2<<30 || want.MaxBodyBytes != 64<<20 || want.DrainTimeout != 30*time.Second || want.KeepPreviousFor != 0 || want.MaxTimeout != 10*time.Minute ||
		want.Auth.MaxInFlightPerIdentity != 256 ||
		want.ModelQueueSize != 1024 || want.IntraOpThreads != 1 || want.LogLevel != LogLevel(slog.LevelInfo) || want.LogFormat != LogFormatText ||
		!strings.HasSuffix(want.CacheDir, "grove") && want.CacheDir != "/tmp/grove-cache" {
		t.Errorf("unexpected defaults %+v", want)
	}
	wantKafka := Kafka{
		Topic: "grove.predictions", Encoding: EncodingProto, BufferRecords: 100000, BufferBytes: 64 << 20,
		EmbeddedAddr: "127.0.0.1:9092", EmbeddedPartitions: 4, ClientID: "grove", Acks: AcksAll, Compression: CompressionSnappy, Linger: 5 * time.Millisecond,
	}
	if !reflect.DeepEqual(want.Kafka, wantKafka) || want.Kafka.Enabled() {
		t.Errorf("kafka defaults %+v, want %+v (off)", want.Kafka, wantKafka)
	}
	wantLog := PredictionLog{DefaultLevel: PredictionLogNone, DefaultSampleRate: 1, DefaultKeyFeaturesSeparator: ".", KeyBy: KeyByKeyFeatures}
	if !reflect.DeepEqual(want.PredictionLog, wantLog) {
		t.Errorf("prediction_log defaults %+v, want %+v", want.PredictionLog, wantLog)
	}
	if want.Outcomes.Topic != "grove.outcomes" {
		t.Errorf("outcomes.topic default %q, want grove.outcomes", want.Outcomes.Topic)
	}
}

func TestParseServerArgsNestedKeysOverlayDefaultsAndFlagsOverrideThem(t *testing.T) {
	file := writeYAML(t, `
bucket: gs://b
kafka:
  brokers: [k1:9092]
  topic: from-file
  linger: 1s
  sasl:
    mechanism: PLAIN
    username: u
prediction_log:
  default_level: FULL
  default_key_features: [a, b]
`)
	got, err := ParseServerArgs([]string{"--config", file, "--kafka-topic", "from-flag", "--prediction-log-key-features", ""})
	if err != nil {
		t.Fatal(err)
	}
	want := DefaultServer()
	want.Bucket = "gs://b"
	want.Kafka.Brokers = []string{"k1:9092"}                         // file
	want.Kafka.Topic = "from-flag"                                   // flag over file
	want.Kafka.Linger = time.Second                                  // file
	want.Kafka.SASL = KafkaSASL{Mechanism: SASLPlain, Username: "u"} // file, nested twice
	want.PredictionLog.DefaultLevel = PredictionLogFull              // file
	want.PredictionLog.DefaultKeyFeatures = nil                      // an empty flag clears the file's list
	if !reflect.DeepEqual(got, want) {
		t.Errorf("got %+v\nwant %+v", got, want)
	}
}

func TestParseServerArgsEmbeddedBrokerByFlag(t *testing.T) {
	got, err := ParseServerArgs([]string{"--bucket", "gs://b", "--kafka-embedded", "--kafka-embedded-addr", "127.0.0.1:0", "--prediction-log-level", "FULL"})
	if err != nil {
		t.Fatal(err)
	}
	if !got.Kafka.Embedded || got.Kafka.EmbeddedAddr != "127.0.0.1:0" || got.Kafka.EmbeddedPartitions != 4 || !got.Kafka.Enabled() || got.PredictionLog.DefaultLevel != PredictionLogFull {
		t.Errorf("got %+v", got.Kafka)
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
	got, err := ParseServerArgs([]string{"--config", file, "--http", ":7000", "--insecure-no-auth", "--poll-interval=2s", "--model-queue-size", "7"})
	if err != nil {
		t.Fatal(err)
	}
	want := DefaultServer()
	want.Bucket = "gs://from-file/prefix" // file
	want.HTTP = ":7000"                   // flag over file
	want.InsecureNoAuth = true            // flag
	want.PollInterval = 2 * time.Second   // flag over file
	want.MaxModelBytes = 1000             // file
	want.LogFormat = LogFormatJSON        // file
	want.ModelQueueSize = 7               // flag over default
	if !reflect.DeepEqual(got, want) {
		t.Errorf("got %+v\nwant %+v", got, want)
	}
}

func TestParseServerArgsFlagEqualToDefaultStillOverridesFile(t *testing.T) {
	file := writeYAML(t, "bucket: gs://b\nlog_level: debug\n")
	got, err := ParseServerArgs([]string{"--config", file, "--log-level", "info"})
	if err != nil {
		t.Fatal(err)
	}
	if got.LogLevel != LogLevel(slog.LevelInfo) {
		t.Errorf("log level %v, want the flag's info", got.LogLevel)
	}
}

func TestParseServerArgsSetsEveryFieldByFlag(t *testing.T) {
	got, err := ParseServerArgs([]string{
		"--bucket", "file:///srv/models", "--s3-endpoint", "http://127.0.0.1:9000", "--model-config", "cfg/models.json", "--http", "localhost:1", "--grpc", "off", "--pprof", "--ba-accept-unquoted-numbers", "--onnxruntime-lib", "/opt/ort.so", "--max-batch-rows", "7",
		"--poll-interval", "1s", "--warmup-timeout", "45s", "--cache-dir", "/var/cache/g", "--max-model-bytes", "5", "--max-body-bytes", "6",
		"--drain-timeout", "0s", "--max-timeout", "90s", "--auth-max-inflight-per-identity", "32", "--keep-previous-for", "10m", "--model-queue-size", "8", "--shadow-micro-batch-rows", "16", "--shadow-workers", "2", "--shadow-queue", "0", "--shadow-timeout", "250ms", "--shadow-compare-tolerance", "0.05", "--shadow-compare-window", "500", "--intra-op-threads", "4", "--log-level", "warn", "--log-format", "json",
		"--kafka-brokers", " k1:9092, k2:9093 ,", "--kafka-topic", "t.x", "--kafka-encoding", "json", "--kafka-buffer-records", "10",
		"--kafka-buffer-bytes", "2048", "--kafka-embedded=false", "--kafka-embedded-addr", "localhost:0", "--kafka-embedded-partitions", "16", "--kafka-client-id", "g1",
		"--kafka-acks", "leader", "--kafka-compression", "zstd", "--kafka-linger", "0s",
		"--prediction-log-level", "SAMPLE", "--prediction-log-sample-rate", "0.25", "--prediction-log-key-features", "user,campaign",
		"--prediction-log-key-features-separator", "|", "--prediction-log-key-by", "request_id", "--outcomes-topic", "o.x",
		"--evaluations-topic", "e.x", "--evaluate", "--evaluate-group", "g.x", "--evaluate-commit-interval", "2s", "--evaluate-state-dir", "/var/lib/ge",
		"--auth-tokens-file", "/etc/grove/tokens.yaml",
		"--admin-http", "127.0.0.1:2", "--insecure-no-auth", "--http-engine", "h1", "--http-read-header-timeout", "3s", "--http-idle-timeout", "4s",
		"--http-max-header-bytes", "4096", "--http-read-timeout", "5s", "--http-write-timeout", "6s", "--http-max-connections", "11", "--admin-http-max-connections", "12", "--grpc-max-concurrent-streams", "9",
		"--grpc-keepalive-min-time", "7s", "--admin-grpc", "127.0.0.1:3", "--grpc-max-connection-idle", "8s", "--grpc-keepalive-time", "9s",
		"--grpc-keepalive-timeout", "10s", "--grpc-max-connections", "13", "--admin-grpc-max-connections", "14", "--tls-cert", "/c.pem", "--tls-key", "/k.pem", "--tls-client-ca", "/ca.pem",
		"--tls-client-auth", "require", "--tls-reload-interval", "2s",
		"--memory-budget-bytes", "8589934592", "--cluster-etcd-endpoints", "e1:2379,e2:2379", "--cluster-etcd-prefix", "/g2/",
		"--cluster-etcd-tls", "--cluster-etcd-ca-file", "/eca.pem", "--cluster-etcd-cert-file", "/ec.pem", "--cluster-etcd-key-file", "/ek.pem",
		"--cluster-node-name", "node-1", "--cluster-advertise", "10.0.0.1:7946", "--cluster-lease-ttl", "3s", "--cluster-memory-factor", "1.5",
	})
	if err != nil {
		t.Fatal(err)
	}
	want := Server{
		Bucket: "file:///srv/models", S3Endpoint: "http://127.0.0.1:9000", ModelConfig: "cfg/models.json", HTTP: "localhost:1", GRPC: "off", Pprof: true, BAAcceptUnquotedNumbers: true, ONNXRuntimeLib: "/opt/ort.so", MaxBatchRows: 7, PollInterval: time.Second, WarmUpTimeout: 45 * time.Second,
		CacheDir: "/var/cache/g", MaxModelBytes: 5, MaxBodyBytes: 6, DrainTimeout: 0, MaxTimeout: 90 * time.Second, KeepPreviousFor: 10 * time.Minute, ModelQueueSize: 8, ShadowMicroBatchRows: 16,
		ShadowWorkers: 2, ShadowQueue: 0, ShadowTimeout: 250 * time.Millisecond, ShadowCompareTolerance: 0.05, ShadowCompareWindow: 500, IntraOpThreads: 4, LogLevel: LogLevel(slog.LevelWarn), LogFormat: LogFormatJSON,
		AdminHTTP: "127.0.0.1:2", InsecureNoAuth: true, HTTPEngine: HTTPEngineH1, HTTPReadHeaderTimeout: 3 * time.Second, HTTPIdleTimeout: 4 * time.Second,
		HTTPMaxHeaderBytes: 4096, HTTPReadTimeout: 5 * time.Second, HTTPWriteTimeout: 6 * time.Second, HTTPMaxConnections: 11, AdminHTTPMaxConnections: 12, GRPCMaxConcurrentStreams: 9,
		GRPCKeepaliveMinTime: 7 * time.Second, AdminGRPC: "127.0.0.1:3", GRPCMaxConnectionIdle: 8 * time.Second, GRPCKeepaliveTime: 9 * time.Second,
		GRPCKeepaliveTimeout: 10 * time.Second, GRPCMaxConnections: 13, AdminGRPCMaxConnections: 14,
		TLS: TLS{CertFile: "/c.pem", KeyFile: "/k.pem", ClientCAFile: "/ca.pem", ClientAuth: ClientAuthRequire, ReloadInterval: 2 * time.Second},
		Kafka: Kafka{
			Brokers: []string{"k1:9092", "k2:9093"}, Topic: "t.x", Encoding: EncodingJSON, BufferRecords: 10, BufferBytes: 2048,
			EmbeddedAddr: "localhost:0", EmbeddedPartitions: 16, ClientID: "g1", Acks: AcksLeader, Compression: CompressionZstd, Linger: 0,
		},
		PredictionLog: PredictionLog{
			DefaultLevel: PredictionLogSample, DefaultSampleRate: 0.25, DefaultKeyFeatures: []string{"user", "campaign"},
			DefaultKeyFeaturesSeparator: "|", KeyBy: KeyByRequestID,
		},
		Outcomes:          Outcomes{Topic: "o.x", EvaluationsTopic: "e.x", Evaluate: true, Group: "g.x", CommitInterval: 2 * time.Second, StateDir: "/var/lib/ge"},
		Auth:              Auth{TokensFile: "/etc/grove/tokens.yaml", JWT: AuthJWT{RolesClaim: "roles"}, MaxInFlightPerIdentity: 32},
		MemoryBudgetBytes: 8 << 30,
		Cluster: Cluster{EtcdEndpoints: []string{"e1:2379", "e2:2379"}, EtcdPrefix: "/g2/", EtcdTLS: true, EtcdCAFile: "/eca.pem",
			EtcdCertFile: "/ec.pem", EtcdKeyFile: "/ek.pem", NodeName: "node-1", Advertise: "10.0.0.1:7946", LeaseTTL: 3 * time.Second, MemoryFactor: 1.5},
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("got %+v\nwant %+v", got, want)
	}
}

func TestParseServerArgsSetsEveryFieldByYAML(t *testing.T) {
	file := writeYAML(t, `
bucket: file://./models
s3_endpoint: https://minio.example:9000/
model_config: cfg/models.json
http: "[::1]:8081"
poll_interval: 1m
warmup_timeout: 5m
cache_dir: /var/cache/g
max_model_bytes: 5
max_body_bytes: 6
grpc: "[::1]:9091"
drain_timeout: 1.5s
max_timeout: 2m
keep_previous_for: 90s
model_queue_size: 8
shadow_micro_batch_rows: 32
shadow_workers: 3
shadow_queue: 16
shadow_timeout: 2s
shadow_compare_tolerance: 0.001
shadow_compare_window: 2000
intra_op_threads: 4
ba_accept_unquoted_numbers: true
log_level: error
log_format: json
kafka:
  brokers: ["k1:9092", "k2:9093"]
  topic: t.x
  encoding: json
  buffer_records: 10
  buffer_bytes: 2048
  embedded: false
  embedded_addr: 127.0.0.1:0
  embedded_partitions: 1
  client_id: g1
  acks: none
  compression: lz4
  linger: 20ms
  tls: {enabled: true, ca_file: /ca.pem, cert_file: /c.pem, key_file: /k.pem, insecure_skip_verify: true}
  sasl: {mechanism: SCRAM-SHA-512, username: u, password: p}
admin_http: "[::1]:8082"
insecure_no_auth: true
http_engine: h1
http_read_header_timeout: 3s
http_idle_timeout: 4s
http_max_header_bytes: 4096
http_read_timeout: 5s
http_write_timeout: 6s
http_max_connections: 11
admin_http_max_connections: 12
grpc_max_concurrent_streams: 9
grpc_keepalive_min_time: 7s
admin_grpc: "[::1]:8083"
grpc_max_connection_idle: 8s
grpc_keepalive_time: 9s
grpc_keepalive_timeout: 10s
grpc_max_connections: 13
admin_grpc_max_connections: 14
tls: {cert_file: /c.pem, key_file: /k.pem, client_ca_file: /ca.pem, client_auth: request, reload_interval: 2s}
prediction_log:
  default_level: FULL
  default_sample_rate: 0.5
  default_key_features: [user]
  default_key_features_separator: "-"
  key_by: request_id
outcomes:
  topic: clicks.v1
  evaluations_topic: quality.v1
  evaluate: true
  group: eval-a
  commit_interval: 500ms
  state_dir: /var/lib/grove-eval
auth:
  tokens_file: /etc/grove/tokens.yaml
  client_roles: {bidder.example: [infer], release-bot: [read, manage]}
  jwt: {jwks_file: /etc/grove/jwks.json, issuer: "https://idp.example", audience: grove, roles_claim: groups}
  limits:
    - {name: bidder.example, rps: 100, burst: 200}
    - {role: read, rps: 5, burst: 10}
    - {name: "jwt:alice", rps: 1, burst: 1}
  max_inflight_per_identity: 64
memory_budget_bytes: 4294967296
cluster:
  etcd_endpoints: ["e1:2379"]
  etcd_prefix: /g3/
  etcd_tls: true
  etcd_ca_file: /eca.pem
  etcd_cert_file: /ec.pem
  etcd_key_file: /ek.pem
  node_name: n.2
  advertise: "[::1]:7946"
  lease_ttl: 10s
  memory_factor: 3
`)
	got, err := ParseServerArgs([]string{"--config", file})
	if err != nil {
		t.Fatal(err)
	}
	want := Server{
		Bucket: "file://./models", S3Endpoint: "https://minio.example:9000/", ModelConfig: "cfg/models.json", HTTP: "[::1]:8081", GRPC: "[::1]:9091", PollInterval: time.Minute, WarmUpTimeout: 5 * time.Minute,
		CacheDir: "/var/cache/g", MaxModelBytes: 5, MaxBodyBytes: 6, DrainTimeout: 1500 * time.Millisecond, MaxTimeout: 2 * time.Minute, KeepPreviousFor: 90 * time.Second,
		ModelQueueSize: 8, ShadowMicroBatchRows: 32, ShadowWorkers: 3, ShadowQueue: 16, ShadowTimeout: 2 * time.Second, ShadowCompareTolerance: 0.001, ShadowCompareWindow: 2000, MaxBatchRows: 64, IntraOpThreads: 4, BAAcceptUnquotedNumbers: true, LogLevel: LogLevel(slog.LevelError), LogFormat: LogFormatJSON,
		AdminHTTP: "[::1]:8082", InsecureNoAuth: true, HTTPEngine: HTTPEngineH1, HTTPReadHeaderTimeout: 3 * time.Second, HTTPIdleTimeout: 4 * time.Second,
		HTTPMaxHeaderBytes: 4096, HTTPReadTimeout: 5 * time.Second, HTTPWriteTimeout: 6 * time.Second, HTTPMaxConnections: 11, AdminHTTPMaxConnections: 12, GRPCMaxConcurrentStreams: 9,
		GRPCKeepaliveMinTime: 7 * time.Second, AdminGRPC: "[::1]:8083", GRPCMaxConnectionIdle: 8 * time.Second, GRPCKeepaliveTime: 9 * time.Second,
		GRPCKeepaliveTimeout: 10 * time.Second, GRPCMaxConnections: 13, AdminGRPCMaxConnections: 14,
		TLS: TLS{CertFile: "/c.pem", KeyFile: "/k.pem", ClientCAFile: "/ca.pem", ClientAuth: ClientAuthRequest, ReloadInterval: 2 * time.Second},
		Kafka: Kafka{
			Brokers: []string{"k1:9092", "k2:9093"}, Topic: "t.x", Encoding: EncodingJSON, BufferRecords: 10, BufferBytes: 2048,
			EmbeddedAddr: "127.0.0.1:0", EmbeddedPartitions: 1, ClientID: "g1", Acks: AcksNone, Compression: CompressionLz4, Linger: 20 * time.Millisecond,
			TLS:  KafkaTLS{Enabled: true, CAFile: "/ca.pem", CertFile: "/c.pem", KeyFile: "/k.pem", InsecureSkipVerify: true},
			SASL: KafkaSASL{Mechanism: SASLScramSHA512, Username: "u", Password: "p"},
		},
		PredictionLog: PredictionLog{
			DefaultLevel: PredictionLogFull, DefaultSampleRate: 0.5, DefaultKeyFeatures: []string{"user"}, DefaultKeyFeaturesSeparator: "-",
			KeyBy: KeyByRequestID,
		},
		Outcomes: Outcomes{Topic: "clicks.v1", EvaluationsTopic: "quality.v1", Evaluate: true, Group: "eval-a", CommitInterval: 500 * time.Millisecond, StateDir: "/var/lib/grove-eval"},
		Auth: Auth{
			TokensFile:  "/etc/grove/tokens.yaml",
			ClientRoles: map[string][]string{"bidder.example": {"infer"}, "release-bot": {"read", "manage"}},
			JWT:         AuthJWT{JWKSFile: "/etc/grove/jwks.json", Issuer: "https://idp.example", Audience: "grove", RolesClaim: "groups"},
			Limits: []AuthLimit{{Name: "bidder.example", RPS: 100, Burst: 200}, {Role: "read", RPS: 5, Burst: 10},
				{Name: "jwt:alice", RPS: 1, Burst: 1}},
			MaxInFlightPerIdentity: 64,
		},
		MemoryBudgetBytes: 4 << 30,
		Cluster: Cluster{EtcdEndpoints: []string{"e1:2379"}, EtcdPrefix: "/g3/", EtcdTLS: true, EtcdCAFile: "/eca.pem",
			EtcdCertFile: "/ec.pem", EtcdKeyFile: "/ek.pem", NodeName: "n.2", Advertise: "[::1]:7946", LeaseTTL: 10 * time.Second, MemoryFactor: 3},
	}
	if !reflect.DeepEqual(got, want) {
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

func TestParseServerArgsRejectsUnknownNestedYAMLKey(t *testing.T) {
	file := writeYAML(t, "bucket: gs://b\nkafka:\n  topic: t\n  tls:\n    enable: true\n")
	_, err := ParseServerArgs([]string{"--config", file})
	if err == nil || !strings.Contains(err.Error(), `line 5: unknown key "enable"`) {
		t.Errorf("got %v, want the unknown nested key named", err)
	}
}

func TestParseServerArgsFileErrors(t *testing.T) {
	for _, tc := range []struct{ name, yaml, want string }{
		{"integer duration", "bucket: gs://b\npoll_interval: 30\n", "poll_interval"},
		{"nested integer duration", "bucket: gs://b\nkafka:\n  linger: 5\n", `line 3: kafka.linger: cannot unmarshal !!int`},
		{"nested duration hint", "bucket: gs://b\nkafka:\n  linger: 5\n", `(durations are strings such as "30s")`},
		{"brokers not a list", "bucket: gs://b\nkafka:\n  brokers: k1:9092\n", "line 3: kafka.brokers: cannot unmarshal"},
		{"kafka not a mapping", "bucket: gs://b\nkafka: yes\n", "line 2: kafka: cannot unmarshal"},
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

func TestParseServerArgsRefusesASecondYAMLDocument(t *testing.T) {
	// Keys after a "---" would be ignored: the server would run with
	// values other than the file's.
	file := writeYAML(t, "bucket: gs://b\n---\npoll_interval: 5s\n")
	_, err := ParseServerArgs([]string{"--config", file})
	if err == nil || !strings.Contains(err.Error(), "line 3: a second YAML document") {
		t.Errorf("got %v, want the second document refused with its line", err)
	}
	for _, ok := range []string{"---\nbucket: gs://b\n", "bucket: gs://b\n---\n", "bucket: gs://b\n...\n", "bucket: gs://b\n---\n# nothing\n---\n"} {
		got, err := ParseServerArgs([]string{"--config", writeYAML(t, ok)})
		if err != nil || got.Bucket != "gs://b" {
			t.Errorf("%q: got %q, %v; want one document read", ok, got.Bucket, err)
		}
	}
}

func TestParseServerArgsRefusesAFractionForAnIntegerKey(t *testing.T) {
	// yaml.v3 truncates a float into an integer field: 2.5 threads ran as 2.
	for _, tc := range []struct{ yaml, want string }{
		{"bucket: gs://b\nintra_op_threads: 2.5\n", "line 2: intra_op_threads: 2.5 is not a whole number"},
		{"bucket: gs://b\nkafka:\n  buffer_records: 100.25\n", "line 3: kafka.buffer_records: 100.25 is not a whole number"},
		{"bucket: gs://b\nauth:\n  limits:\n  - {role: infer, rps: 1.5, burst: 2.5}\n", "line 4: auth.limits[0].burst: 2.5 is not a whole number"},
		{"bucket: gs://b\nmax_model_bytes: -.inf\n", "line 2: max_model_bytes: -.inf is not a whole number"},
	} {
		_, err := ParseServerArgs([]string{"--config", writeYAML(t, tc.yaml)})
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%q: got %v, want an error containing %q", tc.yaml, err, tc.want)
		}
	}
	got, err := ParseServerArgs([]string{"--config", writeYAML(t, "bucket: gs://b\nmax_model_bytes: 4e9\nmodel_queue_size: 2048.0\ncluster:\n  memory_factor: 1.5\n")})
	if err != nil || got.MaxModelBytes != 4e9 || got.ModelQueueSize != 2048 {
		t.Errorf("whole numbers written as floats: got %d, %d, %v", got.MaxModelBytes, got.ModelQueueSize, err)
	}
}

func TestParseServerArgsRefusesAWholeNumberPastAnIntegerKeysRange(t *testing.T) {
	// yaml.v3 converts a whole float below -2^63 (or of 2^63) to int64
	// without an overflow check: -1e300 read as -9223372036854775808.
	for _, tc := range []struct{ yaml, want string }{
		{"bucket: gs://b\nmax_model_bytes: -1e300\n", "line 2: max_model_bytes: -1e300 is out of range"},
		{"bucket: gs://b\nmax_model_bytes: -1e19\n", "line 2: max_model_bytes: -1e19 is out of range"},
		{"bucket: gs://b\nmax_model_bytes: 9223372036854775808.0\n", "line 2: max_model_bytes: 9223372036854775808.0 is out of range"},
	} {
		_, err := ParseServerArgs([]string{"--config", writeYAML(t, tc.yaml)})
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%q: got %v, want an error containing %q", tc.yaml, err, tc.want)
		}
	}
	got, err := ParseServerArgs([]string{"--config", writeYAML(t, "bucket: gs://b\nmax_model_bytes: 9.2e18\n")})
	if err != nil || got.MaxModelBytes != 9.2e18 {
		t.Errorf("a whole number in range written as a float: got %d, %v", got.MaxModelBytes, err)
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
		{"bucket no scheme", func(s *Server) { s.Bucket = "/srv/models" }, "bucket (--bucket): invalid bucket URL \"/srv/models\": no scheme"},
		{"bucket no slashes", func(s *Server) { s.Bucket = "file:models" }, `bucket (--bucket): invalid bucket URL "file:models": want file://location, with two slashes`},
		{"bucket query", func(s *Server) { s.Bucket = "gs://b?x=1" }, `bucket (--bucket): invalid bucket URL "gs://b?x=1": a query is not allowed`},
		{"s3 endpoint without scheme", func(s *Server) { s.S3Endpoint = "127.0.0.1:9000" }, `s3_endpoint (--s3-endpoint): "127.0.0.1:9000" is not an http:// or https:// URL with a host`},
		{"s3 endpoint host only", func(s *Server) { s.S3Endpoint = "minio:9000" }, `s3_endpoint (--s3-endpoint): "minio:9000" is not an http:// or https:// URL with a host`},
		{"s3 endpoint scheme", func(s *Server) { s.S3Endpoint = "s3://minio" }, `s3_endpoint (--s3-endpoint): "s3://minio" is not an http:// or https:// URL`},
		{"s3 endpoint query", func(s *Server) { s.S3Endpoint = "http://minio?x=1" }, `s3_endpoint (--s3-endpoint): "http://minio?x=1": an endpoint has no user information, query or fragment`},
		{"s3 endpoint port", func(s *Server) { s.S3Endpoint = "http://minio:99999" }, `s3_endpoint (--s3-endpoint): "http://minio:99999": port "99999" is not a number`},
		{"model config empty", func(s *Server) { s.ModelConfig = "" }, "model_config (--model-config): must not be empty"},
		{"model config absolute", func(s *Server) { s.ModelConfig = "/c.json" }, "model_config (--model-config):"},
		{"model config directory", func(s *Server) { s.ModelConfig = "cfg/" }, "model_config (--model-config): \"cfg/\" names a directory"},
		{"http without port", func(s *Server) { s.HTTP = "localhost" }, "http (--http): \"localhost\" is not host:port"},
		{"http bad port", func(s *Server) { s.HTTP = "localhost:http" }, "http (--http): \"localhost:http\": port \"http\" is not a number"},
		{"poll interval", func(s *Server) { s.PollInterval = 500 * time.Millisecond }, "poll_interval (--poll-interval): 500ms is below the minimum of 1s"},
		{"cache dir", func(s *Server) { s.CacheDir = "" }, "cache_dir (--cache-dir): must not be empty"},
		{"client role unknown", func(s *Server) { s.Auth.ClientRoles = map[string][]string{"bot": {"root"}} }, `auth.client_roles.bot: unknown role "root" (roles: infer, read, manage, admin, feedback)`},
		{"client role none", func(s *Server) { s.Auth.ClientRoles = map[string][]string{"bot": nil} }, `auth.client_roles.bot: lists no role`},
		{"jwt without issuer", func(s *Server) { s.Auth.JWT.JWKSFile = "/j.json"; s.Auth.JWT.Audience = "g" }, "auth.jwt.issuer: required with auth.jwt.jwks_file"},
		{"jwt without audience", func(s *Server) { s.Auth.JWT.JWKSFile = "/j.json"; s.Auth.JWT.Issuer = "i" }, "auth.jwt.audience: required with auth.jwt.jwks_file"},
		{"jwt without jwks", func(s *Server) { s.Auth.JWT.Issuer = "i" }, "auth.jwt.jwks_file: required"},
		{"jwt roles claim", func(s *Server) { s.Auth.JWT.RolesClaim = "" }, "auth.jwt.roles_claim: must not be empty"},
		{"limit name and role", func(s *Server) {
			s.Auth.TokensFile = "/t"
			s.Auth.Limits = []AuthLimit{{Name: "a", Role: "read", RPS: 1, Burst: 1}}
		}, "auth.limits[0]: set name or role, not both"},
		{"limit role", func(s *Server) {
			s.Auth.TokensFile = "/t"
			s.Auth.Limits = []AuthLimit{{Role: "boss", RPS: 1, Burst: 1}}
		}, `auth.limits[0].role: unknown role "boss"`},
		{"limit rps", func(s *Server) { s.Auth.TokensFile = "/t"; s.Auth.Limits = []AuthLimit{{Name: "a", Burst: 1}} }, "auth.limits[0].rps: 0 must be a positive number"},
		{"limit burst", func(s *Server) { s.Auth.TokensFile = "/t"; s.Auth.Limits = []AuthLimit{{Name: "a", RPS: 1}} }, "auth.limits[0].burst: 0 must be at least 1"},
		{"limits without auth", func(s *Server) { s.Auth.Limits = []AuthLimit{{Name: "a", RPS: 1, Burst: 1}} }, "auth.limits: limit identities, which need authentication: set auth.tokens_file (--auth-tokens-file)"},
		{"max model bytes", func(s *Server) { s.MaxModelBytes = 0 }, "max_model_bytes (--max-model-bytes): 0 must be positive"},
		{"max body bytes", func(s *Server) { s.MaxBodyBytes = -1 }, "max_body_bytes (--max-body-bytes): -1 must be positive"},
		{"grpc address", func(s *Server) { s.GRPC = "9090" }, "grpc (--grpc): "},
		{"batch rows", func(s *Server) { s.MaxBatchRows = 0 }, "max_batch_rows (--max-batch-rows): 0 must be at least 1"},
		{"grpc on the http address", func(s *Server) { s.GRPC = s.HTTP }, "is also the HTTP address"},
		{"drain timeout", func(s *Server) { s.DrainTimeout = -time.Second }, "drain_timeout (--drain-timeout): -1s must not be negative"},
		{"max timeout", func(s *Server) { s.MaxTimeout = 0 }, "max_timeout (--max-timeout): 0s must be positive"},
		{"max in flight", func(s *Server) { s.Auth.TokensFile = "/t"; s.Auth.MaxInFlightPerIdentity = -1 },
			"auth.max_inflight_per_identity (--auth-max-inflight-per-identity): -1 must not be negative"},
		{"limit name", func(s *Server) {
			s.Auth.TokensFile = "/t"
			s.Auth.Limits = []AuthLimit{{Name: "jwt:", RPS: 1, Burst: 1}}
		},
			`auth.limits[0].name: "jwt:" names no identity`},
		{"keep previous for", func(s *Server) { s.KeepPreviousFor = -time.Minute }, "keep_previous_for (--keep-previous-for): -1m0s must not be negative (0 turns keeping off)"},
		{"queue size", func(s *Server) { s.ModelQueueSize = 0 }, "model_queue_size (--model-queue-size): 0 must be positive"},
		{"micro-batch rows", func(s *Server) { s.ShadowMicroBatchRows = -1 }, "shadow_micro_batch_rows (--shadow-micro-batch-rows): -1 must not be negative"},
		{"shadow workers", func(s *Server) { s.ShadowWorkers = 0 }, "shadow_workers (--shadow-workers): 0 must be between 1 and 64"},
		{"shadow queue", func(s *Server) { s.ShadowQueue = -1 }, "shadow_queue (--shadow-queue): -1 must not be negative"},
		{"compare tolerance zero", func(s *Server) { s.ShadowCompareTolerance = 0 }, "shadow_compare_tolerance (--shadow-compare-tolerance): 0 must be a positive number"},
		{"compare tolerance NaN", func(s *Server) { s.ShadowCompareTolerance = math.NaN() }, "shadow_compare_tolerance (--shadow-compare-tolerance): NaN must be a positive number"},
		{"compare tolerance infinite", func(s *Server) { s.ShadowCompareTolerance = math.Inf(1) }, "shadow_compare_tolerance (--shadow-compare-tolerance): +Inf must be a positive number"},
		{"compare window", func(s *Server) { s.ShadowCompareWindow = 0 }, "shadow_compare_window (--shadow-compare-window): 0 must be between 1 and 1000000"},
		{"shadow timeout", func(s *Server) { s.ShadowTimeout = 0 }, "shadow_timeout (--shadow-timeout): 0s must be positive"},
		{"warm-up timeout", func(s *Server) { s.WarmUpTimeout = 0 }, "warmup_timeout (--warmup-timeout): 0s must be positive"},
		{"negative warm-up timeout", func(s *Server) { s.WarmUpTimeout = -time.Second }, "warmup_timeout (--warmup-timeout): -1s must be positive"},
		{"threads", func(s *Server) { s.IntraOpThreads = 0 }, "intra_op_threads (--intra-op-threads): 0 must be positive"},
		{"embedded and brokers", func(s *Server) { s.Kafka.Embedded, s.Kafka.Brokers = true, []string{"k:1"} },
			"kafka.embedded (--kafka-embedded): the embedded broker and brokers are exclusive"},
		{"broker without port", func(s *Server) { s.Kafka.Brokers = []string{"k1"} }, `kafka.brokers (--kafka-brokers): "k1" is not host:port`},
		{"broker without host", func(s *Server) { s.Kafka.Brokers = []string{":9092"} }, `kafka.brokers (--kafka-brokers): ":9092" is not host:port`},
		{"broker bad port", func(s *Server) { s.Kafka.Brokers = []string{"k:kafka"} }, `kafka.brokers (--kafka-brokers): "k:kafka": port "kafka" is not a number`},
		{"topic empty", func(s *Server) { s.Kafka.Topic = "" }, "kafka.topic (--kafka-topic): must not be empty"},
		{"topic chars", func(s *Server) { s.Kafka.Topic = "a/b" }, `kafka.topic (--kafka-topic): "a/b" is not a Kafka topic name`},
		{"topic dot", func(s *Server) { s.Kafka.Topic = ".." }, `kafka.topic (--kafka-topic): ".." is not a Kafka topic name`},
		{"topic long", func(s *Server) { s.Kafka.Topic = strings.Repeat("t", 250) }, "kafka.topic (--kafka-topic):"},
		{"outcomes topic empty", func(s *Server) { s.Outcomes.Topic = "" }, "outcomes.topic (--outcomes-topic): must not be empty"},
		{"outcomes topic chars", func(s *Server) { s.Outcomes.Topic = "a b" }, `outcomes.topic (--outcomes-topic): "a b" is not a Kafka topic name`},
		{"outcomes topic is the prediction log's", func(s *Server) { s.Outcomes.Topic = s.Kafka.Topic },
			`outcomes.topic (--outcomes-topic): "grove.predictions" is also kafka.topic (--kafka-topic)`},
		{"evaluations topic is the outcomes'", func(s *Server) { s.Outcomes.EvaluationsTopic = s.Outcomes.Topic },
			`outcomes.evaluations_topic (--evaluations-topic): "grove.outcomes" is also kafka.topic or outcomes.topic`},
		{"evaluate group chars", func(s *Server) { s.Outcomes.Group = "a b" }, `outcomes.group (--evaluate-group): "a b-changelog" is not a Kafka topic name`},
		{"evaluate commit interval", func(s *Server) { s.Outcomes.CommitInterval = time.Millisecond }, "outcomes.commit_interval (--evaluate-commit-interval): 1ms must be from 10ms to 1m"},
		{"buffer records", func(s *Server) { s.Kafka.BufferRecords = 0 }, "kafka.buffer_records (--kafka-buffer-records): 0 must be positive"},
		{"buffer bytes", func(s *Server) { s.Kafka.BufferBytes = -1 }, "kafka.buffer_bytes (--kafka-buffer-bytes): -1 must be positive"},
		{"embedded addr", func(s *Server) { s.Kafka.Embedded, s.Kafka.EmbeddedAddr = true, "127.0.0.1" }, `kafka.embedded_addr (--kafka-embedded-addr): "127.0.0.1" is not host:port`},
		{"embedded addr port", func(s *Server) { s.Kafka.Embedded, s.Kafka.EmbeddedAddr = true, "127.0.0.1:99999" }, `kafka.embedded_addr (--kafka-embedded-addr): "127.0.0.1:99999": port`},
		{"embedded addr not loopback", func(s *Server) { s.Kafka.Embedded, s.Kafka.EmbeddedAddr = true, "0.0.0.0:9092" },
			`kafka.embedded_addr (--kafka-embedded-addr): "0.0.0.0:9092": the development broker listens only on a loopback address`},
		{"embedded partitions zero", func(s *Server) { s.Kafka.Embedded, s.Kafka.EmbeddedPartitions = true, 0 },
			"kafka.embedded_partitions (--kafka-embedded-partitions): 0 must be from 1 to 64"},
		{"embedded partitions too many", func(s *Server) { s.Kafka.Embedded, s.Kafka.EmbeddedPartitions = true, 65 },
			"kafka.embedded_partitions (--kafka-embedded-partitions): 65 must be from 1 to 64"},
		{"client id", func(s *Server) { s.Kafka.ClientID = "" }, "kafka.client_id (--kafka-client-id): must not be empty"},
		{"linger", func(s *Server) { s.Kafka.Linger = -time.Millisecond }, "kafka.linger (--kafka-linger): -1ms is not between 0s and 1m"},
		{"linger long", func(s *Server) { s.Kafka.Linger = 2 * time.Minute }, "kafka.linger (--kafka-linger): 2m0s is not between 0s and 1m"},
		{"tls off with files", func(s *Server) { s.Kafka.TLS.CAFile = "/ca.pem" }, "kafka.tls.enabled: is false but other kafka.tls keys are set"},
		{"tls cert without key", func(s *Server) { s.Kafka.TLS = KafkaTLS{Enabled: true, CertFile: "/c.pem"} }, "kafka.tls.cert_file: cert_file and key_file go together"},
		{"sasl user without mechanism", func(s *Server) { s.Kafka.SASL.Username = "u" }, "kafka.sasl.mechanism: is empty but a username or password is set"},
		{"sasl without user", func(s *Server) { s.Kafka.SASL.Mechanism = SASLPlain }, "kafka.sasl.username: required with mechanism PLAIN"},
		{"log level without kafka", func(s *Server) { s.PredictionLog.DefaultLevel = PredictionLogFull },
			"prediction_log.default_level (--prediction-log-level): FULL needs Kafka, which is off: set kafka.brokers (--kafka-brokers) or kafka.embedded (--kafka-embedded), or use NONE"},
		{"sample without kafka", func(s *Server) { s.PredictionLog.DefaultLevel = PredictionLogSample }, "SAMPLE needs Kafka, which is off"},
		{"sample rate high", func(s *Server) { s.PredictionLog.DefaultSampleRate = 1.5 }, "prediction_log.default_sample_rate (--prediction-log-sample-rate): 1.5 is not between 0 and 1"},
		{"sample rate NaN", func(s *Server) { s.PredictionLog.DefaultSampleRate = math.NaN() }, "prediction_log.default_sample_rate (--prediction-log-sample-rate): NaN is not between 0 and 1"},
		{"key feature empty", func(s *Server) { s.PredictionLog.DefaultKeyFeatures = []string{"a", ""} }, "prediction_log.default_key_features (--prediction-log-key-features): a feature name is empty"},
		{"admin http", func(s *Server) { s.AdminHTTP = "8081" }, `admin_http (--admin-http): "8081" is not host:port`},
		{"admin http on http", func(s *Server) { s.AdminHTTP = s.HTTP }, "admin_http (--admin-http): 127.0.0.1:8080 is also the HTTP or gRPC address"},
		{"http engine", func(s *Server) { s.HTTPEngine = "fasthttp" }, `http_engine (--http-engine): "fasthttp" is not a server Grove has: use auto, h1 or net/http`},
		{"read header timeout", func(s *Server) { s.HTTPReadHeaderTimeout = 0 }, "http_read_header_timeout (--http-read-header-timeout): 0s must be positive"},
		{"write timeout", func(s *Server) { s.HTTPWriteTimeout = -time.Second }, "http_write_timeout (--http-write-timeout): -1s must be positive"},
		{"max header bytes", func(s *Server) { s.HTTPMaxHeaderBytes = 10 }, "http_max_header_bytes (--http-max-header-bytes): 10 is below the minimum of 1024"},
		{"max streams", func(s *Server) { s.GRPCMaxConcurrentStreams = 0 }, "grpc_max_concurrent_streams (--grpc-max-concurrent-streams): 0 must be positive"},
		{"http max connections", func(s *Server) { s.HTTPMaxConnections = 0 }, "http_max_connections (--http-max-connections): 0 must be positive"},
		{"admin http max connections", func(s *Server) { s.AdminHTTPMaxConnections = -1 }, "admin_http_max_connections (--admin-http-max-connections): -1 must be positive"},
		{"admin grpc", func(s *Server) { s.AdminGRPC = "9091" }, `admin_grpc (--admin-grpc): "9091" is not host:port`},
		{"admin grpc on grpc", func(s *Server) { s.AdminGRPC = s.GRPC }, "admin_grpc (--admin-grpc): 127.0.0.1:9090 is also the HTTP, gRPC or admin HTTP address"},
		{"admin grpc on admin http", func(s *Server) { s.AdminHTTP, s.AdminGRPC = "127.0.0.1:8081", "127.0.0.1:8081" }, "admin_grpc (--admin-grpc): 127.0.0.1:8081 is also the HTTP, gRPC or admin HTTP address"},
		{"admin grpc on every interface without auth", func(s *Server) { s.AdminGRPC = ":9091" }, `admin_grpc (--admin-grpc): ":9091" is not a loopback address`},
		{"max connection idle", func(s *Server) { s.GRPCMaxConnectionIdle = 0 }, "grpc_max_connection_idle (--grpc-max-connection-idle): 0s must be positive"},
		{"keepalive time", func(s *Server) { s.GRPCKeepaliveTime = 0 }, "grpc_keepalive_time (--grpc-keepalive-time): 0s must be positive"},
		{"keepalive timeout", func(s *Server) { s.GRPCKeepaliveTimeout = -time.Second }, "grpc_keepalive_timeout (--grpc-keepalive-timeout): -1s must be positive"},
		{"max connections", func(s *Server) { s.GRPCMaxConnections = 0 }, "grpc_max_connections (--grpc-max-connections): 0 must be positive"},
		{"admin max connections", func(s *Server) { s.AdminGRPCMaxConnections = -1 }, "admin_grpc_max_connections (--admin-grpc-max-connections): -1 must be positive"},
		{"tls cert without key", func(s *Server) { s.TLS.CertFile = "/c.pem" }, "tls.cert_file (--tls-cert): cert_file and key_file go together"},
		{"client ca without tls", func(s *Server) { s.TLS.ClientCAFile = "/ca.pem" }, "tls.client_ca_file (--tls-client-ca): client certificates need TLS"},
		{"require without ca", func(s *Server) {
			s.TLS = TLS{CertFile: "/c", KeyFile: "/k", ClientAuth: ClientAuthRequire, ReloadInterval: time.Second}
		},
			"tls.client_auth (--tls-client-auth): require needs tls.client_ca_file (--tls-client-ca)"},
		{"reload interval", func(s *Server) { s.TLS.ReloadInterval = 0 }, "tls.reload_interval (--tls-reload-interval): 0s must be positive"},
		{"every interface without auth", func(s *Server) { s.HTTP = ":8080" }, `http (--http): ":8080" is not a loopback address and no authentication is configured: configure auth.tokens_file`},
		{"grpc on 0.0.0.0 without auth", func(s *Server) { s.GRPC = "0.0.0.0:9090" }, `grpc (--grpc): "0.0.0.0:9090" is not a loopback address`},
		{"admin on a host name without auth", func(s *Server) { s.AdminHTTP = "grove.internal:8081" }, `admin_http (--admin-http): "grove.internal:8081" is not a loopback address`},
		{"request is not authentication", func(s *Server) {
			s.HTTP, s.TLS = "0.0.0.0:8443", TLS{CertFile: "/c", KeyFile: "/k", ClientCAFile: "/ca", ClientAuth: ClientAuthRequest, ReloadInterval: time.Second}
		}, "--insecure-no-auth"},
		{"key feature twice", func(s *Server) { s.PredictionLog.DefaultKeyFeatures = []string{"a", "a"} }, `prediction_log.default_key_features (--prediction-log-key-features): "a" is listed twice`},
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

func TestClusterKeysHaveTheFlagOfTheSameName(t *testing.T) {
	s := DefaultServer()
	fs, _, _ := serverFlags(&s)
	n := 0
	for key, name := range nestedKeyFlags {
		if !strings.HasPrefix(key, "cluster.") {
			continue
		}
		n++
		if want := strings.NewReplacer(".", "-", "_", "-").Replace(key); name != want {
			t.Errorf("%s has the flag --%s, want --%s", key, name, want)
		}
		if fs.Lookup(name) == nil {
			t.Errorf("%s: no flag --%s", key, name)
		}
	}
	if want := reflect.TypeFor[Cluster]().NumField(); n != want {
		t.Errorf("%d cluster keys have a flag, want all %d", n, want)
	}
}

func TestServerValidateCluster(t *testing.T) {
	single := DefaultServer()
	single.Bucket = "gs://b"
	if single.Cluster.Enabled() {
		t.Fatal("the cluster is on by default")
	}
	if single.Cluster.NodeName == "" {
		t.Error("the node name does not default to the host name")
	}
	node := single
	node.MemoryBudgetBytes = 1 << 30
	node.Cluster.EtcdEndpoints = []string{"127.0.0.1:2379"}
	node.Cluster.NodeName = "n1"
	node.Cluster.Advertise = "127.0.0.1:7946"
	node.InsecureNoAuth = true // plaintext peers
	for name, s := range map[string]Server{"single": single, "node": node} {
		if err := s.Validate(); err != nil {
			t.Errorf("%s: %v", name, err)
		}
	}
	for _, tc := range []struct {
		name   string
		modify func(*Server)
		want   string
	}{
		{"advertise without a cluster", func(s *Server) { s.Cluster.EtcdEndpoints = nil },
			"cluster.advertise (--cluster-advertise): is set but the cluster is off: set cluster.etcd_endpoints (--cluster-etcd-endpoints), or remove it"},
		{"etcd tls without a cluster", func(s *Server) { s.Cluster.EtcdEndpoints, s.Cluster.Advertise, s.Cluster.EtcdTLS = nil, "", true },
			"cluster.etcd_tls (--cluster-etcd-tls): is set but the cluster is off"},
		{"endpoint", func(s *Server) { s.Cluster.EtcdEndpoints = []string{"etcd"} }, `cluster.etcd_endpoints (--cluster-etcd-endpoints): "etcd" is not host:port`},
		{"endpoint port", func(s *Server) { s.Cluster.EtcdEndpoints = []string{"etcd:x"} }, `cluster.etcd_endpoints (--cluster-etcd-endpoints): "etcd:x": port "x" is not a number`},
		{"prefix", func(s *Server) { s.Cluster.EtcdPrefix = "grove" }, `cluster.etcd_prefix (--cluster-etcd-prefix): "grove" must start with "/"`},
		{"tls files without tls", func(s *Server) { s.Cluster.EtcdCAFile = "/ca.pem" }, "cluster.etcd_tls (--cluster-etcd-tls): is false but TLS files are set"},
		{"cert without key", func(s *Server) { s.Cluster.EtcdTLS, s.Cluster.EtcdCertFile = true, "/c.pem" },
			"cluster.etcd_cert_file (--cluster-etcd-cert-file): etcd_cert_file and etcd_key_file go together"},
		{"no node name", func(s *Server) { s.Cluster.NodeName = "" }, "cluster.node_name (--cluster-node-name): required in a cluster"},
		{"node name", func(s *Server) { s.Cluster.NodeName = "a/b" }, `cluster.node_name (--cluster-node-name): "a/b" is not 1 to 253 of ASCII letters`},
		{"no advertise", func(s *Server) { s.Cluster.Advertise = "" }, "cluster.advertise (--cluster-advertise): required in a cluster"},
		{"advertise without host", func(s *Server) { s.Cluster.Advertise = ":7946" }, `cluster.advertise (--cluster-advertise): ":7946" is not host:port with a host peers can reach`},
		{"advertise port 0", func(s *Server) { s.Cluster.Advertise = "10.0.0.1:0" }, `port "0" is not a number from 1 to 65535`},
		{"advertise every interface", func(s *Server) { s.Cluster.Advertise = "0.0.0.0:7946" }, `"0.0.0.0:7946": 0.0.0.0 is every interface`},
		{"advertise on the http port", func(s *Server) { s.Cluster.Advertise = "10.0.0.1:8080" },
			`cluster.advertise (--cluster-advertise): "10.0.0.1:8080" has the port of http (--http); the peers' port is a port of its own`},
		{"advertise on the grpc port", func(s *Server) { s.Cluster.Advertise = "127.0.0.1:9090" }, "has the port of grpc (--grpc)"},
		{"lease ttl short", func(s *Server) { s.Cluster.LeaseTTL = time.Second }, "cluster.lease_ttl (--cluster-lease-ttl): 1s is not whole seconds from 2s to 1m"},
		{"lease ttl fraction", func(s *Server) { s.Cluster.LeaseTTL = 2500 * time.Millisecond }, "2.5s is not whole seconds"},
		{"memory factor", func(s *Server) { s.Cluster.MemoryFactor = 0 }, "cluster.memory_factor (--cluster-memory-factor): 0 is not a number above 0"},
		{"memory factor NaN", func(s *Server) { s.Cluster.MemoryFactor = math.NaN() }, "NaN is not a number above 0"},
		{"no budget", func(s *Server) { s.MemoryBudgetBytes = 0 }, "memory_budget_bytes (--memory-budget-bytes): required in a cluster"},
		{"unauthenticated peers", func(s *Server) { s.InsecureNoAuth = false },
			"cluster.advertise (--cluster-advertise): peers cannot be authenticated: configure tls.cert_file, tls.key_file and tls.client_ca_file"},
		{"negative budget", func(s *Server) { s.MemoryBudgetBytes = -1 }, "memory_budget_bytes (--memory-budget-bytes): -1 must not be negative"},
		{"negative disk cache", func(s *Server) { s.DiskCacheBytes = -1 }, "disk_cache_bytes (--disk-cache-bytes): -1 must not be negative (0: no disk cache)"},
	} {
		s := node
		s.Cluster.EtcdEndpoints = slices.Clone(node.Cluster.EtcdEndpoints)
		tc.modify(&s)
		err := s.Validate()
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: got %v, want an error containing %q", tc.name, err, tc.want)
		}
	}
}

func TestServerValidateAcceptsKafkaSetups(t *testing.T) {
	for _, tc := range []struct {
		name   string
		modify func(*Server)
	}{
		{"brokers and FULL", func(s *Server) {
			s.Kafka.Brokers = []string{"k1:9092", "[::1]:9093"}
			s.PredictionLog.DefaultLevel = PredictionLogFull
		}},
		{"embedded and SAMPLE", func(s *Server) {
			s.Kafka.Embedded = true
			s.PredictionLog.DefaultLevel, s.PredictionLog.DefaultSampleRate = PredictionLogSample, 0
		}},
		{"embedded on any port of ::1", func(s *Server) { s.Kafka.Embedded, s.Kafka.EmbeddedAddr = true, "[::1]:0" }},
		{"embedded on localhost", func(s *Server) { s.Kafka.Embedded, s.Kafka.EmbeddedAddr = true, "localhost:9092" }},
		{"an invalid embedded addr is ignored while off", func(s *Server) { s.Kafka.EmbeddedAddr = "nope" }},
		{"embedded with one partition", func(s *Server) { s.Kafka.Embedded, s.Kafka.EmbeddedPartitions = true, 1 }},
		{"embedded with 64 partitions", func(s *Server) { s.Kafka.Embedded, s.Kafka.EmbeddedPartitions = true, 64 }},
		{"embedded partitions are ignored while off", func(s *Server) { s.Kafka.EmbeddedPartitions = 0 }},
		{"mutual TLS and SCRAM", func(s *Server) {
			s.Kafka.Brokers = []string{"k:9093"}
			s.Kafka.TLS = KafkaTLS{Enabled: true, CAFile: "/ca", CertFile: "/c", KeyFile: "/k"}
			s.Kafka.SASL = KafkaSASL{Mechanism: SASLScramSHA256, Username: "u", Password: "p"}
		}},
		{"empty separator", func(s *Server) { s.PredictionLog.DefaultKeyFeaturesSeparator = "" }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := DefaultServer()
			s.Bucket = "gs://b"
			tc.modify(&s)
			if err := s.Validate(); err != nil {
				t.Error(err)
			}
		})
	}
}

func TestServerValidateReportsEveryProblem(t *testing.T) {
	s := DefaultServer()
	s.PollInterval = 0
	s.Kafka.Topic = ""
	err := s.Validate()
	for _, key := range []string{"bucket", "poll_interval", "kafka.topic"} {
		if err == nil || !strings.Contains(err.Error(), key+" (--") {
			t.Errorf("error %v does not mention %s", err, key)
		}
	}
}

// TestServerValidateAcceptsPortZeroOnEveryListener: port 0 asks the
// system for a free port, a different one for each listener, so the same
// "127.0.0.1:0" on several listeners is no clash.
func TestServerValidateAcceptsPortZeroOnEveryListener(t *testing.T) {
	s := DefaultServer()
	s.Bucket = "file:///srv/models"
	s.HTTP, s.GRPC, s.AdminHTTP = "127.0.0.1:0", "127.0.0.1:0", "127.0.0.1:0"
	if err := s.Validate(); err != nil {
		t.Fatal(err)
	}
	s.GRPC = "127.0.0.1:9090"
	s.AdminHTTP = s.GRPC
	if err := s.Validate(); err == nil || !strings.Contains(err.Error(), "is also the HTTP or gRPC address") {
		t.Fatalf("admin_http on the gRPC port: %v", err)
	}
}

// TestServerAcceptsBucketURLForms checks only the syntax all bucket URLs
// share: the driver of the URL's scheme checks the rest when grove serve
// opens the bucket, and says which schemes the build has.
func TestServerAcceptsBucketURLForms(t *testing.T) {
	for _, u := range []string{"file:///srv/models", "file://./rel/dir", "gs://bucket", "gs://bucket/prefix", "gs://bucket/a/b/",
		"s3://bucket", "s3://bucket/prefix", "other://x"} {
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
	s.LogLevel, s.LogFormat = LogLevel(slog.LevelWarn), LogFormatJSON
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
	for _, f := range []string{"-config", "-bucket", "-s3-endpoint", "-model-config", "-http", "-poll-interval", "-cache-dir", "-max-model-bytes",
		"-max-body-bytes", "-drain-timeout", "-max-timeout", "-auth-max-inflight-per-identity", "-keep-previous-for", "-model-queue-size", "-shadow-micro-batch-rows", "-intra-op-threads", "-log-level", "-log-format",
		"-kafka-brokers", "-kafka-topic", "-kafka-encoding", "-kafka-buffer-records", "-kafka-buffer-bytes", "-kafka-embedded",
		"-kafka-embedded-addr", "-kafka-embedded-partitions", "-kafka-client-id", "-kafka-acks", "-kafka-compression", "-kafka-linger",
		"-prediction-log-level", "-prediction-log-sample-rate", "-prediction-log-key-features", "-prediction-log-key-features-separator",
		"-prediction-log-key-by", "-outcomes-topic", "-evaluations-topic", "-evaluate", "-evaluate-group", "-evaluate-commit-interval", "-evaluate-state-dir",
		"-admin-grpc", "-grpc-max-connection-idle", "-grpc-keepalive-time", "-grpc-keepalive-timeout", "-grpc-max-connections", "-admin-grpc-max-connections",
		"-memory-budget-bytes", "-cluster-etcd-endpoints", "-cluster-etcd-prefix", "-cluster-etcd-tls", "-cluster-etcd-ca-file",
		"-cluster-etcd-cert-file", "-cluster-etcd-key-file", "-cluster-node-name", "-cluster-advertise", "-cluster-lease-ttl", "-cluster-memory-factor"} {
		if !strings.Contains(buf.String(), "  "+f+" ") && !strings.Contains(buf.String(), "  "+f+"\n") {
			t.Errorf("usage does not list %s:\n%s", f, buf.String())
		}
	}
}

func TestServerSecureByDefault(t *testing.T) {
	base := DefaultServer()
	base.Bucket = "gs://b"
	tlsRequire := TLS{CertFile: "/c", KeyFile: "/k", ClientCAFile: "/ca", ClientAuth: ClientAuthRequire, ReloadInterval: time.Second}
	for _, tc := range []struct {
		name   string
		modify func(*Server)
	}{
		{"loopback", func(s *Server) {
			s.HTTP, s.GRPC, s.AdminHTTP, s.AdminGRPC = "localhost:1", "[::1]:2", "127.0.0.2:3", "127.0.0.2:4"
		}},
		{"admin grpc with tokens", func(s *Server) { s.AdminGRPC, s.Auth.TokensFile = ":9091", "/t.yaml" }},
		{"insecure no auth", func(s *Server) { s.HTTP, s.InsecureNoAuth = "0.0.0.0:8080", true }},
		{"tokens", func(s *Server) { s.HTTP, s.Auth.TokensFile = ":8080", "/t.yaml" }},
		{"jwt", func(s *Server) {
			s.HTTP, s.Auth.JWT = ":8080", AuthJWT{JWKSFile: "/jwks.json", Issuer: "https://idp.example", Audience: "grove", RolesClaim: "roles"}
		}},
		{"client roles", func(s *Server) { s.HTTP, s.Auth.ClientRoles = ":8080", map[string][]string{"a": {"infer"}} }},
		{"client certificates required", func(s *Server) { s.HTTP, s.TLS = ":8080", tlsRequire }},
		{"grpc off", func(s *Server) { s.GRPC = "off" }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := base
			tc.modify(&s)
			if err := s.Validate(); err != nil {
				t.Fatalf("refused: %v", err)
			}
		})
	}
}

func TestGRPCServesModelWritesOnlyOnLoopbackWithoutAuthentication(t *testing.T) {
	tlsRequire := TLS{CertFile: "/c", KeyFile: "/k", ClientCAFile: "/ca", ClientAuth: ClientAuthRequire, ReloadInterval: time.Second}
	tlsRequest := tlsRequire
	tlsRequest.ClientAuth = ClientAuthRequest
	for _, tc := range []struct {
		name   string
		modify func(*Server)
		want   bool
	}{
		{"the defaults: the sidecar's layout", func(*Server) {}, true},
		{"localhost", func(s *Server) { s.GRPC = "localhost:9090" }, true},
		{"client certificates requested only", func(s *Server) { s.TLS = tlsRequest }, true},
		{"tokens", func(s *Server) { s.Auth.TokensFile = "/t.yaml" }, false},
		{"client certificates required", func(s *Server) { s.TLS = tlsRequire }, false},
		{"every interface", func(s *Server) { s.GRPC, s.InsecureNoAuth = ":9090", true }, false},
		{"a LAN address", func(s *Server) { s.GRPC, s.InsecureNoAuth = "10.0.0.1:9090", true }, false},
		{"gRPC off", func(s *Server) { s.GRPC = "off" }, false},
	} {
		s := DefaultServer()
		tc.modify(&s)
		if got := s.GRPCServesModelWrites(); got != tc.want {
			t.Errorf("%s: GRPCServesModelWrites() = %v, want %v", tc.name, got, tc.want)
		}
	}
}

// The default engine is h1 on a plaintext listener and over TLS (where h1
// hands HTTP/2 clients to net/http's HTTP/2 server); an engine set
// explicitly is kept either way.
func TestHTTPEngineAutoIsH1OnPlaintextAndOverTLS(t *testing.T) {
	tlsOn := TLS{CertFile: "/c", KeyFile: "/k", ReloadInterval: time.Second}
	for _, tc := range []struct {
		name   string
		modify func(*Server)
		want   string
	}{
		{"the default, plaintext", func(*Server) {}, HTTPEngineH1},
		{"the default, TLS", func(s *Server) { s.TLS = tlsOn }, HTTPEngineH1},
		{"net/http set, plaintext", func(s *Server) { s.HTTPEngine = HTTPEngineNetHTTP }, HTTPEngineNetHTTP},
		{"net/http set, TLS", func(s *Server) { s.HTTPEngine, s.TLS = HTTPEngineNetHTTP, tlsOn }, HTTPEngineNetHTTP},
		{"h1 set, TLS", func(s *Server) { s.HTTPEngine, s.TLS = HTTPEngineH1, tlsOn }, HTTPEngineH1},
	} {
		s := DefaultServer()
		tc.modify(&s)
		if s.HTTPEngine == "" {
			t.Fatalf("%s: no default engine", tc.name)
		}
		if got := s.ResolveHTTPEngine(); got != tc.want {
			t.Errorf("%s: ResolveHTTPEngine() = %q, want %q", tc.name, got, tc.want)
		}
	}
}

func TestIsLoopback(t *testing.T) {
	for addr, want := range map[string]bool{
		"127.0.0.1:1": true, "127.1.2.3:1": true, "[::1]:1": true, "localhost:1": true,
		":1": false, "0.0.0.0:1": false, "[::]:1": false, "10.0.0.1:1": false, "grove:1": false, "junk": false,
	} {
		if got := IsLoopback(addr); got != want {
			t.Errorf("IsLoopback(%q) = %v, want %v", addr, got, want)
		}
	}
}

func TestConnectionLimitsDefaultToTheFileDescriptorLimitsShares(t *testing.T) {
	for _, tc := range []struct {
		fds           uint64
		public, admin int
	}{
		{20000, 8494, 256},
		{4096, 1728, 64},
		{1024, 368, 16},
		{1 << 20, 458496, 256},
		{100, 16, 16},           // below what the shares need: the floors
		{1 << 62, 7339776, 256}, // RLIM_INFINITY and the like: as 2^24
	} {
		got := DefaultConnectionLimits(tc.fds)
		if got != (ConnectionLimits{Public: tc.public, Admin: tc.admin}) {
			t.Errorf("DefaultConnectionLimits(%d) = %+v, want public %d, admin %d", tc.fds, got, tc.public, tc.admin)
		}
		if tc.fds >= 1024 && tc.fds < 1<<24 && uint64(2*got.Public+2*got.Admin) > tc.fds-tc.fds/8 {
			t.Errorf("DefaultConnectionLimits(%d) = %+v: the listeners full at once leave less than an eighth of the descriptors", tc.fds, got)
		}
	}
	d := DefaultServer()
	if want := DefaultConnectionLimits(fdLimit()); d.HTTPMaxConnections != want.Public || d.AdminHTTPMaxConnections != want.Admin {
		t.Errorf("defaults http_max_connections %d, admin_http_max_connections %d; want %+v for this process's %d descriptors",
			d.HTTPMaxConnections, d.AdminHTTPMaxConnections, want, fdLimit())
	}
	got, err := ParseServerArgs([]string{"--bucket", "gs://b", "--http-max-connections", "100", "--admin-http-max-connections", "7"})
	if err != nil {
		t.Fatal(err)
	}
	if got.HTTPMaxConnections != 100 || got.AdminHTTPMaxConnections != 7 {
		t.Errorf("flags: http_max_connections %d, admin_http_max_connections %d; want 100, 7", got.HTTPMaxConnections, got.AdminHTTPMaxConnections)
	}
}

func TestParseServerArgsRefusesAConfigFileLargerThanItsLimit(t *testing.T) {
	const limit = 1 << 20
	// A comment fills the file to the size wanted: the keys stay valid.
	fill := func(size int) string {
		head := "bucket: gs://b\n#"
		return head + strings.Repeat("x", size-len(head)-1) + "\n"
	}
	got, err := ParseServerArgs([]string{"--config", writeYAML(t, fill(limit))})
	if err != nil || got.Bucket != "gs://b" {
		t.Fatalf("a file of exactly the limit: %+v, %v", got.Bucket, err)
	}
	file := writeYAML(t, fill(limit+1))
	_, err = ParseServerArgs([]string{"--config", file})
	if want := "reading config file: " + file + " is larger than its limit of 1 MiB"; err == nil || err.Error() != want {
		t.Fatalf("a file one byte over the limit: got %v, want %q", err, want)
	}
}
