package xgboost

import (
	"fmt"
	"math"
)

// blockRows is how many rows go through each tree together: a tree's
// nodes stay in cache while a block's rows walk it.
const blockRows = 64

// Margins writes the margins of rows rows of x (row-major, NumFeature
// values each, NaN for missing) to out (NumGroup values per row): the
// base margin plus each tree's leaf, summed in float32 in the trees'
// order. It allocates nothing. out and x must have the sizes rows asks
// for; a mismatch is an error. A forest with categorical splits is
// evaluated by categoricalMargins, the others by the numeric loop here.
func (f *Forest) Margins(x []float32, rows int, out []float32) error {
	if rows < 0 || len(x) != rows*f.NumFeature || len(out) != rows*f.NumGroup {
		return fmt.Errorf("xgboost: %d rows need %d input values and %d outputs, got %d and %d",
			rows, rows*f.NumFeature, rows*f.NumGroup, len(x), len(out))
	}
	if f.cats != nil {
		f.categoricalMargins(x, rows, out)
		return nil
	}
	for i := range out {
		out[i] = f.BaseMargin
	}
	nodes, nf, ng := f.nodes, f.NumFeature, f.NumGroup
	for r0 := 0; r0 < rows; r0 += blockRows {
		r1 := min(r0+blockRows, rows)
		for t, root := range f.roots {
			g := int(f.group[t])
			for r := r0; r < r1; r++ {
				row := x[r*nf : r*nf+nf : r*nf+nf]
				i := root
				for {
					n := &nodes[i]
					if n.left == 0 {
						out[r*ng+g] += n.threshold
						break
					}
					v := row[n.feature]
					switch {
					case v < n.threshold:
						i = n.left
					case v >= n.threshold:
						i = n.left + 1
					case n.defaultLeft: // NaN: missing
						i = n.left
					default:
						i = n.left + 1
					}
				}
			}
		}
	}
	return nil
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
