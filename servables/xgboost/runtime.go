package xgboost

import (
	"context"
	"encoding/json"
	"fmt"
	"io/fs"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"

	"github.com/groveml/grove/servables"
)

// RuntimeName is the name the XGBoost runtime reports.
const RuntimeName = "xgboost"

// The names of the model's input and outputs.
const (
	InputName      = "input"
	PredictionName = "prediction"
	MarginName     = "margin"
)

// Runtime loads XGBoost models (see the package doc). Its zero value is
// ready to use.
type Runtime struct{}

var _ servables.Runtime = Runtime{}

// Name returns "xgboost".
func (Runtime) Name() string { return RuntimeName }

// Accepts reports whether exactly one of files is an XGBoost model file by
// its content (Detect): JSON or UBJSON, or the legacy binary format, which
// Load then refuses with an error saying how to save the model as JSON or
// UBJSON.
func (Runtime) Accepts(fsys fs.FS, files []string) bool {
	_, err := modelFile(fsys, files)
	return err == nil
}

// modelFile returns the one XGBoost model file among files.
func modelFile(fsys fs.FS, files []string) (string, error) {
	var found []string
	if fsys != nil {
		for _, name := range files {
			if DetectFile(fsys, name) != FormatUnknown {
				found = append(found, name)
			}
		}
	}
	switch len(found) {
	case 1:
		return found[0], nil
	case 0:
		return "", fmt.Errorf("%w: no XGBoost model (a JSON or UBJSON file whose first key is \"learner\", as Booster.save_model writes it) among %s",
			servables.ErrUnsupportedRuntime, strings.Join(files, ", "))
	}
	return "", fmt.Errorf("%w: %d XGBoost model files (%s), a model has exactly one",
		servables.ErrUnsupportedRuntime, len(found), strings.Join(found, ", "))
}

// Load reads and checks the XGBoost model among files (see Accepts);
// opts.MissingValue, when set, is a value the model takes as missing, and
// with opts.IntraOpThreads above 1 a request with enough rows has them
// split over that many goroutines (see NewModel).
func (Runtime) Load(ctx context.Context, dir string, files []string, opts servables.LoadOptions) (servables.Servable, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	rel, err := modelFile(os.DirFS(dir), files)
	if err != nil {
		return nil, err
	}
	file := filepath.Join(dir, filepath.FromSlash(rel))
	data, err := os.ReadFile(file)
	if err != nil {
		return nil, fmt.Errorf("xgboost: loading model: %w", err)
	}
	f, err := Parse(data)
	if err != nil {
		return nil, fmt.Errorf("xgboost: loading %s: %w", file, err)
	}
	m, err := NewModel(f, opts)
	if err != nil {
		return nil, fmt.Errorf("xgboost: loading %s: %w", file, err)
	}
	return m, nil
}

// Model is a loaded XGBoost model. Predict is safe for concurrent use.
type Model struct {
	forest *Forest
	meta   servables.Metadata
	// miss is the value taken as missing besides NaN, if any.
	miss   missing
	closed atomic.Bool
	// workers split the rows of a large request (nil: one thread).
	workers *workers
}

var _ servables.Servable = (*Model)(nil)

// NewModel serves f. opts.MissingValue, when set, is a value an input
// takes as missing, as NaN is: an input equal to it once converted to
// float32 (as XGBoost's DMatrix(missing=...) compares) takes each split's
// default direction. It has to be a finite number. With
// opts.IntraOpThreads above 1, NewModel starts that many helper
// goroutines less one, stopped by Close: a request whose rows are enough
// work (see parallelMinSteps) is split over them and its own goroutine,
// with the same result as on one thread.
func NewModel(f *Forest, opts servables.LoadOptions) (*Model, error) {
	m := &Model{forest: f}
	if v := opts.MissingValue; v != nil {
		if math.IsNaN(*v) || math.IsInf(*v, 0) || math.IsInf(float64(float32(*v)), 0) {
			return nil, fmt.Errorf("missing_value %v is not a finite float32", *v)
		}
		m.miss = missing{value: float32(*v), set: true}
	}
	params := map[string]string{
		"objective":   f.Objective.String(),
		"booster":     f.Booster,
		"num_trees":   strconv.Itoa(f.NumTrees()),
		"num_feature": strconv.Itoa(f.NumFeature),
		"base_score":  strconv.FormatFloat(f.BaseScore, 'g', -1, 64),
	}
	if f.NumGroup > 1 {
		params["num_class"] = strconv.Itoa(f.NumGroup)
	}
	if f.FeatureNames != nil {
		names, _ := json.Marshal(f.FeatureNames) // strings always marshal
		params["feature_names"] = string(names)
	}
	if f.FeatureTypes != nil {
		types, _ := json.Marshal(f.FeatureTypes) // strings always marshal
		params["feature_types"] = string(types)
	}
	if f.BestIteration != "" {
		params["best_iteration"] = f.BestIteration
	}
	if m.miss.set {
		params["missing_value"] = strconv.FormatFloat(float64(m.miss.value), 'g', -1, 32)
	}
	if len(f.Version) > 0 {
		v := make([]string, len(f.Version))
		for i, n := range f.Version {
			v[i] = strconv.Itoa(n)
		}
		params["xgboost_version"] = strings.Join(v, ".")
	}
	m.meta = servables.Metadata{
		Runtime: RuntimeName,
		Inputs: []servables.TensorSpec{{Name: InputName, DType: servables.Float32, AlsoTakes: servables.Float64,
			Shape: []int64{-1, int64(f.NumFeature)}}},
		Outputs: []servables.TensorSpec{
			{Name: PredictionName, DType: servables.Float32, Shape: outShape(-1, f.PredictionWidth())},
			{Name: MarginName, DType: servables.Float32, Shape: outShape(-1, f.NumGroup)},
		},
		Signature:  servables.SignatureRuntime,
		ByPosition: true,
		Parameters: params,
	}
	m.workers = newWorkers(f, opts.IntraOpThreads)
	return m, nil
}

// Metadata returns the model's input (input, FP32 [-1, num_feature], which
// also takes FP64: AlsoTakes), its
// outputs (prediction and margin, FP32 [-1], or [-1, num_class] for the
// margins of a multi: objective and multi:softprob's predictions) and its
// parameters: objective, booster, num_trees, num_feature, num_class (multi:
// objectives), base_score, feature_names and feature_types (JSON arrays,
// when the file has them), best_iteration (when it has one; not applied),
// xgboost_version and missing_value (when the model entry gives one). The
// input is taken by position (ByPosition), as XGBoost takes its one matrix
// of features: the protocols that give inputs in the model's order (B&A,
// ForestFlow's schema entry named after its type) reach it whatever their
// tensor's name.
func (m *Model) Metadata() servables.Metadata { return m.meta }

// Forest returns the model's trees.
func (m *Model) Forest() *Forest { return m.forest }

// Predict evaluates the rows of one input tensor, FP32 or FP64 (converted
// to float32 as XGBoost does), of shape [batch, num_feature], named input
// or unnamed; NaN is a missing value, and so is the missing value NewModel
// was given. A categorical feature's value is its category's code (see
// categoricalBlock). It returns prediction and margin (see Metadata).
// Inputs that do not fit are an error wrapping servables.ErrInvalidInput.
func (m *Model) Predict(ctx context.Context, inputs []servables.Tensor) ([]servables.Tensor, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if m.closed.Load() {
		return nil, fmt.Errorf("%w: xgboost: the model is closed", servables.ErrUnavailable)
	}
	f := m.forest
	bad := func(format string, args ...any) error {
		return servables.InvalidInputf(format+"; the model's inputs are: %s", append(args, m.meta.Inputs)...)
	}
	if len(inputs) != 1 {
		return nil, bad("got %d input tensors, the model takes 1", len(inputs))
	}
	in := inputs[0]
	if in.Name != "" && in.Name != InputName {
		return nil, bad("unknown input %q", in.Name)
	}
	if in.DType != servables.Float32 && in.DType != servables.Float64 {
		return nil, bad("input %q is %v, the model takes %v or %v", InputName, in.DType, servables.Float32, servables.Float64)
	}
	if len(in.Shape) != 2 || in.Shape[1] != int64(f.NumFeature) {
		return nil, bad("input %q has shape %v, the model takes [batch %d]", InputName, in.Shape, f.NumFeature)
	}
	if err := in.Validate(); err != nil {
		return nil, bad("input %q: %v", InputName, err)
	}
	rows := int(in.Shape[0])
	margin, err := servables.NewTensor(MarginName, servables.Float32, outShape(rows, f.NumGroup))
	if err != nil {
		return nil, bad("input %q: %v", InputName, err)
	}
	pred, err := servables.NewTensor(PredictionName, servables.Float32, outShape(rows, f.PredictionWidth()))
	if err != nil {
		return nil, bad("input %q: %v", InputName, err)
	}
	var x32 []float32
	var x64 []float64
	if in.DType == servables.Float32 {
		x32 = in.Float32s()
	} else {
		x64 = in.Float64s()
	}
	if m.workers.worth(rows) {
		err = m.workers.margins(x32, x64, rows, margin.Float32s(), m.miss)
	} else {
		err = f.eval(x32, x64, rows, margin.Float32s(), m.miss)
	}
	if err != nil {
		return nil, err
	}
	if err := f.Transform(margin.Float32s(), rows, pred.Float32s()); err != nil {
		return nil, err
	}
	return []servables.Tensor{pred, margin}, nil
}

// outShape is an output's shape: [rows], or [rows, width] when a row has
// several values (rows -1: any number).
func outShape(rows, width int) []int64 {
	if width == 1 {
		return []int64{int64(rows)}
	}
	return []int64{int64(rows), int64(width)}
}

// Close marks the model closed, Predict fails after it, and stops the
// helper goroutines.
func (m *Model) Close() error {
	m.closed.Store(true)
	if m.workers != nil {
		m.workers.close()
	}
	return nil
}
