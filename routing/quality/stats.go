package quality

import (
	"time"
)

// ComparisonStats is how a shadow servable compares with the answers
// callers got for the same requests (the champion's), for the stats API:
// three windows of the same figures.
type ComparisonStats struct {
	// Tolerance is the largest difference of a value within tolerance.
	Tolerance float64 `json:"tolerance"`
	// Since is when the compared content was loaded: SinceStart covers its
	// executions from then.
	Since *time.Time `json:"since,omitempty"`
	// N is the size of the LastN window, in executions.
	N          int           `json:"n"`
	SinceStart CompareWindow `json:"since_start"`
	LastN      CompareWindow `json:"last_n"`
	// Last5m covers the last 5 minutes (5 to 5.5, in 30-second steps).
	Last5m CompareWindow `json:"last_5m"`
}

// CompareWindow is the comparison over one window: the challenger's
// errors and latency, and each output's differences; the overall figures
// are the worst over the outputs.
type CompareWindow struct {
	// Executions counts the shadow executions compared with an answer the
	// caller got, answered or failed; Errors those that failed.
	Executions int64   `json:"executions"`
	Errors     int64   `json:"errors"`
	ErrorRate  float64 `json:"error_rate"`
	// ChampionFailed counts the shadow executions with nothing to compare:
	// the caller got an error, or no answer in time, from the champion.
	ChampionFailed int64 `json:"champion_failed"`
	// P50Ratio and P99Ratio are the challenger's median and 99th-percentile
	// forward times over the champion's on the same requests; 0 when none
	// was measured.
	P50Ratio float64 `json:"p50_ratio"`
	P99Ratio float64 `json:"p99_ratio"`
	// MeanAbsDiff and MaxAbsDiff are the largest over the numeric outputs;
	// WithinTolerance the smallest share of rows within the tolerance (0
	// without a numeric output),
	// Agreement the smallest share of rows agreeing at 0.5 over the
	// single-score outputs (absent without one); Mismatches the outputs
	// that could not be compared, over all executions.
	MeanAbsDiff     float64  `json:"mean_abs_diff"`
	MaxAbsDiff      float64  `json:"max_abs_diff"`
	WithinTolerance float64  `json:"within_tolerance"`
	Agreement       *float64 `json:"agreement,omitempty"`
	Mismatches      int64    `json:"mismatches"`
	// Outputs are the figures of each output, in the order first met.
	Outputs []OutputComparison `json:"outputs"`
}

// OutputComparison is one output's comparison over a window.
type OutputComparison struct {
	Name string `json:"name"`
	// Compared counts the executions that returned the output;
	// Mismatches those in which the two answers' outputs differed in
	// presence, datatype or shape (LastMismatch says how, last).
	Compared     int64  `json:"compared"`
	Mismatches   int64  `json:"mismatches"`
	LastMismatch string `json:"last_mismatch,omitempty"`
	// Rows counts the rows compared.
	Rows int64 `json:"rows"`
	// MeanAbsDiff and MaxAbsDiff are over the values compared (numeric
	// outputs); NonFinite counts values NaN or infinite on one side only,
	// which are left out of them and are never within the tolerance.
	MeanAbsDiff float64 `json:"mean_abs_diff"`
	MaxAbsDiff  float64 `json:"max_abs_diff"`
	NonFinite   int64   `json:"non_finite"`
	// WithinTolerance is the share of rows whose every value is within the
	// tolerance (numeric outputs); Agreement the share of rows on the same
	// side of 0.5 (single-score outputs: one value per row); Equal the
	// share of rows equal (BYTES outputs, which get no other figure).
	WithinTolerance *float64 `json:"within_tolerance,omitempty"`
	Agreement       *float64 `json:"agreement,omitempty"`
	Equal           *float64 `json:"equal,omitempty"`
}

// window describes t.
func (t *totals) window() CompareWindow {
	w := CompareWindow{Executions: t.executions, Errors: t.errors, ErrorRate: shareOf(t.errors, t.executions),
		ChampionFailed: t.championFailed, Outputs: make([]OutputComparison, 0, len(t.outputs)), WithinTolerance: 1}
	w.P50Ratio, w.P99Ratio = t.latencyRatios()
	numeric := false
	for i := range t.outputs {
		o := &t.outputs[i]
		oc := OutputComparison{Name: o.name, Compared: o.compared, Mismatches: o.mismatches, LastMismatch: o.lastMismatch,
			Rows: o.rows + o.bytesRows, MeanAbsDiff: finite(meanOf(o.sumAbsDiff, o.elements-o.nonFinite)),
			MaxAbsDiff: finite(o.maxAbsDiff), NonFinite: o.nonFinite}
		w.Mismatches += o.mismatches
		if o.rows > 0 {
			numeric = true
			oc.WithinTolerance = ptr(shareOf(o.within, o.rows))
			w.WithinTolerance = min(w.WithinTolerance, *oc.WithinTolerance)
			w.MeanAbsDiff, w.MaxAbsDiff = max(w.MeanAbsDiff, oc.MeanAbsDiff), max(w.MaxAbsDiff, oc.MaxAbsDiff)
		}
		if o.scoreRows > 0 {
			oc.Agreement = ptr(shareOf(o.agree, o.scoreRows))
			if w.Agreement == nil || *oc.Agreement < *w.Agreement {
				w.Agreement = oc.Agreement
			}
		}
		if o.bytesRows > 0 {
			oc.Equal = ptr(shareOf(o.equal, o.bytesRows))
		}
		w.Outputs = append(w.Outputs, oc)
	}
	if !numeric {
		w.WithinTolerance = 0
	}
	return w
}

// ptr returns a pointer to a copy of v.
func ptr[T any](v T) *T { return &v }

// Stats describes s for the stats API: the windows of a content loaded at
// loadedAt (none when zero), compared within tol.
func (s *Snapshot) Stats(loadedAt time.Time, tol float64) *ComparisonStats {
	st := &ComparisonStats{Tolerance: tol, N: s.n}
	if !loadedAt.IsZero() {
		st.Since = &loadedAt
	}
	st.SinceStart, st.LastN, st.Last5m = s.since.window(), s.lastN.window(), s.recent.window()
	return st
}
