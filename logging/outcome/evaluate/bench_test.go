package evaluate

import (
	"context"
	"fmt"
	"math/rand/v2"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/groveml/grove/conf"
	"github.com/groveml/grove/conf/modelconfig"
	"github.com/groveml/grove/grovepb"
	"github.com/groveml/grove/logging"
	"github.com/groveml/grove/logging/outcome"
	"github.com/groveml/grove/logging/outcome/join"
)

// BenchmarkEvaluator runs an evaluator over a stream produced beforehand
// to an in-process broker (kfake, 4 partitions): 20,000 requests, each a
// served and a shadow prediction with 64 input features, a quarter with
// a click, a tenth of those twice, each record stamped with its event time
// and all written before the evaluator starts; the rule has the default
// lateness (a minute), so windows close while the evaluator catches up,
// its frontier keeping every count exact. It reports the
// records (predictions and outcomes) taken per second, from the
// evaluator's start until its counters say every record was taken. The
// broker runs in the same process: use it for profiles (grovebench's
// evaluate scenario measures the real binary).
func BenchmarkEvaluator(b *testing.B) {
	const requests = 20000
	rule := modelconfig.Outcomes{Label: "click", Kind: modelconfig.OutcomeBinary, Window: 30 * time.Second,
		Missing: modelconfig.OutcomeMissingNegative, Lateness: time.Minute}
	start := time.Now().Add(-3 * time.Hour)
	rng := rand.New(rand.NewPCG(28, 1))
	var recs []*kgo.Record
	features := make([]float32, 64)
	for i := range requests {
		ts := start.Add(time.Duration(i) * time.Millisecond)
		req := fmt.Sprintf("%016x%016x", rng.Uint64(), rng.Uint64())
		for f := range features {
			features[f] = rng.Float32()
		}
		p := 0.01 + 0.3*rng.Float64()
		for _, rel := range []string{"v1", "v2"} {
			ev := &grovepb.PredictionEvent{EventId: req + rel, RequestId: req, Timestamp: timestamppb.New(ts), Contract: contract,
				ReleaseVersion: rel, ModelPath: rel + "/", Served: rel == "v1",
				Inputs:  []*grovepb.Tensor{{Name: "features", Datatype: "FLOAT", Shape: []int64{1, 64}, FloatData: features}},
				Outputs: []*grovepb.Tensor{{Name: "output_0", Datatype: "FLOAT", Shape: []int64{1, 1}, FloatData: []float32{float32(p)}}}}
			v, err := logging.Encode(ev, conf.EncodingProto)
			if err != nil {
				b.Fatal(err)
			}
			recs = append(recs, &kgo.Record{Topic: predTopic, Key: []byte(req), Value: v, Timestamp: ts})
		}
		if rng.Float64() < p {
			o := &grovepb.Outcome{OutcomeId: req + "/c", RequestId: req, EventTime: timestamppb.New(ts.Add(time.Duration(rng.Float64() * float64(rule.Window)))),
				Labels: map[string]float64{"click": 1}}
			for range 1 + int(rng.Float64()/0.9) {
				r, err := outcome.Record(o, outTopic)
				if err != nil {
					b.Fatal(err)
				}
				r.Timestamp = o.EventTime.AsTime()
				recs = append(recs, r)
			}
		}
	}
	var taken uint64
	var elapsed, cpu time.Duration
	for b.Loop() {
		b.StopTimer()
		brokers := cluster(b)
		prod, err := kgo.NewClient(kgo.SeedBrokers(brokers), kgo.ProducerBatchCompression(kgo.SnappyCompression()))
		if err != nil {
			b.Fatal(err)
		}
		ctx, cancel := context.WithCancel(context.Background())
		// Fresh records: a produced one keeps the context it was produced with.
		fresh := make([]*kgo.Record, len(recs))
		for i, r := range recs {
			fresh[i] = &kgo.Record{Topic: r.Topic, Key: r.Key, Value: r.Value, Headers: r.Headers, Timestamp: r.Timestamp}
		}
		if err := prod.ProduceSync(ctx, fresh...).FirstErr(); err != nil {
			b.Fatalf("producing the stream: %v", err)
		}
		prod.Close()
		cfg := config(brokers, "bench", b.TempDir())
		cfg.Rules = func() ([]join.Rule, bool) { return []join.Rule{{Contract: contract, Outcomes: rule}}, true }
		cfg.CommitInterval = time.Second
		done := make(chan error, 1)
		b.StartTimer()
		t0, cpu0 := time.Now(), processCPU()
		go func() { done <- Run(ctx, cfg) }()
		results(b, brokers, 5*time.Minute, func(latest map[string]*grovepb.Evaluation) bool {
			var n uint64
			for _, ev := range latest {
				c := ev.GetCounters()
				n += c.GetPredictions() + c.GetOutcomes() + c.GetDuplicateOutcomes() + c.GetLate() + c.GetLatePredictions()
			}
			return n == uint64(len(recs))
		})
		elapsed += time.Since(t0)
		cpu += processCPU() - cpu0
		taken += uint64(len(recs))
		b.StopTimer()
		cancel()
		if err := <-done; err != nil {
			b.Fatalf("evaluator: %v", err)
		}
		b.StartTimer()
	}
	b.ReportMetric(float64(taken)/elapsed.Seconds(), "records/s")
	b.ReportMetric(float64(taken)/cpu.Seconds(), "records/cpu-s")
}

// processCPU is the CPU time the process has used (user and system): the
// evaluator's, and the in-process broker's.
func processCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// BenchmarkPartition is one partition's work without Kafka: 20,000
// requests (a served and a shadow prediction with 64 input features,
// encoded as Grove logs them, and a click for a quarter of them, a tenth
// of those twice) decoded and joined over the evaluator's tiered store,
// whose changes are encoded for the changelog every 5,000 records, then
// every window closed and scored. It reports the records taken per
// second and per CPU-second of the process.
func BenchmarkPartition(b *testing.B) {
	const requests = 20000
	rule := modelconfig.Outcomes{Label: "click", Kind: modelconfig.OutcomeBinary, Window: 30 * time.Second,
		Missing: modelconfig.OutcomeMissingNegative, Lateness: time.Hour}
	start := time.Now().Add(-3 * time.Hour)
	rng := rand.New(rand.NewPCG(28, 1))
	type rec struct {
		key, value []byte
		out        *grovepb.Outcome
	}
	var recs []rec
	features := make([]float32, 64)
	for i := range requests {
		ts := start.Add(time.Duration(i) * time.Millisecond)
		req := fmt.Sprintf("%016x%016x", rng.Uint64(), rng.Uint64())
		for f := range features {
			features[f] = rng.Float32()
		}
		p := 0.01 + 0.3*rng.Float64()
		for _, rel := range []string{"v1", "v2"} {
			ev := &grovepb.PredictionEvent{EventId: req + rel, RequestId: req, Timestamp: timestamppb.New(ts), Contract: contract,
				ReleaseVersion: rel, ModelPath: rel + "/", Served: rel == "v1",
				Inputs:  []*grovepb.Tensor{{Name: "features", Datatype: "FLOAT", Shape: []int64{1, 64}, FloatData: features}},
				Outputs: []*grovepb.Tensor{{Name: "output_0", Datatype: "FLOAT", Shape: []int64{1, 1}, FloatData: []float32{float32(p)}}}}
			v, err := logging.Encode(ev, conf.EncodingProto)
			if err != nil {
				b.Fatal(err)
			}
			recs = append(recs, rec{key: []byte(req), value: v})
		}
		if rng.Float64() < p {
			o := &grovepb.Outcome{OutcomeId: req + "/c", RequestId: req, EventTime: timestamppb.New(ts.Add(time.Duration(rng.Float64() * float64(rule.Window)))),
				Labels: map[string]float64{"click": 1}}
			for range 1 + int(rng.Float64()/0.9) {
				recs = append(recs, rec{out: o})
			}
		}
	}
	now := time.Now()
	var bufs bufferPool
	var dec eventDecoder
	var cpu time.Duration
	for b.Loop() {
		b.StopTimer()
		st, err := join.OpenPebbleEphemeral(b.TempDir())
		if err != nil {
			b.Fatal(err)
		}
		tiered := join.NewTieredStore(partitionMemoryBytes, st)
		tiered.TrackChanges()
		j, err := join.New(join.Options{Rules: []join.Rule{{Contract: contract, Outcomes: rule}}, Store: tiered})
		if err != nil {
			b.Fatal(err)
		}
		flush := func() {
			w := &changelogWriter{topic: "changelog", bufs: &bufs}
			if err := tiered.Changes(w.change); err != nil {
				b.Fatal(err)
			}
			cp, err := j.Checkpoint()
			if err != nil {
				b.Fatal(err)
			}
			w.checkpoint(cp)
			w.records()
			bufs.reclaim()
		}
		b.StartTimer()
		cpu0 := processCPU()
		for i, r := range recs {
			if r.out != nil {
				err = j.AddOutcome(now, r.out)
			} else {
				ev, derr := dec.decode(r.value, nil)
				if derr != nil {
					b.Fatal(derr)
				}
				err = j.AddPrediction(now, join.Prediction{Event: ev, Key: r.key})
			}
			if err != nil {
				b.Fatal(err)
			}
			if i%5000 == 4999 {
				flush()
			}
		}
		flush()
		if err := j.Advance(now.Add(3 * time.Hour)); err != nil {
			b.Fatal(err)
		}
		flush()
		cpu += processCPU() - cpu0
		b.StopTimer()
		if c := j.Counters(); c.Scored != 2*requests {
			b.Fatalf("scored %d, want %d", c.Scored, 2*requests)
		}
		st.Close()
		b.StartTimer()
	}
	b.ReportMetric(float64(len(recs))*float64(b.N)/b.Elapsed().Seconds(), "records/s")
	b.ReportMetric(float64(len(recs))*float64(b.N)/cpu.Seconds(), "records/cpu-s")
}
