package oip

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

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	grpcstatus "google.golang.org/grpc/status"

	"github.com/groveml/grove/actors"
	"github.com/groveml/grove/api/oip/oippb"
	"github.com/groveml/grove/auth"
	"github.com/groveml/grove/servables"
	"github.com/groveml/grove/transport/httpserver"
)

// fake is a Backend serving model path "m/" (model m, version 1): it
// answers outputs, or fails every request with err, or the whole call with
// callErr.
type fake struct {
	outputs      []servables.Tensor
	err, callErr error
	// left is how far the last call's deadline was (0: it had none).
	left time.Duration
}

func (f *fake) Infer(ctx context.Context, reqs []actors.Request) ([]actors.Result, error) {
	f.left = 0
	if dl, ok := ctx.Deadline(); ok {
		f.left = time.Until(dl)
	}
	if f.callErr != nil {
		return nil, f.callErr
	}
	return []actors.Result{{ModelPath: reqs[0].ModelPath, Outputs: f.outputs, Err: f.err}}, nil
}
func (*fake) ModelPaths() []string                { return []string{"m/"} }
func (*fake) NewestVersion(string) (string, bool) { return "", false }
func (*fake) ModelMetadata(string) (servables.Metadata, string, bool) {
	return servables.Metadata{Runtime: "torchscript"}, "", true
}
func (*fake) ModelServing(string) (actors.ModelServing, bool) {
	return actors.ModelServing{Replicas: 1, MaxBatchRows: 1}, true
}
func (*fake) ModelStats(string) (actors.ModelStats, bool) { return actors.ModelStats{}, true }
func (*fake) Status() actors.Status                       { return actors.Status{} }
func (*fake) Ready() bool                                 { return true }

// noGRPC registers no service.
type noGRPC struct{}

func (noGRPC) Register(*grpc.ServiceDesc, any, map[string]auth.Role) {}

func TestStatusOfMapsEveryKind(t *testing.T) {
	for k, want := range map[servables.Kind]status{
		servables.OK:                {200, codes.OK},
		servables.NotFound:          {404, codes.NotFound},
		servables.InvalidInput:      {400, codes.InvalidArgument},
		servables.OutputUnsupported: {500, codes.Internal},
		servables.Overloaded:        {503, codes.ResourceExhausted},
		servables.DeadlineExceeded:  {504, codes.DeadlineExceeded},
		servables.Canceled:          {499, codes.Canceled},
		servables.Crashed:           {500, codes.Internal},
		servables.Execution:         {500, codes.Internal},
		servables.Unavailable:       {503, codes.Unavailable},
		servables.Conflict:          {409, codes.FailedPrecondition},
		servables.ReadOnly:          {403, codes.FailedPrecondition},
	} {
		if got := statusOf(k); got != want {
			t.Errorf("%v: %v, want %v", k, got, want)
		}
	}
}

const inferBody = `{"inputs":[{"name":"x","shape":[1],"datatype":"FP32","data":[1]}]}`

func TestInferFailuresAnswerTheirKindsStatusOverRESTAndGRPC(t *testing.T) {
	for _, c := range []struct {
		f     *fake
		code  int
		grpc  codes.Code
		has   string
		retry bool
	}{
		{f: &fake{err: fmt.Errorf("%w: the model takes 2 inputs", servables.ErrInvalidInput)}, code: 400, grpc: codes.InvalidArgument, has: "the model takes 2 inputs"},
		{f: &fake{err: fmt.Errorf("%w: queue full", servables.ErrOverloaded)}, code: 503, grpc: codes.ResourceExhausted, has: "queue full", retry: true},
		{f: &fake{err: fmt.Errorf("%w: 10ms", servables.ErrDeadlineExceeded)}, code: 504, grpc: codes.DeadlineExceeded, has: "10ms"},
		{f: &fake{err: errors.New("RuntimeError: shapes cannot be multiplied")}, code: 500, grpc: codes.Internal, has: "cannot be multiplied"},
		{f: &fake{err: fmt.Errorf("%w: model m/", actors.ErrModelNotFound)}, code: 404, grpc: codes.NotFound, has: "model m/"},
		{f: &fake{callErr: actors.ErrStopped}, code: 503, grpc: codes.Unavailable, has: "shutting down"},
		{f: &fake{callErr: context.Canceled}, code: 499, grpc: codes.Canceled, has: "canceled"},
		{f: &fake{err: &actors.LoadingError{Path: "m/", RetryAfter: 2500 * time.Millisecond}}, code: 503, grpc: codes.Unavailable, has: "model m/ is loading; retry after 3 s", retry: true},
	} {
		h := httpserver.New(httpserver.Options{})
		Register(h, noGRPC{}, c.f, "1.0", nil)
		rec := httptest.NewRecorder()
		h.Handler().ServeHTTP(rec, httptest.NewRequest("POST", "/v2/models/m/infer", strings.NewReader(inferBody)))
		body, _ := io.ReadAll(rec.Body)
		if rec.Code != c.code || !strings.HasPrefix(string(body), `{"error":`) || !strings.Contains(string(body), c.has) || (rec.Header().Get("Retry-After") != "") != c.retry {
			t.Errorf("REST: HTTP %d %s Retry-After %q, want %d with %q", rec.Code, body, rec.Header().Get("Retry-After"), c.code, c.has)
		}
		if strings.Contains(c.has, "is loading") && rec.Header().Get("Retry-After") != "3" {
			t.Errorf("REST: Retry-After %q for a model loading for 2.5 s more, want 3", rec.Header().Get("Retry-After"))
		}
		g := &grpcService{b: c.f}
		_, err := g.ModelInfer(t.Context(), &oippb.ModelInferRequest{ModelName: "m", Inputs: []*oippb.ModelInferRequest_InferInputTensor{
			{Name: "x", Datatype: "FP32", Shape: []int64{1}, Contents: &oippb.InferTensorContents{Fp32Contents: []float32{1}}}}})
		if st := grpcstatus.Convert(err); st.Code() != c.grpc || !strings.Contains(st.Message(), c.has) {
			t.Errorf("gRPC: %v, want %v with %q", err, c.grpc, c.has)
		}
	}
}

func TestUnknownModelsAnswerTritonsMessage(t *testing.T) {
	h := httpserver.New(httpserver.Options{})
	Register(h, noGRPC{}, &fake{}, "1.0", nil)
	for path, want := range map[string]string{
		"/v2/models/nope/infer":            `{"error":"Request for unknown model: 'nope' is not found"}`,
		"/v2/models/m/versions/7/infer":    `{"error":"Request for unknown model: 'm' version 7 is not found"}`,
		"/v2/models/m/versions/7/whatever": `{"error":"no such endpoint: POST /v2/models/m/versions/7/whatever"}`,
	} {
		rec := httptest.NewRecorder()
		h.Handler().ServeHTTP(rec, httptest.NewRequest("POST", path, strings.NewReader(inferBody)))
		if rec.Code != http.StatusNotFound || rec.Body.String() != want {
			t.Errorf("POST %s: %d %s, want 404 %s", path, rec.Code, rec.Body, want)
		}
	}
	g := &grpcService{b: &fake{}}
	if _, err := g.ModelMetadata(t.Context(), &oippb.ModelMetadataRequest{Name: "m", Version: "2"}); grpcstatus.Code(err) != codes.NotFound ||
		grpcstatus.Convert(err).Message() != "Request for unknown model: 'm' version 2 is not found" {
		t.Errorf("gRPC ModelMetadata: %v", err)
	}
	if r, err := g.ModelReady(t.Context(), &oippb.ModelReadyRequest{Name: "nope"}); err != nil || r.GetReady() {
		t.Errorf("gRPC ModelReady of an unknown model: %v %v, want false", r, err)
	}
}

// The first reading of a /v2/models/ path is OIP's: the last segment is
// the action if it is an endpoint word, "versions/{v}" before it the
// version, the rest the model name.
func TestTheFirstReadingOfAModelPathIsOIPs(t *testing.T) {
	for _, c := range []struct{ rest, name, version, action string }{
		{"pcvr", "pcvr", "", ""},
		{"pcvr/infer", "pcvr", "", "infer"},
		{"pcvr/versions/3", "pcvr", "3", ""},
		{"pcvr/versions/3/ready", "pcvr", "3", "ready"},
		{"ads/pcvr/versions/12/stats", "ads/pcvr", "12", "stats"},
		{"ads/pcvr/infer", "ads/pcvr", "", "infer"},
	} {
		if r := modelRoutes(c.rest, nil)[0]; r != (modelRoute{c.name, c.version, c.action}) {
			t.Errorf("modelRoutes(%q)[0] = %+v; want %q, %q, %q", c.rest, r, c.name, c.version, c.action)
		}
	}
}

// FuzzParseModelPath splits arbitrary /v2/models/ paths: the first
// reading's action is the path's last segment, and its name and version
// (after the last "/versions/") put back together give the rest. The seed
// corpus is in testdata/fuzz/FuzzParseModelPath.
func FuzzParseModelPath(f *testing.F) {
	f.Fuzz(func(t *testing.T, rest string) {
		r := modelRoutes(rest, nil)[0]
		name, version, action := r.name, r.version, r.action
		base, found := rest, action == ""
		if action != "" {
			base, found = strings.CutSuffix(rest, "/"+action)
		}
		if !found || (base != name && base != name+"/versions/"+version) || strings.Contains(version, "/versions/") {
			t.Fatalf("modelRoutes(%q)[0] = %q, %q, %q", rest, name, version, action)
		}
	})
}

func TestTheTimeoutParameterBoundsTheRequestInMicroseconds(t *testing.T) {
	f := &fake{}
	h := httpserver.New(httpserver.Options{})
	Register(h, noGRPC{}, f, "1.0", nil)
	rest := func(params string) (int, string) {
		rec := httptest.NewRecorder()
		body := `{"parameters": ` + params + `, "inputs": [{"name": "x", "datatype": "FP32", "shape": [1], "data": [1]}]}`
		h.Handler().ServeHTTP(rec, httptest.NewRequest("POST", "/v2/models/m/infer", strings.NewReader(body)))
		return rec.Code, rec.Body.String()
	}
	if code, body := rest(`{"timeout": 50000}`); code != 200 || f.left <= 40*time.Millisecond || f.left > 50*time.Millisecond {
		t.Fatalf("REST timeout 50000 us: HTTP %d %s, the backend saw a deadline %v away", code, body, f.left)
	}
	if rest(`{"timeout": 0}`); f.left != 0 {
		t.Fatalf("timeout 0 set a deadline %v away", f.left)
	}
	for _, bad := range []string{`{"timeout": -1}`, `{"timeout": "50ms"}`, `{"timeout": 1.5}`, `{"timeout": 18446744073709551615}`} {
		if code, body := rest(bad); code != 400 || !strings.Contains(body, `parameter \"timeout\"`) {
			t.Errorf("%s: HTTP %d %s, want 400 naming the parameter", bad, code, body)
		}
	}
	g := &grpcService{b: f}
	call := func(p *oippb.InferParameter) error {
		_, err := g.ModelInfer(t.Context(), &oippb.ModelInferRequest{ModelName: "m", Parameters: map[string]*oippb.InferParameter{"timeout": p},
			Inputs: []*oippb.ModelInferRequest_InferInputTensor{{Name: "x", Datatype: "FP32", Shape: []int64{1}, Contents: &oippb.InferTensorContents{Fp32Contents: []float32{1}}}}})
		return err
	}
	if err := call(&oippb.InferParameter{ParameterChoice: &oippb.InferParameter_Int64Param{Int64Param: 20000}}); err != nil || f.left <= 10*time.Millisecond || f.left > 20*time.Millisecond {
		t.Fatalf("gRPC timeout 20000 us: %v, deadline %v away", err, f.left)
	}
	err := call(&oippb.InferParameter{ParameterChoice: &oippb.InferParameter_StringParam{StringParam: "20ms"}})
	if st := grpcstatus.Convert(err); st.Code() != codes.InvalidArgument || !strings.Contains(st.Message(), "int64_param") {
		t.Fatalf("gRPC string timeout: %v", err)
	}
}
