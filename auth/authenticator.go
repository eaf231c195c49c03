package auth

import (
	"context"
	"crypto/sha256"
	"crypto/x509"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"net/http"
	"strings"
	"sync/atomic"
	"time"

	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/peer"

	"github.com/groveml/grove/internal/capped"
)

// Config configures an Authenticator.
type Config struct {
	// TokensFile is the bearer tokens file (see ParseTokens); empty means
	// no static tokens.
	TokensFile string
	// ClientRoles maps the name of a verified client certificate (its
	// first DNS or URI SAN, else its subject CN) to its roles.
	ClientRoles map[string][]Role
	// JWT configures JWT bearer tokens; JWT.JWKSFile empty turns them off.
	JWT JWTConfig
	// Limits are the per-identity request rates.
	Limits []Limit
	// MaxInFlight is the most requests one identity may have in flight at
	// once (Begin); 0 means no limit.
	MaxInFlight int
	// Now is the clock; nil means time.Now.
	Now func() time.Time
	// Logger receives file reloads and their failures; nil means slog.Default().
	Logger *slog.Logger
}

// Enabled reports whether c configures any way to authenticate: with none,
// the servers run without authentication.
func (c Config) Enabled() bool {
	return c.TokensFile != "" || c.JWT.JWKSFile != "" || len(c.ClientRoles) > 0
}

// Authenticator decides who a caller is (HTTP, GRPC, Bearer, Certificate)
// and whether it is within its limits: its request rate (Allow) and its
// requests in flight (Begin). The files it reads are
// reloaded by Refresh, which Run calls every second.
type Authenticator struct {
	cfg      Config
	now      func() time.Time
	log      *slog.Logger
	tokens   atomic.Pointer[Tokens]
	jwt      *jwtVerifier
	limiter  *limiter
	inflight *inflight // nil without Config.MaxInFlight
	files    []*watched
}

// maxFileBytes is the largest tokens or JWKS file read: tens of
// thousands of tokens, far more keys than any provider publishes.
const maxFileBytes = 16 << 20

// readFile reads an authentication file, held to maxFileBytes.
func readFile(path string) ([]byte, error) { return capped.ReadFile(path, maxFileBytes, path) }

// watched is a file reloaded when its contents change.
type watched struct {
	path string
	sum  [sha256.Size]byte
	load func([]byte) error
	gone func()
	// readErr is the last read's error, logged once until a read works,
	// fails otherwise or finds the file removed.
	readErr string
}

// New returns an Authenticator for cfg, having read its files; an error
// names the file and what is wrong with it.
func New(cfg Config) (*Authenticator, error) {
	a := &Authenticator{cfg: cfg, now: cfg.Now, log: cfg.Logger}
	if a.now == nil {
		a.now = time.Now
	}
	if a.log == nil {
		a.log = slog.Default()
	}
	empty := Tokens{}
	a.tokens.Store(&empty)
	if cfg.TokensFile != "" {
		a.files = append(a.files, &watched{path: cfg.TokensFile,
			load: func(b []byte) error {
				t, err := ParseTokens(b)
				if err == nil {
					a.tokens.Store(&t)
				}
				return err
			},
			gone: func() { a.tokens.Store(&empty) },
		})
	}
	if cfg.JWT.JWKSFile != "" {
		if cfg.JWT.Issuer == "" || cfg.JWT.Audience == "" {
			return nil, errors.New("JWTs need an issuer and an audience to check")
		}
		a.jwt = &jwtVerifier{cfg: cfg.JWT, now: a.now}
		a.jwt.setKeys(JWKS{})
		a.files = append(a.files, &watched{path: cfg.JWT.JWKSFile,
			load: func(b []byte) error {
				k, err := ParseJWKS(b)
				if err == nil {
					a.jwt.setKeys(k)
				}
				return err
			},
			gone: func() { a.jwt.setKeys(JWKS{}) },
		})
	}
	for _, f := range a.files {
		b, err := readFile(f.path)
		if err != nil {
			return nil, err
		}
		if err := f.load(b); err != nil {
			return nil, fmt.Errorf("%s: %w", f.path, err)
		}
		f.sum = sha256.Sum256(b)
	}
	l, err := newLimiter(cfg.Limits, a.now)
	if err != nil {
		return nil, err
	}
	a.limiter = l
	switch {
	case cfg.MaxInFlight < 0:
		return nil, fmt.Errorf("the most requests in flight per identity is %d; it must not be negative (0: no limit)", cfg.MaxInFlight)
	case cfg.MaxInFlight > 0:
		a.inflight = &inflight{max: int64(cfg.MaxInFlight)}
	}
	return a, nil
}

// Refresh reloads the files whose contents changed. A file that no longer
// parses, or cannot be read (larger than its limit, say), keeps its last
// good contents (and is logged once); a file that was removed takes its
// tokens or keys with it.
func (a *Authenticator) Refresh() {
	for _, f := range a.files {
		b, err := readFile(f.path)
		switch {
		case errors.Is(err, fs.ErrNotExist):
			f.readErr = "" // a file put back that cannot be read is logged anew
			if f.sum != ([sha256.Size]byte{}) {
				a.log.Error("authentication file removed: its credentials no longer work", "file", f.path)
				f.gone()
				f.sum = [sha256.Size]byte{}
			}
			continue
		case err != nil:
			if err.Error() != f.readErr {
				a.log.Error("reading an authentication file; keeping its last contents", "file", f.path, "err", err)
				f.readErr = err.Error()
			}
			continue
		}
		f.readErr = ""
		sum := sha256.Sum256(b)
		if sum == f.sum {
			continue
		}
		if err := f.load(b); err != nil {
			a.log.Error("authentication file changed but is invalid; keeping its last good contents", "file", f.path, "err", err)
			f.sum = sum // logged once per change
			continue
		}
		f.sum = sum
		a.log.Info("authentication file reloaded", "file", f.path)
	}
}

// RefreshInterval is how often Run reloads the files: a token removed
// from its file stops working within two intervals.
const RefreshInterval = time.Second

// Run calls Refresh every RefreshInterval until ctx is done.
func (a *Authenticator) Run(ctx context.Context) {
	t := time.NewTicker(RefreshInterval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			a.Refresh()
		}
	}
}

// ErrNoCredentials is the error of a request with no credentials at all.
var ErrNoCredentials = fmt.Errorf("%w: no credentials: send Authorization: Bearer <token> or a client certificate", ErrUnauthenticated)

// Bearer returns the identity of a bearer token: a token of the tokens
// file (compared by SHA-256, in constant time), else a JWT.
func (a *Authenticator) Bearer(token string) (Identity, error) {
	if e, ok := lookupToken(*a.tokens.Load(), token); ok {
		return Identity{Name: e.Name, Roles: e.Roles, Method: MethodToken}, nil
	}
	if a.jwt != nil && looksLikeJWT(token) {
		return a.jwt.verify(token)
	}
	return Identity{}, fmt.Errorf("%w: unknown bearer token", ErrUnauthenticated)
}

// CertificateName is the name of a client certificate: its first DNS SAN,
// else its first URI SAN, else its subject CN.
func CertificateName(c *x509.Certificate) string {
	switch {
	case len(c.DNSNames) > 0:
		return c.DNSNames[0]
	case len(c.URIs) > 0:
		return c.URIs[0].String()
	}
	return c.Subject.CommonName
}

// Certificate returns the identity of a client certificate the TLS layer
// verified against the client CA; its roles are auth.client_roles'.
func (a *Authenticator) Certificate(c *x509.Certificate) (Identity, error) {
	name := CertificateName(c)
	if name == "" {
		return Identity{}, fmt.Errorf("%w: the client certificate has no SAN and no subject CN to name it", ErrUnauthenticated)
	}
	return Identity{Name: name, Roles: a.cfg.ClientRoles[name], Method: MethodCertificate}, nil
}

// authorization returns the identity of the values of an authorization
// header or metadata entry: exactly one, a bearer token.
func (a *Authenticator) authorization(values []string) (Identity, error) {
	if len(values) > 1 {
		return Identity{}, fmt.Errorf("%w: more than one authorization header", ErrUnauthenticated)
	}
	tok, err := ParseBearer(values[0])
	if err != nil {
		return Identity{}, err
	}
	return a.Bearer(tok)
}

// HTTP returns the identity of an HTTP request: its Authorization header's
// bearer token if it has one, else its verified client certificate.
func (a *Authenticator) HTTP(r *http.Request) (Identity, error) {
	if h := r.Header.Values("Authorization"); len(h) > 0 {
		return a.authorization(h)
	}
	if r.TLS != nil && len(r.TLS.VerifiedChains) > 0 && len(r.TLS.PeerCertificates) > 0 {
		return a.Certificate(r.TLS.PeerCertificates[0])
	}
	return Identity{}, ErrNoCredentials
}

// GRPC returns the identity of a gRPC call from its incoming context: its
// authorization metadata's bearer token if it has one, else the client
// certificate its peer's TLS verified.
func (a *Authenticator) GRPC(ctx context.Context, md metadata.MD) (Identity, error) {
	if h := md.Get("authorization"); len(h) > 0 {
		return a.authorization(h)
	}
	if p, ok := peer.FromContext(ctx); ok {
		if ti, ok := p.AuthInfo.(credentials.TLSInfo); ok && len(ti.State.VerifiedChains) > 0 && len(ti.State.PeerCertificates) > 0 {
			return a.Certificate(ti.State.PeerCertificates[0])
		}
	}
	return Identity{}, ErrNoCredentials
}

// Allow takes one request from id's limit; when none is left it returns
// false and how long until one is.
func (a *Authenticator) Allow(id Identity) (ok bool, retryAfter time.Duration) {
	return a.limiter.allow(id)
}

// Reason is err's message for the caller: what is wrong with the
// credentials, never the credentials.
func Reason(err error) string {
	return strings.TrimPrefix(err.Error(), ErrUnauthenticated.Error()+": ")
}
