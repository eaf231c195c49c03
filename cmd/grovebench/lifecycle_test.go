package main

import (
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
	rest, swap, memory, overload := splitLifecycleSpec("b1c1, Swap,shadow,memory,overload")
	if rest != "b1c1,shadow" || !swap || !memory || !overload {
		t.Errorf("got %q %v %v %v", rest, swap, memory, overload)
	}
	if _, swap, memory, overload := splitLifecycleSpec("b1c1"); swap || memory || overload {
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
