package main

// The evaluate scenario measures the issue's target "predictions +
// outcomes joined per second per core by grove evaluate: at least 100k/s".
// The real grove evaluate binary reads a synthetic ad stream that
// grovebench produced beforehand into a Kafka broker in another process
// (grovebench's own child running the broker grove serve --kafka-embedded
// runs, kafkaEnv), and its CPU is read from its own /proc/PID/stat.
//
// The stream: requests impressions, each a served prediction of release v1
// and a shadow prediction of v2 of the contract ads/bench/1, logged as
// Grove logs them at level FULL (a grove.v1.PredictionEvent in binary
// protobuf with its 64 input features and a one-row FLOAT output
// "output_0", keyed by request_id as with prediction_log.key_by:
// request_id), and clicks drawn from the served probability, reported
// within the window through the outcome topic (outcome.Record), a tenth
// of them twice. Event time advances evalStep per request.
//
// Both topics are written before the evaluator starts, each record stamped
// with its event time (as producers writing them then would have), so it
// reads them as fast as it can, the two topics at different paces, with
// the outcomes reaching the joiner a commit later (through
// GROUP-repartition): an evaluator behind the stream. The rule has the
// default lateness, a minute, so windows close while the stream is read
// and the join's state stays about two windows of traffic; the
// evaluator's frontier (logging/outcome/evaluate, The frontier) keeps
// every count exact, which the scenario checks (nothing late). The
// measurement has two phases:
//
//   - ingest: from the first evaluations record that counts anything taken
//     to the one that says every prediction and outcome was taken
//     (grove.v1.Evaluation counters, read with read_committed): records
//     per second of wall time and per CPU-second of the evaluator;
//   - scoring: grovebench then writes one prediction per partition of
//     another contract, whose event time moves the watermark past every
//     window, and waits until every prediction is scored (the last
//     windows close, the state is deleted).
//
// Records per core is the records over the evaluator's CPU time from its
// start to the end of scoring (start-up and the idle commits included);
// the ingest phase's rate per CPU-second is given beside it, and the rate
// after start-up: the records over the CPU time from the moment the
// evaluator's consumer group is stable (the process has loaded and joined,
// which costs the same whatever the stream) to the end of scoring.

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/groveml/grove/conf"
	"github.com/groveml/grove/grovepb"
	"github.com/groveml/grove/logging"
	"github.com/groveml/grove/logging/outcome"
)

// scenarioEvaluate is the evaluate scenario's name in --scenarios.
const scenarioEvaluate = "evaluate"

// evalTarget is the target: records joined per second per core.
const evalTarget = 100_000

// The evaluate scenario's stream and rule.
const (
	evalPartitions  = 4 // the embedded broker's default
	evalStep        = time.Millisecond
	evalWindow      = 30 * time.Second
	evalLateness    = time.Minute // the rule's default
	evalContract    = "ads/bench/1"
	evalTickRelease = "tick"
	evalFeatures    = 64
	evalPredTopic   = "grove.predictions"
	evalOutTopic    = "grove.outcomes"
	evalResultTopic = "grove.evaluations"
	evalGroup       = "grove-evaluate"
	// evalTimeout bounds each phase's wait for the evaluator.
	evalTimeout = 10 * time.Minute
)

// kafkaEnv makes grovebench's own binary a child running the embedded
// Kafka broker (logging.EmbeddedOptions, in memory) on "ADDR,PARTITIONS".
const kafkaEnv = "GROVEBENCH_KAFKA_BROKER"

// serveKafka runs the broker spec names until the process is killed; it
// returns only on a start-up error.
func serveKafka(spec string) error {
	addr, n, ok := strings.Cut(spec, ",")
	parts, err := strconv.Atoi(n)
	if !ok || err != nil {
		return fmt.Errorf("%s=%q: want ADDR,PARTITIONS", kafkaEnv, spec)
	}
	if _, err := (logging.EmbeddedOptions{Addr: addr, Partitions: parts, Topics: []string{evalPredTopic, evalOutTopic}}).Start(); err != nil {
		return err
	}
	select {}
}

// startKafka starts the broker child on a free port.
func startKafka(ctx context.Context, logPath string, partitions int) (*child, string, error) {
	addr, err := freeAddr()
	if err != nil {
		return nil, "", err
	}
	self, err := os.Executable()
	if err != nil {
		return nil, "", err
	}
	cmd := exec.Command(self)
	cmd.Env = append(os.Environ(), fmt.Sprintf("%s=%s,%d", kafkaEnv, addr, partitions))
	c, err := startChild("kafka", cmd, logPath)
	if err != nil {
		return nil, "", err
	}
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr))
	if err != nil {
		return c, "", err
	}
	defer cl.Close()
	deadline := time.Now().Add(30 * time.Second)
	for {
		pctx, cancel := context.WithTimeout(ctx, time.Second)
		err := cl.Ping(pctx)
		cancel()
		switch {
		case err == nil:
			return c, addr, nil
		case c.exited():
			return c, "", fmt.Errorf("the Kafka broker exited (%v); log tail:\n%s", c.err, c.logTail(20))
		case ctx.Err() != nil:
			return c, "", ctx.Err()
		case time.Now().After(deadline):
			return c, "", fmt.Errorf("the Kafka broker at %s did not answer within 30s: %w", addr, err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// evalStream is the synthetic stream: its records, in the order produced.
type evalStream struct {
	preds, outs []*kgo.Record
	// clicks are the distinct outcomes (outs less the copies).
	requests, clicks int
	// start and end are the first and last event times.
	start, end time.Time
}

// evalConfig is the model config of the evaluate scenario: the contract
// with its outcomes rule over a served and a shadow release.
func evalConfig(lateness time.Duration) string {
	return `{"model_metadata": [{"model_path": "pctr_v1/"}, {"model_path": "pctr_v2/"}],
 "contracts": [{"organization": "ads", "project": "bench", "contract_number": 1,
   "outcomes": {"label": "click", "kind": "binary", "window": "` + evalWindow.String() + `", "lateness": "` + lateness.String() + `", "output": "output_0"},
   "servables": [
     {"release_version": "v1", "model_path": "pctr_v1/", "logging": {"log_level": "FULL"}},
     {"release_version": "v2", "model_path": "pctr_v2/", "shadow": {"sample_rate": 1.0}, "logging": {"log_level": "FULL"}}]}]}
`
}

// hexID is a random 32-digit hex id, as long as a UUID without dashes.
func hexID(rng *rand.Rand) string {
	return fmt.Sprintf("%016x%016x", rng.Uint64(), rng.Uint64())
}

// makeEvalStream makes requests impressions from start, evalStep apart.
func makeEvalStream(seed uint64, requests int, start time.Time) (*evalStream, error) {
	rng := rand.New(rand.NewPCG(seed, 28))
	s := &evalStream{requests: requests, start: start}
	predHeaders := []kgo.RecordHeader{{Key: logging.HeaderEncoding, Value: []byte(logging.EncodingProto)},
		{Key: logging.HeaderSchema, Value: []byte(logging.SchemaName)}}
	instance := hexID(rng)
	checksums := [2]string{hexID(rng) + hexID(rng), hexID(rng) + hexID(rng)}
	type click struct {
		at time.Time
		o  *grovepb.Outcome
	}
	var clicks []click
	features := make([]float32, evalFeatures)
	for i := range requests {
		ts := start.Add(time.Duration(i) * evalStep)
		req := hexID(rng)
		for f := range features {
			features[f] = rng.Float32()
		}
		p := 0.01 + 0.3*rng.Float64()
		for r, v := range []struct {
			release, path string
			value         float64
			served        bool
		}{{"v1", "pctr_v1/", p, true}, {"v2", "pctr_v2/", min(1, 1.2*p), false}} {
			ev := &grovepb.PredictionEvent{EventId: hexID(rng), RequestId: req, Timestamp: timestamppb.New(ts), Api: "oip",
				ModelPath: v.path, Contract: evalContract, ReleaseVersion: v.release, ModelChecksum: checksums[r], Served: v.served,
				ServerInstanceId: instance, QueueLatency: durationpb.New(50 * time.Microsecond), ComputeLatency: durationpb.New(200 * time.Microsecond),
				Inputs:  []*grovepb.Tensor{{Name: "features", Datatype: "FLOAT", Shape: []int64{1, evalFeatures}, FloatData: features}},
				Outputs: []*grovepb.Tensor{{Name: "output_0", Datatype: "FLOAT", Shape: []int64{1, 1}, FloatData: []float32{float32(v.value)}}}}
			value, err := logging.Encode(ev, conf.EncodingProto)
			if err != nil {
				return nil, err
			}
			s.preds = append(s.preds, &kgo.Record{Topic: evalPredTopic, Key: []byte(req), Value: value, Headers: predHeaders, Timestamp: ts})
		}
		if rng.Float64() < p {
			at := ts.Add(time.Duration(rng.Float64() * float64(evalWindow)))
			clicks = append(clicks, click{at, &grovepb.Outcome{OutcomeId: hexID(rng), RequestId: req, EventTime: timestamppb.New(at),
				Labels: map[string]float64{"click": 1}}})
			s.clicks++
			if rng.Float64() < 0.1 {
				clicks = append(clicks, click{at.Add(time.Second), clicks[len(clicks)-1].o})
			}
		}
	}
	s.end = start.Add(time.Duration(requests-1) * evalStep)
	// The outcomes in the order they happen.
	slices.SortStableFunc(clicks, func(a, b click) int { return a.at.Compare(b.at) })
	for _, c := range clicks {
		r, err := outcome.Record(c.o, evalOutTopic)
		if err != nil {
			return nil, err
		}
		r.Timestamp = c.at
		s.outs = append(s.outs, r)
	}
	return s, nil
}

// records is the number of records of the stream.
func (s *evalStream) records() int { return len(s.preds) + len(s.outs) }

// tick is the prediction of partition p that moves its watermark past
// every window and outcome of the stream: its event time is lateness plus
// two windows after the stream's end, of a contract with no rule.
func (s *evalStream) tick(p int32, lateness time.Duration) (*kgo.Record, error) {
	at := s.end.Add(lateness + 2*evalWindow + time.Second)
	ev := &grovepb.PredictionEvent{EventId: fmt.Sprintf("tick-%d", p), RequestId: fmt.Sprintf("tick-%d", p), Timestamp: timestamppb.New(at),
		ModelPath: "tick/", Contract: "bench/tick/1", ReleaseVersion: evalTickRelease, Served: true,
		Outputs: []*grovepb.Tensor{{Name: "output_0", Datatype: "FLOAT", Shape: []int64{1, 1}, FloatData: []float32{0}}}}
	value, err := logging.Encode(ev, conf.EncodingProto)
	if err != nil {
		return nil, err
	}
	return &kgo.Record{Topic: evalPredTopic, Partition: p, Key: []byte(ev.RequestId), Value: value}, nil
}

// evalCounters are a partition's counters, as its evaluations record says.
type evalCounters struct {
	Predictions, Scored, Joined, Dropped, Outcomes, Late, Unmatched uint64
	DuplicateOutcomes, DuplicatePredictions, LatePredictions        uint64
	Unconfigured, Invalid                                           uint64
}

// add adds o's counters to c.
func (c *evalCounters) add(o *grovepb.EvaluationCounters) {
	c.Predictions += o.GetPredictions()
	c.Scored += o.GetScored()
	c.Joined += o.GetJoined()
	c.Dropped += o.GetDropped()
	c.Outcomes += o.GetOutcomes()
	c.Late += o.GetLate()
	c.Unmatched += o.GetUnmatched()
	c.DuplicateOutcomes += o.GetDuplicateOutcomes()
	c.DuplicatePredictions += o.GetDuplicatePredictions()
	c.LatePredictions += o.GetLatePredictions()
	c.Unconfigured += o.GetUnconfigured()
	c.Invalid += o.GetInvalid()
}

// taken is the number of records the counters say were taken: each
// prediction event of one row is one of predictions, duplicates, late,
// unconfigured or invalid, and each outcome one of outcomes, late or
// duplicates.
func (c evalCounters) taken() uint64 {
	return c.Predictions + c.DuplicatePredictions + c.LatePredictions + c.Unconfigured + c.Invalid + c.Outcomes + c.Late + c.DuplicateOutcomes
}

// evalTotals keeps the newest counters record of each partition of the
// evaluations topic.
type evalTotals map[int32]*grovepb.EvaluationCounters

// take reads one evaluations record; it reports whether it was a
// partition's counters.
func (t evalTotals) take(r *kgo.Record) (bool, error) {
	ev := &grovepb.Evaluation{}
	if err := proto.Unmarshal(r.Value, ev); err != nil {
		return false, fmt.Errorf("evaluations record at offset %d: %w", r.Offset, err)
	}
	if ev.GetCounters() == nil {
		return false, nil
	}
	t[ev.GetPartition()] = ev.GetCounters()
	return true, nil
}

// sum is the partitions' counters added up.
func (t evalTotals) sum() evalCounters {
	var c evalCounters
	for _, o := range t {
		c.add(o)
	}
	return c
}

// evalReport is the evaluate scenario's result.
type evalReport struct {
	Requests       int           `json:"requests"`
	Predictions    int           `json:"predictions"`
	Outcomes       int           `json:"outcomes"` // copies included
	Records        int           `json:"records"`
	Partitions     int           `json:"partitions"`
	Step           time.Duration `json:"event_step_ns"`
	Window         time.Duration `json:"window_ns"`
	Lateness       time.Duration `json:"lateness_ns"`
	CommitInterval time.Duration `json:"commit_interval_ns"`
	// ProducePerSec is how fast grovebench wrote the stream.
	ProducePerSec float64 `json:"produce_records_per_sec"`
	// The ingest phase: Records less those taken by the first counters
	// record, over the time and the evaluator's CPU seconds between it
	// and the one that counted every record.
	IngestRecords   uint64        `json:"ingest_records"`
	IngestWall      time.Duration `json:"ingest_wall_ns"`
	IngestCPU       float64       `json:"ingest_cpu_seconds"`
	IngestPerSec    float64       `json:"ingest_records_per_sec"`
	IngestPerCPUSec float64       `json:"ingest_records_per_cpu_second"`
	// The scoring phase: from the ticks to every prediction scored.
	ScoreWall time.Duration `json:"score_wall_ns"`
	ScoreCPU  float64       `json:"score_cpu_seconds"`
	// TotalCPU is the evaluator's CPU seconds from its start to the end of
	// scoring; PerCore is Records over it (the figure the target is about).
	TotalCPU float64 `json:"total_cpu_seconds"`
	PerCore  float64 `json:"records_per_core_second"`
	// StartupCPU is the evaluator's CPU seconds from its start until its
	// consumer group was stable; PerCoreRunning is Records over TotalCPU
	// less it.
	StartupCPU     float64      `json:"startup_cpu_seconds"`
	PerCoreRunning float64      `json:"records_per_core_second_after_startup"`
	Counters       evalCounters `json:"counters"`
	Target         float64      `json:"target_records_per_core_second"`
	Error          string       `json:"error,omitempty"`
}

// evalEnv is what the evaluate scenario needs from grovebench.
type evalEnv struct {
	bin, dir string
	requests int
	logf     func(string, ...any)
}

// runEvaluate runs the evaluate scenario.
func runEvaluate(ctx context.Context, e evalEnv) *evalReport {
	rep := &evalReport{Requests: e.requests, Partitions: evalPartitions, Step: evalStep, Window: evalWindow, Lateness: evalLateness,
		CommitInterval: time.Second, Target: evalTarget}
	if err := runEvaluateInto(ctx, e, rep); err != nil {
		rep.Error = err.Error()
	}
	return rep
}

// runEvaluateInto does runEvaluate's work, filling rep.
func runEvaluateInto(ctx context.Context, e evalEnv, rep *evalReport) error {
	dir := filepath.Join(e.dir, "evaluate")
	bucket := filepath.Join(dir, "bucket")
	if err := os.MkdirAll(bucket, 0o755); err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(bucket, "model_config.json"), []byte(evalConfig(rep.Lateness)), 0o644); err != nil {
		return err
	}
	// The stream ends an hour before now: the joiner counts an event time
	// ahead of its clock as the clock's.
	span := time.Duration(e.requests)*evalStep + rep.Lateness + 2*evalWindow + time.Second
	start := time.Now().Add(-span - time.Hour).Truncate(time.Second)
	e.logf("evaluate: making the stream (%d requests, event time %v apart)", e.requests, evalStep)
	s, err := makeEvalStream(28, e.requests, start)
	if err != nil {
		return err
	}
	rep.Predictions, rep.Outcomes, rep.Records = len(s.preds), len(s.outs), s.records()

	k, addr, err := startKafka(ctx, filepath.Join(dir, "kafka.log"), evalPartitions)
	if k != nil {
		defer k.stop()
	}
	if err != nil {
		return err
	}
	prod, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.ProducerBatchCompression(kgo.SnappyCompression()), kgo.ProducerLinger(5*time.Millisecond),
		kgo.MaxBufferedRecords(100_000))
	if err != nil {
		return err
	}
	defer prod.Close()
	t0 := time.Now()
	if err := produceAll(ctx, prod, s.preds, s.outs); err != nil {
		return fmt.Errorf("producing the stream: %w", err)
	}
	rep.ProducePerSec = float64(s.records()) / time.Since(t0).Seconds()
	e.logf("evaluate: %d predictions and %d outcomes in the broker at %s (%.0f records/s); starting grove evaluate",
		len(s.preds), len(s.outs), addr, rep.ProducePerSec)

	res, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.ConsumeTopics(evalResultTopic), kgo.FetchIsolationLevel(kgo.ReadCommitted()),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.AllowAutoTopicCreation())
	if err != nil {
		return err
	}
	defer res.Close()
	args := []string{"evaluate", "--bucket", "file://" + bucket, "--cache-dir", filepath.Join(dir, "cache"), "--poll-interval", "1s",
		"--kafka-brokers", addr, "--kafka-topic", evalPredTopic, "--outcomes-topic", evalOutTopic, "--evaluations-topic", evalResultTopic,
		"--evaluate-commit-interval", rep.CommitInterval.String(), "--evaluate-group", evalGroup}
	ev, err := startChild("grove evaluate", exec.Command(e.bin, args...), filepath.Join(dir, "evaluate.log"))
	if err != nil {
		return err
	}
	defer ev.stop()
	pid := ev.cmd.Process.Pid
	begin := readCPU(pid)
	totals := evalTotals{}
	ready, err := waitGroupStable(ctx, res, ev, pid)
	if err != nil {
		return fmt.Errorf("start-up: %w", err)
	}
	rep.StartupCPU = cpuSeconds(begin, ready)
	e.logf("evaluate: the evaluator's group is stable after %v, %.2f CPU-s", fmtDur(ready.at.Sub(begin.at)), rep.StartupCPU)

	// Ingest: until every record is taken.
	var first, done cpuReading
	var firstTaken uint64
	err = watchEvaluations(ctx, res, ev, totals, evalTimeout, func(c evalCounters) bool {
		now := readCPU(pid)
		if first.at.IsZero() && c.taken() > 0 {
			first, firstTaken = now, c.taken()
		}
		done = now
		return c.taken() >= uint64(s.records())
	})
	if err != nil {
		return fmt.Errorf("ingest: %w", err)
	}
	rep.IngestRecords = uint64(s.records()) - firstTaken
	rep.IngestWall = done.at.Sub(first.at)
	rep.IngestCPU = cpuSeconds(first, done)
	if rep.IngestWall > 0 && rep.IngestCPU > 0 {
		rep.IngestPerSec = float64(rep.IngestRecords) / rep.IngestWall.Seconds()
		rep.IngestPerCPUSec = float64(rep.IngestRecords) / rep.IngestCPU
	}
	e.logf("evaluate: every record taken; %d records in %v after the first commit, %.2f CPU-s: %.0f/s, %.0f per CPU-second",
		rep.IngestRecords, fmtDur(rep.IngestWall), rep.IngestCPU, rep.IngestPerSec, rep.IngestPerCPUSec)

	// Scoring: the ticks close every window.
	ticker, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	if err != nil {
		return err
	}
	defer ticker.Close()
	for p := range int32(evalPartitions) {
		r, err := s.tick(p, rep.Lateness)
		if err != nil {
			return err
		}
		if err := ticker.ProduceSync(ctx, r).FirstErr(); err != nil {
			return fmt.Errorf("producing partition %d's tick: %w", p, err)
		}
	}
	scoreStart := readCPU(pid)
	var scored cpuReading
	err = watchEvaluations(ctx, res, ev, totals, evalTimeout, func(c evalCounters) bool {
		scored = readCPU(pid)
		return c.Unconfigured >= evalPartitions && c.Scored+c.Dropped >= c.Predictions
	})
	if err != nil {
		return fmt.Errorf("scoring: %w", err)
	}
	rep.ScoreWall = scored.at.Sub(scoreStart.at)
	rep.ScoreCPU = cpuSeconds(scoreStart, scored)
	rep.TotalCPU = cpuSeconds(begin, scored)
	if rep.TotalCPU > 0 {
		rep.PerCore = float64(s.records()) / rep.TotalCPU
	}
	if run := rep.TotalCPU - rep.StartupCPU; run > 0 {
		rep.PerCoreRunning = float64(s.records()) / run
	}
	rep.Counters = totals.sum()
	e.logf("evaluate: every prediction scored %v after the ticks (%.2f CPU-s); %.2f CPU-s in all: %.0f records per core-second (%.0f after start-up); counters %+v",
		fmtDur(rep.ScoreWall), rep.ScoreCPU, rep.TotalCPU, rep.PerCore, rep.PerCoreRunning, rep.Counters)
	if c := rep.Counters; c.Predictions != uint64(len(s.preds)) || c.Outcomes != uint64(s.clicks) || c.DuplicateOutcomes != uint64(len(s.outs)-s.clicks) ||
		c.Late != 0 || c.LatePredictions != 0 {
		return fmt.Errorf("the evaluator counted %d predictions, %d outcomes and %d duplicates, want %d, %d and %d (late outcomes %d, late predictions %d)",
			c.Predictions, c.Outcomes, c.DuplicateOutcomes, len(s.preds), s.clicks, len(s.outs)-s.clicks, c.Late, c.LatePredictions)
	}
	return nil
}

// waitGroupStable waits until the evaluator's consumer group is stable
// with a member (it has loaded, joined and been given its partitions),
// and returns the evaluator's CPU reading then.
func waitGroupStable(ctx context.Context, cl *kgo.Client, ev *child, pid int) (cpuReading, error) {
	adm := kadm.NewClient(cl)
	deadline := time.Now().Add(evalTimeout)
	for {
		if ev.exited() {
			return cpuReading{}, fmt.Errorf("grove evaluate exited (%v); log tail:\n%s", ev.err, ev.logTail(20))
		}
		dctx, cancel := context.WithTimeout(ctx, time.Second)
		groups, err := adm.DescribeGroups(dctx, evalGroup)
		cancel()
		if err == nil {
			if g, ok := groups[evalGroup]; ok && g.Err == nil && g.State == "Stable" && len(g.Members) > 0 {
				return readCPU(pid), nil
			}
		}
		if ctx.Err() != nil {
			return cpuReading{}, ctx.Err()
		}
		if time.Now().After(deadline) {
			return cpuReading{}, fmt.Errorf("group %s not stable after %v", evalGroup, evalTimeout)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// cpuSeconds is the CPU time process pid used between two readings.
func cpuSeconds(a, b cpuReading) float64 {
	if !a.ok || !b.ok {
		return 0
	}
	return float64(b.grove-a.grove) / clockTicks
}

// produceAll writes every record of the lists and waits for each.
func produceAll(ctx context.Context, cl *kgo.Client, lists ...[]*kgo.Record) error {
	errc := make(chan error, 1)
	for _, l := range lists {
		for _, r := range l {
			cl.Produce(ctx, r, func(_ *kgo.Record, err error) {
				if err != nil {
					select {
					case errc <- err:
					default:
					}
				}
			})
		}
	}
	if err := cl.Flush(ctx); err != nil {
		return err
	}
	select {
	case err := <-errc:
		return err
	default:
		return nil
	}
}

// watchEvaluations reads the evaluations topic into totals until done
// says the sum of the partitions' counters suffices (it is called after
// each poll that brought counters), the evaluator exits, or timeout
// passes.
func watchEvaluations(ctx context.Context, cl *kgo.Client, ev *child, totals evalTotals, timeout time.Duration, done func(evalCounters) bool) error {
	deadline := time.Now().Add(timeout)
	for {
		if ev.exited() {
			return fmt.Errorf("grove evaluate exited (%v); log tail:\n%s", ev.err, ev.logTail(20))
		}
		pctx, cancel := context.WithTimeout(ctx, 200*time.Millisecond)
		fs := cl.PollFetches(pctx)
		cancel()
		if ctx.Err() != nil {
			return ctx.Err()
		}
		changed := false
		for _, r := range fs.Records() {
			ok, err := totals.take(r)
			if err != nil {
				return err
			}
			changed = changed || ok
		}
		if changed && done(totals.sum()) {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("not done after %v: counters %+v", timeout, totals.sum())
		}
	}
}

// writeMarkdown prints the scenario's section; nothing when it did not run.
func (r *evalReport) writeMarkdown(w io.Writer) {
	if r == nil {
		return
	}
	fmt.Fprintf(w, "\nEvaluate: grove evaluate (its own process, one evaluator, %d partitions, commit interval %v) over %d requests "+
		"(a served and a shadow prediction each, FULL: 64 features, output_0) and %d click outcomes (a tenth sent twice), "+
		"produced beforehand to a Kafka broker in another process; event time %v per request, window %v, lateness %v:\n\n",
		r.Partitions, r.CommitInterval, r.Requests, r.Outcomes, r.Step, r.Window, r.Lateness)
	if r.Error != "" {
		fmt.Fprintf(w, "- FAILED: %s\n", r.Error)
		return
	}
	fmt.Fprintf(w, "- Ingest: %d records (predictions + outcomes) taken in %s after the first commit: %s records/s of wall time, %s per CPU-second of the evaluator\n",
		r.IngestRecords, fmtDur(r.IngestWall), fmtRate(r.IngestPerSec), fmtRate(r.IngestPerCPUSec))
	fmt.Fprintf(w, "- Scoring: every window closed and scored %s after the watermark moved past them (%.2f CPU-s)\n", fmtDur(r.ScoreWall), r.ScoreCPU)
	fmt.Fprintf(w, "- Records joined per core: %s per CPU-second (%d records over %.2f CPU-s from start-up to the last score; target: at least %s: %s)\n",
		fmtRate(r.PerCore), r.Records, r.TotalCPU, fmtRate(r.Target), verdict(r.PerCore >= r.Target))
	fmt.Fprintf(w, "- After start-up: %s per CPU-second (less the %.2f CPU-s the evaluator took to load and join its group, whatever the stream; target: %s)\n",
		fmtRate(r.PerCoreRunning), r.StartupCPU, verdict(r.PerCoreRunning >= r.Target))
	c := r.Counters
	fmt.Fprintf(w, "- Counters: %d predictions scored, %d joined, %d outcomes, %d duplicate outcomes, %d late outcomes, %d unmatched, %d late predictions\n",
		c.Scored, c.Joined, c.Outcomes, c.DuplicateOutcomes, c.Late, c.Unmatched, c.LatePredictions)
}

// errEvalRequests rejects a stream too small to measure.
var errEvalRequests = errors.New("--evaluate-requests must be at least 1000")

// splitEvaluateSpec takes "evaluate" out of a --scenarios value.
func splitEvaluateSpec(spec string) (rest string, evaluate bool) {
	var others []string
	for _, e := range strings.Split(spec, ",") {
		if strings.EqualFold(strings.TrimSpace(e), scenarioEvaluate) {
			evaluate = true
			continue
		}
		others = append(others, e)
	}
	return strings.Join(others, ","), evaluate
}
