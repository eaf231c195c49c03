package actors

import (
	"context"
	"slices"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/groveml/grove/routing/quality"
)

// maxMetricOutputs bounds the outputs of one shadow servable that get
// per-output comparison series in /metrics (the first ones met); the stats
// API has them all. The series are then at most contracts × shadow
// releases × 3 windows × this many.
const maxMetricOutputs = 8

// compareCollector exports the shadow servables' comparisons as gauges,
// read from their windows at scrape time: the request path pays nothing
// for them.
type compareCollector struct {
	s                                  *System
	executions, errors, championFailed *prometheus.Desc
	latencyRatio                       *prometheus.Desc
	meanDiff, maxDiff, within, agree   *prometheus.Desc
	mismatches                         *prometheus.Desc
}

func newCompareCollector(s *System) *compareCollector {
	l := []string{"contract", "release", "window"}
	lo := []string{"contract", "release", "output", "window"}
	d := func(name, help string, labels []string) *prometheus.Desc {
		return prometheus.NewDesc("grove_shadow_compare_"+name, help+" Windows: since_start (since the shadow's content was loaded), last_n (its last shadow_compare_window executions), last_5m.", labels, nil)
	}
	return &compareCollector{s: s,
		executions:     d("executions", "Shadow executions compared with the answer the caller got for the same request, answered or failed, by contract, release and window.", l),
		errors:         d("errors", "Compared shadow executions that failed.", l),
		championFailed: d("champion_failed", "Shadow executions with nothing to compare: the caller got an error, or no answer in time, from the champion.", l),
		latencyRatio:   d("latency_ratio", "The shadow's forward-time quantile (quantile 0.5 or 0.99) over the champion's on the same requests; absent until measured.", append(slices.Clone(l), "quantile")),
		meanDiff:       d("mean_abs_diff", "Mean absolute difference between the shadow's output values and the champion's, by output (at most 8 outputs per servable).", lo),
		maxDiff:        d("max_abs_diff", "Largest absolute difference between the shadow's output values and the champion's, by output.", lo),
		within:         d("within_tolerance_ratio", "Share of rows whose every value is within shadow_compare_tolerance of the champion's, by output.", lo),
		agree:          d("agreement_ratio", "Share of rows of a single-score output on the same side of 0.5 as the champion's, by output.", lo),
		mismatches:     d("mismatches", "Executions whose output could not be compared with the champion's (missing, datatype, shape), by output.", lo),
	}
}

// Describe sends the descriptors of the collected metrics.
func (c *compareCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{c.executions, c.errors, c.championFailed, c.latencyRatio, c.meanDiff, c.maxDiff, c.within, c.agree, c.mismatches} {
		ch <- d
	}
}

// comparedServable is a shadow servable's windows and the content they
// describe, gathered on the router for a scrape.
type comparedServable struct {
	contract, release string
	w                 *compareWindows
	content           int64
	loadedAt          time.Time
}

// Collect reads every shadow servable's comparison windows.
func (c *compareCollector) Collect(ch chan<- prometheus.Metric) {
	var list []comparedServable
	var tol float64
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	if err := c.s.askRouter(ctx, func(r *routerActor) {
		routes := *r.routes.Load()
		tol = r.tolerance
		for id, st := range r.contracts {
			for rv, rc := range st.releases {
				sv, _ := st.servable(rv)
				if on, ok := r.servedBy(routes, sv.ModelPath); rc.compare != nil && ok {
					list = append(list, comparedServable{contract: id, release: rv, w: rc.compare, content: on.id, loadedAt: on.loadedAt})
				}
			}
		}
	}); err != nil {
		return
	}
	slices.SortFunc(list, func(a, b comparedServable) int {
		return strings.Compare(a.contract+"\x00"+a.release, b.contract+"\x00"+b.release)
	})
	now := time.Now()
	for _, sv := range list {
		st := sv.w.stats(sv.content, sv.loadedAt, tol, now)
		for _, win := range []struct {
			name string
			w    *quality.CompareWindow
		}{{"since_start", &st.SinceStart}, {"last_n", &st.LastN}, {"last_5m", &st.Last5m}} {
			c.collectWindow(ch, sv.contract, sv.release, win.name, win.w)
		}
	}
}

// collectWindow sends the gauges of one window.
func (c *compareCollector) collectWindow(ch chan<- prometheus.Metric, contract, release, window string, w *quality.CompareWindow) {
	gauge := func(d *prometheus.Desc, v float64, labels ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, v, labels...)
	}
	gauge(c.executions, float64(w.Executions), contract, release, window)
	gauge(c.errors, float64(w.Errors), contract, release, window)
	gauge(c.championFailed, float64(w.ChampionFailed), contract, release, window)
	if w.P50Ratio > 0 {
		gauge(c.latencyRatio, w.P50Ratio, contract, release, window, "0.5")
		gauge(c.latencyRatio, w.P99Ratio, contract, release, window, "0.99")
	}
	// An output's name is the model's: a label value must be UTF-8 (else
	// the whole scrape fails), and two names made alike by the repair
	// would be one series twice (which fails it too).
	seen := make(map[string]bool, maxMetricOutputs)
	for _, o := range w.Outputs[:min(len(w.Outputs), maxMetricOutputs)] {
		name := strings.ToValidUTF8(o.Name, "\uFFFD")
		if seen[name] {
			continue
		}
		seen[name] = true
		gauge(c.mismatches, float64(o.Mismatches), contract, release, name, window)
		if o.WithinTolerance != nil {
			gauge(c.meanDiff, o.MeanAbsDiff, contract, release, name, window)
			gauge(c.maxDiff, o.MaxAbsDiff, contract, release, name, window)
			gauge(c.within, *o.WithinTolerance, contract, release, name, window)
		}
		if o.Agreement != nil {
			gauge(c.agree, *o.Agreement, contract, release, name, window)
		}
	}
}
