package outcomes

import (
	"encoding/json"
	"errors"
	"mime"
	"net/http"
	"strconv"

	"github.com/groveml/grove/api/outcomes/outcomespb"
	"github.com/groveml/grove/logging/outcome"
	"github.com/groveml/grove/transport/httpserver"
)

type rest struct {
	h    *httpserver.Server
	opts Options
}

// answer is the JSON answer of POST /v1/outcomes.
type answer struct {
	Accepted int64         `json:"accepted"`
	Errors   []answerError `json:"errors"`
}

type answerError struct {
	Index int64  `json:"index"`
	Error string `json:"error"`
}

// report serves POST /v1/outcomes: the body (within max_body_bytes, gzip
// and deflate undone) is a JSON array of outcomes, or JSON lines when its
// Content-Type is application/x-ndjson. It answers 200 with
// {"accepted": n, "errors": [{"index": i, "error": "..."}]}; 400 with the
// same document when no outcome is valid, or with {"error": ...} when the
// body is not an array, or holds none; 503 (Retry-After 1) with the same
// document when valid outcomes were given and none could be stored, or
// with {"error": ...} when Kafka is off. The Grove-Timeout header bounds
// the wait for the broker.
func (r *rest) report(w http.ResponseWriter, req *http.Request) {
	if r.opts.Sink == nil {
		w.Header().Set("Retry-After", strconv.Itoa(int(kafkaOffRetry.Seconds())))
		httpserver.JSONError(w, req, http.StatusServiceUnavailable, kafkaOff)
		return
	}
	lines := false
	if ct := req.Header.Get("Content-Type"); ct != "" {
		if mt, _, err := mime.ParseMediaType(ct); err == nil && mt == ContentTypeLines {
			lines = true
		}
	}
	bp := r.h.Buffer()
	defer r.h.Release(bp)
	body, code, err := r.h.ReadBody(req, bp)
	if err != nil {
		if code == http.StatusUnsupportedMediaType {
			w.Header().Set("Accept-Encoding", httpserver.AcceptedEncodings)
		}
		httpserver.JSONError(w, req, code, err.Error())
		return
	}
	ctx, cancel, err := httpserver.WithTimeout(req)
	if err != nil {
		httpserver.JSONError(w, req, http.StatusBadRequest, err.Error())
		return
	}
	defer cancel()
	var items []outcome.Item
	if lines {
		items = outcome.ParseLines(body)
	} else if items, err = outcome.ParseArray(body); err != nil {
		httpserver.JSONError(w, req, http.StatusBadRequest, err.Error())
		return
	}
	if len(items) == 0 {
		httpserver.JSONError(w, req, http.StatusBadRequest, errNoOutcomes.Error())
		return
	}
	b := newBatch()
	now := r.opts.Now()
	for i, it := range items {
		b.add(i, it.Outcome, it.Err, now)
	}
	b.flush(ctx, r.opts.Sink)
	resp := b.finish()
	code = http.StatusOK
	switch {
	case b.checked == 0:
		code = http.StatusBadRequest
	case resp.Accepted == 0:
		code = http.StatusServiceUnavailable
		w.Header().Set("Retry-After", strconv.Itoa(int(notStoredRetry.Seconds())))
	}
	writeAnswer(w, code, resp)
}

var errNoOutcomes = errors.New("no outcomes in the body: send a JSON array of outcomes, or one a line with Content-Type " + ContentTypeLines)

// writeAnswer writes resp as the JSON answer, with code.
func writeAnswer(w http.ResponseWriter, code int, resp *outcomespb.ReportResponse) {
	a := answer{Accepted: resp.Accepted, Errors: make([]answerError, len(resp.Errors))}
	for i, e := range resp.Errors {
		a.Errors[i] = answerError{Index: e.Index, Error: e.Error}
	}
	data, err := json.Marshal(a)
	if err != nil { // strings and integers only: never
		code, data = http.StatusInternalServerError, []byte(`{"error":"encoding the answer"}`)
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Content-Length", strconv.Itoa(len(data)+1))
	w.WriteHeader(code)
	_, _ = w.Write(append(data, '\n'))
}
