package it

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"math/rand/v2"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/groveml/grove/conf/modelconfig"
	"github.com/groveml/grove/grovepb"
	"github.com/groveml/grove/logging/outcome/evaluations"
	"github.com/groveml/grove/logging/outcome/join"
	"github.com/groveml/grove/routing/quality"
)

// The evaluator's results read back by grove serve: the figures of two
// partitions' joins, produced to the evaluations topic as the evaluator
// writes them (evaluations.Records), show in a contract's stats merged as
// one join of everything, in the grove_outcome_* metrics, and decide an
// outcome gate.

// evaluationsTopic is grove serve's default outcomes.evaluations_topic.
const evaluationsTopic = "grove.evaluations"

// adEvaluations joins a synthetic ad stream of contract with known click
// probabilities p: v1 serves a noisy but calibrated
// prediction (p times a factor from 0.4 to 1.6), and two challengers get
// shadow copies of every request: v2 predicts p itself (better, and
// calibrated), v3 1.5 p (too high). Clicks follow p, some after their
// one-minute window (late), some reported twice. Requests are split over
// two partitions; it returns the evaluations records of both partitions'
// joins as two writes, halfway through the stream and at its end (ten
// minutes of the evaluator's clock later: a second sample of each
// series' history once a server has read both), and the snapshot of one
// join fed the whole stream.
func adEvaluations(t *testing.T, contract string, seed uint64, requests int, start time.Time) ([2][]*kgo.Record, *join.Snapshot) {
	t.Helper()
	rule := modelconfig.Outcomes{Label: "click", Kind: modelconfig.OutcomeBinary, Window: time.Minute, Lateness: 5 * time.Second,
		Missing: modelconfig.OutcomeMissingNegative}
	newJoiner := func() *join.Joiner {
		j, err := join.New(join.Options{Store: join.NewMemStore(), Rules: []join.Rule{{Contract: contract, Outcomes: rule}}})
		if err != nil {
			t.Fatal(err)
		}
		return j
	}
	all, parts := newJoiner(), [2]*join.Joiner{newJoiner(), newJoiner()}
	type arrival struct {
		at   time.Time
		part int
		pred *grovepb.PredictionEvent
		out  *grovepb.Outcome
	}
	rng := rand.New(rand.NewPCG(seed, 3))
	var as []arrival
	for i := range requests {
		ts := start.Add(time.Duration(i) * 50 * time.Millisecond)
		req := fmt.Sprintf("req-%d", i)
		p := 0.05 + 0.45*rng.Float64()
		for _, s := range []struct {
			release string
			v       float64
			served  bool
		}{{"v1", min(0.99, p*(0.4+1.2*rng.Float64())), true}, {"v2", p, false}, {"v3", min(0.99, 1.5*p), false}} {
			at := ts
			if !s.served {
				at = ts.Add(time.Millisecond)
			}
			as = append(as, arrival{at: at, part: i % 2, pred: &grovepb.PredictionEvent{EventId: req + "/" + s.release, RequestId: req,
				Timestamp: timestamppb.New(at), Contract: contract, ReleaseVersion: s.release, ModelPath: s.release + "/", Served: s.served,
				Outputs: []*grovepb.Tensor{{Name: "output_0", Datatype: "FLOAT", Shape: []int64{1}, FloatData: []float32{float32(s.v)}}}}})
		}
		if rng.Float64() < p {
			delay := time.Duration(rng.Float64() * 1.1 * float64(time.Minute))
			o := &grovepb.Outcome{OutcomeId: req + "/click", RequestId: req, EventTime: timestamppb.New(ts.Add(delay)),
				Labels: map[string]float64{"click": 1}}
			as = append(as, arrival{at: ts.Add(delay), part: i % 2, out: o})
			if rng.Float64() < 0.05 {
				as = append(as, arrival{at: ts.Add(delay + time.Second), part: i % 2, out: o})
			}
		}
	}
	slices.SortStableFunc(as, func(a, b arrival) int { return a.at.Compare(b.at) })
	end := as[len(as)-1].at.Add(time.Hour)
	var writes [2][]*kgo.Record
	// snapshot adds to write w the records of each partition's join at
	// the clock time now, as written at.
	snapshot := func(w int, now, at time.Time) {
		for p, j := range parts {
			if err := j.Advance(now); err != nil {
				t.Fatal(err)
			}
			snap, err := j.Snapshot()
			if err != nil {
				t.Fatal(err)
			}
			rs, err := evaluations.Records(int32(p), snap, at)
			if err != nil {
				t.Fatal(err)
			}
			writes[w] = append(writes[w], rs...)
		}
	}
	for i, a := range as {
		if i == len(as)/2 {
			snapshot(0, a.at, end.Add(-10*time.Minute))
		}
		for _, j := range []*join.Joiner{all, parts[a.part]} {
			var err error
			if a.pred != nil {
				err = j.AddPrediction(a.at, join.Prediction{Event: a.pred})
			} else {
				err = j.AddOutcome(a.at, a.out)
			}
			if err != nil {
				t.Fatal(err)
			}
		}
	}
	snapshot(1, end, end)
	if err := all.Advance(end); err != nil {
		t.Fatal(err)
	}
	want, err := all.Snapshot()
	if err != nil {
		t.Fatal(err)
	}
	return writes, want
}

// produceEvaluations produces recs to the evaluations topic of broker.
func produceEvaluations(t *testing.T, broker string, recs []*kgo.Record) {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(broker), kgo.AllowAutoTopicCreation())
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	for _, r := range recs {
		r.Topic = evaluationsTopic
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := cl.ProduceSync(ctx, recs...).FirstErr(); err != nil {
		t.Fatalf("producing the evaluations: %v", err)
	}
}

// seriesStats returns series k's stats in snap.
func seriesStats(t *testing.T, snap *join.Snapshot, k join.SeriesKey) *quality.OutcomeStats {
	t.Helper()
	for _, s := range snap.Series {
		if s.Key == k {
			return s.Stats
		}
	}
	t.Fatalf("no series %v", k)
	return nil
}

// outcomesOf reads each servable's Grove.outcomes of contract's stats, by
// release.
func (g *grove) outcomesOf(contract string) map[string]*quality.OutcomeStats {
	g.t.Helper()
	code, raw := g.get("/" + contract + "/stats")
	var doc []struct {
		Grove struct {
			Release  string                `json:"release_version"`
			Outcomes *quality.OutcomeStats `json:"outcomes"`
		} `json:"Grove"`
	}
	if code != http.StatusOK || json.Unmarshal(raw, &doc) != nil {
		g.t.Fatalf("stats of %s: HTTP %d %s", contract, code, raw)
	}
	out := map[string]*quality.OutcomeStats{}
	for _, s := range doc {
		out[s.Grove.Release] = s.Grove.Outcomes
	}
	return out
}

// sameFigures reports how window got differs from want: counts exactly,
// means within 1e-9, AUC within 0.001; "" when it does not.
func sameFigures(got, want quality.OutcomeFigures) string {
	if got.BinaryFigures == nil || got.Count != want.Count || got.Positives != want.Positives {
		return fmt.Sprintf("count %d, want %d", got.Count, want.Count)
	}
	g, w := got.BinaryFigures, want.BinaryFigures
	var diffs []string
	for _, f := range []struct {
		name string
		a, b *float64
		tol  float64
	}{{"mean_prediction", g.MeanPrediction, w.MeanPrediction, 1e-9}, {"calibration", g.Calibration, w.Calibration, 1e-9},
		{"logloss", g.LogLoss, w.LogLoss, 1e-9}, {"brier", g.Brier, w.Brier, 1e-9}, {"ece", g.ECE, w.ECE, 1e-9}, {"auc", g.AUC, w.AUC, 0.001}} {
		if f.a == nil || f.b == nil || math.Abs(*f.a-*f.b) > f.tol {
			diffs = append(diffs, fmt.Sprintf("%s %v, want %v", f.name, f.a, f.b))
		}
	}
	return strings.Join(diffs, "; ")
}

// TestOutcomeGatePromotesTheCalibratedShadowFromTheEvaluationsTopic:
// grove serve reads two partitions' evaluations from the topic and shows
// them merged in the stats (equal to one join of the whole stream), in
// the grove_outcome_* metrics, and promotes by promote_when's outcome
// bounds the better, calibrated challenger v2, while v3, 1.5× too high,
// stays a shadow with its calibration as the reason.
//
// Budget: 5 s.
func TestOutcomeGatePromotesTheCalibratedShadowFromTheEvaluationsTopic(t *testing.T) {
	t.Parallel()
	writes, want := adEvaluations(t, "ads/pctr/1", 1, 6000, time.Now().Add(-2*time.Hour))
	v1 := seriesStats(t, want, join.SeriesKey{Contract: "ads/pctr/1", Release: "v1"})
	v2 := seriesStats(t, want, join.SeriesKey{Contract: "ads/pctr/1", Release: "v2", Shadow: true})
	v3 := seriesStats(t, want, join.SeriesKey{Contract: "ads/pctr/1", Release: "v3", Shadow: true})
	// The stream must make the case the gate decides: v2 better than the
	// champion and calibrated, v3 out of the calibration range.
	if c := *v2.SinceValid.Calibration; c < 0.9 || c > 1.1 || v2.VsChampion.CI95 == nil || v2.VsChampion.CI95[1] >= 0 {
		t.Fatalf("v2 calibration %v, vs_champion %+v: the stream does not make v2 promotable", c, v2.VsChampion)
	}
	if c := *v3.SinceValid.Calibration; c < 1.3 {
		t.Fatalf("v3 calibration %v: the stream does not make v3 miscalibrated", c)
	}

	emb := startBroker(t, "127.0.0.1:0")
	produceEvaluations(t, emb.Addr(), writes[0])
	b := newDirBucket(t)
	for _, m := range []string{"v1", "v2", "v3"} {
		b.Put(t, m+"/model.faulty", []byte(`{"by_position": true}`))
	}
	gate := `"validity": [{"promote_when": {"min_outcomes": 4000, "max_logloss_delta": 0, "calibration_between": [0.9, 1.1]}}]`
	b.Put(t, "model_config.json", []byte(`{"model_metadata": [{"model_path": "v1/"}, {"model_path": "v2/"}, {"model_path": "v3/"}],
 "contracts": [{"organization": "ads", "project": "pctr", "contract_number": 1, "router": "latest",
   "outcomes": {"label": "click", "window": "1m", "lateness": "5s"},
   "servables": [
     {"release_version": "v1", "model_path": "v1/", "logging": {"log_level": "FULL"}},
     {"release_version": "v2", "model_path": "v2/", "shadow": {}, "logging": {"log_level": "FULL"}, `+gate+`},
     {"release_version": "v3", "model_path": "v3/", "shadow": {}, "logging": {"log_level": "FULL"}, `+gate+`}]}]}`))
	g := startGrove(t, b.URL(), nil, writeServerConfig(t, kafkaConfig(emb.Addr(), "proto", ""))...)
	const contract = "ads/pctr/1"

	// The first write: half the stream, too few outcomes for the gate,
	// read before the second.
	g.waitFor("the first write in the stats", 10*time.Second, func() bool {
		o := g.outcomesOf(contract)["v1"]
		return o != nil && o.SinceValid.Count > 0
	})
	if gs := g.gates(contract)["v2"]; gs.Valid {
		t.Fatalf("v2 promoted on half the stream: %+v", gs.Gate)
	}
	produceEvaluations(t, emb.Addr(), writes[1])
	g.waitFor("v2 promoted by its outcomes", 15*time.Second, func() bool {
		gs := g.gates(contract)["v2"]
		return gs.Valid && gs.Gate != nil && gs.Gate.State == "promoted"
	})
	gs := g.gates(contract)
	if v := gs["v3"]; v.Valid || v.Gate == nil || v.Gate.State != "waiting" ||
		!strings.Contains(v.Gate.Detail, fmt.Sprintf("calibration %.4g over %d scored outcomes outside [0.9, 1.1]", *v3.SinceValid.Calibration, v3.SinceValid.Count)) {
		t.Errorf("v3, 1.5× too high: %+v %+v; want it waiting on its calibration", v, v.Gate)
	}

	// The stats: the champion's served figures, v3's shadow figures with
	// its paired comparison, each equal to one join of everything; v2,
	// valid now, is judged on what it serves, of which there are none yet.
	out := g.outcomesOf(contract)
	if out["v1"] == nil || out["v3"] == nil {
		t.Fatalf("stats' outcomes %+v, want v1's and v3's", out)
	}
	for _, c := range []struct {
		name      string
		got, want *quality.OutcomeStats
	}{{"v1", out["v1"], v1}, {"v3", out["v3"], v3}} {
		if d := sameFigures(c.got.SinceValid, c.want.SinceValid); d != "" {
			t.Errorf("%s since_valid: %s", c.name, d)
		}
		if d := sameFigures(c.got.Last1h, c.want.Last1h); d != "" {
			t.Errorf("%s last_1h: %s", c.name, d)
		}
		if h := c.got.History; len(h) != 2 || h[1].Count != c.want.SinceValid.Count || h[0].Count >= h[1].Count || h[1].T.Sub(h[0].T) != 10*time.Minute {
			t.Errorf("%s history %+v, want the samples of the two writes, ten minutes apart", c.name, h)
		}
	}
	if out["v1"].VsChampion != nil {
		t.Errorf("the champion is compared with itself: %+v", out["v1"].VsChampion)
	}
	if vs, w := out["v3"].VsChampion, v3.VsChampion; vs == nil || vs.Method != "paired" || vs.N != w.N ||
		math.Abs(*vs.LogLossDelta-*w.LogLossDelta) > 1e-9 || math.Abs(*vs.AUCDelta-*w.AUCDelta) > 0.001 {
		t.Errorf("v3 vs_champion %+v, want %+v", vs, w)
	}
	if out["v2"] != nil {
		t.Errorf("v2, promoted, shows outcomes %+v of what it served, which is nothing", out["v2"])
	}

	// The metrics: the partitions' counters added up, and each series'
	// since_valid figures.
	c := want.Counters
	for _, m := range []struct {
		name, labels string
		want         float64
	}{
		{"grove_outcome_predictions_total", "", float64(c.Predictions)},
		{"grove_outcome_scored_total", "", float64(c.Scored)},
		{"grove_outcome_joined_total", "", float64(c.Joined)},
		{"grove_outcome_outcomes_total", "", float64(c.Outcomes)},
		{"grove_outcome_late_total", "", float64(c.Late)},
		{"grove_outcome_unmatched_total", "", float64(c.Unmatched)},
		{"grove_outcome_duplicates_total", `{kind="outcome"}`, float64(c.DuplicateOutcomes)},
		{"grove_outcome_scored", `{contract="ads/pctr/1",release="v3",shadow="true"}`, float64(v3.SinceValid.Count)},
		{"grove_outcome_calibration", `{contract="ads/pctr/1",release="v3",shadow="true"}`, *v3.SinceValid.Calibration},
		{"grove_outcome_logloss", `{contract="ads/pctr/1",release="v1",shadow="false"}`, *v1.SinceValid.LogLoss},
	} {
		if got := g.metricValue(m.name, m.labels); math.Abs(got-m.want) > 1e-9*max(1, math.Abs(m.want)) {
			t.Errorf("%s%s = %v, want %v", m.name, m.labels, got, m.want)
		}
	}
	if c.Late == 0 || c.DuplicateOutcomes == 0 || c.Scored == 0 {
		t.Errorf("counters %+v: the stream should have scored, late and duplicate outcomes", c)
	}
}
