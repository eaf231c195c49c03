package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"reflect"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

func TestParseScenarios(t *testing.T) {
	got, err := parseScenarios("b1c1, baseline/b64c8,grove/b4c2")
	if err != nil {
		t.Fatal(err)
	}
	want := []scenario{
		{serverGrove, 1, 1}, {serverBaseline, 1, 1},
		{serverBaseline, 64, 8},
		{serverGrove, 4, 2},
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("got %v, want %v", got, want)
	}
	got, err = parseScenarios("baseline")
	if err != nil || len(got) != len(defaultShapes) || got[0].Server != serverBaseline {
		t.Errorf("baseline alone: %v, %v", got, err)
	}
	got, err = parseScenarios(strings.Join(defaultShapes, ","))
	if err != nil || len(got) != 2*len(defaultShapes) {
		t.Errorf("defaults: %v, %v", got, err)
	}
	// The default: the grove-nethttp, gRPC, grove+log and grove+eval rows right after plain grove's.
	got, err = parseScenarios(defaultSpec())
	want = []scenario{ // the floor and deep rows come after grove's variants
		{serverGrove, 1, 1}, {serverGroveNetHTTP, 1, 1}, {serverGroveGRPC, 1, 1}, {serverGroveONNX, 1, 1}, {serverGroveLocal, 1, 1}, {serverGroveFwd, 1, 1}, {serverDirect, 1, 1}, {serverFloor, 1, 1}, {serverFloorGRPC, 1, 1}, {serverFloorFwd, 1, 1}, {serverBaseline, 1, 1},
		{serverGrove, 1, 8}, {serverBaseline, 1, 8},
		{serverGrove, 1, 32}, {serverGroveNetHTTP, 1, 32}, {serverGroveGRPC, 1, 32}, {serverGroveONNX, 1, 32}, {serverGroveLog, 1, 32}, {serverGroveEval, 1, 32}, {serverGroveTLS, 1, 32},
		{serverGroveLocal, 1, 32}, {serverGroveFwd, 1, 32}, {serverDirect, 1, 32}, {serverFloor, 1, 32}, {serverFloorGRPC, 1, 32}, {serverFloorFwd, 1, 32}, {serverBaseline, 1, 32},
		{serverGrove, 64, 8}, {serverGroveGRPC, 64, 8}, {serverGroveONNX, 64, 8}, {serverBaseline, 64, 8},
		{serverGrove, 1, 64}, {serverGroveNoBatch, 1, 64}, {serverGroveDeep, 1, 64}, {serverGroveDeepNoBatch, 1, 64},
	}
	if err != nil || !reflect.DeepEqual(got, want) {
		t.Errorf("default spec %q: got %v, %v; want %v", defaultSpec(), got, err, want)
	}
	got, err = parseScenarios("Grove+Log")
	if want := []scenario{{serverGroveLog, 1, 32}}; err != nil || !reflect.DeepEqual(got, want) {
		t.Errorf("grove+log alone: got %v, %v; want %v", got, err, want)
	}
	got, err = parseScenarios("grove-grpc")
	if err != nil || len(got) != len(grpcShapes) || got[0] != (scenario{serverGroveGRPC, 1, 1}) {
		t.Errorf("grove-grpc alone: %v, %v", got, err)
	}
	got, err = parseScenarios("grove-nethttp")
	if want := []scenario{{serverGroveNetHTTP, 1, 1}, {serverGroveNetHTTP, 1, 32}}; err != nil || !reflect.DeepEqual(got, want) {
		t.Errorf("grove-nethttp alone: got %v, %v; want %v", got, err, want)
	}
	got, err = parseScenarios("grove+log/b4c2,b4c2,all")
	if err != nil || len(got) != 3+2*len(defaultShapes) ||
		!reflect.DeepEqual(got[:3], []scenario{{serverGrove, 4, 2}, {serverGroveLog, 4, 2}, {serverBaseline, 4, 2}}) {
		t.Errorf("grove+log/b4c2,b4c2,all: %v, %v", got, err)
	}
	for _, bad := range []string{"", " , ", "b0c1", "b1", "triton/b1c1", "b1c1x", "grove+logs/b1c1", "grove+log/b1"} {
		if _, err := parseScenarios(bad); err == nil {
			t.Errorf("parseScenarios(%q) accepted", bad)
		}
	}
}

func TestParseFlagsPredictionLog(t *testing.T) {
	o, err := parseFlags(nil, io.Discard)
	if err != nil || !o.predLog || !slices.Contains(o.scenarios, scenario{serverGroveLog, 1, 32}) {
		t.Errorf("defaults: predLog %v, scenarios %v, %v", o.predLog, o.scenarios, err)
	}
	o, err = parseFlags([]string{"--prediction-log=false"}, io.Discard)
	if err != nil || len(o.scenarios) != 2*len(defaultShapes)+len(netHTTPShapes)+len(grpcShapes)+len(onnxShapes)+4+len(tlsShapes)+3*len(clusterShapes)+len(directShapes)+2*len(floorShapes) || slices.ContainsFunc(o.scenarios, func(s scenario) bool { return s.Server == serverGroveLog }) {
		t.Errorf("--prediction-log=false: %v, %v", o.scenarios, err)
	}
	o, err = parseFlags([]string{"--prediction-log-args", "--kafka-encoding json", "--scenarios", "grove+log/b1c8"}, io.Discard)
	if err != nil || !reflect.DeepEqual(o.predLogArgs, []string{"--kafka-encoding", "json"}) || len(o.scenarios) != 1 {
		t.Errorf("--prediction-log-args: %v %v, %v", o.predLogArgs, o.scenarios, err)
	}
	if _, err := parseFlags([]string{"--prediction-log=false", "--scenarios", "grove+log"}, io.Discard); err == nil {
		t.Error("no scenarios left without the prediction log, accepted")
	}
}

func TestParsePredLog(t *testing.T) {
	st, err := parsePredLog([]byte(`{"models":[],"prediction_log":{"topic":"grove.predictions","encoding":"proto",` +
		`"brokers":["127.0.0.1:1"],"embedded":true,"buffered":2,"buffered_bytes":10,"delivered":5,"failed":1,"dropped":3},"ready":true}`))
	if err != nil || st.Delivered != 5 || st.Dropped != 3 || st.Failed != 1 || st.Buffered != 2 || st.Encoding != "proto" || st.accounted() != 11 {
		t.Errorf("got %+v, %v", st, err)
	}
	if _, err := parsePredLog([]byte(`{"models":[],"ready":true}`)); !errors.Is(err, errNoPredLog) {
		t.Errorf("no prediction_log: %v", err)
	}
}

// TestWaitDrained serves a prediction log whose buffer empties over a few
// polls and checks waitDrained waits for it.
func TestWaitDrained(t *testing.T) {
	var polls atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n := polls.Add(1)
		buffered, delivered := max(0, 4-n), min(n, 4)
		fmt.Fprintf(w, `{"prediction_log":{"buffered":%d,"delivered":%d}}`, buffered, delivered)
	}))
	defer srv.Close()
	st, waited, err := waitDrained(context.Background(), srv.URL, 4)
	if err != nil || st == nil || st.Buffered != 0 || st.Delivered != 4 || polls.Load() != 4 || waited <= 0 {
		t.Errorf("got %+v after %d polls, %v, %v", st, polls.Load(), waited, err)
	}
	// Fewer events than requests: done once the counts have stood still for a second.
	polls.Store(0)
	start := time.Now()
	st, _, err = waitDrained(context.Background(), srv.URL, 10)
	if el := time.Since(start); err != nil || st == nil || st.Delivered != 4 || el < time.Second || el > 3*time.Second {
		t.Errorf("short: got %+v after %v, %v", st, el, err)
	}
}

func TestParseForward(t *testing.T) {
	for name, tc := range map[string]struct {
		out  string
		want map[int]float64
	}{
		"procs suffix": {`goos: linux
BenchmarkForwardPCTR/batch=1-2         	    2000	     41234 ns/op	     512 B/op	       9 allocs/op
BenchmarkForwardPCTR/batch=64-2        	    2000	    125000 ns/op	  0.51 Mrows/s
PASS`, map[int]float64{1: 41234, 64: 125000}},
		"GOMAXPROCS=1 dash names": {`BenchmarkForwardPCTR/batch-1 2000 40000 ns/op
BenchmarkForwardPCTR/batch-64 2000 120000 ns/op`, map[int]float64{1: 40000, 64: 120000}},
		"bare numbers and other batches": {`BenchmarkForwardPCTR/1-8 2000 39000 ns/op
BenchmarkForwardPCTR/16-8 2000 70000 ns/op
BenchmarkForwardPCTR/64-8 2000 110000 ns/op`, map[int]float64{1: 39000, 64: 110000}},
		"median of counts": {`BenchmarkForwardPCTR/b1-2 2000 3 ns/op
BenchmarkForwardPCTR/b1-2 2000 1 ns/op
BenchmarkForwardPCTR/b1-2 2000 2 ns/op`, map[int]float64{1: 2}},
		"no sub-benchmarks": {`BenchmarkForwardPCTR-2 2000 40000 ns/op`, nil},
		"build failure": {`# github.com/groveml/grove/servables/torch
servables/torch/torch.go:3:2: undefined: x
FAIL	github.com/groveml/grove/servables/torch [build failed]`, nil},
	} {
		got := parseForward(tc.out).NsPerOp
		if !reflect.DeepEqual(got, tc.want) {
			t.Errorf("%s: got %v, want %v", name, got, tc.want)
		}
	}
}

// TestParseMetric checks that a custom metric is read from its own
// benchmark's lines only, as the median over -count runs.
func TestParseMetric(t *testing.T) {
	out := `BenchmarkForwardPCTR/batch=1-2 2000 20000 ns/op
BenchmarkForwardPCTRAfterIdle-2 2000 1200000 ns/op 1150000 idle-ns/sleep 60000 p50-ns/forward
BenchmarkForwardPCTRAfterIdle-2 2000 1200000 ns/op 1150000 idle-ns/sleep 30000 p50-ns/forward
BenchmarkForwardPCTRAfterIdle-2 2000 1200000 ns/op 1150000 idle-ns/sleep 40000 p50-ns/forward
BenchmarkForwardPCTRAfterIdleX-2 2000 1 ns/op 1 p50-ns/forward`
	if got := parseMetric(out, idleForwardBench, "p50-ns/forward"); got != 40000 {
		t.Errorf("got %v, want the median 40000", got)
	}
	if got := parseMetric(out, forwardBench, "p50-ns/forward"); got != 0 {
		t.Errorf("a benchmark without the metric gave %v", got)
	}
}

func TestPercentile(t *testing.T) {
	var l []time.Duration
	for i := 1; i <= 100; i++ {
		l = append(l, time.Duration(i))
	}
	if p := percentile(l, 50); p != 50 {
		t.Errorf("p50 = %v", p)
	}
	if p := percentile(l, 99); p != 99 {
		t.Errorf("p99 = %v", p)
	}
	if p := percentile(l[:1], 99); p != 1 {
		t.Errorf("p99 of one = %v", p)
	}
	if p := percentile(l[:3], 50); p != 2 {
		t.Errorf("p50 of three = %v", p)
	}
	if p := percentile(nil, 50); p != 0 {
		t.Errorf("p50 of none = %v", p)
	}
}

func TestBodies(t *testing.T) {
	row := []float64{0.1, -1, 0.9682539701461792}
	g := string(groveBody(repeat(row, 2)))
	want := `{"request":[{"model_path":"pctr_v1/","tensors":[{"data_type":"FLOAT","tensor_shape":[2,3],` +
		`"tensor_content":["0.1","-1","0.9682539701461792","0.1","-1","0.9682539701461792"]}]}]}`
	if g != want {
		t.Errorf("grove body\n got %s\nwant %s", g, want)
	}
	var b struct{ Inputs [][]float64 }
	if err := json.Unmarshal(baselineBody(repeat(row, 2)), &b); err != nil || !reflect.DeepEqual(b.Inputs, [][]float64{row, row}) {
		t.Errorf("baseline body: %v %v", b, err)
	}
	if !json.Valid(groveBody(repeat(row, 64))) {
		t.Error("grove batch-64 body is not JSON")
	}
}

func TestOutputs(t *testing.T) {
	got, err := groveOutputs([]byte(`{"response":[{"model_path":"pctr_v1/","tensors":[{"tensor_shape":[2,1],"data_type":"FLOAT","tensor_content":[0.49,"0.5"]}]}]}`))
	if err != nil || !reflect.DeepEqual(got, []float64{0.49, 0.5}) {
		t.Errorf("grove outputs %v, %v", got, err)
	}
	if _, err := groveOutputs([]byte(`{"response":[{"model_path":"pctr_v1/","error":{"error_type":"MODEL_NOT_FOUND"}}]}`)); err == nil {
		t.Error("grove error item accepted")
	}
	got, err = baselineOutputs([]byte(`{"outputs":[0.49,0.5]}`))
	if err != nil || !reflect.DeepEqual(got, []float64{0.49, 0.5}) {
		t.Errorf("baseline outputs %v, %v", got, err)
	}
}

func TestLoadExpected(t *testing.T) {
	rows, want, err := loadExpected("../../examples/bucket/expected.json")
	if err != nil {
		t.Fatal(err)
	}
	if len(rows) != 2 || len(rows[0]) != 64 || len(want) != 2 || rows[0][0] != -1 {
		t.Errorf("rows %d×%d, %d outputs, first %v", len(rows), len(rows[0]), len(want), rows[0][0])
	}
}

func TestBatchingRatioPerModel(t *testing.T) {
	r := &report{Results: []result{
		{scenario: scenario{serverGrove, 1, 64}, loadResult: loadResult{ReqPerSec: 9000}},
		{scenario: scenario{serverGroveNoBatch, 1, 64}, loadResult: loadResult{ReqPerSec: 3000}},
		{scenario: scenario{serverGroveNoBatch, 1, 32}, loadResult: loadResult{ReqPerSec: 1}},
		{scenario: scenario{serverGroveDeep, 1, 64}, loadResult: loadResult{ReqPerSec: 2000}},
		{scenario: scenario{serverGroveDeepNoBatch, 1, 64}, loadResult: loadResult{ReqPerSec: 1000}},
	}}
	r.finish()
	if r.Batching != 3 || r.BatchingDeep != 2 {
		t.Errorf("batching ratios %v and %v, want 3 and 2", r.Batching, r.BatchingDeep)
	}
	var out strings.Builder
	r.writeMarkdown(&out)
	for _, want := range []string{
		"- Dynamic batching at b1c64 on pctr_v1/: grove 3.00x the req/s of grove-nobatch (--max-batch-rows 1) (target ≥ 3x): met",
		"- Dynamic batching at b1c64 on rank_deep/: grove 2.00x the req/s of grove-nobatch (--max-batch-rows 1) (target ≥ 3x): MISSED",
	} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("markdown lacks %q:\n%s", want, out.String())
		}
	}
}

func TestOverheadLinesJudgeTargetsAndSubtractTheFloor(t *testing.T) {
	us := time.Microsecond
	r := &report{Forward: forwardResult{NsPerOp: map[int]float64{1: 20000}}, Results: []result{
		{scenario: scenario{serverGrove, 1, 1}, loadResult: loadResult{P50: 160 * us}},
		{scenario: scenario{serverGroveGRPC, 1, 1}, loadResult: loadResult{P50: 110 * us}},
		{scenario: scenario{serverFloor, 1, 1}, loadResult: loadResult{P50: 100 * us}},
	}}
	r.finish()
	var out strings.Builder
	r.writeMarkdown(&out)
	for _, want := range []string{
		"(grove p50 minus forward): 160 µs - 20.0 µs = 140 µs (target ≤ 150 µs): met; above the transport floor (floor p50): 140 µs - 100 µs = 40.0 µs",
		"(grove-grpc p50 minus forward): 110 µs - 20.0 µs = 90.0 µs (target ≤ 100 µs): met\n",
		"- Transport floor at batch 1, conc 1 (floor: ",
	} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("markdown lacks %q:\n%s", want, out.String())
		}
	}
}

func TestRunLoad(t *testing.T) {
	var conns, calls atomic.Int64
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n := calls.Add(1)
		var body bytes.Buffer
		body.ReadFrom(r.Body)
		switch {
		case r.URL.Path == "/fail" && n%10 == 0:
			http.Error(w, "boom", http.StatusInternalServerError)
		case r.URL.Path == "/fail" && n%10 == 5:
			w.Write([]byte(`{"response":[{"error":{"error_type":"X"}}]}`))
		default:
			time.Sleep(time.Millisecond)
			w.Write([]byte(`{"response":[{"tensors":[]}]}`))
		}
	}))
	srv.Config.ConnState = func(_ net.Conn, s http.ConnState) {
		if s == http.StateNew {
			conns.Add(1)
		}
	}
	srv.Start()
	defer srv.Close()

	spec := loadSpec{url: srv.URL + "/ok", body: []byte(`{}`), okMarker: []byte(`"tensors"`), errMarker: []byte(`"error_type"`),
		batch: 4, conc: 4, warmup: 100 * time.Millisecond, duration: 300 * time.Millisecond, timeout: time.Second}
	start := time.Now()
	r := runLoad(context.Background(), spec)
	if el := time.Since(start); el > time.Second {
		t.Errorf("run took %v", el)
	}
	if r.Errors != 0 || r.Requests == 0 || len(r.Latencies) == 0 || r.P50 < time.Millisecond || r.P99 < r.P50 || r.RowsPerSec != 4*r.ReqPerSec {
		t.Errorf("ok run: %+v", r.summary())
	}
	// The transport may dial a spare connection while a busy one frees up
	// at start, so allow up to twice the clients; without keep-alive there
	// would be one connection per request.
	if c := conns.Load(); c > int64(2*spec.conc) || c >= int64(r.Sent) {
		t.Errorf("%d connections for %d clients and %d requests: keep-alive not working", c, spec.conc, r.Sent)
	}

	spec.url = srv.URL + "/fail"
	r = runLoad(context.Background(), spec)
	if r.Errors == 0 || r.FirstError == "" {
		t.Errorf("fail run: %+v", r.summary())
	}
	// Every failure is counted under its kind: a tenth of the requests are
	// 500s and a tenth errors in the body.
	if f := r.Failures; f["HTTP 500"] == 0 || f["an error in the body"] == 0 || f["HTTP 500"]+f["an error in the body"] != r.Errors {
		t.Errorf("fail run: failures by kind %v for %d errors", f, r.Errors)
	}

	ctx, cancel := context.WithTimeout(context.Background(), 150*time.Millisecond)
	defer cancel()
	spec.url, spec.duration = srv.URL+"/ok", time.Hour
	start = time.Now()
	r = runLoad(ctx, spec)
	if el := time.Since(start); el > time.Second || r.Errors != 0 {
		t.Errorf("cancelled run took %v with %d errors", el, r.Errors)
	}
}

func TestReportPredLogWarning(t *testing.T) {
	rep := &report{Duration: "5s", Warmup: "1s"}
	rep.PredLog = &predLogReport{Args: predLogArgs("127.0.0.1:9"), Sent: 100,
		Stats: &predLogStats{Encoding: "proto", Delivered: 90, Dropped: 10, LastError: "buffer full"}}
	rep.finish()
	var out bytes.Buffer
	rep.writeMarkdown(&out)
	if want := "WARNING: not every request's event was delivered (90 of 100; dropped 10, failed 0); last error: buffer full"; !strings.Contains(out.String(), want) {
		t.Errorf("missing %q in\n%s", want, out.String())
	}
	rep.PredLog = &predLogReport{Args: predLogArgs("127.0.0.1:9"), Error: "GET /v1/status: HTTP 500"}
	out.Reset()
	rep.writeMarkdown(&out)
	if want := "counts not read: GET /v1/status: HTTP 500"; !strings.Contains(out.String(), want) {
		t.Errorf("missing %q in\n%s", want, out.String())
	}
}

// summary is a loadResult without the latencies, for messages.
func (r loadResult) summary() loadResult {
	r.Latencies = nil
	return r
}

func TestReport(t *testing.T) {
	rep := &report{Duration: "5s", Warmup: "1s", Host: hostInfo()}
	rep.Forward = forwardResult{NsPerOp: map[int]float64{1: 40000, 64: 125000}}
	g, b := groveEndpoint("http://g"), baselineEndpoint("http://b")
	rep.add(scenario{serverGrove, 1, 1}, g, loadResult{ReqPerSec: 2000, RowsPerSec: 2000, P50: 400 * time.Microsecond, P99: time.Millisecond, Latencies: make([]time.Duration, 1)})
	rep.add(scenario{serverBaseline, 1, 1}, b, loadResult{ReqPerSec: 500, RowsPerSec: 500, P50: 2 * time.Millisecond, P99: 5 * time.Millisecond, Latencies: make([]time.Duration, 1)})
	rep.Results[len(rep.Results)-1].CPU = cpuUse{Grove: 1.25, Bench: 0.5}
	rep.add(scenario{serverGrove, 64, 8}, g, loadResult{Errors: 2, FirstError: "HTTP 503"})
	gl := groveEndpointFor(serverGroveLog, "http://gl")
	rep.add(scenario{serverGroveLog, 4, 4}, gl, loadResult{ReqPerSec: 100, RowsPerSec: 400})
	rep.add(scenario{serverGrove, 1, 32}, g, loadResult{ReqPerSec: 4000, RowsPerSec: 4000, P50: 8 * time.Millisecond, P99: 9 * time.Millisecond, Latencies: make([]time.Duration, 1)})
	rep.add(scenario{serverGroveLog, 1, 32}, gl, loadResult{ReqPerSec: 3600, RowsPerSec: 3600, P50: 9 * time.Millisecond, P99: 10 * time.Millisecond, Latencies: make([]time.Duration, 1), Errors: 1})
	rep.PredLog = &predLogReport{Args: predLogArgs("127.0.0.1:9"), Sent: 24001, Drain: 12 * time.Millisecond,
		Stats: &predLogStats{Topic: "grove.predictions", Encoding: "proto", Delivered: 24001}}
	rep.finish()
	var out bytes.Buffer
	rep.writeMarkdown(&out)
	s := out.String()
	for _, want := range []string{
		"| grove | POST /v1/inference | 1 | 1 | 2000 | 2000 | 400 µs | 1.00 ms | 0 | 4.00x |",
		"| baseline | POST /predict | 1 | 1 | 500 | 500 | 2.00 ms | 5.00 ms | 0 | 1.00x | 1.25 | 0.50 |",
		"| grove | POST /v1/inference | 64 | 8 | 0.00 | 0.00 | n/a | n/a | 2 | n/a |",
		"batch 1: 40.0 µs (25000 rows/s); batch 64: 125 µs (512000 rows/s)",
		"(grove p50 minus forward): 400 µs - 40.0 µs = 360 µs",
		"2 failed requests; first: HTTP 503",
		"| grove | POST /v1/inference | 1 | 32 | 4000 | 4000 | 8.00 ms | 9.00 ms | 0 | n/a | n/a | n/a |\n" +
			"| grove+log FULL | POST /v1/inference | 1 | 32 | 3600 | 3600 | 9.00 ms | 10.0 ms | 1 | n/a | n/a | n/a |\n",
		"- Prediction log of grove+log FULL (--kafka-embedded --kafka-embedded-addr 127.0.0.1:9 --prediction-log-level FULL; " +
			"proto encoding, topic grove.predictions): delivered 24001, dropped 0, failed 0, buffered 0, for 24001 inference requests sent",
		"buffer empty 12.0 ms after the last request",
		"- Prediction log FULL vs NONE at batch 4, c 4: n/a (needs the grove/b4c4 row)\n",
		"- Prediction log FULL vs NONE at batch 1, c 32: 0.90x req/s (overview; the target ≥ 0.90x is judged on the interleaved rows)\n",
	} {
		if !strings.Contains(s, want) {
			t.Errorf("missing %q in\n%s", want, s)
		}
	}
	if strings.Contains(s, "WARNING") {
		t.Errorf("warning with every event delivered:\n%s", s)
	}
	if !strings.HasSuffix(s, "- Prediction log FULL vs NONE at batch 1, c 32: 0.90x req/s (overview; the target ≥ 0.90x is judged on the interleaved rows)\n") {
		t.Errorf("the FULL vs NONE ratio is not the last line:\n%s", s)
	}
	if rep.groveErrors() != 3 {
		t.Errorf("groveErrors = %d", rep.groveErrors())
	}
}

func TestFloorServerAnswersHTTPAndGRPCLikeGrove(t *testing.T) {
	httpAddr, err := freeAddr()
	if err != nil {
		t.Fatal(err)
	}
	grpcAddr, err := freeAddr()
	if err != nil {
		t.Fatal(err)
	}
	go serveFloor(httpAddr + "," + grpcAddr)
	h := groveEndpointFor(serverFloor, "http://"+httpAddr)
	g := &grpcTarget{addr: grpcAddr, input: "input", width: 64}
	ctx := context.Background()
	deadline := time.Now().Add(10 * time.Second)
	for {
		spec := loadSpec{url: h.url, body: h.body(make([]float64, 64), 1), okMarker: h.okMarker, errMarker: h.errMarker,
			batch: 1, conc: 2, duration: 200 * time.Millisecond, timeout: time.Second, requests: 20}
		r := runLoad(ctx, spec)
		if r.Errors == 0 && r.Sent == 20 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("floor HTTP: %d errors of %d; first: %s", r.Errors, r.Sent, r.FirstError)
		}
		time.Sleep(50 * time.Millisecond)
	}
	spec := loadSpec{newCall: g.caller(make([]float64, 64), 8, time.Second, false), batch: 8, conc: 2, duration: 200 * time.Millisecond, timeout: time.Second, requests: 20}
	if r := runLoad(ctx, spec); r.Errors != 0 || r.Sent != 20 {
		t.Fatalf("floor gRPC: %d errors of %d; first: %s", r.Errors, r.Sent, r.FirstError)
	}
	if err := serveFloor("no-comma"); err == nil || !strings.Contains(err.Error(), floorEnv) {
		t.Errorf("serveFloor(no-comma) = %v, want an error naming %s", err, floorEnv)
	}
}

func TestReportJudgesThroughputTargets(t *testing.T) {
	rep := &report{Duration: "5s", Warmup: "1s", Host: hostInfo()}
	rep.Forward = forwardResult{NsPerOp: map[int]float64{1: 40000, 64: 125000}}
	g, b := groveEndpoint("http://g"), baselineEndpoint("http://b")
	gr := groveEndpointFor(serverGroveGRPC, "127.0.0.1:9")
	lat := make([]time.Duration, 1)
	rep.add(scenario{serverGrove, 1, 32}, g, loadResult{ReqPerSec: 12000, RowsPerSec: 12000, P50: time.Millisecond, P99: 11 * time.Millisecond, Latencies: lat})
	rep.add(scenario{serverBaseline, 1, 32}, b, loadResult{ReqPerSec: 1000, RowsPerSec: 1000, P50: time.Millisecond, P99: 2 * time.Millisecond, Latencies: lat})
	rep.add(scenario{serverGrove, 64, 8}, g, loadResult{ReqPerSec: 1100, RowsPerSec: 70400, P50: time.Millisecond, P99: 2 * time.Millisecond, Latencies: lat})
	rep.add(scenario{serverBaseline, 64, 8}, b, loadResult{ReqPerSec: 100, RowsPerSec: 6400, P50: time.Millisecond, P99: 2 * time.Millisecond, Latencies: lat})
	rep.add(scenario{serverGroveGRPC, 64, 8}, gr, loadResult{ReqPerSec: 4000, RowsPerSec: 256000, P50: time.Millisecond, P99: 2 * time.Millisecond, Latencies: lat})
	rep.finish()
	var out bytes.Buffer
	rep.writeMarkdown(&out)
	s := out.String()
	for _, want := range []string{
		"- Target b1c32: grove 12.00x the baseline's req/s, p99 11.0 ms (target ≥ 10x, p99 ≤ 10 ms): MISSED\n",
		"- Target b64c8: grove 11.00x the baseline's req/s (target ≥ 10x): met\n",
		"- Target gRPC ModelInfer (raw_input_contents) at batch 64, conc 8: 256000 rows/s = 50% of the in-process forward's 512000 rows/s (target ≥ 40%): met\n",
	} {
		if !strings.Contains(s, want) {
			t.Errorf("missing %q in\n%s", want, s)
		}
	}
}

func TestForwardCost(t *testing.T) {
	row := func(server string, conc int, p50 time.Duration, rate float64) result {
		x := result{scenario: scenario{server, 1, conc}}
		x.P50, x.ReqPerSec = p50, rate
		return x
	}
	us := time.Microsecond
	r := &report{Results: []result{
		row(serverGroveLocal, 1, 80*us, 0), row(serverGroveFwd, 1, 180*us, 0), row(serverFloorGRPC, 1, 40*us, 0),
		row(serverFloor, 1, 25*us, 0), row(serverFloorFwd, 1, 100*us, 0),
		row(serverGroveLocal, 32, 0, 20000), row(serverGroveFwd, 32, 0, 10000),
		row(serverFloor, 32, 0, 40000), row(serverFloorFwd, 32, 0, 16000),
	}}
	c := r.forwardCost()
	if c == nil || c.AddedP50 != 100*us || c.Target != 90*us || c.FloorHop != 75*us || c.C32Ratio != 0.5 || c.FloorC32Ratio != 0.4 {
		t.Fatalf("forwardCost: %+v", c)
	}
	lines := strings.Join(c.lines(), "\n")
	for _, want := range []string{"+100.0 µs", "ABOVE", "(floor-fwd) adds +75.0 µs", "0.40x the HTTP floor", "(0.50x)"} {
		if !strings.Contains(lines, want) {
			t.Errorf("the forwarding lines lack %q:\n%s", want, lines)
		}
	}
	r.Results = r.Results[:3] // no floor-fwd rows: no floor-hop line
	if c := r.forwardCost(); c == nil || c.FloorHop != 0 || strings.Contains(strings.Join(c.lines(), "\n"), "floor-fwd") {
		t.Errorf("without floor-fwd: %+v", c)
	}
}

// TestRunForwardAB: the interleaved forwarding A/B pools every round's
// latencies per target and compares the three p50s: a "forwarding node"
// that takes 2 ms longer than the "local" one is reported 2 ms above, and
// ABOVE the floor's p50 + 50 µs.
func TestRunForwardAB(t *testing.T) {
	answer := func(delay time.Duration) *httptest.Server {
		s := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			_, _ = io.Copy(io.Discard, r.Body)
			time.Sleep(delay) // the server's own time, measured by the load generator
			_, _ = w.Write(floorAnswer)
		}))
		t.Cleanup(s.Close)
		return s
	}
	targets := map[string]*endpoint{
		serverGroveLocal: groveEndpointFor(serverGroveLocal, answer(0).URL),
		serverGroveFwd:   groveEndpointFor(serverGroveFwd, answer(2*time.Millisecond).URL),
		serverFloorGRPC:  groveEndpointFor(serverFloorGRPC, answer(0).URL),
	}
	ab := runForwardAB(context.Background(), targets, make([]float64, 64), options{forwardABRounds: 2, timeout: time.Second})
	for i, n := range ab.Samples {
		if n == 0 || ab.Errors[i] != 0 {
			t.Fatalf("target %d: %d requests, %d errors", i, n, ab.Errors[i])
		}
	}
	if ab.AddedP50 < 2*time.Millisecond || ab.AddedP50 > 10*time.Millisecond || ab.Target != ab.FloorGRPCP50+forwardTargetSlack {
		t.Fatalf("A/B %+v: want about 2 ms added", ab)
	}
	if l := strings.Join(ab.lines(), "\n"); !strings.Contains(l, "ABOVE") || !strings.Contains(l, "2 rounds") {
		t.Fatalf("lines: %s", l)
	}
}

// The CPU burner child refuses a share it cannot spin, naming its
// variable, rather than spinning something else.
func TestBurnerRefusesASpecThatIsNotAShareOfTheCPUs(t *testing.T) {
	for _, spec := range []string{"x", "0", "-1", "NaN", "1e9", ""} {
		if _, err := parseBurnerCores(spec); err == nil || !strings.Contains(err.Error(), burnerEnv) {
			t.Errorf("parseBurnerCores(%q) = %v, want an error naming %s", spec, err, burnerEnv)
		}
	}
	if cores, err := parseBurnerCores("0.5"); err != nil || cores != 0.5 {
		t.Errorf("parseBurnerCores(0.5) = %v, %v", cores, err)
	}
}

func TestFailureKindNamesTheStatusTheBodyOrTheTransport(t *testing.T) {
	for _, tc := range []struct {
		err  error
		want string
	}{
		{&statusError{code: 504, body: "late"}, "HTTP 504"},
		{fmt.Errorf("%w: {}", errBody), "an error in the body"},
		{fmt.Errorf("reading the status line: %w", os.ErrDeadlineExceeded), "timeout"},
		{context.DeadlineExceeded, "timeout"},
		{fmt.Errorf("writing the request: %w", io.ErrClosedPipe), "transport"},
	} {
		if got := failureKind(tc.err); got != tc.want {
			t.Errorf("failureKind(%v) = %q, want %q", tc.err, got, tc.want)
		}
	}
	if got, want := fmtCounts(addCounts(map[string]int{"HTTP 504": 3}, map[string]int{"transport": 3, "HTTP 429": 7, "HTTP 504": 1})),
		"HTTP 429 ×7, HTTP 504 ×4, transport ×3"; got != want {
		t.Errorf("fmtCounts = %q, want %q", got, want)
	}
}
