package modelconfig

import (
	"errors"
	"fmt"
	"math"
)

// This file holds the release gates' settings: the promote_when validity
// rule and the rollback_when servable key, with their outcome bounds.
// Package routing applies them.

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

// rangeFromProto converts a [lo, hi] list; nil for an empty one.
func rangeFromProto(v []float64) *Range {
	switch len(v) {
	case 0:
		return nil
	case 2:
		return &Range{Lo: v[0], Hi: v[1]}
	}
	return &Range{Lo: math.NaN(), Hi: math.NaN(), given: len(v)}
}

// ParseRange converts the [lo, hi] list given for the key name (such as
// calibration_between in a management document) and checks it as Parse
// checks the config file's: an empty list is nil (no bound), any other
// needs two finite numbers, 0 < lo < hi. The error's message names the key.
func ParseRange(name string, v []float64) (*Range, error) {
	r := rangeFromProto(v)
	if err := checkRange(name, r); err != nil {
		return nil, errors.New(err.Msg)
	}
	return r, nil
}

// checkRange checks the optional range named name: two finite numbers,
// 0 < lo < hi.
func checkRange(name string, r *Range) *gateError {
	switch {
	case r == nil:
		return nil
	case r.given != 0:
		return &gateError{"." + name, fmt.Sprintf("%s needs two numbers [lo, hi], got %d", name, r.given)}
	case math.IsNaN(r.Lo) || math.IsInf(r.Lo, 0) || math.IsNaN(r.Hi) || math.IsInf(r.Hi, 0):
		return &gateError{"." + name, fmt.Sprintf("%s %v: bounds are finite numbers", name, r)}
	case r.Lo <= 0:
		return &gateError{"." + name, fmt.Sprintf("%s %v: lo must be more than 0", name, r)}
	case r.Lo >= r.Hi:
		return &gateError{"." + name, fmt.Sprintf("%s %v: lo must be less than hi", name, r)}
	}
	return nil
}

// checkMinCount checks a count named name that must be 1 to MaxEventCount.
func checkMinCount(name string, n int64) *gateError {
	if n < 1 || n > MaxEventCount {
		return &gateError{"." + name, fmt.Sprintf("needs %s from 1 to %d, got %d", name, int64(MaxEventCount), n)}
	}
	return nil
}

// validate checks the rule's fields; see PromoteWhen.
func (p PromoteWhen) validate() *gateError {
	if p.MinShadowExecutions != 0 || p.MinOutcomes == 0 {
		if err := checkMinCount("min_shadow_executions", p.MinShadowExecutions); err != nil {
			if p.MinShadowExecutions == 0 {
				err.Msg += " (it may be left out when min_outcomes is given)"
			}
			return err
		}
	}
	if p.MinOutcomes != 0 || p.HasOutcomeBounds() || p.LogLossConfidence != nil {
		if err := checkMinCount("min_outcomes", p.MinOutcomes); err != nil {
			if p.MinOutcomes == 0 {
				err.Msg += ": the outcome bounds are judged over that many scored predictions"
			}
			return err
		}
		if !p.HasOutcomeBounds() {
			return &gateError{".min_outcomes", "min_outcomes needs an outcome bound: max_logloss_delta, min_auc_delta or calibration_between"}
		}
	}
	if err := checkBound("max_logloss_delta", p.MaxLogLossDelta, math.Inf(1)); err != nil {
		return err
	}
	if c := p.LogLossConfidence; c != nil {
		if p.MaxLogLossDelta == nil {
			return &gateError{".logloss_confidence", "logloss_confidence is the confidence of max_logloss_delta's interval, and max_logloss_delta is not given"}
		}
		if !(*c > 0 && *c < 1) {
			return &gateError{".logloss_confidence", fmt.Sprintf("logloss_confidence %v is not strictly between 0 and 1", *c)}
		}
	}
	if d := p.MinAUCDelta; d != nil && !(*d >= -1 && *d <= 1) {
		return &gateError{".min_auc_delta", fmt.Sprintf("min_auc_delta %v is not between -1 and 1", *d)}
	}
	if err := checkRange("calibration_between", p.CalibrationBetween); err != nil {
		return err
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
	if !r.watchesTraffic() && r.CalibrationBetween == nil {
		return &gateError{"", "needs at least one bound: max_error_rate, max_p99_ms or calibration_between"}
	}
	if r.watchesTraffic() || r.MinRequests != 0 {
		if err := checkMinCount("min_requests", r.MinRequests); err != nil {
			return err
		}
		if !r.watchesTraffic() {
			return &gateError{".min_requests", "min_requests is what max_error_rate and max_p99_ms are judged from, and neither is given"}
		}
	}
	if r.CalibrationBetween != nil || r.MinOutcomes != 0 {
		if err := checkMinCount("min_outcomes", r.MinOutcomes); err != nil {
			return err
		}
		if r.CalibrationBetween == nil {
			return &gateError{".min_outcomes", "min_outcomes is what calibration_between is judged from, and it is not given"}
		}
	}
	if err := checkBound("max_error_rate", r.MaxErrorRate, 1); err != nil {
		return err
	}
	if err := checkBound("max_p99_ms", r.MaxP99Ms, math.Inf(1)); err != nil {
		return err
	}
	return checkRange("calibration_between", r.CalibrationBetween)
}

// checkOutcomes checks the rule against the outcomes o of its contract
// (nil: none): its outcome bounds need binary outcomes.
func (p PromoteWhen) checkOutcomes(o *Outcomes) *gateError {
	for _, b := range []struct {
		name  string
		given bool
	}{{"max_logloss_delta", p.MaxLogLossDelta != nil}, {"min_auc_delta", p.MinAUCDelta != nil}, {"calibration_between", p.CalibrationBetween != nil}} {
		if b.given {
			if msg := needBinaryOutcomes(b.name, o); msg != "" {
				return &gateError{"." + b.name, msg}
			}
		}
	}
	return nil
}

// needBinaryOutcomes says why the bound named name cannot be judged with
// the contract's outcomes o, or "" if it can.
func needBinaryOutcomes(name string, o *Outcomes) string {
	switch {
	case o == nil:
		return fmt.Sprintf("%s is judged on outcomes, and the contract has no outcomes object; give it \"outcomes\": {\"label\": ..., \"window\": ...}", name)
	case o.Kind != OutcomeBinary:
		return fmt.Sprintf("%s is judged on binary outcomes, and the contract's outcomes are %v", name, o.Kind)
	}
	return ""
}

// The gates' canonical JSON shapes: every bound given is written, the
// absent ones are left out (absent means no bound).
type (
	promoteWhenJSON struct {
		MinShadowExecutions int64      `json:"min_shadow_executions,omitempty"`
		MaxMeanAbsDiff      *float64   `json:"max_mean_abs_diff,omitempty"`
		MaxErrorRate        *float64   `json:"max_error_rate,omitempty"`
		MaxP99Ratio         *float64   `json:"max_p99_ratio,omitempty"`
		MinOutcomes         int64      `json:"min_outcomes,omitempty"`
		MaxLogLossDelta     *float64   `json:"max_logloss_delta,omitempty"`
		LogLossConfidence   *float64   `json:"logloss_confidence,omitempty"`
		MinAUCDelta         *float64   `json:"min_auc_delta,omitempty"`
		CalibrationBetween  *[]float64 `json:"calibration_between,omitempty"`
	}
	rollbackWhenJSON struct {
		MinRequests        int64      `json:"min_requests,omitempty"`
		MaxErrorRate       *float64   `json:"max_error_rate,omitempty"`
		MaxP99Ms           *float64   `json:"max_p99_ms,omitempty"`
		MinOutcomes        int64      `json:"min_outcomes,omitempty"`
		CalibrationBetween *[]float64 `json:"calibration_between,omitempty"`
	}
)

// rangeJSON returns a range's JSON shape, [lo, hi], nil for none.
func rangeJSON(r *Range) *[]float64 {
	if r == nil {
		return nil
	}
	return &[]float64{r.Lo, r.Hi}
}

// canonical returns the rule's canonical JSON shape. min_shadow_executions
// is written whenever it is not 0, which is whenever min_outcomes is not
// given in a config Parse accepted.
func (p PromoteWhen) canonical() promoteWhenJSON {
	return promoteWhenJSON{p.MinShadowExecutions, p.MaxMeanAbsDiff, p.MaxErrorRate, p.MaxP99Ratio,
		p.MinOutcomes, p.MaxLogLossDelta, p.LogLossConfidence, p.MinAUCDelta, rangeJSON(p.CalibrationBetween)}
}

// canonical returns the gate's canonical JSON shape, nil for none.
func (r *RollbackWhen) canonical() *rollbackWhenJSON {
	if r == nil {
		return nil
	}
	return &rollbackWhenJSON{r.MinRequests, r.MaxErrorRate, r.MaxP99Ms, r.MinOutcomes, rangeJSON(r.CalibrationBetween)}
}
