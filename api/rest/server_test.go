package rest

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/groveml/grove/actors"
	"github.com/groveml/grove/servables"
)

// echo is a Backend whose models echo their inputs; paths starting with
// "busy" are overloaded, "bad" fail with an input error, "boom" fail to run.
type echo struct{ ready bool }

func (e echo) Infer(_ context.Context, reqs []actors.Request) ([]actors.Result, error) {
	out := make([]actors.Result, len(reqs))
	for i, r := range reqs {
		out[i].ModelPath = r.ModelPath
		switch {
		case strings.HasPrefix(r.ModelPath, "busy"):
			out[i].Err = fmt.Errorf("%w: model busy/ has 2 requests queued (limit 2); retry later", actors.ErrOverloaded)
		case strings.HasPrefix(r.ModelPath, "bad"):
			out[i].Err = fmt.Errorf("%w: the model takes 2 inputs, got 1", servables.ErrInvalidInput)
		case strings.HasPrefix(r.ModelPath, "boom"):
			out[i].Err = errors.New("RuntimeError: shapes cannot be multiplied")
		case strings.HasPrefix(r.ModelPath, "none"):
			out[i].Err = fmt.Errorf("%w: no", actors.ErrModelNotFound)
		default:
			out[i].Outputs = r.Inputs
		}
	}
	return out, nil
}

func (echo) ModelPaths() []string  { return []string{"a/", "b/"} }
func (echo) Status() actors.Status { return actors.Status{} }
func (e echo) Ready() bool         { return e.ready }

func post(t *testing.T, h http.Handler, body string) (int, string) {
	t.Helper()
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest("POST", "/v1/inference", strings.NewReader(body)))
	b, _ := io.ReadAll(rec.Result().Body)
	return rec.Code, string(b)
}

func item(path string) string {
	return `{"model_path":"` + path + `","tensors":[{"data_type":"INT32","tensor_shape":[2],"tensor_content":["1","2"]}]}`
}

func TestInferenceMapsEachOutcomeToItsB_AError(t *testing.T) {
	s := New(echo{ready: true}, Options{Registerer: prometheus.NewRegistry()})
	code, body := post(t, s, `{"request":[`+strings.Join([]string{item("ok/"), item("none/"), item("bad/"), item("boom/"), `{"tensors":[]}`}, ",")+`]}`)
	if code != http.StatusOK {
		t.Fatalf("HTTP %d, want 200", code)
	}
	want := `{"response":[` +
		`{"model_path":"ok/","tensors":[{"tensor_shape":[2],"data_type":"INT32","tensor_content":[1,2]}]},` +
		`{"model_path":"none/","error":{"error_type":"MODEL_NOT_FOUND","description":"Requested model 'none/' has not been registered"}},` +
		`{"model_path":"bad/","error":{"error_type":"INPUT_PARSING","description":"invalid input: the model takes 2 inputs, got 1"}},` +
		`{"model_path":"boom/","error":{"error_type":"MODEL_EXECUTION","description":"Model Execution Error. Message: Model boom/ encounters an exception during evaluation: RuntimeError: shapes cannot be multiplied"}},` +
		`{"model_path":"","error":{"error_type":"INPUT_PARSING","description":"Missing model_path in the JSON document"}}]}`
	if body != want {
		t.Errorf("body\n%s\nwant\n%s", body, want)
	}
}

func TestInferenceAnswers429WhenAnItemIsOverloaded(t *testing.T) {
	s := New(echo{ready: true}, Options{})
	rec := httptest.NewRecorder()
	s.ServeHTTP(rec, httptest.NewRequest("POST", "/v1/inference", strings.NewReader(`{"request":[`+item("ok/")+","+item("busy/")+`]}`)))
	if rec.Code != http.StatusTooManyRequests || rec.Header().Get("Retry-After") == "" {
		t.Fatalf("HTTP %d Retry-After %q, want 429 with Retry-After", rec.Code, rec.Header().Get("Retry-After"))
	}
	if b := rec.Body.String(); !strings.Contains(b, `"tensor_content":[1,2]`) || !strings.Contains(b, "overloaded") {
		t.Errorf("body %s should answer the other item and name the overload", b)
	}
}

func TestInferenceRejectsBadDocumentsAtBatchLevel(t *testing.T) {
	s := New(echo{ready: true}, Options{MaxBodyBytes: 64})
	for _, tc := range []struct {
		body string
		code int
		want string
	}{
		{``, 400, `{"response":[{"error":{"error_type":"INPUT_PARSING","description":"JSON Parse Error: The document is empty."}}]}`},
		{`{"request":{}}`, 400, `Value of member: request, has unexpected member type (expected: 4, observed: 3)`},
		{`{"request":[` + strings.Repeat(" ", 100) + `]}`, 413, `exceeds the limit of 64 bytes`},
	} {
		code, body := post(t, s, tc.body)
		if code != tc.code || !strings.Contains(body, tc.want) {
			t.Errorf("%q: HTTP %d %s; want %d containing %s", tc.body, code, body, tc.code, tc.want)
		}
	}
}

func TestReadinessAndModelList(t *testing.T) {
	for _, ready := range []bool{false, true} {
		s := New(echo{ready: ready}, Options{})
		rec := httptest.NewRecorder()
		s.ServeHTTP(rec, httptest.NewRequest("GET", "/readyz", nil))
		if want := map[bool]int{false: 503, true: 200}[ready]; rec.Code != want {
			t.Errorf("ready=%v: /readyz %d, want %d", ready, rec.Code, want)
		}
	}
	rec := httptest.NewRecorder()
	New(echo{}, Options{}).ServeHTTP(rec, httptest.NewRequest("GET", "/v1/models", nil))
	if rec.Body.String() != `["a/","b/"]` {
		t.Errorf("/v1/models = %s", rec.Body.String())
	}
}

func TestConfigsComeFromBodyAndHeadersAndRequestIDIsEchoed(t *testing.T) {
	var got []actors.Request
	s := New(recorder{&got}, Options{})
	req := httptest.NewRequest("POST", "/v1/inference", strings.NewReader(`{"configs":{"user_id":"body","site":"x"},"request":[`+item("ok/")+`]}`))
	req.Header.Set("Grove-Config-User_id", "42")
	req.Header.Set("X-Request-Id", "abc")
	rec := httptest.NewRecorder()
	s.ServeHTTP(rec, req)
	if len(got) != 1 || got[0].Configs["user_id"] != "42" || got[0].Configs["site"] != "x" || got[0].RequestID != "abc" || got[0].API != "ba" {
		t.Fatalf("request %+v", got)
	}
	if rec.Header().Get("X-Request-Id") != "abc" {
		t.Errorf("X-Request-Id not echoed: %q", rec.Header().Get("X-Request-Id"))
	}
	rec = httptest.NewRecorder()
	s.ServeHTTP(rec, httptest.NewRequest("POST", "/v1/inference", strings.NewReader(`{"request":[`+item("ok/")+`]}`)))
	if id := rec.Header().Get("X-Request-Id"); len(id) != 32 || got[1].RequestID != id || got[1].Configs != nil {
		t.Errorf("generated request id %q, request %+v", id, got[1])
	}
}

// recorder is an echo backend that keeps the requests it saw.
type recorder struct{ seen *[]actors.Request }

func (r recorder) Infer(ctx context.Context, reqs []actors.Request) ([]actors.Result, error) {
	*r.seen = append(*r.seen, reqs...)
	return echo{}.Infer(ctx, reqs)
}
func (recorder) ModelPaths() []string  { return nil }
func (recorder) Status() actors.Status { return actors.Status{} }
func (recorder) Ready() bool           { return true }

func TestPprofIsServedOnlyWhenEnabled(t *testing.T) {
	for _, on := range []bool{false, true} {
		s := New(echo{ready: true}, Options{Registerer: prometheus.NewRegistry(), Pprof: on})
		rec := httptest.NewRecorder()
		s.ServeHTTP(rec, httptest.NewRequest("GET", "/debug/pprof/", nil))
		if got := rec.Code == http.StatusOK; got != on {
			t.Errorf("pprof %v: GET /debug/pprof/ answered %d", on, rec.Code)
		}
	}
}

func TestParseModelPathSplitsNameVersionAndAction(t *testing.T) {
	for _, c := range []struct{ rest, name, version, action string }{
		{"pcvr", "pcvr", "", ""},
		{"pcvr/infer", "pcvr", "", "infer"},
		{"pcvr/versions/3", "pcvr", "3", ""},
		{"pcvr/versions/3/ready", "pcvr", "3", "ready"},
		{"ads/pcvr/versions/12/stats", "ads/pcvr", "12", "stats"},
		{"ads/pcvr/infer", "ads/pcvr", "", "infer"},
	} {
		if n, v, a := parseModelPath(c.rest); n != c.name || v != c.version || a != c.action {
			t.Errorf("parseModelPath(%q) = %q, %q, %q; want %q, %q, %q", c.rest, n, v, a, c.name, c.version, c.action)
		}
	}
}
