package quality

import (
	"math"
	"math/rand/v2"
	"testing"
)

func TestStudentQuantileMatchesTables(t *testing.T) {
	for _, c := range []struct{ q, df, want float64 }{
		{0.975, 1, 12.7062}, {0.975, 2, 4.3027}, {0.975, 10, 2.2281}, {0.975, 30, 2.0423},
		{0.95, 5, 2.0150}, {0.995, 20, 2.8453}, {0.975, 1e9, 1.9600}, {0.975, math.Inf(1), 1.9600},
	} {
		if got := studentQuantile(c.q, c.df); math.Abs(got-c.want) > 1e-4 {
			t.Errorf("t(%v, df %v) = %v, want %v", c.q, c.df, got, c.want)
		}
	}
}

// pairedData are requests scored by a calibrated champion and a challenger
// that sees more of the truth (better) or is 1.5 times too high.
func pairedData(r *rand.Rand, n int, better bool) (champ, chall []sample) {
	for range n {
		truth := 0.005 + 0.04*r.Float64()
		pos := r.Float64() < truth
		c := 0.025
		ch := truth
		if !better {
			ch = 1.5 * c
		}
		champ = append(champ, sample{c, pos})
		chall = append(chall, sample{ch, pos})
	}
	return champ, chall
}

func TestPairedDeltaMatchesDirectComputation(t *testing.T) {
	r := rand.New(rand.NewPCG(11, 12))
	for _, better := range []bool{true, false} {
		champ, chall := pairedData(r, 40000, better)
		var p Paired
		var diffs []float64
		for i := range champ {
			p.Add(champ[i].p, chall[i].p, champ[i].pos)
			diffs = append(diffs, logLoss(chall[i].p, chall[i].pos)-logLoss(champ[i].p, champ[i].pos))
		}
		var mean, ss float64
		for _, d := range diffs {
			mean += d
		}
		mean /= float64(len(diffs))
		for _, d := range diffs {
			ss += (d - mean) * (d - mean)
		}
		se := math.Sqrt(ss / float64(len(diffs)-1) / float64(len(diffs)))
		d := p.Delta(0)
		if d.N != uint64(len(diffs)) || !d.Paired || d.Confidence != 0.95 {
			t.Fatalf("delta %+v", d)
		}
		if !close(d.LogLoss, mean, 1e-9) || !close(d.StdErr, se, 1e-9) ||
			!close(d.Lower, mean-1.959963984540054*se, 1e-9) || !close(d.Upper, mean+1.959963984540054*se, 1e-9) {
			t.Fatalf("delta %+v, want mean %v se %v", d, mean, se)
		}
		if want := exactAUC(chall) - exactAUC(champ); math.Abs(d.AUC-want) > 0.001 {
			t.Fatalf("auc delta %v, want %v", d.AUC, want)
		}
		// The better challenger's interval is below 0, the miscalibrated one's above.
		if better != (d.Upper < 0) || !better != (d.Lower > 0) {
			t.Errorf("better %v: interval [%v, %v]", better, d.Lower, d.Upper)
		}
		if d99 := p.Delta(0.99); d99.Upper-d99.Lower <= d.Upper-d.Lower {
			t.Errorf("a 99 %% interval [%v, %v] no wider than 95 %% [%v, %v]", d99.Lower, d99.Upper, d.Lower, d.Upper)
		}
	}
}

func TestPairedMergeEqualsOneAccumulator(t *testing.T) {
	r := rand.New(rand.NewPCG(13, 14))
	champ, chall := pairedData(r, 20000, true)
	var whole Paired
	parts := make([]Paired, 4)
	for i := range champ {
		whole.Add(champ[i].p, chall[i].p, champ[i].pos)
		parts[r.IntN(4)].Add(champ[i].p, chall[i].p, champ[i].pos)
	}
	var merged Paired
	for i := range parts {
		merged.Merge(&parts[i])
	}
	a, b := merged.Delta(0), whole.Delta(0)
	if a.N != b.N || a.AUC != b.AUC || !close(a.LogLoss, b.LogLoss, 1e-9) || !close(a.StdErr, b.StdErr, 1e-9) {
		t.Fatalf("merged %+v, one accumulator %+v", a, b)
	}
}

func TestPairedWithoutEnoughPairsIsUndefined(t *testing.T) {
	var p Paired
	if d := p.Delta(0); !math.IsNaN(d.LogLoss) || !math.IsNaN(d.Upper) || !math.IsNaN(d.AUC) {
		t.Fatalf("empty: %+v", d)
	}
	p.Add(0.1, 0.2, true)
	p.Add(math.NaN(), 0.2, true)
	if d := p.Delta(0); d.N != 1 || math.IsNaN(d.LogLoss) || !math.IsNaN(d.Upper) || p.Invalid() != 1 {
		t.Fatalf("one pair: %+v", d)
	}
}

func TestWelchMatchesDirectComputation(t *testing.T) {
	r := rand.New(rand.NewPCG(15, 16))
	var a, b Binary
	var la, lb []float64
	for range 300 {
		p := 0.2 + 0.6*r.Float64()
		pos := r.Float64() < p
		a.Add(p, pos)
		la = append(la, logLoss(p, pos))
	}
	for range 50 {
		p := 0.5
		pos := r.Float64() < 0.6
		b.Add(p, pos)
		lb = append(lb, logLoss(p, pos))
	}
	mv := func(xs []float64) (m, v float64) {
		for _, x := range xs {
			m += x
		}
		m /= float64(len(xs))
		for _, x := range xs {
			v += (x - m) * (x - m)
		}
		return m, v / float64(len(xs)-1)
	}
	ma, va := mv(la)
	mb, vb := mv(lb)
	sa, sb := va/300, vb/50
	se := math.Sqrt(sa + sb)
	df := (sa + sb) * (sa + sb) / (sa*sa/299 + sb*sb/49)
	d := Welch(&a, &b, 0.95)
	if d.Paired || d.N != 50 || d.NChampion != 300 || !close(d.LogLoss, mb-ma, 1e-9) || !close(d.StdErr, se, 1e-9) || !close(d.DF, df, 1e-9) {
		t.Fatalf("welch %+v, want delta %v se %v df %v", d, mb-ma, se, df)
	}
	tq := studentQuantile(0.975, df)
	if tq <= 1.96 || !close(d.Upper, mb-ma+tq*se, 1e-9) || !close(d.Lower, mb-ma-tq*se, 1e-9) {
		t.Fatalf("interval [%v, %v], t %v", d.Lower, d.Upper, tq)
	}
	if !close(d.AUC, b.AUC()-a.AUC(), 1e-12) {
		t.Fatalf("auc delta %v", d.AUC)
	}
	var empty Binary
	if e := Welch(&empty, &b, 0); !math.IsNaN(e.LogLoss) || !math.IsNaN(e.Lower) {
		t.Fatalf("against nothing: %+v", e)
	}
}
