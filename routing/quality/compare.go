package quality

import (
	"math"
)

// DefaultConfidence is the confidence of the interval the stats report
// (ci95).
const DefaultConfidence = 0.95

// Paired compares a shadow challenger with the champion on the same
// requests: each pair is the two predictions of one request and its
// outcome. The zero value is empty and ready. Not safe for concurrent use.
type Paired struct {
	// champion and challenger add up each side's predictions, for the
	// AUCs; diff the moments of challenger log loss minus champion log
	// loss, pair by pair.
	champion, challenger Binary
	diff                 moments
}

// Add counts one request: the champion's prediction, the challenger's,
// and the outcome. A pair with a NaN prediction is left out (both sides,
// so that they stay paired; Invalid).
func (p *Paired) Add(champion, challenger float64, positive bool) {
	p.AddPoints(NewBinaryPoint(champion, positive), NewBinaryPoint(challenger, positive))
}

// AddPoints counts one request as Add does, from its two predictions as
// points of the same outcome.
func (p *Paired) AddPoints(champion, challenger BinaryPoint) {
	if champion.invalid || challenger.invalid {
		p.champion.invalid++
		return
	}
	p.champion.AddPoint(champion)
	p.challenger.AddPoint(challenger)
	p.diff.add(challenger.logLoss - champion.logLoss)
}

// Merge adds o into p.
func (p *Paired) Merge(o *Paired) {
	p.champion.Merge(&o.champion)
	p.challenger.Merge(&o.challenger)
	p.diff.merge(&o.diff)
}

// Count is the number of pairs counted.
func (p *Paired) Count() uint64 { return p.diff.n }

// Invalid is the number of pairs left out.
func (p *Paired) Invalid() uint64 { return p.champion.invalid }

// Champion is the champion's figures over the pairs.
func (p *Paired) Champion() *Binary { return &p.champion }

// Challenger is the challenger's figures over the pairs.
func (p *Paired) Challenger() *Binary { return &p.challenger }

// Delta is the challenger's log loss minus the champion's, with an
// interval, and its AUC minus the champion's.
type Delta struct {
	// N is the number of predictions behind it: the pairs (paired), the
	// challenger's predictions (Welch, beside NChampion).
	N, NChampion uint64
	// LogLoss is the mean difference of log loss (below 0: the challenger
	// is better); Lower and Upper its interval at Confidence, from its
	// standard error StdErr and, for Welch, the degrees of freedom DF
	// (+Inf for the normal approximation of the paired test). All NaN
	// when undefined (fewer than two predictions on a side).
	LogLoss, Lower, Upper, StdErr, DF float64
	Confidence                        float64
	// AUC is the challenger's AUC minus the champion's; NaN when either is.
	AUC float64
	// Paired: the same requests (a shadow); otherwise Welch's test of two
	// independent samples (phased-in releases).
	Paired bool
}

// Delta compares the pairs at confidence c in (0, 1) (DefaultConfidence
// when not): the mean log-loss difference with a normal-approximation
// interval from the differences' standard deviation.
func (p *Paired) Delta(c float64) Delta {
	c = confidence(c)
	d := Delta{N: p.diff.n, NChampion: p.diff.n, Paired: true, Confidence: c, DF: math.Inf(1),
		LogLoss: math.NaN(), Lower: math.NaN(), Upper: math.NaN(), StdErr: math.NaN(),
		AUC: p.challenger.AUC() - p.champion.AUC()}
	if p.diff.n == 0 {
		return d
	}
	d.LogLoss = p.diff.mean
	if p.diff.n < 2 {
		return d
	}
	d.StdErr = math.Sqrt(p.diff.variance() / float64(p.diff.n))
	z := math.Sqrt2 * math.Erfinv(c)
	d.Lower, d.Upper = d.LogLoss-z*d.StdErr, d.LogLoss+z*d.StdErr
	return d
}

// Welch compares challenger with champion when they saw different
// requests (phased-in releases), at confidence c in (0, 1)
// (DefaultConfidence when not): the difference of their mean log losses,
// Welch's standard error and degrees of freedom, and the Student t
// interval.
func Welch(champion, challenger *Binary, c float64) Delta {
	c = confidence(c)
	a, b := &champion.logLoss, &challenger.logLoss
	d := Delta{N: b.n, NChampion: a.n, Confidence: c, LogLoss: math.NaN(), Lower: math.NaN(), Upper: math.NaN(),
		StdErr: math.NaN(), DF: math.NaN(), AUC: challenger.AUC() - champion.AUC()}
	if a.n == 0 || b.n == 0 {
		return d
	}
	d.LogLoss = b.mean - a.mean
	if a.n < 2 || b.n < 2 {
		return d
	}
	va, vb := a.variance()/float64(a.n), b.variance()/float64(b.n)
	se2 := va + vb
	d.StdErr = math.Sqrt(se2)
	if se2 == 0 {
		// Both samples constant: the difference is exact.
		d.DF, d.Lower, d.Upper = math.Inf(1), d.LogLoss, d.LogLoss
		return d
	}
	d.DF = se2 * se2 / (va*va/float64(a.n-1) + vb*vb/float64(b.n-1))
	t := studentQuantile(0.5+c/2, d.DF)
	d.Lower, d.Upper = d.LogLoss-t*d.StdErr, d.LogLoss+t*d.StdErr
	return d
}

// confidence is c when in (0, 1), else DefaultConfidence.
func confidence(c float64) float64 {
	if c > 0 && c < 1 {
		return c
	}
	return DefaultConfidence
}

// studentQuantile is the q-quantile (0.5 ≤ q < 1) of Student's t with df
// degrees of freedom, found by bisection on its distribution function
// (the normal's when df is huge).
func studentQuantile(q, df float64) float64 {
	if df > 1e7 || math.IsInf(df, 1) {
		return math.Sqrt2 * math.Erfinv(2*q-1)
	}
	lo, hi := 0.0, 1.0
	for studentCDF(hi, df) < q {
		lo, hi = hi, 2*hi
		if hi > 1e300 {
			return math.Inf(1)
		}
	}
	for range 200 {
		mid := (lo + hi) / 2
		if studentCDF(mid, df) < q {
			lo = mid
		} else {
			hi = mid
		}
		if hi-lo <= 1e-12*hi {
			break
		}
	}
	return (lo + hi) / 2
}

// studentCDF is P(T ≤ t) for t ≥ 0 and Student's T with df degrees of
// freedom: 1 - I_x(df/2, 1/2)/2 with x = df/(df+t²).
func studentCDF(t, df float64) float64 {
	return 1 - regIncBeta(df/(df+t*t), df/2, 0.5)/2
}

// regIncBeta is the regularized incomplete beta function I_x(a, b), by its
// continued fraction (Numerical Recipes' betacf, modified Lentz).
func regIncBeta(x, a, b float64) float64 {
	switch {
	case x <= 0:
		return 0
	case x >= 1:
		return 1
	}
	la, _ := math.Lgamma(a + b)
	lb, _ := math.Lgamma(a)
	lc, _ := math.Lgamma(b)
	front := math.Exp(la - lb - lc + a*math.Log(x) + b*math.Log1p(-x))
	if x > (a+1)/(a+b+2) {
		return 1 - front*betaFraction(1-x, b, a)/b
	}
	return front * betaFraction(x, a, b) / a
}

// betaFraction is the continued fraction of the incomplete beta function.
func betaFraction(x, a, b float64) float64 {
	const tiny, eps = 1e-300, 1e-15
	c, d := 1.0, 1-(a+b)*x/(a+1)
	if math.Abs(d) < tiny {
		d = tiny
	}
	d = 1 / d
	h := d
	for m := 1; m <= 1000; m++ {
		fm := float64(m)
		num := fm * (b - fm) * x / ((a + 2*fm - 1) * (a + 2*fm))
		d = 1 + num*d
		if math.Abs(d) < tiny {
			d = tiny
		}
		c = 1 + num/c
		if math.Abs(c) < tiny {
			c = tiny
		}
		d = 1 / d
		h *= d * c
		num = -(a + fm) * (a + b + fm) * x / ((a + 2*fm) * (a + 2*fm + 1))
		d = 1 + num*d
		if math.Abs(d) < tiny {
			d = tiny
		}
		c = 1 + num/c
		if math.Abs(c) < tiny {
			c = tiny
		}
		d = 1 / d
		del := d * c
		h *= del
		if math.Abs(del-1) < eps {
			break
		}
	}
	return h
}
