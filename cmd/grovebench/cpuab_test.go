package main

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// abRowOf is a row of server at conc with one window of the given figures.
func abRowOf(server string, conc int, requests int, cores float64, p50 time.Duration) *abRow {
	r := &abRow{Server: server, API: "POST", Batch: 1, Conc: conc, Window: time.Second}
	r.add(loadResult{Requests: requests, Latencies: []time.Duration{p50}}, cpuUse{Grove: cores, Bench: 0.5}, time.Second)
	r.P50, r.P99 = p50, p50
	return r
}

// The targets are computed from the pooled rows and judged against
// their bounds: each ratio, the CPU per request against 1.5x the floor's
// plus the batched forward per row, the overheads of the two protocols.
func TestCPUABJudgesEachTargetFromThePooledRows(t *testing.T) {
	us := time.Microsecond
	ab := &cpuAB{Rounds: 2, Rows: []*abRow{
		// b1c32: grove 14000 req/s on 1.4 cores = 100 µs; floor 30000 on 1.05 = 35 µs.
		abRowOf(serverGrove, 32, 14000, 1.4, 2*time.Millisecond), abRowOf(serverFloor, 32, 30000, 1.05, time.Millisecond),
		// b1c1: grove 0.86x direct; gRPC 150-(100+20) = 30 µs over its floor, REST 120-(60+20) = 40 µs.
		abRowOf(serverGrove, 1, 8600, 0.9, 120*us), abRowOf(serverDirect, 1, 10000, 0.9, 100*us),
		abRowOf(serverGroveGRPC, 1, 6000, 0.9, 150*us), abRowOf(serverFloor, 1, 15000, 0.5, 60*us), abRowOf(serverFloorGRPC, 1, 9000, 0.5, 100*us),
		// b1c64: rank_deep 4.5x, pctr 1.5x.
		abRowOf(serverGroveDeep, 64, 4500, 1.5, 10*time.Millisecond), abRowOf(serverGroveDeepNoBatch, 64, 1000, 1.5, 60*time.Millisecond),
		abRowOf(serverGrove, 64, 15000, 1.5, 4*time.Millisecond), abRowOf(serverGroveNoBatch, 64, 10000, 1.5, 6*time.Millisecond),
	}}
	ab.find(serverGrove, 64).Counts = &modelCounts{Requests: 15000, Forwards: 3000, Rows: 15000}
	ab.judge(forwardResult{NsPerOp: map[int]float64{1: 20000, 64: 128000}})

	if q := ab.REST; q == nil || q.Ratio != 14000.0/30000 || q.Target != restFloorTarget {
		t.Errorf("REST: %+v", q)
	}
	if c := ab.CPU; c == nil || c.Grove != 100*us || c.Floor != 35*us || c.Forward != 2*us || c.ForwardBatch != 64 || c.Target != 54500*time.Nanosecond {
		t.Errorf("CPU: %+v", c)
	}
	if q := ab.C1; q == nil || q.Ratio != 0.86 {
		t.Errorf("c1: %+v", q)
	}
	if o := ab.Overhead; o == nil || o.GRPC != 30*us || o.REST != 40*us {
		t.Errorf("overheads: %+v", o)
	}
	if q := ab.Deep; q == nil || q.Ratio != 4.5 || q.Target != batchingTarget {
		t.Errorf("rank_deep: %+v", q)
	}
	if q := ab.PCTR; q == nil || q.Ratio != 1.5 || q.Target != 0 || ab.PCTRCounts == nil {
		t.Errorf("pctr: %+v, %+v", q, ab.PCTRCounts)
	}
	lines := ab.lines()
	for i, want := range []string{
		"grove 14000 req/s ÷ floor 30000 req/s = 0.47x (target ≥ 0.70x): MISSED",
		"interleaved: n/a (needs the grove-nethttp and floor servers)",
		"grove 1.40 cores ÷ 14000 req/s = 100 µs; floor 1.05 cores ÷ 30000 req/s = 35.0 µs, × 1.5 + the model's forward per row 2.00 µs (BenchmarkForwardPCTR batch 64 ÷ 64) = 54.5 µs (target: grove ≤ that): MISSED",
		"interleaved: n/a (needs the grove-nethttp and floor servers and their CPU from /proc)",
		"grove 8600 req/s ÷ direct 10000 req/s = 0.86x, p50 120 µs vs 100 µs (target ≥ 0.95x): MISSED",
		"= 30.0 µs; grove REST p50 120 µs - (floor p50 60.0 µs + forward) = 40.0 µs (target: gRPC's ≤ REST's): met",
		"interleaved: grove-nethttp REST n/a (needs the grove-nethttp and floor servers)",
		"grove-deep 4500 req/s ÷ grove-deep-nobatch 1000 req/s = 4.50x (target ≥ 3x): met",
		"= 1.50x (no target: the transport bounds it); grove ran 0.200 forward calls per request and 5.00 rows per forward call",
	} {
		if i >= len(lines) || !strings.Contains(lines[i], want) {
			t.Errorf("line %d lacks %q:\n%s", i, want, strings.Join(lines, "\n"))
		}
	}

	// Without the batched forward the batch-1 one stands in; without
	// either the CPU target is not judged.
	ab.judge(forwardResult{NsPerOp: map[int]float64{1: 20000}})
	if c := ab.CPU; c.Forward != 20*us || c.ForwardBatch != 1 {
		t.Errorf("batch-1 forward: %+v", c)
	}
	ab.judge(forwardResult{})
	if l := ab.lines()[2]; !strings.Contains(l, "n/a (needs BenchmarkForwardPCTR)") || strings.Contains(l, "met") || strings.Contains(l, "MISSED") {
		t.Errorf("no forward: %s", l)
	}

	// Rows that did not run leave their targets n/a.
	ab.Rows = ab.Rows[:2]
	ab.judge(forwardResult{})
	var b bytes.Buffer
	ab.writeMarkdown(&b)
	if n := strings.Count(b.String(), "n/a (needs"); n != 10 {
		t.Errorf("%d targets n/a, want 10 (all but grove's REST at b1c32):\n%s", n, b.String())
	}
	if !strings.Contains(b.String(), "| grove | POST | 1 | 32 | 14000 | 2.00 ms | 2.00 ms | 1.40 | 100 µs | 0.50 | 0.00 |  |  | 14000 | 0 |") {
		t.Errorf("table row:\n%s", b.String())
	}
	(*cpuAB)(nil).writeMarkdown(&b) // no A/B: nothing, no panic
}

// grove-nethttp's lines are comparisons with no verdict, from its own
// rows: its b1c32 req/s and CPU per request against the floor's at conc
// 32, and its b1c1 p50 less the floor's (not floor-grpc's) and the batch-1
// forward, beside grove's, each ending "(no target)" with no target bound
// and no met or MISSED; grove's lines, issue 32's targets, keep theirs.
// Every row has figures of its own, so a ratio taken from grove's row,
// another concurrency's or another floor's comes out different.
func TestCPUABReportsGroveNetHTTPFromItsOwnRowsWithNoVerdict(t *testing.T) {
	us := time.Microsecond
	rows := []*abRow{
		// b1c32: grove 24000 req/s on 1.2 cores = 50 µs; grove-nethttp
		// 14000 on 1.4 = 100 µs; floor 30000 on 1.05 = 35 µs.
		abRowOf(serverGrove, 32, 24000, 1.2, 1300*us), abRowOf(serverGroveNetHTTP, 32, 14000, 1.4, 2*time.Millisecond),
		abRowOf(serverFloor, 32, 30000, 1.05, time.Millisecond),
		// b1c1: grove-nethttp 120-(60+20) = 40 µs over the floor, grove 95-(60+20) = 15 µs.
		abRowOf(serverGrove, 1, 9500, 0.9, 95*us), abRowOf(serverGroveNetHTTP, 1, 8600, 0.9, 120*us), abRowOf(serverDirect, 1, 10000, 0.9, 100*us),
		abRowOf(serverGroveGRPC, 1, 6000, 0.9, 150*us), abRowOf(serverFloor, 1, 15000, 0.5, 60*us), abRowOf(serverFloorGRPC, 1, 9000, 0.5, 100*us),
		// At b1c64, no grove-nethttp line: this row must not be taken for one.
		abRowOf(serverGroveNetHTTP, 64, 1000, 1.9, 50*time.Millisecond),
	}
	ab := &cpuAB{Rounds: 2, Rows: rows}
	ab.judge(forwardResult{NsPerOp: map[int]float64{1: 20000, 64: 128000}})

	if q := ab.RESTNetHTTP; q == nil || q.A != serverGroveNetHTTP || q.B != serverFloor || q.ARate != 14000 || q.BRate != 30000 || q.Ratio != 14000.0/30000 || q.Target != 0 {
		t.Errorf("grove-nethttp REST: %+v", q)
	}
	if c := ab.CPUNetHTTP; c == nil || c.Server != serverGroveNetHTTP || c.GroveCores != 1.4 || c.GroveRate != 14000 || c.Grove != 100*us ||
		c.Floor != 35*us || !c.NoTarget || c.Target != 0 || c.Forward != 0 || c.ForwardBatch != 0 {
		t.Errorf("grove-nethttp CPU: %+v", c)
	}
	if o := ab.OverheadNetHTTP; o == nil || o.NetHTTPP50 != 120*us || o.FloorP50 != 60*us || o.Forward != 20*us || o.NetHTTP != 40*us || o.GroveP50 != 95*us || o.Grove != 15*us {
		t.Errorf("grove-nethttp overhead: %+v", o)
	}
	// grove's own targets are still grove's, and judged.
	if q := ab.REST; q == nil || q.A != serverGrove || q.Ratio != 0.8 || q.Target != restFloorTarget {
		t.Errorf("grove REST: %+v", q)
	}
	if c := ab.CPU; c == nil || c.Server != serverGrove || c.Grove != 50*us || c.NoTarget || c.Target != 54500*time.Nanosecond {
		t.Errorf("grove CPU: %+v", c)
	}
	if o := ab.Overhead; o == nil || o.REST != 15*us || o.GRPC != 30*us {
		t.Errorf("overheads: %+v", o)
	}
	lines := ab.lines()
	for i, want := range []string{
		"REST at batch 1, conc 32, interleaved: grove 24000 req/s ÷ floor 30000 req/s = 0.80x (target ≥ 0.70x): met",
		"REST at batch 1, conc 32, interleaved: grove-nethttp 14000 req/s ÷ floor 30000 req/s = 0.47x (no target)",
		"CPU per request at batch 1, conc 32, interleaved: grove 1.20 cores ÷ 24000 req/s = 50.0 µs; floor 1.05 cores ÷ 30000 req/s = 35.0 µs, × 1.5 + the model's forward per row 2.00 µs (BenchmarkForwardPCTR batch 64 ÷ 64) = 54.5 µs (target: grove ≤ that): met",
		"CPU per request at batch 1, conc 32, interleaved: grove-nethttp 1.40 cores ÷ 14000 req/s = 100 µs; floor 1.05 cores ÷ 30000 req/s = 35.0 µs (no target)",
		"Concurrency 1, interleaved: grove 9500 req/s ÷ direct 10000 req/s = 0.95x",
		"Overhead at concurrency 1, interleaved: grove-grpc p50 150 µs",
		"Overhead at concurrency 1, interleaved: grove-nethttp REST p50 120 µs - (floor p50 60.0 µs + forward 20.0 µs) = 40.0 µs; grove REST p50 95.0 µs - (floor p50 + forward) = 15.0 µs (no target)",
	} {
		if i >= len(lines) || !strings.HasPrefix(lines[i], want) {
			t.Errorf("line %d is not %q:\n%s", i, want, strings.Join(lines, "\n"))
		}
	}
	noVerdict := func(what string, lines []string) {
		t.Helper()
		n := 0
		for _, l := range lines {
			if !strings.Contains(l, serverGroveNetHTTP) {
				continue
			}
			n++
			if strings.Contains(l, "met") || strings.Contains(l, "MISSED") || strings.Contains(l, "target ≥") || strings.Contains(l, "target:") {
				t.Errorf("%s: a grove-nethttp line carries a verdict: %s", what, l)
			}
			if !strings.Contains(l, "n/a") && !strings.HasSuffix(l, "(no target)") {
				t.Errorf("%s: a grove-nethttp line does not end \"(no target)\": %s", what, l)
			}
		}
		if n != 3 {
			t.Errorf("%s: %d grove-nethttp lines, want 3:\n%s", what, n, strings.Join(lines, "\n"))
		}
	}
	noVerdict("all rows", lines)
	// With the forward unmeasured grove's CPU line is n/a, grove-nethttp's
	// the same as with it: it needs no forward.
	ab.judge(forwardResult{})
	if l := ab.lines()[3]; l != lines[3] {
		t.Errorf("grove-nethttp CPU without the forward: %s", l)
	}

	// grove-nethttp and the floor alone: grove's targets are n/a,
	// grove-nethttp's figures reported without a verdict, and the overhead
	// line says grove's row is missing.
	ab.Rows = []*abRow{rows[1], rows[2], rows[4], rows[7]}
	ab.judge(forwardResult{NsPerOp: map[int]float64{1: 20000}})
	if ab.REST != nil || ab.CPU != nil || ab.RESTNetHTTP == nil || ab.RESTNetHTTP.Ratio != 14000.0/30000 || ab.CPUNetHTTP == nil || !ab.CPUNetHTTP.NoTarget {
		t.Errorf("grove-nethttp alone: REST %+v, CPU %+v, grove-nethttp REST %+v, CPU %+v", ab.REST, ab.CPU, ab.RESTNetHTTP, ab.CPUNetHTTP)
	}
	lines = ab.lines()
	for i, want := range map[int]string{
		0: "REST at batch 1, conc 32, interleaved: n/a (needs the grove and floor servers)",
		1: "REST at batch 1, conc 32, interleaved: grove-nethttp 14000 req/s ÷ floor 30000 req/s = 0.47x (no target)",
		2: "CPU per request at batch 1, conc 32, interleaved: n/a (needs the grove and floor servers and their CPU from /proc)",
		3: "CPU per request at batch 1, conc 32, interleaved: grove-nethttp 1.40 cores ÷ 14000 req/s = 100 µs; floor 1.05 cores ÷ 30000 req/s = 35.0 µs (no target)",
		6: "Overhead at concurrency 1, interleaved: grove-nethttp REST p50 120 µs - (floor p50 60.0 µs + forward 20.0 µs) = 40.0 µs; grove REST n/a (needs the grove server) (no target)",
	} {
		if i >= len(lines) || lines[i] != want {
			t.Errorf("grove-nethttp alone, line %d is not %q:\n%s", i, want, strings.Join(lines, "\n"))
		}
	}
	noVerdict("grove-nethttp alone", lines)

	// Without grove-nethttp's rows its lines are n/a and grove's unchanged.
	ab.Rows = []*abRow{rows[0], rows[2], rows[3], rows[7]}
	ab.judge(forwardResult{})
	if ab.RESTNetHTTP != nil || ab.CPUNetHTTP != nil || ab.OverheadNetHTTP != nil || ab.REST == nil {
		t.Errorf("no grove-nethttp: %+v, %+v, %+v", ab.RESTNetHTTP, ab.CPUNetHTTP, ab.OverheadNetHTTP)
	}
	lines = ab.lines()
	for i, want := range map[int]string{
		0: "REST at batch 1, conc 32, interleaved: grove 24000 req/s ÷ floor 30000 req/s = 0.80x (target ≥ 0.70x): met",
		1: "REST at batch 1, conc 32, interleaved: n/a (needs the grove-nethttp and floor servers)",
		3: "CPU per request at batch 1, conc 32, interleaved: n/a (needs the grove-nethttp and floor servers and their CPU from /proc)",
		6: "Overhead at concurrency 1, interleaved: grove-nethttp REST n/a (needs the grove-nethttp and floor servers)",
	} {
		if i >= len(lines) || lines[i] != want {
			t.Errorf("no grove-nethttp, line %d is not %q:\n%s", i, want, strings.Join(lines, "\n"))
		}
	}
}

// The TLS + token and prediction log lines are grove-tls's and
// grove+log's pooled b1c32 req/s over grove's, each judged against 0.90
// (met at 0.90 itself), with the CPU per request of each beside it, in
// the JSON and the markdown. Every row has figures of its own, so a ratio
// taken from the floor's, grove-nethttp's or another concurrency's
// grove row comes out different.
func TestCPUABJudgesTLSAndPredictionLogFromTheirOwnRowsAgainstNinetyPercentOfGrove(t *testing.T) {
	us := time.Microsecond
	mk := func(tlsRate, logRate int) *cpuAB {
		ab := &cpuAB{Rounds: 2, Rows: []*abRow{
			// grove 24000 req/s on 1.2 cores = 50 µs per request.
			abRowOf(serverGrove, 32, 24000, 1.2, 1300*us), abRowOf(serverGroveNetHTTP, 32, 14000, 1.4, 2*time.Millisecond),
			// grove+log and grove-tls on 1.5 cores.
			abRowOf(serverGroveLog, 32, logRate, 1.5, 1500*us), abRowOf(serverGroveTLS, 32, tlsRate, 1.5, 1400*us),
			abRowOf(serverFloor, 32, 30000, 1.05, time.Millisecond),
			abRowOf(serverGrove, 1, 9500, 0.9, 95*us), abRowOf(serverGrove, 64, 15000, 1.5, 4*time.Millisecond),
		}}
		ab.judge(forwardResult{NsPerOp: map[int]float64{1: 20000, 64: 128000}})
		return ab
	}
	// grove-tls 0.95x met, grove+log 0.85x MISSED.
	ab := mk(22800, 20400)
	if q := ab.TLS; q == nil || q.A != serverGroveTLS || q.B != serverGrove || q.ARate != 22800 || q.BRate != 24000 || q.Ratio != 0.95 ||
		q.Target != 0.90 || q.ACPU != 65789*time.Nanosecond || q.BCPU != 50*us {
		t.Errorf("TLS: %+v", q)
	}
	if q := ab.PredLog; q == nil || q.A != serverGroveLog || q.B != serverGrove || q.ARate != 20400 || q.BRate != 24000 || q.Ratio != 0.85 ||
		q.Target != 0.90 || q.ACPU != 73529*time.Nanosecond || q.BCPU != 50*us {
		t.Errorf("prediction log: %+v", q)
	}
	lines := ab.lines()
	wantTLS := "TLS + token vs plain at batch 1, conc 32, interleaved: grove-tls 22800 req/s ÷ grove 24000 req/s = 0.95x, CPU per request 65.8 µs vs 50.0 µs (target ≥ 0.90x): met"
	wantLog := "Prediction log FULL vs NONE at batch 1, conc 32, interleaved: grove+log 20400 req/s ÷ grove 24000 req/s = 0.85x, CPU per request 73.5 µs vs 50.0 µs (target ≥ 0.90x): MISSED"
	if n := len(lines); n < 2 || lines[n-2] != wantTLS || lines[n-1] != wantLog {
		t.Errorf("last two lines are not\n%s\n%s\n:\n%s", wantTLS, wantLog, strings.Join(lines, "\n"))
	}
	t.Logf("judged lines from a fake pooled result:\n%s\n%s", lines[len(lines)-2], lines[len(lines)-1])
	var b bytes.Buffer
	ab.writeMarkdown(&b)
	for _, want := range []string{"- " + wantTLS + "\n", "- " + wantLog + "\n",
		"| grove TLS+token | POST | 1 | 32 | 22800 |", "| grove+log FULL | POST | 1 | 32 | 20400 |"} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("markdown lacks %q:\n%s", want, b.String())
		}
	}
	js, err := json.Marshal(ab)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{`"tls_b1c32":{"A":"grove-tls","B":"grove","ARate":22800,"BRate":24000,"Ratio":0.95,"Target":0.9,"ACPU":65789,"BCPU":50000}`,
		`"prediction_log_b1c32":{"A":"grove+log","B":"grove","ARate":20400,"BRate":24000,"Ratio":0.85,"Target":0.9,"ACPU":73529,"BCPU":50000}`} {
		if !strings.Contains(string(js), want) {
			t.Errorf("JSON lacks %s:\n%s", want, js)
		}
	}

	// grove-tls 0.85x MISSED, grove+log at 0.90x exactly: met.
	lines = mk(20400, 21600).lines()
	for i, want := range []string{
		"TLS + token vs plain at batch 1, conc 32, interleaved: grove-tls 20400 req/s ÷ grove 24000 req/s = 0.85x, CPU per request 73.5 µs vs 50.0 µs (target ≥ 0.90x): MISSED",
		"Prediction log FULL vs NONE at batch 1, conc 32, interleaved: grove+log 21600 req/s ÷ grove 24000 req/s = 0.90x, CPU per request 69.4 µs vs 50.0 µs (target ≥ 0.90x): met",
	} {
		if l := lines[len(lines)-2+i]; l != want {
			t.Errorf("got  %s\nwant %s", l, want)
		}
	}

	// Without the server's CPU from /proc the ratio is still judged.
	ab = mk(22800, 20400)
	for _, r := range ab.Rows {
		r.ServerCPU = 0
	}
	ab.judge(forwardResult{})
	if l := ab.lines()[len(ab.lines())-2]; !strings.HasSuffix(l, "= 0.95x, CPU per request n/a vs n/a (target ≥ 0.90x): met") {
		t.Errorf("no CPU: %s", l)
	}
}

// A missing row leaves the TLS + token or prediction log line n/a, naming
// the servers it needs, with no verdict; plain grove's row at another
// concurrency does not stand in.
func TestCPUABTLSAndPredictionLogLinesAreNAWithoutTheirRows(t *testing.T) {
	us := time.Microsecond
	g32, tls32, log32 := abRowOf(serverGrove, 32, 24000, 1.2, 1300*us), abRowOf(serverGroveTLS, 32, 22800, 1.5, 1400*us), abRowOf(serverGroveLog, 32, 20400, 1.5, 1500*us)
	g1 := abRowOf(serverGrove, 1, 9500, 0.9, 95*us)
	naTLS := "TLS + token vs plain at batch 1, conc 32, interleaved: n/a (needs the grove-tls and grove servers)"
	naLog := "Prediction log FULL vs NONE at batch 1, conc 32, interleaved: n/a (needs the grove+log and grove servers)"
	for _, tc := range []struct {
		name     string
		rows     []*abRow
		tls, log bool // judged
	}{
		{"no grove-tls", []*abRow{g32, log32}, false, true},
		{"no grove+log", []*abRow{g32, tls32}, true, false},
		{"no grove at conc 32", []*abRow{g1, tls32, log32}, false, false},
	} {
		ab := &cpuAB{Rounds: 2, Rows: tc.rows}
		ab.judge(forwardResult{})
		if (ab.TLS != nil) != tc.tls || (ab.PredLog != nil) != tc.log {
			t.Errorf("%s: TLS %+v, prediction log %+v", tc.name, ab.TLS, ab.PredLog)
		}
		lines := ab.lines()
		tlsLine, logLine := lines[len(lines)-2], lines[len(lines)-1]
		if (tlsLine == naTLS) == tc.tls || (logLine == naLog) == tc.log {
			t.Errorf("%s:\n%s\n%s", tc.name, tlsLine, logLine)
		}
		for _, l := range []string{tlsLine, logLine} {
			if strings.Contains(l, "n/a (needs") && (strings.Contains(l, "met") || strings.Contains(l, "MISSED")) {
				t.Errorf("%s: an n/a line carries a verdict: %s", tc.name, l)
			}
		}
	}
}

// grove-nethttp runs in the b1c32 and b1c1 groups, after grove, with its
// forward calls counted like grove's, and --http-engine net/http follows
// --grove-args.
func TestGroveNetHTTPIsInTheB1C32AndB1C1GroupsAndStartsOnNetHTTP(t *testing.T) {
	var in []string
	for _, g := range cpuABGroups {
		for i, d := range g.rows {
			if d.server == serverGroveNetHTTP {
				in = append(in, fmt.Sprintf("%s c%d after %s", g.name, d.conc, g.rows[i-1].server))
			}
		}
	}
	if want := []string{"b1c32 c32 after grove", "b1c1 c1 after grove"}; !slices.Equal(in, want) {
		t.Errorf("grove-nethttp in the groups: %q, want %q", in, want)
	}
	if countedModel(serverGroveNetHTTP) != grpcModel {
		t.Errorf("grove-nethttp's forward calls are not counted")
	}
	groveArgs := []string{"--max-batch-rows", "8", "--http-engine", "h1"}
	if got := netHTTPArgs(groveArgs); !slices.Equal(got, []string{"--max-batch-rows", "8", "--http-engine", "h1", "--http-engine", "net/http"}) || len(groveArgs) != 4 {
		t.Errorf("netHTTPArgs: %q (--grove-args now %q)", got, groveArgs)
	}
	if got := netHTTPArgs(nil); !slices.Equal(got, []string{"--http-engine", "net/http"}) {
		t.Errorf("netHTTPArgs(nil): %q", got)
	}
}

// fakeGrove answers POST /v1/inference after delay and counts one forward
// call per batch requests in the OIP statistics of pctr_v1.
func fakeGrove(t *testing.T, delay time.Duration, batch int64) *httptest.Server {
	var n atomic.Int64
	s := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodGet && r.URL.Path == "/v2/models/"+grpcModel+"/stats" {
			k := n.Load()
			fmt.Fprintf(w, `{"model_stats":[{"name":%q,"inference_count":%d,"execution_count":%d,"inference_stats":{"success":{"count":%d,"ns":0},"compute_infer":{"count":%d,"ns":%d}}}]}`,
				grpcModel, k, k/batch, k, k, k*1000)
			return
		}
		_, _ = io.Copy(io.Discard, r.Body)
		time.Sleep(delay)
		n.Add(1)
		_, _ = w.Write(floorAnswer)
	}))
	t.Cleanup(s.Close)
	return s
}

// runCPUAB interleaves the rows of every group whose servers run, pools
// them, and counts grove's forward calls from its statistics: the REST
// ratio is grove's pooled req/s over the floor's, and a grove that
// batches four requests per forward call is reported so.
func TestRunCPUABPoolsTheRowsThatRanAndCountsForwardCalls(t *testing.T) {
	g := groveEndpoint(fakeGrove(t, 2*time.Millisecond, 4).URL)
	f := groveEndpointFor(serverFloor, fakeGrove(t, time.Millisecond, 1).URL)
	targets := map[string]*endpoint{serverGrove: g, serverFloor: f}
	o := options{cpuABRounds: 1, timeout: 5 * time.Second}
	ab := runCPUAB(context.Background(), targets, make([]float64, 64), o, func(string, ...any) {})
	if ab == nil || ab.Error != "" {
		t.Fatalf("A/B %+v", ab)
	}
	// b1c32 and b1c1 have both servers; b1c64 has only grove: not run.
	if len(ab.Rows) != 4 || ab.find(serverGrove, 64) != nil {
		t.Fatalf("rows: %d, want grove and floor at c 32 and c 1", len(ab.Rows))
	}
	for _, r := range ab.Rows {
		if r.Requests == 0 || r.Errors != 0 || r.Windows != 1 || r.P50 == 0 {
			t.Fatalf("row %s c %d: %+v", r.Server, r.Conc, r.abPool)
		}
		if c := r.Counts; r.Server == serverGrove && (c == nil || c.Requests < int64(r.Requests) || c.rowsPerForward() < 3.5 || c.rowsPerForward() > 4.5) {
			t.Errorf("grove c %d counts %+v for %d requests: want about 4 rows per forward call", r.Conc, c, r.Requests)
		}
	}
	ab.judge(forwardResult{})
	if q := ab.C1; q != nil {
		t.Errorf("c1 ratio without the direct server: %+v", q)
	}
	// The ratio is the pooled rows' (the servers' sleeps only set it near
	// 0.5 on an idle machine, so the test does not time it).
	g32, f32 := ab.find(serverGrove, 32), ab.find(serverFloor, 32)
	if q := ab.REST; q == nil || q.A != serverGrove || q.B != serverFloor || q.Ratio != g32.rate()/f32.rate() || q.Ratio <= 0 {
		t.Errorf("REST ratio %+v, want grove's pooled b1c32 req/s over the floor's", q)
	}
	if ab := runCPUAB(context.Background(), map[string]*endpoint{serverGrove: g}, make([]float64, 64), o, func(string, ...any) {}); ab != nil {
		t.Errorf("grove alone: %+v, want no A/B", ab)
	}
}

// The overload A/B judges the run at 2x: goodput over the interleaved
// capacity and the p99 of the successful answers, and shows the capped
// run and the load generator's CPU beside it.
func TestOverloadABJudgesGoodputAndP99AndShowsTheCappedRun(t *testing.T) {
	ms := time.Millisecond
	lats := func(n int, d time.Duration) []time.Duration {
		out := make([]time.Duration, n)
		for i := range out {
			out[i] = d
		}
		return out
	}
	mk := func(within, late int) *overloadAB {
		ab := &overloadAB{Rounds: 1, Window: time.Second,
			Runs: []overloadABRun{{Factor: overloadFactor, Offered: 2000}, {Factor: overloadCappedFactor, Offered: 1500}}}
		ab.Capacity.add(loadResult{Requests: 1000, Latencies: lats(1000, 5*ms)}, cpuUse{Grove: 1.2, Bench: 0.4}, time.Second)
		r := &ab.Runs[0]
		res := loadResult{Requests: within + late, Errors: 900, Latencies: append(lats(within, 10*ms), lats(late, 80*ms)...),
			Failures: map[string]int{"HTTP 504": 830, "HTTP 429": 50, "transport": 20}}
		r.add(res, cpuUse{Grove: 1.1, Bench: 0.8}, time.Second)
		r.Good, r.Expired, r.Late, r.Refused = countWithin(res.Latencies, overloadDeadline), 800, 30, 50
		q := &ab.Runs[1]
		q.add(loadResult{Requests: 980, Latencies: lats(980, 9*ms)}, cpuUse{Grove: 1.3, Bench: 0.6}, time.Second)
		q.Good = 980
		ab.judge()
		return ab
	}
	met, missed := mk(950, 0), mk(850, 20)
	if !met.Met || met.Runs[0].Ratio != 0.95 || met.Runs[0].P99 != 10*ms || met.Runs[1].Ratio != 0.98 {
		t.Errorf("met: %+v", met.Runs)
	}
	if missed.Met || missed.Runs[0].Ratio != 0.85 || missed.Runs[0].P99 != 80*ms {
		t.Errorf("missed: %+v", missed.Runs[0])
	}
	var b bytes.Buffer
	met.writeMarkdown(&b)
	s := b.String()
	for _, want := range []string{
		// 900 failures: 800 expired, 30 ran late, 50 refused, 20 others.
		"| 2.0x, Grove-Timeout 50ms | 2000 | 950 | 950 | 0.95 | 10.0 ms | 10.0 ms | 800 | 30 | 50 | 20 | 1.10 | 0.80 | 0.00 |",
		"| 1.5x, Grove-Timeout 50ms (load generator capped) | 1500 | 980 |",
		"goodput 950/s = 0.95 of the interleaved capacity 1000/s (target ≥ 0.90) and p99 of the successful answers 10.0 ms (target ≤ 50ms): met; the load generator kept 0.80 cores busy, grove 1.10",
		"with the load generator capped at 1.5x: goodput 0.98 of the capacity, p99 9.00 ms, load generator 0.60 cores, grove 1.30",
		"- Failed requests of the 2.0x run, as the load generator saw them: HTTP 504 ×830, HTTP 429 ×50, transport ×20",
	} {
		if !strings.Contains(s, want) {
			t.Errorf("missing %q in\n%s", want, s)
		}
	}
	b.Reset()
	missed.writeMarkdown(&b)
	if !strings.Contains(b.String(), "MISSED") {
		t.Errorf("missed:\n%s", b.String())
	}
	b.Reset()
	(&overloadAB{Error: "requests still in flight"}).writeMarkdown(&b)
	(*overloadAB)(nil).writeMarkdown(&b)
	if !strings.Contains(b.String(), "FAILED: requests still in flight") {
		t.Errorf("failed:\n%s", b.String())
	}
}

// --cpu-ab-rounds is on by default and refuses a negative count.
func TestCPUABRoundsFlag(t *testing.T) {
	if o, err := parseFlags(nil, io.Discard); err != nil || o.cpuABRounds < 1 {
		t.Errorf("default: %d, %v", o.cpuABRounds, err)
	}
	if o, err := parseFlags([]string{"--cpu-ab-rounds", "0"}, io.Discard); err != nil || o.cpuABRounds != 0 {
		t.Errorf("0: %d, %v", o.cpuABRounds, err)
	}
	if _, err := parseFlags([]string{"--cpu-ab-rounds", "-1"}, io.Discard); err == nil || !strings.Contains(err.Error(), "--cpu-ab-rounds") {
		t.Errorf("-1: %v", err)
	}
}

// grove+log and grove-tls run in the b1c32 group only, at conc 32, after
// grove-nethttp and before the floor; the default scenarios start both
// servers, so a run with no flags measures them there. Their forward
// calls are not counted (no statistics request goes to grove-tls over
// plain HTTP), and the A/B's load (scenarioSpec) carries an endpoint's
// TLS configuration and token header, as the scenario rows' does.
func TestGroveTLSAndGroveLogAreInTheB1C32GroupAndTheDefaultRun(t *testing.T) {
	var in []string
	for _, g := range cpuABGroups {
		for _, d := range g.rows {
			if d.server == serverGroveTLS || d.server == serverGroveLog {
				in = append(in, fmt.Sprintf("%s %s c%d", g.name, d.server, d.conc))
			}
		}
	}
	if want := []string{"b1c32 grove+log c32", "b1c32 grove-tls c32"}; !slices.Equal(in, want) {
		t.Errorf("grove+log and grove-tls in the groups: %q, want %q", in, want)
	}
	o, err := parseFlags(nil, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range []string{serverGroveLog, serverGroveTLS} {
		if !slices.Contains(o.scenarios, scenario{s, 1, 32}) {
			t.Errorf("the default scenarios lack %s/b1c32: %v", s, o.scenarios)
		}
		if m := countedModel(s); m != "" {
			t.Errorf("%s's forward calls counted on %q", s, m)
		}
	}
	ep := groveEndpointFor(serverGroveTLS, "https://127.0.0.1:1")
	ep.tlsConf, ep.headers = &tls.Config{MinVersion: tls.VersionTLS12}, []string{"Authorization: Bearer t"}
	spec := scenarioSpec(ep, make([]float64, 64), 1, 32, cpuABWindow/4, cpuABWindow, options{timeout: time.Second})
	if spec.url != "https://127.0.0.1:1/v1/inference" || spec.tlsConf != ep.tlsConf || !slices.Equal(spec.headers, ep.headers) {
		t.Errorf("the A/B's load for grove-tls: url %s, TLS %p (want %p), headers %q", spec.url, spec.tlsConf, ep.tlsConf, spec.headers)
	}
}

// fakeGroveLog is a grove+log whose prediction log delivers at most 200
// events per GET /v1/status: its events stay buffered until grovebench
// polls them out.
type fakeGroveLog struct {
	mu                  sync.Mutex
	requests, delivered int64
}

// pending is the events not yet delivered.
func (f *fakeGroveLog) pending() int64 {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.requests - f.delivered
}

func (f *fakeGroveLog) serve(t *testing.T, delay time.Duration) *httptest.Server {
	s := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodGet && r.URL.Path == "/v1/status" {
			f.mu.Lock()
			f.delivered += min(f.requests-f.delivered, 200)
			fmt.Fprintf(w, `{"prediction_log":{"buffered":%d,"delivered":%d}}`, f.requests-f.delivered, f.delivered)
			f.mu.Unlock()
			return
		}
		_, _ = io.Copy(io.Discard, r.Body)
		time.Sleep(delay)
		f.mu.Lock()
		f.requests++
		f.mu.Unlock()
		_, _ = w.Write(floorAnswer)
	}))
	t.Cleanup(s.Close)
	return s
}

// runCPUAB loads grove-tls over TLS with its bearer token, and waits
// after each grove+log window until its prediction log has delivered the
// window's events, so that grove-tls's window, next in the round, starts
// with none of them left to deliver.
func TestRunCPUABLoadsGroveTLSWithItsTokenAndDrainsGroveLogBetweenWindows(t *testing.T) {
	const delay = 50 * time.Millisecond // light: 640 req/s at conc 32
	var logFake fakeGroveLog
	var early, unauthorized atomic.Int64
	tlsSrv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") != "Bearer t" {
			unauthorized.Add(1)
			http.Error(w, `{"error_type":"unauthenticated"}`, http.StatusUnauthorized)
			return
		}
		if logFake.pending() > 0 {
			early.Add(1)
		}
		_, _ = io.Copy(io.Discard, r.Body)
		time.Sleep(delay)
		_, _ = w.Write(floorAnswer)
	}))
	t.Cleanup(tlsSrv.Close)
	roots := x509.NewCertPool()
	roots.AddCert(tlsSrv.Certificate())
	tep := groveEndpointFor(serverGroveTLS, tlsSrv.URL)
	tep.tlsConf, tep.headers = &tls.Config{RootCAs: roots, NextProtos: []string{"http/1.1"}}, []string{"Authorization: Bearer t"}
	targets := map[string]*endpoint{
		serverGrove:    groveEndpoint(fakeGrove(t, delay, 1).URL),
		serverGroveLog: groveEndpointFor(serverGroveLog, logFake.serve(t, delay).URL),
		serverGroveTLS: tep,
	}
	// One round: grove, grove+log, grove-tls (the group's order).
	ab := runCPUAB(context.Background(), targets, make([]float64, 64), options{cpuABRounds: 1, timeout: 5 * time.Second}, func(string, ...any) {})
	if ab == nil || ab.Error != "" {
		t.Fatalf("A/B %+v", ab)
	}
	for _, s := range []string{serverGrove, serverGroveLog, serverGroveTLS} {
		if r := ab.find(s, 32); r == nil || r.Requests == 0 || r.Errors != 0 {
			t.Errorf("%s's row: %+v", s, r)
		}
	}
	if n := unauthorized.Load(); n > 0 {
		t.Errorf("%d requests to grove-tls without its token", n)
	}
	if n, p := early.Load(), logFake.pending(); n > 0 || p > 0 {
		t.Errorf("%d grove-tls requests came while grove+log had events to deliver (%d left at the end)", n, p)
	}
}
