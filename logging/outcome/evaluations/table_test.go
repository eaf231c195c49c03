package evaluations

import (
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/groveml/grove/conf/modelconfig"
	"github.com/groveml/grove/grovepb"
	"github.com/groveml/grove/logging/outcome/join"
	"github.com/groveml/grove/routing/quality"
)

// t0 is the start of the tests' event time.
var t0 = time.Date(2026, 5, 1, 12, 0, 0, 0, time.UTC)

const contract = "ads/pctr/1"

// The series of the tests' stream: v1 the champion, v3 a release phased
// in on every fifth request, v2 a shadow of every request 1.5× too high.
var (
	v1       = join.SeriesKey{Contract: contract, Release: "v1"}
	v3       = join.SeriesKey{Contract: contract, Release: "v3"}
	v2Shadow = join.SeriesKey{Contract: contract, Release: "v2", Shadow: true}
)

// arrival is one input of a joiner: a prediction or an outcome, at its
// clock time, for the partition of its request.
type arrival struct {
	at        time.Time
	partition int32
	pred      *grovepb.PredictionEvent
	out       *grovepb.Outcome
}

// stream makes a synthetic ad stream of n requests, 100 ms apart, over
// two partitions (by request): each served by v1 (or v3, every fifth)
// and shadowed by v2, clicked with the served prediction's probability
// after a random delay within the one-minute window, or after it (late).
func stream(seed uint64, n int) []arrival {
	rng := rand.New(rand.NewPCG(seed, 7))
	var out []arrival
	for i := range n {
		ts := t0.Add(time.Duration(i) * 100 * time.Millisecond)
		req := fmt.Sprintf("req-%d", i)
		part := int32(i % 2)
		p := 0.02 + 0.4*rng.Float64()
		served := "v1"
		if i%5 == 0 {
			served = "v3"
		}
		ev := func(release string, v float64, isServed bool, at time.Time) *grovepb.PredictionEvent {
			return &grovepb.PredictionEvent{EventId: req + "/" + release, RequestId: req, Timestamp: timestamppb.New(at),
				Contract: contract, ReleaseVersion: release, ModelPath: release + "/", Served: isServed,
				Outputs: []*grovepb.Tensor{{Name: "output_0", Datatype: "FLOAT", Shape: []int64{1}, FloatData: []float32{float32(v)}}}}
		}
		out = append(out, arrival{at: ts, partition: part, pred: ev(served, p, true, ts)},
			arrival{at: ts.Add(time.Millisecond), partition: part, pred: ev("v2", min(1, 1.5*p), false, ts.Add(time.Millisecond))})
		if rng.Float64() < p {
			delay := time.Duration(rng.Float64() * 1.2 * float64(time.Minute))
			out = append(out, arrival{at: ts.Add(delay), partition: part, out: &grovepb.Outcome{OutcomeId: req + "/click",
				RequestId: req, EventTime: timestamppb.New(ts.Add(delay)), Labels: map[string]float64{"click": 1}}})
		}
	}
	// In order of arrival; ties keep the order made.
	for i := 1; i < len(out); i++ {
		for j := i; j > 0 && out[j].at.Before(out[j-1].at); j-- {
			out[j], out[j-1] = out[j-1], out[j]
		}
	}
	return out
}

// newJoiner returns a joiner of the tests' rule over a MemStore.
func newJoiner(t testing.TB) *join.Joiner {
	t.Helper()
	return newJoinerSince(t, nil)
}

// newJoinerSince is newJoiner whose releases became valid when
// validSince says (join.Options.ValidSince).
func newJoinerSince(t testing.TB, validSince func(contract, release string) (time.Time, bool)) *join.Joiner {
	t.Helper()
	j, err := join.New(join.Options{Store: join.NewMemStore(), ValidSince: validSince, Rules: []join.Rule{{Contract: contract, Outcomes: modelconfig.Outcomes{
		Label: "click", Kind: modelconfig.OutcomeBinary, Window: time.Minute, Lateness: 5 * time.Second,
		Missing: modelconfig.OutcomeMissingNegative}}}})
	if err != nil {
		t.Fatal(err)
	}
	return j
}

// feed gives j the arrivals keep selects, then advances its clock to
// until (the partition idle: every window closes by then).
func feed(t testing.TB, j *join.Joiner, as []arrival, keep func(arrival) bool, until time.Time) {
	t.Helper()
	for _, a := range as {
		if !keep(a) {
			continue
		}
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
	if err := j.Advance(until); err != nil {
		t.Fatal(err)
	}
}

// records returns the evaluations records of j as partition p's, written
// at.
func records(t testing.TB, j *join.Joiner, p int32, at time.Time) []*kgo.Record {
	t.Helper()
	snap, err := j.Snapshot()
	if err != nil {
		t.Fatal(err)
	}
	rs, err := Records(p, snap, at)
	if err != nil {
		t.Fatal(err)
	}
	return rs
}

// apply applies rs to tb, failing on an error.
func apply(t testing.TB, tb *Table, rs ...*kgo.Record) {
	t.Helper()
	for _, r := range rs {
		if err := tb.Apply(r.Key, r.Value); err != nil {
			t.Fatal(err)
		}
	}
}

// joined are the tests' joiners over one stream: all of it, and each
// partition's share.
type joined struct {
	all   *join.Joiner
	parts [2]*join.Joiner
	end   time.Time
}

func joinStream(t testing.TB, seed uint64, n int) joined {
	t.Helper()
	as := stream(seed, n)
	end := as[len(as)-1].at.Add(time.Hour)
	var j joined
	j.end = end
	j.all = newJoiner(t)
	feed(t, j.all, as, func(arrival) bool { return true }, end)
	for p := range j.parts {
		j.parts[p] = newJoiner(t)
		feed(t, j.parts[p], as, func(a arrival) bool { return a.partition == int32(p) }, end)
	}
	return j
}

// seriesOf returns series k's snapshot in snap.
func seriesOf(t *testing.T, snap *join.Snapshot, k join.SeriesKey) join.SeriesSnapshot {
	t.Helper()
	for _, s := range snap.Series {
		if s.Key == k {
			return s
		}
	}
	t.Fatalf("no series %v in the snapshot", k)
	return join.SeriesSnapshot{}
}

// near reports whether the figures a and b are both null or within tol.
func near(a, b *float64, tol float64) bool {
	if a == nil || b == nil {
		return a == nil && b == nil
	}
	return math.Abs(*a-*b) <= tol
}

// checkFigures compares the figures of one window with want's: counts
// exactly, means within 1e-9, AUC within 0.001.
func checkFigures(t *testing.T, what string, got, want quality.OutcomeFigures) {
	t.Helper()
	if got.Count != want.Count || got.BinaryFigures == nil || got.Positives != want.Positives {
		t.Fatalf("%s: count %d positives %v, want %d and %d", what, got.Count, got.BinaryFigures, want.Count, want.Positives)
	}
	g, w := got.BinaryFigures, want.BinaryFigures
	for _, f := range []struct {
		name string
		a, b *float64
		tol  float64
	}{
		{"mean_prediction", g.MeanPrediction, w.MeanPrediction, 1e-9}, {"observed_rate", g.ObservedRate, w.ObservedRate, 1e-12},
		{"calibration", g.Calibration, w.Calibration, 1e-9}, {"ece", g.ECE, w.ECE, 1e-9}, {"logloss", g.LogLoss, w.LogLoss, 1e-9},
		{"brier", g.Brier, w.Brier, 1e-9}, {"auc", g.AUC, w.AUC, 0.001},
	} {
		if !near(f.a, f.b, f.tol) {
			t.Errorf("%s: %s %v, want %v", what, f.name, deref(f.a), deref(f.b))
		}
	}
	for i := range w.Bins {
		if g.Bins[i].Count != w.Bins[i].Count || !near(g.Bins[i].ObservedRate, w.Bins[i].ObservedRate, 1e-12) {
			t.Errorf("%s: bin %d %+v, want %+v", what, i, g.Bins[i], w.Bins[i])
		}
	}
}

func deref(p *float64) any {
	if p == nil {
		return nil
	}
	return *p
}

// TestTwoPartitionsMergeToOneJoinerFedEverything: the records of two
// partitions' joiners, applied to a Table, give each series the figures
// of one joiner fed the whole stream (counts exactly, means within 1e-9,
// AUC within 0.001), the shadow's paired comparison, a phased-in
// release's Welch comparison with the champion, the rules' input, and
// the counters added up.
func TestTwoPartitionsMergeToOneJoinerFedEverything(t *testing.T) {
	j := joinStream(t, 1, 6000)
	want, err := j.all.Snapshot()
	if err != nil {
		t.Fatal(err)
	}
	tb := NewTable()
	for p, pj := range j.parts {
		apply(t, tb, records(t, pj, int32(p), j.end)...)
	}
	tb.Publish()

	if got := tb.Totals(); got.Counters != want.Counters || got.Partitions != 2 {
		t.Errorf("totals %+v, want %+v over 2 partitions", got, want.Counters)
	}
	if want.Counters.Scored == 0 || want.Counters.Joined == 0 || want.Counters.Late == 0 {
		t.Fatalf("the stream scored %+v: the test needs scored, joined and late", want.Counters)
	}
	for _, k := range []join.SeriesKey{v1, v3, v2Shadow} {
		w := seriesOf(t, want, k)
		rule, got := tb.Outcomes(k.Contract, k.Release, k.Shadow, "v1")
		if got == nil || rule == nil {
			t.Fatalf("%v: no figures", k)
		}
		checkFigures(t, fmt.Sprintf("%v since_valid", k), got.SinceValid, w.Stats.SinceValid)
		checkFigures(t, fmt.Sprintf("%v last_1h", k), got.Last1h, w.Stats.Last1h)
		sv := w.Stats.SinceValid
		if rule.Scored != int64(sv.Count) || !near(&rule.LogLoss, sv.LogLoss, 1e-9) || !near(&rule.AUC, sv.AUC, 0.001) ||
			!near(&rule.Calibration, sv.Calibration, 1e-9) || !near(&rule.Brier, sv.Brier, 1e-9) || !near(&rule.ECE, sv.ECE, 1e-9) {
			t.Errorf("%v: rules' input %+v, want the since_valid figures %+v", k, rule, sv.BinaryFigures)
		}
		if len(got.History) != 1 || got.History[0].Count != sv.Count || !got.History[0].T.Equal(j.end) {
			t.Errorf("%v: history %+v, want one sample of %d at %v", k, got.History, sv.Count, j.end)
		}
	}

	// The shadow: paired with the champion, in the stats and the rules.
	_, sh := tb.Outcomes(contract, "v2", true, "v1")
	wv := seriesOf(t, want, v2Shadow).Stats.VsChampion
	if sh.VsChampion == nil || sh.VsChampion.Method != "paired" || sh.VsChampion.N != wv.N ||
		!near(sh.VsChampion.LogLossDelta, wv.LogLossDelta, 1e-9) || !near(sh.VsChampion.AUCDelta, wv.AUCDelta, 0.001) ||
		sh.VsChampion.CI95 == nil || math.Abs(sh.VsChampion.CI95[1]-wv.CI95[1]) > 1e-9 {
		t.Errorf("shadow vs_champion %+v, want %+v", sh.VsChampion, wv)
	}
	rule, _ := tb.Outcomes(contract, "v2", true, "")
	if rule.VsChampion.N != int64(wv.N) || !near(&rule.VsChampion.LogLossDelta, wv.LogLossDelta, 1e-9) ||
		math.Abs(rule.VsChampion.LogLossDeltaUpper(0.95)-wv.CI95[1]) > 1e-9 {
		t.Errorf("shadow's paired rules' input %+v, want %+v", rule.VsChampion, wv)
	}
	if wv.N == 0 || *wv.LogLossDelta <= 0 {
		t.Fatalf("the 1.5× shadow's log loss delta is %v over %d pairs: the stream should make it worse", deref(wv.LogLossDelta), wv.N)
	}

	// v3 against the champion v1: Welch over their own served requests;
	// the champion itself has no comparison.
	var champ, rel quality.OutcomeWindows[quality.Binary, *quality.Binary]
	if err := champ.UnmarshalBinary(seriesOf(t, want, v1).Binary); err != nil {
		t.Fatal(err)
	}
	if err := rel.UnmarshalBinary(seriesOf(t, want, v3).Binary); err != nil {
		t.Fatal(err)
	}
	welch := quality.Welch(champ.SinceValid(), rel.SinceValid(), quality.DefaultConfidence).VsChampion()
	_, st3 := tb.Outcomes(contract, "v3", false, "v1")
	if st3.VsChampion == nil || st3.VsChampion.Method != "welch" || st3.VsChampion.N != welch.N || st3.VsChampion.NChampion != welch.NChampion ||
		!near(st3.VsChampion.LogLossDelta, welch.LogLossDelta, 1e-9) || !near(st3.VsChampion.AUCDelta, welch.AUCDelta, 0.001) {
		t.Errorf("v3 vs_champion %+v, want %+v", st3.VsChampion, welch)
	}
	if _, st1 := tb.Outcomes(contract, "v1", false, "v1"); st1.VsChampion != nil {
		t.Errorf("the champion is compared with itself: %+v", st1.VsChampion)
	}
	if _, st3 := tb.Outcomes(contract, "v3", false, ""); st3.VsChampion != nil {
		t.Errorf("with no champion named, v3 has a comparison %+v", st3.VsChampion)
	}
	if r, s := tb.Outcomes(contract, "v9", false, "v1"); r != nil || s != nil {
		t.Errorf("a series never written has figures %+v %+v", r, s)
	}
	if got := len(tb.Series()); got != 3 {
		t.Errorf("Series lists %d series, want 3", got)
	}
}

// TestAPartitionStillOnAnOlderValidSinceIsLeftOutOfTheMerge: when a
// release's valid_since moves (a new release of its contract), each
// partition starts the release's series over only when it next scores
// one of its predictions. Until then the merge leaves out the partitions
// still on the older since, rather than adding counts from before the
// new valid_since to those after it; once they start over, every
// partition counts, as one joiner fed everything does.
func TestAPartitionStillOnAnOlderValidSinceIsLeftOutOfTheMerge(t *testing.T) {
	as := stream(9, 3000)
	end := as[len(as)-1].at.Add(time.Hour)
	newSince := t0.Add(2 * time.Minute)
	sinceOf := func(since time.Time) func(string, string) (time.Time, bool) {
		return func(_, release string) (time.Time, bool) { return since, release == "v1" }
	}
	fed := func(since time.Time, keep func(arrival) bool) *join.Joiner {
		j := newJoinerSince(t, sinceOf(since))
		feed(t, j, as, keep, end)
		return j
	}
	inPartition := func(p int32) func(arrival) bool { return func(a arrival) bool { return a.partition == p } }

	// Partition 1 is on the new since, partition 0 still on the old one
	// (the lower partition, which the merge went over first).
	tb := NewTable()
	apply(t, tb, records(t, fed(t0, inPartition(0)), 0, end)...)
	p1 := fed(newSince, inPartition(1))
	apply(t, tb, records(t, p1, 1, end)...)
	tb.Publish()
	only1, err := p1.Snapshot()
	if err != nil {
		t.Fatal(err)
	}
	_, st := tb.Outcomes(contract, "v1", false, "")
	if st == nil {
		t.Fatal("v1: no figures")
	}
	checkFigures(t, "v1 since_valid with partition 0 on the old since", st.SinceValid, seriesOf(t, only1, v1).Stats.SinceValid)
	checkFigures(t, "v1 last_1h with partition 0 on the old since", st.Last1h, seriesOf(t, only1, v1).Stats.Last1h)

	// Partition 0 starts over at the new since.
	apply(t, tb, records(t, fed(newSince, inPartition(0)), 0, end)...)
	tb.Publish()
	all, err := fed(newSince, func(arrival) bool { return true }).Snapshot()
	if err != nil {
		t.Fatal(err)
	}
	_, st = tb.Outcomes(contract, "v1", false, "")
	checkFigures(t, "v1 since_valid once both partitions started over", st.SinceValid, seriesOf(t, all, v1).Stats.SinceValid)
	// v3's valid_since is unknown: both partitions count all of it.
	_, st3 := tb.Outcomes(contract, "v3", false, "")
	checkFigures(t, "v3 since_valid", st3.SinceValid, seriesOf(t, all, v3).Stats.SinceValid)
}

// TestAReleaseNoLongerValidKeepsItsPartitionsFromItsLastValidSince: when
// a release stops being valid its valid_since is cleared, and each
// partition learns it only when it next scores one of its predictions. A
// partition that did keeps counting from the release's last valid_since,
// as one that did not yet does, so the merge still adds up every
// partition, as one joiner fed everything does, rather than keeping only
// those that have not scored since.
func TestAReleaseNoLongerValidKeepsItsPartitionsFromItsLastValidSince(t *testing.T) {
	as := stream(10, 3000)
	end := as[len(as)-1].at.Add(time.Hour)
	since, invalidAt := t0.Add(time.Minute), t0.Add(3*time.Minute)
	// fed is a joiner fed the arrivals keep selects, whose v1 is valid
	// from since until the clock reaches invalidAt, when stays is false.
	fed := func(keep func(arrival) bool, stays bool) *join.Joiner {
		valid := true
		j := newJoinerSince(t, func(_, release string) (time.Time, bool) {
			if release != "v1" || !valid {
				return time.Time{}, false
			}
			return since, true
		})
		feed(t, j, as, func(a arrival) bool { return keep(a) && a.at.Before(invalidAt) }, invalidAt)
		valid = stays
		feed(t, j, as, func(a arrival) bool { return keep(a) && !a.at.Before(invalidAt) }, end)
		return j
	}
	inPartition := func(p int32) func(arrival) bool { return func(a arrival) bool { return a.partition == p } }
	everything := func(arrival) bool { return true }

	// Partition 1 scored v1's predictions after it stopped being valid,
	// partition 0 (the lower, which the merge goes over first) not yet.
	tb := NewTable()
	apply(t, tb, records(t, fed(inPartition(0), true), 0, end)...)
	apply(t, tb, records(t, fed(inPartition(1), false), 1, end)...)
	tb.Publish()
	_, st := tb.Outcomes(contract, "v1", false, "")
	if st == nil {
		t.Fatal("v1: no figures")
	}
	all, err := fed(everything, false).Snapshot()
	if err != nil {
		t.Fatal(err)
	}
	checkFigures(t, "v1 since_valid, partition 1 past the end of its validity", st.SinceValid, seriesOf(t, all, v1).Stats.SinceValid)
	stillValid, err := fed(everything, true).Snapshot()
	if err != nil {
		t.Fatal(err)
	}
	checkFigures(t, "v1 since_valid of one joiner, against one whose v1 stays valid", seriesOf(t, all, v1).Stats.SinceValid,
		seriesOf(t, stillValid, v1).Stats.SinceValid)
}

// TestRecordsAppliedInAnyOrderGiveTheSameFigures: the partitions'
// records applied in the opposite order merge to the same figures, bit
// for bit (the partitions are merged in partition order).
func TestRecordsAppliedInAnyOrderGiveTheSameFigures(t *testing.T) {
	j := joinStream(t, 2, 2000)
	r0, r1 := records(t, j.parts[0], 0, j.end), records(t, j.parts[1], 1, j.end)
	a, b := NewTable(), NewTable()
	apply(t, a, append(r0, r1...)...)
	apply(t, b, append(r1, r0...)...)
	a.Publish()
	b.Publish()
	for _, k := range []join.SeriesKey{v1, v3, v2Shadow} {
		_, x := a.Outcomes(k.Contract, k.Release, k.Shadow, "v1")
		_, y := b.Outcomes(k.Contract, k.Release, k.Shadow, "v1")
		if *x.SinceValid.LogLoss != *y.SinceValid.LogLoss || *x.SinceValid.MeanPrediction != *y.SinceValid.MeanPrediction {
			t.Errorf("%v: %v and %v", k, *x.SinceValid.LogLoss, *y.SinceValid.LogLoss)
		}
	}
}

// TestNewestRecordOfAKeyReplacesTheLast: a key's record replaces the one
// before it (each holds the series' whole state), so a partition's
// figures are those of its last record, not a sum of them.
func TestNewestRecordOfAKeyReplacesTheLast(t *testing.T) {
	as := stream(3, 3000)
	mid := as[len(as)/2].at
	j := newJoiner(t)
	feed(t, j, as[:len(as)/2], func(arrival) bool { return true }, mid)
	early := records(t, j, 0, mid)
	end := as[len(as)-1].at.Add(time.Hour)
	feed(t, j, as[len(as)/2:], func(arrival) bool { return true }, end)
	final := records(t, j, 0, end)
	want, _ := j.Snapshot()

	tb := NewTable()
	apply(t, tb, early...)
	tb.Publish()
	_, before := tb.Outcomes(contract, "v1", false, "")
	apply(t, tb, final...)
	tb.Publish()
	_, after := tb.Outcomes(contract, "v1", false, "")
	if w := seriesOf(t, want, v1).Stats.SinceValid.Count; after.SinceValid.Count != w || before.SinceValid.Count >= w {
		t.Errorf("v1 counts %d then %d, want fewer then %d", before.SinceValid.Count, after.SinceValid.Count, w)
	}
	if tb.Totals().Counters != want.Counters {
		t.Errorf("totals %+v, want %+v", tb.Totals().Counters, want.Counters)
	}
	// Until Publish, readers see the figures published last.
	apply(t, tb, early...)
	if _, st := tb.Outcomes(contract, "v1", false, ""); st.SinceValid.Count != after.SinceValid.Count {
		t.Errorf("an applied record showed before Publish: %d", st.SinceValid.Count)
	}
}

// TestTombstonesDeleteAPartitionsShare: a tombstone of a partition's
// series record leaves the other partition's figures, one of its
// counters record its counters out of the totals, and once every record
// of a series is deleted it has no figures.
func TestTombstonesDeleteAPartitionsShare(t *testing.T) {
	j := joinStream(t, 4, 2000)
	tb := NewTable()
	r1 := records(t, j.parts[1], 1, j.end)
	apply(t, tb, records(t, j.parts[0], 0, j.end)...)
	apply(t, tb, r1...)
	tb.Publish()
	only0, _ := j.parts[0].Snapshot()

	if err := tb.Apply(SeriesKey(v1, 1), nil); err != nil {
		t.Fatal(err)
	}
	if err := tb.Apply(PartitionKey(1), nil); err != nil {
		t.Fatal(err)
	}
	tb.Publish()
	_, st := tb.Outcomes(contract, "v1", false, "")
	checkFigures(t, "v1 after the tombstone", st.SinceValid, seriesOf(t, only0, v1).Stats.SinceValid)
	if got := tb.Totals(); got.Counters != only0.Counters || got.Partitions != 1 {
		t.Errorf("totals %+v, want partition 0's %+v", got, only0.Counters)
	}
	// A tombstone of a key never written does nothing.
	if err := tb.Apply(SeriesKey(join.SeriesKey{Contract: "x/y/1", Release: "r"}, 3), nil); err != nil {
		t.Errorf("tombstone of an unknown key: %v", err)
	}
	if err := tb.Apply(SeriesKey(v1, 0), nil); err != nil {
		t.Fatal(err)
	}
	tb.Publish()
	if r, s := tb.Outcomes(contract, "v1", false, ""); r != nil || s != nil {
		t.Errorf("v1 has figures after all its records were deleted: %+v", s)
	}
	for _, f := range tb.Series() {
		if f.Key == v1 {
			t.Errorf("Series still lists v1")
		}
	}
}

// TestUnreadableRecordsAreErrorsNamingTheKeyAndSkipped: a key of no known
// form, a value that is not an Evaluation, one whose fields disagree with
// its key, and corrupt windows are each an error that wraps ErrBadRecord
// and names the key; the key keeps its last value, and Rejected counts
// them.
func TestUnreadableRecordsAreErrorsNamingTheKeyAndSkipped(t *testing.T) {
	j := joinStream(t, 5, 1000)
	rs := records(t, j.parts[0], 0, j.end)
	tb := NewTable()
	apply(t, tb, rs...)
	tb.Publish()
	_, before := tb.Outcomes(contract, "v1", false, "")

	valueOf := func(mod func(*grovepb.Evaluation)) []byte {
		var ev grovepb.Evaluation
		if err := proto.Unmarshal(rs[0].Value, &ev); err != nil {
			t.Fatal(err)
		}
		mod(&ev)
		b, err := proto.Marshal(&ev)
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	key := SeriesKey(v1, 0)
	for _, c := range []struct {
		name       string
		key, value []byte
		says       string
	}{
		{"not a key", []byte("hello"), rs[0].Value, `key "hello" is neither`},
		{"side", []byte("series\x00ads/pctr/1\x00v1\x00both\x000"), rs[0].Value, "neither served nor shadow"},
		{"partition not canonical", []byte("series\x00ads/pctr/1\x00v1\x00served\x0001"), rs[0].Value, "is not a number"},
		{"negative partition", []byte("partition\x00-1"), rs[0].Value, "is not a number"},
		{"not protobuf", key, []byte{0xff, 0xff, 0xff}, "not a grove.v1.Evaluation"},
		{"another partition", key, valueOf(func(e *grovepb.Evaluation) { e.Partition = 1 }), "of partition 1"},
		{"another release", key, valueOf(func(e *grovepb.Evaluation) { e.Release = "v2" }), "of series"},
		{"truncated windows", key, valueOf(func(e *grovepb.Evaluation) { e.Binary = e.Binary[:len(e.Binary)/2] }), "corrupt"},
		{"both kinds", key, valueOf(func(e *grovepb.Evaluation) { e.Numeric = e.Binary }), "want exactly one"},
		{"no windows", key, valueOf(func(e *grovepb.Evaluation) { e.Binary = nil }), "want exactly one"},
		{"counters on a series", key, valueOf(func(e *grovepb.Evaluation) { e.Counters = &grovepb.EvaluationCounters{} }), "with counters"},
		{"bad time", key, valueOf(func(e *grovepb.Evaluation) { e.EvaluatedAt = &timestamppb.Timestamp{Nanos: -1} }), "evaluated_at"},
		{"no counters", PartitionKey(0), valueOf(func(e *grovepb.Evaluation) {}), "without counters"},
	} {
		err := tb.Apply(c.key, c.value)
		if !errors.Is(err, ErrBadRecord) || !strings.Contains(err.Error(), c.says) || !strings.Contains(err.Error(), fmt.Sprintf("%q", c.key)) {
			t.Errorf("%s: %v, want ErrBadRecord naming the key %q and saying %q", c.name, err, c.key, c.says)
		}
	}
	tb.Publish()
	if _, after := tb.Outcomes(contract, "v1", false, ""); after.SinceValid.Count != before.SinceValid.Count ||
		*after.SinceValid.LogLoss != *before.SinceValid.LogLoss {
		t.Errorf("a refused record changed v1: %d, want %d", after.SinceValid.Count, before.SinceValid.Count)
	}
	if got := tb.Rejected(); got != 13 {
		t.Errorf("Rejected = %d, want 13", got)
	}
}

// TestHistoryKeepsOneSampleAMinuteForAnHour: each Publish samples a
// changed series' since_valid figures at its newest evaluated_at: a
// sample of a minute already sampled replaces it, and samples more than
// an hour older than the newest are dropped.
func TestHistoryKeepsOneSampleAMinuteForAnHour(t *testing.T) {
	j := joinStream(t, 6, 500)
	tb := NewTable()
	base := t0.Add(3 * time.Hour)
	for _, at := range []time.Duration{0, 20 * time.Second, 61 * time.Second, 30 * time.Minute, 62 * time.Minute} {
		apply(t, tb, records(t, j.parts[0], 0, base.Add(at))...)
		tb.Publish()
	}
	_, st := tb.Outcomes(contract, "v1", false, "")
	var got []time.Duration
	for _, s := range st.History {
		got = append(got, s.T.Sub(base))
		if s.LogLoss == nil || s.Count != st.SinceValid.Count {
			t.Errorf("sample %+v lacks the since_valid figures", s)
		}
	}
	if want := []time.Duration{30 * time.Minute, 62 * time.Minute}; fmt.Sprint(got) != fmt.Sprint(want) {
		// 0 and 20 s share a minute, 61 s is over an hour before 62 min.
		t.Errorf("history at %v, want %v", got, want)
	}
}

// TestReadersRunBesideTheWriter: readers read while the writer applies
// and publishes (run with -race).
func TestReadersRunBesideTheWriter(t *testing.T) {
	j := joinStream(t, 8, 500)
	rs := append(records(t, j.parts[0], 0, j.end), records(t, j.parts[1], 1, j.end)...)
	tb := NewTable()
	var wg sync.WaitGroup
	stop := make(chan struct{})
	for range 3 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				select {
				case <-stop:
					return
				default:
				}
				if _, st := tb.Outcomes(contract, "v3", false, "v1"); st != nil && st.SinceValid.Count == 0 {
					t.Error("published figures of nothing")
				}
				_ = tb.Series()
				_ = tb.Totals()
			}
		}()
	}
	for i := range 50 {
		apply(t, tb, rs[i%len(rs)])
		tb.Publish()
	}
	close(stop)
	wg.Wait()
}
