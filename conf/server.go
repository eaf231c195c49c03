// Package conf is the configuration of "grove serve": the server config,
// read from a YAML file and flags and validated (Server, ParseServerArgs),
// and the syntax every bucket URL shares (ParseBucketURL). The model
// config kept in the bucket is package modelconfig's.
package conf

import (
	"bytes"
	"encoding"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"math"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/groveml/grove/auth"
	"github.com/groveml/grove/conf/modelconfig"
	"github.com/groveml/grove/internal/capped"
	"gopkg.in/yaml.v3"
)

// Server is the configuration of "grove serve". Each field can be set in
// the YAML config file under its yaml key, or with the flag of the same
// name with dashes (poll_interval is --poll-interval).
type Server struct {
	// Bucket is the URL of the bucket holding the model config and the
	// models: file:///abs/dir, file://./rel/dir, gs://bucket[/prefix] or
	// s3://bucket[/prefix].
	Bucket string `yaml:"bucket"`
	// S3Endpoint is the http:// or https:// URL of an S3-compatible store
	// (such as MinIO) for s3:// buckets, addressed path-style; empty leaves
	// it to AWS_ENDPOINT_URL, the shared AWS config, else AWS.
	S3Endpoint string `yaml:"s3_endpoint"`
	// ModelConfig is the model config's object name in the bucket.
	ModelConfig string `yaml:"model_config"`
	// HTTP is the host:port the HTTP API listens on.
	HTTP string `yaml:"http"`
	// GRPC is the host:port the gRPC services (Open Inference Protocol,
	// B&A inference sidecar, health, reflection) listen on; "off" serves none.
	GRPC string `yaml:"grpc"`
	// AdminHTTP, when set, is the host:port of a second HTTP listener that
	// serves the management API, /metrics and pprof, which the HTTP
	// address then does not: the scoring port can be exposed alone.
	AdminHTTP string `yaml:"admin_http"`
	// AdminGRPC, when set, is the host:port of a second gRPC listener
	// whose message limit is MaxModelBytes: it serves the B&A sidecar's
	// RegisterModel and DeleteModel (which carry or remove whole models),
	// GetModelPaths, health and reflection. Unless GRPCServesModelWrites,
	// it is the only listener serving the two model writes.
	AdminGRPC string `yaml:"admin_grpc"`
	// InsecureNoAuth lets Grove listen on a non-loopback address with no
	// authentication configured (see AuthConfigured), logging a warning at
	// start and every hour; without it such a config is refused.
	InsecureNoAuth bool `yaml:"insecure_no_auth"`
	// HTTPEngine is the server of the HTTP listener (HTTP, not AdminHTTP):
	// HTTPEngineNetHTTP, Go's net/http (HTTP/1.1, and HTTP/2 over TLS);
	// HTTPEngineH1, Grove's own HTTP/1.1 server (package transport/h1),
	// which serves the same routes with less CPU a request
	// (docs/performance.md) and over TLS hands the connections that
	// choose HTTP/2 to net/http's HTTP/2 server; or HTTPEngineAuto, h1.
	// ResolveHTTPEngine says which auto is.
	HTTPEngine string `yaml:"http_engine"`
	// HTTPReadHeaderTimeout bounds reading a request's headers (slow
	// clients holding connections open are cut).
	HTTPReadHeaderTimeout time.Duration `yaml:"http_read_header_timeout"`
	// HTTPIdleTimeout closes keep-alive connections idle this long.
	HTTPIdleTimeout time.Duration `yaml:"http_idle_timeout"`
	// HTTPMaxHeaderBytes is the largest request header block, in bytes.
	HTTPMaxHeaderBytes int `yaml:"http_max_header_bytes"`
	// HTTPReadTimeout bounds reading a request's body, and HTTPWriteTimeout
	// writing its answer, from when the handler starts; set per handler, so
	// the long streams of pprof get the time they ask for on top. Until a
	// request's caller is known (its credentials checked), it gets
	// HTTPReadHeaderTimeout instead.
	HTTPReadTimeout  time.Duration `yaml:"http_read_timeout"`
	HTTPWriteTimeout time.Duration `yaml:"http_write_timeout"`
	// HTTPMaxConnections bounds the connections the HTTP listener holds,
	// and AdminHTTPMaxConnections the admin listener's: at the limit the
	// connection idle the longest is closed to make room, or the new one
	// when none is. The defaults are sized from the process's file
	// descriptor limit (DefaultConnectionLimits).
	HTTPMaxConnections      int `yaml:"http_max_connections"`
	AdminHTTPMaxConnections int `yaml:"admin_http_max_connections"`
	// GRPCMaxConcurrentStreams bounds the concurrent calls of one gRPC connection.
	GRPCMaxConcurrentStreams int `yaml:"grpc_max_concurrent_streams"`
	// GRPCKeepaliveMinTime is the shortest interval between client
	// keepalive pings the gRPC server tolerates; a client pinging more
	// often is disconnected (GOAWAY too_many_pings).
	GRPCKeepaliveMinTime time.Duration `yaml:"grpc_keepalive_min_time"`
	// GRPCMaxConnectionIdle closes, with GOAWAY, a gRPC connection that
	// has had no call for this long (one that sent only the HTTP/2
	// preface included), on both gRPC listeners.
	GRPCMaxConnectionIdle time.Duration `yaml:"grpc_max_connection_idle"`
	// GRPCKeepaliveTime is how long a gRPC connection may stay silent
	// before the server pings it, and GRPCKeepaliveTimeout how long the
	// server then waits for the answer before closing it (a dead peer).
	GRPCKeepaliveTime    time.Duration `yaml:"grpc_keepalive_time"`
	GRPCKeepaliveTimeout time.Duration `yaml:"grpc_keepalive_timeout"`
	// GRPCMaxConnections bounds the connections the gRPC listener holds
	// open, and AdminGRPCMaxConnections the admin gRPC listener's: a
	// connection over the limit is closed at once (gRPC never marks a
	// connection idle, so none is reclaimed). The defaults are sized from
	// the file descriptor limit (DefaultConnectionLimits).
	GRPCMaxConnections      int `yaml:"grpc_max_connections"`
	AdminGRPCMaxConnections int `yaml:"admin_grpc_max_connections"`
	// TLS serves the HTTP, admin and gRPC listeners over TLS.
	TLS TLS `yaml:"tls"`
	// PollInterval is how often the model config is read; at least MinPollInterval.
	PollInterval time.Duration `yaml:"poll_interval"`
	// WarmUpTimeout bounds a model's warm-up: one still running after it
	// fails the load, which is retried as any failed load is (on the next
	// poll; an on-demand model on a request after its backoff) once the
	// stuck forward call has returned, and an in-place update that fails
	// so leaves the previous content serving.
	WarmUpTimeout time.Duration `yaml:"warmup_timeout"`
	// KeepPreviousFor is how long the content an in-place update replaced
	// stays loaded and warm, out of service, so that going back to it (the
	// old checksum in the config, or POST /v1/rollback) needs no reload; a
	// removed model stays loaded at least this long too. A model entry's
	// keep_previous_for_ms overrides it. 0 (the default) is off: it holds
	// two copies of a model in memory.
	KeepPreviousFor time.Duration `yaml:"keep_previous_for"`
	// LoadPolicy is when a model entry without a load of its own is
	// loaded: eager (the default: when the config lists it) or on_demand
	// (on the first request for it; see docs/density.md).
	LoadPolicy LoadPolicy `yaml:"load_policy"`
	// IdleUnloadAfter unloads an on-demand model that took no request for
	// that long on a single server (back to unloaded: its next request
	// loads it again); in a cluster the placement controller drops it to
	// its min_nodes copies instead; 0 (the default): never.
	IdleUnloadAfter time.Duration `yaml:"idle_unload_after"`
	// CacheDir is where models are copied before loading.
	CacheDir string `yaml:"cache_dir"`
	// MaxModelBytes is the largest model, in bytes, that is fetched, and
	// the largest message of the admin gRPC listener and of a gRPC
	// RegisterModel (which carries model files).
	MaxModelBytes int64 `yaml:"max_model_bytes"`
	// MaxBodyBytes is the largest request body, in bytes, that is accepted;
	// a gzip or deflate body is held to it both compressed and decoded. It
	// is also the largest message of the gRPC listener (where
	// GRPCServesModelWrites, of every method but RegisterModel).
	MaxBodyBytes int64 `yaml:"max_body_bytes"`
	// DrainTimeout bounds how long shutdown waits for requests in flight.
	DrainTimeout time.Duration `yaml:"drain_timeout"`
	// MaxTimeout clamps every deadline a caller gives (Grove-Timeout, OIP's
	// timeout parameter, a gRPC deadline); a model's default_timeout_ms,
	// the operator's, is not clamped.
	MaxTimeout time.Duration `yaml:"max_timeout"`
	// ModelQueueSize is the most requests queued for one model.
	ModelQueueSize int `yaml:"model_queue_size"`
	// ShadowMicroBatchRows cuts shadow copies into micro-batches of at most
	// this many rows, so a user request waits for at most one; 0 never cuts.
	ShadowMicroBatchRows int `yaml:"shadow_micro_batch_rows"`
	// ShadowWorkers is how many niced (lowest CPU priority) threads run shadow
	// forward calls, for all models; ShadowQueue is how many shadow
	// micro-batches may wait for them. Shadow work that finds the queue full
	// is dropped and counted: more workers and a longer queue run more shadow
	// copies, at the cost of CPU the user requests may want.
	ShadowWorkers int `yaml:"shadow_workers"`
	ShadowQueue   int `yaml:"shadow_queue"`
	// ShadowTimeout is how long a shadow copy may wait to run: one that
	// waited longer is dropped and counted, not run.
	ShadowTimeout time.Duration `yaml:"shadow_timeout"`
	// ShadowCompareTolerance is the largest difference between a shadow
	// servable's value and the answer the caller got for the same request
	// that counts as within tolerance (the comparison's rows-within share).
	ShadowCompareTolerance float64 `yaml:"shadow_compare_tolerance"`
	// ShadowCompareWindow is how many of a shadow servable's latest
	// executions the comparison's last-N window holds.
	ShadowCompareWindow int `yaml:"shadow_compare_window"`
	// MaxBatchRows bounds dynamic batching: user requests queued for one
	// model together run as one forward call of at most this many rows; 1
	// turns batching off. Requests are never held back to wait for others.
	MaxBatchRows int `yaml:"max_batch_rows"`
	// ONNXRuntimeLib is the ONNX Runtime shared library; empty means
	// $GROVE_ONNXRUNTIME_LIB, else ../lib/ from the executable's directory
	// (a release), else the copy `make deps` puts in .cache.
	ONNXRuntimeLib string `yaml:"onnxruntime_lib"`
	// TorchLib is Grove's TorchScript runtime library (libgrove_torch.so);
	// empty means $GROVE_TORCH_LIB, else ../lib/ from the executable's
	// directory, else the repository's .cache (torch.DefaultLibraryPath).
	TorchLib string `yaml:"torch_lib"`
	// IntraOpThreads is the number of threads a model uses for one forward pass.
	IntraOpThreads int `yaml:"intra_op_threads"`
	// Pprof serves Go's profiling endpoints under /debug/pprof/ on the HTTP
	// address; off by default (they reveal internals and cost CPU when used).
	Pprof bool `yaml:"pprof"`
	// BAAcceptUnquotedNumbers lets JSON numbers through in the
	// tensor_content of B&A requests (/v1/inference, the sidecar's
	// Predict, warm_up_batch_request_json); off by default, as in the B&A
	// sidecar, which answers INPUT_PARSING "All numbers within the
	// tensor_content must be enclosed in quotes".
	BAAcceptUnquotedNumbers bool `yaml:"ba_accept_unquoted_numbers"`
	// LogLevel is a slog level: debug, info, warn or error (optionally with an offset, e.g. "debug-4").
	LogLevel LogLevel `yaml:"log_level"`
	// LogFormat is "text" or "json".
	LogFormat LogFormat `yaml:"log_format"`
	// Kafka is where the prediction log (and the outcomes) are produced to.
	Kafka Kafka `yaml:"kafka"`
	// PredictionLog says which predictions are logged.
	PredictionLog PredictionLog `yaml:"prediction_log"`
	// Outcomes configures the outcomes callers report (yaml key "outcomes").
	Outcomes Outcomes `yaml:"outcomes"`
	// Auth configures who may call the APIs (yaml key "auth").
	Auth Auth `yaml:"auth"`
	// MemoryBudgetBytes is the memory, in bytes, this node gives models; a
	// cluster places models by it (required there). A single server keeps
	// the models it loads within it by unloading idle on-demand models
	// (docs/density.md); 0 there is unbounded.
	MemoryBudgetBytes int64 `yaml:"memory_budget_bytes"`
	// DiskCacheBytes is the disk space, in bytes, under CacheDir kept for
	// the files of on-demand models unloaded for the budget or idleness,
	// so that loading the same content again (an entry with a checksum)
	// verifies them on disk instead of fetching them from the bucket. 0
	// (the default): the files are deleted at the unload.
	DiskCacheBytes int64 `yaml:"disk_cache_bytes"`
	// Cluster makes this server a node of a cluster (yaml key "cluster").
	Cluster Cluster `yaml:"cluster"`
}

// Cluster configures membership in a cluster of Grove nodes that share
// out the models by memory (yaml key "cluster"). It is off when
// EtcdEndpoints is empty: Grove is then a single server, with no etcd.
type Cluster struct {
	// EtcdEndpoints are the host:port client addresses of the etcd cluster
	// holding the membership, the controller election and the placement table.
	EtcdEndpoints []string `yaml:"etcd_endpoints"`
	// EtcdPrefix is the key prefix of this cluster's state in etcd;
	// clusters sharing an etcd need their own.
	EtcdPrefix string `yaml:"etcd_prefix"`
	// EtcdTLS connects to etcd over TLS; the files below need it.
	EtcdTLS bool `yaml:"etcd_tls"`
	// EtcdCAFile is a PEM file of the CAs of etcd's certificates, instead
	// of the system's.
	EtcdCAFile string `yaml:"etcd_ca_file"`
	// EtcdCertFile and EtcdKeyFile are a PEM client certificate and its
	// key, for etcd's --client-cert-auth; both or neither.
	EtcdCertFile string `yaml:"etcd_cert_file"`
	// EtcdKeyFile is the client certificate's PEM key.
	EtcdKeyFile string `yaml:"etcd_key_file"`
	// NodeName is this node's name in the cluster, unique among the live
	// nodes: ASCII letters, digits, '.', '_' and '-'.
	NodeName string `yaml:"node_name"`
	// Advertise is the host:port this node listens on for its peers and
	// publishes to them: a port of its own, beside the HTTP and gRPC ones.
	Advertise string `yaml:"advertise"`
	// LeaseTTL is how long a node that stopped answering stays a member
	// (and the controller): whole seconds, 2s to 60s.
	LeaseTTL time.Duration `yaml:"lease_ttl"`
	// MemoryFactor estimates a model's memory as its file size times this
	// until its RSS was measured after its first load.
	MemoryFactor float64 `yaml:"memory_factor"`
}

// Enabled reports whether this server is a cluster node.
func (c Cluster) Enabled() bool { return len(c.EtcdEndpoints) > 0 }

// Auth configures authentication (yaml key "auth"): bearer tokens, JWTs,
// client certificates' roles and per-identity limits. With none of
// tokens_file, jwt.jwks_file and client_roles set, the APIs are open.
type Auth struct {
	// TokensFile is the bearer tokens file (name, sha256 of the token,
	// roles), reloaded when it changes.
	TokensFile string `yaml:"tokens_file"`
	// ClientRoles maps a verified client certificate's name (its first DNS
	// or URI SAN, else its subject CN) to its roles.
	ClientRoles map[string][]string `yaml:"client_roles"`
	// JWT configures JWT bearer tokens.
	JWT AuthJWT `yaml:"jwt"`
	// Limits are per-identity token buckets.
	Limits []AuthLimit `yaml:"limits"`
	// MaxInFlightPerIdentity is the most requests one identity may have in
	// flight at once; more are answered 429 (RESOURCE_EXHAUSTED over gRPC).
	// 0 is no limit.
	MaxInFlightPerIdentity int `yaml:"max_inflight_per_identity"`
}

// AuthJWT configures JWT bearer tokens (yaml key "auth.jwt"); off when
// JWKSFile is empty.
type AuthJWT struct {
	// JWKSFile is the local JSON Web Key Set file, reloaded when it changes.
	JWKSFile string `yaml:"jwks_file"`
	// Issuer is the iss claim a token must carry.
	Issuer string `yaml:"issuer"`
	// Audience is an aud a token must carry.
	Audience string `yaml:"audience"`
	// RolesClaim names the claim listing the caller's roles.
	RolesClaim string `yaml:"roles_claim"`
}

// AuthLimit is one per-identity token bucket (an element of "auth.limits"):
// for the identity called Name, or for each identity holding Role.
type AuthLimit struct {
	// Name is an identity's qualified name: "token:NAME", "jwt:SUB" or
	// "certificate:NAME"; a name without one of these prefixes is a
	// token's (auth.ParseQualified).
	Name string `yaml:"name"`
	// Role applies the limit to each identity holding it, each on its own.
	Role string `yaml:"role"`
	// RPS is the requests a second allowed on average.
	RPS float64 `yaml:"rps"`
	// Burst is the requests allowed at once.
	Burst int `yaml:"burst"`
}

// Enabled reports whether authentication is configured: a tokens file, a
// JWKS file or client certificate roles.
func (a Auth) Enabled() bool {
	return a.TokensFile != "" || a.JWT.JWKSFile != "" || len(a.ClientRoles) > 0
}

// Kafka configures the prediction log's producer (yaml key "kafka"), which
// also produces the outcomes (Outcomes). It is off when Brokers is empty
// and Embedded is false.
type Kafka struct {
	// Brokers are the host:port seed brokers; empty with Embedded false
	// turns the prediction log off.
	Brokers []string `yaml:"brokers"`
	// Topic is the topic events are produced to.
	Topic string `yaml:"topic"`
	// Encoding is the record value's encoding: "proto" or "json" (protojson).
	Encoding Encoding `yaml:"encoding"`
	// BufferRecords is the most events waiting for the broker; more are dropped.
	BufferRecords int `yaml:"buffer_records"`
	// BufferBytes is the most encoded bytes waiting for the broker; more are dropped.
	BufferBytes int64 `yaml:"buffer_bytes"`
	// Embedded starts the in-process development broker at EmbeddedAddr
	// and logs there; exclusive with Brokers.
	Embedded bool `yaml:"embedded"`
	// EmbeddedAddr is the loopback host:port of the embedded broker (port 0: any free port).
	EmbeddedAddr string `yaml:"embedded_addr"`
	// EmbeddedPartitions is the partition count of the topics the embedded
	// broker creates (the prediction log's, the outcomes', and any a
	// client creates by producing to it), from 1 to 64.
	EmbeddedPartitions int `yaml:"embedded_partitions"`
	// ClientID is the Kafka client id.
	ClientID string `yaml:"client_id"`
	// Acks is "all" (idempotent producer), "leader" or "none"; the last two
	// turn idempotence off.
	Acks Acks `yaml:"acks"`
	// Compression is the batch codec: none, gzip, snappy, lz4 or zstd.
	Compression Compression `yaml:"compression"`
	// Linger is how long a partition's batch waits for more events before it is sent.
	Linger time.Duration `yaml:"linger"`
	// TLS configures TLS to the brokers.
	TLS KafkaTLS `yaml:"tls"`
	// SASL configures SASL authentication to the brokers.
	SASL KafkaSASL `yaml:"sasl"`
}

// KafkaTLS configures TLS to the brokers (yaml key "kafka.tls").
type KafkaTLS struct {
	// Enabled turns TLS on; the other fields need it.
	Enabled bool `yaml:"enabled"`
	// CAFile is a PEM file of CAs to trust instead of the system's.
	CAFile string `yaml:"ca_file"`
	// CertFile and KeyFile are a PEM client certificate and its key, for
	// mutual TLS; both or neither.
	CertFile string `yaml:"cert_file"`
	// KeyFile is the client certificate's PEM key.
	KeyFile string `yaml:"key_file"`
	// InsecureSkipVerify accepts any broker certificate (testing only).
	InsecureSkipVerify bool `yaml:"insecure_skip_verify"`
}

// TLS configures TLS on Grove's listeners (yaml key "tls"); it is off
// when CertFile is empty.
type TLS struct {
	// CertFile is the PEM server certificate chain, KeyFile its key.
	CertFile string `yaml:"cert_file"`
	KeyFile  string `yaml:"key_file"`
	// ClientCAFile holds the PEM CAs client certificates must chain to.
	ClientCAFile string `yaml:"client_ca_file"`
	// ClientAuth is none, request (a given certificate is verified) or
	// require (also refuse every route but the probes without one).
	ClientAuth ClientAuth `yaml:"client_auth"`
	// ReloadInterval is how often the files are checked for a change.
	ReloadInterval time.Duration `yaml:"reload_interval"`
}

// Enabled reports whether the listeners serve TLS.
func (t TLS) Enabled() bool { return t.CertFile != "" }

// AuthConfigured reports whether callers must authenticate: a token file,
// JWTs, client roles or required client certificates are configured.
func (s Server) AuthConfigured() bool {
	return s.Auth.Enabled() || (s.TLS.Enabled() && s.TLS.ClientAuth == ClientAuthRequire)
}

// KafkaSASL configures SASL authentication (yaml key "kafka.sasl").
type KafkaSASL struct {
	// Mechanism is "" (no SASL), "PLAIN", "SCRAM-SHA-256" or "SCRAM-SHA-512".
	Mechanism SASLMechanism `yaml:"mechanism"`
	// Username is the SASL user.
	Username string `yaml:"username"`
	// Password is the SASL password.
	Password string `yaml:"password"`
}

// Enabled reports whether the prediction log has a broker: brokers are
// configured or the embedded broker is on.
func (k Kafka) Enabled() bool { return k.Embedded || len(k.Brokers) > 0 }

// PredictionLog is the prediction log policy for direct model calls (yaml
// key "prediction_log"); a contract's servables have their own, in the
// model config (modelconfig.ServableLogging).
type PredictionLog struct {
	// DefaultLevel is NONE, FULL (every prediction) or SAMPLE (a
	// DefaultSampleRate share of them), the names of the model config's
	// modelconfig.LogLevelNone, LogLevelFull and LogLevelSample.
	DefaultLevel PredictionLogLevel `yaml:"default_level"`
	// DefaultSampleRate is the share of predictions logged at SAMPLE, from 0 to 1.
	DefaultSampleRate float64 `yaml:"default_sample_rate"`
	// DefaultKeyFeatures are the config names whose values, in this order,
	// make the record key.
	DefaultKeyFeatures []string `yaml:"default_key_features"`
	// DefaultKeyFeaturesSeparator joins the key features' values.
	DefaultKeyFeaturesSeparator string `yaml:"default_key_features_separator"`
	// KeyBy chooses the record key of every prediction event, direct and
	// contract calls alike: key_features (the servable's key features, the
	// default) or request_id (the request id, the join key of outcomes
	// that name their prediction by request_id).
	KeyBy KeyBy `yaml:"key_by"`
}

// Outcomes configures the outcomes callers report through POST
// /v1/outcomes and grove.v1.Outcomes/Report (yaml key "outcomes"); they
// need Kafka, whose producer the prediction log and they share.
type Outcomes struct {
	// Topic is the Kafka topic the outcomes are produced to.
	Topic string `yaml:"topic"`
	// EvaluationsTopic is the compacted topic the evaluator writes its
	// results to and grove serve reads them from.
	EvaluationsTopic string `yaml:"evaluations_topic"`
	// Evaluate runs the evaluator (grove evaluate) inside grove serve.
	Evaluate bool `yaml:"evaluate"`
	// Group is the evaluators' Kafka consumer group; its name prefixes
	// their internal topics (GROUP-repartition, GROUP-changelog).
	Group string `yaml:"group"`
	// CommitInterval is how often an evaluator commits: its offsets, its
	// state's changes and its results, in one transaction.
	CommitInterval time.Duration `yaml:"commit_interval"`
	// StateDir holds the evaluator's on-disk store (empty: evaluate/
	// under the cache directory).
	StateDir string `yaml:"state_dir"`
}

// MinPollInterval is the shortest accepted poll interval.
const MinPollInterval = time.Second

// The values of Server.HTTPEngine.
const (
	HTTPEngineAuto    = "auto"
	HTTPEngineNetHTTP = "net/http"
	HTTPEngineH1      = "h1"
)

// ResolveHTTPEngine is the server that serves the HTTP listener:
// HTTPEngineNetHTTP or HTTPEngineH1. Auto is h1 on a plaintext listener
// and over TLS alike (where h1 hands HTTP/2 clients to net/http's HTTP/2
// server); net/http serves only when set.
func (s *Server) ResolveHTTPEngine() string {
	if s.HTTPEngine == HTTPEngineAuto {
		return HTTPEngineH1
	}
	return s.HTTPEngine
}

// DefaultServer returns the defaults of every Server field; Bucket has none.
func DefaultServer() Server {
	cacheDir := "/tmp/grove-cache"
	if d, err := os.UserCacheDir(); err == nil {
		cacheDir = filepath.Join(d, "grove")
	}
	conns := DefaultConnectionLimits(fdLimit())
	return Server{
		ModelConfig:              "model_config.json",
		HTTP:                     "127.0.0.1:8080",
		GRPC:                     "127.0.0.1:9090",
		HTTPEngine:               HTTPEngineAuto,
		HTTPReadHeaderTimeout:    10 * time.Second,
		HTTPIdleTimeout:          2 * time.Minute,
		HTTPMaxHeaderBytes:       64 << 10,
		HTTPReadTimeout:          time.Minute,
		HTTPWriteTimeout:         time.Minute,
		HTTPMaxConnections:       conns.Public,
		AdminHTTPMaxConnections:  conns.Admin,
		GRPCMaxConcurrentStreams: 1024,
		GRPCKeepaliveMinTime:     10 * time.Second,
		GRPCMaxConnectionIdle:    2 * time.Minute,
		GRPCKeepaliveTime:        time.Minute,
		GRPCKeepaliveTimeout:     20 * time.Second,
		GRPCMaxConnections:       conns.Public,
		AdminGRPCMaxConnections:  conns.Admin,
		TLS:                      TLS{ClientAuth: ClientAuthNone, ReloadInterval: time.Second},
		PollInterval:             30 * time.Second,
		WarmUpTimeout:            time.Minute,
		CacheDir:                 cacheDir,
		MaxModelBytes:            2 << 30,
		MaxBodyBytes:             64 << 20,
		DrainTimeout:             30 * time.Second,
		MaxTimeout:               10 * time.Minute,
		ShadowTimeout:            time.Second,
		ShadowCompareTolerance:   0.01,
		ShadowCompareWindow:      1000,
		ModelQueueSize:           1024,
		ShadowMicroBatchRows:     64,
		ShadowWorkers:            1,
		ShadowQueue:              4,
		MaxBatchRows:             64,
		IntraOpThreads:           1,
		LogLevel:                 LogLevel(slog.LevelInfo),
		LogFormat:                LogFormatText,
		Kafka: Kafka{
			Topic:              "grove.predictions",
			Encoding:           EncodingProto,
			BufferRecords:      100000,
			BufferBytes:        64 << 20,
			EmbeddedAddr:       "127.0.0.1:9092",
			EmbeddedPartitions: 4,
			ClientID:           "grove",
			Acks:               AcksAll,
			Compression:        CompressionSnappy,
			Linger:             5 * time.Millisecond,
		},
		PredictionLog: PredictionLog{
			DefaultLevel:                PredictionLogNone,
			DefaultSampleRate:           1,
			DefaultKeyFeaturesSeparator: ".",
			KeyBy:                       KeyByKeyFeatures,
		},
		Outcomes: Outcomes{Topic: "grove.outcomes", EvaluationsTopic: "grove.evaluations", Group: "grove-evaluate", CommitInterval: time.Second},
		Auth:     Auth{JWT: AuthJWT{RolesClaim: "roles"}, MaxInFlightPerIdentity: 256},
		Cluster:  Cluster{EtcdPrefix: "/grove/", NodeName: hostname(), LeaseTTL: 5 * time.Second, MemoryFactor: 2},
	}
}

// hostname is the default node name: the host's name, "" if unknown.
func hostname() string {
	h, err := os.Hostname()
	if err != nil {
		return ""
	}
	return h
}

// ParseServerArgs parses the arguments of "grove serve" (without the
// command name) and returns the validated configuration. Each field comes
// from, in increasing precedence: DefaultServer, the YAML file named by
// --config, and the flags given in args. A choice (Acks, LogFormat, ...)
// given a name it does not have is refused where it is read: in the file,
// with the file's other errors, or in a flag, with the problems Validate
// finds. It prints nothing; for -h or -help it returns flag.ErrHelp, and
// PrintServerUsage shows the flags.
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
	var errs []error
	fs.Visit(func(f *flag.Flag) {
		if set, ok := apply[f.Name]; ok {
			if err := set(); err != nil {
				errs = append(errs, err)
			}
		}
	})
	if err := errors.Join(append(errs, s.Validate())...); err != nil {
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
// copies the parsed flag value into s; for a choice, it reads the value
// with the choice's UnmarshalText and returns its error, naming the key
// and the flag, when the value is none of the choice's names.
func serverFlags(s *Server) (fs *flag.FlagSet, configFile *string, apply map[string]func() error) {
	fs = flag.NewFlagSet("grove serve", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	fs.Usage = func() {}
	apply = make(map[string]func() error)
	str := func(p *string, name, usage string) {
		v := fs.String(name, *p, usage)
		apply[name] = func() error { *p = *v; return nil }
	}
	choice := func(p choiceValue, key, name, usage string) {
		v := fs.String(name, p.String(), usage)
		apply[name] = func() error { return readChoice(p, key, *v) }
	}
	dur := func(p *time.Duration, name, usage string) {
		v := fs.Duration(name, *p, usage)
		apply[name] = func() error { *p = *v; return nil }
	}
	i64 := func(p *int64, name, usage string) {
		v := fs.Int64(name, *p, usage)
		apply[name] = func() error { *p = *v; return nil }
	}
	integer := func(p *int, name, usage string) {
		v := fs.Int(name, *p, usage)
		apply[name] = func() error { *p = *v; return nil }
	}
	configFile = fs.String("config", "", "YAML config `file`; its keys are the flag names with underscores")
	str(&s.Bucket, "bucket", "bucket `URL` with the model config and models: file:///abs/dir, file://./rel/dir, gs://bucket[/prefix] or s3://bucket[/prefix] (required)")
	str(&s.S3Endpoint, "s3-endpoint", "`URL` of an S3-compatible store for s3:// buckets, addressed path-style (default: $AWS_ENDPOINT_URL, else AWS)")
	str(&s.ModelConfig, "model-config", "object `name` of the model config in the bucket")
	str(&s.HTTP, "http", "`host:port` of the HTTP API")
	str(&s.GRPC, "grpc", "`host:port` of the gRPC services (OIP, B&A sidecar, health, reflection), or off")
	str(&s.AdminHTTP, "admin-http", "`host:port` of a second HTTP listener serving the management API, /metrics and pprof instead of --http (default: none, all on --http)")
	str(&s.AdminGRPC, "admin-grpc", "`host:port` of a second gRPC listener with --max-model-bytes as its message limit, serving the B&A sidecar's RegisterModel and DeleteModel (only there unless --grpc is loopback without authentication), GetModelPaths and health (default: none)")
	str(&s.HTTPEngine, "http-engine", "server of the HTTP listener: h1 (Grove's own HTTP/1.1 server: less CPU a request; over TLS, HTTP/2 clients are handed to net/http's HTTP/2 server), net/http (Go's: HTTP/1.1, and HTTP/2 over TLS), or auto (h1)")
	dur(&s.HTTPReadHeaderTimeout, "http-read-header-timeout", "how long a client may take to send a request's headers")
	dur(&s.HTTPIdleTimeout, "http-idle-timeout", "how long an idle keep-alive HTTP connection is kept")
	integer(&s.HTTPMaxHeaderBytes, "http-max-header-bytes", "largest request header block `size` in bytes")
	dur(&s.HTTPReadTimeout, "http-read-timeout", "how long a handler waits for a request body")
	dur(&s.HTTPWriteTimeout, "http-write-timeout", "how long a handler may take to write its answer (pprof streams get their duration on top)")
	integer(&s.HTTPMaxConnections, "http-max-connections", "most connections the HTTP listener holds; at the limit the longest idle is closed, or the new one (default sized from the fd limit)")
	integer(&s.AdminHTTPMaxConnections, "admin-http-max-connections", "most connections the admin HTTP listener holds (default sized from the fd limit)")
	integer(&s.GRPCMaxConcurrentStreams, "grpc-max-concurrent-streams", "most concurrent gRPC calls per connection")
	dur(&s.GRPCKeepaliveMinTime, "grpc-keepalive-min-time", "shortest interval between client keepalive pings; faster clients are disconnected")
	dur(&s.GRPCMaxConnectionIdle, "grpc-max-connection-idle", "how long a gRPC connection without a call is kept before GOAWAY")
	dur(&s.GRPCKeepaliveTime, "grpc-keepalive-time", "how long a gRPC connection may stay silent before the server pings it")
	dur(&s.GRPCKeepaliveTimeout, "grpc-keepalive-timeout", "how long the server waits for a ping's answer before closing the connection")
	integer(&s.GRPCMaxConnections, "grpc-max-connections", "most connections the gRPC listener holds open; more are closed at once (default sized from the fd limit)")
	integer(&s.AdminGRPCMaxConnections, "admin-grpc-max-connections", "most connections the admin gRPC listener holds open; more are closed at once (default sized from the fd limit)")
	str(&s.TLS.CertFile, "tls-cert", "PEM server certificate `file`: serve TLS on every listener (reloaded when it changes)")
	str(&s.TLS.KeyFile, "tls-key", "PEM key `file` of --tls-cert")
	str(&s.TLS.ClientCAFile, "tls-client-ca", "PEM `file` of the CAs client certificates must chain to")
	choice(&s.TLS.ClientAuth, "tls.client_auth", "tls-client-auth", "client certificates: none, request (verified if given) or require (every route but the probes)")
	dur(&s.TLS.ReloadInterval, "tls-reload-interval", "how often the TLS files are checked for a change")
	dur(&s.PollInterval, "poll-interval", "how often the model config is read (at least 1s)")
	dur(&s.WarmUpTimeout, "warmup-timeout", "how long a model's warm-up may run; one still running after fails the load, which is retried as a failed load is once its stuck call returns")
	dur(&s.KeepPreviousFor, "keep-previous-for", "how long a model's previous content stays loaded after an in-place update, for an instant rollback (0: off; keep_previous_for_ms per model overrides it)")
	dur(&s.IdleUnloadAfter, "idle-unload-after", "unload an on-demand model that took no request for this long; it loads again on its next request (0: never)")
	choice(&s.LoadPolicy, "load_policy", "load-policy", "when a model without a load of its own is loaded: eager (when listed) or on_demand (on its first request)")
	str(&s.CacheDir, "cache-dir", "`directory` models are copied to before loading")
	i64(&s.MaxModelBytes, "max-model-bytes", "largest model `size` in bytes")
	i64(&s.MaxBodyBytes, "max-body-bytes", "largest request body `size` in bytes (compressed and decoded)")
	dur(&s.DrainTimeout, "drain-timeout", "how long shutdown waits for requests in flight")
	dur(&s.MaxTimeout, "max-timeout", "longest deadline a caller may give (Grove-Timeout, OIP timeout, gRPC deadline); longer ones are clamped to it")
	integer(&s.Auth.MaxInFlightPerIdentity, "auth-max-inflight-per-identity", "most requests one authenticated identity may have in flight; more are answered 429 (0: no limit)")
	dur(&s.ShadowTimeout, "shadow-timeout", "how long a shadow copy may wait to run before it is dropped")
	integer(&s.ModelQueueSize, "model-queue-size", "most requests queued per model")
	integer(&s.ShadowMicroBatchRows, "shadow-micro-batch-rows", "largest shadow micro-batch in rows (0: never cut)")
	integer(&s.ShadowWorkers, "shadow-workers", "threads at the lowest CPU priority running shadow forward calls, for all models")
	integer(&s.ShadowQueue, "shadow-queue", "shadow micro-batches that may wait for a shadow worker; more are dropped and counted")
	integer(&s.ShadowCompareWindow, "shadow-compare-window", "how many of a shadow servable's latest executions the comparison's last-N window holds")
	integer(&s.IntraOpThreads, "intra-op-threads", "threads per model forward pass")
	integer(&s.MaxBatchRows, "max-batch-rows", "largest dynamic batch in rows: queued user requests of a model run as one forward call (1: off)")
	str(&s.ONNXRuntimeLib, "onnxruntime-lib", "ONNX Runtime shared library `file` (default: $GROVE_ONNXRUNTIME_LIB, else ../lib/ beside the binary's directory, else the .cache copy of make deps)")
	str(&s.TorchLib, "torch-lib", "TorchScript runtime library `file`, libgrove_torch.so, opened with the first TorchScript model (default: $GROVE_TORCH_LIB, else ../lib/ beside the binary's directory, else the .cache build of make deps)")
	choice(&s.LogLevel, "log_level", "log-level", "log `level`: debug, info, warn or error")
	choice(&s.LogFormat, "log_format", "log-format", "log `format`: text or json")
	boolean := func(p *bool, name, usage string) {
		v := fs.Bool(name, *p, usage)
		apply[name] = func() error { *p = *v; return nil }
	}
	boolean(&s.InsecureNoAuth, "insecure-no-auth", "allow a non-loopback listen address with no authentication configured (a warning is logged every hour)")
	boolean(&s.Pprof, "pprof", "serve Go's profiling endpoints under /debug/pprof/ on the HTTP address")
	boolean(&s.BAAcceptUnquotedNumbers, "ba-accept-unquoted-numbers", "accept unquoted JSON numbers in the tensor_content of B&A requests and warm-ups (the B&A sidecar refuses them)")
	f64 := func(p *float64, name, usage string) {
		v := fs.Float64(name, *p, usage)
		apply[name] = func() error { *p = *v; return nil }
	}
	list := func(p *[]string, name, usage string) {
		v := fs.String(name, strings.Join(*p, ","), usage)
		apply[name] = func() error { *p = splitList(*v); return nil }
	}
	f64(&s.ShadowCompareTolerance, "shadow-compare-tolerance", "largest difference between a shadow's value and the caller's answer that counts as within tolerance")
	k := &s.Kafka
	list(&k.Brokers, "kafka-brokers", "comma-separated Kafka seed brokers `host:port,...` for the prediction log (none and no --kafka-embedded: no prediction log)")
	str(&k.Topic, "kafka-topic", "Kafka `topic` of the prediction log")
	choice(&k.Encoding, "kafka.encoding", "kafka-encoding", "prediction log record `encoding`: proto or json")
	integer(&k.BufferRecords, "kafka-buffer-records", "most prediction log events waiting for the broker; more are dropped")
	i64(&k.BufferBytes, "kafka-buffer-bytes", "most prediction log `bytes` waiting for the broker; more are dropped")
	boolean(&k.Embedded, "kafka-embedded", "start the in-process development Kafka broker and log there (events in memory; on disk under --cache-dir with --evaluate)")
	str(&k.EmbeddedAddr, "kafka-embedded-addr", "loopback `host:port` of the embedded Kafka broker (port 0: any free port)")
	integer(&k.EmbeddedPartitions, "kafka-embedded-partitions", "partitions of each topic the embedded Kafka broker creates, from 1 to 64")
	str(&k.ClientID, "kafka-client-id", "Kafka client `id`")
	choice(&k.Acks, "kafka.acks", "kafka-acks", "Kafka `acks`: all (idempotent), leader or none")
	choice(&k.Compression, "kafka.compression", "kafka-compression", "Kafka batch `codec`: none, gzip, snappy, lz4 or zstd")
	dur(&k.Linger, "kafka-linger", "how long a Kafka batch waits for more events")
	pl := &s.PredictionLog
	choice(&pl.DefaultLevel, "prediction_log.default_level", "prediction-log-level", "prediction log `level` of direct model calls: NONE, FULL or SAMPLE")
	f64(&pl.DefaultSampleRate, "prediction-log-sample-rate", "share of direct model calls logged at level SAMPLE, from 0 to 1")
	list(&pl.DefaultKeyFeatures, "prediction-log-key-features", "comma-separated config `names` whose values key direct-call events")
	str(&pl.DefaultKeyFeaturesSeparator, "prediction-log-key-features-separator", "`string` joining the key features' values")
	choice(&pl.KeyBy, "prediction_log.key_by", "prediction-log-key-by", "record key of every prediction event: key_features or request_id")
	str(&s.Outcomes.Topic, "outcomes-topic", "Kafka `topic` POST /v1/outcomes and grove.v1.Outcomes/Report produce outcomes to")
	str(&s.Outcomes.EvaluationsTopic, "evaluations-topic", "compacted Kafka `topic` of the evaluator's results (quality per release)")
	boolean(&s.Outcomes.Evaluate, "evaluate", "run the evaluator (grove evaluate: outcomes joined to predictions) inside grove serve")
	str(&s.Outcomes.Group, "evaluate-group", "Kafka consumer `group` of the evaluators (prefixes their internal topics)")
	dur(&s.Outcomes.CommitInterval, "evaluate-commit-interval", "how often an evaluator commits its offsets, state and results")
	str(&s.Outcomes.StateDir, "evaluate-state-dir", "`directory` of the evaluator's on-disk store (default: evaluate/ under the cache directory)")
	str(&s.Auth.TokensFile, "auth-tokens-file", "YAML `file` of bearer tokens (name, sha256, roles), reloaded when it changes")
	i64(&s.MemoryBudgetBytes, "memory-budget-bytes", "memory `bytes` this node gives models; a cluster places models by it (required with --cluster-etcd-endpoints), a single server unloads idle on-demand models to stay within it (0: unbounded)")
	i64(&s.DiskCacheBytes, "disk-cache-bytes", "disk `bytes` under --cache-dir kept for the files of on-demand models unloaded for the budget or idleness, so that their next load (of an entry with a checksum) verifies them on disk instead of fetching them from the bucket (0: none)")
	c := &s.Cluster
	list(&c.EtcdEndpoints, "cluster-etcd-endpoints", "comma-separated etcd client addresses `host:port,...`: join a cluster of Grove nodes (none: a single server)")
	str(&c.EtcdPrefix, "cluster-etcd-prefix", "etcd key `prefix` of this cluster's state")
	boolean(&c.EtcdTLS, "cluster-etcd-tls", "connect to etcd over TLS")
	str(&c.EtcdCAFile, "cluster-etcd-ca-file", "PEM `file` of the CAs of etcd's certificates, instead of the system's")
	str(&c.EtcdCertFile, "cluster-etcd-cert-file", "PEM client certificate `file` for etcd, with --cluster-etcd-key-file")
	str(&c.EtcdKeyFile, "cluster-etcd-key-file", "PEM `file` of the key of --cluster-etcd-cert-file")
	str(&c.NodeName, "cluster-node-name", "this node's `name` in the cluster (default: the host name)")
	str(&c.Advertise, "cluster-advertise", "`host:port` this node listens on for its peers and publishes to them, a port of its own")
	dur(&c.LeaseTTL, "cluster-lease-ttl", "how long a node that stopped answering stays a member: whole seconds, 2s to 60s")
	f64(&c.MemoryFactor, "cluster-memory-factor", "a model's memory is taken as its file size times this `factor` until measured after its first load")
	return fs, configFile, apply
}

// choiceValue is a pointer to a choice of the config (*Acks, *LogLevel, ...).
type choiceValue interface {
	fmt.Stringer
	encoding.TextUnmarshaler
}

// readChoice sets p to the value named text, or returns its error
// prefixed by key and its flag, as Validate names a key.
func readChoice(p choiceValue, key, text string) error {
	if err := p.UnmarshalText([]byte(text)); err != nil {
		return fmt.Errorf("%s: %w", keyWithFlag(key), err)
	}
	return nil
}

// splitList splits a comma-separated flag value, trimming spaces and
// dropping empty elements; "" is the empty list.
func splitList(v string) []string {
	var out []string
	for _, e := range strings.Split(v, ",") {
		if e = strings.TrimSpace(e); e != "" {
			out = append(out, e)
		}
	}
	return out
}

// nestedKeyFlags names the flag of each nested config key that has one;
// nested keys missing here have no flag.
var nestedKeyFlags = map[string]string{
	"kafka.brokers":             "kafka-brokers",
	"kafka.topic":               "kafka-topic",
	"kafka.encoding":            "kafka-encoding",
	"kafka.buffer_records":      "kafka-buffer-records",
	"kafka.buffer_bytes":        "kafka-buffer-bytes",
	"kafka.embedded":            "kafka-embedded",
	"kafka.embedded_addr":       "kafka-embedded-addr",
	"kafka.embedded_partitions": "kafka-embedded-partitions",
	"kafka.client_id":           "kafka-client-id",
	"kafka.acks":                "kafka-acks",
	"kafka.compression":         "kafka-compression",
	"kafka.linger":              "kafka-linger",

	"tls.cert_file":       "tls-cert",
	"tls.key_file":        "tls-key",
	"tls.client_ca_file":  "tls-client-ca",
	"tls.client_auth":     "tls-client-auth",
	"tls.reload_interval": "tls-reload-interval",

	"prediction_log.default_level":                  "prediction-log-level",
	"prediction_log.default_sample_rate":            "prediction-log-sample-rate",
	"prediction_log.default_key_features":           "prediction-log-key-features",
	"prediction_log.default_key_features_separator": "prediction-log-key-features-separator",
	"prediction_log.key_by":                         "prediction-log-key-by",

	"outcomes.topic":             "outcomes-topic",
	"outcomes.evaluations_topic": "evaluations-topic",
	"outcomes.evaluate":          "evaluate",
	"outcomes.group":             "evaluate-group",
	"outcomes.commit_interval":   "evaluate-commit-interval",
	"outcomes.state_dir":         "evaluate-state-dir",

	"auth.tokens_file":               "auth-tokens-file",
	"auth.max_inflight_per_identity": "auth-max-inflight-per-identity",

	"cluster.etcd_endpoints": "cluster-etcd-endpoints",
	"cluster.etcd_prefix":    "cluster-etcd-prefix",
	"cluster.etcd_tls":       "cluster-etcd-tls",
	"cluster.etcd_ca_file":   "cluster-etcd-ca-file",
	"cluster.etcd_cert_file": "cluster-etcd-cert-file",
	"cluster.etcd_key_file":  "cluster-etcd-key-file",
	"cluster.node_name":      "cluster-node-name",
	"cluster.advertise":      "cluster-advertise",
	"cluster.lease_ttl":      "cluster-lease-ttl",
	"cluster.memory_factor":  "cluster-memory-factor",
}

// keyWithFlag returns a config key followed by its flag, "poll_interval
// (--poll-interval)", or the key alone when it has no flag.
func keyWithFlag(key string) string {
	if !strings.Contains(key, ".") {
		return fmt.Sprintf("%s (--%s)", key, strings.ReplaceAll(key, "_", "-"))
	}
	if f, ok := nestedKeyFlags[key]; ok {
		return fmt.Sprintf("%s (--%s)", key, f)
	}
	return key
}

// yamlLineError matches a yaml.v3 type error message (a choice's gives the
// value's column too, see unmarshalYAMLText), and yamlFieldNotFound the
// one for an unknown key.
var (
	yamlLineError     = regexp.MustCompile(`^line (\d+)(?:, column (\d+))?: (.*)$`)
	yamlFieldNotFound = regexp.MustCompile(`^field (.+) not found in type .*$`)
)

// maxServerFileBytes is the largest config file (--config) read: a few
// kilobytes make a full one.
const maxServerFileBytes = 1 << 20

// loadServerFile overlays the keys set in a YAML file onto s.
func loadServerFile(path string, s *Server) error {
	data, err := capped.ReadFile(path, maxServerFileBytes, path)
	if err != nil {
		return fmt.Errorf("reading config file: %w", err)
	}
	if err := DecodeYAML(data, s); err != nil {
		return fmt.Errorf("config file %s: %w", path, err)
	}
	return nil
}

// DecodeYAML overlays the keys set in YAML data onto v, a *Server or a
// struct of pointers to its sections, as the --config file is read: an
// unknown key is an error, and so is a name a choice does not have (see
// Acks). The errors of values are all reported, each with its line and,
// where it can be told, its key ("line 3: kafka.acks: ..."). Empty data
// sets nothing. The data is one YAML document: a second one that is not
// empty, whose keys would be ignored, is an error.
func DecodeYAML(data []byte, v any) error {
	dec := yaml.NewDecoder(bytes.NewReader(data))
	dec.KnownFields(true)
	err := dec.Decode(v)
	if errors.Is(err, io.EOF) {
		return nil
	}
	if err == nil {
		if err := yamlFractions(data, v); err != nil {
			return err
		}
		return endOfYAML(dec)
	}
	var te *yaml.TypeError
	if !errors.As(err, &te) {
		return err
	}
	keys := yamlKeys(data)
	msgs := make([]string, len(te.Errors))
	for i, m := range te.Errors {
		msgs[i] = m
		sub := yamlLineError.FindStringSubmatch(m)
		if sub == nil {
			continue
		}
		line, column, msg := sub[1], sub[2], sub[3]
		if u := yamlFieldNotFound.FindStringSubmatch(msg); u != nil {
			msgs[i] = fmt.Sprintf("line %s: unknown key %q", line, u[1])
			continue
		}
		if strings.Contains(msg, "time.Duration") {
			msg += ` (durations are strings such as "30s")`
		}
		n, _ := strconv.Atoi(line)
		c, _ := strconv.Atoi(column) // 0 when the message has no column
		key := keys[yamlPos{n, c}]
		if key == "" {
			key = keys[yamlPos{n, 0}]
		}
		if key != "" {
			msg = key + ": " + msg
		}
		msgs[i] = fmt.Sprintf("line %s: %s", line, msg)
	}
	return errors.New(strings.Join(msgs, "; "))
}

// yamlFractions returns the error of the numbers of YAML data, decoded
// into v, that are not whole and go to integer fields, which yaml.v3
// fills with the number truncated ("2.5" as 2, "-.inf" as the lowest
// int64) instead of refusing it, and of the whole ones past 64 bits, which
// it converts without an overflow check ("-1e300" as the lowest int64).
// Other whole numbers written as floats ("4e9") are left to yaml.v3, which
// reads them exactly or refuses them as too large for their field.
func yamlFractions(data []byte, v any) error {
	var doc yaml.Node
	if yaml.Unmarshal(data, &doc) != nil || len(doc.Content) == 0 {
		return nil
	}
	var msgs []string
	var walk func(n *yaml.Node, t reflect.Type, key string)
	walk = func(n *yaml.Node, t reflect.Type, key string) {
		for t.Kind() == reflect.Pointer {
			t = t.Elem()
		}
		if reflect.PointerTo(t).Implements(reflect.TypeFor[yaml.Unmarshaler]()) {
			return // a choice reads its own text
		}
		switch {
		case n.Kind == yaml.AliasNode:
			walk(n.Alias, t, key)
		case n.Kind == yaml.MappingNode && t.Kind() == reflect.Struct:
			for i := 0; i+1 < len(n.Content); i += 2 {
				name := n.Content[i].Value
				for j := range t.NumField() {
					if tag, _, _ := strings.Cut(t.Field(j).Tag.Get("yaml"), ","); tag == name {
						walk(n.Content[i+1], t.Field(j).Type, strings.TrimPrefix(key+"."+name, "."))
					}
				}
			}
		case n.Kind == yaml.MappingNode && t.Kind() == reflect.Map:
			for i := 0; i+1 < len(n.Content); i += 2 {
				walk(n.Content[i+1], t.Elem(), key+"."+n.Content[i].Value)
			}
		case n.Kind == yaml.SequenceNode && (t.Kind() == reflect.Slice || t.Kind() == reflect.Array):
			for i, e := range n.Content {
				walk(e, t.Elem(), fmt.Sprintf("%s[%d]", key, i))
			}
		case n.Kind == yaml.ScalarNode && n.ShortTag() == "!!float" && t != reflect.TypeFor[time.Duration]() &&
			(t.Kind() >= reflect.Int && t.Kind() <= reflect.Int64 || t.Kind() >= reflect.Uint && t.Kind() <= reflect.Uintptr):
			var f float64
			if n.Decode(&f) != nil || f != math.Trunc(f) || math.IsInf(f, 0) {
				msgs = append(msgs, fmt.Sprintf("line %d: %s: %s is not a whole number", n.Line, key, n.Value))
				return
			}
			// yaml.v3 converts the float to a 64-bit integer before its
			// overflow check, and Go's conversion of one out of range
			// gives any value (-1e300 read as the lowest int64).
			lo, hi := float64(math.MinInt64), float64(1<<63)
			if t.Kind() >= reflect.Uint {
				lo, hi = 0, float64(1<<64)
			}
			if f < lo || f >= hi {
				msgs = append(msgs, fmt.Sprintf("line %d: %s: %s is out of range", n.Line, key, n.Value))
			}
		}
	}
	walk(doc.Content[0], reflect.TypeOf(v), "")
	if len(msgs) > 0 {
		return errors.New(strings.Join(msgs, "; "))
	}
	return nil
}

// endOfYAML checks that what dec has left are empty documents.
func endOfYAML(dec *yaml.Decoder) error {
	for {
		var doc yaml.Node
		err := dec.Decode(&doc)
		switch {
		case errors.Is(err, io.EOF):
			return nil
		case err != nil:
			return err
		}
		if len(doc.Content) > 0 && doc.Content[0].Tag != "!!null" {
			return fmt.Errorf("line %d: a second YAML document (after \"---\"); the config is one document, the keys of another would be ignored", doc.Content[0].Line)
		}
	}
}

// yamlPos is a line and a column of a YAML file, both from 1; column 0
// stands for the whole line.
type yamlPos struct{ line, column int }

// yamlKeys maps the lines of a YAML mapping's keys and values, and the
// positions of its values that are not mappings, to the keys (nested
// keys joined by dots, "kafka.linger"), to name the key in yaml.v3
// errors, which give a line (and a choice's a column too).
func yamlKeys(data []byte) map[yamlPos]string {
	var doc yaml.Node
	if yaml.Unmarshal(data, &doc) != nil || len(doc.Content) == 0 || doc.Content[0].Kind != yaml.MappingNode {
		return nil
	}
	keys := make(map[yamlPos]string)
	var walk func(m *yaml.Node, prefix string)
	walk = func(m *yaml.Node, prefix string) {
		for i := 0; i+1 < len(m.Content); i += 2 {
			key, v := prefix+m.Content[i].Value, m.Content[i+1]
			lines := []int{m.Content[i].Line}
			if v.Kind != yaml.MappingNode { // a mapping's line is its first key's
				lines = append(lines, v.Line)
				keys[yamlPos{v.Line, v.Column}] = key
			}
			for _, line := range lines {
				if _, ok := keys[yamlPos{line, 0}]; !ok { // on a line with several keys, the first names it
					keys[yamlPos{line, 0}] = key
				}
			}
			if v.Kind == yaml.MappingNode {
				walk(v, key+".")
			}
		}
	}
	walk(doc.Content[0], "")
	return keys
}

// Validate checks every field and how they go together, and returns all
// the problems found, each naming its config key and flag. A choice
// (Acks, LogFormat, ...) needs no check of its own: it checked its name
// when it was read, and holds one of its constants.
func (s Server) Validate() error {
	var errs []error
	bad := func(key, format string, args ...any) {
		errs = append(errs, fmt.Errorf("%s: %s", keyWithFlag(key), fmt.Sprintf(format, args...)))
	}
	if s.Bucket == "" {
		bad("bucket", "required")
	} else if _, err := ParseBucketURL(s.Bucket); err != nil {
		bad("bucket", "%v", err)
	}
	if s.S3Endpoint != "" {
		if err := validateEndpoint(s.S3Endpoint); err != nil {
			bad("s3_endpoint", "%v", err)
		}
	}
	if err := modelconfig.ValidateModelPath(s.ModelConfig); err != nil {
		bad("model_config", "%v", err)
	} else if strings.HasSuffix(s.ModelConfig, "/") {
		bad("model_config", "%q names a directory; it must name the config object", s.ModelConfig)
	}
	if err := validateHostPort(s.HTTP); err != nil {
		bad("http", "%v", err)
	}
	if s.GRPC != "off" {
		if err := validateHostPort(s.GRPC); err != nil {
			bad("grpc", "%v (or off)", err)
		} else if sameListener(s.GRPC, s.HTTP) {
			bad("grpc", "%s is also the HTTP address", s.GRPC)
		}
	}
	if s.AdminHTTP != "" {
		if err := validateHostPort(s.AdminHTTP); err != nil {
			bad("admin_http", "%v", err)
		} else if sameListener(s.AdminHTTP, s.HTTP) || sameListener(s.AdminHTTP, s.GRPC) {
			bad("admin_http", "%s is also the HTTP or gRPC address", s.AdminHTTP)
		}
	}
	if s.AdminGRPC != "" {
		if err := validateHostPort(s.AdminGRPC); err != nil {
			bad("admin_grpc", "%v", err)
		} else if sameListener(s.AdminGRPC, s.HTTP) || sameListener(s.AdminGRPC, s.GRPC) || sameListener(s.AdminGRPC, s.AdminHTTP) {
			bad("admin_grpc", "%s is also the HTTP, gRPC or admin HTTP address", s.AdminGRPC)
		}
	}
	for _, d := range []struct {
		key string
		v   time.Duration
	}{{"http_read_header_timeout", s.HTTPReadHeaderTimeout}, {"http_idle_timeout", s.HTTPIdleTimeout},
		{"http_read_timeout", s.HTTPReadTimeout}, {"http_write_timeout", s.HTTPWriteTimeout},
		{"grpc_keepalive_min_time", s.GRPCKeepaliveMinTime}, {"grpc_max_connection_idle", s.GRPCMaxConnectionIdle},
		{"grpc_keepalive_time", s.GRPCKeepaliveTime}, {"grpc_keepalive_timeout", s.GRPCKeepaliveTimeout}} {
		if d.v <= 0 {
			bad(d.key, "%v must be positive", d.v)
		}
	}
	if s.HTTPEngine != HTTPEngineAuto && s.HTTPEngine != HTTPEngineNetHTTP && s.HTTPEngine != HTTPEngineH1 {
		bad("http_engine", "%q is not a server Grove has: use %s, %s or %s", s.HTTPEngine, HTTPEngineAuto, HTTPEngineH1, HTTPEngineNetHTTP)
	}
	if s.HTTPMaxHeaderBytes < 1024 {
		bad("http_max_header_bytes", "%d is below the minimum of 1024", s.HTTPMaxHeaderBytes)
	}
	for _, l := range []struct {
		key string
		n   int
	}{{"http_max_connections", s.HTTPMaxConnections}, {"admin_http_max_connections", s.AdminHTTPMaxConnections}} {
		if l.n < 1 {
			bad(l.key, "%d must be positive", l.n)
		}
	}
	if s.GRPCMaxConcurrentStreams < 1 {
		bad("grpc_max_concurrent_streams", "%d must be positive", s.GRPCMaxConcurrentStreams)
	}
	if s.GRPCMaxConnections < 1 {
		bad("grpc_max_connections", "%d must be positive", s.GRPCMaxConnections)
	}
	if s.AdminGRPCMaxConnections < 1 {
		bad("admin_grpc_max_connections", "%d must be positive", s.AdminGRPCMaxConnections)
	}
	s.TLS.validate(bad)
	if !s.InsecureNoAuth && !s.AuthConfigured() {
		for _, l := range []struct{ key, addr string }{{"http", s.HTTP}, {"grpc", s.GRPC}, {"admin_http", s.AdminHTTP}, {"admin_grpc", s.AdminGRPC}} {
			if l.addr == "" || l.addr == "off" || validateHostPort(l.addr) != nil || IsLoopback(l.addr) {
				continue
			}
			bad(l.key, "%q is not a loopback address and no authentication is configured: configure "+
				"auth.tokens_file (--auth-tokens-file), auth.jwt, or client certificates (tls.client_auth (--tls-client-auth) "+
				"require with tls.client_ca_file (--tls-client-ca), roles in auth.client_roles); "+
				"or listen on 127.0.0.1; or give insecure_no_auth (--insecure-no-auth) to serve anyone who reaches the port", l.addr)
		}
	}
	if s.PollInterval < MinPollInterval {
		bad("poll_interval", "%v is below the minimum of %v", s.PollInterval, MinPollInterval)
	}
	if s.WarmUpTimeout <= 0 {
		bad("warmup_timeout", "%v must be positive", s.WarmUpTimeout)
	}
	if s.CacheDir == "" {
		bad("cache_dir", "must not be empty")
	}
	if s.MaxModelBytes <= 0 {
		bad("max_model_bytes", "%d must be positive", s.MaxModelBytes)
	}
	if s.MaxBatchRows < 1 {
		bad("max_batch_rows", "%d must be at least 1 (1 turns batching off)", s.MaxBatchRows)
	}
	if s.MaxBodyBytes <= 0 {
		bad("max_body_bytes", "%d must be positive", s.MaxBodyBytes)
	}
	if s.ShadowTimeout <= 0 {
		bad("shadow_timeout", "%v must be positive", s.ShadowTimeout)
	}
	if s.DrainTimeout < 0 {
		bad("drain_timeout", "%v must not be negative", s.DrainTimeout)
	}
	if s.MaxTimeout <= 0 {
		bad("max_timeout", "%v must be positive", s.MaxTimeout)
	}
	if s.KeepPreviousFor < 0 {
		bad("keep_previous_for", "%v must not be negative (0 turns keeping off)", s.KeepPreviousFor)
	}
	if s.IdleUnloadAfter < 0 {
		bad("idle_unload_after", "%v must not be negative (0: never)", s.IdleUnloadAfter)
	}
	if s.ShadowMicroBatchRows < 0 {
		bad("shadow_micro_batch_rows", "%d must not be negative", s.ShadowMicroBatchRows)
	}
	if s.ShadowWorkers < 1 || s.ShadowWorkers > 64 {
		bad("shadow_workers", "%d must be between 1 and 64", s.ShadowWorkers)
	}
	if s.ShadowQueue < 0 {
		bad("shadow_queue", "%d must not be negative", s.ShadowQueue)
	}
	if t := s.ShadowCompareTolerance; !(t > 0) || math.IsInf(t, 0) {
		bad("shadow_compare_tolerance", "%v must be a positive number", t)
	}
	if s.ShadowCompareWindow < 1 || s.ShadowCompareWindow > 1000000 {
		bad("shadow_compare_window", "%d must be between 1 and 1000000", s.ShadowCompareWindow)
	}
	if s.ModelQueueSize <= 0 {
		bad("model_queue_size", "%d must be positive", s.ModelQueueSize)
	}
	if s.IntraOpThreads <= 0 {
		bad("intra_op_threads", "%d must be positive", s.IntraOpThreads)
	}
	s.Kafka.validate(bad)
	s.PredictionLog.validate(bad, s.Kafka.Enabled())
	s.Outcomes.validate(bad, s.Kafka)
	s.Auth.validate(bad)
	if s.MemoryBudgetBytes < 0 {
		bad("memory_budget_bytes", "%d must not be negative", s.MemoryBudgetBytes)
	}
	if s.DiskCacheBytes < 0 {
		bad("disk_cache_bytes", "%d must not be negative (0: no disk cache)", s.DiskCacheBytes)
	}
	s.validateCluster(bad)
	return errors.Join(errs...)
}

// GRPCServesModelWrites reports whether the gRPC listener serves the B&A
// sidecar's RegisterModel and DeleteModel itself, RegisterModel with
// MaxModelBytes as its message limit: only on a loopback address without
// authentication (AuthConfigured), the sidecar's own layout, where the
// bidding server registers models beside Predict and whoever can call the
// port may already do anything. Elsewhere the gRPC listener's limit is
// MaxBodyBytes for every method, and the two are served on AdminGRPC
// alone.
func (s Server) GRPCServesModelWrites() bool { return IsLoopback(s.GRPC) && !s.AuthConfigured() }

// IsLoopback reports whether the host of host:port addr is a loopback
// address or localhost; an empty host (every interface) is not.
func IsLoopback(addr string) bool {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return false
	}
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// validateCluster reports the problems of the cluster section (and of
// the listeners it must not share a port with) through bad.
func (s Server) validateCluster(bad func(key, format string, args ...any)) {
	c := s.Cluster
	if !c.Enabled() {
		for _, k := range []struct {
			key string
			set bool
		}{{"cluster.advertise", c.Advertise != ""}, {"cluster.etcd_tls", c.EtcdTLS}, {"cluster.etcd_ca_file", c.EtcdCAFile != ""},
			{"cluster.etcd_cert_file", c.EtcdCertFile != ""}, {"cluster.etcd_key_file", c.EtcdKeyFile != ""}} {
			if k.set {
				bad(k.key, "is set but the cluster is off: set cluster.etcd_endpoints (--cluster-etcd-endpoints), or remove it")
			}
		}
		return
	}
	for _, e := range c.EtcdEndpoints {
		if host, _, err := net.SplitHostPort(e); err != nil || host == "" {
			bad("cluster.etcd_endpoints", "%q is not host:port", e)
		} else if err := validateHostPort(e); err != nil {
			bad("cluster.etcd_endpoints", "%v", err)
		}
	}
	if !strings.HasPrefix(c.EtcdPrefix, "/") {
		bad("cluster.etcd_prefix", "%q must start with \"/\"", c.EtcdPrefix)
	}
	if !c.EtcdTLS && (c.EtcdCAFile != "" || c.EtcdCertFile != "" || c.EtcdKeyFile != "") {
		bad("cluster.etcd_tls", "is false but TLS files are set; set it to true")
	}
	if (c.EtcdCertFile == "") != (c.EtcdKeyFile == "") {
		bad("cluster.etcd_cert_file", "etcd_cert_file and etcd_key_file go together: set both or neither")
	}
	switch {
	case c.NodeName == "":
		bad("cluster.node_name", "required in a cluster (the host name was not found)")
	case len(c.NodeName) > 253 || strings.IndexFunc(c.NodeName, func(r rune) bool {
		return !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '.' || r == '_' || r == '-')
	}) >= 0:
		bad("cluster.node_name", "%q is not 1 to 253 of ASCII letters, digits, '.', '_' and '-'", c.NodeName)
	}
	if host, port, err := net.SplitHostPort(c.Advertise); c.Advertise == "" {
		bad("cluster.advertise", "required in a cluster: the host:port peers reach this node at")
	} else if err != nil || host == "" {
		bad("cluster.advertise", "%q is not host:port with a host peers can reach", c.Advertise)
	} else if p, err := strconv.ParseUint(port, 10, 16); err != nil || p == 0 {
		bad("cluster.advertise", "%q: port %q is not a number from 1 to 65535", c.Advertise, port)
	} else if ip := net.ParseIP(host); ip != nil && ip.IsUnspecified() {
		bad("cluster.advertise", "%q: %s is every interface, not an address peers can reach", c.Advertise, host)
	} else {
		for _, l := range []struct{ key, addr string }{{"http", s.HTTP}, {"grpc", s.GRPC}, {"admin_http", s.AdminHTTP}, {"admin_grpc", s.AdminGRPC}} {
			if _, lp, err := net.SplitHostPort(l.addr); err == nil && lp == port {
				bad("cluster.advertise", "%q has the port of %s; the peers' port is a port of its own", c.Advertise, keyWithFlag(l.key))
			}
		}
	}
	if c.LeaseTTL < 2*time.Second || c.LeaseTTL > time.Minute || c.LeaseTTL%time.Second != 0 {
		bad("cluster.lease_ttl", "%v is not whole seconds from 2s to 1m (etcd leases count seconds)", c.LeaseTTL)
	}
	if !(c.MemoryFactor > 0 && c.MemoryFactor <= 100) {
		bad("cluster.memory_factor", "%v is not a number above 0 and at most 100", c.MemoryFactor)
	}
	if s.MemoryBudgetBytes <= 0 {
		bad("memory_budget_bytes", "required in a cluster: the bytes of memory this node gives models")
	}
	if !(s.TLS.Enabled() && s.TLS.ClientCAFile != "") && !s.InsecureNoAuth {
		bad("cluster.advertise", "peers cannot be authenticated: configure tls.cert_file, tls.key_file and tls.client_ca_file "+
			"(mTLS between nodes; peers present the server certificate, which needs the clientAuth usage too), "+
			"or give insecure_no_auth (--insecure-no-auth) to serve plaintext peers")
	}
}

// validate reports the problems of the tls section through bad.
func (t TLS) validate(bad func(key, format string, args ...any)) {
	if (t.CertFile == "") != (t.KeyFile == "") {
		bad("tls.cert_file", "cert_file and key_file go together: set both or neither")
	}
	if !t.Enabled() && (t.ClientCAFile != "" || t.ClientAuth != ClientAuthNone) {
		bad("tls.client_ca_file", "client certificates need TLS: set tls.cert_file (--tls-cert) and tls.key_file (--tls-key)")
	}
	if t.ClientAuth != ClientAuthNone && t.ClientCAFile == "" {
		bad("tls.client_auth", "%s needs tls.client_ca_file (--tls-client-ca)", t.ClientAuth)
	}
	if t.ReloadInterval <= 0 {
		bad("tls.reload_interval", "%v must be positive", t.ReloadInterval)
	}
}

// MaxEmbeddedPartitions is the most partitions kafka.embedded_partitions
// accepts.
const MaxEmbeddedPartitions = 64

// kafkaTopicChars are the characters Kafka allows in a topic name.
var kafkaTopicChars = regexp.MustCompile(`^[a-zA-Z0-9._-]+$`)

// validate reports the problems of the kafka section through bad.
func (k Kafka) validate(bad func(key, format string, args ...any)) {
	if k.Embedded && len(k.Brokers) > 0 {
		bad("kafka.embedded", "the embedded broker and brokers are exclusive: set kafka.brokers (--kafka-brokers) or kafka.embedded (--kafka-embedded), not both")
	}
	for _, b := range k.Brokers {
		if host, _, err := net.SplitHostPort(b); err != nil || host == "" {
			bad("kafka.brokers", "%q is not host:port", b)
		} else if err := validateHostPort(b); err != nil {
			bad("kafka.brokers", "%v", err)
		}
	}
	validateTopic(bad, "kafka.topic", k.Topic)
	if k.BufferRecords <= 0 {
		bad("kafka.buffer_records", "%d must be positive", k.BufferRecords)
	}
	if k.BufferBytes <= 0 {
		bad("kafka.buffer_bytes", "%d must be positive", k.BufferBytes)
	}
	if k.Embedded {
		if host, _, err := net.SplitHostPort(k.EmbeddedAddr); err != nil {
			bad("kafka.embedded_addr", "%q is not host:port: %v", k.EmbeddedAddr, err)
		} else if err := validateHostPort(k.EmbeddedAddr); err != nil {
			bad("kafka.embedded_addr", "%v", err)
		} else if ip := net.ParseIP(host); host != "localhost" && (ip == nil || !ip.IsLoopback()) {
			bad("kafka.embedded_addr", "%q: the development broker listens only on a loopback address (127.0.0.1, ::1 or localhost)", k.EmbeddedAddr)
		}
		if k.EmbeddedPartitions < 1 || k.EmbeddedPartitions > MaxEmbeddedPartitions {
			bad("kafka.embedded_partitions", "%d must be from 1 to %d", k.EmbeddedPartitions, MaxEmbeddedPartitions)
		}
	}
	if k.ClientID == "" {
		bad("kafka.client_id", "must not be empty")
	}
	if k.Linger < 0 || k.Linger > time.Minute {
		bad("kafka.linger", "%v is not between 0s and 1m", k.Linger)
	}
	t := k.TLS
	if !t.Enabled && (t.CAFile != "" || t.CertFile != "" || t.KeyFile != "" || t.InsecureSkipVerify) {
		bad("kafka.tls.enabled", "is false but other kafka.tls keys are set; set enabled: true")
	}
	if (t.CertFile == "") != (t.KeyFile == "") {
		bad("kafka.tls.cert_file", "cert_file and key_file go together: set both or neither")
	}
	switch {
	case k.SASL.Mechanism == SASLNone:
		if k.SASL.Username != "" || k.SASL.Password != "" {
			bad("kafka.sasl.mechanism", "is empty but a username or password is set; set PLAIN, SCRAM-SHA-256 or SCRAM-SHA-512")
		}
	case k.SASL.Username == "":
		bad("kafka.sasl.username", "required with mechanism %s", k.SASL.Mechanism)
	}
}

// validateTopic reports through bad, under key, a topic name Kafka would
// refuse.
func validateTopic(bad func(key, format string, args ...any), key, topic string) {
	switch {
	case topic == "":
		bad(key, "must not be empty")
	case len(topic) > 249 || topic == "." || topic == ".." || !kafkaTopicChars.MatchString(topic):
		bad(key, "%q is not a Kafka topic name (at most 249 of a-z, A-Z, 0-9, '.', '_', '-'; not \".\" or \"..\")", topic)
	}
}

// validate reports the problems of the outcomes section through bad: a
// topic Kafka would refuse, or the prediction log's own (k's).
func (o Outcomes) validate(bad func(key, format string, args ...any), k Kafka) {
	validateTopic(bad, "outcomes.topic", o.Topic)
	if o.Topic == k.Topic {
		bad("outcomes.topic", "%q is also kafka.topic (--kafka-topic): outcomes and prediction events need topics of their own", o.Topic)
	}
	validateTopic(bad, "outcomes.evaluations_topic", o.EvaluationsTopic)
	if o.EvaluationsTopic == k.Topic || o.EvaluationsTopic == o.Topic {
		bad("outcomes.evaluations_topic", "%q is also kafka.topic or outcomes.topic: the evaluations need a topic of their own", o.EvaluationsTopic)
	}
	// The group name prefixes the internal topics.
	validateTopic(bad, "outcomes.group", o.Group+"-changelog")
	if o.CommitInterval < 10*time.Millisecond || o.CommitInterval > time.Minute {
		bad("outcomes.commit_interval", "%v must be from 10ms to 1m", o.CommitInterval)
	}
	if o.Evaluate && !k.Enabled() {
		bad("outcomes.evaluate", "needs Kafka, which is off: set kafka.brokers (--kafka-brokers) or kafka.embedded (--kafka-embedded)")
	}
}

// validate reports the problems of the prediction_log section through
// bad; kafka tells whether a broker is configured.
func (p PredictionLog) validate(bad func(key, format string, args ...any), kafka bool) {
	if p.DefaultLevel != PredictionLogNone && !kafka {
		bad("prediction_log.default_level", "%s needs Kafka, which is off: set kafka.brokers (--kafka-brokers) or kafka.embedded (--kafka-embedded), or use NONE", p.DefaultLevel)
	}
	if !(p.DefaultSampleRate >= 0 && p.DefaultSampleRate <= 1) { // also rejects NaN
		bad("prediction_log.default_sample_rate", "%v is not between 0 and 1", p.DefaultSampleRate)
	}
	seen := make(map[string]bool, len(p.DefaultKeyFeatures))
	for _, f := range p.DefaultKeyFeatures {
		switch {
		case f == "":
			bad("prediction_log.default_key_features", "a feature name is empty")
		case seen[f]:
			bad("prediction_log.default_key_features", "%q is listed twice", f)
		}
		seen[f] = true
	}
}

// validate reports the problems of the auth section through bad. The
// files' contents are checked when the server reads them.
func (a Auth) validate(bad func(key, format string, args ...any)) {
	roles := func(key string, names []string) {
		if len(names) == 0 {
			bad(key, "lists no role (roles: infer, read, manage, admin, feedback)")
		}
		for _, n := range names {
			if _, err := auth.ParseRole(n); err != nil {
				bad(key, "%v", err)
			}
		}
	}
	for name, rs := range a.ClientRoles {
		if name == "" {
			bad("auth.client_roles", "a certificate name is empty")
		}
		roles(fmt.Sprintf("auth.client_roles.%s", name), rs)
	}
	j := a.JWT
	if j.JWKSFile != "" {
		if j.Issuer == "" {
			bad("auth.jwt.issuer", "required with auth.jwt.jwks_file")
		}
		if j.Audience == "" {
			bad("auth.jwt.audience", "required with auth.jwt.jwks_file")
		}
	} else if j.Issuer != "" || j.Audience != "" {
		bad("auth.jwt.jwks_file", "required with auth.jwt.issuer and auth.jwt.audience")
	}
	if j.RolesClaim == "" {
		bad("auth.jwt.roles_claim", "must not be empty")
	}
	for i, l := range a.Limits {
		key := fmt.Sprintf("auth.limits[%d]", i)
		switch {
		case (l.Name == "") == (l.Role == ""):
			bad(key, "set name or role, not both")
		case l.Role != "":
			if _, err := auth.ParseRole(l.Role); err != nil {
				bad(key+".role", "%v", err)
			}
		default:
			if _, _, err := auth.ParseQualified(l.Name); err != nil {
				bad(key+".name", "%v", err)
			}
		}
		if !(l.RPS > 0) || math.IsInf(l.RPS, 0) {
			bad(key+".rps", "%v must be a positive number", l.RPS)
		}
		if l.Burst < 1 {
			bad(key+".burst", "%d must be at least 1", l.Burst)
		}
	}
	if a.MaxInFlightPerIdentity < 0 {
		bad("auth.max_inflight_per_identity", "%d must not be negative (0: no limit)", a.MaxInFlightPerIdentity)
	}
	if len(a.Limits) > 0 && !a.Enabled() {
		bad("auth.limits", "limit identities, which need authentication: set auth.tokens_file (--auth-tokens-file), auth.jwt or auth.client_roles")
	}
}

// AuthConfig is the auth section as the authenticator takes it (roles
// parsed; call it on a validated Server).
func (a Auth) AuthConfig() auth.Config {
	c := auth.Config{TokensFile: a.TokensFile,
		JWT:         auth.JWTConfig{JWKSFile: a.JWT.JWKSFile, Issuer: a.JWT.Issuer, Audience: a.JWT.Audience, RolesClaim: a.JWT.RolesClaim},
		MaxInFlight: a.MaxInFlightPerIdentity}
	if len(a.ClientRoles) > 0 {
		c.ClientRoles = make(map[string][]auth.Role, len(a.ClientRoles))
		for name, rs := range a.ClientRoles {
			for _, r := range rs {
				c.ClientRoles[name] = append(c.ClientRoles[name], auth.Role(r))
			}
		}
	}
	for _, l := range a.Limits {
		c.Limits = append(c.Limits, auth.Limit{Name: l.Name, Role: auth.Role(l.Role), RPS: l.RPS, Burst: l.Burst})
	}
	return c
}

// validateEndpoint accepts an http:// or https:// URL with a host and
// nothing after the path.
func validateEndpoint(endpoint string) error {
	u, err := url.Parse(endpoint)
	switch {
	case err != nil || u.Scheme != "http" && u.Scheme != "https" || u.Host == "":
		return fmt.Errorf("%q is not an http:// or https:// URL with a host, such as http://127.0.0.1:9000", endpoint)
	case u.User != nil || u.RawQuery != "" || u.ForceQuery || strings.Contains(endpoint, "#"):
		return fmt.Errorf("%q: an endpoint has no user information, query or fragment", endpoint)
	}
	if _, err := strconv.ParseUint(u.Port(), 10, 16); u.Port() != "" && err != nil {
		return fmt.Errorf("%q: port %q is not a number from 0 to 65535", endpoint, u.Port())
	}
	return nil
}

// sameListener reports whether two listener addresses name the same
// port; port 0 (the system picks a free port for each) never does.
func sameListener(a, b string) bool {
	if _, port, err := net.SplitHostPort(a); err == nil && port == "0" {
		return false
	}
	return a == b
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
// configured level.
func (s Server) NewLogger(w io.Writer) *slog.Logger {
	opts := &slog.HandlerOptions{Level: s.LogLevel}
	if s.LogFormat == LogFormatJSON {
		return slog.New(slog.NewJSONHandler(w, opts))
	}
	return slog.New(slog.NewTextHandler(w, opts)) // LogFormatText
}
