package auth

import (
	"bytes"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"
)

func sum(tok string) string { h := sha256.Sum256([]byte(tok)); return hex.EncodeToString(h[:]) }

func tokensYAML(entries ...string) string {
	var b strings.Builder
	b.WriteString("tokens:\n")
	for i := 0; i+2 < len(entries)+1; i += 3 {
		fmt.Fprintf(&b, "  - name: %s\n    sha256: %s\n    roles: [%s]\n", entries[i], sum(entries[i+1]), entries[i+2])
	}
	return b.String()
}

func TestParseTokens(t *testing.T) {
	good := sum("secret")
	for _, c := range []struct{ name, in, err string }{
		{"ok", tokensYAML("bidder", "secret", "infer"), ""},
		{"empty file", "", ""},
		{"no name", "tokens:\n  - sha256: " + good + "\n    roles: [infer]\n", "entry 1: name is required"},
		{"uppercase hash", "tokens:\n  - name: a\n    sha256: " + strings.ToUpper(good) + "\n    roles: [infer]\n", "64 lowercase hex"},
		{"short hash", "tokens:\n  - name: a\n    sha256: abc\n    roles: [infer]\n", "64 lowercase hex"},
		{"bad role", "tokens:\n  - name: a\n    sha256: " + good + "\n    roles: [root]\n", `unknown role "root"`},
		{"no roles", "tokens:\n  - name: a\n    sha256: " + good + "\n", "at least one role"},
		{"dup name", tokensYAML("a", "x", "infer", "a", "y", "read"), "name is used twice"},
		{"dup hash", tokensYAML("a", "x", "infer", "b", "x", "read"), "same sha256"},
		{"unknown key", "tokens:\n  - name: a\n    token: plain\n", "not found"},
		{"not yaml", "tokens: [", "tokens file"},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, err := ParseTokens([]byte(c.in))
			if c.err == "" && err != nil || c.err != "" && (err == nil || !strings.Contains(err.Error(), c.err)) {
				t.Fatalf("err = %v, want %q", err, c.err)
			}
			if err != nil && strings.Contains(err.Error(), good) {
				t.Fatalf("error quotes the hash: %v", err)
			}
		})
	}
}

func TestParseBearer(t *testing.T) {
	for _, c := range []struct{ in, tok, err string }{
		{"Bearer abc", "abc", ""},
		{"bearer a.b.c", "a.b.c", ""},
		{"BEARER  x-y_z~+/=", "x-y_z~+/=", ""},
		{"Basic abc", "", "not \"Bearer"},
		{"Bearer", "", "not \"Bearer"},
		{"Bearer ", "", "empty"},
		{"Bearer a b", "", "RFC 6750"},
		{"Bearer s\u00e9cret", "", "RFC 6750"},
		{"Bearer " + strings.Repeat("a", 17<<10), "", "16 KiB"},
	} {
		tok, err := ParseBearer(c.in)
		if tok != c.tok || c.err == "" && err != nil || c.err != "" && (err == nil || !strings.Contains(err.Error(), c.err)) {
			t.Errorf("ParseBearer(%.20q) = %q, %v; want %q, %q", c.in, tok, err, c.tok, c.err)
		}
		if err != nil && (!errors.Is(err, ErrUnauthenticated) || strings.Contains(err.Error(), "cret")) {
			t.Errorf("ParseBearer(%.20q): error %v is not ErrUnauthenticated or quotes the token", c.in, err)
		}
	}
}

// clock is a settable clock.
type clock struct{ t time.Time }

func (c *clock) now() time.Time { return c.t }

func write(t *testing.T, path, data string) {
	t.Helper()
	if err := writeFile(path, data); err != nil {
		t.Fatal(err)
	}
}

func writeFile(path, data string) error { return os.WriteFile(path, []byte(data), 0o600) }

func TestTokensAndReload(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "tokens.yaml")
	write(t, path, tokensYAML("bidder", "s1", "infer", "bot", "s2", "read, manage"))
	a, err := New(Config{TokensFile: path})
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		tok, name string
		roles     []Role
	}{{"s1", "bidder", []Role{RoleInfer}}, {"s2", "bot", []Role{RoleRead, RoleManage}}, {"s3", "", nil}} {
		id, err := a.Bearer(c.tok)
		if c.name == "" {
			if !errors.Is(err, ErrUnauthenticated) || strings.Contains(err.Error(), c.tok) {
				t.Errorf("Bearer(%s): %v, want an ErrUnauthenticated without the token", c.tok, err)
			}
			continue
		}
		if err != nil || id.Name != c.name || fmt.Sprint(id.Roles) != fmt.Sprint(c.roles) || id.Method != "token" {
			t.Errorf("Bearer(%s) = %+v, %v", c.tok, id, err)
		}
	}
	write(t, path, tokensYAML("bot", "s2", "read"))
	a.Refresh()
	if _, err := a.Bearer("s1"); err == nil {
		t.Error("a token removed from the file still works after Refresh")
	}
	write(t, path, "tokens: [") // invalid: the last good contents stay
	a.Refresh()
	if _, err := a.Bearer("s2"); err != nil {
		t.Errorf("an invalid file dropped the last good tokens: %v", err)
	}
	os.Remove(path)
	a.Refresh()
	if _, err := a.Bearer("s2"); err == nil {
		t.Error("a removed file's token still works")
	}
	if _, err := New(Config{TokensFile: filepath.Join(dir, "missing")}); err == nil {
		t.Error("New with a missing tokens file succeeded")
	}
}

func TestCertificate(t *testing.T) {
	u, _ := url.Parse("spiffe://grove/bidder")
	a, _ := New(Config{ClientRoles: map[string][]Role{"bidder.example": {RoleInfer}, "spiffe://grove/bidder": {RoleRead}, "cn-only": {RoleManage}}})
	for _, c := range []struct {
		cert *x509.Certificate
		name string
		role Role
	}{
		{&x509.Certificate{DNSNames: []string{"bidder.example", "x"}, URIs: []*url.URL{u}, Subject: pkix.Name{CommonName: "cn"}}, "bidder.example", RoleInfer},
		{&x509.Certificate{URIs: []*url.URL{u}, Subject: pkix.Name{CommonName: "cn"}}, "spiffe://grove/bidder", RoleRead},
		{&x509.Certificate{Subject: pkix.Name{CommonName: "cn-only"}}, "cn-only", RoleManage},
		{&x509.Certificate{Subject: pkix.Name{CommonName: "stranger"}}, "stranger", ""},
	} {
		id, err := a.Certificate(c.cert)
		if err != nil || id.Name != c.name || c.role != "" && !id.Has(c.role) || c.role == "" && len(id.Roles) > 0 {
			t.Errorf("Certificate: %+v, %v; want %s with %q", id, err, c.name, c.role)
		}
	}
	if _, err := a.Certificate(&x509.Certificate{}); err == nil {
		t.Error("a certificate without a name was accepted")
	}
	// Over HTTP only a verified chain counts.
	r := httptest.NewRequest("GET", "/", nil)
	cert := &x509.Certificate{Subject: pkix.Name{CommonName: "cn-only"}}
	r.TLS = &tls.ConnectionState{PeerCertificates: []*x509.Certificate{cert}}
	if _, err := a.HTTP(r); !errors.Is(err, ErrNoCredentials) {
		t.Errorf("an unverified certificate: %v", err)
	}
	r.TLS.VerifiedChains = [][]*x509.Certificate{{cert}}
	if id, err := a.HTTP(r); err != nil || id.Name != "cn-only" || id.Method != "certificate" {
		t.Errorf("a verified certificate: %+v, %v", id, err)
	}
}

// jwtEnv is a JWKS file with one EC key and a signer.
type jwtEnv struct {
	key  *ecdsa.PrivateKey
	path string
}

func newJWTEnv(t testing.TB, kid string) jwtEnv {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "jwks.json")
	b64 := base64.RawURLEncoding.EncodeToString
	x, y := key.PublicKey.X.FillBytes(make([]byte, 32)), key.PublicKey.Y.FillBytes(make([]byte, 32))
	if err := os.WriteFile(path, []byte(fmt.Sprintf(`{"keys":[{"kty":"EC","crv":"P-256","kid":%q,"use":"sig","x":%q,"y":%q}]}`, kid, b64(x), b64(y))), 0o600); err != nil {
		t.Fatal(err)
	}
	return jwtEnv{key: key, path: path}
}

func (e jwtEnv) sign(t testing.TB, kid string, claims jwt.MapClaims) string {
	tok := jwt.NewWithClaims(jwt.SigningMethodES256, claims)
	tok.Header["kid"] = kid
	s, err := tok.SignedString(e.key)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func TestJWT(t *testing.T) {
	env := newJWTEnv(t, "k1")
	clk := &clock{t: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)}
	a, err := New(Config{JWT: JWTConfig{JWKSFile: env.path, Issuer: "https://idp", Audience: "grove"}, Now: clk.now})
	if err != nil {
		t.Fatal(err)
	}
	exp := clk.t.Add(time.Hour).Unix()
	claims := func(mod func(jwt.MapClaims)) jwt.MapClaims {
		c := jwt.MapClaims{"iss": "https://idp", "aud": "grove", "sub": "alice", "exp": exp, "roles": []string{"read", "other-system"}}
		if mod != nil {
			mod(c)
		}
		return c
	}
	other, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	for _, c := range []struct {
		name, tok, err string
	}{
		{"ok", env.sign(t, "k1", claims(nil)), ""},
		{"space-separated roles", env.sign(t, "k1", claims(func(c jwt.MapClaims) { c["roles"] = "read infer" })), ""},
		{"wrong issuer", env.sign(t, "k1", claims(func(c jwt.MapClaims) { c["iss"] = "evil" })), "wrong issuer"},
		{"wrong audience", env.sign(t, "k1", claims(func(c jwt.MapClaims) { c["aud"] = "other" })), "wrong audience"},
		{"expired", env.sign(t, "k1", claims(func(c jwt.MapClaims) { c["exp"] = clk.t.Add(-time.Minute).Unix() })), "expired"},
		{"no exp", env.sign(t, "k1", claims(func(c jwt.MapClaims) { delete(c, "exp") })), "exp"},
		{"no sub", env.sign(t, "k1", claims(func(c jwt.MapClaims) { delete(c, "sub") })), "no sub"},
		{"unknown kid", env.sign(t, "k2", claims(nil)), "unverifiable"},
		{"other key", jwtEnv{key: other}.sign(t, "k1", claims(nil)), "bad signature"},
		{"bad roles", env.sign(t, "k1", claims(func(c jwt.MapClaims) { c["roles"] = 7 })), "not a list"},
		{"alg none", "eyJhbGciOiJub25lIn0.eyJzdWIiOiJ4In0.", "JWT refused"},
	} {
		t.Run(c.name, func(t *testing.T) {
			id, err := a.Bearer(c.tok)
			if c.err == "" {
				if err != nil || id.Name != "alice" || !id.Has(RoleRead) || id.Method != "jwt" {
					t.Fatalf("got %+v, %v", id, err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), c.err) || !errors.Is(err, ErrUnauthenticated) {
				t.Fatalf("err = %v, want %q", err, c.err)
			}
		})
	}
	// A cached token expires with its exp.
	tok := env.sign(t, "k1", claims(nil))
	if _, err := a.Bearer(tok); err != nil {
		t.Fatal(err)
	}
	clk.t = clk.t.Add(2 * time.Hour)
	if _, err := a.Bearer(tok); err == nil || !strings.Contains(err.Error(), "expired") {
		t.Fatalf("a cached token past its exp: %v", err)
	}
	// A key removed from the JWKS takes its cached tokens with it.
	clk.t = clk.t.Add(-2 * time.Hour)
	if _, err := a.Bearer(tok); err != nil {
		t.Fatal(err)
	}
	write(t, env.path, `{"keys":[]}`)
	a.Refresh()
	if _, err := a.Bearer(tok); err == nil {
		t.Fatal("a token of a removed key still works")
	}
	if _, err := New(Config{JWT: JWTConfig{JWKSFile: env.path}}); err == nil {
		t.Fatal("JWTs without issuer and audience were accepted")
	}
}

func TestParseJWKS(t *testing.T) {
	for _, c := range []struct{ name, in, err string }{
		{"empty set", `{"keys":[]}`, ""},
		{"enc key skipped", `{"keys":[{"kty":"oct","use":"enc","k":"AAAA"}]}`, ""},
		{"ed25519", `{"keys":[{"kty":"OKP","crv":"Ed25519","x":"11qYAYKxCrfVS_7TyWQHOg7hcvPapiMlrwIaaPcHURo"}]}`, ""},
		{"no keys", `{}`, `no "keys"`},
		{"not json", `{`, "JWKS"},
		{"private", `{"keys":[{"kty":"OKP","crv":"Ed25519","x":"11qYAYKxCrfVS_7TyWQHOg7hcvPapiMlrwIaaPcHURo","d":"x"}]}`, "private key"},
		{"hmac", `{"keys":[{"kty":"oct","k":"AAAA"}]}`, `kty "oct"`},
		{"short rsa", `{"keys":[{"kty":"RSA","n":"AQAB","e":"AQAB"}]}`, "too short"},
		{"bad ec point", `{"keys":[{"kty":"EC","crv":"P-256","x":"` + strings.Repeat("A", 43) + `","y":"` + strings.Repeat("A", 43) + `"}]}`, "not on curve"},
		{"bad curve", `{"keys":[{"kty":"EC","crv":"P-192","x":"AA","y":"AA"}]}`, "P-192"},
		{"bad base64", `{"keys":[{"kty":"OKP","crv":"Ed25519","x":"!!"}]}`, "base64url"},
		{"dup kid", `{"keys":[{"kty":"OKP","crv":"Ed25519","kid":"a","x":"11qYAYKxCrfVS_7TyWQHOg7hcvPapiMlrwIaaPcHURo"},{"kty":"OKP","crv":"Ed25519","kid":"a","x":"11qYAYKxCrfVS_7TyWQHOg7hcvPapiMlrwIaaPcHURo"}]}`, "used twice"},
	} {
		_, err := ParseJWKS([]byte(c.in))
		if c.err == "" && err != nil || c.err != "" && (err == nil || !strings.Contains(err.Error(), c.err)) {
			t.Errorf("%s: err = %v, want %q", c.name, err, c.err)
		}
	}
}

func TestLimits(t *testing.T) {
	clk := &clock{t: time.Unix(1000, 0)}
	a, err := New(Config{Now: clk.now, Limits: []Limit{{Name: "bidder", RPS: 2, Burst: 2}, {Role: RoleRead, RPS: 1, Burst: 1}}})
	if err != nil {
		t.Fatal(err)
	}
	bidder := Identity{Name: "bidder", Roles: []Role{RoleInfer, RoleRead}, Method: "token"}
	reader := Identity{Name: "r", Roles: []Role{RoleRead}, Method: "token"}
	free := Identity{Name: "f", Roles: []Role{RoleInfer}, Method: "token"}
	steps := []struct {
		id   Identity
		ok   bool
		wait time.Duration
		dt   time.Duration
	}{
		{bidder, true, 0, 0}, {bidder, true, 0, 0}, {bidder, false, 500 * time.Millisecond, 0},
		{reader, true, 0, 0}, {reader, false, time.Second, 0},
		{free, true, 0, 0}, {free, true, 0, 0}, {free, true, 0, 0},
		{bidder, true, 0, 500 * time.Millisecond}, {reader, true, 0, 500 * time.Millisecond},
	}
	for i, s := range steps {
		clk.t = clk.t.Add(s.dt)
		ok, wait := a.Allow(s.id)
		if ok != s.ok || wait != s.wait {
			t.Errorf("step %d (%s): Allow = %v, %v; want %v, %v", i, s.id.Name, ok, wait, s.ok, s.wait)
		}
	}
	for _, bad := range [][]Limit{{{RPS: 1, Burst: 1}}, {{Name: "a", Role: RoleRead, RPS: 1, Burst: 1}}, {{Name: "a", RPS: 0, Burst: 1}}, {{Name: "a", RPS: 1}}, {{Role: "root", RPS: 1, Burst: 1}}} {
		if _, err := New(Config{Limits: bad}); err == nil {
			t.Errorf("limits %+v accepted", bad)
		}
	}
}

func TestCheckRequiredAcceptsOpenAndTheRolesOnly(t *testing.T) {
	for _, r := range append(Roles[:], Open) {
		if err := CheckRequired(r); err != nil {
			t.Errorf("CheckRequired(%q) = %v", r, err)
		}
	}
	for r, want := range map[Role]string{"": "no role given", "root": `"root" is not a role`, "Read": `"Read" is not a role`} {
		if err := CheckRequired(r); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("CheckRequired(%q) = %v, want an error saying %q", r, err, want)
		}
	}
}

func TestHTTPRefusesTwoAuthorizationHeaders(t *testing.T) {
	path := filepath.Join(t.TempDir(), "tokens.yaml")
	write(t, path, tokensYAML("a", "s1", "infer"))
	a, err := New(Config{TokensFile: path})
	if err != nil {
		t.Fatal(err)
	}
	r := httptest.NewRequest("GET", "/", nil)
	r.Header.Add("Authorization", "Bearer s1")
	if id, err := a.HTTP(r); err != nil || id.Name != "a" {
		t.Fatalf("one header: %+v, %v", id, err)
	}
	r.Header.Add("Authorization", "Bearer s1")
	if _, err := a.HTTP(r); err == nil || !strings.Contains(err.Error(), "more than one authorization header") {
		t.Fatalf("two headers: %v", err)
	}
}

func TestLimiterForgetsOnlyFullBuckets(t *testing.T) {
	clk := &clock{t: time.Unix(0, 0)}
	l, err := newLimiter([]Limit{{Role: RoleInfer, RPS: 1, Burst: 2}}, clk.now)
	if err != nil {
		t.Fatal(err)
	}
	id := func(n int) Identity { return Identity{Name: fmt.Sprint(n), Roles: []Role{RoleInfer}, Method: "jwt"} }
	l.allow(id(0))
	l.allow(id(0)) // empty
	clk.t = clk.t.Add(500 * time.Millisecond)
	l.allow(id(1)) // one left, refilled by 1.5 s
	clk.t = clk.t.Add(time.Second)
	l.forgetFull(clk.t)
	if _, ok := l.bucket[keyOf(id(0))]; !ok {
		t.Error("a bucket that has not refilled was forgotten")
	}
	if _, ok := l.bucket[keyOf(id(1))]; ok {
		t.Error("a full bucket was kept")
	}
	if ok, _ := l.allow(id(0)); !ok {
		t.Error("identity 0 should have refilled one request after 1.5 s")
	}
	if ok, _ := l.allow(id(0)); ok {
		t.Error("identity 0's bucket was reset by forgetting others")
	}
}

// TestJWTVerifiedDuringKeyChangeNotCached checks that a token verified
// with the keys of before a JWKS change, which lands in between, is not
// cached: the key that signed it may be the one the change removed, and a
// cached token would work until its exp.
func TestJWTVerifiedDuringKeyChangeNotCached(t *testing.T) {
	env := newJWTEnv(t, "k1")
	clk := &clock{t: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)}
	a, err := New(Config{JWT: JWTConfig{JWKSFile: env.path, Issuer: "https://idp", Audience: "grove"}, Now: clk.now})
	if err != nil {
		t.Fatal(err)
	}
	tok := env.sign(t, "k1", jwt.MapClaims{"iss": "https://idp", "aud": "grove", "sub": "alice", "exp": clk.t.Add(time.Hour).Unix()})
	v := a.jwt
	// verify, with the JWKS reloaded (k1 removed) between reading the keys
	// and caching what they verified.
	v.mu.RLock()
	keys, gen := v.keys, v.gen
	v.mu.RUnlock()
	id, exp, err := v.parse(tok, keys, clk.now())
	if err != nil {
		t.Fatal(err)
	}
	v.setKeys(JWKS{})
	v.store(sha256.Sum256([]byte(tok)), gen, cachedJWT{id: id, exp: exp}, clk.now())
	if id, err := a.Bearer(tok); err == nil {
		t.Fatalf("a token of a removed key, verified while the JWKS changed, still works: %+v", id)
	}
}

func TestAuthenticationFilesLargerThanTheLimitAreRefused(t *testing.T) {
	const limit = 16 << 20
	dir := t.TempDir()
	path := filepath.Join(dir, "tokens.yaml")
	// A comment fills the file to the size wanted: its tokens stay valid.
	fill := func(size int, yaml string) string {
		return yaml + "#" + strings.Repeat("x", size-len(yaml)-2) + "\n"
	}
	write(t, path, fill(limit, tokensYAML("bidder", "s1", "infer")))
	var log bytes.Buffer
	a, err := New(Config{TokensFile: path, Logger: slog.New(slog.NewTextHandler(&log, nil))})
	if err != nil {
		t.Fatalf("a tokens file of exactly the limit: %v", err)
	}
	if _, err := a.Bearer("s1"); err != nil {
		t.Fatalf("a token of a file of exactly the limit: %v", err)
	}

	write(t, path, fill(limit+1, tokensYAML("bot", "s2", "infer")))
	a.Refresh()
	if _, err := a.Bearer("s1"); err != nil {
		t.Errorf("a file over the limit dropped the last good tokens: %v", err)
	}
	want := path + " is larger than its limit of 16 MiB"
	if !strings.Contains(log.String(), want) {
		t.Errorf("log %q does not say %q", log.String(), want)
	}
	if _, err := New(Config{TokensFile: path}); err == nil || err.Error() != want {
		t.Errorf("New with a tokens file over the limit: got %v, want %q", err, want)
	}
}

// A file that cannot be read (larger than its limit, say) is logged once,
// not at every Refresh (every second), and again once it is read and
// fails anew; its last good contents stay in force meanwhile.
func TestAnUnreadableAuthenticationFileIsLoggedOncePerFailure(t *testing.T) {
	path := filepath.Join(t.TempDir(), "tokens.yaml")
	good := tokensYAML("bidder", "s1", "infer")
	write(t, path, good)
	var log bytes.Buffer
	a, err := New(Config{TokensFile: path, Logger: slog.New(slog.NewTextHandler(&log, nil))})
	if err != nil {
		t.Fatal(err)
	}
	tooLarge := good + "#" + strings.Repeat("x", 16<<20) + "\n"
	write(t, path, tooLarge)
	for range 5 {
		a.Refresh()
	}
	if n := strings.Count(log.String(), "is larger than its limit"); n != 1 {
		t.Fatalf("5 refreshes of a file over its limit logged it %d times, want once:\n%s", n, log.String())
	}
	if _, err := a.Bearer("s1"); err != nil {
		t.Fatalf("the last good tokens: %v", err)
	}
	write(t, path, tokensYAML("bot", "s2", "infer"))
	a.Refresh()
	write(t, path, tooLarge)
	a.Refresh()
	a.Refresh()
	if n := strings.Count(log.String(), "is larger than its limit"); n != 2 {
		t.Errorf("a file over its limit again after a good read logged %d times in all, want twice", n)
	}
}

// A file that could not be read, then removed, then put back and still
// not readable is logged again: its removal is a change, and the log's
// last word on it must not stay "removed" while the new file is refused.
func TestAnUnreadableAuthenticationFilePutBackAfterItsRemovalIsLoggedAgain(t *testing.T) {
	path := filepath.Join(t.TempDir(), "tokens.yaml")
	good := tokensYAML("bidder", "s1", "infer")
	write(t, path, good)
	var log bytes.Buffer
	a, err := New(Config{TokensFile: path, Logger: slog.New(slog.NewTextHandler(&log, nil))})
	if err != nil {
		t.Fatal(err)
	}
	tooLarge := good + "#" + strings.Repeat("x", 16<<20) + "\n"
	write(t, path, tooLarge)
	a.Refresh()
	if err := os.Remove(path); err != nil {
		t.Fatal(err)
	}
	a.Refresh()
	write(t, path, tooLarge)
	a.Refresh()
	a.Refresh()
	if n := strings.Count(log.String(), "is larger than its limit"); n != 2 {
		t.Errorf("a file over its limit, removed, then put back over its limit: logged %d times, want twice:\n%s", n, log.String())
	}
}
