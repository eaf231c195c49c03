package join

import (
	"testing"
	"time"

	"github.com/groveml/grove/conf/modelconfig"
)

// BenchmarkJoin feeds a synthetic ad stream (20,000 requests of one or
// two rows, served and shadowed, clicks, duplicates) through a Joiner and
// reports the predictions scored and the records (predictions and
// outcomes) taken per second, over each store.
func BenchmarkJoin(b *testing.B) {
	window := time.Minute
	r := modelconfig.Outcomes{Label: "click", Kind: modelconfig.OutcomeBinary, Window: window, Lateness: 5 * time.Second}
	s := newAdStream(7, 20000, window, 3*time.Second)
	for _, name := range []string{"mem", "pebble"} {
		b.Run(name, func(b *testing.B) {
			var scored, records uint64
			var elapsed time.Duration
			for b.Loop() {
				b.StopTimer()
				var st Store = NewMemStore()
				var p *PebbleStore
				if name == "pebble" {
					var err error
					if p, err = OpenPebble(b.TempDir()); err != nil {
						b.Fatal(err)
					}
					st = p
				}
				j, err := New(Options{Rules: []Rule{{Contract: contract, Outcomes: r}}, Store: st})
				if err != nil {
					b.Fatal(err)
				}
				b.StartTimer()
				start := time.Now()
				for _, a := range s.records {
					if a.pred != nil {
						err = j.AddPrediction(a.at, Prediction{Event: a.pred})
					} else {
						err = j.AddOutcome(a.at, a.out)
					}
					if err != nil {
						b.Fatal(err)
					}
				}
				if err := j.Advance(s.records[len(s.records)-1].at.Add(time.Hour)); err != nil {
					b.Fatal(err)
				}
				elapsed += time.Since(start)
				scored += j.Counters().Scored
				records += uint64(len(s.records))
				b.StopTimer()
				if p != nil {
					p.Close()
				}
				b.StartTimer()
			}
			b.ReportMetric(float64(scored)/elapsed.Seconds(), "predictions/s")
			b.ReportMetric(float64(records)/elapsed.Seconds(), "records/s")
		})
	}
}
