package actors

import (
	"fmt"

	"github.com/groveml/grove/conf/modelconfig"
	"github.com/groveml/grove/servables"
)

// Model signatures: what the metadata APIs describe and what every
// request is checked against (servables.Signed) before its forward call.
//
//   - At load (System.load) the runtime's metadata is combined with the
//     model config's declared inputs and outputs (servables.Declare); a
//     declaration that does not fit the model fails the load.
//   - What is still unknown (TorchScript records no datatypes or shapes) is
//     learned from the warm-up: its requests and the outputs they produced
//     (content.learn, servables.Learn), before the content is published.
//     A model with neither keeps the runtime's metadata (names only, for
//     TorchScript).
//   - Requests of protocols whose convention is positional (the B&A API,
//     Request.Positional) reach a runtime whose own convention is too
//     (servables.Metadata.ByPosition) unnamed: bound by position.

// declare applies the declared signature to rt, the runtime's metadata.
func declare(rt servables.Metadata, declared modelconfig.Signature) (servables.Metadata, error) {
	if declared.IsZero() {
		return rt, nil
	}
	inputs, err := specs("inputs", declared.Inputs)
	if err != nil {
		return servables.Metadata{}, err
	}
	outputs, err := specs("outputs", declared.Outputs)
	if err != nil {
		return servables.Metadata{}, err
	}
	meta, err := servables.Declare(rt, inputs, outputs)
	if err != nil {
		return servables.Metadata{}, fmt.Errorf("the declared signature (model config inputs and outputs) does not fit the model: %w", err)
	}
	return meta, nil
}

// specs converts declared tensors of the model config field.
func specs(field string, ts []modelconfig.TensorSignature) ([]servables.TensorSpec, error) {
	out := make([]servables.TensorSpec, len(ts))
	for i, t := range ts {
		dt, ok := servables.ParseOIPName(t.Datatype)
		if !ok {
			return nil, fmt.Errorf("model config %s: tensor %q has datatype %s, which this server's runtimes do not take", field, t.Name, t.Datatype)
		}
		shape := t.Shape
		if shape == nil {
			shape = []int64{}
		}
		out[i] = servables.TensorSpec{Name: t.Name, DType: dt, Shape: shape}
	}
	return out, nil
}

// metadata returns c's signature in force (the zero Metadata before the
// supervisor has set one).
func (c *content) metadata() servables.Metadata {
	if m := c.meta.Load(); m != nil {
		return *m
	}
	return servables.Metadata{}
}

// bind returns inputs as the model gets them: unnamed, so bound by
// position, when the request's protocol and the model's runtime both take
// inputs by position (positional and Metadata.ByPosition), or when the
// inputs are named after their types (typeNamed: ForestFlow) and none of
// those names is one of the model's inputs; else as they are. Inputs that
// have no names are not copied.
func (c *content) bind(inputs []servables.Tensor, positional, typeNamed bool) []servables.Tensor {
	if !named(inputs) {
		return inputs
	}
	meta := c.metadata()
	if !(positional && meta.ByPosition) && !(typeNamed && !namesAny(inputs, meta.Inputs)) {
		return inputs
	}
	out := make([]servables.Tensor, len(inputs))
	for i, t := range inputs {
		t.Name = ""
		out[i] = t
	}
	return out
}

// namesAny reports whether one of inputs is named after one of specs.
func namesAny(inputs []servables.Tensor, specs []servables.TensorSpec) bool {
	for i := range inputs {
		for j := range specs {
			if inputs[i].Name == specs[j].Name {
				return true
			}
		}
	}
	return false
}

// named reports whether any of inputs has a name.
func named(inputs []servables.Tensor) bool {
	for i := range inputs {
		if inputs[i].Name != "" {
			return true
		}
	}
	return false
}

// learn completes c's signature from its warm-up (inputs as sent, and the
// outputs they produced) when it does not know everything; it runs on the
// warm-up's goroutine, before c is published.
func (c *content) learn(inputs, outputs [][]servables.Tensor) error {
	meta := c.metadata()
	if meta.Known() || len(inputs) == 0 {
		return nil
	}
	learned, err := servables.Learn(meta, inputs, outputs)
	if err != nil {
		return fmt.Errorf("learning the model's signature from its warm-up: %w", err)
	}
	c.meta.Store(&learned)
	c.signed.SetMetadata(learned)
	return nil
}
