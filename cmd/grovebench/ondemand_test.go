package main

import (
	"strings"
	"testing"
)

// pauseText is Go's pause histograms as /metrics shows them, with the
// given counts and sums.
func pauseText(gc, gcSum, other, otherSum string) string {
	return `# TYPE go_sched_pauses_total_gc_seconds histogram
go_sched_pauses_total_gc_seconds_bucket{le="+Inf"} ` + gc + `
go_sched_pauses_total_gc_seconds_sum ` + gcSum + `
go_sched_pauses_total_gc_seconds_count ` + gc + `
# TYPE go_sched_pauses_total_other_seconds histogram
go_sched_pauses_total_other_seconds_bucket{le="+Inf"} ` + other + `
go_sched_pauses_total_other_seconds_sum ` + otherSum + `
go_sched_pauses_total_other_seconds_count ` + other + `
# TYPE go_sched_pauses_stopping_other_seconds histogram
go_sched_pauses_stopping_other_seconds_sum 9
go_sched_pauses_stopping_other_seconds_count 900
`
}

func TestTheOnDemandReportCountsTheServersStopTheWorldPausesOverAWindow(t *testing.T) {
	before, err := parseProm(strings.NewReader(pauseText("10", "0.002", "4", "0.001")))
	if err != nil {
		t.Fatal(err)
	}
	after, err := parseProm(strings.NewReader(pauseText("30", "0.006", "24", "0.011")))
	if err != nil {
		t.Fatal(err)
	}
	var p pauseCount
	p.add(pausesBetween(before, after))
	p.add(pausesBetween(before, after))
	want := pauseCount{GC: 40, GCSecs: 0.008, Other: 40, OtherSecs: 0.02}
	const eps = 1e-12
	if p.GC != want.GC || p.Other != want.Other || p.GCSecs-want.GCSecs > eps || want.GCSecs-p.GCSecs > eps ||
		p.OtherSecs-want.OtherSecs > eps || want.OtherSecs-p.OtherSecs > eps {
		t.Errorf("two windows of the same pauses = %+v, want %+v", p, want)
	}
	if got, want := fmtPauses(p, 2), "40.0 pauses, ≥ 14.00 ms (the collector's 20.0, ≥ 4.00 ms; others 20.0, ≥ 10.00 ms)"; got != want {
		t.Errorf("over 2 s: %q, want %q", got, want)
	}
	if !hasPauses(after) {
		t.Error("a scrape with Go's pause histograms: hasPauses false")
	}
	old, err := parseProm(strings.NewReader("process_cpu_seconds_total 3\n"))
	if err != nil {
		t.Fatal(err)
	}
	if hasPauses(old) {
		t.Error("a scrape of a grove without the pause histograms: hasPauses true")
	}
}
