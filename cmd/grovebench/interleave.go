package main

// Interleaved A/B measurements. The scenario rows run one after the other
// for seconds each, and on a shared 2-core machine the background load
// moves one row's figures by 10-20 % from one to the next, so a ratio of
// two scenario rows compares two different machines. An A/B instead runs
// a short window of each of its rows in turn, for several rounds, the
// order rotating each round, and pools each row's windows (requests,
// latencies, CPU): the rows of a ratio then saw the same background load.
// The forwarding A/B (cluster.go), the evaluator's (evalab.go), the
// hot-path targets' (cpuab.go) and the overload A/B (overload.go) run on
// these.

import (
	"context"
	"math"
	"slices"
	"time"
)

// interleave calls step with each of the rows 0..n-1 in turn, for rounds
// rounds; round r starts at row r mod n, so every row runs in every
// position of a round. It stops early, returning the error, when step
// fails or ctx ends.
func interleave(ctx context.Context, rounds, n int, step func(row int) error) error {
	for round := range rounds {
		for k := range n {
			if err := step((round + k) % n); err != nil {
				return err
			}
			if err := ctx.Err(); err != nil {
				return err
			}
		}
	}
	return nil
}

// measureWindow runs spec against the server whose process is pid and
// reads the CPU that process and grovebench used over spec's measured
// window (zero CPU when pid is 0).
func measureWindow(ctx context.Context, spec loadSpec, pid int) (loadResult, cpuUse) {
	cpuc := make(chan cpuUse, 1)
	go func() { cpuc <- measureCPU(ctx, pid, time.Now().Add(spec.warmup), spec.duration) }()
	res := runLoad(ctx, spec)
	return res, <-cpuc
}

// abPool is one row's windows of an A/B, pooled.
type abPool struct {
	// Windows is the number of windows pooled, Secs their measured
	// seconds in all.
	Windows int     `json:"windows"`
	Secs    float64 `json:"seconds"`
	// Requests completed successfully inside the windows; Sent is every
	// request answered or failed, warm-ups included; Errors the failed
	// ones (warm-ups included), FirstError the first of them.
	Requests   int    `json:"requests"`
	Sent       int    `json:"sent"`
	Errors     int    `json:"errors"`
	FirstError string `json:"first_error,omitempty"`
	// Failures counts the Errors by kind (failureKind).
	Failures map[string]int `json:"failures,omitempty"`
	// ServerCPU, BenchCPU and OtherCPU are the CPU-seconds the server's
	// process, grovebench (the load generator) and the rest of the machine
	// used inside the windows (0 when unknown).
	ServerCPU float64 `json:"server_cpu_seconds"`
	BenchCPU  float64 `json:"grovebench_cpu_seconds"`
	OtherCPU  float64 `json:"other_cpu_seconds"`
	// Latencies are those of the successful requests that started inside
	// the windows (not in the JSON: the scenario rows carry every latency).
	Latencies []time.Duration `json:"-"`
}

// add pools one window of length window: res measured by the load
// generator, cpu over the same window.
func (p *abPool) add(res loadResult, cpu cpuUse, window time.Duration) {
	s := window.Seconds()
	p.Windows++
	p.Secs += s
	p.Requests += res.Requests
	p.Sent += res.Sent
	p.Errors += res.Errors
	p.Failures = addCounts(p.Failures, res.Failures)
	if p.FirstError == "" {
		p.FirstError = res.FirstError
	}
	p.ServerCPU += cpu.Grove * s
	p.BenchCPU += cpu.Bench * s
	p.OtherCPU += cpu.Other * s
	p.Latencies = append(p.Latencies, res.Latencies...)
}

// rate is the pooled requests per second (0 with no window).
func (p *abPool) rate() float64 { return perSec(float64(p.Requests), p.Secs) }

// cores, benchCores and otherCores are the cores the server, grovebench
// and the rest of the machine kept busy on average over the windows.
func (p *abPool) cores() float64      { return perSec(p.ServerCPU, p.Secs) }
func (p *abPool) benchCores() float64 { return perSec(p.BenchCPU, p.Secs) }
func (p *abPool) otherCores() float64 { return perSec(p.OtherCPU, p.Secs) }

// cpuPerRequest is the server's CPU time per successful request (0 when
// either is unknown).
func (p *abPool) cpuPerRequest() time.Duration {
	if p.Requests == 0 || p.ServerCPU == 0 {
		return 0
	}
	return time.Duration(math.Round(p.ServerCPU / float64(p.Requests) * 1e9))
}

// percentile is the nearest-rank q-th percentile of the pooled latencies.
func (p *abPool) percentile(q float64) time.Duration {
	slices.Sort(p.Latencies)
	return percentile(p.Latencies, q)
}

// perSec is v per second of secs (0 when secs is not positive).
func perSec(v, secs float64) float64 {
	if secs <= 0 {
		return 0
	}
	return v / secs
}
