package graphpipe

import (
	"bytes"
	"context"
	"fmt"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/groveml/grove/actors"
	"github.com/groveml/grove/servables"
	"github.com/groveml/grove/transport/httpserver"
)

// deadlineContracts is contracts, recording how far each call's deadline was.
type deadlineContracts struct {
	contracts
	left chan time.Duration
}

func (d deadlineContracts) Score(ctx context.Context, id, release string, req actors.Request) (actors.Result, string, error) {
	left := time.Duration(0)
	if dl, ok := ctx.Deadline(); ok {
		left = time.Until(dl)
	}
	d.left <- left
	return d.contracts.Score(ctx, id, release, req)
}

func TestGroveTimeoutBoundsAGraphPipeCallAndAPassedDeadlineIs504(t *testing.T) {
	infer := buildInfer(t, "", nil, nil, []float32{1, 2})
	d := deadlineContracts{left: make(chan time.Duration, 1)}
	h := httpserver.New(httpserver.Options{})
	Register(h, d)
	call := func(path, timeout string) *httptest.ResponseRecorder {
		req := httptest.NewRequest("POST", path, bytes.NewReader(infer))
		if timeout != "" {
			req.Header.Set("Grove-Timeout", timeout)
		}
		rec := httptest.NewRecorder()
		h.Handler().ServeHTTP(rec, req)
		return rec
	}
	if rec := call("/ads/ok/1/gp", "1.5s"); rec.Code != 200 {
		t.Fatalf("HTTP %d %s", rec.Code, rec.Body)
	}
	if left := <-d.left; left <= time.Second || left > 1500*time.Millisecond {
		t.Errorf("the backend saw a deadline %v away, want about 1.5s", left)
	}
	if rec := call("/ads/ok/1/gp", "-2s"); rec.Code != 400 || !strings.Contains(rec.Body.String(), `invalid Grove-Timeout header "-2s"`) {
		t.Errorf("a malformed header: HTTP %d %s", rec.Code, rec.Body)
	}
	d.contracts.err = fmt.Errorf("%w: no answer within the request's deadline", servables.ErrDeadlineExceeded)
	h = httpserver.New(httpserver.Options{})
	Register(h, d)
	if rec := call("/ads/fail/1/gp", "1s"); rec.Code != 504 {
		t.Errorf("a result past its deadline: HTTP %d %s, want 504", rec.Code, rec.Body)
	}
	<-d.left
}
