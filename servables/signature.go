package servables

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync/atomic"
)

// Where a model's signature (the datatypes and shapes of its inputs and
// outputs) comes from: the values of Metadata.Signature.
const (
	// SignatureRuntime: what the runtime reads from the model file. ONNX
	// records datatypes and shapes; TorchScript records only the names of
	// forward's arguments.
	SignatureRuntime = "runtime"
	// SignatureDeclared: the model config's inputs and outputs.
	SignatureDeclared = "declared"
	// SignatureWarmUp: learned from the model's warm-up requests and the
	// outputs they produced (first dimension -1).
	SignatureWarmUp = "warm_up"
)

// oipNames are the Open Inference Protocol names of the DTypes.
var oipNames = [...]string{Float32: "FP32", Float64: "FP64", Int8: "INT8", Int16: "INT16", Int32: "INT32", Int64: "INT64", Bool: "BOOL", Uint8: "UINT8",
	Float16: "FP16", BFloat16: "BF16", Bytes: "BYTES"}

// OIPName returns the Open Inference Protocol name of d (FP32, FP64, INT8,
// ...), or its B&A name when OIP has none.
func OIPName(d DType) string {
	if int(d) < len(oipNames) && oipNames[d] != "" {
		return oipNames[d]
	}
	return d.String()
}

// ParseOIPName returns the DType of an Open Inference Protocol datatype
// name; ok is false for a name this build has no DType for.
func ParseOIPName(s string) (DType, bool) {
	for i, n := range oipNames {
		if n == s && n != "" {
			return DType(i), true
		}
	}
	return Unknown, false
}

// InvalidInputf returns an error wrapping ErrInvalidInput whose message
// names datatypes in the vocabulary of whoever reads it (a DTypeError: see
// RenderDTypes). Arguments of type DType, TensorSpec (written
// "x FP32 [-1 64]") and []TensorSpec (comma-separated) are written that
// way; the others as fmt does.
func InvalidInputf(format string, args ...any) error {
	for i, a := range args {
		if specs, ok := a.([]TensorSpec); ok {
			args[i] = specList(specs)
		}
	}
	return Errorf(ErrInvalidInput, format, args...)
}

// specList is a []TensorSpec argument of a DTypeError.
type specList []TensorSpec

// FormatDTypes writes the specs comma-separated.
func (l specList) FormatDTypes(name func(DType) string) string { return describeSpecs(l, name) }

// FormatDTypes writes s as describe does, so that a TensorSpec argument of
// a DTypeError names its datatype in the reader's vocabulary.
func (s TensorSpec) FormatDTypes(name func(DType) string) string { return s.describe(name) }

// describe writes s as "x FP32 [-1 64]", leaving out what is unknown.
func (s TensorSpec) describe(name func(DType) string) string {
	out := s.Name
	if s.DType != Unknown {
		out += " " + name(s.DType)
	}
	if s.Shape != nil {
		out += fmt.Sprintf(" %v", s.Shape)
	}
	if s.Optional {
		out += " (optional)"
	}
	return out
}

func describeSpecs(specs []TensorSpec, name func(DType) string) string {
	if len(specs) == 0 {
		return "none"
	}
	parts := make([]string, len(specs))
	for i, s := range specs {
		parts[i] = s.describe(name)
	}
	return strings.Join(parts, ", ")
}

// Sent describes tensors as a request sent them: names, datatypes and
// shapes, for error messages.
func Sent(inputs []Tensor) []TensorSpec {
	out := make([]TensorSpec, len(inputs))
	for i, t := range inputs {
		out[i] = TensorSpec{Name: t.Name, DType: t.DType, Shape: t.Shape}
		if out[i].Shape == nil {
			out[i].Shape = []int64{}
		}
	}
	return out
}

// Bind matches inputs to specs, a model's inputs: by name when every input
// has one, by position (in specs' order) when none has. It returns, for
// each spec, the index of the input bound to it, or -1 for an optional
// input not given. An unknown, repeated or missing name, a mix of named
// and unnamed inputs, or too many or too few unnamed ones is an
// InvalidInputf error that lists the model's inputs.
func Bind(specs []TensorSpec, inputs []Tensor) ([]int, error) {
	bad := func(format string, args ...any) error {
		return InvalidInputf(format+"; the model's inputs are: %s", append(args, specs)...)
	}
	named := 0
	for _, t := range inputs {
		if t.Name != "" {
			named++
		}
	}
	idx := make([]int, len(specs))
	for j := range idx {
		idx[j] = -1
	}
	required := 0
	for _, s := range specs {
		if !s.Optional {
			required++
		}
	}
	switch {
	case named == 0:
		if len(inputs) > len(specs) || len(inputs) < required {
			want := fmt.Sprint(len(specs))
			if required != len(specs) {
				want = fmt.Sprintf("%d to %d", required, len(specs))
			}
			return nil, bad("got %d unnamed input tensors, the model takes %s (unnamed inputs are taken in the model's order, named ones by name)", len(inputs), want)
		}
		for i := range inputs {
			idx[i] = i
		}
		for j := len(inputs); j < len(specs); j++ {
			if !specs[j].Optional {
				return nil, bad("input %q is missing", specs[j].Name)
			}
		}
		return idx, nil
	case named < len(inputs):
		for i, t := range inputs {
			if t.Name == "" {
				return nil, bad("input %d has no name while others have one (name every input, or none to give them in the model's order)", i)
			}
		}
	}
	for i, t := range inputs {
		j := slices.IndexFunc(specs, func(s TensorSpec) bool { return s.Name == t.Name })
		switch {
		case j < 0:
			return nil, bad("unknown input %q", t.Name)
		case idx[j] >= 0:
			return nil, bad("input %q is given twice", t.Name)
		}
		idx[j] = i
	}
	var missing []string
	for j, s := range specs {
		if idx[j] < 0 && !s.Optional {
			missing = append(missing, fmt.Sprintf("%q", s.Name))
		}
	}
	if len(missing) > 0 {
		return nil, bad("missing input %s", strings.Join(missing, ", "))
	}
	return idx, nil
}

// CheckInputs binds inputs to meta's inputs (see Bind) and checks each
// against its spec: the datatype, when the spec has one (or its
// AlsoTakes), and the rank and
// fixed (non -1) dimensions, when it has a shape of rank 1 or more (rank 0
// is not checked: ONNX Runtime reports an unknown rank the same way). An
// error is an InvalidInputf error naming the tensor, what was sent and
// what the model takes.
func CheckInputs(meta Metadata, inputs []Tensor) error {
	if InOrder(meta.Inputs, inputs) { // the common case, without allocating
		for j, t := range inputs {
			if err := checkTensor("input", meta.Inputs[j], t); err != nil {
				return err
			}
		}
		return nil
	}
	idx, err := Bind(meta.Inputs, inputs)
	if err != nil {
		return err
	}
	for j, i := range idx {
		if i < 0 {
			continue
		}
		s, t := meta.Inputs[j], inputs[i]
		if err := checkTensor("input", s, t); err != nil {
			return err
		}
	}
	return nil
}

// InOrder reports whether inputs are already bound to specs one for one,
// as Bind would bind them: as many, and either all unnamed or all named
// as the specs they stand for, in order.
func InOrder(specs []TensorSpec, inputs []Tensor) bool {
	if len(inputs) != len(specs) {
		return false
	}
	named := len(inputs) > 0 && inputs[0].Name != ""
	for j, t := range inputs {
		if (named && t.Name != specs[j].Name) || (!named && t.Name != "") {
			return false
		}
	}
	return true
}

// checkTensor checks t against spec s; what is "input" or "output".
func checkTensor(what string, s TensorSpec, t Tensor) error {
	switch {
	case s.DType != Unknown && t.DType != s.DType && (s.AlsoTakes == Unknown || t.DType != s.AlsoTakes):
		if s.AlsoTakes != Unknown {
			return InvalidInputf("%s %q is %v, the model takes %v or %v (%s)", what, s.Name, t.DType, s.DType, s.AlsoTakes, s)
		}
		return InvalidInputf("%s %q is %v, the model takes %v (%s)", what, s.Name, t.DType, s.DType, s)
	case len(s.Shape) == 0:
	case len(t.Shape) != len(s.Shape):
		return InvalidInputf("%s %q has shape %v (rank %d), the model takes rank %d: %v", what, s.Name, t.Shape, len(t.Shape), len(s.Shape), s.Shape)
	default:
		for k, d := range s.Shape {
			if d >= 0 && t.Shape[k] != d {
				return InvalidInputf("%s %q has shape %v, the model takes %v (dimension %d must be %d)", what, s.Name, t.Shape, s.Shape, k, d)
			}
		}
	}
	return nil
}

// Declare applies a declared signature (the model config's inputs and
// outputs; either may be empty: not declared) to rt, the metadata the
// runtime reports. The declared inputs must be rt's inputs, with the same
// names in the same order (trailing optional inputs may be left out);
// where rt knows a datatype or a shape, the declared one must agree (the
// same datatype; the same rank and, for each dimension, the same size or
// -1 on either side). Declared outputs must be as many as rt's, when rt
// knows them, and have their names unless rt.ByPosition (TorchScript's
// outputs are Grove's output_0, output_1, ...: a declaration names them).
// The result takes the declared specs, with any dimension fixed on either
// side fixed and the runtime's AlsoTakes, and Signature SignatureDeclared; declared outputs clear
// UnnamedOutputs and set OutputsDeclared.
func Declare(rt Metadata, inputs, outputs []TensorSpec) (Metadata, error) {
	out := rt
	out.Inputs, out.Outputs = slices.Clone(rt.Inputs), slices.Clone(rt.Outputs)
	if len(inputs) == 0 && len(outputs) == 0 {
		return out, nil
	}
	out.Signature = SignatureDeclared
	if len(inputs) > 0 {
		names := func(specs []TensorSpec) string { return describeSpecs(specs, DType.String) }
		if len(inputs) > len(rt.Inputs) || (len(inputs) < len(rt.Inputs) && !rt.Inputs[len(inputs)].Optional) {
			return Metadata{}, fmt.Errorf("the declared inputs (%s) are not the model's (%s)", names(inputs), names(rt.Inputs))
		}
		merged := make([]TensorSpec, len(inputs))
		for j, d := range inputs {
			m, err := agree("input", j, rt.Inputs[j], d, false)
			if err != nil {
				return Metadata{}, fmt.Errorf("%w; the model's inputs are: %s", err, names(rt.Inputs))
			}
			merged[j] = m
		}
		out.Inputs = merged
	}
	if len(outputs) > 0 {
		if len(rt.Outputs) > 0 && len(outputs) != len(rt.Outputs) {
			return Metadata{}, fmt.Errorf("%d outputs are declared, the model has %d (%s)", len(outputs), len(rt.Outputs), describeSpecs(rt.Outputs, DType.String))
		}
		merged := make([]TensorSpec, len(outputs))
		for j, d := range outputs {
			m := d
			if j < len(rt.Outputs) {
				var err error
				if m, err = agree("output", j, rt.Outputs[j], d, rt.ByPosition); err != nil {
					return Metadata{}, err
				}
			}
			merged[j] = m
		}
		out.Outputs = merged
		out.UnnamedOutputs = false // the declaration names them
		out.OutputsDeclared = true
	}
	return out, nil
}

// agree checks declared spec d against the runtime's spec r of the j-th
// input or output and returns their combination; rename lets d name it.
func agree(what string, j int, r, d TensorSpec, rename bool) (TensorSpec, error) {
	if !rename && d.Name != r.Name {
		return TensorSpec{}, fmt.Errorf("declared %s %d is %q, the model's is %q", what, j, d.Name, r.Name)
	}
	if r.DType != Unknown && d.DType != r.DType {
		return TensorSpec{}, fmt.Errorf("declared %s %q is %v, the model's is %v", what, d.Name, d.DType, r.DType)
	}
	m := d
	m.Optional, m.AlsoTakes = r.Optional, r.AlsoTakes
	if len(r.Shape) == 0 {
		return m, nil
	}
	if len(d.Shape) != len(r.Shape) {
		return TensorSpec{}, fmt.Errorf("declared %s %q has shape %v, the model's is %v (another rank)", what, d.Name, d.Shape, r.Shape)
	}
	m.Shape = slices.Clone(d.Shape)
	for k, rd := range r.Shape {
		switch dd := d.Shape[k]; {
		case rd < 0:
		case dd < 0:
			m.Shape[k] = rd
		case dd != rd:
			return TensorSpec{}, fmt.Errorf("declared %s %q has shape %v, the model's is %v (dimension %d)", what, d.Name, d.Shape, r.Shape, k)
		}
	}
	return m, nil
}

// Known reports whether every input and output of meta has a datatype and
// a shape, and the outputs are known.
func (m Metadata) Known() bool {
	if len(m.Outputs) == 0 && len(m.Inputs) == 0 {
		return false
	}
	for _, specs := range [][]TensorSpec{m.Inputs, m.Outputs} {
		for _, s := range specs {
			if s.DType == Unknown || s.Shape == nil {
				return false
			}
		}
	}
	return len(m.Outputs) > 0
}

// Learn completes meta from warm-up requests, each a set of inputs (bound
// to meta's inputs as Bind binds them) and the outputs the model answered:
// an input or output whose datatype or shape meta does not know takes
// those seen, with the first dimension -1 and any other dimension that
// varied between requests -1 (a datatype that varied stays unknown).
// Outputs meta does not list are named output_0, output_1, ... When it
// learned anything, the result's Signature is SignatureWarmUp unless it was
// SignatureDeclared.
func Learn(meta Metadata, inputs, outputs [][]Tensor) (Metadata, error) {
	out := meta
	out.Inputs, out.Outputs = slices.Clone(meta.Inputs), slices.Clone(meta.Outputs)
	learned := false
	seen := make([][]Tensor, len(out.Inputs))
	for _, set := range inputs {
		idx, err := Bind(meta.Inputs, set)
		if err != nil {
			return Metadata{}, err
		}
		for j, i := range idx {
			if i >= 0 {
				seen[j] = append(seen[j], set[i])
			}
		}
	}
	for j := range out.Inputs {
		learned = learnSpec(&out.Inputs[j], seen[j]) || learned
	}
	var outSeen [][]Tensor
	for _, set := range outputs {
		for k, t := range set {
			if k == len(outSeen) {
				outSeen = append(outSeen, nil)
			}
			outSeen[k] = append(outSeen[k], t)
		}
	}
	if len(outSeen) > 0 && len(out.Outputs) > 0 && len(outSeen) != len(out.Outputs) {
		return Metadata{}, fmt.Errorf("the warm-up's outputs are %d tensors, the model's signature has %d (%s)", len(outSeen), len(out.Outputs), describeSpecs(out.Outputs, DType.String))
	}
	for k := len(out.Outputs); k < len(outSeen); k++ {
		out.Outputs = append(out.Outputs, TensorSpec{Name: outSeen[k][0].Name})
	}
	for k := range outSeen {
		learned = learnSpec(&out.Outputs[k], outSeen[k]) || learned
	}
	if learned && out.Signature != SignatureDeclared {
		out.Signature = SignatureWarmUp
	}
	return out, nil
}

// learnSpec fills in s's unknown datatype and shape from the tensors seen
// for it, and reports whether it did.
func learnSpec(s *TensorSpec, seen []Tensor) bool {
	if len(seen) == 0 {
		return false
	}
	learned := false
	if s.DType == Unknown {
		dt := seen[0].DType
		for _, t := range seen[1:] {
			if t.DType != dt {
				dt = Unknown
			}
		}
		s.DType, learned = dt, dt != Unknown
	}
	if s.Shape == nil {
		shape := slices.Clone(seen[0].Shape)
		if shape == nil {
			shape = []int64{}
		}
		for _, t := range seen[1:] {
			if len(t.Shape) != len(shape) {
				return learned // the rank varies: unknown
			}
			for k := range shape {
				if t.Shape[k] != shape[k] {
					shape[k] = -1
				}
			}
		}
		if len(shape) > 0 {
			shape[0] = -1
		}
		s.Shape, learned = shape, true
	}
	return learned
}

// Signed is a servable with a signature: it checks every request against
// its metadata before the forward call (CheckInputs), and names the
// outputs of a declared signature as it does. The metadata may be
// completed once (SetMetadata, after the warm-up) before the servable
// takes traffic; Signed is safe for concurrent use.
type Signed struct {
	Servable
	meta atomic.Pointer[Metadata]
}

// WithSignature wraps sv with the signature meta (sv's own metadata, or
// Declare's result).
func WithSignature(sv Servable, meta Metadata) *Signed {
	s := &Signed{Servable: sv}
	s.meta.Store(&meta)
	return s
}

// Metadata returns the signature in force.
func (s *Signed) Metadata() Metadata { return *s.meta.Load() }

// SetMetadata replaces the signature (a learned one).
func (s *Signed) SetMetadata(m Metadata) { s.meta.Store(&m) }

// Predict checks inputs against the signature, runs the model, and, when
// the outputs are declared (Metadata.OutputsDeclared; not when they were
// learned from the warm-up), checks the outputs' count, datatypes and
// shapes (a mismatch wraps ErrOutput: the model does not do what its
// declaration says) and gives them the declared names. A call that names
// the outputs it wants (WithOutputs) may get only those from a runtime
// that names its outputs (not Metadata.ByPosition): they are checked by
// name.
func (s *Signed) Predict(ctx context.Context, inputs []Tensor) ([]Tensor, error) {
	m := s.meta.Load()
	if err := CheckInputs(*m, inputs); err != nil {
		return nil, err
	}
	out, err := s.Servable.Predict(ctx, inputs)
	if err != nil || !m.OutputsDeclared {
		return out, err
	}
	specs := m.Outputs
	if _, filtered := OutputsFrom(ctx); filtered && !m.ByPosition {
		// A runtime that returns only the outputs asked for (ONNX) names
		// them as the declaration does (Declare): match them by name.
		specs = make([]TensorSpec, len(out))
		for k, t := range out {
			j := slices.IndexFunc(m.Outputs, func(s TensorSpec) bool { return s.Name == t.Name })
			if j < 0 {
				return nil, fmt.Errorf("%w: the model returned an output %q, its declared signature has %s", ErrOutput, t.Name, describeSpecs(m.Outputs, DType.String))
			}
			specs[k] = m.Outputs[j]
		}
	} else if len(out) != len(m.Outputs) {
		return nil, fmt.Errorf("%w: the model returned %d outputs, its declared signature has %d (%s)", ErrOutput, len(out), len(m.Outputs), describeSpecs(m.Outputs, DType.String))
	}
	for k := range out {
		if err := checkTensor("output", specs[k], out[k]); err != nil {
			return nil, fmt.Errorf("%w: %s, as declared", ErrOutput, strings.TrimPrefix(err.Error(), ErrInvalidInput.Error()+": "))
		}
		out[k].Name = specs[k].Name
	}
	return out, nil
}
