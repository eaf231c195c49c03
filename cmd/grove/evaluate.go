package main

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"path/filepath"
	"sync"
	"syscall"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/groveml/grove/conf"
	"github.com/groveml/grove/conf/bucket"
	"github.com/groveml/grove/conf/modelconfig"
	"github.com/groveml/grove/logging"
	"github.com/groveml/grove/logging/outcome/evaluate"
	"github.com/groveml/grove/logging/outcome/join"
)

// evaluateCmd runs grove evaluate: the evaluator alone, with grove
// serve's config and flags (the bucket's model config for the rules,
// kafka, prediction_log, outcomes), until SIGTERM or SIGINT.
func evaluateCmd(args []string, stderr io.Writer) int {
	cfg, err := conf.ParseServerArgs(args)
	if err != nil {
		if errors.Is(err, flag.ErrHelp) {
			fmt.Fprintln(stderr, "usage: grove evaluate [flags]\n\ngrove evaluate takes grove serve's config file and flags; it reads the model config from the bucket, and the prediction log and outcomes from Kafka.")
			conf.PrintServerUsage(stderr)
			return 0
		}
		fmt.Fprintf(stderr, "grove evaluate: %v\n(grove evaluate -h lists the flags)\n", err)
		return 2
	}
	log := cfg.NewLogger(stderr)
	if len(cfg.Kafka.Brokers) == 0 {
		log.Error("grove evaluate needs kafka.brokers (--kafka-brokers): the prediction log and the outcomes are read from there")
		return 2
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	b, err := openBucket(ctx, cfg)
	if err != nil {
		log.Error("grove evaluate failed", "err", fmt.Errorf("opening bucket: %w", err))
		return 1
	}
	if c, ok := b.(io.Closer); ok {
		defer c.Close()
	}
	rules := &bucketRules{b: b, path: cfg.ModelConfig, interval: cfg.PollInterval, log: log}
	go rules.poll(ctx)
	ecfg, err := evaluatorConfig(cfg, cfg.Kafka.Brokers, rules.get, rules.validSince, log)
	if err != nil {
		log.Error("grove evaluate failed", "err", err)
		return 2
	}
	if err := evaluate.Run(ctx, ecfg); err != nil {
		log.Error("grove evaluate failed", "err", err)
		return 1
	}
	return 0
}

// evaluatorConfig is the evaluator's config from the server's: brokers
// are the Kafka seed brokers (the embedded broker's address when it
// runs), rules the source of the outcomes rules.
func evaluatorConfig(cfg conf.Server, brokers []string, rules func() ([]join.Rule, bool),
	validSince func(contract, release string) (time.Time, bool), log *slog.Logger) (evaluate.Config, error) {
	sec, err := logging.SecurityOptions(cfg.Kafka)
	if err != nil {
		return evaluate.Config{}, err
	}
	dir := cfg.Outcomes.StateDir
	if dir == "" {
		dir = filepath.Join(cfg.CacheDir, "evaluate")
	}
	if dir, err = filepath.Abs(dir); err != nil {
		return evaluate.Config{}, err
	}
	// The instance is stable across restarts of the same evaluator (its
	// host and state directory), so a restarted one fences the
	// transaction its predecessor left open at once.
	host, _ := os.Hostname()
	sum := sha256.Sum256([]byte(dir))
	return evaluate.Config{
		Kafka:            append([]kgo.Opt{kgo.SeedBrokers(brokers...), kgo.ClientID(cfg.Kafka.ClientID + "-evaluate")}, sec...),
		PredictionTopic:  cfg.Kafka.Topic,
		OutcomeTopic:     cfg.Outcomes.Topic,
		EvaluationsTopic: cfg.Outcomes.EvaluationsTopic,
		Group:            cfg.Outcomes.Group,
		Instance:         host + "-" + hex.EncodeToString(sum[:6]),
		CommitInterval:   cfg.Outcomes.CommitInterval,
		StateDir:         dir,
		Rules:            rules,
		ValidSince:       validSince,
		Log:              log.With("component", "evaluate"),
	}, nil
}

// rulesOf are the outcomes rules of a model config: one per contract and
// per model entry with an outcomes object.
func rulesOf(c *modelconfig.Config) []join.Rule {
	var out []join.Rule
	for _, m := range c.Models {
		if m.Outcomes != nil {
			out = append(out, join.Rule{ModelPath: m.Path, Outcomes: *m.Outcomes})
		}
	}
	for _, ct := range c.Contracts {
		if ct.Outcomes != nil {
			out = append(out, join.Rule{Contract: ct.ID(), Outcomes: *ct.Outcomes})
		}
	}
	return out
}

// bucketRules keeps the rules of the bucket's model config, read every
// interval; a config that does not parse keeps the last rules.
type bucketRules struct {
	b        bucket.Bucket
	path     string
	interval time.Duration
	log      *slog.Logger

	mu    sync.Mutex
	rules []join.Rule
	known bool
	state *modelconfig.ContractState // the contract state beside the config (nil: none read)
}

// validSince returns when release of contract became valid, as the
// contract state last read records it; false while it is not valid.
func (r *bucketRules) validSince(contract, release string) (time.Time, bool) {
	r.mu.Lock()
	st := r.state
	r.mu.Unlock()
	t := st.Record(contract, release).ValidSince
	return t, !t.IsZero()
}

// get returns the rules, and whether a config has been read yet.
func (r *bucketRules) get() ([]join.Rule, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.rules, r.known
}

// poll reads the model config now and every interval until ctx ends.
func (r *bucketRules) poll(ctx context.Context) {
	t := time.NewTicker(r.interval)
	defer t.Stop()
	for {
		data, _, err := r.b.ReadObject(ctx, r.path, modelconfig.MaxConfigBytes)
		var c *modelconfig.Config
		if err == nil {
			c, err = modelconfig.Parse(data)
		}
		if err != nil {
			r.log.Warn("evaluator: reading the model config", "path", r.path, "err", err)
		} else {
			r.mu.Lock()
			r.rules, r.known = rulesOf(c), true
			r.mu.Unlock()
		}
		if st, err := r.readState(ctx); err != nil {
			r.log.Warn("evaluator: reading the contract state; the last one read stays in use", "path", modelconfig.StatePath(r.path), "err", err)
		} else {
			r.mu.Lock()
			r.state = st
			r.mu.Unlock()
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// readState reads the contract state beside the model config: when each
// release became valid. None yet is an empty state.
func (r *bucketRules) readState(ctx context.Context) (*modelconfig.ContractState, error) {
	data, _, err := r.b.ReadObject(ctx, modelconfig.StatePath(r.path), modelconfig.MaxStateBytes)
	if errors.Is(err, bucket.ErrNotExist) {
		return &modelconfig.ContractState{}, nil
	}
	if err != nil {
		return nil, err
	}
	return modelconfig.ParseContractState(data)
}

// evaluatorComponent runs the evaluator inside grove serve
// (outcomes.evaluate) on the model config the actors applied; retain is
// told the longest outcome window plus a day whenever the rules change
// (the embedded broker keeps the prediction log at least that long).
func evaluatorComponent(cfg conf.Server, brokers []string, applied func() *modelconfig.Config,
	validSince func(contract, release string) (time.Time, bool), retain func(time.Duration) error, log *slog.Logger) (component, error) {
	var longest time.Duration
	rules := func() ([]join.Rule, bool) {
		c := applied()
		if c == nil {
			return nil, false
		}
		rs := rulesOf(c)
		for _, r := range rs {
			if w := r.Outcomes.Window + r.Outcomes.Lateness + 24*time.Hour; w > longest {
				longest = w
				if err := retain(w); err != nil {
					log.Warn("evaluator: raising the embedded broker's retention", "to", w, "err", err)
				}
			}
		}
		return rs, true
	}
	ecfg, err := evaluatorConfig(cfg, brokers, rules, validSince, log)
	if err != nil {
		return component{}, err
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	return component{name: "evaluator",
		// A failed evaluator does not stop the server: it logs why and
		// starts again.
		execute: func() error {
			defer close(done)
			for {
				err := evaluate.Run(ctx, ecfg)
				if ctx.Err() != nil {
					return nil
				}
				log.Error("evaluator stopped; starting again in 5s", "err", err)
				select {
				case <-ctx.Done():
					return nil
				case <-time.After(5 * time.Second):
				}
			}
		},
		interrupt: func(stopCtx context.Context) {
			cancel()
			select {
			case <-done:
			case <-stopCtx.Done():
			}
		},
	}, nil
}
