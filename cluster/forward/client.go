package forward

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"net"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	"github.com/groveml/grove/cluster/forward/forwardpb"
	"github.com/groveml/grove/servables"
	"github.com/groveml/grove/tracing"
	"github.com/groveml/grove/transport/tlsconf"
)

// DefaultTimeout bounds a forwarded request whose context has no
// deadline when ClientOptions.Timeout is 0.
const DefaultTimeout = 30 * time.Second

// maxAnswerBytes is the largest answer a Client receives, and the largest
// message a node encodes: the most a protobuf message may be (2 GiB).
const maxAnswerBytes = 2<<30 - 1

// ClientOptions configure a Client.
type ClientOptions struct {
	// TLS dials peers with this configuration (see ClientTLS); nil dials
	// plaintext.
	TLS *tls.Config
	// ConnsPerPeer is how many connections a peer gets, used in turn; 0
	// means 1.
	ConnsPerPeer int
	// Timeout bounds a request whose context has no deadline; 0 means
	// DefaultTimeout.
	Timeout time.Duration
	// ConnectTimeout bounds one attempt to connect to a peer (a peer that
	// does not answer makes the requests waiting for it fail Unavailable
	// after it, and try another); 0 means 2 s.
	ConnectTimeout time.Duration
	// ReconnectMaxDelay bounds the wait between attempts to reconnect to
	// a peer that went away; 0 means 1 s.
	ReconnectMaxDelay time.Duration
	// Rand returns a random number in [0, n) for Pick; nil means
	// math/rand/v2's IntN.
	Rand func(n int) int
	// MaxRequestBytes bounds the requests sent (the serving node bounds
	// what it receives alike); 0 means 2 GiB. Answers are received up to
	// 2 GiB, a protobuf message's most, whatever it says: a node's own
	// front ends bound requests, not answers, and a model's answer must
	// not fail only because it was forwarded.
	MaxRequestBytes int
	// Logger receives connections opened and closed; nil means
	// slog.Default().
	Logger *slog.Logger
}

// Client forwards requests to peers over the framed transport, on a pool
// of connections per peer address: made on the first request to the
// peer, reused by every later one, closed by Retain when the peer leaves,
// or by Close. It is safe for concurrent use.
type Client struct {
	opts   ClientOptions
	rnd    func(int) int
	log    *slog.Logger
	chunk  int // the most a frame carries (maxFrameLen; tests change it)
	unsent int // the most left unsent in a connection's socket (maxUnsent; tests change it)
	mu     sync.RWMutex
	pools  map[string]*pool
	done   bool
}

// pool is the framed connections to one peer address (slots), used in
// turn.
type pool struct {
	addr     string
	slots    []*slot
	next     atomic.Uint32
	inflight atomic.Int64
}

// NewClient returns a Client; it connects to nothing until a request is
// forwarded.
func NewClient(opts ClientOptions) *Client {
	if opts.ConnsPerPeer <= 0 {
		opts.ConnsPerPeer = 1
	}
	if opts.Timeout <= 0 {
		opts.Timeout = DefaultTimeout
	}
	if opts.ConnectTimeout <= 0 {
		opts.ConnectTimeout = 2 * time.Second
	}
	if opts.ReconnectMaxDelay <= 0 {
		opts.ReconnectMaxDelay = time.Second
	}
	if opts.MaxRequestBytes <= 0 {
		opts.MaxRequestBytes = maxAnswerBytes
	}
	c := &Client{opts: opts, rnd: opts.Rand, log: opts.Logger, chunk: maxFrameLen, unsent: maxUnsent, pools: map[string]*pool{}}
	if c.rnd == nil {
		c.rnd = rand.IntN
	}
	if c.log == nil {
		c.log = slog.Default()
	}
	return c
}

// ClientTLS returns the TLS configuration a node dials its peers with:
// peers' server certificates are verified against the CAs in caFile (the
// cluster CA, which also verifies client certificates: tls.client_ca_file)
// and, when cert is not nil, the node presents cert() as its client
// certificate at each handshake (tlsconf.Reloader.Current, so a rotated
// certificate is used by new connections; it needs the clientAuth extended
// key usage besides serverAuth).
func ClientTLS(caFile string, cert func() *tls.Certificate) (*tls.Config, error) {
	b, err := tlsconf.ReadFile(caFile)
	if err != nil {
		return nil, fmt.Errorf("reading the cluster CA file: %w", err)
	}
	roots := x509.NewCertPool()
	if !roots.AppendCertsFromPEM(b) {
		return nil, fmt.Errorf("cluster CA file %s holds no PEM certificate", caFile)
	}
	c := &tls.Config{MinVersion: tls.VersionTLS12, RootCAs: roots}
	if cert != nil {
		c.GetClientCertificate = func(*tls.CertificateRequestInfo) (*tls.Certificate, error) { return cert(), nil }
	}
	return c, nil
}

// Forward runs req on one of peers, the nodes that have its model ready,
// and returns the answer. It picks a peer by Pick on the requests this
// Client has in flight to each; when that peer's answer is Unavailable
// (down, unreachable, shutting down, its model not ready) and ctx is not
// done, it tries one other peer (another address), and no more. ctx's
// deadline travels with the request (a context without one gets
// ClientOptions.Timeout); a Forwarded ctx is refused with ErrSecondHop.
//
// A failure is a *RemoteError carrying the kind the peer's model failed
// with (servables.KindOf), or an error of kind Unavailable (ErrNoPeer,
// ErrSecondHop, a closed Client), or of kind Execution for a request that
// cannot be sent (no model path, no priority).
func (c *Client) Forward(ctx context.Context, peers []Peer, req Request) (Answer, error) {
	if Forwarded(ctx) {
		return Answer{}, fmt.Errorf("%w (model %s)", ErrSecondHop, req.ModelPath)
	}
	if err := checkRequest(&req); err != nil {
		return Answer{}, fmt.Errorf("forward: %w", err)
	}
	if len(peers) == 0 {
		return Answer{}, fmt.Errorf("%w: no node has model %s ready", ErrNoPeer, req.ModelPath)
	}
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, c.opts.Timeout)
		defer cancel()
	}
	m := encodeRequest(&req)
	first := Pick(len(peers), func(i int) int64 { return c.load(peers[i].Addr) }, c.rnd)
	ans, err := c.call(ctx, peers[first], m, req.StartBy)
	if err == nil || servables.KindOf(err) != servables.Unavailable || ctx.Err() != nil {
		return ans, err
	}
	others := make([]int, 0, len(peers)-1)
	for i, p := range peers {
		if p.Addr != peers[first].Addr {
			others = append(others, i)
		}
	}
	k := Pick(len(others), func(i int) int64 { return c.load(peers[others[i]].Addr) }, c.rnd)
	if k < 0 {
		return Answer{}, err
	}
	ans, err2 := c.call(ctx, peers[others[k]], m, req.StartBy)
	if err2 != nil {
		return Answer{}, fmt.Errorf("%w; before it, %v", err2, err)
	}
	return ans, nil
}

// load is the number of requests in flight to addr.
func (c *Client) load(addr string) int64 {
	c.mu.RLock()
	p := c.pools[addr]
	c.mu.RUnlock()
	if p == nil {
		return 0
	}
	return p.inflight.Load()
}

// call runs m, a request to start by startBy (zero: no bound), on peer
// p over one of its pool's connections.
func (c *Client) call(ctx context.Context, p Peer, m *forwardpb.PredictRequest, startBy time.Time) (Answer, error) {
	pl, err := c.pool(p)
	if err != nil {
		return Answer{}, &RemoteError{Node: p.Name, Addr: p.Addr, Kind: servables.Unavailable, Code: codes.Unavailable, Message: err.Error()}
	}
	pl.inflight.Add(1)
	defer pl.inflight.Add(-1)
	if n := proto.Size(m); n > c.opts.MaxRequestBytes {
		return Answer{}, &RemoteError{Node: p.Name, Addr: p.Addr, Kind: servables.InvalidInput, Code: codes.ResourceExhausted,
			Message: fmt.Sprintf("the request of %d bytes is larger than the %d bytes this node forwards (max_body_bytes)", n, c.opts.MaxRequestBytes)}
	}
	s := pl.slots[int(pl.next.Add(1))%len(pl.slots)]
	conn, err := s.get(ctx, func() (*clientConn, error) {
		dctx, cancel := context.WithTimeout(context.Background(), c.opts.ConnectTimeout)
		defer cancel()
		return dialFramed(dctx, p.Addr, c.opts.TLS, maxAnswerBytes, c.chunk, c.unsent)
	}, c.opts.ReconnectMaxDelay)
	if err == nil {
		call := &forwardpb.Call{Request: m}
		now := time.Now()
		if dl, ok := ctx.Deadline(); ok {
			call.TimeoutNanos = int64(dl.Sub(now))
		}
		// Both times left are measured as the call goes: a retry on
		// another peer sends what is left then.
		m.StartWithinNanos = startWithin(startBy, now)
		call.Traceparent, call.Tracestate = tracing.Outgoing(ctx)
		var r frameResult
		if r, err = conn.call(ctx, call); err == nil {
			return decodeFramed(p, r)
		}
	}
	if ctx.Err() != nil {
		code := status.FromContextError(ctx.Err()).Code()
		return Answer{}, &RemoteError{Node: p.Name, Addr: p.Addr, Kind: KindOfCode(code), Code: code, Message: ctx.Err().Error()}
	}
	return Answer{}, &RemoteError{Node: p.Name, Addr: p.Addr, Kind: servables.Unavailable, Code: codes.Unavailable, Message: err.Error()}
}

// answerOf is the Answer peer p's response m carries, or the error saying
// it is malformed.
func answerOf(p Peer, m *forwardpb.PredictResponse) (Answer, error) {
	ans, err := decodeAnswer(m)
	if err != nil {
		return Answer{}, malformed(p, "answer", err)
	}
	return ans, nil
}

// malformed is the error of a what ("answer", "failure") from peer p that
// does not decode: Execution, the peer's fault, not retried.
func malformed(p Peer, what string, err error) *RemoteError {
	return &RemoteError{Node: p.Name, Addr: p.Addr, Kind: servables.Execution, Code: codes.Internal, Message: "malformed " + what + ": " + err.Error()}
}

// pool returns the pool of p's address, made (without connecting) if it
// has none.
func (c *Client) pool(p Peer) (*pool, error) {
	c.mu.RLock()
	pl, done := c.pools[p.Addr], c.done
	c.mu.RUnlock()
	if done {
		return nil, errors.New("the forwarding client is closed")
	}
	if pl != nil {
		return pl, nil
	}
	if _, _, err := net.SplitHostPort(p.Addr); err != nil {
		return nil, fmt.Errorf("peer address %q: %w", p.Addr, err)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.done {
		return nil, errors.New("the forwarding client is closed")
	}
	if pl := c.pools[p.Addr]; pl != nil {
		return pl, nil
	}
	pl = &pool{addr: p.Addr}
	for range c.opts.ConnsPerPeer {
		pl.slots = append(pl.slots, &slot{})
	}
	c.pools[p.Addr] = pl
	c.log.Debug("forward: connections to a peer opened", "peer", p.Name, "addr", p.Addr, "conns", len(pl.slots))
	return pl, nil
}

// close closes the pool's connections; calls in flight on them end.
func (pl *pool) close() {
	for _, s := range pl.slots {
		s.close()
	}
}

// Retain closes the connections to every address not in addrs (the
// advertised addresses of the current members): call it when members
// leave. Requests in flight to a closed address fail Unavailable and try
// another replica.
func (c *Client) Retain(addrs []string) {
	c.mu.Lock()
	var gone []*pool
	for a, pl := range c.pools {
		if !slices.Contains(addrs, a) {
			gone = append(gone, pl)
			delete(c.pools, a)
		}
	}
	c.mu.Unlock()
	for _, pl := range gone {
		pl.close()
		c.log.Debug("forward: connections to a peer closed", "addr", pl.addr)
	}
}

// Peers returns the addresses the Client has connections to, sorted.
func (c *Client) Peers() []string {
	c.mu.RLock()
	defer c.mu.RUnlock()
	out := make([]string, 0, len(c.pools))
	for a := range c.pools {
		out = append(out, a)
	}
	slices.Sort(out)
	return out
}

// InFlight is the number of requests in flight to addr.
func (c *Client) InFlight(addr string) int64 { return c.load(addr) }

// Close closes every connection; later requests fail Unavailable.
func (c *Client) Close() {
	c.mu.Lock()
	c.done = true
	pools := c.pools
	c.pools = map[string]*pool{}
	c.mu.Unlock()
	for _, pl := range pools {
		pl.close()
	}
}
