package join

import (
	"cmp"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/groveml/grove/conf/modelconfig"
	"github.com/groveml/grove/grovepb"
)

// adStream is a synthetic ad stream: impressions with a known click
// probability served by a calibrated champion (v1) and shadowed by a
// challenger 1.5× too high (v2), clicks drawn from that probability and
// delayed at random within the window or beyond it, some outcomes and
// events twice, some outcomes of no impression; and the records in a
// shuffled order of arrival, each late by less than the lateness.
type adStream struct {
	records []arrival
	// rows are the impressions, in the offline truth: each row's two
	// predictions and whether a click fell in its window.
	rows []impression
	// late, bogus and the duplicates are what the offline computation
	// expects the counters to be.
	late, bogus, dupOutcomes, dupEvents, outcomes int
}

type impression struct {
	champion, challenger float64
	clicked              bool
}

type arrival struct {
	at   time.Time
	pred *grovepb.PredictionEvent
	out  *grovepb.Outcome
}

// newAdStream makes a stream of requests requests, one impression in a
// window of window, arrivals up to jitter late.
func newAdStream(seed uint64, requests int, window, jitter time.Duration) *adStream {
	rng := rand.New(rand.NewPCG(seed, 1))
	s := &adStream{}
	add := func(at time.Time, p *grovepb.PredictionEvent, o *grovepb.Outcome) {
		s.records = append(s.records, arrival{at: at.Add(time.Duration(rng.Int64N(int64(jitter)))), pred: p, out: o})
	}
	for i := range requests {
		ts := t0.Add(time.Duration(i) * 200 * time.Millisecond)
		req := fmt.Sprintf("req-%d", i)
		nrows := 1 + rng.IntN(2)
		champ, chall := make([]float32, nrows), make([]float32, nrows)
		for r := range nrows {
			p := 0.01 + 0.29*rng.Float64()
			champ[r], chall[r] = float32(p), float32(min(1, 1.5*p))
			im := impression{champion: float64(champ[r]), challenger: float64(chall[r])}
			for c := 0; rng.Float64() < p && c < 2; c++ { // a click, sometimes a second
				delay := time.Duration(rng.Float64() * 1.3 * float64(window))
				o := &grovepb.Outcome{OutcomeId: fmt.Sprintf("%s/%d/%d", req, r, c), RequestId: req, Row: int64(r),
					EventTime: timestamppb.New(ts.Add(delay)), Labels: map[string]float64{"click": 1}}
				if delay > window {
					s.late++
				} else {
					im.clicked = true
					s.outcomes++
				}
				add(ts.Add(delay), nil, o)
				if rng.Float64() < 0.05 {
					add(ts.Add(delay), nil, o)
					s.dupOutcomes++
				}
			}
			s.rows = append(s.rows, im)
		}
		served := &grovepb.PredictionEvent{EventId: req + "/v1", RequestId: req, Timestamp: timestamppb.New(ts), Contract: contract,
			ReleaseVersion: "v1", ModelPath: "v1/", Served: true,
			Outputs: []*grovepb.Tensor{{Name: "output_0", Datatype: "FLOAT", Shape: []int64{int64(nrows)}, FloatData: champ}}}
		shadow := &grovepb.PredictionEvent{EventId: req + "/v2", RequestId: req, Timestamp: timestamppb.New(ts.Add(time.Millisecond)),
			Contract: contract, ReleaseVersion: "v2", ModelPath: "v2/",
			Outputs: []*grovepb.Tensor{{Name: "output_0", Datatype: "FLOAT", Shape: []int64{int64(nrows)}, FloatData: chall}}}
		for _, ev := range []*grovepb.PredictionEvent{served, shadow} {
			add(ev.Timestamp.AsTime(), ev, nil)
			if rng.Float64() < 0.05 {
				add(ev.Timestamp.AsTime(), ev, nil)
				s.dupEvents++
			}
		}
		if rng.Float64() < 0.01 {
			t := ts.Add(time.Second)
			add(t, nil, &grovepb.Outcome{OutcomeId: "bogus-" + req, RequestId: "no-" + req, EventTime: timestamppb.New(t), Labels: map[string]float64{"click": 1}})
			s.bogus++
		}
	}
	slices.SortStableFunc(s.records, func(a, b arrival) int { return a.at.Compare(b.at) })
	return s
}

// offline are the figures of one side computed directly from the truth.
type offline struct {
	count, positives          int
	mean, logLoss, brier, auc float64
}

func offlineOf(rows []impression, pred func(impression) float64) offline {
	var o offline
	type sp struct {
		p   float64
		pos bool
	}
	all := make([]sp, 0, len(rows))
	for _, r := range rows {
		p := pred(r)
		o.count++
		y := 0.0
		if r.clicked {
			o.positives++
			y = 1
		}
		o.mean += p
		o.brier += (p - y) * (p - y)
		q := min(max(p, 1e-15), 1-1e-15)
		if r.clicked {
			o.logLoss -= math.Log(q)
		} else {
			o.logLoss -= math.Log(1 - q)
		}
		all = append(all, sp{p, r.clicked})
	}
	n := float64(o.count)
	o.mean, o.brier, o.logLoss = o.mean/n, o.brier/n, o.logLoss/n
	// Exact AUC (Mann-Whitney, ties half).
	slices.SortFunc(all, func(a, b sp) int { return cmp.Compare(a.p, b.p) })
	var above, negBelow float64
	for i := 0; i < len(all); {
		k := i
		var pos, neg float64
		for ; k < len(all) && all[k].p == all[i].p; k++ {
			if all[k].pos {
				pos++
			} else {
				neg++
			}
		}
		above += pos*negBelow + pos*neg/2
		negBelow += neg
		i = k
	}
	o.auc = above / (float64(o.positives) * (n - float64(o.positives)))
	return o
}

// TestJoinEqualsOfflineComputation: over a synthetic ad stream in
// shuffled order, with duplicates, late and unmatched outcomes, the
// Joiner's counters and figures equal an offline computation over the
// same data (counts exactly, means within 1e-9, AUC within 0.001), over
// every store (memory, pebble, and memory spilling to pebble).
func TestJoinEqualsOfflineComputation(t *testing.T) {
	window, lateness := time.Minute, 5*time.Second
	r := modelconfig.Outcomes{Label: "click", Kind: modelconfig.OutcomeBinary, Window: window, Lateness: lateness}
	for _, seed := range []uint64{1, 2} {
		s := newAdStream(seed, 5000, window, 3*time.Second)
		p, err := OpenPebble(t.TempDir())
		if err != nil {
			t.Fatal(err)
		}
		spill, err := OpenPebble(t.TempDir())
		if err != nil {
			t.Fatal(err)
		}
		// A tiered store with room for a few hundred entries in memory:
		// most of the stream goes to disk.
		tiered := NewTieredStore(20_000, spill)
		for name, st := range map[string]Store{"mem": NewMemStore(), "pebble": p, "tiered": tiered} {
			t.Run(fmt.Sprintf("seed %d %s", seed, name), func(t *testing.T) {
				j, err := New(Options{Rules: []Rule{{Contract: contract, Outcomes: r}}, Store: st})
				if err != nil {
					t.Fatal(err)
				}
				for _, a := range s.records {
					if a.pred != nil {
						err = j.AddPrediction(a.at, Prediction{Event: a.pred})
					} else {
						err = j.AddOutcome(a.at, a.out)
					}
					if err != nil {
						t.Fatal(err)
					}
				}
				if err := j.Advance(s.records[len(s.records)-1].at.Add(time.Hour)); err != nil {
					t.Fatal(err)
				}
				checkAgainstOffline(t, j, s)
			})
		}
		if !tiered.spilled { // it fills memory first, then spills
			t.Error("the tiered store never spilled to disk")
		}
		p.Close()
		spill.Close()
	}
}

func checkAgainstOffline(t *testing.T, j *Joiner, s *adStream) {
	t.Helper()
	rows := len(s.rows)
	positives := 0
	for _, r := range s.rows {
		if r.clicked {
			positives++
		}
	}
	want := Counters{Predictions: uint64(2 * rows), Scored: uint64(2 * rows), Joined: uint64(2 * positives),
		Outcomes: uint64(s.outcomes + s.bogus), Late: uint64(s.late), Unmatched: uint64(s.bogus),
		DuplicateOutcomes: uint64(s.dupOutcomes), DuplicatePredictions: uint64(s.dupEvents)}
	if got := j.Counters(); got != want {
		t.Errorf("counters\n got %+v\nwant %+v", got, want)
	}
	for _, side := range []struct {
		key  SeriesKey
		pred func(impression) float64
	}{{v1, func(i impression) float64 { return i.champion }}, {v2, func(i impression) float64 { return i.challenger }}} {
		o := offlineOf(s.rows, side.pred)
		b := binaryOf(t, j, side.key)
		if b.Count() != uint64(o.count) || b.Positives() != uint64(o.positives) {
			t.Errorf("%v: count %d positives %d, want %d %d", side.key, b.Count(), b.Positives(), o.count, o.positives)
		}
		for _, f := range []struct {
			name      string
			got, want float64
			tol       float64
		}{{"mean prediction", b.MeanPrediction(), o.mean, 1e-9}, {"log loss", b.LogLoss(), o.logLoss, 1e-9},
			{"brier", b.Brier(), o.brier, 1e-9}, {"auc", b.AUC(), o.auc, 0.001}} {
			if math.Abs(f.got-f.want) > f.tol {
				t.Errorf("%v: %s %v, want %v", side.key, f.name, f.got, f.want)
			}
		}
	}
	// The pairs: log loss of the challenger minus the champion's.
	var delta float64
	for _, r := range s.rows {
		delta += rowLogLoss(r.challenger, r.clicked) - rowLogLoss(r.champion, r.clicked)
	}
	delta /= float64(rows)
	d := j.series[v2].paired.SinceValid().Delta(0.95)
	if d.N != uint64(rows) || math.Abs(d.LogLoss-delta) > 1e-9 {
		t.Errorf("pairs %d, logloss delta %v, want %d %v", d.N, d.LogLoss, rows, delta)
	}
	if !(d.Lower > 0) {
		t.Errorf("the 1.5× challenger's log loss is not worse with confidence: [%v, %v]", d.Lower, d.Upper)
	}
}

func rowLogLoss(p float64, pos bool) float64 {
	q := min(max(p, 1e-15), 1-1e-15)
	if pos {
		return -math.Log(q)
	}
	return -math.Log(1 - q)
}
