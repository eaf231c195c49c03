package evaluate

import (
	"math"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/groveml/grove/grovepb"
	"github.com/groveml/grove/logging/outcome/join"
)

// A snapshot may begin in a commit that took nothing and scored nothing
// (its partition's changelog grew past the threshold by the previous
// commit's checkpoint); that commit still holds a checkpoint, so the
// changelog left after the snapshot's truncation rebuilds the counters
// and not only the store.
func TestChangelogLeftAfterEverySnapshotHoldsACheckpoint(t *testing.T) {
	st, err := join.OpenPebbleEphemeral(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	p := &partition{id: 0, store: st, tiered: join.NewTieredStore(partitionMemoryBytes, st), frontier: map[int32]int64{},
		predReach: math.MinInt64, boundAt: math.MinInt64}
	defer p.close()
	p.tiered.TrackChanges()
	rules := []join.Rule{{Contract: contract, Outcomes: testRule}}
	if p.j, err = join.New(join.Options{Rules: rules, Store: p.tiered}); err != nil {
		t.Fatal(err)
	}
	e := &evaluator{cfg: Config{EvaluationsTopic: evalTopic, Now: time.Now, snapshotMinLog: 1, snapshotChunk: 1 << 20}, changelog: "changelog",
		parts: map[int32]*partition{0: p}, rules: rules}

	// The changelog partition as the broker would keep it: the records
	// from start on.
	var log []*kgo.Record
	start, next := int64(0), int64(0)
	produce := func(r *kgo.Record, acked func(*kgo.Record)) {
		if r.Topic != e.changelog {
			return
		}
		r.Offset = next
		next++
		log = append(log, r)
		if acked != nil {
			acked(r)
		}
	}
	commit := func() {
		t.Helper()
		if err := e.flush(produce, nil); err != nil {
			t.Fatal(err)
		}
		if p.snap != nil && p.snap.done {
			s := p.endSnapshot()
			if s < 0 {
				t.Fatal("a completed snapshot's start is not known")
			}
			log = log[s-start:]
			start = s
		}
	}
	now := time.Now()
	ev := &grovepb.PredictionEvent{EventId: "e1", RequestId: "r1", Timestamp: timestamppb.New(now), Contract: contract,
		ReleaseVersion: "v1", ModelPath: "v1/", Served: true,
		Outputs: []*grovepb.Tensor{{Name: "output_0", Datatype: "FLOAT", Shape: []int64{1}, FloatData: []float32{0.5}}}}
	if err := p.j.AddPrediction(now, join.Prediction{Event: ev, Key: []byte("r1")}); err != nil {
		t.Fatal(err)
	}
	commit()
	for range 4 { // commits that take nothing
		commit()
	}

	var cp []byte
	rebuilt := join.NewMemStore()
	for _, r := range log {
		c, err := applyChanges(rebuilt, r.Value)
		if err != nil {
			t.Fatal(err)
		}
		if c != nil {
			cp = c
		}
	}
	if cp == nil {
		t.Fatalf("the changelog left (%d records from offset %d) rebuilds %d store entries but holds no checkpoint", len(log), start, rebuilt.Len())
	}
	j, err := join.New(join.Options{Rules: rules, Store: rebuilt})
	if err != nil {
		t.Fatal(err)
	}
	if err := j.Restore(cp); err != nil {
		t.Fatal(err)
	}
	if c := j.Counters(); c.Predictions != 1 {
		t.Fatalf("restored counters %+v, want the 1 prediction taken", c)
	}
}
