package main

import (
	"math"
	"strings"
	"testing"
	"time"

	"github.com/groveml/grove/conf/bucket"
)

func TestModelChecksumIsGrovesForOneFile(t *testing.T) {
	data := []byte("model bytes")
	want, err := bucket.Checksum(map[string][]byte{"model.pt": data})
	if err != nil {
		t.Fatal(err)
	}
	if got := modelChecksum(data); got != want {
		t.Errorf("modelChecksum = %s, grove's checksum %s", got, want)
	}
}

func TestParseRSS(t *testing.T) {
	status := "Name:\tgrove\nVmPeak:\t  999 kB\nVmRSS:\t  230612 kB\nRssAnon:\t 1 kB\n"
	if got, err := parseRSS([]byte(status)); err != nil || got != 230612<<10 {
		t.Errorf("parseRSS = %d, %v", got, err)
	}
	for _, bad := range []string{"Name:\tx\n", "VmRSS:\t12 MB\n", "VmRSS:\tx kB\n"} {
		if _, err := parseRSS([]byte(bad)); err == nil {
			t.Errorf("parseRSS(%q) accepted", bad)
		}
	}
}

func TestSplitLifecycleSpec(t *testing.T) {
	rest, swap, memory, overload, churn := splitLifecycleSpec("b1c1, Swap,shadow,memory,overload,Churn")
	if rest != "b1c1,shadow" || !swap || !memory || !overload || !churn {
		t.Errorf("got %q %v %v %v %v", rest, swap, memory, overload, churn)
	}
	if _, swap, memory, overload, churn := splitLifecycleSpec("b1c1"); swap || memory || overload || churn {
		t.Error("b1c1 asked for a lifecycle scenario")
	}
}

func TestLifecycleMarkdown(t *testing.T) {
	ms := time.Millisecond
	sw := &swapReport{Batch: 1, Conc: 32, Steady: loadResult{ReqPerSec: 1000, P50: ms, P99: 4 * ms, Max: 9 * ms},
		Swap: loadResult{ReqPerSec: 900, P50: ms, P99: 14 * ms, Max: 30 * ms, Errors: 2, FirstError: "HTTP 503"}, Swaps: 3,
		SwapTimes: []time.Duration{100 * ms, 600 * ms, 120 * ms}, Ratio: 3.5}
	mem := &memoryReport{Requests: 1000, Warmup: 10, RSSWarm: 100 << 20, RSSEnd: 110 << 20, RSSMax: 111 << 20, Growth: 0.1,
		Load:     loadResult{Sent: 1000},
		PerModel: []perModel{{Runtime: "onnx", Copies: 8, FileBytes: 1 << 20, Before: 100 << 20, After: 108 << 20, PerCopy: 1 << 20, Limit: 7 << 20, Met: true}}}
	var out strings.Builder
	sw.writeMarkdown(&out)
	mem.writeMarkdown(&out)
	for _, want := range []string{
		"| swapping | 900 | 1.00 ms | 14.0 ms | 30.0 ms | 2 | 3 |",
		"- Hot swap: 3 swaps (config write to new content serving: 100 ms, 600 ms, 120 ms), 2 failed requests, p99 14.0 ms during the swaps = 3.50x the steady 4.00 ms (target: 0 failed, ≤ 3x): MISSED",
		"- Hot swap: first failure: HTTP 503",
		"100.0 MiB → 110.0 MiB (+10.0%), max 111.0 MiB; 0 failed",
		"(target: growth ≤ 5%): MISSED",
		"- RSS per extra onnx model: 8 copies of a 1.0 MiB file took RSS 100.0 MiB → 108.0 MiB, 1.0 MiB each (target ≤ 2x file + 5 MiB = 7.0 MiB): met",
	} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("missing %q in\n%s", want, out.String())
		}
	}
}

func TestFitLineRecoversSlopeAndSpread(t *testing.T) {
	xs := []float64{1, 2, 3, 4, 5, 6}
	ys := make([]float64, len(xs))
	for i, x := range xs {
		ys[i] = 100 + 3*x
	}
	ys[2] += 1 // one point off the line gives a spread
	f, ok := fitLine(xs, ys)
	if !ok || f.N != 6 {
		t.Fatalf("fitLine: ok %v, n %d", ok, f.N)
	}
	if math.Abs(f.Slope-3) > 0.2 || f.ResidSD <= 0 || f.SlopeSE <= 0 {
		t.Errorf("fit %+v: want slope near 3 and a positive spread", f)
	}
	if _, ok := fitLine([]float64{1, 1, 1}, []float64{1, 2, 3}); ok {
		t.Error("fitLine fitted points with one x")
	}
	if _, ok := fitLine([]float64{1, 2}, []float64{1, 2}); ok {
		t.Error("fitLine fitted two points")
	}
}

func TestFitChurnLeavesOutWarmupUpdates(t *testing.T) {
	var ss []churnSample
	for n := 1; n <= 10; n++ {
		rss := int64(1000 * n) // grows 1000 a update during the warm-up
		if n > 4 {
			rss = 4000 + 10*int64(n-4) // then 10 a update
		}
		ss = append(ss, churnSample{Update: n, RSS: rss, GoSys: 50, GoReleased: 10, CInuse: 7 * int64(n), CFree: 100})
	}
	f, ok := fitChurn(ss, 4)
	if !ok || f.RSS.N != 6 || math.Abs(f.RSS.Slope-10) > 1e-6 || math.Abs(f.NonGo.Slope-10) > 1e-6 ||
		math.Abs(f.CInuse.Slope-7) > 1e-6 || math.Abs(f.CFree.Slope) > 1e-6 {
		t.Errorf("fitChurn: ok %v, fits %+v", ok, f)
	}
	r := churnReport{Fits: f}
	if !r.flat() {
		t.Error("10 bytes per update is not flat")
	}
	if _, ok := fitChurn(ss, 9); ok {
		t.Error("fitChurn fitted one sample after the warm-up")
	}
}

func TestParseChurnRuntimes(t *testing.T) {
	got, err := parseChurnRuntimes(" ONNX,torchscript")
	if err != nil || !got[churnONNX] || !got[churnTorch] {
		t.Errorf("got %v, %v", got, err)
	}
	for _, bad := range []string{"", "tf", "onnx,tf"} {
		if _, err := parseChurnRuntimes(bad); err == nil {
			t.Errorf("%q: no error", bad)
		}
	}
}

func TestSplitOnDemandSpecTakesOnDemandOut(t *testing.T) {
	if rest, on := splitOnDemandSpec("b1c1,OnDemand,swap"); !on || rest != "b1c1,swap" {
		t.Errorf("got %q %v", rest, on)
	}
	if _, on := splitOnDemandSpec("b1c1,swap"); on {
		t.Error("ondemand found where none is")
	}
}

func TestChurnVerdictHoldsWithinBothBoundsOnly(t *testing.T) {
	alone := loadResult{P50: 400 * time.Microsecond, P99: 2 * time.Millisecond}
	for _, c := range []struct {
		p50, p99 time.Duration
		ok       bool
	}{
		{400 * time.Microsecond, 2 * time.Millisecond, true},
		{440 * time.Microsecond, 2500 * time.Microsecond, true},  // at both bounds
		{460 * time.Microsecond, 2 * time.Millisecond, false},    // p50 15 % slower
		{400 * time.Microsecond, 2600 * time.Microsecond, false}, // p99 30 % slower
	} {
		p50, p99, ok := churnVerdict(alone.P50, alone.P99, c.p50, c.p99)
		if ok != c.ok || p50 != float64(c.p50)/float64(alone.P50) || p99 != float64(c.p99)/float64(alone.P99) {
			t.Errorf("churn p50 %v p99 %v: x%.2f x%.2f %v, want %v", c.p50, c.p99, p50, p99, ok, c.ok)
		}
	}
	if _, _, ok := churnVerdict(0, 0, alone.P50, alone.P99); ok {
		t.Error("a verdict was met without a measure alone")
	}
	if _, _, ok := churnVerdict(alone.P50, alone.P99, 0, 0); ok {
		t.Error("a verdict was met without a measure with churn")
	}
}
