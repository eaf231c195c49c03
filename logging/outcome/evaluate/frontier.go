package evaluate

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"slices"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// frontierHeader marks a record of GROUP-repartition that holds a member's
// frontier instead of an outcome (package doc, The frontier).
const frontierHeader = "grove-frontier"

// frontierVersion is the first byte of a frontier record's value.
const frontierVersion = 1

// appendFrontier appends the binary form of reach (outcome partition →
// Unix nanoseconds up to which it has been read) to b, in partition order.
func appendFrontier(b []byte, reach map[int32]int64) []byte {
	b = append(b, frontierVersion)
	for _, q := range slices.Sorted(mapKeys(reach)) {
		b = binary.AppendUvarint(b, uint64(q))
		b = binary.AppendVarint(b, reach[q])
	}
	return b
}

// errFrontier is a frontier record that does not decode.
var errFrontier = errors.New("frontier record")

// readFrontier calls fn for each outcome partition and time of a
// frontier record's value.
func readFrontier(v []byte, fn func(q int32, t int64)) error {
	if len(v) == 0 || v[0] != frontierVersion {
		return fmt.Errorf("%w: not version %d", errFrontier, frontierVersion)
	}
	v = v[1:]
	for len(v) > 0 {
		q, n := binary.Uvarint(v)
		if n <= 0 || q > math.MaxInt32 {
			return fmt.Errorf("%w: bad partition", errFrontier)
		}
		v = v[n:]
		t, n := binary.Varint(v)
		if n <= 0 {
			return fmt.Errorf("%w: bad time", errFrontier)
		}
		v = v[n:]
		fn(int32(q), t)
	}
	return nil
}

// isFrontier reports whether r is a frontier record.
func isFrontier(r *kgo.Record) bool {
	for _, h := range r.Headers {
		if h.Key == frontierHeader {
			return true
		}
	}
	return false
}

// fetchReach is how far a fetch of one partition has read it (Unix
// nanoseconds; math.MinInt64: not at all): to its newest record
// timestamp, a transaction's marker aside. Not to the clock, even when
// the fetch reached the partition's last stable offset: the client may
// hold a fetch through a flush and a commit before it is taken, and
// records written since the broker answered it are still to read. How
// far a partition read to its end has been read is the listing's
// business (readEnds), at every commit.
func fetchReach(ftp kgo.FetchTopicPartition) int64 {
	t := int64(math.MinInt64)
	for _, r := range ftp.Records {
		if isData(r) {
			t = max(t, r.Timestamp.UnixNano())
		}
	}
	return t
}

// readOutcomes notes how far a fetch of an outcome partition has been
// read (fetchReach).
func (e *evaluator) readOutcomes(ftp kgo.FetchTopicPartition) {
	f := fetchReach(ftp)
	if f == math.MinInt64 {
		return
	}
	t, ok := e.reach[ftp.Partition]
	if !ok {
		t = math.MinInt64
	}
	e.reach[ftp.Partition] = max(t, f)
}

// frontierRecords are this member's frontier records for the cycle that
// ends, one per partition of GROUP-repartition, after the outcomes it
// forwarded: the outcome partitions it owns and how far it has read each
// (readOutcomes, readTo). None when it owns no outcome partition or
// knows nothing of one yet.
func (e *evaluator) frontierRecords() []*kgo.Record {
	owned := e.ownedOutcomes()
	for q := range e.reach {
		if !slices.Contains(owned, q) {
			delete(e.reach, q)
		}
	}
	known := map[int32]int64{}
	for _, q := range owned {
		if t, ok := e.reach[q]; ok {
			known[q] = t
		}
	}
	if len(known) == 0 {
		return nil
	}
	v := appendFrontier(nil, known)
	out := make([]*kgo.Record, e.n)
	for p := range e.n {
		out[p] = &kgo.Record{Topic: e.repartition, Partition: p, Value: v, Headers: []kgo.RecordHeader{{Key: frontierHeader}}}
	}
	return out
}

// takeFrontier applies a frontier record read from partition p of
// GROUP-repartition: every outcome the member forwarded from the
// partitions it names, up to their times, is before it in p.
func (e *evaluator) takeFrontier(p *partition, v []byte) error {
	if err := readFrontier(v, func(q int32, t int64) {
		if old, ok := p.frontier[q]; !ok || t > old {
			p.frontier[q] = t
		}
	}); err != nil {
		return err
	}
	return e.bound(p)
}

// readPredictions notes that p's prediction-log partition has been read
// up to t (Unix nanoseconds), and bounds its joiner anew once that has
// moved on by boundStep since it last did (or when force).
func (e *evaluator) readPredictions(p *partition, t int64, force bool) error {
	p.predReach = max(p.predReach, t)
	if !force && p.boundAt != math.MinInt64 && p.predReach-p.boundAt < int64(boundStep) {
		return nil
	}
	return e.bound(p)
}

// boundStep is how far a partition's prediction reach moves on before
// its joiner is bounded anew within a fetch.
const boundStep = 100 * time.Millisecond

// bound bounds p's joiner by the least of the time up to which its
// prediction-log partition has been read and the times up to which every
// outcome partition has been read into it (once each is heard of):
// neither topic read ahead of the other closes a window before what fell
// in it from the other has come.
func (e *evaluator) bound(p *partition) error {
	f := p.predReach
	for q := range e.outN {
		t, ok := p.frontier[q]
		if !ok {
			f = math.MinInt64
			break
		}
		f = min(f, t)
	}
	p.boundAt = p.predReach
	if f == math.MinInt64 {
		return p.j.Bound(time.Time{})
	}
	return p.j.Bound(time.Unix(0, f))
}

// readEnds lists the offsets of the partitions this member owns of the
// prediction log and the outcome topic, and returns, for each of those
// it has read far enough, the clock time up to which it has read it
// (readToEnd): every record written to it before that time has been
// read. When the listing fails, it finds none.
func (e *evaluator) readEnds(ctx context.Context, cl *kgo.Client) map[topicPartition]time.Time {
	at := e.cfg.Now()
	ends, err := e.listEnds(ctx, cl)
	if err != nil {
		e.log.Debug("evaluator: the end offsets of its partitions", "err", err)
		return nil
	}
	probe := func(tp topicPartition, from, end int64) (bool, error) {
		empty, err := e.probe(ctx, tp, from, end)
		if err != nil {
			e.log.Debug("evaluator: probing a partition short of its last stable offset", "err", err)
		}
		return empty, err
	}
	read := readToEnd(e.listed, ends, at, max(probeAfter, 10*e.cfg.CommitInterval), probe)
	if held := heldOpen(ends, e.listed, read, at, heldWarnAfter); len(held) > 0 && at.Sub(e.heldWarned) >= heldWarnAfter {
		e.heldWarned = at
		for _, h := range held {
			e.log.Warn("evaluator: a transaction left open holds results back; they wait until it commits or the broker aborts it",
				"topic", h.tp.topic, "partition", h.tp.partition, "last_stable_offset", h.end, "high_watermark", h.hwm, "held_for", h.heldFor)
		}
	}
	return read
}

// heldWarnAfter is how long a partition may be held back by an open
// transaction before readEnds warns of it (once a heldWarnAfter at most).
const heldWarnAfter = time.Minute

// heldPartition is a partition an open transaction holds back (heldOpen).
type heldPartition struct {
	tp       topicPartition
	end, hwm int64
	heldFor  time.Duration
}

// heldOpen returns the partitions of ends whose position is at their last
// stable offset (or short of it with nothing to read, as a probe found:
// listed) while a transaction is open on them (their high watermark past
// it) and that read finds read up to a time more than after before at:
// results wait for them, and nothing else says why. A partition with
// records still to read is not held by a transaction.
func heldOpen(ends []partitionEnd, listed map[topicPartition]*partitionListings, read map[topicPartition]time.Time,
	at time.Time, after time.Duration) []heldPartition {
	var held []heldPartition
	for _, pe := range ends {
		t, ok := read[pe.tp]
		if !ok || listed[pe.tp].readOffset(pe) < pe.end || pe.hwm <= pe.end || at.Sub(t) <= after {
			continue
		}
		held = append(held, heldPartition{tp: pe.tp, end: pe.end, hwm: pe.hwm, heldFor: at.Sub(t)})
	}
	return held
}

// readTo notes that the partitions in read were read up to their times:
// an outcome partition's reach moves on to it, so that one that receives
// nothing (no clicks yet) holds no watermark back. It returns the
// prediction-log partitions among them, for flush.
func (e *evaluator) readTo(read map[topicPartition]time.Time) map[int32]time.Time {
	preds := map[int32]time.Time{}
	for tp, at := range read {
		switch tp.topic {
		case e.cfg.PredictionTopic:
			preds[tp.partition] = at
		case e.cfg.OutcomeTopic:
			t, ok := e.reach[tp.partition]
			if !ok {
				t = math.MinInt64
			}
			e.reach[tp.partition] = max(t, at.UnixNano())
		}
	}
	return preds
}

// partitionEnd is an owned partition of the prediction log or the
// outcome topic as one listing found it: the member's position in it
// (the offset after the last record polled, or the group's committed
// offset; -1: neither), its last stable offset (end: a read_committed
// consumer reads no further), its high watermark (hwm: the offset after
// the last record written, past end while a transaction is open on the
// partition), and its log start offset (listed only when there is no
// position and the end is past 0).
type partitionEnd struct {
	tp                   topicPartition
	pos, end, hwm, start int64
}

// listEnds lists the partitionEnd of every partition this member owns of
// the prediction log and the outcome topic; a partition whose offsets the
// broker does not tell is left out.
func (e *evaluator) listEnds(ctx context.Context, cl *kgo.Client) ([]partitionEnd, error) {
	owned := map[string][]int32{e.cfg.PredictionTopic: e.owned(), e.cfg.OutcomeTopic: e.ownedOutcomes()}
	var topics []string
	for t, ps := range owned {
		if len(ps) > 0 {
			topics = append(topics, t)
		}
	}
	if len(topics) == 0 {
		return nil, nil
	}
	adm := kadm.NewClient(e.aux)
	// The last stable offsets first: a high watermark listed after one
	// is at least as far.
	ends, err := adm.ListCommittedOffsets(ctx, topics...)
	if err != nil {
		return nil, fmt.Errorf("listing the last stable offsets of %v: %w", topics, err)
	}
	hwms, err := adm.ListEndOffsets(ctx, topics...)
	if err != nil {
		return nil, fmt.Errorf("listing the high watermarks of %v: %w", topics, err)
	}
	committed, heads := cl.CommittedOffsets(), cl.UncommittedOffsets()
	var out []partitionEnd
	starts := false
	for _, t := range topics {
		for _, p := range owned[t] {
			end, ok := ends.Lookup(t, p)
			if !ok || end.Err != nil {
				continue
			}
			hwm, ok := hwms.Lookup(t, p)
			if !ok || hwm.Err != nil {
				continue
			}
			pos := int64(-1)
			if o, ok := committed[t][p]; ok {
				pos = o.Offset
			}
			if o, ok := heads[t][p]; ok {
				pos = max(pos, o.Offset)
			}
			starts = starts || pos < 0 && end.Offset > 0
			out = append(out, partitionEnd{tp: topicPartition{t, p}, pos: pos, end: end.Offset, hwm: max(hwm.Offset, end.Offset)})
		}
	}
	if !starts {
		return out, nil
	}
	listed, err := adm.ListStartOffsets(ctx, topics...)
	if err != nil {
		return nil, fmt.Errorf("listing the start offsets of %v: %w", topics, err)
	}
	for i := range out {
		if o := &out[i]; o.pos < 0 {
			if s, ok := listed.Lookup(o.tp.topic, o.tp.partition); ok && s.Err == nil {
				o.start = s.Offset
			}
		}
	}
	return out, nil
}

// readToEnd returns, for each partition of ends that has been read far
// enough, the clock time up to which it has: that of the last listing
// (now among them) whose high watermark is at most the offset it has
// been read to. Everything written before a listing is below the high
// watermark it found, so a partition read to its high watermark is read
// up to now, whether it got records or not, and one whose position is at
// its last stable offset while a transaction is open on it (its high
// watermark past that) only up to the last listing before that
// transaction's first record: records written after that one, with a
// transaction or without, cannot be read before it ends.
//
// The offset a partition has been read to is its position (passing the
// transactions' markers, readOpts), or its log start when it has none;
// or its last stable offset when a probe, a fetch of its own from that
// offset, found nothing readable before it: an aborted transaction's
// records before another transaction still open, which holds the last
// stable offset, records deleted beneath the position, or records
// removed at a compacted partition's tail. Nothing but
// such a fetch tells those from records the consumer has not fetched
// yet (its fetches slow, the evaluator starved of CPU): a partition is
// probed once its offset and last stable offset have not moved for
// stall, and again only after they move and stall again (or, when the
// probe failed, after another stall; after probeTries failures in a row
// on answers it cannot use, errProbeUnusable, the stall alone settles it,
// as it did before probes).
//
// listed keeps what readToEnd learnt of each partition from one call to
// the next; a partition the listing leaves out is forgotten.
func readToEnd(listed map[topicPartition]*partitionListings, ends []partitionEnd, now time.Time, stall time.Duration,
	probe func(tp topicPartition, from, end int64) (empty bool, err error)) map[topicPartition]time.Time {
	read := map[topicPartition]time.Time{}
	seen := map[topicPartition]bool{}
	for _, pe := range ends {
		seen[pe.tp] = true
		l := listed[pe.tp]
		if l == nil {
			l = &partitionListings{}
			listed[pe.tp] = l
		}
		l.mark(now, pe.hwm)
		r := pe.offset()
		// The marks kept are those the offset read needs; what a probe
		// found holds only until that offset or the end moves.
		l.trim(r)
		if r < pe.end {
			switch {
			case l.since.IsZero() || l.from != r || l.end != pe.end:
				l.from, l.end, l.since, l.probed, l.empty, l.failed = r, pe.end, now, false, false, 0
			case !l.probed && now.Sub(l.since) >= stall:
				empty, err := probe(pe.tp, r, pe.end)
				switch {
				case err == nil:
					l.probed, l.empty = true, empty
				case !errors.Is(err, errProbeUnusable):
					// No answer to use (no leader, the broker unreachable
					// or slow): the consumer may be failing to fetch the
					// records waiting just the same, so the stall tells
					// nothing.
					l.since = now // try again after another stall
				case l.failed+1 >= probeTries:
					// The broker keeps answering what the probe cannot use
					// (a broker that cannot serve it, such as one that
					// answers fetches by name only): the stall alone
					// settles it, rather than holding every window for good.
					l.probed, l.empty = true, true
				default:
					l.failed++
					l.since = now // try again after another stall
				}
			}
			r = l.readOffset(pe)
		} else {
			l.since = time.Time{}
		}
		if at, ok := l.readTo(r); ok {
			read[pe.tp] = at
		}
	}
	for tp := range listed {
		if !seen[tp] {
			delete(listed, tp)
		}
	}
	return read
}

// offset is the offset pe's partition has been read to by the
// consumer: its position, or its log start when it has none.
func (pe partitionEnd) offset() int64 {
	if pe.pos < 0 {
		return pe.start
	}
	return pe.pos
}

// readOffset is the offset pe's partition counts as read to (l may be
// nil): pe.offset(), or its last stable offset when a probe found nothing
// readable from there to it.
func (l *partitionListings) readOffset(pe partitionEnd) int64 {
	if r := pe.offset(); l == nil || !l.empty || l.from != r || l.end != pe.end {
		return r
	}
	return pe.end
}

// probeAfter: see readToEnd (the least stall).
const probeAfter = 3 * time.Second

// probeTries is how many probes of one stall may fail on answers they
// cannot use before the stall alone settles the partition (see readToEnd).
const probeTries = 3

// topicPartition names a partition of a topic.
type topicPartition struct {
	topic     string
	partition int32
}

// partitionListings is what readToEnd keeps of a partition: its high
// watermarks as listed, and how far it has been read while that falls
// short of its last stable offset.
type partitionListings struct {
	// marks are listings' clock times and the high watermarks they
	// found, both rising: the last that the partition has been read
	// past, and those after it (at most maxMarks).
	marks []hwmMark
	// from and end are the offset the partition has been read to and
	// its last stable offset, short of it, and since when both have been
	// so (zero: not short); probed tells that a probe has answered
	// since, and empty that it found nothing readable from from to end.
	from, end     int64
	since         time.Time
	probed, empty bool
	// failed counts the probes of this stall that failed on answers
	// they cannot use (errProbeUnusable).
	failed int
}

// hwmMark is a listing's clock time and the high watermark it found.
type hwmMark struct {
	at  time.Time
	hwm int64
}

// maxMarks bounds a partition's marks: past it, every other one between
// the first and the last is dropped (trim), which only makes later
// answers of readTo earlier than they could be.
const maxMarks = 64

// mark notes a listing at clock time at that found high watermark hwm.
func (l *partitionListings) mark(at time.Time, hwm int64) {
	n := len(l.marks)
	switch {
	case n > 0 && hwm < l.marks[n-1].hwm:
		// The log was cut back (a leader that lost records): what the
		// marks before said no longer holds.
		l.marks = append(l.marks[:0], hwmMark{at, hwm})
	case n > 0 && hwm == l.marks[n-1].hwm:
		l.marks[n-1].at = at
	default:
		l.marks = append(l.marks, hwmMark{at, hwm})
	}
}

// readTo returns the clock time of the last mark whose high watermark
// is at most offset r, up to which a partition read to r has been read.
func (l *partitionListings) readTo(r int64) (time.Time, bool) {
	if i := l.last(r); i >= 0 {
		return l.marks[i].at, true
	}
	return time.Time{}, false
}

// trim drops the marks before the last one whose high watermark is at
// most offset r, which a partition read to r needs none of, and thins
// the rest to maxMarks.
func (l *partitionListings) trim(r int64) {
	if i := l.last(r); i > 0 {
		l.marks = l.marks[i:]
	}
	if len(l.marks) > maxMarks {
		kept := l.marks[:1]
		for i := 2; i < len(l.marks)-1; i += 2 {
			kept = append(kept, l.marks[i])
		}
		l.marks = append(kept, l.marks[len(l.marks)-1])
	}
}

// last is the index of the last mark whose high watermark is at most r
// (-1: none).
func (l *partitionListings) last(r int64) int {
	i := len(l.marks) - 1
	for i >= 0 && l.marks[i].hwm > r {
		i--
	}
	return i
}

// probeBytes bounds what one fetch of a probe asks for, and probeFetches
// how many fetches a probe makes before it gives up finding the end.
const (
	probeBytes   = 1 << 20
	probeFetches = 4
)

// probe fetches partition tp from offset from as the evaluator's
// consumer does (readOpts), and reports whether it holds no record that
// consumer would read before offset end: aborted transactions' records
// only, records deleted since, or no batch left before the broker's
// last stable offset (compacted away). A probe that cannot tell (the
// records to pass are more than probeFetches fetches) reports false.
func (e *evaluator) probe(ctx context.Context, tp topicPartition, from, end int64) (bool, error) {
	empty, err := e.probeFrom(ctx, tp, from, end)
	if err != nil {
		return false, fmt.Errorf("probing %s/%d from offset %d: %w", tp.topic, tp.partition, from, err)
	}
	return empty, nil
}

// errProbeUnusable is a probe's failure on an answer of the broker's that
// it cannot use, which asking again will not change (a broker that cannot
// serve the probe): readToEnd counts those, not failures for want of an
// answer (no leader, the broker unreachable or slow, a retriable error),
// during which the consumer's own fetches may be failing too.
var errProbeUnusable = errors.New("an answer the probe cannot use")

// unusable marks a broker's error code as errProbeUnusable unless it is
// retriable; a topic ID the broker does not know is not retried (a
// broker that answers fetches by topic name only).
func unusable(err error) error {
	if kerr.IsRetriable(err) && !errors.Is(err, kerr.UnknownTopicID) && !errors.Is(err, kerr.InconsistentTopicID) {
		return err
	}
	return fmt.Errorf("%w: %w", errProbeUnusable, err)
}

// probeFrom is probe, its errors not yet naming the partition.
func (e *evaluator) probeFrom(ctx context.Context, tp topicPartition, from, end int64) (bool, error) {
	adm := kadm.NewClient(e.aux)
	tds, err := adm.ListTopics(ctx, tp.topic)
	if err != nil {
		return false, err
	}
	td, ok := tds[tp.topic]
	switch {
	case !ok:
		return false, errors.New("the topic is not in the metadata")
	case td.Err != nil:
		return false, td.Err
	}
	pd, ok := td.Partitions[tp.partition]
	switch {
	case !ok:
		return false, errors.New("the partition is not in the metadata")
	case pd.Err != nil:
		return false, pd.Err
	case pd.Leader < 0:
		return false, errors.New("the partition has no leader")
	}
	for range probeFetches {
		if from >= end {
			return true, nil
		}
		req := kmsg.NewPtrFetchRequest()
		req.MaxBytes, req.IsolationLevel = probeBytes, 1
		rt := kmsg.NewFetchRequestTopic()
		rt.Topic, rt.TopicID = tp.topic, td.ID
		rp := kmsg.NewFetchRequestTopicPartition()
		rp.Partition, rp.FetchOffset, rp.PartitionMaxBytes = tp.partition, from, probeBytes
		rt.Partitions = append(rt.Partitions, rp)
		req.Topics = append(req.Topics, rt)
		resp, err := req.RequestWith(ctx, e.aux.Broker(int(pd.Leader)))
		if err != nil {
			return false, err
		}
		if err := kerr.ErrorForCode(resp.ErrorCode); err != nil {
			return false, unusable(err)
		}
		var got *kmsg.FetchResponseTopicPartition
		for i := range resp.Topics {
			for j := range resp.Topics[i].Partitions {
				if p := &resp.Topics[i].Partitions[j]; p.Partition == tp.partition {
					got = p
				}
			}
		}
		switch {
		case got == nil && resp.ThrottleMillis > 0:
			return false, fmt.Errorf("the fetch throttled for %d ms", resp.ThrottleMillis)
		case got == nil:
			return false, fmt.Errorf("%w: the partition is not in the fetch response", errProbeUnusable)
		}
		if err := kerr.ErrorForCode(got.ErrorCode); errors.Is(err, kerr.OffsetOutOfRange) {
			// Records deleted beneath from: go on from the log start.
			starts, err := adm.ListStartOffsets(ctx, tp.topic)
			if err != nil {
				return false, err
			}
			s, ok := starts.Lookup(tp.topic, tp.partition)
			if !ok || s.Err != nil || s.Offset <= from {
				return false, fmt.Errorf("offset %d out of range, and the log start not past it", from)
			}
			from = s.Offset
			continue
		} else if err != nil {
			return false, unusable(err)
		}
		fp, next := kgo.ProcessFetchPartition(kgo.ProcessFetchPartitionOpts{KeepControlRecords: true, Offset: from,
			IsolationLevel: kgo.ReadCommitted(), Topic: tp.topic, Partition: tp.partition}, got, kgo.DefaultDecompressor(), nil)
		switch {
		case fp.Err != nil:
			return false, fmt.Errorf("%w: %w", errProbeUnusable, fp.Err)
		case len(fp.Records) > 0:
			return false, nil
		case next <= from && len(got.RecordBatches) == 0 && got.LastStableOffset >= end:
			// No batch left from from up to the broker's last stable
			// offset (records removed at a compacted partition's tail):
			// the consumer's position stays at from with nothing to read.
			return true, nil
		case next <= from:
			return false, fmt.Errorf("no batch read up to the last stable offset %d, %d listed", got.LastStableOffset, end)
		}
		from = next
	}
	return from >= end, nil
}
