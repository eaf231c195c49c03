package xgboost

import (
	"errors"
	"math"
	"os"
	"path/filepath"
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
// the right kind that names it.
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
		{"truncated", []byte(tiny[:len(tiny)/2]), ErrInvalid, "unexpected EOF"},
		{"not JSON", []byte("hello"), ErrInvalid, "invalid character"},
		{"no learner", []byte(`{"version":[1,7,4]}`), ErrInvalid, `no "learner"`},
		{"trailing data", []byte(strings.TrimSpace(tiny) + "{}"), ErrInvalid, "data after"},
		{"root as a child", edit(`"left_children":[1,-1,-1]`, `"left_children":[1,0,-1]`), ErrInvalid, "outside 1..2"},
		{"two parents (a cycle)", edit(`"left_children":[1,-1,-1]`, `"left_children":[1,2,-1]`), ErrInvalid, "one parent"},
		{"child out of range", edit(`"right_children":[2,-1,-1]`, `"right_children":[9,-1,-1]`), ErrInvalid, "child 9"},
		{"feature out of range", edit(`"split_indices":[1,0,0]`, `"split_indices":[7,0,0]`), ErrInvalid, "feature 7"},
		{"lengths disagree", edit(`"split_conditions":[0.5,1.5,-2.5]`, `"split_conditions":[0.5,1.5]`), ErrInvalid, "split_conditions has 2"},
		{"num_nodes disagrees", edit(`"num_nodes":"3"`, `"num_nodes":"5"`), ErrInvalid, "num_nodes is 5"},
		{"num_trees disagrees", edit(`"num_trees":"1"`, `"num_trees":"2"`), ErrInvalid, "num_trees is 2"},
		{"tree_info out of range", edit(`"tree_info":[0]`, `"tree_info":[1]`), ErrInvalid, "tree_info 1"},
		{"feature_names count", edit(`"feature_names":["a","b"]`, `"feature_names":["a"]`), ErrInvalid, "1 feature_names"},
		{"bad default_left", edit(`"default_left":[1,0,0]`, `"default_left":[2,0,0]`), ErrInvalid, "default_left entry 2"},
		{"huge num_feature", edit(`"num_feature":"2","num_target"`, `"num_feature":"99999999999","num_target"`), ErrInvalid, "num_feature is"},
		{"base_score not a probability", edit(`"reg:squarederror"`, `"binary:logistic"`), nil, ""},
		{"categorical split", edit(`"split_type":[0,0,0]`, `"split_type":[1,0,0]`), ErrUnsupported, "categorical splits"},
		{"unknown objective", edit(`"reg:squarederror"`, `"reg:tweedie"`), ErrUnsupported, `objective "reg:tweedie"`},
		{"multi-target", edit(`"num_target":"1"`, `"num_target":"2"`), ErrUnsupported, "multi-target"},
		{"unknown booster", edit(`"name":"gbtree"`, `"name":"gbmystery"`), ErrUnsupported, `booster "gbmystery"`},
		{"UBJSON file", readTestdata(t, "refused_ubjson.ubj"), ErrUnsupported, "UBJSON"},
		{"legacy binary file", readTestdata(t, "refused_legacy.model"), ErrUnsupported, "legacy binary"},
		{"gblinear file", readTestdata(t, "refused_gblinear.json"), ErrUnsupported, "gblinear"},
		{"categorical file", readTestdata(t, "refused_categorical.json"), ErrUnsupported, "categorical"},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, err := Parse(c.data)
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
		{readTestdata(t, "refused_ubjson.ubj"), FormatUBJSON},
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

// FuzzParse: no input makes Parse panic or loop, and a model it accepts
// evaluates rows (missing values included) without panicking.
func FuzzParse(f *testing.F) {
	f.Fuzz(func(t *testing.T, data []byte) {
		forest, err := Parse(data)
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
	})
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
