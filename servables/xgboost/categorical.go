package xgboost

import "fmt"

// maxCategory bounds the categories a split may list: XGBoost takes a
// value of 2^24 or more (beyond the integers a float32 holds exactly) for
// no category, so a split's category there could never match.
const maxCategory = 1 << 24

// maxCategoryWords bounds the words of all a forest's category sets
// together (64 MiB), as each set is a bitset up to its largest category.
const maxCategoryWords = 1 << 24

// catSet is the set of categories a categorical split sends right:
// words[off:off+n] of its forest's categories, category c being bit c%32
// of word c/32. n is 0 for a numeric split or a leaf (a categorical split
// lists one category at least).
type catSet struct{ off, n uint32 }

// categories are the categorical splits of a forest, by node: sets has one
// entry per node of Forest.nodes.
type categories struct {
	sets  []catSet
	words []uint32
}

// cover gives the nodes up to n (those of trees without categorical
// splits) their empty entries.
func (c *categories) cover(n int) {
	if len(c.sets) < n {
		c.sets = append(c.sets, make([]catSet, n-len(c.sets))...)
	}
}

// treeCategories checks a tree's categorical tables (split_type,
// categories_nodes, categories_segments, categories_sizes, categories)
// against each other and the tree's n nodes, as XGBoost writes them: the
// split_type of every node, 0 (numeric) or 1 (categorical); the
// categorical nodes in increasing order, each with its segment of
// categories, one at least, each from 0 to below maxCategory. A
// categorical node may be a leaf: a split XGBoost's pruner undid. It
// returns each inner node's categories (a slice of t.Categories, nil for
// a numeric node or a leaf), or nil when no inner node is categorical.
func treeCategories(t *jsonTree, n int) ([][]int64, error) {
	if t.SplitType != nil && len(t.SplitType) != n {
		return nil, invalid("split_type has %d entries, left_children %d", len(t.SplitType), n)
	}
	m := len(t.CategoriesNodes)
	if len(t.CategoriesSegment) != m || len(t.CategoriesSizes) != m {
		return nil, invalid("categories_nodes, categories_segments and categories_sizes have %d, %d and %d entries",
			m, len(t.CategoriesSegment), len(t.CategoriesSizes))
	}
	numCat := 0
	for i, st := range t.SplitType {
		switch st {
		case 0:
		case 1:
			numCat++
		default:
			return nil, invalid("node %d: split_type %d (0 numeric, 1 categorical)", i, st)
		}
	}
	if numCat != m {
		return nil, invalid("%d nodes of split_type 1 (categorical), %d in categories_nodes", numCat, m)
	}
	if m == 0 {
		if len(t.Categories) > 0 {
			return nil, invalid("%d categories without a categorical split", len(t.Categories))
		}
		return nil, nil
	}
	cats := make([][]int64, n)
	inner := 0 // the categorical splits that are inner nodes
	prev := int64(-1)
	for k, nd := range t.CategoriesNodes {
		if nd <= prev || nd >= int64(n) {
			return nil, invalid("categories_nodes[%d] is %d: not a node after %d and below %d", k, nd, prev, n)
		}
		prev = nd
		if t.SplitType[nd] != 1 {
			return nil, invalid("node %d is in categories_nodes, its split_type is %d", nd, t.SplitType[nd])
		}
		seg, size := t.CategoriesSegment[k], t.CategoriesSizes[k]
		if seg < 0 || size < 1 || seg > int64(len(t.Categories)) || size > int64(len(t.Categories))-seg {
			return nil, invalid("node %d: categories %d to %d of the tree's %d (a categorical split lists one or more)",
				nd, seg, seg+size, len(t.Categories))
		}
		list := t.Categories[seg : seg+size]
		for _, c := range list {
			if c < 0 || c >= maxCategory {
				return nil, invalid("node %d: category %d is outside 0..%d", nd, c, maxCategory-1)
			}
		}
		// A leaf keeps the split_type and categories of the split it was
		// before XGBoost's pruner (updater "prune") made it a leaf: they
		// are checked, and unused.
		if t.LeftChildren[nd] == -1 && t.RightChildren[nd] == -1 {
			continue
		}
		cats[nd] = list
		inner++
	}
	if inner == 0 {
		return nil, nil
	}
	return cats, nil
}

// addCategories records the category sets of the tree whose nodes were
// appended from base on, queue[k] being the tree's own index of node
// base+k, and cats its categories by its own index (treeCategories).
func (f *Forest) addCategories(base int, queue []int64, cats [][]int64) error {
	if f.cats == nil {
		f.cats = &categories{}
	}
	c := f.cats
	c.cover(base + len(queue))
	for k, src := range queue {
		list := cats[src]
		if list == nil {
			continue
		}
		hi := list[0]
		for _, v := range list {
			hi = max(hi, v)
		}
		words := int(hi/32) + 1
		if len(c.words)+words > maxCategoryWords {
			return fmt.Errorf("%w: categorical splits whose category sets need more than %d MiB", ErrUnsupported, maxCategoryWords*4>>20)
		}
		off := len(c.words)
		c.words = append(c.words, make([]uint32, words)...)
		for _, v := range list {
			c.words[off+int(v/32)] |= 1 << (v % 32)
		}
		c.sets[base+k] = catSet{off: uint32(off), n: uint32(words)}
	}
	return nil
}

// categoricalBlock is evalBlock for a forest with categorical splits
// (f.cats not nil): it adds every tree's leaves for the n rows of xs
// (stride floats each, as margins copies them) to out, walking each row
// down each tree a node at a time. A missing value (NaN) takes the
// split's default direction, as at a numeric split; any other value goes
// right when it is one of the split's categories, left when it is not.
// As XGBoost 1.7 decides (common::Decision, checked against
// python3-xgboost's predict): a value is the category it truncates to
// (2.7 is category 2), and a negative value (-0.5, -1e-30) or one of 2^24
// or more, infinities included, is no category, so it goes left.
func (f *Forest) categoricalBlock(xs []float32, stride, n int, out []float32) {
	nodes, sets, words := f.nodes, f.cats.sets, f.cats.words
	ng := f.NumGroup
	for t, root := range f.roots {
		g := int(f.group[t])
		for r := range n {
			row := xs[r*stride : (r+1)*stride : (r+1)*stride]
			i := root
			for {
				nd := &nodes[i]
				if nd.left == i { // a leaf
					out[r*ng+g] += nd.threshold
					break
				}
				v := row[nd.feature&^missingRight]
				s := sets[i]
				switch {
				case v != v: // NaN: missing
					i = nd.left + nd.feature>>31
				case s.n != 0:
					i = nd.left
					if v >= 0 && v < float32(s.n*32) {
						c := uint32(v)
						if words[s.off+c/32]&(1<<(c%32)) != 0 {
							i = nd.left + 1
						}
					}
				case v < nd.threshold:
					i = nd.left
				default:
					i = nd.left + 1
				}
			}
		}
	}
}
