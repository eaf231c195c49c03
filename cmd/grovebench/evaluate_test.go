package main

import (
	"bytes"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"google.golang.org/protobuf/proto"

	"github.com/groveml/grove/conf/modelconfig"
	"github.com/groveml/grove/grovepb"
	"github.com/groveml/grove/logging"
	"github.com/groveml/grove/logging/outcome"
)

// The stream: a served and a shadow prediction per request keyed by its
// request_id, evalStep apart; outcomes in event-time order within the
// window, and copies (sent a second after their first) with the first's
// id and event time; the tick of a partition
// after every window and outcome by more than the lateness.
func TestEvalStreamKeysPredictionsByRequestAndKeepsOutcomesInTheirWindow(t *testing.T) {
	start := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	s, err := makeEvalStream(1, 2000, start)
	if err != nil {
		t.Fatal(err)
	}
	if len(s.preds) != 4000 || s.clicks == 0 || len(s.outs) <= s.clicks || s.records() != len(s.preds)+len(s.outs) {
		t.Fatalf("%d predictions, %d clicks, %d outcomes", len(s.preds), s.clicks, len(s.outs))
	}
	times := map[string]time.Time{}
	for i, r := range s.preds {
		ev, err := logging.Decode(r.Value, r.Headers)
		if err != nil {
			t.Fatal(err)
		}
		if string(r.Key) != ev.GetRequestId() || ev.GetContract() != evalContract || ev.GetServed() != (i%2 == 0) {
			t.Fatalf("prediction %d: key %q, request %q, contract %q, served %v", i, r.Key, ev.GetRequestId(), ev.GetContract(), ev.GetServed())
		}
		if want := start.Add(time.Duration(i/2) * evalStep); !ev.GetTimestamp().AsTime().Equal(want) || !r.Timestamp.Equal(want) {
			t.Fatalf("prediction %d at %v, its record stamped %v, want %v", i, ev.GetTimestamp().AsTime(), r.Timestamp, want)
		}
		if len(ev.GetInputs()) != 1 || len(ev.GetInputs()[0].GetFloatData()) != evalFeatures || ev.GetOutputs()[0].GetName() != "output_0" {
			t.Fatalf("prediction %d: inputs %v outputs %v", i, ev.GetInputs(), ev.GetOutputs())
		}
		times[ev.GetRequestId()] = ev.GetTimestamp().AsTime()
	}
	ids := map[string]time.Time{}
	var last time.Time
	for i, r := range s.outs {
		o, err := outcome.DecodeRecord(r.Value, r.Headers)
		if err != nil {
			t.Fatal(err)
		}
		ts, ok := times[o.GetRequestId()]
		at := o.GetEventTime().AsTime()
		if !r.Timestamp.Equal(at) && !r.Timestamp.Equal(at.Add(time.Second)) {
			t.Fatalf("outcome %d at %v, its record stamped %v", i, at, r.Timestamp)
		}
		if first, dup := ids[o.GetOutcomeId()]; dup {
			if !at.Equal(first) {
				t.Fatalf("outcome %d, a copy at %v of one at %v", i, at, first)
			}
			continue
		}
		if !ok || string(r.Key) != o.GetRequestId() || at.Before(ts) || !at.Before(ts.Add(evalWindow)) || at.Before(last) {
			t.Fatalf("outcome %d: key %q, request %q at %v, its prediction at %v (%v), the last outcome at %v", i, r.Key, o.GetRequestId(), at, ts, ok, last)
		}
		last = at
		ids[o.GetOutcomeId()] = at
	}
	if len(ids) != s.clicks {
		t.Errorf("%d distinct outcome ids, want %d", len(ids), s.clicks)
	}
	lateness := evalLateness
	tick, err := s.tick(3, lateness)
	if err != nil {
		t.Fatal(err)
	}
	ev, err := logging.Decode(tick.Value, nil)
	if err != nil {
		t.Fatal(err)
	}
	if tick.Partition != 3 || ev.GetContract() == evalContract || ev.GetTimestamp().AsTime().Add(-lateness).Before(last.Add(evalWindow)) {
		t.Errorf("tick of partition %d, contract %q at %v: its watermark does not pass %v", tick.Partition, ev.GetContract(), ev.GetTimestamp().AsTime(), last.Add(evalWindow))
	}
}

// The model configs of the evaluate scenario and of grove+eval parse, with
// the outcomes rule where the evaluator looks for it.
func TestEvalConfigsParseWithTheirOutcomesRules(t *testing.T) {
	c, err := modelconfig.Parse([]byte(evalConfig(3 * time.Minute)))
	if err != nil {
		t.Fatal(err)
	}
	if len(c.Contracts) != 1 || c.Contracts[0].ID() != evalContract || c.Contracts[0].Outcomes == nil ||
		c.Contracts[0].Outcomes.Lateness != 3*time.Minute || c.Contracts[0].Outcomes.Window != evalWindow {
		t.Errorf("evaluate config: %+v", c.Contracts)
	}
	bucket, dir := t.TempDir(), filepath.Join(t.TempDir(), "eval")
	for _, f := range []string{modelPath + "model.pt", onnxPath + "model.onnx", deepPath + "model.pt"} {
		if err := os.MkdirAll(filepath.Join(bucket, filepath.Dir(f)), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(bucket, f), []byte(f), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if err := writeEvalBucket(bucket, dir); err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(filepath.Join(dir, "model_config.json"))
	if err != nil {
		t.Fatal(err)
	}
	if c, err = modelconfig.Parse(data); err != nil {
		t.Fatal(err)
	}
	rules := 0
	for _, m := range c.Models {
		if m.Outcomes != nil {
			rules++
			if m.Path != modelPath {
				t.Errorf("an outcomes rule on %s", m.Path)
			}
		}
	}
	if rules != 1 {
		t.Errorf("%d outcomes rules, want one on %s", rules, modelPath)
	}
	if got, err := os.ReadFile(filepath.Join(dir, onnxPath, "model.onnx")); err != nil || string(got) != onnxPath+"model.onnx" {
		t.Errorf("model file: %q, %v", got, err)
	}
}

// The evaluations topic's counters records: the newest per partition
// counts, series records are skipped, and taken adds up every way a
// record is counted.
func TestEvalTotalsKeepTheNewestCountersOfEachPartition(t *testing.T) {
	rec := func(ev *grovepb.Evaluation) *kgo.Record {
		v, err := proto.Marshal(ev)
		if err != nil {
			t.Fatal(err)
		}
		return &kgo.Record{Value: v}
	}
	totals := evalTotals{}
	for _, ev := range []*grovepb.Evaluation{
		{Partition: 0, Counters: &grovepb.EvaluationCounters{Predictions: 5}},
		{Partition: 0, Counters: &grovepb.EvaluationCounters{Predictions: 10, Outcomes: 2, DuplicateOutcomes: 1, Late: 1}},
		{Partition: 1, Counters: &grovepb.EvaluationCounters{Predictions: 7, LatePredictions: 1, DuplicatePredictions: 1, Unconfigured: 1, Invalid: 1, Scored: 3}},
		{Partition: 1, Contract: evalContract, Release: "v1"},
	} {
		if _, err := totals.take(rec(ev)); err != nil {
			t.Fatal(err)
		}
	}
	c := totals.sum()
	if c.Predictions != 17 || c.Scored != 3 || c.taken() != 10+2+1+1+7+1+1+1+1 {
		t.Errorf("sum %+v, taken %d", c, c.taken())
	}
	if _, err := totals.take(&kgo.Record{Value: []byte{0xff}}); err == nil {
		t.Error("a record that is not an Evaluation was taken")
	}
}

// --scenarios takes "evaluate" out of the list; --evaluate-requests
// refuses a stream too small to measure.
func TestEvaluateScenarioAndItsFlags(t *testing.T) {
	o, err := parseFlags([]string{"--scenarios", "evaluate", "--evaluate-requests", "5000"}, io.Discard)
	if err != nil || !o.evaluate || len(o.scenarios) != 0 || o.evalRequests != 5000 || o.swap {
		t.Errorf("evaluate alone: %+v, %v", o, err)
	}
	o, err = parseFlags([]string{"--scenarios", "grove+log/b1c32,Evaluate"}, io.Discard)
	if err != nil || !o.evaluate || len(o.scenarios) != 1 {
		t.Errorf("evaluate and a row: %+v, %v", o.scenarios, err)
	}
	if o, err = parseFlags(nil, io.Discard); err != nil || !o.evaluate || o.evalABRounds == 0 ||
		!strings.Contains(defaultSpec(), serverGroveEval+"/b1c32") {
		t.Errorf("default: evaluate %v, A/B rounds %d, %v", o.evaluate, o.evalABRounds, err)
	}
	if _, err := parseFlags([]string{"--scenarios", "evaluate", "--evaluate-requests", "10"}, io.Discard); !errors.Is(err, errEvalRequests) {
		t.Errorf("10 requests: %v", err)
	}
}

// The report says whether the targets were met, from the figures.
func TestEvaluateReportsJudgeTheirTargets(t *testing.T) {
	var b bytes.Buffer
	(&evalReport{Records: 100, PerCore: 120_000, PerCoreRunning: 150_000, StartupCPU: 0.5, Target: evalTarget}).writeMarkdown(&b)
	met := b.String()
	b.Reset()
	(&evalReport{Records: 100, PerCore: 30_000, PerCoreRunning: 90_000, StartupCPU: 1.5, Target: evalTarget}).writeMarkdown(&b)
	missed := b.String()
	b.Reset()
	(&evalReport{Error: "broker gone"}).writeMarkdown(&b)
	(*evalReport)(nil).writeMarkdown(&b)
	failed := b.String()
	if !strings.Contains(met, "120000 per CPU-second") || !strings.Contains(met, "150000 per CPU-second (less the 0.50 CPU-s") ||
		strings.Contains(met, "MISSED") || !strings.Contains(met, ": met)") {
		t.Errorf("report of figures over the target:\n%s", met)
	}
	if !strings.Contains(missed, "30000 per CPU-second") || !strings.Contains(missed, "90000 per CPU-second") ||
		strings.Contains(missed, "met)") || strings.Count(missed, "MISSED") != 2 {
		t.Errorf("report of figures under the target:\n%s", missed)
	}
	if !strings.Contains(failed, "FAILED: broker gone") {
		t.Errorf("report of a failure:\n%s", failed)
	}
	met = (&evalAB{Rounds: 2, Window: time.Second, LogRate: 1000, EvalRate: 960, Ratio: 0.96, Target: evalCostTarget}).lines()[0]
	missed = (&evalAB{Rounds: 2, Window: time.Second, LogRate: 1000, EvalRate: 700, Ratio: 0.7, Target: evalCostTarget}).lines()[0]
	if !strings.Contains(met, "0.960x") || !strings.Contains(met, ": met)") || !strings.Contains(missed, "MISSED") {
		t.Errorf("A/B lines:\n%s\n%s", met, missed)
	}
}
