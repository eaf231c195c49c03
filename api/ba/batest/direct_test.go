package batest

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/groveml/grove/servables"
)

// double is a servable that returns the sum of its one input's values.
type double struct{}

func (double) Metadata() servables.Metadata { return servables.Metadata{Runtime: "test"} }
func (double) Close() error                 { return nil }
func (double) Predict(_ context.Context, in []servables.Tensor) ([]servables.Tensor, error) {
	out, _ := servables.NewTensor("y", servables.Float32, []int64{1, 1})
	for _, v := range in[0].Float32s() {
		out.Float32s()[0] += v
	}
	return []servables.Tensor{out}, nil
}

func post(t *testing.T, h http.Handler, body string) (int, string) {
	t.Helper()
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest(http.MethodPost, "/v1/inference", strings.NewReader(body)))
	return rec.Code, rec.Body.String()
}

// The direct handler answers each item with the servable's outputs in the
// B&A answer, and a body that does not parse with a B&A batch error and
// 400; its pooled buffers carry nothing from one request to the next.
func TestDirectHandlerAnswersWithTheServable(t *testing.T) {
	h := DirectHandler(double{})
	for _, c := range []struct{ in, out string }{{`"1.5","2"`, `3.5`}, {`"0.25","0.5"`, `0.75`}} {
		code, body := post(t, h, `{"request":[{"model_path":"m/","tensors":[{"data_type":"FLOAT","tensor_shape":[1,2],"tensor_content":[`+c.in+`]}]}]}`)
		if code != http.StatusOK || !strings.Contains(body, `"m/"`) || !strings.Contains(body, c.out) {
			t.Errorf("%s: HTTP %d %s, want 200 with %s for m/", c.in, code, body, c.out)
		}
	}
	if code, body := post(t, h, `{"request":`); code != http.StatusBadRequest || !strings.Contains(body, "error") {
		t.Errorf("a truncated body: HTTP %d %s, want 400 with a batch error", code, body)
	}
}
