package deeprec

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/codes"

	"github.com/groveml/grove/actors"
	"github.com/groveml/grove/servables"
)

func TestSignatureJSON(t *testing.T) {
	for _, c := range []struct {
		name string
		meta servables.Metadata
		sig  string
		want string
	}{
		{"DeepRec's demo model", servables.Metadata{
			Inputs:  []servables.TensorSpec{{Name: "x", DType: servables.Float32, Shape: []int64{-1, 1}}},
			Outputs: []servables.TensorSpec{{Name: "y", DType: servables.Float32, Shape: []int64{-1, 1}}}}, "serving_default",
			`{"signature_name": "serving_default","inputs": [{"name": "x","shape": [-1, 1],"type": "DT_FLOAT"}],"outputs": [{"name": "y","shape": [-1, 1],"type": "DT_FLOAT"}]}`},
		{"several, every type name", servable(), "predict",
			`{"signature_name": "predict","inputs": [{"name": "a","shape": [-1],"type": "DT_DOUBLE"},{"name": "b","shape": [2, 3, 4],"type": "DT_INT8"},` +
				`{"name": "c","shape": [],"type": "DT_STRING"},{"name": "d","shape": [1],"type": "DT_HALF"}],` +
				`"outputs": [{"name": "e","shape": [-1, 1],"type": "DT_BOOL"},{"name": "f","shape": [],"type": "DT_INVALID"}]}`},
		{"nothing known", servables.Metadata{}, "s", `{"signature_name": "s","inputs": [],"outputs": []}`},
		{"names escaped", servables.Metadata{Inputs: []servables.TensorSpec{{Name: `q"\`, DType: servables.Int16, Shape: []int64{1}}}}, "a\nb",
			`{"signature_name": "a\nb","inputs": [{"name": "q\"\\","shape": [1],"type": "DT_INT16"}],"outputs": []}`},
	} {
		t.Run(c.name, func(t *testing.T) {
			got := SignatureJSON(c.meta, c.sig)
			if string(got) != c.want {
				t.Errorf("got  %s\nwant %s", got, c.want)
			}
			if !json.Valid(got) {
				t.Errorf("not JSON: %s", got)
			}
		})
	}
}

func servable() servables.Metadata {
	return servables.Metadata{
		Inputs: []servables.TensorSpec{{Name: "a", DType: servables.Float64, Shape: []int64{-1}}, {Name: "b", DType: servables.Int8, Shape: []int64{2, 3, 4}},
			{Name: "c", DType: servables.Bytes, Shape: []int64{}}, {Name: "d", DType: servables.Float16, Shape: []int64{1}}},
		Outputs: []servables.TensorSpec{{Name: "e", DType: servables.Bool, Shape: []int64{-1, 1}}, {Name: "f"}},
	}
}

func TestModelPath(t *testing.T) {
	for in, want := range map[string]string{"pctr": "pctr/", "pctr/": "pctr/", "a/b": "a/b/", "pcvr/3": "pcvr/3/", "": ""} {
		if got := ModelPath(in); got != want {
			t.Errorf("ModelPath(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestTensorNames(t *testing.T) {
	specs := []servables.TensorSpec{{Name: "x"}, {Name: "y:0"}, {Name: "z"}}
	for in, want := range map[string]string{"x": "x", "x:0": "x", "y:0": "y:0", "z:1": "z:1", "q:0": "q:0", ":0": ":0"} {
		if got := tensorName(in, specs); got != want {
			t.Errorf("tensorName(%q) = %q, want %q", in, got, want)
		}
	}
	if got := outputFilter([]string{"z", "x:0", "x", "z"}, specs); fmt.Sprint(got) != "[z x]" {
		t.Errorf("outputFilter: %v", got)
	}
	if got := outputFilter(nil, specs); got != nil {
		t.Errorf("outputFilter(nil): %v", got)
	}
}

func TestStatusOf(t *testing.T) {
	for _, c := range []struct {
		err  error
		http int
		grpc codes.Code
	}{
		{nil, 200, codes.OK},
		{fmt.Errorf("x: %w", servables.ErrNotFound), 404, codes.NotFound},
		{servables.InvalidInputf("bad %v", servables.Float32), 400, codes.InvalidArgument},
		{servables.ErrOverloaded, 503, codes.ResourceExhausted},
		{context.DeadlineExceeded, 504, codes.DeadlineExceeded},
		{context.Canceled, 499, codes.Canceled},
		{actors.ErrStopped, 503, codes.Unavailable},
		{servables.ErrConflict, 409, codes.FailedPrecondition},
		{servables.ErrOutput, 500, codes.Internal},
		{servables.ErrCrashed, 500, codes.Internal},
		{errors.New("unclassified"), 500, codes.Internal},
	} {
		h, g := StatusOf(c.err)
		if h != c.http || g != c.grpc {
			t.Errorf("StatusOf(%v) = %d %v, want %d %v", c.err, h, g, c.http, c.grpc)
		}
	}
	if h, _ := StatusOf(servables.ErrInvalidInput); h != http.StatusBadRequest {
		t.Error(h)
	}
}

func TestErrorTextNamesDeepRecTypes(t *testing.T) {
	err := servables.InvalidInputf("input %q is %v, the model takes %v", "x", servables.Float64, servables.Float16)
	if got, want := ErrorText(err), `invalid input: input "x" is DT_DOUBLE, the model takes DT_HALF`; got != want {
		t.Errorf("got %q, want %q", got, want)
	}
}

func TestAModelThatIsLoadingIsAnswered503WithRetryAfterAndGRPCUnavailable(t *testing.T) {
	err := &actors.LoadingError{Path: "m/", RetryAfter: 2500 * time.Millisecond}
	rec := httptest.NewRecorder()
	fail(rec, err)
	if rec.Code != 503 || rec.Header().Get("Retry-After") != "3" || !strings.Contains(rec.Body.String(), "model m/ is loading") {
		t.Errorf("HTTP %d, Retry-After %q, %q; want 503, 3, \"model m/ is loading\"", rec.Code, rec.Header().Get("Retry-After"), rec.Body)
	}
	if _, g := StatusOf(err); g != codes.Unavailable {
		t.Errorf("gRPC %v, want Unavailable", g)
	}
}
