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
	"github.com/twmb/franz-go/pkg/kgo"
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

// readEnds lists the end offsets of the partitions this member owns of
// the prediction log and the outcome topic, and returns the clock time
// before it and the partitions it found read to their end (readToEnd):
// every record written to those before that time has been read. When
// the listing fails, it finds none.
func (e *evaluator) readEnds(ctx context.Context, cl *kgo.Client) (time.Time, map[topicPartition]bool) {
	at := e.cfg.Now()
	ends, err := e.listEnds(ctx, cl)
	if err != nil {
		e.log.Debug("evaluator: the end offsets of its partitions", "err", err)
		return at, nil
	}
	return at, readToEnd(e.short, ends, at, max(shortSettle, 10*e.cfg.CommitInterval))
}

// readTo notes that the partitions read were read to their end at clock
// time at: an outcome partition's reach moves on to at, so that one that
// receives nothing (no clicks yet) holds no watermark back. It returns
// the prediction-log partitions among them, for flush.
func (e *evaluator) readTo(at time.Time, read map[topicPartition]bool) map[int32]time.Time {
	preds := map[int32]time.Time{}
	for tp := range read {
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
// offset; -1: neither), its last stable offset (end), and its log start
// offset (listed only when there is no position and the end is past 0).
type partitionEnd struct {
	tp              topicPartition
	pos, end, start int64
}

// listEnds lists the partitionEnd of every partition this member owns of
// the prediction log and the outcome topic; a partition whose end the
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
	ends, err := adm.ListCommittedOffsets(ctx, topics...)
	if err != nil {
		return nil, fmt.Errorf("listing the end offsets of %v: %w", topics, err)
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
			pos := int64(-1)
			if o, ok := committed[t][p]; ok {
				pos = o.Offset
			}
			if o, ok := heads[t][p]; ok {
				pos = max(pos, o.Offset)
			}
			starts = starts || pos < 0 && end.Offset > 0
			out = append(out, partitionEnd{tp: topicPartition{t, p}, pos: pos, end: end.Offset})
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

// readToEnd returns the partitions of ends that have been read to their
// end, as listed at clock time now: the position is at the end, or there
// is no position and the partition is empty (its start at its end). The
// position passes the transactions' markers (readOpts), so a partition
// whose last record is one is at its end once that is read. A partition
// whose position stays short of its end with nothing to read (an aborted
// transaction's records before another transaction still open, which
// holds the last stable offset; records deleted beneath the position)
// counts as read once the same position and end have been seen for
// settle: long enough that a consumer whose first fetches are slow to
// come back is not taken for one that has read everything. short holds
// the partitions found short, from one call to the next.
func readToEnd(short map[topicPartition]shortRead, ends []partitionEnd, now time.Time, settle time.Duration) map[topicPartition]bool {
	read := map[topicPartition]bool{}
	listed := map[topicPartition]bool{}
	for _, pe := range ends {
		listed[pe.tp] = true
		if pe.pos < 0 || pe.pos >= pe.end {
			delete(short, pe.tp)
			if pe.pos >= 0 || pe.start >= pe.end {
				read[pe.tp] = true
			}
			continue
		}
		seen, ok := short[pe.tp]
		if !ok || seen.pos != pe.pos || seen.end != pe.end {
			short[pe.tp] = shortRead{pos: pe.pos, end: pe.end, since: now}
		} else if now.Sub(seen.since) >= settle {
			read[pe.tp] = true
		}
	}
	for tp := range short {
		if !listed[tp] {
			delete(short, tp)
		}
	}
	return read
}

// shortSettle: see readToEnd.
const shortSettle = 3 * time.Second

// topicPartition names a partition of a topic.
type topicPartition struct {
	topic     string
	partition int32
}

// shortRead is a partition's position short of its end, and since when
// both have been so (readToEnd).
type shortRead struct {
	pos, end int64
	since    time.Time
}
