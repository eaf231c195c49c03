package modelconfig

import (
	"fmt"
	"math"
)

// This file holds the release gates' settings: the promote_when validity
// rule and the rollback_when servable key. Package routing applies them.

// gateError is a problem with one field of a gate: field is the path
// below the gate (".max_error_rate"), msg what is wrong.
type gateError struct {
	Field, Msg string
}

// checkBound checks an optional upper bound named name at field: absent,
// or finite, at least 0, and at most hi.
func checkBound(name string, v *float64, hi float64) *gateError {
	switch {
	case v == nil:
		return nil
	case math.IsNaN(*v) || math.IsInf(*v, 0):
		return &gateError{"." + name, fmt.Sprintf("%s is %v; bounds are finite numbers", name, *v)}
	case *v < 0 || *v > hi:
		if math.IsInf(hi, 1) {
			return &gateError{"." + name, fmt.Sprintf("%s %v is negative; bounds are 0 or more", name, *v)}
		}
		return &gateError{"." + name, fmt.Sprintf("%s %v is not between 0 and %v", name, *v, hi)}
	}
	return nil
}

// validate checks the rule's fields; see PromoteWhen.
func (p PromoteWhen) validate() *gateError {
	if p.MinShadowExecutions < 1 || p.MinShadowExecutions > MaxEventCount {
		return &gateError{".min_shadow_executions", fmt.Sprintf("needs min_shadow_executions from 1 to %d, got %d", int64(MaxEventCount), p.MinShadowExecutions)}
	}
	for _, b := range []struct {
		name string
		v    *float64
		hi   float64
	}{{"max_mean_abs_diff", p.MaxMeanAbsDiff, math.Inf(1)}, {"max_error_rate", p.MaxErrorRate, 1}, {"max_p99_ratio", p.MaxP99Ratio, math.Inf(1)}} {
		if err := checkBound(b.name, b.v, b.hi); err != nil {
			return err
		}
	}
	return nil
}

// validate checks the gate's fields; see RollbackWhen.
func (r RollbackWhen) validate() *gateError {
	if r.MinRequests < 1 || r.MinRequests > MaxEventCount {
		return &gateError{".min_requests", fmt.Sprintf("needs min_requests from 1 to %d, got %d", int64(MaxEventCount), r.MinRequests)}
	}
	if r.MaxErrorRate == nil && r.MaxP99Ms == nil {
		return &gateError{"", "needs at least one bound: max_error_rate or max_p99_ms"}
	}
	if err := checkBound("max_error_rate", r.MaxErrorRate, 1); err != nil {
		return err
	}
	return checkBound("max_p99_ms", r.MaxP99Ms, math.Inf(1))
}

// The gates' canonical JSON shapes: every bound given is written, the
// absent ones are left out (absent means no bound).
type (
	promoteWhenJSON struct {
		MinShadowExecutions int64    `json:"min_shadow_executions"`
		MaxMeanAbsDiff      *float64 `json:"max_mean_abs_diff,omitempty"`
		MaxErrorRate        *float64 `json:"max_error_rate,omitempty"`
		MaxP99Ratio         *float64 `json:"max_p99_ratio,omitempty"`
	}
	rollbackWhenJSON struct {
		MinRequests  int64    `json:"min_requests"`
		MaxErrorRate *float64 `json:"max_error_rate,omitempty"`
		MaxP99Ms     *float64 `json:"max_p99_ms,omitempty"`
	}
)

// canonical returns the rule's canonical JSON shape.
func (p PromoteWhen) canonical() promoteWhenJSON {
	return promoteWhenJSON{p.MinShadowExecutions, p.MaxMeanAbsDiff, p.MaxErrorRate, p.MaxP99Ratio}
}

// canonical returns the gate's canonical JSON shape, nil for none.
func (r *RollbackWhen) canonical() *rollbackWhenJSON {
	if r == nil {
		return nil
	}
	return &rollbackWhenJSON{r.MinRequests, r.MaxErrorRate, r.MaxP99Ms}
}
