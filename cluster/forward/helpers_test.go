package forward

import (
	"bufio"
	"context"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"errors"
	"fmt"
	"net"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/grpc/peer"

	"github.com/groveml/grove/auth"
	"github.com/groveml/grove/internal/certtest"
	"github.com/groveml/grove/servables"
	"github.com/groveml/grove/transport/tlsconf"
)

// pki is a cluster CA and the files of its node certificates.
type pki struct {
	ca     *certtest.CA
	dir    string
	caFile string
}

func newPKI(t testing.TB) *pki {
	t.Helper()
	p := &pki{ca: certtest.NewCA(t, "grove cluster CA"), dir: t.TempDir()}
	p.caFile = p.ca.WriteCA(t, p.dir)
	return p
}

// nodeCert signs the certificate of node name: serverAuth and clientAuth,
// for 127.0.0.1, named name.
func (p *pki) nodeCert(t testing.TB, name string) certtest.Leaf {
	t.Helper()
	return p.ca.Sign(t, &x509.Certificate{
		Subject:     pkix.Name{CommonName: name},
		DNSNames:    []string{name},
		IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1)},
		NotBefore:   time.Now().Add(-time.Hour),
		NotAfter:    time.Now().Add(24 * time.Hour),
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth},
	})
}

// serverTLS is node name's listener configuration, built by tlsconf from
// files as Grove builds it, verifying client certificates against the CA.
func (p *pki) serverTLS(t testing.TB, name string) *tls.Config {
	t.Helper()
	cert, key := p.nodeCert(t, name).Write(t, p.dir, name)
	r, err := tlsconf.New(tlsconf.Files{CertFile: cert, KeyFile: key, ClientCAFile: p.caFile, ClientAuth: tlsconf.ClientAuthRequire})
	if err != nil {
		t.Fatal(err)
	}
	return r.ServerConfig("h2")
}

// clientTLS is node name's dialing configuration.
func (p *pki) clientTLS(t testing.TB, name string) *tls.Config {
	t.Helper()
	c := p.nodeCert(t, name).TLS(t)
	cfg, err := ClientTLS(p.caFile, func() *tls.Certificate { return &c })
	if err != nil {
		t.Fatal(err)
	}
	return cfg
}

// node is a Local that runs fn and records what it was given.
type node struct {
	name  string
	fn    func(ctx context.Context, req ForwardedRequest) (Answer, error)
	calls atomic.Int64

	mu        sync.Mutex
	last      ForwardedRequest
	identity  auth.Identity
	hasID     bool
	deadline  time.Time
	forwarded bool
	remotes   map[string]bool // client addresses seen
	ctxErr    error           // ctx.Err() when fn returned
}

func (n *node) Predict(ctx context.Context, req ForwardedRequest) (Answer, error) {
	n.calls.Add(1)
	id, ok := auth.FromContext(ctx)
	dl, _ := ctx.Deadline()
	n.mu.Lock()
	n.last, n.identity, n.hasID, n.deadline, n.forwarded = req, id, ok, dl, Forwarded(ctx)
	if p, ok := peer.FromContext(ctx); ok {
		if n.remotes == nil {
			n.remotes = map[string]bool{}
		}
		n.remotes[p.Addr.String()] = true
	}
	n.mu.Unlock()
	a, err := n.fn(ctx, req)
	n.mu.Lock()
	n.ctxErr = ctx.Err()
	n.mu.Unlock()
	return a, err
}

// compute is a small real model: every FLOAT input [rows, cols] gives an
// output "<name>_sum" [rows, 1] of its row sums, every BYTES input an
// output "<name>_upper" of its elements in upper case.
func compute(_ context.Context, req ForwardedRequest) (Answer, error) {
	a := Answer{Checksum: "sum-" + req.ModelPath}
	for _, in := range req.Inputs {
		switch in.DType {
		case servables.Float32:
			if len(in.Shape) != 2 {
				return Answer{}, fmt.Errorf("%w: input %s has shape %v, want [rows, cols]", servables.ErrInvalidInput, in.Name, in.Shape)
			}
			out, err := servables.NewTensor(in.Name+"_sum", servables.Float32, []int64{in.Shape[0], 1})
			if err != nil {
				return Answer{}, err
			}
			vals, sums, cols := in.Float32s(), out.Float32s(), int(in.Shape[1])
			for i := range sums {
				for _, v := range vals[i*cols : (i+1)*cols] {
					sums[i] += v
				}
			}
			a.Outputs = append(a.Outputs, out)
		case servables.Bytes:
			ss, err := in.Strings()
			if err != nil {
				return Answer{}, err
			}
			for i := range ss {
				ss[i] = strings.ToUpper(ss[i])
			}
			out, err := servables.NewStringTensor(in.Name+"_upper", in.Shape, ss)
			if err != nil {
				return Answer{}, err
			}
			a.Outputs = append(a.Outputs, out)
		default:
			return Answer{}, fmt.Errorf("%w: input %s is %v", servables.ErrInvalidInput, in.Name, in.DType)
		}
	}
	return a, nil
}

// unavailable answers like a node whose copy of the model is not ready.
func unavailable(_ context.Context, req ForwardedRequest) (Answer, error) {
	return Answer{}, fmt.Errorf("model %s is still loading on this node: %w", req.ModelPath, servables.ErrUnavailable)
}

// started is a Server serving on loopback.
type started struct {
	peer Peer
	srv  *Server
	node *node
	done chan struct{} // closed when Serve returns
}

// start serves a node named name on 127.0.0.1 at a free port; the test's
// end stops it.
func start(t testing.TB, name string, fn func(context.Context, ForwardedRequest) (Answer, error), opts ServerOptions) *started {
	t.Helper()
	n := &node{name: name, fn: fn}
	opts.Node = name
	srv, err := NewServer(n, opts)
	if err != nil {
		t.Fatal(err)
	}
	return serveLoopback(t, n, srv, srv.Serve, srv.Stop)
}

// serveLoopback serves node n's srv with serve on 127.0.0.1 at a free
// port; the test's end stops it with stop.
func serveLoopback(t testing.TB, n *node, srv *Server, serve func(net.Listener) error, stop func()) *started {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s := &started{peer: Peer{Name: n.name, Addr: ln.Addr().String()}, srv: srv, node: n, done: make(chan struct{})}
	go func() {
		defer close(s.done)
		_ = serve(ln)
	}()
	t.Cleanup(func() {
		stop()
		select {
		case <-s.done:
		case <-time.After(5 * time.Second):
			t.Errorf("server %s did not stop", n.name)
		}
	})
	return s
}

// startTLS starts node name with its certificate and mTLS, members being
// those names (nil: any certificate of the CA).
func (p *pki) start(t testing.TB, name string, fn func(context.Context, ForwardedRequest) (Answer, error), members ...string) *started {
	t.Helper()
	opts := ServerOptions{TLS: p.serverTLS(t, name)}
	if members != nil {
		opts.Members = func(n string) bool {
			for _, m := range members {
				if m == n {
					return true
				}
			}
			return false
		}
	}
	return start(t, name, fn, opts)
}

// client returns a Client of node name, closed at the test's end.
func (p *pki) client(t testing.TB, name string, opts ClientOptions) *Client {
	t.Helper()
	opts.TLS = p.clientTLS(t, name)
	c := NewClient(opts)
	t.Cleanup(c.Close)
	return c
}

// testCtx is a context that ends with the test, or after 10 s.
func testCtx(t testing.TB) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// messageReader reads whole messages from the frames of a framed
// connection, putting chunked ones together (their frames may come
// between other messages' frames; one chunked message at a time).
type messageReader struct {
	r     *bufio.Reader
	in    *inbound
	chunk int // the most a frame carries; 0: maxFrameLen
}

// next returns the next whole message: its header (the type without
// frameChunked, the length of the whole message) and its payload. A frame
// that breaks the protocol is an error wrapping errFrame.
func (m *messageReader) next() (frameHeader, []byte, error) {
	chunk := m.chunk
	if chunk == 0 {
		chunk = maxFrameLen
	}
	for {
		h, err := readFrameHeader(m.r)
		if err != nil {
			return h, nil, err
		}
		if err := checkLength(h, chunk); err != nil {
			return h, nil, err
		}
		switch {
		case h.typ&frameChunked != 0:
			if m.in != nil {
				return h, nil, fmt.Errorf("%w: call %d's chunked message begins while call %d's is arriving", errFrame, h.id, m.in.id)
			}
			n, err := readHead(m.r, h, chunk)
			if err != nil {
				return h, nil, err
			}
			m.in = newInbound(h.id, h.typ&^frameChunked, n, false)
		case h.typ == frameData:
			if m.in == nil || m.in.id != h.id {
				return h, nil, fmt.Errorf("%w: a data frame for call %d, which has no chunked message arriving", errFrame, h.id)
			}
			done, err := m.in.read(m.r, h)
			if err != nil || !done {
				if err != nil {
					return h, nil, err
				}
				continue
			}
			in := m.in
			m.in = nil
			return frameHeader{length: uint32(in.total), typ: in.typ, id: in.id}, in.buf, nil
		default:
			b, err := readPayload(m.r, h, chunk)
			return h, b, err
		}
	}
}

// remote returns err as a *RemoteError, failing the test if it is not one.
func remote(t testing.TB, err error) *RemoteError {
	t.Helper()
	var re *RemoteError
	if !errors.As(err, &re) {
		t.Fatalf("error %v (%T) is no RemoteError", err, err)
	}
	return re
}
