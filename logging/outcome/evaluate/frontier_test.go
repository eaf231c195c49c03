package evaluate

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"slices"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/groveml/grove/conf"
	"github.com/groveml/grove/grovepb"
	"github.com/groveml/grove/logging"
	"github.com/groveml/grove/logging/outcome"
	"github.com/groveml/grove/logging/outcome/join"
)

// readEnds finds a partition read to its end only once the member has
// polled it to its end (a consumer that has not fetched yet finds
// nothing, which is not having read everything), and an empty partition
// read; and a partition whose last record is a transactional producer's
// commit or abort marker as soon as the member has polled that marker,
// as its consumer reads the markers (readOpts), one that holds nothing
// but an aborted transaction too.
func TestReadEndsFindsAPartitionReadOnlyOnceItIsReadToItsEnd(t *testing.T) {
	brokers := cluster(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	prod, err := kgo.NewClient(kgo.SeedBrokers(brokers), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	if err != nil {
		t.Fatal(err)
	}
	defer prod.Close()
	for range 10 {
		if err := prod.ProduceSync(ctx, &kgo.Record{Topic: predTopic, Partition: 0, Value: []byte("x")}).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	clock := time.Now()
	e := &evaluator{cfg: Config{PredictionTopic: predTopic, OutcomeTopic: outTopic, CommitInterval: 200 * time.Millisecond,
		Now: func() time.Time { return clock }}, aux: prod, assigned: map[int32]bool{0: true}, outAssigned: map[int32]bool{0: true, 1: true},
		listed: map[topicPartition]*partitionListings{}, log: slog.Default()}
	cl, err := kgo.NewClient(append(readOpts(), kgo.SeedBrokers(brokers), kgo.ConsumerGroup("readall"), kgo.ConsumeTopics(predTopic, outTopic),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))...)
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	read := func(topic string, partition int32) bool {
		at, ok := e.readEnds(ctx, cl)[topicPartition{topic, partition}]
		return ok && at.Equal(clock)
	}
	if read(predTopic, 0) {
		t.Fatal("read before any poll, with 10 records to read")
	}
	if !read(outTopic, 0) {
		t.Fatal("the empty outcome partition is not read")
	}
	// poll polls want records, and returns how many of them are not
	// markers.
	poll := func(want int) (data int) {
		t.Helper()
		for n := 0; n < want; {
			fs := cl.PollFetches(ctx)
			if ctx.Err() != nil {
				t.Fatalf("polled %d of %d records", n, want)
			}
			n += fs.NumRecords()
			fs.EachRecord(func(r *kgo.Record) {
				if isData(r) {
					data++
				}
			})
		}
		return data
	}
	poll(10)
	if !read(predTopic, 0) {
		t.Fatal("not read after polling every record")
	}

	tx, err := kgo.NewClient(kgo.SeedBrokers(brokers), kgo.RecordPartitioner(kgo.ManualPartitioner()), kgo.TransactionalID("readall-tx"))
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Close()
	for _, end := range []struct {
		partition int32
		try       kgo.TransactionEndTry
		// polled: the records the member polls, the marker with them;
		// data: those not markers.
		polled, data int
	}{{0, kgo.TryCommit, 2, 1}, {0, kgo.TryAbort, 1, 0}, {1, kgo.TryAbort, 1, 0}} {
		if err := tx.BeginTransaction(); err != nil {
			t.Fatal(err)
		}
		if err := tx.ProduceSync(ctx, &kgo.Record{Topic: outTopic, Partition: end.partition, Value: []byte("o")}).FirstErr(); err != nil {
			t.Fatal(err)
		}
		if err := tx.EndTransaction(ctx, end.try); err != nil {
			t.Fatal(err)
		}
		if data := poll(end.polled); data != end.data {
			t.Fatalf("polled %d records not markers, want %d (%+v)", data, end.data, end)
		}
		if !read(outTopic, end.partition) {
			t.Fatalf("not read at once after polling the marker of a transaction that ended (%+v)", end)
		}
	}
}

// readToEnd finds a partition read up to the last listing whose high
// watermark it has been read to: now when its position (or, without one,
// its log start) is at its high watermark; the last listing before a
// transaction still open began while its position is at its last stable
// offset. A partition short of its last stable offset counts as read to
// it only once a probe found nothing readable there, which it asks once
// the same offset and last stable offset have held for the stall time (a
// listing that finds either moved starts that time again), and again
// only after another stall when it failed; after probeTries failures in
// a row on answers it cannot use (not for want of an answer, while the
// consumer's fetches may be failing too), the stall alone settles it.
func TestReadToEndTakesAPartitionAsReadUpToTheLastListingItIsReadPast(t *testing.T) {
	const stall = 3 * time.Second
	t0 := time.Unix(1_000_000, 0)
	tp := topicPartition{outTopic, 1}
	const none = time.Duration(-1)
	type listing struct {
		at                   time.Duration
		pos, end, hwm, start int64
		// probe is the probe's answer: "" when it must not be asked,
		// "empty", "readable", "error" (no answer) or "unusable" (an
		// answer it cannot use).
		probe string
		// read is the listing time it finds the partition read up to
		// (none: not read).
		read time.Duration
	}
	for _, tc := range []struct {
		name     string
		listings []listing
	}{
		{"at its end", []listing{{0, 10, 10, 10, 0, "", 0}, {time.Second, 10, 10, 10, 0, "", time.Second}}},
		{"past the end listed before its last records", []listing{{0, 12, 10, 10, 0, "", 0}}},
		{"records to read", []listing{{0, 5, 10, 10, 0, "", none}, {stall, 5, 10, 10, 0, "readable", none},
			{time.Minute, 5, 10, 10, 0, "", none}}},
		{"records to read, read since", []listing{{0, 5, 10, 10, 0, "", none}, {time.Second, 10, 12, 12, 0, "", 0},
			{2 * time.Second, 12, 12, 12, 0, "", 2 * time.Second}}},
		{"no position, empty", []listing{{0, -1, 0, 0, 0, "", 0}, {time.Second, -1, 7, 7, 7, "", time.Second}}},
		{"no position, records to read", []listing{{0, -1, 7, 7, 0, "", none}, {stall, -1, 7, 7, 0, "readable", none},
			{time.Minute, -1, 7, 7, 0, "", none}}},
		{"no position, aborted records before an open transaction", []listing{{0, -1, 0, 0, 0, "", 0},
			{time.Second, -1, 0, 3, 0, "", 0}, {2 * time.Second, -1, 3, 5, 0, "", 0},
			{2*time.Second + stall, -1, 3, 5, 0, "empty", time.Second}}},
		{"records waiting, fetched slowly", []listing{{0, 9, 9, 9, 0, "", 0}, {time.Second, 9, 10, 10, 0, "", 0},
			{time.Second + stall, 9, 10, 10, 0, "readable", 0}, {time.Hour, 9, 10, 10, 0, "", 0},
			{time.Hour + time.Second, 10, 10, 10, 0, "", time.Hour + time.Second}}},
		{"aborted records before an open transaction, settled", []listing{{0, 9, 9, 9, 0, "", 0},
			{time.Second, 9, 9, 10, 0, "", 0}, {2 * time.Second, 9, 10, 12, 0, "", 0},
			{2*time.Second + stall - time.Millisecond, 9, 10, 12, 0, "", 0},
			{2*time.Second + stall, 9, 10, 12, 0, "empty", time.Second}, {time.Minute, 9, 10, 12, 0, "", time.Second},
			{time.Minute + time.Second, 9, 13, 13, 0, "", 0}, {time.Minute + 2*time.Second, 13, 13, 13, 0, "", time.Minute + 2*time.Second}}},
		{"records deleted beneath the position, settled", []listing{{0, 5, 5, 5, 0, "", 0}, {time.Second, 5, 10, 10, 0, "", 0},
			{time.Second + stall, 5, 10, 10, 0, "empty", time.Second + stall}}},
		{"short, the position moved", []listing{{0, 8, 10, 10, 0, "", none}, {stall - time.Second, 9, 10, 10, 0, "", none},
			{stall, 9, 10, 10, 0, "", none}, {2*stall - time.Second, 9, 10, 10, 0, "empty", 2*stall - time.Second}}},
		{"short, the end moved", []listing{{0, 9, 10, 10, 0, "", none}, {stall - time.Second, 9, 11, 11, 0, "", none},
			{stall, 9, 11, 11, 0, "", none}, {2*stall - time.Second, 9, 11, 11, 0, "empty", 2*stall - time.Second}}},
		{"a probe that fails is asked again after another stall", []listing{{0, 9, 10, 10, 0, "", none},
			{stall, 9, 10, 10, 0, "error", none}, {2*stall - time.Millisecond, 9, 10, 10, 0, "", none},
			{2 * stall, 9, 10, 10, 0, "empty", 2 * stall}}},
		{"probes answered with what they cannot use leave the stall to settle it", []listing{{0, 9, 10, 10, 0, "", none},
			{stall, 9, 10, 10, 0, "unusable", none}, {2 * stall, 9, 10, 10, 0, "unusable", none},
			{3 * stall, 9, 10, 10, 0, "unusable", 3 * stall}, {time.Minute, 9, 10, 10, 0, "", time.Minute},
			{time.Minute + time.Second, 10, 11, 11, 0, "", time.Minute}, {time.Minute + time.Second + stall, 10, 11, 11, 0, "unusable", time.Minute}}},
		{"probes that get no answer never settle it, records may be waiting", []listing{{0, 9, 10, 10, 0, "", none},
			{stall, 9, 10, 10, 0, "error", none}, {2 * stall, 9, 10, 10, 0, "error", none},
			{3 * stall, 9, 10, 10, 0, "error", none}, {4 * stall, 9, 10, 10, 0, "unusable", none},
			{5 * stall, 9, 10, 10, 0, "error", none}, {6 * stall, 9, 10, 10, 0, "readable", none},
			{time.Minute, 9, 10, 10, 0, "", none}}},
		{"a transaction open at the position", []listing{{0, 10, 10, 10, 0, "", 0}, {time.Second, 10, 10, 12, 0, "", 0},
			{time.Minute, 10, 10, 14, 0, "", 0}, {time.Minute + time.Second, 10, 15, 15, 0, "", 0},
			{time.Minute + 2*time.Second, 15, 15, 15, 0, "", time.Minute + 2*time.Second}}},
		{"transactions open one after another", []listing{{0, 10, 10, 10, 0, "", 0}, {time.Second, 10, 10, 12, 0, "", 0},
			{2 * time.Second, 13, 13, 15, 0, "", time.Second}, {3 * time.Second, 16, 16, 18, 0, "", 2 * time.Second}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			listed := map[topicPartition]*partitionListings{}
			for i, l := range tc.listings {
				asked := ""
				probe := func(got topicPartition, from, end int64) (bool, error) {
					r := l.pos
					if r < 0 {
						r = l.start
					}
					if got != tp || from != r || end != l.end {
						t.Fatalf("listing %d (%+v): probed %v from %d to %d", i, l, got, from, end)
					}
					asked = l.probe
					switch l.probe {
					case "empty":
						return true, nil
					case "readable":
						return false, nil
					case "error":
						return false, errors.New("no leader")
					case "unusable":
						return false, fmt.Errorf("%w: the partition is not in the fetch response", errProbeUnusable)
					}
					t.Fatalf("listing %d (%+v): probed", i, l)
					return false, nil
				}
				got := readToEnd(listed, []partitionEnd{{tp: tp, pos: l.pos, end: l.end, hwm: l.hwm, start: l.start}}, t0.Add(l.at), stall, probe)
				at, ok := got[tp]
				switch {
				case len(got) > 1, ok != (l.read != none), ok && !at.Equal(t0.Add(l.read)):
					t.Fatalf("listing %d (%+v): read %v, want %v", i, l, got, l.read)
				case asked != l.probe:
					t.Fatalf("listing %d (%+v): not probed", i, l)
				}
			}
			if got := readToEnd(listed, nil, t0, stall, nil); len(got) != 0 || len(listed) != 0 {
				t.Fatalf("a listing without the partition: read %v, listed %v, want neither", got, listed)
			}
		})
	}
}

// A partition's high watermarks are kept for as many listings as its
// position stays behind, at most maxMarks of them: past that, the time a
// position finds it read up to is an earlier listing's than it could be,
// never a later one.
func TestPartitionListingsKeepAtMostMaxMarks(t *testing.T) {
	t0 := time.Unix(1_000_000, 0)
	var l partitionListings
	for i := range int64(1000) {
		l.mark(t0.Add(time.Duration(i)*time.Second), i)
		l.trim(-1)
		if len(l.marks) > maxMarks {
			t.Fatalf("%d marks after %d listings, want at most %d", len(l.marks), i+1, maxMarks)
		}
	}
	for _, r := range []int64{999, 990, 700, 1} {
		at, ok := l.readTo(r)
		if !ok || at.After(t0.Add(time.Duration(r)*time.Second)) {
			t.Fatalf("read to %d: up to %v (%v), want at most %v", r, at.Sub(t0), ok, time.Duration(r)*time.Second)
		}
		if r == 999 && !at.Equal(t0.Add(999*time.Second)) {
			t.Fatalf("read to the last high watermark: up to %v, want 999s", at.Sub(t0))
		}
	}
	if _, ok := l.readTo(-1); ok {
		t.Fatal("read to -1: found read")
	}
}

// member is an evaluator that owns the one partition of the prediction
// log and outcome partitions 0 and 1, its clock and its records given by
// hand: a cycle's forwarded outcomes and frontier records are read back
// at its end, as if by the next.
type member struct {
	t       *testing.T
	e       *evaluator
	p       *partition
	t0, now time.Time
	next    map[topicPartition]int64
	fwd     []*kgo.Record
	// preds and clicks number the requests and outcomes made.
	preds, clicks int
}

// newMember returns a member at clock t0.
func newMember(t *testing.T) *member {
	m := &member{t: t, t0: time.Unix(1_000_000, 0), next: map[topicPartition]int64{}}
	m.now = m.t0
	rules := []join.Rule{{Contract: contract, Outcomes: testRule}}
	m.e = &evaluator{cfg: Config{PredictionTopic: predTopic, OutcomeTopic: outTopic, EvaluationsTopic: evalTopic, CommitInterval: 200 * time.Millisecond,
		Now: func() time.Time { return m.now }, snapshotMinLog: 1 << 40}, log: slog.Default(), repartition: "grove-evaluate-repartition",
		changelog: "grove-evaluate-changelog", n: 1, outN: 2, hash: kgo.StickyKeyPartitioner(nil).ForTopic(""), parts: map[int32]*partition{},
		rules: rules, reach: map[int32]int64{}, listed: map[topicPartition]*partitionListings{}, assigned: map[int32]bool{0: true},
		outAssigned: map[int32]bool{0: true, 1: true}}
	m.restore()
	return m
}

// restore gives the member its partition as a restore from an empty
// changelog does.
func (m *member) restore() {
	m.t.Helper()
	st, err := join.OpenPebbleEphemeral(m.t.TempDir())
	if err != nil {
		m.t.Fatal(err)
	}
	p := &partition{id: 0, store: st, tiered: join.NewTieredStore(partitionMemoryBytes, st), frontier: map[int32]int64{},
		predReach: math.MinInt64, boundAt: math.MinInt64}
	m.t.Cleanup(p.close)
	p.tiered.TrackChanges()
	if p.j, err = join.New(join.Options{Rules: m.e.rules, Store: p.tiered}); err != nil {
		m.t.Fatal(err)
	}
	m.p, m.e.parts[0] = p, p
}

// produce keeps what the member forwards to GROUP-repartition.
func (m *member) produce(r *kgo.Record, _ func(*kgo.Record)) {
	if r.Topic == m.e.repartition {
		m.fwd = append(m.fwd, r)
	}
}

// take takes r as the one record of a fetch of its partition, after
// which more records remain to read unless atEnd.
func (m *member) take(r *kgo.Record, atEnd bool) {
	m.t.Helper()
	tp := topicPartition{r.Topic, r.Partition}
	r.Offset = m.next[tp]
	m.next[tp]++
	end := m.next[tp]
	if !atEnd {
		end++
	}
	if err := m.e.take(kgo.FetchTopicPartition{Topic: r.Topic, FetchPartition: kgo.FetchPartition{Partition: r.Partition,
		HighWatermark: end, LastStableOffset: end, Records: []*kgo.Record{r}}}, m.produce); err != nil {
		m.t.Fatal(err)
	}
}

// prediction is the record of a prediction of request req at time at.
func (m *member) prediction(req string, at time.Time) *kgo.Record {
	m.t.Helper()
	ev := &grovepb.PredictionEvent{EventId: req + "/v1", RequestId: req, Timestamp: timestamppb.New(at), Contract: contract,
		ReleaseVersion: "v1", ModelPath: "v1/", Served: true,
		Outputs: []*grovepb.Tensor{{Name: "output_0", Datatype: "FLOAT", Shape: []int64{1}, FloatData: []float32{0.3}}}}
	v, err := logging.Encode(ev, conf.EncodingProto)
	if err != nil {
		m.t.Fatal(err)
	}
	return &kgo.Record{Topic: predTopic, Partition: 0, Key: []byte(req), Value: v, Timestamp: at}
}

// predict takes a prediction stamped with the clock, the last record of
// its partition.
func (m *member) predict() {
	m.t.Helper()
	m.take(m.prediction(fmt.Sprintf("req-%d", m.preds), m.now), true)
	m.preds++
}

// clickRecord is the record of a click on request req at time at in
// outcome partition q.
func (m *member) clickRecord(q int32, req string, at time.Time) *kgo.Record {
	m.t.Helper()
	m.clicks++
	r, err := outcome.Record(&grovepb.Outcome{OutcomeId: fmt.Sprintf("click-%d", m.clicks), RequestId: req,
		EventTime: timestamppb.New(at), Labels: map[string]float64{"click": 1}}, outTopic)
	if err != nil {
		m.t.Fatal(err)
	}
	r.Partition, r.Timestamp = q, at
	return r
}

// click takes a click on request req at time at from outcome partition
// q, the last record there unless more remain to read.
func (m *member) click(q int32, req string, at time.Time, atEnd bool) {
	m.t.Helper()
	m.take(m.clickRecord(q, req, at), atEnd)
}

// commit ends a cycle whose listing found the prediction log's partition
// and the outcome partitions but short read to their end, then reads
// back what it forwarded.
func (m *member) commit(short ...int32) {
	m.t.Helper()
	read := map[topicPartition]time.Time{{predTopic, 0}: m.now}
	for q := range int32(2) {
		if !slices.Contains(short, q) {
			read[topicPartition{outTopic, q}] = m.now
		}
	}
	if err := m.e.flush(m.produce, m.e.readTo(read)); err != nil {
		m.t.Fatal(err)
	}
	for _, r := range m.e.frontierRecords() {
		m.produce(r, nil)
	}
	fwd := m.fwd
	m.fwd = nil
	for _, r := range fwd {
		m.take(r, true)
	}
}

// play runs the member until the clock is t0+until: a prediction every
// 100 ms while the clock is before t0+predict, a commit every 200 ms,
// each with short's outcome partitions found short of their end and each
// of behind's taking a click stamped that far behind the clock (a
// backlog being read).
func (m *member) play(until, predict time.Duration, short []int32, behind map[int32]time.Duration) {
	m.t.Helper()
	for ; !m.now.After(m.t0.Add(until)); m.now = m.now.Add(100 * time.Millisecond) {
		if m.now.Before(m.t0.Add(predict)) {
			m.predict()
		}
		if m.now.Sub(m.t0)%(200*time.Millisecond) != 0 {
			continue
		}
		for q, d := range behind {
			m.click(q, "backlog", m.now.Add(-d), false)
		}
		m.commit(short...)
	}
	m.now = m.now.Add(-100 * time.Millisecond)
}

// A joiner's watermark follows the least of how far its prediction-log
// partition and every outcome partition have been read: to the clock for
// a partition found read to its end, whether it got records or not; to
// its newest record's time for one with records still to read; not at
// all while one is not known. An outcome that comes later on an idle
// partition, its time in a window that has closed, is counted late.
func TestFrontierFollowsTheClockThroughPartitionsReadToTheirEnd(t *testing.T) {
	const none = time.Duration(-1)
	for _, tc := range []struct {
		name string
		run  func(m *member)
		// behind is how far the watermark is behind the clock (none: no
		// watermark yet); scored and late the predictions scored and the
		// outcomes counted late.
		behind      time.Duration
		scored      uint64
		late, clean uint64
	}{
		{name: "outcome partitions that get nothing, read to their end: lateness behind the clock",
			run:    func(m *member) { m.play(4*time.Second, time.Hour, nil, nil) },
			behind: testRule.Lateness, scored: 16},
		{name: "an outcome partition never read to its end holds every window",
			run:    func(m *member) { m.play(4*time.Second, time.Hour, []int32{1}, nil) },
			behind: none},
		{name: "an outcome partition with records to read holds the watermark at their times",
			run: func(m *member) {
				m.play(5*time.Second, time.Hour, []int32{0}, map[int32]time.Duration{0: 2 * time.Second})
			},
			behind: 2*time.Second + testRule.Lateness, scored: 6},
		{name: "an outcome that comes later on an idle partition, in a closed window, is late",
			run: func(m *member) {
				m.play(3500*time.Millisecond, time.Hour, nil, nil)
				m.now = m.now.Add(100 * time.Millisecond)
				m.predict()
				m.click(1, "req-0", m.t0.Add(testRule.Window/2), true)
				m.commit()
			},
			behind: testRule.Lateness, scored: 12, late: 1},
		{name: "a prediction partition that goes quiet: its last windows close with the clock",
			run:    func(m *member) { m.play(6*time.Second, time.Second, nil, nil) },
			behind: 3 * time.Second, scored: 10},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m := newMember(t)
			tc.run(m)
			c := m.p.j.Counters()
			if c.Scored != tc.scored || c.Late != tc.late || c.Joined != 0 {
				t.Errorf("scored %d, late %d, joined %d; want %d, %d, 0", c.Scored, c.Late, c.Joined, tc.scored, tc.late)
			}
			w := m.p.j.Watermark()
			if tc.behind == none {
				if w.After(m.t0.Add(-time.Hour)) {
					t.Errorf("watermark %v after t0-1h, want none", w.Sub(m.t0))
				}
				return
			}
			if got := m.now.Sub(w); got != tc.behind {
				t.Errorf("watermark %v behind the clock, want %v", got, tc.behind)
			}
		})
	}
}

// abort ends a cycle whose transaction did not commit: nothing it
// forwarded is read back, the consumer goes back to the committed
// offsets (none here), and the partition is restored.
func (m *member) abort() {
	m.t.Helper()
	m.e.abandon()
	m.fwd = nil
	clear(m.next)
	m.restore()
}

// A transaction that does not commit leaves nothing of what it
// forwarded, and the consumer goes back to the committed offsets: the
// next transaction's frontier records must not say the outcome
// partitions were read as far as the aborted one had read them, or the
// joiner closes a window before its click, forwarded again, has come
// back, and counts the click late.
func TestAbortedTransactionForgetsHowFarItReadTheOutcomePartitions(t *testing.T) {
	m := newMember(t)
	var preds []*kgo.Record
	for i := range 40 {
		preds = append(preds, m.prediction(fmt.Sprintf("req-%d", i), m.t0.Add(time.Duration(i)*100*time.Millisecond)))
	}
	clicks := []*kgo.Record{m.clickRecord(0, "req-0", m.t0.Add(500*time.Millisecond)), m.clickRecord(0, "req-5", m.t0.Add(900*time.Millisecond))}

	// A transaction that read both topics to their end at t0+4s, and
	// did not commit.
	m.now = m.t0.Add(4 * time.Second)
	for _, r := range preds {
		m.take(r, true)
	}
	for i, r := range clicks {
		m.take(r, i == len(clicks)-1)
	}
	m.abort()

	// The next one reads the predictions again and the first click,
	// not the second yet; the one after, the second.
	m.now = m.now.Add(200 * time.Millisecond)
	for _, r := range preds {
		m.take(r, true)
	}
	m.take(clicks[0], false)
	m.commit(0)
	m.now = m.now.Add(200 * time.Millisecond)
	m.take(clicks[1], true)
	m.commit()
	for range 20 {
		m.now = m.now.Add(200 * time.Millisecond)
		m.commit()
	}
	if c := m.p.j.Counters(); c.Scored != 40 || c.Joined != 2 || c.Late != 0 {
		t.Fatalf("scored %d, joined %d, late %d; want 40 scored, the 2 clicks joined, none late", c.Scored, c.Joined, c.Late)
	}
}

// A fetch that reached its partition's end can wait in the client
// through a flush and a commit before it is taken: the partition has
// been read up to when the broker answered it, not up to the clock when
// it is taken. A click written in between, within the lateness of its
// event time, must not be counted late because the frontier claimed the
// partition read as far as that clock.
func TestFrontierOfAFetchTakenLateIsNotTheClockWhenTaken(t *testing.T) {
	m := newMember(t)
	m.predict() // req-0: its window ends at t0+1s
	m.commit()
	// A fetch of outcome partition 0 that reached its end, a click
	// written at t0+2.2s last, taken at t0+2.9s.
	m.now = m.t0.Add(2900 * time.Millisecond)
	m.predict()
	m.click(0, "other", m.t0.Add(2200*time.Millisecond), true)
	// A click on req-0 at t0+1s, written at t0+2.4s (1.4 s late, within
	// the lateness of 1.5 s), after the fetch: the listing finds
	// partition 0 short of its end.
	click := m.clickRecord(0, "req-0", m.t0.Add(time.Second))
	click.Timestamp = m.t0.Add(2400 * time.Millisecond)
	m.commit(0)
	m.now = m.now.Add(200 * time.Millisecond)
	m.take(click, true)
	m.commit()
	for range 20 {
		m.now = m.now.Add(200 * time.Millisecond)
		m.commit()
	}
	if c := m.p.j.Counters(); c.Scored != 2 || c.Joined != 1 || c.Late != 0 {
		t.Fatalf("scored %d, joined %d, late %d; want 2 scored, the click joined, none late", c.Scored, c.Joined, c.Late)
	}
}

// backlog is what a partition holds past the member's position: records
// it can read (waiting), and records after the first of a transaction
// still open (held, that record among them), which a read_committed
// consumer cannot read before the transaction ends.
type backlog struct{ waiting, held int64 }

// commitListing ends a cycle as commit does, its listing made of what
// the member has taken: every partition at the member's position but
// for those with a backlog. A fetch of a partition's own (a probe)
// finds records to read wherever some are waiting.
func (m *member) commitListing(backlogs map[topicPartition]backlog) {
	m.t.Helper()
	var ends []partitionEnd
	for _, tp := range []topicPartition{{predTopic, 0}, {outTopic, 0}, {outTopic, 1}} {
		b := backlogs[tp]
		pos := m.next[tp]
		ends = append(ends, partitionEnd{tp: tp, pos: pos, end: pos + b.waiting, hwm: pos + b.waiting + b.held})
	}
	probe := func(tp topicPartition, from, end int64) (bool, error) { return backlogs[tp].waiting == 0, nil }
	read := readToEnd(m.e.listed, ends, m.now, max(probeAfter, 10*m.e.cfg.CommitInterval), probe)
	if err := m.e.flush(m.produce, m.e.readTo(read)); err != nil {
		m.t.Fatal(err)
	}
	for _, r := range m.e.frontierRecords() {
		m.produce(r, nil)
	}
	fwd := m.fwd
	m.fwd = nil
	for _, r := range fwd {
		m.take(r, true)
	}
}

// A click waiting in its partition while the member's fetches are slow
// (its consumer starved of CPU, a slow broker, a paused partition) has
// not been read: however long the position stays short of the end, the
// partition must not count as read past the click's time, or its window
// closes before it is taken and the click counts late.
func TestAPartitionWithRecordsWaitingIsNotTakenAsReadWhileItsFetchesAreSlow(t *testing.T) {
	m := newMember(t)
	m.predict() // req-0: its window ends at t0+1s
	m.commitListing(nil)
	m.now = m.now.Add(200 * time.Millisecond)
	click := m.clickRecord(0, "req-0", m.t0.Add(300*time.Millisecond))
	waiting := map[topicPartition]backlog{{outTopic, 0}: {waiting: 1}}
	for ; m.now.Before(m.t0.Add(6 * time.Second)); m.now = m.now.Add(200 * time.Millisecond) {
		m.commitListing(waiting)
	}
	m.take(click, true)
	for range 20 {
		m.commitListing(nil)
		m.now = m.now.Add(200 * time.Millisecond)
	}
	if c := m.p.j.Counters(); c.Scored != 1 || c.Joined != 1 || c.Late != 0 {
		t.Fatalf("scored %d, joined %d, late %d; want the prediction scored, the click joined, none late", c.Scored, c.Joined, c.Late)
	}
}

// A click written without a transaction after the first record of
// another producer's transaction still open cannot be read before that
// transaction ends (read_committed stops at the last stable offset),
// though the member's position is at that offset. The partition must not
// count as read past the time that transaction began, or a transaction
// open for longer than the lateness makes the click late.
func TestAClickBehindAnOpenTransactionIsNotLate(t *testing.T) {
	m := newMember(t)
	m.predict() // req-0: its window ends at t0+1s
	m.commitListing(nil)
	m.now = m.now.Add(200 * time.Millisecond)
	m.commitListing(nil)
	// At t0+0.3s another producer's transaction writes its first record
	// to outcome partition 1, and a producer without one the click.
	tx := m.clickRecord(1, "other", m.t0.Add(300*time.Millisecond))
	click := m.clickRecord(1, "req-0", m.t0.Add(300*time.Millisecond))
	held := map[topicPartition]backlog{{outTopic, 1}: {held: 2}}
	for m.now = m.now.Add(200 * time.Millisecond); m.now.Before(m.t0.Add(5 * time.Second)); m.now = m.now.Add(200 * time.Millisecond) {
		m.commitListing(held)
	}
	// The transaction commits: both records and its marker are read.
	m.take(tx, false)
	m.take(click, false)
	m.next[topicPartition{outTopic, 1}]++ // the marker
	for range 20 {
		m.commitListing(nil)
		m.now = m.now.Add(200 * time.Millisecond)
	}
	if c := m.p.j.Counters(); c.Scored != 1 || c.Joined != 1 || c.Late != 0 {
		t.Fatalf("scored %d, joined %d, late %d; want the prediction scored, the click joined, none late", c.Scored, c.Joined, c.Late)
	}
}

// listedMember is an evaluator that owns outcome partition q alone, its
// clock given by hand, with a read_committed consumer of the outcome
// topic, on a kfake cluster, and a producer writing without transactions.
type listedMember struct {
	t       *testing.T
	ctx     context.Context
	e       *evaluator
	cl      *kgo.Client
	prod    *kgo.Client
	clock   time.Time
	tp      topicPartition
	brokers string
}

// newListedMember returns a listedMember of outcome partition q on a
// cluster of its own, at clock t0.
func newListedMember(t *testing.T, q int32) *listedMember {
	t.Helper()
	brokers := cluster(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	m := &listedMember{t: t, ctx: ctx, clock: time.Unix(1_000_000, 0), tp: topicPartition{outTopic, q}, brokers: brokers}
	var err error
	if m.prod, err = kgo.NewClient(kgo.SeedBrokers(brokers), kgo.RecordPartitioner(kgo.ManualPartitioner())); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(m.prod.Close)
	m.e = &evaluator{cfg: Config{PredictionTopic: predTopic, OutcomeTopic: outTopic, CommitInterval: 200 * time.Millisecond,
		Now: func() time.Time { return m.clock }}, aux: m.prod, assigned: map[int32]bool{}, outAssigned: map[int32]bool{q: true},
		listed: map[topicPartition]*partitionListings{}, log: slog.Default()}
	if m.cl, err = kgo.NewClient(append(readOpts(), kgo.SeedBrokers(brokers), kgo.ConsumerGroup("listed"), kgo.ConsumeTopics(outTopic),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))...); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(m.cl.Close)
	return m
}

// txProducer returns a transactional producer with transactional id id.
func (m *listedMember) txProducer(id string) *kgo.Client {
	m.t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(m.brokers), kgo.RecordPartitioner(kgo.ManualPartitioner()), kgo.TransactionalID(id))
	if err != nil {
		m.t.Fatal(err)
	}
	m.t.Cleanup(cl.Close)
	return cl
}

// write writes a record to the member's partition with cl.
func (m *listedMember) write(cl *kgo.Client) {
	m.t.Helper()
	if err := cl.ProduceSync(m.ctx, &kgo.Record{Topic: m.tp.topic, Partition: m.tp.partition, Value: []byte("o")}).FirstErr(); err != nil {
		m.t.Fatal(err)
	}
}

// poll polls until the consumer's position in the partition is at, and
// returns the records it polled that are not markers.
func (m *listedMember) poll(at int64) (data int) {
	m.t.Helper()
	for {
		if o, ok := m.cl.UncommittedOffsets()[m.tp.topic][m.tp.partition]; ok && o.Offset >= at {
			return data
		}
		fs := m.cl.PollFetches(m.ctx)
		if m.ctx.Err() != nil {
			m.t.Fatalf("polling to offset %d: %v", at, m.ctx.Err())
		}
		fs.EachRecord(func(r *kgo.Record) {
			if isData(r) {
				data++
			}
		})
	}
}

// readAt lists the partition at clock time now, and returns the time
// up to which it finds it read.
func (m *listedMember) readAt(now time.Time) (time.Time, bool) {
	m.clock = now
	at, ok := m.e.readEnds(m.ctx, m.cl)[m.tp]
	return at, ok
}

// On a broker: a record written without a transaction after the first
// record of a transaction still open cannot be read before it ends, and
// the consumer's position stays at the last stable offset; the listing
// finds the partition read up to the last listing before the transaction
// began, not up to the clock, until the transaction has ended and what
// it held back has been read.
func TestReadEndsHoldsAPartitionWhereATransactionIsOpenAtTheTimeItBegan(t *testing.T) {
	m := newListedMember(t, 2)
	t0 := m.clock
	m.write(m.prod)
	m.poll(1)
	if at, ok := m.readAt(t0); !ok || !at.Equal(t0) {
		t.Fatalf("read to its end: read up to %v (%v), want t0", at.Sub(t0), ok)
	}
	tx := m.txProducer("held-tx")
	if err := tx.BeginTransaction(); err != nil {
		t.Fatal(err)
	}
	m.write(tx)     // offset 1, held until the transaction ends
	m.write(m.prod) // offset 2, written without a transaction, held too
	for _, d := range []time.Duration{time.Second, time.Minute} {
		if at, ok := m.readAt(t0.Add(d)); !ok || !at.Equal(t0) {
			t.Fatalf("at t0+%v, a transaction open since before t0+1s: read up to %v (%v), want t0", d, at.Sub(t0), ok)
		}
	}
	if err := tx.EndTransaction(m.ctx, kgo.TryCommit); err != nil {
		t.Fatal(err)
	}
	if at, ok := m.readAt(t0.Add(time.Minute + time.Second)); ok && at.After(t0.Add(time.Second)) {
		t.Fatalf("the transaction ended, its records not read: read up to %v, want at most t0+1s", at.Sub(t0))
	}
	if data := m.poll(4); data != 2 {
		t.Fatalf("polled %d records not markers, want 2", data)
	}
	now := t0.Add(time.Minute + 2*time.Second)
	if at, ok := m.readAt(now); !ok || !at.Equal(now) {
		t.Fatalf("read to its end again: read up to %v (%v), want the clock, t0+%v", at.Sub(t0), ok, now.Sub(t0))
	}
}

// On a broker: an aborted transaction's records before a transaction
// still open leave the consumer's position short of the last stable
// offset with nothing to read; a probe finds that, and the partition
// then counts as read up to the last listing before the open one began.
// Records waiting, committed, are found readable; records deleted
// beneath the position with none after them, not.
func TestProbeFindsNothingReadableOnlyWhereNothingIs(t *testing.T) {
	m := newListedMember(t, 3)
	t0 := m.clock
	m.write(m.prod) // offset 0
	m.poll(1)
	if at, ok := m.readAt(t0); !ok || !at.Equal(t0) {
		t.Fatalf("read to its end: read up to %v (%v), want t0", at.Sub(t0), ok)
	}
	a, b := m.txProducer("aborted-tx"), m.txProducer("open-tx")
	for _, tx := range []*kgo.Client{a, b} {
		if err := tx.BeginTransaction(); err != nil {
			t.Fatal(err)
		}
	}
	m.write(a) // offset 1
	if at, ok := m.readAt(t0.Add(time.Second)); !ok || !at.Equal(t0) {
		t.Fatalf("a transaction open: read up to %v (%v), want t0", at.Sub(t0), ok)
	}
	m.write(b) // offset 2: the last stable offset while b is open
	if err := a.EndTransaction(m.ctx, kgo.TryAbort); err != nil {
		t.Fatal(err) // its marker at 3
	}
	if empty, err := m.e.probe(m.ctx, m.tp, 0, 2); err != nil || empty {
		t.Fatalf("probe from a committed record: empty %v (%v), want not", empty, err)
	}
	if empty, err := m.e.probe(m.ctx, m.tp, 1, 2); err != nil || !empty {
		t.Fatalf("probe of an aborted transaction's records: empty %v (%v), want empty", empty, err)
	}
	// The consumer polls nothing (the aborted record is dropped): its
	// position stays at 1, short of the last stable offset, 2.
	stall := max(probeAfter, 10*m.e.cfg.CommitInterval)
	for _, d := range []time.Duration{2 * time.Second, 2*time.Second + stall - time.Millisecond} {
		if at, ok := m.readAt(t0.Add(d)); !ok || !at.Equal(t0) {
			t.Fatalf("at t0+%v, short of the last stable offset: read up to %v (%v), want t0", d, at.Sub(t0), ok)
		}
	}
	if at, ok := m.readAt(t0.Add(2*time.Second + stall)); !ok || !at.Equal(t0.Add(time.Second)) {
		t.Fatalf("probed: read up to %v (%v), want t0+1s, the last listing before the open transaction began", at.Sub(t0), ok)
	}
	if err := b.EndTransaction(m.ctx, kgo.TryCommit); err != nil {
		t.Fatal(err) // its marker at 4
	}
	if empty, err := m.e.probe(m.ctx, m.tp, 1, 5); err != nil || empty {
		t.Fatalf("probe past the committed transaction: empty %v (%v), want not", empty, err)
	}
	if data := m.poll(5); data != 1 {
		t.Fatalf("polled %d records not markers, want 1", data)
	}
	// Records deleted beneath a position: nothing readable when the log
	// start is the last stable offset, readable when records follow it.
	m.write(m.prod) // offset 5
	if _, err := kadm.NewClient(m.prod).DeleteRecords(m.ctx, kadm.Offsets{m.tp.topic: {m.tp.partition: {At: 6}}}); err != nil {
		t.Fatal(err)
	}
	if empty, err := m.e.probe(m.ctx, m.tp, 5, 6); err != nil || !empty {
		t.Fatalf("probe beneath the log start, at the end: empty %v (%v), want empty", empty, err)
	}
	m.write(m.prod) // offset 6
	if empty, err := m.e.probe(m.ctx, m.tp, 5, 7); err != nil || empty {
		t.Fatalf("probe beneath the log start, a record after it: empty %v (%v), want not", empty, err)
	}
}

// On a broker: a fetch from an offset past which no batch is left before
// the last stable offset (the records at a compacted partition's tail
// removed, which the consumer's position then stays short of for good)
// finds nothing readable there, and the probe says so rather than that
// there is something to read, which would hold the partition, and with it
// every window, until another record is written to it. A broker whose
// last stable offset is below the one listed cannot tell: an error, to
// probe again after another stall.
func TestProbeFindsNothingReadableWhereNoBatchIsLeftBeforeTheEnd(t *testing.T) {
	c, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(4, predTopic, outTopic))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	cl, err := kgo.NewClient(kgo.SeedBrokers(c.ListenAddrs()...), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	tp := topicPartition{outTopic, 1}
	for range 2 {
		if err := cl.ProduceSync(ctx, &kgo.Record{Topic: tp.topic, Partition: tp.partition, Value: []byte("o")}).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	e := &evaluator{aux: cl, log: slog.Default()}
	// noBatch answers the next fetch with no batch of the partition,
	// its last stable offset lso.
	noBatch := func(lso int64) {
		c.ControlKey(int16(kmsg.Fetch), func(kreq kmsg.Request) (kmsg.Response, error, bool) {
			req := kreq.(*kmsg.FetchRequest)
			resp := req.ResponseKind().(*kmsg.FetchResponse)
			for _, rt := range req.Topics {
				st := kmsg.NewFetchResponseTopic()
				st.Topic, st.TopicID = rt.Topic, rt.TopicID
				for _, rp := range rt.Partitions {
					sp := kmsg.NewFetchResponseTopicPartition()
					sp.Partition, sp.HighWatermark, sp.LastStableOffset, sp.LogStartOffset = rp.Partition, lso, lso, 0
					st.Partitions = append(st.Partitions, sp)
				}
				resp.Topics = append(resp.Topics, st)
			}
			return resp, nil, true
		})
	}
	noBatch(2)
	if empty, err := e.probe(ctx, tp, 0, 2); err != nil || !empty {
		t.Fatalf("no batch before the last stable offset: empty %v (%v), want empty", empty, err)
	}
	noBatch(1)
	if empty, err := e.probe(ctx, tp, 0, 2); err == nil || empty {
		t.Fatalf("no batch, the last stable offset below the one listed: empty %v (%v), want an error", empty, err)
	}
	if empty, err := e.probe(ctx, tp, 0, 2); err != nil || empty {
		t.Fatalf("the records there: empty %v (%v), want not", empty, err)
	}
}

// A partition whose position is at its last stable offset while a
// transaction is open on it (its high watermark past that), read only up
// to a listing more than a minute old, is reported as held back by the
// open transaction, so that the evaluator can say why results wait; one
// with records still to read, one at its high watermark, and one held
// for less than the minute are not. Without a position, a partition is
// at its log start; one short of its end where a probe found nothing to
// read (aborted records before the open transaction) is held too.
func TestHeldOpenFindsThePartitionsAnOpenTransactionHoldsBack(t *testing.T) {
	at := time.Unix(1_000_000, 0)
	tp := func(p int32) topicPartition { return topicPartition{outTopic, p} }
	ends := []partitionEnd{
		{tp: tp(0), pos: 10, end: 10, hwm: 14},            // held two minutes
		{tp: tp(1), pos: 10, end: 10, hwm: 10},            // at its end
		{tp: tp(2), pos: 8, end: 10, hwm: 14},             // records still to read
		{tp: tp(3), pos: 10, end: 10, hwm: 12},            // held 30 s
		{tp: tp(4), pos: -1, end: 10, hwm: 12},            // no position, records to read
		{tp: tp(5), pos: 10, end: 10, hwm: 12},            // not read at all
		{tp: tp(6), pos: -1, start: 10, end: 10, hwm: 11}, // no position, held five minutes
		{tp: tp(7), pos: 8, end: 10, hwm: 12},             // aborted records before it, probed: held
		{tp: tp(8), pos: 8, end: 10, hwm: 12}}             // short, probed from elsewhere: records to read
	listed := map[topicPartition]*partitionListings{tp(7): {from: 8, end: 10, probed: true, empty: true},
		tp(8): {from: 7, end: 10, probed: true, empty: true}}
	read := map[topicPartition]time.Time{tp(0): at.Add(-2 * time.Minute), tp(1): at, tp(2): at.Add(-time.Hour),
		tp(3): at.Add(-30 * time.Second), tp(4): at.Add(-time.Hour), tp(6): at.Add(-5 * time.Minute),
		tp(7): at.Add(-3 * time.Minute), tp(8): at.Add(-3 * time.Minute)}
	got := heldOpen(ends, listed, read, at, time.Minute)
	want := []heldPartition{{tp: tp(0), end: 10, hwm: 14, heldFor: 2 * time.Minute}, {tp: tp(6), end: 10, hwm: 11, heldFor: 5 * time.Minute},
		{tp: tp(7), end: 10, hwm: 12, heldFor: 3 * time.Minute}}
	if !slices.Equal(got, want) {
		t.Errorf("held %+v, want %+v", got, want)
	}
}
