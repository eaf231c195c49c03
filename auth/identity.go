// Package auth decides who a caller is and what the caller may do: the
// identities (bearer tokens from a file, JWTs, mTLS client certificates),
// the roles they hold, and the per-identity request limits. The HTTP and
// gRPC servers ask it before a handler runs; handlers read the caller from
// the request's context (FromContext).
package auth

import (
	"context"
	"fmt"
	"slices"
	"strings"
)

// Role is a permission a caller holds.
type Role string

// The roles Grove checks. Probes (health, readiness, OIP live/ready and
// model ready, gRPC health) need none.
const (
	// RoleInfer allows every scoring call.
	RoleInfer Role = "infer"
	// RoleRead allows status, metadata, configuration, statistics, the
	// repository index, contract reads, metrics and the audit trail.
	RoleRead Role = "read"
	// RoleManage allows the management API, model registration and
	// deletion, and OIP repository load/unload.
	RoleManage Role = "manage"
	// RoleAdmin allows pprof.
	RoleAdmin Role = "admin"
	// RoleFeedback allows reporting outcomes (POST /v1/outcomes,
	// grove.v1.Outcomes/Report); a caller holding RoleManage may too (May).
	RoleFeedback Role = "feedback"
)

// Roles are every role, in the order they are documented.
var Roles = [...]Role{RoleInfer, RoleRead, RoleManage, RoleAdmin, RoleFeedback}

// ParseRole returns the role named s, or an error listing the roles.
func ParseRole(s string) (Role, error) {
	for _, r := range Roles {
		if string(r) == s {
			return r, nil
		}
	}
	return "", fmt.Errorf("unknown role %q (roles: infer, read, manage, admin, feedback)", s)
}

// The methods by which a caller proves who it is (Identity.Method).
const (
	// MethodToken is a bearer token of the tokens file.
	MethodToken = "token"
	// MethodJWT is a JWT bearer token.
	MethodJWT = "jwt"
	// MethodCertificate is a client certificate the TLS layer verified.
	MethodCertificate = "certificate"
	// MethodNone is no proof: authentication is off.
	MethodNone = "none"
)

// Identity is an authenticated caller.
type Identity struct {
	// Name names the caller within its Method: a token's name, a
	// certificate's first DNS or URI SAN (else its subject CN), or a
	// JWT's subject. It is never a secret. The names of different methods
	// share no namespace (a JWT whose subject is a token's name is not
	// that token): where an identity is shown or keyed by one string, it
	// is Qualified.
	Name string
	// Roles are what the caller may do.
	Roles []Role
	// Method says how the caller proved who it is: MethodToken,
	// MethodJWT, MethodCertificate, or MethodNone when authentication is
	// off.
	Method string
}

// Has reports whether id holds role r itself (what auth.limits by role
// match).
func (id Identity) Has(r Role) bool { return slices.Contains(id.Roles, r) }

// May reports whether id may call a route or method that needs role r:
// it holds r, or a role whose holders may call r's routes too (manage
// for feedback). The HTTP and gRPC
// servers check it, so that a route still declares the one role it needs.
func (id Identity) May(r Role) bool {
	if id.Has(r) {
		return true
	}
	for _, by := range impliedBy[r] {
		if id.Has(by) {
			return true
		}
	}
	return false
}

// impliedBy lists, for a role, the other roles whose holders may call its
// routes too: a manager may report outcomes (it may already change what
// they judge).
var impliedBy = map[Role][]Role{RoleFeedback: {RoleManage}}

// Qualified is id's name prefixed by its method, as Kubernetes prefixes
// its usernames: "token:bidder-eu", "jwt:<sub>", "certificate:<name>".
// It names the identity in the limits (auth.limits) and in refusals.
func (id Identity) Qualified() string { return id.Method + ":" + id.Name }

// qualifiers are the methods a qualified name can start with.
var qualifiers = [...]string{MethodToken, MethodJWT, MethodCertificate}

// ParseQualified reads a name as auth.limits gives it: "token:NAME",
// "jwt:SUB" or "certificate:NAME" name an identity of that method; a name
// without one of those prefixes is a token's, so that limits written
// before names were qualified keep their meaning (a token whose name
// starts with "jwt:" is written "token:jwt:..."). It returns the method
// and the name within it, or an error for an empty name.
func ParseQualified(s string) (method, name string, err error) {
	method, name = MethodToken, s
	for _, m := range qualifiers {
		if rest, ok := strings.CutPrefix(s, m+":"); ok {
			method, name = m, rest
			break
		}
	}
	if name == "" {
		return "", "", fmt.Errorf("%q names no identity: give a token's name, or token:NAME, jwt:SUB or certificate:NAME", s)
	}
	return method, name, nil
}

type ctxKey struct{}

// NewContext returns ctx carrying id.
func NewContext(ctx context.Context, id Identity) context.Context {
	return context.WithValue(ctx, ctxKey{}, id)
}

// FromContext returns the identity ctx carries; ok is false when none was
// set (a probe, or a server without authentication).
func FromContext(ctx context.Context) (id Identity, ok bool) {
	id, ok = ctx.Value(ctxKey{}).(Identity)
	return id, ok
}
