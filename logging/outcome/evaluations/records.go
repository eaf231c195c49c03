// Package evaluations reads and writes the evaluations topic (default
// grove.evaluations): what `grove evaluate` has learnt, one
// grove.v1.Evaluation per series and prediction-log partition and one per
// partition with its counters (grovepb/proto/grove/v1/evaluation.proto).
// The evaluator writes Records; `grove serve` applies every record it
// reads to a Table, which merges a series' partitions into the figures of
// the contract stats and the input of the outcome rules.
package evaluations

import (
	"strconv"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/groveml/grove/grovepb"
	"github.com/groveml/grove/logging/outcome/join"
)

// Schema is the value of the records' grove-schema header.
const Schema = "grove.v1.Evaluation"

// SeriesKey is the record key of a series' record on partition: "series",
// contract, release, "served" or "shadow", partition, separated by NUL.
func SeriesKey(k join.SeriesKey, partition int32) []byte {
	side := "served"
	if k.Shadow {
		side = "shadow"
	}
	return []byte("series\x00" + k.Contract + "\x00" + k.Release + "\x00" + side + "\x00" + strconv.Itoa(int(partition)))
}

// PartitionKey is the record key of partition's counters record.
func PartitionKey(partition int32) []byte {
	return []byte("partition\x00" + strconv.Itoa(int(partition)))
}

// Records are the records of snap, what partition's join has computed,
// written at: one per series and the partition's counters, in a fixed
// order. Their Topic is left for the caller to set.
func Records(partition int32, snap *join.Snapshot, at time.Time) ([]*kgo.Record, error) {
	var wm, maxEvent *timestamppb.Timestamp
	if !snap.Watermark.IsZero() {
		wm = timestamppb.New(snap.Watermark)
	}
	if !snap.MaxEventTime.IsZero() {
		maxEvent = timestamppb.New(snap.MaxEventTime)
	}
	stamp := timestamppb.New(at)
	headers := []kgo.RecordHeader{{Key: "grove-schema", Value: []byte(Schema)}}
	out := make([]*kgo.Record, 0, len(snap.Series)+1)
	for _, s := range snap.Series {
		v, err := proto.Marshal(&grovepb.Evaluation{Partition: partition, Contract: s.Key.Contract, Release: s.Key.Release, Shadow: s.Key.Shadow,
			Binary: s.Binary, Numeric: s.Numeric, Paired: s.Paired, Watermark: wm, MaxEventTime: maxEvent, EvaluatedAt: stamp})
		if err != nil {
			return nil, err
		}
		out = append(out, &kgo.Record{Key: SeriesKey(s.Key, partition), Value: v, Headers: headers})
	}
	c := snap.Counters
	v, err := proto.Marshal(&grovepb.Evaluation{Partition: partition, Watermark: wm, MaxEventTime: maxEvent, EvaluatedAt: stamp,
		Counters: &grovepb.EvaluationCounters{Predictions: c.Predictions, Scored: c.Scored, Joined: c.Joined, Dropped: c.Dropped,
			Outcomes: c.Outcomes, Late: c.Late, Unmatched: c.Unmatched, DuplicateOutcomes: c.DuplicateOutcomes,
			DuplicatePredictions: c.DuplicatePredictions, LatePredictions: c.LatePredictions, Unconfigured: c.Unconfigured,
			Invalid: c.Invalid, LagNanos: int64(snap.Lag)}})
	if err != nil {
		return nil, err
	}
	return append(out, &kgo.Record{Key: PartitionKey(partition), Value: v, Headers: headers}), nil
}
