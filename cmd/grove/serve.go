package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"

	"github.com/groveml/grove/actors"
	"github.com/groveml/grove/api/ba"
	"github.com/groveml/grove/api/rest"
	"github.com/groveml/grove/api/rpc"
	"github.com/groveml/grove/conf"
	"github.com/groveml/grove/logging"
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

func serveUntil(ctx context.Context, cfg conf.Server, log *slog.Logger) error {
	b, err := openBucket(ctx, cfg)
	if err != nil {
		return fmt.Errorf("opening bucket: %w", err)
	}
	cacheDir := filepath.Join(cfg.CacheDir, "models")
	// Grove owns cacheDir/models: copies left by an earlier run are stale.
	if err := os.RemoveAll(cacheDir); err != nil {
		return fmt.Errorf("clearing model cache: %w", err)
	}
	if err := os.MkdirAll(cacheDir, 0o755); err != nil {
		return fmt.Errorf("creating model cache: %w", err)
	}
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	policy, err := logging.PolicyFromConfig(cfg.PredictionLog)
	if err != nil {
		return err
	}
	producer, err := logging.New(cfg.Kafka, logging.WithLogger(log.With("component", "prediction-log")),
		logging.WithInstanceID(instanceID()), logging.WithRegisterer(reg))
	if err != nil {
		return fmt.Errorf("starting the prediction log: %w", err)
	}
	if producer != nil {
		st := producer.Stats()
		log.Info("prediction log on Kafka", "brokers", st.Brokers, "topic", st.Topic, "encoding", st.Encoding,
			"embedded", st.Embedded, "direct_call_level", policy.Level.String())
	}
	sys, err := actors.Start(actors.Options{
		Predictions:          &logging.Sink{Producer: producer, Direct: policy},
		Bucket:               b,
		ModelConfigPath:      cfg.ModelConfig,
		PollInterval:         cfg.PollInterval,
		CacheDir:             cacheDir,
		MaxModelBytes:        cfg.MaxModelBytes,
		QueueSize:            cfg.ModelQueueSize,
		ShadowMicroBatchRows: cfg.ShadowMicroBatchRows,
		ShadowWorkers:        cfg.ShadowWorkers,
		ShadowQueue:          cfg.ShadowQueue,
		MaxBatchRows:         cfg.MaxBatchRows,
		IntraOpThreads:       cfg.IntraOpThreads,
		Runtimes:             runtimes(cfg.ONNXRuntimeLib),
		ParseWarmUp:          ba.ParseWarmUp,
		Logger:               log,
		Registerer:           reg,
	})
	if err != nil {
		_ = producer.Close(context.Background())
		return err
	}
	var _ rest.Manager = sys // the management API is served
	api := rest.New(sys, rest.Options{MaxBodyBytes: cfg.MaxBodyBytes, Logger: log, Registerer: reg, Gatherer: reg, Pprof: cfg.Pprof, Version: version,
		Status: func() map[string]any {
			if producer == nil {
				return nil
			}
			return map[string]any{"prediction_log": producer.Stats()}
		}})
	ln, err := net.Listen("tcp", cfg.HTTP)
	if err != nil {
		_ = sys.Stop(context.Background())
		_ = producer.Close(context.Background())
		return fmt.Errorf("listening for HTTP: %w", err)
	}
	var grpcSrv *rpc.Server
	var grpcLn net.Listener
	if cfg.GRPC != "off" {
		if grpcLn, err = net.Listen("tcp", cfg.GRPC); err != nil {
			_ = ln.Close()
			_ = sys.Stop(context.Background())
			_ = producer.Close(context.Background())
			return fmt.Errorf("listening for gRPC: %w", err)
		}
		grpcSrv = rpc.New(sys, rpc.Options{Logger: log, Version: version})
	}
	srv := &http.Server{Handler: api, ReadHeaderTimeout: 10 * time.Second, ErrorLog: slog.NewLogLogger(log.Handler(), slog.LevelWarn)}
	serveErr := make(chan error, 2)
	go func() { serveErr <- fmt.Errorf("serving HTTP: %w", srv.Serve(ln)) }()
	grpcAddr := "off"
	if grpcSrv != nil {
		grpcAddr = grpcLn.Addr().String()
		go func() { serveErr <- fmt.Errorf("serving gRPC: %w", grpcSrv.Serve(grpcLn)) }()
	}
	log.Info("grove serving", "http", ln.Addr().String(), "grpc", grpcAddr, "bucket", b.String(), "model_config", cfg.ModelConfig, "poll_interval", cfg.PollInterval)

	select {
	case err := <-serveErr:
		if grpcSrv != nil {
			grpcSrv.Stop()
		}
		_ = srv.Close()
		_ = sys.Stop(context.Background())
		_ = producer.Close(context.Background())
		return err
	case <-ctx.Done():
	}
	log.Info("shutting down: readiness off, draining in-flight requests", "drain_timeout", cfg.DrainTimeout)
	sys.Drain()
	dctx, cancel := context.WithTimeout(context.Background(), cfg.DrainTimeout)
	defer cancel()
	grpcStopped := make(chan struct{})
	if grpcSrv != nil {
		grpcSrv.Drain()
		go func() { grpcSrv.GracefulStop(); close(grpcStopped) }()
	} else {
		close(grpcStopped)
	}
	if err := srv.Shutdown(dctx); err != nil {
		log.Warn("drain timeout passed with requests in flight", "err", err)
	}
	select {
	case <-grpcStopped:
	case <-dctx.Done():
		log.Warn("drain timeout passed with gRPC calls in flight")
		grpcSrv.Stop()
	}
	if err := sys.Stop(dctx); err != nil {
		log.Warn("stopping actors", "err", err)
	}
	if err := producer.Close(dctx); err != nil {
		log.Warn("prediction log not fully flushed within the drain timeout", "err", err, "stats", producer.Stats())
	}
	log.Info("grove stopped")
	return nil
}
