package console

import (
	"context"
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"testing/fstest"
	"testing/synctest"
	"time"

	"github.com/groveml/grove/actors"
	"github.com/groveml/grove/auth"
	"github.com/groveml/grove/conf/modelconfig"
	"github.com/groveml/grove/routing"
	"github.com/groveml/grove/servables"
	"github.com/groveml/grove/transport/httpserver"
	"github.com/groveml/grove/transport/httpserver/httpservertest"
	"github.com/groveml/grove/ui"
)

// models is a Source of fixed models and contracts: the tests change its
// fields between samples. err, if set, fails every contract read (the
// list, the plans, the stats), as a router that panics does.
type models struct {
	paths  []string
	shares map[string][]routing.Status // by contract id
	err    error
}

func (m *models) Status() actors.Status {
	st := actors.Status{Ready: true}
	for _, p := range m.paths {
		st.Models = append(st.Models, actors.ModelStatus{Path: p, State: actors.StateReady})
	}
	return st
}

func (m *models) Contracts() ([]modelconfig.Contract, error) {
	if m.err != nil {
		return nil, m.err
	}
	var out []modelconfig.Contract
	for id := range m.shares {
		parts := strings.Split(id, "/")
		out = append(out, modelconfig.Contract{Organization: parts[0], Project: parts[1], Number: 1})
	}
	return out, nil
}

func (m *models) ContractPlan(id string) (routing.Plan, error) {
	if m.err != nil {
		return routing.Plan{}, m.err
	}
	s, ok := m.shares[id]
	if !ok {
		return routing.Plan{}, fmt.Errorf("%w %s", actors.ErrUnknownContract, id)
	}
	return routing.Plan{Contract: id, Servables: s}, nil
}

func (m *models) ContractStats(id string) ([]actors.ServableStats, error) {
	p, err := m.ContractPlan(id)
	var out []actors.ServableStats
	for _, s := range p.Servables {
		out = append(out, actors.ServableStats{Release: s.Release, TrafficShare: s.Fraction, PhaseInPct: s.PhaseInPct})
	}
	return out, err
}

func TestSampleKeepsHistoriesOfWhatIsConfigured(t *testing.T) {
	m := newActorMetrics()
	src := &models{paths: []string{"a/", "b/"}, shares: map[string][]routing.Status{
		"o/p/1": {{Release: "v1", Fraction: 1, PhaseInPct: 100}, {Release: "v2", Fraction: 0, PhaseInPct: 0}}}}
	c := New(Options{Source: src, Gatherer: m.reg, Samples: 3})
	t0 := time.Unix(1000, 0)
	m.serve("ba", "a/", 1, 0.001)
	c.Sample(t0) // the baseline: no model point yet
	m.serve("ba", "a/", 4, 0.001)
	m.serve("ba", "b/", 2, 0.001)
	m.serve("ba", "gone/", 2, 0.001) // counted, but not configured
	src.shares["o/p/1"] = []routing.Status{{Release: "v1", Fraction: 0.75, PhaseInPct: 100}, {Release: "v2", Fraction: 0.25, PhaseInPct: 25}}
	c.Sample(t0.Add(2 * time.Second))

	d := mustDocument(t, c, t0.Add(2*time.Second))
	if a := d.ModelSeries["a/"]; len(a) != 1 || a[0].Requests != 4 || a[0].RPS != 2 || a[0].T != t0.Add(2*time.Second).UnixMilli() {
		t.Errorf("a/ history %+v, want one point of 4 requests, 2/s", a)
	}
	if b := d.ModelSeries["b/"]; len(b) != 1 || b[0].Requests != 2 {
		t.Errorf("b/ history %+v, want one point of 2 requests (first seen counts from zero)", b)
	}
	if _, ok := d.ModelSeries["gone/"]; ok {
		t.Error("a model that is not configured has a history")
	}
	h := d.ContractSeries["o/p/1"]
	if len(h) != 2 || h[0].Releases["v1"].Share != 1 || h[1].Releases["v2"].Share != 0.25 || h[1].Releases["v2"].PhaseInPct != 25 {
		t.Errorf("contract history %+v", h)
	}
	if len(d.Contracts) != 1 || d.Contracts[0].ID != "o/p/1" || len(d.Contracts[0].Servables) != 2 {
		t.Errorf("contracts %+v", d.Contracts)
	}

	// The histories keep Samples points; what is no longer configured goes.
	for i := 3; i <= 6; i++ {
		c.Sample(t0.Add(time.Duration(i) * time.Second))
	}
	src.paths = []string{"a/"}
	delete(src.shares, "o/p/1")
	c.Sample(t0.Add(7 * time.Second))
	d = mustDocument(t, c, t0.Add(7*time.Second))
	if a := d.ModelSeries["a/"]; len(a) != 3 || a[2].T != t0.Add(7*time.Second).UnixMilli() {
		t.Errorf("a/ history %+v, want the last 3 points", a)
	}
	if len(d.ModelSeries) != 1 || len(d.ContractSeries) != 0 || len(d.Contracts) != 0 {
		t.Errorf("histories of removed models or contracts are kept: %v, %v", d.ModelSeries, d.ContractSeries)
	}
}

// mustDocument returns c's document at now, failing the test if it fails.
func mustDocument(t *testing.T, c *Console, now time.Time) Document {
	t.Helper()
	d, err := c.Document(now)
	if err != nil {
		t.Fatal(err)
	}
	return d
}

// Contracts that cannot be read (the router panicked reading them: an
// internal error) keep their histories, with no point added, instead of
// losing them as contracts no longer configured do; the document, which
// would show them gone, is refused with the error (503), and comes back
// whole once they can be read.
func TestContractsThatCannotBeReadKeepTheirHistoriesAndTheDocumentAnswers503(t *testing.T) {
	src := &models{shares: map[string][]routing.Status{"o/p/1": {{Release: "v1", Fraction: 1, PhaseInPct: 100}}}}
	c := New(Options{Source: src, Samples: 3, Logger: slog.New(slog.DiscardHandler)})
	t0 := time.Unix(1000, 0)
	c.Sample(t0)
	src.err = servables.NewError(servables.Unavailable, "internal error")
	c.Sample(t0.Add(time.Second))
	h := newServer(t, c)
	resp := get(t, h, "GET", "/v1/console")
	body, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusServiceUnavailable || !strings.Contains(string(body), "internal error") {
		t.Errorf("GET /v1/console while the contracts cannot be read: %d %s, want 503 with the error", resp.StatusCode, body)
	}
	src.err = nil
	d := mustDocument(t, c, t0.Add(time.Second))
	if h := d.ContractSeries["o/p/1"]; len(h) != 1 || h[0].T != t0.UnixMilli() {
		t.Errorf("contract history after a sample that could not read it: %+v, want the point before", h)
	}
}

// newServer serves c's routes beside a ForestFlow-shaped route, which
// the console's prefix must win over.
func newServer(t *testing.T, c *Console) http.Handler {
	t.Helper()
	h := httpserver.New(httpserver.Options{})
	c.Register(h)
	h.Handle("GET /{org}/{project}/{n}/stats", auth.RoleRead, "forestflow", func(w http.ResponseWriter, _ *http.Request) {
		_, _ = io.WriteString(w, "contract stats")
	})
	return h.Handler()
}

func get(t *testing.T, h http.Handler, method, path string) *http.Response {
	t.Helper()
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest(method, path, nil))
	return rec.Result()
}

func TestPageAndDocument(t *testing.T) {
	assets := fstest.MapFS{"index.html": {Data: []byte("<!doctype html><title>t</title>")}, "app.js": {Data: []byte("1")}}
	src := &models{paths: []string{"a/"}}
	for _, authOn := range []bool{false, true} {
		h := newServer(t, New(Options{Source: src, Assets: assets, AuthRequired: authOn}))
		for _, tc := range []struct {
			method, path string
			code         int
			where, body  string
		}{
			{"GET", "/ui", http.StatusMovedPermanently, "/ui/", ""},
			{"GET", "/ui/", http.StatusOK, "", "<title>t</title>"},
			{"HEAD", "/ui/", http.StatusOK, "", ""},
			{"GET", "/ui/index.html", http.StatusMovedPermanently, "./", ""},
			{"GET", "/ui/app.js", http.StatusOK, "", "1"},
			{"GET", "/ui/nope.js", http.StatusNotFound, "", ""},
			{"POST", "/ui/", http.StatusMethodNotAllowed, "", "GET"},
			{"GET", "/ui/config.json", http.StatusOK, "", map[bool]string{false: `{"auth_required":false}`, true: `{"auth_required":true}`}[authOn]},
			// /ui is reserved: a contract of organization "ui" is not reached.
			{"GET", "/ui/p/1/stats", http.StatusNotFound, "", "404 page not found"},
		} {
			resp := get(t, h, tc.method, tc.path)
			body, _ := io.ReadAll(resp.Body)
			if resp.StatusCode != tc.code || resp.Header.Get("Location") != tc.where || !strings.Contains(string(body), tc.body) {
				t.Errorf("%s %s: %d %q, Location %q; want %d with %q, Location %q", tc.method, tc.path, resp.StatusCode, body,
					resp.Header.Get("Location"), tc.code, tc.body, tc.where)
			}
			if csp := resp.Header.Get("Content-Security-Policy"); !strings.Contains(csp, "default-src 'none'") || !strings.Contains(csp, "connect-src 'self'") {
				t.Errorf("%s %s: Content-Security-Policy %q", tc.method, tc.path, csp)
			}
		}
	}

	if resp := get(t, newServer(t, New(Options{Source: src})), "GET", "/org/p/1/stats"); resp.StatusCode != http.StatusOK {
		t.Errorf("the ForestFlow-shaped route beside the console: %d", resp.StatusCode)
	}
	resp := get(t, newServer(t, New(Options{Source: src})), "GET", "/v1/console")
	var d struct {
		IntervalMs int64         `json:"interval_ms"`
		Status     actors.Status `json:"status"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&d); err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("/v1/console: %d, %v", resp.StatusCode, err)
	}
	if d.IntervalMs != 1000 || len(d.Status.Models) != 1 || d.Status.Models[0].Path != "a/" {
		t.Errorf("/v1/console = %+v", d)
	}
	if cc := resp.Header.Get("Cache-Control"); cc != "no-store" {
		t.Errorf("/v1/console Cache-Control %q", cc)
	}
}

// The document needs the read role and refuses as Grove's JSON routes do;
// the page is open.
func TestDocumentNeedsReadThePageIsOpen(t *testing.T) {
	src := &models{}
	register := func(h *httpserver.Server) { New(Options{Source: src, Assets: ui.Assets()}).Register(h) }
	for _, r := range httpservertest.Refusals(t, register, "GET", "/v1/console", auth.RoleRead) {
		var body struct{ Error string }
		if err := json.Unmarshal(r.Body, &body); err != nil || !strings.Contains(body.Error, r.Want) {
			t.Errorf("%s: body %q, want {\"error\": ...%s...}", r.Why, r.Body, r.Want)
		}
	}
	// The page, with authentication on, answers a caller without
	// credentials.
	file := filepath.Join(t.TempDir(), "tokens.yaml")
	if err := os.WriteFile(file, fmt.Appendf(nil, "tokens:\n  - {name: reader, sha256: %x, roles: [read]}\n", sha256.Sum256([]byte("reader-token"))), 0o600); err != nil {
		t.Fatal(err)
	}
	a, err := auth.New(auth.Config{TokensFile: file, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	h := httpserver.New(httpserver.Options{Auth: a, Logger: slog.New(slog.DiscardHandler)})
	register(h)
	for _, p := range []string{Prefix + "/", Prefix + "/app.js"} {
		for _, method := range []string{"GET", "HEAD"} {
			if res := get(t, h.Handler(), method, p); res.StatusCode != http.StatusOK {
				t.Errorf("%s %s without credentials: %d, want 200", method, p, res.StatusCode)
			}
		}
	}
}

// The built console loads nothing from elsewhere: every URL in its files
// is relative, but the SVG namespace.
func TestBuiltAssetsAreSelfContained(t *testing.T) {
	assets := ui.Assets()
	urls := regexp.MustCompile(`(?i)(https?:)?//[a-z0-9.-]+\.[a-z]{2,}[^"'\s)]*`)
	for _, name := range []string{"index.html", "app.js", "style.css"} {
		data, err := fs.ReadFile(assets, name)
		if err != nil {
			t.Fatalf("the built console has no %s: %v (make ui)", name, err)
		}
		for _, u := range urls.FindAllString(string(data), -1) {
			if u != "http://www.w3.org/2000/svg" {
				t.Errorf("%s refers to %s: the console must load nothing from elsewhere", name, u)
			}
		}
	}
}

// Run samples every interval, concurrently with readers, and returns once
// its context is done.
func TestRunSamplesEveryIntervalUntilCanceled(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		m := newActorMetrics()
		src := &models{paths: []string{"a/"}, shares: map[string][]routing.Status{"o/p/1": {{Release: "v1", Fraction: 1, PhaseInPct: 100}}}}
		c := New(Options{Source: src, Gatherer: m.reg, Interval: 2 * time.Second})
		ctx, cancel := context.WithCancel(t.Context())
		done := make(chan struct{})
		go func() { c.Run(ctx); close(done) }()
		// Requests at 1, 3 and 5 s, between the samples at 0 (the
		// baseline), 2, 4 and 6 s.
		time.Sleep(time.Second)
		for range 3 {
			m.serve("ba", "a/", 6, 0.001)
			_, _ = c.Document(time.Now()) // a reader while Run samples
			time.Sleep(2 * time.Second)
		}
		synctest.Wait()
		d := mustDocument(t, c, time.Now())
		// Three intervals of 6 requests, 3/s; the contract is sampled
		// every time.
		a := d.ModelSeries["a/"]
		if len(a) != 3 || a[0].Requests != 6 || a[2].RPS != 3 || len(d.ContractSeries["o/p/1"]) != 4 {
			t.Errorf("after 6 s: a/ %+v, contract %+v", a, d.ContractSeries["o/p/1"])
		}
		cancel()
		synctest.Wait()
		select {
		case <-done:
		default:
			t.Fatal("Run did not return once its context was done")
		}
	})
}

// TestDocumentNamesTheCallersRoles: with authentication on, the document
// lists the caller's roles, which the page reads to call GET /v1/cluster
// only with a token holding manage; without authentication it names none.
func TestDocumentNamesTheCallersRoles(t *testing.T) {
	file := filepath.Join(t.TempDir(), "tokens.yaml")
	var b strings.Builder
	b.WriteString("tokens:\n")
	for tok, roles := range map[string]string{"reader-token": "read", "operator-token": "read, manage"} {
		fmt.Fprintf(&b, "  - {name: %s, sha256: %x, roles: [%s]}\n", strings.TrimSuffix(tok, "-token"), sha256.Sum256([]byte(tok)), roles)
	}
	if err := os.WriteFile(file, []byte(b.String()), 0o600); err != nil {
		t.Fatal(err)
	}
	a, err := auth.New(auth.Config{TokensFile: file, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	rolesOf := func(h http.Handler, token string) []string {
		t.Helper()
		req := httptest.NewRequest(http.MethodGet, "/v1/console", nil)
		if token != "" {
			req.Header.Set("Authorization", "Bearer "+token)
		}
		w := httptest.NewRecorder()
		h.ServeHTTP(w, req)
		if w.Code != http.StatusOK {
			t.Fatalf("GET /v1/console with %q: %d %s", token, w.Code, w.Body)
		}
		var doc struct {
			Roles *[]string `json:"caller_roles"`
		}
		if err := json.Unmarshal(w.Body.Bytes(), &doc); err != nil {
			t.Fatal(err)
		}
		if doc.Roles == nil {
			return nil
		}
		return *doc.Roles
	}
	src := &models{}
	withAuth := httpserver.New(httpserver.Options{Auth: a, Logger: slog.New(slog.DiscardHandler)})
	New(Options{Source: src}).Register(withAuth)
	h := withAuth.Handler()
	if got := rolesOf(h, "reader-token"); !slices.Equal(got, []string{"read"}) {
		t.Errorf("a read token: caller_roles %q, want [read]", got)
	}
	if got := rolesOf(h, "operator-token"); !slices.Equal(got, []string{"read", "manage"}) {
		t.Errorf("a read and manage token: caller_roles %q, want [read manage]", got)
	}
	open := httpserver.New(httpserver.Options{Logger: slog.New(slog.DiscardHandler)})
	New(Options{Source: src}).Register(open)
	if got := rolesOf(open.Handler(), ""); got != nil {
		t.Errorf("without authentication: caller_roles %q, want none", got)
	}
}
