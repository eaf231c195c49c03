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
// nanoseconds): to its newest record timestamp, and to now when the
// fetch reached the partition's last stable offset. A fetch has records.
func fetchReach(ftp kgo.FetchTopicPartition, now time.Time) int64 {
	t := int64(math.MinInt64)
	for _, r := range ftp.Records {
		t = max(t, r.Timestamp.UnixNano())
	}
	if last := ftp.Records[len(ftp.Records)-1]; last.Offset+1 >= ftp.LastStableOffset {
		t = max(t, now.UnixNano())
	}
	return t
}

// readOutcomes notes how far a fetch of an outcome partition has been
// read (fetchReach).
func (e *evaluator) readOutcomes(ftp kgo.FetchTopicPartition, now time.Time) {
	if len(ftp.Records) == 0 {
		return
	}
	t, ok := e.reach[ftp.Partition]
	if !ok {
		t = math.MinInt64
	}
	e.reach[ftp.Partition] = max(t, fetchReach(ftp, now))
}

// frontierRecords are this member's frontier records for the cycle that
// ends, one per partition of GROUP-repartition, after the outcomes it
// forwarded: the outcome partitions it owns and how far it has read each
// (caughtAt, when not zero, is a time at which it had read all of them).
// None when it owns no outcome partition or knows nothing of one yet.
func (e *evaluator) frontierRecords(caughtAt time.Time) []*kgo.Record {
	owned := e.ownedOutcomes()
	for q := range e.reach {
		if !slices.Contains(owned, q) {
			delete(e.reach, q)
		}
	}
	known := map[int32]int64{}
	for _, q := range owned {
		t, ok := e.reach[q]
		if !caughtAt.IsZero() {
			t, ok = max(t, caughtAt.UnixNano()), true
			e.reach[q] = t
		}
		if ok {
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

// readAll reports whether cl has read every partition this member owns
// of the prediction log and the outcome topic up to its last stable
// offset: its position (the offset after the last record polled, or the
// group's committed offset) is there, or the partition is empty. A
// partition whose position stays short of that offset with nothing to
// read (the commit markers of a transactional producer, aborted records)
// counts as read once the same position and offset have been seen for
// shortSettle (or ten commit intervals, if longer): long enough that a
// consumer whose first fetches are slow to come back is not taken for one
// that has read everything.
func (e *evaluator) readAll(ctx context.Context, cl *kgo.Client) bool {
	owned := map[string][]int32{e.cfg.PredictionTopic: e.owned(), e.cfg.OutcomeTopic: e.ownedOutcomes()}
	var topics []string
	for t, ps := range owned {
		if len(ps) > 0 {
			topics = append(topics, t)
		}
	}
	if len(topics) == 0 {
		return true
	}
	adm := kadm.NewClient(e.aux)
	ends, err := adm.ListCommittedOffsets(ctx, topics...)
	if err != nil {
		e.log.Debug("evaluator: the end offsets of its partitions", "err", err)
		return false
	}
	committed, heads := cl.CommittedOffsets(), cl.UncommittedOffsets()
	var starts kadm.ListedOffsets
	now := e.cfg.Now()
	all := true
	for _, t := range topics {
		for _, p := range owned[t] {
			end, ok := ends.Lookup(t, p)
			if !ok || end.Err != nil {
				return false
			}
			pos := int64(-1)
			if o, ok := committed[t][p]; ok {
				pos = o.Offset
			}
			if o, ok := heads[t][p]; ok {
				pos = max(pos, o.Offset)
			}
			if pos < 0 {
				if starts == nil {
					if starts, err = adm.ListStartOffsets(ctx, topics...); err != nil {
						return false
					}
				}
				if s, ok := starts.Lookup(t, p); !ok || s.Err != nil || s.Offset < end.Offset {
					all = false
				}
				continue
			}
			if pos >= end.Offset {
				delete(e.short, topicPartition{t, p})
				continue
			}
			k := topicPartition{t, p}
			seen, ok := e.short[k]
			if !ok || seen.pos != pos || seen.end != end.Offset {
				e.short[k] = shortRead{pos: pos, end: end.Offset, since: now}
				all = false
			} else if now.Sub(seen.since) < max(shortSettle, 10*e.cfg.CommitInterval) {
				all = false
			}
		}
	}
	return all
}

// shortSettle: see readAll.
const shortSettle = 3 * time.Second

// topicPartition names a partition of a topic.
type topicPartition struct {
	topic     string
	partition int32
}

// shortRead is a partition's position short of its end, and since when
// both have been so (readAll).
type shortRead struct {
	pos, end int64
	since    time.Time
}
