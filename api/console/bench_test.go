package console

import (
	"fmt"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/collectors"

	"github.com/groveml/grove/routing"
)

// BenchmarkSample is one sampling of the histories with 20 models served
// under 3 APIs, 5 contracts, and the Go and process collectors a server
// registers: the console's cost is this once per interval (1 s).
func BenchmarkSample(b *testing.B) {
	m := newActorMetrics()
	m.reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	src := &models{shares: map[string][]routing.Status{}}
	for i := range 20 {
		path := fmt.Sprintf("model_%d/", i)
		src.paths = append(src.paths, path)
		for _, api := range []string{"ba", "oip", "forestflow"} {
			m.serve(api, path, 10, 0.002)
		}
		m.queue.WithLabelValues(path).Set(1)
		m.inflight.WithLabelValues(path).Set(1)
	}
	for i := range 5 {
		src.shares[fmt.Sprintf("o/p%d/1", i)] = []routing.Status{{Release: "v1", Fraction: 0.5}, {Release: "v2", Fraction: 0.5}}
	}
	c := New(Options{Source: src, Gatherer: m.reg})
	now := time.Unix(0, 0)
	b.ReportAllocs()
	for b.Loop() {
		now = now.Add(time.Second)
		c.Sample(now)
	}
}
