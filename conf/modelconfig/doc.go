// Package modelconfig is the model config kept in the bucket, the models
// to serve and the contracts that route traffic among them, and what is
// kept beside it: the types (Config, Model, Contract, ContractServable and
// their settings), Parse, which decodes the file (grove.v1.ModelConfig in
// protobuf's JSON mapping) and validates it, the canonical JSON a config
// is written back in (Config.MarshalJSON), the edits the management API
// makes (CreateContract, UpdateContract, AddServable, SetPolicy,
// SetLogging, RemoveServable, then Validate), and the contract state the
// replicas share (ContractState, StatePath, MetricsUpdate). The management
// API's documents are read by package forestflow, with the limits and
// defaults exported here (MaxReplicas and the other Max constants,
// DefaultLogging, ValidateMetrics) and the readers of the values the
// config file and the documents share (DecodeOutcomes, ParseRange). It
// does no I/O; every error of a document read is an *Error.
package modelconfig
