package forward

import (
	"time"

	"github.com/groveml/grove/servables"
)

// ModelInfo describes a model a node has ready, as the node publishes it
// in its member record, so that every other node answers the model's
// metadata, configuration and readiness as this one would without a call
// to it (docs/cluster.md, "Routing and forwarding").
type ModelInfo struct {
	// Checksum identifies the content that serves the model; LoadedAt is
	// when it was loaded.
	Checksum string    `json:"checksum,omitempty"`
	LoadedAt time.Time `json:"loaded_at"`
	// Runtime, Inputs, Outputs, Signature and Parameters are the model's
	// servables.Metadata; ByPosition, UnnamedOutputs and OutputsDeclared
	// its fields of the same names.
	Runtime         string                 `json:"runtime"`
	Inputs          []servables.TensorSpec `json:"inputs,omitempty"`
	Outputs         []servables.TensorSpec `json:"outputs,omitempty"`
	Signature       string                 `json:"signature,omitempty"`
	Parameters      map[string]string      `json:"parameters,omitempty"`
	ByPosition      bool                   `json:"by_position,omitempty"`
	UnnamedOutputs  bool                   `json:"unnamed_outputs,omitempty"`
	OutputsDeclared bool                   `json:"outputs_declared,omitempty"`
	// Replicas, MaxBatchRows and MaxQueueDelay are how its model actors
	// run on that node (actors.ModelServing).
	Replicas      int           `json:"replicas"`
	MaxBatchRows  int           `json:"max_batch_rows"`
	MaxQueueDelay time.Duration `json:"max_queue_delay_ns,omitempty"`
	// Newest is, for a versioned entry's path ("pcvr/"), the path of the
	// version it serves ("pcvr/3/"); empty for any other path.
	Newest string `json:"newest,omitempty"`
}

// Metadata returns the model's servables.Metadata.
func (m *ModelInfo) Metadata() servables.Metadata {
	return servables.Metadata{Runtime: m.Runtime, Inputs: m.Inputs, Outputs: m.Outputs, Signature: m.Signature,
		Parameters: m.Parameters, ByPosition: m.ByPosition, UnnamedOutputs: m.UnnamedOutputs, OutputsDeclared: m.OutputsDeclared}
}
