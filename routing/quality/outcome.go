package quality

import (
	"math"
)

// Outcome quality: how well a servable's predictions match what happened
// (the outcomes the evaluator joins to them), in bounded memory and
// mergeable, so that the states of a contract's partitions add up to the
// state of all of them.

const (
	// EceBins is the number of equal-width bins of the expected
	// calibration error, over predictions in [0, 1].
	EceBins = 10
	// aucBins are the bins of the AUC's score histogram: equal-width bins
	// in log-odds over [-aucLogitSpan, aucLogitSpan] (predictions beyond
	// go to the end bins), 2^16 of them, each 2*aucLogitSpan/aucBins ≈
	// 4.9e-4 wide in log-odds (at p = 0.01, about 4.8e-6 in p).
	aucBins      = 1 << 16
	aucLogitSpan = 16.0
	// logLossClip keeps a prediction away from 0 and 1 in the log loss,
	// so that one confident mistake costs at most -ln(1e-15) ≈ 34.5.
	logLossClip = 1e-15
)

// moments are a running count, mean and sum of squared deviations
// (Welford), merged exactly in count and stably in the rest (Chan et
// al.).
type moments struct {
	n        uint64
	mean, m2 float64
}

// add counts x.
func (m *moments) add(x float64) {
	m.n++
	d := x - m.mean
	m.mean += d / float64(m.n)
	m.m2 += d * (x - m.mean)
}

// merge adds o into m.
func (m *moments) merge(o *moments) {
	if o.n == 0 {
		return
	}
	if m.n == 0 {
		*m = *o
		return
	}
	n := m.n + o.n
	d := o.mean - m.mean
	fa, fb := float64(m.n), float64(o.n)
	m.mean += d * fb / float64(n)
	m.m2 += o.m2 + d*d*fa*fb/float64(n)
	m.n = n
}

// variance is the sample variance (n-1 in the denominator); NaN under 2.
func (m *moments) variance() float64 {
	if m.n < 2 {
		return math.NaN()
	}
	return max(m.m2, 0) / float64(m.n-1)
}

// eceBin is one bin of the calibration error: its predictions, their
// positives and the sum of their predictions.
type eceBin struct {
	n, pos uint64
	sumP   float64
}

// scoreBin counts the positives and negatives whose predictions fall in
// one AUC bin.
type scoreBin struct{ pos, neg uint64 }

// Binary adds up binary outcomes: predictions in [0, 1] of a label 0 or
// 1. The zero value is empty and ready. Not safe for concurrent use.
//
// Its AUC is that of the predictions rounded to their bin (aucBins,
// equal-width in log-odds): a positive and a negative in different bins
// are ordered exactly, and a pair in the same bin counts half, as a tie
// does in the exact (Mann-Whitney) AUC. So the error is at most half the
// share of positive-negative pairs that share a bin (AUCErrorBound, which
// reports it for the data added): it depends on how the predictions
// spread in log-odds, not on their number. Predictions spread over a
// log-odds range r (pCTRs of 0.01 to 0.03: r ≈ 1.1) put about 1/(r/4.9e-4)
// of the pairs in one bin, a bound of about 2e-4 there, and the actual
// error, which cancels between bins, is far below it; only predictions
// whose positives and negatives differ by less than a bin width (below
// 5e-6 at p = 0.01) can come near the bound. Memory grows with the bins
// the predictions fall in, at most aucBins.
type Binary struct {
	count, positives uint64
	// clamped counts predictions outside [0, 1], counted at the nearest
	// end; invalid those that are NaN, left out.
	clamped, invalid uint64
	sumP, sumBrier   float64
	// logLoss are the moments of each prediction's log loss (Welch reads
	// their variance).
	logLoss moments
	ece     [EceBins]eceBin
	// scores is the AUC's histogram, by bin (aucBinOf).
	scores scoreHist
}

// Add counts prediction p of an outcome, positive or not. A p outside
// [0, 1] is counted at the nearest end (Clamped); a NaN is left out
// (Invalid).
func (b *Binary) Add(p float64, positive bool) { b.AddPoint(NewBinaryPoint(p, positive)) }

// BinaryPoint is one prediction of a binary outcome with what a Binary
// derives of it (its log loss and bins), so that adding it to several
// Binary (AddPoint) costs the logarithms once.
type BinaryPoint struct {
	p                          float64 // clamped to [0, 1]
	positive, clamped, invalid bool
	logLoss                    float64
	ece                        int
	auc                        uint16
}

// NewBinaryPoint is prediction p of an outcome, positive or not, as Add
// counts it.
func NewBinaryPoint(p float64, positive bool) BinaryPoint {
	pt := BinaryPoint{p: p, positive: positive}
	switch {
	case math.IsNaN(p):
		pt.invalid = true
		return pt
	case p < 0:
		pt.p, pt.clamped = 0, true
	case p > 1:
		pt.p, pt.clamped = 1, true
	}
	pt.logLoss = logLoss(pt.p, positive)
	pt.ece = eceBinOf(pt.p)
	pt.auc = aucBinOf(pt.p)
	return pt
}

// AddPoint counts pt, as Add counts its prediction and outcome.
func (b *Binary) AddPoint(pt BinaryPoint) {
	if pt.invalid {
		b.invalid++
		return
	}
	if pt.clamped {
		b.clamped++
	}
	p := pt.p
	var y float64
	if pt.positive {
		y = 1
		b.positives++
	}
	b.count++
	b.sumP += p
	b.sumBrier += (p - y) * (p - y)
	b.logLoss.add(pt.logLoss)
	e := &b.ece[pt.ece]
	e.n++
	e.sumP += p
	if pt.positive {
		e.pos++
		b.scores.add(uint32(pt.auc), 1, 0)
	} else {
		b.scores.add(uint32(pt.auc), 0, 1)
	}
}

// logLoss is the log loss of prediction p (clipped to [1e-15, 1-1e-15])
// of an outcome, positive or not.
func logLoss(p float64, positive bool) float64 {
	p = min(max(p, logLossClip), 1-logLossClip)
	if positive {
		return -math.Log(p)
	}
	return -math.Log1p(-p)
}

// eceBinOf is the calibration bin of p in [0, 1].
func eceBinOf(p float64) int { return min(int(p*EceBins), EceBins-1) }

// aucBinOf is the AUC bin of p in [0, 1]; it never decreases as p grows,
// so predictions in different bins keep their order.
func aucBinOf(p float64) uint16 {
	x := (math.Log(p) - math.Log1p(-p) + aucLogitSpan) * (aucBins / (2 * aucLogitSpan))
	switch {
	case !(x > 0): // also p = 0, whose log-odds are -Inf
		return 0
	case x >= aucBins-1:
		return aucBins - 1
	}
	return uint16(x)
}

// Merge adds o into b: b then holds what one accumulator fed both their
// predictions would, the counts exactly and the sums to within rounding.
func (b *Binary) Merge(o *Binary) {
	b.count += o.count
	b.positives += o.positives
	b.clamped += o.clamped
	b.invalid += o.invalid
	b.sumP += o.sumP
	b.sumBrier += o.sumBrier
	b.logLoss.merge(&o.logLoss)
	for i := range b.ece {
		b.ece[i].n += o.ece[i].n
		b.ece[i].pos += o.ece[i].pos
		b.ece[i].sumP += o.ece[i].sumP
	}
	b.scores.merge(&o.scores)
}

// Count is the number of predictions counted.
func (b *Binary) Count() uint64 { return b.count }

// Positives is the number of them whose outcome was positive.
func (b *Binary) Positives() uint64 { return b.positives }

// Clamped is the number of predictions outside [0, 1], counted at the
// nearest end.
func (b *Binary) Clamped() uint64 { return b.clamped }

// Invalid is the number of NaN predictions, left out.
func (b *Binary) Invalid() uint64 { return b.invalid }

// MeanPrediction is the mean prediction; NaN when none was counted.
func (b *Binary) MeanPrediction() float64 { return ratio(b.sumP, b.count) }

// ObservedRate is the share of positive outcomes; NaN when none was
// counted.
func (b *Binary) ObservedRate() float64 { return ratio(float64(b.positives), b.count) }

// Calibration is the mean prediction over the observed rate (1 when
// calibrated, above when the predictions are too high); NaN without a
// positive outcome, where it is undefined.
func (b *Binary) Calibration() float64 {
	if b.positives == 0 {
		return math.NaN()
	}
	return b.MeanPrediction() / b.ObservedRate()
}

// LogLoss is the mean log loss; NaN when none was counted.
func (b *Binary) LogLoss() float64 {
	if b.count == 0 {
		return math.NaN()
	}
	return b.logLoss.mean
}

// Brier is the mean squared difference of prediction and label; NaN when
// none was counted.
func (b *Binary) Brier() float64 { return ratio(b.sumBrier, b.count) }

// CalibrationBin is one of the EceBins equal-width bins of predictions:
// [Lower, Upper) (the last one includes 1), its count and positives, the
// mean prediction and observed rate of its predictions (NaN when empty).
type CalibrationBin struct {
	Lower, Upper                 float64
	Count, Positives             uint64
	MeanPrediction, ObservedRate float64
}

// Bins are the calibration bins.
func (b *Binary) Bins() [EceBins]CalibrationBin {
	var out [EceBins]CalibrationBin
	for i, e := range b.ece {
		out[i] = CalibrationBin{Lower: float64(i) / EceBins, Upper: float64(i+1) / EceBins, Count: e.n, Positives: e.pos,
			MeanPrediction: ratio(e.sumP, e.n), ObservedRate: ratio(float64(e.pos), e.n)}
	}
	return out
}

// ECE is the expected calibration error: over the bins, the share of
// predictions in the bin times the gap between their mean prediction and
// observed rate; NaN when none was counted.
func (b *Binary) ECE() float64 {
	if b.count == 0 {
		return math.NaN()
	}
	sum := 0.0
	for _, e := range b.ece {
		if e.n > 0 {
			sum += math.Abs(e.sumP - float64(e.pos))
		}
	}
	return sum / float64(b.count)
}

// AUC is the area under the ROC curve: the chance that a positive's
// prediction is above a negative's, ties counting half, to within
// AUCErrorBound (Binary says why); NaN without both a positive and a
// negative.
func (b *Binary) AUC() float64 {
	auc, _ := b.auc()
	return auc
}

// AUCErrorBound is the largest difference between AUC and the exact AUC of
// the predictions counted: half the share of positive-negative pairs
// whose predictions share a bin; NaN when AUC is.
func (b *Binary) AUCErrorBound() float64 {
	_, bound := b.auc()
	return bound
}

// auc returns AUC and AUCErrorBound.
func (b *Binary) auc() (auc, bound float64) {
	neg := b.count - b.positives
	if b.positives == 0 || neg == 0 {
		return math.NaN(), math.NaN()
	}
	// above counts the pairs whose positive is in a higher bin, same those
	// in one bin (exact up to 2^53 pairs per bin, then rounded).
	var above, same, negBelow float64
	b.scores.each(func(_ uint32, s scoreBin) {
		above += float64(s.pos) * negBelow
		same += float64(s.pos) * float64(s.neg)
		negBelow += float64(s.neg)
	})
	pairs := float64(b.positives) * float64(neg)
	return (above + same/2) / pairs, same / 2 / pairs
}

// ratio is sum/n, NaN when n is 0.
func ratio(sum float64, n uint64) float64 {
	if n == 0 {
		return math.NaN()
	}
	return sum / float64(n)
}

// Numeric adds up numeric outcomes: predictions of a value. The zero value
// is empty and ready. Not safe for concurrent use.
type Numeric struct {
	count uint64
	// invalid counts pairs with a NaN or infinite prediction or label,
	// left out.
	invalid                 uint64
	sumErr, sumAbs, sumSqrd float64
	// sumLabel and sumLabelSq add up the labels and their squares: the
	// mean outcome and its spread, a bandit router's reward.
	sumLabel, sumLabelSq float64
}

// Add counts prediction p of value label; a pair with a NaN or infinite
// number is left out (Invalid).
func (n *Numeric) Add(p, label float64) {
	e := p - label
	if math.IsNaN(e) || math.IsInf(e, 0) {
		n.invalid++
		return
	}
	n.count++
	n.sumErr += e
	n.sumAbs += math.Abs(e)
	n.sumSqrd += e * e
	n.sumLabel += label
	n.sumLabelSq += label * label
}

// Merge adds o into n.
func (n *Numeric) Merge(o *Numeric) {
	n.count += o.count
	n.invalid += o.invalid
	n.sumErr += o.sumErr
	n.sumAbs += o.sumAbs
	n.sumSqrd += o.sumSqrd
	n.sumLabel += o.sumLabel
	n.sumLabelSq += o.sumLabelSq
}

// LabelSums are the sum of the labels counted and the sum of their
// squares.
func (n *Numeric) LabelSums() (sum, sumSq float64) { return n.sumLabel, n.sumLabelSq }

// MeanLabel is the mean of the labels (the mean outcome); NaN when none
// was counted.
func (n *Numeric) MeanLabel() float64 { return ratio(n.sumLabel, n.count) }

// Count is the number of pairs counted.
func (n *Numeric) Count() uint64 { return n.count }

// Invalid is the number of pairs left out.
func (n *Numeric) Invalid() uint64 { return n.invalid }

// MAE is the mean absolute error; NaN when none was counted.
func (n *Numeric) MAE() float64 { return ratio(n.sumAbs, n.count) }

// RMSE is the root mean squared error; NaN when none was counted.
func (n *Numeric) RMSE() float64 { return math.Sqrt(ratio(n.sumSqrd, n.count)) }

// Bias is the mean of prediction minus label (above 0: too high); NaN
// when none was counted.
func (n *Numeric) Bias() float64 { return ratio(n.sumErr, n.count) }
