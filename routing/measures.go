package routing

import "time"

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
