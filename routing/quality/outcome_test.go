package quality

import (
	"math"
	"math/rand/v2"
	"slices"
	"testing"
)

// sample is one scored prediction: p, its outcome.
type sample struct {
	p   float64
	pos bool
}

// exactAUC is the Mann-Whitney AUC of xs (clamped to [0, 1]), ties
// counting half, by sorting.
func exactAUC(xs []sample) float64 {
	s := slices.Clone(xs)
	for i := range s {
		s[i].p = min(max(s[i].p, 0), 1)
	}
	slices.SortFunc(s, func(a, b sample) int {
		switch {
		case a.p < b.p:
			return -1
		case a.p > b.p:
			return 1
		}
		return 0
	})
	var above, negBelow, pos, neg float64
	for i := 0; i < len(s); {
		j := i
		var tp, tn float64
		for ; j < len(s) && s[j].p == s[i].p; j++ {
			if s[j].pos {
				tp++
			} else {
				tn++
			}
		}
		above += tp*negBelow + tp*tn/2
		negBelow += tn
		pos += tp
		neg += tn
		i = j
	}
	return above / (pos * neg)
}

// offline are the figures of xs by their direct formulas.
type offline struct {
	count, positives                             float64
	mean, rate, calibration, ece, logloss, brier float64
}

func offlineOf(xs []sample) offline {
	var o offline
	var bins [EceBins]struct{ n, pos, sum float64 }
	for _, x := range xs {
		p := min(max(x.p, 0), 1)
		y := 0.0
		if x.pos {
			y = 1
		}
		o.count++
		o.positives += y
		o.mean += p
		o.brier += (p - y) * (p - y)
		q := min(max(p, 1e-15), 1-1e-15)
		o.logloss += -(y*math.Log(q) + (1-y)*math.Log(1-q))
		b := &bins[min(int(p*10), 9)]
		b.n++
		b.pos += y
		b.sum += p
	}
	for _, b := range bins {
		if b.n > 0 {
			o.ece += b.n / o.count * math.Abs(b.sum/b.n-b.pos/b.n)
		}
	}
	o.mean /= o.count
	o.rate = o.positives / o.count
	o.calibration = o.mean / o.rate
	o.logloss /= o.count
	o.brier /= o.count
	return o
}

// close reports whether got is within tol of want, relatively (absolutely
// below 1).
func close(got, want, tol float64) bool {
	return math.Abs(got-want) <= tol*max(1, math.Abs(want))
}

// datasets are synthetic scored predictions, realistic and adversarial.
func datasets(r *rand.Rand) map[string][]sample {
	bern := func(p float64) bool { return r.Float64() < p }
	out := map[string][]sample{}
	var calibrated, pctr, ties, shifted, extreme []sample
	for range 20000 {
		p := r.Float64()
		calibrated = append(calibrated, sample{p, bern(p)})
	}
	for range 50000 {
		// pCTRs of 0.01 to 0.03, informative: the true rate is p itself.
		p := 0.01 + 0.02*r.Float64()
		pctr = append(pctr, sample{p, bern(p)})
	}
	for range 20000 {
		// Few distinct values: most pairs are exact ties.
		p := float64(r.IntN(20)+1) / 64
		ties = append(ties, sample{p, bern(p)})
	}
	for range 20000 {
		// Positives scored slightly higher than negatives in a narrow range.
		pos := bern(0.02)
		p := 0.015 + 0.01*r.Float64()
		if pos {
			p += 0.001 * r.Float64()
		}
		shifted = append(shifted, sample{p, pos})
	}
	for range 5000 {
		// Out of range and at the ends.
		p := []float64{-0.5, 0, 1e-300, 1e-9, 0.5, 1 - 1e-12, 1, 1.5}[r.IntN(8)]
		extreme = append(extreme, sample{p, bern(0.5)})
	}
	out["calibrated"], out["pctr 0.01-0.03"], out["exact ties"], out["shifted narrow"], out["extreme"] =
		calibrated, pctr, ties, shifted, extreme
	return out
}

func feed(xs []sample) *Binary {
	var b Binary
	for _, x := range xs {
		b.Add(x.p, x.pos)
	}
	return &b
}

func TestBinaryMatchesOfflineFiguresAndExactAUC(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	for name, xs := range datasets(r) {
		t.Run(name, func(t *testing.T) {
			b, o := feed(xs), offlineOf(xs)
			if float64(b.Count()) != o.count || float64(b.Positives()) != o.positives {
				t.Fatalf("count %d positives %d, want %v %v", b.Count(), b.Positives(), o.count, o.positives)
			}
			for _, c := range []struct {
				name      string
				got, want float64
			}{
				{"mean_prediction", b.MeanPrediction(), o.mean},
				{"observed_rate", b.ObservedRate(), o.rate},
				{"calibration", b.Calibration(), o.calibration},
				{"ece", b.ECE(), o.ece},
				{"logloss", b.LogLoss(), o.logloss},
				{"brier", b.Brier(), o.brier},
			} {
				if !close(c.got, c.want, 1e-9) {
					t.Errorf("%s %v, want %v", c.name, c.got, c.want)
				}
			}
			exact, got, bound := exactAUC(xs), b.AUC(), b.AUCErrorBound()
			// Predictions beyond log-odds ±16 share the end bins: only
			// the bound holds for them.
			if name != "extreme" && math.Abs(got-exact) > 0.001 {
				t.Errorf("auc %v, exact %v: off by %v", got, exact, got-exact)
			}
			if math.Abs(got-exact) > bound+1e-12 {
				t.Errorf("auc %v off the exact %v by more than its bound %v", got, exact, bound)
			}
			t.Logf("auc %.6f exact %.6f error %.2g bound %.2g, %d bins", got, exact, got-exact, bound, b.scores.bins())
		})
	}
}

// TestBinaryAUCErrorStaysWithinItsBoundOnAdversarialData: predictions whose
// positives and negatives differ by less than a bin are ordered by the
// exact AUC and tied by the binned one; the reported bound covers it.
func TestBinaryAUCErrorStaysWithinItsBoundOnAdversarialData(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	var xs []sample
	for range 10000 {
		p := 0.0123 + 1e-9*r.Float64()
		xs = append(xs, sample{p, false}, sample{p + 1e-8, true})
	}
	b := feed(xs)
	exact, got, bound := exactAUC(xs), b.AUC(), b.AUCErrorBound()
	if exact < 0.99 || got != 0.5 || bound != 0.5 {
		t.Fatalf("exact %v binned %v bound %v: want about 1, 0.5 (one bin), 0.5", exact, got, bound)
	}
	if math.Abs(got-exact) > bound+1e-12 {
		t.Fatalf("error %v over the bound %v", got-exact, bound)
	}
	// Two bins apart, they are ordered exactly.
	var ys []sample
	for _, x := range xs {
		if x.pos {
			x.p *= 1.01
		}
		ys = append(ys, x)
	}
	if b := feed(ys); b.AUC() != 1 || b.AUCErrorBound() != 0 {
		t.Fatalf("predictions 1%% apart: auc %v bound %v, want 1 and 0", b.AUC(), b.AUCErrorBound())
	}
}

func TestBinaryTable(t *testing.T) {
	nan := math.NaN()
	for _, c := range []struct {
		name                                string
		xs                                  []sample
		count, positives, clamped           uint64
		mean, rate, calibration, auc, brier float64
	}{
		{"empty", nil, 0, 0, 0, nan, nan, nan, nan, nan},
		{"no positive", []sample{{0.2, false}, {0.4, false}}, 2, 0, 0, 0.3, 0, nan, nan, 0.1},
		{"no negative", []sample{{0.5, true}}, 1, 1, 0, 0.5, 1, 0.5, nan, 0.25},
		{"perfect", []sample{{0.1, false}, {0.35, false}, {0.4, true}, {0.8, true}}, 4, 2, 0, 0.4125, 0.5, 0.825, 1,
			(0.01 + 0.35*0.35 + 0.36 + 0.04) / 4},
		{"one tie", []sample{{0.5, true}, {0.5, false}}, 2, 1, 0, 0.5, 0.5, 1, 0.5, 0.25},
		{"inverted", []sample{{0.9, false}, {0.1, true}}, 2, 1, 0, 0.5, 0.5, 1, 0, 0.81},
		{"clamped", []sample{{-1, false}, {2, true}}, 2, 1, 2, 0.5, 0.5, 1, 1, 0},
	} {
		t.Run(c.name, func(t *testing.T) {
			b := feed(c.xs)
			if b.Count() != c.count || b.Positives() != c.positives || b.Clamped() != c.clamped {
				t.Fatalf("count %d positives %d clamped %d", b.Count(), b.Positives(), b.Clamped())
			}
			for _, f := range []struct {
				name      string
				got, want float64
			}{{"mean", b.MeanPrediction(), c.mean}, {"rate", b.ObservedRate(), c.rate},
				{"calibration", b.Calibration(), c.calibration}, {"auc", b.AUC(), c.auc}, {"brier", b.Brier(), c.brier}} {
				if math.IsNaN(f.want) != math.IsNaN(f.got) || (!math.IsNaN(f.want) && !close(f.got, f.want, 1e-12)) {
					t.Errorf("%s %v, want %v", f.name, f.got, f.want)
				}
			}
		})
	}
}

func TestBinaryLeavesOutNaNAndClipsLogLoss(t *testing.T) {
	var b Binary
	b.Add(math.NaN(), true)
	b.Add(0, true) // a certain mistake: clipped to -ln(1e-15)
	if b.Invalid() != 1 || b.Count() != 1 {
		t.Fatalf("invalid %d count %d", b.Invalid(), b.Count())
	}
	if want := -math.Log(1e-15); !close(b.LogLoss(), want, 1e-12) {
		t.Fatalf("logloss %v, want %v", b.LogLoss(), want)
	}
}

func TestBinaryBinsAreTheReliabilityDiagram(t *testing.T) {
	b := feed([]sample{{0.05, false}, {0.07, true}, {0.95, true}, {1, true}, {0.55, false}})
	bins := b.Bins()
	if bins[0].Count != 2 || bins[0].Positives != 1 || !close(bins[0].MeanPrediction, 0.06, 1e-12) || bins[0].ObservedRate != 0.5 {
		t.Errorf("bin 0 %+v", bins[0])
	}
	if bins[9].Count != 2 || bins[9].ObservedRate != 1 || bins[9].Upper != 1 {
		t.Errorf("bin 9 (1 included) %+v", bins[9])
	}
	if bins[3].Count != 0 || !math.IsNaN(bins[3].MeanPrediction) {
		t.Errorf("empty bin %+v", bins[3])
	}
	// (2·|0.06-0.5| + 1·|0.55-0| + 2·|0.975-1|)/5
	if want := (2*0.44 + 0.55 + 2*0.025) / 5; !close(b.ECE(), want, 1e-12) {
		t.Errorf("ece %v, want %v", b.ECE(), want)
	}
}

// split cuts xs into k random parts.
func split(r *rand.Rand, xs []sample, k int) [][]sample {
	parts := make([][]sample, k)
	for _, x := range xs {
		i := r.IntN(k)
		parts[i] = append(parts[i], x)
	}
	return parts
}

func TestBinaryMergeEqualsOneAccumulatorOverTheUnion(t *testing.T) {
	r := rand.New(rand.NewPCG(5, 6))
	for name, xs := range datasets(r) {
		whole := feed(xs)
		var merged Binary
		for _, part := range split(r, xs, 7) {
			merged.Merge(feed(part))
		}
		if merged.count != whole.count || merged.positives != whole.positives || merged.clamped != whole.clamped ||
			merged.logLoss.n != whole.logLoss.n || merged.ece[3].n != whole.ece[3].n || merged.scores.bins() != whole.scores.bins() {
			t.Fatalf("%s: counts differ: %+v vs %+v", name, merged.ece, whole.ece)
		}
		whole.scores.each(func(k uint32, v scoreBin) {
			if merged.scores.get(k) != v {
				t.Fatalf("%s: bin %d %+v, want %+v", name, k, merged.scores.get(k), v)
			}
		})
		if merged.AUC() != whole.AUC() {
			t.Errorf("%s: auc %v, want %v", name, merged.AUC(), whole.AUC())
		}
		for _, f := range [][2]float64{{merged.MeanPrediction(), whole.MeanPrediction()}, {merged.LogLoss(), whole.LogLoss()},
			{merged.Brier(), whole.Brier()}, {merged.ECE(), whole.ECE()}, {merged.logLoss.variance(), whole.logLoss.variance()}} {
			if !close(f[0], f[1], 1e-9) {
				t.Errorf("%s: merged %v, one accumulator %v", name, f[0], f[1])
			}
		}
	}
}

func TestNumericMatchesDirectFormulasAndMerges(t *testing.T) {
	r := rand.New(rand.NewPCG(7, 8))
	var whole Numeric
	parts := make([]Numeric, 5)
	var sum, abs, sq float64
	n := 0
	for range 30000 {
		label := r.ExpFloat64() * 12.5
		p := label + r.NormFloat64()*3 + 0.5
		whole.Add(p, label)
		parts[r.IntN(5)].Add(p, label)
		e := p - label
		sum, abs, sq, n = sum+e, abs+math.Abs(e), sq+e*e, n+1
	}
	whole.Add(math.Inf(1), 1)
	whole.Add(1, math.NaN())
	if whole.Count() != uint64(n) || whole.Invalid() != 2 {
		t.Fatalf("count %d invalid %d", whole.Count(), whole.Invalid())
	}
	if !close(whole.MAE(), abs/float64(n), 1e-9) || !close(whole.RMSE(), math.Sqrt(sq/float64(n)), 1e-9) ||
		!close(whole.Bias(), sum/float64(n), 1e-9) {
		t.Fatalf("mae %v rmse %v bias %v", whole.MAE(), whole.RMSE(), whole.Bias())
	}
	var merged Numeric
	for i := range parts {
		merged.Merge(&parts[i])
	}
	if merged.Count() != uint64(n) || !close(merged.MAE(), whole.MAE(), 1e-9) || !close(merged.RMSE(), whole.RMSE(), 1e-9) ||
		!close(merged.Bias(), whole.Bias(), 1e-9) {
		t.Fatalf("merged %+v, whole %+v", merged, whole)
	}
	var empty Numeric
	if !math.IsNaN(empty.MAE()) || !math.IsNaN(empty.RMSE()) || !math.IsNaN(empty.Bias()) {
		t.Fatal("figures of nothing are not NaN")
	}
}

func TestMomentsMergeIsStableFarFromZero(t *testing.T) {
	// Values around 1e9 with a spread of 1: a naive sum of squares loses it.
	r := rand.New(rand.NewPCG(9, 10))
	var whole, a, b moments
	var xs []float64
	for i := range 10000 {
		x := 1e9 + r.NormFloat64()
		xs = append(xs, x)
		whole.add(x)
		if i%3 == 0 {
			a.add(x)
		} else {
			b.add(x)
		}
	}
	a.merge(&b)
	var mean, ss float64
	for _, x := range xs {
		mean += x
	}
	mean /= float64(len(xs))
	for _, x := range xs {
		ss += (x - mean) * (x - mean)
	}
	want := ss / float64(len(xs)-1)
	if !close(whole.variance(), want, 1e-6) || !close(a.variance(), want, 1e-6) || a.n != whole.n {
		t.Fatalf("variance %v merged %v, want %v", whole.variance(), a.variance(), want)
	}
}

func BenchmarkBinaryAdd(b *testing.B) {
	r := rand.New(rand.NewPCG(1, 1))
	ps := make([]float64, 4096)
	for i := range ps {
		ps[i] = 0.01 + 0.02*r.Float64()
	}
	var acc Binary
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		p := ps[i&4095]
		acc.Add(p, i%50 == 0)
	}
}

func BenchmarkPairedAdd(b *testing.B) {
	r := rand.New(rand.NewPCG(1, 1))
	ps := make([]float64, 4096)
	for i := range ps {
		ps[i] = 0.01 + 0.02*r.Float64()
	}
	var acc Paired
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		p := ps[i&4095]
		acc.Add(p, p*1.1, i%50 == 0)
	}
}
