package auth

import (
	"errors"
	"strings"
	"testing"
)

// bearerErrors are ParseBearer's messages.
var bearerErrors = map[string]bool{
	`the authorization is not "Bearer <token>"`:                        true,
	"the bearer token is empty":                                        true,
	"the bearer token is longer than 16 KiB":                           true,
	"the bearer token has a character outside RFC 6750's token syntax": true,
}

// FuzzParseBearer checks the Authorization header parser never panics,
// returns a token only of RFC 6750's syntax, and never quotes the header
// in its errors.
func FuzzParseBearer(f *testing.F) {
	for _, s := range []string{"Bearer abc", "bearer a.b.c", "Basic dXNlcjpwYXNz", "Bearer", "Bearer  x", "Bearer a b", ""} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, header string) {
		tok, err := ParseBearer(header)
		if err != nil {
			if !errors.Is(err, ErrUnauthenticated) || tok != "" {
				t.Fatalf("ParseBearer: %q, %v", tok, err)
			}
			// The message is one of a fixed few: it cannot quote the header.
			if !bearerErrors[Reason(err)] {
				t.Fatalf("unexpected error (quoting the header?): %v", err)
			}
			return
		}
		if tok == "" || strings.ContainsAny(tok, " \t\r\n") || !strings.HasSuffix(header, tok) {
			t.Fatalf("ParseBearer(%q) = %q", header, tok)
		}
	})
}

// FuzzParseTokens checks the tokens file parser never panics and that
// every entry it accepts has a name, a role and a hash it is keyed by.
func FuzzParseTokens(f *testing.F) {
	f.Add([]byte("tokens:\n  - name: a\n    sha256: 9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08\n    roles: [infer]\n"))
	f.Add([]byte("tokens: []\n"))
	f.Add([]byte("tokens:\n  - {name: a, sha256: x, roles: [root]}\n"))
	f.Add([]byte("{"))
	f.Fuzz(func(t *testing.T, data []byte) {
		toks, err := ParseTokens(data)
		if err != nil {
			return
		}
		for h, e := range toks {
			if e.Name == "" || len(e.Roles) == 0 || e.hash != h {
				t.Fatalf("accepted entry %+v", e)
			}
			for _, r := range e.Roles {
				if _, err := ParseRole(string(r)); err != nil {
					t.Fatalf("accepted role %q", r)
				}
			}
		}
	})
}

// FuzzParseJWKS checks the JWKS parser never panics and accepts only
// public keys.
func FuzzParseJWKS(f *testing.F) {
	f.Add([]byte(`{"keys":[{"kty":"OKP","crv":"Ed25519","kid":"a","x":"11qYAYKxCrfVS_7TyWQHOg7hcvPapiMlrwIaaPcHURo"}]}`))
	f.Add([]byte(`{"keys":[{"kty":"EC","crv":"P-256","x":"AAAA","y":"AAAA"}]}`))
	f.Add([]byte(`{"keys":[{"kty":"RSA","n":"AQAB","e":"AQAB"}]}`))
	f.Add([]byte(`{"keys":[{"kty":"oct","use":"enc","k":"AAAA"}]}`))
	f.Add([]byte(`{}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		keys, err := ParseJWKS(data)
		if err != nil {
			return
		}
		for kid, k := range keys {
			if k == nil {
				t.Fatalf("key %q is nil", kid)
			}
		}
	})
}
