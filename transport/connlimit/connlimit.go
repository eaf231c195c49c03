// Package connlimit bounds how many connections a listener holds at
// once, so that callers who open connections and send nothing cannot take
// every file descriptor of the process (the probes, the admin listeners
// and the model files need some too).
//
// A Listener accepts every connection the kernel has queued. Within its
// limit it hands the connection on; at the limit it first tries to make
// room by closing the connection that has been idle the longest (one its
// server marked idle with Conn.SetIdle, an HTTP connection waiting for a
// request, and that holds no request, Conn.Hold), as nginx reuses its
// idle keep-alive connections when worker_connections run out; when no
// connection is idle, it closes the new one at once (accept then close),
// so that the kernel's queue never fills with connections nobody serves.
// A server that never marks connections idle (gRPC) gets the plain
// limit.
//
// The counts are metrics labelled with the listener's name (Metrics):
// grove_connections_open, grove_connections_refused_total and
// grove_connections_reclaimed_total.
package connlimit

import (
	"errors"
	"log/slog"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"github.com/groveml/grove/internal/netconn"

	"github.com/prometheus/client_golang/prometheus"
)

// Metrics are the counts of every Listener of a process, by listener
// name; make them once (NewMetrics) and give them to each Listener.
type Metrics struct {
	open      *prometheus.GaugeVec
	refused   *prometheus.CounterVec
	reclaimed *prometheus.CounterVec
}

// NewMetrics returns the listeners' metrics, registered with reg unless
// it is nil.
func NewMetrics(reg prometheus.Registerer) *Metrics {
	m := &Metrics{
		open: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "grove_connections_open",
			Help: "Connections a listener holds open, by listener.",
		}, []string{"listener"}),
		refused: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "grove_connections_refused_total",
			Help: "Connections closed as soon as accepted because the listener was at its connection limit with none idle, by listener.",
		}, []string{"listener"}),
		reclaimed: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "grove_connections_reclaimed_total",
			Help: "Idle connections closed to make room for a new one at the listener's connection limit, by listener.",
		}, []string{"listener"}),
	}
	if reg != nil {
		reg.MustRegister(m.open, m.refused, m.reclaimed)
	}
	return m
}

// Options configure a Listener.
type Options struct {
	// Name labels the listener in the metrics and the log ("http").
	Name string
	// Max is the most connections held at once; 0 or less counts them
	// without a limit.
	Max int
	// Metrics receives the counts; nil counts nothing.
	Metrics *Metrics
	// Logger is told, at most once a minute, that connections are being
	// refused; nil means slog.Default().
	Logger *slog.Logger
}

// logEvery is how often a listener at its limit logs that it refuses
// connections.
const logEvery = time.Minute

// maxScan bounds how many idle connections Accept looks at for one that
// holds no request before it refuses the new one.
const maxScan = 64

// Listener is a net.Listener that holds at most Options.Max connections.
type Listener struct {
	net.Listener
	opts Options

	open               prometheus.Gauge // nil without Metrics
	refused, reclaimed prometheus.Counter
	mu                 sync.Mutex
	n                  int   // connections held
	idle               queue // idle connections, longest idle first
	lastLog            time.Time
	refusedN           int // since lastLog
	reclaimedN         int // since lastLog
}

// New returns ln holding at most opts.Max connections.
func New(ln net.Listener, opts Options) *Listener {
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	l := &Listener{Listener: ln, opts: opts}
	if m := opts.Metrics; m != nil {
		l.open = m.open.WithLabelValues(opts.Name)
		l.refused = m.refused.WithLabelValues(opts.Name)
		l.reclaimed = m.reclaimed.WithLabelValues(opts.Name)
	}
	return l
}

// Accept returns the next connection within the limit, a *Conn. At the
// limit it closes the connection idle the longest to make room, or, with
// none idle, closes the new one and waits for the next.
func (l *Listener) Accept() (net.Conn, error) {
	for {
		nc, err := l.Listener.Accept()
		if err != nil {
			return nil, err
		}
		if c := l.admit(nc); c != nil {
			return c, nil
		}
		_ = nc.Close()
	}
}

// admit returns nc as a held *Conn, having closed an idle connection to
// make room if the listener is full, or nil when it is full with none
// idle.
func (l *Listener) admit(nc net.Conn) *Conn {
	var victim *Conn
	l.mu.Lock()
	if l.opts.Max > 0 && l.n >= l.opts.Max {
		victim = l.reclaimable()
		if victim == nil {
			l.refusedN++
			l.logLocked()
			l.mu.Unlock()
			if l.refused != nil {
				l.refused.Inc()
			}
			return nil
		}
		l.releaseLocked(victim)
		l.reclaimedN++
		l.logLocked()
	}
	l.n++
	l.mu.Unlock()
	if victim != nil {
		_ = victim.Conn.Close()
		if l.reclaimed != nil {
			l.reclaimed.Inc()
		}
	}
	if l.open != nil {
		l.open.Inc()
	}
	return &Conn{Conn: nc, l: l}
}

// reclaimable returns the connection idle the longest that holds no
// request, looking at up to maxScan of them; an idle one found holding a
// request (an HTTP/2 stream) goes to the back of the queue.
func (l *Listener) reclaimable() *Conn {
	for range min(maxScan, l.idle.len) {
		c := l.idle.front()
		if c.holds.Load() == 0 {
			return c
		}
		l.idle.remove(c)
		l.idle.pushBack(c)
	}
	return nil
}

// releaseLocked stops counting c, once.
func (l *Listener) releaseLocked(c *Conn) {
	if c.released {
		return
	}
	c.released = true
	l.n--
	if c.idle {
		l.idle.remove(c)
		c.idle = false
	}
	if l.open != nil {
		l.open.Dec()
	}
}

// logLocked logs, at most once every logEvery, how many connections were
// refused and reclaimed since the last time it did.
func (l *Listener) logLocked() {
	now := time.Now()
	if !l.lastLog.IsZero() && now.Sub(l.lastLog) < logEvery {
		return
	}
	l.opts.Logger.Warn("connection limit reached: closing the longest idle connection to make room, or the new one when none is idle",
		"listener", l.opts.Name, "limit", l.opts.Max, "refused", l.refusedN, "reclaimed", l.reclaimedN)
	l.lastLog, l.refusedN, l.reclaimedN = now, 0, 0
}

// Open returns how many connections the listener holds.
func (l *Listener) Open() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.n
}

// Idle returns how many of its connections are marked idle (Conn.SetIdle).
func (l *Listener) Idle() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.idle.len
}

// Conn is a connection a Listener holds; closing it makes room for
// another.
type Conn struct {
	net.Conn
	l *Listener

	holds atomic.Int32 // requests in flight (Hold)
	// Guarded by l.mu:
	released   bool
	idle       bool
	prev, next *Conn // in l.idle while idle
}

// Close closes the connection and stops counting it.
func (c *Conn) Close() error {
	c.l.mu.Lock()
	c.l.releaseLocked(c)
	c.l.mu.Unlock()
	return c.Conn.Close()
}

// CloseWrite shuts down the writing side of the connection, if it has
// one (a TCP connection), as net/http does before a lingering close.
func (c *Conn) CloseWrite() error {
	if cw, ok := c.Conn.(interface{ CloseWrite() error }); ok {
		return cw.CloseWrite()
	}
	return errors.ErrUnsupported
}

// NetConn returns the connection c wraps.
func (c *Conn) NetConn() net.Conn { return c.Conn }

// SetIdle marks c idle (waiting for a request: the listener may close it
// to make room) or not. An HTTP server marks a connection idle when it is
// new or between requests, and not idle while it reads or serves one.
func (c *Conn) SetIdle(idle bool) {
	l := c.l
	l.mu.Lock()
	defer l.mu.Unlock()
	if c.released {
		return
	}
	if c.idle {
		l.idle.remove(c)
	}
	c.idle = idle
	if idle {
		l.idle.pushBack(c)
	}
}

// Hold keeps c from being closed to make room until Release, even while
// it is idle: a request in flight on a connection that carries several
// at once (HTTP/2), which its server does not mark busy.
func (c *Conn) Hold() { c.holds.Add(1) }

// Release ends a Hold.
func (c *Conn) Release() { c.holds.Add(-1) }

// Find returns the *Conn under c (c itself, or the connection a TLS or
// other wrapper holds, through their NetConn methods), or nil when c did
// not come from a Listener.
func Find(c net.Conn) *Conn {
	lc, _ := netconn.As[*Conn](c)
	return lc
}

// queue is a doubly linked list of connections through their prev and
// next fields.
type queue struct {
	head, tail *Conn
	len        int
}

func (q *queue) front() *Conn { return q.head }

func (q *queue) pushBack(c *Conn) {
	c.prev, c.next = q.tail, nil
	if q.tail != nil {
		q.tail.next = c
	} else {
		q.head = c
	}
	q.tail = c
	q.len++
}

func (q *queue) remove(c *Conn) {
	if c.prev != nil {
		c.prev.next = c.next
	} else {
		q.head = c.next
	}
	if c.next != nil {
		c.next.prev = c.prev
	} else {
		q.tail = c.prev
	}
	c.prev, c.next = nil, nil
	q.len--
}
