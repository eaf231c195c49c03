package oip

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"

	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"

	"github.com/groveml/grove/actors"
	"github.com/groveml/grove/api/oip/oippb"
	"github.com/groveml/grove/conf/modelconfig"
	"github.com/groveml/grove/routing"
	"github.com/groveml/grove/servables"
)

// ExtensionModelConfiguration is the name of Triton's model configuration
// extension (GET /v2/models/{name}[/versions/{v}]/config, gRPC ModelConfig).
const ExtensionModelConfiguration = "model_configuration"

// ExtensionStatistics is the name of Triton's statistics extension (GET
// /v2/models[/{name}[/versions/{v}]]/stats, gRPC ModelStatistics).
const ExtensionStatistics = "statistics"

// extensions are the OIP/Triton extensions Grove serves in full, listed in
// the server metadata over REST and gRPC alike (Triton lists the same ones
// on both). Triton's model_repository extension also loads and unloads
// models, which in Grove only the bucket config does, so it is not listed
// (the repository index is served all the same); nor are classification
// and the shared-memory extensions, whose parameters are refused.
var extensions = []string{ExtensionBinaryTensorData, ExtensionModelConfiguration, ExtensionStatistics}

// tritonBackend is Triton's backend name for a Grove runtime ("pytorch"
// for "torchscript", "onnxruntime" for "onnx"); any other runtime name is
// returned as it is.
func tritonBackend(runtime string) string {
	switch runtime {
	case "torchscript":
		return "pytorch"
	case "onnx":
		return "onnxruntime"
	}
	return runtime
}

// configDataType is the model configuration's data type of a Grove DType:
// "TYPE_" and the OIP datatype name (TYPE_INVALID where the runtime does
// not say).
func configDataType(dt servables.DType) oippb.DataType {
	name, ok := Datatype(dt)
	if !ok {
		return oippb.DataType_TYPE_INVALID
	}
	if name == "BYTES" {
		name = "STRING" // the one name that differs
	}
	return oippb.DataType(oippb.DataType_value["TYPE_"+name])
}

// configDims are a tensor's dims in the model configuration: its shape,
// less the first (batch) dimension when the model is batched, as Triton
// writes them. A shape the runtime does not know is [-1].
func configDims(shape []int64, batched bool) []int64 {
	switch {
	case shape == nil:
		return []int64{-1}
	case batched && len(shape) > 0:
		return shape[1:]
	}
	return shape
}

// modelConfig is Triton's model configuration of model version mv, served
// by a content of signature meta that runs as sv:
//
//   - name, and platform and backend in Triton's names of the runtime
//     (pytorch_libtorch and pytorch, onnxruntime_onnx and onnxruntime);
//   - max_batch_size: the rows dynamic batching puts in one call (the
//     entry's max_batch_rows, else the server's), 0 when the model is not
//     batched: max_batch_rows 1, or a signature whose tensors do not all
//     have a variable first dimension (a model that takes [1, 64] runs
//     batches of one row); with max_batch_size > 0, inputs and outputs
//     have dims without their first dimension;
//   - input and output: name, TYPE_* data type and dims from the signature;
//   - dynamic_batching when batched, with max_queue_delay_microseconds
//     from max_queue_delay_us;
//   - instance_group: one group of the model's replicas, KIND_CPU;
//   - version_policy: all, since Grove serves every version the model
//     config lists (modelConfigOf gives a versioned entry's versions its
//     version_policy);
//   - parameters: what else the runtime read from the model file
//     (servables.Metadata.Parameters: an XGBoost model's objective,
//     booster, num_trees, feature_names, best_iteration, ...), each a
//     string_value, as Triton's backends list theirs.
func modelConfig(mv routing.ModelVersion, meta servables.Metadata, sv actors.ModelServing) *oippb.ModelConfig {
	cfg := &oippb.ModelConfig{
		Name:     mv.Name,
		Platform: Platform(meta.Runtime),
		Backend:  tritonBackend(meta.Runtime),
		VersionPolicy: &oippb.ModelVersionPolicy{PolicyChoice: &oippb.ModelVersionPolicy_All_{
			All: &oippb.ModelVersionPolicy_All{}}},
		InstanceGroup: []*oippb.ModelInstanceGroup{{Name: mv.Name + "_0", Kind: oippb.ModelInstanceGroup_KIND_CPU,
			Count: int32(max(sv.Replicas, 1))}},
	}
	batched := sv.MaxBatchRows > 1 && batchable(meta)
	if batched {
		cfg.MaxBatchSize = int32(sv.MaxBatchRows)
		cfg.SchedulingChoice = &oippb.ModelConfig_DynamicBatching{DynamicBatching: &oippb.ModelDynamicBatching{
			MaxQueueDelayMicroseconds: uint64(sv.MaxQueueDelay.Microseconds())}}
	}
	for _, t := range meta.Inputs {
		cfg.Input = append(cfg.Input, &oippb.ModelInput{Name: t.Name, DataType: configDataType(t.DType), Dims: configDims(t.Shape, batched)})
	}
	for _, t := range meta.Outputs {
		cfg.Output = append(cfg.Output, &oippb.ModelOutput{Name: t.Name, DataType: configDataType(t.DType), Dims: configDims(t.Shape, batched)})
	}
	if len(meta.Parameters) > 0 {
		cfg.Parameters = make(map[string]*oippb.ModelParameter, len(meta.Parameters))
		for k, v := range meta.Parameters {
			cfg.Parameters[k] = &oippb.ModelParameter{StringValue: v}
		}
	}
	return cfg
}

// batchable reports whether every tensor of the signature whose shape is
// known has a variable first dimension, which batches of rows can fill.
func batchable(meta servables.Metadata) bool {
	for _, ts := range [...][]servables.TensorSpec{meta.Inputs, meta.Outputs} {
		for _, t := range ts {
			if t.Shape != nil && (len(t.Shape) == 0 || t.Shape[0] != -1) {
				return false
			}
		}
	}
	return true
}

// modelConfigOf is the configuration of model name at version ("" for the
// highest ready one), or an unknownModel error.
func modelConfigOf(b Backend, name, version string) (*oippb.ModelConfig, error) {
	mv, ok := routing.Resolve(b.ModelPaths(), b.NewestVersion, name, version)
	if !ok {
		return nil, unknownModel{name, version}
	}
	meta, _, loaded := b.ModelMetadata(mv.Path)
	sv, serving := b.ModelServing(mv.Path)
	if !loaded || !serving {
		return nil, unknownModel{name, version}
	}
	cfg := modelConfig(mv, meta, sv)
	for _, v := range b.Status().Versioned {
		if routing.NameModel(v.Path).Name == mv.Name {
			cfg.VersionPolicy = versionPolicy(v.Policy)
		}
	}
	return cfg, nil
}

// versionPolicy is Triton's version policy of a versioned entry's policy.
func versionPolicy(p modelconfig.VersionPolicy) *oippb.ModelVersionPolicy {
	switch p.Kind {
	case modelconfig.VersionsLatest:
		return &oippb.ModelVersionPolicy{PolicyChoice: &oippb.ModelVersionPolicy_Latest_{
			Latest: &oippb.ModelVersionPolicy_Latest{NumVersions: uint32(p.Latest)}}}
	case modelconfig.VersionsSpecific:
		return &oippb.ModelVersionPolicy{PolicyChoice: &oippb.ModelVersionPolicy_Specific_{
			Specific: &oippb.ModelVersionPolicy_Specific{Versions: p.Versions}}}
	}
	return &oippb.ModelVersionPolicy{PolicyChoice: &oippb.ModelVersionPolicy_All_{All: &oippb.ModelVersionPolicy_All{}}}
}

// AppendModelConfigJSON appends cfg as Triton's REST API writes a model
// configuration (appendTritonJSON), e.g. "data_type":"TYPE_FP32",
// "dims":[-1,64].
func AppendModelConfigJSON(dst []byte, cfg *oippb.ModelConfig) ([]byte, error) {
	return appendTritonJSON(dst, cfg)
}

// appendTritonJSON appends m as Triton's REST API writes its protobuf
// documents (model configuration, statistics): protobuf's JSON mapping
// with the proto field names, every scalar, list and map field written
// even when empty (enums by name), unset messages left out, and 64-bit
// integers as JSON numbers rather than the mapping's strings.
func appendTritonJSON(dst []byte, m proto.Message) ([]byte, error) {
	what := string(m.ProtoReflect().Descriptor().Name())
	b, err := protojson.MarshalOptions{UseProtoNames: true, EmitDefaultValues: true}.Marshal(m)
	if err != nil {
		return dst, fmt.Errorf("encoding %s: %w", what, err)
	}
	d := json.NewDecoder(bytes.NewReader(b))
	d.UseNumber()
	var doc map[string]any
	if err := d.Decode(&doc); err != nil {
		return dst, fmt.Errorf("re-reading %s JSON: %w", what, err)
	}
	int64sAsNumbers(doc, m.ProtoReflect().Descriptor())
	out, err := json.Marshal(doc)
	if err != nil {
		return dst, fmt.Errorf("writing %s JSON: %w", what, err)
	}
	return append(dst, out...), nil
}

// int64sAsNumbers turns the strings protojson writes for the 64-bit
// integer fields of obj (a message of type md, decoded) into numbers, in
// nested messages, lists and map values too.
func int64sAsNumbers(obj map[string]any, md protoreflect.MessageDescriptor) {
	for key, v := range obj {
		fd := md.Fields().ByName(protoreflect.Name(key))
		if fd == nil {
			continue
		}
		switch {
		case fd.IsMap():
			if m, ok := v.(map[string]any); ok {
				for k, e := range m {
					m[k] = fixValue(e, fd.MapValue())
				}
			}
		case fd.IsList():
			if l, ok := v.([]any); ok {
				for i, e := range l {
					l[i] = fixValue(e, fd)
				}
			}
		default:
			obj[key] = fixValue(v, fd)
		}
	}
}

// fixValue is one decoded value of field fd (an element, for a list or
// map) with 64-bit integers as numbers.
func fixValue(v any, fd protoreflect.FieldDescriptor) any {
	switch fd.Kind() {
	case protoreflect.Int64Kind, protoreflect.Sint64Kind, protoreflect.Sfixed64Kind,
		protoreflect.Uint64Kind, protoreflect.Fixed64Kind:
		if s, ok := v.(string); ok {
			if _, err := strconv.ParseFloat(s, 64); err == nil {
				return json.Number(s)
			}
		}
	case protoreflect.MessageKind:
		if m, ok := v.(map[string]any); ok {
			int64sAsNumbers(m, fd.Message())
		}
	}
	return v
}

// config serves GET /v2/models/{name}[/versions/{v}]/config.
func (a *rest) config(w http.ResponseWriter, name, version string) {
	cfg, err := modelConfigOf(a.b, name, version)
	if err != nil {
		fail(w, err)
		return
	}
	body, err := AppendModelConfigJSON(nil, cfg)
	if err != nil {
		writeError(w, http.StatusInternalServerError, err.Error())
		return
	}
	write(w, http.StatusOK, body)
}
