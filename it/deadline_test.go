package it

import (
	"context"
	"io"
	"net/http"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/groveml/grove/api/oip/oippb"
)

// expiredCount reads grove_requests_expired_total{model,reason} from /metrics.
func (g *grove) expiredCount(model, reason string) int {
	_, m := g.get("/metrics")
	re := regexp.MustCompile(`(?m)^grove_requests_expired_total\{model="` + regexp.QuoteMeta(model) + `",reason="` + reason + `"\} (\d+)$`)
	if sub := re.FindSubmatch(m); sub != nil {
		n, _ := strconv.Atoi(string(sub[1]))
		return n
	}
	return 0
}

// post sends body to path with header and returns the status and body.
func (g *grove) post(t *testing.T, ctx context.Context, path, body string, header http.Header) (int, string, error) {
	t.Helper()
	req, err := http.NewRequestWithContext(ctx, "POST", g.url+path, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range header {
		req.Header[k] = v
	}
	resp, err := client.Do(req)
	if err != nil {
		return 0, "", err
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b), nil
}

// Each way a caller gives a deadline, against the real binary: a model that
// takes 400 ms per call is kept busy, and a second request with a 50 ms
// deadline is answered at its deadline with each protocol's status, then
// dropped unrun when the model reaches it. A client that hangs up is
// dropped too.
//
// It runs alone (no t.Parallel): it times answers against their deadlines. Budget: 10 s.
func TestDeadlinesFromEveryProtocolAnswerInTimeAndExpiredWorkIsDropped(t *testing.T) {
	b := newDirBucket(t)
	b.Put(t, "slow/model.faulty", []byte(`{"delay_ms": 400}`))
	putConfig(t, b, modelEntry{Path: "slow/"})
	g := startGrove(t, b.URL(), nil)
	baBody := batchJSON(itemJSON("slow/", tensorJSON("INT32", []int64{1}, []float64{1})))
	occupy := func() chan struct{} {
		done := make(chan struct{})
		go func() { _, _, _ = g.infer(baBody); close(done) }()
		time.Sleep(50 * time.Millisecond) // the model takes it
		return done
	}
	within := func(what string, took time.Duration) {
		t.Helper()
		if took < 45*time.Millisecond || took > 250*time.Millisecond {
			t.Errorf("%s answered after %v, want about its 50 ms deadline", what, took)
		}
	}
	ctx := withTimeout(t, time.Minute)

	busy := occupy()
	start := time.Now()
	code, body, err := g.post(t, ctx, "/v1/inference", baBody, http.Header{"Grove-Timeout": {"50ms"}})
	within("B&A with Grove-Timeout", time.Since(start))
	if err != nil || code != 200 || !strings.Contains(body, `"error_type":"GRPC","description":"DEADLINE_EXCEEDED: `) {
		t.Errorf("B&A: %v HTTP %d %s, want 200 with a GRPC DEADLINE_EXCEEDED item error", err, code, body)
	}
	<-busy

	busy = occupy()
	start = time.Now()
	oipBody := `{"parameters": {"timeout": 50000}, "inputs": [{"name": "x", "datatype": "INT32", "shape": [1], "data": [1]}]}`
	code, body, err = g.post(t, ctx, "/v2/models/slow/infer", oipBody, nil)
	within("OIP REST with the timeout parameter", time.Since(start))
	if err != nil || code != http.StatusGatewayTimeout || !strings.Contains(body, `{"error":"deadline exceeded`) {
		t.Errorf("OIP REST: %v HTTP %d %s, want 504", err, code, body)
	}
	<-busy

	busy = occupy()
	c := oippb.NewGRPCInferenceServiceClient(g.dial())
	cctx, cancel := context.WithTimeout(ctx, 50*time.Millisecond)
	start = time.Now()
	_, err = c.ModelInfer(cctx, &oippb.ModelInferRequest{ModelName: "slow", Inputs: []*oippb.ModelInferRequest_InferInputTensor{
		{Name: "x", Datatype: "INT32", Shape: []int64{1}, Contents: &oippb.InferTensorContents{IntContents: []int32{1}}}}})
	cancel()
	within("OIP gRPC with a call deadline", time.Since(start))
	if status.Code(err) != codes.DeadlineExceeded {
		t.Errorf("OIP gRPC: %v, want DEADLINE_EXCEEDED", err)
	}
	<-busy

	busy = occupy()
	hctx, hangUp := context.WithCancel(ctx)
	go func() { time.Sleep(50 * time.Millisecond); hangUp() }()
	if _, _, err := g.post(t, hctx, "/v1/inference", baBody, nil); err == nil {
		t.Error("the hung-up request got an answer")
	}
	<-busy

	defer func() {
		if !t.Failed() {
			return
		}
		_, m := g.get("/metrics")
		for _, l := range strings.Split(string(m), "\n") {
			if strings.HasPrefix(l, "grove_requests_expired_total") || strings.HasPrefix(l, "grove_model_requests_total") {
				t.Log(l)
			}
		}
	}()
	g.waitFor("three expired and one canceled request counted", 10*time.Second, func() bool {
		return g.expiredCount("slow/", "deadline") == 3 && g.expiredCount("slow/", "canceled") == 1
	})
	if code, body, _ := g.post(t, ctx, "/v1/inference", baBody, http.Header{"Grove-Timeout": {"soon"}}); code != 400 || !strings.Contains(body, "Grove-Timeout") {
		t.Errorf("a malformed Grove-Timeout: HTTP %d %s", code, body)
	}
	st := g.status()
	for _, m := range st.Models {
		if m.Path == "slow/" && m.Served != 4 {
			t.Errorf("slow/ ran %d requests, want the 4 that kept it busy: expired work ran", m.Served)
		}
	}
}

// --max-timeout clamps the deadline each caller gives, against the real
// binary: a model taking 3 s per call, asked with an hour's deadline
// through Grove-Timeout (B&A), OIP's timeout parameter (REST) and a gRPC
// call deadline, answers each at the 150 ms clamp with its protocol's
// deadline status, not after the model's 3 s (the bound, 2 s, leaves room
// for a machine shared with the other tests). Budget: 20 s.
func TestMaxTimeoutClampsEveryCallerDeadline(t *testing.T) {
	t.Parallel()
	b := newDirBucket(t)
	b.Put(t, "slow/model.faulty", []byte(`{"delay_ms": 3000}`))
	putConfig(t, b, modelEntry{Path: "slow/"})
	g := startGrove(t, b.URL(), nil, "--max-timeout", "150ms")
	ctx := withTimeout(t, time.Minute)
	within := func(what string, took time.Duration) {
		t.Helper()
		if took < 140*time.Millisecond || took > 2*time.Second {
			t.Errorf("%s with an hour's deadline answered after %v, want about the 150 ms max_timeout", what, took)
		}
	}
	baBody := batchJSON(itemJSON("slow/", tensorJSON("INT32", []int64{1}, []float64{1})))
	start := time.Now()
	code, body, err := g.post(t, ctx, "/v1/inference", baBody, http.Header{"Grove-Timeout": {"1h"}})
	within("B&A with Grove-Timeout", time.Since(start))
	if err != nil || code != 200 || !strings.Contains(body, `"error_type":"GRPC","description":"DEADLINE_EXCEEDED: `) {
		t.Errorf("B&A: %v HTTP %d %s, want 200 with a GRPC DEADLINE_EXCEEDED item error", err, code, body)
	}
	start = time.Now()
	oipBody := `{"parameters": {"timeout": 3600000000}, "inputs": [{"name": "x", "datatype": "INT32", "shape": [1], "data": [1]}]}`
	code, body, err = g.post(t, ctx, "/v2/models/slow/infer", oipBody, nil)
	within("OIP REST with the timeout parameter", time.Since(start))
	if err != nil || code != http.StatusGatewayTimeout {
		t.Errorf("OIP REST: %v HTTP %d %s, want 504", err, code, body)
	}
	c := oippb.NewGRPCInferenceServiceClient(g.dial())
	cctx, cancel := context.WithTimeout(ctx, time.Hour)
	defer cancel()
	start = time.Now()
	_, err = c.ModelInfer(cctx, &oippb.ModelInferRequest{ModelName: "slow", Inputs: []*oippb.ModelInferRequest_InferInputTensor{
		{Name: "x", Datatype: "INT32", Shape: []int64{1}, Contents: &oippb.InferTensorContents{IntContents: []int32{1}}}}})
	within("OIP gRPC with a call deadline", time.Since(start))
	if status.Code(err) != codes.DeadlineExceeded {
		t.Errorf("OIP gRPC: %v, want DEADLINE_EXCEEDED", err)
	}
	// No deadline from the caller: nothing to clamp, the model answers.
	start = time.Now()
	if code, body, err := g.post(t, ctx, "/v1/inference", baBody, nil); err != nil || code != 200 || strings.Contains(body, "error_type") {
		t.Errorf("B&A without a deadline: %v HTTP %d %s, want the model's answer", err, code, body)
	} else if took := time.Since(start); took < 550*time.Millisecond {
		t.Errorf("B&A without a deadline answered after %v, before the model's 600 ms", took)
	}
}
