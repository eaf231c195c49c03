// Package evaluate is the evaluator (grove evaluate, or grove serve
// --evaluate): a member of a Kafka consumer group that joins the outcomes
// callers report to the predictions Grove logged, one join.Joiner per
// prediction-log partition, and writes what it learns to the evaluations
// topic (package evaluations).
//
// # Co-partitioning
//
// The group consumes three topics: the prediction log, the outcome topic
// and GROUP-repartition, which has as many partitions as the prediction
// log. Outcomes are not joined where they arrive: each is written to the
// partition of GROUP-repartition that its join key (request_id, or key
// when it has none) hashes to with Kafka's default partitioner (murmur2),
// the partition Grove's producer wrote the predictions logged under that
// key to. So the outcome producers may partition as they like. The group
// uses the range assignor, which gives a member the same partition
// numbers of the prediction log and of GROUP-repartition.
//
// # The frontier
//
// Outcomes reach a joiner a commit after the predictions read beside
// them, and an evaluator behind the stream (started late, or restarted
// after longer than the lateness) reads its two topics at different
// paces: a backlog of predictions faster than its outcomes come back
// through GROUP-repartition, or the smaller outcome topic ahead of the
// predictions. So that neither counts late for that, each member ends
// every transaction with a frontier record in each partition of
// GROUP-repartition, after the outcomes it forwarded there: for each
// outcome partition it owns, the time up to which it has read it (the
// newest record timestamp taken, or the time a listing found it read
// up to, below). A joiner's watermark stays at most the
// least of those frontiers and of the time up to which its own
// prediction-log partition has been read, less the lateness
// (join.Joiner.Bound); it waits until it has heard of every outcome
// partition. The lateness then covers only how late producers write
// outcomes, not how the evaluator reads them. At the end of every
// transaction the member lists the last stable offsets and the high
// watermarks of the partitions it owns of the prediction log and the
// outcome topic; whatever was written to a partition before a listing
// is below the high watermark it found. So a partition whose position
// has reached its high watermark (which it does after a transactional
// producer's records too, as it reads the transactions' markers) has
// been read up to the clock at the listing, whether it got records or
// not, so that a partition that receives nothing (no clicks yet) holds
// back no window, as Flink's idle sources and Kafka Streams' idle
// partitions do. One whose position is at its last stable offset while
// a transaction is open on it has been read only up to the last listing
// before that transaction's first record: what was written after that
// record, in a transaction or not, cannot be read (read_committed) until
// it ends, and is not late for its having been open. A position short of
// the last stable offset counts as at it only once a fetch of the
// member's own from there, made after it has not moved for a while,
// found nothing the consumer would read (an aborted transaction's
// records before one still open, records deleted beneath the position
// or removed at a compacted partition's tail); never for having stayed put alone: a consumer whose fetches are slow
// has not read what waits. A record that comes later to a partition read
// up to a time, with an older time, is late, as one written later than
// the lateness is (join: Late, LatePredictions).
//
// # Exactly once
//
// Each commit interval is one Kafka transaction holding the consumed
// offsets of all three topics, the re-keyed outcomes, the changes to the
// join's state since the last commit with the Joiner's checkpoint
// (GROUP-changelog, a partition per prediction-log partition) and the new
// results (the evaluations topic). A transaction that does not commit (a
// rebalance, a crash, kill -9) leaves none of them: the next owner of a
// partition, this process or another, rebuilds its on-disk store from the
// changelog (read_committed, up to a fence record it writes itself, which
// becomes readable only after every earlier transaction ended) and
// continues from the committed offsets. The totals are then those of one
// uninterrupted evaluator.
//
// # The changelog
//
// A partition's changes of a commit are one record, or a few of at most
// changelogRecordBytes (changelog.go): every store entry written since
// the last commit as it is now (join.TieredStore.Changes), then the
// checkpoint. Applied in order from an empty store, the records rebuild
// it. So that a restore reads a bounded amount, a partition whose
// changelog has grown past twice its last snapshot (and snapshotMinLog)
// starts a snapshot: it writes its whole store as puts, a chunk per commit
// beside the changes (as many bytes, at least snapshotChunk), visiting
// every entry that was there when it began (join.Scan). Once the last
// chunk has committed, the records before the commit the snapshot began
// in are of no more use: from any record on, the changes and a whole
// snapshot begun after it rebuild the store (an entry is last written by
// its chunk, or by a change after it, or, deleted, not at all since the
// snapshot began). The evaluator deletes them itself (DeleteRecords); the
// broker must neither compact the topic (its records share one key) nor
// expire it: cleanup.policy=delete, retention.ms=-1, retention.bytes=-1,
// as the evaluator creates it, and checks at start.
//
// # Who owns what
//
// The run loop's goroutine owns the joiners, their stores and the
// transaction; the group's callbacks only record which partitions were
// assigned, under mu.
package evaluate

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"google.golang.org/protobuf/proto"

	"github.com/groveml/grove/logging/outcome"
	"github.com/groveml/grove/logging/outcome/evaluations"
	"github.com/groveml/grove/logging/outcome/join"
)

// Config configures an evaluator.
type Config struct {
	// Kafka are the client options every client of the evaluator starts
	// from: the seed brokers, TLS and SASL.
	Kafka []kgo.Opt
	// PredictionTopic, OutcomeTopic and EvaluationsTopic are the
	// prediction log, the outcome topic and the results' topic.
	PredictionTopic, OutcomeTopic, EvaluationsTopic string
	// Group is the consumer group; GROUP-repartition and GROUP-changelog
	// are its internal topics.
	Group string
	// Instance tells this evaluator from the others of its group: its
	// transactional id is GROUP-INSTANCE, so a restarted evaluator with
	// the same instance fences its crashed predecessor's transaction at
	// once (another instance waits for it to time out).
	Instance string
	// CommitInterval is how often a transaction commits.
	CommitInterval time.Duration
	// TransactionTimeout is how long the broker waits for a transaction
	// of a crashed evaluator before it aborts it (0: 10 s).
	TransactionTimeout time.Duration
	// StateDir holds one on-disk store per partition this evaluator owns.
	StateDir string
	// Rules returns the outcomes rules of the model config in force, and
	// whether it is known yet (the evaluator takes nothing before); when
	// they change, the joiners are rebuilt with the new ones.
	Rules func() (rules []join.Rule, known bool)
	// ValidSince is join.Options.ValidSince; nil: every prediction counts
	// in since_valid.
	ValidSince func(contract, release string) (time.Time, bool)
	// Now is the clock (nil: time.Now).
	Now func() time.Time
	// Log receives the evaluator's messages (nil: slog.Default).
	Log *slog.Logger

	// snapshotMinLog and snapshotChunk replace the constants of the same
	// names when set (tests).
	snapshotMinLog, snapshotChunk int64
}

// partition is the join of one prediction-log partition.
type partition struct {
	id     int32
	store  *join.PebbleStore
	tiered *join.TieredStore
	j      *join.Joiner
	// published is what the last evaluations records said, so that an
	// unchanged partition writes nothing.
	published []byte
	// logBytes is the size of the changelog partition's values from its
	// start, as far as this owner knows (what restore read, and what it
	// wrote since); snapBytes the size of the last snapshot it completed.
	logBytes, snapBytes int64
	// snap is the snapshot in progress (nil: none).
	snap *snapshot
	// frontier is, per outcome partition, the time up to which its
	// owner has forwarded every outcome, as its frontier records in this
	// partition of GROUP-repartition say (package doc, The frontier).
	frontier map[int32]int64
	// predReach is the time up to which its prediction-log partition has
	// been read (the newest record timestamp, or the time a listing found
	// it read up to, readToEnd; math.MinInt64: not yet), boundAt what
	// predReach was when its joiner was last bounded (math.MinInt64:
	// never).
	predReach, boundAt int64
}

// snapshot is a partition's store written to its changelog a chunk per
// commit, so that the changelog before it can be deleted once it is
// complete: from the start of the commit it began in, the changelog
// rebuilds the store on its own (package doc, The changelog).
type snapshot struct {
	scan *join.Scan
	// start is the offset of the first changelog record of the commit it
	// began in (-1 until the broker has acknowledged it); logBefore the
	// partition's logBytes before that record.
	start     atomic.Int64
	logBefore int64
	// bytes are the keys and values written; done: the last of them was
	// written in this commit.
	bytes int64
	done  bool
}

// The snapshots' pace: a partition starts one when its changelog has
// grown past twice its last snapshot plus snapshotMinLog (so that a
// restore reads a few times the state at most, and the snapshots cost
// half the changes written at most), and writes of it, every commit,
// as many bytes as it writes of changes, and at least snapshotChunk.
const (
	snapshotMinLog = 16 << 20
	snapshotChunk  = 256 << 10
)

// evaluator is one run's state, owned by Run's goroutine but for
// assigned, which the group's callbacks write under mu.
type evaluator struct {
	cfg                    Config
	log                    *slog.Logger
	repartition, changelog string
	n                      int32 // the prediction log's partitions
	outN                   int32 // the outcome topic's (0: unknown)
	hash                   kgo.TopicPartitioner
	parts                  map[int32]*partition
	rules                  []join.Rule
	aux                    *kgo.Client // fences, outside the transactions
	events                 eventDecoder
	outcomes               outcomeDecoder
	bufs                   bufferPool // the changelog records' values
	// reach is, per outcome partition owned, the time up to which this
	// member has read it (readOutcomes, readTo); forgotten when a
	// transaction does not commit (abandon).
	reach map[int32]int64
	// listed is what readToEnd learnt of the partitions it listed.
	listed map[topicPartition]*partitionListings
	// heldWarned is when readEnds last warned of partitions held back by
	// an open transaction (heldOpen).
	heldWarned time.Time

	mu                    sync.Mutex
	assigned, outAssigned map[int32]bool
}

// Run runs the evaluator until ctx ends; it returns nil then, or the
// error that stopped it.
func Run(ctx context.Context, cfg Config) error {
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.Log == nil {
		cfg.Log = slog.Default()
	}
	if cfg.TransactionTimeout <= 0 {
		cfg.TransactionTimeout = 10 * time.Second
	}
	if cfg.Instance == "" {
		return errors.New("evaluate: no instance name")
	}
	if cfg.snapshotMinLog <= 0 {
		cfg.snapshotMinLog = snapshotMinLog
	}
	if cfg.snapshotChunk <= 0 {
		cfg.snapshotChunk = snapshotChunk
	}
	e := &evaluator{cfg: cfg, log: cfg.Log, repartition: cfg.Group + "-repartition", changelog: cfg.Group + "-changelog",
		parts: map[int32]*partition{}, assigned: map[int32]bool{}, outAssigned: map[int32]bool{}, reach: map[int32]int64{},
		listed: map[topicPartition]*partitionListings{}, hash: kgo.StickyKeyPartitioner(nil).ForTopic("")}
	defer e.closeAll()
	aux, err := kgo.NewClient(append(slices.Clone(cfg.Kafka), kgo.RecordPartitioner(kgo.ManualPartitioner()))...)
	if err != nil {
		return fmt.Errorf("evaluate: %w", err)
	}
	defer aux.Close()
	e.aux = aux
	if err := e.topics(ctx); err != nil {
		return err
	}
	sess, err := kgo.NewGroupTransactSession(slices.Concat(cfg.Kafka, readOpts(), []kgo.Opt{
		kgo.ConsumerGroup(cfg.Group),
		kgo.ConsumeTopics(cfg.PredictionTopic, cfg.OutcomeTopic, e.repartition),
		kgo.Balancers(kgo.RangeBalancer()),
		// A broker answers a fetch once it has fetchMinBytes for it or
		// fetchMaxWait has passed, not with the first record: at the
		// prediction log's rates, a fetch per few records cost the
		// evaluator and its broker more than the join itself.
		kgo.FetchMinBytes(fetchMinBytes),
		kgo.FetchMaxWait(fetchMaxWait),
		kgo.RequireStableFetchOffsets(),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.TransactionalID(cfg.Group + "-" + cfg.Instance),
		// Static membership: a restarted evaluator takes its place back
		// at once, without waiting for its predecessor's session to expire.
		kgo.InstanceID(cfg.Instance),
		kgo.TransactionTimeout(cfg.TransactionTimeout),
		kgo.RecordPartitioner(kgo.BasicConsistentPartitioner(e.partitionFor)),
		kgo.OnPartitionsAssigned(func(_ context.Context, _ *kgo.Client, m map[string][]int32) {
			e.setAssigned(m[cfg.PredictionTopic], m[cfg.OutcomeTopic], true)
		}),
		kgo.OnPartitionsRevoked(func(_ context.Context, _ *kgo.Client, m map[string][]int32) {
			e.setAssigned(m[cfg.PredictionTopic], m[cfg.OutcomeTopic], false)
		}),
		kgo.OnPartitionsLost(func(_ context.Context, _ *kgo.Client, m map[string][]int32) {
			e.setAssigned(m[cfg.PredictionTopic], m[cfg.OutcomeTopic], false)
		}),
	})...)
	if err != nil {
		return fmt.Errorf("evaluate: %w", err)
	}
	defer sess.Close()
	e.log.Info("evaluator started", "group", cfg.Group, "instance", cfg.Instance, "partitions", e.n,
		"predictions", cfg.PredictionTopic, "outcomes", cfg.OutcomeTopic, "evaluations", cfg.EvaluationsTopic)
	for ctx.Err() == nil {
		if err := e.cycle(ctx, sess); err != nil {
			if ctx.Err() != nil {
				return nil
			}
			return err
		}
	}
	return nil
}

// readOpts are how the evaluator's group consumer reads: committed
// records only, with the transactions' commit and abort markers. take
// skips the markers; they are kept so that the position after a
// partition's last marker is its end offset (readEnds), which it would
// otherwise stay one short of while a transactional producer writes to
// the partition.
func readOpts() []kgo.Opt {
	return []kgo.Opt{kgo.FetchIsolationLevel(kgo.ReadCommitted()), kgo.KeepControlRecords()}
}

// The evaluator's fetches: a broker holds a fetch until it has
// fetchMinBytes of records for it, or for fetchMaxWait, a small part of
// a commit interval (and of a window's lateness).
const (
	fetchMinBytes = 256 << 10
	fetchMaxWait  = 100 * time.Millisecond
)

// partitionFor is the session's partitioner: the internal topics'
// records carry their partition, the others go by their key's hash.
func (e *evaluator) partitionFor(topic string) func(*kgo.Record, int) int {
	if topic == e.repartition || topic == e.changelog {
		return func(r *kgo.Record, _ int) int { return int(r.Partition) }
	}
	return func(r *kgo.Record, n int) int { return e.hash.Partition(r, n) }
}

// setAssigned records which partitions of the prediction log (ps) and of
// the outcome topic (qs) the group gave us or took back.
func (e *evaluator) setAssigned(ps, qs []int32, on bool) {
	e.mu.Lock()
	defer e.mu.Unlock()
	for _, a := range []struct {
		m   map[int32]bool
		ids []int32
	}{{e.assigned, ps}, {e.outAssigned, qs}} {
		for _, id := range a.ids {
			if on {
				a.m[id] = true
			} else {
				delete(a.m, id)
			}
		}
	}
}

// owned returns the assigned prediction-log partitions, in order.
func (e *evaluator) owned() []int32 { return e.sortedUnderMu(e.assigned) }

// ownedOutcomes returns the assigned outcome partitions, in order.
func (e *evaluator) ownedOutcomes() []int32 { return e.sortedUnderMu(e.outAssigned) }

// sortedUnderMu returns m's keys in order, read under mu.
func (e *evaluator) sortedUnderMu(m map[int32]bool) []int32 {
	e.mu.Lock()
	defer e.mu.Unlock()
	return slices.Sorted(mapKeys(m))
}

// topics waits for the prediction log to exist and creates the internal
// topics (as many partitions as it has) and the evaluations topic when
// they are missing; internal topics of another partition count are an
// error.
func (e *evaluator) topics(ctx context.Context) error {
	adm := kadm.NewClient(e.aux)
	waited := false
	for {
		td, err := adm.ListTopics(ctx, e.cfg.PredictionTopic)
		if err == nil {
			if t, ok := td[e.cfg.PredictionTopic]; ok && t.Err == nil && len(t.Partitions) > 0 {
				e.n = int32(len(t.Partitions))
				break
			}
		}
		if !waited {
			e.log.Info("evaluator waiting for the prediction log topic", "topic", e.cfg.PredictionTopic)
			waited = true
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(time.Second):
		}
	}
	// The outcome topic's partitions, for the frontier; a topic that does
	// not exist yet leaves the joiners unbounded (as one stream).
	if td, err := adm.ListTopics(ctx, e.cfg.OutcomeTopic); err == nil {
		if t, ok := td[e.cfg.OutcomeTopic]; ok && t.Err == nil {
			e.outN = int32(len(t.Partitions))
		}
	}
	never := "-1"
	compact, del := "compact", "delete"
	for _, t := range []struct {
		name       string
		partitions int32
		configs    map[string]*string
	}{
		{e.repartition, e.n, nil},
		{e.changelog, e.n, map[string]*string{"cleanup.policy": &del, "retention.ms": &never, "retention.bytes": &never}},
		{e.cfg.EvaluationsTopic, 1, map[string]*string{"cleanup.policy": &compact, "retention.ms": &never}},
	} {
		resp, err := adm.CreateTopic(ctx, t.partitions, -1, t.configs, t.name)
		if err != nil && !errors.Is(err, kerr.TopicAlreadyExists) && !errors.Is(resp.Err, kerr.TopicAlreadyExists) {
			return fmt.Errorf("evaluate: creating topic %s: %w", t.name, err)
		}
		if t.name == e.cfg.EvaluationsTopic {
			continue
		}
		td, err := adm.ListTopics(ctx, t.name)
		if err != nil {
			return fmt.Errorf("evaluate: describing topic %s: %w", t.name, err)
		}
		if got := int32(len(td[t.name].Partitions)); got != e.n {
			return fmt.Errorf("evaluate: topic %s has %d partitions, the prediction log %s has %d: they must be equal (delete %s and its group's offsets to start over)",
				t.name, got, e.cfg.PredictionTopic, e.n, t.name)
		}
	}
	return e.checkChangelog(ctx, adm)
}

// checkChangelog refuses a changelog topic that the broker compacts or
// expires: its records all have one key, and only the evaluator may
// delete them (truncate). When the broker does not tell the topic's
// configs, it says so and goes on.
func (e *evaluator) checkChangelog(ctx context.Context, adm *kadm.Client) error {
	rcs, err := adm.DescribeTopicConfigs(ctx, e.changelog)
	if err == nil && len(rcs) == 1 {
		err = rcs[0].Err
	}
	if err != nil || len(rcs) != 1 {
		e.log.Warn("evaluator: could not read the changelog topic's configs; it must be cleanup.policy=delete, retention.ms=-1, retention.bytes=-1",
			"topic", e.changelog, "err", err)
		return nil
	}
	want := map[string]string{"cleanup.policy": "delete", "retention.ms": "-1", "retention.bytes": "-1"}
	for _, c := range rcs[0].Configs {
		w, ok := want[c.Key]
		if !ok || c.Value == nil || *c.Value == w {
			continue
		}
		return fmt.Errorf("evaluate: topic %s has %s=%s, want %s: the evaluator deletes its records itself, and the broker must neither compact nor expire them "+
			"(a compacted changelog is of an earlier evaluator's form: delete %s and the group's committed offsets to start over; "+
			"otherwise set the config so)", e.changelog, c.Key, *c.Value, w, e.changelog)
	}
	return nil
}

// cycle is one transaction: restore what the group newly gave us, take
// records for a commit interval, flush the state's changes and the
// results, and commit; when the commit fails, every partition's state is
// dropped, to be rebuilt from the changelog.
func (e *evaluator) cycle(ctx context.Context, sess *kgo.GroupTransactSession) error {
	if err := e.sync(ctx); err != nil {
		return err
	}
	if err := sess.Begin(); err != nil {
		return fmt.Errorf("evaluate: beginning a transaction: %w", err)
	}
	var produceErr error
	var pmu sync.Mutex
	produce := func(r *kgo.Record, acked func(*kgo.Record)) {
		sess.Produce(ctx, r, func(r *kgo.Record, err error) {
			if err != nil {
				pmu.Lock()
				produceErr = errors.Join(produceErr, err)
				pmu.Unlock()
				return
			}
			if acked != nil {
				acked(r)
			}
		})
	}
	deadline := time.Now().Add(e.cfg.CommitInterval)
	var failed error
	for failed == nil {
		left := time.Until(deadline)
		if left <= 0 {
			break
		}
		pctx, cancel := context.WithTimeout(ctx, left)
		fs := sess.PollRecords(pctx, 5000)
		cancel()
		if fs.IsClientClosed() || ctx.Err() != nil {
			return ctx.Err()
		}
		fs.EachError(func(topic string, p int32, err error) {
			if !errors.Is(err, context.DeadlineExceeded) && !errors.Is(err, context.Canceled) {
				e.log.Warn("evaluator fetch", "topic", topic, "partition", p, "err", err)
			}
		})
		fs.EachPartition(func(ftp kgo.FetchTopicPartition) {
			if failed == nil {
				failed = e.take(ftp, produce)
			}
		})
	}
	// The partitions read to their end move on with the clock, each on its
	// own (one that gets no records holds back no other); one with records
	// still to read, or held back by a transaction still open, only up to
	// the last listing it has been read past (an evaluator catching up
	// after a restart must not close windows by the clock before it has
	// read what fell in them, and a poll that finds nothing, as the first
	// ones after it joins do, does not tell that it has).
	var readAt map[int32]time.Time
	if failed == nil {
		readAt = e.readTo(e.readEnds(ctx, sess.Client()))
	}
	if failed == nil {
		failed = e.flush(produce, readAt)
	}
	if failed == nil {
		for _, r := range e.frontierRecords() {
			produce(r, nil)
		}
	}
	pmu.Lock()
	if failed == nil && produceErr != nil {
		failed = produceErr
	}
	pmu.Unlock()
	try := kgo.TryCommit
	switch {
	case errors.Is(failed, errNotHeld):
		// A partition assigned during this cycle: abort, restore it, and
		// take its records again.
		try = kgo.TryAbort
	case failed != nil:
		try = kgo.TryAbort
		e.log.Warn("evaluator aborting its transaction", "err", failed)
	}
	committed, err := sess.End(ctx, try)
	if err != nil {
		return fmt.Errorf("evaluate: ending a transaction: %w", err)
	}
	// Every record of the transaction is written or failed now.
	e.bufs.reclaim()
	if committed {
		e.truncate(ctx)
		return nil
	}
	e.abandon()
	return nil
}

// abandon drops what a transaction that did not commit built on its
// reads: every partition's state, to be rebuilt from the changelog, and
// how far the outcome partitions have been read. The consumer goes back
// to the committed offsets and forwards their outcomes again; a reach
// kept from the aborted reads would let the next frontier records claim
// outcomes not forwarded yet, and a joiner count them late.
func (e *evaluator) abandon() {
	e.closeAll()
	clear(e.reach)
}

// sync makes the partitions held those assigned, under the rules in
// force: it drops the others, and rebuilds the newly assigned ones (all,
// when the rules changed) from the changelog.
func (e *evaluator) sync(ctx context.Context) error {
	rules, known := e.cfg.Rules()
	for !known {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
		rules, known = e.cfg.Rules()
	}
	if !reflect.DeepEqual(rules, e.rules) {
		e.closeAll()
		e.rules = rules
	}
	owned := e.owned()
	for id, p := range e.parts {
		if !slices.Contains(owned, id) {
			p.close()
			delete(e.parts, id)
		}
	}
	if len(e.rules) == 0 {
		return nil
	}
	for _, id := range owned {
		if e.parts[id] != nil {
			continue
		}
		p, err := e.restore(ctx, id)
		if err != nil {
			return err
		}
		e.parts[id] = p
	}
	return nil
}

// restore rebuilds partition id's state from its changelog partition:
// it empties the on-disk store, writes a fence record, and applies every
// committed entry before the fence, the last checkpoint to the joiner.
// The store is rebuilt so on every restore, so it keeps no write-ahead
// log (join.OpenPebbleEphemeral).
func (e *evaluator) restore(ctx context.Context, id int32) (*partition, error) {
	for try := 0; ; try++ {
		p, truncated, err := e.restoreOnce(ctx, id)
		if err != nil || !truncated {
			return p, err
		}
		if try == 2 {
			return nil, fmt.Errorf("evaluate: the changelog of partition %d was truncated during each of 3 restores", id)
		}
		// Another evaluator truncated the changelog while this one read it
		// (its last commit before the partition moved completed a
		// snapshot): read it again, from its new start.
		e.log.Info("evaluator restoring a partition again: its changelog was truncated while read", "partition", id)
	}
}

// restoreOnce is one try of restore; truncated reports that the
// changelog's start moved past the first record read while it read (the
// reader skipped to the new start, or the start is past what it read),
// when the partition must be read again.
func (e *evaluator) restoreOnce(ctx context.Context, id int32) (_ *partition, truncated bool, _ error) {
	dir := filepath.Join(e.cfg.StateDir, strconv.Itoa(int(id)))
	if err := os.RemoveAll(dir); err != nil {
		return nil, false, fmt.Errorf("evaluate: clearing %s: %w", dir, err)
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, false, fmt.Errorf("evaluate: %w", err)
	}
	st, err := join.OpenPebbleEphemeral(dir)
	if err != nil {
		return nil, false, fmt.Errorf("evaluate: %w", err)
	}
	p := &partition{id: id, store: st, tiered: join.NewTieredStore(partitionMemoryBytes, st), frontier: map[int32]int64{},
		predReach: math.MinInt64, boundAt: math.MinInt64}
	ok := false
	defer func() {
		if !ok {
			p.close()
		}
	}()
	nonce := make([]byte, 16)
	_, _ = rand.Read(nonce)
	fence := &kgo.Record{Topic: e.changelog, Partition: id, Key: fenceKey, Value: []byte(hex.EncodeToString(nonce))}
	if err := e.aux.ProduceSync(ctx, fence).FirstErr(); err != nil {
		return nil, false, fmt.Errorf("evaluate: writing the changelog fence of partition %d: %w", id, err)
	}
	rd, err := kgo.NewClient(append(slices.Clone(e.cfg.Kafka),
		kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{e.changelog: {id: kgo.NewOffset().AtStart()}}),
		kgo.FetchIsolationLevel(kgo.ReadCommitted()))...)
	if err != nil {
		return nil, false, fmt.Errorf("evaluate: %w", err)
	}
	defer rd.Close()
	var checkpoint []byte
	first := int64(-1)
	records := 0
	for done := false; !done; {
		fs := rd.PollFetches(ctx)
		if ctx.Err() != nil {
			return nil, false, ctx.Err()
		}
		if err := fs.Err0(); err != nil {
			// (A start that moves past the records to read next is not an
			// error: the reader goes on from the new start, which the
			// check after the loop sees.)
			return nil, false, fmt.Errorf("evaluate: reading the changelog of partition %d: %w", id, err)
		}
		for _, r := range fs.Records() {
			if r.Offset >= fence.Offset {
				done = true
				break
			}
			if first < 0 {
				first = r.Offset
			}
			switch {
			case bytes.Equal(r.Key, fenceKey):
			case bytes.Equal(r.Key, changesKey):
				cp, err := applyChanges(p.tiered, r.Value)
				if err != nil {
					return nil, false, fmt.Errorf("evaluate: changelog of partition %d, offset %d: %w", id, r.Offset, err)
				}
				if cp != nil {
					checkpoint = cp
				}
				p.logBytes += int64(len(r.Value))
				records++
			default:
				return nil, false, fmt.Errorf("evaluate: changelog of partition %d, offset %d: a record of another format (key %q): "+
					"delete topic %s and the group's committed offsets to start over", id, r.Offset, r.Key, e.changelog)
			}
		}
	}
	if first >= 0 {
		starts, err := kadm.NewClient(e.aux).ListStartOffsets(ctx, e.changelog)
		if err != nil {
			return nil, false, fmt.Errorf("evaluate: the start of the changelog of partition %d: %w", id, err)
		}
		if o, found := starts.Lookup(e.changelog, id); found && o.Err == nil && o.Offset > first {
			return nil, true, nil
		}
	}
	p.tiered.TrackChanges()
	j, err := join.New(join.Options{Rules: e.rules, Store: p.tiered, ValidSince: e.cfg.ValidSince})
	if err != nil {
		return nil, false, fmt.Errorf("evaluate: %w", err)
	}
	if checkpoint != nil {
		if err := j.Restore(checkpoint); err != nil {
			return nil, false, fmt.Errorf("evaluate: partition %d: %w", id, err)
		}
	}
	// Hold the watermark until the partition's predictions have been read
	// and every outcome partition's frontier is heard of here.
	if err := j.Bound(time.Time{}); err != nil {
		return nil, false, fmt.Errorf("evaluate: partition %d: %w", id, err)
	}
	p.j = j
	ok = true
	e.log.Info("evaluator took a partition", "partition", id, "records", records, "bytes", p.logBytes, "checkpoint", checkpoint != nil)
	return p, false, nil
}

// take feeds one fetched partition's records to its joiner, or re-keys
// outcomes into the repartition topic; it skips the transactions'
// markers (readOpts).
func (e *evaluator) take(ftp kgo.FetchTopicPartition, produce func(*kgo.Record, func(*kgo.Record))) error {
	now := e.cfg.Now()
	switch ftp.Topic {
	case e.cfg.OutcomeTopic:
		e.readOutcomes(ftp)
		for _, r := range ftp.Records {
			if !isData(r) {
				continue
			}
			o, isProto, err := e.outcomes.record(r.Value, r.Headers)
			// A protobuf outcome that has its event time is re-keyed as
			// it came; another one as Validate completed it.
			asIs := false
			if err == nil {
				asIs = isProto && o.EventTime != nil
				err = outcome.Validate(o, r.Timestamp)
			}
			if err != nil {
				e.log.Warn("evaluator skipped an outcome record", "partition", r.Partition, "offset", r.Offset, "err", err)
				continue
			}
			var value []byte
			if asIs {
				value = bytes.Clone(r.Value)
			} else if value, err = proto.Marshal(o); err != nil {
				return err
			}
			key := outcome.Key(o)
			produce(&kgo.Record{Topic: e.repartition, Partition: int32(e.hash.Partition(&kgo.Record{Key: key}, int(e.n))), Key: key, Value: value}, nil)
		}
		return nil
	case e.repartition, e.cfg.PredictionTopic:
	default:
		return nil
	}
	if !slices.ContainsFunc(ftp.Records, isData) {
		return nil
	}
	p := e.parts[ftp.Partition]
	switch {
	case p == nil && len(e.rules) == 0:
		// No rules: the offsets move on, nothing is learnt.
		return nil
	case p == nil:
		return errNotHeld
	}
	for _, r := range ftp.Records {
		if !isData(r) {
			continue
		}
		var err error
		if ftp.Topic == e.repartition && isFrontier(r) {
			if e.outN == 0 {
				continue
			}
			err = e.takeFrontier(p, r.Value)
		} else if ftp.Topic == e.repartition {
			oc, derr := e.outcomes.decode(r.Value)
			if derr != nil {
				e.log.Warn("evaluator skipped a re-keyed outcome", "partition", r.Partition, "offset", r.Offset, "err", derr)
				continue
			}
			err = p.j.AddOutcome(now, oc)
		} else {
			ev, derr := e.events.decode(r.Value, r.Headers)
			if derr != nil {
				e.log.Warn("evaluator skipped a prediction record", "partition", r.Partition, "offset", r.Offset, "err", derr)
				continue
			}
			if err = e.readPredictions(p, r.Timestamp.UnixNano(), false); err == nil {
				err = p.j.AddPrediction(now, join.Prediction{Event: ev, Key: r.Key})
			}
		}
		if err != nil {
			return fmt.Errorf("evaluate: partition %d: %w", ftp.Partition, err)
		}
	}
	if ftp.Topic == e.cfg.PredictionTopic {
		if err := e.readPredictions(p, fetchReach(ftp), true); err != nil {
			return fmt.Errorf("evaluate: partition %d: %w", ftp.Partition, err)
		}
	}
	return nil
}

// isData reports whether r is a record written by a producer, not a
// transaction's marker.
func isData(r *kgo.Record) bool { return !r.Attrs.IsControl() }

// partitionMemoryBytes is how much of a partition's pending state (keys
// and values) a TieredStore keeps in memory before it spills to pebble:
// the windows of a busy contract over minutes stay in memory, days of
// conversions go to disk.
const partitionMemoryBytes = 128 << 20

// errNotHeld fails a cycle that fetched records of a partition whose
// state it has not restored yet.
var errNotHeld = errors.New("records of a partition not restored yet")

// flush advances with the clock every joiner whose prediction-log
// partition the listing found read (readAt: up to when), and writes its
// state's changes, the next chunk of its snapshot, its checkpoint and,
// when they changed, its results.
func (e *evaluator) flush(produce func(*kgo.Record, func(*kgo.Record)), readAt map[int32]time.Time) error {
	now := e.cfg.Now()
	for _, id := range slices.Sorted(mapKeys(e.parts)) {
		p := e.parts[id]
		if at, ok := readAt[id]; ok {
			// Every prediction until at has been read.
			err := e.readPredictions(p, at.UnixNano(), true)
			if err == nil {
				err = p.j.Advance(now)
			}
			if err != nil {
				return fmt.Errorf("evaluate: partition %d: %w", id, err)
			}
		}
		w := &changelogWriter{topic: e.changelog, partition: id, bufs: &e.bufs}
		if err := p.tiered.Changes(w.change); err != nil {
			return fmt.Errorf("evaluate: partition %d: %w", id, err)
		}
		changed := w.size()
		snap, err := p.j.SnapshotForms()
		if err != nil {
			return err
		}
		// Nothing taken and nothing scored: the partition writes no
		// checkpoint (it would differ only by the clock), and nothing at
		// all but a snapshot's next chunk.
		sig := signature(snap)
		var cp []byte
		if changed > 0 || string(sig) != string(p.published) {
			cp = p.j.CheckpointOf(snap)
		}
		began := false
		if p.snap == nil && p.logBytes+changed+int64(len(cp)) > 2*p.snapBytes+e.cfg.snapshotMinLog {
			p.snap = &snapshot{scan: p.tiered.Scan(), logBefore: p.logBytes}
			p.snap.start.Store(-1)
			began = true
			if cp == nil {
				// The commit a snapshot begins in holds a checkpoint, or
				// the truncation at its end would leave none.
				cp = p.j.CheckpointOf(snap)
			}
		}
		if p.snap != nil && !p.snap.done {
			before := w.size()
			done, err := p.snap.scan.Next(int(max(changed+int64(len(cp)), e.cfg.snapshotChunk)), w.put)
			if err != nil {
				return fmt.Errorf("evaluate: partition %d: %w", id, err)
			}
			p.snap.bytes += w.size() - before
			p.snap.done = done
		}
		if cp != nil {
			w.checkpoint(cp)
		}
		for i, r := range w.records() {
			var acked func(*kgo.Record)
			if began && i == 0 {
				s := p.snap
				acked = func(r *kgo.Record) { s.start.Store(r.Offset) }
			}
			produce(r, acked)
		}
		p.logBytes += w.size()
		if string(sig) == string(p.published) {
			continue
		}
		recs, err := evaluations.Records(id, snap, now)
		if err != nil {
			return err
		}
		p.published = sig
		for _, r := range recs {
			r.Topic = e.cfg.EvaluationsTopic
			produce(r, nil)
		}
	}
	return nil
}

// endSnapshot ends p's completed snapshot: it is now the last one, and
// the changelog from start (-1: not known) rebuilds the partition.
func (p *partition) endSnapshot() (start int64) {
	s := p.snap
	p.snap = nil
	p.snapBytes = s.bytes
	p.logBytes -= s.logBefore
	return s.start.Load()
}

// truncate ends the snapshots completed by the transaction just
// committed: the changelog before each one's start is of no more use
// (package doc, The changelog), so it is deleted. A deletion that fails
// is logged: the changelog keeps those records, and restores read them.
func (e *evaluator) truncate(ctx context.Context) {
	for _, id := range slices.Sorted(mapKeys(e.parts)) {
		p := e.parts[id]
		if p.snap == nil || !p.snap.done || ctx.Err() != nil {
			continue
		}
		start := p.endSnapshot()
		if start < 0 {
			e.log.Warn("evaluator: the start of a snapshot of the changelog is not known; its records before it stay", "partition", id)
			continue
		}
		var offsets kadm.Offsets
		offsets.Add(kadm.Offset{Topic: e.changelog, Partition: id, At: start})
		resp, err := kadm.NewClient(e.aux).DeleteRecords(ctx, offsets)
		if err == nil {
			err = resp.Error()
		}
		if err != nil {
			e.log.Warn("evaluator: deleting the changelog before a snapshot; its records stay, and a restore reads them", "partition", id,
				"before", start, "err", err)
		}
	}
}

// signature is what decides whether a snapshot's records are worth
// writing: its counters, watermark and series, not the lag.
func signature(s *join.Snapshot) []byte {
	c := s.Counters
	b := fmt.Appendf(nil, "%d %d %v", s.Watermark.UnixNano(), s.MaxEventTime.UnixNano(), c)
	for _, ss := range s.Series {
		b = append(b, ss.Binary...)
		b = append(b, ss.Numeric...)
		b = append(b, ss.Paired...)
	}
	return b
}

// mapKeys yields m's keys.
func mapKeys[V any](m map[int32]V) func(func(int32) bool) {
	return func(yield func(int32) bool) {
		for k := range m {
			if !yield(k) {
				return
			}
		}
	}
}

// closeAll drops every partition's state.
func (e *evaluator) closeAll() {
	for id, p := range e.parts {
		p.close()
		delete(e.parts, id)
	}
}

// close closes the partition's store.
func (p *partition) close() {
	if p.store != nil {
		_ = p.store.Close()
		p.store = nil
	}
}
