package main

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"math"
	"net"
	"net/http"
	"os"
	"os/signal"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/trace"

	"github.com/groveml/grove/actors"
	clusternode "github.com/groveml/grove/actors/node"
	"github.com/groveml/grove/api/ba"
	"github.com/groveml/grove/api/console"
	"github.com/groveml/grove/api/deeprec"
	"github.com/groveml/grove/api/forestflow"
	"github.com/groveml/grove/api/graphpipe"
	"github.com/groveml/grove/api/manage"
	"github.com/groveml/grove/api/oip"
	"github.com/groveml/grove/api/outcomes"
	"github.com/groveml/grove/api/sidecar"
	"github.com/groveml/grove/api/sidecar/sidecarpb"
	"github.com/groveml/grove/auth"
	"github.com/groveml/grove/conf"
	"github.com/groveml/grove/conf/modelconfig"
	"github.com/groveml/grove/internal/mallocarena"
	"github.com/groveml/grove/logging"
	"github.com/groveml/grove/logging/audit"
	"github.com/groveml/grove/logging/outcome"
	"github.com/groveml/grove/logging/outcome/evaluations"
	"github.com/groveml/grove/servables"
	"github.com/groveml/grove/servables/runtimes"
	"github.com/groveml/grove/tracing"
	"github.com/groveml/grove/transport/connlimit"
	"github.com/groveml/grove/transport/grpcserver"
	"github.com/groveml/grove/transport/h2guard"
	"github.com/groveml/grove/transport/httpserver"
	"github.com/groveml/grove/transport/tlsconf"
	"github.com/groveml/grove/ui"
)

// instanceID names this process in prediction events: host name and pid.
func instanceID() string {
	host, _ := os.Hostname()
	return fmt.Sprintf("%s/%d", host, os.Getpid())
}

// serve runs the server until SIGTERM or SIGINT, then drains and exits 0.
func serve(args []string, stderr io.Writer) int {
	cfg, err := conf.ParseServerArgs(args)
	if err != nil {
		if errors.Is(err, flag.ErrHelp) {
			conf.PrintServerUsage(stderr)
			return 0
		}
		fmt.Fprintf(stderr, "grove serve: %v\n(grove serve -h lists the flags)\n", err)
		return 2
	}
	log := cfg.NewLogger(stderr)
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	if err := serveUntil(ctx, cfg, log); err != nil {
		log.Error("grove serve failed", "err", err)
		return 1
	}
	return 0
}

// drainShares are the shares of drain_timeout reserved for the stages
// that stop last (see group): whatever the servers, the actors or the
// prediction log take (a Kafka broker that does not answer), the audit
// trail still has a fifth of drain_timeout to write its queued entries,
// and the bucket client and the tracer their own.
func drainShares() map[string]float64 {
	return map[string]float64{"audit": 0.2, "bucket": 0.05, "tracing": 0.05}
}

// serveUntil serves until ctx is done or a server fails. The server's
// components form a run group (see group), started in this order and
// stopped in the reverse one, all within drain_timeout, shared out as
// drainShares says:
//
//  1. signals: ctx done (SIGTERM or SIGINT) starts the shutdown;
//  2. readiness off: /readyz and gRPC health answer NOT_SERVING;
//  3. servers: HTTP (and admin HTTP) and gRPC stop taking requests and
//     drain those in flight, together (what is still running at the
//     deadline is cut); then the TLS file reload and the hourly
//     --insecure-no-auth warning, when they run;
//  4. actors: polling stops, every model is closed;
//  5. evaluations: the reader of the evaluator's results stops (with
//     Kafka);
//  6. prediction log: the producer flushes its buffer (and stops the
//     embedded broker if it started one);
//  7. tracing: the tracer provider exports the spans it still holds.
func serveUntil(ctx context.Context, cfg conf.Server, log *slog.Logger) error {
	g := group{stopTimeout: cfg.DrainTimeout, log: log, shares: drainShares()}
	tp, err := startTracing(ctx, &g, log)
	if err != nil {
		return err
	}
	b, err := openBucket(ctx, cfg)
	if err != nil {
		return fmt.Errorf("opening bucket: %w", err)
	}
	g.add("bucket", component{name: "bucket", interrupt: func(context.Context) {
		if c, ok := b.(io.Closer); ok {
			if err := c.Close(); err != nil {
				log.Warn("closing the bucket", "err", err)
			}
		}
	}})
	reg := prometheus.NewRegistry()
	trims := prometheus.NewCounter(prometheus.CounterOpts{Name: "grove_c_heap_trims_total",
		Help: "Times grove handed the C heap's free pages back to the system (malloc_trim) because malloc held more than 16 MiB free."})
	// Go's default metrics, and its stop-the-world pauses, which stop
	// every request served meanwhile.
	pauses := collectors.GoRuntimeMetricsRule{Matcher: regexp.MustCompile(`^/sched/pauses/`)}
	reg.MustRegister(collectors.NewGoCollector(collectors.WithGoCollectorRuntimeMetrics(pauses)), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}),
		newCHeapCollector(), trims)
	g.add("c heap trim", trimCHeap(trims))
	// The connection counts of every listener, HTTP and gRPC: one set per
	// process (connlimit.NewMetrics registers them).
	conns := connlimit.NewMetrics(reg)
	// The host's BLAS, its threads set before any model loads. Without the
	// TorchScript runtime's library, only TorchScript models fail to load.
	blas, err := runtimes.BLAS(cfg.TorchLib)
	hasBLAS := err == nil
	if hasBLAS {
		logBLAS(log, blas)
		reg.MustRegister(blasInfo(blas))
	} else {
		log.Warn("TorchScript runtime unavailable: TorchScript models will not load", "err", err)
	}
	// The audit trail stops after the servers and the actors, so the
	// writes they finish while draining are recorded.
	trail := audit.New(audit.Options{Bucket: b, Dir: audit.DirOf(cfg.ModelConfig), Logger: log.With("component", "audit"),
		Registerer: reg, Replica: instanceID()})
	g.add("audit", component{name: "audit", interrupt: func(ctx context.Context) {
		if err := trail.Close(ctx); err != nil {
			log.Warn("closing the audit trail", "err", err)
		}
	}})
	cacheDir := filepath.Join(cfg.CacheDir, "models")
	// Grove owns cacheDir/models: copies left by an earlier run are stale.
	if err := os.RemoveAll(cacheDir); err != nil {
		return g.abort(fmt.Errorf("clearing model cache: %w", err))
	}
	if err := os.MkdirAll(cacheDir, 0o755); err != nil {
		return g.abort(fmt.Errorf("creating model cache: %w", err))
	}
	policy, err := logging.PolicyFromConfig(cfg.PredictionLog)
	if err != nil {
		return g.abort(err)
	}

	producer, err := logging.New(cfg.Kafka, logging.WithLogger(log.With("component", "prediction-log")),
		logging.WithInstanceID(instanceID()), logging.WithRegisterer(reg), logging.WithTopics(cfg.Outcomes.Topic),
		logging.WithEvaluator(cfg.CacheDir, cfg.Outcomes))
	if err != nil {
		return g.abort(fmt.Errorf("starting the prediction log: %w", err))
	}
	if producer != nil {
		st := producer.Stats()
		log.Info("prediction log on Kafka", "brokers", st.Brokers, "topic", st.Topic, "encoding", st.Encoding,
			"embedded", st.Embedded, "direct_call_level", policy.Level.String(), "key_by", cfg.PredictionLog.KeyBy.String(),
			"outcomes_topic", cfg.Outcomes.Topic)
	}
	// Outcomes are produced through the prediction log's client; without
	// Kafka there is no sink, and their routes answer that it is off.
	var outcomeSink outcomes.Sink
	if producer != nil {
		outcomeSink = outcome.NewWriter(producer, cfg.Outcomes.Topic)
	}
	g.add("prediction log", component{name: "prediction log", interrupt: func(ctx context.Context) {
		if err := producer.Close(ctx); err != nil {
			log.Warn("prediction log not fully flushed within the drain timeout", "err", err, "stats", producer.Stats())
		}
	}})
	// The evaluator's results, read back from their topic whenever Kafka
	// is on, whoever wrote them (this server with --evaluate, or a grove
	// evaluate elsewhere): the outcome figures of the release gates, the
	// stats and the grove_outcome_* metrics.
	var outcomeSource actors.OutcomeSource
	if producer != nil {
		evaluated := evaluations.NewTable()
		reg.MustRegister(evaluated)
		sec, err := logging.SecurityOptions(cfg.Kafka)
		if err != nil {
			return g.abort(err)
		}
		g.add("evaluations", followEvaluations(evaluated, evaluations.FollowOptions{Brokers: producer.Stats().Brokers,
			Topic: cfg.Outcomes.EvaluationsTopic, Kgo: sec, Logger: log.With("component", "evaluations")}))
		outcomeSource = evaluated
	}

	// The TLS files are read before the actors start: a cluster node's
	// forward client presents the server's certificate to its peers.
	var tlsFiles *tlsconf.Reloader
	if cfg.TLS.Enabled() {
		tlsFiles, err = tlsconf.New(tlsconf.Files{CertFile: cfg.TLS.CertFile, KeyFile: cfg.TLS.KeyFile,
			ClientCAFile: cfg.TLS.ClientCAFile, ClientAuth: tlsClientAuth(cfg.TLS.ClientAuth)})
		if err != nil {
			return g.abort(fmt.Errorf("tls: %w", err))
		}
		g.add("tls reload", watchTLS(tlsFiles, cfg.TLS.ReloadInterval, log))
	}
	var node *clusternode.Agent
	var remote actors.Remote
	if cfg.Cluster.Enabled() {
		node, err = startClusterNode(ctx, cfg, b, tlsFiles, &g, reg, log)
		if err != nil {
			return g.abort(err)
		}
		remote = node
	}

	baOpts := ba.ParseOptions{AcceptUnquotedNumbers: cfg.BAAcceptUnquotedNumbers}
	// Without Kafka nothing is logged: no sink, so no "log" spans either.
	var predictions actors.PredictionSink
	if producer != nil {
		predictions = &actors.PredictionLog{Producer: producer, Direct: policy, KeyBy: cfg.PredictionLog.KeyBy}
	}
	sys, err := actors.Start(actors.Options{
		ClusterNode:          node != nil,
		Remote:               remote,
		Predictions:          predictions,
		Outcomes:             outcomeSource,
		DirectLogLevel:       cfg.PredictionLog.DefaultLevel.String(),
		Bucket:               b,
		ModelConfigPath:      cfg.ModelConfig,
		PollInterval:         cfg.PollInterval,
		WarmUpTimeout:        cfg.WarmUpTimeout,
		KeepPreviousFor:      cfg.KeepPreviousFor,
		LoadPolicy:           cfg.LoadPolicy.Model(),
		MemoryBudget:         cfg.MemoryBudgetBytes,
		DiskCacheBytes:       cfg.DiskCacheBytes,
		IdleUnloadAfter:      cfg.IdleUnloadAfter,
		MemoryFactor:         cfg.Cluster.MemoryFactor,
		CacheDir:             cacheDir,
		MaxModelBytes:        cfg.MaxModelBytes,
		QueueSize:            cfg.ModelQueueSize,
		ShadowMicroBatchRows: cfg.ShadowMicroBatchRows,
		ShadowWorkers:        cfg.ShadowWorkers,
		ShadowQueue:          cfg.ShadowQueue,
		ShadowTimeout:        cfg.ShadowTimeout,
		MaxTimeout:           cfg.MaxTimeout,
		CompareTolerance:     cfg.ShadowCompareTolerance,
		CompareWindow:        cfg.ShadowCompareWindow,
		MaxBatchRows:         cfg.MaxBatchRows,
		IntraOpThreads:       cfg.IntraOpThreads,
		Runtimes:             runtimesOf(runtimes.Libraries{ONNX: cfg.ONNXRuntimeLib, Torch: cfg.TorchLib}),
		ParseWarmUp:          baOpts.ParseWarmUp,
		Logger:               log,
		Registerer:           reg,
	})
	if err != nil {
		return g.abort(err)
	}
	g.add("actors", component{name: "actors", interrupt: func(ctx context.Context) {
		if err := sys.Stop(ctx); err != nil {
			log.Warn("stopping actors", "err", err)
		}
	}})

	if cfg.Outcomes.Evaluate && producer != nil {
		applied := func() *modelconfig.Config { c, _ := sys.AppliedConfig(); return c }
		ev, err := evaluatorComponent(cfg, producer.Stats().Brokers, applied, sys.ValidSince, producer.RetainEmbedded, log)
		if err != nil {
			return g.abort(err)
		}
		g.add("evaluator", ev)
	}

	if cfg.InsecureNoAuth && !cfg.AuthConfigured() {
		g.add("insecure warning", warnInsecure(log, time.Hour))
	}
	requireCert := tlsFiles != nil && tlsFiles.RequireClientCert()
	hopts := httpserver.Options{MaxBodyBytes: cfg.MaxBodyBytes, Logger: log, Registerer: reg, Gatherer: reg,
		Pprof: cfg.Pprof, Ready: sys.Ready, Status: func() any { return statusDocument(sys, producer, node, blasOf(blas, hasBLAS)) },
		ReadTimeout: cfg.HTTPReadTimeout, WriteTimeout: cfg.HTTPWriteTimeout, ReadHeaderTimeout: cfg.HTTPReadHeaderTimeout,
		IdleTimeout: cfg.HTTPIdleTimeout, MaxHeaderBytes: cfg.HTTPMaxHeaderBytes, RequireClientCert: requireCert, TracerProvider: tp}
	if cfg.AdminHTTP != "" {
		// The audit trail lists who changed what from where: it is read
		// beside the management API, not on the scoring port.
		// So is the web console, which reads them.
		hopts.AdminAPIs = []string{"manage", manage.RollbackAPI, "audit", "cluster", console.API, console.Prefix}
	}
	gopts := grpcserver.Options{Ready: sys.Ready, RequireClientCert: requireCert, MaxConcurrentStreams: grpcStreams(cfg.GRPCMaxConcurrentStreams),
		KeepaliveMinTime: cfg.GRPCKeepaliveMinTime, MaxConnectionIdle: cfg.GRPCMaxConnectionIdle, KeepaliveTime: cfg.GRPCKeepaliveTime,
		KeepaliveTimeout: cfg.GRPCKeepaliveTimeout, HandshakeTimeout: min(grpcHandshakeTimeout, cfg.GRPCMaxConnectionIdle), TracerProvider: tp,
		RapidReset: h2guard.Options{Listener: "grpc", Registerer: reg, Logger: log}, Logger: log}
	if cfg.Auth.Enabled() {
		ac := cfg.Auth.AuthConfig()
		ac.Logger = log.With("component", "auth")
		authn, err := auth.New(ac)
		if err != nil {
			return g.abort(fmt.Errorf("authentication: %w", err))
		}
		hopts.Auth, gopts.Auth = authn, authn
		g.add("auth", watchAuth(authn))
	}
	h := httpserver.New(hopts)
	var httpTLS *tls.Config
	if tlsFiles != nil {
		httpTLS, gopts.TLS = tlsFiles.ServerConfig("h2", "http/1.1"), tlsFiles.ServerConfig("h2")
	}
	publicOpts, adminOpts := grpcOptions(cfg, gopts)
	gs := grpcserver.New(publicOpts)
	var adminGS *grpcserver.Server // nil without admin_grpc
	if cfg.AdminGRPC != "" {
		adminGS = grpcserver.New(adminOpts)
	}
	cons := console.New(console.Options{Source: sys, Gatherer: reg, Document: hopts.Status, Assets: ui.Assets(),
		AuthRequired: cfg.Auth.TokensFile != "" || cfg.Auth.JWT.JWKSFile != "", Logger: log.With("component", "console")})
	registerAPIs(h, grpcserver.Split{Public: gs, Admin: adminGS, AdminMethods: adminGRPCMethods},
		apis{sys: sys, baOpts: baOpts, trail: trail, node: node, console: cons, outcomes: outcomeSink})
	g.add("console", runConsole(cons))

	if cfg.Auth.Enabled() {
		for _, s := range []*grpcserver.Server{gs, adminGS} {
			if s == nil {
				continue
			}
			if err := s.CheckRoles(); err != nil {
				return g.abort(err)
			}
		}
		logRoles(log, h, gs, adminGS)
		log.Info("authentication on", "tokens_file", cfg.Auth.TokensFile, "jwks_file", cfg.Auth.JWT.JWKSFile,
			"client_roles", len(cfg.Auth.ClientRoles), "limits", len(cfg.Auth.Limits))
	}
	ln, err := listen(cfg.HTTP, "http", cfg.HTTPMaxConnections, conns, log)
	if err != nil {
		return g.abort(err)
	}
	engine := cfg.ResolveHTTPEngine()
	if engine == conf.HTTPEngineH1 {
		g.add("servers", serveH1(h.NewH1Server(h.Handler(), httpTLS), ln, log))
	} else {
		g.add("servers", serveHTTP(h.NewHTTPServer(h.Handler(), httpTLS), ln, log))
	}
	adminAddr := "off"
	if cfg.AdminHTTP != "" {
		adminLn, err := listen(cfg.AdminHTTP, "admin_http", cfg.AdminHTTPMaxConnections, conns, log)
		if err != nil {
			return g.abort(err)
		}
		g.add("servers", serveHTTP(h.NewHTTPServer(h.AdminHandler(), httpTLS), adminLn, log))
		adminAddr = adminLn.Addr().String()
	}
	grpcAddr, adminGRPCAddr := "off", "off"
	if cfg.GRPC != "off" {
		grpcLn, err := listen(cfg.GRPC, "grpc", cfg.GRPCMaxConnections, conns, log)
		if err != nil {
			return g.abort(err)
		}
		g.add("servers", serveGRPC(gs, grpcLn, log))
		grpcAddr = grpcLn.Addr().String()
		log.Info("grpc listener", "listener", "grpc", "addr", grpcAddr, "max_message_bytes", grpcLimit(cfg.MaxBodyBytes),
			"max_connections", cfg.GRPCMaxConnections, "model_writes", modelWritesWhere(cfg))
	}
	if adminGS != nil {
		adminLn, err := listen(cfg.AdminGRPC, "admin_grpc", cfg.AdminGRPCMaxConnections, conns, log)
		if err != nil {
			return g.abort(err)
		}
		g.add("servers", serveGRPC(adminGS, adminLn, log))
		adminGRPCAddr = adminLn.Addr().String()
		log.Info("grpc listener", "listener", "admin_grpc", "addr", adminGRPCAddr, "max_message_bytes", grpcLimit(cfg.MaxModelBytes),
			"max_connections", cfg.AdminGRPCMaxConnections, "serves", adminGRPCMethods)
	}
	if node != nil {
		if err := serveCluster(cfg, node, sys, tlsFiles, &g, reg, log, tp); err != nil {
			return g.abort(err)
		}
	}
	g.add("readiness", component{name: "readiness", interrupt: func(context.Context) {
		log.Info("shutting down: readiness off, draining in-flight requests", "drain_timeout", cfg.DrainTimeout)
		sys.Drain()
		gs.Drain()
		if adminGS != nil {
			adminGS.Drain()
		}
	}})
	g.add("signals", untilDone(ctx))

	log.Info("grove serving", "http", ln.Addr().String(), "http_engine", engine, "grpc", grpcAddr, "admin_http", adminAddr, "admin_grpc", adminGRPCAddr, "tls", tlsFiles != nil,
		"client_auth", cfg.TLS.ClientAuth, "bucket", b.String(), "model_config", cfg.ModelConfig, "poll_interval", cfg.PollInterval,
		"malloc_arenas", mallocarena.Setting())
	err = g.run()
	log.Info("grove stopped")
	return err
}

// apis is what registerAPIs gives the APIs: the actors they serve over,
// the B&A parse options, the audit trail their writes are recorded in,
// the cluster node, the web console and where reported outcomes go.
type apis struct {
	sys      *actors.System
	baOpts   ba.ParseOptions
	trail    *audit.Trail
	node     *clusternode.Agent // nil on a single server
	console  *console.Console
	outcomes outcomes.Sink // nil without Kafka
}

// registerAPIs registers every API grove serve serves on h and gs: each
// protocol declares the role each of its routes and methods needs where
// it registers them, and GET /v1/cluster, registered here, needs manage.
func registerAPIs(h *httpserver.Server, gs grpcserver.Registrar, a apis) {
	ba.Register(h, a.sys, a.baOpts)
	sidecar.Register(gs, a.sys, a.baOpts, a.trail)
	oip.Register(h, gs, a.sys, version, a.trail)
	forestflow.Register(h, a.sys)
	graphpipe.Register(h, a.sys)
	deeprec.Register(h, gs, a.sys)
	manage.Register(h, a.sys, a.trail)
	audit.Register(h, a.trail)
	outcomes.Register(h, gs, outcomes.Options{Sink: a.outcomes})
	// Grove's own JSON route: its refusals are {"error": ...} as its
	// answers. It lists the members and their addresses: manage, as the
	// management API.
	h.SetErrorWriter("cluster", httpserver.JSONError)
	h.Handle("GET /v1/cluster", auth.RoleManage, "cluster", clusternode.Handler(a.node))
	a.console.Register(h)
}

// logRoles logs, at debug level, every HTTP route and mount of h ("http
// route"), every gRPC method of gs ("grpc method") and of admin, when
// there is one ("admin grpc method"), with the role it needs: what
// it/auth_test.go checks the binary against.
func logRoles(log *slog.Logger, h *httpserver.Server, gs, admin *grpcserver.Server) {
	for _, r := range h.Routes() {
		log.Debug("http route", "pattern", r.Pattern, "role", r.Role)
	}
	for _, m := range grpcserver.Methods(gs) {
		role, _ := gs.Role(m)
		log.Debug("grpc method", "method", m, "role", role)
	}
	if admin == nil {
		return
	}
	for _, m := range grpcserver.Methods(admin) {
		role, _ := admin.Role(m)
		log.Debug("admin grpc method", "method", m, "role", role)
	}
}

// adminGRPCMethods are the methods the admin gRPC listener serves beside
// health and reflection: the B&A sidecar's model writes, whose messages
// carry whole models (max_model_bytes), and the list of models, for the
// tool that registers them.
var adminGRPCMethods = []string{sidecarpb.InferenceService_RegisterModel_FullMethodName,
	sidecarpb.InferenceService_DeleteModel_FullMethodName, sidecarpb.InferenceService_GetModelPaths_FullMethodName}

// grpcHandshakeTimeout bounds a new gRPC connection's TLS handshake and
// HTTP/2 preface (grpc_max_connection_idle, when shorter, instead).
const grpcHandshakeTimeout = 10 * time.Second

// grpcOptions are the options of the gRPC listener and of the admin gRPC
// listener, from base, the options they share. The admin listener's
// message limit is max_model_bytes. The gRPC listener's is max_body_bytes;
// where cfg.GRPCServesModelWrites (loopback, no authentication: the B&A
// sidecar's layout) it serves RegisterModel too, up to max_model_bytes,
// checked once the message is read; elsewhere it refuses RegisterModel and
// DeleteModel, before their message is read, naming the admin listener.
func grpcOptions(cfg conf.Server, base grpcserver.Options) (public, admin grpcserver.Options) {
	public, admin = base, base
	admin.RapidReset.Listener = "admin_grpc"
	public.MaxMessageBytes, admin.MaxMessageBytes = grpcLimit(cfg.MaxBodyBytes), grpcLimit(cfg.MaxModelBytes)
	if cfg.GRPCServesModelWrites() {
		public.MethodMaxMessageBytes = map[string]int{sidecarpb.InferenceService_RegisterModel_FullMethodName: grpcLimit(cfg.MaxModelBytes)}
		return public, admin
	}
	public.ServedElsewhere = map[string]string{}
	for _, m := range []string{sidecarpb.InferenceService_RegisterModel_FullMethodName, sidecarpb.InferenceService_DeleteModel_FullMethodName} {
		name := m[strings.LastIndexByte(m, '/')+1:]
		if cfg.AdminGRPC != "" {
			public.ServedElsewhere[m] = fmt.Sprintf("%s is served on the admin gRPC listener, admin_grpc (--admin-grpc) %s, not on this one: "+
				"the gRPC listener serves it only on a loopback address without authentication", name, cfg.AdminGRPC)
		} else {
			public.ServedElsewhere[m] = fmt.Sprintf("%s is served only on the admin gRPC listener, which is off: set admin_grpc (--admin-grpc) to serve it; "+
				"the gRPC listener serves it only on a loopback address without authentication", name)
		}
	}
	return public, admin
}

// modelWritesWhere says where the B&A sidecar's RegisterModel and
// DeleteModel are served, for the start-up log.
func modelWritesWhere(cfg conf.Server) string {
	switch {
	case cfg.GRPCServesModelWrites() && cfg.AdminGRPC != "":
		return "here and on admin_grpc"
	case cfg.GRPCServesModelWrites():
		return "here"
	case cfg.AdminGRPC != "":
		return "on admin_grpc only"
	}
	return "nowhere: set admin_grpc"
}

// startTracing builds the tracer provider the OTEL_* environment
// variables configure (package tracing) and adds its shutdown, which
// exports the spans it still holds, to g, to run last; nil when tracing
// is off.
func startTracing(ctx context.Context, g *group, log *slog.Logger) (trace.TracerProvider, error) {
	tcfg, err := tracing.FromEnv(os.Getenv)
	if err != nil {
		return nil, fmt.Errorf("tracing: %w", err)
	}
	sdk, err := tracing.New(ctx, tcfg, version)
	if err != nil || sdk == nil {
		return nil, err
	}
	// The SDK reports failed exports only to its process-wide error
	// handler (there is no per-provider one): send them to the log.
	otel.SetErrorHandler(otel.ErrorHandlerFunc(func(err error) { log.Warn("tracing: exporting spans", "err", err) }))
	g.add("tracing", component{name: "tracing", interrupt: func(ctx context.Context) {
		if err := sdk.Shutdown(ctx); err != nil {
			log.Warn("tracing: spans not all exported at shutdown", "err", err)
		}
	}})
	log.Info("tracing on", "endpoint", tcfg.Endpoint, "protocol", tcfg.Protocol, "sampler", tcfg.SamplerName)
	return sdk, nil
}

// statusDocument is the /v1/status document: the actors' status, the
// prediction log's and the cluster node's when there are, and the host's
// BLAS when the build has libtorch (blas not nil).
func statusDocument(sys *actors.System, producer *logging.Producer, node *clusternode.Agent, blas *servables.BLAS) any {
	st := sys.Status()
	if producer == nil && node == nil && blas == nil {
		return st
	}
	doc, err := toMap(st)
	if err != nil {
		return st
	}
	add := func(key string, v any) {
		if data, err := json.Marshal(v); err == nil {
			doc[key] = data
		}
	}
	if producer != nil {
		add("prediction_log", producer.Stats())
	}
	if node != nil {
		add("cluster", node.StatusSection())
	}
	if blas != nil {
		add("blas", blas)
	}
	return doc
}

// watchAuth is the component that reloads the authentication files
// (tokens, JWKS) when they change, until interrupted.
func watchAuth(a *auth.Authenticator) component {
	ctx, cancel := context.WithCancel(context.Background())
	return component{name: "auth",
		execute:   func() error { a.Run(ctx); return nil },
		interrupt: func(context.Context) { cancel() },
	}
}

// runConsole is the component that samples the web console's histories
// until interrupted.
func runConsole(c *console.Console) component {
	ctx, cancel := context.WithCancel(context.Background())
	return component{name: "console",
		execute:   func() error { c.Run(ctx); return nil },
		interrupt: func(context.Context) { cancel() },
	}
}

// followEvaluations is the component that reads the evaluations topic
// into t until it is interrupted.
func followEvaluations(t *evaluations.Table, opts evaluations.FollowOptions) component {
	ctx, cancel := context.WithCancel(context.Background())
	return component{name: "evaluations",
		execute:   func() error { return evaluations.Follow(ctx, t, opts) },
		interrupt: func(context.Context) { cancel() },
	}
}

// untilDone is the component that returns once ctx is done.
func untilDone(ctx context.Context) component {
	quit := make(chan struct{})
	return component{name: "signals",
		execute: func() error {
			select {
			case <-ctx.Done():
			case <-quit:
			}
			return nil
		},
		interrupt: func(context.Context) { close(quit) },
	}
}

// grpcStreams is grpc_max_concurrent_streams as gRPC takes it: a uint32,
// so a larger value is cut to the largest rather than wrapped (2^32 would
// be 0, which gRPC reads as no limit at all).
func grpcStreams(n int) uint32 { return uint32(min(max(n, 1), math.MaxUint32)) }

// grpcLimit is a byte limit as a gRPC message size, which is at most 2 GiB.
func grpcLimit(n int64) int { return int(min(n, 2<<30-1)) }

// tlsClientAuth is tls.client_auth as package tlsconf takes it.
func tlsClientAuth(c conf.ClientAuth) tlsconf.ClientAuth {
	switch c {
	case conf.ClientAuthNone:
		return tlsconf.ClientAuthNone
	case conf.ClientAuthRequest:
		return tlsconf.ClientAuthRequest
	case conf.ClientAuthRequire:
		return tlsconf.ClientAuthRequire
	}
	// A programming error, an integer converted to a conf.ClientAuth:
	// tlsconf.New refuses its name ("conf.ClientAuth(3)").
	return tlsconf.ClientAuth(c.String())
}

// watchTLS is the component that reloads the TLS files every interval.
func watchTLS(r *tlsconf.Reloader, interval time.Duration, log *slog.Logger) component {
	ctx, cancel := context.WithCancel(context.Background())
	return component{name: "tls reload",
		execute:   func() error { r.Watch(ctx, interval, log.With("component", "tls")); return nil },
		interrupt: func(context.Context) { cancel() },
	}
}

// warnInsecure is the component that warns, now and every period, that
// the server runs without authentication (--insecure-no-auth).
func warnInsecure(log *slog.Logger, period time.Duration) component {
	return every("insecure warning", period, func() {
		log.Warn("serving WITHOUT AUTHENTICATION (insecure_no_auth): anyone who reaches the listeners can score, read and change the models; configure auth.tokens_file, auth.jwt or tls.client_auth require")
	})
}

// every is the component that calls f at once and then every period
// until it is interrupted.
func every(name string, period time.Duration, f func()) component {
	quit := make(chan struct{})
	return component{name: name,
		execute: func() error {
			f()
			t := time.NewTicker(period)
			defer t.Stop()
			for {
				select {
				case <-quit:
					return nil
				case <-t.C:
					f()
				}
			}
		},
		interrupt: func(context.Context) { close(quit) },
	}
}

// serveHTTP is the component that serves srv on ln, over TLS if srv has a
// TLS config. Interrupted, it stops taking requests and waits for those in
// flight until the stop deadline, then cuts them; connections that sent no
// request get httpserver.UnusedConnGrace.
func serveHTTP(srv *http.Server, ln net.Listener, log *slog.Logger) component {
	unused := httpserver.TrackUnusedConns(srv)
	serve := func() error {
		if srv.TLSConfig != nil {
			return srv.ServeTLS(ln, "", "")
		}
		return srv.Serve(ln)
	}
	return httpComponent(srv, serve, ln, func() { unused.CloseAfter(httpserver.UnusedConnGrace) }, log)
}

// serveH1 is serveHTTP for the h1 engine (conf.HTTPEngineH1; over TLS,
// with the HTTP/2 server it hands h2 connections to), whose Shutdown
// closes connections that sent no request itself, after
// httpserver.UnusedConnGrace too.
func serveH1(srv *httpserver.H1Server, ln net.Listener, log *slog.Logger) component {
	return httpComponent(srv, func() error { return srv.Serve(ln) }, ln, func() {}, log)
}

// httpComponent runs serve until interrupted; then, after beforeShutdown,
// it drains srv until the stop deadline and cuts what is left.
func httpComponent(srv interface {
	Shutdown(context.Context) error
	Close() error
}, serve func() error, ln net.Listener, beforeShutdown func(), log *slog.Logger) component {
	return component{name: "http",
		execute: func() error {
			if err := serve(); !errors.Is(err, http.ErrServerClosed) {
				return fmt.Errorf("serving HTTP: %w", err)
			}
			return nil
		},
		interrupt: func(ctx context.Context) {
			beforeShutdown()
			if err := srv.Shutdown(ctx); err != nil {
				log.Warn("drain timeout passed with requests in flight", "err", err)
				_ = srv.Close()
			}
			_ = ln.Close() // if Serve never ran
		},
	}
}

// serveGRPC is the component that serves gs on ln. Interrupted, it stops
// taking calls and waits for those in flight until the stop deadline, then
// cuts them.
func serveGRPC(gs *grpcserver.Server, ln net.Listener, log *slog.Logger) component {
	return component{name: "grpc",
		execute: func() error {
			if err := gs.Serve(ln); err != nil {
				return fmt.Errorf("serving gRPC: %w", err)
			}
			return nil
		},
		interrupt: func(ctx context.Context) {
			stopped := make(chan struct{})
			go func() { gs.GracefulStop(); close(stopped) }()
			select {
			case <-stopped:
			case <-ctx.Done():
				log.Warn("drain timeout passed with gRPC calls in flight")
				gs.Stop()
			}
			_ = ln.Close() // if Serve never ran
		},
	}
}
