package join

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"math"
	"math/rand/v2"
	"testing"
	"time"

	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/groveml/grove/conf/modelconfig"
	"github.com/groveml/grove/grovepb"
)

// TestIdlePartitionAdvancesWithTheClock: with no input, the watermark
// stays until the partition has been idle for the lateness, then moves
// with the clock, and closes the last window.
func TestIdlePartitionAdvancesWithTheClock(t *testing.T) {
	j := run(t, rule(), nil, step{pred: event("e1", "r1", 0, true, "v1", 0.25)})
	if err := j.Advance(t0.Add(30*time.Minute + 59*time.Second)); err != nil {
		t.Fatal(err)
	}
	// Idle 30m59s: watermark = 0 - 1m + (30m59s - 1m) = 28m59s.
	if got, want := j.Watermark(), t0.Add(28*time.Minute+59*time.Second); !got.Equal(want) {
		t.Fatalf("watermark %v, want %v", got, want)
	}
	if c := j.Counters(); c.Scored != 0 {
		t.Fatalf("scored %d before the window's end", c.Scored)
	}
	if err := j.Advance(t0.Add(32 * time.Minute)); err != nil {
		t.Fatal(err)
	}
	if c := j.Counters(); c.Scored != 1 {
		t.Fatalf("scored %d once the idle watermark passed the window's end, want 1", c.Scored)
	}
	if err := j.Advance(t0.Add(time.Minute)); err != nil { // a clock going back
		t.Fatal(err)
	}
	if got := j.Watermark(); got.Before(t0.Add(30 * time.Minute)) {
		t.Fatalf("watermark went back to %v", got)
	}
}

// TestBusyPartitionDoesNotAdvanceByTheClock: a partition that keeps
// receiving old events keeps its watermark at their time less the
// lateness, whatever the clock.
func TestBusyPartitionDoesNotAdvanceByTheClock(t *testing.T) {
	j := run(t, rule(), nil, step{pred: event("e1", "r1", 0, true, "v1", 0.25), clock: 10 * time.Hour},
		step{pred: event("e2", "r2", time.Minute, true, "v1", 0.25), clock: 10*time.Hour + 30*time.Second})
	if got, want := j.Watermark(), t0; !got.Equal(want) {
		t.Fatalf("watermark %v, want %v", got, want)
	}
}

// TestFutureEventTimeDoesNotCloseWindows: an outcome dated far ahead of
// the clock moves the watermark only up to the clock.
func TestFutureEventTimeDoesNotCloseWindows(t *testing.T) {
	j := run(t, rule(), nil, step{pred: event("e1", "r1", 0, true, "v1", 0.25)},
		step{out: click("c1", "other", 100*time.Hour, 1), clock: 5 * time.Minute},
		step{out: click("c2", "r1", 10*time.Minute, 1), clock: 10 * time.Minute},
		step{clock: 200 * time.Hour})
	if c := j.Counters(); c.Joined != 1 || c.Late != 0 {
		t.Fatalf("an outcome from the future closed the window: %+v", c)
	}
}

// TestModelPathNarrowsTheMatch: an outcome narrowed to the shadow's model
// path scores the shadow positive and the champion negative.
func TestModelPathNarrowsTheMatch(t *testing.T) {
	o := click("c1", "r1", time.Minute, 1)
	o.ModelPath = "v2/"
	j := run(t, rule(), nil, step{pred: event("e1", "r1", 0, true, "v1", 0.25)},
		step{pred: event("e2", "r1", time.Second, false, "v2", 0.5)}, step{out: o, clock: time.Minute},
		step{clock: 10 * time.Hour})
	if b := binaryOf(t, j, v1); b.Count() != 1 || b.Positives() != 0 {
		t.Errorf("champion: count %d positives %d, want 1 0", b.Count(), b.Positives())
	}
	if b := binaryOf(t, j, v2); b.Count() != 1 || b.Positives() != 1 {
		t.Errorf("shadow: count %d positives %d, want 1 1", b.Count(), b.Positives())
	}
	if j.series[v2].paired != nil {
		t.Error("a shadow scored on another outcome than the champion's was paired with it")
	}
}

// TestShadowIsPairedWithTheChampion: served and shadow predictions of the
// same rows are both scored on the rows' outcomes, and each shadow row is
// paired with the champion's.
func TestShadowIsPairedWithTheChampion(t *testing.T) {
	j := run(t, rule(), nil,
		step{pred: event("e1", "r1", 0, true, "v1", 0.25, 0.5)},
		step{pred: event("e2", "r1", time.Second, false, "v2", 0.5, 0.25)},
		step{out: &grovepb.Outcome{OutcomeId: "c1", RequestId: "r1", Row: 1, EventTime: timestamppb.New(t0.Add(time.Minute)), Labels: map[string]float64{"click": 1}}, clock: time.Minute},
		step{clock: 10 * time.Hour})
	if b := binaryOf(t, j, v2); b.Count() != 2 || b.Positives() != 1 {
		t.Fatalf("shadow: count %d positives %d, want 2 1", b.Count(), b.Positives())
	}
	p := j.series[v2].paired.SinceValid()
	if p.Count() != 2 {
		t.Fatalf("pairs %d, want 2", p.Count())
	}
	// Row 0 negative: champion 0.25, shadow 0.5; row 1 positive: champion
	// 0.5, shadow 0.25.
	want := ((-math.Log(0.5) + math.Log(0.75)) + (-math.Log(0.25) + math.Log(0.5))) / 2
	if d := p.Delta(0.95); math.Abs(d.LogLoss-want) > 1e-12 || !d.Paired {
		t.Fatalf("logloss delta %v (paired %v), want %v", d.LogLoss, d.Paired, want)
	}
	snap, err := j.Snapshot()
	if err != nil {
		t.Fatal(err)
	}
	var found bool
	for _, s := range snap.Series {
		if s.Key == v2 {
			found = s.Stats.VsChampion != nil && s.Stats.VsChampion.N == 2 && len(s.Paired) > 0
		}
	}
	if !found {
		t.Fatalf("the snapshot has no vs_champion of 2 pairs for the shadow: %+v", snap.Series)
	}
	if j.series[v1].paired != nil {
		t.Error("the champion was paired with itself")
	}
}

// TestAShadowThatRanLateSharesItsRequestsWindow: a shadow copy that
// waited to run is logged with its request's request_timestamp, the
// served prediction's. One that comes while the served window is open is
// scored on it; one that comes after the window closed (it waited longer
// than the window and the lateness) is a late prediction, counted and
// not scored, never scored on a window of its own that starts after the
// click.
func TestAShadowThatRanLateSharesItsRequestsWindow(t *testing.T) {
	at := func(ev *grovepb.PredictionEvent, received time.Duration) *grovepb.PredictionEvent {
		ev.RequestTimestamp = timestamppb.New(t0.Add(received))
		return ev
	}
	j := run(t, rule(), nil,
		// r1 at 0 and r2 at 20m, both served at once, both clicked at +1m.
		step{pred: at(event("e1", "r1", 0, true, "v1", 0.5), 0)},
		step{out: click("c1", "r1", time.Minute, 1), clock: time.Minute},
		step{pred: at(event("e2", "r2", 20*time.Minute, true, "v1", 0.5), 20*time.Minute), clock: 20 * time.Minute},
		step{out: click("c2", "r2", 21*time.Minute, 1), clock: 21 * time.Minute},
		// r2's shadow ran 25 minutes late, within its window: scored with
		// the click.
		step{pred: at(event("e3", "r2", 45*time.Minute, false, "v2", 0.25), 20*time.Minute), clock: 45 * time.Minute},
		// r1's shadow ran 40 minutes late, after its window (0 to 30m) and
		// the minute of lateness: late.
		step{pred: at(event("e4", "r1", 40*time.Minute, false, "v2", 0.25), 0), clock: 46 * time.Minute},
		step{clock: 10 * time.Hour})
	if b := binaryOf(t, j, v2); b.Count() != 1 || b.Positives() != 1 {
		t.Fatalf("shadow: count %d positives %d, want the copy that ran within its window, scored on its click: 1 1", b.Count(), b.Positives())
	}
	if c := j.counters; c.LatePredictions != 1 || c.Scored != 3 || c.Late != 0 {
		t.Fatalf("counters %+v: want 1 late prediction, 3 scored, no late outcome", c)
	}
	if p := j.series[v2].paired.SinceValid(); p.Count() != 1 {
		t.Fatalf("pairs %d, want the shadow that ran within its window paired with its champion", p.Count())
	}
}

// TestAPredictionsWindowStartsAtItsRequestAndItsFiguresAtItsTimestamp: a
// served prediction whose request came 5 ms before its release's
// valid_since (the first request's routing stamps it) and which ran 5 ms
// after counts in since_valid, and a click between its request and its
// timestamp falls in its window.
func TestAPredictionsWindowStartsAtItsRequestAndItsFiguresAtItsTimestamp(t *testing.T) {
	valid := t0.Add(10 * time.Minute)
	j, err := New(Options{Rules: []Rule{{Contract: contract, Outcomes: rule()}}, Store: NewMemStore(),
		ValidSince: func(c, r string) (time.Time, bool) { return valid, c == contract && r == "v1" }})
	if err != nil {
		t.Fatal(err)
	}
	ev := event("e1", "r1", 10*time.Minute+5*time.Millisecond, true, "v1", 0.25)
	ev.RequestTimestamp = timestamppb.New(valid.Add(-5 * time.Millisecond))
	feed(t, j, step{pred: ev, clock: 10 * time.Minute},
		step{out: click("c1", "r1", 10*time.Minute-2*time.Millisecond, 1), clock: 10 * time.Minute},
		step{clock: 2 * time.Hour})
	if b := binaryOf(t, j, v1); b.Count() != 1 || b.Positives() != 1 {
		t.Fatalf("since_valid: count %d positives %d; want the prediction counted, with the click after its request: 1 1", b.Count(), b.Positives())
	}
}

// TestAnInvalidRequestTimestampIsCountedInvalid: an event whose
// request_timestamp is out of range is invalid, and moves no watermark.
func TestAnInvalidRequestTimestampIsCountedInvalid(t *testing.T) {
	ev := event("e1", "r1", 0, true, "v1", 0.25)
	ev.RequestTimestamp = &timestamppb.Timestamp{Seconds: 1, Nanos: 2e9}
	j := run(t, rule(), nil, step{pred: ev})
	if c := j.counters; c.Invalid != 1 || c.Predictions != 0 || !j.Watermark().IsZero() {
		t.Fatalf("counters %+v, watermark %v: want one invalid event and no watermark", c, j.Watermark())
	}
}

// TestNumericSumsTheWindowsValues: a numeric rule scores the sum of the
// label's values in the window, each outcome once, and missing negative
// scores 0.
func TestNumericSumsTheWindowsValues(t *testing.T) {
	r := rule()
	r.Kind, r.Label = modelconfig.OutcomeNumeric, "value"
	value := func(id, req string, at time.Duration, v float64) *grovepb.Outcome {
		return &grovepb.Outcome{OutcomeId: id, RequestId: req, EventTime: timestamppb.New(t0.Add(at)), Labels: map[string]float64{"value": v}}
	}
	j := run(t, r, nil, step{pred: event("e1", "r1", 0, true, "v1", 10)}, step{pred: event("e2", "r2", 0, true, "v1", 4)},
		step{out: value("a", "r1", time.Minute, 5)}, step{out: value("b", "r1", 2*time.Minute, 7)},
		step{out: value("b", "r1", 2*time.Minute, 7)}, step{clock: 10 * time.Hour})
	n := j.series[v1].numeric.SinceValid()
	// r1: 10 vs 12 (error -2); r2: 4 vs 0 (error 4).
	if n.Count() != 2 || n.Bias() != 1 || n.MAE() != 3 {
		t.Fatalf("count %d bias %v mae %v, want 2 1 3", n.Count(), n.Bias(), n.MAE())
	}
}

// TestOutputsAreReadByNameAndRow: the rule's output by name, a row of two
// values scores the second, and rows of more are invalid.
func TestOutputsAreReadByNameAndRow(t *testing.T) {
	ev := &grovepb.PredictionEvent{Outputs: []*grovepb.Tensor{
		{Name: "a", Datatype: "DOUBLE", Shape: []int64{2}, DoubleData: []float64{1, 2}},
		{Name: "b", Datatype: "FLOAT", Shape: []int64{2, 2}, FloatData: []float32{0.75, 0.25, 0.5, 0.5}},
		{Name: "c", Datatype: "INT64", Shape: []int64{1, 3}, Int64Data: []int64{1, 2, 3}},
		{Name: "d", Datatype: "FLOAT", Shape: []int64{3}, FloatData: []float32{1}},
		{Name: "raw32", Datatype: "FLOAT", Shape: []int64{2}, RawData: binary.LittleEndian.AppendUint32(
			binary.LittleEndian.AppendUint32(nil, math.Float32bits(0.125)), math.Float32bits(0.625))},
		{Name: "raw64", Datatype: "DOUBLE", Shape: []int64{1, 2}, RawData: binary.LittleEndian.AppendUint64(
			binary.LittleEndian.AppendUint64(nil, math.Float64bits(0.5)), math.Float64bits(0.75))},
		{Name: "bool", Datatype: "BOOL", Shape: []int64{3}, RawData: []byte{1, 0, 1}},
		{Name: "cut", Datatype: "DOUBLE", Shape: []int64{1}, RawData: []byte{1, 2, 3}},
		{Name: "int8", Datatype: "INT8", Shape: []int64{2}, Int32Data: []int32{-1, 3}},
		{Name: "bytes", Datatype: "BYTES", Shape: []int64{1}, BytesData: [][]byte{[]byte("x")}},
	}}
	cases := []struct {
		output string
		want   []float64
		ok     bool
	}{{"", []float64{1, 2}, true}, {"b", []float64{0.25, 0.5}, true}, {"c", nil, false}, {"d", nil, false}, {"e", nil, false},
		{"raw32", []float64{0.125, 0.625}, true}, {"raw64", []float64{0.75}, true}, {"bool", []float64{1, 0, 1}, true},
		{"cut", nil, false}, {"int8", []float64{-1, 3}, true}, {"bytes", nil, false}}
	for _, c := range cases {
		got, ok := outputValues(nil, ev, c.output)
		if ok != c.ok || len(got) != len(c.want) {
			t.Errorf("output %q: %v %v, want %v %v", c.output, got, ok, c.want, c.ok)
			continue
		}
		for i := range got {
			if got[i] != c.want[i] {
				t.Errorf("output %q: %v, want %v", c.output, got, c.want)
			}
		}
	}
}

// TestNewRefusesBadRules: a Joiner needs a store and valid rules.
func TestNewRefusesBadRules(t *testing.T) {
	bad := []Options{
		{Rules: []Rule{{Contract: contract, Outcomes: rule()}}},
		{Store: NewMemStore()},
		{Store: NewMemStore(), Rules: []Rule{{Outcomes: rule()}}},
		{Store: NewMemStore(), Rules: []Rule{{Contract: contract, Outcomes: modelconfig.Outcomes{Label: "click"}}}},
	}
	for i, o := range bad {
		if _, err := New(o); err == nil {
			t.Errorf("options %d: no error", i)
		}
	}
	j, _ := New(Options{Store: NewMemStore(), Rules: []Rule{{Contract: contract, Outcomes: rule()}}})
	if err := j.AddOutcome(t0, &grovepb.Outcome{OutcomeId: "x", RequestId: "r"}); err == nil {
		t.Error("an outcome without event_time was taken")
	}
}

// script is a run of every rule, for the checkpoint and store tests.
func script() []step {
	return []step{
		{pred: event("e1", "r1", 0, true, "v1", 0.25), key: "u1"},
		{pred: event("e2", "r1", time.Second, false, "v2", 0.5), key: "u1"},
		{out: click("c1", "r1", time.Minute, 1), clock: time.Minute},
		{out: click("c1", "r1", time.Minute, 1), clock: time.Minute},
		{pred: event("e3", "r3", 2*time.Minute, true, "v1", 0.75), clock: 2 * time.Minute},
		{out: click("c9", "none", 3*time.Minute, 1), clock: 3 * time.Minute},
		{pred: event("e4", "r4", 40*time.Minute, true, "v1", 0.5), clock: 40 * time.Minute},
		{out: click("c3", "r3", 5*time.Minute, 1), clock: 41 * time.Minute},
		{pred: event("e5", "r5", 50*time.Minute, true, "v1", 0.125), key: "u1", clock: 50 * time.Minute},
		{out: &grovepb.Outcome{OutcomeId: "k1", Key: "u1", EventTime: timestamppb.New(t0.Add(55 * time.Minute)), Labels: map[string]float64{"click": 1}}, clock: 55 * time.Minute},
		{clock: 3 * time.Hour},
	}
}

// snapshotBytes is j's snapshot as comparable bytes (counters, watermark
// and the series' binary forms).
func snapshotBytes(t *testing.T, j *Joiner) []byte {
	t.Helper()
	s, err := j.Snapshot()
	if err != nil {
		t.Fatal(err)
	}
	var b bytes.Buffer
	c, err := j.Checkpoint()
	if err != nil {
		t.Fatal(err)
	}
	b.Write(c)
	for _, x := range s.Series {
		b.WriteString(x.Key.Contract + x.Key.Release)
		b.Write(x.Binary)
		b.Write(x.Numeric)
		b.Write(x.Paired)
	}
	return b.Bytes()
}

// TestSnapshotFormsAndCheckpointOfAreSnapshotAndCheckpoint: the
// evaluator's cheaper calls give what Snapshot and Checkpoint do, less
// the series' figures: the same binary forms, counters and checkpoint.
func TestSnapshotFormsAndCheckpointOfAreSnapshotAndCheckpoint(t *testing.T) {
	steps := script()
	for cut := range steps {
		j := run(t, rule(), nil, steps[:cut+1]...)
		full, err := j.Snapshot()
		if err != nil {
			t.Fatal(err)
		}
		forms, err := j.SnapshotForms()
		if err != nil {
			t.Fatal(err)
		}
		cp, err := j.Checkpoint()
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(j.CheckpointOf(forms), cp) || !bytes.Equal(j.CheckpointOf(full), cp) {
			t.Errorf("step %d: CheckpointOf differs from Checkpoint", cut)
		}
		if forms.Counters != full.Counters || !forms.Watermark.Equal(full.Watermark) || len(forms.Series) != len(full.Series) {
			t.Fatalf("step %d: SnapshotForms %+v, Snapshot %+v", cut, forms, full)
		}
		for i, f := range forms.Series {
			w := full.Series[i]
			if f.Key != w.Key || f.Stats != nil || w.Stats == nil || !bytes.Equal(f.Binary, w.Binary) ||
				!bytes.Equal(f.Numeric, w.Numeric) || !bytes.Equal(f.Paired, w.Paired) {
				t.Errorf("step %d series %v: forms differ, or figures computed", cut, f.Key)
			}
		}
	}
}

// TestCheckpointRestoreContinues: a Joiner restored from a checkpoint
// over the same store, at any step, ends where one uninterrupted Joiner
// does.
func TestCheckpointRestoreContinues(t *testing.T) {
	steps := script()
	want := snapshotBytes(t, run(t, rule(), nil, steps...))
	if c := run(t, rule(), nil, steps...).Counters(); c.Scored != 5 || c.Late != 1 || c.Unmatched != 1 || c.DuplicateOutcomes != 1 || c.Joined != 3 {
		t.Fatalf("the script does not exercise the rules: %+v", c)
	}
	for cut := range steps {
		s := NewMemStore()
		j := run(t, rule(), s, steps[:cut]...)
		cp, err := j.Checkpoint()
		if err != nil {
			t.Fatal(err)
		}
		k, err := New(Options{Rules: []Rule{{Contract: contract, Outcomes: rule()}}, Store: s})
		if err != nil {
			t.Fatal(err)
		}
		if err := k.Restore(cp); err != nil {
			t.Fatalf("cut %d: %v", cut, err)
		}
		feed(t, k, steps[cut:]...)
		if got := snapshotBytes(t, k); !bytes.Equal(got, want) {
			t.Errorf("cut %d: the restored joiner ends elsewhere: %+v, want %+v", cut, k.Counters(), j.Counters())
		}
	}
	j := run(t, rule(), nil)
	if err := j.Restore([]byte{9}); err == nil {
		t.Error("a corrupt checkpoint was restored")
	}
	cp, _ := run(t, rule(), nil, steps...).Checkpoint()
	if err := j.Restore(cp[:len(cp)-1]); err == nil {
		t.Error("a truncated checkpoint was restored")
	}
}

// TestPebbleStoreJoinsAsMemStore: over pebble the script ends with the
// same state as in memory, and it survives closing and reopening.
func TestPebbleStoreJoinsAsMemStore(t *testing.T) {
	steps := script()
	want := snapshotBytes(t, run(t, rule(), nil, steps...))
	dir := t.TempDir()
	p, err := OpenPebble(dir)
	if err != nil {
		t.Fatal(err)
	}
	cut := 5
	j := run(t, rule(), p, steps[:cut]...)
	cp, err := j.Checkpoint()
	if err != nil {
		t.Fatal(err)
	}
	if err := p.Sync(); err != nil {
		t.Fatal(err)
	}
	if err := p.Close(); err != nil {
		t.Fatal(err)
	}
	if p, err = OpenPebble(dir); err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	k, err := New(Options{Rules: []Rule{{Contract: contract, Outcomes: rule()}}, Store: p})
	if err != nil {
		t.Fatal(err)
	}
	if err := k.Restore(cp); err != nil {
		t.Fatal(err)
	}
	feed(t, k, steps[cut:]...)
	if got := snapshotBytes(t, k); !bytes.Equal(got, want) {
		t.Errorf("over pebble: %+v", k.Counters())
	}
	if keys, err := p.Due(math.MaxInt64, 10); err != nil || len(keys) != 0 {
		t.Errorf("entries left after every window closed: %q %v", keys, err)
	}
}

// TestStoresOrderDueKeys: every store returns the keys due, earliest
// first then by key, up to the limit (a tiered store merging its tiers),
// and forgets deleted keys and old due times.
func TestStoresOrderDueKeys(t *testing.T) {
	p, err := OpenPebble(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	// Memory for two small entries: b and a in memory, c, d and e on a
	// disk tier (itself in memory, so that its due times are exact).
	tiered := newTiered(4, NewMemStore())
	for name, s := range map[string]Store{"mem": NewMemStore(), "pebble": p, "tiered": tiered} {
		t.Run(name, func(t *testing.T) {
			must := func(err error) {
				t.Helper()
				if err != nil {
					t.Fatal(err)
				}
			}
			must(s.Put([]byte("b"), 5, []byte("1")))
			must(s.Put([]byte("a"), 5, []byte("2")))
			must(s.Put([]byte("c"), -3, []byte("3")))
			must(s.Put([]byte("d"), 9, []byte("4")))
			must(s.Put([]byte("d"), 1, []byte("5"))) // moved earlier
			must(s.Put([]byte("e"), 2, nil))
			must(s.Delete([]byte("e")))
			must(s.Delete([]byte("zz")))
			keys, err := s.Due(5, 10)
			must(err)
			if got := string(bytes.Join(keys, []byte(","))); got != "c,d,a,b" {
				t.Errorf("due at 5: %s, want c,d,a,b", got)
			}
			if keys, _ := s.Due(5, 2); len(keys) != 2 {
				t.Errorf("limit 2: %d keys", len(keys))
			}
			if v, ok, _ := s.Get([]byte("d")); !ok || string(v) != "5" {
				t.Errorf("d = %q %v, want 5", v, ok)
			}
			if _, ok, _ := s.Get([]byte("e")); ok {
				t.Error("a deleted key is there")
			}
			// After every key was handled, one put earlier than the last
			// scan is still found.
			keys, err = s.Due(100, 10)
			must(err)
			for _, k := range keys {
				must(s.Delete(k))
			}
			if keys, _ := s.Due(100, 10); len(keys) != 0 {
				t.Errorf("keys left: %q", keys)
			}
			must(s.Put([]byte("x"), 3, nil))
			if keys, _ := s.Due(100, 10); len(keys) != 1 || string(keys[0]) != "x" {
				t.Errorf("a key put due before the last scan: %q, want x", keys)
			}
		})
	}
}

// TestSinceValidStartsAtTheReleasesValidSince: with the release's
// valid_since known, its windows count the predictions served from it on
// (quality.OutcomeWindows leaves earlier ones out of both); another
// release's count every one.
func TestSinceValidStartsAtTheReleasesValidSince(t *testing.T) {
	j, err := New(Options{Rules: []Rule{{Contract: contract, Outcomes: rule()}}, Store: NewMemStore(),
		ValidSince: func(c, r string) (time.Time, bool) { return t0.Add(10 * time.Minute), c == contract && r == "v1" }})
	if err != nil {
		t.Fatal(err)
	}
	feed(t, j, step{pred: event("e1", "r1", 0, true, "v1", 0.25)},
		step{pred: event("e2", "r2", 20*time.Minute, true, "v1", 0.25), clock: 20 * time.Minute},
		step{pred: event("e3", "r1", time.Second, false, "v2", 0.25), clock: 20 * time.Minute},
		step{clock: 2 * time.Hour})
	snap, err := j.Snapshot()
	if err != nil {
		t.Fatal(err)
	}
	got := map[SeriesKey][2]uint64{}
	for _, s := range snap.Series {
		got[s.Key] = [2]uint64{s.Stats.SinceValid.Count, s.Stats.Last1h.Count}
	}
	if got[v1] != [2]uint64{1, 1} || got[v2] != [2]uint64{1, 1} {
		t.Fatalf("since_valid, last_1h counts %v, want v1 [1 1], v2 [1 1]", got)
	}
	if want := time.Duration(0); snap.Lag < want || snap.Watermark.IsZero() {
		t.Fatalf("lag %v watermark %v", snap.Lag, snap.Watermark)
	}
}

// A release no longer valid (its valid_since cleared) keeps counting its
// since_valid window from its last valid_since, so that a partition that
// scores it after the change counts from the same start as one that has
// not yet; valid again, it starts over at its new valid_since.
func TestANoLongerValidReleaseKeepsItsLastValidSince(t *testing.T) {
	since, valid := t0.Add(10*time.Minute), true
	j, err := New(Options{Rules: []Rule{{Contract: contract, Outcomes: rule()}}, Store: NewMemStore(),
		ValidSince: func(c, r string) (time.Time, bool) { return since, valid && c == contract && r == "v1" }})
	if err != nil {
		t.Fatal(err)
	}
	count := func() uint64 {
		t.Helper()
		snap, err := j.Snapshot()
		if err != nil {
			t.Fatal(err)
		}
		for _, s := range snap.Series {
			if s.Key == v1 {
				return s.Stats.SinceValid.Count
			}
		}
		t.Fatal("no series of v1")
		return 0
	}
	feed(t, j, step{pred: event("e1", "r1", 20*time.Minute, true, "v1", 0.25), clock: 20 * time.Minute}, step{clock: time.Hour})
	valid = false
	feed(t, j, step{pred: event("e2", "r2", 70*time.Minute, true, "v1", 0.25), clock: 70 * time.Minute}, step{clock: 2 * time.Hour})
	if n := count(); n != 2 {
		t.Fatalf("v1 since_valid count %d once no longer valid, want 2 (counted from its last valid_since)", n)
	}
	since, valid = t0.Add(3*time.Hour), true
	feed(t, j, step{pred: event("e3", "r3", 190*time.Minute, true, "v1", 0.25), clock: 190 * time.Minute}, step{clock: 4 * time.Hour})
	if n := count(); n != 1 {
		t.Fatalf("v1 since_valid count %d once valid again, want 1 (started over at its new valid_since)", n)
	}
}

// TestDirectCallsAndUnconfiguredEvents: a model entry's rule scores its
// direct calls under its model path; events of other contracts or
// models, and events with an error, are counted and left out.
func TestDirectCallsAndUnconfiguredEvents(t *testing.T) {
	j, err := New(Options{Rules: []Rule{{ModelPath: "m/", Outcomes: rule()}}, Store: NewMemStore()})
	if err != nil {
		t.Fatal(err)
	}
	direct := event("e1", "r1", 0, true, "", 0.25)
	direct.Contract, direct.ModelPath = "", "m/"
	failed := event("e2", "r2", 0, true, "", 0.25)
	failed.Contract, failed.ModelPath, failed.Error = "", "m/", &grovepb.Error{Type: "MODEL_EXECUTION"}
	feed(t, j, step{pred: direct}, step{pred: failed}, step{pred: event("e3", "r3", 0, true, "v1", 0.5)},
		step{out: click("c1", "r1", time.Minute, 1)}, step{clock: 2 * time.Hour})
	want := Counters{Predictions: 1, Scored: 1, Joined: 1, Outcomes: 1, Unconfigured: 1, Invalid: 1}
	if c := j.Counters(); c != want {
		t.Fatalf("counters\n got %+v\nwant %+v", c, want)
	}
	if b := binaryOf(t, j, SeriesKey{Release: "m/"}); b.Count() != 1 || b.Positives() != 1 {
		t.Fatalf("direct calls: count %d positives %d", b.Count(), b.Positives())
	}
}

// TestEphemeralPebbleStoreJoinsAsMemStoreAndRefusesToSync: without a
// write-ahead log the store ends the script with the state in memory
// ends it with, and Sync, which has no log to make durable, fails.
func TestEphemeralPebbleStoreJoinsAsMemStoreAndRefusesToSync(t *testing.T) {
	steps := script()
	want := snapshotBytes(t, run(t, rule(), nil, steps...))
	p, err := OpenPebbleEphemeral(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	j := run(t, rule(), p, steps...)
	if got := snapshotBytes(t, j); !bytes.Equal(got, want) {
		t.Errorf("over an ephemeral pebble store: %+v", j.Counters())
	}
	if keys, err := p.Due(math.MaxInt64, 10); err != nil || len(keys) != 0 {
		t.Errorf("entries left after every window closed: %q %v", keys, err)
	}
	if err := p.Sync(); err == nil {
		t.Error("Sync of a store without a write-ahead log succeeded")
	}
}

// TestBoundHoldsTheWatermarkUntilTheOutcomesAreIn: a bound Joiner keeps
// its watermark at the frontier less the lateness, however far the
// predictions' time has gone, so that an outcome read after predictions
// of two hours later still joins its window; a later frontier closes it,
// and an earlier one changes nothing.
func TestBoundHoldsTheWatermarkUntilTheOutcomesAreIn(t *testing.T) {
	j := run(t, rule(), nil)
	if err := j.Bound(time.Time{}); err != nil {
		t.Fatal(err)
	}
	feed(t, j, step{pred: event("e1", "r1", 0, true, "v1", 0.25), clock: 3 * time.Hour},
		step{pred: event("e2", "r2", 2*time.Hour, true, "v1", 0.25), clock: 3 * time.Hour},
		step{clock: 4 * time.Hour})
	if got := j.Watermark(); !got.Before(t0) {
		t.Fatalf("watermark %v with no frontier known, want before %v", got, t0)
	}
	if err := j.Bound(t0.Add(10 * time.Minute)); err != nil {
		t.Fatal(err)
	}
	if got, want := j.Watermark(), t0.Add(9*time.Minute); !got.Equal(want) {
		t.Fatalf("watermark %v, want the frontier less the lateness, %v", got, want)
	}
	feed(t, j, step{out: click("c1", "r1", 20*time.Minute, 1), clock: 4 * time.Hour})
	if err := j.Bound(t0.Add(5 * time.Minute)); err != nil { // back: ignored
		t.Fatal(err)
	}
	if c := j.Counters(); c.Scored != 0 || c.Late != 0 {
		t.Fatalf("before the frontier passed the window: %+v", c)
	}
	if err := j.Bound(t0.Add(3 * time.Hour)); err != nil {
		t.Fatal(err)
	}
	if got, want := j.Watermark(), t0.Add(time.Hour+59*time.Minute); !got.Equal(want) {
		t.Fatalf("watermark %v, want the largest event time less the lateness, %v", got, want)
	}
	if c := j.Counters(); c.Scored != 1 || c.Joined != 1 || c.Late != 0 {
		t.Fatalf("the first window closed with its outcome: %+v, want 1 scored, 1 joined, none late", c)
	}
}

// TestOutcomeBeforeItsPredictionAndAfterItsWindowIsLate: an outcome
// named by request_id that comes before its prediction, at a time after
// the prediction's window, counts late when the prediction comes, as it
// would coming after it, not unmatched.
func TestOutcomeBeforeItsPredictionAndAfterItsWindowIsLate(t *testing.T) {
	for _, order := range []string{"outcome first", "prediction first"} {
		t.Run(order, func(t *testing.T) {
			o := step{out: click("c1", "r1", 45*time.Minute, 1), clock: time.Minute}
			p := step{pred: event("e1", "r1", 0, true, "v1", 0.25), clock: time.Minute}
			steps := []step{o, p}
			if order == "prediction first" {
				steps = []step{p, o}
			}
			j := run(t, rule(), nil, append(steps, step{clock: 5 * time.Hour})...)
			if c := j.Counters(); c.Late != 1 || c.Outcomes != 0 || c.Unmatched != 0 || c.Scored != 1 || c.Joined != 0 {
				t.Fatalf("%+v: want the outcome late, the prediction scored without it", c)
			}
		})
	}
}

// A key's outcome read before its prediction joins that prediction even
// when the same key had an earlier prediction whose window has closed:
// the outcome falls after that window, so it is not late for it, and it
// waits for the prediction it belongs to (as it does without the earlier
// one).
func TestAKeysOutcomeBeforeItsPredictionIsNotLateForAnEarlierClosedWindow(t *testing.T) {
	click := &grovepb.Outcome{OutcomeId: "c1", Key: "u42", EventTime: timestamppb.New(t0.Add(60 * time.Minute)), Labels: map[string]float64{"click": 1}}
	for _, earlier := range []bool{false, true} {
		var steps []step
		if earlier {
			steps = append(steps, step{pred: event("e1", "r1", 0, true, "v1", 0.1), key: "u42"})
		}
		steps = append(steps,
			step{pred: event("x", "other", 58*time.Minute, true, "v1", 0.1), key: "u7", clock: 58 * time.Minute}, // the watermark passes e1's window
			step{out: click, clock: 60 * time.Minute},
			step{pred: event("e2", "r2", 59*time.Minute, true, "v1", 0.1), key: "u42", clock: 60 * time.Minute},
			step{clock: 10 * time.Hour})
		j := run(t, rule(), nil, steps...)
		if b := binaryOf(t, j, v1); b.Positives() != 1 || j.Counters().Late != 0 {
			t.Errorf("earlier closed prediction of u42: %v; positives %d, counters %+v: want the click joined to e2", earlier, b.Positives(), j.Counters())
		}
	}
}

// A copy of a prediction event whose first row is not a number (counted
// invalid) is still known as a copy, by its first valid row, and its
// rows are not scored twice.
func TestACopyOfAnEventWhoseFirstRowIsNaNIsADuplicate(t *testing.T) {
	ev := event("e1", "r1", 0, true, "v1", float32(math.NaN()), 0.2, 0.3)
	j := run(t, rule(), nil, step{pred: ev}, step{pred: ev}, step{clock: 10 * time.Hour})
	if b := binaryOf(t, j, v1); b.Count() != 2 || j.Counters().DuplicatePredictions != 1 {
		t.Errorf("scored %d, counters %+v: want its 2 valid rows scored once and the copy a duplicate", b.Count(), j.Counters())
	}
}

// A release's shadow series counts all its shadow predictions, whatever
// its valid_since: a shadow promoted (valid from then) keeps the figures
// that promoted it. Its served series starts at valid_since.
func TestAShadowSeriesIsNotCutByItsReleasesValidSince(t *testing.T) {
	j, err := New(Options{Rules: []Rule{{Contract: contract, Outcomes: rule()}}, Store: NewMemStore(),
		ValidSince: func(c, r string) (time.Time, bool) { return t0.Add(10 * time.Minute), c == contract && r == "v2" }})
	if err != nil {
		t.Fatal(err)
	}
	feed(t, j, step{pred: event("e1", "r1", 0, true, "v1", 0.25)},
		step{pred: event("e2", "r1", time.Second, false, "v2", 0.25)}, // in shadow, before v2 became valid
		step{pred: event("e3", "r2", 20*time.Minute, true, "v2", 0.25), clock: 20 * time.Minute},
		step{pred: event("e4", "r3", 5*time.Minute, true, "v2", 0.25), clock: 20 * time.Minute}, // served before valid_since: not in since_valid
		step{clock: 2 * time.Hour})
	snap, err := j.Snapshot()
	if err != nil {
		t.Fatal(err)
	}
	got := map[SeriesKey]uint64{}
	for _, s := range snap.Series {
		got[s.Key] = s.Stats.SinceValid.Count
	}
	if got[SeriesKey{Contract: contract, Release: "v2", Shadow: true}] != 1 || got[SeriesKey{Contract: contract, Release: "v2"}] != 1 {
		t.Fatalf("since_valid counts %v: want v2's shadow prediction kept, and one of its two served ones", got)
	}
}

// TestTwoContractsOnOneRequestIDKeepTheirOwnWindows: a click model (30m
// window) and a conversion model (24h window) scoring the same impression
// id each have their own window and champion: the click model is scored
// when its window closes, without waiting for the conversion window; a
// conversion hours later counts for the conversion model only; and each
// contract's shadow is paired with its own champion.
func TestTwoContractsOnOneRequestIDKeepTheirOwnWindows(t *testing.T) {
	j := twoRules(t)
	feed(t, j,
		// The conversion model's predictions are logged first: before the
		// fix the click model's shared their window.
		step{pred: cvrEvent("cv1", "imp1", 0, true, "v1", 0.25)},
		step{pred: cvrEvent("cv2", "imp1", time.Second, false, "v2", 0.5)},
		step{pred: event("ck1", "imp1", 2*time.Second, true, "v1", 0.2)},
		step{pred: event("ck2", "imp1", 3*time.Second, false, "v2", 0.4)},
		step{out: click("o1", "imp1", 10*time.Minute, 1), clock: 10 * time.Minute},
		step{clock: 40 * time.Minute})
	ck1, ck2 := v1, v2
	cv1, cv2 := SeriesKey{Contract: cvr, Release: "v1"}, SeriesKey{Contract: cvr, Release: "v2", Shadow: true}
	if b := binaryOf(t, j, ck1); b.Count() != 1 || b.Positives() != 1 {
		t.Fatalf("click champion after its window: count %d positives %d, want 1 1", b.Count(), b.Positives())
	}
	if s := j.series[cv1]; s != nil && s.binary != nil && s.binary.SinceValid().Count() != 0 {
		t.Fatalf("the conversion model was scored %d times before its 24h window closed", s.binary.SinceValid().Count())
	}
	feed(t, j,
		step{out: &grovepb.Outcome{OutcomeId: "o2", RequestId: "imp1", EventTime: timestamppb.New(t0.Add(5 * time.Hour)),
			Labels: map[string]float64{"conversion": 1}}, clock: 5 * time.Hour},
		step{clock: 30 * time.Hour})
	for _, k := range []SeriesKey{cv1, cv2} {
		if b := binaryOf(t, j, k); b.Count() != 1 || b.Positives() != 1 {
			t.Errorf("%v: count %d positives %d, want 1 1 (a conversion 5h after the impression)", k, b.Count(), b.Positives())
		}
	}
	for _, k := range []SeriesKey{ck2, cv2} {
		if s := j.series[k]; s == nil || s.paired == nil || s.paired.SinceValid().Count() != 1 {
			t.Errorf("%v: the shadow was not paired with its contract's champion", k)
		}
	}
	if c := j.counters; c.Scored != 4 || c.Joined != 4 || c.Late != 0 || c.Unmatched != 0 {
		t.Errorf("counters %+v, want 4 scored, 4 joined, none late or unmatched", c)
	}
}

// TestTwoModelsDirectCallsOnOneRequestIDKeepTheirOwnWindows: direct calls
// of two model entries (no contract: each its own rule, by model path)
// scoring the same request id each have their own window, as two
// contracts' predictions do: the click model is scored when its 30m
// window closes, not on the conversion model's 24h, and a conversion 5h
// in counts for the conversion model.
func TestTwoModelsDirectCallsOnOneRequestIDKeepTheirOwnWindows(t *testing.T) {
	conv := modelconfig.Outcomes{Label: "conversion", Kind: modelconfig.OutcomeBinary, Window: 24 * time.Hour,
		Missing: modelconfig.OutcomeMissingNegative, Lateness: time.Minute}
	j, err := New(Options{Rules: []Rule{{ModelPath: "pctr/", Outcomes: rule()}, {ModelPath: "pcvr/", Outcomes: conv}}, Store: NewMemStore()})
	if err != nil {
		t.Fatal(err)
	}
	direct := func(id, path string, at time.Duration, v float32) *grovepb.PredictionEvent {
		e := event(id, "imp1", at, true, "", v)
		e.Contract, e.ModelPath = "", path
		return e
	}
	feed(t, j,
		// The conversion model's call is logged first.
		step{pred: direct("cv", "pcvr/", 0, 0.25)},
		step{pred: direct("ck", "pctr/", time.Second, 0.2)},
		step{out: click("o1", "imp1", 10*time.Minute, 1), clock: 10 * time.Minute},
		step{clock: 40 * time.Minute})
	ck, cv := SeriesKey{Release: "pctr/"}, SeriesKey{Release: "pcvr/"}
	if s := j.series[ck]; s == nil || s.binary == nil || s.binary.SinceValid().Count() != 1 || s.binary.SinceValid().Positives() != 1 {
		t.Fatal("the click model was not scored (with its click) when its 30m window closed")
	}
	if s := j.series[cv]; s != nil && s.binary != nil && s.binary.SinceValid().Count() != 0 {
		t.Fatal("the conversion model was scored before its 24h window closed")
	}
	feed(t, j,
		step{out: &grovepb.Outcome{OutcomeId: "o2", RequestId: "imp1", EventTime: timestamppb.New(t0.Add(5 * time.Hour)),
			Labels: map[string]float64{"conversion": 1}}, clock: 5 * time.Hour},
		step{clock: 30 * time.Hour})
	if b := binaryOf(t, j, cv); b.Count() != 1 || b.Positives() != 1 {
		t.Errorf("conversion model: count %d positives %d, want 1 1", b.Count(), b.Positives())
	}
	if c := j.counters; c.Scored != 2 || c.Joined != 2 || c.Late != 0 || c.Unmatched != 0 {
		t.Errorf("counters %+v, want 2 scored, 2 joined, none late or unmatched", c)
	}
}

// twoRules is a Joiner with the click rule of contract and a conversion
// rule (24h window) of contract cvr.
func twoRules(t *testing.T) *Joiner {
	t.Helper()
	conv := modelconfig.Outcomes{Label: "conversion", Kind: modelconfig.OutcomeBinary, Window: 24 * time.Hour,
		Missing: modelconfig.OutcomeMissingNegative, Lateness: time.Minute}
	j, err := New(Options{Rules: []Rule{{Contract: contract, Outcomes: rule()}, {Contract: cvr, Outcomes: conv}}, Store: NewMemStore()})
	if err != nil {
		t.Fatal(err)
	}
	return j
}

// cvr is the conversion contract of twoRules.
const cvr = "ads/pcvr/1"

// cvrEvent is event for contract cvr.
func cvrEvent(id, req string, at time.Duration, served bool, release string, v float32) *grovepb.PredictionEvent {
	e := event(id, req, at, served, release, v)
	e.Contract = cvr
	return e
}

// TestAConversionBeforeItsPredictionsIsNotLateForTheClickWindow: a
// conversion 5h after the impression, read before the impression's
// predictions (or between the click model's and the conversion model's),
// is not late for the click model's 30m window: the conversion model,
// whose window holds it, scores it, in either order.
func TestAConversionBeforeItsPredictionsIsNotLateForTheClickWindow(t *testing.T) {
	conversion := &grovepb.Outcome{OutcomeId: "o1", RequestId: "imp1", EventTime: timestamppb.New(t0.Add(5 * time.Hour)),
		Labels: map[string]float64{"conversion": 1}}
	ck, cv := step{pred: event("ck1", "imp1", 0, true, "v1", 0.2)}, step{pred: cvrEvent("cv1", "imp1", time.Second, true, "v1", 0.25)}
	out := step{out: conversion, clock: time.Minute}
	for name, order := range map[string][]step{"outcome first": {out, ck, cv}, "outcome between": {ck, out, cv}, "outcome last": {ck, cv, out}} {
		t.Run(name, func(t *testing.T) {
			j := twoRules(t)
			feed(t, j, append(order, step{clock: 30 * time.Hour})...)
			if b := binaryOf(t, j, SeriesKey{Contract: cvr, Release: "v1"}); b.Count() != 1 || b.Positives() != 1 {
				t.Errorf("conversion model: count %d positives %d, want 1 1", b.Count(), b.Positives())
			}
			if b := binaryOf(t, j, v1); b.Count() != 1 || b.Positives() != 0 {
				t.Errorf("click model: count %d positives %d, want 1 0", b.Count(), b.Positives())
			}
			if c := j.counters; c.Late != 0 || c.Joined != 1 || c.Outcomes != 1 {
				t.Errorf("counters %+v, want the outcome joined once, none late", c)
			}
		})
	}
}

// TestAnOutcomeAfterEveryWindowOfItsRowIsLateWithTwoRules: with a longer
// rule configured, a click after its impression's only (click) window
// is kept while a conversion prediction of the row might come, and
// counted late, as with one rule, once none can.
func TestAnOutcomeAfterEveryWindowOfItsRowIsLateWithTwoRules(t *testing.T) {
	for name, order := range map[string][]step{
		"outcome first": {{out: click("o1", "imp1", 45*time.Minute, 1), clock: time.Minute}, {pred: event("ck1", "imp1", 0, true, "v1", 0.2), clock: time.Minute}},
		"outcome last":  {{pred: event("ck1", "imp1", 0, true, "v1", 0.2)}, {out: click("o1", "imp1", 45*time.Minute, 1), clock: 45 * time.Minute}},
	} {
		t.Run(name, func(t *testing.T) {
			j := twoRules(t)
			feed(t, j, append(order, step{clock: 30 * time.Hour})...)
			if b := binaryOf(t, j, v1); b.Count() != 1 || b.Positives() != 0 {
				t.Errorf("click model: count %d positives %d, want 1 0", b.Count(), b.Positives())
			}
			if c := j.counters; c.Late != 1 || c.Unmatched != 0 || c.Outcomes != 0 {
				t.Errorf("counters %+v, want the click late, not unmatched", c)
			}
		})
	}
}

// TestAKeysOutcomeGoesToTheRequestWhoseRuleTakesIt: an outcome by record
// key goes to the newest prediction under the key whose own window holds
// it and whose rule's label it has: a click 20m in belongs to the first
// impression's click model, not to a later impression that only the
// conversion model scored.
func TestAKeysOutcomeGoesToTheRequestWhoseRuleTakesIt(t *testing.T) {
	j := twoRules(t)
	feed(t, j,
		step{pred: event("ck1", "imp1", 0, true, "v1", 0.2), key: "user1"},
		step{pred: cvrEvent("cv2", "imp2", 10*time.Minute, true, "v1", 0.25), key: "user1", clock: 10 * time.Minute},
		step{out: &grovepb.Outcome{OutcomeId: "o1", Key: "user1", EventTime: timestamppb.New(t0.Add(20 * time.Minute)),
			Labels: map[string]float64{"click": 1}}, clock: 20 * time.Minute},
		step{clock: 30 * time.Hour})
	if b := binaryOf(t, j, v1); b.Count() != 1 || b.Positives() != 1 {
		t.Errorf("click model: count %d positives %d, want 1 1 (the click by key)", b.Count(), b.Positives())
	}
	if c := j.counters; c.Unmatched != 0 || c.Joined != 1 {
		t.Errorf("counters %+v, want the click joined, not unmatched", c)
	}
}

// TestAnOutcomeBetweenTwoWindowsOfItsRowIsUnmatchedWithOneRule: with one
// rule, a click between a request id's closed window and its next one,
// read while the next is open, is unmatched (as before a longer rule
// could hold an outcome back): it is before a window of its row, not
// after every one. Two ways to the gap: the id logged again later, and
// the served prediction moving the open window past the click.
func TestAnOutcomeBetweenTwoWindowsOfItsRowIsUnmatchedWithOneRule(t *testing.T) {
	for name, steps := range map[string][]step{
		"logged again": {
			{pred: event("ck1", "imp1", 0, true, "v1", 0.2)},
			{pred: event("ck2", "imp1", 50*time.Minute, true, "v1", 0.3), clock: 50 * time.Minute},
			{out: click("o1", "imp1", 40*time.Minute, 1), clock: 50 * time.Minute},
			// The click expires (40m plus the window) before ck2's window
			// closes (80m).
			{clock: 75 * time.Minute},
		},
		"window moved": {
			{pred: event("ck1", "imp1", 0, true, "v1", 0.2)},
			{pred: event("ck2", "imp1", 50*time.Minute, false, "v2", 0.3), clock: 50 * time.Minute},
			{out: click("o1", "imp1", 55*time.Minute, 1), clock: 55 * time.Minute},
			{pred: event("ck3", "imp1", 60*time.Minute, true, "v1", 0.4), clock: 60 * time.Minute},
			{clock: 88 * time.Minute},
		},
	} {
		t.Run(name, func(t *testing.T) {
			j := run(t, rule(), nil, append(steps, step{clock: 5 * time.Hour})...)
			if c := j.counters; c.Late != 0 || c.Unmatched != 1 || c.Outcomes != 1 || c.Joined != 0 {
				t.Errorf("counters %+v, want the click unmatched, not late", c)
			}
		})
	}
}

// TestAConversionAfterTheClickWindowClosedWaitsForTheConversionModel: a
// conversion 5h in, read once the impression's click window has closed
// and before the conversion model's prediction of it, is not late: the
// conversion model, whose window holds it, scores it.
func TestAConversionAfterTheClickWindowClosedWaitsForTheConversionModel(t *testing.T) {
	j := twoRules(t)
	conversion := &grovepb.Outcome{OutcomeId: "o1", RequestId: "imp1", EventTime: timestamppb.New(t0.Add(5 * time.Hour)),
		Labels: map[string]float64{"conversion": 1}}
	feed(t, j,
		step{pred: event("ck1", "imp1", 0, true, "v1", 0.2)},
		step{out: conversion, clock: 5 * time.Hour},
		step{pred: cvrEvent("cv1", "imp1", time.Second, true, "v1", 0.25), clock: 5 * time.Hour},
		step{clock: 30 * time.Hour},
	)
	if b := binaryOf(t, j, SeriesKey{Contract: cvr, Release: "v1"}); b.Count() != 1 || b.Positives() != 1 {
		t.Errorf("conversion model: count %d positives %d, want 1 1", b.Count(), b.Positives())
	}
	if c := j.counters; c.Late != 0 || c.Joined != 1 || c.Outcomes != 1 {
		t.Errorf("counters %+v, want the conversion joined, not late", c)
	}
}

// TestAConversionInTheClosedClickWindowWaitsForTheConversionModel: a
// conversion 20m after the impression, inside the click model's 30m
// window, read after that window closed and before the conversion
// model's prediction of the impression, is not the click model's (it
// has no click label), so it is not late: it waits for the conversion
// model's prediction, whose window holds it, and is scored there; with
// none, it ends unmatched once its wait is over. So it does naming its
// row by request id or by record key (the request id itself, or a
// user). A click read at the same point is late, as before.
func TestAConversionInTheClosedClickWindowWaitsForTheConversionModel(t *testing.T) {
	for _, key := range []string{"", "imp1", "user1"} { // "": by request id
		for _, predicted := range []bool{true, false} {
			t.Run(fmt.Sprintf("key %q predicted %v", key, predicted), func(t *testing.T) {
				j := twoRules(t)
				outcome := func(id, label string) *grovepb.Outcome {
					o := &grovepb.Outcome{OutcomeId: id, Key: key, EventTime: timestamppb.New(t0.Add(20 * time.Minute)),
						Labels: map[string]float64{label: 1}}
					if key == "" {
						o.RequestId = "imp1"
					}
					return o
				}
				steps := []step{
					{pred: event("ck1", "imp1", 0, true, "v1", 0.2), key: key},
					{clock: 2 * time.Hour},
					{out: outcome("o1", "conversion"), clock: 2 * time.Hour},
					{out: outcome("o2", "click"), clock: 2 * time.Hour},
				}
				if predicted {
					steps = append(steps, step{pred: cvrEvent("cv1", "imp1", time.Second, true, "v1", 0.25), key: key, clock: 2 * time.Hour})
				}
				feed(t, j, append(steps, step{clock: 60 * time.Hour})...) // past every window by the longest
				want := Counters{Predictions: 1, Scored: 1, Outcomes: 1, Late: 1, Unmatched: 1}
				if predicted {
					want = Counters{Predictions: 2, Scored: 2, Joined: 1, Outcomes: 1, Late: 1}
					if b := binaryOf(t, j, SeriesKey{Contract: cvr, Release: "v1"}); b.Count() != 1 || b.Positives() != 1 {
						t.Errorf("conversion model: count %d positives %d, want 1 1", b.Count(), b.Positives())
					}
				}
				if c := j.counters; c != want {
					t.Errorf("counters\n got %+v\nwant %+v (the click late, the conversion not)", c, want)
				}
				if n := j.store.(*MemStore).Len(); n != 0 {
					t.Errorf("%d entries left in the store", n)
				}
			})
		}
	}
}

// TestTwoRulesRandomStreamsKeepTheOutcomeCountsAndLeaveNothing: over
// random streams of a click model's and a conversion model's predictions
// and of clicks and conversions (by request id or record key, some named
// to a contract or a model path, some copies), in any order and with any
// delay, at every step the outcomes taken and the late ones are the
// distinct outcomes read, and long after every window the store is
// empty: no outcome waits for ever.
func TestTwoRulesRandomStreamsKeepTheOutcomeCountsAndLeaveNothing(t *testing.T) {
	for seed := range uint64(2000) {
		rng := rand.New(rand.NewPCG(seed, 7))
		j := twoRules(t)
		var clock time.Duration
		distinct := map[string]bool{}
		for i := range 12 {
			clock += time.Duration(rng.Int64N(int64(90 * time.Minute)))
			req := fmt.Sprintf("imp%d", rng.IntN(3))
			key := [...]string{"", req, "user1"}[rng.IntN(3)]
			at := clock - time.Duration(rng.Int64N(int64(time.Hour)))
			switch rng.IntN(4) {
			case 0:
				feed(t, j, step{pred: event(fmt.Sprintf("ck%d", i), req, at, true, "v1", 0.2), key: key, clock: clock})
			case 1:
				feed(t, j, step{pred: cvrEvent(fmt.Sprintf("cv%d", i), req, at, true, "v1", 0.3), key: key, clock: clock})
			default:
				labels := [...]map[string]float64{{"click": 1}, {"conversion": 1}, {"click": 1, "conversion": 1}}[rng.IntN(3)]
				id := fmt.Sprintf("o%d", rng.IntN(8))
				o := &grovepb.Outcome{OutcomeId: id, EventTime: timestamppb.New(t0.Add(at)), Labels: labels}
				if key != "" && rng.IntN(2) == 0 {
					o.Key = key
				} else {
					o.RequestId = req
				}
				switch rng.IntN(4) {
				case 0:
					o.Contract = cvr
				case 1:
					o.ModelPath = "v1/"
				}
				feed(t, j, step{out: o, clock: clock})
				distinct[id] = true
			}
			if c := j.counters; c.Outcomes+c.Late != uint64(len(distinct)) {
				t.Fatalf("seed %d step %d: %d outcomes and %d late, %d read", seed, i, c.Outcomes, c.Late, len(distinct))
			}
		}
		feed(t, j, step{clock: clock + 100*time.Hour})
		if c := j.counters; c.Outcomes < c.Unmatched || c.Outcomes+c.Late != uint64(len(distinct)) {
			t.Fatalf("seed %d: counters %+v, %d read", seed, c, len(distinct))
		}
		if n := j.store.(*MemStore).Len(); n != 0 {
			t.Fatalf("seed %d: %d entries left in the store", seed, n)
		}
	}
}
