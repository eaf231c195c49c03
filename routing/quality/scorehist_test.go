package quality

import (
	"maps"
	"math/rand/v2"
	"slices"
	"testing"
)

// histOf feeds bins ks (a positive for every third) to a histogram and to
// a map, the reference.
func histOf(ks []uint32) (*scoreHist, map[uint32]scoreBin) {
	h := &scoreHist{}
	ref := map[uint32]scoreBin{}
	for i, k := range ks {
		pos := uint64(0)
		if i%3 == 0 {
			pos = 1
		}
		h.add(k, pos, 1-pos)
		s := ref[k]
		s.pos += pos
		s.neg += 1 - pos
		ref[k] = s
	}
	return h, ref
}

// sameBins fails unless h holds exactly ref's bins, in order.
func sameBins(t *testing.T, h *scoreHist, ref map[uint32]scoreBin) {
	t.Helper()
	var got []uint32
	h.each(func(k uint32, s scoreBin) {
		if s != ref[k] {
			t.Fatalf("bin %d %+v, want %+v", k, s, ref[k])
		}
		if h.get(k) != s {
			t.Fatalf("get(%d) %+v, each gave %+v", k, h.get(k), s)
		}
		got = append(got, k)
	})
	want := slices.Sorted(func(yield func(uint32) bool) {
		for k := range ref {
			if !yield(k) {
				return
			}
		}
	})
	if !slices.Equal(got, want) || h.bins() != len(want) {
		t.Fatalf("bins %d (%d listed), want %d", h.bins(), len(got), len(want))
	}
}

func TestScoreHistTurnsDenseWhenItsBinsClusterAndKeepsEveryCount(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	var ks []uint32
	for range 20000 {
		ks = append(ks, 30000+uint32(r.IntN(3000)))
	}
	h, ref := histOf(ks)
	if h.pages == nil || h.sparse != nil {
		t.Fatalf("%d bins in use within 3000: still sparse", h.bins())
	}
	sameBins(t, h, ref)
}

func TestScoreHistStaysSparseWhenItsBinsAreSpreadThin(t *testing.T) {
	// Every bin used in its own page: dense, it would take a page (1 KiB)
	// per bin.
	var ks []uint32
	for k := uint32(0); k < aucBins; k += aucPageBins {
		ks = append(ks, k, k)
	}
	h, ref := histOf(ks)
	if h.pages != nil {
		t.Fatalf("%d bins, one per page: turned dense", h.bins())
	}
	sameBins(t, h, ref)
	if h.get(1) != (scoreBin{}) {
		t.Fatalf("an unused bin: %+v", h.get(1))
	}
}

func TestScoreHistMergesSparseAndDenseEitherWay(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	var dense, sparse []uint32
	for range 5000 {
		dense = append(dense, 20000+uint32(r.IntN(1000)))
	}
	for range 100 {
		sparse = append(sparse, uint32(r.IntN(aucBins)))
	}
	whole, ref := histOf(append(slices.Clone(dense), sparse...))
	sameBins(t, whole, ref)
	for _, order := range [][2][]uint32{{dense, sparse}, {sparse, dense}} {
		a, _ := histOf(order[0])
		b, _ := histOf(order[1])
		a.merge(b)
		// The positives of the reference are every third of the union in
		// its order: compare the totals of each bin instead.
		a.each(func(k uint32, s scoreBin) {
			if w := ref[k]; s.pos+s.neg != w.pos+w.neg {
				t.Fatalf("bin %d holds %d, want %d", k, s.pos+s.neg, w.pos+w.neg)
			}
		})
		if a.bins() != len(ref) {
			t.Fatalf("merged: %d bins, want %d", a.bins(), len(ref))
		}
	}
}

func TestBinaryEncodesTheSameHistogramSparseOrDense(t *testing.T) {
	r := rand.New(rand.NewPCG(5, 6))
	var b Binary
	for range 20000 {
		p := 0.01 + 0.02*r.Float64()
		b.Add(p, r.Float64() < p)
	}
	if b.scores.pages == nil {
		t.Fatal("20,000 pCTRs of 0.01 to 0.03: still sparse")
	}
	dense, _ := b.MarshalBinary()
	sparse := b
	sparse.scores = scoreHist{sparse: map[uint32]scoreBin{}, check: aucBins + 1}
	b.scores.each(func(k uint32, s scoreBin) { sparse.scores.sparse[k] = s })
	enc, _ := sparse.MarshalBinary()
	if string(enc) != string(dense) {
		t.Fatal("the sparse and the dense forms of one histogram encode differently")
	}
	if sparse.AUC() != b.AUC() || sparse.AUCErrorBound() != b.AUCErrorBound() {
		t.Fatalf("auc %v ± %v sparse, %v ± %v dense", sparse.AUC(), sparse.AUCErrorBound(), b.AUC(), b.AUCErrorBound())
	}
	var back Binary
	if err := back.UnmarshalBinary(dense); err != nil {
		t.Fatal(err)
	}
	if again, _ := back.MarshalBinary(); string(again) != string(dense) || back.scores.pages == nil {
		t.Fatalf("decoded: dense %v, same form %v", back.scores.pages != nil, string(again) == string(dense))
	}
}

func TestScoreHistMergedIntoItselfDoublesEveryBin(t *testing.T) {
	r := rand.New(rand.NewPCG(7, 8))
	var thin, clustered []uint32
	for range 100 {
		thin = append(thin, uint32(r.IntN(aucBins)))
	}
	for range 5000 {
		clustered = append(clustered, 20000+uint32(r.IntN(1000)))
	}
	// At the density check with its bins clustered: the merge's first add
	// turns it dense, while its bins are being read.
	atCheck := &scoreHist{sparse: map[uint32]scoreBin{}}
	for k := uint32(0); k < aucDenseMin; k++ {
		atCheck.sparse[10000+k] = scoreBin{pos: uint64(k % 2), neg: 1}
	}
	atCheckRef := maps.Clone(atCheck.sparse)
	sparse, sparseRef := histOf(thin)
	dense, denseRef := histOf(clustered)
	for _, c := range []struct {
		name string
		h    *scoreHist
		ref  map[uint32]scoreBin
	}{{"sparse", sparse, sparseRef}, {"dense", dense, denseRef}, {"sparse at its density check", atCheck, atCheckRef}} {
		c.h.merge(c.h)
		want := map[uint32]scoreBin{}
		for k, s := range c.ref {
			want[k] = scoreBin{pos: 2 * s.pos, neg: 2 * s.neg}
		}
		t.Run(c.name, func(t *testing.T) { sameBins(t, c.h, want) })
	}
	if atCheck.pages == nil {
		t.Fatal("the histogram at its density check stayed sparse: the case is not tested")
	}
}

func TestScoreHistCountsAndListsTheSameBinsWhenOneIsEmpty(t *testing.T) {
	h, ref := histOf([]uint32{3, 70, 70, 9000})
	h.add(500, 0, 0) // an empty bin: not in use
	sameBins(t, h, ref)
	var b Binary
	b.Add(0.2, true)
	b.Add(0.7, false)
	b.scores.add(1234, 0, 0)
	enc, err := b.MarshalBinary()
	if err != nil {
		t.Fatal(err)
	}
	var back Binary
	if err := back.UnmarshalBinary(enc); err != nil {
		t.Fatalf("a histogram with an empty bin does not decode: %v", err)
	}
}
