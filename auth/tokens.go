package auth

import (
	"bytes"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"

	"gopkg.in/yaml.v3"
)

// ErrUnauthenticated is the error of a request without valid credentials;
// the errors the Authenticator returns wrap it with the reason, which never
// holds the credential itself.
var ErrUnauthenticated = errors.New("unauthenticated")

// Token is one entry of the tokens file: a name, the roles, and the
// SHA-256 of the token (never the token itself).
type Token struct {
	Name  string
	Roles []Role
	hash  [sha256.Size]byte
}

// Tokens are the entries of a tokens file keyed by their SHA-256.
type Tokens map[[sha256.Size]byte]Token

// tokenFile is the YAML shape of the tokens file.
type tokenFile struct {
	Tokens []struct {
		Name   string   `yaml:"name"`
		SHA256 string   `yaml:"sha256"`
		Roles  []string `yaml:"roles"`
	} `yaml:"tokens"`
}

// ParseTokens parses a tokens file:
//
//	tokens:
//	  - name: bidder-eu
//	    sha256: 9f86d0...   # of the token, lowercase hex
//	    roles: [infer]
//
// It returns the tokens, or an error naming the
// entry and the field that is wrong.
func ParseTokens(data []byte) (Tokens, error) {
	var f tokenFile
	dec := yaml.NewDecoder(bytes.NewReader(data))
	dec.KnownFields(true)
	if err := dec.Decode(&f); err != nil {
		if len(bytes.TrimSpace(data)) == 0 {
			return Tokens{}, nil
		}
		return nil, fmt.Errorf("tokens file: %v", err)
	}
	out := make(Tokens, len(f.Tokens))
	names := make(map[string]bool, len(f.Tokens))
	for i, t := range f.Tokens {
		where := fmt.Sprintf("tokens file: entry %d", i+1)
		if t.Name != "" {
			where += fmt.Sprintf(" (%s)", t.Name)
		}
		if t.Name == "" {
			return nil, fmt.Errorf("%s: name is required", where)
		}
		if names[t.Name] {
			return nil, fmt.Errorf("%s: the name is used twice", where)
		}
		names[t.Name] = true
		var e Token
		e.Name = t.Name
		if len(t.SHA256) != 2*sha256.Size || strings.ToLower(t.SHA256) != t.SHA256 {
			return nil, fmt.Errorf("%s: sha256 must be the token's SHA-256 as 64 lowercase hex digits", where)
		}
		if _, err := hex.Decode(e.hash[:], []byte(t.SHA256)); err != nil {
			return nil, fmt.Errorf("%s: sha256 must be the token's SHA-256 as 64 lowercase hex digits", where)
		}
		if _, dup := out[e.hash]; dup {
			return nil, fmt.Errorf("%s: the same sha256 is listed twice", where)
		}
		if len(t.Roles) == 0 {
			return nil, fmt.Errorf("%s: roles must list at least one role", where)
		}
		for _, s := range t.Roles {
			r, err := ParseRole(s)
			if err != nil {
				return nil, fmt.Errorf("%s: %v", where, err)
			}
			e.Roles = append(e.Roles, r)
		}
		out[e.hash] = e
	}
	return out, nil
}

// ParseBearer returns the token of an "Authorization: Bearer <token>"
// header value (the scheme case-insensitive, RFC 6750's token68 syntax),
// or an error that says what is wrong without quoting the value.
func ParseBearer(header string) (string, error) {
	scheme, token, ok := strings.Cut(header, " ")
	if !ok || !strings.EqualFold(scheme, "Bearer") {
		return "", fmt.Errorf("%w: the authorization is not \"Bearer <token>\"", ErrUnauthenticated)
	}
	token = strings.TrimLeft(token, " ")
	if token == "" {
		return "", fmt.Errorf("%w: the bearer token is empty", ErrUnauthenticated)
	}
	if len(token) > 16<<10 {
		return "", fmt.Errorf("%w: the bearer token is longer than 16 KiB", ErrUnauthenticated)
	}
	for i := 0; i < len(token); i++ {
		c := token[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || strings.IndexByte("-._~+/=", c) >= 0) {
			return "", fmt.Errorf("%w: the bearer token has a character outside RFC 6750's token syntax", ErrUnauthenticated)
		}
	}
	return token, nil
}

// lookupToken finds the entry of token's SHA-256. The map lookup is by
// hash, so its timing depends on the hash, not on how much of a stored
// token a guess matches; the stored hash is compared again in constant
// time.
func lookupToken(tokens Tokens, token string) (Token, bool) {
	h := sha256.Sum256([]byte(token))
	e, ok := tokens[h]
	if !ok || subtle.ConstantTimeCompare(e.hash[:], h[:]) != 1 {
		return Token{}, false
	}
	return e, true
}
