// Package h2guard closes the HTTP/2 connections whose client resets
// streams faster than any client waiting for its answers would: the
// "rapid reset" attack (CVE-2023-44487), in which a client opens a stream
// and cancels it at once, again and again, so that the server starts
// work for every stream while the client's concurrent streams stay near
// zero. grpc-go and net/http bound the handlers such a client keeps
// running, but neither closes its connection; nginx (1.25.3 on) and Envoy
// do, and so does this package, on every listener where Grove speaks
// HTTP/2: the gRPC servers (transport/grpcserver, through Creds, the
// cluster's peer port among them) and HTTP over TLS
// (transport/httpserver, through ConfigureServer).
//
// A Guard wraps a server's connection after its TLS handshake (Wrap). The
// wrapper follows the bytes the client sends, without changing any:
// after the client preface, it reads each frame's 9-byte header and skips
// its payload, counting the streams HEADERS frames open and the
// RST_STREAM frames. The resets are taken from a token bucket of
// Options.Burst resets, refilled at Options.Rate a second: a client that
// cancels a call now and then (a gRPC deadline, tritonclient's cancel),
// or cancels every call at up to Rate calls a second, never empties it.
// A reset is premature when its stream is younger than a millisecond and
// the server has not answered it (sent its HEADERS; the wrapper follows
// the server's frames too): no client waiting for answers sends those,
// while a flood resets each stream in the write that opened it. Once the
// premature resets reach PrematureMin and are more than half the streams
// the client opened, as Envoy weighs them, the connection is closed, so
// that a flood's connection costs about PrematureMin streams, not Burst.
// When a reset finds the bucket empty, or makes the premature resets too
// many, the wrapper writes a GOAWAY frame
// with ENHANCE_YOUR_CALM (and the last stream id the client opened) at
// the next frame boundary of what the server writes (it follows those
// frames too, since a buffered writer may end a write mid-frame), closes
// its side of the connection, reads and discards what the client still
// sends for at most a second (a lingering close, so that the client reads
// the GOAWAY rather than a reset), and closes the connection; the server
// reads an error (ErrTooManyResets) in place of the bytes of the
// offending read, and ends the connection as it would any other. Each
// such close is counted in grove_http2_connections_closed_total{listener,
// reason="rapid_reset"} and logged as a warning naming the peer (at most
// one line every ten seconds per Guard, with how many went unlogged).
//
// Reconnecting costs the attacker: a Guard remembers the peers, by IP
// address (whatever their port), whose connections it closed, for 30 s
// after each one's last close, at most 4096 of them (when full, it
// forgets the due ones, then the one closed longest ago). A new
// connection from a remembered peer is held before any work is done for
// it, before its TLS handshake (Creds; ConfigureServer's
// GetConfigForClient, on the connection's own goroutine), for 100 ms
// after one close, doubling with each close, at most 2 s; and its
// budget is PrematureMin, Burst and Rate halved for each close, at least
// 16. Held connections are counted in
// grove_http2_connections_held_total{listener}
// and in the warning. The trade-off: clients behind one address (a NAT)
// share the penalty of one of them for their new connections, for up to
// 30 s; their existing connections are untouched, and a peer that
// trips no more is forgotten.
package h2guard

import (
	"crypto/tls"
	"errors"
	"log/slog"
	"net"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// The budget's defaults: a client may reset DefaultBurst streams at once,
// as many as the most calls it may have in flight on one connection by
// default (grpc_max_concurrent_streams), all cancelled together; and
// DefaultRate more a second, sustained: a client whose every call
// expires or is cancelled (a gRPC deadline during a slow spell,
// tritonclient's cancel) at up to that many calls a second. A flood's
// connection is closed sooner, by its premature resets (PrematureMin).
const (
	DefaultBurst = 1024
	DefaultRate  = 1000
)

// PrematureMin is how many premature resets (of streams younger than
// a millisecond) a connection may send before the guard weighs them: it
// closes the connection once they reach PrematureMin and are more than
// half the streams the client opened, as Envoy does. A flood's first
// connection so costs the server about PrematureMin streams.
const PrematureMin = 100

// MetricName is the counter of the connections a Guard closed, by
// listener and reason ("rapid_reset").
const MetricName = "grove_http2_connections_closed_total"

// HeldMetricName is the counter of the new connections a Guard held
// because their peer tripped it recently, by listener.
const HeldMetricName = "grove_http2_connections_held_total"

// ErrTooManyResets is what the server reads from a connection the guard
// closed.
var ErrTooManyResets = errors.New("h2guard: the client reset streams faster than its budget allows (rapid reset); GOAWAY ENHANCE_YOUR_CALM sent and the connection closed")

// Options configure a Guard; the zero value guards with the defaults,
// counts nothing and logs to slog.Default().
type Options struct {
	// Listener names the listener in the metric and the log ("grpc",
	// "http", "cluster").
	Listener string
	// Burst is how many streams a client may reset at once; 0 means
	// DefaultBurst.
	Burst int
	// Rate is how many resets a second a client may send beyond Burst,
	// sustained; 0 means DefaultRate.
	Rate float64
	// Registerer receives the MetricName counter (or, if it holds one
	// already, another listener's, which the Guard shares); nil counts
	// nothing.
	Registerer prometheus.Registerer
	// Logger receives a warning for each closed connection (rate
	// limited); nil means slog.Default().
	Logger *slog.Logger
	// Now is the Guard's clock (its buckets, its memory of peers); nil
	// means time.Now.
	Now func() time.Time
}

// logEvery is the least time between two warnings of one Guard.
const logEvery = 10 * time.Second

// goAwayWait bounds how long a closing connection waits to write its
// GOAWAY: for the server to finish a frame it was writing, or for a
// client that reads nothing to take the bytes.
const goAwayWait = time.Second

// lingerTime bounds how long a connection that sent its GOAWAY stays open
// for the client to read it and close, and lingerBytes how much of what
// the client sends meanwhile it reads and discards.
const (
	lingerTime  = time.Second
	lingerBytes = 64 << 10
)

// goAwayDebug is the debug data of the guard's GOAWAY frames, which
// clients log.
const goAwayDebug = "too_many_resets"

// Guard wraps the connections of one listener; it is safe for concurrent
// use.
type Guard struct {
	listener string
	burst    float64
	rate     float64
	closed   prometheus.Counter // nil: not counted
	held     prometheus.Counter // nil: not counted
	log      *slog.Logger
	now      func() time.Time
	peers    peers // the peers whose connections the Guard closed, recently

	mu           sync.Mutex // guards lastLog, unlogged and heldSinceLog
	lastLog      time.Time
	unlogged     int
	heldSinceLog int
}

// New returns a Guard with opts. A Registerer that refuses the counter
// for any reason but holding one already is a programming error: New
// panics, as prometheus.MustRegister would.
func New(opts Options) *Guard {
	g := &Guard{listener: opts.Listener, burst: float64(opts.Burst), rate: opts.Rate, log: opts.Logger, now: opts.Now}
	if g.now == nil {
		g.now = time.Now
	}
	if g.burst <= 0 {
		g.burst = DefaultBurst
	}
	if g.rate <= 0 {
		g.rate = DefaultRate
	}
	if g.log == nil {
		g.log = slog.Default()
	}
	if opts.Registerer != nil {
		g.closed = closedCounter(opts.Registerer).WithLabelValues(opts.Listener, "rapid_reset")
		g.held = heldCounter(opts.Registerer).WithLabelValues(opts.Listener)
	}
	return g
}

// closedCounter registers the MetricName counter with reg, or returns the
// one reg holds already.
func closedCounter(reg prometheus.Registerer) *prometheus.CounterVec {
	return registered(reg, prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: MetricName,
		Help: "HTTP/2 connections Grove closed with GOAWAY, by listener and reason (rapid_reset: the client reset streams faster than its budget).",
	}, []string{"listener", "reason"}))
}

// heldCounter registers the HeldMetricName counter with reg, or returns
// the one reg holds already.
func heldCounter(reg prometheus.Registerer) *prometheus.CounterVec {
	return registered(reg, prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: HeldMetricName,
		Help: "New connections Grove held before their handshake because their peer's connections were closed for rapid reset recently, by listener.",
	}, []string{"listener"}))
}

// registered registers cv with reg, or returns the counter of the same
// name reg holds already (every listener's Guard shares one); any other
// refusal is a programming error and panics.
func registered(reg prometheus.Registerer, cv *prometheus.CounterVec) *prometheus.CounterVec {
	if err := reg.Register(cv); err != nil {
		var are prometheus.AlreadyRegisteredError
		if errors.As(err, &are) {
			if existing, ok := are.ExistingCollector.(*prometheus.CounterVec); ok {
				return existing
			}
		}
		panic(err)
	}
	return cv
}

// Wrap returns c, a server's connection carrying HTTP/2 from its first
// byte on (after any TLS handshake), guarded. The wrapper has
// ConnectionState when c has it (a *tls.Conn), for servers that read the
// TLS state from the connection (golang.org/x/net/http2's ServeConn).
func (g *Guard) Wrap(c net.Conn) net.Conn { return g.wrap(c, c) }

// connectionStater is a connection over TLS, whose state a server reads.
type connectionStater interface {
	ConnectionState() tls.ConnectionState
}

// wrap guards c, whose connection under any TLS is raw (for the
// lingering close).
func (g *Guard) wrap(c, raw net.Conn) net.Conn {
	trips := 0
	if a, ok := peerAddr(raw); ok {
		trips = g.peers.trips(a, g.now())
	}
	gc := &conn{Conn: c, raw: raw, g: g, in: newInbound(), budget: budgetFor(g.burst, g.rate, trips),
		prematureMin: prematureMinFor(trips), sent: make(chan struct{})}
	gc.in.ages = &gc.ages
	gc.out = frames{server: true, ages: &gc.ages}
	if cs, ok := c.(connectionStater); ok {
		return &tlsConn{conn: gc, cs: cs}
	}
	return gc
}

// report remembers c's peer, and counts and logs the close of c.
func (g *Guard) report(c *conn) {
	now := g.now()
	trips := 0
	if a, ok := peerAddr(c.raw); ok {
		trips = g.peers.trip(a, now)
	}
	if g.closed != nil {
		g.closed.Inc()
	}
	g.mu.Lock()
	if !g.lastLog.IsZero() && now.Sub(g.lastLog) < logEvery {
		g.unlogged++
		g.mu.Unlock()
		return
	}
	unlogged, held := g.unlogged, g.heldSinceLog
	g.lastLog, g.unlogged, g.heldSinceLog = now, 0, 0
	g.mu.Unlock()
	g.log.Warn("closed an HTTP/2 connection whose client reset streams faster than its budget (rapid reset): GOAWAY ENHANCE_YOUR_CALM",
		"listener", g.listener, "remote", c.RemoteAddr().String(), "streams_opened", c.opened, "resets", c.resets, "premature_resets", c.premature,
		"burst", c.budget.burst, "rate_per_second", c.budget.rate, "peer_trips", trips,
		"next_connections_held", holdFor(trips), "closed_unlogged", unlogged, "held_since_last_line", held)
}
