package main

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/groveml/grove/internal/mallocarena"
)

// cHeapCollector serves glibc's accounting of the C heap (mallinfo2,
// read once a scrape): what the model runtimes and other C and C++ code
// hold allocated, and what malloc keeps free without returning it. Go's
// own memory is not in it (go_memstats_*).
type cHeapCollector struct {
	inuse, free, mmapped *prometheus.Desc
}

// newCHeapCollector returns the collector of grove_c_heap_inuse_bytes,
// grove_c_heap_free_bytes and grove_c_heap_mmapped_bytes.
func newCHeapCollector() *cHeapCollector {
	return &cHeapCollector{
		inuse: prometheus.NewDesc("grove_c_heap_inuse_bytes",
			"Bytes C and C++ code (the model runtimes, cgo) holds allocated with malloc, in its arenas and in mappings of their own (glibc mallinfo2 uordblks + hblkhd).", nil, nil),
		free: prometheus.NewDesc("grove_c_heap_free_bytes",
			"Bytes malloc's arenas hold free without returning them to the system (glibc mallinfo2 fordblks): at most what fragmentation keeps resident.", nil, nil),
		mmapped: prometheus.NewDesc("grove_c_heap_mmapped_bytes",
			"The share of grove_c_heap_inuse_bytes in chunks of their own mapping, which free returns to the system at once (glibc mallinfo2 hblkhd).", nil, nil),
	}
}

// Describe implements prometheus.Collector.
func (c *cHeapCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- c.inuse
	ch <- c.free
	ch <- c.mmapped
}

// Collect implements prometheus.Collector; it serves nothing where Grove
// is not built against glibc.
func (c *cHeapCollector) Collect(ch chan<- prometheus.Metric) {
	s, ok := mallocarena.ReadStats()
	if !ok {
		return
	}
	ch <- prometheus.MustNewConstMetric(c.inuse, prometheus.GaugeValue, float64(s.InUse))
	ch <- prometheus.MustNewConstMetric(c.free, prometheus.GaugeValue, float64(s.Free))
	ch <- prometheus.MustNewConstMetric(c.mmapped, prometheus.GaugeValue, float64(s.Mmapped))
}

// The C heap's trim: every cHeapTrimEvery, when malloc's arenas hold more
// than cHeapTrimAbove bytes free, grove hands their free pages back to the
// system (mallocarena.Trim).
const (
	cHeapTrimEvery = time.Second
	cHeapTrimAbove = 16 << 20
)

// trimCHeap is the component that trims the C heap. Models loaded and
// unloaded (on demand, under a memory budget, or updated in place) leave
// free chunks between the ones still allocated, which glibc keeps
// resident: with a thousand on-demand models churning under a 45 MiB
// budget they grew to 75 MiB. trims counts the trims that released memory
// (grove_c_heap_trims_total).
func trimCHeap(trims prometheus.Counter) component {
	return every("c heap trim", cHeapTrimEvery, func() {
		if trimWhenFree(mallocarena.ReadStats, mallocarena.Trim, cHeapTrimAbove) {
			trims.Inc()
		}
	})
}

// trimWhenFree calls trim when read says the arenas hold more than above
// bytes free, and reports whether trim released any.
func trimWhenFree(read func() (mallocarena.Stats, bool), trim func() bool, above uint64) bool {
	s, ok := read()
	return ok && s.Free > above && trim()
}
