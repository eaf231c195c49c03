package routing

import (
	"math"
	"time"

	"github.com/groveml/grove/conf/modelconfig"
)

// Comparison is what Grove measured of a shadow servable against the
// answers callers got for the same requests (the champion's): the input of
// the promote_when validity rule. The caller (the router actor) fills it
// from its comparison windows; a zero value is a servable never compared.
type Comparison struct {
	// Executions counts the shadow executions compared with an answer,
	// answered or failed, since the servable's content was loaded.
	Executions int64
	// Errors counts those executions that failed.
	Errors int64
	// MeanAbsDiff is the largest, over the outputs, of the mean absolute
	// difference between the shadow's values and the champion's, over the
	// same executions (failed ones excluded).
	MeanAbsDiff float64
	// P99Ratio is the shadow's 99th-percentile latency divided by the
	// champion's on the same requests, over a recent window; 0 when not
	// known yet.
	P99Ratio float64
}

// ErrorRate is Errors/Executions, 0 with no execution.
func (c Comparison) ErrorRate() float64 {
	if c.Executions == 0 {
		return 0
	}
	return float64(c.Errors) / float64(c.Executions)
}

// Live is what Grove measured of a servable's own user traffic since it
// became valid: releases that share live traffic (phase-in) see different
// requests, so they are judged on their own errors and latency (the
// rollback_when rule). The zero value is a servable that served nothing.
type Live struct {
	// Requests counts the user requests routed to it, answered or failed.
	Requests int64
	// Errors counts those that failed (the servable's fault: not the
	// caller's invalid input, not a deadline the caller set).
	Errors int64
	// P99 is the 99th-percentile latency of its answered requests over a
	// recent window; 0 when not known.
	P99 time.Duration
}

// ErrorRate is Errors/Requests, 0 with no request.
func (l Live) ErrorRate() float64 {
	if l.Requests == 0 {
		return 0
	}
	return float64(l.Errors) / float64(l.Requests)
}

// OutcomeStats is what the outcomes reported after a servable's
// predictions say of them (docs/outcomes.md): the input of the outcome
// bounds of promote_when and rollback_when, and of the live outcome
// metrics (modelconfig.OutcomeMetrics) that min_metric and keep_top_ranked
// may name. The caller fills it from the evaluator's results for the
// contract's binary outcomes; a nil *OutcomeStats in ServableState is a
// servable with no outcome statistics yet, whose outcome bounds do not
// hold. A figure that is not defined (calibration or AUC with no positive
// outcome, anything with nothing scored) is NaN.
type OutcomeStats struct {
	// Scored counts the servable's predictions scored in its since_valid
	// window: since it became valid, or, not valid yet (a shadow), since
	// its content was loaded.
	Scored int64
	// AUC, LogLoss, Brier, ECE and Calibration (mean prediction ÷
	// observed rate) are the since_valid figures over those predictions.
	AUC, LogLoss, Brier, ECE, Calibration float64
	// VsChampion compares a shadow servable with the champion on the same
	// requests.
	VsChampion Paired
}

// Paired compares a shadow servable's scored predictions with the
// champion's for the same requests: each difference is challenger −
// champion.
type Paired struct {
	// N counts the requests both were scored on.
	N int64
	// LogLossDelta is the mean, over those requests, of the difference of
	// their log losses.
	LogLossDelta float64
	// LogLossDeltaSE is the standard error of that mean (the standard
	// deviation of the differences ÷ √N). With the 95 % interval [lo, hi]
	// the statistics publish, it is (hi − lo) ÷ (2 × 1.959964).
	LogLossDeltaSE float64
	// AUCDelta is the difference of their AUCs over those requests.
	AUCDelta float64
}

// LogLossDeltaUpper is the upper end of the two-sided interval of
// LogLossDelta at confidence conf (0 < conf < 1): LogLossDelta + z·SE,
// with z the normal quantile at (1 + conf) / 2 (1.96 at 0.95). It is
// computed here rather than taken as an input because logloss_confidence
// is a setting of each rule, and N is large enough (min_outcomes) for the
// normal approximation. NaN if either input is.
func (p Paired) LogLossDeltaUpper(conf float64) float64 {
	return p.LogLossDelta + math.Sqrt2*math.Erfinv(conf)*p.LogLossDeltaSE
}

// liveMetric returns the live outcome metric name (one of
// modelconfig.OutcomeMetrics) of o, each higher-is-better, and whether it
// is defined: not with o nil (no statistics yet), nor when NaN.
func liveMetric(o *OutcomeStats, name string) (float64, bool) {
	if o == nil {
		return 0, false
	}
	var v float64
	switch name {
	case modelconfig.MetricOutcomeAUC:
		v = o.AUC
	case modelconfig.MetricOutcomeNegLogLoss:
		v = -o.LogLoss
	case modelconfig.MetricOutcomeNegBrier:
		v = -o.Brier
	case modelconfig.MetricOutcomeNegECE:
		v = -o.ECE
	default:
		return 0, false
	}
	return v, !math.IsNaN(v)
}

// metricOf returns the metric name of st for min_metric and
// keep_top_ranked, and whether it is defined: a live outcome metric
// (modelconfig.IsOutcomeMetric) from st.Outcomes, whatever the metrics API
// was given under that name, any other from st.Metrics. NaN is not
// defined.
func metricOf(st ServableState, name string) (float64, bool) {
	if modelconfig.IsOutcomeMetric(name) {
		return liveMetric(st.Outcomes, name)
	}
	v, ok := st.Metrics[name]
	return v, ok && !math.IsNaN(v)
}
