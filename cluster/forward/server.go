package forward

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"strconv"
	"sync"
	"time"

	"go.opentelemetry.io/otel/trace"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/peer"
	"google.golang.org/grpc/status"
	"google.golang.org/grpc/tap"

	"github.com/groveml/grove/auth"
	"github.com/groveml/grove/cluster/forward/forwardpb"
	"github.com/groveml/grove/servables"
	"github.com/groveml/grove/tracing"
	"github.com/groveml/grove/transport/grpcserver"
	"github.com/groveml/grove/transport/h2guard"
	"github.com/groveml/grove/transport/tlsconf"
)

// ServerOptions configure a Server.
type ServerOptions struct {
	// Node is this node's name, which every answer carries; required.
	Node string
	// TLS serves TLS with this configuration, which must verify client
	// certificates against the cluster CA unless AllowUnauthenticatedPeers
	// (tlsconf.Reloader.ServerConfig("h2") of a Reloader with a client CA
	// file); nil serves plaintext, which needs AllowUnauthenticatedPeers.
	TLS *tls.Config
	// Members reports whether the name of a verified client certificate
	// (auth.CertificateName: its first DNS or URI SAN, else its subject
	// CN) is a member of the cluster now; it runs on every call and must
	// be cheap. Nil counts every certificate the client CA verified.
	Members func(certName string) bool
	// ConfirmMember, when set, is asked about a name Members does not
	// know, before the call is refused: it reports whether the name is a
	// member by a read of the membership begun after the call arrived
	// (a node that has just joined forwards as soon as it sees its peers,
	// which may be before their view lists it). It may block, until ctx
	// is done (at most confirmWait); an error refuses the call
	// Unavailable, so that its node tries another replica.
	ConfirmMember func(ctx context.Context, certName string) (bool, error)
	// AllowUnauthenticatedPeers serves callers that present no client
	// certificate (a cluster without mTLS). Nothing proves who they are,
	// so their requests must carry no authenticated caller: one whose
	// identity is not Method "none" is refused.
	AllowUnauthenticatedPeers bool
	// MaxMessageBytes bounds a received request; 0 means 2 GiB.
	MaxMessageBytes int
	// Logger receives refused peers; nil means slog.Default().
	Logger *slog.Logger
	// TracerProvider, when set, gives every forwarded call a server span
	// continuing the forwarding node's trace (its traceparent metadata);
	// nil traces nothing.
	TracerProvider trace.TracerProvider
	// RapidReset configures the guard of the gRPC connections (h2guard:
	// one whose client resets streams faster than its budget is closed);
	// its Listener "" means "cluster", its Logger nil means Logger.
	RapidReset h2guard.Options
}

// Server serves the Forward service for a node's peers, running their
// requests on its Local: on the framed transport, which Clients speak,
// and on gRPC, for tools (grpcurl), beside gRPC health (open, for probes)
// and reflection (members only).
type Server struct {
	forwardpb.UnimplementedForwardServer
	gs          *grpcserver.Server
	local       Local
	node        string
	members     func(string) bool
	confirm     func(context.Context, string) (bool, error)
	allowUnauth bool
	log         *slog.Logger
	tls         *tls.Config // offers ALPN first; nil: plaintext
	maxMsg      int
	chunk       int // the most a framed connection's frame carries (maxFrameLen; tests change it)
	unsent      int // the most left unsent in a framed connection's socket (maxUnsent; tests change it)
	calls       *tracing.CallServer
	now         func() time.Time // prepare's clock (time.Now; tests change it)

	// The framed connections and the listener (framed_server.go).
	mu       sync.Mutex
	lns      []net.Listener
	conns    map[*serverConn]struct{}
	stopping bool
	connWG   sync.WaitGroup
	base     context.Context // framed calls' parent, cancelled by Stop
	cancel   context.CancelFunc
}

// NewServer returns a Server running requests on local; the error says
// which option is missing or inconsistent. Serve it on the node's
// advertised address.
func NewServer(local Local, opts ServerOptions) (*Server, error) {
	if local == nil {
		return nil, errors.New("forward server: no Local to run requests on")
	}
	if opts.Node == "" {
		return nil, errors.New("forward server: the node's name is empty")
	}
	if !opts.AllowUnauthenticatedPeers {
		if opts.TLS == nil {
			return nil, errors.New("forward server: without TLS peers cannot be authenticated: give a TLS configuration with a client CA (tls.client_ca_file) or allow unauthenticated peers")
		}
		if !verifiesClients(opts.TLS) {
			return nil, errors.New("forward server: the TLS configuration verifies no client certificate (no client CA): peers cannot be authenticated: set a client CA (tls.client_ca_file) or allow unauthenticated peers")
		}
	}
	if opts.MaxMessageBytes <= 0 {
		opts.MaxMessageBytes = maxAnswerBytes
	}
	s := &Server{local: local, node: opts.Node, members: opts.Members, confirm: opts.ConfirmMember, allowUnauth: opts.AllowUnauthenticatedPeers, log: opts.Logger,
		tls: offerALPN(opts.TLS), maxMsg: opts.MaxMessageBytes, chunk: maxFrameLen, unsent: maxUnsent, now: time.Now, calls: tracing.NewCallServer(opts.TracerProvider), conns: map[*serverConn]struct{}{}}
	if s.log == nil {
		s.log = slog.Default()
	}
	s.base, s.cancel = context.WithCancel(context.Background())
	var creds credentials.TransportCredentials
	if s.tls != nil {
		creds = handshaken{} // Serve's mux made the handshake
	}
	if opts.RapidReset.Listener == "" {
		opts.RapidReset.Listener = "cluster"
	}
	if opts.RapidReset.Logger == nil {
		opts.RapidReset.Logger = s.log
	}
	s.gs = grpcserver.New(grpcserver.Options{
		MaxMessageBytes:   opts.MaxMessageBytes,
		Creds:             creds,
		RequireClientCert: !opts.AllowUnauthenticatedPeers,
		InTapHandle:       s.tap,
		TracerProvider:    opts.TracerProvider,
		RapidReset:        opts.RapidReset,
		Logger:            s.log,
	})
	// No caller roles on the peer port (no grpcserver.Options.Auth): its
	// callers are members, admitted by tap, so its service declares none
	// (grpcserver.Server.Register).
	forwardpb.RegisterForwardServer(s.gs, s)
	return s, nil
}

// verifiesClients reports whether c (or the configuration it gives each
// handshake, as tlsconf's does) verifies client certificates.
func verifiesClients(c *tls.Config) bool {
	if c.GetConfigForClient != nil {
		cc, err := c.GetConfigForClient(&tls.ClientHelloInfo{})
		if err != nil || cc == nil {
			return false
		}
		c = cc
	}
	return c.ClientCAs != nil && c.ClientAuth >= tls.VerifyClientCertIfGiven
}

// peerKey carries the verified member name of a call's peer.
type peerKey struct{}

// tap admits a gRPC call before its message is read (admit). Probes pass.
func (s *Server) tap(ctx context.Context, info *tap.Info) (context.Context, error) {
	if grpcserver.IsProbe(info.FullMethodName) {
		return ctx, nil
	}
	name, f := s.admit(ctx, verifiedCert(ctx), info.FullMethodName)
	if f != nil {
		return nil, status.Error(f.code, f.msg)
	}
	if name == "" {
		return ctx, nil
	}
	return context.WithValue(ctx, peerKey{}, name), nil
}

// confirmWait bounds how long a call from a peer Members does not know
// waits for ConfirmMember.
const confirmWait = 2 * time.Second

// admit decides whether a peer that presented cert (nil: none verified)
// may call: one whose certificate names a member (Members, else
// ConfirmMember within ctx), or one without a certificate when
// unauthenticated peers are allowed. It returns the member's name (""
// for a peer without a certificate), or the failure to answer: a
// certificate naming no member is refused PERMISSION_DENIED of kind
// Unavailable, since membership changes.
func (s *Server) admit(ctx context.Context, cert *x509.Certificate, method string) (string, *failure) {
	if cert == nil {
		if s.allowUnauth {
			return "", nil
		}
		return "", &failure{code: codes.Unauthenticated, kind: servables.Execution, msg: "a client certificate signed by the cluster CA is required"}
	}
	name := auth.CertificateName(cert)
	if name == "" {
		return "", &failure{code: codes.Unauthenticated, kind: servables.Execution, msg: "the client certificate has no SAN and no subject CN to name it"}
	}
	if s.members == nil || s.members(name) {
		return name, nil
	}
	if s.confirm != nil {
		cctx, cancel := context.WithTimeout(ctx, confirmWait)
		ok, err := s.confirm(cctx, name)
		cancel()
		switch {
		case err != nil:
			s.log.Warn("forward: could not confirm that a peer is a cluster member; refused its call", "certificate", name, "method", method, "err", err)
			return "", &failure{code: codes.Unavailable, kind: servables.Unavailable,
				msg: fmt.Sprintf("node %s could not confirm that certificate %q names a member of the cluster: %v", s.node, name, err)}
		case ok:
			return name, nil
		}
	}
	// A node that is no member now is one whose lease ended and that has
	// not joined again yet: its user should retry (Unavailable, 503),
	// and its request go to a replica whose view still lists it.
	s.log.Warn("forward: refused a peer that is not a cluster member", "certificate", name, "method", method)
	return "", &failure{code: codes.PermissionDenied, kind: servables.Unavailable, msg: fmt.Sprintf("certificate %q names no member of the cluster", name)}
}

// failure is a call's failed outcome: its gRPC code, Grove's kind and
// what went wrong, and for a model that is loading, when a retry should
// find it loaded (0: no estimate).
type failure struct {
	code       codes.Code
	kind       servables.Kind
	msg        string
	retryAfter time.Duration
}

// retryHint is an error that says when a retry should succeed: in
// RetryIn (actors.LoadingError, a model that is loading).
type retryHint interface {
	error
	RetryIn() time.Duration
}

// verifiedCert is the client certificate the call's TLS verified, or nil.
func verifiedCert(ctx context.Context) *x509.Certificate {
	p, ok := peer.FromContext(ctx)
	if !ok {
		return nil
	}
	ti, ok := p.AuthInfo.(credentials.TLSInfo)
	if !ok {
		return nil
	}
	return verifiedLeaf(&ti.State)
}

// verifiedLeaf is the client certificate the handshake of st verified, or
// nil.
func verifiedLeaf(st *tls.ConnectionState) *x509.Certificate {
	if !tlsconf.HasVerifiedClientCert(st) || len(st.PeerCertificates) == 0 {
		return nil
	}
	return st.PeerCertificates[0]
}

// Predict runs one forwarded request on the Local: the gRPC service, for
// tools (a Client calls on the framed transport).
func (s *Server) Predict(ctx context.Context, m *forwardpb.PredictRequest) (*forwardpb.PredictResponse, error) {
	from, _ := ctx.Value(peerKey{}).(string)
	resp, f := s.serve(ctx, m, from)
	if f != nil {
		md := metadata.Pairs(trailerKind, f.kind.String(), trailerNode, s.node)
		if f.retryAfter > 0 {
			md.Set(trailerRetryAfter, strconv.FormatInt(f.retryAfter.Milliseconds(), 10))
		}
		_ = grpc.SetTrailer(ctx, md)
		return nil, status.Error(f.code, f.msg)
	}
	return resp, nil
}

// serve runs m, received from the member named from ("" for a peer
// without a certificate), on the Local: the part of a call both
// transports share.
func (s *Server) serve(ctx context.Context, m *forwardpb.PredictRequest, from string) (*forwardpb.PredictResponse, *failure) {
	ctx, req, f := s.prepare(ctx, m, from)
	if f != nil {
		return nil, f
	}
	return s.outcome(s.local.Predict(ctx, req))
}

// prepare checks and decodes m, received from the member named from, and
// returns the context and request to give the Local, or the failure to
// answer.
func (s *Server) prepare(ctx context.Context, m *forwardpb.PredictRequest, from string) (context.Context, ForwardedRequest, *failure) {
	if h := m.GetHops(); h != hopsForwarded {
		return nil, ForwardedRequest{}, &failure{code: codes.Unavailable, kind: servables.Unavailable, msg: fmt.Sprintf("hop count %d: a request is forwarded once, by the node that took it, and served where it arrives", h)}

	}
	req, err := decodeRequest(m, s.now())
	if err != nil {
		return nil, ForwardedRequest{}, &failure{code: codes.InvalidArgument, kind: servables.InvalidInput, msg: err.Error()}
	}
	if from == "" && req.Caller.Method != "" && req.Caller.Method != "none" {
		return nil, ForwardedRequest{}, &failure{code: codes.PermissionDenied, kind: servables.Execution, msg: fmt.Sprintf("the request carries caller %q (%s) but its peer presented no client certificate: a forwarded identity is believed only from a member with a verified certificate", req.Caller.Name, req.Caller.Method)}

	}
	ctx = context.WithValue(ctx, forwardedKey{}, true)
	if m.GetCaller() != nil {
		ctx = auth.NewContext(ctx, req.Caller)
	}
	return ctx, ForwardedRequest{Request: req, Peer: from}, nil
}

// outcome is the answer to send for the Local's answer ans or error err.
// A call Stop canceled fails Unavailable, not Canceled: this node stopped,
// its caller did not give up, and its node tries another replica.
func (s *Server) outcome(ans Answer, err error) (*forwardpb.PredictResponse, *failure) {
	if err != nil {
		k := servables.KindOf(err)
		if k == servables.Canceled && s.base.Err() != nil {
			k, err = servables.Unavailable, fmt.Errorf("node %s is stopping: %w", s.node, err)
		}
		f := &failure{code: Code(k), kind: k, msg: err.Error()}
		if h, ok := errors.AsType[retryHint](err); ok {
			f.retryAfter = h.RetryIn()
		}
		return nil, f
	}
	return encodeAnswer(&ans, s.node), nil
}
