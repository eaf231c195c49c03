package auth

import (
	"strings"
	"testing"
	"time"
)

func TestQualifiedNamePrefixesTheMethod(t *testing.T) {
	for _, c := range []struct {
		id   Identity
		want string
	}{
		{Identity{Name: "bot-all", Method: MethodToken}, "token:bot-all"},
		{Identity{Name: "alice", Method: MethodJWT}, "jwt:alice"},
		{Identity{Name: "spiffe://example.org/ns/ml/sa/bot", Method: MethodCertificate}, "certificate:spiffe://example.org/ns/ml/sa/bot"},
	} {
		if got := c.id.Qualified(); got != c.want {
			t.Errorf("%+v.Qualified() = %q, want %q", c.id, got, c.want)
		}
	}
}

func TestParseQualifiedReadsAnUnprefixedNameAsAToken(t *testing.T) {
	for _, c := range []struct{ in, method, name, err string }{
		{"bot-all", MethodToken, "bot-all", ""},
		{"token:bot-all", MethodToken, "bot-all", ""},
		{"jwt:alice", MethodJWT, "alice", ""},
		{"certificate:bidder.example", MethodCertificate, "bidder.example", ""},
		{"certificate:spiffe://example.org/x", MethodCertificate, "spiffe://example.org/x", ""},
		{"token:jwt:alice", MethodToken, "jwt:alice", ""}, // a token whose name looks qualified
		{"svc:a", MethodToken, "svc:a", ""},               // not a method: a token's name with a colon
		{"none:x", MethodToken, "none:x", ""},             // no identity proves itself by none
		{"jwt:", "", "", "names no identity"},
		{"token:", "", "", "names no identity"},
		{"", "", "", "names no identity"},
	} {
		method, name, err := ParseQualified(c.in)
		if c.err != "" {
			if err == nil || !strings.Contains(err.Error(), c.err) {
				t.Errorf("ParseQualified(%q): err %v, want %q", c.in, err, c.err)
			}
			continue
		}
		if err != nil || method != c.method || name != c.name {
			t.Errorf("ParseQualified(%q) = %q, %q, %v; want %q, %q", c.in, method, name, err, c.method, c.name)
		}
	}
}

// A JWT subject, a certificate name and a token name that are the same
// string are three identities: a limit naming one does not touch the
// others, and each has a bucket of its own.
func TestLimitsKeepTheMethodsNamesApart(t *testing.T) {
	clk := &clock{t: time.Unix(1000, 0)}
	a, err := New(Config{Now: clk.now, Limits: []Limit{
		{Name: "bidder", RPS: 1, Burst: 1},             // the token, unprefixed as before
		{Name: "jwt:bidder", RPS: 1, Burst: 2},         // the JWT subject
		{Name: "certificate:bidder", RPS: 1, Burst: 3}, // the certificate
	}})
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		method string
		burst  int
	}{{MethodToken, 1}, {MethodJWT, 2}, {MethodCertificate, 3}} {
		id := Identity{Name: "bidder", Roles: []Role{RoleInfer}, Method: c.method}
		for i := range c.burst {
			if ok, _ := a.Allow(id); !ok {
				t.Errorf("%s: request %d of its burst of %d refused", id.Qualified(), i+1, c.burst)
			}
		}
		if ok, _ := a.Allow(id); ok {
			t.Errorf("%s: a request past its burst of %d allowed", id.Qualified(), c.burst)
		}
	}
	// Only the token named "bidder" has the unprefixed limit: a JWT subject
	// named after another token is not limited by that token's entry.
	b, err := New(Config{Now: clk.now, Limits: []Limit{{Name: "bot-all", RPS: 1, Burst: 1}}})
	if err != nil {
		t.Fatal(err)
	}
	jwtBot := Identity{Name: "bot-all", Roles: []Role{RoleInfer}, Method: MethodJWT}
	for i := range 5 {
		if ok, _ := b.Allow(jwtBot); !ok {
			t.Fatalf("jwt:bot-all refused at request %d by the limit of token bot-all", i+1)
		}
	}
}

func TestLimitsRefuseTwoEntriesForOneIdentity(t *testing.T) {
	for _, c := range []struct {
		names []string
		err   string
	}{
		{[]string{"bot", "token:bot"}, "identity token:bot has two limits"},
		{[]string{"jwt:a", "jwt:a"}, "identity jwt:a has two limits"},
		{[]string{"jwt:"}, "names no identity"},
	} {
		var ls []Limit
		for _, n := range c.names {
			ls = append(ls, Limit{Name: n, RPS: 1, Burst: 1})
		}
		if _, err := New(Config{Limits: ls}); err == nil || !strings.Contains(err.Error(), c.err) {
			t.Errorf("limits %q: err %v, want %q", c.names, err, c.err)
		}
	}
	if _, err := New(Config{Limits: []Limit{{Name: "jwt:a", RPS: 1, Burst: 1}, {Name: "a", RPS: 1, Burst: 1}}}); err != nil {
		t.Errorf("a JWT subject and a token of the same name: %v, want two limits", err)
	}
}
