package xgboost

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"errors"
	"math"
	"os"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	"testing"
)

func readTestdata(t testing.TB, name string) []byte {
	t.Helper()
	data, err := os.ReadFile(filepath.Join("testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	return data
}

// TestParseReadsTinyModel: the hand-written one-tree model reads as its
// file says, and its one split sends rows left, right and (NaN) by its
// default direction.
func TestParseReadsTinyModel(t *testing.T) {
	f, err := Parse(readTestdata(t, "tiny.json"))
	if err != nil {
		t.Fatal(err)
	}
	if f.NumFeature != 2 || f.NumGroup != 1 || f.NumTrees() != 1 || f.Objective != RegSquaredError ||
		f.BaseScore != 0.5 || f.Booster != "gbtree" || strings.Join(f.FeatureNames, ",") != "a,b" {
		t.Fatalf("read %+v", f)
	}
	nan := float32(math.NaN())
	x := []float32{0, 0.4, 0, 0.6, 0, nan}
	out := make([]float32, 3)
	if err := f.Margins(x, 3, out); err != nil {
		t.Fatal(err)
	}
	// b < 0.5 goes left (1.5), else right (-2.5); missing goes left.
	want := []float32{0.5 + 1.5, 0.5 - 2.5, 0.5 + 1.5}
	for i := range want {
		if out[i] != want[i] {
			t.Errorf("row %d: margin %v, want %v", i, out[i], want[i])
		}
	}
}

// TestParseRefusesBadModels: each defect fails the load with an error of
// the right kind that names it, in a JSON file and in the same model
// written as UBJSON (ubjsonOf): one builder checks what both formats read.
func TestParseRefusesBadModels(t *testing.T) {
	tiny := string(readTestdata(t, "tiny.json"))
	edit := func(old, new string) []byte {
		if !strings.Contains(tiny, old) {
			t.Fatalf("tiny.json has no %s", old)
		}
		return []byte(strings.Replace(tiny, old, new, 1))
	}
	for _, c := range []struct {
		name string
		data []byte
		kind error
		says string
	}{
		{"root as a child", edit(`"left_children":[1,-1,-1]`, `"left_children":[1,0,-1]`), ErrInvalid, "outside 1..2"},
		{"two parents (a cycle)", edit(`"left_children":[1,-1,-1]`, `"left_children":[1,2,-1]`), ErrInvalid, "one parent"},
		{"child out of range", edit(`"right_children":[2,-1,-1]`, `"right_children":[9,-1,-1]`), ErrInvalid, "child 9"},
		{"feature out of range", edit(`"split_indices":[1,0,0]`, `"split_indices":[7,0,0]`), ErrInvalid, "feature 7"},
		{"lengths disagree", edit(`"split_conditions":[0.5,1.5,-2.5]`, `"split_conditions":[0.5,1.5]`), ErrInvalid, "split_conditions has 2"},
		{"num_nodes disagrees", edit(`"num_nodes":"3"`, `"num_nodes":"5"`), ErrInvalid, "num_nodes is 5"},
		{"num_trees disagrees", edit(`"num_trees":"1"`, `"num_trees":"2"`), ErrInvalid, "num_trees is 2"},
		{"tree_info out of range", edit(`"tree_info":[0]`, `"tree_info":[1]`), ErrInvalid, "tree_info 1"},
		{"feature_names count", edit(`"feature_names":["a","b"]`, `"feature_names":["a"]`), ErrInvalid, "1 feature_names"},
		{"feature_types count", edit(`"feature_types":[]`, `"feature_types":["c"]`), ErrInvalid, "1 feature_types"},
		{"huge num_feature", edit(`"num_feature":"2","num_target"`, `"num_feature":"99999999999","num_target"`), ErrInvalid, "num_feature is"},
		{"base_score not a probability", edit(`"reg:squarederror"`, `"binary:logistic"`), nil, ""},
		{"categorical split without categories", edit(`"split_type":[0,0,0]`, `"split_type":[1,0,0]`), ErrInvalid, "1 nodes of split_type 1"},
		{"unknown split type", edit(`"split_type":[0,0,0]`, `"split_type":[2,0,0]`), ErrInvalid, "split_type 2"},
		{"unknown objective", edit(`"reg:squarederror"`, `"reg:tweedie"`), ErrUnsupported, `objective "reg:tweedie"`},
		{"multi-target", edit(`"num_target":"1"`, `"num_target":"2"`), ErrUnsupported, "multi-target"},
		{"vector leaves", edit(`"num_nodes":"3","size_leaf_vector":"0"`, `"num_nodes":"3","size_leaf_vector":"2"`), ErrUnsupported, "vector leaves"},
		{"unknown booster", edit(`"name":"gbtree"`, `"name":"gbmystery"`), ErrUnsupported, `booster "gbmystery"`},
		{"gblinear file", readTestdata(t, "refused_gblinear.json"), ErrUnsupported, "gblinear"},
	} {
		for _, format := range []string{"JSON", "UBJSON"} {
			t.Run(c.name+" "+format, func(t *testing.T) {
				data := c.data
				if format == "UBJSON" {
					data = ubjsonOf(t, data)
				}
				_, err := Parse(data)
				if c.kind == nil { // base_score 0.5 is a valid probability: loads
					if err != nil {
						t.Fatalf("Parse: %v", err)
					}
					return
				}
				if !errors.Is(err, c.kind) || !strings.Contains(err.Error(), c.says) {
					t.Fatalf("Parse: %v; want an error wrapping %q that says %q", err, c.kind, c.says)
				}
			})
		}
	}
}

// TestParseRefusesBadJSON: JSON that is not an XGBoost model fails with
// ErrInvalid, saying why.
func TestParseRefusesBadJSON(t *testing.T) {
	tiny := string(readTestdata(t, "tiny.json"))
	for _, c := range []struct {
		name string
		data []byte
		says string
	}{
		{"truncated", []byte(tiny[:len(tiny)/2]), "unexpected EOF"},
		{"not JSON", []byte("hello"), "invalid character"},
		{"no learner", []byte(`{"version":[1,7,4]}`), `no "learner"`},
		{"trailing data", []byte(strings.TrimSpace(tiny) + "{}"), "data after"},
		{"bad default_left", []byte(strings.Replace(tiny, `"default_left":[1,0,0]`, `"default_left":[2,0,0]`, 1)), "default_left entry 2"},
	} {
		_, err := Parse(c.data)
		if !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), c.says) {
			t.Errorf("%s: %v; want an invalid-model error that says %q", c.name, err, c.says)
		}
	}
}

// TestParseRefusesCategoricalTablesThatDisagree: categorical splits whose
// tables (split_type, categories_nodes, categories_segments,
// categories_sizes, categories) disagree with each other or with the tree
// fail the load, in JSON and UBJSON, naming the defect; the model as
// XGBoost wrote it loads.
func TestParseRefusesCategoricalTablesThatDisagree(t *testing.T) {
	model := string(readTestdata(t, "small_categorical.json"))
	edit := func(pairs ...string) []byte {
		s := model
		for i := 0; i < len(pairs); i += 2 {
			if !strings.Contains(s, pairs[i]) {
				t.Fatalf("small_categorical.json has no %s", pairs[i])
			}
			s = strings.Replace(s, pairs[i], pairs[i+1], 1)
		}
		return []byte(s)
	}
	for _, c := range []struct {
		name string
		data []byte
		kind error
		says string
	}{
		{"as written", []byte(model), nil, ""},
		{"node not categorical", edit(`"split_type":[1,0,0]`, `"split_type":[0,0,0]`), ErrInvalid, "0 nodes of split_type 1"},
		{"node listed twice", edit(`"categories_nodes":[0],"categories_segments":[0],"categories_sizes":[3]`,
			`"categories_nodes":[0,0],"categories_segments":[0,0],"categories_sizes":[3,3]`, `"split_type":[1,0,0]`, `"split_type":[1,1,0]`),
			ErrInvalid, "categories_nodes[1] is 0"},
		// XGBoost's pruner leaves a categorical split it undoes as a leaf
		// of split_type 1 with its categories: XGBoost loads it.
		{"a leaf listed", edit(`"categories_nodes":[0],"categories_segments":[0],"categories_sizes":[3]`,
			`"categories_nodes":[0,1],"categories_segments":[0,0],"categories_sizes":[3,3]`, `"split_type":[1,0,0]`, `"split_type":[1,1,0]`),
			nil, ""},
		{"a leaf listed with a category beyond 2^24", edit(`"categories_nodes":[0],"categories_segments":[0],"categories_sizes":[3]`,
			`"categories_nodes":[0,2],"categories_segments":[0,3],"categories_sizes":[3,1]`, `"split_type":[1,0,0]`, `"split_type":[1,0,1]`,
			`"categories":[0,1,3]`, `"categories":[0,1,3,16777216]`),
			ErrInvalid, "node 2: category 16777216 is outside"},
		{"node out of range", edit(`"categories_nodes":[0]`, `"categories_nodes":[5]`), ErrInvalid, "categories_nodes[0] is 5"},
		{"listed node not categorical", edit(`"categories_nodes":[0],"categories_segments":[0],"categories_sizes":[3]`,
			`"categories_nodes":[0,2],"categories_segments":[0,0],"categories_sizes":[3,3]`, `"split_type":[1,0,0]`, `"split_type":[0,1,1]`),
			ErrInvalid, "node 0 is in categories_nodes, its split_type is 0"},
		{"table lengths disagree", edit(`"categories_sizes":[3]`, `"categories_sizes":[3,1]`), ErrInvalid, "have 1, 1 and 2 entries"},
		{"segment past the categories", edit(`"categories_segments":[0]`, `"categories_segments":[2]`), ErrInvalid, "categories 2 to 5 of the tree's 3"},
		{"negative segment", edit(`"categories_segments":[0]`, `"categories_segments":[-1]`), ErrInvalid, "categories -1 to 2"},
		{"no category", edit(`"categories_sizes":[3]`, `"categories_sizes":[0]`), ErrInvalid, "one or more"},
		{"huge size", edit(`"categories_sizes":[3]`, `"categories_sizes":[9223372036854775807]`), ErrInvalid, "of the tree's 3"},
		{"negative category", edit(`"categories":[0,1,3]`, `"categories":[0,-1,3]`), ErrInvalid, "category -1 is outside"},
		{"category beyond 2^24", edit(`"categories":[0,1,3]`, `"categories":[0,1,16777216]`), ErrInvalid, "category 16777216 is outside"},
		{"categories without a split", edit(`"categories_nodes":[0],"categories_segments":[0],"categories_sizes":[3]`,
			`"categories_nodes":[],"categories_segments":[],"categories_sizes":[]`, `"split_type":[1,0,0]`, `"split_type":[0,0,0]`),
			ErrInvalid, "3 categories without a categorical split"},
		{"split_type lengths", edit(`"split_type":[1,0,0]`, `"split_type":[1,0]`), ErrInvalid, "split_type has 2 entries"},
	} {
		for _, format := range []string{"JSON", "UBJSON"} {
			t.Run(c.name+" "+format, func(t *testing.T) {
				data := c.data
				if format == "UBJSON" {
					data = ubjsonOf(t, data)
				}
				_, err := Parse(data)
				if c.kind == nil {
					if err != nil {
						t.Fatalf("Parse: %v", err)
					}
					return
				}
				if !errors.Is(err, c.kind) || !strings.Contains(err.Error(), c.says) {
					t.Fatalf("Parse: %v; want an error wrapping %q that says %q", err, c.kind, c.says)
				}
			})
		}
	}
}

// TestCategoricalSplitsDecideAsXGBoost: at small_categorical.json's
// splits (categories 0, 1 and 3 go right, missing values left), a value
// goes right only when it truncates to a listed category, so 1.9 and -0.0
// do; negative values, unlisted and huge ones, and infinities go left, as
// missing values do here. (python3-xgboost's inplace_predict sends +Inf
// and -Inf left at a split whose default is right; its DMatrix refuses
// them. The reference cases check the finite values.)
func TestCategoricalSplitsDecideAsXGBoost(t *testing.T) {
	f, err := Parse(readTestdata(t, "small_categorical.json"))
	if err != nil {
		t.Fatal(err)
	}
	inf := float32(math.Inf(1))
	values := []float32{0, 1, 3, 1.9, float32(math.Copysign(0, -1)), 2, 4, 31, 32, -0.5, -1, 16777216, inf, -inf, float32(math.NaN())}
	right := []bool{true, true, true, true, true, false, false, false, false, false, false, false, false, false, false}
	x := make([]float32, len(values)*f.NumFeature)
	for i, v := range values {
		x[i*f.NumFeature] = v
	}
	out := make([]float32, len(values))
	if err := f.Margins(x, len(values), out); err != nil {
		t.Fatal(err)
	}
	// The two trees' leaves: left 0.7125229 + 0.5069874, right -0.14625628 - 0.102956735.
	left, rightSum := float32(0.5)+float32(0.7125229)+float32(0.5069874), float32(0.5)+float32(-0.14625628)+float32(-0.102956735)
	for i, v := range values {
		want := left
		if right[i] {
			want = rightSum
		}
		if out[i] != want {
			t.Errorf("value %v: margin %v, want %v (right: %v)", v, out[i], want, right[i])
		}
	}
}

// TestParseReadsLeavesPrunedFromCategoricalSplits: cat_pruned's trees,
// pruned after training, have leaves that XGBoost's pruner made of
// categorical splits (split_type 1, listed in categories_nodes): the
// model loads, in JSON and UBJSON, and predicts as python3-xgboost does
// (TestPredictionsEqualPythonXGBoost compares its outputs).
func TestParseReadsLeavesPrunedFromCategoricalSplits(t *testing.T) {
	var m jsonModel
	if err := json.Unmarshal(quoteNonFinite(readTestdata(t, "cat_pruned.json")), &m); err != nil {
		t.Fatal(err)
	}
	leaves := 0
	for _, tr := range m.Learner.GradientBooster.Model.Trees {
		for _, nd := range tr.CategoriesNodes {
			if tr.LeftChildren[nd] == -1 {
				leaves++
			}
		}
	}
	if leaves == 0 {
		t.Fatal("cat_pruned.json has no leaf among its categorical nodes: make_models.py no longer makes what this test is about")
	}
	for _, ext := range formats {
		if _, err := Parse(readTestdata(t, "cat_pruned"+ext)); err != nil {
			t.Errorf("Parse(cat_pruned%s), %d leaves of split_type 1: %v", ext, leaves, err)
		}
	}
}

// TestUBJSONReadsAsJSON: every case's UBJSON file, as XGBoost wrote it,
// reads to the same forest as its JSON file.
func TestUBJSONReadsAsJSON(t *testing.T) {
	for _, name := range cases {
		fj, _ := loadCaseAs(t, name, ".json")
		fu, _ := loadCaseAs(t, name, ".ubj")
		if !sameForest(fj, fu) {
			t.Errorf("%s: the UBJSON file reads to %+v, the JSON file to %+v", name, *fu, *fj)
		}
	}
}

// sameForest reports whether a and b are equal, NaN thresholds (of
// categorical splits) included.
func sameForest(a, b *Forest) bool {
	if len(a.nodes) != len(b.nodes) {
		return false
	}
	for i := range a.nodes {
		x, y := a.nodes[i], b.nodes[i]
		if math.Float32bits(x.threshold) != math.Float32bits(y.threshold) {
			return false
		}
		x.threshold, y.threshold = 0, 0
		if x != y {
			return false
		}
	}
	ac, bc := *a, *b
	ac.nodes, bc.nodes = nil, nil
	if (ac.cats == nil) != (bc.cats == nil) || ac.cats != nil && !reflect.DeepEqual(*ac.cats, *bc.cats) {
		return false
	}
	ac.cats, bc.cats = nil, nil
	ac.blocks, bc.blocks = nil, nil // scratch, not the model
	return reflect.DeepEqual(ac, bc)
}

// TestUBJSONRefusesBadInput: truncated files, counts and lengths beyond
// the data, nesting without end and what UBJSON has that XGBoost does not
// write fail with an error of the right kind saying what, where, whether
// the value is read (feature_names) or skipped (an unknown key).
func TestUBJSONRefusesBadInput(t *testing.T) {
	model := readTestdata(t, "squarederror.ubj")
	huge := []byte{ubjInt64, 0x3f, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff}
	learner := cat([]byte{ubjObject}, ubjKey("learner"), []byte{ubjObject})
	for _, key := range []string{"feature_names", "unknown"} {
		at := cat(learner, ubjKey(key))
		for _, c := range []struct {
			name string
			data []byte
			kind error
			says string
		}{
			{"typed array count beyond the data", cat(at, []byte("[$d#"), huge), ErrInvalid, "count 4611686018427387903 is more than the 0 bytes left hold (4 or more each)"},
			{"array count beyond the data", cat(at, []byte("[#"), huge), ErrInvalid, "count 4611686018427387903 is more than"},
			{"string length beyond the data", cat(at, []byte("[S"), huge), ErrInvalid, "string length 4611686018427387903"},
			{"negative count", cat(at, []byte("[#i\xff")), ErrInvalid, "count -1 is negative"},
			{"typed array of nulls", cat(at, []byte("[$Z#i\x05")), ErrUnsupported, "a container of type null"},
			{"typed array of strings", cat(at, []byte("[$S#i\x01i\x01a")), ErrUnsupported, "a container of type a string"},
			{"typed array without count", cat(at, []byte("[$d]")), ErrInvalid, "a typed container without a count"},
			{"high-precision number", cat(at, []byte("[Hi\x011]}}")), ErrUnsupported, "high-precision"},
			{"no such marker", cat(at, []byte("[X]}}")), ErrInvalid, `marker 'X'`},
			{"truncated", cat(at, []byte("[#i\x02Si\x01a")), ErrInvalid, "unexpected end of data"},
		} {
			_, err := parseUBJSON(c.data)
			if !errors.Is(err, c.kind) || !strings.Contains(err.Error(), c.says) {
				t.Errorf("%s in %s: %v; want an error wrapping %q that says %q", c.name, key, err, c.kind, c.says)
			}
		}
	}
	leftChildren := []byte("left_children[$l")
	if !bytes.Contains(model, leftChildren) {
		t.Fatal("squarederror.ubj has no typed left_children")
	}
	for _, c := range []struct {
		name string
		data []byte
		kind error
		says string
	}{
		{"object count beyond the data", cat(learner[:len(learner)-1], []byte("{#"), huge), ErrInvalid, "count 4611686018427387903 is more than"},
		{"key length beyond the data", cat([]byte{ubjObject, ubjInt64}, huge[1:]), ErrInvalid, "key length 4611686018427387903"},
		{"typed object", cat(learner[:len(learner)-1], []byte("{$i#i\x01")), ErrUnsupported, "a typed object"},
		{"nesting without end", cat(learner, ubjKey("unknown"), bytes.Repeat([]byte{ubjArray}, 100)), ErrInvalid, "nested deeper than 64"},
		{"data after the model", cat(model, []byte("{")), ErrInvalid, "data after the model"},
		{"a float where an integer belongs", bytes.Replace(model, leftChildren, []byte("left_children[$d"), 1), ErrInvalid,
			"(learner.gradient_booster.model.trees[0].left_children[0]): a float32 where an integer belongs"},
		{"a number where a string belongs", cat(learner, ubjKey("objective"), []byte("{"), ubjKey("name"), []byte("i\x01}}}")), ErrInvalid,
			"(learner.objective.name): an int8 where a string belongs"},
		{"no learner", cat([]byte{ubjObject}, ubjKey("learner"), []byte("Z}")), ErrInvalid, `no "learner"`},
	} {
		_, err := parseUBJSON(c.data)
		if !errors.Is(err, c.kind) || !strings.Contains(err.Error(), c.says) {
			t.Errorf("%s: %v; want an error wrapping %q that says %q", c.name, err, c.kind, c.says)
		}
	}
	// Truncations of real models fail; none panics.
	tiny := ubjsonOf(t, readTestdata(t, "tiny.json"))
	for n := range len(tiny) {
		if _, err := parseUBJSON(tiny[:n]); !errors.Is(err, ErrInvalid) {
			t.Fatalf("the first %d bytes of tiny.json as UBJSON: %v, want an invalid-model error", n, err)
		}
	}
	for n := 0; n < len(model); n += 7 {
		if _, err := parseUBJSON(model[:n]); !errors.Is(err, ErrInvalid) {
			t.Fatalf("the first %d bytes of squarederror.ubj: %v, want an invalid-model error", n, err)
		}
	}
}

// cat concatenates byte slices.
func cat(parts ...[]byte) []byte { return bytes.Join(parts, nil) }

// ubjKey is k as a UBJSON object key (and, after an 'S', a string), its
// length an int64 as XGBoost writes it.
func ubjKey(k string) []byte {
	b := []byte{ubjInt64, 0, 0, 0, 0, 0, 0, 0, 0}
	binary.BigEndian.PutUint64(b[1:], uint64(len(k)))
	return append(b, k...)
}

// ubjsonOf writes a JSON model as UBJSON: objects uncounted, arrays
// counted, integers int64, other numbers float32 (NaN and the
// infinities from XGBoost's bare tokens), as XGBoost's UBJWriter writes
// its generic values.
func ubjsonOf(t *testing.T, data []byte) []byte {
	t.Helper()
	dec := json.NewDecoder(bytes.NewReader(quoteNonFinite(data)))
	dec.UseNumber()
	var value func() []byte
	value = func() []byte {
		tok, err := dec.Token()
		if err != nil {
			t.Fatalf("ubjsonOf: %v", err)
		}
		switch v := tok.(type) {
		case json.Delim:
			var body []byte
			n := 0
			for ; dec.More(); n++ {
				if v == '{' {
					k, _ := dec.Token()
					body = append(body, ubjKey(k.(string))...)
				}
				body = append(body, value()...)
			}
			dec.Token() // the closing delimiter
			if v == '{' {
				return cat([]byte{ubjObject}, body, []byte{ubjObjectEnd})
			}
			count := ubjKey(strings.Repeat(" ", n))[:9]
			return cat([]byte{ubjArray, ubjCount}, count, body)
		case string:
			switch v {
			case "NaN", "Infinity", "-Infinity":
				var x f32
				_ = x.UnmarshalJSON([]byte(`"` + v + `"`))
				return binary.BigEndian.AppendUint32([]byte{ubjFloat32}, math.Float32bits(float32(x)))
			}
			return cat([]byte{ubjString}, ubjKey(v))
		case json.Number:
			if i, err := v.Int64(); err == nil {
				return binary.BigEndian.AppendUint64([]byte{ubjInt64}, uint64(i))
			}
			f, _ := v.Float64()
			return binary.BigEndian.AppendUint32([]byte{ubjFloat32}, math.Float32bits(float32(f)))
		case bool:
			if v {
				return []byte{ubjTrue}
			}
			return []byte{ubjFalse}
		}
		return []byte{ubjNull}
	}
	return value()
}

// TestParseRefusesLogisticBaseScoreOutsideZeroOne: a logistic model's
// base_score is a probability; 0 or 1 has no margin.
func TestParseRefusesLogisticBaseScoreOutsideZeroOne(t *testing.T) {
	tiny := strings.Replace(string(readTestdata(t, "tiny.json")), `"reg:squarederror"`, `"binary:logistic"`, 1)
	for _, s := range []string{"0", "1", "1.5"} {
		_, err := Parse([]byte(strings.Replace(tiny, `"base_score":"5E-1"`, `"base_score":"`+s+`"`, 1)))
		if !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), "probability") {
			t.Errorf("base_score %s: %v", s, err)
		}
	}
}

// TestDetectTellsFormatsApart: the reference files and a few others are
// told by their first bytes.
func TestDetectTellsFormatsApart(t *testing.T) {
	for _, c := range []struct {
		data []byte
		want Format
	}{
		{readTestdata(t, "squarederror.json"), FormatJSON},
		{readTestdata(t, "squarederror.ubj"), FormatUBJSON},
		{readTestdata(t, "refused_legacy.model"), FormatLegacyBinary},
		{[]byte(" {\n  \"learner\" : {}}"), FormatJSON},
		{[]byte(`{"version":[1],"learner":{}}`), FormatUnknown}, // not as XGBoost writes it
		{[]byte(`{"inputs":[]}`), FormatUnknown},
		{[]byte(`[]`), FormatUnknown},
		{nil, FormatUnknown},
	} {
		if got := Detect(c.data[:min(len(c.data), sniffLen)]); got != c.want {
			t.Errorf("Detect(%.20q) = %v, want %v", c.data, got, c.want)
		}
	}
}

// FuzzParse: no input, JSON or UBJSON, makes Parse panic or loop, and a
// model it accepts evaluates rows (missing values included) without
// panicking.
func FuzzParse(f *testing.F) {
	f.Fuzz(func(t *testing.T, data []byte) { checkParse(t, Parse, data) })
}

// FuzzParseUBJSON: the UBJSON reader on its own (the input not sniffed
// first), as FuzzParse.
func FuzzParseUBJSON(f *testing.F) {
	f.Fuzz(func(t *testing.T, data []byte) { checkParse(t, parseUBJSON, data) })
}

// checkParse parses data: an error must be ErrInvalid or ErrUnsupported,
// and a forest evaluates two rows, one all missing, without panicking.
func checkParse(t *testing.T, parse func([]byte) (*Forest, error), data []byte) {
	forest, err := parse(data)
	if err != nil {
		if !errors.Is(err, ErrInvalid) && !errors.Is(err, ErrUnsupported) {
			t.Fatalf("an error of no kind: %v", err)
		}
		return
	}
	if forest.NumFeature > 1<<12 || forest.NumGroup > 1<<12 {
		return // too wide to bother evaluating here
	}
	x := make([]float32, 2*forest.NumFeature)
	for i := range forest.NumFeature {
		x[i] = float32(math.NaN())
		x[forest.NumFeature+i] = float32(i) - 1
	}
	margins := make([]float32, 2*forest.NumGroup)
	if err := forest.Margins(x, 2, margins); err != nil {
		t.Fatal(err)
	}
	if err := forest.Transform(margins, 2, make([]float32, 2*forest.PredictionWidth())); err != nil {
		t.Fatal(err)
	}
}

// TestFuzzSeedsFailTheLoad: every seed of testdata/fuzz but the valid_*
// ones fails the load with ErrInvalid or ErrUnsupported; those load.
func TestFuzzSeedsFailTheLoad(t *testing.T) {
	for target, parse := range map[string]func([]byte) (*Forest, error){"FuzzParse": Parse, "FuzzParseUBJSON": parseUBJSON} {
		dir := filepath.Join("testdata", "fuzz", target)
		entries, err := os.ReadDir(dir)
		if err != nil {
			t.Fatal(err)
		}
		if len(entries) < 10 {
			t.Fatalf("%s: %d seeds", dir, len(entries))
		}
		for _, e := range entries {
			raw, err := os.ReadFile(filepath.Join(dir, e.Name()))
			if err != nil {
				t.Fatal(err)
			}
			header, literal, _ := strings.Cut(strings.TrimSpace(string(raw)), "\n")
			text, ok := strings.CutPrefix(literal, "[]byte(")
			text, ok2 := strings.CutSuffix(text, ")")
			data, err := strconv.Unquote(text)
			if header != "go test fuzz v1" || !ok || !ok2 || err != nil {
				t.Fatalf("%s/%s is not a go test fuzz v1 []byte: %v", target, e.Name(), err)
			}
			_, err = parse([]byte(data))
			switch {
			case strings.HasPrefix(e.Name(), "valid_"):
				if err != nil {
					t.Errorf("%s/%s: %v", target, e.Name(), err)
				}
			case !errors.Is(err, ErrInvalid) && !errors.Is(err, ErrUnsupported):
				t.Errorf("%s/%s: %v, want an invalid or unsupported model error", target, e.Name(), err)
			}
		}
	}
}

// TestQuoteNonFiniteLeavesStringsAlone: XGBoost's bare NaN and Infinity
// tokens are quoted for encoding/json; the same letters inside a string
// (a feature named NaN) are not.
func TestQuoteNonFiniteLeavesStringsAlone(t *testing.T) {
	in := `{"feature_names":["NaN","a\"NaN"],"split_conditions":[NaN,-Infinity,Infinity,1.5]}`
	want := `{"feature_names":["NaN","a\"NaN"],"split_conditions":["NaN","-Infinity","Infinity",1.5]}`
	if got := string(quoteNonFinite([]byte(in))); got != want {
		t.Errorf("quoteNonFinite:\n got %s\nwant %s", got, want)
	}
}

// TestParseReadsLongNumbersExactly: a split condition or base_score
// written with more than 800 digits before its exponent is the number it
// denotes (strconv alone would read 5 then 1,000 zeros then e-1001 as
// about 5e-202).
func TestParseReadsLongNumbersExactly(t *testing.T) {
	tiny := string(readTestdata(t, "tiny.json"))
	want, err := Parse([]byte(tiny))
	if err != nil {
		t.Fatal(err)
	}
	half := "5" + strings.Repeat("0", 1000) + "e-1001"
	edited := strings.Replace(tiny, `"split_conditions":[0.5,`, `"split_conditions":[`+half+`,`, 1)
	edited = strings.Replace(edited, `"base_score":"5E-1"`, `"base_score":"`+half+`"`, 1)
	if edited == tiny || strings.Count(edited, half) != 2 {
		t.Fatal("tiny.json no longer has the split condition and base_score this test rewrites")
	}
	got, err := Parse([]byte(edited))
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("with 0.5 written in 1,007 bytes:\n got %+v\nwant %+v", got, want)
	}
}
