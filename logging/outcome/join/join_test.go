package join

import (
	"math"
	"testing"
	"time"

	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/groveml/grove/conf/modelconfig"
	"github.com/groveml/grove/grovepb"
	"github.com/groveml/grove/routing/quality"
)

// t0 is the start of the tests' event time.
var t0 = time.Date(2026, 5, 1, 12, 0, 0, 0, time.UTC)

const contract = "ads/pctr/1"

// event is a prediction event of contract at t0+at: release's answer to
// request req, one row per value of its output "output_0".
func event(id, req string, at time.Duration, served bool, release string, values ...float32) *grovepb.PredictionEvent {
	return &grovepb.PredictionEvent{EventId: id, RequestId: req, Timestamp: timestamppb.New(t0.Add(at)),
		Contract: contract, ReleaseVersion: release, ModelPath: release + "/", Served: served,
		Outputs: []*grovepb.Tensor{{Name: "output_0", Datatype: "FLOAT", Shape: []int64{int64(len(values))}, FloatData: values}}}
}

// click is outcome id of request req's row 0 at t0+at, label click = v.
func click(id, req string, at time.Duration, v float64) *grovepb.Outcome {
	return &grovepb.Outcome{OutcomeId: id, RequestId: req, EventTime: timestamppb.New(t0.Add(at)),
		Labels: map[string]float64{"click": v}}
}

// rule is the tests' contract's rule: binary clicks, a 30m window, 1m of
// lateness, missing negative.
func rule() modelconfig.Outcomes {
	return modelconfig.Outcomes{Label: "click", Kind: modelconfig.OutcomeBinary, Window: 30 * time.Minute,
		Missing: modelconfig.OutcomeMissingNegative, Lateness: time.Minute}
}

// step is one input of a script: a prediction (with its record key), an
// outcome, or neither (Advance), taken at clock time t0+clock.
type step struct {
	pred  *grovepb.PredictionEvent
	key   string
	out   *grovepb.Outcome
	clock time.Duration
}

// run feeds steps to a new Joiner of rule r over store s (a MemStore when
// nil).
func run(t *testing.T, r modelconfig.Outcomes, s Store, steps ...step) *Joiner {
	t.Helper()
	if s == nil {
		s = NewMemStore()
	}
	j, err := New(Options{Rules: []Rule{{Contract: contract, Outcomes: r}}, Store: s})
	if err != nil {
		t.Fatal(err)
	}
	feed(t, j, steps...)
	return j
}

// feed feeds steps to j.
func feed(t *testing.T, j *Joiner, steps ...step) {
	t.Helper()
	for i, st := range steps {
		now := t0.Add(st.clock)
		var err error
		switch {
		case st.pred != nil:
			var key []byte
			if st.key != "" {
				key = []byte(st.key)
			}
			err = j.AddPrediction(now, Prediction{Event: st.pred, Key: key})
		case st.out != nil:
			err = j.AddOutcome(now, st.out)
		default:
			err = j.Advance(now)
		}
		if err != nil {
			t.Fatalf("step %d: %v", i, err)
		}
	}
}

// binaryOf returns the since_valid accumulator of series k.
func binaryOf(t *testing.T, j *Joiner, k SeriesKey) *quality.Binary {
	t.Helper()
	s := j.series[k]
	if s == nil || s.binary == nil {
		t.Fatalf("no binary series %v", k)
	}
	return s.binary.SinceValid()
}

var (
	v1 = SeriesKey{Contract: contract, Release: "v1"}
	v2 = SeriesKey{Contract: contract, Release: "v2", Shadow: true}
)

// TestJoinRules checks each rule of the join on a short script: the
// counters and the v1 series' count, positives and log loss.
func TestJoinRules(t *testing.T) {
	ignore := rule()
	ignore.Missing = modelconfig.OutcomeMissingIgnore
	// done is an Advance long after every window, with the partition idle.
	done := step{clock: 10 * time.Hour}
	cases := []struct {
		name      string
		rule      modelconfig.Outcomes
		steps     []step
		want      Counters
		count     uint64
		positives uint64
		logLoss   float64
	}{
		{
			name:  "an outcome in the window makes the prediction positive",
			rule:  rule(),
			steps: []step{{pred: event("e1", "r1", 0, true, "v1", 0.25)}, {out: click("c1", "r1", 5*time.Minute, 1), clock: 5 * time.Minute}, done},
			want:  Counters{Predictions: 1, Scored: 1, Joined: 1, Outcomes: 1}, count: 1, positives: 1, logLoss: -math.Log(0.25),
		},
		{
			name: "an outcome after the window is late and not used",
			rule: rule(),
			steps: []step{{pred: event("e1", "r1", 0, true, "v1", 0.25)},
				{out: click("c1", "r1", 31*time.Minute, 1), clock: 31 * time.Minute}, done},
			want: Counters{Predictions: 1, Scored: 1, Late: 1}, count: 1, logLoss: -math.Log(0.75),
		},
		{
			name: "an outcome in the window that comes after its close is late",
			rule: rule(),
			steps: []step{{pred: event("e1", "r1", 0, true, "v1", 0.25)},
				{pred: event("e2", "r2", 40*time.Minute, true, "v1", 0.5), clock: 40 * time.Minute},
				{out: click("c1", "r1", 10*time.Minute, 1), clock: 41 * time.Minute}, done},
			want: Counters{Predictions: 2, Scored: 2, Late: 1}, count: 2, logLoss: (-math.Log(0.75) - math.Log(0.5)) / 2,
		},
		{
			name: "an outcome that comes before its prediction is joined",
			rule: rule(),
			steps: []step{{out: click("c1", "r1", 5*time.Minute, 1), clock: 5 * time.Minute},
				{pred: event("e1", "r1", 0, true, "v1", 0.25), clock: 5 * time.Minute}, done},
			want: Counters{Predictions: 1, Scored: 1, Joined: 1, Outcomes: 1}, count: 1, positives: 1, logLoss: -math.Log(0.25),
		},
		{
			name: "a prediction that comes twice is scored once",
			rule: rule(),
			steps: []step{{pred: event("e1", "r1", 0, true, "v1", 0.25)}, {pred: event("e1", "r1", 0, true, "v1", 0.25)},
				{out: click("c1", "r1", time.Minute, 1), clock: time.Minute}, done},
			want: Counters{Predictions: 1, Scored: 1, Joined: 1, Outcomes: 1, DuplicatePredictions: 1}, count: 1, positives: 1, logLoss: -math.Log(0.25),
		},
		{
			name: "a prediction's copy after its window closed is a duplicate",
			rule: rule(),
			steps: []step{{pred: event("e1", "r1", 0, true, "v1", 0.25)},
				{pred: event("e2", "r2", 40*time.Minute, true, "v1", 0.5), clock: 40 * time.Minute},
				{pred: event("e1", "r1", 0, true, "v1", 0.25), clock: 41 * time.Minute}, done},
			want: Counters{Predictions: 2, Scored: 2, DuplicatePredictions: 1}, count: 2, logLoss: (-math.Log(0.75) - math.Log(0.5)) / 2,
		},
		{
			name: "a key outcome after the close of its key's window is late",
			rule: rule(),
			steps: []step{{pred: event("e1", "r1", 0, true, "v1", 0.25), key: "u1"},
				{pred: event("e2", "r2", 40*time.Minute, true, "v1", 0.5), clock: 40 * time.Minute},
				{out: &grovepb.Outcome{OutcomeId: "k1", Key: "u1", EventTime: timestamppb.New(t0.Add(10 * time.Minute)), Labels: map[string]float64{"click": 1}}, clock: 41 * time.Minute},
				done},
			want: Counters{Predictions: 2, Scored: 2, Late: 1}, count: 2, logLoss: (-math.Log(0.75) - math.Log(0.5)) / 2,
		},
		{
			name: "an outcome that comes twice counts once",
			rule: rule(),
			steps: []step{{pred: event("e1", "r1", 0, true, "v1", 0.25)}, {out: click("c1", "r1", time.Minute, 1), clock: time.Minute},
				{out: click("c1", "r1", time.Minute, 1), clock: 2 * time.Minute}, done},
			want: Counters{Predictions: 1, Scored: 1, Joined: 1, Outcomes: 1, DuplicateOutcomes: 1}, count: 1, positives: 1, logLoss: -math.Log(0.25),
		},
		{
			name:  "missing negative scores a prediction without outcome as 0",
			rule:  rule(),
			steps: []step{{pred: event("e1", "r1", 0, true, "v1", 0.25)}, done},
			want:  Counters{Predictions: 1, Scored: 1}, count: 1, logLoss: -math.Log(0.75),
		},
		{
			name:  "missing ignore drops a prediction without outcome",
			rule:  ignore,
			steps: []step{{pred: event("e1", "r1", 0, true, "v1", 0.25)}, {pred: event("e2", "r2", 0, true, "v1", 0.5)}, {out: click("c2", "r2", time.Minute, 0), clock: time.Minute}, done},
			want:  Counters{Predictions: 2, Scored: 1, Joined: 1, Dropped: 1, Outcomes: 1}, count: 1, logLoss: -math.Log(0.5),
		},
		{
			name: "an outcome for no prediction is unmatched",
			rule: rule(),
			steps: []step{{pred: event("e1", "r1", 0, true, "v1", 0.25)},
				{out: click("c9", "nobody", time.Minute, 1), clock: time.Minute}, done},
			want: Counters{Predictions: 1, Scored: 1, Outcomes: 1, Unmatched: 1}, count: 1, logLoss: -math.Log(0.75),
		},
		{
			name: "a prediction whose window closed before it came is not scored",
			rule: rule(),
			steps: []step{{pred: event("e2", "r2", 40*time.Minute, true, "v1", 0.5), clock: 40 * time.Minute},
				{pred: event("e1", "r1", 0, true, "v1", 0.25), clock: 40 * time.Minute}, done},
			want: Counters{Predictions: 1, Scored: 1, LatePredictions: 1}, count: 1, logLoss: -math.Log(0.5),
		},
		{
			name: "a key outcome goes to the newest open prediction with that key",
			rule: rule(),
			steps: []step{{pred: event("e1", "r1", 0, true, "v1", 0.25), key: "u1"},
				{pred: event("e2", "r2", 10*time.Minute, true, "v1", 0.75), key: "u1", clock: 10 * time.Minute},
				{out: &grovepb.Outcome{OutcomeId: "c1", Key: "u1", EventTime: timestamppb.New(t0.Add(15 * time.Minute)), Labels: map[string]float64{"click": 1}}, clock: 15 * time.Minute},
				done},
			want: Counters{Predictions: 2, Scored: 2, Joined: 1, Outcomes: 1}, count: 2, positives: 1, logLoss: -math.Log(0.75),
		},
		{
			name: "a key outcome that comes first waits for its prediction",
			rule: rule(),
			steps: []step{{out: &grovepb.Outcome{OutcomeId: "c1", Key: "u1", EventTime: timestamppb.New(t0.Add(5 * time.Minute)), Labels: map[string]float64{"click": 1}}, clock: 5 * time.Minute},
				{pred: event("e1", "r1", 0, true, "v1", 0.25), key: "u1", clock: 5 * time.Minute}, done},
			want: Counters{Predictions: 1, Scored: 1, Joined: 1, Outcomes: 1}, count: 1, positives: 1, logLoss: -math.Log(0.25),
		},
		{
			name: "a label other than the rule's is not an outcome of it",
			rule: rule(),
			steps: []step{{pred: event("e1", "r1", 0, true, "v1", 0.25)},
				{out: &grovepb.Outcome{OutcomeId: "c1", RequestId: "r1", EventTime: timestamppb.New(t0.Add(time.Minute)), Labels: map[string]float64{"conversion": 1}}, clock: time.Minute}, done},
			want: Counters{Predictions: 1, Scored: 1, Outcomes: 1, Unmatched: 1}, count: 1, logLoss: -math.Log(0.75),
		},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			j := run(t, c.rule, nil, c.steps...)
			if got := j.Counters(); got != c.want {
				t.Errorf("counters\n got %+v\nwant %+v", got, c.want)
			}
			b := binaryOf(t, j, v1)
			if b.Count() != c.count || b.Positives() != c.positives {
				t.Errorf("count %d positives %d, want %d %d", b.Count(), b.Positives(), c.count, c.positives)
			}
			if math.Abs(b.LogLoss()-c.logLoss) > 1e-12 {
				t.Errorf("log loss %v, want %v", b.LogLoss(), c.logLoss)
			}
		})
	}
}
