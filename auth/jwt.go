package auth

import (
	"crypto/sha256"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/golang-jwt/jwt/v5"
)

// JWTConfig says how JWT bearer tokens are verified.
type JWTConfig struct {
	// JWKSFile is the JSON Web Key Set file the signatures are checked
	// against; empty turns JWTs off.
	JWKSFile string
	// Issuer and Audience are the iss and aud a token must carry.
	Issuer, Audience string
	// RolesClaim names the claim listing the roles (a list of strings, or
	// one space-separated string); empty means "roles".
	RolesClaim string
}

// jwtMethods are the signature algorithms accepted: never "none" or HMAC,
// whose key would be the public JWKS.
var jwtMethods = []string{"RS256", "RS384", "RS512", "PS256", "PS384", "PS512", "ES256", "ES384", "ES512", "EdDSA"}

// maxJWTCache bounds the verified tokens kept; past it, expired ones are
// dropped, and if none were, all.
const maxJWTCache = 16384

// cachedJWT is a verified token's identity and expiry.
type cachedJWT struct {
	id  Identity
	exp time.Time
}

// jwtVerifier checks JWTs against a JWKS and caches those it verified
// until they expire.
type jwtVerifier struct {
	cfg   JWTConfig
	now   func() time.Time
	mu    sync.RWMutex
	keys  JWKS
	gen   uint64 // counts setKeys: a token verified with older keys is not cached
	cache map[[sha256.Size]byte]cachedJWT
}

// setKeys replaces the keys and forgets every cached token (one signed by
// a removed key must stop working).
func (v *jwtVerifier) setKeys(keys JWKS) {
	v.mu.Lock()
	v.keys = keys
	v.gen++
	v.cache = make(map[[sha256.Size]byte]cachedJWT)
	v.mu.Unlock()
}

// looksLikeJWT reports whether a bearer token has a JWT's three parts.
func looksLikeJWT(token string) bool { return strings.Count(token, ".") == 2 }

// verify returns the identity of a JWT, from the cache while it is valid.
func (v *jwtVerifier) verify(token string) (Identity, error) {
	h := sha256.Sum256([]byte(token))
	now := v.now()
	v.mu.RLock()
	c, ok := v.cache[h]
	keys, gen := v.keys, v.gen
	v.mu.RUnlock()
	if ok && now.Before(c.exp) {
		return c.id, nil
	}
	id, exp, err := v.parse(token, keys, now)
	if err != nil {
		return Identity{}, err
	}
	v.store(h, gen, cachedJWT{id: id, exp: exp}, now)
	return id, nil
}

// store caches c, the identity of the token of hash h verified with the
// keys of generation gen, unless setKeys replaced those keys meanwhile: a
// token signed by a key the JWKS just dropped, verified while it changed,
// must not outlive the change in the cache.
func (v *jwtVerifier) store(h [sha256.Size]byte, gen uint64, c cachedJWT, now time.Time) {
	v.mu.Lock()
	defer v.mu.Unlock()
	if gen != v.gen {
		return
	}
	if len(v.cache) >= maxJWTCache {
		for k, e := range v.cache {
			if !now.Before(e.exp) {
				delete(v.cache, k)
			}
		}
		if len(v.cache) >= maxJWTCache {
			clear(v.cache)
		}
	}
	v.cache[h] = c
}

// parse verifies token's signature, issuer, audience and expiry (required)
// and reads its subject and roles.
func (v *jwtVerifier) parse(token string, keys JWKS, now time.Time) (Identity, time.Time, error) {
	p := jwt.NewParser(jwt.WithValidMethods(jwtMethods), jwt.WithExpirationRequired(),
		jwt.WithIssuer(v.cfg.Issuer), jwt.WithAudience(v.cfg.Audience), jwt.WithIssuedAt(),
		jwt.WithTimeFunc(func() time.Time { return now }))
	claims := jwt.MapClaims{}
	_, err := p.ParseWithClaims(token, claims, func(t *jwt.Token) (any, error) {
		kid, _ := t.Header["kid"].(string)
		k, ok := keys[kid]
		if !ok {
			return nil, fmt.Errorf("no key with id %q in the JWKS", kid)
		}
		return k, nil
	})
	if err != nil {
		return Identity{}, time.Time{}, fmt.Errorf("%w: JWT refused: %v", ErrUnauthenticated, jwtReason(err))
	}
	exp, _ := claims.GetExpirationTime() // required, so present
	sub, _ := claims.GetSubject()
	if sub == "" {
		return Identity{}, time.Time{}, fmt.Errorf("%w: JWT refused: it has no sub claim", ErrUnauthenticated)
	}
	claim := v.cfg.RolesClaim
	if claim == "" {
		claim = "roles"
	}
	var names []string
	switch rv := claims[claim].(type) {
	case string:
		names = strings.Fields(rv)
	case []any:
		for _, e := range rv {
			s, ok := e.(string)
			if !ok {
				return Identity{}, time.Time{}, fmt.Errorf("%w: JWT refused: claim %q holds a non-string", ErrUnauthenticated, claim)
			}
			names = append(names, s)
		}
	case nil:
	default:
		return Identity{}, time.Time{}, fmt.Errorf("%w: JWT refused: claim %q is not a list of strings", ErrUnauthenticated, claim)
	}
	var roles []Role
	for _, n := range names {
		if r, err := ParseRole(n); err == nil { // roles of other systems are ignored
			roles = append(roles, r)
		}
	}
	return Identity{Name: sub, Roles: roles, Method: MethodJWT}, exp.Time, nil
}

// jwtReason is err without the token: the library's errors name the
// failed check, never the token.
func jwtReason(err error) string {
	switch {
	case errors.Is(err, jwt.ErrTokenExpired):
		return "expired"
	case errors.Is(err, jwt.ErrTokenRequiredClaimMissing):
		return "a required claim (exp) is missing"
	case errors.Is(err, jwt.ErrTokenInvalidIssuer):
		return "wrong issuer"
	case errors.Is(err, jwt.ErrTokenInvalidAudience):
		return "wrong audience"
	case errors.Is(err, jwt.ErrTokenNotValidYet), errors.Is(err, jwt.ErrTokenUsedBeforeIssued):
		return "not valid yet"
	case errors.Is(err, jwt.ErrTokenSignatureInvalid):
		return "bad signature"
	case errors.Is(err, jwt.ErrTokenMalformed):
		return "malformed"
	case errors.Is(err, jwt.ErrTokenUnverifiable):
		return "unverifiable (unknown key id or algorithm)"
	}
	return "invalid"
}
