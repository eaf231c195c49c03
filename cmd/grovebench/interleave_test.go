package main

import (
	"context"
	"errors"
	"slices"
	"testing"
	"time"
)

// Each round starts one row further on, so every row runs in every
// position; a failing step ends the rounds with its error.
func TestInterleaveRotatesTheOrderEachRoundAndStopsOnAnError(t *testing.T) {
	var order []int
	if err := interleave(context.Background(), 3, 3, func(i int) error { order = append(order, i); return nil }); err != nil {
		t.Fatal(err)
	}
	if want := []int{0, 1, 2, 1, 2, 0, 2, 0, 1}; !slices.Equal(order, want) {
		t.Errorf("order %v, want %v", order, want)
	}
	boom := errors.New("boom")
	order = nil
	err := interleave(context.Background(), 3, 2, func(i int) error {
		order = append(order, i)
		if len(order) == 3 {
			return boom
		}
		return nil
	})
	if !errors.Is(err, boom) || len(order) != 3 {
		t.Errorf("error %v after %v, want boom after 3 steps", err, order)
	}
	ctx, cancel := context.WithCancel(context.Background())
	order = nil
	err = interleave(ctx, 5, 2, func(i int) error {
		order = append(order, i)
		cancel()
		return nil
	})
	if !errors.Is(err, context.Canceled) || len(order) != 1 {
		t.Errorf("cancelled: error %v after %v steps", err, order)
	}
}

// Pooling adds up the windows: req/s and cores are over the pooled
// seconds, CPU per request over the pooled requests, percentiles over
// every window's latencies.
func TestABPoolPoolsRequestsCPUAndLatenciesOverItsWindows(t *testing.T) {
	ms := time.Millisecond
	var p abPool
	if p.rate() != 0 || p.cores() != 0 || p.cpuPerRequest() != 0 || p.percentile(50) != 0 {
		t.Errorf("empty pool: %+v", p)
	}
	p.add(loadResult{Requests: 1000, Sent: 1300, Errors: 1, FirstError: "first", Latencies: []time.Duration{3 * ms, 1 * ms}},
		cpuUse{Grove: 1.5, Bench: 0.5, Other: 0.1}, time.Second)
	p.add(loadResult{Requests: 3000, Sent: 3500, Errors: 2, FirstError: "second", Latencies: []time.Duration{2 * ms, 4 * ms}},
		cpuUse{Grove: 1.0, Bench: 0.25}, time.Second)
	if p.Windows != 2 || p.Secs != 2 || p.Requests != 4000 || p.Sent != 4800 || p.Errors != 3 || p.FirstError != "first" {
		t.Errorf("counts: %+v", p)
	}
	if p.rate() != 2000 || p.cores() != 1.25 || p.benchCores() != 0.375 || p.otherCores() != 0.05 {
		t.Errorf("rate %v, cores %v, bench %v, other %v", p.rate(), p.cores(), p.benchCores(), p.otherCores())
	}
	// 2.5 CPU-seconds for 4000 requests.
	if got := p.cpuPerRequest(); got != 625*time.Microsecond {
		t.Errorf("CPU per request %v, want 625 µs", got)
	}
	if p50, p99 := p.percentile(50), p.percentile(99); p50 != 2*ms || p99 != 4*ms {
		t.Errorf("p50 %v, p99 %v", p50, p99)
	}
}
