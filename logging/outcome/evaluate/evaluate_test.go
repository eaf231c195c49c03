package evaluate

import (
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"sort"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/groveml/grove/conf"
	"github.com/groveml/grove/conf/modelconfig"
	"github.com/groveml/grove/grovepb"
	"github.com/groveml/grove/logging"
	"github.com/groveml/grove/logging/outcome"
	"github.com/groveml/grove/logging/outcome/evaluations"
	"github.com/groveml/grove/logging/outcome/join"
	"github.com/groveml/grove/routing/quality"
)

const (
	predTopic = "grove.predictions"
	outTopic  = "grove.outcomes"
	evalTopic = "grove.evaluations"
	contract  = "ads/pctr/1"
)

// testRule: binary clicks, a 1 s window, 1.5 s of lateness (more than a
// commit interval plus the skew of the test's two producers).
var testRule = modelconfig.Outcomes{Label: "click", Kind: modelconfig.OutcomeBinary, Window: time.Second,
	Missing: modelconfig.OutcomeMissingNegative, Lateness: 1500 * time.Millisecond}

// arrival is one record of the synthetic stream, produced at its time.
type arrival struct {
	at   time.Time
	pred *grovepb.PredictionEvent
	out  *grovepb.Outcome
}

// stream makes requests impressions 5 ms apart from start, served by v1
// and shadowed by v2 (1.5× too high), clicks drawn from the champion's
// probability and delayed up to 1.3 windows, some outcomes twice.
func stream(seed uint64, start time.Time, requests int) []arrival {
	rng := rand.New(rand.NewPCG(seed, 2))
	var out []arrival
	for i := range requests {
		ts := start.Add(time.Duration(i) * 5 * time.Millisecond)
		req := fmt.Sprintf("req-%d", i)
		p := 0.05 + 0.4*rng.Float64()
		for c := 0; rng.Float64() < p && c < 2; c++ {
			delay := time.Duration(rng.Float64() * 1.3 * float64(testRule.Window))
			o := &grovepb.Outcome{OutcomeId: fmt.Sprintf("%s/%d", req, c), RequestId: req, EventTime: timestamppb.New(ts.Add(delay)),
				Labels: map[string]float64{"click": 1}}
			out = append(out, arrival{at: ts.Add(delay), out: o})
			if rng.Float64() < 0.1 {
				out = append(out, arrival{at: ts.Add(delay + time.Millisecond), out: o})
			}
		}
		for _, v := range []struct {
			release string
			value   float32
			served  bool
		}{{"v1", float32(p), true}, {"v2", float32(min(1, 1.5*p)), false}} {
			ev := &grovepb.PredictionEvent{EventId: req + "/" + v.release, RequestId: req, Timestamp: timestamppb.New(ts), Contract: contract,
				ReleaseVersion: v.release, ModelPath: v.release + "/", Served: v.served,
				Outputs: []*grovepb.Tensor{{Name: "output_0", Datatype: "FLOAT", Shape: []int64{1}, FloatData: []float32{v.value}}}}
			out = append(out, arrival{at: ts, pred: ev})
		}
	}
	slices.SortStableFunc(out, func(a, b arrival) int { return a.at.Compare(b.at) })
	return out
}

// reference is one Joiner fed the whole stream in order, then closed.
func reference(t *testing.T, s []arrival) *join.Snapshot {
	t.Helper()
	j, err := join.New(join.Options{Rules: []join.Rule{{Contract: contract, Outcomes: testRule}}, Store: join.NewMemStore()})
	if err != nil {
		t.Fatal(err)
	}
	for _, a := range s {
		if a.pred != nil {
			err = j.AddPrediction(a.at, join.Prediction{Event: a.pred, Key: []byte(a.pred.RequestId)})
		} else {
			err = j.AddOutcome(a.at, a.out)
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	last := s[len(s)-1].at
	for _, d := range []time.Duration{0, testRule.Lateness, 2 * testRule.Lateness, time.Hour} {
		if err := j.Advance(last.Add(d)); err != nil {
			t.Fatal(err)
		}
	}
	snap, err := j.Snapshot()
	if err != nil {
		t.Fatal(err)
	}
	if c := snap.Counters; c.Scored == 0 || c.Joined == 0 || c.Invalid != 0 || c.DuplicateOutcomes == 0 {
		t.Fatalf("the reference scored nothing, or nothing twice: %+v", c)
	}
	return snap
}

// play produces s in real time: each record when its time comes, the
// predictions keyed by request_id (so partitioned as Grove's producer
// does with key_by: request_id), the outcomes keyed by their id, so
// that only the evaluator's repartitioning brings them together.
func play(ctx context.Context, t *testing.T, cl *kgo.Client, s []arrival) {
	t.Helper()
	for _, a := range s {
		if d := time.Until(a.at); d > 0 {
			select {
			case <-ctx.Done():
				return
			case <-time.After(d):
			}
		}
		var r *kgo.Record
		if a.pred != nil {
			v, err := logging.Encode(a.pred, conf.EncodingProto)
			if err != nil {
				t.Error(err)
				return
			}
			r = &kgo.Record{Topic: predTopic, Key: []byte(a.pred.RequestId), Value: v}
		} else {
			var err error
			if r, err = outcome.Record(a.out, outTopic); err != nil {
				t.Error(err)
				return
			}
			r.Key = []byte(a.out.OutcomeId)
		}
		r.Timestamp = a.at // as a producer writing it then would have
		cl.Produce(ctx, r, func(_ *kgo.Record, err error) {
			if err != nil && ctx.Err() == nil {
				t.Error(err)
			}
		})
	}
	if err := cl.Flush(ctx); err != nil {
		t.Error(err)
	}
}

// results reads the evaluations topic (read_committed) until done says
// the newest records per key suffice, and returns them.
func results(t testing.TB, brokers string, timeout time.Duration, done func(map[string]*grovepb.Evaluation) bool) map[string]*grovepb.Evaluation {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(brokers), kgo.ConsumeTopics(evalTopic), kgo.FetchIsolationLevel(kgo.ReadCommitted()),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	latest := map[string]*grovepb.Evaluation{}
	for !done(latest) {
		fs := cl.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatalf("evaluations after %v: %d keys, not what was expected", timeout, len(latest))
		}
		for _, r := range fs.Records() {
			ev := &grovepb.Evaluation{}
			if err := proto.Unmarshal(r.Value, ev); err != nil {
				t.Fatal(err)
			}
			latest[string(r.Key)] = ev
		}
	}
	return latest
}

// table applies the newest records to an evaluations.Table, as grove
// serve does, and publishes them.
func table(t *testing.T, latest map[string]*grovepb.Evaluation) *evaluations.Table {
	t.Helper()
	tb := evaluations.NewTable()
	for k, ev := range latest {
		v, err := proto.Marshal(ev)
		if err != nil {
			t.Fatal(err)
		}
		if err := tb.Apply([]byte(k), v); err != nil {
			t.Fatal(err)
		}
	}
	tb.Publish()
	return tb
}

// scoredAll reports whether the counters records of every partition say
// want predictions were scored.
func scoredAll(want uint64) func(map[string]*grovepb.Evaluation) bool {
	return func(latest map[string]*grovepb.Evaluation) bool {
		var n uint64
		for _, ev := range latest {
			n += ev.GetCounters().GetScored()
		}
		return n == want
	}
}

// checkTotals compares the evaluators' merged results with the
// reference joiner's.
func checkTotals(t *testing.T, latest map[string]*grovepb.Evaluation, ref *join.Snapshot) {
	t.Helper()
	tb := table(t, latest)
	if c := tb.Totals().Counters; c != ref.Counters {
		t.Errorf("counters\n got %+v\nwant %+v", c, ref.Counters)
	}
	for _, rs := range ref.Series {
		w := &quality.OutcomeWindows[quality.Binary, *quality.Binary]{}
		if err := w.UnmarshalBinary(rs.Binary); err != nil {
			t.Fatal(err)
		}
		_, st := tb.Outcomes(rs.Key.Contract, rs.Key.Release, rs.Key.Shadow, "")
		if st == nil || st.SinceValid.BinaryFigures == nil {
			t.Errorf("no results for %v", rs.Key)
			continue
		}
		g, want := st.SinceValid, w.SinceValid()
		if g.Count != want.Count() || g.Positives != want.Positives() || g.LogLoss == nil || math.Abs(*g.LogLoss-want.LogLoss()) > 1e-9 ||
			g.MeanPrediction == nil || math.Abs(*g.MeanPrediction-want.MeanPrediction()) > 1e-9 || g.AUC == nil || math.Abs(*g.AUC-want.AUC()) > 0.001 {
			t.Errorf("%v: %+v, want count %d positives %d logloss %v auc %v", rs.Key, g.BinaryFigures,
				want.Count(), want.Positives(), want.LogLoss(), want.AUC())
		}
	}
}

// cluster starts a kfake broker with 4 partitions per topic.
func cluster(t testing.TB) string {
	t.Helper()
	c, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(4, predTopic, outTopic), kfake.AllowAutoTopicCreation(),
		kfake.DefaultNumPartitions(4))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	return c.ListenAddrs()[0]
}

// config is an evaluator's config on brokers with state under dir.
func config(brokers, instance, dir string) Config {
	return Config{Kafka: []kgo.Opt{kgo.SeedBrokers(brokers)}, PredictionTopic: predTopic, OutcomeTopic: outTopic, EvaluationsTopic: evalTopic,
		Group: "grove-evaluate", Instance: instance, CommitInterval: 200 * time.Millisecond, TransactionTimeout: 3 * time.Second, StateDir: dir,
		Rules: func() ([]join.Rule, bool) { return []join.Rule{{Contract: contract, Outcomes: testRule}}, true }}
}

// Outcomes produced to any partition, predictions keyed by request_id:
// the evaluator's totals across the 4 partitions equal those of one
// joiner fed the whole stream, and a second evaluator sharing the
// partitions changes nothing.
func TestEvaluatorsTotalsEqualOneJoinerOverTheWholeStream(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name       string
		evaluators int
	}{{"one evaluator", 1}, {"two evaluators sharing the partitions", 2}} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			brokers := cluster(t)
			ctx, cancel := context.WithCancel(context.Background())
			var wg sync.WaitGroup
			defer func() { cancel(); wg.Wait() }()
			for i := range tc.evaluators {
				cfg := config(brokers, fmt.Sprintf("e%d", i), t.TempDir())
				wg.Add(1)
				go func() {
					defer wg.Done()
					if err := Run(ctx, cfg); err != nil {
						t.Errorf("evaluator %d: %v", i, err)
					}
				}()
			}
			prod, err := kgo.NewClient(kgo.SeedBrokers(brokers))
			if err != nil {
				t.Fatal(err)
			}
			defer prod.Close()
			s := stream(7, time.Now().Add(500*time.Millisecond), 400)
			ref := reference(t, s)
			play(ctx, t, prod, s)
			latest := results(t, brokers, 30*time.Second, scoredAll(ref.Counters.Scored))
			checkTotals(t, latest, ref)
		})
	}
}

// An evaluator stopped mid-stream without committing (its context ends
// inside a transaction) and started again over the same state directory
// and instance ends with the totals of one uninterrupted joiner.
func TestEvaluatorRestartedMidStreamLosesAndDoublesNothing(t *testing.T) {
	t.Parallel()
	brokers := cluster(t)
	dir := t.TempDir()
	prod, err := kgo.NewClient(kgo.SeedBrokers(brokers))
	if err != nil {
		t.Fatal(err)
	}
	defer prod.Close()
	s := stream(11, time.Now().Add(500*time.Millisecond), 800)
	ref := reference(t, s)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	playing := make(chan struct{})
	go func() { defer close(playing); play(ctx, t, prod, s) }()

	first, stopFirst := context.WithCancel(ctx)
	stopped := make(chan struct{})
	go func() {
		defer close(stopped)
		if err := Run(first, config(brokers, "e0", dir)); err != nil {
			t.Errorf("first run: %v", err)
		}
	}()
	time.Sleep(2500 * time.Millisecond) // mid-stream: the stream lasts 4 s
	stopFirst()
	<-stopped
	done := make(chan struct{})
	go func() {
		defer close(done)
		if err := Run(ctx, config(brokers, "e0", dir)); err != nil {
			t.Errorf("second run: %v", err)
		}
	}()
	<-playing
	latest := results(t, brokers, 30*time.Second, scoredAll(ref.Counters.Scored))
	checkTotals(t, latest, ref)
	cancel()
	<-done
}

// With snapshots every few kilobytes of changelog, an evaluator
// truncates its changelog as it goes, and one stopped mid-stream and
// started again, rebuilding its partitions from what is left, still ends
// with the totals of one uninterrupted joiner.
func TestEvaluatorTruncatesItsChangelogAndRestoresFromWhatIsLeft(t *testing.T) {
	t.Parallel()
	brokers := cluster(t)
	dir := t.TempDir()
	prod, err := kgo.NewClient(kgo.SeedBrokers(brokers))
	if err != nil {
		t.Fatal(err)
	}
	defer prod.Close()
	s := stream(13, time.Now().Add(500*time.Millisecond), 800)
	ref := reference(t, s)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	playing := make(chan struct{})
	go func() { defer close(playing); play(ctx, t, prod, s) }()
	cfg := config(brokers, "e0", dir)
	cfg.snapshotMinLog, cfg.snapshotChunk = 2<<10, 512

	first, stopFirst := context.WithCancel(ctx)
	stopped := make(chan struct{})
	go func() {
		defer close(stopped)
		if err := Run(first, cfg); err != nil {
			t.Errorf("first run: %v", err)
		}
	}()
	// Stop the first run as soon as it has truncated a changelog
	// partition (mid-stream when the machine keeps up: the stream lasts
	// 4 s), not after a fixed time, which a loaded machine can reach
	// before the first truncation.
	adm := kadm.NewClient(prod)
	truncated := func() int {
		starts, err := adm.ListStartOffsets(ctx, cfg.Group+"-changelog")
		if err != nil {
			return 0 // the topic is not there yet
		}
		n := 0
		starts.Each(func(o kadm.ListedOffset) {
			if o.Offset > 0 {
				n++
			}
		})
		return n
	}
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	deadline := time.After(30 * time.Second)
	for truncated() == 0 {
		select {
		case <-tick.C:
		case <-deadline:
			t.Fatal("no changelog partition was truncated within 30 s")
		}
	}
	stopFirst()
	<-stopped
	done := make(chan struct{})
	go func() {
		defer close(done)
		if err := Run(ctx, cfg); err != nil {
			t.Errorf("second run: %v", err)
		}
	}()
	<-playing
	latest := results(t, brokers, 30*time.Second, scoredAll(ref.Counters.Scored))
	checkTotals(t, latest, ref)
	cancel()
	<-done
}

// An evaluator that starts behind the stream (its predictions and
// outcomes spanning far more than the lateness, all written before it
// starts, as after an outage or a restart slower than the lateness)
// reads the two topics at different paces: the outcomes reach the join a
// commit later, through the repartition topic. It still ends with the
// totals of one joiner that saw the stream as it happened: no outcome
// counts late because the predictions were read first, and no prediction
// because the outcomes were.
func TestEvaluatorStartedBehindTheStreamCountsNoOutcomeLateForBeingReadLater(t *testing.T) {
	t.Parallel()
	brokers := cluster(t)
	prod, err := kgo.NewClient(kgo.SeedBrokers(brokers))
	if err != nil {
		t.Fatal(err)
	}
	defer prod.Close()
	// 60 s of stream, ended 2 s ago: forty times the lateness, and more
	// predictions than the evaluator reads in a commit interval.
	s := stream(17, time.Now().Add(-62*time.Second), 12000)
	ref := reference(t, s)
	if ref.Counters.Outcomes == 0 {
		t.Fatal("the reference joined no outcome")
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	play(ctx, t, prod, s)
	done := make(chan struct{})
	go func() {
		defer close(done)
		cfg := config(brokers, "e0", t.TempDir())
		// Short commits and small fetches: the outcomes read in the first
		// commits reach the join while most of the prediction log is still
		// to be read.
		cfg.CommitInterval = 20 * time.Millisecond
		cfg.Kafka = append(cfg.Kafka, kgo.FetchMaxPartitionBytes(16<<10))
		if err := Run(ctx, cfg); err != nil {
			t.Errorf("evaluator: %v", err)
		}
	}()
	latest := results(t, brokers, 30*time.Second, scoredAll(ref.Counters.Scored))
	checkTotals(t, latest, ref)
	cancel()
	<-done
}

// With a prediction every 1–2 ms and no outcome at all (every outcome
// partition idle, as before the first click), the first results come
// about window + lateness after the first prediction, not whenever the
// evaluator happens to find every partition read to its end at once;
// and an outcome that comes afterwards on an idle partition, its time in
// a window that has closed, is counted late.
//
// No t.Parallel: it times the first results, so it runs before the
// package's parallel tests.
func TestEvaluatorScoresOnTimeWhileOutcomePartitionsAreIdle(t *testing.T) {
	brokers := cluster(t)
	prod, err := kgo.NewClient(kgo.SeedBrokers(brokers))
	if err != nil {
		t.Fatal(err)
	}
	defer prod.Close()
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	defer func() { cancel(); wg.Wait() }()
	cfg := config(brokers, "e0", t.TempDir())
	wg.Add(1)
	go func() {
		defer wg.Done()
		if err := Run(ctx, cfg); err != nil {
			t.Errorf("evaluator: %v", err)
		}
	}()
	waitStable(ctx, t, prod, cfg.Group)

	first := make(chan time.Time, 1)
	wg.Add(1)
	go func() {
		defer wg.Done()
		predictEvery(ctx, t, prod, 23, func(i int, ts time.Time) {
			if i == 0 {
				first <- ts
			}
		})
	}()
	start := <-first
	due := testRule.Window + testRule.Lateness
	// A commit interval to write the idle partitions' frontier, one to
	// read it, and as much again for a loaded machine: far less than
	// the 9 s and more that the first results took while an idle
	// partition held the watermark.
	slack := 3 * time.Second
	results(t, brokers, due+20*time.Second, func(latest map[string]*grovepb.Evaluation) bool {
		for _, ev := range latest {
			if ev.GetCounters().GetScored() > 0 {
				return true
			}
		}
		return false
	})
	took := time.Since(start)
	t.Logf("the first results came %v after the first prediction", took.Round(time.Millisecond))
	if took > due+slack {
		t.Fatalf("the first results came %v after the first prediction, want about window + lateness (%v), at most %v", took.Round(time.Millisecond), due, due+slack)
	}

	// A click on the first request, its time in that request's window,
	// which has closed: late, and counted so.
	o := &grovepb.Outcome{OutcomeId: "late-click", RequestId: "req-0", EventTime: timestamppb.New(start.Add(testRule.Window / 2)),
		Labels: map[string]float64{"click": 1}}
	r, err := outcome.Record(o, outTopic)
	if err != nil {
		t.Fatal(err)
	}
	if err := prod.ProduceSync(ctx, r).FirstErr(); err != nil {
		t.Fatal(err)
	}
	results(t, brokers, 20*time.Second, func(latest map[string]*grovepb.Evaluation) bool {
		var late uint64
		for _, ev := range latest {
			late += ev.GetCounters().GetLate()
		}
		return late == 1
	})
}

// predictEvery produces a prediction stamped with the clock every 1–2 ms
// until ctx ends, request req-i the i-th, and calls sent with i and its
// time once it is produced.
func predictEvery(ctx context.Context, t *testing.T, prod *kgo.Client, seed uint64, sent func(i int, ts time.Time)) {
	rng := rand.New(rand.NewPCG(seed, 2))
	for i := 0; ctx.Err() == nil; i++ {
		ts := time.Now()
		req := fmt.Sprintf("req-%d", i)
		ev := &grovepb.PredictionEvent{EventId: req + "/v1", RequestId: req, Timestamp: timestamppb.New(ts), Contract: contract,
			ReleaseVersion: "v1", ModelPath: "v1/", Served: true,
			Outputs: []*grovepb.Tensor{{Name: "output_0", Datatype: "FLOAT", Shape: []int64{1}, FloatData: []float32{0.3}}}}
		v, err := logging.Encode(ev, conf.EncodingProto)
		if err != nil {
			t.Error(err)
			return
		}
		prod.Produce(ctx, &kgo.Record{Topic: predTopic, Key: []byte(req), Value: v, Timestamp: ts}, func(_ *kgo.Record, err error) {
			if err != nil && ctx.Err() == nil {
				t.Error(err)
			}
		})
		sent(i, ts)
		select {
		case <-ctx.Done():
		case <-time.After(time.Millisecond + time.Duration(rng.Int64N(int64(time.Millisecond)))):
		}
	}
}

// With a transactional producer committing a click to every outcome
// partition every 300 ms (each stamped with its event time, 4.5 s
// before it is written, within a lateness of 5 s), the first results
// come about window + lateness after the first prediction: a partition
// whose last record is the producer's commit marker counts as read to
// its end, as one written without transactions does, rather than only
// up to its records' times (and, while the producer's next transaction
// is open, up to the last listing before it began). No click is counted
// late for it.
//
// No t.Parallel: it times the first results, so it runs before the
// package's parallel tests.
func TestEvaluatorScoresOnTimeWhileATransactionalProducerWritesOutcomes(t *testing.T) {
	brokers := cluster(t)
	prod, err := kgo.NewClient(kgo.SeedBrokers(brokers))
	if err != nil {
		t.Fatal(err)
	}
	defer prod.Close()
	clicker, err := kgo.NewClient(kgo.SeedBrokers(brokers), kgo.RecordPartitioner(kgo.ManualPartitioner()), kgo.TransactionalID("clicker"))
	if err != nil {
		t.Fatal(err)
	}
	defer clicker.Close()
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	defer func() { cancel(); wg.Wait() }()
	rule := testRule
	rule.Lateness = 5 * time.Second
	const delay = 4500 * time.Millisecond
	cfg := config(brokers, "e0", t.TempDir())
	cfg.Rules = func() ([]join.Rule, bool) { return []join.Rule{{Contract: contract, Outcomes: rule}}, true }
	wg.Add(1)
	go func() {
		defer wg.Done()
		if err := Run(ctx, cfg); err != nil {
			t.Errorf("evaluator: %v", err)
		}
	}()
	waitStable(ctx, t, prod, cfg.Group)

	var mu sync.Mutex
	var sent []time.Time // the predictions' times, req-i the i-th
	first := make(chan time.Time, 1)
	wg.Add(1)
	go func() {
		defer wg.Done()
		predictEvery(ctx, t, prod, 29, func(i int, ts time.Time) {
			mu.Lock()
			sent = append(sent, ts)
			mu.Unlock()
			if i == 0 {
				first <- ts
			}
		})
	}()
	start := <-first
	wg.Add(1)
	go func() {
		defer wg.Done()
		tick := time.NewTicker(300 * time.Millisecond)
		defer tick.Stop()
		for n := 0; ; n++ {
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
			}
			// A click on the newest request made before its event time
			// (none before the first request).
			at := time.Now().Add(-delay)
			mu.Lock()
			i := sort.Search(len(sent), func(i int) bool { return !sent[i].Before(at) }) - 1
			mu.Unlock()
			req := "none"
			if i >= 0 {
				req = fmt.Sprintf("req-%d", i)
			}
			if err := clicker.BeginTransaction(); err != nil {
				t.Error(err)
				return
			}
			for q := range int32(4) {
				r, err := outcome.Record(&grovepb.Outcome{OutcomeId: fmt.Sprintf("click-%d-%d", n, q), RequestId: req, EventTime: timestamppb.New(at),
					Labels: map[string]float64{"click": 1}}, outTopic)
				if err != nil {
					t.Error(err)
					return
				}
				r.Partition, r.Timestamp = q, at
				clicker.Produce(ctx, r, func(_ *kgo.Record, err error) {
					if err != nil && ctx.Err() == nil {
						t.Error(err)
					}
				})
			}
			// EndTransaction does not flush: the clicks must be
			// acknowledged first. Otherwise the EndTxn can reach the
			// broker before their produce request, commit without
			// them and (under KIP-890) bump the producer epoch, and
			// the broker then refuses them as from an old epoch.
			if err := clicker.Flush(ctx); err != nil {
				if ctx.Err() == nil {
					t.Error(err)
				}
				return
			}
			if err := clicker.EndTransaction(ctx, kgo.TryCommit); err != nil {
				if ctx.Err() == nil {
					t.Error(err)
				}
				return
			}
		}
	}()

	due := rule.Window + rule.Lateness
	// A few commit intervals to write and read the frontier, and more
	// for a loaded machine (make test runs packages side by side on two
	// cores); less than the delay, by which the clicks' times lag the
	// clock, so that a frontier following the clicks' times fails.
	slack := 3 * time.Second
	results(t, brokers, due+20*time.Second, func(latest map[string]*grovepb.Evaluation) bool {
		for _, ev := range latest {
			if ev.GetCounters().GetScored() > 0 {
				return true
			}
		}
		return false
	})
	took := time.Since(start)
	t.Logf("the first results came %v after the first prediction", took.Round(time.Millisecond))
	if took > due+slack {
		t.Fatalf("the first results came %v after the first prediction, want about window + lateness (%v), at most %v", took.Round(time.Millisecond), due, due+slack)
	}
	latest := results(t, brokers, 20*time.Second, func(latest map[string]*grovepb.Evaluation) bool {
		var joined uint64
		for _, ev := range latest {
			joined += ev.GetCounters().GetJoined()
		}
		return joined >= 5
	})
	for k, ev := range latest {
		if c := ev.GetCounters(); c.GetLate() != 0 {
			t.Errorf("%s: %d outcomes late, want none: %+v", k, c.GetLate(), c)
		}
	}
}

// waitStable waits until group is stable with a member that has been
// given partitions.
func waitStable(ctx context.Context, t *testing.T, cl *kgo.Client, group string) {
	t.Helper()
	adm := kadm.NewClient(cl)
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for {
		gs, err := adm.DescribeGroups(ctx, group)
		if err == nil {
			if g, ok := gs[group]; ok && g.Err == nil && g.State == "Stable" && len(g.Members) > 0 && len(g.AssignedPartitions()) > 0 {
				return
			}
		}
		select {
		case <-ctx.Done():
			t.Fatalf("group %s not stable with partitions assigned within 30 s", group)
		case <-tick.C:
		}
	}
}
