package xgboost

import (
	"encoding/json"
	"math"
	"os"
	"path/filepath"
	"slices"
	"testing"
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
}

// cases are the models make_models.py trains, one per objective (and
// dart).
var cases = []string{"squarederror", "reg_logistic", "binary_logistic", "binary_logitraw",
	"multi_softprob", "multi_softmax", "count_poisson", "rank_pairwise", "dart"}

func loadCase(t testing.TB, name string) (*Forest, expected) {
	t.Helper()
	data, err := os.ReadFile(filepath.Join("testdata", name+".json"))
	if err != nil {
		t.Fatal(err)
	}
	f, err := Parse(data)
	if err != nil {
		t.Fatalf("Parse(%s): %v", name, err)
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

// TestPredictionsEqualPythonXGBoost: for every objective (and a dart
// booster), the margins and predictions of the rows (with missing values,
// and a row of nothing but) equal python3-xgboost's predict, with and
// without output_margin, within 1e-6 · max(1, |expected|).
func TestPredictionsEqualPythonXGBoost(t *testing.T) {
	for _, name := range cases {
		t.Run(name, func(t *testing.T) {
			f, e := loadCase(t, name)
			if f.Objective.String() != e.Objective {
				t.Errorf("objective %s, the file says %s", f.Objective, e.Objective)
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
			if w := f.PredictionWidth(); (w > 1) != (len(e.PredictionShape) == 2) {
				t.Errorf("prediction width %d, python3-xgboost's shape %v", w, e.PredictionShape)
			}
		})
	}
}

// TestMarginsOneRowAtATimeEqualBlock: a row's margins do not depend on
// the rows evaluated with it (blocks of rows, a batch of one).
func TestMarginsOneRowAtATimeEqualBlock(t *testing.T) {
	f, e := loadCase(t, "multi_softprob")
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
			t.Fatalf("row %d alone: %v, in the batch: %v", r, one, all[r*f.NumGroup:(r+1)*f.NumGroup])
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
