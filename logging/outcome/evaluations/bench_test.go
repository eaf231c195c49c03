package evaluations

import (
	"testing"
	"time"
)

// BenchmarkOutcomes is one lookup of a series' figures, what the router
// does for each servable of a contract when it plans a routed request.
func BenchmarkOutcomes(b *testing.B) {
	j := newJoiner(b)
	feed(b, j, stream(1, 500), func(arrival) bool { return true }, t0.Add(time.Hour))
	tb := NewTable()
	apply(b, tb, records(b, j, 0, t0.Add(time.Hour))...)
	tb.Publish()
	for b.Loop() {
		if r, s := tb.Outcomes(contract, "v2", true, "v1"); r == nil || s == nil {
			b.Fatal("no figures")
		}
	}
}
