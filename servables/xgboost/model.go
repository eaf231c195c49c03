package xgboost

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"
	"sync"

	"github.com/groveml/grove/internal/jsonscan"
)

// ErrUnsupported marks a model file that is valid XGBoost but uses
// something this reader does not evaluate (an objective, a booster,
// vector leaves, a file format); the message names it.
var ErrUnsupported = errors.New("unsupported XGBoost model")

// ErrInvalid marks a model file that is not a valid XGBoost model:
// malformed JSON or UBJSON, missing fields, arrays that disagree, indices
// out of range.
var ErrInvalid = errors.New("invalid XGBoost model")

// Limits on what a model may declare, so that a corrupt count cannot ask
// for unbounded memory before the arrays are checked against it.
const (
	maxFeatures = 1 << 24
	maxClasses  = 1 << 16
)

// Objective is an objective Forest knows the output transform of.
type Objective uint8

// The objectives Forest evaluates.
const (
	RegSquaredError Objective = iota + 1
	RegLogistic
	BinaryLogistic
	BinaryLogitRaw
	MultiSoftprob
	MultiSoftmax
	CountPoisson
	RankPairwise
)

var objectiveNames = [...]string{
	RegSquaredError: "reg:squarederror",
	RegLogistic:     "reg:logistic",
	BinaryLogistic:  "binary:logistic",
	BinaryLogitRaw:  "binary:logitraw",
	MultiSoftprob:   "multi:softprob",
	MultiSoftmax:    "multi:softmax",
	CountPoisson:    "count:poisson",
	RankPairwise:    "rank:pairwise",
}

// String returns the objective's XGBoost name ("binary:logistic", ...).
func (o Objective) String() string {
	if int(o) < len(objectiveNames) && objectiveNames[o] != "" {
		return objectiveNames[o]
	}
	return fmt.Sprintf("Objective(%d)", o)
}

// parseObjective returns the Objective named s.
func parseObjective(s string) (Objective, error) {
	for i, n := range objectiveNames {
		if n != "" && n == s {
			return Objective(i), nil
		}
	}
	supported := make([]string, 0, len(objectiveNames))
	for _, n := range objectiveNames {
		if n != "" {
			supported = append(supported, n)
		}
	}
	return 0, fmt.Errorf("%w: objective %q (supported: %s)", ErrUnsupported, s, strings.Join(supported, ", "))
}

// node is one node of a flattened tree, 12 bytes. An inner node sends a
// row to left when its feature's value is below threshold, to left+1 when
// it is not, and, when the value is missing (NaN), to left+1 if feature
// has missingRight set, to left if not. A leaf has its value in
// threshold, left pointing at itself and feature NumFeature: the slot
// after a row's features in the evaluation's copy of the rows, always
// NaN, so that a leaf sends every row back to itself and a row can take
// as many steps as its tree is deep with no test for having arrived (see
// predict.go).
type node struct {
	threshold float32
	feature   uint32 // the feature's index, | missingRight
	left      uint32
}

// missingRight marks, in a node's feature, a split whose missing values
// go right (default_left 0).
const missingRight = 1 << 31

// Forest is a loaded XGBoost model: its trees flattened, its objective and
// its parameters. It is immutable and safe for concurrent use.
type Forest struct {
	nodes []node
	roots []uint32 // the index in nodes of each tree's root
	group []int32  // each tree's output group (class), tree_info
	depth []int32  // each tree's depth: the most steps from its root to a leaf
	// cats holds the categorical splits of nodes; nil when the model has
	// none (then Margins runs the numeric path alone).
	cats *categories

	// blocks holds the *block scratch buffers evaluations borrow
	// (predict.go); a pointer, so that a Forest can be copied.
	blocks *sync.Pool

	// NumFeature is the number of input features (num_feature).
	NumFeature int
	// NumGroup is the number of margins per row: num_class for the
	// multi: objectives, 1 otherwise.
	NumGroup int
	// Objective is the model's objective.
	Objective Objective
	// BaseScore is base_score as the file has it (a probability for the
	// logistic objectives, a mean for count:poisson).
	BaseScore float64
	// BaseMargin is BaseScore in margin space: every margin starts there.
	BaseMargin float32
	// Booster is "gbtree" or "dart".
	Booster string
	// FeatureNames are the features' names when the file has them.
	FeatureNames []string
	// FeatureTypes are the features' types when the file has them: "q"
	// (quantitative), "c" (categorical), "int", "float", ...
	FeatureTypes []string
	// BestIteration is the file's best_iteration attribute ("" when none);
	// it is not applied.
	BestIteration string
	// Version is the XGBoost version that wrote the file, e.g. [1 7 4].
	Version []int
}

// NumTrees is the number of trees the model evaluates.
func (f *Forest) NumTrees() int { return len(f.roots) }

// The model document, as XGBoost's Learner::SaveModel writes it in JSON
// (decoded by encoding/json) or UBJSON (decodeUBJSON, which reads the same
// keys by these json tags): both formats fill these types, which build
// checks and flattens.
type jsonModel struct {
	Learner *jsonLearner `json:"learner"`
	Version []int        `json:"version"`
}

type jsonLearner struct {
	Attributes        map[string]string `json:"attributes"`
	FeatureNames      []string          `json:"feature_names"`
	FeatureTypes      []string          `json:"feature_types"`
	GradientBooster   *jsonBooster      `json:"gradient_booster"`
	LearnerModelParam *struct {
		BaseScore  string `json:"base_score"`
		NumClass   string `json:"num_class"`
		NumFeature string `json:"num_feature"`
		NumTarget  string `json:"num_target"`
	} `json:"learner_model_param"`
	Objective *struct {
		Name string `json:"name"`
	} `json:"objective"`
}

type jsonBooster struct {
	Name       string       `json:"name"`
	Model      *jsonGBTree  `json:"model"`       // gbtree
	GBTree     *jsonBooster `json:"gbtree"`      // dart: the gbtree it wraps
	WeightDrop []f32        `json:"weight_drop"` // dart
}

type jsonGBTree struct {
	Param struct {
		NumTrees        string `json:"num_trees"`
		NumParallelTree string `json:"num_parallel_tree"`
	} `json:"gbtree_model_param"`
	TreeInfo []int64    `json:"tree_info"`
	Trees    []jsonTree `json:"trees"`
}

type jsonTree struct {
	Param struct {
		NumNodes       string `json:"num_nodes"`
		SizeLeafVector string `json:"size_leaf_vector"`
	} `json:"tree_param"`
	LeftChildren      []int64 `json:"left_children"`
	RightChildren     []int64 `json:"right_children"`
	SplitIndices      []int64 `json:"split_indices"`
	SplitConditions   []f32   `json:"split_conditions"`
	DefaultLeft       []flag  `json:"default_left"`
	BaseWeights       []f32   `json:"base_weights"`
	SplitType         []int64 `json:"split_type"`
	CategoriesNodes   []int64 `json:"categories_nodes"`
	CategoriesSizes   []int64 `json:"categories_sizes"`
	CategoriesSegment []int64 `json:"categories_segments"`
	Categories        []int64 `json:"categories"`
}

// flag is a default_left entry: 0 or 1 (XGBoost 1.x), or a JSON boolean.
type flag bool

// UnmarshalJSON reads 0, 1, true or false.
func (b *flag) UnmarshalJSON(data []byte) error {
	switch string(data) {
	case "0", "false":
		*b = false
	case "1", "true":
		*b = true
	default:
		return fmt.Errorf("default_left entry %s is not 0, 1, true or false", data)
	}
	return nil
}

// f32 is a float32 of a model's arrays: a JSON number, or one of the
// strings quoteNonFinite makes of XGBoost's bare NaN and Infinity.
type f32 float32

// UnmarshalJSON reads a number, "NaN", "Infinity" or "-Infinity".
func (v *f32) UnmarshalJSON(data []byte) error {
	switch string(data) {
	case `"NaN"`:
		*v = f32(math.NaN())
	case `"Infinity"`:
		*v = f32(math.Inf(1))
	case `"-Infinity"`:
		*v = f32(math.Inf(-1))
	default:
		x, err := jsonscan.ParseFloat(data, 32)
		if err != nil {
			return fmt.Errorf("%s is not a float32", data)
		}
		*v = f32(x)
	}
	return nil
}

// quoteNonFinite returns data with the bare NaN, Infinity and -Infinity
// tokens XGBoost writes for non-finite floats (a categorical split's
// condition is NaN) quoted, so that encoding/json reads them (as f32
// does). Strings are left alone; data without such tokens is returned as
// it is.
func quoteNonFinite(data []byte) []byte {
	if !bytes.Contains(data, []byte("NaN")) && !bytes.Contains(data, []byte("Infinity")) {
		return data
	}
	out := make([]byte, 0, len(data)+64)
	inString, escaped := false, false
	for i := 0; i < len(data); i++ {
		c := data[i]
		if inString {
			switch {
			case escaped:
				escaped = false
			case c == '\\':
				escaped = true
			case c == '"':
				inString = false
			}
			out = append(out, c)
			continue
		}
		var tok string
		for _, t := range []string{"NaN", "Infinity", "-Infinity"} {
			if bytes.HasPrefix(data[i:], []byte(t)) {
				tok = t
				break
			}
		}
		if tok != "" {
			out = append(out, '"')
			out = append(out, tok...)
			out = append(out, '"')
			i += len(tok) - 1
			continue
		}
		if c == '"' {
			inString = true
		}
		out = append(out, c)
	}
	return out
}

// Parse reads an XGBoost model, JSON (a model.json) or UBJSON (a
// model.ubj) as Detect tells them apart, and checks it whole. An error
// wraps ErrUnsupported for a model this package does not evaluate,
// ErrInvalid for a file that is not a valid model.
func Parse(data []byte) (*Forest, error) {
	switch Detect(data) {
	case FormatUBJSON:
		return parseUBJSON(data)
	case FormatLegacyBinary:
		return nil, fmt.Errorf("%w: XGBoost's legacy binary format; save the model as JSON or UBJSON: booster.save_model(\"model.json\") or (\"model.ubj\")", ErrUnsupported)
	}
	var m jsonModel
	dec := json.NewDecoder(bytes.NewReader(quoteNonFinite(data)))
	if err := dec.Decode(&m); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrInvalid, err)
	}
	if dec.More() {
		return nil, fmt.Errorf("%w: data after the model's JSON object", ErrInvalid)
	}
	if m.Learner == nil {
		return nil, fmt.Errorf("%w: no \"learner\" object: not an XGBoost JSON model", ErrInvalid)
	}
	return build(m.Learner, m.Version)
}

// parseUBJSON reads an XGBoost UBJSON model into the types the JSON model
// fills, and checks it as Parse does.
func parseUBJSON(data []byte) (*Forest, error) {
	var m jsonModel
	if err := decodeUBJSON(data, &m); err != nil {
		return nil, err
	}
	if m.Learner == nil {
		return nil, fmt.Errorf("%w: no \"learner\" object: not an XGBoost UBJSON model", ErrInvalid)
	}
	return build(m.Learner, m.Version)
}

func invalid(format string, args ...any) error {
	return fmt.Errorf("%w: "+format, append([]any{ErrInvalid}, args...)...)
}

// paramInt reads a learner or tree parameter, an integer XGBoost writes as
// a string, and checks it lies in [lo, hi].
func paramInt(name, s string, lo, hi int64) (int64, error) {
	v, err := strconv.ParseInt(s, 10, 64)
	if err != nil {
		return 0, invalid("%s is %q, not an integer", name, s)
	}
	if v < lo || v > hi {
		return 0, invalid("%s is %d, it has to be between %d and %d", name, v, lo, hi)
	}
	return v, nil
}

// build checks the learner and flattens its trees.
func build(l *jsonLearner, version []int) (*Forest, error) {
	f := &Forest{Version: version, blocks: new(sync.Pool)}
	if l.Objective == nil || l.Objective.Name == "" {
		return nil, invalid("no objective name")
	}
	obj, err := parseObjective(l.Objective.Name)
	if err != nil {
		return nil, err
	}
	f.Objective = obj
	p := l.LearnerModelParam
	if p == nil {
		return nil, invalid("no learner_model_param")
	}
	nf, err := paramInt("num_feature", p.NumFeature, 1, maxFeatures)
	if err != nil {
		return nil, err
	}
	f.NumFeature = int(nf)
	nc := int64(0)
	if p.NumClass != "" {
		if nc, err = paramInt("num_class", p.NumClass, 0, maxClasses); err != nil {
			return nil, err
		}
	}
	if p.NumTarget != "" {
		nt, err := paramInt("num_target", p.NumTarget, 0, math.MaxInt32)
		if err != nil {
			return nil, err
		}
		if nt > 1 {
			return nil, fmt.Errorf("%w: a multi-target model (num_target %d)", ErrUnsupported, nt)
		}
	}
	f.NumGroup = 1
	switch obj {
	case MultiSoftprob, MultiSoftmax:
		if nc < 1 {
			return nil, invalid("objective %s with num_class %d", obj, nc)
		}
		f.NumGroup = int(nc)
	default:
		if nc > 1 {
			return nil, invalid("objective %s with num_class %d (only the multi: objectives have classes)", obj, nc)
		}
	}
	f.BaseScore, err = jsonscan.ParseFloat([]byte(p.BaseScore), 64)
	if err != nil || math.IsNaN(f.BaseScore) || math.IsInf(f.BaseScore, 0) {
		return nil, invalid("base_score is %q, not a finite number", p.BaseScore)
	}
	if f.BaseMargin, err = baseMargin(obj, f.BaseScore); err != nil {
		return nil, err
	}
	if len(l.FeatureNames) > 0 {
		if len(l.FeatureNames) != f.NumFeature {
			return nil, invalid("%d feature_names for num_feature %d", len(l.FeatureNames), f.NumFeature)
		}
		f.FeatureNames = l.FeatureNames
	}
	if len(l.FeatureTypes) > 0 {
		if len(l.FeatureTypes) != f.NumFeature {
			return nil, invalid("%d feature_types for num_feature %d", len(l.FeatureTypes), f.NumFeature)
		}
		f.FeatureTypes = l.FeatureTypes
	}
	f.BestIteration = l.Attributes["best_iteration"]

	b := l.GradientBooster
	if b == nil {
		return nil, invalid("no gradient_booster")
	}
	var weights []f32
	switch b.Name {
	case "gbtree":
	case "dart":
		if b.GBTree == nil || b.GBTree.Name != "gbtree" {
			return nil, invalid("a dart booster without its gbtree")
		}
		weights = b.WeightDrop
		b = b.GBTree
	case "gblinear":
		return nil, fmt.Errorf("%w: the gblinear booster (supported: gbtree, dart)", ErrUnsupported)
	default:
		return nil, fmt.Errorf("%w: booster %q (supported: gbtree, dart)", ErrUnsupported, b.Name)
	}
	f.Booster = l.GradientBooster.Name
	if b.Model == nil {
		return nil, invalid("the gbtree booster has no model")
	}
	if err := f.addTrees(b.Model, weights); err != nil {
		return nil, err
	}
	return f, nil
}

// baseMargin is base_score in margin space, as XGBoost 1.7's
// ObjFunction::ProbToMargin makes it.
func baseMargin(obj Objective, score float64) (float32, error) {
	switch obj {
	case RegLogistic, BinaryLogistic:
		if score <= 0 || score >= 1 {
			return 0, invalid("base_score %v of objective %s is not a probability strictly between 0 and 1", score, obj)
		}
		return float32(-math.Log(1/score - 1)), nil
	case CountPoisson:
		if score <= 0 {
			return 0, invalid("base_score %v of objective %s is not positive", score, obj)
		}
		return float32(math.Log(score)), nil
	}
	return float32(score), nil
}

// addTrees checks the gbtree model and flattens its trees; weights, for a
// dart booster, scale each tree's leaves.
func (f *Forest) addTrees(m *jsonGBTree, weights []f32) error {
	n := len(m.Trees)
	if nt, err := paramInt("num_trees", m.Param.NumTrees, 0, math.MaxInt32); err != nil {
		return err
	} else if int(nt) != n {
		return invalid("num_trees is %d, the model has %d trees", nt, n)
	}
	if len(m.TreeInfo) != n {
		return invalid("tree_info has %d entries for %d trees", len(m.TreeInfo), n)
	}
	if weights != nil && len(weights) != n {
		return invalid("weight_drop has %d entries for %d trees", len(weights), n)
	}
	total := 0
	for i := range m.Trees {
		total += len(m.Trees[i].LeftChildren)
	}
	if total > math.MaxInt32 {
		return invalid("%d nodes in all", total)
	}
	f.nodes = make([]node, 0, total)
	f.roots = make([]uint32, n)
	f.group = make([]int32, n)
	f.depth = make([]int32, n)
	for i := range m.Trees {
		g := m.TreeInfo[i]
		if g < 0 || g >= int64(f.NumGroup) {
			return invalid("tree %d: tree_info %d is not an output group of %d", i, g, f.NumGroup)
		}
		f.group[i] = int32(g)
		w := float32(1)
		if weights != nil {
			w = float32(weights[i])
			if math.IsNaN(float64(w)) || math.IsInf(float64(w), 0) {
				return invalid("tree %d: weight_drop %v", i, w)
			}
		}
		f.roots[i] = uint32(len(f.nodes))
		if err := f.addTree(&m.Trees[i], w); err != nil {
			return fmt.Errorf("tree %d: %w", i, err)
		}
		f.depth[i] = treeDepth(f.nodes[f.roots[i]:], f.roots[i])
	}
	if f.cats != nil {
		f.cats.cover(len(f.nodes))
	}
	return nil
}

// addTree checks one tree and appends its nodes, reachable from the root,
// in breadth-first order with each node's children adjacent.
func (f *Forest) addTree(t *jsonTree, weight float32) error {
	n := len(t.LeftChildren)
	if n == 0 {
		return invalid("a tree without nodes")
	}
	if nn, err := paramInt("num_nodes", t.Param.NumNodes, 1, math.MaxInt32); err != nil {
		return err
	} else if int(nn) != n {
		return invalid("num_nodes is %d, left_children has %d entries", nn, n)
	}
	if t.Param.SizeLeafVector != "" && t.Param.SizeLeafVector != "0" {
		return fmt.Errorf("%w: vector leaves (size_leaf_vector %s)", ErrUnsupported, t.Param.SizeLeafVector)
	}
	for _, a := range []struct {
		name string
		n    int
	}{
		{"right_children", len(t.RightChildren)},
		{"split_indices", len(t.SplitIndices)},
		{"split_conditions", len(t.SplitConditions)},
		{"default_left", len(t.DefaultLeft)},
	} {
		if a.n != n {
			return invalid("%s has %d entries, left_children %d", a.name, a.n, n)
		}
	}
	if t.BaseWeights != nil && len(t.BaseWeights) != n {
		return invalid("base_weights has %d entries, left_children %d", len(t.BaseWeights), n)
	}
	cats, err := treeCategories(t, n)
	if err != nil {
		return err
	}
	// Every node is the child of at most one node, and the root of none:
	// then the walk from the root can never come back to a node.
	parent := make([]int32, n)
	for i := 0; i < n; i++ {
		l, r := t.LeftChildren[i], t.RightChildren[i]
		if l == -1 && r == -1 {
			v := float32(t.SplitConditions[i])
			if math.IsNaN(float64(v)) || math.IsInf(float64(v), 0) {
				return invalid("leaf %d has value %v", i, v)
			}
			continue
		}
		for _, c := range []int64{l, r} {
			if c < 1 || c >= int64(n) {
				return invalid("node %d has child %d, outside 1..%d", i, c, n-1)
			}
			if parent[c] != 0 {
				return invalid("node %d is a child of nodes %d and %d (a tree's nodes have one parent)", c, parent[c]-1, i)
			}
			parent[c] = int32(i) + 1
		}
		if l == r {
			return invalid("node %d has the same left and right child %d", i, l)
		}
		if fi := t.SplitIndices[i]; fi < 0 || fi >= int64(f.NumFeature) {
			return invalid("node %d splits on feature %d, the model has %d (num_feature)", i, fi, f.NumFeature)
		}
		if math.IsNaN(float64(t.SplitConditions[i])) && (cats == nil || cats[i] == nil) {
			return invalid("node %d has split condition NaN", i)
		}
	}
	// Breadth-first from the root: queue holds the source indices of the
	// nodes appended, in order; each inner node's children are appended
	// together, so the right child is left+1.
	base := len(f.nodes)
	queue := make([]int64, 1, n)
	f.nodes = append(f.nodes, node{})
	for k := 0; k < len(queue); k++ {
		src := queue[k]
		out := &f.nodes[base+k]
		l := t.LeftChildren[src]
		if l == -1 {
			*out = node{
				threshold: float32(t.SplitConditions[src]) * weight,
				feature:   uint32(f.NumFeature),
				left:      uint32(base + k),
			}
			continue
		}
		*out = node{
			threshold: float32(t.SplitConditions[src]),
			feature:   uint32(t.SplitIndices[src]),
			left:      uint32(base + len(queue)),
		}
		if !t.DefaultLeft[src] {
			out.feature |= missingRight
		}
		queue = append(queue, l, t.RightChildren[src])
		f.nodes = append(f.nodes, node{}, node{})
	}
	if cats != nil {
		return f.addCategories(base, queue, cats)
	}
	return nil
}

// treeDepth is the depth of the tree whose nodes addTree appended at
// nodes[0:] (index root in the forest): the most steps from the root to a
// leaf. In breadth-first order a node's children come after it, so one
// pass over the nodes gives each its depth.
func treeDepth(nodes []node, root uint32) int32 {
	level := make([]int32, 1, len(nodes))
	depth := int32(0)
	for k := 0; k < len(level); k++ {
		depth = max(depth, level[k])
		if n := nodes[k]; n.left != root+uint32(k) {
			level = append(level, level[k]+1, level[k]+1)
		}
	}
	return depth
}
