package graphpipe

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"maps"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	gp "github.com/oracle/graphpipe-go"

	"github.com/groveml/grove/actors"
	"github.com/groveml/grove/servables"
	"github.com/groveml/grove/transport/httpserver"
)

func TestConfigsReadForestFlowPairs(t *testing.T) {
	for config, want := range map[string]map[string]string{
		"":                        nil,
		"user_id:u42":             {"user_id": "u42"},
		"User_Id: u42 , site:a:b": {"user_id": "u42", "site": "a:b"},
		"no-colon,,:empty-key,k:": {"k": ""},
		"k:first,k:second":        {"k": "second"},
	} {
		if got := configs(config); !maps.Equal(got, want) {
			t.Errorf("configs(%q) = %v, want %v", config, got, want)
		}
	}
}

func TestOutputsSelectedByNameInRequestOrder(t *testing.T) {
	outs := []servables.Tensor{{Name: "a"}, {Name: "b"}}
	got, err := selectOutputs(outs, []string{"b", "a"})
	if err != nil || len(got) != 2 || got[0].Name != "b" || got[1].Name != "a" {
		t.Errorf("select b, a: %v %v", got, err)
	}
	if got, err := selectOutputs(outs, nil); err != nil || len(got) != 2 || got[0].Name != "a" {
		t.Errorf("select none: %v %v", got, err)
	}
	if _, err := selectOutputs(outs, []string{"c"}); err == nil || !strings.Contains(err.Error(), `"c"`) || !strings.Contains(err.Error(), `"a", "b"`) {
		t.Errorf("unknown output: %v", err)
	}
}

func TestStatusOfMapsEveryKind(t *testing.T) {
	for _, c := range []struct {
		err  error
		want int
	}{
		{nil, 200},
		{actors.ErrUnknownContract, 404},
		{servables.ErrInvalidInput, 400},
		{servables.ErrOutput, 500},
		{servables.ErrOverloaded, 429},
		{context.DeadlineExceeded, 504},
		{context.Canceled, 499},
		{servables.ErrCrashed, 500},
		{errors.New("RuntimeError"), 500},
		{actors.ErrStopped, 503},
		{fmt.Errorf("%w in contract a/b/1", actors.ErrNoActiveServable), 422},
		{servables.ErrConflict, 409},
		{servables.ErrReadOnly, 403},
	} {
		if got := statusOf(c.err); got != c.want {
			t.Errorf("%v (%v): %d, want %d", c.err, servables.KindOf(c.err), got, c.want)
		}
	}
}

// contracts is a Backend: contract "ads/ok/1" echoes doubled inputs with
// one output named "y"; "ads/fail/1" fails every request with err;
// "ads/idle/1" has no active servable; any other is unknown.
type contracts struct{ err error }

func (c contracts) Score(_ context.Context, id, _ string, req actors.Request) (actors.Result, string, error) {
	switch id {
	case "ads/ok/1":
		out := double(req.Inputs[0])
		out.Name = "y"
		return actors.Result{Outputs: []servables.Tensor{out}}, "v1", nil
	case "ads/fail/1":
		return actors.Result{Err: c.err}, "v1", nil
	case "ads/idle/1":
		return actors.Result{}, "", fmt.Errorf("%w %s", actors.ErrNoActiveServable, id)
	}
	return actors.Result{}, "", fmt.Errorf("%w %s", actors.ErrUnknownContract, id)
}

func (contracts) ContractStats(id string) ([]actors.ServableStats, error) {
	switch id {
	case "ads/ok/1":
		return []actors.ServableStats{{Release: "v1", ModelPath: "m/", Ready: true, TrafficShare: 1}}, nil
	case "ads/idle/1":
		return []actors.ServableStats{{Release: "v1", ModelPath: "m/"}}, nil
	}
	return nil, fmt.Errorf("%w %s", actors.ErrUnknownContract, id)
}

func (contracts) Servable(string, string) (actors.ServableInfo, error) {
	return actors.ServableInfo{Metadata: servables.Metadata{Runtime: "torchscript"}}, nil
}

func TestServeAnswersEachFailureWithItsStatus(t *testing.T) {
	infer := buildInfer(t, "", nil, nil, []float32{1, 2})
	for _, c := range []struct {
		err        error
		path       string
		body       []byte
		code       int
		has        string
		retryAfter bool
	}{
		{nil, "/ads/ok/1/gp", infer, 200, "", false},
		{nil, "/ads/ok/1/gp", buildInfer(t, "", nil, []string{"z"}, []float32{1}), 400, `"z"`, false},
		{nil, "/ads/ok/x/gp", infer, 404, "contract number", false},
		{nil, "/ads/nope/1/gp", infer, 404, "unknown contract", false},
		{nil, "/ads/idle/1/gp", infer, 422, "no active servables", false},
		{nil, "/ads/ok/1/gp", []byte("not a flatbuffer"), 400, "", false},
		{fmt.Errorf("%w: queue full", servables.ErrOverloaded), "/ads/fail/1/gp", infer, 429, "queue full", true},
		{fmt.Errorf("%w: takes 2 inputs", servables.ErrInvalidInput), "/ads/fail/1/gp", infer, 400, "takes 2 inputs", false},
		{errors.New("RuntimeError: boom"), "/ads/fail/1/gp", infer, 500, "boom", false},
		{&actors.LoadingError{Path: "m/", RetryAfter: 2500 * time.Millisecond}, "/ads/fail/1/gp", infer, 503, "model m/ is loading", true},
		{nil, "/ads/idle/1/gp", buildMetadataRequest(), 422, "no active servables", false},
		{nil, "/ads/nope/1/gp", buildMetadataRequest(), 404, "unknown contract", false},
		{nil, "/ads/ok/1/gp", buildMetadataRequest(), 200, "Grove contract ads/ok/1: release v1, model m/", false},
	} {
		h := httpserver.New(httpserver.Options{})
		Register(h, contracts{c.err})
		rec := httptest.NewRecorder()
		h.Handler().ServeHTTP(rec, httptest.NewRequest("POST", c.path, bytes.NewReader(c.body)))
		if rec.Code != c.code || !strings.Contains(rec.Body.String(), c.has) || (rec.Header().Get("Retry-After") != "") != c.retryAfter {
			t.Errorf("%s (%v): HTTP %d %q Retry-After %q, want %d with %q", c.path, c.err, rec.Code, rec.Body, rec.Header().Get("Retry-After"), c.code, c.has)
		}
		if strings.Contains(c.has, "is loading") && rec.Header().Get("Retry-After") != "3" {
			t.Errorf("Retry-After %q for a model loading for 2.5 s more, want 3", rec.Header().Get("Retry-After"))
		}
		if c.code == http.StatusOK && rec.Header().Get("Content-Type") != "application/octet-stream" {
			t.Errorf("%s: Content-Type %q", c.path, rec.Header().Get("Content-Type"))
		}
	}
}

// FuzzConfigs reads arbitrary GraphPipe config strings: every key is
// non-empty, lowercase and trimmed, every value trimmed, and both come
// from the string. The seed corpus is in testdata/fuzz/FuzzConfigs.
func FuzzConfigs(f *testing.F) {
	f.Fuzz(func(t *testing.T, config string) {
		for k, v := range configs(config) {
			if k == "" || k != strings.ToLower(strings.TrimSpace(k)) || v != strings.TrimSpace(v) ||
				!strings.Contains(strings.ToLower(config), k) || !strings.Contains(config, v) {
				t.Fatalf("configs(%q) has %q: %q", config, k, v)
			}
		}
	})
}

// bf16 is a Backend whose every contract answers one BFLOAT16 output,
// which GraphPipe has no type for.
type bf16 struct{ contracts }

func (bf16) Score(context.Context, string, string, actors.Request) (actors.Result, string, error) {
	return actors.Result{Outputs: []servables.Tensor{{Name: "y", DType: servables.BFloat16, Shape: []int64{1}, Data: []byte{0x80, 0x3f}}}}, "v1", nil
}

func TestAnOutputGraphPipeCannotCarryIsA500ThatTheClientSees(t *testing.T) {
	h := httpserver.New(httpserver.Options{})
	Register(h, bf16{})
	rec := httptest.NewRecorder()
	h.Handler().ServeHTTP(rec, httptest.NewRequest("POST", "/ads/ok/1/gp", bytes.NewReader(buildInfer(t, "", nil, nil, []float32{1}))))
	if rec.Code != http.StatusInternalServerError || !strings.Contains(rec.Body.String(), `output 0 ("y") is BFLOAT16, which GraphPipe has no type for`) {
		t.Fatalf("HTTP %d %q, want 500 naming the output", rec.Code, rec.Body)
	}
	if raceEnabled {
		return // graphpipe-go's client fails -race's checkptr, see race_off_test.go
	}
	srv := httptest.NewServer(h.Handler())
	defer srv.Close()
	outs, err := gp.MultiRemote(http.DefaultClient, srv.URL+"/ads/ok/1/gp", []any{[]float32{1}}, nil, nil)
	if err == nil || !strings.Contains(err.Error(), "BFLOAT16") {
		t.Fatalf("MultiRemote = %v, %v; want the output's error", outs, err)
	}
}
