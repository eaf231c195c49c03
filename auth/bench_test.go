package auth

import (
	"log/slog"
	"net/http/httptest"
	"path/filepath"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"
)

// BenchmarkHTTP is the cost of authenticating a request (HTTP, with the
// limit taken and the request counted in flight and ended, as the
// servers do): a static token of the file, and a JWT once cached. The
// target is at most 5 µs each.
func BenchmarkHTTP(b *testing.B) {
	dir := b.TempDir()
	tokens := filepath.Join(dir, "tokens.yaml")
	write := func(path, data string) {
		if err := writeFile(path, data); err != nil {
			b.Fatal(err)
		}
	}
	write(tokens, tokensYAML("bidder", "static-token-0123456789abcdef", "infer"))
	env := newJWTEnv(b, "k1")
	a, err := New(Config{TokensFile: tokens, JWT: JWTConfig{JWKSFile: env.path, Issuer: "iss", Audience: "aud"},
		Limits: []Limit{{Role: RoleInfer, RPS: 1e12, Burst: 1 << 30}}, MaxInFlight: 256, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		b.Fatal(err)
	}
	jwtTok := env.sign(b, "k1", jwt.MapClaims{"iss": "iss", "aud": "aud", "sub": "alice", "exp": time.Now().Add(time.Hour).Unix(), "roles": []string{"infer"}})
	for _, c := range []struct{ name, token string }{{"static_token", "static-token-0123456789abcdef"}, {"cached_jwt", jwtTok}} {
		b.Run(c.name, func(b *testing.B) {
			r := httptest.NewRequest("POST", "/v1/inference", nil)
			r.Header.Set("Authorization", "Bearer "+c.token)
			b.ReportAllocs()
			for b.Loop() {
				id, err := a.HTTP(r)
				if err != nil || !id.Has(RoleInfer) {
					b.Fatal(id, err)
				}
				f, err := a.Begin(id)
				if err != nil {
					b.Fatal(err)
				}
				if ok, _ := a.Allow(id); !ok {
					b.Fatal("limited")
				}
				f.End()
			}
		})
	}
}
