package forestflow

import (
	"context"
	"errors"
	"fmt"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/groveml/grove/actors"
	"github.com/groveml/grove/conf/modelconfig"
	"github.com/groveml/grove/servables"
	"github.com/groveml/grove/transport/httpserver"
)

func TestStatusOfMapsEveryKind(t *testing.T) {
	for k, want := range map[servables.Kind]int{
		servables.OK: 200, servables.NotFound: 404, servables.InvalidInput: 400, servables.OutputUnsupported: 500,
		servables.Overloaded: 429, servables.DeadlineExceeded: 504, servables.Canceled: 499, servables.Crashed: 500,
		servables.Execution: 500, servables.Unavailable: 503, servables.Conflict: 409, servables.ReadOnly: 403,
	} {
		if got := StatusOf(k); got != want {
			t.Errorf("%v: %d, want %d", k, got, want)
		}
	}
}

// scorer is a Backend with contract "ads/p/1": its model answers one row
// per input row (model failures: modelErr), and a call fails with callErr.
type scorer struct{ modelErr, callErr error }

func (s scorer) Score(_ context.Context, id, release string, req actors.Request) (actors.Result, string, error) {
	switch {
	case id != "ads/p/1":
		return actors.Result{}, "", fmt.Errorf("%w %s", actors.ErrUnknownContract, id)
	case release == "v9":
		return actors.Result{}, "", fmt.Errorf("%w %s", actors.ErrUnknownRelease, release)
	case s.callErr != nil:
		return actors.Result{}, "", s.callErr
	}
	if release == "" {
		release = "v1"
	}
	out, _ := servables.NewTensor("y", servables.Float32, []int64{req.Inputs[0].Shape[0], 1})
	return actors.Result{Outputs: []servables.Tensor{out}, Err: s.modelErr}, release, nil
}

func (s scorer) Contracts() ([]modelconfig.Contract, error) {
	if s.callErr != nil {
		return nil, s.callErr
	}
	return []modelconfig.Contract{{Organization: "ads", Project: "p", Number: 1}}, nil
}

func (s scorer) ContractStats(id string) ([]actors.ServableStats, error) {
	if id != "ads/p/1" {
		return nil, actors.ErrUnknownContract
	}
	if s.callErr != nil {
		return nil, s.callErr
	}
	return []actors.ServableStats{{Release: "v1", Served: 3}}, nil
}

const scoreBody = `{"schema":[{"type":"Float32","fields":["a"]}],"datum":[{"tensors":[{"Float32":{"data":[1]}}]}]}`

func TestScoreAnswersEachFailureWithItsCaseAndStatus(t *testing.T) {
	for _, c := range []struct {
		s          scorer
		path, body string
		code       int
		has        string
		retryAfter bool
	}{
		{scorer{}, "/ads/p/1/score", scoreBody, 200, `{"Prediction":{"fqrv":{"contract":{"organization":"ads","project":"p","contractNumber":1},"releaseVersion":"v1"}`, false},
		{scorer{}, "/ads/p/1/v2/score", scoreBody, 200, `"releaseVersion":"v2"`, false},
		{scorer{}, "/ads/p/0/score", scoreBody, 404, "contract number must be a positive integer", false},
		{scorer{}, "/ads/q/1/score", scoreBody, 404, `{"UnknownContract":`, false},
		{scorer{}, "/ads/p/1/v9/score", scoreBody, 404, `{"UnknownServable":`, false},
		{scorer{callErr: fmt.Errorf("%w ads/p/1", actors.ErrNoActiveServable)}, "/ads/p/1/score", scoreBody, 422, `{"NoActiveServablesForContract":`, false},
		{scorer{callErr: actors.ErrStopped}, "/ads/p/1/score", scoreBody, 503, "server is shutting down", false},
		{scorer{callErr: context.DeadlineExceeded}, "/ads/p/1/score", scoreBody, 504, "deadline exceeded", false},
		{scorer{modelErr: fmt.Errorf("%w: queue full", servables.ErrOverloaded)}, "/ads/p/1/score", scoreBody, 429, `{"UnknownServableError":`, true},
		{scorer{modelErr: fmt.Errorf("%w: takes 2 inputs", servables.ErrInvalidInput)}, "/ads/p/1/score", scoreBody, 400, "takes 2 inputs", false},
		{scorer{modelErr: errors.New("RuntimeError: boom")}, "/ads/p/1/score", scoreBody, 500, "RuntimeError: boom", false},
		{scorer{modelErr: &actors.LoadingError{Path: "m/", RetryAfter: 2500 * time.Millisecond}}, "/ads/p/1/score", scoreBody, 503, "model m/ is loading", true},
		{scorer{}, "/ads/p/1/score", `{"schema":[]`, 400, "", false},
		{scorer{}, "/ads/p/1/score", `{"schema":[],"datum":[]}`, 422, "", false},
	} {
		h := httpserver.New(httpserver.Options{})
		Register(h, c.s)
		rec := httptest.NewRecorder()
		h.Handler().ServeHTTP(rec, httptest.NewRequest("POST", c.path, strings.NewReader(c.body)))
		if rec.Code != c.code || !strings.Contains(rec.Body.String(), c.has) || (rec.Header().Get("Retry-After") != "") != c.retryAfter {
			t.Errorf("%s %+v: HTTP %d %s Retry-After %q\nwant %d with %s", c.path, c.s, rec.Code, rec.Body, rec.Header().Get("Retry-After"), c.code, c.has)
		}
		if strings.Contains(c.has, "is loading") && rec.Header().Get("Retry-After") != "3" {
			t.Errorf("Retry-After %q for a model loading for 2.5 s more, want 3", rec.Header().Get("Retry-After"))
		}
	}
}

// A contract list the server cannot read (its router panicked listing
// them: an internal error) answers 503 with the error, not a partial or
// empty list with 200.
func TestAContractListThatCannotBeReadAnswers503(t *testing.T) {
	h := httpserver.New(httpserver.Options{})
	Register(h, scorer{callErr: servables.NewError(servables.Unavailable, "internal error")})
	rec := httptest.NewRecorder()
	h.Handler().ServeHTTP(rec, httptest.NewRequest("GET", "/contracts/list", nil))
	if rec.Code != 503 || !strings.Contains(rec.Body.String(), "internal error") {
		t.Errorf("GET /contracts/list: %d %s, want 503 with the error", rec.Code, rec.Body)
	}
}

// Stats of a known contract that cannot be read now (an internal error)
// answer 503 with the error, not 404 UnknownContract: the caller did
// nothing wrong, and may ask again.
func TestContractStatsThatCannotBeReadAnswer503(t *testing.T) {
	h := httpserver.New(httpserver.Options{})
	Register(h, scorer{callErr: servables.NewError(servables.Unavailable, "internal error")})
	rec := httptest.NewRecorder()
	h.Handler().ServeHTTP(rec, httptest.NewRequest("GET", "/ads/p/1/stats", nil))
	if rec.Code != 503 || !strings.Contains(rec.Body.String(), "internal error") {
		t.Errorf("GET /ads/p/1/stats: %d %s, want 503 with the error", rec.Code, rec.Body)
	}
}

func TestContractListAndStatsInForestFlowsShape(t *testing.T) {
	h := httpserver.New(httpserver.Options{})
	Register(h, scorer{})
	for path, want := range map[string]string{
		"/contracts/list":  `"contractNumber": 1`,
		"/ads/p/1/stats":   `"scoreCount": 3`,
		"/ads/q/1/stats":   `{"UnknownContract":{"contract":{"organization":"ads","project":"q","contractNumber":1}}}`,
		"/ads/p/one/stats": "contract number must be a positive integer",
	} {
		rec := httptest.NewRecorder()
		h.Handler().ServeHTTP(rec, httptest.NewRequest("GET", path, nil))
		if !strings.Contains(rec.Body.String(), want) {
			t.Errorf("GET %s: %d %s, want %s", path, rec.Code, rec.Body, want)
		}
	}
}
