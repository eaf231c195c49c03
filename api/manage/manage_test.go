package manage

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/groveml/grove/actors"
	"github.com/groveml/grove/api/forestflow"
	"github.com/groveml/grove/auth"
	"github.com/groveml/grove/conf/bucket"
	"github.com/groveml/grove/conf/modelconfig"
	"github.com/groveml/grove/internal/capped"
	"github.com/groveml/grove/servables"
	"github.com/groveml/grove/transport/httpserver"
)

// memManager is a Backend over an in-memory config; writes fail with err
// when set. kept maps a model path to the checksum of its kept content.
type memManager struct {
	cfg     modelconfig.Config
	metrics map[string]map[string]float64
	kept    map[string]string
	err     error
}

// Rollback writes path's kept checksum into its entry, as the real one.
func (m *memManager) Rollback(ctx context.Context, path string) (actors.Rolled, error) {
	i := slices.IndexFunc(m.cfg.Models, func(e modelconfig.Model) bool { return e.Path == path })
	switch {
	case i < 0:
		return actors.Rolled{}, fmt.Errorf("%w: %s", actors.ErrModelNotFound, path)
	case m.kept[path] == "":
		return actors.Rolled{}, fmt.Errorf("%w for %s: keeping is off for it", actors.ErrNothingKept, path)
	}
	from, to := m.cfg.Models[i].Checksum, m.kept[path]
	if _, err := m.EditConfig(ctx, func(c *modelconfig.Config) error {
		c.Models[i].Checksum = to
		return nil
	}); err != nil {
		return actors.Rolled{}, err
	}
	m.kept[path] = from
	return actors.Rolled{ModelPath: path, Checksum: to, From: from, Took: 1500 * time.Microsecond}, nil
}

func (m *memManager) EditConfig(_ context.Context, edit func(*modelconfig.Config) error) (*modelconfig.Config, error) {
	if m.err != nil {
		return nil, m.err
	}
	// A deep copy, as the real one reads the config afresh.
	data, err := m.cfg.Validate()
	if err != nil {
		return nil, err
	}
	next, err := modelconfig.Parse(data)
	if err != nil {
		return nil, err
	}
	if err := edit(next); err != nil {
		return nil, err
	}
	if _, err := next.Validate(); err != nil {
		return nil, err
	}
	m.cfg = *next
	return next, nil
}

func (m *memManager) DeleteServable(ctx context.Context, id, rv string) error {
	_, err := m.EditConfig(ctx, func(c *modelconfig.Config) error { return c.RemoveServable(id, rv) })
	return err
}

func (m *memManager) SetMetrics(_ context.Context, id, rv string, u modelconfig.MetricsUpdate) (map[string]float64, error) {
	if _, err := m.Servable(id, rv); err != nil {
		return nil, err
	}
	out, err := u.Apply(m.metrics[id+"/"+rv])
	m.metrics[id+"/"+rv] = out
	return out, err
}

func (m *memManager) Contract(id string) (modelconfig.Contract, error) {
	for _, k := range m.cfg.Contracts {
		if k.ID() == id {
			return k, nil
		}
	}
	return modelconfig.Contract{}, fmt.Errorf("%w %s", actors.ErrUnknownContract, id)
}

func (m *memManager) Servable(id, rv string) (actors.ServableInfo, error) {
	k, err := m.Contract(id)
	if err != nil {
		return actors.ServableInfo{}, err
	}
	for _, s := range k.Servables {
		if s.ReleaseVersion == rv {
			return actors.ServableInfo{}, nil
		}
	}
	return actors.ServableInfo{}, fmt.Errorf("%w %s", actors.ErrUnknownRelease, rv)
}

// serve returns the handler of the management API over m, beside the
// routes whose shapes overlap its own: the score and GraphPipe endpoints.
func serve(m Backend, opts httpserver.Options) http.Handler {
	h := httpserver.New(opts)
	Register(h, m, nil)
	h.Handle("POST /{org}/{project}/{n}/score", auth.RoleInfer, "forestflow", func(w http.ResponseWriter, r *http.Request) {
		_, _ = w.Write([]byte("score " + r.PathValue("org")))
	})
	return h.Handler()
}

func call(t *testing.T, h http.Handler, method, path, body string) (int, string) {
	t.Helper()
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest(method, path, strings.NewReader(body)))
	b, _ := io.ReadAll(rec.Result().Body)
	return rec.Code, string(b)
}

func TestManagementAPIAnswersWithForestFlowEnvelopesAndStatuses(t *testing.T) {
	m := &memManager{metrics: map[string]map[string]float64{}}
	s := serve(m, httpserver.Options{Registerer: prometheus.NewRegistry()})
	serve := func(rv string) string {
		return `{"path": "m_` + rv + `/", "fqrv": {"contract": {"organization": "ads", "project": "p", "contract_number": 1}, "release_version": "` + rv + `"},
			"servableSettings": {"policySettings": {"validityPolicy": [{"NeverValid": {}}]}}}`
	}
	steps := []struct {
		method, path, body string
		code               int
		has                string
	}{
		{"POST", "/contract/ads/p/1", `{"router": {"LatestPhaseInPctBasedRouter": {}}}`, 200, `"ContractCreatedSuccessfully"`},
		{"POST", "/contract/ads/p/1", `{}`, 422, `"ContractValidationError"`},
		{"POST", "/contract/ads/p/x", `{}`, 404, "contract number"},
		{"POST", "/servable", serve("v1"), 200, `"ServableCreatedSuccessfully"`},
		{"POST", "/servable", serve("v1"), 409, `"ServableAlreadyExistsError"`},
		{"POST", "/servable", `{"path": "x/"}`, 422, `"CreateServableRequestInvalidError"`},
		{"POST", "/servable", `{"path": "m_v1/", "fqrv": {"contract": {"organization": "ads", "project": "p", "contract_number": 1}, "release_version": "v2"}, "contractSettings": {}}`, 422, "cannot override contract settings"},
		{"POST", "/servable", `{"path": "m_v1/", "fqrv": {"contract": {"organization": "ads", "project": "p", "contract_number": 1}, "release_version": "v2"}}`, 422, "already release v1"},
		{"PUT", "/ads/p/1/v1/policy", `{"validity": []}`, 200, `"ServableUpdatedSuccessfully"`},
		{"PUT", "/ads/p/1/v9/policy", `{}`, 404, `"UnknownServable"`},
		{"PUT", "/ads/p/1/v1/policy", `{"shadow": {}, "validity": [{"promote_when": {"min_shadow_executions": 100, "max_mean_abs_diff": 0.01}}],
			"phase_in": {"linear_over_secs": {"secs": 60}}, "rollback_when": {"max_error_rate": 0.01, "min_requests": 50}}`, 200, `"ServableUpdatedSuccessfully"`},
		{"GET", "/ads/p/1/v1/settings", "", 200, `"rollback_when": {`},
		{"PUT", "/ads/p/1/v1/policy", `{"rollback_when": {"max_error_rate": 0.01, "min_requests": 50}}`, 422, "rollback_when watches a release while it phases in"},
		{"PUT", "/ads/p/1/v1/policy", `{"validity": [{"promote_when": {"min_shadow_executions": 0}}], "shadow": {}}`, 422, "promote_when needs min_shadow_executions from 1"},
		{"GET", "/ads/p/1/v1/settings", "", 200, `"min_shadow_executions": 100`},
		{"PUT", "/ads/p/1/v1/policy", `{"validity": []}`, 200, `"ServableUpdatedSuccessfully"`},
		{"PUT", "/ads/p/2/v1/logging", `{}`, 404, `"UnknownContract"`},
		{"PUT", "/ads/p/1/v1/logging-settings", `{"logLevel": "LOUD"}`, 422, "log_level"},
		{"PUT", "/ads/p/1", `{"expiration": {"keep_latest": 1}}`, 200, `"ContractUpdatedSuccessfully"`},
		{"GET", "/ads/p/1/c-settings", "", 200, `"keep_latest": 1`},
		{"GET", "/ads/p/1/list", "", 200, `"releaseVersion": "v1"`},
		{"GET", "/ads/p/1/v1/settings", "", 200, `"validity": []`},
		{"GET", "/ads/p/1/v9/settings", "", 404, `"UnknownServable"`},
		{"POST", "/ads/p/1/v1/metrics", `{"auc": 0.7}`, 200, `"auc": 0.7`},
		{"POST", "/ads/p/1/v1/metrics", `[1]`, 422, "metrics must be a JSON object"},
		{"DELETE", "/ads/p/1/v1", "", 200, `"ServablesDeletedSuccessfully"`},
		{"DELETE", "/ads/p/1/v1", "", 404, `"UnknownServable"`},
		{"POST", "/ads/p/1/other", `{}`, 404, "404 page not found"},
		{"POST", "/contract/ads/p/score", `{}`, 200, "score contract"},
	}
	for _, st := range steps {
		code, body := call(t, s, st.method, st.path, st.body)
		if code != st.code || !strings.Contains(body, st.has) {
			t.Errorf("%s %s %s\n got HTTP %d %s\nwant HTTP %d with %q", st.method, st.path, st.body, code, body, st.code, st.has)
		}
	}
	if len(m.cfg.Models) != 0 {
		t.Errorf("deleting the only release left its model listed: %+v", m.cfg.Models)
	}
}

func TestManagementWriteConflictsAnswer503WithRetryAfter(t *testing.T) {
	m := &memManager{err: fmt.Errorf("updating model_config.json: %w", bucket.ErrConflict)}
	s := serve(m, httpserver.Options{Registerer: prometheus.NewRegistry()})
	rec := httptest.NewRecorder()
	s.ServeHTTP(rec, httptest.NewRequest("POST", "/contract/ads/p/1", strings.NewReader(`{}`)))
	if rec.Code != http.StatusServiceUnavailable || rec.Header().Get("Retry-After") == "" {
		t.Errorf("conflict: HTTP %d, Retry-After %q", rec.Code, rec.Header().Get("Retry-After"))
	}
}

func TestFailuresAnswerForestFlowCasesOrTheirKindsStatus(t *testing.T) {
	fqrv := forestflow.FQRV{Contract: forestflow.Contract{Organization: "ads", Project: "p", ContractNumber: 1}, ReleaseVersion: "v1"}
	for _, c := range []struct {
		err        error
		code       int
		has        string
		retryAfter bool
	}{
		{fmt.Errorf("%w: v1", modelconfig.ErrServableExists), 409, `{"ServableAlreadyExistsError":`, false},
		{fmt.Errorf("%w ads/p/1", actors.ErrUnknownContract), 404, `{"UnknownContract":`, false},
		{modelconfig.ErrContractNotFound, 404, `{"UnknownContract":`, false},
		{modelconfig.ErrServableNotFound, 404, `{"UnknownServable":`, false},
		{fmt.Errorf("%w v1", actors.ErrUnknownRelease), 404, `{"UnknownServable":`, false},
		{fmt.Errorf("edit: %w", &modelconfig.Error{Field: "router", Msg: "unknown router"}), 422, `"ContractValidationError"`, false},
		{modelconfig.ErrContractExists, 422, `"ContractValidationError"`, false},
		{fmt.Errorf("updating: %w", bucket.ErrConflict), 503, "version precondition failed", true},
		{fmt.Errorf("%w: file://x", actors.ErrReadOnly), 403, "read-only", false},
		{fmt.Errorf("updating model_config.json in mem: %w", &bucket.ContentTooLargeError{Err: &capped.TooLargeError{What: "the new content of model_config.json", Limit: 64 << 20}}),
			413, "the new content of model_config.json is larger than its limit of 64 MiB", false},
		{fmt.Errorf("updating model_config.json in mem: %w", &capped.TooLargeError{What: "object model_config.json in mem", Limit: 64 << 20}),
			500, "object model_config.json in mem is larger than its limit of 64 MiB", false}, // the bucket's object, not the edit
		{context.DeadlineExceeded, 504, "deadline exceeded", false},
		{context.Canceled, 499, "canceled", false},
		{errors.New("disk on fire"), 500, "disk on fire", false},
	} {
		a := &api{h: httpserver.New(httpserver.Options{})}
		rec := httptest.NewRecorder()
		a.fail(rec, httptest.NewRequest("PUT", "/ads/pctr/1", nil), c.err, fqrv, forestflow.ContractValidationError)
		if rec.Code != c.code || !strings.Contains(rec.Body.String(), c.has) || (rec.Header().Get("Retry-After") != "") != c.retryAfter {
			t.Errorf("%v: HTTP %d %s Retry-After %q, want %d with %s", c.err, rec.Code, rec.Body, rec.Header().Get("Retry-After"), c.code, c.has)
		}
	}
}

func TestStatusOfMapsEveryKind(t *testing.T) {
	for k, want := range map[servables.Kind]int{
		servables.OK: 200, servables.NotFound: 404, servables.InvalidInput: 422, servables.OutputUnsupported: 500,
		servables.Overloaded: 429, servables.DeadlineExceeded: 504, servables.Canceled: 499, servables.Crashed: 500,
		servables.Execution: 500, servables.Unavailable: 503, servables.Conflict: 503, servables.ReadOnly: 403,
	} {
		if got := statusOf(k); got != want {
			t.Errorf("%v: %d, want %d", k, got, want)
		}
	}
}

// TestMetricsPastTheLimitAreTheCallersMistake checks that a metrics
// update that would give a release more than modelconfig.MaxMetrics
// metrics, each update within the limit, is refused as the caller's
// mistake (422, ContractValidationError, naming the limit), not answered
// 500 as a server fault.
func TestMetricsPastTheLimitAreTheCallersMistake(t *testing.T) {
	m := &memManager{metrics: map[string]map[string]float64{}}
	s := serve(m, httpserver.Options{Registerer: prometheus.NewRegistry()})
	if code, body := call(t, s, "POST", "/contract/ads/p/1", `{}`); code != 200 {
		t.Fatalf("creating the contract: HTTP %d %s", code, body)
	}
	release := `{"path": "m/", "fqrv": {"contract": {"organization": "ads", "project": "p", "contract_number": 1}, "release_version": "v1"}}`
	if code, body := call(t, s, "POST", "/servable", release); code != 200 {
		t.Fatalf("adding the release: HTTP %d %s", code, body)
	}
	batch := func(from int) string {
		var b strings.Builder
		b.WriteString("{")
		for i := range modelconfig.MaxMetrics {
			if i > 0 {
				b.WriteString(", ")
			}
			fmt.Fprintf(&b, `"m%d": 1`, from+i)
		}
		b.WriteString("}")
		return b.String()
	}
	if code, body := call(t, s, "POST", "/ads/p/1/v1/metrics", batch(0)); code != 200 {
		t.Fatalf("the first %d metrics: HTTP %d %s", modelconfig.MaxMetrics, code, body)
	}
	code, body := call(t, s, "POST", "/ads/p/1/v1/metrics", batch(modelconfig.MaxMetrics))
	if code != http.StatusUnprocessableEntity || !strings.Contains(body, `"ContractValidationError"`) || !strings.Contains(body, "at most 64 metrics") {
		t.Errorf("%d more metrics: HTTP %d %s, want 422 ContractValidationError naming the limit", modelconfig.MaxMetrics, code, body)
	}
}
