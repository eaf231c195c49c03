package main

import (
	"log/slog"
	"strconv"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/groveml/grove/servables"
)

// logBLAS logs the host's BLAS library as the TorchScript runtime set it
// up: which library and build, the files, and how a matrix product's
// threads are chosen.
func logBLAS(log *slog.Logger, b servables.BLAS) {
	attrs := []any{"library", b.Library, "version", b.Version, "parallel", b.Parallel, "path", b.Path}
	if b.CorePath != "" {
		attrs = append(attrs, "core_path", b.CorePath)
	}
	log.Info("BLAS for TorchScript matrix products", append(attrs, "threads", blasThreads(b))...)
}

// blasThreads says how many threads a matrix product uses: "intra_op_threads"
// when the library takes it from the calling model's setting, else the
// library's own count ("0": it has no thread API).
func blasThreads(b servables.BLAS) string {
	if b.PerCall {
		return "intra_op_threads"
	}
	return strconv.Itoa(b.Threads)
}

// blasInfo is the gauge grove_blas_info, 1, labelled with the host's BLAS.
func blasInfo(b servables.BLAS) prometheus.Collector {
	g := prometheus.NewGauge(prometheus.GaugeOpts{Name: "grove_blas_info",
		Help: "The host's BLAS library that TorchScript models' matrix products run on (always 1): library, version, its threading (parallel), " +
			"the files (path, and core_path when the library proper is another file), and the threads a matrix product uses " +
			"(a number, or intra_op_threads when it follows the model's setting).",
		ConstLabels: prometheus.Labels{"library": b.Library, "version": b.Version, "parallel": b.Parallel, "path": b.Path,
			"core_path": b.CorePath, "threads": blasThreads(b)}})
	g.Set(1)
	return g
}

// blasOf returns &b when ok, else nil.
func blasOf(b servables.BLAS, ok bool) *servables.BLAS {
	if !ok {
		return nil
	}
	return &b
}
