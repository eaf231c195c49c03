package xgboost

import (
	"fmt"
	"math"
)

// blockRows is how many rows go through each tree together, at most: a
// tree's nodes stay in cache while a block's rows walk it.
const blockRows = 64

// blockFloats bounds a block's copy of its rows (64 KiB): a model with
// many features has fewer rows per block.
const blockFloats = 1 << 14

// block is the scratch of one evaluation: a block of rows copied with a
// NaN after each row's features (the slot a leaf reads, see node), stride
// NumFeature+1. Forest.blocks keeps them between calls.
type block struct {
	x []float32
}

// rowsPerBlock is how many rows a block holds.
func (f *Forest) rowsPerBlock() int {
	return max(1, min(blockRows, blockFloats/(f.NumFeature+1)))
}

// getBlock takes a block from the forest's pool, or makes one.
func (f *Forest) getBlock() *block {
	if f.blocks != nil {
		if b, ok := f.blocks.Get().(*block); ok {
			return b
		}
	}
	return &block{x: make([]float32, f.rowsPerBlock()*(f.NumFeature+1))}
}

// putBlock gives b back to the forest's pool.
func (f *Forest) putBlock(b *block) {
	if f.blocks != nil {
		f.blocks.Put(b)
	}
}

// Margins writes the margins of rows rows of x (row-major, NumFeature
// values each, NaN for missing) to out (NumGroup values per row): the
// base margin plus each tree's leaf, summed in float32 in the trees'
// order. It allocates nothing (its scratch comes from a pool). out and x
// must have the sizes rows asks for; a mismatch is an error. A forest
// with categorical splits is evaluated by categoricalBlock, the others by
// the numeric walks below.
func (f *Forest) Margins(x []float32, rows int, out []float32) error {
	return f.eval(x, nil, rows, out, missing{})
}

// Margins64 is Margins on float64 values, converted to float32 as
// XGBoost's DMatrix does.
func (f *Forest) Margins64(x []float64, rows int, out []float32) error {
	return f.eval(nil, x, rows, out, missing{})
}

// missing is a value taken as missing besides NaN (a model entry's
// missing_value), when set.
type missing struct {
	value float32
	set   bool
}

// eval is Margins of x32, or of x64 when x32 is nil, with miss's value
// taken as missing.
func (f *Forest) eval(x32 []float32, x64 []float64, rows int, out []float32, miss missing) error {
	if err := f.checkSizes(len(x32)+len(x64), rows, len(out)); err != nil {
		return err
	}
	b := f.getBlock()
	if x32 != nil || x64 == nil {
		margins(f, x32, 0, rows, out, b, miss)
	} else {
		margins(f, x64, 0, rows, out, b, miss)
	}
	f.putBlock(b)
	return nil
}

func (f *Forest) checkSizes(nx, rows, nout int) error {
	if rows < 0 || nx != rows*f.NumFeature || nout != rows*f.NumGroup {
		return fmt.Errorf("xgboost: %d rows need %d input values and %d outputs, got %d and %d",
			rows, rows*f.NumFeature, rows*f.NumGroup, nx, nout)
	}
	return nil
}

// margins evaluates rows r0 to r1 of x into out (both whole), a block of
// rows at a time copied into b (as float32, miss's value made NaN).
func margins[T float32 | float64](f *Forest, x []T, r0, r1 int, out []float32, b *block, miss missing) {
	nf, ng := f.NumFeature, f.NumGroup
	stride := nf + 1
	per := f.rowsPerBlock()
	for i := range out[r0*ng : r1*ng] {
		out[r0*ng+i] = f.BaseMargin
	}
	nan := float32(math.NaN())
	for lo := r0; lo < r1; lo += per {
		hi := min(lo+per, r1)
		xs := b.x[:(hi-lo)*stride]
		for r := lo; r < hi; r++ {
			dst := xs[(r-lo)*stride : (r-lo+1)*stride]
			src := x[r*nf : (r+1)*nf]
			if miss.set {
				for j, v := range src {
					if dst[j] = float32(v); dst[j] == miss.value {
						dst[j] = nan
					}
				}
			} else {
				for j, v := range src {
					dst[j] = float32(v)
				}
			}
			dst[nf] = nan
		}
		if f.cats != nil {
			f.categoricalBlock(xs, stride, hi-lo, out[lo*ng:hi*ng])
		} else {
			f.evalBlock(xs, stride, hi-lo, out[lo*ng:hi*ng])
		}
	}
}

// lanes is how many walks evalBlock interleaves: rows through one tree,
// or trees for one row. Each step of a walk waits for the node it loads,
// then for the feature that node names; eight independent walks keep the
// core busy meanwhile (measured on the benchmark models: four lanes took
// 1.4 times as long at batch 256, sixteen were no faster).
const lanes = 8

// evalBlock adds every tree's leaves for the n rows of xs (stride floats
// each) to out (NumGroup per row): eight rows at a time walk each tree
// together, and the rows left over walk eight trees at a time each.
func (f *Forest) evalBlock(xs []float32, stride, n int, out []float32) {
	ng := f.NumGroup
	r := 0
	for ; r+lanes <= n; r += lanes {
		f.rows8(xs[r*stride:(r+lanes)*stride], stride, out[r*ng:(r+lanes)*ng])
	}
	for ; r < n; r++ {
		f.row(xs[r*stride:(r+1)*stride], out[r*ng:(r+1)*ng])
	}
}

// step moves row x from node i one level down its tree: to the left
// child, the right one (left+1) or, from a leaf, nowhere (its left is
// itself, its feature the row's NaN). It has no branch: right when the
// value is not below the threshold, or when it is missing (NaN compares
// false) and the split sends missing values right.
func step(nodes []node, x []float32, i uint32) uint32 {
	n := &nodes[i]
	v := x[n.feature&^missingRight]
	return n.left + (b2u(v >= n.threshold) | (b2u(v != v) & (n.feature >> 31)))
}

// b2u is 1 for true, 0 for false (compiled to a SETcc, not a branch).
func b2u(b bool) uint32 {
	if b {
		return 1
	}
	return 0
}

// rows8 walks eight rows (xs, stride floats each) through each tree in
// lockstep, as deep as the tree is, and adds the leaves they reach to
// out.
func (f *Forest) rows8(xs []float32, stride int, out []float32) {
	nodes, ng := f.nodes, f.NumGroup
	x0 := xs[0*stride : 1*stride]
	x1 := xs[1*stride : 2*stride]
	x2 := xs[2*stride : 3*stride]
	x3 := xs[3*stride : 4*stride]
	x4 := xs[4*stride : 5*stride]
	x5 := xs[5*stride : 6*stride]
	x6 := xs[6*stride : 7*stride]
	x7 := xs[7*stride : 8*stride]
	depth, group := f.depth, f.group
	for t, root := range f.roots {
		i0, i1, i2, i3 := root, root, root, root
		i4, i5, i6, i7 := root, root, root, root
		for d := depth[t]; d > 0; d-- {
			i0 = step(nodes, x0, i0)
			i1 = step(nodes, x1, i1)
			i2 = step(nodes, x2, i2)
			i3 = step(nodes, x3, i3)
			i4 = step(nodes, x4, i4)
			i5 = step(nodes, x5, i5)
			i6 = step(nodes, x6, i6)
			i7 = step(nodes, x7, i7)
		}
		g := int(group[t])
		out[0*ng+g] += nodes[i0].threshold
		out[1*ng+g] += nodes[i1].threshold
		out[2*ng+g] += nodes[i2].threshold
		out[3*ng+g] += nodes[i3].threshold
		out[4*ng+g] += nodes[i4].threshold
		out[5*ng+g] += nodes[i5].threshold
		out[6*ng+g] += nodes[i6].threshold
		out[7*ng+g] += nodes[i7].threshold
	}
}

// row walks one row x through eight trees at a time in lockstep, as deep
// as the deepest of them, and adds their leaves to out in the trees'
// order.
func (f *Forest) row(x []float32, out []float32) {
	nodes, roots, depth, group := f.nodes, f.roots, f.depth, f.group
	t := 0
	for ; t+lanes <= len(roots); t += lanes {
		i0, i1, i2, i3 := roots[t], roots[t+1], roots[t+2], roots[t+3]
		i4, i5, i6, i7 := roots[t+4], roots[t+5], roots[t+6], roots[t+7]
		d := max(depth[t], depth[t+1], depth[t+2], depth[t+3], depth[t+4], depth[t+5], depth[t+6], depth[t+7])
		for ; d > 0; d-- {
			i0 = step(nodes, x, i0)
			i1 = step(nodes, x, i1)
			i2 = step(nodes, x, i2)
			i3 = step(nodes, x, i3)
			i4 = step(nodes, x, i4)
			i5 = step(nodes, x, i5)
			i6 = step(nodes, x, i6)
			i7 = step(nodes, x, i7)
		}
		out[group[t]] += nodes[i0].threshold
		out[group[t+1]] += nodes[i1].threshold
		out[group[t+2]] += nodes[i2].threshold
		out[group[t+3]] += nodes[i3].threshold
		out[group[t+4]] += nodes[i4].threshold
		out[group[t+5]] += nodes[i5].threshold
		out[group[t+6]] += nodes[i6].threshold
		out[group[t+7]] += nodes[i7].threshold
	}
	for ; t < len(roots); t++ {
		i := roots[t]
		for d := depth[t]; d > 0; d-- {
			i = step(nodes, x, i)
		}
		out[group[t]] += nodes[i].threshold
	}
}

// PredictionWidth is the number of prediction values per row: NumGroup
// for multi:softprob, 1 otherwise.
func (f *Forest) PredictionWidth() int {
	if f.Objective == MultiSoftprob {
		return f.NumGroup
	}
	return 1
}

// Transform writes the objective's transform of margins (NumGroup per
// row, as Margins writes them) to out (PredictionWidth per row), as
// Booster.predict returns it. It allocates nothing.
func (f *Forest) Transform(margins []float32, rows int, out []float32) error {
	ng, w := f.NumGroup, f.PredictionWidth()
	if rows < 0 || len(margins) != rows*ng || len(out) != rows*w {
		return fmt.Errorf("xgboost: %d rows need %d margins and %d outputs, got %d and %d", rows, rows*ng, rows*w, len(margins), len(out))
	}
	switch f.Objective {
	case RegLogistic, BinaryLogistic:
		for i, m := range margins {
			out[i] = float32(1 / (1 + math.Exp(-float64(m))))
		}
	case CountPoisson:
		for i, m := range margins {
			out[i] = float32(math.Exp(float64(m)))
		}
	case MultiSoftprob:
		for r := 0; r < rows; r++ {
			softmax(margins[r*ng:(r+1)*ng], out[r*ng:(r+1)*ng])
		}
	case MultiSoftmax:
		for r := 0; r < rows; r++ {
			best := 0
			for k, m := range margins[r*ng : (r+1)*ng] {
				if m > margins[r*ng+best] {
					best = k
				}
			}
			out[r] = float32(best)
		}
	default: // reg:squarederror, binary:logitraw, rank:pairwise: the margin
		copy(out, margins)
	}
	return nil
}

// softmax writes the softmax of m to out (as long), subtracting the
// largest value first as XGBoost does.
func softmax(m, out []float32) {
	hi := m[0]
	for _, v := range m[1:] {
		hi = max(hi, v)
	}
	sum := 0.0
	for _, v := range m {
		sum += math.Exp(float64(v - hi))
	}
	for k, v := range m {
		out[k] = float32(math.Exp(float64(v-hi)) / sum)
	}
}
