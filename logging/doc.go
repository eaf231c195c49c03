// Package logging is Grove's prediction log: it decides which model
// executions are logged (Policy), turns them into grove.v1.PredictionEvent
// records (TensorsToProto) and produces them to Kafka without ever
// blocking the request that made them (Producer). It also runs the
// in-process development broker (EmbeddedOptions.Start: in memory, or on
// disk for an in-process evaluator, see WithEvaluator) and reads the
// records back for consumers (Decode, TensorsFromProto). Produce lends its Kafka client
// to records that must be acknowledged before their caller answers (the
// outcomes of package logging/outcome).
//
// The schema and the record layout (key, headers, encodings) are
// documented for consumers in grovepb/proto/grove/v1/prediction_event.proto.
//
// Typical use, on the request path:
//
//	if policy.Decide(nil) {
//		producer.Log(&grovepb.PredictionEvent{
//			RequestId: id, Api: "ba", ModelPath: path, Served: true,
//			Inputs: logging.TensorsToProto(in), Outputs: logging.TensorsToProto(out),
//			Configs: configs,
//		}, policy.Key(configs))
//	}
package logging
