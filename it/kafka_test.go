package it

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/groveml/grove/grovepb"
	"github.com/groveml/grove/logging"
	"github.com/groveml/grove/logging/kafkatest"
)

// Prediction log tests: the real binary logs to an in-process kfake broker
// (or to none), and kcat, a franz-go consumer, and the binary's own
// "logs tail" and "replay" commands read the topic.

const logTopic = "grove.predictions"

// startBroker starts an embedded Kafka broker on addr (port 0: any) with
// the prediction log topic; it is stopped when the test ends.
func startBroker(t *testing.T, addr string) *logging.Embedded {
	t.Helper()
	e, err := logging.StartEmbedded(addr, logTopic)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(e.Close)
	return e
}

// writeServerConfig writes a grove serve YAML config file and returns the
// --config arguments for it.
func writeServerConfig(t *testing.T, yaml string) []string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "grove.yaml")
	if err := os.WriteFile(p, []byte(yaml), 0o644); err != nil {
		t.Fatal(err)
	}
	return []string{"--config", p}
}

// kafkaConfig is a config logging every direct call (FULL) to brokers,
// keyed by user_id and site.
func kafkaConfig(broker, encoding string, extra string) string {
	return fmt.Sprintf(`kafka:
  brokers: [%q]
  topic: %s
  encoding: %s
  linger: 1ms
%sprediction_log:
  default_level: FULL
  default_sample_rate: 1.0
  default_key_features: [user_id, site]
`, broker, logTopic, encoding, extra)
}

// logBucket is a bucket with pctr_v1/ and pcvr/ and their checksums.
func logBucket(t *testing.T, extra ...modelEntry) (*dirBucket, map[string]string) {
	t.Helper()
	b := newDirBucket(t)
	sums := map[string]string{}
	for _, name := range []string{"pctr_v1", "pcvr"} {
		data := exampleModel(t, name)
		b.Put(t, name+"/model.pt", data)
		sums[name+"/"] = checksumOf(data)
	}
	for _, e := range extra {
		data := exampleModel(t, strings.TrimSuffix(e.Path, "/"))
		b.Put(t, e.Path+"model.pt", data)
		sums[e.Path] = checksumOf(data)
	}
	putConfig(t, b, append([]modelEntry{{Path: "pctr_v1/"}, {Path: "pcvr/"}}, extra...)...)
	return b, sums
}

// post sends a B&A batch request with headers, returning the status, the
// response's X-Request-Id and the decoded body.
func post(t *testing.T, g *grove, body string, headers map[string]string) (int, string, baResponse) {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, g.url+"/v1/inference", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range headers {
		req.Header.Set(k, v)
	}
	resp, err := client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	var out baResponse
	if err := json.Unmarshal(b, &out); err != nil {
		t.Fatalf("decoding %q: %v", b, err)
	}
	return resp.StatusCode, resp.Header.Get("X-Request-Id"), out
}

// logStats is the prediction_log section of /v1/status.
type logStats struct {
	Topic     string `json:"topic"`
	Encoding  string `json:"encoding"`
	Buffered  int64  `json:"buffered"`
	Delivered uint64 `json:"delivered"`
	Failed    uint64 `json:"failed"`
	Dropped   uint64 `json:"dropped"`
	LastError string `json:"last_error"`
}

func (g *grove) logStats() logStats {
	g.t.Helper()
	_, b := g.get("/v1/status")
	var doc struct {
		Log *logStats `json:"prediction_log"`
	}
	if err := json.Unmarshal(b, &doc); err != nil || doc.Log == nil {
		g.t.Fatalf("/v1/status has no prediction_log section (%v): %s", err, b)
	}
	return *doc.Log
}

// waitDelivered waits until grove's producer has delivered n events.
func (g *grove) waitDelivered(n uint64) {
	g.t.Helper()
	g.waitFor(fmt.Sprintf("%d events delivered", n), 20*time.Second, func() bool { return g.logStats().Delivered >= n })
}

// wantEvent is what one logged event must hold.
type wantEvent struct {
	model, checksum, requestID, errType string
	configs                             map[string]string
	key                                 *string // nil: no key
	inputs                              []expectedTensor
	outputs                             []float64 // the response's first output tensor
}

// sendLoggedTraffic sends two batch requests: one with configs (body and
// Grove-Config-* header), an X-Request-Id and three items (pctr_v1/,
// pcvr/, a model that does not exist), one without any. It returns the
// events they must produce, by request id and model path.
func sendLoggedTraffic(t *testing.T, g *grove, sums map[string]string) map[string]wantEvent {
	t.Helper()
	exp := loadExpected(t)
	body := `{"configs":{"user_id":"from-body","site":"s1"},"request":[` +
		requestFor(exp, "pctr_v1", "pctr_v1/") + "," + requestFor(exp, "pcvr", "pcvr/") + "," + requestFor(exp, "pctr_v1", "nope/") + "]}"
	code, id, resp := post(t, g, body, map[string]string{"X-Request-Id": "req-kafka-1", "Grove-Config-User_id": "u42"})
	if code != http.StatusOK || id != "req-kafka-1" || len(resp.Response) != 3 {
		t.Fatalf("first request: HTTP %d, id %q, %+v", code, id, resp)
	}
	checkOutputs(t, exp, "pctr_v1", resp, 0)
	checkOutputs(t, exp, "pcvr", resp, 1)
	if errorType(resp, 2) != "MODEL_NOT_FOUND" {
		t.Fatalf("nope/ answered %+v", resp.Response[2])
	}
	key := "u42.s1"
	configs := map[string]string{"user_id": "u42", "site": "s1"}
	want := map[string]wantEvent{
		"req-kafka-1 pctr_v1/": {model: "pctr_v1/", checksum: sums["pctr_v1/"], requestID: "req-kafka-1", configs: configs, key: &key,
			inputs: exp["pctr_v1"].Inputs, outputs: resp.Response[0].Tensors[0].TensorContent},
		"req-kafka-1 pcvr/": {model: "pcvr/", checksum: sums["pcvr/"], requestID: "req-kafka-1", configs: configs, key: &key,
			inputs: exp["pcvr"].Inputs, outputs: resp.Response[1].Tensors[0].TensorContent},
		"req-kafka-1 nope/": {model: "nope/", requestID: "req-kafka-1", configs: configs, key: &key,
			inputs: exp["pctr_v1"].Inputs, errType: "MODEL_NOT_FOUND"},
	}
	code, id, resp = post(t, g, batchJSON(requestFor(exp, "pctr_v1", "pctr_v1/")), nil)
	if code != http.StatusOK || len(id) == 0 {
		t.Fatalf("second request: HTTP %d, id %q, %+v", code, id, resp)
	}
	checkOutputs(t, exp, "pctr_v1", resp, 0)
	want[id+" pctr_v1/"] = wantEvent{model: "pctr_v1/", checksum: sums["pctr_v1/"], requestID: id,
		inputs: exp["pctr_v1"].Inputs, outputs: resp.Response[0].Tensors[0].TensorContent}
	return want
}

// checkEvent fails unless ev (with record key key, nil if none) is w.
func checkEvent(t *testing.T, ev *grovepb.PredictionEvent, key []byte, w wantEvent) {
	t.Helper()
	what := ev.GetRequestId() + " " + ev.GetModelPath()
	if ev.GetApi() != "ba" || !ev.GetServed() || ev.GetModelChecksum() != w.checksum || ev.GetEventId() == "" ||
		ev.GetTimestamp() == nil || ev.GetServerInstanceId() == "" {
		t.Errorf("%s: api %q served %v checksum %q (want %q) event id %q timestamp %v instance %q", what,
			ev.GetApi(), ev.GetServed(), ev.GetModelChecksum(), w.checksum, ev.GetEventId(), ev.GetTimestamp(), ev.GetServerInstanceId())
	}
	if w.key == nil && key != nil || w.key != nil && string(key) != *w.key {
		t.Errorf("%s: record key %q, want %v", what, key, w.key)
	}
	if rt := ev.GetRequestTimestamp(); rt == nil || rt.AsTime().After(ev.GetTimestamp().AsTime()) {
		t.Errorf("%s: request_timestamp %v, want the request's time, at or before the event's %v", what, rt, ev.GetTimestamp())
	}
	if fmt.Sprint(ev.GetConfigs()) != fmt.Sprint(w.configs) {
		t.Errorf("%s: configs %v, want %v", what, ev.GetConfigs(), w.configs)
	}
	if len(ev.GetInputs()) != len(w.inputs) {
		t.Fatalf("%s: %d inputs, want %d", what, len(ev.GetInputs()), len(w.inputs))
	}
	for i, in := range w.inputs {
		got := ev.GetInputs()[i]
		if got.GetDatatype() != in.DataType || fmt.Sprint(got.GetShape()) != fmt.Sprint(in.Shape) {
			t.Errorf("%s input %d: %s %v, want %s %v", what, i, got.GetDatatype(), got.GetShape(), in.DataType, in.Shape)
		}
		checkClose(t, what+" input", tensorValues(got), in.Data, 1e-6)
	}
	if w.errType != "" {
		if ev.GetError().GetType() != w.errType || ev.GetError().GetMessage() == "" || len(ev.GetOutputs()) != 0 {
			t.Errorf("%s: error %v, outputs %v; want a %s error and no outputs", what, ev.GetError(), ev.GetOutputs(), w.errType)
		}
		return
	}
	if ev.GetError() != nil || len(ev.GetOutputs()) == 0 {
		t.Fatalf("%s: error %v, %d outputs", what, ev.GetError(), len(ev.GetOutputs()))
	}
	// The response widens float32 to double; the event keeps float32.
	checkClose(t, what+" output", tensorValues(ev.GetOutputs()[0]), w.outputs, 1e-7)
	if ev.GetComputeLatency().AsDuration() <= 0 {
		t.Errorf("%s: compute latency %v", what, ev.GetComputeLatency())
	}
}

// tensorValues returns an event tensor's values as float64.
func tensorValues(p *grovepb.Tensor) []float64 {
	var out []float64
	for _, v := range p.GetFloatData() {
		out = append(out, float64(v))
	}
	out = append(out, p.GetDoubleData()...)
	for _, v := range p.GetInt32Data() {
		out = append(out, float64(v))
	}
	for _, v := range p.GetInt64Data() {
		out = append(out, float64(v))
	}
	return out
}

// Budget: 20 s.
func TestPredictionLogJSONEventsReadByKcat(t *testing.T) {
	t.Parallel()
	emb := startBroker(t, "127.0.0.1:0")
	b, sums := logBucket(t)
	g := startGrove(t, b.URL(), nil, writeServerConfig(t, kafkaConfig(emb.Addr(), "json", ""))...)
	want := sendLoggedTraffic(t, g, sums)
	g.waitDelivered(uint64(len(want)))

	out, err := exec.Command("kcat", "-b", emb.Addr(), "-t", logTopic, "-C", "-e", "-q", "-o", "beginning", "-J").Output()
	if err != nil {
		t.Fatalf("kcat: %v", err)
	}
	seen := 0
	for line := range strings.SplitSeq(strings.TrimSpace(string(out)), "\n") {
		var msg struct {
			Key     *string  `json:"key"`
			Payload string   `json:"payload"`
			Headers []string `json:"headers"`
		}
		if err := json.Unmarshal([]byte(line), &msg); err != nil {
			t.Fatalf("kcat line %q: %v", line, err)
		}
		headers := map[string]string{}
		var kh []kgo.RecordHeader
		for i := 0; i+1 < len(msg.Headers); i += 2 {
			headers[msg.Headers[i]] = msg.Headers[i+1]
			kh = append(kh, kgo.RecordHeader{Key: msg.Headers[i], Value: []byte(msg.Headers[i+1])})
		}
		if headers["grove-encoding"] != "json" || headers["grove-schema"] != "grove.v1.PredictionEvent" || headers["content-type"] != "application/json" {
			t.Errorf("headers %v", headers)
		}
		// The raw JSON uses the .proto field names.
		var raw map[string]any
		if err := json.Unmarshal([]byte(msg.Payload), &raw); err != nil {
			t.Fatalf("payload %q is not JSON: %v", msg.Payload, err)
		}
		for _, f := range []string{"event_id", "request_id", "model_path", "served", "inputs", "server_instance_id"} {
			if _, ok := raw[f]; !ok {
				t.Errorf("payload has no %q: %s", f, msg.Payload)
			}
		}
		ev, err := logging.Decode([]byte(msg.Payload), kh)
		if err != nil {
			t.Fatal(err)
		}
		w, ok := want[ev.GetRequestId()+" "+ev.GetModelPath()]
		if !ok {
			t.Errorf("unexpected event %s", msg.Payload)
			continue
		}
		var key []byte
		if msg.Key != nil {
			key = []byte(*msg.Key)
		}
		checkEvent(t, ev, key, w)
		seen++
	}
	if seen != len(want) {
		t.Errorf("kcat read %d events, want %d:\n%s", seen, len(want), out)
	}
}

// Budget: 15 s.
func TestPredictionLogProtoEventsReadByGoConsumer(t *testing.T) {
	t.Parallel()
	emb := startBroker(t, "127.0.0.1:0")
	b, sums := logBucket(t)
	g := startGrove(t, b.URL(), nil, writeServerConfig(t, kafkaConfig(emb.Addr(), "proto", ""))...)
	want := sendLoggedTraffic(t, g, sums)
	g.waitDelivered(uint64(len(want)))

	recs := kafkatest.ReadUntil(t, emb.Addr(), logTopic, 20*time.Second, func(r []*kgo.Record) bool { return len(r) >= len(want) })
	seen := map[string]bool{}
	for _, r := range recs {
		var enc string
		for _, h := range r.Headers {
			if h.Key == "grove-encoding" {
				enc = string(h.Value)
			}
		}
		if enc != "proto" || bytes.HasPrefix(r.Value, []byte("{")) {
			t.Errorf("record with encoding header %q, value %.20q", enc, r.Value)
		}
		ev, err := logging.Decode(r.Value, r.Headers)
		if err != nil {
			t.Fatal(err)
		}
		w, ok := want[ev.GetRequestId()+" "+ev.GetModelPath()]
		if !ok {
			t.Errorf("unexpected event %v", ev)
			continue
		}
		checkEvent(t, ev, r.Key, w)
		seen[ev.GetRequestId()+" "+ev.GetModelPath()] = true
	}
	if len(seen) != len(want) {
		t.Errorf("%d distinct events of %d arrived", len(seen), len(want))
	}
}

// Budget: 30 s.
func TestPredictionLogSurvivesBrokerOutage(t *testing.T) {
	t.Parallel()
	addr := freeAddr(t)
	emb := startBroker(t, addr)
	b, _ := logBucket(t)
	g := startGrove(t, b.URL(), nil, writeServerConfig(t, kafkaConfig(addr, "proto", ""))...)
	exp := loadExpected(t)
	body := batchJSON(requestFor(exp, "pctr_v1", "pctr_v1/"))
	// A first event, so the producer knows the topic and has its producer id.
	if code, _, _ := post(t, g, body, map[string]string{"X-Request-Id": "before"}); code != http.StatusOK {
		t.Fatalf("HTTP %d", code)
	}
	g.waitDelivered(1)

	emb.Close()
	const n = 50
	start := time.Now()
	for i := range n {
		code, _, resp := post(t, g, body, map[string]string{"X-Request-Id": fmt.Sprintf("outage-%d", i)})
		if code != http.StatusOK || !matches(exp, "pctr_v1", resp, 0) {
			t.Fatalf("request %d with the broker down: HTTP %d %+v", i, code, resp)
		}
	}
	t.Logf("%d requests with the broker down took %v", n, time.Since(start))
	g.waitFor("the events to wait in the buffer", 5*time.Second, func() bool { return g.logStats().Buffered == n })

	startBroker(t, addr) // a new, empty broker on the same address
	seen := map[string]bool{}
	kafkatest.ReadUntil(t, addr, logTopic, 60*time.Second, func(recs []*kgo.Record) bool {
		for _, r := range recs {
			ev, err := logging.Decode(r.Value, r.Headers)
			if err != nil {
				t.Fatal(err)
			}
			if strings.HasPrefix(ev.GetRequestId(), "outage-") {
				seen[ev.GetRequestId()] = true
			}
		}
		return len(seen) == n
	})
	g.waitDelivered(n + 1)
	if s := g.logStats(); s.Dropped != 0 || s.Failed != 0 || s.Buffered != 0 {
		t.Errorf("after the outage: %+v", s)
	}
}

// It runs alone (no t.Parallel): it times requests served while the broker is down. Budget: 10 s.
func TestPredictionLogBufferOverflowDropsAndCounts(t *testing.T) {
	const buffer, n = 5, 50
	b, _ := logBucket(t)
	// Nothing listens at the broker address: every event stays buffered or is dropped.
	cfg := kafkaConfig(freeAddr(t), "proto", fmt.Sprintf("  buffer_records: %d\n", buffer))
	// A short drain: at exit grove waits that long to flush what cannot be delivered.
	g := startGrove(t, b.URL(), nil, append(writeServerConfig(t, cfg), "--drain-timeout", "1s")...)
	exp := loadExpected(t)
	body := batchJSON(requestFor(exp, "pctr_v1", "pctr_v1/"))
	start := time.Now()
	for i := range n {
		code, _, resp := post(t, g, body, nil)
		if code != http.StatusOK || !matches(exp, "pctr_v1", resp, 0) {
			t.Fatalf("request %d: HTTP %d %+v", i, code, resp)
		}
	}
	if took := time.Since(start); took > 5*time.Second {
		t.Errorf("%d requests with no broker took %v", n, took)
	}
	s := g.logStats()
	if s.Buffered != buffer || s.Dropped != uint64(n-buffer) || s.Delivered != 0 || s.Failed != 0 {
		t.Errorf("stats %+v; want %d buffered and %d dropped", s, buffer, n-buffer)
	}
	_, metrics := g.get("/metrics")
	for _, line := range []string{
		fmt.Sprintf("grove_prediction_log_dropped_total %d", n-buffer),
		fmt.Sprintf("grove_prediction_log_buffered %d", buffer),
	} {
		if !bytes.Contains(metrics, []byte("\n"+line+"\n")) {
			t.Errorf("/metrics has no line %q", line)
		}
	}
}

// runGrove runs the grove binary with args and returns its stdout; it
// fails the test unless the exit code is wantCode.
func runGrove(t *testing.T, wantCode int, args ...string) (stdout, stderr string) {
	t.Helper()
	var out, errb bytes.Buffer
	cmd := exec.Command(groveBin, args...)
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	code := 0
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatal(err)
	}
	if code != wantCode {
		t.Fatalf("grove %s: exit %d, want %d\nstdout: %s\nstderr: %s", strings.Join(args, " "), code, wantCode, out.String(), errb.String())
	}
	return out.String(), errb.String()
}

// replaySummary is the --json output of grove replay.
type replaySummary struct {
	Events      int            `json:"events"`
	Compared    int            `json:"compared"`
	Skipped     int            `json:"skipped"`
	SkippedBy   map[string]int `json:"skipped_by_reason"`
	Values      int            `json:"values_compared"`
	Mean        float64        `json:"mean_abs_diff"`
	Max         float64        `json:"max_abs_diff"`
	Within      int            `json:"within_tolerance"`
	WithinShare float64        `json:"within_tolerance_share"`
}

func replayJSON(t *testing.T, args ...string) replaySummary {
	t.Helper()
	out, _ := runGrove(t, 0, append([]string{"replay", "--json"}, args...)...)
	var s replaySummary
	if err := json.Unmarshal([]byte(out), &s); err != nil {
		t.Fatalf("replay output %q: %v", out, err)
	}
	return s
}

// Budget: 45 s.
func TestLogsTailAndReplay(t *testing.T) {
	t.Parallel()
	emb := startBroker(t, "127.0.0.1:0")
	b, _ := logBucket(t, modelEntry{Path: "pctr_v2/"})
	g := startGrove(t, b.URL(), nil, writeServerConfig(t, kafkaConfig(emb.Addr(), "proto", ""))...)

	// 20 requests of two rows each to pctr_v1/, and one that fails.
	const n = 20
	for i := range n {
		data := make([]float64, 128)
		for j := range data {
			data[j] = math.Sin(float64(i*128+j)) * 2
		}
		body := batchJSON(itemJSON("pctr_v1/", tensorJSON("FLOAT", []int64{2, 64}, data)))
		if code, _, resp := post(t, g, body, map[string]string{"X-Request-Id": fmt.Sprintf("tail-%d", i)}); code != http.StatusOK || errorType(resp, 0) != "" {
			t.Fatalf("request %d: HTTP %d %+v", i, code, resp)
		}
	}
	bad := batchJSON(itemJSON("pctr_v1/", tensorJSON("FLOAT", []int64{1, 3}, []float64{1, 2, 3})))
	if _, _, resp := post(t, g, bad, nil); errorType(resp, 0) == "" {
		t.Fatalf("wrong-shaped request answered %+v", resp)
	}
	g.waitDelivered(n + 1)
	brokers := []string{"--brokers", emb.Addr(), "--topic", logTopic}

	t.Run("tail", func(t *testing.T) {
		out, _ := runGrove(t, 0, append([]string{"logs", "tail", "--from-beginning"}, brokers...)...)
		lines := strings.Split(strings.TrimSpace(out), "\n")
		if len(lines) != n+1 {
			t.Fatalf("%d lines, want %d:\n%s", len(lines), n+1, out)
		}
		sc := bufio.NewScanner(strings.NewReader(out))
		sc.Buffer(nil, 1<<20)
		for i := 0; sc.Scan(); i++ {
			var ev struct {
				RequestID string `json:"request_id"`
				ModelPath string `json:"model_path"`
				Served    bool   `json:"served"`
				Inputs    []struct {
					Shape     []string  `json:"shape"`
					FloatData []float64 `json:"float_data"`
				} `json:"inputs"`
			}
			if err := json.Unmarshal(sc.Bytes(), &ev); err != nil {
				t.Fatalf("line %d %q: %v", i, sc.Text(), err)
			}
			if i < n && (ev.RequestID != fmt.Sprintf("tail-%d", i) || ev.ModelPath != "pctr_v1/" || !ev.Served ||
				len(ev.Inputs) != 1 || fmt.Sprint(ev.Inputs[0].Shape) != "[2 64]" || len(ev.Inputs[0].FloatData) != 128) {
				t.Errorf("line %d: %s", i, sc.Text())
			}
		}
		if out, _ := runGrove(t, 0, append([]string{"logs", "tail", "--from-beginning", "--model", "pctr_v1", "--limit", "3"}, brokers...)...); strings.Count(out, "\n") != 3 {
			t.Errorf("--limit 3 printed:\n%s", out)
		}
		if out, _ := runGrove(t, 0, append([]string{"logs", "tail", "--from-beginning", "--model", "pcvr/"}, brokers...)...); out != "" {
			t.Errorf("--model pcvr/ printed:\n%s", out)
		}
		if out, _ := runGrove(t, 0, append([]string{"logs", "tail"}, brokers...)...); out != "" {
			t.Errorf("without --from-beginning or --follow, printed:\n%s", out)
		}
		_, errOut := runGrove(t, 1, "logs", "tail", "--brokers", emb.Addr(), "--topic", "no.such.topic")
		if !strings.Contains(errOut, `topic "no.such.topic" does not exist`) || !strings.Contains(errOut, emb.Addr()) {
			t.Errorf("missing topic: %q", errOut)
		}
		dead := freeAddr(t)
		_, errOut = runGrove(t, 1, "logs", "tail", "--brokers", dead, "--timeout", "2s")
		if !strings.Contains(errOut, "cannot reach the Kafka broker "+dead) {
			t.Errorf("dead broker: %q", errOut)
		}
	})

	t.Run("follow", func(t *testing.T) {
		cmd := exec.Command(groveBin, append([]string{"logs", "tail", "--follow", "--model", "pctr_v1/"}, brokers...)...)
		var out syncBuffer
		cmd.Stdout, cmd.Stderr = &out, &out
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		defer cmd.Process.Kill()
		body := batchJSON(requestFor(loadExpected(t), "pctr_v1", "pctr_v1/"))
		g.waitFor("logs tail --follow to print a new event", 20*time.Second, func() bool {
			post(t, g, body, map[string]string{"X-Request-Id": "followed"})
			time.Sleep(200 * time.Millisecond)
			return strings.Contains(out.String(), `"request_id":"followed"`)
		})
		_ = cmd.Process.Signal(os.Interrupt)
		if err := cmd.Wait(); err != nil {
			t.Errorf("logs tail --follow after SIGINT: %v\n%s", err, out.String())
		}
	})

	models := filepath.Join(repoRoot(), "examples", "bucket")
	logged := append([]string{"--logged-model", "pctr_v1/"}, brokers...)
	t.Run("replay in-process", func(t *testing.T) {
		v2 := replayJSON(t, append([]string{"--model", filepath.Join(models, "pctr_v2") + "/", "--limit", fmt.Sprint(n + 1)}, logged...)...)
		if v2.Events != n+1 || v2.Compared != n || v2.SkippedBy["logged_error"] != 1 || v2.Values != 2*n || !(v2.Mean > 1e-4) || v2.Max < v2.Mean || v2.Within == n {
			t.Errorf("pctr_v2 over pctr_v1's traffic: %+v", v2)
		}
		t.Logf("pctr_v2 over pctr_v1's traffic: %+v", v2)
		v1 := replayJSON(t, append([]string{"--model", filepath.Join(models, "pctr_v1", "model.pt"), "--limit", fmt.Sprint(n + 1)}, logged...)...)
		if v1.Compared != n || v1.Within != n || v1.WithinShare != 1 || v1.Max > 1e-5 {
			t.Errorf("pctr_v1 over its own traffic: %+v", v1)
		}
		text, _ := runGrove(t, 0, append([]string{"replay", "--model", filepath.Join(models, "pctr_v2") + "/", "--limit", fmt.Sprint(n + 1)}, logged...)...)
		for _, s := range []string{"compared                20", "logged error          1", "mean abs difference", "within tolerance 1e-05"} {
			if !strings.Contains(text, s) {
				t.Errorf("replay summary has no %q:\n%s", s, text)
			}
		}
	})

	t.Run("replay over HTTP", func(t *testing.T) {
		inProc := replayJSON(t, append([]string{"--model", filepath.Join(models, "pctr_v2") + "/", "--limit", fmt.Sprint(n)}, logged...)...)
		v2 := replayJSON(t, append([]string{"--url", g.url, "--target-model", "pctr_v2/", "--limit", fmt.Sprint(n)}, logged...)...)
		if v2.Compared != n || math.Abs(v2.Mean-inProc.Mean) > 1e-6 || math.Abs(v2.Max-inProc.Max) > 1e-6 {
			t.Errorf("pctr_v2/ over HTTP %+v, in-process %+v", v2, inProc)
		}
		v1 := replayJSON(t, append([]string{"--url", g.url, "--limit", fmt.Sprint(n)}, logged...)...)
		if v1.Compared != n || v1.Within != n || v1.Max > 1e-5 {
			t.Errorf("pctr_v1/ over HTTP against its own traffic: %+v", v1)
		}
	})
}
