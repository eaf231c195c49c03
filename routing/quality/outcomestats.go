package quality

import (
	"math"
	"time"
)

// OutcomeStats are a servable's outcome figures for the contract's stats
// (its Grove object's "outcomes"). A figure that is undefined (a mean of
// nothing, a calibration without a positive, an AUC without both a
// positive and a negative) is null; NaN and infinities never reach JSON.
type OutcomeStats struct {
	SinceValid OutcomeFigures `json:"since_valid"`
	Last1h     OutcomeFigures `json:"last_1h"`
	// VsChampion compares the servable with the champion; absent for the
	// champion itself.
	VsChampion *VsChampion `json:"vs_champion,omitempty"`
	// History samples the since_valid figures over time, oldest first,
	// for the console's charts; absent where no one keeps one (the
	// evaluator's own figures).
	History []OutcomeSample `json:"history,omitempty"`
}

// OutcomeSample is a series' since_valid figures at one time: its count,
// log loss, AUC and calibration (null when undefined).
type OutcomeSample struct {
	T           time.Time `json:"t"`
	Count       uint64    `json:"count"`
	LogLoss     *float64  `json:"logloss"`
	AUC         *float64  `json:"auc"`
	Calibration *float64  `json:"calibration"`
}

// Sample is f's sample at t: numeric figures have no log loss, AUC or
// calibration (null).
func (f OutcomeFigures) Sample(t time.Time) OutcomeSample {
	s := OutcomeSample{T: t, Count: f.Count}
	if b := f.BinaryFigures; b != nil {
		s.LogLoss, s.AUC, s.Calibration = b.LogLoss, b.AUC, b.Calibration
	}
	return s
}

// OutcomeFigures are the figures of one window: the count, then those of
// its kind (binary or numeric; the other's fields are absent).
type OutcomeFigures struct {
	Count uint64 `json:"count"`
	*BinaryFigures
	*NumericFigures
}

// BinaryFigures are the figures of binary outcomes (Binary).
type BinaryFigures struct {
	Positives      uint64   `json:"positives"`
	MeanPrediction *float64 `json:"mean_prediction"`
	ObservedRate   *float64 `json:"observed_rate"`
	Calibration    *float64 `json:"calibration"`
	ECE            *float64 `json:"ece"`
	// Bins are the calibration error's 10 equal-width bins, for a
	// reliability diagram.
	Bins    []ReliabilityBin `json:"bins"`
	LogLoss *float64         `json:"logloss"`
	Brier   *float64         `json:"brier"`
	AUC     *float64         `json:"auc"`
}

// ReliabilityBin is one calibration bin: predictions in [lower, upper),
// their count, mean prediction and observed rate (null when empty).
type ReliabilityBin struct {
	Lower          float64  `json:"lower"`
	Upper          float64  `json:"upper"`
	Count          uint64   `json:"count"`
	MeanPrediction *float64 `json:"mean_prediction"`
	ObservedRate   *float64 `json:"observed_rate"`
}

// NumericFigures are the figures of numeric outcomes (Numeric).
type NumericFigures struct {
	MAE  *float64 `json:"mae"`
	RMSE *float64 `json:"rmse"`
	Bias *float64 `json:"bias"`
	// MeanOutcome is the mean of the outcomes' values (the labels).
	MeanOutcome *float64 `json:"mean_outcome"`
	// LabelSum and LabelSumSq are the sums of the values and of their
	// squares, for a bandit router's reward; not in the JSON.
	LabelSum, LabelSumSq float64 `json:"-"`
}

// VsChampion is a Delta at 95 % for the stats: n, logloss_delta with its
// interval ci95, auc_delta, and how they were compared (method "paired"
// or "welch", with n_champion for Welch).
type VsChampion struct {
	N            uint64      `json:"n"`
	NChampion    uint64      `json:"n_champion,omitempty"`
	Method       string      `json:"method"`
	LogLossDelta *float64    `json:"logloss_delta"`
	CI95         *[2]float64 `json:"ci95"`
	AUCDelta     *float64    `json:"auc_delta"`
}

// number is a pointer to v, nil when v is NaN or infinite.
func number(v float64) *float64 {
	if math.IsNaN(v) || math.IsInf(v, 0) {
		return nil
	}
	return &v
}

// Figures describes b for the stats.
func (b *Binary) Figures() OutcomeFigures {
	f := &BinaryFigures{Positives: b.positives, MeanPrediction: number(b.MeanPrediction()),
		ObservedRate: number(b.ObservedRate()), Calibration: number(b.Calibration()), ECE: number(b.ECE()),
		LogLoss: number(b.LogLoss()), Brier: number(b.Brier()), AUC: number(b.AUC()),
		Bins: make([]ReliabilityBin, 0, EceBins)}
	for _, c := range b.Bins() {
		f.Bins = append(f.Bins, ReliabilityBin{Lower: c.Lower, Upper: c.Upper, Count: c.Count,
			MeanPrediction: number(c.MeanPrediction), ObservedRate: number(c.ObservedRate)})
	}
	return OutcomeFigures{Count: b.count, BinaryFigures: f}
}

// Figures describes n for the stats.
func (n *Numeric) Figures() OutcomeFigures {
	return OutcomeFigures{Count: n.count, NumericFigures: &NumericFigures{
		MAE: number(n.MAE()), RMSE: number(n.RMSE()), Bias: number(n.Bias()), MeanOutcome: number(n.MeanLabel()),
		LabelSum: n.sumLabel, LabelSumSq: n.sumLabelSq}}
}

// Figures describes p for the stats: the challenger's figures over the
// pairs.
func (p *Paired) Figures() OutcomeFigures { return p.challenger.Figures() }

// VsChampion describes d for the stats; its interval is reported as ci95
// whatever d's confidence, so pass a Delta at DefaultConfidence.
func (d Delta) VsChampion() *VsChampion {
	v := &VsChampion{N: d.N, Method: "welch", LogLossDelta: number(d.LogLoss), AUCDelta: number(d.AUC)}
	if d.Paired {
		v.Method = "paired"
	} else {
		v.NChampion = d.NChampion
	}
	if lo, hi := number(d.Lower), number(d.Upper); lo != nil && hi != nil {
		v.CI95 = &[2]float64{*lo, *hi}
	}
	return v
}

// Figurer is an accumulator the stats can describe.
type Figurer interface{ Figures() OutcomeFigures }

// OutcomeStats describes w's windows at now (event time: the last hour up
// to it), without a comparison (set VsChampion for a challenger).
func (w *OutcomeWindows[T, P]) OutcomeStats(now time.Time) *OutcomeStats {
	st := &OutcomeStats{}
	if f, ok := any(P(&w.total)).(Figurer); ok {
		st.SinceValid = f.Figures()
		st.Last1h = any(w.LastHour(now)).(Figurer).Figures()
	}
	return st
}
