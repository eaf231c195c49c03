package audit

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"path"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/groveml/grove/conf/bucket"
)

// Defaults of Options.
const (
	// DefaultWait is how long Record waits for an entry's object by default.
	DefaultWait = 2 * time.Second
	// DefaultWriteTimeout bounds the writing of one object by default,
	// retries included.
	DefaultWriteTimeout = 30 * time.Second
	// DefaultQueueSize is how many objects may wait to be written by default.
	DefaultQueueSize = 256
	// writers is how many objects are written at once.
	writers = 2
	// writeTries is how many times an object's write is tried.
	writeTries = 3
)

// Options configure a Trail.
type Options struct {
	// Bucket holds the audit objects: they are written if it is a
	// bucket.Writer (else entries are only logged) and listed from it.
	Bucket bucket.Bucket
	// Dir is the object name prefix of the audit objects, see DirOf.
	Dir string
	// Logger receives each entry as a record with the message "audit",
	// at level Info whatever its handler's level, and the trail's own
	// failures. nil means slog.Default().
	Logger *slog.Logger
	// Registerer receives the trail's metrics; nil means none.
	Registerer prometheus.Registerer
	// Replica names this process in entries (host/pid).
	Replica string
	// Now is the clock; nil means time.Now.
	Now func() time.Time
	// Wait bounds how long Record waits for an entry's object to be
	// written before it returns anyway; 0 means DefaultWait.
	Wait time.Duration
	// WriteTimeout bounds the writing of one object, retries included;
	// 0 means DefaultWriteTimeout.
	WriteTimeout time.Duration
	// QueueSize is how many objects may wait to be written; an entry
	// that finds the queue full is logged but its object dropped. 0 means
	// DefaultQueueSize.
	QueueSize int
}

// DirOf returns the prefix of the audit objects beside the model config
// named configPath: "audit/" for "model_config.json", "serving/audit/"
// for "serving/model_config.json".
func DirOf(configPath string) string {
	if d := path.Dir(configPath); d != "." && d != "/" {
		return d + "/audit/"
	}
	return "audit/"
}

// Trail is the Recorder Grove runs: each entry is logged, then written as
// the object Dir + "<time>-<id>.json" by a small pool of writers fed by a
// bounded queue. Record waits for the object at most Wait: the normal
// case answers the caller once its entry is durable in the bucket, and a
// slow or failing bucket delays a management write by Wait at most and
// never fails it. Entries whose objects are dropped (queue full, or the
// trail closed) or fail to be written are counted in
// grove_audit_records_total and stay in the log.
type Trail struct {
	opts    Options
	w       bucket.Writer // nil: log only
	log     *slog.Logger
	token   string // this process's part of the ids
	records *prometheus.CounterVec
	late    prometheus.Counter

	mu     sync.Mutex // guards seq, last, closed and sends on queue
	seq    uint64
	last   time.Time
	closed bool
	queue  chan *job
	stop   context.CancelFunc // cuts the writes in flight
	ctx    context.Context    // of the writes
	done   sync.WaitGroup     // of the writers
}

// job is one object to write; done gets the outcome.
type job struct {
	name string
	data []byte
	done chan error
}

// New starts a Trail; Close stops it.
func New(opts Options) *Trail {
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	if opts.Wait <= 0 {
		opts.Wait = DefaultWait
	}
	if opts.WriteTimeout <= 0 {
		opts.WriteTimeout = DefaultWriteTimeout
	}
	if opts.QueueSize <= 0 {
		opts.QueueSize = DefaultQueueSize
	}
	var token [8]byte
	_, _ = rand.Read(token[:]) // never fails (crypto/rand)
	t := &Trail{opts: opts, log: opts.Logger, token: hex.EncodeToString(token[:]),
		queue: make(chan *job, opts.QueueSize),
		records: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "grove_audit_records_total",
			Help: "Audit trail entries by what became of their bucket object: written, failed (the bucket refused it or timed out) or dropped (queue full, or shutting down; the entry is only in the log).",
		}, []string{"outcome"}),
		late: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "grove_audit_unconfirmed_total",
			Help: "Management writes answered before their audit object was written (the bucket took longer than the wait bound, or the caller left).",
		}),
	}
	for _, o := range []string{"written", "failed", "dropped"} {
		t.records.WithLabelValues(o)
	}
	if opts.Registerer != nil {
		opts.Registerer.MustRegister(t.records, t.late)
	}
	t.w, _ = opts.Bucket.(bucket.Writer)
	t.ctx, t.stop = context.WithCancel(context.Background())
	if t.w != nil {
		for range writers {
			t.done.Add(1)
			go t.writer()
		}
	}
	return t
}

// Record logs e and writes its object, waiting for the write at most the
// Wait bound, or until ctx is done.
func (t *Trail) Record(ctx context.Context, e Entry) {
	t.mu.Lock()
	now := t.opts.Now().UTC()
	if now.Before(t.last) {
		now = t.last // a replica's own keys never go back in time
	}
	t.last = now
	t.seq++
	e.ID = fmt.Sprintf("%s-%06d", t.token, t.seq)
	e.Time, e.Replica = now, t.opts.Replica
	t.mu.Unlock()

	data, err := json.Marshal(e)
	if err == nil && len(data) >= MaxObjectBytes {
		// An object List would refuse to read: the entry keeps who, what
		// and how it ended, and its sections say they were too large.
		e = withoutSections(e, len(data))
		data, err = json.Marshal(e)
	}
	t.logEntry(ctx, e)
	if t.w == nil {
		return
	}
	if err != nil { // an Entry is made of plain values
		t.fail("encoding an audit entry", e, err)
		return
	}
	j := &job{name: t.opts.Dir + Key(e.Time, e.ID), data: append(data, '\n'), done: make(chan error, 1)}
	if !t.enqueue(j) {
		t.records.WithLabelValues("dropped").Inc()
		t.log.Warn("audit object dropped: the audit queue is full or the trail is closed; the entry is only in the log",
			"id", e.ID, "queue_size", t.opts.QueueSize)
		return
	}
	wait := time.NewTimer(t.opts.Wait)
	defer wait.Stop()
	select {
	case <-j.done:
	case <-wait.C:
		t.late.Inc()
	case <-ctx.Done():
		t.late.Inc()
	}
}

// withoutSections returns e with each section of Before and After
// replaced by a note that the entry, size bytes in JSON, was too large
// for its sections to be recorded.
func withoutSections(e Entry, size int) Entry {
	note, _ := json.Marshal(fmt.Sprintf("not recorded: the entry was %d bytes, more than the %d an audit object may have", size, MaxObjectBytes))
	cut := func(m map[string]json.RawMessage) map[string]json.RawMessage {
		if m == nil {
			return nil
		}
		out := make(map[string]json.RawMessage, len(m))
		for k := range m {
			out[k] = note
		}
		return out
	}
	e.Before, e.After = cut(e.Before), cut(e.After)
	return e
}

// enqueue queues j unless the queue is full or the trail closed.
func (t *Trail) enqueue(j *job) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.closed {
		return false
	}
	select {
	case t.queue <- j:
		return true
	default:
		return false
	}
}

// logEntry writes e as one record with the message "audit" at level Info,
// whatever the level the handler is enabled at.
func (t *Trail) logEntry(ctx context.Context, e Entry) {
	r := slog.NewRecord(e.Time, slog.LevelInfo, "audit", 0)
	r.AddAttrs(slog.String("id", e.ID), slog.String("replica", e.Replica), slog.String("who", e.Who), slog.String("auth", e.Auth))
	for _, a := range []struct{ k, v string }{{"remote", e.Remote}, {"api", e.API}, {"route", e.Route}, {"path", e.Path}, {"target", e.Target}} {
		if a.v != "" {
			r.AddAttrs(slog.String(a.k, a.v))
		}
	}
	// As JSON: raw in a JSON log, one quoted string in a text log.
	for _, s := range []struct {
		k string
		m map[string]json.RawMessage
	}{{"before", e.Before}, {"after", e.After}} {
		if len(s.m) > 0 {
			data, _ := json.Marshal(s.m) // raw JSON values: cannot fail
			r.AddAttrs(slog.Any(s.k, json.RawMessage(data)))
		}
	}
	r.AddAttrs(slog.String("result", e.Result), slog.String("status", e.Status))
	if e.Error != "" {
		r.AddAttrs(slog.String("error", e.Error))
	}
	_ = t.log.Handler().Handle(context.WithoutCancel(ctx), r)
}

// fail counts and logs an entry whose object could not be written.
func (t *Trail) fail(what string, e Entry, err error) {
	t.records.WithLabelValues("failed").Inc()
	t.log.Error(what+" failed; the entry is only in the log", "id", e.ID, "err", err)
}

// writer writes queued objects until the queue is closed and empty.
func (t *Trail) writer() {
	defer t.done.Done()
	for j := range t.queue {
		err := t.write(j)
		if err != nil {
			t.records.WithLabelValues("failed").Inc()
			t.log.Error("writing an audit object failed; the entry is only in the log", "object", j.name, "err", err)
		} else {
			t.records.WithLabelValues("written").Inc()
		}
		j.done <- err
	}
}

// write creates j's object, trying again after a failure. A retry that
// finds the object already there with j's content (the answer to an
// earlier try was lost) has succeeded.
func (t *Trail) write(j *job) error {
	ctx, cancel := context.WithTimeout(t.ctx, t.opts.WriteTimeout)
	defer cancel()
	var err error
	for try := range writeTries {
		if try > 0 {
			select {
			case <-ctx.Done():
				return fmt.Errorf("%w (after %d tries; last: %v)", ctx.Err(), try, err)
			case <-time.After(time.Duration(try) * 200 * time.Millisecond):
			}
		}
		if _, err = t.w.WriteObject(ctx, j.name, j.data, ""); err == nil {
			return nil
		}
		if errors.Is(err, bucket.ErrConflict) {
			if got, _, rerr := t.w.ReadObject(ctx, j.name, int64(len(j.data))); rerr == nil && bytes.Equal(got, j.data) {
				return nil
			}
			return fmt.Errorf("object %s exists with other content: %w", j.name, err)
		}
	}
	return err
}

// Close stops taking entries (later ones are only logged) and waits until
// the queued objects are written or ctx is done, when the writes in
// flight are cut; it returns an error if objects were left unwritten.
func (t *Trail) Close(ctx context.Context) error {
	t.mu.Lock()
	if !t.closed {
		t.closed = true
		close(t.queue)
	}
	t.mu.Unlock()
	finished := make(chan struct{})
	go func() { t.done.Wait(); close(finished) }()
	select {
	case <-finished:
		t.stop()
		return nil
	case <-ctx.Done():
		t.stop()
		<-finished
		return fmt.Errorf("audit objects left unwritten at shutdown: %w", ctx.Err())
	}
}

// keyLayout is the time in object names: fixed width, UTC, so that names
// sort as times do.
const keyLayout = "20060102T150405.000000000Z"

// Key returns the object name, relative to the trail's Dir, of the entry
// id recorded at tm: "<time>-<id>.json", such as
// "20261125T030431.123456789Z-5f0c2a9e41d7b3c8-000003.json".
func Key(tm time.Time, id string) string {
	return tm.UTC().Format(keyLayout) + "-" + id + ".json"
}

// keyTime returns the time an object name made by Key starts with.
func keyTime(name string) (time.Time, bool) {
	if len(name) < len(keyLayout)+len("-x.json") || name[len(keyLayout)] != '-' || path.Ext(name) != ".json" {
		return time.Time{}, false
	}
	tm, err := time.Parse(keyLayout, name[:len(keyLayout)])
	return tm, err == nil
}
