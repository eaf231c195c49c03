package it

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/emptypb"
)

// authTokens are the test's bearer tokens: one per role holding only it,
// and one with every role under a tight limit.
var authTokens = map[string]struct{ name, roles string }{
	"tok-infer-0001":  {"only-infer", "infer"},
	"tok-read-0002":   {"only-read", "read"},
	"tok-manage-0003": {"only-manage", "manage"},
	"tok-admin-0004":  {"only-admin", "admin"},
	"tok-feedback-06": {"only-feedback", "feedback"},
	"tok-limited-005": {"limited", "infer, read, manage, admin"},
}

// tokenOf is the token holding role alone; wrongFor one that lacks it.
var (
	tokenOf = map[string]string{"infer": "tok-infer-0001", "read": "tok-read-0002", "manage": "tok-manage-0003", "admin": "tok-admin-0004",
		"feedback": "tok-feedback-06"}
	wrongFor = map[string]string{"infer": "tok-read-0002", "read": "tok-infer-0001", "manage": "tok-read-0002", "admin": "tok-read-0002",
		"feedback": "tok-infer-0001"}
)

func writeTokens(t *testing.T, path string, without ...string) {
	t.Helper()
	var b strings.Builder
	b.WriteString("tokens:\n")
	toks := make([]string, 0, len(authTokens))
	for tok := range authTokens {
		toks = append(toks, tok)
	}
	sort.Strings(toks)
	for _, tok := range toks {
		e := authTokens[tok]
		if strings.Contains(strings.Join(without, ","), e.name) {
			continue
		}
		h := sha256.Sum256([]byte(tok))
		fmt.Fprintf(&b, "  - name: %s\n    sha256: %s\n    roles: [%s]\n", e.name, hex.EncodeToString(h[:]), e.roles)
	}
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, []byte(b.String()), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, path); err != nil {
		t.Fatal(err)
	}
}

// mountSamples are requests into each mounted subtree, with the role each
// needs ("open" for none): a mount the binary serves that is missing here
// fails the test, so a new one cannot be missed.
var mountSamples = map[string][]struct{ method, path, role string }{
	"/v2/...": {
		{"GET", "/v2", "read"},
		{"GET", "/v2/health/live", "open"},
		{"GET", "/v2/health/ready", "open"},
		{"GET", "/v2/models/m/ready", "open"},
		{"GET", "/v2/models/m", "read"},
		{"GET", "/v2/models/m/config", "read"},
		{"GET", "/v2/models/stats", "read"},
		{"POST", "/v2/models/m/infer", "infer"},
		{"POST", "/v2/repository/index", "read"},
		{"POST", "/v2/repository/models/m/load", "manage"},
		{"POST", "/v2/repository/models/m/unload", "manage"},
	},
	"/debug/pprof/...": {{"GET", "/debug/pprof/", "admin"}, {"GET", "/debug/pprof/cmdline", "admin"}},
	"/ui/...":          {{"GET", "/ui/", "open"}, {"GET", "/ui/app.js", "open"}, {"GET", "/ui/config.json", "open"}},
}

var (
	httpRouteLog  = regexp.MustCompile(`msg="http route" pattern="?([^"]+?)"? role=(\w+)`)
	grpcMethodLog = regexp.MustCompile(`msg="grpc method" method=(\S+) role=(\w+)`)
	wildcard      = regexp.MustCompile(`\{[^}]+\}`)
)

// authCall is a request to one route: pattern is the route's (a mount's
// prefix + "/..."), path one it serves.
type authCall struct{ method, path, role, pattern string }

// call sends method path with token (none if "") and returns the status,
// the body and the headers.
func (g *grove) authCall(method, path, token string) (int, string, http.Header) {
	g.t.Helper()
	return g.authCallWith(client, method, path, token)
}

// authCallWith is authCall through c.
func (g *grove) authCallWith(c *http.Client, method, path, token string) (int, string, http.Header) {
	g.t.Helper()
	req, err := http.NewRequest(method, g.url+path, strings.NewReader("{}"))
	if err != nil {
		g.t.Fatal(err)
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := c.Do(req)
	if err != nil {
		g.t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b), resp.Header
}

// routeCalls are requests to every HTTP route and mount the binary logged
// (mounts through mountSamples), with the role each needs.
func routeCalls(t *testing.T, logs string) []authCall {
	t.Helper()
	var calls []authCall
	for _, m := range httpRouteLog.FindAllStringSubmatch(logs, -1) {
		pattern, role := m[1], m[2]
		if _, ok := refusalFormats[pattern]; !ok {
			t.Errorf("route %s has no error format in refusalFormats: add the one its protocol answers in", pattern)
		}
		if strings.HasSuffix(pattern, "/...") {
			samples, ok := mountSamples[pattern]
			if !ok {
				t.Errorf("mount %s has no samples in mountSamples: add requests for it", pattern)
			}
			for _, s := range samples {
				calls = append(calls, authCall{s.method, s.path, s.role, pattern})
			}
			continue
		}
		method, path, _ := strings.Cut(pattern, " ")
		calls = append(calls, authCall{method, wildcard.ReplaceAllString(path, "x1"), role, pattern})
	}
	return calls
}

// The error formats of refusals (issue 15: "the error body follows each
// protocol's error format").
const (
	fmtBA         = "B&A batch error"          // {"response":[{"error":{"error_type":"UNKNOWN","description":…}}]}
	fmtForestFlow = "ForestFlow ErrorResponse" // {"UnknownServableError":{"fqrv":…,"errorMessage":…}}
	fmtJSON       = `{"error": …}`             // OIP's error object, Grove's own JSON routes
	fmtText       = "plain text"               // GraphPipe, /metrics, pprof
)

// refusalFormats is the error format each HTTP route (by its logged
// pattern) answers its refusals in; a route missing here fails the test.
var refusalFormats = map[string]string{
	"GET /healthz": fmtText, "GET /readyz": fmtText,
	"GET /v1/status": fmtJSON, "GET /v1/audit": fmtJSON, "POST /v1/rollback": fmtJSON, "GET /v1/cluster": fmtJSON, "/v2/...": fmtJSON,
	"GET /v1/console": fmtJSON, "/ui/...": fmtText, "POST /v1/outcomes": fmtJSON,
	"GET /metrics": fmtText, "/debug/pprof/...": fmtText,
	"POST /v1/inference": fmtBA, "GET /v1/models": fmtBA,
	"POST /{org}/{project}/{n}/gp": fmtText,
	"POST /api/predict/{model...}": fmtText, "GET /api/predict/{model...}": fmtText,

	"POST /{org}/{project}/{n}/score": fmtForestFlow, "POST /{org}/{project}/{n}/{rv}/score": fmtForestFlow,
	"GET /contracts/list": fmtForestFlow, "GET /{org}/{project}/{n}/stats": fmtForestFlow,
	"POST /servable": fmtForestFlow, "POST /contract/{org}/{project}/{n}": fmtForestFlow, "PUT /{org}/{project}/{n}": fmtForestFlow,
	"PUT /{org}/{project}/{n}/{rv}/policy": fmtForestFlow, "PUT /{org}/{project}/{n}/{rv}/policy-settings": fmtForestFlow,
	"PUT /{org}/{project}/{n}/{rv}/logging": fmtForestFlow, "PUT /{org}/{project}/{n}/{rv}/logging-settings": fmtForestFlow,
	"DELETE /{org}/{project}/{n}/{rv}": fmtForestFlow, "POST /{org}/{project}/{n}/{rv}/metrics": fmtForestFlow,
	"GET /{org}/{project}/{n}/releases": fmtForestFlow, "GET /{org}/{project}/{n}/list": fmtForestFlow,
	"GET /{org}/{project}/{n}/c-settings": fmtForestFlow, "GET /{org}/{project}/{n}/contract-settings": fmtForestFlow,
	"GET /{org}/{project}/{n}/s-settings": fmtForestFlow, "GET /{org}/{project}/{n}/servable-settings": fmtForestFlow,
	"GET /{org}/{project}/{n}/{rv}/settings": fmtForestFlow, "GET /{org}/{project}/{n}/metadata": fmtForestFlow,
	"GET /{org}/{project}/{n}/{rv}/metadata": fmtForestFlow,
}

// checkRefusal fails t unless body (with its headers) is a refusal in
// format carrying want in its message.
func checkRefusal(t *testing.T, what, format string, hdr http.Header, body, want string) {
	t.Helper()
	ctype := hdr.Get("Content-Type")
	var msg string
	var err error
	switch format {
	case fmtBA:
		var doc struct {
			Response []struct {
				Error struct {
					ErrorType   string `json:"error_type"`
					Description string `json:"description"`
				} `json:"error"`
			} `json:"response"`
		}
		if err = strictJSON(body, &doc); err == nil && (len(doc.Response) != 1 || doc.Response[0].Error.ErrorType != "UNKNOWN") {
			err = fmt.Errorf("not one UNKNOWN error")
		}
		if err == nil {
			msg = doc.Response[0].Error.Description
		}
	case fmtForestFlow:
		var doc struct {
			UnknownServableError *struct {
				FQRV struct {
					Contract struct {
						Organization, Project string
						ContractNumber        int32
					} `json:"contract"`
					ReleaseVersion string `json:"releaseVersion"`
				} `json:"fqrv"`
				ErrorMessage string `json:"errorMessage"`
			}
		}
		if err = strictJSON(body, &doc); err == nil && doc.UnknownServableError == nil {
			err = fmt.Errorf("no UnknownServableError")
		}
		if err == nil {
			msg = doc.UnknownServableError.ErrorMessage
		}
	case fmtJSON:
		var doc struct{ Error *string }
		if err = strictJSON(body, &doc); err == nil && doc.Error == nil {
			err = fmt.Errorf("no error member")
		}
		if err == nil {
			msg = *doc.Error
		}
	case fmtText:
		if !strings.HasPrefix(ctype, "text/plain") {
			err = fmt.Errorf("not plain text")
		}
		msg = body
	}
	if format != fmtText && ctype != "application/json" {
		err = fmt.Errorf("Content-Type %q", ctype)
	}
	if err != nil || !strings.Contains(msg, want) {
		t.Errorf("%s: %q (%s) is not a %s saying %q: %v", what, body, ctype, format, want, err)
	}
}

// strictJSON decodes body into v, refusing members v lacks and trailing
// data.
func strictJSON(body string, v any) error {
	dec := json.NewDecoder(strings.NewReader(body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return err
	}
	if dec.More() {
		return fmt.Errorf("data after the document")
	}
	return nil
}

// It runs alone (no t.Parallel): it times how soon a token removed from the file stops working. Budget: 10 s.
func TestAuthEveryRouteAndMethodNeedsItsRole(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "model_config.json"), []byte(`{"model_metadata": []}`), 0o644); err != nil {
		t.Fatal(err)
	}
	tokens := filepath.Join(t.TempDir(), "tokens.yaml")
	writeTokens(t, tokens)
	cfg := filepath.Join(t.TempDir(), "grove.yaml")
	if err := os.WriteFile(cfg, []byte("auth:\n  limits:\n    - {name: limited, rps: 0.001, burst: 3}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	g := startGrove(t, "file://"+dir, nil, "--config", cfg, "--auth-tokens-file", tokens, "--pprof")

	// The routes and methods, as the binary registered them.
	calls := routeCalls(t, g.logs.String())
	methods := grpcMethodLog.FindAllStringSubmatch(g.logs.String(), -1)
	if len(calls) < 30 || len(methods) < 25 {
		t.Fatalf("found %d HTTP calls and %d gRPC methods in the logs; want the whole table", len(calls), len(methods))
	}
	t.Logf("checking %d HTTP requests and %d gRPC methods", len(calls), len(methods))
	// The roles issue 15 gives by name.
	logged := make(map[string]string)
	for _, m := range append(httpRouteLog.FindAllStringSubmatch(g.logs.String(), -1), methods...) {
		logged[m[1]] = m[2]
	}
	for route, role := range map[string]string{
		"POST /v1/inference": "infer", "POST /{org}/{project}/{n}/score": "infer", "POST /{org}/{project}/{n}/gp": "infer",
		"GET /v1/status": "read", "GET /metrics": "read", "GET /v1/models": "read", "GET /healthz": "open", "GET /readyz": "open",
		"POST /servable": "manage", "POST /{org}/{project}/{n}/{rv}/metrics": "manage", "/debug/pprof/...": "admin",
		"POST /api/predict/{model...}": "infer", "GET /api/predict/{model...}": "read",
		"POST /v1/outcomes": "feedback", "/grove.v1.Outcomes/Report": "feedback",
		"/grove.deeprec.v1.Processor/Predict":                                               "infer",
		"/inference.GRPCInferenceService/ModelInfer":                                        "infer",
		"/inference.GRPCInferenceService/RepositoryModelLoad":                               "manage",
		"/inference.GRPCInferenceService/ModelReady":                                        "open",
		"/grpc.health.v1.Health/Check":                                                      "open",
		"/privacy_sandbox.bidding_auction_servers.inference.InferenceService/Predict":       "infer",
		"/privacy_sandbox.bidding_auction_servers.inference.InferenceService/RegisterModel": "manage",
		"/privacy_sandbox.bidding_auction_servers.inference.InferenceService/DeleteModel":   "manage",
	} {
		if logged[route] != role {
			t.Errorf("%s has role %q, want %s", route, logged[route], role)
		}
	}

	for _, c := range calls {
		what := c.method + " " + c.path
		code, body, hdr := g.authCall(c.method, c.path, "")
		if c.role == "open" {
			if code == http.StatusUnauthorized || code == http.StatusForbidden {
				t.Errorf("%s is open but answered %d without credentials", what, code)
			}
			continue
		}
		if code != http.StatusUnauthorized || !strings.HasPrefix(hdr.Get("WWW-Authenticate"), "Bearer") {
			t.Errorf("%s (role %s) without credentials: %d %q, WWW-Authenticate %q; want 401 with Bearer", what, c.role, code, body, hdr.Get("WWW-Authenticate"))
		}
		checkRefusal(t, what+" without credentials", refusalFormats[c.pattern], hdr, body, "no credentials")
		code, body, hdr = g.authCall(c.method, c.path, "not-a-token")
		if code != http.StatusUnauthorized || strings.Contains(body, "not-a-token") {
			t.Errorf("%s with an unknown token: %d %q", what, code, body)
		}
		checkRefusal(t, what+" with an unknown token", refusalFormats[c.pattern], hdr, body, "unknown bearer token")
		code, body, hdr = g.authCall(c.method, c.path, wrongFor[c.role])
		if code != http.StatusForbidden {
			t.Errorf("%s (role %s) with the wrong role: %d %q; want 403 naming the role", what, c.role, code, body)
		}
		checkRefusal(t, what+" with the wrong role", refusalFormats[c.pattern], hdr, body, "lacks role "+c.role)
		if code, body, _ := g.authCall(c.method, c.path, tokenOf[c.role]); code == http.StatusUnauthorized || code == http.StatusForbidden || code == http.StatusTooManyRequests {
			t.Errorf("%s (role %s) with the right role: %d %q", what, c.role, code, body)
		}
	}
	for _, p := range []string{"/v1/status", "/v1/models", "/metrics", "/v2"} {
		if code, body, _ := g.authCall("GET", p, tokenOf["read"]); code != http.StatusOK {
			t.Errorf("GET %s with role read: %d %q", p, code, body)
		}
	}

	conn, err := grpc.NewClient(g.grpc, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	invoke := func(method, token string) codes.Code {
		ctx, cancel := context.WithTimeout(t.Context(), time.Second)
		defer cancel()
		if token != "" {
			ctx = metadata.AppendToOutgoingContext(ctx, "authorization", "Bearer "+token)
		}
		return status.Code(conn.Invoke(ctx, method, &emptypb.Empty{}, &emptypb.Empty{}))
	}
	for _, m := range methods {
		method, role := m[1], m[2]
		if role == "open" {
			if c := invoke(method, ""); c == codes.Unauthenticated || c == codes.PermissionDenied {
				t.Errorf("%s is open but answered %v without credentials", method, c)
			}
			continue
		}
		if c := invoke(method, ""); c != codes.Unauthenticated {
			t.Errorf("%s (role %s) without credentials: %v, want UNAUTHENTICATED", method, role, c)
		}
		if c := invoke(method, wrongFor[role]); c != codes.PermissionDenied {
			t.Errorf("%s (role %s) with the wrong role: %v, want PERMISSION_DENIED", method, role, c)
		}
		if c := invoke(method, tokenOf[role]); c == codes.Unauthenticated || c == codes.PermissionDenied || c == codes.ResourceExhausted {
			t.Errorf("%s (role %s) with the right role: %v", method, role, c)
		}
	}

	// The per-identity limit: a burst of 3, then 429 (HTTP) and
	// RESOURCE_EXHAUSTED (gRPC), from one bucket.
	for i := range 3 {
		if code, body, _ := g.authCall("GET", "/v1/models", "tok-limited-005"); code != http.StatusOK {
			t.Fatalf("limited call %d: %d %q", i+1, code, body)
		}
	}
	for _, c := range []authCall{{"GET", "/v1/models", "read", "GET /v1/models"}, {"GET", "/contracts/list", "read", "GET /contracts/list"},
		{"GET", "/v2", "read", "/v2/..."}, {"GET", "/v1/status", "read", "GET /v1/status"}} {
		code, body, hdr := g.authCall(c.method, c.path, "tok-limited-005")
		if code != http.StatusTooManyRequests || hdr.Get("Retry-After") == "" {
			t.Errorf("%s past the limit: %d %q, Retry-After %q; want 429 with Retry-After", c.path, code, body, hdr.Get("Retry-After"))
		}
		checkRefusal(t, c.path+" past the limit", refusalFormats[c.pattern], hdr, body, `"token:limited" is over its request limit`)
	}
	if c := invoke("/inference.GRPCInferenceService/ServerMetadata", "tok-limited-005"); c != codes.ResourceExhausted {
		t.Errorf("gRPC past the limit: %v, want RESOURCE_EXHAUSTED", c)
	}

	// A token removed from the file stops working without a restart.
	writeTokens(t, tokens, "only-read")
	start := time.Now()
	g.waitFor("the removed token to be refused", 3*time.Second, func() bool {
		code, _, _ := g.authCall("GET", "/v1/models", tokenOf["read"])
		return code == http.StatusUnauthorized
	})
	if d := time.Since(start); d > 2*time.Second {
		t.Errorf("the removed token worked for %v after the file changed; want at most 2s", d)
	}
	if c := invoke("/inference.GRPCInferenceService/ServerMetadata", tokenOf["read"]); c != codes.Unauthenticated {
		t.Errorf("gRPC with the removed token: %v, want UNAUTHENTICATED", c)
	}
	if code, _, _ := g.authCall("POST", "/v1/inference", tokenOf["infer"]); code == http.StatusUnauthorized {
		t.Error("a token still in the file was refused after the reload")
	}
	for tok := range authTokens {
		if strings.Contains(g.logs.String(), tok) {
			t.Errorf("the logs hold token %s", tok)
		}
	}
}

// TestAuthClientCertificateRefusalsInEachFormat requires client
// certificates (with tokens too, so that the binary logs its routes) and
// checks that every route but the probes refuses a caller without one,
// before its token is looked at, with 401 in its protocol's error format.
//
// Budget: 10 s.
func TestAuthClientCertificateRefusalsInEachFormat(t *testing.T) {
	t.Parallel()
	s := newTLSSetup(t)
	tokens := filepath.Join(t.TempDir(), "tokens.yaml")
	writeTokens(t, tokens)
	g := startTLSGrove(t, s, "--tls-client-ca", s.caFile, "--tls-client-auth", "require", "--auth-tokens-file", tokens,
		"--pprof", "--log-level", "debug")
	calls := routeCalls(t, g.logs.String())
	if len(calls) < 30 {
		t.Fatalf("found %d HTTP calls in the logs; want the whole table", len(calls))
	}
	anon := s.client()
	for _, c := range calls {
		if c.role == "open" {
			continue
		}
		what := c.method + " " + c.path + " without a client certificate"
		code, body, hdr := g.authCallWith(anon, c.method, c.path, tokenOf[c.role])
		if code != http.StatusUnauthorized {
			t.Errorf("%s: %d %q, want 401", what, code, body)
		}
		checkRefusal(t, what, refusalFormats[c.pattern], hdr, body, "a client certificate signed by the client CA is required")
	}
}

// TestAuthJWTFromALocalJWKS configures auth.jwt and checks a JWT signed by
// the JWKS's key is admitted by its roles claim, over HTTP and gRPC, and
// that one of another issuer, or signed by another key, is refused.
//
// Budget: 10 s.
func TestAuthJWTFromALocalJWKS(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "model_config.json"), []byte(`{"model_metadata": []}`), 0o644); err != nil {
		t.Fatal(err)
	}
	key, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	other, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	b64 := base64.RawURLEncoding.EncodeToString
	jwks := filepath.Join(t.TempDir(), "jwks.json")
	if err := os.WriteFile(jwks, []byte(fmt.Sprintf(`{"keys":[{"kty":"EC","crv":"P-256","kid":"k1","use":"sig","x":%q,"y":%q}]}`,
		b64(key.X.FillBytes(make([]byte, 32))), b64(key.Y.FillBytes(make([]byte, 32))))), 0o644); err != nil {
		t.Fatal(err)
	}
	cfg := filepath.Join(t.TempDir(), "grove.yaml")
	if err := os.WriteFile(cfg, []byte(fmt.Sprintf("auth:\n  jwt: {jwks_file: %s, issuer: https://idp.test, audience: grove, roles_claim: grove_roles}\n", jwks)), 0o644); err != nil {
		t.Fatal(err)
	}
	g := startGrove(t, "file://"+dir, nil, "--config", cfg)
	sign := func(k *ecdsa.PrivateKey, iss string, roles ...string) string {
		tok := jwt.NewWithClaims(jwt.SigningMethodES256, jwt.MapClaims{"iss": iss, "aud": "grove", "sub": "alice@idp",
			"exp": time.Now().Add(time.Hour).Unix(), "grove_roles": roles})
		tok.Header["kid"] = "k1"
		s, err := tok.SignedString(k)
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	reader := sign(key, "https://idp.test", "read")
	for _, c := range []struct {
		name, token string
		code        int
		body        string
	}{
		{"reader", reader, http.StatusOK, ""},
		{"reader again (cached)", reader, http.StatusOK, ""},
		{"inferer", sign(key, "https://idp.test", "infer"), http.StatusForbidden, `jwt "alice@idp" lacks role read`},
		{"other issuer", sign(key, "https://evil.test", "read"), http.StatusUnauthorized, "wrong issuer"},
		{"other key", sign(other, "https://idp.test", "read"), http.StatusUnauthorized, "bad signature"},
	} {
		code, body, hdr := g.authCall("GET", "/v1/models", c.token)
		if code != c.code {
			t.Errorf("%s: %d %q, want %d %q", c.name, code, body, c.code, c.body)
		}
		if code != http.StatusOK {
			checkRefusal(t, c.name, refusalFormats["GET /v1/models"], hdr, body, c.body)
		}
	}
	conn, err := grpc.NewClient(g.grpc, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	ctx := metadata.AppendToOutgoingContext(t.Context(), "authorization", "Bearer "+reader)
	if err := conn.Invoke(ctx, "/inference.GRPCInferenceService/ServerMetadata", &emptypb.Empty{}, &emptypb.Empty{}); err != nil {
		t.Errorf("gRPC ServerMetadata with the reader's JWT: %v", err)
	}
	if c := status.Code(conn.Invoke(ctx, "/inference.GRPCInferenceService/ModelInfer", &emptypb.Empty{}, &emptypb.Empty{})); c != codes.PermissionDenied {
		t.Errorf("gRPC ModelInfer with the reader's JWT: %v, want PERMISSION_DENIED", c)
	}
}

// TestAuthModelReadyProbeAnswersOnlyReadiness: GET /v2/models/x/ready is
// an open probe, so with a model named "x/ready" served (and no "x") it
// must not answer that model's metadata without credentials; the role
// read still gets it, and x/ready's own probe stays open.
//
// Budget: 10 s.
func TestAuthModelReadyProbeAnswersOnlyReadiness(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	model, err := os.ReadFile(filepath.Join(repoRoot(), "examples", "bucket", "pctr_v1", "model.pt"))
	if err != nil {
		t.Fatal(err)
	}
	// "ready" too: GET /v2/models/ready ends in /ready but probes no
	// model; it is the metadata of "ready".
	for _, m := range []string{filepath.Join("x", "ready"), "ready"} {
		if err := os.MkdirAll(filepath.Join(dir, m), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, m, "model.pt"), model, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(dir, "model_config.json"), []byte(`{"model_metadata": [{"model_path": "x/ready/"}, {"model_path": "ready/"}]}`), 0o644); err != nil {
		t.Fatal(err)
	}
	tokens := filepath.Join(t.TempDir(), "tokens.yaml")
	writeTokens(t, tokens)
	g := startGrove(t, "file://"+dir, nil, "--auth-tokens-file", tokens)
	g.waitFor("x/ready and ready to be served", 60*time.Second, func() bool {
		code, _, _ := g.authCall("GET", "/v2/models/x/ready/ready", "")
		code2, _, _ := g.authCall("GET", "/v2/models/ready/ready", "")
		return code == http.StatusOK && code2 == http.StatusOK
	})
	for _, c := range []struct {
		token string
		code  int
		has   string
	}{
		{"", http.StatusUnauthorized, `{"error":"no credentials`},
		{tokenOf["infer"], http.StatusForbidden, "lacks role read"},
		{tokenOf["read"], http.StatusOK, `"name":"x/ready`},
	} {
		for _, p := range []string{"/v2/models/x/ready", "/v2/models/ready"} {
			code, body, _ := g.authCall("GET", p, c.token)
			has := strings.Replace(c.has, "x/ready", strings.TrimPrefix(p, "/v2/models/"), 1)
			if code != c.code || !strings.Contains(body, has) || c.code != http.StatusOK && strings.Contains(body, `"inputs"`) {
				t.Errorf("GET %s with token %q: %d %s, want %d with %s", p, c.token, code, body, c.code, has)
			}
		}
	}
}
