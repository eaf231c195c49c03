package quality

import (
	"cmp"
	"math/bits"
	"slices"
)

// scoreHist is the AUC's score histogram (Binary): the positives and
// negatives of each of the aucBins bins in use. The zero value is empty
// and ready.
//
// It starts as a map of the bins in use, small when they are few or
// spread thin (a minute's predictions of a quiet series), and turns dense
// once they fill pages of aucPageBins bins at least half on average (the
// predictions of a busy series cluster in a narrow range of log-odds):
// then a bin is an index into its page, allocated when a bin of it is
// first used, with no hashing and no lookup to write it back. Dense, it
// takes its pages' directory (8 KiB) and 1 KiB for each page with a bin
// in use: when it turns dense at most about twice the memory of the map's
// entries, but each bin used later in a page not yet in use costs a page,
// up to all aucPages of them (1 MiB).
type scoreHist struct {
	// sparse are the bins in use, while not dense (nil when none).
	sparse map[uint32]scoreBin
	// pages, once dense (non-nil), are the bins by page: page i holds bins
	// [i*aucPageBins, (i+1)*aucPageBins), nil while none of them is used.
	pages []*scorePage
	// check is the number of sparse bins at which the density is looked at
	// next.
	check int
}

// The dense histogram's pages, and when a sparse one becomes dense.
const (
	// aucPageBins bins make a page (1 KiB), aucPages pages the histogram.
	aucPageBins = 64
	aucPages    = aucBins / aucPageBins
	// aucDenseMin is the fewest bins in use at which a histogram turns
	// dense (its map is then about 16 KiB, its pages' directory 8 KiB).
	aucDenseMin = 512
)

// scorePage is one page of a dense histogram.
type scorePage [aucPageBins]scoreBin

// add counts pos positives and neg negatives in bin k.
func (h *scoreHist) add(k uint32, pos, neg uint64) {
	if h.pages != nil {
		pg := h.pages[k/aucPageBins]
		if pg == nil {
			pg = new(scorePage)
			h.pages[k/aucPageBins] = pg
		}
		s := &pg[k%aucPageBins]
		s.pos += pos
		s.neg += neg
		return
	}
	if h.sparse == nil {
		h.sparse = make(map[uint32]scoreBin)
	}
	s := h.sparse[k]
	s.pos += pos
	s.neg += neg
	h.sparse[k] = s
	if len(h.sparse) >= max(h.check, aucDenseMin) {
		h.densify()
	}
}

// densify turns the histogram dense when its bins fill the pages they
// fall in at least half on average; else it looks again at twice as many
// bins.
func (h *scoreHist) densify() {
	var used [aucPages / 64]uint64
	for k := range h.sparse {
		used[k/aucPageBins/64] |= 1 << (k / aucPageBins % 64)
	}
	pages := 0
	for _, w := range used {
		pages += bits.OnesCount64(w)
	}
	if pages*aucPageBins > 2*len(h.sparse) {
		h.check = 2 * len(h.sparse)
		return
	}
	sparse := h.sparse
	h.sparse, h.pages = nil, make([]*scorePage, aucPages)
	for k, s := range sparse {
		h.add(k, s.pos, s.neg)
	}
}

// merge adds o's bins; o may be h, whose counts then double.
func (h *scoreHist) merge(o *scoreHist) {
	o.each(func(k uint32, s scoreBin) { h.add(k, s.pos, s.neg) })
}

// bins is the number of bins in use: those each lists (an empty bin is
// not in use, sparse or dense).
func (h *scoreHist) bins() int {
	n := 0
	if h.pages == nil {
		for _, s := range h.sparse {
			if s.pos+s.neg > 0 {
				n++
			}
		}
		return n
	}
	h.each(func(uint32, scoreBin) { n++ })
	return n
}

// each calls fn with each bin in use, in order, as it was when each
// began: fn may add to bin k of h, even turn h dense (a merge of h into
// itself).
func (h *scoreHist) each(fn func(k uint32, s scoreBin)) {
	if h.pages == nil {
		type bin struct {
			k uint32
			s scoreBin
		}
		bins := make([]bin, 0, len(h.sparse))
		for k, s := range h.sparse {
			if s.pos+s.neg > 0 {
				bins = append(bins, bin{k, s})
			}
		}
		slices.SortFunc(bins, func(a, b bin) int { return cmp.Compare(a.k, b.k) })
		for _, b := range bins {
			fn(b.k, b.s)
		}
		return
	}
	for i, pg := range h.pages {
		if pg == nil {
			continue
		}
		for j := range pg {
			if s := pg[j]; s.pos+s.neg > 0 {
				fn(uint32(i*aucPageBins+j), s)
			}
		}
	}
}

// get is bin k.
func (h *scoreHist) get(k uint32) scoreBin {
	if h.pages == nil {
		return h.sparse[k]
	}
	if pg := h.pages[k/aucPageBins]; pg != nil {
		return pg[k%aucPageBins]
	}
	return scoreBin{}
}
