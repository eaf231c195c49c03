package evaluations

import (
	"math"
	"strconv"

	"github.com/prometheus/client_golang/prometheus"
)

// The grove_outcome_* metrics, read from the Table's published figures at
// every scrape. The counters are the partitions' counters added up: each
// counts since its evaluator group started (docs/outcomes.md), so they only
// grow while the group runs.
var (
	descPredictions = prometheus.NewDesc("grove_outcome_predictions_total",
		"Prediction rows the evaluators took in for their window (those of a contract or model with an outcomes rule), all partitions.", nil, nil)
	descScored = prometheus.NewDesc("grove_outcome_scored_total",
		"Prediction rows scored once their window closed, all partitions.", nil, nil)
	descJoined = prometheus.NewDesc("grove_outcome_joined_total",
		"Scored prediction rows that had an outcome in their window, all partitions.", nil, nil)
	descOutcomes = prometheus.NewDesc("grove_outcome_outcomes_total",
		"Outcomes the evaluators took in (copies and late ones aside), all partitions.", nil, nil)
	descLate = prometheus.NewDesc("grove_outcome_late_total",
		"Outcomes that came after their window had closed, not used, all partitions.", nil, nil)
	descUnmatched = prometheus.NewDesc("grove_outcome_unmatched_total",
		"Outcomes that matched no prediction, all partitions.", nil, nil)
	descDuplicates = prometheus.NewDesc("grove_outcome_duplicates_total",
		"Copies taken once only, by kind: outcome (an outcome_id already seen) or prediction (an event_id already seen), all partitions.",
		[]string{"kind"}, nil)
	descLatePredictions = prometheus.NewDesc("grove_outcome_late_predictions_total",
		"Predictions whose window had closed when they reached the evaluator, not scored, all partitions.", nil, nil)
	descLag = prometheus.NewDesc("grove_outcome_lag_seconds",
		"The largest, over the partitions, of how far the join's watermark was behind the evaluator's clock when it last wrote its results.", nil, nil)
	descUnreadable = prometheus.NewDesc("grove_outcome_evaluations_unreadable_total",
		"Records of the evaluations topic this server could not read (left out; the log names their keys).", nil, nil)
	seriesLabels  = []string{"contract", "release", "shadow"}
	descLogLoss   = prometheus.NewDesc("grove_outcome_logloss", "Mean log loss of a series' scored predictions since its release became valid (binary outcomes).", seriesLabels, nil)
	descAUC       = prometheus.NewDesc("grove_outcome_auc", "AUC of a series' scored predictions since its release became valid (binary outcomes, to within 0.001).", seriesLabels, nil)
	descCalibrate = prometheus.NewDesc("grove_outcome_calibration",
		"Mean prediction over observed rate of a series' scored predictions since its release became valid (binary outcomes; 1 is calibrated).", seriesLabels, nil)
	descScoredBy = prometheus.NewDesc("grove_outcome_scored",
		"Scored predictions of a series since its release became valid: a contract's release (its model path for direct calls), served or in shadow.", seriesLabels, nil)
)

// Describe implements prometheus.Collector.
func (t *Table) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{descPredictions, descScored, descJoined, descOutcomes, descLate, descUnmatched, descDuplicates,
		descLatePredictions, descLag, descUnreadable, descLogLoss, descAUC, descCalibrate, descScoredBy} {
		ch <- d
	}
}

// Collect implements prometheus.Collector: the published totals and each
// series' since_valid figures; a figure that is undefined (an AUC without
// a positive and a negative, a calibration without a positive) has no
// sample.
func (t *Table) Collect(ch chan<- prometheus.Metric) {
	tot := t.Totals()
	c := tot.Counters
	counter := func(d *prometheus.Desc, v uint64, labels ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.CounterValue, float64(v), labels...)
	}
	counter(descPredictions, c.Predictions)
	counter(descScored, c.Scored)
	counter(descJoined, c.Joined)
	counter(descOutcomes, c.Outcomes)
	counter(descLate, c.Late)
	counter(descUnmatched, c.Unmatched)
	counter(descDuplicates, c.DuplicateOutcomes, "outcome")
	counter(descDuplicates, c.DuplicatePredictions, "prediction")
	counter(descLatePredictions, c.LatePredictions)
	counter(descUnreadable, t.Rejected())
	ch <- prometheus.MustNewConstMetric(descLag, prometheus.GaugeValue, tot.Lag.Seconds())
	for _, s := range t.Series() {
		labels := []string{s.Key.Contract, s.Key.Release, strconv.FormatBool(s.Key.Shadow)}
		ch <- prometheus.MustNewConstMetric(descScoredBy, prometheus.GaugeValue, float64(s.SinceValid.Count), labels...)
		b := s.SinceValid.BinaryFigures
		if b == nil {
			continue
		}
		for _, g := range []struct {
			d *prometheus.Desc
			v *float64
		}{{descLogLoss, b.LogLoss}, {descAUC, b.AUC}, {descCalibrate, b.Calibration}} {
			if g.v != nil && !math.IsNaN(*g.v) {
				ch <- prometheus.MustNewConstMetric(g.d, prometheus.GaugeValue, *g.v, labels...)
			}
		}
	}
}
