package it

import (
	"bytes"
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/groveml/grove/api/oip/oippb"
	"github.com/groveml/grove/api/sidecar/sidecarpb"
)

// auditCaller is who makes the writes of an audit trail test: the name
// its entries must carry, and what its calls carry to prove who it is.
// Without authentication that is nothing and the name is "anonymous";
// with it, a bearer token in header (HTTP) and md (gRPC).
type auditCaller struct {
	name   string
	header http.Header
	md     metadata.MD
}

// anonymous is the caller of a server without authentication.
var anonymous = auditCaller{name: "anonymous"}

// auditEntry is an entry of GET /v1/audit, as the test reads it.
type auditEntry struct {
	ID     string                     `json:"id"`
	Time   time.Time                  `json:"time"`
	Who    string                     `json:"who"`
	API    string                     `json:"api"`
	Route  string                     `json:"route"`
	Target string                     `json:"target"`
	Before map[string]json.RawMessage `json:"before"`
	After  map[string]json.RawMessage `json:"after"`
	Result string                     `json:"result"`
	Status string                     `json:"status"`
	Error  string                     `json:"error"`
}

// as sends an HTTP request as caller c and returns the status and body.
func (g *grove) as(c auditCaller, method, path, body string) (int, string) {
	g.t.Helper()
	req, err := http.NewRequest(method, g.url+path, strings.NewReader(body))
	if err != nil {
		g.t.Fatal(err)
	}
	maps.Copy(req.Header, c.header)
	resp, err := client.Do(req)
	if err != nil {
		g.t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(raw)
}

// auditTrail lists the audit trail through g as caller c; since is the
// raw query value ("" for none).
func (g *grove) auditTrail(c auditCaller, since string) []auditEntry {
	g.t.Helper()
	q := ""
	if since != "" {
		q = "?since=" + url.QueryEscape(since)
	}
	code, raw := g.as(c, "GET", "/v1/audit"+q, "")
	var l struct {
		Entries    []auditEntry `json:"entries"`
		Unreadable []any        `json:"unreadable"`
	}
	if code != http.StatusOK || json.Unmarshal([]byte(raw), &l) != nil || len(l.Unreadable) != 0 {
		g.t.Fatalf("GET /v1/audit%s: HTTP %d %s", q, code, raw)
	}
	return l.Entries
}

// auditObjects counts the audit objects in the directory bucket.
func auditObjects(t *testing.T, b *dirBucket) int {
	t.Helper()
	files, err := os.ReadDir(filepath.Join(b.dir, "audit"))
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, f := range files {
		if !strings.HasPrefix(f.Name(), ".") && strings.HasSuffix(f.Name(), ".json") {
			n++
		}
	}
	return n
}

// TestAuditTrailRecordsEveryManagementWriteOfEveryReplica runs the audit
// trail check on two replicas of one bucket without authentication.
//
// Budget: 10 s.
func TestAuditTrailRecordsEveryManagementWriteOfEveryReplica(t *testing.T) {
	t.Parallel()
	b := newDirBucket(t)
	putModels(t, b)
	b.Put(t, "model_config.json", []byte(`{"model_metadata": []}`))
	checkAuditTrail(t, b, startOn(t, b), startOn(t, b), anonymous)
}

// TestAuditTrailRecordsTheCallersTokenName runs the audit trail check on
// two replicas with authentication on: each entry names the bearer
// token's holder, over HTTP and gRPC, and neither the trail nor the logs
// hold the token.
//
// Budget: 15 s.
func TestAuditTrailRecordsTheCallersTokenName(t *testing.T) {
	t.Parallel()
	b := newDirBucket(t)
	putModels(t, b)
	b.Put(t, "model_config.json", []byte(`{"model_metadata": []}`))
	const token = "release-bot-token-7f3a"
	tokens := filepath.Join(t.TempDir(), "tokens.yaml")
	if err := os.WriteFile(tokens, fmt.Appendf(nil, "tokens:\n  - name: release-bot\n    sha256: %x\n    roles: [read, manage]\n",
		sha256.Sum256([]byte(token))), 0o600); err != nil {
		t.Fatal(err)
	}
	// With authentication on, RegisterModel and DeleteModel are served on
	// the admin gRPC listener only.
	g1 := startOn(t, b, "--auth-tokens-file", tokens, "--admin-grpc", "127.0.0.1:0")
	g2 := startOn(t, b, "--auth-tokens-file", tokens, "--admin-grpc", "127.0.0.1:0")
	if code, raw := g1.as(anonymous, "GET", "/v1/audit", ""); code != http.StatusUnauthorized {
		t.Fatalf("GET /v1/audit without the token: HTTP %d %s, want 401", code, raw)
	}
	checkAuditTrail(t, b, g1, g2, auditCaller{name: "release-bot",
		header: http.Header{"Authorization": {"Bearer " + token}}, md: metadata.Pairs("authorization", "Bearer "+token)})
	trail, err := os.ReadDir(filepath.Join(b.dir, "audit"))
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range trail {
		if raw, _ := os.ReadFile(filepath.Join(b.dir, "audit", f.Name())); bytes.Contains(raw, []byte(token)) {
			t.Errorf("audit object %s holds the token", f.Name())
		}
	}
	if strings.Contains(g1.logs.String()+g2.logs.String(), token) {
		t.Error("the logs hold the token")
	}
}

// checkAuditTrail makes management writes as caller c through two
// replicas, g1 and g2, of bucket b (with pctr_v1/ and pctr_v2/ and an empty
// config): through the management API, the sidecar's RegisterModel and
// DeleteModel and OIP's repository load and unload (refused), some
// failing. Each leaves one audit object with c's name, and GET
// /v1/audit lists them newest last, from either replica, since a time.
func checkAuditTrail(t *testing.T, b *dirBucket, g1, g2 *grove, c auditCaller) {
	ctx := withTimeout(t, 2*time.Minute)
	if c.md != nil {
		ctx = metadata.NewOutgoingContext(ctx, c.md)
	}
	if got := g1.auditTrail(c, ""); len(got) != 0 {
		t.Fatalf("audit trail before any write: %+v", got)
	}
	type want struct {
		api, route, target, status string
		ok                         bool
	}
	var wants []want
	httpWrite := func(g *grove, method, path, route, target, body string, code int) {
		t.Helper()
		got, raw := g.as(c, method, path, body)
		if got != code {
			t.Fatalf("%s %s: HTTP %d %s, want %d", method, path, got, raw, code)
		}
		wants = append(wants, want{"manage", route, target, fmt.Sprint(code), code == http.StatusOK})
	}
	const serve = `{"path": "pctr_v1/", "fqrv": {"contract": {"organization": "ads", "project": "pctr", "contract_number": 1}, "release_version": "v1"},
  "servableSettings": {"policySettings": {}}}`
	httpWrite(g1, "POST", "/contract/ads/pctr/1", "POST /contract/{org}/{project}/{n}", "ads/pctr/1", `{"router": {"LatestPhaseInPctBasedRouter": {}}}`, 200)
	httpWrite(g1, "POST", "/servable", "POST /servable", "ads/pctr/1/v1", serve, 200)
	httpWrite(g2, "POST", "/servable", "POST /servable", "ads/pctr/1/v1", serve, 409)
	httpWrite(g2, "PUT", "/ads/pctr/1/v1/policy", "PUT /{org}/{project}/{n}/{rv}/policy", "ads/pctr/1/v1", `{"phase_in": {"linear_over_secs": {"secs": 60}}}`, 200)
	httpWrite(g1, "POST", "/ads/pctr/1/v1/metrics", "POST /{org}/{project}/{n}/{rv}/metrics", "ads/pctr/1/v1", `{"auc": 0.71}`, 200)
	httpWrite(g1, "PUT", "/ads/pctr/1/v1/policy", "PUT /{org}/{project}/{n}/{rv}/policy", "ads/pctr/1/v1", `{"validity": [{"sometimes_valid": {}}]}`, 422)

	sidecar := sidecarpb.NewInferenceServiceClient(g2.dialModelWrites())
	const method = "/privacy_sandbox.bidding_auction_servers.inference.InferenceService/"
	reg := &sidecarpb.RegisterModelRequest{ModelSpec: &sidecarpb.ModelSpec{ModelPath: "registered/pctr_v2/"},
		ModelFiles: map[string][]byte{"registered/pctr_v2/model.pt": exampleModel(t, "pctr_v2")}}
	if _, err := sidecar.RegisterModel(ctx, reg); err != nil {
		t.Fatalf("RegisterModel: %v", err)
	}
	wants = append(wants, want{"sidecar", method + "RegisterModel", "registered/pctr_v2/", "OK", true})
	if _, err := sidecar.DeleteModel(ctx, &sidecarpb.DeleteModelRequest{ModelSpec: reg.ModelSpec}); err != nil {
		t.Fatalf("DeleteModel: %v", err)
	}
	wants = append(wants, want{"sidecar", method + "DeleteModel", "registered/pctr_v2/", "OK", true})
	if _, err := sidecar.DeleteModel(ctx, &sidecarpb.DeleteModelRequest{ModelSpec: reg.ModelSpec}); status.Code(err) != codes.NotFound {
		t.Fatalf("DeleteModel twice: %v", err)
	}
	wants = append(wants, want{"sidecar", method + "DeleteModel", "registered/pctr_v2/", "NotFound", false})

	if code, raw := g2.as(c, "POST", "/v2/repository/models/pctr_v1/load", ""); code != http.StatusConflict {
		t.Fatalf("OIP load: HTTP %d %s", code, raw)
	}
	wants = append(wants, want{"oip", "POST /v2/repository/models/{name}/load", "pctr_v1", "409", false})
	_, err := oippb.NewGRPCInferenceServiceClient(g1.dial()).RepositoryModelUnload(ctx, &oippb.RepositoryModelUnloadRequest{ModelName: "pctr_v1"})
	if status.Code(err) != codes.FailedPrecondition {
		t.Fatalf("OIP unload: %v", err)
	}
	wants = append(wants, want{"oip", "/inference.GRPCInferenceService/RepositoryModelUnload", "pctr_v1", "FailedPrecondition", false})
	httpWrite(g2, "DELETE", "/ads/pctr/1/v1", "DELETE /{org}/{project}/{n}/{rv}", "ads/pctr/1/v1", "", 200)

	// One object per write, each durable before its answer.
	if n := auditObjects(t, b); n != len(wants) {
		t.Errorf("%d audit objects, want %d", n, len(wants))
	}
	for gi, g := range []*grove{g1, g2} {
		got := g.auditTrail(c, "")
		if len(got) != len(wants) {
			t.Fatalf("replica %d lists %d entries, want %d: %+v", gi+1, len(got), len(wants), got)
		}
		for i, w := range wants {
			e := got[i]
			if e.Who != c.name || e.API != w.api || e.Route != w.route || e.Target != w.target || e.Status != w.status ||
				(e.Result == "ok") != w.ok || (e.Error == "") != w.ok || (i > 0 && e.Time.Before(got[i-1].Time)) {
				t.Errorf("replica %d, entry %d: %+v, want %+v by %s", gi+1, i, e, w, c.name)
			}
		}
	}

	got := g2.auditTrail(c, "")
	section := func(m map[string]json.RawMessage, name string) string {
		var buf bytes.Buffer
		if m[name] == nil {
			return ""
		}
		if err := json.Compact(&buf, m[name]); err != nil {
			t.Fatal(err)
		}
		return buf.String()
	}
	// What the writes changed: the policy's contract before and after, the
	// metric, the registered model's checksum, the deleted release.
	if b, a := section(got[3].Before, "model_config"), section(got[3].After, "model_config"); strings.Contains(b, `"linear_over_secs"`) || !strings.Contains(a, `"linear_over_secs":{"secs":60}`) {
		t.Errorf("policy entry: before %s after %s", b, a)
	}
	if a := section(got[4].After, "contract_state"); !strings.Contains(a, `"auc":0.71`) {
		t.Errorf("metrics entry: after %s", a)
	}
	if a := section(got[6].After, "registered_model"); !strings.Contains(a, `"checksum":"`+checksumOf(exampleModel(t, "pctr_v2"))+`"`) {
		t.Errorf("register entry: after %s", a)
	}
	if last := got[len(got)-1]; !strings.Contains(section(last.Before, "model_config"), `"release_version":"v1"`) || strings.Contains(section(last.After, "model_config"), `"release_version":"v1"`) {
		t.Errorf("delete entry: before %s after %s", last.Before, last.After)
	}
	if !strings.Contains(got[9].Error, "refused") {
		t.Errorf("refused OIP load: %+v", got[9])
	}

	// since: from the refused load on, whatever offset the time is given in.
	since := got[9].Time.In(time.FixedZone("", 3600)).Format(time.RFC3339Nano)
	if tail := g1.auditTrail(c, since); len(tail) != 3 || tail[0].ID != got[9].ID {
		t.Errorf("since %s: %+v, want the last 3 entries", since, tail)
	}
	if code, raw := g1.as(c, "GET", "/v1/audit?since=last+week", ""); code != http.StatusBadRequest || !strings.Contains(raw, `\"since\"`) {
		t.Errorf("a bad since: HTTP %d %s", code, raw)
	}

	// The log lines: one record "audit" per write, on the replica that served it.
	logs := g1.logs.String() + g2.logs.String()
	if n := strings.Count(logs, "msg=audit "); n != len(wants) || strings.Count(logs, "who="+c.name+" ") != len(wants) {
		t.Errorf("%d audit log records, want %d", n, len(wants))
	}
}

// TestAuditTrailRecordsTheClientCertificatesName checks that with
// tls.client_auth require and no auth section, a management write is
// recorded under the name of the caller's verified client certificate,
// with auth "certificate", not as anonymous.
//
// Budget: 10 s.
func TestAuditTrailRecordsTheClientCertificatesName(t *testing.T) {
	t.Parallel()
	s := newTLSSetup(t)
	g := startTLSGrove(t, s, "--tls-client-ca", s.caFile, "--tls-client-auth", "require")
	now := time.Now()
	c := s.client(s.ca.Client(t, "release-bot", now.Add(-time.Hour), now.Add(time.Hour)).TLS(t))
	resp, err := c.Post(g.url+"/contract/ads/pctr/1", "application/json", strings.NewReader(`{"router": {"LatestPhaseInPctBasedRouter": {}}}`))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("POST /contract/ads/pctr/1 with a client certificate: HTTP %d", resp.StatusCode)
	}
	code, raw, err := getWith(c, g.url+"/v1/audit")
	var l struct {
		Entries []struct {
			Who  string `json:"who"`
			Auth string `json:"auth"`
		} `json:"entries"`
	}
	if err != nil || code != http.StatusOK || json.Unmarshal([]byte(raw), &l) != nil || len(l.Entries) != 1 {
		t.Fatalf("GET /v1/audit: %d %s %v, want one entry", code, raw, err)
	}
	if e := l.Entries[0]; e.Who != "release-bot" || e.Auth != "certificate" {
		t.Errorf("entry by %q (auth %q), want release-bot (certificate)", e.Who, e.Auth)
	}
}
