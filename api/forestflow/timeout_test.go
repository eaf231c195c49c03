package forestflow

import (
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

// deadlineScorer is scorer, recording how far each call's deadline was.
type deadlineScorer struct {
	scorer
	left chan time.Duration
}

func (d deadlineScorer) Score(ctx context.Context, id, release string, req actors.Request) (actors.Result, string, error) {
	left := time.Duration(0)
	if dl, ok := ctx.Deadline(); ok {
		left = time.Until(dl)
	}
	d.left <- left
	return d.scorer.Score(ctx, id, release, req)
}

func TestGroveTimeoutBoundsAScoreAndAPassedDeadlineIs504(t *testing.T) {
	d := deadlineScorer{left: make(chan time.Duration, 1)}
	h := httpserver.New(httpserver.Options{})
	Register(h, d)
	score := func(timeout string) *httptest.ResponseRecorder {
		req := httptest.NewRequest("POST", "/ads/p/1/score", strings.NewReader(scoreBody))
		if timeout != "" {
			req.Header.Set("Grove-Timeout", timeout)
		}
		rec := httptest.NewRecorder()
		h.Handler().ServeHTTP(rec, req)
		return rec
	}
	if rec := score("250ms"); rec.Code != 200 {
		t.Fatalf("HTTP %d %s", rec.Code, rec.Body)
	}
	if left := <-d.left; left <= 200*time.Millisecond || left > 250*time.Millisecond {
		t.Errorf("the backend saw a deadline %v away, want about 250ms", left)
	}
	if score(""); <-d.left != 0 {
		t.Error("a score without the header got a deadline")
	}
	if rec := score("fast"); rec.Code != 400 || !strings.Contains(rec.Body.String(), `invalid Grove-Timeout header "fast"`) {
		t.Errorf("a malformed header: HTTP %d %s", rec.Code, rec.Body)
	}

	late := scorer{modelErr: fmt.Errorf("%w: no answer within the request's deadline", servables.ErrDeadlineExceeded)}
	h = httpserver.New(httpserver.Options{})
	Register(h, late)
	rec := httptest.NewRecorder()
	h.Handler().ServeHTTP(rec, httptest.NewRequest("POST", "/ads/p/1/score", strings.NewReader(scoreBody)))
	if rec.Code != 504 || !strings.Contains(rec.Body.String(), "deadline") {
		t.Errorf("a result past its deadline: HTTP %d %s, want 504", rec.Code, rec.Body)
	}
}
