package ba

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/groveml/grove/actors"
	"github.com/groveml/grove/servables"
	"github.com/groveml/grove/transport/httpserver"
)

// echo is a Backend whose models echo their inputs; paths starting with
// "busy" are overloaded, "bad" fail with an input error, "boom" fail to run,
// "none" are not found.
type echo struct{}

func (echo) Infer(_ context.Context, reqs []actors.Request) ([]actors.Result, error) {
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

func (echo) ModelPaths() []string { return []string{"a/", "b/"} }

// serveBA returns the handler of an HTTP server serving the B&A API over b.
func serveBA(b Backend, opts httpserver.Options) http.Handler {
	h := httpserver.New(opts)
	Register(h, b, ParseOptions{})
	return h.Handler()
}

func post(t *testing.T, h http.Handler, body string) (int, string) {
	t.Helper()
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest("POST", "/v1/inference", strings.NewReader(body)))
	b, _ := io.ReadAll(rec.Result().Body)
	return rec.Code, string(b)
}

func intItem(path string) string {
	return `{"model_path":"` + path + `","tensors":[{"data_type":"INT32","tensor_shape":[2],"tensor_content":["1","2"]}]}`
}

func TestInferenceMapsEachOutcomeToItsB_AError(t *testing.T) {
	h := serveBA(echo{}, httpserver.Options{Registerer: prometheus.NewRegistry()})
	code, body := post(t, h, `{"request":[`+strings.Join([]string{intItem("ok/"), intItem("none/"), intItem("bad/"), intItem("boom/"), `{"tensors":[]}`}, ",")+`]}`)
	if code != http.StatusOK {
		t.Fatalf("HTTP %d, want 200", code)
	}
	want := `{"response":[` +
		`{"model_path":"ok/","tensors":[{"tensor_shape":[2],"data_type":"INT32","tensor_content":[1,2]}]},` +
		`{"model_path":"none/","error":{"error_type":"MODEL_NOT_FOUND","description":"Requested model 'none/' has not been registered"}},` +
		`{"model_path":"bad/","error":{"error_type":"MODEL_EXECUTION","description":"Model Execution Error. Message: Model bad/ encounters an exception during evaluation: invalid input: the model takes 2 inputs, got 1"}},` +
		`{"model_path":"boom/","error":{"error_type":"MODEL_EXECUTION","description":"Model Execution Error. Message: Model boom/ encounters an exception during evaluation: RuntimeError: shapes cannot be multiplied"}},` +
		`{"model_path":"","error":{"error_type":"INPUT_PARSING","description":"Missing model_path in the JSON document"}}]}`
	if body != want {
		t.Errorf("body\n%s\nwant\n%s", body, want)
	}
}

func TestInferenceAnswers429WhenAnItemIsOverloaded(t *testing.T) {
	h := serveBA(echo{}, httpserver.Options{})
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest("POST", "/v1/inference", strings.NewReader(`{"request":[`+intItem("ok/")+","+intItem("busy/")+`]}`)))
	if rec.Code != http.StatusTooManyRequests || rec.Header().Get("Retry-After") == "" {
		t.Fatalf("HTTP %d Retry-After %q, want 429 with Retry-After", rec.Code, rec.Header().Get("Retry-After"))
	}
	if b := rec.Body.String(); !strings.Contains(b, `"tensor_content":[1,2]`) || !strings.Contains(b, "overloaded") {
		t.Errorf("body %s should answer the other item and name the overload", b)
	}
}

func TestInferenceRejectsBadDocumentsAtBatchLevel(t *testing.T) {
	h := serveBA(echo{}, httpserver.Options{MaxBodyBytes: 64})
	for _, tc := range []struct {
		body string
		code int
		want string
	}{
		{``, 400, `{"response":[{"error":{"error_type":"INPUT_PARSING","description":"JSON Parse Error: The document is empty."}}]}`},
		{`{"request":{}}`, 400, `Value of member: request, has unexpected member type (expected: 4, observed: 3)`},
		{`{"request":[` + strings.Repeat(" ", 100) + `]}`, 413, `exceeds the limit of 64 bytes`},
	} {
		code, body := post(t, h, tc.body)
		if code != tc.code || !strings.Contains(body, tc.want) {
			t.Errorf("%q: HTTP %d %s; want %d containing %s", tc.body, code, body, tc.code, tc.want)
		}
	}
}

func TestModelListIsTheReadyPaths(t *testing.T) {
	rec := httptest.NewRecorder()
	serveBA(echo{}, httpserver.Options{}).ServeHTTP(rec, httptest.NewRequest("GET", "/v1/models", nil))
	if rec.Body.String() != `["a/","b/"]` {
		t.Errorf("/v1/models = %s", rec.Body.String())
	}
}

// recorder is an echo backend that keeps the requests it saw.
type recorder struct{ seen *[]actors.Request }

func (r recorder) Infer(ctx context.Context, reqs []actors.Request) ([]actors.Result, error) {
	*r.seen = append(*r.seen, reqs...)
	return echo{}.Infer(ctx, reqs)
}
func (recorder) ModelPaths() []string { return nil }

func TestConfigsComeFromBodyAndHeadersAndRequestIDIsEchoed(t *testing.T) {
	var got []actors.Request
	h := serveBA(recorder{&got}, httpserver.Options{})
	req := httptest.NewRequest("POST", "/v1/inference", strings.NewReader(`{"configs":{"user_id":"body","site":"x"},"request":[`+intItem("ok/")+`]}`))
	req.Header.Set("Grove-Config-User_id", "42")
	req.Header.Set("X-Request-Id", "abc")
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	if len(got) != 1 || got[0].Configs["user_id"] != "42" || got[0].Configs["site"] != "x" || got[0].RequestID != "abc" || got[0].API != "ba" {
		t.Fatalf("request %+v", got)
	}
	if rec.Header().Get("X-Request-Id") != "abc" {
		t.Errorf("X-Request-Id not echoed: %q", rec.Header().Get("X-Request-Id"))
	}
	rec = httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest("POST", "/v1/inference", strings.NewReader(`{"request":[`+intItem("ok/")+`]}`)))
	if id := rec.Header().Get("X-Request-Id"); len(id) != 32 || got[1].RequestID != id || got[1].Configs != nil {
		t.Errorf("generated request id %q, request %+v", id, got[1])
	}
}

// failing is a backend whose Infer fails as a whole with err.
type failing struct{ err error }

func (f failing) Infer(context.Context, []actors.Request) ([]actors.Result, error) { return nil, f.err }
func (failing) ModelPaths() []string                                               { return nil }

func TestInferenceWhenTheWholeBatchFails(t *testing.T) {
	two := `{"request":[` + intItem("a/") + "," + intItem("b/") + `]}`
	for _, c := range []struct {
		err  error
		code int
		body string
	}{
		{actors.ErrStopped, 503, `{"response":[{"error":{"error_type":"UNKNOWN","description":"server is shutting down"}}]}`},
		{context.Canceled, 499, `{"response":[{"error":{"error_type":"UNKNOWN","description":"context canceled"}}]}`},
		{context.DeadlineExceeded, 200, `{"response":[` +
			`{"model_path":"a/","error":{"error_type":"GRPC","description":"DEADLINE_EXCEEDED: context deadline exceeded"}},` +
			`{"model_path":"b/","error":{"error_type":"GRPC","description":"DEADLINE_EXCEEDED: context deadline exceeded"}}]}`},
	} {
		if code, body := post(t, serveBA(failing{c.err}, httpserver.Options{}), two); code != c.code || body != c.body {
			t.Errorf("%v: HTTP %d %s\nwant %d %s", c.err, code, body, c.code, c.body)
		}
	}
}

// deadlineSeer answers like echo and records the deadline of each call.
type deadlineSeer struct {
	echo
	deadline chan time.Duration
}

func (d deadlineSeer) Infer(ctx context.Context, reqs []actors.Request) ([]actors.Result, error) {
	dl, ok := ctx.Deadline()
	if !ok {
		d.deadline <- 0
	} else {
		d.deadline <- time.Until(dl)
	}
	return d.echo.Infer(ctx, reqs)
}

func TestGroveTimeoutHeaderBoundsTheBatchAndABadOneIsRefused(t *testing.T) {
	b := deadlineSeer{deadline: make(chan time.Duration, 1)}
	h := serveBA(b, httpserver.Options{})
	send := func(timeout string) *httptest.ResponseRecorder {
		rec := httptest.NewRecorder()
		req := httptest.NewRequest("POST", "/v1/inference", strings.NewReader(`{"request":[`+intItem("ok/")+`]}`))
		if timeout != "" {
			req.Header.Set("Grove-Timeout", timeout)
		}
		h.ServeHTTP(rec, req)
		return rec
	}
	if rec := send("1.5s"); rec.Code != 200 {
		t.Fatalf("HTTP %d", rec.Code)
	}
	if d := <-b.deadline; d <= time.Second || d > 1500*time.Millisecond {
		t.Errorf("the backend saw a deadline %v away, want about 1.5s", d)
	}
	if send(""); <-b.deadline != 0 {
		t.Error("a request without the header got a deadline")
	}
	for _, bad := range []string{"50", "-1s", "0s", "soon"} {
		rec := send(bad)
		if rec.Code != 400 || !strings.Contains(rec.Body.String(), `invalid Grove-Timeout header \"`+bad+`\"`) {
			t.Errorf("Grove-Timeout %q: HTTP %d %s", bad, rec.Code, rec.Body.String())
		}
	}
}

func TestAnItemWhoseModelIsUnavailableFailsAloneInA200(t *testing.T) {
	gone := failingItem{fmt.Errorf("%w: model gone/ could not be reloaded after a crash", servables.ErrUnavailable)}
	code, body := post(t, serveBA(gone, httpserver.Options{}), `{"request":[`+intItem("ok/")+","+intItem("gone/")+`]}`)
	if code != 200 || !strings.Contains(body, `"tensor_content":[1,2]`) ||
		!strings.Contains(body, `{"model_path":"gone/","error":{"error_type":"MODEL_EXECUTION","description":"Model Execution Error. Message: Model gone/ encounters an exception during evaluation: unavailable: model gone/ could not be reloaded after a crash"}}`) {
		t.Fatalf("HTTP %d %s", code, body)
	}
}

// failingItem answers like echo, except that paths starting with "gone" fail with err.
type failingItem struct{ err error }

func (f failingItem) Infer(ctx context.Context, reqs []actors.Request) ([]actors.Result, error) {
	out, _ := echo{}.Infer(ctx, reqs)
	for i := range out {
		if strings.HasPrefix(out[i].ModelPath, "gone") {
			out[i].Outputs, out[i].Err = nil, f.err
		}
	}
	return out, nil
}

func (failingItem) ModelPaths() []string { return nil }

func TestInferenceParsesNumbersAsTheServerSays(t *testing.T) {
	body := `{"request":[{"model_path":"a/","tensors":[{"data_type":"INT32","tensor_shape":[2],"tensor_content":["1",2]}]}]}`
	for opts, want := range map[ParseOptions]string{
		{}:                            `{"response":[{"model_path":"a/","error":{"error_type":"INPUT_PARSING","description":"All numbers within the tensor_content must be enclosed in quotes"}}]}`,
		{AcceptUnquotedNumbers: true}: `{"response":[{"model_path":"a/","tensors":[{"tensor_shape":[2],"data_type":"INT32","tensor_content":[1,2]}]}]}`,
	} {
		h := httpserver.New(httpserver.Options{Registerer: prometheus.NewRegistry()})
		Register(h, echo{}, opts)
		if code, got := post(t, h.Handler(), body); code != http.StatusOK || got != want {
			t.Errorf("%+v: HTTP %d %s\nwant %s", opts, code, got, want)
		}
	}
}
