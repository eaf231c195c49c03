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
)

// Roles are every role, in the order they are documented.
var Roles = [...]Role{RoleInfer, RoleRead, RoleManage, RoleAdmin}

// ParseRole returns the role named s, or an error listing the roles.
func ParseRole(s string) (Role, error) {
	for _, r := range Roles {
		if string(r) == s {
			return r, nil
		}
	}
	return "", fmt.Errorf("unknown role %q (roles: infer, read, manage, admin)", s)
}

// Identity is an authenticated caller.
type Identity struct {
	// Name names the caller in logs, the audit trail and limits: a token's
	// name, a certificate's first DNS or URI SAN (else its subject CN), or
	// a JWT's subject. It is never a secret.
	Name string
	// Roles are what the caller may do.
	Roles []Role
	// Method says how the caller proved who it is: "token", "jwt",
	// "certificate", or "none" when authentication is off.
	Method string
}

// Has reports whether id holds role r.
func (id Identity) Has(r Role) bool { return slices.Contains(id.Roles, r) }

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
