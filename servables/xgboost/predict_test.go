package xgboost

import (
	"context"
	"encoding/json"
	"math"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/groveml/grove/servables"
)

// expected is a <case>.expected.json file of testdata/make_models.py:
// python3-xgboost's outputs on an input matrix.
type expected struct {
	Objective       string       `json:"objective"`
	Input           [][]*float64 `json:"input"`
	Prediction      []float64    `json:"prediction"`
	PredictionShape []int        `json:"prediction_shape"`
	Margin          []float64    `json:"margin"`
	MarginShape     []int        `json:"margin_shape"`
	// MissingValue is the value the model takes as missing besides NaN
	// (the model entry's missing_value); nil for none.
	MissingValue *float64 `json:"missing_value"`
}

// loadOptions are the load options the expected file asks for.
func (e expected) loadOptions() servables.LoadOptions {
	return servables.LoadOptions{MissingValue: e.MissingValue}
}

// cases are the models make_models.py trains: one per objective (and
// dart), the categorical ones (one pruned after training), and one
// trained with a missing value sentinel. Each is saved as JSON (.json) and UBJSON (.ubj).
var cases = []string{"squarederror", "reg_logistic", "binary_logistic", "binary_logitraw",
	"multi_softprob", "multi_softmax", "count_poisson", "rank_pairwise", "dart",
	"cat_binary_logistic", "cat_binary_logistic_dense", "cat_multi_softprob", "cat_multi_softprob_dense",
	"missing_sentinel", "cat_pruned"}

// formats are the extensions of the files make_models.py saves each case as.
var formats = []string{".json", ".ubj"}

// loadCase parses case name's JSON model and reads its expected outputs.
func loadCase(t testing.TB, name string) (*Forest, expected) {
	t.Helper()
	return loadCaseAs(t, name, ".json")
}

// loadCaseAs parses case name's model file of extension ext (.json,
// .ubj) and reads its expected outputs.
func loadCaseAs(t testing.TB, name, ext string) (*Forest, expected) {
	t.Helper()
	data, err := os.ReadFile(filepath.Join("testdata", name+ext))
	if err != nil {
		t.Fatal(err)
	}
	f, err := Parse(data)
	if err != nil {
		t.Fatalf("Parse(%s%s): %v", name, ext, err)
	}
	raw, err := os.ReadFile(filepath.Join("testdata", name+".expected.json"))
	if err != nil {
		t.Fatal(err)
	}
	var e expected
	if err := json.Unmarshal(raw, &e); err != nil {
		t.Fatal(err)
	}
	return f, e
}

// matrix flattens the expected input, null as NaN.
func (e expected) matrix() ([]float32, int) {
	var x []float32
	for _, row := range e.Input {
		for _, v := range row {
			if v == nil {
				x = append(x, float32(math.NaN()))
			} else {
				x = append(x, float32(*v))
			}
		}
	}
	return x, len(e.Input)
}

// near reports whether got is within 1e-6 · max(1, |want|) of want.
func near(got float32, want float64) bool {
	return math.Abs(float64(got)-want) <= 1e-6*math.Max(1, math.Abs(want))
}

func compare(t *testing.T, what string, got []float32, want []float64) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("%s: %d values, want %d", what, len(got), len(want))
	}
	bad := 0
	for i := range got {
		if !near(got[i], want[i]) {
			if bad < 5 {
				t.Errorf("%s[%d] = %.9g, python3-xgboost says %.9g", what, i, got[i], want[i])
			}
			bad++
		}
	}
	if bad > 0 {
		t.Errorf("%s: %d of %d values differ", what, bad, len(got))
	}
}

// TestPredictionsEqualPythonXGBoost: for every case (every objective, a
// dart booster, categorical models with and without missing values, a
// model whose missing value is -999), read from its JSON and its UBJSON
// file, the margins and predictions of the servable on the rows (with
// missing values, a row of nothing but, categories unseen in training)
// equal python3-xgboost's predict, with and without output_margin, within
// 1e-6 · max(1, |expected|).
func TestPredictionsEqualPythonXGBoost(t *testing.T) {
	for _, name := range cases {
		for _, ext := range formats {
			t.Run(name+ext, func(t *testing.T) {
				f, e := loadCaseAs(t, name, ext)
				if f.Objective.String() != e.Objective {
					t.Errorf("objective %s, the file says %s", f.Objective, e.Objective)
				}
				m, err := NewModel(f, e.loadOptions())
				if err != nil {
					t.Fatal(err)
				}
				out, err := m.Predict(context.Background(), []servables.Tensor{inputTensor(t, e, servables.Float32, "")})
				if err != nil {
					t.Fatal(err)
				}
				compare(t, "margin", out[1].Float32s(), e.Margin)
				compare(t, "prediction", out[0].Float32s(), e.Prediction)
				if w := f.PredictionWidth(); (w > 1) != (len(e.PredictionShape) == 2) {
					t.Errorf("prediction width %d, python3-xgboost's shape %v", w, e.PredictionShape)
				}
			})
		}
	}
}

// TestMarginsEqualPythonXGBoost: Forest.Margins and Transform alone, on
// the cases whose missing values are NaN, give python3-xgboost's margins
// and predictions.
func TestMarginsEqualPythonXGBoost(t *testing.T) {
	for _, name := range cases {
		t.Run(name, func(t *testing.T) {
			f, e := loadCase(t, name)
			if e.MissingValue != nil {
				t.Skip("the model's missing value is not NaN: Model.Predict maps it")
			}
			x, rows := e.matrix()
			margins := make([]float32, rows*f.NumGroup)
			if err := f.Margins(x, rows, margins); err != nil {
				t.Fatal(err)
			}
			compare(t, "margin", margins, e.Margin)
			pred := make([]float32, rows*f.PredictionWidth())
			if err := f.Transform(margins, rows, pred); err != nil {
				t.Fatal(err)
			}
			compare(t, "prediction", pred, e.Prediction)
		})
	}
}

// TestMarginsOneRowAtATimeEqualBlock: a row's margins do not depend on
// the rows evaluated with it (blocks of rows, a batch of one), on the
// numeric path and the categorical one.
func TestMarginsOneRowAtATimeEqualBlock(t *testing.T) {
	for _, name := range []string{"multi_softprob", "cat_multi_softprob"} {
		f, e := loadCase(t, name)
		x, rows := e.matrix()
		all := make([]float32, rows*f.NumGroup)
		if err := f.Margins(x, rows, all); err != nil {
			t.Fatal(err)
		}
		one := make([]float32, f.NumGroup)
		for r := 0; r < rows; r++ {
			if err := f.Margins(x[r*f.NumFeature:(r+1)*f.NumFeature], 1, one); err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(one, all[r*f.NumGroup:(r+1)*f.NumGroup]) {
				t.Fatalf("%s: row %d alone: %v, in the batch: %v", name, r, one, all[r*f.NumGroup:(r+1)*f.NumGroup])
			}
		}
	}
}

// TestMarginsRefuseWrongSizes: buffers that do not fit the row count are
// an error, not an index out of range.
func TestMarginsRefuseWrongSizes(t *testing.T) {
	f, _ := loadCase(t, "squarederror")
	if err := f.Margins(make([]float32, f.NumFeature*2), 3, make([]float32, 3)); err == nil {
		t.Error("Margins with 2 rows of input for 3 rows: no error")
	}
	if err := f.Margins(make([]float32, f.NumFeature*2), 2, make([]float32, 1)); err == nil {
		t.Error("Margins with 1 output for 2 rows: no error")
	}
	if err := f.Transform(make([]float32, 2), 2, make([]float32, 3)); err == nil {
		t.Error("Transform with 3 outputs for 2 rows: no error")
	}
}
