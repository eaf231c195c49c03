package main

import (
	"bytes"
	"context"
	"encoding/binary"
	"io"
	"math"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/groveml/grove/api/forestflow"
	"github.com/groveml/grove/api/graphpipe"
	"github.com/groveml/grove/conf/modelconfig"
	"github.com/groveml/grove/servables"
)

func TestSplitShadowSpec(t *testing.T) {
	rest, users, err := splitShadowSpec("b1c1, Shadow ,grove+log/b1c32,shadow/b1c32,shadow/B1C8")
	if err != nil || rest != "b1c1,grove+log/b1c32" || !reflect.DeepEqual(users, []shape{{1, 8}, {1, 32}}) {
		t.Errorf("got %q %v %v", rest, users, err)
	}
	rest, users, err = splitShadowSpec(defaultSpec())
	if err != nil || rest != defaultSpec() || users != nil {
		t.Errorf("no shadow entries: %q %v %v", rest, users, err)
	}
	for _, bad := range []string{"shadow/b0c1", "shadow/b1", "shadow/"} {
		if _, _, err := splitShadowSpec(bad); err == nil {
			t.Errorf("splitShadowSpec(%q) accepted", bad)
		}
	}
}

func TestParseFlagsShadow(t *testing.T) {
	o, err := parseFlags(nil, io.Discard)
	if err != nil || !reflect.DeepEqual(o.shadowUsers, []shape{defaultShadowUser}) || o.shadowLoad != (shape{256, 6}) ||
		o.shadowRounds != defaultShadowRounds || o.shadowUserRate != 0 {
		t.Errorf("defaults: %+v %v", o, err)
	}
	// The shadow scenario alone: no other scenario.
	o, err = parseFlags([]string{"--scenarios", "shadow/b1c4", "--shadow-load", "b64c2", "--shadow-rounds", "3", "--shadow-user-rate", "500"}, io.Discard)
	if err != nil || len(o.scenarios) != 0 || !reflect.DeepEqual(o.shadowUsers, []shape{{1, 4}}) || o.shadowLoad != (shape{64, 2}) ||
		o.shadowRounds != 3 || o.shadowUserRate != 500 {
		t.Errorf("shadow alone: %+v %v", o, err)
	}
	// Other scenarios without shadow entries: no shadow scenario.
	o, err = parseFlags([]string{"--scenarios", "b1c1"}, io.Discard)
	if err != nil || len(o.scenarios) != 2 || o.shadowUsers != nil {
		t.Errorf("b1c1: %+v %v", o, err)
	}
	o, err = parseFlags([]string{"--shadow=false"}, io.Discard)
	if err != nil || o.shadowUsers != nil || len(o.scenarios) == 0 {
		t.Errorf("--shadow=false: %+v %v", o, err)
	}
	o, err = parseFlags([]string{"--prediction-log=false", "--scenarios", "grove+log,shadow"}, io.Discard)
	if err != nil || len(o.scenarios) != 0 || len(o.shadowUsers) != 1 {
		t.Errorf("grove+log,shadow without the prediction log: %+v %v", o, err)
	}
	for _, bad := range [][]string{
		{"--scenarios", "shadow", "--shadow=false"},
		{"--shadow-load", "b1"},
		{"--shadow-rounds", "0"},
		{"--shadow-user-rate", "-1"},
		{"--scenarios", "shadow/x"},
	} {
		if _, err := parseFlags(bad, io.Discard); err == nil {
			t.Errorf("parseFlags(%q) accepted", bad)
		}
	}
}

func TestMicroBatchRows(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want int
	}{
		{nil, 64},
		{[]string{"--log-level", "debug"}, 64},
		{[]string{"--shadow-micro-batch-rows", "16"}, 16},
		{[]string{"-shadow-micro-batch-rows=0", "--x"}, 0},
		{[]string{"--shadow-micro-batch-rows=8", "--shadow-micro-batch-rows", "32"}, 32},
	} {
		if got := microBatchRows(tc.args); got != tc.want {
			t.Errorf("microBatchRows(%q) = %d, want %d", tc.args, got, tc.want)
		}
	}
}

// TestShadowBucket checks the bucket grovebench writes is one grove accepts,
// with the contracts the scenario relies on.
func TestShadowBucket(t *testing.T) {
	dir := t.TempDir()
	if err := writeShadowBucket("../../examples/bucket", dir); err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{modelPath, championPath, champion2Path, twinPath} {
		if _, err := os.Stat(filepath.Join(dir, p, "model.pt")); err != nil {
			t.Error(err)
		}
	}
	v1, _ := os.ReadFile(filepath.Join(dir, modelPath, "model.pt"))
	twin, _ := os.ReadFile(filepath.Join(dir, twinPath, "model.pt"))
	if !bytes.Equal(v1, twin) {
		t.Error("the twin is not pctr_v1's model")
	}
	data, err := os.ReadFile(filepath.Join(dir, "model_config.json"))
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := modelconfig.Parse(data)
	if err != nil {
		t.Fatalf("grove rejects the shadow bucket's config: %v", err)
	}
	type servable struct {
		path   string
		shadow bool
	}
	got := map[string][]servable{}
	for _, c := range cfg.Contracts {
		for _, s := range c.Servables {
			got[c.ID()] = append(got[c.ID()], servable{s.ModelPath, s.Shadow != nil})
		}
	}
	want := map[string][]servable{
		userContract:  {{modelPath, false}},
		loadContract:  {{championPath, false}, {champion2Path, false}, {modelPath, true}},
		twinContract:  {{championPath, false}, {champion2Path, false}, {twinPath, true}},
		plainContract: {{championPath, false}, {champion2Path, false}},
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("contracts %v, want %v", got, want)
	}
}

// TestContractBodies checks the request bodies with Grove's own parsers and
// the answer parsers with Grove's own encoders.
func TestContractBodies(t *testing.T) {
	rows := [][]float64{{0.5, -1, 0.25}, {1, 2, 3}}
	ff, err := forestflow.ParseInferenceRequest(forestflowBody(rows))
	if err != nil {
		t.Fatalf("ForestFlow body: %v\n%s", err, forestflowBody(rows))
	}
	if ff.Rows != 2 || len(ff.Inputs) != 1 || !reflect.DeepEqual(ff.Inputs[0].Shape, []int64{2, 3}) ||
		!reflect.DeepEqual(ff.Inputs[0].Float32s(), []float32{0.5, -1, 0.25, 1, 2, 3}) {
		t.Errorf("ForestFlow request %+v", ff)
	}
	gp, err := graphpipe.ParseRequest(graphpipeBody(rows))
	if err != nil {
		t.Fatalf("GraphPipe body: %v", err)
	}
	if len(gp.Inputs) != 1 || gp.Inputs[0].DType != servables.Float32 || !reflect.DeepEqual(gp.Inputs[0].Shape, []int64{2, 3}) ||
		!reflect.DeepEqual(gp.Inputs[0].Float32s(), []float32{0.5, -1, 0.25, 1, 2, 3}) {
		t.Errorf("GraphPipe request %+v", gp)
	}

	out, err := servables.NewTensor("output_0", servables.Float32, []int64{2, 1})
	if err != nil {
		t.Fatal(err)
	}
	binary.LittleEndian.PutUint32(out.Data, math.Float32bits(0.25))
	binary.LittleEndian.PutUint32(out.Data[4:], math.Float32bits(0.75))
	got, err := graphpipeOutputs(graphpipe.AppendInferResponse(nil, []servables.Tensor{out}))
	if err != nil || !reflect.DeepEqual(got, []float64{0.25, 0.75}) {
		t.Errorf("GraphPipe outputs %v, %v", got, err)
	}
	if _, err := graphpipeOutputs(graphpipe.AppendErrorResponse(nil, 500, "boom")); err == nil || !strings.Contains(err.Error(), "boom") {
		t.Errorf("GraphPipe error answer: %v", err)
	}
	if _, err := graphpipeOutputs([]byte("not a flatbuffer at all")); err == nil {
		t.Error("garbage accepted as a GraphPipe answer")
	}

	fqrv := forestflow.FQRV{Contract: forestflow.Contract{Organization: "ads", Project: "pctr", ContractNumber: 1}, ReleaseVersion: "v1"}
	body, err := forestflow.AppendPrediction(nil, fqrv, []servables.Tensor{out})
	if err != nil {
		t.Fatal(err)
	}
	vals, rel, err := forestflowOutputs(body)
	if err != nil || rel != "v1" || !reflect.DeepEqual(vals, []float64{0.25, 0.75}) {
		t.Errorf("ForestFlow outputs %v %q %v from %s", vals, rel, err, body)
	}
	if _, err := releaseOutputs("v2")(body); err == nil {
		t.Error("an answer from v1 passed for v2")
	}
	if _, _, err := forestflowOutputs([]byte(`{"UnknownContract":{}}`)); err == nil {
		t.Error("an error body passed for a prediction")
	}
}

const promText = `# HELP grove_model_requests_total Predict requests.
# TYPE grove_model_requests_total counter
grove_model_requests_total{api="graphpipe-shadow",model="pctr_v1/",outcome="ok"} 40
grove_model_requests_total{api="graphpipe-shadow",model="pctr_v1/",outcome="execution_error"} 2
grove_model_requests_total{api="forestflow",model="pctr_v1/",outcome="ok"} 1000
grove_shadow_dropped_total{model="pctr_v1/",reason="overloaded"} 7
grove_model_queue_depth{model="pctr_v1/"} 3
grove_model_queue_depth{model="a \"quoted\" \\ path\n"} 1 1700000000000
grove_model_request_duration_seconds_bucket{api="forestflow",model="pctr_v1/",le="0.0001"} 900
grove_model_request_duration_seconds_bucket{api="forestflow",model="pctr_v1/",le="0.001"} 990
grove_model_request_duration_seconds_bucket{api="forestflow",model="pctr_v1/",le="+Inf"} 1000
grove_ready 1
`

func TestParseProm(t *testing.T) {
	p, err := parseProm(strings.NewReader(promText))
	if err != nil {
		t.Fatal(err)
	}
	if n := p.sum("grove_model_requests_total", map[string]string{"api": "graphpipe-shadow", "model": "pctr_v1/"}); n != 42 {
		t.Errorf("shadow executions %v", n)
	}
	if n := p.sum("grove_model_requests_total", map[string]string{"api": "graphpipe-shadow", "model": "pctr_v1/", "outcome": "ok"}); n != 40 {
		t.Errorf("ok shadow executions %v", n)
	}
	if n := p.sum("grove_shadow_dropped_total", map[string]string{"model": "nope/"}); n != 0 {
		t.Errorf("absent series %v", n)
	}
	if n := p.sum("grove_model_queue_depth", map[string]string{"model": "a \"quoted\" \\ path\n"}); n != 1 {
		t.Errorf("escaped label: %v", n)
	}
	if n := p.sum("grove_ready", nil); n != 1 {
		t.Errorf("no labels: %v", n)
	}
	b := p.buckets("grove_model_request_duration_seconds", map[string]string{"api": "forestflow"})
	want := []promBucket{{0.0001, 900}, {0.001, 990}, {math.Inf(1), 1000}}
	if !reflect.DeepEqual(b, want) {
		t.Errorf("buckets %v", b)
	}
	for _, bad := range []string{"x{a=\"1\" 2", "x{a=1} 2", "x", "x{a=\"1\"} y"} {
		if _, err := parseProm(strings.NewReader(bad)); err == nil {
			t.Errorf("parseProm(%q) accepted", bad)
		}
	}
}

func TestHistBound(t *testing.T) {
	before := []promBucket{{0.0001, 900}, {0.001, 990}, {0.01, 1000}, {math.Inf(1), 1000}}
	after := []promBucket{{0.0001, 1000}, {0.001, 1180}, {0.01, 1199}, {math.Inf(1), 1200}}
	d := bucketsDelta(before, after) // 100 ≤ 0.1 ms, 90 more ≤ 1 ms, 9 more ≤ 10 ms, 1 above
	if want := []promBucket{{0.0001, 100}, {0.001, 190}, {0.01, 199}, {math.Inf(1), 200}}; !reflect.DeepEqual(d, want) {
		t.Fatalf("delta %v", d)
	}
	for _, tc := range []struct {
		q    float64
		want float64
	}{{0.5, 0.0001}, {0.51, 0.001}, {0.95, 0.001}, {0.99, 0.01}, {0.999, math.Inf(1)}, {1, math.Inf(1)}} {
		if got, ok := histBound(d, tc.q); !ok || got != tc.want {
			t.Errorf("q %v: %v %v, want %v", tc.q, got, ok, tc.want)
		}
	}
	if _, ok := histBound(bucketsDelta(before, before), 0.99); ok {
		t.Error("a bound without observations")
	}
	if _, ok := histBound(nil, 0.99); ok {
		t.Error("a bound without buckets")
	}
	if got := boundDur(d, 0.99); got != 10*time.Millisecond {
		t.Errorf("boundDur %v", got)
	}
	if got := boundDur(d, 1); got != maxDur || fmtBound(got) != "> largest bucket" {
		t.Errorf("boundDur +Inf %v %q", got, fmtBound(got))
	}
	if fmtBound(0) != "n/a" || fmtBound(2500*time.Microsecond) != "≤ 2.50 ms" {
		t.Errorf("fmtBound %q %q", fmtBound(0), fmtBound(2500*time.Microsecond))
	}
	sum := addBuckets(d, []promBucket{{0.0001, 1}, {0.001, 1}, {0.01, 1}, {math.Inf(1), 1}})
	if want := []promBucket{{0.0001, 101}, {0.001, 191}, {0.01, 200}, {math.Inf(1), 201}}; !reflect.DeepEqual(sum, want) {
		t.Errorf("addBuckets %v", sum)
	}
}

func TestProcParsing(t *testing.T) {
	// The command name may hold spaces and parentheses.
	stat := "1234 (grove (x) y) S 1 1234 1234 0 -1 4194560 100 0 0 0 250 75 0 0 20 0 12 0 99 1000 200"
	if got, err := parseProcStat(stat); err != nil || got != 325 {
		t.Errorf("parseProcStat = %d, %v", got, err)
	}
	for _, bad := range []string{"1234 grove S 1", "1 (x) S 1 2 3", "1 (x) S 1 1 1 0 -1 0 0 0 0 0 u s"} {
		if _, err := parseProcStat(bad); err == nil {
			t.Errorf("parseProcStat(%q) accepted", bad)
		}
	}
	busy, total, err := parseCPULine("cpu  100 5 50 800 20 3 2 1 40 0")
	if err != nil || busy != 161 || total != 981 {
		t.Errorf("parseCPULine = %d %d %v", busy, total, err)
	}
	if _, _, err := parseCPULine("cpu0 1 2 3 4 5"); err == nil {
		t.Error("a per-CPU line accepted")
	}
	at := time.Now()
	a := cpuReading{at: at, grove: 1000, self: 500, busy: 10000, total: 20000, ok: true}
	b := cpuReading{at: at.Add(2 * time.Second), grove: 1300, self: 540, busy: 10380, total: 20400, ok: true}
	u := cpuBetween(a, b)
	if math.Abs(u.Grove-1.5) > 1e-9 || math.Abs(u.Bench-0.2) > 1e-9 || math.Abs(u.Machine-0.95) > 1e-9 || math.Abs(u.Other-0.2) > 1e-9 {
		t.Errorf("cpuBetween = %+v", u)
	}
	if u := cpuBetween(a, cpuReading{at: b.at}); u != (cpuUse{}) {
		t.Errorf("unknown reading: %+v", u)
	}
	if r := readCPU(os.Getpid()); r.ok && r.self == 0 && r.total == 0 {
		t.Errorf("readCPU on Linux read nothing: %+v", r)
	}
}

func TestServerSamplesStats(t *testing.T) {
	first, err := parseProm(strings.NewReader(promText))
	if err != nil {
		t.Fatal(err)
	}
	last, err := parseProm(strings.NewReader(strings.NewReplacer(
		`outcome="ok"} 40`, `outcome="ok"} 140`,
		`outcome="execution_error"} 2`, `outcome="execution_error"} 3`,
		`reason="overloaded"} 7`, `reason="overloaded"} 57`,
		`le="0.0001"} 900`, `le="0.0001"} 1000`,
		`le="0.001"} 990`, `le="0.001"} 1190`,
		`le="+Inf"} 1000`, `le="+Inf"} 1200`,
	).Replace(promText)))
	if err != nil {
		t.Fatal(err)
	}
	at := time.Now()
	s := serverSamples{first: first, last: last, queue: []float64{0, 3, 5, 1},
		cpuA: cpuReading{at: at}, cpuB: cpuReading{at: at.Add(2 * time.Second)}}
	st := s.stats(modelPath)
	if st.ShadowExecutions != 101 || st.ShadowFailed != 1 || st.ShadowDropped != 50 || st.Window != 2*time.Second ||
		st.QueueBusy != 0.75 || st.QueueMean != 2.25 || st.QueueMax != 5 || st.ActorP50 != 100*time.Microsecond || st.ActorP99 != time.Millisecond {
		t.Errorf("stats %+v", st)
	}
	if st.rate(st.ShadowExecutions) != 50.5 {
		t.Errorf("rate %v", st.rate(st.ShadowExecutions))
	}
	if got := st.saturation(); !strings.HasPrefix(got, "saturated at times") {
		t.Errorf("75%% busy with drops: %q", got)
	}
	st.ShadowDropped = 0
	if got := st.saturation(); !strings.HasPrefix(got, "NOT saturated") {
		t.Errorf("75%% busy without drops: %q", got)
	}
	st.QueueBusy = 0.95
	if got := st.saturation(); got != "saturated" {
		t.Errorf("95%% busy: %q", got)
	}
	if st := (serverSamples{}).stats(modelPath); st.Error == "" {
		t.Error("no samples and no error")
	}
}

func TestP99Ratio(t *testing.T) {
	for _, tc := range []struct {
		a, b  time.Duration
		ratio float64
		met   bool
	}{
		{10 * time.Millisecond, 15 * time.Millisecond, 1.5, true},
		{10 * time.Millisecond, 15*time.Millisecond + 1, 1.5000001, false},
		{10 * time.Millisecond, 5 * time.Millisecond, 0.5, true},
		{0, 5 * time.Millisecond, 0, false},
		{5 * time.Millisecond, 0, 0, false},
	} {
		r, met := p99Ratio(tc.a, tc.b)
		if math.Abs(r-tc.ratio) > 1e-6 || met != tc.met {
			t.Errorf("p99Ratio(%v, %v) = %v %v, want %v %v", tc.a, tc.b, r, met, tc.ratio, tc.met)
		}
	}
}

// lats returns n latencies: n-1 of base and one of slow.
func lats(n int, base, slow time.Duration) []time.Duration {
	l := make([]time.Duration, n)
	for i := range l {
		l[i] = base
	}
	l[n-1] = slow
	return l
}

// shadowFixture is a run of two rounds whose pooled p99s are 2 ms (alone),
// 2.6 ms (shadow) and 2.4 ms (control).
func shadowFixture() *shadowReport {
	ms := time.Millisecond
	ph := func(round int, k phaseKind, base, slow time.Duration, drops int64, busy float64) shadowPhase {
		x := loadResult{Latencies: lats(100, base, slow), Requests: 100, ReqPerSec: 20}
		x.summarize()
		return shadowPhase{Round: round, Kind: k, User: x, Server: shadowServer{
			Window: 5 * time.Second, ShadowModel: k.shadowModel(), ShadowExecutions: 500, ShadowDropped: drops,
			LoadRequests: 1000, QueueSamples: 50, QueueBusy: busy, QueueMean: 100, QueueMax: 256,
			CPU:   cpuUse{Grove: 1.5, Bench: 0.3, Other: 0.1, Machine: 0.95},
			actor: []promBucket{{0.0001, 99}, {0.0025, 100}, {math.Inf(1), 100}},
			http:  []promBucket{{0.001, 90}, {0.005, 100}, {math.Inf(1), 100}}}}
	}
	run := shadowRun{User: shape{1, 8}, Phases: []shadowPhase{
		ph(1, phaseNone, ms, 2*ms, 0, 0.1), ph(1, phaseLoad, ms, 2200*time.Microsecond, 0, 0), ph(1, phaseShadow, ms, 2600*time.Microsecond, 10, 1), ph(1, phaseTwin, ms, 2400*time.Microsecond, 0, 0.5),
		ph(2, phaseNone, ms, 2*ms, 0, 0.1), ph(2, phaseLoad, ms, 2200*time.Microsecond, 0, 0), ph(2, phaseShadow, ms, 2600*time.Microsecond, 10, 1), ph(2, phaseTwin, ms, 2400*time.Microsecond, 0, 0.5),
	}}
	for i := range run.Phases {
		run.Phases[i].Server.bounds()
	}
	run.Phases[6].Load = &loadResult{Errors: 3, FirstError: "HTTP 500: boom"}
	run.finish()
	return &shadowReport{Model: modelPath, Champions: []string{championPath, champion2Path}, TwinModel: twinPath,
		UserContract: userContract, LoadContract: loadContract, TwinContract: twinContract, PlainContract: plainContract,
		UserAPI: "POST /ads/pctr/1/score (ForestFlow BASIC JSON)", LoadAPI: "POST /ads/pctr/2/gp (GraphPipe)",
		Load: shape{256, 6}, SampleRate: 1, MicroBatchRows: 64, Rounds: 2, Warmup: "1s", Duration: "5s", Target: shadowTarget, CPUs: 2,
		Runs: []shadowRun{run}}
}

func TestShadowPooling(t *testing.T) {
	run := shadowFixture().Runs[0]
	// 200 latencies per kind, two of them slow: the p99 (rank 198) is still base, the max the slow one.
	if run.NoShadow.Phases != 2 || run.NoShadow.Requests != 200 || run.NoShadow.P99 != time.Millisecond || run.NoShadow.Max != 2*time.Millisecond {
		t.Errorf("no shadow pooled %+v", run.NoShadow)
	}
	s := run.Shadow.Server
	if s.ShadowExecutions != 1000 || s.ShadowDropped != 20 || s.Window != 10*time.Second || s.QueueSamples != 100 || s.QueueBusy != 1 ||
		s.ActorP99 != 100*time.Microsecond || s.HTTPP99 != 5*time.Millisecond || math.Abs(s.CPU.Grove-1.5) > 1e-9 || s.ShadowModel != modelPath {
		t.Errorf("shadow pooled server %+v", s)
	}
	if run.Twin.Server.ShadowModel != twinPath {
		t.Errorf("control's shadow model %q", run.Twin.Server.ShadowModel)
	}
	if run.Ratio != 1 || !run.Met || run.TwinRatio != 1 || run.IdleRatio != 1 {
		t.Errorf("ratios %v %v %v %v", run.Ratio, run.Met, run.TwinRatio, run.IdleRatio)
	}
}

func TestShadowMarkdown(t *testing.T) {
	rep := shadowFixture()
	// Make the shadow p99 miss the target: 1 ms alone, 1.25 ms with the
	// load and no shadow, 2 ms with the shadow copies, 1.6 ms in the control.
	run := &rep.Runs[0]
	for i := range run.Phases {
		ph := &run.Phases[i]
		switch ph.Kind {
		case phaseShadow:
			ph.User.Latencies = lats(100, 2*time.Millisecond, 3*time.Millisecond)
		case phaseTwin:
			ph.User.Latencies = lats(100, 1600*time.Microsecond, 3*time.Millisecond)
		case phaseLoad:
			ph.User.Latencies = lats(100, 1250*time.Microsecond, 3*time.Millisecond)
		}
		ph.User.summarize()
	}
	run.finish()
	var out bytes.Buffer
	rep.writeMarkdown(&out)
	s := out.String()
	for _, want := range []string{
		"Shadow load on the user's model (pctr_v1/), one grove process.",
		"its fair router splits it between pctr_v2/ and pctr_v2_b/, and every request is copied to pctr_v1/ as a shadow (sample rate 1, micro-batches of 64 rows",
		"closed loop. Load:",
		"| 1 | 8 | no load | 1 | 20.0 | 1.00 ms | 1.00 ms | 2.00 ms | 0 | ≤ 100 µs | ≤ 5.00 ms | 200 | 100 | 0 | 10% (mean 100.0) | 1.50 | 0.30 | 0.10 | 95% |",
		"| 1 | 8 | **shadow** | all | 20.0 | 2.00 ms | 2.00 ms | 3.00 ms | 0 | ≤ 100 µs | ≤ 5.00 ms | 200 | 100 | 20 | 100% (mean 100.0) |",
		"| 1 | 8 | **control: shadow on twin** | all |",
		"| 1 | 8 | **load, no shadow** | all | 20.0 | 1.25 ms | 1.25 ms |",
		"Reference: the same load on contract ads/pctr/4, the same champions without a shadow.",
		"- Shadow vs no-shadow user p99 at batch 1, c 8, under the same load: 2.00 ms / 1.25 ms = 1.60x (target ≤ 1.50x): MISSED\n",
		"- With the load and its shadow copies vs no load at all, at batch 1, c 8: 2.00 ms / 1.00 ms = 2.00x",
		"p99 1.60 ms = 1.28x the load-only p99; sharing pctr_v1/'s actor with the shadow work: 1.25x on top",
		"- Load at batch 1, c 8, shadow: 1000 shadow executions on pctr_v1/ (100/s), 20 dropped; its queue was non-empty in 100% of samples (mean depth 100.0, max 256): saturated\n",
		"- Load at batch 1, c 8, control: shadow on twin: 1000 shadow executions on pctr_v1_twin/ (100/s), 0 dropped; its queue was non-empty in 50% of samples",
		"NOT saturated",
		"user p50 1.00 ms → 1.25 ms → 2.00 ms → 1.60 ms",
		"round 2 shadow: 3 failed load requests; first: HTTP 500: boom",
	} {
		if !strings.Contains(s, want) {
			t.Errorf("missing %q in\n%s", want, s)
		}
	}
	if rep.errors() != 3 {
		t.Errorf("errors() = %d", rep.errors())
	}
	// Met, paced, failed before any run.
	rep = shadowFixture()
	rep.UserRate = 1000
	out.Reset()
	rep.writeMarkdown(&out)
	if s := out.String(); !strings.Contains(s, "= 1.00x (target ≤ 1.50x): met\n") || !strings.Contains(s, "paced at 1000 req/s in all") {
		t.Errorf("met and paced:\n%s", s)
	}
	rep = &shadowReport{Model: modelPath, Error: "starting grove (shadow): boom"}
	out.Reset()
	rep.writeMarkdown(&out)
	if s := out.String(); !strings.Contains(s, "- Shadow scenario FAILED: starting grove (shadow): boom") || strings.Contains(s, "| user batch") {
		t.Errorf("failed:\n%s", s)
	}
	var none *shadowReport
	out.Reset()
	none.writeMarkdown(&out)
	if out.Len() != 0 || none.errors() != 0 {
		t.Errorf("nil report printed %q", out.String())
	}
}

// TestReportWithShadow checks the shadow section comes after the main table
// and its notes, and that the JSON report carries it.
func TestReportWithShadow(t *testing.T) {
	rep := &report{Duration: "5s", Warmup: "1s"}
	rep.add(scenario{serverGrove, 1, 1}, groveEndpoint("http://g"), loadResult{ReqPerSec: 100, Latencies: make([]time.Duration, 1)})
	rep.Shadow = shadowFixture()
	rep.finish()
	var out bytes.Buffer
	rep.writeMarkdown(&out)
	s := out.String()
	table, shadow := strings.Index(s, "| grove | POST /v1/inference |"), strings.Index(s, "Shadow load on the user's model")
	if table < 0 || shadow < table || strings.Index(s, "- Overhead at batch 1") > shadow {
		t.Errorf("shadow section not after the table and its notes:\n%s", s)
	}
	path := filepath.Join(t.TempDir(), "r.json")
	if err := rep.writeJSON(path); err != nil {
		t.Fatal(err)
	}
	b, _ := os.ReadFile(path)
	for _, want := range []string{`"shadow": {`, `"p99_ratio": 1`, `"phase": "twin"`, `"shadow_model": "pctr_v1_twin/"`, `"other_cores": 0.1`} {
		if !bytes.Contains(b, []byte(want)) {
			t.Errorf("JSON lacks %s", want)
		}
	}
}

// TestRunLoadPaced checks a paced run keeps to its rate.
func TestRunLoadPaced(t *testing.T) {
	var mu sync.Mutex
	var starts []time.Time
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		starts = append(starts, time.Now())
		mu.Unlock()
		w.Write([]byte(`ok`))
	}))
	defer srv.Close()
	spec := loadSpec{url: srv.URL, body: []byte(`{}`), okMarker: []byte(`ok`), batch: 1, conc: 4,
		warmup: 100 * time.Millisecond, duration: 500 * time.Millisecond, timeout: time.Second, rate: 200}
	r := runLoad(context.Background(), spec)
	// 200 req/s for 0.6 s is 120 requests; a closed loop would send thousands.
	if r.Errors != 0 || r.Sent < 100 || r.Sent > 125 || r.ReqPerSec < 170 || r.ReqPerSec > 230 {
		t.Errorf("paced run: sent %d, %.0f req/s, %d errors", r.Sent, r.ReqPerSec, r.Errors)
	}
}
