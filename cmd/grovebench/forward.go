package main

import (
	"context"
	"fmt"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"
)

// forwardBench is the Go benchmark that times the pctr model's forward pass
// in process, with sub-benchmarks for batch 1 and batch 64; deepForwardBench
// the same for the deep ranking model (deepPath).
// idleForwardBench times pctr's batch-1 forward after the thread slept.
const (
	forwardBench     = "BenchmarkForwardPCTR"
	deepForwardBench = "BenchmarkForwardRankDeep"
	idleForwardBench = "BenchmarkForwardPCTRAfterIdle"
)

// forwardResult is the in-process forward time of the benchmark model.
type forwardResult struct {
	// NsPerOp maps batch size (1, 64) to ns/op; missing batches were not found.
	NsPerOp map[int]float64 `json:"ns_per_op,omitempty"`
	// AfterIdleNs is the batch-1 forward's p50 after the thread slept
	// (idleForwardBench, median of the runs); 0 if not measured.
	AfterIdleNs float64 `json:"after_idle_ns,omitempty"`
	// Lines are the benchmark result lines as go test printed them.
	Lines []string `json:"lines,omitempty"`
	// Error says why there is no figure (or not all of them).
	Error string `json:"error,omitempty"`
}

// runForward runs BenchmarkForwardPCTR, BenchmarkForwardPCTRAfterIdle and
// BenchmarkForwardRankDeep of ./servables/torch five times each and keeps
// the medians, so one slow run (another process waking on the 2 CPUs)
// neither flatters nor hides the overhead figures computed from them.
func runForward(ctx context.Context, goBin, root, benchtime string, timeout time.Duration) (pctr, deep forwardResult) {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	out, err := runGo(ctx, goBin, root, "test", "-run", "^$", "-bench", "^("+forwardBench+"|"+idleForwardBench+"|"+deepForwardBench+")$",
		"-benchtime", benchtime, "-count", "5", "-timeout", timeout.String(), "./servables/torch/")
	pctr = checkForward(ctx, forwardBench, string(out), err)
	pctr.AfterIdleNs = parseMetric(string(out), idleForwardBench, "p50-ns/forward")
	return pctr, checkForward(ctx, deepForwardBench, string(out), err)
}

// parseMetric is the median of the values go test -bench printed for unit
// on the lines of bench (without sub-benchmarks); 0 if there are none.
func parseMetric(out, bench, unit string) float64 {
	var vs []float64
	for _, line := range strings.Split(out, "\n") {
		f := strings.Fields(line)
		if len(f) < 4 || procsSuffixRE.ReplaceAllString(f[0], "") != bench {
			continue
		}
		if v, ok := unitValue(f, unit); ok {
			vs = append(vs, v)
		}
	}
	if len(vs) == 0 {
		return 0
	}
	slices.Sort(vs)
	return vs[len(vs)/2]
}

// checkForward parses bench's results out of go test's output and notes
// what is missing.
func checkForward(ctx context.Context, bench, out string, err error) forwardResult {
	res := parseForwardOf(out, bench)
	var problems []string
	if err != nil {
		if ctx.Err() != nil {
			err = fmt.Errorf("%v (%v)", err, ctx.Err())
		}
		problems = append(problems, fmt.Sprintf("go test failed: %v: %s", err, oneLine(tailLines(out, 6))))
	}
	for _, b := range []int{1, 64} {
		if _, ok := res.NsPerOp[b]; !ok && err == nil {
			problems = append(problems, fmt.Sprintf("no %s result for batch %d in the go test output: %s",
				bench, b, oneLine(tailLines(out, 6))))
		}
	}
	res.Error = strings.Join(problems, "; ")
	return res
}

var (
	// procsSuffixRE is the -GOMAXPROCS suffix go test appends to benchmark names.
	procsSuffixRE = regexp.MustCompile(`-[0-9]+$`)
	digitsRE      = regexp.MustCompile(`[0-9]+`)
)

// parseForward picks the ns/op figures for batch 1 and 64 out of go test
// -bench output. It accepts any sub-benchmark naming that carries the batch
// size as a number ("batch=64", "b64", "batch_1", "64", ...): a name holding
// the number 64 is batch 64, else one holding 1 is batch 1; other
// sub-benchmarks are ignored. When a batch appears more than once (-count)
// the median is kept.
func parseForward(out string) forwardResult { return parseForwardOf(out, forwardBench) }

// parseForwardOf is parseForward for the benchmark named bench.
func parseForwardOf(out, bench string) forwardResult {
	var res forwardResult
	seen := map[int][]float64{}
	for _, line := range strings.Split(out, "\n") {
		f := strings.Fields(line)
		if len(f) < 4 || !strings.HasPrefix(f[0], bench+"/") {
			continue
		}
		ns, ok := unitValue(f, "ns/op")
		if !ok {
			continue
		}
		res.Lines = append(res.Lines, strings.Join(f, " "))
		name := strings.TrimPrefix(f[0], bench+"/")
		// Strip the -GOMAXPROCS suffix, unless that leaves no number: with
		// GOMAXPROCS=1 there is no suffix and "batch-64" must stay whole.
		if s := procsSuffixRE.ReplaceAllString(name, ""); digitsRE.MatchString(s) {
			name = s
		}
		batch := 0
		for _, d := range digitsRE.FindAllString(name, -1) {
			switch d {
			case "64":
				batch = 64
			case "1":
				if batch == 0 {
					batch = 1
				}
			}
		}
		if batch != 0 {
			seen[batch] = append(seen[batch], ns)
		}
	}
	for b, vs := range seen {
		slices.Sort(vs)
		if res.NsPerOp == nil {
			res.NsPerOp = map[int]float64{}
		}
		res.NsPerOp[b] = vs[len(vs)/2]
	}
	return res
}

// unitValue is the value go test -bench printed before unit on the result
// line split into fields f ("2000 41234 ns/op 512 B/op" has 41234 for ns/op).
func unitValue(f []string, unit string) (float64, bool) {
	for i := 2; i < len(f); i++ {
		if f[i] == unit {
			v, err := strconv.ParseFloat(f[i-1], 64)
			return v, err == nil
		}
	}
	return 0, false
}

// oneLine joins lines for a one-line note.
func oneLine(s string) string {
	return strings.Join(strings.Fields(strings.ReplaceAll(s, "\n", " | ")), " ")
}
